//! The tutorial's shipping worker: pulls orders from the durable pull consumer
//! `ORDERS > shipping`, "ships" each (after an optional delay standing in for real work),
//! then acknowledges it. Run several: the consumer hands each order to one of them.
//!
//! Shipping is keyed by `order_id`, so an order delivered twice (its worker died before the
//! ack reached the server, and the server redelivered it after `ack_wait`) ships once. With
//! `--shipped-dir`, the key is a file `<dir>/order-<id>` created with `create_new` — a
//! stand-in for a unique key in a database — and is shared by every worker using that
//! directory; without it, each worker remembers what it shipped in memory.
//!
//! Ctrl-C stops the worker after the order in hand is finished and acknowledged.
//!
//! On a consumer with priority groups, `--group` makes its pulls name the group: on a
//! `pinned_client` consumer one worker gets every order while it pulls and the others wait
//! (the tutorial's "one worker at a time"); on an `overflow` consumer, `--min-pending N` makes
//! a standby that is only given orders while at least N are waiting.
//!
//! ```text
//! cargo run -p jsclient --example shipping_worker -- --name w1 --delay 2s --shipped-dir /tmp/shipped
//! ```

use std::collections::HashSet;
use std::io::ErrorKind;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use jsclient::jetstream::{self, Message};

/// Ship orders from a durable pull consumer (each order goes to one worker).
#[derive(Debug, Parser)]
struct Args {
    /// Server URL.
    #[arg(
        short = 's',
        long,
        env = "NATS_URL",
        default_value = "nats://127.0.0.1:4222"
    )]
    server: String,
    /// Stream name.
    #[arg(long, default_value = "ORDERS")]
    stream: String,
    /// Durable pull consumer name.
    #[arg(long, default_value = "shipping")]
    consumer: String,
    /// This worker's name, printed on every line.
    #[arg(long, default_value = "worker")]
    name: String,
    /// How long shipping one order takes (e.g. `500ms`, `2s`).
    #[arg(long, default_value = "0s", value_parser = parse_duration)]
    delay: Duration,
    /// Directory of shipped-order markers shared by all workers (default: in memory).
    #[arg(long)]
    shipped_dir: Option<PathBuf>,
    /// Pull in this priority group (consumers with a priority policy).
    #[arg(long)]
    group: Option<String>,
    /// With --group on an overflow consumer: only take orders while at least this many wait.
    #[arg(long, requires = "group")]
    min_pending: Option<u64>,
}

/// `--delay`: a Go duration (`500ms`, `2s`, `1m`) or a bare number of seconds (`0.5`).
fn parse_duration(s: &str) -> Result<Duration, String> {
    let invalid = || format!("invalid duration {s:?} (use 500ms or 2s)");
    if let Ok(secs) = s.parse::<f64>() {
        return Duration::try_from_secs_f64(secs).map_err(|_| invalid());
    }
    jsproto::duration::parse_go_duration(s)
        .and_then(|nanos| u64::try_from(nanos).ok())
        .map(Duration::from_nanos)
        .ok_or_else(invalid)
}

/// Where "already shipped" is remembered.
enum Shipped {
    Memory(HashSet<u64>),
    Dir(PathBuf),
}

impl Shipped {
    /// Records `order_id` as shipped; `false` if it already was.
    fn record(&mut self, order_id: u64, worker: &str) -> std::io::Result<bool> {
        match self {
            Shipped::Memory(set) => Ok(set.insert(order_id)),
            Shipped::Dir(dir) => {
                let path = dir.join(format!("order-{order_id}"));
                match std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(&path)
                {
                    Ok(mut f) => {
                        use std::io::Write;
                        writeln!(f, "{worker}")?;
                        Ok(true)
                    }
                    Err(e) if e.kind() == ErrorKind::AlreadyExists => Ok(false),
                    Err(e) => Err(e),
                }
            }
        }
    }

    fn contains(&self, order_id: u64) -> bool {
        match self {
            Shipped::Memory(set) => set.contains(&order_id),
            Shipped::Dir(dir) => dir.join(format!("order-{order_id}")).exists(),
        }
    }
}

/// The order id: `order_id` of a JSON body, else the last subject token if numeric.
fn order_id(msg: &Message) -> Option<u64> {
    serde_json::from_slice::<serde_json::Value>(&msg.payload)
        .ok()
        .and_then(|v| v.get("order_id").and_then(serde_json::Value::as_u64))
        .or_else(|| msg.subject.rsplit('.').next()?.parse().ok())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    // Errors as one line for a person (`error: consumer not found (10014)`), not `Debug`.
    match run(Args::parse()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let mut shipped = match &args.shipped_dir {
        Some(dir) => {
            std::fs::create_dir_all(dir)?;
            Shipped::Dir(dir.clone())
        }
        None => Shipped::Memory(HashSet::new()),
    };
    let js = jetstream::new(jsclient::connect(&args.server).await?);
    let mut consumer = js
        .get_consumer_from_stream(&args.consumer, &args.stream)
        .await?;
    if let Some(group) = &args.group {
        consumer = consumer.with_priority_group(jetstream::consumer::PriorityPull {
            min_pending: args.min_pending.unwrap_or(0),
            ..jetstream::consumer::PriorityPull::group(group.clone())
        });
    }
    let name = &args.name;
    println!(
        "{name}: waiting for orders on {} > {}",
        args.stream, args.consumer
    );
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    loop {
        // One order at a time, pulled only when this worker is free: it never holds orders
        // it is not working on, so they go to the other workers (and only the order in hand
        // is redelivered if this worker dies).
        let msg = tokio::select! {
            _ = &mut ctrl_c => break,
            msg = consumer.next(Duration::from_secs(5)) => msg,
        };
        let msg = match msg {
            Ok(Some(msg)) => msg,
            Ok(None) => continue, // no order within 5 s: pull again
            Err(jetstream::consumer::ConsumerError::PinIdMismatch { .. }) => {
                println!("{name}: lost the pin; waiting for it like any worker");
                continue;
            }
            Err(e) => {
                eprintln!("{name}: pull error: {e}");
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            }
        };
        let delivered = msg.info().map(|i| i.delivered).unwrap_or(0);
        let Some(id) = order_id(&msg) else {
            println!("{name}: not an order ({:?}); terminating it", msg.subject);
            if let Err(e) = msg.term().await {
                eprintln!("{name}: term failed: {e}");
            }
            continue;
        };
        if shipped.contains(id) {
            println!("{name}: order {id} already shipped (delivery {delivered}); acking");
            ack_or_report(&msg, name).await;
            continue;
        }
        println!("{name}: shipping order {id} (delivery {delivered})");
        tokio::time::sleep(args.delay).await;
        if shipped.record(id, name)? {
            println!("{name}: shipped order {id}");
        } else {
            println!("{name}: order {id} was shipped meanwhile by another worker");
        }
        ack_or_report(&msg, name).await;
    }
    println!("{name}: stopping");
    Ok(())
}

/// Acks and waits for the server's confirmation. If that fails (the server is down or
/// restarting) the worker goes on: the order was shipped and is keyed by `order_id`, so when
/// the server redelivers it after its ack wait it is recognised and acked without shipping
/// twice.
async fn ack_or_report(msg: &jsclient::jetstream::Message, name: &str) {
    if let Err(e) = msg.double_ack().await {
        eprintln!("{name}: ack not confirmed ({e}); the order will come back and be skipped");
    }
}
