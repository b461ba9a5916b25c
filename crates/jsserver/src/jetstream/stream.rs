//! One stream's engine: it owns the stream's store and applies, in order, the publishes the
//! stream captures, the pulls and acks of its consumers, and the API operations on it.
//!
//! ```text
//!  PUB orders.1 ──▶ Router ──▶ Ingest (internal subscriber) ──▶ StreamSender: command queue
//!                                      │ engine free: this task applies the queue itself
//!                                      │ engine busy: its holder applies it before letting go
//!                                      │ fsync mode, API calls, timers: the stream thread
//!                                      ▼
//!                              engine: store_msg × batch, flush (one write)
//!                                      [fsync: sync=always], then PubAcks and deliveries
//! ```
//!
//! Commands go through one queue, and only the holder of the engine's lock takes them off it,
//! so they are applied in arrival order whoever applies them. Without fsync, the connection
//! task that captured a publish (or a pull, or an ack) applies it at once when the engine is
//! free, as nats-server processes a publish in the publisher's read loop: no thread hop, no
//! wake-up. With `sync_interval: always`, and for API calls and deadlines, the stream's thread
//! does the work, so no connection task waits on an fsync. Publishes that arrive together are
//! stored as one batch and made durable with one `write` (and, with `sync_interval: always`,
//! one fsync): group commit. A PubAck is sent only after the batch reached the OS (or the
//! disk), never before.

use std::cell::Cell;
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant, SystemTime};

use bytes::{Bytes, BytesMut};
use jsproto::api::pub_ack::PubAck;
use jsproto::api::stream::{
    DiscardPolicy, RetentionPolicy, StorageType, StreamConfig, StreamInfo, StreamInfoRequest,
    StreamState, SUBJECTS_LIMIT,
};
use jsproto::api::time::Timestamp;
use jsproto::api::ApiError;
use jsproto::headers;
use jsproto::stream::{Publish, StreamCore, StreamEvent};
use tracing::{debug, error, warn};

use super::ops::{StreamOp, StreamQuery};
use super::outbox::Outbox;
use crate::options::SyncPolicy;
use crate::router::{AtBurstEnd, BurstWork, InternalHandler, RoutedMsg};
use crate::store::{Discard, MsgStore, StoreError, StoreLimits};

/// Most commands the stream thread takes in one batch before it commits (flush + PubAcks).
const MAX_BATCH: usize = 4096;

/// Commands a stream's queue holds before a publisher waits for the engine and applies them
/// itself (back-pressure) instead of growing memory without bound.
pub const INGEST_CAPACITY: usize = 16 * 1024;

/// A publish captured for a stream.
pub struct Inbound {
    subject: Bytes,
    reply: Option<Bytes>,
    headers: Option<Bytes>,
    payload: Bytes,
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
    /// Stop the thread: sync the store, or delete it when `delete`.
    Stop {
        /// Remove the stream's files.
        delete: bool,
    },
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
}

/// The internal subscriber that hands captured publishes to the stream.
pub struct Ingest {
    tx: StreamSender,
}

impl Ingest {
    /// An ingest handler feeding `tx`.
    pub fn new(tx: StreamSender) -> Self {
        Ingest { tx }
    }
}

impl InternalHandler for Ingest {
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

thread_local! {
    /// Engines this thread holds the lock of (an engine's deliveries can reach another
    /// stream's ingest, or its own): such a thread must never block on an engine.
    static ENGINES_HELD: Cell<u32> = const { Cell::new(0) };
}

/// The command queue of a stream, under its own (briefly held) lock.
#[derive(Default)]
struct Queue {
    cmds: VecDeque<StreamCmd>,
    /// The stream thread is asked to run (work for it, or an earlier deadline).
    wake_thread: bool,
    /// The engine has stopped: commands are dropped.
    stopped: bool,
}

/// What a stream's senders and its thread share.
struct EngineCell {
    queue: Mutex<Queue>,
    /// Signals the stream thread ([`Queue::wake_thread`], [`Queue::stopped`]).
    ready: Condvar,
    engine: Mutex<StreamEngine>,
    /// Publishes, pulls and acks are applied by the task that sends them when the engine is
    /// free (no fsync before PubAcks); otherwise only the stream thread applies commands.
    inline: bool,
    /// When the sleeping stream thread will wake by itself, ns after `epoch` (`u64::MAX`:
    /// never); a sender that leaves an earlier deadline behind wakes it.
    thread_deadline: AtomicU64,
    epoch: Instant,
}

/// Holds an engine's lock and marks the thread as holding one.
struct Held<'a>(MutexGuard<'a, StreamEngine>);

impl<'a> Held<'a> {
    fn new(guard: MutexGuard<'a, StreamEngine>) -> Self {
        ENGINES_HELD.with(|n| n.set(n.get() + 1));
        Held(guard)
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        ENGINES_HELD.with(|n| n.set(n.get() - 1));
    }
}

impl EngineCell {
    fn queue(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().expect("stream queue lock poisoned")
    }

    /// Whether a sender may apply `cmd` itself. An ack that wants a confirmation waits for an
    /// fsync of the consumer state: that is the stream thread's to do, as are API calls and
    /// stops, and everything in fsync mode.
    fn may_inline(&self, cmd: &StreamCmd) -> bool {
        self.inline
            && matches!(
                cmd,
                StreamCmd::Publish(_) | StreamCmd::Pull { .. } | StreamCmd::Ack { reply: None, .. }
            )
    }

    /// Queues `cmd`; true when the caller should apply the queue (inline, or at its burst's
    /// end). A queue past [`INGEST_CAPACITY`] is applied here and now, waiting for the engine
    /// (back-pressure), unless this thread holds an engine already.
    fn push(&self, cmd: StreamCmd) -> bool {
        let inline = self.may_inline(&cmd);
        let backlog = {
            let mut q = self.queue();
            if q.stopped {
                return false;
            }
            q.cmds.push_back(cmd);
            if !inline && !q.wake_thread {
                q.wake_thread = true;
                self.ready.notify_one();
            }
            q.cmds.len()
        };
        if backlog > INGEST_CAPACITY && ENGINES_HELD.with(Cell::get) == 0 {
            self.combine(true);
            return false;
        }
        inline
    }

    /// Takes the engine (waiting for it when `block`) and applies what is queued (all of it
    /// when `block`, else what a sender may apply), until nothing of that is left after letting
    /// go of the engine or someone else holds it.
    fn combine(&self, mut block: bool) {
        loop {
            let guard = if block {
                self.engine.lock().expect("engine lock poisoned")
            } else {
                match self.engine.try_lock() {
                    Ok(g) => g,
                    Err(std::sync::TryLockError::WouldBlock) => return,
                    Err(std::sync::TryLockError::Poisoned(_)) => panic!("engine lock poisoned"),
                }
            };
            let mut engine = Held::new(guard);
            // A sender held back by a full queue applies all of it, whatever the command.
            if !self.apply_queued(&mut engine.0, block) {
                return;
            }
            // Deadlines set here (ack waits, pull expiries) that come before the sleeping
            // thread's own wake-up need the thread.
            if let Some(at) = engine.0.next_deadline() {
                let at = at.saturating_duration_since(self.epoch).as_nanos() as u64;
                if at < self.thread_deadline.load(Ordering::Acquire) {
                    self.thread_deadline.store(at, Ordering::Release);
                    let mut q = self.queue();
                    q.wake_thread = true;
                    self.ready.notify_one();
                }
            }
            drop(engine);
            // Senders that found the engine busy after our last look left their commands to us.
            if !self
                .queue()
                .cmds
                .front()
                .is_some_and(|c| self.may_inline(c))
            {
                return;
            }
            block = false;
        }
    }

    /// Applies queued commands in batches of up to [`MAX_BATCH`] until none are left, or,
    /// unless `all`, until the first command only the thread may apply (it has been woken for
    /// it; order is kept by leaving everything after it too). False when the engine stopped
    /// (the queue is then closed and the thread told).
    fn apply_queued(&self, engine: &mut StreamEngine, all: bool) -> bool {
        let mut batch = Vec::new();
        loop {
            {
                let mut q = self.queue();
                if q.stopped {
                    return false;
                }
                let n = if all {
                    q.cmds.len().min(MAX_BATCH)
                } else {
                    q.cmds
                        .iter()
                        .take(MAX_BATCH)
                        .take_while(|c| self.may_inline(c))
                        .count()
                };
                batch.extend(q.cmds.drain(..n));
            }
            if batch.is_empty() {
                return true;
            }
            if !engine.apply_batch(&mut batch) {
                let mut q = self.queue();
                q.stopped = true;
                q.cmds.clear();
                self.ready.notify_one();
                return false;
            }
        }
    }
}

impl AtBurstEnd for EngineCell {
    fn run(&self) {
        self.combine(false);
    }
}

/// The way into a stream: every command for it (publishes, pulls, acks, API calls) goes
/// through [`StreamSender::send`], which applies it in arrival order either on the calling
/// thread or on the stream's thread (see the module docs).
#[derive(Clone)]
pub struct StreamSender(Arc<EngineCell>);

/// A [`StreamSender`] that does not keep the stream alive (held by the stream's own internal
/// subscriptions, which the engine owns).
#[derive(Clone)]
pub struct WeakStreamSender(Weak<EngineCell>);

impl WeakStreamSender {
    /// [`StreamSender::send_at_burst_end`], if the stream still exists.
    pub fn send_at_burst_end(&self, cmd: StreamCmd, later: &mut BurstWork) {
        if let Some(core) = self.0.upgrade() {
            StreamSender(core).send_at_burst_end(cmd, later);
        }
    }
}

impl StreamSender {
    /// Puts `engine` behind a queue; [`StreamSender::run_thread`] must then run on a thread of
    /// its own.
    pub fn new(engine: StreamEngine) -> Self {
        StreamSender(Arc::new(EngineCell {
            queue: Mutex::new(Queue::default()),
            ready: Condvar::new(),
            inline: engine.sync != SyncPolicy::Always,
            engine: Mutex::new(engine),
            thread_deadline: AtomicU64::new(u64::MAX),
            epoch: Instant::now(),
        }))
    }

    /// A handle that does not keep the stream alive.
    pub fn downgrade(&self) -> WeakStreamSender {
        WeakStreamSender(Arc::downgrade(&self.0))
    }

    /// Runs `f` on the engine now, waiting for its lock (set-up before the thread starts).
    pub fn with_engine<T>(&self, f: impl FnOnce(&mut StreamEngine) -> T) -> T {
        f(&mut self.0.engine.lock().expect("engine lock poisoned"))
    }

    /// Queues `cmd`; then applies the queue here when the engine is free and the command may
    /// be applied inline, else leaves it to the engine's current holder or the stream thread.
    /// A queue past [`INGEST_CAPACITY`] makes the sender wait for the engine (back-pressure).
    /// Commands sent after the stream stopped are dropped.
    pub fn send(&self, cmd: StreamCmd) {
        if self.0.push(cmd) {
            self.0.combine(false);
        }
    }

    /// Like [`StreamSender::send`], but an inline command is applied at the end of the
    /// sender's burst (`later`), together with the rest of the burst: one write and one
    /// batch of PubAcks for all the publishes a connection's read brought in.
    pub fn send_at_burst_end(&self, cmd: StreamCmd, later: &mut BurstWork) {
        if self.0.push(cmd) {
            let work: Arc<dyn AtBurstEnd> = self.0.clone();
            later.add(&work);
        }
    }

    /// The stream thread's body: applies what senders leave to it (fsync mode, API calls),
    /// fires deadlines (ack waits, pull expiries, heartbeats, age expiry, periodic sync), and
    /// ends when the engine stops.
    pub fn run_thread(self) {
        let core = &self.0;
        loop {
            let deadline = {
                let mut engine = Held::new(core.engine.lock().expect("engine lock poisoned"));
                if !core.apply_queued(&mut engine.0, true) {
                    return;
                }
                let at = engine.0.tick();
                let nanos = at.map_or(u64::MAX, |at| {
                    at.saturating_duration_since(core.epoch).as_nanos() as u64
                });
                core.thread_deadline.store(nanos, Ordering::Release);
                at
            };
            let mut q = core.queue();
            // Commands queued while this thread held the engine found it busy: they are this
            // thread's to apply (their senders did not wait).
            while !q.wake_thread && !q.stopped && q.cmds.is_empty() {
                match deadline {
                    Some(at) => {
                        let now = Instant::now();
                        if at <= now {
                            break;
                        }
                        q = core
                            .ready
                            .wait_timeout(q, at - now)
                            .expect("stream queue lock poisoned")
                            .0;
                    }
                    None => q = core.ready.wait(q).expect("stream queue lock poisoned"),
                }
            }
            if q.stopped {
                return;
            }
            q.wake_thread = false;
        }
    }
}

/// One stream: its rules ([`StreamCore`]), store, consumers, and the PubAcks of the batch in
/// progress.
pub struct StreamEngine {
    /// The stream's rules, holding its stored config (with static metadata).
    pub core: StreamCore,
    /// When the stream was created.
    pub created: Timestamp,
    /// The message store.
    pub store: Box<dyn MsgStore>,
    /// Publishes replies and PubAcks.
    pub outbox: Outbox,
    /// The stream's directory (file storage), holding `meta.json` and `msgs/`.
    pub dir: Option<PathBuf>,
    shared: Arc<StreamShared>,
    sync: SyncPolicy,
    last_sync: Instant,
    unsynced: bool,
    /// The earliest deadline as of the last [`StreamEngine::tick`] (every change to the
    /// engine's state ends with one).
    next_at: Option<Instant>,
    /// PubAcks (reply subject, body) waiting for this batch's flush; seqs stored in the batch.
    acks: Vec<(Bytes, Vec<u8>)>,
    batch_seqs: Vec<u64>,
    /// What the core reported for the consumers, taken in order after each call.
    events: Vec<StreamEvent>,
    /// Messages left the stream in this batch: consumers must recount.
    removed_in_batch: bool,
    /// The store changed outside of publishes (retention removed acked messages): the next
    /// commit writes it before confirmations go out.
    pub(crate) store_dirty: bool,
    /// The stream's consumers.
    pub consumers: super::consumers::Consumers,
    /// This stream's own sender, for the internal subscriptions it makes.
    pub self_tx: Option<WeakStreamSender>,
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

/// The store limits a stream config asks for.
pub fn store_limits(config: &StreamConfig) -> StoreLimits {
    StoreLimits {
        max_msgs: config.max_msgs,
        max_bytes: config.max_bytes,
        max_age: config.max_age,
        max_msgs_per_subject: config.max_msgs_per_subject,
        max_msg_size: config.max_msg_size,
        discard: match config.discard {
            DiscardPolicy::Old => Discard::Old,
            DiscardPolicy::New => Discard::New,
        },
        discard_new_per_subject: config.discard_new_per_subject,
    }
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
        let core = StreamCore::new(config, store.as_mut(), unix_now());
        let engine = StreamEngine {
            core,
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
            events: Vec::new(),
            removed_in_batch: false,
            store_dirty: false,
            consumers: super::consumers::Consumers::default(),
            self_tx: None,
        };
        engine.publish_counters();
        engine
    }

    /// The stream's config as stored (with static metadata).
    pub fn config(&self) -> &StreamConfig {
        self.core.config()
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
        match cmd {
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
            StreamCmd::Stop { delete } => {
                self.commit();
                if delete {
                    // The stream's consumers go with it, as if each were deleted: their
                    // waiting pull requests get `409 Consumer Deleted` at once, and one
                    // `CONSUMER.DELETED` each goes out before the API thread's
                    // `STREAM.DELETED`, as nats-server does.
                    let names: Vec<String> = self.consumers.map.keys().cloned().collect();
                    for name in names {
                        self.remove_consumer(&name);
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
                    self.consumers_shutdown();
                    if let Err(err) = self.store.sync() {
                        error!(stream = %self.config().name, error = %err, "syncing the store at exit");
                    }
                }
                return false;
            }
        }
        true
    }

    /// The next instant the thread must wake without a command: age or TTL expiry, periodic
    /// sync, consumer deadlines; as computed by the last [`StreamEngine::tick`].
    fn next_deadline(&self) -> Option<Instant> {
        self.next_at
    }

    /// The earliest of the deadlines, as of `now`: one clock read for the wall-clock ones.
    fn compute_next_deadline(&self, now: Instant) -> Option<Instant> {
        let sync = match self.sync {
            SyncPolicy::Interval(every) if self.unsynced => Some(self.last_sync + every),
            _ => None,
        };
        let unix = unix_now();
        let at_unix = |at: u64| now + Duration::from_nanos(at.saturating_sub(unix));
        let expiry = self.core.next_expiry(self.store.as_ref()).map(at_unix);
        [sync, expiry, self.consumers_deadline()]
            .into_iter()
            .flatten()
            .min()
    }

    fn on_timer(&mut self) {
        if let SyncPolicy::Interval(every) = self.sync {
            if self.unsynced && self.last_sync.elapsed() >= every {
                self.sync_now();
            }
        }
        let now = unix_now();
        if self
            .core
            .next_expiry(self.store.as_ref())
            .is_some_and(|at| at <= now)
        {
            match self.core.expire(self.store.as_mut(), now, &mut self.events) {
                Ok(n) => debug!(stream = %self.config().name, n, "expired"),
                Err(err) => warn!(stream = %self.config().name, error = %err, "expiry failed"),
            }
            if !self.events.is_empty() {
                self.flush_removals();
                self.apply_events();
                // The batch's commit has already run: recount now, not at the next batch.
                if std::mem::take(&mut self.removed_in_batch) {
                    self.consumers_resync();
                }
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
    fn commit(&mut self) {
        if std::mem::take(&mut self.removed_in_batch) {
            self.consumers_resync();
        }
        self.commit_store();
        self.commit_consumers();
    }

    /// Ack confirmations wait for the consumer state holding them to be durable.
    fn commit_consumers(&mut self) {
        if self.consumers_need_commit() {
            self.persist_consumers(true);
        }
    }

    fn commit_store(&mut self) {
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
                self.core.revert(&taken_back);
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
            .consumers
            .store(self.consumers.map.len() as u64, Ordering::Relaxed);
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
        let publish = Publish {
            subject: &msg.subject,
            headers: msg.headers.as_deref(),
            payload: &msg.payload,
        };
        let result = self
            .core
            .publish(self.store.as_mut(), publish, unix_now(), &mut self.events);
        if let Ok(ack) = &result {
            if !ack.duplicate {
                self.batch_seqs.push(ack.seq);
            }
        }
        self.apply_events();
        result
    }

    /// Hands what the core reported to the consumers, in order: a stored message may be
    /// delivered (and, on an interest stream nobody wants it from, removed at once); removals
    /// make the consumers recount at the batch's commit.
    fn apply_events(&mut self) {
        let mut events = std::mem::take(&mut self.events);
        for event in events.drain(..) {
            match event {
                StreamEvent::Stored { seq, subject } => {
                    self.consumers_on_append(seq, &subject);
                    // Interest retention keeps a message only while a consumer wants it.
                    if self.config().retention == RetentionPolicy::Interest
                        && self.interest_done(seq, &subject)
                    {
                        let _ = self.store.remove(seq, false);
                    }
                }
                StreamEvent::Removed => self.removed_in_batch = true,
            }
        }
        self.events = events;
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
            consumer_count: self.consumers.map.len() as u64,
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
        found: Result<Option<crate::store::StoredMsg>, u16>,
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
            Err(408) => (
                Bytes::from_static(b"NATS/1.0 408 Empty Request\r\n\r\n"),
                Bytes::new(),
            ),
            Err(_) => (
                Bytes::from_static(b"NATS/1.0 408 Bad Request\r\n\r\n"),
                Bytes::new(),
            ),
        };
        self.outbox.publish(reply, Some(&headers), &payload);
    }
}

/// Whether a config is stored in memory.
pub fn is_memory(config: &StreamConfig) -> bool {
    config.storage == StorageType::Memory
}
