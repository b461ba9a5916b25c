//! The config schema is strict, as nats-server's: a misspelt key or block (`authorisation`,
//! `tsl`, `acounts`, a typo in `jetstream { }` or `cluster { }`) stops the real binary at
//! start-up with `FILE:LINE:COLUMN: unknown field "KEY"` instead of starting it open; `-t`
//! checks a config file and exits; top-level `max_subscriptions` and `max_sub_tokens` are
//! enforced per connection.
//!
//! Where nats-server behaves the same, these also pass with `JSSERVER_TEST_BINARY=nats-server`
//! (its columns on line 1 count from 0, so the keys under test are never on line 1).

mod common;

use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{free_port, server_binary, Raw, TestServer};

/// How long a server that should refuse its config may take to exit: generous, it is a wait
/// for a condition.
const EXIT_WAIT: Duration = Duration::from_secs(30);

fn is_nats_server() -> bool {
    server_binary().contains("nats-server")
}

/// Runs the binary with `args` to its exit (killed after [`EXIT_WAIT`]); also returns whether
/// anything accepted a connection on `port` meanwhile.
fn run(args: &[&str], port: Option<u16>) -> (Output, bool) {
    let mut child = Command::new(server_binary())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the server");
    let deadline = Instant::now() + EXIT_WAIT;
    let mut accepted = false;
    loop {
        if let Some(port) = port {
            let addr = SocketAddr::from(([127, 0, 0, 1], port));
            accepted |= TcpStream::connect_timeout(&addr, Duration::from_millis(100)).is_ok();
        }
        if child.try_wait().expect("wait").is_some() || Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let _ = child.kill();
    (child.wait_with_output().expect("output"), accepted)
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Writes `text` to `dir/name` and returns the path as a string.
fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write config");
    path.display().to_string()
}

#[test]
fn misspelt_blocks_do_not_start_and_name_file_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let port = free_port();
    // (what, config after the `listen` line (which is line 2), the key, its line and column)
    let cases = [
        (
            "authorization misspelt at the top",
            "authorisation {\n  token: s3cret\n}\n".to_owned(),
            "authorisation",
            3,
            1,
        ),
        (
            "tls misspelt",
            "  tsl {\n    verify: true\n  }\n".to_owned(),
            "tsl",
            3,
            3,
        ),
        (
            "accounts misspelt",
            "acounts {\n  A: { users: [ {user: a, password: a} ] }\n}\n".to_owned(),
            "acounts",
            3,
            1,
        ),
        (
            "authorization misspelt in cluster",
            "server_name: s1\ncluster {\n  port: -1\n  authorisation { user: r, password: p }\n}\n"
                .to_owned(),
            "authorisation",
            6,
            3,
        ),
        (
            "a typo in jetstream",
            format!(
                "jetstream {{\n  store_dir: \"{}\"\n\tmax_memroy: 1G\n}}\n",
                store.display()
            ),
            "max_memroy",
            5,
            2,
        ),
    ];
    let mut problems = Vec::new();
    for (what, body, key, line, column) in &cases {
        let file = write(
            dir.path(),
            "server.conf",
            &format!("# {what}\nlisten: 127.0.0.1:{port}\n{body}"),
        );
        let needle = format!("{file}:{line}:{column}: unknown field \"{key}\"");
        let (out, accepted) = run(&["-c", &file], Some(port));
        let text = stderr(&out);
        if out.status.success() || out.status.code().is_none() {
            problems.push(format!("{what}: exit status {} ({text})", out.status));
        }
        if !text.contains(&needle) {
            problems.push(format!("{what}: no {needle:?} in:\n{text}"));
        }
        if accepted || text.contains("Listening for") {
            problems.push(format!("{what}: it listened:\n{text}"));
        }
        // `-t` says the same.
        let (out, _) = run(&["-t", "-c", &file], None);
        let text = stderr(&out);
        if out.status.code() != Some(1) || !text.contains(&needle) {
            problems.push(format!("{what}: -t gave {} with:\n{text}", out.status));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}

#[test]
fn check_config_good_and_bad() {
    let dir = tempfile::tempdir().unwrap();
    let name = if is_nats_server() {
        "nats-server"
    } else {
        "jsserver"
    };
    // A valid file: exit 0 and nats-server's line, with its digest of the parsed config
    // (both servers compute the same for the same file).
    let good = write(
        dir.path(),
        "good.conf",
        "# good\nport: 4333\nP: 4444\nhttp_port: $P\n\
         authorization { users: [ {user: a, password: b} ], timeout: 2.5 }\n\
         server_metadata { \"a<b>\": \"x\\ty \\xc3\\xa9\" }\n\
         jetstream { max_mem: 64MB, sync_interval: always }\nmax_subs: 10\n",
    );
    let (out, _) = run(&["-t", "-c", &good], None);
    let text = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    let want = format!(
        "{name}: configuration file {good} is valid \
         (sha256:023fc78f2912367f0aea84e1e15e6611bfbc4414b97f34024e11cf8aa39fcae7)"
    );
    assert!(text.lines().any(|l| l == want), "no {want:?} in:\n{text}");
    // Every unknown key of the file, each with its place (nats-server lists them in no fixed
    // order; jsserver in file order).
    let bad = write(
        dir.path(),
        "bad.conf",
        "# bad\nport: 4333\nbogus: 1\njetstream {\n  max_memroy: 1G\n}\n",
    );
    let (out, _) = run(&["-t", "-c", &bad], None);
    let text = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.starts_with(&format!("{name}: ")), "{text}");
    for needle in [
        format!("{bad}:3:1: unknown field \"bogus\""),
        format!("{bad}:5:3: unknown field \"max_memroy\""),
    ] {
        assert!(text.contains(&needle), "no {needle:?} in:\n{text}");
    }
    // No file to check.
    let (out, _) = run(&["-t"], None);
    let text = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("must specify [-c, --config] option to check configuration file syntax"),
        "{text}"
    );
    let missing = dir.path().join("missing.conf").display().to_string();
    let (out, _) = run(&["-t", "-c", &missing], None);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
}

/// jsserver's own: settings it does not enforce fail `-t` as they fail a start (nats-server
/// has them).
#[test]
fn check_config_refuses_what_a_start_refuses() {
    if is_nats_server() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for (body, needle) in [
        (
            "port: 4333\nmappings {\n  \"audit.>\": \"blackhole.>\"\n}\n",
            ":2:1: \"mappings\" is not supported yet (access control",
        ),
        (
            "port: 4333\nleafnodes { port: 7422 }\n",
            ":2:1: \"leafnodes\" is not supported yet (replication",
        ),
        (
            "port: 4333\njetstream {\n  limits { max_ha_assets: 1 }\n}\n",
            ":3:3: \"jetstream.limits\" is not supported yet (resource limits",
        ),
    ] {
        let file = write(dir.path(), "refused.conf", body);
        let (out, _) = run(&["-t", "-c", &file], None);
        let text = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{body}: {text}");
        assert!(text.contains(&format!("{file}{needle}")), "{body}: {text}");
    }
    // Flags count too.
    let file = write(dir.path(), "good.conf", "port: 4333\n");
    let (out, _) = run(&["-t", "-c", &file, "--no_advertise"], None);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    // Ignored keys pass, with their warning before the verdict.
    let file = write(
        dir.path(),
        "ignored.conf",
        "port: 4333\nhttp_base_path: /x\n",
    );
    let (out, _) = run(&["-t", "-c", &file], None);
    let text = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(lines[0].contains("\"http_base_path\""), "{text}");
    assert!(lines[1].contains("is valid (sha256:"), "{text}");
}

/// jsserver's own bound (nats-server runs out of memory on this): variables that copy a long
/// string over and over stop the parse at 32 MiB of text, quickly, instead of building
/// gigabytes.
#[test]
fn variables_copying_long_text_are_bounded() {
    if is_nats_server() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // 1 MiB, then 10 copies of it, then 10 copies of those...: 10 GiB if built.
    let mut text = format!("port: 4333\ns0: \"{}\"\n", "x".repeat(1 << 20));
    for i in 1..5 {
        let refs = vec![format!("$s{}", i - 1); 10].join(", ");
        text.push_str(&format!("s{i}: [{refs}]\n"));
    }
    let file = write(dir.path(), "copies.conf", &text);
    let started = Instant::now();
    let (out, _) = run(&["-t", "-c", &file], None);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("{file}:4:")) && err.contains("more than 32 MiB of config text"),
        "{err}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "took {:?}",
        started.elapsed()
    );
}

/// Connects a raw client (`user`/`pass` when given) and returns it after its CONNECT.
fn raw_client(port: u16, user: Option<(&str, &str)>) -> Raw {
    let (mut raw, _info) = Raw::connect(port);
    let connect = match user {
        Some((u, p)) => format!(
            "CONNECT {{\"verbose\":false,\"pedantic\":false,\"user\":\"{u}\",\"pass\":\"{p}\"}}\r\n"
        ),
        None => "CONNECT {\"verbose\":false,\"pedantic\":false}\r\n".to_owned(),
    };
    raw.send(connect.as_bytes());
    raw.send(b"PING\r\n");
    raw.expect_line("PONG\r\n");
    raw
}

const MAX_SUBS: &str = "-ERR 'maximum subscriptions exceeded'\r\n";

#[test]
fn max_subscriptions_and_max_sub_tokens_are_enforced_per_connection() {
    let server = TestServer::start_with_config("max_subscriptions: 2\nmax_sub_tokens: 3\n", &[]);
    let mut a = raw_client(server.port, None);
    // Two subscriptions; the third is refused and the client stays; at the limit even a
    // repeated sid is refused, as by nats-server.
    a.send(b"SUB a 1\r\nSUB b 2\r\nSUB c 3\r\nSUB a 1\r\nPING\r\n");
    a.expect_line(MAX_SUBS);
    a.expect_line(MAX_SUBS);
    a.expect_line("PONG\r\n");
    // Per connection: another client has its own two.
    let mut b = raw_client(server.port, None);
    b.send(b"SUB x 1\r\nSUB y 2\r\nPING\r\n");
    b.expect_line("PONG\r\n");
    // Room again after an UNSUB; a subject of more than 3 tokens is refused (checked before
    // the count, as by nats-server), one of 3 taken.
    a.send(b"UNSUB 1\r\nSUB a.b.c.d 4\r\nSUB a.b.c 5\r\nPING\r\n");
    a.expect_line(
        "-ERR 'Permissions Violation for Subscription to \"a.b.c.d\", too many tokens'\r\n",
    );
    a.expect_line("PONG\r\n");
    a.send(b"PUB a.b.c 2\r\nhi\r\nPUB c 2\r\nno\r\nPING\r\n");
    a.expect_line("MSG a.b.c 5 2\r\n");
    a.expect_line("hi\r\n");
    a.expect_line("PONG\r\n");
}

#[tokio::test]
async fn a_real_client_gets_the_error_and_keeps_its_connection() {
    use futures_util::StreamExt;
    let server = TestServer::start_with_config("max_subs: 1\n", &[]);
    let (tx, mut errors) = tokio::sync::mpsc::unbounded_channel();
    let nc = async_nats::ConnectOptions::new()
        .event_callback(move |event| {
            let tx = tx.clone();
            async move {
                if let async_nats::Event::ServerError(e) = event {
                    let _ = tx.send(e.to_string());
                }
            }
        })
        .connect(server.url())
        .await
        .expect("connect");
    let mut first = nc.subscribe("first").await.expect("subscribe");
    let mut second = nc.subscribe("second").await.expect("subscribe");
    nc.flush().await.expect("flush");
    let error = tokio::time::timeout(Duration::from_secs(10), errors.recv())
        .await
        .expect("an error in time")
        .expect("an error");
    assert!(
        error
            .to_lowercase()
            .contains("maximum subscriptions exceeded"),
        "{error}"
    );
    // The connection stays: the first subscription works, the second gets nothing.
    nc.publish("second", "lost".into()).await.unwrap();
    nc.publish("first", "kept".into()).await.unwrap();
    let msg = tokio::time::timeout(Duration::from_secs(10), first.next())
        .await
        .expect("a message in time")
        .expect("a message");
    assert_eq!(&msg.payload[..], b"kept");
    nc.flush().await.expect("flush");
    assert!(
        tokio::time::timeout(Duration::from_millis(200), second.next())
            .await
            .is_err(),
        "the refused subscription got a message"
    );
    assert_eq!(
        nc.connection_state(),
        async_nats::connection::State::Connected
    );
}

#[test]
fn the_lower_of_the_server_and_account_limit_applies() {
    let conf = "max_subscriptions: 3\naccounts {\n  \
                LOW: { users: [ {user: low, password: p} ], limits { max_subscriptions: 1 } }\n  \
                HIGH: { users: [ {user: high, password: p} ], limits { max_subscriptions: 10 } }\n  \
                NONE: { users: [ {user: none, password: p} ] }\n}\n";
    let server = TestServer::start_with_config(conf, &[]);
    for (user, limit) in [("low", 1), ("high", 3), ("none", 3)] {
        let mut c = raw_client(server.port, Some((user, "p")));
        let mut ops = String::new();
        for sid in 1..=limit + 1 {
            ops.push_str(&format!("SUB s.{sid} {sid}\r\n"));
        }
        ops.push_str("PING\r\n");
        c.send(ops.as_bytes());
        // Only the one past the limit is refused.
        c.expect_line(MAX_SUBS);
        c.expect_line("PONG\r\n");
    }
}
