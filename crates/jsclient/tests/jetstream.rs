//! JetStream through jsclient against a real server (see `common` for which binary).

mod common;

use std::future::IntoFuture;
use std::time::Duration;

use common::TestServer;
use futures_util::StreamExt;
use jsclient::jetstream::{self, consumer, stream, PublishError};
use tokio::time::timeout;

const WAIT: Duration = Duration::from_secs(10);

async fn setup(server: &TestServer) -> jetstream::Context {
    jetstream::new(jsclient::connect(server.url()).await.unwrap())
}

#[tokio::test]
async fn publish_pub_ack_and_stream_crud() {
    let server = TestServer::start();
    let js = setup(&server).await;
    let mut s = js
        .create_stream(stream::Config::new("ORDERS", ["orders.>"]))
        .await
        .unwrap();
    let ack = js
        .publish("orders.1", "a".into())
        .await
        .unwrap()
        .await
        .unwrap();
    assert_eq!((ack.stream.as_str(), ack.seq), ("ORDERS", 1));
    // Windowed: several in flight, then awaited.
    let mut futures = Vec::new();
    for i in 0..10 {
        futures.push(
            js.publish(format!("orders.{i}"), "b".into())
                .await
                .unwrap()
                .into_future(),
        );
    }
    let acks = futures_util::future::join_all(futures).await;
    assert_eq!(acks.last().unwrap().as_ref().unwrap().seq, 11);
    let err = js
        .publish("nowhere", "x".into())
        .await
        .unwrap()
        .await
        .unwrap_err();
    assert_eq!(err, PublishError::NoStream);
    assert_eq!(s.info().await.unwrap().state.messages, 11);
    assert_eq!(js.stream_names().await.unwrap(), ["ORDERS"]);
    let err = js.get_stream("NOPE").await.unwrap_err();
    assert_eq!(err.err_code(), Some(10059));
    assert_eq!(js.purge_stream("ORDERS").await.unwrap(), 11);
    assert!(js.delete_stream("ORDERS").await.unwrap());
    assert_eq!(
        js.get_stream("ORDERS").await.unwrap_err().err_code(),
        Some(10059)
    );
}

#[tokio::test]
async fn consumer_crud_fetch_next_and_acks() {
    let server = TestServer::start();
    let js = setup(&server).await;
    let s = js
        .create_stream(stream::Config::new("W", ["w.>"]))
        .await
        .unwrap();
    for i in 0..5 {
        js.publish(format!("w.{i}"), i.to_string().into())
            .await
            .unwrap()
            .await
            .unwrap();
    }
    let c = s
        .create_consumer(consumer::pull_config("worker"))
        .await
        .unwrap();
    assert_eq!(s.consumer_names().await.unwrap(), ["worker"]);
    let got = s.get_consumer("worker").await.unwrap();
    assert_eq!(got.name(), "worker");
    assert_eq!(
        s.get_consumer("nope").await.unwrap_err().err_code(),
        Some(10014)
    );

    let mut batch = c.fetch().max_messages(3).messages().await.unwrap();
    let mut seen = Vec::new();
    while let Some(m) = timeout(WAIT, batch.next()).await.unwrap() {
        let m = m.unwrap();
        let info = m.info().unwrap();
        assert_eq!(
            (info.stream.as_str(), info.consumer.as_str()),
            ("W", "worker")
        );
        assert_eq!(info.delivered, 1);
        seen.push(info.stream_sequence);
        m.double_ack().await.unwrap();
    }
    assert_eq!(seen, [1, 2, 3]);

    let m = c.next(Duration::from_secs(2)).await.unwrap().unwrap();
    assert_eq!(m.info().unwrap().stream_sequence, 4);
    assert_eq!(m.info().unwrap().pending, 1);
    m.nak().await.unwrap();
    // nats-server applies acks asynchronously to pulls, so seq 5 may come before the
    // redelivered seq 4: take both.
    let mut batch = c
        .batch()
        .max_messages(2)
        .expires(Duration::from_secs(2))
        .messages()
        .await
        .unwrap();
    let mut redelivered = false;
    while let Some(m) = timeout(WAIT, batch.next()).await.unwrap() {
        let m = m.unwrap();
        let info = m.info().unwrap();
        if info.stream_sequence == 4 {
            assert_eq!(info.delivered, 2);
            redelivered = true;
            m.term().await.unwrap();
        } else {
            assert_eq!(info.stream_sequence, 5);
            m.in_progress().await.unwrap();
            m.double_ack().await.unwrap();
        }
    }
    assert!(redelivered);
    // Nothing left: fetch ends at once with no messages.
    let mut empty = c.fetch().max_messages(2).messages().await.unwrap();
    assert!(timeout(WAIT, empty.next()).await.unwrap().is_none());
    assert!(c.next(Duration::from_millis(300)).await.unwrap().is_none());
    assert!(s.delete_consumer("worker").await.unwrap());
}

#[tokio::test]
async fn redelivery_after_ack_wait() {
    let server = TestServer::start();
    let js = setup(&server).await;
    let s = js
        .create_stream(stream::Config::new("R", ["r"]))
        .await
        .unwrap();
    js.publish("r", "x".into()).await.unwrap().await.unwrap();
    let mut cfg = consumer::pull_config("slow");
    cfg.ack_wait = Duration::from_secs(1);
    let c = s.create_consumer(cfg).await.unwrap();
    let first = c.next(Duration::from_secs(2)).await.unwrap().unwrap();
    assert_eq!(first.info().unwrap().delivered, 1);
    // Not acked: comes back after ack_wait with delivery count 2.
    let again = c.next(Duration::from_secs(5)).await.unwrap().unwrap();
    let info = again.info().unwrap();
    assert_eq!((info.stream_sequence, info.delivered), (1, 2));
    again.ack().await.unwrap();
}

#[tokio::test]
async fn messages_stream_keeps_pulling() {
    let server = TestServer::start();
    let js = setup(&server).await;
    let s = js
        .create_stream(stream::Config::new("M", ["m.*"]))
        .await
        .unwrap();
    let c = s
        .create_consumer(consumer::pull_config("all"))
        .await
        .unwrap();
    let mut messages = c
        .stream()
        .max_messages_per_batch(4)
        .expires(Duration::from_secs(2))
        .heartbeat(Duration::from_millis(500))
        .messages()
        .await
        .unwrap();
    for i in 0..20 {
        js.publish(format!("m.{i}"), i.to_string().into())
            .await
            .unwrap()
            .await
            .unwrap();
    }
    for i in 1..=20u64 {
        let m = timeout(WAIT, messages.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(m.info().unwrap().stream_sequence, i);
        m.ack().await.unwrap();
    }
    // Idle for longer than several pull expiries: 408s are absorbed, heartbeats keep it alive.
    tokio::time::sleep(Duration::from_secs(3)).await;
    js.publish("m.late", "late".into())
        .await
        .unwrap()
        .await
        .unwrap();
    let m = timeout(WAIT, messages.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(&m.payload[..], b"late");
}

#[tokio::test]
async fn publish_with_jetstream_headers_dedups_and_checks_expectations() {
    use jetstream::Publish;
    let server = TestServer::start();
    let js = setup(&server).await;
    js.create_stream(stream::Config::new("DEDUP", ["dd.>"]))
        .await
        .unwrap();
    let publish = |subject: &'static str, p: Publish| {
        let js = js.clone();
        async move { js.send_publish(subject, p).await.unwrap().await }
    };

    let first = publish(
        "dd.a",
        Publish::build().payload("1".into()).message_id("m1"),
    )
    .await
    .unwrap();
    assert_eq!((first.seq, first.duplicate), (1, false));
    let again = publish(
        "dd.a",
        Publish::build().payload("1".into()).message_id("m1"),
    )
    .await
    .unwrap();
    assert_eq!((again.seq, again.duplicate), (1, true));

    // Expectations that hold.
    let ok = publish(
        "dd.b",
        Publish::build()
            .payload("2".into())
            .message_id("m2")
            .expected_stream("DEDUP")
            .expected_last_sequence(1)
            .expected_last_subject_sequence(0)
            .expected_last_message_id("m1"),
    )
    .await
    .unwrap();
    assert_eq!((ok.stream.as_str(), ok.seq), ("DEDUP", 2));

    // Expectations that fail.
    let err = publish(
        "dd.c",
        Publish::build()
            .payload("3".into())
            .expected_last_sequence(1),
    )
    .await
    .unwrap_err();
    assert_eq!(err.err_code(), Some(10071), "{err}");
    let err = publish(
        "dd.b",
        Publish::build()
            .payload("3".into())
            .expected_last_subject_sequence(1),
    )
    .await
    .unwrap_err();
    assert_eq!(err.err_code(), Some(10071), "{err}");
    let err = publish(
        "dd.c",
        Publish::build()
            .payload("3".into())
            .expected_last_message_id("m1"),
    )
    .await
    .unwrap_err();
    assert_eq!(err.err_code(), Some(10070), "{err}");
    let err = publish(
        "dd.c",
        Publish::build()
            .payload("3".into())
            .expected_stream("OTHER"),
    )
    .await
    .unwrap_err();
    assert_eq!(err.err_code(), Some(10060), "{err}");
    let err = js
        .send_publish("dd.c", Publish::build().message_id("bad\nid"))
        .await
        .unwrap_err();
    assert!(matches!(err, PublishError::InvalidHeader(_)), "{err}");
    let info = js.get_stream("DEDUP").await.unwrap();
    assert_eq!(info.cached_info().state.messages, 2);
}

/// A pinned worker and a standby through jsclient's priority-group pulls: the pin id is kept
/// and sent back by the handle, a stale one is reported once and forgotten, and the standby
/// takes over after an unpin. Pause and resume through the context.
#[tokio::test]
async fn pinned_worker_standby_unpin_and_pause() {
    let server = TestServer::start();
    let js = setup(&server).await;
    js.create_stream(stream::Config::new("JOBS", ["jobs.>"]))
        .await
        .unwrap();
    for _ in 0..3 {
        js.publish("jobs.x", "j".into())
            .await
            .unwrap()
            .await
            .unwrap();
    }
    let mut cfg = consumer::pull_config("pin");
    cfg.priority_policy = jsproto::api::consumer::PriorityPolicy::PinnedClient;
    cfg.priority_groups = vec!["jobs".into()];
    cfg.priority_timeout = Duration::from_secs(600);
    let c = js.create_consumer_on_stream(cfg, "JOBS").await.unwrap();
    let group = consumer::PriorityPull::group("jobs");
    let a = c.clone().with_priority_group(group.clone());
    let b = c.clone().with_priority_group(group);

    let m = a.next(WAIT).await.unwrap().expect("a takes the pin");
    assert_eq!(m.info().unwrap().stream_sequence, 1);
    m.ack().await.unwrap();
    let pin = a.pin_id().expect("a holds a pin id");
    assert!(b.next(Duration::from_millis(500)).await.unwrap().is_none());
    assert_eq!(b.pin_id(), None);
    let m = a.next(WAIT).await.unwrap().expect("a keeps the pin");
    assert_eq!(m.info().unwrap().stream_sequence, 2);
    m.ack().await.unwrap();

    js.unpin_consumer("JOBS", "pin", "jobs").await.unwrap();
    let err = js.unpin_consumer("JOBS", "pin", "other").await.unwrap_err();
    assert_eq!(err.err_code(), Some(10160));
    // a's next pull carries the released id: refused once, and the id is forgotten.
    let err = a.next(WAIT).await.unwrap_err();
    assert!(
        matches!(err, consumer::ConsumerError::PinIdMismatch { .. }),
        "{err:?}"
    );
    assert_eq!(a.pin_id(), None);
    let m = b.next(WAIT).await.unwrap().expect("b takes the new pin");
    assert_eq!(m.info().unwrap().stream_sequence, 3);
    assert_ne!(b.pin_id().as_deref(), Some(pin.as_str()));
    assert!(b.pin_id().is_some());

    let until = jsproto::api::time::Timestamp::from_unix_nanos(
        u64::try_from(
            (std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                + Duration::from_secs(3600))
            .as_nanos(),
        )
        .unwrap(),
    );
    let r = js.pause_consumer("JOBS", "pin", Some(until)).await.unwrap();
    assert!(r.paused && !r.pause_remaining.is_zero(), "{r:?}");
    let r = js.pause_consumer("JOBS", "pin", None).await.unwrap();
    assert!(!r.paused, "{r:?}");

    // Reset: everything acked so far is delivered again from seq 1.
    let r = js.reset_consumer("JOBS", "pin", 1).await.unwrap();
    assert_eq!((r.reset_seq, r.info.num_pending), (1, 3));
}

/// Push consumers through jsclient: a deliver group shared by two subscribers (each message
/// to one of them), and flow control answered by the client so that several MiB arrive.
#[tokio::test]
async fn push_consumer_shared_by_a_deliver_group_with_flow_control() {
    let server = TestServer::start();
    let js = setup(&server).await;
    js.create_stream(stream::Config::new("FEED", ["feed.>"]))
        .await
        .unwrap();
    let mut cfg = consumer::pull_config("push");
    cfg.deliver_subject = "dlv.feed".into();
    cfg.deliver_group = "workers".into();
    cfg.flow_control = true;
    cfg.idle_heartbeat = Duration::from_secs(1);
    js.create_consumer_on_stream(cfg, "FEED").await.unwrap();
    let mut a = js.push_messages("FEED", "push").await.unwrap();
    let mut b = js.push_messages("FEED", "push").await.unwrap();
    let big = vec![b'x'; 256 * 1024];
    const N: u64 = 24;
    for _ in 0..N {
        js.publish("feed.x", big.clone().into())
            .await
            .unwrap()
            .await
            .unwrap();
    }
    let mut seen = std::collections::BTreeSet::new();
    let (mut from_a, mut from_b) = (0, 0);
    while (seen.len() as u64) < N {
        let m = tokio::select! {
            m = a.next() => { from_a += 1; m }
            m = b.next() => { from_b += 1; m }
            () = tokio::time::sleep(WAIT) => panic!("stalled after {} messages", seen.len()),
        };
        let m = m.expect("stream open").expect("a message");
        assert_eq!(m.payload.len(), big.len());
        assert!(
            seen.insert(m.info().unwrap().stream_sequence),
            "delivered twice"
        );
        m.ack().await.unwrap();
    }
    assert!(
        from_a > 0 && from_b > 0,
        "one member got everything: {from_a}/{from_b}"
    );
    let err = js.push_messages("FEED", "nope").await.unwrap_err();
    assert_eq!(err.err_code(), Some(10014));
}

/// An ordered consumer hands out every message once, in order, and carries on from where it
/// was after its server-side consumer disappears.
#[tokio::test]
async fn ordered_consumer_recovers_from_a_lost_consumer() {
    let server = TestServer::start();
    let js = setup(&server).await;
    js.create_stream(stream::Config::new("KV", ["kv.>"]))
        .await
        .unwrap();
    let publish = |i: u64| {
        let js = js.clone();
        async move {
            js.publish(format!("kv.{i}"), format!("v{i}").into())
                .await
                .unwrap()
                .await
                .unwrap();
        }
    };
    for i in 1..=5 {
        publish(i).await;
    }
    let mut ordered = js
        .ordered(
            "KV",
            jetstream::OrderedConfig {
                heartbeat: Some(Duration::from_millis(500)),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let mut got = Vec::new();
    for _ in 0..5 {
        got.push(next_seq(&mut ordered).await);
    }
    assert_eq!(got, [1, 2, 3, 4, 5]);
    // Lose the consumer: the client notices the missing heartbeats and re-creates it.
    let names = js
        .get_stream("KV")
        .await
        .unwrap()
        .consumer_names()
        .await
        .unwrap();
    assert_eq!(names.len(), 1, "{names:?}");
    js.delete_consumer_from_stream(&names[0], "KV")
        .await
        .unwrap();
    for i in 6..=8 {
        publish(i).await;
    }
    for _ in 0..3 {
        got.push(next_seq(&mut ordered).await);
    }
    assert_eq!(got, [1, 2, 3, 4, 5, 6, 7, 8]);
}

/// The stream seq of the next message of an ordered consumer (skipping the missed-heartbeat
/// reports it makes while it recovers).
async fn next_seq(ordered: &mut jetstream::PushMessages) -> u64 {
    loop {
        match timeout(WAIT, ordered.next()).await.expect("in time") {
            Some(Ok(m)) => return m.info().unwrap().stream_sequence,
            Some(Err(_)) => continue,
            None => panic!("ordered consumer ended"),
        }
    }
}

/// Accounts `A` (JetStream) and `C` (none), for [`a_publish_nobody_takes_says_why`].
const ACCOUNTS: &str = "accounts {
  A: { users: [ { user: a, password: a } ], jetstream: enabled }
  C: { users: [ { user: c, password: c } ] }
}
";

async fn js_as(server: &TestServer, user: &str) -> jetstream::Context {
    let client = jsclient::ConnectOptions::new()
        .user_and_password(user, user)
        .connect(server.url())
        .await
        .unwrap();
    jetstream::new(client)
}

async fn publish_err(js: &jetstream::Context, subject: &str) -> PublishError {
    js.publish(subject.to_owned(), "x".into())
        .await
        .unwrap()
        .await
        .unwrap_err()
}

/// Every publish nobody takes is answered `503` (no responders) by both servers alike; the
/// PubAck future names why, asking `$JS.API.INFO` and `STREAM.NAMES` after it: no stream
/// captures the subject, JetStream off for the account, JetStream off on the server. (A
/// stream without a leader: `jsctl_cluster.rs`.) Before, each was "no stream captures this
/// subject".
#[tokio::test]
async fn a_publish_nobody_takes_says_why() {
    let server = TestServer::start_with_config(ACCOUNTS);
    let a = js_as(&server, "a").await;
    a.create_stream(stream::Config::new("ORDERS", ["orders.>"]))
        .await
        .unwrap();
    let err = publish_err(&a, "nowhere").await;
    assert_eq!(err, PublishError::NoStream);
    assert_eq!(err.to_string(), "no stream captures this subject");
    let c = js_as(&server, "c").await;
    let err = publish_err(&c, "orders.1").await;
    assert_eq!(err, PublishError::NotEnabledForAccount);
    assert_eq!(err.to_string(), "JetStream is not enabled for this account");
    assert_eq!(
        c.no_responders_cause("orders.1").await,
        PublishError::NotEnabledForAccount
    );

    let off = TestServer::start_without_jetstream("");
    let js = setup(&off).await;
    let err = publish_err(&js, "orders.1").await;
    assert_eq!(err, PublishError::NotEnabled);
    assert_eq!(err.to_string(), "JetStream is not enabled");
}
