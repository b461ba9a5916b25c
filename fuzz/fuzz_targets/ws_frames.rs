//! Feeds arbitrary bytes to `jsproto::websocket::FrameDecoder` (a WebSocket client's frames,
//! as the server reads them), in chunks whose size comes from the first input byte; the second
//! byte picks compression (bit 0) and `max_payload` (bits 1-3: 16 bytes to 2 KiB).
//!
//! Checks, for any input: no panic; whenever the decoder waits for more input, it holds less
//! than one header and control frame (140 bytes) of the input; the compressed message it
//! keeps is within `8 × max_payload`; a piece of data is never larger than what was taken
//! from the input or one inflate chunk (and `max_payload`); a control frame's payload is at
//! most 125 bytes; errors stick; and the events do not depend on how the input was cut (the
//! same data, control frames and error as when it is fed whole). That a compressed message
//! never inflates past `max_payload` is `jsproto`'s unit test.
#![no_main]

use bytes::{Bytes, BytesMut};
use jsproto::websocket::{
    max_compressed_message, Event, FrameDecoder, FrameError, INFLATE_CHUNK, MAX_CONTROL_PAYLOAD,
};
use libfuzzer_sys::fuzz_target;

/// What a run gave: the data between control frames (joined), the control frames, the error.
#[derive(Debug, PartialEq, Eq)]
enum Seen {
    Data(Vec<u8>),
    Ping(Bytes),
    Pong,
    Close(Bytes),
    Error(FrameError),
}

fuzz_target!(|input: &[u8]| {
    let [chunk, flags, data @ ..] = input else { return };
    // 0 → everything at once, otherwise chunks of 1..=255 bytes.
    let chunk = if *chunk == 0 { data.len().max(1) } else { usize::from(*chunk) };
    let compression = flags & 1 != 0;
    let max_payload = 16usize << ((flags >> 1) & 7);

    let cut = drive(data, chunk, compression, max_payload);
    let whole = drive(data, data.len().max(1), compression, max_payload);
    assert_eq!(cut, whole, "the events depend on how the input was cut");
});

/// Feeds `data` in `chunk`-sized pieces until the end or the first error, checking the
/// bounds as it goes; returns what it saw.
fn drive(data: &[u8], chunk: usize, compression: bool, max_payload: usize) -> Vec<Seen> {
    let mut decoder = FrameDecoder::new(compression, max_payload);
    let mut buf = BytesMut::new();
    let mut seen = Vec::new();
    for piece in data.chunks(chunk) {
        buf.extend_from_slice(piece);
        loop {
            let before = buf.len();
            let event = match decoder.decode(&mut buf) {
                Ok(Some(event)) => event,
                Ok(None) => {
                    assert!(buf.len() < 140, "waiting with {} bytes buffered", buf.len());
                    break;
                }
                Err(e) => {
                    // Errors stick.
                    assert_eq!(decoder.decode(&mut buf), Err(e.clone()));
                    seen.push(Seen::Error(e));
                    return seen;
                }
            };
            assert!(
                decoder.held() <= max_compressed_message(max_payload),
                "{} compressed bytes held",
                decoder.held()
            );
            match event {
                Event::Data(bytes) => {
                    assert!(!bytes.is_empty(), "an empty piece of data");
                    // A piece of a frame is at most what was taken from the input; an
                    // inflated piece at most one inflate chunk and max_payload.
                    let consumed = before - buf.len();
                    assert!(
                        bytes.len() <= consumed || bytes.len() <= INFLATE_CHUNK.min(max_payload),
                        "a piece of {} bytes after taking {consumed}",
                        bytes.len()
                    );
                    match seen.last_mut() {
                        Some(Seen::Data(prev)) => prev.extend_from_slice(&bytes),
                        _ => seen.push(Seen::Data(bytes.to_vec())),
                    }
                }
                Event::Ping(p) => {
                    assert!(p.len() <= MAX_CONTROL_PAYLOAD);
                    seen.push(Seen::Ping(p));
                }
                Event::Pong => seen.push(Seen::Pong),
                Event::Close(p) => {
                    assert!(p.len() <= MAX_CONTROL_PAYLOAD);
                    seen.push(Seen::Close(p));
                }
            }
        }
    }
    seen
}
