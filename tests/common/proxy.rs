//! A fault-injecting TCP proxy for cluster tests: it listens on a free loopback port and
//! forwards every connection to a target port, until [`Proxy::cut`] closes every live
//! connection and makes it close each new one at once; [`Proxy::heal`] lets connections
//! through again. Plain threads (two per forwarded connection), so that it keeps forwarding
//! whatever the test's async runtime is doing.
//!
//! Put a proxy between every pair of nodes (each route a node dials goes to a proxy of
//! its own for that peer) and cutting the proxies of one node isolates it from the others
//! while its clients, connected straight to its client port, stay connected.
#![allow(dead_code)] // each test binary uses a different part of this module

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long forwarding waits to connect to the target before it gives the connection up.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// A TCP proxy from a free loopback port to `127.0.0.1:<target>`; stops (and closes its
/// connections) on drop.
pub struct Proxy {
    /// The port it listens on.
    pub port: u16,
    /// The port it forwards to.
    pub target: u16,
    shared: Arc<Shared>,
}

#[derive(Default)]
struct Shared {
    /// The live forwarded connections (both sockets of each), and whether the proxy is cut:
    /// one lock, so that a connection accepted while `cut` runs is either closed by it or
    /// sees the cut.
    state: Mutex<State>,
    /// Set on drop: the accept loop ends.
    stopped: AtomicBool,
    /// Connections forwarded so far (accepted while not cut and connected to the target).
    forwarded: AtomicU64,
    /// Connections closed at once because the proxy was cut.
    refused: AtomicU64,
}

#[derive(Default)]
struct State {
    cut: bool,
    next_id: u64,
    conns: Vec<(u64, TcpStream, TcpStream)>,
}

impl Proxy {
    /// Starts a proxy to `127.0.0.1:target`, forwarding (not cut).
    pub fn start(target: u16) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind proxy");
        let port = listener.local_addr().expect("proxy addr").port();
        let shared = Arc::new(Shared::default());
        let accept_shared = Arc::clone(&shared);
        std::thread::Builder::new()
            .name(format!("proxy-{port}"))
            .spawn(move || accept_loop(&listener, target, &accept_shared))
            .expect("spawn proxy thread");
        Proxy {
            port,
            target,
            shared,
        }
    }

    /// Starts a proxy that is cut from the start: it holds its port and closes every
    /// connection (an address that leads nowhere, but is never taken by anything else).
    pub fn start_cut(target: u16) -> Proxy {
        let proxy = Proxy::start(target);
        proxy.cut();
        proxy
    }

    /// Closes every live connection (both ends, at once) and every new one from now on.
    pub fn cut(&self) {
        let conns = {
            let mut st = self.shared.state.lock().expect("proxy lock");
            st.cut = true;
            std::mem::take(&mut st.conns)
        };
        for (_, a, b) in conns {
            let _ = a.shutdown(Shutdown::Both);
            let _ = b.shutdown(Shutdown::Both);
        }
    }

    /// Forwards new connections again.
    pub fn heal(&self) {
        self.shared.state.lock().expect("proxy lock").cut = false;
    }

    /// Whether it is cut.
    pub fn is_cut(&self) -> bool {
        self.shared.state.lock().expect("proxy lock").cut
    }

    /// How many connections it forwarded so far.
    pub fn forwarded(&self) -> u64 {
        self.shared.forwarded.load(Ordering::Relaxed)
    }

    /// How many connections it closed at once because it was cut.
    pub fn refused(&self) -> u64 {
        self.shared.refused.load(Ordering::Relaxed)
    }

    /// How many forwarded connections are open now.
    pub fn live(&self) -> usize {
        self.shared.state.lock().expect("proxy lock").conns.len()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.shared.stopped.store(true, Ordering::SeqCst);
        self.cut();
        // Wake the accept loop blocked in accept().
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

fn accept_loop(listener: &TcpListener, target: u16, shared: &Arc<Shared>) {
    for incoming in listener.incoming() {
        if shared.stopped.load(Ordering::SeqCst) {
            return;
        }
        let Ok(client) = incoming else {
            std::thread::sleep(Duration::from_millis(10));
            continue;
        };
        if shared.state.lock().expect("proxy lock").cut {
            refuse(shared, &client);
            continue;
        }
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], target));
        let Ok(server) = TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT) else {
            let _ = client.shutdown(Shutdown::Both);
            continue;
        };
        let _ = client.set_nodelay(true);
        let _ = server.set_nodelay(true);
        let (Ok(c2), Ok(s2), Ok(c3), Ok(s3)) = (
            client.try_clone(),
            server.try_clone(),
            client.try_clone(),
            server.try_clone(),
        ) else {
            continue;
        };
        let id = {
            let mut st = shared.state.lock().expect("proxy lock");
            if st.cut {
                drop(st);
                let _ = server.shutdown(Shutdown::Both);
                refuse(shared, &client);
                continue;
            }
            st.next_id += 1;
            let id = st.next_id;
            st.conns.push((id, c3, s3));
            id
        };
        shared.forwarded.fetch_add(1, Ordering::Relaxed);
        let up = Arc::clone(shared);
        let down = Arc::clone(shared);
        let _ = std::thread::Builder::new()
            .name("proxy-up".into())
            .spawn(move || pump(client, server, id, &up));
        let _ = std::thread::Builder::new()
            .name("proxy-down".into())
            .spawn(move || pump(s2, c2, id, &down));
    }
}

fn refuse(shared: &Shared, client: &TcpStream) {
    shared.refused.fetch_add(1, Ordering::Relaxed);
    let _ = client.shutdown(Shutdown::Both);
}

/// Copies `from` to `to` until either side ends, then closes both and forgets the
/// connection.
fn pump(mut from: TcpStream, mut to: TcpStream, id: u64, shared: &Shared) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        }
    }
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
    shared
        .state
        .lock()
        .expect("proxy lock")
        .conns
        .retain(|(i, _, _)| *i != id);
}
