//! Consumer updates applied to messages already in flight, end to end with async-nats: a
//! durable pull consumer has five orders delivered and unacked, then its `max_ack_pending`,
//! `ack_wait`, `max_deliver` or `backoff` is changed, and what happens to the five, and what
//! `consumer info` counts, is what nats-server 2.15.1 does (checked with
//! `JSSERVER_TEST_BINARY=$(which nats-server) cargo test --test jetstream_consumer_updates`):
//!
//! - `max_ack_pending` lowered below what is in flight: accepted; nothing more is delivered
//!   (a pull times out with `408`), the in-flight count stays;
//! - `ack_wait` lowered: the in-flight orders are redelivered after the new wait, not the old;
//! - `backoff` set: its first step becomes the ack wait, and so the redelivery time;
//! - `max_deliver` lowered to what they already had: never redelivered, and once their ack
//!   wait ran out they no longer count as ack pending (the ack floor stays).
//!
//! No assertion depends on timing: conditions are awaited with generous deadlines.

mod common;

use std::time::Duration;

use async_nats::jetstream::{self, consumer::pull, AckKind};
use common::TestServer;
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(20);
const SECOND_NS: u64 = 1_000_000_000;

struct Setup {
    nc: async_nats::Client,
    js: jetstream::Context,
    /// The five deliveries, unacked.
    in_flight: Vec<jetstream::Message>,
}

/// `ORDERS` with five orders and consumer `shipping` (explicit ack, ack wait 30 s,
/// max deliver 5, max ack pending 10) that has all five delivered, unacked.
async fn five_in_flight(server: &TestServer) -> Setup {
    let nc = async_nats::connect(server.url()).await.expect("connect");
    let js = jetstream::new(nc.clone());
    js.create_stream(jetstream::stream::Config {
        name: "ORDERS".into(),
        subjects: vec!["orders.>".into()],
        ..Default::default()
    })
    .await
    .expect("stream");
    for i in 0..5 {
        publish(&js, &format!("orders.{i}")).await;
    }
    let consumer = create(&nc, base()).await;
    let in_flight = common::fetch(&consumer, 5, Duration::from_secs(2)).await;
    assert_eq!(in_flight.len(), 5);
    for m in &in_flight {
        assert_eq!(m.info().expect("info").delivered, 1);
    }
    Setup { nc, js, in_flight }
}

async fn publish(js: &jetstream::Context, subject: &str) {
    js.publish(subject.to_owned(), "order".into())
        .await
        .expect("publish")
        .await
        .expect("puback");
}

fn base() -> Value {
    json!({"durable_name": "shipping", "ack_policy": "explicit", "ack_wait": 30 * SECOND_NS,
           "max_deliver": 5, "max_ack_pending": 10})
}

/// [`base`] with `changes` applied.
fn with(changes: Value) -> Value {
    let mut c = base();
    for (k, v) in changes.as_object().expect("an object") {
        c[k] = v.clone();
    }
    c
}

/// Creates or updates `shipping` with `config` through the raw API (the answer is checked)
/// and returns a handle on it.
async fn create(nc: &async_nats::Client, config: Value) -> jetstream::consumer::PullConsumer {
    let body = json!({"stream_name": "ORDERS", "config": config});
    let msg = tokio::time::timeout(
        WAIT,
        nc.request(
            "$JS.API.CONSUMER.CREATE.ORDERS.shipping",
            body.to_string().into(),
        ),
    )
    .await
    .expect("answered in time")
    .expect("request");
    let r: Value = serde_json::from_slice(&msg.payload).expect("JSON");
    assert!(r.get("error").is_none(), "consumer create/update: {r}");
    jetstream::new(nc.clone())
        .get_stream("ORDERS")
        .await
        .expect("stream")
        .get_consumer::<pull::Config>("shipping")
        .await
        .expect("consumer")
}

async fn info(nc: &async_nats::Client) -> Value {
    let msg = nc
        .request("$JS.API.CONSUMER.INFO.ORDERS.shipping", "".into())
        .await
        .expect("info");
    serde_json::from_slice(&msg.payload).expect("JSON")
}

/// Fetches until `n` messages came or the deadline passed; returns (stream seq, delivery
/// count) of each.
async fn redeliveries(c: &jetstream::consumer::PullConsumer, n: usize) -> Vec<(u64, i64)> {
    let deadline = tokio::time::Instant::now() + WAIT;
    let mut got = Vec::new();
    while got.len() < n && tokio::time::Instant::now() < deadline {
        for m in common::fetch(c, n - got.len(), Duration::from_secs(1)).await {
            let i = m.info().expect("info");
            got.push((i.stream_sequence, i.delivered));
        }
    }
    got.sort_unstable();
    got
}

/// Polls consumer info until `done` holds (or fails after [`WAIT`]).
async fn wait_info(nc: &async_nats::Client, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let i = info(nc).await;
        if done(&i) {
            return i;
        }
        assert!(tokio::time::Instant::now() < deadline, "never held: {i}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn max_ack_pending_lowered_below_what_is_in_flight_stops_deliveries() {
    let server = TestServer::start(&[]);
    let s = five_in_flight(&server).await;
    let updated = create(&s.nc, with(json!({"max_ack_pending": 2}))).await;
    let i = info(&s.nc).await;
    assert_eq!(i["config"]["max_ack_pending"], 2);
    assert_eq!(i["num_ack_pending"], 5, "in flight stays counted");
    publish(&s.js, "orders.new0").await;
    publish(&s.js, "orders.new1").await;
    let got = common::fetch(&updated, 5, Duration::from_millis(500)).await;
    assert!(got.is_empty(), "nothing past the lowered cap");
    let i = info(&s.nc).await;
    assert_eq!(i["num_pending"], 2);
    assert_eq!(i["delivered"]["stream_seq"], 5);
    // Acking four of the five leaves one in flight: room for one more below the cap of 2.
    for m in &s.in_flight[..4] {
        m.ack_with(AckKind::Ack).await.expect("ack");
    }
    wait_info(&s.nc, |i| i["num_ack_pending"] == 1).await;
    let got = common::fetch(&updated, 5, Duration::from_millis(1500)).await;
    let seqs: Vec<u64> = got
        .iter()
        .map(|m| m.info().expect("info").stream_sequence)
        .collect();
    assert_eq!(seqs, vec![6], "one new order, up to the cap");
}

#[tokio::test]
async fn ack_wait_lowered_redelivers_what_is_in_flight_after_the_new_wait() {
    let server = TestServer::start(&[]);
    let s = five_in_flight(&server).await;
    let updated = create(&s.nc, with(json!({"ack_wait": SECOND_NS}))).await;
    // Within the generous deadline, far below the old 30 s wait.
    let got = redeliveries(&updated, 5).await;
    assert_eq!(got, (1..=5).map(|seq| (seq, 2)).collect::<Vec<_>>());
    let i = info(&s.nc).await;
    assert_eq!(i["num_redelivered"], 5);
    assert_eq!(i["num_ack_pending"], 5);
    assert_eq!(i["delivered"]["consumer_seq"], 10);
    assert_eq!(i["delivered"]["stream_seq"], 5);
}

#[tokio::test]
async fn backoff_set_makes_its_first_step_the_ack_wait() {
    let server = TestServer::start(&[]);
    let s = five_in_flight(&server).await;
    let updated = create(&s.nc, with(json!({"backoff": [SECOND_NS, 2 * SECOND_NS]}))).await;
    let i = info(&s.nc).await;
    assert_eq!(
        i["config"]["ack_wait"], SECOND_NS,
        "ack_wait follows backoff[0]"
    );
    let got = redeliveries(&updated, 5).await;
    assert_eq!(got, (1..=5).map(|seq| (seq, 2)).collect::<Vec<_>>());
}

#[tokio::test]
async fn max_deliver_lowered_to_what_was_delivered_ends_redelivery() {
    let server = TestServer::start(&[]);
    let s = five_in_flight(&server).await;
    let updated = create(
        &s.nc,
        with(json!({"max_deliver": 1, "ack_wait": SECOND_NS})),
    )
    .await;
    // Once the (new, short) ack wait ran out, the five are no longer ack pending ...
    let i = wait_info(&s.nc, |i| i["num_ack_pending"] == 0).await;
    assert_eq!(i["ack_floor"]["stream_seq"], 0, "... and not acked either");
    assert_eq!(i["num_redelivered"], 0);
    assert_eq!(i["delivered"]["consumer_seq"], 5);
    // ... and never come back.
    let got = common::fetch(&updated, 5, Duration::from_millis(1500)).await;
    assert!(got.is_empty(), "redelivered past max_deliver");
}
