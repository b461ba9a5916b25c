//! Lame-duck mode and the other signals, against the real binary: SIGUSR2 (or `--signal
//! ldm=<pid file>`) stops new connections, sends connected clients an INFO with `"ldm":true`
//! (async-nats reports `Event::LameDuckMode`), closes them after the grace period and exits
//! with JetStream's data kept; `-P` writes the pid file; SIGUSR1 moves logging to a fresh log
//! file; SIGHUP reloads an unchanged config.
//!
//! Every test also passes against nats-server 2.15.1
//! (`JSSERVER_TEST_BINARY=$(which nats-server) cargo test -p jsserver --test lame_duck`),
//! except where one says it states jsserver's own behaviour. nats-server's smallest
//! `lame_duck_duration` is 30 s; with a 1 s grace period and a few clients closed at most a
//! second apart, a run takes a few seconds. Waits have generous upper bounds; nothing
//! asserts how long something took.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::process::{Command, Output};
use std::time::Duration;

use common::TestServer;
use rustix::process::{kill_process, Pid, Signal};

/// Upper bound for everything to happen: generous, these are waits for conditions.
const WAIT: Duration = Duration::from_secs(60);

/// The shortest lame-duck settings nats-server accepts.
const LAME_DUCK_CONF: &str = "lame_duck_duration: \"30s\"\nlame_duck_grace_period: \"1s\"\n";

fn send(server: &TestServer, signal: Signal) {
    let pid = Pid::from_raw(server.pid() as i32).expect("pid");
    kill_process(pid, signal).expect("kill");
}

/// Runs the binary under test with `args` (a `--signal` call) and returns what it did.
fn run(args: &[&str]) -> Output {
    Command::new(common::server_binary())
        .args(args)
        .output()
        .expect("run the binary")
}

/// A raw client that sent CONNECT (protocol 1) and PING, and got its PONG: nats-server then
/// sends it asynchronous INFOs.
fn raw_client(port: u16) -> BufReader<TcpStream> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stream.set_read_timeout(Some(WAIT)).expect("read timeout");
    stream
        .write_all(b"CONNECT {\"verbose\":false,\"protocol\":1}\r\nPING\r\n")
        .expect("write");
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).expect("INFO");
    assert!(line.starts_with("INFO "), "{line}");
    loop {
        line.clear();
        reader.read_line(&mut line).expect("PONG");
        if line == "PONG\r\n" {
            return reader;
        }
        assert!(line.starts_with("INFO "), "unexpected {line:?}");
    }
}

/// Reads lines until an INFO with `"ldm":true`; returns it.
fn read_ldm_info(reader: &mut BufReader<TcpStream>) -> String {
    loop {
        let mut line = String::new();
        let n = reader.read_line(&mut line).expect("read");
        assert!(n > 0, "connection closed before the lame-duck INFO");
        if line.starts_with("INFO ") && line.contains("\"ldm\":true") {
            return line;
        }
        assert!(
            line.starts_with("INFO ") || line == "PING\r\n",
            "unexpected {line:?}"
        );
    }
}

/// Reads until the server closes the connection (EOF or reset).
fn read_to_close(reader: &mut BufReader<TcpStream>) {
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match reader.read_until(b'\n', &mut buf) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

#[tokio::test]
async fn sigusr2_lame_duck_informs_clients_refuses_new_ones_closes_them_and_exits() {
    let mut server = TestServer::start_with_config(LAME_DUCK_CONF, &[]);
    let port = server.port;
    let store = server.dir.path().join("store");

    let (nc, mut events) = client_with_events(&server).await;
    // Something in a stream, to find again after the exit.
    let js = async_nats::jetstream::new(nc.clone());
    js.create_stream(async_nats::jetstream::stream::Config {
        name: "KEEP".into(),
        subjects: vec!["keep.>".into()],
        ..Default::default()
    })
    .await
    .expect("create stream");
    js.publish("keep.1", "kept".into())
        .await
        .expect("publish")
        .await
        .expect("PubAck");
    nc.flush().await.expect("flush");
    let mut raw = tokio::task::spawn_blocking(move || raw_client(port))
        .await
        .unwrap();

    send(&server, Signal::USR2);

    let info = tokio::task::spawn_blocking(move || {
        let info = read_ldm_info(&mut raw);
        (info, raw)
    });
    let (info, mut raw) = tokio::time::timeout(WAIT, info)
        .await
        .expect("lame-duck INFO in time")
        .unwrap();
    assert!(info.contains("\"ldm\":true"), "{info}");
    // async-nats sees the same INFO as its lame-duck event.
    lame_duck_event(&mut events).await;

    // The listener is closed: a new connection is refused.
    let refused = TcpStream::connect(("127.0.0.1", port));
    assert!(
        refused.is_err(),
        "a new connection was accepted in lame-duck mode"
    );

    // After the grace period the clients are closed and the server exits.
    tokio::time::timeout(
        WAIT,
        tokio::task::spawn_blocking(move || read_to_close(&mut raw)),
    )
    .await
    .expect("raw client closed in time")
    .unwrap();
    let status = tokio::task::spawn_blocking(move || {
        let status = server.wait_for_exit(WAIT);
        (status, server)
    });
    let (status, server) = status.await.unwrap();
    assert!(status.success(), "{status}");
    let log = server.log_text();
    assert!(
        log.contains("Entering lame duck mode, stop accepting new clients"),
        "{log}"
    );
    drop(nc);

    // JetStream was stopped with its data: a new server on the same store has the message.
    let config = server.config_path().display().to_string();
    let store = store.display().to_string();
    let server = TestServer::restart(server, &["-c", &config, "-sd", &store]);
    let nc = async_nats::connect(server.url()).await.expect("connect");
    let js = async_nats::jetstream::new(nc);
    let mut stream = js.get_stream("KEEP").await.expect("stream recovered");
    assert_eq!(stream.info().await.expect("info").state.messages, 1);
    let msg = stream.get_raw_message(1).await.expect("message 1");
    assert_eq!(&msg.payload[..], b"kept");
}

#[test]
fn pid_file_is_written_and_signal_ldm_with_the_pid_file_stops_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("server.pid");
    let pid_arg = pid_file.display().to_string();
    let mut server = TestServer::start_with_config(LAME_DUCK_CONF, &["-P", &pid_arg]);
    let written = std::fs::read_to_string(&pid_file).expect("pid file");
    assert_eq!(written.trim(), server.pid().to_string());

    // Bad calls fail with nats-server's texts and touch nothing.
    let bad = run(&["--signal", "ldm=notapid"]);
    assert_eq!(bad.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(stderr.contains("invalid pid: notapid"), "{stderr}");
    let bad = run(&["--signal", &format!("bogus={pid_arg}")]);
    assert_eq!(bad.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(stderr.contains("unknown signal \"bogus\""), "{stderr}");

    // `-sl ldm=<pid file>`: without clients, lame-duck mode ends at once with the exit.
    let sent = run(&["-sl", &format!("ldm={pid_arg}")]);
    assert!(
        sent.status.success(),
        "{:?} {}",
        sent.status,
        String::from_utf8_lossy(&sent.stderr)
    );
    let status = server.wait_for_exit(WAIT);
    assert!(status.success(), "{status}");
    let log = server.log_text();
    assert!(log.contains("Entering lame duck mode"), "{log}");
}

#[test]
fn sigusr1_reopens_the_log_file() {
    let mut server = TestServer::start(&[]);
    let rotated = server.dir.path().join("server.log.1");
    std::fs::rename(&server.log, &rotated).expect("rotate the log away");
    send(&server, Signal::USR1);
    // The configured path gets a fresh file with the notice in it.
    let fresh = server.wait_for_log("File log re-opened");
    assert!(!fresh.contains("Server is ready"), "{fresh}");
    let old = std::fs::read_to_string(&rotated).unwrap();
    assert!(old.contains("Server is ready"), "{old}");
    assert!(!old.contains("File log re-opened"), "{old}");
    // `--signal reopen=<pid>` does the same.
    std::fs::rename(&server.log, &rotated).expect("rotate again");
    let sent = run(&["--signal", &format!("reopen={}", server.pid())]);
    assert!(sent.status.success(), "{:?}", sent.status);
    server.wait_for_log("File log re-opened");
    let status = server.terminate();
    assert!(status.success(), "{status}");
}

#[test]
fn sighup_reloads_an_unchanged_config_and_keeps_running() {
    let mut server = TestServer::start_with_config(LAME_DUCK_CONF, &[]);
    send(&server, Signal::HUP);
    server.wait_for_log("Reloaded server configuration");
    assert!(TcpStream::connect(("127.0.0.1", server.port)).is_ok());
    let status = server.terminate();
    assert!(status.success(), "{status}");
}

/// A reload that changes a setting which takes a restart (`lame_duck_duration`, as in
/// nats-server) fails, naming it with nats-server's text, and the server goes on as it was.
#[test]
fn sighup_with_a_changed_config_is_refused_and_the_server_keeps_running() {
    let mut server = TestServer::start_with_config(LAME_DUCK_CONF, &[]);
    let changed = LAME_DUCK_CONF.replace("30s", "40s");
    std::fs::write(server.config_path(), changed).unwrap();
    send(&server, Signal::HUP);
    let log = server.wait_for_log("Failed to reload server configuration");
    assert!(
        log.contains("config reload not supported for LameDuckDuration: old=30s, new=40s"),
        "{log}"
    );
    assert!(TcpStream::connect(("127.0.0.1", server.port)).is_ok());
    let status = server.terminate();
    assert!(status.success(), "{status}");
}

/// A client whose lame-duck events come out of the returned channel.
async fn client_with_events(
    server: &TestServer,
) -> (
    async_nats::Client,
    tokio::sync::mpsc::UnboundedReceiver<async_nats::Event>,
) {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let nc = async_nats::ConnectOptions::new()
        .event_callback(move |event| {
            let tx = tx.clone();
            async move {
                let _ = tx.send(event);
            }
        })
        .connect(server.url())
        .await
        .expect("connect");
    (nc, rx)
}

async fn lame_duck_event(events: &mut tokio::sync::mpsc::UnboundedReceiver<async_nats::Event>) {
    tokio::time::timeout(WAIT, async {
        while let Some(event) = events.recv().await {
            if matches!(event, async_nats::Event::LameDuckMode) {
                return;
            }
        }
        panic!("events ended without Event::LameDuckMode");
    })
    .await
    .expect("lame-duck event in time");
}

#[tokio::test]
async fn lame_duck_closes_every_client_one_after_the_other_then_exits() {
    let mut server = TestServer::start_with_config(LAME_DUCK_CONF, &[]);
    let (a, mut a_events) = client_with_events(&server).await;
    let (b, mut b_events) = client_with_events(&server).await;
    a.flush().await.expect("flush a");
    b.flush().await.expect("flush b");
    send(&server, Signal::USR2);
    lame_duck_event(&mut a_events).await;
    lame_duck_event(&mut b_events).await;
    let status = tokio::task::spawn_blocking(move || {
        let status = server.wait_for_exit(WAIT);
        (status, server)
    });
    let (status, server) = status.await.unwrap();
    assert!(status.success(), "{status}");
    let log = server.log_text();
    assert!(log.contains("Entering lame duck mode"), "{log}");
    // Both were disconnected by the server.
    for events in [&mut a_events, &mut b_events] {
        tokio::time::timeout(WAIT, async {
            while let Some(event) = events.recv().await {
                if matches!(event, async_nats::Event::Disconnected) {
                    return;
                }
            }
        })
        .await
        .expect("disconnected in time");
    }
}
