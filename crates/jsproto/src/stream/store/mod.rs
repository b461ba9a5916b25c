//! The stream message store: one interface ([`MsgStore`]), two stores.
//!
//! * [`memory::MemoryStore`]: messages in memory (`storage: "memory"`), here: it does no IO.
//! * `jsserver::store::FileStore`: append-only segment files under a directory
//!   (`storage: "file"`), in the server, which owns the files. It keeps its lookups in the same
//!   [`index::Index`] as the memory store, so both apply the limits with one piece of code.
//!
//! A stream keeps every message published to it in stream-sequence order (1, 2, 3, ...), each
//! with its subject, optional raw `NATS/1.0` header block, payload and a timestamp. The store
//! assigns sequences, applies the stream's limits ([`StoreLimits`]: messages, bytes, age,
//! messages per subject, message size; discard old or new) and answers the lookups the
//! JetStream API and consumers need. The semantics are nats-server's `server/store.go`,
//! `memstore.go` and `filestore.go` (read for behaviour, not copied).
//!
//! Conventions:
//! * Timestamps are Unix nanoseconds (`u64`), always passed in by the caller: the store never
//!   reads a clock. Durations are [`std::time::Duration`].
//! * Sequences start at 1; 0 means "none". The last sequence never goes back, not even when
//!   every message is removed or purged: the next message gets `last_seq + 1`.
//! * Subject filters may hold wildcards (`*`, `>`); `">"` (or `""`) means every subject.
//! * The interface is synchronous and may block on disk IO: the server calls it from one
//!   task/thread per stream.
//! * Byte accounting ([`StoreState::bytes`], `StoreLimits::max_bytes`) uses nats-server's
//!   per-store formulas, so `bytes` in STREAM.INFO matches the real server: see
//!   [`file_msg_size`] and [`memory_msg_size`].

use std::collections::BTreeMap;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

pub mod index;
pub mod memory;
pub mod seqlist;

pub use memory::MemoryStore;

/// What to do when a message would break `StoreLimits::max_msgs` or
/// `StoreLimits::max_bytes` (nats-server's `DiscardPolicy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Discard {
    /// Remove the oldest messages to make room (`"old"`, the default).
    #[default]
    Old,
    /// Refuse the new message ([`StoreError::MaxMsgs`] / [`StoreError::MaxBytes`]).
    New,
}

/// The limits a store enforces, from the stream config. Negative (or zero, for the limits that
/// nats-server treats so) means "no limit".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreLimits {
    /// Most messages kept (`max_msgs`); ≤ 0 = none.
    pub max_msgs: i64,
    /// Most bytes kept (`max_bytes`, counted as [`StoreState::bytes`]); ≤ 0 = none.
    pub max_bytes: i64,
    /// Oldest message age (`max_age`); [`Duration::ZERO`] = forever. Applied by
    /// [`MsgStore::expire`], never by a timer of the store's own, to every message but those
    /// [`MsgStore::exempt_from_age`] marked.
    pub max_age: Duration,
    /// Most messages kept per subject (`max_msgs_per_subject`); ≤ 0 = none. Always removes
    /// the subject's oldest message, whatever the discard policy, unless
    /// `discard_new_per_subject` refuses the new one.
    pub max_msgs_per_subject: i64,
    /// Largest `headers + payload` in bytes (`max_msg_size`); negative = none (the stream config
    /// layer turns 0 into -1, as nats-server does).
    pub max_msg_size: i32,
    /// Discard policy for `max_msgs` / `max_bytes`.
    pub discard: Discard,
    /// With [`Discard::New`] and `max_msgs_per_subject`: refuse a message on a full subject
    /// ([`StoreError::MaxMsgsPerSubject`]) instead of replacing the subject's oldest.
    pub discard_new_per_subject: bool,
}

impl Default for StoreLimits {
    /// No limits, discard old.
    fn default() -> Self {
        Self {
            max_msgs: -1,
            max_bytes: -1,
            max_age: Duration::ZERO,
            max_msgs_per_subject: -1,
            max_msg_size: -1,
            discard: Discard::Old,
            discard_new_per_subject: false,
        }
    }
}

impl StoreLimits {
    /// The limits a stream config asks for (`max_msgs`, `max_bytes`, `max_age`,
    /// `max_msgs_per_subject`, `max_msg_size`, `discard`, `discard_new_per_subject`).
    pub fn of(config: &crate::api::stream::StreamConfig) -> Self {
        use crate::api::stream::DiscardPolicy;
        StoreLimits {
            max_msgs: config.max_msgs,
            max_bytes: config.max_bytes,
            max_age: config.max_age,
            max_msgs_per_subject: config.max_msgs_per_subject,
            max_msg_size: config.max_msg_size,
            discard: match config.discard {
                DiscardPolicy::Old => Discard::Old,
                DiscardPolicy::New => Discard::New,
            },
            discard_new_per_subject: config.discard_new_per_subject,
        }
    }

    /// `max_msgs` as a limit: `None` when ≤ 0 (no limit).
    pub fn max_msgs(&self) -> Option<u64> {
        (self.max_msgs > 0).then_some(self.max_msgs as u64)
    }
    /// `max_bytes` as a limit: `None` when ≤ 0 (no limit).
    pub fn max_bytes(&self) -> Option<u64> {
        (self.max_bytes > 0).then_some(self.max_bytes as u64)
    }
    /// `max_msgs_per_subject` as a limit: `None` when ≤ 0 (no limit).
    pub fn max_per_subject(&self) -> Option<u64> {
        (self.max_msgs_per_subject > 0).then_some(self.max_msgs_per_subject as u64)
    }
    /// `max_age` in nanoseconds: `None` when zero (messages never age out).
    pub fn max_age_ns(&self) -> Option<u64> {
        (!self.max_age.is_zero())
            .then(|| u64::try_from(self.max_age.as_nanos()).unwrap_or(u64::MAX))
    }
}

/// A stored message, as loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredMsg {
    /// Stream sequence.
    pub seq: u64,
    /// Subject it was published on (shared with the store's subject table, cheap to clone).
    pub subject: Arc<str>,
    /// The raw `NATS/1.0 ...\r\n\r\n` header block, if the message had a non-empty one.
    pub headers: Option<Bytes>,
    /// Payload.
    pub payload: Bytes,
    /// Timestamp, Unix nanoseconds (as given to [`MsgStore::store_msg`]).
    pub ts: u64,
}

/// The result of a successful [`MsgStore::store_msg`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreOutcome {
    /// Sequence assigned to the new message.
    pub seq: u64,
    /// Its timestamp (Unix ns), as given.
    pub ts: u64,
    /// Sequences removed to honour the limits (discard old, max messages per subject), in the
    /// order removed, so consumers and interest/work-queue logic can react. Usually empty.
    pub removed: Vec<u64>,
}

/// The stream's state (nats-server's `StreamState`, without consumers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StoreState {
    /// Messages stored.
    pub msgs: u64,
    /// Bytes stored, per the store's formula ([`file_msg_size`] / [`memory_msg_size`]).
    pub bytes: u64,
    /// Sequence of the first message. Empty store: 0 if nothing was ever stored, otherwise
    /// `last_seq + 1` (after a purge, nats-server reports `first_seq = last_seq + 1`).
    pub first_seq: u64,
    /// Timestamp of the first message (Unix ns), 0 when empty.
    pub first_ts: u64,
    /// Last sequence ever assigned (never goes back).
    pub last_seq: u64,
    /// Timestamp of the message that got `last_seq` (kept after it is removed), 0 if none.
    pub last_ts: u64,
    /// Distinct subjects with at least one message.
    pub num_subjects: u64,
    /// Sequences between `first_seq` and `last_seq` that hold no message (interior deletes).
    /// The list itself is [`MsgStore::deleted`].
    pub num_deleted: u64,
}

/// What to purge (`STREAM.PURGE` request: `filter`, `seq`, `keep`). Serialisable, as it is
/// carried in a replicated log entry ([`crate::stream::Entry`]).
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct PurgeRequest {
    /// Only messages whose subject matches this filter (wildcards allowed); `None` or `">"` =
    /// all.
    pub filter: Option<String>,
    /// Only messages with a sequence strictly below this one (nats-server's `seq`: "purge up to
    /// but not including"). Without a filter and beyond the last sequence, the stream's next
    /// sequence becomes this one, as nats-server's `Compact`.
    pub up_to_seq: Option<u64>,
    /// Keep the newest N matching messages.
    pub keep: Option<u64>,
}

/// Store failures. The limit refusals carry nats-server's exact texts (`server/store.go`,
/// `errors.json`), which the server forwards in the PubAck error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// Discard new and `max_msgs` reached (nats-server `ErrMaxMsgs`; PubAck 503 / 10077).
    #[error("maximum messages exceeded")]
    MaxMsgs,
    /// Discard new and `max_bytes` would be exceeded (`ErrMaxBytes`; PubAck 503 / 10077).
    #[error("maximum bytes exceeded")]
    MaxBytes,
    /// Discard new per subject and the subject is full (`ErrMaxMsgsPerSubject`; 503 / 10077).
    #[error("maximum messages per subject exceeded")]
    MaxMsgsPerSubject,
    /// `headers + payload` is larger than `max_msg_size` (`JSStreamMessageExceedsMaximumErr`;
    /// PubAck 400 / 10054).
    #[error("message size exceeds maximum allowed")]
    MsgTooLarge,
    /// The subject cannot be stored (longer than 65535 bytes).
    #[error("subject too long: {0} bytes")]
    SubjectTooLong(usize),
    /// The file system failed (full disk, permissions, ...). The failed operation left the
    /// store as it was; a later call may succeed once the cause is gone.
    #[error("store io error: {0}")]
    Io(#[from] io::Error),
    /// Stored data does not read back as written (checksum or layout mismatch) at a place the
    /// store must read now (recovery reports and skips damage instead).
    #[error("corrupt store data in {path}: {reason}")]
    Corrupt {
        /// The damaged file.
        path: PathBuf,
        /// What was wrong, with the offset.
        reason: String,
    },
}

/// The byte count nats-server's file store charges a message (`fileStoreMsgSize`): its record
/// length, `4 (len) + 8 (seq) + 8 (ts) + 2 (subject len) + subject + payload + 8 (hash)`, plus
/// `4 + headers` when there is a header block. Not this crate's on-disk size (2 bytes less).
pub fn file_msg_size(subject_len: usize, headers_len: usize, payload_len: usize) -> u64 {
    let hdr = if headers_len == 0 { 0 } else { 4 + headers_len };
    (30 + subject_len + hdr + payload_len) as u64
}

/// The byte count nats-server's memory store charges a message (`memStoreMsgSize`):
/// `subject + headers + payload + 16`.
pub fn memory_msg_size(subject_len: usize, headers_len: usize, payload_len: usize) -> u64 {
    (subject_len + headers_len + payload_len + 16) as u64
}

/// A stream's message store. Object safe; `Send` so a stream's task can own it.
///
/// Every method is synchronous. Sequences removed by limits are reported so the caller can
/// update consumers; nothing here reads a clock (pass `ts` / `now` in Unix ns).
pub trait MsgStore: Send {
    /// Stores a message with sequence `last_seq + 1` and timestamp `ts` (Unix ns).
    ///
    /// `headers` is the raw header block; `Some(&[])` is stored as no headers. Checks, in
    /// nats-server's order: `max_msg_size` ([`StoreError::MsgTooLarge`]); with
    /// [`Discard::New`]: per subject when `discard_new_per_subject`
    /// ([`StoreError::MaxMsgsPerSubject`]), `max_msgs` ([`StoreError::MaxMsgs`]), `max_bytes`
    /// ([`StoreError::MaxBytes`]) — a message that replaces its subject's oldest under
    /// `max_msgs_per_subject` passes those two. A refusal stores nothing. Then it stores and
    /// enforces `max_msgs_per_subject` (oldest of the subject) and, with [`Discard::Old`],
    /// `max_msgs` / `max_bytes` (oldest of the stream), returning the removed sequences.
    ///
    /// The message is readable at once but only handed to the OS by [`MsgStore::flush`]; do
    /// not acknowledge it before that succeeds.
    fn store_msg(
        &mut self,
        subject: &str,
        headers: Option<&[u8]>,
        payload: &[u8],
        ts: u64,
    ) -> Result<StoreOutcome, StoreError>;

    /// The message with sequence `seq`, if stored.
    fn load(&self, seq: u64) -> Result<Option<StoredMsg>, StoreError>;

    /// The first message with a sequence ≥ `start_seq` whose subject matches `filter`.
    fn load_next(&self, filter: &str, start_seq: u64) -> Result<Option<StoredMsg>, StoreError>;

    /// The last (highest sequence) message whose subject matches `filter`
    /// (`MSG.GET last_by_subj`).
    fn load_last(&self, filter: &str) -> Result<Option<StoredMsg>, StoreError>;

    /// Removes message `seq` (`MSG.DELETE`); `erase` also overwrites its bytes (the file
    /// store rewrites the record in place; the memory store just drops it). `Ok(false)` if no
    /// such message (never stored, already removed, or beyond the last sequence).
    fn remove(&mut self, seq: u64, erase: bool) -> Result<bool, StoreError>;

    /// Purges (`STREAM.PURGE`); returns how many messages were removed. Semantics of
    /// nats-server's `PurgeEx`: without filter/seq/keep everything goes and `first_seq` becomes
    /// `last_seq + 1`; `up_to_seq` removes below it; `keep` keeps the newest N matching.
    fn purge(&mut self, req: &PurgeRequest) -> Result<u64, StoreError>;

    /// Removes every message older than `max_age` at `now` (Unix ns): those with
    /// `ts <= now - max_age`, walking from the oldest and stopping at the first young one
    /// (O(expired)), except the ones [`MsgStore::exempt_from_age`] marked, which stay.
    /// Returns the removed sequences, ascending, each with its subject (the stream writes
    /// subject delete markers from them).
    fn expire(&mut self, now: u64) -> Result<Vec<(u64, Arc<str>)>, StoreError>;

    /// Exempts message `seq` from `max_age` for as long as it is stored, as nats-server
    /// exempts a message published with `Nats-TTL: never`; nothing if `seq` is not stored.
    /// Not persisted: the stream marks such messages again after a restart, from their
    /// headers, before it first calls [`MsgStore::expire`]. Each exempt message costs one
    /// step of one [`MsgStore::expire`] walk in all, not one per walk.
    fn exempt_from_age(&mut self, seq: u64);

    /// When (Unix ns) the oldest message reaches `max_age`, so the caller arms one timer and
    /// then calls [`MsgStore::expire`]. `None` without `max_age` or messages. May be early (an
    /// exempt message the last [`MsgStore::expire`] has not stepped over yet), never late.
    fn next_expiry(&self) -> Option<u64>;

    /// Replaces the limits and applies tighter ones at once, as nats-server's `UpdateConfig`:
    /// `max_msgs` / `max_bytes` (only with [`Discard::Old`]) and `max_msgs_per_subject`.
    /// `max_age` is applied by the next [`MsgStore::expire`]. Returns the removed sequences.
    fn update_limits(&mut self, limits: StoreLimits) -> Result<Vec<u64>, StoreError>;

    /// The current limits.
    fn limits(&self) -> &StoreLimits;

    /// Counts and bounds (cheap, no list of deleted sequences).
    fn state(&self) -> StoreState;

    /// Interior deleted sequences between `first_seq` and `last_seq`, ascending
    /// (STREAM.INFO `deleted_details`). O(messages + deleted).
    fn deleted(&self) -> Vec<u64>;

    /// Per-subject message counts for subjects matching `filter` (STREAM.INFO
    /// `subjects_filter`).
    fn subjects_state(&self, filter: &str) -> BTreeMap<String, u64>;

    /// How many messages with sequence ≥ `start_seq` match `filter` (consumers' pending count).
    /// O(log n) for a literal subject; O(min(before, after)) for all subjects; for wildcards the
    /// cheaper of walking the range or the matching subjects.
    fn num_pending(&self, start_seq: u64, filter: &str) -> u64;

    /// Hands everything stored so far to the OS (no fsync). A PubAck may be sent after this
    /// succeeds. On error nothing acknowledged is lost: the data stays buffered, readable, and
    /// the next flush retries it.
    fn flush(&mut self) -> Result<(), StoreError>;

    /// [`MsgStore::flush`] and fsync: durable on disk.
    fn sync(&mut self) -> Result<(), StoreError>;

    /// Deletes the store (the stream was deleted): its files are removed.
    fn delete_all(self: Box<Self>) -> Result<(), StoreError>;
}

/// Whether `filter` selects every subject.
pub fn is_all(filter: &str) -> bool {
    filter.is_empty() || filter == ">"
}

/// Whether `filter` has no wildcard token.
pub fn is_literal(filter: &str) -> bool {
    crate::subject::is_literal(filter.as_bytes())
}

/// Whether `subject` matches `filter` (which may hold wildcards).
pub fn subject_matches(filter: &str, subject: &str) -> bool {
    is_all(filter) || crate::subject::matches(filter.as_bytes(), subject.as_bytes())
}
