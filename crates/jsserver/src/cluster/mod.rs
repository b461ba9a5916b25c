//! Core NATS across a cluster of jsserver nodes: route connections between servers, interest
//! propagation and message forwarding, and the carriage of JetStream's Raft messages (`RAFT`
//! ops) between the members of the meta group and of each replicated stream's group (see
//! `docs/cluster.md`).
//!
//! - [`config`]: the `cluster { }` block and the cluster flags.
//! - [`raftlog`]: the durable Raft log (raft-rs's `Storage`) of one Raft group.
//! - [`group`]: one server's member of a Raft group (raft-rs's `RawNode` over its
//!   [`raftlog::RaftLog`]), driven by the meta thread or a replicated stream's owner.
//! - [`Cluster`]: one per server. It accepts routes on the cluster listener, dials the
//!   configured routes (for ever, 1 s apart) and those its peers tell it of (gossip, retried
//!   `connect_retries` times), keeps one route per peer (of two routes between the same pair,
//!   both ends keep the one dialed by the server with the smaller id:
//!   [`jsproto::cluster::keep_route`]), and drops a route to itself.
//! - Each route is a reader task (this module) and the client connections' writer task and
//!   bounded [`crate::connection::outbound::Outbound`] buffer. Ops and framing are
//!   `jsproto::cluster` (`HELLO`, `RS+`/`RS-`, `RMSG`, `DMSG`, `RAFT`, `PING`/`PONG`, `-ERR`).
//! - Interest: every account's [`Router`](crate::router::Router) tells the cluster of its
//!   local client subscriptions ([`crate::router::InterestHook`]); the first subscription of
//!   an (account, subject, queue group) is announced to every route with `RS+`, the last one
//!   going with `RS-` ([`jsproto::cluster::LocalInterest`]), and a new route gets them all at
//!   once. A peer's interest is a [`crate::router::RouteSub`] in the same router, so one
//!   lookup finds local subscribers and the routes to send to: `RMSG` once per route, with
//!   the queue groups that route's server was chosen for (a local member first). A message
//!   from a route goes to local client subscriptions only (one hop), except a queue group
//!   message no local member can take any more: one other server with members gets it
//!   ([`crate::router::FromRoute`]).
//!
//! The system account's requests (`$SYS.REQ.SERVER.…`) are cluster-wide
//! ([`crate::system::System::join_cluster`]). Not across the cluster (yet): account imports
//! and exports act on the messages published on their own server only (their internal
//! subscriptions are not announced to peers, and messages from routes do not reach them).

pub mod config;
pub mod group;
pub mod raftlog;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use bytes::{Bytes, BytesMut};
use jsproto::cluster::{
    encode_hello, encode_ping, encode_pong, encode_route_err, encode_rs, keep_route, Hello,
    InterestKey, LocalInterest, RemoteInterest, RouteCodec, RouteOp,
};
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};
use tokio_util::codec::Decoder;
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info, warn};

use crate::connection::outbound::CloseReason;
use crate::connection::transport::{split_tcp, ReadHalf};
use crate::connection::unix_nanos;
use crate::router::{ClientHandle, FromRoute, InterestHook, RouteScratch, RouteSub, RoutedMsg};
use crate::server::Server;
use config::{join_host_port, ClusterOptions};

/// How long a new route has to send its `HELLO` before it is closed.
const HELLO_TIMEOUT: Duration = Duration::from_secs(5);
/// The pause between two attempts to dial a route: 1 s, as nats-server's
/// `DEFAULT_ROUTE_CONNECT`.
const RECONNECT_DELAY: Duration = Duration::from_secs(1);
/// How long one dial may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// The read buffer's growth step, in bytes.
const READ_CHUNK: usize = 64 * 1024;

/// One server's part of the cluster: its routes and the interest it announced.
pub struct Cluster {
    name: String,
    opts: ClusterOptions,
    server_id: String,
    server_name: String,
    listen_addr: SocketAddr,
    client_addr: SocketAddr,
    state: Mutex<State>,
    next_rid: AtomicU64,
    /// Whether this server runs JetStream (said in `HELLO`).
    jetstream: bool,
    /// This server's placement tags (`server_tags`, said in `HELLO`).
    tags: Vec<String>,
    /// The local members of Raft groups, by group name: where `RAFT` messages go.
    raft: Mutex<HashMap<Bytes, Arc<dyn RaftInbox>>>,
    /// Whether this server is a member of a formed meta group (said in `HELLO`).
    meta_formed: std::sync::atomic::AtomicBool,
    /// The runtime the route tasks run on (a Raft message sent in parts is paced by a task
    /// of its own; Raft messages are sent from stream threads).
    runtime: tokio::runtime::Handle,
    /// The largest Raft message sent as one `RAFT` op; larger ones go in `RAFTP` parts of
    /// this size ([`RAFT_PART_BYTES`], or `JSSERVER_RAFT_PART_BYTES`).
    part_bytes: usize,
    /// (peer, group) pairs with a Raft message being sent in parts: one at a time.
    parts_inflight: Arc<Mutex<HashSet<(String, String)>>>,
    /// Raft messages sent in parts and done, by group: (peer, every part went out).
    parts_done: Arc<Mutex<PartsDone>>,
}

/// Raft messages sent in parts and done: by group, (peer, every part went out).
type PartsDone = HashMap<String, Vec<(String, bool)>>;

/// How [`Cluster::send_raft_tracked`] sent a Raft message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sent {
    /// As one `RAFT` op.
    Whole,
    /// In `RAFTP` parts, by a task of its own: [`Cluster::take_parts_done`] says when it
    /// is done.
    Parts,
    /// Not sent (no route to the peer, too large, or one in parts being sent to it already).
    NotSent,
}

/// The size of the parts a large Raft message (a snapshot with a stream's messages) is sent
/// in over a route, and the largest sent whole (8 MiB). `JSSERVER_RAFT_PART_BYTES` sets
/// another (at least 1 KiB; tests use small parts to send small snapshots in parts).
pub const RAFT_PART_BYTES: usize = 8 << 20;

/// The largest Raft message sent or taken in `RAFTP` parts (1 GiB): it is held in memory
/// while it is sent and while it is received. A snapshot's data file is not such a message:
/// it goes in `RAFTS` parts read from and written to disk ([`Cluster::send_snapshot_file`]);
/// only a snapshot with its data inline (written by a build before data files) still goes
/// in `RAFTP` parts.
pub const MAX_RAFT_PARTS_TOTAL: usize = 1 << 30;

/// A part is sent once the route's outbound buffer holds less than this many parts' worth,
/// so a snapshot never fills a route's buffer (a full one closes the route).
const PARTS_AHEAD: usize = 2;

/// The largest `RAFT` op or `RAFTP` part sent over a route: what a peer's route reader
/// takes (`jsproto::cluster`'s 64 MiB), less room for the op's line.
pub const MAX_RAFT_MSG: usize = (64 << 20) - 1024;

/// The most bytes of snapshot parts queued for one group's owner and not yet written
/// (256 MiB): past it, parts are dropped (the transfer breaks at the gap, and the leader
/// sends the snapshot again later), so a slow owner never holds a snapshot in memory.
pub const MAX_QUEUED_PART_BYTES: usize = 256 << 20;

/// Bytes of a snapshot's data file (`RAFTS`) queued for a group's owner, counted against
/// [`MAX_QUEUED_PART_BYTES`] until the owner drops them.
#[derive(Debug)]
pub struct SnapshotPart {
    /// Where in the file they go.
    pub offset: u64,
    /// The bytes.
    pub data: Bytes,
    queued: Arc<std::sync::atomic::AtomicUsize>,
}

impl Drop for SnapshotPart {
    fn drop(&mut self) {
        self.queued
            .fetch_sub(self.data.len(), std::sync::atomic::Ordering::Relaxed);
    }
}

/// Counts the snapshot parts queued for one group's owner ([`SnapshotPart`]).
#[derive(Debug, Clone)]
pub struct PartQueue(Arc<std::sync::atomic::AtomicUsize>, usize);

impl Default for PartQueue {
    fn default() -> Self {
        PartQueue::with_limit(MAX_QUEUED_PART_BYTES)
    }
}

impl PartQueue {
    /// A queue that holds at most `limit` bytes of parts (tests use small ones).
    pub fn with_limit(limit: usize) -> Self {
        PartQueue(Arc::default(), limit)
    }

    /// The part, counted; `None` (dropped, with a warning) past [`MAX_QUEUED_PART_BYTES`].
    pub fn admit(&self, offset: u64, data: Bytes) -> Option<SnapshotPart> {
        use std::sync::atomic::Ordering;
        let before = self.0.fetch_add(data.len(), Ordering::Relaxed);
        let part = SnapshotPart {
            offset,
            data,
            queued: Arc::clone(&self.0),
        };
        if before + part.data.len() > self.1 {
            warn!(
                offset,
                queued = before,
                "snapshot parts queued past the bound: part dropped"
            );
            return None;
        }
        Some(part)
    }
}

/// Waits until `outbound` holds less than [`PARTS_AHEAD`] parts of `part` bytes (or closed):
/// a message in parts never fills a route's buffer (a full one closes the route).
async fn wait_for_room(outbound: &crate::connection::outbound::Outbound, part: usize) {
    while outbound.pending_bytes() > PARTS_AHEAD * part && !outbound.is_closed() {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// Sends `len` bytes of `file` over `route` as `RAFTS` parts of `part` bytes, each once the
/// route's buffer has room; false when the route closed or the file could not be read.
async fn send_file_parts(
    route: &Route,
    group: &str,
    mut file: std::fs::File,
    len: u64,
    part: usize,
) -> bool {
    use std::io::Read;
    let outbound = &route.handle.outbound;
    let mut offset = 0u64;
    let mut buf = vec![0u8; part];
    while offset < len {
        wait_for_room(outbound, part).await;
        let want = part.min(usize::try_from(len - offset).unwrap_or(part));
        let read = tokio::task::block_in_place(|| file.read_exact(&mut buf[..want]));
        if let Err(err) = read {
            warn!(group, error = %err, "reading a snapshot's data file");
            return false;
        }
        let chunk = &buf[..want];
        if !outbound
            .push(|b| jsproto::cluster::encode_snapshot_part(b, group.as_bytes(), offset, chunk))
        {
            return false;
        }
        route.handle.counters.count_out(want);
        offset += want as u64;
    }
    true
}

/// A local member of a Raft group, as the routes see it: takes the group's `RAFT` messages
/// from peers. Called on a route's reader task: must be quick and must not block (queue the
/// message for the member's own thread).
pub trait RaftInbox: Send + Sync {
    /// One encoded Raft message from a peer's member of the group.
    fn deliver(&self, data: Bytes);
    /// Bytes of a snapshot's data file a peer's member sends (`RAFTS`), `offset` bytes into
    /// it; the Raft message of the snapshot comes after the last of them.
    fn deliver_snapshot_part(&self, offset: u64, data: Bytes);
}

/// Another server of the cluster, as its route's `HELLO` said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    /// Its `server_name`.
    pub name: String,
    /// Its server id.
    pub id: String,
    /// Whether it runs JetStream.
    pub jetstream: bool,
    /// Its placement tags (`server_tags`, trimmed and lower-cased).
    pub tags: Vec<String>,
    /// Whether it was a member of a formed meta group when the route was made.
    pub meta: bool,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("name", &self.name)
            .field("listen_addr", &self.listen_addr)
            .finish_non_exhaustive()
    }
}

#[derive(Default)]
struct State {
    /// The local client subscriptions, counted per (account, subject, queue group).
    local: LocalInterest,
    /// Registered routes (their `HELLO` accepted), by rid.
    routes: BTreeMap<u64, Arc<Route>>,
    /// URLs with a dial task.
    dialing: HashSet<String>,
    /// URLs found to lead to this server itself, and the route URLs it advertised.
    own_urls: HashSet<String>,
    /// The server id met at each dialed URL.
    url_ids: HashMap<String, String>,
    /// The placement tags of every server met since start, by name (kept when its route
    /// closes: the meta leader tells a tag no server has from a server that is down).
    known_tags: BTreeMap<String, Vec<String>>,
}

/// One route connection to another server.
pub struct Route {
    /// The connection's outbound buffer and traffic counters; `id` is the route's `rid`.
    handle: Arc<ClientHandle>,
    peer: SocketAddr,
    /// This end's address (what this server advertises on the route is derived from it).
    local: SocketAddr,
    start: SystemTime,
    /// When the connection was made (dialed or accepted), before its `HELLO`.
    created: Instant,
    /// When it was registered (its peer's `HELLO` read and accepted); unset before.
    registered_at: OnceLock<Instant>,
    /// The URL this server dialed, or `None` for an accepted route.
    dialed: Option<String>,
    /// Dialed because configured (`routes`, `--routes`), not learned from a peer.
    configured: bool,
    /// The peer's `HELLO` (the last one it sent).
    hello: Mutex<Hello>,
    /// The interest the peer announced, as route subscribers in the account routers.
    interest: Mutex<RemoteInterest<Arc<RouteSub>>>,
    last_activity_ns: AtomicU64,
    /// Cancelled to close the route (a duplicate, shutdown).
    stop: CancellationToken,
}

/// A route as `/routez` shows it (nats-server's field names).
#[derive(Debug, Clone, serde::Serialize)]
pub struct RouteInfo {
    /// The route's id on this server.
    pub rid: u64,
    /// The peer's server id.
    pub remote_id: String,
    /// The peer's server name.
    pub remote_name: String,
    /// This server dialed it.
    pub did_solicit: bool,
    /// Dialed because configured (not learned from a peer).
    pub is_configured: bool,
    /// The peer's IP address.
    pub ip: String,
    /// The peer's port (of this connection).
    pub port: u16,
    /// When the route was established.
    #[serde(skip)]
    pub start: SystemTime,
    /// When it last received bytes.
    #[serde(skip)]
    pub last_activity: SystemTime,
    /// Bytes waiting in its outbound buffer.
    pub pending_size: usize,
    /// Messages received from the peer.
    pub in_msgs: u64,
    /// Messages sent to the peer.
    pub out_msgs: u64,
    /// Bytes (headers and payloads) received.
    pub in_bytes: u64,
    /// Bytes sent.
    pub out_bytes: u64,
    /// How many interests the peer announced.
    pub subscriptions: usize,
    /// The subjects of those interests (`/routez?subs=1`).
    #[serde(skip)]
    pub subscriptions_list: Vec<String>,
}

/// The hook each account router calls on local subscription changes.
struct AccountInterest {
    cluster: Arc<Cluster>,
    account: Bytes,
}

impl InterestHook for AccountInterest {
    fn local_interest(&self, subject: &Bytes, queue: Option<&Bytes>, added: bool) {
        let key = InterestKey::new(self.account.clone(), subject.clone(), queue.cloned());
        self.cluster.local_change(&key, added);
    }
}

/// Why a route ended, for the log.
enum Ending {
    Closed(&'static str),
    Refused(String),
}

impl Cluster {
    /// Starts the cluster of `server`: routes accepted on `listener`, the configured routes
    /// dialed, every account router's local interest announced. Call it after the client
    /// listener is bound (`client_addr`, what peers give their clients) and before clients
    /// are accepted. Tasks end when the server shuts down.
    pub fn start(
        server: &Arc<Server>,
        opts: &ClusterOptions,
        listener: TcpListener,
        client_addr: SocketAddr,
    ) -> std::io::Result<Arc<Cluster>> {
        let listen_addr = listener.local_addr()?;
        let cluster = Arc::new(Cluster {
            name: opts.name().to_string(),
            opts: opts.clone(),
            server_id: server.server_id().to_string(),
            server_name: server.server_name().to_string(),
            listen_addr,
            client_addr,
            state: Mutex::new(State::default()),
            next_rid: AtomicU64::new(1),
            jetstream: server.options().jetstream,
            tags: server.options().server_tags.clone(),
            raft: Mutex::new(HashMap::new()),
            meta_formed: std::sync::atomic::AtomicBool::new(false),
            runtime: tokio::runtime::Handle::current(),
            part_bytes: std::env::var("JSSERVER_RAFT_PART_BYTES")
                .ok()
                .and_then(|v| v.parse::<usize>().ok())
                .map_or(RAFT_PART_BYTES, |n| n.clamp(1024, MAX_RAFT_MSG)),
            parts_inflight: Arc::new(Mutex::new(HashSet::new())),
            parts_done: Arc::new(Mutex::new(HashMap::new())),
        });
        for account in server.accounts().iter() {
            let hook = Arc::new(AccountInterest {
                cluster: Arc::clone(&cluster),
                account: Bytes::copy_from_slice(account.name().as_bytes()),
            });
            account.router().set_interest_hook(hook);
        }
        // The system account's requests serve the whole cluster (announced before any route
        // registers, so every route is told of them).
        if let Some(system) = server.system() {
            system.join_cluster(server);
        }
        server.set_cluster(Arc::clone(&cluster));
        tokio::spawn(Arc::clone(&cluster).accept_loop(Arc::clone(server), listener));
        for url in &opts.routes {
            cluster.dial(server, url, true);
        }
        Ok(cluster)
    }

    /// The cluster's name (`cluster { name }`, `--cluster_name`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The address routes are accepted on.
    pub fn listen_addr(&self) -> SocketAddr {
        self.listen_addr
    }

    /// The configured routes, as `host:port`.
    pub fn configured_routes(&self) -> &[String] {
        &self.opts.routes
    }

    /// The client URLs of the cluster, `host:port`, sorted: this server's and those its
    /// peers announced (INFO `connect_urls`, `/varz` `connect_urls`).
    pub fn client_urls(&self) -> Vec<String> {
        let mut urls = vec![advertised(self.client_addr, None)];
        let st = self.state.lock().expect("cluster lock poisoned");
        for r in st.routes.values() {
            urls.extend(
                r.hello
                    .lock()
                    .expect("hello lock")
                    .connect_urls
                    .iter()
                    .cloned(),
            );
        }
        urls.sort();
        urls.dedup();
        urls
    }

    /// This server's `server_name`.
    pub fn server_name(&self) -> &str {
        &self.server_name
    }

    /// The servers this one has a route to now, by name (each once).
    pub fn peers(&self) -> Vec<Peer> {
        let st = self.state.lock().expect("cluster lock poisoned");
        let mut peers: Vec<Peer> = st
            .routes
            .values()
            .map(|r| {
                let h = r.hello.lock().expect("hello lock");
                Peer {
                    name: h.server_name.clone(),
                    id: h.server_id.clone(),
                    jetstream: h.jetstream,
                    tags: h.tags.clone(),
                    meta: h.meta,
                }
            })
            .collect();
        peers.sort_by(|a, b| a.name.cmp(&b.name));
        peers.dedup_by(|a, b| a.name == b.name);
        peers
    }

    /// This server's placement tags (`server_tags`, trimmed and lower-cased).
    pub fn tags(&self) -> &[String] {
        &self.tags
    }

    /// The placement tags of this server and of every server it has met since it started
    /// (routed now or not), by server name.
    pub fn known_tags(&self) -> BTreeMap<String, Vec<String>> {
        let mut known = self
            .state
            .lock()
            .expect("cluster lock poisoned")
            .known_tags
            .clone();
        known.insert(self.server_name.clone(), self.tags.clone());
        known
    }

    /// Makes `inbox` the local member of Raft group `group`: the `RAFT` messages peers send
    /// for it go there (replacing an earlier member).
    pub fn register_raft(&self, group: &str, inbox: Arc<dyn RaftInbox>) {
        self.raft
            .lock()
            .expect("raft lock poisoned")
            .insert(Bytes::copy_from_slice(group.as_bytes()), inbox);
    }

    /// Forgets the local member of `group`: its messages are dropped from now on.
    pub fn unregister_raft(&self, group: &str) {
        self.raft
            .lock()
            .expect("raft lock poisoned")
            .remove(group.as_bytes());
    }

    /// The local member of Raft group `group` (where its messages from peers go).
    fn raft_inbox(&self, group: &[u8]) -> Option<Arc<dyn RaftInbox>> {
        self.raft
            .lock()
            .expect("raft lock poisoned")
            .get(group)
            .cloned()
    }

    /// Sends one Raft message of `group` to the server named `to`, over its route. False
    /// when there is no route to it now (Raft retries by itself: a lost message is a
    /// message delayed).
    pub fn send_raft(&self, to: &str, group: &str, data: &[u8]) -> bool {
        self.send_raft_tracked(to, group, data) != Sent::NotSent
    }

    /// The Raft messages of `group` sent in parts since the last call, as (peer, whether
    /// every part went out): the group reports its snapshots' fate to Raft with them.
    pub fn take_parts_done(&self, group: &str) -> Vec<(String, bool)> {
        self.parts_done
            .lock()
            .expect("parts lock poisoned")
            .remove(group)
            .unwrap_or_default()
    }

    /// [`Cluster::send_raft`], saying how it went.
    pub fn send_raft_tracked(&self, to: &str, group: &str, data: &[u8]) -> Sent {
        if data.len() > MAX_RAFT_PARTS_TOTAL {
            warn!(
                group,
                to,
                bytes = data.len(),
                "raft message larger than a route takes: not sent"
            );
            return Sent::NotSent;
        }
        match self.route_named(to) {
            Some(r) if data.len() > self.part_bytes => {
                if self.send_raft_parts(r, to, group, data) {
                    Sent::Parts
                } else {
                    Sent::NotSent
                }
            }
            Some(r) => {
                r.handle
                    .outbound
                    .push(|b| jsproto::cluster::encode_raft(b, group.as_bytes(), data));
                r.handle.counters.count_out(data.len());
                Sent::Whole
            }
            None => Sent::NotSent,
        }
    }

    /// Sends a large Raft message (a snapshot) as `RAFTP` parts, each once the route's
    /// buffer has room for it, from a task of its own; the peer puts them back together.
    /// False (not sent: Raft sends it again later) when one is already being sent to `to`
    /// for `group`.
    fn send_raft_parts(&self, route: Arc<Route>, to: &str, group: &str, data: &[u8]) -> bool {
        let data = Bytes::copy_from_slice(data);
        let part = self.part_bytes;
        let (bytes, parts) = (data.len(), data.len().div_ceil(part));
        let group_name = group.to_string();
        let send = async move {
            let outbound = &route.handle.outbound;
            for (i, chunk) in data.chunks(part).enumerate() {
                wait_for_room(outbound, part).await;
                let more = i + 1 < parts;
                let group = group_name.as_bytes();
                if !outbound.push(|b| jsproto::cluster::encode_raft_part(b, group, more, chunk)) {
                    return false;
                }
                route.handle.counters.count_out(chunk.len());
            }
            true
        };
        if !self.spawn_in_parts(to, group, send) {
            debug!(group, to, "a raft message in parts is being sent already");
            return false;
        }
        info!(group, to, bytes, parts, "sending a raft snapshot in parts");
        true
    }

    /// Runs `send` (a message going out in parts to `to` for `group`) on a task of its own,
    /// then reports whether every part went out ([`Cluster::take_parts_done`]). False, and
    /// `send` dropped, when one is being sent to `to` for `group` already.
    fn spawn_in_parts(
        &self,
        to: &str,
        group: &str,
        send: impl std::future::Future<Output = bool> + Send + 'static,
    ) -> bool {
        let key = (to.to_string(), group.to_string());
        if !self
            .parts_inflight
            .lock()
            .expect("parts lock poisoned")
            .insert(key.clone())
        {
            return false;
        }
        let inflight = Arc::clone(&self.parts_inflight);
        let done = Arc::clone(&self.parts_done);
        self.runtime.spawn(async move {
            let sent = send.await;
            inflight.lock().expect("parts lock poisoned").remove(&key);
            done.lock()
                .expect("parts lock poisoned")
                .entry(key.1)
                .or_default()
                .push((key.0, sent));
        });
        true
    }

    /// The registered route to the server named `to`.
    fn route_named(&self, to: &str) -> Option<Arc<Route>> {
        let st = self.state.lock().expect("cluster lock poisoned");
        st.routes
            .values()
            .find(|r| r.hello.lock().expect("hello lock").server_name == to)
            .cloned()
    }

    /// Sends a snapshot whose data is the file at `path` (`len` bytes) to the server named
    /// `to`: the file in `RAFTS` parts, each once the route's buffer has room for it, read
    /// from the file as they go (never whole in memory), then `message` (the Raft message
    /// naming the file) as a `RAFT` op, from a task of its own; [`Cluster::take_parts_done`]
    /// says when it is done. The file is opened now: a newer snapshot that replaces it
    /// meanwhile does not change what is sent.
    pub fn send_snapshot_file(
        &self,
        to: &str,
        group: &str,
        message: Vec<u8>,
        path: std::path::PathBuf,
        len: u64,
    ) -> Sent {
        let Some(route) = self.route_named(to) else {
            return Sent::NotSent;
        };
        let file = match std::fs::File::open(&path) {
            Ok(f) => f,
            Err(err) => {
                warn!(group, to, path = %path.display(), error = %err, "opening a snapshot's data file");
                return Sent::NotSent;
            }
        };
        let part = self.part_bytes;
        let group_name = group.to_string();
        let send = async move {
            send_file_parts(&route, &group_name, file, len, part).await
                && route
                    .handle
                    .outbound
                    .push(|b| jsproto::cluster::encode_raft(b, group_name.as_bytes(), &message))
        };
        if !self.spawn_in_parts(to, group, send) {
            debug!(group, to, "a snapshot is being sent already");
            return Sent::NotSent;
        }
        info!(
            group,
            to,
            bytes = len,
            "sending a raft snapshot's data file"
        );
        Sent::Parts
    }

    /// The registered routes, by rid.
    pub fn routes(&self) -> Vec<RouteInfo> {
        let routes: Vec<Arc<Route>> = self
            .state
            .lock()
            .expect("cluster lock poisoned")
            .routes
            .values()
            .cloned()
            .collect();
        routes
            .iter()
            .map(|r| {
                let hello = r.hello.lock().expect("hello lock").clone();
                let interest = r.interest.lock().expect("interest lock");
                let c = &r.handle.counters;
                RouteInfo {
                    rid: r.handle.id,
                    remote_id: hello.server_id,
                    remote_name: hello.server_name,
                    did_solicit: r.dialed.is_some(),
                    is_configured: r.configured,
                    ip: r.peer.ip().to_string(),
                    port: r.peer.port(),
                    start: r.start,
                    last_activity: SystemTime::UNIX_EPOCH
                        + Duration::from_nanos(r.last_activity_ns.load(Ordering::Relaxed)),
                    pending_size: r.handle.outbound.pending_bytes(),
                    in_msgs: c.in_msgs.load(Ordering::Relaxed),
                    out_msgs: c.out_msgs.load(Ordering::Relaxed),
                    in_bytes: c.in_bytes.load(Ordering::Relaxed),
                    out_bytes: c.out_bytes.load(Ordering::Relaxed),
                    subscriptions: interest.len(),
                    subscriptions_list: interest
                        .keys()
                        .iter()
                        .map(|k| String::from_utf8_lossy(&k.subject).into_owned())
                        .collect(),
                }
            })
            .collect()
    }

    /// A local subscription change from an account router: announce the first and the
    /// last to every route.
    fn local_change(&self, key: &InterestKey, added: bool) {
        let mut st = self.state.lock().expect("cluster lock poisoned");
        let changed = if added {
            st.local.add(key.clone())
        } else {
            st.local.remove(key)
        };
        if changed {
            for r in st.routes.values() {
                r.handle.outbound.push(|b| {
                    encode_rs(b, added, &key.account, &key.subject, key.queue.as_deref());
                });
            }
        }
    }

    /// The route URL this server gives its peers on a route whose local end is `local`:
    /// `advertise` if configured (its port defaulting to the listener's), else the listen
    /// address.
    fn route_url(&self, local: SocketAddr) -> String {
        match self
            .opts
            .advertise
            .as_deref()
            .and_then(|a| config::parse_advertise(a).ok())
        {
            Some((host, port)) => join_host_port(&host, port.unwrap_or(self.listen_addr.port())),
            None => advertised(self.listen_addr, Some(local)),
        }
    }

    /// Our `HELLO` on a route whose local end is `local`.
    fn hello_for(&self, local: SocketAddr) -> Hello {
        let route_url = self.route_url(local);
        let mut st = self.state.lock().expect("cluster lock poisoned");
        st.own_urls.insert(route_url.clone());
        let routes = st
            .routes
            .values()
            .map(|r| r.hello.lock().expect("hello lock").route_url.clone())
            .filter(|u| !u.is_empty())
            .collect();
        Hello {
            server_id: self.server_id.clone(),
            server_name: self.server_name.clone(),
            cluster: self.name.clone(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            route_url,
            connect_urls: vec![advertised(self.client_addr, Some(local))],
            routes,
            jetstream: self.jetstream,
            tags: self.tags.clone(),
            meta: self.meta_formed.load(std::sync::atomic::Ordering::Relaxed),
            user: None,
            pass: None,
        }
    }

    /// Whether a server dialing here must present [`ClusterOptions::authorization`]'s user
    /// and password on `route` (one it accepted); then this server says nothing (no `HELLO`,
    /// so no gossip) until they checked out.
    fn must_authenticate(&self, route: &Route) -> bool {
        route.dialed.is_none() && self.opts.authorization.is_some()
    }

    /// Checks the user and password of a dialing server's first `HELLO` against the route
    /// authorization (bcrypt for a hashed password), as nats-server checks a route's
    /// `CONNECT`.
    fn authenticated(&self, hello: &Hello) -> bool {
        let Some(auth) = &self.opts.authorization else {
            return true;
        };
        match (&hello.user, &hello.pass) {
            (Some(user), Some(pass)) => {
                *user == auth.credentials.user
                    && crate::auth::compare_secret(&auth.credentials.password, pass)
            }
            _ => false,
        }
    }

    /// Marks this server a member of a formed meta group: the routes made from now on say
    /// so in `HELLO` ([`Peer::meta`]).
    pub fn set_meta_formed(&self) {
        self.meta_formed
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Starts a dial task for `url` unless one runs or it leads here.
    fn dial(self: &Arc<Self>, server: &Arc<Server>, url: &str, configured: bool) {
        {
            let mut st = self.state.lock().expect("cluster lock poisoned");
            if st.own_urls.contains(url) || !st.dialing.insert(url.to_string()) {
                return;
            }
        }
        tokio::spawn(Arc::clone(self).dial_loop(Arc::clone(server), url.to_string(), configured));
    }

    /// Whether a registered route leads to the server at `url`.
    fn connected_to(&self, url: &str) -> bool {
        let st = self.state.lock().expect("cluster lock poisoned");
        let id = st.url_ids.get(url);
        st.routes.values().any(|r| {
            let h = r.hello.lock().expect("hello lock");
            h.route_url == url || id.is_some_and(|id| *id == h.server_id)
        })
    }

    /// Dials `url` until it leads here or, for a route learned from a peer, until
    /// `connect_retries` attempts after the last success failed; a configured route is
    /// dialed for ever. While a route to that server is up (whoever dialed it), waits.
    async fn dial_loop(self: Arc<Self>, server: Arc<Server>, url: String, configured: bool) {
        let shutdown = server.shutdown_token();
        let mut failures = 0u32;
        loop {
            if shutdown.is_cancelled()
                || self
                    .state
                    .lock()
                    .expect("cluster lock poisoned")
                    .own_urls
                    .contains(&url)
            {
                break;
            }
            if self.connected_to(&url) {
                failures = 0;
            } else {
                debug!("Trying to connect to route on {url}");
                match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(&url)).await {
                    Ok(Ok(sock)) => {
                        failures = 0;
                        let peer = sock.peer_addr().unwrap_or(self.listen_addr);
                        Arc::clone(&self)
                            .serve(
                                Arc::clone(&server),
                                sock,
                                peer,
                                Some(url.clone()),
                                configured,
                            )
                            .await;
                    }
                    Ok(Err(err)) => {
                        failures += 1;
                        debug!("Error trying to connect to route ({url}): {err}");
                    }
                    Err(_) => {
                        failures += 1;
                        debug!("Error trying to connect to route ({url}): timed out");
                    }
                }
                if !configured && failures > self.opts.connect_retries {
                    break;
                }
            }
            tokio::select! {
                () = tokio::time::sleep(redial_delay()) => {}
                () = shutdown.cancelled() => break,
            }
        }
        self.state
            .lock()
            .expect("cluster lock poisoned")
            .dialing
            .remove(&url);
    }

    async fn accept_loop(self: Arc<Self>, server: Arc<Server>, listener: TcpListener) {
        let shutdown = server.shutdown_token();
        loop {
            let accepted = tokio::select! {
                () = shutdown.cancelled() => break,
                a = listener.accept() => a,
            };
            match accepted {
                Ok((sock, peer)) => {
                    tokio::spawn(Arc::clone(&self).serve(
                        Arc::clone(&server),
                        sock,
                        peer,
                        None,
                        false,
                    ));
                }
                Err(err) => {
                    warn!(error = %err, "error accepting route connection");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    }

    /// Runs one route connection until it closes.
    async fn serve(
        self: Arc<Self>,
        server: Arc<Server>,
        sock: TcpStream,
        peer: SocketAddr,
        dialed: Option<String>,
        configured: bool,
    ) {
        let _ = sock.set_nodelay(true);
        let local = sock.local_addr().unwrap_or(self.listen_addr);
        let rid = self.next_rid.fetch_add(1, Ordering::Relaxed);
        let (mut read, write) = match &self.opts.tls {
            None => split_tcp(sock),
            Some(tls) => match route_tls(tls, sock, dialed.as_deref()).await {
                Ok(halves) => halves,
                Err(err) => {
                    error!("{peer} - rid:{rid} - TLS route handshake error: {err}");
                    debug!("{peer} - rid:{rid} - Route connection closed: TLS Handshake Failure");
                    return;
                }
            },
        };
        let opts = server.options();
        let handle = Arc::new(ClientHandle::new(rid, opts.max_pending));
        let write = Arc::new(write);
        handle.outbound.attach(Arc::clone(&write));
        let done = CancellationToken::new();
        let writer = tokio::spawn(crate::connection::writer::write_loop(
            Arc::clone(&server),
            Arc::clone(&handle),
            peer,
            write,
            opts.write_deadline,
            done,
        ));
        let route = Arc::new(Route {
            handle: Arc::clone(&handle),
            peer,
            local,
            start: SystemTime::now(),
            created: Instant::now(),
            registered_at: OnceLock::new(),
            dialed,
            configured,
            hello: Mutex::new(Hello::default()),
            interest: Mutex::new(RemoteInterest::new()),
            last_activity_ns: AtomicU64::new(unix_nanos(SystemTime::now())),
            stop: CancellationToken::new(),
        });
        let mut hello = self.hello_for(local);
        if let Some(credentials) = route
            .dialed
            .as_deref()
            .and_then(|u| self.opts.credentials_for(u))
        {
            hello.user = Some(credentials.user.clone());
            hello.pass = Some(credentials.password.clone());
        }
        // A server that must check the dialer first answers once it has (`read_loop`).
        if !self.must_authenticate(&route) {
            handle.outbound.push(|b| encode_hello(b, &hello));
        }
        debug!("{peer} - rid:{rid} - Route connection created");
        let ending = self.read_loop(&server, &route, &mut read).await;
        let registered = {
            let mut st = self.state.lock().expect("cluster lock poisoned");
            let ours = st.routes.get(&rid).is_some_and(|r| Arc::ptr_eq(r, &route));
            if ours {
                st.routes.remove(&rid);
            }
            ours
        };
        let drained = route.interest.lock().expect("interest lock").drain();
        for (key, sub) in drained {
            if let Some(account) = std::str::from_utf8(&key.account)
                .ok()
                .and_then(|a| server.accounts().get(a))
            {
                account.router().unsubscribe_route(&sub);
            }
        }
        handle.outbound.close(CloseReason::Normal);
        let _ = writer.await;
        let name = route.hello.lock().expect("hello lock").server_name.clone();
        // A route registered and then superseded is no longer in `routes`, yet it was a
        // peer's route: its end is worth the info line too.
        match ending {
            Ending::Closed(why) if registered || route.registered_at.get().is_some() => {
                info!("{peer} - rid:{rid} - Route connection to {name:?} closed: {why}");
            }
            Ending::Closed(why) => debug!("{peer} - rid:{rid} - Route connection closed: {why}"),
            Ending::Refused(why) => debug!("{peer} - rid:{rid} - Route refused: {why}"),
        }
        if registered {
            self.client_urls_changed(&server);
        }
    }

    async fn read_loop(
        &self,
        server: &Arc<Server>,
        route: &Arc<Route>,
        read: &mut ReadHalf,
    ) -> Ending {
        let opts = server.options();
        let shutdown = server.shutdown_token();
        // Until the peer's HELLO registered it, no message of any size is taken (an
        // unauthenticated dialer could otherwise make it buffer 64 MiB per connection).
        let full_size = RouteCodec::default().max_msg;
        let mut codec = RouteCodec {
            max_msg: 0,
            ..RouteCodec::default()
        };
        let mut buf = BytesMut::with_capacity(READ_CHUNK);
        let mut scratch = RouteScratch::default();
        let mut registered = false;
        // Raft messages arriving in parts, by group, until their last part.
        let mut parts: HashMap<Bytes, BytesMut> = HashMap::new();
        let authenticate = self.must_authenticate(route);
        let hello_wait = match &self.opts.authorization {
            Some(auth) if authenticate => auth.timeout,
            _ => HELLO_TIMEOUT,
        };
        let hello_deadline = tokio::time::Instant::now() + hello_wait;
        let mut ping = tokio::time::interval_at(
            tokio::time::Instant::now() + opts.ping_interval,
            opts.ping_interval,
        );
        let mut outstanding = 0u32;
        loop {
            loop {
                let op = match codec.decode(&mut buf) {
                    Ok(Some(op)) => op,
                    Ok(None) => break,
                    Err(err) => {
                        scratch.flush_wakes();
                        let text = err.to_string();
                        route.handle.outbound.push(|b| encode_route_err(b, &text));
                        return Ending::Refused(text);
                    }
                };
                match op {
                    RouteOp::Pong => outstanding = 0,
                    RouteOp::Ping => {
                        route.handle.outbound.push(encode_pong);
                    }
                    RouteOp::Err(text) => {
                        scratch.flush_wakes();
                        return Ending::Refused(format!("peer said: {text}"));
                    }
                    RouteOp::Hello(hello) => {
                        if registered {
                            self.update(server, route, hello);
                        } else {
                            if authenticate {
                                // bcrypt takes milliseconds: off the runtime's workers' loop.
                                let ok = tokio::task::block_in_place(|| self.authenticated(&hello));
                                if !ok {
                                    let user = hello.user.as_deref().unwrap_or_default();
                                    error!(
                                        "{} - rid:{} - Router authentication error - User {user:?}",
                                        route.peer, route.handle.id
                                    );
                                    let why = "Authorization Violation".to_string();
                                    route.handle.outbound.push(|b| encode_route_err(b, &why));
                                    return Ending::Refused(why);
                                }
                                let ours = self.hello_for(route.local);
                                route.handle.outbound.push(|b| encode_hello(b, &ours));
                            }
                            if let Err(why) = self.register(server, route, hello) {
                                route.handle.outbound.push(|b| encode_route_err(b, &why));
                                return Ending::Refused(why);
                            }
                            registered = true;
                            codec.max_msg = full_size;
                        }
                    }
                    _ if !registered => {
                        let why = "expected HELLO first".to_string();
                        route.handle.outbound.push(|b| encode_route_err(b, &why));
                        return Ending::Refused(why);
                    }
                    RouteOp::Sub(key) => self.remote_sub(server, route, key),
                    RouteOp::Unsub(key) => {
                        let removed = route.interest.lock().expect("interest lock").remove(&key);
                        if let (Some(sub), Some(account)) =
                            (removed, account_of(server, &key.account))
                        {
                            account.router().unsubscribe_route(&sub);
                        }
                    }
                    RouteOp::RaftPart { group, more, data } => {
                        route.handle.counters.count_in(data.len());
                        let whole = {
                            // At most 1 GiB of parts held for a route, all groups together.
                            let held: usize = parts.values().map(BytesMut::len).sum();
                            let buf = parts.entry(group.clone()).or_default();
                            if held + data.len() > MAX_RAFT_PARTS_TOTAL {
                                let why = "Raft message parts over 1 GiB".to_string();
                                route.handle.outbound.push(|b| encode_route_err(b, &why));
                                return Ending::Refused(why);
                            }
                            buf.extend_from_slice(&data);
                            if more {
                                None
                            } else {
                                parts.remove(&group).map(BytesMut::freeze)
                            }
                        };
                        if let (Some(inbox), Some(data)) = (self.raft_inbox(&group), whole) {
                            inbox.deliver(data);
                        }
                    }
                    RouteOp::SnapshotPart {
                        group,
                        offset,
                        data,
                    } => {
                        route.handle.counters.count_in(data.len());
                        if let Some(inbox) = self.raft_inbox(&group) {
                            inbox.deliver_snapshot_part(offset, data);
                        }
                    }
                    RouteOp::Raft { group, data } => {
                        route.handle.counters.count_in(data.len());
                        if let Some(inbox) = self.raft_inbox(&group) {
                            inbox.deliver(data);
                        }
                    }
                    RouteOp::Msg(m) => {
                        let size = m.headers.as_ref().map_or(0, Bytes::len) + m.payload.len();
                        route.handle.counters.count_in(size);
                        if let Some(account) = account_of(server, &m.account) {
                            let router = account.router();
                            router.counters.count_in(size);
                            let msg = RoutedMsg {
                                subject: &m.subject,
                                reply: m.reply.as_ref(),
                                headers: m.headers.as_ref(),
                                payload: &m.payload,
                                hops: 0,
                                remote: Some(FromRoute {
                                    queues: &m.queues,
                                    route: route.handle.id,
                                }),
                            };
                            let to = m.to.as_ref().unwrap_or(&m.subject);
                            router.route_to(None, to, msg, &mut scratch);
                        }
                    }
                }
            }
            scratch.flush_wakes();
            if buf.capacity() - buf.len() < READ_CHUNK / 4 {
                buf.reserve(READ_CHUNK);
            }
            tokio::select! {
                n = read.read_buf(&mut buf) => match n {
                    Ok(0) => return Ending::Closed("Client Closed"),
                    Ok(_) => route
                        .last_activity_ns
                        .store(unix_nanos(SystemTime::now()), Ordering::Relaxed),
                    Err(_) => return Ending::Closed("Read Error"),
                },
                () = route.stop.cancelled() => return Ending::Closed("Duplicate Route"),
                () = shutdown.cancelled() => return Ending::Closed("Server Shutdown"),
                () = tokio::time::sleep_until(hello_deadline), if !registered => {
                    return Ending::Refused("no HELLO in time".into());
                }
                _ = ping.tick() => {
                    if outstanding >= opts.ping_max {
                        return Ending::Closed("Stale Connection");
                    }
                    outstanding += 1;
                    route.handle.outbound.push(encode_ping);
                }
            }
        }
    }

    /// A peer's first `HELLO`: checks it, drops a duplicate route, announces our interest,
    /// and tells the other peers and the clients of the newcomer.
    fn register(
        &self,
        server: &Arc<Server>,
        route: &Arc<Route>,
        hello: Hello,
    ) -> Result<(), String> {
        let others: Vec<Arc<Route>> = {
            let mut st = self.state.lock().expect("cluster lock poisoned");
            if hello.server_id == self.server_id {
                if let Some(url) = &route.dialed {
                    st.own_urls.insert(url.clone());
                }
                return Err("Route to self".into());
            }
            if hello.cluster != self.name {
                let why = format!(
                    "Rejecting connection, cluster name {:?} does not match {:?}",
                    hello.cluster, self.name
                );
                error!("{} - {why}", route.peer);
                return Err(why);
            }
            if let Some(url) = &route.dialed {
                st.url_ids.insert(url.clone(), hello.server_id.clone());
            }
            let existing = st
                .routes
                .values()
                .find(|r| r.hello.lock().expect("hello lock").server_id == hello.server_id)
                .cloned();
            if let Some(old) = existing {
                // A route registered before this one was even made stays, whoever dialed
                // it: it carries traffic, and what the peer is sending on it would be lost
                // with it. Both ends refuse the newcomer (a dial retry that found the peer
                // already connected). Only two routes made while neither was registered
                // (both servers dialed at once) are decided by who dialed: both ends see
                // the same overlap and keep the same one.
                let overlapped = old
                    .registered_at
                    .get()
                    .is_none_or(|at| route.created <= *at);
                if overlapped
                    && keep_route(
                        self.server_id.as_str(),
                        hello.server_id.as_str(),
                        route.dialed.is_some(),
                    )
                {
                    st.routes.remove(&old.handle.id);
                    old.handle
                        .outbound
                        .push(|b| encode_route_err(b, "Duplicate Route"));
                    old.stop.cancel();
                } else {
                    return Err("Duplicate Route".into());
                }
            }
            let name = if hello.server_name.is_empty() {
                hello.server_id.clone()
            } else {
                hello.server_name.clone()
            };
            st.known_tags.insert(name.clone(), hello.tags.clone());
            *route.hello.lock().expect("hello lock") = Hello {
                server_name: name,
                user: None,
                pass: None,
                ..hello.clone()
            };
            for key in st.local.keys() {
                route.handle.outbound.push(|b| {
                    encode_rs(b, true, &key.account, &key.subject, key.queue.as_deref());
                });
            }
            let _ = route.registered_at.set(Instant::now());
            st.routes.insert(route.handle.id, Arc::clone(route));
            st.routes
                .values()
                .filter(|r| !Arc::ptr_eq(r, route))
                .cloned()
                .collect()
        };
        info!(
            "{} - rid:{} - Route connection to {:?} ({}) registered",
            route.peer,
            route.handle.id,
            route.hello.lock().expect("hello lock").server_name,
            hello.route_url
        );
        for other in others {
            let update = self.hello_for(other.local);
            other.handle.outbound.push(|b| encode_hello(b, &update));
        }
        self.learn(server, &hello);
        self.client_urls_changed(server);
        Ok(())
    }

    /// A later `HELLO` from a registered peer: new routes to dial, new client URLs.
    fn update(&self, server: &Arc<Server>, route: &Arc<Route>, hello: Hello) {
        let urls_changed = {
            let mut h = route.hello.lock().expect("hello lock");
            let changed = h.connect_urls != hello.connect_urls;
            h.routes.clone_from(&hello.routes);
            h.connect_urls.clone_from(&hello.connect_urls);
            changed
        };
        self.learn(server, &hello);
        if urls_changed {
            self.client_urls_changed(server);
        }
    }

    /// Gossip: dials the routes `hello` names that this server has no route to.
    fn learn(&self, server: &Arc<Server>, hello: &Hello) {
        // `dial` needs an `Arc<Self>`: the cluster is the server's.
        let Some(me) = server.cluster() else {
            return;
        };
        for url in hello.routes.iter().chain(std::iter::once(&hello.route_url)) {
            if url.is_empty() || self.connected_to(url) {
                continue;
            }
            me.dial(server, url, false);
        }
    }

    /// `RS+` from a peer: a route subscriber in the account's router, once per key.
    fn remote_sub(&self, server: &Arc<Server>, route: &Arc<Route>, key: InterestKey) {
        let Some(account) = account_of(server, &key.account) else {
            debug!("route interest in unknown account {:?}", key.account);
            return;
        };
        let mut interest = route.interest.lock().expect("interest lock");
        let conn = Arc::clone(&route.handle);
        let Some(sub) = interest
            .insert(key.clone(), |k| {
                Arc::new(RouteSub {
                    conn,
                    account: k.account.clone(),
                    subject: k.subject.clone(),
                    queue: k.queue.clone(),
                })
            })
            .cloned()
        else {
            return;
        };
        if account.router().subscribe_route(&sub).is_err() {
            debug!("route interest in an invalid subject {:?}", key.subject);
            interest.remove(&key);
        }
    }

    /// Sends every client that takes asynchronous INFOs (protocol 1) one with the cluster's
    /// client URLs now, as nats-server does when routes come and go.
    fn client_urls_changed(&self, server: &Arc<Server>) {
        for conn in server.connections() {
            if conn.async_info.load(Ordering::Relaxed) {
                let info = server.info_for(conn.handle.id, conn.peer, None);
                conn.handle
                    .outbound
                    .push(|buf| jsproto::wire::encode_info(buf, &info));
            }
        }
    }
}

/// The account named by a route op.
/// The TLS handshake of a route (`cluster { tls }`), within the block's `timeout`: as the
/// client when this server dialed `dialed` (`host:port`, whose host the peer's certificate
/// must name), as the server otherwise (a dialer without a certificate chaining to
/// `ca_file` is refused with `verify`). Then the route's halves, through the TLS bridge.
async fn route_tls(
    tls: &crate::tls::TlsOptions,
    sock: TcpStream,
    dialed: Option<&str>,
) -> Result<
    (
        crate::connection::transport::ReadHalf,
        crate::connection::transport::WriteHalf,
    ),
    String,
> {
    use crate::connection::tls::bridged;
    let handshake = async {
        match dialed {
            Some(url) => {
                let config = tls.client_config().ok_or("no TLS client configuration")?;
                let host = crate::options::split_host_port(url).map_or(url, |(host, _)| host);
                let name = rustls::pki_types::ServerName::try_from(host.to_string())
                    .map_err(|e| format!("{host}: {e}"))?;
                let stream = tokio_rustls::TlsConnector::from(Arc::clone(config))
                    .connect(name, sock)
                    .await
                    .map_err(|e| e.to_string())?;
                bridged(stream).map_err(|e| e.to_string())
            }
            None => {
                let config = tls.server_config().ok_or("no TLS server configuration")?;
                let stream = tokio_rustls::TlsAcceptor::from(Arc::clone(config))
                    .accept(sock)
                    .await
                    .map_err(|e| e.to_string())?;
                bridged(stream).map_err(|e| e.to_string())
            }
        }
    };
    tokio::time::timeout(tls.timeout, handshake)
        .await
        .map_err(|_| "timeout".to_string())?
}

/// The wait before dialing a route again: [`RECONNECT_DELAY`] plus up to a quarter of it at
/// random, so that two servers that dialed each other at once (and may each have closed the
/// route the other kept, see `Cluster::register`) do not do so again a second later.
fn redial_delay() -> Duration {
    use rand::Rng;
    RECONNECT_DELAY + RECONNECT_DELAY.mul_f64(rand::rng().random_range(0.0..0.25))
}

fn account_of<'a>(server: &'a Server, name: &[u8]) -> Option<&'a Arc<crate::account::Account>> {
    server.accounts().get(std::str::from_utf8(name).ok()?)
}

/// `host:port` for a listener at `addr`: its own IP, or for one on every interface
/// (`0.0.0.0`, `::`), the local IP of the connection (`via`), which the peer could reach.
fn advertised(addr: SocketAddr, via: Option<SocketAddr>) -> String {
    let ip = match via {
        Some(v) if addr.ip().is_unspecified() => v.ip(),
        _ => addr.ip(),
    };
    join_host_port(&ip.to_string(), addr.port())
}

impl std::fmt::Debug for Route {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Route")
            .field("rid", &self.handle.id)
            .field("peer", &self.peer)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod part_queue_tests {
    use super::*;

    #[test]
    fn parts_past_the_bound_are_dropped_until_the_owner_is_done_with_some() {
        let q = PartQueue::with_limit(10);
        let a = q.admit(0, Bytes::from_static(b"123456")).unwrap();
        assert!(q.admit(6, Bytes::from_static(b"7890x")).is_none());
        let b = q.admit(6, Bytes::from_static(b"7890")).unwrap();
        assert!(q.admit(10, Bytes::from_static(b"1")).is_none());
        drop(a);
        assert!(q.admit(10, Bytes::from_static(b"123456")).is_some());
        drop(b);
        assert_eq!(q.0.load(std::sync::atomic::Ordering::Relaxed), 0);
    }
}
