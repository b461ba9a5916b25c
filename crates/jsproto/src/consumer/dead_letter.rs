//! A built-in dead-letter path (jsserver's own; nats-server users build it by hand from
//! advisories): a consumer whose `metadata` names a subject under [`METADATA_KEY`] gets every
//! message it gives up on republished there, so that a stream on that subject keeps them.
//!
//! A message is given up when it reaches `max_deliver` (the `MAX_DELIVERIES` advisory) or a
//! worker answers `+TERM` (the `MSG_TERMINATED` advisory), not when it is deleted from the
//! stream while pending (there is nothing left to keep). The copy has the stored payload and
//! headers, minus those that would steer its own publish (`Nats-Msg-Id`,
//! `Nats-Expected-*`, `Nats-Rollup`, `Nats-TTL`), plus `Nats-Dead-Letter-*` headers naming
//! the stream, subject, sequence, consumer, delivery count and reason
//! ([`crate::headers::DEAD_LETTER_STREAM`] and the rest). The server publishes it before the
//! advisory. Metadata passes through every client unchanged, so nothing in the standard
//! config or info changes shape.

use super::{Advisory, REASON_UNACKED_DELETED};
use crate::headers::{self, Headers};

/// The consumer `metadata` key whose value is the dead-letter subject.
pub const METADATA_KEY: &str = "dead_letter_subject";

/// Why a message was given up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// It reached `max_deliver` without an ack.
    MaxDeliver,
    /// A worker answered `+TERM`.
    Terminated,
}

impl Reason {
    /// The `Nats-Dead-Letter-Reason` value: `max_deliver` or `terminated`.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::MaxDeliver => "max_deliver",
            Reason::Terminated => "terminated",
        }
    }
}

/// One given-up message, as an advisory reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GivenUp<'a> {
    /// Stream sequence.
    pub stream_seq: u64,
    /// Deliveries made.
    pub deliveries: u64,
    /// Why.
    pub reason: Reason,
    /// The `+TERM` text, empty when none.
    pub description: &'a str,
}

impl<'a> GivenUp<'a> {
    /// The given-up message an advisory reports, if it reports one: `MaxDeliver` and
    /// `Terminated` (but not a pending message deleted from the stream).
    pub fn of(advisory: &'a Advisory) -> Option<Self> {
        match advisory {
            Advisory::MaxDeliver {
                stream_seq,
                deliveries,
            } => Some(GivenUp {
                stream_seq: *stream_seq,
                deliveries: u64::from(*deliveries),
                reason: Reason::MaxDeliver,
                description: "",
            }),
            Advisory::Terminated {
                stream_seq,
                deliveries,
                reason,
                ..
            } if reason != REASON_UNACKED_DELETED => Some(GivenUp {
                stream_seq: *stream_seq,
                deliveries: *deliveries,
                reason: Reason::Terminated,
                description: reason,
            }),
            _ => None,
        }
    }

    /// The header block of the dead-letter copy of a message stored with `stored` headers
    /// (`None`: none) on `subject` in `stream`, given up by `consumer`. A stored block that
    /// does not parse is replaced (it cannot happen for what the stream stored).
    pub fn header_block(
        &self,
        stored: Option<&[u8]>,
        stream: &str,
        subject: &str,
        consumer: &str,
    ) -> Vec<u8> {
        let mut h = stored
            .and_then(|b| Headers::parse(b).ok())
            .unwrap_or_default();
        for key in [
            headers::MSG_ID,
            headers::EXPECTED_STREAM,
            headers::EXPECTED_LAST_SEQUENCE,
            headers::EXPECTED_LAST_SUBJECT_SEQUENCE,
            headers::EXPECTED_LAST_SUBJECT_SEQUENCE_SUBJECT,
            headers::EXPECTED_LAST_MSG_ID,
            headers::ROLLUP,
            headers::MSG_TTL,
        ] {
            h.remove(key);
        }
        let entries = [
            (headers::DEAD_LETTER_STREAM, stream.to_owned()),
            (headers::DEAD_LETTER_SUBJECT, subject.to_owned()),
            (headers::DEAD_LETTER_SEQUENCE, self.stream_seq.to_string()),
            (headers::DEAD_LETTER_CONSUMER, consumer.to_owned()),
            (headers::DEAD_LETTER_DELIVERIES, self.deliveries.to_string()),
            (headers::DEAD_LETTER_REASON, self.reason.as_str().to_owned()),
        ];
        for (k, v) in entries {
            // Names and numbers never hold line breaks; a subject cannot either.
            let _ = h.insert(k, v);
        }
        if !self.description.is_empty() {
            // A +TERM text is one line of the ack payload; a stray CR is dropped.
            let text: String = self
                .description
                .chars()
                .filter(|c| *c != '\r' && *c != '\n')
                .collect();
            let _ = h.insert(headers::DEAD_LETTER_DESCRIPTION, text);
        }
        h.to_bytes().to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_deliver_and_term_are_given_up_deletions_are_not() {
        let md = Advisory::MaxDeliver {
            stream_seq: 5,
            deliveries: 3,
        };
        let g = GivenUp::of(&md).unwrap();
        assert_eq!(
            (g.stream_seq, g.deliveries, g.reason),
            (5, 3, Reason::MaxDeliver)
        );
        let term = Advisory::Terminated {
            stream_seq: 6,
            consumer_seq: 9,
            deliveries: 1,
            reason: "bad address".into(),
        };
        assert_eq!(GivenUp::of(&term).unwrap().description, "bad address");
        let gone = Advisory::Terminated {
            stream_seq: 6,
            consumer_seq: 9,
            deliveries: 1,
            reason: REASON_UNACKED_DELETED.into(),
        };
        assert_eq!(GivenUp::of(&gone), None);
        let nak = Advisory::Nak {
            stream_seq: 1,
            consumer_seq: 1,
            deliveries: 1,
        };
        assert_eq!(GivenUp::of(&nak), None);
    }

    #[test]
    fn the_copy_keeps_user_headers_and_drops_steering_ones() {
        let g = GivenUp {
            stream_seq: 7,
            deliveries: 2,
            reason: Reason::Terminated,
            description: "out of stock",
        };
        let stored =
            b"NATS/1.0\r\nNats-Msg-Id: o-7\r\nX-Order: 7\r\nNats-Expected-Stream: ORDERS\r\n\r\n";
        let block = g.header_block(Some(stored), "ORDERS", "orders.new", "shipping");
        assert_eq!(
            String::from_utf8(block).unwrap(),
            "NATS/1.0\r\nX-Order: 7\r\nNats-Dead-Letter-Stream: ORDERS\r\n\
             Nats-Dead-Letter-Subject: orders.new\r\nNats-Dead-Letter-Sequence: 7\r\n\
             Nats-Dead-Letter-Consumer: shipping\r\nNats-Dead-Letter-Deliveries: 2\r\n\
             Nats-Dead-Letter-Reason: terminated\r\nNats-Dead-Letter-Description: out of stock\r\n\r\n"
        );
        let none = GivenUp {
            description: "",
            reason: Reason::MaxDeliver,
            ..g
        }
        .header_block(None, "S", "s", "c");
        assert!(String::from_utf8(none)
            .unwrap()
            .starts_with("NATS/1.0\r\nNats-Dead-Letter-Stream: S\r\n"));
    }
}
