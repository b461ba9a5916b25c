//! `jsctl … | head -1`: when the reader of jsctl's stdout goes away, jsctl ends at its next
//! write, quietly (no message, no panic, no backtrace) with status 141, what a shell reports
//! for the `nats` CLI or any Unix tool ended by `SIGPIPE`. Checked on a short command (core
//! `pub`), a long-running one (`sub`) and a JetStream one (`stream view`), each writing far
//! more than a pipe buffers, so a write meets the closed pipe whatever the timing.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::TestServer;

/// 128 + SIGPIPE.
const BROKEN_PIPE_STATUS: i32 = 141;

fn spawn_jsctl(url: &str, args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_jsctl"))
        .arg("--server")
        .arg(url)
        .args(args)
        .env_remove("NATS_URL")
        .env("RUST_BACKTRACE", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run jsctl")
}

/// Reads one line of `child`'s stdout as `head -1` does, closes the pipe, and checks how
/// `child` ends: status 141, nothing on stderr but `allowed_stderr` lines.
fn read_one_line_then_close(mut child: Child, allowed_stderr: &[&str]) {
    let stdout = child.stdout.take().expect("stdout piped");
    let mut first = String::new();
    BufReader::new(stdout)
        .read_line(&mut first)
        .expect("first line");
    assert!(!first.is_empty(), "jsctl wrote nothing");
    // The reader (and with it the pipe's only read end) is dropped here.
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("jsctl still running a minute after its stdout closed");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .expect("stderr piped")
        .read_to_string(&mut stderr)
        .expect("stderr");
    let unexpected: Vec<&str> = stderr
        .lines()
        .filter(|l| !allowed_stderr.contains(l))
        .collect();
    assert!(
        unexpected.is_empty(),
        "jsctl wrote to stderr after its stdout closed:\n{stderr}"
    );
    assert_eq!(
        status.code(),
        Some(BROKEN_PIPE_STATUS),
        "{status}; stderr:\n{stderr}"
    );
}

#[test]
fn core_pub_into_a_closed_pipe_ends_quietly() {
    let server = TestServer::start();
    // One line per message: some 3 MB in all.
    let child = spawn_jsctl(&server.url(), &["pub", "demo", "x", "--count", "100000"]);
    read_one_line_then_close(child, &[]);
}

#[test]
fn sub_into_a_closed_pipe_ends_quietly() {
    let server = TestServer::start();
    let child = spawn_jsctl(&server.url(), &["sub", "demo.>"]);
    // A publisher on a raw connection until the subscriber is gone.
    let done = Arc::new(AtomicBool::new(false));
    let publisher = {
        let (done, port) = (Arc::clone(&done), server.port);
        std::thread::spawn(move || {
            let mut conn = TcpStream::connect(("127.0.0.1", port)).expect("connect");
            conn.write_all(b"CONNECT {\"verbose\":false,\"pedantic\":false}\r\n")
                .expect("connect");
            let burst = b"PUB demo.x 5\r\nhello\r\n".repeat(100);
            while !done.load(Ordering::Relaxed) {
                conn.write_all(&burst).expect("publish");
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    };
    read_one_line_then_close(child, &["Subscribing on demo.>"]);
    done.store(true, Ordering::Relaxed);
    publisher.join().expect("publisher");
}

#[test]
fn stream_view_into_a_closed_pipe_ends_quietly() {
    let server = TestServer::start();
    let url = server.url();
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_jsctl"))
            .arg("--server")
            .arg(&url)
            .args(args)
            .env_remove("NATS_URL")
            .stdin(Stdio::null())
            .output()
            .expect("run jsctl");
        assert!(out.status.success(), "jsctl {args:?}: {out:?}");
    };
    run(&["stream", "add", "VIEW", "--subjects", "view.>"]);
    // 1000 messages of 200 bytes: well over a pipe's 64 KiB once shown.
    let body = "b".repeat(200);
    run(&["pub", "view.x", &body, "--count", "1000", "--jetstream"]);
    let child = spawn_jsctl(&url, &["stream", "view", "VIEW"]);
    read_one_line_then_close(child, &[]);
}
