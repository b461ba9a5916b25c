//! Interest and work-queue retention with several consumers, `+TERM` and `max_deliver`, as
//! nats-server 2.15 applies them, through raw `$JS.API` requests, raw pull requests and acks
//! against the real binary: when a message leaves the stream, and what the consumers report
//! afterwards. Every test here also passes against nats-server 2.15.1
//! (`JSSERVER_TEST_BINARY=.../nats-server`).

mod common;

use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{pull, seqs, Delivery, TestServer};
use futures_util::StreamExt;
use serde_json::{json, Value};

/// How long a wait for a condition may take before the test fails (not a timing assertion).
const DEADLINE: Duration = Duration::from_secs(20);

async fn connect(server: &TestServer) -> async_nats::Client {
    async_nats::connect(server.url()).await.expect("connect")
}

/// A raw API request; returns the JSON response.
async fn api(nc: &async_nats::Client, subject: &str, body: Value) -> Value {
    let payload = if body.is_null() {
        Bytes::new()
    } else {
        Bytes::from(body.to_string())
    };
    let msg = tokio::time::timeout(
        Duration::from_secs(10),
        nc.request(subject.to_owned(), payload),
    )
    .await
    .expect("answered in time")
    .expect("request");
    serde_json::from_slice(&msg.payload).expect("JSON response")
}

/// A raw API request that must succeed; returns the response.
async fn api_ok(nc: &async_nats::Client, subject: &str, body: Value) -> Value {
    let r = api(nc, subject, body.clone()).await;
    assert!(r.get("error").is_none(), "{subject} {body}: {r}");
    r
}

/// Publishes and waits for a successful PubAck; returns its `seq`.
async fn publish(nc: &async_nats::Client, subject: &str, payload: &str) -> u64 {
    let msg = tokio::time::timeout(
        Duration::from_secs(10),
        nc.request(subject.to_owned(), Bytes::from(payload.to_owned())),
    )
    .await
    .expect("PubAck in time")
    .expect("PubAck");
    let ack: Value = serde_json::from_slice(&msg.payload).expect("PubAck JSON");
    ack["seq"]
        .as_u64()
        .unwrap_or_else(|| panic!("PubAck {ack}"))
}

async fn create_stream(nc: &async_nats::Client, name: &str, retention: &str) {
    api_ok(
        nc,
        &format!("$JS.API.STREAM.CREATE.{name}"),
        json!({"name": name, "subjects": [format!("{}.>", name.to_lowercase())],
            "retention": retention, "storage": "memory"}),
    )
    .await;
}

/// Creates durable `name` on `stream` (explicit acks) with `extra` merged into its config.
async fn create_consumer(nc: &async_nats::Client, stream: &str, name: &str, extra: Value) {
    let mut config = json!({"durable_name": name, "ack_policy": "explicit"});
    for (k, v) in extra.as_object().expect("object") {
        config[k] = v.clone();
    }
    api_ok(
        nc,
        &format!("$JS.API.CONSUMER.CREATE.{stream}.{name}"),
        json!({"stream_name": stream, "config": config}),
    )
    .await;
}

/// `(messages, first_seq)` of the stream.
async fn stream_state(nc: &async_nats::Client, stream: &str) -> (u64, u64) {
    let info = api_ok(nc, &format!("$JS.API.STREAM.INFO.{stream}"), Value::Null).await;
    let state = &info["state"];
    (
        state["messages"].as_u64().unwrap(),
        state["first_seq"].as_u64().unwrap(),
    )
}

/// What CONSUMER.INFO reports that these tests check.
#[derive(Debug, PartialEq, Eq)]
struct Counts {
    /// `ack_floor.stream_seq`.
    floor: u64,
    /// `delivered.stream_seq`.
    delivered: u64,
    num_ack_pending: u64,
    num_redelivered: u64,
    num_pending: u64,
}

fn counts(floor: u64, delivered: u64, ack_pending: u64, redelivered: u64, pending: u64) -> Counts {
    Counts {
        floor,
        delivered,
        num_ack_pending: ack_pending,
        num_redelivered: redelivered,
        num_pending: pending,
    }
}

async fn consumer_counts(nc: &async_nats::Client, stream: &str, consumer: &str) -> Counts {
    let ci = api_ok(
        nc,
        &format!("$JS.API.CONSUMER.INFO.{stream}.{consumer}"),
        Value::Null,
    )
    .await;
    let n = |v: &Value| v.as_u64().unwrap_or_else(|| panic!("{ci}"));
    Counts {
        floor: n(&ci["ack_floor"]["stream_seq"]),
        delivered: n(&ci["delivered"]["stream_seq"]),
        num_ack_pending: n(&ci["num_ack_pending"]),
        num_redelivered: n(&ci["num_redelivered"]),
        num_pending: n(&ci["num_pending"]),
    }
}

/// Sends `body` (`+ACK`, `+TERM`, `-NAK`) for `d` and waits for the server's confirmation.
async fn ack(nc: &async_nats::Client, d: &Delivery, body: &'static str) {
    tokio::time::timeout(
        Duration::from_secs(10),
        nc.request(d.reply.clone(), Bytes::from_static(body.as_bytes())),
    )
    .await
    .expect("ack confirmed in time")
    .expect("ack confirmed");
}

/// Pulls (`no_wait`) from `consumer` until the `MAX_DELIVERIES` advisories for every stream
/// seq in `seqs` arrived (nats-server gives a message up when its last ack wait runs out or
/// when a pull reaches it); returns the deliveries made meanwhile (redeliveries up to
/// `max_deliver`).
async fn until_max_deliveries(
    nc: &async_nats::Client,
    advisories: &mut async_nats::Subscriber,
    stream: &str,
    consumer: &str,
    seqs: &[u64],
) -> Vec<Delivery> {
    let start = Instant::now();
    let mut deliveries = Vec::new();
    let mut left: Vec<u64> = seqs.to_vec();
    while !left.is_empty() {
        assert!(start.elapsed() < DEADLINE, "no MAX_DELIVERIES for {left:?}");
        deliveries.extend(pull(nc, stream, consumer, 10).await);
        while let Ok(Some(msg)) =
            tokio::time::timeout(Duration::from_millis(200), advisories.next()).await
        {
            let adv: Value = serde_json::from_slice(&msg.payload).expect("advisory JSON");
            assert_eq!(adv["consumer"], consumer, "{adv}");
            left.retain(|&s| adv["stream_seq"] != s);
            if left.is_empty() {
                break;
            }
        }
    }
    deliveries
}

async fn max_deliveries_sub(nc: &async_nats::Client, stream: &str) -> async_nats::Subscriber {
    let sub = nc
        .subscribe(format!(
            "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.{stream}.*"
        ))
        .await
        .expect("subscribe");
    nc.flush().await.expect("flush");
    sub
}

// ---------------------------------------------------------------------------------------------
// Interest retention.
// ---------------------------------------------------------------------------------------------

/// A message leaves an interest stream once every consumer acked or terminated it; `+TERM`
/// counts as done, like an ack.
#[tokio::test]
async fn interest_ack_and_term_from_two_consumers() {
    let server = TestServer::start(&[]);
    let nc = connect(&server).await;
    create_stream(&nc, "INT", "interest").await;
    create_consumer(&nc, "INT", "A", json!({})).await;
    create_consumer(&nc, "INT", "B", json!({})).await;
    for i in 1..=3 {
        assert_eq!(publish(&nc, "int.x", &format!("m{i}")).await, i);
    }
    let a = pull(&nc, "INT", "A", 3).await;
    let b = pull(&nc, "INT", "B", 3).await;
    assert_eq!((seqs(&a), seqs(&b)), (vec![1, 2, 3], vec![1, 2, 3]));

    // 1: A acks, B terminates: gone.
    ack(&nc, &a[0], "+ACK").await;
    assert_eq!(stream_state(&nc, "INT").await, (3, 1));
    ack(&nc, &b[0], "+TERM").await;
    assert_eq!(stream_state(&nc, "INT").await, (2, 2));
    // 2: only A acks; 3: only B terminates. Both stay.
    ack(&nc, &a[1], "+ACK").await;
    ack(&nc, &b[2], "+TERM").await;
    assert_eq!(stream_state(&nc, "INT").await, (2, 2));
    assert_eq!(
        consumer_counts(&nc, "INT", "A").await,
        counts(2, 3, 1, 0, 0)
    );
    assert_eq!(
        consumer_counts(&nc, "INT", "B").await,
        counts(1, 3, 1, 0, 0)
    );
    // The other halves: both gone.
    ack(&nc, &a[2], "+ACK").await;
    assert_eq!(stream_state(&nc, "INT").await, (1, 2));
    ack(&nc, &b[1], "+TERM").await;
    assert_eq!(stream_state(&nc, "INT").await, (0, 4));
    assert_eq!(
        consumer_counts(&nc, "INT", "A").await,
        counts(3, 3, 0, 0, 0)
    );
    assert_eq!(
        consumer_counts(&nc, "INT", "B").await,
        counts(3, 3, 0, 0, 0)
    );
}

/// A message one consumer gave up at `max_deliver` stays in an interest stream after the
/// other consumer acks it (in either order): the exhausted consumer still counts as
/// interested (its ack floor stays below the message), and only a late ack from it lets the
/// message go.
#[tokio::test]
async fn interest_max_deliver_on_one_consumer_keeps_the_message() {
    let server = TestServer::start(&[]);
    let nc = connect(&server).await;
    let mut advisories = max_deliveries_sub(&nc, "INT").await;
    create_stream(&nc, "INT", "interest").await;
    create_consumer(&nc, "INT", "A", json!({})).await;
    create_consumer(
        &nc,
        "INT",
        "B",
        json!({"max_deliver": 2, "ack_wait": 300_000_000u64}),
    )
    .await;

    // 1: A acks first, then B exhausts it.
    assert_eq!(publish(&nc, "int.x", "one").await, 1);
    let a1 = pull(&nc, "INT", "A", 1).await;
    assert_eq!(seqs(&a1), [1]);
    ack(&nc, &a1[0], "+ACK").await;
    let b1 = pull(&nc, "INT", "B", 1).await;
    assert_eq!(seqs(&b1), [1]);
    let redelivered = until_max_deliveries(&nc, &mut advisories, "INT", "B", &[1]).await;
    assert_eq!(
        redelivered
            .iter()
            .map(|d| (d.seq, d.count))
            .collect::<Vec<_>>(),
        [(1, 2)]
    );
    assert_eq!(stream_state(&nc, "INT").await, (1, 1));

    // 2: B exhausts it first, then A acks.
    assert_eq!(publish(&nc, "int.x", "two").await, 2);
    let b2 = pull(&nc, "INT", "B", 1).await;
    assert_eq!(seqs(&b2), [2]);
    until_max_deliveries(&nc, &mut advisories, "INT", "B", &[2]).await;
    let a2 = pull(&nc, "INT", "A", 1).await;
    assert_eq!(seqs(&a2), [2]);
    ack(&nc, &a2[0], "+ACK").await;
    assert_eq!(stream_state(&nc, "INT").await, (2, 1));

    assert_eq!(
        consumer_counts(&nc, "INT", "A").await,
        counts(2, 2, 0, 0, 0)
    );
    // B's ack floor stays below the exhausted messages; they still count as redelivered.
    assert_eq!(
        consumer_counts(&nc, "INT", "B").await,
        counts(0, 2, 0, 2, 0)
    );
    // Nothing more for B.
    assert!(pull(&nc, "INT", "B", 5).await.is_empty());

    // A late ack from B lets the message go; the floor does not move for it (it moves only
    // when a message still pending is acked).
    ack(&nc, &b2[0], "+ACK").await;
    assert_eq!(stream_state(&nc, "INT").await, (1, 1));
    assert_eq!(
        consumer_counts(&nc, "INT", "B").await,
        counts(0, 2, 0, 1, 0)
    );
    ack(&nc, &b1[0], "+ACK").await;
    assert_eq!(stream_state(&nc, "INT").await, (0, 3));
    assert_eq!(
        consumer_counts(&nc, "INT", "B").await,
        counts(0, 2, 0, 0, 0)
    );
}

// ---------------------------------------------------------------------------------------------
// Work-queue retention.
// ---------------------------------------------------------------------------------------------

/// On a work-queue stream `+TERM` removes the message like an ack; `-NAK` keeps it for
/// redelivery.
#[tokio::test]
async fn workqueue_term_removes_the_message() {
    let server = TestServer::start(&[]);
    let nc = connect(&server).await;
    create_stream(&nc, "WQ", "workqueue").await;
    create_consumer(&nc, "WQ", "W", json!({})).await;
    for i in 1..=3 {
        publish(&nc, "wq.x", &format!("m{i}")).await;
    }
    let d = pull(&nc, "WQ", "W", 3).await;
    assert_eq!(seqs(&d), [1, 2, 3]);
    ack(&nc, &d[1], "+TERM").await;
    assert_eq!(stream_state(&nc, "WQ").await, (2, 1));
    assert_eq!(consumer_counts(&nc, "WQ", "W").await, counts(0, 3, 2, 0, 0));
    ack(&nc, &d[0], "-NAK").await;
    assert_eq!(stream_state(&nc, "WQ").await, (2, 1));
    let again = pull(&nc, "WQ", "W", 3).await;
    assert_eq!(
        again.iter().map(|d| (d.seq, d.count)).collect::<Vec<_>>(),
        [(1, 2)]
    );
    ack(&nc, &again[0], "+TERM").await;
    assert_eq!(stream_state(&nc, "WQ").await, (1, 3));
    assert_eq!(consumer_counts(&nc, "WQ", "W").await, counts(2, 3, 1, 0, 0));
}

/// On a work-queue stream a message given up at `max_deliver` stays in the stream; the
/// consumer never delivers it again and reports it neither pending nor ack-pending; its ack
/// floor moves past it with the next ack; a late ack of it removes it.
#[tokio::test]
async fn workqueue_max_deliver_keeps_the_message() {
    let server = TestServer::start(&[]);
    let nc = connect(&server).await;
    let mut advisories = max_deliveries_sub(&nc, "WQ").await;
    create_stream(&nc, "WQ", "workqueue").await;
    create_consumer(
        &nc,
        "WQ",
        "W",
        json!({"max_deliver": 1, "ack_wait": 300_000_000u64}),
    )
    .await;
    publish(&nc, "wq.x", "one").await;
    let first = pull(&nc, "WQ", "W", 1).await;
    assert_eq!(seqs(&first), [1]);
    let more = until_max_deliveries(&nc, &mut advisories, "WQ", "W", &[1]).await;
    assert!(more.is_empty(), "{more:?}");
    assert_eq!(stream_state(&nc, "WQ").await, (1, 1));
    assert_eq!(consumer_counts(&nc, "WQ", "W").await, counts(0, 1, 0, 0, 0));

    // The next message is delivered as usual; acking it removes it, seq 1 stays. With
    // nothing pending any more, that ack moves the floor onto `delivered`.
    assert_eq!(publish(&nc, "wq.x", "two").await, 2);
    let d = pull(&nc, "WQ", "W", 5).await;
    assert_eq!(seqs(&d), [2]);
    ack(&nc, &d[0], "+ACK").await;
    assert_eq!(stream_state(&nc, "WQ").await, (1, 1));
    assert_eq!(consumer_counts(&nc, "WQ", "W").await, counts(2, 2, 0, 0, 0));
    assert!(pull(&nc, "WQ", "W", 5).await.is_empty());

    // A late ack of the exhausted message removes it.
    ack(&nc, &first[0], "+ACK").await;
    assert_eq!(stream_state(&nc, "WQ").await, (0, 3));
    assert_eq!(consumer_counts(&nc, "WQ", "W").await, counts(2, 2, 0, 0, 0));
}

/// What a consumer gave up at `max_deliver` (after a single delivery) is still kept for it
/// after a restart, and its late ack still lets the message go.
#[tokio::test]
async fn interest_max_deliver_survives_a_restart() {
    let mut server = TestServer::start(&[]);
    let nc = connect(&server).await;
    let mut advisories = max_deliveries_sub(&nc, "INT").await;
    api_ok(
        &nc,
        "$JS.API.STREAM.CREATE.INT",
        json!({"name": "INT", "subjects": ["int.>"], "retention": "interest", "storage": "file"}),
    )
    .await;
    create_consumer(&nc, "INT", "A", json!({})).await;
    create_consumer(
        &nc,
        "INT",
        "B",
        json!({"max_deliver": 1, "ack_wait": 300_000_000u64}),
    )
    .await;
    publish(&nc, "int.x", "one").await;
    publish(&nc, "int.x", "two").await;
    let a = pull(&nc, "INT", "A", 2).await;
    let b = pull(&nc, "INT", "B", 2).await;
    assert_eq!((seqs(&a), seqs(&b)), (vec![1, 2], vec![1, 2]));
    until_max_deliveries(&nc, &mut advisories, "INT", "B", &[1, 2]).await;
    ack(&nc, &a[0], "+ACK").await;
    ack(&nc, &a[1], "+ACK").await;
    assert_eq!(stream_state(&nc, "INT").await, (2, 1));
    drop(nc);
    server.terminate();
    let store = server.dir.path().join("store");
    let server = TestServer::restart(server, &["-sd", store.to_str().unwrap()]);
    let nc = connect(&server).await;
    assert_eq!(stream_state(&nc, "INT").await, (2, 1));
    assert!(pull(&nc, "INT", "B", 5).await.is_empty());
    ack(&nc, &b[0], "+ACK").await;
    assert_eq!(stream_state(&nc, "INT").await, (1, 2));
}
