//! The WebSocket frames of an upgraded client: reading them with `jsproto`'s sans-IO
//! [`FrameDecoder`] (nats-server's rules and bounds: see `jsproto::websocket`), writing them
//! as nats-server's `wsCollapsePtoNB` does.
//!
//! Reading: each read of the socket (at most [`READ_CHUNK`] bytes) goes to the decoder, which
//! hands on data payloads as they come (never collecting a frame), collects a compressed
//! message up to `8 × max_payload` and inflates it in pieces, at most `max_payload` in all.
//! So a client, authenticated or not, makes the bridge hold at most one read and one
//! compressed message (bounded by `max_payload`), whatever length its frames announce.
//!
//! Writing: what the server writes leaves as one binary frame per chunk; with compression, a
//! chunk over [`COMPRESS_THRESHOLD`] bytes is deflated on its own (`server_no_context_takeover`),
//! its `00 00 ff ff` tail removed, and sent with RSV1 set (nats-server's rule and threshold).

use bytes::BytesMut;
use flate2::{Compress, Compression};
use jsproto::websocket::{deflate_message, Event, FrameDecoder, FrameError};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio_tungstenite::tungstenite::protocol::frame::coding::{Control, Data, OpCode};
use tokio_tungstenite::tungstenite::protocol::frame::FrameHeader;

/// Chunks of at most this many bytes are sent uncompressed (nats-server's
/// `wsCompressThreshold`).
pub(super) const COMPRESS_THRESHOLD: usize = 64;

/// Most bytes read from the client's socket at once.
pub(super) const READ_CHUNK: usize = 16 * 1024;

/// Why reading a client's frames stopped.
#[derive(Debug)]
pub(super) enum ReadError {
    /// A frame broke the rules or a bound (see [`FrameError`]).
    Frame(FrameError),
    /// The socket failed.
    Io(std::io::Error),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Frame(e) => e.fmt(f),
            ReadError::Io(e) => e.fmt(f),
        }
    }
}

/// Reads a client's frames (see the module doc).
pub(super) struct FrameReader<R> {
    read: R,
    buf: BytesMut,
    decoder: FrameDecoder,
}

impl<R: AsyncRead + Unpin> FrameReader<R> {
    /// Frames from `read`, after the bytes already read (`leftover`, sent right after the
    /// upgrade request); compressed messages inflate to at most `max_payload` bytes;
    /// `deflate`: compression was negotiated.
    pub(super) fn new(read: R, leftover: Vec<u8>, max_payload: usize, deflate: bool) -> Self {
        FrameReader {
            read,
            buf: BytesMut::from(&leftover[..]),
            decoder: FrameDecoder::new(deflate, max_payload),
        }
    }

    /// The next thing the client sent. `Ok(None)`: the client closed the socket.
    pub(super) async fn next(&mut self) -> Result<Option<Event>, ReadError> {
        loop {
            if let Some(event) = self
                .decoder
                .decode(&mut self.buf)
                .map_err(ReadError::Frame)?
            {
                return Ok(Some(event));
            }
            self.buf.reserve(READ_CHUNK);
            let mut limited = (&mut self.read).take(READ_CHUNK as u64);
            match limited.read_buf(&mut self.buf).await {
                Ok(0) => return Ok(None),
                Ok(_) => {}
                Err(e) => return Err(ReadError::Io(e)),
            }
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
                let compressed = deflate_message(deflater, bytes).map_err(std::io::Error::other)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_huge_frame_is_handed_on_in_reads_never_collected() {
        // A frame announcing 48 MB: its bytes come out a read at a time, the reader's buffer
        // never above one read.
        let (mut client, server) = tokio::io::duplex(64 * 1024);
        let header = jsproto::websocket::client_frame_header(0x82, 48 << 20, [1, 2, 3, 4]);
        let sender = tokio::spawn(async move {
            client.write_all(&header).await.unwrap();
            let block = vec![0u8; 256 * 1024];
            for _ in 0..(48 * 4) {
                if client.write_all(&block).await.is_err() {
                    return;
                }
            }
        });
        let mut r = FrameReader::new(server, Vec::new(), 1 << 20, false);
        let mut total = 0usize;
        while total < 48 << 20 {
            match r.next().await.unwrap() {
                Some(Event::Data(piece)) => {
                    assert!(piece.len() <= READ_CHUNK, "{}", piece.len());
                    // Unmasked with the mask 1 2 3 4.
                    assert!(piece
                        .iter()
                        .enumerate()
                        .all(|(i, &b)| { b == [1u8, 2, 3, 4][(total + i) & 3] }));
                    total += piece.len();
                }
                other => panic!("{other:?}"),
            }
            assert!(r.buf.capacity() <= 2 * READ_CHUNK, "{}", r.buf.capacity());
        }
        sender.await.unwrap();
        // A frame error ends the reading.
        let bad = [0x82u8, 0x02, b'h', b'i'];
        let mut r = FrameReader::new(&bad[..], Vec::new(), 1000, false);
        assert_eq!(r.next().await.unwrap_err().to_string(), "mask bit missing");
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
        z.extend_from_slice(&jsproto::websocket::DEFLATE_TAIL);
        let mut got = Vec::with_capacity(big.len() + 64);
        flate2::Decompress::new(false)
            .decompress_vec(&z, &mut got, flate2::FlushDecompress::Sync)
            .unwrap();
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
