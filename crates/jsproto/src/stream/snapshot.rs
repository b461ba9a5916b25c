//! A replicated stream's Raft snapshot as bytes: the whole state of one replica after an
//! entry ([`StreamSnapshot`]) together with its messages, so that a replica with nothing (a
//! new or wiped member, or one too far behind for the leader's log) is made equal to the
//! others from it alone, and the log before it can be dropped.
//!
//! # Layout
//!
//! Integers little-endian:
//!
//! | size   | field                                                                   |
//! |--------|-------------------------------------------------------------------------|
//! | 8      | magic `JSSNAP01`                                                        |
//! | 4      | `state_len`                                                             |
//! | `state_len` | the [`StreamSnapshot`] as JSON                                     |
//! | 8      | `first_seq`: the store's first sequence ([`StoreState::first_seq`])     |
//! | 8      | `last_seq`: the last sequence ever assigned                             |
//! | 8      | `last_ts`: the timestamp given with `last_seq`, Unix ns                 |
//! | ...    | every stored message, ascending, as a message record of the file store  |
//! |        | ([`super::record`]: length, sequence, timestamp, subject, headers,      |
//! |        | payload, CRC-32)                                                        |
//!
//! A message's sequence, timestamp, subject, headers and payload come back exactly; the
//! sequences between them that hold no message (interior deletes) stay free, and the next
//! message stored gets `last_seq + 1`, as on the replica the snapshot was taken on.
//!
//! Cost: O(messages) to take and to restore; the caller takes one when the log since the
//! last is at least as long as the stream (`jsserver`'s replica), so the work is paid for
//! by the entries it lets the log drop. [`encode_to`] writes and [`restore_from`] reads a
//! snapshot as a stream of bytes, one message at a time, so a stream larger than memory is
//! snapshotted and restored through a file; [`encode`] and [`restore`] are the same over
//! bytes in memory.

use std::io::{Read, Write};

use super::entry::{Epoch, StreamSnapshot};
use super::machine::Stream;
use super::record::{decode, encode_msg, EncodeError, MsgRecord, Record};
use super::store::{MsgStore, PurgeRequest, StoreError, StoreLimits, StoreState};
use crate::consumer::ConsumerError;

/// The first bytes of a snapshot.
pub const MAGIC: &[u8; 8] = b"JSSNAP01";

/// The longest message record [`restore_from`] reads (256 MiB): a longer length is damage,
/// not something to allocate.
pub const MAX_PART_LEN: usize = 256 << 20;

/// The longest state (its JSON) a snapshot holds (1 GiB): [`encode_to`] refuses a longer one
/// (the caller keeps its log) rather than write a snapshot [`restore_from`] would refuse.
pub const MAX_STATE_LEN: usize = 1 << 30;

/// Why a snapshot could not be made or restored.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SnapshotError {
    /// The store failed to read or write.
    #[error("store: {0}")]
    Store(#[from] StoreError),
    /// A message could not be encoded (a subject longer than a record takes).
    #[error("encoding a message: {0}")]
    Encode(#[from] EncodeError),
    /// The bytes are not a snapshot of this layout (with what was wrong).
    #[error("not a stream snapshot: {0}")]
    Invalid(String),
    /// A consumer's state was refused by the consumer core.
    #[error("consumer state: {0}")]
    Consumer(#[from] ConsumerError),
    /// The store to restore into already holds messages or sequences.
    #[error("the store to restore into is not empty")]
    NotEmpty,
    /// Writing the snapshot out or reading it in failed.
    #[error("snapshot io: {0}")]
    Io(#[from] std::io::Error),
}

/// The snapshot of `state` (taken with [`Stream::snapshot`] after the last entry applied)
/// over `store`, which holds the stream's messages as of that entry.
///
/// # Errors
/// [`SnapshotError::Store`] when a message cannot be read; [`SnapshotError::Encode`];
/// [`SnapshotError::Invalid`] when reading the store gives fewer or more messages than it
/// counts (nothing is taken rather than a snapshot that lacks some).
pub fn encode(state: &StreamSnapshot, store: &dyn MsgStore) -> Result<Vec<u8>, SnapshotError> {
    let mut out = Vec::new();
    encode_to(state, store, &mut out)?;
    Ok(out)
}

/// [`encode`], written to `out` a message at a time (the snapshot is never whole in memory);
/// returns the bytes written. `out` should be buffered: it gets one small write per field.
///
/// # Errors
/// As [`encode`], and [`SnapshotError::Io`] when `out` fails.
pub fn encode_to(
    state: &StreamSnapshot,
    store: &dyn MsgStore,
    out: &mut dyn Write,
) -> Result<u64, SnapshotError> {
    let json = serde_json::to_vec(state)
        .map_err(|e| SnapshotError::Invalid(format!("state does not serialise: {e}")))?;
    let st = store.state();
    if json.len() > MAX_STATE_LEN {
        return Err(SnapshotError::Invalid(format!(
            "a state of {} bytes, more than a snapshot holds",
            json.len()
        )));
    }
    let len = u32::try_from(json.len()).expect("at most MAX_STATE_LEN");
    out.write_all(MAGIC)?;
    out.write_all(&len.to_le_bytes())?;
    out.write_all(&json)?;
    for n in [st.first_seq, st.last_seq, st.last_ts] {
        out.write_all(&n.to_le_bytes())?;
    }
    let mut written = (MAGIC.len() + 4 + json.len() + 24) as u64;
    let mut seq = 0;
    let mut count = 0u64;
    let mut record = Vec::new();
    while let Some(m) = store.load_next(">", seq)? {
        seq = m.seq + 1;
        count += 1;
        record.clear();
        encode_msg(
            &mut record,
            &MsgRecord {
                seq: m.seq,
                ts: m.ts,
                subject: m.subject.as_bytes(),
                headers: m.headers.as_deref(),
                payload: &m.payload,
            },
        )?;
        out.write_all(&record)?;
        written += record.len() as u64;
    }
    // Every message the store counts, or no snapshot: a snapshot missing messages would
    // make them interior deletes on every replica restored from it.
    if count != st.msgs {
        return Err(SnapshotError::Invalid(format!(
            "the store gave {count} of its {} messages",
            st.msgs
        )));
    }
    Ok(written)
}

/// The stream a snapshot holds, its messages written into `store` (new and empty: nothing
/// ever stored), on this replica's `epoch`; then apply the entries after the snapshot's
/// `at` ([`StreamSnapshot::at`], returned with it).
///
/// The store takes no limits while it is filled (the messages obeyed them when they were
/// stored), then its own again: open it with the limits of the snapshot's config
/// ([`StoreLimits::of`]), as the replica it was taken on had them.
///
/// # Errors
/// [`SnapshotError::Invalid`] for bytes not of the layout (magic, lengths, a record's CRC or
/// a sequence out of order); [`SnapshotError::NotEmpty`]; the store's and the consumer
/// core's refusals.
pub fn restore(
    data: &[u8],
    store: &mut dyn MsgStore,
    epoch: &Epoch,
) -> Result<(Stream, super::entry::EntryTime), SnapshotError> {
    restore_from(&mut &data[..], store, epoch)
}

/// [`restore`] from a reader, a message at a time (a snapshot larger than memory is
/// restored from its file). Reads `input` to its end.
///
/// # Errors
/// As [`restore`]; an error of `input` is [`SnapshotError::Io`], except that input cut short
/// is [`SnapshotError::Invalid`].
pub fn restore_from(
    input: &mut dyn Read,
    store: &mut dyn MsgStore,
    epoch: &Epoch,
) -> Result<(Stream, super::entry::EntryTime), SnapshotError> {
    let invalid = |why: &str| SnapshotError::Invalid(why.to_owned());
    if store.state() != StoreState::default() {
        return Err(SnapshotError::NotEmpty);
    }
    let mut magic = [0u8; 8];
    read_exact(input, &mut magic)?;
    if &magic != MAGIC {
        return Err(invalid("bad magic"));
    }
    let len = read_u32(input)? as usize;
    if len > MAX_STATE_LEN {
        return Err(invalid("a state longer than a snapshot holds"));
    }
    let mut json = vec![0u8; len];
    read_exact(input, &mut json)?;
    let state: StreamSnapshot =
        serde_json::from_slice(&json).map_err(|e| SnapshotError::Invalid(format!("state: {e}")))?;
    let first_seq = read_u64(input)?;
    let last_seq = read_u64(input)?;
    let last_ts = read_u64(input)?;

    let limits = store.limits().clone();
    store.update_limits(StoreLimits::default())?;
    // Sequences start at `first_seq` (what came before was purged or removed); an empty
    // stream's at its last sequence, which a removed filler takes so that the store keeps
    // its timestamp.
    let start = if first_seq > last_seq {
        last_seq
    } else {
        first_seq
    };
    if start > 1 {
        store.purge(&PurgeRequest {
            up_to_seq: Some(start),
            ..PurgeRequest::default()
        })?;
    }
    let mut buf = Vec::new();
    while next_record(input, &mut buf)? {
        let (record, _) = decode(&buf).map_err(|e| SnapshotError::Invalid(e.to_string()))?;
        let Record::Msg(m) = record else {
            return Err(invalid("a record that is not a message"));
        };
        if m.seq <= store.state().last_seq || m.seq > last_seq {
            return Err(invalid("a message out of sequence"));
        }
        skip_to(store, m.seq, m.ts)?;
        let subject = std::str::from_utf8(m.subject).map_err(|_| invalid("a subject not UTF-8"))?;
        let stored = store.store_msg(subject, m.headers, m.payload, m.ts)?;
        if stored.seq != m.seq {
            return Err(invalid("the store gave another sequence"));
        }
    }
    skip_to(store, last_seq + 1, last_ts)?;
    // An empty stream that was purged before it stored anything says so by its first
    // sequence (1, where a stream never purged says 0).
    if last_seq == 0 && first_seq > 0 && store.state().first_seq == 0 {
        store.purge(&PurgeRequest::default())?;
    }
    let removed = store.update_limits(limits)?;
    if !removed.is_empty() {
        return Err(invalid("the messages do not fit the stream's limits"));
    }
    let at = state.at;
    let stream = Stream::from_snapshot(state, store, epoch)?;
    Ok((stream, at))
}

/// Makes `next` the store's next sequence: every sequence from its next one up to `next - 1`
/// is taken by a message removed at once (an interior delete), stamped `ts`.
fn skip_to(store: &mut dyn MsgStore, next: u64, ts: u64) -> Result<(), StoreError> {
    while store.state().last_seq + 1 < next {
        let filler = store.store_msg("_", None, &[], ts)?;
        store.remove(filler.seq, false)?;
    }
    Ok(())
}

/// Fills `buf` from `input`; input that ends first is a snapshot cut short.
fn read_exact(input: &mut dyn Read, buf: &mut [u8]) -> Result<(), SnapshotError> {
    input.read_exact(buf).map_err(|e| match e.kind() {
        std::io::ErrorKind::UnexpectedEof => SnapshotError::Invalid("cut short".into()),
        _ => SnapshotError::Io(e),
    })
}

fn read_u32(input: &mut dyn Read) -> Result<u32, SnapshotError> {
    let mut b = [0u8; 4];
    read_exact(input, &mut b)?;
    Ok(u32::from_le_bytes(b))
}

fn read_u64(input: &mut dyn Read) -> Result<u64, SnapshotError> {
    let mut b = [0u8; 8];
    read_exact(input, &mut b)?;
    Ok(u64::from_le_bytes(b))
}

/// Reads the next message record into `buf` (its length field included); false at the
/// end of the input.
fn next_record(input: &mut dyn Read, buf: &mut Vec<u8>) -> Result<bool, SnapshotError> {
    let mut len = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        match input.read(&mut len[got..]) {
            Ok(0) if got == 0 => return Ok(false),
            Ok(0) => return Err(SnapshotError::Invalid("a record cut short".into())),
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(SnapshotError::Io(e)),
        }
    }
    let n = u32::from_le_bytes(len) as usize;
    if !(4..=MAX_PART_LEN).contains(&n) {
        return Err(SnapshotError::Invalid(format!("a record of length {n}")));
    }
    buf.clear();
    buf.extend_from_slice(&len);
    buf.resize(n, 0);
    read_exact(input, &mut buf[4..])?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;
    use crate::api::stream::StreamConfig;
    use crate::stream::store::MemoryStore;
    use crate::stream::EntryTime;

    const T0: u64 = 1_800_000_000_000_000_000;

    fn config() -> StreamConfig {
        StreamConfig {
            name: "ORDERS".into(),
            subjects: vec!["orders.>".into()],
            max_msg_size: -1,
            ..Default::default()
        }
    }

    fn epoch() -> Epoch {
        #[allow(clippy::disallowed_methods)]
        Epoch {
            base: Instant::now(),
            unix_ns: T0,
        }
    }

    fn at() -> EntryTime {
        EntryTime {
            mono_ns: 0,
            unix_ns: T0,
        }
    }

    fn snapshot_of(store: &mut MemoryStore) -> Vec<u8> {
        let stream = Stream::new(config(), store, T0);
        encode(&stream.snapshot(at(), &epoch()), store).unwrap()
    }

    #[test]
    fn a_purged_stream_keeps_its_sequence_and_last_timestamp() {
        let mut store = MemoryStore::new(StoreLimits::default());
        for i in 0..5 {
            store.store_msg("orders.1", None, b"x", T0 + i).unwrap();
        }
        store.purge(&PurgeRequest::default()).unwrap();
        let bytes = snapshot_of(&mut store);
        let mut b = MemoryStore::new(StoreLimits::default());
        restore(&bytes, &mut b, &epoch()).unwrap();
        assert_eq!(b.state(), store.state());
        assert_eq!(b.state().last_ts, T0 + 4);
        assert_eq!(b.store_msg("orders.1", None, b"y", T0 + 9).unwrap().seq, 6);
    }

    #[test]
    fn a_stream_purged_before_it_stored_anything_stays_so() {
        let mut store = MemoryStore::new(StoreLimits::default());
        store.purge(&PurgeRequest::default()).unwrap();
        assert_eq!(store.state().first_seq, 1);
        let bytes = snapshot_of(&mut store);
        let mut b = MemoryStore::new(StoreLimits::default());
        restore(&bytes, &mut b, &epoch()).unwrap();
        assert_eq!(b.state(), store.state());
    }

    #[test]
    fn interior_deletes_and_headers_come_back() {
        let mut store = MemoryStore::new(StoreLimits::default());
        for i in 0..6 {
            let h = (i % 2 == 0).then_some(b"NATS/1.0\r\nA: b\r\n\r\n".as_slice());
            store.store_msg("orders.1", h, b"x", T0 + i).unwrap();
        }
        store.remove(2, false).unwrap();
        store.remove(5, true).unwrap();
        store.remove(6, false).unwrap();
        let bytes = snapshot_of(&mut store);
        let mut b = MemoryStore::new(StoreLimits::default());
        restore(&bytes, &mut b, &epoch()).unwrap();
        assert_eq!(b.state(), store.state());
        assert_eq!(b.deleted(), store.deleted());
        for seq in 1..=6 {
            assert_eq!(b.load(seq).unwrap(), store.load(seq).unwrap(), "seq {seq}");
        }
    }

    /// A reader that gives one byte per read, as a slow file or socket may.
    struct Trickle<'a>(&'a [u8]);

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            match (self.0.split_first(), buf.first_mut()) {
                (Some((b, rest)), Some(out)) => {
                    *out = *b;
                    self.0 = rest;
                    Ok(1)
                }
                _ => Ok(0),
            }
        }
    }

    #[test]
    fn written_and_read_as_a_stream_it_is_the_same() {
        let mut store = MemoryStore::new(StoreLimits::default());
        for i in 0..20 {
            store
                .store_msg("orders.1", None, &[b'x'; 300], T0 + i)
                .unwrap();
        }
        store.remove(7, false).unwrap();
        let bytes = snapshot_of(&mut store);
        let stream = Stream::new(config(), &mut store, T0);
        let mut written = Vec::new();
        let n = encode_to(&stream.snapshot(at(), &epoch()), &store, &mut written).unwrap();
        assert_eq!(n as usize, written.len());
        assert_eq!(written, bytes);
        let mut b = MemoryStore::new(StoreLimits::default());
        restore_from(&mut Trickle(&bytes), &mut b, &epoch()).unwrap();
        assert_eq!(b.state(), store.state());
        for seq in 1..=20 {
            assert_eq!(b.load(seq).ok(), store.load(seq).ok(), "seq {seq}");
        }
        let mut cut = MemoryStore::new(StoreLimits::default());
        assert!(matches!(
            restore_from(&mut Trickle(&bytes[..bytes.len() - 3]), &mut cut, &epoch()),
            Err(SnapshotError::Invalid(_))
        ));
    }

    #[test]
    fn bad_bytes_and_a_used_store_are_refused() {
        let mut store = MemoryStore::new(StoreLimits::default());
        store.store_msg("orders.1", None, b"x", T0).unwrap();
        let bytes = snapshot_of(&mut store);
        let fresh = || MemoryStore::new(StoreLimits::default());
        let e = epoch();
        assert!(matches!(
            restore(&bytes[1..], &mut fresh(), &e),
            Err(SnapshotError::Invalid(_))
        ));
        let mut cut = bytes.clone();
        cut.truncate(bytes.len() - 1);
        assert!(matches!(
            restore(&cut, &mut fresh(), &e),
            Err(SnapshotError::Invalid(_))
        ));
        let mut flipped = bytes.clone();
        let last = flipped.len() - 6;
        flipped[last] ^= 0xff;
        assert!(matches!(
            restore(&flipped, &mut fresh(), &e),
            Err(SnapshotError::Invalid(_))
        ));
        assert!(matches!(
            restore(&bytes, &mut store, &e),
            Err(SnapshotError::NotEmpty)
        ));
    }
}
