//! A stream replicated as a log of entries ([`Entry`], applied with [`Stream::apply_entry`]):
//! the contract a Raft group per stream stands on, as properties.
//!
//! A leader turns random commands (publishes, some with a `Nats-Msg-Id` or a `Nats-TTL`
//! on a stream with subject delete markers, consumer creates and deletes with random
//! filters and ack policies, pulls, acks of every kind, requesters leaving, time passing,
//! the wall clock stepping against the monotonic one, purges, message deletes) into
//! entries, checked against its own replica's state as the server checks requests; each
//! entry goes through its log bytes and back ([`Entry::encode`], [`Entry::decode`]) and is
//! applied by every replica.
//!
//! * Three replicas started at different real `Instant` bases produce the same output (the
//!   consumers' actions, in order, and the entries' answers) and end in the same state (the
//!   store's messages, each consumer's config, persisted state and counts, the rules' memory,
//!   the next deadline relative to the base).
//! * A replica made halfway from a snapshot's bytes ([`Stream::snapshot`] and the store's
//!   messages, [`snapshot::encode`]), restored into an empty store, answers the rest of the entries as the one that applied
//!   them all, and ends in the same state (waiting pull requests, pins, timers and
//!   ephemerals' inactivity clocks included).

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use jsproto::api::consumer::check_consumer_create;
use jsproto::api::stream::{RetentionPolicy, StreamConfig};
use jsproto::consumer::Action;
use jsproto::stream::store::{MemoryStore, MsgStore, PurgeRequest, StoreLimits};
use jsproto::stream::{
    snapshot, Context, Entry, EntryTime, Epoch, Op, Stream, StreamCore, StreamSnapshot,
};
use proptest::prelude::*;

const SEC: u64 = 1_000_000_000;
const MS: u64 = 1_000_000;
/// The wall clock at the stream's epoch, Unix ns.
const T0: u64 = 1_800_000_000 * SEC;

#[derive(Debug, Clone)]
enum Cmd {
    Publish {
        subject: u8,
        dt_ms: u16,
        /// A `Nats-Msg-Id` from a small set (duplicates within the window).
        msg_id: Option<u8>,
        /// A `Nats-TTL` in seconds.
        ttl_s: Option<u8>,
    },
    Create {
        name: u8,
        filter: Option<u8>,
        ack: u8,
        max_deliver: u8,
        ephemeral: bool,
    },
    Delete {
        name: u8,
    },
    Pull {
        name: u8,
        worker: u8,
        batch: u8,
        expires_ms: Option<u16>,
        no_wait: bool,
    },
    Ack {
        pick: usize,
        kind: u8,
        confirm: bool,
    },
    Leave {
        worker: u8,
    },
    Tick {
        dt_ms: u16,
    },
    /// The leader's wall clock steps by this much against its monotonic clock.
    Skew {
        ms: i16,
    },
    Purge {
        filter: Option<u8>,
        keep: u8,
    },
    DeleteMsg {
        seq: u8,
    },
}

const SUBJECTS: &[&str] = &["orders.eu", "orders.us", "orders.eu.vip"];
const FILTERS: &[&str] = &["orders.eu", "orders.us", "orders.eu.>", "orders.*"];
const ACKS: &[&str] = &[
    "+ACK",
    "-NAK",
    "+TERM",
    "+WPI",
    "",
    "-NAK {\"delay\": 500000000}",
];

fn cmd() -> impl Strategy<Value = Cmd> {
    prop_oneof![
        5 => (0u8..3, 0u16..400, prop::option::weighted(0.3, 0u8..4), prop::option::weighted(0.2, 1u8..4))
            .prop_map(|(subject, dt_ms, msg_id, ttl_s)| Cmd::Publish { subject, dt_ms, msg_id, ttl_s }),
        2 => (0u8..3, prop::option::of(0u8..4), 0u8..3, 0u8..4, prop::bool::weighted(0.2))
            .prop_map(|(name, filter, ack, max_deliver, ephemeral)| Cmd::Create { name, filter, ack, max_deliver, ephemeral }),
        1 => (0u8..4).prop_map(|name| Cmd::Delete { name }),
        4 => (0u8..4, 0u8..3, 1u8..4, prop::option::of(100u16..3000), prop::bool::weighted(0.2))
            .prop_map(|(name, worker, batch, expires_ms, no_wait)| Cmd::Pull { name, worker, batch, expires_ms, no_wait }),
        4 => (any::<usize>(), 0u8..6, prop::bool::weighted(0.3))
            .prop_map(|(pick, kind, confirm)| Cmd::Ack { pick, kind, confirm }),
        1 => (0u8..3).prop_map(|worker| Cmd::Leave { worker }),
        3 => (0u16..3000).prop_map(|dt_ms| Cmd::Tick { dt_ms }),
        1 => (-2000i16..2000).prop_map(|ms| Cmd::Skew { ms }),
        1 => (prop::option::of(0u8..4), 0u8..3).prop_map(|(filter, keep)| Cmd::Purge { filter, keep }),
        1 => (0u8..30).prop_map(|seq| Cmd::DeleteMsg { seq }),
    ]
}

fn stream_config(retention: RetentionPolicy) -> StreamConfig {
    StreamConfig {
        name: "ORDERS".into(),
        subjects: vec!["orders.>".into()],
        retention,
        duplicate_window: Duration::from_secs(10),
        allow_msg_ttl: true,
        subject_delete_marker_ttl: Duration::from_secs(1),
        ..Default::default()
    }
}

/// The reply-subject prefix of worker `w`'s pull requests.
fn worker(w: u8) -> String {
    format!("_INBOX.w{w}.")
}

/// A real instant: the clock reads in this suite, one per replica base.
fn real_now() -> Instant {
    #[allow(clippy::disallowed_methods)]
    Instant::now()
}

/// One replica: a stream over the memory store, applying entries on its own epoch.
struct Replica {
    stream: Stream,
    store: MemoryStore,
    epoch: Epoch,
    /// The time of the last entry applied.
    at: EntryTime,
    /// Every ack subject delivered, in order, with its consumer.
    delivered: Vec<(String, String)>,
    /// Every answer and action, in order.
    trace: Vec<String>,
}

impl Replica {
    fn new(retention: RetentionPolicy, base: Instant) -> Self {
        let mut store = MemoryStore::new(StoreLimits::default());
        let stream = Stream::new(stream_config(retention), &mut store, T0);
        Replica {
            stream,
            store,
            epoch: Epoch { base, unix_ns: T0 },
            at: EntryTime {
                mono_ns: 0,
                unix_ns: T0,
            },
            delivered: Vec::new(),
            trace: Vec::new(),
        }
    }

    /// A replica made from a snapshot's bytes ([`snapshot::encode`]: state and messages),
    /// into an empty store, at `base`.
    fn from_snapshot(bytes: &[u8], base: Instant) -> Self {
        let epoch = Epoch { base, unix_ns: T0 };
        let mut store = MemoryStore::new(StoreLimits::default());
        let (stream, at) = snapshot::restore(bytes, &mut store, &epoch).expect("restores");
        Replica {
            stream,
            store,
            epoch,
            at,
            delivered: Vec::new(),
            trace: Vec::new(),
        }
    }

    /// Applies `bytes`, one serialised entry.
    fn apply(&mut self, bytes: &[u8]) {
        let entry = Entry::decode(bytes).expect("an entry");
        self.at = entry.at;
        let trace = &mut self.trace;
        let delivered = &mut self.delivered;
        let carry = |cx: &Context<'_>, out: &mut Vec<(Arc<str>, Action)>| {
            for (name, action) in out.drain(..) {
                if let Action::Deliver { ack, .. } = &action {
                    let mut subject = String::new();
                    ack.write_v1("ORDERS", &name, &mut subject).unwrap();
                    assert!(
                        matches!(cx.store.load(ack.stream_seq), Ok(Some(_))),
                        "delivery of a message the stream no longer has"
                    );
                    delivered.push((name.to_string(), subject));
                }
                trace.push(format!("{name}: {action:?}"));
            }
        };
        let applied = self
            .stream
            .apply_entry(&mut self.store, &entry, &self.epoch, carry);
        self.trace
            .push(format!("{:?} -> {:?}", entry.op, applied.outcome));
        if applied.retention_removed {
            self.trace.push("retention removed messages".into());
        }
    }

    fn snapshot(&self) -> StreamSnapshot {
        self.stream.snapshot(self.at, &self.epoch)
    }

    /// Each consumer's config, persisted state (on the epoch's line) and counts.
    fn states(&self) -> Vec<String> {
        let now = self.epoch.instant(self.at);
        let unix = self.epoch.consumer_unix(self.at);
        self.stream
            .consumers()
            .iter()
            .map(|(name, c)| {
                let i = c.core.info();
                format!(
                    "{name}: {:?} {:?} {:?} pending {} ack pending {} redelivered {} waiting {}",
                    c.core.config(),
                    c.meta,
                    c.core.snapshot(now, unix),
                    i.num_pending,
                    i.num_ack_pending,
                    i.num_redelivered,
                    i.num_waiting,
                )
            })
            .collect()
    }

    /// The next deadline, relative to this replica's base.
    fn next_deadline(&self) -> Option<Duration> {
        let now = self.epoch.instant(self.at);
        self.stream
            .poll_timeout(&self.store, now, self.at.unix_ns)
            .map(|at| at - self.epoch.base)
    }
}

fn store_contents(store: &MemoryStore) -> Vec<String> {
    (0..=store.state().last_seq)
        .map(|s| format!("{:?}", store.load(s).unwrap()))
        .collect()
}

/// The leader: turns commands into entries, checked against its own replica's state (as the
/// server checks requests before it appends them).
struct Leader {
    /// Monotonic time since the epoch, ns.
    mono: u64,
    /// The wall clock's offset from `T0 + mono`, ns (steps with [`Cmd::Skew`]).
    skew: i64,
    pulls: u64,
    /// What the leader refused without an entry.
    refused: Vec<String>,
}

impl Leader {
    fn new() -> Self {
        Leader {
            mono: 0,
            skew: 0,
            pulls: 0,
            refused: Vec::new(),
        }
    }

    fn at(&self) -> EntryTime {
        EntryTime {
            mono_ns: self.mono,
            unix_ns: T0.saturating_add_signed(i64::try_from(self.mono).unwrap() + self.skew),
        }
    }

    /// The entry for `cmd` (none when the command needs none or the leader refuses it),
    /// serialised.
    fn entry(&mut self, cmd: &Cmd, own: &Replica) -> Option<Vec<u8>> {
        let op = match *cmd {
            Cmd::Publish {
                subject,
                dt_ms,
                msg_id,
                ttl_s,
            } => {
                self.mono += u64::from(dt_ms) * MS;
                let mut block = String::new();
                if let Some(id) = msg_id {
                    block.push_str(&format!("Nats-Msg-Id: id{id}\r\n"));
                }
                if let Some(ttl) = ttl_s {
                    block.push_str(&format!("Nats-TTL: {ttl}s\r\n"));
                }
                let headers =
                    (!block.is_empty()).then(|| Bytes::from(format!("NATS/1.0\r\n{block}\r\n")));
                Op::Publish {
                    subject: Bytes::from_static(SUBJECTS[subject as usize].as_bytes()),
                    headers,
                    payload: Bytes::from_static(b"order"),
                }
            }
            Cmd::Create {
                name,
                filter,
                ack,
                max_deliver,
                ephemeral,
            } => self.create(name, filter, ack, max_deliver, ephemeral, own)?,
            Cmd::Delete { name } => Op::DeleteConsumer {
                name: format!("c{name}"),
            },
            Cmd::Pull {
                name,
                worker: w,
                batch,
                expires_ms,
                no_wait,
            } => {
                self.pulls += 1;
                let mut body = serde_json::json!({ "batch": batch, "no_wait": no_wait });
                if let Some(ms) = expires_ms {
                    body["expires"] = (u64::from(ms) * MS).into();
                }
                Op::Pull {
                    consumer: format!("c{name}"),
                    reply: Bytes::from(format!("{}{}", worker(w), self.pulls)),
                    body: Bytes::from(body.to_string()),
                }
            }
            Cmd::Ack {
                pick,
                kind,
                confirm,
            } => {
                if own.delivered.is_empty() {
                    return None;
                }
                let (name, subject) = own.delivered[pick % own.delivered.len()].clone();
                Op::Ack {
                    consumer: name,
                    subject: Bytes::from(subject),
                    payload: Bytes::from_static(ACKS[kind as usize].as_bytes()),
                    reply: confirm.then(|| Bytes::from_static(b"_INBOX.confirm")),
                }
            }
            Cmd::Leave { worker: w } => Op::RequesterGone {
                prefix: Bytes::from(worker(w)),
            },
            Cmd::Tick { dt_ms } => {
                self.mono += u64::from(dt_ms) * MS;
                Op::Tick
            }
            Cmd::Skew { ms } => {
                self.skew += i64::from(ms) * MS as i64;
                return None;
            }
            Cmd::Purge { filter, keep } => Op::Purge(PurgeRequest {
                filter: filter.map(|f| FILTERS[f as usize].to_owned()),
                up_to_seq: None,
                keep: (keep > 0).then_some(u64::from(keep)),
            }),
            Cmd::DeleteMsg { seq } => Op::DeleteMsg {
                seq: u64::from(seq),
                erase: false,
            },
        };
        let entry = Entry { at: self.at(), op };
        let bytes = entry.encode().expect("encodes");
        let back = Entry::decode(&bytes).expect("decodes");
        assert_eq!(back, entry, "an entry survives its bytes");
        Some(bytes)
    }

    /// A consumer create as the server checks it: the checked config, or a refusal.
    fn create(
        &mut self,
        name: u8,
        filter: Option<u8>,
        ack: u8,
        max_deliver: u8,
        ephemeral: bool,
        own: &Replica,
    ) -> Option<Op> {
        let name = format!("c{name}");
        let ack_policy = ["explicit", "all", "none"][ack as usize];
        let max_deliver = [-1, 1, 2, 3][max_deliver as usize];
        let mut config = serde_json::json!({
            "ack_policy": ack_policy,
            "ack_wait": SEC,
            "max_deliver": max_deliver,
        });
        if let Some(f) = filter {
            config["filter_subject"] = FILTERS[f as usize].into();
        }
        let subject = if ephemeral {
            config["name"] = name.clone().into();
            config["inactive_threshold"] = (2 * SEC).into();
            format!("$JS.API.CONSUMER.CREATE.ORDERS.{name}")
        } else {
            config["durable_name"] = name.clone().into();
            format!("$JS.API.CONSUMER.DURABLE.CREATE.ORDERS.{name}")
        };
        let body = serde_json::json!({ "stream_name": "ORDERS", "config": config });
        let stream = own.stream.config().clone();
        let checked = check_consumer_create(&subject, body.to_string().as_bytes(), Some(&stream))
            .and_then(|create| {
                let set = own.stream.consumers();
                if set.contains(&name) {
                    set.check_update(&name, &create, &stream)
                } else {
                    set.check_new(&create, &stream, -1, || unreachable!("named"))
                        .map(|(_, config)| config)
                }
            });
        match checked {
            Ok(config) => Some(Op::CreateConsumer {
                name,
                config,
                created_unix_ns: self.at().unix_ns,
                pin_seed: 7,
                rate_burst: 0,
            }),
            Err(e) => {
                self.refused.push(format!("create {name}: {e}"));
                None
            }
        }
    }
}

fn retention() -> impl Strategy<Value = RetentionPolicy> {
    prop_oneof![
        Just(RetentionPolicy::Limits),
        Just(RetentionPolicy::Interest),
        Just(RetentionPolicy::WorkQueue),
    ]
}

/// Asserts two replicas are in the same state.
fn same_state(a: &Replica, b: &Replica, when: &str) -> Result<(), TestCaseError> {
    prop_assert_eq!(a.states(), b.states(), "{}", when);
    prop_assert_eq!(a.stream.core(), b.stream.core());
    prop_assert_eq!(store_contents(&a.store), store_contents(&b.store));
    prop_assert_eq!(a.store.state(), b.store.state());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(150))]

    /// Three replicas at different bases, the same entries: the same output in the same
    /// order, the same state, the same next deadline.
    #[test]
    fn replicas_at_different_instants_agree(
        retention in retention(),
        cmds in prop::collection::vec(cmd(), 0..80),
    ) {
        let now = real_now();
        let bases = [
            now,
            now + Duration::from_secs(365 * 86_400),
            real_now() + Duration::from_nanos(7_000_123),
        ];
        let mut replicas: Vec<Replica> =
            bases.iter().map(|b| Replica::new(retention, *b)).collect();
        let mut leader = Leader::new();
        for c in &cmds {
            let Some(bytes) = leader.entry(c, &replicas[0]) else { continue };
            for r in &mut replicas {
                r.apply(&bytes);
            }
        }
        let (a, rest) = replicas.split_first().unwrap();
        for b in rest {
            prop_assert_eq!(&a.trace, &b.trace);
            same_state(a, b, "at the end")?;
            prop_assert_eq!(a.next_deadline(), b.next_deadline());
            prop_assert_eq!(a.snapshot(), b.snapshot());
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(150))]

    /// A replica made from a snapshot taken halfway answers the rest of the entries as the
    /// one that applied them all: waiting pull requests, ephemerals' inactivity clocks and
    /// every timer are in the snapshot.
    #[test]
    fn a_replica_from_a_snapshot_halfway_agrees(
        retention in retention(),
        cmds in prop::collection::vec(cmd(), 0..80),
        split in 0usize..80,
    ) {
        let split = split.min(cmds.len());
        let mut a = Replica::new(retention, real_now());
        // Applies the first half, then gives its store and snapshot away.
        let mut before = Replica::new(retention, real_now() + Duration::from_secs(3600));
        let mut leader = Leader::new();
        for c in &cmds[..split] {
            let Some(bytes) = leader.entry(c, &a) else { continue };
            a.apply(&bytes);
            before.apply(&bytes);
        }
        let snapshot = before.snapshot();
        prop_assert_eq!(&snapshot, &a.snapshot(), "replicas snapshot alike");
        let bytes = snapshot::encode(&snapshot, &before.store).unwrap();
        let mut b = Replica::from_snapshot(&bytes, real_now() + Duration::from_secs(7 * 86_400));
        prop_assert_eq!(before.store.deleted(), b.store.deleted(), "interior deletes kept");
        b.delivered = before.delivered;
        prop_assert_eq!(a.stream.core(), b.stream.core(), "the rules' memory restored");
        same_state(&a, &b, "after the restore")?;
        a.trace.clear();
        for (i, c) in cmds[split..].iter().enumerate() {
            let Some(bytes) = leader.entry(c, &a) else { continue };
            let (n, m) = (a.trace.len(), b.trace.len());
            a.apply(&bytes);
            b.apply(&bytes);
            prop_assert_eq!(&a.trace[n..], &b.trace[m..], "after command {} of the rest, {:?}", i, c);
        }
        same_state(&a, &b, "at the end")?;
        prop_assert_eq!(a.next_deadline(), b.next_deadline());
        prop_assert_eq!(a.snapshot(), b.snapshot());
    }
}

/// The rules' memory survives a snapshot that the store alone would not give back: the
/// `Nats-Msg-Id` of a message deleted since is still a duplicate within the window.
#[test]
fn a_snapshot_keeps_the_msg_id_of_a_deleted_message() {
    let mut store = MemoryStore::new(StoreLimits::default());
    let mut r = Replica {
        stream: Stream::new(stream_config(RetentionPolicy::Limits), &mut store, T0),
        store,
        epoch: Epoch {
            base: real_now(),
            unix_ns: T0,
        },
        at: EntryTime {
            mono_ns: 0,
            unix_ns: T0,
        },
        delivered: Vec::new(),
        trace: Vec::new(),
    };
    let at = |ms: u64| EntryTime {
        mono_ns: ms * MS,
        unix_ns: T0 + ms * MS,
    };
    let publish = Entry {
        at: at(1),
        op: Op::Publish {
            subject: Bytes::from_static(b"orders.eu"),
            headers: Some(Bytes::from_static(
                b"NATS/1.0\r\nNats-Msg-Id: order-1\r\n\r\n",
            )),
            payload: Bytes::from_static(b"order"),
        },
    };
    r.apply(&publish.encode().unwrap());
    let delete = Entry {
        at: at(2),
        op: Op::DeleteMsg {
            seq: 1,
            erase: false,
        },
    };
    r.apply(&delete.encode().unwrap());
    let snapshot = r.snapshot();
    // Rebuilt from the store, the id is gone; in the snapshot, it is kept.
    let rebuilt = StreamCore::new(
        stream_config(RetentionPolicy::Limits),
        &mut r.store,
        T0 + 2 * MS,
    );
    assert!(rebuilt.snapshot().dedup_ids.is_empty());
    assert_eq!(snapshot.core.dedup_ids, vec![("order-1".to_owned(), 1)]);
    let bytes = snapshot::encode(&snapshot, &r.store).unwrap();
    let mut b = Replica::from_snapshot(&bytes, real_now());
    let again = Entry {
        at: at(3),
        ..publish
    };
    b.apply(&again.encode().unwrap());
    let last = b.trace.last().unwrap();
    assert!(last.contains("duplicate: true"), "{last}");
}

/// A config entry giving the stream other replicas rewrites each consumer's own
/// `num_replicas` as nats-server does (an R3 consumer of a stream scaled to R1 is R1, and
/// stays R1 when the stream is R3 again; 0 stays 0), on every replica alike and through a
/// snapshot.
#[test]
fn consumers_follow_the_stream_replicas_in_the_log() {
    let mut r = Replica::new(RetentionPolicy::Limits, real_now());
    let at = |ms: u64| EntryTime {
        mono_ns: ms * MS,
        unix_ns: T0 + ms * MS,
    };
    let r3 = StreamConfig {
        num_replicas: 3,
        ..r.stream.config().clone()
    };
    let mut ms = 0;
    let mut apply = |r: &mut Replica, op: Op| {
        ms += 1;
        r.apply(&Entry { at: at(ms), op }.encode().unwrap());
    };
    apply(&mut r, Op::UpdateStream(r3.clone()));
    for (name, replicas) in [("c0", 0), ("c1", 1), ("c3", 3)] {
        let body = format!(
            r#"{{"stream_name":"ORDERS","config":{{"durable_name":"{name}","ack_policy":"explicit","num_replicas":{replicas}}}}}"#
        );
        let subject = format!("$JS.API.CONSUMER.CREATE.ORDERS.{name}");
        let create = jsproto::api::consumer::check_consumer_create_in(
            &subject,
            body.as_bytes(),
            Some(&r3),
            true,
        )
        .unwrap();
        let (_, config) = r
            .stream
            .consumers()
            .check_new(&create, &r3, -1, || unreachable!("named"))
            .unwrap();
        apply(
            &mut r,
            Op::CreateConsumer {
                name: name.into(),
                config,
                created_unix_ns: T0,
                pin_seed: 7,
                rate_burst: 0,
            },
        );
    }
    let replicas = |r: &Replica| -> Vec<(String, i64)> {
        r.stream
            .consumers()
            .iter()
            .map(|(n, c)| (n.to_string(), c.meta.config.num_replicas))
            .collect()
    };
    let want = |a, b, c| vec![("c0".into(), a), ("c1".into(), b), ("c3".into(), c)];
    assert_eq!(replicas(&r), want(0, 1, 3));
    let r1 = StreamConfig {
        num_replicas: 1,
        ..r3.clone()
    };
    apply(&mut r, Op::UpdateStream(r1));
    assert_eq!(replicas(&r), want(0, 1, 1));
    apply(&mut r, Op::UpdateStream(r3));
    assert_eq!(replicas(&r), want(0, 1, 1));
    let bytes = snapshot::encode(&r.snapshot(), &r.store).unwrap();
    let b = Replica::from_snapshot(&bytes, real_now());
    assert_eq!(replicas(&b), want(0, 1, 1));
}
