//! The consumer state machine: hands stored messages to waiting pull requests (pull
//! consumers) or to a deliver subject (push consumers, [`PushConfig`]), tracks
//! acknowledgements and redelivers what was not acknowledged in time.
//!
//! Behaviour follows nats-server 2.15.1 as recorded in `consumer-semantics.md`; the section
//! numbers in the docs below refer to it.
//!
//! # Driving a [`Consumer`]
//!
//! The consumer is sans-IO: it never reads a clock, never touches the stream store and never
//! sends anything. The caller owns those:
//!
//! ```text
//!   pull request ──► on_pull_request / on_pull_body ─┐
//!   ack message  ──► on_ack ─────────────────────────┤
//!   stream store ──► on_stream_append / _remove /    ├──► Vec<Action> ──► caller sends MSGs,
//!                    _purge / resync                 │    (Deliver, Status,   statuses, ack
//!   timer        ──► on_timeout  ◄── poll_timeout ───┤     AckReply, Acked,   replies; stream
//!   requester gone ► on_request_gone                 │     Advisory,          drops acked msgs
//!   push interest ─► set_delivery_interest ──────────┤     PushStatus)
//!   $JS.FC reply ──► on_flow_control_reply ──────────┘
//!   admin        ──► update_config / delete / info / snapshot
//! ```
//!
//! * Every input takes `now: Instant`, which must never go backwards; the consumer first fires
//!   whatever fell due at or before `now`, so a late timer is harmless.
//! * After every call, re-arm one timer at [`Consumer::poll_timeout`] and call
//!   [`Consumer::on_timeout`] when it fires. Calling it early or twice does nothing.
//! * The stream is read through [`StreamView`], passed to every call that may deliver.
//! * Outputs are appended to `out`, in the order they must be sent.
//!
//! # Push consumers
//!
//! With [`ConsumerConfig::push`] set, the consumer delivers by itself to its deliver subject
//! whenever it has something deliverable and the caller has said the subject has interest
//! ([`Consumer::set_delivery_interest`]; nats-server counts only subscriptions on exactly that
//! subject, in the `deliver_group` queue group if one is set). Ack policies, ack waits,
//! `backoff`, `max_deliver` and `max_ack_pending` work as for pull; redeliveries go out as
//! soon as their ack wait runs out. A pull request (or `+NXT`) on a push consumer gets
//! `409 Consumer is push based`, as from nats-server. What it sends besides messages is
//! [`Action::PushStatus`], as nats-server 2.15's delivery loop (`consumer.go`):
//!
//! * `idle_heartbeat`: after that long without a delivery, and then every `idle_heartbeat`
//!   while nothing is delivered (also while paused or stalled), `NATS/1.0 100 Idle Heartbeat`
//!   with `Nats-Last-Consumer` / `Nats-Last-Stream` (the `delivered` pair) and, while a
//!   flow-control request is unanswered, `Nats-Consumer-Stalled: <its reply subject>`; no
//!   reply subject, no payload; only while the deliver subject has interest.
//! * `flow_control`: each delivery adds its size (deliver subject + ack subject + headers +
//!   payload) to the bytes in flight. Past half the window (first 2 MiB) a
//!   `NATS/1.0 100 FlowControl Request` goes out right after the delivery, with reply subject
//!   `$JS.FC.<stream>.<consumer>.<4 chars>`; past the whole window delivery stalls. The answer
//!   to the latest request ([`Consumer::on_flow_control_reply`]) takes what was in flight when
//!   it was asked off the count, doubles the window up to [`FLOW_CONTROL_MAX_PENDING`] and
//!   resumes delivery; an answer to an older request is ignored.
//!
//! # State of one stored message, as this consumer sees it
//!
//! ```text
//!   undelivered ──deliver──► pending ──ack / term / removed──► done (ack floor may move)
//!   (num_pending)            │  ▲  │
//!            ack_wait passed │  │  └──max_deliver reached──► exhausted (advisory once)
//!                 or -NAK    ▼  │ redeliver to the next pull (before any new message)
//!                       redelivery queue
//! ```
//!
//! With `ack_policy: none` there is no pending state at all: a delivery is done at once.
//!
//! # Where this differs from nats-server, or does less
//!
//! * A `no_wait` request arriving while `max_ack_pending` is reached gets `404 No Messages` at
//!   once (nats-server leaves it queued until capacity frees or a sweep answers; §5 says
//!   clients accept both).
//! * `-NAK` with a delay on a consumer with `backoff` redelivers after exactly the delay
//!   (nats-server was seen to wait `delay + backoff[n] - ack_wait`).
//! * `+WPI` on a message already queued for redelivery takes it off the queue.
//! * A resume ([`Consumer::set_pause`] with no time ahead) delivers to waiting requests at
//!   once; nats-server 2.15.1 leaves them unserved after a resume by API (they time out).
//! * A message at `max_deliver` is given up (out of `num_ack_pending`, `MAX_DELIVERIES`
//!   advisory) as soon as its last ack wait runs out. nats-server gives it up only when a pull
//!   request next reaches it in the redelivery queue: with no pull waiting it stays counted in
//!   `num_ack_pending` and its advisory comes with the next pull, or never if that pull is
//!   served by another message first (observed on 2.15.1).
//! * A deleted pending message on an `ack_policy: all` consumer is forgotten with the
//!   explicit-ack floor rule (nats-server would ack everything below it).
//! * `ack_policy: all`: acking a redelivered message covers every stream seq up to it, but the
//!   floor's consumer seq stays below the first delivery of any younger message still pending,
//!   so that message's own ack still counts. nats-server moves the consumer floor to the ack's
//!   delivery seq and then ignores the younger message's ack, redelivering a message that was
//!   acknowledged. An ack-all for a stream seq beyond what was delivered is ignored.
//! * Priority groups ([`PriorityPolicy`], see `priority.rs`): a request the policy passes over
//!   keeps its place in line (nats-server moves it to the tail); pins are not persisted, so a
//!   restart releases them (as nats-server); pin ids come from a seed
//!   ([`Consumer::set_pin_seed`]) rather than a random generator, so replicas agree.
//! * Push: the flow-control request's last token comes from a generator seeded by the
//!   consumer's names, not from a random source; `ack_policy: flow_control` (acks carried by
//!   flow-control answers) acks nothing by itself (it is treated as `all`, acked by `+ACK`);
//!   the flow-control byte count of a `headers_only` delivery is that of the full message;
//!   idle heartbeats start a full `idle_heartbeat` after interest comes (nats-server's timer
//!   keeps running while unbound, so its first one may come sooner).
//! * Pacing (`pacing.rs`): a message larger than the rate limit's bucket waits for a full
//!   bucket and goes (nats-server's limiter never delivers it); replay waits are measured
//!   from the previous delivery.
//! * Left to the caller: `headers_only` (the server writes the delivery and strips the
//!   payload) and inactivity deletion of ephemerals (the server can use
//!   [`ConsumerState::last_delivery`]/[`ConsumerState::last_ack`] and
//!   [`Consumer::poll_timeout`] for that).

mod ack;
mod config;
pub mod dead_letter;
mod pacing;
mod pending;
mod priority;
mod pull;
mod push;
mod waiting;

use std::collections::VecDeque;
use std::ops::RangeInclusive;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use tracing::trace;

pub use ack::{AckKind, AckSubject, AckTokens};
pub use config::{
    AckPolicy, ConsumerConfig, ConsumerError, DeliverPolicy, PriorityPolicy, PushConfig, RateLimit,
    SubjectFilter, DEFAULT_ACK_WAIT, DEFAULT_MAX_ACK_PENDING, DEFAULT_MAX_WAITING,
};
// Kept at their earlier path; they live in `crate::duration`.
pub use crate::duration::{format_go_duration, parse_go_duration};
pub use pull::{Leftover, PriorityGroup, PullError, PullRequest, PullStatus};
pub use push::{PushStatus, CONSUMER_STALLED, FLOW_CONTROL_MAX_PENDING, FLOW_CONTROL_REQUEST};

/// A map serialised as a list of `(key, value)` pairs, for maps whose keys are not strings
/// (JSON objects only take string keys): `#[serde(with = "pairs")]`.
pub(crate) mod pairs {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub(crate) fn serialize<'a, M, K, V, S>(map: &'a M, s: S) -> Result<S::Ok, S::Error>
    where
        &'a M: IntoIterator<Item = (&'a K, &'a V)>,
        K: Serialize + 'a,
        V: Serialize + 'a,
        S: Serializer,
    {
        s.collect_seq(map)
    }

    pub(crate) fn deserialize<'de, M, K, V, D>(d: D) -> Result<M, D::Error>
    where
        M: FromIterator<(K, V)>,
        K: Deserialize<'de>,
        V: Deserialize<'de>,
        D: Deserializer<'de>,
    {
        Ok(Vec::<(K, V)>::deserialize(d)?.into_iter().collect())
    }
}

use pacing::Pacing;
use pending::{Expired, PendingSet};
use priority::{Backlog, Pin, PinIds};
use pull::PullMemo;
use push::Push;
use waiting::{Request, Waiting};

/// Termination reason nats-server gives when a pending message is deleted from the stream.
pub const REASON_UNACKED_DELETED: &str = "Unacknowledged message was deleted";

/// A (consumer sequence, stream sequence) pair, as in `delivered` and `ack_floor`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct SequencePair {
    /// Consumer sequence (counts every delivery, redeliveries included).
    pub consumer_seq: u64,
    /// Stream sequence.
    pub stream_seq: u64,
}

/// What the consumer needs to know about one stored message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MsgMeta {
    /// Stream sequence.
    pub seq: u64,
    /// Length of the message's subject in bytes.
    pub subject_len: usize,
    /// Bytes of the stored header block plus the payload (what a delivery carries besides the
    /// subjects).
    pub size: usize,
    /// Stored timestamp, Unix nanoseconds (goes into the ack subject).
    pub timestamp_unix_ns: u64,
}

/// Read access to the stream the consumer reads, implemented by the store.
///
/// Matching a subject against the consumer's filter is [`SubjectFilter::matches`]. The
/// consumer relies on these being cheap (an index lookup, not a scan) since
/// `next_matching` is called once per delivery. `num_matching` is only called on create,
/// purge, filter change and [`Consumer::resync`].
pub trait StreamView {
    /// First stored sequence (`last_seq() + 1` when empty).
    fn first_seq(&self) -> u64;
    /// Last sequence ever assigned (0 for a new stream).
    fn last_seq(&self) -> u64;
    /// The message with this sequence, if still stored.
    fn load(&self, seq: u64) -> Option<MsgMeta>;
    /// The first stored message with sequence ≥ `from` whose subject matches `filter`.
    fn next_matching(&self, from: u64, filter: &SubjectFilter) -> Option<MsgMeta>;
    /// How many stored messages with sequence ≥ `from` match `filter`.
    fn num_matching(&self, from: u64, filter: &SubjectFilter) -> u64;
    /// Sequence of the last stored message matching `filter` (deliver policy `last`).
    fn last_matching(&self, filter: &SubjectFilter) -> Option<u64>;
    /// The last stored sequence of every distinct subject matching `filter`, ascending
    /// (deliver policy `last_per_subject`; called once, when such a consumer is created).
    fn last_per_subject(&self, filter: &SubjectFilter) -> Vec<u64>;
    /// Whether the stream keeps at most one message per subject (`max_msgs_per_subject: 1`):
    /// then every stored message is its subject's last, and a `last_per_subject` consumer
    /// starts at the first stored message as nats-server's does. The default says no.
    fn one_msg_per_subject(&self) -> bool {
        false
    }
    /// First stored sequence whose timestamp is ≥ `unix_ns` (deliver policy
    /// `by_start_time`).
    fn first_seq_at_or_after_time(&self, unix_ns: u64) -> Option<u64>;
    /// Whether anyone still listens on a pull request's reply subject. A request whose
    /// requester went away is dropped silently when it comes up for a message, so the message
    /// goes to the next request instead of being lost until its ack wait (nats-server checks
    /// interest the same way, §6.3 step 4). The default says yes.
    fn has_interest(&self, reply_to: &[u8]) -> bool {
        let _ = reply_to;
        true
    }
}

/// Something the caller must do, produced by the consumer's inputs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Send stored message `ack.stream_seq` (original subject, headers and payload) to
    /// `reply_to`, with reply subject [`AckTokens::write_v1`]
    /// (`$JS.ACK.<stream>.<consumer>.<dc>.<sseq>.<cseq>.<ts>.<pending>`). No headers are
    /// added but the pin id.
    Deliver {
        /// The pull request's reply subject, or a push consumer's deliver subject.
        reply_to: Bytes,
        /// Tokens of the ack reply subject: which message, which delivery.
        ack: AckTokens,
        /// `pinned_client` consumers: add the header `Nats-Pin-Id: <id>`
        /// ([`crate::headers::PIN_ID`]) to the stored headers, as nats-server does.
        pin_id: Option<Arc<str>>,
    },
    /// Send an `HMSG` with this status header block ([`PullStatus::header_block`]) and no
    /// payload to `reply_to`.
    Status {
        /// The pull request's reply subject.
        reply_to: Bytes,
        /// Which status.
        status: PullStatus,
    },
    /// Send an `HMSG` with this status ([`PushStatus::header_block`]), reply subject
    /// [`PushStatus::reply`] and no payload to a push consumer's deliver subject: an idle
    /// heartbeat or a flow-control request.
    PushStatus {
        /// The deliver subject.
        deliver_subject: Bytes,
        /// Which status.
        status: PushStatus,
    },
    /// Send an empty `MSG` to `reply_to`: the answer to an ack that had a reply subject
    /// (`ack_sync`, double ack).
    AckReply {
        /// The ack message's reply subject.
        reply_to: Bytes,
    },
    /// These stream sequences are acknowledged by this consumer (every seq for explicit acks
    /// and terms; the range newly under the floor for `ack_policy: all`; each delivery for
    /// `ack_policy: none`). Interest/work-queue streams use it to drop messages; limits streams
    /// ignore it.
    Acked {
        /// Acknowledged stream sequences.
        stream_seqs: RangeInclusive<u64>,
    },
    /// Publish an advisory (`$JS.EVENT.ADVISORY.CONSUMER.<kind>.<stream>.<consumer>`). The
    /// consumer only reports the event; the caller builds the subject and body with
    /// [`crate::api::advisory::JsAdvisory::Message`] (adding `id`, `timestamp` and the names)
    /// and publishes it if anyone listens, as nats-server does.
    Advisory(Advisory),
    /// The pause ran out by itself ([`Consumer::set_pause`]): deliveries start again. The
    /// caller publishes the pause advisory with `paused: false` and the stored `pause_until`,
    /// as nats-server does when its pause timer fires (`CONSUMER.PAUSE.<stream>.<consumer>`).
    Resumed,
}

/// Consumer message events reported as [`Action::Advisory`] (optional for clients;
/// `jetstream-api.md` §7); the wire form is [`crate::api::advisory::JsAdvisory::Message`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Advisory {
    /// `MAX_DELIVERIES` (`io.nats.jetstream.advisory.v1.max_deliver`): the message reached
    /// `max_deliver` and will not be delivered again.
    MaxDeliver {
        /// Stream sequence.
        stream_seq: u64,
        /// Deliveries made.
        deliveries: u32,
    },
    /// `MSG_TERMINATED` (`io.nats.jetstream.advisory.v1.terminated`): `+TERM`, or a pending
    /// message deleted from the stream ([`REASON_UNACKED_DELETED`]).
    Terminated {
        /// Stream sequence.
        stream_seq: u64,
        /// Consumer sequence from the ack subject (first delivery for deletions).
        consumer_seq: u64,
        /// Delivery count from the ack subject.
        deliveries: u64,
        /// Text after `+TERM ` (or [`REASON_UNACKED_DELETED`]); empty when none was given,
        /// and then left out of the advisory body, as nats-server does.
        reason: String,
    },
    /// `MSG_NAKED` (`io.nats.jetstream.advisory.v1.nak`).
    Nak {
        /// Stream sequence.
        stream_seq: u64,
        /// Consumer sequence from the ack subject.
        consumer_seq: u64,
        /// Delivery count from the ack subject.
        deliveries: u64,
    },
    /// `PINNED` (`io.nats.jetstream.advisory.v1.consumer_group_pinned`): a `pinned_client`
    /// consumer gave a new pin to a request of `group`.
    Pinned {
        /// The priority group.
        group: String,
        /// The new pin id (`pinned_id`).
        pin_id: String,
    },
    /// `UNPINNED` (`io.nats.jetstream.advisory.v1.consumer_group_unpinned`): the pin was
    /// released.
    Unpinned {
        /// The priority group.
        group: String,
        /// `"timeout"` (no request with the pin id for `priority_timeout`) or `"admin"`
        /// (`CONSUMER.UNPIN`), as nats-server.
        reason: &'static str,
    },
}

/// The numbers `CONSUMER.INFO` reports (`jetstream-api.md` §5.4). All counters are kept
/// exactly as events happen; reading them costs nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConsumerState {
    /// Last consumer seq handed out / highest stream seq ever delivered.
    pub delivered: SequencePair,
    /// Everything at or below is acknowledged, terminated or gone.
    pub ack_floor: SequencePair,
    /// Delivered and awaiting an ack (including those queued for redelivery).
    pub num_ack_pending: u64,
    /// Distinct messages delivered more than once that are still tracked.
    pub num_redelivered: u64,
    /// Pull requests waiting.
    pub num_waiting: u64,
    /// Matching stream messages not yet delivered.
    pub num_pending: u64,
    /// When the last delivery happened (`delivered.last_active`), `None` before the first.
    pub last_delivery: Option<Instant>,
    /// When the last ack was processed (`ack_floor.last_active`), `None` before the first.
    pub last_ack: Option<Instant>,
}

/// One delivered, unacknowledged message ([`Consumer::pending_messages`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingMessage<'a> {
    /// Stream sequence.
    pub stream_seq: u64,
    /// Consumer sequence of its first delivery.
    pub consumer_seq: u64,
    /// Deliveries so far.
    pub delivery_count: u32,
    /// When its ack-wait clock started: its last delivery, or its last `+WPI` (back-dated for
    /// a NAK delay). The ack deadline is this plus the ack wait for its delivery count.
    pub since: Instant,
    /// Waiting in the redelivery queue (its ack wait ran out, or it was NAKed): nobody
    /// works on it; `holder` is where it went last.
    pub queued: bool,
    /// The reply subject of the pull request its last delivery went to; `None` when not known
    /// (delivered before a restart).
    pub holder: Option<&'a Bytes>,
}

/// What the server persists so that no unacknowledged message is lost across a restart
/// (`consumer-semantics.md` §13). Waiting requests are not persisted (clients pull again).
/// The redelivery queue is (nats-server's is not: a NAKed message waits out its ack wait
/// again after a restart; here it goes out first, as it would have without the restart).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct PersistedState {
    /// Last consumer seq handed out / highest stream seq delivered.
    pub delivered: SequencePair,
    /// The ack floor.
    pub ack_floor: SequencePair,
    /// Every pending message, ordered by stream seq.
    pub pending: Vec<PersistedPending>,
    /// `(stream seq, deliveries)` of messages dropped at `max_deliver` and not acked since:
    /// interest and work-queue streams keep them, those with deliveries > 1 count in
    /// `num_redelivered`. (Before the single-delivery ones were kept, only those were written.)
    pub exhausted: Vec<(u64, u32)>,
    /// Stream seqs waiting in the redelivery queue (NAKed, or their ack wait ran out with no
    /// pull to take them), in queue order; absent from state written before it was kept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub queued: Vec<u64>,
}

/// One pending message in a [`PersistedState`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PersistedPending {
    /// Stream sequence.
    pub stream_seq: u64,
    /// Consumer sequence of its first delivery.
    pub consumer_seq: u64,
    /// Deliveries so far.
    pub delivery_count: u32,
    /// When its ack-wait clock started, Unix nanoseconds: the last delivery or `+WPI`
    /// (back-dated for a NAK delay, as nats-server does). The ack deadline is this plus the
    /// ack wait for its delivery count.
    pub timestamp_unix_ns: i64,
}

/// Everything a [`Consumer`] holds besides its config, exactly: what a replica's snapshot
/// carries so that the replica restored from it ([`Consumer::from_image`]) answers every
/// later input as the one it was taken from (`jsproto::stream::Stream::snapshot`). Unlike a
/// [`PersistedState`], it keeps waiting pull requests, the pin, push and pacing timers.
///
/// Times are the consumer's own ticks (nanoseconds since its epoch), so the image does not
/// depend on the `Instant`s of the process that took it; the caller places the epoch
/// ([`Consumer::epoch`]) on its own line. Serialisable; the fields are private (a format
/// between replicas of the same version, not an API).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConsumerImage {
    next_stream_seq: u64,
    skip: VecDeque<u64>,
    resume: u64,
    next_consumer_seq: u64,
    num_pending: u64,
    /// `None` for `ack_policy: none`.
    acks: Option<PendingSet>,
    waiting: Waiting,
    last_delivery: Option<u64>,
    last_ack: Option<u64>,
    paused_until: Option<u64>,
    pin: Option<Pin>,
    pin_ids: PinIds,
    push: Option<Push>,
    pacing: Option<Pacing>,
}

/// Ack tracking: absent by construction for `ack_policy: none`.
#[derive(Debug, Clone)]
enum Acks {
    /// `ack_policy: none`: nothing is ever pending; the floor is `delivered`.
    None,
    /// `explicit` or `all`.
    Tracked(PendingSet),
}

/// A message chosen for the next delivery, not yet committed.
#[derive(Debug, Clone, Copy)]
enum Candidate {
    Redelivery { meta: MsgMeta, delivery_count: u32 },
    New { meta: MsgMeta },
}

/// One consumer, pull or push. See the [module docs](self) for how to drive it.
///
/// Costs: every event is O(log n) in pending messages and waiting requests (plus the work
/// it produces); no scan of all pending messages or all requests happens on a timer.
#[derive(Debug, Clone)]
pub struct Consumer {
    stream_name: String,
    config: ConsumerConfig,
    filter: SubjectFilter,
    /// Time zero for the internal tick clock (nanoseconds since `epoch`).
    epoch: Instant,
    /// Next stream seq to consider for a new delivery (`delivered.stream_seq + 1`).
    next_stream_seq: u64,
    /// `deliver_policy: last_per_subject` while starting: the stream seqs still to deliver
    /// first (the last message of each matching subject when the consumer was created),
    /// ascending. Nothing else below the last of them is delivered; after it, every matching
    /// message is (nothing matching lay between it and the stream's end at creation).
    skip: VecDeque<u64>,
    /// With such a start: one past the last of those seqs. Nothing below it but `skip` is
    /// delivered new, even once `skip` is empty (0 otherwise).
    resume: u64,
    /// Consumer seq of the next delivery (`delivered.consumer_seq + 1`).
    next_consumer_seq: u64,
    num_pending: u64,
    acks: Acks,
    waiting: Waiting,
    last_delivery: Option<Instant>,
    last_ack: Option<Instant>,
    /// The last `CONSUMER.MSG.NEXT` body and its parse, reused when the next body is the same.
    pull_memo: PullMemo,
    /// Deliveries wait until this tick (`pause_until`, [`Consumer::set_pause`]).
    paused_until: Option<u64>,
    /// The pin of a `pinned_client` consumer, if anyone holds it.
    pin: Option<Pin>,
    pin_ids: PinIds,
    /// Push delivery state; `None` for a pull consumer (which then pays nothing for it).
    push: Option<Box<Push>>,
    /// `replay_policy: original` / `rate_limit_bps` (`None` when neither: nothing to pay).
    pacing: Option<Box<Pacing>>,
}

impl Consumer {
    /// Creates a consumer on stream `stream_name` that starts at stream seq `start_seq`
    /// (resolve the deliver policy with [`DeliverPolicy::start_seq`]). It reports
    /// `delivered = ack_floor = (0, start_seq - 1)` and counts `num_pending` once through
    /// `stream`.
    ///
    /// # Errors
    /// Any [`ConsumerConfig::validate`] error.
    pub fn new(
        stream_name: impl Into<String>,
        config: ConsumerConfig,
        start_seq: u64,
        stream: &impl StreamView,
        now: Instant,
    ) -> Result<Self, ConsumerError> {
        config.validate()?;
        let start = start_seq.max(1);
        let filter = SubjectFilter::new(&config.filter_subjects);
        let floor = SequencePair {
            consumer_seq: 0,
            stream_seq: start - 1,
        };
        let acks = match config.ack_policy {
            AckPolicy::None => Acks::None,
            AckPolicy::All | AckPolicy::Explicit => Acks::Tracked(PendingSet::new(floor)),
        };
        let stream_name = stream_name.into();
        let pacing = Pacing::new(
            config.replay_original,
            stream.last_seq(),
            config.rate_limit.filter(|_| config.push.is_some()),
            0,
        )
        .map(Box::new);
        let push = config.push.as_ref().map(|p| {
            Box::new(Push::new(
                &p.deliver_subject,
                p.idle_heartbeat.map(dur_ns),
                p.flow_control,
                format!("$JS.FC.{stream_name}.{}.", config.name),
            ))
        });
        Ok(Self {
            stream_name,
            num_pending: stream.num_matching(start, &filter),
            config,
            filter,
            epoch: now,
            next_stream_seq: start,
            skip: VecDeque::new(),
            resume: 0,
            next_consumer_seq: 1,
            acks,
            waiting: Waiting::default(),
            last_delivery: None,
            last_ack: None,
            pull_memo: PullMemo::default(),
            paused_until: None,
            pacing,
            pin: None,
            pin_ids: PinIds::default(),
            push,
        })
    }

    /// Creates a consumer that starts where `policy` says ([`DeliverPolicy::start_seq`]). With
    /// [`DeliverPolicy::LastPerSubject`] it first delivers the last stored message of each
    /// subject its filter matches, in stream order, then every new message (as nats-server:
    /// `delivered` = `ack_floor` = the first of those − 1, `num_pending` = how many there
    /// are). Messages stored after creation count and follow, whatever their subject's last
    /// was at creation.
    ///
    /// # Errors
    /// Any [`ConsumerConfig::validate`] error.
    pub fn with_deliver_policy(
        stream_name: impl Into<String>,
        config: ConsumerConfig,
        policy: DeliverPolicy,
        stream: &impl StreamView,
        now: Instant,
    ) -> Result<Self, ConsumerError> {
        let filter = SubjectFilter::new(&config.filter_subjects);
        if policy != DeliverPolicy::LastPerSubject || stream.one_msg_per_subject() {
            let start = policy.start_seq(stream, &filter);
            return Self::new(stream_name, config, start, stream, now);
        }
        let lasts = stream.last_per_subject(&filter);
        let start = lasts
            .first()
            .copied()
            .unwrap_or_else(|| DeliverPolicy::no_last_per_subject_start(stream));
        let mut c = Self::new(stream_name, config, start, stream, now)?;
        c.resume = lasts.last().map_or(0, |&last| last + 1);
        c.skip = lasts.into();
        c.num_pending = c.count_pending(stream);
        Ok(c)
    }

    /// Rebuilds a consumer from a [`PersistedState`] after a restart. Pending messages keep
    /// their delivery counts; each is redelivered once its ack wait, measured from the
    /// persisted timestamp, has passed (at once if it already has). `now_unix_ns` is the wall
    /// clock at `now`.
    ///
    /// # Errors
    /// Any [`ConsumerConfig::validate`] error; [`ConsumerError::InvalidState`] when the floor
    /// is above `delivered` or a pending entry lies outside `(floor, delivered]`.
    pub fn restore(
        stream_name: impl Into<String>,
        config: ConsumerConfig,
        state: &PersistedState,
        stream: &impl StreamView,
        now: Instant,
        now_unix_ns: u64,
    ) -> Result<Self, ConsumerError> {
        let (d, f) = (state.delivered, state.ack_floor);
        if f.consumer_seq > d.consumer_seq || f.stream_seq > d.stream_seq {
            return Err(ConsumerError::InvalidState("ack floor above delivered"));
        }
        // Redeliveries already due at the restart keep their deadlines (and so their order
        // and recorded delivery times): the consumer's epoch goes back by the most overdue.
        let overdue = state
            .pending
            .iter()
            .map(|e| {
                let wait = i128::from(dur_ns(config.ack_deadline_after(e.delivery_count)));
                let late = i128::from(now_unix_ns) - i128::from(e.timestamp_unix_ns) - wait;
                u64::try_from(late.max(0)).unwrap_or(u64::MAX)
            })
            .max()
            .unwrap_or(0);
        let (epoch, epoch_unix) = match now.checked_sub(Duration::from_nanos(overdue)) {
            Some(epoch) => (epoch, now_unix_ns - overdue),
            None => (now, now_unix_ns),
        };
        let mut c = Self::new(stream_name, config, d.stream_seq + 1, stream, epoch)?;
        c.next_consumer_seq = d.consumer_seq + 1;
        if let Acks::Tracked(p) = &mut c.acks {
            p.floor = f;
            for e in &state.pending {
                if e.stream_seq <= f.stream_seq
                    || e.stream_seq > d.stream_seq
                    || e.consumer_seq <= f.consumer_seq
                    || e.consumer_seq > d.consumer_seq
                {
                    return Err(ConsumerError::InvalidState(
                        "pending entry outside the floor..delivered window",
                    ));
                }
                let wait = dur_ns(c.config.ack_deadline_after(e.delivery_count));
                // The new consumer's epoch (tick 0) is `epoch_unix`, so the deadline in ticks
                // is `ts + wait - epoch_unix`; one before the epoch is due at once.
                let ahead =
                    i128::from(e.timestamp_unix_ns) + i128::from(wait) - i128::from(epoch_unix);
                let deadline = u64::try_from(ahead.max(0)).unwrap_or(u64::MAX);
                p.insert_restored(e.stream_seq, e.consumer_seq, e.delivery_count, deadline);
            }
            for &(seq, deliveries) in &state.exhausted {
                p.insert_exhausted(seq, deliveries);
            }
            for &seq in &state.queued {
                p.enqueue(seq);
            }
        } else if !state.pending.is_empty() {
            return Err(ConsumerError::InvalidState(
                "pending entries on an ack_policy none consumer",
            ));
        }
        Ok(c)
    }

    /// The consumer's epoch: the instant its ticks count from (its creation, for a consumer
    /// made by [`Consumer::new`]). A replica's snapshot records it relative to the stream's
    /// epoch and hands it back to [`Consumer::from_image`].
    pub fn epoch(&self) -> Instant {
        self.epoch
    }

    /// Its whole state apart from the config ([`ConsumerImage`]). O(pending + waiting).
    pub fn image(&self) -> ConsumerImage {
        let tick = |t: Option<Instant>| t.map(|t| self.tick(t));
        ConsumerImage {
            next_stream_seq: self.next_stream_seq,
            skip: self.skip.clone(),
            resume: self.resume,
            next_consumer_seq: self.next_consumer_seq,
            num_pending: self.num_pending,
            acks: match &self.acks {
                Acks::None => None,
                Acks::Tracked(p) => Some(p.clone()),
            },
            waiting: self.waiting.clone(),
            last_delivery: tick(self.last_delivery),
            last_ack: tick(self.last_ack),
            paused_until: self.paused_until,
            pin: self.pin.clone(),
            pin_ids: self.pin_ids.clone(),
            push: self.push.as_deref().cloned(),
            pacing: self.pacing.as_deref().cloned(),
        }
    }

    /// The consumer `image` was taken of, with `config` (the one it had), its ticks counting
    /// from `epoch` (the image's [`Consumer::epoch`] on this process's line). Equal, input for
    /// input, to the consumer the image was taken from.
    ///
    /// # Errors
    /// Any [`ConsumerConfig::validate`] error; [`ConsumerError::InvalidState`] when the image's
    /// ack tracking does not fit the config's `ack_policy`.
    pub fn from_image(
        stream_name: impl Into<String>,
        config: ConsumerConfig,
        image: ConsumerImage,
        epoch: Instant,
    ) -> Result<Self, ConsumerError> {
        config.validate()?;
        let acks = match (config.ack_policy, image.acks) {
            (AckPolicy::None, None) => Acks::None,
            (AckPolicy::All | AckPolicy::Explicit, Some(p)) => Acks::Tracked(p),
            _ => {
                return Err(ConsumerError::InvalidState(
                    "ack tracking does not match the ack policy",
                ))
            }
        };
        let filter = SubjectFilter::new(&config.filter_subjects);
        let mut c = Self {
            stream_name: stream_name.into(),
            config,
            filter,
            epoch,
            next_stream_seq: image.next_stream_seq,
            skip: image.skip,
            resume: image.resume,
            next_consumer_seq: image.next_consumer_seq,
            num_pending: image.num_pending,
            acks,
            waiting: image.waiting,
            last_delivery: None,
            last_ack: None,
            pull_memo: PullMemo::default(),
            paused_until: image.paused_until,
            pin: image.pin,
            pin_ids: image.pin_ids,
            push: image.push.map(Box::new),
            pacing: image.pacing.map(Box::new),
        };
        c.last_delivery = image.last_delivery.map(|t| c.instant(t));
        c.last_ack = image.last_ack.map(|t| c.instant(t));
        Ok(c)
    }

    /// The state to persist (§13). `now_unix_ns` is the wall clock at `now`. O(pending).
    pub fn snapshot(&self, now: Instant, now_unix_ns: u64) -> PersistedState {
        let now_tick = i128::from(self.tick(now));
        let mut state = PersistedState {
            delivered: self.delivered(),
            ack_floor: self.ack_floor(),
            ..PersistedState::default()
        };
        if let Acks::Tracked(p) = &self.acks {
            state.pending = p
                .iter()
                .map(|(seq, e)| {
                    let wait = dur_ns(self.config.ack_deadline_after(e.delivery_count));
                    let start_tick = i128::from(e.deadline) - i128::from(wait);
                    let ts = i128::from(now_unix_ns) + start_tick - now_tick;
                    PersistedPending {
                        stream_seq: seq,
                        consumer_seq: e.first_consumer_seq,
                        delivery_count: e.delivery_count,
                        timestamp_unix_ns: i64::try_from(ts).unwrap_or(if ts < 0 {
                            i64::MIN
                        } else {
                            i64::MAX
                        }),
                    }
                })
                .collect();
            state.exhausted = p.exhausted().collect();
            state.queued = p.queued().collect();
        }
        state
    }

    /// Who holds what: every delivered, unacknowledged message, by stream seq, with where its
    /// last delivery went and since when (jsserver's `CONSUMER.PENDING`; nats-server has no
    /// such view). O(pending).
    pub fn pending_messages(&self) -> impl Iterator<Item = PendingMessage<'_>> + '_ {
        let p = match &self.acks {
            Acks::Tracked(p) => Some(p),
            Acks::None => None,
        };
        p.into_iter().flat_map(|p| p.iter()).map(|(seq, e)| {
            let wait = dur_ns(self.config.ack_deadline_after(e.delivery_count));
            PendingMessage {
                stream_seq: seq,
                consumer_seq: e.first_consumer_seq,
                delivery_count: e.delivery_count,
                since: self.instant(e.deadline.saturating_sub(wait)),
                queued: e.queue_pos.is_some(),
                holder: e.holder.as_ref(),
            }
        })
    }

    /// The stream this consumer reads.
    pub fn stream_name(&self) -> &str {
        &self.stream_name
    }

    /// The current configuration.
    pub fn config(&self) -> &ConsumerConfig {
        &self.config
    }

    /// The subject filter in force.
    pub fn filter(&self) -> &SubjectFilter {
        &self.filter
    }

    /// The v1 ack reply subject for a delivery of this consumer.
    pub fn ack_subject(&self, ack: &AckTokens) -> String {
        ack.to_v1_subject(&self.stream_name, &self.config.name)
    }

    /// Whether this consumer is done with stream message `seq`: delivered and acknowledged
    /// or terminated, or, for `ack_policy: none`, delivered. A message it has not delivered
    /// yet is not done, nor is one it gave up at `max_deliver` (until it is acked late or
    /// leaves the stream): as on nats-server, interest and work-queue streams keep those.
    /// Interest-retention streams remove a message once every consumer whose filter matches
    /// it is done with it. O(log pending).
    pub fn is_acked(&self, seq: u64) -> bool {
        if seq >= self.next_stream_seq {
            return false;
        }
        match &self.acks {
            Acks::None => true,
            Acks::Tracked(p) => p.get(seq).is_none() && !p.is_exhausted(seq),
        }
    }

    /// The numbers `CONSUMER.INFO` reports.
    pub fn info(&self) -> ConsumerState {
        let (num_ack_pending, num_redelivered) = match &self.acks {
            Acks::None => (0, 0),
            Acks::Tracked(p) => (p.len() as u64, p.redelivered()),
        };
        ConsumerState {
            delivered: self.delivered(),
            ack_floor: self.ack_floor(),
            num_ack_pending,
            num_redelivered,
            num_waiting: self.waiting.len() as u64,
            num_pending: self.num_pending,
            last_delivery: self.last_delivery,
            last_ack: self.last_ack,
        }
    }

    /// The earliest instant at which [`Consumer::on_timeout`] has work: an ack deadline, a
    /// pull request expiry or an idle heartbeat. `None` when nothing is scheduled.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let ack = match &self.acks {
            Acks::None => None,
            Acks::Tracked(p) => p.next_deadline(),
        };
        let heartbeat = self.push.as_ref().and_then(|p| p.next_heartbeat);
        ack.into_iter()
            .chain(self.waiting.next_deadline())
            .chain(self.paused_until)
            .chain(self.pin.as_ref().map(|p| p.expires_at))
            .chain(heartbeat)
            .chain(self.pacing.as_ref().and_then(|p| p.not_before))
            .min()
            .map(|t| self.instant(t))
    }

    /// Pauses deliveries until `until` (`pause_until`, as nats-server's `CONSUMER.PAUSE`):
    /// while paused nothing is delivered or redelivered, but pull requests still queue, send
    /// idle heartbeats and expire, ack waits still run out (the message waits in the
    /// redelivery queue, not yet counted as redelivered), and a `no_wait` request gets
    /// `404 No Messages` (one with `expires` that got nothing yet keeps waiting). `None`, or a time not after `now`, resumes: what waits is delivered
    /// at once (nats-server 2.15.1 leaves waiting requests unserved after a resume by API
    /// until something else wakes the consumer; we do not). When the pause runs out by
    /// itself, [`Consumer::poll_timeout`] says so and [`Consumer::on_timeout`] delivers.
    pub fn set_pause(
        &mut self,
        now: Instant,
        until: Option<Instant>,
        stream: &impl StreamView,
        out: &mut Vec<Action>,
    ) {
        self.advance(now, out);
        let t = self.tick(now);
        self.paused_until = until.map(|u| self.tick(u)).filter(|&u| u > t);
        self.serve(now, stream, out);
    }

    /// Whether deliveries are paused at `now` ([`Consumer::set_pause`]).
    pub fn is_paused(&self, now: Instant) -> bool {
        let t = self.tick(now);
        self.paused_until.is_some_and(|u| u > t)
    }

    /// `CONSUMER.RESET` (nats-server 2.14+): starts the consumer over at stream seq `seq`, or
    /// with `seq` 0 just past its ack floor (redelivering everything not acknowledged). What
    /// was pending or queued for redelivery is forgotten, the next delivery has consumer seq 1
    /// and delivery count 1, `delivered` = `ack_floor` = `(0, seq - 1)`, `num_pending` is
    /// recounted; waiting pull requests stay and are served at once. Returns the seq it starts
    /// at (`reset_seq`). A seq past the stream's end is allowed (what lies below it is
    /// skipped).
    ///
    /// # Errors
    /// [`ConsumerError::InvalidReset`], as nats-server's `resetStartingSeq`: a non-zero `seq`
    /// below `by_start_sequence`'s start or `by_start_time`'s first message, or any non-zero
    /// `seq` on a `new`, `last` or `last_per_subject` consumer. The consumer is unchanged.
    pub fn reset(
        &mut self,
        now: Instant,
        seq: u64,
        stream: &impl StreamView,
        out: &mut Vec<Action>,
    ) -> Result<u64, ConsumerError> {
        let seq = match self.config.deliver_policy {
            _ if seq == 0 => self.ack_floor().stream_seq + 1,
            DeliverPolicy::All => seq,
            DeliverPolicy::ByStartSequence(start) if seq < start => {
                return Err(ConsumerError::InvalidReset("below start seq"))
            }
            DeliverPolicy::ByStartSequence(_) => seq,
            DeliverPolicy::ByStartTime(t) => {
                let first = stream
                    .first_seq_at_or_after_time(t)
                    .unwrap_or_else(|| stream.last_seq() + 1);
                if seq < first {
                    return Err(ConsumerError::InvalidReset("below start time"));
                }
                seq
            }
            _ => return Err(ConsumerError::InvalidReset("not allowed")),
        }
        .max(1);
        self.advance(now, out);
        let floor = SequencePair {
            consumer_seq: 0,
            stream_seq: seq - 1,
        };
        self.next_stream_seq = seq;
        self.next_consumer_seq = 1;
        self.skip.clear();
        self.resume = 0;
        self.acks = match self.acks {
            Acks::None => Acks::None,
            Acks::Tracked(_) => Acks::Tracked(PendingSet::new(floor)),
        };
        self.last_delivery = None;
        self.last_ack = None;
        self.num_pending = self.count_pending(stream);
        self.serve(now, stream, out);
        Ok(seq)
    }

    /// Seeds the pin ids of a `pinned_client` consumer. Ids are a function of the seed and how
    /// many were made, so replicas given the same seed agree; a server gives each consumer a
    /// random seed. Unseeded, the seed is 0.
    pub fn set_pin_seed(&mut self, seed: u64) {
        self.pin_ids.reseed(seed);
    }

    /// The current pin of a `pinned_client` consumer: its id and when it was given (for
    /// `priority_groups[].pinned_client_id` / `pinned_ts` in consumer info).
    pub fn pin(&self) -> Option<(&str, Instant)> {
        self.pin.as_ref().map(|p| (&*p.id, self.instant(p.since)))
    }

    /// `CONSUMER.UNPIN` for `group`: the pin is released (the `UNPINNED` advisory with reason
    /// `admin` is reported whether or not anyone held it, as nats-server), and the next
    /// request without an id may take a new one. Returns `false`, changing nothing, when
    /// `group` is not one of the consumer's `priority_groups` (nats-server's 10160).
    pub fn unpin(
        &mut self,
        now: Instant,
        group: &str,
        stream: &impl StreamView,
        out: &mut Vec<Action>,
    ) -> bool {
        if !self.config.priority_groups.iter().any(|g| g == group) {
            return false;
        }
        self.advance(now, out);
        self.pin = None;
        out.push(Action::Advisory(Advisory::Unpinned {
            group: group.to_owned(),
            reason: "admin",
        }));
        self.serve(now, stream, out);
        true
    }

    /// Whether this is a push consumer ([`ConsumerConfig::push`] set).
    pub fn is_push(&self) -> bool {
        self.push.is_some()
    }

    /// A push consumer's deliver subject (`None` for a pull consumer).
    pub fn deliver_subject(&self) -> Option<&Bytes> {
        self.push.as_ref().map(|p| &p.deliver_subject)
    }

    /// Whether a push consumer delivers: its deliver subject has interest, as last told by
    /// [`Consumer::set_delivery_interest`] (nats-server's `push_bound` in consumer info).
    /// False for a pull consumer.
    pub fn push_bound(&self) -> bool {
        self.push.as_ref().is_some_and(|p| p.active)
    }

    /// The reply subject of a push consumer's unanswered flow-control request, if any.
    pub fn flow_control_pending(&self) -> Option<Bytes> {
        self.push.as_ref().and_then(|p| p.stalled_on())
    }

    /// A push consumer's deliver subject gained (`interest`) or lost all interest, as the
    /// caller decides it (nats-server counts subscriptions on exactly the deliver subject, in
    /// the `deliver_group` queue group when one is set). A new push consumer starts without
    /// interest: call this once after creating it. With interest, whatever is deliverable is
    /// delivered at once and idle heartbeats run (the first `idle_heartbeat` from now);
    /// without, nothing is sent, ack waits still run out. Ignored by a pull consumer.
    pub fn set_delivery_interest(
        &mut self,
        now: Instant,
        interest: bool,
        stream: &impl StreamView,
        out: &mut Vec<Action>,
    ) {
        self.advance(now, out);
        let t = self.tick(now);
        let Some(push) = self.push.as_deref_mut() else {
            return;
        };
        if push.active != interest {
            push.set_active(t, interest);
        }
        self.serve(now, stream, out);
    }

    /// A message arrived on `subject` under this consumer's `$JS.FC.<stream>.<consumer>.*`:
    /// an answer to a flow-control request. The answer to the latest request resumes a
    /// stalled delivery and widens the window ([`push`](self) module docs, as nats-server's
    /// `processFlowControl`); anything else is ignored.
    pub fn on_flow_control_reply(
        &mut self,
        now: Instant,
        subject: &[u8],
        stream: &impl StreamView,
        out: &mut Vec<Action>,
    ) {
        self.advance(now, out);
        let answered = self
            .push
            .as_deref_mut()
            .and_then(|p| p.flow.as_mut())
            .is_some_and(|f| f.answered(subject));
        if answered {
            trace!("flow control answered");
            self.serve(now, stream, out);
        }
    }

    /// Fires every deadline at or before `now` (ack waits → redelivery queue or max-deliver
    /// advisory; expired pulls → `408 Request Timeout`; idle heartbeats), then serves waiting
    /// requests. Calling it early or twice does nothing.
    pub fn on_timeout(&mut self, now: Instant, stream: &impl StreamView, out: &mut Vec<Action>) {
        self.advance(now, out);
        self.serve(now, stream, out);
    }

    /// A `CONSUMER.MSG.NEXT` request with raw body `body` arrived with reply subject
    /// `reply_to`: parse it ([`PullRequest::parse`]) and handle it as
    /// [`Consumer::on_pull_request`]; a bad body is answered with `400 Bad Request - …`.
    pub fn on_pull_body(
        &mut self,
        now: Instant,
        reply_to: Bytes,
        body: &[u8],
        stream: &impl StreamView,
        out: &mut Vec<Action>,
    ) {
        if self.push.is_some() {
            // nats-server answers before it reads the body.
            self.advance(now, out);
            if !reply_to.is_empty() {
                out.push(Action::Status {
                    reply_to,
                    status: PullStatus::ConsumerIsPushBased,
                });
            }
            return;
        }
        match self.pull_memo.parse(body) {
            Ok(req) => self.on_pull_request(now, reply_to, req, stream, out),
            Err(e) => {
                self.advance(now, out);
                out.push(Action::Status {
                    reply_to,
                    status: PullStatus::BadRequest(e.to_string()),
                });
            }
        }
    }

    /// A pull request arrived. Admission checks run in nats-server's order (§6.2): request
    /// limits (`409 Exceeded MaxRequestBatch/MaxRequestExpires/MaxRequestMaxBytes`),
    /// unsupported priority options (`400`), `no_wait` outcomes (`404 No Messages`,
    /// `408 Requests Pending`), a full queue (`409 Exceeded MaxWaiting`, or silently dropped
    /// when the request asked for heartbeats). An admitted request joins the tail of the queue
    /// and whatever is deliverable is delivered at once. An empty `reply_to` is ignored.
    pub fn on_pull_request(
        &mut self,
        now: Instant,
        reply_to: Bytes,
        req: PullRequest,
        stream: &impl StreamView,
        out: &mut Vec<Action>,
    ) {
        self.advance(now, out);
        self.admit(now, reply_to, req, stream, out);
        self.serve(now, stream, out);
    }

    /// An ack message arrived on this consumer's ack subject: `ack` from
    /// [`AckSubject::parse`], `kind` from [`AckKind::parse`], `reply` the ack message's own
    /// reply subject.
    ///
    /// Keyed by stream seq (§3). Acks for messages never delivered (stream seq ≥ the next one
    /// to deliver) and acks on an `ack_policy: none` consumer are ignored and not answered;
    /// everything else with a `reply` is answered with an empty message ([`Action::AckReply`]),
    /// even when it changes nothing — except `+NXT`, whose reply receives the deliveries.
    ///
    /// * ack / `+TERM`: removed from pending, ack floor per §4 (`all`: everything up to it),
    ///   [`Action::Acked`]; `+TERM` adds a terminated advisory.
    /// * `-NAK`: queued for redelivery ahead of new messages (or at `max_deliver`: dropped with
    ///   an advisory); with a delay, redelivered once the delay has passed.
    /// * `+WPI`: the ack deadline restarts from `now`.
    /// * `+NXT`: ack, then a pull request (body after `+NXT`) answered on `reply`.
    pub fn on_ack(
        &mut self,
        now: Instant,
        ack: AckTokens,
        kind: AckKind,
        reply: Option<Bytes>,
        stream: &impl StreamView,
        out: &mut Vec<Action>,
    ) {
        self.advance(now, out);
        let delivered = ack.stream_seq != 0 && ack.stream_seq < self.next_stream_seq;
        let tracked = matches!(self.acks, Acks::Tracked(_));
        let mut answer = false;
        match kind {
            AckKind::Next(req) => {
                if delivered && tracked {
                    self.ack_message(now, ack, out);
                }
                if let Some(reply_to) = reply.clone().filter(|r| !r.is_empty()) {
                    match req {
                        Ok(req) => self.admit(now, reply_to, req, stream, out),
                        Err(e) => out.push(Action::Status {
                            reply_to,
                            status: PullStatus::BadRequest(e.to_string()),
                        }),
                    }
                }
            }
            _ if !delivered || !tracked => {}
            AckKind::Ack => {
                answer = true;
                self.ack_message(now, ack, out);
            }
            AckKind::Term { reason } => {
                answer = true;
                self.ack_message(now, ack, out);
                out.push(Action::Advisory(Advisory::Terminated {
                    stream_seq: ack.stream_seq,
                    consumer_seq: ack.consumer_seq,
                    deliveries: ack.delivery_count,
                    reason: reason.unwrap_or_default(),
                }));
            }
            AckKind::Nak { delay } => {
                answer = true;
                self.nak(now, ack, delay, out);
            }
            AckKind::Progress => {
                answer = true;
                let t = self.tick(now);
                let wait_for = |dc| dur_ns(self.config.ack_deadline_after(dc));
                if let Acks::Tracked(p) = &mut self.acks {
                    if let Some(dc) = p.get(ack.stream_seq).map(|e| e.delivery_count) {
                        p.rearm(ack.stream_seq, t.saturating_add(wait_for(dc)));
                    }
                }
            }
            AckKind::Unknown => answer = true,
        }
        if answer {
            if let Some(reply_to) = reply.filter(|r| !r.is_empty()) {
                out.push(Action::AckReply { reply_to });
            }
        }
        self.serve(now, stream, out);
    }

    /// A message was stored in the stream (`seq`, literal `subject`). Counts it in
    /// `num_pending` if the filter matches and serves waiting requests. Call after the store
    /// can return it through `stream`.
    pub fn on_stream_append(
        &mut self,
        now: Instant,
        seq: u64,
        subject: &[u8],
        stream: &impl StreamView,
        out: &mut Vec<Action>,
    ) {
        self.advance(now, out);
        if seq >= self.next_stream_seq && self.filter.matches(subject) {
            self.num_pending += 1;
        }
        self.serve(now, stream, out);
    }

    /// One message left the stream (delete, limits, max age, work-queue/interest removal).
    /// Keeps `num_pending` exact; a pending message is forgotten like a `+TERM`
    /// (nats-server: advisory with reason [`REASON_UNACKED_DELETED`], ack floor may move).
    pub fn on_stream_remove(
        &mut self,
        now: Instant,
        seq: u64,
        subject: &[u8],
        stream: &impl StreamView,
        out: &mut Vec<Action>,
    ) {
        self.advance(now, out);
        if let Ok(i) = self.skip.binary_search(&seq) {
            self.skip.remove(i);
            self.num_pending = self.num_pending.saturating_sub(1);
        } else if seq >= self.new_from() && self.filter.matches(subject) {
            self.num_pending = self.num_pending.saturating_sub(1);
        }
        self.forget_gone(seq, out);
        self.serve(now, stream, out);
    }

    /// Every message this consumer can see below `keep_from` is gone (stream purge, or a
    /// filtered purge whose subject covers this consumer's filter). As nats-server: the read
    /// position jumps to `keep_from` if behind, pending entries below are dropped, the ack
    /// floor moves to `keep_from - 1`; `num_pending` is recounted through `stream`.
    ///
    /// For a whole-stream purge `keep_from` is the stream's new first seq; for a subject purge
    /// it is the first remaining seq on that subject, or `last_seq + 1` if none remains. For
    /// a purge narrower than this consumer's filter, call [`Consumer::resync`] instead.
    pub fn on_stream_purge(
        &mut self,
        now: Instant,
        keep_from: u64,
        stream: &impl StreamView,
        out: &mut Vec<Action>,
    ) {
        self.advance(now, out);
        self.next_stream_seq = self.next_stream_seq.max(keep_from);
        self.skip.retain(|&s| s >= keep_from);
        let delivered = self.delivered();
        if let Acks::Tracked(p) = &mut self.acks {
            p.purge_below(keep_from, delivered);
        }
        self.num_pending = self.count_pending(stream);
        self.serve(now, stream, out);
    }

    /// Re-reads `num_pending` from `stream` and forgets pending messages the stream no longer
    /// holds (as [`Consumer::on_stream_remove`] would). For changes the consumer was not told
    /// about one by one. O(pending + one stream count).
    pub fn resync(&mut self, now: Instant, stream: &impl StreamView, out: &mut Vec<Action>) {
        self.advance(now, out);
        self.num_pending = self.count_pending(stream);
        if let Acks::Tracked(p) = &self.acks {
            let gone: Vec<u64> = p
                .iter()
                .map(|(s, _)| s)
                .filter(|&s| stream.load(s).is_none())
                .collect();
            for seq in gone {
                self.forget_gone(seq, out);
            }
        }
        self.serve(now, stream, out);
    }

    /// The connection behind `reply_to` went away (or unsubscribed it): its waiting requests
    /// are dropped silently. Messages are never sent to it again, so nothing is counted as
    /// delivered to a requester that cannot receive (§6.6).
    pub fn on_request_gone(&mut self, reply_to: &[u8]) {
        let n = self.waiting.remove_reply(reply_to);
        if n > 0 {
            trace!(removed = n, "pull requests dropped: requester gone");
        }
    }

    /// The reply subjects of the waiting pull requests (one per request, in no set order).
    pub fn waiting_replies(&self) -> impl Iterator<Item = &[u8]> + '_ {
        self.waiting.replies()
    }

    /// Drops every waiting request whose reply subject nobody listens on any more (the check
    /// [`StreamView::has_interest`] makes when a request comes up for a message), without
    /// waiting for a message. Returns how many were dropped. Used before deciding that a
    /// consumer is inactive: a request from a worker that went away is no activity.
    pub fn prune_waiting(&mut self, has_interest: impl Fn(&[u8]) -> bool) -> usize {
        let gone: Vec<Bytes> = self
            .waiting
            .replies()
            .filter(|r| !has_interest(r))
            .map(Bytes::copy_from_slice)
            .collect();
        gone.iter().map(|r| self.waiting.remove_reply(r)).sum()
    }

    /// Applies a configuration update (`CONSUMER.CREATE` on an existing consumer). Ack wait and
    /// backoff changes apply to outstanding deliveries (time already waited is kept); a filter
    /// change keeps the position and recounts `num_pending`; a raised `max_ack_pending`
    /// resumes delivery at once. A push consumer's new deliver subject gets every pending
    /// message again (below `max_deliver`), as nats-server redelivers on such a change.
    ///
    /// # Errors
    /// [`ConsumerConfig::check_update`]: immutable fields (`ack policy`, `deliver policy`,
    /// `max waiting`, name) and validation errors. The consumer is unchanged on error.
    pub fn update_config(
        &mut self,
        now: Instant,
        new: ConsumerConfig,
        stream: &impl StreamView,
        out: &mut Vec<Action>,
    ) -> Result<(), ConsumerError> {
        self.config.check_update(&new)?;
        self.advance(now, out);
        let old = std::mem::replace(&mut self.config, new);
        if old.rate_limit != self.config.rate_limit
            || old.replay_original != self.config.replay_original
        {
            let t = self.tick(now);
            self.pacing = Pacing::new(
                self.config.replay_original,
                stream.last_seq(),
                self.config
                    .rate_limit
                    .filter(|_| self.config.push.is_some()),
                t,
            )
            .map(Box::new);
        }
        if !matches!(
            self.config.priority_policy,
            PriorityPolicy::PinnedClient { .. }
        ) {
            self.pin = None;
        }
        if old.ack_wait != self.config.ack_wait || old.backoff != self.config.backoff {
            let new_cfg = &self.config;
            if let Acks::Tracked(p) = &mut self.acks {
                p.reschedule(
                    |dc| dur_ns(old.ack_deadline_after(dc)),
                    |dc| dur_ns(new_cfg.ack_deadline_after(dc)),
                );
            }
        }
        if let (Some(push), Some(cfg)) = (self.push.as_deref_mut(), &self.config.push) {
            if push.deliver_subject != cfg.deliver_subject.as_bytes() {
                // Interest in the new subject is the caller's to tell
                // ([`Consumer::set_delivery_interest`]).
                push.deliver_subject = Bytes::copy_from_slice(cfg.deliver_subject.as_bytes());
                // As nats-server's `forceExpirePending`: what is out is sent again to the new
                // subject, in stream order, except what reached `max_deliver`.
                let max = self.config.max_deliver;
                if let Acks::Tracked(p) = &mut self.acks {
                    let out_now: Vec<u64> = p
                        .iter()
                        .filter(|(_, e)| max.is_none_or(|m| e.delivery_count < m))
                        .map(|(seq, _)| seq)
                        .collect();
                    for seq in out_now {
                        p.enqueue(seq);
                    }
                }
            }
        }
        if old.filter_subjects != self.config.filter_subjects {
            self.filter = SubjectFilter::new(&self.config.filter_subjects);
            // The last-per-subject start was for the old filter: from here on, every match.
            self.skip.clear();
            self.resume = 0;
            self.num_pending = self.count_pending(stream);
        }
        // A lower ack wait may have made deadlines due now.
        self.advance(now, out);
        self.serve(now, stream, out);
        Ok(())
    }

    /// The consumer is being deleted: every waiting request gets `409 Consumer Deleted`.
    pub fn delete(&mut self, out: &mut Vec<Action>) {
        self.end_all(out, |_| PullStatus::ConsumerDeleted);
    }

    /// The server is shutting down: every waiting request gets `409 Server Shutdown` with its
    /// pending headers.
    pub fn shutdown(&mut self, out: &mut Vec<Action>) {
        self.end_all(out, |r| PullStatus::ServerShutdown(r.leftover()));
    }

    /// Checks every internal index and counter against a recount (O(n)); `Err` names the first
    /// disagreement. For tests.
    #[doc(hidden)]
    pub fn check_invariants(&self, stream: &impl StreamView) -> Result<(), String> {
        self.waiting.check()?;
        ensure_eq(self.num_pending, self.count_pending(stream), "num_pending")?;
        let d = self.delivered();
        let f = self.ack_floor();
        if f.consumer_seq > d.consumer_seq || f.stream_seq > d.stream_seq {
            return Err(format!("ack floor {f:?} above delivered {d:?}"));
        }
        if let Acks::Tracked(p) = &self.acks {
            p.check()?;
            for (seq, e) in p.iter() {
                if seq <= f.stream_seq
                    || seq > d.stream_seq
                    || e.first_consumer_seq <= f.consumer_seq
                {
                    return Err(format!(
                        "pending {seq} ({e:?}) outside floor {f:?}..delivered {d:?}"
                    ));
                }
            }
        }
        Ok(())
    }

    // ----- internals -----

    /// Where new deliveries continue besides the last-per-subject start list: after the
    /// list's last entry (nothing matching lay between it and the stream's end when the list
    /// was taken), else `next_stream_seq`.
    fn new_from(&self) -> u64 {
        self.next_stream_seq.max(self.resume)
    }

    /// `num_pending` recounted: the start list's messages still stored plus every match
    /// from [`Consumer::new_from`].
    fn count_pending(&self, stream: &impl StreamView) -> u64 {
        let listed = self
            .skip
            .iter()
            .filter(|&&s| stream.load(s).is_some())
            .count() as u64;
        listed + stream.num_matching(self.new_from(), &self.filter)
    }

    fn tick(&self, now: Instant) -> u64 {
        u64::try_from(now.saturating_duration_since(self.epoch).as_nanos()).unwrap_or(u64::MAX)
    }

    fn instant(&self, tick: u64) -> Instant {
        let d = Duration::from_nanos(tick);
        self.epoch
            .checked_add(d)
            .unwrap_or(self.epoch + Duration::from_secs(u64::from(u32::MAX)))
    }

    fn delivered(&self) -> SequencePair {
        SequencePair {
            consumer_seq: self.next_consumer_seq - 1,
            stream_seq: self.next_stream_seq - 1,
        }
    }

    fn ack_floor(&self) -> SequencePair {
        match &self.acks {
            Acks::None => self.delivered(),
            Acks::Tracked(p) => p.floor,
        }
    }

    fn wait_ns(&self, delivery_count: u32) -> u64 {
        dur_ns(self.config.ack_deadline_after(delivery_count))
    }

    /// Fires everything due at or before `now`, without delivering.
    fn advance(&mut self, now: Instant, out: &mut Vec<Action>) {
        let t = self.tick(now);
        if let Acks::Tracked(p) = &mut self.acks {
            if p.next_deadline().is_some_and(|d| d <= t) {
                for e in p.expire_due(t, self.config.max_deliver) {
                    if let Expired::Exhausted {
                        stream_seq,
                        deliveries,
                    } = e
                    {
                        trace!(stream_seq, deliveries, "max deliver reached");
                        out.push(Action::Advisory(Advisory::MaxDeliver {
                            stream_seq,
                            deliveries,
                        }));
                    }
                }
            }
        }
        if self.pin.as_ref().is_some_and(|p| p.expires_at <= t) {
            let pin = self.pin.take().expect("checked above");
            trace!(pin = %pin.id, "pin timed out");
            out.push(Action::Advisory(Advisory::Unpinned {
                group: pin.group,
                reason: "timeout",
            }));
        }
        if self.waiting.next_deadline().is_some_and(|d| d <= t) {
            for req in self.waiting.take_expired(t) {
                out.push(Action::Status {
                    reply_to: req.reply_to.clone(),
                    status: PullStatus::RequestTimeout(req.leftover()),
                });
            }
            let d = self.delivered();
            for id in self.waiting.take_heartbeats(t) {
                if let Some(req) = self.waiting.get(id) {
                    out.push(Action::Status {
                        reply_to: req.reply_to.clone(),
                        status: PullStatus::IdleHeartbeat {
                            last_consumer_seq: d.consumer_seq,
                            last_stream_seq: d.stream_seq,
                        },
                    });
                }
            }
        }
        if let Some(push) = self.push.as_deref_mut() {
            if push.heartbeat_due(t) {
                let d = SequencePair {
                    consumer_seq: self.next_consumer_seq - 1,
                    stream_seq: self.next_stream_seq - 1,
                };
                out.push(Action::PushStatus {
                    deliver_subject: push.deliver_subject.clone(),
                    status: PushStatus::IdleHeartbeat {
                        last_consumer_seq: d.consumer_seq,
                        last_stream_seq: d.stream_seq,
                        stalled: push.stalled_on(),
                    },
                });
            }
        }
    }

    /// Admission checks (§6.2) and queueing; does not deliver.
    fn admit(
        &mut self,
        now: Instant,
        reply_to: Bytes,
        req: PullRequest,
        stream: &impl StreamView,
        out: &mut Vec<Action>,
    ) {
        if reply_to.is_empty() {
            return;
        }
        let reject = |out: &mut Vec<Action>, status| {
            out.push(Action::Status {
                reply_to: reply_to.clone(),
                status,
            })
        };
        if self.push.is_some() {
            return reject(out, PullStatus::ConsumerIsPushBased);
        }
        if let Some(max) = self.config.max_batch {
            if req.batch > max {
                return reject(out, PullStatus::ExceededMaxRequestBatch(max));
            }
        }
        if let (Some(max), Some(expires)) = (self.config.max_expires, req.expires) {
            if expires > max {
                return reject(out, PullStatus::ExceededMaxRequestExpires(max));
            }
        }
        if let (Some(max), Some(bytes)) = (self.config.max_bytes, req.max_bytes) {
            if bytes > max {
                return reject(out, PullStatus::ExceededMaxRequestMaxBytes(max));
            }
        }
        let policy = self.config.priority_policy;
        if let Some(group) = &req.priority_group {
            let t = self.tick(now);
            let groups = &self.config.priority_groups;
            if let Err(status) =
                priority::check_request(policy, groups, self.pin.as_mut(), group, t)
            {
                return reject(out, status);
            }
        }
        if req.no_wait {
            let queued = match &self.acks {
                Acks::None => 0,
                Acks::Tracked(p) => p.queued_len() as u64,
            };
            let available = self.num_pending + queued;
            if available == 0 && req.expires.is_none() {
                return reject(out, PullStatus::NoMessages);
            }
            if available > 0 && available < self.waiting.total_batch() {
                // Requests whose requester is gone do not count (nats-server's
                // `processWaiting` drops them first); with priority groups, gated ones are
                // never reached at the head, where they would be dropped otherwise.
                self.prune_waiting(|r| stream.has_interest(r));
                if available < self.waiting.total_batch() {
                    return reject(out, PullStatus::RequestsPending);
                }
            }
        }
        if self.waiting.len() >= self.config.max_waiting {
            if req.idle_heartbeat.is_none() {
                reject(out, PullStatus::ExceededMaxWaiting);
            }
            return;
        }
        let t = self.tick(now);
        let expires_at = req.expires.map(|d| t.saturating_add(dur_ns(d)));
        if expires_at == Some(t) {
            // A zero (negative on the wire) expiry: nats-server's deadline is already past.
            let leftover = Leftover {
                messages: req.batch,
                bytes: req.max_bytes.unwrap_or(0),
            };
            return reject(out, PullStatus::RequestTimeout(leftover));
        }
        let heartbeat = req
            .idle_heartbeat
            .map(|d| (dur_ns(d), t.saturating_add(dur_ns(d))));
        let mut queued = Request::new(
            reply_to,
            req.batch,
            req.max_bytes,
            req.no_wait,
            expires_at,
            heartbeat,
        );
        priority::classify(policy, req.priority_group, &mut queued);
        self.waiting.push(queued);
    }

    /// Hands deliverable messages to waiting requests, one at a time, round-robin (§6.3); then
    /// ends `no_wait` requests that can get nothing more (§6.4).
    fn serve(&mut self, now: Instant, stream: &impl StreamView, out: &mut Vec<Action>) {
        let t = self.tick(now);
        if let Some(until) = self.paused_until {
            if t < until {
                self.end_no_wait(out);
                return;
            }
            self.paused_until = None;
            out.push(Action::Resumed);
        }
        if self.push.is_some() {
            return self.serve_push(now, stream, out);
        }
        // The priority policy passed over every waiting request for the message at hand:
        // none of them can get anything now.
        let mut passed_over = false;
        while self.waiting.len() > 0 {
            let Some(candidate) = self.next_candidate(stream, out) else {
                break;
            };
            let Some(chosen) = self.choose_request(candidate, out) else {
                passed_over = true;
                break;
            };
            let id = chosen.id;
            let tokens = self.tokens_for(candidate);
            let meta = match candidate {
                Candidate::Redelivery { meta, .. } | Candidate::New { meta } => meta,
            };
            let cost = (meta.subject_len
                + tokens.v1_len(self.stream_name.len(), self.config.name.len())
                + meta.size) as u64;
            let req = self.waiting.get(id).expect("the head id is a live request");
            if !stream.has_interest(&req.reply_to) {
                self.waiting.remove(id);
                trace!("pull request dropped: nobody listens on its reply subject");
                continue;
            }
            if req.bytes_left.is_some_and(|left| cost > left) {
                let req = self.waiting.remove(id).expect("live request");
                let status = PullStatus::MessageSizeExceedsMaxBytes(req.leftover());
                out.push(Action::Status {
                    reply_to: req.reply_to,
                    status,
                });
                continue;
            }
            if let Some(p) = self.pacing.as_deref_mut() {
                if !p.ready(t, meta.seq, meta.timestamp_unix_ns, cost) {
                    break;
                }
                p.delivered(t, meta.timestamp_unix_ns, cost);
            }
            let reply_to = req.reply_to.clone();
            if chosen.takes_pin {
                self.take_pin(id, t, out);
            }
            out.push(Action::Deliver {
                reply_to: reply_to.clone(),
                ack: tokens,
                pin_id: self.pin.as_ref().map(|p| p.id.clone()),
            });
            self.commit(now, candidate, tokens, &reply_to, out);
            let req = self
                .waiting
                .record_delivery(id, cost, t)
                .expect("live request");
            let batch_done = req.batch_left == 0;
            if batch_done || req.bytes_left == Some(0) {
                let req = self.waiting.remove(id).expect("live request");
                if batch_done && req.bytes_left.is_some_and(|b| b > 0) {
                    let status = PullStatus::BatchCompleted(req.leftover());
                    out.push(Action::Status {
                        reply_to: req.reply_to,
                        status,
                    });
                }
            } else {
                self.waiting.rotate(id);
            }
        }
        if self.waiting.has_no_wait() && (passed_over || self.next_candidate(stream, out).is_none())
        {
            self.end_no_wait(out);
        }
    }

    /// The waiting request `candidate` goes to: the head of the line, or with a priority
    /// policy the first the policy lets take it ([`priority::choose`]).
    fn choose_request(
        &mut self,
        candidate: Candidate,
        out: &mut Vec<Action>,
    ) -> Option<priority::Chosen> {
        let policy = self.config.priority_policy;
        if policy == PriorityPolicy::None {
            return self.waiting.head().map(|id| priority::Chosen {
                id,
                takes_pin: false,
            });
        }
        let backlog = Backlog {
            num_pending: match candidate {
                Candidate::New { .. } => self.num_pending,
                Candidate::Redelivery { .. } => self.num_pending + 1,
            },
            num_ack_pending: match &self.acks {
                Acks::None => 0,
                Acks::Tracked(p) => p.len() as u64,
            },
        };
        let mut ended = Vec::new();
        let chosen = priority::choose(
            policy,
            &mut self.waiting,
            self.pin.as_ref(),
            backlog,
            &mut ended,
        );
        for req in ended {
            out.push(Action::Status {
                status: PullStatus::WrongPinId(req.leftover()),
                reply_to: req.reply_to,
            });
        }
        chosen
    }

    /// Pins request `id`'s client: a new pin id, recorded on the request (so that, once the
    /// pin is gone, it ends with `423` like any request holding a stale id), and the `PINNED`
    /// advisory.
    fn take_pin(&mut self, id: u64, t: u64, out: &mut Vec<Action>) {
        let PriorityPolicy::PinnedClient { ttl } = self.config.priority_policy else {
            return;
        };
        let Some(group) = self
            .waiting
            .get_mut(id)
            .and_then(|r| r.group.as_deref_mut())
        else {
            return;
        };
        let pin_id = self.pin_ids.next();
        group.id = pin_id.to_string();
        let group = group.group.clone();
        out.push(Action::Advisory(Advisory::Pinned {
            group: group.clone(),
            pin_id: pin_id.to_string(),
        }));
        self.pin = Some(Pin {
            id: pin_id,
            group,
            since: t,
            expires_at: t.saturating_add(dur_ns(ttl)),
        });
    }

    /// Push delivery: everything deliverable goes to the deliver subject while it has interest
    /// and flow control does not stall it (redeliveries first, new messages below
    /// `max_ack_pending`); each delivery restarts the idle heartbeat and may send a
    /// flow-control request right after it, as nats-server's `deliverMsg`.
    fn serve_push(&mut self, now: Instant, stream: &impl StreamView, out: &mut Vec<Action>) {
        let t = self.tick(now);
        while self.push.as_ref().is_some_and(|p| p.can_deliver()) {
            let Some(candidate) = self.next_candidate(stream, out) else {
                break;
            };
            let tokens = self.tokens_for(candidate);
            let meta = match candidate {
                Candidate::Redelivery { meta, .. } | Candidate::New { meta } => meta,
            };
            let ack_len = tokens.v1_len(self.stream_name.len(), self.config.name.len());
            let push = self.push.as_deref().expect("checked by the loop");
            let deliver_subject = push.deliver_subject.clone();
            // nats-server counts a delivery's size as deliver subject + ack subject + headers
            // + payload for flow control.
            let size = (deliver_subject.len() + ack_len + meta.size) as u64;
            if let Some(p) = self.pacing.as_deref_mut() {
                if !p.ready(t, meta.seq, meta.timestamp_unix_ns, size) {
                    break;
                }
                p.delivered(t, meta.timestamp_unix_ns, size);
            }
            out.push(Action::Deliver {
                reply_to: deliver_subject.clone(),
                ack: tokens,
                pin_id: None,
            });
            self.commit(now, candidate, tokens, &deliver_subject, out);
            let push = self.push.as_deref_mut().expect("checked by the loop");
            if let Some(reply) = push.delivered(t, size) {
                out.push(Action::PushStatus {
                    deliver_subject,
                    status: PushStatus::FlowControlRequest { reply },
                });
            }
        }
    }

    /// Ends `no_wait` requests with `404 No Messages` when nothing (more) can be delivered to
    /// them, or the consumer is paused (as from nats-server 2.15.1, observed): at once, unless
    /// one with `expires` got nothing yet, which keeps waiting (§6.4).
    fn end_no_wait(&mut self, out: &mut Vec<Action>) {
        if !self.waiting.has_no_wait() {
            return;
        }
        for id in self.waiting.no_wait_ids() {
            let req = self.waiting.get(id).expect("no_wait ids are live requests");
            if req.expires_at.is_none() || req.delivered > 0 {
                let req = self.waiting.remove(id).expect("live request");
                out.push(Action::Status {
                    reply_to: req.reply_to,
                    status: PullStatus::NoMessages,
                });
            }
        }
    }

    /// The next message to deliver: the redelivery queue first, then (below the
    /// `max_ack_pending` cap) the next matching stream message.
    fn next_candidate(
        &mut self,
        stream: &impl StreamView,
        out: &mut Vec<Action>,
    ) -> Option<Candidate> {
        while let Some((seq, delivery_count)) = self.first_queued() {
            // `max_deliver` lowered while the message waited in the queue: given up now
            // instead of delivered past it, as nats-server's getNextMsg checks at redelivery.
            if self.config.max_deliver.is_some_and(|m| delivery_count >= m) {
                if let Acks::Tracked(p) = &mut self.acks {
                    if let Some(Expired::Exhausted {
                        stream_seq,
                        deliveries,
                    }) = p.exhaust(seq)
                    {
                        out.push(Action::Advisory(Advisory::MaxDeliver {
                            stream_seq,
                            deliveries,
                        }));
                    }
                }
                continue;
            }
            match stream.load(seq) {
                Some(meta) => {
                    return Some(Candidate::Redelivery {
                        meta,
                        delivery_count,
                    })
                }
                // Left the stream without us being told: forget it as a deleted message.
                None => self.forget_gone(seq, out),
            }
        }
        if let (Acks::Tracked(p), Some(max)) = (&self.acks, self.config.max_ack_pending) {
            if p.len() as u64 >= max {
                return None;
            }
        }
        if let Some(meta) = self.skip.iter().find_map(|&seq| stream.load(seq)) {
            return Some(Candidate::New { meta });
        }
        stream
            .next_matching(self.new_from(), &self.filter)
            .map(|meta| Candidate::New { meta })
    }

    /// Head of the redelivery queue with its current delivery count.
    fn first_queued(&self) -> Option<(u64, u32)> {
        let Acks::Tracked(p) = &self.acks else {
            return None;
        };
        let seq = p.first_queued()?;
        Some((seq, p.get(seq).map_or(1, |e| e.delivery_count)))
    }

    /// The ack subject tokens the candidate will be delivered with.
    fn tokens_for(&self, candidate: Candidate) -> AckTokens {
        match candidate {
            Candidate::Redelivery {
                meta,
                delivery_count,
            } => AckTokens {
                delivery_count: u64::from(delivery_count) + 1,
                stream_seq: meta.seq,
                consumer_seq: self.next_consumer_seq,
                timestamp_unix_ns: meta.timestamp_unix_ns,
                num_pending: self.num_pending,
            },
            Candidate::New { meta } => AckTokens {
                delivery_count: 1,
                stream_seq: meta.seq,
                consumer_seq: self.next_consumer_seq,
                timestamp_unix_ns: meta.timestamp_unix_ns,
                num_pending: self.num_pending.saturating_sub(1),
            },
        }
    }

    /// Books a delivery made with `tokens`.
    fn commit(
        &mut self,
        now: Instant,
        candidate: Candidate,
        tokens: AckTokens,
        to: &Bytes,
        out: &mut Vec<Action>,
    ) {
        let t = self.tick(now);
        let consumer_seq = self.next_consumer_seq;
        self.next_consumer_seq += 1;
        self.last_delivery = Some(now);
        let wait1 = self.wait_ns(1);
        let config = &self.config;
        match (candidate, &mut self.acks) {
            (Candidate::New { meta }, acks) => {
                self.next_stream_seq = meta.seq + 1;
                while self.skip.front().is_some_and(|&s| s <= meta.seq) {
                    self.skip.pop_front();
                }
                self.num_pending = self.num_pending.saturating_sub(1);
                match acks {
                    Acks::None => out.push(Action::Acked {
                        stream_seqs: meta.seq..=meta.seq,
                    }),
                    Acks::Tracked(p) => {
                        p.insert_new(meta.seq, consumer_seq, t.saturating_add(wait1), to.clone())
                    }
                }
            }
            (Candidate::Redelivery { meta, .. }, Acks::Tracked(p)) => {
                let count = p.redeliver(
                    meta.seq,
                    |dc| t.saturating_add(dur_ns(config.ack_deadline_after(dc))),
                    to.clone(),
                );
                debug_assert_eq!(count.map(u64::from), Some(tokens.delivery_count));
            }
            (Candidate::Redelivery { .. }, Acks::None) => {
                unreachable!("no redeliveries without ack tracking")
            }
        }
        trace!(
            stream_seq = tokens.stream_seq,
            consumer_seq,
            delivery_count = tokens.delivery_count,
            "deliver"
        );
    }

    /// `+ACK` (and the ack part of `+TERM`/`+NXT`) under the consumer's policy.
    fn ack_message(&mut self, now: Instant, ack: AckTokens, out: &mut Vec<Action>) {
        let delivered = self.delivered();
        let policy = self.config.ack_policy;
        let Acks::Tracked(p) = &mut self.acks else {
            return;
        };
        let seq = ack.stream_seq;
        let acked = match policy {
            AckPolicy::All => p.ack_all(seq, ack.consumer_seq, delivered),
            _ => (p.ack_one(seq, delivered).is_some() || p.remove_exhausted(seq))
                .then_some(seq..=seq),
        };
        if let Some(stream_seqs) = acked {
            self.last_ack = Some(now);
            out.push(Action::Acked { stream_seqs });
        }
    }

    /// `-NAK` (§3): queue for redelivery at once, or re-arm `delay` from now. Ignored for
    /// consumer seqs outside (floor, delivered] or messages not pending.
    fn nak(
        &mut self,
        now: Instant,
        ack: AckTokens,
        delay: Option<Duration>,
        out: &mut Vec<Action>,
    ) {
        let t = self.tick(now);
        let next_consumer_seq = self.next_consumer_seq;
        let max_deliver = self.config.max_deliver;
        let Acks::Tracked(p) = &mut self.acks else {
            return;
        };
        if ack.consumer_seq <= p.floor.consumer_seq || ack.consumer_seq >= next_consumer_seq {
            return;
        }
        let Some(entry) = p.get(ack.stream_seq).cloned() else {
            return;
        };
        out.push(Action::Advisory(Advisory::Nak {
            stream_seq: ack.stream_seq,
            consumer_seq: ack.consumer_seq,
            deliveries: ack.delivery_count,
        }));
        match delay {
            Some(d) => {
                p.rearm(ack.stream_seq, t.saturating_add(dur_ns(d)));
            }
            None if max_deliver.is_some_and(|m| entry.delivery_count >= m) => {
                if let Some(Expired::Exhausted {
                    stream_seq,
                    deliveries,
                }) = p.exhaust(ack.stream_seq)
                {
                    out.push(Action::Advisory(Advisory::MaxDeliver {
                        stream_seq,
                        deliveries,
                    }));
                }
            }
            None => {
                p.enqueue(ack.stream_seq);
            }
        }
    }

    /// A message left the stream: drop it from pending (advisory, floor) and from the
    /// exhausted set.
    fn forget_gone(&mut self, seq: u64, out: &mut Vec<Action>) {
        let delivered = self.delivered();
        let Acks::Tracked(p) = &mut self.acks else {
            return;
        };
        if let Some(e) = p.ack_one(seq, delivered) {
            out.push(Action::Advisory(Advisory::Terminated {
                stream_seq: seq,
                consumer_seq: e.first_consumer_seq,
                deliveries: u64::from(e.delivery_count),
                reason: REASON_UNACKED_DELETED.to_owned(),
            }));
        }
        p.remove_exhausted(seq);
    }

    fn end_all(&mut self, out: &mut Vec<Action>, status: impl Fn(&Request) -> PullStatus) {
        for id in self.waiting.ids() {
            if let Some(req) = self.waiting.remove(id) {
                let status = status(&req);
                out.push(Action::Status {
                    reply_to: req.reply_to,
                    status,
                });
            }
        }
    }
}

fn dur_ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

pub(crate) fn ensure_eq<T: PartialEq + std::fmt::Debug>(
    a: T,
    b: T,
    what: &str,
) -> Result<(), String> {
    if a == b {
        Ok(())
    } else {
        Err(format!("{what}: {a:?} != {b:?}"))
    }
}
