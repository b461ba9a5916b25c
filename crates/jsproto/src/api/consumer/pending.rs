//! `$JS.API.CONSUMER.PENDING.<stream>.<consumer>`: who holds what (jsserver's own; nats-server
//! has no such endpoint and does not answer it). Every delivered, unacknowledged message of a
//! consumer with the connection its last delivery went to, its delivery count and how long
//! ago that was, as Redis's `XPENDING` lists per consumer.
//!
//! ```json
//! {"type":"io.jsserver.api.v1.consumer_pending_response","total":2,"offset":0,"limit":1024,
//!  "pending":[{"stream_seq":7,"consumer_seq":9,"deliveries":2,"since":"2026-12-02T16:40:01.5Z",
//!              "age":1500000000,"holder":{"reply":"_INBOX.x.1","cid":5,"name":"w1",
//!              "addr":"127.0.0.1:53122"}},
//!             {"stream_seq":8,"consumer_seq":10,"deliveries":1,"since":"…","age":…,
//!              "queued":true,"holder":{"reply":"_INBOX.y.4"}}]}
//! ```

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::is_default;
use crate::api::{decode_request, nanos, ApiError, ApiResponse, Timestamp};

/// Most entries in one answer; `offset` pages through the rest.
pub const PENDING_LIMIT: usize = 1024;

/// CONSUMER.PENDING request: `{"offset":n}` (empty body: from the start).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsumerPendingRequest {
    /// How many entries (in stream-sequence order) to skip.
    #[serde(default, skip_serializing_if = "is_default")]
    pub offset: u64,
}

impl ConsumerPendingRequest {
    /// Reads a CONSUMER.PENDING body: empty → offset 0, else JSON.
    ///
    /// # Errors
    /// 10025 `invalid JSON: …`.
    pub fn parse(body: &[u8]) -> Result<u64, ApiError> {
        decode_request::<ConsumerPendingRequest>(body).map(|r| r.offset)
    }
}

/// Where a pending message's last delivery went.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Holder {
    /// The pull request's reply subject.
    pub reply: String,
    /// The connection subscribed to it now (`cid` as in `/connz`); absent when none is (the
    /// worker went away, or its inbox is gone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cid: Option<u64>,
    /// That connection's client name (CONNECT `name`), when it gave one.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// That connection's address, `ip:port`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub addr: String,
}

/// One pending message.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingEntry {
    /// Stream sequence.
    pub stream_seq: u64,
    /// Consumer sequence of its first delivery.
    pub consumer_seq: u64,
    /// Deliveries so far.
    pub deliveries: u32,
    /// When its ack-wait clock started (its last delivery or `+WPI`).
    pub since: Timestamp,
    /// How long ago that was (ns).
    #[serde(with = "nanos")]
    pub age: Duration,
    /// Waiting for redelivery (ack wait ran out, or NAKed): nobody works on it.
    #[serde(default, skip_serializing_if = "is_default")]
    pub queued: bool,
    /// Where its last delivery went; absent when not known (delivered before a restart).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holder: Option<Holder>,
}

/// CONSUMER.PENDING response.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsumerPendingResponse {
    /// Pending messages in all.
    pub total: u64,
    /// The request's offset.
    pub offset: u64,
    /// [`PENDING_LIMIT`].
    pub limit: u64,
    /// Up to `limit` entries from `offset`, by stream sequence.
    #[serde(default)]
    pub pending: Vec<PendingEntry>,
}

impl ApiResponse for ConsumerPendingResponse {
    const TYPE: &'static str = "io.jsserver.api.v1.consumer_pending_response";
    const ERROR_EXTRA: &'static str = r#","total":0,"offset":0,"limit":0,"pending":[]"#;
}
