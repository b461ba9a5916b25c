//! The API operations on one stream, as typed commands its owner applies in order with the
//! stream's publishes, pulls and acks ([`super::stream::StreamCmd::Op`] and
//! [`super::stream::StreamCmd::Query`]).
//!
//! The API thread (`api.rs`) checks a request (JSON, names, sealed and deny flags) and keeps
//! the set of streams; what needs the stream's data is sent here. An [`StreamOp`] answers its
//! requester itself, on the request's reply subject, as nats-server's responses; a
//! [`StreamQuery`] is what the API thread waits on (stream info for CREATE/UPDATE/LIST, the
//! checks and the apply of an update). The API thread is a thread of its own, never a tokio
//! worker, so waiting there holds up no connection.

use std::sync::mpsc::SyncSender;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use jsproto::api::consumer::ConsumerCreate;
use jsproto::api::stream::{
    ClusterInfo, ConsumerLimits, MsgDeleteRequest, MsgGetRequest, MsgSelector, StoredMessage,
    StreamConfig, StreamInfo, StreamInfoRequest, StreamInfoResponse, StreamMsgDeleteResponse,
    StreamMsgGetResponse, StreamPurgeResponse, SUBJECTS_LIMIT,
};
use jsproto::api::{encode_error, encode_ok, ApiError};

use super::stream::{timestamp, StreamEngine};
use crate::server::NATS_VERSION;
use crate::store::{PurgeRequest, StoreError, StoredMsg};

/// An API operation on a stream that answers on the request's reply subject (none: carry it
/// out, answer nothing).
#[derive(Debug)]
pub enum StreamOp {
    /// `STREAM.INFO`: config with dynamic metadata, state, the cluster block naming `leader`.
    Info {
        /// The checked request (subject counts, deleted details, paging offset).
        req: StreamInfoRequest,
        /// This server's name, as the cluster block's leader.
        leader: String,
        /// Where to answer.
        reply: Option<Bytes>,
    },
    /// `STREAM.PURGE` (checked: not sealed, purge not denied).
    Purge {
        /// What to purge.
        purge: PurgeRequest,
        /// Where to answer.
        reply: Option<Bytes>,
    },
    /// `STREAM.MSG.GET` (the selector checked).
    MsgGet {
        /// The request.
        req: MsgGetRequest,
        /// Where to answer.
        reply: Option<Bytes>,
    },
    /// `STREAM.MSG.DELETE` (checked: not sealed, delete not denied).
    MsgDelete {
        /// The request (`seq`, `no_erase`).
        req: MsgDeleteRequest,
        /// Where to answer.
        reply: Option<Bytes>,
    },
    /// `$JS.API.DIRECT.GET.<stream>[.<subject…>]`: the message with `Nats-*` headers, or a
    /// status (`404 Message Not Found`, `408 Empty Request`, `408 Bad Request`).
    DirectGet {
        /// The request subject (a last-by-subject get names the subject after the stream).
        subject: Bytes,
        /// The request body (a `MsgGetRequest`, or empty with a subject in `subject`).
        body: Bytes,
        /// Where to answer.
        reply: Bytes,
    },
    /// `CONSUMER.CREATE` / `CONSUMER.DURABLE.CREATE` (the request checked).
    ConsumerCreate {
        /// The checked create request.
        create: Box<ConsumerCreate>,
        /// Where to answer.
        reply: Option<Bytes>,
    },
    /// `CONSUMER.INFO`.
    ConsumerInfo {
        /// Consumer name.
        consumer: String,
        /// Where to answer.
        reply: Option<Bytes>,
    },
    /// `CONSUMER.DELETE`.
    ConsumerDelete {
        /// Consumer name.
        consumer: String,
        /// Where to answer.
        reply: Option<Bytes>,
    },
    /// `CONSUMER.PAUSE` (the body checked): pause until `until`, or resume (`None`).
    ConsumerPause {
        /// Consumer name.
        consumer: String,
        /// The request's `pause_until`.
        until: Option<jsproto::api::time::Timestamp>,
        /// Where to answer.
        reply: Option<Bytes>,
    },
    /// `CONSUMER.PENDING` (jsserver's own): list who holds what, from `offset`.
    ConsumerPending {
        /// Consumer name.
        consumer: String,
        /// The request's offset, or why the body is bad.
        offset: Result<u64, jsproto::api::ApiError>,
        /// Where to answer.
        reply: Option<Bytes>,
    },
    /// `CONSUMER.RESET`: start over at the parsed body's seq (or answer its error).
    ConsumerReset {
        /// Consumer name.
        consumer: String,
        /// The request's `seq` (0: past the ack floor), or why the body is bad.
        seq: Result<u64, jsproto::api::ApiError>,
        /// Where to answer.
        reply: Option<Bytes>,
    },
    /// `CONSUMER.UNPIN` (the body checked): release the pin of `group`.
    ConsumerUnpin {
        /// Consumer name.
        consumer: String,
        /// The priority group.
        group: String,
        /// Where to answer.
        reply: Option<Bytes>,
    },
    /// `CONSUMER.NAMES` (or `CONSUMER.LIST` when `list`).
    ConsumerNames {
        /// The request's `offset` (negative counts as 0).
        offset: i64,
        /// LIST (infos) rather than NAMES.
        list: bool,
        /// Where to answer.
        reply: Option<Bytes>,
    },
}

/// A question the API thread waits on; the answer comes back on the channel. A stream that
/// stopped drops the channel, and the waiter sees no answer (stream not found).
#[derive(Debug)]
pub enum StreamQuery {
    /// The stream's info as CREATE/UPDATE/LIST show it (stored config, no cluster block).
    Info(SyncSender<StreamInfo>),
    /// Whether the update from consumer limits `old` to `new` suits the existing consumers
    /// (10069 when one is above a newly set limit).
    CheckConsumerLimits {
        /// Limits today.
        old: ConsumerLimits,
        /// Limits asked for.
        new: ConsumerLimits,
        /// The answer.
        answer: SyncSender<Result<(), ApiError>>,
    },
    /// Applies a checked stream update: the new config, the store's limits (removing what is
    /// now over them), the consumers' recount and a retention switch's removals.
    Update {
        /// The new config.
        config: Box<StreamConfig>,
        /// The store's error (10052) when its limits could not be changed.
        answer: SyncSender<Result<(), ApiError>>,
    },
}

impl StreamEngine {
    /// Carries out `op` and answers its requester.
    pub fn apply_op(&mut self, op: StreamOp) {
        match op {
            StreamOp::Info { req, leader, reply } => {
                let body = self.info_response(&req, leader);
                self.respond(reply.as_ref(), body);
            }
            StreamOp::Purge { purge, reply } => {
                let body = self.purge(&purge);
                self.respond(reply.as_ref(), body);
            }
            StreamOp::MsgGet { req, reply } => {
                let body = self.msg_get(&req);
                self.respond(reply.as_ref(), body);
            }
            StreamOp::MsgDelete { req, reply } => {
                let body = self.msg_delete(&req);
                self.respond(reply.as_ref(), body);
            }
            StreamOp::DirectGet {
                subject,
                body,
                reply,
            } => {
                let found = self.direct_get(&subject, &body);
                self.direct_reply(&reply, found);
            }
            StreamOp::ConsumerCreate { create, reply } => self.api_consumer_create(*create, reply),
            StreamOp::ConsumerInfo { consumer, reply } => self.api_consumer_info(&consumer, reply),
            StreamOp::ConsumerDelete { consumer, reply } => {
                self.api_consumer_delete(&consumer, reply)
            }
            StreamOp::ConsumerPause {
                consumer,
                until,
                reply,
            } => self.api_consumer_pause(&consumer, until, reply),
            StreamOp::ConsumerPending {
                consumer,
                offset,
                reply,
            } => self.api_consumer_pending(&consumer, offset, reply),
            StreamOp::ConsumerReset {
                consumer,
                seq,
                reply,
            } => self.api_consumer_reset(&consumer, seq, reply),
            StreamOp::ConsumerUnpin {
                consumer,
                group,
                reply,
            } => self.api_consumer_unpin(&consumer, &group, reply),
            StreamOp::ConsumerNames {
                offset,
                list,
                reply,
            } => self.api_consumer_names(offset, list, reply),
        }
    }

    /// Answers `query` (a waiter that went away is no error).
    pub fn answer(&mut self, query: StreamQuery) {
        match query {
            StreamQuery::Info(answer) => {
                let (mut info, _) = self.info(&StreamInfoRequest::default());
                // In a cluster the block is always there (STREAM.LIST, create and update
                // answers), as nats-server's.
                if self.outbox.server().cluster().is_some() {
                    let me = self.outbox.server().server_name().to_string();
                    info.cluster = Some(self.cluster_block(me));
                }
                let _ = answer.send(info);
            }
            StreamQuery::CheckConsumerLimits { old, new, answer } => {
                let _ = answer.send(self.check_consumer_limits(&old, &new));
            }
            StreamQuery::Update { config, answer } => {
                let _ = answer.send(self.update(*config));
            }
        }
    }

    fn update(&mut self, config: StreamConfig) -> Result<(), ApiError> {
        if self.is_replicated() {
            // Through the stream's log (the leader appends it).
            self.update_replicated(config);
            return Ok(());
        }
        let account = Arc::clone(self.outbox.account());
        let router = account.router();
        let interest = |reply: &[u8]| router.has_interest(reply);
        // Every consumer recounts after an update (new limits, subjects or retention), now.
        let result = self
            .stream
            .update(self.store.as_mut(), config, &interest, Instant::now());
        self.run_output();
        result
    }

    /// The stream's `cluster` block: a replicated stream's group
    /// ([`StreamEngine::replica_cluster_info`]), or `{name, leader}` for one replica
    /// (`{leader}` standalone).
    fn cluster_block(&self, leader: String) -> ClusterInfo {
        self.replica_cluster_info().unwrap_or_else(|| ClusterInfo {
            name: self.cluster_name(),
            leader,
            ..ClusterInfo::default()
        })
    }

    fn info_response(&self, req: &StreamInfoRequest, leader: String) -> Vec<u8> {
        let (mut info, total) = self.info(req);
        info.config = info.config.with_dynamic_metadata(NATS_VERSION);
        // One replica: `{"leader":…}` standalone, `{"name":"C","leader":…}` in a cluster (as
        // nats-server 2.15.1).
        info.cluster = Some(self.cluster_block(leader));
        // As nats-server: the paging fields are set only when the filter matched a subject
        // (total, offset and limit all 0 otherwise).
        let paged = !req.subjects_filter.is_empty() && total > 0;
        encode_ok(&StreamInfoResponse {
            total: if paged { total } else { 0 },
            offset: if paged { req.offset } else { 0 },
            limit: if paged { SUBJECTS_LIMIT } else { 0 },
            info,
        })
    }

    /// Purges, makes the removal durable as a PubAck would be, then lets the consumers skip
    /// what went.
    fn purge(&mut self, purge: &PurgeRequest) -> Vec<u8> {
        let account = Arc::clone(self.outbox.account());
        let router = account.router();
        let interest = |reply: &[u8]| router.has_interest(reply);
        let result = self
            .stream
            .purge(self.store.as_mut(), purge, &interest, Instant::now())
            .and_then(|purged| {
                self.write_through()
                    .map(|()| purged)
                    .map_err(ApiError::stream_purge_failed)
            });
        self.run_output();
        match result {
            Ok(purged) => encode_ok(&StreamPurgeResponse {
                success: true,
                purged,
            }),
            Err(err) => encode_error::<StreamPurgeResponse>(&err),
        }
    }

    fn msg_get(&self, req: &MsgGetRequest) -> Vec<u8> {
        let selector = match req.msg_get_selector() {
            Ok(selector) => selector,
            Err(err) => return encode_error::<StreamMsgGetResponse>(&err),
        };
        match self.select(selector) {
            Ok(Some(m)) => encode_ok(&StreamMsgGetResponse {
                message: StoredMessage {
                    subject: m.subject.to_string(),
                    seq: m.seq,
                    hdrs: m.headers.map(|h| h.to_vec()).unwrap_or_default(),
                    data: m.payload.to_vec(),
                    time: timestamp(m.ts),
                },
            }),
            Ok(None) => encode_error::<StreamMsgGetResponse>(&ApiError::no_message_found()),
            Err(err) => encode_error::<StreamMsgGetResponse>(&ApiError::stream_general(err)),
        }
    }

    fn msg_delete(&mut self, req: &MsgDeleteRequest) -> Vec<u8> {
        let account = Arc::clone(self.outbox.account());
        let router = account.router();
        let interest = |reply: &[u8]| router.has_interest(reply);
        let result = self
            .stream
            .delete_msg(
                self.store.as_mut(),
                req.seq,
                !req.no_erase,
                &interest,
                Instant::now(),
            )
            .and_then(|()| {
                self.write_through()
                    .map_err(ApiError::stream_msg_delete_failed)
            });
        self.run_output();
        // The recount is due now, not at the next batch's commit.
        self.recount();
        match result {
            Ok(()) => encode_ok(&StreamMsgDeleteResponse { success: true }),
            Err(err) => encode_error::<StreamMsgDeleteResponse>(&err),
        }
    }

    fn select(&self, selector: MsgSelector<'_>) -> Result<Option<StoredMsg>, StoreError> {
        match selector {
            MsgSelector::Seq(seq) => self.store.load(seq),
            MsgSelector::LastBySubject(subject) => self.store.load_last(subject),
            MsgSelector::NextBySubject { subject, from } => self.store.load_next(subject, from),
        }
    }

    /// Looks up a DIRECT.GET, or says which `408` status answers it, as nats-server's
    /// `processDirectGetRequest` / `processDirectGetLastBySubjectRequest` do.
    fn direct_get(&self, subject: &[u8], body: &[u8]) -> Result<Option<StoredMsg>, DirectGetError> {
        let prefix_len = "$JS.API.DIRECT.GET.".len() + self.config().name.len();
        if subject.len() > prefix_len + 1 {
            // `$JS.API.DIRECT.GET.<stream>.<subject…>`: the last message on that subject. It
            // takes no body.
            if !body.is_empty() {
                return Err(DirectGetError::Bad);
            }
            let last_by =
                std::str::from_utf8(&subject[prefix_len + 1..]).map_err(|_| DirectGetError::Bad)?;
            return Ok(self.store.load_last(last_by).ok().flatten());
        }
        if body.iter().all(u8::is_ascii_whitespace) {
            return Err(DirectGetError::Empty);
        }
        let req: MsgGetRequest =
            serde_json::from_slice(body).map_err(|_| DirectGetError::Malformed)?;
        let nothing_set = req.seq == 0
            && req.last_by_subj.is_empty()
            && req.next_by_subj.is_empty()
            && req.multi_last.is_empty()
            && req.start_time.is_none();
        if nothing_set {
            return Err(DirectGetError::Empty);
        }
        let selector = req.selector().map_err(|_| DirectGetError::Bad)?;
        Ok(self.select(selector).ok().flatten())
    }
}

/// Why a DIRECT.GET gets no message: each is a `408` status with nats-server's description.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DirectGetError {
    /// No body, or a JSON body that selects nothing (`{}`): `408 Empty Request`.
    Empty,
    /// A body that is not JSON: `408 Malformed Request`.
    Malformed,
    /// Options that do not go together, or a body on a subject-appended get:
    /// `408 Bad Request`.
    Bad,
}

impl DirectGetError {
    /// The status header block that answers it.
    pub fn header_block(self) -> &'static [u8] {
        match self {
            DirectGetError::Empty => b"NATS/1.0 408 Empty Request\r\n\r\n",
            DirectGetError::Malformed => b"NATS/1.0 408 Malformed Request\r\n\r\n",
            DirectGetError::Bad => b"NATS/1.0 408 Bad Request\r\n\r\n",
        }
    }
}
