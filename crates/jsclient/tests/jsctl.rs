//! `jsctl` and the tutorial's examples as a user runs them: processes against a spawned server
//! (see `common` for which binary), checking their output and exit codes.
//!
//! The worker tests run the `shipping_worker` example binary, which `cargo test -p jsclient`
//! builds along with the tests (`target/debug/examples/`); when only this test target is
//! built (`--test jsctl`), build it first with `cargo build -p jsclient --examples`.

mod common;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::TestServer;

/// What a finished `jsctl` run left.
struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

fn jsctl_at(url: &str, args: &[&str]) -> Out {
    let out = Command::new(env!("CARGO_BIN_EXE_jsctl"))
        .arg("--server")
        .arg(url)
        .args(args)
        .env_remove("NATS_URL")
        .env_remove("NATS_USER")
        .env_remove("NATS_PASSWORD")
        .env_remove("NATS_TOKEN")
        .env_remove("NATS_NKEY")
        .env_remove("NATS_CREDS")
        .env_remove("NATS_CERT")
        .env_remove("NATS_KEY")
        .env_remove("NATS_CA")
        .stdin(Stdio::null())
        .output()
        .expect("run jsctl");
    Out {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Runs `jsctl` and returns its stdout, failing the test unless it exited 0.
fn ok(server: &TestServer, args: &[&str]) -> String {
    let out = jsctl_at(&server.url(), args);
    assert_eq!(
        out.code, 0,
        "jsctl {args:?} failed:\nstdout:\n{}\nstderr:\n{}",
        out.stdout, out.stderr
    );
    out.stdout
}

/// Runs `jsctl`, expecting exit code 1 and a one-line error; returns that line.
fn fails(server_url: &str, args: &[&str]) -> String {
    let out = jsctl_at(server_url, args);
    assert_eq!(out.code, 1, "jsctl {args:?} should fail: {}", out.stdout);
    assert_eq!(
        out.stderr.lines().count(),
        1,
        "one line expected: {:?}",
        out.stderr
    );
    assert!(out.stderr.starts_with("jsctl: error: "), "{}", out.stderr);
    out.stderr.trim_end().to_owned()
}

fn has_line(text: &str, line: &str) -> bool {
    text.lines().any(|l| l.trim() == line)
}

/// The tutorial's work-queue aside: a work queue on `orders.>` and a durable pull
/// consumer `shipping` with the given ack wait.
fn orders_setup(server: &TestServer, ack_wait: &str) {
    ok(
        server,
        &[
            "stream",
            "add",
            "ORDERS",
            "--subjects",
            "orders.>",
            "--retention",
            "work",
            "--defaults",
        ],
    );
    ok(
        server,
        &[
            "consumer",
            "add",
            "ORDERS",
            "shipping",
            "--pull",
            "--ack",
            "explicit",
            "--wait",
            ack_wait,
            "--defaults",
        ],
    );
}

#[test]
fn stream_add_info_ls_get_purge_rm() {
    let server = TestServer::start();
    let out = ok(
        &server,
        &[
            "stream",
            "add",
            "ORDERS",
            "--subjects",
            "orders.>",
            "--retention",
            "work",
            "--defaults",
        ],
    );
    assert!(out.starts_with("Stream ORDERS was created\n\nInformation for Stream ORDERS created "));
    assert!(has_line(&out, "Subjects: orders.>"), "{out}");
    assert!(has_line(&out, "Retention: WorkQueue"), "{out}");
    assert!(has_line(&out, "Messages: 0"), "{out}");

    let out = ok(
        &server,
        &[
            "pub",
            "orders.new",
            r#"{"order_id":{{Count}}}"#,
            "--jetstream",
            "--count",
            "3",
        ],
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    assert_eq!(
        lines[2],
        r#"Published 14 bytes to "orders.new": Stored in Stream: ORDERS Sequence: 3"#
    );

    let out = ok(&server, &["stream", "info", "ORDERS"]);
    assert!(out.contains("\nState:\n\n"), "{out}");
    assert!(has_line(&out, "Messages: 3"), "{out}");
    assert!(out.contains("Last Sequence: 3 @ "), "{out}");

    let json: serde_json::Value =
        serde_json::from_str(&ok(&server, &["--json", "stream", "info", "ORDERS"])).unwrap();
    assert_eq!(json["config"]["name"], "ORDERS");
    assert_eq!(json["state"]["messages"], 3);

    assert_eq!(ok(&server, &["stream", "ls", "--names"]), "ORDERS\n");
    let out = ok(&server, &["stream", "ls"]);
    assert!(out.contains("ORDERS"), "{out}");

    let out = ok(&server, &["stream", "get", "ORDERS", "2"]);
    assert!(out.starts_with("Item: ORDERS#2 received "), "{out}");
    assert!(out.contains(" on Subject orders.new\n"), "{out}");
    assert!(has_line(&out, r#"{"order_id":2}"#), "{out}");
    let out = ok(&server, &["stream", "view", "ORDERS"]);
    assert_eq!(out.matches("Subject: orders.new").count(), 3, "{out}");

    let out = ok(&server, &["stream", "purge", "ORDERS", "-f"]);
    assert_eq!(out, "Purged 3 messages from stream ORDERS\n");
    let out = ok(&server, &["stream", "rm", "ORDERS", "-f"]);
    assert_eq!(out, "Deleted stream ORDERS\n");
    assert_eq!(ok(&server, &["stream", "ls"]), "No Streams defined\n");

    let err = fails(&server.url(), &["stream", "info", "ORDERS"]);
    assert_eq!(err, "jsctl: error: stream not found (10059)");
    let err = fails(&server.url(), &["stream", "rm", "ORDERS", "-f"]);
    assert!(err.contains("stream not found"), "{err}");
    let err = fails(&server.url(), &["pub", "nowhere", "x", "--jetstream"]);
    assert!(err.contains("no stream"), "{err}");
}

#[test]
fn consumer_add_info_next_edit_rm() {
    let server = TestServer::start();
    orders_setup(&server, "30s");
    let out = ok(&server, &["consumer", "info", "ORDERS", "shipping"]);
    assert!(
        out.starts_with("Information for Consumer ORDERS > shipping created "),
        "{out}"
    );
    for line in [
        "Pull Mode: true",
        "Ack Policy: Explicit",
        "Ack Wait: 30.00s",
        "Last Delivered Message: Consumer sequence: 0 Stream sequence: 0",
        "Acknowledgment Floor: Consumer sequence: 0 Stream sequence: 0",
        "Outstanding Acks: 0 out of maximum 1,000",
        "Redelivered Messages: 0",
        "Unprocessed Messages: 0",
        "Waiting Pulls: 0 of maximum 512",
    ] {
        assert!(has_line(&out, line), "{line:?} missing in:\n{out}");
    }

    ok(
        &server,
        &[
            "pub",
            "orders.new",
            r#"{"order_id":{{Count}}}"#,
            "-J",
            "--count",
            "3",
        ],
    );
    let out = ok(
        &server,
        &[
            "consumer", "next", "ORDERS", "shipping", "--count", "1", "--ack",
        ],
    );
    assert!(
        out.contains("] subj: orders.new / tries: 1 / cons seq: 1 / str seq: 1 / pending: 2\n"),
        "{out}"
    );
    assert!(has_line(&out, r#"{"order_id":1}"#), "{out}");
    assert!(has_line(&out, "Acknowledged message"), "{out}");

    // Not acknowledged: outstanding until the ack wait passes.
    ok(
        &server,
        &["consumer", "next", "ORDERS", "shipping", "--no-ack"],
    );
    let out = ok(&server, &["consumer", "info", "ORDERS", "shipping"]);
    assert!(
        out.contains(
            "Last Delivered Message: Consumer sequence: 2 Stream sequence: 2 Last delivery: "
        ),
        "{out}"
    );
    assert!(
        out.contains("Acknowledgment Floor: Consumer sequence: 1 Stream sequence: 1 Last Ack: "),
        "{out}"
    );
    assert!(
        has_line(&out, "Outstanding Acks: 1 out of maximum 1,000"),
        "{out}"
    );
    assert!(has_line(&out, "Unprocessed Messages: 1"), "{out}");

    let out = ok(
        &server,
        &[
            "consumer",
            "edit",
            "ORDERS",
            "shipping",
            "--max-pending",
            "20",
        ],
    );
    assert!(has_line(&out, "Max Ack Pending: 20"), "{out}");
    assert!(
        has_line(&out, "Outstanding Acks: 1 out of maximum 20"),
        "{out}"
    );
    let json: serde_json::Value = serde_json::from_str(&ok(
        &server,
        &["--json", "consumer", "info", "ORDERS", "shipping"],
    ))
    .unwrap();
    assert_eq!(json["config"]["max_ack_pending"], 20);
    assert_eq!(json["num_ack_pending"], 1);

    assert_eq!(
        ok(&server, &["consumer", "ls", "ORDERS", "--names"]),
        "shipping\n"
    );
    let out = ok(&server, &["consumer", "ls", "ORDERS"]);
    assert!(out.starts_with("Consumers for Stream ORDERS:\n"), "{out}");

    let err = fails(&server.url(), &["consumer", "info", "ORDERS", "nobody"]);
    assert!(err.contains("consumer not found"), "{err}");
    let err = fails(
        &server.url(),
        &["consumer", "edit", "NOPE", "shipping", "--max-pending", "5"],
    );
    assert!(err.contains("stream not found"), "{err}");

    assert_eq!(
        ok(&server, &["consumer", "rm", "ORDERS", "shipping", "-f"]),
        "Deleted consumer ORDERS > shipping\n"
    );
    assert_eq!(
        ok(&server, &["consumer", "ls", "ORDERS"]),
        "No Consumers defined\n"
    );
}

#[test]
fn next_on_an_empty_consumer_fails_after_wait() {
    let server = TestServer::start();
    orders_setup(&server, "30s");
    let err = fails(
        &server.url(),
        &["consumer", "next", "ORDERS", "shipping", "--wait", "300ms"],
    );
    assert_eq!(err, "jsctl: error: no message received within 0.30s");
}

#[test]
fn unreachable_server_is_one_line_and_exit_1() {
    // A port nobody listens on: bind one, learn it, close it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("nats://127.0.0.1:{port}");
    for args in [
        &["stream", "ls"][..],
        &["consumer", "info", "ORDERS", "shipping"],
    ] {
        let out = jsctl_at(&url, args);
        assert_eq!(out.code, 1);
        assert!(out.stdout.is_empty());
        assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
        assert!(
            out.stderr.starts_with(&format!(
                "jsctl: error: server unreachable: connecting to 127.0.0.1:{port}"
            )),
            "{}",
            out.stderr
        );
    }
}

#[test]
fn nats_url_env_and_core_pub_sub_request() {
    let server = TestServer::start();
    // NATS_URL instead of --server.
    let out = Command::new(env!("CARGO_BIN_EXE_jsctl"))
        .args(["stream", "ls", "--names"])
        .env("NATS_URL", server.url())
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(out.stdout.is_empty());

    let dir = tempfile::tempdir().unwrap();
    let (out_path, err_path) = (dir.path().join("sub.out"), dir.path().join("sub.err"));
    let mut sub = Command::new(env!("CARGO_BIN_EXE_jsctl"))
        .args([
            "--server",
            &server.url(),
            "sub",
            "greet.*",
            "--queue",
            "q",
            "--count",
            "2",
        ])
        .stdout(File::create(&out_path).unwrap())
        .stderr(File::create(&err_path).unwrap())
        .spawn()
        .unwrap();
    wait_for(
        &err_path,
        "Subscribing on greet.* in group q",
        Duration::from_secs(10),
    );
    assert_eq!(
        ok(
            &server,
            &["pub", "greet.joe", "hello {{Count}}", "--count", "2"]
        ),
        "Published 7 bytes to \"greet.joe\"\nPublished 7 bytes to \"greet.joe\"\n"
    );
    let status = wait_child(&mut sub, Duration::from_secs(10));
    assert!(status.success());
    let text = std::fs::read_to_string(&out_path).unwrap();
    assert_eq!(
        text,
        "[#1] Received on \"greet.joe\"\nhello 1\n\n[#2] Received on \"greet.joe\"\nhello 2\n\n"
    );

    // The JetStream API answers requests.
    let out = ok(&server, &["request", "$JS.API.INFO", ""]);
    assert!(out.starts_with("Received with rtt "), "{out}");
    assert!(
        out.contains("\"type\":\"io.nats.jetstream.api.v1.account_info_response\""),
        "{out}"
    );
    let err = fails(&server.url(), &["request", "nobody.home", "x"]);
    assert_eq!(err, "jsctl: error: no responders available for request");
}

// ---------------------------------------------------------------------------------------------
// The tutorial's workers
// ---------------------------------------------------------------------------------------------

fn example(name: &str) -> PathBuf {
    // target/debug/deps/jsctl-<hash> → target/debug/examples/<name>
    let exe = std::env::current_exe().unwrap();
    let path = exe
        .parent()
        .and_then(Path::parent)
        .unwrap()
        .join("examples")
        .join(name);
    assert!(
        path.exists(),
        "{} not found: run `cargo build -p jsclient --examples` (plain `cargo test -p jsclient` \
         builds it)",
        path.display()
    );
    path
}

/// A running `shipping_worker`; killed on drop.
struct Worker {
    child: Child,
    out: PathBuf,
}

impl Worker {
    fn start(server: &TestServer, dir: &Path, name: &str, delay: &str) -> Worker {
        let out = dir.join(format!("{name}.out"));
        let child = Command::new(example("shipping_worker"))
            .args(["--server", &server.url(), "--name", name, "--delay", delay])
            .arg("--shipped-dir")
            .arg(dir.join("shipped"))
            .stdin(Stdio::null())
            .stdout(File::create(&out).unwrap())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn shipping_worker");
        let worker = Worker { child, out };
        wait_for(&worker.out, "waiting for orders", Duration::from_secs(10));
        worker
    }

    fn output(&self) -> String {
        std::fs::read_to_string(&self.out).unwrap_or_default()
    }

    /// SIGINT, as Ctrl-C: the worker finishes its order and exits 0.
    fn interrupt(&mut self) {
        let status = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        let status = wait_child(&mut self.child, Duration::from_secs(10));
        assert!(status.success(), "worker exit: {status}");
    }

    /// SIGKILL: the worker dies mid-order, without acknowledging.
    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.kill();
    }
}

fn wait_for(path: &Path, needle: &str, limit: Duration) -> String {
    let deadline = Instant::now() + limit;
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if text.contains(needle) {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "{needle:?} not in {}:\n{text}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn wait_child(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("process did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn three_workers_share_the_orders_and_each_ships_once() {
    let server = TestServer::start();
    let dir = tempfile::tempdir().unwrap();
    orders_setup(&server, "30s");
    let mut workers: Vec<Worker> = ["w1", "w2", "w3"]
        .iter()
        .map(|n| Worker::start(&server, dir.path(), n, "100ms"))
        .collect();
    ok(
        &server,
        &[
            "pub",
            "orders.new",
            r#"{"order_id":{{Count}}}"#,
            "-J",
            "--count",
            "30",
        ],
    );
    let shipped = dir.path().join("shipped");
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::fs::read_dir(&shipped).map_or(0, Iterator::count) < 30 {
        assert!(Instant::now() < deadline, "not all 30 orders shipped");
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut all = Vec::new();
    for w in &mut workers {
        w.interrupt();
        let out = w.output();
        let mine: Vec<u64> = out
            .lines()
            .filter_map(|l| l.split_once(": shipped order ")?.1.parse().ok())
            .collect();
        assert!(!mine.is_empty(), "a worker shipped nothing:\n{out}");
        assert!(out.ends_with(": stopping\n"), "{out}");
        all.extend(mine);
    }
    all.sort_unstable();
    assert_eq!(all, (1..=30).collect::<Vec<u64>>());

    let out = ok(&server, &["consumer", "info", "ORDERS", "shipping"]);
    for line in [
        "Acknowledgment Floor: Consumer sequence: 30 Stream sequence: 30",
        "Outstanding Acks: 0 out of maximum 1,000",
        "Unprocessed Messages: 0",
    ] {
        assert!(
            out.lines().any(|l| l.trim().starts_with(line)),
            "{line:?} missing in:\n{out}"
        );
    }
    // A work queue: acknowledged orders are gone from the stream.
    let out = ok(&server, &["stream", "info", "ORDERS"]);
    assert!(has_line(&out, "Messages: 0"), "{out}");
}

#[test]
fn a_killed_workers_order_is_redelivered_to_another_and_ships_once() {
    let server = TestServer::start();
    let dir = tempfile::tempdir().unwrap();
    orders_setup(&server, "2s");
    let mut slow = Worker::start(&server, dir.path(), "slow", "60s");
    ok(&server, &["pub", "orders.new", r#"{"order_id":7}"#, "-J"]);
    wait_for(
        &slow.out,
        "slow: shipping order 7 (delivery 1)",
        Duration::from_secs(10),
    );
    slow.kill();
    let out = ok(&server, &["consumer", "info", "ORDERS", "shipping"]);
    assert!(
        has_line(&out, "Outstanding Acks: 1 out of maximum 1,000"),
        "{out}"
    );

    // After the 2 s ack wait the server redelivers it to the worker still running.
    let started = Instant::now();
    let fast = Worker::start(&server, dir.path(), "fast", "0s");
    let text = wait_for(&fast.out, "fast: shipped order 7", Duration::from_secs(15));
    assert!(
        text.contains("fast: shipping order 7 (delivery 2)"),
        "{text}"
    );
    assert!(started.elapsed() < Duration::from_secs(15));
    assert!(!slow.output().contains("shipped order 7"));

    // The same order again (say, published twice): keyed by order_id, it ships once.
    ok(&server, &["pub", "orders.new", r#"{"order_id":7}"#, "-J"]);
    wait_for(
        &fast.out,
        "fast: order 7 already shipped (delivery 1); acking",
        Duration::from_secs(10),
    );
    let marker = std::fs::read_to_string(dir.path().join("shipped").join("order-7")).unwrap();
    assert_eq!(marker, "fast\n");

    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let out = ok(&server, &["consumer", "info", "ORDERS", "shipping"]);
        if has_line(&out, "Outstanding Acks: 0 out of maximum 1,000") {
            assert!(has_line(&out, "Unprocessed Messages: 0"), "{out}");
            break;
        }
        assert!(Instant::now() < deadline, "acks still outstanding:\n{out}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn priority_groups_pause_and_unpin() {
    let server = TestServer::start();
    ok(
        &server,
        &[
            "stream",
            "add",
            "JOBS",
            "--subjects",
            "jobs.>",
            "--defaults",
        ],
    );
    let out = ok(
        &server,
        &[
            "consumer",
            "add",
            "JOBS",
            "pin",
            "--pull",
            "--priority-policy",
            "pinned_client",
            "--priority-groups",
            "jobs",
            "--pinned-ttl",
            "10m",
            "--defaults",
        ],
    );
    assert!(has_line(&out, "Priority Policy: Pinned Client"), "{out}");
    assert!(has_line(&out, "Priority Groups: jobs"), "{out}");
    assert!(has_line(&out, "Pinned TTL: 10m0s"), "{out}");
    assert!(has_line(&out, "Pinned (jobs): no client"), "{out}");
    ok(&server, &["pub", "jobs.x", "one", "--jetstream"]);
    // A pull without the group is refused by the server, with the group it is served.
    let err = fails(
        &server.url(),
        &["consumer", "next", "JOBS", "pin", "--wait", "2s"],
    );
    assert!(err.contains("Priority Group missing"), "{err}");
    let out = ok(
        &server,
        &[
            "consumer", "next", "JOBS", "pin", "--group", "jobs", "--raw",
        ],
    );
    assert_eq!(out.trim(), "one");
    let out = ok(&server, &["consumer", "info", "JOBS", "pin"]);
    let pinned = out
        .lines()
        .find(|l| l.trim().starts_with("Pinned (jobs):"))
        .expect("a pinned row");
    assert!(pinned.contains(" since "), "{out}");
    let out = ok(&server, &["consumer", "unpin", "JOBS", "pin", "jobs"]);
    assert_eq!(out.trim(), "Unpinned group jobs of consumer JOBS > pin");
    let err = fails(&server.url(), &["consumer", "unpin", "JOBS", "pin", "nope"]);
    assert!(err.contains("10160"), "{err}");
    let out = ok(&server, &["consumer", "info", "JOBS", "pin"]);
    assert!(has_line(&out, "Pinned (jobs): no client"), "{out}");

    let out = ok(&server, &["consumer", "pause", "JOBS", "pin", "1h"]);
    assert!(out.starts_with("Paused JOBS > pin until "), "{out}");
    let out = ok(&server, &["consumer", "info", "JOBS", "pin"]);
    assert!(out.contains("Paused Until: "), "{out}");
    let err = fails(&server.url(), &["consumer", "pause", "JOBS", "pin", "soon"]);
    assert!(err.contains("neither a duration"), "{err}");
    let out = ok(&server, &["consumer", "resume", "JOBS", "pin"]);
    assert_eq!(out.trim(), "Consumer JOBS > pin was resumed");
    let out = ok(&server, &["consumer", "info", "JOBS", "pin"]);
    assert!(!out.contains("Paused Until"), "{out}");
}

#[test]
fn consumer_pending_lists_unacked_messages() {
    if std::env::var_os("JSCLIENT_TEST_SERVER").is_some() {
        return; // CONSUMER.PENDING is jsserver's own; nats-server does not answer it
    }
    let server = TestServer::start();
    orders_setup(&server, "30s");
    ok(
        &server,
        &["pub", "orders.new", "x", "--jetstream", "--count", "2"],
    );
    let out = ok(&server, &["consumer", "pending", "ORDERS", "shipping"]);
    assert_eq!(
        out.trim(),
        "No unacknowledged messages on ORDERS > shipping"
    );
    ok(
        &server,
        &[
            "consumer", "next", "ORDERS", "shipping", "--no-ack", "--raw",
        ],
    );
    let out = ok(&server, &["consumer", "pending", "ORDERS", "shipping"]);
    assert!(
        out.starts_with("Unacknowledged messages of ORDERS > shipping:"),
        "{out}"
    );
    let row = out
        .lines()
        .find(|l| l.contains("│ 1 ") || l.trim_start().starts_with("1 ") || l.contains("| 1 "))
        .unwrap_or_else(|| panic!("no row for seq 1:\n{out}"));
    // jsctl's own connection pulled it and has gone since.
    assert!(row.contains("gone") && row.contains("out"), "{out}");
    let json = ok(
        &server,
        &["--json", "consumer", "pending", "ORDERS", "shipping"],
    );
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v[0]["stream_seq"], 1, "{json}");
    assert_eq!(v.as_array().unwrap().len(), 1, "{json}");
}

#[test]
fn push_consumer_add_and_sub() {
    let server = TestServer::start();
    ok(
        &server,
        &[
            "stream",
            "add",
            "FEED",
            "--subjects",
            "feed.>",
            "--defaults",
        ],
    );
    ok(
        &server,
        &["pub", "feed.x", "m{{Count}}", "--jetstream", "--count", "3"],
    );
    let out = ok(
        &server,
        &[
            "consumer",
            "add",
            "FEED",
            "push",
            "--target",
            "dlv.feed",
            "--deliver-group",
            "g",
            "--heartbeat",
            "1s",
            "--flow-control",
            "--defaults",
        ],
    );
    assert!(has_line(&out, "Delivery Subject: dlv.feed"), "{out}");
    let out = ok(
        &server,
        &[
            "consumer", "sub", "FEED", "push", "--count", "3", "--raw", "--wait", "10s",
        ],
    );
    assert_eq!(out.lines().collect::<Vec<_>>(), ["m1", "m2", "m3"], "{out}");
    // All three were acknowledged.
    let out = ok(&server, &["consumer", "info", "FEED", "push"]);
    assert!(
        has_line(&out, "Outstanding Acks: 0 out of maximum 1,000"),
        "{out}"
    );
    let err = fails(
        &server.url(),
        &[
            "consumer", "sub", "FEED", "push", "--count", "1", "--wait", "1s",
        ],
    );
    assert!(err.contains("no message received within"), "{err}");
    // Flow control without heartbeats is an argument error (exit 2), as the server would
    // refuse it (10108).
    let out = jsctl_at(
        &server.url(),
        &[
            "consumer",
            "add",
            "FEED",
            "bad",
            "--target",
            "x",
            "--flow-control",
            "--defaults",
        ],
    );
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("--heartbeat"), "{}", out.stderr);
}

#[test]
fn help_and_argument_errors_are_for_users() {
    let help = jsctl_at("nats://127.0.0.1:1", &["--help"]);
    assert_eq!(help.code, 0);
    let first = help.stdout.lines().next().unwrap();
    assert!(
        first.starts_with("NATS and JetStream from the command line"),
        "{first}"
    );
    assert!(!help.stdout.contains("clap"), "{}", help.stdout);
    let server_help = Command::new(common::server_binary())
        .arg("--help")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&server_help.stdout);
    assert!(
        text.starts_with("A JetStream server speaking the NATS client protocol"),
        "{text}"
    );
    assert!(!text.contains("Parsed command line"), "{text}");

    let err = fails("bogus://x", &["stream", "ls"]);
    assert!(err.starts_with("jsctl: error: invalid server URL"), "{err}");

    // Usage errors: one line, exit code 2, and nothing is sent.
    let usage = |args: &[&str]| {
        let out = jsctl_at("nats://127.0.0.1:1", args);
        assert_eq!(out.code, 2, "{args:?}: {}", out.stderr);
        assert_eq!(out.stderr.lines().count(), 1, "{:?}", out.stderr);
        out.stderr.trim_end().to_owned()
    };
    let err = usage(&["consumer", "next", "S", "C", "--count", "0"]);
    assert!(err.starts_with("jsctl: error: "), "{err}");
    assert!(
        err.contains("--count") && err.contains("at least 1"),
        "{err}"
    );
    let err = usage(&["consumer", "next", "S", "C", "--ack", "--nak"]);
    assert!(err.contains("'--ack' cannot be used with '--nak'"), "{err}");
    let err = usage(&["consumer", "next", "S"]);
    assert!(err.contains("<CONSUMER>"), "{err}");
}

#[test]
fn credentials_as_the_nats_cli_takes_them() {
    let key = nkeys::KeyPair::new_user();
    let server = TestServer::start_with_config(&format!(
        "authorization {{\n  users: [\n    {{user: alice, password: s3cret}}\n    {{nkey: {}}}\n  ]\n}}\n",
        key.public_key()
    ));
    let url = server.url();
    // No credentials, wrong ones: refused.
    let err = fails(&url, &["pub", "greet", "hi"]);
    assert!(err.contains("authorization violation"), "{err}");
    let err = fails(
        &url,
        &[
            "--user",
            "alice",
            "--password",
            "nope",
            "pub",
            "greet",
            "hi",
        ],
    );
    assert!(err.contains("authorization violation"), "{err}");
    // User and password.
    let out = jsctl_at(
        &url,
        &[
            "--user",
            "alice",
            "--password",
            "s3cret",
            "pub",
            "greet",
            "hi",
        ],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    // An nkey seed file.
    let seed_file = server.dir.path().join("user.nk");
    std::fs::write(&seed_file, format!("{}\n", key.seed().unwrap())).unwrap();
    let seed_path = seed_file.display().to_string();
    let out = jsctl_at(&url, &["--nkey", &seed_path, "pub", "greet", "hi"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let other = server.dir.path().join("other.nk");
    std::fs::write(&other, nkeys::KeyPair::new_user().seed().unwrap()).unwrap();
    let err = fails(
        &url,
        &["--nkey", &other.display().to_string(), "pub", "greet", "hi"],
    );
    assert!(err.contains("authorization violation"), "{err}");
    // A token server.
    let server = TestServer::start_with_config("authorization { token: t0k }\n");
    let out = jsctl_at(&server.url(), &["--token", "t0k", "pub", "greet", "hi"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let err = fails(&server.url(), &["--token", "bad", "pub", "greet", "hi"]);
    assert!(err.contains("authorization violation"), "{err}");
}

#[test]
fn creds_as_the_nats_cli_takes_them() {
    use common::operator::Setup;
    let setup = Setup::new();
    let dir = tempfile::tempdir().unwrap();
    let seed = setup.user.seed().unwrap();

    // Bad creds files: one line naming the file and the fault, never the seed; nothing sent.
    let account_seed = setup.account.seed().unwrap();
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    };
    let cases = [
        (
            write("seed-only.creds", &format!("{seed}\n")),
            "no user JWT (expected between -----BEGIN NATS USER JWT----- and \
             ------END NATS USER JWT------ lines)",
        ),
        (
            write(
                "jwt-only.creds",
                &format!(
                    "-----BEGIN NATS USER JWT-----\n{}\n------END NATS USER JWT------\n",
                    setup.user_jwt
                ),
            ),
            "no nkey seed (expected between -----BEGIN USER NKEY SEED----- and \
             ------END USER NKEY SEED------ lines)",
        ),
        (
            write(
                "account.creds",
                &Setup::creds_text(&setup.user_jwt, &account_seed),
            ),
            "the nkey seed is not a user seed: an account seed (SA...), a user seed starts \
             with SU",
        ),
    ];
    for (file, why) in &cases {
        let err = fails("nats://127.0.0.1:1", &["--creds", file, "pub", "a", "b"]);
        assert_eq!(err, format!("jsctl: error: credentials file {file}: {why}"));
        assert!(!err.contains(&seed[2..]) && !err.contains(&account_seed[2..]));
    }
    let missing = dir.path().join("missing.creds").display().to_string();
    let err = fails(
        "nats://127.0.0.1:1",
        &["--creds", &missing, "pub", "a", "b"],
    );
    assert!(
        err.starts_with(&format!(
            "jsctl: error: credentials file {missing}: cannot read it: "
        )),
        "{err}"
    );
    // --creds and --nkey: a usage error.
    let out = jsctl_at(
        "nats://127.0.0.1:1",
        &["--creds", &missing, "--nkey", &missing, "pub", "a", "b"],
    );
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("'--creds <FILE>' cannot be used with '--nkey <FILE>'"),
        "{}",
        out.stderr
    );

    // Against nats-server in operator mode.
    let Some(server) = TestServer::start_nats_server(
        "creds_as_the_nats_cli_takes_them, against nats-server",
        &setup.server_config(),
    ) else {
        return;
    };
    let url = server.url();
    let creds = dir.path().join("user.creds");
    setup.write_creds(&creds);
    let creds = creds.display().to_string();
    let (out_path, err_path) = (dir.path().join("sub.out"), dir.path().join("sub.err"));
    // The subscriber takes its creds from NATS_CREDS.
    let mut sub = Command::new(env!("CARGO_BIN_EXE_jsctl"))
        .args(["--server", &url, "sub", "greet.*", "--count", "1"])
        .env("NATS_CREDS", &creds)
        .stdout(File::create(&out_path).unwrap())
        .stderr(File::create(&err_path).unwrap())
        .spawn()
        .unwrap();
    wait_for(&err_path, "Subscribing on greet.*", Duration::from_secs(10));
    let out = jsctl_at(&url, &["--creds", &creds, "pub", "greet.joe", "hello"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout, "Published 5 bytes to \"greet.joe\"\n");
    assert!(wait_child(&mut sub, Duration::from_secs(10)).success());
    assert_eq!(
        std::fs::read_to_string(&out_path).unwrap(),
        "[#1] Received on \"greet.joe\"\nhello\n\n"
    );
    // The JWT with another user's seed, and no credentials: refused by the server.
    let wrong = write(
        "wrong.creds",
        &Setup::creds_text(&setup.user_jwt, &nkeys::KeyPair::new_user().seed().unwrap()),
    );
    let err = fails(&url, &["--creds", &wrong, "pub", "greet.joe", "hi"]);
    assert!(err.contains("authorization violation"), "{err}");
    let err = fails(&url, &["pub", "greet.joe", "hi"]);
    assert!(err.contains("authorization violation"), "{err}");
}

#[test]
fn tls_flags_as_the_nats_cli_takes_them() {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    };
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).display().to_string();
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "jsctl test CA");
    let ca = ca_params.self_signed(&ca_key).unwrap();
    std::fs::write(path("ca.pem"), ca.pem()).unwrap();
    let issue = |name: &str, sans: Vec<String>, usage: ExtendedKeyUsagePurpose| {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(sans).unwrap();
        params.distinguished_name.push(DnType::CommonName, name);
        params.extended_key_usages = vec![usage];
        let cert = params.signed_by(&key, &ca, &ca_key).unwrap();
        std::fs::write(path(&format!("{name}.pem")), cert.pem()).unwrap();
        std::fs::write(path(&format!("{name}.key")), key.serialize_pem()).unwrap();
    };
    issue(
        "server",
        vec!["127.0.0.1".into()],
        ExtendedKeyUsagePurpose::ServerAuth,
    );
    issue("client", vec![], ExtendedKeyUsagePurpose::ClientAuth);
    let server = TestServer::start_with_config(&format!(
        "tls {{\n  cert_file: {:?}\n  key_file: {:?}\n  ca_file: {:?}\n  verify: true\n}}\n",
        path("server.pem"),
        path("server.key"),
        path("ca.pem")
    ));
    let url = format!("tls://127.0.0.1:{}", server.port);
    let (ca, cert, key) = (path("ca.pem"), path("client.pem"), path("client.key"));
    let out = jsctl_at(
        &url,
        &[
            "--tlsca",
            &ca,
            "--tlscert",
            &cert,
            "--tlskey",
            &key,
            "pub",
            "greet",
            "hi",
        ],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    // Without a client certificate the server refuses the handshake.
    let err = fails(&url, &["--tlsca", &ca, "pub", "greet", "hi"]);
    assert!(err.contains("server unreachable"), "{err}");
    // Half a pair is a usage error of ours.
    let err = fails(
        &url,
        &["--tlsca", &ca, "--tlscert", &cert, "pub", "greet", "hi"],
    );
    assert!(err.contains("--tlscert and --tlskey go together"), "{err}");
}

/// `pub --jetstream` that nobody takes (the server's `503`) says why in one line: no stream
/// captures the subject, JetStream off for the account, JetStream off on the server. (No
/// leader: `jsctl_cluster.rs`.)
#[test]
fn pub_jetstream_nobody_takes_says_why() {
    let server = TestServer::start_with_config(
        "accounts {\n  A: { users: [ { user: a, password: a } ], jetstream: enabled }\n  \
         C: { users: [ { user: c, password: c } ] }\n}\n",
    );
    let url = server.url();
    let as_user = |user: &str, args: &[&str]| -> Vec<String> {
        ["--user", user, "--password", user]
            .iter()
            .chain(args)
            .map(ToString::to_string)
            .collect()
    };
    let run = |args: Vec<String>| fails(&url, &args.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(
        run(as_user("a", &["pub", "nowhere", "x", "--jetstream"])),
        "jsctl: error: no stream captures this subject"
    );
    assert_eq!(
        run(as_user("c", &["pub", "orders.1", "x", "-J"])),
        "jsctl: error: JetStream is not enabled for this account"
    );
    let off = TestServer::start_without_jetstream("");
    assert_eq!(
        fails(&off.url(), &["pub", "orders.1", "x", "--jetstream"]),
        "jsctl: error: JetStream is not enabled"
    );
}
