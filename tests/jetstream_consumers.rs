//! Durable pull consumers through async-nats against the real `jsserver` binary: the
//! `shipping` consumer shared by several workers, acks and the ack floor, redelivery after
//! AckWait, MaxAckPending, live config edits, consumer info, deletion, and ack durability
//! across `kill -9`.

mod common;

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use async_nats::jetstream::consumer::{pull, AckPolicy, PullConsumer};
use async_nats::jetstream::{self, stream, AckKind};
use bytes::Bytes;
use common::{fetch, TestServer};
use futures_util::StreamExt;
use serde_json::{json, Value};

async fn connect(server: &TestServer) -> (async_nats::Client, jetstream::Context) {
    let nc = async_nats::connect(server.url()).await.expect("connect");
    let js = jetstream::new(nc.clone());
    (nc, js)
}

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

async fn orders_with(js: &jetstream::Context, n: u64) -> stream::Stream {
    let s = js
        .create_stream(stream::Config {
            name: "ORDERS".into(),
            subjects: vec!["orders.>".into()],
            ..Default::default()
        })
        .await
        .expect("create stream");
    for i in 1..=n {
        js.publish("orders.new", Bytes::from(format!("order-{i}")))
            .await
            .unwrap()
            .await
            .unwrap();
    }
    s
}

async fn shipping(s: &stream::Stream, ack_wait: Duration, max_ack_pending: i64) -> PullConsumer {
    s.create_consumer(pull::Config {
        durable_name: Some("shipping".into()),
        ack_policy: AckPolicy::Explicit,
        ack_wait,
        max_ack_pending,
        ..Default::default()
    })
    .await
    .expect("create consumer")
}

#[tokio::test]
async fn consumer_defaults_and_info() {
    let server = TestServer::start(&[]);
    let (nc, js) = connect(&server).await;
    let s = orders_with(&js, 3).await;
    let r = api(
        &nc,
        "$JS.API.CONSUMER.CREATE.ORDERS.shipping",
        json!({"stream_name": "ORDERS", "config": {"durable_name": "shipping", "ack_policy": "explicit"}}),
    )
    .await;
    assert_eq!(
        r["type"],
        "io.nats.jetstream.api.v1.consumer_create_response"
    );
    assert_eq!(r["config"]["ack_wait"], 30_000_000_000u64);
    assert_eq!(r["config"]["max_ack_pending"], 1000);
    assert_eq!(r["config"]["max_waiting"], 512);
    assert_eq!(r["config"]["max_deliver"], -1);
    assert_eq!(r["num_pending"], 3);
    assert_eq!(r["delivered"], json!({"consumer_seq": 0, "stream_seq": 0}));

    let mut c: PullConsumer = s.get_consumer("shipping").await.unwrap();
    let got = fetch(&c, 1, Duration::from_secs(2)).await;
    assert_eq!(got.len(), 1);
    let info = c.info().await.unwrap();
    assert_eq!(info.num_ack_pending, 1);
    assert_eq!(info.num_pending, 2);
    assert_eq!(info.delivered.stream_sequence, 1);
    assert_eq!(info.ack_floor.stream_sequence, 0);

    let r = api(&nc, "$JS.API.CONSUMER.INFO.ORDERS.nope", Value::Null).await;
    assert_eq!(r["error"]["err_code"], 10014);
    let names = api(&nc, "$JS.API.CONSUMER.NAMES.ORDERS", Value::Null).await;
    assert_eq!(names["consumers"], json!(["shipping"]));
    let list = api(&nc, "$JS.API.CONSUMER.LIST.ORDERS", Value::Null).await;
    assert_eq!(list["consumers"][0]["name"], "shipping");
    let si = api(&nc, "$JS.API.STREAM.INFO.ORDERS", Value::Null).await;
    assert_eq!(si["state"]["consumer_count"], 1);
    let account = api(&nc, "$JS.API.INFO", Value::Null).await;
    assert_eq!(account["consumers"], 1);
}

#[tokio::test]
async fn three_workers_split_a_backlog_each_order_once() {
    let server = TestServer::start(&[]);
    let (_nc, js) = connect(&server).await;
    let s = orders_with(&js, 60).await;
    shipping(&s, Duration::from_secs(30), 1000).await;
    let mut tasks = Vec::new();
    for w in 0..3 {
        let (_nc, js) = connect(&server).await;
        tasks.push(tokio::spawn(async move {
            let s = js.get_stream("ORDERS").await.unwrap();
            let c: PullConsumer = s.get_consumer("shipping").await.unwrap();
            let mut seen = Vec::new();
            loop {
                let got = fetch(&c, 1, Duration::from_millis(500)).await;
                if got.is_empty() {
                    break;
                }
                for m in got {
                    let info = m.info().unwrap();
                    assert_eq!(info.delivered, 1, "first delivery");
                    seen.push(info.stream_sequence);
                    m.ack().await.unwrap();
                }
            }
            (w, seen)
        }));
    }
    let mut all = Vec::new();
    let mut shares = BTreeMap::new();
    for t in tasks {
        let (w, seen) = t.await.unwrap();
        shares.insert(w, seen.len());
        all.extend(seen);
    }
    all.sort_unstable();
    assert_eq!(
        all,
        (1..=60).collect::<Vec<u64>>(),
        "every order exactly once: {shares:?}"
    );
    let mut c: PullConsumer = s.get_consumer("shipping").await.unwrap();
    // Acks without a reply are processed in order after the deliveries; wait for the floor.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let info = c.info().await.unwrap();
        if info.ack_floor.stream_sequence == 60 {
            assert_eq!(info.delivered.stream_sequence, 60);
            assert_eq!(info.num_ack_pending, 0);
            assert_eq!(info.num_redelivered, 0);
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "ack floor stuck: {info:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn ack_floor_moves_over_out_of_order_acks() {
    let server = TestServer::start(&[]);
    let (_nc, js) = connect(&server).await;
    let s = orders_with(&js, 4).await;
    let mut c = shipping(&s, Duration::from_secs(30), 1000).await;
    let msgs = fetch(&c, 4, Duration::from_secs(2)).await;
    assert_eq!(msgs.len(), 4);
    msgs[1].double_ack().await.unwrap();
    assert_eq!(c.info().await.unwrap().ack_floor.stream_sequence, 0);
    msgs[0].double_ack().await.unwrap();
    assert_eq!(c.info().await.unwrap().ack_floor.stream_sequence, 2);
    msgs[3].double_ack().await.unwrap();
    assert_eq!(c.info().await.unwrap().ack_floor.stream_sequence, 2);
    msgs[2].double_ack().await.unwrap();
    let info = c.info().await.unwrap();
    assert_eq!(
        (info.ack_floor.stream_sequence, info.num_ack_pending),
        (4, 0)
    );
}

#[tokio::test]
async fn unacked_order_is_redelivered_to_another_worker_after_ack_wait() {
    let server = TestServer::start(&[]);
    let (_nc, js) = connect(&server).await;
    let s = orders_with(&js, 1).await;
    shipping(&s, Duration::from_millis(500), 1000).await;
    {
        // A worker takes the order and dies without acking.
        let (nc, js) = connect(&server).await;
        let c: PullConsumer = js
            .get_stream("ORDERS")
            .await
            .unwrap()
            .get_consumer("shipping")
            .await
            .unwrap();
        let got = fetch(&c, 1, Duration::from_secs(2)).await;
        assert_eq!(got.len(), 1);
        drop(got);
        drop(nc);
    }
    let mut c: PullConsumer = s.get_consumer("shipping").await.unwrap();
    let got = fetch(&c, 1, Duration::from_secs(5)).await;
    assert_eq!(got.len(), 1, "the survivor gets the order after AckWait");
    let info = got[0].info().unwrap();
    assert_eq!((info.stream_sequence, info.delivered), (1, 2));
    let ci = c.info().await.unwrap();
    assert_eq!((ci.num_redelivered, ci.num_ack_pending), (1, 1));
    got[0].double_ack().await.unwrap();
    let ci = c.info().await.unwrap();
    // Once acked the order is no longer tracked, so it no longer counts as redelivered.
    assert_eq!((ci.num_redelivered, ci.num_ack_pending), (0, 0));
}

#[tokio::test]
async fn nak_and_term() {
    let server = TestServer::start(&[]);
    let (_nc, js) = connect(&server).await;
    let s = orders_with(&js, 2).await;
    let mut c = shipping(&s, Duration::from_secs(30), 1000).await;
    let got = fetch(&c, 1, Duration::from_secs(2)).await;
    got[0].double_ack_with(AckKind::Nak(None)).await.unwrap();
    let again = fetch(&c, 1, Duration::from_secs(2)).await;
    let info = again[0].info().unwrap();
    assert_eq!(
        (info.stream_sequence, info.delivered),
        (1, 2),
        "NAKed order comes back first"
    );
    again[0].double_ack_with(AckKind::Term).await.unwrap();
    let next = fetch(&c, 1, Duration::from_secs(2)).await;
    assert_eq!(next[0].info().unwrap().stream_sequence, 2);
    next[0].double_ack().await.unwrap();
    let ci = c.info().await.unwrap();
    assert_eq!((ci.ack_floor.stream_sequence, ci.num_ack_pending), (2, 0));
}

#[tokio::test]
async fn max_ack_pending_caps_the_whole_consumer_and_edits_apply_live() {
    let server = TestServer::start(&[]);
    let (nc, js) = connect(&server).await;
    let s = orders_with(&js, 10).await;
    let mut c = shipping(&s, Duration::from_secs(30), 2).await;
    let first = fetch(&c, 5, Duration::from_millis(500)).await;
    assert_eq!(first.len(), 2, "only MaxAckPending are handed out");
    assert!(
        fetch(&c, 1, Duration::from_millis(300)).await.is_empty(),
        "capped"
    );
    assert_eq!(c.info().await.unwrap().num_ack_pending, 2);
    first[0].double_ack().await.unwrap();
    assert_eq!(
        fetch(&c, 5, Duration::from_millis(500)).await.len(),
        1,
        "one slot freed"
    );

    // The operator's edit (`consumer edit --max-pending`): an update request raises the cap.
    let r = api(
        &nc,
        "$JS.API.CONSUMER.CREATE.ORDERS.shipping",
        json!({"stream_name": "ORDERS", "action": "update", "config": {
            "durable_name": "shipping", "ack_policy": "explicit",
            "ack_wait": 30_000_000_000u64, "max_ack_pending": 5}}),
    )
    .await;
    assert_eq!(r["config"]["max_ack_pending"], 5, "{r}");
    assert_eq!(fetch(&c, 10, Duration::from_millis(500)).await.len(), 3);
    assert_eq!(c.info().await.unwrap().num_ack_pending, 5);
}

#[tokio::test]
async fn pull_for_a_missing_consumer_gets_no_responders() {
    let server = TestServer::start(&[]);
    let (nc, js) = connect(&server).await;
    orders_with(&js, 1).await;
    let err = nc
        .request(
            "$JS.API.CONSUMER.MSG.NEXT.ORDERS.nobody",
            Bytes::from_static(b"1"),
        )
        .await
        .expect_err("no consumer, no responder");
    assert_eq!(err.kind(), async_nats::RequestErrorKind::NoResponders);
}

#[tokio::test]
async fn deleting_a_consumer_ends_waiting_pulls() {
    let server = TestServer::start(&[]);
    let (nc, js) = connect(&server).await;
    let s = orders_with(&js, 0).await;
    shipping(&s, Duration::from_secs(30), 1000).await;
    let mut inbox = nc.subscribe("pull.reply").await.unwrap();
    nc.publish_with_reply(
        "$JS.API.CONSUMER.MSG.NEXT.ORDERS.shipping",
        "pull.reply",
        Bytes::from_static(br#"{"batch":1,"expires":10000000000}"#),
    )
    .await
    .unwrap();
    nc.flush().await.unwrap();
    let r = api(&nc, "$JS.API.CONSUMER.DELETE.ORDERS.shipping", Value::Null).await;
    assert_eq!(r["success"], true);
    let m = tokio::time::timeout(Duration::from_secs(5), inbox.next())
        .await
        .unwrap()
        .unwrap();
    let status = m.status.expect("a status message");
    assert_eq!(status.as_u16(), 409);
    assert_eq!(m.description.as_deref(), Some("Consumer Deleted"));
}

/// Waits for the next message on `inbox` that is a status other than `100` (heartbeats are
/// skipped) and returns its code and description.
async fn next_final_status(inbox: &mut async_nats::Subscriber) -> (u16, String) {
    loop {
        let m = tokio::time::timeout(Duration::from_secs(5), inbox.next())
            .await
            .expect("a status in time")
            .expect("subscription open");
        let status = m.status.expect("a status message, not a delivery");
        if status.as_u16() != 100 {
            return (status.as_u16(), m.description.unwrap_or_default());
        }
    }
}

/// Sends a pull request for `consumer` on ORDERS with its replies to `reply`.
async fn wait_pull(nc: &async_nats::Client, consumer: &str, reply: &str, body: &'static [u8]) {
    nc.publish_with_reply(
        format!("$JS.API.CONSUMER.MSG.NEXT.ORDERS.{consumer}"),
        reply.to_owned(),
        Bytes::from_static(body),
    )
    .await
    .unwrap();
    nc.flush().await.unwrap();
}

/// A stream deleted while pulls wait on its consumers ends each of them at once with
/// `409 Consumer Deleted` (with and without idle heartbeats), as nats-server does; a server
/// stopping ends them with `409 Server Shutdown`.
#[tokio::test]
async fn deleting_a_stream_ends_every_consumers_waiting_pulls() {
    let mut server = TestServer::start(&[]);
    let (nc, js) = connect(&server).await;
    let s = orders_with(&js, 0).await;
    shipping(&s, Duration::from_secs(30), 1000).await;
    let r = api(
        &nc,
        "$JS.API.CONSUMER.CREATE.ORDERS.billing",
        json!({"stream_name": "ORDERS", "config": {"durable_name": "billing", "ack_policy": "explicit"}}),
    )
    .await;
    assert!(r.get("error").is_none(), "{r}");
    let mut a = nc.subscribe("pull.a").await.unwrap();
    let mut b = nc.subscribe("pull.b").await.unwrap();
    wait_pull(
        &nc,
        "shipping",
        "pull.a",
        br#"{"batch":5,"expires":20000000000}"#,
    )
    .await;
    wait_pull(
        &nc,
        "billing",
        "pull.b",
        br#"{"batch":1,"expires":20000000000,"idle_heartbeat":1000000000}"#,
    )
    .await;
    let info = api(&nc, "$JS.API.CONSUMER.INFO.ORDERS.shipping", Value::Null).await;
    assert_eq!(info["num_waiting"], 1, "{info}");
    let r = api(&nc, "$JS.API.STREAM.DELETE.ORDERS", Value::Null).await;
    assert_eq!(r["success"], true, "{r}");
    for (name, inbox) in [("shipping", &mut a), ("billing", &mut b)] {
        let (code, description) = next_final_status(inbox).await;
        assert_eq!(
            (code, description.as_str()),
            (409, "Consumer Deleted"),
            "{name}"
        );
    }

    let s = orders_with(&js, 0).await;
    shipping(&s, Duration::from_secs(30), 1000).await;
    wait_pull(
        &nc,
        "shipping",
        "pull.a",
        br#"{"batch":5,"expires":20000000000}"#,
    )
    .await;
    let info = api(&nc, "$JS.API.CONSUMER.INFO.ORDERS.shipping", Value::Null).await;
    assert_eq!(info["num_waiting"], 1, "{info}");
    server.terminate();
    let (code, description) = next_final_status(&mut a).await;
    assert_eq!((code, description.as_str()), (409, "Server Shutdown"));
}

/// nats-server itself fails this test: it loses confirmed acks written in the ~100 ms before a
/// crash (its ack floor reads 0 after the restart). We persist a confirmed ack before
/// answering it.
#[tokio::test]
async fn confirmed_acks_and_pending_survive_kill_9() {
    let mut server = TestServer::start(&[]);
    let (_nc, js) = connect(&server).await;
    let s = orders_with(&js, 5).await;
    let c = shipping(&s, Duration::from_secs(30), 1000).await;
    let got = fetch(&c, 3, Duration::from_secs(2)).await;
    assert_eq!(got.len(), 3);
    // Confirmed acks for 1 and 3; then kill at once, no grace.
    got[0].double_ack().await.unwrap();
    got[2].double_ack().await.unwrap();
    let store = server.dir.path().join("store");
    server.kill9();
    let server = TestServer::restart(server, &["-sd", store.to_str().unwrap()]);
    let (_nc, js) = connect(&server).await;
    let s = js.get_stream("ORDERS").await.unwrap();
    let mut c: PullConsumer = s
        .get_consumer("shipping")
        .await
        .expect("consumer recovered");
    let info = c.info().await.unwrap();
    assert_eq!(info.delivered.stream_sequence, 3);
    assert_eq!(info.ack_floor.stream_sequence, 1);
    assert_eq!(info.num_ack_pending, 1, "only order 2 is still out");
    assert_eq!(info.num_pending, 2);
    // New pulls continue with 4 and 5; order 2 comes back after its AckWait (not now), and
    // the confirmed orders 1 and 3 never come back.
    let next = fetch(&c, 2, Duration::from_secs(1)).await;
    let seqs: HashSet<u64> = next
        .iter()
        .map(|m| m.info().unwrap().stream_sequence)
        .collect();
    assert_eq!(seqs, HashSet::from([4, 5]));
}

/// An unacked order comes back after AckWait while a flood of other publishes keeps the
/// stream's thread busy (its deadlines are also checked between batches, not only when it
/// is idle).
#[tokio::test]
async fn redelivery_happens_while_the_stream_is_busy() {
    let server = TestServer::start(&[]);
    let (_nc, js) = connect(&server).await;
    let s = orders_with(&js, 1).await;
    let c = shipping(&s, Duration::from_millis(300), 1000).await;
    let first = fetch(&c, 1, Duration::from_secs(2)).await;
    assert_eq!(first[0].info().unwrap().stream_sequence, 1);
    drop(first);
    // Keep the stream thread busy with a flood of publishes (no PubAck waits).
    let flood_nc = async_nats::connect(server.url()).await.unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = stop.clone();
    let flood = tokio::spawn(async move {
        while !flag.load(std::sync::atomic::Ordering::Relaxed) {
            for _ in 0..100 {
                flood_nc
                    .publish("orders.flood", Bytes::from_static(b"x"))
                    .await
                    .unwrap();
            }
            tokio::task::yield_now().await;
        }
        flood_nc.flush().await.unwrap();
    });
    let mut redelivered = None;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while redelivered.is_none() && tokio::time::Instant::now() < deadline {
        for m in fetch(&c, 50, Duration::from_millis(500)).await {
            let info = m.info().unwrap();
            if info.stream_sequence == 1 {
                redelivered = Some(info.delivered);
            }
            m.ack().await.unwrap();
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    flood.await.unwrap();
    assert_eq!(
        redelivered,
        Some(2),
        "order 1 redelivered despite the flood"
    );
}

/// Every CONSUMER.CREATE subject form creates a working consumer: the modern
/// `CREATE.<stream>.<name>`, with a filter in the subject, the legacy ephemeral
/// `CREATE.<stream>` (the server names it) and `DURABLE.CREATE.<stream>.<durable>`.
#[tokio::test]
async fn every_create_subject_form_works() {
    let server = TestServer::start(&[]);
    let (nc, js) = connect(&server).await;
    orders_with(&js, 2).await;
    js.publish("orders.eu", Bytes::from_static(b"eu"))
        .await
        .unwrap()
        .await
        .unwrap();
    let cases = [
        (
            "$JS.API.CONSUMER.CREATE.ORDERS.modern",
            json!({"durable_name": "modern"}),
            "modern",
            3,
        ),
        (
            "$JS.API.CONSUMER.CREATE.ORDERS.eu.orders.eu",
            json!({"durable_name": "eu", "filter_subject": "orders.eu"}),
            "eu",
            1,
        ),
        (
            "$JS.API.CONSUMER.DURABLE.CREATE.ORDERS.legacy",
            json!({"durable_name": "legacy"}),
            "legacy",
            3,
        ),
    ];
    for (subject, mut config, name, pending) in cases {
        config["ack_policy"] = json!("explicit");
        let r = api(
            &nc,
            subject,
            json!({"stream_name": "ORDERS", "config": config}),
        )
        .await;
        assert_eq!(r["name"], name, "{subject}: {r}");
        assert_eq!(r["num_pending"], pending, "{subject}: {r}");
    }
    let r = api(
        &nc,
        "$JS.API.CONSUMER.CREATE.ORDERS",
        json!({"stream_name": "ORDERS", "config": {"ack_policy": "explicit"}}),
    )
    .await;
    let generated = r["name"].as_str().expect("a generated name").to_owned();
    assert_eq!(generated.len(), 8, "{r}");
    assert_eq!(
        r["config"]["inactive_threshold"], 5_000_000_000u64,
        "ephemeral default"
    );
    // The generated consumer serves pulls like any other. (A delivery keeps the stored
    // subject, so it is read on a plain subscription of the reply subject.)
    let mut inbox = nc.subscribe("pull.generated").await.unwrap();
    nc.publish_with_reply(
        format!("$JS.API.CONSUMER.MSG.NEXT.ORDERS.{generated}"),
        "pull.generated",
        Bytes::from_static(b"1"),
    )
    .await
    .unwrap();
    let msg = tokio::time::timeout(Duration::from_secs(10), inbox.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&msg.payload[..], b"order-1");
    let names = api(&nc, "$JS.API.CONSUMER.NAMES.ORDERS", Value::Null).await;
    assert_eq!(names["total"], 4);
}

/// A work-queue order acknowledged with a confirmation is gone from the stream for good: a
/// `kill -9` right after the confirmation does not bring it back (the removal is written before
/// the confirmation, and start-up redoes any removal a crash cut off).
#[tokio::test]
async fn acked_work_queue_orders_stay_removed_after_kill_9() {
    let mut server = TestServer::start(&[]);
    let (_nc, js) = connect(&server).await;
    let s = js
        .create_stream(stream::Config {
            name: "WQ".into(),
            subjects: vec!["wq.>".into()],
            retention: stream::RetentionPolicy::WorkQueue,
            ..Default::default()
        })
        .await
        .unwrap();
    for i in 1..=3 {
        js.publish("wq.order", Bytes::from(format!("order-{i}")))
            .await
            .unwrap()
            .await
            .unwrap();
    }
    let c = shipping(&s, Duration::from_secs(30), 1000).await;
    let got = fetch(&c, 3, Duration::from_secs(2)).await;
    assert_eq!(got.len(), 3);
    for m in &got {
        m.double_ack().await.unwrap();
    }
    let store = server.dir.path().join("store");
    server.kill9();
    let server = TestServer::restart(server, &["-sd", store.to_str().unwrap()]);
    let (_nc, js) = connect(&server).await;
    let mut s = js.get_stream("WQ").await.unwrap();
    let st = s.info().await.unwrap().state.clone();
    assert_eq!(st.messages, 0, "acked orders must not come back: {st:?}");
    let c: PullConsumer = s.get_consumer("shipping").await.unwrap();
    assert!(fetch(&c, 1, Duration::from_millis(500)).await.is_empty());
}

/// As nats-server: a `mem_storage` consumer (durable or not) is gone after a restart (clients
/// re-create such consumers), while file-stored durables and ephemerals on a file stream stay.
#[tokio::test]
async fn memory_consumers_do_not_outlive_a_restart() {
    let mut server = TestServer::start(&[]);
    let nc = async_nats::connect(server.url()).await.unwrap();
    let api = |subject: String, body: serde_json::Value| {
        let nc = nc.clone();
        async move {
            let m = nc
                .request(subject, Bytes::from(body.to_string()))
                .await
                .unwrap();
            let v: serde_json::Value = serde_json::from_slice(&m.payload).unwrap();
            assert!(v.get("error").is_none(), "{v}");
            v
        }
    };
    api(
        "$JS.API.STREAM.CREATE.E".into(),
        serde_json::json!({"name": "E", "subjects": ["e.>"]}),
    )
    .await;
    for (name, mem) in [("memdur", true), ("filedur", false)] {
        api(
            format!("$JS.API.CONSUMER.CREATE.E.{name}"),
            serde_json::json!({"stream_name": "E", "config": {"durable_name": name,
                "ack_policy": "explicit", "mem_storage": mem}}),
        )
        .await;
    }
    let eph = api(
        "$JS.API.CONSUMER.CREATE.E".into(),
        serde_json::json!({"stream_name": "E", "config": {"ack_policy": "explicit",
            "inactive_threshold": 3_600_000_000_000u64}}),
    )
    .await;
    let eph = eph["name"].as_str().unwrap().to_owned();
    drop(nc);
    let store = server.dir.path().join("store");
    assert_eq!(server.terminate().code(), Some(0));
    let server = TestServer::restart(server, &["-sd", store.to_str().unwrap()]);
    let nc = async_nats::connect(server.url()).await.unwrap();
    let m = nc
        .request("$JS.API.CONSUMER.NAMES.E", Bytes::new())
        .await
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&m.payload).unwrap();
    let mut names: Vec<String> = serde_json::from_value(v["consumers"].clone()).unwrap();
    names.sort();
    let mut want = vec!["filedur".to_owned(), eph];
    want.sort();
    assert_eq!(names, want, "{v}");
}
