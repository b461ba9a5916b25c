//! Publishing with JetStream's per-message headers: de-duplication and optimistic concurrency.

use bytes::Bytes;
use jsproto::headers::Headers;

// The publish header names, shared with the server (`jsproto::headers`), kept at this path.
pub use jsproto::headers::{
    EXPECTED_LAST_MSG_ID, EXPECTED_LAST_SEQUENCE, EXPECTED_LAST_SUBJECT_SEQUENCE, EXPECTED_STREAM,
    MSG_ID,
};

/// A JetStream publish with headers, sent by [`Context::send_publish`](super::Context::send_publish).
/// Shaped like async-nats's `Publish`:
///
/// ```no_run
/// # async fn f(js: jsclient::jetstream::Context) -> Result<(), jsclient::jetstream::PublishError> {
/// use jsclient::jetstream::Publish;
/// let ack = js
///     .send_publish(
///         "orders.1",
///         Publish::build()
///             .payload("new".into())
///             .message_id("order-1")
///             .expected_last_subject_sequence(0),
///     )
///     .await?
///     .await?;
/// if ack.duplicate {
///     println!("already stored as {}", ack.seq);
/// }
/// # Ok(()) }
/// ```
///
/// The server refuses a failed expectation with an error PubAck:
/// [`PublishError::Api`](super::PublishError::Api) with `err_code` `10071` (wrong last
/// sequence), `10070` (wrong last msg id) or `10060` (expected stream does not match).
#[derive(Debug, Clone, Default)]
#[must_use = "send it with Context::send_publish"]
pub struct Publish {
    pub(crate) payload: Bytes,
    pub(crate) headers: Vec<(String, String)>,
}

impl Publish {
    /// An empty message without headers.
    pub fn build() -> Publish {
        Publish::default()
    }

    /// The payload.
    pub fn payload(mut self, payload: Bytes) -> Self {
        self.payload = payload;
        self
    }

    /// Any header (replaces an earlier one of the same name).
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        let name = name.into();
        self.headers.retain(|(k, _)| *k != name);
        self.headers.push((name, value.into()));
        self
    }

    /// `Nats-Msg-Id`: a second publish with the same id within the stream's duplicate window
    /// is not stored; its PubAck has `duplicate: true` and the first one's sequence.
    pub fn message_id(self, id: impl Into<String>) -> Self {
        self.header(MSG_ID, id)
    }

    /// `Nats-Expected-Stream`: the subject must be captured by this stream.
    pub fn expected_stream(self, stream: impl Into<String>) -> Self {
        self.header(EXPECTED_STREAM, stream)
    }

    /// `Nats-Expected-Last-Sequence`: the stream's last sequence must be `seq`.
    pub fn expected_last_sequence(self, seq: u64) -> Self {
        self.header(EXPECTED_LAST_SEQUENCE, seq.to_string())
    }

    /// `Nats-Expected-Last-Subject-Sequence`: the last message on this subject must have
    /// sequence `seq` (0: no message on the subject yet).
    pub fn expected_last_subject_sequence(self, seq: u64) -> Self {
        self.header(EXPECTED_LAST_SUBJECT_SEQUENCE, seq.to_string())
    }

    /// `Nats-Expected-Last-Msg-Id`: the stream's last message must have this `Nats-Msg-Id`.
    pub fn expected_last_message_id(self, id: impl Into<String>) -> Self {
        self.header(EXPECTED_LAST_MSG_ID, id)
    }

    /// The header block, or the offending `name: value` if one is not a valid header.
    pub(crate) fn header_block(&self) -> Result<Option<Headers>, String> {
        if self.headers.is_empty() {
            return Ok(None);
        }
        let mut headers = Headers::new();
        for (k, v) in &self.headers {
            headers
                .insert(k.as_str(), v.as_str())
                .map_err(|e| format!("{k}: {v:?}: {e}"))?;
        }
        Ok(Some(headers))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builder_sets_the_jetstream_headers() {
        let p = Publish::build()
            .payload("x".into())
            .message_id("a")
            .message_id("b")
            .expected_stream("S")
            .expected_last_sequence(4)
            .expected_last_subject_sequence(0)
            .expected_last_message_id("z");
        let h = p.header_block().unwrap().unwrap();
        assert_eq!(h.get(MSG_ID), Some("b"));
        assert_eq!(h.get(EXPECTED_STREAM), Some("S"));
        assert_eq!(h.get(EXPECTED_LAST_SEQUENCE), Some("4"));
        assert_eq!(h.get(EXPECTED_LAST_SUBJECT_SEQUENCE), Some("0"));
        assert_eq!(h.get(EXPECTED_LAST_MSG_ID), Some("z"));
        assert_eq!(h.len(), 5);
        assert!(Publish::build().header_block().unwrap().is_none());
        assert!(Publish::build()
            .message_id("bad\r\nid")
            .header_block()
            .is_err());
    }
}
