//! The server: shared state, the accept loop and graceful shutdown.

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use jsproto::wire::Info;
use rand::Rng;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{info, warn};

use crate::account::{Account, Accounts};
use crate::auth::Authenticator;
use crate::connection::outbound::CloseReason;
use crate::connection::{self, Connection};
use crate::options::ServerOptions;
use crate::router::Counters;

/// The NATS server version this server reports in INFO and `/varz`.
///
/// Clients gate features on it (nats.go and nats-py pick the modern consumer-create subjects
/// from 2.9 on; nats.js enables pause and priority groups from 2.11), so it names the
/// nats-server release whose features we have rather than our own crate version: 2.14, the
/// release that added consumer reset (prioritized priority groups came with 2.12). The 2.12+
/// stream features we lack (counters, atomic and fast batches, schedules) are refused with an
/// API error when asked for, not ignored. `-v` prints the same number
/// ([`VERSION`](crate::cli::VERSION)).
pub const NATS_VERSION: &str = "2.14.0";

/// How long shutdown waits for connections to flush before giving up.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// State shared by every task of one running server.
pub struct Server {
    /// The options in force: the start-up ones until a reload replaces them
    /// ([`Server::set_options`]).
    opts: std::sync::RwLock<Arc<ServerOptions>>,
    /// Counts the option swaps of reloads: a connection compares it with the value it last
    /// saw to take the new limits (`max_payload`, `ping_interval`, ...) without a lock.
    options_generation: AtomicU64,
    server_id: String,
    server_name: String,
    accounts: Accounts,
    counters: Arc<Counters>,
    conns: Mutex<HashMap<u64, Arc<Connection>>>,
    next_cid: AtomicU64,
    total_connections: AtomicU64,
    start: SystemTime,
    client_addr: Mutex<Option<SocketAddr>>,
    /// The WebSocket listener's address, once bound.
    websocket_addr: Mutex<Option<SocketAddr>>,
    /// The monitoring listener's address, once bound (for the ports file).
    monitor_addr: Mutex<Option<SocketAddr>>,
    shutdown: CancellationToken,
    auth: std::sync::RwLock<Arc<Authenticator>>,
    system: Option<crate::system::System>,
    /// Set once lame-duck mode starts ([`Server::lame_duck`]).
    lame_duck: AtomicBool,
    /// Cancelled by lame-duck mode: the accept loop stops and closes the listener.
    stop_accepting: CancellationToken,
    /// Cancelled by the accept loop once the listener is closed.
    accept_stopped: CancellationToken,
    /// The cluster, once started ([`crate::cluster::Cluster::start`]).
    cluster: std::sync::OnceLock<Arc<crate::cluster::Cluster>>,
    /// A clustered JetStream's meta group, once started.
    meta: std::sync::OnceLock<Arc<crate::jetstream::meta::MetaState>>,
}

impl Server {
    /// A server with these options; nothing is bound yet.
    pub fn new(opts: ServerOptions) -> Arc<Self> {
        let server_id = new_server_id();
        let server_name = opts
            .server_name
            .clone()
            .unwrap_or_else(|| server_id.clone());
        let counters = Arc::new(Counters::default());
        let accounts = Accounts::new(&opts.auth, &counters);
        let system = accounts
            .get(&opts.auth.system_account)
            .map(|a| crate::system::System::new(Arc::clone(a)));
        let server = Arc::new(Server {
            server_id,
            server_name,
            accounts,
            system,
            counters,
            conns: Mutex::new(HashMap::new()),
            next_cid: AtomicU64::new(1),
            total_connections: AtomicU64::new(0),
            start: SystemTime::now(),
            client_addr: Mutex::new(None),
            websocket_addr: Mutex::new(None),
            monitor_addr: Mutex::new(None),
            shutdown: CancellationToken::new(),
            auth: std::sync::RwLock::new(Arc::new(Authenticator::new(&opts.auth))),
            lame_duck: AtomicBool::new(false),
            stop_accepting: CancellationToken::new(),
            accept_stopped: CancellationToken::new(),
            cluster: std::sync::OnceLock::new(),
            meta: std::sync::OnceLock::new(),
            opts: std::sync::RwLock::new(Arc::new(opts)),
            options_generation: AtomicU64::new(0),
        });
        if let Some(system) = &server.system {
            system.start(&server);
        }
        server
    }

    /// The system account's events and requests, when `system_account` is configured.
    pub fn system(&self) -> Option<&crate::system::System> {
        self.system.as_ref()
    }

    /// The cluster this server is in, once started (with a `cluster` block or `--cluster`).
    pub fn cluster(&self) -> Option<&Arc<crate::cluster::Cluster>> {
        self.cluster.get()
    }

    /// What a clustered JetStream's meta group applied (leader, members, assignments).
    pub fn meta(&self) -> Option<&Arc<crate::jetstream::meta::MetaState>> {
        self.meta.get()
    }

    pub(crate) fn set_meta(&self, meta: Arc<crate::jetstream::meta::MetaState>) {
        let _ = self.meta.set(meta);
    }

    pub(crate) fn set_cluster(&self, cluster: Arc<crate::cluster::Cluster>) {
        let _ = self.cluster.set(cluster);
    }

    /// The options in force: those of start-up, or of the last reload that was applied.
    /// Read them where they are used rather than keeping a copy, so that a reload reaches
    /// what comes next (the next accepted connection, the next INFO, `/varz`).
    pub fn options(&self) -> Arc<ServerOptions> {
        Arc::clone(&self.opts.read().expect("options lock poisoned"))
    }

    /// Puts reloaded options in force ([`crate::reload`]) and bumps
    /// [`Server::options_generation`]. The settings read at accept time (TLS, INFO,
    /// `max_connections`) apply from the next connection on; the connections' own limits are
    /// taken up by their reader and writer once they see the new generation.
    pub fn set_options(&self, opts: ServerOptions) {
        *self.opts.write().expect("options lock poisoned") = Arc::new(opts);
        self.options_generation.fetch_add(1, Ordering::Release);
    }

    /// How many times reloaded options were put in force (see [`Server::set_options`]).
    pub fn options_generation(&self) -> u64 {
        self.options_generation.load(Ordering::Acquire)
    }

    /// Decides who may connect (and with which permissions): the authenticator of the
    /// config loaded last ([`Server::apply_auth`]).
    pub fn auth(&self) -> Arc<Authenticator> {
        Arc::clone(&self.auth.read().expect("auth lock poisoned"))
    }

    /// The users and permissions in force (those of the last reload, else of start-up).
    pub fn current_auth(&self) -> crate::auth::config::AuthOptions {
        self.options().auth.clone()
    }

    /// Whether a reloaded config's users and permissions (`new`) can be applied over those in
    /// force: they pass validation, and the accounts themselves (their set, JetStream,
    /// exports, imports, limits) and the system account are unchanged, which take a restart.
    ///
    /// # Errors
    /// Why not; nothing is changed either way. A changed system account gets nats-server's
    /// `config reload not supported for SystemAccount: old=<old>, new=<new>`.
    pub fn check_auth_reload(&self, new: &crate::auth::config::AuthOptions) -> Result<(), String> {
        new.validate()?;
        let current = self.options();
        let old = &current.auth;
        if old.system_account != new.system_account {
            return Err(format!(
                "config reload not supported for SystemAccount: old={}, new={}",
                old.system_account, new.system_account
            ));
        }
        let shape = |o: &crate::auth::config::AuthOptions| {
            let mut accounts: Vec<_> = o
                .accounts
                .iter()
                .map(|a| {
                    (
                        a.name.clone(),
                        a.jetstream.clone(),
                        a.exports.clone(),
                        a.imports.clone(),
                        a.limits,
                    )
                })
                .collect();
            accounts.sort_by(|a, b| a.0.cmp(&b.0));
            accounts
        };
        if shape(old) != shape(new) {
            return Err(
                "accounts changed: that takes a restart (the users and permissions \
                        of a reload may change, the accounts themselves may not)"
                    .into(),
            );
        }
        Ok(())
    }

    /// Applies the users, passwords, tokens, nkeys and permissions of the options in force
    /// after a reload (nats-server's `reloadAuthorization`; checked first with
    /// [`Server::check_auth_reload`], then put in force with [`Server::set_options`]): every
    /// logged-in client is decided again with its own CONNECT (or its certificate, with
    /// `verify_and_map`), and
    /// - one no longer allowed gets `-ERR 'Authorization Violation'` and is closed;
    /// - one whose user moved to another account is closed;
    /// - the others keep their connection with the new permissions: a subscription the new
    ///   permissions do not allow is removed with `-ERR 'Permissions Violation for
    ///   Subscription to "<subject>" (sid "<sid>")'`, the rest take the new delivery rules.
    ///
    /// Returns how many clients were closed. Runs bcrypt checks: call it off the async
    /// workers.
    pub fn apply_auth(&self) -> usize {
        let opts = self.options();
        let auth = Arc::new(Authenticator::new(&opts.auth));
        *self.auth.write().expect("auth lock poisoned") = Arc::clone(&auth);
        let map_certs = opts.tls.as_ref().is_some_and(|t| t.map);
        let mut closed = 0;
        for conn in self.connections() {
            if !conn.reauthenticate(&auth, map_certs) {
                closed += 1;
            }
        }
        closed
    }

    /// Closes clients until no more than `max` are connected (a reload lowered
    /// `max_connections`), the most recent first, each with `-ERR 'maximum connections
    /// exceeded'` as nats-server's `maxConnExceeded`. Returns how many were closed.
    pub fn enforce_max_connections(&self, max: usize) -> usize {
        let clients = self.connections();
        let over = clients.len().saturating_sub(max);
        for conn in clients.iter().rev().take(over) {
            conn.close_max_connections_exceeded();
        }
        over
    }

    /// Every account (the global one included).
    pub fn accounts(&self) -> &Accounts {
        &self.accounts
    }

    /// The global account `$G`: every client's account when no `accounts` are configured.
    pub fn global_account(&self) -> &Arc<Account> {
        self.accounts.global()
    }

    /// The server-wide traffic counters (`/varz`), which every account's router counts into.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// The server's id: 56 upper-case characters starting with `N`, like a nats-server id.
    pub fn server_id(&self) -> &str {
        &self.server_id
    }

    /// `server_name`, which defaults to the id as in nats-server.
    pub fn server_name(&self) -> &str {
        &self.server_name
    }

    /// When the server started.
    pub fn start_time(&self) -> SystemTime {
        self.start
    }

    /// The address client connections are accepted on, once bound.
    pub fn client_addr(&self) -> Option<SocketAddr> {
        *self.client_addr.lock().expect("addr lock poisoned")
    }

    /// The address WebSocket clients are accepted on, once bound (with a `websocket` block).
    pub fn websocket_addr(&self) -> Option<SocketAddr> {
        *self.websocket_addr.lock().expect("addr lock poisoned")
    }

    /// The address monitoring (`http_port`/`https_port`) listens on, once bound.
    pub fn monitor_addr(&self) -> Option<SocketAddr> {
        *self.monitor_addr.lock().expect("addr lock poisoned")
    }

    /// Records where monitoring listens (for a ports file written by a reload).
    pub fn set_monitor_addr(&self, addr: SocketAddr) {
        *self.monitor_addr.lock().expect("addr lock poisoned") = Some(addr);
    }

    /// JetStream's usage counters of every account whose JetStream runs.
    pub fn jetstream_stats(&self) -> Vec<Arc<crate::jetstream::JsStats>> {
        self.accounts
            .iter()
            .filter_map(|a| a.jetstream_stats().cloned())
            .collect()
    }

    /// Cancelled when the server shuts down.
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }

    /// Connections accepted since start.
    pub fn total_connections(&self) -> u64 {
        self.total_connections.load(Ordering::Relaxed)
    }

    /// A snapshot of the live connections, ordered by id.
    pub fn connections(&self) -> Vec<Arc<Connection>> {
        let mut v: Vec<_> = self
            .conns
            .lock()
            .expect("conns lock poisoned")
            .values()
            .cloned()
            .collect();
        v.sort_by_key(|c| c.handle.id);
        v
    }

    /// Adds a live connection; returns how many are live now, this one included.
    pub(crate) fn register(&self, conn: Arc<Connection>) -> usize {
        self.total_connections.fetch_add(1, Ordering::Relaxed);
        let mut conns = self.conns.lock().expect("conns lock poisoned");
        conns.insert(conn.handle.id, conn);
        conns.len()
    }

    pub(crate) fn unregister(&self, id: u64) {
        self.conns.lock().expect("conns lock poisoned").remove(&id);
    }

    /// The INFO sent to client `client_id` connecting from `peer`, with `nonce` for nkey
    /// users to sign (when nkeys are configured).
    pub fn info_for(&self, client_id: u64, peer: SocketAddr, nonce: Option<String>) -> Info {
        let addr = self.client_addr();
        let opts = self.options();
        Info {
            server_id: self.server_id.clone(),
            server_name: self.server_name.clone(),
            version: NATS_VERSION.to_owned(),
            proto: 1,
            go: format!("jsserver {}", env!("CARGO_PKG_VERSION")),
            host: addr.map_or_else(|| opts.host.clone(), |a| a.ip().to_string()),
            port: addr.map_or(opts.port, |a| a.port()),
            headers: true,
            max_payload: opts.max_payload as u64,
            jetstream: opts.jetstream,
            client_id: Some(client_id),
            client_ip: Some(peer.ip().to_string()),
            api_lvl: opts.jetstream.then_some(jsproto::api::API_LEVEL),
            auth_required: self.auth().info_auth_required(),
            nonce,
            // As nats-server: the cluster's client URLs (this server's too), so clients
            // fail over to the other nodes.
            cluster: self.cluster().map(|c| c.name().to_string()),
            connect_urls: self.cluster().map(|c| c.client_urls()),
            ..Info::default()
        }
    }

    /// Accepts clients on `listener` (and WebSocket clients on `websocket`, with the
    /// options' `websocket` block) until `shutdown` completes, then closes every connection
    /// after flushing what is queued for it (nats-server's graceful stop, without lame duck).
    ///
    /// # Errors
    /// Only when a listener's address cannot be read.
    pub async fn run(
        self: &Arc<Self>,
        listener: TcpListener,
        websocket: Option<TcpListener>,
        shutdown: impl Future<Output = ()>,
    ) -> std::io::Result<()> {
        *self.client_addr.lock().expect("addr lock poisoned") = Some(listener.local_addr()?);
        if let Some(ws) = &websocket {
            *self.websocket_addr.lock().expect("addr lock poisoned") = Some(ws.local_addr()?);
        }
        let tracker = TaskTracker::new();
        let serve = async {
            // Returns (the listeners closed) only in lame-duck mode; the clients stay.
            tokio::join!(
                self.accept_loop(listener, &tracker),
                self.accept_websocket_loop(websocket, &tracker),
            );
            self.accept_stopped.cancel();
            std::future::pending::<()>().await;
        };
        tokio::select! {
            () = serve => {}
            () = shutdown => {}
            () = self.shutdown.cancelled() => {}
        }
        self.shutdown.cancel();
        tracker.close();
        if tokio::time::timeout(SHUTDOWN_GRACE, tracker.wait())
            .await
            .is_err()
        {
            warn!(grace = ?SHUTDOWN_GRACE, "connections still open at exit");
        }
        info!("Server Exiting..");
        Ok(())
    }

    /// Asks a running server to stop, as a signal would.
    pub fn shutdown(&self) {
        self.shutdown.cancel();
    }

    /// Whether lame-duck mode has started.
    pub fn in_lame_duck(&self) -> bool {
        self.lame_duck.load(Ordering::Relaxed)
    }

    /// Lame-duck mode (SIGUSR2), as nats-server's: stop accepting clients (the listener is
    /// closed, so a new connection is refused), stop JetStream (`stop_jetstream`: streams
    /// flush and sync their stores, waiting pulls get their status), then send every client
    /// that takes asynchronous INFOs one with `"ldm":true`, wait `lame_duck_grace_period`,
    /// close the clients one by one spread over the rest of `lame_duck_duration` (at most a
    /// second apart), and shut the server down. Without clients it shuts down at once. Does
    /// nothing when already in lame-duck mode or shutting down.
    pub async fn lame_duck(self: &Arc<Self>, stop_jetstream: impl Future<Output = ()>) {
        if self.shutdown.is_cancelled() || self.lame_duck.swap(true, Ordering::SeqCst) {
            return;
        }
        info!("Entering lame duck mode, stop accepting new clients");
        self.stop_accepting.cancel();
        stop_jetstream.await;
        tokio::select! {
            () = self.accept_stopped.cancelled() => {}
            () = self.shutdown.cancelled() => return,
        }
        let clients = self.connections();
        if clients.is_empty() {
            info!("Initiating Shutdown...");
            self.shutdown.cancel();
            return;
        }
        let opts = self.options();
        let grace = opts.lame_duck_grace_period;
        let plan = CloseSpread::new(opts.lame_duck_duration.saturating_sub(grace), clients.len());
        for conn in &clients {
            if conn.async_info.load(Ordering::Relaxed) {
                let mut info = self.info_for(conn.handle.id, conn.peer, None);
                info.ldm = true;
                conn.handle
                    .outbound
                    .push(|buf| jsproto::wire::encode_info(buf, &info));
            }
        }
        tokio::select! {
            () = tokio::time::sleep(grace) => info!("Closing existing clients"),
            () = self.shutdown.cancelled() => return,
        }
        for (i, conn) in clients.iter().enumerate() {
            conn.handle.outbound.close(CloseReason::Normal);
            if i + 1 == clients.len() {
                break;
            }
            if let Some(pause) = plan.pause_after(i) {
                tokio::select! {
                    () = tokio::time::sleep(pause) => {}
                    () = self.shutdown.cancelled() => return,
                }
            }
        }
        info!("Initiating Shutdown...");
        self.shutdown.cancel();
    }

    async fn accept_loop(self: &Arc<Self>, listener: TcpListener, tracker: &TaskTracker) {
        loop {
            let accepted = tokio::select! {
                () = self.stop_accepting.cancelled() => break,
                accepted = listener.accept() => accepted,
            };
            match accepted {
                Ok((socket, peer)) => {
                    let id = self.next_cid.fetch_add(1, Ordering::Relaxed);
                    tracker.spawn(connection::serve(Arc::clone(self), socket, peer, id));
                }
                Err(err) => {
                    // Out of file descriptors and the like: back off briefly, keep serving.
                    warn!(error = %err, "error accepting client connection");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
        drop(listener);
    }

    /// Accepts WebSocket clients (when there is a listener) until lame-duck mode.
    async fn accept_websocket_loop(
        self: &Arc<Self>,
        listener: Option<TcpListener>,
        tracker: &TaskTracker,
    ) {
        let options = self.options();
        let (Some(listener), Some(opts)) = (listener, &options.websocket) else {
            return;
        };
        let ws = Arc::new(connection::websocket::WsListener::new(
            opts,
            options.max_payload,
        ));
        loop {
            let accepted = tokio::select! {
                () = self.stop_accepting.cancelled() => break,
                accepted = listener.accept() => accepted,
            };
            match accepted {
                Ok((socket, peer)) => {
                    let id = self.next_cid.fetch_add(1, Ordering::Relaxed);
                    tracker.spawn(connection::serve_websocket(
                        Arc::clone(self),
                        Arc::clone(&ws),
                        socket,
                        peer,
                        id,
                    ));
                }
                Err(err) => {
                    warn!(error = %err, "error accepting websocket connection");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    }
}

/// How lame-duck mode spreads closing `clients` over `duration` (nats-server's plan): a pause
/// of `duration / clients`, at most a second, after each close (after every `batch`-th when
/// there are more clients than nanoseconds); each pause is random between half of that and
/// all of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct CloseSpread {
    interval: Duration,
    batch: usize,
}

impl CloseSpread {
    fn new(duration: Duration, clients: usize) -> Self {
        let duration = if duration.is_zero() {
            Duration::from_secs(1)
        } else {
            duration
        };
        let nanos = duration.as_nanos();
        let per_client = nanos / clients.max(1) as u128;
        if per_client < 1 {
            return CloseSpread {
                interval: Duration::from_nanos(1),
                batch: usize::try_from(clients as u128 / nanos).unwrap_or(usize::MAX),
            };
        }
        CloseSpread {
            interval: Duration::from_nanos(u64::try_from(per_client).unwrap_or(u64::MAX))
                .min(Duration::from_secs(1)),
            batch: 1,
        }
    }

    /// The pause after closing client `i` (0-based), if any.
    fn pause_after(&self, i: usize) -> Option<Duration> {
        if self.batch != 1 && i % self.batch != 0 {
            return None;
        }
        let max = self.interval.as_nanos() as u64;
        let pick = rand::rng().random_range(0..max.max(1));
        Some(Duration::from_nanos(pick.max(max / 2)))
    }
}

/// A random id in nats-server's shape: `N` and 55 characters of the base32 alphabet.
fn new_server_id() -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
    let mut rng = rand::rng();
    let mut id = String::with_capacity(56);
    id.push('N');
    for _ in 0..55 {
        id.push(ALPHABET[rng.random_range(0..ALPHABET.len())] as char);
    }
    id
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_spread_is_nats_servers() {
        let s = CloseSpread::new(Duration::from_secs(29), 2);
        assert_eq!(s.interval, Duration::from_secs(1));
        assert_eq!(s.batch, 1);
        let s = CloseSpread::new(Duration::from_secs(10), 40);
        assert_eq!(s.interval, Duration::from_millis(250));
        let p = s.pause_after(3).unwrap();
        assert!(
            p >= Duration::from_millis(125) && p < Duration::from_millis(250),
            "{p:?}"
        );
        assert_eq!(
            CloseSpread::new(Duration::ZERO, 1).interval,
            Duration::from_secs(1)
        );
        let s = CloseSpread::new(Duration::from_nanos(2), 10);
        assert_eq!((s.interval, s.batch), (Duration::from_nanos(1), 5));
        assert_eq!(s.pause_after(1), None);
        assert!(s.pause_after(5).is_some());
    }
}
