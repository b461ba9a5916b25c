//! Acks: the ack floor, ack policies, and the ack payloads `+ACK`, `-NAK`, `+WPI`, `+NXT`,
//! `+TERM` (`consumer-semantics.md` §3, §4, §7).

#[path = "consumer_harness.rs"]
mod harness;

use harness::*;
use jsproto::consumer::{AckPolicy, AckTokens, Action, Advisory, ConsumerConfig};

fn by_seq(ts: &[AckTokens], seq: u64) -> AckTokens {
    *ts.iter()
        .rev()
        .find(|t| t.stream_seq == seq)
        .expect("delivered")
}

/// (num_ack_pending, num_redelivered, num_pending)
fn counts(h: &Harness) -> (u64, u64, u64) {
    let i = h.info();
    (i.num_ack_pending, i.num_redelivered, i.num_pending)
}

fn acked(actions: &[Action]) -> Vec<(u64, u64)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Acked { stream_seqs } => Some((*stream_seqs.start(), *stream_seqs.end())),
            _ => None,
        })
        .collect()
}

fn advisories(actions: &[Action]) -> Vec<Advisory> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Advisory(adv) => Some(adv.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn worked_ack_floor_trace() {
    let mut h = Harness::new(ConsumerConfig {
        ack_wait: secs(3),
        ..explicit()
    });
    h.publish_n(10);
    let mut ts = tokens(&h.pull("w", "6"));
    assert_eq!(
        ts.iter()
            .map(|t| (t.consumer_seq, t.stream_seq))
            .collect::<Vec<_>>(),
        (1..=6).map(|i| (i, i)).collect::<Vec<_>>()
    );
    assert_eq!(h.seqs(), ((6, 6), (0, 0)));
    assert_eq!(counts(&h), (6, 0, 4));

    h.ack(by_seq(&ts, 2));
    assert_eq!((h.seqs(), counts(&h)), (((6, 6), (0, 0)), (5, 0, 4)));

    h.ack(by_seq(&ts, 1));
    assert_eq!(
        (h.seqs(), counts(&h)),
        (((6, 6), (2, 2)), (4, 0, 4)),
        "floor jumps over acked 2"
    );

    h.nak(by_seq(&ts, 3));
    assert_eq!(
        (h.seqs(), counts(&h)),
        (((6, 6), (2, 2)), (4, 0, 4)),
        "NAKed is still pending"
    );

    let out = h.pull("w", "1");
    let t = tokens(&out)[0];
    assert_eq!((t.stream_seq, t.consumer_seq, t.delivery_count), (3, 7, 2));
    assert_eq!(
        (h.seqs(), counts(&h)),
        (((7, 6), (2, 2)), (4, 1, 4)),
        "stream seq of delivered unchanged"
    );
    ts.push(t);

    h.ack_with(by_seq(&ts, 3), br#"-NAK {"delay":1000000000}"#, None);
    let out = h.pull("w", "1");
    let t = tokens(&out)[0];
    assert_eq!((t.stream_seq, t.consumer_seq, t.delivery_count), (7, 8, 1));
    assert_eq!((h.seqs(), counts(&h)), (((8, 7), (2, 2)), (5, 1, 3)));
    ts.push(t);

    let out = h.ack_with(by_seq(&ts, 4), b"+TERM", None);
    assert_eq!(acked(&out), [(4, 4)]);
    assert_eq!((h.seqs(), counts(&h)), (((8, 7), (2, 2)), (4, 1, 3)));

    assert!(h.advance(ms(999)).is_empty());
    h.advance(ms(1)); // the NAK delay ends: seq 3 goes back on the redelivery queue
    let out = h.pull("w", "3");
    let got: Vec<_> = tokens(&out)
        .iter()
        .map(|t| (t.stream_seq, t.consumer_seq, t.delivery_count))
        .collect();
    assert_eq!(got, [(3, 9, 3), (8, 10, 1), (9, 11, 1)]);
    assert_eq!(h.seqs(), ((11, 9), (2, 2)));
    assert_eq!(counts(&h), (6, 1, 1));
}

#[test]
fn worked_trace_pull_after_delay_takes_redelivery_first() {
    // Same as the reference's last row: the pull of 3 arrives after the delay.
    let mut h = Harness::new(ConsumerConfig {
        ack_wait: secs(3),
        ..explicit()
    });
    h.publish_n(10);
    let ts = tokens(&h.pull("w", "6"));
    h.ack_with(ts[2], br#"-NAK {"delay":1000000000}"#, None);
    h.advance(secs(1));
    let got: Vec<_> = tokens(&h.pull("w", "3"))
        .iter()
        .map(|t| (t.stream_seq, t.delivery_count))
        .collect();
    assert_eq!(got, [(3, 2), (7, 1), (8, 1)]);
}

#[test]
fn ack_floor_gap_fill() {
    // c01: NAK 1, ack 2..10, hold 11; redelivered 1 acked -> floor 10/10 at once.
    let mut h = Harness::new(ConsumerConfig {
        ack_wait: secs(20),
        ..explicit()
    });
    h.publish_n(11);
    let ts = tokens(&h.pull("w", r#"{"batch":11,"expires":2000000000}"#));
    assert_eq!(ts.len(), 11);
    h.nak(ts[0]);
    for t in &ts[1..10] {
        h.ack(*t);
    }
    assert_eq!(h.seqs().1, (0, 0));
    assert_eq!(h.info().num_ack_pending, 2);
    let again = tokens(&h.pull("w", r#"{"batch":1,"expires":2000000000}"#));
    assert_eq!(
        (
            again[0].stream_seq,
            again[0].delivery_count,
            again[0].consumer_seq
        ),
        (1, 2, 12)
    );
    h.ack(again[0]);
    assert_eq!(h.seqs(), ((12, 11), (10, 10)));
    assert_eq!(h.info().num_ack_pending, 1);
    h.ack(ts[10]);
    assert_eq!(h.seqs(), ((12, 11), (12, 11)));
    assert_eq!(counts(&h), (0, 0, 0));
}

#[test]
fn out_of_order_acks() {
    let mut h = Harness::new(explicit());
    h.publish_n(6);
    let ts = tokens(&h.pull("w", "4"));
    assert_eq!(h.seqs(), ((4, 4), (0, 0)));
    h.ack(ts[0]);
    h.ack(ts[1]);
    assert_eq!(h.seqs().1, (2, 2));
    h.ack(ts[3]);
    assert_eq!(h.seqs().1, (2, 2), "floor stays below the unacked 3");
    h.ack(ts[2]);
    assert_eq!(h.seqs().1, (4, 4));
    let more = tokens(&h.pull("w", "2"));
    h.ack(more[1]);
    assert_eq!(h.seqs().1, (4, 4));
    h.ack(more[0]);
    assert_eq!(h.seqs(), ((6, 6), (6, 6)));
}

#[test]
fn acks_answer_replies_but_never_delivered_ones_are_ignored() {
    let mut h = Harness::new(explicit());
    h.publish_n(3);
    let ts = tokens(&h.pull("w", "1"));
    // ack with a reply: answered (ack_sync)
    let out = h.ack_with(ts[0], b"+ACK", Some("r1"));
    assert_eq!(ack_replies(&out), ["r1"]);
    assert_eq!(acked(&out), [(1, 1)]);
    // duplicate: answered, no-op
    let out = h.ack_with(ts[0], b"", Some("r2"));
    assert_eq!(ack_replies(&out), ["r2"]);
    assert!(acked(&out).is_empty());
    // never delivered (seq 2 is stored but not delivered): ignored, not answered
    let never = AckTokens {
        stream_seq: 2,
        consumer_seq: 2,
        delivery_count: 1,
        ..ts[0]
    };
    for payload in [&b""[..], b"-NAK", b"+TERM", b"+WPI", b"junk"] {
        assert!(
            h.ack_with(never, payload, Some("r3")).is_empty(),
            "{payload:?}"
        );
    }
    assert_eq!(counts(&h), (0, 0, 2));
    // unknown payload on a delivered seq: answered, nothing else
    let out = h.ack_with(ts[0], b"+WHAT", Some("r4"));
    assert_eq!(
        out,
        [Action::AckReply {
            reply_to: "r4".into()
        }]
    );
    // acking through an older delivery's subject works (keyed by stream seq)
    let t2 = tokens(&h.pull("w", "1"))[0];
    h.nak(t2);
    let t2b = tokens(&h.pull("w", "1"))[0];
    assert_eq!((t2b.stream_seq, t2b.delivery_count), (2, 2));
    assert_eq!(acked(&h.ack(t2)), [(2, 2)]);
    assert_eq!(h.info().num_ack_pending, 0);
}

#[test]
fn ack_policy_all() {
    let mut h = Harness::new(ConsumerConfig {
        ack_policy: AckPolicy::All,
        ..explicit()
    });
    h.publish_n(5);
    let ts = tokens(&h.pull("w", "5"));
    assert_eq!(h.info().num_ack_pending, 5);
    let out = h.ack(ts[2]);
    assert_eq!(acked(&out), [(1, 3)]);
    assert_eq!(h.seqs().1, (3, 3));
    assert_eq!(h.info().num_ack_pending, 2);
    let out = h.ack_with(ts[1], b"", Some("r"));
    assert_eq!(ack_replies(&out), ["r"]);
    assert!(acked(&out).is_empty(), "at/below the floor: no-op");
    h.ack(ts[4]);
    assert_eq!(h.seqs(), ((5, 5), (5, 5)));
    assert_eq!(h.info().num_ack_pending, 0);
}

#[test]
fn ack_all_of_a_redelivery_keeps_the_acks_of_younger_messages() {
    // Seq 1 first delivered as 1 and redelivered as 3, seq 2 delivered as 2. An ack-all of
    // seq 1's redelivery covers seq 1 only, and the floor's consumer seq stays below seq 2's
    // delivery, so seq 2's own ack still counts (nats-server would set the floor to 3 and
    // ignore it, redelivering an acknowledged message).
    let mut h = Harness::new(ConsumerConfig {
        ack_policy: AckPolicy::All,
        ack_wait: secs(1),
        ..explicit()
    });
    h.publish_n(2);
    let first = tokens(&h.pull("w", "2"));
    h.ack_with(first[0], b"-NAK", None);
    let again = tokens(&h.pull("w", "1"));
    assert_eq!((again[0].stream_seq, again[0].consumer_seq), (1, 3));
    assert_eq!(acked(&h.ack(again[0])), [(1, 1)]);
    assert_eq!(h.seqs().1, (1, 1), "consumer floor below seq 2's delivery");
    assert_eq!(acked(&h.ack(first[1])), [(2, 2)]);
    assert_eq!(h.seqs(), ((3, 2), (3, 2)));
    assert_eq!(h.info().num_ack_pending, 0);
    assert!(
        deliveries(&h.advance(secs(5))).is_empty(),
        "nothing redelivered"
    );
    // Beyond what was delivered: ignored.
    let mut bogus = first[1];
    bogus.stream_seq = 9;
    assert!(acked(&h.ack(bogus)).is_empty());
    assert_eq!(h.seqs(), ((3, 2), (3, 2)));
}

#[test]
fn ack_policy_none_has_nothing_pending() {
    let cfg = ConsumerConfig {
        ack_policy: AckPolicy::None,
        max_ack_pending: Some(1),
        ..explicit()
    };
    let mut h = Harness::new(cfg);
    h.publish_n(3);
    let out = h.pull("w", "3");
    assert_eq!(
        seq_dc(&out),
        [(1, 1), (2, 1), (3, 1)],
        "max_ack_pending has no effect"
    );
    assert_eq!(acked(&out), [(1, 1), (2, 2), (3, 3)]);
    assert_eq!(h.seqs(), ((3, 3), (3, 3)));
    assert_eq!(counts(&h), (0, 0, 0));
    // acks are ignored and not answered
    let ts = tokens(&out);
    assert!(h.ack_with(ts[0], b"-NAK", Some("r")).is_empty());
    assert!(h.ack_with(ts[0], b"", Some("r")).is_empty());
    assert_eq!(h.consumer.poll_timeout(), None);
    assert!(h.advance(secs(3600)).is_empty(), "never redelivered");
    // +NXT still works as a pull
    h.publish();
    assert_eq!(
        deliveries(&h.ack_with(ts[0], b"+NXT", Some("nxt"))),
        [("nxt".into(), 4, 1)]
    );
}

#[test]
fn progress_resets_the_ack_wait_clock() {
    // c19: +WPI every 400 ms for 2.4 s keeps the job; redelivered 1 s after the last one.
    let cfg = ConsumerConfig {
        ack_wait: secs(1),
        max_deliver: Some(5),
        ..explicit()
    };
    let mut h = Harness::new(cfg);
    h.publish();
    let job = tokens(&h.pull("a", r#"{"batch":1,"expires":1000000000}"#))[0];
    h.pull("b", r#"{"batch":1,"expires":2600000000}"#);
    let mut seen = Vec::new();
    for _ in 0..6 {
        let out = h.ack_with(job, b"+WPI", Some("wpi"));
        assert_eq!(ack_replies(&out), ["wpi"]);
        seen.extend(h.advance(ms(400)));
    }
    let out = h.ack_with(job, b"+WPI", None); // last one at 2.4 s
    assert!(out.is_empty());
    assert!(
        deliveries(&seen).is_empty(),
        "redelivered despite +WPI: {seen:?}"
    );
    assert_eq!(h.elapsed(), ms(2400));
    let out = h.advance(ms(200)); // b's request expires at 2.6 s
    assert_eq!(codes(&out), [(408, "Request Timeout".into())]);
    h.pull("b", r#"{"batch":1,"expires":2500000000}"#);
    assert!(h.advance(ms(799)).is_empty());
    let fired = h.advance_timed(ms(1));
    assert_eq!(fired.len(), 1);
    assert_eq!(fired[0].0, ms(3400));
    let got = tokens(&[fired[0].1.clone()])[0];
    assert_eq!(
        (got.stream_seq, got.delivery_count, got.consumer_seq),
        (1, 2, 2)
    );

    // +TERM with a reason: advisory, floor moves, never redelivered
    let out = h.ack_with(got, b"+TERM corrupt input", Some("t"));
    assert_eq!(
        advisories(&out),
        [Advisory::Terminated {
            stream_seq: 1,
            consumer_seq: 2,
            deliveries: 2,
            reason: "corrupt input".into()
        }]
    );
    assert_eq!(ack_replies(&out), ["t"]);
    assert_eq!(h.info().num_ack_pending, 0);
    assert_eq!(h.seqs().1, (2, 1));
    h.pull("b", r#"{"batch":1,"expires":1800000000}"#);
    let out = h.advance(secs(10));
    assert!(deliveries(&out).is_empty());
    assert_eq!(codes(&out), [(408, "Request Timeout".into())]);
}

#[test]
fn plain_nak_redelivers_at_once_ahead_of_new_messages_ignoring_backoff() {
    let cfg = ConsumerConfig {
        max_deliver: Some(5),
        backoff: vec![secs(2), secs(4)],
        ..explicit()
    };
    let mut h = Harness::new(cfg);
    h.publish_n(2);
    let first = tokens(&h.pull("w", "1"))[0];
    let out = h.ack_with(first, b"-NAK", Some("r"));
    assert_eq!(ack_replies(&out), ["r"]);
    assert_eq!(
        advisories(&out),
        [Advisory::Nak {
            stream_seq: 1,
            consumer_seq: 1,
            deliveries: 1
        }]
    );
    assert_eq!(seq_dc(&h.pull("w", "2")), [(1, 2), (2, 1)]);
    // NAK of something not pending: answered, no advisory
    h.ack(first);
    let out = h.ack_with(first, b"-NAK", Some("r"));
    assert_eq!(
        out,
        [Action::AckReply {
            reply_to: "r".into()
        }]
    );
}

#[test]
fn nak_with_delay_holds_the_message_for_the_delay_only() {
    for payload in [&br#"-NAK {"delay": 1500000000}"#[..], b"-NAK 1.5s"] {
        let mut h = Harness::new(ConsumerConfig {
            ack_wait: secs(10),
            ..explicit()
        });
        h.publish();
        let t = tokens(&h.pull("w", "1"))[0];
        h.ack_with(t, payload, None);
        assert!(h
            .pull("w", r#"{"batch":1,"expires":4000000000}"#)
            .is_empty());
        assert!(h.advance(ms(1499)).is_empty());
        let fired = h.advance_timed(ms(1));
        assert_eq!(fired.len(), 1, "{payload:?}");
        assert_eq!(fired[0].0, ms(1500));
        assert_eq!(seq_dc(&[fired[0].1.clone()]), [(1, 2)]);
    }
}

#[test]
fn nak_at_max_deliver_drops_the_message() {
    let mut h = Harness::new(ConsumerConfig {
        max_deliver: Some(2),
        ..explicit()
    });
    h.publish();
    let t = tokens(&h.pull("w", "1"))[0];
    h.nak(t);
    let t = tokens(&h.pull("w", "1"))[0];
    assert_eq!(t.delivery_count, 2);
    let out = h.nak(t);
    assert!(advisories(&out).contains(&Advisory::MaxDeliver {
        stream_seq: 1,
        deliveries: 2
    }));
    assert_eq!(counts(&h), (0, 1, 0));
    assert_eq!(
        codes(&h.pull("w", r#"{"no_wait":true}"#)),
        [(404, "No Messages".into())]
    );
}

#[test]
fn next_acks_and_pulls_to_the_ack_reply() {
    let mut h = Harness::new(explicit());
    h.publish_n(4);
    let t = tokens(&h.pull("w", "1"))[0];
    let out = h.ack_with(t, br#"+NXT {"batch":2}"#, Some("nxt"));
    assert_eq!(acked(&out), [(1, 1)]);
    assert_eq!(
        deliveries(&out),
        [("nxt".into(), 2, 1), ("nxt".into(), 3, 1)]
    );
    assert!(
        ack_replies(&out).is_empty(),
        "+NXT's reply receives messages, not an empty ack reply"
    );
    let t = tokens(&out)[1];
    let out = h.ack_with(t, b"+NXT", Some("nxt"));
    assert_eq!(deliveries(&out), [("nxt".into(), 4, 1)]);
    let out = h.ack_with(t, br#"+NXT {"batch":"#, Some("nxt"));
    assert_eq!(
        codes(&out),
        [(400, "Bad Request - unexpected end of JSON input".into())]
    );
    // without a reply: only the ack
    let t = tokens(&out).first().copied().unwrap_or(AckTokens {
        stream_seq: 4,
        consumer_seq: 4,
        ..t
    });
    let out = h.ack_with(t, b"+NXT", None);
    assert_eq!(acked(&out), [(4, 4)]);
    assert!(deliveries(&out).is_empty());
}

#[test]
fn is_acked_follows_delivery_and_acks() {
    let mut h = Harness::new(ConsumerConfig::default());
    h.publish_n(3);
    assert!(!h.consumer.is_acked(1), "not delivered yet");
    let out = h.pull("w", r#"{"batch":2}"#);
    let t = tokens(&out);
    assert_eq!(t.len(), 2);
    assert!(!h.consumer.is_acked(1), "delivered, not acked");
    h.ack(t[1]);
    assert!(h.consumer.is_acked(2));
    assert!(!h.consumer.is_acked(1));
    assert!(!h.consumer.is_acked(3), "never delivered");
    h.ack_with(t[0], b"+TERM", None);
    assert!(h.consumer.is_acked(1), "terminated counts as done");
}

#[test]
fn a_message_given_up_at_max_deliver_is_not_done_until_acked_late() {
    // As nats-server: interest and work-queue streams keep what a consumer gave up at
    // max_deliver, even after a single delivery; a late ack lets it go (and reports it).
    let mut h = Harness::new(ConsumerConfig {
        max_deliver: Some(1),
        ..explicit()
    });
    h.publish_n(2);
    let t = tokens(&h.pull("w", "1"))[0];
    let out = h.nak(t);
    assert!(advisories(&out).contains(&Advisory::MaxDeliver {
        stream_seq: 1,
        deliveries: 1
    }));
    assert!(!h.consumer.is_acked(1), "given up, not done");
    assert_eq!(h.info().num_redelivered, 0, "delivered once");
    let out = h.ack(t);
    assert_eq!(acked(&out), [(1, 1)]);
    assert!(h.consumer.is_acked(1));
    // the floor does not move for a late ack
    assert_eq!(h.seqs(), ((1, 1), (0, 0)));
}
