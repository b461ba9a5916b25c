//! Delivery pacing: `replay_policy: original` and `rate_limit_bps`, as nats-server paces its
//! delivery loop (`loopAndGatherMsgs`).
//!
//! * **Replay original** (push and pull): while the consumer is catching up with the messages
//!   that were in the stream when it was created (or restored), each delivery waits as long
//!   after the previous one as the two messages were stored apart (gaps of 1 ms or less are
//!   not waited for, as there). Once it has passed the stream's last sequence of that moment
//!   it delivers at once, as `instant` does.
//! * **Rate limit** (push only, nats-server refuses it on pull consumers): a token bucket of
//!   `rate_limit_bps / 8` bytes per second holding at most `burst` bytes (the stream's
//!   `max_msg_size`, else the server's `max_payload`, as there); a delivery of `n` bytes
//!   takes `n` tokens and waits until they are there. A message larger than the burst takes
//!   the whole bucket (nats-server's limiter never lets it through).
//!
//! Time is ticks (ns since the consumer's epoch); the consumer asks for a wake-up at
//! [`Pacing::not_before`] through `poll_timeout`.

use super::config::RateLimit;

/// Gaps between stored messages up to this are not replayed (nats-server: 1 ms).
const REPLAY_MIN_GAP_NS: u64 = 1_000_000;

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Pacing {
    replay: Option<Replay>,
    rate: Option<Bucket>,
    /// The next delivery is held until this tick.
    pub not_before: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
struct Replay {
    /// Replay lasts until a message above this stream sequence is delivered.
    until_seq: u64,
    /// Stored timestamp (Unix ns) and delivery tick of the last delivery.
    last: Option<(u64, u64)>,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
struct Bucket {
    /// Bytes per second.
    rate: u64,
    /// Capacity in bytes·1e9 (tokens are kept in byte-nanoseconds, so refill is exact).
    cap: u128,
    tokens: u128,
    last_tick: u64,
}

impl Pacing {
    /// Pacing for a consumer with `replay_original` (replaying up to `last_seq`, the stream's
    /// last sequence now) and/or `rate`; `None` when neither applies.
    pub fn new(
        replay_original: bool,
        last_seq: u64,
        rate: Option<RateLimit>,
        t: u64,
    ) -> Option<Self> {
        let rate = rate.filter(|r| r.bytes_per_sec > 0).map(|r| {
            let cap = u128::from(r.burst.max(1)) * 1_000_000_000;
            Bucket {
                rate: r.bytes_per_sec,
                cap,
                tokens: cap,
                last_tick: t,
            }
        });
        let replay = replay_original.then_some(Replay {
            until_seq: last_seq,
            last: None,
        });
        (replay.is_some() || rate.is_some()).then_some(Pacing {
            replay,
            rate,
            not_before: None,
        })
    }

    /// Whether a delivery of stream seq `seq` (stored at `ts_unix_ns`, `size` bytes) may go
    /// out at tick `t`; if not, [`Pacing::not_before`] says when.
    pub fn ready(&mut self, t: u64, seq: u64, ts_unix_ns: u64, size: u64) -> bool {
        let mut at = t;
        if let Some(r) = &mut self.replay {
            if seq > r.until_seq {
                self.replay = None;
            } else if let Some((last_ts, last_tick)) = r.last {
                let gap = ts_unix_ns.saturating_sub(last_ts);
                if gap > REPLAY_MIN_GAP_NS {
                    at = at.max(last_tick.saturating_add(gap));
                }
            }
        }
        if let Some(b) = &mut self.rate {
            b.refill(t);
            let need = b.need(size);
            if b.tokens < need {
                let missing = need - b.tokens;
                let wait = missing.div_ceil(u128::from(b.rate));
                at = at.max(t.saturating_add(u64::try_from(wait).unwrap_or(u64::MAX)));
            }
        }
        if at > t {
            self.not_before = Some(at);
            false
        } else {
            self.not_before = None;
            true
        }
    }

    /// A delivery passed by [`Pacing::ready`] went out at tick `t`.
    pub fn delivered(&mut self, t: u64, ts_unix_ns: u64, size: u64) {
        if let Some(r) = &mut self.replay {
            r.last = Some((ts_unix_ns, t));
        }
        if let Some(b) = &mut self.rate {
            b.refill(t);
            let need = b.need(size);
            b.tokens = b.tokens.saturating_sub(need);
        }
    }
}

impl Bucket {
    fn refill(&mut self, t: u64) {
        let elapsed = u128::from(t.saturating_sub(self.last_tick));
        self.tokens = (self.tokens + elapsed * u128::from(self.rate)).min(self.cap);
        self.last_tick = self.last_tick.max(t);
    }

    /// Tokens a delivery of `size` bytes takes: at most the whole bucket.
    fn need(&self, size: u64) -> u128 {
        (u128::from(size) * 1_000_000_000).min(self.cap)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    #[test]
    fn replay_waits_the_stored_gaps_until_caught_up() {
        let mut p = Pacing::new(true, 3, None, 0).unwrap();
        assert!(p.ready(0, 1, 10 * S, 10));
        p.delivered(0, 10 * S, 10);
        // Stored 2 s after the first: not before tick 2 s.
        assert!(!p.ready(S, 2, 12 * S, 10));
        assert_eq!(p.not_before, Some(2 * S));
        assert!(p.ready(2 * S, 2, 12 * S, 10));
        p.delivered(2 * S, 12 * S, 10);
        // Half a millisecond apart: at once.
        assert!(p.ready(2 * S, 3, 12 * S + 500_000, 10));
        p.delivered(2 * S, 12 * S + 500_000, 10);
        // Past seq 3 (the stream's end at creation): instant from here on.
        assert!(p.ready(2 * S, 4, 100 * S, 10));
    }

    #[test]
    fn rate_limit_spends_a_bucket_and_refills_at_the_rate() {
        // 8000 bps = 1000 bytes/s, burst 1000 bytes.
        let rate = RateLimit {
            bytes_per_sec: 1000,
            burst: 1000,
        };
        let mut p = Pacing::new(false, 0, Some(rate), 0).unwrap();
        assert!(p.ready(0, 1, 0, 600));
        p.delivered(0, 0, 600);
        // 400 left; 600 more need 200 more bytes: 0.2 s.
        assert!(!p.ready(0, 2, 0, 600));
        assert_eq!(p.not_before, Some(S / 5));
        assert!(p.ready(S / 5, 2, 0, 600));
        p.delivered(S / 5, 0, 600);
        // Larger than the burst: waits for a full bucket, then goes.
        assert!(!p.ready(S / 5, 3, 0, 5000));
        assert_eq!(p.not_before, Some(S / 5 + S));
        assert!(p.ready(S / 5 + S, 3, 0, 5000));
    }

    #[test]
    fn nothing_to_pace_is_none() {
        assert!(Pacing::new(false, 9, None, 0).is_none());
    }
}
