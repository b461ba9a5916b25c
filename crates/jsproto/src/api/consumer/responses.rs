//! The responses of the consumer endpoints and their small requests: CREATE, INFO, DELETE,
//! NAMES, LIST, PAUSE, UNPIN and RESET.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::info::ConsumerInfo;
use super::is_default;
use crate::api::{decode_request, nanos, null_as_default, ApiError, ApiResponse, Timestamp};

/// `limit` of a CONSUMER.NAMES page (`JSApiNamesLimit`).
pub const NAMES_LIMIT: usize = 1024;
/// `limit` of a CONSUMER.LIST page (`JSApiListLimit`).
pub const LIST_LIMIT: usize = 256;

/// CONSUMER.CREATE / DURABLE.CREATE response: the [`ConsumerInfo`] (config with dynamic
/// metadata). Errors carry nothing else (observed).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsumerCreateResponse {
    /// The consumer.
    #[serde(flatten)]
    pub info: ConsumerInfo,
}

impl ApiResponse for ConsumerCreateResponse {
    const TYPE: &'static str = "io.nats.jetstream.api.v1.consumer_create_response";
}

/// CONSUMER.INFO response: the [`ConsumerInfo`]. Missing consumer: 10014 (404); missing
/// stream: 10059; a non-empty body: 10038 ([`check_empty_request`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsumerInfoResponse {
    /// The consumer.
    #[serde(flatten)]
    pub info: ConsumerInfo,
}

impl ApiResponse for ConsumerInfoResponse {
    const TYPE: &'static str = "io.nats.jetstream.api.v1.consumer_info_response";
}

/// CONSUMER.DELETE response: `{"success":true}` (omitted when false). Missing: 10014.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsumerDeleteResponse {
    /// `success`.
    #[serde(default, skip_serializing_if = "is_default")]
    pub success: bool,
}

impl ApiResponse for ConsumerDeleteResponse {
    const TYPE: &'static str = "io.nats.jetstream.api.v1.consumer_delete_response";
}

/// Whether a body counts as empty for CONSUMER.INFO/DELETE (the server's `isEmptyRequest`):
/// no bytes, or a JSON object without members (`{}`, `{ }`).
pub fn is_empty_request(body: &[u8]) -> bool {
    body.is_empty()
        || serde_json::from_slice::<Value>(body)
            .is_ok_and(|v| v.as_object().is_some_and(|m| m.is_empty()))
}

/// CONSUMER.INFO/DELETE bodies: anything but [`is_empty_request`] is 10038
/// [`ApiError::not_empty_request`].
pub fn check_empty_request(body: &[u8]) -> Result<(), ApiError> {
    if is_empty_request(body) {
        Ok(())
    } else {
        Err(ApiError::not_empty_request())
    }
}

/// CONSUMER.NAMES / CONSUMER.LIST request: empty or `{"offset":n}`. Only `offset` exists
/// (`subject` is 10025 `json: unknown field "subject"`, observed).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConsumerNamesRequest {
    /// `offset` of the first entry; negative counts as 0.
    #[serde(default)]
    pub offset: i64,
}

/// CONSUMER.LIST request: same as [`ConsumerNamesRequest`].
pub type ConsumerListRequest = ConsumerNamesRequest;

impl ConsumerNamesRequest {
    /// Decodes the body as the server: only a body starting (after whitespace) with `{` or `[`
    /// is decoded (strictly, 10025 on errors); anything else is the default request.
    pub fn decode(body: &[u8]) -> Result<Self, ApiError> {
        match body
            .iter()
            .find(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
        {
            Some(b'{' | b'[') => decode_request(body),
            _ => Ok(Self::default()),
        }
    }

    /// The offset to use for `total` entries: clamped to `0..=total` (the server reports the
    /// clamped value as `offset`).
    pub fn offset(&self, total: usize) -> usize {
        usize::try_from(self.offset.max(0))
            .unwrap_or(usize::MAX)
            .min(total)
    }
}

/// CONSUMER.NAMES response: names sorted, paged by [`NAMES_LIMIT`]. No names is
/// `"consumers":[]` (unlike STREAM.NAMES), also in the error form with zero paging (observed).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsumerNamesResponse {
    /// `total` consumers.
    #[serde(default)]
    pub total: usize,
    /// `offset` of this page (clamped to `total`).
    #[serde(default)]
    pub offset: usize,
    /// `limit`: [`NAMES_LIMIT`].
    #[serde(default)]
    pub limit: usize,
    /// `consumers`.
    #[serde(default, deserialize_with = "null_as_default")]
    pub consumers: Vec<String>,
}

impl ApiResponse for ConsumerNamesResponse {
    const TYPE: &'static str = "io.nats.jetstream.api.v1.consumer_names_response";
    const ERROR_EXTRA: &'static str = r#","total":0,"offset":0,"limit":0,"consumers":[]"#;
}

/// CONSUMER.LIST response: [`ConsumerInfo`]s (config with static metadata only) sorted by
/// name, paged by [`LIST_LIMIT`]. No consumers is `"consumers":[]`, in the error form too.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsumerListResponse {
    /// `total` consumers.
    #[serde(default)]
    pub total: usize,
    /// `offset` of this page.
    #[serde(default)]
    pub offset: usize,
    /// `limit`: [`LIST_LIMIT`].
    #[serde(default)]
    pub limit: usize,
    /// `consumers`.
    #[serde(default, deserialize_with = "null_as_default")]
    pub consumers: Vec<ConsumerInfo>,
    /// `missing`: consumers that could not be read. Omitted when empty.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub missing: Vec<String>,
    /// `offline`: name → reason. Omitted when empty.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub offline: BTreeMap<String, String>,
}

impl ApiResponse for ConsumerListResponse {
    const TYPE: &'static str = "io.nats.jetstream.api.v1.consumer_list_response";
    const ERROR_EXTRA: &'static str = r#","total":0,"offset":0,"limit":0,"consumers":[]"#;
}

/// CONSUMER.PAUSE request: `{"pause_until":"<RFC 3339>"}`; `{}` (or a zero time) resumes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConsumerPauseRequest {
    /// `pause_until`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause_until: Option<Timestamp>,
}

/// CONSUMER.PAUSE response: `{"paused":true,"pause_until":"…","pause_remaining":ns}`, or
/// `{"paused":false,"pause_until":"0001-01-01T00:00:00Z"}` after a resume. The error form
/// repeats `"paused":false,"pause_until":"0001-01-01T00:00:00Z"` (observed).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsumerPauseResponse {
    /// `paused`. Always written.
    #[serde(default)]
    pub paused: bool,
    /// `pause_until`. Always written (zero time when not paused).
    #[serde(default)]
    pub pause_until: Timestamp,
    /// `pause_remaining` (ns). Omitted when 0.
    #[serde(default, with = "nanos", skip_serializing_if = "Duration::is_zero")]
    pub pause_remaining: Duration,
}

impl ApiResponse for ConsumerPauseResponse {
    const TYPE: &'static str = "io.nats.jetstream.api.v1.consumer_pause_response";
    const ERROR_EXTRA: &'static str = r#","paused":false,"pause_until":"0001-01-01T00:00:00Z""#;
}

/// CONSUMER.UNPIN request: `{"group":"<name>"}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsumerUnpinRequest {
    /// `group`: the priority group whose pin is released.
    #[serde(default)]
    pub group: String,
}

impl ConsumerUnpinRequest {
    /// Reads a CONSUMER.UNPIN body and checks it as nats-server does before it looks up the
    /// stream (`jsConsumerUnpinRequest`): not JSON (an empty body included) → 10025 `invalid
    /// JSON: …`; no group → 10025 `invalid JSON: consumer group not specified`; a name that is
    /// not `[A-Za-z0-9/_=-]{1,16}` → 10162. Returns the group.
    ///
    /// # Errors
    /// The [`ApiError`]s above.
    pub fn parse(body: &[u8]) -> Result<String, ApiError> {
        if body.trim_ascii().is_empty() {
            return Err(ApiError::invalid_json("unexpected end of JSON input"));
        }
        let req: ConsumerUnpinRequest = decode_request(body)?;
        if req.group.is_empty() {
            return Err(ApiError::invalid_json("consumer group not specified"));
        }
        if !super::validation::is_valid_group_name(&req.group) {
            return Err(ApiError::consumer_invalid_group_name());
        }
        Ok(req.group)
    }
}

/// CONSUMER.UNPIN response: `{"type":"io.nats.jetstream.api.v1.consumer_unpin_response"}`, or
/// the error.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsumerUnpinResponse {}

impl ApiResponse for ConsumerUnpinResponse {
    const TYPE: &'static str = "io.nats.jetstream.api.v1.consumer_unpin_response";
}

/// CONSUMER.RESET request: `{"seq":<n>}`; an empty body (or `seq` 0) resets to just past the
/// ack floor.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsumerResetRequest {
    /// `seq`: the stream sequence to start over at (0 = the ack floor + 1).
    #[serde(default, skip_serializing_if = "is_default")]
    pub seq: u64,
}

impl ConsumerResetRequest {
    /// Reads a CONSUMER.RESET body as nats-server does: empty → `seq` 0; otherwise JSON
    /// (10025 `invalid JSON: …` when it is not, or `seq` is not an unsigned integer).
    ///
    /// # Errors
    /// The [`ApiError`] above.
    pub fn parse(body: &[u8]) -> Result<u64, ApiError> {
        if body.is_empty() {
            return Ok(0);
        }
        decode_request::<ConsumerResetRequest>(body).map(|r| r.seq)
    }
}

/// CONSUMER.RESET response: the consumer's info (as CONSUMER.INFO) and `reset_seq`, the
/// stream sequence it starts over at. The error form adds `"reset_seq":0` (observed).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsumerResetResponse {
    /// The consumer after the reset.
    #[serde(flatten)]
    pub info: ConsumerInfo,
    /// `reset_seq`.
    pub reset_seq: u64,
}

impl ApiResponse for ConsumerResetResponse {
    const TYPE: &'static str = "io.nats.jetstream.api.v1.consumer_reset_response";
    const ERROR_EXTRA: &'static str = r#","reset_seq":0"#;
}
