//! The clustered JetStream API: who leads a Raft group and how its replicas are doing
//! ([`ClusterInfo`], [`PeerInfo`], the meta group's [`MetaClusterInfo`]), the leader step-down,
//! peer removal and server removal endpoints, and the `/healthz` answers ([`Health`]).
//!
//! | Subject | Request | Response (`type` suffix) |
//! |---|---|---|
//! | `$JS.API.STREAM.LEADER.STEPDOWN.<s>` | [`LeaderStepdownRequest`] | [`StreamLeaderStepdownResponse`] (`stream_leader_stepdown_response`) |
//! | `$JS.API.CONSUMER.LEADER.STEPDOWN.<s>.<c>` | [`LeaderStepdownRequest`] | [`ConsumerLeaderStepdownResponse`] (`consumer_leader_stepdown_response`) |
//! | `$JS.API.META.LEADER.STEPDOWN` (system account only) | [`LeaderStepdownRequest`] | [`MetaLeaderStepdownResponse`] (`meta_leader_stepdown_response`) |
//! | `$JS.API.STREAM.PEER.REMOVE.<s>` | [`StreamRemovePeerRequest`] | [`StreamRemovePeerResponse`] (`stream_remove_peer_response`) |
//! | `$JS.API.SERVER.REMOVE` (system account only) | [`MetaServerRemoveRequest`] | [`MetaServerRemoveResponse`] (`meta_server_remove_response`) |
//!
//! Everything here is as nats-server 2.15.1 answered a 3-node cluster and a standalone server,
//! recorded in `tests/fixtures/cluster/` (its README says how; `tests/api_cluster.rs` checks
//! every recording parses and re-encodes to the same bytes). What it answered:
//!
//! * **Success** of the five endpoints is `{"type":…,"success":true}`; an error carries no
//!   `success` at all.
//! * **Standalone** (no cluster): stream and consumer step-down and peer removal answer
//!   [`ApiError::cluster_required`] (503/10010), whether or not the stream exists; the meta
//!   step-down and server removal are not answered at all (the request times out).
//! * **Meta step-down and server removal from an account other than the system account** are
//!   not answered either.
//! * **Unknown stream / consumer**: 10059 / 10014, as the other endpoints.
//! * **Request bodies are strict**: an unknown field is 10025 (`invalid JSON: json: unknown
//!   field "bogus"`) for all five, as [`super::decode_request`] answers.
//! * **A preferred server** (`{"placement":{"preferred":"n2"}}`) that is not a peer of the
//!   group: [`preferred_not_known`] (400/10005); the meta group's current leader as preferred:
//!   [`preferred_already_leader`] (400/10005).
//! * **Peer removal** of a server that is not one of the stream's peers: 10040
//!   ([`ApiError::cluster_peer_not_member`]); an empty body: 10003 (`bad request`). **Server
//!   removal** of an unknown server: 10044 ([`ApiError::cluster_server_not_member`]); an empty
//!   body: 10003.
//! * **Meta group without a leader**: requests that need it answered 503/10008
//!   ([`ApiError::cluster_not_avail`]) in one session; a peer removal once answered 503/10075
//!   ([`ApiError::peer_remap`]); `/healthz` answers 503 ([`Health::no_meta_leader`]).
//!
//! Durations are integer nanoseconds on the wire, times RFC 3339 UTC strings.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::stream::Placement;
use super::{nanos, null_as_default, ApiError, ApiResponse, Timestamp};

fn is_false(b: &bool) -> bool {
    !*b
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

// ---------------------------------------------------------------------------------------------
// Cluster info
// ---------------------------------------------------------------------------------------------

/// One replica of a Raft group other than its leader (nats-server's `PeerInfo`), an entry of
/// [`ClusterInfo::replicas`] and [`MetaClusterInfo::replicas`].
///
/// Written as `{"name":"n3","current":false,"offline":true,"active":0,"lag":6,"peer":"BXScrY9i"}`:
/// `name`, `current` and `active` always, `offline` and `lag` only when set, then `peer`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerInfo {
    /// `name`: the server's name.
    #[serde(default)]
    pub name: String,
    /// `current`: the replica has everything the leader has (caught up). Always written.
    #[serde(default)]
    pub current: bool,
    /// `offline`: the server is known to be gone (nats-server sets it once the server said it
    /// shuts down or its peers lost it; a replica can be `current` and `offline` at once).
    /// Omitted when false.
    #[serde(default, skip_serializing_if = "is_false")]
    pub offline: bool,
    /// `active`: how long ago the leader last heard from this replica, in nanoseconds on the
    /// wire; `0` when never (or, on a leaderless group, for the peers it cannot see). Always
    /// written.
    #[serde(default, with = "nanos")]
    pub active: Duration,
    /// `lag`: how many log entries this replica is behind the leader. Omitted when 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub lag: u64,
    /// `peer`: the server's Raft peer id (8 characters, e.g. `"44jzkV9D"`, derived from its
    /// name). Written in every entry nats-server 2.15.1 sent; omitted here when empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub peer: String,
}

/// `cluster` of a StreamInfo or ConsumerInfo (nats-server's `ClusterInfo`): the group's leader
/// and the other replicas.
///
/// Order and omission as the server: `name?, raft_group?, leader?, leader_since?,
/// system_account?, traffic_account?, replicas?`. What 2.15.1 wrote:
///
/// * standalone STREAM.INFO: only `{"leader":"<server name>"}` (CREATE, UPDATE, LIST and
///   consumer infos have no `cluster`);
/// * clustered, one replica: `{"name":"C","leader":"n1"}` (streams and consumers alike);
/// * clustered, replicated: `{"name":"C","raft_group":"S-R3F-fa7T2zOo","leader":"n1",
///   "leader_since":"…Z","system_account":true,"traffic_account":"SYS","replicas":[…]}` with
///   one [`PeerInfo`] per replica other than the leader;
/// * a group without a leader: no `leader` nor `leader_since`, and `replicas` lists every peer,
///   the answering server included.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterInfo {
    /// `name` of the cluster; omitted when empty (standalone).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// `raft_group`: the group's name (`S-R3F-…` for a stream, `C-R3F-…` for a consumer);
    /// omitted when empty (standalone, one replica).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub raft_group: String,
    /// `leader`: the leading server's name (standalone: the server's name, its id by
    /// default); omitted when the group has no leader.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub leader: String,
    /// `leader_since`: when the current leader took over; omitted when absent (no leader,
    /// one replica, standalone, and in `/jsz`'s stream details).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader_since: Option<Timestamp>,
    /// `system_account`: the group's replication traffic goes through the system account.
    /// Omitted when false.
    #[serde(default, skip_serializing_if = "is_false")]
    pub system_account: bool,
    /// `traffic_account`: the account the replication traffic goes through (`"SYS"` when
    /// `system_account`). Omitted when empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub traffic_account: String,
    /// `replicas`: the group's other peers. Omitted when empty.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub replicas: Vec<PeerInfo>,
}

/// `snapshot` of a [`MetaClusterInfo`]: the meta group's log since its last snapshot.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetaSnapshotInfo {
    /// `pending_entries`: log entries not in a snapshot yet.
    #[serde(default)]
    pub pending_entries: u64,
    /// `pending_size`: their size in bytes.
    #[serde(default)]
    pub pending_size: u64,
    /// `last_time`: when the last snapshot was taken; the zero time
    /// (`"0001-01-01T00:00:00Z"`) before the first. Always written.
    #[serde(default)]
    pub last_time: Timestamp,
    /// `last_duration`: how long taking it took, nanoseconds on the wire. Omitted when 0.
    #[serde(default, with = "nanos", skip_serializing_if = "Duration::is_zero")]
    pub last_duration: Duration,
}

/// The meta group as one server sees it: `/jsz`'s `meta_cluster` and the `jetstream.meta` of
/// a `$SYS.REQ.SERVER.PING` (statsz) answer (nats-server's `MetaClusterInfo`). Absent on a
/// standalone server.
///
/// As 2.15.1 wrote it: `{"name":"C","leader":"n2","peer":"44jzkV9D","replicas":[…],
/// "cluster_size":3,"quorum_needed":2,"pending":0,"pending_requests":0,"pending_infos":0,
/// "snapshot":{…}}`. `leader` and `peer` are omitted while there is no leader (`replicas` then
/// lists every peer, the answering server included). In `/jsz`, `name` is the cluster's name
/// on every server; in statsz the leader writes the cluster's name and `replicas`, the others
/// `"_meta_"` (the meta group's own name) and no `replicas`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetaClusterInfo {
    /// `name`: the cluster's name (or `"_meta_"`, see above).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// `leader`: the meta leader's server name; omitted when there is none.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub leader: String,
    /// `peer`: the meta leader's Raft peer id; omitted when there is no leader.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub peer: String,
    /// `replicas`: the meta group's peers but the leader, as this server sees them (a follower
    /// has little news of its fellow followers: `current` false, `active` 0). Omitted when
    /// empty.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub replicas: Vec<PeerInfo>,
    /// `cluster_size`: the number of peers of the meta group (every JetStream server of the
    /// cluster).
    #[serde(default)]
    pub cluster_size: u64,
    /// `quorum_needed`: a majority of `cluster_size` (2 of 3).
    #[serde(default)]
    pub quorum_needed: u64,
    /// `pending`: meta log entries not applied yet.
    #[serde(default)]
    pub pending: u64,
    /// `pending_requests`: meta proposals waiting (always written, 0 in every recording).
    #[serde(default)]
    pub pending_requests: u64,
    /// `pending_infos`: info requests waiting (always written, 0 in every recording).
    #[serde(default)]
    pub pending_infos: u64,
    /// `snapshot`: see [`MetaSnapshotInfo`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<MetaSnapshotInfo>,
}

// ---------------------------------------------------------------------------------------------
// Subjects
// ---------------------------------------------------------------------------------------------

/// `$JS.API.STREAM.LEADER.STEPDOWN.` (the stream name follows).
pub const STREAM_LEADER_STEPDOWN_PREFIX: &str = "$JS.API.STREAM.LEADER.STEPDOWN.";
/// `$JS.API.CONSUMER.LEADER.STEPDOWN.` (`<stream>.<consumer>` follows).
pub const CONSUMER_LEADER_STEPDOWN_PREFIX: &str = "$JS.API.CONSUMER.LEADER.STEPDOWN.";
/// `$JS.API.META.LEADER.STEPDOWN`: answered in the system account only.
pub const META_LEADER_STEPDOWN: &str = "$JS.API.META.LEADER.STEPDOWN";
/// `$JS.API.STREAM.PEER.REMOVE.` (the stream name follows).
pub const STREAM_PEER_REMOVE_PREFIX: &str = "$JS.API.STREAM.PEER.REMOVE.";
/// `$JS.API.SERVER.REMOVE`: answered in the system account only.
pub const SERVER_REMOVE: &str = "$JS.API.SERVER.REMOVE";

/// A request of the clustered API, as [`parse_cluster_subject`] reads its subject.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClusterRequest<'a> {
    /// `$JS.API.STREAM.LEADER.STEPDOWN.<stream>`.
    StreamLeaderStepdown {
        /// The stream.
        stream: &'a str,
    },
    /// `$JS.API.CONSUMER.LEADER.STEPDOWN.<stream>.<consumer>`.
    ConsumerLeaderStepdown {
        /// The stream.
        stream: &'a str,
        /// The consumer.
        consumer: &'a str,
    },
    /// `$JS.API.META.LEADER.STEPDOWN`.
    MetaLeaderStepdown,
    /// `$JS.API.STREAM.PEER.REMOVE.<stream>`.
    StreamPeerRemove {
        /// The stream.
        stream: &'a str,
    },
    /// `$JS.API.SERVER.REMOVE`.
    ServerRemove,
}

/// Which clustered API request `subject` is, or `None` when it is none of them (or has a
/// missing, empty or extra token: the server's subscriptions would not match it).
pub fn parse_cluster_subject(subject: &str) -> Option<ClusterRequest<'_>> {
    fn one_token(rest: &str) -> Option<&str> {
        (!rest.is_empty() && !rest.contains('.')).then_some(rest)
    }
    if subject == META_LEADER_STEPDOWN {
        return Some(ClusterRequest::MetaLeaderStepdown);
    }
    if subject == SERVER_REMOVE {
        return Some(ClusterRequest::ServerRemove);
    }
    if let Some(rest) = subject.strip_prefix(STREAM_LEADER_STEPDOWN_PREFIX) {
        return one_token(rest).map(|stream| ClusterRequest::StreamLeaderStepdown { stream });
    }
    if let Some(rest) = subject.strip_prefix(STREAM_PEER_REMOVE_PREFIX) {
        return one_token(rest).map(|stream| ClusterRequest::StreamPeerRemove { stream });
    }
    if let Some(rest) = subject.strip_prefix(CONSUMER_LEADER_STEPDOWN_PREFIX) {
        let (stream, consumer) = rest.split_once('.')?;
        let stream = one_token(stream)?;
        let consumer = one_token(consumer)?;
        return Some(ClusterRequest::ConsumerLeaderStepdown { stream, consumer });
    }
    None
}

// ---------------------------------------------------------------------------------------------
// Requests and responses
// ---------------------------------------------------------------------------------------------

/// The body of a stream, consumer or meta leader step-down: empty, or
/// `{"placement":{"preferred":"n2"}}` to ask for a given server as the new leader (nats-server
/// also reads `cluster` and `tags` of the placement). Unknown fields are 10025
/// (`invalid JSON: json: unknown field "bogus"`, recorded), as with [`super::decode_request`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LeaderStepdownRequest {
    /// `placement`: where the new leader should be. Omitted when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<Placement>,
}

impl LeaderStepdownRequest {
    /// A step-down asking for `server` as the new leader.
    pub fn preferred(server: impl Into<String>) -> Self {
        LeaderStepdownRequest {
            placement: Some(Placement {
                preferred: server.into(),
                ..Placement::default()
            }),
        }
    }
}

/// Whether a step-down body is to be read as a request: its first byte after JSON whitespace
/// is `{` or `[` (nats-server 2.15.1's `isJSONObjectOrArray`). Any other body (empty, `null`,
/// `garbage`) is a step-down without placement, not an error: nats-server answered `success`
/// to a meta step-down whose body was `garbage`.
pub fn is_json_object_or_array(body: &[u8]) -> bool {
    body.iter()
        .find(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
        .is_some_and(|b| matches!(b, b'{' | b'['))
}

/// The 400/10005 a meta step-down gets when no other member of the group may lead: none is
/// connected, or none is in the placement's `cluster` or has all its `tags`:
/// `no replacement peer connected` (observed on nats-server 2.15.1 with
/// `{"placement":{"cluster":"D"}}` and with a tag no server has).
pub fn no_replacement_peer() -> ApiError {
    ApiError::cluster_no_peers("no replacement peer connected")
}

/// The 400/10005 a step-down gets when its preferred server is no peer of the group:
/// `preferred server "nX" not known` (recorded for stream and meta step-downs).
pub fn preferred_not_known(server: &str) -> ApiError {
    ApiError::cluster_no_peers(format!("preferred server {server:?} not known"))
}

/// The 400/10005 a meta step-down gets when its preferred server already leads:
/// `preferred server "n2" is already leader` (recorded).
pub fn preferred_already_leader(server: &str) -> ApiError {
    ApiError::cluster_no_peers(format!("preferred server {server:?} is already leader"))
}

macro_rules! success_response {
    ($(#[$doc:meta])* $name:ident, $ty:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
        pub struct $name {
            /// `success`: the request was carried out (for a step-down: the leader stepped
            /// down; the new leader is elected afterwards). Omitted when false.
            #[serde(default, skip_serializing_if = "is_false")]
            pub success: bool,
        }

        impl ApiResponse for $name {
            const TYPE: &'static str = concat!("io.nats.jetstream.api.v1.", $ty);
        }
    };
}

success_response!(
    /// `$JS.API.STREAM.LEADER.STEPDOWN.<s>` response: `{"type":"io.nats.jetstream.api.v1.stream_leader_stepdown_response","success":true}`.
    StreamLeaderStepdownResponse,
    "stream_leader_stepdown_response"
);
success_response!(
    /// `$JS.API.CONSUMER.LEADER.STEPDOWN.<s>.<c>` response: `{"type":"io.nats.jetstream.api.v1.consumer_leader_stepdown_response","success":true}`.
    ConsumerLeaderStepdownResponse,
    "consumer_leader_stepdown_response"
);
success_response!(
    /// `$JS.API.META.LEADER.STEPDOWN` response: `{"type":"io.nats.jetstream.api.v1.meta_leader_stepdown_response","success":true}`.
    MetaLeaderStepdownResponse,
    "meta_leader_stepdown_response"
);
success_response!(
    /// `$JS.API.STREAM.PEER.REMOVE.<s>` response: `{"type":"io.nats.jetstream.api.v1.stream_remove_peer_response","success":true}`.
    StreamRemovePeerResponse,
    "stream_remove_peer_response"
);
success_response!(
    /// `$JS.API.SERVER.REMOVE` response: `{"type":"io.nats.jetstream.api.v1.meta_server_remove_response","success":true}`.
    MetaServerRemoveResponse,
    "meta_server_remove_response"
);

/// The body of `$JS.API.STREAM.PEER.REMOVE.<s>`: `{"peer":"n2"}`, the server (by name) to take
/// out of the stream's group (the meta leader then places the replica elsewhere). An empty
/// body or an empty `peer` is 10003 `bad request`; an unknown field 10025 (recorded).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamRemovePeerRequest {
    /// `peer`: the server's name.
    #[serde(default)]
    pub peer: String,
}

/// The body of `$JS.API.SERVER.REMOVE`: `{"peer":"n3"}` (a server name) or
/// `{"peer_id":"BXScrY9i"}` (its Raft peer id), the server to take out of the meta group for
/// good. An empty body is 10003 `bad request`; a server that is not a member (by name or by
/// id) 10044; an unknown field 10025 (recorded).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetaServerRemoveRequest {
    /// `peer`: the server's name. Omitted when empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub peer: String,
    /// `peer_id`: the server's Raft peer id. Omitted when empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub peer_id: String,
}

// ---------------------------------------------------------------------------------------------
// /healthz
// ---------------------------------------------------------------------------------------------

/// `/healthz`'s error text while this server's meta group has no leader (recorded from
/// nats-server 2.15.1, with HTTP status 503).
pub const NO_META_LEADER: &str = "JetStream has not established contact with a meta leader";

/// One problem in a detailed `/healthz?details=true` answer: `{"type":"JETSTREAM","error":"…"}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HealthIssue {
    /// `type`: what failed (`"JETSTREAM"` for JetStream's checks).
    #[serde(rename = "type", default)]
    pub kind: String,
    /// `error`: the text.
    #[serde(default)]
    pub error: String,
}

/// The body of `/healthz` (nats-server's `HealthStatus`), as 2.15.1 answers:
///
/// | situation | HTTP | body |
/// |---|---|---|
/// | healthy (standalone, or clustered with a meta leader) | 200 | `{"status":"ok"}` |
/// | clustered, the meta group has no leader | 503 | `{"status":"unavailable","error":"JetStream has not established contact with a meta leader"}` |
/// | the same with `?details=true` | 503 | `{"status":"error","errors":[{"type":"JETSTREAM","error":"JetStream has not established contact with a meta leader"}]}` |
/// | the same with `?js-server-only=true` (or `js-enabled-only`) | 200 | `{"status":"ok"}` |
///
/// The status code is the HTTP response's, not a field of the body.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Health {
    /// `status`: `"ok"`, `"unavailable"`, or `"error"` (detailed form).
    pub status: String,
    /// `error`: why not ok (plain form). Omitted when empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub error: String,
    /// `errors`: why not ok (detailed form). Omitted when empty.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub errors: Vec<HealthIssue>,
}

impl Health {
    /// `{"status":"ok"}`, HTTP 200.
    pub fn ok() -> Self {
        Health {
            status: "ok".into(),
            ..Health::default()
        }
    }

    /// `{"status":"unavailable","error":<error>}`, HTTP 503.
    pub fn unavailable(error: impl Into<String>) -> Self {
        Health {
            status: "unavailable".into(),
            error: error.into(),
            errors: Vec::new(),
        }
    }

    /// The plain answer while the meta group has no leader: [`Health::unavailable`] with
    /// [`NO_META_LEADER`].
    pub fn no_meta_leader() -> Self {
        Health::unavailable(NO_META_LEADER)
    }

    /// The detailed (`?details=true`) answer while the meta group has no leader:
    /// `{"status":"error","errors":[{"type":"JETSTREAM","error":NO_META_LEADER}]}`.
    pub fn no_meta_leader_details() -> Self {
        Health {
            status: "error".into(),
            error: String::new(),
            errors: vec![HealthIssue {
                kind: "JETSTREAM".into(),
                error: NO_META_LEADER.into(),
            }],
        }
    }

    /// The HTTP status to answer with: 200 when `status` is `"ok"`, else 503.
    pub fn http_status(&self) -> u16 {
        if self.status == "ok" {
            200
        } else {
            503
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{decode_request, encode_error, encode_ok, to_json};

    #[test]
    fn subjects_parse() {
        assert_eq!(
            parse_cluster_subject("$JS.API.STREAM.LEADER.STEPDOWN.ORDERS"),
            Some(ClusterRequest::StreamLeaderStepdown { stream: "ORDERS" })
        );
        assert_eq!(
            parse_cluster_subject("$JS.API.CONSUMER.LEADER.STEPDOWN.ORDERS.ship"),
            Some(ClusterRequest::ConsumerLeaderStepdown {
                stream: "ORDERS",
                consumer: "ship"
            })
        );
        assert_eq!(
            parse_cluster_subject("$JS.API.STREAM.PEER.REMOVE.ORDERS"),
            Some(ClusterRequest::StreamPeerRemove { stream: "ORDERS" })
        );
        assert_eq!(
            parse_cluster_subject("$JS.API.META.LEADER.STEPDOWN"),
            Some(ClusterRequest::MetaLeaderStepdown)
        );
        assert_eq!(
            parse_cluster_subject("$JS.API.SERVER.REMOVE"),
            Some(ClusterRequest::ServerRemove)
        );
        for bad in [
            "$JS.API.STREAM.LEADER.STEPDOWN.",
            "$JS.API.STREAM.LEADER.STEPDOWN.A.B",
            "$JS.API.CONSUMER.LEADER.STEPDOWN.A",
            "$JS.API.CONSUMER.LEADER.STEPDOWN.A.B.C",
            "$JS.API.CONSUMER.LEADER.STEPDOWN..B",
            "$JS.API.STREAM.PEER.REMOVE",
            "$JS.API.META.LEADER.STEPDOWN.X",
        ] {
            assert_eq!(parse_cluster_subject(bad), None, "{bad}");
        }
    }

    #[test]
    fn stepdown_request_shapes() {
        assert_eq!(to_json(&LeaderStepdownRequest::default()), b"{}");
        assert_eq!(
            to_json(&LeaderStepdownRequest::preferred("n3")),
            br#"{"placement":{"preferred":"n3"}}"#
        );
        let r: LeaderStepdownRequest = decode_request(b"").unwrap();
        assert_eq!(r, LeaderStepdownRequest::default());
        let r: LeaderStepdownRequest =
            decode_request(br#"{"placement":{"preferred":"n2"}}"#).unwrap();
        assert_eq!(r, LeaderStepdownRequest::preferred("n2"));
        // As recorded (stream_stepdown_bad_json).
        let e = decode_request::<LeaderStepdownRequest>(br#"{"bogus":1}"#).unwrap_err();
        assert_eq!(
            String::from_utf8(encode_error::<StreamLeaderStepdownResponse>(&e)).unwrap(),
            r#"{"type":"io.nats.jetstream.api.v1.stream_leader_stepdown_response","error":{"code":400,"err_code":10025,"description":"invalid JSON: json: unknown field \"bogus\""}}"#
        );
    }

    #[test]
    fn which_bodies_are_read() {
        for body in [&b"{}"[..], b" \n{\"placement\":{}}", b"[1]", b"\t["] {
            assert!(is_json_object_or_array(body), "{body:?}");
        }
        for body in [&b""[..], b"  ", b"null", b"garbage", b"\"x\"", b"1"] {
            assert!(!is_json_object_or_array(body), "{body:?}");
        }
        assert_eq!(
            String::from_utf8(encode_error::<MetaLeaderStepdownResponse>(
                &no_replacement_peer()
            ))
            .unwrap(),
            r#"{"type":"io.nats.jetstream.api.v1.meta_leader_stepdown_response","error":{"code":400,"err_code":10005,"description":"no replacement peer connected"}}"#
        );
    }

    #[test]
    fn success_and_preferred_errors() {
        assert_eq!(
            encode_ok(&MetaLeaderStepdownResponse { success: true }),
            br#"{"type":"io.nats.jetstream.api.v1.meta_leader_stepdown_response","success":true}"#
        );
        assert_eq!(
            String::from_utf8(encode_error::<MetaLeaderStepdownResponse>(
                &preferred_already_leader("n2")
            ))
            .unwrap(),
            r#"{"type":"io.nats.jetstream.api.v1.meta_leader_stepdown_response","error":{"code":400,"err_code":10005,"description":"preferred server \"n2\" is already leader"}}"#
        );
        assert_eq!(
            preferred_not_known("nX").description,
            r#"preferred server "nX" not known"#
        );
    }

    #[test]
    fn peer_info_omits_like_the_server() {
        let p = PeerInfo {
            name: "n2".into(),
            current: true,
            active: Duration::from_nanos(155_160),
            peer: "44jzkV9D".into(),
            ..PeerInfo::default()
        };
        assert_eq!(
            to_json(&p),
            br#"{"name":"n2","current":true,"active":155160,"peer":"44jzkV9D"}"#
        );
        let q = PeerInfo {
            name: "n3".into(),
            offline: true,
            lag: 6,
            peer: "BXScrY9i".into(),
            ..PeerInfo::default()
        };
        assert_eq!(
            to_json(&q),
            br#"{"name":"n3","current":false,"offline":true,"active":0,"lag":6,"peer":"BXScrY9i"}"#
        );
    }

    #[test]
    fn health_bodies() {
        assert_eq!(to_json(&Health::ok()), br#"{"status":"ok"}"#);
        assert_eq!(Health::ok().http_status(), 200);
        assert_eq!(
            to_json(&Health::no_meta_leader()),
            br#"{"status":"unavailable","error":"JetStream has not established contact with a meta leader"}"#
        );
        assert_eq!(Health::no_meta_leader().http_status(), 503);
        assert_eq!(
            to_json(&Health::no_meta_leader_details()),
            br#"{"status":"error","errors":[{"type":"JETSTREAM","error":"JetStream has not established contact with a meta leader"}]}"#
        );
    }
}
