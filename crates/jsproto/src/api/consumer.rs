//! Consumers: [`ConsumerConfig`] with the server's defaults and validation, [`ConsumerInfo`],
//! and the request and response of every consumer endpoint:
//!
//! | Subject | Request | Response (`type` suffix) |
//! |---|---|---|
//! | `$JS.API.CONSUMER.CREATE.<s>[.<n>[.<filter…>]]`, `$JS.API.CONSUMER.DURABLE.CREATE.<s>.<d>` | [`CreateConsumerRequest`] ([`check_consumer_create`]) | [`ConsumerCreateResponse`] (`consumer_create_response`) |
//! | `$JS.API.CONSUMER.INFO.<s>.<c>` | empty ([`check_empty_request`]) | [`ConsumerInfoResponse`] (`consumer_info_response`) |
//! | `$JS.API.CONSUMER.DELETE.<s>.<c>` | empty ([`check_empty_request`]) | [`ConsumerDeleteResponse`] (`consumer_delete_response`) |
//! | `$JS.API.CONSUMER.NAMES.<s>` | [`ConsumerNamesRequest`] | [`ConsumerNamesResponse`] (`consumer_names_response`) |
//! | `$JS.API.CONSUMER.LIST.<s>` | [`ConsumerListRequest`] | [`ConsumerListResponse`] (`consumer_list_response`) |
//! | `$JS.API.CONSUMER.PAUSE.<s>.<c>` | [`ConsumerPauseRequest`] | [`ConsumerPauseResponse`] (`consumer_pause_response`) |
//!
//! Field names, their order, `omitempty` behaviour, defaults, checks and their order are
//! nats-server 2.15.1's (`ConsumerConfig`, `ConsumerInfo`, `setConsumerConfigDefaults`,
//! `checkConsumerCfg`, `checkNewConsumerConfig` in its `consumer.go`, `jsConsumerCreateRequest`
//! in `jetstream_api.go`), checked against responses recorded from it
//! (`tests/fixtures/consumer/`, `tests/api_consumer.rs`).
//!
//! # Creating or updating a consumer
//!
//! ```text
//! parse_create_subject(subject)   None → send no reply at all (the server's subscriptions
//!                                 do not match such subjects)
//! check_consumer_create(subject, body, stream)   → ConsumerCreate (or the error to answer)
//!   ├─ a consumer named create.name exists → create.check_existing(&stored, stream, &others)
//!   └─ otherwise                           → create.check_new(stream, &others, gen_name)
//! → the name and config to store; answer ConsumerInfo (config with_dynamic_metadata)
//! ```
//!
//! Push consumers (`deliver_subject` set) are parsed, defaulted and checked exactly like the
//! server does; whether to serve them is the server's decision ([`ConsumerConfig::is_pull`]).
//! The pull state machine takes [`ConsumerConfig::to_core`] and [`ConsumerConfig::start_policy`].

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use super::stream::{ClusterInfo, RetentionPolicy, StorageType, StreamConfig};
use super::{
    can_not_unmarshal, decode_request, is_valid_name, json_error_text, nanos, null_as_default,
    ApiError, ApiResponse, Timestamp, API_PREFIX, MAX_DESCRIPTION_LEN, MAX_METADATA_LEN,
    MAX_NAME_LEN,
};
use crate::consumer as core;
use crate::consumer::{ConsumerState, SequencePair};
use crate::gojson::fold_keys;
use crate::subject::{is_literal, is_subset, is_valid_subject, overlaps};

/// Default `ack_wait` for `explicit`/`all` consumers: 30 s (`JsAckWaitDefault`).
pub const DEFAULT_ACK_WAIT: Duration = Duration::from_secs(30);
/// `inactive_threshold` given to ephemeral consumers that set none: 5 s
/// (`JsDeleteWaitTimeDefault`; the server deletes them 5.1–6 s after the last activity).
pub const DEFAULT_INACTIVE_THRESHOLD: Duration = Duration::from_secs(5);
/// Default `max_waiting` of pull consumers: 512 (`JSWaitQueueDefaultMax`).
pub const DEFAULT_MAX_WAITING: i64 = 512;
/// Default `max_ack_pending` for consumers that ack: 1000 (`JsDefaultMaxAckPending`).
pub const DEFAULT_MAX_ACK_PENDING: i64 = 1000;
/// Default `priority_timeout` of `pinned_client` consumers: 2 min (`JsDefaultPinnedTTL`).
pub const DEFAULT_PRIORITY_TIMEOUT: Duration = Duration::from_secs(120);
/// The `idle_heartbeat` an `ack_policy: flow_control` consumer must have: 1 s (`sourceHealthHB`).
pub const FLOW_CONTROL_HEARTBEAT: Duration = Duration::from_secs(1);
/// Smallest non-zero `max_expires`: 1 ms.
pub const MIN_MAX_EXPIRES: Duration = Duration::from_millis(1);
/// Smallest non-zero push `idle_heartbeat`: 100 ms.
pub const MIN_HEARTBEAT: Duration = Duration::from_millis(100);
/// Longest priority group name (`^[a-zA-Z0-9/_=-]{1,16}$`).
pub const MAX_GROUP_NAME_LEN: usize = 16;
/// `limit` of a CONSUMER.NAMES page (`JSApiNamesLimit`).
pub const NAMES_LIMIT: usize = 1024;
/// `limit` of a CONSUMER.LIST page (`JSApiListLimit`).
pub const LIST_LIMIT: usize = 256;

/// Metadata key the server stores: the API level the consumer's features need (`"0"`, `"1"`, …).
pub const META_REQUIRED_LEVEL: &str = super::stream::META_REQUIRED_LEVEL;
/// Metadata key added to responses only: the server's API level (`"5"`).
pub const META_SERVER_LEVEL: &str = super::stream::META_SERVER_LEVEL;
/// Metadata key added to responses only: the server's version (`"2.15.1"`).
pub const META_SERVER_VERSION: &str = super::stream::META_SERVER_VERSION;

// ---------------------------------------------------------------------------------------------
// Errors the shared table (`error.rs`) does not have yet; codes and texts from errors.json.
// ---------------------------------------------------------------------------------------------

/// Consumer errors of nats-server's `errors.json` that [`ApiError`]'s table does not list,
/// one constructor each (named after the server constant, like [`ApiError`]'s).
pub mod errors {
    use super::ApiError;

    macro_rules! errs {
        ($( $name:ident $(($arg:ident))? => $code:literal, $err:literal, $konst:literal, $text:literal; )*) => {
            $( errs!(@one $name $(($arg))? => $code, $err, $konst, $text); )*
        };
        (@one $name:ident => $code:literal, $err:literal, $konst:literal, $text:literal) => {
            #[doc = concat!("`", $konst, "`: ", stringify!($code), "/", stringify!($err), " `", $text, "`.")]
            pub fn $name() -> ApiError {
                ApiError::new($code, $err, $text)
            }
        };
        (@one $name:ident($arg:ident) => $code:literal, $err:literal, $konst:literal, $text:literal) => {
            #[doc = concat!("`", $konst, "`: ", stringify!($code), "/", stringify!($err), " `", $text, "`, with `", stringify!($arg), "` filled in.")]
            pub fn $name($arg: impl std::fmt::Display) -> ApiError {
                ApiError::new($code, $err, format!($text, $arg = $arg))
            }
        };
    }

    errs! {
        durable_name_not_in_subject => 400, 10016, "JSConsumerDurableNameNotInSubjectErr", "consumer expected to be durable but no durable name set in subject";
        deliver_to_wildcards => 400, 10079, "JSConsumerDeliverToWildcardsErr", "consumer deliver subject has wildcards";
        push_max_waiting => 400, 10080, "JSConsumerPushMaxWaitingErr", "consumer in push mode can not set max waiting";
        deliver_cycle => 400, 10081, "JSConsumerDeliverCycleErr", "consumer deliver subject forms a cycle";
        max_pending_ack_policy_required => 400, 10082, "JSConsumerMaxPendingAckPolicyRequiredErr", "consumer requires ack policy for max ack pending";
        small_heartbeat => 400, 10083, "JSConsumerSmallHeartbeatErr", "consumer idle heartbeat needs to be >= 100ms";
        pull_with_rate_limit => 400, 10086, "JSConsumerPullWithRateLimitErr", "consumer in pull mode can not have rate limit set";
        fc_requires_push => 400, 10089, "JSConsumerFCRequiresPushErr", "consumer flow control requires a push based consumer";
        direct_requires_push => 400, 10090, "JSConsumerDirectRequiresPushErr", "consumer direct requires a push based consumer";
        direct_requires_ephemeral => 400, 10091, "JSConsumerDirectRequiresEphemeralErr", "consumer direct requires an ephemeral consumer";
        invalid_sampling(err) => 400, 10095, "JSConsumerInvalidSamplingErrF", "failed to parse consumer sampling configuration: {err}";
        wq_requires_explicit_ack => 400, 10098, "JSConsumerWQRequiresExplicitAckErr", "workqueue stream requires explicit ack";
        wq_consumer_not_deliver_all => 400, 10101, "JSConsumerWQConsumerNotDeliverAllErr", "consumer must be deliver all on workqueue stream";
        name_too_long(max) => 400, 10102, "JSConsumerNameTooLongErrF", "consumer name is too long, maximum allowed is {max}";
        bad_durable_name => 400, 10103, "JSConsumerBadDurableNameErr", "durable name can not contain '.', '*', '>'";
        description_too_long(max) => 400, 10107, "JSConsumerDescriptionTooLongErrF", "consumer description is too long, maximum allowed is {max}";
        flow_control_needs_heartbeats => 400, 10108, "JSConsumerWithFlowControlNeedsHeartbeats", "consumer with flow control also needs heartbeats";
        invalid_deliver_subject => 400, 10112, "JSConsumerInvalidDeliverSubject", "invalid push consumer deliver subject";
        max_request_expires_too_small => 400, 10115, "JSConsumerMaxRequestExpiresTooSmall", "consumer max request expires needs to be >= 1ms";
        max_pending_ack_excess(limit) => 400, 10121, "JSConsumerMaxPendingAckExcessErrF", "consumer max ack pending exceeds system limit of {limit}";
        replicas_exceeds_stream => 400, 10126, "JSConsumerReplicasExceedsStream", "consumer config replica count exceeds parent stream";
        name_contains_path_separators => 400, 10127, "JSConsumerNameContainsPathSeparatorsErr", "Consumer name can not contain path separators";
        durable_and_name_mismatch => 400, 10132, "JSConsumerCreateDurableAndNameMismatch", "Consumer Durable and Name have to be equal if both are provided";
        replicas_should_match_stream => 400, 10134, "JSConsumerReplicasShouldMatchStream", "consumer config replicas must match interest retention stream's replicas";
        metadata_length(limit) => 400, 10135, "JSConsumerMetadataLengthErrF", "consumer metadata exceeds maximum size of {limit}";
        empty_filter => 400, 10139, "JSConsumerEmptyFilter", "consumer filter in FilterSubjects cannot be empty";
        inactive_threshold_excess(limit) => 400, 10153, "JSConsumerInactiveThresholdExcess", "consumer inactive threshold exceeds system limit of {limit}";
        priority_policy_without_group => 400, 10159, "JSConsumerPriorityPolicyWithoutGroup", "Setting PriorityPolicy requires at least one PriorityGroup to be set";
        empty_group_name => 400, 10161, "JSConsumerEmptyGroupName", "Group name cannot be an empty string";
        invalid_group_name => 400, 10162, "JSConsumerInvalidGroupNameErr", "Valid priority group name must match A-Z, a-z, 0-9, -_/=)+ and may not exceed 16 characters";
        push_with_priority_group => 400, 10178, "JSConsumerPushWithPriorityGroupErr", "priority groups can not be used with push consumers";
        backoff_negative => 400, 10184, "JSConsumerBackOffNegativeErr", "consumer backoff needs to be positive";
        priority_group_with_policy_none => 400, 10196, "JSConsumerPriorityGroupWithPolicyNone", "consumer can not have priority groups when policy is none";
        pinned_ttl_without_priority_policy => 400, 10197, "JSConsumerPinnedTTLWithoutPriorityPolicyNone", "PinnedTTL cannot be set when PriorityPolicy is none";
        ack_fc_requires_push => 400, 10218, "JSConsumerAckFCRequiresPushErr", "flow control ack policy requires a push based consumer";
        ack_fc_requires_fc => 400, 10219, "JSConsumerAckFCRequiresFCErr", "flow control ack policy requires flow control";
        ack_fc_requires_max_ack_pending => 400, 10220, "JSConsumerAckFCRequiresMaxAckPendingErr", "flow control ack policy requires max ack pending";
        ack_fc_requires_no_ack_wait => 400, 10221, "JSConsumerAckFCRequiresNoAckWaitErr", "flow control ack policy requires unset ack wait";
        ack_fc_requires_no_max_deliver => 400, 10222, "JSConsumerAckFCRequiresNoMaxDeliverErr", "flow control ack policy requires unset max deliver";
    }
}

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

/// `action` of a [`CreateConsumerRequest`]: `""` (create or update, the default), `"create"`,
/// `"update"`. Anything else — including `null` and numbers — is 10025
/// `invalid JSON: unknown consumer action: <raw JSON>` (observed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ConsumerAction {
    /// `""`: create, or update an existing consumer.
    #[default]
    CreateOrUpdate,
    /// `"create"`: an existing consumer with a different config is 10148
    /// [`ApiError::consumer_already_exists`]; the same config succeeds.
    Create,
    /// `"update"`: a missing consumer is 10149 [`ApiError::consumer_does_not_exist`].
    Update,
}

impl ConsumerAction {
    /// The wire spelling (`""`, `"create"`, `"update"`).
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::CreateOrUpdate => "",
            Self::Create => "create",
            Self::Update => "update",
        }
    }
}

impl Serialize for ConsumerAction {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ConsumerAction {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = Value::deserialize(d)?;
        match raw.as_str() {
            Some("") => Ok(Self::CreateOrUpdate),
            Some("create") => Ok(Self::Create),
            Some("update") => Ok(Self::Update),
            _ => Err(serde::de::Error::custom(format!(
                "unknown consumer action: {raw}"
            ))),
        }
    }
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
    type Err = super::time::ParseTimestampError;

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

fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}

/// A consumer's configuration: `config` in a [`CreateConsumerRequest`] and in every
/// [`ConsumerInfo`] (as nats-server's `ConsumerConfig`).
///
/// [`Default`] and missing JSON fields are Go's zero values, as the server's decoder gives;
/// `0` / absent mean "default" and [`check_consumer_create`] fills the server's defaults:
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
/// [`super::to_json`]). Durations are integer nanoseconds ([`nanos`]). Parsing is lenient
/// (responses from newer servers); the strict request decoder is [`CreateConsumerRequest::decode`].
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
    /// `num_replicas`: 0 = the stream's. Always written. > 1 is 10074 standalone.
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
const NULL_IS_ERROR: &[&str] = &[
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
    /// Done by [`check_consumer_create`] (on the request's config, before defaults, as the
    /// server). CONSUMER.LIST shows only this.
    pub fn set_static_metadata(&mut self) {
        self.set_static_metadata_level(self.required_api_level());
    }

    fn set_static_metadata_level(&mut self, level: u32) {
        super::server_metadata::set_static(&mut self.metadata, level);
    }

    /// A copy with the response-only metadata: `_nats.level` ([`API_LEVEL`](super::API_LEVEL)) and `_nats.ver`
    /// (`server_version`, e.g. `"2.15.1"`), as in CREATE and INFO responses.
    pub fn with_dynamic_metadata(&self, server_version: &str) -> ConsumerConfig {
        let mut c = self.clone();
        super::server_metadata::add_dynamic(&mut c.metadata, server_version);
        c
    }

    /// Whether `self` (a new, checked config) equals `existing` (the stored one) for an
    /// `action: "create"` on an existing consumer (else 10148): everything equal apart from the
    /// server's `_nats.*` metadata (the server's `copyConsumerMetadata` + `reflect.DeepEqual`).
    ///
    /// Note the server's quirk, kept by [`ConsumerCreate::check_existing`]: an ephemeral stored
    /// with the 5 s `inactive_threshold` default differs from a request that leaves it 0, so
    /// repeating such a create with `action: "create"` is 10148 (observed).
    pub fn same_as(&self, existing: &ConsumerConfig) -> bool {
        let strip = |c: &ConsumerConfig| ConsumerConfig {
            metadata: super::server_metadata::without(&c.metadata),
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

    /// The pull state machine's config for this (checked) config:
    ///
    /// * `name` (empty for a legacy ephemeral created without one, as the server stores it:
    ///   set the core's `name` to the name [`ConsumerCreate::check_new`] returned);
    ///   `ack_policy` (`flow_control`, push only, maps to `All`); `deliver_policy`
    ///   ([`ConsumerConfig::start_policy`]);
    /// * `ack_wait`: the configured one, 30 s when 0 (ack `none`); `backoff` as is (the core
    ///   uses `backoff[0]` as the effective ack wait, as the server);
    /// * `max_deliver`: `None` for -1 (or ≤ 0), else the count (saturating at `u32::MAX`);
    /// * `filter_subjects`: [`ConsumerConfig::filters`];
    /// * `max_waiting`: 512 when ≤ 0 (push consumers have none);
    /// * `max_ack_pending`: `None` for -1 (or 0, ack `none`), else the count;
    /// * `max_batch` / `max_bytes`: `None` when ≤ 0; `max_expires`: `None` when 0.
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
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Create request
// ---------------------------------------------------------------------------------------------

/// The body of CONSUMER.CREATE / CONSUMER.DURABLE.CREATE (nats-server's
/// `CreateConsumerRequest`): `{"stream_name":…,"config":{…},"action":"","pedantic":false}`.
/// `pedantic` is omitted when false.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreateConsumerRequest {
    /// `stream_name`: must equal the stream in the subject (10056; also when missing).
    #[serde(default)]
    pub stream_name: String,
    /// `config`.
    #[serde(default)]
    pub config: ConsumerConfig,
    /// `action`.
    #[serde(default)]
    pub action: ConsumerAction,
    /// `pedantic`: refuse instead of silently adjusting (10157).
    #[serde(default, skip_serializing_if = "is_default")]
    pub pedantic: bool,
}

/// Raw duration values the decoder found negative (a [`Duration`] cannot hold them; the
/// server handles each differently).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct RawNegatives {
    /// `ack_wait` if negative.
    ack_wait: Option<i64>,
    /// Indexes of negative `backoff` entries.
    backoff: Vec<usize>,
    idle_heartbeat: bool,
    inactive_threshold: bool,
    max_expires: bool,
    priority_timeout: bool,
}

impl CreateConsumerRequest {
    /// Decodes a request body strictly, like the server: empty body or `null` = all defaults
    /// (stream name `""`, so 10056 follows); unknown fields, wrong types, bad enum values
    /// (`null` included) and malformed JSON are 10025 ([`ApiError::invalid_json`], e.g.
    /// `invalid JSON: json: unknown field "bogus"`, `invalid JSON: can not unmarshal
    /// "\"sometimes\""`, `invalid JSON: unknown consumer action: "bogus"`). Other `null`
    /// members mean "not given".
    ///
    /// Negative durations cannot be held in a [`Duration`]: they read as 0 here;
    /// [`check_consumer_create`] applies the server's rules to them (10183 for `ack_wait`,
    /// 10184 for `backoff`, 0 or a pedantic error for the others).
    pub fn decode(body: &[u8]) -> Result<CreateConsumerRequest, ApiError> {
        decode_create(body).map(|(req, _)| req)
    }
}

fn decode_create(body: &[u8]) -> Result<(CreateConsumerRequest, RawNegatives), ApiError> {
    let invalid = |e: serde_json::Error| ApiError::invalid_json(json_error_text(&e));
    let mut neg = RawNegatives::default();
    if body
        .iter()
        .all(|b| matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
    {
        return Ok((CreateConsumerRequest::default(), neg));
    }
    // Not `decode_request`: a top-level `"action":null` must reach the action decoder.
    let top = match serde_json::from_slice::<Value>(body).map_err(invalid)? {
        Value::Null => return Ok((CreateConsumerRequest::default(), neg)),
        Value::Object(m) => m,
        other => {
            let kind = match other {
                Value::Array(_) => "array",
                Value::String(_) => "string",
                Value::Bool(_) => "bool",
                _ => "number",
            };
            return Err(ApiError::invalid_json(format_args!(
                "json: cannot unmarshal {kind} into Go value of type server.CreateConsumerRequest"
            )));
        }
    };
    // Keys match the fields in any case, as Go's decoder matches them.
    const TOP_FIELDS: &[&str] = &["stream_name", "config", "action", "pedantic"];
    let mut top = fold_keys(top, TOP_FIELDS);
    if let Some(k) = top.keys().find(|k| !TOP_FIELDS.contains(&k.as_str())) {
        return Err(ApiError::invalid_json(format_args!(
            "json: unknown field {k:?}"
        )));
    }
    let mut req = CreateConsumerRequest::default();
    if let Some(v) = top.remove("action") {
        req.action = ConsumerAction::deserialize(v).map_err(invalid)?;
    }
    match top.remove("stream_name") {
        None | Some(Value::Null) => {}
        Some(v) => req.stream_name = String::deserialize(v).map_err(invalid)?,
    }
    match top.remove("pedantic") {
        None | Some(Value::Null) => {}
        Some(v) => req.pedantic = bool::deserialize(v).map_err(invalid)?,
    }
    match top.remove("config") {
        None | Some(Value::Null) => {}
        Some(Value::Object(cfg)) => {
            let mut cfg = fold_keys(cfg, CONSUMER_CONFIG_FIELDS);
            cfg.retain(|k, v| !v.is_null() || NULL_IS_ERROR.contains(&k.as_str()));
            if let Some(k) = cfg
                .keys()
                .find(|k| !CONSUMER_CONFIG_FIELDS.contains(&k.as_str()))
            {
                return Err(ApiError::invalid_json(format_args!(
                    "json: unknown field {k:?}"
                )));
            }
            let mut zero_if_negative = |key: &str| -> Option<i64> {
                let v = cfg.get_mut(key)?;
                let n = v.as_i64().filter(|n| *n < 0)?;
                *v = Value::from(0);
                Some(n)
            };
            neg.ack_wait = zero_if_negative("ack_wait");
            neg.idle_heartbeat = zero_if_negative("idle_heartbeat").is_some();
            neg.inactive_threshold = zero_if_negative("inactive_threshold").is_some();
            neg.max_expires = zero_if_negative("max_expires").is_some();
            neg.priority_timeout = zero_if_negative("priority_timeout").is_some();
            if let Some(Value::Array(items)) = cfg.get_mut("backoff") {
                for (i, item) in items.iter_mut().enumerate() {
                    if item.as_i64().is_some_and(|n| n < 0) {
                        neg.backoff.push(i);
                        *item = Value::from(0);
                    }
                }
            }
            req.config = crate::gojson::from_value(Value::Object(cfg)).map_err(invalid)?;
        }
        Some(other) => {
            req.config = crate::gojson::from_value(other).map_err(invalid)?;
        }
    }
    Ok((req, neg))
}

// ---------------------------------------------------------------------------------------------
// Subjects
// ---------------------------------------------------------------------------------------------

/// Which create subject a request came on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CreateForm {
    /// `$JS.API.CONSUMER.CREATE.<s>`: legacy ephemeral; the name is `config.name` or generated;
    /// `durable_name` is refused (10020).
    LegacyEphemeral,
    /// `$JS.API.CONSUMER.CREATE.<s>.<n>[.<filter…>]`: the name is `<n>` (overriding
    /// `config.name`); durable iff `durable_name` is set, and then it must equal `<n>` (10017).
    Named,
    /// `$JS.API.CONSUMER.DURABLE.CREATE.<s>.<d>`: legacy durable; `durable_name` is required
    /// (10018) and must equal `<d>` (10017).
    LegacyDurable,
}

/// A parsed create subject.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateSubject<'a> {
    /// The form.
    pub form: CreateForm,
    /// The stream token.
    pub stream: &'a str,
    /// The consumer token (absent for [`CreateForm::LegacyEphemeral`]).
    pub consumer: Option<&'a str>,
    /// `<filter…>`: every token after the consumer name, joined by `.` ([`CreateForm::Named`]
    /// only); the request's `filter_subject` must equal it (10131).
    pub filter: Option<&'a str>,
}

/// Parses a consumer create subject, or `None` when the server would not answer at all:
/// not a create subject, fewer than 5 tokens, `DURABLE.CREATE` without exactly 7 tokens (its
/// subscription is `$JS.API.CONSUMER.DURABLE.CREATE.*.*`), or an empty token (all observed
/// to time out).
pub fn parse_create_subject(subject: &str) -> Option<CreateSubject<'_>> {
    let rest = subject
        .strip_prefix(API_PREFIX)?
        .strip_prefix("CONSUMER.")?;
    if subject.split('.').any(str::is_empty) {
        return None;
    }
    if let Some(rest) = rest.strip_prefix("DURABLE.CREATE.") {
        let (stream, durable) = rest.split_once('.')?;
        if durable.contains('.') {
            return None;
        }
        return Some(CreateSubject {
            form: CreateForm::LegacyDurable,
            stream,
            consumer: Some(durable),
            filter: None,
        });
    }
    let rest = rest.strip_prefix("CREATE.")?;
    Some(match rest.split_once('.') {
        None => CreateSubject {
            form: CreateForm::LegacyEphemeral,
            stream: rest,
            consumer: None,
            filter: None,
        },
        Some((stream, rest)) => {
            let (consumer, filter) = match rest.split_once('.') {
                None => (rest, None),
                Some((c, f)) => (c, Some(f)),
            };
            CreateSubject {
                form: CreateForm::Named,
                stream,
                consumer: Some(consumer),
                filter,
            }
        }
    })
}

// ---------------------------------------------------------------------------------------------
// check_consumer_create
// ---------------------------------------------------------------------------------------------

/// A checked create/update request: what [`check_consumer_create`] returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerCreate {
    /// The stream (from the subject).
    pub stream_name: String,
    /// The consumer name; `None` for a legacy ephemeral without `config.name` (the server
    /// generates one: [`ConsumerCreate::check_new`]).
    pub name: Option<String>,
    /// Whether the consumer is durable (`durable_name` set).
    pub durable: bool,
    /// The request's action.
    pub action: ConsumerAction,
    /// The request's `pedantic` flag.
    pub pedantic: bool,
    /// The checked, defaulted config with static metadata (`name` filled when known,
    /// `inactive_threshold` 5 s for ephemerals that set none): what a new consumer stores.
    pub config: ConsumerConfig,
    /// Whether `config.inactive_threshold` is the ephemeral default rather than the request's.
    inactive_defaulted: bool,
}

fn invalid_config(text: impl fmt::Display) -> ApiError {
    ApiError::stream_invalid_config(text)
}

/// Everything the server checks on a consumer create subject before it looks at existing
/// consumers, in its order; returns the checked request ([`ConsumerCreate`]).
///
/// `subject` is the full request subject; `stream` the stream's stored config, `None` when it
/// does not exist (10059 is answered only after the subject checks, as the server does).
///
/// 1. body → 10025 ([`CreateConsumerRequest::decode`]);
/// 2. subject: not a create subject → 10003 [`ApiError::bad_request`] (**the server sends no
///    reply**: check [`parse_create_subject`] first);
/// 3. `stream_name` ≠ subject stream (also: empty body) → 10056;
/// 4. consumer name (subject token, or `config.name` for the legacy ephemeral form) with `/` or
///    `\` → 10127;
/// 5. per form ([`CreateForm`]): 10018, 10017, 10020; the name from the subject replaces
///    `config.name`;
/// 6. filter in the subject with `filter_subjects` → 10137; ≠ `filter_subject` → 10131;
/// 7. `num_replicas` > 1 → 10074; stream missing → 10059;
/// 8. static metadata ([`ConsumerConfig::set_static_metadata`]), then defaults (pedantic: 10157
///    instead of adjusting), then the config checks in the server's order: names (10052),
///    replicas (10126, 10133, 10134), 10184, 10183, flow-control ack policy (10218–10222),
///    10116, 10107, push (10079, 10112, 10081, 10080, 10082, 10083) or pull (10084, 10086,
///    10088, 10089, 10115), stream consumer limits (10121, 10153), direct (10090, 10091),
///    filters (10136, 10052 `invalid subject`, 10139, 10138), start options (10094), 10095,
///    10108, 10132, 10135, priority groups (10178, 10159, 10161, 10162, 10196, 10197);
/// 9. ephemerals without `inactive_threshold` get 5 s.
///
/// Server-wide and account limits (`max_ack_pending`, `max_request_batch`) are not applied
/// (standalone defaults have none).
pub fn check_consumer_create(
    subject: &str,
    body: &[u8],
    stream: Option<&StreamConfig>,
) -> Result<ConsumerCreate, ApiError> {
    let (req, neg) = decode_create(body)?;
    let subj = parse_create_subject(subject).ok_or_else(ApiError::bad_request)?;
    if subj.stream != req.stream_name {
        return Err(ApiError::stream_mismatch());
    }
    let mut cfg = req.config;
    let consumer_name = match subj.form {
        CreateForm::LegacyEphemeral => cfg.name.clone(),
        _ => subj.consumer.unwrap_or_default().to_owned(),
    };
    if consumer_name.contains(['/', '\\']) {
        return Err(errors::name_contains_path_separators());
    }
    match subj.form {
        CreateForm::LegacyDurable => {
            if cfg.durable_name.is_empty() {
                return Err(ApiError::consumer_durable_name_not_set());
            }
            if cfg.durable_name != consumer_name {
                return Err(ApiError::consumer_durable_name_not_match_subject());
            }
            cfg.name = consumer_name.clone();
        }
        CreateForm::Named => {
            if !cfg.durable_name.is_empty() && cfg.durable_name != consumer_name {
                return Err(ApiError::consumer_durable_name_not_match_subject());
            }
            cfg.name = consumer_name.clone();
        }
        CreateForm::LegacyEphemeral => {
            if !cfg.durable_name.is_empty() {
                return Err(ApiError::consumer_ephemeral_with_durable_name());
            }
        }
    }
    if let Some(filter) = subj.filter {
        if !cfg.filter_subjects.is_empty() {
            return Err(ApiError::consumer_multiple_filters_not_allowed());
        }
        if cfg.filter_subject != filter {
            return Err(ApiError::consumer_create_filter_subject_mismatch());
        }
    }
    if cfg.num_replicas > 1 {
        return Err(ApiError::stream_replicas_not_supported());
    }
    let stream = stream.ok_or_else(ApiError::stream_not_found)?;

    // setStaticConsumerMetadata runs on the request as sent (before defaults): a negative
    // priority_timeout still counts there.
    let mut level = cfg.required_api_level();
    if neg.priority_timeout {
        level = level.max(1);
    }
    cfg.set_static_metadata_level(level);

    let ack_wait_ns = set_defaults(&mut cfg, &neg, stream, req.pedantic)?;
    check_config(&cfg, &neg, ack_wait_ns, stream)?;

    let durable = cfg.is_durable();
    let inactive_defaulted = !durable && cfg.inactive_threshold.is_zero();
    if inactive_defaulted {
        cfg.inactive_threshold = DEFAULT_INACTIVE_THRESHOLD;
    }
    let name = if durable {
        Some(cfg.durable_name.clone())
    } else {
        (!cfg.name.is_empty()).then(|| cfg.name.clone())
    };
    Ok(ConsumerCreate {
        stream_name: req.stream_name,
        name,
        durable,
        action: req.action,
        pedantic: req.pedantic,
        config: cfg,
        inactive_defaulted,
    })
}

/// `setConsumerConfigDefaults` (standalone, no server/account limits). Returns the effective
/// `ack_wait` in raw nanoseconds (it may be negative, which `check_config` refuses).
fn set_defaults(
    cfg: &mut ConsumerConfig,
    neg: &RawNegatives,
    stream: &StreamConfig,
    pedantic: bool,
) -> Result<i64, ApiError> {
    if cfg.max_deliver == 0 || cfg.max_deliver < -1 {
        if pedantic && cfg.max_deliver < -1 {
            return Err(ApiError::pedantic("max_deliver must be set to -1"));
        }
        cfg.max_deliver = -1;
    }
    if cfg.max_waiting < 0 {
        if pedantic {
            return Err(ApiError::pedantic("max_waiting must not be negative"));
        }
        cfg.max_waiting = 0;
    }
    if cfg.max_ack_pending < -1 {
        if pedantic {
            return Err(ApiError::pedantic("max_ack_pending must be set to -1"));
        }
        cfg.max_ack_pending = -1;
    }
    if cfg.max_batch < 0 {
        if pedantic {
            return Err(ApiError::pedantic("max_batch must not be negative"));
        }
        cfg.max_batch = 0;
    }
    if neg.max_expires && pedantic {
        return Err(ApiError::pedantic("max_expires must not be negative"));
    }
    if cfg.max_bytes < 0 {
        if pedantic {
            return Err(ApiError::pedantic("max_bytes must not be negative"));
        }
        cfg.max_bytes = 0;
    }
    for (flag, text) in [
        (neg.idle_heartbeat, "idle_heartbeat must not be negative"),
        (
            neg.inactive_threshold,
            "inactive_threshold must not be negative",
        ),
        (
            neg.priority_timeout,
            "priority_timeout must not be negative",
        ),
    ] {
        if flag && pedantic {
            return Err(ApiError::pedantic(text));
        }
    }
    if cfg.deliver_subject.is_empty() && cfg.max_waiting == 0 {
        cfg.max_waiting = DEFAULT_MAX_WAITING;
    }
    let mut ack_wait_ns = neg.ack_wait.unwrap_or(nanos::to_i64(cfg.ack_wait));
    if ack_wait_ns == 0 && matches!(cfg.ack_policy, AckPolicy::Explicit | AckPolicy::All) {
        ack_wait_ns = nanos::to_i64(DEFAULT_ACK_WAIT);
    }
    if let Some(first) = cfg.backoff.first() {
        let first_ns = if neg.backoff.first() == Some(&0) {
            -1 // any negative value: refused by check_config (10184) before it matters
        } else {
            nanos::to_i64(*first)
        };
        if pedantic && ack_wait_ns != first_ns {
            return Err(ApiError::pedantic(
                "first backoff value has to equal batch AckWait",
            ));
        }
        ack_wait_ns = first_ns;
    }
    cfg.ack_wait = nanos::from_i64(ack_wait_ns).unwrap_or_default();
    let limits = &stream.consumer_limits;
    if cfg.max_ack_pending == 0 {
        if pedantic && limits.max_ack_pending > 0 {
            return Err(ApiError::pedantic(
                "max_ack_pending must be set if it's configured in stream limits",
            ));
        }
        cfg.max_ack_pending = limits.max_ack_pending;
    }
    if cfg.inactive_threshold.is_zero() {
        if pedantic && !limits.inactive_threshold.is_zero() {
            return Err(ApiError::pedantic(
                "inactive_threshold must be set if it's configured in stream limits",
            ));
        }
        cfg.inactive_threshold = limits.inactive_threshold;
    }
    if cfg.max_ack_pending == 0 && cfg.ack_policy != AckPolicy::None {
        cfg.max_ack_pending = DEFAULT_MAX_ACK_PENDING;
    }
    if cfg.priority_policy == PriorityPolicy::PinnedClient && cfg.priority_timeout.is_zero() {
        cfg.priority_timeout = DEFAULT_PRIORITY_TIMEOUT;
    }
    if cfg.ack_policy == AckPolicy::FlowControl && !pedantic {
        cfg.flow_control = true;
        cfg.idle_heartbeat = FLOW_CONTROL_HEARTBEAT;
    }
    Ok(ack_wait_ns)
}

/// Go's `strconv.Atoi` error text for `s` (`strconv.Atoi: parsing "abc": invalid syntax`).
fn atoi(s: &str) -> Result<i64, String> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("strconv.Atoi: parsing {s:?}: invalid syntax"));
    }
    s.parse::<i64>()
        .map_err(|_| format!("strconv.Atoi: parsing {s:?}: value out of range"))
}

fn is_valid_group_name(g: &str) -> bool {
    (1..=MAX_GROUP_NAME_LEN).contains(&g.len())
        && g.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'/' | b'_' | b'=' | b'-'))
}

/// `checkConsumerCfg`, in its order.
fn check_config(
    cfg: &ConsumerConfig,
    neg: &RawNegatives,
    ack_wait_ns: i64,
    stream: &StreamConfig,
) -> Result<(), ApiError> {
    if !cfg.name.is_empty() && !is_valid_name(&cfg.name) {
        return Err(invalid_config(
            "consumer name can not contain '.', '*', '>', '\\', '/'",
        ));
    }
    if !cfg.durable_name.is_empty() && !is_valid_name(&cfg.durable_name) {
        return Err(invalid_config(
            "consumer durable name can not contain '.', '*', '>', '\\', '/'",
        ));
    }
    if cfg.num_replicas > 0 && cfg.num_replicas > stream.num_replicas {
        return Err(errors::replicas_exceeds_stream());
    }
    if cfg.num_replicas < 0 {
        return Err(ApiError::replicas_count_cannot_be_negative());
    }
    if stream.retention != RetentionPolicy::Limits
        && cfg.num_replicas != 0
        && cfg.num_replicas != stream.num_replicas
    {
        return Err(errors::replicas_should_match_stream());
    }
    if !neg.backoff.is_empty() {
        return Err(errors::backoff_negative());
    }
    if ack_wait_ns < 0 {
        return Err(ApiError::consumer_ack_wait_negative());
    }
    if cfg.ack_policy == AckPolicy::FlowControl {
        if cfg.deliver_subject.is_empty() {
            return Err(errors::ack_fc_requires_push());
        }
        if !cfg.flow_control {
            return Err(errors::ack_fc_requires_fc());
        }
        if cfg.idle_heartbeat != FLOW_CONTROL_HEARTBEAT {
            return Err(invalid_config(
                "flow control ack policy heartbeat needs to be 1s",
            ));
        }
        if cfg.max_ack_pending <= 0 {
            return Err(errors::ack_fc_requires_max_ack_pending());
        }
        if !cfg.ack_wait.is_zero() || !cfg.backoff.is_empty() {
            return Err(errors::ack_fc_requires_no_ack_wait());
        }
        if cfg.max_deliver > 0 {
            return Err(errors::ack_fc_requires_no_max_deliver());
        }
    }
    if !cfg.backoff.is_empty()
        && cfg.max_deliver != -1
        && cfg.backoff.len() as i64 > cfg.max_deliver
    {
        return Err(ApiError::consumer_max_deliver_backoff());
    }
    if cfg.description.len() > MAX_DESCRIPTION_LEN {
        return Err(errors::description_too_long(MAX_DESCRIPTION_LEN));
    }
    if !cfg.deliver_subject.is_empty() {
        let ds = cfg.deliver_subject.as_bytes();
        if !is_literal(ds) {
            return Err(errors::deliver_to_wildcards());
        }
        if !is_valid_subject(ds) {
            return Err(errors::invalid_deliver_subject());
        }
        if stream.subjects.iter().any(|s| is_subset(ds, s.as_bytes())) {
            return Err(errors::deliver_cycle());
        }
        if cfg.max_waiting != 0 {
            return Err(errors::push_max_waiting());
        }
        if cfg.max_ack_pending > 0 && cfg.ack_policy == AckPolicy::None {
            return Err(errors::max_pending_ack_policy_required());
        }
        if !cfg.idle_heartbeat.is_zero() && cfg.idle_heartbeat < MIN_HEARTBEAT {
            return Err(errors::small_heartbeat());
        }
    } else {
        if cfg.ack_policy == AckPolicy::None && stream.retention == RetentionPolicy::WorkQueue {
            return Err(ApiError::consumer_pull_requires_ack());
        }
        if cfg.rate_limit_bps > 0 {
            return Err(errors::pull_with_rate_limit());
        }
        if !cfg.idle_heartbeat.is_zero() {
            return Err(ApiError::consumer_hb_requires_push());
        }
        if cfg.flow_control {
            return Err(errors::fc_requires_push());
        }
        if !cfg.max_expires.is_zero() && cfg.max_expires < MIN_MAX_EXPIRES {
            return Err(errors::max_request_expires_too_small());
        }
    }
    let limits = &stream.consumer_limits;
    if limits.max_ack_pending > 0 && cfg.max_ack_pending > limits.max_ack_pending {
        return Err(errors::max_pending_ack_excess(limits.max_ack_pending));
    }
    if !limits.inactive_threshold.is_zero() && cfg.inactive_threshold > limits.inactive_threshold {
        return Err(errors::inactive_threshold_excess(core::format_go_duration(
            limits.inactive_threshold,
        )));
    }
    if cfg.direct {
        if cfg.deliver_subject.is_empty() {
            return Err(errors::direct_requires_push());
        }
        if cfg.is_durable() {
            return Err(errors::direct_requires_ephemeral());
        }
    }
    if !cfg.filter_subject.is_empty() && !cfg.filter_subjects.is_empty() {
        return Err(ApiError::consumer_duplicate_filter_subjects());
    }
    if !cfg.filter_subject.is_empty() && !is_valid_subject(cfg.filter_subject.as_bytes()) {
        return Err(invalid_config("invalid subject"));
    }
    if cfg.filter_subjects.iter().any(String::is_empty) {
        return Err(errors::empty_filter());
    }
    let filters = cfg.filters();
    for (i, f) in filters.iter().enumerate() {
        if !is_valid_subject(f.as_bytes()) {
            return Err(invalid_config("invalid subject"));
        }
        for (j, g) in filters.iter().enumerate() {
            if i != j && is_subset(f.as_bytes(), g.as_bytes()) {
                return Err(ApiError::consumer_overlapping_subject_filters());
            }
        }
    }
    check_start(cfg)?;
    if !cfg.sample_freq.is_empty() {
        let s = cfg
            .sample_freq
            .strip_suffix('%')
            .unwrap_or(&cfg.sample_freq);
        match atoi(s) {
            Err(e) => return Err(errors::invalid_sampling(e)),
            Ok(n) if n < 0 => return Err(errors::invalid_sampling("%!s(<nil>)")),
            Ok(_) => {}
        }
    }
    if cfg.flow_control && cfg.idle_heartbeat.is_zero() {
        return Err(errors::flow_control_needs_heartbeats());
    }
    if cfg.is_durable() && !cfg.name.is_empty() && cfg.name != cfg.durable_name {
        return Err(errors::durable_and_name_mismatch());
    }
    let metadata_len: usize = cfg.metadata.iter().map(|(k, v)| k.len() + v.len()).sum();
    if metadata_len > MAX_METADATA_LEN {
        return Err(errors::metadata_length(format_args!(
            "{}KB",
            MAX_METADATA_LEN / 1024
        )));
    }
    if cfg.priority_policy != PriorityPolicy::None {
        if !cfg.deliver_subject.is_empty() {
            return Err(errors::push_with_priority_group());
        }
        if cfg.priority_groups.is_empty() {
            return Err(errors::priority_policy_without_group());
        }
        for g in &cfg.priority_groups {
            if g.is_empty() {
                return Err(errors::empty_group_name());
            }
            if !is_valid_group_name(g) {
                return Err(errors::invalid_group_name());
            }
        }
    } else {
        if !cfg.priority_groups.is_empty() {
            return Err(errors::priority_group_with_policy_none());
        }
        if !cfg.priority_timeout.is_zero() {
            return Err(errors::pinned_ttl_without_priority_policy());
        }
    }
    Ok(())
}

/// The deliver policy / start option rules (10094, texts as the server, typo included).
fn check_start(cfg: &ConsumerConfig) -> Result<(), ApiError> {
    let bad_start = |dp: &str, start: &str| {
        ApiError::consumer_invalid_policy(format_args!(
            "consumer delivery policy is deliver {dp}, but optional start {start} is also set"
        ))
    };
    let not_set = |dp: &str, what: &str| {
        ApiError::consumer_invalid_policy(format_args!(
            "consumer delivery policy is deliver {dp}, but optional {what} is not set"
        ))
    };
    let seq = cfg.opt_start_seq > 0;
    let time = cfg.opt_start_time.is_some();
    let simple = |dp: &str| {
        if seq {
            Err(bad_start(dp, "sequence"))
        } else if time {
            Err(bad_start(dp, "time"))
        } else {
            Ok(())
        }
    };
    match cfg.deliver_policy {
        DeliverPolicy::All => simple("all"),
        DeliverPolicy::Last => simple("last"),
        DeliverPolicy::New => simple("new"),
        DeliverPolicy::LastPerSubject => {
            simple("last per subject")?;
            if cfg.filters().is_empty() {
                return Err(not_set("last per subject", "filter subject"));
            }
            Ok(())
        }
        DeliverPolicy::ByStartSequence => {
            if !seq {
                return Err(not_set("by start sequence", "start sequence"));
            }
            if time {
                return Err(bad_start("by start sequence", "time"));
            }
            Ok(())
        }
        DeliverPolicy::ByStartTime => {
            if !time {
                return Err(not_set("by start time", "start time"));
            }
            if seq {
                return Err(bad_start("by start time", "start sequence"));
            }
            Ok(())
        }
    }
}

impl ConsumerCreate {
    /// For a request naming a consumer that already exists with the stored config `existing`:
    /// the server's checks in its order, returning the config to store (and echo).
    ///
    /// * the request's `pause_until` is replaced by the stored one (CONSUMER.PAUSE changes it,
    ///   an update cannot);
    /// * `action: "create"` with a config that is not [`ConsumerConfig::same_as`] the stored
    ///   one → 10148 (an ephemeral's 5 s default counts as a difference, as on the server);
    /// * workqueue stream: a filter overlapping another consumer's (or an unfiltered other) →
    ///   10100 ([`partition_unique`]; `others` are the stream's other consumers, `existing`
    ///   may be among them);
    /// * [`check_consumer_update`] (10012 with the server's texts);
    /// * an `inactive_threshold` that changes to 0 on an ephemeral becomes 5 s again.
    ///
    /// Not covered: a push consumer's `deliver_subject` change while bound (10013).
    pub fn check_existing(
        &self,
        existing: &ConsumerConfig,
        stream: &StreamConfig,
        others: &[&ConsumerConfig],
    ) -> Result<ConsumerConfig, ApiError> {
        let mut cfg = self.config.clone();
        if self.inactive_defaulted {
            cfg.inactive_threshold = Duration::ZERO;
        }
        cfg.pause_until = existing.pause_until;
        if cfg.pause_until.is_some_and(|t| !t.instant.is_zero()) {
            let level = cfg
                .metadata
                .get(META_REQUIRED_LEVEL)
                .and_then(|l| l.parse::<u32>().ok())
                .unwrap_or(0)
                .max(1);
            cfg.set_static_metadata_level(level);
        }
        if self.action == ConsumerAction::Create && !cfg.same_as(existing) {
            return Err(ApiError::consumer_already_exists());
        }
        if stream.retention == RetentionPolicy::WorkQueue
            && !partition_unique(
                self.name.as_deref().unwrap_or(&existing.name),
                &cfg.filters(),
                others,
            )
        {
            return Err(ApiError::consumer_wq_consumer_not_unique());
        }
        check_consumer_update(existing, &cfg)?;
        if cfg.inactive_threshold != existing.inactive_threshold
            && !existing.is_durable()
            && cfg.inactive_threshold.is_zero()
        {
            cfg.inactive_threshold = DEFAULT_INACTIVE_THRESHOLD;
        }
        Ok(cfg)
    }

    /// For a request whose consumer does not exist yet (or has no name): the server's checks
    /// in its order, returning the consumer's name and the config to store.
    ///
    /// * `action: "update"` → 10149;
    /// * stream `max_consumers` reached by `others` (the stream's consumers) → 10026 (account
    ///   limits are the caller's);
    /// * workqueue stream (unless `direct`/`sourcing`): ack policy not `explicit` → 10098,
    ///   deliver policy not `all` → 10101, an unfiltered consumer next to others → 10099, a
    ///   filter overlapping another consumer's → 10100;
    /// * durable name longer than 255 → 10102;
    /// * no name (legacy ephemeral): `generate_name` is called until the name is not one of
    ///   `others` (the server uses 8 random characters from `[0-9A-Za-z]`). As on the server,
    ///   the stored config then keeps `name` empty (observed: `config` has no `name`), so use
    ///   the returned name for the consumer (ack subjects, `ConsumerInfo::name`, listing);
    /// * an ephemeral name longer than 255 on a file stream → 10012 `error creating store for
    ///   consumer` (observed: the server fails to create its directory).
    pub fn check_new(
        &self,
        stream: &StreamConfig,
        others: &[&ConsumerConfig],
        mut generate_name: impl FnMut() -> String,
    ) -> Result<(String, ConsumerConfig), ApiError> {
        let cfg = self.config.clone();
        if self.action == ConsumerAction::Update {
            return Err(ApiError::consumer_does_not_exist());
        }
        let limitable = others.iter().filter(|o| !o.sourcing).count();
        if stream.max_consumers > 0 && limitable as i64 >= stream.max_consumers {
            return Err(ApiError::maximum_consumers_limit());
        }
        if stream.retention == RetentionPolicy::WorkQueue && !cfg.direct && !cfg.sourcing {
            if !matches!(cfg.ack_policy, AckPolicy::Explicit | AckPolicy::FlowControl) {
                return Err(errors::wq_requires_explicit_ack());
            }
            if cfg.deliver_policy != DeliverPolicy::All {
                return Err(errors::wq_consumer_not_deliver_all());
            }
            if limitable > 0 {
                let filters = cfg.filters();
                if filters.is_empty() {
                    return Err(ApiError::consumer_wq_multiple_unfiltered());
                }
                let name = self.name.as_deref().unwrap_or_default();
                if !partition_unique(name, &filters, others) {
                    return Err(ApiError::consumer_wq_consumer_not_unique());
                }
            }
        }
        let name = if self.durable {
            if cfg.durable_name.len() > MAX_NAME_LEN {
                return Err(errors::name_too_long(MAX_NAME_LEN));
            }
            cfg.durable_name.clone()
        } else if cfg.name.is_empty() {
            loop {
                let n = generate_name();
                if !others.iter().any(|o| o.name == n) {
                    break n;
                }
            }
        } else {
            cfg.name.clone()
        };
        if !is_valid_name(&name) {
            return Err(errors::bad_durable_name());
        }
        if name.len() > MAX_NAME_LEN && stream.storage == StorageType::File {
            return Err(ApiError::consumer_create(
                "error creating store for consumer",
            ));
        }
        Ok((name, cfg))
    }
}

/// Whether `filters` (of consumer `name`) overlap no other consumer's filters, as the server's
/// `partitionUnique` for workqueue streams: an unfiltered other consumer overlaps everything;
/// `direct`/`sourcing` consumers and `name` itself are skipped.
pub fn partition_unique(name: &str, filters: &[String], others: &[&ConsumerConfig]) -> bool {
    filters.iter().all(|f| {
        others
            .iter()
            .filter(|o| o.name != name && !o.direct && !o.sourcing)
            .all(|o| {
                let of = o.filters();
                !of.is_empty() && !of.iter().any(|g| overlaps(f.as_bytes(), g.as_bytes()))
            })
    })
}

/// Checks that `new` only changes what an update may change, as the server's
/// `checkNewConsumerConfig`, in its order. Both configs are checked, defaulted ones.
///
/// Errors are 10012 [`ApiError::consumer_create`] (code 500) with the server's text:
/// `deliver policy can not be updated`, `storage type can not be updated`, `direct can not be
/// updated`, `sourcing can not be updated`, `start sequence can not be updated`, `start time can
/// not be updated` (different instants; the same instant in another offset is fine), `ack
/// policy can not be updated`, `replay policy can not be updated`, `heart beats can not be
/// updated`, `flow control can not be updated`, `can not update pull consumer to push based`,
/// `can not update push consumer to pull based`, `max waiting can not be updated`; and 10116
/// when `backoff` is longer than `max_deliver`.
///
/// Everything else may change (`ack_wait`, `max_deliver`, `backoff`, filters, `description`,
/// `max_ack_pending`, `metadata`, `inactive_threshold`, `max_batch`/`max_expires`/`max_bytes`,
/// `headers_only`, `sample_freq`, even `durable_name`).
pub fn check_consumer_update(
    existing: &ConsumerConfig,
    new: &ConsumerConfig,
) -> Result<(), ApiError> {
    if existing == new {
        return Ok(());
    }
    let err = |t: &str| Err(ApiError::consumer_create(t));
    let (o, n) = (existing, new);
    if o.deliver_policy != n.deliver_policy {
        return err("deliver policy can not be updated");
    }
    if o.mem_storage != n.mem_storage {
        return err("storage type can not be updated");
    }
    if o.direct != n.direct {
        return err("direct can not be updated");
    }
    if o.sourcing != n.sourcing {
        return err("sourcing can not be updated");
    }
    if o.opt_start_seq != n.opt_start_seq {
        return err("start sequence can not be updated");
    }
    if o.opt_start_time.map(|t| t.instant) != n.opt_start_time.map(|t| t.instant) {
        return err("start time can not be updated");
    }
    if o.ack_policy != n.ack_policy {
        return err("ack policy can not be updated");
    }
    if o.replay_policy != n.replay_policy {
        return err("replay policy can not be updated");
    }
    if o.idle_heartbeat != n.idle_heartbeat {
        return err("heart beats can not be updated");
    }
    if o.flow_control != n.flow_control {
        return err("flow control can not be updated");
    }
    if o.deliver_subject != n.deliver_subject {
        if o.deliver_subject.is_empty() {
            return err("can not update pull consumer to push based");
        }
        if n.deliver_subject.is_empty() {
            return err("can not update push consumer to pull based");
        }
    }
    if o.max_waiting != n.max_waiting {
        return err("max waiting can not be updated");
    }
    if !n.backoff.is_empty() && n.max_deliver != -1 && n.backoff.len() as i64 > n.max_deliver {
        return Err(ApiError::consumer_max_deliver_backoff());
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// ConsumerInfo
// ---------------------------------------------------------------------------------------------

/// `delivered` / `ack_floor` of a [`ConsumerInfo`] (nats-server's `SequenceInfo`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SequenceInfo {
    /// `consumer_seq`.
    #[serde(default)]
    pub consumer_seq: u64,
    /// `stream_seq`.
    #[serde(default)]
    pub stream_seq: u64,
    /// `last_active`: last delivery (`delivered`) or last ack (`ack_floor`). Omitted until then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_active: Option<Timestamp>,
}

impl SequenceInfo {
    /// From the core's pair and an optional Unix-ns time.
    pub fn new(pair: SequencePair, last_active_unix_ns: Option<u64>) -> Self {
        Self {
            consumer_seq: pair.consumer_seq,
            stream_seq: pair.stream_seq,
            last_active: last_active_unix_ns.map(Timestamp::from_unix_nanos),
        }
    }
}

/// One entry of `priority_groups` in a [`ConsumerInfo`] (`PriorityGroupState`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PriorityGroupState {
    /// `group`.
    #[serde(default)]
    pub group: String,
    /// `pinned_client_id`: the pin id; omitted when none.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub pinned_client_id: String,
    /// `pinned_ts`: when pinned; zero time when not (always written).
    #[serde(default)]
    pub pinned_ts: Timestamp,
}

/// A consumer's config and state (nats-server's `ConsumerInfo`): the body of CREATE and INFO
/// responses and each entry of CONSUMER.LIST.
///
/// Order and omission as the server: `stream_name, name, created, config, delivered,
/// ack_floor, num_ack_pending, num_redelivered, num_waiting, num_pending, cluster?,
/// push_bound?, paused?, pause_remaining?, ts, priority_groups?`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsumerInfo {
    /// `stream_name`.
    #[serde(default)]
    pub stream_name: String,
    /// `name`.
    #[serde(default)]
    pub name: String,
    /// `created`: creation time (unchanged by updates).
    #[serde(default)]
    pub created: Timestamp,
    /// `config`: with dynamic metadata in CREATE/INFO responses, static only in LIST.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<ConsumerConfig>,
    /// `delivered`: last consumer seq handed out, highest stream seq delivered.
    #[serde(default)]
    pub delivered: SequenceInfo,
    /// `ack_floor`.
    #[serde(default)]
    pub ack_floor: SequenceInfo,
    /// `num_ack_pending`.
    #[serde(default)]
    pub num_ack_pending: u64,
    /// `num_redelivered`.
    #[serde(default)]
    pub num_redelivered: u64,
    /// `num_waiting`.
    #[serde(default)]
    pub num_waiting: u64,
    /// `num_pending`.
    #[serde(default)]
    pub num_pending: u64,
    /// `cluster`: omitted standalone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<ClusterInfo>,
    /// `push_bound`: push consumer with interest. Omitted when false.
    #[serde(default, skip_serializing_if = "is_default")]
    pub push_bound: bool,
    /// `paused`. Omitted when false.
    #[serde(default, skip_serializing_if = "is_default")]
    pub paused: bool,
    /// `pause_remaining` (ns). Omitted when 0.
    #[serde(default, with = "nanos", skip_serializing_if = "Duration::is_zero")]
    pub pause_remaining: Duration,
    /// `ts`: when this info was generated.
    #[serde(default)]
    pub ts: Timestamp,
    /// `priority_groups`: one entry per configured group. Omitted when empty.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub priority_groups: Vec<PriorityGroupState>,
}

/// The wall-clock times a [`ConsumerInfo`] shows, as Unix nanoseconds. jsproto reads no clock:
/// the caller maps the core's `Instant`s ([`ConsumerState::last_delivery`],
/// [`ConsumerState::last_ack`]) to wall-clock time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConsumerTimes {
    /// When the consumer was created (`created`).
    pub created_unix_ns: u64,
    /// The last delivery (`delivered.last_active`); `None` before the first.
    pub last_delivery_unix_ns: Option<u64>,
    /// The last ack (`ack_floor.last_active`); `None` before the first.
    pub last_ack_unix_ns: Option<u64>,
    /// Now (`ts`, and the pause arithmetic).
    pub now_unix_ns: u64,
}

impl ConsumerInfo {
    /// Builds the info of consumer `name` from the core's state and the wall-clock `times`.
    ///
    /// `config` is put in as given (add [`ConsumerConfig::with_dynamic_metadata`] for
    /// CREATE/INFO). `paused`/`pause_remaining` follow `config.pause_until` > now;
    /// `priority_groups` lists the configured groups unpinned (`pinned_ts` zero) — the caller
    /// fills pins when it implements them.
    pub fn from_state(
        stream_name: &str,
        name: &str,
        config: ConsumerConfig,
        state: &ConsumerState,
        times: ConsumerTimes,
    ) -> ConsumerInfo {
        let ConsumerTimes {
            created_unix_ns,
            last_delivery_unix_ns,
            last_ack_unix_ns,
            now_unix_ns,
        } = times;
        let pause_remaining = config
            .pause_until
            .and_then(|t| t.unix_nanos())
            .map_or(Duration::ZERO, |until| {
                Duration::from_nanos(until.saturating_sub(now_unix_ns))
            });
        ConsumerInfo {
            stream_name: stream_name.to_owned(),
            name: name.to_owned(),
            created: Timestamp::from_unix_nanos(created_unix_ns),
            delivered: SequenceInfo::new(state.delivered, last_delivery_unix_ns),
            ack_floor: SequenceInfo::new(state.ack_floor, last_ack_unix_ns),
            num_ack_pending: state.num_ack_pending,
            num_redelivered: state.num_redelivered,
            num_waiting: state.num_waiting,
            num_pending: state.num_pending,
            cluster: None,
            push_bound: false,
            paused: !pause_remaining.is_zero(),
            pause_remaining,
            ts: Timestamp::from_unix_nanos(now_unix_ns),
            priority_groups: config
                .priority_groups
                .iter()
                .map(|g| PriorityGroupState {
                    group: g.clone(),
                    ..PriorityGroupState::default()
                })
                .collect(),
            config: Some(config),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Responses and small requests
// ---------------------------------------------------------------------------------------------

/// CONSUMER.CREATE / DURABLE.CREATE response: the [`ConsumerInfo`] (config with dynamic
/// metadata). Errors carry nothing else (observed).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsumerCreateResponse {
    /// The consumer.
    #[serde(flatten)]
    pub info: ConsumerInfo,
}

impl ApiResponse for ConsumerCreateResponse {
    const TYPE: &'static str = "io.nats.jetstream.api.v1.consumer_create_response";
}

/// CONSUMER.INFO response: the [`ConsumerInfo`]. Missing consumer: 10014 (404); missing
/// stream: 10059; a non-empty body: 10038 ([`check_empty_request`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsumerInfoResponse {
    /// The consumer.
    #[serde(flatten)]
    pub info: ConsumerInfo,
}

impl ApiResponse for ConsumerInfoResponse {
    const TYPE: &'static str = "io.nats.jetstream.api.v1.consumer_info_response";
}

/// CONSUMER.DELETE response: `{"success":true}` (omitted when false). Missing: 10014.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsumerDeleteResponse {
    /// `success`.
    #[serde(default, skip_serializing_if = "is_default")]
    pub success: bool,
}

impl ApiResponse for ConsumerDeleteResponse {
    const TYPE: &'static str = "io.nats.jetstream.api.v1.consumer_delete_response";
}

/// Whether a body counts as empty for CONSUMER.INFO/DELETE (the server's `isEmptyRequest`):
/// no bytes, or a JSON object without members (`{}`, `{ }`).
pub fn is_empty_request(body: &[u8]) -> bool {
    body.is_empty()
        || serde_json::from_slice::<Value>(body)
            .is_ok_and(|v| v.as_object().is_some_and(|m| m.is_empty()))
}

/// CONSUMER.INFO/DELETE bodies: anything but [`is_empty_request`] is 10038
/// [`ApiError::not_empty_request`].
pub fn check_empty_request(body: &[u8]) -> Result<(), ApiError> {
    if is_empty_request(body) {
        Ok(())
    } else {
        Err(ApiError::not_empty_request())
    }
}

/// CONSUMER.NAMES / CONSUMER.LIST request: empty or `{"offset":n}`. Only `offset` exists
/// (`subject` is 10025 `json: unknown field "subject"`, observed).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConsumerNamesRequest {
    /// `offset` of the first entry; negative counts as 0.
    #[serde(default)]
    pub offset: i64,
}

/// CONSUMER.LIST request: same as [`ConsumerNamesRequest`].
pub type ConsumerListRequest = ConsumerNamesRequest;

impl ConsumerNamesRequest {
    /// Decodes the body as the server: only a body starting (after whitespace) with `{` or `[`
    /// is decoded (strictly, 10025 on errors); anything else is the default request.
    pub fn decode(body: &[u8]) -> Result<Self, ApiError> {
        match body
            .iter()
            .find(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
        {
            Some(b'{' | b'[') => decode_request(body),
            _ => Ok(Self::default()),
        }
    }

    /// The offset to use for `total` entries: clamped to `0..=total` (the server reports the
    /// clamped value as `offset`).
    pub fn offset(&self, total: usize) -> usize {
        usize::try_from(self.offset.max(0))
            .unwrap_or(usize::MAX)
            .min(total)
    }
}

/// CONSUMER.NAMES response: names sorted, paged by [`NAMES_LIMIT`]. No names is
/// `"consumers":[]` (unlike STREAM.NAMES), also in the error form with zero paging (observed).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsumerNamesResponse {
    /// `total` consumers.
    #[serde(default)]
    pub total: usize,
    /// `offset` of this page (clamped to `total`).
    #[serde(default)]
    pub offset: usize,
    /// `limit`: [`NAMES_LIMIT`].
    #[serde(default)]
    pub limit: usize,
    /// `consumers`.
    #[serde(default, deserialize_with = "null_as_default")]
    pub consumers: Vec<String>,
}

impl ApiResponse for ConsumerNamesResponse {
    const TYPE: &'static str = "io.nats.jetstream.api.v1.consumer_names_response";
    const ERROR_EXTRA: &'static str = r#","total":0,"offset":0,"limit":0,"consumers":[]"#;
}

/// CONSUMER.LIST response: [`ConsumerInfo`]s (config with static metadata only) sorted by
/// name, paged by [`LIST_LIMIT`]. No consumers is `"consumers":[]`, in the error form too.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsumerListResponse {
    /// `total` consumers.
    #[serde(default)]
    pub total: usize,
    /// `offset` of this page.
    #[serde(default)]
    pub offset: usize,
    /// `limit`: [`LIST_LIMIT`].
    #[serde(default)]
    pub limit: usize,
    /// `consumers`.
    #[serde(default, deserialize_with = "null_as_default")]
    pub consumers: Vec<ConsumerInfo>,
    /// `missing`: consumers that could not be read. Omitted when empty.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub missing: Vec<String>,
    /// `offline`: name → reason. Omitted when empty.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub offline: BTreeMap<String, String>,
}

impl ApiResponse for ConsumerListResponse {
    const TYPE: &'static str = "io.nats.jetstream.api.v1.consumer_list_response";
    const ERROR_EXTRA: &'static str = r#","total":0,"offset":0,"limit":0,"consumers":[]"#;
}

/// CONSUMER.PAUSE request: `{"pause_until":"<RFC 3339>"}`; `{}` (or a zero time) resumes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConsumerPauseRequest {
    /// `pause_until`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause_until: Option<Timestamp>,
}

/// CONSUMER.PAUSE response: `{"paused":true,"pause_until":"…","pause_remaining":ns}`, or
/// `{"paused":false,"pause_until":"0001-01-01T00:00:00Z"}` after a resume. The error form
/// repeats `"paused":false,"pause_until":"0001-01-01T00:00:00Z"` (observed).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsumerPauseResponse {
    /// `paused`. Always written.
    #[serde(default)]
    pub paused: bool,
    /// `pause_until`. Always written (zero time when not paused).
    #[serde(default)]
    pub pause_until: Timestamp,
    /// `pause_remaining` (ns). Omitted when 0.
    #[serde(default, with = "nanos", skip_serializing_if = "Duration::is_zero")]
    pub pause_remaining: Duration,
}

impl ApiResponse for ConsumerPauseResponse {
    const TYPE: &'static str = "io.nats.jetstream.api.v1.consumer_pause_response";
    const ERROR_EXTRA: &'static str = r#","paused":false,"pause_until":"0001-01-01T00:00:00Z""#;
}
