//! Core NATS through jsclient against a real server (see `common` for which binary).

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::TestServer;
use futures_util::StreamExt;
use jsclient::{ConnectOptions, Headers, RequestError, State};
use tokio::time::timeout;

const WAIT: Duration = Duration::from_secs(10);

#[tokio::test]
async fn publish_subscribe_with_headers() {
    let server = TestServer::start();
    let client = jsclient::connect(server.url()).await.unwrap();
    let mut sub = client.subscribe("greet.*").await.unwrap();
    client.flush().await.unwrap();
    let mut headers = Headers::new();
    headers.insert("X-Id", "7").unwrap();
    client
        .publish_with_headers("greet.joe", headers, "hello".into())
        .await
        .unwrap();
    client.publish("greet.ann", "hi".into()).await.unwrap();
    let m = timeout(WAIT, sub.next()).await.unwrap().unwrap();
    assert_eq!(m.subject, "greet.joe");
    assert_eq!(&m.payload[..], b"hello");
    assert_eq!(m.headers.unwrap().get("X-Id"), Some("7"));
    let m = timeout(WAIT, sub.next()).await.unwrap().unwrap();
    assert_eq!(&m.payload[..], b"hi");
    assert!(m.headers.is_none());
}

#[tokio::test]
async fn queue_group_delivers_each_message_once() {
    let server = TestServer::start();
    let client = jsclient::connect(server.url()).await.unwrap();
    let mut a = client.queue_subscribe("work", "q").await.unwrap();
    let mut b = client.queue_subscribe("work", "q").await.unwrap();
    client.flush().await.unwrap();
    for i in 0..20 {
        client.publish("work", i.to_string().into()).await.unwrap();
    }
    client.flush().await.unwrap();
    let mut got = 0;
    while let Ok(Some(_)) = timeout(Duration::from_millis(300), a.next()).await {
        got += 1;
    }
    while let Ok(Some(_)) = timeout(Duration::from_millis(300), b.next()).await {
        got += 1;
    }
    assert_eq!(got, 20);
}

#[tokio::test]
async fn request_reply_and_no_responders() {
    let server = TestServer::start();
    let client = jsclient::connect(server.url()).await.unwrap();
    let mut svc = client.subscribe("svc.echo").await.unwrap();
    client.flush().await.unwrap();
    let responder = client.clone();
    tokio::spawn(async move {
        while let Some(m) = svc.next().await {
            let reply = m.reply.unwrap();
            responder.publish(reply, m.payload).await.unwrap();
        }
    });
    let r = client.request("svc.echo", "ping".into()).await.unwrap();
    assert_eq!(&r.payload[..], b"ping");
    let err = client
        .request("nobody.home", Bytes::new())
        .await
        .unwrap_err();
    assert_eq!(err, RequestError::NoResponders);
}

#[tokio::test]
async fn unsubscribe_after_and_drain() {
    let server = TestServer::start();
    let client = jsclient::connect(server.url()).await.unwrap();
    let mut sub = client.subscribe("n").await.unwrap();
    sub.unsubscribe_after(2).await.unwrap();
    client.flush().await.unwrap();
    for _ in 0..3 {
        client.publish("n", Bytes::new()).await.unwrap();
    }
    assert!(timeout(WAIT, sub.next()).await.unwrap().is_some());
    assert!(timeout(WAIT, sub.next()).await.unwrap().is_some());
    assert!(timeout(WAIT, sub.next()).await.unwrap().is_none());
    let mut other = client.subscribe("m").await.unwrap();
    client.publish("m", "last".into()).await.unwrap();
    client.drain().await.unwrap();
    assert_eq!(
        &timeout(WAIT, other.next()).await.unwrap().unwrap().payload[..],
        b"last"
    );
    assert!(timeout(WAIT, other.next()).await.unwrap().is_none());
    assert_eq!(client.connection_state(), State::Closed);
}

#[tokio::test]
async fn reconnects_after_server_restart_and_resubscribes() {
    let server = TestServer::start();
    let client = ConnectOptions::new()
        .reconnect_delay(Duration::from_millis(50))
        .max_reconnect_delay(Duration::from_millis(200))
        .connect(server.url())
        .await
        .unwrap();
    let mut sub = client.subscribe("after.restart").await.unwrap();
    client.flush().await.unwrap();
    let mut state = client.state_watch();
    let mut server = server;
    server.kill();
    timeout(WAIT, state.wait_for(|s| *s == State::Disconnected))
        .await
        .unwrap()
        .unwrap();
    // Published while disconnected: buffered, sent after the resubscription.
    client
        .publish("after.restart", "buffered".into())
        .await
        .unwrap();
    let server = server.restart();
    timeout(WAIT, state.wait_for(|s| *s == State::Connected))
        .await
        .unwrap()
        .unwrap();
    let m = timeout(WAIT, sub.next()).await.unwrap().unwrap();
    assert_eq!(&m.payload[..], b"buffered");
    client
        .publish("after.restart", "live".into())
        .await
        .unwrap();
    let m = timeout(WAIT, sub.next()).await.unwrap().unwrap();
    assert_eq!(&m.payload[..], b"live");
    drop(server);
}
