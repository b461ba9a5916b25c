//! Consumer pause, end to end with async-nats: `$JS.API.CONSUMER.PAUSE.<stream>.<consumer>`,
//! `pause_until` in a consumer's config, `paused` / `pause_remaining` in consumer info, the
//! `CONSUMER.PAUSE` advisory, and a pause that outlives a restart. Expectations are nats-server
//! 2.15.1's (checked with `JSSERVER_TEST_BINARY=$(which nats-server) cargo test --test
//! jetstream_consumer_pause`); where jsserver does better, the test says so and is skipped
//! against the reference.
//!
//! No assertion depends on timing: conditions are awaited with generous deadlines, and a
//! pause meant to hold lasts far longer than any test.

mod common;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_nats::{Client, Subscriber};
use bytes::Bytes;
use common::TestServer;
use futures_util::StreamExt;
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(20);

async fn api(nc: &Client, subject: &str, body: &str) -> Value {
    let msg = tokio::time::timeout(
        WAIT,
        nc.request(subject.to_owned(), Bytes::from(body.to_owned())),
    )
    .await
    .expect("answered in time")
    .expect("request");
    serde_json::from_slice(&msg.payload).expect("JSON")
}

/// RFC 3339 (UTC, to the microsecond) `secs` from now (negative: in the past).
fn rfc3339_in(secs: i64) -> String {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    let t = now.as_micros() as i64 + secs * 1_000_000;
    let (s, us) = (t.div_euclid(1_000_000), t.rem_euclid(1_000_000));
    let days = s.div_euclid(86_400);
    let rem = s.rem_euclid(86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    // As Go's RFC3339Nano writes it back: no trailing zeros in the fraction.
    let frac = format!(".{us:06}");
    let frac = frac.trim_end_matches('0').trim_end_matches('.');
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}{frac}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// `ORDERS` with three orders and durable `shipping` (explicit ack).
async fn setup(server: &TestServer) -> Client {
    let nc = async_nats::connect(server.url()).await.expect("connect");
    let r = api(
        &nc,
        "$JS.API.STREAM.CREATE.ORDERS",
        r#"{"name":"ORDERS","subjects":["orders.>"],"storage":"file"}"#,
    )
    .await;
    assert!(r.get("error").is_none(), "{r}");
    for i in 0..3 {
        let ack = nc
            .request(format!("orders.{i}"), "order".into())
            .await
            .expect("puback");
        assert!(!ack.payload.is_empty());
    }
    create(
        &nc,
        json!({"durable_name": "shipping", "ack_policy": "explicit"}),
    )
    .await;
    nc
}

async fn create(nc: &Client, config: Value) -> Value {
    let body = json!({"stream_name": "ORDERS", "config": config}).to_string();
    let r = api(nc, "$JS.API.CONSUMER.CREATE.ORDERS.shipping", &body).await;
    assert!(r.get("error").is_none(), "{r}");
    r
}

async fn pause(nc: &Client, body: &str) -> Value {
    api(nc, "$JS.API.CONSUMER.PAUSE.ORDERS.shipping", body).await
}

async fn info(nc: &Client) -> Value {
    api(nc, "$JS.API.CONSUMER.INFO.ORDERS.shipping", "").await
}

async fn pull(nc: &Client, inbox: &str, body: &str) {
    nc.publish_with_reply(
        "$JS.API.CONSUMER.MSG.NEXT.ORDERS.shipping",
        inbox.to_owned(),
        Bytes::from(body.to_owned()),
    )
    .await
    .expect("pull");
    nc.flush().await.expect("flush");
}

/// The next message on `sub`: `Ok(stream seq)` for a delivery, `Err(status)` for a status.
async fn next(sub: &mut Subscriber) -> Result<u64, String> {
    let m = tokio::time::timeout(WAIT, sub.next())
        .await
        .expect("a message in time")
        .expect("subscription open");
    match m.status {
        Some(status) => Err(status.as_u16().to_string()),
        None => {
            let reply = m.reply.expect("a delivery has an ack reply");
            let tokens: Vec<&str> = reply.split('.').collect();
            Ok(tokens[5].parse().expect("stream seq"))
        }
    }
}

fn reference() -> bool {
    std::env::var_os("JSSERVER_TEST_BINARY").is_some()
}

#[tokio::test]
async fn pause_and_resume_answer_as_the_reference() {
    let server = TestServer::start(&[]);
    let nc = setup(&server).await;
    let zero = "0001-01-01T00:00:00Z";
    let r = api(&nc, "$JS.API.CONSUMER.PAUSE.NOPE.shipping", "{}").await;
    assert_eq!(r["error"]["err_code"], 10059);
    assert_eq!(
        (r["paused"].clone(), r["pause_until"].clone()),
        (json!(false), json!(zero))
    );
    let r = api(&nc, "$JS.API.CONSUMER.PAUSE.ORDERS.nope", "{}").await;
    assert_eq!(r["error"]["err_code"], 10014);
    let r = pause(&nc, "{bad").await;
    assert_eq!(r["error"]["err_code"], 10025);
    let r = pause(&nc, "").await;
    assert_eq!(
        r,
        json!({"type": "io.nats.jetstream.api.v1.consumer_pause_response",
                        "paused": false, "pause_until": zero})
    );
    let past = rfc3339_in(-60);
    let r = pause(&nc, &json!({"pause_until": past}).to_string()).await;
    assert_eq!(
        (r["paused"].clone(), r["pause_until"].clone()),
        (json!(false), json!(past))
    );
    let mut adv = nc
        .subscribe("$JS.EVENT.ADVISORY.CONSUMER.PAUSE.ORDERS.shipping")
        .await
        .expect("sub");
    nc.flush().await.expect("flush");
    let until = rfc3339_in(3600);
    let r = pause(&nc, &json!({"pause_until": until}).to_string()).await;
    assert_eq!(
        (r["paused"].clone(), r["pause_until"].clone()),
        (json!(true), json!(until))
    );
    let remaining = r["pause_remaining"].as_u64().expect("pause_remaining");
    assert!(remaining > 3500 * 1_000_000_000 && remaining <= 3600 * 1_000_000_000);
    let a: Value = serde_json::from_slice(
        &tokio::time::timeout(WAIT, adv.next())
            .await
            .expect("advisory")
            .unwrap()
            .payload,
    )
    .unwrap();
    assert_eq!(a["type"], "io.nats.jetstream.advisory.v1.consumer_pause");
    assert_eq!(
        (a["paused"].clone(), a["pause_until"].clone()),
        (json!(true), json!(until))
    );
    let i = info(&nc).await;
    assert_eq!(i["paused"], true);
    assert!(i["pause_remaining"].as_u64().unwrap() > 0);
    assert_eq!(i["config"]["pause_until"], json!(until));
    // Paused: a no_wait pull gets 404, a waiting one gets nothing but still counts.
    let mut sub = nc.subscribe("inbox.a").await.expect("sub");
    pull(&nc, "inbox.a", r#"{"batch":1,"no_wait":true}"#).await;
    assert_eq!(next(&mut sub).await, Err("404".into()));
    pull(&nc, "inbox.a", r#"{"batch":1,"expires":30000000000}"#).await;
    let deadline = tokio::time::Instant::now() + WAIT;
    while info(&nc).await["num_waiting"] != 1 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the pull never waited"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(info(&nc).await["delivered"]["stream_seq"], 0);
    // An update keeps the stored pause (the request's pause_until does not count).
    let r = create(
        &nc,
        json!({"durable_name": "shipping", "ack_policy": "explicit"}),
    )
    .await;
    assert_eq!(r["paused"], true);
    assert_eq!(r["config"]["pause_until"], json!(until));
    let r = pause(&nc, "{}").await;
    assert_eq!(
        (r["paused"].clone(), r["pause_until"].clone()),
        (json!(false), json!(zero))
    );
    // nats-server 2.15.1 leaves the waiting pull unserved after a resume (it times out);
    // jsserver delivers at once.
    if !reference() {
        assert_eq!(next(&mut sub).await, Ok(1));
    }
}

#[tokio::test]
async fn a_pause_that_runs_out_delivers_to_the_waiting_pull() {
    let server = TestServer::start(&[]);
    let nc = setup(&server).await;
    let r = pause(&nc, &json!({"pause_until": rfc3339_in(2)}).to_string()).await;
    assert_eq!(r["paused"], true);
    let mut sub = nc.subscribe("inbox.b").await.expect("sub");
    pull(&nc, "inbox.b", r#"{"batch":1,"expires":15000000000}"#).await;
    // Delivered once the pause ran out, well before the pull's 15 s expiry.
    assert_eq!(next(&mut sub).await, Ok(1));
    let i = info(&nc).await;
    assert!(i.get("paused").is_none(), "{i}");
}

#[tokio::test]
async fn a_consumer_created_paused_stays_paused_across_a_restart() {
    let server = TestServer::start(&[]);
    let nc = setup(&server).await;
    let until = rfc3339_in(3600);
    let body = json!({"stream_name": "ORDERS",
        "config": {"durable_name": "billing", "ack_policy": "explicit", "pause_until": until}})
    .to_string();
    let r = api(&nc, "$JS.API.CONSUMER.CREATE.ORDERS.billing", &body).await;
    assert_eq!(r["paused"], true, "{r}");
    drop(nc);
    let mut server = server;
    let store = server.dir.path().join("store");
    server.kill9();
    let server = TestServer::restart(server, &["-sd", store.to_str().unwrap()]);
    let nc = async_nats::connect(server.url()).await.expect("connect");
    let i = api(&nc, "$JS.API.CONSUMER.INFO.ORDERS.billing", "").await;
    assert_eq!(i["paused"], true, "{i}");
    assert_eq!(i["config"]["pause_until"], json!(until));
    let mut sub = nc.subscribe("inbox.c").await.expect("sub");
    nc.publish_with_reply(
        "$JS.API.CONSUMER.MSG.NEXT.ORDERS.billing",
        "inbox.c",
        Bytes::from_static(br#"{"batch":1,"no_wait":true}"#),
    )
    .await
    .expect("pull");
    assert_eq!(next(&mut sub).await, Err("404".into()), "still paused");
}

/// A pause that runs out by itself is announced: `CONSUMER.PAUSE` advisory with `paused:
/// false` and the (past) `pause_until`, at the deadline, as nats-server's pause timer sends
/// it (shared case c48). Passes against nats-server 2.15.1 too.
#[tokio::test]
async fn a_pause_that_runs_out_sends_the_unpause_advisory() {
    let server = TestServer::start(&[]);
    let nc = setup(&server).await;
    let mut adv = nc
        .subscribe("$JS.EVENT.ADVISORY.CONSUMER.PAUSE.ORDERS.shipping")
        .await
        .expect("sub");
    nc.flush().await.expect("flush");
    let until = rfc3339_in(2);
    let r = pause(&nc, &json!({"pause_until": until}).to_string()).await;
    assert_eq!(r["paused"], true);
    let a = next_advisory(&mut adv).await;
    assert_eq!(
        (a["paused"].clone(), a["pause_until"].clone()),
        (json!(true), json!(until))
    );
    let started = std::time::Instant::now();
    let a = next_advisory(&mut adv).await;
    assert_eq!(a["type"], "io.nats.jetstream.advisory.v1.consumer_pause");
    assert_eq!(
        (a["paused"].clone(), a["pause_until"].clone()),
        (json!(false), json!(until))
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "at the deadline, not later: {:?}",
        started.elapsed()
    );
}

/// A push consumer created with `pause_until` ahead sends nothing, though its deliver subject
/// has a subscriber from the start (shared case c48; the pause used to be applied after the
/// subscriber's interest had already delivered). Passes against nats-server 2.15.1 too.
#[tokio::test]
async fn a_push_consumer_created_paused_delivers_nothing() {
    let server = TestServer::start(&[]);
    let nc = setup(&server).await;
    let mut deliveries = nc.subscribe("deliver.paused").await.expect("sub");
    nc.flush().await.expect("flush");
    let body = json!({"stream_name": "ORDERS", "config": {
        "durable_name": "push", "ack_policy": "none", "deliver_subject": "deliver.paused",
        "pause_until": rfc3339_in(60)}})
    .to_string();
    let r = api(&nc, "$JS.API.CONSUMER.CREATE.ORDERS.push", &body).await;
    assert_eq!(r["paused"], true, "{r}");
    let got = tokio::time::timeout(Duration::from_millis(1500), deliveries.next()).await;
    assert!(
        got.is_err(),
        "a paused push consumer delivered {:?}",
        got.ok().flatten().map(|m| m.subject)
    );
}

/// The next advisory on `sub`, as JSON.
async fn next_advisory(sub: &mut Subscriber) -> Value {
    let m = tokio::time::timeout(WAIT, sub.next())
        .await
        .expect("an advisory in time")
        .expect("subscription open");
    serde_json::from_slice(&m.payload).expect("JSON")
}
