//! tokio-util `Decoder`/`Encoder` pairs for both ends of a connection, and the free encoders.

use bytes::{BufMut, Bytes, BytesMut};
use tokio_util::codec::{Decoder, Encoder};

use super::parse::{args_len, could_begin, ClientHead, Head, ServerHead};
use super::{ClientOp, Connect, Info, Message, Publish, ServerOp, WireError};

/// Size limits a decoder enforces on untrusted input.
///
/// The defaults are nats-server's (`server/const.go`): `max_control_line` 4096 bytes and
/// `max_payload` 1 MiB. A decoder buffers at most `max_control_line + 2` bytes plus
/// [`OP_ALLOWANCE`] while looking for a line end, and at most one whole frame
/// (`line + max_payload + 2`) while waiting for a body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Longest accepted control line arguments, in bytes: what follows the op name and the
    /// blanks after it, up to the `\r\n`, as nats-server measures it (`PUB <4096 bytes>` is
    /// accepted, one more byte is not). Default 4096.
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
/// Op names are read a byte at a time, as nats-server's parser reads them (`server/parser.go`):
/// `CONNECTX {}` is a `CONNECT` with bad JSON (closed without `-ERR`), `PINGX` a `PING`, and
/// `PUBX` an unknown op. A line whose first bytes cannot begin an op is refused as soon as they
/// arrive, without waiting for its end (an op written a byte at a time is fine).
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

    /// Changes both limits (a reloaded config's), for the ops not decoded yet: one whose
    /// control line is already decoded keeps the body limit it was checked against.
    pub fn set_limits(&mut self, limits: Limits) {
        self.framer.limits = limits;
    }
}

/// Bytes a control line may hold before its arguments (the op name and the blanks after it) on
/// top of `max_control_line`, which counts the arguments only (as nats-server counts them).
/// Bounds the search for a line end: a line that has not ended within `max_control_line + 2 +
/// OP_ALLOWANCE` bytes is refused.
pub const OP_ALLOWANCE: usize = 64;

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

/// Writes `n` in decimal without allocating (itoa, as serde_json formats integers).
fn put_decimal(dst: &mut BytesMut, n: u64) {
    dst.put_slice(itoa::Buffer::new().format(n).as_bytes());
}

/// Splits a frame's body into `(headers, payload)`, both zero-copy slices.
fn split_body(
    frame: &Bytes,
    body_start: usize,
    header_len: Option<usize>,
    total_len: usize,
) -> (Option<Bytes>, Bytes) {
    let payload_start = body_start + header_len.unwrap_or(0);
    // An empty header block is no header block: nats-server turns `HPUB s 0 n` into a plain
    // `MSG` for subscribers.
    let headers = header_len
        .filter(|&len| len > 0)
        .map(|_| frame.slice(body_start..payload_start));
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
        // Arguments of `max` bytes after an op name and its blanks, plus `\r\n`, still fit;
        // never look (or wait) further than that.
        let window = max.saturating_add(2).saturating_add(OP_ALLOWANCE);
        let window_end = src.len().min(window);
        let Some(found) = memchr::memchr(b'\n', &src[self.scanned.min(window_end)..window_end])
        else {
            // nats-server's parser fails at the first byte that cannot continue an op name, not
            // at the line end: `xyz…` gets its -ERR at once. Only the first `PREFIX_LEN` bytes
            // decide it, so once that many have been looked at (`scanned`), never again.
            if self.scanned < H::PREFIX_LEN
                && !could_begin(&src[..src.len().min(H::PREFIX_LEN)], H::OPS)
            {
                return Err(WireError::UnknownOp);
            }
            if src.len() >= window {
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
        // Only a line longer than the limit can hold arguments over it; a line that cannot
        // begin an op is an unknown op first, as in nats-server.
        if line_end > max && args_len(&src[..line_end], H::OPS)? > max {
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
            // `len` ≤ max_payload and `body_start` ≤ max_control_line + OP_ALLOWANCE + 2: no
            // overflow unless the limits themselves are near usize::MAX.
            Some(len) => body_start.saturating_add(len).saturating_add(2),
        };
        Ok(Some(Pending {
            head,
            body_start,
            frame_len,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Decodes everything `input` holds with a server codec; panics on error.
    fn client_ops(input: &[u8]) -> Vec<ClientOp> {
        decode_all(&mut ServerCodec::default(), input).expect("valid input")
    }

    fn server_ops(input: &[u8]) -> Vec<ServerOp> {
        decode_all(&mut ClientCodec::new(), input).expect("valid input")
    }

    /// Feeds `input` in one piece, then returns every op up to the first `Ok(None)` or error.
    fn decode_all<D: Decoder>(codec: &mut D, input: &[u8]) -> Result<Vec<D::Item>, D::Error> {
        let mut buf = BytesMut::from(input);
        let mut ops = Vec::new();
        while let Some(op) = codec.decode(&mut buf)? {
            ops.push(op);
        }
        Ok(ops)
    }

    fn server_err(input: &[u8], limits: Limits) -> WireError {
        let mut codec = ServerCodec::new(limits);
        match decode_all(&mut codec, input) {
            Ok(ops) => panic!("no error for {input:?}; got {ops:?}"),
            Err(err) => err,
        }
    }

    fn publish(
        subject: &str,
        reply: Option<&str>,
        headers: Option<&str>,
        payload: &str,
    ) -> ClientOp {
        ClientOp::Pub(Publish {
            subject: Bytes::copy_from_slice(subject.as_bytes()),
            reply: reply.map(|r| Bytes::copy_from_slice(r.as_bytes())),
            headers: headers.map(|h| Bytes::copy_from_slice(h.as_bytes())),
            payload: Bytes::copy_from_slice(payload.as_bytes()),
        })
    }

    fn msg(
        subject: &str,
        sid: &str,
        reply: Option<&str>,
        headers: Option<&str>,
        payload: &str,
    ) -> ServerOp {
        ServerOp::Msg(Message {
            subject: Bytes::copy_from_slice(subject.as_bytes()),
            sid: Bytes::copy_from_slice(sid.as_bytes()),
            reply: reply.map(|r| Bytes::copy_from_slice(r.as_bytes())),
            headers: headers.map(|h| Bytes::copy_from_slice(h.as_bytes())),
            payload: Bytes::copy_from_slice(payload.as_bytes()),
        })
    }

    fn sub(subject: &str, queue_group: Option<&str>, sid: &str) -> ClientOp {
        ClientOp::Sub {
            subject: Bytes::copy_from_slice(subject.as_bytes()),
            queue_group: queue_group.map(|q| Bytes::copy_from_slice(q.as_bytes())),
            sid: Bytes::copy_from_slice(sid.as_bytes()),
        }
    }

    fn unsub(sid: &str, max_msgs: Option<u64>) -> ClientOp {
        ClientOp::Unsub {
            sid: Bytes::copy_from_slice(sid.as_bytes()),
            max_msgs,
        }
    }

    const HDRS: &str = "NATS/1.0\r\nA: B\r\nC: d\r\n\r\n";

    /// Every client op at least once, in the forms real clients write them.
    const CLIENT_STREAM: &[u8] = b"CONNECT {\"verbose\":false,\"headers\":true}\r\nPING\r\n\
        PUB foo 5\r\nhello\r\n\
        PUB foo reply.x 5\r\nhello\r\n\
        HPUB foo 24 29\r\nNATS/1.0\r\nA: B\r\nC: d\r\n\r\nhello\r\n\
        HPUB foo r 12 12\r\nNATS/1.0\r\n\r\n\r\n\
        PUB e 0\r\n\r\n\
        PUB crlf 4\r\n\r\n\r\n\r\n\
        SUB foo 1\r\nSUB foo q 2\r\nUNSUB 1\r\nUNSUB 2 10\r\nPONG\r\n";

    fn client_stream_ops() -> Vec<ClientOp> {
        let connect = Connect {
            verbose: Some(false),
            headers: Some(true),
            ..Connect::default()
        };
        vec![
            ClientOp::Connect(Box::new(connect)),
            ClientOp::Ping,
            publish("foo", None, None, "hello"),
            publish("foo", Some("reply.x"), None, "hello"),
            publish("foo", None, Some(HDRS), "hello"),
            publish("foo", Some("r"), Some("NATS/1.0\r\n\r\n"), ""),
            publish("e", None, None, ""),
            publish("crlf", None, None, "\r\n\r\n"),
            sub("foo", None, "1"),
            sub("foo", Some("q"), "2"),
            unsub("1", None),
            unsub("2", Some(10)),
            ClientOp::Pong,
        ]
    }

    const SERVER_STREAM: &[u8] = b"INFO {\"server_id\":\"S\",\"version\":\"2.15.1\",\"proto\":1,\"headers\":true,\"max_payload\":1048576,\"xkey\":\"X\"} \r\n\
        +OK\r\nPONG\r\nPING\r\n\
        MSG foo 1 5\r\nhello\r\n\
        MSG foo 1 reply.x 5\r\nhello\r\n\
        HMSG foo 1 24 29\r\nNATS/1.0\r\nA: B\r\nC: d\r\n\r\nhello\r\n\
        HMSG _INBOX.abc 9 39 39\r\nNATS/1.0 503\r\nNats-Subject: nothing\r\n\r\n\r\n\
        MSG e 2 0\r\n\r\n\
        -ERR 'Maximum Payload Violation'\r\n";

    fn server_stream_ops() -> Vec<ServerOp> {
        let info = Info {
            server_id: "S".into(),
            version: "2.15.1".into(),
            proto: 1,
            headers: true,
            max_payload: 1_048_576,
            ..Info::default()
        };
        vec![
            ServerOp::Info(Box::new(info)),
            ServerOp::Ok,
            ServerOp::Pong,
            ServerOp::Ping,
            msg("foo", "1", None, None, "hello"),
            msg("foo", "1", Some("reply.x"), None, "hello"),
            msg("foo", "1", None, Some(HDRS), "hello"),
            msg(
                "_INBOX.abc",
                "9",
                None,
                Some("NATS/1.0 503\r\nNats-Subject: nothing\r\n\r\n"),
                "",
            ),
            msg("e", "2", None, None, ""),
            ServerOp::Err("Maximum Payload Violation".into()),
        ]
    }

    #[test]
    fn reference_examples_decode_exactly() {
        assert_eq!(client_ops(CLIENT_STREAM), client_stream_ops());
        assert_eq!(server_ops(SERVER_STREAM), server_stream_ops());
    }

    #[test]
    fn every_op_round_trips_through_both_codecs() {
        for op in client_stream_ops() {
            let mut buf = BytesMut::new();
            ClientCodec::new().encode(&op, &mut buf).unwrap();
            assert_eq!(
                client_ops(&buf),
                [op],
                "{:?}",
                String::from_utf8_lossy(&buf)
            );
        }
        for op in server_stream_ops() {
            let mut buf = BytesMut::new();
            ServerCodec::default().encode(&op, &mut buf).unwrap();
            assert_eq!(
                server_ops(&buf),
                [op],
                "{:?}",
                String::from_utf8_lossy(&buf)
            );
        }
    }

    #[test]
    fn encoders_write_the_reference_bytes() {
        let mut buf = BytesMut::new();
        encode_pub(&mut buf, b"foo", None, None, b"hello");
        encode_pub(&mut buf, b"foo", Some(b"reply.x"), None, b"hello");
        encode_pub(&mut buf, b"foo", None, Some(HDRS.as_bytes()), b"hello");
        encode_pub(&mut buf, b"foo", Some(b""), None, b"");
        assert_eq!(
            &buf[..],
            b"PUB foo 5\r\nhello\r\nPUB foo reply.x 5\r\nhello\r\n\
              HPUB foo 24 29\r\nNATS/1.0\r\nA: B\r\nC: d\r\n\r\nhello\r\nPUB foo 0\r\n\r\n"
        );
        let mut buf = BytesMut::new();
        encode_msg(&mut buf, b"foo", b"1", None, None, b"hello");
        encode_msg(&mut buf, b"foo", b"1", Some(b"reply.x"), None, b"hello");
        encode_msg(
            &mut buf,
            b"foo",
            b"1",
            None,
            Some(HDRS.as_bytes()),
            b"hello",
        );
        assert_eq!(
            &buf[..],
            b"MSG foo 1 5\r\nhello\r\nMSG foo 1 reply.x 5\r\nhello\r\n\
              HMSG foo 1 24 29\r\nNATS/1.0\r\nA: B\r\nC: d\r\n\r\nhello\r\n"
        );
        let mut buf = BytesMut::new();
        encode_err(&mut buf, "Unknown Protocol Operation");
        encode_sub(&mut buf, b"a.>", Some(b"q"), b"7");
        encode_sub(&mut buf, b"a", None, b"8");
        encode_unsub(&mut buf, b"7", Some(2));
        encode_unsub(&mut buf, b"8", None);
        encode_ok(&mut buf);
        encode_ping(&mut buf);
        encode_pong(&mut buf);
        assert_eq!(
            &buf[..],
            b"-ERR 'Unknown Protocol Operation'\r\nSUB a.> q 7\r\nSUB a 8\r\nUNSUB 7 2\r\nUNSUB 8\r\n\
              +OK\r\nPING\r\nPONG\r\n"
        );
        let mut buf = BytesMut::new();
        encode_info(
            &mut buf,
            &Info {
                max_payload: 1_048_576,
                ..Info::default()
            },
        );
        assert!(buf.starts_with(b"INFO {\"server_id\":\"\""));
        assert!(buf.ends_with(b",\"max_payload\":1048576} \r\n"));
        let mut buf = BytesMut::new();
        encode_connect(
            &mut buf,
            &Connect {
                echo: Some(false),
                ..Connect::default()
            },
        );
        assert_eq!(&buf[..], b"CONNECT {\"echo\":false}\r\n");
    }

    #[test]
    fn put_decimal_writes_every_width() {
        for n in [0, 1, 9, 10, 99, 100, 1_048_576, u64::MAX] {
            let mut buf = BytesMut::new();
            put_decimal(&mut buf, n);
            assert_eq!(&buf[..], n.to_string().as_bytes());
        }
    }

    /// Decodes `input` cut into the given chunks, feeding one chunk per `Ok(None)`.
    fn decode_chunked<D: Decoder>(codec: &mut D, chunks: &[&[u8]]) -> Vec<D::Item>
    where
        D::Error: std::fmt::Debug,
    {
        let mut buf = BytesMut::new();
        let mut ops = Vec::new();
        for chunk in chunks {
            buf.extend_from_slice(chunk);
            while let Some(op) = codec.decode(&mut buf).expect("valid input") {
                ops.push(op);
            }
        }
        assert!(buf.is_empty(), "left over: {buf:?}");
        ops
    }

    #[test]
    fn split_at_every_offset_decodes_the_same_ops() {
        for at in 0..=CLIENT_STREAM.len() {
            let (a, b) = CLIENT_STREAM.split_at(at);
            assert_eq!(
                decode_chunked(&mut ServerCodec::default(), &[a, b]),
                client_stream_ops(),
                "split at {at}"
            );
        }
        for at in 0..=SERVER_STREAM.len() {
            let (a, b) = SERVER_STREAM.split_at(at);
            assert_eq!(
                decode_chunked(&mut ClientCodec::new(), &[a, b]),
                server_stream_ops(),
                "split at {at}"
            );
        }
    }

    #[test]
    fn byte_at_a_time_decodes_the_same_ops() {
        let bytes: Vec<&[u8]> = CLIENT_STREAM.chunks(1).collect();
        assert_eq!(
            decode_chunked(&mut ServerCodec::default(), &bytes),
            client_stream_ops()
        );
        let bytes: Vec<&[u8]> = SERVER_STREAM.chunks(1).collect();
        assert_eq!(
            decode_chunked(&mut ClientCodec::new(), &bytes),
            server_stream_ops()
        );
    }

    #[test]
    fn client_quirks_are_accepted() {
        // nats-py: empty reply / queue → doubled blank; nats.go: trailing blank; any case.
        let ops = client_ops(
            b"PUB subj  5\r\nhello\r\nSUB subj  7\r\nUNSUB 7 \r\npub\tsubj\t \t1 \r\nx\r\n\
              sub a q 1\r\nunsub 1 2\r\nping\r\nPong\r\nhPuB h 12 12\r\nNATS/1.0\r\n\r\n\r\n",
        );
        assert_eq!(
            ops,
            [
                publish("subj", None, None, "hello"),
                sub("subj", None, "7"),
                unsub("7", None),
                publish("subj", None, None, "x"),
                sub("a", Some("q"), "1"),
                unsub("1", Some(2)),
                ClientOp::Ping,
                ClientOp::Pong,
                publish("h", None, Some("NATS/1.0\r\n\r\n"), ""),
            ]
        );
    }

    #[test]
    fn lone_lf_ends_a_control_line_like_nats_server() {
        assert_eq!(
            client_ops(b"PING\nPUB a 2\nhi\r\n"),
            [ClientOp::Ping, publish("a", None, None, "hi")]
        );
        assert_eq!(server_ops(b"PONG\n"), [ServerOp::Pong]);
    }

    #[test]
    fn connect_json_may_follow_the_name_without_a_blank_like_nats_server() {
        let connect = Connect {
            verbose: Some(false),
            ..Connect::default()
        };
        assert_eq!(
            client_ops(b"CONNECT{\"verbose\":false}\r\nPING\r\n"),
            [ClientOp::Connect(Box::new(connect)), ClientOp::Ping]
        );
    }

    #[test]
    fn client_info_and_ok_are_ignored_like_nats_server() {
        assert_eq!(client_ops(b"+OK\r\nINFO {}\r\nPING\r\n"), [ClientOp::Ping]);
        // Nothing but ignored ops: no item, nothing left over.
        let mut buf = BytesMut::from(&b"+OK\r\n"[..]);
        assert!(ServerCodec::default().decode(&mut buf).unwrap().is_none());
        assert!(buf.is_empty());
    }

    #[test]
    fn decoded_fields_are_slices_of_one_frame() {
        let mut buf = BytesMut::from(&b"PUB foo bar 5\r\nhello\r\nPING\r\n"[..]);
        let Some(ClientOp::Pub(p)) = ServerCodec::default().decode(&mut buf).unwrap() else {
            panic!("not a pub")
        };
        let base = p.subject.as_ptr() as usize;
        assert_eq!(p.reply.unwrap().as_ptr() as usize, base + 4);
        assert_eq!(p.payload.as_ptr() as usize, base + 11);
        assert_eq!(&buf[..], b"PING\r\n");
    }

    #[test]
    fn partial_input_is_never_an_error() {
        let mut codec = ServerCodec::default();
        let mut buf = BytesMut::from(&b"PUB foo 1000\r\nabc"[..]);
        assert!(codec.decode(&mut buf).unwrap().is_none());
        // The frame's size is known: room for all of it is reserved up front.
        assert!(
            buf.capacity() >= 14 + 1000 + 2,
            "capacity {}",
            buf.capacity()
        );
        buf.extend_from_slice(&[b'x'; 997]);
        assert!(codec.decode(&mut buf).unwrap().is_none());
        buf.extend_from_slice(b"\r");
        assert!(codec.decode(&mut buf).unwrap().is_none());
        buf.extend_from_slice(b"\n");
        let Some(ClientOp::Pub(p)) = codec.decode(&mut buf).unwrap() else {
            panic!()
        };
        assert_eq!(p.payload.len(), 1000);
        assert!(buf.is_empty());
    }

    #[test]
    fn leftover_bytes_at_eof_are_an_error() {
        let mut buf = BytesMut::from(&b"PING\r\nPUB a 5\r\nhel"[..]);
        let mut codec = ServerCodec::default();
        assert_eq!(codec.decode_eof(&mut buf).unwrap(), Some(ClientOp::Ping));
        assert!(matches!(codec.decode_eof(&mut buf), Err(WireError::Io(_))));
    }

    #[test]
    fn unknown_op_is_rejected_with_its_err_text() {
        for bad in [
            &b"FOO\r\n"[..],
            b"PUBX a 1\r\n",
            b"SUBX a 1\r\n",
            b"UNSUBX 1\r\n",
            b"HPUBX\r\n",
            b"-ERR\r\n",
            b"\r\n",
            b" PING\r\n",
            b"MSG a 1 1\r\nx\r\n",
        ] {
            let err = server_err(bad, Limits::default());
            assert!(matches!(err, WireError::UnknownOp), "{bad:?}: {err:?}");
            assert_eq!(err.err_text(), Some("Unknown Protocol Operation"));
        }
        let err = decode_all(&mut ClientCodec::new(), b"PUB a 1\r\nx\r\n").unwrap_err();
        assert!(matches!(err, WireError::UnknownOp));
    }

    #[test]
    fn control_line_too_long_with_and_without_line_end() {
        let limits = Limits {
            max_control_line: 16,
            max_payload: 1024,
        };
        // Arguments exactly at the limit are fine, with CRLF or lone LF: the op name and the
        // blanks after it do not count, as in nats-server.
        let line = b"PUB   abcdefghijklmn 1"; // 16 bytes of arguments
        assert_eq!(
            decode_all(
                &mut ServerCodec::new(limits),
                &[&line[..], b"\r\nx\r\n"].concat()
            )
            .unwrap()
            .len(),
            1
        );
        assert_eq!(
            decode_all(
                &mut ServerCodec::new(limits),
                &[&line[..], b"\nx\r\n"].concat()
            )
            .unwrap()
            .len(),
            1
        );
        // One byte more, with a line end.
        let long = b"PUB abcdefghijklmno 1\r\nx\r\n";
        let err = server_err(long, limits);
        assert!(
            matches!(err, WireError::ControlLineTooLong { max: 16 }),
            "{err:?}"
        );
        assert_eq!(err.err_text(), Some("maximum control line exceeded"));
        let err = server_err(b"PUB abcdefghijklmno 1\nx\r\n", limits);
        assert!(
            matches!(err, WireError::ControlLineTooLong { max: 16 }),
            "{err:?}"
        );
        // Without a line end: wait until the limit, CRLF and an op name could have arrived,
        // then fail.
        let mut codec = ServerCodec::new(limits);
        let mut buf = BytesMut::from(&b"PUB "[..]);
        buf.extend_from_slice(&[b'a'; 13 + OP_ALLOWANCE]);
        assert!(codec.decode(&mut buf).unwrap().is_none());
        buf.extend_from_slice(b"a");
        assert!(matches!(
            codec.decode(&mut buf),
            Err(WireError::ControlLineTooLong { max: 16 })
        ));
        // The client codec applies its own limit.
        let mut codec = ClientCodec::with_limits(limits);
        let mut buf = BytesMut::from(&b"MSG "[..]);
        buf.extend_from_slice(&[b'x'; 100]);
        assert!(matches!(
            codec.decode(&mut buf),
            Err(WireError::ControlLineTooLong { max: 16 })
        ));
        // PING, PONG and +OK have no arguments to measure (nats-server ignores what follows
        // them), but their line end must still arrive within the window.
        let mut ping = b"PING ".to_vec();
        ping.extend_from_slice(&[b'x'; 16 + OP_ALLOWANCE - 5]);
        ping.extend_from_slice(b"\r\n");
        assert_eq!(
            decode_all(&mut ServerCodec::new(limits), &ping).unwrap(),
            [ClientOp::Ping]
        );
        // CONNECT's argument starts right after its name, blank or not.
        let connect = br#"CONNECT{ "verbose" : false }"#; // 21 bytes of argument
        let err = server_err(&[&connect[..], b"\r\n"].concat(), limits);
        assert!(
            matches!(err, WireError::ControlLineTooLong { max: 16 }),
            "{err:?}"
        );
        // A line that cannot begin an op is an unknown op, however long.
        let err = server_err(b"SUBX abcdefghijklmnopq 1\r\n", limits);
        assert!(matches!(err, WireError::UnknownOp), "{err:?}");
    }

    #[test]
    fn a_line_that_cannot_begin_an_op_fails_before_its_end_like_nats_server() {
        // nats-server's parser sends -ERR 'Unknown Protocol Operation' at the first byte that
        // cannot continue an op name, without waiting for the line end.
        for junk in [
            &b"xyz"[..],
            b"x",
            b"\r",
            b" ",
            b"M",
            b"PX",
            b"SUBX",
            b"PUBX",
            b"PUB\r",
            b"HPUBX",
            b"UNSUBX",
            b"-ERRX",
            b"HMX",
            b"+X",
        ] {
            let mut buf = BytesMut::from(junk);
            let err = ServerCodec::default().decode(&mut buf).unwrap_err();
            assert!(matches!(err, WireError::UnknownOp), "{junk:?}: {err:?}");
        }
        // 10 KB of junk: refused at once, not at the control line limit.
        let mut buf = BytesMut::from(&b"xyz".repeat(3414)[..]);
        assert!(matches!(
            ServerCodec::default().decode(&mut buf),
            Err(WireError::UnknownOp)
        ));
        // A byte at a time: refused at the first byte that cannot continue a name.
        let mut codec = ServerCodec::default();
        let mut buf = BytesMut::new();
        for &b in b"SUB" {
            buf.extend_from_slice(&[b]);
            assert!(codec.decode(&mut buf).unwrap().is_none());
        }
        buf.extend_from_slice(b"X");
        assert!(matches!(codec.decode(&mut buf), Err(WireError::UnknownOp)));
        // The client codec reads the server's ops by the same rule.
        for junk in [&b"xyz"[..], b"MSGX", b"C", b"PUB "] {
            let mut buf = BytesMut::from(junk);
            let err = ClientCodec::new().decode(&mut buf).unwrap_err();
            assert!(matches!(err, WireError::UnknownOp), "{junk:?}: {err:?}");
        }
    }

    #[test]
    fn incomplete_lines_that_can_still_become_ops_are_awaited() {
        // Every prefix of every op name, and what nats-server waits on after a name: `PUB `
        // and its arguments, anything after CONNECT, INFO, PING, PONG, +OK.
        for line in [
            &b"PUB a 1"[..],
            b"hpub\ta 1 2",
            b"SUB a 1",
            b"UNSUB 1",
            b"CONNECTX",
            b"CONNECT{",
            b"INFOX",
            b"PINGX",
            b"PONG\r",
            b"+OKX",
            b"-ERR ",
            b"HMSG ",
        ] {
            for end in 0..=line.len() {
                let mut buf = BytesMut::from(&line[..end]);
                assert!(
                    ServerCodec::default().decode(&mut buf).unwrap().is_none(),
                    "{:?}",
                    &line[..end]
                );
            }
        }
        for line in [&b"MSG a 1 1"[..], b"HMSG a 1 1 1", b"INFO {", b"-ERR 'x"] {
            for end in 0..=line.len() {
                let mut buf = BytesMut::from(&line[..end]);
                assert!(
                    ClientCodec::new().decode(&mut buf).unwrap().is_none(),
                    "{:?}",
                    &line[..end]
                );
            }
        }
    }

    #[test]
    fn payload_too_large_is_caught_on_the_control_line() {
        let limits = Limits {
            max_control_line: 4096,
            max_payload: 10,
        };
        assert_eq!(
            decode_all(&mut ServerCodec::new(limits), b"PUB a 10\r\n0123456789\r\n")
                .unwrap()
                .len(),
            1
        );
        // No payload bytes needed to reject it.
        let err = server_err(b"PUB a 11\r\n", limits);
        assert!(
            matches!(err, WireError::PayloadTooLarge { len: 11, max: 10 }),
            "{err:?}"
        );
        assert_eq!(err.err_text(), Some("Maximum Payload Violation"));
        // HPUB counts headers + payload.
        let err = server_err(b"HPUB a 5 11\r\n", limits);
        assert!(
            matches!(err, WireError::PayloadTooLarge { len: 11, max: 10 }),
            "{err:?}"
        );
        // The limit can change between ops.
        let mut codec = ServerCodec::new(limits);
        codec.set_max_payload(11);
        assert_eq!(codec.limits().max_payload, 11);
        assert_eq!(
            decode_all(&mut codec, b"PUB a 11\r\n01234567890\r\n")
                .unwrap()
                .len(),
            1
        );
        let mut codec = ClientCodec::new();
        codec.set_max_payload(1);
        assert!(matches!(
            decode_all(&mut codec, b"MSG a 1 2\r\n"),
            Err(WireError::PayloadTooLarge { len: 2, max: 1 })
        ));
    }

    #[test]
    fn bad_sizes_and_argument_counts_close_silently() {
        for bad in [
            &b"PUB a\r\n"[..],
            b"PUB a -1\r\n",
            b"PUB a x\r\n",
            b"PUB a 99999999999999999999999\r\n",
            b"PUB a b c 1\r\n",
            b"HPUB a 13 12\r\n",
            b"HPUB a 12\r\n",
            b"SUB a\r\n",
            b"SUB \r\n",
            b"UNSUB \r\n",
            b"UNSUB 1 2 3\r\n",
        ] {
            let err = server_err(bad, Limits::default());
            assert!(matches!(err, WireError::InvalidArgs), "{bad:?}: {err:?}");
            assert_eq!(err.err_text(), None);
        }
    }

    #[test]
    fn missing_payload_terminator() {
        for bad in [
            &b"PUB a 4\r\nhello\r\n"[..],
            b"PUB a 5\r\nhello\n\n",
            b"HPUB a 12 12\r\nNATS/1.0\r\n\r\nxx",
        ] {
            let err = server_err(bad, Limits::default());
            assert!(
                matches!(err, WireError::MissingPayloadTerminator),
                "{bad:?}: {err:?}"
            );
            assert_eq!(err.err_text(), Some("Unknown Protocol Operation"));
        }
        let err = decode_all(&mut ClientCodec::new(), b"MSG a 1 1\r\nxx\r\n").unwrap_err();
        assert!(matches!(err, WireError::MissingPayloadTerminator));
    }

    #[test]
    fn bad_connect_json_closes_silently() {
        for bad in [
            &b"CONNECT {\r\n"[..],
            b"CONNECT\r\n",
            // As nats-server reads it: a CONNECT whose JSON is `X {}`.
            b"CONNECTX {}\r\n",
            b"CONNECTX\r\n",
            b"CONNECT [true]\r\n",
            b"CONNECT {\"verbose\":1}\r\n",
            b"CONNECT {\"name\":false}\r\n",
        ] {
            let err = server_err(bad, Limits::default());
            assert!(
                matches!(err, WireError::InvalidConnect(_)),
                "{bad:?}: {err:?}"
            );
            assert_eq!(err.err_text(), None);
        }
        let err = decode_all(&mut ClientCodec::new(), b"INFO [1]\r\n").unwrap_err();
        assert!(matches!(err, WireError::InvalidInfo(_)));
    }
}
