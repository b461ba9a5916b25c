//! Consumer reset, end to end with async-nats: `$JS.API.CONSUMER.RESET.<stream>.<consumer>`
//! back to the ack floor or to a sequence, the deliver-policy checks (10204), what an interest
//! stream drops after a forward reset, and a reset that outlives `kill -9`. Expectations are
//! nats-server 2.15.1's (checked with `JSSERVER_TEST_BINARY=$(which nats-server) cargo test
//! --test jetstream_consumer_reset`).

mod common;

use std::time::Duration;

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

async fn stream(nc: &Client, config: Value) {
    let r = api(nc, "$JS.API.STREAM.CREATE.R", &config.to_string()).await;
    assert!(r.get("error").is_none(), "{r}");
    for i in 0..6 {
        let ack = nc
            .request(format!("r.{i}"), "m".into())
            .await
            .expect("puback");
        assert!(!ack.payload.is_empty());
    }
}

async fn consumer(nc: &Client, name: &str, config: Value) {
    let mut config = config;
    config["durable_name"] = json!(name);
    config["ack_policy"] = json!("explicit");
    let body = json!({"stream_name": "R", "config": config}).to_string();
    let r = api(nc, &format!("$JS.API.CONSUMER.CREATE.R.{name}"), &body).await;
    assert!(r.get("error").is_none(), "{r}");
}

async fn reset(nc: &Client, name: &str, body: &str) -> Value {
    api(nc, &format!("$JS.API.CONSUMER.RESET.R.{name}"), body).await
}

/// Pulls `n` messages on `sub`'s inbox: (stream seq, consumer seq, delivery count, ack subject).
async fn pull(
    nc: &Client,
    sub: &mut Subscriber,
    inbox: &str,
    n: usize,
) -> Vec<(u64, u64, u64, String)> {
    nc.publish_with_reply(
        "$JS.API.CONSUMER.MSG.NEXT.R.c",
        inbox.to_owned(),
        Bytes::from(format!(r#"{{"batch":{n},"expires":5000000000}}"#)),
    )
    .await
    .expect("pull");
    let mut got = Vec::new();
    while got.len() < n {
        let m = tokio::time::timeout(WAIT, sub.next())
            .await
            .expect("in time")
            .expect("open");
        assert!(m.status.is_none(), "status {:?}", m.status);
        let reply = m.reply.expect("ack subject").to_string();
        let t: Vec<&str> = reply.split('.').collect();
        got.push((
            t[5].parse().unwrap(),
            t[6].parse().unwrap(),
            t[4].parse().unwrap(),
            reply.clone(),
        ));
    }
    got
}

fn pair(v: &Value) -> (u64, u64) {
    (
        v["consumer_seq"].as_u64().unwrap(),
        v["stream_seq"].as_u64().unwrap(),
    )
}

#[tokio::test]
async fn reset_answers_as_the_reference() {
    let server = TestServer::start(&[]);
    let nc = async_nats::connect(server.url()).await.expect("connect");
    stream(
        &nc,
        json!({"name": "R", "subjects": ["r.>"], "storage": "file"}),
    )
    .await;
    consumer(&nc, "c", json!({})).await;
    let inbox = nc.new_inbox();
    let mut sub = nc.subscribe(inbox.clone()).await.unwrap();
    let got = pull(&nc, &mut sub, &inbox, 3).await;
    nc.request(got[0].3.clone(), "+ACK".into()).await.unwrap();

    // Empty body: back to just past the ack floor.
    let r = reset(&nc, "c", "").await;
    assert_eq!(
        r["type"],
        "io.nats.jetstream.api.v1.consumer_reset_response"
    );
    assert_eq!(r["reset_seq"], 2, "{r}");
    assert_eq!(pair(&r["delivered"]), (0, 1));
    assert_eq!(pair(&r["ack_floor"]), (0, 1));
    assert_eq!(
        (r["num_pending"].clone(), r["num_ack_pending"].clone()),
        (json!(5), json!(0))
    );
    assert_eq!(r["config"]["durable_name"], "c");
    // Delivered again from seq 2, as first deliveries with consumer seq 1.
    let got = pull(&nc, &mut sub, &inbox, 1).await;
    assert_eq!((got[0].0, got[0].1, got[0].2), (2, 1, 1));

    let r = reset(&nc, "c", r#"{"seq":5}"#).await;
    assert_eq!(r["reset_seq"], 5, "{r}");
    assert_eq!(pair(&r["delivered"]), (0, 4));
    assert_eq!(r["num_pending"], 2);
    let r = reset(&nc, "c", r#"{"seq":100}"#).await;
    assert_eq!(
        (r["reset_seq"].clone(), r["num_pending"].clone()),
        (json!(100), json!(0))
    );
    let r = reset(&nc, "c", "{x").await;
    assert_eq!(r["error"]["err_code"], 10025, "{r}");
    assert_eq!(r["reset_seq"], 0, "{r}");
    let r = reset(&nc, "c", r#"{"seq":-1}"#).await;
    assert_eq!(r["error"]["err_code"], 10025, "{r}");

    consumer(
        &nc,
        "s",
        json!({"deliver_policy": "by_start_sequence", "opt_start_seq": 3}),
    )
    .await;
    let r = reset(&nc, "s", r#"{"seq":2}"#).await;
    assert_eq!(
        r["error"],
        json!({"code": 400, "err_code": 10204, "description": "invalid reset: below start seq"})
    );
    assert_eq!(reset(&nc, "s", r#"{"seq":4}"#).await["reset_seq"], 4);
    consumer(&nc, "n", json!({"deliver_policy": "new"})).await;
    let r = reset(&nc, "n", r#"{"seq":2}"#).await;
    assert_eq!(
        r["error"]["description"], "invalid reset: not allowed",
        "{r}"
    );
    assert_eq!(reset(&nc, "n", "{}").await["reset_seq"], 7);

    // No such consumer or stream: no answer at all.
    for subject in [
        "$JS.API.CONSUMER.RESET.R.nope",
        "$JS.API.CONSUMER.RESET.NOPE.c",
    ] {
        let answer = tokio::time::timeout(
            Duration::from_secs(1),
            nc.request(subject, Bytes::from_static(b"{}")),
        )
        .await;
        assert!(
            !matches!(answer, Ok(Ok(_))),
            "{subject} answered: {answer:?}"
        );
    }
}

#[tokio::test]
async fn forward_reset_on_an_interest_stream_drops_what_no_consumer_needs() {
    let server = TestServer::start(&[]);
    let nc = async_nats::connect(server.url()).await.expect("connect");
    let r = api(
        &nc,
        "$JS.API.STREAM.CREATE.R",
        &json!({"name": "R", "subjects": ["r.>"], "retention": "interest"}).to_string(),
    )
    .await;
    assert!(r.get("error").is_none(), "{r}");
    consumer(&nc, "c", json!({})).await;
    consumer(&nc, "other", json!({"filter_subject": "r.1"})).await;
    stream_publish(&nc).await;
    let r = reset(&nc, "c", r#"{"seq":4}"#).await;
    assert_eq!(r["reset_seq"], 4, "{r}");
    // 1..3 are done for c; `other` still needs r.1 (seq 2).
    let info = api(&nc, "$JS.API.STREAM.INFO.R", "").await;
    assert_eq!(info["state"]["messages"], 4, "{info}");
    assert_eq!(info["state"]["first_seq"], 2, "{info}");
}

async fn stream_publish(nc: &Client) {
    for i in 0..6 {
        let ack = nc
            .request(format!("r.{i}"), "m".into())
            .await
            .expect("puback");
        let ack: Value = serde_json::from_slice(&ack.payload).unwrap();
        assert!(ack.get("error").is_none(), "{ack}");
    }
}

#[tokio::test]
async fn an_answered_reset_survives_kill_9() {
    let mut server = TestServer::start(&[]);
    let nc = async_nats::connect(server.url()).await.expect("connect");
    stream(
        &nc,
        json!({"name": "R", "subjects": ["r.>"], "storage": "file"}),
    )
    .await;
    consumer(&nc, "c", json!({})).await;
    let inbox = nc.new_inbox();
    let mut sub = nc.subscribe(inbox.clone()).await.unwrap();
    for (seq, _, _, reply) in pull(&nc, &mut sub, &inbox, 4).await {
        assert!(seq <= 4);
        nc.request(reply, "+ACK".into()).await.unwrap();
    }
    let r = reset(&nc, "c", r#"{"seq":2}"#).await;
    assert_eq!(r["reset_seq"], 2, "{r}");
    drop(sub);
    drop(nc);
    let store = server.dir.path().join("store").display().to_string();
    server.kill9();
    let server = TestServer::restart(server, &["-sd", store.as_str()]);
    let nc = async_nats::connect(server.url()).await.expect("connect");
    let i = api(&nc, "$JS.API.CONSUMER.INFO.R.c", "").await;
    assert_eq!(pair(&i["ack_floor"]), (0, 1), "{i}");
    assert_eq!(i["num_pending"], 5, "{i}");
    let inbox = nc.new_inbox();
    let mut sub = nc.subscribe(inbox.clone()).await.unwrap();
    let got = pull(&nc, &mut sub, &inbox, 1).await;
    assert_eq!((got[0].0, got[0].1), (2, 1));
}
