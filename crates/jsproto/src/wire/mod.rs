//! The NATS client protocol codec.
//!
//! ```text
//!            ServerCodec                                ClientCodec
//!  bytes ──▶ decode ──▶ ClientOp ──▶ server    client ──▶ ClientOp ──▶ encode ──▶ bytes
//!  bytes ◀── encode ◀── ServerOp ◀── server    client ◀── ServerOp ◀── decode ◀── bytes
//! ```
//!
//! * [`ClientOp`] (client → server) and [`ServerOp`] (server → client) are the ops as values;
//!   every byte field is a zero-copy [`bytes::Bytes`] slice of the received frame. [`Connect`]
//!   and [`Info`] are the JSON bodies of `CONNECT` and `INFO`.
//! * [`ServerCodec`] and [`ClientCodec`] implement tokio-util's `Decoder`/`Encoder`, bounded by
//!   [`Limits`] (nats-server defaults: 4096-byte control line, 1 MiB payload).
//! * [`encode_msg`], [`encode_pub`] and friends append one op to a `BytesMut` for hot paths that
//!   hold borrowed slices rather than ops.
//! * [`WireError`] says why a stream was rejected and, through [`WireError::err_text`], which
//!   `-ERR` nats-server would send before closing.
//!
//! Framing follows nats-server's parser (`server/parser.go`): a control line ends at `\n` (a
//! preceding `\r` is dropped), the op name is case-insensitive and read a byte at a time (so
//! `CONNECTX {}` is a `CONNECT` with bad JSON, `PUBX` an unknown op, and a line whose first bytes
//! cannot begin an op is refused before its end arrives), arguments are separated by runs of
//! spaces or tabs and trailing blanks are ignored. A payload is taken by its announced size and
//! must be followed by `\r\n`. See `nats-protocol.md` in the shared reference for the observed behaviour.
//!
//! # Example
//!
//! ```
//! use bytes::BytesMut;
//! use jsproto::wire::{ClientOp, ServerCodec, ServerOp};
//! use tokio_util::codec::{Decoder, Encoder};
//!
//! let mut codec = ServerCodec::default();
//! let mut input = BytesMut::from(&b"PUB foo reply.x 5\r\nhello\r\nPI"[..]);
//! let Some(ClientOp::Pub(publish)) = codec.decode(&mut input)? else { unreachable!() };
//! assert_eq!((&publish.subject[..], &publish.payload[..]), (&b"foo"[..], &b"hello"[..]));
//! assert_eq!(codec.decode(&mut input)?, None); // `PI` is incomplete: wait for more bytes
//!
//! let mut output = BytesMut::new();
//! codec.encode(ServerOp::Pong, &mut output)?;
//! assert_eq!(&output[..], b"PONG\r\n");
//! # Ok::<(), jsproto::wire::WireError>(())
//! ```

mod codec;
mod error;
mod op;
mod parse;

pub use codec::{
    encode_connect, encode_err, encode_info, encode_msg, encode_ok, encode_ping, encode_pong,
    encode_pub, encode_sub, encode_unsub, ClientCodec, Limits, ServerCodec, OP_ALLOWANCE,
};
pub use error::WireError;
pub use op::{ClientOp, Connect, Info, Message, Publish, ServerOp};
