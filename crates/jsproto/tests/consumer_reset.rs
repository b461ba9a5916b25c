//! Consumer reset (`CONSUMER.RESET`, nats-server 2.14+) on virtual time: back to the ack
//! floor or to a given sequence, with nats-server's checks against the deliver policy
//! (observed on 2.15.1; end to end in `tests/jetstream_consumer_reset.rs`).

#[path = "consumer_harness.rs"]
mod harness;

use harness::*;
use jsproto::consumer::{ConsumerConfig, ConsumerError, DeliverPolicy};

fn reset(
    h: &mut Harness,
    seq: u64,
) -> (Result<u64, ConsumerError>, Vec<jsproto::consumer::Action>) {
    let mut out = Vec::new();
    let r = h.consumer.reset(h.now, seq, &h.stream, &mut out);
    h.check();
    (r, out)
}

#[test]
fn reset_to_the_ack_floor_redelivers_what_was_not_acked_as_first_deliveries() {
    let mut h = Harness::new(explicit());
    h.publish_n(6);
    let t = tokens(&h.pull("w", r#"{"batch":3}"#));
    h.ack(t[0]);
    h.nak(t[1]);
    let (r, out) = reset(&mut h, 0);
    assert_eq!(r.unwrap(), 2);
    assert!(out.is_empty());
    let s = h.info();
    assert_eq!(s.seqs(), ((0, 1), (0, 1)));
    assert_eq!(
        (s.num_pending, s.num_ack_pending, s.num_redelivered),
        (5, 0, 0)
    );
    assert_eq!((s.last_delivery, s.last_ack), (None, None));
    // Consumer seq starts at 1 again, delivery count 1.
    let t = tokens(&h.pull("w", r#"{"batch":2}"#));
    assert_eq!(
        t.iter()
            .map(|t| (t.stream_seq, t.consumer_seq, t.delivery_count))
            .collect::<Vec<_>>(),
        [(2, 1, 1), (3, 2, 1)]
    );
    // Acks are keyed by stream seq (as nats-server's): an ack sent for the delivery of stream
    // seq 2 made before the reset acknowledges its new delivery.
    h.ack(jsproto::consumer::AckTokens {
        consumer_seq: 3,
        ..t[0]
    });
    assert_eq!(h.info().num_ack_pending, 1);
}

trait Seqs {
    fn seqs(&self) -> ((u64, u64), (u64, u64));
}

impl Seqs for jsproto::consumer::ConsumerState {
    fn seqs(&self) -> ((u64, u64), (u64, u64)) {
        (
            (self.delivered.consumer_seq, self.delivered.stream_seq),
            (self.ack_floor.consumer_seq, self.ack_floor.stream_seq),
        )
    }
}

#[test]
fn reset_forward_skips_and_backward_replays() {
    let mut h = Harness::new(explicit());
    h.publish_n(6);
    let (r, _) = reset(&mut h, 5);
    assert_eq!(r.unwrap(), 5);
    assert_eq!(h.info().num_pending, 2);
    assert_eq!(
        seq_dc(&h.pull("w", r#"{"batch":10,"no_wait":true}"#)),
        [(5, 1), (6, 1)]
    );
    let (r, _) = reset(&mut h, 1);
    assert_eq!(r.unwrap(), 1);
    assert_eq!(h.info().num_pending, 6);
    // Past the end: allowed; what comes up to it is skipped.
    let (r, _) = reset(&mut h, 100);
    assert_eq!(r.unwrap(), 100);
    assert_eq!(h.info().seqs(), ((0, 99), (0, 99)));
    h.publish_n(3);
    assert_eq!(h.info().num_pending, 0);
}

#[test]
fn reset_serves_waiting_pulls_at_once() {
    let mut h = Harness::new(explicit());
    h.publish_n(2);
    assert_eq!(deliveries(&h.pull("w", r#"{"batch":2}"#)).len(), 2);
    h.pull("waiting", r#"{"batch":1,"expires":60000000000}"#);
    let (_, out) = reset(&mut h, 0);
    assert_eq!(seq_dc(&out), [(1, 1)]);
}

#[test]
fn reset_follows_the_deliver_policy() {
    let mut stream = MemStream::default();
    for i in 0..6 {
        stream.append("orders.new", 7, EPOCH_UNIX_NS + i * 1_000);
    }
    let by_seq = ConsumerConfig {
        deliver_policy: DeliverPolicy::ByStartSequence(3),
        ..explicit()
    };
    let mut h = Harness::with_stream(by_seq, stream.clone(), 3);
    assert!(matches!(
        reset(&mut h, 2).0,
        Err(ConsumerError::InvalidReset("below start seq"))
    ));
    assert_eq!(reset(&mut h, 4).0.unwrap(), 4);
    let by_time = ConsumerConfig {
        deliver_policy: DeliverPolicy::ByStartTime(EPOCH_UNIX_NS + 2_000),
        ..explicit()
    };
    let mut h = Harness::with_stream(by_time, stream.clone(), 3);
    let e = reset(&mut h, 2).0.unwrap_err();
    assert_eq!(e.to_string(), "below start time");
    assert_eq!(reset(&mut h, 3).0.unwrap(), 3);
    for policy in [
        DeliverPolicy::New,
        DeliverPolicy::Last,
        DeliverPolicy::LastPerSubject,
    ] {
        let cfg = ConsumerConfig {
            deliver_policy: policy,
            ..explicit()
        };
        let mut h = Harness::with_policy(cfg, stream.clone(), policy);
        assert!(matches!(
            reset(&mut h, 2).0,
            Err(ConsumerError::InvalidReset("not allowed"))
        ));
        let floor = h.info().ack_floor.stream_seq;
        assert_eq!(reset(&mut h, 0).0.unwrap(), floor + 1, "{policy:?}");
    }
}
