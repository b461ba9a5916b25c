//! Scripted fake-server tests: the client talks to the test over `tokio::io::duplex`, and the
//! test plays the server with `jsproto`'s `ServerCodec`, op by op.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use jsproto::wire::{ClientOp, Connect, Info, ServerCodec};
use tokio::io::{AsyncWriteExt, DuplexStream, ReadHalf, WriteHalf};
use tokio::sync::mpsc;
use tokio::time::timeout;
use tokio_util::codec::FramedRead;

use crate::connection::{self, Connector, Io};
use crate::{Client, ConnectOptions, RequestError, ServerAddr, State};

/// Generous bound for "this must happen": a wait for a condition, not a timing assertion.
const WAIT: Duration = Duration::from_secs(5);

/// The server end of one client connection.
pub(crate) struct Peer {
    reader: FramedRead<ReadHalf<DuplexStream>, ServerCodec>,
    writer: WriteHalf<DuplexStream>,
}

impl Peer {
    pub(crate) async fn recv(&mut self) -> ClientOp {
        timeout(WAIT, self.reader.next())
            .await
            .expect("client op in time")
            .expect("client still connected")
            .expect("decodable op")
    }

    pub(crate) async fn send(&mut self, bytes: &[u8]) {
        self.writer.write_all(bytes).await.expect("write to client");
    }

    /// INFO, expect CONNECT + PING, answer PONG; returns the CONNECT.
    pub(crate) async fn handshake(&mut self) -> Connect {
        let info = Info {
            server_id: "FAKE".into(),
            version: "2.11.0".into(),
            proto: 1,
            headers: true,
            max_payload: 1024 * 1024,
            ..Info::default()
        };
        let mut buf = bytes::BytesMut::new();
        jsproto::wire::encode_info(&mut buf, &info);
        self.send(&buf).await;
        let ClientOp::Connect(connect) = self.recv().await else {
            panic!("expected CONNECT")
        };
        assert_eq!(self.recv().await, ClientOp::Ping);
        self.send(b"PONG\r\n").await;
        *connect
    }
}

/// A connector whose every connection is handed to the test as a [`Peer`].
pub(crate) fn fake_connector() -> (Connector, mpsc::UnboundedReceiver<Peer>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let connector: Connector = Arc::new(move |_addr: ServerAddr| {
        let tx = tx.clone();
        Box::pin(async move {
            let (client, server) = tokio::io::duplex(1 << 20);
            let (r, w) = tokio::io::split(server);
            let peer = Peer {
                reader: FramedRead::new(r, ServerCodec::default()),
                writer: w,
            };
            tx.send(peer)
                .map_err(|_| std::io::Error::other("test gone"))?;
            Ok(Box::new(client) as Io)
        })
    });
    (connector, rx)
}

/// Connects a client to the fake server, playing the handshake; returns both ends.
pub(crate) async fn connected(
    opts: ConnectOptions,
) -> (Client, Peer, mpsc::UnboundedReceiver<Peer>) {
    let (connector, mut peers) = fake_connector();
    let servers = vec![ServerAddr::parse("nats://fake:4222").unwrap()];
    let connecting = tokio::spawn(connection::connect(opts, servers, connector));
    let mut peer = peers.recv().await.expect("a connection");
    peer.handshake().await;
    let client = connecting.await.unwrap().expect("connected");
    (client, peer, peers)
}

fn sub(subject: &str, queue: Option<&str>, sid: &str) -> ClientOp {
    ClientOp::Sub {
        subject: Bytes::copy_from_slice(subject.as_bytes()),
        queue_group: queue.map(|q| Bytes::copy_from_slice(q.as_bytes())),
        sid: Bytes::copy_from_slice(sid.as_bytes()),
    }
}

#[tokio::test]
async fn handshake_sends_the_connect_options_real_clients_send() {
    let (connector, mut peers) = fake_connector();
    let servers = vec![ServerAddr::parse("nats://u:p@fake:4222").unwrap()];
    let opts = ConnectOptions::new().name("probe");
    let connecting = tokio::spawn(connection::connect(opts, servers, connector));
    let mut peer = peers.recv().await.unwrap();
    let connect = peer.handshake().await;
    let client = connecting.await.unwrap().unwrap();
    assert_eq!(connect.verbose, Some(false));
    assert_eq!(connect.pedantic, Some(false));
    assert_eq!(connect.headers, Some(true));
    assert_eq!(connect.no_responders, Some(true));
    assert_eq!(connect.protocol, Some(1));
    assert_eq!(connect.name.as_deref(), Some("probe"));
    assert_eq!(connect.user.as_deref(), Some("u"));
    assert_eq!(connect.pass.as_deref(), Some("p"));
    assert_eq!(client.connection_state(), State::Connected);
    assert_eq!(client.server_info().version, "2.11.0");
}

#[tokio::test]
async fn authorization_violation_fails_the_connect() {
    let (connector, mut peers) = fake_connector();
    let servers = vec![ServerAddr::parse("fake").unwrap()];
    let connecting = tokio::spawn(connection::connect(
        ConnectOptions::new(),
        servers,
        connector,
    ));
    let mut peer = peers.recv().await.unwrap();
    peer.send(b"INFO {\"server_id\":\"X\",\"version\":\"2.11.0\",\"headers\":true,\"max_payload\":1048576,\"auth_required\":true} \r\n").await;
    let _connect = peer.recv().await;
    let _ping = peer.recv().await;
    peer.send(b"-ERR 'Authorization Violation'\r\n").await;
    let err = connecting.await.unwrap().unwrap_err();
    assert!(
        matches!(err, crate::ConnectError::AuthorizationViolation),
        "{err:?}"
    );
}

#[tokio::test]
async fn nkey_signs_the_info_nonce() {
    let key = nkeys::KeyPair::new_user();
    let (connector, mut peers) = fake_connector();
    let servers = vec![ServerAddr::parse("fake").unwrap()];
    let opts = ConnectOptions::new().nkey(key.seed().unwrap());
    assert!(
        !format!("{opts:?}").contains(&key.seed().unwrap()),
        "seed in Debug"
    );
    let connecting = tokio::spawn(connection::connect(opts, servers, connector));
    let mut peer = peers.recv().await.unwrap();
    peer.send(b"INFO {\"server_id\":\"X\",\"version\":\"2.11.0\",\"headers\":true,\"max_payload\":1048576,\"auth_required\":true,\"nonce\":\"q1w2e3r4t5y6u7i\"} \r\n").await;
    let ClientOp::Connect(connect) = peer.recv().await else {
        panic!("no CONNECT")
    };
    let _ping = peer.recv().await;
    peer.send(b"PONG\r\n").await;
    connecting.await.unwrap().unwrap();
    assert_eq!(connect.nkey, Some(key.public_key()));
    let sig = base64::Engine::decode(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD,
        connect.sig.expect("a signature"),
    )
    .unwrap();
    key.verify(b"q1w2e3r4t5y6u7i", &sig)
        .expect("the nonce, signed");
}

/// A creds file as nsc writes it, for `key`, with `jwt` as its JWT.
fn write_creds(dir: &std::path::Path, jwt: &str, seed: &str) -> std::path::PathBuf {
    let file = dir.join("user.creds");
    std::fs::write(
        &file,
        format!(
            "-----BEGIN NATS USER JWT-----\n{jwt}\n------END NATS USER JWT------\n\n\
             -----BEGIN USER NKEY SEED-----\n{seed}\n------END USER NKEY SEED------\n"
        ),
    )
    .unwrap();
    file
}

#[tokio::test]
async fn creds_send_the_jwt_and_sign_the_info_nonce() {
    let key = nkeys::KeyPair::new_user();
    let seed = key.seed().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = write_creds(dir.path(), "aaa.bbb.ccc", &seed);
    let opts = ConnectOptions::new().credentials_file(&file).unwrap();
    assert!(!format!("{opts:?}").contains(&seed), "seed in Debug");
    let servers = vec![ServerAddr::parse("fake").unwrap()];
    let (connector, mut peers) = fake_connector();
    let connecting = tokio::spawn(connection::connect(opts.clone(), servers, connector));
    let mut peer = peers.recv().await.unwrap();
    peer.send(b"INFO {\"server_id\":\"X\",\"version\":\"2.11.0\",\"headers\":true,\"max_payload\":1048576,\"auth_required\":true,\"nonce\":\"q1w2e3r4t5y6u7i\"} \r\n").await;
    let ClientOp::Connect(connect) = peer.recv().await else {
        panic!("no CONNECT")
    };
    let _ping = peer.recv().await;
    peer.send(b"PONG\r\n").await;
    connecting.await.unwrap().unwrap();
    assert_eq!(connect.jwt.as_deref(), Some("aaa.bbb.ccc"));
    assert_eq!(connect.nkey, None, "the JWT names the user");
    let sig = base64::Engine::decode(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD,
        connect.sig.expect("a signature"),
    )
    .unwrap();
    key.verify(b"q1w2e3r4t5y6u7i", &sig)
        .expect("the nonce, signed");

    // A server without a nonce: the empty nonce, signed (as nats.go and async-nats do).
    let servers = vec![ServerAddr::parse("fake").unwrap()];
    let (connector, mut peers) = fake_connector();
    let connecting = tokio::spawn(connection::connect(opts, servers, connector));
    let connect = peers.recv().await.unwrap().handshake().await;
    connecting.await.unwrap().unwrap();
    assert_eq!(connect.jwt.as_deref(), Some("aaa.bbb.ccc"));
    let sig = base64::Engine::decode(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD,
        connect.sig.expect("a signature"),
    )
    .unwrap();
    key.verify(b"", &sig).expect("the empty nonce, signed");
}

#[test]
fn bad_creds_files_name_the_file_and_the_fault() {
    let dir = tempfile::tempdir().unwrap();
    let account_seed = nkeys::KeyPair::new_account().seed().unwrap();
    let file = write_creds(dir.path(), "aaa.bbb.ccc", &account_seed);
    let err = ConnectOptions::new()
        .credentials_file(&file)
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        format!(
            "credentials file {}: the nkey seed is not a user seed: an account seed (SA...), \
             a user seed starts with SU",
            file.display()
        )
    );
    assert!(!err.contains(&account_seed[2..]));
    let missing = dir.path().join("missing.creds");
    let err = ConnectOptions::new()
        .credentials_file(&missing)
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with(&format!(
            "credentials file {}: cannot read it: ",
            missing.display()
        )),
        "{err}"
    );
}

#[tokio::test]
async fn creds_and_an_nkey_are_refused_together() {
    let dir = tempfile::tempdir().unwrap();
    let seed = nkeys::KeyPair::new_user().seed().unwrap();
    let file = write_creds(dir.path(), "aaa.bbb.ccc", &seed);
    let err = ConnectOptions::new()
        .nkey(seed.clone())
        .credentials_file(&file)
        .unwrap()
        .connect("127.0.0.1:1")
        .await
        .unwrap_err();
    assert!(
        matches!(&err, crate::ConnectError::InvalidNkey(m) if m.contains("both")),
        "{err:?}"
    );
}

#[tokio::test]
async fn a_bad_nkey_seed_fails_the_connect() {
    let (connector, mut peers) = fake_connector();
    let servers = vec![ServerAddr::parse("fake").unwrap()];
    let opts = ConnectOptions::new().nkey("SUNOTASEED");
    let connecting = tokio::spawn(connection::connect(opts, servers, connector));
    let mut peer = peers.recv().await.unwrap();
    peer.send(b"INFO {\"server_id\":\"X\",\"version\":\"2.11.0\",\"headers\":true,\"max_payload\":1048576,\"nonce\":\"abc\"} \r\n").await;
    let err = connecting.await.unwrap().unwrap_err();
    assert!(
        matches!(err, crate::ConnectError::InvalidNkey(_)),
        "{err:?}"
    );
}

#[test]
fn nkey_seed_files_as_the_nats_cli_reads_them() {
    let key = nkeys::KeyPair::new_user();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("user.nk");
    std::fs::write(&file, format!("# a user seed\n{}\n", key.seed().unwrap())).unwrap();
    let opts = ConnectOptions::new().nkey_from_file(&file).unwrap();
    assert_eq!(opts.nkey.unwrap().0, key.seed().unwrap());
    std::fs::write(&file, "nothing here\n").unwrap();
    assert!(matches!(
        ConnectOptions::new().nkey_from_file(&file),
        Err(crate::ConnectError::InvalidNkey(_))
    ));
    assert!(ConnectOptions::new()
        .nkey_from_file(dir.path().join("missing"))
        .is_err());
}

#[tokio::test]
async fn publish_subscribe_and_server_ping() {
    let (client, mut peer, _peers) = connected(ConnectOptions::new()).await;
    let mut s = client.subscribe("foo.*").await.unwrap();
    assert_eq!(peer.recv().await, sub("foo.*", None, "1"));
    client.publish("foo.bar", "hi".into()).await.unwrap();
    let ClientOp::Pub(p) = peer.recv().await else {
        panic!()
    };
    assert_eq!(
        (&p.subject[..], &p.payload[..]),
        (&b"foo.bar"[..], &b"hi"[..])
    );
    peer.send(b"PING\r\nHMSG foo.bar 1 12 14\r\nNATS/1.0\r\n\r\nhi\r\n")
        .await;
    assert_eq!(peer.recv().await, ClientOp::Pong);
    let m = timeout(WAIT, s.next()).await.unwrap().unwrap();
    assert_eq!(m.subject, "foo.bar");
    assert_eq!(&m.payload[..], b"hi");
    assert!(m.headers.is_some());
    assert!(client.publish("bad subject", Bytes::new()).await.is_err());
}

#[tokio::test]
async fn reconnect_resubscribes_and_sends_buffered_publishes() {
    let opts = ConnectOptions::new().reconnect_delay(Duration::from_millis(10));
    let (client, mut peer, mut peers) = connected(opts).await;
    let _a = client.subscribe("a").await.unwrap();
    let _b = client.queue_subscribe("b", "workers").await.unwrap();
    let mut c = client.subscribe("c").await.unwrap();
    c.unsubscribe_after(5).await.unwrap();
    assert_eq!(peer.recv().await, sub("a", None, "1"));
    assert_eq!(peer.recv().await, sub("b", Some("workers"), "2"));
    assert_eq!(peer.recv().await, sub("c", None, "3"));
    assert!(matches!(
        peer.recv().await,
        ClientOp::Unsub {
            max_msgs: Some(5),
            ..
        }
    ));
    peer.send(b"MSG c 3 1\r\n1\r\nMSG c 3 1\r\n2\r\n").await;
    c.next().await.unwrap();
    c.next().await.unwrap();

    let mut state = client.state_watch();
    drop(peer); // the server goes away
    timeout(WAIT, state.wait_for(|s| *s == State::Disconnected))
        .await
        .unwrap()
        .unwrap();
    client.publish("during.outage", "x".into()).await.unwrap();
    let flushed = tokio::spawn({
        let client = client.clone();
        async move { client.flush().await }
    });

    let mut peer = timeout(WAIT, peers.recv()).await.unwrap().unwrap();
    peer.handshake().await;
    assert_eq!(peer.recv().await, sub("a", None, "1"));
    assert_eq!(peer.recv().await, sub("b", Some("workers"), "2"));
    assert_eq!(peer.recv().await, sub("c", None, "3"));
    assert!(matches!(
        peer.recv().await,
        ClientOp::Unsub {
            max_msgs: Some(3),
            ..
        }
    ));
    let ClientOp::Pub(p) = peer.recv().await else {
        panic!("buffered publish")
    };
    assert_eq!(&p.subject[..], b"during.outage");
    assert_eq!(peer.recv().await, ClientOp::Ping);
    peer.send(b"PONG\r\n").await;
    timeout(WAIT, flushed).await.unwrap().unwrap().unwrap();
    assert_eq!(client.connection_state(), State::Connected);
}

#[tokio::test]
async fn unanswered_pings_mean_a_stale_connection() {
    let opts = ConnectOptions::new()
        .ping_interval(Duration::from_millis(50))
        .max_pings_outstanding(2)
        .reconnect_delay(Duration::from_millis(10));
    let (_client, mut peer, mut peers) = connected(opts).await;
    assert_eq!(peer.recv().await, ClientOp::Ping);
    assert_eq!(peer.recv().await, ClientOp::Ping);
    // No PONGs: on the third tick the client gives up on this connection and reconnects.
    let mut next = timeout(WAIT, peers.recv()).await.unwrap().unwrap();
    next.handshake().await;
}

#[tokio::test]
async fn request_reply_and_no_responders() {
    let (client, mut peer, _peers) = connected(ConnectOptions::new()).await;
    let req = tokio::spawn({
        let client = client.clone();
        async move { client.request("svc", "q".into()).await }
    });
    let ClientOp::Sub { subject, sid, .. } = peer.recv().await else {
        panic!("mux SUB")
    };
    assert!(subject.ends_with(b".*"));
    assert_eq!(&sid[..], b"0");
    let ClientOp::Pub(p) = peer.recv().await else {
        panic!("PUB")
    };
    let reply = String::from_utf8(p.reply.unwrap().to_vec()).unwrap();
    peer.send(format!("MSG {reply} 0 3\r\nans\r\n").as_bytes())
        .await;
    assert_eq!(&req.await.unwrap().unwrap().payload[..], b"ans");

    let req = tokio::spawn({
        let client = client.clone();
        async move { client.request("nobody", Bytes::new()).await }
    });
    let ClientOp::Pub(p) = peer.recv().await else {
        panic!("PUB")
    };
    let reply = String::from_utf8(p.reply.unwrap().to_vec()).unwrap();
    peer.send(format!("HMSG {reply} 0 16 16\r\nNATS/1.0 503\r\n\r\n\r\n").as_bytes())
        .await;
    assert_eq!(req.await.unwrap().unwrap_err(), RequestError::NoResponders);
}

#[tokio::test]
async fn drain_unsubscribes_delivers_what_arrived_and_closes() {
    let (client, mut peer, _peers) = connected(ConnectOptions::new()).await;
    let mut s = client.subscribe("d").await.unwrap();
    assert_eq!(peer.recv().await, sub("d", None, "1"));
    let draining = tokio::spawn({
        let client = client.clone();
        async move { client.drain().await }
    });
    assert!(matches!(
        peer.recv().await,
        ClientOp::Unsub { max_msgs: None, .. }
    ));
    assert_eq!(peer.recv().await, ClientOp::Ping);
    peer.send(b"MSG d 1 4\r\nlast\r\nPONG\r\n").await;
    timeout(WAIT, draining).await.unwrap().unwrap().unwrap();
    assert_eq!(&s.next().await.unwrap().payload[..], b"last");
    assert!(s.next().await.is_none());
    assert_eq!(client.connection_state(), State::Closed);
    assert!(client.publish("x", Bytes::new()).await.is_err());
}

/// An `HMSG` whose header block is `headers` (without the final blank line).
fn hmsg(subject: &str, sid: &str, headers: &str, payload: &str) -> Vec<u8> {
    let block = format!("{headers}\r\n\r\n");
    format!(
        "HMSG {subject} {sid} {} {}\r\n{block}{payload}\r\n",
        block.len(),
        block.len() + payload.len()
    )
    .into_bytes()
}

/// Expects the pull request of a continuous stream; returns its reply inbox and JSON body.
async fn expect_pull(peer: &mut Peer) -> (String, serde_json::Value) {
    let ClientOp::Pub(p) = peer.recv().await else {
        panic!("expected a pull request (PUB)")
    };
    assert_eq!(&p.subject[..], b"$JS.API.CONSUMER.MSG.NEXT.S.C");
    let reply = String::from_utf8(p.reply.expect("pull has a reply inbox").to_vec()).unwrap();
    (reply, serde_json::from_slice(&p.payload).unwrap())
}

fn fake_consumer(client: Client) -> crate::jetstream::PullConsumer {
    let info = crate::jetstream::consumer::Info {
        stream_name: "S".into(),
        name: "C".into(),
        ..Default::default()
    };
    crate::jetstream::PullConsumer::new(crate::jetstream::new(client), info)
}

#[tokio::test(start_paused = true)]
async fn pull_stream_reports_missed_heartbeats_repulls_on_408_and_ends_on_409_deleted() {
    use crate::jetstream::consumer::ConsumerError;
    let hb = Duration::from_secs(1);
    let (client, mut peer, _peers) = connected(ConnectOptions::new()).await;
    let consumer = fake_consumer(client);
    let mut msgs = consumer
        .stream()
        .max_messages_per_batch(10)
        .expires(Duration::from_secs(30))
        .heartbeat(hb)
        .messages()
        .await
        .unwrap();
    let ClientOp::Sub { subject, sid, .. } = peer.recv().await else {
        panic!("inbox SUB")
    };
    let inbox = String::from_utf8(subject.to_vec()).unwrap();
    let sid = String::from_utf8(sid.to_vec()).unwrap();
    let (reply, body) = expect_pull(&mut peer).await;
    assert_eq!(reply, inbox);
    assert_eq!(body["batch"], 10);
    assert_eq!(body["idle_heartbeat"], 1_000_000_000);
    assert_eq!(body["expires"], 30_000_000_000_i64);

    // The server is alive for a while: heartbeats every interval, no error.
    let heartbeat = hmsg(&inbox, &sid, "NATS/1.0 100 Idle Heartbeat", "");
    for _ in 0..3 {
        tokio::time::sleep(hb).await;
        peer.send(&heartbeat).await;
    }
    // Then it goes silent: the error comes two intervals after the last heartbeat, not before.
    let silent_since = tokio::time::Instant::now();
    assert!(
        timeout(hb * 19 / 10, msgs.next()).await.is_err(),
        "no error while heartbeats are due"
    );
    let item = timeout(hb * 3, msgs.next()).await.expect("error in time");
    assert_eq!(item.unwrap().unwrap_err(), ConsumerError::MissingHeartbeats);
    let waited = silent_since.elapsed();
    assert!(
        waited >= hb * 2 && waited <= hb * 21 / 10,
        "reported after {waited:?}"
    );
    // ... and pulls afresh.
    let (_, body) = expect_pull(&mut peer).await;
    assert_eq!(body["batch"], 10);

    // One message, then the pull expires with the other 9 undelivered: pull again, for 10.
    peer.send(format!("MSG orders.1 {sid} $JS.ACK.S.C.1.1.1.0.0 2\r\nm1\r\n").as_bytes())
        .await;
    let m = timeout(WAIT, msgs.next()).await.unwrap().unwrap().unwrap();
    assert_eq!(&m.payload[..], b"m1");
    peer.send(&hmsg(
        &inbox,
        &sid,
        "NATS/1.0 408 Request Timeout\r\nNats-Pending-Messages: 9\r\nNats-Pending-Bytes: 0",
        "",
    ))
    .await;
    let (_, body) = expect_pull(&mut peer).await;
    assert_eq!(body["batch"], 10);

    // The consumer is deleted: the stream reports it and ends.
    peer.send(&hmsg(&inbox, &sid, "NATS/1.0 409 Consumer Deleted", ""))
        .await;
    let item = timeout(WAIT, msgs.next()).await.unwrap();
    assert_eq!(item.unwrap().unwrap_err(), ConsumerError::ConsumerDeleted);
    assert!(timeout(WAIT, msgs.next()).await.unwrap().is_none());
}

#[tokio::test(start_paused = true)]
async fn reconnect_backs_off_exponentially_up_to_the_cap_and_resubscribes() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use tokio::time::Instant;

    let base = Duration::from_millis(100);
    let cap = Duration::from_millis(400);
    let accepting = Arc::new(AtomicBool::new(true));
    let (attempt_tx, mut attempts) = mpsc::unbounded_channel::<Instant>();
    let (peer_tx, mut peers) = mpsc::unbounded_channel::<Peer>();
    let connector: Connector = Arc::new({
        let accepting = Arc::clone(&accepting);
        move |_addr: ServerAddr| {
            let (accepting, attempt_tx, peer_tx) =
                (Arc::clone(&accepting), attempt_tx.clone(), peer_tx.clone());
            Box::pin(async move {
                let _ = attempt_tx.send(Instant::now());
                if !accepting.load(Ordering::SeqCst) {
                    return Err(std::io::ErrorKind::ConnectionRefused.into());
                }
                let (client, server) = tokio::io::duplex(1 << 20);
                let (r, w) = tokio::io::split(server);
                let peer = Peer {
                    reader: FramedRead::new(r, ServerCodec::default()),
                    writer: w,
                };
                peer_tx
                    .send(peer)
                    .map_err(|_| std::io::Error::other("test gone"))?;
                Ok(Box::new(client) as Io)
            })
        }
    });
    let opts = ConnectOptions::new()
        .reconnect_delay(base)
        .max_reconnect_delay(cap);
    let servers = vec![ServerAddr::parse("nats://fake:4222").unwrap()];
    let connecting = tokio::spawn(connection::connect(opts, servers, connector));
    let mut peer = peers.recv().await.unwrap();
    peer.handshake().await;
    let client = connecting.await.unwrap().unwrap();
    attempts.recv().await.unwrap(); // the initial connect
    let mut s = client.subscribe("events.>").await.unwrap();
    assert_eq!(peer.recv().await, sub("events.>", None, "1"));

    // The server goes away and refuses connections for five attempts.
    accepting.store(false, Ordering::SeqCst);
    drop(peer);
    let mut times = Vec::new();
    for _ in 0..5 {
        times.push(timeout(WAIT, attempts.recv()).await.unwrap().unwrap());
    }
    accepting.store(true, Ordering::SeqCst);
    assert_eq!(client.connection_state(), State::Disconnected);
    let gaps: Vec<Duration> = times.windows(2).map(|w| w[1] - w[0]).collect();
    // Doubling from `reconnect_delay`, capped at `max_reconnect_delay`, plus at most 10 % jitter.
    let expected = [base, base * 2, cap, cap];
    for (gap, want) in gaps.iter().zip(expected) {
        assert!(
            *gap >= want && *gap <= want * 11 / 10,
            "gaps {gaps:?}, expected about {expected:?}"
        );
    }

    // The sixth attempt finds the server back: same subscription, same sid, messages flow.
    let retry_at = timeout(WAIT, attempts.recv()).await.unwrap().unwrap();
    let gap = retry_at - times[4];
    assert!(gap >= cap && gap <= cap * 11 / 10, "{gap:?}");
    let mut peer = timeout(WAIT, peers.recv()).await.unwrap().unwrap();
    peer.handshake().await;
    assert_eq!(peer.recv().await, sub("events.>", None, "1"));
    assert_eq!(peer.recv().await, ClientOp::Ping);
    peer.send(b"PONG\r\nMSG events.x 1 5\r\nagain\r\n").await;
    let m = timeout(WAIT, s.next()).await.unwrap().unwrap();
    assert_eq!(&m.payload[..], b"again");
    assert_eq!(client.connection_state(), State::Connected);
}

#[test]
fn tls_urls_ask_for_tls() {
    let a = ServerAddr::parse("tls://u:p@example.com:4443").unwrap();
    assert!(a.tls);
    assert_eq!((a.host.as_str(), a.port), ("example.com", 4443));
    assert!(!ServerAddr::parse("nats://example.com").unwrap().tls);
    assert!(!ServerAddr::parse("example.com").unwrap().tls);
    assert!(ServerAddr::parse("wss://example.com").is_err());
}

#[tokio::test]
async fn a_client_asking_for_tls_refuses_a_server_that_does_not_offer_it() {
    let (connector, mut peers) = fake_connector();
    let servers = vec![ServerAddr::parse("tls://fake:4222").unwrap()];
    let connecting = tokio::spawn(connection::connect(
        ConnectOptions::new(),
        servers,
        connector,
    ));
    let mut peer = peers.recv().await.expect("a connection");
    let info = Info {
        server_id: "FAKE".into(),
        proto: 1,
        headers: true,
        ..Info::default()
    };
    let mut buf = bytes::BytesMut::new();
    jsproto::wire::encode_info(&mut buf, &info);
    peer.send(&buf).await;
    let err = connecting.await.unwrap().expect_err("plain server");
    assert!(matches!(err, crate::ConnectError::Tls(_)), "{err}");
}
