//! WebSocket test helpers: a server with a WebSocket listener, the raw upgrade request, and a
//! raw client that masks its frames with `jsproto::websocket::client_frame` and reads the
//! server's frames itself (to see compression and close frames as they are on the wire).

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use flate2::{Compress, Compression, Decompress, FlushDecompress};
use jsproto::websocket::{client_frame, deflate_message, DEFLATE_TAIL};

use super::TestServer;

/// Upper bound for something that should happen: a wait, not a timing assertion.
const ARRIVES: Duration = Duration::from_secs(10);

/// The mask of every frame the test clients send.
pub const MASK: [u8; 4] = [0x37, 0xfa, 0x21, 0x3d];

/// A server with `websocket { host: 127.0.0.1, port: -1, <block> }` (`block`: lines of the
/// block, e.g. its `tls { }`) and `conf`; its WebSocket port.
pub fn start_listener(block: &str, conf: &str) -> (TestServer, u16) {
    let mut server = TestServer::start_with_config(
        &format!("websocket {{\n  host: 127.0.0.1\n  port: -1\n{block}}}\n{conf}"),
        &[],
    );
    let port = port(&server.wait_for_log("Server is ready"));
    (server, port)
}

/// A server with a plain (`no_tls: true`) WebSocket listener with `extra` lines, and `conf`;
/// its WebSocket port.
pub fn start(extra: &str, conf: &str) -> (TestServer, u16) {
    start_listener(&format!("  no_tls: true\n{extra}"), conf)
}

/// The port of `Listening for websocket clients on ws://HOST:PORT` (or `wss://`) in `log`.
pub fn port(log: &str) -> u16 {
    let line = log
        .lines()
        .find(|l| l.contains("Listening for websocket clients on"))
        .unwrap_or_else(|| panic!("no websocket listener line:\n{log}"));
    line.trim()
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in {line:?}"))
}

/// A client frame masked with [`MASK`]; `first` is its first byte (FIN, RSV1, opcode).
pub fn frame(first: u8, payload: &[u8]) -> Vec<u8> {
    client_frame(first, payload, MASK)
}

/// Sends the upgrade request of a client on `port`, with `extra` header lines: the socket
/// and the response head as read (up to the blank line, or what came before the end).
pub fn raw_upgrade(port: u16, extra: &str) -> (TcpStream, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(ARRIVES)).unwrap();
    write!(
        s,
        "GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n{extra}\r\n"
    )
    .unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if s.read(&mut byte).unwrap() == 0 {
            break;
        }
        head.push(byte[0]);
    }
    (s, String::from_utf8_lossy(&head).into_owned())
}

/// A raw deflate of `data` (best compression, sync flush), its `00 00 ff ff` tail removed
/// (RFC 7692).
pub fn deflate(data: &[u8]) -> Vec<u8> {
    deflate_message(&mut Compress::new(Compression::best(), false), data).unwrap()
}

/// Inflates one compressed message (its tail put back; no context between messages).
pub fn inflate(data: &[u8]) -> Vec<u8> {
    let mut input = data.to_vec();
    input.extend_from_slice(&DEFLATE_TAIL);
    let mut z = Decompress::new(false);
    let mut out = Vec::with_capacity(data.len() * 4 + 1024);
    loop {
        let used = z.total_in() as usize;
        z.decompress_vec(&input[used..], &mut out, FlushDecompress::Sync)
            .unwrap();
        if z.total_in() as usize == input.len() && out.len() < out.capacity() {
            return out;
        }
        out.reserve(out.len());
    }
}

/// A raw WebSocket client after the `101`: what it read as text, how many server messages
/// were compressed (RSV1) or plain, and how many bytes they took on the wire.
pub struct RawClient {
    pub s: TcpStream,
    /// The upgrade response's head.
    pub head: String,
    pub got: String,
    pub compressed: usize,
    pub plain: usize,
    pub wire: usize,
    /// Leave out INFO lines after the first: nats-server 2.15 sends another INFO
    /// (`connect_info`) after a CONNECT with `protocol` 1.
    skip_info: bool,
}

impl RawClient {
    /// A client on `s`, upgraded with the response `head`.
    pub fn new(s: TcpStream, head: String) -> Self {
        RawClient {
            s,
            head,
            got: String::new(),
            compressed: 0,
            plain: 0,
            wire: 0,
            skip_info: false,
        }
    }

    /// Upgrades a connection to `port` (with `extra` request headers), asserts the `101`,
    /// and reads the INFO line: the client and the INFO.
    pub fn connect(port: u16, extra: &str) -> (RawClient, String) {
        let (s, head) = raw_upgrade(port, extra);
        assert!(
            head.to_ascii_lowercase().starts_with("http/1.1 101"),
            "{head}"
        );
        let mut c = RawClient::new(s, head);
        let info = c.until("\r\n");
        assert!(info.starts_with("INFO {"), "{info}");
        (c, info)
    }

    /// The server agreed to compress (`permessage-deflate` in its answer).
    pub fn deflate_agreed(&self) -> bool {
        self.head
            .to_ascii_lowercase()
            .contains("permessage-deflate")
    }

    /// Sends `payload` in one masked frame whose first byte is `first`.
    pub fn frame(&mut self, first: u8, payload: &[u8]) -> std::io::Result<()> {
        self.s.write_all(&frame(first, payload))
    }

    /// Sends `data` compressed in one message, in `parts` frames.
    pub fn send_compressed(&mut self, data: &str, parts: usize) {
        let z = deflate(data.as_bytes());
        let size = z.len().div_ceil(parts);
        let chunks: Vec<&[u8]> = z.chunks(size.max(1)).collect();
        for (i, c) in chunks.iter().enumerate() {
            let fin = if i + 1 == chunks.len() { 0x80 } else { 0 };
            let first = if i == 0 { 0x40 | 0x02 } else { 0 };
            self.frame(fin | first, c).unwrap();
        }
    }

    /// Reads exactly `buf.len()` bytes; `None` at the end or a reset. Panics when the server
    /// sends nothing for [`ARRIVES`] (it neither answered nor closed).
    fn read(&mut self, buf: &mut [u8]) -> Option<()> {
        match self.s.read_exact(buf) {
            Ok(()) => Some(()),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                panic!("the server neither answered nor closed within {ARRIVES:?}")
            }
            Err(_) => None,
        }
    }

    /// One server message (its frames reassembled), inflated if compressed; `None`: a close
    /// frame, the end or a reset.
    pub fn message(&mut self) -> Option<Vec<u8>> {
        let (mut data, mut compressed) = (Vec::new(), None);
        loop {
            let mut hdr = [0u8; 2];
            self.read(&mut hdr)?;
            assert_eq!(hdr[1] & 0x80, 0, "server frames are not masked");
            let len = match hdr[1] & 0x7f {
                126 => {
                    let mut b = [0u8; 2];
                    self.read(&mut b)?;
                    usize::from(u16::from_be_bytes(b))
                }
                127 => {
                    let mut b = [0u8; 8];
                    self.read(&mut b)?;
                    u64::from_be_bytes(b) as usize
                }
                n => usize::from(n),
            };
            let mut payload = vec![0u8; len];
            self.read(&mut payload)?;
            self.wire += 2 + len;
            match hdr[0] & 0x0f {
                0x8 => return None,
                0x9 | 0xa => continue,
                op => {
                    if op != 0 {
                        compressed = Some(hdr[0] & 0x40 != 0);
                    } else {
                        assert_eq!(hdr[0] & 0x40, 0, "RSV1 only on a message's first frame");
                    }
                    data.extend_from_slice(&payload);
                }
            }
            if hdr[0] & 0x80 != 0 {
                break;
            }
        }
        if compressed == Some(true) {
            self.compressed += 1;
            Some(inflate(&data))
        } else {
            self.plain += 1;
            Some(data)
        }
    }

    /// Reads messages until what was read (INFO lines after the first left out) contains
    /// `needle`; returns it up to and including the needle. Panics when the server closes
    /// first.
    pub fn until(&mut self, needle: &str) -> String {
        loop {
            while let Some(start) = self
                .got
                .match_indices("INFO {")
                .map(|(i, _)| i)
                .find(|&i| self.skip_info && (i == 0 || self.got[..i].ends_with('\n')))
            {
                let Some(len) = self.got[start..].find("\r\n") else {
                    break;
                };
                self.got.replace_range(start..start + len + 2, "");
            }
            if let Some(at) = self.got.find(needle) {
                let rest = self.got.split_off(at + needle.len());
                self.skip_info = true;
                return std::mem::replace(&mut self.got, rest);
            }
            let m = self
                .message()
                .unwrap_or_else(|| panic!("closed before {needle:?}; read {:?}", self.got));
            self.got.push_str(&String::from_utf8_lossy(&m));
        }
    }

    /// Reads until the server closes (a close frame, the end, a reset): what it sent.
    pub fn until_closed(&mut self) -> String {
        while let Some(m) = self.message() {
            self.got.push_str(&String::from_utf8_lossy(&m));
        }
        std::mem::take(&mut self.got)
    }
}
