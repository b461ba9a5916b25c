//! The clustered JetStream API types (`jsproto::api::cluster`) against what nats-server 2.15.1
//! answered a 3-node cluster and a standalone server (`tests/fixtures/cluster/`, recorded by
//! its `record.py`, see its README): every recording parses, and our encoding of what we
//! parsed is the server's bytes.

use std::path::PathBuf;

use jsproto::api::cluster::{
    preferred_already_leader, preferred_not_known, ConsumerLeaderStepdownResponse, Health,
    LeaderStepdownRequest, MetaClusterInfo, MetaLeaderStepdownResponse, MetaServerRemoveRequest,
    MetaServerRemoveResponse, StreamLeaderStepdownResponse, StreamRemovePeerRequest,
    StreamRemovePeerResponse,
};
use jsproto::api::consumer::ConsumerInfoResponse;
use jsproto::api::stream::StreamInfoResponse;
use jsproto::api::{
    decode_request, decode_response, encode_error, encode_ok, to_json, ApiError, ApiResponse,
};
use serde::de::DeserializeOwned;
use serde_json::Value;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cluster")
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

/// (status, path, body) of a recorded monitoring answer.
fn http(name: &str) -> (u16, String, Vec<u8>) {
    let raw = std::fs::read(dir().join(format!("{name}.http"))).unwrap();
    let nl = raw.iter().position(|&b| b == b'\n').unwrap();
    let head = String::from_utf8(raw[..nl].to_vec()).unwrap();
    let (status, path) = head.split_once(' ').unwrap();
    (
        status.parse().unwrap(),
        path.to_owned(),
        raw[nl + 1..].to_vec(),
    )
}

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

/// Go's compact JSON of pretty-printed JSON: the whitespace outside strings removed.
fn compact(pretty: &[u8]) -> Vec<u8> {
    let (mut out, mut in_str, mut esc) = (Vec::new(), false, false);
    for &b in pretty {
        if in_str {
            out.push(b);
            match (esc, b) {
                (true, _) => esc = false,
                (false, b'\\') => esc = true,
                (false, b'"') => in_str = false,
                _ => {}
            }
        } else if !b.is_ascii_whitespace() {
            in_str = b == b'"';
            out.push(b);
        }
    }
    out
}

/// The raw bytes of the object after `"key":` in compact JSON (the first occurrence).
fn raw_member<'a>(json: &'a [u8], key: &str) -> &'a [u8] {
    let needle = format!("\"{key}\":{{");
    let start = json
        .windows(needle.len())
        .position(|w| w == needle.as_bytes())
        .unwrap_or_else(|| panic!("no {key}"))
        + needle.len()
        - 1;
    let (mut depth, mut in_str, mut esc) = (0, false, false);
    for (i, &b) in json[start..].iter().enumerate() {
        if in_str {
            match (esc, b) {
                (true, _) => esc = false,
                (false, b'\\') => esc = true,
                (false, b'"') => in_str = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_str = true,
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return &json[start..=start + i];
                }
            }
            _ => {}
        }
    }
    panic!("unbalanced {key}");
}

#[test]
fn stream_and_consumer_info_with_cluster() {
    for name in [
        "stream_info_r3",
        "stream_info_r1",
        "stream_info_offline",
        "stream_info_no_leader",
    ] {
        round_trip_ok::<StreamInfoResponse>(name);
    }
    for name in [
        "consumer_info_r3",
        "consumer_info_r1",
        "consumer_info_offline",
    ] {
        round_trip_ok::<ConsumerInfoResponse>(name);
    }

    let r3 = round_trip_ok::<StreamInfoResponse>("stream_info_r3");
    let c = r3.info.cluster.expect("cluster");
    assert_eq!(c.name, "C");
    assert!(c.raft_group.starts_with("S-R3F-"), "{}", c.raft_group);
    assert!(!c.leader.is_empty() && c.leader_since.is_some());
    assert!(c.system_account);
    assert_eq!(c.traffic_account, "SYS");
    assert_eq!(c.replicas.len(), 2);
    assert!(c
        .replicas
        .iter()
        .all(|p| p.name != c.leader && p.peer.len() == 8));

    let r1 = round_trip_ok::<StreamInfoResponse>("stream_info_r1");
    let c = r1.info.cluster.expect("cluster");
    assert_eq!((c.name.as_str(), c.raft_group.as_str()), ("C", ""));
    assert!(c.replicas.is_empty() && c.leader_since.is_none());

    // n3 stopped: offline (still current for the stream: it had everything when it left).
    let off = round_trip_ok::<StreamInfoResponse>("stream_info_offline");
    let c = off.info.cluster.expect("cluster");
    let n3 = c.replicas.iter().find(|p| p.name == "n3").expect("n3");
    assert!(n3.offline);
    let off = round_trip_ok::<ConsumerInfoResponse>("consumer_info_offline");
    let c = off.info.cluster.expect("cluster");
    let n3 = c.replicas.iter().find(|p| p.name == "n3").expect("n3");
    assert!(n3.offline && !n3.current && n3.lag > 0 && n3.active.is_zero());
}

#[test]
fn leader_stepdowns() {
    for name in ["stream_stepdown", "stream_stepdown_preferred"] {
        assert!(round_trip_ok::<StreamLeaderStepdownResponse>(name).success);
    }
    assert!(round_trip_ok::<ConsumerLeaderStepdownResponse>("consumer_stepdown").success);
    assert!(round_trip_ok::<MetaLeaderStepdownResponse>("meta_stepdown").success);

    // The recorded request bodies are what our request type writes and reads.
    assert_eq!(request("stream_stepdown").1, b"");
    let (subject, body) = request("stream_stepdown_preferred");
    assert_eq!(subject, "$JS.API.STREAM.LEADER.STEPDOWN.R3");
    let req: LeaderStepdownRequest = decode_request(&body).unwrap();
    let preferred = req.placement.as_ref().unwrap().preferred.clone();
    // (record.py wrote this body with Python's `json.dumps`, spaces after the colons.)
    assert_eq!(
        to_json(&LeaderStepdownRequest::preferred(&preferred)),
        compact(&body)
    );

    round_trip_err::<StreamLeaderStepdownResponse>(
        "stream_stepdown_preferred_unknown",
        preferred_not_known("nX"),
    );
    let (_, body) = request("stream_stepdown_bad_json");
    let err = decode_request::<LeaderStepdownRequest>(&body).unwrap_err();
    round_trip_err::<StreamLeaderStepdownResponse>("stream_stepdown_bad_json", err);
    round_trip_err::<StreamLeaderStepdownResponse>(
        "stream_stepdown_not_found",
        ApiError::stream_not_found(),
    );
    round_trip_err::<ConsumerLeaderStepdownResponse>(
        "consumer_stepdown_not_found",
        ApiError::consumer_not_found(),
    );
    round_trip_err::<ConsumerLeaderStepdownResponse>(
        "consumer_stepdown_stream_not_found",
        ApiError::stream_not_found(),
    );
    let (_, body) = request("meta_stepdown_bad_json");
    let err = decode_request::<LeaderStepdownRequest>(&body).unwrap_err();
    round_trip_err::<MetaLeaderStepdownResponse>("meta_stepdown_bad_json", err);
    round_trip_err::<MetaLeaderStepdownResponse>(
        "meta_stepdown_preferred_unknown",
        preferred_not_known("nX"),
    );
    let (_, body) = request("meta_stepdown_preferred_leader");
    let leader = decode_request::<LeaderStepdownRequest>(&body)
        .unwrap()
        .placement
        .unwrap()
        .preferred;
    round_trip_err::<MetaLeaderStepdownResponse>(
        "meta_stepdown_preferred_leader",
        preferred_already_leader(&leader),
    );
}

#[test]
fn peer_and_server_removal() {
    let (_, body) = request("peer_remove_not_member");
    let req: StreamRemovePeerRequest = decode_request(&body).unwrap();
    assert_eq!(req.peer, "nX");
    assert_eq!(to_json(&req), body);
    round_trip_err::<StreamRemovePeerResponse>(
        "peer_remove_not_member",
        ApiError::cluster_peer_not_member(),
    );
    round_trip_err::<StreamRemovePeerResponse>("peer_remove_empty", ApiError::bad_request());
    let (_, body) = request("peer_remove_bad_json");
    let err = decode_request::<StreamRemovePeerRequest>(&body).unwrap_err();
    round_trip_err::<StreamRemovePeerResponse>("peer_remove_bad_json", err);
    round_trip_err::<StreamRemovePeerResponse>(
        "peer_remove_not_found",
        ApiError::stream_not_found(),
    );

    let (_, body) = request("server_remove_not_member");
    let req: MetaServerRemoveRequest = decode_request(&body).unwrap();
    assert_eq!(req.peer, "nX");
    assert_eq!(to_json(&req), body);
    round_trip_err::<MetaServerRemoveResponse>(
        "server_remove_not_member",
        ApiError::cluster_server_not_member(),
    );
    round_trip_err::<MetaServerRemoveResponse>("server_remove_empty", ApiError::bad_request());
    let (_, body) = request("server_remove_peer_id_not_member");
    let req: MetaServerRemoveRequest = decode_request(&body).unwrap();
    assert_eq!((req.peer.as_str(), req.peer_id.as_str()), ("", "XXXXXXXX"));
    assert_eq!(to_json(&req), body);
    round_trip_err::<MetaServerRemoveResponse>(
        "server_remove_peer_id_not_member",
        ApiError::cluster_server_not_member(),
    );
    let (_, body) = request("server_remove_bad_json");
    let err = decode_request::<MetaServerRemoveRequest>(&body).unwrap_err();
    round_trip_err::<MetaServerRemoveResponse>("server_remove_bad_json", err);
    assert_eq!(
        encode_ok(&MetaServerRemoveResponse { success: true }),
        br#"{"type":"io.nats.jetstream.api.v1.meta_server_remove_response","success":true}"#
    );
}

#[test]
fn standalone_answers_clustering_required() {
    round_trip_err::<StreamLeaderStepdownResponse>(
        "standalone_stream_stepdown",
        ApiError::cluster_required(),
    );
    round_trip_err::<ConsumerLeaderStepdownResponse>(
        "standalone_consumer_stepdown",
        ApiError::cluster_required(),
    );
    round_trip_err::<StreamRemovePeerResponse>(
        "standalone_peer_remove",
        ApiError::cluster_required(),
    );
}

#[test]
fn jsz_meta_cluster() {
    for (name, leaderless) in [
        ("jsz_n1", false),
        ("jsz_n2", false),
        ("jsz_n3", false),
        ("jsz_offline_n1", false),
        ("jsz_no_leader", true),
    ] {
        let (status, path, body) = http(name);
        assert_eq!((status, path.as_str()), (200, "jsz"), "{name}");
        let body = compact(&body);
        let raw = raw_member(&body, "meta_cluster");
        let meta: MetaClusterInfo = serde_json::from_slice(raw).unwrap();
        assert_eq!(
            String::from_utf8(to_json(&meta)).unwrap(),
            String::from_utf8(raw.to_vec()).unwrap(),
            "{name}"
        );
        assert_eq!((meta.name.as_str(), meta.cluster_size), ("C", 3), "{name}");
        assert_eq!(meta.quorum_needed, 2);
        assert_eq!(meta.leader.is_empty(), leaderless, "{name}");
        assert_eq!(meta.peer.is_empty(), leaderless, "{name}");
        assert!(meta.snapshot.is_some());
    }
    // Leaderless: every peer is listed, the answering server (n1) included.
    let (_, _, body) = http("jsz_no_leader");
    let body = compact(&body);
    let meta: MetaClusterInfo = serde_json::from_slice(raw_member(&body, "meta_cluster")).unwrap();
    let names: Vec<&str> = meta.replicas.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["n1", "n2", "n3"]);
    assert!(meta.replicas[1].offline && meta.replicas[2].offline);
    // Standalone: no meta_cluster at all.
    let (_, _, body) = http("jsz_standalone");
    let v: Value = serde_json::from_slice(&body).unwrap();
    assert!(v.get("meta_cluster").is_none());
}

#[test]
fn server_ping_meta() {
    let mut leaders = 0;
    for name in ["server_ping_n1", "server_ping_n2", "server_ping_n3"] {
        let body = response(name);
        let jetstream = raw_member(&body, "jetstream");
        let raw = raw_member(jetstream, "meta");
        let meta: MetaClusterInfo = serde_json::from_slice(raw).unwrap();
        assert_eq!(to_json(&meta), raw, "{name}");
        // The leader names the cluster and lists replicas; followers say "_meta_" and do not.
        if meta.name == "C" {
            leaders += 1;
            assert_eq!(meta.replicas.len(), 2);
        } else {
            assert_eq!(meta.name, "_meta_");
            assert!(meta.replicas.is_empty());
        }
    }
    assert_eq!(leaders, 1);
}

#[test]
fn healthz() {
    for (name, expected) in [
        ("healthz_ok", Health::ok()),
        ("healthz_no_meta_leader", Health::no_meta_leader()),
        (
            "healthz_no_meta_leader_details",
            Health::no_meta_leader_details(),
        ),
        ("healthz_no_meta_leader_js_server_only", Health::ok()),
    ] {
        let (status, _, body) = http(name);
        let parsed: Health = serde_json::from_slice(&body).unwrap();
        assert_eq!(parsed, expected, "{name}");
        assert_eq!(to_json(&expected), body, "{name}");
        assert_eq!(expected.http_status(), status, "{name}");
    }
}
