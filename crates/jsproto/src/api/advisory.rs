//! JetStream advisories: the events a server publishes under `$JS.EVENT.ADVISORY.…` when a
//! stream or consumer is created, updated or deleted, and when a consumer gives up on a
//! message. Pure data: the subject and the JSON body; the server decides whether anyone
//! listens, draws the `id` and reads the clock.
//!
//! Subjects and bodies are those nats-server 2.15.1 publishes, as observed on the wire by
//! subscribing to `$JS.EVENT.>` (`shared/reference/jetstream-api.md` §7):
//!
//! | subject | `type` (`io.nats.jetstream.advisory.v1.…`) | body fields besides `type`, `id`, `timestamp` |
//! | --- | --- | --- |
//! | `STREAM.{CREATED,UPDATED,DELETED}.<stream>` | `stream_action` | `stream`, `action` (`create`/`modify`/`delete`) |
//! | `CONSUMER.{CREATED,DELETED}.<stream>.<consumer>` | `consumer_action` | `stream`, `consumer`, `action` (`create`/`delete`) |
//! | `CONSUMER.MAX_DELIVERIES.<stream>.<consumer>` | `max_deliver` | `stream`, `consumer`, `stream_seq`, `deliveries` |
//! | `CONSUMER.MSG_TERMINATED.<stream>.<consumer>` | `terminated` | `stream`, `consumer`, `consumer_seq`, `stream_seq`, `deliveries`, `reason` (left out when empty) |
//! | `CONSUMER.MSG_NAKED.<stream>.<consumer>` | `nak` | `stream`, `consumer`, `consumer_seq`, `stream_seq`, `deliveries` |
//!
//! `id` is a unique 22-character id (nats-server uses a NUID), `timestamp` the time of the
//! event as RFC 3339 in UTC with nanoseconds, trailing zeros dropped ([`Timestamp`]'s
//! `Display`, Go's `time.RFC3339Nano`). The stream action bodies carry no config (nats-server's
//! `template` field is empty and left out). Field order follows nats-server's output; clients
//! must not depend on it.

use std::fmt::Write as _;

use serde::Serialize;

use super::time::Timestamp;
use super::to_json;
use crate::consumer::Advisory;

/// Every advisory subject starts with this.
pub const ADVISORY_PREFIX: &str = "$JS.EVENT.ADVISORY.";

/// What happened to a stream (`$JS.EVENT.ADVISORY.STREAM.<kind>.<stream>`).
///
/// As nats-server: `Create` only when a stream is really created (not for a repeated create
/// with the same config), `Modify` after a successful `STREAM.UPDATE`, `Delete` after
/// `STREAM.DELETE`, following the `DELETED` advisories of its consumers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamAction {
    /// `STREAM.CREATED`, `"action":"create"`.
    Create,
    /// `STREAM.UPDATED`, `"action":"modify"`.
    Modify,
    /// `STREAM.DELETED`, `"action":"delete"`.
    Delete,
}

impl StreamAction {
    fn subject_kind(self) -> &'static str {
        match self {
            StreamAction::Create => "CREATED",
            StreamAction::Modify => "UPDATED",
            StreamAction::Delete => "DELETED",
        }
    }

    fn action(self) -> &'static str {
        match self {
            StreamAction::Create => "create",
            StreamAction::Modify => "modify",
            StreamAction::Delete => "delete",
        }
    }
}

/// What happened to a consumer (`$JS.EVENT.ADVISORY.CONSUMER.<kind>.<stream>.<consumer>`).
///
/// As nats-server: `Create` only for a new consumer (a repeated create or an update of an
/// existing one publishes nothing), `Delete` for `CONSUMER.DELETE`, for a consumer removed
/// after its `inactive_threshold`, and for each consumer of a deleted stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsumerAction {
    /// `CONSUMER.CREATED`, `"action":"create"`.
    Create,
    /// `CONSUMER.DELETED`, `"action":"delete"`.
    Delete,
}

impl ConsumerAction {
    fn subject_kind(self) -> &'static str {
        match self {
            ConsumerAction::Create => "CREATED",
            ConsumerAction::Delete => "DELETED",
        }
    }

    fn action(self) -> &'static str {
        match self {
            ConsumerAction::Create => "create",
            ConsumerAction::Delete => "delete",
        }
    }
}

/// One advisory, borrowing the names it is about.
#[derive(Debug, Clone, Copy)]
pub enum JsAdvisory<'a> {
    /// A stream was created, updated or deleted.
    Stream {
        /// What happened.
        action: StreamAction,
        /// Stream name.
        stream: &'a str,
    },
    /// A consumer was created or deleted.
    Consumer {
        /// What happened.
        action: ConsumerAction,
        /// Stream name.
        stream: &'a str,
        /// Consumer name.
        consumer: &'a str,
    },
    /// A consumer was paused or resumed (`CONSUMER.PAUSE`, or created or updated with a
    /// `pause_until` ahead): `$JS.EVENT.ADVISORY.CONSUMER.PAUSE.<stream>.<consumer>`, type
    /// `consumer_pause`, with `paused` and the `pause_until` asked for (the zero time on a
    /// resume), as nats-server 2.15.1 (observed).
    Pause {
        /// Stream name.
        stream: &'a str,
        /// Consumer name.
        consumer: &'a str,
        /// Whether the consumer is paused now.
        paused: bool,
        /// The `pause_until` asked for.
        pause_until: Timestamp,
    },
    /// A consumer's message event, as the consumer state machine reports it
    /// ([`crate::consumer::Action::Advisory`]).
    Message {
        /// Stream name.
        stream: &'a str,
        /// Consumer name.
        consumer: &'a str,
        /// The event.
        advisory: &'a Advisory,
    },
}

impl JsAdvisory<'_> {
    /// Appends the subject to `out` (cleared first), e.g.
    /// `$JS.EVENT.ADVISORY.CONSUMER.MSG_NAKED.ORDERS.shipping`.
    pub fn write_subject(&self, out: &mut String) {
        out.clear();
        out.push_str(ADVISORY_PREFIX);
        let _ = match self {
            JsAdvisory::Stream { action, stream } => {
                write!(out, "STREAM.{}.{stream}", action.subject_kind())
            }
            JsAdvisory::Consumer {
                action,
                stream,
                consumer,
            } => write!(
                out,
                "CONSUMER.{}.{stream}.{consumer}",
                action.subject_kind()
            ),
            JsAdvisory::Pause {
                stream, consumer, ..
            } => write!(out, "CONSUMER.PAUSE.{stream}.{consumer}"),
            JsAdvisory::Message {
                stream,
                consumer,
                advisory,
            } => {
                let kind = match advisory {
                    Advisory::MaxDeliver { .. } => "MAX_DELIVERIES",
                    Advisory::Terminated { .. } => "MSG_TERMINATED",
                    Advisory::Nak { .. } => "MSG_NAKED",
                    Advisory::Pinned { .. } => "PINNED",
                    Advisory::Unpinned { .. } => "UNPINNED",
                };
                write!(out, "CONSUMER.{kind}.{stream}.{consumer}")
            }
        };
    }

    /// The subject as a new string ([`JsAdvisory::write_subject`]).
    pub fn subject(&self) -> String {
        let mut s = String::with_capacity(64);
        self.write_subject(&mut s);
        s
    }

    /// The `type` string, e.g. `io.nats.jetstream.advisory.v1.stream_action`.
    pub fn type_name(&self) -> &'static str {
        match self {
            JsAdvisory::Stream { .. } => "io.nats.jetstream.advisory.v1.stream_action",
            JsAdvisory::Consumer { .. } => "io.nats.jetstream.advisory.v1.consumer_action",
            JsAdvisory::Pause { .. } => "io.nats.jetstream.advisory.v1.consumer_pause",
            JsAdvisory::Message { advisory, .. } => match advisory {
                Advisory::MaxDeliver { .. } => "io.nats.jetstream.advisory.v1.max_deliver",
                Advisory::Terminated { .. } => "io.nats.jetstream.advisory.v1.terminated",
                Advisory::Nak { .. } => "io.nats.jetstream.advisory.v1.nak",
                Advisory::Pinned { .. } => "io.nats.jetstream.advisory.v1.consumer_group_pinned",
                Advisory::Unpinned { .. } => {
                    "io.nats.jetstream.advisory.v1.consumer_group_unpinned"
                }
            },
        }
    }

    /// The JSON body with the given unique `id` and event time `timestamp` (written as RFC
    /// 3339 UTC with nanoseconds). Never fails.
    pub fn to_json(&self, id: &str, timestamp: Timestamp) -> Vec<u8> {
        let timestamp = timestamp.to_string();
        let kind = self.type_name();
        match *self {
            JsAdvisory::Stream { action, stream } => to_json(&StreamActionBody {
                kind,
                id,
                timestamp,
                stream,
                action: action.action(),
            }),
            JsAdvisory::Consumer {
                action,
                stream,
                consumer,
            } => to_json(&ConsumerActionBody {
                kind,
                id,
                timestamp,
                stream,
                consumer,
                action: action.action(),
            }),
            JsAdvisory::Pause {
                stream,
                consumer,
                paused,
                pause_until,
            } => to_json(&PauseBody {
                kind,
                id,
                timestamp,
                stream,
                consumer,
                paused,
                pause_until: pause_until.to_string(),
            }),
            JsAdvisory::Message {
                stream,
                consumer,
                advisory,
            } => {
                let message = |consumer_seq, stream_seq, deliveries, reason| {
                    to_json(&MessageBody {
                        kind,
                        id,
                        timestamp: timestamp.clone(),
                        stream,
                        consumer,
                        consumer_seq,
                        stream_seq,
                        deliveries,
                        reason,
                    })
                };
                let pin = |group, pinned_id, reason| {
                    to_json(&PinBody {
                        kind,
                        id,
                        timestamp: timestamp.clone(),
                        stream,
                        consumer,
                        group,
                        pinned_id,
                        reason,
                    })
                };
                match advisory {
                    Advisory::MaxDeliver {
                        stream_seq,
                        deliveries,
                    } => message(None, *stream_seq, u64::from(*deliveries), ""),
                    Advisory::Terminated {
                        stream_seq,
                        consumer_seq,
                        deliveries,
                        reason,
                    } => message(
                        Some(*consumer_seq),
                        *stream_seq,
                        *deliveries,
                        reason.as_str(),
                    ),
                    Advisory::Nak {
                        stream_seq,
                        consumer_seq,
                        deliveries,
                    } => message(Some(*consumer_seq), *stream_seq, *deliveries, ""),
                    Advisory::Pinned { group, pin_id } => pin(group, Some(pin_id.as_str()), None),
                    Advisory::Unpinned { group, reason } => pin(group, None, Some(*reason)),
                }
            }
        }
    }
}

#[derive(Serialize)]
struct StreamActionBody<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    id: &'a str,
    timestamp: String,
    stream: &'a str,
    action: &'static str,
}

#[derive(Serialize)]
struct ConsumerActionBody<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    id: &'a str,
    timestamp: String,
    stream: &'a str,
    consumer: &'a str,
    action: &'static str,
}

#[derive(Serialize)]
struct PauseBody<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    id: &'a str,
    timestamp: String,
    stream: &'a str,
    consumer: &'a str,
    paused: bool,
    pause_until: String,
}

/// `consumer_group_pinned` (with `pinned_id`) and `consumer_group_unpinned` (with `reason`).
#[derive(Serialize)]
struct PinBody<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    id: &'a str,
    timestamp: String,
    stream: &'a str,
    consumer: &'a str,
    group: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pinned_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'a str>,
}

#[derive(Serialize)]
struct MessageBody<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    id: &'a str,
    timestamp: String,
    stream: &'a str,
    consumer: &'a str,
    /// Not in `max_deliver`.
    #[serde(skip_serializing_if = "Option::is_none")]
    consumer_seq: Option<u64>,
    stream_seq: u64,
    deliveries: u64,
    /// Only `terminated` has it, and only when not empty.
    #[serde(skip_serializing_if = "str::is_empty")]
    reason: &'a str,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::consumer::REASON_UNACKED_DELETED;

    fn ts() -> Timestamp {
        // 2026-11-29T15:06:32.86959848Z
        Timestamp::from_unix_nanos(1_795_964_792_869_598_480)
    }

    fn text(a: JsAdvisory<'_>) -> (String, String) {
        (
            a.subject(),
            String::from_utf8(a.to_json("ID", ts())).unwrap(),
        )
    }

    #[test]
    fn stream_actions() {
        let t = ts().to_string();
        assert_eq!(t, "2026-11-29T15:06:32.86959848Z");
        for (action, kind, word) in [
            (StreamAction::Create, "CREATED", "create"),
            (StreamAction::Modify, "UPDATED", "modify"),
            (StreamAction::Delete, "DELETED", "delete"),
        ] {
            let (subject, body) = text(JsAdvisory::Stream {
                action,
                stream: "ORDERS",
            });
            assert_eq!(subject, format!("$JS.EVENT.ADVISORY.STREAM.{kind}.ORDERS"));
            assert_eq!(
                body,
                format!(
                    r#"{{"type":"io.nats.jetstream.advisory.v1.stream_action","id":"ID","timestamp":"{t}","stream":"ORDERS","action":"{word}"}}"#
                )
            );
        }
    }

    #[test]
    fn consumer_pause() {
        let t = ts().to_string();
        for (paused, until, until_text) in [
            (true, ts(), t.clone()),
            (false, Timestamp::ZERO, "0001-01-01T00:00:00Z".to_owned()),
        ] {
            let (subject, body) = text(JsAdvisory::Pause {
                stream: "S",
                consumer: "C",
                paused,
                pause_until: until,
            });
            assert_eq!(subject, "$JS.EVENT.ADVISORY.CONSUMER.PAUSE.S.C");
            assert_eq!(
                body,
                format!(
                    r#"{{"type":"io.nats.jetstream.advisory.v1.consumer_pause","id":"ID","timestamp":"{t}","stream":"S","consumer":"C","paused":{paused},"pause_until":"{until_text}"}}"#
                )
            );
        }
    }

    #[test]
    fn consumer_actions() {
        let (subject, body) = text(JsAdvisory::Consumer {
            action: ConsumerAction::Delete,
            stream: "S",
            consumer: "C",
        });
        assert_eq!(subject, "$JS.EVENT.ADVISORY.CONSUMER.DELETED.S.C");
        assert_eq!(
            body,
            format!(
                r#"{{"type":"io.nats.jetstream.advisory.v1.consumer_action","id":"ID","timestamp":"{}","stream":"S","consumer":"C","action":"delete"}}"#,
                ts()
            )
        );
        let created = JsAdvisory::Consumer {
            action: ConsumerAction::Create,
            stream: "S",
            consumer: "C",
        };
        assert_eq!(created.subject(), "$JS.EVENT.ADVISORY.CONSUMER.CREATED.S.C");
        assert!(String::from_utf8(created.to_json("x", ts()))
            .unwrap()
            .contains(r#""action":"create""#));
    }

    #[test]
    fn message_events() {
        let t = ts().to_string();
        let md = Advisory::MaxDeliver {
            stream_seq: 11,
            deliveries: 2,
        };
        let (subject, body) = text(JsAdvisory::Message {
            stream: "P4",
            consumer: "MD",
            advisory: &md,
        });
        assert_eq!(subject, "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.P4.MD");
        assert_eq!(
            body,
            format!(
                r#"{{"type":"io.nats.jetstream.advisory.v1.max_deliver","id":"ID","timestamp":"{t}","stream":"P4","consumer":"MD","stream_seq":11,"deliveries":2}}"#
            )
        );

        let term = |reason: &str| Advisory::Terminated {
            stream_seq: 3,
            consumer_seq: 5,
            deliveries: 2,
            reason: reason.to_owned(),
        };
        let plain = term("");
        let (subject, body) = text(JsAdvisory::Message {
            stream: "S",
            consumer: "C",
            advisory: &plain,
        });
        assert_eq!(subject, "$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.S.C");
        // No reason: the field is left out, as nats-server does.
        assert_eq!(
            body,
            format!(
                r#"{{"type":"io.nats.jetstream.advisory.v1.terminated","id":"ID","timestamp":"{t}","stream":"S","consumer":"C","consumer_seq":5,"stream_seq":3,"deliveries":2}}"#
            )
        );
        let deleted = term(REASON_UNACKED_DELETED);
        let (_, body) = text(JsAdvisory::Message {
            stream: "S",
            consumer: "C",
            advisory: &deleted,
        });
        assert!(body.ends_with(r#""deliveries":2,"reason":"Unacknowledged message was deleted"}"#));

        let nak = Advisory::Nak {
            stream_seq: 2,
            consumer_seq: 4,
            deliveries: 2,
        };
        let (subject, body) = text(JsAdvisory::Message {
            stream: "S",
            consumer: "C",
            advisory: &nak,
        });
        assert_eq!(subject, "$JS.EVENT.ADVISORY.CONSUMER.MSG_NAKED.S.C");
        assert_eq!(
            body,
            format!(
                r#"{{"type":"io.nats.jetstream.advisory.v1.nak","id":"ID","timestamp":"{t}","stream":"S","consumer":"C","consumer_seq":4,"stream_seq":2,"deliveries":2}}"#
            )
        );
    }

    #[test]
    fn reason_text_is_escaped_as_go_does() {
        let adv = Advisory::Terminated {
            stream_seq: 1,
            consumer_seq: 1,
            deliveries: 1,
            reason: "a <b> & \"c\"".to_owned(),
        };
        let body = JsAdvisory::Message {
            stream: "S",
            consumer: "C",
            advisory: &adv,
        }
        .to_json("ID", ts());
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["reason"], "a <b> & \"c\"");
        assert!(String::from_utf8(body).unwrap().contains(r"\u003cb\u003e"));
    }

    #[test]
    fn write_subject_reuses_the_buffer() {
        let mut s = String::from("junk");
        JsAdvisory::Stream {
            action: StreamAction::Delete,
            stream: "X",
        }
        .write_subject(&mut s);
        assert_eq!(s, "$JS.EVENT.ADVISORY.STREAM.DELETED.X");
    }
}
