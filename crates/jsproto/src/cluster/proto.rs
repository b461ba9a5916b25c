//! The route protocol: what two servers of a cluster say to each other over one TCP
//! connection. Text lines ending in `\r\n`, tokens separated by blanks, like the client
//! protocol; a message's bytes follow its line, as after `HMSG`.
//!
//! ```text
//! HELLO <json>\r\n                          who I am, my clients' URLs, the routes I know
//! PING\r\n  PONG\r\n                        keepalive
//! RS+ <account> <subject> [<queue>]\r\n     my clients have interest (first subscription)
//! RS- <account> <subject> [<queue>]\r\n     ... no longer (last one gone)
//! RMSG <account> <subject> <hdr_len> <total_len> <nqueues> [<queue>...] [<reply>]\r\n
//!      <total_len bytes: hdr_len bytes of NATS/1.0 header block, then the payload>\r\n
//! DMSG <account> <to> <subject> <hdr_len> <total_len> <nqueues> [<queue>...] [<reply>]\r\n
//!      <bytes>\r\n                           a message for the subscribers of <to>, kept on
//!                                          its own <subject> (a JetStream delivery)
//! RAFT <group> <len>\r\n<len bytes>\r\n        a Raft message for my peer's member of <group>
//! RAFTP <group> <more> <len>\r\n<len bytes>\r\n   a part of one (a snapshot): <more> is 1
//!                                          before the last part, 0 on it
//! RAFTS <group> <offset> <len>\r\n<len bytes>\r\n   bytes of a snapshot's data file,
//!                                          <offset> bytes into it (the Raft message that
//!                                          names the file comes after its last part)
//! -ERR <text>\r\n                           why I am closing this route
//! ```
//!
//! `HELLO` is the first op each side sends and may be sent again later (an update of its
//! `routes` and `connect_urls`). In `RMSG`, `hdr_len` 0 means no header block (a header
//! block is never empty: it starts with `NATS/1.0`); the `nqueues` queue groups are those
//! the receiver must deliver to one local member of; a token after them is the reply
//! subject. A message received over a route is delivered to the receiver's local
//! subscribers only, never sent on (one hop). `RAFT` carries one Raft message (raft-rs's
//! protobuf encoding) between the two servers' members of a JetStream Raft group (the meta
//! group `_meta_`, or a stream's); it never reaches a client. A Raft message larger than a
//! route takes in one op (a snapshot holding a stream's messages) goes as `RAFTP` parts, in
//! order, one such message per group at a time; `RAFT` ops of the same group may come
//! between its parts. A snapshot whose data is a file goes as `RAFTS` parts of the file, in
//! order, then the `RAFT` message whose snapshot names the file (by length and CRC); the
//! receiver writes the parts to disk as they come. See `docs/cluster.md`.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use serde::{Deserialize, Serialize};
use tokio_util::codec::Decoder;

use super::interest::InterestKey;

/// The `HELLO` body: a server introducing itself to a peer (the route protocol's INFO).
/// Unknown fields are ignored and missing ones default, so nodes of different versions
/// understand each other.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Hello {
    /// The sender's server id (56 characters, as in client INFO).
    pub server_id: String,
    /// The sender's `server_name`.
    pub server_name: String,
    /// The sender's cluster name (`cluster { name }`, `--cluster_name`); a peer with another
    /// name is refused.
    pub cluster: String,
    /// The sender's version (jsserver's crate version), informational.
    pub version: String,
    /// Where the sender accepts routes, `host:port`: what its peers gossip and dial.
    pub route_url: String,
    /// The sender's client listener(s), `host:port`: what clients get in INFO `connect_urls`.
    pub connect_urls: Vec<String>,
    /// The `route_url`s of the peers the sender is connected to now (gossip: the receiver
    /// dials those it does not know).
    pub routes: Vec<String>,
    /// Whether the sender runs JetStream (a member of the meta group).
    pub jetstream: bool,
    /// The sender's placement tags (`server_tags`, trimmed and lower-cased): the meta leader
    /// places a stream with `placement.tags` on servers having them all. Empty when none.
    pub tags: Vec<String>,
    /// Whether the sender is a member of a formed meta group: a JetStream server with no
    /// meta log that meets one joins that group (its leader adds it) instead of forming
    /// one of its own.
    #[serde(default)]
    pub meta: bool,
    /// The user a dialing server presents (its first `HELLO` only), checked by a server
    /// with route authorization as nats-server checks a route's `CONNECT`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// The password going with [`Hello::user`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pass: Option<String>,
}

/// One message carried over a route: what the sender's router matched to the receiver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteMsg {
    /// The account the message was published in.
    pub account: Bytes,
    /// The subject it was published to (a literal).
    pub subject: Bytes,
    /// `DMSG`: the subject whose subscribers get it, when not `subject` (a JetStream
    /// delivery to a pull request's reply subject keeps the stored message's subject).
    pub to: Option<Bytes>,
    /// The reply subject, if any.
    pub reply: Option<Bytes>,
    /// The queue groups the receiver picks one local member of each (the sender chose this
    /// node for them); plain subscribers get the message whatever this says.
    pub queues: Vec<Bytes>,
    /// The raw `NATS/1.0` header block, if any.
    pub headers: Option<Bytes>,
    /// The payload.
    pub payload: Bytes,
}

/// One op of the route protocol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RouteOp {
    /// `HELLO <json>`.
    Hello(Hello),
    /// `PING`.
    Ping,
    /// `PONG`.
    Pong,
    /// `RS+`: interest in [`InterestKey`] from the sender's clients.
    Sub(InterestKey),
    /// `RS-`: that interest is gone.
    Unsub(InterestKey),
    /// `RMSG`.
    Msg(RouteMsg),
    /// `-ERR <text>`: the sender is closing the route, for this reason.
    Err(String),
    /// `RAFT <group> <len>`: one Raft message for the receiver's member of `group`.
    Raft {
        /// The Raft group's name (`_meta_`, or `<account>/<stream>`: no blanks).
        group: Bytes,
        /// The encoded Raft message.
        data: Bytes,
    },
    /// `RAFTP <group> <more> <len>`: a part of one Raft message of `group`, the parts in
    /// order; the message is whole at the part with `more` false.
    RaftPart {
        /// The Raft group's name.
        group: Bytes,
        /// Whether more parts follow.
        more: bool,
        /// This part's bytes.
        data: Bytes,
    },
    /// `RAFTS <group> <offset> <len>`: bytes of a snapshot's data file of `group`, `offset`
    /// bytes into it.
    SnapshotPart {
        /// The Raft group's name.
        group: Bytes,
        /// Where in the file they go.
        offset: u64,
        /// The bytes.
        data: Bytes,
    },
}

/// Why a route's byte stream was refused: the receiver closes the route.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RouteError {
    /// A control line longer than the codec's limit.
    #[error("route control line too long")]
    LineTooLong,
    /// A message larger than the codec's limit.
    #[error("route message too large: {0} bytes")]
    TooLarge(usize),
    /// An op or its arguments could not be read.
    #[error("invalid route op: {0}")]
    Invalid(String),
}

impl From<std::io::Error> for RouteError {
    fn from(e: std::io::Error) -> Self {
        RouteError::Invalid(e.to_string())
    }
}

/// Longest control line a [`RouteCodec`] reads by default: 1 MiB (a `HELLO` lists every
/// route and client URL of the cluster).
pub const DEFAULT_MAX_LINE: usize = 1 << 20;

/// Decodes [`RouteOp`]s from a route's bytes, zero-copy (every byte field is a slice of the
/// read buffer).
#[derive(Debug, Clone)]
pub struct RouteCodec {
    /// Longest control line, in bytes, `\r\n` excluded.
    pub max_line: usize,
    /// Largest `RMSG` (headers plus payload), in bytes.
    pub max_msg: usize,
}

impl Default for RouteCodec {
    /// [`DEFAULT_MAX_LINE`] and 64 MiB messages (jsserver's largest `max_payload`).
    fn default() -> Self {
        RouteCodec {
            max_line: DEFAULT_MAX_LINE,
            max_msg: 64 << 20,
        }
    }
}

fn invalid(what: impl Into<String>) -> RouteError {
    RouteError::Invalid(what.into())
}

fn number(token: &Bytes) -> Result<usize, RouteError> {
    crate::parse_decimal(token)
        .and_then(|n| usize::try_from(n).ok())
        .ok_or_else(|| invalid(format!("bad number {:?}", String::from_utf8_lossy(token))))
}

/// The blank-separated tokens of `line` as slices of `line`.
fn tokens(line: &Bytes) -> Vec<Bytes> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, b) in line.iter().enumerate() {
        let blank = *b == b' ' || *b == b'\t';
        match (blank, start) {
            (true, Some(s)) => {
                out.push(line.slice(s..i));
                start = None;
            }
            (false, None) => start = Some(i),
            _ => {}
        }
    }
    if let Some(s) = start {
        out.push(line.slice(s..));
    }
    out
}

fn interest_key(args: &[Bytes], op: &str) -> Result<InterestKey, RouteError> {
    match args {
        [account, subject] => Ok(InterestKey::new(account.clone(), subject.clone(), None)),
        [account, subject, queue] => Ok(InterestKey::new(
            account.clone(),
            subject.clone(),
            Some(queue.clone()),
        )),
        _ => Err(invalid(format!("{op} takes 2 or 3 arguments"))),
    }
}

impl Decoder for RouteCodec {
    type Item = RouteOp;
    type Error = RouteError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<RouteOp>, RouteError> {
        let Some(nl) = memchr::memchr(b'\n', src) else {
            if src.len() > self.max_line {
                return Err(RouteError::LineTooLong);
            }
            return Ok(None);
        };
        let line_len = if nl > 0 && src[nl - 1] == b'\r' {
            nl - 1
        } else {
            nl
        };
        if line_len > self.max_line {
            return Err(RouteError::LineTooLong);
        }
        // Peek at the op first: an RMSG is taken whole, line and bytes, or not at all.
        let line = Bytes::copy_from_slice(&src[..line_len]);
        let toks = tokens(&line);
        let Some(op) = toks.first() else {
            src.advance(nl + 1);
            return Err(invalid("empty line"));
        };
        let op_name = op.to_ascii_uppercase();
        if op_name == b"RMSG" || op_name == b"DMSG" {
            let dmsg = op_name == b"DMSG";
            // A DMSG's <to> comes after the account: take it out, the rest reads as RMSG.
            let mut args: Vec<Bytes> = toks[1..].to_vec();
            let to = if dmsg {
                if args.len() < 6 {
                    return Err(invalid("DMSG takes at least 6 arguments"));
                }
                Some(args.remove(1))
            } else {
                None
            };
            let args = &args[..];
            if args.len() < 5 {
                return Err(invalid("RMSG takes at least 5 arguments"));
            }
            let hdr_len = number(&args[2])?;
            let total = number(&args[3])?;
            let nq = number(&args[4])?;
            if hdr_len > total {
                return Err(invalid("RMSG header length beyond total"));
            }
            if total > self.max_msg {
                return Err(RouteError::TooLarge(total));
            }
            let rest = &args[5..];
            let reply = match rest.len().checked_sub(nq) {
                Some(0) => None,
                Some(1) => Some(rest[nq].clone()),
                _ => return Err(invalid("RMSG queue count does not match its arguments")),
            };
            let need = nl + 1 + total + 2;
            if src.len() < need {
                src.reserve(need - src.len());
                return Ok(None);
            }
            src.advance(nl + 1);
            let body = src.split_to(total).freeze();
            if &src[..2] != b"\r\n" {
                return Err(invalid("RMSG not followed by CRLF"));
            }
            src.advance(2);
            let headers = (hdr_len > 0).then(|| body.slice(..hdr_len));
            return Ok(Some(RouteOp::Msg(RouteMsg {
                account: args[0].clone(),
                subject: args[1].clone(),
                to,
                reply,
                queues: rest[..nq].to_vec(),
                headers,
                payload: body.slice(hdr_len..),
            })));
        }
        if op_name == b"RAFT" || op_name == b"RAFTP" || op_name == b"RAFTS" {
            let part = op_name == b"RAFTP";
            let file = op_name == b"RAFTS";
            let mut offset = 0;
            let (group, more, len) = match &toks[..] {
                [_, group, len] if !part && !file => (group, false, len),
                [_, group, at, len] if file => {
                    offset = number(at)? as u64;
                    (group, false, len)
                }
                _ if file => return Err(invalid("RAFTS takes 3 arguments")),
                [_, group, more, len] if part => {
                    let more = match &more[..] {
                        b"0" => false,
                        b"1" => true,
                        _ => return Err(invalid("RAFTP's <more> is 0 or 1")),
                    };
                    (group, more, len)
                }
                _ if part => return Err(invalid("RAFTP takes 3 arguments")),
                _ => return Err(invalid("RAFT takes 2 arguments")),
            };
            let len = number(len)?;
            if len > self.max_msg {
                return Err(RouteError::TooLarge(len));
            }
            let need = nl + 1 + len + 2;
            if src.len() < need {
                src.reserve(need - src.len());
                return Ok(None);
            }
            src.advance(nl + 1);
            let data = src.split_to(len).freeze();
            if &src[..2] != b"\r\n" {
                return Err(invalid("RAFT not followed by CRLF"));
            }
            src.advance(2);
            if file {
                return Ok(Some(RouteOp::SnapshotPart {
                    group: group.clone(),
                    offset,
                    data,
                }));
            }
            if part {
                return Ok(Some(RouteOp::RaftPart {
                    group: group.clone(),
                    more,
                    data,
                }));
            }
            return Ok(Some(RouteOp::Raft {
                group: group.clone(),
                data,
            }));
        }
        src.advance(nl + 1);
        let args = &toks[1..];
        let op = match &op_name[..] {
            b"PING" => RouteOp::Ping,
            b"PONG" => RouteOp::Pong,
            b"RS+" => RouteOp::Sub(interest_key(args, "RS+")?),
            b"RS-" => RouteOp::Unsub(interest_key(args, "RS-")?),
            b"HELLO" => {
                let json = line.slice(op.len()..);
                RouteOp::Hello(
                    serde_json::from_slice(&json).map_err(|e| invalid(format!("HELLO: {e}")))?,
                )
            }
            b"-ERR" => {
                let text = String::from_utf8_lossy(&line[op.len()..]);
                RouteOp::Err(text.trim().trim_matches('\'').to_string())
            }
            other => {
                return Err(invalid(format!(
                    "unknown op {:?}",
                    String::from_utf8_lossy(other)
                )))
            }
        };
        Ok(Some(op))
    }
}

/// Appends `HELLO <json>\r\n`.
pub fn encode_hello(dst: &mut BytesMut, hello: &Hello) {
    dst.put_slice(b"HELLO ");
    let json = serde_json::to_vec(hello).expect("a Hello always serializes");
    dst.put_slice(&json);
    dst.put_slice(b"\r\n");
}

/// Appends `PING\r\n`.
pub fn encode_ping(dst: &mut BytesMut) {
    dst.put_slice(b"PING\r\n");
}

/// Appends `PONG\r\n`.
pub fn encode_pong(dst: &mut BytesMut) {
    dst.put_slice(b"PONG\r\n");
}

/// Appends `-ERR '<text>'\r\n`.
pub fn encode_route_err(dst: &mut BytesMut, text: &str) {
    dst.put_slice(b"-ERR '");
    dst.put_slice(text.as_bytes());
    dst.put_slice(b"'\r\n");
}

/// Appends `RS+ <account> <subject> [<queue>]\r\n` (`added`) or the same with `RS-`.
pub fn encode_rs(
    dst: &mut BytesMut,
    added: bool,
    account: &[u8],
    subject: &[u8],
    queue: Option<&[u8]>,
) {
    dst.reserve(8 + account.len() + subject.len() + queue.map_or(0, |q| q.len() + 1));
    dst.put_slice(if added { b"RS+ " } else { b"RS- " });
    dst.put_slice(account);
    dst.put_u8(b' ');
    dst.put_slice(subject);
    if let Some(q) = queue {
        dst.put_u8(b' ');
        dst.put_slice(q);
    }
    dst.put_slice(b"\r\n");
}

/// Appends `RAFT <group> <len>\r\n<data>\r\n`: `group` is a token without blanks.
pub fn encode_raft(dst: &mut BytesMut, group: &[u8], data: &[u8]) {
    let mut num = itoa::Buffer::new();
    dst.reserve(16 + group.len() + data.len());
    dst.put_slice(b"RAFT ");
    dst.put_slice(group);
    dst.put_u8(b' ');
    dst.put_slice(num.format(data.len()).as_bytes());
    dst.put_slice(b"\r\n");
    dst.put_slice(data);
    dst.put_slice(b"\r\n");
}

/// Appends `RAFTP <group> <more> <len>\r\n<data>\r\n`: one part of a Raft message of
/// `group` (`more`: not the last).
pub fn encode_raft_part(dst: &mut BytesMut, group: &[u8], more: bool, data: &[u8]) {
    let mut num = itoa::Buffer::new();
    dst.reserve(20 + group.len() + data.len());
    dst.put_slice(b"RAFTP ");
    dst.put_slice(group);
    dst.put_slice(if more { b" 1 " } else { b" 0 " });
    dst.put_slice(num.format(data.len()).as_bytes());
    dst.put_slice(b"\r\n");
    dst.put_slice(data);
    dst.put_slice(b"\r\n");
}

/// Appends `RAFTS <group> <offset> <len>\r\n<data>\r\n`: bytes of a snapshot's data
/// file of `group`, `offset` bytes into it.
pub fn encode_snapshot_part(dst: &mut BytesMut, group: &[u8], offset: u64, data: &[u8]) {
    let mut num = itoa::Buffer::new();
    dst.reserve(40 + group.len() + data.len());
    dst.put_slice(b"RAFTS ");
    dst.put_slice(group);
    dst.put_u8(b' ');
    dst.put_slice(num.format(offset).as_bytes());
    dst.put_u8(b' ');
    dst.put_slice(num.format(data.len()).as_bytes());
    dst.put_slice(b"\r\n");
    dst.put_slice(data);
    dst.put_slice(b"\r\n");
}

/// Appends one `RMSG` with its bytes, or a `DMSG` when `to` is given and is not `subject`:
/// `account`, `to`, `subject`, `reply` and `queues` are tokens without blanks (the caller's
/// subjects were checked when published or subscribed).
#[allow(clippy::too_many_arguments)]
pub fn encode_rmsg(
    dst: &mut BytesMut,
    account: &[u8],
    to: Option<&[u8]>,
    subject: &[u8],
    reply: Option<&[u8]>,
    queues: &[Bytes],
    headers: Option<&[u8]>,
    payload: &[u8],
) {
    let hdr_len = headers.map_or(0, <[u8]>::len);
    let total = hdr_len + payload.len();
    let queues_len: usize = queues.iter().map(|q| q.len() + 1).sum();
    dst.reserve(
        48 + account.len()
            + to.map_or(0, <[u8]>::len)
            + subject.len()
            + reply.map_or(0, |r| r.len() + 1)
            + queues_len
            + total,
    );
    let mut num = itoa::Buffer::new();
    match to.filter(|to| *to != subject) {
        Some(to) => {
            dst.put_slice(b"DMSG ");
            dst.put_slice(account);
            dst.put_u8(b' ');
            dst.put_slice(to);
        }
        None => {
            dst.put_slice(b"RMSG ");
            dst.put_slice(account);
        }
    }
    dst.put_u8(b' ');
    dst.put_slice(subject);
    dst.put_u8(b' ');
    dst.put_slice(num.format(hdr_len).as_bytes());
    dst.put_u8(b' ');
    dst.put_slice(num.format(total).as_bytes());
    dst.put_u8(b' ');
    dst.put_slice(num.format(queues.len()).as_bytes());
    for q in queues {
        dst.put_u8(b' ');
        dst.put_slice(q);
    }
    if let Some(r) = reply.filter(|r| !r.is_empty()) {
        dst.put_u8(b' ');
        dst.put_slice(r);
    }
    dst.put_slice(b"\r\n");
    if let Some(h) = headers {
        dst.put_slice(h);
    }
    dst.put_slice(payload);
    dst.put_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_all(bytes: &[u8]) -> Result<Vec<RouteOp>, RouteError> {
        let mut codec = RouteCodec::default();
        let mut buf = BytesMut::from(bytes);
        let mut out = Vec::new();
        while let Some(op) = codec.decode(&mut buf)? {
            out.push(op);
        }
        assert!(buf.is_empty(), "left over: {buf:?}");
        Ok(out)
    }

    #[test]
    fn every_op_round_trips() {
        let hello = Hello {
            server_id: "NABC".into(),
            server_name: "n1".into(),
            cluster: "C".into(),
            version: "0.1.0".into(),
            route_url: "127.0.0.1:6222".into(),
            connect_urls: vec!["127.0.0.1:4222".into()],
            routes: vec!["127.0.0.1:6223".into()],
            jetstream: true,
            tags: vec!["az:1".into(), "disk:ssd".into()],
            meta: true,
            user: Some("ruser".into()),
            pass: Some("rpass".into()),
        };
        let msg = RouteMsg {
            account: Bytes::from_static(b"$G"),
            subject: Bytes::from_static(b"orders.new"),
            to: None,
            reply: Some(Bytes::from_static(b"_INBOX.x")),
            queues: vec![Bytes::from_static(b"workers"), Bytes::from_static(b"audit")],
            headers: Some(Bytes::from_static(b"NATS/1.0\r\nA: b\r\n\r\n")),
            payload: Bytes::from_static(b"hello\r\nworld"),
        };
        let delivery = RouteMsg {
            to: Some(Bytes::from_static(b"_INBOX.abc.1")),
            ..msg.clone()
        };
        let plain = RouteMsg {
            reply: None,
            queues: vec![],
            headers: None,
            payload: Bytes::new(),
            ..msg.clone()
        };
        let key = InterestKey::new(
            Bytes::from_static(b"$G"),
            Bytes::from_static(b"orders.*"),
            Some(Bytes::from_static(b"workers")),
        );
        let mut buf = BytesMut::new();
        encode_hello(&mut buf, &hello);
        encode_ping(&mut buf);
        encode_pong(&mut buf);
        encode_rs(&mut buf, true, b"$G", b"orders.*", Some(b"workers"));
        encode_rs(&mut buf, false, b"$G", b"orders.*", Some(b"workers"));
        for m in [&msg, &delivery, &plain] {
            encode_rmsg(
                &mut buf,
                &m.account,
                m.to.as_deref(),
                &m.subject,
                m.reply.as_deref(),
                &m.queues,
                m.headers.as_deref(),
                &m.payload,
            );
        }
        encode_raft(&mut buf, b"_meta_", b"\x08\x01\r\n\x00");
        encode_raft_part(&mut buf, b"$G/ORDERS", true, b"snap");
        encode_raft_part(&mut buf, b"$G/ORDERS", false, b"");
        encode_snapshot_part(&mut buf, b"$G/ORDERS", 8388608, b"file\r\nbytes");
        encode_route_err(&mut buf, "Duplicate Route");
        assert_eq!(
            decode_all(&buf).unwrap(),
            vec![
                RouteOp::Hello(hello),
                RouteOp::Ping,
                RouteOp::Pong,
                RouteOp::Sub(key.clone()),
                RouteOp::Unsub(key),
                RouteOp::Msg(msg),
                RouteOp::Msg(delivery),
                RouteOp::Msg(plain),
                RouteOp::Raft {
                    group: Bytes::from_static(b"_meta_"),
                    data: Bytes::from_static(b"\x08\x01\r\n\x00"),
                },
                RouteOp::RaftPart {
                    group: Bytes::from_static(b"$G/ORDERS"),
                    more: true,
                    data: Bytes::from_static(b"snap"),
                },
                RouteOp::RaftPart {
                    group: Bytes::from_static(b"$G/ORDERS"),
                    more: false,
                    data: Bytes::new(),
                },
                RouteOp::SnapshotPart {
                    group: Bytes::from_static(b"$G/ORDERS"),
                    offset: 8388608,
                    data: Bytes::from_static(b"file\r\nbytes"),
                },
                RouteOp::Err("Duplicate Route".into()),
            ]
        );
    }

    #[test]
    fn a_message_split_anywhere_decodes_the_same() {
        let mut buf = BytesMut::new();
        encode_rmsg(
            &mut buf,
            b"A",
            None,
            b"s",
            Some(b"r"),
            &[],
            None,
            b"0123456789",
        );
        encode_rmsg(&mut buf, b"A", Some(b"t"), b"s", None, &[], None, b"xy");
        encode_raft(&mut buf, b"$G/ORDERS", b"raft\r\nbytes");
        encode_snapshot_part(&mut buf, b"$G/ORDERS", 3, b"abc");
        encode_ping(&mut buf);
        let whole = decode_all(&buf).unwrap();
        for cut in 0..buf.len() {
            let mut codec = RouteCodec::default();
            let mut input = BytesMut::from(&buf[..cut]);
            let mut got = Vec::new();
            while let Some(op) = codec.decode(&mut input).unwrap() {
                got.push(op);
            }
            input.extend_from_slice(&buf[cut..]);
            while let Some(op) = codec.decode(&mut input).unwrap() {
                got.push(op);
            }
            assert_eq!(got, whole, "cut at {cut}");
        }
    }

    #[test]
    fn bad_input_is_refused() {
        for bad in [
            &b"BOGUS x\r\n"[..],
            b"RS+ onlyone\r\n",
            b"RS+ a b c d\r\n",
            b"RMSG A s 0 3 2 q\r\nabc\r\n",
            b"RMSG A s 4 3 0\r\nabc\r\n",
            b"RMSG A s 0 3 0\r\nabcXY",
            b"HELLO {not json\r\n",
            b"RAFT g\r\n",
            b"DMSG A t s 0 3\r\nabc\r\n",
            b"RAFT g 3\r\nabcXY",
            b"RAFTP g 3\r\nabc\r\n",
            b"RAFTP g 2 3\r\nabc\r\n",
            b"RAFT g 1 3\r\nabc\r\n",
            b"RAFTS g 3\r\nabc\r\n",
            b"RAFTS g x 3\r\nabc\r\n",
            b"RAFTS g 0 3\r\nabcXY",
        ] {
            assert!(
                decode_all(bad).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        let mut codec = RouteCodec {
            max_line: 8,
            max_msg: 4,
        };
        let mut buf = BytesMut::from(&b"PING PING PING"[..]);
        assert_eq!(codec.decode(&mut buf), Err(RouteError::LineTooLong));
        let mut codec = RouteCodec {
            max_line: 100,
            max_msg: 4,
        };
        let mut buf = BytesMut::from(&b"RMSG A s 0 5 0\r\n"[..]);
        assert_eq!(codec.decode(&mut buf), Err(RouteError::TooLarge(5)));
    }
}
