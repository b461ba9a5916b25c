//! Push consumers end to end (a `deliver_subject`): deliveries while the deliver subject is
//! bound, `push_bound` in consumer info, `deliver_group`, idle heartbeats, flow control,
//! redelivery, `headers_only`, inactivity deletion of an unbound ephemeral, ordered consumers
//! as async-nats and nats-py create them, and `409 Consumer is push based` for a pull request.
//!
//! Expectations are nats-server 2.15.1's: every test also passes with
//! `JSSERVER_TEST_BINARY=$(which nats-server) cargo test -p jsserver --test jetstream_push`.
//! Conditions are awaited with generous deadlines; the few "nothing arrives" checks wait a
//! short while by necessity.

mod common;

use std::time::{Duration, Instant};

use async_nats::{Client, Message, Subscriber};
use bytes::Bytes;
use common::TestServer;
use futures_util::StreamExt;
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(20);

async fn api(nc: &Client, subject: &str, body: Value) -> Value {
    let msg = tokio::time::timeout(
        WAIT,
        nc.request(subject.to_owned(), Bytes::from(body.to_string())),
    )
    .await
    .expect("answered in time")
    .expect("request");
    serde_json::from_slice(&msg.payload).expect("JSON")
}

/// A client and stream `name` on subjects `<name lowercase>.>` holding `n` small messages.
async fn setup(server: &TestServer, name: &str, n: usize) -> Client {
    let nc = async_nats::connect(server.url()).await.expect("connect");
    let prefix = name.to_lowercase();
    let r = api(
        &nc,
        &format!("$JS.API.STREAM.CREATE.{name}"),
        json!({"name": name, "subjects": [format!("{prefix}.>")], "storage": "memory"}),
    )
    .await;
    assert!(r.get("error").is_none(), "{r}");
    for i in 0..n {
        publish(&nc, &format!("{prefix}.m"), Bytes::from(format!("m{i}"))).await;
    }
    nc
}

async fn publish(nc: &Client, subject: &str, payload: Bytes) {
    let ack = tokio::time::timeout(WAIT, nc.request(subject.to_owned(), payload))
        .await
        .expect("puback in time")
        .expect("puback");
    let v: Value = serde_json::from_slice(&ack.payload).expect("puback JSON");
    assert!(v.get("error").is_none(), "{v}");
}

/// Creates a consumer on `stream` (durable when the config names one); returns the info.
async fn create(nc: &Client, stream: &str, config: Value) -> Value {
    let subject = match config.get("durable_name").and_then(Value::as_str) {
        Some(d) => format!("$JS.API.CONSUMER.CREATE.{stream}.{d}"),
        None => format!("$JS.API.CONSUMER.CREATE.{stream}"),
    };
    let r = api(
        nc,
        &subject,
        json!({"stream_name": stream, "config": config}),
    )
    .await;
    assert!(r.get("error").is_none(), "{r}");
    r
}

async fn info(nc: &Client, stream: &str, name: &str) -> Value {
    api(
        nc,
        &format!("$JS.API.CONSUMER.INFO.{stream}.{name}"),
        json!({}),
    )
    .await
}

fn push_bound(info: &Value) -> bool {
    info.get("push_bound").and_then(Value::as_bool) == Some(true)
}

/// Waits until `info` of the consumer satisfies `cond`; returns it.
async fn info_until(nc: &Client, stream: &str, name: &str, cond: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + WAIT;
    loop {
        let i = info(nc, stream, name).await;
        if cond(&i) {
            return i;
        }
        assert!(
            Instant::now() < deadline,
            "consumer info never got there: {i}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The next message on `sub` within `wait`.
async fn next(sub: &mut Subscriber, wait: Duration) -> Option<Message> {
    tokio::time::timeout(wait, sub.next()).await.ok().flatten()
}

/// Everything `sub` receives within `wait`.
async fn drain(sub: &mut Subscriber, wait: Duration) -> Vec<Message> {
    let deadline = tokio::time::Instant::now() + wait;
    let mut got = Vec::new();
    while let Ok(Some(m)) = tokio::time::timeout_at(deadline, sub.next()).await {
        got.push(m);
    }
    got
}

fn status(m: &Message) -> Option<(u16, String)> {
    m.status
        .map(|s| (s.as_u16(), m.description.clone().unwrap_or_default()))
}

fn header<'a>(m: &'a Message, name: &str) -> Option<&'a str> {
    m.headers.as_ref()?.get(name).map(|v| v.as_str())
}

/// (delivery count, stream seq, consumer seq) from a v1 ack subject.
fn ack_tokens(m: &Message) -> (u64, u64, u64) {
    let reply = m.reply.as_ref().expect("ack subject").to_string();
    let t: Vec<&str> = reply.split('.').collect();
    assert_eq!(t.len(), 9, "{reply}");
    assert_eq!(&t[..2], ["$JS", "ACK"], "{reply}");
    (
        t[4].parse().unwrap(),
        t[5].parse().unwrap(),
        t[6].parse().unwrap(),
    )
}

#[tokio::test]
async fn delivers_while_bound_and_push_bound_follows_the_subscription() {
    let server = TestServer::start(&[]);
    let nc = setup(&server, "PUSH1", 3).await;
    let created = create(
        &nc,
        "PUSH1",
        json!({"durable_name": "d", "deliver_subject": "dlv.push1", "ack_policy": "explicit"}),
    )
    .await;
    assert!(!push_bound(&created), "nobody listens yet: {created}");
    assert_eq!(created["config"]["deliver_subject"], "dlv.push1");
    let mut sub = nc.subscribe("dlv.push1").await.expect("subscribe");
    let mut got = Vec::new();
    for _ in 0..3 {
        got.push(next(&mut sub, WAIT).await.expect("a delivery"));
    }
    let payloads: Vec<&[u8]> = got.iter().map(|m| &m.payload[..]).collect();
    assert_eq!(payloads, [&b"m0"[..], b"m1", b"m2"]);
    assert_eq!(
        got[0].subject.as_str(),
        "push1.m",
        "the stored subject is kept"
    );
    let tokens: Vec<_> = got.iter().map(ack_tokens).collect();
    assert_eq!(tokens, [(1, 1, 1), (1, 2, 2), (1, 3, 3)]);
    assert!(got[0]
        .reply
        .as_ref()
        .unwrap()
        .starts_with("$JS.ACK.PUSH1.d.1.1.1."));
    let i = info(&nc, "PUSH1", "d").await;
    assert!(push_bound(&i), "{i}");
    for m in &got {
        nc.publish(m.reply.clone().unwrap(), Bytes::new())
            .await
            .unwrap();
    }
    info_until(&nc, "PUSH1", "d", |i| i["num_ack_pending"] == 0).await;
    publish(&nc, "push1.m", "m3".into()).await;
    let m = next(&mut sub, WAIT)
        .await
        .expect("a new message goes out at once");
    assert_eq!(&m.payload[..], b"m3");
    sub.unsubscribe().await.unwrap();
    nc.flush().await.unwrap();
    let i = info_until(&nc, "PUSH1", "d", |i| !push_bound(i)).await;
    assert!(i.get("push_bound").is_none(), "omitted when false: {i}");
}

#[tokio::test]
async fn only_a_subscription_on_exactly_the_deliver_subject_binds() {
    // Observed on nats-server 2.15.1: a wildcard subscription that matches the deliver
    // subject gets nothing and leaves the consumer unbound.
    let server = TestServer::start(&[]);
    let nc = setup(&server, "PUSH2", 2).await;
    let mut wild = nc.subscribe("dlv2.>").await.expect("subscribe");
    nc.flush().await.unwrap();
    create(
        &nc,
        "PUSH2",
        json!({"durable_name": "d", "deliver_subject": "dlv2.x", "ack_policy": "none"}),
    )
    .await;
    assert!(drain(&mut wild, Duration::from_millis(700))
        .await
        .is_empty());
    assert!(!push_bound(&info(&nc, "PUSH2", "d").await));
    let mut exact = nc.subscribe("dlv2.x").await.expect("subscribe");
    let m = next(&mut exact, WAIT).await.expect("bound: deliveries");
    assert_eq!(&m.payload[..], b"m0");
    // Routing is as for any message: the wildcard subscription gets its copy too.
    let m = next(&mut wild, WAIT).await.expect("a copy");
    assert_eq!(&m.payload[..], b"m0");
}

#[tokio::test]
async fn a_deliver_group_shares_deliveries_among_its_members() {
    let server = TestServer::start(&[]);
    let nc = setup(&server, "PUSH3", 0).await;
    // A plain subscription does not bind a consumer with a deliver group (observed).
    let mut plain = nc.subscribe("dlv3").await.expect("subscribe");
    nc.flush().await.unwrap();
    create(
        &nc,
        "PUSH3",
        json!({"durable_name": "d", "deliver_subject": "dlv3", "deliver_group": "workers",
               "ack_policy": "none"}),
    )
    .await;
    publish(&nc, "push3.m", "early".into()).await;
    assert!(drain(&mut plain, Duration::from_millis(500))
        .await
        .is_empty());
    assert!(!push_bound(&info(&nc, "PUSH3", "d").await));
    let mut a = nc
        .queue_subscribe("dlv3", "workers".into())
        .await
        .expect("subscribe");
    let mut b = nc
        .queue_subscribe("dlv3", "workers".into())
        .await
        .expect("subscribe");
    nc.flush().await.unwrap();
    info_until(&nc, "PUSH3", "d", push_bound).await;
    for i in 0..30 {
        publish(&nc, "push3.m", Bytes::from(format!("w{i}"))).await;
    }
    let mut seqs = Vec::new();
    let (mut na, mut nb) = (0, 0);
    let deadline = tokio::time::Instant::now() + WAIT;
    while seqs.len() < 31 {
        tokio::select! {
            Some(m) = a.next() => { na += 1; seqs.push(ack_tokens(&m).1); }
            Some(m) = b.next() => { nb += 1; seqs.push(ack_tokens(&m).1); }
            _ = tokio::time::sleep_until(deadline) => panic!("only {} deliveries", seqs.len()),
        }
    }
    seqs.sort_unstable();
    assert_eq!(seqs, (1..=31).collect::<Vec<u64>>(), "each message once");
    assert!(na > 0 && nb > 0, "both members get some: {na} / {nb}");
    assert!(drain(&mut a, Duration::from_millis(300)).await.is_empty());
}

#[tokio::test]
async fn idle_heartbeats_report_the_last_sequences_and_have_no_reply() {
    let server = TestServer::start(&[]);
    let nc = setup(&server, "PUSH4", 2).await;
    let mut sub = nc.subscribe("dlv4").await.expect("subscribe");
    nc.flush().await.unwrap();
    create(
        &nc,
        "PUSH4",
        json!({"durable_name": "d", "deliver_subject": "dlv4", "ack_policy": "none",
               "idle_heartbeat": 500_000_000}),
    )
    .await;
    let mut data = 0;
    let hb = loop {
        let m = next(&mut sub, WAIT)
            .await
            .expect("messages, then a heartbeat");
        match status(&m) {
            None => data += 1,
            Some(s) => {
                assert_eq!(s, (100, "Idle Heartbeat".to_owned()));
                break m;
            }
        }
    };
    assert_eq!(data, 2, "the stored messages come first");
    assert!(hb.reply.is_none(), "no reply subject: {:?}", hb.reply);
    assert!(hb.payload.is_empty());
    assert_eq!(header(&hb, "Nats-Last-Consumer"), Some("2"));
    assert_eq!(header(&hb, "Nats-Last-Stream"), Some("2"));
    assert_eq!(header(&hb, "Nats-Consumer-Stalled"), None);
    // They keep coming while nothing is delivered.
    let m = next(&mut sub, WAIT).await.expect("another heartbeat");
    assert_eq!(status(&m).map(|s| s.0), Some(100));
}

#[tokio::test]
async fn flow_control_stalls_delivery_until_answered() {
    const BIG: usize = 512 * 1024;
    const N: usize = 12;
    let server = TestServer::start(&[]);
    let nc = setup(&server, "PUSH5", 0).await;
    let mut sub = nc.subscribe("dlv5").await.expect("subscribe");
    nc.flush().await.unwrap();
    let created = create(
        &nc,
        "PUSH5",
        json!({"deliver_subject": "dlv5", "ack_policy": "none", "max_deliver": 1,
               "flow_control": true, "idle_heartbeat": 500_000_000, "mem_storage": true}),
    )
    .await;
    let name = created["name"].as_str().unwrap().to_owned();
    for i in 0..N {
        publish(&nc, "push5.blob", Bytes::from(vec![b'a' + i as u8; BIG])).await;
    }
    let mut delivered = Vec::new();
    let fc = loop {
        let m = next(&mut sub, WAIT).await.expect("a flow control request");
        match status(&m) {
            None => delivered.push(m),
            Some((100, d)) if d == "FlowControl Request" => break m,
            Some(_) => {}
        }
    };
    let fc_reply = fc.reply.as_ref().expect("a reply subject").to_string();
    assert!(
        fc_reply.starts_with(&format!("$JS.FC.PUSH5.{name}.")),
        "{fc_reply}"
    );
    assert_eq!(fc_reply.split('.').count(), 5, "{fc_reply}");
    // Unanswered: delivery stalls, and heartbeats say on what.
    let mut stalled_hb = None;
    for m in drain(&mut sub, Duration::from_millis(1500)).await {
        match status(&m) {
            None => delivered.push(m),
            Some((100, d)) if d == "Idle Heartbeat" => stalled_hb = Some(m),
            Some(_) => {}
        }
    }
    assert!(
        delivered.len() < N,
        "stalled: {} of {N} arrived",
        delivered.len()
    );
    let hb = stalled_hb.expect("a heartbeat while stalled");
    assert_eq!(
        header(&hb, "Nats-Consumer-Stalled"),
        Some(fc_reply.as_str())
    );
    // Answered (and every later request too): everything arrives, in order.
    nc.publish(fc_reply.clone(), Bytes::new()).await.unwrap();
    let deadline = Instant::now() + WAIT;
    while delivered.len() < N {
        assert!(
            Instant::now() < deadline,
            "only {} arrived",
            delivered.len()
        );
        let m = next(&mut sub, WAIT).await.expect("more deliveries");
        match status(&m) {
            None => delivered.push(m),
            Some((100, d)) if d == "FlowControl Request" => {
                nc.publish(m.reply.clone().unwrap(), Bytes::new())
                    .await
                    .unwrap();
            }
            Some(_) => {}
        }
    }
    let cseqs: Vec<u64> = delivered.iter().map(|m| ack_tokens(m).2).collect();
    assert_eq!(cseqs, (1..=N as u64).collect::<Vec<_>>());
    assert!(delivered.iter().all(|m| m.payload.len() == BIG));
}

#[tokio::test]
async fn unacknowledged_deliveries_come_again_by_themselves() {
    let server = TestServer::start(&[]);
    let nc = setup(&server, "PUSH6", 1).await;
    let mut sub = nc.subscribe("dlv6").await.expect("subscribe");
    nc.flush().await.unwrap();
    create(
        &nc,
        "PUSH6",
        json!({"durable_name": "d", "deliver_subject": "dlv6", "ack_policy": "explicit",
               "ack_wait": 1_000_000_000, "max_deliver": 2}),
    )
    .await;
    let first = next(&mut sub, WAIT).await.expect("first delivery");
    assert_eq!(ack_tokens(&first), (1, 1, 1));
    let again = next(&mut sub, WAIT)
        .await
        .expect("redelivered after ack_wait");
    assert_eq!(ack_tokens(&again), (2, 1, 2));
    assert!(
        drain(&mut sub, Duration::from_millis(2500))
            .await
            .is_empty(),
        "max_deliver 2: no third delivery"
    );
}

#[tokio::test]
async fn a_pull_request_on_a_push_consumer_is_409() {
    let server = TestServer::start(&[]);
    let nc = setup(&server, "PUSH7", 1).await;
    create(
        &nc,
        "PUSH7",
        json!({"durable_name": "d", "deliver_subject": "dlv7", "ack_policy": "explicit"}),
    )
    .await;
    let m = tokio::time::timeout(
        WAIT,
        nc.request("$JS.API.CONSUMER.MSG.NEXT.PUSH7.d", Bytes::from("1")),
    )
    .await
    .expect("answered")
    .expect("request");
    assert_eq!(status(&m), Some((409, "Consumer is push based".to_owned())));
}

#[tokio::test]
async fn headers_only_delivers_the_size_instead_of_the_payload() {
    let server = TestServer::start(&[]);
    let nc = setup(&server, "PUSH8", 0).await;
    let mut headers = async_nats::HeaderMap::new();
    headers.insert("Order-Id", "42");
    let ack = nc
        .request_with_headers("push8.m", headers, "hello".into())
        .await
        .expect("puback");
    assert!(!ack.payload.is_empty());
    let mut sub = nc.subscribe("dlv8").await.expect("subscribe");
    nc.flush().await.unwrap();
    create(
        &nc,
        "PUSH8",
        json!({"durable_name": "d", "deliver_subject": "dlv8", "ack_policy": "none",
               "headers_only": true}),
    )
    .await;
    let m = next(&mut sub, WAIT).await.expect("a delivery");
    assert!(m.payload.is_empty());
    assert_eq!(header(&m, "Nats-Msg-Size"), Some("5"));
    assert_eq!(header(&m, "Order-Id"), Some("42"));
}

#[tokio::test]
async fn an_unbound_ephemeral_is_deleted_after_its_inactive_threshold() {
    let server = TestServer::start(&[]);
    let nc = setup(&server, "PUSH9", 1).await;
    let mut sub = nc.subscribe("dlv9").await.expect("subscribe");
    nc.flush().await.unwrap();
    let created = create(
        &nc,
        "PUSH9",
        json!({"deliver_subject": "dlv9", "ack_policy": "none",
               "inactive_threshold": 1_000_000_000}),
    )
    .await;
    let name = created["name"].as_str().unwrap().to_owned();
    next(&mut sub, WAIT).await.expect("a delivery");
    // Bound, it stays past its threshold even with nothing to deliver.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let i = info(&nc, "PUSH9", &name).await;
    assert!(i.get("error").is_none(), "still there while bound: {i}");
    sub.unsubscribe().await.unwrap();
    nc.flush().await.unwrap();
    info_until(&nc, "PUSH9", &name, |i| i["error"]["err_code"] == 10014).await;
}

#[tokio::test]
async fn an_async_nats_ordered_consumer_reads_everything_in_order() {
    let server = TestServer::start(&[]);
    let nc = setup(&server, "PUSH10", 0).await;
    for i in 0..5 {
        publish(&nc, "push10.m", Bytes::from(format!("o{i}"))).await;
    }
    // Big ones too, so that flow control takes part.
    for _ in 0..6 {
        publish(&nc, "push10.big", Bytes::from(vec![b'x'; 512 * 1024])).await;
    }
    let js = async_nats::jetstream::new(nc.clone());
    let stream = js.get_stream("PUSH10").await.expect("stream");
    let consumer = stream
        .create_consumer(async_nats::jetstream::consumer::push::OrderedConfig {
            deliver_subject: nc.new_inbox(),
            ..Default::default()
        })
        .await
        .expect("ordered consumer");
    let mut messages = consumer.messages().await.expect("messages");
    let mut seqs = Vec::new();
    while seqs.len() < 11 {
        let m = tokio::time::timeout(WAIT, messages.next())
            .await
            .expect("in time")
            .expect("open")
            .expect("a message");
        seqs.push(m.info().expect("metadata").stream_sequence);
    }
    assert_eq!(seqs, (1..=11).collect::<Vec<u64>>());
}

/// nats-py's ordered consumer (`js.subscribe(..., ordered_consumer=True)`): an ephemeral push
/// consumer with flow control and heartbeats. When its consumer disappears, it misses two
/// heartbeats and creates a new one from the next stream sequence: nothing is lost or
/// repeated. Skipped (with a note) when `python3` with `nats-py` is not installed.
#[test]
fn a_nats_py_ordered_consumer_recovers_from_a_lost_consumer() {
    common::run_nats_py_script("ordered_push.py");
}

#[tokio::test]
async fn a_durable_push_consumer_resumes_after_a_restart() {
    let mut server = TestServer::start(&[]);
    let nc = async_nats::connect(server.url()).await.expect("connect");
    let r = api(
        &nc,
        "$JS.API.STREAM.CREATE.PUSH11",
        json!({"name": "PUSH11", "subjects": ["push11.>"], "storage": "file"}),
    )
    .await;
    assert!(r.get("error").is_none(), "{r}");
    for i in 0..3 {
        publish(&nc, "push11.m", Bytes::from(format!("r{i}"))).await;
    }
    let mut sub = nc.subscribe("dlv11").await.expect("subscribe");
    nc.flush().await.unwrap();
    create(
        &nc,
        "PUSH11",
        json!({"durable_name": "d", "deliver_subject": "dlv11", "ack_policy": "explicit",
               "ack_wait": 30_000_000_000_i64}),
    )
    .await;
    let got: Vec<Message> = {
        let mut v = Vec::new();
        for _ in 0..3 {
            v.push(next(&mut sub, WAIT).await.expect("a delivery"));
        }
        v
    };
    // Confirmed acks for the first two; the third stays pending.
    for m in &got[..2] {
        tokio::time::timeout(WAIT, nc.request(m.reply.clone().unwrap(), Bytes::new()))
            .await
            .expect("confirmed in time")
            .expect("ack");
    }
    drop(sub);
    drop(nc);
    let store = server.dir.path().join("store");
    server.terminate();
    let server = TestServer::restart(server, &["-sd", store.to_str().unwrap()]);
    let nc = async_nats::connect(server.url()).await.expect("connect");
    let i = info(&nc, "PUSH11", "d").await;
    assert_eq!(i["ack_floor"]["stream_seq"], 2, "{i}");
    assert_eq!(i["num_ack_pending"], 1, "{i}");
    assert!(!push_bound(&i), "nobody listens after the restart: {i}");
    publish(&nc, "push11.m", "r3".into()).await;
    let mut sub = nc.subscribe("dlv11").await.expect("subscribe");
    nc.flush().await.unwrap();
    let m = next(&mut sub, WAIT).await.expect("the new message");
    assert_eq!(&m.payload[..], b"r3");
    assert_eq!(ack_tokens(&m), (1, 4, 4), "consumer seqs go on");
    info_until(&nc, "PUSH11", "d", push_bound).await;
}

#[tokio::test]
async fn the_deliver_subject_moves_only_while_nobody_listens_and_takes_what_is_pending() {
    let server = TestServer::start(&[]);
    let nc = setup(&server, "PUSH12", 2).await;
    let config = |subject: &str| {
        json!({"durable_name": "d", "deliver_subject": subject, "ack_policy": "explicit",
               "ack_wait": 30_000_000_000_i64})
    };
    let mut old = nc.subscribe("dlv12.old").await.expect("subscribe");
    nc.flush().await.unwrap();
    create(&nc, "PUSH12", config("dlv12.old")).await;
    for _ in 0..2 {
        next(&mut old, WAIT).await.expect("a delivery");
    }
    // Bound: the update is refused with 10013.
    let r = api(
        &nc,
        "$JS.API.CONSUMER.CREATE.PUSH12.d",
        json!({"stream_name": "PUSH12", "config": config("dlv12.new")}),
    )
    .await;
    assert_eq!(r["error"]["err_code"], 10013, "{r}");
    old.unsubscribe().await.unwrap();
    nc.flush().await.unwrap();
    info_until(&nc, "PUSH12", "d", |i| !push_bound(i)).await;
    let mut new = nc.subscribe("dlv12.new").await.expect("subscribe");
    nc.flush().await.unwrap();
    let r = create(&nc, "PUSH12", config("dlv12.new")).await;
    assert_eq!(r["config"]["deliver_subject"], "dlv12.new");
    // The two unacknowledged messages come again, at once, to the new subject.
    let a = next(&mut new, WAIT).await.expect("redelivery");
    let b = next(&mut new, WAIT).await.expect("redelivery");
    assert_eq!([ack_tokens(&a), ack_tokens(&b)], [(2, 1, 3), (2, 2, 4)]);
}

/// `replay_policy: original`: stored one second apart, delivered (at least) one second apart;
/// `rate_limit_bps`: 64 KiB at 256 kbit/s through an 8 KiB bucket takes about two seconds. Only lower bounds are
/// checked (a slow machine makes deliveries later, never earlier).
#[tokio::test]
async fn replay_original_and_rate_limit_pace_deliveries() {
    let server = TestServer::start(&[]);
    let nc = setup(&server, "PACE", 0).await;
    publish(&nc, "pace.a", Bytes::from_static(b"first")).await;
    tokio::time::sleep(Duration::from_millis(1000)).await;
    publish(&nc, "pace.b", Bytes::from_static(b"second")).await;
    let mut sub = nc.subscribe("dlv.replay").await.unwrap();
    create(
        &nc,
        "PACE",
        json!({"durable_name": "replay", "deliver_subject": "dlv.replay",
               "ack_policy": "none", "replay_policy": "original", "filter_subject": "pace.*"}),
    )
    .await;
    let first = next(&mut sub, WAIT).await.expect("first");
    let t0 = Instant::now();
    let second = next(&mut sub, WAIT).await.expect("second");
    let gap = t0.elapsed();
    assert_eq!(
        (&first.payload[..], &second.payload[..]),
        (&b"first"[..], &b"second"[..])
    );
    assert!(gap >= Duration::from_millis(800), "replayed {gap:?} apart");

    // The bucket holds the stream's max_msg_size (nats-server's choice; without one it is
    // max_payload, 1 MiB, which would let all of this through at once). 16 messages of 4 KiB
    // at 256,000 bits/s (32,000 bytes/s) with an 8 KiB bucket: ~1.8 s.
    let r = api(
        &nc,
        "$JS.API.STREAM.CREATE.RATE",
        json!({"name": "RATE", "subjects": ["rate.>"], "storage": "memory", "max_msg_size": 8192}),
    )
    .await;
    assert!(r.get("error").is_none(), "{r}");
    for _ in 0..16 {
        publish(&nc, "rate.big", Bytes::from(vec![b'x'; 4096])).await;
    }
    let mut sub = nc.subscribe("dlv.rate").await.unwrap();
    let start = Instant::now();
    create(
        &nc,
        "RATE",
        json!({"durable_name": "rate", "deliver_subject": "dlv.rate", "ack_policy": "none",
               "rate_limit_bps": 256_000}),
    )
    .await;
    for _ in 0..16 {
        next(&mut sub, WAIT).await.expect("a delivery");
    }
    let took = start.elapsed();
    assert!(
        took >= Duration::from_millis(1500),
        "16 x 4 KiB at 32 kB/s took {took:?}"
    );
}

/// nats-py's push subscriptions (`tests/scripts/push_subscribe.py`): `js.subscribe` with a
/// durable and manual acks, and two `js.subscribe(queue=…)` members sharing one
/// deliver-group consumer, each message to one of them. Skipped (with a note) when `python3`
/// with `nats-py` is not installed.
#[test]
fn nats_py_push_subscriptions_durable_and_queue() {
    common::run_nats_py_script("push_subscribe.py");
}
