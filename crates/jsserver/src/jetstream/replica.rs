//! A replicated stream (`num_replicas` > 1 in a cluster): the stream's Raft group and how
//! its engine turns inputs into log entries and applies what the group committed.
//!
//! ```text
//!  leader:   publish / pull / ack / API op ──▶ Entry (time chosen here) ──▶ propose
//!  every replica:  committed Entry ──▶ Stream::apply_entry ──▶ store, consumers
//!  leader:   ... then the PubAck, deliveries, ack confirmations, API answers
//! ```
//!
//! Every input that changes the stream or its consumers is a [`jsproto::stream::Entry`]
//! (`docs/cluster.md`): the leader appends it, and each replica, the leader included,
//! applies it only once a majority of the group stored it. So a PubAck, a confirmed ack or
//! an API answer is sent only for what a majority holds, and survives the loss of any
//! minority of the replicas. Followers drop what applying produces (deliveries, answers);
//! only the leader subscribes to the stream's subjects, its consumers' pull and ack
//! subjects and its direct gets, for the whole cluster, and takes the subscriptions over
//! when it wins an election.
//!
//! Time: the leader stamps each entry ([`EntryTime`]); `mono_ns` counts from the stream's
//! creation (its [`Epoch`]), so every replica's `base` is its own `Instant` for that
//! moment, and a replica applies each entry no earlier than the one before it (the log's
//! order decides, the same on every replica). Deadlines (ack wait, expiry, heartbeats) are
//! the leader's: when [`Stream::poll_timeout`](jsproto::stream::Stream::poll_timeout) comes,
//! it appends [`Op::Tick`].
//!
//! Restart: the Raft log is the stream's truth. A replica that starts (after a crash, or
//! with an empty disk) empties its message store, restores its last snapshot if it has one,
//! and applies the group's log after it, from its own disk and then from the leader.
//!
//! Snapshots: each replica, on its own, snapshots the stream once its log since the last
//! snapshot holds at least [`SNAPSHOT_MIN_ENTRIES`] stream entries (counted one by one, not
//! by Raft entries, which each hold a turn's batch of them) and at least as many as the
//! stream has messages (so the O(messages) snapshot is paid for by the entries it drops):
//! the whole state after the last entry applied and the messages
//! ([`jsproto::stream::snapshot`]), written a message at a time to a data file in the
//! group's directory and fsynced, then the log up to it is dropped
//! ([`RaftGroup::compact_with`]). A replica that needs entries the leader dropped (it was
//! away, or lost its disk) is sent the leader's snapshot, replaces its store and state with
//! it, and goes on from the entries after it. The data file goes over a route in parts
//! (`RAFTS`, [`crate::cluster::RAFT_PART_BYTES`] each), read from disk as they go and
//! written to disk as they come, then the Raft message naming it; the replica restores
//! from the file. No snapshot is ever whole in memory, so a stream of any size is
//! snapshotted; the same goes for the first snapshot of a stream of one replica that
//! becomes replicated (`num_replicas` raised from 1), which the stream writes into its new
//! Raft log as it stops ([`super::stream::SeedRequest`]).

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use jsproto::api::advisory::ConsumerAction;
use jsproto::api::consumer::{
    ConsumerCreateResponse, ConsumerDeleteResponse, ConsumerPauseResponse, ConsumerResetResponse,
    ConsumerUnpinResponse,
};
use jsproto::api::pub_ack::PubAck;
use jsproto::api::stream::{
    ClusterInfo, StreamConfig, StreamMsgDeleteResponse, StreamPurgeResponse,
};
use jsproto::api::{encode_error, encode_ok, ApiError, ApiResponse};
use jsproto::stream::{Entry, EntryBatch, EntryOutcome, EntryTime, Epoch, Op};
use tracing::{debug, error, info, warn};

use super::ops::StreamOp;
use super::stream::{unix_now, StreamCmd, StreamEngine, WeakStreamSender};
use crate::cluster::group::{node_id, Committed, RaftGroup, TICK};
use crate::cluster::RaftInbox;
use crate::router::{BurstWork, InternalHandler, RoutedMsg};

/// Entries since the last snapshot before a replica takes one (and at least as many as
/// the stream has messages).
pub const SNAPSHOT_MIN_ENTRIES: u64 = 8192;

/// How often the leader looks for waiting pull requests whose requester went.
pub const GONE_CHECK: Duration = Duration::from_millis(250);

/// A learner within this many entries of the commit index has caught up and becomes a
/// voter (under load the commit index moves on while it catches up).
pub const LEARNER_CAUGHT_UP: u64 = 100;

/// A replica the meta group no longer gives the stream leaves once its group removed it
/// (the leader tells a removed member that stored the change: `RaftGroup`'s last
/// heartbeat), or after this long without hearing a leader (a member removed before it
/// stored the change is not told). The wait is long so that a member still needed (the
/// kept servers short of a majority without it) is not lost to a leader's restart.
pub const LEAVE_SILENCE: Duration = Duration::from_secs(60);

/// A leader's entries waiting in its [`EntryBatch`] are appended as one Raft entry at the
/// end of the thread's turn, or as soon as they come to this many bytes.
pub const MAX_BATCH_BYTES: usize = 1 << 20;

/// Opens a new, empty message store for a replica (its directory emptied first), with the
/// limits of the config given: what a snapshot is restored into.
pub type StoreFactory = Box<
    dyn Fn(
            &jsproto::api::stream::StreamConfig,
        ) -> anyhow::Result<Box<dyn jsproto::stream::store::MsgStore>>
        + Send,
>;

/// A committed entry or snapshot, in log order, as the replica applies it.
enum InOrder {
    Command(u64, Vec<u8>),
    /// The leader's snapshot at this index, now this member's.
    Snapshot(u64),
}

/// What the leader owes a requester once an entry it appended is applied.
enum Pending {
    /// A publish: its PubAck (none: `no_ack`, or no reply subject).
    Publish(Option<Bytes>),
    /// `STREAM.PURGE`.
    Purge(Option<Bytes>),
    /// `STREAM.MSG.DELETE`.
    MsgDelete(Option<Bytes>),
    /// `CONSUMER.CREATE`.
    ConsumerCreate(Option<Bytes>),
    /// `CONSUMER.DELETE`.
    ConsumerDelete(Option<Bytes>),
    /// `CONSUMER.PAUSE`.
    ConsumerPause(Option<Bytes>),
    /// `CONSUMER.RESET`.
    ConsumerReset(Option<Bytes>),
    /// `CONSUMER.UNPIN`.
    ConsumerUnpin(Option<Bytes>),
    /// A pull request for this consumer, with this reply subject: nothing is owed once
    /// applied (the consumer answers it), only the 503 if it is not appended.
    Pull(Arc<str>, Bytes),
    /// A `Tick` this leader appended (another is not appended before it is applied).
    Tick,
    /// The meta group's config, appended as the stream's (the meta layer answers).
    Config,
}

/// A stream's Raft group as its engine drives it.
pub struct Replica {
    group: RaftGroup,
    epoch: Epoch,
    /// The time of the last entry applied (entries are applied no earlier than it).
    last_at: EntryTime,
    /// What the leader owes, by the log index of the Raft entry it appended and the
    /// position of its entry in that one's batch.
    pending: HashMap<(u64, u32), Pending>,
    /// Entries the leader took in this turn of its thread, appended together as one Raft
    /// entry ([`StreamEngine::append_batch`]), and what their requesters are owed (by
    /// position in the batch).
    batch: EntryBatch,
    batch_pending: Vec<(u32, Pending)>,
    /// A `Tick` appended and not applied yet.
    tick_inflight: bool,
    next_raft_tick: Instant,
    /// Whether this replica led at the last look (subscriptions follow it).
    leading: bool,
    /// The leader's subscriptions to the stream's subjects and direct gets.
    subs: Vec<(String, Arc<dyn InternalHandler>)>,
    /// The create request's reply subject, answered by the group's first leader.
    create_reply: Option<Bytes>,
    /// Opens the empty store a snapshot is restored into.
    store_factory: Option<StoreFactory>,
    /// The servers the meta group gave the stream: the leader changes the group's members
    /// until they are these.
    peers: Vec<String>,
    /// A snapshot could not be taken (too large, or failed): not tried again before this
    /// many entries more.
    snapshot_retry_at: u64,
    /// Stream entries applied since the last snapshot (taken or installed, or since this
    /// replica started: its log after the snapshot is applied again then). A Raft entry
    /// holds a batch of them, so the Raft indices since the snapshot do not count them.
    entries_since_snapshot: u64,
    /// The group's [`RaftGroup::conf_changes`] when the last snapshot was taken.
    snapshot_conf_changes: u64,
    /// When the leader next looks for waiting requests whose requester went.
    next_gone_check: Instant,
    /// Reply subjects the leader said went, not applied yet.
    gone_inflight: std::collections::HashSet<Bytes>,
    /// A config update the meta group applied here and the stream's log has not carried
    /// yet: the leader appends it; applying any config entry clears it (an entry lost with
    /// a leadership is appended again by the next leader that has it).
    desired_config: Option<StreamConfig>,
    /// A config entry appended and not applied yet.
    config_inflight: bool,
    /// The account's API thread: told when this replica left its group.
    api: Option<std::sync::mpsc::Sender<super::ApiCmd>>,
    /// When a leader was last known, while leaving ([`LEAVE_SILENCE`]).
    leader_seen: Instant,
    /// The API thread was told this replica left.
    left: bool,
}

impl std::fmt::Debug for Replica {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replica")
            .field("group", &self.group)
            .field("leading", &self.leading)
            .finish_non_exhaustive()
    }
}

impl Replica {
    /// The epoch of a stream created at `created_unix_ns`, on this process's clock: the
    /// instant that stands for its creation.
    pub fn epoch_for(created_unix_ns: u64) -> Epoch {
        let now = Instant::now();
        let since = unix_now().saturating_sub(created_unix_ns);
        let base = now.checked_sub(Duration::from_nanos(since)).unwrap_or(now);
        Epoch {
            base,
            unix_ns: created_unix_ns,
        }
    }

    /// A replica of a stream whose epoch is `epoch` ([`Replica::epoch_for`]), in `group`.
    pub fn new(group: RaftGroup, epoch: Epoch) -> Replica {
        let now = Instant::now();
        Replica {
            group,
            epoch,
            last_at: EntryTime {
                mono_ns: 0,
                unix_ns: 0,
            },
            pending: HashMap::new(),
            batch: EntryBatch::new(),
            batch_pending: Vec::new(),
            tick_inflight: false,
            next_raft_tick: now + TICK,
            leading: false,
            subs: Vec::new(),
            create_reply: None,
            store_factory: None,
            peers: Vec::new(),
            snapshot_retry_at: 0,
            entries_since_snapshot: 0,
            snapshot_conf_changes: 0,
            next_gone_check: now,
            gone_inflight: std::collections::HashSet::new(),
            desired_config: None,
            config_inflight: false,
            api: None,
            leader_seen: now,
            left: false,
        }
    }

    /// A config the group's first leader appends (a stream of one replica made replicated:
    /// its state has the config it had alone).
    pub fn set_pending_config(&mut self, config: StreamConfig) {
        self.desired_config = Some(config);
    }

    /// The account's API thread, told when this replica left its group
    /// ([`super::ApiCmd::LeftGroup`]).
    pub fn set_api(&mut self, tx: std::sync::mpsc::Sender<super::ApiCmd>) {
        self.api = Some(tx);
    }

    /// The state a new replicated stream's group starts from, the same on every member
    /// ([`RaftGroup::seed_members`]): the stream with its creation `config`, empty, at its
    /// creation (`epoch`'s start). Its config updates follow as entries in the log, so a
    /// replica replaying the log applies each entry under the config the others did.
    ///
    /// # Errors
    /// The snapshot cannot be encoded.
    pub fn initial_snapshot(config: &StreamConfig, epoch: &Epoch) -> anyhow::Result<Vec<u8>> {
        let mut store = jsproto::stream::store::MemoryStore::new(
            jsproto::stream::store::StoreLimits::of(config),
        );
        let stream = jsproto::stream::Stream::new(config.clone(), &mut store, epoch.unix_ns);
        let at = EntryTime {
            mono_ns: 0,
            unix_ns: epoch.unix_ns,
        };
        Ok(jsproto::stream::snapshot::encode(
            &stream.snapshot(at, epoch),
            &store,
        )?)
    }

    /// The servers the meta group gave the stream (see [`StreamCmd::SetPeers`]).
    pub fn set_peers(&mut self, peers: Vec<String>) {
        self.peers = peers;
    }

    /// How a snapshot's empty store is opened.
    pub fn set_store_factory(&mut self, factory: StoreFactory) {
        self.store_factory = Some(factory);
    }

    /// The create request to answer when this replica is the group's first leader.
    pub fn set_create_reply(&mut self, reply: Option<Bytes>) {
        self.create_reply = reply;
    }

    /// The Raft group.
    pub fn group(&self) -> &RaftGroup {
        &self.group
    }

    /// The time for an entry appended now: this server's clock on the stream's epoch line,
    /// never before the last entry applied.
    fn now(&self) -> EntryTime {
        let mono = Instant::now()
            .saturating_duration_since(self.epoch.base)
            .as_nanos() as u64;
        EntryTime {
            mono_ns: mono.max(self.last_at.mono_ns),
            unix_ns: unix_now(),
        }
    }
}

/// The [`RaftInbox`] of a stream's group: queues each message for the stream's thread.
pub struct StreamInbox {
    /// The stream.
    pub tx: WeakStreamSender,
    /// The snapshot parts queued for the stream's thread.
    pub parts: crate::cluster::PartQueue,
}

impl RaftInbox for StreamInbox {
    fn deliver(&self, data: Bytes) {
        self.tx.send(StreamCmd::Raft(data));
    }

    fn deliver_snapshot_part(&self, offset: u64, data: Bytes) {
        if let Some(part) = self.parts.admit(offset, data) {
            self.tx.send(StreamCmd::RaftSnapshotPart(part));
        }
    }
}

/// The leader's subscription to a replicated stream's subjects: publishes to its thread.
struct ReplicaIngest {
    tx: WeakStreamSender,
}

impl InternalHandler for ReplicaIngest {
    fn on_message(&self, msg: RoutedMsg<'_>, later: &mut BurstWork) {
        self.tx
            .send_at_burst_end(StreamCmd::Publish(super::stream::Inbound::of(&msg)), later);
    }

    fn clustered(&self) -> bool {
        true
    }
}

/// The leader's subscription to `$JS.API.DIRECT.GET.<stream>[.>]`.
struct ReplicaDirect {
    tx: WeakStreamSender,
}

impl InternalHandler for ReplicaDirect {
    fn on_message(&self, msg: RoutedMsg<'_>, _later: &mut BurstWork) {
        let Some(reply) = msg.reply.cloned() else {
            return;
        };
        self.tx.send(StreamCmd::Op(StreamOp::DirectGet {
            subject: msg.subject.clone(),
            body: msg.payload.clone(),
            reply,
        }));
    }

    fn clustered(&self) -> bool {
        true
    }
}

fn answer<T: ApiResponse>(result: Result<T, ApiError>) -> Vec<u8> {
    match result {
        Ok(body) => encode_ok(&body),
        Err(err) => encode_error::<T>(&err),
    }
}

impl StreamEngine {
    /// Whether this engine is a replica of a replicated stream.
    pub fn is_replicated(&self) -> bool {
        self.replica.is_some()
    }

    /// A command for a replicated stream: the leader appends it as an entry (or answers a
    /// read from its state); a follower drops what only a leader takes.
    pub(super) fn handle_replicated(&mut self, cmd: StreamCmd) {
        let leading = self.replica.as_ref().is_some_and(|r| r.group.is_leader());
        match cmd {
            StreamCmd::Raft(data) => {
                if let Some(r) = self.replica.as_mut() {
                    r.group.step(&data);
                }
            }
            StreamCmd::RaftSnapshotPart(part) => {
                if let Some(r) = self.replica.as_mut() {
                    r.group.receive_snapshot_part(part.offset, &part.data);
                }
            }
            StreamCmd::SetPeers(peers) => {
                if let Some(r) = self.replica.as_mut() {
                    r.peers = peers;
                    r.leader_seen = Instant::now();
                }
            }
            StreamCmd::Publish(msg) if leading => {
                if let Some(cap) = self.account_cap() {
                    if let Err(err) = self.check_account_storage(cap, &msg) {
                        if let Some(reply) = msg.reply.as_ref().filter(|_| !self.config().no_ack) {
                            let body = PubAck::encode_error(&self.config().name, &err);
                            self.outbox.reply(reply, body);
                        }
                        return;
                    }
                }
                let reply = msg.reply.clone().filter(|_| !self.config().no_ack);
                let op = Op::Publish {
                    subject: msg.subject,
                    headers: msg.headers,
                    payload: msg.payload,
                };
                self.append(op, Some(Pending::Publish(reply)));
            }
            StreamCmd::Pull {
                consumer,
                reply,
                body,
            } if leading => self.append(
                Op::Pull {
                    consumer: consumer.to_string(),
                    reply: reply.clone(),
                    body,
                },
                Some(Pending::Pull(consumer, reply)),
            ),
            StreamCmd::Ack {
                consumer,
                subject,
                payload,
                reply,
            } if leading => self.append(
                Op::Ack {
                    consumer: consumer.to_string(),
                    subject,
                    payload,
                    reply,
                },
                None,
            ),
            StreamCmd::FlowControl { consumer, subject } if leading => self.append(
                Op::FlowControl {
                    consumer: consumer.to_string(),
                    subject,
                },
                None,
            ),
            StreamCmd::Interest { consumer } if leading => self.propose_interest(&consumer),
            StreamCmd::Op(op) if leading => self.replicated_op(op),
            StreamCmd::Query(query) => {
                self.commit_replica();
                self.answer(query);
            }
            StreamCmd::StepDown {
                preferred,
                consumer,
                reply,
            } if leading => {
                let result = self.step_down(preferred.as_deref());
                self.step_down_answer(consumer.as_deref(), reply.as_ref(), result);
            }
            StreamCmd::Stop { .. } => unreachable!("handled by the engine"),
            // A read that reached a replica which does not lead (leadership moved while it
            // was on its way): answered from this replica's state, as nats-server answers
            // one in the gap, rather than left to time out.
            StreamCmd::Op(
                read @ (StreamOp::Info { .. }
                | StreamOp::MsgGet { .. }
                | StreamOp::DirectGet { .. }
                | StreamOp::ConsumerInfo { .. }
                | StreamOp::ConsumerPending { .. }
                | StreamOp::ConsumerNames { .. }),
            ) => {
                self.commit_replica();
                self.apply_op(read);
            }
            // A follower: the leader takes these. A pull or an ack to confirm that reached
            // this replica while leadership moved: its sender gets at once the 503 status it
            // would get with nobody subscribed (nats-server's no responders in the same gap)
            // and asks again, instead of waiting out its timeout; both are safe to ask again
            // (at worst the new leader also took the pull and delivers to an inbox its
            // requester left: redelivered after `AckWait`). A publish is not answered: the
            // new leader may have subscribed already and be storing the same message, and a
            // 503 would make its client publish it again (a duplicate without `Nats-Msg-Id`).
            other => self.not_leading(other),
        }
    }

    /// Answers `cmd`, which only a leader takes, with the `503` no-responders status where
    /// it is a pull or an ack to confirm; drops it otherwise (see `handle_replicated`).
    fn not_leading(&mut self, cmd: StreamCmd) {
        match cmd {
            StreamCmd::Pull {
                consumer, reply, ..
            } => self.pull_not_taken(&consumer, &reply),
            StreamCmd::Ack {
                subject,
                reply: Some(reply),
                ..
            } => {
                let status = jsproto::headers::no_responders(&subject);
                self.outbox.publish(&reply, Some(&status), &Bytes::new());
            }
            _ => {}
        }
    }

    /// Tells the sender of a pull for `consumer` that nobody took it: the `503` status, on
    /// the pull's `reply`, as nats-server's no responders.
    fn pull_not_taken(&mut self, consumer: &str, reply: &Bytes) {
        let subject = super::consumers::pull_subject(&self.config().name, consumer);
        let status = jsproto::headers::no_responders(subject.as_bytes());
        self.outbox.publish(reply, Some(&status), &Bytes::new());
    }

    /// Takes `op` as an entry stamped now into this turn's batch, appended with the others
    /// at the turn's end ([`StreamEngine::append_batch`]); `pending` is what its requester
    /// is owed once it is applied.
    fn append(&mut self, op: Op, pending: Option<Pending>) {
        let Some(r) = self.replica.as_mut() else {
            return;
        };
        let entry = Entry { at: r.now(), op };
        let at = r.batch.push(&entry).expect("entries encode");
        if let Some(p) = pending {
            r.batch_pending.push((at, p));
        }
        if r.batch.bytes_len() >= MAX_BATCH_BYTES {
            self.append_batch();
        }
    }

    /// Appends the entries taken since the last call as one Raft entry; true when there
    /// were any. Called at the end of every turn of the stream's thread (the start of
    /// [`StreamEngine::drive_replica`]), before a leadership transfer, and when a batch
    /// grows past [`MAX_BATCH_BYTES`].
    fn append_batch(&mut self) -> bool {
        let Some(r) = self.replica.as_mut() else {
            return false;
        };
        let Some(data) = r.batch.finish() else {
            return false;
        };
        let owed = std::mem::take(&mut r.batch_pending);
        match r.group.propose(data) {
            Ok(()) => {
                let index = r.group.last_index();
                r.pending
                    .extend(owed.into_iter().map(|(at, p)| ((index, at), p)));
            }
            Err(err) => {
                debug!(stream = %self.config().name, error = %err, "entries not appended");
                // Not appended (leadership is moving): a pull gets the 503 no-responders
                // status and asks again; publishes and API writes get no answer (the new
                // leader may be taking the same request: see `handle_replicated`); a Tick or
                // a config is appended again at a later look (a gone requester or a push
                // consumer's interest only at the next change).
                for (_, p) in owed {
                    match p {
                        Pending::Tick => {
                            if let Some(r) = self.replica.as_mut() {
                                r.tick_inflight = false;
                            }
                        }
                        Pending::Config => {
                            if let Some(r) = self.replica.as_mut() {
                                r.config_inflight = false;
                            }
                        }
                        Pending::Pull(consumer, reply) => self.pull_not_taken(&consumer, &reply),
                        _ => {}
                    }
                }
            }
        }
        true
    }

    /// A push consumer's deliver subject may have changed interest, or the leader just
    /// linked it: the leader appends what its router says now (`Op::DeliveryInterest`).
    pub(super) fn propose_interest(&mut self, consumer: &str) {
        let Some(config) = self
            .stream
            .consumers()
            .get(consumer)
            .map(|c| c.meta.config.clone())
        else {
            return;
        };
        if config.deliver_subject.is_empty() {
            return;
        }
        let group = (!config.deliver_group.is_empty()).then_some(config.deliver_group.as_bytes());
        let bound = self
            .outbox
            .router()
            .exact_interest(config.deliver_subject.as_bytes(), group);
        self.append(
            Op::DeliveryInterest {
                consumer: consumer.to_string(),
                bound,
            },
            None,
        );
    }

    /// An API operation on the leader: reads are answered from its state, changes appended.
    fn replicated_op(&mut self, op: StreamOp) {
        match op {
            StreamOp::Purge { purge, reply } => {
                self.append(Op::Purge(purge), Some(Pending::Purge(reply)));
            }
            StreamOp::MsgDelete { req, reply } => self.append(
                Op::DeleteMsg {
                    seq: req.seq,
                    erase: !req.no_erase,
                },
                Some(Pending::MsgDelete(reply)),
            ),
            StreamOp::ConsumerCreate { create, reply } => {
                match self.check_replicated_create(&create) {
                    Ok(op) => self.append(op, Some(Pending::ConsumerCreate(reply))),
                    Err(err) => {
                        let body = encode_error::<ConsumerCreateResponse>(&err);
                        self.respond(reply.as_ref(), body);
                    }
                }
            }
            StreamOp::ConsumerDelete { consumer, reply } => self.append(
                Op::DeleteConsumer { name: consumer },
                Some(Pending::ConsumerDelete(reply)),
            ),
            StreamOp::ConsumerPause {
                consumer,
                until,
                reply,
            } => self.append(
                Op::PauseConsumer {
                    name: consumer,
                    until_unix_ns: until.and_then(|t| t.unix_nanos()),
                },
                Some(Pending::ConsumerPause(reply)),
            ),
            StreamOp::ConsumerReset {
                consumer,
                seq,
                reply,
            } => match seq {
                Ok(seq) => self.append(
                    Op::ResetConsumer {
                        name: consumer,
                        seq,
                    },
                    Some(Pending::ConsumerReset(reply)),
                ),
                Err(err) => {
                    let body = encode_error::<ConsumerResetResponse>(&err);
                    self.respond(reply.as_ref(), body);
                }
            },
            StreamOp::ConsumerUnpin {
                consumer,
                group,
                reply,
            } => self.append(
                Op::UnpinConsumer {
                    name: consumer,
                    group,
                },
                Some(Pending::ConsumerUnpin(reply)),
            ),
            // Reads: the leader's state is the stream's.
            read @ (StreamOp::Info { .. }
            | StreamOp::MsgGet { .. }
            | StreamOp::DirectGet { .. }
            | StreamOp::ConsumerInfo { .. }
            | StreamOp::ConsumerPending { .. }
            | StreamOp::ConsumerNames { .. }) => {
                self.commit_replica();
                self.apply_op(read);
            }
        }
    }

    /// A consumer create checked against the leader's state, as the entry to append.
    fn check_replicated_create(
        &mut self,
        create: &jsproto::api::consumer::ConsumerCreate,
    ) -> Result<Op, ApiError> {
        let existing = create
            .name
            .as_ref()
            .filter(|n| self.stream.consumers().contains(n))
            .cloned();
        let (name, config, created) = match existing {
            Some(name) => {
                let config = self
                    .stream
                    .consumers()
                    .check_update(&name, create, self.config())?;
                let created = self
                    .stream
                    .consumers()
                    .get(&name)
                    .and_then(|c| c.meta.created.unix_nanos())
                    .unwrap_or(0);
                (name, config, created)
            }
            None => {
                let account_max = self
                    .outbox
                    .account()
                    .jetstream_limits()
                    .map_or(-1, |l| l.max_consumers);
                let (name, config) = self.stream.consumers().check_new(
                    create,
                    self.config(),
                    account_max,
                    super::consumers::generate_name,
                )?;
                (name, config, unix_now())
            }
        };
        let rate_burst = {
            let max_msg = self.config().max_msg_size;
            if max_msg > 0 {
                u64::from(max_msg.unsigned_abs())
            } else {
                self.outbox.server().options().max_payload as u64
            }
        };
        Ok(Op::CreateConsumer {
            name,
            config,
            created_unix_ns: created,
            pin_seed: rand::random(),
            rate_burst,
        })
    }

    /// Raft's work after a batch or a tick: persists and sends, applies what was committed,
    /// follows leadership changes, and (on the leader) appends a `Tick` when a deadline came.
    /// Returns when the group next needs the thread.
    pub(super) fn drive_replica(&mut self) -> Option<Instant> {
        self.append_batch();
        let now = Instant::now();
        {
            let r = self.replica.as_mut()?;
            if now >= r.next_raft_tick {
                r.group.tick();
                r.next_raft_tick = now + TICK;
            }
        }
        loop {
            let mut committed: Vec<InOrder> = Vec::new();
            {
                let r = self.replica.as_mut()?;
                if !r.group.has_ready() {
                    break;
                }
                let result = r.group.on_ready(&mut |c| match c {
                    Committed::Command { index, data } => {
                        committed.push(InOrder::Command(index, data.to_vec()));
                    }
                    Committed::Snapshot { index } => {
                        committed.push(InOrder::Snapshot(index));
                    }
                });
                if let Err(err) = result {
                    warn!(error = %err, "stream raft log failed");
                }
            }
            self.follow_leadership();
            for c in committed {
                match c {
                    InOrder::Command(index, data) => match Entry::decode_all(&data) {
                        Ok(entries) => {
                            if let Some(r) = self.replica.as_mut() {
                                r.entries_since_snapshot += entries.len() as u64;
                            }
                            for (at, entry) in (0u32..).zip(entries) {
                                self.apply_committed((index, at), entry);
                            }
                        }
                        Err(err) => {
                            // Skipping it would leave this replica out of step with the
                            // others for good: it stops taking part instead.
                            error!(stream = %self.config().name, index, error = %err, "undecodable stream entry: leaving the group (a server of another version?)");
                            if let Some(r) = self.replica.as_mut() {
                                r.group.fail();
                            }
                            return None;
                        }
                    },
                    InOrder::Snapshot(index) => {
                        let installed = self
                            .replica
                            .as_ref()
                            .map_or(Ok(None), |r| r.group.local_snapshot())
                            .and_then(|local| match local {
                                Some((at, mut reader)) if at == index => {
                                    self.install_snapshot(&mut reader, true)
                                }
                                _ => Err(anyhow::anyhow!(
                                    "the snapshot at {index} is not this member's"
                                )),
                            });
                        if let Err(err) = installed {
                            error!(stream = %self.config().name, error = format!("{err:#}"), "installing the leader's snapshot failed: leaving the group");
                            if let Some(r) = self.replica.as_mut() {
                                r.group.fail();
                            }
                            return None;
                        }
                        if let Some(r) = self.replica.as_mut() {
                            r.entries_since_snapshot = 0;
                        }
                    }
                }
            }
        }
        self.follow_leadership();
        self.reconcile_config();
        self.maybe_snapshot();
        self.change_members();
        self.leave_if_removed();
        self.drop_gone_requesters();
        self.commit_replica();
        // The leader's deadlines: a Tick entry when one came.
        let leading = self.replica.as_ref()?.group.is_leader();
        let mut next = self.replica.as_ref()?.next_raft_tick;
        if leading {
            let r = self.replica.as_ref()?;
            let at = r.now();
            let now_e = r.epoch.instant(at);
            let due = self
                .stream
                .poll_timeout(self.store.as_ref(), now_e, at.unix_ns);
            if let Some(due) = due {
                if due <= now_e {
                    if !r.tick_inflight {
                        if let Some(r) = self.replica.as_mut() {
                            r.tick_inflight = true;
                        }
                        self.append(Op::Tick, Some(Pending::Tick));
                    }
                } else {
                    next = next.min(Instant::now() + (due - now_e));
                }
            }
        }
        // What this look appended (a Tick, gone requesters, a config): out now, and the
        // thread back at once for Raft's work on it.
        if self.append_batch() {
            next = Instant::now();
        }
        Some(next)
    }

    /// The leader, every [`GONE_CHECK`]: a waiting pull request whose reply subject nobody
    /// listens on any more (its client went, on any server of the cluster) is dropped by
    /// every replica through an `Op::RequesterGone` entry, so nothing is delivered to it
    /// (a server of one replica checks its router when a message comes up).
    fn drop_gone_requesters(&mut self) {
        let now = Instant::now();
        let Some(r) = self.replica.as_mut() else {
            return;
        };
        if !r.group.is_leader() || now < r.next_gone_check {
            return;
        }
        r.next_gone_check = now + GONE_CHECK;
        let router = self.outbox.router();
        let gone: Vec<Bytes> = self
            .stream
            .consumers()
            .iter()
            .flat_map(|(_, c)| c.core.waiting_replies())
            .filter(|reply| !router.has_interest(reply))
            .map(Bytes::copy_from_slice)
            .filter(|reply| !r.gone_inflight.contains(reply))
            .collect();
        for reply in gone {
            if let Some(r) = self.replica.as_mut() {
                r.gone_inflight.insert(reply.clone());
            }
            self.append(Op::RequesterGone { prefix: reply }, None);
        }
    }

    /// The leader's part of a membership change (the meta group gave the stream other
    /// servers), one change at a time, each applied before the next: a server to add joins
    /// as a learner (the group commits without it), a snapshot is taken once that change is
    /// applied (a joining member accepts only a snapshot whose membership names it), the
    /// learner becomes a voter once within [`LEARNER_CAUGHT_UP`] entries of the commit
    /// index, and only then do members to drop leave. A leader that is to leave hands
    /// leadership to a staying member instead of removing itself.
    fn change_members(&mut self) {
        let me = self.outbox.server().server_name().to_string();
        let name = self.config().name.clone();
        let Some(r) = self.replica.as_mut() else {
            return;
        };
        if !r.group.is_leader() || r.peers.is_empty() || r.group.has_pending_conf() {
            return;
        }
        if !r.peers.contains(&me) {
            if let Some(to) = r
                .group
                .progress()
                .into_iter()
                .filter(|p| p.active && r.peers.contains(&p.name))
                .max_by_key(|p| p.matched)
            {
                info!(stream = %name, to = %to.name, "leaving the group: handing leadership over");
                r.group.transfer_leader(Some(&to.name));
            }
            return;
        }
        let voters = r.group.voter_ids();
        let learners = r.group.learner_ids();
        let wanted: Vec<u64> = r.peers.iter().map(|p| node_id(p)).collect();
        // A learner no longer wanted (the servers changed again while it caught up) goes
        // first: it would hold every other change up.
        if let Some(gone) = learners.iter().copied().find(|l| !wanted.contains(l)) {
            info!(stream = %name, member = %format!("{gone:x}"), "removing a learner no longer wanted");
            if let Err(err) = r.group.remove_member(gone) {
                warn!(stream = %name, error = %err, "changing the group's members");
            }
            return;
        }
        // A learner gets a snapshot that names it (not retried before its back-off when
        // one could not be taken: too large, see the module doc).
        if !learners.is_empty() && r.snapshot_conf_changes != r.group.conf_changes() {
            if r.group.applied() >= r.snapshot_retry_at {
                self.take_snapshot();
            }
            return;
        }
        let Some(r) = self.replica.as_mut() else {
            return;
        };
        let result = if let Some(add) = r
            .peers
            .iter()
            .find(|p| !voters.contains(&node_id(p)) && !learners.contains(&node_id(p)))
            .cloned()
        {
            info!(stream = %name, server = %add, "adding a replica (as a learner first)");
            r.group.add_learner(&add)
        } else if let Some(ready) = r.group.progress().into_iter().find(|p| {
            learners.contains(&node_id(&p.name))
                && p.matched + LEARNER_CAUGHT_UP >= r.group.committed()
        }) {
            info!(stream = %name, server = %ready.name, "a new replica caught up: voting");
            r.group.add_member(&ready.name)
        } else if !learners.is_empty() {
            // Still catching up.
            Ok(())
        } else if let Some(remove) = {
            // A member that is down goes first: removing it does not wait for it, and the
            // members left can still commit the next removal.
            let down: Vec<u64> = r
                .group
                .progress()
                .into_iter()
                .filter(|p| !p.active)
                .map(|p| node_id(&p.name))
                .collect();
            let unwanted = voters.iter().copied().filter(|v| !wanted.contains(v));
            unwanted
                .clone()
                .find(|v| down.contains(v))
                .or_else(|| unwanted.clone().next())
        } {
            info!(stream = %name, member = %format!("{remove:x}"), "removing a replica");
            r.group.remove_member(remove)
        } else {
            Ok(())
        };
        if let Err(err) = result {
            warn!(stream = %name, error = %err, "changing the group's members");
        }
    }

    /// A replica the meta group no longer gives the stream: once its group's membership (as
    /// applied here) no longer has it, or no leader was heard for [`LEAVE_SILENCE`], tells
    /// the API thread, which stops it and removes its files.
    fn leave_if_removed(&mut self) {
        let server = Arc::clone(self.outbox.server());
        let me = server.server_name();
        let Some(r) = self.replica.as_mut() else {
            return;
        };
        if r.left || r.peers.is_empty() || r.peers.iter().any(|p| p == me) {
            return;
        }
        let now = Instant::now();
        if r.group.leader().is_some() {
            r.leader_seen = now;
        }
        let id = node_id(me);
        let removed = !r.group.voter_ids().contains(&id) && !r.group.learner_ids().contains(&id);
        let silent = now.saturating_duration_since(r.leader_seen) >= LEAVE_SILENCE;
        if !(removed || silent) {
            return;
        }
        if let Some(api) = &r.api {
            r.left = true;
            let stream = self.stream.config().name.clone();
            info!(stream = %stream, removed, "removed from the stream's group: leaving");
            let _ = api.send(super::ApiCmd::LeftGroup { stream });
        }
    }

    /// Takes a snapshot and drops the log up to it when the log since the last one is long
    /// enough (see the module doc).
    fn maybe_snapshot(&mut self) {
        let Some(r) = self.replica.as_ref() else {
            return;
        };
        let applied = r.group.applied();
        let since = r.entries_since_snapshot;
        let msgs = self.store.state().msgs;
        if since < SNAPSHOT_MIN_ENTRIES.max(msgs) || applied < r.snapshot_retry_at {
            return;
        }
        self.take_snapshot();
    }

    /// Snapshots the stream as of the last entry applied and drops the log up to it.
    fn take_snapshot(&mut self) {
        let Some(r) = self.replica.as_ref() else {
            return;
        };
        let applied = r.group.applied();
        let msgs = self.store.state().msgs;
        // What was applied is the state; its messages must be readable from the store.
        self.commit_replica();
        let Some(r) = self.replica.as_ref() else {
            return;
        };
        let state = self.stream.snapshot(r.last_at, &r.epoch);
        let name = self.config().name.clone();
        let Some(r) = self.replica.as_mut() else {
            return;
        };
        // Written to the snapshot's file a message at a time, never whole in memory.
        let store = self.store.as_ref();
        let mut bytes = 0;
        let result = r.group.compact_with(&mut |w| {
            bytes = jsproto::stream::snapshot::encode_to(&state, store, w)
                .map_err(std::io::Error::other)?;
            Ok(())
        });
        match result {
            Ok(()) => {
                r.snapshot_conf_changes = r.group.conf_changes();
                r.entries_since_snapshot = 0;
                debug!(stream = %name, index = applied, bytes, "stream snapshot taken, log compacted");
            }
            Err(err) => {
                warn!(stream = %name, error = format!("{err:#}"), "no stream snapshot");
                r.snapshot_retry_at = applied + SNAPSHOT_MIN_ENTRIES.max(msgs);
            }
        }
    }

    /// Writes the Raft log that starts a replicated stream from this stream of one replica
    /// (see [`super::stream::SeedRequest`]): its snapshot at index 1 is the whole state now
    /// (consumers recovered from their files) and the messages, on the replicated stream's
    /// epoch, written a message at a time.
    ///
    /// # Errors
    /// The log directory exists already, a message cannot be read, or a write fails.
    pub(super) fn seed_raft_log(&self, seed: &super::stream::SeedRequest) -> anyhow::Result<()> {
        let epoch = &seed.epoch;
        let at = EntryTime {
            mono_ns: Instant::now()
                .saturating_duration_since(epoch.base)
                .as_nanos() as u64,
            unix_ns: unix_now(),
        };
        let state = self.stream.snapshot(at, epoch);
        let dir = &seed.raft_dir;
        if dir.exists() {
            anyhow::bail!("{} exists already", dir.display());
        }
        let tmp = dir.with_extension("seed.tmp");
        let _ = std::fs::remove_dir_all(&tmp);
        let store = self.store.as_ref();
        RaftGroup::seed_members_with(&tmp, std::slice::from_ref(&seed.me), &mut |w| {
            jsproto::stream::snapshot::encode_to(&state, store, w)
                .map(|_| ())
                .map_err(std::io::Error::other)
        })?;
        std::fs::rename(&tmp, dir)?;
        if let Some(parent) = dir.parent() {
            std::fs::File::open(parent)?.sync_all()?;
        }
        info!(stream = %self.config().name, "a stream of one replica becomes replicated");
        Ok(())
    }

    /// Replaces this replica's store and state with a snapshot's ([`RaftGroup::compact`]'s
    /// data: the leader's (`leaders`), or this replica's own at start-up): an empty store is
    /// opened and the messages written into it, then the stream's state is restored.
    ///
    /// # Errors
    /// The store cannot be opened, or the snapshot does not restore.
    pub(super) fn install_snapshot(
        &mut self,
        data: &mut dyn std::io::Read,
        leaders: bool,
    ) -> anyhow::Result<()> {
        for c in self.stream.consumers().names() {
            self.unlink_consumer(&c);
        }
        let config = self.config().clone();
        let Some(r) = self.replica.as_mut() else {
            anyhow::bail!("not a replica");
        };
        let factory = r
            .store_factory
            .as_ref()
            .ok_or_else(|| anyhow::anyhow!("no store to restore into"))?;
        // The old store goes first: the new one takes its directory.
        let old = std::mem::replace(
            &mut self.store,
            Box::new(jsproto::stream::store::MemoryStore::new(
                jsproto::stream::store::StoreLimits::default(),
            )),
        );
        if let Err(err) = old.delete_all() {
            warn!(stream = %config.name, error = %err, "removing the store a snapshot replaces");
        }
        let mut store = factory(&config)?;
        let (stream, at) = jsproto::stream::snapshot::restore_from(data, store.as_mut(), &r.epoch)?;
        store.update_limits(super::stream::store_limits(stream.config()))?;
        r.last_at = at;
        self.store = store;
        self.stream = stream;
        if r.group.is_leader() {
            for c in self.stream.consumers().names() {
                if let Err(err) = self.link_consumer(&c) {
                    warn!(stream = %config.name, consumer = %c, error = format!("{err:#}"), "linking a consumer");
                }
            }
        }
        self.publish_counters();
        let last_seq = self.store.state().last_seq;
        if leaders {
            info!(stream = %config.name, last_seq, "stream restored from the leader's snapshot");
        } else {
            info!(stream = %config.name, last_seq, "stream restored from its own snapshot");
        }
        Ok(())
    }

    /// Takes or gives up the leader's subscriptions when leadership moved.
    fn follow_leadership(&mut self) {
        let Some(r) = self.replica.as_mut() else {
            return;
        };
        let leading = r.group.is_leader();
        // The first leader of a new group answers its create request; once any leader is
        // known, nobody else does.
        let create_reply = if r.group.leader().is_some() {
            r.create_reply.take().filter(|_| leading)
        } else {
            None
        };
        if let Some(reply) = create_reply {
            self.commit_replica();
            let (info, _) = self.info(&jsproto::api::stream::StreamInfoRequest::default());
            let mut info = info;
            info.config = info
                .config
                .with_dynamic_metadata(crate::server::NATS_VERSION);
            // The group as it stands, as nats-server's create answer.
            info.cluster = self.replica_cluster_info();
            let body = encode_ok(&jsproto::api::stream::StreamCreateResponse {
                info,
                did_create: true,
            });
            self.respond(Some(&reply), body);
            let name = self.config().name.clone();
            super::advisory::publish(
                &mut self.outbox,
                jsproto::api::advisory::JsAdvisory::Stream {
                    action: jsproto::api::advisory::StreamAction::Create,
                    stream: &name,
                },
            );
        }
        let Some(r) = self.replica.as_ref() else {
            return;
        };
        let known = r.group.leader().unwrap_or_default();
        {
            let mut name = self
                .shared
                .leader_name
                .lock()
                .expect("leader lock poisoned");
            if *name != known {
                *name = known;
            }
        }
        if leading == r.leading {
            return;
        }
        // What the last leadership owed or had taken goes with it; what this one appends
        // (the push consumers' interest, below) starts afresh.
        if let Some(r) = self.replica.as_mut() {
            r.leading = leading;
            r.pending.clear();
            r.batch = EntryBatch::new();
            r.batch_pending.clear();
            r.tick_inflight = false;
            r.gone_inflight.clear();
            r.config_inflight = false;
        }
        let name = self.config().name.clone();
        if leading {
            info!(
                "JetStream cluster new stream leader for '{} > {name}'",
                self.outbox.account().name()
            );
            self.subscribe_leader();
            let consumers = self.stream.consumers().names();
            // Linking a push consumer appends its interest as this server's router sees it.
            for c in &consumers {
                if let Err(err) = self.link_consumer(c) {
                    warn!(stream = %name, consumer = %c, error = format!("{err:#}"), "linking a consumer");
                }
            }
        } else {
            self.unsubscribe_leader();
            for c in self.stream.consumers().names() {
                self.unlink_consumer(&c);
            }
        }
        self.shared.leader.store(leading, Ordering::Relaxed);
    }

    fn subscribe_leader(&mut self) {
        let Some(tx) = self.self_tx.clone() else {
            return;
        };
        let account = Arc::clone(self.outbox.account());
        let router = account.router();
        let config = self.config().clone();
        let ingest: Arc<dyn InternalHandler> = Arc::new(ReplicaIngest { tx: tx.clone() });
        let mut subs: Vec<(String, Arc<dyn InternalHandler>)> = config
            .subjects
            .iter()
            .map(|s| (s.clone(), Arc::clone(&ingest)))
            .collect();
        if config.allow_direct {
            let direct: Arc<dyn InternalHandler> = Arc::new(ReplicaDirect { tx });
            let base = format!("$JS.API.DIRECT.GET.{}", config.name);
            subs.push((format!("{base}.>"), Arc::clone(&direct)));
            subs.push((base, direct));
        }
        for (subject, handler) in &subs {
            if let Err(err) =
                router.subscribe_internal(subject.as_bytes(), None, Arc::clone(handler))
            {
                warn!(stream = %config.name, subject, error = %err, "bad stream subject");
            }
        }
        if let Some(r) = self.replica.as_mut() {
            r.subs = subs;
        }
    }

    fn unsubscribe_leader(&mut self) {
        let account = Arc::clone(self.outbox.account());
        let subs = self
            .replica
            .as_mut()
            .map(|r| std::mem::take(&mut r.subs))
            .unwrap_or_default();
        for (subject, handler) in &subs {
            account
                .router()
                .unsubscribe_internal(subject.as_bytes(), None, handler);
        }
    }

    /// Applies one committed entry on this replica; the leader answers what it owes.
    /// `at`: the Raft entry's index and the entry's position in its batch.
    fn apply_committed(&mut self, at: (u64, u32), mut entry: Entry) {
        let (epoch, leading, pending) = {
            let Some(r) = self.replica.as_mut() else {
                return;
            };
            // Never earlier than the entry before it (a new leader's clock may lag).
            entry.at.mono_ns = entry.at.mono_ns.max(r.last_at.mono_ns);
            r.last_at = entry.at;
            let leading = r.group.is_leader();
            let pending = if leading { r.pending.remove(&at) } else { None };
            if matches!(pending, Some(Pending::Tick)) {
                r.tick_inflight = false;
            }
            if matches!(pending, Some(Pending::Config)) {
                r.config_inflight = false;
            }
            (r.epoch, leading, pending)
        };
        if let (Op::RequesterGone { prefix }, Some(r)) = (&entry.op, self.replica.as_mut()) {
            r.gone_inflight.remove(prefix);
        }
        if let (Op::UpdateStream(_), Some(r)) = (&entry.op, self.replica.as_mut()) {
            // The leader carried an update: this server's own waiting one is not appended.
            r.desired_config = None;
        }
        let created_or_updated = match &entry.op {
            Op::CreateConsumer { name, .. } => Some(name.clone()),
            _ => None,
        };
        let existed_before = created_or_updated
            .as_ref()
            .is_some_and(|n| self.stream.consumers().contains(n));
        let applied = {
            let outbox = &mut self.outbox;
            let held = &mut self.consumers;
            self.stream
                .apply_entry(self.store.as_mut(), &entry, &epoch, |cx, out| {
                    if leading {
                        super::consumers::carry_out(cx, outbox, held, out);
                    } else {
                        out.clear();
                    }
                })
        };
        if applied.retention_removed {
            self.store_dirty = true;
        }
        let stream_name = self.config().name.clone();
        match applied.outcome {
            EntryOutcome::Published(result) => {
                if let Ok(ack) = &result {
                    if !ack.duplicate {
                        self.batch_seqs.push(ack.seq);
                    }
                }
                if let Some(Pending::Publish(Some(reply))) = pending {
                    let body = match result {
                        Ok(ack) => ack.encode(),
                        Err(err) => PubAck::encode_error(&stream_name, &err),
                    };
                    self.acks.push((reply, body));
                }
            }
            EntryOutcome::Purged(result) => {
                if let Some(Pending::Purge(reply)) = pending {
                    self.commit_replica();
                    let body = answer(result.map(|purged| StreamPurgeResponse {
                        success: true,
                        purged,
                    }));
                    self.respond(reply.as_ref(), body);
                }
            }
            EntryOutcome::Deleted(result) => {
                if let Some(Pending::MsgDelete(reply)) = pending {
                    self.commit_replica();
                    let body = answer(result.map(|()| StreamMsgDeleteResponse { success: true }));
                    self.respond(reply.as_ref(), body);
                }
            }
            EntryOutcome::Updated(result) => {
                if let Err(err) = result {
                    warn!(stream = %stream_name, error = %err, "stream update applied with an error");
                }
                if leading {
                    // Its subjects and direct gets as the config now says.
                    self.unsubscribe_leader();
                    self.subscribe_leader();
                }
            }
            EntryOutcome::ConsumerCreated(result) => {
                let name = created_or_updated.unwrap_or_default();
                if result.is_ok() && leading {
                    // A new consumer gets its subscriptions; an updated one new ones (its
                    // deliver subject may have moved).
                    self.unlink_consumer(&name);
                    if let Err(err) = self.link_consumer(&name) {
                        warn!(stream = %stream_name, consumer = %name, error = format!("{err:#}"), "linking a consumer");
                    }
                    if !existed_before {
                        self.advise_consumer(ConsumerAction::Create, &name);
                    }
                }
                if let Some(Pending::ConsumerCreate(reply)) = pending {
                    let body = answer(result.and_then(|_| {
                        self.consumer_info(&name)
                            .map(|info| ConsumerCreateResponse { info })
                            .ok_or_else(ApiError::consumer_not_found)
                    }));
                    self.respond(reply.as_ref(), body);
                }
            }
            EntryOutcome::ConsumerDeleted(existed) => {
                if let Op::DeleteConsumer { name } = &entry.op {
                    self.unlink_consumer(name);
                    if existed && leading {
                        self.advise_consumer(ConsumerAction::Delete, name);
                    }
                }
                if let Some(Pending::ConsumerDelete(reply)) = pending {
                    let body = if existed {
                        encode_ok(&ConsumerDeleteResponse { success: true })
                    } else {
                        encode_error::<ConsumerDeleteResponse>(&ApiError::consumer_not_found())
                    };
                    self.respond(reply.as_ref(), body);
                }
            }
            EntryOutcome::ConsumerPaused(exists) => {
                if let (Some(Pending::ConsumerPause(reply)), Op::PauseConsumer { name, .. }) =
                    (pending, &entry.op)
                {
                    let body = if exists {
                        self.pause_response(name)
                    } else {
                        encode_error::<ConsumerPauseResponse>(&ApiError::consumer_not_found())
                    };
                    self.respond(reply.as_ref(), body);
                }
            }
            EntryOutcome::ConsumerReset(result) => {
                if let (Some(Pending::ConsumerReset(reply)), Op::ResetConsumer { name, .. }) =
                    (pending, &entry.op)
                {
                    let body = match result {
                        Ok(seq) => self.reset_response(name, seq),
                        Err(err) => encode_error::<ConsumerResetResponse>(&err),
                    };
                    self.respond(reply.as_ref(), body);
                }
            }
            EntryOutcome::ConsumerUnpinned(result) => {
                if let Some(Pending::ConsumerUnpin(reply)) = pending {
                    let body = answer(result.map(|()| ConsumerUnpinResponse {}));
                    self.respond(reply.as_ref(), body);
                }
            }
            EntryOutcome::Ticked { expired, inactive } => {
                if let Err(err) = expired {
                    warn!(stream = %stream_name, error = %err, "expiry failed");
                }
                for name in inactive {
                    self.unlink_consumer(&name);
                    if leading {
                        self.advise_consumer(ConsumerAction::Delete, &name);
                    }
                }
            }
            EntryOutcome::Done => {}
        }
    }

    /// `CONSUMER.PAUSE`'s answer from consumer `name`'s stored `pause_until`.
    fn pause_response(&self, name: &str) -> Vec<u8> {
        let until = self
            .stream
            .consumers()
            .get(name)
            .and_then(|c| c.meta.config.pause_until)
            .map(|t| t.instant)
            .filter(|t| !t.is_zero());
        let remaining = until
            .and_then(|t| t.unix_nanos())
            .map_or(0, |u| u.saturating_sub(unix_now()));
        encode_ok(&ConsumerPauseResponse {
            paused: remaining > 0,
            pause_until: until.unwrap_or(jsproto::api::time::Timestamp::ZERO),
            pause_remaining: Duration::from_nanos(remaining),
        })
    }

    /// `CONSUMER.RESET`'s answer: the consumer's info and where it starts over.
    fn reset_response(&mut self, name: &str, reset_seq: u64) -> Vec<u8> {
        answer(
            self.consumer_info(name)
                .map(|info| ConsumerResetResponse { info, reset_seq })
                .ok_or_else(ApiError::consumer_not_found),
        )
    }

    /// A replicated stream's `cluster` block, as nats-server's stream info: the cluster's
    /// name, the group's name, the leader, and each other replica with whether it is current
    /// (reachable and holding every committed entry), `offline` when the leader does not
    /// hear from it, how long since the leader last heard from it (`active`, ns; 0 when
    /// never since the leader took over) and how many entries it lags; `leader_since` is
    /// when the leader took over (within one Raft tick). `None` for a stream of one replica.
    pub(super) fn replica_cluster_info(&self) -> Option<ClusterInfo> {
        let r = self.replica.as_ref()?;
        let group = &r.group;
        let committed = group.committed();
        let replicas = group
            .progress()
            .into_iter()
            .map(|p| {
                let lag = committed.saturating_sub(p.matched);
                jsproto::api::cluster::PeerInfo {
                    current: p.active && lag == 0,
                    offline: !p.active,
                    active: p.last_heard.unwrap_or_default(),
                    lag,
                    peer: format!("{:08x}", crate::cluster::group::node_id(&p.name) as u32),
                    name: p.name,
                }
            })
            .collect();
        Some(ClusterInfo {
            name: self.cluster_name(),
            leader: group.leader().unwrap_or_default(),
            leader_since: group
                .leader_since()
                .map(|t| super::stream::timestamp(crate::connection::unix_nanos(t))),
            raft_group: group.name().to_string(),
            replicas,
            ..ClusterInfo::default()
        })
    }

    /// Hands leadership to `preferred` (a replica's server name) or to the most up-to-date
    /// other replica; 10005 when `preferred` is no replica or already leads.
    fn step_down(&mut self, preferred: Option<&str>) -> Result<(), ApiError> {
        // What this turn took goes out before the leadership does.
        self.append_batch();
        let Some(r) = self.replica.as_mut() else {
            return Ok(());
        };
        if let Some(p) = preferred {
            if !r.group.voters().iter().any(|v| v == p) {
                return Err(jsproto::api::cluster::preferred_not_known(p));
            }
            if r.group.leader().as_deref() == Some(p) {
                return Err(jsproto::api::cluster::preferred_already_leader(p));
            }
        }
        match r.group.transfer_leader(preferred) {
            Some(to) => {
                info!(stream = %self.config().name, "stepping down to {to}");
                Ok(())
            }
            None => Err(ApiError::cluster_no_peers("no replica to step down to")),
        }
    }

    /// Answers a step-down: the stream's or the consumer's response type.
    pub(super) fn step_down_answer(
        &mut self,
        consumer: Option<&str>,
        reply: Option<&Bytes>,
        result: Result<(), ApiError>,
    ) {
        use jsproto::api::cluster::{ConsumerLeaderStepdownResponse, StreamLeaderStepdownResponse};
        let body = match consumer {
            Some(name) if !self.stream.consumers().contains(name) => {
                encode_error::<ConsumerLeaderStepdownResponse>(&ApiError::consumer_not_found())
            }
            Some(_) => answer(result.map(|()| ConsumerLeaderStepdownResponse { success: true })),
            None => answer(result.map(|()| StreamLeaderStepdownResponse { success: true })),
        };
        self.respond(reply, body);
    }

    /// The meta group applied a stream update (`config`): the stream's state takes it when
    /// the leader's entry for it is applied, at the same place in the log on every replica
    /// (a lowered limit removes the same messages everywhere; a publish after it is checked
    /// against it everywhere), not when each server's meta group got to it.
    pub(super) fn update_replicated(&mut self, config: StreamConfig) {
        if let Some(r) = self.replica.as_mut() {
            r.desired_config = Some(config);
        }
        self.reconcile_config();
    }

    /// The leader, once it has applied every entry it knows committed: appends a config
    /// update the meta group applied here ([`StreamEngine::update_replicated`]) and no config
    /// entry has carried since (one at a time). Only updates are appended, never a config
    /// held from before: a leader whose meta group lags must not take the stream back to an
    /// older one.
    fn reconcile_config(&mut self) {
        let Some(r) = self.replica.as_mut() else {
            return;
        };
        if r.desired_config.is_none()
            || !r.group.committed_in_term()
            || r.config_inflight
            || r.group.applied() < r.group.committed()
        {
            return;
        }
        let Some(desired) = r.desired_config.take() else {
            return;
        };
        if &desired == self.stream.config() {
            return;
        }
        // Kept until a config entry is applied (see `Replica::desired_config`).
        if let Some(r) = self.replica.as_mut() {
            r.desired_config = Some(desired.clone());
            r.config_inflight = true;
        }
        self.append(Op::UpdateStream(desired), Some(Pending::Config));
    }

    /// Makes what was applied durable as configured and sends what waited for it (PubAcks,
    /// ack confirmations). No recount here: applying an entry already did it, and anything
    /// the consumers do outside of an entry would differ between replicas.
    fn commit_replica(&mut self) {
        self.commit_store();
        // Every turn, not only when an ack waits for it: a replicated consumer's state is
        // durable in the Raft log once applied, so nothing is left to write. Left marked as
        // changed (as a new consumer, or one after an ack, is), its state-write deadline
        // ([`jsproto::stream::ConsumerSet::deadline`]) stays due for good and the leader
        // would append a `Tick` every turn of the thread, an idle stream flooding its
        // group with entries.
        self.persist_consumers(false);
    }

    /// Stops the group (the stream is stopping): no more messages for it.
    pub(super) fn stop_replica(&mut self) {
        self.unsubscribe_leader();
        if let Some(r) = self.replica.as_ref() {
            r.group.close();
        }
    }
}
