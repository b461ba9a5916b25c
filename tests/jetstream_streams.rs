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
    let messages = |nc: async_nats::Client| async move {
        let info = api(&nc, "$JS.API.STREAM.INFO.ORDERS", Value::Null).await;
        info["state"]["messages"].as_u64().expect("messages")
    };
    // Waits for conditions (the TTLs run out), not timing assertions.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    while messages(nc.clone()).await != 3 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the 1s message never expired"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let get = |seq: u64| {
        let nc = nc.clone();
        async move { api(&nc, "$JS.API.STREAM.MSG.GET.ORDERS", json!({ "seq": seq })).await }
    };
    assert_eq!(get(1).await["error"]["err_code"], 10037);
    assert!(get(2).await["message"].is_object());

    // The 3 s message is still scheduled after a kill -9 and restart.
    let store = server.dir.path().join("store");
    server.kill9();
    let server = TestServer::restart(server, &["-sd", store.to_str().unwrap()]);
    let (nc, _js) = connect(&server).await;
    while messages(nc.clone()).await != 2 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the 3s message never expired"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let get = |seq: u64| {
        let nc = nc.clone();
        async move { api(&nc, "$JS.API.STREAM.MSG.GET.ORDERS", json!({ "seq": seq })).await }
    };
    assert_eq!(get(4).await["error"]["err_code"], 10037);
    assert!(get(2).await["message"].is_object(), "no TTL: kept");
    assert!(get(3).await["message"].is_object(), "never: kept");
}
