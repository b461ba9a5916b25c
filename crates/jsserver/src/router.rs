//! The router: one subscription index for every subscriber, client or internal.
//!
//! A published message (from a client's PUB/HPUB, or from the server itself) is matched against
//! the [`SubjectIndex`] once; every plain subscription gets a copy and one member of each queue
//! group gets one, as nats-server's sublist routing does. Client subscriptions get the message
//! encoded straight into their connection's [`Outbound`] buffer;
//! internal subscriptions (the server's own handlers, such as `$JS.API.>` later) get a call to
//! [`InternalHandler::on_message`]. Both kinds go through the same lookup, so the hot path has no
//! special cases.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use jsproto::subject::{Matches, SubjectError, SubjectIndex};
use jsproto::wire::encode_msg;
use rand::Rng;

use crate::auth::perms::{ClientPerms, Replies};
use crate::connection::outbound::{Outbound, Pushed};

/// A message being routed: borrowed views of the publisher's frame.
#[derive(Debug, Clone, Copy)]
pub struct RoutedMsg<'a> {
    /// The subject it was published to (a literal subject).
    pub subject: &'a Bytes,
    /// The reply subject, if the publisher gave one.
    pub reply: Option<&'a Bytes>,
    /// The raw `NATS/1.0` header block, if any (HPUB).
    pub headers: Option<&'a Bytes>,
    /// The payload bytes.
    pub payload: &'a Bytes,
    /// How many account imports carried it here (0: published in this account). A stream or
    /// service import does not carry a message that came through another one (responses
    /// find their way back through any number, each import once: see
    /// [`crate::account::crossing`]).
    pub hops: u8,
    /// `Some` for a message that came from another server of the cluster over a route
    /// (`RMSG`), with the queue groups that server chose this one for: it goes to local
    /// client subscriptions only (plain ones, and one member of each listed group), never
    /// to internal subscribers; it goes to another route only for a listed group that no
    /// local member could take (see [`FromRoute`]). `None`: published here.
    pub remote: Option<FromRoute<'a>>,
}

/// Where a message that came over a route ([`RoutedMsg::remote`]) came from.
#[derive(Debug, Clone, Copy)]
pub struct FromRoute<'a> {
    /// The queue groups the sending server chose this one for.
    pub queues: &'a [Bytes],
    /// The route connection it came over (its `id`). A listed group whose local members
    /// are all gone (unsubscribed, closed, at their max) while the message was on its way
    /// is passed on to one other server with members, never back over this route, as
    /// nats-server's `processMsgResults` passes it to a routed member ("in case we can no
    /// longer do local delivery"), so the message is not lost while another node has
    /// members.
    pub route: u64,
}

impl RoutedMsg<'_> {
    /// Header plus payload bytes, the size nats-server counts in its `in_bytes`/`out_bytes`.
    pub fn size(&self) -> usize {
        self.headers.map_or(0, |h| h.len()) + self.payload.len()
    }
}

/// The server's own subscriber: called synchronously on the publishing task.
///
/// Implementations must be quick and must not block (queue the message, and leave real work
/// to a thread of theirs or to the end of the publisher's burst, through `later`); they must
/// not route messages back into the router while called with a lock held by themselves.
pub trait InternalHandler: Send + Sync {
    /// Receives one message matching the internal subscription. Work pushed to `later` runs
    /// once the publisher's current burst of messages is routed
    /// ([`RouteScratch::flush_wakes`]), so a burst is applied as one batch.
    fn on_message(&self, msg: RoutedMsg<'_>, later: &mut BurstWork);

    /// Whether this subscription takes a message on `subject` (which matched it) that `hops`
    /// imports carried here ([`RoutedMsg::hops`]; 0 for an interest check before a publish
    /// in this account). One that does not is skipped and does not count as interest, so a
    /// requester gets no-responders if nothing else matched: how a catch-all subscription
    /// leaves out subjects that belong to other handlers, and how an import counts as
    /// interest only while the other account has some. Every message by default.
    fn wants(&self, _subject: &[u8], _hops: u8) -> bool {
        true
    }

    /// Whether this subscription is the cluster's: announced to the other servers like a
    /// client's (`RS+`), and given the messages they send (`RMSG`). How a clustered
    /// JetStream's API, stream subjects, pull requests and acks reach the server that serves
    /// them from any node. False by default: a server's own requests (system account,
    /// imports) act on what is published on that server.
    fn clustered(&self) -> bool {
        false
    }
}

/// Work an internal handler leaves for the end of the publisher's burst: applying what it
/// queued (a stream stores a burst of publishes with one write and answers them together).
pub trait AtBurstEnd: Send + Sync {
    /// Runs on the publisher's task, before its receivers are flushed.
    fn run(&self);
}

/// Pending [`AtBurstEnd`] work, each entry at most once.
#[derive(Default)]
pub struct BurstWork(Vec<Arc<dyn AtBurstEnd>>);

impl BurstWork {
    /// Adds `work` unless it is already pending.
    pub fn add(&mut self, work: &Arc<dyn AtBurstEnd>) {
        if !self.0.iter().any(|w| Arc::ptr_eq(w, work)) {
            self.0.push(Arc::clone(work));
        }
    }

    /// Runs and clears the pending work, in the order it was added.
    pub fn run(&mut self) {
        for work in self.0.drain(..) {
            work.run();
        }
    }
}

impl fmt::Debug for BurstWork {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "BurstWork({} pending)", self.0.len())
    }
}

/// Traffic counters, as nats-server's `in_msgs`/`out_msgs`/`in_bytes`/`out_bytes`.
#[derive(Debug, Default)]
pub struct Counters {
    /// Messages received from the peer (for a connection) or from all clients (for the server).
    pub in_msgs: AtomicU64,
    /// Header plus payload bytes received.
    pub in_bytes: AtomicU64,
    /// Messages sent.
    pub out_msgs: AtomicU64,
    /// Header plus payload bytes sent.
    pub out_bytes: AtomicU64,
    /// Connections closed as slow consumers (server-wide only).
    pub slow_consumers: AtomicU64,
}

impl Counters {
    /// Counts one message of `bytes` bytes received.
    pub fn count_in(&self, bytes: usize) {
        self.in_msgs.fetch_add(1, Ordering::Relaxed);
        self.in_bytes.fetch_add(bytes as u64, Ordering::Relaxed);
    }

    /// Counts one message of `bytes` bytes sent.
    pub fn count_out(&self, bytes: usize) {
        self.out_msgs.fetch_add(1, Ordering::Relaxed);
        self.out_bytes.fetch_add(bytes as u64, Ordering::Relaxed);
    }
}

/// What the router needs to know of a client connection, shared between its tasks and the
/// tasks that route messages to it.
pub struct ClientHandle {
    /// The server-wide connection id (`client_id` in INFO, `cid` in `/connz`).
    pub id: u64,
    /// Where messages for this connection are encoded.
    pub outbound: Outbound,
    /// The connection's traffic counters.
    pub counters: Counters,
    headers: AtomicBool,
    echo: AtomicBool,
    /// By sid; foldhash (seeded per process) rather than SipHash: a SUB and an UNSUB per pull
    /// request make this a per-message map for JetStream workers.
    subs: Mutex<HashMap<Bytes, Arc<ClientSub>, foldhash::fast::RandomState>>,
}

impl fmt::Debug for ClientHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientHandle")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl ClientHandle {
    /// A new connection with an outbound buffer bounded by `max_pending` bytes. Until CONNECT
    /// says otherwise it does not take headers and echo is on (nats-server's defaults).
    pub fn new(id: u64, max_pending: usize) -> Self {
        ClientHandle {
            id,
            outbound: Outbound::new(max_pending),
            counters: Counters::default(),
            headers: AtomicBool::new(false),
            echo: AtomicBool::new(true),
            subs: Mutex::new(HashMap::default()),
        }
    }

    /// Whether the client negotiated headers (CONNECT `"headers":true`).
    pub fn headers(&self) -> bool {
        self.headers.load(Ordering::Relaxed)
    }

    /// Whether the client wants its own publishes back (CONNECT `"echo"`, default true).
    pub fn echo(&self) -> bool {
        self.echo.load(Ordering::Relaxed)
    }

    /// Records the CONNECT options the router needs.
    pub fn set_connect_flags(&self, headers: bool, echo: bool) {
        self.headers.store(headers, Ordering::Relaxed);
        self.echo.store(echo, Ordering::Relaxed);
    }

    /// Number of live subscriptions.
    pub fn num_subs(&self) -> usize {
        self.subs.lock().expect("subs lock poisoned").len()
    }

    /// Whether the connection has a subscription with this sid.
    pub fn has_sid(&self, sid: &[u8]) -> bool {
        self.subs
            .lock()
            .expect("subs lock poisoned")
            .contains_key(sid)
    }

    /// The subjects of the live subscriptions (for `/connz?subs=1`).
    pub fn sub_subjects(&self) -> Vec<String> {
        let subs = self.subs.lock().expect("subs lock poisoned");
        subs.values()
            .map(|s| String::from_utf8_lossy(&s.subject).into_owned())
            .collect()
    }
}

/// One client subscription (`SUB <subject> [queue] <sid>`).
#[derive(Debug)]
pub struct ClientSub {
    /// The subscribing connection.
    pub conn: Arc<ClientHandle>,
    /// The subject or wildcard filter.
    pub subject: Bytes,
    /// The queue group, if any.
    pub queue_group: Option<Bytes>,
    /// The client's opaque subscription id, echoed in every MSG.
    pub sid: Bytes,
    delivered: AtomicU64,
    /// Auto-unsubscribe after this many deliveries in total; 0 = no limit.
    max_msgs: AtomicU64,
    /// What the subscriber's permissions ask of deliveries; `None` (no permissions) costs one
    /// branch per delivery.
    perms: Option<Arc<DeliveryPerms>>,
}

/// What a subscriber's permissions ask of each delivery to one of its subscriptions.
#[derive(Debug, Default)]
pub struct DeliveryPerms {
    /// Messages whose subject this deny list covers are not delivered (a wildcard or queue
    /// subscription overlapping a subscribe deny entry).
    pub deny: Option<Arc<ClientPerms>>,
    /// The reply subjects of delivered requests become publishable (`allow_responses`).
    pub replies: Option<Arc<Replies>>,
}

impl DeliveryPerms {
    /// The delivery rules of a subscription on `subject` (in `queue`) of a client with
    /// `perms` and `replies`; `None` when deliveries need no check.
    pub fn for_sub(
        perms: Option<&Arc<ClientPerms>>,
        replies: Option<&Arc<Replies>>,
        subject: &[u8],
        queue: Option<&[u8]>,
    ) -> Option<Arc<DeliveryPerms>> {
        let perms = perms?;
        let deny = perms
            .filters_deliveries(subject, queue)
            .then(|| Arc::clone(perms));
        (deny.is_some() || replies.is_some()).then(|| {
            Arc::new(DeliveryPerms {
                deny,
                replies: replies.cloned(),
            })
        })
    }
}

/// A subscriber in the index: a client subscription or an internal handler.
#[derive(Clone)]
pub enum Subscriber {
    /// A client connection's subscription.
    Client(Arc<ClientSub>),
    /// A server-internal handler.
    Internal(Arc<dyn InternalHandler>),
    /// Interest of another server of the cluster, announced over a route (`RS+`).
    Route(Arc<RouteSub>),
}

/// Another server's interest in a subject (its clients' subscriptions, announced with `RS+`
/// over the route `conn`): a matching message published here is sent to that server once
/// (`RMSG`), whatever number of its subscriptions match.
#[derive(Debug)]
pub struct RouteSub {
    /// The route connection: its outbound buffer and traffic counters (`id` is the route's
    /// `rid`).
    pub conn: Arc<ClientHandle>,
    /// The account's name, as written in `RMSG`.
    pub account: Bytes,
    /// The subject or wildcard filter.
    pub subject: Bytes,
    /// The queue group, if any.
    pub queue: Option<Bytes>,
}

/// Told of every change in the local client subscriptions of a router, so the cluster can
/// tell its peers (`RS+` on the first subscription of a subject and queue group, `RS-` on
/// the last). Called under the router's index lock, in the order of the changes: must be
/// quick, must not block and must not call back into the router.
pub trait InterestHook: Send + Sync {
    /// A client subscription on `subject` in `queue` was added (`added`) or removed.
    fn local_interest(&self, subject: &Bytes, queue: Option<&Bytes>, added: bool);
}

impl fmt::Debug for Subscriber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Subscriber::Client(s) => write!(f, "Client({}, {:?})", s.conn.id, s.sid),
            Subscriber::Internal(_) => f.write_str("Internal"),
            Subscriber::Route(r) => write!(f, "Route({})", r.conn.id),
        }
    }
}

impl PartialEq for Subscriber {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Subscriber::Client(a), Subscriber::Client(b)) => Arc::ptr_eq(a, b),
            (Subscriber::Internal(a), Subscriber::Internal(b)) => {
                std::ptr::addr_eq(Arc::as_ptr(a), Arc::as_ptr(b))
            }
            (Subscriber::Route(a), Subscriber::Route(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

/// Told when a watched subject gains its first or loses its last exact subscription
/// ([`Router::watch_interest`]): how a push consumer learns that its deliver subject is bound.
pub trait InterestWatcher: Send + Sync {
    /// Interest in the watched subject may have changed: read it again with
    /// [`Router::exact_interest`]. Called on the task that subscribed or unsubscribed, after
    /// the router's locks are released; must be quick and must not block.
    fn interest_changed(&self);
}

/// One watched (subject, queue group): its exact client subscriptions and who to tell.
struct Watch {
    subs: usize,
    watchers: Vec<Arc<dyn InterestWatcher>>,
}

/// Key of a [`Watch`]: a literal subject and a queue group (`None`: plain subscriptions).
type WatchKey = (Bytes, Option<Bytes>);

/// Result of [`Router::subscribe`].
#[derive(Debug, PartialEq, Eq)]
pub enum SubscribeOutcome {
    /// The subscription is live.
    Added,
    /// The connection already had a subscription with this sid; nothing changed (as
    /// nats-server, which ignores a repeated SUB for a live sid).
    DuplicateSid,
}

/// Routes messages to the subscribers whose subjects match.
#[derive(Default)]
pub struct Router {
    index: RwLock<SubjectIndex<Subscriber>>,
    /// Watched subjects ([`Router::watch_interest`]). Changed only under the index's write
    /// lock (taken first), so counts and the index agree.
    watches: Mutex<HashMap<WatchKey, Watch>>,
    /// How many subjects are watched: subscribing costs nothing more while none is.
    watching: AtomicUsize,
    /// Server-wide traffic counters (`/varz`), shared by every account's router.
    pub counters: Arc<Counters>,
    /// Told of local interest changes, in a cluster ([`Router::set_interest_hook`]).
    hook: OnceLock<Arc<dyn InterestHook>>,
}

/// Per-task scratch space for [`Router::route`], so routing allocates nothing per message.
#[derive(Debug, Default)]
pub struct RouteScratch {
    matches: Matches<Subscriber>,
    expired: Vec<Arc<ClientSub>>,
    /// Connections that got messages since the last flush and need something done.
    receivers: Receivers,
    /// Internal handlers' work for the end of the burst.
    later: BurstWork,
    /// The routes the message being routed goes to, each once, with the queue groups that
    /// route's server was chosen for.
    routes: Vec<(Arc<RouteSub>, Vec<Bytes>)>,
}

impl RouteScratch {
    /// Flushes the connections that received messages since the last call: writes their
    /// buffers to their sockets directly when their writers are idle, wakes the writers
    /// otherwise ([`crate::connection::outbound::Outbound::flush`]). Whoever routes through this scratch
    /// must call it before it waits for anything (the client reader before it reads the socket
    /// again, JetStream threads after each batch), or the messages sit in their buffers.
    ///
    /// Internal handlers' [`AtBurstEnd`] work runs first (it may deliver more, to the
    /// connections of its own outbox, which it flushes itself).
    pub fn flush_wakes(&mut self) {
        self.flush();
        self.receivers.stalled.clear();
    }

    fn flush(&mut self) {
        self.later.run();
        for conn in self.receivers.wakes.drain(..) {
            conn.outbound.flush();
        }
    }

    /// Whether a connection delivered to since the last flush is stalled: a client reader
    /// should [`RouteScratch::flush_and_stall`] before it reads more.
    pub fn has_stalled(&self) -> bool {
        !self.receivers.stalled.is_empty()
    }

    /// [`RouteScratch::flush_wakes`] for a producer that is a client connection, then waits
    /// while connections it delivered to since the last call are stalled (more than three
    /// quarters of their `max_pending` unwritten), at most `limit` in all, as nats-server
    /// stalls a fast producer's read loop (10 ms at most per read). The producer then reads
    /// its client no faster than its receivers take their messages; a receiver still behind
    /// when the limit passes may end up a slow consumer, as on nats-server.
    pub async fn flush_and_stall(&mut self, limit: Duration) {
        self.flush();
        if self.receivers.stalled.is_empty() {
            return;
        }
        let deadline = tokio::time::Instant::now() + limit;
        // Dropping the drain (also on the early break) empties the list.
        for conn in self.receivers.stalled.drain(..) {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                break;
            }
            conn.outbound.wait_drained(left).await;
        }
    }
}

/// Client connections that got messages during a burst.
#[derive(Debug, Default)]
struct Receivers {
    /// Got messages into an empty buffer: their writers are still to be woken
    /// ([`RouteScratch::flush_wakes`]).
    wakes: Vec<Arc<ClientHandle>>,
    /// Stalled ([`Pushed::QueuedStall`]), once each: the producer waits for them
    /// ([`RouteScratch::flush_and_stall`]).
    stalled: Vec<Arc<ClientHandle>>,
}

impl Router {
    /// An empty router with counters of its own.
    pub fn new() -> Self {
        Router::default()
    }

    /// An empty router counting its traffic in `counters` (shared with the server's other
    /// accounts, so `/varz` shows the server's totals).
    pub fn with_counters(counters: Arc<Counters>) -> Self {
        Router {
            counters,
            ..Router::default()
        }
    }

    /// Adds a client subscription.
    ///
    /// # Errors
    /// [`SubjectError`] when the subject is not a valid subscription subject (the caller answers
    /// `-ERR 'Invalid Subject'` and keeps the connection, as nats-server does).
    pub fn subscribe(
        &self,
        conn: &Arc<ClientHandle>,
        subject: Bytes,
        queue_group: Option<Bytes>,
        sid: Bytes,
    ) -> Result<SubscribeOutcome, SubjectError> {
        self.subscribe_with_perms(conn, subject, queue_group, sid, None)
    }

    /// [`Router::subscribe`] for a subscriber whose permissions filter or track deliveries.
    ///
    /// # Errors
    /// As [`Router::subscribe`].
    pub fn subscribe_with_perms(
        &self,
        conn: &Arc<ClientHandle>,
        subject: Bytes,
        queue_group: Option<Bytes>,
        sid: Bytes,
        perms: Option<Arc<DeliveryPerms>>,
    ) -> Result<SubscribeOutcome, SubjectError> {
        let mut subs = conn.subs.lock().expect("subs lock poisoned");
        if subs.contains_key(&sid) {
            return Ok(SubscribeOutcome::DuplicateSid);
        }
        let sub = Arc::new(ClientSub {
            conn: Arc::clone(conn),
            subject,
            queue_group,
            sid: sid.clone(),
            delivered: AtomicU64::new(0),
            max_msgs: AtomicU64::new(0),
            perms,
        });
        let mut notify = Vec::new();
        {
            let mut index = self.index.write().expect("index lock poisoned");
            index.insert(
                &sub.subject,
                sub.queue_group.as_deref(),
                Subscriber::Client(Arc::clone(&sub)),
            )?;
            self.count_watched(&sub, true, &mut notify);
            if let Some(hook) = self.hook.get() {
                hook.local_interest(&sub.subject, sub.queue_group.as_ref(), true);
            }
        }
        subs.insert(sid, sub);
        drop(subs);
        for w in notify {
            w.interest_changed();
        }
        Ok(SubscribeOutcome::Added)
    }

    /// `UNSUB <sid> [max_msgs]`: removes the subscription now, or once it has delivered
    /// `max_msgs` messages in total (nats-server compares against all deliveries so far, so a
    /// limit already reached removes it at once). An unknown sid is ignored.
    pub fn unsubscribe(&self, conn: &ClientHandle, sid: &[u8], max_msgs: Option<u64>) {
        let sub = {
            let subs = conn.subs.lock().expect("subs lock poisoned");
            match subs.get(sid) {
                Some(s) => Arc::clone(s),
                None => return,
            }
        };
        if let Some(max) = max_msgs.filter(|&m| m > 0) {
            sub.max_msgs.store(max, Ordering::Relaxed);
            if sub.delivered.load(Ordering::Relaxed) < max {
                return;
            }
        }
        self.remove_client_sub(&sub);
    }

    /// The subscriptions of `conn`: (sid, subject, queue group).
    pub fn client_subs(conn: &ClientHandle) -> Vec<(Bytes, Bytes, Option<Bytes>)> {
        conn.subs
            .lock()
            .expect("subs lock poisoned")
            .values()
            .map(|s| (s.sid.clone(), s.subject.clone(), s.queue_group.clone()))
            .collect()
    }

    /// Gives subscription `sid` of `conn` new delivery rules (after a config reload), keeping
    /// its subject, queue group and delivery counts. An unknown sid is ignored.
    pub fn replace_delivery_perms(
        &self,
        conn: &Arc<ClientHandle>,
        sid: &[u8],
        perms: Option<Arc<DeliveryPerms>>,
    ) {
        let mut subs = conn.subs.lock().expect("subs lock poisoned");
        let Some(old) = subs.get(sid).cloned() else {
            return;
        };
        let new = Arc::new(ClientSub {
            conn: Arc::clone(conn),
            subject: old.subject.clone(),
            queue_group: old.queue_group.clone(),
            sid: old.sid.clone(),
            delivered: AtomicU64::new(old.delivered.load(Ordering::Relaxed)),
            max_msgs: AtomicU64::new(old.max_msgs.load(Ordering::Relaxed)),
            perms,
        });
        {
            let mut index = self.index.write().expect("index lock poisoned");
            let queue = old.queue_group.as_deref();
            index.remove(&old.subject, queue, &Subscriber::Client(Arc::clone(&old)));
            index
                .insert(&new.subject, queue, Subscriber::Client(Arc::clone(&new)))
                .expect("the subject was valid when subscribed");
        }
        subs.insert(old.sid.clone(), new);
    }

    /// Removes every subscription of a closing connection.
    pub fn remove_connection(&self, conn: &ClientHandle) {
        let subs: Vec<_> = conn
            .subs
            .lock()
            .expect("subs lock poisoned")
            .drain()
            .map(|(_, s)| s)
            .collect();
        let mut notify = Vec::new();
        {
            let mut index = self.index.write().expect("index lock poisoned");
            for sub in subs {
                let (subject, queue) = (sub.subject.clone(), sub.queue_group.clone());
                self.count_watched(&sub, false, &mut notify);
                if index.remove(&subject, queue.as_deref(), &Subscriber::Client(sub)) {
                    if let Some(hook) = self.hook.get() {
                        hook.local_interest(&subject, queue.as_ref(), false);
                    }
                }
            }
        }
        for w in notify {
            w.interest_changed();
        }
    }

    fn remove_client_sub(&self, sub: &Arc<ClientSub>) {
        let removed = sub
            .conn
            .subs
            .lock()
            .expect("subs lock poisoned")
            .remove(&sub.sid);
        if removed.is_some() {
            let mut notify = Vec::new();
            {
                let mut index = self.index.write().expect("index lock poisoned");
                if index.remove(
                    &sub.subject,
                    sub.queue_group.as_deref(),
                    &Subscriber::Client(Arc::clone(sub)),
                ) {
                    self.count_watched(sub, false, &mut notify);
                    if let Some(hook) = self.hook.get() {
                        hook.local_interest(&sub.subject, sub.queue_group.as_ref(), false);
                    }
                }
            }
            for w in notify {
                w.interest_changed();
            }
        }
    }

    /// Keeps the watched counts: `sub` was added (`added`) or is being removed; watchers of a
    /// subject whose count left or reached zero go to `notify`. Called under the index's write
    /// lock.
    fn count_watched(
        &self,
        sub: &ClientSub,
        added: bool,
        notify: &mut Vec<Arc<dyn InterestWatcher>>,
    ) {
        self.count_watched_on(&sub.subject, sub.queue_group.as_ref(), added, notify);
    }

    /// [`Router::count_watched`] for a subscription on `subject` in `queue`, a client's or
    /// another server's (a route's interest counts as a client's there: nats-server delivers
    /// a push consumer's messages to a subscriber on another server of the cluster).
    fn count_watched_on(
        &self,
        subject: &Bytes,
        queue: Option<&Bytes>,
        added: bool,
        notify: &mut Vec<Arc<dyn InterestWatcher>>,
    ) {
        if self.watching.load(Ordering::Acquire) == 0 {
            return;
        }
        let mut watches = self.watches.lock().expect("watches lock poisoned");
        let key = (subject.clone(), queue.cloned());
        if let Some(w) = watches.get_mut(&key) {
            let before = w.subs;
            w.subs = if added {
                w.subs + 1
            } else {
                w.subs.saturating_sub(1)
            };
            if (before == 0) != (w.subs == 0) {
                notify.extend(w.watchers.iter().cloned());
            }
        }
    }

    /// Watches the client subscriptions on exactly `subject` (a literal) in `queue` (`None`:
    /// subscriptions without a queue group), on this server or, in a cluster, on another
    /// (a route's interest): `watcher` is told whenever the first one comes or the last one
    /// goes. Returns whether there is one now. This is nats-server's interest notification
    /// for push consumers (`registerNotification`): subscriptions with wildcards, in other
    /// queue groups, or internal ones do not count (observed on 2.15.1: a deliver subject
    /// matched only by `dlv.>` gets no deliveries); a subscriber on another server of the
    /// cluster does (also observed).
    pub fn watch_interest(
        &self,
        subject: &[u8],
        queue: Option<&[u8]>,
        watcher: Arc<dyn InterestWatcher>,
    ) -> bool {
        let index = self.index.read().expect("index lock poisoned");
        let mut watches = self.watches.lock().expect("watches lock poisoned");
        let key = (
            Bytes::copy_from_slice(subject),
            queue.map(Bytes::copy_from_slice),
        );
        let watch = watches.entry(key).or_insert_with(|| {
            let mut m = Matches::new();
            index.find(subject, &mut m);
            let exact = |s: &Subscriber| match s {
                Subscriber::Client(c) => {
                    &c.subject[..] == subject && c.queue_group.as_deref() == queue
                }
                Subscriber::Route(r) => &r.subject[..] == subject && r.queue.as_deref() == queue,
                Subscriber::Internal(_) => false,
            };
            let subs = match queue {
                None => m.plain().iter().filter(|s| exact(s)).count(),
                Some(q) => m
                    .group(q)
                    .map_or(0, |g| g.iter().filter(|s| exact(s)).count()),
            };
            self.watching.fetch_add(1, Ordering::AcqRel);
            Watch {
                subs,
                watchers: Vec::new(),
            }
        });
        watch.watchers.push(watcher);
        watch.subs > 0
    }

    /// Stops `watcher` watching `subject`/`queue` ([`Router::watch_interest`]).
    pub fn unwatch_interest(
        &self,
        subject: &[u8],
        queue: Option<&[u8]>,
        watcher: &Arc<dyn InterestWatcher>,
    ) {
        let _index = self.index.read().expect("index lock poisoned");
        let mut watches = self.watches.lock().expect("watches lock poisoned");
        let key = (
            Bytes::copy_from_slice(subject),
            queue.map(Bytes::copy_from_slice),
        );
        if let Some(w) = watches.get_mut(&key) {
            w.watchers.retain(|x| !Arc::ptr_eq(x, watcher));
            if w.watchers.is_empty() {
                watches.remove(&key);
                self.watching.fetch_sub(1, Ordering::AcqRel);
            }
        }
    }

    /// Whether a watched `subject`/`queue` has a client subscription on exactly it now
    /// ([`Router::watch_interest`]); false for a subject nobody watches.
    pub fn exact_interest(&self, subject: &[u8], queue: Option<&[u8]>) -> bool {
        let watches = self.watches.lock().expect("watches lock poisoned");
        let key = (
            Bytes::copy_from_slice(subject),
            queue.map(Bytes::copy_from_slice),
        );
        watches.get(&key).is_some_and(|w| w.subs > 0)
    }

    /// Sets the hook told of every local client subscription change from now on. Set it
    /// before clients subscribe (the cluster starts before the client listener accepts):
    /// subscriptions made earlier are not reported. Only the first call sets it (a router
    /// belongs to one cluster); returns whether this one did.
    pub fn set_interest_hook(&self, hook: Arc<dyn InterestHook>) -> bool {
        let _index = self.index.write().expect("index lock poisoned");
        self.hook.set(hook).is_ok()
    }

    /// Whether this router belongs to a cluster (its interest hook is set): internal
    /// subscriptions that serve the whole cluster make themselves
    /// [clustered](InternalHandler::clustered) then.
    pub fn clustered(&self) -> bool {
        self.hook.get().is_some()
    }

    /// Adds another server's interest (`RS+` from a route).
    ///
    /// # Errors
    /// [`SubjectError`] for an invalid subject (the route sent garbage).
    pub fn subscribe_route(&self, sub: &Arc<RouteSub>) -> Result<(), SubjectError> {
        let mut notify = Vec::new();
        {
            let mut index = self.index.write().expect("index lock poisoned");
            index.insert(
                &sub.subject,
                sub.queue.as_deref(),
                Subscriber::Route(Arc::clone(sub)),
            )?;
            self.count_watched_on(&sub.subject, sub.queue.as_ref(), true, &mut notify);
        }
        for w in notify {
            w.interest_changed();
        }
        Ok(())
    }

    /// Removes interest added with [`Router::subscribe_route`] (`RS-`, or the route closed).
    pub fn unsubscribe_route(&self, sub: &Arc<RouteSub>) -> bool {
        let mut notify = Vec::new();
        let removed = {
            let mut index = self.index.write().expect("index lock poisoned");
            let removed = index.remove(
                &sub.subject,
                sub.queue.as_deref(),
                &Subscriber::Route(Arc::clone(sub)),
            );
            if removed {
                self.count_watched_on(&sub.subject, sub.queue.as_ref(), false, &mut notify);
            }
            removed
        };
        for w in notify {
            w.interest_changed();
        }
        removed
    }

    /// Adds an internal subscription (the server's own handler) on `subject`.
    ///
    /// # Errors
    /// [`SubjectError`] for an invalid subject.
    ///
    /// A [clustered](InternalHandler::clustered) handler's interest is announced to the
    /// cluster's other servers as a client subscription's is.
    pub fn subscribe_internal(
        &self,
        subject: &[u8],
        queue_group: Option<&[u8]>,
        handler: Arc<dyn InternalHandler>,
    ) -> Result<(), SubjectError> {
        let clustered = handler.clustered();
        let mut index = self.index.write().expect("index lock poisoned");
        index.insert(subject, queue_group, Subscriber::Internal(handler))?;
        if clustered {
            if let Some(hook) = self.hook.get() {
                let queue = queue_group.map(Bytes::copy_from_slice);
                hook.local_interest(&Bytes::copy_from_slice(subject), queue.as_ref(), true);
            }
        }
        Ok(())
    }

    /// Removes an internal subscription added with [`Router::subscribe_internal`].
    pub fn unsubscribe_internal(
        &self,
        subject: &[u8],
        queue_group: Option<&[u8]>,
        handler: &Arc<dyn InternalHandler>,
    ) -> bool {
        let mut index = self.index.write().expect("index lock poisoned");
        let removed = index.remove(
            subject,
            queue_group,
            &Subscriber::Internal(Arc::clone(handler)),
        );
        if removed && handler.clustered() {
            if let Some(hook) = self.hook.get() {
                let queue = queue_group.map(Bytes::copy_from_slice);
                hook.local_interest(&Bytes::copy_from_slice(subject), queue.as_ref(), false);
            }
        }
        removed
    }

    /// The ids of the client connections with a subscription matching `subject` (plain or
    /// queue), ascending, each once. For inspection (who holds a consumer's messages), not
    /// for routing.
    pub fn client_ids_for(&self, subject: &[u8]) -> Vec<u64> {
        let mut m = Matches::new();
        self.index
            .read()
            .expect("index lock poisoned")
            .find(subject, &mut m);
        let mut ids: Vec<u64> = m
            .plain()
            .iter()
            .chain(m.groups().flat_map(|(_, members)| members.iter()))
            .filter_map(|s| match s {
                Subscriber::Client(c) => Some(c.conn.id),
                Subscriber::Internal(_) | Subscriber::Route(_) => None,
            })
            .collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    /// Whether any subscription (client or internal) matches `subject`, for a message
    /// published in this account.
    pub fn has_interest(&self, subject: &[u8]) -> bool {
        self.has_interest_at(subject, 0)
    }

    /// Whether any subscription would take a message on `subject` that `hops` imports
    /// carried here ([`InternalHandler::wants`]).
    pub fn has_interest_at(&self, subject: &[u8], hops: u8) -> bool {
        thread_local! {
            static SCRATCH: std::cell::RefCell<Matches<Subscriber>> =
                std::cell::RefCell::new(Matches::new());
        }
        let check = |m: &mut Matches<Subscriber>| {
            self.index
                .read()
                .expect("index lock poisoned")
                .find(subject, m);
            let any =
                m.groups().next().is_some() || m.plain().iter().any(|s| s.wants(subject, hops));
            m.clear();
            any
        };
        SCRATCH.with(|m| match m.try_borrow_mut() {
            Ok(mut m) => check(&mut m),
            // Asked again from inside an internal subscriber's `wants` (an account import
            // asking the other account's router, at most `MAX_CROSSINGS` deep: see
            // `crate::account::crossing`): a scratch of its own.
            Err(_) => check(&mut Matches::new()),
        })
    }

    /// Delivers `msg` to every matching subscriber; returns whether anything was subscribed.
    ///
    /// `from` is the publishing connection (None for the server's own messages): with its echo
    /// off, its own subscriptions are skipped. Interest is decided before that filter, as in
    /// nats-server, so a no-responders reply is only due when nothing at all matched.
    pub fn route(
        &self,
        from: Option<&ClientHandle>,
        msg: RoutedMsg<'_>,
        scratch: &mut RouteScratch,
    ) -> bool {
        self.route_to(from, msg.subject, msg, scratch)
    }

    /// Like [`Router::route`], but to the subscribers of `to` while the message keeps its own
    /// subject: how JetStream delivers a stored message to a pull request's reply subject
    /// (`MSG orders.new <sid> $JS.ACK.… <n>` on the requester's inbox subscription).
    pub fn route_to(
        &self,
        from: Option<&ClientHandle>,
        to: &[u8],
        msg: RoutedMsg<'_>,
        scratch: &mut RouteScratch,
    ) -> bool {
        self.index
            .read()
            .expect("index lock poisoned")
            .find(to, &mut scratch.matches);
        if scratch.matches.is_empty() {
            return false;
        }
        let skip_conn = from.filter(|c| !c.echo()).map(|c| c.id);
        let remote = msg.remote;
        // Interest is decided before the echo filter (see `route`), but internal subscribers
        // that do not want this subject do not count.
        let mut interest = scratch.matches.groups().next().is_some();
        for sub in scratch.matches.plain() {
            match sub {
                Subscriber::Route(r) => {
                    // One hop: what came from a route never goes to another.
                    if remote.is_none() {
                        interest = true;
                        add_route(&mut scratch.routes, r, None);
                    }
                    continue;
                }
                Subscriber::Internal(h) if remote.is_some() && !h.clustered() => continue,
                _ => {}
            }
            if !sub.wants(to, msg.hops) {
                continue;
            }
            interest = true;
            if deliver(
                sub,
                msg,
                skip_conn,
                &mut scratch.expired,
                &mut scratch.receivers,
                &mut scratch.later,
            ) {
                self.counters.count_out(msg.size());
            }
        }
        for (group, members) in scratch.matches.groups() {
            if let Some(chosen) = remote {
                // The sending server picked this one for the groups it listed only.
                if !chosen.queues.iter().any(|q| &q[..] == group) {
                    continue;
                }
            }
            // One member per group, a local one if any can take it (as nats-server prefers
            // local queue subscribers); start at a random member and move on past members
            // that cannot take it (closed, echo off, limit reached).
            let start = rand::rng().random_range(0..members.len());
            let mut delivered = false;
            let mut routes = 0;
            for i in 0..members.len() {
                let sub = &members[(start + i) % members.len()];
                match sub {
                    Subscriber::Route(r) => {
                        // Never back to the server the message came from.
                        if remote.is_none_or(|from| r.conn.id != from.route) {
                            routes += 1;
                        }
                        continue;
                    }
                    Subscriber::Internal(h) if remote.is_some() && !h.clustered() => continue,
                    _ => {}
                }
                if deliver(
                    sub,
                    msg,
                    skip_conn,
                    &mut scratch.expired,
                    &mut scratch.receivers,
                    &mut scratch.later,
                ) {
                    self.counters.count_out(msg.size());
                    delivered = true;
                    break;
                }
            }
            if !delivered && routes > 0 {
                // No local member took it: one server with members, at random (for a
                // message from a route, one other than the server it came from).
                let pick = rand::rng().random_range(0..routes);
                let route = members
                    .iter()
                    .filter_map(|s| match s {
                        Subscriber::Route(r)
                            if remote.is_none_or(|from| r.conn.id != from.route) =>
                        {
                            Some(r)
                        }
                        _ => None,
                    })
                    .nth(pick)
                    .expect("counted above");
                add_route(&mut scratch.routes, route, Some(group));
            }
        }
        for (route, queues) in scratch.routes.drain(..) {
            let pushed = route.conn.outbound.push_deferred(|buf: &mut BytesMut| {
                jsproto::cluster::encode_rmsg(
                    buf,
                    &route.account,
                    Some(to),
                    msg.subject,
                    msg.reply.map(|r| &r[..]),
                    &queues,
                    msg.headers.map(|h| &h[..]),
                    msg.payload,
                );
            });
            match pushed {
                Pushed::QueuedWake => scratch.receivers.wakes.push(Arc::clone(&route.conn)),
                // A route behind is a receiver behind: the publisher waits for it too.
                Pushed::QueuedStall
                    if !scratch
                        .receivers
                        .stalled
                        .iter()
                        .any(|c| Arc::ptr_eq(c, &route.conn)) =>
                {
                    scratch.receivers.stalled.push(Arc::clone(&route.conn));
                }
                _ => {}
            }
            if pushed != Pushed::Refused {
                route.conn.counters.count_out(msg.size());
            }
        }
        scratch.matches.clear();
        for sub in scratch.expired.drain(..) {
            self.remove_client_sub(&sub);
        }
        interest
    }
}

/// Adds `route` (once per route connection) to the routes a message goes to, with `queue`
/// among the groups it was chosen for.
fn add_route(
    routes: &mut Vec<(Arc<RouteSub>, Vec<Bytes>)>,
    route: &Arc<RouteSub>,
    queue: Option<&[u8]>,
) {
    let at = match routes
        .iter()
        .position(|(r, _)| Arc::ptr_eq(&r.conn, &route.conn))
    {
        Some(at) => at,
        None => {
            routes.push((Arc::clone(route), Vec::new()));
            routes.len() - 1
        }
    };
    if let Some(q) = queue {
        routes[at].1.push(Bytes::copy_from_slice(q));
    }
}

impl Subscriber {
    /// Whether this subscriber takes (and counts as interest in) a message on `subject` that
    /// matched it: always for a client, as [`InternalHandler::wants`] says for the server's own.
    fn wants(&self, subject: &[u8], hops: u8) -> bool {
        match self {
            Subscriber::Internal(handler) => handler.wants(subject, hops),
            Subscriber::Client(_) | Subscriber::Route(_) => true,
        }
    }
}

/// Hands `msg` to one subscriber; false when that subscriber could not take it.
fn deliver(
    sub: &Subscriber,
    msg: RoutedMsg<'_>,
    skip_conn: Option<u64>,
    expired: &mut Vec<Arc<ClientSub>>,
    receivers: &mut Receivers,
    later: &mut BurstWork,
) -> bool {
    match sub {
        // Routes are sent to by `route_to` itself, once per route.
        Subscriber::Route(_) => false,
        Subscriber::Internal(handler) => {
            handler.on_message(msg, later);
            true
        }
        Subscriber::Client(sub) => {
            if skip_conn == Some(sub.conn.id) {
                return false;
            }
            if let Some(deny) = sub.perms.as_ref().and_then(|p| p.deny.as_ref()) {
                if deny.delivery_denied(msg.subject, sub.queue_group.as_deref()) {
                    return false;
                }
            }
            let max = sub.max_msgs.load(Ordering::Relaxed);
            if max > 0 {
                let n = sub.delivered.fetch_add(1, Ordering::Relaxed) + 1;
                if n > max {
                    return false;
                }
                if n == max {
                    expired.push(Arc::clone(sub));
                }
            } else {
                sub.delivered.fetch_add(1, Ordering::Relaxed);
            }
            // A client that did not negotiate headers gets the payload alone (nats-server strips
            // the header block for it).
            let headers = if sub.conn.headers() {
                msg.headers
            } else {
                None
            };
            let pushed = sub.conn.outbound.push_deferred(|buf: &mut BytesMut| {
                encode_msg(
                    buf,
                    msg.subject,
                    &sub.sid,
                    msg.reply.map(|r| &r[..]),
                    headers.map(|h| &h[..]),
                    msg.payload,
                )
            });
            match pushed {
                Pushed::QueuedWake => receivers.wakes.push(Arc::clone(&sub.conn)),
                Pushed::QueuedStall
                    if !receivers.stalled.iter().any(|c| Arc::ptr_eq(c, &sub.conn)) =>
                {
                    receivers.stalled.push(Arc::clone(&sub.conn));
                }
                _ => {}
            }
            let queued = pushed != Pushed::Refused;
            if queued {
                sub.conn
                    .counters
                    .count_out(headers.map_or(0, |h| h.len()) + msg.payload.len());
                if let (Some(reply), Some(replies)) = (
                    msg.reply,
                    sub.perms.as_ref().and_then(|p| p.replies.as_ref()),
                ) {
                    replies.on_delivery(reply);
                }
            }
            queued
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts its calls.
    #[derive(Default)]
    struct Counter(AtomicUsize);

    impl InterestWatcher for Counter {
        fn interest_changed(&self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn calls(c: &Counter) -> usize {
        c.0.load(Ordering::SeqCst)
    }

    #[test]
    fn a_watched_subject_counts_exact_subscriptions_only() {
        let router = Router::new();
        let conn = Arc::new(ClientHandle::new(1, 1 << 20));
        let sub = |subject: &'static str, queue: Option<&'static str>, sid: &'static str| {
            router
                .subscribe(
                    &conn,
                    Bytes::from_static(subject.as_bytes()),
                    queue.map(|q| Bytes::from_static(q.as_bytes())),
                    Bytes::from_static(sid.as_bytes()),
                )
                .unwrap();
        };
        sub("dlv.a", None, "1");
        let plain = Arc::new(Counter::default());
        let group = Arc::new(Counter::default());
        assert!(router.watch_interest(b"dlv.a", None, plain.clone()));
        assert!(!router.watch_interest(b"dlv.a", Some(b"g"), group.clone()));
        // Wildcards and other groups do not count.
        sub("dlv.>", None, "2");
        sub("dlv.a", Some("h"), "3");
        assert_eq!((calls(&plain), calls(&group)), (0, 0));
        assert!(!router.exact_interest(b"dlv.a", Some(b"g")));
        sub("dlv.a", Some("g"), "4");
        assert_eq!(calls(&group), 1, "first member");
        sub("dlv.a", Some("g"), "5");
        assert_eq!(calls(&group), 1, "not for the second");
        assert!(router.exact_interest(b"dlv.a", Some(b"g")));
        router.unsubscribe(&conn, b"4", None);
        assert_eq!(calls(&group), 1);
        router.unsubscribe(&conn, b"1", None);
        assert_eq!(calls(&plain), 1, "last plain subscription gone");
        assert!(!router.exact_interest(b"dlv.a", None));
        // A closing connection takes the rest with it.
        router.remove_connection(&conn);
        assert_eq!(calls(&group), 2);
        assert!(!router.exact_interest(b"dlv.a", Some(b"g")));
        let plain_dyn: Arc<dyn InterestWatcher> = plain.clone();
        router.unwatch_interest(b"dlv.a", None, &plain_dyn);
        let conn2 = Arc::new(ClientHandle::new(2, 1 << 20));
        router
            .subscribe(
                &conn2,
                Bytes::from_static(b"dlv.a"),
                None,
                Bytes::from_static(b"1"),
            )
            .unwrap();
        assert_eq!(calls(&plain), 1, "no longer watched");
        assert!(
            !router.exact_interest(b"dlv.a", None),
            "unwatched: no answer"
        );
    }

    /// What is queued on `conn`, as text.
    fn queued(conn: &ClientHandle) -> String {
        let mut spare = BytesMut::new();
        match conn.outbound.take(&mut spare) {
            crate::connection::outbound::Take::Write => {
                String::from_utf8_lossy(&spare).into_owned()
            }
            _ => String::new(),
        }
    }

    #[test]
    fn a_route_gets_one_copy_and_what_comes_from_a_route_stays_local() {
        let router = Router::new();
        let route = Arc::new(ClientHandle::new(100, 1 << 20));
        let local = Arc::new(ClientHandle::new(1, 1 << 20));
        let route_sub = |subject: &'static str, queue: Option<&'static str>| {
            let sub = Arc::new(RouteSub {
                conn: Arc::clone(&route),
                account: Bytes::from_static(b"$G"),
                subject: Bytes::from_static(subject.as_bytes()),
                queue: queue.map(|q| Bytes::from_static(q.as_bytes())),
            });
            router.subscribe_route(&sub).unwrap();
            sub
        };
        // Two interests of the same peer match: one RMSG.
        route_sub("a.*", None);
        let wide = route_sub("a.>", None);
        route_sub("a.b", Some("g"));
        router
            .subscribe(
                &local,
                Bytes::from_static(b"a.b"),
                None,
                Bytes::from_static(b"1"),
            )
            .unwrap();
        let payload = Bytes::from_static(b"hi");
        let subject = Bytes::from_static(b"a.b");
        let msg = RoutedMsg {
            subject: &subject,
            reply: None,
            headers: None,
            payload: &payload,
            hops: 0,
            remote: None,
        };
        let mut scratch = RouteScratch::default();
        assert!(router.route(None, msg, &mut scratch));
        // The group has no local member: the peer is chosen for it.
        assert_eq!(queued(&route), "RMSG $G a.b 0 2 1 g\r\nhi\r\n");
        assert_eq!(queued(&local), "MSG a.b 1 2\r\nhi\r\n");
        // With a local member, the local member gets it and the peer only the plain copy.
        router
            .subscribe(
                &local,
                Bytes::from_static(b"a.b"),
                Some(Bytes::from_static(b"g")),
                Bytes::from_static(b"2"),
            )
            .unwrap();
        router.route(None, msg, &mut scratch);
        assert_eq!(queued(&route), "RMSG $G a.b 0 2 0\r\nhi\r\n");
        assert_eq!(queued(&local), "MSG a.b 1 2\r\nhi\r\nMSG a.b 2 2\r\nhi\r\n");
        // From a route: local plain subscribers, the listed groups only, no route.
        let groups = [Bytes::from_static(b"g")];
        let from_route = RoutedMsg {
            remote: Some(FromRoute {
                queues: &groups,
                route: 100,
            }),
            ..msg
        };
        router.route(None, from_route, &mut scratch);
        assert_eq!(queued(&route), "");
        assert_eq!(queued(&local), "MSG a.b 1 2\r\nhi\r\nMSG a.b 2 2\r\nhi\r\n");
        let from_route = RoutedMsg {
            remote: Some(FromRoute {
                queues: &[],
                route: 100,
            }),
            ..msg
        };
        router.route(None, from_route, &mut scratch);
        assert_eq!(queued(&local), "MSG a.b 1 2\r\nhi\r\n");
        // Interest gone: unsubscribed interest no longer matches.
        assert!(router.unsubscribe_route(&wide));
        assert!(!router.unsubscribe_route(&wide));
    }

    #[test]
    fn a_routed_queue_message_without_a_local_member_goes_to_another_server_with_members() {
        let router = Router::new();
        let (r1, r2) = (
            Arc::new(ClientHandle::new(100, 1 << 20)),
            Arc::new(ClientHandle::new(200, 1 << 20)),
        );
        for conn in [&r1, &r2] {
            let sub = Arc::new(RouteSub {
                conn: Arc::clone(conn),
                account: Bytes::from_static(b"$G"),
                subject: Bytes::from_static(b"jobs"),
                queue: Some(Bytes::from_static(b"w")),
            });
            router.subscribe_route(&sub).unwrap();
        }
        let (subject, payload) = (Bytes::from_static(b"jobs"), Bytes::from_static(b"1"));
        let groups = [Bytes::from_static(b"w")];
        let msg = |route| RoutedMsg {
            subject: &subject,
            reply: None,
            headers: None,
            payload: &payload,
            hops: 0,
            remote: Some(FromRoute {
                queues: &groups,
                route,
            }),
        };
        let mut scratch = RouteScratch::default();
        // Chosen for `w` by the server behind r1, no local member: on to r2, not back.
        router.route(None, msg(100), &mut scratch);
        assert_eq!(queued(&r1), "");
        assert_eq!(queued(&r2), "RMSG $G jobs 0 1 1 w\r\n1\r\n");
        router.route(None, msg(200), &mut scratch);
        assert_eq!(queued(&r1), "RMSG $G jobs 0 1 1 w\r\n1\r\n");
        assert_eq!(queued(&r2), "");
        // A group it was not chosen for, and plain interest of routes, stay put.
        router.route(
            None,
            RoutedMsg {
                remote: Some(FromRoute {
                    queues: &[],
                    route: 100,
                }),
                ..msg(100)
            },
            &mut scratch,
        );
        assert_eq!(queued(&r2), "");
    }
}
