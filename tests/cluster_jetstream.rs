//! Replicated JetStream (issue 17) on clusters of three and five servers on free loopback
//! ports, with faults injected while clients publish and consume, and a Jepsen-style checker
//! (`common/checker.rs`) holding the cluster to what it told its clients: no acknowledged
//! publish lost, no sequence handed out twice (retries deduplicated by `Nats-Msg-Id`), no
//! confirmed ack redelivered, consumer state that adds up.
//!
//! Each node has a config file (`server_name`, `jetstream { store_dir }`, `cluster { name,
//! listen, advertise, routes }`). Every route goes through a [`Proxy`] of its own: node i
//! dials node j through `routes[i][j]`, so cutting the proxies of one node isolates it from
//! the others while its clients stay connected. Each node advertises (`cluster {
//! advertise }`) a proxy that is kept cut, so that a route learned from a peer (gossip) can
//! never go around the proxies: every route is one of the configured ones.
//!
//! Every test runs against jsserver and, with `JSSERVER_TEST_BINARY=nats-server`, against
//! nats-server 2.15.1. Timings (fault to the first PubAck after it) are printed, and only
//! checked against a generous bound.

#[path = "common/checker.rs"]
mod checker;
mod common;
#[path = "common/proxy.rs"]
mod proxy;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, consumer::pull, stream};
use checker::History;
use common::{free_port, TestServer};
use futures_util::StreamExt;
use proxy::Proxy;
use serde_json::Value;

/// How long a wait for a cluster condition may take (a wait, not a timing assertion).
const WAIT: Duration = Duration::from_secs(30);
/// The bound on the time from a fault to the first PubAck after it: generous on purpose
/// (the goal is 2 s; it is measured and printed, not asserted, on a shared 2-core machine).
const WRITABLE_BOUND: Duration = Duration::from_secs(15);
/// How long one publish (with its retries) keeps trying before the publisher gives it up.
const PUBLISH_GIVE_UP: Duration = Duration::from_secs(60);
/// The stream.
const STREAM: &str = "ORDERS";
/// The durable pull consumer.
const CONSUMER: &str = "shipping";

/// One server of the cluster: its ports and files, and its process while it runs.
struct JsNode {
    name: String,
    client: u16,
    http: u16,
    store: PathBuf,
    conf: PathBuf,
    dir: PathBuf,
    starts: u32,
    server: Option<TestServer>,
}

/// A JetStream cluster with a proxy on every route.
struct JsCluster {
    nodes: Vec<JsNode>,
    /// `routes[i][j]`: the proxy node i dials node j through (`None` for i == j).
    routes: Vec<Vec<Option<Proxy>>>,
    /// The address each node advertises: a proxy kept cut (see the module doc).
    _advertised: Vec<Proxy>,
    /// The nodes holding the stream, when not all of them (after its replicas changed).
    holders: Option<Vec<String>>,
    _root: tempfile::TempDir,
}

impl JsCluster {
    /// Starts `n` nodes `n1`..`nN` in cluster `C` and waits until they agree on a meta
    /// leader.
    fn start(n: usize) -> JsCluster {
        // `JSCLUSTER_KEEP=1` keeps the nodes' directories (logs, stores) for a look after.
        let root = tempfile::Builder::new()
            .disable_cleanup(std::env::var_os("JSCLUSTER_KEEP").is_some())
            .tempdir()
            .expect("temp dir");
        if std::env::var_os("JSCLUSTER_KEEP").is_some() {
            eprintln!("KEEP {}", root.path().display());
        }
        let cluster_ports: Vec<u16> = (0..n).map(|_| free_port()).collect();
        let routes: Vec<Vec<Option<Proxy>>> = (0..n)
            .map(|i| {
                (0..n)
                    .map(|j| (i != j).then(|| Proxy::start(cluster_ports[j])))
                    .collect()
            })
            .collect();
        let advertised: Vec<Proxy> = cluster_ports.iter().map(|&p| Proxy::start_cut(p)).collect();
        let mut nodes = Vec::new();
        for i in 0..n {
            let name = format!("n{}", i + 1);
            let dir = root.path().join(&name);
            std::fs::create_dir_all(&dir).expect("node dir");
            let store = dir.join("store");
            let conf = dir.join("server.conf");
            let (client, http) = (free_port(), free_port());
            let route_list: Vec<String> = routes[i]
                .iter()
                .flatten()
                .map(|p| format!("nats-route://127.0.0.1:{}", p.port))
                .collect();
            std::fs::write(
                &conf,
                format!(
                    "server_name: {name}\nlisten: 127.0.0.1:{client}\nhttp: 127.0.0.1:{http}\n\
                     jetstream {{\n  store_dir: \"{}\"\n}}\n\
                     cluster {{\n  name: C\n  listen: 127.0.0.1:{}\n  \
                     advertise: \"127.0.0.1:{}\"\n  routes: [\n    {}\n  ]\n}}\n",
                    store.display(),
                    cluster_ports[i],
                    advertised[i].port,
                    route_list.join("\n    ")
                ),
            )
            .expect("write config");
            nodes.push(JsNode {
                name,
                client,
                http,
                store,
                conf,
                dir,
                starts: 0,
                server: None,
            });
        }
        let mut cluster = JsCluster {
            nodes,
            routes,
            _advertised: advertised,
            holders: None,
            _root: root,
        };
        for i in 0..n {
            cluster.launch(i);
        }
        cluster.wait_for_meta_leader();
        cluster
    }

    /// Starts node `i`'s process (a new log file each time, so that "Server is ready" is
    /// this start's).
    fn launch(&mut self, i: usize) {
        let node = &mut self.nodes[i];
        node.starts += 1;
        let log = node.dir.join(format!("server-{}.log", node.starts));
        let args = vec![
            "-c".to_string(),
            node.conf.display().to_string(),
            "-l".to_string(),
            log.display().to_string(),
        ];
        let scratch = tempfile::tempdir().expect("temp dir");
        // Snapshots go over the routes in parts of 64 KiB (8 MiB by default): the tests'
        // snapshots of a few hundred KiB take the path a large stream's do.
        let env = [("JSSERVER_RAFT_PART_BYTES", "65536")];
        node.server = Some(TestServer::spawn_env(args, &env, scratch, log));
    }

    /// The names of the nodes.
    fn names(&self) -> Vec<String> {
        self.nodes.iter().map(|n| n.name.clone()).collect()
    }

    /// The index of the node called `name`.
    fn index(&self, name: &str) -> usize {
        self.nodes
            .iter()
            .position(|n| n.name == name)
            .unwrap_or_else(|| panic!("no node {name:?}"))
    }

    /// The indexes of the running nodes.
    fn running(&self) -> Vec<usize> {
        (0..self.nodes.len())
            .filter(|&i| self.nodes[i].server.is_some())
            .collect()
    }

    /// Kills node `i` with SIGKILL.
    fn kill9(&mut self, i: usize) {
        let mut server = self.nodes[i].server.take().expect("node running");
        server.kill9();
    }

    /// Starts node `i` again (same ports, same store unless `wipe`: then an empty one).
    fn restart(&mut self, i: usize, wipe: bool) {
        assert!(self.nodes[i].server.is_none(), "node {i} still running");
        if wipe {
            std::fs::remove_dir_all(&self.nodes[i].store).expect("wipe store");
        }
        self.launch(i);
    }

    /// Cuts node `i` off from every other node (both directions of each route); its
    /// clients stay connected.
    fn cut(&self, i: usize) {
        for j in 0..self.nodes.len() {
            if let Some(p) = &self.routes[i][j] {
                p.cut();
            }
            if let Some(p) = &self.routes[j][i] {
                p.cut();
            }
        }
    }

    /// Undoes [`JsCluster::cut`].
    fn heal(&self, i: usize) {
        for j in 0..self.nodes.len() {
            if let Some(p) = &self.routes[i][j] {
                p.heal();
            }
            if let Some(p) = &self.routes[j][i] {
                p.heal();
            }
        }
    }

    /// A client of node `i` that fails over to the others in order.
    async fn client(&self, i: usize) -> async_nats::Client {
        let n = self.nodes.len();
        let urls: Vec<async_nats::ServerAddr> = (0..n)
            .map(|k| {
                format!("nats://127.0.0.1:{}", self.nodes[(i + k) % n].client)
                    .parse()
                    .expect("server url")
            })
            .collect();
        async_nats::ConnectOptions::new()
            .retain_servers_order()
            .connect(urls)
            .await
            .expect("connect")
    }

    /// A JetStream context on a client of node `i`, with a 2 s request timeout.
    async fn js(&self, i: usize) -> (async_nats::Client, jetstream::Context) {
        let client = self.client(i).await;
        let js = jetstream::ContextBuilder::new()
            .timeout(Duration::from_secs(2))
            .build(client.clone());
        (client, js)
    }

    /// Node `i`'s monitoring endpoint `path` as JSON (`None` when it does not answer).
    fn monitor(&self, i: usize, path: &str) -> Option<Value> {
        http_get(self.nodes[i].http, path).and_then(|b| serde_json::from_str(&b).ok())
    }

    /// The meta leader as node `i` reports it (`/jsz`), if any.
    fn meta_leader_seen_by(&self, i: usize) -> Option<String> {
        self.monitor(i, "/jsz")?["meta_cluster"]["leader"]
            .as_str()
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
    }

    /// Waits until every running node reports the same meta leader, and returns it.
    fn wait_for_meta_leader(&self) -> String {
        let deadline = Instant::now() + WAIT;
        loop {
            let seen: Vec<Option<String>> = self
                .running()
                .into_iter()
                .map(|i| self.meta_leader_seen_by(i))
                .collect();
            if let Some(Some(first)) = seen.first() {
                if seen.iter().all(|s| s.as_ref() == Some(first)) {
                    return first.clone();
                }
            }
            assert!(Instant::now() < deadline, "no agreed meta leader: {seen:?}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The names of the peers node `i` has a route to (`/routez`).
    fn peers(&self, i: usize) -> HashSet<String> {
        self.monitor(i, "/routez")
            .map(|v| {
                v["routes"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|r| r["remote_name"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Waits until node `i` has routes to exactly the nodes `want`.
    async fn wait_for_peers(&self, i: usize, want: &[usize]) {
        let want: HashSet<String> = want.iter().map(|&j| self.nodes[j].name.clone()).collect();
        let deadline = Instant::now() + WAIT;
        loop {
            let got = self.peers(i);
            if got == want {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{}: routes to {got:?}, want {want:?}",
                self.nodes[i].name
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The last sequence of the stream's replica on node `i` (`/jsz?streams=true`).
    fn replica_last_seq(&self, i: usize) -> Option<u64> {
        let v = self.monitor(i, "/jsz?accounts=true&streams=true")?;
        v["account_details"]
            .as_array()?
            .iter()
            .flat_map(|a| a["stream_detail"].as_array().into_iter().flatten())
            .find(|s| s["name"] == STREAM)?["state"]["last_seq"]
            .as_u64()
    }

    /// The stream's leader and last sequence as node `i`'s replica sees them
    /// (`/jsz?streams=true`).
    fn replica_view(&self, i: usize) -> Option<(String, u64)> {
        let v = self.monitor(i, "/jsz?accounts=true&streams=true")?;
        let s = v["account_details"]
            .as_array()?
            .iter()
            .flat_map(|a| a["stream_detail"].as_array().into_iter().flatten())
            .find(|s| s["name"] == STREAM)?
            .clone();
        Some((
            s["cluster"]["leader"].as_str()?.to_owned(),
            s["state"]["last_seq"].as_u64()?,
        ))
    }

    /// The running nodes that hold the stream (all of them unless [`JsCluster::holders`]).
    fn holding(&self) -> Vec<usize> {
        self.running()
            .into_iter()
            .filter(|&i| {
                self.holders
                    .as_ref()
                    .is_none_or(|h| h.contains(&self.nodes[i].name))
            })
            .collect()
    }

    /// Waits until every running node names the same running node as the stream's leader
    /// (a leader cut off and healed may answer API requests from its stale state until it
    /// hears of the new term), then until every running replica has caught up with the
    /// leader's last sequence; returns that sequence.
    async fn wait_settled(&self) -> u64 {
        let deadline = Instant::now() + WAIT;
        let last = loop {
            let views: Vec<Option<(String, u64)>> = self
                .holding()
                .into_iter()
                .map(|i| self.replica_view(i))
                .collect();
            let leader = views.first().cloned().flatten().map(|(l, _)| l);
            if let Some(leader) = leader.filter(|l| {
                views
                    .iter()
                    .all(|v| v.as_ref().is_some_and(|(x, _)| x == l))
                    && self.running().iter().any(|&i| self.nodes[i].name == *l)
            }) {
                if let Some((_, last)) = self.replica_view(self.index(&leader)) {
                    break last;
                }
            }
            assert!(
                Instant::now() < deadline,
                "no agreed stream leader: {views:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        for i in self.holding() {
            self.wait_caught_up(i, last).await;
        }
        last
    }

    /// Waits until node `i`'s replica has caught up with `last_seq` (the stream's last
    /// sequence at some point after the node came back).
    async fn wait_caught_up(&self, i: usize, last_seq: u64) {
        let deadline = Instant::now() + WAIT;
        loop {
            let got = self.replica_last_seq(i);
            if got.is_some_and(|s| s >= last_seq) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{}: replica at {got:?}, stream at {last_seq}",
                self.nodes[i].name
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// A minimal HTTP/1.0 GET of a monitoring port; the body (`None` if it does not answer).
fn http_get(port: u16, path: &str) -> Option<String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    text.split_once("\r\n\r\n").map(|(_, body)| body.to_owned())
}

/// Retries `what` (a JetStream API call) until it succeeds or [`WAIT`] passes.
async fn retry<T, E: std::fmt::Display, F, Fut>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, E>>,
{
    let deadline = Instant::now() + WAIT;
    loop {
        match f().await {
            Ok(v) => return v,
            Err(e) => {
                assert!(Instant::now() < deadline, "{what}: {e}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
}

/// Creates the `ORDERS` stream (subjects `orders.>`) with `replicas`, and the durable pull
/// consumer `shipping` (explicit acks, `ack_wait`).
async fn create_orders(js: &jetstream::Context, replicas: usize, ack_wait: Duration) {
    retry("create stream", || {
        js.get_or_create_stream(stream::Config {
            name: STREAM.into(),
            subjects: vec!["orders.>".into()],
            num_replicas: replicas,
            ..Default::default()
        })
    })
    .await;
    retry("create consumer", || async {
        js.get_stream(STREAM)
            .await
            .map_err(|e| e.to_string())?
            .get_or_create_consumer(
                CONSUMER,
                pull::Config {
                    durable_name: Some(CONSUMER.into()),
                    ack_policy: jetstream::consumer::AckPolicy::Explicit,
                    ack_wait,
                    ..Default::default()
                },
            )
            .await
            .map_err(|e| e.to_string())
    })
    .await;
}

/// Publishes `id` (as payload and `Nats-Msg-Id`) on `subject`, retrying the same id on a
/// timeout, no responders or error answer (503 during an election) until it is
/// acknowledged or [`PUBLISH_GIVE_UP`] passes; records the attempt and the PubAck.
async fn publish_retry(
    js: &jetstream::Context,
    subject: &str,
    id: &str,
    history: &History,
) -> Option<jetstream::publish::PublishAck> {
    history.attempt(id);
    let deadline = Instant::now() + PUBLISH_GIVE_UP;
    loop {
        let publish = jetstream::message::PublishMessage::build()
            .payload(id.to_owned().into())
            .message_id(id);
        if let Ok(ack) = js.send_publish(subject.to_owned(), publish).await {
            if let Ok(Ok(ack)) = tokio::time::timeout(Duration::from_secs(5), ack).await {
                history.pub_ack(id, ack.sequence, ack.duplicate);
                return Some(ack);
            }
        }
        if Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Acks `msg` with a reply subject and waits for the server's answer (a confirmed ack, as
/// `ack_sync`); `true` when confirmed. A no-responders status is not a confirmation
/// (async-nats' `double_ack` would take any reply as one).
async fn confirm_ack(client: &async_nats::Client, msg: &jetstream::Message) -> bool {
    let Some(reply) = msg.reply.clone() else {
        return false;
    };
    match tokio::time::timeout(
        Duration::from_secs(3),
        client.request(reply, bytes::Bytes::from_static(b"+ACK")),
    )
    .await
    {
        Ok(Ok(answer)) => answer.status.is_none_or(|s| s.as_u16() == 200),
        _ => false,
    }
}

/// Publishers (one per node, each on its own client) and shipping workers (one per node)
/// running until stopped, recording into one [`History`].
struct Load {
    history: Arc<History>,
    stop_publishing: Arc<AtomicBool>,
    stop_working: Arc<AtomicBool>,
    publishers: Vec<tokio::task::JoinHandle<()>>,
    workers: Vec<tokio::task::JoinHandle<usize>>,
}

impl Load {
    /// Starts a publisher and a worker on every node of `cluster`; publishers pause
    /// `pace` between publishes.
    async fn start(cluster: &JsCluster, pace: Duration) -> Load {
        let history = Arc::new(History::new());
        let stop_publishing = Arc::new(AtomicBool::new(false));
        let stop_working = Arc::new(AtomicBool::new(false));
        let mut publishers = Vec::new();
        let mut workers = Vec::new();
        for i in 0..cluster.nodes.len() {
            let (_, js) = cluster.js(i).await;
            let (pub_history, stop) = (Arc::clone(&history), Arc::clone(&stop_publishing));
            publishers.push(tokio::spawn(async move {
                let subject = format!("orders.n{}", i + 1);
                let mut k = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let id = format!("p{}-{k}", i + 1);
                    publish_retry(&js, &subject, &id, &pub_history).await;
                    k += 1;
                    tokio::time::sleep(pace).await;
                }
            }));
            let (client, js) = cluster.js(i).await;
            let (work_history, stop) = (Arc::clone(&history), Arc::clone(&stop_working));
            workers.push(tokio::spawn(async move {
                work(i, &client, &js, &work_history, &stop).await
            }));
        }
        Load {
            history,
            stop_publishing,
            stop_working,
            publishers,
            workers,
        }
    }

    /// Stops the publishers and waits for their last publishes.
    async fn stop_publishing(&mut self) {
        self.stop_publishing.store(true, Ordering::Relaxed);
        for p in self.publishers.drain(..) {
            p.await.expect("publisher");
        }
    }

    /// Lets the workers drain the consumer (until its info says everything up to the
    /// stream's end is acknowledged), stops them, and returns how many orders each
    /// confirmed.
    async fn drain(&mut self, js: &jetstream::Context) -> Vec<usize> {
        let (_, last) = retry("stream info", || checker::stream_state(js, STREAM)).await;
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let info = consumer_info(js).await;
            if info.ack_floor.stream_sequence >= last && info.num_ack_pending == 0 {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "consumer not drained: ack floor {} of {last}, {} pending acks, {} confirmed",
                info.ack_floor.stream_sequence,
                info.num_ack_pending,
                self.history.confirmed_count()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        self.stop_working.store(true, Ordering::Relaxed);
        let mut done = Vec::new();
        for w in self.workers.drain(..) {
            done.push(w.await.expect("worker"));
        }
        done
    }
}

/// The consumer's info, retried.
async fn consumer_info(js: &jetstream::Context) -> jetstream::consumer::Info {
    retry("consumer info", || async {
        let stream = js.get_stream(STREAM).await.map_err(|e| e.to_string())?;
        let mut c: jetstream::consumer::PullConsumer = stream
            .get_consumer(CONSUMER)
            .await
            .map_err(|e| e.to_string())?;
        c.info().await.cloned().map_err(|e| e.to_string())
    })
    .await
}

/// A shipping worker: pulls batches from `shipping`, records each delivery, and acks each
/// with a confirmation; returns how many acks were confirmed.
async fn work(
    worker: usize,
    client: &async_nats::Client,
    js: &jetstream::Context,
    history: &History,
    stop: &AtomicBool,
) -> usize {
    let mut confirmed = 0;
    let mut consumer: Option<jetstream::consumer::PullConsumer> = None;
    while !stop.load(Ordering::Relaxed) {
        let c = match &consumer {
            Some(c) => c.clone(),
            None => {
                let got = async {
                    js.get_stream(STREAM)
                        .await
                        .map_err(|e| e.to_string())?
                        .get_consumer::<pull::Config>(CONSUMER)
                        .await
                        .map_err(|e| e.to_string())
                }
                .await;
                match got {
                    Ok(c) => {
                        consumer = Some(c.clone());
                        c
                    }
                    Err(_) => {
                        tokio::time::sleep(Duration::from_millis(200)).await;
                        continue;
                    }
                }
            }
        };
        let pulled_at = Instant::now();
        let batch = c
            .fetch()
            .max_messages(20)
            .expires(Duration::from_millis(500))
            .messages()
            .await;
        let Ok(mut batch) = batch else {
            consumer = None;
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        while let Some(m) = batch.next().await {
            let Ok(m) = m else {
                break;
            };
            let Ok(info) = m.info() else {
                continue;
            };
            let (seq, count) = (info.stream_sequence, info.delivered);
            let id = String::from_utf8_lossy(&m.payload).into_owned();
            history.delivered(&id, seq, count, worker, pulled_at);
            if confirm_ack(client, &m).await {
                history.confirmed(&id, seq);
                confirmed += 1;
            }
        }
    }
    confirmed
}

/// Publishes through node `via` until a PubAck arrives; returns the time from `fault` to
/// that PubAck, printed with `what` and checked against [`WRITABLE_BOUND`].
async fn writable_after(
    cluster: &JsCluster,
    via: usize,
    fault: Instant,
    what: &str,
    history: &History,
) -> Duration {
    let (_, js) = cluster.js(via).await;
    let id = format!("probe-{what}");
    let ack = publish_retry(&js, "orders.probe", &id, history).await;
    let took = fault.elapsed();
    assert!(
        ack.is_some(),
        "{what}: no PubAck within {PUBLISH_GIVE_UP:?}"
    );
    eprintln!("fault-to-writable: {what}: {} ms", took.as_millis());
    assert!(
        took < WRITABLE_BOUND,
        "{what}: writable again only after {took:?}"
    );
    took
}

/// Runs the checker on everything acknowledged so far against the stream read back now;
/// panics with the violations.
async fn check_publishes(
    cluster: &JsCluster,
    js: &jetstream::Context,
    history: &History,
    when: &str,
) -> usize {
    cluster.wait_settled().await;
    let acks = history.acks();
    let stream = checker::read_stream(js, STREAM, Duration::from_secs(60)).await;
    let mut problems = history.check_publishes(&acks, &stream);
    problems.extend(history.check_no_redelivery_after_confirm());
    assert!(
        problems.is_empty(),
        "{when}: {} violations:\n{}",
        problems.len(),
        problems
            .iter()
            .take(30)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    eprintln!(
        "{when}: {} PubAcks, {} messages in the stream: checker passed",
        acks.len(),
        stream.len()
    );
    stream.len()
}

/// After the load: publishers stopped, consumer drained, then every check.
async fn finish(cluster: &JsCluster, load: &mut Load, js: &jetstream::Context) {
    load.stop_publishing().await;
    cluster.wait_settled().await;
    load.drain(js).await;
    let history = &load.history;
    let acks = history.acks();
    let stream = checker::read_stream(js, STREAM, Duration::from_secs(60)).await;
    let last = *stream.keys().next_back().expect("a non-empty stream");
    let mut problems = history.check_publishes(&acks, &stream);
    problems.extend(history.check_no_redelivery_after_confirm());
    problems.extend(history.check_all_delivered(&stream));
    let info = consumer_info(js).await;
    problems.extend(checker::check_consumer_info(&info, last));
    // And nothing confirmed comes back: a last pull finds nothing to deliver.
    let redelivered = retry("final pull", || async {
        let c: jetstream::consumer::PullConsumer = js
            .get_stream(STREAM)
            .await
            .map_err(|e| e.to_string())?
            .get_consumer(CONSUMER)
            .await
            .map_err(|e| e.to_string())?;
        let mut batch = c
            .fetch()
            .max_messages(100)
            .expires(Duration::from_secs(1))
            .messages()
            .await
            .map_err(|e| e.to_string())?;
        let mut got = Vec::new();
        while let Some(m) = batch.next().await {
            got.push(String::from_utf8_lossy(&m.map_err(|e| e.to_string())?.payload).into_owned());
        }
        Ok::<_, String>(got)
    })
    .await;
    problems.extend(
        redelivered
            .iter()
            .map(|id| format!("{id} delivered again after the drain")),
    );
    assert!(
        problems.is_empty(),
        "{} violations:\n{}",
        problems.len(),
        problems
            .iter()
            .take(30)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    eprintln!(
        "final: {} PubAcks, {} messages, {} deliveries, {} acks confirmed, consumer at \
         {last}: checker passed",
        acks.len(),
        stream.len(),
        history.deliveries().len(),
        history.confirmed_count()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orders_on_three_nodes_go_each_to_one_worker() {
    let cluster = JsCluster::start(3);
    let (_, js) = cluster.js(0).await;
    create_orders(&js, 3, Duration::from_secs(30)).await;

    // Stream info names the cluster, its leader and the two other replicas, current.
    let names = cluster.names();
    let deadline = Instant::now() + WAIT;
    let info = loop {
        let info = retry("stream info", || async {
            js.get_stream(STREAM)
                .await
                .map_err(|e| e.to_string())?
                .info()
                .await
                .cloned()
                .map_err(|e| e.to_string())
        })
        .await;
        let c = info.cluster.clone().expect("stream info has cluster");
        if c.replicas.len() == 2 && c.replicas.iter().all(|r| r.current) {
            break info;
        }
        assert!(Instant::now() < deadline, "replicas not current: {c:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let c = info.cluster.expect("cluster");
    assert_eq!(c.name.as_deref(), Some("C"));
    let leader = c.leader.expect("a leader");
    assert!(names.contains(&leader), "leader {leader} of {names:?}");
    let mut replicas: Vec<String> = c.replicas.iter().map(|r| r.name.clone()).collect();
    replicas.sort();
    let mut others: Vec<String> = names.iter().filter(|n| **n != leader).cloned().collect();
    others.sort();
    assert_eq!(replicas, others, "replicas besides the leader");
    assert!(
        c.leader_since.is_some(),
        "when the leader took over: {:?}",
        c.replicas
    );
    for r in &c.replicas {
        assert!(r.lag.unwrap_or(0) == 0 || r.current, "{r:?}");
        // Measured: heard from a moment ago (nats-server's "seen 0.07s ago").
        assert!(
            r.active > Duration::ZERO && r.active < Duration::from_secs(10),
            "{r:?}"
        );
    }

    // The consumer's info names its group too: the cluster, a leader, two other replicas.
    let deadline = Instant::now() + WAIT;
    loop {
        let ci = consumer_info(&js).await;
        let cc = ci.cluster.clone().expect("consumer info has cluster");
        if cc.replicas.len() == 2 && cc.leader.as_ref().is_some_and(|l| !l.is_empty()) {
            assert_eq!(cc.name.as_deref(), Some("C"), "{cc:?}");
            break;
        }
        assert!(Instant::now() < deadline, "consumer cluster block: {cc:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Publishers and workers on every node; a few hundred orders.
    let mut load = Load::start(&cluster, Duration::from_millis(5)).await;
    let deadline = Instant::now() + WAIT;
    while load.history.acks().len() < 300 {
        assert!(Instant::now() < deadline, "orders are not acknowledged");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // A retried publish (same Msg-Id) is acknowledged as a duplicate at the same seq and
    // not stored again.
    let first = load.history.acks()[0].clone();
    let again = publish_retry(&js, "orders.n1", &first.id, &load.history)
        .await
        .expect("PubAck");
    assert!(again.duplicate, "{again:?}");
    assert_eq!(again.sequence, first.seq);

    load.stop_publishing().await;
    let per_worker = load.drain(&js).await;
    eprintln!("confirmed per worker (n1, n2, n3): {per_worker:?}");
    assert!(
        per_worker.iter().filter(|&&n| n > 0).count() >= 2,
        "workers on different nodes share the orders: {per_worker:?}"
    );
    let twice = load.history.delivered_more_than_once();
    assert!(
        twice.is_empty(),
        "orders delivered more than once: {twice:?}"
    );
    finish(&cluster, &mut load, &js).await;
    let info = consumer_info(&js).await;
    assert_eq!(info.num_redelivered, 0, "{info:?}");
    assert_eq!(
        per_worker.iter().sum::<usize>() as u64,
        info.ack_floor.stream_sequence,
        "each order confirmed once"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn faults_on_three_nodes_lose_no_acknowledged_publish_or_ack() {
    let mut cluster = JsCluster::start(3);
    let n = cluster.nodes.len();
    let (_, js) = cluster.js(0).await;
    create_orders(&js, 3, Duration::from_secs(2)).await;
    let mut load = Load::start(&cluster, Duration::from_millis(10)).await;
    let history = Arc::clone(&load.history);
    let mut timings: Vec<(String, Duration)> = Vec::new();
    tokio::time::sleep(Duration::from_secs(1)).await;

    // kill -9 of the stream leader, of a follower, of the meta leader; each restarted.
    for what in ["stream leader", "stream follower", "meta leader"] {
        let leader = stream_leader(&js).await;
        let victim = match what {
            "stream leader" => cluster.index(&leader),
            "stream follower" => (cluster.index(&leader) + 1) % n,
            _ => cluster.index(&cluster.wait_for_meta_leader()),
        };
        let survivor = (victim + 1) % n;
        let fault = Instant::now();
        history.mark(&format!("kill -9 {what} {}", cluster.nodes[victim].name));
        cluster.kill9(victim);
        let took = writable_after(
            &cluster,
            survivor,
            fault,
            &format!("kill -9 {what}"),
            &history,
        )
        .await;
        timings.push((
            format!("kill -9 {what} ({})", cluster.nodes[victim].name),
            took,
        ));
        tokio::time::sleep(Duration::from_millis(500)).await;
        cluster.restart(victim, false);
        history.mark(&format!("restart {}", cluster.nodes[victim].name));
        check_publishes(&cluster, &js, &history, &format!("after kill -9 {what}")).await;
    }

    // A node cut off through the proxies (its clients stay connected to it), then healed.
    let victim = cluster.index(&stream_leader(&js).await);
    let others: Vec<usize> = (0..n).filter(|&j| j != victim).collect();
    let fault = Instant::now();
    history.mark(&format!("cut {}", cluster.nodes[victim].name));
    cluster.cut(victim);
    cluster.wait_for_peers(victim, &[]).await;
    for &j in &others {
        let peers: Vec<usize> = others.iter().copied().filter(|&k| k != j).collect();
        cluster.wait_for_peers(j, &peers).await;
    }
    let took = writable_after(&cluster, others[0], fault, "cut stream leader", &history).await;
    timings.push((
        format!("cut stream leader ({})", cluster.nodes[victim].name),
        took,
    ));
    tokio::time::sleep(Duration::from_secs(2)).await;
    cluster.heal(victim);
    history.mark(&format!("heal {}", cluster.nodes[victim].name));
    let all: Vec<usize> = (0..n).collect();
    for j in 0..n {
        let peers: Vec<usize> = all.iter().copied().filter(|&k| k != j).collect();
        cluster.wait_for_peers(j, &peers).await;
    }
    check_publishes(&cluster, &js, &history, "after the cut healed").await;

    // A node restarted with an empty store directory catches up.
    let victim = (cluster.index(&stream_leader(&js).await) + 2) % n;
    let fault = Instant::now();
    history.mark(&format!("kill -9 and wipe {}", cluster.nodes[victim].name));
    cluster.kill9(victim);
    let took = writable_after(
        &cluster,
        (victim + 1) % n,
        fault,
        "kill -9 and wipe",
        &history,
    )
    .await;
    timings.push((
        format!("kill -9 and wipe ({})", cluster.nodes[victim].name),
        took,
    ));
    cluster.restart(victim, true);
    history.mark(&format!("restart empty {}", cluster.nodes[victim].name));
    check_publishes(&cluster, &js, &history, "after the empty-store restart").await;

    finish(&cluster, &mut load, &js).await;
    for (what, took) in &timings {
        eprintln!("fault-to-writable summary: {what}: {} ms", took.as_millis());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn r5_on_five_nodes_stays_writable_after_losing_two() {
    let mut cluster = JsCluster::start(5);
    let n = cluster.nodes.len();
    let (_, js) = cluster.js(0).await;
    create_orders(&js, 5, Duration::from_secs(2)).await;
    let mut load = Load::start(&cluster, Duration::from_millis(20)).await;
    let history = Arc::clone(&load.history);
    tokio::time::sleep(Duration::from_secs(1)).await;
    // The stream leader and one follower, at once.
    let leader = cluster.index(&stream_leader(&js).await);
    let victims = [leader, (leader + 1) % n];
    let survivor = (leader + 2) % n;
    let fault = Instant::now();
    history.mark("kill -9 two of five");
    for &v in &victims {
        cluster.kill9(v);
    }
    writable_after(
        &cluster,
        survivor,
        fault,
        "R5 kill -9 leader and follower",
        &history,
    )
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    check_publishes(&cluster, &js, &history, "R5 with two nodes down").await;
    // Drained and checked on the three that are left.
    finish(&cluster, &mut load, &js).await;
    let info = retry("stream info", || async {
        js.get_stream(STREAM)
            .await
            .map_err(|e| e.to_string())?
            .info()
            .await
            .cloned()
            .map_err(|e| e.to_string())
    })
    .await;
    let c = info.cluster.expect("cluster");
    let down: Vec<String> = victims
        .iter()
        .map(|&v| cluster.nodes[v].name.clone())
        .collect();
    let mut seen: HashMap<String, bool> = HashMap::new();
    for r in &c.replicas {
        seen.insert(r.name.clone(), r.current);
    }
    assert_eq!(c.replicas.len(), 4, "{c:?}");
    for name in &down {
        assert_eq!(seen.get(name), Some(&false), "{name} is down: {c:?}");
    }
}

/// A replica away while the others compact their logs catches up from the leader's
/// snapshot, and the consumer state it gets is whole: it leads the drain afterwards. Then
/// every node is killed and restarted at once (each from its own snapshot and the log after
/// it) and the checks run again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_away_while_the_log_is_compacted_catches_up_from_a_snapshot() {
    let ours = !common::server_binary().contains("nats-server");
    let mut cluster = JsCluster::start(3);
    let n = cluster.nodes.len();
    let (client, js) = cluster.js(0).await;
    create_orders(&js, 3, Duration::from_secs(2)).await;
    let mut load = Load::start(&cluster, Duration::ZERO).await;
    let history = Arc::clone(&load.history);
    tokio::time::sleep(Duration::from_secs(1)).await;

    let leader = cluster.index(&stream_leader(&js).await);
    let victim = (leader + 1) % n;
    history.mark(&format!("kill -9 follower {}", cluster.nodes[victim].name));
    cluster.kill9(victim);
    // Enough entries (publishes, pulls, acks) for the two others to snapshot and compact:
    // a snapshot holding messages (the group's first, the empty stream as created, is
    // under a kilobyte; one of a few thousand orders is hundreds).
    // The snapshot's data is in `raft/snapshot/data-<index>-<term>-<len>-<crc>`.
    let holds_messages = |i: usize| {
        let dir = cluster.nodes[i]
            .store
            .join("jetstream/$G/streams/ORDERS/raft/snapshot");
        std::fs::read_dir(dir).is_ok_and(|entries| {
            entries.flatten().any(|e| {
                e.file_name().to_string_lossy().starts_with("data-")
                    && e.metadata().is_ok_and(|m| m.len() > 100_000)
            })
        })
    };
    let confirmed_before = history.confirmed_count();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let compacted = (0..n).filter(|&i| i != victim).all(holds_messages);
        let enough = history.confirmed_count() >= confirmed_before + 3000;
        if if ours { compacted } else { enough } {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no snapshot after {} acks",
            history.confirmed_count() - confirmed_before
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    history.mark(&format!("restart {}", cluster.nodes[victim].name));
    cluster.restart(victim, false);
    check_publishes(&cluster, &js, &history, "after catching up").await;
    if ours {
        let log = cluster.nodes[victim].dir.join("server-2.log");
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        assert!(
            text.contains("stream restored from the leader's snapshot"),
            "{} caught up without the snapshot",
            cluster.nodes[victim].name
        );
        // It came in parts (see `JsCluster::launch`).
        let sent_in_parts = (0..n).filter(|&i| i != victim).any(|i| {
            let log = cluster.nodes[i].dir.join("server-1.log");
            std::fs::read_to_string(log)
                .unwrap_or_default()
                .contains("sending a raft snapshot's data file")
        });
        assert!(sent_in_parts, "the snapshot's data file was not sent");
    }

    // The replica that caught up leads: the drain and the final checks go through it.
    let name = cluster.nodes[victim].name.clone();
    retry("step down to the caught-up replica", || async {
        if stream_leader(&js).await == name {
            return Ok(());
        }
        let body = format!(r#"{{"placement":{{"preferred":"{name}"}}}}"#);
        let _ = client
            .request("$JS.API.STREAM.LEADER.STEPDOWN.ORDERS", body.into())
            .await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        if stream_leader(&js).await == name {
            Ok(())
        } else {
            Err("not yet")
        }
    })
    .await;
    history.mark(&format!("{name} leads"));

    // Everyone down at once, everyone back: each from its own snapshot and log.
    load.stop_publishing().await;
    history.mark("kill -9 every node");
    for i in 0..n {
        cluster.kill9(i);
    }
    for i in 0..n {
        cluster.restart(i, false);
    }
    cluster.wait_for_meta_leader();
    history.mark("every node restarted");
    check_publishes(&cluster, &js, &history, "after restarting every node").await;
    finish(&cluster, &mut load, &js).await;
}

/// A replicated stream's config update is an entry of the stream's log, so a replica that
/// replays its log applies each publish under the config in force when the others applied
/// it. A stream created with `discard: new` and room for 10 takes 10 orders and refuses 5;
/// it is raised to 100 and takes 5 more (seqs 11 to 15). Every node is killed and restarted
/// (each replays its log from the start): the stream still holds 15 orders, seq 11 the first
/// one after the update. (Before, each replica took the update when its meta group applied
/// it, and a restarted one replayed every publish under the newest config: the 5 refused
/// orders came back, at seqs 11 to 15.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_update_takes_effect_at_one_place_in_the_stream_log() {
    let mut cluster = JsCluster::start(3);
    let (_, js) = cluster.js(0).await;
    let config = |max_messages: i64| stream::Config {
        name: STREAM.into(),
        subjects: vec!["orders.>".into()],
        num_replicas: 3,
        max_messages,
        discard: stream::DiscardPolicy::New,
        ..Default::default()
    };
    retry("create stream", || js.create_stream(config(10))).await;
    // Published until acknowledged or refused for the stream's limit (an election's 503 is
    // retried); the stream sequence, or the refusal.
    let publish = |payload: String| {
        let js = js.clone();
        async move {
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                let answer = match js.publish("orders.new", payload.clone().into()).await {
                    Ok(ack) => ack.await.map_err(|e| e.to_string()),
                    Err(e) => Err(e.to_string()),
                };
                match answer {
                    Ok(ack) => return Ok(ack.sequence),
                    Err(e) if e.contains("maximum messages") => return Err(e),
                    Err(e) => {
                        assert!(Instant::now() < deadline, "publish {payload}: {e}");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
            }
        }
    };
    for i in 1..=10 {
        assert_eq!(publish(format!("before-{i}")).await, Ok(i));
    }
    for i in 1..=5 {
        let refused = publish(format!("refused-{i}")).await;
        assert!(refused.is_err(), "refused-{i} stored: {refused:?}");
    }
    let updated = retry("update stream", || js.update_stream(config(100))).await;
    assert_eq!(updated.config.max_messages, 100, "the update's answer");
    for i in 1..=5 {
        let got = publish(format!("after-{i}")).await;
        if got != Ok(10 + i) {
            let stream = checker::read_stream(&js, STREAM, Duration::from_secs(60)).await;
            panic!("after-{i}: {got:?}; the stream: {stream:?}");
        }
    }

    for i in 0..3 {
        cluster.kill9(i);
    }
    for i in 0..3 {
        cluster.restart(i, false);
    }
    cluster.wait_for_meta_leader();
    let (_, js) = cluster.js(1).await;
    let stream = checker::read_stream(&js, STREAM, Duration::from_secs(60)).await;
    let want: BTreeMap<u64, String> = (1..=10)
        .map(|i| (i, format!("before-{i}")))
        .chain((1..=5).map(|i| (10 + i, format!("after-{i}"))))
        .collect();
    assert_eq!(stream, want, "after every node restarted");
    let info = stream_info(&js).await;
    assert_eq!(info.config.max_messages, 100);
    assert_eq!(info.state.messages, 15);
}

/// `ORDERS` (subjects `orders.>`) with `replicas` replicas, otherwise the defaults: what the
/// replica-change tests update the stream to.
fn orders_config(replicas: usize) -> stream::Config {
    stream::Config {
        name: STREAM.into(),
        subjects: vec!["orders.>".into()],
        num_replicas: replicas,
        ..Default::default()
    }
}

/// The stream's info, retried.
async fn stream_info(js: &jetstream::Context) -> jetstream::stream::Info {
    retry("stream info", || async {
        js.get_stream(STREAM)
            .await
            .map_err(|e| e.to_string())?
            .info()
            .await
            .cloned()
            .map_err(|e| e.to_string())
    })
    .await
}

/// Waits until the stream's leader and `others` replicas, all current, are its group, and
/// returns their names (leader first).
async fn wait_for_replicas(js: &jetstream::Context, others: usize, what: &str) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let info = stream_info(js).await;
        if let Some(c) = &info.cluster {
            if let Some(leader) = c.leader.clone().filter(|l| !l.is_empty()) {
                if c.replicas.len() == others && c.replicas.iter().all(|r| r.current) {
                    let mut names = vec![leader];
                    names.extend(c.replicas.iter().map(|r| r.name.clone()));
                    return names;
                }
            }
        }
        assert!(
            Instant::now() < deadline,
            "{what}: replicas not there: {:?}",
            info.cluster
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Changing a live stream's replicas under load: R3 to R5 (two servers join and catch up),
/// back to R3 (two leave), and a peer removed (another server takes its place); nothing
/// acknowledged is lost and the consumer drains as on one node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_stream_changes_its_replicas_and_loses_a_peer() {
    let ours = !common::server_binary().contains("nats-server");
    let mut cluster = JsCluster::start(5);
    let (client, js) = cluster.js(0).await;
    create_orders(&js, 3, Duration::from_secs(2)).await;
    let mut load = Load::start(&cluster, Duration::from_millis(10)).await;
    let history = Arc::clone(&load.history);
    tokio::time::sleep(Duration::from_secs(1)).await;

    history.mark("R3 to R5");
    retry("update to R5", || js.update_stream(orders_config(5))).await;
    let five = wait_for_replicas(&js, 4, "R5").await;
    check_publishes(&cluster, &js, &history, "after R3 to R5").await;

    history.mark("R5 to R3");
    retry("update to R3", || js.update_stream(orders_config(3))).await;
    let three = wait_for_replicas(&js, 2, "back to R3").await;
    cluster.holders = Some(three.clone());
    let gone: Vec<&String> = five.iter().filter(|n| !three.contains(n)).collect();
    assert_eq!(gone.len(), 2, "{five:?} -> {three:?}");
    if ours {
        for name in &gone {
            let i = cluster.index(name);
            let dir = cluster.nodes[i].store.join("jetstream/$G/streams/ORDERS");
            let deadline = Instant::now() + WAIT;
            while dir.exists() {
                assert!(Instant::now() < deadline, "{name} keeps {}", dir.display());
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    check_publishes(&cluster, &js, &history, "after R5 to R3").await;

    // A follower removed: a server that did not hold the stream takes its place.
    let removed = three[1].clone();
    history.mark(&format!("peer remove {removed}"));
    let answer = retry("peer remove", || async {
        let body = format!(r#"{{"peer":"{removed}"}}"#);
        let msg = client
            .request("$JS.API.STREAM.PEER.REMOVE.ORDERS", body.into())
            .await
            .map_err(|e| e.to_string())?;
        let v: Value = serde_json::from_slice(&msg.payload).map_err(|e| e.to_string())?;
        if v["success"] == true {
            Ok(v)
        } else {
            Err(format!("{v}"))
        }
    })
    .await;
    assert_eq!(
        answer["type"], "io.nats.jetstream.api.v1.stream_remove_peer_response",
        "{answer}"
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    let after = loop {
        let names = wait_for_replicas(&js, 2, "after the peer removal").await;
        if !names.contains(&removed) {
            break names;
        }
        assert!(Instant::now() < deadline, "{removed} still in {names:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    cluster.holders = Some(after.clone());
    assert!(
        after.iter().any(|n| !three.contains(n)),
        "a new server took {removed}'s place: {three:?} -> {after:?}"
    );
    // A peer that is not one: 10040.
    let msg = client
        .request(
            "$JS.API.STREAM.PEER.REMOVE.ORDERS",
            format!(r#"{{"peer":"{removed}"}}"#).into(),
        )
        .await
        .expect("answer");
    let v: Value = serde_json::from_slice(&msg.payload).expect("json");
    assert_eq!(v["error"]["err_code"], 10040, "{v}");
    check_publishes(&cluster, &js, &history, "after the peer removal").await;
    finish(&cluster, &mut load, &js).await;
}

/// A stream of one replica, in use, becomes R3: its server's state (messages, consumer
/// state) seeds the group, the two others join; then its first server is killed and
/// nothing acknowledged is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_of_one_replica_becomes_replicated_under_load() {
    let mut cluster = JsCluster::start(3);
    let (_, js) = cluster.js(0).await;
    create_orders(&js, 1, Duration::from_secs(2)).await;
    let first = stream_leader(&js).await;
    cluster.holders = Some(vec![first.clone()]);
    let mut load = Load::start(&cluster, Duration::from_millis(10)).await;
    let history = Arc::clone(&load.history);
    tokio::time::sleep(Duration::from_secs(2)).await;

    history.mark("R1 to R3");
    retry("update to R3", || js.update_stream(orders_config(3))).await;
    wait_for_replicas(&js, 2, "R3").await;
    cluster.holders = None;
    check_publishes(&cluster, &js, &history, "after R1 to R3").await;

    // The server that held it alone goes: the two others have everything.
    let victim = cluster.index(&first);
    let fault = Instant::now();
    history.mark(&format!("kill -9 {first}"));
    cluster.kill9(victim);
    writable_after(
        &cluster,
        (victim + 1) % 3,
        fault,
        "kill -9 the first server",
        &history,
    )
    .await;
    check_publishes(&cluster, &js, &history, "without the first server").await;
    // Ours replicates the consumer with its stream: its info is there without the first
    // server. (nats-server 2.15.1 keeps the consumer on the first server: it drains once
    // that server is back.)
    if !common::server_binary().contains("nats-server") {
        let info = consumer_info(&js).await;
        assert!(info.ack_floor.stream_sequence > 0, "{info:?}");
    }
    cluster.restart(victim, false);
    history.mark(&format!("restart {first}"));
    finish(&cluster, &mut load, &js).await;
}

/// A replicated stream goes back to one replica under load (the stream's leader stays; the
/// two others are removed from its group, then leave and drop their files), survives a
/// `kill -9` of that server (its state, consumer acks included, is in its Raft log, now of
/// one member), and goes back to three.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replicated_stream_goes_back_to_one_replica_and_to_three_again() {
    let ours = !common::server_binary().contains("nats-server");
    let mut cluster = JsCluster::start(3);
    let (_, js) = cluster.js(0).await;
    create_orders(&js, 3, Duration::from_secs(2)).await;
    let mut load = Load::start(&cluster, Duration::from_millis(10)).await;
    let history = Arc::clone(&load.history);
    tokio::time::sleep(Duration::from_secs(1)).await;

    let leader = stream_leader(&js).await;
    history.mark("R3 to R1");
    retry("update to R1", || js.update_stream(orders_config(1))).await;
    let one = wait_for_replicas(&js, 0, "R1").await;
    cluster.holders = Some(one.clone());
    if ours {
        assert_eq!(
            one,
            std::slice::from_ref(&leader),
            "the leader is the server kept"
        );
        for i in (0..3).filter(|&i| cluster.nodes[i].name != one[0]) {
            let dir = cluster.nodes[i].store.join("jetstream/$G/streams/ORDERS");
            let deadline = Instant::now() + WAIT;
            while dir.exists() {
                assert!(
                    Instant::now() < deadline,
                    "{} keeps {}",
                    cluster.nodes[i].name,
                    dir.display()
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    check_publishes(&cluster, &js, &history, "after R3 to R1").await;

    // The two dropped servers restart (replaying the meta log, which once gave them the
    // stream): they do not bring back a group of their own beside the kept server's.
    let dropped: Vec<usize> = (0..3)
        .filter(|&i| cluster.nodes[i].name != one[0])
        .collect();
    history.mark("kill -9 the two dropped servers");
    for &i in &dropped {
        cluster.kill9(i);
    }
    for &i in &dropped {
        cluster.restart(i, false);
    }
    cluster.wait_for_meta_leader();
    history.mark("the two dropped servers restarted");
    tokio::time::sleep(Duration::from_secs(2)).await;
    check_publishes(
        &cluster,
        &js,
        &history,
        "after the dropped servers restarted",
    )
    .await;
    assert_eq!(
        stream_leader(&js).await,
        one[0],
        "the kept server still leads"
    );

    // Ours keeps the stream's state in the kept server's Raft log, acks included.
    // (nats-server 2.15.1 redelivered orders whose acks it had confirmed before the kill -9
    // of its only server, 3 and 20 in two runs: that step is ours only.)
    if ours {
        let kept = cluster.index(&one[0]);
        history.mark(&format!("kill -9 {}, the only server", one[0]));
        cluster.kill9(kept);
        cluster.restart(kept, false);
        history.mark(&format!("restart {}", one[0]));
        check_publishes(&cluster, &js, &history, "after restarting the only server").await;
    }

    history.mark("R1 to R3");
    retry("update to R3", || js.update_stream(orders_config(3))).await;
    wait_for_replicas(&js, 2, "back to R3").await;
    cluster.holders = None;
    check_publishes(&cluster, &js, &history, "after R1 to R3").await;
    finish(&cluster, &mut load, &js).await;
}

/// R3 to R1 with a follower down: the kept server's group removes the member that is down
/// first (it does not wait for it; the live one still acks its own removal), the shrink
/// completes, the follower comes back, and the stream takes publishes, nothing lost. (A
/// member dropped while down that the group still needs opens its replica again when it
/// comes back and takes part until removed: `Api::on_assigned`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_dropped_while_down_takes_part_until_removed() {
    let mut cluster = JsCluster::start(3);
    let (_, js0) = cluster.js(0).await;
    create_orders(&js0, 3, Duration::from_secs(2)).await;
    let leader = cluster.index(&stream_leader(&js0).await);
    let (_, js) = cluster.js(leader).await;
    let publish = |id: String| {
        let js = js.clone();
        async move {
            retry("publish", || async {
                let ack = js
                    .publish("orders.new", id.clone().into())
                    .await
                    .map_err(|e| e.to_string())?;
                ack.await.map(|a| a.sequence).map_err(|e| e.to_string())
            })
            .await
        }
    };
    for i in 1..=10u64 {
        assert_eq!(publish(format!("before-{i}")).await, i);
    }
    let down = (leader + 1) % 3;
    cluster.kill9(down);
    retry("update to R1", || js.update_stream(orders_config(1))).await;
    cluster.restart(down, false);
    wait_for_replicas(&js, 0, "R1").await;
    for i in 1..=10u64 {
        assert_eq!(publish(format!("after-{i}")).await, 10 + i);
    }
    let stream = checker::read_stream(&js, STREAM, Duration::from_secs(60)).await;
    assert_eq!(stream.len(), 20, "{stream:?}");
}

/// A worker that pulled and went away (its connection closed, on another node than the
/// stream's leader) is not handed the next order: the next worker gets it at once rather
/// than after the ack wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pull_from_a_worker_that_went_gets_nothing_and_the_next_worker_does() {
    let cluster = JsCluster::start(3);
    let (_, js) = cluster.js(0).await;
    create_orders(&js, 3, Duration::from_secs(30)).await;
    let leader = cluster.index(&stream_leader(&js).await);
    let other = (leader + 1) % 3;

    // A pull on a node that does not lead, then the worker's connection goes.
    let gone = cluster.client(other).await;
    let inbox = gone.new_inbox();
    let _sub = gone.subscribe(inbox.clone()).await.expect("subscribe");
    gone.flush().await.expect("flush");
    gone.publish_with_reply(
        format!("$JS.API.CONSUMER.MSG.NEXT.{STREAM}.{CONSUMER}"),
        inbox,
        r#"{"batch":1,"expires":60000000000}"#.into(),
    )
    .await
    .expect("pull");
    gone.flush().await.expect("flush");
    let deadline = Instant::now() + WAIT;
    while consumer_info(&js).await.num_waiting == 0 {
        assert!(Instant::now() < deadline, "the pull never waited");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(_sub);
    drop(gone);
    tokio::time::sleep(Duration::from_secs(1)).await;

    // The next worker, on the third node, gets the next order.
    let (_, js2) = cluster.js((leader + 2) % 3).await;
    let consumer: jetstream::consumer::PullConsumer = retry("consumer", || async {
        js2.get_stream(STREAM)
            .await
            .map_err(|e| e.to_string())?
            .get_consumer(CONSUMER)
            .await
            .map_err(|e| e.to_string())
    })
    .await;
    let mut batch = consumer
        .fetch()
        .max_messages(1)
        .expires(Duration::from_secs(5))
        .messages()
        .await
        .expect("fetch");
    tokio::time::sleep(Duration::from_millis(200)).await;
    js.publish("orders.1", "order-1".into())
        .await
        .expect("publish")
        .await
        .expect("PubAck");
    let got = tokio::time::timeout(Duration::from_secs(10), batch.next())
        .await
        .expect("the fetch ends")
        .expect("a message")
        .expect("not an error");
    assert_eq!(&got.payload[..], b"order-1");
    let info = got.info().expect("jetstream message");
    assert_eq!(info.delivered, 1, "delivered once, to this worker");
}

/// The stream's leader, from its info.
async fn stream_leader(js: &jetstream::Context) -> String {
    retry("stream leader", || async {
        let info = js
            .get_stream(STREAM)
            .await
            .map_err(|e| e.to_string())?
            .info()
            .await
            .map_err(|e| e.to_string())?
            .clone();
        info.cluster
            .and_then(|c| c.leader)
            .filter(|l| !l.is_empty())
            .ok_or_else(|| "no leader".to_string())
    })
    .await
}

/// The checker itself, on made-up histories: each kind of violation is reported, and a
/// clean history passes (no servers needed; runs against either binary).
#[test]
fn the_checker_reports_each_kind_of_violation() {
    let ok = History::new();
    for (i, id) in ["a", "b", "c"].iter().enumerate() {
        ok.attempt(id);
        ok.pub_ack(id, i as u64 + 1, false);
    }
    ok.pub_ack("a", 1, true); // a retry, deduplicated
    let stream: std::collections::BTreeMap<u64, String> = [(1, "a"), (2, "b"), (3, "c")]
        .into_iter()
        .map(|(s, i)| (s, i.to_string()))
        .collect();
    assert!(ok.check_publishes(&ok.acks(), &stream).is_empty());

    // Lost (b missing, c overwritten), a seq handed out twice, an id stored twice.
    let bad = History::new();
    for id in ["a", "b", "c", "d", "e"] {
        bad.attempt(id);
    }
    bad.pub_ack("a", 1, false);
    bad.pub_ack("b", 2, false);
    bad.pub_ack("c", 3, false);
    bad.pub_ack("d", 3, false);
    bad.pub_ack("e", 4, false);
    bad.pub_ack("e", 5, true);
    let stream: std::collections::BTreeMap<u64, String> =
        [(1, "a"), (3, "d"), (4, "e"), (5, "e"), (6, "zz")]
            .into_iter()
            .map(|(s, i)| (s, i.to_string()))
            .collect();
    let problems = bad.check_publishes(&bad.acks(), &stream).join("\n");
    for want in [
        "acknowledged b at seq 2 (before any fault) is lost: no message at seq 2 (the stream \
         ends at 6), not in the stream",
        "acknowledged c at seq 3 (before any fault) is lost: seq 3 holds d, not in the stream",
        "seq 3 handed out twice: to c and to d",
        "e acknowledged at seq 4 and again at seq 5",
        "e stored twice, at seq 4 and 5",
        "seq 6 holds \"zz\", which nobody published",
    ] {
        assert!(problems.contains(want), "{want:?} not in:\n{problems}");
    }

    // A confirmed ack redelivered to a later pull; a message never delivered; an ack
    // confirmed for another seq.
    let acks = History::new();
    let before = Instant::now();
    acks.delivered("a", 1, 1, 0, before);
    acks.confirmed("a", 1);
    std::thread::sleep(Duration::from_millis(2));
    acks.delivered("a", 1, 2, 1, Instant::now());
    acks.delivered("c", 3, 1, 0, before);
    acks.confirmed("c", 4);
    let stream: std::collections::BTreeMap<u64, String> = [(1, "a"), (2, "b"), (3, "c")]
        .into_iter()
        .map(|(s, i)| (s, i.to_string()))
        .collect();
    let redelivered = acks.check_no_redelivery_after_confirm();
    assert_eq!(redelivered.len(), 1, "{redelivered:?}");
    assert_eq!(
        acks.check_all_delivered(&stream),
        [
            "b (seq 2) never delivered",
            "c is at seq 3 but its confirmed ack named seq 4"
        ]
    );
    assert_eq!(acks.delivered_more_than_once(), ["a delivered 2 times"]);

    // Consumer info that does not add up.
    let info: jetstream::consumer::Info = serde_json::from_value(serde_json::json!({
        "stream_name": STREAM, "name": CONSUMER, "created": "2026-01-01T00:00:00Z",
        "config": {"durable_name": CONSUMER, "ack_policy": "explicit", "deliver_policy": "all", "replay_policy": "instant"},
        "delivered": {"consumer_seq": 10, "stream_seq": 10},
        "ack_floor": {"consumer_seq": 8, "stream_seq": 8},
        "num_ack_pending": 2, "num_redelivered": 0, "num_waiting": 0, "num_pending": 1
    }))
    .expect("consumer info");
    assert_eq!(checker::check_consumer_info(&info, 11).len(), 4);
    assert_eq!(
        checker::check_consumer_info(&info, 10),
        [
            "num_ack_pending 2 after the drain",
            "num_pending 1 after the drain",
            "ack floor at stream seq 8, the stream ends at 10"
        ]
    );
}

/// A push consumer of a replicated stream delivers to a subscriber on any node, keeps
/// delivering after its stream's leader steps down, and follows its deliver subject's
/// interest across the cluster: with the subscriber gone it holds what comes, and a
/// subscriber on another node gets it (the new leader appends the interest it sees as it
/// takes over, `Op::DeliveryInterest`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_consumer_delivers_across_nodes_and_leaders() {
    const DELIVER: &str = "deliver.pusher";
    let cluster = JsCluster::start(3);
    let (client, js) = cluster.js(0).await;
    retry("create stream", || {
        js.get_or_create_stream(orders_config(3))
    })
    .await;
    let leader = cluster.index(&stream_leader(&js).await);
    let other = (leader + 1) % 3;

    // The subscriber on a node that does not lead, before the consumer.
    let sub_client = cluster.client(other).await;
    let mut sub = sub_client.subscribe(DELIVER).await.expect("subscribe");
    sub_client.flush().await.expect("flush");
    retry("create push consumer", || async {
        js.get_stream(STREAM)
            .await
            .map_err(|e| e.to_string())?
            .get_or_create_consumer(
                "pusher",
                jetstream::consumer::push::Config {
                    durable_name: Some("pusher".into()),
                    deliver_subject: DELIVER.into(),
                    ack_policy: jetstream::consumer::AckPolicy::Explicit,
                    ack_wait: Duration::from_secs(30),
                    ..Default::default()
                },
            )
            .await
            .map_err(|e| e.to_string())
    })
    .await;

    let history = History::default();
    let mut got: Vec<String> = Vec::new();
    // Receives `n` orders on `sub`, acking each; their payloads in arrival order.
    async fn receive(
        sub: &mut async_nats::Subscriber,
        client: &async_nats::Client,
        n: usize,
        what: &str,
    ) -> Vec<String> {
        let mut out = Vec::new();
        while out.len() < n {
            let msg = tokio::time::timeout(WAIT, sub.next())
                .await
                .unwrap_or_else(|_| panic!("{what}: {} of {n} orders came", out.len()))
                .expect("subscription open");
            if let Some(reply) = msg.reply.clone() {
                client.publish(reply, "".into()).await.expect("ack");
            }
            out.push(String::from_utf8_lossy(&msg.payload).into_owned());
        }
        client.flush().await.expect("flush");
        out
    }

    for i in 0..20 {
        publish_retry(&js, "orders.new", &format!("a{i}"), &history)
            .await
            .expect("PubAck");
    }
    got.extend(receive(&mut sub, &sub_client, 20, "before the step-down").await);

    // The stream's leader steps down; delivery goes on from the new one.
    let old = cluster.nodes[leader].name.clone();
    retry("stream leader step-down", || async {
        let _ = client
            .request("$JS.API.STREAM.LEADER.STEPDOWN.ORDERS", "".into())
            .await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        if stream_leader(&js).await != old {
            Ok(())
        } else {
            Err("same leader")
        }
    })
    .await;
    for i in 0..20 {
        publish_retry(&js, "orders.new", &format!("b{i}"), &history)
            .await
            .expect("PubAck");
    }
    got.extend(receive(&mut sub, &sub_client, 20, "after the step-down").await);

    // The subscriber goes; orders published meanwhile wait, then go to a subscriber on
    // the third node.
    drop(sub);
    sub_client.flush().await.expect("flush");
    tokio::time::sleep(Duration::from_secs(1)).await;
    for i in 0..10 {
        publish_retry(&js, "orders.new", &format!("c{i}"), &history)
            .await
            .expect("PubAck");
    }
    let third = cluster.client((other + 1) % 3).await;
    let mut sub = third.subscribe(DELIVER).await.expect("subscribe");
    third.flush().await.expect("flush");
    got.extend(receive(&mut sub, &third, 10, "on the third node").await);

    let want: Vec<String> = (0..20)
        .map(|i| format!("a{i}"))
        .chain((0..20).map(|i| format!("b{i}")))
        .chain((0..10).map(|i| format!("c{i}")))
        .collect();
    let distinct: HashSet<&String> = got.iter().collect();
    assert_eq!(distinct.len(), got.len(), "an order came twice: {got:?}");
    assert_eq!(got, want, "every order once, in order");
}

/// Right after a stream leader steps down, a stream info that reaches the old leader is
/// answered at once from its own state (before, it was dropped and nats-py waited out its
/// timeout after every step-down). Publishes in the same gap are not answered by a replica
/// that does not lead (the new leader may be storing the same message: a 503 would make
/// its client publish it twice), and a pull appended just before the leadership moved can
/// be lost with it, on nats-server as here: neither is asserted. nats-server 2.15.1 also
/// leaves a stream info in the gap unanswered now and then: against it, that is printed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_info_in_a_leader_change_is_answered() {
    use async_nats::RequestErrorKind;
    let ours = !common::server_binary().contains("nats-server");
    let cluster = JsCluster::start(3);
    let (client, js) = cluster.js(0).await;
    create_orders(&js, 3, Duration::from_secs(30)).await;
    let history = History::default();
    for i in 0..30 {
        publish_retry(&js, "orders.new", &format!("o{i}"), &history)
            .await
            .expect("PubAck");
    }
    // Each request on its own connection, to the node that led at the step-down.
    let answered =
        |what: &'static str, r: Result<async_nats::Message, async_nats::RequestError>| match r {
            Ok(_) => {}
            Err(e) if e.kind() == RequestErrorKind::NoResponders => {}
            Err(e) => panic!("{what}: {e} (no answer)"),
        };
    for round in 0..4 {
        let leader = cluster.index(&stream_leader(&js).await);
        let at_leader = cluster.client(leader).await;
        let resp = client
            .request("$JS.API.STREAM.LEADER.STEPDOWN.ORDERS", "".into())
            .await
            .expect("step-down answered");
        let body: Value = serde_json::from_slice(&resp.payload).expect("JSON");
        if body["success"] != true {
            // A step-down refused (no replica current yet): not this test's concern.
            eprintln!("round {round}: step-down refused: {body}");
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        }
        let timeout = Duration::from_secs(3);
        let info = tokio::time::timeout(
            timeout,
            at_leader.request(format!("$JS.API.STREAM.INFO.{STREAM}"), "".into()),
        );
        let info = info.await;
        match info {
            Ok(info) => answered("stream info", info),
            Err(_) if !ours => eprintln!("round {round}: stream info: no answer in 3 s"),
            Err(_) => panic!("stream info: no answer in 3 s"),
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// Consumer `num_replicas` on replicated streams, through async-nats as the `nats` CLI's
/// `--replicas` and clients that copy the stream's count send it: on an R3 stream 0, 1 and
/// 3 are taken (with `mem_storage` too) and echoed as sent, 5 is 10126; on an R3 interest
/// stream 1 is 10134; an R3 consumer of a stream scaled to R1 reports 1 after (nats-server's
/// rewrite). Before, jsserver refused every count above 1 with 10074 ("not supported in
/// non-clustered mode") in a cluster too.
///
/// The consumer's `cluster` block differs: nats-server gives an R1 consumer a group of its
/// own (`{name, leader}`), jsserver replicates every consumer with its stream and reports
/// the stream's group (`cluster.md`, *The consumer leader*).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_replicas_as_nats_server_takes_them() {
    use async_nats::jetstream::consumer::Info;
    use async_nats::jetstream::ErrorCode;
    let ours = !common::server_binary().contains("nats-server");
    let cluster = JsCluster::start(3);
    let (_client, js) = cluster.js(0).await;
    create_orders(&js, 3, Duration::from_secs(30)).await;
    wait_for_replicas(&js, 2, "R3 stream").await;
    let orders = js.get_stream(STREAM).await.expect("stream");
    let config = |name: &str, replicas: usize, memory: bool| pull::Config {
        durable_name: Some(name.into()),
        ack_policy: jetstream::consumer::AckPolicy::Explicit,
        num_replicas: replicas,
        memory_storage: memory,
        ..Default::default()
    };
    let names: Vec<String> = cluster.names();
    let check = |info: &Info, replicas: usize, memory: bool| {
        assert_eq!(info.config.num_replicas, replicas, "{}", info.name);
        assert_eq!(info.config.memory_storage, memory, "{}", info.name);
        let c = info.cluster.as_ref().expect("a cluster block");
        assert_eq!(c.name.as_deref(), Some("C"), "{}", info.name);
        let leader = c.leader.clone().unwrap_or_default();
        assert!(names.contains(&leader), "{}: leader {leader:?}", info.name);
        // R1 on nats-server: a group of one; here the stream's three.
        let others = if replicas == 1 && !ours { 0 } else { 2 };
        assert_eq!(c.replicas.len(), others, "{}: {c:?}", info.name);
    };
    for (name, replicas, memory) in [
        ("r0", 0, false),
        ("r1", 1, false),
        ("r3", 3, false),
        ("m1", 1, true),
        ("m3", 3, true),
    ] {
        let mut consumer = orders
            .create_consumer(config(name, replicas, memory))
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let created = consumer.cached_info().clone();
        check(&created, replicas, memory);
        check(
            consumer.info().await.expect("consumer info"),
            replicas,
            memory,
        );
    }
    let code = |e: jetstream::stream::ConsumerError| match e.kind() {
        jetstream::stream::ConsumerErrorKind::JetStream(e) => e.error_code(),
        other => panic!("not an API error: {other:?}"),
    };
    let err = orders
        .create_consumer(config("r5", 5, false))
        .await
        .expect_err("R5 on an R3 stream");
    assert_eq!(code(err), ErrorCode::CONSUMER_REPLICAS_EXCEEDS_STREAM);
    // A consumer changes its count up to the stream's.
    let up = orders
        .update_consumer(config("r1", 3, false))
        .await
        .expect("R1 to R3");
    assert_eq!(up.cached_info().config.num_replicas, 3);

    // Interest and workqueue streams: the stream's count or 0 only.
    let events = retry("create EVENTS", || {
        js.get_or_create_stream(stream::Config {
            name: "EVENTS".into(),
            subjects: vec!["events.>".into()],
            retention: stream::RetentionPolicy::Interest,
            num_replicas: 3,
            ..Default::default()
        })
    })
    .await;
    let err = events
        .create_consumer(config("e1", 1, false))
        .await
        .expect_err("R1 on an R3 interest stream");
    assert_eq!(code(err), ErrorCode::CONSUMER_REPLICAS_SHOULD_MATCH_STREAM);
    let e3 = events
        .create_consumer(config("e3", 3, false))
        .await
        .expect("R3 on an R3 interest stream");
    assert_eq!(e3.cached_info().config.num_replicas, 3);

    // The stream goes to one replica: the consumers' own counts follow.
    retry("update to R1", || js.update_stream(orders_config(1))).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let mut counts = Vec::new();
        for name in ["r0", "r1", "r3", "m3"] {
            let info = retry("consumer info", || async {
                js.get_stream(STREAM)
                    .await
                    .map_err(|e| e.to_string())?
                    .consumer_info(name)
                    .await
                    .map_err(|e| e.to_string())
            })
            .await;
            counts.push(info.config.num_replicas);
        }
        if counts == [0, 1, 1, 1] {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "consumer replicas after R1: {counts:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Route messages a second at node `i` (what it sent and received on all its routes, from
/// `/routez` `in_msgs` + `out_msgs`) over `span`.
async fn route_msgs_per_sec(cluster: &JsCluster, i: usize, span: Duration) -> f64 {
    let count = || -> u64 {
        let routez = cluster.monitor(i, "/routez").expect("routez");
        routez["routes"]
            .as_array()
            .expect("routes")
            .iter()
            .map(|r| r["in_msgs"].as_u64().unwrap_or(0) + r["out_msgs"].as_u64().unwrap_or(0))
            .sum()
    };
    let (before, start) = (count(), Instant::now());
    tokio::time::sleep(span).await;
    let after = count();
    (after - before) as f64 / start.elapsed().as_secs_f64()
}

/// An idle cluster is idle: with an R3 stream, a durable pull consumer that has acked a
/// message (a plain ack), and one pull request waiting (a minute's expiry) with nothing to deliver, the
/// routes carry Raft heartbeats only. It once carried thousands of messages a second: the
/// leader appended a `Tick` entry every turn of the stream's thread, as the consumer's
/// state stayed marked as unwritten (a replicated consumer writes no file) and its write
/// deadline stayed due. Two groups' heartbeats (meta and stream, every 100 ms to two
/// followers, each answered) come to about 80 a second at a node leading both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_pull_consumer_on_an_r3_stream_keeps_the_routes_quiet() {
    const BOUND: f64 = 150.0;
    let cluster = JsCluster::start(3);
    let (client, js) = cluster.js(0).await;
    create_orders(&js, 3, Duration::from_secs(30)).await;

    // One message through the consumer and acked, so its state has changed since creation.
    retry("publish", || async {
        js.publish("orders.1", "order-1".into())
            .await
            .map_err(|e| e.to_string())?
            .await
            .map_err(|e| e.to_string())
    })
    .await;
    let consumer: jetstream::consumer::PullConsumer = retry("consumer", || async {
        js.get_stream(STREAM)
            .await
            .map_err(|e| e.to_string())?
            .get_consumer(CONSUMER)
            .await
            .map_err(|e| e.to_string())
    })
    .await;
    let mut batch = consumer
        .fetch()
        .max_messages(1)
        .expires(Duration::from_secs(10))
        .messages()
        .await
        .expect("fetch");
    let msg = batch
        .next()
        .await
        .expect("a message")
        .expect("not an error");
    // A plain ack (no confirmation asked: that path wrote the state at once).
    msg.ack().await.expect("ack");
    let deadline = Instant::now() + WAIT;
    while consumer_info(&js).await.ack_floor.stream_sequence == 0 {
        assert!(Instant::now() < deadline, "the ack never counted");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // A pull that waits, with nothing to deliver.
    let inbox = client.new_inbox();
    let _sub = client.subscribe(inbox.clone()).await.expect("subscribe");
    client
        .publish_with_reply(
            format!("$JS.API.CONSUMER.MSG.NEXT.{STREAM}.{CONSUMER}"),
            inbox,
            r#"{"batch":1,"expires":60000000000}"#.into(),
        )
        .await
        .expect("pull");
    client.flush().await.expect("flush");
    let deadline = Instant::now() + WAIT;
    while consumer_info(&js).await.num_waiting == 0 {
        assert!(Instant::now() < deadline, "the pull never waited");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Settled, then measured at every node.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut rates = Vec::new();
    for i in 0..3 {
        rates.push(route_msgs_per_sec(&cluster, i, Duration::from_secs(5)).await);
    }
    eprintln!("route messages a second, idle: {rates:?}");
    for (i, rate) in rates.iter().enumerate() {
        assert!(
            *rate < BOUND,
            "node n{} carried {rate:.0} route messages a second while idle (bound {BOUND})",
            i + 1
        );
    }
    assert_eq!(
        consumer_info(&js).await.num_waiting,
        1,
        "the pull still waits"
    );
}
