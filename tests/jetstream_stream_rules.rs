//! Stream rules as nats-server 2.15 applies them, through raw `$JS.API` requests against the
//! real binary: which stream updates are refused (and with which error), what an accepted update
//! does to what is stored, sealed streams, consumer filters and start positions, and interest /
//! work-queue retention with several consumers. Every test here also passes against
//! nats-server 2.15.1 (`JSSERVER_TEST_BINARY=.../nats-server`).

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::TestServer;
use serde_json::{json, Value};

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

/// Publishes `payload` on `subject` and waits for the PubAck; returns it.
async fn publish(nc: &async_nats::Client, subject: &str, payload: &str) -> Value {
    let msg = tokio::time::timeout(
        Duration::from_secs(10),
        nc.request(subject.to_owned(), Bytes::from(payload.to_owned())),
    )
    .await
    .expect("PubAck in time")
    .expect("PubAck");
    serde_json::from_slice(&msg.payload).expect("PubAck JSON")
}

fn error(code: u16, err_code: u32, description: &str) -> Value {
    json!({"code": code, "err_code": err_code, "description": description})
}

// ---------------------------------------------------------------------------------------------
// 1. Drop-in details: consumer limits on update, sealed streams.
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn consumer_limits_below_an_existing_consumer_are_refused() {
    let server = TestServer::start(&[]);
    let nc = connect(&server).await;
    let base = json!({"name": "CL", "subjects": ["cl.>"], "storage": "memory"});
    api_ok(&nc, "$JS.API.STREAM.CREATE.CL", base.clone()).await;
    // C: max_ack_pending defaults to 1000, no inactive threshold (durable).
    api_ok(
        &nc,
        "$JS.API.CONSUMER.CREATE.CL.C",
        json!({"stream_name": "CL", "config": {"durable_name": "C", "ack_policy": "explicit"}}),
    )
    .await;
    // D: small max_ack_pending, a 60 s inactive threshold.
    api_ok(
        &nc,
        "$JS.API.CONSUMER.CREATE.CL.D",
        json!({"stream_name": "CL", "config": {"durable_name": "D", "ack_policy": "explicit",
            "max_ack_pending": 50, "inactive_threshold": 60_000_000_000u64}}),
    )
    .await;
    let with_limits = |limits: Value| {
        let mut cfg = base.clone();
        cfg["consumer_limits"] = limits;
        cfg
    };
    let cases = [
        (json!({"max_ack_pending": 100}), Some("C")),
        (json!({"inactive_threshold": 30_000_000_000u64}), Some("D")),
        (
            json!({"max_ack_pending": 1000, "inactive_threshold": 59_000_000_000u64}),
            Some("D"),
        ),
        (
            json!({"max_ack_pending": 1000, "inactive_threshold": 60_000_000_000u64}),
            None,
        ),
        (json!({"max_ack_pending": 5000}), None),
    ];
    for (limits, violator) in cases {
        let r = api(&nc, "$JS.API.STREAM.UPDATE.CL", with_limits(limits.clone())).await;
        match violator {
            Some(name) => assert_eq!(
                r["error"],
                error(
                    500,
                    10069,
                    &format!("change to limits violates consumers: {name}")
                ),
                "{limits}"
            ),
            None => {
                assert!(r.get("error").is_none(), "{limits}: {r}");
                assert_eq!(r["config"]["consumer_limits"], limits);
            }
        }
    }
    // Both violate: both named (in no particular order).
    let r = api(
        &nc,
        "$JS.API.STREAM.UPDATE.CL",
        with_limits(json!({"max_ack_pending": 10})),
    )
    .await;
    assert_eq!(r["error"]["err_code"], 10069, "{r}");
    let text = r["error"]["description"].as_str().unwrap();
    assert!(
        text == "change to limits violates consumers: C, D"
            || text == "change to limits violates consumers: D, C",
        "{text}"
    );
    // The refused updates left the last accepted limits in place.
    let info = api_ok(&nc, "$JS.API.STREAM.INFO.CL", Value::Null).await;
    assert_eq!(
        info["config"]["consumer_limits"],
        json!({"max_ack_pending": 5000})
    );
}

#[tokio::test]
async fn a_sealed_stream_refuses_purge_and_delete_as_sealed() {
    let server = TestServer::start(&[]);
    let nc = connect(&server).await;
    let base = json!({"name": "SEAL", "subjects": ["seal.>"]});
    api_ok(&nc, "$JS.API.STREAM.CREATE.SEAL", base.clone()).await;
    publish(&nc, "seal.a", "one").await;
    publish(&nc, "seal.b", "two").await;
    let mut sealed = base.clone();
    sealed["sealed"] = json!(true);
    let r = api_ok(&nc, "$JS.API.STREAM.UPDATE.SEAL", sealed).await;
    // Sealing turns on deny_delete and deny_purge and discard new.
    assert_eq!(r["config"]["sealed"], true);
    assert_eq!(r["config"]["deny_delete"], true);
    assert_eq!(r["config"]["deny_purge"], true);
    assert_eq!(r["config"]["discard"], "new");
    let sealed_err = error(400, 10109, "invalid operation on sealed stream");
    for body in [
        Value::Null,
        json!({}),
        json!({"filter": "seal.a"}),
        json!({"seq": 2}),
    ] {
        let r = api(&nc, "$JS.API.STREAM.PURGE.SEAL", body.clone()).await;
        assert_eq!(r["error"], sealed_err, "purge {body}");
    }
    let r = api(&nc, "$JS.API.STREAM.MSG.DELETE.SEAL", json!({"seq": 1})).await;
    assert_eq!(r["error"], sealed_err);
    let r = api(
        &nc,
        "$JS.API.STREAM.MSG.DELETE.SEAL",
        json!({"seq": 1, "no_erase": true}),
    )
    .await;
    assert_eq!(r["error"], sealed_err);
    let r = publish(&nc, "seal.c", "three").await;
    assert_eq!(r["error"], sealed_err);
    let info = api_ok(&nc, "$JS.API.STREAM.INFO.SEAL", Value::Null).await;
    assert_eq!(info["state"]["messages"], 2);
    // A bad request is reported before a missing or sealed stream.
    let bad = error(400, 10003, "bad request");
    for stream in ["SEAL", "NOPE"] {
        let r = api(
            &nc,
            &format!("$JS.API.STREAM.PURGE.{stream}"),
            json!({"seq": 2, "keep": 1}),
        )
        .await;
        assert_eq!(r["error"], bad, "purge {stream}");
        let r = api(
            &nc,
            &format!("$JS.API.STREAM.MSG.DELETE.{stream}"),
            Value::Null,
        )
        .await;
        assert_eq!(r["error"], bad, "delete {stream}");
    }

    // Not sealed, only deny_delete / deny_purge: the "not permitted" errors.
    let deny =
        json!({"name": "DENY", "subjects": ["deny.>"], "deny_delete": true, "deny_purge": true});
    api_ok(&nc, "$JS.API.STREAM.CREATE.DENY", deny).await;
    publish(&nc, "deny.a", "one").await;
    let r = api(&nc, "$JS.API.STREAM.PURGE.DENY", Value::Null).await;
    assert_eq!(r["error"], error(500, 10110, "stream purge not permitted"));
    let r = api(&nc, "$JS.API.STREAM.MSG.DELETE.DENY", json!({"seq": 1})).await;
    assert_eq!(
        r["error"],
        error(500, 10057, "message delete not permitted")
    );
}
