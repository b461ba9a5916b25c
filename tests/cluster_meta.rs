//! JetStream in a cluster of three servers (nats-server's flags: `-js --cluster ... --routes
//! ... --cluster_name C --server_name nN`): the meta group forms and elects a leader, a
//! stream created through any node is placed on one server and reached from every node
//! (publishes, stream info, consumers, pull requests and acks), a stream deleted through
//! another node is gone everywhere, and after the meta leader is killed (`kill -9`) the two
//! others elect a new one and go on creating streams; the meta leader steps down when the
//! system account asks (`$JS.API.META.LEADER.STEPDOWN`). Runs against three nats-servers too
//! (`JSSERVER_TEST_BINARY=nats-server`).

mod common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, consumer::pull, stream};
use common::{fetch, free_port, TestServer};
use futures_util::StreamExt;
use serde_json::Value;

/// How long a wait for a cluster condition may take (a wait, not a timing assertion).
const WAIT: Duration = Duration::from_secs(20);

struct Node {
    server: TestServer,
    http: u16,
    /// Its route listener's port.
    cluster: u16,
}

/// Starts three JetStream nodes routed to each other, each with its store in its own
/// scratch directory.
fn three_nodes() -> Vec<Node> {
    let ports: Vec<(u16, u16)> = (0..3).map(|_| (free_port(), free_port())).collect();
    let routes: Vec<String> = ports
        .iter()
        .map(|(c, _)| format!("nats://127.0.0.1:{c}"))
        .collect();
    ports
        .iter()
        .enumerate()
        .map(|(i, (cluster, http))| {
            let dir = tempfile::tempdir().expect("temp dir");
            let log = dir.path().join("server.log");
            let store = dir.path().join("store");
            let args: Vec<String> = [
                "-a",
                "127.0.0.1",
                "-p",
                "-1",
                "-m",
                &http.to_string(),
                "-l",
                &log.display().to_string(),
                "-js",
                "-sd",
                &store.display().to_string(),
                "--cluster",
                &format!("nats://127.0.0.1:{cluster}"),
                "--routes",
                &routes.join(","),
                "--cluster_name",
                "C",
                "--server_name",
                &format!("n{}", i + 1),
            ]
            .iter()
            .map(ToString::to_string)
            .collect();
            Node {
                server: TestServer::spawn(args, dir, log),
                http: *http,
                cluster: *cluster,
            }
        })
        .collect()
}

/// The accounts of [`three_nodes_with_accounts`]: a system account `SYS` (user `sys`, password
/// `sys`) and a JetStream account `APP`, the no-auth user's (as
/// `crates/jsproto/tests/fixtures/cluster/record.py` records nats-server with).
const ACCOUNTS: &str = "accounts {\n\
  SYS { users: [{user: sys, password: sys}] }\n\
  APP { jetstream: enabled, users: [{user: app, password: app}] }\n\
}\n\
system_account: SYS\n\
no_auth_user: app\n";

/// JetStream node `name` of cluster `C` (config file with [`ACCOUNTS`] and `extra`), its
/// routes listener on `cluster`, monitoring on `http`, with routes to the route ports
/// `routes` (its own may be among them).
fn node_with_accounts(
    name: &str,
    (cluster, http): (u16, u16),
    routes: &[u16],
    extra: &str,
) -> Node {
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("server.log");
    let store = dir.path().join("store");
    let conf = dir.path().join("server.conf");
    let routes: Vec<String> = routes
        .iter()
        .map(|p| format!("nats-route://127.0.0.1:{p}"))
        .collect();
    let text = format!(
        "server_name: {name}\nhttp: 127.0.0.1:{http}\n\
         jetstream {{ store_dir: {store:?} }}\n{ACCOUNTS}\
         cluster {{\n  name: C\n  listen: 127.0.0.1:{cluster}\n  routes: [{routes}]\n}}\n\
         {extra}",
        store = store.display().to_string(),
        routes = routes.join(", "),
    );
    std::fs::write(&conf, text).expect("write config");
    let args: Vec<String> = [
        "-a",
        "127.0.0.1",
        "-p",
        "-1",
        "-c",
        &conf.display().to_string(),
        "-l",
        &log.display().to_string(),
    ]
    .iter()
    .map(ToString::to_string)
    .collect();
    Node {
        server: TestServer::spawn(args, dir, log),
        http,
        cluster,
    }
}

/// Three JetStream nodes `n1`..`n3` of cluster `C` from config files holding [`ACCOUNTS`] and
/// `extra(i)` (node `n{i+1}`'s further settings).
fn three_nodes_with_accounts(extra: impl Fn(usize) -> String) -> Vec<Node> {
    let ports: Vec<(u16, u16)> = (0..3).map(|_| (free_port(), free_port())).collect();
    let routes: Vec<u16> = ports.iter().map(|(c, _)| *c).collect();
    ports
        .iter()
        .enumerate()
        .map(|(i, p)| node_with_accounts(&format!("n{}", i + 1), *p, &routes, &extra(i)))
        .collect()
}

/// The system account's user on `node`.
async fn system_user(node: &Node) -> async_nats::Client {
    async_nats::ConnectOptions::with_user_and_password("sys".into(), "sys".into())
        .connect(node.server.url())
        .await
        .expect("connect as sys")
}

/// Publishes `body` to `subject` with an inbox as reply and returns what came back within
/// `wait`: `None` when nothing did (not even a no-responders status).
async fn ask(
    client: &async_nats::Client,
    subject: &str,
    body: &str,
    wait: Duration,
) -> Option<async_nats::Message> {
    let inbox = client.new_inbox();
    let mut sub = client.subscribe(inbox.clone()).await.expect("subscribe");
    client
        .publish_with_reply(subject.to_string(), inbox, body.to_string().into())
        .await
        .expect("publish");
    client.flush().await.expect("flush");
    tokio::time::timeout(wait, sub.next()).await.ok().flatten()
}

/// The text of the answer to a meta step-down asked of the meta leader through `client`,
/// retried while nobody answers (a leader that just took over may not have heard of every
/// peer yet).
async fn meta_step_down(client: &async_nats::Client, body: &str) -> String {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(m) = ask(
            client,
            "$JS.API.META.LEADER.STEPDOWN",
            body,
            Duration::from_secs(2),
        )
        .await
        {
            return String::from_utf8(m.payload.to_vec()).expect("UTF-8 answer");
        }
        assert!(Instant::now() < deadline, "no answer to a meta step-down");
    }
}

/// Waits until every node names the same meta leader, other than `old`; returns it.
fn new_meta_leader(nodes: &[Node], old: &str) -> String {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(l) = meta_leader(nodes).filter(|l| l != old) {
            return l;
        }
        assert!(
            Instant::now() < deadline,
            "{old} still leads the meta group"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

async fn js(node: &Node) -> jetstream::Context {
    let client = async_nats::connect(node.server.url())
        .await
        .expect("connect");
    jetstream::new(client)
}

/// A minimal HTTP/1.0 GET of a monitoring port; the body as JSON.
fn http_json(port: u16, path: &str) -> Value {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect monitor");
    s.set_read_timeout(Some(WAIT)).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let body = text.split("\r\n\r\n").nth(1).unwrap_or_default();
    serde_json::from_str(body).unwrap_or(Value::Null)
}

/// Retries `op` (a stream create while the meta group elects, say) until it succeeds.
async fn eventually<T, E: std::fmt::Debug, F, Fut>(what: &str, mut op: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, E>>,
{
    let deadline = Instant::now() + WAIT;
    loop {
        match op().await {
            Ok(v) => return v,
            Err(e) => {
                assert!(Instant::now() < deadline, "{what}: still failing: {e:?}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
}

fn orders() -> stream::Config {
    stream::Config {
        name: "ORDERS".into(),
        subjects: vec!["orders.>".into()],
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_are_placed_and_reached_from_every_node_and_survive_a_meta_leader_loss() {
    let mut nodes = three_nodes();
    let ctx = [
        js(&nodes[0]).await,
        js(&nodes[1]).await,
        js(&nodes[2]).await,
    ];

    // Created through n2 once the meta group has a leader.
    let mut created = eventually("create ORDERS", || ctx[1].create_stream(orders())).await;
    let host = created
        .info()
        .await
        .expect("info")
        .cluster
        .clone()
        .and_then(|c| c.leader)
        .expect("the stream's server");
    assert!(["n1", "n2", "n3"].contains(&host.as_str()), "{host}");

    // Publishes on every node are stored once each, in order.
    for i in 0..9u64 {
        let ack = ctx[(i % 3) as usize]
            .publish(format!("orders.{i}"), format!("order {i}").into())
            .await
            .expect("publish")
            .await
            .expect("PubAck");
        assert_eq!(ack.sequence, i + 1);
        assert_eq!(ack.stream, "ORDERS");
    }
    // Every node tells the same stream: its server and its messages.
    for c in &ctx {
        let mut s = c.get_stream("ORDERS").await.expect("stream from any node");
        let info = s.info().await.expect("info");
        assert_eq!(info.state.messages, 9);
        assert_eq!(
            info.cluster.as_ref().and_then(|c| c.leader.clone()),
            Some(host.clone())
        );
    }

    // One durable consumer, created through n3; a worker on each node takes three orders.
    let stream_n3 = ctx[2].get_stream("ORDERS").await.expect("stream");
    stream_n3
        .create_consumer(pull::Config {
            durable_name: Some("shipping".into()),
            ack_policy: jetstream::consumer::AckPolicy::Explicit,
            ..Default::default()
        })
        .await
        .expect("consumer");
    let mut seen = BTreeSet::new();
    for c in &ctx {
        let consumer: jetstream::consumer::PullConsumer = c
            .get_stream("ORDERS")
            .await
            .expect("stream")
            .get_consumer("shipping")
            .await
            .expect("consumer from any node");
        let batch = fetch(&consumer, 3, Duration::from_secs(5)).await;
        assert_eq!(batch.len(), 3, "each worker gets its three orders");
        for m in batch {
            assert!(seen.insert(m.subject.to_string()), "{} twice", m.subject);
            m.double_ack()
                .await
                .expect("confirmed ack across the cluster");
        }
    }
    assert_eq!(seen.len(), 9);
    let mut consumer: jetstream::consumer::PullConsumer = ctx[0]
        .get_stream("ORDERS")
        .await
        .unwrap()
        .get_consumer("shipping")
        .await
        .unwrap();
    let info = consumer.info().await.expect("consumer info");
    // In a cluster, a consumer of a stream of one replica names the cluster and its server.
    let cc = info.cluster.clone().expect("consumer info has cluster");
    assert_eq!(cc.name.as_deref(), Some("C"), "{cc:?}");
    assert_eq!(cc.leader.as_deref(), Some(host.as_str()), "{cc:?}");
    assert_eq!(info.ack_floor.stream_sequence, 9);
    assert_eq!(info.num_ack_pending, 0);
    assert_eq!(info.num_pending, 0);

    // STREAM.LIST from any node gives every stream's info, wherever it is placed (three
    // streams of one replica land on three servers: fewest streams first).
    for name in ["BILLING", "ANALYTICS"] {
        eventually("create another stream", || {
            ctx[0].create_stream(stream::Config {
                name: name.into(),
                subjects: vec![format!("{}.>", name.to_lowercase())],
                ..Default::default()
            })
        })
        .await;
    }
    for c in &ctx {
        let answer: Value = c
            .request("STREAM.LIST", &serde_json::json!({}))
            .await
            .expect("stream list");
        let mut listed: Vec<String> = answer["streams"]
            .as_array()
            .expect("streams")
            .iter()
            .map(|s| s["config"]["name"].as_str().unwrap().to_owned())
            .collect();
        listed.sort();
        assert_eq!(listed, ["ANALYTICS", "BILLING", "ORDERS"], "{answer}");
        assert_eq!(answer["total"], 3, "{answer}");
        assert!(
            answer["missing"].as_array().is_none_or(|m| m.is_empty()),
            "{answer}"
        );
        let orders = answer["streams"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["config"]["name"] == "ORDERS")
            .unwrap();
        assert_eq!(orders["state"]["messages"], 9, "{answer}");
    }
    // Account INFO through any node counts every stream of the account, each once.
    let mut storage = Vec::new();
    for c in &ctx {
        let info: Value = c
            .request("INFO", &serde_json::json!({}))
            .await
            .expect("info");
        assert_eq!(info["streams"], 3, "{info}");
        assert_eq!(info["consumers"], 1, "{info}");
        storage.push(info["storage"].as_u64().expect("storage"));
    }
    assert!(storage[0] > 0, "{storage:?}");
    assert!(storage.iter().all(|s| *s == storage[0]), "{storage:?}");
    for name in ["BILLING", "ANALYTICS"] {
        ctx[1].delete_stream(name).await.expect("delete");
    }

    // Ours refuses to move a stream's only replica (nats-server 2.15.1 answers success and
    // the stream starts over empty on another server).
    if !common::server_binary().contains("nats-server") {
        let answer: Value = ctx[0]
            .request(
                "STREAM.PEER.REMOVE.ORDERS",
                &serde_json::json!({ "peer": host }),
            )
            .await
            .expect("an answer");
        assert_eq!(answer["error"]["err_code"], 10061, "{answer}");
    }

    // Names from any node; a delete through another node removes it everywhere.
    let names: Vec<String> = ctx[0].stream_names().map(|n| n.unwrap()).collect().await;
    assert_eq!(names, ["ORDERS"]);
    ctx[(host_index(&host) + 1) % 3]
        .delete_stream("ORDERS")
        .await
        .expect("delete through a node that does not hold it");
    for c in &ctx {
        let names: Vec<String> = c.stream_names().map(|n| n.unwrap()).collect().await;
        assert!(names.is_empty(), "{names:?}");
        assert!(c.get_stream("ORDERS").await.is_err());
    }

    // The meta leader dies: the two others elect one and create streams again.
    let leader = meta_leader(&nodes).expect("a meta leader");
    nodes[host_index(&leader)].server.kill9();
    let alive: Vec<usize> = (0..3).filter(|i| *i != host_index(&leader)).collect();
    let survivor = &ctx[alive[0]];
    let mut again = eventually("create after the meta leader's loss", || {
        survivor.create_stream(stream::Config {
            name: "AGAIN".into(),
            subjects: vec!["again.>".into()],
            ..Default::default()
        })
    })
    .await;
    let ack = eventually("publish to the new stream", || async {
        ctx[alive[1]]
            .publish("again.1", "x".into())
            .await
            .map_err(|e| e.to_string())?
            .await
            .map_err(|e| e.to_string())
    })
    .await;
    assert_eq!(ack.sequence, 1);
    assert_eq!(again.info().await.unwrap().state.messages, 1);
    let new_leader = meta_leader(
        &nodes[..]
            .iter()
            .enumerate()
            .filter(|(i, _)| alive.contains(i))
            .map(|(_, n)| n)
            .collect::<Vec<_>>(),
    );
    assert!(new_leader.is_some_and(|l| l != leader));
}

fn host_index(name: &str) -> usize {
    name.trim_start_matches('n').parse::<usize>().expect("nN") - 1
}

/// The meta leader as `/jsz`'s `meta_cluster.leader` of the nodes given says (all agreeing).
fn meta_leader<N: std::borrow::Borrow<Node>>(nodes: &[N]) -> Option<String> {
    let deadline = Instant::now() + WAIT;
    loop {
        let leaders: BTreeSet<String> = nodes
            .iter()
            .filter_map(|n| {
                http_json(n.borrow().http, "/jsz")["meta_cluster"]["leader"]
                    .as_str()
                    .map(str::to_owned)
            })
            .collect();
        if leaders.len() == 1 && nodes.len() > 1 {
            return leaders.into_iter().next();
        }
        if Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replicated_stream_steps_down_to_another_replica_and_keeps_its_messages() {
    let mut nodes = three_nodes();
    let ctx = [
        js(&nodes[0]).await,
        js(&nodes[1]).await,
        js(&nodes[2]).await,
    ];
    let mut s = eventually("create R3", || {
        ctx[0].create_stream(stream::Config {
            name: "R3".into(),
            subjects: vec!["r3.>".into()],
            num_replicas: 3,
            ..Default::default()
        })
    })
    .await;
    // The create answer names the group: the cluster and its leader.
    let created = s
        .cached_info()
        .cluster
        .clone()
        .expect("cluster in the create answer");
    assert_eq!(created.name.as_deref(), Some("C"), "{created:?}");
    assert!(
        created.leader.as_ref().is_some_and(|l| !l.is_empty()),
        "{created:?}"
    );
    for i in 0..5u64 {
        let ack = ctx[(i % 3) as usize]
            .publish(format!("r3.{i}"), "x".into())
            .await
            .unwrap()
            .await
            .expect("PubAck from a majority");
        assert_eq!(ack.sequence, i + 1);
    }
    let info = s.info().await.unwrap().clone();
    let cluster = info.cluster.expect("cluster block");
    let old = cluster.leader.clone().expect("a leader");
    assert_eq!(cluster.replicas.len(), 2, "{cluster:?}");
    // Asked through a node that is not the leader.
    let via = (host_index(&old) + 1) % 3;
    let client = async_nats::connect(nodes[via].server.url()).await.unwrap();
    let resp = client
        .request("$JS.API.STREAM.LEADER.STEPDOWN.R3", "".into())
        .await
        .expect("step-down answered");
    let v: Value = serde_json::from_slice(&resp.payload).unwrap();
    assert_eq!(v["success"], true, "{v}");
    let deadline = Instant::now() + WAIT;
    let new = loop {
        // While leadership moves, nobody answers for the stream: ask again.
        if let Ok(mut st) = ctx[via].get_stream("R3").await {
            if let Ok(info) = st.info().await {
                if let Some(l) = info.cluster.as_ref().and_then(|c| c.leader.clone()) {
                    if l != old {
                        assert_eq!(info.state.messages, 5);
                        break l;
                    }
                }
            }
        }
        assert!(Instant::now() < deadline, "no new leader");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_ne!(new, old);
    let ack = ctx[host_index(&old)]
        .publish("r3.after", "x".into())
        .await
        .unwrap()
        .await
        .expect("PubAck from the new leader");
    assert_eq!(ack.sequence, 6);

    // STREAM.LIST through any node gives the leader's view of a replicated stream (its
    // messages and two replicas), also when the meta leader holds only a follower of it.
    for c in &ctx {
        let answer: Value = c
            .request("STREAM.LIST", &serde_json::json!({}))
            .await
            .expect("stream list");
        let r3 = answer["streams"]
            .as_array()
            .and_then(|a| a.iter().find(|s| s["config"]["name"] == "R3"))
            .cloned()
            .unwrap_or_else(|| panic!("R3 listed: {answer}"));
        assert_eq!(r3["state"]["messages"], 6, "{r3}");
        assert_eq!(
            r3["cluster"]["replicas"].as_array().map(Vec::len),
            Some(2),
            "{r3}"
        );
    }

    // Deleting a replicated stream with a consumer: at most one CONSUMER.DELETED advisory,
    // not one per replica (ours: one, from the stream's leader, as a stream of one replica
    // sends; nats-server 2.15.1 sends none in a cluster).
    ctx[0]
        .get_stream("R3")
        .await
        .unwrap()
        .create_consumer(pull::Config {
            durable_name: Some("c1".into()),
            ..Default::default()
        })
        .await
        .expect("consumer");
    let watcher = async_nats::connect(nodes[2].server.url()).await.unwrap();
    let mut advisories = watcher
        .subscribe("$JS.EVENT.ADVISORY.CONSUMER.DELETED.R3.c1")
        .await
        .unwrap();
    watcher.flush().await.unwrap();
    ctx[1].delete_stream("R3").await.expect("delete");
    let mut count = 0;
    while let Ok(Some(_)) = tokio::time::timeout(Duration::from_secs(2), advisories.next()).await {
        count += 1;
    }
    if common::server_binary().contains("nats-server") {
        // Seen both 0 and 1 from nats-server 2.15.1.
        assert!(count <= 1, "CONSUMER.DELETED advisories: {count}");
    } else {
        assert_eq!(count, 1, "CONSUMER.DELETED advisories");
    }

    // Two of three gone: the last one has no meta leader, and /healthz says so (HTTP 503).
    assert_eq!(health(nodes[2].http, "").0, 200);
    nodes[0].server.kill9();
    nodes[1].server.kill9();
    let deadline = Instant::now() + WAIT;
    loop {
        let (code, body) = health(nodes[2].http, "");
        if code == 503 {
            assert_eq!(body["status"], "unavailable", "{body}");
            // (It had one: "has not established contact" is for a server that never had.
            // nats-server 2.15.1 sometimes answers that one here too.)
            let nats = common::server_binary().contains("nats-server");
            assert!(
                body["error"] == "JetStream is not current with the meta leader"
                    || (nats
                        && body["error"]
                            == "JetStream has not established contact with a meta leader"),
                "{body}"
            );
            break;
        }
        assert!(Instant::now() < deadline, "still healthy: {body}");
        std::thread::sleep(Duration::from_millis(200));
    }
    let (code, body) = health(nodes[2].http, "?details=true");
    assert_eq!(code, 503);
    assert_eq!(body["status"], "error", "{body}");
    assert_eq!(body["errors"][0]["type"], "JETSTREAM");
    assert_eq!(health(nodes[2].http, "?js-server-only=true").0, 200);
}

/// `/healthz` of a monitoring port: the HTTP status and the body.
fn health(port: u16, query: &str) -> (u16, Value) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect monitor");
    s.set_read_timeout(Some(WAIT)).unwrap();
    write!(s, "GET /healthz{query} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let code = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text.split("\r\n\r\n").nth(1).unwrap_or_default();
    (code, serde_json::from_str(body).unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_meta_leader_steps_down_when_the_system_account_asks() {
    const SUCCESS: &str =
        r#"{"type":"io.nats.jetstream.api.v1.meta_leader_stepdown_response","success":true}"#;
    let nodes = three_nodes_with_accounts(|_| String::new());
    let leader = meta_leader(&nodes).expect("a meta leader");
    let follower = (host_index(&leader) + 1) % 3;
    // Asked through a server that does not lead.
    let sys = system_user(&nodes[follower]).await;
    let app = async_nats::connect(nodes[follower].server.url())
        .await
        .unwrap();

    // Another account: no answer at all (nor no-responders), as nats-server.
    assert!(
        ask(
            &app,
            "$JS.API.META.LEADER.STEPDOWN",
            "",
            Duration::from_secs(2)
        )
        .await
        .is_none(),
        "an APP user got an answer"
    );
    assert_eq!(meta_leader(&nodes).as_deref(), Some(leader.as_str()));

    // Refusals (exact bodies as recorded from nats-server 2.15.1): leadership stays.
    let answer = meta_step_down(&sys, r#"{"placement":{"preferred":"nX"}}"#).await;
    assert_eq!(
        answer,
        r#"{"type":"io.nats.jetstream.api.v1.meta_leader_stepdown_response","error":{"code":400,"err_code":10005,"description":"preferred server \"nX\" not known"}}"#
    );
    let answer = meta_step_down(
        &sys,
        &format!(r#"{{"placement": {{"preferred": "{leader}"}}}}"#),
    )
    .await;
    assert_eq!(
        answer,
        format!(
            r#"{{"type":"io.nats.jetstream.api.v1.meta_leader_stepdown_response","error":{{"code":400,"err_code":10005,"description":"preferred server \"{leader}\" is already leader"}}}}"#
        )
    );
    let answer = meta_step_down(&sys, r#"{"bogus":1}"#).await;
    assert_eq!(
        answer,
        r#"{"type":"io.nats.jetstream.api.v1.meta_leader_stepdown_response","error":{"code":400,"err_code":10025,"description":"invalid JSON: json: unknown field \"bogus\""}}"#
    );
    let answer = meta_step_down(&sys, r#"{"placement":{"cluster":"D"}}"#).await;
    assert_eq!(
        answer,
        r#"{"type":"io.nats.jetstream.api.v1.meta_leader_stepdown_response","error":{"code":400,"err_code":10005,"description":"no replacement peer connected"}}"#
    );
    assert_eq!(meta_leader(&nodes).as_deref(), Some(leader.as_str()));

    // A plain step-down: another server leads, every node agrees.
    assert_eq!(meta_step_down(&sys, "").await, SUCCESS);
    let second = new_meta_leader(&nodes, &leader);

    // To a preferred server (the one that led first), within the cluster named.
    let answer = meta_step_down(
        &sys,
        &format!(r#"{{"placement":{{"cluster":"C","preferred":"{leader}"}}}}"#),
    )
    .await;
    assert_eq!(answer, SUCCESS);
    assert_eq!(new_meta_leader(&nodes, &second), leader);

    // The cluster goes on: a stream created and written through every node.
    let ctx = [
        js(&nodes[0]).await,
        js(&nodes[1]).await,
        js(&nodes[2]).await,
    ];
    eventually("create after the step-downs", || {
        ctx[follower].create_stream(stream::Config {
            name: "AFTER".into(),
            subjects: vec!["after.>".into()],
            num_replicas: 3,
            ..Default::default()
        })
    })
    .await;
    for (i, c) in ctx.iter().enumerate() {
        // Retried with a Msg-Id (the stream's first leader may still be settling on a busy
        // machine): a retry of a stored publish is acknowledged as a duplicate, same seq.
        let ack = eventually("publish after the step-downs", || async {
            let mut headers = async_nats::HeaderMap::new();
            headers.insert("Nats-Msg-Id", format!("after-{i}").as_str());
            c.publish_with_headers(format!("after.{i}"), headers, "x".into())
                .await
                .map_err(|e| e.to_string())?
                .await
                .map_err(|e| e.to_string())
        })
        .await;
        assert_eq!(ack.sequence, i as u64 + 1);
    }
}

/// The answer to a JetStream API request on `client`, as text (panics when none comes).
async fn api(client: &async_nats::Client, subject: &str, body: &str) -> String {
    let m = ask(client, subject, body, Duration::from_secs(5))
        .await
        .unwrap_or_else(|| panic!("no answer to {subject}"));
    String::from_utf8(m.payload.to_vec()).expect("UTF-8 answer")
}

/// The server (`cluster.leader`) and replicas of a stream created with `config` through
/// `client`, retried while the meta group elects.
async fn placed(client: &async_nats::Client, name: &str, config: &str) -> (String, Vec<String>) {
    let deadline = Instant::now() + WAIT;
    loop {
        let answer = api(client, &format!("$JS.API.STREAM.CREATE.{name}"), config).await;
        let v: Value = serde_json::from_str(&answer).unwrap();
        if v["error"].is_null() {
            assert_eq!(v["config"]["name"], name, "{answer}");
            let leader = v["cluster"]["leader"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            let mut replicas: Vec<String> = v["cluster"]["replicas"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|r| r["name"].as_str().map(str::to_owned))
                .collect();
            replicas.sort();
            return (leader, replicas);
        }
        assert!(Instant::now() < deadline, "create {name}: {answer}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_are_placed_by_server_tags() {
    const TAGS: [&str; 3] = [
        r#"["az:1", "SSD", "region:eu"]"#,
        r#"["az:2", "region:eu"]"#,
        r#"["az:3", "ssd", "region:eu"]"#,
    ];
    let nodes = three_nodes_with_accounts(|i| format!("server_tags: {}\n", TAGS[i]));
    // Each server's tags, lower-cased, in /varz.
    assert_eq!(
        http_json(nodes[0].http, "/varz")["tags"],
        serde_json::json!(["az:1", "ssd", "region:eu"])
    );
    assert_eq!(
        http_json(nodes[1].http, "/varz")["tags"],
        serde_json::json!(["az:2", "region:eu"])
    );
    meta_leader(&nodes).expect("a meta leader");
    // Every stream created through n1: the others' tags reached it.
    let app = async_nats::connect(nodes[0].server.url()).await.unwrap();

    // One replica on the one server with the tag (any case).
    let (leader, replicas) = placed(
        &app,
        "AZ2",
        r#"{"name":"AZ2","subjects":["az2"],"placement":{"tags":["az:2"]}}"#,
    )
    .await;
    assert_eq!((leader.as_str(), replicas.len()), ("n2", 0));
    let (leader, _) = placed(
        &app,
        "AZ3",
        r#"{"name":"AZ3","subjects":["az3"],"placement":{"cluster":"C","tags":["AZ:3"]}}"#,
    )
    .await;
    assert_eq!(leader, "n3");
    // The config keeps the tags as given.
    let info: Value =
        serde_json::from_str(&api(&app, "$JS.API.STREAM.INFO.AZ3", "").await).unwrap();
    assert_eq!(
        info["config"]["placement"]["tags"],
        serde_json::json!(["AZ:3"])
    );
    assert_eq!(info["cluster"]["leader"], "n3");
    // Not n1 (`!` excludes), with ssd: n3.
    let (leader, _) = placed(
        &app,
        "NOT1",
        r#"{"name":"NOT1","subjects":["not1"],"placement":{"tags":["!az:1","ssd"]}}"#,
    )
    .await;
    assert_eq!(leader, "n3");
    // Three replicas on the three servers of region:eu (read from the stream's info: the
    // create answer of a replicated stream has no cluster section on jsserver yet).
    placed(
        &app,
        "EU",
        r#"{"name":"EU","subjects":["eu"],"num_replicas":3,"placement":{"tags":["region:eu"]}}"#,
    )
    .await;
    let info: Value = serde_json::from_str(&api(&app, "$JS.API.STREAM.INFO.EU", "").await).unwrap();
    let mut all: Vec<&str> = info["cluster"]["replicas"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["name"].as_str())
        .chain(info["cluster"]["leader"].as_str())
        .collect();
    all.sort_unstable();
    assert_eq!(all, ["n1", "n2", "n3"], "{info}");

    // Refusals, exact as nats-server 2.15.1 answers them.
    let refused = |description: &str| {
        format!(
            r#"{{"type":"io.nats.jetstream.api.v1.stream_create_response","error":{{"code":400,"err_code":10005,"description":"{description}"}}}}"#
        )
    };
    // Two servers have ssd, three are wanted.
    assert_eq!(
        api(
            &app,
            "$JS.API.STREAM.CREATE.SSD3",
            r#"{"name":"SSD3","subjects":["ssd3"],"num_replicas":3,"placement":{"tags":["ssd"]}}"#
        )
        .await,
        refused("no suitable peers for placement, tags not matched ['ssd']")
    );
    assert_eq!(
        api(
            &app,
            "$JS.API.STREAM.CREATE.AZ9",
            r#"{"name":"AZ9","subjects":["az9"],"placement":{"tags":["az:9"]}}"#
        )
        .await,
        refused("no suitable peers for placement, tags not matched ['az:9']")
    );
    assert_eq!(
        api(
            &app,
            "$JS.API.STREAM.CREATE.D",
            r#"{"name":"D","subjects":["d"],"placement":{"cluster":"D"}}"#
        )
        .await,
        refused("no suitable peers for placement")
    );
    // Two tags no server has both of: each server left out names one it lacks (in an order
    // nats-server does not fix).
    let answer = api(
        &app,
        "$JS.API.STREAM.CREATE.BOTH",
        r#"{"name":"BOTH","subjects":["both"],"placement":{"tags":["az:1","az:2"]}}"#,
    )
    .await;
    let v: Value = serde_json::from_str(&answer).unwrap();
    assert_eq!(v["error"]["err_code"], 10005, "{answer}");
    let text = v["error"]["description"].as_str().unwrap();
    assert!(
        text == "no suitable peers for placement, tags not matched ['az:1', 'az:2']"
            || text == "no suitable peers for placement, tags not matched ['az:2', 'az:1']",
        "{answer}"
    );
    let names: Value = serde_json::from_str(&api(&app, "$JS.API.STREAM.NAMES", "").await).unwrap();
    assert_eq!(
        names["streams"],
        serde_json::json!(["AZ2", "AZ3", "EU", "NOT1"])
    );

    // The meta leader steps down to a server with the tags asked for, or refuses.
    let sys = system_user(&nodes[0]).await;
    let leader = meta_leader(&nodes).expect("a meta leader");
    assert_eq!(
        meta_step_down(&sys, r#"{"placement":{"tags":["az:9"]}}"#).await,
        r#"{"type":"io.nats.jetstream.api.v1.meta_leader_stepdown_response","error":{"code":400,"err_code":10005,"description":"no replacement peer connected"}}"#
    );
    let target = ["n1", "n2", "n3"]
        .into_iter()
        .find(|n| *n != leader)
        .unwrap();
    let tag = format!("az:{}", host_index(target) + 1);
    assert_eq!(
        meta_step_down(&sys, &format!(r#"{{"placement":{{"tags":["{tag}"]}}}}"#)).await,
        r#"{"type":"io.nats.jetstream.api.v1.meta_leader_stepdown_response","success":true}"#
    );
    assert_eq!(new_meta_leader(&nodes, &leader), target);
}

/// Every answer to `subject` (with `body`) asked through `client`, collected until none came
/// for 1 s.
async fn answers(client: &async_nats::Client, subject: &str, body: &str) -> Vec<Value> {
    let inbox = client.new_inbox();
    let mut sub = client.subscribe(inbox.clone()).await.expect("subscribe");
    client
        .publish_with_reply(subject.to_string(), inbox, body.to_string().into())
        .await
        .expect("publish");
    client.flush().await.expect("flush");
    let mut got = Vec::new();
    while let Ok(Some(m)) = tokio::time::timeout(Duration::from_secs(1), sub.next()).await {
        if m.status.is_some() {
            got.push(serde_json::json!({ "status": m.status.map(u16::from) }));
            continue;
        }
        got.push(serde_json::from_slice(&m.payload).expect("JSON answer"));
    }
    got
}

/// The sorted `server.name`s of `answers`.
fn names_of(answers: &[Value]) -> Vec<String> {
    let mut names: Vec<String> = answers
        .iter()
        .map(|a| a["server"]["name"].as_str().unwrap_or("?").to_owned())
        .collect();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn system_requests_are_answered_by_every_server_of_the_cluster() {
    let nodes = three_nodes_with_accounts(|i| format!("server_tags: [\"az:{}\"]\n", i + 1));
    let leader = meta_leader(&nodes).expect("a meta leader");
    let sys = system_user(&nodes[1]).await;
    // Every node routed to every other (a PING before that misses a server).
    let deadline = Instant::now() + WAIT;
    while nodes.iter().any(|n| {
        http_json(n.http, "/routez")["num_routes"]
            .as_u64()
            .unwrap_or(0)
            < 2
    }) {
        assert!(Instant::now() < deadline, "routes not up");
        std::thread::sleep(Duration::from_millis(100));
    }

    // PING: each server's statsz, the asked one's and the two others' over the routes.
    let got = answers(&sys, "$SYS.REQ.SERVER.PING", "").await;
    assert_eq!(names_of(&got), ["n1", "n2", "n3"], "{got:?}");
    for a in &got {
        assert_eq!(a["server"]["cluster"], "C", "{a}");
        let n = a["server"]["name"].as_str().unwrap();
        assert_eq!(
            a["server"]["tags"],
            serde_json::json!([format!("az:{}", host_index(n) + 1)]),
            "{a}"
        );
        assert_eq!(a["statsz"]["active_servers"], 3, "{a}");
    }
    // PING.VARZ too, and the id of each is the one its /varz tells.
    let got = answers(&sys, "$SYS.REQ.SERVER.PING.VARZ", "").await;
    assert_eq!(names_of(&got), ["n1", "n2", "n3"], "{got:?}");
    let n3_id = http_json(nodes[2].http, "/varz")["server_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let from_n3 = got.iter().find(|a| a["server"]["name"] == "n3").unwrap();
    assert_eq!(from_n3["data"]["server_id"], n3_id.as_str());
    assert_eq!(from_n3["data"]["server_name"], "n3");
    // One server by id, asked through another.
    let got = answers(&sys, &format!("$SYS.REQ.SERVER.{n3_id}.VARZ"), "").await;
    assert_eq!(names_of(&got), ["n3"], "{got:?}");
    // Filters in the body: by tag, by name, by cluster.
    let got = answers(&sys, "$SYS.REQ.SERVER.PING", r#"{"tags":["AZ:1"]}"#).await;
    assert_eq!(names_of(&got), ["n1"], "{got:?}");
    let got = answers(
        &sys,
        "$SYS.REQ.SERVER.PING.VARZ",
        r#"{"server_name":"n2","exact_match":true}"#,
    )
    .await;
    assert_eq!(names_of(&got), ["n2"], "{got:?}");
    let got = answers(&sys, "$SYS.REQ.SERVER.PING", r#"{"cluster":"D"}"#).await;
    assert!(got.is_empty(), "{got:?}");
    // JSZ of the meta leader only.
    let got = answers(&sys, "$SYS.REQ.SERVER.PING.JSZ", r#"{"leader_only":true}"#).await;
    assert_eq!(names_of(&got), std::slice::from_ref(&leader), "{got:?}");
    assert_eq!(got[0]["data"]["meta_cluster"]["leader"], leader.as_str());

    // Another account's user: no responders, whatever node.
    let app = async_nats::connect(nodes[0].server.url()).await.unwrap();
    let got = answers(&app, "$SYS.REQ.SERVER.PING", "").await;
    assert_eq!(got, [serde_json::json!({"status": 503})]);
}

/// `$JS.API.SERVER.REMOVE` from the system account: a dead server leaves the meta group
/// (the others stop counting it) and its replicated stream goes on without it; refusals as
/// recorded from nats-server 2.15.1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_server_is_removed_from_the_meta_group() {
    const TYPE: &str = "io.nats.jetstream.api.v1.meta_server_remove_response";
    let mut nodes = three_nodes_with_accounts(|_| String::new());
    let leader = meta_leader(&nodes).expect("a meta leader");
    let li = host_index(&leader);
    let victim = (li + 1) % 3;
    let victim_name = format!("n{}", victim + 1);
    let js = js(&nodes[li]).await;
    eventually("an R3 stream", || {
        js.get_or_create_stream(stream::Config {
            num_replicas: 3,
            ..orders()
        })
    })
    .await;
    nodes[victim].server.kill9();

    let sys = system_user(&nodes[li]).await;
    let remove = |body: &'static str| {
        let sys = sys.clone();
        async move {
            let m = ask(&sys, "$JS.API.SERVER.REMOVE", body, Duration::from_secs(5))
                .await
                .expect("an answer");
            serde_json::from_slice::<Value>(&m.payload).expect("json")
        }
    };
    let v = remove(r#"{"peer":"nX"}"#).await;
    assert_eq!(v["type"], TYPE, "{v}");
    assert_eq!(v["error"]["err_code"], 10044, "{v}");
    let v = remove("").await;
    assert_eq!(v["error"]["err_code"], 10003, "{v}");
    // Another account gets no answer.
    let app = async_nats::connect(nodes[li].server.url()).await.unwrap();
    assert!(ask(
        &app,
        "$JS.API.SERVER.REMOVE",
        r#"{"peer":"n1"}"#,
        Duration::from_secs(2)
    )
    .await
    .is_none());

    let body = format!(r#"{{"peer":"{victim_name}"}}"#);
    let m = ask(&sys, "$JS.API.SERVER.REMOVE", &body, Duration::from_secs(5))
        .await
        .expect("an answer");
    let v: Value = serde_json::from_slice(&m.payload).expect("json");
    assert_eq!(v, serde_json::json!({"type": TYPE, "success": true}));

    // The leader no longer counts it among the meta group's replicas.
    let http = nodes[li].http;
    eventually("the server gone from the meta group", || async {
        let jsz = http_json(http, "/jsz");
        let names: Vec<String> = jsz["meta_cluster"]["replicas"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r["name"].as_str().map(str::to_owned))
            .collect();
        if names.contains(&victim_name) {
            Err(format!("{jsz}"))
        } else {
            Ok(())
        }
    })
    .await;
    // The stream goes on.
    let ack = eventually("a publish", || async {
        js.publish("orders.1", "x".into())
            .await
            .map_err(|e| e.to_string())?
            .await
            .map_err(|e| e.to_string())
    })
    .await;
    assert!(ack.sequence >= 1);
    // A new server joins the meta group, and a stream of three replicas can be placed on
    // the two survivors and it.
    let survivors: Vec<u16> = (0..3)
        .filter(|&i| i != victim)
        .map(|i| nodes[i].cluster)
        .collect();
    let n4 = node_with_accounts("n4", (free_port(), free_port()), &survivors, "");
    eventually("n4 in the meta group", || async {
        let jsz = http_json(http, "/jsz");
        let names: Vec<String> = jsz["meta_cluster"]["replicas"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|r| r["current"] == true)
            .filter_map(|r| r["name"].as_str().map(str::to_owned))
            .collect();
        if names.iter().any(|n| n == "n4") {
            Ok(())
        } else {
            Err(format!("{jsz}"))
        }
    })
    .await;
    let mut three = eventually("an R3 stream on n4 too", || {
        js.get_or_create_stream(stream::Config {
            name: "THREE".into(),
            subjects: vec!["three.>".into()],
            num_replicas: 3,
            ..Default::default()
        })
    })
    .await;
    let c = three
        .info()
        .await
        .expect("info")
        .cluster
        .clone()
        .expect("cluster");
    let mut placed: Vec<String> = c.replicas.iter().map(|r| r.name.clone()).collect();
    placed.extend(c.leader.clone());
    assert!(placed.iter().any(|n| n == "n4"), "{c:?}");
    assert!(!placed.contains(&victim_name), "{c:?}");
    drop(n4);

    // Ours: the stream's group dropped it too (no other server to take its place).
    if !common::server_binary().contains("nats-server") {
        eventually("the server gone from the stream's group", || async {
            let mut s = js.get_stream("ORDERS").await.map_err(|e| e.to_string())?;
            let c = s.info().await.map_err(|e| e.to_string())?.cluster.clone();
            let names: Vec<String> = c
                .iter()
                .flat_map(|c| c.replicas.iter().map(|r| r.name.clone()))
                .collect();
            if names.len() == 1 && !names.contains(&victim_name) {
                Ok(())
            } else {
                Err(format!("{c:?}"))
            }
        })
        .await;
    }
}
