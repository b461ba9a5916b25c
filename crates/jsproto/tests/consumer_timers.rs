//! Time and capacity: ack wait, backoff, max_deliver, max_ack_pending, config updates,
//! persistence, purges, deliver policies, scale (`consumer-semantics.md` §5, §8, §9, §13).

#[path = "consumer_harness.rs"]
mod harness;

use std::time::Duration;

use bytes::Bytes;
use harness::*;
use jsproto::consumer::{
    AckKind, AckPolicy, Action, Advisory, Consumer, ConsumerConfig, ConsumerError, DeliverPolicy,
    Leftover, PullRequest, PullStatus, SubjectFilter, REASON_UNACKED_DELETED,
};

fn advisories(actions: &[Action]) -> Vec<Advisory> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Advisory(adv) => Some(adv.clone()),
            _ => None,
        })
        .collect()
}

/// (time, stream seq, delivery count) of timed deliveries.
fn timed(fired: &[(Duration, Action)]) -> Vec<(Duration, u64, u64)> {
    fired
        .iter()
        .filter_map(|(t, a)| match a {
            Action::Deliver { ack, .. } => Some((*t, ack.stream_seq, ack.delivery_count)),
            _ => None,
        })
        .collect()
}

#[test]
fn redelivery_exactly_at_ack_wait_to_a_waiting_worker() {
    let mut h = Harness::new(explicit()); // default ack_wait 30 s
    h.publish_n(3);
    assert_eq!(seq_dc(&h.pull("crashed", "1")), [(1, 1)]);
    // the survivor keeps asking; it gets 2 and 3 first, then the lost one at 30 s exactly
    let out = h.pull("survivor", "1");
    assert_eq!(seq_dc(&out), [(2, 1)]);
    h.ack(tokens(&out)[0]);
    assert_eq!(seq_dc(&h.pull("survivor", "1")), [(3, 1)]);
    h.pull("survivor", "1");
    assert!(h.advance(secs(30) - ms(1)).is_empty());
    let fired = h.advance_timed(ms(1));
    assert_eq!(timed(&fired), [(secs(30), 1, 2)]);
    assert_eq!(
        deliveries(&fired.into_iter().map(|(_, a)| a).collect::<Vec<_>>())[0].0,
        "survivor"
    );
    let i = h.info();
    assert_eq!((i.num_redelivered, i.num_ack_pending), (1, 2));
}

#[test]
fn expiry_without_a_pull_changes_no_counts() {
    // c06
    let mut h = Harness::new(ConsumerConfig {
        ack_wait: secs(1),
        ..explicit()
    });
    h.publish_n(5);
    assert_eq!(
        seq_dc(&h.pull("w", r#"{"batch":1,"expires":1000000000}"#)),
        [(1, 1)]
    );
    let c = |h: &Harness| {
        (
            h.info().num_ack_pending,
            h.info().num_pending,
            h.info().num_redelivered,
        )
    };
    assert_eq!(c(&h), (1, 4, 0));
    h.advance(ms(2200));
    assert_eq!(c(&h), (1, 4, 0));
    assert_eq!(h.seqs().0, (1, 1));
    let ts = tokens(&h.pull("w", r#"{"batch":2,"expires":1000000000}"#));
    let got: Vec<_> = ts
        .iter()
        .map(|t| {
            (
                t.stream_seq,
                t.delivery_count,
                t.consumer_seq,
                t.num_pending,
            )
        })
        .collect();
    assert_eq!(got, [(1, 2, 2, 4), (2, 1, 3, 3)]);
    assert_eq!(c(&h), (2, 3, 1));
    assert_eq!(h.seqs(), ((3, 2), (0, 0)));
}

#[test]
fn backoff_schedule_and_max_deliver_advisory() {
    let cfg = ConsumerConfig {
        max_deliver: Some(4),
        backoff: vec![secs(1), secs(2)],
        ..explicit()
    };
    let mut h = Harness::new(cfg);
    h.publish();
    h.pull("w", "100");
    let mut fired = vec![];
    fired.extend(h.advance_timed(secs(10)));
    // the first delivery happened at 0 inside `pull`
    assert_eq!(
        timed(&fired),
        [(secs(1), 1, 2), (secs(3), 1, 3), (secs(5), 1, 4)]
    );
    let adv: Vec<_> = fired
        .iter()
        .filter_map(|(t, a)| advisories(std::slice::from_ref(a)).pop().map(|x| (*t, x)))
        .collect();
    assert_eq!(
        adv,
        [(
            secs(7),
            Advisory::MaxDeliver {
                stream_seq: 1,
                deliveries: 4
            }
        )]
    );
    let i = h.info();
    assert_eq!((i.num_ack_pending, i.num_redelivered), (0, 1));
}

#[test]
fn max_deliver_advisory_once_and_floor_quirk() {
    let cfg = ConsumerConfig {
        ack_wait: secs(1),
        max_deliver: Some(2),
        ..explicit()
    };
    let mut h = Harness::new(cfg);
    h.publish();
    h.pull("w", "100");
    let fired = h.advance_timed(secs(60));
    assert_eq!(timed(&fired), [(secs(1), 1, 2)]);
    let adv: Vec<_> = fired
        .iter()
        .filter_map(|(t, a)| advisories(std::slice::from_ref(a)).pop().map(|x| (*t, x)))
        .collect();
    assert_eq!(
        adv,
        [(
            secs(2),
            Advisory::MaxDeliver {
                stream_seq: 1,
                deliveries: 2
            }
        )]
    );
    let i = h.info();
    assert_eq!((i.num_ack_pending, i.num_redelivered), (0, 1));
    // as nats-server 2.15.1: the floor does not move past the exhausted message by itself
    assert_eq!(h.seqs(), ((2, 1), (0, 0)));
    // the next ack that empties pending collapses it onto delivered
    let t = tokens(&h.publish())[0];
    h.ack(t);
    assert_eq!(h.seqs(), ((3, 2), (3, 2)));
    // the exhausted one still counts as redelivered until it leaves the stream
    assert_eq!(h.info().num_redelivered, 1);
    let mut out = Vec::new();
    h.consumer
        .on_stream_remove(h.now, 1, b"orders.new", &h.stream, &mut out);
    assert_eq!(h.info().num_redelivered, 0);
}

#[test]
fn max_ack_pending_stalls_new_deliveries_and_resumes_on_ack() {
    let mut h = Harness::new(ConsumerConfig {
        max_ack_pending: Some(3),
        ..explicit()
    });
    h.publish_n(10);
    let mut held = Vec::new();
    for w in 0..10 {
        held.extend(tokens(&h.pull(&format!("w{w}"), "1")));
    }
    assert_eq!(held.len(), 3);
    let i = h.info();
    assert_eq!(
        (
            i.num_ack_pending,
            i.delivered.stream_seq,
            i.num_pending,
            i.num_waiting
        ),
        (3, 3, 7, 7)
    );
    // an ack frees one slot: the head of the line (w3) gets seq 4 at once
    let out = h.ack(held[0]);
    assert_eq!(deliveries(&out), [("w3".into(), 4, 1)]);
    // +TERM frees one too
    let out = h.ack_with(held[1], b"+TERM", None);
    assert_eq!(deliveries(&out), [("w4".into(), 5, 1)]);
    assert_eq!(h.info().num_ack_pending, 3);
}

#[test]
fn capped_request_times_out_with_the_undelivered_remainder() {
    let mut h = Harness::new(ConsumerConfig {
        max_ack_pending: Some(2),
        ..explicit()
    });
    h.publish_n(5);
    let out = h.pull("w", r#"{"batch":5,"expires":1000000000}"#);
    assert_eq!(seq_dc(&out), [(1, 1), (2, 1)]);
    let out = h.advance(secs(1));
    assert_eq!(
        statuses(&out),
        [(
            "w".into(),
            PullStatus::RequestTimeout(Leftover {
                messages: 3,
                bytes: 0
            })
        )]
    );
}

#[test]
fn redeliveries_still_go_out_at_the_cap() {
    let cfg = ConsumerConfig {
        max_ack_pending: Some(2),
        ack_wait: secs(1),
        ..explicit()
    };
    let mut h = Harness::new(cfg);
    h.publish_n(4);
    assert_eq!(seq_dc(&h.pull("w", "2")), [(1, 1), (2, 1)]);
    h.pull("w", "4");
    let fired = h.advance_timed(secs(1));
    assert_eq!(timed(&fired), [(secs(1), 1, 2), (secs(1), 2, 2)]);
    assert_eq!(h.info().num_ack_pending, 2);
    assert_eq!(h.info().num_pending, 2);
}

#[test]
fn raising_max_ack_pending_lets_exactly_that_many_more_out() {
    let mut h = Harness::new(ConsumerConfig {
        max_ack_pending: Some(2),
        ..explicit()
    });
    h.publish_n(10);
    for w in 0..8 {
        h.pull(&format!("w{w}"), "1");
    }
    assert_eq!(h.info().num_ack_pending, 2);
    let mut out = Vec::new();
    let cfg = ConsumerConfig {
        max_ack_pending: Some(4),
        ..explicit()
    };
    h.consumer
        .update_config(h.now, cfg, &h.stream, &mut out)
        .unwrap();
    assert_eq!(deliveries(&out), [("w2".into(), 3, 1), ("w3".into(), 4, 1)]);
    let mut out = Vec::new();
    let cfg = ConsumerConfig {
        max_ack_pending: Some(6),
        ..explicit()
    };
    h.consumer
        .update_config(h.now, cfg, &h.stream, &mut out)
        .unwrap();
    assert_eq!(seq_dc(&out), [(5, 1), (6, 1)]);
    assert_eq!(h.info().num_ack_pending, 6);
    // unlimited
    let mut out = Vec::new();
    let cfg = ConsumerConfig {
        max_ack_pending: None,
        ..explicit()
    };
    h.consumer
        .update_config(h.now, cfg, &h.stream, &mut out)
        .unwrap();
    assert_eq!(seq_dc(&out), [(7, 1), (8, 1)]);
}

#[test]
fn update_rules() {
    let mut h = Harness::new(explicit());
    let mut out = Vec::new();
    let bad = ConsumerConfig {
        ack_policy: AckPolicy::All,
        ..explicit()
    };
    let err = h
        .consumer
        .update_config(h.now, bad, &h.stream, &mut out)
        .unwrap_err();
    assert_eq!(err.to_string(), "ack policy can not be updated");
    let bad = ConsumerConfig {
        max_waiting: 10,
        ..explicit()
    };
    let err = h
        .consumer
        .update_config(h.now, bad, &h.stream, &mut out)
        .unwrap_err();
    assert_eq!(
        err,
        ConsumerError::CannotUpdate {
            field: "max waiting"
        }
    );
    let bad = ConsumerConfig {
        deliver_policy: DeliverPolicy::New,
        ..explicit()
    };
    let err = h
        .consumer
        .update_config(h.now, bad, &h.stream, &mut out)
        .unwrap_err();
    assert_eq!(err.to_string(), "deliver policy can not be updated");
    let bad = ConsumerConfig {
        max_deliver: Some(1),
        backoff: vec![secs(1), secs(2)],
        ..explicit()
    };
    let err = h
        .consumer
        .update_config(h.now, bad, &h.stream, &mut out)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "max deliver is required to be > length of backoff values"
    );
    let bad = ConsumerConfig {
        filter_subjects: vec!["a.>".into(), "a.b".into()],
        ..explicit()
    };
    assert!(matches!(
        h.consumer.update_config(h.now, bad, &h.stream, &mut out),
        Err(ConsumerError::OverlappingFilters(..))
    ));
    assert!(out.is_empty());
}

#[test]
fn ack_wait_change_applies_to_outstanding_deliveries() {
    let mut h = Harness::new(explicit());
    h.publish();
    h.pull("w", "1");
    h.advance(secs(5));
    h.pull("w", "1");
    let mut out = Vec::new();
    let cfg = ConsumerConfig {
        ack_wait: secs(10),
        ..explicit()
    };
    h.consumer
        .update_config(h.now, cfg, &h.stream, &mut out)
        .unwrap();
    assert!(out.is_empty());
    let fired = h.advance_timed(secs(30));
    assert_eq!(timed(&fired)[0], (secs(10), 1, 2));
    // and shrinking it below the time already waited makes it due at once
    let mut h = Harness::new(explicit());
    h.publish();
    h.pull("w", "1");
    h.advance(secs(5));
    h.pull("w", "1");
    let mut out = Vec::new();
    let cfg = ConsumerConfig {
        ack_wait: secs(2),
        ..explicit()
    };
    h.consumer
        .update_config(h.now, cfg, &h.stream, &mut out)
        .unwrap();
    assert_eq!(seq_dc(&out), [(1, 2)]);
}

#[test]
fn filter_change_keeps_position_and_recounts() {
    let mut h = Harness::new(explicit());
    for s in ["a.1", "b.1", "a.2", "b.2", "a.3"] {
        h.publish_on(s);
    }
    assert_eq!(seq_dc(&h.pull("w", "2")), [(1, 1), (2, 1)]);
    let mut out = Vec::new();
    let cfg = ConsumerConfig {
        filter_subjects: vec!["b.*".into()],
        ..explicit()
    };
    h.consumer
        .update_config(h.now, cfg, &h.stream, &mut out)
        .unwrap();
    assert_eq!(h.info().num_pending, 1);
    assert_eq!(seq_dc(&h.pull("w", "5")), [(4, 1)]);
}

#[test]
fn snapshot_and_restore_keep_state_and_ack_wait_from_persisted_time() {
    let mut h = Harness::new(ConsumerConfig {
        ack_wait: secs(10),
        ..explicit()
    });
    h.publish_n(6);
    let ts = tokens(&h.pull("w", "4"));
    h.ack(ts[0]);
    h.advance(secs(2));
    h.nak(ts[2]); // queued, not redelivered before the "crash"
    h.advance(secs(1));
    h.ack_with(ts[3], b"+WPI", None); // clock of 4 restarts at 3 s
    h.advance(secs(2));
    let state = h.consumer.snapshot(h.now, h.unix_now());
    assert_eq!(state.delivered.consumer_seq, 4);
    assert_eq!(state.pending.len(), 3);
    let pending_ts: Vec<_> = state
        .pending
        .iter()
        .map(|p| (p.stream_seq, p.timestamp_unix_ns))
        .collect();
    let at = |s: u64| (EPOCH_UNIX_NS + s * 1_000_000_000) as i64;
    assert_eq!(pending_ts, [(2, at(0)), (3, at(0)), (4, at(3))]);

    // restart: a new process, a new monotonic clock, wall clock 5 s after the epoch
    let new_start = h.now + secs(1000);
    let unix = h.unix_now();
    let mut c = Consumer::restore(
        STREAM,
        ConsumerConfig {
            ack_wait: secs(10),
            ..explicit()
        },
        &state,
        &h.stream,
        new_start,
        unix,
    )
    .unwrap();
    let i = c.info();
    assert_eq!((i.delivered.consumer_seq, i.delivered.stream_seq), (4, 4));
    assert_eq!((i.ack_floor.consumer_seq, i.ack_floor.stream_seq), (1, 1));
    assert_eq!((i.num_ack_pending, i.num_pending, i.num_waiting), (3, 2, 0));
    c.check_invariants(&h.stream).unwrap();
    assert_eq!(
        state.queued,
        [3],
        "the NAKed 3 waits in the redelivery queue"
    );
    // the NAKed 3 goes out first, as without the restart (nats-server would make it wait out
    // its ack wait again), then the next undelivered seq
    let mut out = Vec::new();
    c.on_pull_request(
        new_start,
        Bytes::from_static(b"w"),
        PullRequest {
            batch: 2,
            ..PullRequest::default()
        },
        &h.stream,
        &mut out,
    );
    assert_eq!(seq_dc(&out), [(3, 2), (5, 1)]);
    assert_eq!(tokens(&out)[0].consumer_seq, 5);
    // 2 is due 10 s after its delivery at 0 (5 s after the restart), 4 at 13 s (8 s after)
    assert_eq!(c.poll_timeout(), Some(new_start + secs(5)));
    let mut out = Vec::new();
    c.on_timeout(new_start + secs(5), &h.stream, &mut out);
    c.on_pull_request(
        new_start + secs(5),
        Bytes::from_static(b"w"),
        PullRequest {
            batch: 5,
            ..PullRequest::default()
        },
        &h.stream,
        &mut out,
    );
    assert_eq!(seq_dc(&out), [(2, 2), (6, 1)]);
    assert_eq!(c.poll_timeout(), Some(new_start + secs(8)));
    c.check_invariants(&h.stream).unwrap();

    // state written before the queue was kept (no `queued` field) still restores
    let mut old = serde_json::to_value(&state).unwrap();
    old.as_object_mut().unwrap().remove("queued");
    let old: jsproto::consumer::PersistedState = serde_json::from_value(old).unwrap();
    assert!(old.queued.is_empty());

    // a bad state is refused
    let mut bad = state.clone();
    bad.ack_floor.stream_seq = 9;
    assert!(matches!(
        Consumer::restore(STREAM, explicit(), &bad, &h.stream, new_start, unix),
        Err(ConsumerError::InvalidState(_))
    ));
}

#[test]
fn filtered_purge_moves_floor_and_keeps_other_consumers() {
    // c02: 10 eu + 10 us interleaved; purge eu
    let mut stream = MemStream::default();
    for _ in 0..10 {
        stream.append("c02.eu", 8, EPOCH_UNIX_NS);
        stream.append("c02.us", 8, EPOCH_UNIX_NS);
    }
    let mut eu = Harness::with_stream(
        ConsumerConfig {
            filter_subjects: vec!["c02.eu".into()],
            ..explicit()
        },
        stream.clone(),
        1,
    );
    let mut all = Harness::with_stream(explicit(), stream, 1);
    assert_eq!((eu.info().num_pending, all.info().num_pending), (10, 20));
    for h in [&mut eu, &mut all] {
        h.stream.msgs.retain(|_, m| m.subject != "c02.eu");
    }
    let mut out = Vec::new();
    eu.consumer
        .on_stream_purge(eu.now, 21, &eu.stream, &mut out);
    eu.check();
    assert_eq!(eu.info().num_pending, 0);
    assert_eq!(eu.seqs().1, (0, 20));
    all.consumer.resync(all.now, &all.stream, &mut out);
    all.check();
    assert_eq!(all.info().num_pending, 10);
    assert!(out.is_empty());
}

#[test]
fn purge_drops_pending_below_and_moves_floor() {
    let mut h = Harness::new(explicit());
    h.publish_n(6);
    let ts = tokens(&h.pull("w", "4"));
    h.ack(ts[1]);
    h.stream.msgs.retain(|&s, _| s >= 4);
    let mut out = Vec::new();
    h.consumer.on_stream_purge(h.now, 4, &h.stream, &mut out);
    h.check();
    assert_eq!(h.seqs(), ((4, 4), (3, 3)));
    assert_eq!(h.info().num_ack_pending, 1);
    assert_eq!(h.info().num_pending, 2);
    // whole-stream purge past the read position
    h.stream.msgs.clear();
    h.consumer.on_stream_purge(h.now, 7, &h.stream, &mut out);
    h.check();
    assert_eq!(h.seqs(), ((4, 6), (4, 6)));
    assert_eq!((h.info().num_ack_pending, h.info().num_pending), (0, 0));
    assert_eq!(seq_dc(&h.publish_n(1)), []);
    assert_eq!(seq_dc(&h.pull("w", "1")), [(7, 1)]);
}

#[test]
fn removed_messages_keep_counts_exact() {
    let mut h = Harness::new(explicit());
    h.publish_n(5);
    let ts = tokens(&h.pull("w", "2"));
    // an undelivered one goes
    h.stream.msgs.remove(&4);
    let mut out = Vec::new();
    h.consumer
        .on_stream_remove(h.now, 4, b"orders.new", &h.stream, &mut out);
    h.check();
    assert_eq!(h.info().num_pending, 2);
    // a pending one goes: like +TERM
    h.stream.msgs.remove(&1);
    h.consumer
        .on_stream_remove(h.now, 1, b"orders.new", &h.stream, &mut out);
    h.check();
    assert_eq!(
        advisories(&out),
        [Advisory::Terminated {
            stream_seq: 1,
            consumer_seq: 1,
            deliveries: 1,
            reason: REASON_UNACKED_DELETED.into()
        }]
    );
    assert_eq!(h.seqs().1, (1, 1));
    assert_eq!(h.info().num_ack_pending, 1);
    // a queued redelivery whose message vanished without notice is skipped
    h.nak(ts[1]);
    h.stream.msgs.remove(&2);
    let out = h.pull("w", "5");
    assert_eq!(seq_dc(&out), [(3, 1), (5, 1)]);
    assert_eq!(h.info().num_ack_pending, 2);
}

#[test]
fn deliver_policies_resolve_start_seq() {
    let mut stream = MemStream::default();
    for (i, s) in ["a", "b", "a", "c", "b", "a", "c", "b"].iter().enumerate() {
        stream.append(s, 1, EPOCH_UNIX_NS + i as u64 * 1000);
    }
    let all = SubjectFilter::default();
    let only_a = SubjectFilter::new(&["a".into()]);
    assert_eq!(DeliverPolicy::All.start_seq(&stream, &all), 1);
    assert_eq!(DeliverPolicy::Last.start_seq(&stream, &all), 8);
    assert_eq!(DeliverPolicy::Last.start_seq(&stream, &only_a), 6);
    assert_eq!(DeliverPolicy::New.start_seq(&stream, &all), 9);
    assert_eq!(
        DeliverPolicy::ByStartSequence(4).start_seq(&stream, &all),
        4
    );
    assert_eq!(
        DeliverPolicy::ByStartTime(EPOCH_UNIX_NS + 2500).start_seq(&stream, &all),
        4
    );
    let h = Harness::with_stream(explicit(), stream, 4);
    assert_eq!(h.seqs(), ((0, 3), (0, 3)));
    assert_eq!(h.info().num_pending, 5);
}

#[test]
fn one_hundred_thousand_outstanding_acks() {
    const N: u64 = 100_000;
    let mut stream = MemStream::default();
    for _ in 0..N {
        stream.append("orders.new", 16, EPOCH_UNIX_NS);
    }
    let h = Harness::with_stream(
        ConsumerConfig {
            max_ack_pending: None,
            ..explicit()
        },
        stream,
        1,
    );
    let (mut c, stream, now) = (h.consumer, h.stream, h.now);
    let mut out = Vec::new();
    let req = PullRequest {
        batch: N,
        ..PullRequest::default()
    };
    c.on_pull_request(now, Bytes::from_static(b"w"), req, &stream, &mut out);
    assert_eq!(out.len() as u64, N);
    assert_eq!(c.info().num_ack_pending, N);
    c.check_invariants(&stream).unwrap();

    // all expire together: queued in stream order, redelivered to the next pull
    let later = now + secs(30);
    assert_eq!(c.poll_timeout(), Some(later));
    let mut out = Vec::new();
    c.on_timeout(later, &stream, &mut out);
    assert!(out.is_empty());
    let req = PullRequest {
        batch: N,
        ..PullRequest::default()
    };
    c.on_pull_request(later, Bytes::from_static(b"w"), req, &stream, &mut out);
    let ts = tokens(&out);
    assert_eq!(ts.len() as u64, N);
    assert!(ts
        .iter()
        .enumerate()
        .all(|(i, t)| t.stream_seq == i as u64 + 1 && t.delivery_count == 2));
    assert_eq!(c.info().num_redelivered, N);

    // ack everything but the first, newest first: the floor waits for the first
    let mut out = Vec::new();
    for t in ts.iter().skip(1).rev() {
        c.on_ack(later, *t, AckKind::Ack, None, &stream, &mut out);
    }
    let i = c.info();
    assert_eq!((i.num_ack_pending, i.ack_floor.stream_seq), (1, 0));
    c.on_ack(later, ts[0], AckKind::Ack, None, &stream, &mut out);
    let i = c.info();
    assert_eq!((i.num_ack_pending, i.num_redelivered), (0, 0));
    assert_eq!(
        (i.ack_floor.consumer_seq, i.ack_floor.stream_seq),
        (2 * N, N)
    );
    c.check_invariants(&stream).unwrap();
}

#[test]
fn ten_thousand_waiting_requests() {
    let mut h = Harness::new(ConsumerConfig {
        max_waiting: 10_000,
        max_ack_pending: None,
        ..explicit()
    });
    let (mut c, mut stream, now) = (h.consumer.clone(), std::mem::take(&mut h.stream), h.now);
    let mut out = Vec::new();
    for i in 0..10_000u64 {
        let req = PullRequest {
            batch: 2,
            expires: Some(secs(1) + Duration::from_nanos(i)),
            ..PullRequest::default()
        };
        c.on_pull_request(now, Bytes::from(format!("w{i}")), req, &stream, &mut out);
    }
    assert_eq!(c.info().num_waiting, 10_000);
    for _ in 0..15_000 {
        let seq = stream.append("orders.new", 1, EPOCH_UNIX_NS);
        c.on_stream_append(now, seq, b"orders.new", &stream, &mut out);
    }
    let ds = deliveries(&out);
    assert_eq!(ds.len(), 15_000);
    assert_eq!(
        ds[10_000].0, "w0",
        "round-robin: w0 gets the 10001st message"
    );
    let mut out = Vec::new();
    c.on_timeout(now + secs(2), &stream, &mut out);
    assert_eq!(statuses(&out).len(), 5_000);
    assert_eq!(c.info().num_waiting, 0);
    c.check_invariants(&stream).unwrap();
}

/// As nats-server: filters overlap only when one is a subset of the other; filters that merely
/// intersect are a valid config.
#[test]
fn intersecting_filters_are_valid_subsets_are_not() {
    let with = |filters: &[&str]| ConsumerConfig {
        filter_subjects: filters.iter().map(|f| f.to_string()).collect(),
        ..explicit()
    };
    assert_eq!(with(&["a.x.>", "a.*.y"]).validate(), Ok(()));
    assert_eq!(with(&["a.b", "a.c"]).validate(), Ok(()));
    for bad in [&["a.>", "a.b"][..], &["a.b", "a.*"], &["a.b", "a.b"]] {
        assert!(
            matches!(
                with(bad).validate(),
                Err(ConsumerError::OverlappingFilters(..))
            ),
            "{bad:?}"
        );
    }
}

#[test]
fn last_per_subject_delivers_each_subjects_last_then_new_ones() {
    // 1 b, 2 a, 3 b, 4 c, 5 b, 6 a: the last of a, b, c are 6, 5, 4; b's 3 lies between.
    let mut stream = MemStream::default();
    for (i, s) in ["b", "a", "b", "c", "b", "a"].iter().enumerate() {
        stream.append(s, 1, EPOCH_UNIX_NS + i as u64);
    }
    let all = SubjectFilter::default();
    assert_eq!(DeliverPolicy::LastPerSubject.start_seq(&stream, &all), 4);
    let mut h = Harness::with_policy(explicit(), stream, DeliverPolicy::LastPerSubject);
    assert_eq!(h.seqs(), ((0, 3), (0, 3)));
    assert_eq!(h.info().num_pending, 3);
    // A message on the list leaving the stream is no longer pending nor delivered.
    h.stream.msgs.remove(&5);
    let mut out = Vec::new();
    h.consumer
        .on_stream_remove(h.now, 5, b"b", &h.stream, &mut out);
    assert_eq!(h.info().num_pending, 2);
    // One not on the list changes nothing.
    h.stream.msgs.remove(&3);
    h.consumer
        .on_stream_remove(h.now, 3, b"b", &h.stream, &mut out);
    h.check();
    assert_eq!(h.info().num_pending, 2);
    h.publish_on("b");
    assert_eq!(h.info().num_pending, 3);
    let out = h.pull("w", "1");
    assert_eq!(seq_dc(&out), [(4, 1)]);
    assert_eq!(tokens(&out)[0].num_pending, 2);
    let out = h.pull("w", "10");
    assert_eq!(seq_dc(&out), [(6, 1), (7, 1)]);
    assert_eq!(h.info().num_pending, 0);
    assert_eq!(h.seqs().0, (3, 7));

    // With a filter, and nothing matching: starts at the last seq.
    let mut stream = MemStream::default();
    for s in ["b", "a", "b"] {
        stream.append(s, 1, EPOCH_UNIX_NS);
    }
    let only_c = SubjectFilter::new(&["c".into()]);
    assert_eq!(DeliverPolicy::LastPerSubject.start_seq(&stream, &only_c), 3);
    let cfg = ConsumerConfig {
        filter_subjects: vec!["b".into()],
        ..explicit()
    };
    let mut h = Harness::with_policy(cfg, stream, DeliverPolicy::LastPerSubject);
    assert_eq!((h.seqs().1, h.info().num_pending), ((0, 2), 1));
    // A purge below the list's entry keeps it.
    h.stream.msgs.remove(&1);
    h.stream.msgs.remove(&2);
    let mut out = Vec::new();
    h.consumer.on_stream_purge(h.now, 3, &h.stream, &mut out);
    h.check();
    assert_eq!(seq_dc(&h.pull("w", "5")), [(3, 1)]);
}

#[test]
fn last_per_subject_skips_earlier_messages_even_when_its_list_empties_by_removal() {
    // 1 b, 2 a, 3 b, 4 c, 5 b: the list is [2, 4, 5] (the last of a, c, b), b's 3 lies
    // between. After 2 is delivered, 4 and 5 leave the stream: 3 is still not delivered.
    let mut stream = MemStream::default();
    for (i, s) in ["b", "a", "b", "c", "b"].iter().enumerate() {
        stream.append(s, 1, EPOCH_UNIX_NS + i as u64);
    }
    let mut h = Harness::with_policy(explicit(), stream, DeliverPolicy::LastPerSubject);
    assert_eq!(seq_dc(&h.pull("w", "1")), [(2, 1)]);
    for seq in [4, 5] {
        let subject = h.stream.msgs.remove(&seq).unwrap().subject;
        let mut out = Vec::new();
        h.consumer
            .on_stream_remove(h.now, seq, subject.as_bytes(), &h.stream, &mut out);
        h.check();
    }
    assert_eq!(h.info().num_pending, 0);
    assert!(seq_dc(&h.pull("w", r#"{"batch":5,"no_wait":true}"#)).is_empty());
    h.publish_on("b");
    assert_eq!(seq_dc(&h.pull("w", "5")), [(6, 1)]);
}
