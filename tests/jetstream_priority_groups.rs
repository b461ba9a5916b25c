//! Priority groups (ADR-42), end to end with async-nats: `priority_policy` `overflow`,
//! `pinned_client` and `prioritized`, their config and pull-request errors,
//! `$JS.API.CONSUMER.UNPIN.<stream>.<consumer>`, the `Nats-Pin-Id` header, `priority_groups`
//! in consumer info and the `PINNED` / `UNPINNED` advisories. Expectations are nats-server
//! 2.15's (checked with `JSSERVER_TEST_BINARY=$(which nats-server) cargo test --test
//! jetstream_priority_groups`).
//!
//! No assertion depends on timing: a request that must not be served is given a short expiry
//! and must end with `408`, conditions are awaited with generous deadlines, and a pin meant
//! to hold has a `priority_timeout` far longer than the test.

mod common;

use std::time::Duration;

use async_nats::{Client, HeaderMap, Subscriber};
use bytes::Bytes;
use common::TestServer;
use futures_util::StreamExt;
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(20);
const S: u64 = 1_000_000_000;

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

/// Stream `JOBS` (`jobs.>`) with `n` messages.
async fn setup(server: &TestServer, n: usize) -> Client {
    let nc = async_nats::connect(server.url()).await.expect("connect");
    let r = api(
        &nc,
        "$JS.API.STREAM.CREATE.JOBS",
        r#"{"name":"JOBS","subjects":["jobs.>"],"storage":"file"}"#,
    )
    .await;
    assert!(r.get("error").is_none(), "{r}");
    for _ in 0..n {
        publish(&nc).await;
    }
    nc
}

async fn publish(nc: &Client) {
    let ack = nc.request("jobs.x", "job".into()).await.expect("puback");
    let ack: Value = serde_json::from_slice(&ack.payload).unwrap();
    assert!(ack.get("error").is_none(), "{ack}");
}

async fn create(nc: &Client, name: &str, config: Value) -> Value {
    let mut config = config;
    config["durable_name"] = json!(name);
    config["ack_policy"] = json!("explicit");
    let body = json!({"stream_name": "JOBS", "config": config}).to_string();
    api(nc, &format!("$JS.API.CONSUMER.CREATE.JOBS.{name}"), &body).await
}

async fn info(nc: &Client, name: &str) -> Value {
    api(nc, &format!("$JS.API.CONSUMER.INFO.JOBS.{name}"), "").await
}

/// One worker: its own inbox, one pull at a time.
struct Worker {
    nc: Client,
    inbox: String,
    sub: Subscriber,
}

/// What a pull got: a delivery (stream seq, headers) or a status (code, description, headers).
#[derive(Debug)]
enum Got {
    Msg(u64, Option<HeaderMap>),
    Status(u16, String, Option<HeaderMap>),
}

impl Got {
    fn seq(&self) -> u64 {
        match self {
            Got::Msg(seq, _) => *seq,
            other => panic!("expected a delivery, got {other:?}"),
        }
    }

    fn pin(&self) -> String {
        match self {
            Got::Msg(_, Some(h)) => h
                .get("Nats-Pin-Id")
                .map(|v| v.to_string())
                .expect("a pinned delivery carries Nats-Pin-Id"),
            other => panic!("expected a pinned delivery, got {other:?}"),
        }
    }

    fn status(&self) -> (u16, &str) {
        match self {
            Got::Status(code, text, _) => (*code, text),
            other => panic!("expected a status, got {other:?}"),
        }
    }
}

impl Worker {
    async fn new(nc: &Client) -> Worker {
        let inbox = nc.new_inbox();
        let sub = nc.subscribe(inbox.clone()).await.expect("subscribe");
        nc.flush().await.expect("flush");
        Worker {
            nc: nc.clone(),
            inbox,
            sub,
        }
    }

    async fn pull(&self, consumer: &str, body: &str) {
        self.nc
            .publish_with_reply(
                format!("$JS.API.CONSUMER.MSG.NEXT.JOBS.{consumer}"),
                self.inbox.clone(),
                Bytes::from(body.to_owned()),
            )
            .await
            .expect("pull");
        self.nc.flush().await.expect("flush");
    }

    async fn next(&mut self) -> Got {
        let m = tokio::time::timeout(WAIT, self.sub.next())
            .await
            .expect("a message in time")
            .expect("subscription open");
        match m.status {
            Some(code) => Got::Status(code.as_u16(), m.description.unwrap_or_default(), m.headers),
            None => {
                let reply = m.reply.expect("a delivery has an ack reply");
                let tokens: Vec<&str> = reply.split('.').collect();
                Got::Msg(tokens[5].parse().expect("stream seq"), m.headers)
            }
        }
    }

    async fn pull_next(&mut self, consumer: &str, body: Value) -> Got {
        self.pull(consumer, &body.to_string()).await;
        self.next().await
    }
}

/// The next advisory on `sub` other than a consumer create/delete.
async fn advisory(sub: &mut Subscriber) -> Value {
    loop {
        let m = tokio::time::timeout(WAIT, sub.next())
            .await
            .expect("advisory in time")
            .expect("subscription open");
        let v: Value = serde_json::from_slice(&m.payload).expect("JSON");
        if v["type"] != "io.nats.jetstream.advisory.v1.consumer_action" {
            return v;
        }
    }
}

#[tokio::test]
async fn config_and_request_errors() {
    let server = TestServer::start(&[]);
    let nc = setup(&server, 1).await;
    let err = |r: &Value| r["error"]["err_code"].as_u64();
    let r = create(&nc, "a", json!({"priority_policy": "overflow"})).await;
    assert_eq!(err(&r), Some(10159), "{r}");
    let r = create(&nc, "a", json!({"priority_groups": ["jobs"]})).await;
    assert_eq!(err(&r), Some(10196), "{r}");
    let r = create(&nc, "a", json!({"priority_timeout": S})).await;
    assert_eq!(err(&r), Some(10197), "{r}");
    let r = create(
        &nc,
        "a",
        json!({"priority_policy": "overflow", "priority_groups": ["no spaces"]}),
    )
    .await;
    assert_eq!(err(&r), Some(10162), "{r}");
    let r = create(
        &nc,
        "a",
        json!({"priority_policy": "pinned_client", "priority_groups": ["jobs"]}),
    )
    .await;
    assert!(r.get("error").is_none(), "{r}");
    assert_eq!(r["config"]["priority_timeout"], json!(120 * S), "{r}");

    // On a consumer without a policy: the group fields are refused, a group alone is not.
    let r = create(&nc, "plain", json!({})).await;
    assert!(r.get("error").is_none(), "{r}");
    let mut w = Worker::new(&nc).await;
    for (body, text) in [
        (
            json!({"batch": 1, "min_pending": 1}),
            "Bad Request - Not a Overflow Priority consumer",
        ),
        (
            json!({"batch": 1, "min_ack_pending": -1}),
            "Bad Request - Not a Overflow Priority consumer",
        ),
        (
            json!({"batch": 1, "id": "x"}),
            "Bad Request - Not a Pinned Client Priority consumer",
        ),
        (
            json!({"batch": 1, "priority": 10}),
            "Bad Request - Priority must be between 0 and 9",
        ),
        (
            json!({"batch": 1, "priority": -1}),
            "Bad Request - Priority must be between 0 and 9",
        ),
    ] {
        let got = w.pull_next("plain", body.clone()).await;
        assert_eq!(got.status(), (400, text), "{body}");
    }
    let got = w
        .pull_next("plain", json!({"batch": 1, "group": "whatever"}))
        .await;
    assert_eq!(got.seq(), 1);

    // On a consumer with a policy: a JSON request must name one of its groups; an integer
    // body has no group fields at all and is served.
    let r = create(
        &nc,
        "over",
        json!({"priority_policy": "overflow", "priority_groups": ["jobs"]}),
    )
    .await;
    assert!(r.get("error").is_none(), "{r}");
    let got = w.pull_next("over", json!({"batch": 1})).await;
    assert_eq!(got.status(), (400, "Bad Request - Priority Group missing"));
    let got = w
        .pull_next("over", json!({"batch": 1, "group": "other"}))
        .await;
    assert_eq!(got.status(), (400, "Bad Request - Invalid Priority Group"));
    let got = w
        .pull_next("over", json!({"batch": 1, "group": "jobs", "id": "x"}))
        .await;
    assert_eq!(
        got.status(),
        (400, "Bad Request - Not a Pinned Client Priority consumer")
    );
    w.pull("over", "1").await;
    assert_eq!(w.next().await.seq(), 1);
}

#[tokio::test]
async fn overflow_standby_waits_for_a_backlog() {
    let server = TestServer::start(&[]);
    let nc = setup(&server, 2).await;
    let r = create(
        &nc,
        "spill",
        json!({"priority_policy": "overflow", "priority_groups": ["jobs"]}),
    )
    .await;
    assert!(r.get("error").is_none(), "{r}");
    let mut standby = Worker::new(&nc).await;
    // Backlog 2 < 3: not served, ends with 408 at its expiry with what it had left.
    let got = standby
        .pull_next(
            "spill",
            json!({"batch": 2, "expires": S / 2, "group": "jobs", "min_pending": 3}),
        )
        .await;
    assert_eq!(got.status(), (408, "Request Timeout"));
    // A long standby pull is served once the backlog reaches 3, and only then.
    standby
        .pull(
            "spill",
            &json!({"batch": 1, "expires": 30 * S, "group": "jobs", "min_pending": 3}).to_string(),
        )
        .await;
    let deadline = tokio::time::Instant::now() + WAIT;
    while info(&nc, "spill").await["num_waiting"] != 1 {
        assert!(tokio::time::Instant::now() < deadline, "never waited");
    }
    assert_eq!(info(&nc, "spill").await["delivered"]["stream_seq"], 0);
    publish(&nc).await;
    assert_eq!(standby.next().await.seq(), 1);
    // min_ack_pending: one delivered and unacked now.
    let mut w = Worker::new(&nc).await;
    let got = w
        .pull_next(
            "spill",
            json!({"batch": 1, "expires": 30 * S, "group": "jobs", "min_ack_pending": 1}),
        )
        .await;
    assert_eq!(got.seq(), 2);
    let i = info(&nc, "spill").await;
    assert_eq!(
        (i["num_pending"].clone(), i["num_ack_pending"].clone()),
        (json!(1), json!(2))
    );
}

#[tokio::test]
async fn pinned_client_serves_one_worker_until_unpinned() {
    let server = TestServer::start(&[]);
    let nc = setup(&server, 3).await;
    let mut adv = nc
        .subscribe("$JS.EVENT.ADVISORY.CONSUMER.*.JOBS.pin")
        .await
        .expect("sub");
    nc.flush().await.expect("flush");
    let r = create(
        &nc,
        "pin",
        json!({"priority_policy": "pinned_client", "priority_groups": ["jobs"],
               "priority_timeout": 600 * S}),
    )
    .await;
    assert!(r.get("error").is_none(), "{r}");
    let group = |i: &Value| i["priority_groups"][0].clone();
    let g = group(&info(&nc, "pin").await);
    assert_eq!(g["group"], "jobs", "{g}");
    assert!(g.get("pinned_client_id").is_none(), "{g}");

    // The first pull takes the pin.
    let mut a = Worker::new(&nc).await;
    let mut b = Worker::new(&nc).await;
    let got = a
        .pull_next(
            "pin",
            json!({"batch": 1, "expires": 10 * S, "group": "jobs"}),
        )
        .await;
    assert_eq!(got.seq(), 1);
    let pin = got.pin();
    assert_eq!(pin.len(), 22, "{pin}");
    let a1 = advisory(&mut adv).await;
    assert_eq!(
        a1["type"],
        "io.nats.jetstream.advisory.v1.consumer_group_pinned"
    );
    assert_eq!(
        (a1["group"].clone(), a1["pinned_id"].clone()),
        (json!("jobs"), json!(pin))
    );
    let g = group(&info(&nc, "pin").await);
    assert_eq!(g["pinned_client_id"], json!(pin), "{g}");
    assert_ne!(g["pinned_ts"], "0001-01-01T00:00:00Z", "{g}");

    // Another worker without the id waits (and times out); with another id it is refused.
    let got = b
        .pull_next(
            "pin",
            json!({"batch": 1, "expires": S / 2, "group": "jobs"}),
        )
        .await;
    assert_eq!(got.status().0, 408);
    let got = b
        .pull_next(
            "pin",
            json!({"batch": 1, "expires": S, "group": "jobs", "id": "nope"}),
        )
        .await;
    assert_eq!(got.status(), (423, "Nats-Pin-Id mismatch"));
    // The pinned worker goes on with its id.
    let got = a
        .pull_next(
            "pin",
            json!({"batch": 1, "expires": 10 * S, "group": "jobs", "id": pin}),
        )
        .await;
    assert_eq!((got.seq(), got.pin()), (2, pin.clone()));

    // UNPIN: body errors first, then stream, consumer and group.
    let unpin =
        |stream: &str, consumer: &str| format!("$JS.API.CONSUMER.UNPIN.{stream}.{consumer}");
    let err = |r: Value| {
        (
            r["error"]["err_code"].as_u64(),
            r["error"]["description"].as_str().map(str::to_owned),
        )
    };
    let r = api(&nc, &unpin("JOBS", "pin"), "").await;
    assert_eq!(err(r).0, Some(10025));
    let r = api(&nc, &unpin("JOBS", "pin"), "{}").await;
    assert_eq!(
        err(r),
        (
            Some(10025),
            Some("invalid JSON: consumer group not specified".into())
        )
    );
    let r = api(&nc, &unpin("NOPE", "pin"), r#"{"group":"bad group"}"#).await;
    assert_eq!(err(r).0, Some(10162));
    let r = api(&nc, &unpin("NOPE", "pin"), r#"{"group":"jobs"}"#).await;
    assert_eq!(err(r).0, Some(10059));
    let r = api(&nc, &unpin("JOBS", "nope"), r#"{"group":"jobs"}"#).await;
    assert_eq!(err(r).0, Some(10014));
    let r = api(&nc, &unpin("JOBS", "pin"), r#"{"group":"other"}"#).await;
    assert_eq!(err(r).0, Some(10160));
    let r = api(&nc, &unpin("JOBS", "pin"), r#"{"group":"jobs"}"#).await;
    assert_eq!(
        r,
        json!({"type": "io.nats.jetstream.api.v1.consumer_unpin_response"})
    );
    let a2 = advisory(&mut adv).await;
    assert_eq!(
        a2["type"],
        "io.nats.jetstream.advisory.v1.consumer_group_unpinned"
    );
    assert_eq!(
        (a2["group"].clone(), a2["reason"].clone()),
        (json!("jobs"), json!("admin"))
    );
    let g = group(&info(&nc, "pin").await);
    assert!(g.get("pinned_client_id").is_none(), "{g}");

    // The next worker without an id takes a new pin; the old id is now a mismatch.
    let got = b
        .pull_next(
            "pin",
            json!({"batch": 1, "expires": 10 * S, "group": "jobs"}),
        )
        .await;
    assert_eq!(got.seq(), 3);
    let pin2 = got.pin();
    assert_ne!(pin2, pin);
    let got = a
        .pull_next(
            "pin",
            json!({"batch": 1, "expires": S, "group": "jobs", "id": pin}),
        )
        .await;
    assert_eq!(got.status(), (423, "Nats-Pin-Id mismatch"));
}

#[tokio::test]
async fn a_waiting_pull_holding_a_released_pin_gets_423_wrong_pin_id() {
    let server = TestServer::start(&[]);
    let nc = setup(&server, 1).await;
    let r = create(
        &nc,
        "pin",
        json!({"priority_policy": "pinned_client", "priority_groups": ["jobs"],
               "priority_timeout": 600 * S}),
    )
    .await;
    assert!(r.get("error").is_none(), "{r}");
    let mut a = Worker::new(&nc).await;
    // A takes the pin with a batch it cannot fill and keeps waiting with it.
    let got = a
        .pull_next(
            "pin",
            json!({"batch": 5, "expires": 30 * S, "group": "jobs"}),
        )
        .await;
    assert_eq!(got.seq(), 1);
    let r = api(
        &nc,
        "$JS.API.CONSUMER.UNPIN.JOBS.pin",
        r#"{"group":"jobs"}"#,
    )
    .await;
    assert!(r.get("error").is_none(), "{r}");
    // The next message finds A's request holding the released pin: it is ended.
    publish(&nc).await;
    let got = a.next().await;
    let Got::Status(code, text, Some(headers)) = got else {
        panic!("expected a status with headers, got {got:?}");
    };
    assert_eq!((code, text.as_str()), (423, "Nats-Wrong-Pin-Id"));
    assert_eq!(
        headers.get("Nats-Pending-Messages").map(|v| v.to_string()),
        Some("4".into())
    );
    // The message waits for a request without an id, which gets it with a new pin.
    let mut b = Worker::new(&nc).await;
    let got = b
        .pull_next(
            "pin",
            json!({"batch": 1, "expires": 10 * S, "group": "jobs"}),
        )
        .await;
    assert_eq!(got.seq(), 2);
    assert_eq!(got.pin().len(), 22);
}

#[tokio::test]
async fn pin_times_out_without_requests_carrying_it() {
    let server = TestServer::start(&[]);
    let nc = setup(&server, 2).await;
    let mut adv = nc
        .subscribe("$JS.EVENT.ADVISORY.CONSUMER.UNPINNED.JOBS.pin")
        .await
        .expect("sub");
    nc.flush().await.expect("flush");
    let r = create(
        &nc,
        "pin",
        json!({"priority_policy": "pinned_client", "priority_groups": ["jobs"],
               "priority_timeout": S}),
    )
    .await;
    assert!(r.get("error").is_none(), "{r}");
    let mut a = Worker::new(&nc).await;
    let got = a
        .pull_next(
            "pin",
            json!({"batch": 1, "expires": 10 * S, "group": "jobs"}),
        )
        .await;
    let pin = got.pin();
    let u = advisory(&mut adv).await;
    assert_eq!(
        (u["group"].clone(), u["reason"].clone()),
        (json!("jobs"), json!("timeout"))
    );
    let g = info(&nc, "pin").await["priority_groups"][0].clone();
    assert!(g.get("pinned_client_id").is_none(), "{g}");
    // Anyone may take the pin now.
    let mut b = Worker::new(&nc).await;
    let got = b
        .pull_next(
            "pin",
            json!({"batch": 1, "expires": 10 * S, "group": "jobs"}),
        )
        .await;
    assert_eq!(got.seq(), 2);
    assert_ne!(got.pin(), pin);
}

#[tokio::test]
async fn prioritized_serves_the_lowest_priority_first() {
    let server = TestServer::start(&[]);
    let nc = setup(&server, 0).await;
    let r = create(
        &nc,
        "prio",
        json!({"priority_policy": "prioritized", "priority_groups": ["jobs"]}),
    )
    .await;
    assert!(r.get("error").is_none(), "{r}");
    let mut p5 = Worker::new(&nc).await;
    let mut plain = Worker::new(&nc).await;
    let mut p1 = Worker::new(&nc).await;
    let mut p1b = Worker::new(&nc).await;
    let req =
        |p: u64| json!({"batch": 1, "expires": 30 * S, "group": "jobs", "priority": p}).to_string();
    p5.pull("prio", &req(5)).await;
    plain.pull("prio", "1").await;
    p1.pull("prio", &req(1)).await;
    p1b.pull("prio", &req(1)).await;
    let deadline = tokio::time::Instant::now() + WAIT;
    while info(&nc, "prio").await["num_waiting"] != 4 {
        assert!(tokio::time::Instant::now() < deadline, "never waited");
    }
    for _ in 0..4 {
        publish(&nc).await;
    }
    // Priority 1 in arrival order, then 5, then the request without group fields.
    assert_eq!(p1.next().await.seq(), 1);
    assert_eq!(p1b.next().await.seq(), 2);
    assert_eq!(p5.next().await.seq(), 3);
    assert_eq!(plain.next().await.seq(), 4);
}

#[test]
fn nats_py_against_a_priority_group_consumer() {
    // nats-py 2.16 has no priority-group parameter: its fetch gets the server's 400, and a
    // pull request that names the group (sent with nats-py) is served and acked.
    common::run_nats_py_script("priority_pull.py");
}
