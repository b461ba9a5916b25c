//! The WebSocket frames of an upgraded client, as nats-server's `wsReadAndParse` and
//! `wsCollapsePtoNB` read and write them: RFC 6455 framing (tungstenite's [`FrameHeader`]
//! codes the headers) with RFC 7692 `permessage-deflate` when it was negotiated.
//!
//! Reading: client frames must be masked; RSV2 and RSV3 must be clear, and RSV1 (compressed)
//! only when compression was negotiated, only on a message's first frame and never on a
//! control frame; control frames are final and at most 125 bytes; a message's frames (binary,
//! text or continuation) may not exceed the message limit. Any of these, or an unknown
//! opcode, ends the connection without a close frame. A compressed message is collected,
//! the `00 00 ff ff` tail RFC 7692 strips is put back, and it is inflated (raw deflate, no
//! context kept between messages: the server asked for `client_no_context_takeover`), at most
//! the message limit.
//!
//! Writing: what the server writes leaves as one binary frame per chunk; with compression, a
//! chunk over [`COMPRESS_THRESHOLD`] bytes is deflated on its own (`server_no_context_takeover`),
//! its `00 00 ff ff` tail removed, and sent with RSV1 set (nats-server's rule and threshold).

use std::io::Cursor;

use bytes::{Buf, BytesMut};
use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio_tungstenite::tungstenite::protocol::frame::coding::{Control, Data, OpCode};
use tokio_tungstenite::tungstenite::protocol::frame::FrameHeader;

/// Chunks of at most this many bytes are sent uncompressed (nats-server's
/// `wsCompressThreshold`).
pub(super) const COMPRESS_THRESHOLD: usize = 64;

/// The four bytes a sync flush ends with, which RFC 7692 leaves out of a compressed message.
const DEFLATE_TAIL: [u8; 4] = [0x00, 0x00, 0xff, 0xff];

/// Largest payload of a control frame (RFC 6455 5.5).
const MAX_CONTROL: u64 = 125;

/// What the client sent, as the bridge uses it.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Incoming {
    /// Protocol bytes: a data frame's payload, or a whole compressed message inflated.
    Data(Vec<u8>),
    /// A ping, with its payload (answered with a pong).
    Ping(Vec<u8>),
    /// A close frame, with its payload (echoed).
    Close(Vec<u8>),
    /// A pong, or a compressed message not complete yet: nothing to do.
    Nothing,
}

/// Reads a client's frames (see the module doc).
pub(super) struct FrameReader<R> {
    read: R,
    buf: BytesMut,
    /// Bytes allowed in one message (its frames' payloads, and inflated).
    max_message: usize,
    /// Compression was negotiated.
    deflate: Option<Decompress>,
    /// Within a fragmented message: whether it is compressed, and its bytes so far.
    message: Option<(bool, usize)>,
    /// A compressed message's frames, until its last.
    compressed: Vec<u8>,
}

impl<R: AsyncRead + Unpin> FrameReader<R> {
    /// Frames from `read`, after the bytes already read (`leftover`, sent right after the
    /// upgrade request); `deflate`: compression was negotiated.
    pub(super) fn new(read: R, leftover: Vec<u8>, max_message: usize, deflate: bool) -> Self {
        FrameReader {
            read,
            buf: BytesMut::from(&leftover[..]),
            max_message,
            deflate: deflate.then(|| Decompress::new(false)),
            message: None,
            compressed: Vec::new(),
        }
    }

    /// The next frame's meaning. `Ok(None)`: the client closed the socket. `Err`: a protocol
    /// violation or a read error, described.
    pub(super) async fn next(&mut self) -> Result<Option<Incoming>, String> {
        let (header, len) = loop {
            let mut cursor = Cursor::new(&self.buf[..]);
            match FrameHeader::parse(&mut cursor).map_err(|e| e.to_string())? {
                Some((header, len)) => {
                    let used = cursor.position() as usize;
                    self.buf.advance(used);
                    break (header, len);
                }
                None => {
                    if !self.fill().await? {
                        return Ok(None);
                    }
                }
            }
        };
        let Some(mask) = header.mask else {
            return Err("mask bit missing".into());
        };
        if header.rsv2 || header.rsv3 {
            return Err("RSV2 and RSV3 must be clear".into());
        }
        if header.rsv1 && self.deflate.is_none() {
            return Err("compressed frame received without negotiated permessage-deflate".into());
        }
        match header.opcode {
            OpCode::Control(c) => {
                if len > MAX_CONTROL {
                    return Err("control frame length bigger than maximum allowed".into());
                }
                if !header.is_final {
                    return Err("control frame does not have final bit set".into());
                }
                if header.rsv1 {
                    return Err("control frame must not be compressed".into());
                }
                if let Control::Reserved(op) = c {
                    return Err(format!("unknown opcode {op}"));
                }
            }
            OpCode::Data(Data::Reserved(op)) => return Err(format!("unknown opcode {op}")),
            OpCode::Data(Data::Continue) => {
                if self.message.is_none() || header.rsv1 {
                    return Err("invalid continuation frame".into());
                }
            }
            OpCode::Data(_) => {
                if self.message.is_some() {
                    return Err(
                        "new message started before final frame for previous message \
                                was received"
                            .into(),
                    );
                }
                self.message = Some((header.rsv1, 0));
            }
        }
        if let (OpCode::Data(_), Some((_, so_far))) = (header.opcode, self.message.as_mut()) {
            let total = usize::try_from(len)
                .ok()
                .and_then(|l| l.checked_add(*so_far))
                .filter(|&t| t <= self.max_message)
                .ok_or_else(|| format!("message larger than {} bytes", self.max_message))?;
            *so_far = total;
        }
        let len = len as usize;
        while self.buf.len() < len {
            if !self.fill().await? {
                return Ok(None);
            }
        }
        let mut payload = self.buf.split_to(len).to_vec();
        for (i, b) in payload.iter_mut().enumerate() {
            *b ^= mask[i & 3];
        }
        Ok(Some(match header.opcode {
            OpCode::Control(Control::Ping) => Incoming::Ping(payload),
            OpCode::Control(Control::Close) => Incoming::Close(payload),
            OpCode::Control(_) => Incoming::Nothing,
            OpCode::Data(_) => {
                let Some((compressed, _)) = self.message else {
                    unreachable!("a data frame starts or continues a message")
                };
                if header.is_final {
                    self.message = None;
                }
                if !compressed {
                    Incoming::Data(payload)
                } else {
                    self.compressed.extend_from_slice(&payload);
                    if !header.is_final {
                        return Ok(Some(Incoming::Nothing));
                    }
                    let mut message = std::mem::take(&mut self.compressed);
                    message.extend_from_slice(&DEFLATE_TAIL);
                    let inflater = self.deflate.as_mut().expect("compression negotiated");
                    Incoming::Data(inflate(inflater, &message, self.max_message)?)
                }
            }
        }))
    }

    /// Reads more bytes; `false` at end of stream.
    async fn fill(&mut self) -> Result<bool, String> {
        self.buf.reserve(16 * 1024);
        match self.read.read_buf(&mut self.buf).await {
            Ok(0) => Ok(false),
            Ok(_) => Ok(true),
            Err(e) => Err(e.to_string()),
        }
    }
}

/// Inflates one message (raw deflate, its tail put back), at most `max` bytes; the inflater
/// is reset first (no context takeover).
fn inflate(inflater: &mut Decompress, input: &[u8], max: usize) -> Result<Vec<u8>, String> {
    inflater.reset(false);
    let mut out = Vec::with_capacity(input.len().saturating_mul(4).min(max) + 64);
    loop {
        if out.len() == out.capacity() {
            out.reserve(out.len().clamp(64, 1 << 20));
        }
        let (in_before, out_before) = (inflater.total_in() as usize, out.len());
        let status = inflater
            .decompress_vec(&input[in_before..], &mut out, FlushDecompress::Sync)
            .map_err(|e| format!("invalid compressed message: {e}"))?;
        if out.len() > max {
            return Err(format!("message larger than {max} bytes once inflated"));
        }
        let all_in = inflater.total_in() as usize == input.len();
        if status == Status::StreamEnd || (all_in && out.len() < out.capacity()) {
            return Ok(out);
        }
        if inflater.total_in() as usize == in_before && out.len() == out_before {
            return Err("invalid compressed message: no progress".into());
        }
    }
}

/// Writes frames to the client (server frames are not masked).
pub(super) struct FrameWriter<W> {
    write: W,
    /// Compression was negotiated.
    deflate: Option<Compress>,
    out: Vec<u8>,
}

impl<W: AsyncWrite + Unpin> FrameWriter<W> {
    pub(super) fn new(write: W, deflate: bool) -> Self {
        FrameWriter {
            write,
            deflate: deflate.then(|| Compress::new(Compression::fast(), false)),
            out: Vec::new(),
        }
    }

    /// Sends `bytes` in one binary frame, compressed when negotiated and over the threshold.
    pub(super) async fn binary(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        let mut header = FrameHeader {
            opcode: OpCode::Data(Data::Binary),
            ..FrameHeader::default()
        };
        match self.deflate.as_mut() {
            Some(deflater) if bytes.len() > COMPRESS_THRESHOLD => {
                let compressed = deflate(deflater, bytes)?;
                header.rsv1 = true;
                self.frame(&header, &compressed).await
            }
            _ => self.frame(&header, bytes).await,
        }
    }

    /// Sends a control frame (`Pong`, `Close`) with `payload`.
    pub(super) async fn control(&mut self, op: Control, payload: &[u8]) -> std::io::Result<()> {
        let header = FrameHeader {
            opcode: OpCode::Control(op),
            ..FrameHeader::default()
        };
        self.frame(&header, payload).await
    }

    async fn frame(&mut self, header: &FrameHeader, payload: &[u8]) -> std::io::Result<()> {
        self.out.clear();
        header
            .format(payload.len() as u64, &mut self.out)
            .map_err(std::io::Error::other)?;
        self.out.extend_from_slice(payload);
        self.write.write_all(&self.out).await?;
        self.write.flush().await
    }

    /// Ends the socket's write side.
    pub(super) async fn shutdown(&mut self) {
        let _ = self.write.shutdown().await;
    }
}

/// Deflates `input` on its own (raw deflate, sync flush), without the `00 00 ff ff` tail.
fn deflate(deflater: &mut Compress, input: &[u8]) -> std::io::Result<Vec<u8>> {
    deflater.reset();
    let mut out = Vec::with_capacity(input.len() / 2 + 64);
    loop {
        let consumed = deflater.total_in() as usize;
        if out.len() == out.capacity() {
            out.reserve(out.len().max(64));
        }
        deflater
            .compress_vec(&input[consumed..], &mut out, FlushCompress::Sync)
            .map_err(std::io::Error::other)?;
        if deflater.total_in() as usize == input.len() && out.len() < out.capacity() {
            break;
        }
    }
    if out.ends_with(&DEFLATE_TAIL) {
        out.truncate(out.len() - DEFLATE_TAIL.len());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client frame: masked, with `first` (FIN, RSV, opcode) as its first byte.
    fn client_frame(first: u8, payload: &[u8]) -> Vec<u8> {
        let mask = [1u8, 2, 3, 4];
        let mut f = vec![first];
        match payload.len() {
            n if n < 126 => f.push(0x80 | n as u8),
            n if n <= 0xffff => {
                f.push(0x80 | 126);
                f.extend_from_slice(&(n as u16).to_be_bytes());
            }
            n => {
                f.push(0x80 | 127);
                f.extend_from_slice(&(n as u64).to_be_bytes());
            }
        }
        f.extend_from_slice(&mask);
        f.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i & 3]));
        f
    }

    fn compressed(data: &[u8]) -> Vec<u8> {
        deflate(&mut Compress::new(Compression::fast(), false), data).unwrap()
    }

    async fn read_all(bytes: Vec<u8>, max: usize, deflate: bool) -> Vec<Result<Incoming, String>> {
        let mut r = FrameReader::new(&bytes[..], Vec::new(), max, deflate);
        let mut got = Vec::new();
        loop {
            match r.next().await {
                Ok(Some(i)) => got.push(Ok(i)),
                Ok(None) => return got,
                Err(e) => {
                    got.push(Err(e));
                    return got;
                }
            }
        }
    }

    #[tokio::test]
    async fn frames_and_compressed_messages_are_read() {
        let big: Vec<u8> = b"PUB foo 11\r\nhello world\r\n".repeat(1000);
        let z = compressed(&big);
        assert!(!z.ends_with(&DEFLATE_TAIL) && z.len() < big.len() / 10);
        let mut wire = client_frame(0x82, b"PING\r\n");
        wire.extend(client_frame(0x89, b"hi"));
        // A compressed message in three fragments, a ping between.
        let third = z.len() / 3;
        wire.extend(client_frame(0x42, &z[..third]));
        wire.extend(client_frame(0x89, b"between"));
        wire.extend(client_frame(0x00, &z[third..2 * third]));
        wire.extend(client_frame(0x80, &z[2 * third..]));
        // An uncompressed message after it, and a close.
        wire.extend(client_frame(0x81, b"PONG\r\n"));
        wire.extend(client_frame(0x88, &[0x03, 0xe8, b'b']));
        let got = read_all(wire, 1 << 20, true).await;
        assert_eq!(
            got,
            vec![
                Ok(Incoming::Data(b"PING\r\n".to_vec())),
                Ok(Incoming::Ping(b"hi".to_vec())),
                Ok(Incoming::Nothing),
                Ok(Incoming::Ping(b"between".to_vec())),
                Ok(Incoming::Nothing),
                Ok(Incoming::Data(big)),
                Ok(Incoming::Data(b"PONG\r\n".to_vec())),
                Ok(Incoming::Close(vec![0x03, 0xe8, b'b'])),
            ]
        );
    }

    #[tokio::test]
    async fn violations_are_errors() {
        let err = |wire: Vec<u8>, deflate: bool| async move {
            match read_all(wire, 1000, deflate).await.pop() {
                Some(Err(e)) => e,
                other => panic!("no error: {other:?}"),
            }
        };
        assert_eq!(
            err(vec![0x82, 0x02, b'h', b'i'], false).await,
            "mask bit missing"
        );
        let z = compressed(b"hello");
        assert!(err(client_frame(0xc2, &z), false)
            .await
            .contains("without negotiated"));
        assert!(err(client_frame(0xa2, b"x"), true).await.contains("RSV2"));
        assert!(err(client_frame(0xc9, b"x"), true)
            .await
            .contains("control frame"));
        assert!(err(client_frame(0x09, b"x"), true)
            .await
            .contains("final bit"));
        assert!(err(client_frame(0x80, b"x"), true)
            .await
            .contains("continuation"));
        let mut two = client_frame(0x02, b"x");
        two.extend(client_frame(0x82, b"y"));
        assert!(err(two, true).await.contains("new message"));
        let mut cont = client_frame(0x42, &z);
        cont.extend(client_frame(0xc0, b""));
        assert!(err(cont, true).await.contains("continuation"));
        assert!(err(client_frame(0x83, b"x"), true).await.contains("opcode"));
        assert!(err(client_frame(0x82, &[b'a'; 1001]), true)
            .await
            .contains("larger"));
        let mut split = client_frame(0x02, &[b'a'; 600]);
        split.extend(client_frame(0x80, &[b'a'; 600]));
        assert!(err(split, true).await.contains("larger"));
        // 1,001 bytes once inflated: over the limit however small compressed.
        let bomb = compressed(&[b'a'; 1001]);
        assert!(bomb.len() < 100);
        assert!(err(client_frame(0xc2, &bomb), true)
            .await
            .contains("inflated"));
        assert!(err(client_frame(0xc2, b"\xff\xff\xff"), true)
            .await
            .contains("invalid"));
    }

    #[tokio::test]
    async fn server_frames_are_compressed_over_the_threshold() {
        let mut wire = Vec::new();
        let mut w = FrameWriter::new(&mut wire, true);
        let small = [b'x'; COMPRESS_THRESHOLD];
        let big = b"MSG foo 1 11\r\nhello world\r\n".repeat(100);
        w.binary(&small).await.unwrap();
        w.binary(&big).await.unwrap();
        w.control(Control::Close, &[0x03, 0xe9]).await.unwrap();
        assert_eq!(&wire[..2], &[0x82, 64]);
        assert_eq!(&wire[2..66], &small[..]);
        let rest = &wire[66..];
        assert_eq!(rest[0], 0xc2, "FIN, RSV1, binary");
        let len = rest[1] as usize;
        assert!(len < 126 && rest[1] & 0x80 == 0);
        let mut z = rest[2..2 + len].to_vec();
        z.extend_from_slice(&DEFLATE_TAIL);
        let got = inflate(&mut Decompress::new(false), &z, 1 << 20).unwrap();
        assert_eq!(got, big);
        assert_eq!(&rest[2 + len..], &[0x88, 2, 0x03, 0xe9]);
        // Without compression: every chunk as it is.
        let mut wire = Vec::new();
        FrameWriter::new(&mut wire, false)
            .binary(&big)
            .await
            .unwrap();
        assert_eq!(&wire[..4], &[0x82, 126, 0x0a, 0x8c]);
        assert_eq!(&wire[4..], &big[..]);
    }
}
