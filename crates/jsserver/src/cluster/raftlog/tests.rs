use std::collections::VecDeque;
use std::fs::OpenOptions;
use std::io::{Read, Write};

use raft::prelude::{ConfState, Entry, EntryType, HardState, Message, Snapshot, SnapshotMetadata};
use raft::{Config, RawNode, Storage, StorageError};

use super::*;

fn entry(index: u64, term: u64, data: &str) -> Entry {
    Entry {
        entry_type: EntryType::EntryNormal,
        term,
        index,
        data: Bytes::copy_from_slice(data.as_bytes()),
        context: Bytes::new(),
        sync_log: false,
        ..Entry::default()
    }
}

fn hs(term: u64, vote: u64, commit: u64) -> HardState {
    HardState {
        term,
        vote,
        commit,
        ..HardState::default()
    }
}

fn entries(range: std::ops::RangeInclusive<u64>, term: u64) -> Vec<Entry> {
    range
        .map(|i| entry(i, term, &format!("e{i}t{term}")))
        .collect()
}

fn voters(ids: &[u64]) -> ConfState {
    ConfState {
        voters: ids.to_vec(),
        ..Default::default()
    }
}

fn snapshot(index: u64, term: u64, cs: ConfState, data: &str) -> Snapshot {
    Snapshot {
        data: Bytes::copy_from_slice(data.as_bytes()),
        metadata: Some(SnapshotMetadata {
            conf_state: Some(cs).into(),
            index,
            term,
            ..SnapshotMetadata::default()
        })
        .into(),
        ..Snapshot::default()
    }
}

/// Everything a log serves, to compare a log with its reopened self.
#[derive(Debug, PartialEq)]
struct Served {
    first: u64,
    last: u64,
    base_term: u64,
    entries: Vec<Entry>,
    hard_state: HardState,
    conf_state: ConfState,
    snapshot: Option<Snapshot>,
    snapshot_data: Option<(u64, String)>,
}

/// The snapshot in force, as its owner reads it: index and data.
fn snapshot_data(log: &RaftLog) -> Option<(u64, String)> {
    let (index, mut reader) = log.snapshot_reader().unwrap()?;
    let mut data = String::new();
    reader.read_to_string(&mut data).unwrap();
    Some((index, data))
}

fn served(log: &RaftLog) -> Served {
    let first = log.first_index().unwrap();
    let last = log.last_index().unwrap();
    let state = log.initial_state().unwrap();
    Served {
        first,
        last,
        base_term: log.term(first - 1).unwrap(),
        entries: log
            .entries(first, last + 1, None, GetEntriesContext::empty(false))
            .unwrap(),
        hard_state: state.hard_state,
        conf_state: state.conf_state,
        snapshot: log.snapshot(0, 0).ok(),
        snapshot_data: snapshot_data(log),
    }
}

/// Reopens the log from its directory and checks it serves the same as before.
fn reopen(log: RaftLog) -> RaftLog {
    let before = served(&log);
    let dir = log.dir().to_path_buf();
    let segment_bytes = log.segment_bytes;
    drop(log);
    let log = RaftLog::open_with_segment_bytes(&dir, segment_bytes).unwrap();
    assert_eq!(served(&log), before, "reopened log differs");
    log
}

fn segment_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<(u64, PathBuf)> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter_map(|p| {
            let n = p
                .file_name()?
                .to_str()?
                .strip_suffix(".log")?
                .parse()
                .ok()?;
            Some((n, p))
        })
        .collect();
    v.sort();
    v.into_iter().map(|(_, p)| p).collect()
}

fn all(log: &RaftLog) -> Vec<Entry> {
    let (first, last) = (log.first_index().unwrap(), log.last_index().unwrap());
    log.entries(first, last + 1, None, GetEntriesContext::empty(false))
        .unwrap()
}

#[test]
fn new_log_is_empty() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = stream_raft_dir(tmp.path(), "$G", "ORDERS");
    let log = RaftLog::open(&dir).unwrap();
    assert!(dir.join("snapshot").is_dir());
    assert_eq!(log.first_index().unwrap(), 1);
    assert_eq!(log.last_index().unwrap(), 0);
    assert_eq!(log.term(0).unwrap(), 0);
    assert_eq!(
        log.initial_state().unwrap().hard_state,
        HardState::default()
    );
    assert!(!log.initial_state().unwrap().initialized());
    assert_eq!(
        log.snapshot(0, 2),
        Err(StorageError::SnapshotTemporarilyUnavailable.into())
    );
    reopen(log);
    assert_eq!(
        meta_raft_dir(tmp.path()),
        tmp.path().join("jetstream/_meta_/raft")
    );
}

#[test]
fn append_and_read_back() {
    let tmp = tempfile::tempdir().unwrap();
    let mut log = RaftLog::open(tmp.path()).unwrap();
    log.set_conf_state(&voters(&[1, 2, 3])).unwrap();
    let mut es = entries(1..=5, 1);
    es[2].context = Bytes::from_static(b"ctx");
    es[3].entry_type = EntryType::EntryConfChangeV2;
    es[4].data = Bytes::new();
    let hs = hs(1, 2, 3);
    log.persist(&es, Some(&hs), None).unwrap();
    assert_eq!(all(&log), es);
    assert_eq!(log.term(4).unwrap(), 1);
    assert_eq!(
        log.entries(2, 4, None, GetEntriesContext::empty(false))
            .unwrap(),
        es[1..3].to_vec()
    );
    assert_eq!(
        log.entries(0, 2, None, GetEntriesContext::empty(false)),
        Err(StorageError::Compacted.into())
    );
    assert_eq!(
        log.entries(1, 7, None, GetEntriesContext::empty(false)),
        Err(StorageError::Unavailable.into())
    );
    assert_eq!(log.term(6), Err(StorageError::Unavailable.into()));
    let state = log.initial_state().unwrap();
    assert_eq!(state.hard_state, hs);
    assert_eq!(state.conf_state, voters(&[1, 2, 3]));
    let log = reopen(log);
    assert_eq!(all(&log), es);
    // One persist with entries and a hard state is one segment append.
    assert_eq!(segment_files(tmp.path()).len(), 1);
}

#[test]
fn max_size_follows_raft_limit_size() {
    let tmp = tempfile::tempdir().unwrap();
    let mut log = RaftLog::open(tmp.path()).unwrap();
    let es = entries(1..=10, 1);
    log.append(&es).unwrap();
    let one = u64::from(protobuf::Message::compute_size(&es[0]));
    for max in [
        0,
        1,
        one,
        one + 1,
        2 * one,
        3 * one + 1,
        100 * one,
        raft::NO_LIMIT,
    ] {
        let mut want = es.clone();
        raft::util::limit_size(&mut want, Some(max));
        let got = log
            .entries(1, 11, max, GetEntriesContext::empty(false))
            .unwrap();
        assert_eq!(got, want, "max_size {max}");
    }
}

#[test]
fn conflicting_suffix_is_replaced() {
    let tmp = tempfile::tempdir().unwrap();
    let mut log = RaftLog::open(tmp.path()).unwrap();
    log.append(&entries(1..=5, 1)).unwrap();
    // A new leader's entries from index 3 on replace 3..=5.
    log.append(&entries(3..=4, 2)).unwrap();
    let mut want = entries(1..=2, 1);
    want.extend(entries(3..=4, 2));
    assert_eq!(all(&log), want);
    assert_eq!(log.last_index().unwrap(), 4);
    assert_eq!(log.term(3).unwrap(), 2);
    let mut log = reopen(log);
    assert_eq!(all(&log), want);
    // Appending after the replaced suffix continues from it.
    log.append(&entries(5..=6, 2)).unwrap();
    want.extend(entries(5..=6, 2));
    let log = reopen(log);
    assert_eq!(all(&log), want);
}

#[test]
fn invalid_appends_are_refused_and_change_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let mut log = RaftLog::open(tmp.path()).unwrap();
    log.append(&entries(1..=3, 1)).unwrap();
    let before = served(&log);
    // A gap after the last index.
    assert!(matches!(
        log.append(&entries(5..=6, 1)),
        Err(LogError::Invalid(_))
    ));
    // Not consecutive.
    let mut es = entries(4..=5, 1);
    es[1].index = 7;
    assert!(matches!(log.append(&es), Err(LogError::Invalid(_))));
    // Index 0.
    assert!(matches!(
        log.append(&[entry(0, 1, "x")]),
        Err(LogError::Invalid(_))
    ));
    assert_eq!(served(&log), before);
    log.apply_snapshot(&snapshot(2, 1, voters(&[1]), "s"))
        .unwrap();
    // At or below the snapshot.
    assert!(matches!(
        log.append(&entries(2..=4, 2)),
        Err(LogError::Invalid(_))
    ));
    // An older snapshot.
    assert!(matches!(
        log.apply_snapshot(&snapshot(1, 1, voters(&[1]), "s")),
        Err(LogError::Invalid(_))
    ));
    reopen(log);
}

#[test]
fn hard_state_and_conf_state_survive_a_restart() {
    let tmp = tempfile::tempdir().unwrap();
    let mut log = RaftLog::open(tmp.path()).unwrap();
    for term in 1..=5 {
        log.set_hard_state(&hs(term, term % 3, 0)).unwrap();
    }
    let cs = ConfState {
        voters: vec![1, 2, 3],
        learners: vec![4],
        voters_outgoing: vec![1, 2, 5],
        learners_next: vec![6],
        auto_leave: true,
        ..ConfState::default()
    };
    log.set_conf_state(&cs).unwrap();
    let log = reopen(log);
    let state = log.initial_state().unwrap();
    assert_eq!(state.hard_state, hs(5, 2, 0));
    assert_eq!(state.conf_state, cs);
}

#[test]
fn zeros_are_written_ahead_of_the_records_and_read_back_as_their_end() {
    let tmp = tempfile::tempdir().unwrap();
    let mut log = RaftLog::open(tmp.path()).unwrap();
    log.append(&entries(1..=3, 1)).unwrap();
    let seg = segment_files(tmp.path()).pop().unwrap();
    let size = fs::metadata(&seg).unwrap().len();
    assert!(size >= PREALLOC_MIN && size % PREALLOC_MIN == 0, "{size}");
    assert!(records_end(&log) < size);
    // Writes land on the zeros: the file does not grow until they are used up.
    log.persist(&entries(4..=5, 1), Some(&hs(1, 1, 3)), None)
        .unwrap();
    assert_eq!(fs::metadata(&seg).unwrap().len(), size);
    let mut log = reopen(log);
    log.append(&entries(6..=6, 1)).unwrap();
    let big = "x".repeat(PREALLOC_MAX as usize);
    log.append(&[entry(7, 1, &big)]).unwrap();
    assert!(fs::metadata(&seg).unwrap().len() > records_end(&log));
    let log = reopen(log);
    assert_eq!(log.last_index().unwrap(), 7);
    assert_eq!(log.initial_state().unwrap().hard_state, hs(1, 1, 3));

    // A closed segment is cut back to its records.
    let tmp = tempfile::tempdir().unwrap();
    let mut log = RaftLog::open_with_segment_bytes(tmp.path(), 100).unwrap();
    for i in 1..=4 {
        log.append(&[entry(i, 1, "0123456789012345678901234567890123456789")])
            .unwrap();
    }
    let segs = segment_files(tmp.path());
    assert!(segs.len() >= 2);
    for closed in &segs[..segs.len() - 1] {
        assert!(fs::metadata(closed).unwrap().len() < PREALLOC_MIN);
    }
    reopen(log);
}

#[test]
fn the_entries_kept_in_memory_serve_what_the_files_hold() {
    let tmp = tempfile::tempdir().unwrap();
    let mut log = RaftLog::open(tmp.path()).unwrap();
    // Bigger than the tail cache together: the oldest are read back from the file.
    let big = |i: u64, t: u64| entry(i, t, &format!("{i}{}", "x".repeat(TAIL_CACHE_BYTES / 3)));
    log.append(&[big(1, 1), big(2, 1), big(3, 1), big(4, 1)])
        .unwrap();
    assert!(log.tail.first > 1 && log.tail.bytes <= TAIL_CACHE_BYTES);
    // A conflicting suffix from inside the cached entries, then one from before them.
    log.append(&entries(4..=6, 2)).unwrap();
    let mut log = reopen(log);
    log.append(&entries(7..=7, 2)).unwrap();
    log.append(&entries(2..=3, 3)).unwrap();
    assert_eq!(log.last_index().unwrap(), 3);
    let mut log = reopen(log);
    log.append(&entries(4..=9, 3)).unwrap();
    log.apply_snapshot(&snapshot(5, 3, voters(&[1]), "s"))
        .unwrap();
    assert_eq!(log.tail.first, 6);
    let log = reopen(log);
    assert_eq!(all(&log), entries(6..=9, 3));
}

#[test]
fn a_snapshots_data_file_is_received_in_parts_and_checked() {
    let tmp = tempfile::tempdir().unwrap();
    let leader_dir = tmp.path().join("leader");
    let mut leader = RaftLog::open(&leader_dir).unwrap();
    leader.append(&entries(1..=5, 1)).unwrap();
    let data: String = (0..5000).map(|i| format!("{i},")).collect();
    leader
        .write_snapshot(5, 1, voters(&[1, 2]), &mut |w| w.write_all(data.as_bytes()))
        .unwrap();
    let snap = leader.snapshot(5, 2).unwrap();
    let (len, crc) = parse_descriptor(&snap.data).unwrap();
    let (path, file_len) = leader.snapshot_data_file().unwrap();
    assert_eq!(file_len, len);
    let bytes = fs::read(&path).unwrap();

    let mut f = RaftLog::open(tmp.path().join("follower")).unwrap();
    // Nothing came: refused, and the log goes on.
    assert!(matches!(f.apply_snapshot(&snap), Err(LogError::Invalid(_))));
    assert!(!f.is_failed());
    // A part that does not follow drops the transfer.
    f.receive_part(0, &bytes[..100]).unwrap();
    f.receive_part(150, &bytes[150..]).unwrap();
    assert!(!f.incoming_matches(len, crc));
    // Sent again from the start, whole.
    for (i, part) in bytes.chunks(1000).enumerate() {
        f.receive_part(i as u64 * 1000, part).unwrap();
    }
    assert!(f.incoming_matches(len, crc));
    f.apply_snapshot(&snap).unwrap();
    assert_eq!(snapshot_data(&f), Some((5, data.clone())));
    let f = reopen(f);
    assert_eq!(f.first_index().unwrap(), 6);

    // A data file changed on disk fails the read at its end; one missing fails the open.
    let (path, _) = f.snapshot_data_file().unwrap();
    drop(f);
    let mut damaged = fs::read(&path).unwrap();
    damaged[10] ^= 1;
    fs::write(&path, &damaged).unwrap();
    let f = RaftLog::open(tmp.path().join("follower")).unwrap();
    let (_, mut reader) = f.snapshot_reader().unwrap().unwrap();
    let mut sink = Vec::new();
    assert!(reader.read_to_end(&mut sink).is_err());
    drop(f);
    fs::remove_file(&path).unwrap();
    assert!(matches!(
        RaftLog::open(tmp.path().join("follower")),
        Err(LogError::Corrupt { .. })
    ));
}

#[test]
fn a_next_transfers_part_before_the_snapshot_is_applied_leaves_it_whole() {
    // The snapshot message is taken (step), then, before its Ready, the first part of the
    // leader's next snapshot arrives in the same batch of commands.
    let tmp = tempfile::tempdir().unwrap();
    let mut leader = RaftLog::open(tmp.path().join("leader")).unwrap();
    leader.set_conf_state(&voters(&[1, 2])).unwrap();
    leader.append(&entries(1..=5, 1)).unwrap();
    leader
        .write_snapshot(5, 1, voters(&[1, 2]), &mut |w| w.write_all(b"state at 5"))
        .unwrap();
    let snap = leader.snapshot(5, 2).unwrap();
    let bytes = fs::read(leader.snapshot_data_file().unwrap().0).unwrap();
    let mut f = start(2, &tmp.path().join("follower"));
    let raw = f.raw.as_mut().unwrap();
    raw.mut_store().receive_part(0, &bytes).unwrap();
    let (len, crc) = parse_descriptor(&snap.data).unwrap();
    assert!(raw.mut_store().accept_incoming(len, crc)); // what RaftGroup::step does
    let mut m = Message::default();
    m.set_msg_type(raft::prelude::MessageType::MsgSnapshot);
    m.from = 1;
    m.to = 2;
    m.term = 1;
    m.set_snapshot(snap);
    raw.step(m).unwrap();
    raw.mut_store().receive_part(0, b"next snapshot").unwrap();
    let rd = raw.ready();
    assert!(!rd.snapshot().is_empty());
    raw.mut_store()
        .apply_snapshot(&rd.snapshot().clone())
        .unwrap();
    assert_eq!(
        snapshot_data(raw.store()),
        Some((5, "state at 5".to_string()))
    );
}

#[test]
fn a_commit_index_written_last_is_fsynced_before_its_segment_is_closed() {
    // A record torn in a closed segment refuses the open: the unsynced commit index at the
    // end of a segment must be durable before the next one starts.
    let tmp = tempfile::tempdir().unwrap();
    let mut log = RaftLog::open_with_segment_bytes(tmp.path(), 100).unwrap();
    log.persist(&entries(1..=3, 1), Some(&hs(1, 1, 0)), None)
        .unwrap();
    log.set_hard_state(&hs(1, 1, 3)).unwrap(); // commit only: not fsynced
    assert!(log.unsynced);
    log.append(&entries(4..=4, 1)).unwrap(); // rolls over: the closed one is fsynced
    assert_eq!(segment_files(tmp.path()).len(), 2);
    assert!(!log.unsynced);
    reopen(log);
}

#[test]
fn a_failed_snapshot_writer_changes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let mut log = RaftLog::open(tmp.path()).unwrap();
    log.append(&entries(1..=5, 1)).unwrap();
    log.write_snapshot(2, 1, voters(&[1]), &mut |w| w.write_all(b"two"))
        .unwrap();
    let err = log.write_snapshot(4, 1, voters(&[1]), &mut |w| {
        w.write_all(b"half")?;
        Err(std::io::Error::other("the store failed"))
    });
    assert!(matches!(err, Err(LogError::Io { .. })));
    assert!(!log.is_failed());
    assert_eq!(snapshot_data(&log), Some((2, "two".into())));
    assert_eq!(log.first_index().unwrap(), 3);
    let log = reopen(log);
    // Only the data file in force is left.
    let data_files = fs::read_dir(tmp.path().join("snapshot"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with("data")
        })
        .count();
    assert_eq!(data_files, 1);
    drop(log);
}

#[test]
fn a_snapshot_written_with_its_data_inline_is_still_read() {
    // As builds before data files wrote it: one record holding meta and data.
    let tmp = tempfile::tempdir().unwrap();
    let mut log = RaftLog::open(tmp.path()).unwrap();
    log.append(&entries(1..=5, 1)).unwrap();
    log.write_snapshot(3, 1, voters(&[1, 2]), &mut |w| w.write_all(b"new"))
        .unwrap();
    drop(log);
    let meta = SnapMeta {
        index: 3,
        term: 1,
        conf_state: voters(&[1, 2]),
        data: SnapData::Inline,
    };
    let mut buf = Vec::new();
    encode_snapshot(&mut buf, &meta, b"old inline state").unwrap();
    fs::write(tmp.path().join("snapshot/snapshot"), &buf).unwrap();
    let log = RaftLog::open(tmp.path()).unwrap();
    assert_eq!(snapshot_data(&log), Some((3, "old inline state".into())));
    assert_eq!(&log.snapshot(3, 2).unwrap().data[..], b"old inline state");
    assert_eq!(log.snapshot_data_file(), None);
    reopen(log);
}

#[test]
fn a_commit_index_below_the_snapshot_is_read_back_as_the_snapshots() {
    // The commit index is written without an fsync: a crash can leave an older one after
    // a snapshot, which raft-rs would refuse to start from.
    let tmp = tempfile::tempdir().unwrap();
    let mut log = RaftLog::open(tmp.path()).unwrap();
    log.append(&entries(1..=5, 1)).unwrap();
    log.apply_snapshot(&snapshot(4, 1, voters(&[1]), "s"))
        .unwrap();
    log.set_hard_state(&hs(1, 1, 2)).unwrap();
    let log = reopen(log);
    assert_eq!(log.initial_state().unwrap().hard_state, hs(1, 1, 4));
}

#[test]
fn compaction_to_a_snapshot_keeps_the_entries_after_it() {
    let tmp = tempfile::tempdir().unwrap();
    let mut log = RaftLog::open_with_segment_bytes(tmp.path(), 60).unwrap();
    log.set_conf_state(&voters(&[1, 2, 3])).unwrap();
    for i in 1..=10 {
        log.append(&[entry(i, 1, &format!("e{i}"))]).unwrap();
    }
    log.set_hard_state(&hs(1, 1, 8)).unwrap();
    assert!(segment_files(tmp.path()).len() > 2, "segments rolled over");
    log.apply_snapshot(&snapshot(6, 1, voters(&[1, 2, 3]), "state@6"))
        .unwrap();
    assert_eq!(log.first_index().unwrap(), 7);
    assert_eq!(log.last_index().unwrap(), 10);
    assert_eq!(log.term(6).unwrap(), 1);
    assert_eq!(log.term(5), Err(StorageError::Compacted.into()));
    assert_eq!(
        log.entries(6, 8, None, GetEntriesContext::empty(false)),
        Err(StorageError::Compacted.into())
    );
    assert_eq!(
        all(&log),
        (7..=10)
            .map(|i| entry(i, 1, &format!("e{i}")))
            .collect::<Vec<_>>()
    );
    assert_eq!(log.hard_state().commit, 8);
    let snap = log.snapshot(6, 2).unwrap();
    assert_eq!(
        snap.get_metadata(),
        snapshot(6, 1, voters(&[1, 2, 3]), "state@6").get_metadata()
    );
    // The data is in a file: the message carries its length and CRC.
    let (len, crc) = parse_descriptor(&snap.data).unwrap();
    assert_eq!(len, "state@6".len() as u64);
    assert_eq!(crc, crc32fast::hash(b"state@6"));
    assert_eq!(snapshot_data(&log), Some((6, "state@6".into())));
    assert_eq!(
        log.snapshot(7, 2),
        Err(StorageError::SnapshotTemporarilyUnavailable.into())
    );
    // The old segments are gone: one rewritten segment remains.
    assert_eq!(segment_files(tmp.path()).len(), 1);
    let mut log = reopen(log);
    // Appending goes on after the kept entries, and a later compaction past them all.
    log.append(&entries(11..=12, 2)).unwrap();
    let mut log = reopen(log);
    log.apply_snapshot(&snapshot(12, 2, voters(&[1, 2, 3]), "state@12"))
        .unwrap();
    assert_eq!(log.first_index().unwrap(), 13);
    assert_eq!(log.last_index().unwrap(), 12);
    assert_eq!(log.hard_state().commit, 12);
    assert_eq!(log.hard_state().term, 2);
    reopen(log);
}

#[test]
fn a_leaders_snapshot_that_does_not_match_drops_the_log() {
    let tmp = tempfile::tempdir().unwrap();
    let mut log = RaftLog::open(tmp.path()).unwrap();
    log.set_conf_state(&voters(&[1, 2, 3])).unwrap();
    log.persist(&entries(1..=5, 1), Some(&hs(1, 1, 2)), None)
        .unwrap();
    // Index 4 is in the log, but with term 1, not 3: everything goes.
    log.apply_snapshot(&snapshot(4, 3, voters(&[1, 2, 3, 4]), "leader"))
        .unwrap();
    assert_eq!(log.first_index().unwrap(), 5);
    assert_eq!(log.last_index().unwrap(), 4);
    assert_eq!(log.term(4).unwrap(), 3);
    assert_eq!(log.hard_state(), &hs(3, 1, 4));
    assert_eq!(log.conf_state(), &voters(&[1, 2, 3, 4]));
    let mut log = reopen(log);
    log.append(&entries(5..=6, 3)).unwrap();
    reopen(log);
}

/// Opens a log whose last segment holds entries 1..=5 (two appends), returns it closed,
/// with its file cut to its records (no zeros ahead of them).
fn log_with_two_batches(dir: &Path) -> PathBuf {
    let mut log = RaftLog::open(dir).unwrap();
    log.append(&entries(1..=3, 1)).unwrap();
    log.append(&entries(4..=5, 1)).unwrap();
    let records = records_end(&log);
    drop(log);
    let seg = segment_files(dir).pop().unwrap();
    OpenOptions::new()
        .write(true)
        .open(&seg)
        .unwrap()
        .set_len(records)
        .unwrap();
    seg
}

/// Where the active segment's records end (the zeros written ahead of them start there).
fn records_end(log: &RaftLog) -> u64 {
    log.segments.last().unwrap().len
}

#[test]
fn a_torn_tail_is_cut_off_at_the_last_whole_record() {
    let tmp = tempfile::tempdir().unwrap();
    let seg = log_with_two_batches(tmp.path());
    let len = fs::metadata(&seg).unwrap().len();
    let last_record = (HEADER_LEN + 8 + 8 + 4 + 4 + "e5t1".len() + CRC_LEN) as u64;
    // Every cut inside the last record loses just that record.
    for cut in [
        len - 1,
        len - 5,
        len - last_record + 3,
        len - last_record + 1,
    ] {
        let f = OpenOptions::new().write(true).open(&seg).unwrap();
        f.set_len(cut).unwrap();
        drop(f);
        let mut log = RaftLog::open(tmp.path()).unwrap();
        assert_eq!(log.last_index().unwrap(), 4, "cut at {cut}");
        assert_eq!(all(&log), entries(1..=4, 1));
        assert_eq!(fs::metadata(&seg).unwrap().len(), len - last_record);
        // The log goes on from there, and is whole again.
        log.append(&entries(5..=5, 1)).unwrap();
        assert_eq!(records_end(&log), len);
        let log = reopen(log);
        assert_eq!(all(&log), entries(1..=5, 1));
        drop(log);
        OpenOptions::new()
            .write(true)
            .open(&seg)
            .unwrap()
            .set_len(len)
            .unwrap();
    }
}

#[test]
fn garbage_after_the_last_record_is_cut_off() {
    let tmp = tempfile::tempdir().unwrap();
    let seg = log_with_two_batches(tmp.path());
    let len = fs::metadata(&seg).unwrap().len();
    let garbage: [&[u8]; 5] = [
        &[0],
        &[0; 64],
        &[0xff; 3],
        &[0xff, 0xff, 0xff, 0x7f, 1, 2, 3],
        b"\x20\x00\x00\x00\x01 not a record, its CRC is wrong",
    ];
    for g in garbage {
        OpenOptions::new()
            .append(true)
            .open(&seg)
            .unwrap()
            .write_all(g)
            .unwrap();
        let log = RaftLog::open(tmp.path()).unwrap();
        assert_eq!(all(&log), entries(1..=5, 1), "garbage {g:?}");
        assert_eq!(records_end(&log), len);
        if g.iter().all(|&b| b == 0) {
            // Zeros after the records are where they end, as the zeros written ahead.
            assert!(fs::metadata(&seg).unwrap().len() > len);
        } else {
            assert_eq!(fs::metadata(&seg).unwrap().len(), len);
        }
        reopen(log);
    }
}

#[test]
fn a_bad_record_in_the_middle_of_the_last_segment_ends_the_log_there() {
    let tmp = tempfile::tempdir().unwrap();
    let seg = log_with_two_batches(tmp.path());
    let mut bytes = fs::read(&seg).unwrap();
    // Flip a byte in the payload of entry 4 (the first record of the second batch).
    let first_batch: usize = (1..=3)
        .map(|i| HEADER_LEN + 24 + format!("e{i}t1").len() + CRC_LEN)
        .sum();
    bytes[first_batch + HEADER_LEN + 25] ^= 0x40;
    fs::write(&seg, &bytes).unwrap();
    let log = RaftLog::open(tmp.path()).unwrap();
    assert_eq!(all(&log), entries(1..=3, 1));
    reopen(log);
}

#[test]
fn a_bad_record_before_the_last_segment_refuses_to_open() {
    let tmp = tempfile::tempdir().unwrap();
    let mut log = RaftLog::open_with_segment_bytes(tmp.path(), 100).unwrap();
    for i in 1..=6 {
        log.append(&[entry(i, 1, "0123456789012345678901234567890123456789")])
            .unwrap();
    }
    drop(log);
    let segs = segment_files(tmp.path());
    assert!(segs.len() >= 2);
    let mut bytes = fs::read(&segs[0]).unwrap();
    bytes[HEADER_LEN + 30] ^= 1;
    fs::write(&segs[0], &bytes).unwrap();
    match RaftLog::open(tmp.path()) {
        Err(LogError::Corrupt { path, offset, .. }) => {
            assert_eq!(path, segs[0]);
            assert_eq!(offset, 0);
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
    // A whole record cut short there is corruption too, not a torn tail.
    let f = OpenOptions::new().write(true).open(&segs[0]).unwrap();
    f.set_len(10).unwrap();
    assert!(matches!(
        RaftLog::open(tmp.path()),
        Err(LogError::Corrupt { .. })
    ));
}

#[test]
fn segments_roll_over_and_read_back_across_them() {
    let tmp = tempfile::tempdir().unwrap();
    let mut log = RaftLog::open_with_segment_bytes(tmp.path(), 150).unwrap();
    let mut want = Vec::new();
    for b in 0..10u64 {
        let es = entries(b * 3 + 1..=b * 3 + 3, 1);
        log.append(&es).unwrap();
        want.extend(es);
    }
    // A suffix replaced across a segment boundary.
    log.append(&entries(5..=8, 2)).unwrap();
    want.truncate(4);
    want.extend(entries(5..=8, 2));
    assert!(segment_files(tmp.path()).len() >= 5);
    assert_eq!(all(&log), want);
    let log = reopen(log);
    assert_eq!(all(&log), want);
}

#[test]
fn a_crash_inside_apply_snapshot_is_finished_at_open() {
    let tmp = tempfile::tempdir().unwrap();
    let mut log = RaftLog::open(tmp.path()).unwrap();
    log.set_conf_state(&voters(&[1, 2, 3])).unwrap();
    log.persist(&entries(1..=10, 1), Some(&hs(1, 1, 9)), None)
        .unwrap();
    let old = segment_files(tmp.path());
    let saved: Vec<(PathBuf, Vec<u8>)> = old
        .iter()
        .map(|p| (p.clone(), fs::read(p).unwrap()))
        .collect();
    log.apply_snapshot(&snapshot(7, 1, voters(&[1, 2, 3]), "state@7"))
        .unwrap();
    let after = served(&log);
    let new = segment_files(tmp.path());
    drop(log);

    // Crash after the rewritten segment was renamed in, before the old ones were deleted.
    for (p, bytes) in &saved {
        fs::write(p, bytes).unwrap();
    }
    let log = RaftLog::open(tmp.path()).unwrap();
    assert_eq!(served(&log), after);
    assert_eq!(segment_files(tmp.path()), new);
    drop(log);

    // Crash after the snapshot file was written, before the log was rewritten: the new
    // segment is still a temporary file (deleted at open), the old ones are in place.
    for p in &new {
        fs::rename(p, p.with_extension("log.tmp")).unwrap();
    }
    for (p, bytes) in &saved {
        fs::write(p, bytes).unwrap();
    }
    let log = RaftLog::open(tmp.path()).unwrap();
    assert_eq!(served(&log), after);
    assert!(!new[0].with_extension("log.tmp").exists());
    reopen(log);

    // A snapshot file being written when the crash came is not in force.
    fs::write(tmp.path().join("snapshot/snapshot.tmp"), b"half").unwrap();
    let log = RaftLog::open(tmp.path()).unwrap();
    assert_eq!(served(&log), after);
    assert!(!tmp.path().join("snapshot/snapshot.tmp").exists());
}

#[test]
fn a_missing_or_damaged_snapshot_refuses_to_open() {
    let tmp = tempfile::tempdir().unwrap();
    let mut log = RaftLog::open(tmp.path()).unwrap();
    log.append(&entries(1..=4, 1)).unwrap();
    log.apply_snapshot(&snapshot(3, 1, voters(&[1]), "s"))
        .unwrap();
    drop(log);
    let snap = tmp.path().join("snapshot/snapshot");
    let mut bytes = fs::read(&snap).unwrap();
    let n = bytes.len();
    bytes[n - 5] ^= 1;
    fs::write(&snap, &bytes).unwrap();
    assert!(matches!(
        RaftLog::open(tmp.path()),
        Err(LogError::Corrupt { .. })
    ));
    fs::remove_file(&snap).unwrap();
    assert!(matches!(
        RaftLog::open(tmp.path()),
        Err(LogError::Corrupt { .. })
    ));
}

#[test]
fn reopening_after_every_kind_of_write_serves_the_same() {
    let tmp = tempfile::tempdir().unwrap();
    let mut log = RaftLog::open_with_segment_bytes(tmp.path(), 256).unwrap();
    log.set_conf_state(&voters(&[1, 2, 3])).unwrap();
    log = reopen(log);
    log.set_hard_state(&hs(1, 1, 0)).unwrap();
    log = reopen(log);
    log.append(&entries(1..=4, 1)).unwrap();
    log = reopen(log);
    log.persist(
        &entries(5..=6, 1),
        Some(&hs(1, 1, 5)),
        Some(&voters(&[1, 2, 3, 4])),
    )
    .unwrap();
    log = reopen(log);
    log.append(&entries(4..=5, 2)).unwrap();
    log = reopen(log);
    log.apply_snapshot(&snapshot(4, 2, voters(&[1, 2, 3, 4]), "s4"))
        .unwrap();
    log = reopen(log);
    for i in 6..=20 {
        log.append(&[entry(i, 2, "some data to fill a few segments")])
            .unwrap();
    }
    log = reopen(log);
    log.apply_snapshot(&snapshot(30, 4, voters(&[2, 3]), "s30"))
        .unwrap();
    log = reopen(log);
    log.persist(&entries(31..=31, 4), None, None).unwrap();
    log = reopen(log);
    assert_eq!(log.first_index().unwrap(), 31);
    assert_eq!(log.last_index().unwrap(), 31);
    assert_eq!(log.conf_state(), &voters(&[2, 3]));
}

// ---- three raft-rs nodes over in-memory queues ----

/// One node: its RawNode (None while "down") and what it applied (the test's state machine:
/// the data of every normal entry, in order).
struct Node {
    id: u64,
    dir: PathBuf,
    raw: Option<RawNode<RaftLog>>,
    applied: Vec<String>,
    applied_index: u64,
}

fn logger() -> slog::Logger {
    slog::Logger::root(slog::Discard, slog::o!())
}

fn start(id: u64, dir: &Path) -> Node {
    let mut log = RaftLog::open(dir).unwrap();
    if log.conf_state().voters.is_empty() {
        log.set_conf_state(&voters(&[1, 2, 3])).unwrap();
    }
    let cfg = Config {
        id,
        election_tick: 10,
        heartbeat_tick: 2,
        ..Default::default()
    };
    cfg.validate().unwrap();
    let raw = RawNode::new(&cfg, log, &logger()).unwrap();
    Node {
        id,
        dir: dir.to_path_buf(),
        raw: Some(raw),
        applied: Vec::new(),
        applied_index: 0,
    }
}

fn apply(applied: &mut Vec<String>, applied_index: &mut u64, committed: Vec<Entry>) {
    for e in committed {
        assert_eq!(e.index, *applied_index + 1, "applied in order");
        *applied_index = e.index;
        if e.entry_type == EntryType::EntryNormal && !e.data.is_empty() {
            applied.push(String::from_utf8(e.data.to_vec()).unwrap());
        }
    }
}

/// Handles one Ready of `node` as the owner thread will: snapshot, committed entries,
/// persist (one write and fsync), then the messages, then advance.
fn handle_ready(node: &mut Node, out: &mut VecDeque<Message>) -> bool {
    let Node {
        raw,
        applied,
        applied_index,
        ..
    } = node;
    let Some(raw) = raw.as_mut() else {
        return false;
    };
    if !raw.has_ready() {
        return false;
    }
    let mut rd = raw.ready();
    if !rd.snapshot().is_empty() {
        let snap = rd.snapshot().clone();
        raw.mut_store().apply_snapshot(&snap).unwrap();
        let (_, data) = snapshot_data(raw.store()).unwrap();
        *applied = serde_json::from_str(&data).unwrap();
        *applied_index = snap.metadata.as_ref().unwrap().index;
    }
    apply(applied, applied_index, rd.take_committed_entries());
    raw.mut_store()
        .persist(rd.entries(), rd.hs(), None)
        .unwrap();
    out.extend(rd.take_messages());
    out.extend(rd.take_persisted_messages());
    let mut light = raw.advance(rd);
    if let Some(commit) = light.commit_index() {
        let mut hs = raw.store().hard_state().clone();
        hs.commit = commit;
        raw.mut_store().set_hard_state(&hs).unwrap();
    }
    out.extend(light.take_messages());
    apply(applied, applied_index, light.take_committed_entries());
    raw.advance_apply();
    true
}

/// Runs every node's Ready and delivers every message until nothing moves. Messages to a
/// node that is down are lost.
fn run(nodes: &mut [Node]) {
    let mut queue = VecDeque::new();
    for _ in 0..10_000 {
        let mut moved = false;
        for n in nodes.iter_mut() {
            moved |= handle_ready(n, &mut queue);
        }
        while let Some(m) = queue.pop_front() {
            moved = true;
            // A snapshot's data file goes first, as the routes send it (`RAFTS` parts).
            let file = parse_descriptor(&m.get_snapshot().data)
                .and_then(|_| nodes[(m.from - 1) as usize].raw.as_ref())
                .and_then(|raw| raw.store().snapshot_data_file());
            if let Some((path, _)) = file {
                let bytes = fs::read(path).unwrap();
                if let Some(raw) = nodes[(m.to - 1) as usize].raw.as_mut() {
                    for (i, part) in bytes.chunks(7).enumerate() {
                        raw.mut_store().receive_part(i as u64 * 7, part).unwrap();
                    }
                }
            }
            let to = &mut nodes[(m.to - 1) as usize];
            if let Some(raw) = to.raw.as_mut() {
                let _ = raw.step(m);
            }
        }
        if !moved {
            return;
        }
    }
    panic!("the nodes never settled");
}

fn leader_of(nodes: &[Node]) -> Vec<u64> {
    nodes
        .iter()
        .filter(|n| {
            n.raw
                .as_ref()
                .is_some_and(|r| r.raft.state == raft::StateRole::Leader)
        })
        .map(|n| n.id)
        .collect()
}

#[test]
fn three_raft_nodes_elect_commit_restart_and_catch_up_from_a_snapshot() {
    let tmp = tempfile::tempdir().unwrap();
    let mut nodes: Vec<Node> = (1..=3)
        .map(|id| {
            start(
                id,
                &stream_raft_dir(tmp.path(), &format!("n{id}"), "ORDERS"),
            )
        })
        .collect();

    nodes[0].raw.as_mut().unwrap().campaign().unwrap();
    run(&mut nodes);
    assert_eq!(leader_of(&nodes), vec![1]);

    let propose = |nodes: &mut Vec<Node>, range: std::ops::Range<u32>| {
        for i in range {
            nodes[0]
                .raw
                .as_mut()
                .unwrap()
                .propose(Vec::new(), format!("order-{i}").into_bytes())
                .unwrap();
        }
        run(nodes);
    };
    let orders =
        |range: std::ops::Range<u32>| range.map(|i| format!("order-{i}")).collect::<Vec<_>>();

    propose(&mut nodes, 0..10);
    for n in &nodes {
        assert_eq!(n.applied, orders(0..10), "node {}", n.id);
    }

    // Node 3 goes down; 1 and 2 are a majority and go on committing.
    nodes[2].raw = None;
    propose(&mut nodes, 10..20);
    assert_eq!(nodes[1].applied, orders(0..20));

    // Node 2 restarts from its directory: it replays its committed log.
    nodes[1] = start(2, &nodes[1].dir.clone());
    run(&mut nodes);
    for _ in 0..4 {
        nodes[0].raw.as_mut().unwrap().tick();
        run(&mut nodes);
    }
    assert_eq!(nodes[1].applied, orders(0..20));

    // The leader compacts its log to a snapshot of what it applied: node 3 can only catch
    // up through the snapshot.
    let leader = &mut nodes[0];
    let index = leader.applied_index;
    let raw = leader.raw.as_mut().unwrap();
    let term = raw.store().term(index).unwrap();
    let cs = raw.store().conf_state().clone();
    let data = serde_json::to_string(&leader.applied).unwrap();
    raw.mut_store()
        .apply_snapshot(&snapshot(index, term, cs, &data))
        .unwrap();
    assert_eq!(raw.store().first_index().unwrap(), index + 1);

    // Node 3 restarts from its directory, behind the leader's first index.
    let dir3 = nodes[2].dir.clone();
    nodes[2] = start(3, &dir3);
    run(&mut nodes);
    for _ in 0..4 {
        nodes[0].raw.as_mut().unwrap().tick();
        run(&mut nodes);
    }
    propose(&mut nodes, 20..25);
    for n in &nodes {
        assert_eq!(n.applied, orders(0..25), "node {}", n.id);
    }
    let store3 = nodes[2].raw.as_ref().unwrap().store();
    assert_eq!(
        store3.snapshot_index(),
        index,
        "node 3 installed the snapshot"
    );
    let leader_last = nodes[0].raw.as_ref().unwrap().store().last_index().unwrap();
    assert_eq!(store3.last_index().unwrap(), leader_last);

    // Every node's log reopens to what it served.
    for n in nodes.iter_mut() {
        let raw = n.raw.take().unwrap();
        let before = served(raw.store());
        drop(raw);
        let log = RaftLog::open(&n.dir).unwrap();
        assert_eq!(served(&log), before, "node {}", n.id);
        assert_eq!(log.last_index().unwrap(), leader_last);
        assert!(log.hard_state().commit >= index);
    }
}
