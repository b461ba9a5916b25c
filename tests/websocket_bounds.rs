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

use std::io::{ErrorKind, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::ws::{deflate, start, RawClient, MASK};
use jsproto::websocket::{apply_mask, client_frame_header};

const MIB: u64 = 1024 * 1024;

/// Asserts that the high-water mark of process `pid` is less than `limit` bytes above
/// `rss_before`; says how much `what` grew it either way.
fn assert_grown_below(pid: u32, rss_before: u64, limit: u64, what: &str) {
    let (_, hwm) = memory(pid);
    let grown = hwm.saturating_sub(rss_before);
    eprintln!("{what}: grown {} KiB", grown / 1024);
    assert!(
        grown < limit,
        "{what} grew the server by {} MiB",
        grown / MIB
    );
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

/// Sends a frame announcing `total` bytes and then `block`-sized pieces of `fill` until
/// `total` or until the server closes; the bytes sent.
fn send_huge_frame(mut s: TcpStream, total: u64, start: &[u8], fill: u8) -> u64 {
    let _ = s.set_write_timeout(Some(Duration::from_secs(30)));
    if s.write_all(&client_frame_header(0x82, total, MASK))
        .is_err()
    {
        return 0;
    }
    let mut sent = 0u64;
    let mut block = vec![fill; 256 * 1024];
    block[..start.len()].copy_from_slice(start);
    while sent < total {
        let n = (total - sent).min(block.len() as u64) as usize;
        let mut piece = block[..n].to_vec();
        apply_mask(&mut piece, MASK, sent as usize);
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
            let c = RawClient::connect(port, "").0;
            std::thread::spawn(move || {
                send_huge_frame(c.s, 48 * MIB, b"CONNECT {\"user\":\"", b'a')
            })
        })
        .collect();
    for t in senders {
        let sent = t.join().unwrap();
        assert!(sent < 48 * MIB, "the server read a whole 48 MB CONNECT");
    }
    assert_grown_below(
        server.pid(),
        rss_before,
        32 * MIB,
        "unauthenticated clients",
    );

    // Authenticated: 48 MB frames full of valid PUBs (no subscriber), all read through.
    let mut c = RawClient::connect(port, "").0;
    c.frame(
        0x82,
        b"CONNECT {\"verbose\":false,\"user\":\"u\",\"pass\":\"p\"}\r\nPING\r\n",
    )
    .unwrap();
    assert_eq!(c.until("PONG\r\n"), "PONG\r\n");
    // 64 KiB PUBs (a multiple of 4 bytes: each starts at the same place in the mask).
    let payload = vec![b'x'; 64 * 1024 - 18];
    let op = format!(
        "PUB sink {}\r\n{}\r\n",
        payload.len(),
        String::from_utf8(payload).unwrap()
    );
    assert_eq!(op.len() % 4, 0);
    let mut op = op.into_bytes();
    apply_mask(&mut op, MASK, 0);
    let per_frame = 48 * MIB / op.len() as u64;
    for _ in 0..4 {
        c.s.write_all(&client_frame_header(
            0x82,
            per_frame * op.len() as u64,
            MASK,
        ))
        .unwrap();
        for _ in 0..per_frame {
            c.s.write_all(&op).unwrap();
        }
    }
    c.frame(0x82, b"PING\r\n").unwrap();
    // Every PUB read (the server may have sent a keepalive PING meanwhile).
    let got = c.until("PONG\r\n");
    assert!(!got.contains("-ERR"), "{got:?}");
    assert_grown_below(server.pid(), rss_before, 48 * MIB, "4 frames of 48 MB");
}

/// A WebSocket message is not bounded by `max_pending` (nor by anything but the PUBs'
/// `max_payload` in it): a 3 MB message of PUBs on a server with `max_pending: 2MB` is read
/// whole, as nats-server reads it.
#[test]
fn an_uncompressed_message_larger_than_max_pending_is_read() {
    let (_server, port) = start("", "max_payload: 1MB\nmax_pending: 2MB\n");
    let mut c = RawClient::connect(port, "").0;
    let payload = "y".repeat(500 * 1024);
    let mut message = String::from("CONNECT {\"verbose\":false}\r\nSUB foo 1\r\n");
    for _ in 0..6 {
        message.push_str(&format!("PUB bar {}\r\n{payload}\r\n", payload.len()));
    }
    message.push_str("PUB foo 5\r\nhello\r\nPING\r\n");
    assert!(message.len() > 3_000_000);
    c.frame(0x82, message.as_bytes()).unwrap();
    assert_eq!(c.until("PONG\r\n"), "MSG foo 1 5\r\nhello\r\nPONG\r\n");
}

/// A compressed message that inflates to 55 MB (about 100 KB on the wire): the server hands
/// on at most `max_payload` of it and closes the connection, without inflating it first.
#[test]
fn a_compression_bomb_closes_the_connection() {
    let (server, port) = start("  compression: true\n", "");
    let (rss_before, _) = memory(server.pid());
    let mut c = RawClient::connect(port, "Sec-WebSocket-Extensions: permessage-deflate\r\n").0;
    assert!(c.deflate_agreed(), "compression negotiated");
    c.frame(0x82, b"CONNECT {\"verbose\":false}\r\nPING\r\n")
        .unwrap();
    assert_eq!(c.until("PONG\r\n"), "PONG\r\n");
    let op = b"PUB sink 10\r\n0123456789\r\n";
    let bomb = deflate(&op.repeat(55 * MIB as usize / op.len()));
    assert!(bomb.len() < 200 * 1024, "{} bytes", bomb.len());
    c.frame(0xc2, &bomb).unwrap();
    // Closed: a PING after it is not answered.
    let _ = c.frame(0x82, b"PING\r\n");
    let rest = c.until_closed();
    assert!(!rest.contains("PONG"), "{rest:?}");
    assert_grown_below(server.pid(), rss_before, 32 * MIB, "the bomb");
    // Others are served.
    let mut c = RawClient::connect(port, "Sec-WebSocket-Extensions: permessage-deflate\r\n").0;
    c.frame(0x82, b"CONNECT {\"verbose\":false}\r\nPING\r\n")
        .unwrap();
    assert_eq!(c.until("PONG\r\n"), "PONG\r\n");
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
    let mut c = RawClient::connect(port, deflate_offer).0;
    c.frame(0x42, &[0u8; 8 * 1024]).unwrap();
    let _ = c.frame(0x00, &[0u8; 1]);
    c.until_closed();
    // Authenticated: the same.
    let mut c = RawClient::connect(port, deflate_offer).0;
    c.frame(
        0x82,
        b"CONNECT {\"verbose\":false,\"user\":\"u\",\"pass\":\"p\"}\r\nPING\r\n",
    )
    .unwrap();
    assert_eq!(c.until("PONG\r\n"), "PONG\r\n");
    let _ = c.frame(0x42, &[0u8; 9 * 1024]);
    let _ = c.frame(0x80, &[0u8; 1]);
    let _ = c.frame(0x82, b"PING\r\n");
    let rest = c.until_closed();
    assert!(!rest.contains("PONG"), "{rest:?}");
    // A compressed message within the bounds is read.
    let mut c = RawClient::connect(port, deflate_offer).0;
    let z = deflate(b"CONNECT {\"verbose\":false,\"user\":\"u\",\"pass\":\"p\"}\r\nPING\r\n");
    c.frame(0xc2, &z).unwrap();
    assert_eq!(c.until("PONG\r\n"), "PONG\r\n");
}
