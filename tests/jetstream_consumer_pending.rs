//! Who holds what, end to end: `$JS.API.CONSUMER.PENDING.<stream>.<consumer>` (jsserver's own;
//! nats-server does not answer it, so this file does not run against it) lists every
//! delivered, unacknowledged message with the connection its last delivery went to.

mod common;

use std::time::Duration;

use async_nats::Client;
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

/// Pulls `n` messages as `nc`; returns their ack subjects and the inbox subscription (kept
/// by the caller, so the holder stays subscribed).
async fn pull(nc: &Client, n: usize) -> (Vec<String>, async_nats::Subscriber) {
    let inbox = nc.new_inbox();
    let mut sub = nc.subscribe(inbox.clone()).await.unwrap();
    nc.publish_with_reply(
        "$JS.API.CONSUMER.MSG.NEXT.ORDERS.shipping",
        inbox,
        Bytes::from(format!(r#"{{"batch":{n},"expires":5000000000}}"#)),
    )
    .await
    .unwrap();
    let mut acks = Vec::new();
    while acks.len() < n {
        let m = tokio::time::timeout(WAIT, sub.next())
            .await
            .expect("in time")
            .expect("open");
        acks.push(m.reply.expect("ack subject").to_string());
    }
    (acks, sub)
}

#[tokio::test]
async fn pending_lists_each_message_with_its_holder() {
    if std::env::var_os("JSSERVER_TEST_BINARY").is_some() {
        return; // nats-server has no such endpoint
    }
    let server = TestServer::start(&[]);
    let admin = async_nats::connect(server.url()).await.unwrap();
    let r = api(
        &admin,
        "$JS.API.STREAM.CREATE.ORDERS",
        r#"{"name":"ORDERS","subjects":["orders.>"]}"#,
    )
    .await;
    assert!(r.get("error").is_none(), "{r}");
    for i in 0..3 {
        admin
            .request(format!("orders.{i}"), "o".into())
            .await
            .unwrap();
    }
    let body = json!({"stream_name": "ORDERS", "config": {"durable_name": "shipping",
                      "ack_policy": "explicit"}});
    let r = api(
        &admin,
        "$JS.API.CONSUMER.CREATE.ORDERS.shipping",
        &body.to_string(),
    )
    .await;
    assert!(r.get("error").is_none(), "{r}");
    let connect = |name: &'static str| {
        let url = server.url();
        async move {
            async_nats::ConnectOptions::new()
                .name(name)
                .connect(url)
                .await
                .unwrap()
        }
    };
    let w1 = connect("w1").await;
    let w2 = connect("w2").await;
    let (_, _held1) = pull(&w1, 1).await;
    let (acks, _held2) = pull(&w2, 2).await;
    w2.request(acks[1].clone(), "-NAK".into()).await.unwrap();

    let r = api(&admin, "$JS.API.CONSUMER.PENDING.ORDERS.shipping", "").await;
    assert_eq!(r["type"], "io.jsserver.api.v1.consumer_pending_response");
    assert_eq!(
        (r["total"].clone(), r["offset"].clone()),
        (json!(3), json!(0))
    );
    let p = r["pending"].as_array().unwrap();
    let seqs: Vec<u64> = p
        .iter()
        .map(|e| e["stream_seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, [1, 2, 3]);
    assert_eq!(p[0]["holder"]["name"], "w1", "{r}");
    assert_eq!(p[1]["holder"]["name"], "w2", "{r}");
    assert!(p[0]["holder"]["reply"]
        .as_str()
        .unwrap()
        .starts_with("_INBOX."));
    assert!(p[0]["holder"]["addr"]
        .as_str()
        .unwrap()
        .starts_with("127.0.0.1:"));
    assert_ne!(p[0]["holder"]["cid"], p[1]["holder"]["cid"]);
    assert_eq!(p[0]["deliveries"], 1);
    assert!(p[0].get("queued").is_none(), "{r}");
    assert_eq!(p[2]["queued"], true, "{r}");
    assert_eq!(p[2]["holder"]["name"], "w2", "{r}");
    assert!(p[0]["age"].as_u64().is_some() && p[0]["since"].is_string());

    // A holder that went away: its reply subject is still named, no connection.
    w1.drain().await.unwrap();
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let r = api(&admin, "$JS.API.CONSUMER.PENDING.ORDERS.shipping", "").await;
        let h = &r["pending"][0]["holder"];
        if h.get("cid").is_none() {
            assert!(h["reply"].is_string() && h.get("name").is_none(), "{r}");
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "w1 never left: {r}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let r = api(
        &admin,
        "$JS.API.CONSUMER.PENDING.ORDERS.shipping",
        r#"{"offset":2}"#,
    )
    .await;
    assert_eq!(r["pending"].as_array().unwrap().len(), 1, "{r}");
    assert_eq!(r["pending"][0]["stream_seq"], 3);
    let r = api(&admin, "$JS.API.CONSUMER.PENDING.ORDERS.nope", "").await;
    assert_eq!(r["error"]["err_code"], 10014, "{r}");
    let r = api(&admin, "$JS.API.CONSUMER.PENDING.NOPE.shipping", "").await;
    assert_eq!(r["error"]["err_code"], 10059, "{r}");
    let r = api(&admin, "$JS.API.CONSUMER.PENDING.ORDERS.shipping", "{x").await;
    assert_eq!(r["error"]["err_code"], 10025, "{r}");
}
