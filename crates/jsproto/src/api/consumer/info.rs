//! [`ConsumerInfo`]: a consumer's config and state as CREATE, INFO and LIST show it, with its
//! parts ([`SequenceInfo`], [`PriorityGroupState`]) and the wall-clock times the caller
//! supplies ([`ConsumerTimes`]).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::config::ConsumerConfig;
use super::is_default;
use crate::api::stream::ClusterInfo;
use crate::api::{nanos, null_as_default, Timestamp};
use crate::consumer::{ConsumerState, SequencePair};

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
