//! `$JS.API.INFO`: the account's JetStream usage and limits (nats-server's
//! `JetStreamAccountStats`), type `io.nats.jetstream.api.v1.account_info_response`.
//!
//! Observed on nats-server 2.15.1 with no account limits configured:
//!
//! ```json
//! {"type":"io.nats.jetstream.api.v1.account_info_response","memory":0,"storage":0,
//!  "reserved_memory":0,"reserved_storage":0,"streams":0,"consumers":0,
//!  "limits":{"max_memory":-1,"max_storage":-1,"max_streams":-1,"max_consumers":-1,
//!            "max_ack_pending":-1,"memory_max_stream_bytes":-1,"storage_max_stream_bytes":-1,
//!            "max_bytes_required":false},
//!  "api":{"level":5,"total":0,"errors":0}}
//! ```
//!
//! JetStream disabled for the account: 10039 [`super::ApiError::not_enabled_for_account`] (503).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{null_as_default, ApiResponse, API_LEVEL};

/// `limits` of the account (all `-1` = unlimited, the standalone default).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccountLimits {
    /// `max_memory` bytes for memory streams.
    pub max_memory: i64,
    /// `max_storage` bytes for file streams.
    pub max_storage: i64,
    /// `max_streams`.
    pub max_streams: i64,
    /// `max_consumers`.
    pub max_consumers: i64,
    /// `max_ack_pending` cap for consumers.
    pub max_ack_pending: i64,
    /// `memory_max_stream_bytes`: cap on a memory stream's `max_bytes`.
    pub memory_max_stream_bytes: i64,
    /// `storage_max_stream_bytes`: cap on a file stream's `max_bytes`.
    pub storage_max_stream_bytes: i64,
    /// `max_bytes_required`: streams must set `max_bytes` (else 10113).
    pub max_bytes_required: bool,
}

impl Default for AccountLimits {
    /// Unlimited: every limit `-1`, `max_bytes_required` false (the server without account limits).
    fn default() -> Self {
        Self {
            max_memory: -1,
            max_storage: -1,
            max_streams: -1,
            max_consumers: -1,
            max_ack_pending: -1,
            memory_max_stream_bytes: -1,
            storage_max_stream_bytes: -1,
            max_bytes_required: false,
        }
    }
}

/// `api`: API level and request counters of the server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiStats {
    /// `level`: the JetStream API level the server implements ([`API_LEVEL`], 5).
    #[serde(default)]
    pub level: u32,
    /// `total` API requests since start (this one included, as the server counts it first).
    #[serde(default)]
    pub total: u64,
    /// `errors`: API requests answered with an error.
    #[serde(default)]
    pub errors: u64,
    /// `inflight` requests; omitted when 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub inflight: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Default for ApiStats {
    /// Level [`API_LEVEL`], counters 0.
    fn default() -> Self {
        Self {
            level: API_LEVEL,
            total: 0,
            errors: 0,
            inflight: 0,
        }
    }
}

/// Usage and limits of one tier (the account totals have the same shape; see `tiers`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccountTier {
    /// `memory` bytes used by memory streams.
    #[serde(default)]
    pub memory: u64,
    /// `storage` bytes used by file streams.
    #[serde(default)]
    pub storage: u64,
    /// `reserved_memory`: sum of memory streams' `max_bytes` (when set).
    #[serde(default)]
    pub reserved_memory: u64,
    /// `reserved_storage`: sum of file streams' `max_bytes` (when set).
    #[serde(default)]
    pub reserved_storage: u64,
    /// `streams` count.
    #[serde(default)]
    pub streams: u64,
    /// `consumers` count.
    #[serde(default)]
    pub consumers: u64,
    /// `limits`.
    #[serde(default)]
    pub limits: AccountLimits,
}

/// The `$JS.API.INFO` response body: usage, `limits`, optional `domain`, `api`, optional `tiers`
/// — fields in the server's order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccountInfo {
    /// Totals: `memory`, `storage`, `reserved_memory`, `reserved_storage`, `streams`,
    /// `consumers`, `limits` (flattened).
    #[serde(flatten)]
    pub usage: AccountTier,
    /// `domain`: the JetStream domain; omitted when empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub domain: String,
    /// `api`.
    #[serde(default)]
    pub api: ApiStats,
    /// `tiers` by name (e.g. `"R1"`); omitted when empty.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub tiers: BTreeMap<String, AccountTier>,
}

impl ApiResponse for AccountInfo {
    const TYPE: &'static str = "io.nats.jetstream.api.v1.account_info_response";
}
