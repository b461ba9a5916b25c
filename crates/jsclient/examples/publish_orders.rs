//! Publishes N orders to JetStream, one PubAck at a time: `{"order_id":N,"item":"…"}` on
//! `orders.new` (the tutorial's `ORDERS` stream captures `orders.>`).
//!
//! ```text
//! cargo run -p jsclient --example publish_orders -- --server nats://127.0.0.1:4222 --count 10
//! ```

use std::process::ExitCode;

use clap::Parser;

/// Publish orders.
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
    /// How many orders.
    #[arg(long, default_value_t = 10)]
    count: u64,
    /// The first order id.
    #[arg(long, default_value_t = 1)]
    start: u64,
    /// Subject to publish on.
    #[arg(long, default_value = "orders.new")]
    subject: String,
}

const ITEMS: [&str; 4] = ["teapot", "kettle", "mug", "saucer"];

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
    let js = jsclient::jetstream::new(jsclient::connect(&args.server).await?);
    for order_id in args.start..args.start + args.count {
        let item = ITEMS[usize::try_from(order_id).unwrap_or(0) % ITEMS.len()];
        let body = serde_json::json!({ "order_id": order_id, "item": item }).to_string();
        let ack = js.publish(args.subject.clone(), body.into()).await?.await?;
        println!(
            "published order {order_id} ({item}) as {} #{}",
            ack.stream, ack.seq
        );
    }
    Ok(())
}
