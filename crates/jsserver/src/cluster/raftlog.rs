//! The durable Raft log of one Raft group (a replicated stream, or the meta group): raft-rs's
//! [`Storage`] on segment files, plus the writes a [`raft::Ready`] asks for.
//!
//! Each [`super::group::RaftGroup`] (a replicated stream's, or the meta group's) owns one
//! inside its `RawNode<RaftLog>` and reaches it with `RawNode::mut_store`.
//!
//! # Directory
//!
//! One directory per group, a parameter of [`RaftLog::open`]; [`stream_raft_dir`] and
//! [`meta_raft_dir`] give the places `docs/cluster.md` chose
//! (`<store_dir>/jetstream/<account>/streams/<stream>/raft/` and
//! `<store_dir>/jetstream/_meta_/raft/`):
//!
//! ```text
//! raft/
//!   1.log, 2.log, ...        segment files, append-only; only the highest is written to
//!   <n>.log.tmp              a rewrite (snapshot applied) in progress, deleted at open
//!   snapshot/snapshot        the last snapshot: index, term, ConfState, data (one record)
//!   snapshot/snapshot.tmp    a snapshot being written, deleted at open
//! ```
//!
//! # Records
//!
//! Segment files and the snapshot file are records written back to back, framed as the
//! message store's (`jsproto::stream::record`), integers little-endian:
//!
//! | offset    | size | field                                                            |
//! |-----------|------|------------------------------------------------------------------|
//! | 0         | 4    | `len`: the record's length in bytes, this field and the CRC included |
//! | 4         | 1    | `kind` (below)                                                   |
//! | 5         | ...  | body                                                             |
//! | `len` - 4 | 4    | CRC-32 (IEEE, `crc32fast`) of bytes `0 .. len-4`                 |
//!
//! - **entry** (1): `index` u64, `term` u64, `entry_type` i32 (raft-rs's `EntryType`),
//!   `context_len` u32, the context, then the data (what remains). An entry whose index is at
//!   or below the last one replaces it and every later one: a conflicting suffix is cut by
//!   appending, never by rewriting the file.
//! - **hard state** (2): `term` u64, `vote` u64, `commit` u64. The latest one wins.
//! - **conf state** (3): `auto_leave` u8, then `voters`, `learners`, `voters_outgoing`,
//!   `learners_next`, each a u32 count and that many u64 node ids. The latest one wins.
//! - **base** (4): `index` u64, `term` u64: the log restarts after this point (a snapshot's),
//!   every earlier entry is gone. Only as the first record of a rewritten segment.
//! - **snapshot** (5, only in `snapshot/snapshot`): `index` u64, `term` u64, `conf_len` u32, a
//!   conf state body of that length, then the snapshot's data (what remains).
//!
//! The state is what reading every segment in order gives; the in-memory index (the term and
//! file position of every entry, not the entries themselves) is built by the same function
//! at open and after each write, so what is read back after a restart is what was served
//! before it.
//!
//! # Durability (Raft's rule: persist before you send)
//!
//! Every write returns only after `fdatasync`: [`RaftLog::persist`] (a `Ready`'s entries and
//! hard state) is one `pwrite` of all its records and one `fdatasync` (group commit), so the
//! caller may send the `Ready`'s messages and `advance` once it returns `Ok`. The one
//! exception is a hard state that moves only the commit index (term and vote as stored, no
//! entries, no membership): written, not fsynced. Raft does not need the commit index to
//! survive a crash (a restart that reads an older one applies less until the group commits
//! the rest again; [`Storage::initial_state`] never reports one below the snapshot), and
//! the file's next fsync makes it durable with everything written before it. This halves
//! the fsyncs of a replicated stream: every round of appends moves the commit index once. A new segment
//! (past [`DEFAULT_SEGMENT_BYTES`]) is created and its directory fsynced before it is
//! written. [`RaftLog::apply_snapshot`] writes the snapshot file (temporary file, fsync,
//! rename, fsync of the directory), then a new segment that starts with a base record and
//! carries the entries kept after the snapshot (same steps), then deletes the old segments.
//! A crash between any two steps is finished at the next open.
//!
//! The active segment is grown with zeros written ahead of its records (as many bytes as it
//! holds, from [`PREALLOC_MIN`] to [`PREALLOC_MAX`] at a time), and its records are written
//! over them: an `fdatasync` that finds the file's
//! size and blocks as they were writes the records alone, where an append that grows the
//! file also writes its inode (a second device write: about a third of each fsync's time
//! here). Zeros where a record would start, to the end of the file, are where the records
//! end; a closed segment is cut back to its records.
//!
//! # Recovery
//!
//! At open, each segment is read and every record's CRC checked, up to the zeros written
//! ahead of the records (the rest of the file all zeros). In the last segment, the
//! first record that is cut short or does not check out (a torn write: the crash came before
//! the `fdatasync`, so no caller was told it was stored) ends the log: the file is truncated
//! there and fsynced, and a warning logged. The same in an earlier segment, or a record that
//! checks out but does not fit the log (an entry after a gap), is [`LogError::Corrupt`]: the
//! log refuses to open, since cutting there would drop entries this node acknowledged.
//!
//! # Errors
//!
//! Writes return [`LogError`]. A failed write or fsync leaves the in-memory state as it was,
//! cuts the file back to its length before the write (best effort) and marks the log failed:
//! every later write returns [`LogError::Failed`] (after a failed fsync the kernel's page
//! cache can no longer be trusted, so the group must reopen its log). [`Storage`] methods
//! return raft-rs's errors: [`StorageError::Compacted`] below the first index,
//! [`StorageError::Unavailable`] past the last one, and
//! [`StorageError::SnapshotTemporarilyUnavailable`] when no snapshot is as recent as asked;
//! an IO or decoding error is `StorageError::Other` carrying the [`LogError`].

use std::collections::VecDeque;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, ErrorKind, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use raft::prelude::{ConfState, Entry, HardState, Snapshot, SnapshotMetadata};
use raft::{GetEntriesContext, RaftState, Storage, StorageError};

/// A segment is closed and the next one started once it holds this many bytes (64 MiB).
pub const DEFAULT_SEGMENT_BYTES: u64 = 64 << 20;

/// The active segment is grown with zeros ahead of its records as many bytes as it holds,
/// at least this many (64 KiB) and at most [`PREALLOC_MAX`] (see "Durability" in the
/// module docs): a group that is seldom written keeps a small file.
pub const PREALLOC_MIN: u64 = 64 << 10;

/// The most zeros the active segment is grown by at a time (1 MiB).
pub const PREALLOC_MAX: u64 = 1 << 20;

const HEADER_LEN: usize = 5;
const CRC_LEN: usize = 4;
const MIN_RECORD_LEN: usize = HEADER_LEN + CRC_LEN;

const KIND_ENTRY: u8 = 1;
const KIND_HARD_STATE: u8 = 2;
const KIND_CONF_STATE: u8 = 3;
const KIND_BASE: u8 = 4;
const KIND_SNAPSHOT: u8 = 5;
const KIND_SNAPSHOT_REF: u8 = 6;

/// The first bytes of the data of a snapshot raft-rs hands around whose data is in a file
/// (what `Storage::snapshot` gives, read with [`parse_descriptor`]): then `len` u64 and
/// `crc` u32 of that file.
pub const SNAPSHOT_DESCRIPTOR_MAGIC: &[u8; 8] = b"JSRSNAP1";
const DESCRIPTOR_LEN: usize = 8 + 8 + 4;
/// A snapshot's data file being written (compaction), deleted at open.
const DATA_TMP: &str = "data.tmp";
/// A snapshot's data file being received from the leader, deleted at open.
const INCOMING_TMP: &str = "incoming.tmp";
/// A received data file whose snapshot message was taken ([`RaftLog::accept_incoming`]),
/// out of the way of the next transfer's parts until the snapshot is applied; deleted at
/// open.
const ACCEPTED_TMP: &str = "accepted.tmp";

const SEGMENT_EXT: &str = "log";
const SNAPSHOT_DIR: &str = "snapshot";
const SNAPSHOT_FILE: &str = "snapshot";

/// The account name the meta group's directory uses (`<store_dir>/jetstream/_meta_/raft/`).
pub const META_ACCOUNT_DIR: &str = "_meta_";

/// `<store_dir>/jetstream/<account>/streams/<stream>/raft/`: the Raft log of a replicated
/// stream, beside the stream's store (`docs/storage.md`).
pub fn stream_raft_dir(store_dir: &Path, account: &str, stream: &str) -> PathBuf {
    store_dir
        .join("jetstream")
        .join(account)
        .join("streams")
        .join(stream)
        .join("raft")
}

/// `<store_dir>/jetstream/_meta_/raft/`: the meta group's Raft log.
pub fn meta_raft_dir(store_dir: &Path) -> PathBuf {
    store_dir
        .join("jetstream")
        .join(META_ACCOUNT_DIR)
        .join("raft")
}

/// What can go wrong with a Raft log.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// A read, write, fsync, rename or directory operation failed.
    #[error("raft log {path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The operating system's error.
        source: io::Error,
    },
    /// A record that checks out but does not fit the log, or a bad record before the last
    /// segment's tail: the log is not opened (see the module docs, "Recovery").
    #[error("raft log {path} at byte {offset}: {reason}")]
    Corrupt {
        /// The segment or snapshot file.
        path: PathBuf,
        /// Where the record starts.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// An earlier write failed; the log takes no more writes until it is reopened.
    #[error("raft log {0}: an earlier write failed, reopen the log")]
    Failed(PathBuf),
    /// The caller asked for something the log cannot hold: entries that are not consecutive,
    /// that start past the last index + 1 or at or below the snapshot, a snapshot older than
    /// the current one, or a record longer than 4 GiB.
    #[error("raft log: {0}")]
    Invalid(String),
}

impl From<LogError> for raft::Error {
    fn from(e: LogError) -> Self {
        raft::Error::Store(StorageError::Other(Box::new(e)))
    }
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> LogError + '_ {
    move |source| LogError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Where an entry's record is: its term (kept in memory for `term()`), segment and bytes.
#[derive(Debug, Clone, Copy)]
struct Loc {
    term: u64,
    segment: u64,
    offset: u64,
    len: u32,
}

struct Segment {
    number: u64,
    path: PathBuf,
    file: File,
    /// Bytes of records (where the next one is written).
    len: u64,
    /// The file's size: `len` plus the zeros written ahead of the records.
    alloc: u64,
}

/// The bytes of entry data a log keeps in memory, the entries written last: 4 MiB.
pub const TAIL_CACHE_BYTES: usize = 4 << 20;

/// The entries written last, kept in memory (at most [`TAIL_CACHE_BYTES`] of data, at least
/// the last one): raft-rs asks for them again right after they are written, to apply them
/// once committed and to send them to followers, and reading each back from the file would
/// be a `pread`, a CRC check and a copy per entry.
#[derive(Debug, Default)]
struct Tail {
    /// The index of `entries[0]`.
    first: u64,
    entries: VecDeque<Entry>,
    bytes: usize,
}

impl Tail {
    fn get(&self, index: u64) -> Option<&Entry> {
        let i = index.checked_sub(self.first)?;
        self.entries.get(usize::try_from(i).ok()?)
    }

    /// Entries just written to the log: they replace any kept from their first index on.
    fn append(&mut self, written: &[Entry]) {
        let Some(from) = written.first().map(|e| e.index) else {
            return;
        };
        let end = self.first + self.entries.len() as u64;
        if self.entries.is_empty() || from < self.first || from > end {
            self.clear();
            self.first = from;
        } else {
            for e in self.entries.drain((from - self.first) as usize..) {
                self.bytes -= e.data.len();
            }
        }
        for e in written {
            self.bytes += e.data.len();
            self.entries.push_back(e.clone());
        }
        while self.bytes > TAIL_CACHE_BYTES && self.entries.len() > 1 {
            let e = self.entries.pop_front().expect("more than one");
            self.bytes -= e.data.len();
            self.first += 1;
        }
    }

    /// The log now starts after `index`: the entries up to it go.
    fn drop_through(&mut self, index: u64) {
        while self.first <= index {
            let Some(e) = self.entries.pop_front() else {
                break;
            };
            self.bytes -= e.data.len();
            self.first += 1;
        }
    }

    fn clear(&mut self) {
        self.entries.clear();
        self.bytes = 0;
    }
}

/// The snapshot in force: its metadata (the data stays in the file until asked for).
#[derive(Debug, Clone, Default)]
struct SnapMeta {
    index: u64,
    term: u64,
    conf_state: ConfState,
    /// Where its data is.
    data: SnapData,
}

/// Where a snapshot's data is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum SnapData {
    /// In the snapshot record itself (snapshots written by builds before data files).
    #[default]
    Inline,
    /// In `snapshot/data-<index>-<term>`: its length and CRC-32.
    File { len: u64, crc: u32 },
}

/// The `len` and `crc` a descriptor carries (see [`SNAPSHOT_DESCRIPTOR_MAGIC`]); `None`
/// for data that is no descriptor (a snapshot's bytes themselves).
pub fn parse_descriptor(data: &[u8]) -> Option<(u64, u32)> {
    if data.len() != DESCRIPTOR_LEN {
        return None;
    }
    let rest = data.strip_prefix(SNAPSHOT_DESCRIPTOR_MAGIC.as_slice())?;
    let len = u64::from_le_bytes(rest[..8].try_into().ok()?);
    let crc = u32::from_le_bytes(rest[8..12].try_into().ok()?);
    Some((len, crc))
}

fn descriptor(len: u64, crc: u32) -> Vec<u8> {
    let mut d = Vec::with_capacity(DESCRIPTOR_LEN);
    d.extend_from_slice(SNAPSHOT_DESCRIPTOR_MAGIC);
    d.extend_from_slice(&len.to_le_bytes());
    d.extend_from_slice(&crc.to_le_bytes());
    d
}

/// A reader of a snapshot's data ([`RaftLog::snapshot_reader`]).
pub type SnapshotReader = Box<dyn io::Read + Send>;

/// A snapshot's data file being received, part by part, from the leader.
#[derive(Debug)]
struct Incoming {
    file: File,
    len: u64,
    crc: crc32fast::Hasher,
}

/// Counts and checksums what goes through to `inner`.
struct Counting<W> {
    inner: W,
    len: u64,
    crc: crc32fast::Hasher,
}

impl<W: Write> Write for Counting<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.len += n as u64;
        self.crc.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Reads a snapshot's data file, and fails at its end unless the length and CRC-32 are the
/// ones written with it.
struct Checked<R> {
    inner: R,
    len: u64,
    crc: crc32fast::Hasher,
    want: (u64, u32),
}

impl<R: io::Read> io::Read for Checked<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        if n == 0 && !buf.is_empty() {
            let got = (self.len, self.crc.clone().finalize());
            if got != self.want {
                return Err(io::Error::new(
                    ErrorKind::InvalidData,
                    format!(
                        "snapshot data file: {} bytes CRC {:08x}, written as {} bytes CRC {:08x}",
                        got.0, got.1, self.want.0, self.want.1
                    ),
                ));
            }
        }
        self.len += n as u64;
        self.crc.update(&buf[..n]);
        Ok(n)
    }
}

/// One Raft group's durable log; see the module docs for the format and the rules.
pub struct RaftLog {
    dir: PathBuf,
    segments: Vec<Segment>,
    /// The index and term before the first entry (the snapshot's; 0 and 0 for a new log).
    base_index: u64,
    base_term: u64,
    /// `entries[i]` is the entry with index `base_index + 1 + i`.
    entries: VecDeque<Loc>,
    hard_state: HardState,
    conf_state: ConfState,
    snapshot: Option<SnapMeta>,
    segment_bytes: u64,
    failed: bool,
    /// The entries written last, in memory.
    tail: Tail,
    /// A snapshot's data being received from the leader.
    incoming: Option<Incoming>,
    /// A received data file set aside for the snapshot message taken: its length, CRC-32
    /// and file ([`RaftLog::accept_incoming`]).
    accepted: Option<(u64, u32, File)>,
    /// Bytes were written to the active segment without an fsync (a commit index).
    unsynced: bool,
}

impl std::fmt::Debug for RaftLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RaftLog")
            .field("dir", &self.dir)
            .field("first_index", &(self.base_index + 1))
            .field("last_index", &self.last())
            .field("hard_state", &self.hard_state)
            .field("conf_state", &self.conf_state)
            .finish_non_exhaustive()
    }
}

// ---- records ----

/// A decoded record, borrowing its variable parts from the buffer.
enum Record<'a> {
    Entry {
        index: u64,
        term: u64,
        entry_type: i32,
        context: &'a [u8],
        data: &'a [u8],
    },
    HardState(HardState),
    ConfState(ConfState),
    Base {
        index: u64,
        term: u64,
    },
    Snapshot {
        meta: SnapMeta,
        data: &'a [u8],
    },
}

enum DecodeError {
    /// The buffer ends inside the record (or before its length).
    Incomplete,
    /// The bytes are not a record.
    Bad(String),
}

/// Appends one framed record to `out`: `body` writes the body; returns its length.
fn frame(out: &mut Vec<u8>, kind: u8, body: impl FnOnce(&mut Vec<u8>)) -> Result<u32, LogError> {
    let start = out.len();
    out.extend_from_slice(&[0; 4]);
    out.push(kind);
    body(out);
    let len = out.len() - start + CRC_LEN;
    let Ok(len32) = u32::try_from(len) else {
        out.truncate(start);
        return Err(LogError::Invalid(format!("a record of {len} bytes")));
    };
    out[start..start + 4].copy_from_slice(&len32.to_le_bytes());
    let crc = crc32fast::hash(&out[start..]);
    out.extend_from_slice(&crc.to_le_bytes());
    Ok(len32)
}

fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn encode_entry(out: &mut Vec<u8>, e: &Entry) -> Result<u32, LogError> {
    let context_len = u32::try_from(e.context.len())
        .map_err(|_| LogError::Invalid("an entry context over 4 GiB".into()))?;
    frame(out, KIND_ENTRY, |b| {
        put_u64(b, e.index);
        put_u64(b, e.term);
        b.extend_from_slice(&protobuf::ProtobufEnum::value(&e.entry_type).to_le_bytes());
        b.extend_from_slice(&context_len.to_le_bytes());
        b.extend_from_slice(&e.context);
        b.extend_from_slice(&e.data);
    })
}

fn encode_hard_state(out: &mut Vec<u8>, hs: &HardState) -> Result<u32, LogError> {
    frame(out, KIND_HARD_STATE, |b| {
        put_u64(b, hs.term);
        put_u64(b, hs.vote);
        put_u64(b, hs.commit);
    })
}

fn conf_state_body(b: &mut Vec<u8>, cs: &ConfState) {
    b.push(u8::from(cs.auto_leave));
    for list in [
        &cs.voters,
        &cs.learners,
        &cs.voters_outgoing,
        &cs.learners_next,
    ] {
        // A group has a handful of members, far below u32::MAX.
        b.extend_from_slice(&(list.len() as u32).to_le_bytes());
        for id in list {
            put_u64(b, *id);
        }
    }
}

fn encode_conf_state(out: &mut Vec<u8>, cs: &ConfState) -> Result<u32, LogError> {
    frame(out, KIND_CONF_STATE, |b| conf_state_body(b, cs))
}

fn encode_base(out: &mut Vec<u8>, index: u64, term: u64) -> Result<u32, LogError> {
    frame(out, KIND_BASE, |b| {
        put_u64(b, index);
        put_u64(b, term);
    })
}

/// A snapshot record with its data inline, as builds before data files wrote them (tests
/// make such files to check they are still read).
#[cfg(test)]
fn encode_snapshot(out: &mut Vec<u8>, meta: &SnapMeta, data: &[u8]) -> Result<u32, LogError> {
    frame(out, KIND_SNAPSHOT, |b| {
        put_snapshot_head(b, meta);
        b.extend_from_slice(data);
    })
}

/// What both snapshot records start with: `index`, `term`, `conf_len` and the membership.
fn put_snapshot_head(b: &mut Vec<u8>, meta: &SnapMeta) {
    let mut conf = Vec::new();
    conf_state_body(&mut conf, &meta.conf_state);
    put_u64(b, meta.index);
    put_u64(b, meta.term);
    b.extend_from_slice(&(conf.len() as u32).to_le_bytes());
    b.extend_from_slice(&conf);
}

fn encode_snapshot_ref(out: &mut Vec<u8>, meta: &SnapMeta) -> Result<u32, LogError> {
    let SnapData::File { len, crc } = meta.data else {
        return Err(LogError::Invalid(
            "a snapshot reference without a data file".into(),
        ));
    };
    frame(out, KIND_SNAPSHOT_REF, |b| {
        put_snapshot_head(b, meta);
        put_u64(b, len);
        b.extend_from_slice(&crc.to_le_bytes());
    })
}

/// A cursor over a record's body; every read is bounds-checked.
struct Body<'a>(&'a [u8]);

impl<'a> Body<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if self.0.len() < n {
            return Err(DecodeError::Bad("record body too short".into()));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }
    fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }
    fn i32(&mut self) -> Result<i32, DecodeError> {
        Ok(i32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }
    fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }
    fn ids(&mut self) -> Result<Vec<u64>, DecodeError> {
        let n = self.u32()? as usize;
        if n > self.0.len() / 8 {
            return Err(DecodeError::Bad(
                "node id list longer than the record".into(),
            ));
        }
        (0..n).map(|_| self.u64()).collect()
    }
    fn conf_state(&mut self) -> Result<ConfState, DecodeError> {
        let auto_leave = match self.u8()? {
            0 => false,
            1 => true,
            v => return Err(DecodeError::Bad(format!("auto_leave {v}"))),
        };
        let mut cs = ConfState {
            auto_leave,
            ..Default::default()
        };
        cs.voters = self.ids()?;
        cs.learners = self.ids()?;
        cs.voters_outgoing = self.ids()?;
        cs.learners_next = self.ids()?;
        Ok(cs)
    }
    /// What both snapshot records start with ([`put_snapshot_head`]), with `data` as said.
    fn snapshot_head(&mut self, data: SnapData) -> Result<SnapMeta, DecodeError> {
        let index = self.u64()?;
        let term = self.u64()?;
        let conf_len = self.u32()? as usize;
        let mut conf = Body(self.take(conf_len)?);
        let conf_state = conf.conf_state()?;
        conf.end()?;
        Ok(SnapMeta {
            index,
            term,
            conf_state,
            data,
        })
    }

    fn end(&self) -> Result<(), DecodeError> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(DecodeError::Bad("bytes left after the record body".into()))
        }
    }
}

/// Decodes the record at the start of `buf`: the record and its length. Never panics.
fn decode(buf: &[u8]) -> Result<(Record<'_>, usize), DecodeError> {
    if buf.len() < 4 {
        return Err(DecodeError::Incomplete);
    }
    let len = u32::from_le_bytes(buf[..4].try_into().expect("4 bytes")) as usize;
    if len < MIN_RECORD_LEN {
        return Err(DecodeError::Bad(format!("record length {len}")));
    }
    if buf.len() < len {
        return Err(DecodeError::Incomplete);
    }
    let crc = u32::from_le_bytes(buf[len - CRC_LEN..len].try_into().expect("4 bytes"));
    if crc32fast::hash(&buf[..len - CRC_LEN]) != crc {
        return Err(DecodeError::Bad("CRC mismatch".into()));
    }
    let mut b = Body(&buf[HEADER_LEN..len - CRC_LEN]);
    let record = match buf[4] {
        KIND_ENTRY => {
            let index = b.u64()?;
            let term = b.u64()?;
            let entry_type = b.i32()?;
            let context_len = b.u32()? as usize;
            let context = b.take(context_len)?;
            let data = b.0;
            Record::Entry {
                index,
                term,
                entry_type,
                context,
                data,
            }
        }
        KIND_HARD_STATE => {
            let hs = HardState {
                term: b.u64()?,
                vote: b.u64()?,
                commit: b.u64()?,
                ..HardState::default()
            };
            b.end()?;
            Record::HardState(hs)
        }
        KIND_CONF_STATE => {
            let cs = b.conf_state()?;
            b.end()?;
            Record::ConfState(cs)
        }
        KIND_BASE => {
            let (index, term) = (b.u64()?, b.u64()?);
            b.end()?;
            Record::Base { index, term }
        }
        KIND_SNAPSHOT => Record::Snapshot {
            meta: b.snapshot_head(SnapData::Inline)?,
            data: b.0,
        },
        KIND_SNAPSHOT_REF => {
            let mut meta = b.snapshot_head(SnapData::Inline)?;
            meta.data = SnapData::File {
                len: b.u64()?,
                crc: b.u32()?,
            };
            b.end()?;
            Record::Snapshot { meta, data: &[] }
        }
        k => return Err(DecodeError::Bad(format!("unknown record kind {k}"))),
    };
    Ok((record, len))
}

// ---- files ----

fn sync_dir(dir: &Path) -> Result<(), LogError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err(dir))
}

fn segment_path(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("{number}.{SEGMENT_EXT}"))
}

/// Writes `bytes` to `path` through `path.tmp`, fsync, rename and an fsync of the directory.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), LogError> {
    let tmp = path.with_extension("tmp");
    let mut f = File::create(&tmp).map_err(io_err(&tmp))?;
    f.write_all(bytes).map_err(io_err(&tmp))?;
    f.sync_all().map_err(io_err(&tmp))?;
    fs::rename(&tmp, path).map_err(io_err(path))?;
    sync_dir(path.parent().expect("a file in a directory"))
}

impl RaftLog {
    /// Opens the log in `dir`, creating the directory and an empty log if there is none, and
    /// recovers what a crash left (see the module docs).
    pub fn open(dir: impl Into<PathBuf>) -> Result<RaftLog, LogError> {
        Self::open_with_segment_bytes(dir, DEFAULT_SEGMENT_BYTES)
    }

    /// [`RaftLog::open`], with segments rolled over at `segment_bytes` instead of
    /// [`DEFAULT_SEGMENT_BYTES`] (tests use small ones).
    pub fn open_with_segment_bytes(
        dir: impl Into<PathBuf>,
        segment_bytes: u64,
    ) -> Result<RaftLog, LogError> {
        let dir = dir.into();
        let snap_dir = dir.join(SNAPSHOT_DIR);
        fs::create_dir_all(&snap_dir).map_err(io_err(&snap_dir))?;
        sync_dir(&dir)?;
        if let Some(parent) = dir.parent() {
            sync_dir(parent)?;
        }

        // Leftovers of a write a crash interrupted: never in force.
        let mut numbers = Vec::new();
        for d in [&dir, &snap_dir] {
            for ent in fs::read_dir(d).map_err(io_err(d))? {
                let ent = ent.map_err(io_err(d))?;
                let name = ent.file_name();
                let name = name.to_string_lossy();
                if name.ends_with(".tmp") {
                    fs::remove_file(ent.path()).map_err(io_err(&ent.path()))?;
                } else if let Some(n) = name
                    .strip_suffix(".log")
                    .and_then(|n| n.parse::<u64>().ok())
                {
                    if d == &dir {
                        numbers.push(n);
                    }
                }
            }
        }
        numbers.sort_unstable();

        let mut log = RaftLog {
            dir,
            segments: Vec::new(),
            base_index: 0,
            base_term: 0,
            entries: VecDeque::new(),
            hard_state: HardState::default(),
            conf_state: ConfState::default(),
            snapshot: None,
            segment_bytes: segment_bytes.max(1),
            failed: false,
            tail: Tail::default(),
            incoming: None,
            accepted: None,
            unsynced: false,
        };

        let snap_path = snap_dir.join(SNAPSHOT_FILE);
        if snap_path.exists() {
            let (meta, _) = read_snapshot_file(&snap_path)?;
            log.snapshot = Some(meta);
            if let Some((path, len)) = log.snapshot_data_file() {
                let found = fs::metadata(&path).map(|m| m.len()).ok();
                if found != Some(len) {
                    return Err(LogError::Corrupt {
                        path,
                        offset: 0,
                        reason: format!("snapshot data file of {found:?} bytes, written {len}"),
                    });
                }
            }
            log.remove_stale_data_files();
        }

        // Replay every segment in order; the last one starting with a base record makes the
        // earlier ones obsolete.
        let mut last_based = 0;
        let count = numbers.len();
        for (i, &number) in numbers.iter().enumerate() {
            let path = segment_path(&log.dir, number);
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .open(&path)
                .map_err(io_err(&path))?;
            let bytes = fs::read(&path).map_err(io_err(&path))?;
            let mut off = 0usize;
            let mut alloc = bytes.len();
            let mut starts_with_base = false;
            while off < bytes.len() {
                if bytes[off..].iter().all(|&b| b == 0) {
                    break; // the zeros written ahead of the records
                }
                match decode(&bytes[off..]) {
                    Ok((record, len)) => {
                        if off == 0 {
                            starts_with_base = matches!(record, Record::Base { .. });
                        }
                        let loc = |term| Loc {
                            term,
                            segment: number,
                            offset: off as u64,
                            len: len as u32,
                        };
                        log.apply_record(&record, loc)
                            .map_err(|reason| LogError::Corrupt {
                                path: path.clone(),
                                offset: off as u64,
                                reason,
                            })?;
                        off += len;
                    }
                    Err(e) => {
                        let reason = match e {
                            DecodeError::Incomplete => "record cut short".to_string(),
                            DecodeError::Bad(r) => r,
                        };
                        if i + 1 < count {
                            return Err(LogError::Corrupt {
                                path,
                                offset: off as u64,
                                reason,
                            });
                        }
                        tracing::warn!(
                            path = %path.display(),
                            offset = off,
                            dropped = bytes.len() - off,
                            "raft log: torn tail cut off ({reason})"
                        );
                        file.set_len(off as u64).map_err(io_err(&path))?;
                        file.sync_all().map_err(io_err(&path))?;
                        alloc = off;
                        break;
                    }
                }
            }
            if starts_with_base {
                last_based = i;
            }
            log.segments.push(Segment {
                number,
                path,
                file,
                len: off as u64,
                alloc: alloc as u64,
            });
        }
        if last_based > 0 {
            log.remove_segments_before(log.segments[last_based].number)?;
        }
        if log.segments.is_empty() {
            log.new_segment(1)?;
        }

        // The snapshot file against the log's base.
        match log.snapshot.clone() {
            None if log.base_index > 0 => {
                return Err(LogError::Corrupt {
                    path: snap_path,
                    offset: 0,
                    reason: format!("missing; the log starts after index {}", log.base_index),
                })
            }
            None => {}
            Some(s)
                if s.index < log.base_index
                    || (s.index == log.base_index && s.term != log.base_term) =>
            {
                return Err(LogError::Corrupt {
                    path: snap_path,
                    offset: 0,
                    reason: format!(
                        "snapshot at {}/{} does not match the log's base {}/{}",
                        s.index, s.term, log.base_index, log.base_term
                    ),
                })
            }
            // A snapshot written, the log not yet rewritten: finish the job.
            Some(s) if s.index > log.base_index => log.rewrite(&s)?,
            Some(_) => {}
        }
        Ok(log)
    }

    /// Applies one record to the in-memory state: the one rule for replay and for writes.
    /// `loc` makes an entry's location from its term.
    fn apply_record(
        &mut self,
        record: &Record<'_>,
        loc: impl Fn(u64) -> Loc,
    ) -> Result<(), String> {
        match record {
            Record::Entry { index, term, .. } => {
                let last = self.last();
                if *index <= self.base_index || *index > last + 1 {
                    return Err(format!(
                        "entry {index} outside the log's range {}..={}",
                        self.base_index + 1,
                        last + 1
                    ));
                }
                self.entries
                    .truncate((*index - self.base_index - 1) as usize);
                self.entries.push_back(loc(*term));
            }
            Record::HardState(hs) => self.hard_state = hs.clone(),
            Record::ConfState(cs) => self.conf_state = cs.clone(),
            Record::Base { index, term } => {
                self.entries.clear();
                self.base_index = *index;
                self.base_term = *term;
            }
            Record::Snapshot { .. } => return Err("a snapshot record in a segment".into()),
        }
        Ok(())
    }

    fn last(&self) -> u64 {
        self.base_index + self.entries.len() as u64
    }

    fn new_segment(&mut self, number: u64) -> Result<(), LogError> {
        let path = segment_path(&self.dir, number);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(io_err(&path))?;
        sync_dir(&self.dir)?;
        self.segments.push(Segment {
            number,
            path,
            file,
            len: 0,
            alloc: 0,
        });
        Ok(())
    }

    fn remove_segments_before(&mut self, number: u64) -> Result<(), LogError> {
        let keep = self.segments.iter().position(|s| s.number >= number);
        let gone: Vec<Segment> = match keep {
            Some(k) => self.segments.drain(..k).collect(),
            None => self.segments.drain(..).collect(),
        };
        if gone.is_empty() {
            return Ok(());
        }
        for s in gone {
            drop(s.file);
            fs::remove_file(&s.path).map_err(io_err(&s.path))?;
        }
        sync_dir(&self.dir)
    }

    fn check_writable(&self) -> Result<(), LogError> {
        if self.failed {
            Err(LogError::Failed(self.dir.clone()))
        } else {
            Ok(())
        }
    }

    /// Whether a write failed: the log takes no more until reopened.
    pub fn is_failed(&self) -> bool {
        self.failed
    }

    /// The directory the log lives in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The hard state last written (term, vote, commit; zeros for a new log).
    pub fn hard_state(&self) -> &HardState {
        &self.hard_state
    }

    /// The membership last written.
    pub fn conf_state(&self) -> &ConfState {
        &self.conf_state
    }

    /// The index of the snapshot in force (the log's entries start after it); 0 for none.
    pub fn snapshot_index(&self) -> u64 {
        self.base_index
    }

    /// The Raft log's entries, hard state and membership in one write and one `fdatasync`:
    /// what a `Ready` (or `LightReady`) asks to persist before its messages go out.
    ///
    /// `entries` must be consecutive and start after the snapshot and at most one past the
    /// last index; those at or below the last index replace the log from there on (a
    /// conflicting suffix from an old leader). Nothing is written for empty arguments.
    pub fn persist(
        &mut self,
        entries: &[Entry],
        hard_state: Option<&HardState>,
        conf_state: Option<&ConfState>,
    ) -> Result<(), LogError> {
        if entries.is_empty() && hard_state.is_none() && conf_state.is_none() {
            return Ok(());
        }
        self.check_writable()?;
        if let Some(first) = entries.first() {
            if first.index <= self.base_index || first.index > self.last() + 1 {
                return Err(LogError::Invalid(format!(
                    "entries from {} to a log of {}..={}",
                    first.index,
                    self.base_index + 1,
                    self.last()
                )));
            }
            if let Some(w) = entries.windows(2).find(|w| w[1].index != w[0].index + 1) {
                return Err(LogError::Invalid(format!(
                    "entry {} after entry {}",
                    w[1].index, w[0].index
                )));
            }
        }

        // Roll over to a new segment when the active one is full.
        let active = self.segments.last().expect("an active segment");
        if active.len >= self.segment_bytes {
            let next = active.number + 1;
            // A commit index written last without an fsync is made durable before the
            // segment is closed: a record torn there would refuse the open (only the last
            // segment's torn tail is cut). Its zeros ahead are given back (no fsync: zeros
            // left after a crash read back as the end of the segment).
            if self.unsynced {
                if let Err(source) = active.file.sync_data() {
                    self.failed = true;
                    return Err(LogError::Io {
                        path: active.path.clone(),
                        source,
                    });
                }
                self.unsynced = false;
            }
            let _ = active.file.set_len(active.len);
            self.new_segment(next)?;
        }

        let mut buf = Vec::new();
        let mut lens = Vec::with_capacity(entries.len());
        for e in entries {
            lens.push(encode_entry(&mut buf, e)?);
        }
        if let Some(hs) = hard_state {
            encode_hard_state(&mut buf, hs)?;
        }
        if let Some(cs) = conf_state {
            encode_conf_state(&mut buf, cs)?;
        }

        // A hard state that moves only the commit index is written without an fsync: Raft
        // never needs the commit index back after a crash (a restart that finds an older one
        // applies less, and the group commits the rest again), and the next write that is
        // fsynced (this file is append-only) makes it durable with everything before it.
        let sync = !entries.is_empty()
            || conf_state.is_some()
            || hard_state.is_some_and(|hs| {
                hs.term != self.hard_state.term || hs.vote != self.hard_state.vote
            });
        let seg = self.segments.last_mut().expect("an active segment");
        let start = seg.len;
        let end = start + buf.len() as u64;
        // Zeros are written ahead of the records, so that most fsyncs find the file's size
        // and blocks as they were and write the records alone (an append that grows the
        // file also writes its inode, a second device write).
        let grow = (end > seg.alloc).then(|| {
            let ahead = end.clamp(PREALLOC_MIN, PREALLOC_MAX);
            (end + ahead).next_multiple_of(PREALLOC_MIN)
        });
        let written = grow
            .map_or(Ok(()), |to| {
                let zeros = vec![0u8; (to - end) as usize];
                seg.file.write_all_at(&zeros, end)
            })
            .and_then(|()| seg.file.write_all_at(&buf, start))
            .and_then(|()| if sync { seg.file.sync_data() } else { Ok(()) });
        if let Some(to) = grow {
            seg.alloc = to;
        }
        if let Err(source) = written {
            self.failed = true;
            let _ = seg.file.set_len(start);
            seg.alloc = start;
            return Err(LogError::Io {
                path: seg.path.clone(),
                source,
            });
        }
        seg.len += buf.len() as u64;
        let number = seg.number;
        self.unsynced = !sync;

        let mut offset = start;
        for (e, len) in entries.iter().zip(lens) {
            let loc = Loc {
                term: e.term,
                segment: number,
                offset,
                len,
            };
            let record = Record::Entry {
                index: e.index,
                term: e.term,
                entry_type: protobuf::ProtobufEnum::value(&e.entry_type),
                context: &[],
                data: &[],
            };
            self.apply_record(&record, |_| loc)
                .expect("entries checked before the write");
            offset += u64::from(len);
        }
        if let Some(hs) = hard_state {
            self.hard_state = hs.clone();
        }
        if let Some(cs) = conf_state {
            self.conf_state = cs.clone();
        }
        self.tail.append(entries);
        Ok(())
    }

    /// [`RaftLog::persist`] of entries alone.
    pub fn append(&mut self, entries: &[Entry]) -> Result<(), LogError> {
        self.persist(entries, None, None)
    }

    /// [`RaftLog::persist`] of a hard state alone.
    pub fn set_hard_state(&mut self, hard_state: &HardState) -> Result<(), LogError> {
        self.persist(&[], Some(hard_state), None)
    }

    /// [`RaftLog::persist`] of a membership alone: the `ConfState` raft-rs's
    /// `apply_conf_change` returns, and the initial membership of a new group.
    pub fn set_conf_state(&mut self, conf_state: &ConfState) -> Result<(), LogError> {
        self.persist(&[], None, Some(conf_state))
    }

    /// Installs `snapshot` and compacts the log up to its index. Used for a leader's snapshot
    /// (`Ready::snapshot`, before the `Ready`'s entries) and for the owner's own snapshot
    /// of its applied state (compaction).
    ///
    /// As Raft's InstallSnapshot rule (Raft paper, section 7): when the log holds the
    /// snapshot's index with the snapshot's term, the entries after it are kept; otherwise the
    /// whole log is dropped. The hard state's commit and term rise to the snapshot's (as
    /// raft-rs's `MemStorage::apply_snapshot`), the membership becomes the snapshot's. A
    /// snapshot older than the one in force is [`LogError::Invalid`].
    ///
    /// The snapshot's data is either its bytes (written to a data file here) or a descriptor
    /// ([`parse_descriptor`]) of a data file received from the leader
    /// ([`RaftLog::receive_part`]), which must have come whole.
    pub fn apply_snapshot(&mut self, snapshot: &Snapshot) -> Result<(), LogError> {
        self.check_writable()?;
        let md = snapshot.metadata.clone().unwrap_or_default();
        self.check_snapshot_index(md.index)?;
        let data = match parse_descriptor(&snapshot.data) {
            Some((len, crc)) => {
                if !self.accept_incoming(len, crc) {
                    return Err(LogError::Invalid(
                        "the snapshot's data file was not received whole".into(),
                    ));
                }
                let (_, _, file) = self.accepted.take().expect("accepted");
                let from = self.dir.join(SNAPSHOT_DIR).join(ACCEPTED_TMP);
                self.put_data_file(&file, &from, md.index, md.term, len, crc)?
            }
            None => {
                self.write_data_file(md.index, md.term, &mut |w| w.write_all(&snapshot.data))?
            }
        };
        self.install_snapshot(SnapMeta {
            index: md.index,
            term: md.term,
            conf_state: md.conf_state.unwrap_or_default(),
            data,
        })
    }

    /// [`RaftLog::apply_snapshot`] of this member's own state, written by `write` straight
    /// to the snapshot's data file (never whole in memory): the snapshot at `index` (of
    /// `term`) with membership `conf_state`.
    ///
    /// # Errors
    /// As [`RaftLog::apply_snapshot`]; an error `write` returns fails the snapshot (nothing
    /// changes) without failing the log.
    pub fn write_snapshot(
        &mut self,
        index: u64,
        term: u64,
        conf_state: ConfState,
        write: &mut dyn FnMut(&mut dyn Write) -> io::Result<()>,
    ) -> Result<(), LogError> {
        self.check_writable()?;
        self.check_snapshot_index(index)?;
        let data = self.write_data_file(index, term, write)?;
        self.install_snapshot(SnapMeta {
            index,
            term,
            conf_state,
            data,
        })
    }

    fn check_snapshot_index(&self, index: u64) -> Result<(), LogError> {
        if index < self.base_index || (index == 0 && self.base_index == 0) {
            return Err(LogError::Invalid(format!(
                "snapshot at {index} older than the log's, at {}",
                self.base_index
            )));
        }
        Ok(())
    }

    /// `snapshot/data-<index>-<term>-<len>-<crc>`: named by what it holds, so a data file
    /// is never overwritten by another.
    fn data_path(&self, index: u64, term: u64, len: u64, crc: u32) -> PathBuf {
        self.dir
            .join(SNAPSHOT_DIR)
            .join(format!("data-{index}-{term}-{len}-{crc:08x}"))
    }

    /// Writes a data file through `data.tmp` (fsync, rename, fsync of the directory).
    fn write_data_file(
        &mut self,
        index: u64,
        term: u64,
        write: &mut dyn FnMut(&mut dyn Write) -> io::Result<()>,
    ) -> Result<SnapData, LogError> {
        let tmp = self.dir.join(SNAPSHOT_DIR).join(DATA_TMP);
        let file = File::create(&tmp).map_err(io_err(&tmp))?;
        let mut w = Counting {
            inner: BufWriter::with_capacity(1 << 20, file),
            len: 0,
            crc: crc32fast::Hasher::new(),
        };
        if let Err(e) = write(&mut w).and_then(|()| w.flush()) {
            let _ = fs::remove_file(&tmp);
            return Err(LogError::Io {
                path: tmp,
                source: e,
            });
        }
        let (len, crc) = (w.len, w.crc.finalize());
        let file = w.inner.into_inner().map_err(|e| LogError::Io {
            path: tmp.clone(),
            source: e.into_error(),
        })?;
        self.put_data_file(&file, &tmp, index, term, len, crc)
    }

    /// Makes `file`, written at `from`, the data file of the snapshot at `index` (of `term`)
    /// holding `len` bytes of CRC-32 `crc`: fsync, rename to its name, fsync of the
    /// directory. A failure fails the log.
    fn put_data_file(
        &mut self,
        file: &File,
        from: &Path,
        index: u64,
        term: u64,
        len: u64,
        crc: u32,
    ) -> Result<SnapData, LogError> {
        let to = self.data_path(index, term, len, crc);
        let done = file
            .sync_all()
            .map_err(io_err(from))
            .and_then(|()| fs::rename(from, &to).map_err(io_err(&to)))
            .and_then(|()| sync_dir(&self.dir.join(SNAPSHOT_DIR)));
        if let Err(e) = done {
            self.failed = true;
            return Err(e);
        }
        Ok(SnapData::File { len, crc })
    }

    /// Makes `meta` (its data file written) the snapshot in force: the snapshot file, then
    /// the log rewritten after it, then the data files of older snapshots deleted.
    fn install_snapshot(&mut self, meta: SnapMeta) -> Result<(), LogError> {
        let mut buf = Vec::new();
        encode_snapshot_ref(&mut buf, &meta)?;
        let path = self.dir.join(SNAPSHOT_DIR).join(SNAPSHOT_FILE);
        if let Err(e) = write_atomic(&path, &buf) {
            self.failed = true;
            return Err(e);
        }
        self.snapshot = Some(meta.clone());
        let r = self.rewrite(&meta);
        if r.is_err() {
            self.failed = true;
        }
        self.remove_stale_data_files();
        r
    }

    /// Deletes the data files of snapshots no longer in force (best effort).
    fn remove_stale_data_files(&self) {
        let keep = match &self.snapshot {
            Some(SnapMeta {
                index,
                term,
                data: SnapData::File { len, crc },
                ..
            }) => Some(self.data_path(*index, *term, *len, *crc)),
            _ => None,
        };
        let dir = self.dir.join(SNAPSHOT_DIR);
        let Ok(entries) = fs::read_dir(&dir) else {
            return;
        };
        for ent in entries.flatten() {
            let path = ent.path();
            let is_data = ent.file_name().to_string_lossy().starts_with("data-");
            if is_data && Some(&path) != keep.as_ref() {
                let _ = fs::remove_file(&path);
            }
        }
    }

    /// A part of a snapshot's data file sent by the leader, `offset` bytes into it: the part
    /// at offset 0 starts a new file (`snapshot/incoming.tmp`), a part that does not follow
    /// the last one is dropped (with the rest of that transfer: the leader sends the
    /// snapshot again). Not fsynced here: [`RaftLog::apply_snapshot`] does, if it comes
    /// whole.
    ///
    /// # Errors
    /// The file cannot be created or written (the transfer is dropped; the log goes on).
    pub fn receive_part(&mut self, offset: u64, data: &[u8]) -> Result<(), LogError> {
        let path = self.dir.join(SNAPSHOT_DIR).join(INCOMING_TMP);
        if offset == 0 {
            self.incoming = None;
            let file = File::create(&path).map_err(io_err(&path))?;
            self.incoming = Some(Incoming {
                file,
                len: 0,
                crc: crc32fast::Hasher::new(),
            });
        }
        let Some(inc) = self.incoming.as_mut().filter(|i| i.len == offset) else {
            self.incoming = None;
            return Ok(());
        };
        if let Err(e) = inc.file.write_all(data) {
            self.incoming = None;
            return Err(LogError::Io { path, source: e });
        }
        inc.len += data.len() as u64;
        inc.crc.update(data);
        Ok(())
    }

    /// Sets the received data file aside for the snapshot message being taken, if it is
    /// the one of `len` bytes and CRC-32 `crc` and came whole (or was set aside already):
    /// parts of a next transfer that arrive before the snapshot is applied start a new
    /// file instead of replacing this one. False when no such file came.
    pub fn accept_incoming(&mut self, len: u64, crc: u32) -> bool {
        if self.incoming_matches(len, crc) {
            let incoming = self.incoming.take().expect("matched");
            let dir = self.dir.join(SNAPSHOT_DIR);
            if let Err(err) = fs::rename(dir.join(INCOMING_TMP), dir.join(ACCEPTED_TMP)) {
                tracing::warn!(dir = %dir.display(), error = %err, "setting a received snapshot aside");
                return false;
            }
            self.accepted = Some((len, crc, incoming.file));
            return true;
        }
        self.accepted
            .as_ref()
            .is_some_and(|(l, c, _)| *l == len && *c == crc)
    }

    /// Whether a snapshot data file of `len` bytes and CRC-32 `crc` came whole.
    pub fn incoming_matches(&self, len: u64, crc: u32) -> bool {
        self.incoming
            .as_ref()
            .is_some_and(|i| i.len == len && i.crc.clone().finalize() == crc)
    }

    /// The data file of the snapshot in force and its length, for sending it to a member
    /// (`None`: no snapshot, or one whose data is in its record).
    pub fn snapshot_data_file(&self) -> Option<(PathBuf, u64)> {
        match &self.snapshot {
            Some(SnapMeta {
                index,
                term,
                data: SnapData::File { len, crc },
                ..
            }) => Some((self.data_path(*index, *term, *len, *crc), *len)),
            _ => None,
        }
    }

    /// The snapshot in force, for its owner to restore from: its index and a reader of its
    /// data, which fails at the end unless the data is what was written. `None` without one.
    ///
    /// # Errors
    /// The snapshot's files cannot be opened or read.
    pub fn snapshot_reader(&self) -> Result<Option<(u64, SnapshotReader)>, LogError> {
        let Some(meta) = &self.snapshot else {
            return Ok(None);
        };
        match meta.data {
            SnapData::Inline => {
                let path = self.dir.join(SNAPSHOT_DIR).join(SNAPSHOT_FILE);
                let (_, data) = read_snapshot_file(&path)?;
                Ok(Some((meta.index, Box::new(io::Cursor::new(data)))))
            }
            SnapData::File { len, crc } => {
                let path = self.data_path(meta.index, meta.term, len, crc);
                let file = File::open(&path).map_err(io_err(&path))?;
                Ok(Some((
                    meta.index,
                    Box::new(Checked {
                        inner: io::BufReader::with_capacity(1 << 20, file),
                        len: 0,
                        crc: crc32fast::Hasher::new(),
                        want: (len, crc),
                    }),
                )))
            }
        }
    }

    /// Writes a new segment: base record, hard state, membership and the entries kept after
    /// `meta` (see [`RaftLog::apply_snapshot`]), through a temporary file; then the old
    /// segments go.
    fn rewrite(&mut self, meta: &SnapMeta) -> Result<(), LogError> {
        let keep_from = match self.term_of(meta.index) {
            Some(t) if t == meta.term => (meta.index - self.base_index) as usize,
            _ => self.entries.len(),
        };
        let hard_state = HardState {
            term: self.hard_state.term.max(meta.term),
            vote: self.hard_state.vote,
            commit: self.hard_state.commit.max(meta.index),
            ..HardState::default()
        };
        let number = self.segments.last().map_or(1, |s| s.number + 1);
        let path = segment_path(&self.dir, number);
        let tmp = path.with_extension("log.tmp");

        let mut head = Vec::new();
        encode_base(&mut head, meta.index, meta.term)?;
        encode_hard_state(&mut head, &hard_state)?;
        encode_conf_state(&mut head, &meta.conf_state)?;
        let file = File::create(&tmp).map_err(io_err(&tmp))?;
        let mut w = BufWriter::new(file);
        w.write_all(&head).map_err(io_err(&tmp))?;
        let mut offset = head.len() as u64;
        let mut kept = VecDeque::with_capacity(self.entries.len() - keep_from);
        let mut record = Vec::new();
        for loc in self.entries.iter().skip(keep_from) {
            self.read_record(loc, &mut record)?;
            w.write_all(&record).map_err(io_err(&tmp))?;
            kept.push_back(Loc {
                segment: number,
                offset,
                ..*loc
            });
            offset += u64::from(loc.len);
        }
        let file = w.into_inner().map_err(|e| LogError::Io {
            path: tmp.clone(),
            source: e.into_error(),
        })?;
        file.sync_all().map_err(io_err(&tmp))?;
        drop(file);
        fs::rename(&tmp, &path).map_err(io_err(&path))?;
        sync_dir(&self.dir)?;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(io_err(&path))?;
        self.segments.push(Segment {
            number,
            path,
            file,
            len: offset,
            alloc: offset,
        });
        self.base_index = meta.index;
        self.base_term = meta.term;
        if kept.is_empty() {
            self.tail.clear();
        } else {
            self.tail.drop_through(meta.index);
        }
        self.entries = kept;
        self.hard_state = hard_state;
        self.conf_state = meta.conf_state.clone();
        self.remove_segments_before(number)
    }

    fn term_of(&self, index: u64) -> Option<u64> {
        if index == self.base_index {
            return Some(self.base_term);
        }
        if index < self.base_index || index > self.last() {
            return None;
        }
        Some(self.entries[(index - self.base_index - 1) as usize].term)
    }

    /// Reads the whole record at `loc` into `buf` and checks its CRC.
    fn read_record(&self, loc: &Loc, buf: &mut Vec<u8>) -> Result<(), LogError> {
        let seg = self
            .segments
            .iter()
            .find(|s| s.number == loc.segment)
            .expect("an entry's segment is open");
        buf.clear();
        buf.resize(loc.len as usize, 0);
        seg.file
            .read_exact_at(buf, loc.offset)
            .map_err(io_err(&seg.path))?;
        match decode(buf) {
            Ok(_) => Ok(()),
            Err(e) => Err(LogError::Corrupt {
                path: seg.path.clone(),
                offset: loc.offset,
                reason: match e {
                    DecodeError::Incomplete => "record cut short".into(),
                    DecodeError::Bad(r) => r,
                },
            }),
        }
    }

    fn read_entry(&self, index: u64, buf: &mut Vec<u8>) -> Result<Entry, LogError> {
        let loc = &self.entries[(index - self.base_index - 1) as usize];
        self.read_record(loc, buf)?;
        let seg_path = || {
            self.segments
                .iter()
                .find(|s| s.number == loc.segment)
                .map(|s| s.path.clone())
                .unwrap_or_default()
        };
        match decode(buf) {
            Ok((
                Record::Entry {
                    index: i,
                    term,
                    entry_type,
                    context,
                    data,
                },
                _,
            )) if i == index && entry_type_of(entry_type).is_some() => Ok(Entry {
                entry_type: entry_type_of(entry_type).expect("checked in the guard"),
                term,
                index,
                data: Bytes::copy_from_slice(data),
                context: Bytes::copy_from_slice(context),
                sync_log: false,
                ..Entry::default()
            }),
            _ => Err(LogError::Corrupt {
                path: seg_path(),
                offset: loc.offset,
                reason: format!("not the record of entry {index}"),
            }),
        }
    }
}

fn read_snapshot_file(path: &Path) -> Result<(SnapMeta, Vec<u8>), LogError> {
    let bytes = fs::read(path).map_err(io_err(path))?;
    let corrupt = |reason: String| LogError::Corrupt {
        path: path.to_path_buf(),
        offset: 0,
        reason,
    };
    match decode(&bytes) {
        Ok((Record::Snapshot { meta, data }, len)) if len == bytes.len() => {
            Ok((meta, data.to_vec()))
        }
        Ok(_) => Err(corrupt("not one snapshot record".into())),
        Err(DecodeError::Incomplete) => Err(corrupt("cut short".into())),
        Err(DecodeError::Bad(r)) => Err(corrupt(r)),
    }
}

impl Storage for RaftLog {
    fn initial_state(&self) -> raft::Result<RaftState> {
        // The commit index is written without an fsync (see `persist`): after a crash the
        // one read back may be older than the snapshot, which raft-rs refuses to load.
        let mut hard_state = self.hard_state.clone();
        hard_state.commit = hard_state.commit.max(self.base_index);
        Ok(RaftState::new(hard_state, self.conf_state.clone()))
    }

    /// Entries `[low, high)`, cut after the first once their protobuf-encoded sizes add up past
    /// `max_size` (raft-rs's `limit_size` rule: at least one entry).
    fn entries(
        &self,
        low: u64,
        high: u64,
        max_size: impl Into<Option<u64>>,
        _context: GetEntriesContext,
    ) -> raft::Result<Vec<Entry>> {
        if low <= self.base_index {
            return Err(StorageError::Compacted.into());
        }
        if high > self.last() + 1 {
            return Err(StorageError::Unavailable.into());
        }
        let max = match max_size.into() {
            None | Some(raft::NO_LIMIT) => None,
            Some(m) => Some(m),
        };
        let mut out = Vec::new();
        let mut size = 0u64;
        let mut buf = Vec::new();
        for index in low..high {
            let e = match self.tail.get(index) {
                Some(e) => e.clone(),
                None => self.read_entry(index, &mut buf)?,
            };
            size += u64::from(protobuf::Message::compute_size(&e));
            if !out.is_empty() && max.is_some_and(|m| size > m) {
                break;
            }
            out.push(e);
        }
        Ok(out)
    }

    fn term(&self, idx: u64) -> raft::Result<u64> {
        if idx < self.base_index {
            return Err(StorageError::Compacted.into());
        }
        self.term_of(idx)
            .ok_or_else(|| StorageError::Unavailable.into())
    }

    fn first_index(&self) -> raft::Result<u64> {
        Ok(self.base_index + 1)
    }

    fn last_index(&self) -> raft::Result<u64> {
        Ok(self.last())
    }

    fn snapshot(&self, request_index: u64, _to: u64) -> raft::Result<Snapshot> {
        match &self.snapshot {
            Some(s) if s.index >= request_index && s.index > 0 => {
                let path = self.dir.join(SNAPSHOT_DIR).join(SNAPSHOT_FILE);
                let (meta, data) = read_snapshot_file(&path)?;
                // A data file is sent beside the message, not in it (`RaftGroup`).
                let data = match meta.data {
                    SnapData::File { len, crc } => descriptor(len, crc),
                    SnapData::Inline => data,
                };
                Ok(Snapshot {
                    data: data.into(),
                    metadata: Some(SnapshotMetadata {
                        conf_state: Some(meta.conf_state).into(),
                        index: meta.index,
                        term: meta.term,
                        ..SnapshotMetadata::default()
                    })
                    .into(),
                    ..Snapshot::default()
                })
            }
            _ => Err(StorageError::SnapshotTemporarilyUnavailable.into()),
        }
    }
}

#[cfg(test)]
mod tests;

/// The entry type a record's `i32` names (raft-rs's `EntryType` values), if any.
fn entry_type_of(value: i32) -> Option<raft::prelude::EntryType> {
    protobuf::ProtobufEnum::from_i32(value)
}
