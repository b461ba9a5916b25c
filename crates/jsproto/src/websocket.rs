//! A WebSocket client's frames as a server reads them (RFC 6455, with RFC 7692
//! `permessage-deflate`), sans-IO: bytes in, [`Event`]s out, every buffer bounded.
//!
//! The rules are nats-server's (`wsReadLoop`, `wsHandleControlFrame`,
//! `wsDecompressAndParse` in `server/websocket.go`):
//!
//! - A data frame's payload is never collected: it is unmasked and handed on as it arrives
//!   ([`Event::Data`], as many pieces as the reads cut it into), so an uncompressed frame or
//!   message of any announced length holds no memory here. The protocol parser behind (its
//!   `max_control_line`, `max_payload`) bounds what it keeps.
//! - A compressed message must be collected before it can be inflated: its compressed bytes
//!   may total at most [`max_compressed_message`] (`8 × max_payload`, at most 64 MiB), checked
//!   from each frame's header before any byte of it is kept. It is then inflated in pieces of
//!   at most [`INFLATE_CHUNK`] bytes, and may inflate to at most `max_payload` bytes: the bytes
//!   up to the limit are handed on, the next one is [`FrameError::MaxPayload`]. Nothing is
//!   inflated first and checked after.
//! - Control frames (ping, pong, close) are final, uncompressed and at most 125 bytes; they are
//!   collected whole (at most 125 bytes) and may come between a message's frames.
//! - Frames must be masked; RSV2 and RSV3 must be clear; RSV1 (compressed) only with
//!   compression negotiated and only on a message's first frame; a continuation frame only
//!   within a message, a new message only after the last one's final frame; a 64-bit length
//!   must have its top bit clear; opcodes 3-7 and 11-15 are unknown. Any of these is a
//!   [`FrameError::Protocol`] with nats-server's text.
//!
//! So the decoder never holds more than one header (14 bytes), one control frame's payload,
//! and one compressed message (bounded as above): what a client that never authenticates can
//! make the server keep is bounded by `max_payload`, whatever length its frames announce.
//!
//! The other direction, for clients and tests: [`client_frame`] and [`client_frame_header`]
//! write a client's (masked) frames, [`apply_mask`] masks payload bytes sent separately;
//! [`deflate_message`] compresses a message (either side's).

use bytes::{Buf, Bytes, BytesMut};
use flate2::{Compress, CompressError, Decompress, FlushCompress, FlushDecompress, Status};

/// Largest payload of a control frame (RFC 6455 5.5).
pub const MAX_CONTROL_PAYLOAD: usize = 125;

/// Largest inflated piece handed on at once (nats-server inflates into 32 KiB buffers).
pub const INFLATE_CHUNK: usize = 32 * 1024;

/// A compressed message may hold this many times `max_payload` of compressed bytes
/// (nats-server's `wsMaxMsgPayloadMultiple`)...
pub const MAX_PAYLOAD_MULTIPLE: usize = 8;

/// ...and never more than 64 MiB (nats-server's `wsMaxMsgPayloadLimit`).
pub const MAX_COMPRESSED_LIMIT: usize = 64 * 1024 * 1024;

/// The four bytes a sync flush ends with, which RFC 7692 leaves out of a compressed message
/// and the reader puts back.
pub const DEFLATE_TAIL: [u8; 4] = [0x00, 0x00, 0xff, 0xff];

/// The close status for a close frame whose reason is not UTF-8.
const CLOSE_INVALID_PAYLOAD: u16 = 1007;

/// Most compressed bytes one message may have: `max_payload × 8`, at most 64 MiB
/// (nats-server's `wsMaxMessageSize`).
pub fn max_compressed_message(max_payload: usize) -> usize {
    max_payload
        .saturating_mul(MAX_PAYLOAD_MULTIPLE)
        .min(MAX_COMPRESSED_LIMIT)
}

/// What the client sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// Protocol bytes: a piece of a data frame's payload (unmasked), or of a compressed
    /// message once inflated. Pieces of one message come in order; they may cut protocol
    /// lines anywhere.
    Data(Bytes),
    /// A ping and its payload: to be answered with a pong of the same payload.
    Ping(Bytes),
    /// A pong: nothing to do.
    Pong,
    /// A close frame: the payload of the close frame to send back, as nats-server makes it
    /// (empty when the client gave no status; the status and reason otherwise, with status
    /// 1007 when the reason was not UTF-8). The client sends nothing after it.
    Close(Bytes),
}

/// Why the connection is to close.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// A frame broke RFC 6455 or RFC 7692: nats-server's text for it.
    #[error("{0}")]
    Protocol(String),
    /// A compressed message over [`max_compressed_message`], or inflating to more than
    /// `max_payload` (nats-server's `ErrMaxPayload`).
    #[error("maximum payload exceeded")]
    MaxPayload,
    /// A compressed message that is not valid deflate data.
    #[error("invalid compressed message: {0}")]
    Inflate(String),
}

fn protocol(text: impl Into<String>) -> FrameError {
    FrameError::Protocol(text.into())
}

/// The data frame whose payload is being read.
#[derive(Debug, Clone, Copy)]
struct DataFrame {
    /// Payload bytes still to come.
    remaining: u64,
    mask: [u8; 4],
    /// Where in the mask the next byte is.
    mask_pos: usize,
    /// The frame is its message's last.
    is_final: bool,
    /// Its message is compressed.
    compressed: bool,
}

/// How far a complete compressed message is inflated.
#[derive(Debug, Clone, Copy)]
struct Inflating {
    /// Compressed bytes (the tail included) used so far.
    consumed: usize,
    /// Inflated bytes handed on so far.
    produced: usize,
}

/// The frame opcodes (RFC 6455 5.2).
mod opcode {
    pub const CONTINUATION: u8 = 0;
    pub const TEXT: u8 = 1;
    pub const BINARY: u8 = 2;
    pub const CLOSE: u8 = 8;
    pub const PING: u8 = 9;
    pub const PONG: u8 = 10;
}

const FINAL_BIT: u8 = 0x80;
const RSV1_BIT: u8 = 0x40;
const RSV2_BIT: u8 = 0x20;
const RSV3_BIT: u8 = 0x10;
const MASK_BIT: u8 = 0x80;

/// A compressed-message buffer larger than this is freed once its message is inflated.
const KEEP_COMPRESSED_CAPACITY: usize = 64 * 1024;

/// Reads a client's frames (see the module doc). Feed it bytes in any pieces; of a data
/// payload it keeps nothing but the compressed message being collected.
#[derive(Debug)]
pub struct FrameDecoder {
    /// The most a compressed message may inflate to.
    max_payload: usize,
    /// [`max_compressed_message`] of `max_payload`.
    max_compressed: usize,
    /// Compression was negotiated: the inflater (no context kept between messages).
    inflater: Option<Box<Decompress>>,
    /// Within a data frame's payload.
    frame: Option<DataFrame>,
    /// Within a message (its final frame not read yet): whether it is compressed.
    message: Option<bool>,
    /// The compressed message's bytes so far.
    compressed: Vec<u8>,
    /// The compressed message is complete and being inflated.
    inflating: Option<Inflating>,
    /// Failed: every later call fails the same way.
    failed: Option<FrameError>,
}

impl FrameDecoder {
    /// A decoder for a client whose compressed messages may inflate to `max_payload` bytes;
    /// `compression`: `permessage-deflate` was negotiated.
    pub fn new(compression: bool, max_payload: usize) -> Self {
        FrameDecoder {
            max_payload,
            max_compressed: max_compressed_message(max_payload),
            inflater: compression.then(|| Box::new(Decompress::new(false))),
            frame: None,
            message: None,
            compressed: Vec::new(),
            inflating: None,
            failed: None,
        }
    }

    /// Bytes of compressed message held now (its buffer's capacity): at most
    /// [`max_compressed_message`], the 4-byte tail put back included.
    pub fn held(&self) -> usize {
        self.compressed.capacity()
    }

    /// The next event from `buf`, taking what it uses from it; `Ok(None)`: more bytes are
    /// needed (then `buf` holds at most one incomplete header or control frame: under 140
    /// bytes). After an error, every call returns it again.
    ///
    /// # Errors
    /// [`FrameError`]: the connection is to close.
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Event>, FrameError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let result = self.decode_inner(buf);
        if let Err(e) = &result {
            self.failed = Some(e.clone());
            self.compressed = Vec::new();
            self.inflating = None;
        }
        result
    }

    fn decode_inner(&mut self, buf: &mut BytesMut) -> Result<Option<Event>, FrameError> {
        loop {
            if let Some(state) = self.inflating {
                if let Some(piece) = self.inflate_next(state)? {
                    return Ok(Some(Event::Data(piece)));
                }
                continue;
            }
            if let Some(frame) = self.frame.as_mut() {
                let n = usize::try_from(frame.remaining)
                    .unwrap_or(usize::MAX)
                    .min(buf.len());
                if n == 0 && frame.remaining > 0 {
                    return Ok(None);
                }
                apply_mask(&mut buf[..n], frame.mask, frame.mask_pos);
                frame.mask_pos = (frame.mask_pos + n) & 3;
                frame.remaining -= n as u64;
                let frame = *frame;
                let piece = buf.split_to(n);
                let message_done = frame.remaining == 0 && frame.is_final;
                if frame.remaining == 0 {
                    self.frame = None;
                    if frame.is_final {
                        self.message = None;
                    }
                }
                if frame.compressed {
                    self.collect(&piece, frame.remaining, message_done);
                    continue;
                }
                if piece.is_empty() {
                    continue;
                }
                return Ok(Some(Event::Data(piece.freeze())));
            }
            match self.header(buf)? {
                Header::Incomplete => return Ok(None),
                Header::Data => {}
                Header::Control(event) => return Ok(Some(event)),
            }
        }
    }

    /// Keeps a piece of a compressed message (its size already checked against the limit
    /// by the frame's header); at the message's end, starts inflating it.
    fn collect(&mut self, piece: &[u8], frame_remaining: u64, message_done: bool) {
        let tail = if message_done { DEFLATE_TAIL.len() } else { 0 };
        let need = self.compressed.len() + piece.len() + tail;
        if need > self.compressed.capacity() {
            // Grow by doubling, but never past what this frame still brings (and the tail),
            // nor past the bound (which `need` is within: the header was checked).
            let frame_end = need
                .saturating_add(usize::try_from(frame_remaining).unwrap_or(usize::MAX))
                .saturating_add(DEFLATE_TAIL.len() - tail);
            let target = (self.compressed.capacity() * 2)
                .min(frame_end)
                .min(self.max_compressed)
                .max(need);
            self.compressed
                .reserve_exact(target - self.compressed.len());
        }
        self.compressed.extend_from_slice(piece);
        if message_done {
            self.compressed.extend_from_slice(&DEFLATE_TAIL);
            if let Some(inflater) = self.inflater.as_mut() {
                inflater.reset(false);
            }
            self.inflating = Some(Inflating {
                consumed: 0,
                produced: 0,
            });
        }
    }

    /// The next inflated piece of the complete compressed message; `None` when it is all
    /// handed on (the buffer is then emptied).
    fn inflate_next(&mut self, mut state: Inflating) -> Result<Option<Bytes>, FrameError> {
        let inflater = self
            .inflater
            .as_mut()
            .expect("only negotiated compression collects a message");
        loop {
            // At the limit, one byte more is looked for: there is one, the message is too big.
            let room = self.max_payload - state.produced;
            let mut out = vec![0u8; room.clamp(1, INFLATE_CHUNK)];
            let (in_before, out_before) = (inflater.total_in(), inflater.total_out());
            let status = inflater
                .decompress(
                    &self.compressed[state.consumed..],
                    &mut out,
                    FlushDecompress::Sync,
                )
                .map_err(|e| FrameError::Inflate(e.to_string()))?;
            let used = (inflater.total_in() - in_before) as usize;
            let made = (inflater.total_out() - out_before) as usize;
            state.consumed += used;
            if made > 0 {
                if room == 0 {
                    return Err(FrameError::MaxPayload);
                }
                state.produced += made;
                self.inflating = Some(state);
                out.truncate(made);
                return Ok(Some(Bytes::from(out)));
            }
            if status == Status::StreamEnd || state.consumed == self.compressed.len() {
                self.inflating = None;
                if self.compressed.capacity() > KEEP_COMPRESSED_CAPACITY {
                    self.compressed = Vec::new();
                } else {
                    self.compressed.clear();
                }
                return Ok(None);
            }
            if used == 0 {
                return Err(FrameError::Inflate("truncated or corrupt data".into()));
            }
        }
    }

    /// Reads one frame header (and a control frame's payload) from `buf`, in nats-server's
    /// order of checks.
    fn header(&mut self, buf: &mut BytesMut) -> Result<Header, FrameError> {
        let Some(&b0) = buf.first() else {
            return Ok(Header::Incomplete);
        };
        let op = b0 & 0x0f;
        let is_final = b0 & FINAL_BIT != 0;
        let compressed = b0 & RSV1_BIT != 0;
        if b0 & (RSV2_BIT | RSV3_BIT) != 0 {
            return Err(protocol("RSV2 and RSV3 must be clear"));
        }
        if compressed && self.inflater.is_none() {
            return Err(protocol(
                "compressed frame received without negotiated permessage-deflate",
            ));
        }
        let Some(&b1) = buf.get(1) else {
            return Ok(Header::Incomplete);
        };
        if b1 & MASK_BIT == 0 {
            return Err(protocol("mask bit missing"));
        }
        let len7 = b1 & 0x7f;
        let control = matches!(op, opcode::CLOSE | opcode::PING | opcode::PONG);
        match op {
            opcode::CLOSE | opcode::PING | opcode::PONG => {
                if usize::from(len7) > MAX_CONTROL_PAYLOAD {
                    return Err(protocol(format!(
                        "control frame length bigger than maximum allowed of \
                         {MAX_CONTROL_PAYLOAD} bytes"
                    )));
                }
                if !is_final {
                    return Err(protocol("control frame does not have final bit set"));
                }
                if compressed {
                    return Err(protocol("control frame must not be compressed"));
                }
            }
            opcode::TEXT | opcode::BINARY => {
                if self.message.is_some() {
                    return Err(protocol(
                        "new message started before final frame for previous message was \
                         received",
                    ));
                }
            }
            opcode::CONTINUATION => {
                if self.message.is_none() || compressed {
                    return Err(protocol("invalid continuation frame"));
                }
            }
            other => return Err(protocol(format!("unknown opcode {other}"))),
        }
        let ext = match len7 {
            126 => 2,
            127 => 8,
            _ => 0,
        };
        let header_len = 2 + ext + 4;
        if buf.len() < 2 + ext {
            return Ok(Header::Incomplete);
        }
        let len = match ext {
            2 => u64::from(u16::from_be_bytes([buf[2], buf[3]])),
            8 => {
                let mut b = [0u8; 8];
                b.copy_from_slice(&buf[2..10]);
                let n = u64::from_be_bytes(b);
                if n & (1 << 63) != 0 {
                    return Err(protocol("invalid 64-bit payload length"));
                }
                n
            }
            _ => u64::from(len7),
        };
        if buf.len() < header_len {
            return Ok(Header::Incomplete);
        }
        let mut mask = [0u8; 4];
        mask.copy_from_slice(&buf[header_len - 4..header_len]);
        if control {
            // Whole, or not yet: at most 125 bytes wait in `buf`.
            let len = len as usize;
            if buf.len() < header_len + len {
                return Ok(Header::Incomplete);
            }
            buf.advance(header_len);
            let mut payload = buf.split_to(len);
            apply_mask(&mut payload, mask, 0);
            return Ok(Header::Control(match op {
                opcode::PING => Event::Ping(payload.freeze()),
                opcode::PONG => Event::Pong,
                _ => Event::Close(close_reply(&payload)?),
            }));
        }
        let message_compressed = match op {
            opcode::CONTINUATION => self.message.unwrap_or(false),
            _ => compressed,
        };
        if message_compressed {
            // Checked before any of its bytes are kept, the tail a final frame brings
            // included (nats-server checks as they come: the same limit, reached sooner).
            let tail = if is_final { DEFLATE_TAIL.len() } else { 0 };
            let total = usize::try_from(len)
                .ok()
                .and_then(|l| l.checked_add(self.compressed.len()))
                .and_then(|t| t.checked_add(tail));
            if total.is_none_or(|t| t > self.max_compressed) {
                return Err(FrameError::MaxPayload);
            }
        }
        buf.advance(header_len);
        self.message = Some(message_compressed);
        self.frame = Some(DataFrame {
            remaining: len,
            mask,
            mask_pos: 0,
            is_final,
            compressed: message_compressed,
        });
        Ok(Header::Data)
    }
}

/// What reading a header gave.
enum Header {
    /// More bytes are needed.
    Incomplete,
    /// A data frame starts: its payload follows.
    Data,
    /// A whole control frame.
    Control(Event),
}

/// The close frame to send back for a client's close frame with `payload`, as nats-server's
/// `wsHandleControlFrame`.
fn close_reply(payload: &[u8]) -> Result<Bytes, FrameError> {
    match payload {
        [] => Ok(Bytes::new()),
        [_] => Err(protocol("close frame payload cannot be 1 byte")),
        [hi, lo, body @ ..] => {
            let status = u16::from_be_bytes([*hi, *lo]);
            if !valid_close_status(status) {
                return Err(protocol(format!("invalid close status code {status}")));
            }
            let (status, body) = match std::str::from_utf8(body) {
                Ok(text) => (status, text),
                Err(_) => (CLOSE_INVALID_PAYLOAD, "invalid utf8 body in close frame"),
            };
            let mut reply = Vec::with_capacity(2 + body.len());
            reply.extend_from_slice(&status.to_be_bytes());
            reply.extend_from_slice(body.as_bytes());
            Ok(Bytes::from(reply))
        }
    }
}

/// Whether a client may send `code` in a close frame (nats-server's `wsIsValidCloseStatus`:
/// not 1004-1006 nor 1015, not the reserved 1016-2999, within 1000-4999).
fn valid_close_status(code: u16) -> bool {
    !matches!(code, 1004..=1006 | 1015 | 1016..=2999) && (1000..5000).contains(&code)
}

/// The header of a client frame (RFC 6455 5.2): `first` (FIN, RSV1-3, opcode) as its first
/// byte, the mask bit set, the payload length `len` in its shortest form (7 bits, 16 or 64),
/// then `mask`: 2 to 14 bytes. The decoder's counterpart, for clients (which must mask every
/// frame, with a fresh unpredictable `mask` each) and tests; a `len` of 2^63 or more is
/// written as it is, which a decoder refuses.
pub fn client_frame_header(first: u8, len: u64, mask: [u8; 4]) -> Vec<u8> {
    let mut f = Vec::with_capacity(14);
    f.push(first);
    match len {
        n if n < 126 => f.push(MASK_BIT | n as u8),
        n if n <= 0xffff => {
            f.push(MASK_BIT | 126);
            f.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            f.push(MASK_BIT | 127);
            f.extend_from_slice(&n.to_be_bytes());
        }
    }
    f.extend_from_slice(&mask);
    f
}

/// A whole client frame: [`client_frame_header`] for `payload`, then `payload` masked with
/// `mask`.
pub fn client_frame(first: u8, payload: &[u8], mask: [u8; 4]) -> Vec<u8> {
    let mut f = client_frame_header(first, payload.len() as u64, mask);
    let start = f.len();
    f.extend_from_slice(payload);
    apply_mask(&mut f[start..], mask, 0);
    f
}

/// `input` deflated as one compressed message on its own (RFC 7692: raw deflate, sync
/// flush, its `00 00 ff ff` tail removed). `deflater` (raw deflate, no zlib header; its level
/// the caller's) is reset first: no context is kept between messages.
///
/// # Errors
/// Those of [`Compress::compress_vec`].
pub fn deflate_message(deflater: &mut Compress, input: &[u8]) -> Result<Vec<u8>, CompressError> {
    deflater.reset();
    let mut out = Vec::with_capacity(input.len() / 2 + 64);
    loop {
        let consumed = deflater.total_in() as usize;
        if out.len() == out.capacity() {
            out.reserve(out.len().max(64));
        }
        deflater.compress_vec(&input[consumed..], &mut out, FlushCompress::Sync)?;
        if deflater.total_in() as usize == input.len() && out.len() < out.capacity() {
            break;
        }
    }
    if out.ends_with(&DEFLATE_TAIL) {
        out.truncate(out.len() - DEFLATE_TAIL.len());
    }
    Ok(out)
}

/// XORs `data` with `mask`, `data` being bytes `pos..` of a frame's payload: masks a
/// client's payload, or unmasks it (the same operation). Eight bytes at a time.
pub fn apply_mask(data: &mut [u8], mask: [u8; 4], pos: usize) {
    let key: [u8; 8] = std::array::from_fn(|i| mask[(pos + i) & 3]);
    let k = u64::from_ne_bytes(key);
    let mut chunks = data.chunks_exact_mut(8);
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        chunk.copy_from_slice(&(u64::from_ne_bytes(word) ^ k).to_ne_bytes());
    }
    for (i, b) in chunks.into_remainder().iter_mut().enumerate() {
        *b ^= key[i];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client frame with a fixed mask.
    fn client_frame(first: u8, payload: &[u8]) -> Vec<u8> {
        super::client_frame(first, payload, [1, 2, 3, 4])
    }

    /// Raw deflate with a sync flush, its tail removed (RFC 7692).
    fn compressed(data: &[u8]) -> Vec<u8> {
        let mut z = Compress::new(flate2::Compression::fast(), false);
        let out = deflate_message(&mut z, data).unwrap();
        assert_eq!(z.total_in() as usize, data.len());
        out
    }

    /// Everything `wire` decodes to, fed `chunk` bytes at a time: data pieces joined into
    /// one `Data` per run, and the error last if any.
    fn decode_all(
        wire: &[u8],
        chunk: usize,
        max: usize,
        deflate: bool,
    ) -> Vec<Result<Event, FrameError>> {
        let mut d = FrameDecoder::new(deflate, max);
        let mut buf = BytesMut::new();
        let mut got: Vec<Result<Event, FrameError>> = Vec::new();
        let push = |got: &mut Vec<Result<Event, FrameError>>, e: Event| match (got.last_mut(), e) {
            (Some(Ok(Event::Data(prev))), Event::Data(more)) => {
                let mut joined = prev.to_vec();
                joined.extend_from_slice(&more);
                *prev = Bytes::from(joined);
            }
            (_, e) => got.push(Ok(e)),
        };
        for piece in wire.chunks(chunk.max(1)) {
            buf.extend_from_slice(piece);
            loop {
                match d.decode(&mut buf) {
                    Ok(Some(e)) => push(&mut got, e),
                    Ok(None) => break,
                    Err(e) => {
                        got.push(Err(e));
                        return got;
                    }
                }
                assert!(d.held() <= max_compressed_message(max));
            }
            assert!(buf.len() < 140, "{} bytes waiting", buf.len());
        }
        got
    }

    #[test]
    fn frames_and_compressed_messages_in_any_pieces() {
        let big: Vec<u8> = b"PUB foo 11\r\nhello world\r\n".repeat(1000);
        let z = compressed(&big);
        assert!(z.len() < big.len() / 10);
        let mut wire = client_frame(0x82, b"PING\r\n");
        wire.extend(client_frame(0x89, b"hi"));
        // A compressed message in three fragments, a ping between.
        let third = z.len() / 3;
        wire.extend(client_frame(0x42, &z[..third]));
        wire.extend(client_frame(0x89, b"between"));
        wire.extend(client_frame(0x00, &z[third..2 * third]));
        wire.extend(client_frame(0x80, &z[2 * third..]));
        // An uncompressed message in two fragments, a pong, and a close.
        wire.extend(client_frame(0x01, b"PO"));
        wire.extend(client_frame(0x8a, b""));
        wire.extend(client_frame(0x80, b"NG\r\n"));
        wire.extend(client_frame(0x88, &[0x03, 0xe8, b'b']));
        for chunk in [1, 2, 3, 7, 100, 4096, wire.len()] {
            let got = decode_all(&wire, chunk, 1 << 20, true);
            assert_eq!(
                got,
                vec![
                    Ok(Event::Data(Bytes::from_static(b"PING\r\n"))),
                    Ok(Event::Ping(Bytes::from_static(b"hi"))),
                    Ok(Event::Ping(Bytes::from_static(b"between"))),
                    // (Adjacent pieces are joined by `decode_all`.)
                    Ok(Event::Data(Bytes::from([&big[..], b"PO"].concat()))),
                    Ok(Event::Pong),
                    Ok(Event::Data(Bytes::from_static(b"NG\r\n"))),
                    Ok(Event::Close(Bytes::from_static(&[0x03, 0xe8, b'b']))),
                ],
                "chunk {chunk}"
            );
        }
    }

    #[test]
    fn an_uncompressed_frame_is_handed_on_as_it_comes() {
        // A frame announcing 48 MB: nothing of it is kept, each read's bytes go on.
        let mut d = FrameDecoder::new(false, 1 << 20);
        let mut buf = BytesMut::from(&client_frame_header(0x82, 48 << 20, [0; 4])[..]);
        assert_eq!(buf.len(), 14);
        assert_eq!(d.decode(&mut buf), Ok(None));
        for _ in 0..10 {
            buf.extend_from_slice(&[b'a'; 1000]);
            assert_eq!(
                d.decode(&mut buf),
                Ok(Some(Event::Data(Bytes::from(vec![b'a'; 1000]))))
            );
            assert!(buf.is_empty());
            assert_eq!(d.decode(&mut buf), Ok(None));
        }
        assert_eq!(d.held(), 0);
    }

    #[test]
    fn violations_are_nats_server_errors() {
        let err = |wire: Vec<u8>, deflate: bool| -> FrameError {
            match decode_all(&wire, wire.len(), 1000, deflate).pop() {
                Some(Err(e)) => e,
                other => panic!("no error: {other:?}"),
            }
        };
        let text = |wire: Vec<u8>, deflate: bool| err(wire, deflate).to_string();
        assert_eq!(
            text(vec![0x82, 0x02, b'h', b'i'], false),
            "mask bit missing"
        );
        let z = compressed(b"hello");
        assert_eq!(
            text(client_frame(0xc2, &z), false),
            "compressed frame received without negotiated permessage-deflate"
        );
        assert_eq!(
            text(client_frame(0xa2, b"x"), true),
            "RSV2 and RSV3 must be clear"
        );
        assert_eq!(
            text(client_frame(0xc9, b"x"), true),
            "control frame must not be compressed"
        );
        assert_eq!(
            text(client_frame(0x09, b"x"), true),
            "control frame does not have final bit set"
        );
        assert_eq!(
            text(client_frame(0x89, &[b'x'; 126]), true),
            "control frame length bigger than maximum allowed of 125 bytes"
        );
        assert_eq!(
            text(client_frame(0x80, b"x"), true),
            "invalid continuation frame"
        );
        let mut two = client_frame(0x02, b"x");
        two.extend(client_frame(0x82, b"y"));
        assert!(text(two, true).starts_with("new message started"));
        let mut cont = client_frame(0x42, &z);
        cont.extend(client_frame(0xc0, b""));
        assert_eq!(text(cont, true), "invalid continuation frame");
        assert_eq!(text(client_frame(0x83, b"x"), true), "unknown opcode 3");
        let mut huge = vec![0x82, 0x80 | 127];
        huge.extend_from_slice(&(1u64 << 63).to_be_bytes());
        assert_eq!(text(huge, false), "invalid 64-bit payload length");
        assert_eq!(
            text(client_frame(0x88, &[3]), false),
            "close frame payload cannot be 1 byte"
        );
        assert_eq!(
            text(client_frame(0x88, &[0x03, 0xed]), false),
            "invalid close status code 1005"
        );
        assert!(text(client_frame(0xc2, b"\xff\xff\xff"), true).starts_with("invalid compressed"));
    }

    #[test]
    fn close_replies_are_nats_servers() {
        let close = |payload: &[u8]| decode_all(&client_frame(0x88, payload), 1, 100, false);
        assert_eq!(close(b""), vec![Ok(Event::Close(Bytes::new()))]);
        assert_eq!(
            close(&[0x0f, 0xa0, b'o', b'k']),
            vec![Ok(Event::Close(Bytes::from_static(&[
                0x0f, 0xa0, b'o', b'k'
            ])))]
        );
        let mut want = 1007u16.to_be_bytes().to_vec();
        want.extend_from_slice(b"invalid utf8 body in close frame");
        assert_eq!(
            close(&[0x03, 0xe8, 0xff]),
            vec![Ok(Event::Close(Bytes::from(want)))]
        );
        for bad in [999u16, 1004, 1006, 1015, 1016, 2999, 5000] {
            assert!(matches!(
                close(&bad.to_be_bytes()).pop(),
                Some(Err(FrameError::Protocol(_)))
            ));
        }
        for good in [1000u16, 1001, 1003, 1007, 1014, 3000, 4999] {
            assert!(matches!(
                close(&good.to_be_bytes()).pop(),
                Some(Ok(Event::Close(_)))
            ));
        }
    }

    #[test]
    fn compressed_messages_are_bounded_before_and_after_inflating() {
        let max = 1000;
        // Inflating to max_payload: fine; one byte more: MaxPayload, after the first 1,000
        // bytes were handed on (as nats-server parses them before it fails).
        let ok = decode_all(
            &client_frame(0xc2, &compressed(&[b'a'; 1000])),
            7,
            max,
            true,
        );
        assert_eq!(ok, vec![Ok(Event::Data(Bytes::from(vec![b'a'; 1000])))]);
        let bomb = compressed(&vec![b'a'; 10 << 20]);
        assert!(bomb.len() < 100 << 10, "{} bytes", bomb.len());
        let got = decode_all(&client_frame(0xc2, &bomb), 4096, 1 << 20, true);
        assert_eq!(
            got,
            vec![
                Ok(Event::Data(Bytes::from(vec![b'a'; 1 << 20]))),
                Err(FrameError::MaxPayload)
            ]
        );
        // Compressed bytes over 8 × max_payload: refused from the header, nothing kept.
        let mut d = FrameDecoder::new(true, max);
        let mut buf = BytesMut::from(&client_frame(0x42, &[0u8; 8000])[..]);
        assert!(matches!(d.decode(&mut buf), Ok(None)));
        assert_eq!(buf.len(), 0);
        let mut buf = BytesMut::from(&client_frame(0x00, &[0u8; 1])[..]);
        assert_eq!(d.decode(&mut buf), Err(FrameError::MaxPayload));
        assert_eq!(d.held(), 0);
        let mut buf = BytesMut::from(&client_frame(0x42, &[0u8; 8001])[..8]);
        let mut d = FrameDecoder::new(true, max);
        assert_eq!(d.decode(&mut buf), Err(FrameError::MaxPayload));
        assert_eq!(max_compressed_message(1 << 20), 8 << 20);
        assert_eq!(max_compressed_message(32 << 20), 64 << 20);
    }

    /// The fuzz target's checks (`fuzz/fuzz_targets/ws_frames.rs`) on one of its inputs: the
    /// first byte the chunk size, the second compression (bit 0) and `max_payload`.
    fn fuzz_checks(input: &[u8]) {
        let [chunk, flags, data @ ..] = input else {
            return;
        };
        let chunk = if *chunk == 0 {
            data.len().max(1)
        } else {
            usize::from(*chunk)
        };
        let (deflate, max) = (flags & 1 != 0, 16usize << ((flags >> 1) & 7));
        let cut = decode_all(data, chunk, max, deflate);
        assert_eq!(cut, decode_all(data, data.len().max(1), max, deflate));
    }

    #[test]
    fn fuzz_crashes_stay_fixed() {
        use base64::Engine as _;
        // The tail put back at a message's end doubled the buffer past 8 × max_payload.
        let inputs = [
            "ByFCkQH+9QQLCnZWScnMUzU05+HLSs7NyIDPAQKzAwRWLS0tLS0tLS0tLS0tAwAtLS0tLS0tLS0tLbtj\
             Z3dzZGdtAIQBAv370pFlZmZmZmBm////////////////////////////////////////////////////\
             ////////////////////////////////////////////////////////////////////////////////\
             /////////////////////////////////2YGk9Xhy9s24ksLGpYclBptEWMjsqQlAAAEUUtMQwwI",
        ];
        for b64 in inputs {
            let input = base64::engine::general_purpose::STANDARD
                .decode(b64)
                .unwrap();
            fuzz_checks(&input);
        }
    }

    #[test]
    fn unmasking_at_any_offset() {
        let mask = [0x11, 0x22, 0x33, 0x44];
        for pos in 0..4 {
            for len in 0..40 {
                let mut data: Vec<u8> = (0..len as u8).collect();
                apply_mask(&mut data, mask, pos);
                let want: Vec<u8> = (0..len as u8)
                    .enumerate()
                    .map(|(i, b)| b ^ mask[(pos + i) & 3])
                    .collect();
                assert_eq!(data, want);
            }
        }
    }
}
