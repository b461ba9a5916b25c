//! One client connection: a reader task that decodes and applies ops, a writer task that drains
//! the connection's outbound buffer.
//!
//! ```text
//!  socket ──read──▶ ServerCodec ──ClientOp──▶ apply ──route──▶ Router ──encode──▶ Outbound(s)
//!  socket ◀──one write per burst── writer task ◀──────────── Outbound (this connection's)
//! ```
//!
//! Protocol rules follow nats-server as recorded in `shared/reference/nats-protocol.md`:
//! verbose `+OK`, the `-ERR` texts and which of them close the connection, PING/PONG keepalive
//! with `ping_interval`/`ping_max`, slow consumers closed without an `-ERR`.
//!
//! Files:
//! - this module: the connection as the server's registry sees it ([`Connection`]) and
//!   [`serve`], which takes an accepted socket to its two tasks and unregisters it at the end;
//! - `reader`: the reader task and the per-connection protocol state;
//! - `read_buffer`: the reader's buffer, sized to the traffic;
//! - `idle_spin`: whether the reader spins before it blocks for its client's next bytes;
//! - `writer`: the writer task;
//! - `transport`: the socket halves the reader and writer use, a plain client's TCP socket or
//!   the server's end of a TLS client's bridge;
//! - `tls`: a TLS client's INFO, handshake and bridge;
//! - [`outbound`]: the bounded outbound buffer producers encode into (slow consumers).

mod idle_spin;
pub mod outbound;
mod read_buffer;
mod reader;
mod tls;
mod transport;
mod writer;

use std::net::SocketAddr;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use jsproto::wire::encode_err;
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;
use tracing::debug;

use crate::router::ClientHandle;
use crate::server::Server;
use outbound::CloseReason;
use reader::Reader;
use writer::write_loop;

/// What a client told us in CONNECT, kept for `/connz`.
#[derive(Debug, Clone, Default)]
pub struct ClientInfo {
    /// CONNECT `name`.
    pub name: String,
    /// CONNECT `lang`.
    pub lang: String,
    /// CONNECT `version`.
    pub version: String,
}

/// A live connection as the server's registry sees it (for `/connz` and shutdown).
#[derive(Debug)]
pub struct Connection {
    /// The routing side: id, outbound buffer, counters, subscriptions.
    pub handle: Arc<ClientHandle>,
    /// The peer's address.
    pub peer: SocketAddr,
    /// When the connection was accepted.
    pub start: SystemTime,
    /// Filled in by CONNECT.
    pub info: Mutex<ClientInfo>,
    /// Unix time in nanoseconds of the last op received.
    pub last_activity_ns: AtomicU64,
}

/// Serves one accepted socket until it closes; registers and unregisters it with `server`.
pub async fn serve(server: Arc<Server>, socket: TcpStream, peer: SocketAddr, id: u64) {
    let _ = socket.set_nodelay(true);
    let opts = server.options();
    let conn = Arc::new(Connection {
        handle: Arc::new(ClientHandle::new(id, opts.max_pending)),
        peer,
        start: SystemTime::now(),
        info: Mutex::new(ClientInfo::default()),
        last_activity_ns: AtomicU64::new(unix_nanos(SystemTime::now())),
    });
    let live = server.register(Arc::clone(&conn));
    debug!(cid = id, %peer, "client connection created");

    let nonce = server
        .auth()
        .nonce_required()
        .then(crate::auth::Authenticator::new_nonce);
    let info = server.info_for(id, peer, nonce.clone());
    let (read_half, write_half, cert, bridge) = match &opts.tls {
        None => {
            let (r, w) = transport::split_tcp(socket);
            conn.handle
                .outbound
                .push(|buf| jsproto::wire::encode_info(buf, &info));
            (r, w, None, None)
        }
        Some(tls_opts) => {
            let over_limit = live > opts.max_connections;
            match tls::establish(tls_opts, socket, peer, id, &info, over_limit).await {
                Some(est) => (est.read, est.write, est.cert, est.bridge),
                None => {
                    server.unregister(id);
                    return;
                }
            }
        }
    };
    let write_half = Arc::new(write_half);
    conn.handle.outbound.attach(Arc::clone(&write_half));
    let done = CancellationToken::new();
    if live > opts.max_connections {
        // As nats-server: the INFO, then the error, then the close.
        conn.handle
            .outbound
            .push(|buf| encode_err(buf, "maximum connections exceeded"));
        conn.handle.outbound.close(CloseReason::ProtocolError);
        let handle = Arc::clone(&conn.handle);
        write_loop(
            Arc::clone(&server),
            handle,
            peer,
            write_half,
            opts.write_deadline,
            done,
        )
        .await;
        server.unregister(id);
        return;
    }

    let writer = tokio::spawn(write_loop(
        Arc::clone(&server),
        Arc::clone(&conn.handle),
        peer,
        write_half,
        opts.write_deadline,
        done.clone(),
    ));

    let mut reader = Reader::new(Arc::clone(&server), Arc::clone(&conn), nonce, cert);
    let reason = reader.run(read_half, &done).await;
    // Messages routed by this client's last ops still need their receivers woken.
    reader.flush_wakes();
    server.router().remove_connection(&conn.handle);
    conn.handle.outbound.close(reason);
    let _ = writer.await;
    if let Some(bridge) = bridge {
        // A TLS client's last bytes are still in the bridge: let it deliver them (shutdown
        // waits for this task), within the write deadline.
        let _ = tokio::time::timeout(opts.write_deadline, bridge).await;
    }
    server.unregister(id);
    debug!(cid = id, %peer, ?reason, "client connection closed");
}

/// Nanoseconds since the Unix epoch (0 before it).
pub fn unix_nanos(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}
