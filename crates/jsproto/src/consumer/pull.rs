//! Pull requests (`$JS.API.CONSUMER.MSG.NEXT.<stream>.<consumer>` bodies) and the status
//! messages that answer them.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::time::Duration;

use serde::Deserialize;
use thiserror::Error;

use crate::duration::format_go_duration;
use crate::gojson::fold_keys;
use crate::headers::{LAST_CONSUMER, LAST_STREAM, PENDING_BYTES, PENDING_MESSAGES};

/// One pull request, parsed from a `CONSUMER.MSG.NEXT` body.
///
/// Units follow the protocol: `expires` and `idle_heartbeat` are nanoseconds on the wire and
/// [`Duration`]s here; `max_bytes` is bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullRequest {
    /// Maximum messages to deliver, at least 1 (`0`, negative or absent on the wire mean 1;
    /// nats-server ends such a request after one delivery).
    pub batch: u64,
    /// Give up this long after receipt with `408 Request Timeout`. `None` = never (wire `0` or
    /// absent). A negative wire value becomes `Some(Duration::ZERO)`: nats-server computes
    /// `receipt + expires` in the past, so the request times out at once.
    pub expires: Option<Duration>,
    /// Answer at once instead of waiting when nothing (more) can be delivered; see
    /// `consumer-semantics.md` §6.4.
    pub no_wait: bool,
    /// Byte budget (`subject + ack subject + headers + payload` per message); `None` = no
    /// budget (wire `0`, negative or absent).
    pub max_bytes: Option<u64>,
    /// Send `100 Idle Heartbeat` after this long without a delivery to this request; `None` =
    /// never (wire `0`, negative or absent).
    pub idle_heartbeat: Option<Duration>,
    /// The priority-group fields (nats-server's `PriorityGroup`): present for every JSON-object
    /// body, even one without any of them, and absent for an empty or integer body — nats-server
    /// checks them only then, so a plain `5` on a priority consumer is served like any pull.
    pub priority_group: Option<PriorityGroup>,
}

impl Default for PullRequest {
    /// `batch: 1`, nothing else: what an empty body means.
    fn default() -> Self {
        Self {
            batch: 1,
            expires: None,
            no_wait: false,
            max_bytes: None,
            idle_heartbeat: None,
            priority_group: None,
        }
    }
}

/// The priority-group fields of a pull request (ADR-42), as nats-server reads them: empty
/// strings and zeros where a field is absent.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct PriorityGroup {
    /// `group`: must be one of the consumer's `priority_groups` when it has a policy.
    pub group: String,
    /// `min_pending` (policy `overflow`): serve only while `num_pending` ≥ this; ≤ 0 = no limit.
    /// Any non-zero value on another policy is refused.
    pub min_pending: i64,
    /// `min_ack_pending` (policy `overflow`): serve only while `num_ack_pending` ≥ this; ≤ 0 =
    /// no limit. Any non-zero value on another policy is refused.
    pub min_ack_pending: i64,
    /// `id` (policy `pinned_client`): the pin id the client was given in `Nats-Pin-Id`.
    pub id: String,
    /// `priority` (policy `prioritized`): 0 (first) to 9; outside that range is refused on any
    /// consumer.
    pub priority: i64,
}

/// A pull request body nats-server answers with `400 Bad Request - <text>`.
///
/// `Display` gives the `<text>` part.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum PullError {
    /// The body starts with `{` but is not a valid request object. The text imitates Go's
    /// decoder where it matters to clients (`unexpected end of JSON input`) and is serde's
    /// message otherwise.
    #[error("{0}")]
    BadJson(String),
    /// `idle_heartbeat * 2 > expires` (also with no expiry at all). Equality is allowed.
    #[error("heartbeat value too large")]
    HeartbeatTooLarge,
}

#[derive(Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
struct WireRequest {
    batch: Option<i64>,
    expires: Option<i64>,
    no_wait: Option<bool>,
    max_bytes: Option<i64>,
    idle_heartbeat: Option<i64>,
    group: Option<String>,
    min_pending: Option<i64>,
    min_ack_pending: Option<i64>,
    id: Option<String>,
    priority: Option<i64>,
}

impl WireRequest {
    /// The JSON names of the fields, for [`fold_keys`] (a test checks them against the struct).
    const FIELDS: &'static [&'static str] = &[
        "batch",
        "expires",
        "no_wait",
        "max_bytes",
        "idle_heartbeat",
        "group",
        "min_pending",
        "min_ack_pending",
        "id",
        "priority",
    ];
}

impl PullRequest {
    /// Parses a pull request body as nats-server does (`consumer-semantics.md` §6.1):
    /// empty → batch 1; integer text (`5`, `+5`) → that batch; a JSON object → its fields
    /// (unknown fields ignored; keys in any case and a repeated key's last value count, as Go's
    /// decoder reads them); anything else → batch 1. Surrounding whitespace is ignored.
    ///
    /// # Errors
    /// [`PullError::BadJson`] for a malformed object, [`PullError::HeartbeatTooLarge`] when
    /// `idle_heartbeat * 2 > expires`.
    pub fn parse(body: &[u8]) -> Result<Self, PullError> {
        let body = body.trim_ascii();
        if body.first() != Some(&b'{') {
            let batch = std::str::from_utf8(body)
                .ok()
                .and_then(|s| s.parse::<i64>().ok())
                .unwrap_or(1);
            return Ok(Self {
                batch: positive(batch).unwrap_or(1),
                ..Self::default()
            });
        }
        let bad_json = |e: serde_json::Error| PullError::BadJson(go_json_text(&e));
        // Keys are matched as Go's decoder matches them (any case; a repeated key keeps its
        // last value), then serde reads the fields.
        let wire: WireRequest = match serde_json::from_slice(body).map_err(bad_json)? {
            serde_json::Value::Object(object) => serde_json::from_value(serde_json::Value::Object(
                fold_keys(object, WireRequest::FIELDS),
            ))
            .map_err(bad_json)?,
            // The body starts with `{`, so it parsed as an object or not at all.
            other => serde_json::from_value(other).map_err(bad_json)?,
        };
        let expires_ns = wire.expires.unwrap_or(0);
        let hb_ns = wire.idle_heartbeat.unwrap_or(0);
        if hb_ns > 0 && i128::from(hb_ns) * 2 > i128::from(expires_ns) {
            return Err(PullError::HeartbeatTooLarge);
        }
        Ok(Self {
            batch: positive(wire.batch.unwrap_or(0)).unwrap_or(1),
            expires: match expires_ns {
                0 => None,
                n => Some(Duration::from_nanos(u64::try_from(n).unwrap_or(0))),
            },
            no_wait: wire.no_wait.unwrap_or(false),
            max_bytes: positive(wire.max_bytes.unwrap_or(0)),
            idle_heartbeat: positive(hb_ns).map(Duration::from_nanos),
            priority_group: Some(PriorityGroup {
                group: wire.group.unwrap_or_default(),
                min_pending: wire.min_pending.unwrap_or(0),
                min_ack_pending: wire.min_ack_pending.unwrap_or(0),
                id: wire.id.unwrap_or_default(),
                priority: wire.priority.unwrap_or(0),
            }),
        })
    }
}

/// The last pull request body a consumer parsed, and what it parsed to.
///
/// Clients send the same body with every fetch (async-nats:
/// `{"batch":1,"expires":30000000000,...}`), and parsing it with serde_json was about a tenth
/// of the server's instructions per message when workers fetch one message at a time
/// (callgrind, `cargo xtask bench --only drain:1:1`). A body equal byte for byte to the last
/// one reuses its result; anything else is parsed and becomes the new last body. Only bodies
/// of at most [`PullMemo::MAX_BODY`] bytes that parsed without error are kept.
#[derive(Debug, Clone, Default)]
pub(crate) struct PullMemo {
    last: Option<(Box<[u8]>, PullRequest)>,
}

impl PullMemo {
    /// Longest body kept. Real clients' bodies are well under 200 bytes.
    pub(crate) const MAX_BODY: usize = 256;

    /// [`PullRequest::parse`], answered from the last body when `body` equals it.
    pub(crate) fn parse(&mut self, body: &[u8]) -> Result<PullRequest, PullError> {
        if let Some((last, req)) = &self.last {
            if **last == *body {
                return Ok(req.clone());
            }
        }
        let parsed = PullRequest::parse(body)?;
        if body.len() <= Self::MAX_BODY {
            self.last = Some((body.into(), parsed.clone()));
        }
        Ok(parsed)
    }
}

fn positive(n: i64) -> Option<u64> {
    u64::try_from(n).ok().filter(|&n| n > 0)
}

fn go_json_text(e: &serde_json::Error) -> String {
    if e.is_eof() {
        return "unexpected end of JSON input".to_owned();
    }
    // serde appends " at line L column C"; Go's decoder does not.
    let text = e.to_string();
    match text.rfind(" at line ") {
        Some(i) => text[..i].to_owned(),
        None => text,
    }
}

/// `Nats-Pending-Messages` / `Nats-Pending-Bytes`: what a request had left when it ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Leftover {
    /// Batch count not yet delivered to the request.
    pub messages: u64,
    /// Unused byte budget (0 when the request had no `max_bytes`).
    pub bytes: u64,
}

/// A status message sent to a pull request's reply subject: an `HMSG` with this header block
/// and no payload. [`PullStatus::header_block`] renders the exact bytes nats-server sends.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PullStatus {
    /// `100 Idle Heartbeat` with `Nats-Last-Consumer` / `Nats-Last-Stream` (the consumer's
    /// `delivered` pair). Not terminal.
    IdleHeartbeat {
        /// Last consumer sequence delivered by the consumer.
        last_consumer_seq: u64,
        /// Last stream sequence delivered by the consumer.
        last_stream_seq: u64,
    },
    /// `400 Bad Request - <text>`.
    BadRequest(String),
    /// `404 No Messages` (no_wait with nothing (more) to deliver).
    NoMessages,
    /// `408 Request Timeout` with pending headers: the request's `expires` passed.
    RequestTimeout(Leftover),
    /// `408 Requests Pending`: a no_wait request finds fewer messages than the batches
    /// already waiting.
    RequestsPending,
    /// `409 Exceeded MaxWaiting`: the waiting queue is full.
    ExceededMaxWaiting,
    /// `409 Exceeded MaxRequestBatch of <n>`.
    ExceededMaxRequestBatch(u64),
    /// `409 Exceeded MaxRequestExpires of <go duration>`.
    ExceededMaxRequestExpires(Duration),
    /// `409 Exceeded MaxRequestMaxBytes of <n>`.
    ExceededMaxRequestMaxBytes(u64),
    /// `409 Message Size Exceeds MaxBytes` with pending headers: the next message does not fit
    /// the remaining byte budget.
    MessageSizeExceedsMaxBytes(Leftover),
    /// `409 Batch Completed` with pending headers: batch filled with byte budget left.
    BatchCompleted(Leftover),
    /// `409 Consumer Deleted`.
    ConsumerDeleted,
    /// `409 Consumer is push based`: a pull request (or `+NXT`) on a push consumer.
    ConsumerIsPushBased,
    /// `409 Server Shutdown` with pending headers.
    ServerShutdown(Leftover),
    /// `409 Leadership Change` (clustered servers only; here for completeness).
    LeadershipChange,
    /// `412 Required Api Level` (request header `Nats-Required-Api-Level` above ours; checked
    /// by the server, which sees headers).
    RequiredApiLevel,
    /// `400 Bad Request - Not a Overflow Priority consumer` (`min_pending`/`min_ack_pending`
    /// on a consumer without the overflow policy).
    NotOverflowConsumer,
    /// `400 Bad Request - Not a Pinned Client Priority consumer` (`id` on a non-pinned
    /// consumer).
    NotPinnedConsumer,
    /// `400 Bad Request - Priority must be between 0 and 9` (any consumer).
    PriorityOutOfRange,
    /// `400 Bad Request - Priority Group missing` (a JSON request without `group` on a
    /// consumer with a priority policy).
    PriorityGroupMissing,
    /// `400 Bad Request - Invalid Priority Group` (a `group` the consumer does not have).
    InvalidPriorityGroup,
    /// `423 Nats-Pin-Id mismatch`: a request arrived with an `id` other than the current pin.
    PinIdMismatch,
    /// `423 Nats-Wrong-Pin-Id` with pending headers: a waiting request's `id` is no longer the
    /// pin (it timed out or was unpinned) when a message comes up for it.
    WrongPinId(Leftover),
}

impl PullStatus {
    /// The status code (`100`, `400`, `404`, `408`, `409`, `412`, `423`).
    pub fn code(&self) -> u16 {
        match self {
            PullStatus::IdleHeartbeat { .. } => 100,
            PullStatus::BadRequest(_)
            | PullStatus::NotOverflowConsumer
            | PullStatus::NotPinnedConsumer
            | PullStatus::PriorityOutOfRange
            | PullStatus::PriorityGroupMissing
            | PullStatus::InvalidPriorityGroup => 400,
            PullStatus::PinIdMismatch | PullStatus::WrongPinId(_) => 423,
            PullStatus::NoMessages => 404,
            PullStatus::RequestTimeout(_) | PullStatus::RequestsPending => 408,
            PullStatus::RequiredApiLevel => 412,
            _ => 409,
        }
    }

    /// The description after the code, exactly as nats-server writes it.
    pub fn description(&self) -> Cow<'static, str> {
        match self {
            PullStatus::IdleHeartbeat { .. } => "Idle Heartbeat".into(),
            PullStatus::BadRequest(text) => format!("Bad Request - {text}").into(),
            PullStatus::NoMessages => "No Messages".into(),
            PullStatus::RequestTimeout(_) => "Request Timeout".into(),
            PullStatus::RequestsPending => "Requests Pending".into(),
            PullStatus::ExceededMaxWaiting => "Exceeded MaxWaiting".into(),
            PullStatus::ExceededMaxRequestBatch(n) => {
                format!("Exceeded MaxRequestBatch of {n}").into()
            }
            PullStatus::ExceededMaxRequestExpires(d) => {
                format!("Exceeded MaxRequestExpires of {}", format_go_duration(*d)).into()
            }
            PullStatus::ExceededMaxRequestMaxBytes(n) => {
                format!("Exceeded MaxRequestMaxBytes of {n}").into()
            }
            PullStatus::MessageSizeExceedsMaxBytes(_) => "Message Size Exceeds MaxBytes".into(),
            PullStatus::BatchCompleted(_) => "Batch Completed".into(),
            PullStatus::ConsumerDeleted => "Consumer Deleted".into(),
            PullStatus::ConsumerIsPushBased => "Consumer is push based".into(),
            PullStatus::ServerShutdown(_) => "Server Shutdown".into(),
            PullStatus::LeadershipChange => "Leadership Change".into(),
            PullStatus::RequiredApiLevel => "Required Api Level".into(),
            PullStatus::NotOverflowConsumer => {
                "Bad Request - Not a Overflow Priority consumer".into()
            }
            PullStatus::NotPinnedConsumer => {
                "Bad Request - Not a Pinned Client Priority consumer".into()
            }
            PullStatus::PriorityOutOfRange => {
                "Bad Request - Priority must be between 0 and 9".into()
            }
            PullStatus::PriorityGroupMissing => "Bad Request - Priority Group missing".into(),
            PullStatus::InvalidPriorityGroup => "Bad Request - Invalid Priority Group".into(),
            PullStatus::PinIdMismatch => "Nats-Pin-Id mismatch".into(),
            PullStatus::WrongPinId(_) => "Nats-Wrong-Pin-Id".into(),
        }
    }

    /// Whether the status ends the pull request (everything but the heartbeat).
    pub fn is_terminal(&self) -> bool {
        !matches!(self, PullStatus::IdleHeartbeat { .. })
    }

    /// The pending headers this status carries, if any.
    pub fn leftover(&self) -> Option<Leftover> {
        match self {
            PullStatus::RequestTimeout(l)
            | PullStatus::MessageSizeExceedsMaxBytes(l)
            | PullStatus::BatchCompleted(l)
            | PullStatus::ServerShutdown(l)
            | PullStatus::WrongPinId(l) => Some(*l),
            _ => None,
        }
    }

    /// Appends the header block, e.g.
    /// `NATS/1.0 408 Request Timeout\r\nNats-Pending-Messages: 2\r\nNats-Pending-Bytes: 0\r\n\r\n`
    /// (byte-for-byte what nats-server 2.15.1 sends, `consumer-semantics.md` §6.5).
    pub fn write_header_block(&self, dst: &mut String) {
        let _ = write!(dst, "NATS/1.0 {} {}\r\n", self.code(), self.description());
        if let PullStatus::IdleHeartbeat {
            last_consumer_seq,
            last_stream_seq,
        } = self
        {
            let _ = write!(
                dst,
                "{LAST_CONSUMER}: {last_consumer_seq}\r\n{LAST_STREAM}: {last_stream_seq}\r\n"
            );
        }
        if let Some(l) = self.leftover() {
            let _ = write!(
                dst,
                "{PENDING_MESSAGES}: {}\r\n{PENDING_BYTES}: {}\r\n",
                l.messages, l.bytes
            );
        }
        dst.push_str("\r\n");
    }

    /// The header block as bytes (see [`PullStatus::write_header_block`]).
    pub fn header_block(&self) -> Vec<u8> {
        let mut s = String::with_capacity(96);
        self.write_header_block(&mut s);
        s.into_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies() {
        assert_eq!(PullRequest::parse(b"").unwrap(), PullRequest::default());
        assert_eq!(PullRequest::parse(b" 5 ").unwrap().batch, 5);
        assert_eq!(PullRequest::parse(b"-5").unwrap().batch, 1);
        assert_eq!(
            PullRequest::parse(b"hello").unwrap(),
            PullRequest::default()
        );
        let r =
            PullRequest::parse(br#"{"batch": 2, "expires": 999900000, "no_wait": true, "x": [1]}"#)
                .unwrap();
        assert_eq!(
            (r.batch, r.expires, r.no_wait),
            (2, Some(Duration::from_nanos(999_900_000)), true)
        );
        let r = PullRequest::parse(
            br#"{"batch":500,"expires":30000000000,"idle_heartbeat":15000000000}"#,
        )
        .unwrap();
        assert_eq!(r.idle_heartbeat, Some(Duration::from_secs(15)));
        let r = PullRequest::parse(br#"{"batch":0,"expires":-1,"max_bytes":-3}"#).unwrap();
        assert_eq!(
            (r.batch, r.expires, r.max_bytes),
            (1, Some(Duration::ZERO), None)
        );
    }

    #[test]
    fn bad_bodies() {
        assert_eq!(
            PullRequest::parse(b"{\"batch\":").unwrap_err().to_string(),
            "unexpected end of JSON input"
        );
        assert!(matches!(
            PullRequest::parse(br#"{"batch":"x"}"#),
            Err(PullError::BadJson(_))
        ));
        assert!(matches!(
            PullRequest::parse(br#"{"batch":1.5}"#),
            Err(PullError::BadJson(_))
        ));
        assert_eq!(
            PullRequest::parse(br#"{"idle_heartbeat":1000}"#),
            Err(PullError::HeartbeatTooLarge)
        );
        assert_eq!(
            PullRequest::parse(br#"{"idle_heartbeat":1001,"expires":2000}"#),
            Err(PullError::HeartbeatTooLarge)
        );
        assert!(PullRequest::parse(br#"{"idle_heartbeat":1000,"expires":2000}"#).is_ok());
    }

    #[test]
    fn status_bytes() {
        let hb = |s: PullStatus| String::from_utf8(s.header_block()).unwrap();
        assert_eq!(
            hb(PullStatus::NoMessages),
            "NATS/1.0 404 No Messages\r\n\r\n"
        );
        assert_eq!(
            hb(PullStatus::RequestTimeout(Leftover { messages: 2, bytes: 0 })),
            "NATS/1.0 408 Request Timeout\r\nNats-Pending-Messages: 2\r\nNats-Pending-Bytes: 0\r\n\r\n"
        );
        assert_eq!(
            hb(PullStatus::MessageSizeExceedsMaxBytes(Leftover { messages: 8, bytes: 6 })),
            "NATS/1.0 409 Message Size Exceeds MaxBytes\r\nNats-Pending-Messages: 8\r\nNats-Pending-Bytes: 6\r\n\r\n"
        );
        assert_eq!(
            hb(PullStatus::BatchCompleted(Leftover { messages: 0, bytes: 953 })),
            "NATS/1.0 409 Batch Completed\r\nNats-Pending-Messages: 0\r\nNats-Pending-Bytes: 953\r\n\r\n"
        );
        assert_eq!(
            hb(PullStatus::ExceededMaxWaiting),
            "NATS/1.0 409 Exceeded MaxWaiting\r\n\r\n"
        );
        assert_eq!(
            hb(PullStatus::ConsumerDeleted),
            "NATS/1.0 409 Consumer Deleted\r\n\r\n"
        );
        assert_eq!(
            hb(PullStatus::ConsumerIsPushBased),
            "NATS/1.0 409 Consumer is push based\r\n\r\n"
        );
        assert_eq!(
            hb(PullStatus::IdleHeartbeat {
                last_consumer_seq: 0,
                last_stream_seq: 10
            }),
            "NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: 0\r\nNats-Last-Stream: 10\r\n\r\n"
        );
        assert_eq!(
            hb(PullStatus::BadRequest("heartbeat value too large".into())),
            "NATS/1.0 400 Bad Request - heartbeat value too large\r\n\r\n"
        );
        assert_eq!(
            hb(PullStatus::ExceededMaxRequestExpires(Duration::from_secs(
                2
            ))),
            "NATS/1.0 409 Exceeded MaxRequestExpires of 2s\r\n\r\n"
        );
        assert_eq!(
            hb(PullStatus::ExceededMaxRequestBatch(5)),
            "NATS/1.0 409 Exceeded MaxRequestBatch of 5\r\n\r\n"
        );
    }

    #[test]
    fn memo_answers_as_parse_does() {
        let mut memo = PullMemo::default();
        let bodies: [&[u8]; 7] = [
            br#"{"batch":1,"expires":30000000000}"#,
            br#"{"batch":1,"expires":30000000000}"#,
            br#"{"batch":2,"expires":30000000000}"#,
            br#"{"batch":1,"idle_heartbeat":5}"#,
            br#"{"batch":2,"expires":30000000000}"#,
            b"",
            br#"{"batch":"#,
        ];
        for body in bodies.iter().chain(bodies.iter().rev()) {
            assert_eq!(memo.parse(body), PullRequest::parse(body), "{body:?}");
        }
        // An error is not kept: the last good body is still the one reused.
        assert!(memo.parse(br#"{"batch":"#).is_err());
        assert_eq!(memo.last.as_ref().map(|(b, _)| &**b), Some(bodies[0]));
        // A body longer than MAX_BODY is parsed every time and not kept.
        let long = format!(
            r#"{{"batch":7,"group":"{}"}}"#,
            "g".repeat(PullMemo::MAX_BODY)
        );
        assert_eq!(memo.parse(long.as_bytes()).unwrap().batch, 7);
        assert_eq!(memo.last.as_ref().map(|(b, _)| &**b), Some(bodies[0]));
    }

    #[test]
    fn keys_are_read_as_go_reads_them() {
        // nats-server 2.15.1 delivered 2 messages for each of these (probed side by side).
        let req = PullRequest::parse(br#"{"BATCH":2,"No_Wait":true}"#).unwrap();
        assert_eq!((req.batch, req.no_wait), (2, true));
        let req = PullRequest::parse(br#"{"batch":1,"no_wait":true,"batch":2}"#).unwrap();
        assert_eq!((req.batch, req.no_wait), (2, true));
    }

    #[test]
    fn wire_request_fields_list_every_field() {
        let all = WireRequest {
            batch: Some(1),
            expires: Some(1),
            no_wait: Some(true),
            max_bytes: Some(1),
            idle_heartbeat: Some(1),
            group: Some(String::new()),
            min_pending: Some(1),
            min_ack_pending: Some(1),
            id: Some(String::new()),
            priority: Some(1),
        };
        let serde_json::Value::Object(keys) = serde_json::to_value(all).unwrap() else {
            unreachable!("a struct serializes as an object");
        };
        let mut keys: Vec<&str> = keys.keys().map(String::as_str).collect();
        let mut fields = WireRequest::FIELDS.to_vec();
        keys.sort_unstable();
        fields.sort_unstable();
        assert_eq!(keys, fields);
    }
}
