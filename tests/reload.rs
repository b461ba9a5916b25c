//! Config reload on SIGHUP against the real binary.
//!
//! - Users and permissions: a client whose password no longer passes is closed with `-ERR
//!   'Authorization Violation'` (one whose user is gone, without a word), a client that stays
//!   takes the new permissions without reconnecting (a subscription they no longer allow is
//!   removed with nats-server's `-ERR`, a publish they deny is refused), a new user can log in,
//!   and a config that changes the accounts is refused as a whole.
//! - TLS: `verify` added by a reload refuses the next client without a certificate (real TLS
//!   clients, async-nats); a certificate file replaced in place is served to the next client;
//!   connected clients keep their session, as with nats-server.
//! - The other settings nats-server reloads: `max_payload` (INFO and connected clients),
//!   `max_connections` (the clients over it closed), `ping_interval`/`ping_max` (connected
//!   clients), `debug`, `pid_file`.
//! - A refused reload names the setting with nats-server's text and leaves the old
//!   configuration fully in force, including the settings it would have applied.
//!
//! `JSSERVER_TEST_BINARY=$(which nats-server) cargo test -p jsserver --test reload` runs the
//! same against nats-server (the refused account change is jsserver's own and skipped there).

mod common;

use std::time::{Duration, Instant};

use common::pki::{round_trip, tls_block, tls_client, tls_connect, Pki};
use common::{info_json, Raw, TestServer};
use rcgen::DnType;

const ARRIVES: Duration = Duration::from_secs(10);

fn against_reference() -> bool {
    std::env::var_os("JSSERVER_TEST_BINARY").is_some()
}

fn hangup(server: &TestServer) {
    let status = std::process::Command::new("kill")
        .args(["-HUP", &server.pid().to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
}

/// A raw client logged in as `user`, its CONNECT answered.
fn login(server: &TestServer, user: &str, pass: &str) -> Raw {
    let (mut raw, _) = Raw::connect(server.port);
    raw.send(
        format!(
            "CONNECT {{\"verbose\":false,\"user\":\"{user}\",\"pass\":\"{pass}\"}}\r\nPING\r\n"
        )
        .as_bytes(),
    );
    raw.expect_line("PONG\r\n");
    raw
}

/// Waits until the log has `needle` `n` times (a reload is done once it says so).
fn wait_for_log_count(server: &TestServer, needle: &str, n: usize) {
    let deadline = Instant::now() + ARRIVES;
    while server.log_text().matches(needle).count() < n {
        assert!(
            Instant::now() < deadline,
            "no {needle:?} x{n} in:\n{}",
            server.log_text()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

const BEFORE: &str = "authorization {
  users: [
    { user: alice, password: pa }
    { user: bob, password: pb }
    { user: dave, password: pd }
  ]
}
";

const AFTER: &str = "authorization {
  users: [
    { user: alice, password: pa, permissions: { publish: { deny: \"secret.>\" }, subscribe: { deny: \"x.>\" } } }
    { user: carol, password: pc }
    { user: dave, password: changed }
  ]
}
";

#[test]
fn a_reload_closes_removed_users_and_changes_permissions_in_place() {
    let server = TestServer::start_with_config(BEFORE, &[]);
    let mut alice = login(&server, "alice", "pa");
    let mut bob = login(&server, "bob", "pb");
    let mut dave = login(&server, "dave", "pd");
    alice.send(b"SUB x.> 1\r\nSUB y.> 2\r\nPING\r\n");
    alice.expect_line("PONG\r\n");
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", server.port)).is_ok(),
        "server up"
    );

    std::fs::write(server.config_path(), AFTER).unwrap();
    hangup(&server);
    wait_for_log_count(&server, "Reloaded server configuration", 1);

    // Bob's user is gone: closed without a word (nats-server: "moved account"). Dave's
    // password changed: refused and closed.
    assert_eq!(bob.line() + &bob.read_to_eof(), "");
    assert_eq!(
        dave.line() + &dave.read_to_eof(),
        "-ERR 'Authorization Violation'\r\n"
    );
    // Alice stays: her subscription on x.> is removed, y.> kept.
    alice.expect_line("-ERR 'Permissions Violation for Subscription to \"x.>\" (sid \"1\")'\r\n");
    alice.send(b"PUB x.1 1\r\na\r\nPUB y.1 1\r\nb\r\nPING\r\n");
    let (head, body) = (alice.line(), alice.line());
    assert_eq!((head.as_str(), body.as_str()), ("MSG y.1 2 1\r\n", "b\r\n"));
    alice.expect_line("PONG\r\n");
    // ... and her publishes now follow the new rules.
    alice.send(b"PUB secret.plan 1\r\nz\r\nPING\r\n");
    alice.expect_line("-ERR 'Permissions Violation for Publish to \"secret.plan\"'\r\n");
    alice.expect_line("PONG\r\n");
    // A user added by the reload may log in; the removed one may not.
    let _carol = login(&server, "carol", "pc");
    let (mut again, _) = Raw::connect(server.port);
    again.send(b"CONNECT {\"verbose\":false,\"user\":\"bob\",\"pass\":\"pb\"}\r\nPING\r\n");
    assert_eq!(
        again.line() + &again.read_to_eof(),
        "-ERR 'Authorization Violation'\r\n"
    );
}

#[test]
fn a_reload_that_changes_the_accounts_is_refused_as_a_whole() {
    if against_reference() {
        return; // nats-server reloads accounts too
    }
    let before = "accounts { A: { users: [ { user: a, password: pa } ] } }\n";
    let server = TestServer::start_with_config(before, &[]);
    let mut a = login(&server, "a", "pa");
    std::fs::write(
        server.config_path(),
        "accounts { A: { users: [ { user: a, password: pa } ] }, B: { users: [ { user: b, password: pb } ] } }\n",
    )
    .unwrap();
    hangup(&server);
    wait_for_log_count(&server, "Failed to reload server configuration", 1);
    assert!(
        server.log_text().contains("accounts changed"),
        "{}",
        server.log_text()
    );
    // Nothing changed: a is still in, b cannot log in.
    a.send(b"PING\r\n");
    a.expect_line("PONG\r\n");
    let (mut b, _) = Raw::connect(server.port);
    b.send(b"CONNECT {\"verbose\":false,\"user\":\"b\",\"pass\":\"pb\"}\r\nPING\r\n");
    assert_eq!(
        b.line() + &b.read_to_eof(),
        "-ERR 'Authorization Violation'\r\n"
    );
}

/// Writes `config` and sends SIGHUP; waits until the log has `needle` (the reload done,
/// [`DONE`], or refused, [`FAILED`]) `n` times in all.
fn reload_to(server: &TestServer, config: &str, needle: &str, n: usize) {
    std::fs::write(server.config_path(), config).unwrap();
    hangup(server);
    wait_for_log_count(server, needle, n);
}

const DONE: &str = "Reloaded server configuration";
const FAILED: &str = "Failed to reload server configuration";

#[tokio::test]
async fn verify_added_by_a_reload_refuses_the_next_client_without_a_certificate() {
    let pki = Pki::new();
    let server_pair = pki.server();
    let server = TestServer::start_with_config(&tls_block(&server_pair, ""), &[]);
    let before = tls_connect(&server, tls_client(&pki))
        .await
        .expect("no certificate needed yet");
    round_trip(&before, "before").await;

    let ca = pki.ca_file().display().to_string();
    let verify = tls_block(
        &server_pair,
        &format!("  ca_file: {ca:?}\n  verify: true\n"),
    );
    reload_to(&server, &verify, DONE, 1);
    assert!(
        server.log_text().contains("Reloaded: tls = enabled"),
        "{}",
        server.log_text()
    );

    // The next client without a certificate fails its handshake; INFO now says tls_verify.
    let refused = tls_connect(&server, tls_client(&pki)).await;
    assert!(refused.is_err(), "connected without a client certificate");
    let (_raw, info) = Raw::connect(server.port);
    assert_eq!(info_json(&info)["tls_verify"], true, "{info}");
    // One with a certificate of the CA gets in.
    let alice = pki.client("alice", &[(DnType::CommonName, "alice")], vec![]);
    let verified = tls_connect(
        &server,
        tls_client(&pki).add_client_certificate(alice.cert, alice.key),
    )
    .await
    .expect("connect with a client certificate");
    round_trip(&verified, "verified").await;
    // As nats-server: the client connected before keeps its session.
    round_trip(&before, "still").await;
}

#[tokio::test]
async fn a_certificate_file_replaced_in_place_is_served_after_a_reload() {
    let (old_ca, new_ca) = (Pki::new(), Pki::new());
    let served = old_ca.server();
    let conf = tls_block(&served, "");
    let server = TestServer::start_with_config(&conf, &[]);
    tls_connect(&server, tls_client(&old_ca))
        .await
        .expect("the old certificate is served");

    // The same paths, a certificate of another CA.
    let replacement = new_ca.server();
    std::fs::copy(&replacement.cert, &served.cert).unwrap();
    std::fs::copy(&replacement.key, &served.key).unwrap();
    reload_to(&server, &conf, DONE, 1);

    let stale = tls_connect(&server, tls_client(&old_ca)).await;
    assert!(stale.is_err(), "the old certificate is still served");
    let fresh = tls_connect(&server, tls_client(&new_ca))
        .await
        .expect("the new certificate is served");
    round_trip(&fresh, "fresh").await;
}

#[test]
fn max_payload_reaches_the_info_and_connected_clients() {
    let server = TestServer::start_with_config("max_payload: 1000\n", &[]);
    let (mut before, _) = Raw::connect(server.port);
    before.send(b"CONNECT {\"verbose\":false}\r\nPING\r\n");
    before.expect_line("PONG\r\n");
    reload_to(&server, "max_payload: 100\n", DONE, 1);
    assert!(
        server.log_text().contains("Reloaded: max_payload = 100"),
        "{}",
        server.log_text()
    );

    let (_after, info) = Raw::connect(server.port);
    assert_eq!(info_json(&info)["max_payload"], 100, "{info}");
    // The connected client is held to the new limit too.
    before.send(format!("PUB big 200\r\n{}\r\n", "x".repeat(200)).as_bytes());
    assert_eq!(
        before.line() + &before.read_to_eof(),
        "-ERR 'Maximum Payload Violation'\r\n"
    );
}

#[test]
fn a_lowered_max_connections_closes_the_clients_over_it() {
    let server = TestServer::start_with_config("max_connections: 10\n", &[]);
    let mut clients: Vec<Raw> = (0..3)
        .map(|_| {
            let (mut raw, _) = Raw::connect(server.port);
            raw.send(b"CONNECT {\"verbose\":false}\r\nPING\r\n");
            raw.expect_line("PONG\r\n");
            raw
        })
        .collect();
    reload_to(&server, "max_connections: 1\n", DONE, 1);
    assert!(
        server.log_text().contains("Reloaded: max_connections = 1"),
        "{}",
        server.log_text()
    );
    // Two of the three are closed with nats-server's error (which two is the server's
    // choice); the third stays.
    let mut closed = 0;
    for raw in &mut clients {
        raw.send(b"PING\r\n");
        let line = raw.line();
        if line == "PONG\r\n" {
            continue;
        }
        assert_eq!(
            line + &raw.read_to_eof(),
            "-ERR 'maximum connections exceeded'\r\n"
        );
        closed += 1;
    }
    assert_eq!(closed, 2);
    // A new client is one too many.
    let (mut extra, _) = Raw::connect(server.port);
    assert_eq!(
        extra.line() + &extra.read_to_eof(),
        "-ERR 'maximum connections exceeded'\r\n"
    );
}

#[test]
fn a_shorter_ping_interval_reaches_a_connected_client() {
    let server = TestServer::start_with_config("ping_interval: \"2m\"\n", &[]);
    let (mut silent, _) = Raw::connect(server.port);
    silent.send(b"CONNECT {\"verbose\":false}\r\nPING\r\n");
    silent.expect_line("PONG\r\n");
    reload_to(&server, "ping_interval: \"1s\"\nping_max: 1\n", DONE, 1);
    // The client answers no PING: with the new interval and maximum it is stale within
    // seconds (with the old ones, minutes).
    let started = Instant::now();
    loop {
        let line = silent.line();
        if line == "PING\r\n" {
            continue;
        }
        assert_eq!(line + &silent.read_to_eof(), "-ERR 'Stale Connection'\r\n");
        break;
    }
    assert!(started.elapsed() < ARRIVES);
}

#[test]
fn debug_turned_on_by_a_reload_logs_debug_lines() {
    let server = TestServer::start_with_config("debug: false\n", &[]);
    let (mut raw, _) = Raw::connect(server.port);
    raw.send(b"CONNECT {\"verbose\":false}\r\nPING\r\n");
    raw.expect_line("PONG\r\n");
    assert!(
        !server.log_text().contains("[DBG]"),
        "{}",
        server.log_text()
    );
    reload_to(&server, "debug: true\n", DONE, 1);
    assert!(server.log_text().contains("Reloaded: debug = true"));
    let (mut raw, _) = Raw::connect(server.port);
    raw.send(b"CONNECT {\"verbose\":false}\r\nPING\r\n");
    raw.expect_line("PONG\r\n");
    wait_for_log_count(&server, "[DBG]", 1);
}

#[test]
fn a_pid_file_added_by_a_reload_is_written() {
    let server = TestServer::start_with_config("", &[]);
    let pid_file = server.dir.path().join("reloaded.pid");
    reload_to(
        &server,
        &format!("pid_file: {:?}\n", pid_file.display().to_string()),
        DONE,
        1,
    );
    assert_eq!(
        std::fs::read_to_string(&pid_file).unwrap().trim(),
        server.pid().to_string()
    );
}

#[tokio::test]
async fn a_refused_reload_names_the_setting_and_leaves_the_old_config_in_force() {
    let pki = Pki::new();
    let pair = pki.server();
    let before = format!(
        "lame_duck_duration: \"30s\"\nmax_payload: 1000\n{}",
        tls_block(&pair, "")
    );
    let server = TestServer::start_with_config(&before, &[]);
    // Applicable changes (verify, max_payload) next to one that takes a restart.
    let ca = pki.ca_file().display().to_string();
    let after = format!(
        "lame_duck_duration: \"40s\"\nmax_payload: 100\n{}",
        tls_block(&pair, &format!("  ca_file: {ca:?}\n  verify: true\n"))
    );
    reload_to(&server, &after, FAILED, 1);
    assert!(
        server.log_text().contains(
            "Failed to reload server configuration: config reload not supported for \
             LameDuckDuration: old=30s, new=40s"
        ),
        "{}",
        server.log_text()
    );
    assert!(
        !server.log_text().contains("Reloaded:"),
        "{}",
        server.log_text()
    );
    // Nothing of it applies: no certificate needed, the old max_payload.
    let client = tls_connect(&server, tls_client(&pki))
        .await
        .expect("still no client certificate needed");
    assert_eq!(client.server_info().max_payload, 1000);
    round_trip(&client, "unchanged").await;
}
