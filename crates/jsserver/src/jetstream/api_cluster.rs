//! The API thread in a cluster: which server answers which request, and what the meta
//! group's operations do to this server's streams.
//!
//! Every JetStream server's API thread subscribes to `$JS.API.>` for the whole cluster, so
//! each request reaches every server; exactly one answers it:
//!
//! | request                                  | answered by                                   |
//! |------------------------------------------|-----------------------------------------------|
//! | `INFO` (account info)                    | the server the client is connected to         |
//! | `STREAM.CREATE` of a new stream          | the meta leader checks and proposes it; the   |
//! |                                          | stream's server answers once it opened it     |
//! | `STREAM.CREATE` with the stream's config | the stream's server (as a repeated create)    |
//! | `STREAM.UPDATE`                          | meta leader checks; the stream's server       |
//! | `STREAM.DELETE`                          | the meta leader, once the delete is applied   |
//! | `STREAM.NAMES`, `STREAM.LIST`            | the meta leader                               |
//! | `STREAM.PEER.REMOVE`                     | the meta leader, once the new servers applied |
//! | `META.LEADER.STEPDOWN`, `SERVER.REMOVE`  | the meta leader, in the system account only   |
//! | any other request naming a stream        | the stream's server; the meta leader when no  |
//! |                                          | such stream exists (`10059 stream not found`) |
//!
//! Pull requests, acks, direct gets and publishes reach the stream's server through the
//! stream's own subscriptions, which are the cluster's too.
//!
//! The meta leader places a stream's `num_replicas` replicas on the JetStream servers that
//! are up, match its `placement` (cluster, tags: [`select_peers`]) and hold the fewest
//! streams; replicated streams are `super::replica`'s. A new `num_replicas` (1 to 3 or 5,
//! 3 to 5 and back, back to 1: the stream's leader stays) or a peer removal gives the
//! stream other servers ([`MetaOp::UpdateStream`]'s `peers`, [`MetaOp::SetPeers`]), chosen
//! the same way: a server added opens an empty replica that joins the group, the stream's
//! leader changes the group's members one at a time, and a server dropped removes its
//! replica once the group removed it ([`Api::left_group`]); a group shrunk to one server
//! stays a group of one member.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use jsproto::api::stream::{
    check_stream_create_in, check_stream_update_in, Placement, StreamConfig, StreamCreateResponse,
    StreamDeleteResponse, StreamInfo, StreamListResponse, StreamNamesRequest, StreamUpdateResponse,
    LIST_LIMIT,
};
use jsproto::api::{decode_request, ApiError, ApiResponse};
use tracing::{debug, info, warn};

use super::super::meta::{MetaCmd, MetaOp, StreamAssignment};
use super::super::stream::{timestamp, unix_now};
use super::Api;
use jsproto::api::advisory::StreamAction;

/// The stream a request's subject names (its tokens after `$JS.API.`), if any.
fn stream_of<'a>(tokens: &[&'a str]) -> Option<&'a str> {
    match tokens {
        ["STREAM", "MSG", _, name, ..] => Some(name),
        ["STREAM", _, name, ..] => Some(name),
        ["CONSUMER", "DURABLE", "CREATE", stream, ..] => Some(stream),
        ["CONSUMER", _, stream, ..] => Some(stream),
        ["DIRECT", "GET", stream, ..] => Some(stream),
        _ => None,
    }
}

impl Api {
    /// Decides whether this server answers a request in a cluster (see the module doc).
    /// True when it was dealt with here (answered, proposed or left to another server);
    /// false when the standalone handler is to answer it from this server's streams.
    pub(super) fn clustered_dispatch(
        &mut self,
        tokens: &[&str],
        reply: Option<&Bytes>,
        body: &Bytes,
        from_route: bool,
    ) -> bool {
        let Some((meta, _)) = &self.meta else {
            return false;
        };
        let is_leader = meta.is_leader();
        let account = self.account.name().to_string();
        match tokens {
            ["INFO"] => from_route,
            ["STREAM", "CREATE", name] => {
                if is_leader {
                    self.total += 1;
                    self.cluster_create(name, reply, body);
                    true
                } else {
                    // The stream's server answers a repeated create itself.
                    let same = self.streams.get(*name).is_some_and(|h| {
                        h.shared.leader.load(Ordering::Relaxed)
                            && check_stream_create_in(name, body, true)
                                .is_ok_and(|c| h.config.same_as(&c))
                    });
                    !same
                }
            }
            ["STREAM", "UPDATE", name] => {
                if is_leader {
                    self.total += 1;
                    self.cluster_update(name, reply, body);
                }
                true
            }
            ["STREAM", "DELETE", name] => {
                if is_leader {
                    self.total += 1;
                    match meta.assignment(&account, name) {
                        Some(_) => self.propose(MetaOp::RemoveStream {
                            account,
                            name: (*name).to_string(),
                            reply: reply.map(|r| String::from_utf8_lossy(r).into_owned()),
                        }),
                        None => self.error_reply::<StreamDeleteResponse>(
                            reply,
                            ApiError::stream_not_found(),
                        ),
                    }
                }
                true
            }
            ["STREAM", "NAMES"] => {
                if is_leader {
                    self.total += 1;
                    self.cluster_names(reply, body);
                }
                true
            }
            ["STREAM", "LIST"] => {
                if is_leader {
                    self.total += 1;
                    self.cluster_list(reply, body);
                }
                true
            }
            ["STREAM", "PEER", "REMOVE", name] => {
                if is_leader {
                    self.total += 1;
                    self.cluster_peer_remove(name, reply, body);
                }
                true
            }
            ["STREAM", "LEADER", "STEPDOWN", name]
            | ["CONSUMER", "LEADER", "STEPDOWN", name, _] => {
                let consumer = match tokens {
                    [.., c] if tokens.len() == 5 => Some((*c).to_string()),
                    _ => None,
                };
                let serves = self
                    .streams
                    .get(*name)
                    .filter(|h| h.shared.leader.load(Ordering::Relaxed));
                if let Some(handle) = serves {
                    self.total += 1;
                    let body: &[u8] = body;
                    let preferred = if body.iter().all(u8::is_ascii_whitespace) {
                        Ok(None)
                    } else {
                        decode_request::<jsproto::api::cluster::LeaderStepdownRequest>(body)
                            .map(|r| r.placement.map(|p| p.preferred).filter(|p| !p.is_empty()))
                    };
                    match preferred {
                        Ok(preferred) => handle.tx.send(super::StreamCmd::StepDown {
                            preferred,
                            consumer,
                            reply: reply.cloned(),
                        }),
                        Err(err) => self
                            .error_reply::<jsproto::api::cluster::StreamLeaderStepdownResponse>(
                                reply, err,
                            ),
                    }
                } else if is_leader && meta.assignment(&account, name).is_none() {
                    self.total += 1;
                    self.error_reply::<jsproto::api::cluster::StreamLeaderStepdownResponse>(
                        reply,
                        ApiError::stream_not_found(),
                    );
                }
                true
            }
            _ => match stream_of(tokens) {
                // Here when this server holds it; the meta leader answers "not found".
                Some(stream) => {
                    let serves = self
                        .streams
                        .get(stream)
                        .is_some_and(|h| h.shared.leader.load(Ordering::Relaxed));
                    !(serves || (is_leader && meta.assignment(&account, stream).is_none()))
                }
                None => false,
            },
        }
    }

    /// Whether this API thread is the system account's (the meta step-down and server
    /// removal are its alone).
    fn is_system_account(&self) -> bool {
        self.server
            .system()
            .is_some_and(|s| std::sync::Arc::ptr_eq(s.account(), &self.account))
    }

    /// `$JS.API.META.LEADER.STEPDOWN`, as nats-server 2.15.1's `jsLeaderStepDownRequest`:
    /// only the meta leader's API thread of the system account answers. A request from any
    /// other account, or on a server without a cluster, gets no answer at all (the requester
    /// times out; it is not a no-responders), as recorded from nats-server.
    ///
    /// The body is read only when it starts with `{` or `[`
    /// ([`jsproto::api::cluster::is_json_object_or_array`]): unknown fields are 10025;
    /// `placement.preferred` names the member to hand leadership to (10005 `preferred server
    /// "nX" not known` when it is no member, `… is already leader` when it is this server);
    /// otherwise a connected member, in `placement.cluster` when given, is picked at random
    /// (10005 `no replacement peer connected` when there is none). The answer,
    /// `{"type":"io.nats.jetstream.api.v1.meta_leader_stepdown_response","success":true}`, says
    /// the transfer started: the new leader is elected afterwards (about one heartbeat,
    /// 100 ms, when the member is caught up).
    ///
    /// Unlike nats-server: with no other member connected it answers the 10005 above rather
    /// than stepping down into an election it cannot win (nats-server steps down whatever and
    /// answers `success`); a preferred member that is not connected is replaced by another
    /// connected one, as nats-server does.
    pub(super) fn meta_step_down(&mut self, reply: Option<&Bytes>, body: &[u8]) {
        use jsproto::api::cluster::{
            is_json_object_or_array, LeaderStepdownRequest, MetaLeaderStepdownResponse,
        };
        let Some((meta, tx)) = &self.meta else {
            return;
        };
        if !self.is_system_account() || !meta.is_leader() {
            return;
        }
        let request = if is_json_object_or_array(body) {
            decode_request::<LeaderStepdownRequest>(body).map(|r| r.placement)
        } else {
            Ok(None)
        };
        let view = meta.view();
        let me = self.server.server_name().to_string();
        let (cluster, up) = match self.server.cluster() {
            Some(c) => (
                c.name().to_string(),
                c.peers()
                    .into_iter()
                    .filter(|p| p.jetstream)
                    .map(|p| (p.name, p.tags))
                    .collect(),
            ),
            None => (String::new(), BTreeMap::new()),
        };
        let target = request.and_then(|placement| {
            step_down_target(&me, &view.members, &up, &cluster, placement.as_ref())
        });
        match target {
            Ok(to) => {
                let _ = tx.send(MetaCmd::StepDown { to });
                self.answer(reply, Ok(MetaLeaderStepdownResponse { success: true }));
            }
            Err(err) => self.error_reply::<MetaLeaderStepdownResponse>(reply, err),
        }
    }

    /// `$JS.API.SERVER.REMOVE` (`{"peer":"<server name>"}` or `{"peer_id":"<its peer id>"}`),
    /// as nats-server 2.15.1's: only the meta leader's API thread of the system account
    /// answers (no answer elsewhere). The server leaves the meta group (a membership change
    /// the meta leader appends) and every stream it held gets another server in its place
    /// when one is up (or runs on one replica fewer), as a peer removal. Answers
    /// `meta_server_remove_response` success; 10003 for an empty body or one naming nobody,
    /// 10044 for a server that is no member, 10025 for an unknown field. The meta leader
    /// itself is not removed: it hands leadership over and answers 10008 (ask again).
    pub(super) fn server_remove(&mut self, reply: Option<&Bytes>, body: &[u8]) {
        use jsproto::api::cluster::{MetaServerRemoveRequest, MetaServerRemoveResponse};
        let Some((meta, tx)) = &self.meta else {
            return;
        };
        if !self.is_system_account() || !meta.is_leader() {
            return;
        }
        let view = meta.view();
        let request = decode_required::<MetaServerRemoveRequest>(body);
        let peer_id = |name: &str| format!("{:08x}", crate::cluster::group::node_id(name) as u32);
        let name = request.and_then(|req| {
            if req.peer.is_empty() && req.peer_id.is_empty() {
                return Err(ApiError::bad_request());
            }
            view.members
                .iter()
                .find(|m| {
                    (!req.peer.is_empty() && **m == req.peer)
                        || (!req.peer_id.is_empty() && peer_id(m) == req.peer_id)
                })
                .cloned()
                .ok_or_else(ApiError::cluster_server_not_member)
        });
        let name = match name {
            Ok(n) => n,
            Err(err) => return self.error_reply::<MetaServerRemoveResponse>(reply, err),
        };
        let me = self.server.server_name().to_string();
        if name == me {
            if let Some(to) = view.members.iter().find(|m| **m != me) {
                let _ = tx.send(MetaCmd::StepDown { to: to.clone() });
            }
            return self
                .error_reply::<MetaServerRemoveResponse>(reply, ApiError::cluster_not_avail());
        }
        let _ = tx.send(MetaCmd::RemoveServer { name: name.clone() });
        // Its streams, in every account, get another server.
        let held: Vec<StreamAssignment> = view
            .streams
            .values()
            .filter(|a| a.peers.contains(&name))
            .cloned()
            .collect();
        for a in held {
            if a.peers.len() < 2 && a.config.num_replicas <= 1 {
                // A stream of one replica on the server removed: it stays assigned there.
                continue;
            }
            let peers = self.peers_without(&a, &name);
            if peers.is_empty() {
                // A stream of one replica on the server removed: it stays assigned there.
                continue;
            }
            self.propose(MetaOp::SetPeers {
                account: a.account.clone(),
                name: a.config.name.clone(),
                peers,
                reply: None,
            });
        }
        self.answer(reply, Ok(MetaServerRemoveResponse { success: true }));
    }

    fn propose(&mut self, op: MetaOp) {
        if let Some((_, tx)) = &self.meta {
            let _ = tx.send(MetaCmd::Propose(Box::new(op)));
        }
    }

    fn assignments(&self) -> Vec<StreamAssignment> {
        match &self.meta {
            Some((meta, _)) => meta.streams_of(self.account.name()),
            None => Vec::new(),
        }
    }

    /// The meta leader's part of a create: checks against the cluster's streams, places
    /// the stream and proposes it.
    fn cluster_create(&mut self, name: &str, reply: Option<&Bytes>, body: &[u8]) {
        let result = self.check_cluster_create(name, body);
        match result {
            Ok(Some(assignment)) => self.propose(MetaOp::AddStream {
                assignment,
                reply: reply.map(|r| String::from_utf8_lossy(r).into_owned()),
            }),
            // The same stream exists: its server answers.
            Ok(None) => {}
            Err(err) => self.error_reply::<StreamCreateResponse>(reply, err),
        }
    }

    fn check_cluster_create(
        &mut self,
        name: &str,
        body: &[u8],
    ) -> Result<Option<StreamAssignment>, ApiError> {
        let config = check_stream_create_in(name, body, true)?;
        jsproto::api::stream::check_supported(&config)?;
        let existing = self.assignments();
        if let Some(a) = existing.iter().find(|a| a.config.name == name) {
            if a.config.same_as(&config) {
                return Ok(None);
            }
            return Err(ApiError::stream_name_exist());
        }
        let others: Vec<String> = existing
            .iter()
            .flat_map(|a| a.config.subjects.iter().cloned())
            .collect();
        if config.subjects_overlap(&others) {
            return Err(ApiError::stream_subject_overlap());
        }
        if let Some(limits) = self.account.jetstream_limits() {
            if limits.max_streams > 0 && existing.len() as i64 >= limits.max_streams {
                return Err(ApiError::maximum_streams_limit());
            }
        }
        let peers = self.place(&config)?;
        Ok(Some(StreamAssignment {
            account: self.account.name().to_string(),
            config,
            created: timestamp(unix_now()),
            peers,
        }))
    }

    /// The servers a stream with `config` may be placed on (see [`ranked_peers`]): the
    /// meta group's members that are up now (this server, and those with a route) and
    /// match the stream's `placement`, fewest streams first.
    fn candidates(&self, config: &StreamConfig) -> Result<Vec<String>, ApiError> {
        let Some((meta, _)) = &self.meta else {
            return Err(ApiError::cluster_not_avail());
        };
        let (cluster, up, tags) = match self.server.cluster() {
            Some(c) => {
                let mut up: Vec<String> = c
                    .peers()
                    .into_iter()
                    .filter(|p| p.jetstream)
                    .map(|p| p.name)
                    .collect();
                up.push(c.server_name().to_string());
                (c.name().to_string(), up, c.known_tags())
            }
            None => return Err(ApiError::cluster_not_avail()),
        };
        ranked_peers(config, &cluster, &meta.load(), &up, &tags)
    }

    /// The servers for a new stream (see [`select_peers`]): `num_replicas` of
    /// [`Api::candidates`].
    fn place(&self, config: &StreamConfig) -> Result<Vec<String>, ApiError> {
        let want = usize::try_from(config.num_replicas.max(1)).unwrap_or(1);
        select_peers(self.candidates(config)?, want)
    }

    /// A stream's servers for `config`'s `num_replicas` (changed from `a`'s): the ones it
    /// has, then more from [`Api::candidates`]; or the first ones it has (the stream's
    /// group moves leadership off a server it drops).
    fn resize(&self, a: &StreamAssignment, config: &StreamConfig) -> Result<Vec<String>, ApiError> {
        let want = usize::try_from(config.num_replicas.max(1)).unwrap_or(1);
        let mut peers = a.peers.clone();
        if want <= peers.len() {
            // The stream's leader stays when this server knows it (it holds a replica):
            // no hand-over needed, and it has every committed entry.
            let leader = self
                .streams
                .get(&a.config.name)
                .map(|h| h.shared.leader_name())
                .filter(|l| !l.is_empty());
            if let Some(at) = leader.and_then(|l| peers.iter().position(|p| *p == l)) {
                let l = peers.remove(at);
                peers.insert(0, l);
            }
            peers.truncate(want);
            return Ok(peers);
        }
        let more: Vec<String> = self
            .candidates(config)?
            .into_iter()
            .filter(|c| !peers.contains(c))
            .take(want - peers.len())
            .collect();
        if peers.len() + more.len() < want {
            return Err(ApiError::insufficient_resources());
        }
        peers.extend(more);
        Ok(peers)
    }

    /// `a`'s servers without `gone`, and in its place the first server up that does not
    /// hold the stream ([`Api::candidates`]), when there is one.
    fn peers_without(&self, a: &StreamAssignment, gone: &str) -> Vec<String> {
        let mut peers: Vec<String> = a.peers.iter().filter(|p| *p != gone).cloned().collect();
        if let Some(c) = self.candidates(&a.config).ok().and_then(|candidates| {
            candidates
                .into_iter()
                .find(|c| c != gone && !peers.contains(c))
        }) {
            peers.push(c);
        }
        peers
    }

    /// `STREAM.PEER.REMOVE` on the meta leader: the server named leaves the stream's group,
    /// and a server up that is not in it takes its place when there is one (otherwise the
    /// stream has one replica fewer until its next change). Answered once applied. A stream
    /// of one replica is refused with 10061 (nats-server moves it and it starts over empty).
    fn cluster_peer_remove(&mut self, name: &str, reply: Option<&Bytes>, body: &[u8]) {
        use jsproto::api::cluster::{StreamRemovePeerRequest, StreamRemovePeerResponse};
        let Some(a) = self
            .assignments()
            .into_iter()
            .find(|a| a.config.name == name)
        else {
            self.error_reply::<StreamRemovePeerResponse>(reply, ApiError::stream_not_found());
            return;
        };
        let result = decode_required::<StreamRemovePeerRequest>(body);
        let peer = match result {
            Ok(req) if req.peer.is_empty() => Err(ApiError::bad_request()),
            Ok(req) if !a.peers.contains(&req.peer) => Err(ApiError::cluster_peer_not_member()),
            // Its only server: nats-server 2.15.1 answers success and the stream starts
            // over empty elsewhere; refused here, since its messages would be lost.
            Ok(_) if a.peers.len() < 2 => Err(ApiError::stream_replicas_not_updatable()),
            Ok(req) => Ok(req.peer),
            Err(err) => Err(err),
        };
        let peer = match peer {
            Ok(p) => p,
            Err(err) => {
                self.error_reply::<StreamRemovePeerResponse>(reply, err);
                return;
            }
        };
        let peers = self.peers_without(&a, &peer);
        self.propose(MetaOp::SetPeers {
            account: self.account.name().to_string(),
            name: name.to_string(),
            peers,
            reply: reply.map(|r| String::from_utf8_lossy(r).into_owned()),
        });
    }

    fn cluster_update(&mut self, name: &str, reply: Option<&Bytes>, body: &[u8]) {
        let current = self
            .assignments()
            .into_iter()
            .find(|a| a.config.name == name);
        let result = match &current {
            Some(a) => check_stream_update_in(name, body, &a.config, true).and_then(|config| {
                jsproto::api::stream::check_supported(&config)?;
                let others: Vec<String> = self
                    .assignments()
                    .iter()
                    .filter(|o| o.config.name != name)
                    .flat_map(|o| o.config.subjects.iter().cloned())
                    .collect();
                if config.subjects_overlap(&others) {
                    return Err(ApiError::stream_subject_overlap());
                }
                Ok(config)
            }),
            None => check_stream_create_in(name, body, true)
                .and_then(|_| Err(ApiError::stream_not_found())),
        };
        // A new `num_replicas`: new servers for the stream.
        let result = result.and_then(|config| match &current {
            Some(a) if a.config.num_replicas.max(1) != config.num_replicas.max(1) => {
                let peers = self.resize(a, &config)?;
                Ok((config, Some(peers)))
            }
            _ => Ok((config, None)),
        });
        match result {
            Ok((config, peers)) => self.propose(MetaOp::UpdateStream {
                account: self.account.name().to_string(),
                config,
                peers,
                reply: reply.map(|r| String::from_utf8_lossy(r).into_owned()),
            }),
            Err(err) => self.error_reply::<StreamUpdateResponse>(reply, err),
        }
    }

    fn cluster_names(&mut self, reply: Option<&Bytes>, body: &[u8]) {
        let assignments = self.assignments();
        let result = decode_request::<StreamNamesRequest>(body)
            .map(|req| super::names_page(matching(&assignments, &req.subject), req.offset));
        self.answer(reply, result);
    }

    /// `STREAM.LIST` by the meta leader: the info of the streams it holds from its own
    /// replica, and of the others asked of their servers ([`Api::remote_infos`]); a stream
    /// whose server did not answer in time is listed in `missing`.
    fn cluster_list(&mut self, reply: Option<&Bytes>, body: &[u8]) {
        let assignments = self.assignments();
        let result = decode_request::<StreamNamesRequest>(body).map(|req| {
            let names = matching(&assignments, &req.subject);
            let total = names.len();
            let mut streams: Vec<StreamInfo> = Vec::new();
            let mut missing = Vec::new();
            let page: Vec<String> = names
                .iter()
                .skip(req.offset)
                .take(LIST_LIMIT)
                .cloned()
                .collect();
            let remote: Vec<String> = page.iter().filter(|n| !self.serves(n)).cloned().collect();
            let mut gathered = self.remote_infos(&remote);
            for name in &page {
                let info = match gathered.remove(name) {
                    Some(info) => Some(info),
                    None => self.info_of(name, true),
                };
                match info {
                    Some(info) => streams.push(info),
                    None => missing.push(name.clone()),
                }
            }
            StreamListResponse {
                total,
                offset: req.offset,
                limit: LIST_LIMIT,
                streams,
                missing,
            }
        });
        self.answer(reply, result);
    }

    /// Whether this server serves stream `name` (holds it and leads it): its info is the
    /// stream's; a follower's may lag, so the leader is asked instead.
    fn serves(&self, name: &str) -> bool {
        self.streams
            .get(name)
            .is_some_and(|h| h.shared.leader.load(Ordering::Relaxed))
    }

    /// Account `INFO` in a cluster, as nats-server's: every stream of the account wherever
    /// it is placed, each counted once (its serving replica's state; this server's own, or
    /// asked of the others as `STREAM.LIST` does): how many streams and consumers, the
    /// bytes stored by storage type, and the `max_bytes` reserved.
    pub(super) fn cluster_usage(&mut self, info: &mut jsproto::api::account::AccountInfo) {
        let assignments = self.assignments();
        let remote: Vec<String> = assignments
            .iter()
            .map(|a| a.config.name.clone())
            .filter(|n| !self.serves(n))
            .collect();
        let mut gathered = self.remote_infos(&remote);
        let usage = &mut info.usage;
        usage.streams = assignments.len() as u64;
        usage.consumers = 0;
        usage.memory = 0;
        usage.storage = 0;
        usage.reserved_memory = 0;
        usage.reserved_storage = 0;
        for a in &assignments {
            let memory = super::is_memory(&a.config);
            if a.config.max_bytes > 0 {
                if memory {
                    usage.reserved_memory += a.config.max_bytes as u64;
                } else {
                    usage.reserved_storage += a.config.max_bytes as u64;
                }
            }
            let name = &a.config.name;
            let Some(s) = gathered.remove(name).or_else(|| self.info_of(name, true)) else {
                continue;
            };
            usage.consumers += s.state.consumer_count;
            if memory {
                usage.memory += s.state.bytes;
            } else {
                usage.storage += s.state.bytes;
            }
        }
    }

    /// The info of streams this server does not serve, asked of the servers that serve
    /// them over the cluster (`STREAM.INFO`, every request at once, answers gathered for up
    /// to [`REMOTE_INFO_WAIT`]); a stream whose server did not answer in time is left out
    /// (`STREAM.LIST` reports it under `missing`, as nats-server does).
    fn remote_infos(&mut self, names: &[String]) -> std::collections::HashMap<String, StreamInfo> {
        use jsproto::api::stream::StreamInfoResponse;
        let mut out = std::collections::HashMap::new();
        if names.is_empty() {
            return out;
        }
        let (tx, rx) = std::sync::mpsc::channel();
        let inbox = format!("_INBOX.jsc{:016x}", rand::random::<u64>());
        let filter = format!("{inbox}.*");
        let handler: std::sync::Arc<dyn crate::router::InternalHandler> =
            std::sync::Arc::new(Gather {
                tx: std::sync::Mutex::new(tx),
            });
        let router = std::sync::Arc::clone(self.outbox.account());
        if router
            .router()
            .subscribe_internal(filter.as_bytes(), None, std::sync::Arc::clone(&handler))
            .is_err()
        {
            return out;
        }
        let empty = Bytes::new();
        for (i, name) in names.iter().enumerate() {
            let subject = Bytes::from(format!("$JS.API.STREAM.INFO.{name}"));
            let reply = Bytes::from(format!("{inbox}.{i}"));
            self.outbox.request(&subject, &reply, &empty);
        }
        self.outbox.flush();
        let deadline = std::time::Instant::now() + REMOTE_INFO_WAIT;
        while out.len() < names.len() {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let Ok((subject, payload)) = rx.recv_timeout(left) else {
                break;
            };
            let index = std::str::from_utf8(&subject)
                .ok()
                .and_then(|s| s.rsplit('.').next())
                .and_then(|i| i.parse::<usize>().ok());
            let (Some(index), Ok(resp)) = (
                index,
                serde_json::from_slice::<StreamInfoResponse>(&payload),
            ) else {
                continue;
            };
            let Some(name) = names.get(index) else {
                continue;
            };
            let mut info = resp.info;
            if info.config.name != *name {
                continue;
            }
            info.config.set_static_metadata();
            out.insert(name.clone(), info);
        }
        router
            .router()
            .unsubscribe_internal(filter.as_bytes(), None, &handler);
        out
    }

    fn answer<T: ApiResponse>(&mut self, reply: Option<&Bytes>, result: Result<T, ApiError>) {
        let body = super::respond(&mut self.errors, result);
        if let Some(reply) = reply {
            self.outbox.reply(reply, body);
        }
    }

    /// Carries out an operation the meta group applied: opens, updates or deletes this
    /// server's replica, and answers the request that asked for it.
    pub(super) fn on_assigned(&mut self, op: MetaOp, meta_leader: bool) {
        let me = self.server.server_name().to_string();
        match op {
            MetaOp::AddStream { assignment, reply } => {
                // Replaying the meta log, the stream may since have moved off this server
                // or gone: opened only if the meta group gives it this server now.
                let current = self.meta.as_ref().and_then(|(meta, _)| {
                    meta.assignment(&assignment.account, &assignment.config.name)
                });
                let now_here = current.as_ref().is_some_and(|a| a.peers.contains(&me));
                if self.streams.contains_key(&assignment.config.name) {
                    return;
                }
                if !now_here {
                    // Dropped from the stream's group while it was down, with its log here:
                    // it takes part until the group removes it (the others may need its
                    // acks to do so), then leaves (see `super::replica`).
                    let raft_dir = self.stream_dir(&assignment.config.name).join("raft");
                    if let Some(a) = current.filter(|a| !a.peers.is_empty() && raft_dir.exists()) {
                        debug!(stream = %a.config.name, "reopening a dropped replica until the group removes it");
                        if let Err(err) = self.open_stream_in(
                            a.config.clone(),
                            a.created,
                            &a.peers,
                            None,
                            super::ReplicaStart::Member,
                        ) {
                            warn!(stream = %a.config.name, error = format!("{err:#}"), "reopening a dropped replica");
                        }
                    }
                    return;
                }
                if !assignment.peers.contains(&me) {
                    return;
                }
                let name = assignment.config.name.clone();
                let reply = reply.map(Bytes::from);
                if assignment.peers.len() > 1 {
                    // The group's first leader answers (see `super::replica`).
                    if let Err(err) = self.open_assigned(&assignment, reply.clone()) {
                        self.answer::<StreamCreateResponse>(reply.as_ref(), Err(err));
                    }
                    return;
                }
                let result = self.open_assigned(&assignment, None);
                if result.is_ok() {
                    debug!(stream = %name, "stream created (assigned)");
                    self.advise_stream(StreamAction::Create, &name);
                }
                let cluster = self.server.cluster().map(|c| c.name().to_string());
                let response = result.and_then(|()| {
                    self.info_of(&name, false)
                        .map(|mut info| {
                            // Where it was placed, as nats-server's create answer says.
                            info.cluster = Some(jsproto::api::cluster::ClusterInfo {
                                name: cluster.unwrap_or_default(),
                                leader: me.clone(),
                                ..Default::default()
                            });
                            StreamCreateResponse {
                                info,
                                did_create: true,
                            }
                        })
                        .ok_or_else(ApiError::stream_not_found)
                });
                self.answer(reply.as_ref(), response);
            }
            MetaOp::UpdateStream {
                account,
                config,
                peers,
                reply,
            } => {
                let name = config.name.clone();
                // The server serving the stream before the change answers.
                let serves = self
                    .streams
                    .get(&name)
                    .is_some_and(|h| h.shared.leader.load(Ordering::Relaxed));
                let body = serde_json::to_vec(&config).expect("configs serialise");
                if let Some(peers) = &peers {
                    if serves && !peers.contains(&me) {
                        // The stream's leader is dropped: it answers before it goes.
                        let result = self.try_update(&name, &body);
                        let reply = reply.clone().map(Bytes::from);
                        self.answer::<StreamUpdateResponse>(reply.as_ref(), result);
                    }
                    if !self.apply_peers(&account, &name, peers) {
                        return;
                    }
                }
                if !self.streams.contains_key(&name) {
                    return;
                }
                // Each replica applies the new config.
                let result = self.try_update(&name, &body);
                if serves {
                    let reply = reply.map(Bytes::from);
                    self.answer::<StreamUpdateResponse>(reply.as_ref(), result);
                }
            }
            // The meta thread acts on it (no account's).
            MetaOp::RemoveServer { .. } => {}
            MetaOp::SetPeers {
                account,
                name,
                peers,
                reply,
            } => {
                self.apply_peers(&account, &name, &peers);
                if meta_leader {
                    let reply = reply.map(Bytes::from);
                    self.answer(
                        reply.as_ref(),
                        Ok(jsproto::api::cluster::StreamRemovePeerResponse { success: true }),
                    );
                }
            }
            MetaOp::RemoveStream {
                account: _,
                name,
                reply,
            } => {
                if self.streams.contains_key(&name) {
                    self.stop_stream(&name, true);
                    self.advise_stream(StreamAction::Delete, &name);
                }
                if meta_leader {
                    let reply = reply.map(Bytes::from);
                    self.answer(reply.as_ref(), Ok(StreamDeleteResponse { success: true }));
                }
            }
        }
    }

    /// A stream's servers became `peers`: this server joins the stream's group (an empty
    /// replica the group's leader adds and sends its snapshot to), leaves it (its replica
    /// and files are removed), or hands the new membership to its replica, whose leader
    /// changes the group one server at a time. False when this server no longer holds the
    /// stream.
    fn apply_peers(&mut self, account: &str, name: &str, peers: &[String]) -> bool {
        let me = self.server.server_name().to_string();
        let here = self.streams.contains_key(name);
        let replicated = self.streams.get(name).is_some_and(|h| h.replicated);
        if !peers.contains(&me) && replicated {
            // Still a member of the stream's group: the group's leader removes this server
            // (its acks count until then: going now could leave the others short of a
            // majority, as one server left of three), and the replica then says it left
            // ([`Api::left_group`]).
            debug!(stream = %name, "leaving the stream's group once removed from it");
            if let Some(h) = self.streams.get(name) {
                h.tx.send(super::StreamCmd::SetPeers(peers.to_vec()));
            }
            return false;
        }
        if !peers.contains(&me) {
            if here {
                // Not a delete: the stream goes on without this server, so its consumers'
                // requesters hear nothing from it (a leader that leaves ends its waiting
                // requests as at a shutdown, and they pull again from the next leader).
                debug!(stream = %name, "leaving the stream's group");
                self.stop_stream(name, false);
                let _ = std::fs::remove_dir_all(self.stream_dir(name));
            }
            return false;
        }
        let Some(a) = self
            .meta
            .as_ref()
            .and_then(|(meta, _)| meta.assignment(account, name))
        else {
            return here;
        };
        if here {
            let single = self.streams.get(name).is_some_and(|h| !h.replicated);
            if single && peers.len() > 1 {
                if let Err(err) = self.make_replicated(&a) {
                    warn!(stream = %name, error = format!("{err:#}"), "making the stream replicated");
                }
            } else if let Some(h) = self.streams.get(name) {
                h.tx.send(super::StreamCmd::SetPeers(peers.to_vec()));
            }
            return true;
        }
        let a = StreamAssignment {
            peers: peers.to_vec(),
            ..a
        };
        debug!(stream = %name, "joining the stream's group");
        if let Err(err) = self.open_joining(&a) {
            warn!(stream = %name, error = %err.description, "joining a stream's group");
        }
        true
    }

    /// The replica of stream `name` was removed from its group ([`ApiCmd::LeftGroup`]): it
    /// stops and its files go, if the meta group indeed no longer gives it this server.
    pub(super) fn left_group(&mut self, name: &str) {
        let me = self.server.server_name().to_string();
        let account = self.account.name().to_string();
        let member = self
            .meta
            .as_ref()
            .and_then(|(meta, _)| meta.assignment(&account, name))
            .is_some_and(|a| a.peers.contains(&me));
        if member || !self.streams.contains_key(name) {
            return;
        }
        info!(stream = %name, "left the stream's group");
        self.stop_stream(name, false);
        let _ = std::fs::remove_dir_all(self.stream_dir(name));
    }

    /// This server's stream of one replica becomes the first member of its Raft group: the
    /// stream stops (its subjects left first), answering its whole state, and reopens as a
    /// replica whose group starts from that state; its leader then adds the other servers
    /// of `a` (each gets the snapshot).
    fn make_replicated(&mut self, a: &StreamAssignment) -> anyhow::Result<()> {
        let name = a.config.name.clone();
        let created = self.streams.get(&name).map_or(a.created, |h| h.created);
        let created_ns = created.unix_nanos().unwrap_or_else(unix_now);
        let epoch = super::super::replica::Replica::epoch_for(created_ns);
        self.stop_for_seed(&name, epoch)?;
        self.write_meta(&a.config, &created)?;
        self.open_stream_in(
            a.config.clone(),
            created,
            &a.peers,
            None,
            super::ReplicaStart::Seed { epoch },
        )
    }

    /// Opens this server's replica of a stream whose group already runs without it: no
    /// membership of its own; it learns the group's from the leader's snapshot.
    fn open_joining(&mut self, a: &StreamAssignment) -> Result<(), ApiError> {
        self.write_meta(&a.config, &a.created)
            .map_err(|err| ApiError::stream_create(format!("{err:#}")))?;
        self.open_stream_in(
            a.config.clone(),
            a.created,
            &a.peers,
            None,
            super::ReplicaStart::Joining,
        )
        .map_err(|err| ApiError::stream_create(format!("{err:#}")))
    }

    fn open_assigned(
        &mut self,
        a: &StreamAssignment,
        reply: Option<Bytes>,
    ) -> Result<(), ApiError> {
        let config = a.config.clone();
        if !super::is_memory(&config) || a.peers.len() > 1 {
            self.write_meta(&config, &a.created)
                .map_err(|err| ApiError::stream_create(format!("{err:#}")))?;
        }
        self.open_stream_in(config, a.created, &a.peers, reply, super::ReplicaStart::Member).map_err(|err| {
            warn!(stream = %a.config.name, error = format!("{err:#}"), "opening an assigned stream");
            let _ = std::fs::remove_dir_all(self.stream_dir(&a.config.name));
            ApiError::stream_create(format!("{err:#}"))
        })
    }
}

/// The member a meta leader named `me` hands leadership to (see [`Api::meta_step_down`]):
/// `members` are the meta group's, `up` the JetStream servers with a route to this one now
/// (with their placement tags), `cluster` this server's cluster name (every member's: one
/// cluster, no gateways). Without `preferred`, a connected member in `placement.cluster` that
/// has every tag of `placement.tags` (as nats-server 2.15.1's `getStepDownPreferredPlacement`:
/// case-insensitive, no `!` exclusion) is picked at random.
fn step_down_target(
    me: &str,
    members: &[String],
    up: &BTreeMap<String, Vec<String>>,
    cluster: &str,
    placement: Option<&Placement>,
) -> Result<String, ApiError> {
    use jsproto::api::cluster::{
        no_replacement_peer, preferred_already_leader, preferred_not_known,
    };
    use rand::seq::IndexedRandom;
    let wanted: &[String] = placement.map_or(&[], |p| p.tags.as_slice());
    let connected: Vec<&String> = members
        .iter()
        .filter(|m| m.as_str() != me)
        .filter(|m| {
            up.get(*m)
                .is_some_and(|tags| wanted.iter().all(|t| has_tag(tags, t)))
        })
        .collect();
    let pick = |from: &[&String]| {
        from.choose(&mut rand::rng())
            .map(|m| (*m).clone())
            .ok_or_else(no_replacement_peer)
    };
    let Some(p) = placement else {
        return pick(&connected);
    };
    if !p.preferred.is_empty() {
        if p.preferred == me {
            return Err(preferred_already_leader(&p.preferred));
        }
        if !members.contains(&p.preferred) {
            return Err(preferred_not_known(&p.preferred));
        }
        if up.contains_key(&p.preferred) {
            return Ok(p.preferred.clone());
        }
        // Not connected: another member, as nats-server's `StepDown` picks a healthy one.
        let any: Vec<&String> = members
            .iter()
            .filter(|m| m.as_str() != me && up.contains_key(*m))
            .collect();
        return pick(&any);
    }
    if !p.cluster.is_empty() && p.cluster != cluster {
        return Err(no_replacement_peer());
    }
    pick(&connected)
}

/// Whether `tags` (a server's, lower-cased) has `tag`, compared trimmed and case-insensitively
/// as nats-server's `TagList.Contains`.
fn has_tag(tags: &[String], tag: &str) -> bool {
    let tag = tag.trim().to_lowercase();
    tags.contains(&tag)
}

/// nats-server's placement tag that keeps a server out of every stream's placement.
const EXCLUDE_PLACEMENT: &str = "!jetstream";

/// The servers a new stream is placed on, as nats-server 2.15.1's `selectPeerGroup` picks
/// them among the meta group's members (`load`: each member and how many streams it holds):
///
/// * `placement.cluster` other than `cluster` (this server's, every member's): 10005
///   `no suitable peers for placement`;
/// * a member with the tag `!jetstream` is never chosen;
/// * each tag of `placement.tags` must be one of the member's (`tags`: the placement tags of
///   each server met, see [`crate::cluster::Cluster::known_tags`]), compared trimmed and
///   case-insensitively; a tag written `!t` means the member must not have `t`;
/// * of the members that match, `num_replicas` that are `up` (this server and those with a
///   route), fewest streams first (ties at random).
///
/// Fewer matching members than `num_replicas`: 10005 with nats-server's text, e.g.
/// `no suitable peers for placement, tags not matched ['az:9']` (each member left out names
/// the first tag it lacks; in the order met here, where nats-server's order is random),
/// `, tags excluded ['az:1']`, `, exclude tag set`, and `, peer offline` when a member's tags
/// are unknown (not met since this server started) while tags are asked for. Enough matching
/// members but too few of them up: 503/10023 `insufficient resources` (nats-server would place
/// replicas on a member that is down; this server does not).
fn ranked_peers(
    config: &StreamConfig,
    cluster: &str,
    load: &BTreeMap<String, usize>,
    up: &[String],
    tags: &BTreeMap<String, Vec<String>>,
) -> Result<Vec<String>, ApiError> {
    let placement = config.placement.clone().unwrap_or_default();
    if !placement.cluster.is_empty() && placement.cluster != cluster {
        return Err(ApiError::cluster_no_peers(
            "no suitable peers for placement",
        ));
    }
    // (tag as written without its `!`, whether it excludes)
    let asked: Vec<(&str, bool)> = placement
        .tags
        .iter()
        .map(|t| match t.strip_prefix('!') {
            Some(rest) => (rest, true),
            None => (t.as_str(), false),
        })
        .collect();
    let (mut offline, mut exclude_tag_set) = (false, false);
    let (mut not_matched, mut excluded): (Vec<&str>, Vec<&str>) = (Vec::new(), Vec::new());
    let mut matching: Vec<(usize, u64, String)> = Vec::new();
    for (name, n) in load {
        let Some(have) = tags.get(name) else {
            if asked.is_empty() {
                // Unknown tags matter only when tags are asked for.
                matching.push((*n, rand::random::<u64>(), name.clone()));
            } else {
                offline = true;
            }
            continue;
        };
        if has_tag(have, EXCLUDE_PLACEMENT) {
            exclude_tag_set = true;
            continue;
        }
        let mut ok = true;
        for (tag, exclude) in &asked {
            let has = has_tag(have, tag);
            if *exclude && has {
                if !excluded.contains(tag) {
                    excluded.push(tag);
                }
                ok = false;
                break;
            }
            if !*exclude && !has {
                if !not_matched.contains(tag) {
                    not_matched.push(tag);
                }
                ok = false;
                break;
            }
        }
        if ok {
            matching.push((*n, rand::random::<u64>(), name.clone()));
        }
    }
    let want = usize::try_from(config.num_replicas.max(1)).unwrap_or(1);
    if matching.len() < want {
        let list = |tags: &[&str]| {
            tags.iter()
                .map(|t| format!("'{t}'"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut text = String::from("no suitable peers for placement");
        if offline {
            text.push_str(", peer offline");
        }
        if exclude_tag_set {
            text.push_str(", exclude tag set");
        }
        if !not_matched.is_empty() {
            text.push_str(&format!(", tags not matched [{}]", list(&not_matched)));
        }
        if !excluded.is_empty() {
            text.push_str(&format!(", tags excluded [{}]", list(&excluded)));
        }
        return Err(ApiError::cluster_no_peers(text));
    }
    let mut candidates: Vec<(usize, u64, String)> = matching
        .into_iter()
        .filter(|(_, _, name)| up.contains(name))
        .collect();
    candidates.sort();
    Ok(candidates.into_iter().map(|(_, _, name)| name).collect())
}

/// The first `want` of `ranked` ([`ranked_peers`]); 10023 insufficient resources when
/// fewer are up.
fn select_peers(ranked: Vec<String>, want: usize) -> Result<Vec<String>, ApiError> {
    if ranked.len() < want {
        return Err(ApiError::insufficient_resources());
    }
    Ok(ranked.into_iter().take(want).collect())
}

/// A request body that must be there: empty (or blank) is 10003 `bad request`, as
/// nats-server answers the peer and server removals; otherwise [`decode_request`].
fn decode_required<T: serde::de::DeserializeOwned + Default>(body: &[u8]) -> Result<T, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::bad_request());
    }
    decode_request(body)
}

/// How long the meta leader waits for other servers' stream infos (`STREAM.LIST`).
const REMOTE_INFO_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// Passes the answers to [`Api::remote_infos`]'s requests to the API thread.
struct Gather {
    tx: std::sync::Mutex<std::sync::mpsc::Sender<(Bytes, Bytes)>>,
}

impl crate::router::InternalHandler for Gather {
    fn on_message(&self, msg: crate::router::RoutedMsg<'_>, _later: &mut crate::router::BurstWork) {
        if let Ok(tx) = self.tx.lock() {
            let _ = tx.send((msg.subject.clone(), msg.payload.clone()));
        }
    }

    fn clustered(&self) -> bool {
        true
    }
}

/// The names (sorted) of the assigned streams whose subjects overlap `filter` (all when
/// empty).
fn matching(assignments: &[StreamAssignment], filter: &str) -> Vec<String> {
    let mut names: Vec<String> = assignments
        .iter()
        .filter(|a| super::subjects_match(&a.config, filter))
        .map(|a| a.config.name.clone())
        .collect();
    names.sort();
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: &[&str]) -> Vec<String> {
        n.iter().map(ToString::to_string).collect()
    }

    fn placement(cluster: &str, preferred: &str) -> Placement {
        Placement {
            cluster: cluster.into(),
            preferred: preferred.into(),
            ..Placement::default()
        }
    }

    #[test]
    fn step_down_targets() {
        let members = names(&["n1", "n2", "n3"]);
        let up = tagged(&[("n2", &["az:2"]), ("n3", &["az:3", "ssd"])]);
        for _ in 0..20 {
            let t = step_down_target("n1", &members, &up, "C", None).unwrap();
            assert!(t == "n2" || t == "n3", "{t}");
        }
        let p = placement("", "n3");
        assert_eq!(
            step_down_target("n1", &members, &up, "C", Some(&p)).unwrap(),
            "n3"
        );
        let p = placement("", "n1");
        assert_eq!(
            step_down_target("n1", &members, &up, "C", Some(&p))
                .unwrap_err()
                .description,
            r#"preferred server "n1" is already leader"#
        );
        let p = placement("", "nX");
        assert_eq!(
            step_down_target("n1", &members, &up, "C", Some(&p))
                .unwrap_err()
                .description,
            r#"preferred server "nX" not known"#
        );
        // A member that is not connected: another one.
        let p = placement("", "n3");
        let only_n2 = tagged(&[("n2", &[])]);
        assert_eq!(
            step_down_target("n1", &members, &only_n2, "C", Some(&p)).unwrap(),
            "n2"
        );
        let p = placement("D", "");
        let e = step_down_target("n1", &members, &up, "C", Some(&p)).unwrap_err();
        assert_eq!(
            (e.err_code, e.description.as_str()),
            (10005, "no replacement peer connected")
        );
        let p = placement("C", "");
        assert!(step_down_target("n1", &members, &up, "C", Some(&p)).is_ok());
        // Tags: every one, any case.
        for (tags, want) in [
            (&["AZ:3"][..], Ok("n3")),
            (&["az:3", "ssd"][..], Ok("n3")),
            (&[" az:2 "][..], Ok("n2")),
            (&["az:2", "ssd"][..], Err(10005)),
            (&["az:9"][..], Err(10005)),
        ] {
            let p = Placement {
                tags: names(tags),
                ..Placement::default()
            };
            let got = step_down_target("n1", &members, &up, "C", Some(&p));
            assert_eq!(got.as_deref().map_err(|e| e.err_code), want, "{tags:?}");
        }
        // Nobody else connected (a server with a route that is no member does not count).
        let stranger = tagged(&[("n9", &[])]);
        let e = step_down_target("n1", &members, &stranger, "C", None).unwrap_err();
        assert_eq!(e.err_code, 10005);
    }

    fn tagged(servers: &[(&str, &[&str])]) -> BTreeMap<String, Vec<String>> {
        servers
            .iter()
            .map(|(n, t)| ((*n).to_string(), names(t)))
            .collect()
    }

    fn config(replicas: i64, cluster: &str, tags: &[&str]) -> StreamConfig {
        StreamConfig {
            name: "S".into(),
            num_replicas: replicas,
            placement: Some(Placement {
                cluster: cluster.into(),
                tags: names(tags),
                ..Placement::default()
            }),
            ..StreamConfig::default()
        }
    }

    /// [`ranked_peers`] then [`select_peers`], as [`Api::place`] does.
    fn pick(
        c: &StreamConfig,
        cluster: &str,
        load: &BTreeMap<String, usize>,
        up: &[String],
        tags: &BTreeMap<String, Vec<String>>,
    ) -> Result<Vec<String>, ApiError> {
        let want = usize::try_from(c.num_replicas.max(1)).unwrap_or(1);
        ranked_peers(c, cluster, load, up, tags).and_then(|r| select_peers(r, want))
    }

    #[test]
    fn placement_by_tags() {
        let load: BTreeMap<String, usize> = [("n1", 0), ("n2", 1), ("n3", 2)]
            .map(|(n, l)| (n.to_string(), l))
            .into();
        let up = names(&["n1", "n2", "n3"]);
        let tags = tagged(&[
            ("n1", &["az:1", "ssd"]),
            ("n2", &["az:2"]),
            ("n3", &["az:3", "ssd"]),
        ]);
        let place = |c: &StreamConfig| pick(c, "C", &load, &up, &tags);
        let text = |r: Result<Vec<String>, ApiError>| {
            let e = r.unwrap_err();
            assert_eq!(e.err_code, 10005);
            e.description
        };
        assert_eq!(place(&config(1, "", &["az:3"])).unwrap(), ["n3"]);
        assert_eq!(place(&config(1, "C", &["AZ:2 "])).unwrap(), ["n2"]);
        // Fewest streams first among the matching.
        assert_eq!(place(&config(2, "", &["ssd"])).unwrap(), ["n1", "n3"]);
        assert_eq!(place(&config(1, "", &["!az:1", "ssd"])).unwrap(), ["n3"]);
        assert_eq!(place(&config(3, "", &[])).unwrap(), ["n1", "n2", "n3"]);
        assert_eq!(
            text(place(&config(1, "", &["az:9"]))),
            "no suitable peers for placement, tags not matched ['az:9']"
        );
        assert_eq!(
            text(place(&config(3, "", &["ssd"]))),
            "no suitable peers for placement, tags not matched ['ssd']"
        );
        assert_eq!(
            text(place(&config(2, "", &["az:1", "az:2"]))),
            "no suitable peers for placement, tags not matched ['az:2', 'az:1']"
        );
        assert_eq!(
            text(place(&config(3, "", &["!az:1"]))),
            "no suitable peers for placement, tags excluded ['az:1']"
        );
        assert_eq!(
            text(place(&config(1, "D", &[]))),
            "no suitable peers for placement"
        );
        // `!jetstream` keeps a server out.
        let mut out = tags.clone();
        out.insert("n1".into(), names(&["!jetstream"]));
        let r = pick(&config(3, "", &[]), "C", &load, &up, &out);
        assert_eq!(text(r), "no suitable peers for placement, exclude tag set");
        // A member never met: unknown tags.
        let mut unknown = tags.clone();
        unknown.remove("n3");
        let r = pick(&config(2, "", &["ssd"]), "C", &load, &up, &unknown);
        assert_eq!(
            text(r),
            "no suitable peers for placement, peer offline, tags not matched ['ssd']"
        );
        assert_eq!(
            pick(&config(3, "", &[]), "C", &load, &up, &unknown).unwrap(),
            ["n1", "n2", "n3"]
        );
        // Matching, but down: insufficient resources.
        let two = names(&["n1", "n2"]);
        let r = pick(&config(2, "", &["ssd"]), "C", &load, &two, &tags);
        assert_eq!(r.unwrap_err().err_code, 10023);
    }
}
