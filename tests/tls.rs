//! TLS for client connections against the real binary: the `tls` block and the `--tls*`
//! flags, INFO's `tls_required`/`tls_verify`/`tls_available`, the upgrade after INFO, TLS
//! first (`handshake_first`), client certificates (`verify`) and `verify_and_map`, and what
//! happens to a plain-text client on the TLS port, a TLS client on a plain port and a client
//! that never finishes its handshake. Certificates are made here with rcgen; clients are
//! async-nats (rustls), raw TCP where exact bytes matter, and nats-py.
//!
//! Every test states nats-server's behaviour: `JSSERVER_TEST_BINARY=$(which nats-server)
//! cargo test -p jsserver --test tls` runs them against it, with the same config files.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::pki::{round_trip, tls_block, tls_client, tls_connect, Pki};
use common::{info_json, Raw, TestServer};
use futures_util::StreamExt;
use rcgen::{DnType, SanType};
use tokio::time::timeout;

/// Upper bound for something that should happen: a wait, not a timing assertion.
const ARRIVES: Duration = Duration::from_secs(10);

fn email(s: &str) -> SanType {
    SanType::Rfc822Name(s.try_into().expect("email"))
}

fn dns(s: &str) -> SanType {
    SanType::DnsName(s.try_into().expect("dns name"))
}

/// A raw TCP connection that reads until the server closes it; returns what came (after the
/// INFO line, already read) and panics if it takes longer than [`ARRIVES`].
fn closed_after(raw: &mut Raw) -> String {
    let started = Instant::now();
    let rest = raw.read_to_eof();
    assert!(
        started.elapsed() < ARRIVES,
        "the server did not close the connection"
    );
    rest
}

#[tokio::test]
async fn tls_required_in_info_and_an_async_nats_client_upgrades_after_it() {
    let pki = Pki::new();
    let server = TestServer::start_with_config(&tls_block(&pki.server(), ""), &[]);
    assert!(
        server
            .log_text()
            .contains("TLS required for client connections"),
        "{}",
        server.log_text()
    );
    let (_raw, info) = Raw::connect(server.port);
    let info = info_json(&info);
    assert_eq!(info["tls_required"], true, "{info}");
    assert!(info.get("tls_verify").is_none(), "{info}");
    assert!(info.get("tls_available").is_none(), "{info}");

    let client = tls_connect(&server, tls_client(&pki))
        .await
        .expect("TLS connect");
    round_trip(&client, "tls.hello").await;
    // A big message crosses the bridge too (several TLS records each way).
    let mut sub = client.subscribe("tls.big").await.unwrap();
    let payload = vec![b'x'; 512 * 1024];
    client
        .publish("tls.big", payload.clone().into())
        .await
        .unwrap();
    let msg = timeout(ARRIVES, sub.next()).await.unwrap().unwrap();
    assert_eq!(msg.payload.len(), payload.len());
}

#[tokio::test]
async fn a_client_that_does_not_trust_the_server_certificate_fails_to_connect() {
    let pki = Pki::new();
    let other = Pki::new();
    let server = TestServer::start_with_config(&tls_block(&pki.server(), ""), &[]);
    let result = tls_connect(&server, tls_client(&other)).await;
    assert!(result.is_err(), "connected with an unknown CA");
}

#[tokio::test]
async fn a_plain_text_client_on_the_tls_port_is_closed_without_a_reply() {
    let pki = Pki::new();
    let server = TestServer::start_with_config(&tls_block(&pki.server(), ""), &["-D"]);
    let (mut raw, info) = Raw::connect(server.port);
    assert_eq!(info_json(&info)["tls_required"], true);
    raw.send(b"CONNECT {\"verbose\":false}\r\nPING\r\n");
    assert_eq!(closed_after(&mut raw), "", "no -ERR, no PONG: closed");
    let mut server = server;
    let log = server.wait_for_log("TLS Handshake Failure");
    assert!(
        log.contains("TLS handshake error: tls: first record does not look like a TLS handshake"),
        "{log}"
    );
}

#[tokio::test]
async fn a_client_that_never_starts_its_handshake_is_closed_after_the_tls_timeout() {
    let pki = Pki::new();
    let server =
        TestServer::start_with_config(&tls_block(&pki.server(), "  timeout: 0.5\n"), &["-D"]);
    let (mut raw, _) = Raw::connect(server.port);
    assert_eq!(closed_after(&mut raw), "");
    let mut server = server;
    let log = server.wait_for_log("TLS Handshake Failure");
    // nats-server logs `TLS handshake timeout` or, when its read deadline fires first,
    // `TLS handshake error: read tcp ...: i/o timeout`.
    assert!(
        log.contains("TLS handshake timeout") || log.contains("i/o timeout"),
        "{log}"
    );
}

#[tokio::test]
async fn a_tls_client_on_a_plain_port_gets_unknown_protocol_operation() {
    let server = TestServer::start(&[]);
    let (mut raw, info) = Raw::connect(server.port);
    assert!(info_json(&info).get("tls_required").is_none());
    // What a TLS client sends first: a ClientHello record.
    let mut roots = rustls::RootCertStore::empty();
    roots.add(Pki::new().ca.der().clone()).expect("root");
    let config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let mut tls =
        rustls::ClientConnection::new(std::sync::Arc::new(config), "localhost".try_into().unwrap())
            .unwrap();
    let mut hello = Vec::new();
    tls.write_tls(&mut hello).unwrap();
    assert_eq!(hello[0], 0x16);
    raw.send(&hello);
    assert_eq!(raw.line(), "-ERR 'Unknown Protocol Operation'\r\n");
    assert_eq!(closed_after(&mut raw), "");

    // async-nats requiring TLS refuses a server that does not offer it.
    let result = tls_connect(&server, tls_client(&Pki::new())).await;
    assert!(result.is_err(), "a TLS-only client connected in plain text");
}

#[tokio::test]
async fn verify_refuses_a_client_without_a_certificate_and_takes_one_signed_by_the_ca() {
    let pki = Pki::new();
    let conf = tls_block(
        &pki.server(),
        &format!(
            "  ca_file: {:?}\n  verify: true\n",
            pki.ca_file().display().to_string()
        ),
    );
    let server = TestServer::start_with_config(&conf, &[]);
    let (_raw, info) = Raw::connect(server.port);
    let info = info_json(&info);
    assert_eq!(info["tls_required"], true, "{info}");
    assert_eq!(info["tls_verify"], true, "{info}");

    // No certificate: the handshake fails on the server, which logs it and closes.
    let result = tls_connect(&server, tls_client(&pki)).await;
    assert!(result.is_err(), "connected without a client certificate");
    let mut server = server;
    server.wait_for_log("TLS handshake error");

    // A certificate of another CA fails the same way.
    let stranger = Pki::new().client("stranger", &[(DnType::CommonName, "stranger")], vec![]);
    let result = tls_connect(
        &server,
        tls_client(&pki).add_client_certificate(stranger.cert, stranger.key),
    )
    .await;
    assert!(result.is_err(), "connected with another CA's certificate");

    let alice = pki.client("alice", &[(DnType::CommonName, "alice")], vec![]);
    let client = tls_connect(
        &server,
        tls_client(&pki).add_client_certificate(alice.cert, alice.key),
    )
    .await
    .expect("connect with a client certificate");
    round_trip(&client, "verified").await;
}

#[tokio::test]
async fn handshake_first_sends_info_only_over_tls() {
    let pki = Pki::new();
    let server =
        TestServer::start_with_config(&tls_block(&pki.server(), "  handshake_first: true\n"), &[]);
    // A client that waits for INFO in plain text gets none; once it writes, it is closed.
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    stream.set_read_timeout(Some(ARRIVES)).unwrap();
    std::io::Write::write_all(&mut stream, b"CONNECT {}\r\nPING\r\n").unwrap();
    let started = Instant::now();
    let mut got = Vec::new();
    let _ = std::io::Read::read_to_end(&mut stream, &mut got);
    assert!(started.elapsed() < ARRIVES, "not closed");
    assert!(got.is_empty(), "{:?}", String::from_utf8_lossy(&got));

    // A client that starts TLS at once is served.
    let client = tls_connect(&server, tls_client(&pki).tls_first())
        .await
        .expect("TLS-first connect");
    assert!(client.server_info().tls_required);
    round_trip(&client, "first").await;
}

#[tokio::test]
async fn the_tls_flags_turn_tls_on_with_client_verification() {
    let pki = Pki::new();
    let server_pair = pki.server();
    let (cert, key, ca) = (
        server_pair.cert.display().to_string(),
        server_pair.key.display().to_string(),
        pki.ca_file().display().to_string(),
    );
    let server = TestServer::start(&["--tlscert", &cert, "--tlskey", &key]);
    let (_raw, info) = Raw::connect(server.port);
    assert_eq!(info_json(&info)["tls_required"], true);
    let client = tls_connect(&server, tls_client(&pki))
        .await
        .expect("connect");
    round_trip(&client, "flags").await;
    drop(server);

    let server = TestServer::start(&[
        "-tlsverify",
        "-tlscert",
        &cert,
        "-tlskey",
        &key,
        "-tlscacert",
        &ca,
    ]);
    let (_raw, info) = Raw::connect(server.port);
    assert_eq!(info_json(&info)["tls_verify"], true);
    assert!(tls_connect(&server, tls_client(&pki)).await.is_err());
    let bob = pki.client("bob", &[(DnType::CommonName, "bob")], vec![]);
    let client = tls_connect(
        &server,
        tls_client(&pki).add_client_certificate(bob.cert, bob.key),
    )
    .await
    .expect("connect with a client certificate");
    round_trip(&client, "flags.verify").await;
}

#[tokio::test]
async fn tls_false_turns_off_the_config_files_tls() {
    let pki = Pki::new();
    let server = TestServer::start_with_config(&tls_block(&pki.server(), ""), &["-tls=false"]);
    let (mut raw, info) = Raw::connect(server.port);
    assert!(info_json(&info).get("tls_required").is_none(), "{info}");
    raw.send(b"CONNECT {\"verbose\":false}\r\nPING\r\n");
    raw.expect_line("PONG\r\n");
}

#[tokio::test]
async fn allow_non_tls_serves_both_kinds_of_client() {
    let pki = Pki::new();
    let conf = format!("allow_non_tls: true\n{}", tls_block(&pki.server(), ""));
    let server = TestServer::start_with_config(&conf, &[]);
    assert!(server
        .log_text()
        .contains("TLS available for client connections"));
    let (mut raw, info) = Raw::connect(server.port);
    let info = info_json(&info);
    assert_eq!(info["tls_available"], true, "{info}");
    assert!(info.get("tls_required").is_none(), "{info}");
    raw.send(b"CONNECT {\"verbose\":false}\r\nPING\r\n");
    raw.expect_line("PONG\r\n");

    let client = tls_connect(&server, tls_client(&pki))
        .await
        .expect("TLS connect");
    round_trip(&client, "available").await;
    let plain = tls_connect(&server, async_nats::ConnectOptions::new())
        .await
        .expect("plain connect");
    round_trip(&plain, "available.plain").await;
}

/// `verify_and_map` users: one named by an email SAN, one by a DNS SAN, one by the subject.
fn mapped_config(pki: &Pki) -> String {
    let ca = pki.ca_file().display().to_string();
    let tls = tls_block(
        &pki.server(),
        &format!("  ca_file: {ca:?}\n  verify_and_map: true\n"),
    );
    format!(
        "{tls}authorization {{\n  users: [\n    \
         {{ user: \"alice@example.com\", permissions: {{ publish: \"alice.>\", subscribe: \">\" }} }}\n    \
         {{ user: \"worker.example.com\", permissions: {{ publish: \"work.>\", subscribe: \">\" }} }}\n    \
         {{ user: \"CN=bob,OU=ops,O=Acme\", permissions: {{ publish: \"bob.>\", subscribe: \">\" }} }}\n  \
         ]\n}}\n"
    )
}

/// Subscribes to everything, publishes on `denied` then `allowed`: only `allowed` comes back.
async fn only_allowed_arrives(client: &async_nats::Client, denied: &str, allowed: &str) {
    let mut all = client.subscribe(">").await.expect("subscribe");
    client.flush().await.unwrap();
    client
        .publish(denied.to_owned(), "no".into())
        .await
        .unwrap();
    client
        .publish(allowed.to_owned(), "yes".into())
        .await
        .unwrap();
    let msg = timeout(ARRIVES, all.next()).await.unwrap().unwrap();
    assert_eq!(
        msg.subject.as_str(),
        allowed,
        "the denied publish was delivered"
    );
}

#[tokio::test]
async fn verify_and_map_takes_the_user_from_the_certificate() {
    let pki = Pki::new();
    let server = TestServer::start_with_config(&mapped_config(&pki), &[]);
    let (_raw, info) = Raw::connect(server.port);
    let info = info_json(&info);
    assert_eq!(info["tls_verify"], true, "{info}");
    assert_eq!(info["auth_required"], true, "{info}");

    // An email address in the certificate names the user; no user or password is sent.
    let alice = pki.client(
        "alice",
        &[(DnType::CommonName, "Alice")],
        vec![email("alice@example.com")],
    );
    let client = tls_connect(
        &server,
        tls_client(&pki).add_client_certificate(alice.cert, alice.key),
    )
    .await
    .expect("alice maps by email");
    only_allowed_arrives(&client, "bob.1", "alice.1").await;

    // A DNS name.
    let worker = pki.client(
        "worker",
        &[(DnType::CommonName, "worker")],
        vec![dns("worker.example.com")],
    );
    let client = tls_connect(
        &server,
        tls_client(&pki).add_client_certificate(worker.cert, worker.key),
    )
    .await
    .expect("worker maps by DNS name");
    only_allowed_arrives(&client, "alice.1", "work.1").await;

    // The subject, most specific part first.
    let bob = pki.client(
        "bob",
        &[
            (DnType::OrganizationName, "Acme"),
            (DnType::OrganizationalUnitName, "ops"),
            (DnType::CommonName, "bob"),
        ],
        vec![],
    );
    let client = tls_connect(
        &server,
        tls_client(&pki).add_client_certificate(bob.cert, bob.key),
    )
    .await
    .expect("bob maps by subject");
    only_allowed_arrives(&client, "alice.1", "bob.1").await;

    // A verified certificate that names no user: an authorization violation.
    let mallory = pki.client("mallory", &[(DnType::CommonName, "mallory")], vec![]);
    let err = tls_connect(
        &server,
        tls_client(&pki).add_client_certificate(mallory.cert, mallory.key),
    )
    .await
    .expect_err("mallory has no user");
    assert_eq!(
        err.kind(),
        async_nats::ConnectErrorKind::AuthorizationViolation,
        "{err}"
    );
}

/// nats-py over TLS: `tests/scripts/tls_client.py` connects with the CA (and a client
/// certificate) and does a request/reply round trip.
#[test]
fn nats_py_connects_over_tls_with_a_client_certificate() {
    if std::process::Command::new("python3")
        .args(["-c", "import nats"])
        .status()
        .map_or(true, |s| !s.success())
    {
        eprintln!("skipped: python3 with nats-py is not installed");
        return;
    }
    let pki = Pki::new();
    let conf = tls_block(
        &pki.server(),
        &format!(
            "  ca_file: {:?}\n  verify: true\n",
            pki.ca_file().display().to_string()
        ),
    );
    let server = TestServer::start_with_config(&conf, &[]);
    let carol = pki.client("carol", &[(DnType::CommonName, "carol")], vec![]);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/scripts/tls_client.py");
    let out = std::process::Command::new("python3")
        .arg(script)
        .arg(format!("tls://127.0.0.1:{}", server.port))
        .arg(pki.ca_file())
        .arg(&carol.cert)
        .arg(&carol.key)
        .output()
        .expect("run python3");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stdout.trim(), "reply: pong over tls");
}

/// Our own client library: a `tls://` URL with the CA, a client certificate for `verify`,
/// TLS first, and a plain-text-only server refused when TLS is asked for.
#[tokio::test]
async fn jsclient_connects_over_tls() {
    let pki = Pki::new();
    let conf = tls_block(
        &pki.server(),
        &format!(
            "  ca_file: {:?}\n  verify: true\n",
            pki.ca_file().display().to_string()
        ),
    );
    let server = TestServer::start_with_config(&conf, &[]);
    let url = format!("tls://127.0.0.1:{}", server.port);
    let dave = pki.client("dave", &[(DnType::CommonName, "dave")], vec![]);
    let client = timeout(
        ARRIVES,
        jsclient::ConnectOptions::new()
            .add_root_certificates(pki.ca_file())
            .add_client_certificate(&dave.cert, &dave.key)
            .connect(&url),
    )
    .await
    .unwrap()
    .expect("jsclient over TLS");
    let mut sub = client.subscribe("js.tls").await.unwrap();
    client.publish("js.tls", "hi".into()).await.unwrap();
    let msg = timeout(ARRIVES, sub.next()).await.unwrap().unwrap();
    assert_eq!(&msg.payload[..], b"hi");
    // Without the client certificate the server refuses the handshake.
    let refused = timeout(
        ARRIVES,
        jsclient::ConnectOptions::new()
            .add_root_certificates(pki.ca_file())
            .max_reconnects(Some(0))
            .connect(&url),
    )
    .await
    .unwrap();
    assert!(refused.is_err(), "connected without a client certificate");
    drop(server);

    let server =
        TestServer::start_with_config(&tls_block(&pki.server(), "  handshake_first: true\n"), &[]);
    let client = timeout(
        ARRIVES,
        jsclient::ConnectOptions::new()
            .add_root_certificates(pki.ca_file())
            .tls_first()
            .connect(format!("127.0.0.1:{}", server.port)),
    )
    .await
    .unwrap()
    .expect("jsclient TLS first");
    client.flush().await.unwrap();
    drop(server);

    let plain = TestServer::start(&[]);
    let err = timeout(
        ARRIVES,
        jsclient::ConnectOptions::new().connect(format!("tls://127.0.0.1:{}", plain.port)),
    )
    .await
    .unwrap()
    .expect_err("tls:// to a plain server");
    assert!(matches!(err, jsclient::ConnectError::Tls(_)), "{err}");
}

/// HTTPS GET of `path` on `port`, trusting `pki`'s CA; returns the response.
async fn https_get(pki: &Pki, port: u16, path: &str) -> std::io::Result<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut roots = rustls::RootCertStore::empty();
    roots.add(pki.ca.der().clone()).expect("root");
    let config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    let mut tls = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config))
        .connect("127.0.0.1".try_into().unwrap(), tcp)
        .await?;
    tls.write_all(format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").as_bytes())
        .await?;
    let mut response = Vec::new();
    let _ = tls.read_to_end(&mut response).await;
    Ok(String::from_utf8_lossy(&response).into_owned())
}

/// The port of `Starting https monitor on HOST:PORT`.
fn https_port(log: &str) -> u16 {
    let line = log
        .lines()
        .find(|l| l.contains("Starting https monitor on"))
        .unwrap_or_else(|| panic!("no https monitor line:\n{log}"));
    line.rsplit(':').next().unwrap().trim().parse().unwrap()
}

#[tokio::test]
async fn https_port_serves_monitoring_over_tls_without_client_certificates() {
    let pki = Pki::new();
    let conf = format!(
        "https: \"127.0.0.1:-1\"\n{}",
        tls_block(
            &pki.server(),
            &format!(
                "  ca_file: {:?}\n  verify: true\n",
                pki.ca_file().display().to_string()
            )
        )
    );
    let server = TestServer::start_with_config(&conf, &[]);
    let port = https_port(&server.log_text());
    let varz = timeout(ARRIVES, https_get(&pki, port, "/varz"))
        .await
        .expect("answered in time")
        .expect("HTTPS GET");
    assert!(varz.starts_with("HTTP/1."), "{varz}");
    assert!(varz.contains(" 200 "), "{varz}");
    assert!(varz.contains("\"server_id\""), "{varz}");
    // Plain HTTP on the HTTPS port gets no monitoring answer.
    let mut raw = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    raw.set_read_timeout(Some(ARRIVES)).unwrap();
    std::io::Write::write_all(&mut raw, b"GET /varz HTTP/1.0\r\n\r\n").unwrap();
    let mut got = Vec::new();
    let _ = std::io::Read::read_to_end(&mut raw, &mut got);
    assert!(
        !String::from_utf8_lossy(&got).contains("server_id"),
        "plain HTTP answered on the HTTPS port"
    );
}

#[test]
fn https_needs_tls_and_excludes_http() {
    let run = common::run_to_exit(&["-a", "127.0.0.1", "-p", "-1", "--https_port", "-1"]);
    let err = run.stderr;
    assert!(!run.status.success());
    assert!(err.contains("TLS cert and key required for HTTPS"), "{err}");
    let run = common::run_to_exit(&["-a", "127.0.0.1", "-p", "-1", "-m", "-1", "-ms", "-1"]);
    let err = run.stderr;
    assert!(!run.status.success());
    assert!(
        err.contains("can't specify both HTTP (-1) and HTTPs (-1) ports"),
        "{err}"
    );
}

/// A reload decides certificate-mapped clients by their certificates again: one whose user
/// stays keeps its connection with the new permissions, one whose user is gone is closed.
#[tokio::test]
async fn a_reload_keeps_mapped_clients_by_their_certificate() {
    let pki = Pki::new();
    let server = TestServer::start_with_config(&mapped_config(&pki), &[]);
    let alice = pki.client(
        "alice",
        &[(DnType::CommonName, "Alice")],
        vec![email("alice@example.com")],
    );
    let alice = tls_connect(
        &server,
        tls_client(&pki)
            .add_client_certificate(alice.cert, alice.key)
            .max_reconnects(Some(1)),
    )
    .await
    .expect("alice maps by email");
    let worker = pki.client(
        "worker",
        &[(DnType::CommonName, "worker")],
        vec![dns("worker.example.com")],
    );
    let worker = tls_connect(
        &server,
        tls_client(&pki)
            .add_client_certificate(worker.cert, worker.key)
            .max_reconnects(Some(1)),
    )
    .await
    .expect("worker maps by DNS name");
    round_trip(&worker, "work.before").await;

    // Alice may now publish on alice2.> only; the worker's user is gone.
    let ca = pki.ca_file().display().to_string();
    let tls = tls_block(
        &pki.server(),
        &format!("  ca_file: {ca:?}\n  verify_and_map: true\n"),
    );
    let after = format!(
        "{tls}authorization {{\n  users: [\n    \
         {{ user: \"alice@example.com\", permissions: {{ publish: \"alice2.>\", subscribe: \">\" }} }}\n  \
         ]\n}}\n"
    );
    std::fs::write(server.config_path(), after).unwrap();
    let status = std::process::Command::new("kill")
        .args(["-HUP", &server.pid().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let deadline = std::time::Instant::now() + ARRIVES;
    while !server.log_text().contains("Reloaded server configuration") {
        assert!(
            std::time::Instant::now() < deadline,
            "{}",
            server.log_text()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Alice stays, under the new permissions.
    only_allowed_arrives(&alice, "alice.1", "alice2.1").await;
    assert_eq!(
        alice.connection_state(),
        async_nats::connection::State::Connected
    );
    // The worker is closed and cannot come back.
    let deadline = std::time::Instant::now() + ARRIVES;
    while worker.connection_state() == async_nats::connection::State::Connected {
        assert!(
            std::time::Instant::now() < deadline,
            "worker still connected"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
