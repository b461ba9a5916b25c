//! A replicated stream's log entry in bytes ([`Entry::encode`], [`Entry::decode`]): every
//! [`Op`] variant, with random fields (every optional field of the stream and consumer configs
//! set or not), decodes to itself; so does every stream and consumer `config` the API
//! fixtures hold (the server's own echoes); payloads are MessagePack `bin`, not arrays of
//! numbers; the JSON entries of earlier builds still decode; damaged bytes are an error, not a
//! panic. Entries appended together ([`EntryBatch`]) come back all, in order; one alone is the
//! same bytes as [`Entry::encode`]; a batch cut short is an error, and a build that reads only
//! single entries refuses a batch rather than applying part of it.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;
use jsproto::api::consumer::{
    AckPolicy, ConsumerConfig as ApiConsumerConfig, DeliverPolicy, PriorityPolicy, ReplayPolicy,
    ZonedTimestamp,
};
use jsproto::api::stream::{
    Compression, ConsumerLimits, DiscardPolicy, PersistMode, Placement, RePublish, RetentionPolicy,
    StorageType, StreamConfig, SubjectTransform,
};
use jsproto::api::time::Timestamp;
use jsproto::stream::store::PurgeRequest;
use jsproto::stream::{Entry, EntryBatch, EntryCodecError, EntryTime, Op};
use proptest::prelude::*;
use serde_json::{json, Value};

const SEC: u64 = 1_000_000_000;

fn bytes(max: usize) -> impl Strategy<Value = Bytes> {
    prop::collection::vec(any::<u8>(), 0..max).prop_map(Bytes::from)
}

/// Any text, including what is not a subject (the codec does not care).
fn text() -> impl Strategy<Value = String> {
    "\\PC{0,16}"
}

/// A duration the API's integer nanoseconds hold (up to `i64::MAX` ns).
fn nanos() -> impl Strategy<Value = Duration> {
    prop_oneof![
        Just(Duration::ZERO),
        (1..=i64::MAX as u64).prop_map(Duration::from_nanos),
    ]
}

/// A UTC timestamp between 1970 and 2100.
fn timestamp() -> impl Strategy<Value = ZonedTimestamp> {
    (0..4_102_444_800 * SEC).prop_map(|ns| ZonedTimestamp::utc(Timestamp::from_unix_nanos(ns)))
}

fn metadata() -> impl Strategy<Value = BTreeMap<String, String>> {
    prop::collection::btree_map(text(), text(), 0..3)
}

/// Raw JSON as `mirror` and `sources` keep it: objects with strings, integers of both signs,
/// floats, nulls and arrays.
fn json_value() -> impl Strategy<Value = Value> {
    (text(), any::<u64>(), any::<i64>(), any::<bool>()).prop_map(|(name, seq, delta, flag)| {
        json!({
            "name": name,
            "opt_start_seq": seq,
            "delta": delta,
            "ratio": 0.25,
            "external": null,
            "filters": [flag, "orders.>", {"nested": [1, -2, 3.5]}],
        })
    })
}

fn stream_config() -> impl Strategy<Value = StreamConfig> {
    let names = (
        text(),
        text(),
        prop::collection::vec(text(), 0..3),
        metadata(),
    );
    let limits = (
        any::<i64>(),
        any::<i64>(),
        any::<i64>(),
        nanos(),
        any::<i64>(),
        any::<i32>(),
        any::<i64>(),
        nanos(),
        nanos(),
        any::<u64>(),
        (nanos(), any::<i64>()),
    );
    let policies = (
        prop_oneof![
            Just(RetentionPolicy::Limits),
            Just(RetentionPolicy::Interest),
            Just(RetentionPolicy::WorkQueue)
        ],
        prop_oneof![Just(DiscardPolicy::Old), Just(DiscardPolicy::New)],
        prop_oneof![Just(StorageType::File), Just(StorageType::Memory)],
        prop_oneof![Just(Compression::None), Just(Compression::S2)],
        prop_oneof![Just(PersistMode::Default), Just(PersistMode::Async)],
    );
    let flags = prop::collection::vec(any::<bool>(), 15);
    let extras = (
        prop::option::of((text(), prop::collection::vec(text(), 0..2), text())),
        prop::option::of(json_value()),
        prop::collection::vec(json_value(), 0..2),
        prop::option::of((text(), text())),
        prop::option::of((text(), text(), any::<bool>())),
    );
    (names, limits, policies, flags, extras).prop_map(|(names, limits, policies, f, extras)| {
        let (name, description, subjects, metadata) = names;
        let (
            max_consumers,
            max_msgs,
            max_bytes,
            max_age,
            max_msgs_per_subject,
            max_msg_size,
            num_replicas,
            duplicate_window,
            subject_delete_marker_ttl,
            first_seq,
            (inactive_threshold, max_ack_pending),
        ) = limits;
        let (retention, discard, storage, compression, persist_mode) = policies;
        let (placement, mirror, sources, transform, republish) = extras;
        StreamConfig {
            name,
            description,
            subjects,
            retention,
            max_consumers,
            max_msgs,
            max_bytes,
            max_age,
            max_msgs_per_subject,
            max_msg_size,
            discard,
            storage,
            num_replicas,
            no_ack: f[0],
            duplicate_window,
            placement: placement.map(|(cluster, tags, preferred)| Placement {
                cluster,
                tags,
                preferred,
            }),
            mirror,
            sources,
            compression,
            first_seq,
            subject_transform: transform.map(|(src, dest)| SubjectTransform { src, dest }),
            republish: republish.map(|(src, dest, headers_only)| RePublish {
                src,
                dest,
                headers_only,
            }),
            allow_direct: f[1],
            mirror_direct: f[2],
            discard_new_per_subject: f[3],
            sealed: f[4],
            deny_delete: f[5],
            deny_purge: f[6],
            allow_rollup_hdrs: f[7],
            consumer_limits: ConsumerLimits {
                inactive_threshold,
                max_ack_pending,
            },
            allow_msg_ttl: f[8],
            subject_delete_marker_ttl,
            allow_msg_counter: f[9],
            allow_atomic: f[10],
            allow_msg_schedules: f[11],
            persist_mode,
            allow_batched: f[12],
            metadata,
        }
    })
}

fn consumer_config() -> impl Strategy<Value = ApiConsumerConfig> {
    let names = (text(), text(), text(), text(), text(), text(), metadata());
    let policies = (
        prop_oneof![
            Just(DeliverPolicy::All),
            Just(DeliverPolicy::Last),
            Just(DeliverPolicy::New),
            Just(DeliverPolicy::ByStartSequence),
            Just(DeliverPolicy::ByStartTime),
            Just(DeliverPolicy::LastPerSubject)
        ],
        prop_oneof![
            Just(AckPolicy::None),
            Just(AckPolicy::All),
            Just(AckPolicy::Explicit),
            Just(AckPolicy::FlowControl)
        ],
        prop_oneof![Just(ReplayPolicy::Instant), Just(ReplayPolicy::Original)],
        prop_oneof![
            Just(PriorityPolicy::None),
            Just(PriorityPolicy::Overflow),
            Just(PriorityPolicy::PinnedClient),
            Just(PriorityPolicy::Prioritized)
        ],
    );
    let numbers = (
        any::<u64>(),
        any::<i64>(),
        any::<u64>(),
        any::<i64>(),
        any::<i64>(),
        any::<i64>(),
        any::<i64>(),
        any::<i64>(),
    );
    let durations = (
        nanos(),
        prop::collection::vec(nanos(), 0..3),
        nanos(),
        nanos(),
        nanos(),
        nanos(),
    );
    let lists = (
        prop::collection::vec(text(), 0..3),
        prop::collection::vec(text(), 0..3),
        prop::option::of(timestamp()),
        prop::option::of(timestamp()),
        prop::collection::vec(any::<bool>(), 6),
    );
    (names, policies, numbers, durations, lists).prop_map(
        |(names, policies, numbers, durations, lists)| {
            let (
                durable_name,
                name,
                description,
                filter_subject,
                deliver_subject,
                sample_freq,
                metadata,
            ) = names;
            let (deliver_policy, ack_policy, replay_policy, priority_policy) = policies;
            let (
                opt_start_seq,
                max_deliver,
                rate_limit_bps,
                max_waiting,
                max_ack_pending,
                max_batch,
                max_bytes,
                num_replicas,
            ) = numbers;
            let (
                ack_wait,
                backoff,
                max_expires,
                idle_heartbeat,
                inactive_threshold,
                priority_timeout,
            ) = durations;
            let (filter_subjects, priority_groups, opt_start_time, pause_until, f) = lists;
            ApiConsumerConfig {
                durable_name,
                name,
                description,
                deliver_policy,
                opt_start_seq,
                opt_start_time,
                ack_policy,
                ack_wait,
                max_deliver,
                backoff,
                filter_subject,
                filter_subjects,
                replay_policy,
                rate_limit_bps,
                sample_freq,
                max_waiting,
                max_ack_pending,
                flow_control: f[0],
                headers_only: f[1],
                max_batch,
                max_expires,
                max_bytes,
                deliver_group: deliver_subject.chars().rev().collect(),
                deliver_subject,
                idle_heartbeat,
                inactive_threshold,
                num_replicas,
                mem_storage: f[2],
                direct: f[3],
                sourcing: f[4],
                metadata,
                pause_until,
                priority_groups,
                priority_policy,
                priority_timeout,
            }
        },
    )
}

/// Every [`Op`] variant, with random fields.
fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (bytes(40), prop::option::of(bytes(200)), bytes(300)).prop_map(
            |(subject, headers, payload)| Op::Publish {
                subject,
                headers,
                payload
            }
        ),
        (any::<u64>(), any::<bool>()).prop_map(|(seq, erase)| Op::DeleteMsg { seq, erase }),
        (
            prop::option::of(text()),
            prop::option::of(any::<u64>()),
            prop::option::of(any::<u64>())
        )
            .prop_map(|(filter, up_to_seq, keep)| Op::Purge(PurgeRequest {
                filter,
                up_to_seq,
                keep
            })),
        stream_config().prop_map(Op::UpdateStream),
        (
            text(),
            consumer_config(),
            any::<u64>(),
            any::<u64>(),
            any::<u64>()
        )
            .prop_map(|(name, config, created_unix_ns, pin_seed, rate_burst)| {
                Op::CreateConsumer {
                    name,
                    config,
                    created_unix_ns,
                    pin_seed,
                    rate_burst,
                }
            }),
        text().prop_map(|name| Op::DeleteConsumer { name }),
        (text(), prop::option::of(any::<u64>())).prop_map(|(name, until_unix_ns)| {
            Op::PauseConsumer {
                name,
                until_unix_ns,
            }
        }),
        (text(), any::<u64>()).prop_map(|(name, seq)| Op::ResetConsumer { name, seq }),
        (text(), text()).prop_map(|(name, group)| Op::UnpinConsumer { name, group }),
        (text(), bytes(60), bytes(100)).prop_map(|(consumer, reply, body)| Op::Pull {
            consumer,
            reply,
            body
        }),
        (text(), bytes(80), bytes(60), prop::option::of(bytes(40))).prop_map(
            |(consumer, subject, payload, reply)| Op::Ack {
                consumer,
                subject,
                payload,
                reply
            }
        ),
        (text(), bytes(60)).prop_map(|(consumer, subject)| Op::FlowControl { consumer, subject }),
        (text(), any::<bool>())
            .prop_map(|(consumer, bound)| Op::DeliveryInterest { consumer, bound }),
        bytes(40).prop_map(|prefix| Op::RequesterGone { prefix }),
        Just(Op::Tick),
    ]
}

fn entry() -> impl Strategy<Value = Entry> {
    (any::<u64>(), any::<u64>(), op()).prop_map(|(mono_ns, unix_ns, op)| Entry {
        at: EntryTime { mono_ns, unix_ns },
        op,
    })
}

/// The variant's name, so that a run can say it met every one.
fn variant(op: &Op) -> &'static str {
    match op {
        Op::Publish { .. } => "Publish",
        Op::DeleteMsg { .. } => "DeleteMsg",
        Op::Purge(_) => "Purge",
        Op::UpdateStream(_) => "UpdateStream",
        Op::CreateConsumer { .. } => "CreateConsumer",
        Op::DeleteConsumer { .. } => "DeleteConsumer",
        Op::PauseConsumer { .. } => "PauseConsumer",
        Op::ResetConsumer { .. } => "ResetConsumer",
        Op::UnpinConsumer { .. } => "UnpinConsumer",
        Op::Pull { .. } => "Pull",
        Op::Ack { .. } => "Ack",
        Op::FlowControl { .. } => "FlowControl",
        Op::DeliveryInterest { .. } => "DeliveryInterest",
        Op::RequesterGone { .. } => "RequesterGone",
        Op::Tick => "Tick",
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Every entry decodes to itself, and so does its JSON (an earlier build's log).
    #[test]
    fn every_entry_decodes_to_itself(entry in entry()) {
        let bytes = entry.encode().expect("encodes");
        prop_assert_eq!(bytes.first(), Some(&0x82), "a map of two fields: at, op");
        let back = Entry::decode(&bytes).expect("decodes");
        prop_assert_eq!(&back, &entry, "{}", variant(&entry.op));
        let json = serde_json::to_vec(&entry).expect("JSON");
        prop_assert_eq!(Entry::decode(&json).expect("JSON decodes"), entry);
    }

    /// Cut short or with a byte changed, an entry is an error or another entry, never a panic.
    #[test]
    fn damaged_bytes_do_not_panic(entry in entry(), cut in any::<prop::sample::Index>(),
                                  flip in any::<prop::sample::Index>(), bit in 0u8..8) {
        let bytes = entry.encode().expect("encodes");
        let cut = cut.index(bytes.len());
        prop_assert!(Entry::decode(&bytes[..cut]).is_err(), "cut at {}", cut);
        let mut flipped = bytes.clone();
        let at = flip.index(flipped.len());
        flipped[at] ^= 1 << bit;
        let _ = Entry::decode(&flipped);
    }

    /// A batch decodes to its entries in order, each at the position `push` gave it; a batch
    /// of one is exactly that entry's own bytes.
    #[test]
    fn a_batch_decodes_to_its_entries(entries in prop::collection::vec(entry(), 1..12)) {
        let mut batch = EntryBatch::new();
        for (i, e) in entries.iter().enumerate() {
            prop_assert_eq!(batch.push(e).expect("encodes") as usize, i);
        }
        prop_assert_eq!(batch.len(), entries.len());
        let bytes = batch.finish().expect("not empty");
        prop_assert!(batch.is_empty() && batch.finish().is_none(), "finish empties it");
        if entries.len() == 1 {
            prop_assert_eq!(&bytes, &entries[0].encode().expect("encodes"));
        } else {
            prop_assert_eq!(bytes[0], 0xdd);
            // What a build before batches would do with it: refuse, not apply the first.
            prop_assert!(Entry::decode(&bytes).is_err());
        }
        prop_assert_eq!(Entry::decode_all(&bytes).expect("decodes"), entries);
    }

    /// A batch cut short is an error (never fewer entries, never a panic).
    #[test]
    fn a_batch_cut_short_is_an_error(entries in prop::collection::vec(entry(), 2..6),
                                     cut in any::<prop::sample::Index>()) {
        let mut batch = EntryBatch::new();
        for e in &entries {
            batch.push(e).expect("encodes");
        }
        let bytes = batch.finish().expect("not empty");
        let cut = cut.index(bytes.len());
        prop_assert!(Entry::decode_all(&bytes[..cut]).is_err(), "cut at {}", cut);
    }
}

/// Single entries, an earlier build's JSON among them, read through `decode_all` too.
#[test]
fn decode_all_reads_single_entries() {
    let entry = Entry {
        at: EntryTime {
            mono_ns: 7,
            unix_ns: 1_800_000_000 * SEC,
        },
        op: Op::Publish {
            subject: Bytes::from_static(b"orders.1"),
            headers: None,
            payload: Bytes::from_static(b"one"),
        },
    };
    let bytes = entry.encode().expect("encodes");
    assert_eq!(Entry::decode_all(&bytes).expect("map"), vec![entry.clone()]);
    let json = serde_json::to_vec(&entry).expect("JSON");
    assert_eq!(Entry::decode_all(&json).expect("JSON"), vec![entry]);
    assert!(Entry::decode_all(b"").is_err());
    assert!(EntryBatch::new().finish().is_none());
}

/// The strategy above reaches every variant (so the property covers them all).
#[test]
fn the_strategy_makes_every_variant() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let strategy = op();
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..2000 {
        seen.insert(variant(&strategy.new_tree(&mut runner).unwrap().current()));
    }
    assert_eq!(seen.len(), 15, "variants made: {seen:?}");
}

fn fixtures(sub: &str) -> Vec<(String, Value)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(sub);
    let mut out = Vec::new();
    for f in std::fs::read_dir(&dir).expect("fixtures dir") {
        let path = f.expect("dir entry").path();
        if path.extension().is_some_and(|e| e == "json") {
            let text = std::fs::read_to_string(&path).expect("fixture");
            if let Ok(v) = serde_json::from_str::<Value>(&text) {
                let name = path.file_name().unwrap().to_string_lossy().into_owned();
                out.push((name, v));
            }
        }
    }
    out
}

fn round_trip(entry: &Entry) {
    let bytes = entry.encode().expect("encodes");
    assert_eq!(&Entry::decode(&bytes).expect("decodes"), entry);
}

/// Every stream and consumer `config` in the API fixtures (nats-server's own answers, with
/// the defaults it fills) goes through an entry unchanged.
#[test]
fn fixture_configs_decode_to_themselves() {
    let at = EntryTime {
        mono_ns: 5 * SEC,
        unix_ns: 1_800_000_000 * SEC,
    };
    let (mut streams, mut consumers) = (0, 0);
    for (name, v) in fixtures("") {
        if let Ok(config) = serde_json::from_value::<StreamConfig>(v["config"].clone()) {
            round_trip(&Entry {
                at,
                op: Op::UpdateStream(config),
            });
            streams += 1;
        } else {
            assert!(
                v["config"].is_null(),
                "{name}: a config that does not parse"
            );
        }
    }
    for (name, v) in fixtures("consumer") {
        if let Ok(config) = serde_json::from_value::<ApiConsumerConfig>(v["config"].clone()) {
            round_trip(&Entry {
                at,
                op: Op::CreateConsumer {
                    name: name.clone(),
                    config,
                    created_unix_ns: at.unix_ns,
                    pin_seed: 7,
                    rate_burst: 0,
                },
            });
            consumers += 1;
        }
    }
    assert!(
        streams >= 5 && consumers >= 20,
        "{streams} stream and {consumers} consumer configs"
    );
}

/// A payload is written as a MessagePack `bin` holding its bytes as they are, not as JSON's
/// array of numbers: a publish of 100 bytes on `orders.shipped` takes 191 bytes (JSON: 571).
#[test]
fn payloads_are_binary() {
    let payload = Bytes::from(vec![b'o'; 100]);
    let entry = Entry {
        at: EntryTime {
            mono_ns: 123_456_789,
            unix_ns: 1_800_000_000 * SEC,
        },
        op: Op::Publish {
            subject: Bytes::from_static(b"orders.shipped"),
            headers: None,
            payload: payload.clone(),
        },
    };
    let bytes = entry.encode().expect("encodes");
    let mut bin = vec![0xc4, 100];
    bin.extend_from_slice(&payload);
    assert!(
        bytes.windows(bin.len()).any(|w| w == bin),
        "bin 8 header, then the payload"
    );
    let json = serde_json::to_vec(&entry).expect("JSON");
    assert!(bytes.len() <= 200, "{} bytes", bytes.len());
    assert!(json.len() > 2 * bytes.len(), "JSON {} bytes", json.len());
}

/// Bytes that are neither an entry nor JSON are an error.
#[test]
fn garbage_is_an_error() {
    assert!(matches!(
        Entry::decode(b""),
        Err(EntryCodecError::Decode(_))
    ));
    assert!(matches!(
        Entry::decode(&[0x82, 0xa2, b'a', b't']),
        Err(EntryCodecError::Decode(_))
    ));
    assert!(matches!(
        Entry::decode(b"{\"at\":"),
        Err(EntryCodecError::Json(_))
    ));
}
