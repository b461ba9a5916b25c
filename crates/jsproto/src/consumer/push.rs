//! Push delivery: what a consumer with a `deliver_subject` keeps besides the pull state, and
//! the status messages it sends to its deliver subject.
//!
//! Behaviour follows nats-server 2.15 (`consumer.go`: its delivery loop, `sendIdleHeartbeat`,
//! `needFlowControl`, `processFlowControl`, `sendFlowControl`), checked against the running
//! server where noted:
//!
//! * deliveries go out only while the deliver subject has interest (the caller tells the
//!   consumer, [`super::Consumer::set_delivery_interest`]);
//! * `idle_heartbeat`: after that long without a delivery, and again every `idle_heartbeat`
//!   while nothing is delivered, `NATS/1.0 100 Idle Heartbeat` with `Nats-Last-Consumer` /
//!   `Nats-Last-Stream` (and `Nats-Consumer-Stalled: <fc reply>` while a flow-control request
//!   is unanswered), no reply subject, no payload; only while there is interest; also while
//!   paused or stalled;
//! * `flow_control`: every delivery adds its size (deliver subject + ack subject + headers +
//!   payload) to the bytes in flight. Above half the window a `NATS/1.0 100 FlowControl
//!   Request` goes out with reply subject `$JS.FC.<stream>.<consumer>.<4 chars>`; above the
//!   whole window delivery stalls. The answer to the latest request takes the bytes in flight
//!   when it was sent (grown while stalled past a window) off the count and doubles the
//!   window, from 2 MiB up to [`FLOW_CONTROL_MAX_PENDING`] (32 MiB). An answer to an older
//!   request is ignored.

use std::fmt::Write as _;

use bytes::Bytes;

pub use crate::headers::CONSUMER_STALLED;
use crate::headers::{LAST_CONSUMER, LAST_STREAM};

/// Largest flow-control window: 32 MiB of deliveries in flight (nats-server's
/// `JsFlowControlMaxPending`). The first window is a sixteenth of it (2 MiB).
pub const FLOW_CONTROL_MAX_PENDING: u64 = 32 * 1024 * 1024;

/// The header block of a flow-control request, byte for byte as nats-server sends it.
pub const FLOW_CONTROL_REQUEST: &str = "NATS/1.0 100 FlowControl Request\r\n\r\n";

/// A status message a push consumer sends to its deliver subject: an `HMSG` with
/// [`PushStatus::header_block`] and no payload, with [`PushStatus::reply`] as reply subject.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PushStatus {
    /// `100 Idle Heartbeat`: nothing was delivered for `idle_heartbeat`.
    IdleHeartbeat {
        /// Last consumer sequence delivered (`Nats-Last-Consumer`).
        last_consumer_seq: u64,
        /// Last stream sequence delivered (`Nats-Last-Stream`).
        last_stream_seq: u64,
        /// The reply subject of the unanswered flow-control request, if any
        /// (`Nats-Consumer-Stalled`): a client answers it as it would the request.
        stalled: Option<Bytes>,
    },
    /// `100 FlowControl Request`; the subscriber answers with any message to `reply`.
    FlowControlRequest {
        /// `$JS.FC.<stream>.<consumer>.<4 chars>`.
        reply: Bytes,
    },
}

impl PushStatus {
    /// The reply subject the status message carries: the flow-control request's, none for a
    /// heartbeat.
    pub fn reply(&self) -> Option<&Bytes> {
        match self {
            PushStatus::IdleHeartbeat { .. } => None,
            PushStatus::FlowControlRequest { reply } => Some(reply),
        }
    }

    /// The header block, byte for byte as nats-server 2.15 sends it, e.g.
    /// `NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: 3\r\nNats-Last-Stream: 3\r\n\r\n`.
    pub fn header_block(&self) -> String {
        match self {
            PushStatus::IdleHeartbeat {
                last_consumer_seq,
                last_stream_seq,
                stalled,
            } => {
                let mut s = format!(
                    "NATS/1.0 100 Idle Heartbeat\r\n{LAST_CONSUMER}: {last_consumer_seq}\r\n\
                     {LAST_STREAM}: {last_stream_seq}\r\n"
                );
                if let Some(fc) = stalled {
                    let _ = write!(s, "{CONSUMER_STALLED}: {}\r\n", String::from_utf8_lossy(fc));
                }
                s.push_str("\r\n");
                s
            }
            PushStatus::FlowControlRequest { .. } => FLOW_CONTROL_REQUEST.to_owned(),
        }
    }
}

/// A push consumer's delivery state.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Push {
    /// Where deliveries go.
    pub(crate) deliver_subject: Bytes,
    /// The deliver subject has interest: deliveries and heartbeats go out.
    pub(crate) active: bool,
    /// `idle_heartbeat` in ns.
    heartbeat: Option<u64>,
    /// Tick of the next heartbeat; `None` while inactive or without heartbeats.
    pub(crate) next_heartbeat: Option<u64>,
    /// Flow control, when configured.
    pub(crate) flow: Option<FlowControl>,
}

impl Push {
    pub(crate) fn new(
        deliver_subject: &str,
        heartbeat: Option<u64>,
        flow_control: bool,
        fc_prefix: String,
    ) -> Self {
        Push {
            deliver_subject: Bytes::copy_from_slice(deliver_subject.as_bytes()),
            active: false,
            heartbeat,
            next_heartbeat: None,
            flow: flow_control.then(|| FlowControl::new(fc_prefix)),
        }
    }

    /// Whether deliveries may go out now (interest, and not stalled by flow control).
    pub(crate) fn can_deliver(&self) -> bool {
        self.active && !self.flow.as_ref().is_some_and(FlowControl::stalled)
    }

    /// Interest came or went at tick `t`: heartbeats run only with interest.
    pub(crate) fn set_active(&mut self, t: u64, active: bool) {
        self.active = active;
        self.next_heartbeat = if active {
            self.heartbeat.map(|hb| t.saturating_add(hb))
        } else {
            None
        };
    }

    /// A delivery of `size` bytes went out at tick `t`: the heartbeat restarts; with flow
    /// control, the reply subject of a request to send now, if one is due.
    pub(crate) fn delivered(&mut self, t: u64, size: u64) -> Option<Bytes> {
        if let Some(hb) = self.heartbeat {
            self.next_heartbeat = Some(t.saturating_add(hb));
        }
        self.flow.as_mut().and_then(|f| f.delivered(size))
    }

    /// The heartbeat due at or before tick `t`, if any (the next one is armed).
    pub(crate) fn heartbeat_due(&mut self, t: u64) -> bool {
        match (self.next_heartbeat, self.heartbeat) {
            (Some(at), Some(hb)) if at <= t => {
                self.next_heartbeat = Some(t.saturating_add(hb));
                true
            }
            _ => false,
        }
    }

    /// The unanswered flow-control request's reply subject.
    pub(crate) fn stalled_on(&self) -> Option<Bytes> {
        self.flow.as_ref().and_then(|f| f.outstanding.clone())
    }
}

/// Flow-control accounting (nats-server's `pbytes`, `maxpb`, `fcsz`, `fcid`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct FlowControl {
    /// Bytes delivered and not yet confirmed.
    pending: u64,
    /// Current window: delivery stalls above it.
    window: u64,
    /// What the outstanding request confirms when answered.
    confirms: u64,
    /// Reply subject of the outstanding request.
    outstanding: Option<Bytes>,
    /// `$JS.FC.<stream>.<consumer>.`
    prefix: String,
    /// State of the generator of the reply subjects' last token.
    rng: u64,
}

impl FlowControl {
    fn new(prefix: String) -> Self {
        // The last token only has to differ from one request to the next; seeded from the
        // names so that consumers do not share a sequence (no clock or randomness here).
        let rng = prefix.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
        });
        FlowControl {
            pending: 0,
            window: FLOW_CONTROL_MAX_PENDING / 16,
            confirms: 0,
            outstanding: None,
            prefix,
            rng,
        }
    }

    fn stalled(&self) -> bool {
        self.pending > self.window
    }

    fn delivered(&mut self, size: u64) -> Option<Bytes> {
        self.pending += size;
        match &self.outstanding {
            None if self.pending > self.window / 2 => {
                let reply = self.next_reply();
                self.confirms = self.pending;
                self.outstanding = Some(reply.clone());
                Some(reply)
            }
            Some(_) if self.pending - self.confirms >= self.window => {
                self.confirms += size;
                None
            }
            _ => None,
        }
    }

    /// An answer on `subject`: true when it answered the outstanding request.
    pub(crate) fn answered(&mut self, subject: &[u8]) -> bool {
        if self.outstanding.as_deref() != Some(subject) {
            return false;
        }
        self.window = (self.window * 2).min(FLOW_CONTROL_MAX_PENDING);
        self.pending = self.pending.saturating_sub(self.confirms);
        self.confirms = 0;
        self.outstanding = None;
        true
    }

    fn next_reply(&mut self) -> Bytes {
        const DIGITS: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
        // splitmix64
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        let mut s = String::with_capacity(self.prefix.len() + 4);
        s.push_str(&self.prefix);
        for _ in 0..4 {
            s.push(DIGITS[(z % 62) as usize] as char);
            z /= 62;
        }
        Bytes::from(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heartbeat_blocks_are_nats_servers_bytes() {
        let hb = PushStatus::IdleHeartbeat {
            last_consumer_seq: 15,
            last_stream_seq: 15,
            stalled: Some(Bytes::from_static(b"$JS.FC.FC.OItbyRyz.LuWq")),
        };
        assert_eq!(
            hb.header_block(),
            "NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: 15\r\nNats-Last-Stream: 15\r\n\
             Nats-Consumer-Stalled: $JS.FC.FC.OItbyRyz.LuWq\r\n\r\n"
        );
        let hb = PushStatus::IdleHeartbeat {
            last_consumer_seq: 0,
            last_stream_seq: 0,
            stalled: None,
        };
        assert_eq!(
            hb.header_block(),
            "NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: 0\r\nNats-Last-Stream: 0\r\n\r\n"
        );
        assert!(hb.reply().is_none());
    }

    #[test]
    fn flow_control_asks_at_half_the_window_and_stalls_above_it() {
        let mut f = FlowControl::new("$JS.FC.S.C.".to_owned());
        let mib = 1024 * 1024;
        assert!(f.delivered(mib).is_none(), "exactly half: not yet");
        let reply = f.delivered(1).expect("above half: a request");
        assert!(reply.starts_with(b"$JS.FC.S.C."));
        assert_eq!(reply.len(), "$JS.FC.S.C.".len() + 4);
        assert!(!f.stalled());
        assert!(f.delivered(mib).is_none(), "one request at a time");
        assert!(f.stalled());
        assert!(!f.answered(b"$JS.FC.S.C.nope"));
        assert!(f.answered(&reply));
        assert!(!f.stalled());
        assert_eq!(f.window, 4 * mib, "the window doubles");
        assert_eq!(
            f.pending, mib,
            "what was sent after the request stays in flight"
        );
        let next = f.delivered(mib + 1).expect("above half of the new window");
        assert_ne!(next, reply);
    }
}
