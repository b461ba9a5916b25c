//! Subject index lookups as the server does them per message: a JetStream ack subject (nine
//! tokens, matched by the consumer's ack subscription), a pull request's reply inbox, and a
//! stream subject, in an index holding the subscriptions of 1000 worker connections.

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use jsproto::subject::{Matches, SubjectIndex};

fn index() -> SubjectIndex<u32> {
    let mut idx = SubjectIndex::new();
    for i in 0..1000u32 {
        // Each worker's inbox subscription, as async-nats makes them.
        idx.insert(
            format!("_INBOX.worker{i:04}xyzABCDEF.*").as_bytes(),
            None,
            i,
        )
        .expect("valid");
    }
    for (n, c) in ["shipping", "billing", "analytics"].iter().enumerate() {
        idx.insert(
            format!("$JS.ACK.ORDERS.{c}.*.*.*.*.*").as_bytes(),
            None,
            10_000 + n as u32,
        )
        .expect("valid");
        idx.insert(
            format!("$JS.API.CONSUMER.MSG.NEXT.ORDERS.{c}").as_bytes(),
            None,
            20_000 + n as u32,
        )
        .expect("valid");
    }
    idx.insert(b"orders.>", None, 30_000).expect("valid");
    idx.insert(b"$JS.API.>", None, 40_000).expect("valid");
    idx
}

fn find(c: &mut Criterion) {
    let idx = index();
    let mut out = Matches::new();
    let mut g = c.benchmark_group("subject index find");
    for (name, subject) in [
        (
            "ack subject",
            &b"$JS.ACK.ORDERS.shipping.1.48213.48213.1732873012000000000.0"[..],
        ),
        ("inbox reply", &b"_INBOX.worker0421xyzABCDEF.7Hq2"[..]),
        ("stream subject", &b"orders.shipped"[..]),
    ] {
        idx.find(subject, &mut out);
        assert_eq!(out.plain().len(), 1, "{name} has its one subscriber");
        out.clear();
        g.bench_function(name, |b| {
            b.iter(|| {
                idx.find(black_box(subject), &mut out);
                let n = out.plain().len();
                out.clear();
                n
            })
        });
    }
    g.finish();
}

criterion_group!(benches, find);
criterion_main!(benches);
