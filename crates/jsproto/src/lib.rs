//! `jsproto`: the pure core of a JetStream server and client.
//!
//! It holds the NATS client-protocol codec ([`wire`]), the `NATS/1.0` header block ([`headers`]),
//! subject validation, matching and the subscription index ([`subject`]), and the JetStream API
//! JSON types with the server's defaults and validation ([`api`]). Later layers add the consumer
//! state machine.
//!
//! What it never does: open sockets, spawn tasks, read a clock or touch the file system. Bytes
//! come in and go out as [`bytes::Bytes`]/[`bytes::BytesMut`]; time, when a rule needs it, is an
//! argument. The server (`jsserver`) and the client (`jsclient`) share this code.
#![warn(missing_docs)]

pub mod api;
pub mod consumer;
mod gojson;
pub mod headers;
pub mod stream;
pub mod subject;
pub mod wire;
