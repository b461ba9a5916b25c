//! Many connections on one stream at once, through async-nats against the real `jsserver`
//! binary: publishers, workers pulling and acking, and ack confirmations together.
//!
//! A stream's commands are applied either by the connection task that sent them (when the
//! stream's engine is free) or by the stream's thread (fsync mode, API calls, confirmed acks,
//! deadlines). These tests check what must hold however the work is split: every publish is
//! stored once and acknowledged with its own sequence, each publisher's messages keep their
//! order, every stored message reaches exactly one worker, and the consumer ends with every
//! message acked; in both sync modes.

mod common;

use std::collections::HashSet;
use std::time::Duration;

use async_nats::jetstream::consumer::{pull, AckPolicy};
use async_nats::jetstream::{self, stream, AckKind};
use bytes::Bytes;
use common::{fetch, TestServer, SYNC_ALWAYS};

const PUBLISHERS: usize = 6;
const PER_PUBLISHER: usize = 1500;
const WORKERS: usize = 4;

fn start(sync_always: bool) -> TestServer {
    if sync_always {
        TestServer::start_with_config(SYNC_ALWAYS, &[])
    } else {
        TestServer::start(&[])
    }
}

/// Publishes `PER_PUBLISHER` messages `"<p>:<k>"` on `orders.p<p>`, 64 PubAcks in flight;
/// returns the acknowledged sequences in publish order.
async fn publisher(url: String, p: usize) -> Vec<u64> {
    let js = jetstream::new(async_nats::connect(url).await.expect("connect"));
    let mut inflight = std::collections::VecDeque::new();
    let mut seqs = Vec::with_capacity(PER_PUBLISHER);
    for k in 0..PER_PUBLISHER {
        if inflight.len() >= 64 {
            let ack: jetstream::context::PublishAckFuture = inflight.pop_front().expect("some");
            seqs.push(ack.await.expect("puback").sequence);
        }
        inflight.push_back(
            js.publish(format!("orders.p{p}"), Bytes::from(format!("{p}:{k}")))
                .await
                .expect("publish"),
        );
    }
    for ack in inflight {
        seqs.push(ack.await.expect("puback").sequence);
    }
    seqs
}

/// Pulls batches of 10 from `shipping` and acks each message (every fifth one with a
/// confirmation), until `total` messages were seen by all workers together.
async fn worker(
    url: String,
    w: usize,
    seen: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
    total: usize,
) -> usize {
    let nc = async_nats::connect(url).await.expect("connect");
    let js = jetstream::new(nc.clone());
    let consumer: jetstream::consumer::PullConsumer = js
        .get_stream("ORDERS")
        .await
        .expect("stream")
        .get_consumer("shipping")
        .await
        .expect("consumer");
    let mut mine = 0;
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    loop {
        let done = seen.lock().unwrap().iter().filter(|&&c| c > 0).count();
        if done >= total {
            // Plain acks are only queued by the client: send them before the connection goes.
            nc.flush().await.expect("flush the last acks");
            return mine;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "worker {w}: only {done} of {total} delivered"
        );
        for m in fetch(&consumer, 10, Duration::from_millis(200)).await {
            let seq = m.info().expect("ack subject").stream_sequence;
            seen.lock().unwrap()[seq as usize] += 1;
            if seq % 5 == 0 {
                m.double_ack().await.expect("confirmed ack");
            } else {
                m.ack_with(AckKind::Ack).await.expect("ack");
            }
            mine += 1;
        }
    }
}

async fn publishers_and_workers_together(sync_always: bool) {
    let server = start(sync_always);
    let nc = async_nats::connect(server.url()).await.expect("connect");
    let js = jetstream::new(nc);
    let mut s = js
        .create_stream(stream::Config {
            name: "ORDERS".into(),
            subjects: vec!["orders.>".into()],
            ..Default::default()
        })
        .await
        .expect("create stream");
    s.create_consumer(pull::Config {
        durable_name: Some("shipping".into()),
        ack_policy: AckPolicy::Explicit,
        ..Default::default()
    })
    .await
    .expect("create consumer");

    let total = PUBLISHERS * PER_PUBLISHER;
    let seen = std::sync::Arc::new(std::sync::Mutex::new(vec![0u8; total + 1]));
    let workers: Vec<_> = (0..WORKERS)
        .map(|w| tokio::spawn(worker(server.url(), w, seen.clone(), total)))
        .collect();
    let publishers: Vec<_> = (0..PUBLISHERS)
        .map(|p| tokio::spawn(publisher(server.url(), p)))
        .collect();

    let mut all_seqs = HashSet::new();
    for (p, handle) in publishers.into_iter().enumerate() {
        let seqs = handle.await.expect("publisher task");
        assert_eq!(seqs.len(), PER_PUBLISHER);
        assert!(
            seqs.windows(2).all(|w| w[0] < w[1]),
            "publisher {p}: its messages were stored out of order"
        );
        for seq in seqs {
            assert!(all_seqs.insert(seq), "sequence {seq} acknowledged twice");
        }
    }
    assert_eq!(
        all_seqs,
        (1..=total as u64).collect::<HashSet<_>>(),
        "every publish got its own sequence, with no gaps"
    );
    let mut delivered = 0;
    for handle in workers {
        delivered += handle.await.expect("worker task");
    }
    assert_eq!(delivered, total);
    let seen = seen.lock().unwrap().clone();
    let wrong: Vec<usize> = (1..=total).filter(|&i| seen[i] != 1).take(5).collect();
    assert!(wrong.is_empty(), "not delivered exactly once: {wrong:?}");

    // Each stored message is the one its publisher sent with that PubAck's place in line.
    let info = s.info().await.expect("stream info");
    assert_eq!(info.state.messages, total as u64);
    for p in 0..PUBLISHERS {
        let last = s
            .get_last_raw_message_by_subject(&format!("orders.p{p}"))
            .await
            .expect("last message on the publisher's subject");
        assert_eq!(
            &last.payload[..],
            format!("{p}:{}", PER_PUBLISHER - 1).as_bytes()
        );
    }
    // Plain acks are applied as they come; wait for the last ones rather than for a time.
    let mut consumer: jetstream::consumer::PullConsumer =
        s.get_consumer("shipping").await.expect("consumer");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let ci = consumer.info().await.expect("consumer info").clone();
        if ci.ack_floor.stream_sequence == total as u64 {
            assert_eq!(ci.num_ack_pending, 0);
            assert_eq!(ci.num_redelivered, 0);
            assert_eq!(ci.delivered.stream_sequence, total as u64);
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "ack floor stuck at {} of {total}",
            ci.ack_floor.stream_sequence
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publishers_and_workers_together_default_sync() {
    publishers_and_workers_together(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publishers_and_workers_together_sync_always() {
    publishers_and_workers_together(true).await;
}
