//! JetStream streams through async-nats's JetStream API and raw `$JS.API` requests, against
//! the real `jsserver` binary: the stream API, PubAcks, dedup, expected-last headers, limits
//! and discard policies, purge variants, message get/delete, direct get, and recovery after
//! `kill -9`.

mod common;

use std::time::Duration;

use async_nats::header::HeaderMap;
use async_nats::jetstream::{self, stream};
use bytes::Bytes;
use common::TestServer;
use futures_util::TryStreamExt;
use serde_json::{json, Value};

async fn connect(server: &TestServer) -> (async_nats::Client, jetstream::Context) {
    let nc = async_nats::connect(server.url()).await.expect("connect");
    let js = jetstream::new(nc.clone());
    (nc, js)
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

/// A core publish with a reply; returns the PubAck JSON.
async fn publish_raw(nc: &async_nats::Client, subject: &str, headers: &[(&str, &str)]) -> Value {
    let mut map = HeaderMap::new();
    for (k, v) in headers {
        map.insert(*k, *v);
    }
    let msg = nc
        .request_with_headers(subject.to_owned(), map, Bytes::from_static(b"order"))
        .await
        .expect("PubAck");
    serde_json::from_slice(&msg.payload).expect("PubAck JSON")
}

fn orders() -> stream::Config {
    stream::Config {
        name: "ORDERS".into(),
        subjects: vec!["orders.>".into()],
        ..Default::default()
    }
}

#[tokio::test]
async fn create_info_update_list_delete() {
    let server = TestServer::start(&[]);
    let (nc, js) = connect(&server).await;
    let mut s = js.create_stream(orders()).await.expect("create");
    let info = s.info().await.unwrap();
    assert_eq!(info.config.name, "ORDERS");
    assert_eq!(info.config.max_messages, -1);
    assert_eq!(info.config.duplicate_window, Duration::from_secs(120));
    assert_eq!(info.config.storage, stream::StorageType::File);
    assert_eq!(info.state.messages, 0);

    // Creating the same config again is fine; a different one is refused with 10058.
    js.create_stream(orders()).await.expect("idempotent create");
    let mut other = orders();
    other.max_messages = 5;
    let r = api(
        &nc,
        "$JS.API.STREAM.CREATE.ORDERS",
        serde_json::to_value(&other).unwrap(),
    )
    .await;
    assert_eq!(r["error"]["err_code"], 10058);

    let mut updated = orders();
    updated.max_messages = 10;
    updated.description = Some("the orders".into());
    let info = js.update_stream(updated).await.expect("update");
    assert_eq!(info.config.max_messages, 10);
    let mut memory = orders();
    memory.storage = stream::StorageType::Memory;
    assert!(
        js.update_stream(memory).await.is_err(),
        "storage is immutable"
    );

    js.create_stream(stream::Config {
        name: "BILLING".into(),
        subjects: vec!["billing.*".into()],
        storage: stream::StorageType::Memory,
        ..Default::default()
    })
    .await
    .unwrap();
    let mut names: Vec<String> = js.stream_names().try_collect().await.unwrap();
    names.sort();
    assert_eq!(names, ["BILLING", "ORDERS"]);
    let infos: Vec<stream::Info> = js.streams().try_collect().await.unwrap();
    assert_eq!(infos.len(), 2);
    let by_subject = api(
        &nc,
        "$JS.API.STREAM.NAMES",
        json!({"subject": "orders.new"}),
    )
    .await;
    assert_eq!(by_subject["streams"], json!(["ORDERS"]));

    assert!(js.delete_stream("BILLING").await.unwrap().success);
    let r = api(&nc, "$JS.API.STREAM.INFO.BILLING", Value::Null).await;
    assert_eq!(r["error"]["err_code"], 10059);
    assert_eq!(r["error"]["code"], 404);
}

#[tokio::test]
async fn bad_stream_requests_get_the_reference_errors() {
    let server = TestServer::start(&[]);
    let (nc, js) = connect(&server).await;
    js.create_stream(orders()).await.unwrap();
    let cases = [
        ("$JS.API.STREAM.CREATE.X", json!({"name": "Y"}), 10056),
        (
            "$JS.API.STREAM.CREATE.R",
            json!({"name": "R", "num_replicas": 3}),
            10074,
        ),
        (
            "$JS.API.STREAM.CREATE.O",
            json!({"name": "O", "subjects": ["orders.eu"]}),
            10065,
        ),
        (
            "$JS.API.STREAM.CREATE.U",
            json!({"name": "U", "bogus": 1}),
            10025,
        ),
        ("$JS.API.STREAM.UPDATE.NOPE", json!({"name": "NOPE"}), 10059),
        ("$JS.API.STREAM.PURGE.NOPE", Value::Null, 10059),
    ];
    for (subject, body, code) in cases {
        let r = api(&nc, subject, body.clone()).await;
        assert_eq!(r["error"]["err_code"], code, "{subject} {body}: {r}");
    }
    // Malformed JSON in a create body.
    let msg = nc
        .request("$JS.API.STREAM.CREATE.X", Bytes::from_static(b"{bad"))
        .await
        .unwrap();
    let r: Value = serde_json::from_slice(&msg.payload).unwrap();
    assert_eq!(r["error"]["err_code"], 10025);
}

#[tokio::test]
async fn publish_gets_puback_and_messages_stay() {
    let server = TestServer::start(&[]);
    let (_nc, js) = connect(&server).await;
    let mut s = js.create_stream(orders()).await.unwrap();
    for i in 1..=5u64 {
        let ack = js
            .publish(format!("orders.{i}"), Bytes::from(format!("order {i}")))
            .await
            .unwrap()
            .await
            .unwrap();
        assert_eq!(ack.stream, "ORDERS");
        assert_eq!(ack.sequence, i);
        assert!(!ack.duplicate);
    }
    let info = s.info().await.unwrap();
    assert_eq!(info.state.messages, 5);
    assert_eq!(
        (info.state.first_sequence, info.state.last_sequence),
        (1, 5)
    );
    let m = s.get_raw_message(3).await.unwrap();
    assert_eq!(m.subject.as_str(), "orders.3");
    assert_eq!(&m.payload[..], b"order 3");
    // A subject no stream captures: the JetStream publisher hears "no responders".
    let err = js
        .publish("nothing.here", Bytes::new())
        .await
        .unwrap()
        .await;
    assert!(err.is_err());
}

#[tokio::test]
async fn dedup_and_expected_headers() {
    let server = TestServer::start(&[]);
    let (nc, js) = connect(&server).await;
    js.create_stream(orders()).await.unwrap();
    let first = publish_raw(&nc, "orders.a", &[("Nats-Msg-Id", "m1")]).await;
    assert_eq!(first, json!({"stream": "ORDERS", "seq": 1}));
    let dup = publish_raw(&nc, "orders.a", &[("Nats-Msg-Id", "m1")]).await;
    assert_eq!(
        dup,
        json!({"stream": "ORDERS", "seq": 1, "duplicate": true})
    );

    let r = publish_raw(&nc, "orders.a", &[("Nats-Expected-Stream", "OTHER")]).await;
    assert_eq!(r["error"]["err_code"], 10060);
    let r = publish_raw(&nc, "orders.a", &[("Nats-Expected-Last-Sequence", "7")]).await;
    assert_eq!(r["error"]["err_code"], 10071);
    assert_eq!(r["error"]["description"], "wrong last sequence: 1");
    let r = publish_raw(&nc, "orders.a", &[("Nats-Expected-Last-Sequence", "1")]).await;
    assert_eq!(r["seq"], 2);
    let r = publish_raw(
        &nc,
        "orders.b",
        &[("Nats-Expected-Last-Subject-Sequence", "0")],
    )
    .await;
    assert_eq!(r["seq"], 3, "no message on orders.b yet: {r}");
    let r = publish_raw(
        &nc,
        "orders.b",
        &[("Nats-Expected-Last-Subject-Sequence", "0")],
    )
    .await;
    assert_eq!(r["error"]["description"], "wrong last sequence: 3");
    let r = publish_raw(&nc, "orders.c", &[("Nats-Msg-Id", "m9")]).await;
    assert_eq!(r["seq"], 4);
    let r = publish_raw(&nc, "orders.c", &[("Nats-Expected-Last-Msg-Id", "zz")]).await;
    assert_eq!(r["error"]["err_code"], 10070);
    assert_eq!(r["error"]["description"], "wrong last msg ID: m9");
    let r = publish_raw(&nc, "orders.c", &[("Nats-Expected-Last-Msg-Id", "m9")]).await;
    assert_eq!(r["seq"], 5);
}

/// The `Nats-Expected-*` headers together, and with `Nats-Msg-Id`, `Nats-TTL` and
/// `Nats-Rollup`: which check decides, in nats-server's order (expected stream, TTL allowed,
/// last sequence per subject or its `-Subject` alone, last sequence, dedup, last msg id,
/// rollup). Every refusal stores nothing; each row names the error code that must win.
#[tokio::test]
async fn expected_headers_together_refuse_in_the_reference_order() {
    let server = TestServer::start(&[]);
    let (nc, js) = connect(&server).await;
    js.create_stream(orders()).await.unwrap();
    // seq 1 on orders.a (id m1), seq 2 on orders.b, seq 3 on orders.a (id m3).
    assert_eq!(
        publish_raw(&nc, "orders.a", &[("Nats-Msg-Id", "m1")]).await["seq"],
        1
    );
    assert_eq!(publish_raw(&nc, "orders.b", &[]).await["seq"], 2);
    assert_eq!(
        publish_raw(&nc, "orders.a", &[("Nats-Msg-Id", "m3")]).await["seq"],
        3
    );

    let stream = ("Nats-Expected-Stream", "OTHER");
    let last_seq = ("Nats-Expected-Last-Sequence", "1");
    let subj_seq = ("Nats-Expected-Last-Subject-Sequence", "1");
    let subj_only = ("Nats-Expected-Last-Subject-Sequence-Subject", "orders.b");
    let ttl = ("Nats-TTL", "10s");
    let last_id = ("Nats-Expected-Last-Msg-Id", "nope");
    let rollup = ("Nats-Rollup", "all");
    let dup = ("Nats-Msg-Id", "m1");
    type Headers<'a> = &'a [(&'a str, &'a str)];
    let rows: &[(Headers, u64, Option<&str>)] = &[
        (
            &[stream, last_seq, subj_seq, ttl, last_id, rollup, dup],
            10060,
            None,
        ),
        (&[ttl, last_seq, subj_seq, last_id], 10166, None),
        // orders.a's last is 3: the per-subject check names 3, before the stream-wide one.
        (
            &[subj_seq, last_seq, last_id],
            10071,
            Some("wrong last sequence: 3"),
        ),
        (&[subj_only, last_seq], 10193, None),
        (
            &[last_seq, dup, last_id],
            10071,
            Some("wrong last sequence: 3"),
        ),
        (&[last_id, rollup], 10070, Some("wrong last msg ID: m3")),
        (&[rollup], 10111, Some("rollup not permitted")),
    ];
    for (headers, code, description) in rows {
        let r = publish_raw(&nc, "orders.a", headers).await;
        assert_eq!(r["error"]["err_code"], *code, "{headers:?} -> {r}");
        if let Some(d) = description {
            assert_eq!(r["error"]["description"], *d, "{headers:?} -> {r}");
        }
    }
    // A duplicate wins over a wrong last msg id (dedup comes first) and stores nothing.
    let r = publish_raw(&nc, "orders.a", &[dup, last_id]).await;
    assert_eq!(r, json!({"stream": "ORDERS", "seq": 1, "duplicate": true}));
    // Empty values are no expectation at all.
    let r = publish_raw(
        &nc,
        "orders.a",
        &[
            ("Nats-Expected-Stream", ""),
            ("Nats-Expected-Last-Msg-Id", ""),
        ],
    )
    .await;
    assert_eq!(r["seq"], 4, "{r}");
    // All of them right at once.
    let r = publish_raw(
        &nc,
        "orders.c",
        &[
            ("Nats-Expected-Stream", "ORDERS"),
            ("Nats-Expected-Last-Sequence", "4"),
            ("Nats-Expected-Last-Subject-Sequence", "2"),
            ("Nats-Expected-Last-Subject-Sequence-Subject", "orders.b"),
            ("Nats-Msg-Id", "m5"),
        ],
    )
    .await;
    assert_eq!(r["seq"], 5, "{r}");
    // A wildcard subject for the check: the last of orders.* is 5.
    let r = publish_raw(
        &nc,
        "orders.d",
        &[
            ("Nats-Expected-Last-Subject-Sequence", "5"),
            ("Nats-Expected-Last-Subject-Sequence-Subject", "orders.*"),
            ("Nats-Expected-Last-Msg-Id", "m5"),
        ],
    )
    .await;
    assert_eq!(r["seq"], 6, "{r}");
    let info = api(&nc, "$JS.API.STREAM.INFO.ORDERS", Value::Null).await;
    assert_eq!(
        info["state"]["messages"], 6,
        "refusals stored nothing: {info}"
    );
}

#[tokio::test]
async fn limits_discard_old_and_new() {
    let server = TestServer::start(&[]);
    let (nc, js) = connect(&server).await;
    // max_msgs with discard old: the oldest goes.
    let mut s = js
        .create_stream(stream::Config {
            max_messages: 3,
            ..orders()
        })
        .await
        .unwrap();
    for i in 0..5 {
        js.publish("orders.x", Bytes::from(format!("{i}")))
            .await
            .unwrap()
            .await
            .unwrap();
    }
    let st = s.info().await.unwrap().state.clone();
    assert_eq!(
        (st.messages, st.first_sequence, st.last_sequence),
        (3, 3, 5)
    );

    // discard new refuses instead, with 10077.
    js.create_stream(stream::Config {
        name: "FULL".into(),
        subjects: vec!["full.>".into()],
        max_messages: 2,
        discard: stream::DiscardPolicy::New,
        ..Default::default()
    })
    .await
    .unwrap();
    publish_raw(&nc, "full.a", &[]).await;
    publish_raw(&nc, "full.a", &[]).await;
    let r = publish_raw(&nc, "full.a", &[]).await;
    assert_eq!(r["error"]["err_code"], 10077);
    assert_eq!(r["error"]["description"], "maximum messages exceeded");

    // Per subject: only the newest N of each subject stay.
    let mut per = js
        .create_stream(stream::Config {
            name: "PER".into(),
            subjects: vec!["per.>".into()],
            max_messages_per_subject: 1,
            ..Default::default()
        })
        .await
        .unwrap();
    for subject in ["per.a", "per.b", "per.a", "per.a"] {
        publish_raw(&nc, subject, &[]).await;
    }
    assert_eq!(per.info().await.unwrap().state.messages, 2);

    // max_msg_size: too big is 10054.
    js.create_stream(stream::Config {
        name: "SMALL".into(),
        subjects: vec!["small".into()],
        max_message_size: 3,
        ..Default::default()
    })
    .await
    .unwrap();
    let r = publish_raw(&nc, "small", &[]).await;
    assert_eq!(r["error"]["err_code"], 10054);

    // max_bytes with discard new.
    js.create_stream(stream::Config {
        name: "BYTES".into(),
        subjects: vec!["bytes".into()],
        max_bytes: 100,
        discard: stream::DiscardPolicy::New,
        ..Default::default()
    })
    .await
    .unwrap();
    let mut refused = None;
    for _ in 0..10 {
        let r = publish_raw(&nc, "bytes", &[]).await;
        if r.get("error").is_some() {
            refused = Some(r);
            break;
        }
    }
    let r = refused.expect("max_bytes refuses at some point");
    assert_eq!(r["error"]["description"], "maximum bytes exceeded");
}

#[tokio::test]
async fn max_age_expires_messages() {
    let server = TestServer::start(&[]);
    let (_nc, js) = connect(&server).await;
    let mut s = js
        .create_stream(stream::Config {
            max_age: Duration::from_millis(300),
            ..orders()
        })
        .await
        .unwrap();
    js.publish("orders.old", Bytes::new())
        .await
        .unwrap()
        .await
        .unwrap();
    // Waits for a condition (the message ages out), not a timing assertion.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        if s.info().await.unwrap().state.messages == 0 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "message never expired"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn purge_variants() {
    let server = TestServer::start(&[]);
    let (_nc, js) = connect(&server).await;
    let mut s = js.create_stream(orders()).await.unwrap();
    for subject in [
        "orders.a", "orders.b", "orders.a", "orders.b", "orders.a", "orders.b",
    ] {
        js.publish(subject, Bytes::new())
            .await
            .unwrap()
            .await
            .unwrap();
    }
    assert_eq!(
        s.purge().filter("orders.a").keep(1).await.unwrap().purged,
        2
    );
    // Left: 2 (b), 4 (b), 5 (a), 6 (b); below 4 there is only 2.
    assert_eq!(s.purge().sequence(4).await.unwrap().purged, 1);
    let left = s.info().await.unwrap().state.messages;
    assert_eq!(s.purge().await.unwrap().purged, left);
    let st = s.info().await.unwrap().state.clone();
    assert_eq!(
        (st.messages, st.first_sequence, st.last_sequence),
        (0, 7, 6)
    );
    let ack = js
        .publish("orders.a", Bytes::new())
        .await
        .unwrap()
        .await
        .unwrap();
    assert_eq!(ack.sequence, 7, "sequences continue after a purge");
}

#[tokio::test]
async fn message_get_delete_and_direct_get() {
    let server = TestServer::start(&[]);
    let (nc, js) = connect(&server).await;
    let s = js
        .create_stream(stream::Config {
            allow_direct: true,
            ..orders()
        })
        .await
        .unwrap();
    let mut headers = HeaderMap::new();
    headers.insert("Order-Id", "7");
    js.publish_with_headers("orders.a", headers, Bytes::from_static(b"one"))
        .await
        .unwrap()
        .await
        .unwrap();
    js.publish("orders.b", Bytes::from_static(b"two"))
        .await
        .unwrap()
        .await
        .unwrap();
    js.publish("orders.a", Bytes::from_static(b"three"))
        .await
        .unwrap()
        .await
        .unwrap();

    let m = s.get_raw_message(1).await.unwrap();
    assert_eq!(m.headers.get("Order-Id").map(|v| v.as_str()), Some("7"));
    let last = s.get_last_raw_message_by_subject("orders.a").await.unwrap();
    assert_eq!((last.sequence, &last.payload[..]), (3, &b"three"[..]));
    let next = api(
        &nc,
        "$JS.API.STREAM.MSG.GET.ORDERS",
        json!({"next_by_subj": "orders.b", "seq": 1}),
    )
    .await;
    assert_eq!(next["message"]["seq"], 2);

    let d = s.direct_get(1).await.unwrap();
    assert_eq!(&d.payload[..], b"one");
    assert_eq!(d.headers.get("Order-Id").map(|v| v.as_str()), Some("7"));
    let d = s.direct_get_last_for_subject("orders.b").await.unwrap();
    assert_eq!(d.sequence, 2);
    assert!(s.direct_get(99).await.is_err(), "404 for a missing message");

    assert!(s.delete_message(2).await.unwrap());
    assert!(s.get_raw_message(2).await.is_err());
    // Deleting what is not there, as nats-server answers for a file stream: a gap inside the
    // stream, past the end, below the start.
    let r = api(&nc, "$JS.API.STREAM.MSG.DELETE.ORDERS", json!({"seq": 2})).await;
    assert_eq!(
        r["error"],
        json!({"code": 400, "err_code": 10043, "description": "sequence 2 not found"})
    );
    let r = api(&nc, "$JS.API.STREAM.MSG.DELETE.ORDERS", json!({"seq": 99})).await;
    assert_eq!(
        r["error"],
        json!({"code": 500, "err_code": 10057, "description": "stream store EOF"})
    );
    let r = api(&nc, "$JS.API.STREAM.MSG.DELETE.ORDERS", json!({"seq": 0})).await;
    assert_eq!(
        r["error"],
        json!({"code": 500, "err_code": 10057, "description": "no message found"})
    );
    let info = api(
        &nc,
        "$JS.API.STREAM.INFO.ORDERS",
        json!({"deleted_details": true}),
    )
    .await;
    assert_eq!(info["state"]["num_deleted"], 1);
    assert_eq!(info["state"]["deleted"], json!([2]));
    let r = api(&nc, "$JS.API.STREAM.MSG.GET.ORDERS", json!({"seq": 2})).await;
    assert_eq!(r["error"]["err_code"], 10037);
}

#[tokio::test]
async fn acked_messages_survive_kill_9() {
    let mut server = TestServer::start(&[]);
    let (_nc, js) = connect(&server).await;
    js.create_stream(orders()).await.unwrap();
    js.create_stream(stream::Config {
        name: "DEDUP".into(),
        subjects: vec!["dedup".into()],
        ..Default::default()
    })
    .await
    .unwrap();
    for i in 1..=100u64 {
        let ack = js
            .publish("orders.new", Bytes::from(i.to_string()))
            .await
            .unwrap()
            .await;
        assert_eq!(ack.unwrap().sequence, i);
    }
    let mut h = HeaderMap::new();
    h.insert("Nats-Msg-Id", "once");
    js.publish_with_headers("dedup", h.clone(), Bytes::new())
        .await
        .unwrap()
        .await
        .unwrap();

    let store = server.dir.path().join("store");
    server.kill9();
    let server = TestServer::restart(server, &["-sd", store.to_str().unwrap()]);
    let (_nc, js) = connect(&server).await;
    let mut s = js.get_stream("ORDERS").await.expect("stream recovered");
    let st = s.info().await.unwrap().state.clone();
    assert_eq!((st.messages, st.last_sequence), (100, 100));
    let m = s.get_raw_message(100).await.unwrap();
    assert_eq!(&m.payload[..], b"100");
    let ack = js
        .publish("orders.new", Bytes::new())
        .await
        .unwrap()
        .await
        .unwrap();
    assert_eq!(ack.sequence, 101);
    // The dedup window is rebuilt from the stored messages.
    let ack = js
        .publish_with_headers("dedup", h, Bytes::new())
        .await
        .unwrap()
        .await
        .unwrap();
    assert!(ack.duplicate, "Nats-Msg-Id remembered across the restart");
}

/// A full disk refuses publishes with an error PubAck instead of acking them, the server keeps
/// running, and everything acked before stays readable. Needs root to mount a 1 MiB tmpfs as
/// the store dir (CI runs as root); elsewhere it says so and checks nothing.
#[tokio::test]
async fn full_disk_refuses_publishes_and_keeps_what_was_acked() {
    let scratch = tempfile::tempdir().unwrap();
    let store = scratch.path().join("store");
    std::fs::create_dir_all(&store).unwrap();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=1m", "tmpfs"])
        .arg(&store)
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        eprintln!("skipped: cannot mount a tmpfs here (needs root)");
        return;
    }
    struct Unmount(std::path::PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg(&self.0).status();
        }
    }
    let _unmount = Unmount(store.clone());
    let server = TestServer::start(&["-sd", store.to_str().unwrap()]);
    let (nc, js) = connect(&server).await;
    js.create_stream(orders()).await.unwrap();
    let payload = Bytes::from(vec![b'o'; 100 * 1024]);
    let mut acked = Vec::new();
    let mut refusal = None;
    for i in 0..40u64 {
        let msg = nc
            .request(format!("orders.{i}"), payload.clone())
            .await
            .expect("a PubAck or an error PubAck");
        let ack: Value = serde_json::from_slice(&msg.payload).unwrap();
        if ack.get("error").is_some() {
            refusal = Some(ack);
            break;
        }
        acked.push(ack["seq"].as_u64().unwrap());
    }
    let refusal = refusal.expect("a 1 MiB disk fills up within 40 publishes of 100 KiB");
    assert_eq!(refusal["error"]["err_code"], 10077, "{refusal}");
    assert!(!acked.is_empty());
    // The server keeps running and everything acked is still there.
    let mut s = js.get_stream("ORDERS").await.unwrap();
    for &seq in &acked {
        let m = s.get_raw_message(seq).await.unwrap();
        assert_eq!(m.payload.len(), payload.len());
    }
    assert!(s.info().await.unwrap().state.messages >= acked.len() as u64);
    let r = api(&nc, "$JS.API.INFO", Value::Null).await;
    assert!(r.get("error").is_none());
}

/// Per-message TTL (`Nats-TTL`, streams with `allow_msg_ttl`): values as nats-server 2.15.1
/// takes them, the message removed once its own TTL runs out while the others stay, and the
/// schedule kept across a `kill -9` and restart.
#[tokio::test]
async fn per_message_ttl_removes_the_message_when_it_runs_out() {
    let mut server = TestServer::start(&[]);
    let (nc, _js) = connect(&server).await;
    let r = api(
        &nc,
        "$JS.API.STREAM.CREATE.ORDERS",
        json!({"name": "ORDERS", "subjects": ["orders.>"], "allow_msg_ttl": true}),
    )
    .await;
    assert_eq!(r["config"]["allow_msg_ttl"], true, "{r}");
    for bad in ["500ms", "0", "-1", "abc"] {
        let ack = publish_raw(&nc, "orders.bad", &[("Nats-TTL", bad)]).await;
        assert_eq!(ack["error"]["err_code"], 10165, "{bad}: {ack}");
    }
    let short = publish_raw(&nc, "orders.short", &[("Nats-TTL", "1s")]).await;
    let kept = publish_raw(&nc, "orders.kept", &[]).await;
    let never = publish_raw(&nc, "orders.never", &[("Nats-TTL", "never")]).await;
    let later = publish_raw(&nc, "orders.later", &[("Nats-TTL", "3")]).await;
    assert_eq!(
        [&short["seq"], &kept["seq"], &never["seq"], &later["seq"]],
        [1, 2, 3, 4]
    );
    wait_for_state(&nc, "ORDERS", "the 1s message expired", |s| {
        s["messages"] == 3
    })
    .await;
    assert!(get_seq(&nc, "ORDERS", 1).await.is_none());
    assert!(get_seq(&nc, "ORDERS", 2).await.is_some());

    // The 3 s message is still scheduled after a kill -9 and restart.
    let store = server.dir.path().join("store");
    server.kill9();
    let server = TestServer::restart(server, &["-sd", store.to_str().unwrap()]);
    let (nc, _js) = connect(&server).await;
    wait_for_state(&nc, "ORDERS", "the 3s message expired", |s| {
        s["messages"] == 2
    })
    .await;
    assert!(get_seq(&nc, "ORDERS", 4).await.is_none());
    assert!(get_seq(&nc, "ORDERS", 2).await.is_some(), "no TTL: kept");
    assert!(get_seq(&nc, "ORDERS", 3).await.is_some(), "never: kept");
}

/// Polls `STREAM.INFO` until `done` holds for its `state` (a generous deadline: a wait for a
/// condition, not a timing assertion); returns that state.
async fn wait_for_state(
    nc: &async_nats::Client,
    stream: &str,
    what: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let info = api(nc, &format!("$JS.API.STREAM.INFO.{stream}"), Value::Null).await;
        if done(&info["state"]) {
            return info["state"].clone();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: never happened, last state {}",
            info["state"]
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `MSG.GET` by sequence: the message JSON, or `None` for 10037 (no message found).
async fn get_seq(nc: &async_nats::Client, stream: &str, seq: u64) -> Option<Value> {
    let r = api(
        nc,
        &format!("$JS.API.STREAM.MSG.GET.{stream}"),
        json!({ "seq": seq }),
    )
    .await;
    if r["error"]["err_code"] == 10037 {
        return None;
    }
    assert!(r["message"].is_object(), "{r}");
    Some(r["message"].clone())
}

/// Creates `ORDERS` (`orders.>`) with `allow_msg_ttl` and a `max_age` of 1 s.
async fn create_aging_orders(nc: &async_nats::Client) {
    let r = api(
        nc,
        "$JS.API.STREAM.CREATE.ORDERS",
        json!({"name": "ORDERS", "subjects": ["orders.>"], "allow_msg_ttl": true,
               "max_age": 1_000_000_000u64}),
    )
    .await;
    assert_eq!(r["config"]["allow_msg_ttl"], true, "{r}");
}

/// A message published with `Nats-TTL: never` (any letter case) is exempt from the stream's
/// `max_age`, as in nats-server 2.15.1, while a message with a TTL longer than `max_age`
/// still goes at `max_age`.
#[tokio::test]
async fn ttl_never_outlives_max_age() {
    let server = TestServer::start(&[]);
    let (nc, _js) = connect(&server).await;
    create_aging_orders(&nc).await;
    let never = publish_raw(&nc, "orders.never", &[("Nats-TTL", "never")]).await;
    let upper = publish_raw(&nc, "orders.upper", &[("Nats-TTL", "NEVER")]).await;
    let plain = publish_raw(&nc, "orders.plain", &[]).await;
    let long = publish_raw(&nc, "orders.long", &[("Nats-TTL", "1h")]).await;
    assert_eq!(
        [&never["seq"], &upper["seq"], &plain["seq"], &long["seq"]],
        [1, 2, 3, 4],
        "{never} {upper} {plain} {long}"
    );
    let state = wait_for_state(&nc, "ORDERS", "max_age expiry", |s| s["messages"] == 2).await;
    assert_eq!(state["first_seq"], 1, "{state}");
    assert!(get_seq(&nc, "ORDERS", 1).await.is_some(), "never: kept");
    assert!(get_seq(&nc, "ORDERS", 2).await.is_some(), "NEVER: kept");
    assert!(
        get_seq(&nc, "ORDERS", 3).await.is_none(),
        "no TTL: aged out"
    );
    assert!(
        get_seq(&nc, "ORDERS", 4).await.is_none(),
        "1h TTL: aged out"
    );
    // Messages behind the exempt ones still age out.
    let after = publish_raw(&nc, "orders.after", &[]).await;
    assert_eq!(after["seq"], 5, "{after}");
    wait_for_state(&nc, "ORDERS", "the later message aged out", |s| {
        s["messages"] == 2 && s["last_seq"] == 5
    })
    .await;
    assert!(
        get_seq(&nc, "ORDERS", 1).await.is_some(),
        "never: still kept"
    );
}

/// The `never` exemption from `max_age` survives `kill -9` and a restart: the stream marks
/// those messages again from their stored headers before it expires anything.
/// nats-server 2.15.1 fails this (`JSSERVER_TEST_BINARY=nats-server`): after any restart,
/// graceful or not, it removes a `never` message older than `max_age` (docs/storage.md).
#[tokio::test]
async fn ttl_never_outlives_max_age_after_kill9_restart() {
    let mut server = TestServer::start(&[]);
    let (nc, _js) = connect(&server).await;
    create_aging_orders(&nc).await;
    let never = publish_raw(&nc, "orders.never", &[("Nats-TTL", "never")]).await;
    let plain = publish_raw(&nc, "orders.plain", &[]).await;
    assert_eq!([&never["seq"], &plain["seq"]], [1, 2]);
    // Once the plain message aged out, the `never` one (older) is past `max_age` too.
    wait_for_state(&nc, "ORDERS", "max_age expiry", |s| s["messages"] == 1).await;
    let store = server.dir.path().join("store");
    server.kill9();
    let server = TestServer::restart(server, &["-sd", store.to_str().unwrap()]);
    let (nc, _js) = connect(&server).await;
    let after = publish_raw(&nc, "orders.after", &[]).await;
    assert_eq!(after["seq"], 3, "{after}");
    let state = wait_for_state(&nc, "ORDERS", "max_age expiry after the restart", |s| {
        s["messages"] == 1 && s["last_seq"] == 3
    })
    .await;
    assert_eq!(state["first_seq"], 1, "{state}");
    assert!(get_seq(&nc, "ORDERS", 1).await.is_some(), "never: kept");
}

/// A marker whose `max_age` and own TTL run out together (`max_age` = marker TTL) goes without a
/// marker of its own, and stays gone after a `kill -9` and restart, as on nats-server 2.15.1
/// (one marker, then `first_seq` 3, `last_seq` 2 for good). jsserver used to write a new marker
/// every max_age, and another after each restart.
#[tokio::test]
async fn a_subject_delete_marker_is_written_once() {
    let mut server = TestServer::start(&[]);
    let (nc, _js) = connect(&server).await;
    let r = api(
        &nc,
        "$JS.API.STREAM.CREATE.ONCE",
        json!({"name": "ONCE", "subjects": ["once.>"], "max_age": 1_000_000_000u64,
               "allow_msg_ttl": true, "allow_rollup_hdrs": true,
               "subject_delete_marker_ttl": 1_000_000_000u64}),
    )
    .await;
    assert!(r["config"].is_object(), "{r}");
    let ack = publish_raw(&nc, "once.x", &[]).await;
    assert_eq!(ack["seq"], 1, "{ack}");
    // The message ages out, its marker (seq 2) follows it.
    wait_for_state(&nc, "ONCE", "the marker aged out", |s| {
        s["messages"] == 0 && s["last_seq"] == 2 && s["first_seq"] == 3
    })
    .await;
    // Another marker would come one max_age later: give it three.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let state = wait_for_state(&nc, "ONCE", "stream info", |_| true).await;
    assert_eq!(
        (state["messages"].clone(), state["last_seq"].clone()),
        (json!(0), json!(2)),
        "{state}"
    );
    let store = server.dir.path().join("store");
    server.kill9();
    let server = TestServer::restart(server, &["-sd", store.to_str().unwrap()]);
    let (nc, _js) = connect(&server).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let state = wait_for_state(&nc, "ONCE", "stream info after the restart", |_| true).await;
    assert_eq!(
        (state["messages"].clone(), state["last_seq"].clone()),
        (json!(0), json!(2)),
        "{state}"
    );
}

/// The headers of a subject delete marker: `(reason, ttl, rollup)`, each `None` when absent.
fn marker_headers(m: &jetstream::Message) -> (Option<String>, Option<String>, Option<String>) {
    let get = |k: &str| {
        m.headers
            .as_ref()
            .and_then(|h| h.get(k))
            .map(|v| v.as_str().to_owned())
    };
    (
        get("Nats-Marker-Reason"),
        get("Nats-TTL"),
        get("Nats-Rollup"),
    )
}

/// Pulls from `consumer` until `n` messages arrived (generous deadline).
async fn pull_n(consumer: &jetstream::consumer::PullConsumer, n: usize) -> Vec<jetstream::Message> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let mut got = Vec::new();
    while got.len() < n {
        assert!(
            tokio::time::Instant::now() < deadline,
            "only {} of {n} messages arrived",
            got.len()
        );
        got.extend(common::fetch(consumer, n - got.len(), Duration::from_millis(500)).await);
    }
    got
}

/// With `subject_delete_marker_ttl`, `max_age` removing a subject's last message leaves a
/// marker on that subject, as nats-server 2.15.1 writes it: empty, with `Nats-Marker-Reason:
/// MaxAge`, `Nats-TTL: <marker TTL>` and `Nats-Rollup: sub`, one per emptied subject, none for
/// a subject that keeps a message (`never`), none for `MSG.DELETE`, and none when a marker
/// itself goes. Consumers get the markers like any message.
#[tokio::test]
async fn subject_delete_markers_after_max_age() {
    let server = TestServer::start(&[]);
    let (nc, js) = connect(&server).await;
    let r = api(
        &nc,
        "$JS.API.STREAM.CREATE.MARK",
        json!({"name": "MARK", "subjects": ["mark.>"], "max_age": 1_000_000_000u64,
               "allow_msg_ttl": true, "allow_rollup_hdrs": true,
               "subject_delete_marker_ttl": 60_000_000_000u64}),
    )
    .await;
    assert_eq!(
        r["config"]["subject_delete_marker_ttl"], 60_000_000_000u64,
        "{r}"
    );
    let stream = js.get_stream("MARK").await.expect("stream");
    let consumer: jetstream::consumer::PullConsumer = stream
        .create_consumer(jetstream::consumer::pull::Config {
            durable_name: Some("watch".into()),
            ack_policy: jetstream::consumer::AckPolicy::None,
            ..Default::default()
        })
        .await
        .expect("consumer");
    for (subject, ttl) in [
        ("mark.a", None),
        ("mark.b", None),
        ("mark.b", None),
        ("mark.n", Some("never")),
        ("mark.n", None),
        ("mark.d", None),
    ] {
        let headers: Vec<(&str, &str)> = ttl.map(|t| ("Nats-TTL", t)).into_iter().collect();
        let ack = publish_raw(&nc, subject, &headers).await;
        assert!(ack["seq"].is_u64(), "{ack}");
    }
    let r = api(
        &nc,
        "$JS.API.STREAM.MSG.DELETE.MARK",
        json!({"seq": 6, "no_erase": true}),
    )
    .await;
    assert_eq!(r["success"], true, "{r}");

    // 5 stored messages, then a marker for mark.a and one for mark.b, in that order.
    let got = pull_n(&consumer, 7).await;
    let seqs: Vec<u64> = got
        .iter()
        .map(|m| m.info().expect("metadata").stream_sequence)
        .collect();
    assert_eq!(seqs, [1, 2, 3, 4, 5, 7, 8]);
    for (m, subject) in got[5..].iter().zip(["mark.a", "mark.b"]) {
        assert_eq!(m.subject.as_str(), subject);
        assert!(m.payload.is_empty());
        assert_eq!(
            marker_headers(m),
            (
                Some("MaxAge".to_owned()),
                Some("1m0s".to_owned()),
                Some("sub".to_owned())
            )
        );
    }
    for m in &got[..5] {
        assert_eq!(marker_headers(m).0, None, "not a marker: {}", m.subject);
    }
    // The markers age out in turn and leave nothing behind; `never` stays.
    let state = wait_for_state(&nc, "MARK", "the markers aged out", |s| s["messages"] == 1).await;
    assert_eq!(state["last_seq"], 8, "no marker for a marker: {state}");
    assert!(get_seq(&nc, "MARK", 4).await.is_some(), "never: kept");
    let r = api(
        &nc,
        "$JS.API.STREAM.MSG.GET.MARK",
        json!({"last_by_subj": "mark.a"}),
    )
    .await;
    assert_eq!(r["error"]["err_code"], 10037, "{r}");
}

/// With `subject_delete_marker_ttl`, a per-message TTL running out also leaves a marker
/// (reason `MaxAge` too, as nats-server 2.15.1 writes it), which then expires after the marker
/// TTL; a TTL shorter than the marker TTL is raised to it and the stored header says so in
/// whole seconds (`Nats-TTL: 2`), while a longer one is kept as published. A marker still
/// expires, writing no marker of its own, after a `kill -9` and restart.
#[tokio::test]
async fn subject_delete_markers_after_message_ttl() {
    let mut server = TestServer::start(&[]);
    let (nc, js) = connect(&server).await;
    let r = api(
        &nc,
        "$JS.API.STREAM.CREATE.TTLM",
        json!({"name": "TTLM", "subjects": ["ttlm.>"], "allow_msg_ttl": true,
               "allow_rollup_hdrs": true, "subject_delete_marker_ttl": 2_000_000_000u64}),
    )
    .await;
    assert!(r.get("error").is_none(), "{r}");
    let stream = js.get_stream("TTLM").await.expect("stream");
    let consumer: jetstream::consumer::PullConsumer = stream
        .create_consumer(jetstream::consumer::pull::Config {
            durable_name: Some("watch".into()),
            ack_policy: jetstream::consumer::AckPolicy::None,
            ..Default::default()
        })
        .await
        .expect("consumer");
    let x = publish_raw(&nc, "ttlm.x", &[("Nats-TTL", "1s")]).await;
    let y = publish_raw(&nc, "ttlm.y", &[("Nats-TTL", "1h")]).await;
    let z = publish_raw(&nc, "ttlm.z", &[("Nats-TTL", "1")]).await;
    let keep = publish_raw(&nc, "ttlm.z", &[]).await;
    assert_eq!(
        [&x["seq"], &y["seq"], &z["seq"], &keep["seq"]],
        [1, 2, 3, 4]
    );
    let stored_ttl = |seq: u64| {
        let stream = stream.clone();
        async move {
            let m = stream.get_raw_message(seq).await.expect("stored");
            let ttl = m.headers.get("Nats-TTL").map(|v| v.as_str().to_owned());
            (ttl, m.headers.iter().count())
        }
    };
    assert_eq!(stored_ttl(1).await, (Some("2".to_owned()), 1), "raised");
    assert_eq!(stored_ttl(2).await, (Some("1h".to_owned()), 1), "kept");
    assert_eq!(stored_ttl(3).await, (Some("2".to_owned()), 1), "raised");

    // ttlm.x runs out: a marker; ttlm.z keeps a message: none.
    let got = pull_n(&consumer, 5).await;
    let marker = &got[4];
    assert_eq!(marker.info().expect("metadata").stream_sequence, 5);
    assert_eq!(marker.subject.as_str(), "ttlm.x");
    assert!(marker.payload.is_empty());
    assert_eq!(
        marker_headers(marker),
        (
            Some("MaxAge".to_owned()),
            Some("2s".to_owned()),
            Some("sub".to_owned())
        )
    );
    // The marker runs out in turn, even across a kill -9 and restart, writing nothing; the
    // rest stays.
    let store = server.dir.path().join("store");
    server.kill9();
    let server = TestServer::restart(server, &["-sd", store.to_str().unwrap()]);
    let (nc, _js) = connect(&server).await;
    let state = wait_for_state(&nc, "TTLM", "the marker expired", |s| s["messages"] == 2).await;
    assert_eq!(state["last_seq"], 5, "no marker for a marker: {state}");
    assert!(get_seq(&nc, "TTLM", 5).await.is_none());
    assert!(get_seq(&nc, "TTLM", 2).await.is_some());
    assert!(get_seq(&nc, "TTLM", 4).await.is_some());
}

/// `subject_delete_marker_ttl` config checks, with nats-server 2.15.1's codes and texts: it
/// turns on `allow_msg_ttl` and roll-ups (and off `deny_purge`) unless the request is
/// pedantic.
#[tokio::test]
async fn subject_delete_marker_config_checks() {
    let server = TestServer::start(&[]);
    let (nc, _js) = connect(&server).await;
    let create = |body: Value| {
        let nc = nc.clone();
        async move { api(&nc, "$JS.API.STREAM.CREATE.SDM", body).await }
    };
    for (body, code, description) in [
        (
            json!({"name": "SDM", "subject_delete_marker_ttl": 500_000_000u64}),
            500,
            "subject delete marker TTL must be at least 1 second",
        ),
        (
            json!({"name": "SDM", "subject_delete_marker_ttl": -1}),
            500,
            "subject delete marker TTL must not be negative",
        ),
        (
            json!({"name": "SDM", "subject_delete_marker_ttl": 2_000_000_000u64,
                   "pedantic": true}),
            500,
            "subject delete marker cannot be set if message TTLs are disabled",
        ),
        (
            json!({"name": "SDM", "subject_delete_marker_ttl": 2_000_000_000u64,
                   "allow_msg_ttl": true, "pedantic": true}),
            500,
            "subject delete marker cannot be set if roll-ups are disabled",
        ),
        (
            json!({"name": "SDM", "subject_delete_marker_ttl": 2_000_000_000u64,
                   "allow_msg_ttl": true, "allow_rollup_hdrs": true, "deny_purge": true}),
            500,
            "roll-ups require the purge permission",
        ),
    ] {
        let r = create(body.clone()).await;
        assert_eq!(r["error"]["code"], code, "{body}: {r}");
        assert_eq!(r["error"]["err_code"], 10052, "{body}: {r}");
        assert_eq!(r["error"]["description"], description, "{body}: {r}");
    }
    let r = create(
        json!({"name": "SDM", "subject_delete_marker_ttl": 2_000_000_000u64, "deny_purge": true}),
    )
    .await;
    let c = &r["config"];
    assert_eq!(
        [
            &c["allow_msg_ttl"],
            &c["allow_rollup_hdrs"],
            &c["deny_purge"]
        ],
        [true, true, false],
        "{r}"
    );
    assert_eq!(c["subject_delete_marker_ttl"], 2_000_000_000u64, "{r}");
}

/// As Go's decoder fills nats-server's request structs: an object's keys match a struct's
/// fields in any case, at every depth (`Config.Durable_Name`), while a map's keys
/// (`metadata`) keep their case; a key that matches no field is still refused (10025).
#[tokio::test]
async fn api_request_keys_match_fields_in_any_case() {
    let server = TestServer::start(&[]);
    let (nc, _js) = connect(&server).await;
    let created = api(
        &nc,
        "$JS.API.STREAM.CREATE.GK",
        json!({"NAME": "GK", "Subjects": ["gk.>"], "MAX_MSGS": 5, "Metadata": {"Owner": "x"}}),
    )
    .await;
    assert_eq!(created["did_create"], true, "{created}");
    assert_eq!(created["config"]["max_msgs"], 5);
    assert_eq!(created["config"]["metadata"]["Owner"], "x");
    assert!(created["config"]["metadata"].get("owner").is_none());

    let consumer = api(
        &nc,
        "$JS.API.CONSUMER.CREATE.GK.C1",
        json!({"Stream_Name": "GK", "Config": {"Durable_Name": "C1", "Ack_Policy": "explicit", "MAX_ACK_PENDING": 3}}),
    )
    .await;
    assert_eq!(consumer["config"]["durable_name"], "C1", "{consumer}");
    assert_eq!(consumer["config"]["max_ack_pending"], 3);

    publish_raw(&nc, "gk.a", &[]).await;
    let got = api(&nc, "$JS.API.STREAM.MSG.GET.GK", json!({"Seq": 1})).await;
    assert_eq!(got["message"]["subject"], "gk.a", "{got}");
    let names = api(&nc, "$JS.API.STREAM.NAMES", json!({"SUBJECT": "gk.a"})).await;
    assert_eq!(names["streams"], json!(["GK"]), "{names}");
    let purged = api(&nc, "$JS.API.STREAM.PURGE.GK", json!({"Filter": "gk.zz"})).await;
    assert_eq!(purged["success"], true, "{purged}");

    let bad = api(
        &nc,
        "$JS.API.STREAM.UPDATE.GK",
        json!({"name": "GK", "subjects": ["gk.>"], "Bogus": 1}),
    )
    .await;
    assert_eq!(bad["error"]["err_code"], 10025, "{bad}");
    assert_eq!(
        bad["error"]["description"],
        "invalid JSON: json: unknown field \"Bogus\""
    );
}

/// STREAM.INFO with `subjects_filter`: `total`/`offset`/`limit` describe the page of
/// subjects, and are all 0 when the filter matched none (nats-server's answer).
#[tokio::test]
async fn stream_info_subject_paging_is_zero_when_nothing_matches() {
    let server = TestServer::start(&[]);
    let (nc, js) = connect(&server).await;
    js.create_stream(orders()).await.expect("stream");
    let page = |v: &Value| (v["total"].clone(), v["offset"].clone(), v["limit"].clone());
    let empty = api(
        &nc,
        "$JS.API.STREAM.INFO.ORDERS",
        json!({"subjects_filter": "orders.>", "offset": 5}),
    )
    .await;
    assert_eq!(page(&empty), (json!(0), json!(0), json!(0)), "{empty}");
    publish_raw(&nc, "orders.a", &[]).await;
    publish_raw(&nc, "orders.b", &[]).await;
    let some = api(
        &nc,
        "$JS.API.STREAM.INFO.ORDERS",
        json!({"subjects_filter": "orders.>", "offset": 1}),
    )
    .await;
    assert_eq!(page(&some), (json!(2), json!(1), json!(100000)), "{some}");
    assert_eq!(some["state"]["subjects"], json!({"orders.b": 1}));
    let none = api(
        &nc,
        "$JS.API.STREAM.INFO.ORDERS",
        json!({"subjects_filter": "zz", "offset": 5}),
    )
    .await;
    assert_eq!(page(&none), (json!(0), json!(0), json!(0)), "{none}");
}

/// A DIRECT.GET that selects no message is answered with nats-server's `408` statuses
/// (`processDirectGetRequest`, `processDirectGetLastBySubjectRequest`): no body or `{}` is
/// `Empty Request`, a body that is not JSON `Malformed Request`, options that do not go
/// together or a body on a subject-appended get `Bad Request`. Passes against nats-server
/// 2.15.1 too (`JSSERVER_TEST_BINARY=nats-server`).
#[tokio::test]
async fn direct_get_statuses_are_nats_servers() {
    let server = TestServer::start(&[]);
    let (nc, js) = connect(&server).await;
    js.create_stream(stream::Config {
        allow_direct: true,
        ..orders()
    })
    .await
    .unwrap();
    js.publish("orders.a", Bytes::from_static(b"one"))
        .await
        .unwrap()
        .await
        .unwrap();
    for (case, subject, body, want) in [
        (
            "no body",
            "$JS.API.DIRECT.GET.ORDERS",
            "",
            "408 Empty Request",
        ),
        (
            "empty JSON",
            "$JS.API.DIRECT.GET.ORDERS",
            "{}",
            "408 Empty Request",
        ),
        (
            "not JSON",
            "$JS.API.DIRECT.GET.ORDERS",
            "{nope",
            "408 Malformed Request",
        ),
        (
            "seq with last_by_subj",
            "$JS.API.DIRECT.GET.ORDERS",
            r#"{"seq":1,"last_by_subj":"orders.a"}"#,
            "408 Bad Request",
        ),
        (
            "a body on a subject-appended get",
            "$JS.API.DIRECT.GET.ORDERS.orders.a",
            r#"{"seq":1}"#,
            "408 Bad Request",
        ),
    ] {
        let m = nc
            .request(subject.to_owned(), Bytes::from(body.to_owned()))
            .await
            .unwrap_or_else(|e| panic!("{case}: {e}"));
        let status = m.status.map(|s| s.as_u16());
        let text = m.description.clone().unwrap_or_default();
        assert_eq!(
            format!("{} {text}", status.unwrap_or(0)),
            want,
            "{case}: {:?}",
            m.headers
        );
        assert!(m.payload.is_empty(), "{case}: no payload");
    }
    // STREAM.MSG.GET takes no batch (only DIRECT.GET does): 10003, as nats-server's
    // jsMsgGetRequest.
    for body in [
        json!({"seq": 1, "batch": 2}),
        json!({"seq": 1, "max_bytes": 100}),
    ] {
        let r = api(&nc, "$JS.API.STREAM.MSG.GET.ORDERS", body.clone()).await;
        assert_eq!(
            (r["error"]["code"].as_u64(), r["error"]["err_code"].as_u64()),
            (Some(400), Some(10003)),
            "{body}: {r}"
        );
    }
    // The subject-appended get without a body still answers the message.
    let m = nc
        .request("$JS.API.DIRECT.GET.ORDERS.orders.a", Bytes::new())
        .await
        .unwrap();
    assert_eq!(&m.payload[..], b"one");
}
