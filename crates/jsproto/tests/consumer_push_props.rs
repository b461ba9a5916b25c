//! Property test for push consumers: random publishes (small and large), acks, NAKs, terms,
//! time steps, interest coming and going and flow-control answers (current and stale).
//!
//! After every step the consumer's invariants hold, and every output is legal: nothing is
//! delivered or heartbeated while the deliver subject has no interest; consumer seqs count up
//! by one; a heartbeat reports the last delivery's sequences and names the outstanding
//! flow-control request exactly when one is unanswered; flow-control requests only follow a
//! delivery. At the end, with interest back and every request answered, everything the
//! consumer has not given up on is delivered and, once acked, nothing is left pending.

#[path = "consumer_harness.rs"]
mod harness;

use bytes::Bytes;
use harness::*;
use jsproto::consumer::{AckPolicy, AckTokens, Action, ConsumerConfig, PushConfig, PushStatus};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Publish { big: bool },
    Ack { pick: usize, kind: u8 },
    Advance(u16),
    Interest(bool),
    Answer { stale: bool },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => any::<bool>().prop_map(|big| Op::Publish { big }),
        3 => (any::<usize>(), 0u8..4).prop_map(|(pick, kind)| Op::Ack { pick, kind }),
        3 => (0u16..1500).prop_map(Op::Advance),
        1 => any::<bool>().prop_map(Op::Interest),
        2 => any::<bool>().prop_map(|stale| Op::Answer { stale }),
    ]
}

fn config() -> impl Strategy<Value = ConsumerConfig> {
    (0u8..3, proptest::option::of(1u64..4), any::<bool>()).prop_map(|(ack, cap, fc)| {
        ConsumerConfig {
            ack_policy: [AckPolicy::None, AckPolicy::Explicit, AckPolicy::All][usize::from(ack)],
            ack_wait: secs(1),
            max_ack_pending: cap,
            max_deliver: Some(3),
            push: Some(PushConfig {
                deliver_subject: "dlv".to_owned(),
                idle_heartbeat: Some(ms(400)),
                flow_control: fc,
            }),
            ..explicit()
        }
    })
}

#[derive(Default)]
struct Model {
    bound: bool,
    last: (u64, u64),
    /// The latest flow-control request, while unanswered.
    fc: Option<Bytes>,
    /// Every request ever sent (for stale answers).
    old_fc: Vec<Bytes>,
    tokens: Vec<AckTokens>,
}

impl Model {
    fn observe(&mut self, actions: &[Action]) -> Result<(), TestCaseError> {
        let mut just_delivered = false;
        for a in actions {
            match a {
                Action::Deliver { reply_to, ack, .. } => {
                    prop_assert!(self.bound, "delivered while unbound");
                    prop_assert_eq!(&reply_to[..], b"dlv");
                    prop_assert_eq!(ack.consumer_seq, self.last.0 + 1, "consumer seq gap");
                    self.last = (ack.consumer_seq, self.last.1.max(ack.stream_seq));
                    self.tokens.push(*ack);
                    just_delivered = true;
                }
                Action::PushStatus { status, .. } => match status {
                    PushStatus::IdleHeartbeat {
                        last_consumer_seq,
                        stalled,
                        ..
                    } => {
                        prop_assert!(self.bound, "heartbeat while unbound");
                        prop_assert_eq!(*last_consumer_seq, self.last.0);
                        prop_assert_eq!(stalled, &self.fc);
                        just_delivered = false;
                    }
                    PushStatus::FlowControlRequest { reply } => {
                        prop_assert!(just_delivered, "a request follows a delivery");
                        prop_assert!(self.fc.is_none(), "one request at a time");
                        self.fc = Some(reply.clone());
                        self.old_fc.push(reply.clone());
                    }
                },
                _ => {}
            }
        }
        Ok(())
    }
}

fn interest(h: &mut Harness, on: bool) -> Vec<Action> {
    let mut out = Vec::new();
    h.consumer
        .set_delivery_interest(h.now, on, &h.stream, &mut out);
    h.check();
    out
}

fn answer(h: &mut Harness, subject: &[u8]) -> Vec<Action> {
    let mut out = Vec::new();
    h.consumer
        .on_flow_control_reply(h.now, subject, &h.stream, &mut out);
    h.check();
    out
}

fn run(cfg: ConsumerConfig, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let mut h = Harness::new(cfg);
    let mut m = Model::default();
    for op in ops {
        match op {
            Op::Publish { big } => {
                h.msg_size = if big { 700 * 1024 } else { 10 };
                let out = h.publish();
                m.observe(&out)?;
            }
            Op::Ack { pick, kind } => {
                if m.tokens.is_empty() {
                    continue;
                }
                let t = m.tokens[pick % m.tokens.len()];
                let payload: &[u8] = [&b"+ACK"[..], b"-NAK", b"+TERM", b"+WPI"][usize::from(kind)];
                let out = h.ack_with(t, payload, None);
                m.observe(&out)?;
            }
            Op::Advance(d) => {
                let out = h.advance(ms(u64::from(d)));
                m.observe(&out)?;
            }
            Op::Interest(on) => {
                m.bound = on;
                let out = interest(&mut h, on);
                m.observe(&out)?;
            }
            Op::Answer { stale } => {
                let subject = if stale {
                    m.old_fc.first().cloned()
                } else {
                    m.fc.clone()
                };
                let Some(subject) = subject else { continue };
                if m.fc.as_ref() == Some(&subject) {
                    m.fc = None;
                }
                let out = answer(&mut h, &subject);
                m.observe(&out)?;
            }
        }
        prop_assert!(h.consumer.push_bound() == m.bound);
        prop_assert_eq!(h.consumer.flow_control_pending(), m.fc.clone());
    }
    // Drain: interest back, every request answered, every delivery acked, time passes.
    m.bound = true;
    let out = interest(&mut h, true);
    m.observe(&out)?;
    for _ in 0..500 {
        if let Some(fc) = m.fc.take() {
            let out = answer(&mut h, &fc);
            m.observe(&out)?;
        }
        for t in std::mem::take(&mut m.tokens) {
            let out = h.ack(t);
            m.observe(&out)?;
        }
        let out = h.advance(secs(2));
        m.observe(&out)?;
        let i = h.info();
        if i.num_pending == 0 && i.num_ack_pending == 0 && m.fc.is_none() && m.tokens.is_empty() {
            return Ok(());
        }
    }
    let i = h.info();
    prop_assert!(false, "never drained: {:?}", i);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn push_consumers_deliver_legally_and_drain(
        cfg in config(),
        ops in proptest::collection::vec(op(), 1..80),
    ) {
        run(cfg, ops)?;
    }
}
