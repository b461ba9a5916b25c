//! Push consumers on virtual time, as nats-server 2.15 delivers them (observed against
//! nats-server 2.15.1 where noted; `consumer.go` otherwise): deliveries go to the deliver
//! subject only while it has interest, redeliveries come by themselves after the ack wait,
//! idle heartbeats fire `idle_heartbeat` after the last delivery and then every
//! `idle_heartbeat`, and flow control stalls delivery until its request is answered.

#[path = "consumer_harness.rs"]
mod harness;

use std::time::Duration;

use bytes::Bytes;
use harness::*;
use jsproto::consumer::{
    AckPolicy, Action, Advisory, ConsumerConfig, PullStatus, PushConfig, PushStatus,
};

const DLV: &str = "dlv.orders";

fn push(ack_policy: AckPolicy, heartbeat: Option<Duration>, flow_control: bool) -> ConsumerConfig {
    ConsumerConfig {
        ack_policy,
        push: Some(PushConfig {
            deliver_subject: DLV.to_owned(),
            idle_heartbeat: heartbeat,
            flow_control,
        }),
        ..explicit()
    }
}

fn interest(h: &mut Harness, on: bool) -> Vec<Action> {
    let mut out = Vec::new();
    h.consumer
        .set_delivery_interest(h.now, on, &h.stream, &mut out);
    h.check();
    out
}

fn fc_reply(h: &mut Harness, subject: &[u8]) -> Vec<Action> {
    let mut out = Vec::new();
    h.consumer
        .on_flow_control_reply(h.now, subject, &h.stream, &mut out);
    h.check();
    out
}

/// The push statuses among `actions`, with their time when given.
fn push_statuses(actions: &[Action]) -> Vec<PushStatus> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::PushStatus {
                deliver_subject,
                status,
            } => {
                assert_eq!(&deliver_subject[..], DLV.as_bytes());
                Some(status.clone())
            }
            _ => None,
        })
        .collect()
}

fn heartbeat_times(fired: &[(Duration, Action)]) -> Vec<(Duration, u64, u64, Option<Bytes>)> {
    fired
        .iter()
        .filter_map(|(t, a)| match a {
            Action::PushStatus {
                status:
                    PushStatus::IdleHeartbeat {
                        last_consumer_seq,
                        last_stream_seq,
                        stalled,
                    },
                ..
            } => Some((*t, *last_consumer_seq, *last_stream_seq, stalled.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn delivers_to_the_deliver_subject_only_while_it_has_interest() {
    let mut h = Harness::new(push(AckPolicy::None, None, false));
    assert!(h.consumer.is_push());
    assert!(
        !h.consumer.push_bound(),
        "a new push consumer starts unbound"
    );
    assert!(h.publish_n(3).is_empty(), "nobody listens: nothing is sent");
    let out = interest(&mut h, true);
    assert!(h.consumer.push_bound());
    assert_eq!(
        deliveries(&out),
        vec![
            (DLV.to_owned(), 1, 1),
            (DLV.to_owned(), 2, 1),
            (DLV.to_owned(), 3, 1)
        ],
        "what is stored goes out as soon as someone listens"
    );
    assert_eq!(
        seq_dc(&h.publish()),
        vec![(4, 1)],
        "new messages go out at once"
    );
    assert!(interest(&mut h, false).is_empty());
    assert!(h.publish().is_empty(), "interest gone: nothing more");
    assert_eq!(h.info().num_pending, 1);
    let out = interest(&mut h, true);
    assert_eq!(seq_dc(&out), vec![(5, 1)]);
    let cseqs: Vec<u64> = tokens(&out).iter().map(|t| t.consumer_seq).collect();
    assert_eq!(cseqs, vec![5], "consumer seqs go on with no gap");
    assert_eq!(h.seqs(), ((5, 5), (5, 5)), "ack none: the floor follows");
}

#[test]
fn a_pull_request_on_a_push_consumer_is_409_consumer_is_push_based() {
    // Observed on nats-server 2.15.1: `NATS/1.0 409 Consumer is push based`, whatever the body.
    let mut h = Harness::new(push(AckPolicy::Explicit, None, false));
    for body in ["", r#"{"batch":5,"expires":1000000000}"#, "{bad"] {
        let out = h.pull("w1", body);
        assert_eq!(
            codes(&out),
            vec![(409, "Consumer is push based".to_owned())],
            "{body}"
        );
    }
    assert_eq!(h.info().num_waiting, 0);
    // `+NXT` acks, then gets the same answer on its reply subject.
    interest(&mut h, true);
    let out = h.publish();
    let t = tokens(&out)[0];
    let out = h.ack_with(t, b"+NXT", Some("w2"));
    assert_eq!(
        statuses(&out),
        vec![("w2".to_owned(), PullStatus::ConsumerIsPushBased)]
    );
    assert_eq!(h.info().num_ack_pending, 0);
}

#[test]
fn idle_heartbeats_follow_the_last_delivery_and_report_the_last_sequences() {
    // Observed on nats-server 2.15.1 with idle_heartbeat 0.5 s: deliveries at 0, heartbeats at
    // 0.5, 1.0, ...; a delivery restarts the interval.
    let mut h = Harness::new(push(AckPolicy::None, Some(ms(500)), false));
    h.publish_n(3);
    assert!(
        h.advance(secs(2)).is_empty(),
        "no heartbeats while nobody listens"
    );
    let out = interest(&mut h, true);
    assert_eq!(deliveries(&out).len(), 3);
    let base = h.elapsed();
    let fired = h.advance_timed(ms(1600));
    assert_eq!(
        heartbeat_times(&fired),
        vec![
            (base + ms(500), 3, 3, None),
            (base + ms(1000), 3, 3, None),
            (base + ms(1500), 3, 3, None),
        ]
    );
    let hb = &push_statuses(&fired.into_iter().map(|(_, a)| a).collect::<Vec<_>>())[0];
    assert_eq!(
        hb.header_block(),
        "NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: 3\r\nNats-Last-Stream: 3\r\n\r\n"
    );
    assert!(hb.reply().is_none(), "a heartbeat has no reply subject");
    // A delivery at +1.7 s: the next heartbeat comes 0.5 s after it, not at +2.0 s.
    h.advance(ms(100));
    let at = h.elapsed();
    assert_eq!(seq_dc(&h.publish()), vec![(4, 1)]);
    let fired = h.advance_timed(ms(600));
    assert_eq!(heartbeat_times(&fired), vec![(at + ms(500), 4, 4, None)]);
    // Interest gone: heartbeats stop; back: they start again an interval later.
    interest(&mut h, false);
    assert!(h.advance(secs(3)).is_empty());
    let at = h.elapsed();
    interest(&mut h, true);
    let fired = h.advance_timed(ms(700));
    assert_eq!(heartbeat_times(&fired), vec![(at + ms(500), 4, 4, None)]);
}

#[test]
fn heartbeats_go_on_while_paused() {
    let mut h = Harness::new(push(AckPolicy::None, Some(secs(1)), false));
    interest(&mut h, true);
    let mut out = Vec::new();
    let until = h.now + secs(5);
    h.consumer
        .set_pause(h.now, Some(until), &h.stream, &mut out);
    assert!(h.publish_n(2).is_empty(), "paused: nothing delivered");
    let fired = h.advance_timed(ms(3500));
    let beats = heartbeat_times(&fired);
    assert_eq!(beats.len(), 3, "{beats:?}");
    assert!(beats.iter().all(|b| (b.1, b.2) == (0, 0)));
    let fired = h.advance_timed(secs(2));
    let delivered: Vec<(Duration, u64)> = fired
        .iter()
        .filter_map(|(t, a)| match a {
            Action::Deliver { ack, .. } => Some((*t, ack.stream_seq)),
            _ => None,
        })
        .collect();
    assert_eq!(
        delivered,
        vec![(secs(5), 1), (secs(5), 2)],
        "at the pause's end"
    );
}

#[test]
fn unacknowledged_deliveries_are_redelivered_by_themselves() {
    // Observed on nats-server 2.15.1 (ack_wait 1 s): deliveries at 0, 1, 2 s with delivery
    // counts 1, 2, 3 and new consumer seqs each time; no pull request needed.
    let cfg = ConsumerConfig {
        ack_wait: secs(1),
        max_deliver: Some(3),
        ..push(AckPolicy::Explicit, None, false)
    };
    let mut h = Harness::new(cfg);
    h.publish_n(2);
    let out = interest(&mut h, true);
    assert_eq!(seq_dc(&out), vec![(1, 1), (2, 1)]);
    let first = tokens(&out);
    let fired = h.advance_timed(secs(1));
    let got: Vec<(Duration, u64, u64, u64)> = fired
        .iter()
        .filter_map(|(t, a)| match a {
            Action::Deliver { ack, .. } => {
                Some((*t, ack.stream_seq, ack.delivery_count, ack.consumer_seq))
            }
            _ => None,
        })
        .collect();
    assert_eq!(got, vec![(secs(1), 1, 2, 3), (secs(1), 2, 2, 4)]);
    // An ack (even of the first delivery's subject) settles seq 1; seq 2 comes a third time,
    // then is given up at max_deliver.
    h.ack(first[0]);
    let fired = h.advance(secs(1));
    assert_eq!(seq_dc(&fired), vec![(2, 3)]);
    let fired = h.advance(secs(1));
    assert!(deliveries(&fired).is_empty());
    assert!(fired.contains(&Action::Advisory(Advisory::MaxDeliver {
        stream_seq: 2,
        deliveries: 3
    })));
    assert_eq!(h.info().num_ack_pending, 0);
}

#[test]
fn redeliveries_wait_for_interest_and_follow_the_backoff() {
    let cfg = ConsumerConfig {
        backoff: vec![secs(1), secs(3)],
        max_deliver: Some(4),
        ..push(AckPolicy::Explicit, None, false)
    };
    let mut h = Harness::new(cfg);
    interest(&mut h, true);
    assert_eq!(seq_dc(&h.publish()), vec![(1, 1)]);
    let fired = h.advance_timed(secs(8));
    let at: Vec<(Duration, u64)> = fired
        .iter()
        .filter_map(|(t, a)| match a {
            Action::Deliver { ack, .. } => Some((*t, ack.delivery_count)),
            _ => None,
        })
        .collect();
    assert_eq!(at, vec![(secs(1), 2), (secs(4), 3), (secs(7), 4)]);
    // Without interest an expired delivery waits in the redelivery queue.
    let mut h = Harness::new(ConsumerConfig {
        ack_wait: secs(1),
        ..push(AckPolicy::Explicit, None, false)
    });
    interest(&mut h, true);
    h.publish();
    interest(&mut h, false);
    assert!(deliveries(&h.advance(secs(5))).is_empty());
    assert_eq!(seq_dc(&interest(&mut h, true)), vec![(1, 2)]);
}

#[test]
fn max_ack_pending_holds_new_deliveries_until_acks_come() {
    let cfg = ConsumerConfig {
        max_ack_pending: Some(2),
        ..push(AckPolicy::Explicit, None, false)
    };
    let mut h = Harness::new(cfg);
    interest(&mut h, true);
    let out = h.publish_n(5);
    assert_eq!(seq_dc(&out), vec![(1, 1), (2, 1)]);
    let t = tokens(&out);
    assert_eq!(seq_dc(&h.ack(t[1])), vec![(3, 1)], "an ack frees one slot");
    assert_eq!(h.info().num_ack_pending, 2);
    assert_eq!(h.info().num_pending, 2);
}

#[test]
fn ack_all_on_a_push_consumer_acks_everything_below() {
    let mut h = Harness::new(push(AckPolicy::All, None, false));
    interest(&mut h, true);
    let out = h.publish_n(3);
    let t = tokens(&out);
    let acks = h.ack(t[2]);
    assert!(acks.contains(&Action::Acked { stream_seqs: 1..=3 }));
    assert_eq!(h.seqs(), ((3, 3), (3, 3)));
}

/// 512 KiB messages, as the shared case c33 publishes.
const BIG: usize = 512 * 1024;

#[test]
fn flow_control_asks_past_half_the_window_and_stalls_past_it() {
    let mut h = Harness::new(push(AckPolicy::None, Some(ms(500)), true));
    h.msg_size = BIG;
    interest(&mut h, true);
    let out = h.publish_n(20);
    // Window 2 MiB: the request goes out right after the second delivery (1 MiB and the
    // subjects in flight: past half), and the fourth takes it past 2 MiB: delivery stalls.
    let kinds: Vec<&str> = out
        .iter()
        .filter_map(|a| match a {
            Action::Deliver { .. } => Some("msg"),
            Action::PushStatus {
                status: PushStatus::FlowControlRequest { .. },
                ..
            } => Some("fc"),
            _ => None,
        })
        .collect();
    assert_eq!(kinds, vec!["msg", "msg", "fc", "msg", "msg"]);
    let PushStatus::FlowControlRequest { reply } = push_statuses(&out)[0].clone() else {
        panic!("a flow control request")
    };
    let text = String::from_utf8_lossy(&reply).into_owned();
    let prefix = format!("$JS.FC.{STREAM}.{CONSUMER}.");
    assert!(text.starts_with(&prefix), "{text}");
    assert_eq!(text.len(), prefix.len() + 4, "{text}");
    assert_eq!(
        push_statuses(&out)[0].header_block(),
        "NATS/1.0 100 FlowControl Request\r\n\r\n"
    );
    assert_eq!(h.consumer.flow_control_pending(), Some(reply.clone()));
    // Stalled: heartbeats say on what.
    let fired = h.advance_timed(ms(1100));
    let beats = heartbeat_times(&fired);
    assert_eq!(beats.len(), 2, "{beats:?}");
    assert!(beats
        .iter()
        .all(|b| (b.1, b.2, b.3.clone()) == (4, 4, Some(reply.clone()))));
    assert!(
        fired
            .iter()
            .all(|(_, a)| !matches!(a, Action::Deliver { .. })),
        "nothing while stalled"
    );
    // A wrong answer changes nothing; the right one resumes, in order.
    assert!(fc_reply(&mut h, b"$JS.FC.ORDERS.shipping.zzzz").is_empty());
    let mut delivered = 4;
    let mut last_cseq = 4;
    let mut pending = Some(reply);
    let mut rounds = 0;
    while let Some(reply) = pending.take() {
        rounds += 1;
        let out = fc_reply(&mut h, &reply);
        for t in tokens(&out) {
            assert_eq!(t.consumer_seq, last_cseq + 1, "no gap");
            last_cseq = t.consumer_seq;
            delivered += 1;
        }
        if let Some(PushStatus::FlowControlRequest { reply }) = push_statuses(&out).pop() {
            pending = Some(reply);
        }
    }
    assert_eq!(
        delivered, 20,
        "every message arrives once requests are answered"
    );
    assert!(
        rounds >= 2,
        "the widening window still asks again: {rounds}"
    );
    assert_eq!(h.seqs(), ((20, 20), (20, 20)));
}

#[test]
fn flow_control_window_grows_when_answered() {
    let mut h = Harness::new(push(AckPolicy::None, Some(secs(5)), true));
    h.msg_size = BIG;
    interest(&mut h, true);
    let out = h.publish_n(4);
    let PushStatus::FlowControlRequest { reply } = push_statuses(&out)[0].clone() else {
        panic!("a flow control request")
    };
    assert!(
        h.consumer.flow_control_pending().is_some(),
        "stalled after 4"
    );
    // The answer takes off what was in flight when it was asked (2 deliveries) and doubles
    // the window: the next request only comes past half of 4 MiB.
    assert!(
        fc_reply(&mut h, &reply).is_empty(),
        "nothing stored is left"
    );
    assert_eq!(h.consumer.flow_control_pending(), None);
    let out = h.publish_n(1);
    assert_eq!(deliveries(&out).len(), 1);
    assert!(
        push_statuses(&out).is_empty(),
        "1.5 MiB in flight: no request yet"
    );
    let out = h.publish_n(1);
    assert_eq!(push_statuses(&out).len(), 1, "past 2 MiB: a request");
    // An old answer (already used) is ignored.
    assert!(fc_reply(&mut h, &reply).is_empty());
    assert!(h.consumer.flow_control_pending().is_some());
}

#[test]
fn a_new_deliver_subject_by_update_takes_the_deliveries() {
    let mut h = Harness::new(push(AckPolicy::None, None, false));
    interest(&mut h, true);
    h.publish();
    let mut cfg = h.consumer.config().clone();
    cfg.push.as_mut().unwrap().deliver_subject = "dlv.other".to_owned();
    let mut out = Vec::new();
    h.consumer
        .update_config(h.now, cfg, &h.stream, &mut out)
        .expect("a deliver subject may change");
    assert_eq!(&h.consumer.deliver_subject().unwrap()[..], b"dlv.other");
    let out = h.publish();
    assert_eq!(deliveries(&out), vec![("dlv.other".to_owned(), 2, 1)]);
    // Push and pull do not turn into each other; heartbeats do not change.
    let mut cfg = h.consumer.config().clone();
    cfg.push = None;
    assert!(h
        .consumer
        .update_config(h.now, cfg, &h.stream, &mut Vec::new())
        .is_err());
    let mut cfg = h.consumer.config().clone();
    cfg.push.as_mut().unwrap().idle_heartbeat = Some(secs(1));
    let err = h
        .consumer
        .update_config(h.now, cfg, &h.stream, &mut Vec::new())
        .unwrap_err();
    assert_eq!(err.to_string(), "heart beats can not be updated");
}

#[test]
fn a_new_deliver_subject_gets_what_is_still_pending() {
    // nats-server's `forceExpirePending` on a deliver subject change.
    let cfg = ConsumerConfig {
        max_deliver: Some(2),
        ..push(AckPolicy::Explicit, None, false)
    };
    let mut h = Harness::new(cfg);
    interest(&mut h, true);
    let first = tokens(&h.publish_n(3));
    h.ack(first[1]);
    let mut cfg = h.consumer.config().clone();
    cfg.push.as_mut().unwrap().deliver_subject = "dlv.new".to_owned();
    let mut out = Vec::new();
    h.consumer
        .update_config(h.now, cfg.clone(), &h.stream, &mut out)
        .unwrap();
    h.check();
    assert_eq!(
        deliveries(&out),
        vec![("dlv.new".to_owned(), 1, 2), ("dlv.new".to_owned(), 3, 2)]
    );
    // At max_deliver now: another change sends nothing again.
    cfg.push.as_mut().unwrap().deliver_subject = "dlv.third".to_owned();
    let mut out = Vec::new();
    h.consumer
        .update_config(h.now, cfg, &h.stream, &mut out)
        .unwrap();
    assert!(deliveries(&out).is_empty());
}
