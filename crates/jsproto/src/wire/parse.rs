//! The control-line grammar (nom 8, complete parsers).
//!
//! The codec first finds the end of the line, then hands the complete line (without its
//! terminator) to [`client_line`] or [`server_line`]. They return a head whose byte fields are
//! [`Span`]s (offsets into the line), so that the codec can later slice them out of the frozen
//! frame without copying and without parsing the line twice.
//!
//! ```text
//! line  = name ( blank+ arg *( blank+ arg ) blank* )   PUB HPUB SUB UNSUB MSG HMSG
//!       / name ( blank *any )                           -ERR (the rest of the line)
//!       / name blank* *any                              CONNECT INFO (the rest of the line)
//!       / name *any                                     PING PONG +OK (ignored)
//! name  = one of the side's op names, matched case-insensitively, no leading blank
//! arg   = 1*( any byte but blank )                      blank = SP / HTAB
//! ```
//! This is how nats-server's byte-by-byte parser (`server/parser.go`) reads a line: a name is
//! matched byte by byte, not as a blank-separated word, so `CONNECTX {}` is a `CONNECT` whose
//! JSON is `X {}` and `PINGX` a `PING`, while `PUBX` fails at the `X`. [`could_begin`] applies
//! the same rule to the start of a line whose end has not arrived yet.
//! Ops with an optional argument (`PUB`'s reply, `SUB`'s queue group, ...) are told apart by
//! argument count, as nats-server's `processPub` does.

use std::ops::Range;

use nom::bytes::complete::{take_till1, take_while};
use nom::character::complete::space0;
use nom::combinator::rest;
use nom::sequence::preceded;
use nom::{IResult, Parser};

use super::WireError;

/// Byte range of a field inside the control line (and so inside the frame, which starts with it).
pub(crate) type Span = Range<usize>;

/// The most arguments any op takes (`HMSG subject sid reply hdr total`).
const MAX_ARGS: usize = 5;

/// nats-server's `parseSize` rejects sizes longer than nine digits (999 MB).
const MAX_SIZE_DIGITS: usize = 9;

/// A parsed client control line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ClientHead {
    /// `CONNECT`: span of the JSON (blanks trimmed).
    Connect(Span),
    /// `PUB` (`header_len: None`) or `HPUB`.
    Pub {
        subject: Span,
        reply: Option<Span>,
        header_len: Option<usize>,
        total_len: usize,
    },
    Sub {
        subject: Span,
        queue_group: Option<Span>,
        sid: Span,
    },
    Unsub {
        sid: Span,
        max_msgs: Option<u64>,
    },
    Ping,
    Pong,
    /// `INFO` or `+OK` from a client: nats-server accepts and ignores them.
    Ignored,
}

/// A parsed server control line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ServerHead {
    /// `INFO`: span of the JSON (blanks trimmed).
    Info(Span),
    /// `MSG` (`header_len: None`) or `HMSG`.
    Msg {
        subject: Span,
        sid: Span,
        reply: Option<Span>,
        header_len: Option<usize>,
        total_len: usize,
    },
    Ping,
    Pong,
    Ok,
    /// `-ERR`: span of the text, quotes removed.
    Err(Span),
}

/// What a control line announces after it: nothing, or a body of `total` bytes + `\r\n`.
pub(crate) trait Head: Sized {
    /// The op names this side reads.
    const OPS: &'static [OpSpec];
    /// How many leading bytes of a line decide whether it can still begin one of [`Head::OPS`].
    const PREFIX_LEN: usize = prefix_len(Self::OPS);
    /// Parses one complete control line, terminator removed.
    fn parse(line: &[u8]) -> Result<Self, WireError>;
    /// Total body size (headers + payload) announced by the line, if it has a body.
    fn body_len(&self) -> Option<usize>;
}

impl Head for ClientHead {
    const OPS: &'static [OpSpec] = CLIENT_OPS;

    fn parse(line: &[u8]) -> Result<Self, WireError> {
        client_line(line)
    }

    fn body_len(&self) -> Option<usize> {
        match self {
            Self::Pub { total_len, .. } => Some(*total_len),
            _ => None,
        }
    }
}

impl Head for ServerHead {
    const OPS: &'static [OpSpec] = SERVER_OPS;

    fn parse(line: &[u8]) -> Result<Self, WireError> {
        server_line(line)
    }

    fn body_len(&self) -> Option<usize> {
        match self {
            Self::Msg { total_len, .. } => Some(*total_len),
            _ => None,
        }
    }
}

/// Op names known to either side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OpName {
    Connect,
    Pub,
    Hpub,
    Sub,
    Unsub,
    Ping,
    Pong,
    Info,
    Msg,
    Hmsg,
    Ok,
    Err,
}

/// How the bytes right after an op's name are read, as nats-server's byte-by-byte parser
/// (`server/parser.go`) reads them: its answer depends on where the first unexpected byte is,
/// not on the blank-separated word the name is part of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AfterName {
    /// Blank-separated arguments: the byte after the name, if the line has one, must be a blank
    /// (the parser's `OP_PUB` state wants `' '` or `'\t'`); any other byte, `\r` included, is an
    /// unknown op (`PUBX a 1`, `SUBX`, `HPUB\r`).
    Blank,
    /// One argument starting right after the name and the blanks after it, if any (`OP_CONNECT`
    /// skips blanks, then any byte starts `CONNECT_ARG`): `CONNECTX {}` is a `CONNECT` whose
    /// argument is `X {}`, and `CONNECT{}` a valid one.
    Rest,
    /// Whatever follows the name up to the line end is ignored (`OP_PING` waits for `\n`):
    /// `PINGX` is a `PING`.
    Ignored,
}

/// One op name a side reads, and how the bytes after it are read.
#[derive(Debug)]
pub(crate) struct OpSpec {
    /// The name, upper case; matched case-insensitively.
    name: &'static [u8],
    op: OpName,
    after: AfterName,
}

const fn spec(name: &'static [u8], op: OpName, after: AfterName) -> OpSpec {
    OpSpec { name, op, after }
}

/// The op names nats-server's parser walks on a client connection (`server/parser.go`, client
/// kind). No name is a prefix of another, so a line matches at most one.
///
/// `MSG` is not among them (a client's `M` is refused at once), but `HMSG` is: the parser
/// follows `H`, `M`, `S`, `G` for any connection kind. What nats-server then does with a
/// client's `HMSG` line is not reproduced: the line is refused as an unknown op.
const CLIENT_OPS: &[OpSpec] = &[
    spec(b"PUB", OpName::Pub, AfterName::Blank),
    spec(b"HPUB", OpName::Hpub, AfterName::Blank),
    spec(b"SUB", OpName::Sub, AfterName::Blank),
    spec(b"UNSUB", OpName::Unsub, AfterName::Blank),
    spec(b"PING", OpName::Ping, AfterName::Ignored),
    spec(b"PONG", OpName::Pong, AfterName::Ignored),
    spec(b"CONNECT", OpName::Connect, AfterName::Rest),
    spec(b"INFO", OpName::Info, AfterName::Rest),
    spec(b"+OK", OpName::Ok, AfterName::Ignored),
    spec(b"-ERR", OpName::Err, AfterName::Blank),
    spec(b"HMSG", OpName::Hmsg, AfterName::Blank),
];

/// The op names a client reads from a server, with the same rules as nats-server's parser
/// (the Go client's parser has the same states for them).
const SERVER_OPS: &[OpSpec] = &[
    spec(b"MSG", OpName::Msg, AfterName::Blank),
    spec(b"HMSG", OpName::Hmsg, AfterName::Blank),
    spec(b"PING", OpName::Ping, AfterName::Ignored),
    spec(b"PONG", OpName::Pong, AfterName::Ignored),
    spec(b"INFO", OpName::Info, AfterName::Rest),
    spec(b"+OK", OpName::Ok, AfterName::Ignored),
    spec(b"-ERR", OpName::Err, AfterName::Blank),
];

/// How many leading bytes of a line decide whether it can still begin one of `ops`: the
/// longest name and the byte after it.
const fn prefix_len(ops: &[OpSpec]) -> usize {
    let mut longest = 0;
    let mut i = 0;
    while i < ops.len() {
        if ops[i].name.len() > longest {
            longest = ops[i].name.len();
        }
        i += 1;
    }
    longest + 1
}

/// The op of `ops` whose name starts `line` (case-insensitively), if any.
fn find_op<'s>(line: &[u8], ops: &'s [OpSpec]) -> Option<&'s OpSpec> {
    ops.iter().find(|spec| {
        line.len() >= spec.name.len() && line[..spec.name.len()].eq_ignore_ascii_case(spec.name)
    })
}

/// Whether `start`, the first bytes of a line whose end has not arrived yet, can still begin
/// one of `ops`: nats-server's parser would not have failed on any of them yet.
///
/// True while `start` is a prefix of a name (so an op written a byte at a time is fine); once
/// a whole name is there, the byte after it must be a blank for [`AfterName::Blank`] ops.
/// Only the first [`prefix_len`] bytes can matter.
pub(crate) fn could_begin(start: &[u8], ops: &[OpSpec]) -> bool {
    ops.iter().any(|spec| {
        let name = spec.name;
        if start.len() <= name.len() {
            name[..start.len()].eq_ignore_ascii_case(start)
        } else {
            start[..name.len()].eq_ignore_ascii_case(name)
                && (spec.after != AfterName::Blank || is_blank(start[name.len()]))
        }
    })
}

/// Length of a complete line's arguments as nats-server measures them against
/// `max_control_line`: what follows the op name and the blanks after it. Ops whose arguments
/// are ignored (`PING`, `PONG`, `+OK`) have none: nats-server never measures them.
///
/// # Errors
///
/// [`WireError::UnknownOp`] if the line does not start with one of `ops` followed as
/// [`AfterName`] says: nats-server fails on that before it could measure anything.
pub(crate) fn args_len(line: &[u8], ops: &[OpSpec]) -> Result<usize, WireError> {
    let (spec, rest) = split_op(line, ops)?;
    Ok(match spec.after {
        AfterName::Ignored => 0,
        AfterName::Blank | AfterName::Rest => {
            rest.len() - rest.iter().take_while(|&&b| is_blank(b)).count()
        }
    })
}

/// Parses a line sent by a client (decoded by the server).
///
/// # Errors
///
/// [`WireError::UnknownOp`] for an op a client may not send, [`WireError::InvalidArgs`] for a
/// wrong argument count or a bad size.
pub(crate) fn client_line(line: &[u8]) -> Result<ClientHead, WireError> {
    let (spec, args_in) = split_op(line, CLIENT_OPS)?;
    let op = spec.op;
    // An op that takes arguments must be followed by a blank: nats-server answers `PUB` (or
    // `-ERR`) alone with `Unknown Protocol Operation`, its parser meeting the line end where it
    // wants a blank, but closes silently on `PUB ` with nothing after it.
    if spec.after == AfterName::Blank && args_in.is_empty() {
        return Err(WireError::UnknownOp);
    }
    let span = |part: &[u8]| span_of(line, part);
    let head = match op {
        OpName::Connect => ClientHead::Connect(span(rest_of_line(args_in))),
        OpName::Pub | OpName::Hpub => {
            let args = args(args_in)?;
            let (subject, reply, sizes) = match (op, args.as_slice()) {
                (OpName::Pub, [subject, size]) => (subject, None, [None, Some(size)]),
                (OpName::Pub, [subject, reply, size]) => (subject, Some(reply), [None, Some(size)]),
                (OpName::Hpub, [subject, hdr, size]) => (subject, None, [Some(hdr), Some(size)]),
                (OpName::Hpub, [subject, reply, hdr, size]) => {
                    (subject, Some(reply), [Some(hdr), Some(size)])
                }
                _ => return Err(WireError::InvalidArgs),
            };
            let (header_len, total_len) = sizes_of(sizes)?;
            ClientHead::Pub {
                subject: span(subject),
                reply: reply.map(|r| span(r)),
                header_len,
                total_len,
            }
        }
        OpName::Sub => match sub_args(args_in)?.as_slice() {
            [subject, sid] => ClientHead::Sub {
                subject: span(subject),
                queue_group: None,
                sid: span(sid),
            },
            [subject, queue, sid] => ClientHead::Sub {
                subject: span(subject),
                queue_group: Some(span(queue)),
                sid: span(sid),
            },
            _ => return Err(WireError::InvalidArgs),
        },
        OpName::Unsub => match sub_args(args_in)?.as_slice() {
            // `UNSUB ` with a blank and nothing else: nats-server closes silently (a bare
            // `UNSUB` is refused above).
            [] => return Err(WireError::InvalidArgs),
            [sid] => ClientHead::Unsub {
                sid: span(sid),
                max_msgs: None,
            },
            // A max that is not a positive number means "unsubscribe now", as nats-server
            // reads it (`UNSUB 1 abc`, `UNSUB 1 -1` keep the connection).
            [sid, max] => ClientHead::Unsub {
                sid: span(sid),
                max_msgs: parse_u64(max).ok().filter(|&m| m > 0),
            },
            _ => return Err(WireError::InvalidArgs),
        },
        OpName::Ping => ClientHead::Ping,
        OpName::Pong => ClientHead::Pong,
        OpName::Info | OpName::Ok => ClientHead::Ignored,
        // `HMSG` (in CLIENT_OPS only to match nats-server byte by byte) and `MSG` (not in it).
        OpName::Msg | OpName::Hmsg => return Err(WireError::UnknownOp),
        // A client's `-ERR` followed by a blank: nats-server closes without a reply.
        OpName::Err => return Err(WireError::UnexpectedErr),
    };
    Ok(head)
}

/// Parses a line sent by a server (decoded by the client).
///
/// # Errors
///
/// [`WireError::UnknownOp`] for an op a server does not send, [`WireError::InvalidArgs`] for a
/// wrong argument count or a bad size.
pub(crate) fn server_line(line: &[u8]) -> Result<ServerHead, WireError> {
    let (spec, args_in) = split_op(line, SERVER_OPS)?;
    let op = spec.op;
    let span = |part: &[u8]| span_of(line, part);
    let head = match op {
        OpName::Info => ServerHead::Info(span(rest_of_line(args_in))),
        OpName::Msg | OpName::Hmsg => {
            let args = args(args_in)?;
            let (subject, sid, reply, sizes) = match (op, args.as_slice()) {
                (OpName::Msg, [subject, sid, size]) => (subject, sid, None, [None, Some(size)]),
                (OpName::Msg, [subject, sid, reply, size]) => {
                    (subject, sid, Some(reply), [None, Some(size)])
                }
                (OpName::Hmsg, [subject, sid, hdr, size]) => {
                    (subject, sid, None, [Some(hdr), Some(size)])
                }
                (OpName::Hmsg, [subject, sid, reply, hdr, size]) => {
                    (subject, sid, Some(reply), [Some(hdr), Some(size)])
                }
                _ => return Err(WireError::InvalidArgs),
            };
            let (header_len, total_len) = sizes_of(sizes)?;
            ServerHead::Msg {
                subject: span(subject),
                sid: span(sid),
                reply: reply.map(|r| span(r)),
                header_len,
                total_len,
            }
        }
        OpName::Ping => ServerHead::Ping,
        OpName::Pong => ServerHead::Pong,
        OpName::Ok => ServerHead::Ok,
        // A bare `-ERR` is read as an empty error text.
        OpName::Err => ServerHead::Err(span(unquote(rest_of_line(args_in)))),
        // Not in SERVER_OPS.
        OpName::Connect | OpName::Pub | OpName::Hpub | OpName::Sub | OpName::Unsub => {
            return Err(WireError::UnknownOp)
        }
    };
    Ok(head)
}

/// Splits off the op name: the line must start with one of `ops` (no leading blank, as in
/// nats-server), and the byte after the name of an [`AfterName::Blank`] op, if the line has
/// one, must be a blank.
fn split_op<'l, 's>(
    line: &'l [u8],
    ops: &'s [OpSpec],
) -> Result<(&'s OpSpec, &'l [u8]), WireError> {
    // `let … else`, not `ok_or`: an error built eagerly is dropped on every good line.
    let Some(spec) = find_op(line, ops) else {
        return Err(WireError::UnknownOp);
    };
    let rest = &line[spec.name.len()..];
    if spec.after == AfterName::Blank && rest.first().is_some_and(|&b| !is_blank(b)) {
        return Err(WireError::UnknownOp);
    }
    Ok((spec, rest))
}

fn is_blank(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

/// What separates a `SUB`'s or `UNSUB`'s arguments: a blank or a CR, as nats-server's
/// `splitArg` splits them (`SUB a\r1` subscribes sid `1`; a stray CR before the line's CRLF is
/// ignored). `PUB` and `HPUB` arguments are split on blanks only (nats-server's own loop in
/// `processPub`), so a CR there stays in the argument and the line is refused.
fn is_sub_separator(b: u8) -> bool {
    is_blank(b) || b == b'\r'
}

/// Up to [`MAX_ARGS`] blank-separated arguments, then only blanks to the end of the line.
///
/// `input` starts at a blank or is empty ([`split_op`] checked the byte after the name), so
/// every argument follows at least one blank. A plain loop over nom's `take_while`/`take_till1`:
/// with `fold_many_m_n`, `preceded` and `terminated` the same split cost about 650
/// instructions per line in callgrind, this loop about 350.
fn args(input: &[u8]) -> Result<Args<'_>, WireError> {
    split_args(input, is_blank)
}

/// [`args`] for `SUB` and `UNSUB`, split at [`is_sub_separator`].
fn sub_args(input: &[u8]) -> Result<Args<'_>, WireError> {
    split_args(input, is_sub_separator)
}

/// Generic (not a `fn` pointer) so that each caller's separator test is inlined in the scans.
fn split_args(input: &[u8], separator: impl Fn(u8) -> bool + Copy) -> Result<Args<'_>, WireError> {
    let mut args = Args::default();
    let mut rest = input;
    loop {
        // Neither parser can fail on complete input but for an empty argument, which the
        // separators skipped just before rule out.
        let skipped: IResult<&[u8], &[u8]> = take_while(separator).parse(rest);
        let Ok((after, _)) = skipped else {
            return Err(WireError::InvalidArgs);
        };
        if after.is_empty() {
            return Ok(args);
        }
        if args.len == MAX_ARGS {
            return Err(WireError::InvalidArgs);
        }
        let arg: IResult<&[u8], &[u8]> = take_till1(separator).parse(after);
        let Ok((after, arg)) = arg else {
            return Err(WireError::InvalidArgs);
        };
        args.push(arg);
        rest = after;
    }
}

/// The rest of the line after the op name, without the separating and trailing blanks.
fn rest_of_line(input: &[u8]) -> &[u8] {
    let parsed: IResult<&[u8], &[u8]> = preceded(space0, rest).parse(input);
    let arg = parsed.map_or(input, |(_, arg)| arg);
    let end = arg.iter().rposition(|&b| !is_blank(b)).map_or(0, |i| i + 1);
    &arg[..end]
}

/// `'text'` → `text`; text without both quotes is kept as is.
fn unquote(text: &[u8]) -> &[u8] {
    match text {
        [b'\'', inner @ .., b'\''] => inner,
        _ => text,
    }
}

/// Arguments of one control line, kept in a fixed array: no allocation per op.
#[derive(Default)]
struct Args<'a> {
    items: [&'a [u8]; MAX_ARGS],
    len: usize,
}

impl<'a> Args<'a> {
    /// Appends `arg`; the caller checks that fewer than [`MAX_ARGS`] are held.
    fn push(&mut self, arg: &'a [u8]) {
        self.items[self.len] = arg;
        self.len += 1;
    }

    fn as_slice(&self) -> &[&'a [u8]] {
        &self.items[..self.len]
    }
}

/// Offset range of `part`, a sub-slice that the parsers cut out of `line`.
fn span_of(line: &[u8], part: &[u8]) -> Span {
    let start = part.as_ptr() as usize - line.as_ptr() as usize;
    debug_assert!(start + part.len() <= line.len(), "span outside its line");
    start..start + part.len()
}

/// Parses `[header size, total size]`: each a size, headers not larger than the total.
fn sizes_of(sizes: [Option<&&[u8]>; 2]) -> Result<(Option<usize>, usize), WireError> {
    let Some(total) = sizes[1].map(|s| parse_size(s)).transpose()? else {
        return Err(WireError::InvalidArgs);
    };
    let header = sizes[0].map(|s| parse_size(s)).transpose()?;
    if header.is_some_and(|h| h > total) {
        return Err(WireError::InvalidArgs);
    }
    Ok((header, total))
}

/// A byte count: 1 to 9 ASCII digits, as nats-server's `parseSize` (no sign, no overflow).
fn parse_size(digits: &[u8]) -> Result<usize, WireError> {
    if digits.is_empty() || digits.len() > MAX_SIZE_DIGITS {
        return Err(WireError::InvalidArgs);
    }
    let n = parse_u64(digits)?;
    usize::try_from(n).map_err(|_| WireError::InvalidArgs)
}

/// A non-negative decimal integer that fits in a `u64` ([`crate::parse_decimal`]).
fn parse_u64(digits: &[u8]) -> Result<u64, WireError> {
    match crate::parse_decimal(digits) {
        Some(n) => Ok(n),
        None => Err(WireError::InvalidArgs),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text<'a>(line: &'a [u8], span: &Span) -> &'a [u8] {
        &line[span.clone()]
    }

    #[test]
    fn pub_reply_is_decided_by_argument_count() {
        let line = b"PUB foo 5";
        let ClientHead::Pub {
            subject,
            reply,
            header_len,
            total_len,
        } = client_line(line).unwrap()
        else {
            panic!("not a pub")
        };
        assert_eq!(
            (text(line, &subject), reply, header_len, total_len),
            (&b"foo"[..], None, None, 5)
        );

        let line = b"pub\tfoo  \t reply.x 5 \t ";
        let ClientHead::Pub { subject, reply, .. } = client_line(line).unwrap() else {
            panic!()
        };
        assert_eq!(text(line, &subject), b"foo");
        assert_eq!(text(line, &reply.unwrap()), b"reply.x");
    }

    #[test]
    fn hpub_sizes() {
        let line = b"HPUB foo 24 29";
        assert_eq!(
            client_line(line).unwrap(),
            ClientHead::Pub {
                subject: 5..8,
                reply: None,
                header_len: Some(24),
                total_len: 29
            }
        );
        assert!(matches!(
            client_line(b"HPUB foo 30 29"),
            Err(WireError::InvalidArgs)
        ));
        assert!(matches!(
            client_line(b"HPUB foo 29"),
            Err(WireError::InvalidArgs)
        ));
    }

    #[test]
    fn sizes_follow_parse_size() {
        assert!(client_line(b"PUB foo 999999999").is_ok());
        for bad in [
            "PUB foo 1000000000",
            "PUB foo -1",
            "PUB foo +1",
            "PUB foo x",
            "PUB foo 1x",
            "PUB foo",
        ] {
            assert!(
                matches!(client_line(bad.as_bytes()), Err(WireError::InvalidArgs)),
                "{bad}"
            );
        }
        assert_eq!(
            client_line(b"UNSUB 1 18446744073709551616").unwrap(),
            ClientHead::Unsub {
                sid: 6..7,
                max_msgs: None
            },
            "an unusable max means unsubscribe now, as nats-server"
        );
        assert_eq!(
            client_line(b"UNSUB 1 18446744073709551615").unwrap(),
            ClientHead::Unsub {
                sid: 6..7,
                max_msgs: Some(u64::MAX)
            }
        );
    }

    #[test]
    fn sub_and_unsub_argument_counts() {
        assert_eq!(
            client_line(b"SUB a  7").unwrap(),
            ClientHead::Sub {
                subject: 4..5,
                queue_group: None,
                sid: 7..8
            }
        );
        assert_eq!(
            client_line(b"sub a q 7").unwrap(),
            ClientHead::Sub {
                subject: 4..5,
                queue_group: Some(6..7),
                sid: 8..9
            }
        );
        assert!(matches!(client_line(b"SUB a"), Err(WireError::InvalidArgs)));
        assert!(matches!(
            client_line(b"SUB a b c d"),
            Err(WireError::InvalidArgs)
        ));
        assert_eq!(
            client_line(b"UNSUB 7 ").unwrap(),
            ClientHead::Unsub {
                sid: 6..7,
                max_msgs: None
            }
        );
        assert!(matches!(client_line(b"UNSUB"), Err(WireError::UnknownOp)));
        for lenient in [&b"UNSUB 1 abc"[..], b"UNSUB 1 -1", b"UNSUB 1 0"] {
            assert_eq!(
                client_line(lenient).unwrap(),
                ClientHead::Unsub {
                    sid: 6..7,
                    max_msgs: None
                }
            );
        }
        assert!(matches!(
            client_line(b"UNSUB 1 2 3"),
            Err(WireError::InvalidArgs)
        ));
    }

    #[test]
    fn unknown_ops() {
        for bad in [
            &b""[..],
            b" PING",
            b"PI",
            b"PUBLISH a 1",
            b"MSG a 1 1",
            b"\r",
            // Ops with arguments need a blank after their name.
            b"PUB",
            b"HPUB",
            b"SUB",
            b"UNSUB",
        ] {
            assert!(
                matches!(client_line(bad), Err(WireError::UnknownOp)),
                "{bad:?}"
            );
        }
        for bad in [&b"PUB a 1"[..], b"SUB a 1", b"CONNECT {}"] {
            assert!(
                matches!(server_line(bad), Err(WireError::UnknownOp)),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn ping_pong_ignore_trailing_text_like_nats_server() {
        // As nats-server 2.15.1 reads them: anything after the name, blank or not.
        assert_eq!(client_line(b"PINGX").unwrap(), ClientHead::Ping);
        assert_eq!(client_line(b"pingpong").unwrap(), ClientHead::Ping);
        assert_eq!(client_line(b"PING\rPING").unwrap(), ClientHead::Ping);
        assert_eq!(client_line(b"PONGX").unwrap(), ClientHead::Pong);
        assert_eq!(client_line(b"+OKAY").unwrap(), ClientHead::Ignored);
        // A client's -ERR and arguments missing after a blank: closed without a reply.
        assert!(matches!(
            client_line(b"-ERR 'x'"),
            Err(WireError::UnexpectedErr)
        ));
        for silent in [&b"PUB "[..], b"SUB ", b"UNSUB ", b"HPUB  "] {
            assert!(
                matches!(client_line(silent), Err(WireError::InvalidArgs)),
                "{silent:?}"
            );
        }
        assert_eq!(client_line(b"PING").unwrap(), ClientHead::Ping);
        assert_eq!(client_line(b"ping  ").unwrap(), ClientHead::Ping);
        assert_eq!(client_line(b"PoNg extra").unwrap(), ClientHead::Pong);
        assert_eq!(client_line(b"+OK").unwrap(), ClientHead::Ignored);
        assert_eq!(client_line(b"INFO {}").unwrap(), ClientHead::Ignored);
    }

    #[test]
    fn a_cr_separates_sub_and_unsub_arguments_only() {
        let line = b"SUB a q\r1\r";
        let ClientHead::Sub {
            subject,
            queue_group,
            sid,
        } = client_line(line).unwrap()
        else {
            panic!("a SUB");
        };
        assert_eq!(text(line, &subject), b"a");
        assert_eq!(queue_group.map(|q| text(line, &q)), Some(&b"q"[..]));
        assert_eq!(text(line, &sid), b"1");
        assert!(matches!(
            client_line(b"UNSUB 1\r"),
            Ok(ClientHead::Unsub { max_msgs: None, .. })
        ));
        assert!(matches!(
            client_line(b"PUB a\r1"),
            Err(WireError::InvalidArgs)
        ));
    }

    #[test]
    fn op_names_are_read_byte_by_byte_like_nats_server() {
        // As nats-server 2.15.1's parser: CONNECT and INFO take whatever follows their name
        // (blanks skipped) as their argument, so `CONNECTX {}` is a CONNECT with bad JSON.
        for (line, json) in [
            (&b"CONNECTX {}"[..], &b"X {}"[..]),
            (b"connectx", b"x"),
            (b"CONNECT{}", b"{}"),
            (b"Connect\t{\"verbose\":false}", b"{\"verbose\":false}"),
        ] {
            let Ok(ClientHead::Connect(span)) = client_line(line) else {
                panic!("{line:?}")
            };
            assert_eq!(text(line, &span), json, "{line:?}");
        }
        assert_eq!(client_line(b"INFOX").unwrap(), ClientHead::Ignored);
        // Ops with arguments fail at the first byte after their name that is not a blank.
        for bad in [
            &b"SUBX a 1"[..],
            b"PUBX a 1",
            b"UNSUBX 1",
            b"HPUBX",
            b"HPUBX a 1 1",
            b"-ERRX",
            b"-ERR",
            b"-ERR\r",
            b"HMSG a 1 5",
            b"MSG a 1 5",
            b"PUB\r",
        ] {
            assert!(
                matches!(client_line(bad), Err(WireError::UnknownOp)),
                "{bad:?}"
            );
        }
        // The client side reads a server's lines by the same rule.
        let ServerHead::Info(span) = server_line(b"INFO{}").unwrap() else {
            panic!()
        };
        assert_eq!(span, 4..6);
        assert_eq!(server_line(b"PINGX").unwrap(), ServerHead::Ping);
        for bad in [&b"MSGX a 1 1"[..], b"HMSGX", b"-ERRX", b"PUB a 1"] {
            assert!(
                matches!(server_line(bad), Err(WireError::UnknownOp)),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn could_begin_looks_at_the_name_and_the_byte_after_it() {
        assert_eq!(ClientHead::PREFIX_LEN, b"CONNECT ".len());
        assert_eq!(ServerHead::PREFIX_LEN, b"INFO ".len());
        for start in [
            &b""[..],
            b"P",
            b"pu",
            b"PUB",
            b"PUB ",
            b"PUB\t",
            b"CONNECTX",
            b"PINGX",
        ] {
            assert!(could_begin(start, CLIENT_OPS), "{start:?}");
        }
        for start in [&b"x"[..], b"PX", b"PUBX", b"PUB\r", b"-ERR\n", b"MSG", b" "] {
            assert!(!could_begin(start, CLIENT_OPS), "{start:?}");
        }
        assert!(could_begin(b"MSG ", SERVER_OPS));
        assert!(!could_begin(b"PUB", SERVER_OPS));
    }

    #[test]
    fn args_len_measures_what_nats_server_measures() {
        assert_eq!(args_len(b"PUB  \ta 1", CLIENT_OPS).unwrap(), 3);
        assert_eq!(args_len(b"CONNECTX {}", CLIENT_OPS).unwrap(), 4);
        assert_eq!(args_len(b"CONNECT {} ", CLIENT_OPS).unwrap(), 3);
        assert_eq!(args_len(b"PING whatever", CLIENT_OPS).unwrap(), 0);
        assert_eq!(args_len(b"MSG a 1 1", SERVER_OPS).unwrap(), 5);
        for bad in [&b"xyz abc"[..], b"SUBX a 1", b"MSG a 1 1"] {
            assert!(
                matches!(args_len(bad, CLIENT_OPS), Err(WireError::UnknownOp)),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn no_op_name_is_a_prefix_of_another() {
        // `find_op` takes the first name that starts the line.
        for ops in [CLIENT_OPS, SERVER_OPS] {
            for a in ops {
                for b in ops {
                    assert!(
                        std::ptr::eq(a, b) || !b.name.starts_with(a.name),
                        "{:?} starts {:?}",
                        a.name,
                        b.name
                    );
                }
            }
        }
    }

    #[test]
    fn rest_of_line_ops() {
        let line = b"CONNECT \t{\"verbose\":false} ";
        let ClientHead::Connect(json) = client_line(line).unwrap() else {
            panic!()
        };
        assert_eq!(text(line, &json), b"{\"verbose\":false}");
        let line = b"INFO {} ";
        let ServerHead::Info(json) = server_line(line).unwrap() else {
            panic!()
        };
        assert_eq!(text(line, &json), b"{}");
        let line = b"-ERR 'Unknown Protocol Operation'";
        let ServerHead::Err(msg) = server_line(line).unwrap() else {
            panic!()
        };
        assert_eq!(text(line, &msg), b"Unknown Protocol Operation");
        let line = b"-ERR";
        let ServerHead::Err(msg) = server_line(line).unwrap() else {
            panic!()
        };
        assert!(msg.is_empty());
        assert_eq!(client_line(b"CONNECT").unwrap(), ClientHead::Connect(7..7));
    }

    #[test]
    fn msg_argument_counts() {
        assert_eq!(
            server_line(b"MSG foo 1 5").unwrap(),
            ServerHead::Msg {
                subject: 4..7,
                sid: 8..9,
                reply: None,
                header_len: None,
                total_len: 5
            }
        );
        assert_eq!(
            server_line(b"HMSG foo 1 r 24 29").unwrap(),
            ServerHead::Msg {
                subject: 5..8,
                sid: 9..10,
                reply: Some(11..12),
                header_len: Some(24),
                total_len: 29
            }
        );
        assert!(matches!(
            server_line(b"MSG foo 5"),
            Err(WireError::InvalidArgs)
        ));
        assert!(matches!(
            server_line(b"HMSG foo 1 r x 24 29"),
            Err(WireError::InvalidArgs)
        ));
    }
}
