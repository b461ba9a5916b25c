//! Codec micro-benchmarks: parse and encode of `PUB`, `HPUB` and `MSG` frames, in bytes/s.
//!
//! Each iteration handles a buffer of many frames of one kind (100-byte order payloads on
//! `orders.shipped`, as `cargo xtask bench` sends), so the figure is codec throughput, not the
//! cost of one call. Run with `cargo bench -p jsproto --bench wire`.

use bytes::BytesMut;
use criterion::{black_box, criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use jsproto::wire::{encode_msg, encode_pub, ClientCodec, ClientOp, ServerCodec, ServerOp};
use tokio_util::codec::Decoder;

const FRAMES: usize = 1000;
const SUBJECT: &[u8] = b"orders.shipped";
const REPLY: &[u8] = b"_INBOX.h3kW9PqZ2mN8vX4tR7yB1c.42";
const SID: &[u8] = b"17";
const HEADERS: &[u8] = b"NATS/1.0\r\nNats-Msg-Id: order-000123456\r\n\r\n";
const PAYLOAD: &[u8; 100] = &[b'o'; 100];

#[derive(Clone, Copy)]
enum Kind {
    Pub,
    Hpub,
    Msg,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Pub => "PUB",
            Kind::Hpub => "HPUB",
            Kind::Msg => "MSG",
        }
    }

    fn encode(self, dst: &mut BytesMut) {
        match self {
            Kind::Pub => encode_pub(dst, SUBJECT, Some(REPLY), None, PAYLOAD),
            Kind::Hpub => encode_pub(dst, SUBJECT, Some(REPLY), Some(HEADERS), PAYLOAD),
            Kind::Msg => encode_msg(dst, SUBJECT, SID, Some(REPLY), None, PAYLOAD),
        }
    }
}

fn frames(kind: Kind) -> BytesMut {
    let mut buf = BytesMut::new();
    for _ in 0..FRAMES {
        kind.encode(&mut buf);
    }
    buf
}

fn parse(c: &mut Criterion) {
    let mut g = c.benchmark_group("parse");
    for kind in [Kind::Pub, Kind::Hpub, Kind::Msg] {
        let input = frames(kind);
        g.throughput(Throughput::Bytes(input.len() as u64));
        g.bench_function(kind.name(), |b| {
            b.iter_batched_ref(
                || input.clone(),
                |buf| match kind {
                    Kind::Pub | Kind::Hpub => {
                        let mut codec = ServerCodec::default();
                        let mut n = 0;
                        while let Some(op) = codec.decode(buf).expect("valid frames") {
                            assert!(matches!(op, ClientOp::Pub(_)));
                            n += 1;
                        }
                        assert_eq!(n, FRAMES);
                    }
                    Kind::Msg => {
                        let mut codec = ClientCodec::default();
                        let mut n = 0;
                        while let Some(op) = codec.decode(buf).expect("valid frames") {
                            assert!(matches!(op, ServerOp::Msg(_)));
                            n += 1;
                        }
                        assert_eq!(n, FRAMES);
                    }
                },
                BatchSize::SmallInput,
            )
        });
    }
    g.finish();
}

fn encode(c: &mut Criterion) {
    let mut g = c.benchmark_group("encode");
    for kind in [Kind::Pub, Kind::Hpub, Kind::Msg] {
        let len = frames(kind).len();
        g.throughput(Throughput::Bytes(len as u64));
        let mut buf = BytesMut::with_capacity(len);
        g.bench_function(kind.name(), |b| {
            b.iter(|| {
                buf.clear();
                for _ in 0..FRAMES {
                    kind.encode(&mut buf);
                }
                black_box(&buf);
            })
        });
    }
    g.finish();
}

criterion_group!(benches, parse, encode);
criterion_main!(benches);
