//! The record layout of the file store's segment files.
//!
//! A segment file (`<n>.blk`) is a sequence of records written back to back, append-only. Every
//! record is self-delimiting and carries its own checksum, so a reader can walk a file, stop at a
//! torn tail and step over a damaged region:
//!
//! | offset      | size | field                                                           |
//! |-------------|------|-----------------------------------------------------------------|
//! | 0           | 4    | `len`: total length of the record in bytes, this field and the checksum included (u32 LE) |
//! | 4           | 1    | `kind`: 1 message, 2 delete, 3 marker, 4 erased                 |
//! | 5           | 1    | `flags`: bit 0 = the message has a header block; other bits 0   |
//! | 6           | ...  | body, per kind (below)                                          |
//! | `len` - 4   | 4    | CRC-32 (IEEE, as `crc32fast`) of bytes `0 .. len-4` (u32 LE)    |
//!
//! Bodies (all integers little-endian):
//!
//! * **message** (kind 1): `seq` u64, `ts` u64 (Unix nanoseconds), `subject_len` u16,
//!   `headers_len` u32 (only when flag bit 0 is set), then the subject, the raw `NATS/1.0` header
//!   block and the payload (its length is what remains). Fixed size [`MSG_FIXED_LEN`] = 28 bytes,
//!   +4 with headers.
//! * **delete** (kind 2): `seq` u64: a tombstone, the message with this sequence is removed.
//!   [`DELETE_LEN`] = 18 bytes.
//! * **marker** (kind 3): `floor` u64 (every sequence below it is gone), `last_seq` u64 and
//!   `last_ts` u64 (the stream's last sequence and its timestamp when the marker was written).
//!   Written at the start of every segment and after a purge, so the last sequence survives
//!   even when every message is gone. [`MARKER_LEN`] = 34 bytes.
//! * **erased** (kind 4): any body, normally zeros. An erased message (`MSG.DELETE` without
//!   `no_erase`) is overwritten in place by a filler of the same length, so neither its subject,
//!   headers nor payload stay on disk and the file keeps its shape.
//!
//! Decoding never panics, whatever the input: it returns a [`DecodeError`] saying whether more
//! bytes are needed ([`DecodeError::Incomplete`], a torn tail) or the bytes are not a record.
//! Pure code: no IO, buffers in and out.

/// Size of the common record header: `len` (4), `kind` (1), `flags` (1).
pub const HEADER_LEN: usize = 6;
/// Size of the trailing checksum.
pub const CRC_LEN: usize = 4;
/// The shortest possible record (an erased filler with an empty body).
pub const MIN_RECORD_LEN: usize = HEADER_LEN + CRC_LEN;
/// Size of a message record without subject, headers or payload: header, `seq`, `ts`,
/// `subject_len` and checksum. A message with headers adds 4 bytes (`headers_len`).
pub const MSG_FIXED_LEN: usize = HEADER_LEN + 8 + 8 + 2 + CRC_LEN;
/// Size of a delete tombstone.
pub const DELETE_LEN: usize = HEADER_LEN + 8 + CRC_LEN;
/// Size of a marker record.
pub const MARKER_LEN: usize = HEADER_LEN + 8 + 8 + 8 + CRC_LEN;
/// The longest subject a message record can hold (its length is a u16).
pub const MAX_SUBJECT_LEN: usize = u16::MAX as usize;
/// The longest record (its length is a u32).
pub const MAX_RECORD_LEN: usize = u32::MAX as usize;

const KIND_MSG: u8 = 1;
const KIND_DELETE: u8 = 2;
const KIND_MARKER: u8 = 3;
const KIND_ERASED: u8 = 4;
const FLAG_HEADERS: u8 = 1;

/// A stored message as it sits in a message record (borrowed from the buffer it was decoded
/// from, or to be encoded).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MsgRecord<'a> {
    /// Stream sequence.
    pub seq: u64,
    /// Timestamp, Unix nanoseconds.
    pub ts: u64,
    /// The subject the message was published on (valid UTF-8 when written by the store; the
    /// decoder does not check).
    pub subject: &'a [u8],
    /// The raw `NATS/1.0 ...\r\n\r\n` header block, if the message had one. `Some(&[])` and
    /// `None` are distinct and both round-trip.
    pub headers: Option<&'a [u8]>,
    /// The payload.
    pub payload: &'a [u8],
}

/// The stream's sequence bounds as of when a [`Record::Marker`] was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Marker {
    /// Every sequence below `floor` is gone (purged). 0 = no floor.
    pub floor: u64,
    /// The stream's last assigned sequence.
    pub last_seq: u64,
    /// The timestamp (Unix ns) of the message with `last_seq`, 0 if unknown.
    pub last_ts: u64,
}

/// One decoded record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Record<'a> {
    /// A message.
    Msg(MsgRecord<'a>),
    /// A tombstone: the message with sequence `seq` was removed.
    Delete {
        /// The removed message's sequence.
        seq: u64,
    },
    /// Sequence bounds (see [`Marker`]).
    Marker(Marker),
    /// An overwritten (erased) message: carries nothing.
    Erased,
}

/// Why bytes could not be decoded as a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The buffer ends before the record does: `needed` bytes are required in total. At the end
    /// of the last segment this is a torn write.
    #[error("incomplete record: {needed} bytes needed, {available} available")]
    Incomplete {
        /// Total bytes the record needs (from its length field, or 4 to read that field).
        needed: usize,
        /// Bytes available in the buffer.
        available: usize,
    },
    /// The length field is shorter than the smallest record of any kind.
    #[error("bad record length {0}")]
    BadLength(u32),
    /// The checksum does not match the record's bytes.
    #[error("record checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    Checksum {
        /// Checksum found in the record.
        stored: u32,
        /// Checksum of the bytes.
        computed: u32,
    },
    /// The checksum matched but the kind byte is unknown.
    #[error("unknown record kind {0}")]
    UnknownKind(u8),
    /// The checksum matched but the body is inconsistent (wrong size for its kind, lengths
    /// pointing past the end, unknown flags).
    #[error("malformed record: {0}")]
    Malformed(&'static str),
}

/// Why a record could not be encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EncodeError {
    /// The subject is longer than [`MAX_SUBJECT_LEN`] bytes.
    #[error("subject too long for a record: {0} bytes")]
    SubjectTooLong(usize),
    /// The record would be longer than [`MAX_RECORD_LEN`] bytes.
    #[error("record too large: {0} bytes")]
    TooLarge(usize),
    /// An erased filler must be at least [`MIN_RECORD_LEN`] bytes.
    #[error("erased filler too short: {0} bytes")]
    FillerTooShort(usize),
}

/// Length of the message record for a subject, optional header block and payload of these
/// sizes, or `None` if it cannot be encoded (subject or record too long).
pub fn msg_len(
    subject_len: usize,
    headers_len: Option<usize>,
    payload_len: usize,
) -> Option<usize> {
    if subject_len > MAX_SUBJECT_LEN {
        return None;
    }
    let hdr = match headers_len {
        Some(h) => h.checked_add(4)?,
        None => 0,
    };
    let len = MSG_FIXED_LEN
        .checked_add(subject_len)?
        .checked_add(hdr)?
        .checked_add(payload_len)?;
    (len <= MAX_RECORD_LEN).then_some(len)
}

/// Appends the message record for `msg` to `out`; returns its length.
///
/// On error nothing is appended.
pub fn encode_msg(out: &mut Vec<u8>, msg: &MsgRecord<'_>) -> Result<usize, EncodeError> {
    if msg.subject.len() > MAX_SUBJECT_LEN {
        return Err(EncodeError::SubjectTooLong(msg.subject.len()));
    }
    let len = msg_len(
        msg.subject.len(),
        msg.headers.map(<[u8]>::len),
        msg.payload.len(),
    )
    .ok_or(EncodeError::TooLarge(
        msg.subject.len() + msg.headers.map_or(0, <[u8]>::len) + msg.payload.len(),
    ))?;
    let start = out.len();
    out.reserve(len);
    let flags = if msg.headers.is_some() {
        FLAG_HEADERS
    } else {
        0
    };
    put_header(out, len, KIND_MSG, flags);
    out.extend_from_slice(&msg.seq.to_le_bytes());
    out.extend_from_slice(&msg.ts.to_le_bytes());
    // Both lengths were bounded by `msg_len` (subject ≤ u16::MAX, record ≤ u32::MAX).
    out.extend_from_slice(&(msg.subject.len() as u16).to_le_bytes());
    if let Some(h) = msg.headers {
        out.extend_from_slice(&(h.len() as u32).to_le_bytes());
    }
    out.extend_from_slice(msg.subject);
    if let Some(h) = msg.headers {
        out.extend_from_slice(h);
    }
    out.extend_from_slice(msg.payload);
    put_crc(out, start);
    debug_assert_eq!(out.len() - start, len);
    Ok(len)
}

/// Appends a delete tombstone for `seq` to `out`; returns its length ([`DELETE_LEN`]).
pub fn encode_delete(out: &mut Vec<u8>, seq: u64) -> usize {
    let start = out.len();
    put_header(out, DELETE_LEN, KIND_DELETE, 0);
    out.extend_from_slice(&seq.to_le_bytes());
    put_crc(out, start);
    DELETE_LEN
}

/// Appends a marker record to `out`; returns its length ([`MARKER_LEN`]).
pub fn encode_marker(out: &mut Vec<u8>, marker: &Marker) -> usize {
    let start = out.len();
    put_header(out, MARKER_LEN, KIND_MARKER, 0);
    out.extend_from_slice(&marker.floor.to_le_bytes());
    out.extend_from_slice(&marker.last_seq.to_le_bytes());
    out.extend_from_slice(&marker.last_ts.to_le_bytes());
    put_crc(out, start);
    MARKER_LEN
}

/// Appends an erased filler of exactly `len` bytes (zero body) to `out`, to overwrite a record
/// of that length in place.
pub fn encode_erased(out: &mut Vec<u8>, len: usize) -> Result<usize, EncodeError> {
    if len < MIN_RECORD_LEN {
        return Err(EncodeError::FillerTooShort(len));
    }
    if len > MAX_RECORD_LEN {
        return Err(EncodeError::TooLarge(len));
    }
    let start = out.len();
    put_header(out, len, KIND_ERASED, 0);
    out.resize(start + len - CRC_LEN, 0);
    put_crc(out, start);
    Ok(len)
}

/// The total length announced by the record starting at `buf[0]`, if at least 4 bytes are
/// there. Not validated.
pub fn peek_len(buf: &[u8]) -> Option<usize> {
    let b: [u8; 4] = buf.get(..4)?.try_into().ok()?;
    Some(u32::from_le_bytes(b) as usize)
}

/// Decodes the record at the start of `buf`; returns it and its length (the offset of the next
/// record). Bytes after the record are ignored.
pub fn decode(buf: &[u8]) -> Result<(Record<'_>, usize), DecodeError> {
    let Some(len) = peek_len(buf) else {
        return Err(DecodeError::Incomplete {
            needed: 4,
            available: buf.len(),
        });
    };
    if len < MIN_RECORD_LEN {
        return Err(DecodeError::BadLength(len as u32));
    }
    let Some(rec) = buf.get(..len) else {
        return Err(DecodeError::Incomplete {
            needed: len,
            available: buf.len(),
        });
    };
    let (data, crc) = rec.split_at(len - CRC_LEN);
    let mut r = Reader(crc);
    let stored = r.u32().ok_or(DecodeError::Malformed("checksum"))?;
    let computed = crc32fast::hash(data);
    if stored != computed {
        return Err(DecodeError::Checksum { stored, computed });
    }
    let kind = data[4];
    let flags = data[5];
    let mut body = Reader(&data[HEADER_LEN..]);
    let record = match kind {
        KIND_MSG => {
            if flags & !FLAG_HEADERS != 0 {
                return Err(DecodeError::Malformed("unknown message flags"));
            }
            let seq = body
                .u64()
                .ok_or(DecodeError::Malformed("message too short"))?;
            let ts = body
                .u64()
                .ok_or(DecodeError::Malformed("message too short"))?;
            let subject_len =
                body.u16()
                    .ok_or(DecodeError::Malformed("message too short"))? as usize;
            let headers_len = if flags & FLAG_HEADERS != 0 {
                Some(
                    body.u32()
                        .ok_or(DecodeError::Malformed("message too short"))?
                        as usize,
                )
            } else {
                None
            };
            let subject = body
                .take(subject_len)
                .ok_or(DecodeError::Malformed("subject past the end"))?;
            let headers = match headers_len {
                Some(h) => Some(
                    body.take(h)
                        .ok_or(DecodeError::Malformed("headers past the end"))?,
                ),
                None => None,
            };
            Record::Msg(MsgRecord {
                seq,
                ts,
                subject,
                headers,
                payload: body.0,
            })
        }
        KIND_DELETE => {
            check_fixed(flags, len, DELETE_LEN)?;
            let seq = body
                .u64()
                .ok_or(DecodeError::Malformed("delete too short"))?;
            Record::Delete { seq }
        }
        KIND_MARKER => {
            check_fixed(flags, len, MARKER_LEN)?;
            let floor = body
                .u64()
                .ok_or(DecodeError::Malformed("marker too short"))?;
            let last_seq = body
                .u64()
                .ok_or(DecodeError::Malformed("marker too short"))?;
            let last_ts = body
                .u64()
                .ok_or(DecodeError::Malformed("marker too short"))?;
            Record::Marker(Marker {
                floor,
                last_seq,
                last_ts,
            })
        }
        KIND_ERASED => {
            if flags != 0 {
                return Err(DecodeError::Malformed("flags on an erased record"));
            }
            Record::Erased
        }
        other => return Err(DecodeError::UnknownKind(other)),
    };
    Ok((record, len))
}

fn check_fixed(flags: u8, len: usize, want: usize) -> Result<(), DecodeError> {
    if flags != 0 {
        return Err(DecodeError::Malformed("flags on a non-message record"));
    }
    if len != want {
        return Err(DecodeError::Malformed("wrong length for the record kind"));
    }
    Ok(())
}

fn put_header(out: &mut Vec<u8>, len: usize, kind: u8, flags: u8) {
    // Callers bounded `len` to u32.
    out.extend_from_slice(&(len as u32).to_le_bytes());
    out.push(kind);
    out.push(flags);
}

fn put_crc(out: &mut Vec<u8>, start: usize) {
    let crc = crc32fast::hash(&out[start..]);
    out.extend_from_slice(&crc.to_le_bytes());
}

/// A cursor over a byte slice whose reads return `None` instead of panicking.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if n > self.0.len() {
            return None;
        }
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        Some(head)
    }
    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.take(N)?.try_into().ok()
    }
    fn u16(&mut self) -> Option<u16> {
        self.array().map(u16::from_le_bytes)
    }
    fn u32(&mut self) -> Option<u32> {
        self.array().map(u32::from_le_bytes)
    }
    fn u64(&mut self) -> Option<u64> {
        self.array().map(u64::from_le_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn msg<'a>(subject: &'a [u8], headers: Option<&'a [u8]>, payload: &'a [u8]) -> MsgRecord<'a> {
        MsgRecord {
            seq: 7,
            ts: 1_700_000_000_000_000_000,
            subject,
            headers,
            payload,
        }
    }

    #[test]
    fn message_layout_is_documented_size() {
        let mut out = Vec::new();
        let n = encode_msg(&mut out, &msg(b"orders.new", None, b"hello")).unwrap();
        assert_eq!(n, out.len());
        assert_eq!(n, MSG_FIXED_LEN + 10 + 5);
        assert_eq!(n, 28 + 10 + 5);
        assert_eq!(msg_len(10, None, 5), Some(n));
        out.clear();
        let hdr = b"NATS/1.0\r\nA: b\r\n\r\n";
        let n = encode_msg(&mut out, &msg(b"orders.new", Some(hdr), b"hello")).unwrap();
        assert_eq!(n, MSG_FIXED_LEN + 4 + 10 + hdr.len() + 5);
        assert_eq!(msg_len(10, Some(hdr.len()), 5), Some(n));
    }

    #[test]
    fn every_kind_round_trips() {
        let mut out = Vec::new();
        let hdr: &[u8] = b"NATS/1.0\r\n\r\n";
        let m = msg(b"a.b", Some(hdr), b"payload");
        let a = encode_msg(&mut out, &m).unwrap();
        let b = encode_delete(&mut out, 42);
        let marker = Marker {
            floor: 5,
            last_seq: 9,
            last_ts: 77,
        };
        let c = encode_marker(&mut out, &marker);
        let d = encode_erased(&mut out, 40).unwrap();
        assert_eq!((b, c, d), (DELETE_LEN, MARKER_LEN, 40));
        let mut at = 0;
        let mut got = Vec::new();
        while at < out.len() {
            let (rec, n) = decode(&out[at..]).unwrap();
            got.push(rec);
            at += n;
        }
        assert_eq!(at, a + b + c + d);
        assert_eq!(
            got,
            vec![
                Record::Msg(m),
                Record::Delete { seq: 42 },
                Record::Marker(marker),
                Record::Erased
            ]
        );
    }

    #[test]
    fn empty_headers_and_no_headers_differ() {
        let mut out = Vec::new();
        encode_msg(&mut out, &msg(b"s", Some(b""), b"")).unwrap();
        let (rec, _) = decode(&out).unwrap();
        assert_eq!(rec, Record::Msg(msg(b"s", Some(b""), b"")));
        out.clear();
        encode_msg(&mut out, &msg(b"s", None, b"")).unwrap();
        let (rec, _) = decode(&out).unwrap();
        assert_eq!(rec, Record::Msg(msg(b"s", None, b"")));
    }

    #[test]
    fn torn_tail_is_incomplete() {
        let mut out = Vec::new();
        let n = encode_msg(&mut out, &msg(b"a", None, b"0123456789")).unwrap();
        for cut in 0..n {
            match decode(&out[..cut]) {
                Err(DecodeError::Incomplete { needed, available }) => {
                    assert_eq!(available, cut);
                    assert!(needed > cut);
                }
                other => panic!("cut at {cut}: {other:?}"),
            }
        }
    }

    #[test]
    fn flipped_bit_is_detected() {
        let mut out = Vec::new();
        let n = encode_msg(&mut out, &msg(b"a.b", Some(b"h"), b"0123456789")).unwrap();
        for i in 4..n {
            let mut bad = out.clone();
            bad[i] ^= 0x10;
            assert!(decode(&bad).is_err(), "flip at {i} not detected");
        }
    }

    #[test]
    fn bad_lengths_and_kinds() {
        assert_eq!(decode(&[3, 0, 0, 0, 1, 0]), Err(DecodeError::BadLength(3)));
        // A well-checksummed record of an unknown kind.
        let mut out = Vec::new();
        encode_erased(&mut out, 12).unwrap();
        out[4] = 9;
        let crc = crc32fast::hash(&out[..8]);
        out[8..].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(decode(&out), Err(DecodeError::UnknownKind(9)));
        // A delete with a wrong size.
        let mut out = Vec::new();
        encode_erased(&mut out, 20).unwrap();
        out[4] = KIND_DELETE;
        let crc = crc32fast::hash(&out[..16]);
        out[16..].copy_from_slice(&crc.to_le_bytes());
        assert!(matches!(decode(&out), Err(DecodeError::Malformed(_))));
        assert_eq!(
            encode_erased(&mut Vec::new(), 9),
            Err(EncodeError::FillerTooShort(9))
        );
    }

    #[test]
    fn subject_too_long_is_refused() {
        let subject = vec![b'a'; MAX_SUBJECT_LEN + 1];
        let mut out = Vec::new();
        assert_eq!(
            encode_msg(&mut out, &msg(&subject, None, b"")),
            Err(EncodeError::SubjectTooLong(MAX_SUBJECT_LEN + 1))
        );
        assert!(out.is_empty());
    }

    proptest! {
        #[test]
        fn msg_round_trip(
            seq in any::<u64>(),
            ts in any::<u64>(),
            subject in proptest::collection::vec(any::<u8>(), 0..300),
            headers in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..300)),
            payload in proptest::collection::vec(any::<u8>(), 0..2000),
            trailing in proptest::collection::vec(any::<u8>(), 0..20),
        ) {
            let m = MsgRecord { seq, ts, subject: &subject, headers: headers.as_deref(), payload: &payload };
            let mut out = Vec::new();
            let n = encode_msg(&mut out, &m).unwrap();
            prop_assert_eq!(n, out.len());
            out.extend_from_slice(&trailing);
            let (rec, used) = decode(&out).unwrap();
            prop_assert_eq!(used, n);
            prop_assert_eq!(rec, Record::Msg(m));
        }

        #[test]
        fn marker_and_delete_round_trip(floor in any::<u64>(), last_seq in any::<u64>(), last_ts in any::<u64>()) {
            let mut out = Vec::new();
            let marker = Marker { floor, last_seq, last_ts };
            encode_marker(&mut out, &marker);
            encode_delete(&mut out, last_seq);
            let (a, n) = decode(&out).unwrap();
            let (b, _) = decode(&out[n..]).unwrap();
            prop_assert_eq!(a, Record::Marker(marker));
            prop_assert_eq!(b, Record::Delete { seq: last_seq });
        }

        #[test]
        fn garbage_never_panics(buf in proptest::collection::vec(any::<u8>(), 0..200)) {
            if let Ok((_, n)) = decode(&buf) {
                prop_assert!(n <= buf.len());
            }
        }

        #[test]
        fn corrupted_record_never_panics(
            payload in proptest::collection::vec(any::<u8>(), 0..100),
            at in any::<prop::sample::Index>(),
            xor in 1u8..,
        ) {
            let mut out = Vec::new();
            encode_msg(&mut out, &MsgRecord { seq: 1, ts: 2, subject: b"x.y", headers: None, payload: &payload }).unwrap();
            let i = at.index(out.len());
            out[i] ^= xor;
            prop_assert!(decode(&out).is_err());
        }
    }
}
