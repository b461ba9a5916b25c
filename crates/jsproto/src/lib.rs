//! `jsproto`: the pure core of a JetStream server and client.
//!
//! It holds the NATS client-protocol codec ([`wire`]), the `NATS/1.0` header block ([`headers`]),
//! subject validation, matching and the subscription index ([`subject`]), and the JetStream API
//! JSON types with the server's defaults and validation ([`api`]), the file store's record
//! encoding ([`stream`]), the pull-consumer state machine ([`consumer`]), Go duration text
//! ([`duration`]) and a WebSocket client's frames ([`websocket`]).
//!
//! What it never does: open sockets, spawn tasks, read a clock or touch the file system. Bytes
//! come in and go out as [`bytes::Bytes`]/[`bytes::BytesMut`]; time, when a rule needs it, is an
//! argument. The server (`jsserver`) and the client (`jsclient`) share this code.
#![warn(missing_docs)]

pub mod api;
pub mod cluster;
pub mod consumer;
pub mod duration;
mod gojson;
pub mod headers;
pub mod stream;
pub mod subject;
pub mod websocket;
pub mod wire;

/// A decimal number as the protocol writes one: one or more ASCII digits, no sign, no blanks,
/// fitting a `u64`; `None` otherwise (empty, any other byte, overflow). Control-line sizes,
/// `UNSUB` limits and the number tokens of ack subjects are read with it.
pub(crate) fn parse_decimal(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() {
        return None;
    }
    digits.iter().try_fold(0u64, |n, &d| {
        if !d.is_ascii_digit() {
            return None;
        }
        n.checked_mul(10)?.checked_add(u64::from(d - b'0'))
    })
}
