//! Streams: [`StreamConfig`] with the server's defaults and validation, [`StreamInfo`] /
//! [`StreamState`], and the request and response of every stream endpoint:
//!
//! | Subject | Request | Response (`type` suffix) |
//! |---|---|---|
//! | `$JS.API.STREAM.CREATE.<s>` | [`StreamConfigRequest`] ([`check_stream_create`]) | [`StreamCreateResponse`] (`stream_create_response`) |
//! | `$JS.API.STREAM.UPDATE.<s>` | [`StreamConfigRequest`] ([`check_stream_update`]) | [`StreamUpdateResponse`] (`stream_update_response`) |
//! | `$JS.API.STREAM.INFO.<s>` | [`StreamInfoRequest`] | [`StreamInfoResponse`] (`stream_info_response`) |
//! | `$JS.API.STREAM.DELETE.<s>` | empty | [`StreamDeleteResponse`] (`stream_delete_response`) |
//! | `$JS.API.STREAM.NAMES` | [`StreamNamesRequest`] | [`StreamNamesResponse`] (`stream_names_response`) |
//! | `$JS.API.STREAM.LIST` | [`StreamListRequest`] | [`StreamListResponse`] (`stream_list_response`) |
//! | `$JS.API.STREAM.PURGE.<s>` | [`StreamPurgeRequest`] | [`StreamPurgeResponse`] (`stream_purge_response`) |
//! | `$JS.API.STREAM.MSG.GET.<s>` | [`MsgGetRequest`] | [`StreamMsgGetResponse`] (`stream_msg_get_response`) |
//! | `$JS.API.STREAM.MSG.DELETE.<s>` | [`MsgDeleteRequest`] | [`StreamMsgDeleteResponse`] (`stream_msg_delete_response`) |
//! | `$JS.API.DIRECT.GET.<s>[.<subject>]` | [`MsgGetRequest`] | the stored message itself ([`direct_get_headers`]) |
//!
//! Field names, their order, `omitempty` behaviour and defaults are nats-server 2.15.1's
//! (`StreamConfig`, `StreamInfo`, `StreamState` in its `stream.go`/`store.go`), checked against
//! responses recorded from it (`tests/fixtures/`).

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use base64::Engine as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

pub use super::cluster::ClusterInfo;
use super::{
    can_not_unmarshal, decode_request, is_valid_name, json_error_text, nanos, null_as_default,
    ApiError, ApiResponse, Timestamp, MAX_DESCRIPTION_LEN, MAX_METADATA_LEN, MAX_NAME_LEN,
};
use crate::gojson::fold_keys;
use crate::headers::ROLLUP;
use crate::subject::{is_subset, is_valid_subject, overlaps};

/// The server's default `duplicate_window`: 2 minutes (`StreamDefaultDuplicatesWindow`).
pub const DEFAULT_DUPLICATE_WINDOW: Duration = Duration::from_secs(120);
/// Smallest non-zero `max_age` and `duplicate_window`: 100 ms.
pub const MIN_WINDOW: Duration = Duration::from_millis(100);
/// Largest `num_replicas` the server accepts at all (`StreamMaxReplicas`); standalone only 1.
pub const MAX_REPLICAS: i64 = 5;
/// `limit` of a STREAM.NAMES page (`JSApiNamesLimit`).
pub const NAMES_LIMIT: usize = 1024;
/// `limit` of a STREAM.LIST page (`JSApiListLimit`).
pub const LIST_LIMIT: usize = 256;
/// `limit` of the `state.subjects` page of a STREAM.INFO with `subjects_filter` (`JSMaxSubjectDetails`).
pub const SUBJECTS_LIMIT: usize = 100_000;

/// Metadata key the server stores: the API level the stream's features need (`"0"`…`"5"`).
pub const META_REQUIRED_LEVEL: &str = "_nats.req.level";
/// Metadata key added to responses only: the server's API level (`"5"`).
pub const META_SERVER_LEVEL: &str = "_nats.level";
/// Metadata key added to responses only: the server's version (`"2.15.1"`).
pub const META_SERVER_VERSION: &str = "_nats.ver";

// ---------------------------------------------------------------------------------------------
// Enums
// ---------------------------------------------------------------------------------------------

api_enum! {
    /// `retention`: when messages may be removed. Default `limits`. Exact spelling only
    /// (`"Limits"` is 10025 `can not unmarshal "\"Limits\""`). Changing to or from `workqueue`
    /// on update is refused.
    RetentionPolicy {
        /// `"limits"`: kept until a limit (`max_msgs`, `max_bytes`, `max_age`, …) removes them.
        #[default] Limits = "limits",
        /// `"interest"`: removed once every consumer has acknowledged them.
        Interest = "interest",
        /// `"workqueue"`: removed once one consumer has acknowledged them.
        WorkQueue = "workqueue",
    } ignore_case false, error can_not_unmarshal
}

api_enum! {
    /// `discard`: what happens when a limit is reached. Default `old`. The server compares
    /// case-insensitively (`"NEW"` is accepted) and always writes lower case.
    DiscardPolicy {
        /// `"old"`: drop the oldest messages.
        #[default] Old = "old",
        /// `"new"`: refuse the new message (PubAck error 10077, 503).
        New = "new",
    } ignore_case true, error can_not_unmarshal
}

api_enum! {
    /// `storage`: file or memory. Default `file`; cannot change on update. Exact spelling only.
    StorageType {
        /// `"file"`.
        #[default] File = "file",
        /// `"memory"`.
        Memory = "memory",
    } ignore_case false, error can_not_unmarshal
}

api_enum! {
    /// `compression` of the file store: `none` (default) or `s2`. Anything else is 10025
    /// (the server's text here is `invalid JSON: unknown compression algorithm`; ours is the
    /// generic `can not unmarshal …`).
    Compression {
        /// `"none"`.
        #[default] None = "none",
        /// `"s2"`.
        S2 = "s2",
    } ignore_case false, error can_not_unmarshal
}

api_enum! {
    /// `persist_mode` (2.12+): `default` (flush before the PubAck) or `async`. Omitted from the
    /// JSON when `default`; `""` reads as `default`.
    PersistMode {
        /// `"default"`.
        #[default] Default = "default",
        /// `"async"`: PubAck may precede the flush.
        Async = "async",
    } ignore_case false, error can_not_unmarshal
}

// `""` is also `default` for persist_mode: handled by a wrapper on the field.
fn persist_mode_de<'de, D: Deserializer<'de>>(d: D) -> Result<PersistMode, D::Error> {
    let raw = Value::deserialize(d)?;
    match &raw {
        Value::String(s) if s.is_empty() => Ok(PersistMode::Default),
        Value::Null => Ok(PersistMode::Default),
        _ => PersistMode::deserialize(raw).map_err(serde::de::Error::custom),
    }
}

fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}

// ---------------------------------------------------------------------------------------------
// StreamConfig
// ---------------------------------------------------------------------------------------------

/// `consumer_limits`: defaults imposed on the stream's consumers. `{}` when unset (always echoed).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsumerLimits {
    /// `inactive_threshold` (ns): default inactivity timeout for consumers. Omitted when zero.
    #[serde(default, with = "nanos", skip_serializing_if = "Duration::is_zero")]
    pub inactive_threshold: Duration,
    /// `max_ack_pending`: cap on consumers' `max_ack_pending`. Omitted when zero.
    #[serde(default, skip_serializing_if = "is_default")]
    pub max_ack_pending: i64,
}

/// `placement`: cluster and tags for the stream's replicas (clustered servers only).
/// An empty placement is dropped by the defaults; `preferred` is refused.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placement {
    /// `cluster`; omitted when empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cluster: String,
    /// `tags`; omitted when empty.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub tags: Vec<String>,
    /// `preferred` server; omitted when empty. Not permitted in a stream config.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub preferred: String,
}

/// `subject_transform`: `{"src":…,"dest":…}` applied to incoming subjects. Refused on create
/// and update ([`check_supported`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubjectTransform {
    /// `src`: the subject filter.
    #[serde(default)]
    pub src: String,
    /// `dest`: the destination mapping.
    #[serde(default)]
    pub dest: String,
}

/// `republish`: republish stored messages to `dest`. Refused on create and update
/// ([`check_supported`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RePublish {
    /// `src` filter; omitted when empty (the server reads empty as `>`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub src: String,
    /// `dest` subject mapping.
    #[serde(default)]
    pub dest: String,
    /// `headers_only`; omitted when false.
    #[serde(default, skip_serializing_if = "is_default")]
    pub headers_only: bool,
}

/// A stream's configuration: the body of STREAM.CREATE/UPDATE and `config` in every StreamInfo
/// (as nats-server's `StreamConfig`).
///
/// [`Default`] and missing JSON fields give Go's zero values, as the server's decoder does;
/// zero / `-1` / absent all mean "default" and [`StreamConfig::check`] fills the server's defaults
/// (`max_*` `-1`, `duplicate_window` 2 min or `max_age`, `num_replicas` 1, `subjects` `[name]`,
/// …). Serialising writes the fields in the server's order and omits exactly what it omits
/// (`description`, `no_ack`, `duplicate_window` when 0, `first_seq` when 0, …), so a defaulted
/// config serialises to the server's `config` object byte for byte (with [`super::to_json`]).
///
/// Parsing tolerates unknown fields (responses from newer servers); the strict request decoder
/// is [`StreamConfigRequest::decode`]. `mirror` and `sources` are kept as raw JSON; create and
/// update refuse them, with the other settings this server does not honour ([`check_supported`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StreamConfig {
    /// `name`: required; must equal the name in the request subject. See [`is_valid_name`].
    #[serde(default)]
    pub name: String,
    /// `description`: at most 4 KiB. Omitted when empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// `subjects` captured by the stream; `[name]` when empty (and not a mirror/source).
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub subjects: Vec<String>,
    /// `retention`. Default `limits`.
    #[serde(default)]
    pub retention: RetentionPolicy,
    /// `max_consumers`: -1 (unlimited) by default; 0 or < -1 become -1.
    #[serde(default)]
    pub max_consumers: i64,
    /// `max_msgs`: -1 by default; 0 or < -1 become -1.
    #[serde(default)]
    pub max_msgs: i64,
    /// `max_bytes`: -1 by default; 0 or < -1 become -1.
    #[serde(default)]
    pub max_bytes: i64,
    /// `max_age` (ns): 0 = forever. Else at least 100 ms. Negative is 10052.
    #[serde(default, with = "nanos")]
    pub max_age: Duration,
    /// `max_msgs_per_subject`: -1 by default; 0 or < -1 become -1.
    #[serde(default)]
    pub max_msgs_per_subject: i64,
    /// `max_msg_size` (bytes, Go int32): -1 by default; 0 or < -1 become -1. Omitted when 0
    /// (which only an undefaulted config has).
    #[serde(default, skip_serializing_if = "is_default")]
    pub max_msg_size: i32,
    /// `discard`. Default `old`.
    #[serde(default)]
    pub discard: DiscardPolicy,
    /// `storage`. Default `file`.
    #[serde(default)]
    pub storage: StorageType,
    /// `num_replicas`: 1 by default (0 becomes 1); > 1 is 10074 standalone, > 5 and < 0 refused.
    #[serde(default)]
    pub num_replicas: i64,
    /// `no_ack`: publish without PubAcks. Omitted when false.
    #[serde(default, skip_serializing_if = "is_default")]
    pub no_ack: bool,
    /// `duplicate_window` (ns) for `Nats-Msg-Id` dedupe: 2 min by default, or `max_age` when that
    /// is smaller. Omitted when zero.
    #[serde(default, with = "nanos", skip_serializing_if = "Duration::is_zero")]
    pub duplicate_window: Duration,
    /// `placement`. Omitted when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<Placement>,
    /// `mirror` (raw JSON, not interpreted). Omitted when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mirror: Option<Value>,
    /// `sources` (raw JSON objects, not interpreted). Omitted when empty.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub sources: Vec<Value>,
    /// `compression`. Default `none`.
    #[serde(default)]
    pub compression: Compression,
    /// `first_seq`: sequence of the first message. Omitted when 0.
    #[serde(default, skip_serializing_if = "is_default")]
    pub first_seq: u64,
    /// `subject_transform`. Omitted when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject_transform: Option<SubjectTransform>,
    /// `republish`. Omitted when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub republish: Option<RePublish>,
    /// `allow_direct`: serve `$JS.API.DIRECT.GET.<name>`. Always written.
    #[serde(default)]
    pub allow_direct: bool,
    /// `mirror_direct`: direct get for mirrors (needs `mirror`). Always written.
    #[serde(default)]
    pub mirror_direct: bool,
    /// `discard_new_per_subject`: needs discard `new` and `max_msgs_per_subject` > 0. Omitted when false.
    #[serde(default, skip_serializing_if = "is_default")]
    pub discard_new_per_subject: bool,
    /// `sealed`: no more writes or deletes; not on create; cannot be undone.
    #[serde(default)]
    pub sealed: bool,
    /// `deny_delete`: refuse MSG.DELETE; cannot be undone.
    #[serde(default)]
    pub deny_delete: bool,
    /// `deny_purge`: refuse PURGE; cannot be undone; excludes `allow_rollup_hdrs`.
    #[serde(default)]
    pub deny_purge: bool,
    /// `allow_rollup_hdrs`: honour `Nats-Rollup`.
    #[serde(default)]
    pub allow_rollup_hdrs: bool,
    /// `consumer_limits`. Always written (`{}` when unset).
    #[serde(default)]
    pub consumer_limits: ConsumerLimits,
    /// `allow_msg_ttl`: honour `Nats-TTL` ([`parse_msg_ttl`]); cannot be disabled later.
    /// Always written.
    #[serde(default)]
    pub allow_msg_ttl: bool,
    /// `subject_delete_marker_ttl` (ns on the wire, [`Duration`] here): at least 1 s; turns
    /// on `allow_msg_ttl` and rollups (see [`StreamConfig::check`]). When `max_age` or
    /// a message's own TTL removes a subject's last message, the stream stores a marker on
    /// that subject ([`subject_delete_marker_headers`]) that lives this long, and shorter
    /// publish TTLs are raised to it ([`raise_msg_ttl`]), as nats-server does. Omitted when
    /// zero.
    #[serde(default, with = "nanos", skip_serializing_if = "Duration::is_zero")]
    pub subject_delete_marker_ttl: Duration,
    /// `allow_msg_counter` (2.12+ counters). Omitted when false.
    #[serde(default, skip_serializing_if = "is_default")]
    pub allow_msg_counter: bool,
    /// `allow_atomic` (2.12+ atomic batches). Omitted when false.
    #[serde(default, skip_serializing_if = "is_default")]
    pub allow_atomic: bool,
    /// `allow_msg_schedules` (2.12+). Omitted when false.
    #[serde(default, skip_serializing_if = "is_default")]
    pub allow_msg_schedules: bool,
    /// `persist_mode`. Omitted when `default`.
    #[serde(
        default,
        deserialize_with = "persist_mode_de",
        skip_serializing_if = "is_default"
    )]
    pub persist_mode: PersistMode,
    /// `allow_batched` (2.14+ fast batches). Omitted when false.
    #[serde(default, skip_serializing_if = "is_default")]
    pub allow_batched: bool,
    /// `metadata`: user key/values plus the server's `_nats.*` keys
    /// ([`StreamConfig::set_static_metadata`], [`StreamConfig::with_dynamic_metadata`]).
    /// Written sorted by key, omitted when empty.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub metadata: BTreeMap<String, String>,
}

/// Every top-level JSON field of [`StreamConfig`], in the server's order (for the strict decoder).
pub const STREAM_CONFIG_FIELDS: &[&str] = &[
    "name",
    "description",
    "subjects",
    "retention",
    "max_consumers",
    "max_msgs",
    "max_bytes",
    "max_age",
    "max_msgs_per_subject",
    "max_msg_size",
    "discard",
    "storage",
    "num_replicas",
    "no_ack",
    "duplicate_window",
    "placement",
    "mirror",
    "sources",
    "compression",
    "first_seq",
    "subject_transform",
    "republish",
    "allow_direct",
    "mirror_direct",
    "discard_new_per_subject",
    "sealed",
    "deny_delete",
    "deny_purge",
    "allow_rollup_hdrs",
    "consumer_limits",
    "allow_msg_ttl",
    "subject_delete_marker_ttl",
    "allow_msg_counter",
    "allow_atomic",
    "allow_msg_schedules",
    "persist_mode",
    "allow_batched",
    "metadata",
];

/// Duration fields that the server refuses when negative with a 10052 text of its own, in the
/// order it checks them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Negatives {
    max_age: bool,
    duplicate_window: bool,
    subject_delete_marker_ttl: bool,
}

fn invalid(text: impl fmt::Display) -> ApiError {
    ApiError::stream_invalid_config(text)
}

impl StreamConfig {
    /// A config with only `name` and `subjects` set (all else zero = default), as a client sends.
    pub fn new(
        name: impl Into<String>,
        subjects: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        Self {
            name: name.into(),
            subjects: subjects.into_iter().map(Into::into).collect(),
            ..Self::default()
        }
    }

    /// Validates the config and fills the defaults exactly as nats-server's `checkStreamCfg`
    /// (standalone, no server- or account-wide limits), returning the config the server stores.
    ///
    /// Defaults: `storage` file, `num_replicas` 1, `max_msgs`/`max_bytes`/`max_msg_size`/
    /// `max_consumers`/`max_msgs_per_subject` -1 (for 0 or < -1), `duplicate_window` 2 min or
    /// `max_age` if smaller (only when 0 and not a mirror/source), `subjects` `[name]`,
    /// `subject_delete_marker_ttl` > 0 turns on `allow_msg_ttl` and `allow_rollup_hdrs` (and off
    /// `deny_purge`), `allow_msg_schedules` turns on rollups, an empty `placement` is dropped.
    ///
    /// Errors, in the server's order (all 10052 `stream_invalid_config` with the server's text,
    /// except where noted): name empty or with `.`/`*`/`>`/`\`/`/`/whitespace; name > 255;
    /// description > 4096; metadata > 128 KiB; `maximum replicas is 5`; replicas < 0 (10133);
    /// pedantic `max_*` < -1 (10157); `max_age` negative or < 100 ms; `duplicate_window`
    /// negative, larger than `max_age` or < 100 ms; roll-ups with `deny_purge`; counter
    /// conflicts; discard new per subject without discard new / `max_msgs_per_subject`; subject delete marker TTL < 1 s;
    /// schedules with discard new; async persist on memory / with atomic; mirror with subjects
    /// (10034); `invalid subject`; `subject "a" overlaps with "b"`; `>` without `no_ack` or with
    /// replicas ≠ 1; `$JS.>`/`$JSC.>`/`$NRG.>`/`$SYS.>` overlap without `no_ack`; preferred
    /// placement.
    ///
    /// `pedantic` (the request's `pedantic` flag) turns silent adjustments into 10157 errors.
    /// Replicas > 1 in standalone mode (10074) is checked by [`check_stream_create`] after this.
    pub fn check(&self, pedantic: bool) -> Result<StreamConfig, ApiError> {
        check_cfg(self, pedantic, Negatives::default())
    }

    /// Whether any of this stream's subjects overlaps any of `others` (another stream's
    /// subjects): such a create/update is 10065 [`ApiError::stream_subject_overlap`].
    pub fn subjects_overlap(&self, others: &[String]) -> bool {
        self.subjects
            .iter()
            .any(|a| others.iter().any(|b| overlaps(a.as_bytes(), b.as_bytes())))
    }

    /// The API level the config's features need, as the server computes it for
    /// `_nats.req.level`: 1 for message TTLs / delete markers, 2 for counters, atomic batches,
    /// schedules and async persist, 4 for fast batches, else 0.
    pub fn required_api_level(&self) -> u32 {
        let mut level = 0;
        if self.allow_msg_ttl || !self.subject_delete_marker_ttl.is_zero() {
            level = level.max(1);
        }
        if self.allow_msg_counter
            || self.allow_atomic
            || self.allow_msg_schedules
            || self.persist_mode == PersistMode::Async
        {
            level = level.max(2);
        }
        if self.allow_batched {
            level = level.max(4);
        }
        level
    }

    /// Sets the metadata the server stores with a stream: removes `_nats.level`/`_nats.ver`
    /// and sets `_nats.req.level` to [`StreamConfig::required_api_level`]
    /// (`setStaticStreamMetadata`). Done on create and update; STREAM.LIST shows only this.
    pub fn set_static_metadata(&mut self) {
        let level = self.required_api_level();
        super::server_metadata::set_static(&mut self.metadata, level);
    }

    /// A copy with the response-only metadata added: `_nats.level` ([`API_LEVEL`](super::API_LEVEL)) and
    /// `_nats.ver` (`server_version`, e.g. `"2.15.1"`), as in CREATE/UPDATE/INFO responses.
    pub fn with_dynamic_metadata(&self, server_version: &str) -> StreamConfig {
        let mut c = self.clone();
        super::server_metadata::add_dynamic(&mut c.metadata, server_version);
        c
    }

    /// Whether two configs are the same for an idempotent CREATE (else 10058
    /// [`ApiError::stream_name_exist`]): equal apart from the server's `_nats.*` metadata keys.
    /// Compare checked (defaulted) configs.
    pub fn same_as(&self, other: &StreamConfig) -> bool {
        let strip = |c: &StreamConfig| StreamConfig {
            metadata: super::server_metadata::without(&c.metadata),
            ..c.clone()
        };
        strip(self) == strip(other)
    }
}

fn check_cfg(
    config: &StreamConfig,
    pedantic: bool,
    neg: Negatives,
) -> Result<StreamConfig, ApiError> {
    if !is_valid_name(&config.name) {
        return Err(invalid(
            "stream name is required and can not contain '.', '*', '>', '\\', '/'",
        ));
    }
    if config.name.len() > MAX_NAME_LEN {
        return Err(invalid(format_args!(
            "stream name is too long, maximum allowed is {MAX_NAME_LEN}"
        )));
    }
    if config.description.len() > MAX_DESCRIPTION_LEN {
        return Err(invalid(format_args!(
            "stream description is too long, maximum allowed is {MAX_DESCRIPTION_LEN}"
        )));
    }
    let metadata_len: usize = config.metadata.iter().map(|(k, v)| k.len() + v.len()).sum();
    if metadata_len > MAX_METADATA_LEN {
        return Err(invalid(format_args!(
            "stream metadata exceeds maximum size of {MAX_METADATA_LEN} bytes"
        )));
    }
    let mut cfg = config.clone();
    if cfg.num_replicas == 0 {
        cfg.num_replicas = 1;
    }
    if cfg.num_replicas > MAX_REPLICAS {
        return Err(invalid(format_args!("maximum replicas is {MAX_REPLICAS}")));
    }
    if cfg.num_replicas < 0 {
        return Err(ApiError::replicas_count_cannot_be_negative());
    }
    for (field, value, name) in [
        (&mut cfg.max_msgs, config.max_msgs, "max_msgs"),
        (
            &mut cfg.max_msgs_per_subject,
            config.max_msgs_per_subject,
            "max_msgs_per_subject",
        ),
        (&mut cfg.max_bytes, config.max_bytes, "max_bytes"),
    ] {
        if value == 0 || value < -1 {
            if pedantic && value < -1 {
                return Err(ApiError::pedantic(format_args!("{name} must be set to -1")));
            }
            *field = -1;
        }
    }
    if cfg.max_msg_size == 0 || cfg.max_msg_size < -1 {
        if pedantic && cfg.max_msg_size < -1 {
            return Err(ApiError::pedantic("max_msg_size must be set to -1"));
        }
        cfg.max_msg_size = -1;
    }
    if cfg.max_consumers == 0 || cfg.max_consumers < -1 {
        if pedantic && cfg.max_consumers < -1 {
            return Err(ApiError::pedantic("max_consumers must be set to -1"));
        }
        cfg.max_consumers = -1;
    }
    if neg.max_age {
        return Err(invalid("max age can not be negative"));
    }
    if !cfg.max_age.is_zero() && cfg.max_age < MIN_WINDOW {
        return Err(invalid("max age needs to be >= 100ms"));
    }
    let plain = cfg.mirror.is_none() && cfg.sources.is_empty();
    if cfg.duplicate_window.is_zero() && plain && !neg.duplicate_window {
        if !cfg.max_age.is_zero() && cfg.max_age < DEFAULT_DUPLICATE_WINDOW {
            if pedantic {
                return Err(ApiError::pedantic(
                    "duplicate window cannot be bigger than max age",
                ));
            }
            cfg.duplicate_window = cfg.max_age;
        } else {
            cfg.duplicate_window = DEFAULT_DUPLICATE_WINDOW;
        }
    }
    if neg.duplicate_window {
        return Err(invalid("duplicates window can not be negative"));
    }
    if !cfg.max_age.is_zero() && cfg.duplicate_window > cfg.max_age {
        return Err(invalid("duplicates window can not be larger then max age"));
    }
    if !cfg.duplicate_window.is_zero() && cfg.duplicate_window < MIN_WINDOW {
        return Err(invalid("duplicates window needs to be >= 100ms"));
    }
    if cfg.deny_purge && cfg.allow_rollup_hdrs {
        return Err(invalid("roll-ups require the purge permission"));
    }
    if cfg.allow_msg_counter {
        if cfg.discard == DiscardPolicy::New {
            return Err(invalid("counter stream cannot use discard new"));
        }
        if cfg.allow_msg_ttl {
            return Err(invalid("counter stream cannot use message TTLs"));
        }
        if cfg.allow_msg_schedules {
            return Err(invalid("counter stream cannot use message schedules"));
        }
        if cfg.retention != RetentionPolicy::Limits {
            return Err(invalid("counter stream can only use limits retention"));
        }
    }
    check_discard_new_per(&cfg)?;
    if !cfg.subject_delete_marker_ttl.is_zero() {
        if cfg.subject_delete_marker_ttl < Duration::from_secs(1) {
            return Err(invalid(
                "subject delete marker TTL must be at least 1 second",
            ));
        }
        if !cfg.allow_msg_ttl {
            if pedantic {
                return Err(invalid(
                    "subject delete marker cannot be set if message TTLs are disabled",
                ));
            }
            cfg.allow_msg_ttl = true;
        }
        if !cfg.allow_rollup_hdrs {
            if pedantic {
                return Err(invalid(
                    "subject delete marker cannot be set if roll-ups are disabled",
                ));
            }
            cfg.allow_rollup_hdrs = true;
            cfg.deny_purge = false;
        }
    } else if neg.subject_delete_marker_ttl {
        return Err(invalid("subject delete marker TTL must not be negative"));
    }
    if cfg.allow_msg_schedules {
        if cfg.discard == DiscardPolicy::New {
            return Err(invalid("message scheduling cannot use discard new"));
        }
        if !cfg.allow_rollup_hdrs {
            if pedantic {
                return Err(invalid(
                    "message scheduling cannot be set if roll-ups are disabled",
                ));
            }
            cfg.allow_rollup_hdrs = true;
            cfg.deny_purge = false;
        }
    }
    if cfg.persist_mode == PersistMode::Async {
        if cfg.storage != StorageType::File {
            return Err(invalid(
                "async persist mode is only supported on file storage",
            ));
        }
        if cfg.num_replicas > 1 {
            return Err(invalid(
                "async persist mode is not supported on replicated streams",
            ));
        }
        if cfg.allow_atomic {
            return Err(invalid(
                "async persist mode is not supported with atomic batch publish",
            ));
        }
    }
    if cfg.mirror.is_some() && !cfg.subjects.is_empty() {
        return Err(ApiError::mirror_with_subjects());
    }
    if cfg.subjects.is_empty() {
        if plain {
            cfg.subjects.push(cfg.name.clone());
        }
    } else {
        check_subjects(&cfg)?;
    }
    if cfg
        .placement
        .as_ref()
        .is_some_and(|p| *p == Placement::default())
    {
        cfg.placement = None;
    }
    if cfg
        .placement
        .as_ref()
        .is_some_and(|p| !p.preferred.is_empty())
    {
        return Err(invalid("preferred server not permitted in placement"));
    }
    Ok(cfg)
}

fn check_discard_new_per(cfg: &StreamConfig) -> Result<(), ApiError> {
    if cfg.discard_new_per_subject {
        if cfg.discard != DiscardPolicy::New {
            return Err(invalid(
                "discard new per subject requires discard new policy to be set",
            ));
        }
        if cfg.max_msgs_per_subject <= 0 {
            return Err(invalid(
                "discard new per subject requires max msgs per subject > 0",
            ));
        }
    }
    Ok(())
}

fn check_subjects(cfg: &StreamConfig) -> Result<(), ApiError> {
    let mut seen = std::collections::HashSet::new();
    for (i, subj) in cfg.subjects.iter().enumerate() {
        let s = subj.as_bytes();
        if !is_valid_subject(s) {
            return Err(invalid("invalid subject"));
        }
        if !seen.insert(subj.as_str()) {
            return Err(invalid("duplicate subjects detected"));
        }
        if subj == ">" {
            if !cfg.no_ack {
                return Err(invalid("capturing all subjects requires no-ack to be true"));
            }
            if cfg.num_replicas != 1 {
                return Err(invalid("capturing all subjects requires replicas of 1"));
            }
        }
        if !cfg.no_ack {
            for ns in ["$JS.>", "$JSC.>", "$NRG.>"] {
                if overlaps(s, ns.as_bytes()) && !is_subset(s, b"$JS.EVENT.>") {
                    return Err(invalid(
                        "subjects that overlap with jetstream api require no-ack to be true",
                    ));
                }
            }
            if overlaps(s, b"$SYS.>") && !is_subset(s, b"$SYS.ACCOUNT.>") {
                return Err(invalid(
                    "subjects that overlap with system api require no-ack to be true",
                ));
            }
        }
        if let Some(other) = cfg.subjects[i + 1..]
            .iter()
            .find(|t| overlaps(t.as_bytes(), s))
        {
            return Err(invalid(format_args!(
                "subject {subj:?} overlaps with {other:?}"
            )));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Create / update requests
// ---------------------------------------------------------------------------------------------

/// The body of STREAM.CREATE and STREAM.UPDATE: a [`StreamConfig`] plus the request-only
/// `pedantic` flag (omitted when false), as nats-server's `StreamConfigRequest`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StreamConfigRequest {
    /// The config, flattened into the same JSON object.
    #[serde(flatten)]
    pub config: StreamConfig,
    /// `pedantic`: refuse instead of silently adjusting (errors 10157).
    #[serde(default, skip_serializing_if = "is_default")]
    pub pedantic: bool,
}

impl StreamConfigRequest {
    /// Decodes a request body strictly, like the server: empty body = all defaults (name `""`);
    /// unknown fields, wrong types, bad enum values and malformed JSON are 10025
    /// ([`ApiError::invalid_json`], e.g. `invalid JSON: json: unknown field "bogus"`).
    ///
    /// A negative `max_age`, `duplicate_window` or `subject_delete_marker_ttl` cannot be held in
    /// a [`Duration`]; here it is the server's 10052 text (`max age can not be negative`, …).
    /// [`check_stream_create`]/[`check_stream_update`] report it in the server's order instead.
    pub fn decode(body: &[u8]) -> Result<StreamConfigRequest, ApiError> {
        let (req, neg) = decode_config_request(body)?;
        if neg != Negatives::default() {
            // Same texts and precedence as check_cfg.
            check_cfg(&req.config, req.pedantic, neg)?;
        }
        Ok(req)
    }
}

/// Removes `null` members from `map` and from the objects nested in it.
fn strip_nulls(map: &mut serde_json::Map<String, Value>) {
    map.retain(|_, v| !v.is_null());
    for v in map.values_mut() {
        if let Value::Object(inner) = v {
            strip_nulls(inner);
        }
    }
}

fn decode_config_request(body: &[u8]) -> Result<(StreamConfigRequest, Negatives), ApiError> {
    let map: serde_json::Map<String, Value> = decode_request(body)?;
    // Keys match the fields in any case, as Go's decoder matches them.
    let mut map = fold_keys(fold_keys(map, STREAM_CONFIG_FIELDS), &["pedantic"]);
    let mut neg = Negatives::default();
    // Go's decoder leaves a field at its zero value when the JSON says `null`; clients send
    // that (async-nats writes `"consumer_limits":null`).
    strip_nulls(&mut map);
    // The server's decoder stops at the first unknown field (objects here are key-sorted).
    if let Some(k) = map
        .keys()
        .find(|k| *k != "pedantic" && !STREAM_CONFIG_FIELDS.contains(&k.as_str()))
    {
        return Err(ApiError::invalid_json(format_args!(
            "json: unknown field {k:?}"
        )));
    }
    for (key, flag) in [
        ("max_age", &mut neg.max_age),
        ("duplicate_window", &mut neg.duplicate_window),
        (
            "subject_delete_marker_ttl",
            &mut neg.subject_delete_marker_ttl,
        ),
    ] {
        if let Some(v) = map.get_mut(key) {
            if v.as_i64().is_some_and(|n| n < 0) {
                *flag = true;
                *v = Value::from(0);
            }
        }
    }
    let pedantic = match map.remove("pedantic") {
        None | Some(Value::Null) => false,
        Some(v) => bool::deserialize(v).map_err(|e| ApiError::invalid_json(json_error_text(&e)))?,
    };
    let config = crate::gojson::from_value::<StreamConfig>(Value::Object(map))
        .map_err(|e| ApiError::invalid_json(json_error_text(&e)))?;
    Ok((StreamConfigRequest { config, pedantic }, neg))
}

/// Everything the server checks on `$JS.API.STREAM.CREATE.<subject_name>` before it looks at
/// existing streams, in its order; returns the checked, defaulted config with static metadata
/// ([`StreamConfig::set_static_metadata`]) — what to store and compare.
///
/// 1. body → 10025 ([`StreamConfigRequest::decode`]);
/// 2. `name` ≠ `subject_name` (also: empty body) → 10056 [`ApiError::stream_mismatch`];
/// 3. `/` or `\` in the name → 10128 [`ApiError::stream_name_contains_path_separators`];
/// 4. `sealed` → 10052 `stream configuration for create can not be sealed`;
/// 5. `mirror_direct` without `mirror` → 10052 `stream has no mirror but does have mirror direct`;
/// 6. [`StreamConfig::check`];
/// 7. `num_replicas` > 1 → 10074 [`ApiError::stream_replicas_not_supported`].
///
/// These are nats-server's checks; the settings this server does not honour are refused after
/// them by [`check_supported`].
///
/// Left to the caller (they need server state): account limits, an existing stream with the same
/// name ([`StreamConfig::same_as`] → idempotent success, else 10058), subject overlap with other
/// streams ([`StreamConfig::subjects_overlap`] → 10065).
pub fn check_stream_create(subject_name: &str, body: &[u8]) -> Result<StreamConfig, ApiError> {
    check_stream_create_in(subject_name, body, false)
}

/// [`check_stream_create`] on a standalone server (`clustered` false) or in a cluster, where
/// `num_replicas` up to [`MAX_REPLICAS`] is accepted (step 7 left out).
pub fn check_stream_create_in(
    subject_name: &str,
    body: &[u8],
    clustered: bool,
) -> Result<StreamConfig, ApiError> {
    let (req, neg) = decode_config_request(body)?;
    let cfg = &req.config;
    if cfg.name != subject_name {
        return Err(ApiError::stream_mismatch());
    }
    if subject_name.contains(['/', '\\']) {
        return Err(ApiError::stream_name_contains_path_separators());
    }
    if cfg.sealed {
        return Err(invalid("stream configuration for create can not be sealed"));
    }
    if cfg.mirror_direct && cfg.mirror.is_none() {
        return Err(invalid("stream has no mirror but does have mirror direct"));
    }
    let mut out = check_cfg(cfg, req.pedantic, neg)?;
    if out.num_replicas > 1 && !clustered {
        return Err(ApiError::stream_replicas_not_supported());
    }
    out.set_static_metadata();
    Ok(out)
}

/// Everything the server checks on `$JS.API.STREAM.UPDATE.<subject_name>` against the stored
/// config `current`, in its order; returns the new config to store (static metadata set).
///
/// 1. body → 10025; 2. [`StreamConfig::check`] (a bad config wins over a name mismatch);
/// 3. `name` ≠ `subject_name` → 10056; (the caller answers 10059 if the stream does not exist);
/// 4. then, all 10052 unless noted: `stream configuration name must match original`; replicas > 1
///    → 10074; `stream configuration update can not change storage type`; `… can not change
///    retention policy to/from workqueue`; `… can not unseal a sealed stream`; `… can not cancel
///    deny message deletes`; `… can not cancel deny purge`; changed mirror → 10055; discard new
///    per subject rules; `message TTL status can not be disabled`; `… can not change message
///    counter setting`; `message schedules can not be disabled`; `… can not change persist mode`.
///
/// These are nats-server's checks; [`check_supported`] comes after them.
///
/// Sealing (`sealed: true`) also sets `max_age` 0, discard `new`, `deny_delete`, `deny_purge`
/// and clears `allow_rollup_hdrs`, as the server does. Account limits and subject overlap with
/// other streams are left to the caller.
pub fn check_stream_update(
    subject_name: &str,
    body: &[u8],
    current: &StreamConfig,
) -> Result<StreamConfig, ApiError> {
    check_stream_update_in(subject_name, body, current, false)
}

/// [`check_stream_update`] on a standalone server (`clustered` false) or in a cluster, where
/// the replicas may be more than one and grow or shrink, back to one included.
pub fn check_stream_update_in(
    subject_name: &str,
    body: &[u8],
    current: &StreamConfig,
    clustered: bool,
) -> Result<StreamConfig, ApiError> {
    let (req, neg) = decode_config_request(body)?;
    let cfg = check_cfg(&req.config, req.pedantic, neg)?;
    if cfg.name != subject_name {
        return Err(ApiError::stream_mismatch());
    }
    let mut cfg = check_cfg(&cfg, req.pedantic, Negatives::default())?;
    let old = current;
    if cfg.name != old.name {
        return Err(invalid("stream configuration name must match original"));
    }
    if cfg.num_replicas > 1 && !clustered {
        return Err(ApiError::stream_replicas_not_supported());
    }
    if cfg.storage != old.storage {
        return Err(invalid(
            "stream configuration update can not change storage type",
        ));
    }
    if cfg.retention != old.retention
        && (old.retention == RetentionPolicy::WorkQueue
            || cfg.retention == RetentionPolicy::WorkQueue)
    {
        return Err(invalid(
            "stream configuration update can not change retention policy to/from workqueue",
        ));
    }
    if !cfg.sealed && old.sealed {
        return Err(invalid(
            "stream configuration update can not unseal a sealed stream",
        ));
    }
    if !cfg.deny_delete && old.deny_delete {
        return Err(invalid(
            "stream configuration update can not cancel deny message deletes",
        ));
    }
    if !cfg.deny_purge && old.deny_purge {
        return Err(invalid(
            "stream configuration update can not cancel deny purge",
        ));
    }
    if cfg.mirror.is_some() && cfg.mirror != old.mirror {
        return Err(ApiError::stream_mirror_not_updatable());
    }
    check_discard_new_per(&cfg)?;
    if old.allow_msg_ttl && !cfg.allow_msg_ttl {
        return Err(invalid("message TTL status can not be disabled"));
    }
    if cfg.allow_msg_counter != old.allow_msg_counter {
        return Err(invalid(
            "stream configuration update can not change message counter setting",
        ));
    }
    if old.allow_msg_schedules && !cfg.allow_msg_schedules {
        return Err(invalid("message schedules can not be disabled"));
    }
    if old.persist_mode != cfg.persist_mode {
        return Err(invalid(
            "stream configuration update can not change persist mode",
        ));
    }
    if cfg.sealed {
        cfg.max_age = Duration::ZERO;
        cfg.discard = DiscardPolicy::New;
        cfg.deny_delete = true;
        cfg.deny_purge = true;
        cfg.allow_rollup_hdrs = false;
    }
    cfg.set_static_metadata();
    Ok(cfg)
}

/// The settings nats-server honours that this server does not (yet), in the server's field
/// order: the server refuses each on create and update, after [`check_stream_create`] /
/// [`check_stream_update`] (10052 `… is not supported by this server yet`, [`check_supported`]),
/// rather than storing and ignoring it. Compression is refused on file streams only: nats-server's
/// memory store ignores it too.
///
/// `placement` is accepted: a standalone nats-server stores it and places nothing either.
pub fn unsupported_setting(cfg: &StreamConfig) -> Option<&'static str> {
    [
        (cfg.mirror.is_some(), "mirror"),
        (!cfg.sources.is_empty(), "sources"),
        (
            cfg.compression != Compression::None && cfg.storage == StorageType::File,
            "compression",
        ),
        (cfg.first_seq > 0, "first_seq"),
        (cfg.subject_transform.is_some(), "subject_transform"),
        (cfg.republish.is_some(), "republish"),
        (cfg.allow_msg_counter, "allow_msg_counter"),
        (cfg.allow_atomic, "allow_atomic"),
        (cfg.allow_msg_schedules, "allow_msg_schedules"),
        (
            cfg.persist_mode != PersistMode::Default,
            "persist_mode async",
        ),
        (cfg.allow_batched, "allow_batched"),
    ]
    .into_iter()
    .find_map(|(set, name)| set.then_some(name))
}

/// [`unsupported_setting`] as the error create and update answer: 10052 naming the setting.
pub fn check_supported(cfg: &StreamConfig) -> Result<(), ApiError> {
    match unsupported_setting(cfg) {
        Some(name) => Err(invalid(format_args!(
            "{name} is not supported by this server yet"
        ))),
        None => Ok(()),
    }
}

/// The consumer-limits check of a stream update (nats-server's `updateWithAdvisory`, after
/// [`check_stream_update`], before the subject-overlap check): when the update sets
/// `consumer_limits.inactive_threshold` or `.max_ack_pending` to a new non-zero value, every
/// existing consumer (`consumers`: name and stored config) whose own `inactive_threshold` or
/// `max_ack_pending` is above the new limit is named in 10069 [`ApiError::stream_update`]
/// `change to limits violates consumers: A, B` (names joined by `, `; the server's order is
/// its map order, ours the order given). Limits unset (0) or unchanged are not checked.
pub fn check_consumer_limits_update<'a>(
    old: &ConsumerLimits,
    new: &ConsumerLimits,
    consumers: impl IntoIterator<Item = (&'a str, &'a super::consumer::ConsumerConfig)>,
) -> Result<(), ApiError> {
    let new_inactive =
        !new.inactive_threshold.is_zero() && new.inactive_threshold != old.inactive_threshold;
    let new_pending = new.max_ack_pending > 0 && new.max_ack_pending != old.max_ack_pending;
    if !new_inactive && !new_pending {
        return Ok(());
    }
    let violating: Vec<&str> = consumers
        .into_iter()
        .filter(|(_, c)| {
            (new_inactive && c.inactive_threshold > new.inactive_threshold)
                || (new_pending && c.max_ack_pending > new.max_ack_pending)
        })
        .map(|(name, _)| name)
        .collect();
    if violating.is_empty() {
        return Ok(());
    }
    Err(ApiError::stream_update(format!(
        "change to limits violates consumers: {}",
        violating.join(", ")
    )))
}

// ---------------------------------------------------------------------------------------------
// StreamInfo / StreamState
// ---------------------------------------------------------------------------------------------

/// `lost` in a stream state: messages the store lost (e.g. corruption).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LostStreamData {
    /// `msgs`: the lost sequences.
    #[serde(default, deserialize_with = "null_as_default")]
    pub msgs: Vec<u64>,
    /// `bytes` lost.
    #[serde(default)]
    pub bytes: u64,
}

/// `state` of a StreamInfo (nats-server's `StreamState`).
///
/// Always written: `messages, bytes, first_seq, first_ts, last_seq, last_ts, consumer_count`.
/// Empty stream: seqs 0 and both times [`Timestamp::ZERO`]. After purging everything:
/// `first_seq = last_seq + 1`, `first_ts` zero, `last_ts` kept.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamState {
    /// `messages` stored.
    #[serde(default)]
    pub messages: u64,
    /// `bytes`: the store's size estimate (file store ≈ 30 + subject + payload (+ 4 + headers)).
    #[serde(default)]
    pub bytes: u64,
    /// `first_seq`.
    #[serde(default)]
    pub first_seq: u64,
    /// `first_ts`: time of the first message; zero time when none.
    #[serde(default)]
    pub first_ts: Timestamp,
    /// `last_seq`.
    #[serde(default)]
    pub last_seq: u64,
    /// `last_ts`: time of the last message; zero time when none ever.
    #[serde(default)]
    pub last_ts: Timestamp,
    /// `num_subjects`: distinct subjects stored. Omitted when 0.
    #[serde(default, skip_serializing_if = "is_default")]
    pub num_subjects: u64,
    /// `subjects`: subject → count, only with `subjects_filter`; omitted when empty. Sorted.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub subjects: BTreeMap<String, u64>,
    /// `num_deleted`: interior deletes. Omitted when 0.
    #[serde(default, skip_serializing_if = "is_default")]
    pub num_deleted: u64,
    /// `deleted`: the deleted sequences, only with `deleted_details`. Omitted when empty.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub deleted: Vec<u64>,
    /// `lost`. Omitted when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost: Option<LostStreamData>,
    /// `consumer_count`.
    #[serde(default)]
    pub consumer_count: u64,
}

/// A stream's config and state (nats-server's `StreamInfo`): the body of CREATE/UPDATE/INFO
/// responses and each entry of STREAM.LIST.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StreamInfo {
    /// `config`: the stored config; responses add dynamic metadata
    /// ([`StreamConfig::with_dynamic_metadata`]), LIST entries do not.
    pub config: StreamConfig,
    /// `created`: creation time (unchanged by updates and idempotent creates).
    pub created: Timestamp,
    /// `state`.
    pub state: StreamState,
    /// `domain`: JetStream domain; omitted when empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub domain: String,
    /// `cluster`: see [`ClusterInfo`]. Omitted when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<ClusterInfo>,
    /// `mirror` info (raw). Omitted when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mirror: Option<Value>,
    /// `sources` info (raw). Omitted when empty.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub sources: Vec<Value>,
    /// `alternates` (raw). Omitted when empty.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub alternates: Vec<Value>,
    /// `ts`: when this info was generated.
    pub ts: Timestamp,
}

// ---------------------------------------------------------------------------------------------
// Responses
// ---------------------------------------------------------------------------------------------

/// STREAM.CREATE response: StreamInfo + `did_create` (`true` on success, also for an idempotent
/// re-create; omitted when false).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StreamCreateResponse {
    /// The stream.
    #[serde(flatten)]
    pub info: StreamInfo,
    /// `did_create`.
    #[serde(default, skip_serializing_if = "is_default")]
    pub did_create: bool,
}

impl ApiResponse for StreamCreateResponse {
    const TYPE: &'static str = "io.nats.jetstream.api.v1.stream_create_response";
}

/// STREAM.UPDATE response: the StreamInfo after the update.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StreamUpdateResponse {
    /// The stream.
    #[serde(flatten)]
    pub info: StreamInfo,
}

impl ApiResponse for StreamUpdateResponse {
    const TYPE: &'static str = "io.nats.jetstream.api.v1.stream_update_response";
}

/// STREAM.INFO request: empty, or any of these (unknown fields are 10025).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamInfoRequest {
    /// `offset` into the `state.subjects` page.
    #[serde(default, skip_serializing_if = "is_default")]
    pub offset: usize,
    /// `deleted_details`: list deleted sequences in `state.deleted`.
    #[serde(default, skip_serializing_if = "is_default")]
    pub deleted_details: bool,
    /// `subjects_filter`: fill `state.subjects` with the counts of subjects matching it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub subjects_filter: String,
}

/// STREAM.INFO response: `total`/`offset`/`limit` page `state.subjects` (all 0 unless a
/// `subjects_filter` was given; then `limit` is [`SUBJECTS_LIMIT`]), then the StreamInfo.
/// The error form repeats the three zeros.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StreamInfoResponse {
    /// `total` subjects matching the filter.
    #[serde(default)]
    pub total: usize,
    /// `offset` of this page.
    #[serde(default)]
    pub offset: usize,
    /// `limit` of a page.
    #[serde(default)]
    pub limit: usize,
    /// The stream (with `cluster`).
    #[serde(flatten)]
    pub info: StreamInfo,
}

impl ApiResponse for StreamInfoResponse {
    const TYPE: &'static str = "io.nats.jetstream.api.v1.stream_info_response";
    const ERROR_EXTRA: &'static str = r#","total":0,"offset":0,"limit":0"#;
}

/// STREAM.DELETE response: `{"success":true}` (omitted when false).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamDeleteResponse {
    /// `success`.
    #[serde(default, skip_serializing_if = "is_default")]
    pub success: bool,
}

impl ApiResponse for StreamDeleteResponse {
    const TYPE: &'static str = "io.nats.jetstream.api.v1.stream_delete_response";
}

/// STREAM.NAMES request: empty or `{"offset":n,"subject":"filter"}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamNamesRequest {
    /// `offset` of the first name to return.
    #[serde(default, skip_serializing_if = "is_default")]
    pub offset: usize,
    /// `subject`: only streams with a subject overlapping this one (nats-py uses it to find the
    /// stream for a subject). Omitted when empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub subject: String,
}

/// STREAM.LIST request: same fields as [`StreamNamesRequest`].
pub type StreamListRequest = StreamNamesRequest;

fn null_if_empty<S: Serializer, T: Serialize>(v: &Vec<T>, s: S) -> Result<S::Ok, S::Error> {
    if v.is_empty() {
        s.serialize_none()
    } else {
        v.serialize(s)
    }
}

/// STREAM.NAMES response: names sorted, paged by [`NAMES_LIMIT`]. No names is `"streams":null`
/// (observed, also in the error form, which has zero paging too).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamNamesResponse {
    /// `total` matching streams.
    #[serde(default)]
    pub total: usize,
    /// `offset` of this page.
    #[serde(default)]
    pub offset: usize,
    /// `limit`: [`NAMES_LIMIT`].
    #[serde(default)]
    pub limit: usize,
    /// `streams`: the names (`null` when none).
    #[serde(
        default,
        deserialize_with = "null_as_default",
        serialize_with = "null_if_empty"
    )]
    pub streams: Vec<String>,
}

impl ApiResponse for StreamNamesResponse {
    const TYPE: &'static str = "io.nats.jetstream.api.v1.stream_names_response";
    const ERROR_EXTRA: &'static str = r#","total":0,"offset":0,"limit":0,"streams":null"#;
}

/// STREAM.LIST response: StreamInfos (without `cluster`, static metadata only) sorted by name,
/// paged by [`LIST_LIMIT`]. No streams is `"streams":[]`, in the error form too (observed).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StreamListResponse {
    /// `total` matching streams.
    #[serde(default)]
    pub total: usize,
    /// `offset` of this page.
    #[serde(default)]
    pub offset: usize,
    /// `limit`: [`LIST_LIMIT`].
    #[serde(default)]
    pub limit: usize,
    /// `streams`.
    #[serde(default, deserialize_with = "null_as_default")]
    pub streams: Vec<StreamInfo>,
    /// `missing`: streams that could not be read (clustered). Omitted when empty.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub missing: Vec<String>,
}

impl ApiResponse for StreamListResponse {
    const TYPE: &'static str = "io.nats.jetstream.api.v1.stream_list_response";
    const ERROR_EXTRA: &'static str = r#","total":0,"offset":0,"limit":0,"streams":[]"#;
}

/// STREAM.PURGE request: empty or not JSON (purge all, [`StreamPurgeRequest::parse`]) or any
/// of these; unknown fields are 10025.
///
/// `seq` and `keep` together are 10003 [`ApiError::bad_request`] ([`StreamPurgeRequest::check`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamPurgeRequest {
    /// `filter`: only messages on subjects matching it (wildcards ok). Omitted when empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub filter: String,
    /// `seq`: purge everything **below** this sequence (exclusive). Omitted when 0.
    #[serde(default, skip_serializing_if = "is_default")]
    pub seq: u64,
    /// `keep`: keep the newest N. Omitted when 0.
    #[serde(default, skip_serializing_if = "is_default")]
    pub keep: u64,
}

impl StreamPurgeRequest {
    /// Reads a STREAM.PURGE body as nats-server 2.15 does: only a body whose first byte after
    /// JSON whitespace is `{` or `[` is decoded (an array is refused, as Go refuses to
    /// unmarshal one into the request struct), then [`StreamPurgeRequest::check`]ed; any
    /// other body (empty, `hello`, `1`, `null`) asks to purge everything.
    ///
    /// # Errors
    /// 10025 for bad JSON, an array or an unknown field; 10003 from the check.
    pub fn parse(body: &[u8]) -> Result<Self, ApiError> {
        match body
            .iter()
            .find(|b| !matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
        {
            Some(b'{') => {
                let req: Self = super::decode_request(body)?;
                req.check()?;
                Ok(req)
            }
            Some(b'[') => Err(ApiError::invalid_json(
                "json: cannot unmarshal array into Go value of type server.JSApiStreamPurgeRequest"
                    .to_owned(),
            )),
            _ => Ok(Self::default()),
        }
    }

    /// `seq` with `keep` → 10003 bad request (observed), as the server checks before purging.
    pub fn check(&self) -> Result<(), ApiError> {
        if self.seq > 0 && self.keep > 0 {
            return Err(ApiError::bad_request());
        }
        Ok(())
    }
}

/// STREAM.PURGE response: `{"success":true,"purged":N}`; the error form has `"purged":0`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamPurgeResponse {
    /// `success`; omitted when false.
    #[serde(default, skip_serializing_if = "is_default")]
    pub success: bool,
    /// `purged`: number of messages removed. Always written.
    #[serde(default)]
    pub purged: u64,
}

impl ApiResponse for StreamPurgeResponse {
    const TYPE: &'static str = "io.nats.jetstream.api.v1.stream_purge_response";
    const ERROR_EXTRA: &'static str = r#","purged":0"#;
}

/// STREAM.MSG.GET and DIRECT.GET request. Exactly one selector: `seq`, `last_by_subj`, or
/// `next_by_subj` (optionally with `seq` as the start) — see [`MsgGetRequest::selector`].
/// The batch fields are DIRECT.GET only (parsed, so such requests are not 10025).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MsgGetRequest {
    /// `seq`. Omitted when 0.
    #[serde(default, skip_serializing_if = "is_default")]
    pub seq: u64,
    /// `last_by_subj`: the last message on this subject. Omitted when empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub last_by_subj: String,
    /// `next_by_subj`: the first message on this subject at or after `seq`. Omitted when empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub next_by_subj: String,
    /// `batch` (DIRECT.GET): up to N messages. Omitted when 0.
    #[serde(default, skip_serializing_if = "is_default")]
    pub batch: i64,
    /// `max_bytes` (DIRECT.GET batch). Omitted when 0.
    #[serde(default, skip_serializing_if = "is_default")]
    pub max_bytes: i64,
    /// `start_time` (DIRECT.GET): first message at or after. Omitted when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Timestamp>,
    /// `multi_last` (DIRECT.GET): last message of each subject. Omitted when empty.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub multi_last: Vec<String>,
    /// `up_to_seq` (DIRECT.GET multi_last). Omitted when 0.
    #[serde(default, skip_serializing_if = "is_default")]
    pub up_to_seq: u64,
    /// `up_to_time` (DIRECT.GET multi_last). Omitted when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub up_to_time: Option<Timestamp>,
    /// `no_hdr` (DIRECT.GET): omit headers. Omitted when false.
    #[serde(default, skip_serializing_if = "is_default")]
    pub no_hdr: bool,
}

/// Which message a single-message [`MsgGetRequest`] asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MsgSelector<'a> {
    /// The message with this sequence.
    Seq(u64),
    /// The last message on this subject (may be a wildcard filter).
    LastBySubject(&'a str),
    /// The first message at or after `from` (`seq`, 0 = from the start) on `subject`.
    NextBySubject {
        /// The subject filter.
        subject: &'a str,
        /// The starting sequence.
        from: u64,
    },
}

impl MsgGetRequest {
    /// The selector of a `STREAM.MSG.GET` request: [`MsgGetRequest::selector`], and 10003
    /// bad request for `batch` or `max_bytes`, which only DIRECT.GET takes (nats-server's
    /// `jsMsgGetRequest`: "This version does not support batch").
    pub fn msg_get_selector(&self) -> Result<MsgSelector<'_>, ApiError> {
        if self.batch > 0 || self.max_bytes > 0 {
            return Err(ApiError::bad_request());
        }
        self.selector()
    }

    /// The message a request names, or 10003 [`ApiError::bad_request`] when there
    /// is none (empty body, `{}`) or they conflict (`seq` with `last_by_subj`, or
    /// `last_by_subj` with `next_by_subj`) — all observed.
    pub fn selector(&self) -> Result<MsgSelector<'_>, ApiError> {
        match (
            self.seq,
            self.last_by_subj.as_str(),
            self.next_by_subj.as_str(),
        ) {
            (seq, "", "") if seq > 0 => Ok(MsgSelector::Seq(seq)),
            (0, last, "") if !last.is_empty() => Ok(MsgSelector::LastBySubject(last)),
            (from, "", next) if !next.is_empty() => Ok(MsgSelector::NextBySubject {
                subject: next,
                from,
            }),
            _ => Err(ApiError::bad_request()),
        }
    }
}

/// A stored message as STREAM.MSG.GET returns it (nats-server's `StoredMsg`).
///
/// `hdrs` is the whole `NATS/1.0\r\n…\r\n\r\n` block and `data` the payload, both base64
/// (standard alphabet, padded) on the wire and raw bytes here; each is omitted when empty.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredMessage {
    /// `subject` it was published on.
    pub subject: String,
    /// `seq` in the stream.
    pub seq: u64,
    /// `hdrs`: raw header block. Omitted when empty.
    #[serde(default, with = "base64_bytes", skip_serializing_if = "Vec::is_empty")]
    pub hdrs: Vec<u8>,
    /// `data`: payload. Omitted when empty.
    #[serde(default, with = "base64_bytes", skip_serializing_if = "Vec::is_empty")]
    pub data: Vec<u8>,
    /// `time` it was stored.
    pub time: Timestamp,
}

/// `Vec<u8>` as a base64 string, as Go's `encoding/json` writes `[]byte`.
mod base64_bytes {
    use super::*;

    pub fn serialize<S: Serializer>(b: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(b))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        match Option::<String>::deserialize(d)? {
            None => Ok(Vec::new()),
            Some(s) => base64::engine::general_purpose::STANDARD
                .decode(s)
                .map_err(serde::de::Error::custom),
        }
    }
}

/// STREAM.MSG.GET response: `{"message":{…}}`. Missing message: 10037 no message found (404);
/// bad selector: 10003.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamMsgGetResponse {
    /// `message`.
    pub message: StoredMessage,
}

impl ApiResponse for StreamMsgGetResponse {
    const TYPE: &'static str = "io.nats.jetstream.api.v1.stream_msg_get_response";
}

/// STREAM.MSG.DELETE request: `{"seq":N,"no_erase":bool}` (`seq` always written).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MsgDeleteRequest {
    /// `seq` to delete.
    #[serde(default)]
    pub seq: u64,
    /// `no_erase`: only mark deleted, do not overwrite the bytes. Omitted when false.
    #[serde(default, skip_serializing_if = "is_default")]
    pub no_erase: bool,
}

impl MsgDeleteRequest {
    /// Decodes a STREAM.MSG.DELETE body as the server does, before it looks the stream up: an
    /// empty request (no bytes, `{}`) → 10003 [`ApiError::bad_request`]; bad JSON → 10025.
    pub fn decode(body: &[u8]) -> Result<MsgDeleteRequest, ApiError> {
        if super::consumer::is_empty_request(body) {
            return Err(ApiError::bad_request());
        }
        super::decode_request(body)
    }
}

/// The gate before STREAM.PURGE (`purge: true`) or STREAM.MSG.DELETE (`purge: false`) on a
/// stream with config `cfg`, in nats-server's order: a sealed stream → 10109
/// [`ApiError::stream_sealed`] (sealing also sets `deny_purge`/`deny_delete`, and the sealed
/// error wins); then `deny_purge` → 10110 `stream purge not permitted`, `deny_delete` → 10057
/// `message delete not permitted`. The server checks this after decoding the request and
/// finding the stream.
pub fn check_removal_allowed(cfg: &StreamConfig, purge: bool) -> Result<(), ApiError> {
    if cfg.sealed {
        return Err(ApiError::stream_sealed());
    }
    if purge && cfg.deny_purge {
        return Err(ApiError::stream_purge_failed("stream purge not permitted"));
    }
    if !purge && cfg.deny_delete {
        return Err(ApiError::stream_msg_delete_failed(
            "message delete not permitted",
        ));
    }
    Ok(())
}

/// STREAM.MSG.DELETE response: `{"success":true}`. A missing sequence is, on 2.15.1, 10057
/// (500) `no message found` (already deleted) or `stream store EOF` (beyond the end) on file
/// storage, 10043 `sequence N not found` (400) on memory storage.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamMsgDeleteResponse {
    /// `success`; omitted when false.
    #[serde(default, skip_serializing_if = "is_default")]
    pub success: bool,
}

impl ApiResponse for StreamMsgDeleteResponse {
    const TYPE: &'static str = "io.nats.jetstream.api.v1.stream_msg_delete_response";
}

/// Header names the server appends to a DIRECT.GET answer, after the message's own headers
/// (defined in [`crate::headers`], kept here at their earlier path).
pub mod direct_headers {
    pub use crate::headers::{LAST_SEQUENCE, NUM_PENDING, SEQUENCE, STREAM, SUBJECT, TIME_STAMP};
}

/// The four headers a DIRECT.GET answer appends after the stored message's own headers, in the
/// server's order: `Nats-Stream`, `Nats-Subject`, `Nats-Sequence`, `Nats-Time-Stamp` (observed).
/// The answer is an HMSG carrying the stored payload; not found is status `404 Message Not
/// Found`, an empty body `408 Empty Request`, a malformed one `408 Bad Request`.
pub fn direct_get_headers(stream: &str, msg: &StoredMessage) -> [(&'static str, String); 4] {
    [
        (direct_headers::STREAM, stream.to_owned()),
        (direct_headers::SUBJECT, msg.subject.clone()),
        (direct_headers::SEQUENCE, msg.seq.to_string()),
        (direct_headers::TIME_STAMP, msg.time.to_string()),
    ]
}

/// The publish header that gives a message its own expiry (streams with `allow_msg_ttl`):
/// [`crate::headers::MSG_TTL`], kept at its earlier path.
pub use crate::headers::MSG_TTL as MSG_TTL_HEADER;

/// The header that marks a subject delete marker and says why it was written:
/// [`crate::headers::MARKER_REASON`], kept at its earlier path.
pub use crate::headers::MARKER_REASON as MARKER_REASON_HEADER;

/// A message's own expiry, from its `Nats-TTL` header (streams with `allow_msg_ttl`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MsgTtl {
    /// `never` (any letter case): no expiry of its own, and exempt from the stream's
    /// `max_age` too, as nats-server 2.15.1 keeps such a message (observed).
    Never,
    /// Removed this long after it was stored.
    After(Duration),
}

impl MsgTtl {
    /// The TTL in whole seconds, fractions dropped, as nats-server holds a message TTL and
    /// compares it with the subject delete marker TTL; `None` for [`MsgTtl::Never`].
    pub fn whole_secs(self) -> Option<u64> {
        match self {
            MsgTtl::Never => None,
            MsgTtl::After(d) => Some(d.as_secs()),
        }
    }
}

/// Parses a `Nats-TTL` header value as nats-server 2.15.1 does (observed): `never` in any
/// letter case (`NEVER`, `Never`), a Go duration of at least one second (`1s`, `1.5s`,
/// `1m30s`, `1000ms`), or a whole number of seconds, at least 1 (`10`); surrounding blanks are
/// ignored.
///
/// # Errors
/// [`ApiError::message_ttl_invalid`] (400, 10165) for anything else, including `0`, `-1`,
/// `500ms` and negative durations.
pub fn parse_msg_ttl(value: &str) -> Result<MsgTtl, ApiError> {
    let value = value.trim();
    if value.eq_ignore_ascii_case("never") {
        return Ok(MsgTtl::Never);
    }
    let nanos = crate::duration::parse_go_duration(value).or_else(|| {
        value
            .parse::<i64>()
            .ok()
            .map(|s| s.saturating_mul(1_000_000_000))
    });
    match nanos {
        Some(ns) if ns >= 1_000_000_000 => Ok(MsgTtl::After(Duration::from_nanos(ns as u64))),
        _ => Err(ApiError::message_ttl_invalid()),
    }
}

/// The header block of a subject delete marker: the empty-payload message a stream with
/// `subject_delete_marker_ttl` stores on a subject when `max_age` or a per-message TTL removed
/// the subject's last message. As nats-server 2.15.1 writes it (observed):
/// `Nats-Marker-Reason: MaxAge` (for both causes), `Nats-TTL` set to `marker_ttl` in whole
/// seconds as Go duration text (`3s`, `1m30s`; 1.5 s gives `1s`) and `Nats-Rollup: sub`, in
/// that order.
pub fn subject_delete_marker_headers(marker_ttl: Duration) -> bytes::Bytes {
    let ttl = crate::duration::format_go_duration(Duration::from_secs(marker_ttl.as_secs()));
    bytes::Bytes::from(format!(
        "NATS/1.0\r\n{MARKER_REASON_HEADER}: MaxAge\r\n{MSG_TTL_HEADER}: {ttl}\r\n{ROLLUP}: sub\r\n\r\n"
    ))
}

/// What a stream with `subject_delete_marker_ttl` stores for a publish whose own TTL is
/// shorter: nats-server 2.15.1 (observed) raises such a TTL to the marker TTL, comparing whole
/// seconds, so the message outlives nothing that marks its subject. Returns `None` when `ttl`
/// stands (`never`, not shorter, no marker TTL, or a header block that does not parse), else
/// the rewritten header block — the `Nats-TTL` entries removed and `Nats-TTL: <whole seconds>`
/// appended last (`Nats-TTL: 90` for a 90 s marker TTL) — and the TTL it now gives.
pub fn raise_msg_ttl(
    headers: &[u8],
    ttl: MsgTtl,
    marker_ttl: Duration,
) -> Option<(bytes::Bytes, MsgTtl)> {
    let floor = marker_ttl.as_secs();
    if floor == 0 || ttl.whole_secs()? >= floor {
        return None;
    }
    let mut parsed = crate::headers::Headers::parse(headers).ok()?;
    parsed.remove(MSG_TTL_HEADER);
    parsed.append(MSG_TTL_HEADER, floor.to_string()).ok()?;
    Some((parsed.to_bytes(), MsgTtl::After(Duration::from_secs(floor))))
}

#[cfg(test)]
mod msg_ttl_tests {
    use super::*;

    /// The values checked against nats-server 2.15.1 with nats-py, with its answers.
    #[test]
    fn accepts_and_refuses_what_nats_server_does() {
        let secs = |s: f64| Ok(MsgTtl::After(Duration::from_secs_f64(s)));
        for (value, want) in [
            ("1s", secs(1.0)),
            ("never", Ok(MsgTtl::Never)),
            ("10", secs(10.0)),
            ("1h", secs(3600.0)),
            ("1.5s", secs(1.5)),
            (" 2s", secs(2.0)),
            ("1m30s", secs(90.0)),
            ("1000ms", secs(1.0)),
        ] {
            assert_eq!(parse_msg_ttl(value), want, "{value:?}");
        }
        for value in ["500ms", "0", "0s", "-1", "abc", "-5s", "999ms", ""] {
            let err = parse_msg_ttl(value).expect_err(value);
            assert_eq!(err.err_code, 10165, "{value:?}");
        }
    }

    /// nats-server 2.15.1 takes `never` in any letter case (observed with nats-py).
    #[test]
    fn never_in_any_case() {
        for value in ["never", "NEVER", "Never", " nEvEr "] {
            assert_eq!(parse_msg_ttl(value), Ok(MsgTtl::Never), "{value:?}");
        }
        assert_eq!(MsgTtl::Never.whole_secs(), None);
        assert_eq!(
            MsgTtl::After(Duration::from_millis(1500)).whole_secs(),
            Some(1)
        );
    }

    /// The marker headers nats-server 2.15.1 wrote for marker TTLs of 3 s, 2 s and 1.5 s
    /// (observed with nats-py); 90 s is Go's duration text.
    #[test]
    fn marker_headers_as_nats_server_writes_them() {
        let block = |secs: f64| subject_delete_marker_headers(Duration::from_secs_f64(secs));
        assert_eq!(
            &block(3.0)[..],
            b"NATS/1.0\r\nNats-Marker-Reason: MaxAge\r\nNats-TTL: 3s\r\nNats-Rollup: sub\r\n\r\n"
        );
        let ttl_of = |b: bytes::Bytes| {
            let h = crate::headers::Headers::parse(&b).unwrap();
            h.get(MSG_TTL_HEADER).unwrap().to_owned()
        };
        assert_eq!(ttl_of(block(1.5)), "1s");
        assert_eq!(ttl_of(block(90.0)), "1m30s");
        // What a restart reads back from a stored marker.
        assert_eq!(
            parse_msg_ttl(&ttl_of(block(90.0))),
            Ok(MsgTtl::After(Duration::from_secs(90)))
        );
    }

    /// A TTL shorter than the marker TTL is raised to it, in whole seconds, as observed:
    /// with a 90 s marker TTL `Foo: bar`, `Nats-TTL: 5s`, `Zed: z` was stored as `Foo: bar`,
    /// `Zed: z`, `Nats-TTL: 90`; with 2 s, `2s` stayed; with 1.5 s, `1s` stayed.
    #[test]
    fn short_ttls_are_raised_to_the_marker_ttl() {
        let secs = |s: u64| Duration::from_secs(s);
        let after = |s: u64| MsgTtl::After(secs(s));
        let raw = b"NATS/1.0\r\nFoo: bar\r\nNats-TTL: 5s\r\nZed: z\r\n\r\n";
        let (block, ttl) = raise_msg_ttl(raw, after(5), secs(90)).expect("raised");
        assert_eq!(
            &block[..],
            b"NATS/1.0\r\nFoo: bar\r\nZed: z\r\nNats-TTL: 90\r\n\r\n"
        );
        assert_eq!(ttl, after(90));
        let raw = b"NATS/1.0\r\nNats-TTL: 1500ms\r\n\r\n";
        let ttl = MsgTtl::After(Duration::from_millis(1500));
        assert_eq!(raise_msg_ttl(raw, ttl, secs(2)).unwrap().1, after(2));
        assert_eq!(raise_msg_ttl(raw, ttl, Duration::from_millis(1500)), None);
        assert_eq!(raise_msg_ttl(raw, after(2), secs(2)), None);
        assert_eq!(raise_msg_ttl(raw, MsgTtl::Never, secs(90)), None);
        assert_eq!(raise_msg_ttl(raw, after(1), Duration::ZERO), None);
    }
}
