//! The JetStream API types against responses recorded from nats-server 2.15.1
//! (`tests/fixtures/`, see its README): every fixture parses, re-encodes to the same bytes, and
//! the config our defaults produce for the recorded request is the config the server echoed.

use std::path::PathBuf;

use jsproto::api::stream::{
    check_stream_create, check_stream_update, StreamCreateResponse, StreamDeleteResponse,
    StreamInfoResponse, StreamListResponse, StreamMsgDeleteResponse, StreamMsgGetResponse,
    StreamNamesResponse, StreamPurgeResponse, StreamUpdateResponse,
};
use jsproto::api::{
    decode_response, encode_error, encode_ok, to_json, AccountInfo, ApiError, ApiResponse, PubAck,
    StreamConfig,
};
use serde::de::DeserializeOwned;
use serde_json::Value;

const SERVER_VERSION: &str = "2.15.1";

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
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

fn last_token(subject: &str) -> &str {
    subject.rsplit('.').next().unwrap()
}

/// Parses a success fixture as `T`, checks the `type`, and re-encodes it to the same bytes.
fn round_trip_ok<T: ApiResponse + DeserializeOwned>(name: &str) -> T {
    let bytes = response(name);
    let body: T = decode_response::<T>(&bytes)
        .unwrap()
        .unwrap_or_else(|e| panic!("{name}: unexpected error {e}"));
    let v: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(v["type"], T::TYPE, "{name}");
    assert_eq!(
        String::from_utf8(encode_ok(&body)).unwrap(),
        String::from_utf8(bytes).unwrap(),
        "{name}"
    );
    body
}

/// Parses an error fixture as the error of `T`, checks it equals `expected`, and that
/// `encode_error::<T>` writes the same bytes.
fn round_trip_err<T: ApiResponse + DeserializeOwned>(name: &str, expected: ApiError) {
    let bytes = response(name);
    let err = decode_response::<T>(&bytes)
        .unwrap()
        .err()
        .unwrap_or_else(|| panic!("{name}: expected an error"));
    assert_eq!(err, expected, "{name}");
    assert_eq!(
        String::from_utf8(encode_error::<T>(&expected)).unwrap(),
        String::from_utf8(bytes).unwrap(),
        "{name}"
    );
}

/// The defaulted config for the recorded CREATE request, with the response metadata, is the
/// server's echoed `config`, byte for byte.
fn assert_defaults_match(name: &str, echoed: &StreamConfig) {
    let (subject, body) = request(name);
    let ours = check_stream_create(last_token(&subject), &body)
        .unwrap()
        .with_dynamic_metadata(SERVER_VERSION);
    assert_eq!(&ours, echoed, "{name}");
    // `echoed` re-encodes to the fixture's bytes (round_trip_ok), so this is a byte comparison
    // with the server's `config` object.
    assert_eq!(
        String::from_utf8(to_json(&ours)).unwrap(),
        String::from_utf8(to_json(echoed)).unwrap()
    );
    let raw = String::from_utf8(response(name)).unwrap();
    assert!(
        raw.contains(&format!(
            "\"config\":{}",
            String::from_utf8(to_json(&ours)).unwrap()
        )),
        "{name}"
    );
}

#[test]
fn stream_create_fixtures_round_trip_and_defaults_match() {
    for name in [
        "stream_create_minimal",
        "stream_create_nats_py",
        "stream_create_full",
        "stream_create_max_age",
    ] {
        let r: StreamCreateResponse = round_trip_ok(name);
        assert!(r.did_create, "{name}");
        assert!(
            r.info.cluster.is_none(),
            "{name}: CREATE responses have no cluster"
        );
        assert_defaults_match(name, &r.info.config);
    }
}

#[test]
fn minimal_create_is_what_the_server_echoes() {
    let r: StreamCreateResponse = round_trip_ok("stream_create_minimal");
    let c = &r.info.config;
    assert_eq!(c.subjects, ["orders.>"]);
    assert_eq!(
        (
            c.max_msgs,
            c.max_bytes,
            c.max_msgs_per_subject,
            c.max_msg_size,
            c.max_consumers
        ),
        (-1, -1, -1, -1, -1)
    );
    assert_eq!(c.max_age, std::time::Duration::ZERO);
    assert_eq!(c.duplicate_window, std::time::Duration::from_secs(120));
    assert_eq!(c.num_replicas, 1);
    assert!(r.info.state.first_ts.is_zero() && r.info.state.last_ts.is_zero());
    assert_eq!(r.info.created.to_string(), "2026-11-29T09:32:19.771884379Z");
}

#[test]
fn max_age_caps_the_duplicate_window() {
    let r: StreamCreateResponse = round_trip_ok("stream_create_max_age");
    assert_eq!(
        r.info.config.duplicate_window,
        std::time::Duration::from_secs(60)
    );
    assert_eq!(
        r.info.config.subjects,
        ["AGE"],
        "subjects default to [name]"
    );
}

#[test]
fn stream_info_fixtures_round_trip() {
    let r: StreamInfoResponse = round_trip_ok("stream_info");
    assert_eq!((r.total, r.offset, r.limit), (0, 0, 0));
    assert!(r
        .info
        .cluster
        .as_ref()
        .is_some_and(|c| !c.leader.is_empty()));
    assert_eq!(r.info.state.messages, 4);

    let r: StreamInfoResponse = round_trip_ok("stream_info_subjects");
    assert_eq!((r.total, r.limit), (3, 100_000));
    assert_eq!(r.info.state.subjects.get("orders.a"), Some(&2));

    let r: StreamInfoResponse = round_trip_ok("stream_info_deleted");
    assert_eq!(
        (r.info.state.num_deleted, r.info.state.deleted.as_slice()),
        (1, &[3][..])
    );

    let r: StreamInfoResponse = round_trip_ok("stream_info_purged");
    let s = &r.info.state;
    assert_eq!((s.messages, s.first_seq, s.last_seq), (0, 5, 4));
    assert!(s.first_ts.is_zero() && !s.last_ts.is_zero());

    round_trip_err::<StreamInfoResponse>("stream_info_not_found", ApiError::stream_not_found());
}

#[test]
fn update_fixture_round_trips_and_matches_our_update() {
    let r: StreamUpdateResponse = round_trip_ok("stream_update");
    let created: StreamCreateResponse = decode_response(&response("stream_create_minimal"))
        .unwrap()
        .unwrap();
    let mut stored = created.info.config.clone();
    stored.set_static_metadata();
    let (subject, body) = request("stream_update");
    let ours = check_stream_update(last_token(&subject), &body, &stored).unwrap();
    assert_eq!(ours.with_dynamic_metadata(SERVER_VERSION), r.info.config);

    let (subject, body) = request("stream_update_storage");
    let err = check_stream_update(last_token(&subject), &body, &stored).unwrap_err();
    assert_eq!(
        err,
        ApiError::stream_invalid_config("stream configuration update can not change storage type")
    );
    round_trip_err::<StreamUpdateResponse>("stream_update_storage", err);
}

#[test]
fn create_error_fixtures() {
    let (subject, body) = request("stream_create_replicas");
    let err = check_stream_create(last_token(&subject), &body).unwrap_err();
    assert_eq!(err, ApiError::stream_replicas_not_supported());
    round_trip_err::<StreamCreateResponse>("stream_create_replicas", err);

    let (subject, body) = request("stream_create_unknown_field");
    let err = check_stream_create(last_token(&subject), &body).unwrap_err();
    assert_eq!(
        err,
        ApiError::invalid_json(r#"json: unknown field "bogus""#)
    );
    round_trip_err::<StreamCreateResponse>("stream_create_unknown_field", err);

    round_trip_err::<StreamCreateResponse>(
        "stream_create_exists_different",
        ApiError::stream_name_exist(),
    );
}

#[test]
fn existing_stream_comparison() {
    let created: StreamCreateResponse = decode_response(&response("stream_create_minimal"))
        .unwrap()
        .unwrap();
    let mut stored = created.info.config;
    stored.set_static_metadata();
    let same =
        check_stream_create("ORDERS", br#"{"name":"ORDERS","subjects":["orders.>"]}"#).unwrap();
    assert!(same.same_as(&stored), "idempotent create");
    let (subject, body) = request("stream_create_exists_different");
    let different = check_stream_create(last_token(&subject), &body).unwrap();
    assert!(!different.same_as(&stored), "10058");
    // Another stream on an overlapping subject: 10065.
    let other = check_stream_create("SUB5", br#"{"name":"SUB5","subjects":["orders.x"]}"#).unwrap();
    assert!(other.subjects_overlap(&stored.subjects));
}

#[test]
fn names_list_fixtures_round_trip() {
    let r: StreamNamesResponse = round_trip_ok("stream_names");
    assert_eq!(r.streams, ["AGE", "FULL", "ORDERS", "PY"]);
    assert_eq!(r.limit, 1024);
    let r: StreamNamesResponse = round_trip_ok("stream_names_empty");
    assert!(r.streams.is_empty());
    round_trip_ok::<StreamNamesResponse>("stream_names_filtered");
    round_trip_ok::<StreamNamesResponse>("stream_names_filtered_empty");
    round_trip_err::<StreamNamesResponse>(
        "stream_names_error",
        ApiError::invalid_json(r#"json: unknown field "bogus""#),
    );
    let (_, body) = request("stream_names_error");
    let err = jsproto::api::decode_request::<jsproto::api::stream::StreamNamesRequest>(&body)
        .unwrap_err();
    assert_eq!(
        err,
        ApiError::invalid_json(r#"json: unknown field "bogus""#)
    );

    let r: StreamListResponse = round_trip_ok("stream_list");
    assert_eq!(r.streams.len(), 1);
    assert!(r.streams[0].cluster.is_none());
    assert_eq!(
        r.streams[0].config.metadata.len(),
        1,
        "LIST shows only the stored _nats.req.level"
    );
    let r: StreamListResponse = round_trip_ok("stream_list_empty");
    assert!(r.streams.is_empty());
}

#[test]
fn delete_purge_msg_fixtures_round_trip() {
    assert!(round_trip_ok::<StreamDeleteResponse>("stream_delete").success);
    round_trip_err::<StreamDeleteResponse>("stream_delete_not_found", ApiError::stream_not_found());

    let r: StreamPurgeResponse = round_trip_ok("stream_purge");
    assert_eq!((r.success, r.purged), (true, 3));
    round_trip_ok::<StreamPurgeResponse>("stream_purge_keep");
    let (_, body) = request("stream_purge_error");
    let req: jsproto::api::stream::StreamPurgeRequest =
        jsproto::api::decode_request(&body).unwrap();
    assert_eq!(req.check(), Err(ApiError::bad_request()));
    assert_eq!(
        jsproto::api::stream::StreamPurgeRequest::parse(&body),
        Err(ApiError::bad_request())
    );
    round_trip_err::<StreamPurgeResponse>("stream_purge_error", ApiError::bad_request());
    // Only `{…}` / `[…]` bodies are read as JSON (nats-server's isJSONObjectOrArray).
    for purge_all in [&b""[..], b"hello", b"1", b"null", b" \n"] {
        assert_eq!(
            jsproto::api::stream::StreamPurgeRequest::parse(purge_all),
            Ok(Default::default()),
            "{purge_all:?}"
        );
    }
    let err = jsproto::api::stream::StreamPurgeRequest::parse(b" []").unwrap_err();
    assert_eq!(err.err_code, 10025);

    let r: StreamMsgGetResponse = round_trip_ok("stream_msg_get");
    assert_eq!(r.message.subject, "orders.b");
    assert_eq!(
        r.message.hdrs,
        b"NATS/1.0\r\nNats-Msg-Id: x1\r\nFoo: bar\r\n\r\n"
    );
    assert_eq!(r.message.data, b"two");
    let r: StreamMsgGetResponse = round_trip_ok("stream_msg_get_no_data");
    assert!(r.message.hdrs.is_empty() && r.message.data.is_empty());
    let (_, body) = request("stream_msg_get_bad_request");
    let req: jsproto::api::stream::MsgGetRequest = jsproto::api::decode_request(&body).unwrap();
    assert_eq!(req.selector(), Err(ApiError::bad_request()));
    round_trip_err::<StreamMsgGetResponse>("stream_msg_get_bad_request", ApiError::bad_request());
    round_trip_err::<StreamMsgGetResponse>(
        "stream_msg_get_not_found",
        ApiError::no_message_found(),
    );

    assert!(round_trip_ok::<StreamMsgDeleteResponse>("stream_msg_delete").success);
}

#[test]
fn account_info_fixtures_round_trip() {
    let empty: AccountInfo = round_trip_ok("account_info_empty");
    // Recorded after two API requests (NAMES, LIST): otherwise a fresh standalone account.
    let expected = AccountInfo {
        api: jsproto::api::ApiStats {
            total: 2,
            ..Default::default()
        },
        ..Default::default()
    };
    assert_eq!(empty, expected);
    let r: AccountInfo = round_trip_ok("account_info");
    assert_eq!(
        (r.usage.streams, r.usage.storage, r.usage.reserved_memory),
        (4, 163, 1000)
    );
    assert_eq!((r.api.level, r.api.total, r.api.errors), (5, 18, 3));
}

#[test]
fn pub_ack_fixtures_are_exact() {
    for name in ["pub_ack", "pub_ack_duplicate", "pub_ack_error"] {
        let bytes = response(name);
        let ack: PubAck = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(
            String::from_utf8(ack.encode()).unwrap(),
            String::from_utf8(bytes).unwrap(),
            "{name}"
        );
    }
    assert_eq!(PubAck::new("ORDERS", 1).encode(), response("pub_ack"));
    assert_eq!(
        PubAck {
            duplicate: true,
            ..PubAck::new("ORDERS", 2)
        }
        .encode(),
        response("pub_ack_duplicate")
    );
    assert_eq!(
        PubAck::encode_error("ORDERS", &ApiError::stream_wrong_last_sequence(2)),
        response("pub_ack_error")
    );
}
