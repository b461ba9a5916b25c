//! Pull requests: arrival order, round-robin, no_wait, max_bytes, max_waiting, limits,
//! heartbeats, expiry, deletion (`consumer-semantics.md` §6).

#[path = "consumer_harness.rs"]
mod harness;

use harness::*;
use jsproto::consumer::{Action, ConsumerConfig, Leftover, PullStatus};

#[test]
fn a_request_whose_requester_went_away_is_skipped_not_served() {
    let mut h = Harness::new(explicit());
    for w in ["w0", "w1"] {
        assert!(h.pull(w, r#"{"batch":1,"expires":5000000000}"#).is_empty());
    }
    // w0's connection closed: nobody listens on its reply subject any more.
    h.stream.gone.push("w0".into());
    let out = h.publish_n(1);
    assert_eq!(deliveries(&out), [("w1".into(), 1, 1)]);
    assert!(
        statuses(&out).is_empty(),
        "the dead request is dropped silently"
    );
    assert_eq!(h.info().num_waiting, 0);
    assert_eq!(
        h.info().num_ack_pending,
        1,
        "one delivery, to the live worker"
    );
}

#[test]
fn three_waiting_requests_are_served_in_arrival_order() {
    let mut h = Harness::new(explicit());
    for w in ["w0", "w1", "w2"] {
        assert!(h.pull(w, r#"{"batch":1,"expires":5000000000}"#).is_empty());
    }
    assert_eq!(h.info().num_waiting, 3);
    let out = h.publish_n(3);
    assert_eq!(
        deliveries(&out),
        [
            ("w0".into(), 1, 1),
            ("w1".into(), 2, 1),
            ("w2".into(), 3, 1)
        ]
    );
    assert!(
        statuses(&out).is_empty(),
        "a satisfied request ends silently"
    );
    assert_eq!(h.info().num_waiting, 0);
}

#[test]
fn backlog_is_split_round_robin_then_408_with_pending_headers() {
    let mut h = Harness::new(explicit());
    for w in ["w0", "w1", "w2"] {
        h.pull(w, r#"{"batch":3,"expires":2000000000}"#);
    }
    let out = h.publish_n(6);
    let order: Vec<_> = deliveries(&out)
        .into_iter()
        .map(|(w, s, _)| (w, s))
        .collect();
    assert_eq!(
        order,
        [
            ("w0".into(), 1),
            ("w1".into(), 2),
            ("w2".into(), 3),
            ("w0".into(), 4),
            ("w1".into(), 5),
            ("w2".into(), 6)
        ]
    );
    assert!(h.advance(ms(1999)).is_empty());
    let fired = h.advance_timed(ms(1));
    let timeout = PullStatus::RequestTimeout(Leftover {
        messages: 1,
        bytes: 0,
    });
    assert_eq!(
        fired
            .iter()
            .map(|(t, a)| (*t, statuses(std::slice::from_ref(a))))
            .collect::<Vec<_>>(),
        ["w0", "w1", "w2"].map(|w| (secs(2), vec![(w.to_owned(), timeout.clone())]))
    );
    assert_eq!(
        timeout.header_block(),
        b"NATS/1.0 408 Request Timeout\r\nNats-Pending-Messages: 1\r\nNats-Pending-Bytes: 0\r\n\r\n"
    );
    assert_eq!(h.info().num_waiting, 0);
}

#[test]
fn backlog_present_before_the_request_fills_its_batch_at_once() {
    let mut h = Harness::new(explicit());
    h.publish_n(4);
    let out = h.pull("w", "3");
    assert_eq!(seq_dc(&out), [(1, 1), (2, 1), (3, 1)]);
    assert!(statuses(&out).is_empty());
    // the fourth is left for the next request; ack subject pending token counts down
    assert_eq!(
        tokens(&out)
            .iter()
            .map(|t| t.num_pending)
            .collect::<Vec<_>>(),
        [3, 2, 1]
    );
    assert_eq!(h.info().num_pending, 1);
}

#[test]
fn busy_worker_without_a_pull_is_skipped() {
    let mut h = Harness::new(explicit());
    h.publish();
    assert_eq!(seq_dc(&h.pull("busy", "")), [(1, 1)]);
    h.pull("w2", r#"{"expires":5000000000}"#);
    h.pull("w3", r#"{"expires":5000000000}"#);
    let out = h.publish_n(2);
    assert_eq!(deliveries(&out), [("w2".into(), 2, 1), ("w3".into(), 3, 1)]);
    h.publish();
    assert_eq!(deliveries(&h.pull("busy", "")), [("busy".into(), 4, 1)]);
}

#[test]
fn no_wait_outcomes() {
    let mut h = Harness::new(explicit());
    // nothing at all, no expires -> 404 at once
    let out = h.pull("a", r#"{"batch":5,"no_wait":true}"#);
    assert_eq!(codes(&out), [(404, "No Messages".into())]);
    assert_eq!(h.info().num_waiting, 0);

    // fewer than the batch -> the messages, then 404 (not 408)
    h.publish_n(3);
    let out = h.pull("b", r#"{"batch":10,"no_wait":true}"#);
    assert_eq!(seq_dc(&out), [(1, 1), (2, 1), (3, 1)]);
    assert_eq!(codes(&out), [(404, "No Messages".into())]);
    assert!(
        matches!(out.last(), Some(Action::Status { .. })),
        "404 comes after the messages"
    );

    // exactly the batch -> no status
    h.publish_n(2);
    let out = h.pull("c", r#"{"batch":2,"no_wait":true}"#);
    assert_eq!(seq_dc(&out), [(4, 1), (5, 1)]);
    assert!(statuses(&out).is_empty());

    // no_wait + expires, nothing there -> waits; one message -> delivered then 404
    let out = h.pull("d", r#"{"batch":4,"no_wait":true,"expires":1000000000}"#);
    assert!(out.is_empty());
    assert_eq!(h.info().num_waiting, 1);
    let out = h.publish();
    assert_eq!(seq_dc(&out), [(6, 1)]);
    assert_eq!(codes(&out), [(404, "No Messages".into())]);

    // no_wait + expires and nothing ever comes -> 408 at expiry
    h.pull("e", r#"{"batch":4,"no_wait":true,"expires":1000000000}"#);
    let fired = h.advance_timed(secs(2));
    assert_eq!(fired.len(), 1);
    assert_eq!(fired[0].0, h.elapsed() - secs(1));
    assert_eq!(
        statuses(&[fired[0].1.clone()]),
        [(
            "e".into(),
            PullStatus::RequestTimeout(Leftover {
                messages: 4,
                bytes: 0
            })
        )]
    );
}

#[test]
fn no_wait_requests_pending_and_capped() {
    let mut h = Harness::new(ConsumerConfig {
        max_ack_pending: Some(1),
        ..explicit()
    });
    h.publish_n(3);
    assert_eq!(seq_dc(&h.pull("a", "")), [(1, 1)]);
    // capped: a waiting request for 5 holds on; 2 undelivered < 5 waiting batch -> 408
    assert!(h
        .pull("b", r#"{"batch":5,"expires":5000000000}"#)
        .is_empty());
    let out = h.pull("c", r#"{"batch":1,"no_wait":true}"#);
    assert_eq!(codes(&out), [(408, "Requests Pending".into())]);
    // capped with enough messages for everyone waiting: we answer 404 at once (documented
    // simplification of nats-server's delayed answer)
    h.publish_n(5);
    let out = h.pull("d", r#"{"batch":1,"no_wait":true}"#);
    assert_eq!(codes(&out), [(404, "No Messages".into())]);
}

#[test]
fn max_bytes_409s_and_batch_completed() {
    let mut h = Harness::new(explicit());
    h.msg_size = 1000;
    h.publish_n(5);
    // per message: subject (10) + ack subject + 1000
    let ack_len = |pending: u64, seq: u64| {
        format!(
            "$JS.ACK.ORDERS.shipping.1.{seq}.{seq}.{}.{pending}",
            EPOCH_UNIX_NS
        )
        .len() as u64
    };
    let cost = |pending, seq| 10 + ack_len(pending, seq) + 1000;

    // first message already too big -> 409 at once, nothing delivered
    let out = h.pull("a", r#"{"batch":10,"expires":3000000000,"max_bytes":500}"#);
    assert!(deliveries(&out).is_empty());
    assert_eq!(
        statuses(&out),
        [(
            "a".into(),
            PullStatus::MessageSizeExceedsMaxBytes(Leftover {
                messages: 10,
                bytes: 500
            })
        )]
    );
    assert_eq!((h.info().num_pending, h.info().num_ack_pending), (5, 0));

    // two fit, the third does not
    let out = h.pull("b", r#"{"batch":10,"expires":3000000000,"max_bytes":2500}"#);
    assert_eq!(seq_dc(&out), [(1, 1), (2, 1)]);
    let left = 2500 - cost(4, 1) - cost(3, 2);
    assert_eq!(
        statuses(&out),
        [(
            "b".into(),
            PullStatus::MessageSizeExceedsMaxBytes(Leftover {
                messages: 8,
                bytes: left
            })
        )]
    );
    assert_eq!(h.info().num_waiting, 0);

    // the one that did not fit is next, as a first delivery
    assert_eq!(seq_dc(&h.pull("c", "")), [(3, 1)]);
    assert_eq!((h.info().num_ack_pending, h.info().num_pending), (3, 2));

    // batch filled with budget to spare -> 409 Batch Completed with the remaining bytes
    let out = h.pull(
        "d",
        r#"{"batch":2,"expires":3000000000,"max_bytes":100000}"#,
    );
    assert_eq!(seq_dc(&out), [(4, 1), (5, 1)]);
    let left = 100000 - cost(1, 4) - cost(0, 5);
    let status = PullStatus::BatchCompleted(Leftover {
        messages: 0,
        bytes: left,
    });
    assert_eq!(statuses(&out), [("d".into(), status.clone())]);
    assert_eq!(
        String::from_utf8(status.header_block()).unwrap(),
        format!("NATS/1.0 409 Batch Completed\r\nNats-Pending-Messages: 0\r\nNats-Pending-Bytes: {left}\r\n\r\n")
    );
}

#[test]
fn max_bytes_exactly_spent_ends_the_request_silently() {
    let mut h = Harness::new(explicit());
    h.msg_size = 100;
    h.publish_n(3);
    let one = 10 + format!("$JS.ACK.ORDERS.shipping.1.1.1.{EPOCH_UNIX_NS}.2").len() + 100;
    let out = h.pull(
        "a",
        &format!(r#"{{"batch":5,"expires":1000000000,"max_bytes":{one}}}"#),
    );
    assert_eq!(seq_dc(&out), [(1, 1)]);
    assert!(statuses(&out).is_empty());
    assert_eq!(h.info().num_waiting, 0);
}

#[test]
fn full_waiting_queue_rejects_new_requests_only() {
    let mut h = Harness::new(ConsumerConfig {
        max_waiting: 1,
        ..explicit()
    });
    assert!(h
        .pull("first", r#"{"batch":1,"expires":5000000000}"#)
        .is_empty());
    let out = h.pull("second", r#"{"batch":1,"expires":5000000000}"#);
    assert_eq!(
        statuses(&out),
        [("second".into(), PullStatus::ExceededMaxWaiting)]
    );
    // with a heartbeat the rejection is silent
    assert!(h
        .pull(
            "third",
            r#"{"expires":5000000000,"idle_heartbeat":1000000000}"#
        )
        .is_empty());
    assert_eq!(h.info().num_waiting, 1);
    // the waiting one is not evicted and gets the next message
    assert_eq!(deliveries(&h.publish()), [("first".into(), 1, 1)]);
    assert_eq!(h.info().num_waiting, 0);
}

#[test]
fn request_limits_are_refused_with_409() {
    let mut h = Harness::new(ConsumerConfig {
        max_batch: Some(5),
        max_expires: Some(secs(2)),
        max_bytes: Some(4096),
        ..explicit()
    });
    let cases = [
        (
            r#"{"batch":6,"expires":1000000000}"#,
            "Exceeded MaxRequestBatch of 5",
        ),
        (
            r#"{"batch":1,"expires":3000000000}"#,
            "Exceeded MaxRequestExpires of 2s",
        ),
        (
            r#"{"batch":1,"expires":1000000000,"max_bytes":5000}"#,
            "Exceeded MaxRequestMaxBytes of 4096",
        ),
    ];
    for (body, text) in cases {
        assert_eq!(
            codes(&h.pull("r", body)),
            [(409, text.to_owned())],
            "{body}"
        );
    }
    h.publish();
    let out = h.pull("ok", r#"{"batch":5,"expires":1000000000,"max_bytes":4096}"#);
    assert_eq!(seq_dc(&out), [(1, 1)]);
}

#[test]
fn bad_bodies_get_400() {
    let mut h = Harness::new(explicit());
    assert_eq!(
        codes(&h.pull("r", r#"{"batch":"#)),
        [(400, "Bad Request - unexpected end of JSON input".into())]
    );
    assert_eq!(
        codes(&h.pull("r", r#"{"expires":3000000000,"idle_heartbeat":2000000000}"#)),
        [(400, "Bad Request - heartbeat value too large".into())]
    );
    assert_eq!(
        codes(&h.pull("r", r#"{"batch":1,"min_pending":3}"#)),
        [(400, "Bad Request - Not a Overflow Priority consumer".into())]
    );
    assert_eq!(
        codes(&h.pull("r", r#"{"batch":1,"id":"PIN"}"#)),
        [(
            400,
            "Bad Request - Not a Pinned Client Priority consumer".into()
        )]
    );
    // hb == expires/2 is legal (what nats.go sends)
    assert!(h
        .pull("r", r#"{"expires":2000000000,"idle_heartbeat":1000000000}"#)
        .is_empty());
    // negative expires: already expired
    assert_eq!(
        codes(&h.pull("n", r#"{"batch":2,"expires":-1}"#)),
        [(408, "Request Timeout".into())]
    );
    // an empty reply subject is ignored
    assert!(h.pull("", "").is_empty());
}

#[test]
fn idle_heartbeats_then_408() {
    let mut h = Harness::new(explicit());
    h.publish_n(10);
    assert_eq!(seq_dc(&h.pull("a", "10")).len(), 10);
    let out = h.pull(
        "w",
        r#"{"batch":2,"expires":2500000000,"idle_heartbeat":1000000000}"#,
    );
    assert!(out.is_empty());
    let fired = h.advance_timed(secs(3));
    let t0 = secs(0);
    let got: Vec<_> = fired
        .iter()
        .map(|(t, a)| (*t - t0, statuses(std::slice::from_ref(a))))
        .collect();
    let hb = PullStatus::IdleHeartbeat {
        last_consumer_seq: 10,
        last_stream_seq: 10,
    };
    assert_eq!(
        got,
        [
            (secs(1), vec![("w".into(), hb.clone())]),
            (secs(2), vec![("w".into(), hb.clone())]),
            (
                ms(2500),
                vec![(
                    "w".into(),
                    PullStatus::RequestTimeout(Leftover {
                        messages: 2,
                        bytes: 0
                    })
                )]
            ),
        ]
    );
    assert_eq!(
        hb.header_block(),
        b"NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: 10\r\nNats-Last-Stream: 10\r\n\r\n"
    );
}

#[test]
fn a_delivery_restarts_the_heartbeat_clock_and_does_not_use_the_batch() {
    let mut h = Harness::new(explicit());
    h.pull(
        "w",
        r#"{"batch":2,"expires":3000000000,"idle_heartbeat":400000000}"#,
    );
    let fired = h.advance_timed(ms(1000));
    assert_eq!(
        fired.iter().map(|(t, _)| *t).collect::<Vec<_>>(),
        [ms(400), ms(800)]
    );
    assert_eq!(seq_dc(&h.publish()), [(1, 1)]); // at 1.0 s
    let fired = h.advance_timed(ms(2500));
    // next heartbeats 400 ms after the delivery, then every 400 ms; 408 at 3 s with 1 left
    assert_eq!(
        fired
            .iter()
            .map(|(t, a)| (*t, codes(std::slice::from_ref(a))[0].0))
            .collect::<Vec<_>>(),
        [
            (ms(1400), 100),
            (ms(1800), 100),
            (ms(2200), 100),
            (ms(2600), 100),
            (ms(3000), 408)
        ]
    );
}

#[test]
fn heartbeat_and_expiry_at_the_same_instant_send_only_the_408() {
    let mut h = Harness::new(explicit());
    h.pull("w", r#"{"expires":2000000000,"idle_heartbeat":1000000000}"#);
    let fired = h.advance_timed(secs(3));
    assert_eq!(
        fired
            .iter()
            .map(|(t, a)| (*t, codes(std::slice::from_ref(a))[0].0))
            .collect::<Vec<_>>(),
        [(secs(1), 100), (secs(2), 408)]
    );
}

#[test]
fn expired_requests_do_not_swallow_the_next_message() {
    let mut h = Harness::new(explicit());
    h.pull("old", r#"{"expires":500000000}"#);
    assert_eq!(
        codes(&h.advance(secs(1))),
        [(408, "Request Timeout".into())]
    );
    h.publish();
    assert_eq!(deliveries(&h.pull("new", "")), [("new".into(), 1, 1)]);
}

#[test]
fn requests_without_expiry_wait_until_filled() {
    let mut h = Harness::new(explicit());
    h.pull("w", "2");
    assert_eq!(h.consumer.poll_timeout(), None);
    assert!(h.advance(secs(3600)).is_empty());
    assert_eq!(seq_dc(&h.publish_n(2)), [(1, 1), (2, 1)]);
}

#[test]
fn requester_gone_drops_its_requests() {
    let mut h = Harness::new(explicit());
    h.pull("gone", r#"{"batch":5,"expires":5000000000}"#);
    h.pull("gone", r#"{"batch":5,"expires":5000000000}"#);
    h.pull("alive", r#"{"batch":5,"expires":5000000000}"#);
    h.consumer.on_request_gone(b"gone");
    h.check();
    assert_eq!(h.info().num_waiting, 1);
    assert_eq!(deliveries(&h.publish()), [("alive".into(), 1, 1)]);
}

#[test]
fn delete_sends_consumer_deleted_to_every_waiting_request() {
    let mut h = Harness::new(explicit());
    h.pull("a", r#"{"expires":5000000000}"#);
    h.pull("b", "3");
    let mut out = Vec::new();
    h.consumer.delete(&mut out);
    assert_eq!(
        statuses(&out),
        [
            ("a".into(), PullStatus::ConsumerDeleted),
            ("b".into(), PullStatus::ConsumerDeleted)
        ]
    );
    assert_eq!(
        PullStatus::ConsumerDeleted.header_block(),
        b"NATS/1.0 409 Consumer Deleted\r\n\r\n"
    );
    assert_eq!(h.info().num_waiting, 0);
}

#[test]
fn shutdown_sends_server_shutdown_with_pending_headers() {
    let mut h = Harness::new(explicit());
    h.pull("a", r#"{"batch":4,"max_bytes":900,"expires":5000000000}"#);
    let mut out = Vec::new();
    h.consumer.shutdown(&mut out);
    assert_eq!(
        String::from_utf8(statuses(&out)[0].1.header_block()).unwrap(),
        "NATS/1.0 409 Server Shutdown\r\nNats-Pending-Messages: 4\r\nNats-Pending-Bytes: 900\r\n\r\n"
    );
}

#[test]
fn filters_restrict_deliveries_and_num_pending() {
    let mut stream = MemStream::default();
    for s in ["c1.a", "c1.b", "c1.a", "c1.c", "c1.a"] {
        stream.append(s, 2, EPOCH_UNIX_NS);
    }
    let cfg = ConsumerConfig {
        filter_subjects: vec!["c1.a".into()],
        ..explicit()
    };
    let mut h = Harness::with_stream(cfg, stream, 1);
    assert_eq!(h.info().num_pending, 3);
    let out = h.pull("w", "10");
    assert_eq!(seq_dc(&out), [(1, 1), (3, 1), (5, 1)]);
    assert_eq!(h.publish_on("c1.b"), []);
    assert_eq!(h.info().num_pending, 0);

    // multi-filter: stream order across filters
    let mut stream = MemStream::default();
    for s in ["x.1", "y.1", "z.1", "x.2", "y.2"] {
        stream.append(s, 2, EPOCH_UNIX_NS);
    }
    let cfg = ConsumerConfig {
        filter_subjects: vec!["x.*".into(), "y.*".into()],
        ..explicit()
    };
    let mut h = Harness::with_stream(cfg, stream, 1);
    assert_eq!(h.info().num_pending, 4);
    assert_eq!(seq_dc(&h.pull("w", "10")), [(1, 1), (2, 1), (4, 1), (5, 1)]);
}

#[test]
fn prune_waiting_drops_requests_nobody_listens_to() {
    let mut h = Harness::new(explicit());
    for w in ["w0", "w1", "w1"] {
        assert!(h.pull(w, r#"{"batch":1,"expires":5000000000}"#).is_empty());
    }
    assert_eq!(h.info().num_waiting, 3);
    assert_eq!(h.consumer.prune_waiting(|reply| reply != b"w1"), 2);
    assert_eq!(h.info().num_waiting, 1);
    let out = h.publish_n(1);
    assert_eq!(deliveries(&out), [("w0".into(), 1, 1)]);
}
