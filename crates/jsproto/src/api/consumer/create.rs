//! The CONSUMER.CREATE / CONSUMER.DURABLE.CREATE request: its body
//! ([`CreateConsumerRequest`], with its [`ConsumerAction`]) decoded strictly as the server
//! decodes it, and the create subjects ([`parse_create_subject`]).

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use super::config::{ConsumerConfig, CONSUMER_CONFIG_FIELDS, NULL_IS_ERROR};
use super::is_default;
use crate::api::{json_error_text, ApiError, API_PREFIX};
use crate::gojson::fold_keys;

/// `action` of a [`CreateConsumerRequest`]: `""` (create or update, the default), `"create"`,
/// `"update"`. Anything else — including `null` and numbers — is 10025
/// `invalid JSON: unknown consumer action: <raw JSON>` (observed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ConsumerAction {
    /// `""`: create, or update an existing consumer.
    #[default]
    CreateOrUpdate,
    /// `"create"`: an existing consumer with a different config is 10148
    /// [`ApiError::consumer_already_exists`]; the same config succeeds.
    Create,
    /// `"update"`: a missing consumer is 10149 [`ApiError::consumer_does_not_exist`].
    Update,
}

impl ConsumerAction {
    /// The wire spelling (`""`, `"create"`, `"update"`).
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::CreateOrUpdate => "",
            Self::Create => "create",
            Self::Update => "update",
        }
    }
}

impl Serialize for ConsumerAction {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ConsumerAction {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = Value::deserialize(d)?;
        match raw.as_str() {
            Some("") => Ok(Self::CreateOrUpdate),
            Some("create") => Ok(Self::Create),
            Some("update") => Ok(Self::Update),
            _ => Err(serde::de::Error::custom(format!(
                "unknown consumer action: {raw}"
            ))),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Create request
// ---------------------------------------------------------------------------------------------

/// The body of CONSUMER.CREATE / CONSUMER.DURABLE.CREATE (nats-server's
/// `CreateConsumerRequest`): `{"stream_name":…,"config":{…},"action":"","pedantic":false}`.
/// `pedantic` is omitted when false.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreateConsumerRequest {
    /// `stream_name`: must equal the stream in the subject (10056; also when missing).
    #[serde(default)]
    pub stream_name: String,
    /// `config`.
    #[serde(default)]
    pub config: ConsumerConfig,
    /// `action`.
    #[serde(default)]
    pub action: ConsumerAction,
    /// `pedantic`: refuse instead of silently adjusting (10157).
    #[serde(default, skip_serializing_if = "is_default")]
    pub pedantic: bool,
}

/// Raw duration values the decoder found negative (a [`Duration`] cannot hold them; the
/// server handles each differently).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct RawNegatives {
    /// `ack_wait` if negative.
    pub(super) ack_wait: Option<i64>,
    /// Indexes of negative `backoff` entries.
    pub(super) backoff: Vec<usize>,
    pub(super) idle_heartbeat: bool,
    pub(super) inactive_threshold: bool,
    pub(super) max_expires: bool,
    pub(super) priority_timeout: bool,
}

impl CreateConsumerRequest {
    /// Decodes a request body strictly, like the server: empty body or `null` = all defaults
    /// (stream name `""`, so 10056 follows); unknown fields, wrong types, bad enum values
    /// (`null` included) and malformed JSON are 10025 ([`ApiError::invalid_json`], e.g.
    /// `invalid JSON: json: unknown field "bogus"`, `invalid JSON: can not unmarshal
    /// "\"sometimes\""`, `invalid JSON: unknown consumer action: "bogus"`). Other `null`
    /// members mean "not given".
    ///
    /// Negative durations cannot be held in a [`Duration`](std::time::Duration): they read as 0 here;
    /// [`check_consumer_create`](super::check_consumer_create) applies the server's rules to them (10183 for `ack_wait`,
    /// 10184 for `backoff`, 0 or a pedantic error for the others).
    pub fn decode(body: &[u8]) -> Result<CreateConsumerRequest, ApiError> {
        decode_create(body).map(|(req, _)| req)
    }
}

/// [`CreateConsumerRequest::decode`], also returning the negative durations it zeroed.
pub(super) fn decode_create(
    body: &[u8],
) -> Result<(CreateConsumerRequest, RawNegatives), ApiError> {
    let invalid = |e: serde_json::Error| ApiError::invalid_json(json_error_text(&e));
    let mut neg = RawNegatives::default();
    if body
        .iter()
        .all(|b| matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
    {
        return Ok((CreateConsumerRequest::default(), neg));
    }
    // Not `decode_request`: a top-level `"action":null` must reach the action decoder.
    let top = match serde_json::from_slice::<Value>(body).map_err(invalid)? {
        Value::Null => return Ok((CreateConsumerRequest::default(), neg)),
        Value::Object(m) => m,
        other => {
            let kind = match other {
                Value::Array(_) => "array",
                Value::String(_) => "string",
                Value::Bool(_) => "bool",
                _ => "number",
            };
            return Err(ApiError::invalid_json(format_args!(
                "json: cannot unmarshal {kind} into Go value of type server.CreateConsumerRequest"
            )));
        }
    };
    // Keys match the fields in any case, as Go's decoder matches them.
    const TOP_FIELDS: &[&str] = &["stream_name", "config", "action", "pedantic"];
    let mut top = fold_keys(top, TOP_FIELDS);
    if let Some(k) = top.keys().find(|k| !TOP_FIELDS.contains(&k.as_str())) {
        return Err(ApiError::invalid_json(format_args!(
            "json: unknown field {k:?}"
        )));
    }
    let mut req = CreateConsumerRequest::default();
    if let Some(v) = top.remove("action") {
        req.action = ConsumerAction::deserialize(v).map_err(invalid)?;
    }
    match top.remove("stream_name") {
        None | Some(Value::Null) => {}
        Some(v) => req.stream_name = String::deserialize(v).map_err(invalid)?,
    }
    match top.remove("pedantic") {
        None | Some(Value::Null) => {}
        Some(v) => req.pedantic = bool::deserialize(v).map_err(invalid)?,
    }
    match top.remove("config") {
        None | Some(Value::Null) => {}
        Some(Value::Object(cfg)) => {
            let mut cfg = fold_keys(cfg, CONSUMER_CONFIG_FIELDS);
            cfg.retain(|k, v| !v.is_null() || NULL_IS_ERROR.contains(&k.as_str()));
            if let Some(k) = cfg
                .keys()
                .find(|k| !CONSUMER_CONFIG_FIELDS.contains(&k.as_str()))
            {
                return Err(ApiError::invalid_json(format_args!(
                    "json: unknown field {k:?}"
                )));
            }
            let mut zero_if_negative = |key: &str| -> Option<i64> {
                let v = cfg.get_mut(key)?;
                let n = v.as_i64().filter(|n| *n < 0)?;
                *v = Value::from(0);
                Some(n)
            };
            neg.ack_wait = zero_if_negative("ack_wait");
            neg.idle_heartbeat = zero_if_negative("idle_heartbeat").is_some();
            neg.inactive_threshold = zero_if_negative("inactive_threshold").is_some();
            neg.max_expires = zero_if_negative("max_expires").is_some();
            neg.priority_timeout = zero_if_negative("priority_timeout").is_some();
            if let Some(Value::Array(items)) = cfg.get_mut("backoff") {
                for (i, item) in items.iter_mut().enumerate() {
                    if item.as_i64().is_some_and(|n| n < 0) {
                        neg.backoff.push(i);
                        *item = Value::from(0);
                    }
                }
            }
            req.config = crate::gojson::from_value(Value::Object(cfg)).map_err(invalid)?;
        }
        Some(other) => {
            req.config = crate::gojson::from_value(other).map_err(invalid)?;
        }
    }
    Ok((req, neg))
}

// ---------------------------------------------------------------------------------------------
// Subjects
// ---------------------------------------------------------------------------------------------

/// Which create subject a request came on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CreateForm {
    /// `$JS.API.CONSUMER.CREATE.<s>`: legacy ephemeral; the name is `config.name` or generated;
    /// `durable_name` is refused (10020).
    LegacyEphemeral,
    /// `$JS.API.CONSUMER.CREATE.<s>.<n>[.<filter…>]`: the name is `<n>` (overriding
    /// `config.name`); durable iff `durable_name` is set, and then it must equal `<n>` (10017).
    Named,
    /// `$JS.API.CONSUMER.DURABLE.CREATE.<s>.<d>`: legacy durable; `durable_name` is required
    /// (10018) and must equal `<d>` (10017).
    LegacyDurable,
}

/// A parsed create subject.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateSubject<'a> {
    /// The form.
    pub form: CreateForm,
    /// The stream token.
    pub stream: &'a str,
    /// The consumer token (absent for [`CreateForm::LegacyEphemeral`]).
    pub consumer: Option<&'a str>,
    /// `<filter…>`: every token after the consumer name, joined by `.` ([`CreateForm::Named`]
    /// only); the request's `filter_subject` must equal it (10131).
    pub filter: Option<&'a str>,
}

/// Parses a consumer create subject, or `None` when the server would not answer at all:
/// not a create subject, fewer than 5 tokens, `DURABLE.CREATE` without exactly 7 tokens (its
/// subscription is `$JS.API.CONSUMER.DURABLE.CREATE.*.*`), or an empty token (all observed
/// to time out).
pub fn parse_create_subject(subject: &str) -> Option<CreateSubject<'_>> {
    let rest = subject
        .strip_prefix(API_PREFIX)?
        .strip_prefix("CONSUMER.")?;
    if subject.split('.').any(str::is_empty) {
        return None;
    }
    if let Some(rest) = rest.strip_prefix("DURABLE.CREATE.") {
        let (stream, durable) = rest.split_once('.')?;
        if durable.contains('.') {
            return None;
        }
        return Some(CreateSubject {
            form: CreateForm::LegacyDurable,
            stream,
            consumer: Some(durable),
            filter: None,
        });
    }
    let rest = rest.strip_prefix("CREATE.")?;
    Some(match rest.split_once('.') {
        None => CreateSubject {
            form: CreateForm::LegacyEphemeral,
            stream: rest,
            consumer: None,
            filter: None,
        },
        Some((stream, rest)) => {
            let (consumer, filter) = match rest.split_once('.') {
                None => (rest, None),
                Some((c, f)) => (c, Some(f)),
            };
            CreateSubject {
                form: CreateForm::Named,
                stream,
                consumer: Some(consumer),
                filter,
            }
        }
    })
}
