//! The consumer API types against responses recorded from nats-server 2.15.1
//! (`tests/fixtures/consumer/`, see its README): every fixture parses and re-encodes to the same
//! bytes; replaying each recorded CREATE request through `check_consumer_create` (and
//! `check_new` / `check_existing` with the consumer the server had stored) gives the config the
//! server echoed, or its error, byte for byte.

use std::path::PathBuf;
use std::time::Duration;

use jsproto::api::consumer::{
    check_consumer_create, check_consumer_update, check_empty_request, errors,
    parse_create_subject, partition_unique, AckPolicy, ConsumerAction, ConsumerConfig,
    ConsumerCreate, ConsumerCreateResponse, ConsumerDeleteResponse, ConsumerInfo,
    ConsumerInfoResponse, ConsumerListResponse, ConsumerNamesRequest, ConsumerNamesResponse,
    ConsumerPauseResponse, ConsumerTimes, CreateConsumerRequest, CreateForm, DeliverPolicy,
    PriorityPolicy, ReplayPolicy, ZonedTimestamp, DEFAULT_INACTIVE_THRESHOLD, LIST_LIMIT,
    NAMES_LIMIT,
};
use jsproto::api::stream::ConsumerLimits;
use jsproto::api::{
    decode_response, encode_error, encode_ok, to_json, ApiError, ApiResponse, RetentionPolicy,
    StreamConfig, Timestamp,
};
use jsproto::consumer::{self as core, ConsumerState, SequencePair};
use serde::de::DeserializeOwned;
use serde_json::Value;

const SERVER_VERSION: &str = "2.15.1";

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/consumer")
}

fn response(name: &str) -> Vec<u8> {
    std::fs::read(dir().join(format!("{name}.json"))).unwrap_or_else(|e| panic!("{name}.json: {e}"))
}

/// (subject, body) of the recorded request.
fn request(name: &str) -> (String, Vec<u8>) {
    let raw = std::fs::read(dir().join(format!("{name}.request"))).unwrap();
    let nl = raw.iter().position(|&b| b == b'\n').unwrap();
    (
        String::from_utf8(raw[..nl].to_vec()).unwrap(),
        raw[nl + 1..].to_vec(),
    )
}

fn s(bytes: impl AsRef<[u8]>) -> String {
    String::from_utf8(bytes.as_ref().to_vec()).unwrap()
}

/// Parses a success fixture as `T`, checks the `type`, and re-encodes it to the same bytes.
fn round_trip_ok<T: ApiResponse + DeserializeOwned>(name: &str) -> T {
    let bytes = response(name);
    let body: T = decode_response::<T>(&bytes)
        .unwrap()
        .unwrap_or_else(|e| panic!("{name}: unexpected error {e}"));
    let v: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(v["type"], T::TYPE, "{name}");
    assert_eq!(s(encode_ok(&body)), s(&bytes), "{name}");
    body
}

/// Parses an error fixture as the error of `T` and checks `encode_error::<T>` writes the same
/// bytes; returns the error.
fn round_trip_err<T: ApiResponse + DeserializeOwned>(name: &str) -> ApiError {
    let bytes = response(name);
    let err = decode_response::<T>(&bytes)
        .unwrap()
        .err()
        .unwrap_or_else(|| panic!("{name}: expected an error"));
    assert_eq!(s(encode_error::<T>(&err)), s(&bytes), "{name}");
    err
}

fn stream(name: &str) -> Option<StreamConfig> {
    let cfg = match name {
        "S" => StreamConfig::new("S", ["s.>"]),
        "P" => StreamConfig::new("P", ["p.>"]),
        "WQ" => StreamConfig {
            retention: RetentionPolicy::WorkQueue,
            ..StreamConfig::new("WQ", ["wq.>"])
        },
        _ => return None,
    };
    Some(cfg.check(false).unwrap())
}

fn stream_of(subject: &str) -> Option<StreamConfig> {
    stream(parse_create_subject(subject).unwrap().stream)
}

/// The config the server stored for the consumer a create fixture answered with (its echoed
/// config without the response-only metadata).
fn stored(name: &str) -> ConsumerConfig {
    let r: ConsumerCreateResponse = decode_response(&response(name)).unwrap().unwrap();
    let mut c = r.info.config.unwrap();
    c.metadata.remove("_nats.level");
    c.metadata.remove("_nats.ver");
    c
}

/// `check_consumer_create` on the recorded request.
fn replay_create(name: &str) -> Result<ConsumerCreate, ApiError> {
    let (subject, body) = request(name);
    let st = stream_of(&subject);
    check_consumer_create(&subject, &body, st.as_ref())
}

/// Asserts that `ours` (a config to store) is what the fixture echoed, byte for byte.
fn assert_echo(name: &str, ours: &ConsumerConfig) {
    let r: ConsumerCreateResponse = round_trip_ok(name);
    let echoed = r.info.config.as_ref().unwrap();
    let ours = ours.with_dynamic_metadata(SERVER_VERSION);
    assert_eq!(&ours, echoed, "{name}");
    let raw = s(response(name));
    assert!(
        raw.contains(&format!("\"config\":{},", s(to_json(&ours)))),
        "{name}: {}",
        s(to_json(&ours))
    );
}

const CREATE_NEW: &[&str] = &[
    "create_durable_explicit",
    "create_named_ephemeral",
    "create_legacy_ephemeral",
    "create_legacy_named",
    "create_legacy_durable",
    "create_legacy_durable_name_overwritten",
    "create_filtered",
    "create_filter_outside_stream",
    "create_ack_absent",
    "create_ack_none",
    "create_ack_all",
    "create_nats_py",
    "create_full",
    "create_start_time",
    "create_start_time_frac",
    "create_start_time_plus0",
    "create_push",
    "create_ordered_py",
    "create_pinned",
    "create_overflow",
    "create_pause",
    "create_pause_offset",
    "create_lps",
    "create_name_overwritten",
    "create_durable_name_overwritten",
    "create_negatives",
    "create_nulls",
    "create_w",
    "create_w_filtered",
];

#[test]
fn new_consumer_creates_echo_the_servers_config() {
    for name in CREATE_NEW {
        let r: ConsumerCreateResponse = round_trip_ok(name);
        let echoed_name = r.info.name.clone();
        let create = replay_create(name).unwrap_or_else(|e| panic!("{name}: {e}"));
        let st = stream(&create.stream_name).unwrap();
        let (cname, cfg) = create
            .check_new(&st, &[], || echoed_name.clone())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(cname, echoed_name, "{name}");
        assert_echo(name, &cfg);
        assert_eq!(create.durable, !cfg.durable_name.is_empty(), "{name}");
    }
}

#[test]
fn legacy_ephemeral_gets_a_generated_name() {
    let create = replay_create("create_legacy_ephemeral").unwrap();
    assert_eq!(create.name, None);
    assert!(!create.durable);
    let mut names = vec!["taken".to_owned(), "fresh".to_owned()].into_iter();
    let taken = ConsumerConfig {
        name: "taken".into(),
        ..ConsumerConfig::default()
    };
    let (name, cfg) = create
        .check_new(&stream("S").unwrap(), &[&taken], || names.next().unwrap())
        .unwrap();
    assert_eq!(name, "fresh");
    assert_eq!(cfg.name, "", "the server stores no name for these");
    assert_eq!(cfg.inactive_threshold, DEFAULT_INACTIVE_THRESHOLD);
}

/// (fixture, fixture whose echoed config is what the server had stored)
const CREATE_EXISTING: &[(&str, &str)] = &[
    ("create_action_create_same", "create_durable_explicit"),
    ("create_action_create_different", "create_durable_explicit"),
    ("update_ok", "create_durable_explicit"),
    ("update_deliver_policy", "update_ok"),
    ("update_ack_policy", "update_ok"),
    ("update_replay_policy", "update_ok"),
    ("update_max_waiting", "update_ok"),
    ("update_pull_to_push", "update_ok"),
    ("update_mem_storage", "update_ok"),
    ("update_start_seq", "create_full"),
    ("update_start_time", "create_start_time"),
    ("update_start_time_same_instant", "create_start_time"),
    ("update_push_to_pull", "create_push"),
    ("update_push_hb", "create_push"),
    ("update_push_fc", "create_push"),
    ("update_pause_ignored", "create_pause"),
    ("create_eph_again_create", "create_eph_again_create_5s"),
    ("create_eph_again_create_5s", "create_eph_again_create_5s"),
    ("update_ephemeral", "create_eph_again_create_5s"),
    ("update_durable_to_eph", "create_legacy_durable"),
    ("update_backoff", "create_ack_all"),
    (
        "update_null_config",
        "create_legacy_durable_name_overwritten",
    ),
];

#[test]
fn creates_over_existing_consumers_match_the_server() {
    for (name, existing) in CREATE_EXISTING {
        let existing = stored(existing);
        let bytes = response(name);
        let got = replay_create(name).and_then(|c| {
            let st = stream(&c.stream_name).unwrap();
            c.check_existing(&existing, &st, &[&existing])
        });
        match decode_response::<ConsumerCreateResponse>(&bytes).unwrap() {
            Ok(_) => assert_echo(name, &got.unwrap_or_else(|e| panic!("{name}: {e}"))),
            Err(expected) => {
                let got = got.expect_err(name);
                assert_eq!(got, expected, "{name}");
                assert_eq!(s(encode_error::<ConsumerCreateResponse>(&got)), s(&bytes));
            }
        }
    }
}

#[test]
fn update_of_a_missing_consumer_is_10149() {
    let c = replay_create("create_action_update_missing").unwrap();
    assert_eq!(c.action, ConsumerAction::Update);
    let err = c
        .check_new(&stream("S").unwrap(), &[], String::new)
        .unwrap_err();
    assert_eq!(
        err,
        round_trip_err::<ConsumerCreateResponse>("create_action_update_missing")
    );
}

/// Error fixtures answered from the request alone (and the stream's config).
const CREATE_ERRORS: &[&str] = &[
    "err_array_body",
    "err_ack_fc",
    "err_ack_null",
    "err_ack_wait_negative",
    "err_action_int",
    "err_action_null",
    "err_backoff_max_deliver",
    "err_backoff_negative",
    "err_bad_deliver",
    "err_bad_enum",
    "err_bad_enum_case",
    "err_bad_filter",
    "err_bad_filters",
    "err_bad_priority",
    "err_bad_replay",
    "err_bogus_action",
    "err_both_filters",
    "err_deliver_null",
    "err_direct",
    "err_dup_filters",
    "err_durable_mismatch",
    "err_durable_mismatch_legacy",
    "err_durable_name_dot",
    "err_durable_not_set",
    "err_empty_body",
    "err_empty_filter",
    "err_ephemeral_with_durable",
    "err_fc_no_hb",
    "err_fc_pull",
    "err_filter_mismatch",
    "err_filter_missing",
    "err_hb_pull",
    "err_malformed",
    "err_max_expires_small",
    "err_multiple_filters_subject_api",
    "err_name_invalid",
    "err_name_path",
    "err_name_path_durable",
    "err_name_path_legacy",
    "err_name_space",
    "err_null_body",
    "err_overlap_filters",
    "err_pedantic_backoff",
    "err_pedantic_max_deliver",
    "err_policy_all_seq",
    "err_policy_all_time",
    "err_policy_lps_nofilter",
    "err_policy_new_seq",
    "err_policy_seq_missing",
    "err_policy_time_missing",
    "err_policy_time_seq",
    "err_prio_bad_group",
    "err_prio_empty_group",
    "err_prio_groups_no_policy",
    "err_prio_no_groups",
    "err_prio_null",
    "err_prio_ttl_no_policy",
    "err_push_max_waiting",
    "err_push_wildcard",
    "err_rate_pull",
    "err_replicas",
    "err_replicas_negative",
    "err_sample",
    "err_stream_mismatch",
    "err_stream_name_null",
    "err_stream_not_found",
    "err_unknown_field",
    "err_unknown_top_field",
    "err_wq_ack_none",
    "update_backoff",
];

#[test]
fn create_errors_match_the_server_byte_for_byte() {
    for name in CREATE_ERRORS {
        let expected = round_trip_err::<ConsumerCreateResponse>(name);
        let got = replay_create(name).expect_err(name);
        assert_eq!(got, expected, "{name}");
    }
}

#[test]
fn workqueue_errors_come_after_the_existence_check() {
    for name in ["err_wq_ack_all", "err_wq_deliver_last"] {
        let expected = round_trip_err::<ConsumerCreateResponse>(name);
        let c = replay_create(name).unwrap();
        let got = c.check_new(&stream("WQ").unwrap(), &[], String::new);
        assert_eq!(got.unwrap_err(), expected, "{name}");
    }
}

#[test]
fn wrong_json_type_is_10025() {
    // Go names its own types in this text; we only match the code and prefix.
    let expected = round_trip_err::<ConsumerCreateResponse>("err_wrong_type");
    let got = replay_create("err_wrong_type").unwrap_err();
    assert_eq!((got.code, got.err_code), (expected.code, expected.err_code));
    assert!(got.description.starts_with("invalid JSON: "), "{got}");
}

#[test]
fn create_rules_in_words() {
    let st = stream("S").unwrap();
    let create =
        |subject: &str, body: &str| check_consumer_create(subject, body.as_bytes(), Some(&st));
    // Named form: the subject's name wins over config.name; durable iff durable_name.
    let c = create(
        "$JS.API.CONSUMER.CREATE.S.N",
        r#"{"stream_name":"S","config":{"name":"other","ack_policy":"explicit"}}"#,
    )
    .unwrap();
    assert_eq!((c.name.as_deref(), c.durable), (Some("N"), false));
    assert_eq!(c.config.inactive_threshold, Duration::from_secs(5));
    // Legacy durable form.
    let c = create(
        "$JS.API.CONSUMER.DURABLE.CREATE.S.D",
        r#"{"stream_name":"S","config":{"durable_name":"D"}}"#,
    )
    .unwrap();
    assert_eq!((c.name.as_deref(), c.durable), (Some("D"), true));
    assert_eq!(c.config.name, "D");
    assert!(c.config.inactive_threshold.is_zero());
    // Filter from the subject.
    let c = create(
        "$JS.API.CONSUMER.CREATE.S.F.s.a.>",
        r#"{"stream_name":"S","config":{"name":"F","filter_subject":"s.a.>"}}"#,
    )
    .unwrap();
    assert_eq!(c.config.filters(), ["s.a.>"]);
    // Missing stream after the subject checks: 10059; but a mismatch first.
    let none = check_consumer_create(
        "$JS.API.CONSUMER.CREATE.X.N",
        br#"{"stream_name":"X","config":{}}"#,
        None,
    );
    assert_eq!(none.unwrap_err(), ApiError::stream_not_found());
    let none = check_consumer_create("$JS.API.CONSUMER.CREATE.X.N", b"{}", None);
    assert_eq!(none.unwrap_err(), ApiError::stream_mismatch());
    // Not a create subject: no reply on the server; 10003 here.
    assert_eq!(
        create("$JS.API.CONSUMER.DURABLE.CREATE.S.a.b", "{}").unwrap_err(),
        ApiError::bad_request()
    );
}

#[test]
fn create_subject_forms() {
    let p = |s| parse_create_subject(s).map(|c| (c.form, c.stream, c.consumer, c.filter));
    assert_eq!(
        p("$JS.API.CONSUMER.CREATE.S"),
        Some((CreateForm::LegacyEphemeral, "S", None, None))
    );
    assert_eq!(
        p("$JS.API.CONSUMER.CREATE.S.N"),
        Some((CreateForm::Named, "S", Some("N"), None))
    );
    assert_eq!(
        p("$JS.API.CONSUMER.CREATE.S.N.a.*.>"),
        Some((CreateForm::Named, "S", Some("N"), Some("a.*.>")))
    );
    assert_eq!(
        p("$JS.API.CONSUMER.DURABLE.CREATE.S.D"),
        Some((CreateForm::LegacyDurable, "S", Some("D"), None))
    );
    for bad in [
        "$JS.API.CONSUMER.CREATE",
        "$JS.API.CONSUMER.DURABLE.CREATE.S",
        "$JS.API.CONSUMER.DURABLE.CREATE.S.a.b",
        "$JS.API.CONSUMER.CREATE.S..x",
        "$JS.API.STREAM.CREATE.S",
        "$JS.API.CONSUMER.INFO.S.C",
    ] {
        assert_eq!(p(bad), None, "{bad}");
    }
}

#[test]
fn defaults_table() {
    let st = stream("S").unwrap();
    let cfg = |json: &str| {
        let body = format!(r#"{{"stream_name":"S","config":{json}}}"#);
        check_consumer_create("$JS.API.CONSUMER.CREATE.S.C", body.as_bytes(), Some(&st))
            .unwrap()
            .config
    };
    let explicit = cfg(r#"{"durable_name":"C","ack_policy":"explicit"}"#);
    assert_eq!(explicit.ack_wait, Duration::from_secs(30));
    assert_eq!(explicit.max_deliver, -1);
    assert_eq!(explicit.max_waiting, 512);
    assert_eq!(explicit.max_ack_pending, 1000);
    assert_eq!(explicit.num_replicas, 0);
    assert_eq!(explicit.replay_policy, ReplayPolicy::Instant);
    assert_eq!(explicit.deliver_policy, DeliverPolicy::All);
    assert!(explicit.inactive_threshold.is_zero());
    assert_eq!(explicit.metadata["_nats.req.level"], "0");

    let absent = cfg(r#"{"durable_name":"C"}"#);
    assert_eq!(absent.ack_policy, AckPolicy::None);
    assert!(absent.ack_wait.is_zero());
    assert_eq!(absent.max_ack_pending, 0);

    let ephemeral = cfg(r#"{"ack_policy":"all"}"#);
    assert_eq!(ephemeral.inactive_threshold, Duration::from_secs(5));
    assert_eq!(ephemeral.ack_wait, Duration::from_secs(30));

    let backoff = cfg(r#"{"ack_policy":"explicit","ack_wait":5000000000,"backoff":[2000000000]}"#);
    assert_eq!(backoff.ack_wait, Duration::from_secs(2));

    let pinned = cfg(
        r#"{"ack_policy":"explicit","priority_groups":["g"],"priority_policy":"pinned_client"}"#,
    );
    assert_eq!(pinned.priority_timeout, Duration::from_secs(120));
    assert_eq!(pinned.metadata["_nats.req.level"], "1");

    let push = cfg(r#"{"ack_policy":"explicit","deliver_subject":"d"}"#);
    assert_eq!(push.max_waiting, 0);

    // 0 means default everywhere (nats-py sends zeros).
    let zeros = cfg(
        r#"{"ack_policy":"explicit","ack_wait":0,"max_deliver":0,"max_waiting":0,"max_ack_pending":0,"inactive_threshold":0,"idle_heartbeat":0,"num_replicas":0}"#,
    );
    assert_eq!(zeros, ephemeral_like(&explicit));

    // Stream consumer limits are the defaults, and caps.
    let limited = StreamConfig {
        consumer_limits: ConsumerLimits {
            inactive_threshold: Duration::from_secs(60),
            max_ack_pending: 50,
        },
        ..st.clone()
    };
    let c = check_consumer_create(
        "$JS.API.CONSUMER.CREATE.S.C",
        br#"{"stream_name":"S","config":{"durable_name":"C","ack_policy":"explicit"}}"#,
        Some(&limited),
    )
    .unwrap()
    .config;
    assert_eq!(c.max_ack_pending, 50);
    assert_eq!(c.inactive_threshold, Duration::from_secs(60));
    let over = check_consumer_create(
        "$JS.API.CONSUMER.CREATE.S.C",
        br#"{"stream_name":"S","config":{"durable_name":"C","ack_policy":"explicit","max_ack_pending":51}}"#,
        Some(&limited),
    );
    assert_eq!(over.unwrap_err(), errors::max_pending_ack_excess(50));
    let over = check_consumer_create(
        "$JS.API.CONSUMER.CREATE.S.C",
        br#"{"stream_name":"S","config":{"durable_name":"C","ack_policy":"explicit","inactive_threshold":61000000000}}"#,
        Some(&limited),
    );
    assert_eq!(
        over.unwrap_err().description,
        "consumer inactive threshold exceeds system limit of 1m0s"
    );
}

/// `explicit` as an ephemeral named C would get it (the zeros test body has no durable).
fn ephemeral_like(durable: &ConsumerConfig) -> ConsumerConfig {
    ConsumerConfig {
        durable_name: String::new(),
        inactive_threshold: Duration::from_secs(5),
        ..durable.clone()
    }
}

#[test]
fn workqueue_partitions() {
    let wq = stream("WQ").unwrap();
    let create = |json: &str| {
        let body = format!(r#"{{"stream_name":"WQ","config":{json}}}"#);
        check_consumer_create("$JS.API.CONSUMER.CREATE.WQ.C", body.as_bytes(), Some(&wq)).unwrap()
    };
    let a = ConsumerConfig {
        name: "A".into(),
        filter_subject: "wq.a.>".into(),
        ..ConsumerConfig::default()
    };
    let unfiltered = create(r#"{"durable_name":"C","ack_policy":"explicit"}"#);
    assert_eq!(
        unfiltered.check_new(&wq, &[&a], String::new).unwrap_err(),
        ApiError::consumer_wq_multiple_unfiltered()
    );
    let overlapping =
        create(r#"{"durable_name":"C","ack_policy":"explicit","filter_subject":"wq.*.x"}"#);
    assert_eq!(
        overlapping.check_new(&wq, &[&a], String::new).unwrap_err(),
        ApiError::consumer_wq_consumer_not_unique()
    );
    let disjoint =
        create(r#"{"durable_name":"C","ack_policy":"explicit","filter_subject":"wq.b"}"#);
    assert!(disjoint.check_new(&wq, &[&a], String::new).is_ok());
    assert!(partition_unique("C", &["wq.b".into()], &[&a]));
    assert!(!partition_unique(
        "C",
        &["wq.b".into()],
        &[&ConsumerConfig::default()]
    ));
    // The same consumer's own filters do not count.
    assert!(partition_unique("A", &["wq.a.b".into()], &[&a]));
}

#[test]
fn max_consumers_is_10026() {
    let st = StreamConfig {
        max_consumers: 1,
        ..stream("S").unwrap()
    };
    let c = check_consumer_create(
        "$JS.API.CONSUMER.CREATE.S.C",
        br#"{"stream_name":"S","config":{"durable_name":"C"}}"#,
        Some(&st),
    )
    .unwrap();
    let other = ConsumerConfig {
        name: "O".into(),
        ..ConsumerConfig::default()
    };
    assert_eq!(
        c.check_new(&st, &[&other], String::new).unwrap_err(),
        ApiError::maximum_consumers_limit()
    );
    assert!(c.check_new(&st, &[], String::new).is_ok());
}

#[test]
fn update_rules() {
    let base = stored("create_durable_explicit");
    let upd = |f: &dyn Fn(&mut ConsumerConfig)| {
        let mut n = base.clone();
        f(&mut n);
        check_consumer_update(&base, &n).map_err(|e| e.description)
    };
    assert_eq!(upd(&|_| {}), Ok(()));
    assert_eq!(upd(&|c| c.ack_wait = Duration::from_secs(1)), Ok(()));
    assert_eq!(upd(&|c| c.max_deliver = 3), Ok(()));
    assert_eq!(upd(&|c| c.filter_subject = "s.x".into()), Ok(()));
    assert_eq!(upd(&|c| c.max_ack_pending = -1), Ok(()));
    assert_eq!(upd(&|c| c.description = "d".into()), Ok(()));
    assert_eq!(upd(&|c| c.max_batch = 5), Ok(()));
    for (f, text) in [
        (
            &(|c: &mut ConsumerConfig| c.deliver_policy = DeliverPolicy::New)
                as &dyn Fn(&mut ConsumerConfig),
            "deliver policy can not be updated",
        ),
        (
            &|c| c.ack_policy = AckPolicy::All,
            "ack policy can not be updated",
        ),
        (
            &|c| c.replay_policy = ReplayPolicy::Original,
            "replay policy can not be updated",
        ),
        (&|c| c.max_waiting = 1, "max waiting can not be updated"),
        (
            &|c| c.opt_start_seq = 2,
            "start sequence can not be updated",
        ),
        (
            &|c| c.opt_start_time = Some(Timestamp::UNIX_EPOCH.into()),
            "start time can not be updated",
        ),
        (&|c| c.mem_storage = true, "storage type can not be updated"),
        (
            &|c| c.deliver_subject = "d".into(),
            "can not update pull consumer to push based",
        ),
        (
            &|c| c.idle_heartbeat = Duration::from_secs(1),
            "heart beats can not be updated",
        ),
        (
            &|c| c.flow_control = true,
            "flow control can not be updated",
        ),
    ] {
        let e = {
            let mut n = base.clone();
            f(&mut n);
            check_consumer_update(&base, &n).unwrap_err()
        };
        assert_eq!(
            (e.code, e.err_code, e.description.as_str()),
            (500, 10012, text)
        );
    }
    let e = upd(&|c| {
        c.max_deliver = 1;
        c.backoff = vec![Duration::from_secs(1); 2];
    });
    assert_eq!(
        e.unwrap_err(),
        "max deliver is required to be > length of backoff values"
    );
    // Same instant in another offset: allowed.
    let mut t = base.clone();
    t.opt_start_time = Some("2026-01-02T03:04:05+01:00".parse().unwrap());
    let mut t2 = t.clone();
    t2.opt_start_time = Some("2026-01-02T02:04:05Z".parse().unwrap());
    assert!(check_consumer_update(&t, &t2).is_ok());
    assert!(!t2.same_as(&t));
}

#[test]
fn same_as_ignores_server_metadata_only() {
    let a = stored("create_durable_explicit");
    let mut b = a.with_dynamic_metadata(SERVER_VERSION);
    b.metadata.remove("_nats.req.level");
    assert!(b.same_as(&a));
    b.description = "x".into();
    assert!(!b.same_as(&a));
}

#[test]
fn to_core_conversions() {
    let full = stored("create_full");
    let c = full.to_core();
    assert_eq!(c.name, "FULL");
    assert_eq!(c.ack_policy, core::AckPolicy::Explicit);
    assert_eq!(c.deliver_policy, core::DeliverPolicy::ByStartSequence(3));
    assert_eq!(c.ack_wait, Duration::from_secs(1)); // backoff[0]
    assert_eq!(c.max_deliver, Some(5));
    assert_eq!(c.backoff.len(), 3);
    assert_eq!(c.filter_subjects, ["s.x", "s.y.>"]);
    assert_eq!(c.max_waiting, 16);
    assert_eq!(c.max_ack_pending, None); // -1
    assert_eq!(c.max_batch, Some(10));
    assert_eq!(c.max_expires, Some(Duration::from_secs(60)));
    assert_eq!(c.max_bytes, Some(1_048_576));
    c.validate().unwrap();

    let d = stored("create_durable_explicit").to_core();
    assert_eq!(
        d,
        core::ConsumerConfig {
            name: "D1".into(),
            ..core::ConsumerConfig::default()
        }
    );

    let none = stored("create_ack_absent").to_core();
    assert_eq!(none.ack_policy, core::AckPolicy::None);
    assert_eq!(none.ack_wait, Duration::from_secs(30));
    assert_eq!(none.max_ack_pending, None);
    none.validate().unwrap();

    let filtered = stored("create_filtered").to_core();
    assert_eq!(filtered.filter_subjects, ["s.a.*"]);

    let t = stored("create_start_time");
    assert_eq!(
        t.start_policy(),
        core::DeliverPolicy::ByStartTime(
            "2026-01-02T02:04:05.123456789Z"
                .parse::<Timestamp>()
                .unwrap()
                .unix_nanos()
                .unwrap()
        )
    );
    assert_eq!(
        stored("create_lps").start_policy(),
        core::DeliverPolicy::LastPerSubject
    );
    assert_eq!(
        stored("create_full").effective_ack_wait(),
        Duration::from_secs(1)
    );
}

#[test]
fn zoned_timestamps_echo_their_offset() {
    for (input, echoed) in [
        (
            "2026-01-02T03:04:05.123456789+01:00",
            "2026-01-02T03:04:05.123456789+01:00",
        ),
        (
            "2026-01-02T03:04:05.100-05:30",
            "2026-01-02T03:04:05.1-05:30",
        ),
        ("2026-01-02T03:04:05+00:00", "2026-01-02T03:04:05Z"),
        ("2026-01-02T03:04:05Z", "2026-01-02T03:04:05Z"),
    ] {
        let z: ZonedTimestamp = input.parse().unwrap();
        assert_eq!(z.to_string(), echoed);
    }
    let a: ZonedTimestamp = "2026-01-02T03:04:05+01:00".parse().unwrap();
    let b: ZonedTimestamp = "2026-01-02T02:04:05Z".parse().unwrap();
    assert_eq!(a.instant, b.instant);
    assert_ne!(a, b);
}

#[test]
fn consumer_info_fixtures_round_trip() {
    for name in ["info_delivered", "info_acked", "info_pinned"] {
        round_trip_ok::<ConsumerInfoResponse>(name);
    }
    for name in ["info_not_found", "info_stream_not_found"] {
        round_trip_err::<ConsumerInfoResponse>(name);
    }
    assert_eq!(
        round_trip_err::<ConsumerInfoResponse>("info_not_found"),
        ApiError::consumer_not_found()
    );
}

fn unix_ns(t: Timestamp) -> u64 {
    t.unix_nanos().unwrap()
}

#[test]
fn consumer_info_from_core_state_is_the_servers() {
    let r: ConsumerInfoResponse = round_trip_ok("info_acked");
    let i = &r.info;
    let state = ConsumerState {
        delivered: SequencePair {
            consumer_seq: 5,
            stream_seq: 5,
        },
        ack_floor: SequencePair {
            consumer_seq: 2,
            stream_seq: 2,
        },
        num_ack_pending: 2,
        num_redelivered: 0,
        num_waiting: 0,
        num_pending: 5,
        last_delivery: None,
        last_ack: None,
    };
    let ours = ConsumerInfo::from_state(
        "P",
        "W",
        stored("create_w").with_dynamic_metadata(SERVER_VERSION),
        &state,
        ConsumerTimes {
            created_unix_ns: unix_ns(i.created),
            last_delivery_unix_ns: i.delivered.last_active.map(unix_ns),
            last_ack_unix_ns: i.ack_floor.last_active.map(unix_ns),
            now_unix_ns: unix_ns(i.ts),
        },
    );
    assert_eq!(
        s(encode_ok(&ConsumerInfoResponse { info: ours })),
        s(response("info_acked"))
    );

    // A fresh consumer: no last_active at all; priority groups listed unpinned.
    let r: ConsumerCreateResponse = round_trip_ok("create_pinned");
    let ours = ConsumerInfo::from_state(
        "S",
        &r.info.name,
        r.info.config.clone().unwrap(),
        &fresh_state(),
        ConsumerTimes {
            created_unix_ns: unix_ns(r.info.created),
            now_unix_ns: unix_ns(r.info.ts),
            ..ConsumerTimes::default()
        },
    );
    assert_eq!(
        s(encode_ok(&ConsumerCreateResponse { info: ours })),
        s(response("create_pinned"))
    );

    // Paused: paused + pause_remaining from pause_until - now.
    let r: ConsumerCreateResponse = round_trip_ok("create_pause");
    let ours = ConsumerInfo::from_state(
        "S",
        &r.info.name,
        r.info.config.clone().unwrap(),
        &fresh_state(),
        ConsumerTimes {
            created_unix_ns: unix_ns(r.info.created),
            now_unix_ns: unix_ns(r.info.ts),
            ..ConsumerTimes::default()
        },
    );
    assert!(ours.paused);
    assert_eq!(
        ours.pause_remaining.as_nanos() as u64,
        unix_ns("2030-01-01T00:00:00Z".parse().unwrap()) - unix_ns(r.info.ts)
    );
}

#[test]
fn names_and_list_fixtures() {
    for name in [
        "names",
        "names_empty",
        "names_offset",
        "names_offset_big",
        "names_p",
    ] {
        let r: ConsumerNamesResponse = round_trip_ok(name);
        assert_eq!(r.limit, NAMES_LIMIT);
    }
    let r: ConsumerNamesResponse = round_trip_ok("names_offset_big");
    assert_eq!((r.total, r.offset), (18, 18));
    assert!(s(response("names_empty")).ends_with(r#""consumers":[]}"#));
    for name in ["list", "list_empty", "list_offset"] {
        let r: ConsumerListResponse = round_trip_ok(name);
        assert_eq!(r.limit, LIST_LIMIT);
    }
    // LIST shows the stored (static) metadata only.
    let r: ConsumerListResponse = round_trip_ok("list");
    assert_eq!(r.consumers[0].config.as_ref().unwrap().metadata.len(), 1);
    for name in [
        "names_stream_not_found",
        "names_subject_field",
        "names_unknown_field",
    ] {
        round_trip_err::<ConsumerNamesResponse>(name);
    }
    round_trip_err::<ConsumerListResponse>("list_stream_not_found");
    // Our request decoder gives the same errors.
    for name in ["names_subject_field", "names_unknown_field"] {
        let (_, body) = request(name);
        assert_eq!(
            ConsumerNamesRequest::decode(&body).unwrap_err(),
            round_trip_err::<ConsumerNamesResponse>(name)
        );
    }
    let (_, body) = request("names_offset_big");
    let req = ConsumerNamesRequest::decode(&body).unwrap();
    assert_eq!(req.offset(18), 18);
    assert_eq!(
        ConsumerNamesRequest::decode(b"garbage").unwrap().offset(3),
        0
    );
    assert_eq!(ConsumerNamesRequest { offset: -4 }.offset(3), 0);
}

#[test]
fn delete_pause_and_empty_bodies() {
    let d: ConsumerDeleteResponse = round_trip_ok("delete");
    assert!(d.success);
    for name in ["delete_not_found", "delete_stream_not_found"] {
        round_trip_err::<ConsumerDeleteResponse>(name);
    }
    let p: ConsumerPauseResponse = round_trip_ok("pause");
    assert!(p.paused);
    let p: ConsumerPauseResponse = round_trip_ok("resume");
    assert!(!p.paused && p.pause_until.is_zero());
    round_trip_err::<ConsumerPauseResponse>("pause_not_found");
    assert!(check_empty_request(b"").is_ok());
    assert!(check_empty_request(b"{}").is_ok());
    assert!(check_empty_request(b" { } ").is_ok());
    let (_, body) = request("info_not_empty");
    assert_eq!(
        check_empty_request(&body).unwrap_err(),
        round_trip_err::<ConsumerInfoResponse>("info_not_empty")
    );
}

#[test]
fn request_round_trips_and_strictness() {
    let (_, body) = request("create_full");
    let req = CreateConsumerRequest::decode(&body).unwrap();
    assert_eq!(req.action, ConsumerAction::Create);
    assert_eq!(req.config.priority_policy, PriorityPolicy::None);
    let again = CreateConsumerRequest::decode(&to_json(&req)).unwrap();
    assert_eq!(again, req);
    // Empty and null bodies are the default request.
    assert_eq!(
        CreateConsumerRequest::decode(b"").unwrap(),
        CreateConsumerRequest::default()
    );
    assert_eq!(
        CreateConsumerRequest::decode(b"null").unwrap(),
        CreateConsumerRequest::default()
    );
    // Arrays are 10025.
    assert_eq!(
        CreateConsumerRequest::decode(b"[]").unwrap_err().err_code,
        10025
    );
}

fn fresh_state() -> ConsumerState {
    ConsumerState {
        delivered: SequencePair::default(),
        ack_floor: SequencePair::default(),
        num_ack_pending: 0,
        num_redelivered: 0,
        num_waiting: 0,
        num_pending: 0,
        last_delivery: None,
        last_ack: None,
    }
}

#[test]
fn length_limits_as_observed() {
    // Observed on 2.15.1 (too big to keep as fixtures): texts and codes.
    let st = stream("S").unwrap();
    let long = "d".repeat(256);
    let body = format!(r#"{{"stream_name":"S","config":{{"durable_name":"{long}"}}}}"#);
    let c = check_consumer_create(
        &format!("$JS.API.CONSUMER.DURABLE.CREATE.S.{long}"),
        body.as_bytes(),
        Some(&st),
    )
    .unwrap();
    let e = c.check_new(&st, &[], String::new).unwrap_err();
    assert_eq!(
        (e.code, e.err_code, e.description.as_str()),
        (
            400,
            10102,
            "consumer name is too long, maximum allowed is 255"
        )
    );
    // An ephemeral name that long fails in the file store (observed text).
    let body = format!(r#"{{"stream_name":"S","config":{{"name":"{long}"}}}}"#);
    let c = check_consumer_create("$JS.API.CONSUMER.CREATE.S", body.as_bytes(), Some(&st)).unwrap();
    let e = c.check_new(&st, &[], String::new).unwrap_err();
    assert_eq!(
        (e.code, e.err_code, e.description.as_str()),
        (500, 10012, "error creating store for consumer")
    );
    let body = format!(
        r#"{{"stream_name":"S","config":{{"durable_name":"X","description":"{}"}}}}"#,
        "x".repeat(4097)
    );
    let e = check_consumer_create("$JS.API.CONSUMER.CREATE.S.X", body.as_bytes(), Some(&st))
        .unwrap_err();
    assert_eq!(
        (e.code, e.err_code, e.description.as_str()),
        (
            400,
            10107,
            "consumer description is too long, maximum allowed is 4096"
        )
    );
    let body = format!(
        r#"{{"stream_name":"S","config":{{"durable_name":"X","metadata":{{"k":"{}"}}}}}}"#,
        "v".repeat(128 * 1024)
    );
    let e = check_consumer_create("$JS.API.CONSUMER.CREATE.S.X", body.as_bytes(), Some(&st))
        .unwrap_err();
    assert_eq!(
        (e.code, e.err_code, e.description.as_str()),
        (
            400,
            10135,
            "consumer metadata exceeds maximum size of 128KB"
        )
    );
}

/// Consumer settings nats-server honours and this server does not: `check_consumer_create`
/// passes them as nats-server does (the recorded `create_full` has `sample_freq`), and
/// `check_supported`, which the server runs next, refuses them by name.
#[test]
fn settings_not_honoured_are_refused_after_the_servers_checks() {
    use jsproto::api::consumer::{check_supported, unsupported_setting};
    let full = replay_create("create_full").unwrap();
    assert_eq!(unsupported_setting(&full.config), Some("sample_freq"));
    assert_eq!(
        check_supported(&full.config),
        Err(ApiError::new(
            500,
            10052,
            "sample_freq is not supported by this server yet"
        ))
    );
    let st = stream("S").unwrap();
    for (body, name) in [
        (
            r#"{"stream_name":"S","config":{"direct":true,"deliver_subject":"d"}}"#,
            "direct",
        ),
        (
            r#"{"stream_name":"S","config":{"sourcing":true}}"#,
            "sourcing",
        ),
    ] {
        let c = check_consumer_create("$JS.API.CONSUMER.CREATE.S", body.as_bytes(), Some(&st))
            .unwrap_or_else(|e| panic!("{body}: {e}"));
        assert_eq!(unsupported_setting(&c.config), Some(name), "{body}");
    }
    let plain = replay_create("create_durable_explicit").unwrap();
    assert_eq!(check_supported(&plain.config), Ok(()));
}

/// `num_replicas` on a consumer, as nats-server 2.15.1 answers it (recorded side by side on a
/// 3-node cluster): standalone, > 1 is 10074 before the stream is looked up; in a cluster,
/// up to the stream's is stored as sent (0 = the stream's, kept as 0), above it 10126,
/// negative 10133, and on interest/workqueue streams anything but 0 or the stream's 10134;
/// `mem_storage` goes with any accepted count.
#[test]
fn num_replicas_standalone_and_in_a_cluster() {
    use jsproto::api::consumer::check_consumer_create_in;
    let stream = |replicas: i64, retention: RetentionPolicy| StreamConfig {
        num_replicas: replicas,
        retention,
        ..StreamConfig::new("S", ["s.>"]).check(false).unwrap()
    };
    let create = |cfg: &str, st: Option<&StreamConfig>, clustered: bool| {
        let body = format!(
            r#"{{"stream_name":"S","config":{{"durable_name":"C","ack_policy":"explicit"{cfg}}}}}"#
        );
        check_consumer_create_in(
            "$JS.API.CONSUMER.CREATE.S.C",
            body.as_bytes(),
            st,
            clustered,
        )
        .map(|c| (c.config.num_replicas, c.config.mem_storage))
    };
    let limits3 = stream(3, RetentionPolicy::Limits);
    let limits1 = stream(1, RetentionPolicy::Limits);
    let interest3 = stream(3, RetentionPolicy::Interest);
    let work3 = stream(3, RetentionPolicy::WorkQueue);

    // Standalone: 10074 for > 1, before the stream lookup (none here); the old entry point
    // is the standalone one.
    for st in [None, Some(&limits1)] {
        assert_eq!(
            create(r#","num_replicas":3"#, st, false),
            Err(ApiError::stream_replicas_not_supported())
        );
    }
    let old = check_consumer_create(
        "$JS.API.CONSUMER.CREATE.S.C",
        br#"{"stream_name":"S","config":{"durable_name":"C","num_replicas":2}}"#,
        Some(&limits1),
    );
    assert_eq!(old.unwrap_err(), ApiError::stream_replicas_not_supported());
    assert_eq!(
        create(r#","num_replicas":1"#, Some(&limits1), false),
        Ok((1, false))
    );

    // A cluster: no 10074; a missing stream is 10059 whatever the count.
    assert_eq!(
        create(r#","num_replicas":3"#, None, true),
        Err(ApiError::stream_not_found())
    );
    /// (stream, config fields, echoed (`num_replicas`, `mem_storage`) or the error)
    type Case<'a> = (&'a StreamConfig, &'a str, Result<(i64, bool), ApiError>);
    let cases: &[Case] = &[
        (&limits3, "", Ok((0, false))),
        (&limits3, r#","num_replicas":0"#, Ok((0, false))),
        (&limits3, r#","num_replicas":1"#, Ok((1, false))),
        (&limits3, r#","num_replicas":2"#, Ok((2, false))),
        (&limits3, r#","num_replicas":3"#, Ok((3, false))),
        (
            &limits3,
            r#","num_replicas":1,"mem_storage":true"#,
            Ok((1, true)),
        ),
        (
            &limits3,
            r#","num_replicas":3,"mem_storage":true"#,
            Ok((3, true)),
        ),
        (&limits3, r#","mem_storage":true"#, Ok((0, true))),
        (
            &limits3,
            r#","num_replicas":5"#,
            Err(errors::replicas_exceeds_stream()),
        ),
        (
            &limits3,
            r#","num_replicas":-1"#,
            Err(ApiError::replicas_count_cannot_be_negative()),
        ),
        (
            &limits1,
            r#","num_replicas":3"#,
            Err(errors::replicas_exceeds_stream()),
        ),
        (&limits1, r#","num_replicas":1"#, Ok((1, false))),
        (&interest3, r#","num_replicas":3"#, Ok((3, false))),
        (&interest3, "", Ok((0, false))),
        (
            &interest3,
            r#","num_replicas":1"#,
            Err(errors::replicas_should_match_stream()),
        ),
        (
            &work3,
            r#","num_replicas":1"#,
            Err(errors::replicas_should_match_stream()),
        ),
        (
            &work3,
            r#","num_replicas":5"#,
            Err(errors::replicas_exceeds_stream()),
        ),
        (&work3, r#","num_replicas":3"#, Ok((3, false))),
    ];
    for (st, cfg, want) in cases {
        assert_eq!(
            &create(cfg, Some(st), true),
            want,
            "{cfg} on R{} {:?}",
            st.num_replicas,
            st.retention
        );
    }
    // The texts and codes nats-server answers.
    assert_eq!(
        errors::replicas_exceeds_stream().to_string(),
        "consumer config replica count exceeds parent stream (10126)"
    );
    assert_eq!(
        errors::replicas_should_match_stream().to_string(),
        "consumer config replicas must match interest retention stream's replicas (10134)"
    );
}

/// A stream update to other replicas: each consumer's own `num_replicas` follows, as
/// nats-server 2.15.1 rewrote them (recorded: R3 stream scaled to R1 and back).
#[test]
fn consumer_replicas_follow_the_stream() {
    let with = |n: i64| ConsumerConfig {
        num_replicas: n,
        ..ConsumerConfig::default()
    };
    let stream = |replicas: i64, retention: RetentionPolicy| StreamConfig {
        num_replicas: replicas,
        retention,
        ..StreamConfig::new("S", ["s.>"])
    };
    let limits = |r| stream(r, RetentionPolicy::Limits);
    let interest = |r| stream(r, RetentionPolicy::Interest);
    let work = |r| stream(r, RetentionPolicy::WorkQueue);
    // (consumer's, stream's new, retention) → kept
    assert_eq!(with(0).replicas_following(&limits(1)), 0);
    assert_eq!(with(3).replicas_following(&limits(1)), 1);
    assert_eq!(with(2).replicas_following(&limits(1)), 1);
    assert_eq!(with(1).replicas_following(&limits(3)), 1);
    assert_eq!(with(3).replicas_following(&limits(5)), 3);
    assert_eq!(with(0).replicas_following(&interest(1)), 0);
    assert_eq!(with(3).replicas_following(&interest(1)), 1);
    assert_eq!(with(1).replicas_following(&interest(3)), 3);
    assert_eq!(with(3).replicas_following(&work(5)), 5);
}
