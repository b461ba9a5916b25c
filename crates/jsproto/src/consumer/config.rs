//! [`ConsumerConfig`]: the settings of one consumer (pull, or push with [`PushConfig`]), as
//! plain Rust values.
//!
//! This is not the JSON API shape (that lives in `jsproto::api`); the server converts the JSON
//! (`ack_wait` in nanoseconds, `0` meaning "default", `-1` meaning "unlimited") into these types.
//! Defaults follow nats-server 2.15.1 for a pull consumer with explicit acks
//! (`jetstream-api.md` §5.2).

use std::time::Duration;

use thiserror::Error;

use crate::subject;

/// Default `ack_wait` for explicit/all consumers: 30 s (as nats-server).
pub const DEFAULT_ACK_WAIT: Duration = Duration::from_secs(30);
/// Default `max_waiting` (size of the pull request queue): 512 (as nats-server).
pub const DEFAULT_MAX_WAITING: usize = 512;
/// Default `max_ack_pending` for explicit/all consumers: 1000 (as nats-server).
pub const DEFAULT_MAX_ACK_PENDING: u64 = 1000;

/// How deliveries are acknowledged (`ack_policy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum AckPolicy {
    /// `none`: a delivery counts as acknowledged at once. Nothing is pending, nothing is ever
    /// redelivered, the ack floor is the last delivery. Note: nats-server uses this when the
    /// field is *absent* from the JSON config; the server's JSON conversion must do the same.
    None,
    /// `all`: acknowledging stream seq N acknowledges every pending delivery ≤ N.
    All,
    /// `explicit` (what every client sends): every delivery is acknowledged on its own.
    #[default]
    Explicit,
}

/// Where a new consumer starts reading (`deliver_policy` with its `opt_start_*` option).
///
/// The consumer itself only needs the first stream sequence to consider; see
/// [`DeliverPolicy::start_seq`] for the resolution nats-server applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum DeliverPolicy {
    /// `all`: from the first message in the stream.
    #[default]
    All,
    /// `last`: the last message matching the filter, then new ones.
    Last,
    /// `new`: only messages stored after the consumer was created.
    New,
    /// `by_start_sequence` with `opt_start_seq`.
    ByStartSequence(u64),
    /// `by_start_time` with `opt_start_time`, as Unix nanoseconds: the first message stored
    /// at or after that time.
    ByStartTime(u64),
    /// `last_per_subject`: the last message of every matching subject, then new ones.
    /// **Not supported yet** by [`Consumer`](super::Consumer): [`DeliverPolicy::start_seq`]
    /// resolves it like [`DeliverPolicy::All`] with a warning in its docs.
    LastPerSubject,
}

/// How a pull consumer with priority groups chooses among waiting pull requests
/// (`priority_policy`, ADR-42, as nats-server 2.11+).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum PriorityPolicy {
    /// `none`: every request is served in arrival order; the group fields of a request are
    /// refused where nats-server refuses them (`400 Bad Request - Not a …`).
    #[default]
    None,
    /// `overflow`: a request with `min_pending` / `min_ack_pending` is served only while the
    /// consumer's `num_pending` / `num_ack_pending` is at least that (either one met is
    /// enough); a request without them is served as usual. A standby worker that stays idle
    /// until a backlog builds up.
    Overflow,
    /// `pinned_client`: one request's client is pinned (a pin id in the `Nats-Pin-Id` header of
    /// what it gets); only requests carrying that `id` are served until the pin is released,
    /// by `CONSUMER.UNPIN` or when no request with the id arrived for `ttl`
    /// (`priority_timeout`, default 2 min).
    PinnedClient {
        /// `priority_timeout`: how long a pin lasts without a request carrying its id.
        ttl: Duration,
    },
    /// `prioritized`: requests are served lowest `priority` (0–9) first, in arrival order
    /// within one priority; a request without one comes after all that have one.
    Prioritized,
}

/// The settings of one consumer: a pull consumer, or a push consumer when `push` is set.
///
/// Build it with struct-update syntax from [`ConsumerConfig::default`] (explicit acks,
/// 30 s ack wait, 1000 max ack pending, 512 max waiting, no filter, unlimited deliveries) and
/// check it with [`ConsumerConfig::validate`] (done by `Consumer::new` and `update_config`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerConfig {
    /// Consumer name (durable name or generated name); used in the ack subject
    /// `$JS.ACK.<stream>.<name>.…`.
    pub name: String,
    /// How deliveries are acknowledged. Fixed for the consumer's lifetime.
    pub ack_policy: AckPolicy,
    /// Where the consumer starts. Fixed for the consumer's lifetime. Only used to reject an
    /// update that changes it; the start sequence itself is passed to `Consumer::new`.
    pub deliver_policy: DeliverPolicy,
    /// Time a delivery may stay unacknowledged before it is queued for redelivery. Default
    /// 30 s. Ignored for [`AckPolicy::None`]. When `backoff` is set, its first value is used
    /// instead (as nats-server forces `ack_wait = backoff[0]`).
    pub ack_wait: Duration,
    /// Maximum deliveries of one message (first delivery included); `None` = unlimited
    /// (JSON `-1`, the default). When reached, the message is dropped from pending and a
    /// max-deliveries advisory is emitted once.
    pub max_deliver: Option<u32>,
    /// Redelivery schedule: the ack deadline after delivery `k` is `backoff[min(k-1, len-1)]`.
    /// Empty = use `ack_wait` every time. Must not be longer than `max_deliver` (10116).
    pub backoff: Vec<Duration>,
    /// Subjects this consumer sees (`filter_subject` or `filter_subjects`); empty = every
    /// message of the stream. Must be valid, non-overlapping subjects (10138).
    pub filter_subjects: Vec<String>,
    /// Maximum number of waiting pull requests. Default 512. Fixed for the consumer's lifetime
    /// (as nats-server: "max waiting can not be updated").
    pub max_waiting: usize,
    /// Maximum unacknowledged deliveries across the whole consumer; `None` = unlimited (JSON
    /// `-1`). Default 1000. New deliveries stall at the cap; redeliveries still go out.
    /// Ignored for [`AckPolicy::None`].
    pub max_ack_pending: Option<u64>,
    /// Largest `batch` a pull request may ask for (`max_batch`); `None` = unlimited.
    pub max_batch: Option<u64>,
    /// Longest `expires` a pull request may ask for (`max_expires`); `None` = unlimited.
    pub max_expires: Option<Duration>,
    /// Largest `max_bytes` a pull request may ask for (`max_bytes`); `None` = unlimited.
    pub max_bytes: Option<u64>,
    /// `priority_policy` (with `priority_timeout` for `pinned_client`). May change on update.
    pub priority_policy: PriorityPolicy,
    /// `priority_groups`: the group names a pull request must name when the policy is not
    /// `none` (nats-server allows one). May change on update.
    pub priority_groups: Vec<String>,
    /// Push delivery (`deliver_subject` set): `None` for a pull consumer (the default). Whether
    /// a consumer is push or pull is fixed for its lifetime.
    pub push: Option<PushConfig>,
    /// `replay_policy: original`: while catching up with what was stored when the consumer
    /// started, deliveries are spaced as the messages were stored (see `pacing.rs`).
    pub replay_original: bool,
    /// `rate_limit_bps` (push consumers): `None` = unlimited.
    pub rate_limit: Option<RateLimit>,
}

/// A push consumer's delivery rate limit (nats-server's `rate_limit_bps`, a token bucket).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    /// `rate_limit_bps / 8`.
    pub bytes_per_sec: u64,
    /// Bucket size in bytes: the stream's `max_msg_size`, else the server's `max_payload`.
    pub burst: u64,
}

/// The settings of a push consumer (nats-server's `deliver_subject`, `idle_heartbeat`,
/// `flow_control`): the consumer delivers by itself to `deliver_subject` while that subject
/// has interest, instead of answering pull requests.
///
/// `deliver_group` and `headers_only` are the server's business (which subscriptions count as
/// interest; how a delivery is written) and are not here.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PushConfig {
    /// Where deliveries, heartbeats and flow-control requests go (a literal subject). May
    /// change with an update.
    pub deliver_subject: String,
    /// Send `100 Idle Heartbeat` to the deliver subject after this long without a delivery
    /// (nats-server's `idle_heartbeat`); `None` = never. Fixed for the consumer's lifetime.
    pub idle_heartbeat: Option<Duration>,
    /// Flow control (nats-server's `flow_control`): `100 FlowControl Request`s ask the
    /// subscriber to confirm what it received, and delivery stalls while too much is
    /// unconfirmed ([`super::FLOW_CONTROL_MAX_PENDING`]). Fixed for the consumer's lifetime.
    pub flow_control: bool,
}

impl Default for ConsumerConfig {
    fn default() -> Self {
        Self {
            name: String::new(),
            ack_policy: AckPolicy::Explicit,
            deliver_policy: DeliverPolicy::All,
            ack_wait: DEFAULT_ACK_WAIT,
            max_deliver: None,
            backoff: Vec::new(),
            filter_subjects: Vec::new(),
            max_waiting: DEFAULT_MAX_WAITING,
            max_ack_pending: Some(DEFAULT_MAX_ACK_PENDING),
            max_batch: None,
            max_expires: None,
            max_bytes: None,
            priority_policy: PriorityPolicy::None,
            priority_groups: Vec::new(),
            push: None,
            replay_original: false,
            rate_limit: None,
        }
    }
}

impl ConsumerConfig {
    /// Checks the rules nats-server applies on create/update that concern the consumer core.
    ///
    /// # Errors
    /// [`ConsumerError::BackoffExceedsMaxDeliver`], [`ConsumerError::InvalidFilter`],
    /// [`ConsumerError::OverlappingFilters`], [`ConsumerError::ZeroValue`].
    pub fn validate(&self) -> Result<(), ConsumerError> {
        if let Some(max) = self.max_deliver {
            if max == 0 {
                return Err(ConsumerError::ZeroValue {
                    field: "max_deliver",
                });
            }
            if self.backoff.len() > max as usize {
                return Err(ConsumerError::BackoffExceedsMaxDeliver);
            }
        }
        if self.ack_wait.is_zero() {
            return Err(ConsumerError::ZeroValue { field: "ack_wait" });
        }
        if self
            .push
            .as_ref()
            .is_some_and(|p| p.idle_heartbeat.is_some_and(|d| d.is_zero()))
        {
            return Err(ConsumerError::ZeroValue {
                field: "idle_heartbeat",
            });
        }
        if self.backoff.iter().any(Duration::is_zero) {
            return Err(ConsumerError::ZeroValue { field: "backoff" });
        }
        if self.max_waiting == 0 {
            return Err(ConsumerError::ZeroValue {
                field: "max_waiting",
            });
        }
        if self.priority_policy
            == (PriorityPolicy::PinnedClient {
                ttl: Duration::ZERO,
            })
        {
            return Err(ConsumerError::ZeroValue {
                field: "priority_timeout",
            });
        }
        if self.max_ack_pending == Some(0) {
            return Err(ConsumerError::ZeroValue {
                field: "max_ack_pending",
            });
        }
        for (i, f) in self.filter_subjects.iter().enumerate() {
            if !subject::is_valid_subject(f.as_bytes()) {
                return Err(ConsumerError::InvalidFilter(f.clone()));
            }
            for g in &self.filter_subjects[..i] {
                // As nats-server: filters overlap when one is a subset of the other;
                // filters that only intersect (`a.x.>` and `a.*.y`) are allowed.
                if subject::is_subset(f.as_bytes(), g.as_bytes())
                    || subject::is_subset(g.as_bytes(), f.as_bytes())
                {
                    return Err(ConsumerError::OverlappingFilters(g.clone(), f.clone()));
                }
            }
        }
        Ok(())
    }

    /// Checks that `new` only changes what nats-server lets an update change.
    ///
    /// # Errors
    /// [`ConsumerError::CannotUpdate`] naming the field, with nats-server's wording
    /// (`"ack policy can not be updated"`, …); or any [`ConsumerConfig::validate`] error.
    pub fn check_update(&self, new: &ConsumerConfig) -> Result<(), ConsumerError> {
        new.validate()?;
        if self.ack_policy != new.ack_policy {
            return Err(ConsumerError::CannotUpdate {
                field: "ack policy",
            });
        }
        if self.deliver_policy != new.deliver_policy {
            let field = match (self.deliver_policy, new.deliver_policy) {
                (DeliverPolicy::ByStartSequence(_), DeliverPolicy::ByStartSequence(_)) => {
                    "start sequence"
                }
                (DeliverPolicy::ByStartTime(_), DeliverPolicy::ByStartTime(_)) => "start time",
                _ => "deliver policy",
            };
            return Err(ConsumerError::CannotUpdate { field });
        }
        if self.max_waiting != new.max_waiting {
            return Err(ConsumerError::CannotUpdate {
                field: "max waiting",
            });
        }
        if self.name != new.name {
            return Err(ConsumerError::CannotUpdate { field: "name" });
        }
        match (&self.push, &new.push) {
            (None, Some(_)) => {
                return Err(ConsumerError::CannotSwitchMode(
                    "pull consumer to push based",
                ))
            }
            (Some(_), None) => {
                return Err(ConsumerError::CannotSwitchMode(
                    "push consumer to pull based",
                ))
            }
            (Some(old), Some(new)) if old.idle_heartbeat != new.idle_heartbeat => {
                return Err(ConsumerError::CannotUpdate {
                    field: "heart beats",
                })
            }
            (Some(old), Some(new)) if old.flow_control != new.flow_control => {
                return Err(ConsumerError::CannotUpdate {
                    field: "flow control",
                })
            }
            _ => {}
        }
        Ok(())
    }

    /// The ack deadline after the `delivery_count`-th delivery: `backoff[min(k-1, len-1)]`, or
    /// `ack_wait` without backoff (nats-server, `consumer-semantics.md` §5).
    pub fn ack_deadline_after(&self, delivery_count: u32) -> Duration {
        if self.backoff.is_empty() {
            return self.ack_wait;
        }
        let i = (delivery_count.max(1) as usize - 1).min(self.backoff.len() - 1);
        self.backoff[i]
    }

    /// The ack wait nats-server reports and uses for NAK-delay arithmetic: `backoff[0]` when a
    /// backoff is set, else `ack_wait`.
    pub fn effective_ack_wait(&self) -> Duration {
        self.backoff.first().copied().unwrap_or(self.ack_wait)
    }
}

impl DeliverPolicy {
    /// Resolves the policy to the first stream sequence the consumer considers, as nats-server
    /// does on create (`consumer-semantics.md` §9). The consumer reports
    /// `delivered = ack_floor = (0, start - 1)` until its first delivery.
    ///
    /// * `All` → the stream's first sequence; `New` → last sequence + 1;
    /// * `Last` → the last message matching `filter` (or last + 1 if none matches);
    /// * `ByStartSequence(n)` → `n` (at least 1); `ByStartTime(t)` → the first message stored at
    ///   or after `t` (or last + 1);
    /// * `LastPerSubject` → the first of the last messages of each matching subject (or, if
    ///   none matches, the stream's last sequence, as nats-server; with one message per
    ///   subject, the first sequence, as `All`); the consumer must also
    ///   know the rest of them: create it with [`super::Consumer::with_deliver_policy`].
    pub fn start_seq(&self, stream: &impl super::StreamView, filter: &SubjectFilter) -> u64 {
        let last = stream.last_seq();
        match *self {
            DeliverPolicy::All => stream.first_seq().max(1),
            DeliverPolicy::LastPerSubject if stream.one_msg_per_subject() => {
                stream.first_seq().max(1)
            }
            DeliverPolicy::LastPerSubject => stream
                .last_per_subject(filter)
                .first()
                .copied()
                .unwrap_or_else(|| Self::no_last_per_subject_start(stream)),
            DeliverPolicy::New => last + 1,
            DeliverPolicy::Last => stream.last_matching(filter).unwrap_or(last + 1),
            DeliverPolicy::ByStartSequence(n) => n.max(1),
            DeliverPolicy::ByStartTime(t) => {
                stream.first_seq_at_or_after_time(t).unwrap_or(last + 1)
            }
        }
    }

    /// `last_per_subject` when no stored message matches: nats-server starts at the stream's
    /// last sequence (at its first, `last + 1`, when it holds nothing).
    pub(crate) fn no_last_per_subject_start(stream: &impl super::StreamView) -> u64 {
        stream.last_seq().max(stream.first_seq()).max(1)
    }
}

/// The subjects a consumer sees: a set of filters, empty = everything.
///
/// Matching uses [`subject::matches`], so filters may contain `*` and `>`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SubjectFilter {
    filters: Vec<String>,
}

impl SubjectFilter {
    /// A filter from a list of subjects; an empty list (or a single `>`) matches everything.
    pub fn new(filters: &[String]) -> Self {
        let filters = if filters.iter().any(|f| f == ">") {
            Vec::new()
        } else {
            filters.to_vec()
        };
        Self { filters }
    }

    /// Whether every subject matches.
    pub fn is_all(&self) -> bool {
        self.filters.is_empty()
    }

    /// The filter subjects (empty when everything matches).
    pub fn subjects(&self) -> &[String] {
        &self.filters
    }

    /// Whether a stored message's literal `subject` is seen by the consumer.
    pub fn matches(&self, subject: &[u8]) -> bool {
        self.filters.is_empty()
            || self
                .filters
                .iter()
                .any(|f| subject::matches(f.as_bytes(), subject))
    }
}

/// Why a consumer could not be created, updated or restored. Each maps to a JetStream API
/// error the server reports (code noted per variant).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum ConsumerError {
    /// `backoff` has more entries than `max_deliver` (API error 10116).
    #[error("max deliver is required to be > length of backoff values")]
    BackoffExceedsMaxDeliver,
    /// A filter subject is not a valid subject (API error 10052 family).
    #[error("consumer filter subject is not a valid subject: {0:?}")]
    InvalidFilter(String),
    /// One filter subject is a subset of another (API error 10138).
    #[error("consumer subject filters cannot overlap ({0:?} and {1:?})")]
    OverlappingFilters(String, String),
    /// A duration or count that must be positive is zero. The JSON layer maps JSON `0` to the
    /// default before building the config, so this means a caller bug or a bad snapshot.
    #[error("{field} must be greater than zero")]
    ZeroValue {
        /// Config field name.
        field: &'static str,
    },
    /// An update tried to change an immutable setting (API error 10012, code 500, with this
    /// exact text, e.g. `ack policy can not be updated`).
    #[error("{field} can not be updated")]
    CannotUpdate {
        /// The setting, in nats-server's words (`ack policy`, `deliver policy`, `max waiting`,
        /// `start sequence`, …).
        field: &'static str,
    },
    /// An update tried to turn a pull consumer into a push one or back (API error 10012, with
    /// nats-server's text `can not update pull consumer to push based` and the reverse).
    #[error("can not update {0}")]
    CannotSwitchMode(&'static str),
    /// A persisted state is inconsistent (ack floor above delivered, pending outside the
    /// floor..delivered window, pending entries on an `ack_policy: none` consumer).
    #[error("invalid persisted consumer state: {0}")]
    InvalidState(&'static str),
    /// A reset ([`super::Consumer::reset`]) to a sequence the deliver policy does not allow
    /// (API error 10204 `invalid reset: <this text>`): below `opt_start_seq` (`below start
    /// seq`), below the first message at `opt_start_time` (`below start time`), or any given
    /// sequence on a `new`/`last`/`last_per_subject` consumer (`not allowed`).
    #[error("{0}")]
    InvalidReset(&'static str),
}
