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
//! | any other request naming a stream        | the stream's server; the meta leader when no  |
//! |                                          | such stream exists (`10059 stream not found`) |
//!
//! Pull requests, acks, direct gets and publishes reach the stream's server through the
//! stream's own subscriptions, which are the cluster's too.
//!
//! The meta leader places a stream on the `num_replicas` JetStream servers that are up and
//! hold the fewest streams. A new `num_replicas` (1 to 3 or 5, 3 to 5 and back; back to 1
//! is 10061)
//! or a peer removal gives the stream other servers ([`MetaOp::UpdateStream`]'s `peers`,
//! [`MetaOp::SetPeers`]): a server added opens an empty replica that joins the group, a
//! server dropped removes its replica, and the stream's leader changes the group's members
//! one at a time (`super::replica`).

use std::sync::atomic::Ordering;

use bytes::Bytes;
use jsproto::api::stream::{
    check_stream_create_in, check_stream_update_in, StreamConfig, StreamCreateResponse,
    StreamDeleteResponse, StreamInfo, StreamListResponse, StreamNamesRequest, StreamNamesResponse,
    StreamUpdateResponse, LIST_LIMIT, NAMES_LIMIT,
};
use jsproto::api::{decode_request, ApiError, ApiResponse};
use tracing::{debug, warn};

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

    /// The servers a stream with `config` may be placed on: the meta group's members that
    /// are up now (this server, and those with a route), fewest streams first.
    fn candidates(&self, config: &StreamConfig) -> Result<Vec<String>, ApiError> {
        let Some((meta, _)) = &self.meta else {
            return Err(ApiError::cluster_not_avail());
        };
        if let Some(p) = &config.placement {
            if !p.tags.is_empty() {
                // No server has tags (`server_tags` is not supported yet).
                return Err(ApiError::cluster_no_peers(
                    "no suitable peers for placement",
                ));
            }
            if !p.cluster.is_empty()
                && self.server.cluster().map(|c| c.name()) != Some(p.cluster.as_str())
            {
                return Err(ApiError::cluster_no_peers(
                    "no suitable peers for placement",
                ));
            }
        }
        let up: Vec<String> = match self.server.cluster() {
            Some(c) => {
                let mut up: Vec<String> = c
                    .peers()
                    .into_iter()
                    .filter(|p| p.jetstream)
                    .map(|p| p.name)
                    .collect();
                up.push(c.server_name().to_string());
                up
            }
            None => vec![self.server.server_name().to_string()],
        };
        let mut candidates: Vec<(usize, u64, String)> = meta
            .load()
            .into_iter()
            .filter(|(name, _)| up.contains(name))
            .map(|(name, n)| (n, rand::random::<u64>(), name))
            .collect();
        candidates.sort();
        Ok(candidates.into_iter().map(|(_, _, n)| n).collect())
    }

    /// The servers for a new stream: `num_replicas` of [`Api::candidates`].
    fn place(&self, config: &StreamConfig) -> Result<Vec<String>, ApiError> {
        let want = usize::try_from(config.num_replicas.max(1)).unwrap_or(1);
        let candidates = self.candidates(config)?;
        if candidates.len() < want {
            return Err(ApiError::insufficient_resources());
        }
        Ok(candidates.into_iter().take(want).collect())
    }

    /// A stream's servers for `config`'s `num_replicas` (changed from `a`'s): the ones it
    /// has, then more from [`Api::candidates`]; or the first ones it has (the stream's
    /// group moves leadership off a server it drops).
    fn resize(&self, a: &StreamAssignment, config: &StreamConfig) -> Result<Vec<String>, ApiError> {
        let want = usize::try_from(config.num_replicas.max(1)).unwrap_or(1);
        let mut peers = a.peers.clone();
        if want <= peers.len() {
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

    /// `STREAM.PEER.REMOVE` on the meta leader: the server named leaves the stream's group,
    /// and a server up that is not in it takes its place when there is one (otherwise the
    /// stream has one replica fewer until its next change). Answered once applied.
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
        let result = if body.iter().all(u8::is_ascii_whitespace) {
            Err(ApiError::bad_request())
        } else {
            decode_request::<StreamRemovePeerRequest>(body)
        };
        let peer = match result {
            Ok(req) if req.peer.is_empty() => Err(ApiError::bad_request()),
            Ok(req) if !a.peers.contains(&req.peer) => Err(ApiError::cluster_peer_not_member()),
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
        let mut peers: Vec<String> = a.peers.iter().filter(|p| **p != peer).cloned().collect();
        if let Ok(candidates) = self.candidates(&a.config) {
            if let Some(c) = candidates
                .into_iter()
                .find(|c| *c != peer && !peers.contains(c))
            {
                peers.push(c);
            }
        }
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
        let result = decode_request::<StreamNamesRequest>(body).map(|req| {
            let names = matching(&assignments, &req.subject);
            StreamNamesResponse {
                total: names.len(),
                offset: req.offset,
                limit: NAMES_LIMIT,
                streams: names
                    .into_iter()
                    .skip(req.offset)
                    .take(NAMES_LIMIT)
                    .collect(),
            }
        });
        self.answer(reply, result);
    }

    /// `STREAM.LIST` by the meta leader: the streams it holds with their state; those held
    /// by other servers are listed in `missing` (their state is theirs to tell).
    fn cluster_list(&mut self, reply: Option<&Bytes>, body: &[u8]) {
        let assignments = self.assignments();
        let result = decode_request::<StreamNamesRequest>(body).map(|req| {
            let names = matching(&assignments, &req.subject);
            let total = names.len();
            let mut streams: Vec<StreamInfo> = Vec::new();
            let mut missing = Vec::new();
            for name in names.iter().skip(req.offset).take(LIST_LIMIT) {
                match self.info_of(name, true) {
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
                if !assignment.peers.contains(&me)
                    || self.streams.contains_key(&assignment.config.name)
                {
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
                let response = result.and_then(|()| {
                    self.info_of(&name, false)
                        .map(|info| StreamCreateResponse {
                            info,
                            did_create: true,
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
        if !peers.contains(&me) {
            if here {
                debug!(stream = %name, "leaving the stream's group");
                self.stop_stream(name, true);
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

    /// This server's stream of one replica becomes the first member of its Raft group: the
    /// stream stops (its subjects left first), answering its whole state, and reopens as a
    /// replica whose group starts from that state; its leader then adds the other servers
    /// of `a` (each gets the snapshot).
    fn make_replicated(&mut self, a: &StreamAssignment) -> anyhow::Result<()> {
        let name = a.config.name.clone();
        let created = self.streams.get(&name).map_or(a.created, |h| h.created);
        let created_ns = created.unix_nanos().unwrap_or_else(unix_now);
        let epoch = super::super::replica::Replica::epoch_for(created_ns);
        let data = self.stop_for_seed(&name, epoch)?;
        self.write_meta(&a.config, &created)?;
        self.open_stream_in(
            a.config.clone(),
            created,
            &a.peers,
            None,
            super::ReplicaStart::Seed { data, epoch },
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
