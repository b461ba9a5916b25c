//! tokio-util `Decoder`/`Encoder` pairs for both ends of a connection, and the free encoders.

use bytes::{BufMut, Bytes, BytesMut};
use tokio_util::codec::{Decoder, Encoder};

use super::parse::{ClientHead, Head, ServerHead};
use super::{ClientOp, Connect, Info, Message, Publish, ServerOp, WireError};

/// Size limits a decoder enforces on untrusted input.
///
/// The defaults are nats-server's (`server/const.go`): `max_control_line` 4096 bytes and
/// `max_payload` 1 MiB. A decoder buffers at most `max_control_line + 2` bytes while looking for
/// a line end, and at most one whole frame (`line + max_payload + 2`) while waiting for a body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Longest accepted control line, in bytes, excluding its `\r\n`. Default 4096.
    pub max_control_line: usize,
    /// Largest accepted body (`#total bytes`: headers + payload), in bytes. Default 1 MiB
    /// (1048576); nats-server allows up to 64 MiB by configuration.
    pub max_payload: usize,
}

impl Limits {
    /// nats-server's default control-line limit, in bytes.
    pub const DEFAULT_MAX_CONTROL_LINE: usize = 4096;
    /// nats-server's default payload limit, in bytes (1 MiB).
    pub const DEFAULT_MAX_PAYLOAD: usize = 1024 * 1024;
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_control_line: Self::DEFAULT_MAX_CONTROL_LINE,
            max_payload: Self::DEFAULT_MAX_PAYLOAD,
        }
    }
}

/// The server end: decodes [`ClientOp`]s, encodes [`ServerOp`]s.
///
/// Decoding rules (as nats-server's parser): a control line ends at `\n` with an optional `\r`
/// before it; op names are case-insensitive; arguments are separated by runs of spaces/tabs;
/// trailing blanks are ignored; a body is read by its announced size and must be followed by
/// `\r\n`. `INFO` and `+OK` sent by a client are consumed and ignored, as nats-server does.
/// Whether `HPUB` is allowed (the client's `CONNECT` said `headers:true`) is for the caller to
/// check.
///
/// Every decoded op holds zero-copy slices of one frame split off the read buffer; decoding a
/// `PUB` allocates nothing else. Any `Err` from [`decode`](Decoder::decode) means: send
/// [`WireError::err_text`] if any, then close.
#[derive(Debug)]
pub struct ServerCodec {
    framer: Framer<ClientHead>,
}

impl ServerCodec {
    /// A server codec enforcing `limits` on what clients send.
    pub fn new(limits: Limits) -> Self {
        Self {
            framer: Framer::new(limits),
        }
    }

    /// The limits in force.
    pub fn limits(&self) -> Limits {
        self.framer.limits
    }

    /// Changes the largest accepted `PUB`/`HPUB` body, in bytes, for ops whose control line has
    /// not been decoded yet. Advertise the same value in [`Info::max_payload`].
    pub fn set_max_payload(&mut self, max_payload: usize) {
        self.framer.limits.max_payload = max_payload;
    }
}

/// The client end: decodes [`ServerOp`]s, encodes [`ClientOp`]s.
///
/// Same framing rules as [`ServerCodec`]. Its default limits trust the server more than a server
/// trusts clients: 64 KiB control lines (an `INFO` with many `connect_urls` can exceed 4096
/// bytes) and 64 MiB bodies (nats-server's configurable maximum).
#[derive(Debug)]
pub struct ClientCodec {
    framer: Framer<ServerHead>,
}

impl ClientCodec {
    /// Default limits of a client codec: 64 KiB control line, 64 MiB body.
    pub const DEFAULT_LIMITS: Limits = Limits {
        max_control_line: 64 * 1024,
        max_payload: 64 * 1024 * 1024,
    };

    /// A client codec with [`ClientCodec::DEFAULT_LIMITS`].
    pub fn new() -> Self {
        Self::with_limits(Self::DEFAULT_LIMITS)
    }

    /// A client codec enforcing `limits` on what the server sends.
    pub fn with_limits(limits: Limits) -> Self {
        Self {
            framer: Framer::new(limits),
        }
    }

    /// The limits in force.
    pub fn limits(&self) -> Limits {
        self.framer.limits
    }

    /// Changes the largest accepted `MSG`/`HMSG` body, in bytes.
    pub fn set_max_payload(&mut self, max_payload: usize) {
        self.framer.limits.max_payload = max_payload;
    }
}

impl Default for ServerCodec {
    /// A server codec with [`Limits::default`].
    fn default() -> Self {
        Self::new(Limits::default())
    }
}

impl Default for ClientCodec {
    fn default() -> Self {
        Self::new()
    }
}

impl Decoder for ServerCodec {
    type Item = ClientOp;
    type Error = WireError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<ClientOp>, WireError> {
        loop {
            let Some(Frame {
                head,
                bytes,
                body_start,
            }) = self.framer.next_frame(src)?
            else {
                return Ok(None);
            };
            let op = match head {
                ClientHead::Connect(json) => {
                    ClientOp::Connect(Box::new(Connect::from_json(&bytes[json])?))
                }
                ClientHead::Pub {
                    subject,
                    reply,
                    header_len,
                    total_len,
                } => {
                    let (headers, payload) = split_body(&bytes, body_start, header_len, total_len);
                    ClientOp::Pub(Publish {
                        subject: bytes.slice(subject),
                        reply: reply.map(|r| bytes.slice(r)),
                        headers,
                        payload,
                    })
                }
                ClientHead::Sub {
                    subject,
                    queue_group,
                    sid,
                } => ClientOp::Sub {
                    subject: bytes.slice(subject),
                    queue_group: queue_group.map(|q| bytes.slice(q)),
                    sid: bytes.slice(sid),
                },
                ClientHead::Unsub { sid, max_msgs } => ClientOp::Unsub {
                    sid: bytes.slice(sid),
                    max_msgs,
                },
                ClientHead::Ping => ClientOp::Ping,
                ClientHead::Pong => ClientOp::Pong,
                ClientHead::Ignored => continue,
            };
            return Ok(Some(op));
        }
    }
}

impl Decoder for ClientCodec {
    type Item = ServerOp;
    type Error = WireError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<ServerOp>, WireError> {
        let Some(Frame {
            head,
            bytes,
            body_start,
        }) = self.framer.next_frame(src)?
        else {
            return Ok(None);
        };
        let op = match head {
            ServerHead::Info(json) => ServerOp::Info(Box::new(Info::from_json(&bytes[json])?)),
            ServerHead::Msg {
                subject,
                sid,
                reply,
                header_len,
                total_len,
            } => {
                let (headers, payload) = split_body(&bytes, body_start, header_len, total_len);
                ServerOp::Msg(Message {
                    subject: bytes.slice(subject),
                    sid: bytes.slice(sid),
                    reply: reply.map(|r| bytes.slice(r)),
                    headers,
                    payload,
                })
            }
            ServerHead::Ping => ServerOp::Ping,
            ServerHead::Pong => ServerOp::Pong,
            ServerHead::Ok => ServerOp::Ok,
            ServerHead::Err(text) => {
                ServerOp::Err(String::from_utf8_lossy(&bytes[text]).into_owned())
            }
        };
        Ok(Some(op))
    }
}

impl Encoder<&ServerOp> for ServerCodec {
    type Error = WireError;

    fn encode(&mut self, op: &ServerOp, dst: &mut BytesMut) -> Result<(), WireError> {
        match op {
            ServerOp::Info(info) => encode_info(dst, info),
            ServerOp::Msg(m) => {
                encode_msg(
                    dst,
                    &m.subject,
                    &m.sid,
                    m.reply.as_deref(),
                    m.headers.as_deref(),
                    &m.payload,
                );
            }
            ServerOp::Ping => encode_ping(dst),
            ServerOp::Pong => encode_pong(dst),
            ServerOp::Ok => encode_ok(dst),
            ServerOp::Err(text) => encode_err(dst, text),
        }
        Ok(())
    }
}

impl Encoder<ServerOp> for ServerCodec {
    type Error = WireError;

    fn encode(&mut self, op: ServerOp, dst: &mut BytesMut) -> Result<(), WireError> {
        self.encode(&op, dst)
    }
}

impl Encoder<&ClientOp> for ClientCodec {
    type Error = WireError;

    fn encode(&mut self, op: &ClientOp, dst: &mut BytesMut) -> Result<(), WireError> {
        match op {
            ClientOp::Connect(connect) => encode_connect(dst, connect),
            ClientOp::Pub(p) => {
                encode_pub(
                    dst,
                    &p.subject,
                    p.reply.as_deref(),
                    p.headers.as_deref(),
                    &p.payload,
                );
            }
            ClientOp::Sub {
                subject,
                queue_group,
                sid,
            } => {
                encode_sub(dst, subject, queue_group.as_deref(), sid);
            }
            ClientOp::Unsub { sid, max_msgs } => encode_unsub(dst, sid, *max_msgs),
            ClientOp::Ping => encode_ping(dst),
            ClientOp::Pong => encode_pong(dst),
        }
        Ok(())
    }
}

impl Encoder<ClientOp> for ClientCodec {
    type Error = WireError;

    fn encode(&mut self, op: ClientOp, dst: &mut BytesMut) -> Result<(), WireError> {
        self.encode(&op, dst)
    }
}

/// Appends `MSG <subject> <sid> [reply] <#bytes>\r\n<payload>\r\n`, or `HMSG` with
/// `<#hdr bytes> <#total bytes>` when `headers` is `Some` (the raw header block, written
/// verbatim).
///
/// Reserves the room it needs once, then only copies. An empty `reply` is written as no reply.
/// The caller guarantees that `subject`, `sid` and `reply` are non-empty tokens without blanks
/// or line breaks; nothing is checked here.
pub fn encode_msg(
    dst: &mut BytesMut,
    subject: &[u8],
    sid: &[u8],
    reply: Option<&[u8]>,
    headers: Option<&[u8]>,
    payload: &[u8],
) {
    let reply = reply.filter(|r| !r.is_empty());
    dst.reserve(msg_capacity(
        subject.len() + 1 + sid.len(),
        reply,
        headers,
        payload,
    ));
    dst.put_slice(if headers.is_some() { b"HMSG " } else { b"MSG " });
    dst.put_slice(subject);
    dst.put_u8(b' ');
    dst.put_slice(sid);
    put_body(dst, reply, headers, payload);
}

/// Appends `PUB <subject> [reply] <#bytes>\r\n<payload>\r\n`, or `HPUB` with
/// `<#hdr bytes> <#total bytes>` when `headers` is `Some` (the raw header block, written
/// verbatim).
///
/// Reserves the room it needs once, then only copies. An empty `reply` is written as no reply.
/// The caller guarantees that `subject` and `reply` are non-empty tokens without blanks or line
/// breaks, and that the total size fits the server's `max_payload`; nothing is checked here.
pub fn encode_pub(
    dst: &mut BytesMut,
    subject: &[u8],
    reply: Option<&[u8]>,
    headers: Option<&[u8]>,
    payload: &[u8],
) {
    let reply = reply.filter(|r| !r.is_empty());
    dst.reserve(msg_capacity(subject.len(), reply, headers, payload));
    dst.put_slice(if headers.is_some() { b"HPUB " } else { b"PUB " });
    dst.put_slice(subject);
    put_body(dst, reply, headers, payload);
}

/// Appends `SUB <subject> [queue group] <sid>\r\n`. Arguments must be tokens without blanks.
pub fn encode_sub(dst: &mut BytesMut, subject: &[u8], queue_group: Option<&[u8]>, sid: &[u8]) {
    let queue_group = queue_group.filter(|q| !q.is_empty());
    dst.reserve(8 + subject.len() + queue_group.map_or(0, |q| q.len() + 1) + sid.len());
    dst.put_slice(b"SUB ");
    dst.put_slice(subject);
    if let Some(queue) = queue_group {
        dst.put_u8(b' ');
        dst.put_slice(queue);
    }
    dst.put_u8(b' ');
    dst.put_slice(sid);
    dst.put_slice(b"\r\n");
}

/// Appends `UNSUB <sid> [max_msgs]\r\n`. `sid` must be a token without blanks.
pub fn encode_unsub(dst: &mut BytesMut, sid: &[u8], max_msgs: Option<u64>) {
    dst.reserve(9 + sid.len() + MAX_DIGITS);
    dst.put_slice(b"UNSUB ");
    dst.put_slice(sid);
    if let Some(max) = max_msgs {
        dst.put_u8(b' ');
        put_decimal(dst, max);
    }
    dst.put_slice(b"\r\n");
}

/// Appends `INFO <json> \r\n`, with the space before `\r\n` that nats-server writes.
pub fn encode_info(dst: &mut BytesMut, info: &Info) {
    dst.put_slice(b"INFO ");
    serde_json::to_writer(dst.writer(), info).expect(
        "Info serializes infallibly: string keys, no maps, and BytesMut never fails writes",
    );
    dst.put_slice(b" \r\n");
}

/// Appends `CONNECT <json>\r\n`.
pub fn encode_connect(dst: &mut BytesMut, connect: &Connect) {
    dst.put_slice(b"CONNECT ");
    serde_json::to_writer(dst.writer(), connect).expect(
        "Connect serializes infallibly: string keys, no maps, and BytesMut never fails writes",
    );
    dst.put_slice(b"\r\n");
}

/// Appends `-ERR '<text>'\r\n`. `text` must not contain line breaks.
pub fn encode_err(dst: &mut BytesMut, text: &str) {
    dst.reserve(9 + text.len());
    dst.put_slice(b"-ERR '");
    dst.put_slice(text.as_bytes());
    dst.put_slice(b"'\r\n");
}

/// Appends `PING\r\n`.
pub fn encode_ping(dst: &mut BytesMut) {
    dst.put_slice(b"PING\r\n");
}

/// Appends `PONG\r\n`.
pub fn encode_pong(dst: &mut BytesMut) {
    dst.put_slice(b"PONG\r\n");
}

/// Appends `+OK\r\n`.
pub fn encode_ok(dst: &mut BytesMut) {
    dst.put_slice(b"+OK\r\n");
}

/// Most decimal digits of a `u64`/`usize`.
const MAX_DIGITS: usize = 20;

/// Bytes needed for `H?(PUB|MSG) <args>` where `args_len` covers subject [+ sid].
fn msg_capacity(
    args_len: usize,
    reply: Option<&[u8]>,
    headers: Option<&[u8]>,
    payload: &[u8],
) -> usize {
    let header_len = headers.map_or(0, <[u8]>::len);
    // op + space, args, [space reply], [space hdr], space total, CRLF, body, CRLF
    5 + args_len
        + reply.map_or(0, |r| r.len() + 1)
        + 2 * (MAX_DIGITS + 1)
        + 2
        + header_len
        + payload.len()
        + 2
}

/// Writes ` [reply] [#hdr] #total\r\n<headers><payload>\r\n`.
fn put_body(dst: &mut BytesMut, reply: Option<&[u8]>, headers: Option<&[u8]>, payload: &[u8]) {
    if let Some(reply) = reply {
        dst.put_u8(b' ');
        dst.put_slice(reply);
    }
    let header_len = headers.map_or(0, <[u8]>::len);
    if headers.is_some() {
        dst.put_u8(b' ');
        put_decimal(dst, header_len as u64);
    }
    dst.put_u8(b' ');
    put_decimal(dst, (header_len + payload.len()) as u64);
    dst.put_slice(b"\r\n");
    if let Some(headers) = headers {
        dst.put_slice(headers);
    }
    dst.put_slice(payload);
    dst.put_slice(b"\r\n");
}

/// Writes `n` in decimal without allocating.
fn put_decimal(dst: &mut BytesMut, mut n: u64) {
    let mut buf = [0u8; MAX_DIGITS];
    let mut start = buf.len();
    loop {
        start -= 1;
        // `n % 10` is a single digit, so the cast cannot truncate.
        buf[start] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    dst.put_slice(&buf[start..]);
}

/// Splits a frame's body into `(headers, payload)`, both zero-copy slices.
fn split_body(
    frame: &Bytes,
    body_start: usize,
    header_len: Option<usize>,
    total_len: usize,
) -> (Option<Bytes>, Bytes) {
    let payload_start = body_start + header_len.unwrap_or(0);
    let headers = header_len.map(|_| frame.slice(body_start..payload_start));
    (headers, frame.slice(payload_start..body_start + total_len))
}

/// One complete op: its parsed control line and the frame it was split from.
struct Frame<H> {
    head: H,
    /// The whole frame: control line, terminator, and body + `\r\n` if any.
    bytes: Bytes,
    /// Offset of the body (just after the control line's `\n`).
    body_start: usize,
}

/// A control line parsed while its body is still arriving.
#[derive(Debug)]
struct Pending<H> {
    head: H,
    body_start: usize,
    frame_len: usize,
}

/// The framing shared by both codecs: find the line within the limit, parse it, wait for the
/// body by length, split off the frame.
#[derive(Debug)]
struct Framer<H> {
    limits: Limits,
    /// Bytes at the front of the buffer already searched for `\n` without finding it.
    scanned: usize,
    /// The parsed control line of a frame whose body is incomplete.
    pending: Option<Pending<H>>,
}

impl<H: Head> Framer<H> {
    fn new(limits: Limits) -> Self {
        Self {
            limits,
            scanned: 0,
            pending: None,
        }
    }

    fn next_frame(&mut self, src: &mut BytesMut) -> Result<Option<Frame<H>>, WireError> {
        let pending = match self.pending.take() {
            Some(pending) => pending,
            None => match self.read_head(src)? {
                Some(pending) => pending,
                None => return Ok(None),
            },
        };
        if src.len() < pending.frame_len {
            // The size is known and within limits: make room for the rest in one go.
            src.reserve(pending.frame_len - src.len());
            self.pending = Some(pending);
            return Ok(None);
        }
        let Pending {
            head,
            body_start,
            frame_len,
        } = pending;
        let bytes = src.split_to(frame_len).freeze();
        if frame_len > body_start && !bytes.ends_with(b"\r\n") {
            return Err(WireError::MissingPayloadTerminator);
        }
        Ok(Some(Frame {
            head,
            bytes,
            body_start,
        }))
    }

    /// Finds and parses the next control line; `None` if its end has not arrived yet.
    fn read_head(&mut self, src: &BytesMut) -> Result<Option<Pending<H>>, WireError> {
        let max = self.limits.max_control_line;
        // A line of `max` bytes plus `\r\n` still fits; never look (or wait) further than that.
        let window_end = src.len().min(max.saturating_add(2));
        let Some(found) = src[self.scanned.min(window_end)..window_end]
            .iter()
            .position(|&b| b == b'\n')
        else {
            if src.len() >= max.saturating_add(2) {
                return Err(WireError::ControlLineTooLong { max });
            }
            self.scanned = src.len();
            return Ok(None);
        };
        let newline = self.scanned + found;
        self.scanned = 0;
        let line_end = if newline > 0 && src[newline - 1] == b'\r' {
            newline - 1
        } else {
            newline
        };
        if line_end > max {
            return Err(WireError::ControlLineTooLong { max });
        }
        let head = H::parse(&src[..line_end])?;
        let body_start = newline + 1;
        let frame_len = match head.body_len() {
            None => body_start,
            Some(len) if len > self.limits.max_payload => {
                return Err(WireError::PayloadTooLarge {
                    len,
                    max: self.limits.max_payload,
                });
            }
            // `len` ≤ max_payload and `body_start` ≤ max_control_line + 2: no overflow unless
            // the limits themselves are near usize::MAX.
            Some(len) => body_start.saturating_add(len).saturating_add(2),
        };
        Ok(Some(Pending {
            head,
            body_start,
            frame_len,
        }))
    }
}
