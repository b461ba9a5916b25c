//! [`ConsumerConfig`]: a consumer's configuration as the server stores and echoes it, its
//! enums (`deliver_policy`, `ack_policy`, `replay_policy`, `priority_policy`), its times with
//! their zone ([`ZonedTimestamp`]), the server's defaults, and its mapping onto the pull
//! state machine's config ([`ConsumerConfig::to_core`]).

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::is_default;
use crate::api::{can_not_unmarshal, nanos, null_as_default, Timestamp};
use crate::consumer as core;

/// Default `ack_wait` for `explicit`/`all` consumers: 30 s (`JsAckWaitDefault`).
pub const DEFAULT_ACK_WAIT: Duration = Duration::from_secs(30);
/// `inactive_threshold` given to ephemeral consumers that set none: 5 s
/// (`JsDeleteWaitTimeDefault`; the server deletes them 5.1–6 s after the last activity).
pub const DEFAULT_INACTIVE_THRESHOLD: Duration = Duration::from_secs(5);
/// Default `max_waiting` of pull consumers: 512 (`JSWaitQueueDefaultMax`).
pub const DEFAULT_MAX_WAITING: i64 = 512;
/// Default `max_ack_pending` for consumers that ack: 1000 (`JsDefaultMaxAckPending`).
pub const DEFAULT_MAX_ACK_PENDING: i64 = 1000;
/// The rate-limit bucket [`ConsumerConfig::to_core`] assumes: nats-server's default
/// `max_payload`, 1 MiB (the server replaces it with the stream's `max_msg_size` when set).
pub const DEFAULT_RATE_LIMIT_BURST: u64 = 1024 * 1024;
/// Default `priority_timeout` of `pinned_client` consumers: 2 min (`JsDefaultPinnedTTL`).
pub const DEFAULT_PRIORITY_TIMEOUT: Duration = Duration::from_secs(120);
/// The `idle_heartbeat` an `ack_policy: flow_control` consumer must have: 1 s (`sourceHealthHB`).
pub const FLOW_CONTROL_HEARTBEAT: Duration = Duration::from_secs(1);

/// Metadata key the server stores: the API level the consumer's features need (`"0"`, `"1"`, …).
pub const META_REQUIRED_LEVEL: &str = crate::api::stream::META_REQUIRED_LEVEL;
/// Metadata key added to responses only: the server's API level (`"5"`).
pub const META_SERVER_LEVEL: &str = crate::api::stream::META_SERVER_LEVEL;
/// Metadata key added to responses only: the server's version (`"2.15.1"`).
pub const META_SERVER_VERSION: &str = crate::api::stream::META_SERVER_VERSION;

// ---------------------------------------------------------------------------------------------
// Enums
// ---------------------------------------------------------------------------------------------

api_enum! {
    /// `deliver_policy`: where a new consumer starts. Always written; default `all`
    /// (`"undefined"` also reads as `all`). The start options go with it: `by_start_sequence`
    /// needs `opt_start_seq`, `by_start_time` needs `opt_start_time`, `last_per_subject` needs a
    /// filter; any other combination is 10094. Cannot change on update.
    DeliverPolicy {
        /// `"all"`: from the first message.
        #[default] All = "all",
        /// `"last"`: the last matching message, then new ones.
        Last = "last",
        /// `"new"`: only messages stored after creation.
        New = "new",
        /// `"by_start_sequence"`: from `opt_start_seq`.
        ByStartSequence = "by_start_sequence",
        /// `"by_start_time"`: from the first message stored at or after `opt_start_time`.
        ByStartTime = "by_start_time",
        /// `"last_per_subject"`: the last message of each matching subject, then new ones.
        LastPerSubject = "last_per_subject",
    } ignore_case false, also "undefined" => All, error can_not_unmarshal
}

api_enum! {
    /// `ack_policy`. Always written. **`none` when absent** (Go's zero value); every client
    /// sends it (nats-py / nats.go default `explicit`). Cannot change on update.
    AckPolicy {
        /// `"none"`: no acks; deliveries are done at once.
        #[default] None = "none",
        /// `"all"`: acking seq N acks every pending delivery ≤ N.
        All = "all",
        /// `"explicit"`: each delivery is acked on its own.
        Explicit = "explicit",
        /// `"flow_control"` (2.14+): acks by flow-control replies; push consumers only.
        FlowControl = "flow_control",
    } ignore_case false, error can_not_unmarshal
}

api_enum! {
    /// `replay_policy`. Always written; default `instant`. Cannot change on update.
    ReplayPolicy {
        /// `"instant"`: as fast as requests allow.
        #[default] Instant = "instant",
        /// `"original"`: spaced like the original publishes.
        Original = "original",
    } ignore_case false, error can_not_unmarshal
}

api_enum! {
    /// `priority_policy` (2.11+). Omitted when `none`. A policy other than `none` needs
    /// `priority_groups`; bad values are 10025 `unknown priority policy: "<v>"`.
    PriorityPolicy {
        /// `"none"`.
        #[default] None = "none",
        /// `"overflow"`: pulls with `min_pending`/`min_ack_pending` only get messages past them.
        Overflow = "overflow",
        /// `"pinned_client"`: one client at a time (pin id, `priority_timeout`).
        PinnedClient = "pinned_client",
        /// `"prioritized"`: pulls served by their `priority`.
        Prioritized = "prioritized",
    } ignore_case false, error |raw| format!("unknown priority policy: {raw}")
}

// ---------------------------------------------------------------------------------------------
// Times with their zone
// ---------------------------------------------------------------------------------------------

/// A time as Go's `time.Time` keeps it from JSON: the instant **and the UTC offset it was
/// written with**. The server echoes `opt_start_time` and (on create) `pause_until` in the
/// client's offset: `"2026-01-02T03:04:05.1-05:30"` comes back as is, `"…+00:00"` as `"…Z"`
/// (observed). Equality compares both, like Go's `reflect.DeepEqual`; [`Self::instant`] is what
/// the server's `Equal` compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ZonedTimestamp {
    /// The instant, UTC.
    pub instant: Timestamp,
    /// The offset from UTC in seconds it is written with (`0` writes `Z`).
    pub offset_secs: i32,
}

impl ZonedTimestamp {
    /// A UTC time (written with `Z`).
    pub fn utc(instant: Timestamp) -> Self {
        Self {
            instant,
            offset_secs: 0,
        }
    }

    /// Unix nanoseconds of the instant (`None` before 1970).
    pub fn unix_nanos(&self) -> Option<u64> {
        self.instant.unix_nanos()
    }
}

impl From<Timestamp> for ZonedTimestamp {
    fn from(t: Timestamp) -> Self {
        Self::utc(t)
    }
}

impl fmt::Display for ZonedTimestamp {
    /// Go's `time.RFC3339Nano` in the time's own offset. A time before 1970 with a non-zero
    /// offset is written in UTC (not seen in practice).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let off = i64::from(self.offset_secs);
        let local = self
            .instant
            .unix_nanos()
            .and_then(|n| i64::try_from(n).ok())
            .and_then(|n| n.checked_add(off * 1_000_000_000))
            .and_then(|n| u64::try_from(n).ok());
        match local {
            Some(n) if off != 0 => {
                let s = Timestamp::from_unix_nanos(n).to_string();
                let sign = if off < 0 { '-' } else { '+' };
                let a = off.unsigned_abs();
                write!(
                    f,
                    "{}{sign}{:02}:{:02}",
                    &s[..s.len() - 1],
                    a / 3600,
                    a / 60 % 60
                )
            }
            _ => write!(f, "{}", self.instant),
        }
    }
}

impl FromStr for ZonedTimestamp {
    type Err = crate::api::time::ParseTimestampError;

    /// RFC 3339, as [`Timestamp`]'s parser, keeping the offset (`Z` and `±00:00` are 0).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let instant: Timestamp = s.parse()?;
        let b = s.as_bytes();
        let mut offset_secs = 0;
        if b.len() > 6 && matches!(b[b.len() - 6], b'+' | b'-') {
            let t = &s[s.len() - 5..];
            let h: i32 = t[..2].parse().unwrap_or(0);
            let m: i32 = t[3..].parse().unwrap_or(0);
            offset_secs = (h * 3600 + m * 60) * if b[b.len() - 6] == b'-' { -1 } else { 1 };
        }
        Ok(Self {
            instant,
            offset_secs,
        })
    }
}

impl Serialize for ZonedTimestamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ZonedTimestamp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

// ---------------------------------------------------------------------------------------------
// ConsumerConfig
// ---------------------------------------------------------------------------------------------

/// A consumer's configuration: `config` in a [`CreateConsumerRequest`](super::CreateConsumerRequest) and in every
/// [`ConsumerInfo`](super::ConsumerInfo) (as nats-server's `ConsumerConfig`).
///
/// [`Default`] and missing JSON fields are Go's zero values, as the server's decoder gives;
/// `0` / absent mean "default" and [`check_consumer_create`](super::check_consumer_create) fills the server's defaults:
///
/// | field | default |
/// |---|---|
/// | `ack_policy` | `none` (when absent!) |
/// | `ack_wait` | 30 s for `explicit`/`all` (then `backoff[0]` when a backoff is set); omitted for `none` |
/// | `max_deliver` | -1 (also for 0 and < -1) |
/// | `max_waiting` | 512 for pull consumers; omitted for push |
/// | `max_ack_pending` | stream `consumer_limits.max_ack_pending`, else 1000 unless ack `none`; < -1 → -1 |
/// | `inactive_threshold` | stream `consumer_limits.inactive_threshold`, else 5 s for ephemerals |
/// | `priority_timeout` | 2 min for `pinned_client` |
/// | `num_replicas` | 0 (= the stream's), always written |
/// | negative `max_batch`/`max_expires`/`max_bytes`/`idle_heartbeat`/`priority_timeout` | 0 |
///
/// Serialising writes the fields in the server's order and omits exactly what it omits (every
/// field but `deliver_policy`, `ack_policy`, `replay_policy` and `num_replicas` is `omitempty`),
/// so a checked config serialises to the server's `config` object byte for byte (with
/// [`crate::api::to_json`]). Durations are integer nanoseconds ([`nanos`]). Parsing is lenient
/// (responses from newer servers); the strict request decoder is [`CreateConsumerRequest::decode`](super::CreateConsumerRequest::decode).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsumerConfig {
    /// `durable_name`: set = durable (kept until deleted), empty = ephemeral. Omitted when empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub durable_name: String,
    /// `name`: the consumer's name (the durable name, the name in the subject, or generated).
    /// Omitted when empty (legacy ephemerals echo no name in `config`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// `description`: at most 4 KiB (10107). Omitted when empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// `deliver_policy`. Always written.
    #[serde(default)]
    pub deliver_policy: DeliverPolicy,
    /// `opt_start_seq`: for `by_start_sequence` only. Omitted when 0.
    #[serde(default, skip_serializing_if = "is_default")]
    pub opt_start_seq: u64,
    /// `opt_start_time`: for `by_start_time` only, echoed in the client's offset. Omitted when
    /// absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub opt_start_time: Option<ZonedTimestamp>,
    /// `ack_policy`. Always written.
    #[serde(default)]
    pub ack_policy: AckPolicy,
    /// `ack_wait` (ns): redelivery timeout. Omitted when 0. Negative is 10183.
    #[serde(default, with = "nanos", skip_serializing_if = "Duration::is_zero")]
    pub ack_wait: Duration,
    /// `max_deliver`: deliveries per message, -1 = unlimited. Omitted when 0.
    #[serde(default, skip_serializing_if = "is_default")]
    pub max_deliver: i64,
    /// `backoff` (ns each): ack wait per delivery; at most `max_deliver` entries (10116);
    /// negative entries are 10184. Omitted when empty.
    #[serde(
        default,
        deserialize_with = "backoff_de",
        serialize_with = "backoff_ser",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub backoff: Vec<Duration>,
    /// `filter_subject`: one filter. Omitted when empty. Not with `filter_subjects` (10136).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub filter_subject: String,
    /// `filter_subjects`: several filters, none empty (10139), none a subset of another
    /// (10138). Omitted when empty.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub filter_subjects: Vec<String>,
    /// `replay_policy`. Always written.
    #[serde(default)]
    pub replay_policy: ReplayPolicy,
    /// `rate_limit_bps`: push only (10086 on pull). Omitted when 0.
    #[serde(default, skip_serializing_if = "is_default")]
    pub rate_limit_bps: u64,
    /// `sample_freq`: ack sampling, `"30%"` or `"30"` (10095 otherwise). Omitted when empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub sample_freq: String,
    /// `max_waiting`: pull request queue size; immutable. Omitted when 0 (push consumers).
    #[serde(default, skip_serializing_if = "is_default")]
    pub max_waiting: i64,
    /// `max_ack_pending`: -1 = unlimited. Omitted when 0.
    #[serde(default, skip_serializing_if = "is_default")]
    pub max_ack_pending: i64,
    /// `flow_control`: push only (10089 on pull), needs `idle_heartbeat` (10108). Omitted when false.
    #[serde(default, skip_serializing_if = "is_default")]
    pub flow_control: bool,
    /// `headers_only`: deliver headers and `Nats-Msg-Size` without payload. Omitted when false.
    #[serde(default, skip_serializing_if = "is_default")]
    pub headers_only: bool,
    /// `max_batch`: cap on a pull's `batch`. Omitted when 0 (= unlimited).
    #[serde(default, skip_serializing_if = "is_default")]
    pub max_batch: i64,
    /// `max_expires` (ns): cap on a pull's `expires`, ≥ 1 ms (10115). Omitted when 0.
    #[serde(default, with = "nanos", skip_serializing_if = "Duration::is_zero")]
    pub max_expires: Duration,
    /// `max_bytes`: cap on a pull's `max_bytes`. Omitted when 0.
    #[serde(default, skip_serializing_if = "is_default")]
    pub max_bytes: i64,
    /// `deliver_subject`: set = push consumer. Omitted when empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub deliver_subject: String,
    /// `deliver_group`: push queue group. Omitted when empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub deliver_group: String,
    /// `idle_heartbeat` (ns): push only (10088 on pull). Omitted when 0.
    #[serde(default, with = "nanos", skip_serializing_if = "Duration::is_zero")]
    pub idle_heartbeat: Duration,
    /// `inactive_threshold` (ns): delete after this long without activity. Omitted when 0.
    #[serde(default, with = "nanos", skip_serializing_if = "Duration::is_zero")]
    pub inactive_threshold: Duration,
    /// `num_replicas`: 0 = the stream's. Always written, as sent. > 1 is 10074 standalone; in
    /// a cluster up to the stream's (`check_consumer_create_in`).
    #[serde(default)]
    pub num_replicas: i64,
    /// `mem_storage`: keep consumer state in memory. Omitted when false. Immutable.
    #[serde(default, skip_serializing_if = "is_default")]
    pub mem_storage: bool,
    /// `direct` (internal, for sourcing/mirroring): push ephemerals only. Omitted when false.
    #[serde(default, skip_serializing_if = "is_default")]
    pub direct: bool,
    /// `sourcing` (internal, 2.14+). Omitted when false.
    #[serde(default, skip_serializing_if = "is_default")]
    pub sourcing: bool,
    /// `metadata`: user key/values plus the server's `_nats.*` keys
    /// ([`ConsumerConfig::set_static_metadata`], [`ConsumerConfig::with_dynamic_metadata`]).
    /// Written sorted by key, omitted when empty.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub metadata: BTreeMap<String, String>,
    /// `pause_until`: paused until then (CONSUMER.PAUSE changes it; an update keeps the stored
    /// value). Omitted when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause_until: Option<ZonedTimestamp>,
    /// `priority_groups`: the group names pulls must carry. Omitted when empty.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub priority_groups: Vec<String>,
    /// `priority_policy`. Omitted when `none`.
    #[serde(default, skip_serializing_if = "is_default")]
    pub priority_policy: PriorityPolicy,
    /// `priority_timeout` (ns): pin TTL of `pinned_client`. Omitted when 0.
    #[serde(default, with = "nanos", skip_serializing_if = "Duration::is_zero")]
    pub priority_timeout: Duration,
}

fn backoff_ser<S: Serializer>(v: &[Duration], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(v.iter().map(|d| nanos::to_i64(*d)))
}

fn backoff_de<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Duration>, D::Error> {
    Option::<Vec<i64>>::deserialize(d)?
        .unwrap_or_default()
        .into_iter()
        .map(|n| nanos::from_i64(n).ok_or_else(|| serde::de::Error::custom(nanos::NEGATIVE)))
        .collect()
}

/// Every JSON field of [`ConsumerConfig`], in the server's order (for the strict decoder).
pub const CONSUMER_CONFIG_FIELDS: &[&str] = &[
    "durable_name",
    "name",
    "description",
    "deliver_policy",
    "opt_start_seq",
    "opt_start_time",
    "ack_policy",
    "ack_wait",
    "max_deliver",
    "backoff",
    "filter_subject",
    "filter_subjects",
    "replay_policy",
    "rate_limit_bps",
    "sample_freq",
    "max_waiting",
    "max_ack_pending",
    "flow_control",
    "headers_only",
    "max_batch",
    "max_expires",
    "max_bytes",
    "deliver_subject",
    "deliver_group",
    "idle_heartbeat",
    "inactive_threshold",
    "num_replicas",
    "mem_storage",
    "direct",
    "sourcing",
    "metadata",
    "pause_until",
    "priority_groups",
    "priority_policy",
    "priority_timeout",
];

/// Fields whose `null` Go hands to a custom decoder (so `null` is an error, not "absent").
pub(super) const NULL_IS_ERROR: &[&str] = &[
    "deliver_policy",
    "ack_policy",
    "replay_policy",
    "priority_policy",
];

impl ConsumerConfig {
    /// Whether the consumer is durable: `durable_name` is set (durability is decided by it
    /// alone; a consumer with only `name` is ephemeral).
    pub fn is_durable(&self) -> bool {
        !self.durable_name.is_empty()
    }

    /// The `num_replicas` the consumer keeps once its stream's replicas became
    /// `stream.num_replicas` (a stream update), as nats-server 2.15.1 rewrites its consumers'
    /// configs then: 0 (the stream's) stays 0; on a limits stream a count above the stream's
    /// becomes the stream's (an R3 consumer of a stream scaled to R1 is R1, and stays R1 when
    /// the stream goes back to R3); on an interest or workqueue stream, whose consumers must
    /// have the stream's count (10134), the stream's.
    pub fn replicas_following(&self, stream: &crate::api::stream::StreamConfig) -> i64 {
        use crate::api::stream::RetentionPolicy;
        let (own, theirs) = (self.num_replicas, stream.num_replicas.max(1));
        match stream.retention {
            _ if own == 0 => 0,
            RetentionPolicy::Limits => own.min(theirs),
            RetentionPolicy::Interest | RetentionPolicy::WorkQueue => theirs,
        }
    }

    /// Whether it is a pull consumer (no `deliver_subject`).
    pub fn is_pull(&self) -> bool {
        self.deliver_subject.is_empty()
    }

    /// The filters as one list: `[filter_subject]` or `filter_subjects` (empty = everything),
    /// as the server's `gatherSubjectFilters`.
    pub fn filters(&self) -> Vec<String> {
        let mut v = self.filter_subjects.clone();
        if !self.filter_subject.is_empty() {
            v.push(self.filter_subject.clone());
        }
        v
    }

    /// The API level the config's features need, for `_nats.req.level`: 1 for a non-zero
    /// `pause_until` or any priority-group setting, 4 for `ack_policy: flow_control`, else 0.
    pub fn required_api_level(&self) -> u32 {
        let mut level = 0;
        if self.pause_until.is_some_and(|t| !t.instant.is_zero()) {
            level = level.max(1);
        }
        if self.priority_policy != PriorityPolicy::None
            || !self.priority_timeout.is_zero()
            || !self.priority_groups.is_empty()
        {
            level = level.max(1);
        }
        if self.ack_policy == AckPolicy::FlowControl {
            level = level.max(4);
        }
        level
    }

    /// Sets the metadata the server stores: removes `_nats.level`/`_nats.ver` and sets
    /// `_nats.req.level` ([`ConsumerConfig::required_api_level`]), as `setStaticConsumerMetadata`.
    /// Done by [`check_consumer_create`](super::check_consumer_create) (on the request's config, before defaults, as the
    /// server). CONSUMER.LIST shows only this.
    pub fn set_static_metadata(&mut self) {
        self.set_static_metadata_level(self.required_api_level());
    }

    /// [`ConsumerConfig::set_static_metadata`] with the level given.
    pub(super) fn set_static_metadata_level(&mut self, level: u32) {
        crate::api::server_metadata::set_static(&mut self.metadata, level);
    }

    /// A copy with the response-only metadata: `_nats.level` ([`API_LEVEL`](crate::api::API_LEVEL)) and `_nats.ver`
    /// (`server_version`, e.g. `"2.15.1"`), as in CREATE and INFO responses.
    pub fn with_dynamic_metadata(&self, server_version: &str) -> ConsumerConfig {
        let mut c = self.clone();
        crate::api::server_metadata::add_dynamic(&mut c.metadata, server_version);
        c
    }

    /// Whether `self` (a new, checked config) equals `existing` (the stored one) for an
    /// `action: "create"` on an existing consumer (else 10148): everything equal apart from the
    /// server's `_nats.*` metadata (the server's `copyConsumerMetadata` + `reflect.DeepEqual`).
    ///
    /// Note the server's quirk, kept by [`ConsumerCreate::check_existing`](super::ConsumerCreate::check_existing): an ephemeral stored
    /// with the 5 s `inactive_threshold` default differs from a request that leaves it 0, so
    /// repeating such a create with `action: "create"` is 10148 (observed).
    pub fn same_as(&self, existing: &ConsumerConfig) -> bool {
        let strip = |c: &ConsumerConfig| ConsumerConfig {
            metadata: crate::api::server_metadata::without(&c.metadata),
            ..c.clone()
        };
        strip(self) == strip(existing)
    }

    /// The ack wait in force: `backoff[0]` when a backoff is set, else `ack_wait`, else the
    /// 30 s default (for `ack_policy: none`, which has none).
    pub fn effective_ack_wait(&self) -> Duration {
        match (self.backoff.first(), self.ack_wait.is_zero()) {
            (Some(b), _) => *b,
            (None, false) => self.ack_wait,
            (None, true) => DEFAULT_ACK_WAIT,
        }
    }

    /// Where the consumer starts, for [`core::DeliverPolicy::start_seq`]: the policy with its
    /// start option (`opt_start_time` as Unix ns; a time before 1970 counts as 0).
    pub fn start_policy(&self) -> core::DeliverPolicy {
        match self.deliver_policy {
            DeliverPolicy::All => core::DeliverPolicy::All,
            DeliverPolicy::Last => core::DeliverPolicy::Last,
            DeliverPolicy::New => core::DeliverPolicy::New,
            DeliverPolicy::ByStartSequence => {
                core::DeliverPolicy::ByStartSequence(self.opt_start_seq)
            }
            DeliverPolicy::ByStartTime => core::DeliverPolicy::ByStartTime(
                self.opt_start_time
                    .and_then(|t| t.unix_nanos())
                    .unwrap_or(0),
            ),
            DeliverPolicy::LastPerSubject => core::DeliverPolicy::LastPerSubject,
        }
    }

    /// The consumer state machine's config for this (checked) config:
    ///
    /// * `name` (empty for a legacy ephemeral created without one, as the server stores it:
    ///   set the core's `name` to the name [`ConsumerCreate::check_new`](super::ConsumerCreate::check_new) returned);
    ///   `ack_policy` (`flow_control`, push only, maps to `All`); `deliver_policy`
    ///   ([`ConsumerConfig::start_policy`]);
    /// * `ack_wait`: the configured one, 30 s when 0 (ack `none`); `backoff` as is (the core
    ///   uses `backoff[0]` as the effective ack wait, as the server);
    /// * `max_deliver`: `None` for -1 (or ≤ 0), else the count (saturating at `u32::MAX`);
    /// * `filter_subjects`: [`ConsumerConfig::filters`];
    /// * `max_waiting`: 512 when ≤ 0 (push consumers have none);
    /// * `max_ack_pending`: `None` for -1 (or 0, ack `none`), else the count;
    /// * `max_batch` / `max_bytes`: `None` when ≤ 0; `max_expires`: `None` when 0;
    /// * `priority_policy` / `priority_groups` as they are (`priority_timeout` 2 min when 0);
    /// * `replay_original` for `replay_policy: original`; `rate_limit` from `rate_limit_bps`
    ///   (bytes = bits / 8, bucket `DEFAULT_RATE_LIMIT_BURST`, 1 MiB);
    /// * `push`: set when `deliver_subject` is, with `idle_heartbeat` (`None` when 0) and
    ///   `flow_control` (`deliver_group` and `headers_only` are the server's to apply).
    pub fn to_core(&self) -> core::ConsumerConfig {
        let positive = |n: i64| u64::try_from(n).ok().filter(|n| *n > 0);
        core::ConsumerConfig {
            name: self.name.clone(),
            ack_policy: match self.ack_policy {
                AckPolicy::None => core::AckPolicy::None,
                AckPolicy::All | AckPolicy::FlowControl => core::AckPolicy::All,
                AckPolicy::Explicit => core::AckPolicy::Explicit,
            },
            deliver_policy: self.start_policy(),
            ack_wait: if self.ack_wait.is_zero() {
                DEFAULT_ACK_WAIT
            } else {
                self.ack_wait
            },
            max_deliver: positive(self.max_deliver).map(|n| u32::try_from(n).unwrap_or(u32::MAX)),
            backoff: self.backoff.clone(),
            filter_subjects: self.filters(),
            max_waiting: positive(self.max_waiting).map_or(DEFAULT_MAX_WAITING as usize, |n| {
                usize::try_from(n).unwrap_or(usize::MAX)
            }),
            max_ack_pending: positive(self.max_ack_pending),
            max_batch: positive(self.max_batch),
            max_expires: (!self.max_expires.is_zero()).then_some(self.max_expires),
            max_bytes: positive(self.max_bytes),
            priority_policy: match self.priority_policy {
                PriorityPolicy::None => core::PriorityPolicy::None,
                PriorityPolicy::Overflow => core::PriorityPolicy::Overflow,
                PriorityPolicy::PinnedClient => core::PriorityPolicy::PinnedClient {
                    ttl: if self.priority_timeout.is_zero() {
                        DEFAULT_PRIORITY_TIMEOUT
                    } else {
                        self.priority_timeout
                    },
                },
                PriorityPolicy::Prioritized => core::PriorityPolicy::Prioritized,
            },
            priority_groups: self.priority_groups.clone(),
            replay_original: self.replay_policy == ReplayPolicy::Original,
            rate_limit: (self.rate_limit_bps > 0).then_some(core::RateLimit {
                bytes_per_sec: self.rate_limit_bps / 8,
                burst: DEFAULT_RATE_LIMIT_BURST,
            }),
            push: (!self.deliver_subject.is_empty()).then(|| core::PushConfig {
                deliver_subject: self.deliver_subject.clone(),
                idle_heartbeat: (!self.idle_heartbeat.is_zero()).then_some(self.idle_heartbeat),
                flow_control: self.flow_control,
            }),
        }
    }
}
