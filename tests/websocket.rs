//! The WebSocket listener (`websocket { }`): the NATS protocol in binary frames, as browser
//! clients (nats.js) speak it, driven with tokio-tungstenite (and raw bytes where a client
//! library would not misbehave): INFO, CONNECT/PUB/SUB/MSG/PING, a JetStream publish and its
//! PubAck, messages crossing between WebSocket and TCP clients, authentication, text frames,
//! WebSocket pings and close frames, an unmasked frame, garbage, the origin check, TLS
//! (`wss://`), `/varz`, and the start-up refusal without TLS or `no_tls`; and abuse: HTTP
//! requests that are not an upgrade, a client that never finishes it, frames of every shape,
//! 200 clients at once, a stale connection's close frame, a slow consumer that never reads.
//! The official clients over WebSocket are in `websocket_clients.rs`.
//!
//! Every test states nats-server's behaviour: `JSSERVER_TEST_BINARY=$(which nats-server)
//! cargo test -p jsserver --test websocket` runs them against it.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream as StdTcpStream;
use std::time::Duration;

use common::ws::{deflate, raw_upgrade, start, RawClient};
use common::{free_port, run_config_to_exit, TestServer};
use futures_util::{SinkExt, StreamExt};
use tokio::net::TcpStream;
use tokio::time::timeout;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

/// Upper bound for something that should happen: a wait, not a timing assertion.
const ARRIVES: Duration = Duration::from_secs(10);

type Ws<S> = WebSocketStream<S>;

/// A WebSocket client speaking the NATS protocol: what it read so far, as text.
struct Client<S> {
    ws: Ws<S>,
    got: String,
    /// Leave out INFO lines after the first: nats-server 2.15 sends another INFO
    /// (`connect_info`) after a CONNECT with `protocol` 1.
    skip_info: bool,
}

impl Client<MaybeTlsStream<TcpStream>> {
    /// Connects to `ws://127.0.0.1:PORT` and reads the INFO.
    async fn connect(port: u16) -> (Client<MaybeTlsStream<TcpStream>>, String) {
        let (ws, _) = tokio_tungstenite::connect_async(format!("ws://127.0.0.1:{port}"))
            .await
            .expect("websocket connect");
        Client::start(ws).await
    }
}

impl<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin> Client<S> {
    async fn start(ws: Ws<S>) -> (Client<S>, String) {
        let mut c = Client {
            ws,
            got: String::new(),
            skip_info: false,
        };
        let info = c.until("\r\n").await;
        c.skip_info = true;
        assert!(info.starts_with("INFO {"), "{info}");
        (c, info)
    }

    /// Sends `bytes` in one binary message.
    async fn send(&mut self, bytes: &str) {
        self.ws
            .send(Message::Binary(bytes.as_bytes().to_vec().into()))
            .await
            .expect("send");
    }

    /// Reads messages until what was read (since the last call) contains `needle`; returns
    /// it, up to and including the needle.
    async fn until(&mut self, needle: &str) -> String {
        loop {
            self.drop_infos();
            if let Some(at) = self.got.find(needle) {
                let rest = self.got.split_off(at + needle.len());
                return std::mem::replace(&mut self.got, rest);
            }
            match timeout(ARRIVES, self.ws.next()).await {
                Ok(Some(Ok(Message::Binary(b)))) => self.got.push_str(&String::from_utf8_lossy(&b)),
                Ok(Some(Ok(Message::Text(t)))) => panic!("the server sent a text frame: {t}"),
                Ok(Some(Ok(_))) => {}
                other => panic!("no {needle:?} (got {:?}): {other:?}", self.got),
            }
        }
    }

    /// Removes the complete INFO lines from what was read (see `skip_info`).
    fn drop_infos(&mut self) {
        if !self.skip_info {
            return;
        }
        while let Some(start) = self
            .got
            .match_indices("INFO {")
            .map(|(i, _)| i)
            .find(|&i| i == 0 || self.got[..i].ends_with('\n'))
        {
            let Some(len) = self.got[start..].find("\r\n") else {
                return;
            };
            self.got.replace_range(start..start + len + 2, "");
        }
    }

    /// Reads until the server closes: the text read and the close frame, if any.
    async fn read_to_close(&mut self) -> (String, Option<CloseFrame>) {
        let frame = loop {
            match timeout(ARRIVES, self.ws.next()).await {
                Ok(Some(Ok(Message::Binary(b)))) => {
                    self.got.push_str(&String::from_utf8_lossy(&b));
                }
                Ok(Some(Ok(Message::Close(frame)))) => break frame,
                Ok(Some(Ok(_))) => {}
                Ok(None | Some(Err(_))) => break None,
                Err(_) => panic!("still open after {ARRIVES:?}; read {:?}", self.got),
            }
        };
        self.drop_infos();
        (std::mem::take(&mut self.got), frame)
    }
}

const CONNECT: &str =
    "CONNECT {\"verbose\":false,\"pedantic\":false,\"protocol\":1,\"headers\":true}\r\n";

#[tokio::test]
async fn pub_sub_and_ping_over_binary_frames() {
    let (_server, port) = start("", "");
    let (mut c, info) = Client::connect(port).await;
    // As nats-server: the INFO names the WebSocket listener.
    assert!(info.contains(&format!("\"port\":{port}")), "{info}");
    c.send(&format!(
        "{CONNECT}SUB foo 1\r\nPUB foo 5\r\nhello\r\nPING\r\n"
    ))
    .await;
    let got = c.until("PONG\r\n").await;
    assert_eq!(got, "MSG foo 1 5\r\nhello\r\nPONG\r\n");
    // A protocol line split over two messages, and headers.
    c.send("HPUB foo 12 14\r\nNATS/1.0\r\n\r\nhi").await;
    c.send("\r\nPING\r\n").await;
    let got = c.until("PONG\r\n").await;
    assert!(
        got.starts_with("HMSG foo 1 12 14\r\nNATS/1.0\r\n\r\nhi\r\n"),
        "{got:?}"
    );
    // A text frame is read like a binary one (nats-server does not refuse it).
    c.ws.send(Message::Text("PING\r\n".into())).await.unwrap();
    assert_eq!(c.until("\r\n").await, "PONG\r\n");
    // A WebSocket ping gets its pong, with the same payload.
    c.ws.send(Message::Ping(b"are you there".to_vec().into()))
        .await
        .unwrap();
    let pong = timeout(ARRIVES, async {
        loop {
            match c.ws.next().await {
                Some(Ok(Message::Pong(p))) => return p,
                Some(Ok(_)) => {}
                other => panic!("no pong: {other:?}"),
            }
        }
    })
    .await
    .expect("pong");
    assert_eq!(&pong[..], b"are you there");
}

#[tokio::test]
async fn a_client_close_frame_is_echoed_and_ends_the_connection() {
    let (_server, port) = start("", "");
    let (mut c, _) = Client::connect(port).await;
    c.send(&format!("{CONNECT}PING\r\n")).await;
    c.until("PONG\r\n").await;
    c.ws.send(Message::Close(Some(CloseFrame {
        code: CloseCode::Normal,
        reason: "bye".into(),
    })))
    .await
    .unwrap();
    let (text, frame) = c.read_to_close().await;
    assert_eq!(text, "");
    let frame = frame.expect("the close frame echoed");
    assert_eq!(
        (frame.code, frame.reason.as_str()),
        (CloseCode::Normal, "bye")
    );
}

#[tokio::test]
async fn a_jetstream_publish_over_websocket_gets_its_puback() {
    let (server, port) = start("", "");
    let nc = async_nats::connect(server.url()).await.unwrap();
    let js = async_nats::jetstream::new(nc);
    js.create_stream(async_nats::jetstream::stream::Config {
        name: "ORDERS".into(),
        subjects: vec!["orders.>".into()],
        ..Default::default()
    })
    .await
    .unwrap();
    let (mut c, info) = Client::connect(port).await;
    assert!(info.contains("\"jetstream\":true"), "{info}");
    c.send(&format!(
        "{CONNECT}SUB _INBOX.ws 1\r\nPUB orders.1 _INBOX.ws 5\r\nfirst\r\nPING\r\n"
    ))
    .await;
    // The PING is answered at once, the PubAck once the stream has the message.
    let got = c.until("}\r\n").await;
    let ack = got
        .split("\r\n")
        .find(|l| l.starts_with('{'))
        .unwrap_or_else(|| panic!("no PubAck in {got:?}"));
    let ack: serde_json::Value = serde_json::from_str(ack).unwrap();
    assert_eq!(ack["stream"], "ORDERS", "{ack}");
    assert_eq!(ack["seq"], 1, "{ack}");
}

#[tokio::test]
async fn messages_cross_between_websocket_and_tcp_clients() {
    let (server, port) = start("", "");
    let nc = async_nats::connect(server.url()).await.unwrap();
    let mut from_ws = nc.subscribe("to.tcp").await.unwrap();
    active(&nc, &mut from_ws, "to.tcp").await;
    let (mut c, _) = Client::connect(port).await;
    c.send(&format!(
        "{CONNECT}SUB to.ws 7\r\nPUB to.tcp 9\r\nfrom a ws\r\nPING\r\n"
    ))
    .await;
    c.until("PONG\r\n").await;
    let msg = timeout(ARRIVES, from_ws.next()).await.unwrap().unwrap();
    assert_eq!(&msg.payload[..], b"from a ws");
    nc.publish("to.ws", "from tcp".into()).await.unwrap();
    nc.flush().await.unwrap();
    assert_eq!(
        c.until("from tcp\r\n").await,
        "MSG to.ws 7 8\r\nfrom tcp\r\n"
    );
    // A request from the WebSocket client answered over TCP.
    let mut service = nc.subscribe("svc").await.unwrap();
    active(&nc, &mut service, "svc").await;
    c.send("SUB reply.ws 8\r\nPUB svc reply.ws 3\r\nask\r\n")
        .await;
    let req = timeout(ARRIVES, service.next()).await.unwrap().unwrap();
    nc.publish(req.reply.unwrap(), "answer".into())
        .await
        .unwrap();
    assert_eq!(
        c.until("answer\r\n").await,
        "MSG reply.ws 8 6\r\nanswer\r\n"
    );
}

/// Waits until the server has `sub` (async-nats's `flush` does not wait for the server to
/// read what it flushed): a probe published to `subject` comes back.
async fn active(nc: &async_nats::Client, sub: &mut async_nats::Subscriber, subject: &str) {
    nc.publish(subject.to_string(), "probe".into())
        .await
        .unwrap();
    let probe = timeout(ARRIVES, sub.next()).await.unwrap().unwrap();
    assert_eq!(&probe.payload[..], b"probe");
}

#[tokio::test]
async fn authentication_applies_as_on_the_client_port() {
    let (_server, port) = start("", "authorization { user: alice, password: s3cret }\n");
    let (mut c, info) = Client::connect(port).await;
    assert!(info.contains("\"auth_required\":true"), "{info}");
    c.send("CONNECT {\"verbose\":false,\"user\":\"alice\",\"pass\":\"wrong\"}\r\nPING\r\n")
        .await;
    let (text, frame) = c.read_to_close().await;
    assert_eq!(text, "-ERR 'Authorization Violation'\r\n");
    // nats-server's close frame: policy violation, the closed state's name.
    let frame = frame.expect("a close frame");
    assert_eq!(
        (frame.code, frame.reason.as_str()),
        (CloseCode::Policy, "Authentication Failure")
    );
    let (mut c, _) = Client::connect(port).await;
    c.send("CONNECT {\"verbose\":false,\"user\":\"alice\",\"pass\":\"s3cret\"}\r\nPING\r\n")
        .await;
    assert_eq!(c.until("\r\n").await, "PONG\r\n");
    // No CONNECT at all: the same refusal.
    let (mut c, _) = Client::connect(port).await;
    c.send("PING\r\n").await;
    let (text, _) = c.read_to_close().await;
    assert_eq!(text, "-ERR 'Authorization Violation'\r\n");
}

#[tokio::test]
async fn garbage_in_a_frame_closes_the_connection() {
    let (_server, port) = start("", "");
    let (mut c, _) = Client::connect(port).await;
    c.send(&format!("{CONNECT}PING\r\n")).await;
    c.until("PONG\r\n").await;
    c.send("FOO BAR\r\nPING\r\n").await;
    // nats-server 2.15 closes without a word; jsserver sends -ERR 'Unknown Protocol
    // Operation' and a close frame (1002) first. Either way: no PONG, closed.
    let (text, _) = c.read_to_close().await;
    assert!(!text.contains("PONG"), "{text:?}");
}

#[tokio::test]
async fn the_upgrade_and_an_unmasked_frame_are_as_on_nats_server() {
    let (_server, port) = start("", "");
    let (mut s, head) = raw_upgrade(port, "");
    let lower = head.to_ascii_lowercase();
    assert!(
        head.starts_with("HTTP/1.1 101 Switching Protocols\r\n"),
        "{head}"
    );
    assert!(lower.contains("upgrade: websocket\r\n"), "{head}");
    assert!(lower.contains("connection: upgrade\r\n"), "{head}");
    // RFC 6455's example key and its answer.
    assert!(
        lower.contains("sec-websocket-accept: s3pplmbitxaq9kygzzhzrbk+xoo=\r\n"),
        "{head}"
    );
    // No subprotocol, no extension.
    assert!(!lower.contains("sec-websocket-protocol"), "{head}");
    assert!(!lower.contains("sec-websocket-extensions"), "{head}");
    // The INFO, in one unmasked binary frame from the server.
    let mut hdr = [0u8; 2];
    s.read_exact(&mut hdr).unwrap();
    assert_eq!(hdr[0], 0x82, "FIN and binary");
    assert_eq!(hdr[1] & 0x80, 0, "server frames are not masked");
    // A client frame without its mask: the connection closes, the PING unanswered.
    s.write_all(&[0x82, 6]).unwrap();
    s.write_all(b"PING\r\n").unwrap();
    let mut rest = Vec::new();
    let _ = s.read_to_end(&mut rest);
    assert!(
        !String::from_utf8_lossy(&rest).contains("PONG"),
        "{:?}",
        String::from_utf8_lossy(&rest)
    );
}

#[tokio::test]
async fn origins_not_allowed_get_403() {
    let (_server, port) = start("  allowed_origins: [\"https://app.example.com\"]\n", "");
    let (_s, head) = raw_upgrade(port, "Origin: https://evil.example.com\r\n");
    assert!(head.starts_with("HTTP/1.1 403"), "{head}");
    let (_s, head) = raw_upgrade(port, "Origin: https://app.example.com\r\n");
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    // A client that is not a browser page sends no Origin: accepted.
    let (_s, head) = raw_upgrade(port, "");
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    let mut req = format!("ws://127.0.0.1:{port}")
        .into_client_request()
        .unwrap();
    req.headers_mut()
        .insert("Origin", "http://app.example.com".parse().unwrap());
    let err = tokio_tungstenite::connect_async(req)
        .await
        .expect_err("http:// is not the allowed https:// origin");
    assert!(err.to_string().contains("403"), "{err}");
}

/// `same_origin` compares the scheme too, as nats-server's `checkOrigin`: `http` on a plain
/// listener, `https` on a TLS one, besides the host and port (default ports by scheme).
#[tokio::test]
async fn same_origin_compares_the_scheme_too() {
    let (_server, port) = start("  same_origin: true\n", "");
    let (_s, head) = raw_upgrade(port, &format!("Origin: http://127.0.0.1:{port}\r\n"));
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    let (_s, head) = raw_upgrade(port, &format!("Origin: HTTP://127.0.0.1:{port}\r\n"));
    assert!(
        head.starts_with("HTTP/1.1 101"),
        "scheme in any case: {head}"
    );
    let (_s, head) = raw_upgrade(port, &format!("Origin: https://127.0.0.1:{port}\r\n"));
    assert!(
        head.starts_with("HTTP/1.1 403"),
        "https on a plain listener: {head}"
    );
    let (_s, head) = raw_upgrade(port, &format!("Origin: ws://127.0.0.1:{port}\r\n"));
    assert!(head.starts_with("HTTP/1.1 403"), "{head}");
    let (_s, head) = raw_upgrade(port, "Origin: http://127.0.0.1\r\n");
    assert!(
        head.starts_with("HTTP/1.1 403"),
        "port 80 is not {port}: {head}"
    );

    // A TLS listener: https is its own scheme, http is not.
    let (_dir, mut server, config) = tls_server("  same_origin: true\n");
    let port = common::ws::port(&server.wait_for_log("Server is ready"));
    let upgrade = |origin: String| {
        let config = std::sync::Arc::clone(&config);
        async move {
            let tcp = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
            let tls = tokio_rustls::TlsConnector::from(config)
                .connect("127.0.0.1".try_into().unwrap(), tcp)
                .await
                .unwrap();
            let mut req = format!("wss://127.0.0.1:{port}")
                .into_client_request()
                .unwrap();
            req.headers_mut().insert("Origin", origin.parse().unwrap());
            tokio_tungstenite::client_async(req, tls).await.map(|_| ())
        }
    };
    upgrade(format!("https://127.0.0.1:{port}"))
        .await
        .expect("https is the TLS listener's scheme");
    let err = upgrade(format!("http://127.0.0.1:{port}"))
        .await
        .expect_err("http is not");
    assert!(err.to_string().contains("403"), "{err}");
}

/// A server whose WebSocket listener has a TLS block (a fresh self-signed certificate for
/// 127.0.0.1) and `extra`; the client configuration that trusts it.
fn tls_server(
    extra: &str,
) -> (
    tempfile::TempDir,
    TestServer,
    std::sync::Arc<rustls::ClientConfig>,
) {
    let dir = tempfile::tempdir().unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    let (cert_file, key_file) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    std::fs::write(&cert_file, cert.pem()).unwrap();
    std::fs::write(&key_file, key.serialize_pem()).unwrap();
    let server = TestServer::start_with_config(
        &format!(
            "websocket {{\n  host: 127.0.0.1\n  port: -1\n{extra}  tls {{\n    cert_file: {:?}\n    \
             key_file: {:?}\n  }}\n}}\n",
            cert_file.display().to_string(),
            key_file.display().to_string()
        ),
        &[],
    );
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert.der().clone()).unwrap();
    let config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    (dir, server, std::sync::Arc::new(config))
}

#[tokio::test]
async fn wss_with_a_tls_block() {
    let (_dir, mut server, config) = tls_server("");
    let log = server.wait_for_log("Server is ready");
    assert!(
        log.contains("Listening for websocket clients on wss://"),
        "{log}"
    );
    let port = common::ws::port(&log);
    let tcp = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let tls = tokio_rustls::TlsConnector::from(config)
        .connect("127.0.0.1".try_into().unwrap(), tcp)
        .await
        .unwrap();
    let (ws, _) = tokio_tungstenite::client_async(format!("wss://127.0.0.1:{port}"), tls)
        .await
        .unwrap();
    let (mut c, _) = Client::start(ws).await;
    c.send(&format!("{CONNECT}SUB a 1\r\nPUB a 2\r\nok\r\nPING\r\n"))
        .await;
    assert_eq!(c.until("PONG\r\n").await, "MSG a 1 2\r\nok\r\nPONG\r\n");
    // A plain ws:// client on the wss:// port gets nowhere.
    assert!(timeout(
        ARRIVES,
        tokio_tungstenite::connect_async(format!("ws://127.0.0.1:{port}"))
    )
    .await
    .unwrap()
    .is_err());
}

#[tokio::test]
async fn varz_has_a_websocket_section() {
    let http = free_port();
    let (_server, port) = start("", &format!("http_port: {http}\n"));
    let mut s = StdTcpStream::connect(("127.0.0.1", http)).unwrap();
    s.write_all(b"GET /varz HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        .unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).unwrap();
    let json = &body[body.find("\r\n\r\n").unwrap() + 4..];
    let v: serde_json::Value = serde_json::from_str(json).unwrap();
    let ws = &v["websocket"];
    assert_eq!(ws["port"], port, "{ws}");
    assert_eq!(ws["host"], "127.0.0.1", "{ws}");
    assert_eq!(ws["no_tls"], true, "{ws}");
}

#[test]
fn without_tls_or_no_tls_the_server_does_not_start() {
    let out = run_config_to_exit("listen: 127.0.0.1:-1\nwebsocket { port: -1 }\n", &[]);
    assert!(!out.status.success());
    let stderr = out.stderr;
    // nats-server's words.
    assert!(
        stderr.contains("websocket requires TLS configuration"),
        "{stderr}"
    );
}

#[tokio::test]
async fn a_stale_connection_gets_a_close_frame_a_client_accepts() {
    let (_server, port) = start("", "ping_interval: \"1s\"\nping_max: 1\n");
    let (mut c, _) = Client::connect(port).await;
    c.send(CONNECT).await;
    // The client answers none of the server's PINGs.
    let (text, frame) = c.read_to_close().await;
    assert!(text.ends_with("-ERR 'Stale Connection'\r\n"), "{text:?}");
    // nats-server: 1001 (going away). RFC 6455 reserves 1006 for "closed without a close
    // frame" and forbids sending it: a client receiving 1006 in a frame fails the connection
    // (tungstenite reads it as 1002 "Protocol violation").
    let frame = frame.expect("a close frame with a valid status");
    assert_eq!(
        (frame.code, frame.reason.as_str()),
        (CloseCode::Away, "Stale Connection")
    );
}

/// Whether the server still holds an established TCP connection on its port `port` (Linux:
/// `/proc/net/tcp`, the server's end has the port as its local one).
fn server_side_established(port: u16) -> usize {
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
    let local = format!(":{port:04X}");
    table
        .lines()
        .skip(1)
        .filter(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            cols.len() > 3 && cols[1].ends_with(&local) && cols[3] == "01"
        })
        .count()
}

#[tokio::test]
async fn a_slow_consumer_that_never_reads_loses_its_socket() {
    let (server, port) = start(
        "",
        "max_pending: 1MB\nmax_payload: 64KB\nwrite_deadline: \"1s\"\n",
    );
    // A subscriber that stops reading.
    let (mut slow, _) = Client::connect(port).await;
    slow.send(&format!("{CONNECT}SUB big 1\r\nPING\r\n")).await;
    slow.until("PONG\r\n").await;
    let nc = async_nats::connect(server.url()).await.unwrap();
    let payload = bytes::Bytes::from(vec![b'x'; 60_000]);
    // Far more than max_pending, socket buffers and the bridge hold.
    for _ in 0..400 {
        nc.publish("big", payload.clone()).await.unwrap();
    }
    nc.flush().await.unwrap();
    // nats-server closes the socket of a slow consumer at once (its client, still not
    // reading, sees the end after the bytes its kernel holds); the connection may not stay
    // established on the server's side, unread, for as long as the client likes.
    let deadline = std::time::Instant::now() + ARRIVES;
    while server_side_established(port) > 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the slow consumer's socket is still established on the server after {ARRIVES:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop(slow);
}

/// Sends `request` (ignoring a reset once the server stops reading) and returns the start of
/// what comes back, up to the end of the body or the socket.
fn raw_http(port: u16, request: &[u8]) -> String {
    let mut s = StdTcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let _ = s.write_all(request);
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
        let text = String::from_utf8_lossy(&got);
        if let Some(end) = text.find("\r\n\r\n") {
            let len = text[..end]
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse::<usize>().ok())?
                })
                .unwrap_or(0);
            if got.len() >= end + 4 + len {
                break;
            }
        }
    }
    String::from_utf8_lossy(&got).into_owned()
}

#[tokio::test]
async fn requests_that_are_not_an_upgrade_get_an_http_error() {
    let (_server, port) = start("", "");
    let host = format!("Host: 127.0.0.1:{port}\r\n");
    let upgrade = "Upgrade: websocket\r\nConnection: Upgrade\r\n\
                   Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n";
    // As nats-server (RFC 6455 4.2.2, 4.4: a server that does not upgrade answers with an
    // HTTP error, and names the version it speaks): 400 with `Sec-Websocket-Version: 13`.
    let status = |got: &str| got.lines().next().unwrap_or_default().to_string();
    let plain = raw_http(port, format!("GET / HTTP/1.1\r\n{host}\r\n").as_bytes());
    assert_eq!(status(&plain), "HTTP/1.1 400 Bad Request", "{plain}");
    assert!(
        plain
            .to_ascii_lowercase()
            .contains("\r\nsec-websocket-version: 13\r\n"),
        "{plain}"
    );
    let version = raw_http(
        port,
        format!("GET / HTTP/1.1\r\n{host}{upgrade}Sec-WebSocket-Version: 8\r\n\r\n").as_bytes(),
    );
    assert_eq!(status(&version), "HTTP/1.1 400 Bad Request", "{version}");
    assert!(
        version
            .to_ascii_lowercase()
            .contains("\r\nsec-websocket-version: 13\r\n"),
        "{version}"
    );
    let no_key = raw_http(
        port,
        format!(
            "GET / HTTP/1.1\r\n{host}Upgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Version: 13\r\n\r\n"
        )
        .as_bytes(),
    );
    assert_eq!(status(&no_key), "HTTP/1.1 400 Bad Request", "{no_key}");
    let post = raw_http(
        port,
        format!("POST / HTTP/1.1\r\n{host}{upgrade}Sec-WebSocket-Version: 13\r\n\r\n").as_bytes(),
    );
    assert_eq!(status(&post), "HTTP/1.1 405 Method Not Allowed", "{post}");
    let garbage = raw_http(port, b"\x16\x03\x01\x00\x05hello\r\n\r\n");
    assert_eq!(status(&garbage), "HTTP/1.1 400 Bad Request", "{garbage}");
    // Headers past what the server reads (nats-server: 1 MiB; jsserver: 64 KiB): 431.
    let big = raw_http(
        port,
        format!(
            "GET / HTTP/1.1\r\n{host}{upgrade}Sec-WebSocket-Version: 13\r\nX-Big: {}\r\n\r\n",
            "a".repeat(2 << 20)
        )
        .as_bytes(),
    );
    assert_eq!(
        status(&big),
        "HTTP/1.1 431 Request Header Fields Too Large",
        "{big}"
    );
    // Many header lines (proxies, cookies) are fine, as on nats-server.
    let many: String = (0..200).map(|i| format!("X-Header-{i}: {i}\r\n")).collect();
    let (_s, head) = raw_upgrade(port, &many);
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    // The listener still upgrades its clients.
    let (mut c, _) = Client::connect(port).await;
    c.send(&format!("{CONNECT}PING\r\n")).await;
    c.until("PONG\r\n").await;
}

#[tokio::test]
async fn a_client_that_never_finishes_the_upgrade_is_closed_at_handshake_timeout() {
    // nats-server applies an explicit handshake_timeout to the HTTP request too (jsserver
    // also has a 2 s default; nats-server none).
    let (_server, port) = start("  handshake_timeout: \"1s\"\n", "");
    for sent in [&b""[..], b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n"] {
        let mut s = StdTcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(ARRIVES)).unwrap();
        s.write_all(sent).unwrap();
        let start = std::time::Instant::now();
        let mut rest = Vec::new();
        let _ = s.read_to_end(&mut rest);
        let waited = start.elapsed();
        assert!(
            waited >= Duration::from_millis(500) && waited < Duration::from_secs(5),
            "closed after {waited:?} with {sent:?} sent"
        );
        assert!(rest.is_empty(), "{:?}", String::from_utf8_lossy(&rest));
    }
    let (mut c, _) = Client::connect(port).await;
    c.send(&format!("{CONNECT}PING\r\n")).await;
    c.until("PONG\r\n").await;
}

/// Frames in every shape a client may send: a PUB whose payload spans many messages, one
/// message in many fragments with a ping between two of them, a byte per message, and a
/// flood of pings; then 200 clients at once.
#[tokio::test]
async fn frames_of_every_shape_and_200_clients() {
    use tokio_tungstenite::tungstenite::protocol::frame::coding::{Data, OpCode};
    use tokio_tungstenite::tungstenite::protocol::frame::Frame;
    let (_server, port) = start("", "");
    let (mut c, _) = Client::connect(port).await;
    c.send(&format!("{CONNECT}SUB big 1\r\nPING\r\n")).await;
    c.until("PONG\r\n").await;
    let payload: String = (0..900_000u32)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect();
    let pub_op = format!("PUB big {}\r\n{payload}\r\nPING\r\n", payload.len());
    let want = format!("MSG big 1 {}\r\n{payload}\r\nPONG\r\n", payload.len());
    // 1,000-byte messages.
    for part in pub_op.as_bytes().chunks(1000) {
        c.ws.feed(Message::Binary(part.to_vec().into()))
            .await
            .unwrap();
    }
    c.ws.flush().await.unwrap();
    assert!(c.until("PONG\r\n").await == want, "split over messages");
    // One message in 1,000-byte fragments, a ping between the first two.
    let parts: Vec<&[u8]> = pub_op.as_bytes().chunks(1000).collect();
    for (i, part) in parts.iter().enumerate() {
        let op = if i == 0 { Data::Binary } else { Data::Continue };
        let frame = Frame::message(part.to_vec(), OpCode::Data(op), i == parts.len() - 1);
        c.ws.feed(Message::Frame(frame)).await.unwrap();
        if i == 0 {
            c.ws.feed(Message::Ping(b"between".to_vec().into()))
                .await
                .unwrap();
        }
    }
    c.ws.flush().await.unwrap();
    assert!(c.until("PONG\r\n").await == want, "fragments");
    // A byte per message.
    for b in "PUB big 5\r\nhello\r\nPING\r\n".bytes() {
        c.ws.feed(Message::Binary(vec![b].into())).await.unwrap();
    }
    c.ws.flush().await.unwrap();
    assert_eq!(
        c.until("PONG\r\n").await,
        "MSG big 1 5\r\nhello\r\nPONG\r\n"
    );
    // 20,000 pings unread, then the protocol still answers.
    for _ in 0..20_000 {
        c.ws.feed(Message::Ping(b"p".to_vec().into()))
            .await
            .unwrap();
    }
    c.send("PING\r\n").await;
    assert_eq!(c.until("PONG\r\n").await, "PONG\r\n");

    // 200 clients at once, each subscribed; one message reaches them all.
    let clients = futures_util::future::join_all((0..200).map(|i| async move {
        let (mut c, _) = Client::connect(port).await;
        c.send(&format!("{CONNECT}SUB all {i}\r\nPING\r\n")).await;
        c.until("PONG\r\n").await;
        c
    }))
    .await;
    c.send("PUB all 2\r\nhi\r\n").await;
    for (i, mut c) in clients.into_iter().enumerate() {
        assert_eq!(c.until("hi\r\n").await, format!("MSG all {i} 2\r\nhi\r\n"));
    }
}

/// nats-server's answer to a `permessage-deflate` offer (`wsPMCFullResponse`).
const DEFLATE_ANSWER: &str = "Sec-WebSocket-Extensions: permessage-deflate; \
                              server_no_context_takeover; client_no_context_takeover\r\n";

#[tokio::test]
async fn compression_is_negotiated_and_used_both_ways() {
    let (_server, port) = start("  compression: true\n", "");
    let (s, head) = raw_upgrade(
        port,
        "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n",
    );
    // nats-server's answer, word for word: neither side keeps a context between messages.
    assert!(
        head.starts_with("HTTP/1.1 101 Switching Protocols\r\n"),
        "{head}"
    );
    assert!(head.contains(DEFLATE_ANSWER), "{head}");
    let mut c = RawClient::new(s, head);
    // The INFO (over 64 bytes) comes compressed.
    let info = c.until("\r\n");
    assert!(info.starts_with("INFO {"), "{info}");
    assert_eq!((c.compressed, c.plain), (1, 0), "the INFO is compressed");
    // A compressed CONNECT, SUB, PUB, PING: the MSG and PONG come back.
    c.send_compressed(
        &format!("{CONNECT}SUB foo 1\r\nPUB foo 5\r\nhello\r\nPING\r\n"),
        1,
    );
    let got = c.until("PONG\r\n");
    assert!(got.ends_with("MSG foo 1 5\r\nhello\r\nPONG\r\n"), "{got:?}");
    // A large compressible payload both ways: sent compressed in three fragments, it comes
    // back whole, compressed, in far fewer bytes than it has.
    let payload: String = (0..300_000u32)
        .map(|i| char::from(b'a' + (i / 7 % 26) as u8))
        .collect();
    let op = format!("PUB foo {}\r\n{payload}\r\nPING\r\n", payload.len());
    let sent = deflate(op.as_bytes()).len();
    assert!(sent < op.len() / 20, "{sent} bytes for {}", op.len());
    c.send_compressed(&op, 3);
    let (before, wire_before) = (c.compressed, c.wire);
    let got = c.until("PONG\r\n");
    assert!(
        got == format!("MSG foo 1 {}\r\n{payload}\r\nPONG\r\n", payload.len()),
        "the MSG, whole: {} bytes, {:?}...{:?}",
        got.len(),
        &got[..got.len().min(80)],
        &got[got.len().saturating_sub(40)..]
    );
    assert!(c.compressed > before, "the MSG is compressed");
    let wire = c.wire - wire_before;
    assert!(wire < payload.len() / 10, "{wire} bytes on the wire");
    // A small answer (64 bytes or less) comes as it is, uncompressed.
    let plain = c.plain;
    c.send_compressed("PING\r\n", 1);
    assert_eq!(c.until("PONG\r\n"), "PONG\r\n");
    assert_eq!(c.plain, plain + 1, "PONG is sent uncompressed");
}

#[tokio::test]
async fn a_client_that_does_not_offer_compression_works_on_a_compression_server() {
    let (_server, port) = start("  compression: true\n", "");
    let (_s, head) = raw_upgrade(port, "");
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    assert!(
        !head
            .to_ascii_lowercase()
            .contains("sec-websocket-extensions"),
        "{head}"
    );
    let (mut c, _) = Client::connect(port).await;
    let payload = "z".repeat(10_000);
    c.send(&format!(
        "{CONNECT}SUB foo 1\r\nPUB foo {}\r\n{payload}\r\nPING\r\n",
        payload.len()
    ))
    .await;
    let got = c.until("PONG\r\n").await;
    assert_eq!(
        got,
        format!("MSG foo 1 {}\r\n{payload}\r\nPONG\r\n", payload.len())
    );
}

#[tokio::test]
async fn without_compression_the_offer_is_not_answered() {
    for extra in ["  compression: false\n", ""] {
        let (_server, port) = start(extra, "");
        let (s, head) = raw_upgrade(
            port,
            "Sec-WebSocket-Extensions: permessage-deflate; client_no_context_takeover\r\n",
        );
        assert!(head.starts_with("HTTP/1.1 101"), "{head}");
        assert!(
            !head
                .to_ascii_lowercase()
                .contains("sec-websocket-extensions"),
            "{head}"
        );
        // Frames are plain; a compressed one (RSV1 set) ends the connection unanswered.
        let mut c = RawClient::new(s, head);
        c.until("\r\n");
        assert_eq!((c.compressed, c.plain), (0, 1));
        c.frame(0x82, format!("{CONNECT}PING\r\n").as_bytes())
            .unwrap();
        assert!(c.until("PONG\r\n").ends_with("PONG\r\n"));
        c.send_compressed("PING\r\n", 1);
        let mut rest = Vec::new();
        let _ = c.s.read_to_end(&mut rest);
        assert!(
            !String::from_utf8_lossy(&rest).contains("PONG"),
            "{:?}",
            String::from_utf8_lossy(&rest)
        );
    }
}
