//! Core NATS behaviour through a real client (async-nats) against the real `jsserver` binary.

mod common;

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use async_nats::header::HeaderMap;
use bytes::Bytes;
use common::TestServer;
use futures_util::StreamExt;
use tokio::time::timeout;

/// Upper bound for a message that should arrive: a wait, not a timing assertion.
const ARRIVES: Duration = Duration::from_secs(10);

async fn client(server: &TestServer) -> async_nats::Client {
    async_nats::connect(server.url()).await.expect("connect")
}

async fn next(sub: &mut async_nats::Subscriber) -> async_nats::Message {
    timeout(ARRIVES, sub.next())
        .await
        .expect("message in time")
        .expect("subscription open")
}

/// After a flush round trip nothing more is queued for `sub`.
async fn assert_nothing_more(nc: &async_nats::Client, sub: &mut async_nats::Subscriber) {
    nc.flush().await.expect("flush");
    // The publisher's flush is a PING/PONG on its own connection; one more on the subscriber's
    // connection (same client here) proves the server has routed everything before it.
    nc.flush().await.expect("flush");
    let extra = timeout(Duration::from_millis(200), sub.next()).await;
    assert!(extra.is_err(), "unexpected extra message: {extra:?}");
}

#[tokio::test]
async fn info_advertises_what_clients_need() {
    let server = TestServer::start(&[]);
    let nc = client(&server).await;
    let info = nc.server_info();
    assert!(info.headers, "headers must be true");
    assert_eq!(info.max_payload, 1024 * 1024);
    assert_eq!(info.proto, 1);
    assert_eq!(info.port, server.port);
    let mut parts = info
        .version
        .split('.')
        .map(|p| p.parse::<u32>().expect("numeric version"));
    let (major, minor) = (parts.next().unwrap(), parts.next().unwrap());
    assert!(
        major == 2 && minor >= 11,
        "version {} must be 2.11 or later",
        info.version
    );
    assert_eq!(info.server_id.len(), 56);
    assert!(info.client_id > 0);
}

#[tokio::test]
async fn pub_sub_delivers_payload_and_subject() {
    let server = TestServer::start(&[]);
    let nc = client(&server).await;
    let mut sub = nc.subscribe("orders.new").await.unwrap();
    nc.flush().await.unwrap();
    let publisher = client(&server).await;
    publisher
        .publish("orders.new", Bytes::from_static(b"order-1"))
        .await
        .unwrap();
    publisher
        .publish("orders.other", Bytes::from_static(b"not for us"))
        .await
        .unwrap();
    publisher.publish("orders.new", Bytes::new()).await.unwrap();
    publisher.flush().await.unwrap();
    let m = next(&mut sub).await;
    assert_eq!(m.subject.as_str(), "orders.new");
    assert_eq!(&m.payload[..], b"order-1");
    let m = next(&mut sub).await;
    assert!(m.payload.is_empty(), "empty payload delivered as empty");
    assert_nothing_more(&nc, &mut sub).await;
}

#[tokio::test]
async fn wildcards_match_one_token_and_the_tail() {
    let server = TestServer::start(&[]);
    let nc = client(&server).await;
    let mut star = nc.subscribe("orders.*").await.unwrap();
    let mut tail = nc.subscribe("orders.>").await.unwrap();
    let mut all = nc.subscribe(">").await.unwrap();
    nc.flush().await.unwrap();
    for subject in ["orders", "orders.new", "orders.new.eu"] {
        nc.publish(subject, Bytes::from(subject)).await.unwrap();
    }
    nc.flush().await.unwrap();
    assert_eq!(next(&mut star).await.subject.as_str(), "orders.new");
    assert_nothing_more(&nc, &mut star).await;
    assert_eq!(next(&mut tail).await.subject.as_str(), "orders.new");
    assert_eq!(next(&mut tail).await.subject.as_str(), "orders.new.eu");
    assert_nothing_more(&nc, &mut tail).await;
    let got: Vec<_> = [
        next(&mut all).await,
        next(&mut all).await,
        next(&mut all).await,
    ]
    .iter()
    .map(|m| m.subject.to_string())
    .collect();
    assert_eq!(got, ["orders", "orders.new", "orders.new.eu"]);
}

#[tokio::test]
async fn queue_group_delivers_each_message_once_and_splits_fairly() {
    let server = TestServer::start(&[]);
    let mut workers = Vec::new();
    for _ in 0..3 {
        let nc = client(&server).await;
        let sub = nc
            .queue_subscribe("orders.new", "shipping".into())
            .await
            .unwrap();
        nc.flush().await.unwrap();
        workers.push((nc, sub));
    }
    // A plain subscriber next to the group gets every message.
    let watcher_nc = client(&server).await;
    let mut watcher = watcher_nc.subscribe("orders.*").await.unwrap();
    watcher_nc.flush().await.unwrap();

    let publisher = client(&server).await;
    const N: usize = 300;
    for i in 0..N {
        publisher
            .publish("orders.new", Bytes::from(i.to_string()))
            .await
            .unwrap();
    }
    publisher.flush().await.unwrap();

    // Once the plain subscriber has all N, every group copy has been queued too (one routing
    // step hands a message to both); a flush on each worker's connection then proves its
    // copies were read before the PONG.
    for _ in 0..N {
        next(&mut watcher).await;
    }
    let mut seen = HashSet::new();
    let mut per_worker = Vec::new();
    let mut total = 0;
    for (nc, sub) in &mut workers {
        nc.flush().await.unwrap();
        let mut count = 0;
        while let Ok(Some(m)) = timeout(Duration::from_millis(300), sub.next()).await {
            assert!(
                seen.insert(m.payload.clone()),
                "message delivered twice in the group"
            );
            count += 1;
        }
        per_worker.push(count);
        total += count;
    }
    assert_eq!(
        total, N,
        "every message to exactly one member: {per_worker:?}"
    );
    for count in &per_worker {
        // Random member choice: each of three members gets a share well above zero.
        assert!(*count >= N / 10, "unfair split {per_worker:?}");
    }
}

#[tokio::test]
async fn request_reply_round_trips() {
    let server = TestServer::start(&[]);
    let responder = client(&server).await;
    let mut service = responder.subscribe("svc.echo").await.unwrap();
    responder.flush().await.unwrap();
    tokio::spawn(async move {
        while let Some(m) = service.next().await {
            let reply = m.reply.expect("request has a reply subject");
            let mut body = b"echo: ".to_vec();
            body.extend_from_slice(&m.payload);
            responder.publish(reply, body.into()).await.unwrap();
            responder.flush().await.unwrap();
        }
    });
    let requester = client(&server).await;
    let resp = timeout(
        ARRIVES,
        requester.request("svc.echo", Bytes::from_static(b"hi")),
    )
    .await
    .expect("in time")
    .expect("reply");
    assert_eq!(&resp.payload[..], b"echo: hi");
}

#[tokio::test]
async fn request_without_responders_fails_fast_with_503() {
    let server = TestServer::start(&[]);
    let nc = client(&server).await;
    let err = timeout(ARRIVES, nc.request("nobody.home", Bytes::new()))
        .await
        .expect("answered before the client's own timeout")
        .expect_err("no responders");
    assert_eq!(err.kind(), async_nats::RequestErrorKind::NoResponders);
}

#[tokio::test]
async fn headers_round_trip_with_repeated_keys_and_case() {
    let server = TestServer::start(&[]);
    let nc = client(&server).await;
    let mut sub = nc.subscribe("h.test").await.unwrap();
    nc.flush().await.unwrap();
    let mut headers = HeaderMap::new();
    headers.insert("Order-Id", "42");
    headers.append("X-Tag", "a");
    headers.append("X-Tag", "b");
    nc.publish_with_headers("h.test", headers, Bytes::from_static(b"body"))
        .await
        .unwrap();
    nc.flush().await.unwrap();
    let m = next(&mut sub).await;
    let got = m.headers.expect("headers delivered");
    assert_eq!(got.get("Order-Id").map(|v| v.as_str()), Some("42"));
    let tags: Vec<_> = got
        .get_all("X-Tag")
        .map(|v| v.as_str().to_owned())
        .collect();
    assert_eq!(tags, ["a", "b"]);
    assert_eq!(&m.payload[..], b"body");
}

#[tokio::test]
async fn unsubscribe_after_n_stops_delivery() {
    let server = TestServer::start(&[]);
    let nc = client(&server).await;
    let mut sub = nc.subscribe("limited").await.unwrap();
    sub.unsubscribe_after(2).await.unwrap();
    nc.flush().await.unwrap();
    for i in 0..5 {
        nc.publish("limited", Bytes::from(format!("{i}")))
            .await
            .unwrap();
    }
    nc.flush().await.unwrap();
    assert_eq!(&next(&mut sub).await.payload[..], b"0");
    assert_eq!(&next(&mut sub).await.payload[..], b"1");
    // The client ends the subscription after 2 too; the server must not have sent more.
    let rest = timeout(ARRIVES, sub.next())
        .await
        .expect("subscription ends");
    assert!(rest.is_none(), "got a third message: {rest:?}");
}

#[tokio::test]
async fn max_payload_from_the_config_reaches_clients() {
    let server = TestServer::start_with_config("max_payload: 2KB\n", &[]);
    let nc = client(&server).await;
    assert_eq!(nc.server_info().max_payload, 2048);
    let err = nc.publish("big", Bytes::from(vec![0u8; 4096])).await;
    assert!(
        err.is_err(),
        "client refuses a publish over the server's max_payload"
    );
}

#[tokio::test]
async fn many_subjects_route_to_their_own_subscribers() {
    let server = TestServer::start(&[]);
    let nc = client(&server).await;
    let mut subs = HashMap::new();
    for i in 0..50 {
        subs.insert(i, nc.subscribe(format!("orders.{i}")).await.unwrap());
    }
    nc.flush().await.unwrap();
    for i in 0..50 {
        nc.publish(format!("orders.{i}"), Bytes::from(i.to_string()))
            .await
            .unwrap();
    }
    nc.flush().await.unwrap();
    for (i, sub) in &mut subs {
        let m = next(sub).await;
        assert_eq!(m.payload, Bytes::from(i.to_string()));
    }
}
