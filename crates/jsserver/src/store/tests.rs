//! The shared store suite: each `check_*` body runs against both stores (see `suite!` at the
//! bottom), so the memory and file stores answer alike. File-only behaviour (reopen, recovery
//! from damage, segments) is in `file_only`.
//!
//! Timestamps are explicit Unix ns; nothing sleeps or measures time.

use std::sync::Arc;
use std::time::Duration;

use super::*;

/// A store under test plus what it needs to live (its directory) and to be reopened.
pub(super) struct Fixture {
    pub store: Box<dyn MsgStore>,
    /// The charged size formula of this store kind.
    pub size: fn(usize, usize, usize) -> u64,
    /// Keeps the file store's directory alive (removed on drop).
    #[allow(dead_code)]
    pub dir: Option<tempfile::TempDir>,
}

type Factory = dyn Fn(StoreLimits) -> Fixture;

pub(super) fn memory(limits: StoreLimits) -> Fixture {
    Fixture {
        store: Box::new(MemoryStore::new(limits)),
        size: memory_msg_size,
        dir: None,
    }
}

/// A file store with small segments (so the generic tests cross segment boundaries too).
pub(super) fn file(limits: StoreLimits) -> Fixture {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = FileStoreConfig {
        segment_size: 1024,
        ..FileStoreConfig::new(dir.path().join("msgs"))
    };
    let store = FileStore::open(cfg, limits).expect("open file store");
    Fixture {
        store: Box::new(store),
        size: file_msg_size,
        dir: Some(dir),
    }
}

const T0: u64 = 1_700_000_000_000_000_000;
const SEC: u64 = 1_000_000_000;

fn put(s: &mut dyn MsgStore, subject: &str, payload: &[u8], ts: u64) -> StoreOutcome {
    s.store_msg(subject, None, payload, ts).expect("store_msg")
}

/// Stores one message per subject in `subjects`, with ts T0 + i seconds; returns the seqs.
fn put_all(s: &mut dyn MsgStore, subjects: &[&str]) -> Vec<u64> {
    subjects
        .iter()
        .enumerate()
        .map(|(i, subj)| {
            put(
                s,
                subj,
                format!("m{}", i + 1).as_bytes(),
                T0 + i as u64 * SEC,
            )
            .seq
        })
        .collect()
}

fn seqs_of(s: &dyn MsgStore, filter: &str) -> Vec<u64> {
    let mut out = Vec::new();
    let mut next = 0;
    while let Some(m) = s.load_next(filter, next).expect("load_next") {
        out.push(m.seq);
        next = m.seq + 1;
    }
    out
}

/// The sequences [`MsgStore::expire`] removes at `now`.
fn expire(s: &mut dyn MsgStore, now: u64) -> Vec<u64> {
    s.expire(now)
        .expect("expire")
        .into_iter()
        .map(|(seq, _)| seq)
        .collect()
}

fn limits(f: impl FnOnce(&mut StoreLimits)) -> StoreLimits {
    let mut l = StoreLimits::default();
    f(&mut l);
    l
}

fn check_sequences_from_one(new: &Factory) {
    let mut fx = new(StoreLimits::default());
    let s = fx.store.as_mut();
    assert_eq!(s.state(), StoreState::default());
    assert_eq!(put_all(s, &["a", "b", "a"]), vec![1, 2, 3]);
    let size = |p: usize| (fx.size)(1, 0, p);
    let st = s.state();
    assert_eq!(
        st,
        StoreState {
            msgs: 3,
            bytes: 3 * size(2),
            first_seq: 1,
            first_ts: T0,
            last_seq: 3,
            last_ts: T0 + 2 * SEC,
            num_subjects: 2,
            num_deleted: 0,
        }
    );
    let out = s.store_msg("c", None, b"", T0 + 10).unwrap();
    assert_eq!(
        out,
        StoreOutcome {
            seq: 4,
            ts: T0 + 10,
            removed: vec![]
        }
    );
    s.flush().unwrap();
    s.sync().unwrap();
    assert_eq!(s.state().msgs, 4);
}

fn check_load_variants(new: &Factory) {
    let mut fx = new(StoreLimits::default());
    let s = fx.store.as_mut();
    put_all(
        s,
        &[
            "orders.new.eu",
            "orders.new.us",
            "orders.done.eu",
            "other",
            "orders.new.eu",
        ],
    );
    let m = s.load(2).unwrap().unwrap();
    assert_eq!(
        (m.seq, &*m.subject, &m.payload[..], m.ts),
        (2, "orders.new.us", &b"m2"[..], T0 + SEC)
    );
    assert_eq!(m.headers, None);
    assert!(s.load(0).unwrap().is_none());
    assert!(s.load(6).unwrap().is_none());
    assert!(s.load(u64::MAX).unwrap().is_none());

    assert_eq!(seqs_of(s, ">"), vec![1, 2, 3, 4, 5]);
    assert_eq!(seqs_of(s, ""), vec![1, 2, 3, 4, 5]);
    assert_eq!(seqs_of(s, "orders.new.eu"), vec![1, 5]);
    assert_eq!(seqs_of(s, "orders.*.eu"), vec![1, 3, 5]);
    assert_eq!(seqs_of(s, "orders.>"), vec![1, 2, 3, 5]);
    assert_eq!(seqs_of(s, "*"), vec![4]);
    assert_eq!(seqs_of(s, "nope"), Vec::<u64>::new());
    assert_eq!(seqs_of(s, "nope.*"), Vec::<u64>::new());
    assert_eq!(s.load_next("orders.*.eu", 4).unwrap().unwrap().seq, 5);
    assert!(s.load_next(">", 6).unwrap().is_none());

    assert_eq!(s.load_last("orders.new.eu").unwrap().unwrap().seq, 5);
    assert_eq!(s.load_last("orders.new.us").unwrap().unwrap().seq, 2);
    assert_eq!(s.load_last("orders.*.us").unwrap().unwrap().seq, 2);
    assert_eq!(s.load_last("orders.done.>").unwrap().unwrap().seq, 3);
    assert_eq!(s.load_last(">").unwrap().unwrap().seq, 5);
    assert!(s.load_last("orders.none").unwrap().is_none());
    assert!(s.load_last("x.*").unwrap().is_none());

    // Removed messages are skipped.
    assert!(s.remove(5, false).unwrap());
    assert_eq!(s.load_last("orders.new.eu").unwrap().unwrap().seq, 1);
    assert_eq!(seqs_of(s, "orders.*.eu"), vec![1, 3]);
    assert!(s.load(5).unwrap().is_none());
}

fn check_headers_round_trip(new: &Factory) {
    let mut fx = new(StoreLimits::default());
    let s = fx.store.as_mut();
    let hdr = b"NATS/1.0\r\nNats-Msg-Id: 1\r\n\r\n";
    s.store_msg("h", Some(hdr), b"with", T0).unwrap();
    s.store_msg("h", None, b"without", T0).unwrap();
    s.store_msg("h", Some(b""), b"", T0).unwrap();
    let big = vec![7u8; 5000];
    s.store_msg("h", Some(hdr), &big, T0).unwrap();
    let m = s.load(1).unwrap().unwrap();
    assert_eq!(m.headers.as_deref(), Some(&hdr[..]));
    assert_eq!(&m.payload[..], b"with");
    assert_eq!(s.load(2).unwrap().unwrap().headers, None);
    let m = s.load(3).unwrap().unwrap();
    assert_eq!((m.headers, m.payload.len()), (None, 0));
    let m = s.load(4).unwrap().unwrap();
    assert_eq!(&m.payload[..], &big[..]);
    let expected = (fx.size)(1, hdr.len(), 4)
        + (fx.size)(1, 0, 7)
        + (fx.size)(1, 0, 0)
        + (fx.size)(1, hdr.len(), 5000);
    assert_eq!(fx.store.state().bytes, expected);
}

fn check_max_msgs(new: &Factory) {
    // Discard old: the oldest goes, and is reported.
    let mut fx = new(limits(|l| l.max_msgs = 3));
    let s = fx.store.as_mut();
    put_all(s, &["a", "b", "c"]);
    let out = put(s, "d", b"x", T0 + 10 * SEC);
    assert_eq!((out.seq, out.removed), (4, vec![1]));
    let st = s.state();
    assert_eq!(
        (st.msgs, st.first_seq, st.last_seq, st.first_ts),
        (3, 2, 4, T0 + SEC)
    );
    assert_eq!(st.num_subjects, 3);

    // Discard new: refused with nats-server's text, nothing stored.
    let mut fx = new(limits(|l| {
        l.max_msgs = 2;
        l.discard = Discard::New;
    }));
    let s = fx.store.as_mut();
    put_all(s, &["a", "b"]);
    let before = s.state();
    let err = s.store_msg("c", None, b"x", T0).unwrap_err();
    assert!(matches!(err, StoreError::MaxMsgs));
    assert_eq!(err.to_string(), "maximum messages exceeded");
    assert_eq!(s.state(), before);
    assert!(s.load(3).unwrap().is_none());
    // Room again after a delete; the sequence continues.
    assert!(s.remove(1, false).unwrap());
    assert_eq!(put(s, "c", b"x", T0).seq, 3);
}

fn check_max_bytes(new: &Factory) {
    let probe = new(StoreLimits::default());
    let one = (probe.size)(1, 0, 10); // a 1-byte subject and a 10-byte payload
    drop(probe);

    let mut fx = new(limits(|l| l.max_bytes = (3 * one) as i64));
    let s = fx.store.as_mut();
    for i in 0..3 {
        assert!(put(s, "a", &[b'x'; 10], T0 + i).removed.is_empty());
    }
    assert_eq!(s.state().bytes, 3 * one);
    let out = put(s, "a", &[b'x'; 10], T0 + 3);
    assert_eq!(out.removed, vec![1]);
    // A bigger message evicts as many as needed.
    let out = put(s, "b", &[b'x'; 20], T0 + 4);
    assert_eq!(out.removed, vec![2, 3]);
    let st = s.state();
    assert!(st.bytes <= 3 * one);
    assert_eq!((st.msgs, st.first_seq, st.last_seq), (2, 4, 5));

    // Discard new: exactly full is fine, one more byte is refused.
    let mut fx = new(limits(|l| {
        l.max_bytes = (2 * one) as i64;
        l.discard = Discard::New;
    }));
    let s = fx.store.as_mut();
    put(s, "a", &[b'x'; 10], T0);
    put(s, "a", &[b'x'; 10], T0);
    assert_eq!(s.state().bytes, 2 * one);
    let err = s.store_msg("a", None, b"", T0).unwrap_err();
    assert!(matches!(err, StoreError::MaxBytes));
    assert_eq!(err.to_string(), "maximum bytes exceeded");
    assert_eq!(s.state().msgs, 2);
}

fn check_max_age(new: &Factory) {
    let mut fx = new(limits(|l| l.max_age = Duration::from_secs(10)));
    let s = fx.store.as_mut();
    assert_eq!(s.next_expiry(), None);
    put_all(s, &["a", "b", "c", "d"]); // T0, T0+1s, T0+2s, T0+3s
    assert_eq!(s.next_expiry(), Some(T0 + 10 * SEC));
    assert!(expire(s, T0 + 10 * SEC - 1).is_empty());
    let first = s.expire(T0 + 10 * SEC).unwrap();
    assert_eq!(first, vec![(1, Arc::from("a"))], "with its subject");
    assert_eq!(s.next_expiry(), Some(T0 + 11 * SEC));
    assert_eq!(expire(s, T0 + 12 * SEC + 5), vec![2, 3]);
    let st = s.state();
    assert_eq!((st.msgs, st.first_seq, st.first_ts), (1, 4, T0 + 3 * SEC));
    assert_eq!(expire(s, T0 + 100 * SEC), vec![4]);
    let st = s.state();
    assert_eq!(
        (st.msgs, st.first_seq, st.last_seq, st.first_ts),
        (0, 5, 4, 0)
    );
    assert_eq!(st.last_ts, T0 + 3 * SEC);
    assert_eq!(s.next_expiry(), None);
    assert_eq!(put(s, "e", b"", T0 + 200 * SEC).seq, 5);

    // No max_age: nothing ever expires.
    let mut fx = new(StoreLimits::default());
    put_all(fx.store.as_mut(), &["a"]);
    assert!(fx.store.expire(u64::MAX).unwrap().is_empty());
    assert_eq!(fx.store.next_expiry(), None);
}

/// Messages marked [`MsgStore::exempt_from_age`] (`Nats-TTL: never`) outlive `max_age`,
/// wherever they are, while the ones around them expire as before; removing one by hand still
/// works, and the walk steps over an exempt message once.
fn check_age_exempt(new: &Factory) {
    let mut fx = new(limits(|l| l.max_age = Duration::from_secs(10)));
    let s = fx.store.as_mut();
    put_all(s, &["n", "a", "n", "b", "n", "c"]); // T0 .. T0+5s
    s.exempt_from_age(1);
    s.exempt_from_age(3);
    s.exempt_from_age(5);
    s.exempt_from_age(99); // not stored: nothing
                           // Early is allowed (an exempt head not stepped over yet), late is not.
    assert!(s.next_expiry().is_some_and(|at| at <= T0 + 11 * SEC));
    assert_eq!(expire(s, T0 + 10 * SEC), Vec::<u64>::new());
    assert_eq!(
        s.next_expiry(),
        Some(T0 + 11 * SEC),
        "seq 2 is the next to go"
    );
    assert_eq!(expire(s, T0 + 13 * SEC), vec![2, 4]);
    assert_eq!(expire(s, T0 + 100 * SEC), vec![6]);
    assert_eq!(s.next_expiry(), None, "only exempt messages are left");
    assert_eq!(seqs_of(s, ">"), vec![1, 3, 5]);
    // A new message behind the exempt ones expires on time.
    put(s, "d", b"", T0 + 200 * SEC);
    assert_eq!(s.next_expiry(), Some(T0 + 210 * SEC));
    assert_eq!(expire(s, T0 + 210 * SEC), vec![7]);
    // Exempt from age, not from removal.
    assert!(s.remove(3, false).unwrap());
    assert_eq!(seqs_of(s, ">"), vec![1, 5]);
    assert_eq!(s.state().msgs, 2);
    // A purge takes them too.
    s.purge(&PurgeRequest::default()).unwrap();
    assert_eq!(s.state().msgs, 0);
    put(s, "e", b"", T0 + 300 * SEC);
    assert_eq!(expire(s, T0 + 310 * SEC), vec![8]);
}

fn check_max_msgs_per_subject(new: &Factory) {
    // Discard old: the subject's oldest goes.
    let mut fx = new(limits(|l| l.max_msgs_per_subject = 2));
    let s = fx.store.as_mut();
    put_all(s, &["a", "b", "a", "b"]);
    let out = put(s, "a", b"x", T0);
    assert_eq!((out.seq, out.removed), (5, vec![1]));
    assert_eq!(put(s, "b", b"x", T0).removed, vec![2]);
    assert_eq!(put(s, "c", b"x", T0).removed, Vec::<u64>::new());
    assert_eq!(seqs_of(s, "a"), vec![3, 5]);
    assert_eq!(seqs_of(s, "b"), vec![4, 6]);
    assert_eq!(seqs_of(s, ">"), vec![3, 4, 5, 6, 7]);
    assert_eq!(s.state().num_deleted, 0);

    // Discard new without per-subject: a full subject still replaces its oldest, even when
    // max_msgs is reached.
    let mut fx = new(limits(|l| {
        l.max_msgs_per_subject = 1;
        l.max_msgs = 2;
        l.discard = Discard::New;
    }));
    let s = fx.store.as_mut();
    put_all(s, &["a", "b"]);
    let out = put(s, "a", b"m3", T0);
    assert_eq!((out.seq, out.removed), (3, vec![1]));
    assert!(matches!(
        s.store_msg("c", None, b"", T0),
        Err(StoreError::MaxMsgs)
    ));

    // Discard new per subject: refused.
    let mut fx = new(limits(|l| {
        l.max_msgs_per_subject = 1;
        l.discard = Discard::New;
        l.discard_new_per_subject = true;
    }));
    let s = fx.store.as_mut();
    put_all(s, &["a", "b"]);
    let err = s.store_msg("a", None, b"", T0).unwrap_err();
    assert!(matches!(err, StoreError::MaxMsgsPerSubject));
    assert_eq!(err.to_string(), "maximum messages per subject exceeded");
    assert_eq!(s.state().msgs, 2);
    assert_eq!(put(s, "c", b"", T0).seq, 3);
}

fn check_discard_new_bytes_replacement(new: &Factory) {
    // A full subject under discard new may replace its oldest for max_bytes only if that
    // oldest is at least as large (nats-server's rule).
    let probe = new(StoreLimits::default());
    let small = (probe.size)(1, 0, 10);
    drop(probe);
    let mut fx = new(limits(|l| {
        l.max_bytes = (2 * small) as i64;
        l.max_msgs_per_subject = 1;
        l.discard = Discard::New;
    }));
    let s = fx.store.as_mut();
    put(s, "a", &[0; 10], T0);
    put(s, "b", &[0; 10], T0);
    assert_eq!(put(s, "a", &[1; 10], T0).removed, vec![1]);
    assert!(matches!(
        s.store_msg("a", None, &[2; 11], T0),
        Err(StoreError::MaxBytes)
    ));
    assert!(matches!(
        s.store_msg("c", None, &[], T0),
        Err(StoreError::MaxBytes)
    ));
    assert_eq!(s.state().msgs, 2);
}

fn check_max_msg_size(new: &Factory) {
    let mut fx = new(limits(|l| l.max_msg_size = 10));
    let s = fx.store.as_mut();
    put(s, "a", &[0; 10], T0);
    s.store_msg("a", Some(b"NATS/1.0"), b"ab", T0).unwrap();
    let err = s.store_msg("a", None, &[0; 11], T0).unwrap_err();
    assert!(matches!(err, StoreError::MsgTooLarge));
    assert_eq!(err.to_string(), "message size exceeds maximum allowed");
    // Headers count too.
    assert!(matches!(
        s.store_msg("a", Some(b"NATS/1.0\r\n"), b"x", T0),
        Err(StoreError::MsgTooLarge)
    ));
    assert_eq!(s.state().msgs, 2);
    assert_eq!(s.state().last_seq, 2);
}

fn check_remove(new: &Factory) {
    let mut fx = new(StoreLimits::default());
    let s = fx.store.as_mut();
    put_all(s, &["a", "b", "a", "c", "a"]);
    assert!(s.remove(3, false).unwrap());
    assert!(!s.remove(3, false).unwrap());
    assert!(s.remove(4, true).unwrap());
    assert!(!s.remove(0, true).unwrap());
    assert!(!s.remove(99, false).unwrap());
    let st = s.state();
    assert_eq!(
        (st.msgs, st.first_seq, st.last_seq, st.num_deleted),
        (3, 1, 5, 2)
    );
    assert_eq!(st.num_subjects, 2);
    assert_eq!(s.deleted(), vec![3, 4]);
    assert_eq!(st.bytes, 3 * (fx.size)(1, 0, 2));
    // Removing the first moves first_seq to the next message.
    assert!(s.remove(1, false).unwrap());
    let st = s.state();
    assert_eq!(
        (st.first_seq, st.first_ts, st.num_deleted),
        (2, T0 + SEC, 2)
    );
    assert_eq!(s.deleted(), vec![3, 4]);
    // Removing the last keeps last_seq.
    assert!(s.remove(5, false).unwrap());
    let st = s.state();
    assert_eq!(
        (st.msgs, st.first_seq, st.last_seq, st.last_ts),
        (1, 2, 5, T0 + 4 * SEC)
    );
    assert_eq!(s.deleted(), vec![3, 4, 5]);
    assert!(s.remove(2, true).unwrap());
    let st = s.state();
    assert_eq!(
        (st.msgs, st.first_seq, st.last_seq, st.num_deleted, st.bytes),
        (0, 6, 5, 0, 0)
    );
    assert_eq!(st.num_subjects, 0);
    assert!(s.deleted().is_empty());
    assert_eq!(put(s, "z", b"", T0).seq, 6);
}

fn check_purge_all(new: &Factory) {
    let mut fx = new(StoreLimits::default());
    let s = fx.store.as_mut();
    put_all(s, &["a", "b", "c", "a", "b", "c"]);
    assert_eq!(s.purge(&PurgeRequest::default()).unwrap(), 6);
    let st = s.state();
    assert_eq!(
        st,
        StoreState {
            first_seq: 7,
            last_seq: 6,
            last_ts: T0 + 5 * SEC,
            ..StoreState::default()
        }
    );
    assert!(s.load(6).unwrap().is_none());
    assert!(s.load_last(">").unwrap().is_none());
    assert_eq!(s.purge(&PurgeRequest::default()).unwrap(), 0);
    assert_eq!(put(s, "a", b"", T0).seq, 7);
    let st = s.state();
    assert_eq!((st.msgs, st.first_seq, st.last_seq), (1, 7, 7));
    // ">" as a filter is "everything" too.
    let req = PurgeRequest {
        filter: Some(">".into()),
        ..Default::default()
    };
    assert_eq!(s.purge(&req).unwrap(), 1);
    assert_eq!(s.state().first_seq, 8);
}

fn check_purge_variants(new: &Factory) {
    let subjects = ["a.1", "b.1", "a.2", "b.1", "a.1", "c", "a.1", "b.2"];
    let req = |filter: Option<&str>, up_to: Option<u64>, keep: Option<u64>| PurgeRequest {
        filter: filter.map(str::to_string),
        up_to_seq: up_to,
        keep,
    };

    // By literal filter.
    let mut fx = new(StoreLimits::default());
    let s = fx.store.as_mut();
    put_all(s, &subjects);
    assert_eq!(s.purge(&req(Some("a.1"), None, None)).unwrap(), 3);
    assert_eq!(seqs_of(s, ">"), vec![2, 3, 4, 6, 8]);
    assert_eq!(s.state().num_subjects, 4);
    // By wildcard filter.
    assert_eq!(s.purge(&req(Some("b.*"), None, None)).unwrap(), 3);
    assert_eq!(seqs_of(s, ">"), vec![3, 6]);
    let st = s.state();
    assert_eq!(
        (st.msgs, st.first_seq, st.last_seq, st.num_deleted),
        (2, 3, 8, 4)
    );
    assert_eq!(s.deleted(), vec![4, 5, 7, 8]);

    // Up to a sequence (exclusive).
    let mut fx = new(StoreLimits::default());
    let s = fx.store.as_mut();
    put_all(s, &subjects);
    assert_eq!(s.purge(&req(None, Some(1), None)).unwrap(), 0);
    assert_eq!(s.purge(&req(None, Some(4), None)).unwrap(), 3);
    let st = s.state();
    assert_eq!(
        (st.msgs, st.first_seq, st.first_ts, st.last_seq),
        (5, 4, T0 + 3 * SEC, 8)
    );
    // Below the first sequence: nothing.
    assert_eq!(s.purge(&req(None, Some(3), None)).unwrap(), 0);
    // Filter and up to.
    assert_eq!(s.purge(&req(Some("a.*"), Some(7), None)).unwrap(), 1);
    assert_eq!(seqs_of(s, ">"), vec![4, 6, 7, 8]);
    // Up to beyond the end: everything goes and the next sequence is that one.
    assert_eq!(s.purge(&req(None, Some(20), None)).unwrap(), 4);
    let st = s.state();
    assert_eq!((st.msgs, st.first_seq, st.last_seq), (0, 20, 19));
    assert_eq!(put(s, "a", b"", T0).seq, 20);

    // Keep N (all subjects).
    let mut fx = new(StoreLimits::default());
    let s = fx.store.as_mut();
    put_all(s, &subjects);
    assert_eq!(s.purge(&req(None, None, Some(3))).unwrap(), 5);
    assert_eq!(seqs_of(s, ">"), vec![6, 7, 8]);
    assert_eq!(s.purge(&req(None, None, Some(3))).unwrap(), 0);
    assert_eq!(s.purge(&req(None, None, Some(10))).unwrap(), 0);

    // Filter and keep.
    let mut fx = new(StoreLimits::default());
    let s = fx.store.as_mut();
    put_all(s, &subjects);
    assert_eq!(s.purge(&req(Some("a.1"), None, Some(1))).unwrap(), 2);
    assert_eq!(seqs_of(s, "a.1"), vec![7]);
    assert_eq!(s.purge(&req(Some("a.>"), None, Some(1))).unwrap(), 1);
    assert_eq!(seqs_of(s, "a.>"), vec![7]);
    assert_eq!(seqs_of(s, ">"), vec![2, 4, 6, 7, 8]);
    assert_eq!(s.state().num_subjects, 4);
}

fn check_num_pending(new: &Factory) {
    let mut fx = new(StoreLimits::default());
    let s = fx.store.as_mut();
    put_all(s, &["a.1", "b.1", "a.2", "b.1", "a.1", "c", "a.1", "b.2"]);
    s.remove(3, false).unwrap();
    for (start, all, a1, a_star, b_gt) in [
        (0, 7, 3, 3, 3),
        (1, 7, 3, 3, 3),
        (2, 6, 2, 2, 3),
        (4, 5, 2, 2, 2),
        (6, 3, 1, 1, 1),
        (8, 1, 0, 0, 1),
        (9, 0, 0, 0, 0),
    ] {
        assert_eq!(s.num_pending(start, ">"), all, "> from {start}");
        assert_eq!(s.num_pending(start, ""), all, "'' from {start}");
        assert_eq!(s.num_pending(start, "a.1"), a1, "a.1 from {start}");
        assert_eq!(s.num_pending(start, "a.*"), a_star, "a.* from {start}");
        assert_eq!(s.num_pending(start, "b.>"), b_gt, "b.> from {start}");
    }
    assert_eq!(s.num_pending(0, "zzz"), 0);
}

fn check_subjects_state(new: &Factory) {
    let mut fx = new(StoreLimits::default());
    let s = fx.store.as_mut();
    put_all(s, &["a.1", "b.1", "a.2", "b.1", "a.1"]);
    let all = s.subjects_state(">");
    assert_eq!(
        all.into_iter().collect::<Vec<_>>(),
        vec![
            ("a.1".to_string(), 2),
            ("a.2".to_string(), 1),
            ("b.1".to_string(), 2)
        ]
    );
    let a = s.subjects_state("a.*");
    assert_eq!(a.len(), 2);
    assert_eq!(s.subjects_state("b.1").get("b.1"), Some(&2));
    assert!(s.subjects_state("zz").is_empty());
}

fn check_update_limits(new: &Factory) {
    let mut fx = new(StoreLimits::default());
    let s = fx.store.as_mut();
    put_all(s, &["a", "b", "a", "b", "a", "c"]);
    let removed = s
        .update_limits(limits(|l| l.max_msgs_per_subject = 1))
        .unwrap();
    assert_eq!(removed, vec![1, 2, 3]);
    assert_eq!(seqs_of(s, ">"), vec![4, 5, 6]);
    let removed = s
        .update_limits(limits(|l| {
            l.max_msgs_per_subject = 1;
            l.max_msgs = 2;
        }))
        .unwrap();
    assert_eq!(removed, vec![4]);
    assert_eq!(s.limits().max_msgs, 2);
    // Discard new: tighter stream limits refuse new messages but evict nothing.
    let removed = s
        .update_limits(limits(|l| {
            l.max_msgs = 1;
            l.discard = Discard::New;
        }))
        .unwrap();
    assert!(removed.is_empty());
    assert_eq!(s.state().msgs, 2);
    assert!(matches!(
        s.store_msg("d", None, b"", T0),
        Err(StoreError::MaxMsgs)
    ));
    // Tighter bytes with discard old.
    let one = (fx.size)(1, 0, 2);
    let removed = fx
        .store
        .update_limits(limits(|l| l.max_bytes = one as i64))
        .unwrap();
    assert_eq!(removed, vec![5]);
    assert_eq!(fx.store.state().msgs, 1);
    // max_age applies at the next expire.
    fx.store
        .update_limits(limits(|l| l.max_age = Duration::from_secs(1)))
        .unwrap();
    assert_eq!(fx.store.next_expiry(), Some(T0 + 6 * SEC));
    assert_eq!(expire(fx.store.as_mut(), T0 + 6 * SEC), vec![6]);
}

fn check_many_subjects_per_subject_limit(new: &Factory) {
    let mut fx = new(limits(|l| l.max_msgs_per_subject = 1));
    let s = fx.store.as_mut();
    let n = 2000u64;
    for round in 0..2u64 {
        for i in 0..n {
            let out = put(s, &format!("k.{i}"), b"v", T0 + round);
            let expected = if round == 0 { vec![] } else { vec![i + 1] };
            assert_eq!(out.removed, expected);
        }
    }
    let st = s.state();
    assert_eq!(
        (st.msgs, st.num_subjects, st.first_seq, st.last_seq),
        (n, n, n + 1, 2 * n)
    );
    assert_eq!(s.load_last("k.7").unwrap().unwrap().seq, n + 8);
    assert_eq!(s.num_pending(0, "k.*"), n);
    assert_eq!(s.num_pending(2 * n, "k.*"), 1);
}

macro_rules! suite {
    ($($check:ident),* $(,)?) => {
        mod memory_store {
            $(#[test] fn $check() { super::$check(&super::memory) })*
        }
        mod file_store {
            $(#[test] fn $check() { super::$check(&super::file) })*
        }
    };
}

suite!(
    check_sequences_from_one,
    check_load_variants,
    check_headers_round_trip,
    check_max_msgs,
    check_max_bytes,
    check_max_age,
    check_age_exempt,
    check_max_msgs_per_subject,
    check_discard_new_bytes_replacement,
    check_max_msg_size,
    check_remove,
    check_purge_all,
    check_purge_variants,
    check_num_pending,
    check_subjects_state,
    check_update_limits,
    check_many_subjects_per_subject_limit,
);

/// Behaviour only the file store has: reopening, recovery from damage, segments, erasure.
mod file_only {
    use std::fs;
    use std::path::{Path, PathBuf};

    use super::*;

    fn open(dir: &Path, segment_size: u64, limits: StoreLimits) -> FileStore {
        let cfg = FileStoreConfig {
            segment_size,
            ..FileStoreConfig::new(dir)
        };
        FileStore::open(cfg, limits).expect("open file store")
    }

    fn segments(dir: &Path) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "blk"))
            .collect();
        out.sort_by_key(|p| {
            p.file_stem()
                .and_then(|s| s.to_str())
                .and_then(|s| s.parse::<u32>().ok())
        });
        out
    }

    fn all_msgs(s: &dyn MsgStore) -> Vec<StoredMsg> {
        let mut out = Vec::new();
        let mut next = 0;
        while let Some(m) = s.load_next(">", next).unwrap() {
            next = m.seq + 1;
            out.push(m);
        }
        out
    }

    fn contains(haystack: &[u8], needle: &[u8]) -> bool {
        haystack.windows(needle.len()).any(|w| w == needle)
    }

    #[test]
    fn reopen_after_clean_close() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("msgs");
        let hdr = b"NATS/1.0\r\nX: y\r\n\r\n";
        let (state, msgs, deleted) = {
            let mut s = open(&dir, 300, StoreLimits::default());
            for i in 0..20u64 {
                let h = (i % 3 == 0).then_some(&hdr[..]);
                s.store_msg(
                    &format!("a.{}", i % 4),
                    h,
                    format!("p{i}").as_bytes(),
                    T0 + i,
                )
                .unwrap();
            }
            s.remove(7, false).unwrap();
            s.remove(8, true).unwrap();
            s.flush().unwrap();
            s.sync().unwrap();
            (s.state(), all_msgs(&s), s.deleted())
        };
        assert!(segments(&dir).len() > 1);
        let mut s = open(&dir, 300, StoreLimits::default());
        assert_eq!(s.state(), state);
        assert_eq!(all_msgs(&s), msgs);
        assert_eq!(s.deleted(), deleted);
        assert_eq!(s.subjects_state(">").len(), 4);
        assert_eq!(put(&mut s, "b", b"", T0).seq, 21);
    }

    #[test]
    fn drop_without_flush_writes_what_was_buffered() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("msgs");
        {
            let mut s = open(&dir, DEFAULT_SEGMENT, StoreLimits::default());
            put_all(&mut s, &["a", "b", "c"]);
        }
        {
            let mut s = open(&dir, DEFAULT_SEGMENT, StoreLimits::default());
            assert_eq!(s.state().msgs, 3);
            // Flushed, then dropped with nothing pending.
            put(&mut s, "d", b"x", T0);
            s.flush().unwrap();
        }
        let s = open(&dir, DEFAULT_SEGMENT, StoreLimits::default());
        let st = s.state();
        assert_eq!((st.msgs, st.first_seq, st.last_seq), (4, 1, 4));
        assert_eq!(&s.load(4).unwrap().unwrap().payload[..], b"x");
    }

    const DEFAULT_SEGMENT: u64 = file::DEFAULT_SEGMENT_SIZE;

    #[test]
    fn torn_tail_keeps_every_complete_record() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("msgs");
        {
            let mut s = open(&dir, DEFAULT_SEGMENT, StoreLimits::default());
            for i in 0..10u64 {
                put(&mut s, "t", format!("payload-{i}").as_bytes(), T0 + i);
            }
            s.flush().unwrap();
        }
        let seg = segments(&dir).pop().unwrap();
        let len = fs::metadata(&seg).unwrap().len();
        // Cut the last record in the middle.
        fs::OpenOptions::new()
            .write(true)
            .open(&seg)
            .unwrap()
            .set_len(len - 7)
            .unwrap();
        let mut s = open(&dir, DEFAULT_SEGMENT, StoreLimits::default());
        let st = s.state();
        assert_eq!((st.msgs, st.first_seq, st.last_seq), (9, 1, 9));
        assert_eq!(&s.load(9).unwrap().unwrap().payload[..], b"payload-8");
        // The tail was truncated away: new records follow the last good one.
        assert_eq!(put(&mut s, "t", b"again", T0 + 20).seq, 10);
        s.flush().unwrap();
        drop(s);
        let s = open(&dir, DEFAULT_SEGMENT, StoreLimits::default());
        assert_eq!(s.state().msgs, 10);
        assert_eq!(&s.load(10).unwrap().unwrap().payload[..], b"again");
    }

    #[test]
    fn damaged_records_are_skipped_without_panic() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("msgs");
        {
            let mut s = open(&dir, DEFAULT_SEGMENT, StoreLimits::default());
            for i in 0..10u64 {
                put(&mut s, "d", format!("payload-{i:02}").as_bytes(), T0 + i);
            }
            s.flush().unwrap();
        }
        let seg = segments(&dir).pop().unwrap();
        let mut bytes = fs::read(&seg).unwrap();
        // A flipped payload byte in message 5 and a broken length field in message 8.
        let p5 = bytes.windows(10).position(|w| w == b"payload-04").unwrap();
        bytes[p5 + 3] ^= 0x01;
        let p8 = bytes.windows(10).position(|w| w == b"payload-07").unwrap();
        let rec8 = p8 - (record_len_without_payload("d") - 4);
        bytes[rec8 + 1] ^= 0x40;
        fs::write(&seg, &bytes).unwrap();

        let mut s = open(&dir, DEFAULT_SEGMENT, StoreLimits::default());
        let seqs: Vec<u64> = all_msgs(&s).iter().map(|m| m.seq).collect();
        assert_eq!(seqs, vec![1, 2, 3, 4, 6, 7, 9, 10]);
        assert!(s.load(5).unwrap().is_none());
        assert_eq!(s.state().last_seq, 10);
        assert_eq!(put(&mut s, "d", b"next", T0).seq, 11);
        s.flush().unwrap();
        drop(s);
        // Still readable (the damage is skipped again).
        let s = open(&dir, DEFAULT_SEGMENT, StoreLimits::default());
        assert_eq!(s.state().msgs, 9);

        // Pure garbage files do not panic either.
        let junk = tmp.path().join("junk");
        fs::create_dir_all(&junk).unwrap();
        let noise: Vec<u8> = (0..5000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        fs::write(junk.join("1.blk"), &noise).unwrap();
        fs::write(junk.join("2.blk"), &noise[..100]).unwrap();
        let s = open(&junk, DEFAULT_SEGMENT, StoreLimits::default());
        assert_eq!(s.state().msgs, 0);
    }

    /// Bytes of a message record on `subject` before its payload (no headers).
    fn record_len_without_payload(subject: &str) -> usize {
        jsproto::stream::record::msg_len(subject.len(), None, 0).unwrap()
    }

    #[test]
    fn deletes_and_purges_survive_reopen() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("msgs");
        let (state, deleted, seqs) = {
            let mut s = open(&dir, 400, StoreLimits::default());
            put_all(&mut s, &["a", "b", "c", "a", "b", "c", "a", "b", "c", "a"]);
            s.remove(2, false).unwrap();
            s.remove(9, true).unwrap();
            let req = PurgeRequest {
                filter: Some("c".into()),
                ..Default::default()
            };
            assert_eq!(s.purge(&req).unwrap(), 2);
            let req = PurgeRequest {
                up_to_seq: Some(4),
                ..Default::default()
            };
            assert_eq!(s.purge(&req).unwrap(), 1);
            s.flush().unwrap();
            (s.state(), s.deleted(), seqs_of(&s, ">"))
        };
        assert_eq!(seqs, vec![4, 5, 7, 8, 10]);
        let s = open(&dir, 400, StoreLimits::default());
        assert_eq!(s.state(), state);
        assert_eq!(s.deleted(), deleted);
        assert_eq!(seqs_of(&s, ">"), seqs);
        assert_eq!(s.subjects_state(">").len(), 2);
    }

    /// Erasing the last message overwrites it on disk at once; a crash before the next flush
    /// must still not let its sequence be handed out again.
    #[test]
    fn erasing_the_last_message_then_crashing_keeps_its_sequence() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("msgs");
        {
            let mut s = open(&dir, DEFAULT_SEGMENT, StoreLimits::default());
            put_all(&mut s, &["a", "b", "c"]);
            s.flush().unwrap();
            assert!(s.remove(3, true).unwrap());
            // A crash: nothing after this point reaches the file (no flush, no drop).
            std::mem::forget(s);
        }
        let mut s = open(&dir, DEFAULT_SEGMENT, StoreLimits::default());
        assert_eq!(s.state().last_seq, 3, "the last sequence never goes back");
        assert_eq!(put(&mut s, "d", b"", T0).seq, 4);
    }

    #[test]
    fn last_seq_survives_purge_and_reopen() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("msgs");
        {
            let mut s = open(&dir, DEFAULT_SEGMENT, StoreLimits::default());
            put_all(&mut s, &["a", "b", "c", "d", "e"]);
            assert_eq!(s.purge(&PurgeRequest::default()).unwrap(), 5);
            s.flush().unwrap();
        }
        {
            let mut s = open(&dir, DEFAULT_SEGMENT, StoreLimits::default());
            let st = s.state();
            assert_eq!(
                (st.msgs, st.first_seq, st.last_seq, st.last_ts),
                (0, 6, 5, T0 + 4 * SEC)
            );
            assert_eq!(put(&mut s, "f", b"", T0).seq, 6);
            // Every message removed one by one: the last sequence stays too.
            assert!(s.remove(6, false).unwrap());
            s.flush().unwrap();
        }
        {
            let mut s = open(&dir, DEFAULT_SEGMENT, StoreLimits::default());
            let st = s.state();
            assert_eq!((st.msgs, st.first_seq, st.last_seq), (0, 7, 6));
            // Purge up to beyond the end moves the next sequence.
            let req = PurgeRequest {
                up_to_seq: Some(100),
                ..Default::default()
            };
            s.purge(&req).unwrap();
            s.flush().unwrap();
        }
        let mut s = open(&dir, DEFAULT_SEGMENT, StoreLimits::default());
        let st = s.state();
        assert_eq!((st.msgs, st.first_seq, st.last_seq), (0, 100, 99));
        assert_eq!(put(&mut s, "g", b"", T0).seq, 100);
        assert_eq!(segments(&dir).len(), 1);
    }

    #[test]
    fn segments_roll_and_emptied_ones_are_removed() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("msgs");
        let mut s = open(&dir, 256, StoreLimits::default());
        for i in 0..200u64 {
            put(&mut s, &format!("s.{}", i % 7), &[b'x'; 20], T0 + i);
        }
        s.flush().unwrap();
        let before = segments(&dir).len();
        assert!(before > 20, "{before} segments");
        let req = PurgeRequest {
            up_to_seq: Some(150),
            ..Default::default()
        };
        assert_eq!(s.purge(&req).unwrap(), 149);
        s.flush().unwrap();
        let after = segments(&dir).len();
        assert!(after < before / 3, "{after} segments left of {before}");
        let state = s.state();
        drop(s);
        let mut s = open(&dir, 256, StoreLimits::default());
        assert_eq!(s.state(), state);
        assert_eq!(seqs_of(&s, ">"), (150..=200).collect::<Vec<_>>());

        // Discard old keeps the segment count bounded.
        s.update_limits(limits(|l| l.max_msgs = 10)).unwrap();
        for i in 0..500u64 {
            put(&mut s, "busy", &[b'y'; 20], T0 + i);
            if i % 16 == 0 {
                s.flush().unwrap();
            }
        }
        s.flush().unwrap();
        assert!(
            segments(&dir).len() <= 6,
            "{} segments",
            segments(&dir).len()
        );
        let state = s.state();
        assert_eq!(state.msgs, 10);
        drop(s);
        let s = open(&dir, 256, StoreLimits::default());
        assert_eq!(s.state(), state);

        // Purging everything leaves one fresh segment.
        let mut s = s;
        s.purge(&PurgeRequest::default()).unwrap();
        s.flush().unwrap();
        assert_eq!(segments(&dir).len(), 1);
    }

    #[test]
    fn sparse_segments_are_compacted() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("msgs");
        let mut s = open(&dir, 2048, StoreLimits::default());
        for i in 0..60u64 {
            put(
                &mut s,
                if i % 10 == 0 { "keep" } else { "drop" },
                &[b'z'; 40],
                T0 + i,
            );
        }
        s.flush().unwrap();
        let first = segments(&dir)[0].clone();
        let before = fs::metadata(&first).unwrap().len();
        let req = PurgeRequest {
            filter: Some("drop".into()),
            ..Default::default()
        };
        assert_eq!(s.purge(&req).unwrap(), 54);
        s.flush().unwrap();
        let after = fs::metadata(&first).unwrap().len();
        assert!(after * 3 < before, "segment 1: {before} -> {after} bytes");
        let keep = seqs_of(&s, ">");
        assert_eq!(keep, vec![1, 11, 21, 31, 41, 51]);
        for &seq in &keep {
            assert_eq!(&s.load(seq).unwrap().unwrap().payload[..], &[b'z'; 40][..]);
        }
        let state = s.state();
        // Roll on so the tombstones' segment is no longer active, then reopen.
        for i in 0..60u64 {
            put(&mut s, "more", &[b'm'; 40], T0 + 100 + i);
        }
        s.flush().unwrap();
        drop(s);
        let s = open(&dir, 2048, StoreLimits::default());
        assert_eq!(seqs_of(&s, "keep"), keep);
        assert_eq!(seqs_of(&s, "drop"), Vec::<u64>::new());
        assert_eq!(s.state().num_deleted, state.num_deleted);
    }

    /// Loads in file order are served from bytes read ahead; what changes those bytes on disk
    /// (erasure, compaction) must not leave stale copies behind.
    #[test]
    fn read_ahead_follows_erasure_and_compaction() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("msgs");
        let mut s = open(&dir, 4096, StoreLimits::default());
        for i in 0..200u64 {
            let subject = if i % 4 == 0 { "keep" } else { "drop" };
            put(&mut s, subject, format!("payload-{i}").as_bytes(), T0 + i);
        }
        s.flush().unwrap();
        let payload = |s: &FileStore, seq: u64| s.load(seq).unwrap().map(|m| m.payload);
        // In order (read ahead), then backwards and scattered (single reads): all right.
        for seq in (1..=200).chain((1..=200).rev()).chain((1..=200).step_by(7)) {
            let want = format!("payload-{}", seq - 1);
            assert_eq!(&payload(&s, seq).unwrap()[..], want.as_bytes(), "seq {seq}");
        }
        // Messages appended after a read-ahead are found too, in the buffer and once written.
        put(&mut s, "keep", b"late-1", T0 + 500);
        assert_eq!(&payload(&s, 201).unwrap()[..], b"late-1");
        s.flush().unwrap();
        assert_eq!(&payload(&s, 201).unwrap()[..], b"late-1");
        // Warm the read-ahead over seq 10, then erase it: the load must not find it.
        for seq in 5..=12 {
            payload(&s, seq);
        }
        assert!(s.remove(10, true).unwrap());
        assert_eq!(payload(&s, 10), None);
        // The message loaded last is kept for a second load (a consumer looks a message up,
        // then delivers it), and is gone with the message.
        assert_eq!(&payload(&s, 11).unwrap()[..], b"payload-10");
        assert_eq!(&payload(&s, 11).unwrap()[..], b"payload-10");
        assert!(s.remove(11, false).unwrap());
        assert_eq!(payload(&s, 11), None);
        for seq in 9..=12 {
            payload(&s, seq);
        }
        // Compaction rewrites segments: every kept message still loads with its own payload,
        // even where the read-ahead held the segment's old layout.
        for seq in 1..=20 {
            payload(&s, seq);
        }
        let req = PurgeRequest {
            filter: Some("drop".into()),
            ..Default::default()
        };
        s.purge(&req).unwrap();
        s.flush().unwrap();
        // (Computed, not listed with loads: those would refresh the read-ahead.)
        let kept: Vec<u64> = (1..=200).step_by(4).chain([201]).collect();
        // From the second kept message on: its first in-order load lands inside the old
        // read-ahead's range.
        for &seq in kept.iter().skip(1).chain(kept.iter().rev()) {
            let want = if seq == 201 {
                "late-1".to_owned()
            } else {
                format!("payload-{}", seq - 1)
            };
            assert_eq!(&payload(&s, seq).unwrap()[..], want.as_bytes(), "seq {seq}");
        }
        assert_eq!(seqs_of(&s, ">"), kept);
    }

    #[test]
    fn erase_overwrites_the_bytes() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("msgs");
        let mut s = open(&dir, DEFAULT_SEGMENT, StoreLimits::default());
        put(&mut s, "a", b"keep-me", T0);
        s.store_msg(
            "secret.subject",
            Some(b"NATS/1.0\r\nTok: hdr-secret\r\n\r\n"),
            b"SECRET-PAYLOAD",
            T0,
        )
        .unwrap();
        put(&mut s, "a", b"BUFFERED-SECRET", T0);
        s.flush().unwrap();
        put(&mut s, "a", b"UNFLUSHED-SECRET", T0 + 4);
        // On disk already, and still in the write buffer.
        assert!(s.remove(2, true).unwrap());
        assert!(s.remove(4, true).unwrap());
        assert!(s.remove(3, false).unwrap());
        s.flush().unwrap();
        let bytes: Vec<u8> = segments(&dir)
            .iter()
            .flat_map(|p| fs::read(p).unwrap())
            .collect();
        assert!(!contains(&bytes, b"SECRET-PAYLOAD"));
        assert!(!contains(&bytes, b"hdr-secret"));
        assert!(!contains(&bytes, b"secret.subject"));
        assert!(!contains(&bytes, b"UNFLUSHED-SECRET"));
        assert!(
            contains(&bytes, b"BUFFERED-SECRET"),
            "no_erase keeps the bytes"
        );
        assert!(contains(&bytes, b"keep-me"));
        drop(s);
        let s = open(&dir, DEFAULT_SEGMENT, StoreLimits::default());
        assert_eq!(seqs_of(&s, ">"), vec![1]);
        let st = s.state();
        assert_eq!((st.last_seq, st.last_ts), (4, T0 + 4));
    }

    #[test]
    fn hundred_thousand_subjects_one_each() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("msgs");
        let n = 100_000u64;
        let mut s = open(
            &dir,
            DEFAULT_SEGMENT,
            limits(|l| l.max_msgs_per_subject = 1),
        );
        for round in 0..2u64 {
            for i in 0..n {
                let out = put(
                    &mut s,
                    &format!("dev.{i}.temp"),
                    b"21.5",
                    T0 + round * n + i,
                );
                assert_eq!(out.removed.len() as u64, round);
            }
            s.flush().unwrap();
        }
        let st = s.state();
        assert_eq!(
            (st.msgs, st.num_subjects, st.first_seq, st.last_seq),
            (n, n, n + 1, 2 * n)
        );
        assert_eq!(s.load_last("dev.99999.temp").unwrap().unwrap().seq, 2 * n);
        assert_eq!(s.num_pending(0, "dev.*.temp"), n);
        assert_eq!(s.num_pending(0, "dev.5.temp"), 1);
        drop(s);
        let s = open(
            &dir,
            DEFAULT_SEGMENT,
            limits(|l| l.max_msgs_per_subject = 1),
        );
        assert_eq!(s.state(), st);
        assert_eq!(
            s.subjects_state("dev.1234.>").get("dev.1234.temp"),
            Some(&1)
        );
    }

    /// A write error (full disk) fails the call, stores nothing, repeats until it clears, and
    /// loses nothing that was flushed.
    #[cfg(target_os = "linux")]
    #[test]
    fn write_errors_leave_the_store_consistent() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("msgs");
        let mut s = open(&dir, 200, StoreLimits::default());
        put(&mut s, "a", &[b'1'; 50], T0);
        put(&mut s, "a", &[b'2'; 50], T0);
        s.flush().unwrap();
        // The next segment is a full disk.
        std::os::unix::fs::symlink("/dev/full", dir.join("2.blk")).unwrap();
        put(&mut s, "a", &[b'3'; 100], T0); // rolls to the full segment, buffered
        let err = s.flush().unwrap_err();
        assert!(matches!(err, StoreError::Io(_)), "{err:?}");
        let before = s.state();
        assert_eq!(before.msgs, 3);
        // Buffered data stays readable; new stores fail and store nothing.
        assert_eq!(&s.load(3).unwrap().unwrap().payload[..], &[b'3'; 100][..]);
        for _ in 0..3 {
            assert!(matches!(
                s.store_msg("a", None, b"x", T0),
                Err(StoreError::Io(_))
            ));
            assert_eq!(s.state(), before);
        }
        assert!(s.flush().is_err());
        assert!(s.sync().is_err());
        drop(s);
        fs::remove_file(dir.join("2.blk")).unwrap();
        // What was flushed is intact.
        let s = open(&dir, 200, StoreLimits::default());
        assert_eq!(seqs_of(&s, ">"), vec![1, 2]);
    }

    #[test]
    fn delete_all_removes_the_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("msgs");
        let mut s = open(&dir, 128, StoreLimits::default());
        put_all(&mut s, &["a", "b", "c", "d", "e"]);
        s.flush().unwrap();
        assert!(dir.exists());
        let boxed: Box<dyn MsgStore> = Box::new(s);
        boxed.delete_all().unwrap();
        assert!(!dir.exists());
    }

    #[test]
    fn charged_size_matches_nats_server() {
        // fileStoreMsgSize: 22 + subj + msg + 8, +4 + hdr with headers; our record is 2 less.
        assert_eq!(file_msg_size(3, 0, 5), 38);
        assert_eq!(file_msg_size(3, 12, 5), 54);
        assert_eq!(memory_msg_size(3, 12, 5), 36);
        let rec = jsproto::stream::record::msg_len(3, Some(12), 5).unwrap() as u64;
        assert_eq!(rec + 2, file_msg_size(3, 12, 5));
    }
}

/// Random operations applied to a memory store and a file store (small segments, reopened
/// every so often) must leave them answering alike.
mod differential {
    use super::*;

    /// xorshift64*: deterministic, no dependency.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n.max(1)
        }
    }

    fn reopen(dir: &std::path::Path, limits: StoreLimits) -> FileStore {
        let cfg = FileStoreConfig {
            segment_size: 300,
            ..FileStoreConfig::new(dir)
        };
        FileStore::open(cfg, limits).expect("reopen")
    }

    fn compare(mem: &dyn MsgStore, file: &dyn MsgStore, step: usize) {
        let (a, b) = (mem.state(), file.state());
        assert_eq!(
            StoreState { bytes: 0, ..a },
            StoreState { bytes: 0, ..b },
            "step {step}"
        );
        let msgs = all(mem);
        assert_eq!(msgs, all(file), "step {step}");
        let charged: u64 = msgs
            .iter()
            .map(|m| {
                let h = m.headers.as_ref().map_or(0, |h| h.len());
                file_msg_size(m.subject.len(), h, m.payload.len())
            })
            .sum();
        assert_eq!(b.bytes, charged, "step {step}");
        assert_eq!(mem.deleted(), file.deleted(), "step {step}");
        assert_eq!(
            mem.subjects_state(">"),
            file.subjects_state(">"),
            "step {step}"
        );
        for start in [0, a.first_seq + 1, a.last_seq.saturating_sub(3)] {
            for filter in [">", "s.1", "s.*", "t.>"] {
                assert_eq!(
                    mem.num_pending(start, filter),
                    file.num_pending(start, filter),
                    "step {step}"
                );
            }
        }
        assert_eq!(
            mem.load_last("s.*").unwrap().map(|m| m.seq),
            file.load_last("s.*").unwrap().map(|m| m.seq)
        );
    }

    fn all(s: &dyn MsgStore) -> Vec<StoredMsg> {
        let mut out = Vec::new();
        let mut next = 0;
        while let Some(m) = s.load_next(">", next).unwrap() {
            next = m.seq + 1;
            out.push(m);
        }
        out
    }

    fn run(seed: u64, steps: usize) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("msgs");
        let mut rng = Rng(seed);
        let mut lim = StoreLimits::default();
        let mut mem = MemoryStore::new(lim.clone());
        let mut file = Some(reopen(&dir, lim.clone()));
        let subjects = ["s.1", "s.2", "s.3", "t.a.b", "t.c", "u"];
        let mut now = T0;
        for step in 0..steps {
            let f = file.as_mut().unwrap();
            now += rng.below(SEC);
            let op = rng.below(100);
            match op {
                0..=59 => {
                    let subj = subjects[rng.below(subjects.len() as u64) as usize];
                    let payload = vec![b'a' + (step % 26) as u8; rng.below(40) as usize];
                    let hdr = (rng.below(4) == 0).then_some(&b"NATS/1.0\r\nK: v\r\n\r\n"[..]);
                    let a = mem.store_msg(subj, hdr, &payload, now);
                    let b = f.store_msg(subj, hdr, &payload, now);
                    match (a, b) {
                        (Ok(a), Ok(b)) => assert_eq!(a, b, "step {step}"),
                        (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
                        (a, b) => panic!("step {step}: {a:?} vs {b:?}"),
                    }
                }
                60..=74 => {
                    let last = mem.state().last_seq;
                    let seq = rng.below(last + 2);
                    let erase = rng.below(2) == 0;
                    assert_eq!(
                        mem.remove(seq, erase).unwrap(),
                        f.remove(seq, erase).unwrap(),
                        "step {step}"
                    );
                }
                75..=79 => {
                    let last = mem.state().last_seq;
                    let req = PurgeRequest {
                        filter: match rng.below(4) {
                            0 => None,
                            1 => Some("s.*".into()),
                            2 => Some("t.>".into()),
                            _ => Some("u".into()),
                        },
                        up_to_seq: (rng.below(2) == 0).then(|| rng.below(last + 3)),
                        keep: (rng.below(3) == 0).then(|| rng.below(4)),
                    };
                    assert_eq!(
                        mem.purge(&req).unwrap(),
                        f.purge(&req).unwrap(),
                        "step {step}"
                    );
                }
                80..=84 => {
                    assert_eq!(
                        mem.expire(now).unwrap(),
                        f.expire(now).unwrap(),
                        "step {step}"
                    );
                }
                85..=89 => {
                    lim = StoreLimits {
                        max_msgs: [-1, 5, 20][rng.below(3) as usize],
                        max_age: Duration::from_secs([0, 5, 30][rng.below(3) as usize]),
                        max_msgs_per_subject: [-1, 1, 3][rng.below(3) as usize],
                        max_msg_size: [-1, 30][rng.below(2) as usize],
                        discard: if rng.below(3) == 0 {
                            Discard::New
                        } else {
                            Discard::Old
                        },
                        discard_new_per_subject: rng.below(2) == 0,
                        ..StoreLimits::default()
                    };
                    assert_eq!(
                        mem.update_limits(lim.clone()).unwrap(),
                        f.update_limits(lim.clone()).unwrap(),
                        "step {step}"
                    );
                }
                90..=96 => f.flush().unwrap(),
                _ => {
                    // Sometimes a clean sync, sometimes just the drop's final write.
                    if rng.below(2) == 0 {
                        f.sync().unwrap();
                    }
                    drop(file.take());
                    file = Some(reopen(&dir, lim.clone()));
                }
            }
            if std::env::var_os("STORE_DIFF_TRACE").is_some() {
                eprintln!("step {step} op {op}: {:?}", mem.state());
            }
            compare(&mem, file.as_ref().unwrap(), step);
            if std::env::var_os("STORE_DIFF_DEBUG").is_some() && step % 100 == 0 {
                let st = mem.state();
                let segs = file.as_ref().unwrap().segment_count();
                eprintln!("seed {seed:x} step {step}: {st:?} segments {segs}");
            }
        }
        drop(file.take());
        compare(&mem, &reopen(&dir, lim), steps);
    }

    #[test]
    fn memory_and_file_stores_agree() {
        // STORE_DIFF_SEEDS=n runs more seeds (a longer soak).
        let seeds = std::env::var("STORE_DIFF_SEEDS")
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(6);
        for seed in 1..=seeds {
            run(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15), 600);
        }
    }
}
