//! Delivery pacing on virtual time: `replay_policy: original` spaces deliveries as the
//! messages were stored, until the consumer has caught up with what was stored when it
//! started; `rate_limit_bps` holds a push consumer to a byte rate (nats-server's token
//! bucket). The consumer asks for its wake-up through `poll_timeout`.

#[path = "consumer_harness.rs"]
mod harness;

use harness::*;
use jsproto::consumer::{ConsumerConfig, PushConfig, RateLimit};

/// A stream with messages stored at 0 s, 2 s and 2.0005 s (after `EPOCH_UNIX_NS`), `size`
/// bytes each.
fn stored(size: usize) -> MemStream {
    let mut s = MemStream::default();
    for at in [0, 2_000_000_000, 2_000_500_000] {
        s.append("orders.new", size, EPOCH_UNIX_NS + at);
    }
    s
}

#[test]
fn replay_original_spaces_pull_deliveries_as_they_were_stored() {
    let cfg = ConsumerConfig {
        replay_original: true,
        ..explicit()
    };
    let mut h = Harness::with_stream(cfg, stored(7), 1);
    let out = h.pull("w", r#"{"batch":10,"expires":60000000000}"#);
    assert_eq!(
        seq_dc(&out),
        [(1, 1)],
        "the first at once, the second 2 s later"
    );
    assert_eq!(h.consumer.poll_timeout(), Some(h.start + secs(2)));
    assert!(h.advance(ms(1999)).is_empty());
    // Message 3 is 0.5 ms after message 2: no wait.
    assert_eq!(seq_dc(&h.advance(ms(1))), [(2, 1), (3, 1)]);
    // Caught up with the stream as it was: new messages come at once.
    assert_eq!(seq_dc(&h.publish()), [(4, 1)]);
}

#[test]
fn rate_limit_holds_a_push_consumer_to_its_byte_rate() {
    // 8,000 bps = 1,000 bytes/s; bucket of 1,000 bytes.
    let cfg = ConsumerConfig {
        push: Some(PushConfig {
            deliver_subject: "dlv".into(),
            idle_heartbeat: None,
            flow_control: false,
        }),
        rate_limit: Some(RateLimit {
            bytes_per_sec: 1000,
            burst: 1000,
        }),
        ..explicit()
    };
    let mut h = Harness::with_stream(cfg, stored(400), 1);
    let mut out = Vec::new();
    h.consumer
        .set_delivery_interest(h.now, true, &h.stream, &mut out);
    h.check();
    // Each delivery costs subject + ack subject + 400 bytes (~480): two fit the bucket.
    assert_eq!(seq_dc(&out), [(1, 1), (2, 1)]);
    let wake = h.consumer.poll_timeout().expect("a wake-up for the third");
    let wait = wake - h.now;
    assert!(wait > ms(300) && wait < ms(600), "{wait:?}");
    assert!(h.advance(wait - ms(1)).is_empty());
    assert_eq!(seq_dc(&h.advance(ms(1))), [(3, 1)]);
}
