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
//! - [`websocket`]: a WebSocket client's TLS, HTTP upgrade and frame bridge;
//! - [`outbound`]: the bounded outbound buffer producers encode into (slow consumers).

mod idle_spin;
pub mod outbound;
mod read_buffer;
mod reader;
pub(crate) mod tls;
pub(crate) mod transport;
pub mod websocket;
pub(crate) mod writer;
mod ws_frames;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use jsproto::wire::{encode_err, Connect};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info};

use crate::account::Account;
use crate::auth::perms::{ClientPerms, Replies};
use crate::auth::{Authenticator, ConnectionType};
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
    /// Who the client authenticated as, as `/connz?auth=1` shows it (nats-server's
    /// `authorized_user`): the nkey, the user name, or `[REDACTED]` for a token; empty without
    /// authentication.
    pub authorized_user: String,
}

/// A client's permissions and its `allow_responses` reply rules, as a reload set them.
pub(crate) type ReloadedPerms = (Option<Arc<ClientPerms>>, Option<Arc<Replies>>);

/// A live connection as the server's registry sees it (for `/connz` and shutdown).
#[derive(Debug)]
pub struct Connection {
    /// The routing side: id, outbound buffer, counters, subscriptions.
    pub handle: Arc<ClientHandle>,
    /// The peer's address.
    pub peer: SocketAddr,
    /// How the client reached the server (its listener): what a user's
    /// `allowed_connection_types` is checked against.
    pub kind: ConnectionType,
    /// When the connection was accepted.
    pub start: SystemTime,
    /// Filled in by CONNECT.
    pub info: Mutex<ClientInfo>,
    /// Unix time in nanoseconds of the last op received.
    pub last_activity_ns: AtomicU64,
    /// The account the client works in (the global account until a CONNECT says otherwise).
    account: Mutex<Arc<Account>>,
    /// The client logged in (its CONNECT was accepted): its disconnect is an event too.
    logged_in: AtomicBool,
    /// The client's CONNECT options (merged) and the INFO nonce: what a config reload
    /// decides the client by again.
    login: Mutex<(Connect, String)>,
    /// With `verify_and_map`: the client certificate's names (set after the handshake), by
    /// which a reload decides the client again too.
    cert: Mutex<Option<Arc<crate::tls::identity::CertNames>>>,
    /// Permissions a config reload gave the client, for its reader to take
    /// ([`Connection::perms_generation`]).
    reloaded: Mutex<ReloadedPerms>,
    perms_generation: AtomicU64,
    /// The client takes asynchronous INFOs (such as lame-duck mode's): it sent a CONNECT with
    /// `protocol` 1 and then a PING that was answered, as nats-server requires.
    pub async_info: AtomicBool,
    /// The text of the last `-ERR` the reader sent: why a protocol error closed the
    /// connection, for a WebSocket client's close frame.
    last_err: Mutex<Option<String>>,
}

impl Connection {
    /// The account the client works in now.
    pub fn account(&self) -> Arc<Account> {
        Arc::clone(&self.account.lock().expect("account lock poisoned"))
    }

    pub(crate) fn set_account(&self, account: Arc<Account>) {
        *self.account.lock().expect("account lock poisoned") = account;
    }

    /// Marks the client logged in; true the first time.
    pub(crate) fn log_in(&self) -> bool {
        !self.logged_in.swap(true, Ordering::Relaxed)
    }

    /// Undoes [`Connection::log_in`] (the account had no room for it).
    pub(crate) fn log_out(&self) {
        self.logged_in.store(false, Ordering::Relaxed);
    }

    /// Whether the client logged in (and counts in its account's connections).
    pub fn is_logged_in(&self) -> bool {
        self.logged_in.load(Ordering::Relaxed)
    }

    /// Records what the client logged in with (its merged CONNECT).
    pub(crate) fn set_login(&self, connect: &Connect) {
        self.login.lock().expect("login lock poisoned").0 = connect.clone();
    }

    /// Records the `-ERR` text just sent to the client.
    pub(crate) fn set_last_err(&self, text: &str) {
        *self.last_err.lock().expect("last_err lock poisoned") = Some(text.to_owned());
    }

    /// Bumped by each config reload that gave the client new permissions.
    pub(crate) fn perms_generation(&self) -> u64 {
        self.perms_generation.load(Ordering::Acquire)
    }

    /// The permissions (and reply rules) of the latest reload.
    pub(crate) fn reloaded_perms(&self) -> ReloadedPerms {
        self.reloaded.lock().expect("perms lock poisoned").clone()
    }

    /// Closes the client because a reload lowered `max_connections` below the number
    /// connected ([`Server::enforce_max_connections`]): `-ERR 'maximum connections
    /// exceeded'`, then the close, as nats-server's `maxConnExceeded`.
    pub(crate) fn close_max_connections_exceeded(&self) {
        self.handle
            .outbound
            .push(|buf| encode_err(buf, "maximum connections exceeded"));
        self.set_last_err("maximum connections exceeded");
        self.handle.outbound.close(CloseReason::ProtocolError);
    }

    /// Decides the client again under a reloaded config ([`Server::apply_auth`]); false when
    /// that closed it (its credentials no longer pass: `-ERR 'Authorization Violation'`; its
    /// user is gone or moved to another account: closed without a word, as nats-server).
    pub(crate) fn reauthenticate(&self, auth: &Authenticator, map_certs: bool) -> bool {
        if !self.is_logged_in() {
            // Not in yet: its CONNECT will be decided under the new config.
            return true;
        }
        let (connect, nonce) = self.login.lock().expect("login lock poisoned").clone();
        let account = self.account();
        let named = [&connect.nkey, &connect.user]
            .into_iter()
            .find_map(|s| s.as_deref().filter(|s| !s.is_empty()));
        // verify_and_map is the client port's (the WebSocket listener refuses it).
        let by_cert =
            map_certs && self.kind == ConnectionType::Standard && auth.maps_certs(&connect);
        if !by_cert && named.is_some_and(|name| !auth.knows(name)) {
            // As nats-server: a user that no longer exists has "moved account".
            self.handle.outbound.close(CloseReason::Normal);
            return false;
        }
        let decided = if by_cert {
            let cert = self.cert.lock().expect("cert lock poisoned").clone();
            auth.authenticate_cert(cert.as_deref(), self.kind)
        } else {
            auth.authenticate(&connect, &nonce, self.kind)
        };
        match decided {
            Err(why) => {
                error!(
                    "{} - cid:{} - authentication error - not allowed after a config reload",
                    self.peer, self.handle.id
                );
                debug!(
                    cid = self.handle.id,
                    reason = why.0,
                    "reload refused the client"
                );
                self.handle
                    .outbound
                    .push(|buf| encode_err(buf, "Authorization Violation"));
                self.handle.outbound.close(CloseReason::ProtocolError);
                false
            }
            Ok(identity) if identity.account != *account.name() => {
                self.handle.outbound.close(CloseReason::Normal);
                false
            }
            Ok(identity) => {
                self.apply_perms(&account, identity.perms);
                true
            }
        }
    }

    /// New permissions for a client that stays: its reader takes them before its next op;
    /// subscriptions they no longer allow are removed (each with nats-server's `-ERR`), the
    /// others get the new delivery rules.
    fn apply_perms(&self, account: &Account, perms: Option<Arc<ClientPerms>>) {
        let replies = perms.as_ref().and_then(Replies::for_perms);
        *self.reloaded.lock().expect("perms lock poisoned") = (perms.clone(), replies.clone());
        self.perms_generation.fetch_add(1, Ordering::AcqRel);
        let router = account.router();
        for (sid, subject, queue) in crate::router::Router::client_subs(&self.handle) {
            let allowed = perms
                .as_ref()
                .is_none_or(|p| p.subscribe_allowed(&subject, queue.as_deref()));
            if allowed {
                let delivery = crate::router::DeliveryPerms::for_sub(
                    perms.as_ref(),
                    replies.as_ref(),
                    &subject,
                    queue.as_deref(),
                );
                router.replace_delivery_perms(&self.handle, &sid, delivery);
                continue;
            }
            router.unsubscribe(&self.handle, &sid, None);
            let (subject, sid) = (
                String::from_utf8_lossy(&subject),
                String::from_utf8_lossy(&sid),
            );
            let text = match &queue {
                Some(q) => format!(
                    "Permissions Violation for Subscription to {subject:?} using queue {:?} (sid {sid:?})",
                    String::from_utf8_lossy(q)
                ),
                None => format!("Permissions Violation for Subscription to {subject:?} (sid {sid:?})"),
            };
            info!(
                "Removed sub {subject:?} (sid {sid:?}) for cid:{} - not authorized",
                self.handle.id
            );
            self.handle.outbound.push(|buf| encode_err(buf, &text));
        }
        self.handle.outbound.flush();
    }
}

/// An accepted client, before INFO.
enum Accepted {
    /// On the client port (plain or TLS, as configured).
    Tcp(TcpStream),
    /// On the WebSocket port, upgraded.
    WebSocket(websocket::Upgraded),
}

/// Serves one socket accepted on the client port until it closes; registers and unregisters
/// it with `server`.
pub async fn serve(server: Arc<Server>, socket: TcpStream, peer: SocketAddr, id: u64) {
    let _ = socket.set_nodelay(true);
    serve_accepted(server, Accepted::Tcp(socket), peer, id).await;
}

/// Serves one socket accepted on the WebSocket port: TLS (if configured) and the HTTP
/// upgrade, then the protocol as on the client port, in binary frames.
pub async fn serve_websocket(
    server: Arc<Server>,
    ws: Arc<websocket::WsListener>,
    socket: TcpStream,
    peer: SocketAddr,
    id: u64,
) {
    let _ = socket.set_nodelay(true);
    if let Some(upgraded) = websocket::upgrade(&ws, socket, peer).await {
        serve_accepted(server, Accepted::WebSocket(upgraded), peer, id).await;
    }
}

async fn serve_accepted(server: Arc<Server>, accepted: Accepted, peer: SocketAddr, id: u64) {
    let opts = server.options();
    let nonce = server
        .auth()
        .nonce_required()
        .then(crate::auth::Authenticator::new_nonce);
    let kind = match accepted {
        Accepted::Tcp(_) => ConnectionType::Standard,
        Accepted::WebSocket(_) => ConnectionType::Websocket,
    };
    let conn = Arc::new(Connection {
        handle: Arc::new(ClientHandle::new(id, opts.max_pending)),
        peer,
        kind,
        start: SystemTime::now(),
        info: Mutex::new(ClientInfo::default()),
        last_activity_ns: AtomicU64::new(unix_nanos(SystemTime::now())),
        account: Mutex::new(Arc::clone(server.global_account())),
        logged_in: AtomicBool::new(false),
        login: Mutex::new((Connect::default(), nonce.clone().unwrap_or_default())),
        cert: Mutex::new(None),
        reloaded: Mutex::new((None, None)),
        perms_generation: AtomicU64::new(0),
        async_info: AtomicBool::new(false),
        last_err: Mutex::new(None),
    });
    let live = server.register(Arc::clone(&conn));
    debug!(cid = id, %peer, "client connection created");

    let mut info = server.info_for(id, peer, nonce.clone());
    let (read_half, write_half, cert, bridge, ws_close) = match accepted {
        Accepted::WebSocket(upgraded) => {
            // As nats-server: the INFO names the WebSocket listener's address.
            if let Some(addr) = server.websocket_addr() {
                info.host = addr.ip().to_string();
                info.port = addr.port();
            }
            conn.handle
                .outbound
                .push(|buf| jsproto::wire::encode_info(buf, &info));
            (
                upgraded.read,
                upgraded.write,
                None,
                Some(upgraded.bridge),
                Some(upgraded.close),
            )
        }
        Accepted::Tcp(socket) => match &opts.tls {
            None => {
                let (r, w) = transport::split_tcp(socket);
                conn.handle
                    .outbound
                    .push(|buf| jsproto::wire::encode_info(buf, &info));
                (r, w, None, None, None)
            }
            Some(tls_opts) => {
                let over_limit = live > opts.max_connections;
                match tls::establish(tls_opts, socket, peer, id, &info, over_limit).await {
                    Some(est) => (est.read, est.write, est.cert, est.bridge, None),
                    None => {
                        server.unregister(id);
                        return;
                    }
                }
            }
        },
    };
    let set_ws_close = |reason: CloseReason| {
        if let Some(close) = &ws_close {
            let last_err = conn
                .last_err
                .lock()
                .expect("last_err lock poisoned")
                .clone();
            *close.lock().expect("close lock poisoned") = websocket::close_status(
                reason,
                last_err.as_deref(),
                server.shutdown_token().is_cancelled(),
            );
        }
    };
    *conn.cert.lock().expect("cert lock poisoned") = cert.clone();
    let write_half = Arc::new(write_half);
    conn.handle.outbound.attach(Arc::clone(&write_half));
    let done = CancellationToken::new();
    if live > opts.max_connections {
        // As nats-server: the INFO, then the error, then the close.
        conn.handle
            .outbound
            .push(|buf| encode_err(buf, "maximum connections exceeded"));
        conn.set_last_err("maximum connections exceeded");
        set_ws_close(CloseReason::ProtocolError);
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
        finish_bridge(bridge, opts.write_deadline).await;
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
    let account = conn.account();
    account.router().remove_connection(&conn.handle);
    if conn.is_logged_in() {
        account.remove_connection();
    }
    set_ws_close(reason);
    conn.handle.outbound.close(reason);
    let _ = writer.await;
    // A TLS or WebSocket client's last bytes are still in the bridge (shutdown waits for
    // this task).
    finish_bridge(bridge, opts.write_deadline).await;
    server.unregister(id);
    // As nats-server (removeClient, then the account's disconnect event): whoever hears of
    // the disconnect no longer finds the client among the server's connections.
    if conn.is_logged_in() {
        if let Some(system) = server.system() {
            system.client_disconnected(&server, &conn, reason);
        }
    }
    debug!(cid = id, %peer, ?reason, "client connection closed");
}

/// Lets a TLS or WebSocket client's bridge deliver the last bytes the server wrote, within
/// `deadline`; then ends it, which closes the client's socket. A client that does not read
/// (a slow consumer) would otherwise hold its bridge, socket and buffered bytes for as long as
/// it stays connected, out of the server's sight: dropping a `JoinHandle` does not stop its
/// task. nats-server closes such a socket at once.
async fn finish_bridge(bridge: Option<tokio::task::JoinHandle<()>>, deadline: Duration) {
    if let Some(mut bridge) = bridge {
        if tokio::time::timeout(deadline, &mut bridge).await.is_err() {
            bridge.abort();
        }
    }
}

/// Nanoseconds since the Unix epoch (0 before it).
pub fn unix_nanos(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}
