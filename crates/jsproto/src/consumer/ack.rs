//! Ack messages: the ack reply subject (`$JS.ACK.…`) and the ack payloads (`+ACK`, `-NAK`,
//! `+WPI`, `+NXT`, `+TERM`), as nats-server 2.15.1 reads and writes them
//! (`consumer-semantics.md` §2–§3).

use std::fmt;
use std::time::Duration;

use serde::Deserialize;

use super::pull::{PullError, PullRequest};
use crate::duration::parse_go_duration;
use crate::parse_decimal;

/// The numeric tokens of an ack reply subject: what one delivery was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct AckTokens {
    /// 1 on the first delivery, 2 on the first redelivery, …
    pub delivery_count: u64,
    /// The message's stream sequence.
    pub stream_seq: u64,
    /// The consumer sequence of *this* delivery (every redelivery gets a new one).
    pub consumer_seq: u64,
    /// The message's stored timestamp, Unix nanoseconds (the same on every redelivery).
    pub timestamp_unix_ns: u64,
    /// The consumer's `num_pending` right after this delivery (undelivered messages left).
    pub num_pending: u64,
}

impl AckTokens {
    /// Writes the v1 ack subject
    /// `$JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>` (what nats-server
    /// 2.15.1 emits by default).
    ///
    /// # Errors
    /// Only those of `dst`.
    pub fn write_v1(&self, stream: &str, consumer: &str, dst: &mut impl fmt::Write) -> fmt::Result {
        // Written piece by piece, numbers without the formatting machinery: one of these is
        // built for every delivery.
        dst.write_str("$JS.ACK.")?;
        dst.write_str(stream)?;
        dst.write_str(".")?;
        dst.write_str(consumer)?;
        for n in [
            self.delivery_count,
            self.stream_seq,
            self.consumer_seq,
            self.timestamp_unix_ns,
            self.num_pending,
        ] {
            dst.write_str(".")?;
            dst.write_str(itoa::Buffer::new().format(n))?;
        }
        Ok(())
    }

    /// The v1 ack subject as a `String` (see [`AckTokens::write_v1`]).
    pub fn to_v1_subject(&self, stream: &str, consumer: &str) -> String {
        let mut s = String::with_capacity(self.v1_len(stream.len(), consumer.len()));
        // Writing to a String cannot fail.
        let _ = self.write_v1(stream, consumer, &mut s);
        s
    }

    /// Length in bytes of the v1 subject, without building it (used for `max_bytes` costs).
    pub fn v1_len(&self, stream_len: usize, consumer_len: usize) -> usize {
        "$JS.ACK.".len()
            + stream_len
            + consumer_len
            + 6 // the dots between the 7 variable tokens
            + digits(self.delivery_count)
            + digits(self.stream_seq)
            + digits(self.consumer_seq)
            + digits(self.timestamp_unix_ns)
            + digits(self.num_pending)
    }
}

fn digits(n: u64) -> usize {
    n.checked_ilog10().map_or(1, |d| d as usize + 1)
}

/// A parsed ack reply subject.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AckSubject<'a> {
    /// JetStream domain of the v2 form (`_` = none); `None` for v1.
    pub domain: Option<&'a str>,
    /// Account hash of the v2 form; `None` for v1.
    pub account_hash: Option<&'a str>,
    /// Stream name.
    pub stream: &'a str,
    /// Consumer name.
    pub consumer: &'a str,
    /// The numeric tokens.
    pub tokens: AckTokens,
}

impl<'a> AckSubject<'a> {
    /// Parses `$JS.ACK.<stream>.<consumer>.<dc>.<sseq>.<cseq>.<ts>.<pending>` (v1, exactly 9
    /// tokens) or `$JS.ACK.<domain>.<account_hash>.<stream>.<consumer>.<dc>.<sseq>.<cseq>.<ts>.
    /// <pending>[.<more>…]` (v2, 11 tokens or more; extra tokens ignored), as nats-server
    /// accepts both. `None` for any other shape or a non-numeric number token (nats-server
    /// then ignores the ack).
    pub fn parse(subject: &'a [u8]) -> Option<Self> {
        // Every ack goes through here: split the bytes in place into a fixed array (no
        // allocation, no UTF-8 pass over the numbers) and read each number in one pass.
        let rest = subject.strip_prefix(b"$JS.ACK.")?;
        let mut parts: [&[u8]; 9] = [b""; 9];
        let mut n = 0;
        let mut start = 0;
        for end in memchr::memchr_iter(b'.', rest).chain([rest.len()]) {
            if let Some(slot) = parts.get_mut(n) {
                *slot = &rest[start..end];
            }
            n += 1;
            start = end + 1;
        }
        let (domain, account_hash, names) = match n {
            7 => (None, None, &parts[..7]),
            n if n >= 9 => (Some(name(parts[0])?), Some(name(parts[1])?), &parts[2..9]),
            _ => return None,
        };
        if names[0].is_empty() || names[1].is_empty() {
            return None;
        }
        Some(Self {
            domain,
            account_hash,
            stream: name(names[0])?,
            consumer: name(names[1])?,
            tokens: AckTokens {
                delivery_count: parse_decimal(names[2])?,
                stream_seq: parse_decimal(names[3])?,
                consumer_seq: parse_decimal(names[4])?,
                timestamp_unix_ns: parse_decimal(names[5])?,
                num_pending: parse_decimal(names[6])?,
            },
        })
    }
}

/// A name token of an ack subject (domain, account hash, stream, consumer): UTF-8 text.
fn name(token: &[u8]) -> Option<&str> {
    std::str::from_utf8(token).ok()
}

/// What an ack message's payload asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AckKind {
    /// Empty payload, `+ACK` or `+OK`: the delivery is done.
    Ack,
    /// `-NAK`: redeliver. `delay` from `-NAK {"delay":<ns>}` or `-NAK <go-duration>`
    /// (`-NAK 5s`); `None` for a plain NAK, an unparsable value or a delay ≤ 0 (nats-server
    /// treats a bad value as a plain NAK).
    Nak {
        /// Wait this long before redelivering.
        delay: Option<Duration>,
    },
    /// `+WPI` (exactly): still working, restart the ack-wait clock. Unlike nats-server, a
    /// message already queued for redelivery is taken off the queue (the worker just said it is
    /// alive, so handing it to someone else would duplicate work).
    Progress,
    /// `+NXT [pull request body]`: ack, then treat the rest as a pull request whose deliveries
    /// go to the ack message's reply subject. The body is parsed like a `CONSUMER.MSG.NEXT`
    /// body; a parse error is answered with a `400 Bad Request` status.
    Next(Result<PullRequest, PullError>),
    /// `+TERM [reason]`: never redeliver; removed from pending like an ack, with an advisory.
    Term {
        /// Text after `+TERM`, trimmed; `None` when absent or empty.
        reason: Option<String>,
    },
    /// Anything else: ignored (still answered when the ack had a reply subject).
    Unknown,
}

#[derive(Deserialize)]
struct NakOptions {
    #[serde(default)]
    delay: i64,
}

impl AckKind {
    /// Classifies an ack payload exactly as nats-server does: `+ACK`/`+OK`/`+WPI` must match
    /// the whole payload; `-NAK`, `+NXT` and `+TERM` are prefixes.
    pub fn parse(payload: &[u8]) -> Self {
        match payload {
            b"" | b"+ACK" | b"+OK" => AckKind::Ack,
            b"+WPI" => AckKind::Progress,
            p if p.starts_with(b"-NAK") => AckKind::Nak {
                delay: parse_nak_delay(&p[4..]),
            },
            p if p.starts_with(b"+NXT") => AckKind::Next(PullRequest::parse(&p[4..])),
            p if p.starts_with(b"+TERM") => {
                let reason = String::from_utf8_lossy(&p[5..]).trim().to_owned();
                AckKind::Term {
                    reason: (!reason.is_empty()).then_some(reason),
                }
            }
            _ => AckKind::Unknown,
        }
    }
}

fn parse_nak_delay(arg: &[u8]) -> Option<Duration> {
    let arg = arg.trim_ascii();
    if arg.is_empty() {
        return None;
    }
    let nanos = if arg[0] == b'{' {
        serde_json::from_slice::<NakOptions>(arg).ok()?.delay
    } else {
        parse_go_duration(std::str::from_utf8(arg).ok()?)?
    };
    // A delay of zero or less asks for "now": the same as a plain NAK.
    u64::try_from(nanos)
        .ok()
        .filter(|&n| n > 0)
        .map(Duration::from_nanos)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ack_payloads() {
        assert_eq!(AckKind::parse(b""), AckKind::Ack);
        assert_eq!(AckKind::parse(b"+ACK"), AckKind::Ack);
        assert_eq!(AckKind::parse(b"+OK"), AckKind::Ack);
        assert_eq!(AckKind::parse(b"+ACK "), AckKind::Unknown);
        assert_eq!(AckKind::parse(b"-NAK"), AckKind::Nak { delay: None });
        assert_eq!(
            AckKind::parse(br#"-NAK {"delay": 500000000}"#),
            AckKind::Nak {
                delay: Some(Duration::from_millis(500))
            }
        );
        assert_eq!(
            AckKind::parse(b"-NAK 5s"),
            AckKind::Nak {
                delay: Some(Duration::from_secs(5))
            }
        );
        assert_eq!(AckKind::parse(b"-NAK bogus"), AckKind::Nak { delay: None });
        assert_eq!(
            AckKind::parse(br#"-NAK {"delay":-5}"#),
            AckKind::Nak { delay: None }
        );
        assert_eq!(AckKind::parse(b"+WPI"), AckKind::Progress);
        assert_eq!(AckKind::parse(b"+WPI "), AckKind::Unknown);
        assert_eq!(AckKind::parse(b"+TERM"), AckKind::Term { reason: None });
        assert_eq!(
            AckKind::parse(b"+TERM corrupt input"),
            AckKind::Term {
                reason: Some("corrupt input".into())
            }
        );
        assert!(matches!(AckKind::parse(b"+NXT"), AckKind::Next(Ok(r)) if r.batch == 1));
        assert!(
            matches!(AckKind::parse(br#"+NXT {"batch":2}"#), AckKind::Next(Ok(r)) if r.batch == 2)
        );
        assert_eq!(AckKind::parse(b"hello"), AckKind::Unknown);
    }

    #[test]
    fn ack_subject_roundtrip_v1() {
        let t = AckTokens {
            delivery_count: 1,
            stream_seq: 2,
            consumer_seq: 2,
            timestamp_unix_ns: 1795936983474411626,
            num_pending: 3,
        };
        let s = t.to_v1_subject("P1", "W");
        assert_eq!(s, "$JS.ACK.P1.W.1.2.2.1795936983474411626.3");
        let edges = AckTokens {
            delivery_count: 0,
            stream_seq: u64::MAX,
            consumer_seq: 10,
            timestamp_unix_ns: 9,
            num_pending: 100,
        };
        let e = edges.to_v1_subject("S", "C");
        assert_eq!(e, "$JS.ACK.S.C.0.18446744073709551615.10.9.100");
        assert_eq!(e.len(), edges.v1_len(1, 1));
        assert_eq!(s.len(), t.v1_len(2, 1));
        let p = AckSubject::parse(s.as_bytes()).unwrap();
        assert_eq!(
            (p.stream, p.consumer, p.tokens, p.domain),
            ("P1", "W", t, None)
        );
    }

    #[test]
    fn ack_subject_v2_and_bad_shapes() {
        let p = AckSubject::parse(b"$JS.ACK._.ACCHASH.S.C.3.10.12.99.0.rand").unwrap();
        assert_eq!(
            (p.domain, p.account_hash, p.stream, p.consumer),
            (Some("_"), Some("ACCHASH"), "S", "C")
        );
        assert_eq!(
            (
                p.tokens.delivery_count,
                p.tokens.stream_seq,
                p.tokens.consumer_seq
            ),
            (3, 10, 12)
        );
        assert!(AckSubject::parse(b"$JS.ACK._.H.S.C.3.10.12.99.0").is_some());
        assert!(AckSubject::parse(b"$JS.ACK.S.C.1.2.3.4").is_none()); // 8 tokens
        assert!(AckSubject::parse(b"$JS.ACK.X.S.C.1.2.3.4.5").is_none()); // 10 tokens
        assert!(AckSubject::parse(b"$JS.ACK.S.C.1.x.3.4.5").is_none());
        assert!(AckSubject::parse(b"$JS.ACK.S.C.1.-2.3.4.5").is_none());
        assert!(AckSubject::parse(b"$JS.NAK.S.C.1.2.3.4.5").is_none());
        assert!(AckSubject::parse(b"$JS.ACK").is_none());
        assert!(AckSubject::parse(b"$JS.ACK.").is_none());
        assert!(AckSubject::parse(b"$JS.ACK..C.1.2.3.4.5").is_none()); // empty stream
        assert!(AckSubject::parse(b"$JS.ACK.S.C.1.2..4.5").is_none()); // empty number
        assert!(AckSubject::parse(b"$JS.ACK.S.C.1.+2.3.4.5").is_none());
        // u64::MAX fits, one more does not.
        let max = AckSubject::parse(b"$JS.ACK.S.C.1.18446744073709551615.3.4.5").unwrap();
        assert_eq!(max.tokens.stream_seq, u64::MAX);
        assert!(AckSubject::parse(b"$JS.ACK.S.C.1.18446744073709551616.3.4.5").is_none());
    }
}
