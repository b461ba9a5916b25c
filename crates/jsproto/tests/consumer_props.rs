//! Property test: random sequences of publishes, pulls, acks, NAKs, +WPI, +TERM, time steps,
//! deletions, departing requesters and max_ack_pending raises, checked against a model of
//! what nats-server allows (`consumer-semantics.md` §3–§6).
//!
//! After every step: the consumer's counters equal a recount of its state; the ack floor is
//! at or below `delivered`; `num_ack_pending` never exceeds `max_ack_pending` (only raised
//! here); and every delivery is legal: consumer seqs count up by one, first deliveries move
//! forward through the stream, and a message is delivered again only after its ack deadline
//! (ack wait / backoff from the last delivery or `+WPI`, or a NAK delay) or a plain NAK, with
//! its delivery count one higher — never after an ack, a term, max_deliver or deletion.
//!
//! Workers also die (their connection goes: the stream stops showing interest in their reply
//! subject and the orders they held are never acked by them). Nothing is ever delivered to a
//! dead worker. At the end every worker dies and a fresh one drains the consumer, acking
//! whatever it gets: then every stored message the consumer sees has been acknowledged
//! exactly once (never twice at any point), unless it was dropped at `max_deliver`.

#[path = "consumer_harness.rs"]
mod harness;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use harness::*;
use jsproto::consumer::{
    AckPolicy, AckTokens, Action, Advisory, ConsumerConfig, PriorityPolicy, SubjectFilter,
};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Publish(u8),
    Pull {
        worker: u8,
        batch: u8,
        expires_ms: Option<u16>,
        no_wait: bool,
        max_bytes: Option<u16>,
        /// Priority-group fields (used when the consumer has a policy): min_pending,
        /// min_ack_pending, priority, and which id to send (0 none, 1 the current pin, 2 a
        /// wrong one).
        group: (u8, u8, u8, u8),
    },
    Ack {
        pick: usize,
        kind: u8,
    },
    Advance(u16),
    Gone(u8),
    /// The worker's connection dies: no interest in its reply any more, and it never acks
    /// what it holds. It comes back (a new connection, a new inbox) with its next pull.
    Die(u8),
    Remove(usize),
    RaiseCap(u8),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0u8..3).prop_map(Op::Publish),
        3 => (0u8..4, 1u8..5, proptest::option::of(100u16..3000), any::<bool>(), proptest::option::of(10u16..200), (0u8..4, 0u8..3, 0u8..3, 0u8..3))
            .prop_map(|(worker, batch, expires_ms, no_wait, max_bytes, group)| Op::Pull { worker, batch, expires_ms, no_wait, max_bytes, group }),
        4 => (any::<usize>(), 0u8..6).prop_map(|(pick, kind)| Op::Ack { pick, kind }),
        3 => (0u16..2500).prop_map(Op::Advance),
        1 => (0u8..4).prop_map(Op::Gone),
        1 => (0u8..4).prop_map(Op::Die),
        1 => any::<usize>().prop_map(Op::Remove),
        1 => (1u8..4).prop_map(Op::RaiseCap),
    ]
}

fn config() -> impl Strategy<Value = ConsumerConfig> {
    (
        proptest::option::of(1u64..5),
        proptest::option::of(2u32..4),
        any::<bool>(),
        proptest::collection::vec(0u8..3, 0..2),
        0u8..4,
        any::<bool>(),
    )
        .prop_map(
            |(cap, max_deliver, backoff, filter, policy, all)| ConsumerConfig {
                ack_policy: if all {
                    AckPolicy::All
                } else {
                    AckPolicy::Explicit
                },
                priority_policy: match policy {
                    0 => PriorityPolicy::None,
                    1 => PriorityPolicy::Overflow,
                    2 => PriorityPolicy::PinnedClient { ttl: ms(1200) },
                    _ => PriorityPolicy::Prioritized,
                },
                priority_groups: if policy == 0 {
                    vec![]
                } else {
                    vec!["jobs".into()]
                },
                ack_wait: secs(1),
                max_ack_pending: cap,
                max_deliver,
                backoff: if backoff {
                    vec![ms(500), ms(1500)]
                } else {
                    vec![]
                },
                filter_subjects: {
                    let mut f: Vec<String> = filter.iter().map(|i| format!("orders.{i}")).collect();
                    f.dedup();
                    f
                },
                ..explicit()
            },
        )
}

/// What the model knows about one outstanding (delivered, not done) message.
#[derive(Debug, Clone, Copy)]
struct Out {
    delivery_count: u64,
    /// A redelivery is legal from this instant on (unless a plain NAK allows it earlier).
    due: Instant,
    naked: bool,
}

struct Model {
    cfg: ConsumerConfig,
    out: BTreeMap<u64, Out>,
    last_consumer_seq: u64,
    last_new_stream_seq: u64,
    /// Deliveries a live worker may still ack: (reply subject, tokens).
    tokens: Vec<(String, AckTokens)>,
    /// How many times each stream seq was reported `Acked`.
    acked: BTreeMap<u64, u32>,
    /// Stream seqs dropped at `max_deliver`.
    exhausted: BTreeSet<u64>,
    /// Reply subjects of dead workers.
    dead: BTreeSet<String>,
}

impl Model {
    fn wait(&self, dc: u64) -> Duration {
        self.cfg.ack_deadline_after(dc as u32)
    }

    fn observe(&mut self, at: Instant, actions: &[Action]) -> Result<(), TestCaseError> {
        for a in actions {
            match a {
                Action::Deliver { ack, reply_to, .. } => {
                    let reply = String::from_utf8_lossy(reply_to).into_owned();
                    prop_assert!(!self.dead.contains(&reply), "delivered to dead {}", reply);
                    prop_assert_eq!(
                        ack.consumer_seq,
                        self.last_consumer_seq + 1,
                        "consumer seq gap"
                    );
                    self.last_consumer_seq = ack.consumer_seq;
                    let seq = ack.stream_seq;
                    if ack.delivery_count == 1 {
                        prop_assert!(
                            seq > self.last_new_stream_seq,
                            "first delivery went backwards"
                        );
                        prop_assert!(!self.out.contains_key(&seq));
                        self.last_new_stream_seq = seq;
                        let due = at + self.wait(1);
                        self.out.insert(
                            seq,
                            Out {
                                delivery_count: 1,
                                due,
                                naked: false,
                            },
                        );
                    } else {
                        let o = self.out.get(&seq).copied();
                        prop_assert!(o.is_some(), "redelivery of {} which is done", seq);
                        let o = o.unwrap();
                        prop_assert_eq!(ack.delivery_count, o.delivery_count + 1);
                        prop_assert!(
                            o.naked || at >= o.due,
                            "redelivered {} early: {:?} < {:?}",
                            seq,
                            at,
                            o.due
                        );
                        let due = at + self.wait(ack.delivery_count);
                        self.out.insert(
                            seq,
                            Out {
                                delivery_count: ack.delivery_count,
                                due,
                                naked: false,
                            },
                        );
                    }
                    self.tokens.push((reply, *ack));
                }
                Action::Acked { stream_seqs } => {
                    for seq in stream_seqs.clone() {
                        let n = self.acked.entry(seq).or_insert(0);
                        *n += 1;
                        prop_assert_eq!(*n, 1, "stream seq {} acknowledged twice", seq);
                    }
                }
                Action::Advisory(Advisory::MaxDeliver {
                    stream_seq,
                    deliveries,
                }) => {
                    let o = self.out.remove(stream_seq);
                    prop_assert!(o.is_some());
                    self.exhausted.insert(*stream_seq);
                    let max = u64::from(self.cfg.max_deliver.expect("max_deliver set"));
                    prop_assert!(u64::from(*deliveries) >= max);
                }
                _ => {}
            }
        }
        Ok(())
    }
}

fn run(cfg: ConsumerConfig, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let mut h = Harness::new(cfg.clone());
    let mut m = Model {
        cfg,
        out: BTreeMap::new(),
        last_consumer_seq: 0,
        last_new_stream_seq: 0,
        tokens: vec![],
        acked: BTreeMap::new(),
        exhausted: BTreeSet::new(),
        dead: BTreeSet::new(),
    };
    // Each worker's current inbox; a dead worker comes back with a new one.
    let mut incarnation = [0u32; 4];
    let inbox = |w: u8, incarnation: &[u32; 4]| format!("w{w}.{}", incarnation[usize::from(w)]);
    for op in ops {
        let now = h.now;
        match op {
            Op::Publish(i) => {
                let out = h.publish_on(&format!("orders.{i}"));
                m.observe(now, &out)?;
            }
            Op::Pull {
                worker,
                batch,
                expires_ms,
                no_wait,
                max_bytes,
                group,
            } => {
                let mut body = format!(r#"{{"batch":{batch},"no_wait":{no_wait}"#);
                body += &group_fields(&h, group);
                if let Some(e) = expires_ms {
                    body += &format!(r#","expires":{}"#, u64::from(e) * 1_000_000);
                }
                if let Some(b) = max_bytes {
                    body += &format!(r#","max_bytes":{b}"#);
                }
                body += "}";
                let out = h.pull(&inbox(worker, &incarnation), &body);
                m.observe(now, &out)?;
            }
            Op::Ack { pick, kind } => {
                if m.tokens.is_empty() {
                    continue;
                }
                let t = m.tokens[pick % m.tokens.len()].1;
                let payload: &[u8] = match kind {
                    0 | 1 => b"+ACK",
                    2 => b"-NAK",
                    3 => br#"-NAK {"delay":700000000}"#,
                    4 => b"+WPI",
                    _ => b"+TERM",
                };
                if let Some(o) = m.out.get_mut(&t.stream_seq) {
                    match kind {
                        2 => o.naked = true,
                        3 => {
                            o.naked = false;
                            o.due = now + ms(700);
                        }
                        4 => {
                            o.naked = false;
                            o.due = now + m.cfg.ack_deadline_after(o.delivery_count as u32);
                        }
                        0 | 1 | 5 if m.cfg.ack_policy == AckPolicy::All => {}
                        0 | 1 | 5 => {
                            m.out.remove(&t.stream_seq);
                        }
                        _ => {}
                    }
                }
                // `ack_policy: all`: an ack (or term) of any delivery, however stale, covers
                // every message up to its stream seq.
                if m.cfg.ack_policy == AckPolicy::All && matches!(kind, 0 | 1 | 5) {
                    m.out.retain(|&seq, _| seq > t.stream_seq);
                }
                let out = h.ack_with(t, payload, None);
                m.observe(now, &out)?;
            }
            Op::Advance(d) => {
                for (t, a) in h.advance_timed(ms(u64::from(d))) {
                    m.observe(h.start + t, &[a])?;
                }
            }
            Op::Gone(w) => {
                h.consumer
                    .on_request_gone(inbox(w, &incarnation).as_bytes());
                h.check();
            }
            Op::Die(w) => {
                let reply = inbox(w, &incarnation);
                h.stream.gone.push(reply.clone());
                m.tokens.retain(|(r, _)| *r != reply);
                m.dead.insert(reply);
                incarnation[usize::from(w)] += 1;
            }
            Op::Remove(pick) => {
                let Some(&seq) = h.stream.msgs.keys().nth(pick % h.stream.msgs.len().max(1)) else {
                    continue;
                };
                let subject = h.stream.msgs.remove(&seq).unwrap().subject;
                let mut out = Vec::new();
                h.consumer
                    .on_stream_remove(now, seq, subject.as_bytes(), &h.stream, &mut out);
                h.check();
                m.out.remove(&seq);
                m.observe(now, &out)?;
            }
            Op::RaiseCap(by) => {
                if let Some(cap) = m.cfg.max_ack_pending {
                    m.cfg.max_ack_pending = Some(cap + u64::from(by));
                    let mut out = Vec::new();
                    h.consumer
                        .update_config(now, m.cfg.clone(), &h.stream, &mut out)
                        .unwrap();
                    h.check();
                    m.observe(now, &out)?;
                }
            }
        }
        check_step(&h, &m)?;
    }
    drain(h, m, incarnation)
}

/// What must hold after every step.
fn check_step(h: &Harness, m: &Model) -> Result<(), TestCaseError> {
    let info = h.info();
    prop_assert_eq!(
        info.num_ack_pending,
        m.out.len() as u64,
        "outstanding deliveries"
    );
    if let Some(cap) = m.cfg.max_ack_pending {
        prop_assert!(info.num_ack_pending <= cap);
    }
    prop_assert!(info.ack_floor.stream_seq <= info.delivered.stream_seq);
    prop_assert!(info.ack_floor.consumer_seq <= info.delivered.consumer_seq);
    prop_assert_eq!(info.delivered.consumer_seq, m.last_consumer_seq);
    if let Some((&lowest, _)) = m.out.iter().next() {
        prop_assert!(
            info.ack_floor.stream_seq < lowest,
            "floor passed an outstanding message"
        );
    }
    for (&seq, &n) in &m.acked {
        prop_assert!(
            n == 1 && !m.out.contains_key(&seq),
            "acked {} is still outstanding",
            seq
        );
    }
    Ok(())
}

/// The group fields of a pull on `h`'s consumer (none without a priority policy):
/// `(min_pending, min_ack_pending, priority, id)` as in [`Op::Pull`].
fn group_fields(
    h: &Harness,
    (min_pending, min_ack_pending, priority, id): (u8, u8, u8, u8),
) -> String {
    let policy = h.consumer.config().priority_policy;
    if policy == PriorityPolicy::None {
        return String::new();
    }
    let mut f = String::from(r#","group":"jobs""#);
    match policy {
        PriorityPolicy::Overflow => {
            f += &format!(r#","min_pending":{min_pending},"min_ack_pending":{min_ack_pending}"#)
        }
        PriorityPolicy::Prioritized => f += &format!(r#","priority":{priority}"#),
        PriorityPolicy::PinnedClient { .. } => match (id, h.consumer.pin()) {
            (1, Some((pin, _))) => f += &format!(r#","id":"{pin}""#),
            (2, _) => f += r#","id":"stale""#,
            _ => {}
        },
        PriorityPolicy::None => {}
    }
    f
}

/// Every worker dies; a fresh one pulls and acks until nothing is left. Then every stored
/// message the consumer sees was acknowledged exactly once (or dropped at `max_deliver`).
fn drain(mut h: Harness, mut m: Model, incarnation: [u32; 4]) -> Result<(), TestCaseError> {
    for (w, i) in incarnation.iter().enumerate() {
        let reply = format!("w{w}.{i}");
        h.stream.gone.push(reply.clone());
        m.dead.insert(reply);
    }
    m.tokens.clear();
    let filter = SubjectFilter::new(&m.cfg.filter_subjects);
    let visible: Vec<u64> = h
        .stream
        .msgs
        .iter()
        .filter(|(_, msg)| filter.matches(msg.subject.as_bytes()))
        .map(|(&seq, _)| seq)
        .collect();
    let settled = |m: &Model| {
        visible
            .iter()
            .all(|s| m.acked.contains_key(s) || m.exhausted.contains(s))
    };
    let mut rounds = 0;
    while !settled(&m) {
        rounds += 1;
        prop_assert!(rounds < 1000, "drain does not finish: {:?}", h.info());
        // Longer than any ack deadline (ack wait 1 s, backoff ≤ 1.5 s, NAK delay 0.7 s).
        for (t, a) in h.advance_timed(ms(2000)) {
            m.observe(h.start + t, &[a])?;
        }
        let now = h.now;
        let body = format!(
            r#"{{"batch":50,"no_wait":true{}}}"#,
            group_fields(&h, (0, 0, 0, 1))
        );
        let out = h.pull("survivor", &body);
        m.observe(now, &out)?;
        for (_, t) in std::mem::take(&mut m.tokens) {
            m.out.remove(&t.stream_seq);
            let out = h.ack(t);
            m.observe(now, &out)?;
        }
        check_step(&h, &m)?;
    }
    for seq in &visible {
        let n = m.acked.get(seq).copied().unwrap_or(0);
        prop_assert!(
            n == 1 || (n == 0 && m.exhausted.contains(seq)),
            "stored message {} acknowledged {} times",
            seq,
            n
        );
    }
    let info = h.info();
    prop_assert_eq!(info.num_ack_pending, 0);
    prop_assert_eq!(info.num_pending, 0);
    if m.exhausted.is_empty() {
        prop_assert_eq!(info.ack_floor, info.delivered, "everything acked");
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn random_operations_keep_invariants(cfg in config(), ops in proptest::collection::vec(op(), 1..80)) {
        run(cfg, ops)?;
    }
}
