//! Config reload on SIGHUP for users and permissions, against the real binary: a client whose
//! password no longer passes is closed with `-ERR 'Authorization Violation'` (one whose user is
//! gone, without a word), a client that stays takes the
//! new permissions without reconnecting (a subscription they no longer allow is removed with
//! nats-server's `-ERR`, a publish they deny is refused), a new user can log in, and a config
//! that changes the accounts is refused as a whole, leaving everything as it was.
//!
//! `JSSERVER_TEST_BINARY=$(which nats-server) cargo test -p jsserver --test reload` runs the
//! same against nats-server (the refused account change is jsserver's own and skipped there).

mod common;

use std::time::{Duration, Instant};

use common::{Raw, TestServer};

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
