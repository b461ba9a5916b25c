//! The stream's own rules as a state machine: what a publish must satisfy before it is stored,
//! what is stored for it, and what leaves the stream when time passes.
//!
//! [`StreamCore`] holds what the rules remember between messages — the duplicate window
//! (`Nats-Msg-Id`), the schedule of per-message TTLs (`Nats-TTL`), which messages are subject
//! delete markers, the last timestamp given — and applies them to a [`MsgStore`] it is handed
//! on every call, as the consumer reads the stream through
//! [`crate::consumer::StreamView`]. It reads no clock: every call takes `now`, the wall-clock
//! time in Unix nanoseconds, chosen once by the caller. Given the same config, the same store
//! contents and the same calls with the same `now`, it stores the same messages with the same
//! timestamps and answers the same, which is what a replica applying a log of publishes needs.
//!
//! What happens to consumers is reported, not done: every stored message (a publish or a
//! marker) is a [`StreamEvent::Stored`], every removal by a rule a [`StreamEvent::Removed`];
//! the caller hands them to the stream's consumers. Nothing is written to disk here either: a
//! store's [`MsgStore::store_msg`] only buffers, and the caller flushes (and fsyncs) once per
//! batch before it sends the PubAcks, taking back with [`StreamCore::revert`] what did not
//! reach the disk.
//!
//! Rules and their sources (nats-server 2.15's `processJetStreamMsg`, checked against it):
//!
//! | rule | where |
//! | --- | --- |
//! | sealed stream, header block size, `Nats-Expected-*` order, dedup, rollup, `Nats-TTL` | [`StreamCore::publish`] |
//! | the duplicate window expiring | [`StreamCore::publish`] (pruned at each publish) |
//! | `max_age`, `Nats-TTL` running out, subject delete markers | [`StreamCore::expire`], [`StreamCore::next_expiry`] |
//! | limits and discard policies (`max_msgs`, `max_bytes`, per subject, `max_msg_size`) | the store's [`super::store::index::Index`] |
//! | message delete: sealed, `deny_delete`, the missing-sequence errors | [`StreamCore::delete_msg`] |
//! | purge (`filter`, `seq`, `keep`): sealed, `deny_purge` | [`StreamCore::purge`] |
//! | config update: lowered limits remove what is over them | [`StreamCore::update`] |
//!
//! [`StreamCore::apply`] takes any of these as a [`Command`]: the one entry point a replica
//! applying a log uses. What the rules remember is [`StreamCore::snapshot`], from which
//! [`StreamCore::from_snapshot`] makes the same rules again (a replica catching up from a
//! snapshot), without the rebuild from the store that [`StreamCore::new`] does after a
//! restart (which forgets the `Nats-Msg-Id`s of messages no longer stored).

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::api::pub_ack::PubAck;
use crate::api::stream::{
    parse_msg_ttl, raise_msg_ttl, subject_delete_marker_headers, MsgTtl, StorageType, StreamConfig,
    MARKER_REASON_HEADER, MSG_TTL_HEADER,
};
use crate::api::ApiError;
use crate::headers::{self, Headers};

use super::store::{MsgStore, PurgeRequest, StoreError};

/// Largest header block a stored message may carry (nats-server's 64 KiB); a larger one is
/// refused with 10097.
pub const MAX_HEADER_BYTES: usize = 64 * 1024;

/// A publish as captured for the stream: borrowed views of the message.
#[derive(Debug, Clone, Copy)]
pub struct Publish<'a> {
    /// The subject it was published on (one of the stream's subjects). A [`Bytes`], so that
    /// the [`StreamEvent::Stored`] for it shares the bytes instead of copying them.
    pub subject: &'a Bytes,
    /// The raw `NATS/1.0` header block, if any.
    pub headers: Option<&'a [u8]>,
    /// The payload.
    pub payload: &'a [u8],
}

/// What a call did to the stream that its consumers must hear of, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamEvent {
    /// A message was stored (a publish, or a subject delete marker): consumers whose filter
    /// matches may deliver it; on an interest stream it may be removed at once.
    Stored {
        /// Its stream sequence.
        seq: u64,
        /// Its subject.
        subject: Bytes,
    },
    /// Messages left the stream by a rule (limits, rollup, `max_age`, `Nats-TTL`) or a
    /// message delete: consumers recount what they have pending.
    Removed,
    /// A purge removed messages: consumers whose filter lies inside `filter` move past the
    /// purged range, the others recount (as nats-server's stream purge).
    Purged {
        /// The purge's subject filter (`None`: every subject).
        filter: Option<String>,
    },
}

/// A command for the stream, with the time it is applied at chosen by the caller once (a
/// replica applying the same command gets the same result): what [`StreamCore::apply`] takes.
#[derive(Debug, Clone, Copy)]
pub enum Command<'a> {
    /// Store a publish at `now` (Unix ns), [`StreamCore::publish`].
    Publish {
        /// The message.
        msg: Publish<'a>,
        /// Wall-clock time, Unix ns.
        now: u64,
    },
    /// `STREAM.MSG.DELETE`, [`StreamCore::delete_msg`].
    DeleteMsg {
        /// The sequence.
        seq: u64,
        /// Overwrite the message's bytes (`no_erase: false`).
        erase: bool,
    },
    /// `STREAM.PURGE`, [`StreamCore::purge`].
    Purge(&'a PurgeRequest),
    /// A checked `STREAM.UPDATE`, [`StreamCore::update`].
    Update(&'a StreamConfig),
    /// Time passes: remove what ran out at `now` (Unix ns), [`StreamCore::expire`].
    Expire {
        /// Wall-clock time, Unix ns.
        now: u64,
    },
}

/// What a [`Command`] answered, by kind.
#[derive(Debug)]
pub enum Outcome {
    /// The PubAck, a duplicate's PubAck, or the error to answer the publisher with.
    Published(Result<PubAck, ApiError>),
    /// A message delete's answer.
    Deleted(Result<(), ApiError>),
    /// A purge's answer: how many messages went.
    Purged(Result<u64, ApiError>),
    /// An update's answer.
    Updated(Result<(), ApiError>),
    /// How many messages ran out.
    Expired(Result<usize, StoreError>),
}

/// What a [`StreamCore`] remembers, as plain data ([`StreamCore::snapshot`]): part of a
/// replica's snapshot. Serialised with serde (JSON in the tests).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CoreSnapshot {
    /// The stream's config as the rules apply it.
    pub config: StreamConfig,
    /// The duplicate window: each `Nats-Msg-Id` with the sequence of the message that
    /// carried it, by id.
    pub dedup_ids: Vec<(String, u64)>,
    /// The duplicate window's ids in the order they were stored, with their timestamps
    /// (Unix ns), oldest first: the order they leave the window in.
    pub dedup_order: Vec<(u64, String)>,
    /// The schedule of per-message TTLs: (when the message expires, Unix ns; its sequence),
    /// in order.
    pub ttls: Vec<(u64, u64)>,
    /// The sequences of the subject delete markers the stream holds, ascending.
    pub markers: Vec<u64>,
    /// The timestamp given to the last stored message, Unix ns.
    pub last_ts: u64,
}

/// Message ids seen within the duplicate window (`Nats-Msg-Id`), oldest first.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct Dedup {
    by_id: HashMap<String, u64>,
    order: VecDeque<(u64, String)>,
}

impl Dedup {
    /// Forgets the ids stored before `now - window`.
    fn prune(&mut self, now: u64, window: Duration) {
        let cutoff = now.saturating_sub(duration_ns(window));
        while let Some((ts, _)) = self.order.front() {
            if *ts >= cutoff {
                break;
            }
            let (_, id) = self.order.pop_front().expect("front exists");
            self.by_id.remove(&id);
        }
    }

    fn insert(&mut self, id: String, seq: u64, ts: u64) {
        self.by_id.insert(id.clone(), seq);
        self.order.push_back((ts, id));
    }

    /// Forgets the ids of these sequences (messages taken back after a failed write).
    fn forget(&mut self, seqs: &[u64]) {
        self.by_id.retain(|_, seq| !seqs.contains(seq));
        let by_id = &self.by_id;
        self.order.retain(|(_, id)| by_id.contains_key(id));
    }
}

/// The stream's rules and what they remember; see the module doc.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamCore {
    config: StreamConfig,
    dedup: Dedup,
    /// Messages with a `Nats-TTL` of their own: (when they expire, Unix ns; sequence).
    ttls: BTreeSet<(u64, u64)>,
    /// Subject delete markers the stream holds (their removal writes no marker).
    markers: HashSet<u64>,
    /// The timestamp given to the last stored message: timestamps never go back.
    last_ts: u64,
}

impl StreamCore {
    /// The rules of a stream with `config` over `store` as it is (new, or reopened after a
    /// restart): the duplicate window is refilled from the messages stored within it as of
    /// `now` (Unix ns), the TTL schedule and the markers from the stored headers, and
    /// messages with `Nats-TTL: never` are exempted from `max_age` again.
    pub fn new(config: StreamConfig, store: &mut dyn MsgStore, now: u64) -> Self {
        let mut core = StreamCore {
            config,
            dedup: Dedup::default(),
            ttls: BTreeSet::new(),
            markers: HashSet::new(),
            last_ts: store.state().last_ts,
        };
        core.rebuild_dedup(store, now);
        core.rebuild_ttls(store);
        core
    }

    /// What the rules remember (config, duplicate window, TTL schedule, markers, last
    /// timestamp), for a replica's snapshot. O(ids in the window + TTLs + markers).
    pub fn snapshot(&self) -> CoreSnapshot {
        let mut dedup_ids: Vec<(String, u64)> = self
            .dedup
            .by_id
            .iter()
            .map(|(id, seq)| (id.clone(), *seq))
            .collect();
        dedup_ids.sort_unstable();
        let mut markers: Vec<u64> = self.markers.iter().copied().collect();
        markers.sort_unstable();
        CoreSnapshot {
            config: self.config.clone(),
            dedup_ids,
            dedup_order: self.dedup.order.iter().cloned().collect(),
            ttls: self.ttls.iter().copied().collect(),
            markers,
            last_ts: self.last_ts,
        }
    }

    /// The rules as `snapshot` remembers them, over `store`, which holds the messages as they
    /// were when the snapshot was taken: equal to the [`StreamCore`] it was taken from. The
    /// store's own state that is derived from the stored headers is redone (messages with
    /// `Nats-TTL: never` are exempted from `max_age` again, as after a restart); nothing else
    /// is read from the store.
    pub fn from_snapshot(snapshot: CoreSnapshot, store: &mut dyn MsgStore) -> Self {
        let CoreSnapshot {
            config,
            dedup_ids,
            dedup_order,
            ttls,
            markers,
            last_ts,
        } = snapshot;
        let core = StreamCore {
            dedup: Dedup {
                by_id: dedup_ids.into_iter().collect(),
                order: dedup_order.into_iter().collect(),
            },
            ttls: ttls.into_iter().collect(),
            markers: markers.into_iter().collect(),
            last_ts,
            config,
        };
        if core.config.allow_msg_ttl {
            let mut seq = 0;
            while let Ok(Some(m)) = store.load_next(">", seq) {
                seq = m.seq + 1;
                let never = m
                    .headers
                    .as_ref()
                    .and_then(|h| Headers::parse(h).ok())
                    .and_then(|h| h.get(MSG_TTL_HEADER).and_then(|v| parse_msg_ttl(v).ok()))
                    == Some(MsgTtl::Never);
                if never {
                    store.exempt_from_age(m.seq);
                }
            }
        }
        core
    }

    /// The stream's config as the rules apply it.
    pub fn config(&self) -> &StreamConfig {
        &self.config
    }

    /// Replaces the config (an update the API has checked). The duplicate window, TTLs and
    /// markers carry over; a shorter window takes effect at the next publish.
    pub fn set_config(&mut self, config: StreamConfig) {
        self.config = config;
    }

    /// Applies one command: the single entry point a replica's log drives. Events for the
    /// consumers go to `events`, in order.
    pub fn apply(
        &mut self,
        store: &mut dyn MsgStore,
        cmd: Command<'_>,
        events: &mut Vec<StreamEvent>,
    ) -> Outcome {
        match cmd {
            Command::Publish { msg, now } => {
                Outcome::Published(self.publish(store, msg, now, events))
            }
            Command::DeleteMsg { seq, erase } => {
                Outcome::Deleted(self.delete_msg(store, seq, erase, events))
            }
            Command::Purge(req) => Outcome::Purged(self.purge(store, req, events)),
            Command::Update(config) => Outcome::Updated(self.update(store, config.clone(), events)),
            Command::Expire { now } => Outcome::Expired(self.expire(store, now, events)),
        }
    }

    /// Applies a checked stream update: the new config, and the store's new limits, which
    /// remove what is now over them (a lowered `max_msgs_per_subject`, `max_msgs`,
    /// `max_bytes`, `max_age`), as nats-server's `UpdateConfig`. A store error is 10052
    /// (`stream_update`); the config is changed either way, as the stored metadata is.
    pub fn update(
        &mut self,
        store: &mut dyn MsgStore,
        config: StreamConfig,
        events: &mut Vec<StreamEvent>,
    ) -> Result<(), ApiError> {
        let limits = super::store::StoreLimits::of(&config);
        self.config = config;
        let removed = store
            .update_limits(limits)
            .map_err(ApiError::stream_update)?;
        if !removed.is_empty() {
            for seq in &removed {
                self.markers.remove(seq);
            }
            events.push(StreamEvent::Removed);
        }
        Ok(())
    }

    /// `STREAM.MSG.DELETE`: removes message `seq` (overwriting its bytes when `erase`).
    /// Refused on a sealed stream (10109) or with `deny_delete` (10057). A sequence that is
    /// not there gets nats-server 2.15.1's error (observed): memory streams say `sequence N
    /// not found` (10043); file streams say so for a gap inside the stream, `stream store
    /// EOF` past the last sequence and `no message found` below the first (both 10057).
    pub fn delete_msg(
        &mut self,
        store: &mut dyn MsgStore,
        seq: u64,
        erase: bool,
        events: &mut Vec<StreamEvent>,
    ) -> Result<(), ApiError> {
        crate::api::stream::check_removal_allowed(&self.config, false)?;
        let removed = store
            .remove(seq, erase)
            .map_err(ApiError::stream_msg_delete_failed)?;
        if !removed {
            let state = store.state();
            return Err(if self.config.storage == StorageType::Memory {
                ApiError::sequence_not_found(seq)
            } else if seq > state.last_seq {
                ApiError::stream_msg_delete_failed("stream store EOF")
            } else if state.msgs == 0 || seq < state.first_seq {
                ApiError::stream_msg_delete_failed("no message found")
            } else {
                ApiError::sequence_not_found(seq)
            });
        }
        self.markers.remove(&seq);
        events.push(StreamEvent::Removed);
        Ok(())
    }

    /// `STREAM.PURGE` (`filter`, `seq`, `keep` as [`PurgeRequest`]); returns how many
    /// messages went. Refused on a sealed stream (10109) or with `deny_purge` (10110). The
    /// duplicate window keeps the purged ids, as nats-server's does.
    pub fn purge(
        &mut self,
        store: &mut dyn MsgStore,
        req: &PurgeRequest,
        events: &mut Vec<StreamEvent>,
    ) -> Result<u64, ApiError> {
        crate::api::stream::check_removal_allowed(&self.config, true)?;
        let purged = store.purge(req).map_err(ApiError::stream_purge_failed)?;
        if purged > 0 {
            let first = store.state().first_seq;
            self.markers
                .retain(|&seq| seq >= first && matches!(store.load(seq), Ok(Some(_))));
        }
        events.push(StreamEvent::Purged {
            filter: req.filter.clone(),
        });
        Ok(purged)
    }

    /// Stores `msg` if the stream's rules allow it, at `now` (Unix ns; the message's timestamp
    /// is `now`, or the last timestamp if the clock went back). Returns the PubAck to send once
    /// the store has written the message, a duplicate's PubAck (nothing stored), or the error
    /// to send instead. Checks, in nats-server's order:
    ///
    /// 1. a sealed stream (10109); a header block over [`MAX_HEADER_BYTES`] (10097);
    /// 2. [`headers::EXPECTED_STREAM`] (10060); a `Nats-TTL` on a stream without
    ///    `allow_msg_ttl` (10166); [`headers::EXPECTED_LAST_SUBJECT_SEQUENCE`] (10071, naming
    ///    the subject's last sequence; its `-Subject` header alone: 10193);
    ///    [`headers::EXPECTED_LAST_SEQUENCE`] (10071);
    /// 3. [`headers::MSG_ID`] already seen within `duplicate_window`: the first one's PubAck
    ///    with `duplicate: true`;
    /// 4. [`headers::EXPECTED_LAST_MSG_ID`] (10070); [`headers::ROLLUP`] not allowed or not
    ///    `sub` / `all` (10111); an invalid `Nats-TTL` (10165);
    /// 5. the store's limits (`max_msg_size`: 10054; discard new: 10077; its IO: 10077).
    ///
    /// Empty header values count as absent. A message whose `Nats-TTL` is shorter than the
    /// stream's `subject_delete_marker_ttl` is stored with the TTL raised to it. A rollup then
    /// purges the subject (`sub`) or the stream (`all`) but for this message. Events for the
    /// consumers go to `events`.
    pub fn publish(
        &mut self,
        store: &mut dyn MsgStore,
        msg: Publish<'_>,
        now: u64,
        events: &mut Vec<StreamEvent>,
    ) -> Result<PubAck, ApiError> {
        if self.config.sealed {
            return Err(ApiError::stream_sealed());
        }
        let headers = match msg.headers {
            Some(raw) if raw.len() > MAX_HEADER_BYTES => {
                return Err(ApiError::stream_header_exceeds_maximum());
            }
            Some(raw) => Headers::parse(raw).ok(),
            None => None,
        };
        self.dedup.prune(now, self.config.duplicate_window);
        let subject = std::str::from_utf8(msg.subject)
            .map_err(|_| ApiError::stream_store_failed("subject is not UTF-8"))?;
        let mut msg_id = None;
        let mut rollup = None;
        let mut ttl = None;
        if let Some(h) = &headers {
            self.check_expectations(store, h, subject)?;
            if let Some(id) = value(h, headers::MSG_ID) {
                if let Some(&seq) = self.dedup.by_id.get(id) {
                    let mut ack = PubAck::new(self.config.name.clone(), seq);
                    ack.duplicate = true;
                    return Ok(ack);
                }
                msg_id = Some(id.to_owned());
            }
            if let Some(expected) = value(h, headers::EXPECTED_LAST_MSG_ID) {
                let last_id = last_msg_id(store);
                if expected != last_id {
                    return Err(ApiError::stream_wrong_last_msg_id(last_id));
                }
            }
            // Empty counts as absent; the value is read in any case, as nats-server's
            // `getRollup` lowercases it.
            if let Some(kind) = value(h, headers::ROLLUP).map(str::to_ascii_lowercase) {
                if !self.config.allow_rollup_hdrs || self.config.deny_purge {
                    return Err(ApiError::stream_rollup_failed("rollup not permitted"));
                }
                match kind.as_str() {
                    "sub" | "all" => rollup = Some(kind == "sub"),
                    other => {
                        return Err(ApiError::stream_rollup_failed(format!(
                            "rollup value invalid: {other:?}"
                        )))
                    }
                }
            }
            if let Some(v) = h.get(MSG_TTL_HEADER) {
                if !self.config.allow_msg_ttl {
                    return Err(ApiError::message_ttl_disabled());
                }
                ttl = Some(parse_msg_ttl(v)?);
            }
        }
        // With subject delete markers, a shorter TTL is raised to the marker TTL (the stored
        // header says so), as nats-server does.
        let mut raised = None;
        if let (Some(t), Some(raw)) = (ttl, msg.headers) {
            if let Some((block, t)) = raise_msg_ttl(raw, t, self.config.subject_delete_marker_ttl) {
                raised = Some(block);
                ttl = Some(t);
            }
        }
        let stored_headers = raised.as_deref().or(msg.headers);
        let ts = now.max(self.last_ts);
        let stored = store
            .store_msg(subject, stored_headers, msg.payload, ts)
            .map_err(|err| match err {
                StoreError::MsgTooLarge => ApiError::stream_message_exceeds_maximum(),
                other => ApiError::stream_store_failed(other),
            })?;
        self.last_ts = ts;
        match ttl {
            Some(MsgTtl::After(after)) => {
                self.ttls
                    .insert((ts.saturating_add(duration_ns(after)), stored.seq));
            }
            // `never` also outlives `max_age`, as in nats-server.
            Some(MsgTtl::Never) => store.exempt_from_age(stored.seq),
            None => {}
        }
        if let Some(id) = msg_id {
            self.dedup.insert(id, stored.seq, ts);
        }
        let mut removed = !stored.removed.is_empty();
        if let Some(on_subject) = rollup {
            let purge = PurgeRequest {
                filter: on_subject.then(|| subject.to_owned()),
                up_to_seq: None,
                keep: Some(1),
            };
            // A failed purge leaves the older messages; the message itself is stored.
            if store.purge(&purge).is_ok_and(|n| n > 0) {
                removed = true;
            }
        }
        if removed {
            events.push(StreamEvent::Removed);
        }
        events.push(StreamEvent::Stored {
            seq: stored.seq,
            subject: msg.subject.clone(),
        });
        Ok(PubAck::new(self.config.name.clone(), stored.seq))
    }

    /// The `Nats-Expected-*` checks that come before the duplicate window (step 2 of
    /// [`StreamCore::publish`]).
    fn check_expectations(
        &self,
        store: &dyn MsgStore,
        h: &Headers,
        subject: &str,
    ) -> Result<(), ApiError> {
        if value(h, headers::EXPECTED_STREAM).is_some_and(|s| s != self.config.name) {
            return Err(ApiError::stream_not_match());
        }
        if !self.config.allow_msg_ttl
            && h.get(MSG_TTL_HEADER)
                .is_some_and(|v| parse_msg_ttl(v).is_ok())
        {
            return Err(ApiError::message_ttl_disabled());
        }
        let check_subject = value(h, headers::EXPECTED_LAST_SUBJECT_SEQUENCE_SUBJECT);
        if let Some(expected) = h.get(headers::EXPECTED_LAST_SUBJECT_SEQUENCE) {
            let on = check_subject.unwrap_or(subject);
            let last = match store.load_last(on) {
                Ok(Some(m)) => m.seq,
                Ok(None) => 0,
                Err(err) => return Err(ApiError::stream_store_failed(err)),
            };
            if expected.trim().parse::<u64>().ok() != Some(last) {
                return Err(ApiError::stream_wrong_last_sequence(last));
            }
        } else if check_subject.is_some() {
            return Err(ApiError::stream_expected_last_seq_per_subject_invalid());
        }
        if let Some(expected) = h.get(headers::EXPECTED_LAST_SEQUENCE) {
            let last = store.state().last_seq;
            if expected.trim().parse::<u64>().ok() != Some(last) {
                return Err(ApiError::stream_wrong_last_sequence(last));
            }
        }
        Ok(())
    }

    /// Takes back what [`StreamCore::publish`] remembered of messages that did not reach the
    /// disk (the caller removed them from the store after a failed write): their ids leave
    /// the duplicate window, so a retry of the same `Nats-Msg-Id` is stored, not called a
    /// duplicate of a message that is gone; their TTLs and marker flags are dropped.
    pub fn revert(&mut self, seqs: &[u64]) {
        if seqs.is_empty() {
            return;
        }
        self.dedup.forget(seqs);
        self.ttls.retain(|(_, seq)| !seqs.contains(seq));
        self.markers.retain(|seq| !seqs.contains(seq));
    }

    /// When (Unix ns) the next message leaves by `max_age` or its own `Nats-TTL`, so the
    /// caller arms one timer and then calls [`StreamCore::expire`]. May be early, never late.
    pub fn next_expiry(&self, store: &dyn MsgStore) -> Option<u64> {
        let ttl = self.ttls.first().map(|&(at, _)| at);
        [store.next_expiry(), ttl].into_iter().flatten().min()
    }

    /// Removes what has run out at `now` (Unix ns): messages past `max_age` (but those with
    /// `Nats-TTL: never`), then messages past their own `Nats-TTL`. With
    /// `subject_delete_marker_ttl`, every subject that this left without messages gets a
    /// marker (an empty message with [`subject_delete_marker_headers`], itself expiring after
    /// the marker TTL), one per subject in the order of the removals, none for a removed
    /// marker — as nats-server 2.15.1 does (observed). Returns how many messages were removed;
    /// events (removals, then the markers stored) go to `events`. A store error stops the
    /// pass; what was removed so far stays removed and the rest is tried at the next call.
    pub fn expire(
        &mut self,
        store: &mut dyn MsgStore,
        now: u64,
        events: &mut Vec<StreamEvent>,
    ) -> Result<usize, StoreError> {
        let mut removed = Vec::new();
        if store.next_expiry().is_some_and(|at| at <= now) {
            removed = store.expire(now)?;
        }
        let aged = removed.len();
        // Markers that aged out leave no marker. Told apart now: the TTL pass below forgets
        // markers that are already gone, and a marker whose age and TTL ran out together
        // would then look like a message and get a marker of its own, every time.
        removed.retain(|(seq, _)| !self.markers.remove(seq));
        let timed_out = self.expire_ttls(store, now, &mut removed)?;
        if aged + timed_out > 0 {
            events.push(StreamEvent::Removed);
        }
        self.write_delete_markers(store, now, &removed, events);
        Ok(aged + timed_out)
    }

    /// Removes the messages whose own `Nats-TTL` has run out at `now` (already gone ones are
    /// skipped) and adds them to `removed` with their subjects when the stream writes markers.
    fn expire_ttls(
        &mut self,
        store: &mut dyn MsgStore,
        now: u64,
        removed: &mut Vec<(u64, Arc<str>)>,
    ) -> Result<usize, StoreError> {
        let markers = !self.config.subject_delete_marker_ttl.is_zero();
        let mut n = 0;
        while let Some(&(at, seq)) = self.ttls.first() {
            if at > now {
                break;
            }
            // Off the schedule first: a message the store fails on is not retried at once
            // (it would fail again on the same deadline, in a loop).
            self.ttls.pop_first();
            let subject = if markers {
                store.load(seq)?.map(|m| m.subject)
            } else {
                None
            };
            if store.remove(seq, false)? {
                n += 1;
                match subject {
                    Some(subject) => removed.push((seq, subject)),
                    None => {
                        self.markers.remove(&seq);
                    }
                }
            } else {
                self.markers.remove(&seq);
            }
        }
        Ok(n)
    }

    /// Writes a subject delete marker on each subject that `removed` left empty (see
    /// [`StreamCore::expire`]).
    fn write_delete_markers(
        &mut self,
        store: &mut dyn MsgStore,
        now: u64,
        removed: &[(u64, Arc<str>)],
        events: &mut Vec<StreamEvent>,
    ) {
        let marker_ttl = self.config.subject_delete_marker_ttl;
        if marker_ttl.is_zero() {
            return;
        }
        for (seq, subject) in removed {
            if self.markers.remove(seq) || store.num_pending(0, subject) > 0 {
                continue;
            }
            let headers = subject_delete_marker_headers(marker_ttl);
            let ts = now.max(self.last_ts);
            // A marker that cannot be written is not retried: the subject is empty either way.
            let Ok(stored) = store.store_msg(subject, Some(&headers), &[], ts) else {
                continue;
            };
            self.last_ts = ts;
            self.markers.insert(stored.seq);
            let ttl = Duration::from_secs(marker_ttl.as_secs());
            self.ttls
                .insert((ts.saturating_add(duration_ns(ttl)), stored.seq));
            events.push(StreamEvent::Stored {
                seq: stored.seq,
                subject: Bytes::copy_from_slice(subject.as_bytes()),
            });
        }
    }

    /// Refills the duplicate window from the messages stored within it as of `now`.
    fn rebuild_dedup(&mut self, store: &dyn MsgStore, now: u64) {
        let window = self.config.duplicate_window;
        let state = store.state();
        if window.is_zero() || state.msgs == 0 {
            return;
        }
        let cutoff = now.saturating_sub(duration_ns(window));
        // Timestamps grow with sequences: bisect for the first message inside the window.
        let (mut lo, mut hi) = (state.first_seq, state.last_seq + 1);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match store.load_next(">", mid) {
                Ok(Some(m)) if m.ts < cutoff => lo = m.seq + 1,
                _ => hi = mid,
            }
        }
        let mut seq = lo;
        while let Ok(Some(m)) = store.load_next(">", seq) {
            seq = m.seq + 1;
            let id = m
                .headers
                .as_ref()
                .and_then(|h| Headers::parse(h).ok())
                .and_then(|h| value(&h, headers::MSG_ID).map(str::to_owned));
            if let Some(id) = id {
                self.dedup.insert(id, m.seq, m.ts);
            }
        }
    }

    /// Refills the TTL schedule and the marker set from the stored headers, and exempts
    /// `Nats-TTL: never` messages from `max_age` again (after a restart).
    fn rebuild_ttls(&mut self, store: &mut dyn MsgStore) {
        if !self.config.allow_msg_ttl {
            return;
        }
        let mut seq = 0;
        while let Ok(Some(m)) = store.load_next(">", seq) {
            seq = m.seq + 1;
            let Some(h) = m.headers.as_ref().and_then(|h| Headers::parse(h).ok()) else {
                continue;
            };
            match h.get(MSG_TTL_HEADER).and_then(|v| parse_msg_ttl(v).ok()) {
                Some(MsgTtl::After(after)) => {
                    self.ttls
                        .insert((m.ts.saturating_add(duration_ns(after)), m.seq));
                }
                Some(MsgTtl::Never) => store.exempt_from_age(m.seq),
                None => {}
            }
            if h.get(MARKER_REASON_HEADER).is_some() {
                self.markers.insert(m.seq);
            }
        }
    }
}

/// A header's value, `None` when absent or empty (nats-server treats both alike).
fn value<'h>(h: &'h Headers, name: &str) -> Option<&'h str> {
    h.get(name).filter(|v| !v.is_empty())
}

/// The `Nats-Msg-Id` of the stream's last message ("" when it has none or is gone).
fn last_msg_id(store: &dyn MsgStore) -> String {
    let last = store.state().last_seq;
    match store.load(last) {
        Ok(Some(m)) => m
            .headers
            .and_then(|h| Headers::parse(&h).ok())
            .and_then(|h| h.get(headers::MSG_ID).map(str::to_owned))
            .unwrap_or_default(),
        _ => String::new(),
    }
}

fn duration_ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}
