//! The `NATS/1.0` header block carried by `HPUB` and `HMSG`.
//!
//! ```text
//! NATS/1.0[ <3-digit status>[ <description>]]\r\n
//! <Key>: <Value>\r\n          zero or more; repeated keys allowed, order and key case preserved
//! \r\n                        blank line: end of the block (counted in `#hdr bytes`)
//! ```
//!
//! The smallest block is `NATS/1.0\r\n\r\n` (12 bytes). A status block is how the server tells
//! a client something about a request instead of sending a reply: `NATS/1.0 503` (no
//! responders), `NATS/1.0 404 No Messages`, `NATS/1.0 408 Request Timeout`,
//! `NATS/1.0 100 Idle Heartbeat`. Clients compare some descriptions byte for byte, so they are
//! kept exactly as given.
//!
//! The codec in [`crate::wire`] carries header blocks as raw bytes and forwards them verbatim,
//! as nats-server does; parse one into [`Headers`] only to read or build it.
//!
//! The header names JetStream gives a meaning to are the constants below ([`MSG_ID`],
//! [`EXPECTED_LAST_SEQUENCE`], [`MSG_TTL`], [`PENDING_MESSAGES`], …), shared by the server and
//! the client, spelled as nats-server 2.15.1 writes and reads them (keys are case-sensitive).

use bytes::{BufMut, Bytes, BytesMut};

// ---------------------------------------------------------------------------------------------
// Header names. Publish headers (client → stream):
// ---------------------------------------------------------------------------------------------

/// `Nats-Msg-Id: <id>`: the message's de-duplication id; a second publish with the same id
/// within the stream's `duplicate_window` is stored once (its PubAck says `duplicate`).
pub const MSG_ID: &str = "Nats-Msg-Id";
/// `Nats-Expected-Stream: <stream>`: refuse the publish (10060) unless the subject is captured
/// by this stream.
pub const EXPECTED_STREAM: &str = "Nats-Expected-Stream";
/// `Nats-Expected-Last-Sequence: <seq>`: refuse the publish (10071) unless the stream's last
/// sequence is this.
pub const EXPECTED_LAST_SEQUENCE: &str = "Nats-Expected-Last-Sequence";
/// `Nats-Expected-Last-Subject-Sequence: <seq>`: refuse the publish (10071) unless the last
/// message on the subject (or on [`EXPECTED_LAST_SUBJECT_SEQUENCE_SUBJECT`]) has this sequence;
/// `0`: there is none.
pub const EXPECTED_LAST_SUBJECT_SEQUENCE: &str = "Nats-Expected-Last-Subject-Sequence";
/// `Nats-Expected-Last-Subject-Sequence-Subject: <subject>`: the subject (wildcards allowed)
/// that [`EXPECTED_LAST_SUBJECT_SEQUENCE`] is checked on, instead of the publish subject.
pub const EXPECTED_LAST_SUBJECT_SEQUENCE_SUBJECT: &str =
    "Nats-Expected-Last-Subject-Sequence-Subject";
/// `Nats-Expected-Last-Msg-Id: <id>`: refuse the publish (10070) unless the stream's last
/// message has this [`MSG_ID`].
pub const EXPECTED_LAST_MSG_ID: &str = "Nats-Expected-Last-Msg-Id";
/// `Nats-Rollup: sub` or `all`: after storing this message, remove the subject's (or the
/// stream's) earlier messages (streams with `allow_rollup_hdrs`); subject delete markers carry
/// `sub`.
pub const ROLLUP: &str = "Nats-Rollup";
/// `Nats-TTL: <Go duration, or whole seconds, or never>`: the message's own expiry (streams
/// with `allow_msg_ttl`); see `api::stream::MsgTtl`.
pub const MSG_TTL: &str = "Nats-TTL";
/// `Nats-Marker-Reason: MaxAge`: marks a subject delete marker and says why it was written.
pub const MARKER_REASON: &str = "Nats-Marker-Reason";
/// `Nats-Required-Api-Level: <n>`: an API request's minimum API level; above the server's the
/// answer is 10185.
pub const REQUIRED_API_LEVEL: &str = "Nats-Required-Api-Level";

// ---------------------------------------------------------------------------------------------
// Headers the server adds: DIRECT.GET answers, the no-responders status, pull statuses.
// ---------------------------------------------------------------------------------------------

/// `Nats-Stream: <stream>`: the stream a DIRECT.GET answer comes from.
pub const STREAM: &str = "Nats-Stream";
/// `Nats-Subject: <subject>`: the stored message's subject (DIRECT.GET), or the subject nobody
/// listened on (the `503` no-responders status).
pub const SUBJECT: &str = "Nats-Subject";
/// `Nats-Sequence: <seq>`: the stored message's stream sequence (DIRECT.GET).
pub const SEQUENCE: &str = "Nats-Sequence";
/// `Nats-Time-Stamp: <RFC 3339>`: when the message was stored (DIRECT.GET).
pub const TIME_STAMP: &str = "Nats-Time-Stamp";
/// `Nats-Num-Pending: <n>`: messages left after this one (DIRECT.GET batch requests).
pub const NUM_PENDING: &str = "Nats-Num-Pending";
/// `Nats-Last-Sequence: <seq>`: the previous message's sequence (DIRECT.GET batch requests).
pub const LAST_SEQUENCE: &str = "Nats-Last-Sequence";
/// `Nats-Pending-Messages: <n>`: how many of a pull request's batch were not delivered
/// (`408`/`409` pull statuses).
pub const PENDING_MESSAGES: &str = "Nats-Pending-Messages";
/// `Nats-Pending-Bytes: <n>`: how many of a pull request's `max_bytes` were not used (`408`/`409`
/// pull statuses).
pub const PENDING_BYTES: &str = "Nats-Pending-Bytes";
/// `Nats-Last-Consumer: <seq>`: the consumer's last delivered consumer sequence (`100 Idle
/// Heartbeat`).
pub const LAST_CONSUMER: &str = "Nats-Last-Consumer";
/// `Nats-Last-Stream: <seq>`: the consumer's last delivered stream sequence (`100 Idle
/// Heartbeat`).
pub const LAST_STREAM: &str = "Nats-Last-Stream";
/// Dead-letter headers (jsserver's own, see `consumer::dead_letter`): the stream a message
/// was given up in.
pub const DEAD_LETTER_STREAM: &str = "Nats-Dead-Letter-Stream";
/// The given-up message's original subject.
pub const DEAD_LETTER_SUBJECT: &str = "Nats-Dead-Letter-Subject";
/// The given-up message's stream sequence.
pub const DEAD_LETTER_SEQUENCE: &str = "Nats-Dead-Letter-Sequence";
/// The consumer that gave it up.
pub const DEAD_LETTER_CONSUMER: &str = "Nats-Dead-Letter-Consumer";
/// How many times that consumer delivered it.
pub const DEAD_LETTER_DELIVERIES: &str = "Nats-Dead-Letter-Deliveries";
/// `max_deliver` or `terminated`.
pub const DEAD_LETTER_REASON: &str = "Nats-Dead-Letter-Reason";
/// The text after `+TERM `, when the worker gave one.
pub const DEAD_LETTER_DESCRIPTION: &str = "Nats-Dead-Letter-Description";
/// `Nats-Pin-Id: <id>`: the pin id of a `pinned_client` consumer, added to every message it
/// delivers; the client sends it back as the pull request's `id`.
pub const PIN_ID: &str = "Nats-Pin-Id";

/// Size in bytes of the payload a `headers_only` consumer left out of a delivery
/// (nats-server's `JSMsgSize`).
pub const MSG_SIZE: &str = "Nats-Msg-Size";

/// The header block of the `503` status a requester gets when nobody takes its request
/// (nats-server's "no responders": `NATS/1.0 503`, then `Nats-Subject: <subject>`, the
/// subject the request went to), sent with an empty payload to the request's reply subject.
pub fn no_responders(subject: &[u8]) -> bytes::Bytes {
    let mut block = Vec::with_capacity(40 + subject.len());
    block.extend_from_slice(b"NATS/1.0 503\r\n");
    block.extend_from_slice(SUBJECT.as_bytes());
    block.extend_from_slice(b": ");
    block.extend_from_slice(subject);
    block.extend_from_slice(b"\r\n\r\n");
    bytes::Bytes::from(block)
}

/// The reply subject of an unanswered flow-control request, in a push consumer's idle
/// heartbeat (nats-server's `JSConsumerStalled`).
pub const CONSUMER_STALLED: &str = "Nats-Consumer-Stalled";

/// A parsed header block: optional status and description, then an ordered list of entries.
///
/// Keys are matched exactly (case-sensitive) and kept as written; a key may repeat. Parsing
/// then [encoding](Headers::encode) a well-formed block gives back the same bytes, where
/// well-formed means the shape above with single spaces (`NATS/1.0 408 Request Timeout`,
/// `Key: Value`). Other accepted blocks (`Key:Value`, extra blanks around a value) come back in
/// that canonical form.
///
/// ```
/// use jsproto::headers::Headers;
///
/// let h = Headers::parse(b"NATS/1.0 404 No Messages\r\nX: 1\r\nX: 2\r\n\r\n").unwrap();
/// assert_eq!(h.status(), Some(404));
/// assert_eq!(h.description(), Some("No Messages"));
/// assert_eq!(h.get_all("X").collect::<Vec<_>>(), ["1", "2"]);
/// assert_eq!(&h.to_bytes()[..], b"NATS/1.0 404 No Messages\r\nX: 1\r\nX: 2\r\n\r\n");
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Headers {
    status: Option<u16>,
    description: Option<String>,
    entries: Vec<(String, String)>,
}

/// Why a header block could not be parsed, or why a key or value cannot be stored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HeaderError {
    /// The block does not start with `NATS/1.0`.
    #[error("header block does not start with NATS/1.0")]
    MissingVersion,
    /// The text after `NATS/1.0` is not ` <3 digits>[ <description>]`.
    #[error("invalid status in header block")]
    InvalidStatus,
    /// No `\r\n` blank line ends the block.
    #[error("header block is not terminated by an empty line")]
    Unterminated,
    /// Bytes follow the blank line that ends the block.
    #[error("{len} bytes after the end of the header block")]
    TrailingBytes {
        /// How many bytes follow the block.
        len: usize,
    },
    /// A header line has no `:`, an empty or invalid key, or a stray `\r`/`\n`.
    #[error("invalid header line {line}")]
    InvalidLine {
        /// 1-based line number, counting the `NATS/1.0` line as line 0.
        line: usize,
    },
    /// A line of the block is not UTF-8.
    #[error("header line {line} is not UTF-8")]
    NotUtf8 {
        /// 1-based line number, counting the `NATS/1.0` line as line 0.
        line: usize,
    },
    /// A key given to [`Headers::insert`]/[`Headers::append`] is empty or contains `:`,
    /// whitespace or a control character.
    #[error("invalid header key")]
    InvalidKey,
    /// A value given to [`Headers::insert`]/[`Headers::append`] contains `\r` or `\n`.
    #[error("header value contains a line break")]
    InvalidValue,
}

impl Headers {
    /// The version token that opens every block.
    pub const VERSION: &'static str = "NATS/1.0";

    /// An empty block without status: encodes as `NATS/1.0\r\n\r\n`.
    pub fn new() -> Self {
        Self::default()
    }

    /// A status block, e.g. `Headers::with_status(408, Some("Request Timeout"))` encodes as
    /// `NATS/1.0 408 Request Timeout\r\n\r\n`. An empty description is no description.
    ///
    /// # Panics
    ///
    /// If `status` has more than 3 digits or `description` contains `\r` or `\n`: both are
    /// fixed by the caller's code, never by a peer.
    pub fn with_status(status: u16, description: Option<&str>) -> Self {
        assert!(
            status <= 999,
            "a NATS status has exactly 3 digits, got {status}"
        );
        let description = description.filter(|d| !d.is_empty());
        assert!(
            description.is_none_or(|d| !d.contains(['\r', '\n'])),
            "a status description cannot contain a line break"
        );
        Self {
            status: Some(status),
            description: description.map(str::to_owned),
            entries: Vec::new(),
        }
    }

    /// Parses a raw header block, from `NATS/1.0` through the blank line's `\r\n`, as carried
    /// in [`Publish::headers`](crate::wire::Publish::headers).
    ///
    /// Values are trimmed of surrounding spaces and tabs; lines end with `\r\n` only.
    ///
    /// # Errors
    ///
    /// A [`HeaderError`] naming the first problem: missing version, bad status, bad line,
    /// non-UTF-8 text, missing blank line, or bytes after it.
    pub fn parse(block: &[u8]) -> Result<Self, HeaderError> {
        let after_version = block
            .strip_prefix(Self::VERSION.as_bytes())
            .ok_or(HeaderError::MissingVersion)?;
        let (status_line, mut rest) = split_line(after_version).ok_or(HeaderError::Unterminated)?;
        let (status, description) = parse_status(status_line)?;
        let mut entries = Vec::new();
        for line_number in 1.. {
            let (line, after) = split_line(rest).ok_or(HeaderError::Unterminated)?;
            rest = after;
            if line.is_empty() {
                break;
            }
            entries.push(parse_entry(line, line_number)?);
        }
        if !rest.is_empty() {
            return Err(HeaderError::TrailingBytes { len: rest.len() });
        }
        Ok(Self {
            status,
            description,
            entries,
        })
    }

    /// The 3-digit status code, if the block has one (e.g. 503, 404, 408, 100).
    pub fn status(&self) -> Option<u16> {
        self.status
    }

    /// The status description (e.g. `Request Timeout`), if any.
    pub fn description(&self) -> Option<&str> {
        self.description.as_deref()
    }

    /// The first value stored under exactly `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.entries
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Every value stored under exactly `key`, in block order.
    pub fn get_all<'a>(&'a self, key: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.entries
            .iter()
            .filter(move |(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Sets `key` to the single value `value`: replaces the first entry with that key and
    /// removes the others, or appends a new entry.
    ///
    /// # Errors
    ///
    /// [`HeaderError::InvalidKey`] or [`HeaderError::InvalidValue`]; the headers are unchanged.
    pub fn insert(
        &mut self,
        key: impl Into<String>,
        value: impl Into<String>,
    ) -> Result<(), HeaderError> {
        let (key, value) = checked_entry(key.into(), value.into())?;
        match self.entries.iter().position(|(k, _)| *k == key) {
            Some(first) => {
                self.entries[first].1 = value;
                let mut index = 0;
                self.entries.retain(|(k, _)| {
                    index += 1;
                    index - 1 == first || *k != key
                });
            }
            None => self.entries.push((key, value)),
        }
        Ok(())
    }

    /// Adds an entry at the end, keeping any existing entries with the same key.
    ///
    /// # Errors
    ///
    /// [`HeaderError::InvalidKey`] or [`HeaderError::InvalidValue`]; the headers are unchanged.
    pub fn append(
        &mut self,
        key: impl Into<String>,
        value: impl Into<String>,
    ) -> Result<(), HeaderError> {
        let entry = checked_entry(key.into(), value.into())?;
        self.entries.push(entry);
        Ok(())
    }

    /// Removes every entry with exactly `key`; returns how many there were.
    pub fn remove(&mut self, key: &str) -> usize {
        let before = self.entries.len();
        self.entries.retain(|(k, _)| k != key);
        before - self.entries.len()
    }

    /// All entries as `(key, value)`, in block order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.entries.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// Number of entries (the status line is not an entry).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when there are no entries (there may still be a status).
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Size of the encoded block in bytes: the `#hdr bytes` of an `HPUB`/`HMSG`.
    pub fn encoded_len(&self) -> usize {
        let status_len = match (self.status, &self.description) {
            (None, _) => 0,
            (Some(_), None) => 4,
            (Some(_), Some(d)) => 5 + d.len(),
        };
        let entries_len: usize = self
            .entries
            .iter()
            .map(|(k, v)| k.len() + v.len() + 4)
            .sum();
        Self::VERSION.len() + status_len + 2 + entries_len + 2
    }

    /// Appends the encoded block to `dst`, reserving its exact size first.
    pub fn encode(&self, dst: &mut BytesMut) {
        dst.reserve(self.encoded_len());
        dst.put_slice(Self::VERSION.as_bytes());
        if let Some(status) = self.status {
            // `status` ≤ 999 by construction, so each digit is a single decimal digit.
            let digit = |n: u16| b'0' + (n % 10) as u8;
            dst.put_slice(&[b' ', digit(status / 100), digit(status / 10), digit(status)]);
            if let Some(description) = &self.description {
                dst.put_u8(b' ');
                dst.put_slice(description.as_bytes());
            }
        }
        dst.put_slice(b"\r\n");
        for (key, value) in &self.entries {
            dst.put_slice(key.as_bytes());
            dst.put_slice(b": ");
            dst.put_slice(value.as_bytes());
            dst.put_slice(b"\r\n");
        }
        dst.put_slice(b"\r\n");
    }

    /// The encoded block as one buffer.
    pub fn to_bytes(&self) -> Bytes {
        let mut dst = BytesMut::with_capacity(self.encoded_len());
        self.encode(&mut dst);
        dst.freeze()
    }
}

/// Splits at the first `\r\n`: `(line, rest after it)`.
fn split_line(input: &[u8]) -> Option<(&[u8], &[u8])> {
    let at = input.windows(2).position(|w| w == b"\r\n")?;
    Some((&input[..at], &input[at + 2..]))
}

/// The status line after `NATS/1.0`: empty, or ` <3 digits>[ <description>]` (blanks around
/// the parts tolerated, as nats.go trims them).
fn parse_status(line: &[u8]) -> Result<(Option<u16>, Option<String>), HeaderError> {
    if line.is_empty() {
        return Ok((None, None));
    }
    let text = std::str::from_utf8(line).map_err(|_| HeaderError::NotUtf8 { line: 0 })?;
    let Some(text) = text.strip_prefix([' ', '\t']) else {
        return Err(HeaderError::InvalidStatus);
    };
    let text = text.trim_matches([' ', '\t']);
    if text.is_empty() {
        return Ok((None, None));
    }
    let (code, description) = text.split_at_checked(3).ok_or(HeaderError::InvalidStatus)?;
    if !code.bytes().all(|b| b.is_ascii_digit()) {
        return Err(HeaderError::InvalidStatus);
    }
    if !(description.is_empty() || description.starts_with([' ', '\t'])) {
        return Err(HeaderError::InvalidStatus);
    }
    if description.contains(['\r', '\n']) {
        return Err(HeaderError::InvalidStatus);
    }
    let status = code.parse().map_err(|_| HeaderError::InvalidStatus)?;
    let description = description.trim_start_matches([' ', '\t']);
    Ok((
        Some(status),
        (!description.is_empty()).then(|| description.to_owned()),
    ))
}

/// `Key: Value` with the value trimmed of surrounding blanks.
fn parse_entry(line: &[u8], line_number: usize) -> Result<(String, String), HeaderError> {
    let invalid = HeaderError::InvalidLine { line: line_number };
    let text = std::str::from_utf8(line).map_err(|_| HeaderError::NotUtf8 { line: line_number })?;
    let (key, value) = text.split_once(':').ok_or(invalid.clone())?;
    let value = value.trim_matches([' ', '\t']);
    if !is_valid_key(key) || value.contains(['\r', '\n']) {
        return Err(invalid);
    }
    Ok((key.to_owned(), value.to_owned()))
}

fn checked_entry(key: String, value: String) -> Result<(String, String), HeaderError> {
    if !is_valid_key(&key) {
        return Err(HeaderError::InvalidKey);
    }
    if value.contains(['\r', '\n']) {
        return Err(HeaderError::InvalidValue);
    }
    Ok((key, value))
}

/// Non-empty, no `:`, no whitespace, no control characters. Any other UTF-8 is kept as is.
fn is_valid_key(key: &str) -> bool {
    !key.is_empty()
        && !key
            .chars()
            .any(|c| c == ':' || c.is_whitespace() || c.is_control())
}

/// A stored header block (`NATS/1.0\r\n…\r\n\r\n`, or `None` for a message without headers)
/// with one more entry `key: value` at its end, as nats-server's `genHeader` adds the pin id to
/// a delivery. `key` and `value` must be valid (no line breaks); the block is not re-parsed.
pub fn append_to_block(block: Option<&[u8]>, key: &str, value: &str) -> Vec<u8> {
    let head: &[u8] = match block {
        Some(b) if b.ends_with(b"\r\n\r\n") => &b[..b.len() - 2],
        _ => b"NATS/1.0\r\n",
    };
    let mut out = Vec::with_capacity(head.len() + key.len() + value.len() + 6);
    out.extend_from_slice(head);
    out.extend_from_slice(key.as_bytes());
    out.extend_from_slice(b": ");
    out.extend_from_slice(value.as_bytes());
    out.extend_from_slice(b"\r\n\r\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn append_to_block_adds_one_entry() {
        assert_eq!(
            append_to_block(None, PIN_ID, "abc"),
            b"NATS/1.0\r\nNats-Pin-Id: abc\r\n\r\n"
        );
        assert_eq!(
            append_to_block(Some(b"NATS/1.0\r\nA: 1\r\n\r\n"), PIN_ID, "abc"),
            b"NATS/1.0\r\nA: 1\r\nNats-Pin-Id: abc\r\n\r\n"
        );
    }
    use proptest::prelude::*;

    fn round_trip(block: &[u8]) -> Headers {
        let headers = Headers::parse(block).unwrap_or_else(|e| panic!("{block:?}: {e}"));
        assert_eq!(&headers.to_bytes()[..], block, "re-encoded differently");
        assert_eq!(headers.encoded_len(), block.len());
        headers
    }

    #[test]
    fn reference_blocks_round_trip_byte_for_byte() {
        let h = round_trip(b"NATS/1.0\r\nA: B\r\nC: d\r\n\r\n");
        assert_eq!(
            (h.status(), h.get("A"), h.get("C"), h.len()),
            (None, Some("B"), Some("d"), 2)
        );
        assert_eq!(round_trip(b"NATS/1.0\r\n\r\n"), Headers::new());
        assert_eq!(Headers::new().encoded_len(), 12);

        let h = round_trip(b"NATS/1.0 503\r\nNats-Subject: nothing\r\n\r\n");
        assert_eq!((h.status(), h.description()), (Some(503), None));
        assert_eq!(h.get("Nats-Subject"), Some("nothing"));

        for (status, text) in [
            (404, "No Messages"),
            (408, "Request Timeout"),
            (100, "Idle Heartbeat"),
        ] {
            let block = format!("NATS/1.0 {status} {text}\r\n\r\n");
            let h = round_trip(block.as_bytes());
            assert_eq!((h.status(), h.description()), (Some(status), Some(text)));
            assert_eq!(Headers::with_status(status, Some(text)), h);
        }
        let h =
            round_trip(b"NATS/1.0 409 Consumer Deleted\r\nX: 1\r\nx: 2\r\nX: 3\r\nEmpty: \r\n\r\n");
        assert_eq!(h.get("X"), Some("1"));
        assert_eq!(h.get("x"), Some("2"));
        assert_eq!(h.get_all("X").collect::<Vec<_>>(), ["1", "3"]);
        assert_eq!(h.get("Empty"), Some(""));
        assert_eq!(h.get("missing"), None);
    }

    #[test]
    fn lenient_forms_parse_and_re_encode_canonically() {
        let h = Headers::parse(b"NATS/1.0  503 \r\nA:B\r\nC: \t d \r\nD: a: b\r\n\r\n").unwrap();
        assert_eq!(h.status(), Some(503));
        assert_eq!(
            h.iter().collect::<Vec<_>>(),
            [("A", "B"), ("C", "d"), ("D", "a: b")]
        );
        assert_eq!(
            &h.to_bytes()[..],
            b"NATS/1.0 503\r\nA: B\r\nC: d\r\nD: a: b\r\n\r\n"
        );
    }

    #[test]
    fn malformed_blocks_are_rejected() {
        let cases: [(&[u8], HeaderError); 12] = [
            (b"", HeaderError::MissingVersion),
            (b"NATS/2.0\r\n\r\n", HeaderError::MissingVersion),
            (b"NATS/1.0", HeaderError::Unterminated),
            (b"NATS/1.0\r\nA: B\r\n", HeaderError::Unterminated),
            (b"NATS/1.0\r\n\r\nx", HeaderError::TrailingBytes { len: 1 }),
            (b"NATS/1.0503\r\n\r\n", HeaderError::InvalidStatus),
            (b"NATS/1.0 50\r\n\r\n", HeaderError::InvalidStatus),
            (b"NATS/1.0 5031\r\n\r\n", HeaderError::InvalidStatus),
            (b"NATS/1.0 abc\r\n\r\n", HeaderError::InvalidStatus),
            (
                b"NATS/1.0\r\nno colon\r\n\r\n",
                HeaderError::InvalidLine { line: 1 },
            ),
            (
                b"NATS/1.0\r\nA: 1\r\n: v\r\n\r\n",
                HeaderError::InvalidLine { line: 2 },
            ),
            (
                b"NATS/1.0\r\nA\xff: v\r\n\r\n",
                HeaderError::NotUtf8 { line: 1 },
            ),
        ];
        for (block, expected) in cases {
            assert_eq!(Headers::parse(block), Err(expected), "{block:?}");
        }
        for bad in [
            &b"NATS/1.0\r\nA B: v\r\n\r\n"[..],
            b"NATS/1.0\r\nA: v\nB: w\r\n\r\n",
        ] {
            assert!(
                matches!(
                    Headers::parse(bad),
                    Err(HeaderError::InvalidLine { line: 1 })
                ),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn insert_append_remove() {
        let mut h = Headers::new();
        h.append("X", "1").unwrap();
        h.append("Y", "a").unwrap();
        h.append("X", "2").unwrap();
        h.insert("X", "3").unwrap();
        assert_eq!(h.iter().collect::<Vec<_>>(), [("X", "3"), ("Y", "a")]);
        h.insert("Z", "z").unwrap();
        assert_eq!(h.remove("Y"), 1);
        assert_eq!(&h.to_bytes()[..], b"NATS/1.0\r\nX: 3\r\nZ: z\r\n\r\n");
        assert_eq!(h.append("A B", "v"), Err(HeaderError::InvalidKey));
        assert_eq!(h.insert("", "v"), Err(HeaderError::InvalidKey));
        assert_eq!(h.insert("A:", "v"), Err(HeaderError::InvalidKey));
        assert_eq!(
            h.append("A", "v\r\nInjected: yes"),
            Err(HeaderError::InvalidValue)
        );
        assert_eq!(h.len(), 2);
    }

    #[test]
    fn with_status_and_headers() {
        let mut h = Headers::with_status(503, None);
        h.append("Nats-Subject", "nothing").unwrap();
        assert_eq!(
            &h.to_bytes()[..],
            b"NATS/1.0 503\r\nNats-Subject: nothing\r\n\r\n"
        );
        assert_eq!(
            Headers::with_status(408, Some("")),
            Headers::with_status(408, None)
        );
        assert_eq!(
            &Headers::with_status(7, None).to_bytes()[..],
            b"NATS/1.0 007\r\n\r\n"
        );
        let mut dst = BytesMut::from(&b"prefix"[..]);
        h.encode(&mut dst);
        assert_eq!(dst.len(), 6 + h.encoded_len());
    }

    #[test]
    #[should_panic(expected = "exactly 3 digits")]
    fn with_status_rejects_four_digits() {
        let _ = Headers::with_status(1000, None);
    }

    fn key() -> impl Strategy<Value = String> {
        "[A-Za-z0-9_-][A-Za-z0-9_.$-]{0,15}"
    }

    fn value() -> impl Strategy<Value = String> {
        // No leading/trailing blanks: those are trimmed and would not round-trip byte-for-byte.
        prop_oneof!["", "[!-~]", "[!-~][ -~]{0,20}[!-~]", "[^\r\n\t ]{1,5}"]
    }

    fn headers() -> impl Strategy<Value = Headers> {
        let status = prop::option::of((0u16..=999, prop::option::of("[!-~]([ -~]{0,20}[!-~])?")));
        (status, prop::collection::vec((key(), value()), 0..6)).prop_map(|(status, entries)| {
            let mut h = match status {
                Some((code, description)) => Headers::with_status(code, description.as_deref()),
                None => Headers::new(),
            };
            for (k, v) in entries {
                h.append(k, v).unwrap();
            }
            h
        })
    }

    proptest! {
        #[test]
        fn encode_then_parse_round_trips(h in headers()) {
            let bytes = h.to_bytes();
            prop_assert_eq!(bytes.len(), h.encoded_len());
            let parsed = Headers::parse(&bytes).unwrap();
            prop_assert_eq!(&parsed, &h);
            prop_assert_eq!(parsed.to_bytes(), bytes);
        }

        #[test]
        fn parse_never_panics(block in prop::collection::vec(any::<u8>(), 0..64)) {
            let mut with_version = b"NATS/1.0".to_vec();
            with_version.extend_from_slice(&block);
            for input in [&block[..], &with_version[..]] {
                if let Ok(h) = Headers::parse(input) {
                    // Whatever parses re-encodes to something that parses the same.
                    prop_assert_eq!(Headers::parse(&h.to_bytes()).unwrap(), h);
                }
            }
        }
    }
}
