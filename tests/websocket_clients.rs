//! The WebSocket listener with the official clients, as a new user connects them: nats-py
//! (`nats.connect("ws://…")`, on aiohttp) and async-nats (its `websockets` feature, on
//! tokio-websockets), over `ws://` and over `wss://` with a test CA made here with rcgen:
//! publish/subscribe, request/reply, a JetStream publish and its PubAck, a pull consumer's
//! fetch and ack, and (nats-py) a key-value put and get.
//!
//! Every test runs the same against nats-server: `JSSERVER_TEST_BINARY=$(which nats-server)
//! cargo test -p jsserver --test websocket_clients`.

mod common;

use std::path::Path;
use std::time::Duration;

use common::pki::{tls_block, Pki};
use common::{ws, TestServer};
use futures_util::StreamExt;
use tokio::time::timeout;

/// Upper bound for something that should happen: a wait, not a timing assertion.
const ARRIVES: Duration = Duration::from_secs(10);

/// A server with `websocket { host: 127.0.0.1, port: -1, <block> }`; its WebSocket port.
fn start(block: &str) -> (TestServer, u16) {
    ws::start_listener(block, "")
}

/// Whether `python3` has nats-py and aiohttp (nats-py's WebSocket transport); says so when
/// not.
fn has_nats_py_with_aiohttp() -> bool {
    let ok = std::process::Command::new("python3")
        .args(["-c", "import nats, aiohttp"])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("skipped: python3 with nats-py and aiohttp is not installed");
    }
    ok
}

/// Runs `tests/scripts/ws_client.py URL [CA]`; it prints `OK` when everything held.
fn run_ws_client_py(url: &str, ca: Option<&Path>) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/scripts/ws_client.py");
    let mut cmd = std::process::Command::new("python3");
    cmd.arg(script).arg(url);
    if let Some(ca) = ca {
        cmd.arg(ca);
    }
    let out = cmd.output().expect("run python3");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.starts_with("OK"),
        "ws_client.py {url}\nstdout:\n{stdout}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn nats_py_over_ws() {
    if !has_nats_py_with_aiohttp() {
        return;
    }
    let (_server, port) = start("  no_tls: true\n");
    run_ws_client_py(&format!("ws://127.0.0.1:{port}"), None);
}

#[test]
fn nats_py_over_wss_with_a_test_ca() {
    if !has_nats_py_with_aiohttp() {
        return;
    }
    let pki = Pki::new();
    let (_server, port) = start(&tls_block(&pki.server(), ""));
    run_ws_client_py(&format!("wss://127.0.0.1:{port}"), Some(&pki.ca_file()));
}

/// What async-nats does over a WebSocket URL: publish/subscribe with headers, a request, a
/// JetStream publish with its PubAck and a pull consumer's fetch and ack.
async fn async_nats_round_trip(nc: async_nats::Client) {
    // Publish/subscribe, with headers, and a payload of many frames' worth.
    let mut sub = nc.subscribe("ws.greet").await.unwrap();
    nc.flush().await.unwrap();
    let mut headers = async_nats::HeaderMap::new();
    headers.insert("k", "v");
    nc.publish_with_headers("ws.greet", headers, "hello over websocket".into())
        .await
        .unwrap();
    let big: Vec<u8> = (0..900_000u32).map(|i| (i % 251) as u8).collect();
    nc.publish("ws.greet", big.clone().into()).await.unwrap();
    let msg = timeout(ARRIVES, sub.next()).await.unwrap().unwrap();
    assert_eq!(&msg.payload[..], b"hello over websocket");
    assert_eq!(
        msg.headers
            .as_ref()
            .and_then(|h| h.get("k"))
            .map(|v| v.as_str()),
        Some("v")
    );
    let msg = timeout(ARRIVES, sub.next()).await.unwrap().unwrap();
    assert_eq!(msg.payload.len(), big.len());
    assert!(
        msg.payload[..] == big[..],
        "the large payload arrives intact"
    );

    // Request/reply.
    let mut service = nc.subscribe("ws.echo").await.unwrap();
    let responder = nc.clone();
    tokio::spawn(async move {
        while let Some(req) = service.next().await {
            let mut answer = b"echo: ".to_vec();
            answer.extend_from_slice(&req.payload);
            responder
                .publish(req.reply.unwrap(), answer.into())
                .await
                .unwrap();
        }
    });
    nc.flush().await.unwrap();
    let reply = timeout(ARRIVES, nc.request("ws.echo", "ping".into()))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&reply.payload[..], b"echo: ping");

    // JetStream: publishes with their PubAcks, then a pull consumer fetches and acks.
    let js = async_nats::jetstream::new(nc.clone());
    let stream = js
        .create_stream(async_nats::jetstream::stream::Config {
            name: "WSORDERS".into(),
            subjects: vec!["wsorders.>".into()],
            ..Default::default()
        })
        .await
        .unwrap();
    for i in 1..=5u64 {
        let ack = js
            .publish(format!("wsorders.{i}"), format!("order {i}").into())
            .await
            .unwrap()
            .await
            .unwrap();
        assert_eq!((ack.stream.as_str(), ack.sequence), ("WSORDERS", i));
    }
    let consumer = stream
        .create_consumer(async_nats::jetstream::consumer::pull::Config {
            durable_name: Some("shipping".into()),
            ack_policy: async_nats::jetstream::consumer::AckPolicy::Explicit,
            ..Default::default()
        })
        .await
        .unwrap();
    let mut batch = consumer
        .fetch()
        .max_messages(5)
        .expires(Duration::from_secs(5))
        .messages()
        .await
        .unwrap();
    let mut seqs = Vec::new();
    while let Some(msg) = timeout(ARRIVES, batch.next()).await.unwrap() {
        let msg = msg.unwrap();
        seqs.push(msg.info().unwrap().stream_sequence);
        msg.double_ack().await.unwrap();
    }
    assert_eq!(seqs, [1, 2, 3, 4, 5]);
    let mut consumer = consumer;
    let info = consumer.info().await.unwrap();
    assert_eq!(info.ack_floor.stream_sequence, 5, "{info:?}");
    assert_eq!(info.num_ack_pending, 0, "{info:?}");
}

#[tokio::test]
async fn async_nats_over_ws() {
    let (_server, port) = start("  no_tls: true\n");
    let nc = async_nats::connect(format!("ws://127.0.0.1:{port}"))
        .await
        .unwrap();
    async_nats_round_trip(nc).await;
}

#[tokio::test]
async fn async_nats_over_wss_with_a_test_ca() {
    let pki = Pki::new();
    let (_server, port) = start(&tls_block(&pki.server(), ""));
    let nc = async_nats::ConnectOptions::new()
        .add_root_certificates(pki.ca_file())
        .connect(format!("wss://127.0.0.1:{port}"))
        .await
        .unwrap();
    async_nats_round_trip(nc).await;
    // Without the CA the server's certificate is not trusted.
    let err = async_nats::ConnectOptions::new()
        .connect(format!("wss://127.0.0.1:{port}"))
        .await
        .expect_err("an unknown CA");
    assert_eq!(err.kind(), async_nats::ConnectErrorKind::Io, "{err}");
}
