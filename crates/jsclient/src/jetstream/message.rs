//! A message delivered by a consumer: payload, headers, metadata and acknowledgements.

use std::ops::Deref;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use jsproto::consumer::AckSubject;

use super::Context;
use crate::{ClientError, RequestError};

/// How to acknowledge a message (the ack payloads of `consumer-semantics.md` §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckKind {
    /// `+ACK`: done.
    Ack,
    /// `-NAK`: redeliver, after the delay if one is given (`-NAK {"delay":<ns>}`).
    Nak(Option<Duration>),
    /// `+WPI`: still working; restarts the ack-wait clock.
    Progress,
    /// `+TERM`: never redeliver.
    Term,
}

impl AckKind {
    fn payload(self) -> Bytes {
        match self {
            AckKind::Ack => Bytes::from_static(b"+ACK"),
            AckKind::Nak(None) => Bytes::from_static(b"-NAK"),
            AckKind::Nak(Some(d)) => Bytes::from(format!(
                "-NAK {{\"delay\":{}}}",
                jsproto::api::nanos::to_i64(d)
            )),
            AckKind::Progress => Bytes::from_static(b"+WPI"),
            AckKind::Term => Bytes::from_static(b"+TERM"),
        }
    }
}

/// Why an acknowledgement failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AckError {
    /// The message has no reply subject, so it cannot be acknowledged.
    #[error("message has no reply subject")]
    NoReplySubject,
    /// The ack could not be sent.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// [`Message::double_ack`]: the server did not confirm in time.
    #[error("ack not confirmed: {0}")]
    Request(RequestError),
}

/// The reply subject is not a `$JS.ACK…` subject (not a JetStream delivery).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a JetStream ack subject: {0:?}")]
pub struct NotJetStream(pub Option<String>);

/// Metadata from the ack subject
/// `$JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.<consumer seq>.<timestamp>.<pending>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Info {
    /// JetStream domain (v2 ack subjects only; `None` for v1 or domain `_`).
    pub domain: Option<String>,
    /// Stream name.
    pub stream: String,
    /// Consumer name.
    pub consumer: String,
    /// Delivery count: 1 on the first delivery, 2 on the first redelivery, …
    pub delivered: u64,
    /// The message's stream sequence.
    pub stream_sequence: u64,
    /// The consumer sequence of this delivery (each redelivery gets a new one).
    pub consumer_sequence: u64,
    /// Messages left for the consumer after this one.
    pub pending: u64,
    /// When the message was stored, as Unix nanoseconds.
    pub timestamp_unix_nanos: u64,
}

impl Info {
    /// When the message was stored.
    pub fn published(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_nanos(self.timestamp_unix_nanos)
    }
}

/// A consumer delivery: the core [`crate::Message`] (reachable through `Deref`: `subject`,
/// `payload`, `headers`) plus acknowledgement methods.
#[derive(Debug, Clone)]
pub struct Message {
    /// The delivered message; `reply` is its `$JS.ACK…` subject.
    pub message: crate::Message,
    pub(crate) context: Context,
}

impl Deref for Message {
    type Target = crate::Message;

    fn deref(&self) -> &crate::Message {
        &self.message
    }
}

impl Message {
    /// Parses the ack subject into [`Info`].
    ///
    /// # Errors
    ///
    /// [`NotJetStream`] when the reply subject is absent or not an ack subject.
    pub fn info(&self) -> Result<Info, NotJetStream> {
        let reply = self.message.reply.as_deref();
        let ack = reply
            .and_then(|r| AckSubject::parse(r.as_bytes()))
            .ok_or_else(|| NotJetStream(reply.map(str::to_owned)))?;
        Ok(Info {
            domain: ack.domain.filter(|d| *d != "_").map(str::to_owned),
            stream: ack.stream.to_owned(),
            consumer: ack.consumer.to_owned(),
            delivered: ack.tokens.delivery_count,
            stream_sequence: ack.tokens.stream_seq,
            consumer_sequence: ack.tokens.consumer_seq,
            pending: ack.tokens.num_pending,
            timestamp_unix_nanos: ack.tokens.timestamp_unix_ns,
        })
    }

    fn reply(&self) -> Result<&str, AckError> {
        self.message
            .reply
            .as_deref()
            .ok_or(AckError::NoReplySubject)
    }

    /// Acknowledges (`+ACK`) without waiting for the server.
    ///
    /// # Errors
    ///
    /// [`AckError::NoReplySubject`], [`AckError::Client`].
    pub async fn ack(&self) -> Result<(), AckError> {
        self.ack_with(AckKind::Ack).await
    }

    /// Sends the given acknowledgement without waiting for the server.
    ///
    /// # Errors
    ///
    /// As [`Message::ack`].
    pub async fn ack_with(&self, kind: AckKind) -> Result<(), AckError> {
        let reply = self.reply()?.to_owned();
        self.context
            .client()
            .publish(reply, kind.payload())
            .await
            .map_err(AckError::from)
    }

    /// Acknowledges and waits until the server confirms it stored the ack (an empty reply), up
    /// to the context timeout.
    ///
    /// # Errors
    ///
    /// [`AckError::Request`] when no confirmation arrives; as [`Message::ack`] otherwise.
    pub async fn double_ack(&self) -> Result<(), AckError> {
        let reply = self.reply()?.to_owned();
        self.context
            .client()
            .request_full(reply, None, AckKind::Ack.payload(), self.context.timeout())
            .await
            .map(|_| ())
            .map_err(AckError::Request)
    }

    /// `-NAK`: redeliver to the next pull, ahead of new messages.
    ///
    /// # Errors
    ///
    /// As [`Message::ack`].
    pub async fn nak(&self) -> Result<(), AckError> {
        self.ack_with(AckKind::Nak(None)).await
    }

    /// `-NAK {"delay":<ns>}`: redeliver no sooner than `delay` from now.
    ///
    /// # Errors
    ///
    /// As [`Message::ack`].
    pub async fn nak_with_delay(&self, delay: Duration) -> Result<(), AckError> {
        self.ack_with(AckKind::Nak(Some(delay))).await
    }

    /// `+WPI`: still working; restarts the ack-wait clock.
    ///
    /// # Errors
    ///
    /// As [`Message::ack`].
    pub async fn in_progress(&self) -> Result<(), AckError> {
        self.ack_with(AckKind::Progress).await
    }

    /// `+TERM`: never redeliver.
    ///
    /// # Errors
    ///
    /// As [`Message::ack`].
    pub async fn term(&self) -> Result<(), AckError> {
        self.ack_with(AckKind::Term).await
    }
}
