//! Start-up failures of the real binary: each is one `[FTL]` line in nats-server's words, on
//! stderr and in the `-l` log file, and exit status 1; and the JetStream store directory is
//! one server's at a time.
//!
//! The fatal texts are nats-server 2.15.1's, and `startup_failures_read_as_nats_servers`
//! passes against it too (`JSSERVER_TEST_BINARY=nats-server`; nats-server then writes the
//! line to the log file only). The store directory lock is ours (nats-server does not lock
//! its directory), and so are the `[FTL]` lines for a config or log file that cannot be used
//! (nats-server prints `nats-server: …` without a log line there): those tests are skipped
//! against nats-server.

mod common;

use std::net::TcpListener;
use std::path::Path;

use common::TestServer;

fn against_nats_server() -> bool {
    std::env::var_os("JSSERVER_TEST_BINARY").is_some()
}

/// What a run that stopped at start-up left.
struct Stopped {
    code: Option<i32>,
    stderr: String,
    log: String,
}

/// Runs the binary with `args` (plus `-l LOG` in a scratch directory when `log` is set) until
/// it exits (see [`common::run_to_exit`]).
fn run_to_exit(args: &[&str], log: bool) -> Stopped {
    let dir = tempfile::tempdir().unwrap();
    let log_path = dir.path().join("server.log");
    let log_arg = log_path.display().to_string();
    let mut all = args.to_vec();
    if log {
        all.extend(["-l", log_arg.as_str()]);
    }
    let run = common::run_to_exit(&all);
    Stopped {
        code: run.status.code(),
        stderr: run.stderr,
        log: std::fs::read_to_string(&log_path).unwrap_or_default(),
    }
}

/// The text after `[FTL] ` of each fatal line of `text`.
fn fatal_lines(text: &str) -> Vec<&str> {
    text.lines()
        .filter_map(|l| l.split_once(" [FTL] ").map(|(_, rest)| rest))
        .collect()
}

/// Checks a run that must stop at start-up: status 1, exactly one `[FTL]` line, equal to
/// `want` (or starting with it, with `prefix`), on stderr (jsserver) and in the log file when
/// `-l` was given, and nothing else gone wrong (no panic, no error chain).
fn check_fatal(case: &str, run: &Stopped, logged: bool, want: &str, prefix: bool) {
    assert_eq!(
        run.code,
        Some(1),
        "{case}: exit status; stderr:\n{}",
        run.stderr
    );
    let mut places = Vec::new();
    if !against_nats_server() || !logged {
        places.push(("stderr", run.stderr.as_str()));
    }
    if logged {
        places.push(("log file", run.log.as_str()));
    }
    for (place, text) in places {
        let lines = fatal_lines(text);
        assert_eq!(lines.len(), 1, "{case}: one [FTL] line in {place}:\n{text}");
        if prefix {
            assert!(
                lines[0].starts_with(want),
                "{case}: {place}: {:?}",
                lines[0]
            );
        } else {
            assert_eq!(lines[0], want, "{case}: {place}");
        }
    }
    for bad in ["panicked", "Caused by", "Error: ", "stack backtrace"] {
        assert!(
            !run.stderr.contains(bad),
            "{case}: {bad:?} on stderr:\n{}",
            run.stderr
        );
    }
}

/// Every listener, the store directory and the pid file: nats-server's fatal lines, the
/// same with and without `-l`.
#[test]
fn startup_failures_read_as_nats_servers() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let in_use = |hp: &str| format!("listen tcp {hp}: bind: address already in use");
    let hp = format!("127.0.0.1:{port}");
    let cluster_url = format!("nats://{hp}");
    let scratch = tempfile::tempdir().unwrap();
    let a_file = scratch.path().join("a-file");
    std::fs::write(&a_file, "x").unwrap();
    let a_file = a_file.to_str().unwrap().to_owned();
    let ws_conf = scratch.path().join("ws.conf");
    std::fs::write(
        &ws_conf,
        format!("websocket {{\n  host: 127.0.0.1\n  port: {port}\n  no_tls: true\n}}\n"),
    )
    .unwrap();
    let ws_conf = ws_conf.to_str().unwrap().to_owned();
    let base = ["-a", "127.0.0.1", "-p", "-1"];
    let cases: Vec<(&str, Vec<&str>, String)> = vec![
        (
            "client port in use",
            vec!["-a", "127.0.0.1", "-p", &port],
            format!("Error listening on port: {hp}, {:?}", in_use(&hp)),
        ),
        (
            "monitoring port in use",
            [&base[..], &["-m", &port]].concat(),
            format!(
                "Can't start monitoring: can't listen to the monitor port: {}",
                in_use(&hp)
            ),
        ),
        (
            "cluster port in use",
            [
                &base[..],
                &["--cluster", &cluster_url, "--cluster_name", "c"],
            ]
            .concat(),
            format!("Error listening on router port: {port} - {}", in_use(&hp)),
        ),
        (
            "websocket port in use",
            [&base[..], &["-c", &ws_conf]].concat(),
            format!(
                "Unable to listen for websocket connections: {}",
                in_use(&hp)
            ),
        ),
        (
            "store directory is a file",
            [&base[..], &["-js", "-sd", &a_file]].concat(),
            "Can't start JetStream: storage directory is not a directory".to_owned(),
        ),
        (
            "store directory cannot be created",
            [&base[..], &["-js", "-sd", "/proc/no-such-dir"]].concat(),
            "Can't start JetStream: could not create storage directory - \
             mkdir /proc/no-such-dir: no such file or directory"
                .to_owned(),
        ),
        (
            "pid file cannot be written",
            [&base[..], &["-P", "/proc/no-such-dir/server.pid"]].concat(),
            "Could not write pidfile: open /proc/no-such-dir/server.pid: \
             no such file or directory"
                .to_owned(),
        ),
    ];
    for (case, args, want) in &cases {
        for logged in [false, true] {
            let run = run_to_exit(args, logged);
            check_fatal(&format!("{case} (-l: {logged})"), &run, logged, want, false);
        }
    }
    drop(taken);
}

/// A ports file that cannot be written is an `[ERR]` line, and the server runs on, as
/// nats-server.
#[test]
fn an_unwritable_ports_file_is_an_error_not_a_stop() {
    let mut server = TestServer::start(&["--ports_file_dir", "/proc/no-such-dir"]);
    let log = server.log_text();
    let line = log
        .lines()
        .find(|l| l.contains("[ERR] Error writing ports file (/proc/no-such-dir/"))
        .unwrap_or_else(|| panic!("no [ERR] line for the ports file:\n{log}"));
    assert!(line.ends_with(": no such file or directory"), "{line}");
    assert!(!log.contains("[FTL]"), "{log}");
    assert!(server.terminate().success() || against_nats_server());
}

/// What nats-server reports otherwise (`nats-server: …` without a log line, or Go's bare
/// `log` line for the log file) is an `[FTL]` line here too, so that every start-up failure
/// reads the same and reaches the `-l` file when it can.
#[test]
fn config_and_log_file_failures_are_fatal_lines_too() {
    if against_nats_server() {
        return;
    }
    let scratch = tempfile::tempdir().unwrap();
    let bad_conf = scratch.path().join("bad.conf");
    std::fs::write(&bad_conf, "max_payload: 2000\nmax_pending: 1000\n").unwrap();
    let bad_conf = bad_conf.to_str().unwrap().to_owned();
    let base = ["-a", "127.0.0.1", "-p", "-1"];
    let cases: Vec<(&str, Vec<&str>, bool, &str, bool)> =
        vec![
        (
            "an invalid config value",
            [&base[..], &["-c", &bad_conf]].concat(),
            true,
            "max_payload (2000) cannot be higher than max_pending (1000)",
            false,
        ),
        (
            "TLS files that cannot be read",
            [&base[..], &["--tls", "--tlscert", "/nope.pem", "--tlskey", "/nope.key"]].concat(),
            true,
            "error parsing X509 certificate/key pair: open /nope.pem: no such file or directory",
            false,
        ),
        (
            "a log file that cannot be opened",
            [&base[..], &["-l", "/proc/no-such-dir/server.log"]].concat(),
            false,
            "error opening file: open /proc/no-such-dir/server.log: no such file or directory",
            false,
        ),
    ];
    for (case, args, logged, want, prefix) in &cases {
        let run = run_to_exit(args, *logged);
        check_fatal(case, &run, *logged, want, *prefix);
    }
}

/// The store directory is locked: a second server on it stops with one `[FTL]` line naming
/// it, before it binds anything; the lock goes with the first server, also when that one is
/// killed with SIGKILL, and after a clean shutdown.
#[test]
fn a_store_directory_serves_one_server_at_a_time() {
    if against_nats_server() {
        // nats-server 2.15.1 lets both start on one directory.
        return;
    }
    let mut first = TestServer::start(&[]);
    let store = first.dir.path().join("store");
    let store_arg = store.to_str().unwrap().to_owned();
    let jetstream = store.join("jetstream");
    let second = run_to_exit(
        &["-a", "127.0.0.1", "-p", "-1", "-js", "-sd", &store_arg],
        true,
    );
    let want = format!(
        "Can't start JetStream: storage directory {} is in use by process {} (it holds the \
         lock on {})",
        jetstream.display(),
        first.pid(),
        jetstream.join("jsserver.lock").display()
    );
    check_fatal("second server", &second, true, &want, false);
    assert!(
        !second.log.contains("Listening for client connections"),
        "it bound its port first:\n{}",
        second.log
    );
    // The first one is unharmed: it still answers, its files still its own.
    let (mut raw, _) = common::Raw::connect(first.port);
    raw.send(b"CONNECT {\"verbose\":false}\r\nPING\r\n");
    raw.expect_line("PONG\r\n");

    // SIGKILL: the kernel releases the lock with the process.
    first.kill9();
    let mut third = start_on(&store_arg);
    // A clean stop releases it too.
    assert!(third.terminate().success());
    let fourth = start_on(&store_arg);
    drop(fourth);
}

/// Starts a server on the store directory `store` (its own scratch dir for the log).
fn start_on(store: &str) -> TestServer {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("server.log");
    let args = ["-a", "127.0.0.1", "-p", "-1", "-js", "-sd", store, "-l"]
        .iter()
        .map(|s| s.to_string())
        .chain([log.display().to_string()])
        .collect();
    TestServer::spawn(args, dir, log)
}

/// A cluster node's Raft logs are under its locked directory: two nodes given one directory
/// (a copied node config) do not both start.
#[test]
fn cluster_nodes_on_one_store_directory_do_not_both_start() {
    if against_nats_server() {
        return;
    }
    let shared = tempfile::tempdir().unwrap();
    let store = shared.path().join("store");
    let store_arg = store.to_str().unwrap().to_owned();
    let (p1, p2) = (common::free_port(), common::free_port());
    let routes = format!("nats://127.0.0.1:{p1},nats://127.0.0.1:{p2}");
    let node = |name: &str, port: u16| -> Vec<String> {
        [
            "-a",
            "127.0.0.1",
            "-p",
            "-1",
            "-js",
            "-sd",
            &store_arg,
            "--server_name",
            name,
            "--cluster_name",
            "c",
            "--cluster",
            &format!("nats://127.0.0.1:{port}"),
            "--routes",
            &routes,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("n1.log");
    let mut args = node("n1", p1);
    args.extend(["-l".to_owned(), log.display().to_string()]);
    let n1 = TestServer::spawn(args, dir, log);
    let args = node("n2", p2);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let n2 = run_to_exit(&args, true);
    let lines = fatal_lines(&n2.log);
    assert_eq!(n2.code, Some(1), "{}", n2.log);
    assert_eq!(lines.len(), 1, "{}", n2.log);
    assert!(
        lines[0].contains(&format!("is in use by process {}", n1.pid())),
        "{}",
        lines[0]
    );
    assert!(
        Path::new(&store).join("jetstream/jsserver.lock").exists(),
        "the lock file is in the JetStream directory"
    );
}

/// A config that cannot be used names its own log file: the `[FTL]` line of its error goes
/// there too (not only stderr), whatever the error, as the line of a refused setting does.
/// Ours only (nats-server prints `nats-server: …` for these, without a log line).
#[test]
fn a_bad_config_reaches_the_log_file_it_names() {
    if against_nats_server() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("from-config.log");
    for (case, body, want) in [
        (
            "unknown field",
            "authorisation { token: s3cret }\n",
            "unknown field \"authorisation\"",
        ),
        ("bad value", "max_payload: -1\n", "max_payload"),
    ] {
        let _ = std::fs::remove_file(&log);
        // The bad key comes before log_file: the log target is still found.
        let conf = format!("{body}log_file: \"{}\"\n", log.display());
        let run = common::run_config_to_exit(&conf, &[]);
        assert_eq!(run.status.code(), Some(1), "{case}: {}", run.text());
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let lines = fatal_lines(&text);
        assert!(
            !lines.is_empty() && lines.iter().any(|l| l.contains(want)),
            "{case}: the log file has the [FTL] line naming {want:?}:\n{text}\nstderr:\n{}",
            run.stderr
        );
        assert!(
            fatal_lines(&run.stderr).iter().any(|l| l.contains(want)),
            "{case}: stderr too:\n{}",
            run.stderr
        );
    }
}

/// Every unknown field of a config is its own `[FTL]` line (on stderr and in the log file),
/// in file order, not one line with all of them. Ours only (nats-server prints them without
/// a log line).
#[test]
fn each_config_error_is_its_own_fatal_line() {
    if against_nats_server() {
        return;
    }
    let run = common::run_config_to_exit("authorisation { token: x }\ntsl { verify: true }\n", &[]);
    assert_eq!(run.status.code(), Some(1), "{}", run.text());
    let lines = fatal_lines(&run.stderr);
    assert_eq!(lines.len(), 2, "{}", run.stderr);
    assert!(
        lines[0].ends_with(":1:1: unknown field \"authorisation\""),
        "{lines:?}"
    );
    assert!(
        lines[1].ends_with(":2:1: unknown field \"tsl\""),
        "{lines:?}"
    );
}
