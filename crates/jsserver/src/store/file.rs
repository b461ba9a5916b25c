//! The file store (`storage: "file"`): append-only segment files under one directory.
//!
//! # Layout
//!
//! The caller gives a directory (for a stream, e.g. `<store_dir>/jetstream/$G/streams/ORDERS/msgs`);
//! it holds segment files `1.blk`, `2.blk`, ... of records laid out by
//! [`jsproto::stream::record`] (message, delete tombstone, marker, erased filler; each with a
//! CRC-32). Only the highest-numbered segment, the *active* one, is appended to; it rolls to a
//! new segment when the next record would take it past [`FileStoreConfig::segment_size`]. Every
//! segment starts with a marker holding the stream's floor (everything below was purged), last
//! sequence and last timestamp, so those survive even when every message is gone.
//!
//! # Changes
//!
//! * Store: the message record is appended to an in-memory write buffer (readable at once);
//!   [`MsgStore::flush`] hands the buffer to the OS in one write, [`MsgStore::sync`] also
//!   fsyncs. The server batches several stores, then one flush (+ one sync): group commit.
//! * Remove (delete, limits, expiry, filtered purge): a tombstone record is appended.
//!   Erase also overwrites the message's record in place with an erased filler of the same
//!   length, so its subject, headers and payload leave the disk.
//! * Purge of everything below a sequence: no tombstones, a marker raises the floor.
//! * Space: a segment other than the active one that has no live message is deleted, and one
//!   whose live messages use less than half of it is rewritten (compacted) without the dead
//!   records, through a temporary file renamed over it. Tombstones are kept as long as the
//!   message they delete may still be in an older segment. This happens on flush/sync.
//!
//! # Recovery
//!
//! [`FileStore::open`] reads every segment in order, verifies each record's checksum and
//! rebuilds the index. A torn tail (a record cut short by a crash) at the end of the active
//! segment is truncated away; a damaged region anywhere is reported with `tracing::warn!` and
//! skipped to the next valid record (or, at the end of the last segment, truncated). Nothing
//! read from disk can panic the store.
//!
//! # Accounting and costs
//!
//! Bytes are charged as nats-server's `fileStoreMsgSize` ([`super::file_msg_size`], 2 bytes more
//! than this format's record). Per message the index keeps a 24-byte slot (segment, offset,
//! length, subject id, timestamp; the sequence is the slot's place) in a sequence-ordered deque,
//! and at most 8 bytes in its subject's run-length encoded sequence list (nothing for a run of
//! one subject: about 31 MiB resident for 1M messages on one subject, idle server included);
//! each distinct subject is stored once. A write error
//! leaves the index as it was: the failed message is not stored, buffered data stays
//! buffered and readable, and the next store or flush retries the write (the error repeats
//! until the disk has room).

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, File, OpenOptions};
use std::io;
use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use jsproto::stream::record::{self, Marker, MsgRecord, Record};
use tracing::{debug, warn};

use super::{
    file_msg_size, MsgStore, PurgeRequest, StoreError, StoreLimits, StoreOutcome, StoreState,
    StoredMsg,
};
use jsproto::stream::store::index::{Entry, Index, PurgePlan};

/// Default size at which the active segment rolls over (8 MiB).
pub const DEFAULT_SEGMENT_SIZE: u64 = 8 * 1024 * 1024;
/// Default size of buffered records that makes [`MsgStore::store_msg`] write to the OS even
/// before a flush (1 MiB).
pub const DEFAULT_WRITE_BUFFER: usize = 1024 * 1024;
/// Largest accepted segment size: offsets are kept as u32.
const MAX_SEGMENT_SIZE: u64 = 1 << 30;
/// nats-server charges 2 bytes more per message than this format's record length (its record
/// has a 8-byte hash where ours has a 4-byte CRC, and no kind/flags bytes).
const SIZE_OVER_RECORD: u64 = 2;

/// Where and how a [`FileStore`] keeps its files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileStoreConfig {
    /// Directory of the segment files (created if missing). The store owns it.
    pub dir: PathBuf,
    /// The active segment rolls when the next record would take it past this size (bytes;
    /// a larger single record still goes in a segment of its own). Clamped to 1 GiB.
    pub segment_size: u64,
    /// Buffered bytes past which a store writes to the OS without waiting for a flush.
    pub write_buffer: usize,
}

impl FileStoreConfig {
    /// Defaults ([`DEFAULT_SEGMENT_SIZE`], [`DEFAULT_WRITE_BUFFER`]) for directory `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            segment_size: DEFAULT_SEGMENT_SIZE,
            write_buffer: DEFAULT_WRITE_BUFFER,
        }
    }
}

/// Where one message's record is, plus what the index needs: 24 bytes, and no more as an
/// index slot's `Option` (a record is never empty).
#[derive(Debug, Clone, Copy)]
struct FileEntry {
    seg: u32,
    off: u32,
    len: NonZeroU32,
    subj: u32,
    ts: u64,
}

impl FileEntry {
    fn len(&self) -> usize {
        self.len.get() as usize
    }
}

impl Entry for FileEntry {
    fn subj(&self) -> u32 {
        self.subj
    }
    fn ts(&self) -> u64 {
        self.ts
    }
    fn size(&self) -> u64 {
        u64::from(self.len.get()) + SIZE_OVER_RECORD
    }
}

#[derive(Debug)]
struct Segment {
    file: File,
    path: PathBuf,
    /// Length in bytes; for the active segment, written plus buffered.
    len: u64,
    /// Messages of the index in this segment.
    live_msgs: u64,
    /// Their record bytes.
    live_bytes: u64,
    /// Lowest and highest sequence of the message records physically in the file (live or
    /// not); 0 when none. Tombstones for sequences in this range must be kept.
    first_msg: u64,
    last_msg: u64,
    /// `live_bytes` when a rewrite was last found not worth it (tombstones it must keep):
    /// the segment is not read again until another eighth of it died.
    checked_live: u64,
}

impl Segment {
    fn new(file: File, path: PathBuf) -> Self {
        Self {
            file,
            path,
            len: 0,
            live_msgs: 0,
            live_bytes: 0,
            first_msg: 0,
            last_msg: 0,
            checked_live: u64::MAX,
        }
    }

    /// Whether it may be worth deleting or compacting.
    fn reclaimable(&self) -> bool {
        self.live_msgs == 0
            || (self.live_bytes * 2 < self.len
                && self.live_bytes.saturating_add(self.len / 8) <= self.checked_live)
    }

    fn note_msg(&mut self, seq: u64) {
        if self.first_msg == 0 || seq < self.first_msg {
            self.first_msg = seq;
        }
        self.last_msg = self.last_msg.max(seq);
    }
}

/// A stream store in segment files. See the [module docs](self).
#[derive(Debug)]
pub struct FileStore {
    cfg: FileStoreConfig,
    limits: StoreLimits,
    idx: Index<FileEntry>,
    segs: BTreeMap<u32, Segment>,
    /// The segment appended to (the highest id).
    active: u32,
    /// Bytes of the active segment handed to the OS; `pending` continues at this offset.
    written: u64,
    /// Records of the active segment not yet written.
    pending: Vec<u8>,
    /// The last write of `pending` failed: retry before taking anything new.
    write_failed: bool,
    /// Every sequence below it was purged.
    floor: u64,
    /// Segments that lost messages (or stopped being active) since the last reclaim.
    dirty: BTreeSet<u32>,
    /// Segments without live messages kept for their tombstones, rechecked when the layout
    /// changes.
    tomb_segs: BTreeSet<u32>,
    /// A segment was deleted or rewritten since `tomb_segs` were last checked.
    layout_changed: bool,
    /// Segments written since the last fsync.
    unsynced: BTreeSet<u32>,
    /// Files were created, renamed or removed since the last directory fsync.
    dir_unsynced: bool,
    /// The last read, and the bytes read ahead of it.
    reads: RefCell<ReadAhead>,
}

/// Bytes read past a record when loads go in file order (a consumer working through a
/// backlog), so that the next loads need no syscall.
const READ_AHEAD: usize = 64 * 1024;

/// What [`FileStore::read_msg`] read last: where it ended (to tell sequential loads from
/// random ones), the bytes it read ahead, for the loads that follow, and the message itself.
#[derive(Debug, Default)]
struct ReadAhead {
    /// Segment and offset just past the last record read.
    last_end: Option<(u32, u64)>,
    /// Segment, offset and bytes read ahead (a view of one allocation; records handed out
    /// are slices of it).
    chunk: Option<(u32, u64, Bytes)>,
    /// Segment and offset of the last message decoded, and the message. A consumer looks a
    /// message up before it is delivered, and the delivery loads it again: the second load
    /// is answered from here, without decoding and checking the record twice. A record's
    /// bytes never change while it holds a sequence, so `(seq, segment, offset)` identifies
    /// them.
    last_msg: Option<(u32, u64, StoredMsg)>,
}

impl ReadAhead {
    /// The record at `seg`/`off` of `len` bytes, if the read-ahead holds all of it.
    fn get(&self, seg: u32, off: u64, len: usize) -> Option<Bytes> {
        let (cseg, coff, data) = self.chunk.as_ref()?;
        if *cseg != seg || off < *coff {
            return None;
        }
        let start = usize::try_from(off - coff).ok()?;
        (start.checked_add(len)? <= data.len()).then(|| data.slice(start..start + len))
    }

    /// The last message decoded, if it is `seq` at `seg`/`off`.
    fn last_msg(&self, seq: u64, seg: u32, off: u64) -> Option<StoredMsg> {
        match &self.last_msg {
            Some((s, o, m)) if m.seq == seq && *s == seg && *o == off => Some(m.clone()),
            _ => None,
        }
    }
}

fn seg_path(dir: &Path, id: u32) -> PathBuf {
    dir.join(format!("{id}.blk"))
}

#[cfg(unix)]
fn read_exact_at(file: &File, buf: &mut [u8], off: u64) -> io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, off)
}

#[cfg(unix)]
fn write_all_at(file: &File, buf: &[u8], off: u64) -> io::Result<()> {
    std::os::unix::fs::FileExt::write_all_at(file, buf, off)
}

#[cfg(not(unix))]
fn read_exact_at(mut file: &File, buf: &mut [u8], off: u64) -> io::Result<()> {
    use std::io::{Read, Seek, SeekFrom};
    file.seek(SeekFrom::Start(off))?;
    file.read_exact(buf)
}

#[cfg(not(unix))]
fn write_all_at(mut file: &File, buf: &[u8], off: u64) -> io::Result<()> {
    use std::io::{Seek, SeekFrom, Write};
    file.seek(SeekFrom::Start(off))?;
    file.write_all(buf)
}

/// Reads into `buf` from `off` until it is full or the file ends; fails unless at least `min`
/// bytes were read.
fn read_at_least(file: &File, buf: &mut [u8], off: u64, min: usize) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match read_at(file, &mut buf[n..], off + n as u64) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    if n < min {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    Ok(n)
}

#[cfg(unix)]
fn read_at(file: &File, buf: &mut [u8], off: u64) -> io::Result<usize> {
    std::os::unix::fs::FileExt::read_at(file, buf, off)
}

#[cfg(not(unix))]
fn read_at(mut file: &File, buf: &mut [u8], off: u64) -> io::Result<usize> {
    use std::io::{Read, Seek, SeekFrom};
    file.seek(SeekFrom::Start(off))?;
    file.read(buf)
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        File::open(dir)?.sync_all()
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        Ok(())
    }
}

/// The offset of the first valid record at or after `from`, if any (resynchronising after
/// damage).
fn next_valid_record(buf: &[u8], from: usize) -> Option<usize> {
    (from..buf.len()).find(|&at| record::decode(&buf[at..]).is_ok())
}

/// Calls `f(offset, record)` for every valid record of `buf`, skipping damaged regions with a
/// warning; returns the end of the last valid record if the buffer ends in damage or a torn
/// record (where a writer may truncate), else `None`.
fn walk_records<'a>(
    path: &Path,
    buf: &'a [u8],
    mut f: impl FnMut(usize, usize, Record<'a>),
) -> Option<usize> {
    let mut at = 0;
    while at < buf.len() {
        match record::decode(&buf[at..]) {
            Ok((rec, n)) => {
                f(at, n, rec);
                at += n;
            }
            Err(err) => match next_valid_record(buf, at + 1) {
                Some(next) => {
                    warn!(
                        path = %path.display(),
                        offset = at,
                        skipped_bytes = next - at,
                        error = %err,
                        "damaged record(s) in stream segment skipped"
                    );
                    at = next;
                }
                None => {
                    warn!(
                        path = %path.display(),
                        offset = at,
                        dropped_bytes = buf.len() - at,
                        error = %err,
                        "torn or damaged tail in stream segment"
                    );
                    return Some(at);
                }
            },
        }
    }
    None
}

impl FileStore {
    /// Opens (recovering) or creates the store in `cfg.dir` with these limits.
    ///
    /// Limits are not applied to recovered messages: call [`MsgStore::update_limits`] /
    /// [`MsgStore::expire`] for that. Damage is reported with `tracing::warn!` and skipped.
    pub fn open(mut cfg: FileStoreConfig, limits: StoreLimits) -> Result<Self, StoreError> {
        cfg.segment_size = cfg
            .segment_size
            .clamp(record::MARKER_LEN as u64 + 1, MAX_SEGMENT_SIZE);
        fs::create_dir_all(&cfg.dir)?;
        let mut ids = Vec::new();
        for entry in fs::read_dir(&cfg.dir)? {
            let entry = entry?;
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if let Some(id) = name
                .strip_suffix(".blk")
                .and_then(|s| s.parse::<u32>().ok())
            {
                ids.push(id);
            } else if name.ends_with(".blk.tmp") {
                // An interrupted compaction: the original is intact.
                fs::remove_file(entry.path())?;
            }
        }
        ids.sort_unstable();
        let mut store = Self {
            cfg,
            limits,
            idx: Index::new(),
            segs: BTreeMap::new(),
            active: ids.last().copied().unwrap_or(1),
            written: 0,
            pending: Vec::new(),
            write_failed: false,
            reads: RefCell::default(),
            floor: 0,
            dirty: BTreeSet::new(),
            tomb_segs: BTreeSet::new(),
            layout_changed: false,
            unsynced: BTreeSet::new(),
            dir_unsynced: false,
        };
        for &id in &ids {
            store.recover_segment(id)?;
        }
        if ids.is_empty() {
            store.create_segment(1)?;
        } else {
            // Everything recovered is on disk already.
            store.written = store.segs.get(&store.active).map_or(0, |s| s.len);
        }
        store.idx.apply_floor(store.floor);
        // Clean up what recovery found dead or sparse.
        let active = store.active;
        let sparse: Vec<u32> = store
            .segs
            .iter()
            .filter(|(&id, s)| id != active && s.reclaimable())
            .map(|(&id, _)| id)
            .collect();
        store.dirty.extend(sparse);
        store.reclaim_best_effort();
        let st = store.idx.state();
        debug!(
            dir = %store.cfg.dir.display(),
            segments = store.segs.len(),
            msgs = st.msgs,
            first_seq = st.first_seq,
            last_seq = st.last_seq,
            "file store opened"
        );
        Ok(store)
    }

    /// The directory of the segment files.
    pub fn dir(&self) -> &Path {
        &self.cfg.dir
    }

    /// Number of segment files.
    pub fn segment_count(&self) -> usize {
        self.segs.len()
    }

    fn recover_segment(&mut self, id: u32) -> Result<(), StoreError> {
        let path = seg_path(&self.cfg.dir, id);
        let file = OpenOptions::new().read(true).write(true).open(&path)?;
        let buf = fs::read(&path)?;
        let mut seg = Segment::new(file, path.clone());
        seg.len = buf.len() as u64;
        self.segs.insert(id, seg);
        let mut records = Vec::new();
        let cut = walk_records(&path, &buf, |at, n, rec| records.push((at, n, rec)));
        for (at, n, rec) in records {
            self.apply_recovered(id, at, n, rec);
        }
        if let Some(cut) = cut {
            if id == self.active {
                if let Some(seg) = self.segs.get_mut(&id) {
                    seg.file.set_len(cut as u64)?;
                    seg.len = cut as u64;
                }
            }
        }
        Ok(())
    }

    fn apply_recovered(&mut self, id: u32, at: usize, n: usize, rec: Record<'_>) {
        match rec {
            Record::Msg(m) => {
                if let Some(seg) = self.segs.get_mut(&id) {
                    seg.note_msg(m.seq);
                }
                if m.seq <= self.idx.last_seq() || m.seq < self.floor {
                    // Purged, or a duplicate: dead space.
                    self.idx.raise_last(m.seq, m.ts);
                    return;
                }
                let Ok(subject) = std::str::from_utf8(m.subject) else {
                    warn!(
                        segment = id,
                        offset = at,
                        seq = m.seq,
                        "message with a non-UTF-8 subject skipped"
                    );
                    self.idx.raise_last(m.seq, m.ts);
                    return;
                };
                let (Ok(off), Some(len)) = (
                    u32::try_from(at),
                    u32::try_from(n).ok().and_then(NonZeroU32::new),
                ) else {
                    return;
                };
                let subj = self.idx.subjects.intern(subject);
                self.idx.insert(
                    m.seq,
                    FileEntry {
                        seg: id,
                        off,
                        len,
                        subj,
                        ts: m.ts,
                    },
                );
                if let Some(seg) = self.segs.get_mut(&id) {
                    seg.live_msgs += 1;
                    seg.live_bytes += u64::from(len.get());
                }
            }
            Record::Delete { seq } => {
                self.forget(seq);
                // Normally known from the message record; a fallback if that was erased.
                let ts = self.idx.last_ts();
                self.idx.raise_last(seq, ts);
            }
            Record::Marker(mk) => {
                self.idx.raise_last_exact(mk.last_seq, mk.last_ts);
                if mk.floor > self.floor {
                    self.floor = mk.floor;
                    for seq in self.idx.seqs_below(mk.floor) {
                        self.forget(seq);
                    }
                    self.idx.apply_floor(mk.floor);
                }
            }
            Record::Erased => {}
        }
    }

    fn create_segment(&mut self, id: u32) -> Result<(), StoreError> {
        let path = seg_path(&self.cfg.dir, id);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)?;
        self.segs.insert(id, Segment::new(file, path));
        self.active = id;
        self.written = 0;
        self.dir_unsynced = true;
        let marker = Marker {
            floor: self.floor,
            last_seq: self.idx.last_seq(),
            last_ts: self.idx.last_ts(),
        };
        let n = record::encode_marker(&mut self.pending, &marker);
        self.grow_active(n);
        Ok(())
    }

    fn grow_active(&mut self, n: usize) {
        if let Some(seg) = self.segs.get_mut(&self.active) {
            seg.len += n as u64;
        }
    }

    fn active_len(&self) -> u64 {
        self.segs.get(&self.active).map_or(0, |s| s.len)
    }

    /// Writes the buffered records of the active segment to the OS.
    fn write_pending(&mut self) -> Result<(), StoreError> {
        if self.pending.is_empty() {
            self.write_failed = false;
            return Ok(());
        }
        let Some(seg) = self.segs.get(&self.active) else {
            return Err(StoreError::Io(io::Error::other("active segment missing")));
        };
        match write_all_at(&seg.file, &self.pending, self.written) {
            Ok(()) => {
                self.written += self.pending.len() as u64;
                self.pending.clear();
                self.write_failed = false;
                self.unsynced.insert(self.active);
                Ok(())
            }
            Err(err) => {
                // Keep the buffer: it is retried (at the same offset) by the next write.
                self.write_failed = true;
                Err(err.into())
            }
        }
    }

    /// Starts a new active segment (after writing the current one's buffer).
    fn roll(&mut self) -> Result<(), StoreError> {
        self.write_pending()?;
        let old = self.active;
        let id = old
            .checked_add(1)
            .ok_or_else(|| StoreError::Io(io::Error::other("segment ids exhausted")))?;
        self.create_segment(id)?;
        self.dirty.insert(old);
        Ok(())
    }

    /// Rolls if a record of `n` bytes would take the active segment past its size (and it
    /// holds more than its starting marker).
    fn roll_for(&mut self, n: usize) -> Result<(), StoreError> {
        let len = self.active_len();
        if len > record::MARKER_LEN as u64 && len + n as u64 > self.cfg.segment_size {
            self.roll()?;
        }
        Ok(())
    }

    /// Appends a tombstone or marker (best effort on rolling: it may go into a full segment).
    fn append_meta(&mut self, encode: impl FnOnce(&mut Vec<u8>) -> usize, n: usize) {
        if let Err(err) = self.roll_for(n) {
            warn!(dir = %self.cfg.dir.display(), error = %err, "stream segment roll failed");
        }
        let written = encode(&mut self.pending);
        self.grow_active(written);
    }

    /// Removes `seq` from the index and the segment stats (no record written).
    fn forget(&mut self, seq: u64) -> Option<FileEntry> {
        let e = self.idx.remove(seq)?;
        if let Some(seg) = self.segs.get_mut(&e.seg) {
            seg.live_msgs = seg.live_msgs.saturating_sub(1);
            seg.live_bytes = seg.live_bytes.saturating_sub(e.len() as u64);
        }
        if e.seg != self.active {
            self.dirty.insert(e.seg);
        }
        Some(e)
    }

    /// Removes `seq` and writes its tombstone.
    fn remove_msg(&mut self, seq: u64) -> Option<FileEntry> {
        let e = self.forget(seq)?;
        self.append_meta(|out| record::encode_delete(out, seq), record::DELETE_LEN);
        Some(e)
    }

    fn enforce(&mut self, subj: Option<u32>, removed: &mut Vec<u64>) {
        while let Some(seq) = self.idx.next_victim(&self.limits, subj) {
            if self.remove_msg(seq).is_none() {
                break;
            }
            removed.push(seq);
        }
    }

    fn remove_all(&mut self, seqs: &[u64]) -> u64 {
        seqs.iter()
            .filter(|&&s| self.remove_msg(s).is_some())
            .count() as u64
    }

    /// Overwrites the record of `e` with an erased filler.
    fn erase_record(&mut self, e: &FileEntry) -> Result<(), StoreError> {
        // The read-ahead may hold the bytes overwritten here.
        *self.reads.get_mut() = ReadAhead::default();
        let mut filler = Vec::with_capacity(e.len());
        record::encode_erased(&mut filler, e.len())
            .map_err(|err| StoreError::Io(io::Error::other(err)))?;
        let off = u64::from(e.off);
        if e.seg == self.active && off >= self.written {
            let start = (off - self.written) as usize;
            if let Some(dst) = self.pending.get_mut(start..start + filler.len()) {
                dst.copy_from_slice(&filler);
            }
            return Ok(());
        }
        let Some(seg) = self.segs.get(&e.seg) else {
            return Ok(());
        };
        write_all_at(&seg.file, &filler, off)?;
        self.unsynced.insert(e.seg);
        Ok(())
    }

    /// Reads and checks the record of message `seq`.
    fn read_msg(&self, seq: u64) -> Result<Option<StoredMsg>, StoreError> {
        let Some(e) = self.idx.msgs.get(seq) else {
            return Ok(None);
        };
        let Some(seg) = self.segs.get(&e.seg) else {
            return Err(self.corrupt(
                &self.cfg.dir,
                format!("segment {} of seq {seq} missing", e.seg),
            ));
        };
        let off = u64::from(e.off);
        if let Some(m) = self.reads.borrow().last_msg(seq, e.seg, off) {
            return Ok(Some(m));
        }
        let len = e.len();
        let buf = if e.seg == self.active && off >= self.written {
            let start = (off - self.written) as usize;
            match self.pending.get(start..start + len) {
                Some(b) => Bytes::copy_from_slice(b),
                None => return Err(self.corrupt(&seg.path, format!("seq {seq} beyond the buffer"))),
            }
        } else {
            let mut reads = self.reads.borrow_mut();
            let sequential = reads.last_end == Some((e.seg, off));
            reads.last_end = Some((e.seg, off + len as u64));
            match reads.get(e.seg, off, len) {
                Some(b) => b,
                None if sequential => {
                    // In file order: read ahead, up to what was handed to the OS.
                    let limit = if e.seg == self.active {
                        usize::try_from(self.written - off).unwrap_or(usize::MAX)
                    } else {
                        usize::MAX
                    };
                    let mut b = vec![0; READ_AHEAD.min(limit).max(len)];
                    let n = read_at_least(&seg.file, &mut b, off, len)?;
                    b.truncate(n);
                    let chunk = Bytes::from(b);
                    reads.chunk = Some((e.seg, off, chunk.clone()));
                    chunk.slice(..len)
                }
                None => {
                    let mut b = vec![0; len];
                    read_exact_at(&seg.file, &mut b, off)?;
                    Bytes::from(b)
                }
            }
        };
        let m = match record::decode(&buf) {
            Ok((Record::Msg(m), _)) if m.seq == seq => m,
            Ok(_) => {
                return Err(self.corrupt(
                    &seg.path,
                    format!("offset {off}: not the record of seq {seq}"),
                ))
            }
            Err(err) => return Err(self.corrupt(&seg.path, format!("offset {off}: {err}"))),
        };
        let subject = match self.idx.subject_of(e) {
            Some(s) => s.clone(),
            None => std::str::from_utf8(m.subject).unwrap_or_default().into(),
        };
        let msg = StoredMsg {
            seq,
            subject,
            headers: m.headers.map(|h| buf.slice_ref(h)),
            payload: buf.slice_ref(m.payload),
            ts: m.ts,
        };
        self.reads.borrow_mut().last_msg = Some((e.seg, off, msg.clone()));
        Ok(Some(msg))
    }

    fn corrupt(&self, path: &Path, reason: String) -> StoreError {
        StoreError::Corrupt {
            path: path.to_path_buf(),
            reason,
        }
    }

    /// Deletes dead segments and compacts sparse ones (see the module docs).
    fn reclaim(&mut self) -> Result<(), StoreError> {
        let mut candidates = std::mem::take(&mut self.dirty);
        if self.layout_changed {
            candidates.extend(self.tomb_segs.iter().copied());
            self.layout_changed = false;
        }
        candidates.remove(&self.active);
        for id in candidates {
            let Some(seg) = self.segs.get(&id) else {
                continue;
            };
            if seg.reclaimable() {
                if let Err(err) = self.rewrite_segment(id) {
                    // Retry next time.
                    self.dirty.insert(id);
                    return Err(err);
                }
            }
        }
        Ok(())
    }

    /// Rewrites segment `id` with only its live messages and the tombstones still needed,
    /// or deletes it when nothing is left.
    fn rewrite_segment(&mut self, id: u32) -> Result<(), StoreError> {
        // Records move or go: read-ahead offsets into this segment no longer hold.
        *self.reads.get_mut() = ReadAhead::default();
        let Some(seg) = self.segs.get(&id) else {
            return Ok(());
        };
        let path = seg.path.clone();
        let old_len = seg.len;
        let buf = fs::read(&path)?;
        // Physical message ranges of the older segments: a tombstone is needed while its
        // message may still be in one of them.
        let ranges: Vec<(u64, u64)> = self
            .segs
            .range(..id)
            .filter(|(_, s)| s.first_msg != 0)
            .map(|(_, s)| (s.first_msg, s.last_msg))
            .collect();
        let needed = |seq: u64| {
            let i = ranges.partition_point(|&(first, _)| first <= seq);
            i > 0 && seq <= ranges[i - 1].1
        };
        let mut keep: Vec<(usize, usize, Option<u64>)> = Vec::new(); // (offset, len, msg seq)
        walk_records(&path, &buf, |at, n, rec| match rec {
            Record::Msg(m) => {
                let live = self
                    .idx
                    .msgs
                    .get(m.seq)
                    .is_some_and(|e| e.seg == id && e.off as usize == at);
                if live {
                    keep.push((at, n, Some(m.seq)));
                }
            }
            Record::Delete { seq } if needed(seq) => keep.push((at, n, None)),
            _ => {}
        });
        let kept: usize = keep.iter().map(|&(_, n, _)| n).sum();
        let live_msgs = keep.iter().filter(|k| k.2.is_some()).count() as u64;
        if kept == 0 {
            if let Some(seg) = self.segs.remove(&id) {
                drop(seg.file);
            }
            fs::remove_file(&path)?;
            self.tomb_segs.remove(&id);
            self.unsynced.remove(&id);
            self.layout_changed = true;
            self.dir_unsynced = true;
            debug!(path = %path.display(), "emptied stream segment deleted");
            return Ok(());
        }
        if live_msgs == 0 {
            self.tomb_segs.insert(id);
        }
        if (kept as u64) * 2 > old_len {
            // Not worth a rewrite yet.
            if let Some(seg) = self.segs.get_mut(&id) {
                seg.checked_live = seg.live_bytes;
            }
            return Ok(());
        }
        let tmp = path.with_extension("blk.tmp");
        let mut out = Vec::with_capacity(kept);
        let mut moved = Vec::with_capacity(live_msgs as usize);
        for &(at, n, seq) in &keep {
            if let Some(seq) = seq {
                moved.push((seq, out.len()));
            }
            out.extend_from_slice(&buf[at..at + n]);
        }
        {
            let f = File::create(&tmp)?;
            write_all_at(&f, &out, 0)?;
            f.sync_all()?;
        }
        fs::rename(&tmp, &path)?;
        self.dir_unsynced = true;
        let file = OpenOptions::new().read(true).write(true).open(&path)?;
        let mut first_msg = 0;
        let mut last_msg = 0;
        for &(seq, off) in &moved {
            if let Some(e) = self.idx.msgs.get_mut(seq) {
                e.off = off as u32;
            }
            if first_msg == 0 {
                first_msg = seq;
            }
            last_msg = seq;
        }
        if let Some(seg) = self.segs.get_mut(&id) {
            seg.file = file;
            seg.len = out.len() as u64;
            seg.first_msg = first_msg;
            seg.last_msg = last_msg;
            seg.checked_live = u64::MAX;
        }
        self.layout_changed = true;
        debug!(path = %path.display(), from = old_len, to = out.len(), "stream segment compacted");
        Ok(())
    }

    fn reclaim_best_effort(&mut self) {
        if let Err(err) = self.reclaim() {
            warn!(dir = %self.cfg.dir.display(), error = %err, "reclaiming stream segments failed");
        }
    }
}

impl MsgStore for FileStore {
    fn store_msg(
        &mut self,
        subject: &str,
        headers: Option<&[u8]>,
        payload: &[u8],
        ts: u64,
    ) -> Result<StoreOutcome, StoreError> {
        if subject.len() > record::MAX_SUBJECT_LEN {
            return Err(StoreError::SubjectTooLong(subject.len()));
        }
        let headers = headers.filter(|h| !h.is_empty());
        let hdr_len = headers.map_or(0, <[u8]>::len);
        let rec_len = record::msg_len(subject.len(), headers.map(<[u8]>::len), payload.len())
            .ok_or(StoreError::MsgTooLarge)?;
        let len = u32::try_from(rec_len)
            .ok()
            .and_then(NonZeroU32::new)
            .ok_or(StoreError::MsgTooLarge)?;
        let size = file_msg_size(subject.len(), hdr_len, payload.len());
        self.idx.check_store(
            &self.limits,
            subject,
            headers,
            hdr_len + payload.len(),
            size,
        )?;
        // Retry a failed write, bound the buffer, and roll, before taking the message: any
        // failure here leaves the store unchanged.
        if self.write_failed || self.pending.len() >= self.cfg.write_buffer {
            self.write_pending()?;
        }
        self.roll_for(rec_len)?;
        let seq = self.idx.last_seq() + 1;
        let off = u32::try_from(self.active_len())
            .map_err(|_| StoreError::Io(io::Error::other("segment offset overflow")))?;
        let msg = MsgRecord {
            seq,
            ts,
            subject: subject.as_bytes(),
            headers,
            payload,
        };
        let n = record::encode_msg(&mut self.pending, &msg).map_err(|_| StoreError::MsgTooLarge)?;
        debug_assert_eq!(n, rec_len);
        let active = self.active;
        if let Some(seg) = self.segs.get_mut(&active) {
            seg.len += n as u64;
            seg.live_msgs += 1;
            seg.live_bytes += n as u64;
            seg.note_msg(seq);
        }
        let subj = self.idx.subjects.intern(subject);
        self.idx.insert(
            seq,
            FileEntry {
                seg: active,
                off,
                len,
                subj,
                ts,
            },
        );
        let mut removed = Vec::new();
        self.enforce(Some(subj), &mut removed);
        Ok(StoreOutcome { seq, ts, removed })
    }

    fn load(&self, seq: u64) -> Result<Option<StoredMsg>, StoreError> {
        self.read_msg(seq)
    }

    fn load_next(&self, filter: &str, start_seq: u64) -> Result<Option<StoredMsg>, StoreError> {
        match self.idx.next_seq(filter, start_seq) {
            Some(seq) => self.read_msg(seq),
            None => Ok(None),
        }
    }

    fn load_last(&self, filter: &str) -> Result<Option<StoredMsg>, StoreError> {
        match self.idx.last_seq_matching(filter) {
            Some(seq) => self.read_msg(seq),
            None => Ok(None),
        }
    }

    fn remove(&mut self, seq: u64, erase: bool) -> Result<bool, StoreError> {
        let Some(&e) = self.idx.msgs.get(seq) else {
            return Ok(false);
        };
        if erase {
            // The erased record will no longer tell the last sequence and its time: a marker
            // does. It must reach the file before the overwrite, or a crash in between would
            // let the erased message's sequence be handed out again.
            let marker = Marker {
                floor: self.floor,
                last_seq: self.idx.last_seq(),
                last_ts: self.idx.last_ts(),
            };
            self.append_meta(
                |out| record::encode_marker(out, &marker),
                record::MARKER_LEN,
            );
            self.write_pending()?;
            // Overwrite before forgetting: if that fails the message stays.
            self.erase_record(&e)?;
        }
        Ok(self.remove_msg(seq).is_some())
    }

    fn purge(&mut self, req: &PurgeRequest) -> Result<u64, StoreError> {
        let purged = match self.idx.purge_plan(req) {
            PurgePlan::Nothing => return Ok(0),
            PurgePlan::Seqs(seqs) => self.remove_all(&seqs),
            PurgePlan::Below(floor) => {
                let seqs = self.idx.seqs_below(floor);
                for &seq in &seqs {
                    self.forget(seq);
                }
                self.idx.apply_floor(floor);
                self.floor = self.floor.max(floor);
                let marker = Marker {
                    floor: self.floor,
                    last_seq: self.idx.last_seq(),
                    last_ts: self.idx.last_ts(),
                };
                // With nothing left, start afresh (the new segment's first record is the
                // marker) so the whole old active segment can go.
                let mut rolled = false;
                if self.idx.msgs.is_empty() && self.active_len() > record::MARKER_LEN as u64 {
                    match self.roll() {
                        Ok(()) => rolled = true,
                        Err(err) => warn!(
                            dir = %self.cfg.dir.display(),
                            error = %err,
                            "stream segment roll failed"
                        ),
                    }
                }
                if !rolled {
                    self.append_meta(
                        |out| record::encode_marker(out, &marker),
                        record::MARKER_LEN,
                    );
                }
                seqs.len() as u64
            }
        };
        self.reclaim_best_effort();
        Ok(purged)
    }

    fn expire(&mut self, now: u64) -> Result<Vec<(u64, Arc<str>)>, StoreError> {
        let mut removed = Vec::new();
        while let Some(seq) = self.idx.first_expired(&self.limits, now) {
            let subject = self.idx.subject_of_seq(seq);
            match (self.remove_msg(seq), subject) {
                (Some(_), Some(subject)) => removed.push((seq, subject)),
                _ => break,
            }
        }
        Ok(removed)
    }

    fn exempt_from_age(&mut self, seq: u64) {
        self.idx.exempt_from_age(seq);
    }

    fn next_expiry(&self) -> Option<u64> {
        self.idx.next_expiry(&self.limits)
    }

    fn update_limits(&mut self, limits: StoreLimits) -> Result<Vec<u64>, StoreError> {
        // nats-server's order: stream limits first, then per subject.
        self.limits = limits;
        let mut removed = Vec::new();
        self.enforce(None, &mut removed);
        let excess = self.idx.per_subject_excess(&self.limits);
        self.remove_all(&excess);
        removed.extend(excess);
        Ok(removed)
    }

    fn limits(&self) -> &StoreLimits {
        &self.limits
    }

    fn state(&self) -> StoreState {
        self.idx.state()
    }

    fn deleted(&self) -> Vec<u64> {
        self.idx.deleted()
    }

    fn subjects_state(&self, filter: &str) -> BTreeMap<String, u64> {
        self.idx.subjects_state(filter)
    }

    fn num_pending(&self, start_seq: u64, filter: &str) -> u64 {
        self.idx.num_pending(start_seq, filter)
    }

    fn flush(&mut self) -> Result<(), StoreError> {
        self.write_pending()?;
        self.reclaim_best_effort();
        Ok(())
    }

    fn sync(&mut self) -> Result<(), StoreError> {
        self.write_pending()?;
        self.reclaim_best_effort();
        while let Some(&id) = self.unsynced.first() {
            if let Some(seg) = self.segs.get(&id) {
                seg.file.sync_data()?;
            }
            self.unsynced.remove(&id);
        }
        if self.dir_unsynced {
            sync_dir(&self.cfg.dir)?;
            self.dir_unsynced = false;
        }
        Ok(())
    }

    fn delete_all(mut self: Box<Self>) -> Result<(), StoreError> {
        self.pending.clear();
        self.segs.clear();
        match fs::remove_dir_all(&self.cfg.dir) {
            Err(err) if err.kind() != io::ErrorKind::NotFound => Err(err.into()),
            _ => Ok(()),
        }
    }
}

impl Drop for FileStore {
    /// Hands what is still buffered to the OS (best effort; nothing unflushed was
    /// acknowledged).
    fn drop(&mut self) {
        if !self.pending.is_empty() && !self.segs.is_empty() {
            if let Err(err) = self.write_pending() {
                warn!(dir = %self.cfg.dir.display(), error = %err, "stream store: final write failed");
            }
        }
    }
}

#[cfg(test)]
mod layout {
    use super::FileEntry;
    use jsproto::stream::store::index::slot_size;

    /// The per-message index cost the module docs state (a regression here is memory per
    /// stored message).
    #[test]
    fn index_slot_is_24_bytes() {
        assert_eq!(std::mem::size_of::<FileEntry>(), 24);
        assert_eq!(slot_size::<FileEntry>(), 24);
    }
}
