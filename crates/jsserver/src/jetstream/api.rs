//! The API thread: dispatches `$JS.API.…` requests and keeps the set of streams.
//!
//! Subjects, request/response JSON and error codes are nats-server's
//! (`shared/reference/jetstream-api.md`); the JSON types live in `jsproto::api`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, Receiver};
use std::sync::Arc;
use std::thread::JoinHandle;

use anyhow::Context;
use bytes::Bytes;
use jsproto::api::account::AccountInfo;
use jsproto::api::consumer::{
    check_consumer_create_in, check_empty_request, check_supported as consumer_supported,
    parse_create_subject, ConsumerCreateResponse, ConsumerDeleteResponse, ConsumerInfoResponse,
    ConsumerListResponse, ConsumerNamesRequest, ConsumerNamesResponse, ConsumerPauseRequest,
    ConsumerPauseResponse, ConsumerPendingRequest, ConsumerPendingResponse, ConsumerResetRequest,
    ConsumerUnpinRequest, ConsumerUnpinResponse,
};
use jsproto::api::stream::{
    check_removal_allowed, check_stream_create, check_supported as stream_supported,
    MsgDeleteRequest, MsgGetRequest, StreamConfig, StreamCreateResponse, StreamDeleteResponse,
    StreamInfo, StreamInfoRequest, StreamInfoResponse, StreamListResponse, StreamMsgDeleteResponse,
    StreamMsgGetResponse, StreamNamesRequest, StreamNamesResponse, StreamPurgeRequest,
    StreamPurgeResponse, StreamUpdateResponse, LIST_LIMIT, NAMES_LIMIT,
};
use jsproto::api::time::Timestamp;
use jsproto::api::{decode_request, encode_error, encode_ok, to_json, ApiError, ApiResponse};
use serde::{Deserialize, Serialize};
use tracing::{debug, warn};

use super::ops::{StreamOp, StreamQuery};
use super::outbox::Outbox;
use super::stream::{
    is_memory, store_limits, stream_sender, timestamp, unix_now, Ingest, StreamCmd, StreamEngine,
    StreamSender, StreamShared,
};
use super::{streams_dir, ApiCmd};
use crate::account::Account;
use crate::options::SyncPolicy;
use crate::router::{BurstWork, InternalHandler, RoutedMsg};
use crate::server::{Server, NATS_VERSION};
use crate::store::{FileStore, FileStoreConfig, MemoryStore, MsgStore, PurgeRequest};
use jsproto::api::advisory::{JsAdvisory, StreamAction};

#[path = "api_cluster.rs"]
mod cluster;

/// A replicated stream's group is started from its creation config (seeded) by a member that
/// opens it this soon after the stream's creation; later, a member without a log joins.
const FRESH_GROUP: std::time::Duration = std::time::Duration::from_secs(30);

/// What is kept on disk for a file stream: `meta.json`.
#[derive(Debug, Serialize, Deserialize)]
struct StreamMeta {
    config: StreamConfig,
    created: Timestamp,
}

/// The API thread's view of one stream.
/// How this server's replica of a replicated stream starts ([`Api::open_stream_in`]).
#[derive(Debug)]
pub(super) enum ReplicaStart {
    /// One of the servers the group was created with (or any member restarting): a new log
    /// starts with those servers as its members.
    Member,
    /// Added to a running group: no membership of its own; it takes the group's from the
    /// leader's snapshot.
    Joining,
    /// The server of a stream of one replica that becomes replicated: the group starts from
    /// the stream's state, which the stopped stream wrote as its Raft log's first snapshot
    /// on `epoch` ([`super::stream::SeedRequest`]), with this server its only member, which
    /// then adds the others.
    Seed {
        /// The replicated stream's epoch the snapshot was taken on.
        epoch: jsproto::stream::Epoch,
    },
}

/// A `STREAM.NAMES` answer: the page of `names` (sorted) from `offset`.
fn names_page(names: Vec<String>, offset: usize) -> StreamNamesResponse {
    StreamNamesResponse {
        total: names.len(),
        offset,
        limit: NAMES_LIMIT,
        streams: names.into_iter().skip(offset).take(NAMES_LIMIT).collect(),
    }
}

struct StreamHandle {
    config: StreamConfig,
    created: Timestamp,
    tx: StreamSender,
    thread: Option<JoinHandle<()>>,
    shared: Arc<StreamShared>,
    ingest: Arc<dyn InternalHandler>,
    direct: Option<Arc<dyn InternalHandler>>,
    /// Whether it is a replica of a replicated stream.
    replicated: bool,
}

impl StreamHandle {
    /// Sends `op` to the stream, in order with its other commands (it answers by itself).
    fn op(&self, op: StreamOp) {
        self.tx.send(StreamCmd::Op(op));
    }

    /// Asks the stream the query `make` builds around the answer channel, and waits for the
    /// answer (none: the stream stopped).
    fn query<T>(&self, make: impl FnOnce(mpsc::SyncSender<T>) -> StreamQuery) -> Option<T> {
        let (tx, rx) = mpsc::sync_channel(1);
        self.tx.send(StreamCmd::Query(make(tx)));
        rx.recv().ok()
    }
}

/// The internal subscriber for `$JS.API.DIRECT.GET.<stream>[.<subject>]` of one stream.
struct DirectGet {
    tx: StreamSender,
    /// Serves the whole cluster ([`InternalHandler::clustered`]).
    clustered: bool,
}

impl InternalHandler for DirectGet {
    fn clustered(&self) -> bool {
        self.clustered
    }

    fn on_message(&self, msg: RoutedMsg<'_>, _later: &mut BurstWork) {
        let Some(reply) = msg.reply.cloned() else {
            return;
        };
        self.tx.send(StreamCmd::Op(StreamOp::DirectGet {
            subject: msg.subject.clone(),
            body: msg.payload.clone(),
            reply,
        }));
    }
}

/// State of the API thread.
pub struct Api {
    server: Arc<Server>,
    account: Arc<Account>,
    outbox: Outbox,
    dir: PathBuf,
    streams: BTreeMap<String, StreamHandle>,
    total: u64,
    errors: u64,
    stats: Arc<super::JsStats>,
    /// In a cluster: what the meta group applied, and its thread ([`cluster`]).
    meta: Option<(
        Arc<super::meta::MetaState>,
        mpsc::Sender<super::meta::MetaCmd>,
    )>,
    /// This thread's own queue: a replica that left its group says so through it.
    self_tx: Option<mpsc::Sender<ApiCmd>>,
}

/// Whether `config`'s subjects overlap `filter` (always for an empty filter): the
/// `subject` filter of `STREAM.NAMES` and `STREAM.LIST`.
/// The sync policy of a stream's message store: the server's `sync_interval`, except that a
/// replicated stream's store is never fsynced before a PubAck (`always` is taken as the
/// default interval): the stream's Raft log is, by a majority, before the entry is applied,
/// and the store is emptied and rebuilt from the log at every start (`replica`).
fn replica_sync(replicated: bool, configured: SyncPolicy) -> SyncPolicy {
    match configured {
        SyncPolicy::Always if replicated => SyncPolicy::default(),
        other => other,
    }
}

fn subjects_match(config: &StreamConfig, filter: &str) -> bool {
    filter.is_empty()
        || config
            .subjects
            .iter()
            .any(|s| jsproto::subject::overlaps(s.as_bytes(), filter.as_bytes()))
}

/// Encodes a result as the API response of type `T`, counting errors.
fn respond<T: ApiResponse>(errors: &mut u64, result: Result<T, ApiError>) -> Vec<u8> {
    match result {
        Ok(body) => encode_ok(&body),
        Err(err) => {
            *errors += 1;
            encode_error::<T>(&err)
        }
    }
}

impl Api {
    /// The API state of `account` (an account of `server`) with no streams yet; `dir` is the
    /// account's JetStream directory (`<store_dir>/jetstream/<ACCOUNT>`).
    pub fn new(
        server: Arc<Server>,
        account: Arc<Account>,
        dir: PathBuf,
        stats: Arc<super::JsStats>,
    ) -> Self {
        Api {
            outbox: Outbox::new(Arc::clone(&server), Arc::clone(&account)),
            server,
            account,
            dir,
            streams: BTreeMap::new(),
            total: 0,
            errors: 0,
            stats,
            meta: None,
            self_tx: None,
        }
    }

    /// This thread's own queue (see [`ApiCmd::LeftGroup`]).
    pub fn set_self_tx(&mut self, tx: mpsc::Sender<ApiCmd>) {
        self.self_tx = Some(tx);
    }

    /// Makes this API thread a clustered one: requests are answered as `api_cluster.rs` says.
    pub fn set_meta(
        &mut self,
        state: Arc<super::meta::MetaState>,
        tx: mpsc::Sender<super::meta::MetaCmd>,
    ) {
        self.meta = Some((state, tx));
    }

    fn publish_stats(&self) {
        self.stats.api_total.store(self.total, Ordering::Relaxed);
        self.stats.api_errors.store(self.errors, Ordering::Relaxed);
        let mut streams = self.stats.streams.lock().expect("stats lock poisoned");
        streams.clear();
        for (name, s) in &self.streams {
            streams.insert(name.clone(), (Arc::clone(&s.shared), is_memory(&s.config)));
        }
    }

    /// Reopens every file stream under the JetStream directory; returns how many.
    ///
    /// # Errors
    /// When the streams directory cannot be read. A stream whose metadata is unreadable is
    /// skipped with a warning.
    pub fn recover(&mut self) -> anyhow::Result<usize> {
        let root = streams_dir(&self.dir);
        let mut count = 0;
        for entry in
            std::fs::read_dir(&root).with_context(|| format!("reading {}", root.display()))?
        {
            let path = entry?.path();
            let meta_path = path.join("meta.json");
            let meta: StreamMeta = match std::fs::read(&meta_path)
                .map_err(anyhow::Error::from)
                .and_then(|b| serde_json::from_slice(&b).map_err(anyhow::Error::from))
            {
                Ok(meta) => meta,
                Err(err) => {
                    warn!(path = %meta_path.display(), error = %err, "skipping unreadable stream");
                    continue;
                }
            };
            let name = meta.config.name.clone();
            if meta.config.num_replicas > 1 || path.join("raft").exists() {
                // A replicated stream (or one whose group shrank to this server: its state is
                // its Raft log) is opened when the meta group's log assigns it again.
                continue;
            }
            match self.open_stream(meta.config, meta.created) {
                Ok(()) => count += 1,
                Err(err) => {
                    warn!(stream = %name, error = format!("{err:#}"), "could not recover stream")
                }
            }
        }
        Ok(count)
    }

    /// The thread body: one request at a time, in arrival order.
    /// `bound` counts the client requests waiting ([`super::api_queue`]): each is given back
    /// as it is taken.
    pub fn run(mut self, rx: Receiver<ApiCmd>, bound: &super::api_queue::ApiQueueBound) {
        while let Ok(cmd) = rx.recv() {
            match cmd {
                ApiCmd::Request {
                    subject,
                    reply,
                    headers: _,
                    payload,
                    from_route,
                    queued_len,
                } => {
                    bound.release(queued_len);
                    self.dispatch(&subject, reply.as_ref(), &payload, from_route);
                    self.outbox.flush();
                    self.publish_stats();
                }
                ApiCmd::Assigned { op, meta_leader } => {
                    self.on_assigned(*op, meta_leader);
                    self.outbox.flush();
                    self.publish_stats();
                }
                ApiCmd::LeftGroup { stream } => {
                    self.left_group(&stream);
                    self.outbox.flush();
                    self.publish_stats();
                }
                ApiCmd::Shutdown => break,
            }
        }
        let names: Vec<String> = self.streams.keys().cloned().collect();
        for name in names {
            self.stop_stream(&name, false);
        }
    }

    fn dispatch(&mut self, subject: &Bytes, reply: Option<&Bytes>, body: &Bytes, from_route: bool) {
        let Ok(subject_str) = std::str::from_utf8(subject) else {
            return;
        };
        let Some(rest) = subject_str.strip_prefix("$JS.API.") else {
            return;
        };
        let tokens: Vec<&str> = rest.split('.').collect();
        debug!(subject = subject_str, "JetStream API request");
        if tokens.as_slice() == ["META", "LEADER", "STEPDOWN"] {
            // The system account's, answered by the meta leader alone (`api_cluster`); no
            // answer anywhere else, as from nats-server.
            return self.meta_step_down(reply, body);
        }
        if tokens.as_slice() == ["SERVER", "REMOVE"] {
            // The system account's as well (`api_cluster`).
            return self.server_remove(reply, body);
        }
        if self.account.jetstream_limits().is_none() {
            // In a cluster, the client's own server answers.
            if !from_route {
                self.not_enabled(&tokens, reply, body);
            }
            return;
        }
        if self.clustered_dispatch(&tokens, reply, body, from_route) {
            return;
        }
        // Counted after the answer is built, as nats-server's account info shows.
        let counted = self.total + 1;
        let response = match tokens.as_slice() {
            ["INFO"] => Some(self.account_info()),
            ["STREAM", "CREATE", name] => Some(self.stream_create(name, body)),
            ["STREAM", "UPDATE", name] => Some(self.stream_update(name, body)),
            ["STREAM", "INFO", name] => {
                self.total = counted;
                return self.stream_info(name, reply, body);
            }
            ["STREAM", "DELETE", name] => Some(self.stream_delete(name)),
            ["STREAM", "NAMES"] => Some(self.stream_names(body)),
            ["STREAM", "LIST"] => Some(self.stream_list(body)),
            ["STREAM", "PURGE", name] => {
                self.total = counted;
                return self.stream_purge(name, reply, body);
            }
            ["STREAM", "MSG", "GET", name] => {
                self.total = counted;
                return self.msg_get(name, reply, body);
            }
            ["CONSUMER", "CREATE", ..] | ["CONSUMER", "DURABLE", "CREATE", ..] => {
                self.total = counted;
                return self.consumer_create(subject_str, reply, body);
            }
            ["CONSUMER", op @ ("INFO" | "DELETE"), stream, consumer] => {
                self.total = counted;
                return self.consumer_op(op, stream, consumer, reply, body);
            }
            ["CONSUMER", "PAUSE", stream, consumer] => {
                self.total = counted;
                return self.consumer_pause(stream, consumer, reply, body);
            }
            ["CONSUMER", "PENDING", stream, consumer] => {
                self.total = counted;
                let Some(handle) = self.streams.get(*stream) else {
                    return self.error_reply::<ConsumerPendingResponse>(
                        reply,
                        ApiError::stream_not_found(),
                    );
                };
                handle.op(StreamOp::ConsumerPending {
                    consumer: (*consumer).to_owned(),
                    offset: ConsumerPendingRequest::parse(body),
                    reply: reply.cloned(),
                });
                return;
            }
            ["CONSUMER", "RESET", stream, consumer] => {
                self.total = counted;
                // As nats-server, whose consumers answer this themselves: no stream, no
                // answer.
                if let Some(handle) = self.streams.get(*stream) {
                    handle.op(StreamOp::ConsumerReset {
                        consumer: (*consumer).to_owned(),
                        seq: ConsumerResetRequest::parse(body),
                        reply: reply.cloned(),
                    });
                }
                return;
            }
            ["CONSUMER", "UNPIN", stream, consumer] => {
                self.total = counted;
                return self.consumer_unpin(stream, consumer, reply, body);
            }
            ["CONSUMER", op @ ("NAMES" | "LIST"), stream] => {
                self.total = counted;
                return self.consumer_names(op == &"LIST", stream, reply, body);
            }
            ["STREAM", "MSG", "DELETE", name] => {
                self.total = counted;
                return self.msg_delete(name, reply, body);
            }
            ["STREAM", "LEADER", "STEPDOWN", _] => {
                // Standalone, as nats-server: clustering required, whatever the stream.
                Some(
                    respond::<jsproto::api::cluster::StreamLeaderStepdownResponse>(
                        &mut self.errors,
                        Err(ApiError::cluster_required()),
                    ),
                )
            }
            ["STREAM", "PEER", "REMOVE", _] => {
                Some(respond::<jsproto::api::cluster::StreamRemovePeerResponse>(
                    &mut self.errors,
                    Err(ApiError::cluster_required()),
                ))
            }
            ["CONSUMER", "LEADER", "STEPDOWN", _, _] => Some(respond::<
                jsproto::api::cluster::ConsumerLeaderStepdownResponse,
            >(
                &mut self.errors,
                Err(ApiError::cluster_required()),
            )),
            // Unknown or malformed API subjects get no answer at all, as from nats-server.
            _ => return,
        };
        self.total = counted;
        if let (Some(reply), Some(body)) = (reply, response) {
            self.outbox.reply(reply, body);
        }
    }

    /// The account's JetStream limits for a stream being created (`updating: None`) or
    /// updated, in nats-server's order and with its codes: `max_streams` reached (10027, on
    /// create), `max_bytes` required (10113) or over the per-stream cap (10122), the stream's
    /// `max_consumers` over the account's (10026), and its `max_bytes` (at least 1 byte when
    /// unset) on top of what the account's other streams of that storage type reserve over
    /// `max_memory` (10028) or `max_storage` (10047).
    fn check_account_limits(
        &self,
        config: &StreamConfig,
        updating: Option<&str>,
    ) -> Result<(), ApiError> {
        let Some(limits) = self.account.jetstream_limits() else {
            return Ok(());
        };
        if updating.is_none()
            && limits.max_streams > 0
            && self.streams.len() as i64 >= limits.max_streams
        {
            return Err(ApiError::maximum_streams_limit());
        }
        let memory = is_memory(config);
        if limits.max_bytes_required && config.max_bytes <= 0 {
            return Err(ApiError::stream_max_bytes_required());
        }
        let per_stream = if memory {
            limits.memory_max_stream_bytes
        } else {
            limits.storage_max_stream_bytes
        };
        if config.max_bytes > 0 && per_stream > 0 && config.max_bytes > per_stream {
            return Err(ApiError::stream_max_stream_bytes_exceeded());
        }
        if config.max_consumers > 0
            && limits.max_consumers > 0
            && config.max_consumers > limits.max_consumers
        {
            return Err(ApiError::maximum_consumers_limit());
        }
        let cap = if memory {
            limits.max_memory
        } else {
            limits.max_storage
        };
        if cap < 0 {
            return Ok(());
        }
        let reserved: i64 = self
            .streams
            .iter()
            .filter(|(n, s)| Some(n.as_str()) != updating && is_memory(&s.config) == memory)
            .map(|(_, s)| s.config.max_bytes.max(0))
            .sum();
        let add = config.max_bytes.max(1);
        if reserved > cap || add > cap - reserved {
            return Err(if memory {
                ApiError::memory_resources_exceeded()
            } else {
                ApiError::storage_resources_exceeded()
            });
        }
        Ok(())
    }

    /// An account without JetStream: `10039 JetStream not enabled for account` in each
    /// request's own response type, as nats-server answers it (an unpin's body is checked
    /// first; a reset and unknown subjects get no answer).
    fn not_enabled(&mut self, tokens: &[&str], reply: Option<&Bytes>, body: &[u8]) {
        let err = ApiError::not_enabled_for_account();
        let encoded = match tokens {
            ["INFO"] => encode_error::<AccountInfo>(&err),
            ["STREAM", "CREATE", _] => encode_error::<StreamCreateResponse>(&err),
            ["STREAM", "UPDATE", _] => encode_error::<StreamUpdateResponse>(&err),
            ["STREAM", "INFO", _] => encode_error::<StreamInfoResponse>(&err),
            ["STREAM", "DELETE", _] => encode_error::<StreamDeleteResponse>(&err),
            ["STREAM", "NAMES"] => encode_error::<StreamNamesResponse>(&err),
            ["STREAM", "LIST"] => encode_error::<StreamListResponse>(&err),
            ["STREAM", "PURGE", _] => encode_error::<StreamPurgeResponse>(&err),
            ["STREAM", "MSG", "GET", _] => encode_error::<StreamMsgGetResponse>(&err),
            ["STREAM", "MSG", "DELETE", _] => encode_error::<StreamMsgDeleteResponse>(&err),
            ["CONSUMER", "CREATE", ..] | ["CONSUMER", "DURABLE", "CREATE", ..] => {
                encode_error::<ConsumerCreateResponse>(&err)
            }
            ["CONSUMER", "INFO", _, _] => encode_error::<ConsumerInfoResponse>(&err),
            ["CONSUMER", "DELETE", _, _] => encode_error::<ConsumerDeleteResponse>(&err),
            ["CONSUMER", "PAUSE", _, _] => encode_error::<ConsumerPauseResponse>(&err),
            ["CONSUMER", "PENDING", _, _] => encode_error::<ConsumerPendingResponse>(&err),
            ["CONSUMER", "UNPIN", _, _] => match ConsumerUnpinRequest::parse(body) {
                Ok(_) => encode_error::<ConsumerUnpinResponse>(&err),
                Err(e) => encode_error::<ConsumerUnpinResponse>(&e),
            },
            ["CONSUMER", "NAMES", _] => encode_error::<ConsumerNamesResponse>(&err),
            ["CONSUMER", "LIST", _] => encode_error::<ConsumerListResponse>(&err),
            _ => return,
        };
        self.total += 1;
        self.errors += 1;
        if let Some(reply) = reply {
            self.outbox.reply(reply, encoded);
        }
    }

    fn account_info(&mut self) -> Vec<u8> {
        self.publish_stats();
        let usage = self.stats.usage();
        let mut info = AccountInfo::default();
        if let Some(limits) = self.account.jetstream_limits() {
            info.usage.limits = limits.clone();
        }
        for s in self.streams.values().filter(|s| s.config.max_bytes > 0) {
            let bytes = s.config.max_bytes as u64;
            if is_memory(&s.config) {
                info.usage.reserved_memory += bytes;
            } else {
                info.usage.reserved_storage += bytes;
            }
        }
        info.usage.memory = usage.memory;
        info.usage.storage = usage.storage;
        info.usage.streams = usage.streams;
        info.usage.consumers = usage.consumers;
        if self.meta.is_some() {
            self.cluster_usage(&mut info);
        }
        info.api.total = self.total;
        info.api.errors = self.errors;
        encode_ok(&info)
    }

    fn stream_create(&mut self, name: &str, body: &[u8]) -> Vec<u8> {
        let result = self.try_create(name, body);
        respond(&mut self.errors, result)
    }

    fn try_create(&mut self, name: &str, body: &[u8]) -> Result<StreamCreateResponse, ApiError> {
        let config = check_stream_create(name, body)?;
        // Fail closed: a setting we would store but not honour is refused.
        stream_supported(&config)?;
        if let Some(existing) = self.streams.get(name) {
            if !existing.config.same_as(&config) {
                return Err(ApiError::stream_name_exist());
            }
            let info = self
                .info_of(name, false)
                .ok_or_else(ApiError::stream_not_found)?;
            return Ok(StreamCreateResponse {
                info,
                did_create: true,
            });
        }
        self.check_overlap(name, &config)?;
        self.check_account_limits(&config, None)?;
        let created = timestamp(unix_now());
        if !is_memory(&config) {
            // `{:#}`: the whole chain, so the requester sees the OS's reason too.
            self.write_meta(&config, &created)
                .map_err(|err| ApiError::stream_create(format!("{err:#}")))?;
        }
        if let Err(err) = self.open_stream(config, created) {
            let _ = std::fs::remove_dir_all(self.stream_dir(name));
            return Err(ApiError::stream_create(format!("{err:#}")));
        }
        debug!(stream = name, "stream created");
        // Only for a stream really created (not a repeated create), as nats-server; a stream
        // capturing `$JS.EVENT.>` stores its own creation.
        self.advise_stream(StreamAction::Create, name);
        let info = self
            .info_of(name, false)
            .ok_or_else(ApiError::stream_not_found)?;
        Ok(StreamCreateResponse {
            info,
            did_create: true,
        })
    }

    fn stream_update(&mut self, name: &str, body: &[u8]) -> Vec<u8> {
        let result = self.try_update(name, body);
        respond(&mut self.errors, result)
    }

    fn try_update(&mut self, name: &str, body: &[u8]) -> Result<StreamUpdateResponse, ApiError> {
        let current = self
            .streams
            .get(name)
            .map(|s| s.config.clone())
            .ok_or_else(ApiError::stream_not_found);
        // Request problems (bad JSON, name mismatch) are reported before a missing stream.
        let config = match &current {
            Ok(current) => {
                let config = jsproto::api::stream::check_stream_update_in(
                    name,
                    body,
                    current,
                    self.meta.is_some(),
                )?;
                stream_supported(&config)?;
                config
            }
            Err(_) => {
                check_stream_create(name, body)?;
                return Err(ApiError::stream_not_found());
            }
        };
        let handle = self.streams.get(name).expect("checked above");
        let limits = (
            handle.config.consumer_limits.clone(),
            config.consumer_limits.clone(),
        );
        handle
            .query(|answer| StreamQuery::CheckConsumerLimits {
                old: limits.0,
                new: limits.1,
                answer,
            })
            .ok_or_else(ApiError::stream_not_found)??;
        self.check_overlap(name, &config)?;
        self.check_account_limits(&config, Some(name))?;
        if !is_memory(&config) {
            self.write_meta(&config, &handle.created)
                .map_err(ApiError::stream_update)?;
        }
        let applied = handle
            .query(|answer| StreamQuery::Update {
                config: Box::new(config.clone()),
                answer,
            })
            .ok_or_else(ApiError::stream_not_found)?;
        applied?;
        let old = std::mem::replace(
            &mut self.streams.get_mut(name).expect("exists").config,
            config,
        );
        if !self.streams.get(name).is_some_and(|h| h.replicated) {
            // A replicated stream's leader subscribes by itself, the update applied.
            self.resubscribe(name, &old);
        }
        self.advise_stream(StreamAction::Modify, name);
        let mut info = self
            .info_of(name, false)
            .ok_or_else(ApiError::stream_not_found)?;
        let handle = self.streams.get(name).expect("exists");
        if handle.replicated {
            // The stream takes it once the leader's entry is applied: the answer shows it.
            info.config = handle.config.clone().with_dynamic_metadata(NATS_VERSION);
        }
        Ok(StreamUpdateResponse { info })
    }

    fn stream_info(&mut self, name: &str, reply: Option<&Bytes>, body: &[u8]) {
        let request = decode_request::<StreamInfoRequest>(body);
        let Some(handle) = self.streams.get(name) else {
            return self.error_reply::<StreamInfoResponse>(reply, ApiError::stream_not_found());
        };
        let req = match request {
            Ok(req) => req,
            Err(err) => return self.error_reply::<StreamInfoResponse>(reply, err),
        };
        let leader = self.server.server_name().to_owned();
        handle.op(StreamOp::Info {
            req,
            leader,
            reply: reply.cloned(),
        });
    }

    fn stream_delete(&mut self, name: &str) -> Vec<u8> {
        let result = if self.streams.contains_key(name) {
            self.stop_stream(name, true);
            debug!(stream = name, "stream deleted");
            self.advise_stream(StreamAction::Delete, name);
            Ok(StreamDeleteResponse { success: true })
        } else {
            Err(ApiError::stream_not_found())
        };
        respond(&mut self.errors, result)
    }

    fn stream_names(&mut self, body: &[u8]) -> Vec<u8> {
        let result = decode_request::<StreamNamesRequest>(body)
            .map(|req| names_page(self.matching_streams(&req.subject), req.offset));
        respond(&mut self.errors, result)
    }

    fn stream_list(&mut self, body: &[u8]) -> Vec<u8> {
        let result = decode_request::<StreamNamesRequest>(body).map(|req| {
            let names = self.matching_streams(&req.subject);
            let total = names.len();
            let streams = names
                .iter()
                .skip(req.offset)
                .take(LIST_LIMIT)
                .filter_map(|name| self.info_of(name, true))
                .collect();
            StreamListResponse {
                total,
                offset: req.offset,
                limit: LIST_LIMIT,
                streams,
                missing: Vec::new(),
            }
        });
        respond(&mut self.errors, result)
    }

    fn stream_purge(&mut self, name: &str, reply: Option<&Bytes>, body: &[u8]) {
        let req = match StreamPurgeRequest::parse(body) {
            Ok(req) => req,
            Err(err) => return self.error_reply::<StreamPurgeResponse>(reply, err),
        };
        let Some(handle) = self.streams.get(name) else {
            return self.error_reply::<StreamPurgeResponse>(reply, ApiError::stream_not_found());
        };
        if let Err(err) = check_removal_allowed(&handle.config, true) {
            return self.error_reply::<StreamPurgeResponse>(reply, err);
        }
        let purge = PurgeRequest {
            filter: (!req.filter.is_empty()).then(|| req.filter.clone()),
            up_to_seq: (req.seq > 0).then_some(req.seq),
            keep: (req.keep > 0).then_some(req.keep),
        };
        handle.op(StreamOp::Purge {
            purge,
            reply: reply.cloned(),
        });
    }

    fn msg_get(&mut self, name: &str, reply: Option<&Bytes>, body: &[u8]) {
        let Some(handle) = self.streams.get(name) else {
            return self.error_reply::<StreamMsgGetResponse>(reply, ApiError::stream_not_found());
        };
        let req = match decode_request::<MsgGetRequest>(body)
            .and_then(|r| r.msg_get_selector().map(|_| ()).map(|()| r))
        {
            Ok(req) => req,
            Err(err) => return self.error_reply::<StreamMsgGetResponse>(reply, err),
        };
        handle.op(StreamOp::MsgGet {
            req,
            reply: reply.cloned(),
        });
    }

    fn msg_delete(&mut self, name: &str, reply: Option<&Bytes>, body: &[u8]) {
        let req = match MsgDeleteRequest::decode(body) {
            Ok(req) => req,
            Err(err) => return self.error_reply::<StreamMsgDeleteResponse>(reply, err),
        };
        let Some(handle) = self.streams.get(name) else {
            let err = ApiError::stream_not_found();
            return self.error_reply::<StreamMsgDeleteResponse>(reply, err);
        };
        if let Err(err) = check_removal_allowed(&handle.config, false) {
            return self.error_reply::<StreamMsgDeleteResponse>(reply, err);
        }
        handle.op(StreamOp::MsgDelete {
            req,
            reply: reply.cloned(),
        });
    }

    fn consumer_create(&mut self, subject: &str, reply: Option<&Bytes>, body: &[u8]) {
        // A subject that is no create form at all gets no answer, as from nats-server.
        let Some(parsed) = parse_create_subject(subject) else {
            return;
        };
        let stream = self.streams.get(parsed.stream).map(|h| h.config.clone());
        // In a cluster `num_replicas` up to the stream's is accepted, as nats-server does; a
        // replicated stream's consumers are replicated with it whatever they ask (cluster.md).
        let clustered = self.meta.is_some();
        // Fail closed: a setting we would store but not honour is refused.
        let create = match check_consumer_create_in(subject, body, stream.as_ref(), clustered)
            .and_then(|create| consumer_supported(&create.config).map(|()| create))
        {
            Ok(create) => create,
            Err(err) => return self.error_reply::<ConsumerCreateResponse>(reply, err),
        };
        let Some(handle) = self.streams.get(&create.stream_name) else {
            return self.error_reply::<ConsumerCreateResponse>(reply, ApiError::stream_not_found());
        };
        handle.op(StreamOp::ConsumerCreate {
            create: Box::new(create),
            reply: reply.cloned(),
        });
    }

    fn consumer_op(
        &mut self,
        op: &str,
        stream: &str,
        consumer: &str,
        reply: Option<&Bytes>,
        body: &[u8],
    ) {
        let is_info = op == "INFO";
        let Some(handle) = self.streams.get(stream) else {
            let err = ApiError::stream_not_found();
            return if is_info {
                self.error_reply::<ConsumerInfoResponse>(reply, err)
            } else {
                self.error_reply::<ConsumerDeleteResponse>(reply, err)
            };
        };
        if is_info {
            if let Err(err) = check_empty_request(body) {
                return self.error_reply::<ConsumerInfoResponse>(reply, err);
            }
        }
        let (reply, consumer) = (reply.cloned(), consumer.to_owned());
        handle.op(if is_info {
            StreamOp::ConsumerInfo { consumer, reply }
        } else {
            StreamOp::ConsumerDelete { consumer, reply }
        });
    }

    fn consumer_pause(&mut self, stream: &str, consumer: &str, reply: Option<&Bytes>, body: &[u8]) {
        let Some(handle) = self.streams.get(stream) else {
            return self.error_reply::<ConsumerPauseResponse>(reply, ApiError::stream_not_found());
        };
        // An empty body resumes, as `{}` does.
        let until = if body.iter().all(u8::is_ascii_whitespace) {
            None
        } else {
            match decode_request::<ConsumerPauseRequest>(body) {
                Ok(req) => req.pause_until,
                Err(err) => return self.error_reply::<ConsumerPauseResponse>(reply, err),
            }
        };
        handle.op(StreamOp::ConsumerPause {
            consumer: consumer.to_owned(),
            until,
            reply: reply.cloned(),
        });
    }

    /// `CONSUMER.UNPIN`: the body's errors come before the stream lookup, as nats-server.
    fn consumer_unpin(&mut self, stream: &str, consumer: &str, reply: Option<&Bytes>, body: &[u8]) {
        let group = match ConsumerUnpinRequest::parse(body) {
            Ok(group) => group,
            Err(err) => return self.error_reply::<ConsumerUnpinResponse>(reply, err),
        };
        let Some(handle) = self.streams.get(stream) else {
            return self.error_reply::<ConsumerUnpinResponse>(reply, ApiError::stream_not_found());
        };
        handle.op(StreamOp::ConsumerUnpin {
            consumer: consumer.to_owned(),
            group,
            reply: reply.cloned(),
        });
    }

    fn consumer_names(&mut self, list: bool, stream: &str, reply: Option<&Bytes>, body: &[u8]) {
        let request = ConsumerNamesRequest::decode(body);
        let Some(handle) = self.streams.get(stream) else {
            let err = ApiError::stream_not_found();
            return if list {
                self.error_reply::<ConsumerListResponse>(reply, err)
            } else {
                self.error_reply::<ConsumerNamesResponse>(reply, err)
            };
        };
        let offset = match request {
            Ok(req) => req.offset,
            Err(err) => {
                return if list {
                    self.error_reply::<ConsumerListResponse>(reply, err)
                } else {
                    self.error_reply::<ConsumerNamesResponse>(reply, err)
                };
            }
        };
        handle.op(StreamOp::ConsumerNames {
            offset,
            list,
            reply: reply.cloned(),
        });
    }

    /// Publishes `STREAM.CREATED|UPDATED|DELETED.<name>` if anyone listens.
    fn advise_stream(&mut self, action: StreamAction, name: &str) {
        super::advisory::publish(
            &mut self.outbox,
            JsAdvisory::Stream {
                action,
                stream: name,
            },
        );
    }

    fn error_reply<T: ApiResponse>(&mut self, reply: Option<&Bytes>, err: ApiError) {
        self.errors += 1;
        if let Some(reply) = reply {
            self.outbox.reply(reply, encode_error::<T>(&err));
        }
    }

    /// Stream names (sorted) whose subjects overlap `filter` (all when empty).
    fn matching_streams(&self, filter: &str) -> Vec<String> {
        self.streams
            .iter()
            .filter(|(_, s)| subjects_match(&s.config, filter))
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// `10065` when `config`'s subjects overlap another stream's.
    fn check_overlap(&self, name: &str, config: &StreamConfig) -> Result<(), ApiError> {
        let others: Vec<String> = self
            .streams
            .iter()
            .filter(|(other, _)| other.as_str() != name)
            .flat_map(|(_, s)| s.config.subjects.iter().cloned())
            .collect();
        if config.subjects_overlap(&others) {
            return Err(ApiError::stream_subject_overlap());
        }
        Ok(())
    }

    /// The info of stream `name` as CREATE/UPDATE/LIST show it (config with dynamic metadata
    /// unless `stored_config`, no cluster block).
    fn info_of(&self, name: &str, stored_config: bool) -> Option<StreamInfo> {
        let handle = self.streams.get(name)?;
        let mut info = handle.query(StreamQuery::Info)?;
        if !stored_config {
            info.config = info.config.with_dynamic_metadata(NATS_VERSION);
        }
        Some(info)
    }

    fn stream_dir(&self, name: &str) -> PathBuf {
        streams_dir(&self.dir).join(name)
    }

    fn write_meta(&self, config: &StreamConfig, created: &Timestamp) -> anyhow::Result<()> {
        let dir = self.stream_dir(&config.name);
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let meta = StreamMeta {
            config: config.clone(),
            created: *created,
        };
        super::write_atomically(&dir.join("meta.json"), &to_json(&meta), true)
            .with_context(|| format!("writing {}", dir.join("meta.json").display()))
    }

    /// Opens the store, starts the stream thread and subscribes the stream's subjects.
    fn open_stream(&mut self, config: StreamConfig, created: Timestamp) -> anyhow::Result<()> {
        self.open_stream_in(config, created, &[], None, ReplicaStart::Member)
    }

    /// Opens a stream: of one replica (`peers` empty), or this server's replica of a
    /// replicated stream whose Raft group is `peers` ([`super::replica`]), which rebuilds its
    /// messages from the group's log (its own store is emptied first) and answers the create
    /// request `create_reply` if it is the group's first leader. How the replica starts is
    /// `start` ([`ReplicaStart`]).
    pub(super) fn open_stream_in(
        &mut self,
        config: StreamConfig,
        created: Timestamp,
        peers: &[String],
        create_reply: Option<Bytes>,
        start: ReplicaStart,
    ) -> anyhow::Result<()> {
        let name = config.name.clone();
        let limits = store_limits(&config);
        let raft_dir = self.stream_dir(&name).join("raft");
        // A stream whose group shrank to this one server (`num_replicas` back to 1) is still
        // its group's only member: its state is in its Raft log.
        let replicated = peers.len() > 1 || (peers.len() == 1 && raft_dir.exists());
        // A replica's store is rebuilt from its Raft log (a stream of one replica becoming
        // replicated wrote its state into the log's first snapshot before it stopped).
        if replicated {
            let dir = self.stream_dir(&name);
            for sub in ["msgs", "obs"] {
                let _ = std::fs::remove_dir_all(dir.join(sub));
            }
        }
        let (store, dir): (Box<dyn MsgStore>, Option<PathBuf>) = if is_memory(&config) {
            (Box::new(MemoryStore::new(limits)), None)
        } else {
            let dir = self.stream_dir(&name);
            let store = FileStore::open(FileStoreConfig::new(dir.join("msgs")), limits)
                .with_context(|| format!("opening the store of stream {name}"))?;
            (Box::new(store), Some(dir))
        };
        let shared = Arc::new(StreamShared::default());
        let engine = StreamEngine::new(
            config.clone(),
            created,
            store,
            dir,
            Outbox::new(Arc::clone(&self.server), Arc::clone(&self.account)),
            Arc::clone(&shared),
            replica_sync(replicated, self.server.options().sync_interval),
        );
        let mut engine = engine;
        if replicated {
            let cluster = self
                .server
                .cluster()
                .context("a replicated stream needs a cluster")?;
            let group_name = format!("{}/{}", self.account.name(), name);
            let created_ns = created.unix_nanos().unwrap_or_else(unix_now);
            let me = [self.server.server_name().to_string()];
            // A group member with no log of its own, for a stream created a while ago (the
            // meta log replayed, or a store lost): not a voter from an empty log, which
            // could elect a leader missing committed entries or overwrite the members'
            // logs; it joins as a new member would, and the leader adds it (or removes it).
            let fresh = unix_now().saturating_sub(created_ns) < FRESH_GROUP.as_nanos() as u64;
            let start = match start {
                ReplicaStart::Member if !raft_dir.exists() && !fresh => {
                    tracing::info!(stream = %name, "no raft log for a stream created before: joining its group");
                    ReplicaStart::Joining
                }
                other => other,
            };
            let seeded = matches!(start, ReplicaStart::Seed { .. });
            let (voters, epoch): (&[String], _) = match start {
                ReplicaStart::Member => {
                    // A new group: every member starts its log from the same state, the
                    // stream as created (see `Replica::initial_snapshot`).
                    if !raft_dir.exists() {
                        let epoch = super::replica::Replica::epoch_for(created_ns);
                        let data = super::replica::Replica::initial_snapshot(&config, &epoch)
                            .with_context(|| format!("the first state of stream {name}"))?;
                        crate::cluster::group::RaftGroup::seed_members(&raft_dir, peers, data)
                            .with_context(|| format!("starting the raft group of stream {name}"))?;
                    }
                    (peers, None)
                }
                ReplicaStart::Joining => (&[], None),
                // Its log was written by the stopped stream (`stop_for_seed`).
                ReplicaStart::Seed { epoch } => (&me, Some(epoch)),
            };
            let epoch = epoch.unwrap_or_else(|| super::replica::Replica::epoch_for(created_ns));
            let group = crate::cluster::group::RaftGroup::open(
                &raft_dir,
                &group_name,
                Arc::clone(cluster),
                voters,
            )
            .with_context(|| format!("opening the raft group of stream {name}"))?;
            let mut replica = super::replica::Replica::new(group, epoch);
            replica.set_create_reply(create_reply);
            if seeded {
                replica.set_pending_config(config.clone());
            }
            if let Some(tx) = &self.self_tx {
                replica.set_api(tx.clone());
            }
            replica.set_peers(peers.to_vec());
            let msgs_dir = self.stream_dir(&name).join("msgs");
            replica.set_store_factory(Box::new(move |config: &StreamConfig| {
                let limits = store_limits(config);
                let store: Box<dyn MsgStore> = if is_memory(config) {
                    Box::new(MemoryStore::new(limits))
                } else {
                    let _ = std::fs::remove_dir_all(&msgs_dir);
                    Box::new(
                        FileStore::open(FileStoreConfig::new(msgs_dir.clone()), limits)
                            .context("opening a store for a snapshot")?,
                    )
                };
                Ok(store)
            }));
            // The log is the truth: no consumer files (see `super::replica`).
            engine.dir = None;
            let local = replica.group().local_snapshot();
            engine.replica = Some(Box::new(replica));
            shared.leader.store(false, Ordering::Relaxed);
            // Its own last snapshot first; the log after it follows as the group runs.
            match local {
                Ok(Some((index, mut data))) => {
                    engine.install_snapshot(&mut data, false).with_context(|| {
                        format!("restoring stream {name} from its snapshot at {index}")
                    })?;
                }
                Ok(None) => {}
                Err(err) => return Err(err),
            }
        }
        let tx = stream_sender(engine);
        if replicated {
            let inbox = Arc::new(super::replica::StreamInbox {
                tx: tx.downgrade(),
                parts: crate::cluster::PartQueue::default(),
            });
            tx.with_state(|engine| {
                engine.self_tx = Some(tx.downgrade());
                if let Some(r) = engine.replica.as_ref() {
                    r.group().listen(inbox);
                }
            });
        }
        tx.with_state(|engine| {
            engine.self_tx = Some(tx.downgrade());
            if engine.is_replicated() {
                return;
            }
            engine.recover_consumers();
            // Acked work-queue messages whose removal a crash cut off are removed now.
            engine.retention_sweep();
            if let Err(err) = engine.write_through() {
                warn!(stream = %name, error = format!("{err:#}"), "writing retention removals at start-up failed");
            }
            engine.publish_counters();
        });
        let thread_tx = tx.clone();
        let thread = std::thread::Builder::new()
            .name(format!("stream-{name}"))
            .spawn(move || thread_tx.run_thread())
            .context("starting the stream thread")?;
        let ingest: Arc<dyn InternalHandler> =
            Arc::new(Ingest::new(tx.clone(), self.account.router().clustered()));
        let mut handle = StreamHandle {
            config,
            created,
            tx,
            thread: Some(thread),
            shared,
            ingest,
            direct: None,
            replicated,
        };
        // A replicated stream's leader subscribes by itself.
        if !replicated {
            self.subscribe(&mut handle);
        }
        self.streams.insert(name, handle);
        Ok(())
    }

    fn subscribe(&self, handle: &mut StreamHandle) {
        let router = self.account.router();
        for subject in &handle.config.subjects {
            if let Err(err) =
                router.subscribe_internal(subject.as_bytes(), None, Arc::clone(&handle.ingest))
            {
                warn!(stream = %handle.config.name, subject, error = %err, "bad stream subject");
            }
        }
        if handle.config.allow_direct {
            let base = format!("$JS.API.DIRECT.GET.{}", handle.config.name);
            let direct: Arc<dyn InternalHandler> = Arc::new(DirectGet {
                tx: handle.tx.clone(),
                clustered: router.clustered(),
            });
            for subject in [base.clone(), format!("{base}.>")] {
                let _ = router.subscribe_internal(subject.as_bytes(), None, Arc::clone(&direct));
            }
            handle.direct = Some(direct);
        }
    }

    fn unsubscribe(&self, config: &StreamConfig, handle: &StreamHandle) {
        let router = self.account.router();
        for subject in &config.subjects {
            router.unsubscribe_internal(subject.as_bytes(), None, &handle.ingest);
        }
        if let Some(direct) = &handle.direct {
            let base = format!("$JS.API.DIRECT.GET.{}", config.name);
            for subject in [base.clone(), format!("{base}.>")] {
                router.unsubscribe_internal(subject.as_bytes(), None, direct);
            }
        }
    }

    /// After an update: swap the internal subscriptions from `old`'s subjects to the new ones.
    fn resubscribe(&mut self, name: &str, old: &StreamConfig) {
        let Some(mut handle) = self.streams.remove(name) else {
            return;
        };
        self.unsubscribe(old, &handle);
        handle.direct = None;
        self.subscribe(&mut handle);
        self.streams.insert(name.to_owned(), handle);
    }

    /// Stops stream `name`, of one replica, to make it replicated: its subjects are left
    /// first (publishes from then on wait for the replicated stream), and the stream
    /// answers the snapshot its group starts from on `epoch` as it stops.
    pub(super) fn stop_for_seed(
        &mut self,
        name: &str,
        epoch: jsproto::stream::Epoch,
    ) -> anyhow::Result<()> {
        let Some(mut handle) = self.streams.remove(name) else {
            anyhow::bail!("no stream {name}");
        };
        self.unsubscribe(&handle.config.clone(), &handle);
        let (answer, rx) = mpsc::sync_channel(1);
        handle.tx.send(StreamCmd::Stop {
            delete: false,
            seed: Some(super::stream::SeedRequest {
                epoch,
                raft_dir: self.stream_dir(name).join("raft"),
                me: self.server.server_name().to_string(),
                answer,
            }),
        });
        if let Some(thread) = handle.thread.take() {
            if thread.join().is_err() {
                warn!(stream = name, "the stream thread panicked");
            }
        }
        rx.recv()
            .map_err(|_| anyhow::anyhow!("the stream stopped without its state"))?
    }

    fn stop_stream(&mut self, name: &str, delete: bool) {
        let Some(mut handle) = self.streams.remove(name) else {
            return;
        };
        self.unsubscribe(&handle.config.clone(), &handle);
        handle.tx.send(StreamCmd::Stop { delete, seed: None });
        if let Some(thread) = handle.thread.take() {
            if thread.join().is_err() {
                warn!(stream = name, "the stream thread panicked");
            }
        }
        if delete {
            let _ = std::fs::remove_dir_all(self.stream_dir(name));
        }
    }
}

#[cfg(test)]
mod replica_sync_tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_replicated_store_is_not_fsynced_before_pubacks() {
        let every = SyncPolicy::Interval(Duration::from_secs(5));
        assert_eq!(
            replica_sync(true, SyncPolicy::Always),
            SyncPolicy::default()
        );
        assert_eq!(replica_sync(false, SyncPolicy::Always), SyncPolicy::Always);
        assert_eq!(replica_sync(true, every), every);
        assert_eq!(replica_sync(false, every), every);
    }
}
