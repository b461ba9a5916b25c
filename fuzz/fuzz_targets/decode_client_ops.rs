//! Feeds arbitrary bytes to both decoders, in chunks whose size comes from the first input byte.
//!
//! Checks, for any input: no panic; the decoder never waits for more input while holding more
//! than one maximal frame (its limits bound memory); and every op it accepts re-encodes to bytes
//! that decode to the same op.
#![no_main]

use bytes::BytesMut;
use jsproto::wire::{ClientCodec, Limits, ServerCodec};
use libfuzzer_sys::fuzz_target;
use tokio_util::codec::{Decoder, Encoder};

/// Small limits so that the fuzzer reaches them quickly.
const LIMITS: Limits = Limits { max_control_line: 256, max_payload: 1024 };

/// Limits for re-decoding what we encoded: re-serialized JSON may be longer than the input's.
const ROOMY: Limits = Limits { max_control_line: 1 << 20, max_payload: 1 << 20 };

fuzz_target!(|input: &[u8]| {
    let Some((&chunk, data)) = input.split_first() else { return };
    // 0 → everything at once, otherwise chunks of 1..=255 bytes.
    let chunk = if chunk == 0 { data.len().max(1) } else { usize::from(chunk) };

    let ops = drive(ServerCodec::new(LIMITS), data, chunk);
    for op in ops {
        let mut wire = BytesMut::new();
        ClientCodec::new().encode(&op, &mut wire).expect("encoding into memory");
        let again = ServerCodec::new(ROOMY).decode(&mut wire).expect("re-encoded op decodes");
        assert_eq!(again.as_ref(), Some(&op), "re-encoded op decodes differently");
        assert!(wire.is_empty(), "re-encoded op left bytes behind");
    }

    let ops = drive(ClientCodec::with_limits(LIMITS), data, chunk);
    for op in ops {
        let mut wire = BytesMut::new();
        ServerCodec::default().encode(&op, &mut wire).expect("encoding into memory");
        let again = ClientCodec::with_limits(ROOMY).decode(&mut wire).expect("re-encoded op decodes");
        assert_eq!(again.as_ref(), Some(&op), "re-encoded op decodes differently");
        assert!(wire.is_empty(), "re-encoded op left bytes behind");
    }
});

/// Feeds `data` in `chunk`-sized pieces until the end or the first error; returns the ops.
fn drive<D: Decoder>(mut codec: D, data: &[u8], chunk: usize) -> Vec<D::Item> {
    let bound = LIMITS.max_control_line + 2 + LIMITS.max_payload + 2;
    let mut buf = BytesMut::new();
    let mut ops = Vec::new();
    for piece in data.chunks(chunk) {
        buf.extend_from_slice(piece);
        loop {
            match codec.decode(&mut buf) {
                Ok(Some(op)) => ops.push(op),
                Ok(None) => {
                    assert!(buf.len() < bound, "waiting with {} bytes buffered", buf.len());
                    break;
                }
                Err(_) => return ops,
            }
        }
    }
    ops
}
