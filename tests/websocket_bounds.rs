//! What a WebSocket client can make the server hold, authenticated or not: frames are never
//! collected (their bytes go to the protocol parser as they come, which bounds a CONNECT by
//! `max_control_line` and a message by `max_payload`), a compressed message may have at most
//! `8 × max_payload` compressed bytes and inflate to at most `max_payload` bytes, as on
//! nats-server (`wsReadLoop`, `wsDecompressAndParse`). The memory tests read the server
//! process's resident set from `/proc/PID/status` (`VmRSS` before, the high-water mark
//! `VmHWM` after) while hostile clients send.
//!
//! `JSSERVER_TEST_BINARY=$(which nats-server) cargo test -p jsserver --test websocket_bounds`
//! runs them against nats-server.

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::TestServer;

const ARRIVES: Duration = Duration::from_secs(10);
const MIB: u64 = 1024 * 1024;
const MASK: [u8; 4] = [0x37, 0xfa, 0x21, 0x3d];

/// A server with `websocket { ... <extra> }` and `conf`; its WebSocket port.
fn start(extra: &str, conf: &str) -> (TestServer, u16) {
    let mut server = TestServer::start_with_config(
        &format!("websocket {{\n  host: 127.0.0.1\n  port: -1\n  no_tls: true\n{extra}}}\n{conf}"),
        &[],
    );
    let log = server.wait_for_log("Server is ready");
    let line = log
        .lines()
        .find(|l| l.contains("Listening for websocket clients on"))
        .unwrap_or_else(|| panic!("no websocket listener:\n{log}"));
    let port = line.trim().rsplit(':').next().unwrap().parse().unwrap();
    (server, port)
}

/// `VmRSS` and `VmHWM` of process `pid`, in bytes.
fn memory(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .unwrap_or_else(|| panic!("no {name} in {status}"))
            * 1024
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// A raw WebSocket client: the socket after the `101` (with `extra` request headers), and
/// whether the server agreed to compress.
struct Client {
    s: TcpStream,
    compressed: bool,
    got: String,
}

impl Client {
    fn connect(port: u16, extra: &str) -> Client {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(ARRIVES)).unwrap();
        write!(
            s,
            "GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n\
             Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
             Sec-WebSocket-Version: 13\r\n{extra}\r\n"
        )
        .unwrap();
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            assert_eq!(s.read(&mut byte).unwrap(), 1, "closed during the upgrade");
            head.push(byte[0]);
        }
        let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
        assert!(head.starts_with("http/1.1 101"), "{head}");
        let mut c = Client {
            s,
            compressed: head.contains("permessage-deflate"),
            got: String::new(),
        };
        assert!(c.until("\r\n").unwrap().starts_with("INFO "));
        c
    }

    /// Sends `payload` in one masked frame whose first byte is `first`.
    fn frame(&mut self, first: u8, payload: &[u8]) -> std::io::Result<()> {
        let mut f = header(first, payload.len() as u64);
        f.extend(masked(payload, 0));
        self.s.write_all(&f)
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

    /// One server message's bytes (inflated if compressed); `None`: a close frame or the end.
    fn message(&mut self) -> Option<Vec<u8>> {
        let mut data = Vec::new();
        let mut compressed = false;
        loop {
            let mut hdr = [0u8; 2];
            self.read(&mut hdr)?;
            let len = match hdr[1] & 0x7f {
                126 => {
                    let mut b = [0u8; 2];
                    self.read(&mut b)?;
                    u64::from(u16::from_be_bytes(b))
                }
                127 => {
                    let mut b = [0u8; 8];
                    self.read(&mut b)?;
                    u64::from_be_bytes(b)
                }
                n => u64::from(n),
            };
            let mut payload = vec![0u8; len as usize];
            self.read(&mut payload)?;
            match hdr[0] & 0x0f {
                0x8 => return None,
                0x9 | 0xa => continue,
                0x0 => {}
                _ => compressed = hdr[0] & 0x40 != 0,
            }
            data.extend_from_slice(&payload);
            if hdr[0] & 0x80 != 0 {
                break;
            }
        }
        if compressed {
            data.extend_from_slice(&[0, 0, 0xff, 0xff]);
            let mut out = Vec::with_capacity(data.len() * 20 + 1024);
            flate2::Decompress::new(false)
                .decompress_vec(&data, &mut out, flate2::FlushDecompress::Sync)
                .unwrap();
            return Some(out);
        }
        Some(data)
    }

    /// What the server sent up to and including `needle` (INFO lines after the first
    /// dropped); `None`: it closed first.
    fn until(&mut self, needle: &str) -> Option<String> {
        loop {
            if let Some(at) = self.got.find(needle) {
                let rest = self.got.split_off(at + needle.len());
                return Some(std::mem::replace(&mut self.got, rest));
            }
            let m = self.message()?;
            self.got.push_str(&String::from_utf8_lossy(&m));
        }
    }

    /// Reads until the server closes (a close frame, the end, a reset): what it sent.
    fn until_closed(&mut self) -> String {
        while let Some(m) = self.message() {
            self.got.push_str(&String::from_utf8_lossy(&m));
        }
        std::mem::take(&mut self.got)
    }
}

/// A masked frame header announcing `len` payload bytes.
fn header(first: u8, len: u64) -> Vec<u8> {
    let mut f = vec![first];
    match len {
        n if n < 126 => f.push(0x80 | n as u8),
        n if n <= 0xffff => {
            f.push(0x80 | 126);
            f.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            f.push(0x80 | 127);
            f.extend_from_slice(&n.to_be_bytes());
        }
    }
    f.extend_from_slice(&MASK);
    f
}

/// `payload` masked, as bytes `offset..` of a frame's payload.
fn masked(payload: &[u8], offset: usize) -> Vec<u8> {
    payload
        .iter()
        .enumerate()
        .map(|(i, b)| b ^ MASK[(offset + i) & 3])
        .collect()
}

/// Raw deflate with a sync flush, its tail removed (RFC 7692).
fn deflate(data: &[u8]) -> Vec<u8> {
    use flate2::{Compress, Compression, FlushCompress};
    let mut z = Compress::new(Compression::best(), false);
    let mut out = Vec::with_capacity(data.len() / 100 + 1024);
    loop {
        if out.len() == out.capacity() {
            out.reserve(out.len());
        }
        let used = z.total_in() as usize;
        z.compress_vec(&data[used..], &mut out, FlushCompress::Sync)
            .unwrap();
        if z.total_in() as usize == data.len() && out.len() < out.capacity() {
            break;
        }
    }
    out.truncate(out.len() - 4);
    out
}

/// Sends a frame announcing `total` bytes and then `block`-sized pieces of `fill` until
/// `total` or until the server closes; the bytes sent.
fn send_huge_frame(mut s: TcpStream, total: u64, start: &[u8], fill: u8) -> u64 {
    let _ = s.set_write_timeout(Some(Duration::from_secs(30)));
    if s.write_all(&header(0x82, total)).is_err() {
        return 0;
    }
    let mut sent = 0u64;
    let mut block = vec![fill; 256 * 1024];
    block[..start.len()].copy_from_slice(start);
    while sent < total {
        let n = (total - sent).min(block.len() as u64) as usize;
        let piece = masked(&block[..n], sent as usize);
        match s.write_all(&piece) {
            Ok(()) => sent += n as u64,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => break,
        }
        block[..start.len()].fill(fill);
    }
    sent
}

/// Before authentication, four clients each announce a 48 MB frame and send it: the
/// server holds none of it (each is closed once its CONNECT line passes
/// `max_control_line`), and after authentication a client streaming four 48 MB frames of
/// valid PUBs is read through without the server growing by a frame.
#[test]
fn huge_frames_before_and_after_authentication_keep_the_server_small() {
    let (server, port) = start("", "authorization { user: u, password: p }\n");
    let (rss_before, _) = memory(server.pid());

    // Unauthenticated: a CONNECT that never ends.
    let senders: Vec<_> = (0..4)
        .map(|_| {
            let c = Client::connect(port, "");
            std::thread::spawn(move || {
                send_huge_frame(c.s, 48 * MIB, b"CONNECT {\"user\":\"", b'a')
            })
        })
        .collect();
    for t in senders {
        let sent = t.join().unwrap();
        assert!(sent < 48 * MIB, "the server read a whole 48 MB CONNECT");
    }
    let (_, hwm) = memory(server.pid());
    let grown = hwm.saturating_sub(rss_before);
    eprintln!("unauthenticated: grown {} KiB", grown / 1024);
    assert!(
        grown < 32 * MIB,
        "unauthenticated clients grew the server by {} MiB",
        grown / MIB
    );

    // Authenticated: 48 MB frames full of valid PUBs (no subscriber), all read through.
    let mut c = Client::connect(port, "");
    c.frame(
        0x82,
        b"CONNECT {\"verbose\":false,\"user\":\"u\",\"pass\":\"p\"}\r\nPING\r\n",
    )
    .unwrap();
    assert_eq!(c.until("PONG\r\n").as_deref(), Some("PONG\r\n"));
    // 64 KiB PUBs (a multiple of 4 bytes: each starts at the same place in the mask).
    let payload = vec![b'x'; 64 * 1024 - 18];
    let op = format!(
        "PUB sink {}\r\n{}\r\n",
        payload.len(),
        String::from_utf8(payload).unwrap()
    );
    assert_eq!(op.len() % 4, 0);
    let op = masked(op.as_bytes(), 0);
    let per_frame = 48 * MIB / op.len() as u64;
    for _ in 0..4 {
        c.s.write_all(&header(0x82, per_frame * op.len() as u64))
            .unwrap();
        for _ in 0..per_frame {
            c.s.write_all(&op).unwrap();
        }
    }
    c.frame(0x82, b"PING\r\n").unwrap();
    // Every PUB read (the server may have sent a keepalive PING meanwhile).
    let got = c.until("PONG\r\n").expect("still connected");
    assert!(!got.contains("-ERR"), "{got:?}");
    let (_, hwm) = memory(server.pid());
    let grown = hwm.saturating_sub(rss_before);
    eprintln!("authenticated: grown {} KiB", grown / 1024);
    assert!(
        grown < 48 * MIB,
        "4 frames of 48 MB grew the server by {} MiB",
        grown / MIB
    );
}

/// A WebSocket message is not bounded by `max_pending` (nor by anything but the PUBs'
/// `max_payload` in it): a 3 MB message of PUBs on a server with `max_pending: 2MB` is read
/// whole, as nats-server reads it.
#[test]
fn an_uncompressed_message_larger_than_max_pending_is_read() {
    let (_server, port) = start("", "max_payload: 1MB\nmax_pending: 2MB\n");
    let mut c = Client::connect(port, "");
    let payload = "y".repeat(500 * 1024);
    let mut message = String::from("CONNECT {\"verbose\":false}\r\nSUB foo 1\r\n");
    for _ in 0..6 {
        message.push_str(&format!("PUB bar {}\r\n{payload}\r\n", payload.len()));
    }
    message.push_str("PUB foo 5\r\nhello\r\nPING\r\n");
    assert!(message.len() > 3_000_000);
    c.frame(0x82, message.as_bytes()).unwrap();
    assert_eq!(
        c.until("PONG\r\n").as_deref(),
        Some("MSG foo 1 5\r\nhello\r\nPONG\r\n")
    );
}

/// A compressed message that inflates to 55 MB (about 100 KB on the wire): the server hands
/// on at most `max_payload` of it and closes the connection, without inflating it first.
#[test]
fn a_compression_bomb_closes_the_connection() {
    let (server, port) = start("  compression: true\n", "");
    let (rss_before, _) = memory(server.pid());
    let mut c = Client::connect(port, "Sec-WebSocket-Extensions: permessage-deflate\r\n");
    assert!(c.compressed, "compression negotiated");
    c.frame(0x82, b"CONNECT {\"verbose\":false}\r\nPING\r\n")
        .unwrap();
    assert_eq!(c.until("PONG\r\n").as_deref(), Some("PONG\r\n"));
    let op = b"PUB sink 10\r\n0123456789\r\n";
    let bomb = deflate(&op.repeat(55 * MIB as usize / op.len()));
    assert!(bomb.len() < 200 * 1024, "{} bytes", bomb.len());
    c.frame(0xc2, &bomb).unwrap();
    // Closed: a PING after it is not answered.
    let _ = c.frame(0x82, b"PING\r\n");
    let rest = c.until_closed();
    assert!(!rest.contains("PONG"), "{rest:?}");
    let (_, hwm) = memory(server.pid());
    let grown = hwm.saturating_sub(rss_before);
    eprintln!("bomb: grown {} KiB", grown / 1024);
    assert!(
        grown < 32 * MIB,
        "the bomb grew the server by {} MiB",
        grown / MIB
    );
    // Others are served.
    let mut c = Client::connect(port, "Sec-WebSocket-Extensions: permessage-deflate\r\n");
    c.frame(0x82, b"CONNECT {\"verbose\":false}\r\nPING\r\n")
        .unwrap();
    assert_eq!(c.until("PONG\r\n").as_deref(), Some("PONG\r\n"));
}

/// A compressed message's compressed bytes are bounded by `8 × max_payload`: with
/// `max_payload: 1KB`, fragments adding up to more than 8 KiB close the connection, before
/// authentication (at once, not at the authentication timeout) and after it.
#[test]
fn compressed_bytes_over_eight_times_max_payload_close_the_connection() {
    let (_server, port) = start(
        "  compression: true\n",
        // An authentication timeout far longer than a read's wait: what closes the
        // unauthenticated client is the bound.
        "max_payload: 1KB\nauthorization { user: u, password: p, timeout: 60 }\n",
    );
    let deflate_offer = "Sec-WebSocket-Extensions: permessage-deflate\r\n";
    // Unauthenticated: 8 KiB of a compressed message, then one byte more.
    let mut c = Client::connect(port, deflate_offer);
    c.frame(0x42, &[0u8; 8 * 1024]).unwrap();
    let _ = c.frame(0x00, &[0u8; 1]);
    c.until_closed();
    // Authenticated: the same.
    let mut c = Client::connect(port, deflate_offer);
    c.frame(
        0x82,
        b"CONNECT {\"verbose\":false,\"user\":\"u\",\"pass\":\"p\"}\r\nPING\r\n",
    )
    .unwrap();
    assert_eq!(c.until("PONG\r\n").as_deref(), Some("PONG\r\n"));
    let _ = c.frame(0x42, &[0u8; 9 * 1024]);
    let _ = c.frame(0x80, &[0u8; 1]);
    let _ = c.frame(0x82, b"PING\r\n");
    let rest = c.until_closed();
    assert!(!rest.contains("PONG"), "{rest:?}");
    // A compressed message within the bounds is read.
    let mut c = Client::connect(port, deflate_offer);
    let z = deflate(b"CONNECT {\"verbose\":false,\"user\":\"u\",\"pass\":\"p\"}\r\nPING\r\n");
    c.frame(0xc2, &z).unwrap();
    assert_eq!(c.until("PONG\r\n").as_deref(), Some("PONG\r\n"));
}
