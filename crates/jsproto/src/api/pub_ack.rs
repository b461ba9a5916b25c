//! [`PubAck`]: the server's answer to a publish into a stream that had a reply subject.
//!
//! Exact bytes observed on nats-server 2.15.1 (note the space in `"duplicate": true` — the
//! server appends that part by hand — and that errors keep `stream` with `seq` 0):
//!
//! ```text
//! {"stream":"ORDERS","seq":1}
//! {"stream":"ORDERS","seq":2,"duplicate": true}
//! {"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 2"},"stream":"ORDERS","seq":0}
//! ```
//!
//! With a JetStream domain the success form is `{"stream":"S","domain":"D","seq":1}` (source).
//! PubAcks have no `type`. [`PubAck::encode`] and [`PubAck::encode_error`] write these bytes;
//! the serde impls are for reading any of them (client side) and write the same fields.

use serde::{Deserialize, Serialize};

use super::{to_json, ApiError};

/// A publish acknowledgement (or its error form).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PubAck {
    /// `error`, only in the error form.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ApiError>,
    /// `stream` that stored (or refused) the message.
    #[serde(default)]
    pub stream: String,
    /// `domain`; omitted when empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub domain: String,
    /// `seq` assigned (for a duplicate: the original's). 0 in the error form.
    #[serde(default)]
    pub seq: u64,
    /// `duplicate`: the `Nats-Msg-Id` was seen within the duplicate window; nothing was stored.
    /// Omitted when false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub duplicate: bool,
}

impl PubAck {
    /// A success ack for `seq` in `stream`.
    pub fn new(stream: impl Into<String>, seq: u64) -> Self {
        Self {
            stream: stream.into(),
            seq,
            ..Self::default()
        }
    }

    /// Whether this is the error form.
    pub fn is_error(&self) -> bool {
        self.error.is_some()
    }

    /// The server's bytes: `{"stream":…[,"domain":…],"seq":N[,"duplicate": true]}`, or, when
    /// `error` is set, the same as [`PubAck::encode_error`].
    pub fn encode(&self) -> Vec<u8> {
        if let Some(e) = &self.error {
            return Self::encode_error(&self.stream, e);
        }
        let mut out = Vec::with_capacity(48 + self.stream.len());
        out.extend_from_slice(b"{\"stream\":");
        out.extend_from_slice(&to_json(&self.stream));
        if !self.domain.is_empty() {
            out.extend_from_slice(b",\"domain\":");
            out.extend_from_slice(&to_json(&self.domain));
        }
        out.extend_from_slice(b",\"seq\":");
        out.extend_from_slice(self.seq.to_string().as_bytes());
        if self.duplicate {
            out.extend_from_slice(b",\"duplicate\": true");
        }
        out.push(b'}');
        out
    }

    /// The error form: `{"error":{…},"stream":"<stream>","seq":0}` (no domain, as the server).
    pub fn encode_error(stream: &str, error: &ApiError) -> Vec<u8> {
        let mut out = Vec::with_capacity(128 + stream.len());
        out.extend_from_slice(b"{\"error\":");
        out.extend_from_slice(&to_json(error));
        out.extend_from_slice(b",\"stream\":");
        out.extend_from_slice(&to_json(stream));
        out.extend_from_slice(b",\"seq\":0}");
        out
    }
}
