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

/// Subscribes, publishes and receives one message: the connection works.
async fn round_trip(client: &jsclient::Client, subject: &str) {
    let mut sub = client.subscribe(subject).await.unwrap();
    client.flush().await.unwrap();
    client.publish(subject, "hello".into()).await.unwrap();
    let m = timeout(WAIT, sub.next()).await.unwrap().unwrap();
    assert_eq!(&m.payload[..], b"hello");
}

#[tokio::test]
async fn creds_against_nats_server_in_operator_mode() {
    let setup = common::operator::Setup::new();
    let Some(server) = TestServer::start_nats_server(
        "creds_against_nats_server_in_operator_mode",
        &setup.server_config(),
    ) else {
        return;
    };
    let creds = server.dir.path().join("user.creds");
    setup.write_creds(&creds);
    let client = ConnectOptions::new()
        .credentials_file(&creds)
        .unwrap()
        .connect(server.url())
        .await
        .unwrap();
    round_trip(&client, "orders.1").await;
    client.drain().await.unwrap();

    // The user's JWT with another user's seed: the signature does not match the JWT's user.
    let wrong = server.dir.path().join("wrong.creds");
    std::fs::write(
        &wrong,
        common::operator::Setup::creds_text(
            &setup.user_jwt,
            &nkeys::KeyPair::new_user().seed().unwrap(),
        ),
    )
    .unwrap();
    let err = ConnectOptions::new()
        .credentials_file(&wrong)
        .unwrap()
        .connect(server.url())
        .await
        .unwrap_err();
    assert!(
        matches!(err, jsclient::ConnectError::AuthorizationViolation),
        "{err:?}"
    );
    // A user JWT issued by an account the operator did not sign (the server has no JWT for
    // it): refused, so the server did check the JWT.
    let stranger = nkeys::KeyPair::new_account();
    let stray_jwt = common::operator::encode(
        &stranger,
        &setup.user.public_key(),
        "stray",
        serde_json::json!({"pub": {}, "sub": {}, "subs": -1, "data": -1, "payload": -1,
                           "type": "user", "version": 2}),
    );
    std::fs::write(
        &wrong,
        common::operator::Setup::creds_text(&stray_jwt, &setup.user.seed().unwrap()),
    )
    .unwrap();
    let err = ConnectOptions::new()
        .credentials_file(&wrong)
        .unwrap()
        .connect(server.url())
        .await
        .unwrap_err();
    assert!(
        matches!(err, jsclient::ConnectError::AuthorizationViolation),
        "{err:?}"
    );
    // No credentials at all.
    let err = jsclient::connect(server.url()).await.unwrap_err();
    assert!(
        matches!(err, jsclient::ConnectError::AuthorizationViolation),
        "{err:?}"
    );
}

/// A client with creds, against a server without operator mode (ours never has it): the JWT
/// is not looked at. Without users, it connects; with users, it needs a user's credentials
/// too (alone it gets `Authorization Violation`); with `no_auth_user`, it is that user. The
/// same against nats-server when there is one on PATH.
#[tokio::test]
async fn creds_where_the_server_has_no_jwt_auth() {
    let setup = common::operator::Setup::new();
    let configs = [
        "",
        "authorization { users: [ { user: alice, password: s3cret } ] }\n",
        "authorization { users: [ { user: alice, password: s3cret } ] }\nno_auth_user: alice\n",
    ];
    let with_nats = common::nats_server_on_path().is_some();
    for (i, conf) in configs.iter().enumerate() {
        let mut servers = vec![("ours", TestServer::start_with_config(conf))];
        if i == 0 || with_nats {
            let test = "creds_where_the_server_has_no_jwt_auth, against nats-server";
            if let Some(nats) = TestServer::start_nats_server(test, conf) {
                servers.push(("nats-server", nats));
            }
        }
        for (which, server) in &servers {
            let creds = server.dir.path().join("user.creds");
            setup.write_creds(&creds);
            let with_creds = || ConnectOptions::new().credentials_file(&creds).unwrap();
            let alone = with_creds().connect(server.url()).await;
            match i {
                0 | 2 => round_trip(&alone.unwrap(), "orders.1").await,
                _ => assert!(
                    matches!(alone, Err(jsclient::ConnectError::AuthorizationViolation)),
                    "{which} {conf:?}: {:?}",
                    alone.map(|_| ())
                ),
            }
            if i > 0 {
                let client = with_creds()
                    .user_and_password("alice", "s3cret")
                    .connect(server.url())
                    .await
                    .unwrap_or_else(|e| panic!("{which} {conf:?}: {e}"));
                round_trip(&client, "orders.2").await;
            }
        }
    }
}
