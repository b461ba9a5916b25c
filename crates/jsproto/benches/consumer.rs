//! Consumer state machine micro-benchmark: deliver + explicit ack per second with 100k
//! deliveries outstanding (unacknowledged).
//!
//! The stream is synthetic (every sequence up to 2^40 is stored on `orders.shipped`), so the
//! figure is the consumer's own cost: one pull request with a huge batch is admitted, the
//! consumer stalls at `max_ack_pending` = 100,000, and each iteration acks the oldest
//! outstanding delivery, which frees one slot and delivers the next message. Run with
//! `cargo bench -p jsproto --bench consumer`.
#![allow(clippy::disallowed_methods)] // a benchmark needs one real `Instant` to start from

use std::collections::VecDeque;
use std::time::Instant;

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use jsproto::consumer::{
    AckKind, AckTokens, Action, Consumer, ConsumerConfig, MsgMeta, PullRequest, StreamView,
    SubjectFilter,
};

const OUTSTANDING: u64 = 100_000;
const SUBJECT: &[u8] = b"orders.shipped";

/// Every sequence 1..=LAST is stored, 100 bytes on `orders.shipped`.
struct Synthetic;

const LAST: u64 = 1 << 40;

impl Synthetic {
    fn meta(seq: u64) -> MsgMeta {
        MsgMeta {
            seq,
            subject_len: SUBJECT.len(),
            size: 100,
            timestamp_unix_ns: 1_795_936_983_000_000_000 + seq,
        }
    }
}

impl StreamView for Synthetic {
    fn first_seq(&self) -> u64 {
        1
    }
    fn last_seq(&self) -> u64 {
        LAST
    }
    fn load(&self, seq: u64) -> Option<MsgMeta> {
        (1..=LAST).contains(&seq).then(|| Self::meta(seq))
    }
    fn next_matching(&self, from: u64, filter: &SubjectFilter) -> Option<MsgMeta> {
        (from.max(1) <= LAST && filter.matches(SUBJECT)).then(|| Self::meta(from.max(1)))
    }
    fn num_matching(&self, from: u64, filter: &SubjectFilter) -> u64 {
        if filter.matches(SUBJECT) {
            (LAST + 1).saturating_sub(from.max(1))
        } else {
            0
        }
    }
    fn last_matching(&self, filter: &SubjectFilter) -> Option<u64> {
        filter.matches(SUBJECT).then_some(LAST)
    }
    fn last_per_subject(&self, filter: &SubjectFilter) -> Vec<u64> {
        self.last_matching(filter).into_iter().collect()
    }
    fn first_seq_at_or_after_time(&self, _unix_ns: u64) -> Option<u64> {
        Some(1)
    }
}

fn delivered(out: &mut Vec<Action>, into: &mut VecDeque<AckTokens>) {
    for a in out.drain(..) {
        if let Action::Deliver { ack, .. } = a {
            into.push_back(ack);
        }
    }
}

fn deliver_ack(c: &mut Criterion) {
    let stream = Synthetic;
    let now = Instant::now();
    let cfg = ConsumerConfig {
        name: "shipping".to_owned(),
        max_ack_pending: Some(OUTSTANDING),
        ..ConsumerConfig::default()
    };
    let mut consumer = Consumer::new("ORDERS", cfg, 1, &stream, now).expect("valid config");
    let mut out = Vec::new();
    consumer.on_pull_request(
        now,
        Bytes::from_static(b"_INBOX.worker.1"),
        PullRequest {
            batch: LAST,
            ..PullRequest::default()
        },
        &stream,
        &mut out,
    );
    let mut outstanding = VecDeque::with_capacity(OUTSTANDING as usize + 1);
    delivered(&mut out, &mut outstanding);
    assert_eq!(outstanding.len() as u64, OUTSTANDING);

    let mut g = c.benchmark_group("consumer");
    g.throughput(Throughput::Elements(1));
    g.bench_function("deliver+ack at 100k outstanding", |b| {
        b.iter(|| {
            let oldest = outstanding.pop_front().expect("outstanding deliveries");
            consumer.on_ack(now, oldest, AckKind::Ack, None, &stream, &mut out);
            delivered(&mut out, &mut outstanding);
        })
    });
    g.finish();
    assert_eq!(
        outstanding.len() as u64,
        OUTSTANDING,
        "one delivery per ack"
    );
}

criterion_group!(benches, deliver_ack);
criterion_main!(benches);
