//! Validation and defaults of the JetStream API types, case by case against what nats-server
//! 2.15.1 answered to the same request (recorded by hand with nats-py request/reply; each case
//! quotes the server's reply), plus serde round trips of durations and times.

use std::time::Duration;

use jsproto::api::error::ERROR_TABLE;
use jsproto::api::stream::{
    check_stream_create, check_stream_update, MsgGetRequest, MsgSelector, StreamDeleteResponse,
    StreamNamesResponse, StreamPurgeResponse, STREAM_CONFIG_FIELDS,
};
use jsproto::api::{
    decode_request, encode_error, encode_ok, nanos, to_json, ApiError, DiscardPolicy,
    RetentionPolicy, StorageType, StreamConfig, StreamConfigRequest, Timestamp,
};
use proptest::prelude::*;

const NAME_TEXT: &str = "stream name is required and can not contain '.', '*', '>', '\\', '/'";

fn err(code: u16, err_code: u32, description: &str) -> ApiError {
    ApiError::new(code, err_code, description)
}

/// (stream name in the subject, request body, the server's error).
fn create_error_cases() -> Vec<(String, String, ApiError)> {
    let long = "a".repeat(256);
    let desc = "d".repeat(4097);
    let c = |n: &str, b: &str, e: ApiError| (n.to_owned(), b.to_owned(), e);
    vec![
        c("a*b", r#"{"name":"a*b"}"#, err(500, 10052, NAME_TEXT)),
        c("a>b", r#"{"name":"a>b"}"#, err(500, 10052, NAME_TEXT)),
        c("a b", r#"{"name":"a b"}"#, err(500, 10052, NAME_TEXT)),
        c("a\tb", "{\"name\":\"a\\tb\"}", err(500, 10052, NAME_TEXT)),
        c(
            "a/b",
            r#"{"name":"a/b"}"#,
            err(400, 10128, "Stream name can not contain path separators"),
        ),
        c(
            "a\\b",
            r#"{"name":"a\\b"}"#,
            err(400, 10128, "Stream name can not contain path separators"),
        ),
        (
            long.clone(),
            format!(r#"{{"name":"{long}"}}"#),
            err(
                500,
                10052,
                "stream name is too long, maximum allowed is 255",
            ),
        ),
        c(
            "R3",
            r#"{"name":"R3","num_replicas":3}"#,
            err(
                500,
                10074,
                "replicas > 1 not supported in non-clustered mode",
            ),
        ),
        c(
            "R6",
            r#"{"name":"R6","num_replicas":6}"#,
            err(500, 10052, "maximum replicas is 5"),
        ),
        c(
            "R0",
            r#"{"name":"R0","num_replicas":-1}"#,
            err(400, 10133, "replicas count cannot be negative"),
        ),
        c(
            "UNK",
            r#"{"name":"UNK","bogus":1}"#,
            err(400, 10025, r#"invalid JSON: json: unknown field "bogus""#),
        ),
        c(
            "NEGAGE",
            r#"{"name":"NEGAGE","max_age":-1}"#,
            err(500, 10052, "max age can not be negative"),
        ),
        c(
            "AGE2",
            r#"{"name":"AGE2","max_age":50000000}"#,
            err(500, 10052, "max age needs to be >= 100ms"),
        ),
        c(
            "DUP",
            r#"{"name":"DUP","max_age":60000000000,"duplicate_window":70000000000}"#,
            err(
                500,
                10052,
                "duplicates window can not be larger then max age",
            ),
        ),
        c(
            "DUP2",
            r#"{"name":"DUP2","duplicate_window":50000000}"#,
            err(500, 10052, "duplicates window needs to be >= 100ms"),
        ),
        c(
            "DUP3",
            r#"{"name":"DUP3","duplicate_window":-5}"#,
            err(500, 10052, "duplicates window can not be negative"),
        ),
        c(
            "BADRET",
            r#"{"name":"BADRET","retention":"foo"}"#,
            err(400, 10025, r#"invalid JSON: can not unmarshal "\"foo\"""#),
        ),
        c(
            "RET",
            r#"{"name":"RET","retention":""}"#,
            err(400, 10025, r#"invalid JSON: can not unmarshal "\"\"""#),
        ),
        c(
            "RET2",
            r#"{"name":"RET2","retention":"Limits"}"#,
            err(
                400,
                10025,
                r#"invalid JSON: can not unmarshal "\"Limits\"""#,
            ),
        ),
        c(
            "BADSTOR",
            r#"{"name":"BADSTOR","storage":"disk"}"#,
            err(400, 10025, r#"invalid JSON: can not unmarshal "\"disk\"""#),
        ),
        c(
            "SUB1",
            r#"{"name":"SUB1","subjects":["a..b"]}"#,
            err(500, 10052, "invalid subject"),
        ),
        c(
            "SUB2",
            r#"{"name":"SUB2","subjects":["a","a"]}"#,
            err(500, 10052, r#"subject "a" overlaps with "a""#),
        ),
        c(
            "SUB3",
            r#"{"name":"SUB3","subjects":["a.*","a.b"]}"#,
            err(500, 10052, r#"subject "a.*" overlaps with "a.b""#),
        ),
        c(
            "SUB4",
            r#"{"name":"SUB4","subjects":["$JS.API.>"]}"#,
            err(
                500,
                10052,
                "subjects that overlap with jetstream api require no-ack to be true",
            ),
        ),
        c(
            "SUB6",
            r#"{"name":"SUB6","subjects":[">"]}"#,
            err(
                500,
                10052,
                "capturing all subjects requires no-ack to be true",
            ),
        ),
        c(
            "SUB7",
            r#"{"name":"SUB7","subjects":[""]}"#,
            err(500, 10052, "invalid subject"),
        ),
        c(
            "WS",
            r#"{"name":"WS","subjects":["a b"]}"#,
            err(500, 10052, "invalid subject"),
        ),
        c(
            "E1",
            "",
            err(400, 10056, "stream name in subject does not match request"),
        ),
        c(
            "E2",
            r#"{"subjects":["e2"]}"#,
            err(400, 10056, "stream name in subject does not match request"),
        ),
        c(
            "E5",
            r#"{"name":"E5","#,
            err(400, 10025, "invalid JSON: unexpected EOF"),
        ),
        c(
            "SEAL",
            r#"{"name":"SEAL","sealed":true}"#,
            err(
                500,
                10052,
                "stream configuration for create can not be sealed",
            ),
        ),
        c(
            "MD",
            r#"{"name":"MD","mirror_direct":true}"#,
            err(
                500,
                10052,
                "stream has no mirror but does have mirror direct",
            ),
        ),
        (
            "DESC".to_owned(),
            format!(r#"{{"name":"DESC","description":"{desc}"}}"#),
            err(
                500,
                10052,
                "stream description is too long, maximum allowed is 4096",
            ),
        ),
        c(
            "DNP",
            r#"{"name":"DNP","discard_new_per_subject":true}"#,
            err(
                500,
                10052,
                "discard new per subject requires discard new policy to be set",
            ),
        ),
        c(
            "PED",
            r#"{"name":"PED","max_msgs":-5,"pedantic":true}"#,
            err(400, 10157, "pedantic mode: max_msgs must be set to -1"),
        ),
    ]
}

#[test]
fn create_errors_are_the_servers() {
    for (name, body, expected) in create_error_cases() {
        let got = check_stream_create(&name, body.as_bytes()).unwrap_err();
        assert_eq!(got, expected, "{name}: {body}");
    }
}

#[test]
fn create_accepts_what_the_server_accepts() {
    // 255 characters is fine.
    let name = "b".repeat(255);
    let c = check_stream_create(&name, format!(r#"{{"name":"{name}"}}"#).as_bytes()).unwrap();
    assert_eq!(c.subjects, vec![name]);

    // Limits below -1 are read as -1 (observed), zeros are defaults.
    let c = check_stream_create(
        "NEG",
        br#"{"name":"NEG","max_msgs":-5,"max_msg_size":-7,"max_bytes":-9,"max_consumers":-3,"max_msgs_per_subject":-4}"#,
    )
    .unwrap();
    assert_eq!(
        (
            c.max_msgs,
            c.max_msg_size,
            c.max_bytes,
            c.max_consumers,
            c.max_msgs_per_subject
        ),
        (-1, -1, -1, -1, -1)
    );
    let zero = check_stream_create(
        "ZERO",
        br#"{"name":"ZERO","max_age":0,"duplicate_window":0,"max_msg_size":0,"num_replicas":0,"max_consumers":0,"max_msgs":0,"max_bytes":0,"max_msgs_per_subject":0}"#,
    )
    .unwrap();
    let minimal = check_stream_create("ZERO", br#"{"name":"ZERO"}"#).unwrap();
    assert_eq!(zero, minimal);
    assert_eq!(
        String::from_utf8(to_json(&minimal)).unwrap(),
        r#"{"name":"ZERO","subjects":["ZERO"],"retention":"limits","max_consumers":-1,"max_msgs":-1,"max_bytes":-1,"max_age":0,"max_msgs_per_subject":-1,"max_msg_size":-1,"discard":"old","storage":"file","num_replicas":1,"duplicate_window":120000000000,"compression":"none","allow_direct":false,"mirror_direct":false,"sealed":false,"deny_delete":false,"deny_purge":false,"allow_rollup_hdrs":false,"consumer_limits":{},"allow_msg_ttl":false,"metadata":{"_nats.req.level":"0"}}"#
    );

    // null subjects/metadata are empty; "subjects":[] defaults to [name].
    let c = check_stream_create(
        "NUL",
        br#"{"name":"NUL","subjects":null,"metadata":null,"description":""}"#,
    )
    .unwrap();
    assert_eq!(c.subjects, ["NUL"]);
    let c = check_stream_create("SUB8", br#"{"name":"SUB8","subjects":[]}"#).unwrap();
    assert_eq!(c.subjects, ["SUB8"]);

    // A subject delete marker TTL turns on TTLs and roll-ups and needs API level 1 (observed).
    let c = check_stream_create(
        "SDM",
        br#"{"name":"SDM","subject_delete_marker_ttl":2000000000}"#,
    )
    .unwrap();
    assert!(c.allow_msg_ttl && c.allow_rollup_hdrs);
    assert_eq!(
        c.metadata.get("_nats.req.level").map(String::as_str),
        Some("1")
    );

    // consumer_limits are echoed as given.
    let c = check_stream_create("CL2", br#"{"name":"CL2","consumer_limits":{"inactive_threshold":5000000000,"max_ack_pending":10}}"#)
        .unwrap();
    assert_eq!(
        String::from_utf8(to_json(&c.consumer_limits)).unwrap(),
        r#"{"inactive_threshold":5000000000,"max_ack_pending":10}"#
    );

    // Discard is compared case-insensitively by the server (strings.ToLower), written lower case.
    let c = check_stream_create("D", br#"{"name":"D","discard":"NEW"}"#).unwrap();
    assert_eq!(c.discard, DiscardPolicy::New);

    // Capturing everything is fine with no_ack; $JS.EVENT.> is allowed without it.
    check_stream_create("ALL", br#"{"name":"ALL","subjects":[">"],"no_ack":true}"#).unwrap();
    check_stream_create("EV", br#"{"name":"EV","subjects":["$JS.EVENT.>"]}"#).unwrap();
    let e = check_stream_create("SYS", br#"{"name":"SYS","subjects":["$SYS.>"]}"#).unwrap_err();
    assert_eq!(
        e.description,
        "subjects that overlap with system api require no-ack to be true"
    );
}

#[test]
fn decode_reports_negative_durations_with_the_servers_text() {
    let e = StreamConfigRequest::decode(br#"{"name":"X","max_age":-1}"#).unwrap_err();
    assert_eq!(
        e,
        ApiError::stream_invalid_config("max age can not be negative")
    );
    let e =
        StreamConfigRequest::decode(br#"{"name":"X","subject_delete_marker_ttl":-1}"#).unwrap_err();
    assert_eq!(
        e,
        ApiError::stream_invalid_config("subject delete marker TTL must not be negative")
    );
    // In the server's order: a name mismatch is found before the negative duration.
    let e = check_stream_create("Y", br#"{"name":"X","max_age":-1}"#).unwrap_err();
    assert_eq!(e, ApiError::stream_mismatch());
    let r = StreamConfigRequest::decode(br#"{"name":"X","pedantic":true}"#).unwrap();
    assert!(r.pedantic);
    assert_eq!(
        String::from_utf8(to_json(&r)).unwrap(),
        r#"{"name":"X","retention":"limits","max_consumers":0,"max_msgs":0,"max_bytes":0,"max_age":0,"max_msgs_per_subject":0,"discard":"old","storage":"file","num_replicas":0,"compression":"none","allow_direct":false,"mirror_direct":false,"sealed":false,"deny_delete":false,"deny_purge":false,"allow_rollup_hdrs":false,"consumer_limits":{},"allow_msg_ttl":false,"pedantic":true}"#
    );
}

fn stored(body: &str) -> StreamConfig {
    let name = serde_json::from_str::<serde_json::Value>(body).unwrap()["name"]
        .as_str()
        .unwrap()
        .to_owned();
    check_stream_create(&name, body.as_bytes()).unwrap()
}

#[test]
fn update_rules_are_the_servers() {
    let s1 =
        stored(r#"{"name":"S1","subjects":["s1.>"],"max_age":60000000000,"allow_direct":true}"#);
    let invalid = |t: &str| ApiError::stream_invalid_config(t);
    let cases = [
        (
            r#"{"name":"S1","subjects":["s1.>"],"storage":"memory"}"#,
            invalid("stream configuration update can not change storage type"),
        ),
        (
            r#"{"name":"S1","subjects":["s1.>"],"retention":"workqueue"}"#,
            invalid(
                "stream configuration update can not change retention policy to/from workqueue",
            ),
        ),
        (
            r#"{"name":"S2","subjects":["s1.>"]}"#,
            ApiError::stream_mismatch(),
        ),
        (
            r#"{"name":"S1","num_replicas":3}"#,
            ApiError::stream_replicas_not_supported(),
        ),
        (
            r#"{"name":"S1","max_age":-1}"#,
            invalid("max age can not be negative"),
        ),
        (
            r#"{"name":"S1","bogus":true}"#,
            ApiError::invalid_json(r#"json: unknown field "bogus""#),
        ),
    ];
    for (body, expected) in cases {
        assert_eq!(
            check_stream_update("S1", body.as_bytes(), &s1),
            Err(expected),
            "{body}"
        );
    }
    // A bad config wins over the name mismatch on update (the server checks the config first).
    assert_eq!(
        check_stream_update("S1", br#"{"name":"S2","subjects":["a..b"]}"#, &s1),
        Err(invalid("invalid subject"))
    );
    // limits <-> interest is allowed; the update replaces the whole config (observed).
    let u = check_stream_update(
        "S1",
        br#"{"name":"S1","subjects":["s1.>"],"retention":"interest"}"#,
        &s1,
    )
    .unwrap();
    assert_eq!(u.retention, RetentionPolicy::Interest);
    assert_eq!(
        (u.max_age, u.duplicate_window, u.allow_direct),
        (Duration::ZERO, Duration::from_secs(120), false)
    );

    let locked =
        stored(r#"{"name":"L","deny_delete":true,"deny_purge":true,"allow_msg_ttl":true}"#);
    for (body, text) in [
        (
            r#"{"name":"L","deny_purge":true,"allow_msg_ttl":true}"#,
            "stream configuration update can not cancel deny message deletes",
        ),
        (
            r#"{"name":"L","deny_delete":true,"allow_msg_ttl":true}"#,
            "stream configuration update can not cancel deny purge",
        ),
        (
            r#"{"name":"L","deny_delete":true,"deny_purge":true}"#,
            "message TTL status can not be disabled",
        ),
    ] {
        assert_eq!(
            check_stream_update("L", body.as_bytes(), &locked),
            Err(invalid(text)),
            "{body}"
        );
    }
    // Sealing adjusts the config; unsealing is refused.
    let sealed = check_stream_update(
        "S1",
        br#"{"name":"S1","subjects":["s1.>"],"sealed":true,"max_age":60000000000}"#,
        &s1,
    )
    .unwrap();
    assert!(sealed.sealed && sealed.deny_delete && sealed.deny_purge && !sealed.allow_rollup_hdrs);
    assert_eq!(
        (sealed.max_age, sealed.discard),
        (Duration::ZERO, DiscardPolicy::New)
    );
    assert_eq!(
        check_stream_update("S1", br#"{"name":"S1","subjects":["s1.>"]}"#, &sealed),
        Err(invalid(
            "stream configuration update can not unseal a sealed stream"
        ))
    );
    // Storage stays as stored.
    assert_eq!(s1.storage, StorageType::File);
}

#[test]
fn config_fields_list_is_complete_and_in_order() {
    let mut full = stored(
        r#"{"name":"F","description":"d","subjects":["f"],"no_ack":true,"first_seq":5,"discard":"new","max_msgs_per_subject":3,"discard_new_per_subject":true,"subject_delete_marker_ttl":1000000000,"consumer_limits":{"max_ack_pending":1}}"#,
    );
    full.placement = Some(jsproto::api::stream::Placement {
        cluster: "c".into(),
        ..Default::default()
    });
    full.mirror = Some(serde_json::json!({"name":"M"}));
    full.sources = vec![serde_json::json!({"name":"S"})];
    full.subject_transform = Some(Default::default());
    full.republish = Some(Default::default());
    full.allow_msg_counter = true;
    full.allow_atomic = true;
    full.allow_msg_schedules = true;
    full.persist_mode = jsproto::api::PersistMode::Async;
    full.allow_batched = true;
    let v: serde_json::Value = serde_json::from_slice(&to_json(&full)).unwrap();
    let json = String::from_utf8(to_json(&full)).unwrap();
    let mut last = 0;
    for f in STREAM_CONFIG_FIELDS {
        assert!(v.get(f).is_some(), "{f} missing");
        let at = json.find(&format!("\"{f}\":")).unwrap();
        assert!(at >= last, "{f} out of order");
        last = at;
    }
    assert_eq!(v.as_object().unwrap().len(), STREAM_CONFIG_FIELDS.len());
    // And every one of them is accepted by the strict decoder.
    let back = StreamConfigRequest::decode(&to_json(&full)).unwrap();
    assert_eq!(back.config, full);
}

#[test]
fn msg_get_selectors() {
    let sel = |b: &str| {
        decode_request::<MsgGetRequest>(b.as_bytes())
            .unwrap()
            .selector()
            .map(|s| format!("{s:?}"))
    };
    assert_eq!(
        sel(r#"{"seq":2}"#),
        Ok(format!("{:?}", MsgSelector::Seq(2)))
    );
    assert_eq!(
        sel(r#"{"last_by_subj":"a"}"#),
        Ok(format!("{:?}", MsgSelector::LastBySubject("a")))
    );
    assert_eq!(
        sel(r#"{"next_by_subj":"a","seq":3}"#),
        Ok(format!(
            "{:?}",
            MsgSelector::NextBySubject {
                subject: "a",
                from: 3
            }
        ))
    );
    for bad in [
        "",
        "{}",
        r#"{"seq":2,"last_by_subj":"a"}"#,
        r#"{"last_by_subj":"a","next_by_subj":"a"}"#,
    ] {
        assert_eq!(sel(bad), Err(ApiError::bad_request()), "{bad}");
    }
    assert_eq!(
        decode_request::<MsgGetRequest>(br#"{"seq":2,"bogus":1}"#),
        Err(ApiError::invalid_json(r#"json: unknown field "bogus""#))
    );
}

#[test]
fn envelopes_are_exact() {
    assert_eq!(
        String::from_utf8(encode_error::<StreamNamesResponse>(
            &ApiError::invalid_json("x")
        ))
        .unwrap(),
        r#"{"type":"io.nats.jetstream.api.v1.stream_names_response","error":{"code":400,"err_code":10025,"description":"invalid JSON: x"},"total":0,"offset":0,"limit":0,"streams":null}"#
    );
    // Observed on 2.15.1 for STREAM.LIST {"bogus":1}: the list error keeps "streams":[].
    assert_eq!(
        String::from_utf8(encode_error::<jsproto::api::stream::StreamListResponse>(
            &ApiError::invalid_json(r#"json: unknown field "bogus""#)
        ))
        .unwrap(),
        r#"{"type":"io.nats.jetstream.api.v1.stream_list_response","error":{"code":400,"err_code":10025,"description":"invalid JSON: json: unknown field \"bogus\""},"total":0,"offset":0,"limit":0,"streams":[]}"#
    );
    assert_eq!(
        String::from_utf8(encode_error::<StreamPurgeResponse>(
            &ApiError::stream_not_found()
        ))
        .unwrap(),
        r#"{"type":"io.nats.jetstream.api.v1.stream_purge_response","error":{"code":404,"err_code":10059,"description":"stream not found"},"purged":0}"#
    );
    assert_eq!(
        String::from_utf8(encode_error::<StreamDeleteResponse>(
            &ApiError::stream_replicas_not_supported()
        ))
        .unwrap(),
        r#"{"type":"io.nats.jetstream.api.v1.stream_delete_response","error":{"code":500,"err_code":10074,"description":"replicas \u003e 1 not supported in non-clustered mode"}}"#
    );
    assert_eq!(
        String::from_utf8(encode_ok(&StreamDeleteResponse { success: false })).unwrap(),
        r#"{"type":"io.nats.jetstream.api.v1.stream_delete_response"}"#
    );
}

#[test]
fn error_table_is_consistent() {
    let mut codes: Vec<u32> = ERROR_TABLE.iter().map(|d| d.err_code).collect();
    let n = codes.len();
    codes.dedup();
    assert_eq!(codes.len(), n, "err_codes unique and sorted");
    assert!(codes.windows(2).all(|w| w[0] < w[1]));
    // The constructors produce their table row.
    let rows = [
        (ApiError::stream_not_found(), 10059),
        (ApiError::consumer_not_found(), 10014),
        (ApiError::stream_wrong_last_sequence(7), 10071),
        (ApiError::sequence_not_found(9), 10043),
        (ApiError::not_enabled_for_account(), 10039),
        (ApiError::stream_name_exist(), 10058),
        (ApiError::stream_subject_overlap(), 10065),
        (ApiError::message_ttl_disabled(), 10166),
    ];
    for (e, code) in rows {
        let d = ApiError::definition(code).unwrap();
        assert_eq!((e.code, e.err_code), (d.code, d.err_code));
    }
    assert_eq!(
        ApiError::stream_wrong_last_sequence(7).description,
        "wrong last sequence: 7"
    );
    assert_eq!(
        ApiError::sequence_not_found(9).description,
        "sequence 9 not found"
    );
    assert_eq!(
        ApiError::stream_not_found().to_string(),
        "stream not found (10059)"
    );
}

#[test]
fn timestamps_format_like_go() {
    assert_eq!(Timestamp::ZERO.to_string(), "0001-01-01T00:00:00Z");
    assert_eq!(Timestamp::default(), Timestamp::ZERO);
    assert_eq!(Timestamp::UNIX_EPOCH.to_string(), "1970-01-01T00:00:00Z");
    let t = Timestamp::from_unix_nanos(1_795_944_735_955_773_450);
    assert_eq!(
        t.to_string(),
        "2026-11-29T09:32:15.95577345Z",
        "trailing zeros trimmed"
    );
    assert_eq!(
        Timestamp::from_unix_nanos(1_795_944_735_000_000_000).to_string(),
        "2026-11-29T09:32:15Z"
    );
    assert_eq!(
        "2026-11-29T09:32:15.95577345Z"
            .parse::<Timestamp>()
            .unwrap(),
        t
    );
    assert_eq!(
        "2026-11-29T10:32:15.95577345+01:00"
            .parse::<Timestamp>()
            .unwrap(),
        t
    );
    assert_eq!(
        "0001-01-01T00:00:00Z".parse::<Timestamp>().unwrap(),
        Timestamp::ZERO
    );
    assert_eq!(Timestamp::ZERO.unix_nanos(), None);
    assert_eq!(
        "2024-02-29T00:00:00Z"
            .parse::<Timestamp>()
            .unwrap()
            .to_string(),
        "2024-02-29T00:00:00Z"
    );
    for bad in [
        "",
        "2026-11-29",
        "2026-11-29T09:32:15",
        "2026-13-01T00:00:00Z",
        "2023-02-29T00:00:00Z",
        "2026-11-29T09:32:15.Z",
        "2026-11-29T09:32:15.1234567890Z",
        "2026-11-29T24:00:00Z",
    ] {
        assert!(bad.parse::<Timestamp>().is_err(), "{bad}");
    }
}

#[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
struct D {
    #[serde(with = "nanos")]
    d: Duration,
    #[serde(
        with = "nanos::option",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    o: Option<Duration>,
}

#[test]
fn nanos_edges() {
    assert!(serde_json::from_str::<D>(r#"{"d":-1}"#)
        .unwrap_err()
        .to_string()
        .contains(nanos::NEGATIVE));
    assert!(serde_json::from_str::<D>(r#"{"d":1.5}"#).is_err());
    assert_eq!(
        serde_json::from_str::<D>(r#"{"d":0,"o":null}"#).unwrap(),
        D {
            d: Duration::ZERO,
            o: None
        }
    );
    assert_eq!(
        serde_json::to_string(&D {
            d: Duration::MAX,
            o: None
        })
        .unwrap(),
        format!(r#"{{"d":{}}}"#, i64::MAX)
    );
}

proptest! {
    #[test]
    fn nanos_round_trip(n in 0i64..=i64::MAX, o in proptest::option::of(0i64..=i64::MAX)) {
        let v = D { d: Duration::from_nanos(n as u64), o: o.map(|o| Duration::from_nanos(o as u64)) };
        let json = serde_json::to_string(&v).unwrap();
        prop_assert_eq!(serde_json::from_str::<D>(&json).unwrap(), v);
        let prefix = format!(r#"{{"d":{}"#, n);
        prop_assert!(json.starts_with(&prefix));
    }

    #[test]
    fn timestamp_round_trip(n in any::<u64>()) {
        let t = Timestamp::from_unix_nanos(n);
        let s = t.to_string();
        prop_assert_eq!(s.parse::<Timestamp>().unwrap(), t);
        prop_assert_eq!(t.unix_nanos(), Some(n));
        let json = serde_json::to_string(&t).unwrap();
        prop_assert_eq!(serde_json::from_str::<Timestamp>(&json).unwrap(), t);
        prop_assert!(!s.contains(".") || !s.trim_end_matches('Z').ends_with('0'));
    }
}

#[test]
fn null_members_and_null_bodies_mean_not_given() {
    // async-nats sends `null` for unset options and for an empty STREAM.INFO request; Go's
    // decoder leaves such fields at their zero value.
    let cfg = jsproto::api::stream::check_stream_create(
        "ORDERS",
        br#"{"name":"ORDERS","subjects":["orders.>"],"consumer_limits":null,"placement":null,"description":null}"#,
    )
    .expect("nulls accepted");
    assert_eq!(cfg.subjects, ["orders.>"]);
    let req: jsproto::api::stream::StreamInfoRequest =
        jsproto::api::decode_request(b"null").expect("null body");
    assert_eq!(req, Default::default());
    let req: jsproto::api::stream::StreamNamesRequest =
        jsproto::api::decode_request(br#"{"offset":0,"subject":null}"#).expect("null member");
    assert!(req.subject.is_empty());
}

/// The consumer-limits check of a stream update, as nats-server 2.15.1 answered it
/// (`tests/jetstream_stream_rules.rs` checks the same against the running server).
#[test]
fn consumer_limits_update_names_the_consumers_above_a_new_limit() {
    use jsproto::api::consumer::ConsumerConfig;
    use jsproto::api::stream::{check_consumer_limits_update, ConsumerLimits};
    let c = ConsumerConfig {
        max_ack_pending: 1000,
        ..Default::default()
    };
    let d = ConsumerConfig {
        max_ack_pending: 50,
        inactive_threshold: Duration::from_secs(60),
        ..Default::default()
    };
    let unlimited = ConsumerConfig {
        max_ack_pending: -1,
        ..Default::default()
    };
    let consumers = [("C", &c), ("D", &d), ("U", &unlimited)];
    let limits = |secs: u64, pending: i64| ConsumerLimits {
        inactive_threshold: Duration::from_secs(secs),
        max_ack_pending: pending,
    };
    let violates = |names: &str| {
        err(
            500,
            10069,
            &format!("change to limits violates consumers: {names}"),
        )
    };
    let none = ConsumerLimits::default();
    let check = |old: &ConsumerLimits, new: &ConsumerLimits| {
        check_consumer_limits_update(old, new, consumers.iter().map(|(n, c)| (*n, *c)))
    };
    assert_eq!(check(&none, &limits(0, 100)), Err(violates("C")));
    assert_eq!(check(&none, &limits(30, 0)), Err(violates("D")));
    assert_eq!(check(&none, &limits(0, 10)), Err(violates("C, D")));
    assert_eq!(check(&none, &limits(60, 1000)), Ok(()));
    // Unchanged or unset limits are not checked, even when a consumer is above them.
    assert_eq!(check(&limits(0, 10), &limits(0, 10)), Ok(()));
    assert_eq!(check(&limits(0, 10), &none), Ok(()));
}

/// Purge and message delete on sealed / deny streams, and the empty delete request.
#[test]
fn removal_gate_prefers_sealed_over_deny() {
    use jsproto::api::stream::{check_removal_allowed, MsgDeleteRequest};
    let sealed = StreamConfig {
        sealed: true,
        deny_delete: true,
        deny_purge: true,
        ..Default::default()
    };
    let sealed_err = err(400, 10109, "invalid operation on sealed stream");
    assert_eq!(
        check_removal_allowed(&sealed, true),
        Err(sealed_err.clone())
    );
    assert_eq!(check_removal_allowed(&sealed, false), Err(sealed_err));
    let deny = StreamConfig {
        sealed: false,
        ..sealed
    };
    assert_eq!(
        check_removal_allowed(&deny, true),
        Err(err(500, 10110, "stream purge not permitted"))
    );
    assert_eq!(
        check_removal_allowed(&deny, false),
        Err(err(500, 10057, "message delete not permitted"))
    );
    assert_eq!(
        check_removal_allowed(&StreamConfig::default(), true),
        Ok(())
    );
    for empty in [&b""[..], b"{}", b"{ }"] {
        assert_eq!(
            MsgDeleteRequest::decode(empty),
            Err(err(400, 10003, "bad request"))
        );
    }
    assert_eq!(MsgDeleteRequest::decode(br#"{"seq":3}"#).unwrap().seq, 3);
}

/// Settings nats-server 2.15.1 accepts (each of these bodies created a stream there) that this
/// server does not honour: `check_stream_create` passes them as nats-server does, and
/// `check_supported` (which the server runs next) refuses them, naming the setting.
#[test]
fn settings_not_honoured_are_refused_after_the_servers_checks() {
    use jsproto::api::stream::{check_supported, unsupported_setting};
    let refused = [
        (r#"{"name":"R","mirror":{"name":"X"}}"#, "mirror"),
        (
            r#"{"name":"R","subjects":["r.>"],"sources":[{"name":"X"}]}"#,
            "sources",
        ),
        (
            r#"{"name":"R","subjects":["r.>"],"compression":"s2"}"#,
            "compression",
        ),
        (
            r#"{"name":"R","subjects":["r.>"],"first_seq":100}"#,
            "first_seq",
        ),
        (
            r#"{"name":"R","subjects":["r.>"],"subject_transform":{"src":"r.>","dest":"q.>"}}"#,
            "subject_transform",
        ),
        (
            r#"{"name":"R","subjects":["r.>"],"republish":{"src":">","dest":"rp.>"}}"#,
            "republish",
        ),
        (
            r#"{"name":"R","subjects":["r.>"],"allow_msg_counter":true}"#,
            "allow_msg_counter",
        ),
        (
            r#"{"name":"R","subjects":["r.>"],"allow_atomic":true}"#,
            "allow_atomic",
        ),
        (
            r#"{"name":"R","subjects":["r.>"],"allow_msg_schedules":true}"#,
            "allow_msg_schedules",
        ),
        (
            r#"{"name":"R","subjects":["r.>"],"persist_mode":"async"}"#,
            "persist_mode async",
        ),
        (
            r#"{"name":"R","subjects":["r.>"],"allow_batched":true}"#,
            "allow_batched",
        ),
    ];
    for (body, name) in refused {
        let cfg = check_stream_create("R", body.as_bytes())
            .unwrap_or_else(|e| panic!("{body}: nats-server accepts this: {e}"));
        assert_eq!(unsupported_setting(&cfg), Some(name), "{body}");
        assert_eq!(
            check_supported(&cfg),
            Err(err(
                500,
                10052,
                &format!("{name} is not supported by this server yet")
            )),
            "{body}"
        );
    }
    // Honoured, or without effect on a standalone nats-server too: accepted.
    let accepted = [
        r#"{"name":"R","subjects":["r.>"],"placement":{"cluster":"C1","tags":["a"]}}"#,
        r#"{"name":"R","subjects":["r.>"],"compression":"s2","storage":"memory"}"#,
        r#"{"name":"R","subjects":["r.>"],"compression":"none","persist_mode":"default"}"#,
        r#"{"name":"R","subjects":["r.>"],"persist_mode":""}"#,
        r#"{"name":"R","subjects":["r.>"],"allow_direct":true,"no_ack":true,"deny_delete":true,"deny_purge":true}"#,
        r#"{"name":"R","subjects":["r.>"],"discard":"new","max_msgs_per_subject":1,"discard_new_per_subject":true}"#,
        r#"{"name":"R","subjects":["r.>"],"allow_msg_ttl":true,"subject_delete_marker_ttl":1000000000}"#,
        r#"{"name":"R","subjects":["r.>"],"consumer_limits":{"inactive_threshold":1000000000,"max_ack_pending":5}}"#,
        r#"{"name":"R","subjects":["r.>"],"mirror":null,"sources":null,"republish":null}"#,
    ];
    for body in accepted {
        let cfg = check_stream_create("R", body.as_bytes()).unwrap();
        assert_eq!(check_supported(&cfg), Ok(()), "{body}");
    }
    // An update that adds one is refused the same way (after the update rules: a mirror added
    // later is still 10055, as nats-server answers).
    let current = stored(r#"{"name":"U","subjects":["u.>"]}"#);
    let update = check_stream_update(
        "U",
        br#"{"name":"U","subjects":["u.>"],"republish":{"dest":"x.>"}}"#,
        &current,
    )
    .unwrap();
    assert_eq!(unsupported_setting(&update), Some("republish"));
}
