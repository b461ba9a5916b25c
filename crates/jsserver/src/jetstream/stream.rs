//! One stream's engine: it owns the stream's store and applies, in order, the publishes the
//! stream captures, the pulls and acks of its consumers, and the API operations on it.
//!
//! ```text
//!  PUB orders.1 ──▶ Router ──▶ Ingest (internal subscriber) ──▶ StreamSender: command queue
//!                                      │ engine free: this task applies the queue itself
//!                                      │ engine busy: its holder applies it before letting go
//!                                      │ fsync mode, API operations, timers: the stream thread
//!                                      ▼
//!                              engine: StreamCore::publish × batch, flush (one write)
//!                                      [fsync: sync=always], then PubAcks and deliveries
//! ```
//!
//! The queue and who applies it are [`super::owner`]'s (generic, tested on its own); this
//! file is what a batch does. The rules of a publish (expectations, dedup, rollup, TTL,
//! limits) are [`StreamCore`](jsproto::stream::StreamCore)'s, in jsproto; the engine adds the IO around them. Publishes
//! that arrive together are stored as one batch and made durable with one `write` (and, with
//! `sync_interval: always`, one fsync): group commit. A PubAck is sent only after the batch
//! reached the OS (or the disk), never before. API operations arrive as typed commands
//! ([`super::ops`]).

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use bytes::{Bytes, BytesMut};
use jsproto::api::pub_ack::PubAck;
use jsproto::api::stream::{
    StorageType, StreamConfig, StreamInfo, StreamInfoRequest, StreamState, SUBJECTS_LIMIT,
};
use jsproto::api::time::Timestamp;
use jsproto::api::ApiError;
use jsproto::headers;
use jsproto::stream::{Publish, Stream};
use tracing::{debug, error, warn};

use super::ops::{StreamOp, StreamQuery};
use super::outbox::Outbox;
use super::owner::{Owned, Sender, WeakSender};
use crate::options::SyncPolicy;
use crate::router::{BurstWork, InternalHandler, RoutedMsg};
use crate::store::{MsgStore, StoreError, StoreLimits};

/// Commands a stream's queue holds before a publisher waits for the engine and applies them
/// itself (back-pressure) instead of growing memory without bound.
pub const INGEST_CAPACITY: usize = 16 * 1024;

/// A publish captured for a stream.
pub struct Inbound {
    pub(super) subject: Bytes,
    pub(super) reply: Option<Bytes>,
    pub(super) headers: Option<Bytes>,
    pub(super) payload: Bytes,
}

impl Inbound {
    /// The publish `msg` as the stream takes it.
    pub fn of(msg: &RoutedMsg<'_>) -> Inbound {
        Inbound {
            subject: msg.subject.clone(),
            reply: msg.reply.cloned(),
            headers: msg.headers.cloned(),
            payload: msg.payload.clone(),
        }
    }
}

/// Work for a stream's thread.
pub enum StreamCmd {
    /// Store a captured publish.
    Publish(Inbound),
    /// An API operation; it answers on its reply subject ([`StreamOp`]).
    Op(StreamOp),
    /// A question from the API thread, answered on its channel ([`StreamQuery`]).
    Query(StreamQuery),
    /// A pull request (`CONSUMER.MSG.NEXT`) for a consumer of this stream.
    Pull {
        /// Consumer name.
        consumer: Arc<str>,
        /// Where deliveries and statuses go.
        reply: Bytes,
        /// The request body.
        body: Bytes,
    },
    /// An ack (`$JS.ACK.<stream>.<consumer>.…`).
    Ack {
        /// Consumer name.
        consumer: Arc<str>,
        /// The ack subject (carries the sequences).
        subject: Bytes,
        /// `+ACK`, `-NAK`, `+WPI`, `+TERM`, ... or empty.
        payload: Bytes,
        /// Set when the acker wants a confirmation (`ack_sync`, `double_ack`).
        reply: Option<Bytes>,
    },
    /// A push consumer's deliver subject may have gained or lost interest (the router's
    /// [`crate::router::InterestWatcher`] call): read it again.
    Interest {
        /// Consumer name.
        consumer: Arc<str>,
    },
    /// A message on a push consumer's `$JS.FC.<stream>.<consumer>.*`: a flow-control answer.
    FlowControl {
        /// Consumer name.
        consumer: Arc<str>,
        /// The subject it arrived on (the request's reply subject).
        subject: Bytes,
    },
    /// A Raft message for a replicated stream's group, from a peer.
    Raft(Bytes),
    /// Bytes of a snapshot's data file for the stream's group, from a peer, at an offset.
    RaftSnapshotPart(crate::cluster::SnapshotPart),
    /// `STREAM.LEADER.STEPDOWN` or `CONSUMER.LEADER.STEPDOWN` (a consumer's leader is its
    /// stream's): hand leadership to another replica (`preferred`, or the most up-to-date),
    /// answering with `consumer` set for a consumer's request.
    StepDown {
        /// The server asked for, if any.
        preferred: Option<String>,
        /// The consumer, for `CONSUMER.LEADER.STEPDOWN`.
        consumer: Option<String>,
        /// Where to answer.
        reply: Option<Bytes>,
    },
    /// A replicated stream's servers from now on (the meta group changed them): its
    /// leader adds and removes members one at a time until the group is these.
    SetPeers(Vec<String>),
    /// Stop the thread: sync the store, or delete it when `delete`.
    Stop {
        /// Remove the stream's files.
        delete: bool,
        /// A stream of one replica becoming replicated: answer with the snapshot its group
        /// starts from, taken after everything before the stop was applied (its waiting
        /// pull requests carry over instead of being ended).
        seed: Option<SeedRequest>,
    },
}

/// A seeding stop ([`StreamCmd::Stop`]): the stream writes the Raft log its group starts
/// from, its whole state as the snapshot at index 1 with `me` the only member, to
/// `raft_dir` (through a temporary directory renamed into place: a crash leaves either no
/// log or the whole one), then answers.
pub struct SeedRequest {
    /// The replicated stream's epoch ([`super::replica::Replica::epoch_for`]).
    pub epoch: jsproto::stream::Epoch,
    /// The stream's Raft log directory (must not exist yet).
    pub raft_dir: std::path::PathBuf,
    /// This server's name: the group's first member.
    pub me: String,
    /// Whether the log was written.
    pub answer: std::sync::mpsc::SyncSender<anyhow::Result<()>>,
}

/// Counters other threads read without asking the stream thread (account usage).
#[derive(Debug, Default)]
pub struct StreamShared {
    /// Messages stored.
    pub msgs: AtomicU64,
    /// Bytes stored (the store's own count).
    pub bytes: AtomicU64,
    /// Consumers on the stream.
    pub consumers: AtomicU64,
    /// Whether this server serves the stream's requests: always for a stream of one
    /// replica, the Raft leader's for a replicated one.
    pub leader: std::sync::atomic::AtomicBool,
    /// The first and last sequence stored.
    pub first_seq: AtomicU64,
    /// See `first_seq`.
    pub last_seq: AtomicU64,
    /// A replicated stream's leader as this replica knows it (empty: none known, or one
    /// replica).
    pub leader_name: std::sync::Mutex<String>,
}

impl StreamShared {
    /// [`StreamShared::leader_name`] now.
    pub fn leader_name(&self) -> String {
        self.leader_name
            .lock()
            .expect("leader lock poisoned")
            .clone()
    }
}

/// The internal subscriber that hands captured publishes to the stream.
pub struct Ingest {
    tx: StreamSender,
    clustered: bool,
}

impl Ingest {
    /// An ingest handler feeding `tx`; `clustered`: it takes the publishes of the whole
    /// cluster ([`InternalHandler::clustered`]).
    pub fn new(tx: StreamSender, clustered: bool) -> Self {
        Ingest { tx, clustered }
    }
}

impl InternalHandler for Ingest {
    fn clustered(&self) -> bool {
        self.clustered
    }

    fn on_message(&self, msg: RoutedMsg<'_>, later: &mut BurstWork) {
        self.tx.send_at_burst_end(
            StreamCmd::Publish(Inbound {
                subject: msg.subject.clone(),
                reply: msg.reply.cloned(),
                headers: msg.headers.cloned(),
                payload: msg.payload.clone(),
            }),
            later,
        );
    }
}

/// The way into a stream: every command for it (publishes, pulls, acks, API operations)
/// goes through [`StreamSender::send`], which applies it in arrival order either on the
/// calling thread or on the stream's thread ([`super::owner`]).
pub type StreamSender = Sender<StreamEngine>;

/// A [`StreamSender`] that does not keep the stream alive (held by the stream's own internal
/// subscriptions, which the engine owns).
pub type WeakStreamSender = WeakSender<StreamEngine>;

/// Puts `engine` behind its command queue; [`Sender::run_thread`] must then run on a thread
/// of its own. Publishes, pulls and plain acks are applied by their senders unless the
/// stream syncs before each PubAck (`sync_interval: always`).
pub fn stream_sender(engine: StreamEngine) -> StreamSender {
    // A replicated stream's inputs become log entries on its own thread.
    let inline = engine.sync != SyncPolicy::Always && engine.replica.is_none();
    Sender::new(engine, inline, INGEST_CAPACITY)
}

impl Owned for StreamEngine {
    type Cmd = StreamCmd;

    /// An ack that wants a confirmation waits for an fsync of the consumer state: that is the
    /// stream thread's to do, as are API operations, stops and a push consumer's interest
    /// changes (a subscribing client's task does not deliver a push consumer's backlog).
    fn inline(cmd: &StreamCmd) -> bool {
        matches!(
            cmd,
            StreamCmd::Publish(_)
                | StreamCmd::Pull { .. }
                | StreamCmd::Ack { reply: None, .. }
                | StreamCmd::FlowControl { .. }
        )
    }

    fn apply_batch(&mut self, batch: &mut Vec<StreamCmd>) -> bool {
        StreamEngine::apply_batch(self, batch)
    }

    fn tick(&mut self) -> Option<Instant> {
        StreamEngine::tick(self)
    }

    /// The next instant the thread must wake without a command: age or TTL expiry, periodic
    /// sync, consumer deadlines; as computed by the last `StreamEngine::tick`.
    fn next_deadline(&self) -> Option<Instant> {
        self.next_at
    }
}

/// One stream: its state machine ([`Stream`]: rules and consumers), store, and the PubAcks of the batch in
/// progress.
pub struct StreamEngine {
    /// The stream's rules, holding its stored config (with static metadata).
    pub stream: Stream,
    /// When the stream was created.
    pub created: Timestamp,
    /// The message store.
    pub store: Box<dyn MsgStore>,
    /// Publishes replies and PubAcks.
    pub outbox: Outbox,
    /// The stream's directory (file storage), holding `meta.json` and `msgs/`.
    pub dir: Option<PathBuf>,
    pub(super) shared: Arc<StreamShared>,
    sync: SyncPolicy,
    last_sync: Instant,
    unsynced: bool,
    /// The earliest deadline as of the last `StreamEngine::tick` (every change to the
    /// engine's state ends with one).
    next_at: Option<Instant>,
    /// PubAcks (reply subject, body) waiting for this batch's flush; seqs stored in the batch.
    pub(super) acks: Vec<(Bytes, Vec<u8>)>,
    pub(super) batch_seqs: Vec<u64>,
    /// The store changed outside of publishes (retention removed acked messages): the next
    /// commit writes it before confirmations go out.
    pub(crate) store_dirty: bool,
    /// The IO around the stream's consumers (router ties, held ack confirmations).
    pub consumers: super::consumers::Consumers,
    /// This stream's own sender, for the internal subscriptions it makes.
    pub self_tx: Option<WeakStreamSender>,
    /// The account's limit for this stream's storage type (`max_storage` for a file stream,
    /// `max_memory` for a memory one), when it has one: a publish that would take the
    /// account's use of that storage past it is refused with 10002.
    account_cap: Option<u64>,
    /// A replicated stream's Raft group ([`super::replica`]); `None` for one replica.
    pub replica: Option<Box<super::replica::Replica>>,
}

/// Nanoseconds since the Unix epoch, now.
pub fn unix_now() -> u64 {
    crate::connection::unix_nanos(SystemTime::now())
}

/// A Unix-nanosecond time as a JetStream timestamp (0 = the zero time).
pub fn timestamp(ns: u64) -> Timestamp {
    if ns == 0 {
        Timestamp::ZERO
    } else {
        Timestamp::from_unix_nanos(ns)
    }
}

/// The store limits a stream config asks for ([`StoreLimits::of`]).
pub fn store_limits(config: &StreamConfig) -> StoreLimits {
    StoreLimits::of(config)
}

impl StreamEngine {
    /// An engine over an opened store; the core rebuilds the dedup window, TTL schedule and
    /// markers from the stored messages.
    pub fn new(
        config: StreamConfig,
        created: Timestamp,
        mut store: Box<dyn MsgStore>,
        dir: Option<PathBuf>,
        outbox: Outbox,
        shared: Arc<StreamShared>,
        sync: SyncPolicy,
    ) -> Self {
        let account_cap = outbox.account().jetstream_limits().and_then(|l| {
            let cap = if is_memory(&config) {
                l.max_memory
            } else {
                l.max_storage
            };
            u64::try_from(cap).ok()
        });
        let stream = Stream::new(config, store.as_mut(), unix_now());
        let engine = StreamEngine {
            account_cap,
            stream,
            created,
            store,
            outbox,
            dir,
            shared,
            sync,
            last_sync: Instant::now(),
            unsynced: false,
            next_at: None,
            acks: Vec::new(),
            batch_seqs: Vec::new(),
            store_dirty: false,
            consumers: super::consumers::Consumers::default(),
            self_tx: None,
            replica: None,
        };
        engine.shared.leader.store(true, Ordering::Relaxed);
        engine.publish_counters();
        engine
    }

    /// The stream's config as stored (with static metadata).
    pub fn config(&self) -> &StreamConfig {
        self.stream.config()
    }

    /// This server's cluster name (`cluster { name }`), empty when it is not in a cluster:
    /// the `name` of the stream's cluster block.
    pub(super) fn cluster_name(&self) -> String {
        self.outbox
            .server()
            .cluster()
            .map(|c| c.name().to_string())
            .unwrap_or_default()
    }

    /// Applies a batch of commands, then commits it (one write, PubAcks), fires due deadlines
    /// and flushes the outbox. False when a command stopped the engine.
    fn apply_batch(&mut self, batch: &mut Vec<StreamCmd>) -> bool {
        for cmd in batch.drain(..) {
            if !self.handle(cmd) {
                self.outbox.flush();
                return false;
            }
        }
        self.commit();
        self.tick();
        true
    }

    /// Fires due deadlines (a busy stream never lets its thread sleep to them), then flushes
    /// the outbox.
    /// Returns the next deadline after them ([`StreamEngine::next_deadline`]).
    fn tick(&mut self) -> Option<Instant> {
        if self.replica.is_some() {
            // A replicated stream's deadlines are its leader's Tick entries.
            let next = self.drive_replica();
            self.next_at = next;
            self.outbox.flush();
            return next;
        }
        let now = Instant::now();
        let mut next = self.compute_next_deadline(now);
        if next.is_some_and(|at| at <= now) {
            self.on_timer();
            next = self.compute_next_deadline(Instant::now());
        }
        self.next_at = next;
        self.outbox.flush();
        next
    }

    /// Applies one command; false when the thread must end now.
    fn handle(&mut self, cmd: StreamCmd) -> bool {
        if self.replica.is_some() && !matches!(cmd, StreamCmd::Stop { .. }) {
            self.handle_replicated(cmd);
            return true;
        }
        match cmd {
            StreamCmd::Raft(_) | StreamCmd::RaftSnapshotPart(..) | StreamCmd::SetPeers(_) => {}
            StreamCmd::StepDown {
                consumer, reply, ..
            } => {
                // One replica: the leader stays, as nats-server answers an R1 step-down.
                self.step_down_answer(consumer.as_deref(), reply.as_ref(), Ok(()));
            }
            StreamCmd::Publish(msg) => self.ingest(msg),
            StreamCmd::Pull {
                consumer,
                reply,
                body,
            } => self.on_pull(&consumer, reply, &body),
            StreamCmd::Ack {
                consumer,
                subject,
                payload,
                reply,
            } => {
                self.on_ack_msg(&consumer, &subject, &payload, reply);
            }
            StreamCmd::Interest { consumer } => self.on_delivery_interest(&consumer),
            StreamCmd::FlowControl { consumer, subject } => {
                self.on_flow_control(&consumer, &subject);
            }
            StreamCmd::Op(op) => {
                // What the batch stored so far is confirmed before the operation sees it.
                self.commit();
                self.apply_op(op);
                self.publish_counters();
            }
            StreamCmd::Query(query) => {
                self.commit();
                self.answer(query);
                self.publish_counters();
            }
            StreamCmd::Stop { delete, seed } => {
                self.commit();
                if self.replica.is_some() {
                    self.stop_replica();
                }
                if let Some(seed) = seed {
                    let _ = seed.answer.send(self.seed_raft_log(&seed));
                    if let Err(err) = self.store.sync() {
                        error!(stream = %self.config().name, error = %err, "syncing the store at exit");
                    }
                    return false;
                }
                if delete {
                    // The stream's consumers go with it, as if each were deleted: their
                    // waiting pull requests get `409 Consumer Deleted` at once, and one
                    // `CONSUMER.DELETED` each goes out before the API thread's
                    // `STREAM.DELETED`, as nats-server does. (A replicated stream's
                    // followers say nothing: its leader does, once.)
                    if self.replica.as_ref().is_none_or(|r| r.group().is_leader()) {
                        let names = self.stream.consumers().names();
                        for name in names {
                            self.remove_consumer(&name);
                        }
                    }
                    let store = std::mem::replace(
                        &mut self.store,
                        Box::new(crate::store::MemoryStore::new(StoreLimits::default())),
                    );
                    if let Err(err) = store.delete_all() {
                        warn!(stream = %self.config().name, error = %err, "removing the store");
                    }
                    if let Some(dir) = &self.dir {
                        let _ = std::fs::remove_dir_all(dir);
                    }
                } else {
                    // (A follower's waiting requests are its leader's to end.)
                    if self.replica.as_ref().is_none_or(|r| r.group().is_leader()) {
                        self.consumers_shutdown();
                    }
                    if let Err(err) = self.store.sync() {
                        error!(stream = %self.config().name, error = %err, "syncing the store at exit");
                    }
                }
                return false;
            }
        }
        true
    }

    /// The earliest of the deadlines, as of `now`: one clock read for the wall-clock ones.
    fn compute_next_deadline(&self, now: Instant) -> Option<Instant> {
        let sync = match self.sync {
            SyncPolicy::Interval(every) if self.unsynced => Some(self.last_sync + every),
            _ => None,
        };
        let next = self
            .stream
            .poll_timeout(self.store.as_ref(), now, unix_now());
        [sync, next].into_iter().flatten().min()
    }

    fn on_timer(&mut self) {
        if let SyncPolicy::Interval(every) = self.sync {
            if self.unsynced && self.last_sync.elapsed() >= every {
                self.sync_now();
            }
        }
        let now = unix_now();
        if self
            .stream
            .core()
            .next_expiry(self.store.as_ref())
            .is_some_and(|at| at <= now)
        {
            let account = Arc::clone(self.outbox.account());
            let router = account.router();
            let interest = |reply: &[u8]| router.has_interest(reply);
            let result = self
                .stream
                .expire(self.store.as_mut(), now, &interest, Instant::now());
            let expired = match result {
                Ok(n) => {
                    debug!(stream = %self.config().name, n, "expired");
                    n > 0
                }
                Err(err) => {
                    warn!(stream = %self.config().name, error = %err, "expiry failed");
                    false
                }
            };
            self.run_output();
            if expired || self.stream.recount_due() {
                self.flush_removals();
                // The batch's commit has already run: recount now, not at the next batch.
                self.recount();
                self.publish_counters();
            }
        }
        self.consumers_on_timer();
        self.commit_consumers();
    }

    /// Hands the removal records that expiry wrote to the OS, so that a `kill -9` does not
    /// bring the messages back (a marker brought back would be expired again and, before
    /// that, delivered again). No fsync of its own: a removal lost with the machine is made
    /// again at start-up from the messages' ages and TTLs.
    fn flush_removals(&mut self) {
        if let SyncPolicy::Interval(_) = self.sync {
            self.unsynced = true;
        }
        if let Err(err) = self.store.flush() {
            warn!(stream = %self.config().name, error = %err, "writing expiry removals failed");
        }
    }

    fn sync_now(&mut self) {
        match self.store.sync() {
            Ok(()) => {
                self.unsynced = false;
                self.last_sync = Instant::now();
            }
            Err(err) => error!(stream = %self.config().name, error = %err, "fsync failed"),
        }
    }

    /// Makes the batch durable as configured, then sends its PubAcks; on a write failure the
    /// batch's messages are taken back out and every publisher gets an error instead.
    pub(super) fn commit(&mut self) {
        self.recount();
        self.commit_store();
        self.commit_consumers();
    }

    /// Ack confirmations wait for the consumer state holding them to be durable.
    pub(super) fn commit_consumers(&mut self) {
        if self.consumers_need_commit() {
            self.persist_consumers(true);
        }
    }

    pub(super) fn commit_store(&mut self) {
        if self.acks.is_empty() && self.batch_seqs.is_empty() {
            if std::mem::take(&mut self.store_dirty) {
                // Removals made by acks (work-queue, interest retention) reach the OS before the
                // ack confirmations of this batch are sent.
                if let Err(err) = self.write_through() {
                    error!(stream = %self.config().name, error = %err, "writing removals failed");
                }
            }
            return;
        }
        self.store_dirty = false;
        let result = match self.sync {
            SyncPolicy::Always => self.store.sync(),
            SyncPolicy::Interval(_) => self.store.flush(),
        };
        match result {
            Ok(()) => {
                if self.sync == SyncPolicy::Always {
                    self.last_sync = Instant::now();
                } else {
                    self.unsynced = true;
                }
                for (reply, body) in std::mem::take(&mut self.acks) {
                    self.outbox.reply(&reply, body);
                }
            }
            Err(err) => {
                error!(stream = %self.config().name, error = %err, "writing messages failed");
                let taken_back = std::mem::take(&mut self.batch_seqs);
                for &seq in &taken_back {
                    let _ = self.store.remove(seq, false);
                }
                // A retry with the same Nats-Msg-Id must be stored, not called a duplicate.
                self.stream.core_mut().revert(&taken_back);
                let body =
                    PubAck::encode_error(&self.config().name, &ApiError::stream_store_failed(&err));
                for (reply, _) in std::mem::take(&mut self.acks) {
                    self.outbox.reply(&reply, body.clone());
                }
            }
        }
        self.batch_seqs.clear();
        self.publish_counters();
    }

    /// Publishes the counters other threads read (account usage, monitoring).
    pub(crate) fn publish_counters(&self) {
        let state = self.store.state();
        self.shared.msgs.store(state.msgs, Ordering::Relaxed);
        self.shared.bytes.store(state.bytes, Ordering::Relaxed);
        self.shared
            .first_seq
            .store(state.first_seq, Ordering::Relaxed);
        self.shared
            .last_seq
            .store(state.last_seq, Ordering::Relaxed);
        self.shared
            .consumers
            .store(self.stream.consumers().len() as u64, Ordering::Relaxed);
    }

    /// Stores one captured publish and queues its PubAck (or error).
    fn ingest(&mut self, msg: Inbound) {
        let result = self.try_store(&msg);
        if self.config().no_ack {
            return;
        }
        let Some(reply) = msg.reply else { return };
        let body = match result {
            Ok(ack) => ack.encode(),
            Err(err) => PubAck::encode_error(&self.config().name, &err),
        };
        self.acks.push((reply, body));
    }

    fn try_store(&mut self, msg: &Inbound) -> Result<PubAck, ApiError> {
        if let Some(cap) = self.account_cap {
            self.check_account_storage(cap, msg)?;
        }
        let publish = Publish {
            subject: &msg.subject,
            headers: msg.headers.as_deref(),
            payload: &msg.payload,
        };
        let account = Arc::clone(self.outbox.account());
        let router = account.router();
        let interest = |reply: &[u8]| router.has_interest(reply);
        let now = Instant::now();
        let result = self
            .stream
            .publish(self.store.as_mut(), publish, unix_now(), &interest, now);
        self.run_output_at(now);
        if let Ok(ack) = &result {
            if !ack.duplicate {
                self.batch_seqs.push(ack.seq);
            }
        }
        result
    }

    /// 10002 when storing `msg` would take the account's use of this stream's storage type
    /// past `cap`: the other streams' bytes as they last published them, plus this stream's
    /// bytes now, plus the message's stored size (nats-server's `wouldExceedLimits`).
    pub(super) fn check_account_storage(&self, cap: u64, msg: &Inbound) -> Result<(), ApiError> {
        let memory = is_memory(self.config());
        let hdr = msg.headers.as_ref().map_or(0, |h| h.len());
        let size = if memory {
            jsproto::stream::store::memory_msg_size(msg.subject.len(), hdr, msg.payload.len())
        } else {
            jsproto::stream::store::file_msg_size(msg.subject.len(), hdr, msg.payload.len())
        };
        let others = self
            .outbox
            .account()
            .jetstream_stats()
            .map_or(0, |stats| stats.bytes_used(memory, &self.shared));
        let used = others + self.store.state().bytes;
        if used.saturating_add(size) > cap {
            return Err(ApiError::account_resources_exceeded());
        }
        Ok(())
    }

    /// The account's storage cap for this stream's storage type, if any.
    pub(super) fn account_cap(&self) -> Option<u64> {
        self.account_cap
    }

    /// Makes the consumers recount if messages left the stream since they last did
    /// ([`Stream::recount`]), and carries out what they asked for.
    pub(crate) fn recount(&mut self) {
        let account = Arc::clone(self.outbox.account());
        let router = account.router();
        let interest = |reply: &[u8]| router.has_interest(reply);
        if self.stream.recount(&*self.store, &interest, Instant::now()) {
            self.run_output();
        }
    }

    /// The stream's info: config (as stored), state and, when asked, per-subject counts and
    /// deleted sequences. Returns `(info, total subjects)` for the response's paging fields.
    pub fn info(&self, req: &StreamInfoRequest) -> (StreamInfo, usize) {
        let s = self.store.state();
        let mut state = StreamState {
            messages: s.msgs,
            bytes: s.bytes,
            first_seq: s.first_seq,
            first_ts: timestamp(s.first_ts),
            last_seq: s.last_seq,
            last_ts: timestamp(s.last_ts),
            num_subjects: s.num_subjects,
            num_deleted: s.num_deleted,
            consumer_count: self.stream.consumers().len() as u64,
            ..StreamState::default()
        };
        let mut total = 0;
        if !req.subjects_filter.is_empty() {
            let all = self.store.subjects_state(&req.subjects_filter);
            total = all.len();
            state.subjects = all
                .into_iter()
                .skip(req.offset)
                .take(SUBJECTS_LIMIT)
                .collect();
        }
        if req.deleted_details {
            state.deleted = self.store.deleted();
        }
        let info = StreamInfo {
            config: self.config().clone(),
            created: self.created,
            state,
            ts: timestamp(unix_now()),
            ..StreamInfo::default()
        };
        (info, total)
    }

    /// Writes what the store holds in memory to the OS, and to the disk with
    /// `sync_interval: always`: the same promise a PubAck makes, for API changes (message
    /// delete, purge) that are about to be confirmed.
    ///
    /// # Errors
    /// The store's write or fsync error.
    pub fn write_through(&mut self) -> Result<(), StoreError> {
        match self.sync {
            SyncPolicy::Always => self.store.sync(),
            SyncPolicy::Interval(_) => {
                self.unsynced = true;
                self.store.flush()
            }
        }
    }

    /// Replies `body` to `reply`, if the request had one.
    pub fn respond(&mut self, reply: Option<&Bytes>, body: Vec<u8>) {
        if let Some(reply) = reply {
            self.outbox.reply(reply, body);
        }
    }

    /// Answers a DIRECT.GET with the stored message and its `Nats-*` headers, or a status.
    pub fn direct_reply(
        &mut self,
        reply: &Bytes,
        found: Result<Option<crate::store::StoredMsg>, super::ops::DirectGetError>,
    ) {
        let (headers, payload) = match found {
            Ok(Some(m)) => {
                let mut block = BytesMut::new();
                match &m.headers {
                    // The stored block ends with the blank line: add ours before it.
                    Some(h) if h.len() >= 4 => block.extend_from_slice(&h[..h.len() - 2]),
                    _ => block.extend_from_slice(b"NATS/1.0\r\n"),
                }
                for (k, v) in [
                    (headers::STREAM, self.config().name.clone()),
                    (headers::SUBJECT, m.subject.to_string()),
                    (headers::SEQUENCE, m.seq.to_string()),
                    (headers::TIME_STAMP, timestamp(m.ts).to_string()),
                ] {
                    block.extend_from_slice(k.as_bytes());
                    block.extend_from_slice(b": ");
                    block.extend_from_slice(v.as_bytes());
                    block.extend_from_slice(b"\r\n");
                }
                block.extend_from_slice(b"\r\n");
                (block.freeze(), m.payload)
            }
            Ok(None) => (
                Bytes::from_static(b"NATS/1.0 404 Message Not Found\r\n\r\n"),
                Bytes::new(),
            ),
            Err(err) => (Bytes::from_static(err.header_block()), Bytes::new()),
        };
        self.outbox.publish(reply, Some(&headers), &payload);
    }
}

/// Whether a config is stored in memory.
pub fn is_memory(config: &StreamConfig) -> bool {
    config.storage == StorageType::Memory
}
