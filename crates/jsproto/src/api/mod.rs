//! The JetStream API as JSON over `$JS.API.>`: request and response types, defaults and
//! validation for streams and the account, the PubAck, and the error table. Pure data — no IO.
//!
//! Everything here mirrors nats-server 2.15.1 (JetStream API level [`API_LEVEL`]) as observed on
//! the wire (`shared/reference/jetstream-api.md`, fixtures in `crates/jsproto/tests/fixtures/`)
//! and, where the wire was silent, as its source (`stream.go`, `jetstream_api.go`,
//! `errors.json`) shows.
//!
//! Conventions (all from the server):
//!
//! * **Transport**: a request is a core-NATS request on `$JS.API.<…>`; the answer is plain JSON
//!   on the reply subject.
//! * **`type`**: every API response starts with `"type":"io.nats.jetstream.api.v1.<x>_response"`,
//!   errors included. PubAcks have no `type`. [`encode_ok`] / [`encode_error`] write it.
//! * **Errors**: `"error":{"code":…,"err_code":…,"description":…}` ([`ApiError`]) and otherwise
//!   nothing, except that some responses repeat zeroed fields ([`ApiResponse::ERROR_EXTRA`]).
//!   [`decode_response`] tells the two apart by the presence of `error`.
//! * **Durations** are integer nanoseconds ([`nanos`]), **times** RFC 3339 UTC strings
//!   ([`Timestamp`]), **bytes** base64.
//! * **Requests** are strict: unknown fields, wrong types and malformed JSON are `10025`
//!   (`"invalid JSON: …"`) ([`decode_request`]). An empty body is the all-defaults request.
//! * **Encoding**: [`to_json`] writes JSON the way Go's `encoding/json` does (`<`, `>`, `&`
//!   escaped as `\u003c`, `\u003e`, `\u0026`), so a response is byte-identical to the server's.
//!
//! Modules: [`cluster`] (cluster info of streams, consumers and the meta group, leader
//! step-down, peer and server removal, `/healthz`), [`advisory`] (`$JS.EVENT.ADVISORY.…` subjects and bodies), [`error`] (ApiError and its table), [`stream`] (stream config, info and every stream
//! endpoint), [`consumer`] (consumer config, info and every consumer endpoint), [`account`]
//! (`$JS.API.INFO`), [`pub_ack`], [`nanos`], [`time`].

/// Go's `fmt.Errorf("can not unmarshal %q", data)` for the raw JSON of a bad enum value: the
/// 10025 text nats-server gives for an unknown `retention`, `storage`, `ack_policy`, ...
pub(crate) fn can_not_unmarshal(raw: &Value) -> String {
    format!("can not unmarshal {:?}", raw.to_string())
}

/// Defines a JSON enum of the JetStream API: a plain Rust enum written as its wire spelling,
/// read from it (optionally ignoring case, optionally with one alias), anything else being an
/// error with the text `error` makes from the raw JSON value.
macro_rules! api_enum {
    ($(#[$doc:meta])* $name:ident { $( $(#[$vdoc:meta])* $variant:ident = $text:literal ),+ $(,)? }
     ignore_case $ic:literal
     $(, also $alias:literal => $avariant:ident)?
     , error $err:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
        pub enum $name {
            $( $(#[$vdoc])* $variant, )+
        }

        impl $name {
            /// The wire spelling.
            pub fn as_str(&self) -> &'static str {
                match self { $( Self::$variant => $text, )+ }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let raw = serde_json::Value::deserialize(d)?;
                if let serde_json::Value::String(s) = &raw {
                    $(
                        if s == $text || ($ic && s.eq_ignore_ascii_case($text)) {
                            return Ok(Self::$variant);
                        }
                    )+
                    $( if s == $alias { return Ok(Self::$avariant); } )?
                }
                let err: fn(&serde_json::Value) -> String = $err;
                Err(serde::de::Error::custom(err(&raw)))
            }
        }
    };
}

/// The server's `_nats.*` config metadata, shared by stream and consumer configs
/// (nats-server's `setStaticStreamMetadata`/`setDynamicStreamMetadata` and their consumer
/// twins).
pub(crate) mod server_metadata {
    use std::collections::BTreeMap;

    use super::stream::{META_REQUIRED_LEVEL, META_SERVER_LEVEL, META_SERVER_VERSION};
    use super::API_LEVEL;

    /// What is stored: only `_nats.req.level`, set to `level`.
    pub fn set_static(metadata: &mut BTreeMap<String, String>, level: u32) {
        metadata.remove(META_SERVER_LEVEL);
        metadata.remove(META_SERVER_VERSION);
        metadata.insert(META_REQUIRED_LEVEL.to_owned(), level.to_string());
    }

    /// What responses add: `_nats.level` and `_nats.ver`.
    pub fn add_dynamic(metadata: &mut BTreeMap<String, String>, server_version: &str) {
        metadata.insert(META_SERVER_VERSION.to_owned(), server_version.to_owned());
        metadata.insert(META_SERVER_LEVEL.to_owned(), API_LEVEL.to_string());
    }

    /// The metadata without any `_nats.*` key the server sets, for comparing configs.
    pub fn without(metadata: &BTreeMap<String, String>) -> BTreeMap<String, String> {
        let mut m = metadata.clone();
        for k in [META_REQUIRED_LEVEL, META_SERVER_LEVEL, META_SERVER_VERSION] {
            m.remove(k);
        }
        m
    }
}

pub mod account;
pub mod advisory;
pub mod cluster;
pub mod consumer;
pub mod error;
pub mod nanos;
pub mod pub_ack;
pub mod stream;
pub mod time;

use std::io;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

pub use account::{AccountInfo, AccountLimits, ApiStats};
pub use error::ApiError;
pub use pub_ack::PubAck;
pub use stream::{
    Compression, ConsumerLimits, DiscardPolicy, PersistMode, RetentionPolicy, StorageType,
    StoredMessage, StreamConfig, StreamConfigRequest, StreamInfo, StreamState,
};
pub use time::Timestamp;

/// The JetStream API level this crate speaks (nats-server 2.15.1 reports 5 in `api.level`).
pub const API_LEVEL: u32 = 5;

/// The subject prefix of every API request (`$JS.API.STREAM.CREATE.<name>`, …).
pub const API_PREFIX: &str = "$JS.API.";

/// The request header that asks for a minimum API level; above [`API_LEVEL`] the server answers
/// [`ApiError::required_api_level`] (10185). [`crate::headers::REQUIRED_API_LEVEL`], kept at its
/// earlier path.
pub use crate::headers::REQUIRED_API_LEVEL as REQUIRED_API_LEVEL_HEADER;

/// Prefix of every response `type`.
pub const RESPONSE_TYPE_PREFIX: &str = "io.nats.jetstream.api.v1.";

/// Maximum length of a stream or consumer name (`JSMaxNameLen`).
pub const MAX_NAME_LEN: usize = 255;
/// Maximum length of a description in bytes (`JSMaxDescriptionLen`, 4 KiB).
pub const MAX_DESCRIPTION_LEN: usize = 4 * 1024;
/// Maximum total size of metadata keys plus values in bytes (`JSMaxMetadataLen`, 128 KiB).
pub const MAX_METADATA_LEN: usize = 128 * 1024;

/// A JSON response body of the JetStream API: everything but `type` and `error`.
///
/// Implemented by every `…Response` type here. Serialising the body must give a JSON object.
pub trait ApiResponse: Serialize {
    /// The full `type` string, e.g. `"io.nats.jetstream.api.v1.stream_info_response"`.
    const TYPE: &'static str;
    /// Raw JSON members (each starting with `,`) that the server writes after `"error":{…}` in an
    /// error response of this type, because its Go struct has fields without `omitempty`:
    /// `,"total":0,"offset":0,"limit":0` for STREAM.INFO, `,"purged":0` for PURGE. Empty for most.
    const ERROR_EXTRA: &'static str = "";
}

/// Whether `name` is a valid stream or consumer name: non-empty and free of `.`, `*`, `>`,
/// whitespace (space, `\t`, `\r`, `\n`, `\x0c`), `/` and `\` (the server's `isValidAssetName`).
/// The length limit ([`MAX_NAME_LEN`]) is a separate check with its own error text.
pub fn is_valid_name(name: &str) -> bool {
    !name.is_empty()
        && !name.bytes().any(|b| {
            matches!(
                b,
                b' ' | b'\t' | b'\r' | b'\n' | 0x0c | b'.' | b'*' | b'>' | b'/' | b'\\'
            )
        })
}

/// Serialises `value` as Go's `encoding/json` would: compact, with `<`, `>`, `&`, U+2028 and
/// U+2029 escaped (`"orders.>"` becomes `"orders.\u003e"`). Fields come in declaration order.
pub fn to_json<T: Serialize + ?Sized>(value: &T) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    let mut ser = serde_json::Serializer::with_formatter(&mut out, GoFormatter);
    // Our types only hold strings, numbers, maps with string keys and sequences: cannot fail.
    value
        .serialize(&mut ser)
        .expect("API types serialise to JSON");
    out
}

/// A compact formatter that escapes like Go's `encoding/json` (HTML-safe).
struct GoFormatter;

impl serde_json::ser::Formatter for GoFormatter {
    fn write_string_fragment<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        let mut start = 0;
        for (i, c) in fragment.char_indices() {
            let esc = match c {
                '<' => "\\u003c",
                '>' => "\\u003e",
                '&' => "\\u0026",
                '\u{2028}' => "\\u2028",
                '\u{2029}' => "\\u2029",
                _ => continue,
            };
            w.write_all(&fragment.as_bytes()[start..i])?;
            w.write_all(esc.as_bytes())?;
            start = i + c.len_utf8();
        }
        w.write_all(&fragment.as_bytes()[start..])
    }
}

/// The success response: `{"type":"<T::TYPE>",<body's members>}`.
pub fn encode_ok<T: ApiResponse>(body: &T) -> Vec<u8> {
    let inner = to_json(body);
    let mut out = Vec::with_capacity(inner.len() + T::TYPE.len() + 12);
    out.extend_from_slice(b"{\"type\":");
    out.extend_from_slice(&to_json(T::TYPE));
    match inner.as_slice() {
        b"{}" => out.push(b'}'),
        [b'{', rest @ ..] => {
            out.push(b',');
            out.extend_from_slice(rest);
        }
        _ => panic!("an ApiResponse must serialise to a JSON object"),
    }
    out
}

/// The error response: `{"type":"<T::TYPE>","error":{…}<T::ERROR_EXTRA>}`.
///
/// ```
/// use jsproto::api::{encode_error, stream::StreamInfoResponse, ApiError};
/// assert_eq!(
///     encode_error::<StreamInfoResponse>(&ApiError::stream_not_found()),
///     br#"{"type":"io.nats.jetstream.api.v1.stream_info_response","error":{"code":404,"err_code":10059,"description":"stream not found"},"total":0,"offset":0,"limit":0}"#
/// );
/// ```
pub fn encode_error<T: ApiResponse>(err: &ApiError) -> Vec<u8> {
    let mut out = Vec::with_capacity(160);
    out.extend_from_slice(b"{\"type\":");
    out.extend_from_slice(&to_json(T::TYPE));
    out.extend_from_slice(b",\"error\":");
    out.extend_from_slice(&to_json(err));
    out.extend_from_slice(T::ERROR_EXTRA.as_bytes());
    out.push(b'}');
    out
}

/// [`encode_ok`] or [`encode_error`].
pub fn encode_response<T: ApiResponse>(result: &Result<T, ApiError>) -> Vec<u8> {
    match result {
        Ok(body) => encode_ok(body),
        Err(e) => encode_error::<T>(e),
    }
}

/// Reads an API response (client side): `Ok(Err(e))` when it carries `"error"`, `Ok(Ok(body))`
/// otherwise; `Err` when the JSON does not parse. Unknown fields (including `type`) are ignored.
pub fn decode_response<T: DeserializeOwned>(
    bytes: &[u8],
) -> Result<Result<T, ApiError>, serde_json::Error> {
    #[derive(Deserialize)]
    struct Probe {
        #[serde(default)]
        error: Option<ApiError>,
    }
    if let Some(e) = serde_json::from_slice::<Probe>(bytes)?.error {
        return Ok(Err(e));
    }
    serde_json::from_slice(bytes).map(Ok)
}

/// Decodes a request body the way the server does: an empty (or all-whitespace) body is
/// `T::default()`; otherwise the JSON must parse into `T`, else [`ApiError::invalid_json`]
/// (10025) with the decoder's text ([`json_error_text`]).
///
/// Request types here refuse unknown fields, as the server's strict decoder does. A `null`
/// body or `null` members mean "not given", as for Go's decoder (async-nats sends `null` for
/// an empty STREAM.INFO request and for unset options). As in Go, an object's keys match a
/// struct's fields in any case (`{"Seq":1}`), at every depth; a map's keys (`metadata`) are
/// kept as written.
pub fn decode_request<T: DeserializeOwned + Default>(body: &[u8]) -> Result<T, ApiError> {
    if body
        .iter()
        .all(|b| matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
    {
        return Ok(T::default());
    }
    let invalid = |e: serde_json::Error| ApiError::invalid_json(json_error_text(&e));
    match serde_json::from_slice::<Value>(body).map_err(invalid)? {
        Value::Null => Ok(T::default()),
        Value::Object(mut map) => {
            map.retain(|_, v| !v.is_null());
            crate::gojson::from_value(Value::Object(map)).map_err(invalid)
        }
        other => crate::gojson::from_value(other).map_err(invalid),
    }
}

/// The text after `"invalid JSON: "` for a decode error, close to Go's `encoding/json`:
///
/// * unknown field → `json: unknown field "bogus"` (exact);
/// * truncated input → `unexpected EOF` (exact);
/// * bad enum value → `can not unmarshal "\"foo\""` (exact, from the enum types here);
/// * anything else → serde_json's message without its ` at line L column C` suffix (Go's texts
///   name Go types, which we cannot mimic; clients only show this text).
pub fn json_error_text(e: &serde_json::Error) -> String {
    if e.is_eof() {
        return "unexpected EOF".to_owned();
    }
    let msg = e.to_string();
    let msg = match msg.rfind(" at line ") {
        Some(i) if msg[i..].contains(" column ") => &msg[..i],
        _ => msg.as_str(),
    };
    if let Some(rest) = msg.strip_prefix("unknown field `") {
        if let Some(end) = rest.find('`') {
            return format!("json: unknown field {:?}", &rest[..end]);
        }
    }
    msg.to_owned()
}

/// Deserialises `null` as `T::default()` (Go decodes `null` into a slice or map as empty).
pub(crate) fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}
