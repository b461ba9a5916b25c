//! The built-in dead-letter path, end to end with async-nats: a consumer whose metadata names
//! `dead_letter_subject` gets each message it gives up on (`max_deliver` reached, `+TERM`)
//! republished there, with `Nats-Dead-Letter-*` headers, so a `DLQ` stream on that subject
//! keeps them. This is jsserver's own (nats-server leaves it to the user): against nats-server
//! (`JSSERVER_TEST_BINARY`) only the part both share runs: the metadata is accepted and echoed
//! unchanged and the advisories come as usual.

mod common;

use std::time::Duration;

use async_nats::{Client, HeaderMap, Subscriber};
use bytes::Bytes;
use common::TestServer;
use futures_util::StreamExt;
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(20);

fn reference() -> bool {
    std::env::var_os("JSSERVER_TEST_BINARY").is_some()
}

async fn api(nc: &Client, subject: &str, body: Value) -> Value {
    let msg = tokio::time::timeout(
        WAIT,
        nc.request(subject.to_owned(), Bytes::from(body.to_string())),
    )
    .await
    .expect("answered in time")
    .expect("request");
    let v: Value = serde_json::from_slice(&msg.payload).expect("JSON");
    assert!(v.get("error").is_none(), "{subject}: {v}");
    v
}

async fn next(sub: &mut Subscriber) -> async_nats::Message {
    tokio::time::timeout(WAIT, sub.next())
        .await
        .expect("a message in time")
        .expect("subscription open")
}

#[tokio::test]
async fn given_up_messages_land_in_the_dead_letter_stream() {
    let server = TestServer::start(&[]);
    let nc = async_nats::connect(server.url()).await.expect("connect");
    api(
        &nc,
        "$JS.API.STREAM.CREATE.ORDERS",
        json!({"name": "ORDERS", "subjects": ["orders.>"]}),
    )
    .await;
    api(
        &nc,
        "$JS.API.STREAM.CREATE.DLQ",
        json!({"name": "DLQ", "subjects": ["dlq.orders"]}),
    )
    .await;
    let r = api(
        &nc,
        "$JS.API.CONSUMER.CREATE.ORDERS.shipping",
        json!({"stream_name": "ORDERS", "config": {
            "durable_name": "shipping", "ack_policy": "explicit", "max_deliver": 2,
            "metadata": {"dead_letter_subject": "dlq.orders"}}}),
    )
    .await;
    assert_eq!(
        r["config"]["metadata"]["dead_letter_subject"], "dlq.orders",
        "{r}"
    );
    let mut advisories = nc
        .subscribe("$JS.EVENT.ADVISORY.CONSUMER.*.ORDERS.shipping")
        .await
        .unwrap();
    let mut headers = HeaderMap::new();
    headers.insert("X-Order", "1");
    headers.insert("Nats-Msg-Id", "order-1");
    nc.request_with_headers("orders.new", headers, "teapot".into())
        .await
        .unwrap();
    nc.request("orders.new", "kettle".into()).await.unwrap();

    let inbox = nc.new_inbox();
    let mut sub = nc.subscribe(inbox.clone()).await.unwrap();
    let pull = |n: u32| {
        let nc = nc.clone();
        let inbox = inbox.clone();
        async move {
            nc.publish_with_reply(
                "$JS.API.CONSUMER.MSG.NEXT.ORDERS.shipping",
                inbox,
                Bytes::from(format!(r#"{{"batch":{n},"expires":5000000000}}"#)),
            )
            .await
            .unwrap();
        }
    };
    // Order 1: delivered twice, NAKed twice: max_deliver reached.
    pull(1).await;
    let m = next(&mut sub).await;
    assert_eq!(&m.payload[..], b"teapot");
    nc.publish(m.reply.unwrap(), "-NAK".into()).await.unwrap();
    pull(1).await;
    let m = next(&mut sub).await;
    assert_eq!(&m.payload[..], b"teapot");
    nc.request(m.reply.unwrap(), "-NAK".into()).await.unwrap();
    // Order 2: terminated with a reason.
    pull(1).await;
    let m = next(&mut sub).await;
    assert_eq!(&m.payload[..], b"kettle");
    nc.request(m.reply.unwrap(), "+TERM no stock left".into())
        .await
        .unwrap();

    // Both advisories come as from nats-server.
    let mut kinds = Vec::new();
    while kinds.len() < 2 {
        let a = next(&mut advisories).await;
        if !a.subject.contains("MSG_NAKED") {
            kinds.push(a.subject.to_string());
        }
    }
    assert_eq!(
        kinds,
        [
            "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.ORDERS.shipping",
            "$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.ORDERS.shipping"
        ]
    );
    if reference() {
        return;
    }

    let info = api(&nc, "$JS.API.STREAM.INFO.DLQ", json!({})).await;
    assert_eq!(info["state"]["messages"], 2, "{info}");
    let get = |seq: u64| {
        let nc = nc.clone();
        async move {
            let r = api(&nc, "$JS.API.STREAM.MSG.GET.DLQ", json!({ "seq": seq })).await;
            serde_json::from_value::<jsproto::api::stream::StoredMessage>(r["message"].clone())
                .expect("a stored message")
        }
    };
    let hdrs = |m: &jsproto::api::stream::StoredMessage| String::from_utf8(m.hdrs.clone()).unwrap();
    let first = get(1).await;
    assert_eq!(first.subject, "dlq.orders");
    assert_eq!(first.data, b"teapot");
    assert_eq!(
        hdrs(&first),
        "NATS/1.0\r\nX-Order: 1\r\nNats-Dead-Letter-Stream: ORDERS\r\n\
         Nats-Dead-Letter-Subject: orders.new\r\nNats-Dead-Letter-Sequence: 1\r\n\
         Nats-Dead-Letter-Consumer: shipping\r\nNats-Dead-Letter-Deliveries: 2\r\n\
         Nats-Dead-Letter-Reason: max_deliver\r\n\r\n"
    );
    let second = get(2).await;
    assert_eq!(second.data, b"kettle");
    let h = hdrs(&second);
    assert!(h.contains("Nats-Dead-Letter-Sequence: 2\r\n"), "{h}");
    assert!(h.contains("Nats-Dead-Letter-Reason: terminated\r\n"), "{h}");
    assert!(
        h.contains("Nats-Dead-Letter-Description: no stock left\r\n"),
        "{h}"
    );
}
