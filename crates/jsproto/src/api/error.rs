//! [`ApiError`]: the `"error"` object of every JetStream API response and PubAck, and the table of
//! error codes the server uses.
//!
//! Shape on the wire, as nats-server writes it (`ApiError` in its `jetstream_errors.go`):
//!
//! ```json
//! {"code":404,"err_code":10059,"description":"stream not found"}
//! ```
//!
//! * `code` is HTTP-like (400, 404, 409, 412, 429, 500, 503);
//! * `err_code` is the JetStream error number clients key on (nats.go, async-nats, nats-py compare it);
//! * `description` is the human text. Keep it byte-identical too: tools print it and some compare it.
//!
//! One constructor per server error, named after the server's constant with the `JS` prefix and the
//! `Err`/`ErrF`/`F` suffix dropped, in snake case (`JSStreamNotFoundErr` → [`ApiError::stream_not_found`]).
//! Errors whose server text is a template (`"wrong last sequence: {seq}"`, `"{err}"`) take the
//! value as an argument. The codes and texts come from nats-server's `server/errors.json`
//! (2.15.x) and were checked against a running nats-server 2.15.1 where the reference marks them
//! observed. [`ERROR_TABLE`] lists every error this module knows, stream, consumer and account
//! errors alike, in one table ordered by `err_code`; [`codes`] names each `err_code` after its
//! server constant.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A JetStream API error: `{"code":<http-ish>,"err_code":<n>,"description":"<text>"}`.
///
/// `err_code` and `description` are omitted from the JSON when zero/empty (the server's
/// `omitempty`); every error in [`ERROR_TABLE`] has both. Parsing tolerates missing fields and
/// unknown ones (clients read errors written by any server version).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ApiError {
    /// HTTP-like status: 400 bad request, 404 not found, 500 server-side failure, 503 unavailable, …
    pub code: u16,
    /// The JetStream error number (`10059` = stream not found). 0 when the server sent none.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub err_code: u32,
    /// The human-readable text, exactly as the server writes it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl fmt::Display for ApiError {
    /// Formats like nats-server's `ApiError.Error()`: `"<description> (<err_code>)"`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.description, self.err_code)
    }
}

impl std::error::Error for ApiError {}

/// One row of [`ERROR_TABLE`]: a server error as `errors.json` defines it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ErrorDef {
    /// The server's constant, e.g. `"JSStreamNotFoundErr"`.
    pub constant: &'static str,
    /// HTTP-like code.
    pub code: u16,
    /// JetStream error number.
    pub err_code: u32,
    /// The description; `{name}` marks where the constructor's argument goes.
    pub template: &'static str,
}

macro_rules! api_errors {
    ($( $(#[$doc:meta])* $name:ident $(($arg:ident))? => $code:literal, $err:literal, $konst:ident, $text:literal; )*) => {
        impl ApiError {
            $(
                api_errors!(@ctor $name $(($arg))? => $code, $err, $konst, $text);
            )*
        }

        /// Every server error this crate knows, ordered by `err_code`.
        pub const ERROR_TABLE: &[ErrorDef] = &[
            $( ErrorDef { constant: stringify!($konst), code: $code, err_code: $err, template: $text }, )*
        ];

        /// The `err_code` of every error in [`ERROR_TABLE`], named exactly as the server's
        /// constant in `errors.json` (so the server's name finds it), for comparing a received
        /// [`ApiError::err_code`] or matching on it:
        /// `Some(codes::JSStreamNotFoundErr) => …`.
        #[allow(non_upper_case_globals)]
        pub mod codes {
            $(
                #[doc = concat!("`", stringify!($err), "`: ", stringify!($code), " `", $text, "` ([`ApiError::", stringify!($name), "`](super::ApiError::", stringify!($name), ")).")]
                pub const $konst: u32 = $err;
            )*
        }
    };
    (@ctor $name:ident => $code:literal, $err:literal, $konst:ident, $text:literal) => {
        #[doc = concat!("`", stringify!($konst), "`: ", stringify!($code), "/", stringify!($err), " `", $text, "`.")]
        pub fn $name() -> Self {
            Self { code: $code, err_code: $err, description: String::from($text) }
        }
    };
    (@ctor $name:ident($arg:ident) => $code:literal, $err:literal, $konst:ident, $text:literal) => {
        #[doc = concat!("`", stringify!($konst), "`: ", stringify!($code), "/", stringify!($err), " `", $text, "`, with `", stringify!($arg), "` filled in.")]
        pub fn $name($arg: impl fmt::Display) -> Self {
            Self { code: $code, err_code: $err, description: format!($text, $arg = $arg) }
        }
    };
}

api_errors! {
    account_resources_exceeded => 400, 10002, JSAccountResourcesExceededErr, "resource limits exceeded for account";
    bad_request => 400, 10003, JSBadRequestErr, "bad request";
    cluster_no_peers(err) => 400, 10005, JSClusterNoPeersErrF, "{err}";
    cluster_not_avail => 503, 10008, JSClusterNotAvailErr, "JetStream system temporarily unavailable";
    cluster_not_leader => 500, 10009, JSClusterNotLeaderErr, "JetStream cluster can not handle request";
    cluster_required => 503, 10010, JSClusterRequiredErr, "JetStream clustering support required";
    consumer_create(err) => 500, 10012, JSConsumerCreateErrF, "{err}";
    consumer_name_exist => 400, 10013, JSConsumerNameExistErr, "consumer name already in use";
    consumer_not_found => 404, 10014, JSConsumerNotFoundErr, "consumer not found";
    consumer_durable_name_not_in_subject => 400, 10016, JSConsumerDurableNameNotInSubjectErr, "consumer expected to be durable but no durable name set in subject";
    consumer_durable_name_not_match_subject => 400, 10017, JSConsumerDurableNameNotMatchSubjectErr, "consumer name in subject does not match durable name in request";
    consumer_durable_name_not_set => 400, 10018, JSConsumerDurableNameNotSetErr, "consumer expected to be durable but a durable name was not set";
    consumer_ephemeral_with_durable_name => 400, 10020, JSConsumerEphemeralWithDurableNameErr, "consumer expected to be ephemeral but a durable name was set in request";
    insufficient_resources => 503, 10023, JSInsufficientResourcesErr, "insufficient resources";
    invalid_json(err) => 400, 10025, JSInvalidJSONErr, "invalid JSON: {err}";
    maximum_consumers_limit => 400, 10026, JSMaximumConsumersLimitErr, "maximum consumers limit reached";
    maximum_streams_limit => 400, 10027, JSMaximumStreamsLimitErr, "maximum number of streams reached";
    memory_resources_exceeded => 500, 10028, JSMemoryResourcesExceededErr, "insufficient memory resources available";
    mirror_with_subjects => 400, 10034, JSMirrorWithSubjectsErr, "stream mirrors can not contain subjects";
    no_account => 503, 10035, JSNoAccountErr, "account not found";
    no_message_found => 404, 10037, JSNoMessageFoundErr, "no message found";
    not_empty_request => 400, 10038, JSNotEmptyRequestErr, "expected an empty request payload";
    not_enabled_for_account => 503, 10039, JSNotEnabledForAccountErr, "JetStream not enabled for account";
    cluster_peer_not_member => 400, 10040, JSClusterPeerNotMemberErr, "peer not a member";
    sequence_not_found(seq) => 400, 10043, JSSequenceNotFoundErrF, "sequence {seq} not found";
    cluster_server_not_member => 400, 10044, JSClusterServerNotMemberErr, "server is not a member of the cluster";
    storage_resources_exceeded => 500, 10047, JSStorageResourcesExceededErr, "insufficient storage resources available";
    stream_create(err) => 500, 10049, JSStreamCreateErrF, "{err}";
    stream_delete(err) => 500, 10050, JSStreamDeleteErrF, "{err}";
    stream_general(err) => 500, 10051, JSStreamGeneralErrorF, "{err}";
    stream_invalid_config(err) => 500, 10052, JSStreamInvalidConfigF, "{err}";
    stream_limits(err) => 500, 10053, JSStreamLimitsErrF, "{err}";
    stream_message_exceeds_maximum => 400, 10054, JSStreamMessageExceedsMaximumErr, "message size exceeds maximum allowed";
    stream_mirror_not_updatable => 400, 10055, JSStreamMirrorNotUpdatableErr, "stream mirror configuration can not be updated";
    stream_mismatch => 400, 10056, JSStreamMismatchErr, "stream name in subject does not match request";
    stream_msg_delete_failed(err) => 500, 10057, JSStreamMsgDeleteFailedF, "{err}";
    stream_name_exist => 400, 10058, JSStreamNameExistErr, "stream name already in use with a different configuration";
    stream_not_found => 404, 10059, JSStreamNotFoundErr, "stream not found";
    stream_not_match => 400, 10060, JSStreamNotMatchErr, "expected stream does not match";
    stream_replicas_not_updatable => 400, 10061, JSStreamReplicasNotUpdatableErr, "Replicas configuration can not be updated";
    stream_sequence_not_match => 503, 10063, JSStreamSequenceNotMatchErr, "expected stream sequence does not match";
    stream_subject_overlap => 400, 10065, JSStreamSubjectOverlapErr, "subjects overlap with an existing stream";
    stream_update(err) => 500, 10069, JSStreamUpdateErrF, "{err}";
    stream_wrong_last_msg_id(id) => 400, 10070, JSStreamWrongLastMsgIDErrF, "wrong last msg ID: {id}";
    stream_wrong_last_sequence(seq) => 400, 10071, JSStreamWrongLastSequenceErrF, "wrong last sequence: {seq}";
    stream_replicas_not_supported => 500, 10074, JSStreamReplicasNotSupportedErr, "replicas > 1 not supported in non-clustered mode";
    peer_remap => 503, 10075, JSPeerRemapErr, "peer remap failed";
    not_enabled => 503, 10076, JSNotEnabledErr, "JetStream not enabled";
    stream_store_failed(err) => 503, 10077, JSStreamStoreFailedF, "{err}";
    consumer_deliver_to_wildcards => 400, 10079, JSConsumerDeliverToWildcardsErr, "consumer deliver subject has wildcards";
    consumer_push_max_waiting => 400, 10080, JSConsumerPushMaxWaitingErr, "consumer in push mode can not set max waiting";
    consumer_deliver_cycle => 400, 10081, JSConsumerDeliverCycleErr, "consumer deliver subject forms a cycle";
    consumer_max_pending_ack_policy_required => 400, 10082, JSConsumerMaxPendingAckPolicyRequiredErr, "consumer requires ack policy for max ack pending";
    consumer_small_heartbeat => 400, 10083, JSConsumerSmallHeartbeatErr, "consumer idle heartbeat needs to be >= 100ms";
    consumer_pull_requires_ack => 400, 10084, JSConsumerPullRequiresAckErr, "consumer in pull mode requires explicit ack policy on workqueue stream";
    consumer_pull_with_rate_limit => 400, 10086, JSConsumerPullWithRateLimitErr, "consumer in pull mode can not have rate limit set";
    consumer_hb_requires_push => 400, 10088, JSConsumerHBRequiresPushErr, "consumer idle heartbeat requires a push based consumer";
    consumer_fc_requires_push => 400, 10089, JSConsumerFCRequiresPushErr, "consumer flow control requires a push based consumer";
    consumer_direct_requires_push => 400, 10090, JSConsumerDirectRequiresPushErr, "consumer direct requires a push based consumer";
    consumer_direct_requires_ephemeral => 400, 10091, JSConsumerDirectRequiresEphemeralErr, "consumer direct requires an ephemeral consumer";
    consumer_invalid_policy(err) => 400, 10094, JSConsumerInvalidPolicyErrF, "{err}";
    consumer_invalid_sampling(err) => 400, 10095, JSConsumerInvalidSamplingErrF, "failed to parse consumer sampling configuration: {err}";
    stream_invalid => 500, 10096, JSStreamInvalidErr, "stream not valid";
    stream_header_exceeds_maximum => 400, 10097, JSStreamHeaderExceedsMaximumErr, "header size exceeds maximum allowed of 64k";
    consumer_wq_requires_explicit_ack => 400, 10098, JSConsumerWQRequiresExplicitAckErr, "workqueue stream requires explicit ack";
    consumer_wq_multiple_unfiltered => 400, 10099, JSConsumerWQMultipleUnfilteredErr, "multiple non-filtered consumers not allowed on workqueue stream";
    consumer_wq_consumer_not_unique => 400, 10100, JSConsumerWQConsumerNotUniqueErr, "filtered consumer not unique on workqueue stream";
    consumer_wq_consumer_not_deliver_all => 400, 10101, JSConsumerWQConsumerNotDeliverAllErr, "consumer must be deliver all on workqueue stream";
    consumer_name_too_long(max) => 400, 10102, JSConsumerNameTooLongErrF, "consumer name is too long, maximum allowed is {max}";
    consumer_bad_durable_name => 400, 10103, JSConsumerBadDurableNameErr, "durable name can not contain '.', '*', '>'";
    consumer_description_too_long(max) => 400, 10107, JSConsumerDescriptionTooLongErrF, "consumer description is too long, maximum allowed is {max}";
    consumer_with_flow_control_needs_heartbeats => 400, 10108, JSConsumerWithFlowControlNeedsHeartbeats, "consumer with flow control also needs heartbeats";
    stream_sealed => 400, 10109, JSStreamSealedErr, "invalid operation on sealed stream";
    stream_purge_failed(err) => 500, 10110, JSStreamPurgeFailedF, "{err}";
    stream_rollup_failed(err) => 500, 10111, JSStreamRollupFailedF, "{err}";
    consumer_invalid_deliver_subject => 400, 10112, JSConsumerInvalidDeliverSubject, "invalid push consumer deliver subject";
    stream_max_bytes_required => 400, 10113, JSStreamMaxBytesRequired, "account requires a stream config to have max bytes set";
    consumer_max_request_expires_too_small => 400, 10115, JSConsumerMaxRequestExpiresTooSmall, "consumer max request expires needs to be >= 1ms";
    consumer_max_deliver_backoff => 400, 10116, JSConsumerMaxDeliverBackoffErr, "max deliver is required to be > length of backoff values";
    stream_info_max_subjects => 500, 10117, JSStreamInfoMaxSubjectsErr, "subject details would exceed maximum allowed";
    no_limits => 400, 10120, JSNoLimitsErr, "no JetStream default or applicable tiered limit present";
    consumer_max_pending_ack_excess(limit) => 400, 10121, JSConsumerMaxPendingAckExcessErrF, "consumer max ack pending exceeds system limit of {limit}";
    stream_max_stream_bytes_exceeded => 400, 10122, JSStreamMaxStreamBytesExceeded, "stream max bytes exceeds account limit max stream bytes";
    consumer_replicas_exceeds_stream => 400, 10126, JSConsumerReplicasExceedsStream, "consumer config replica count exceeds parent stream";
    consumer_name_contains_path_separators => 400, 10127, JSConsumerNameContainsPathSeparatorsErr, "Consumer name can not contain path separators";
    stream_name_contains_path_separators => 400, 10128, JSStreamNameContainsPathSeparatorsErr, "Stream name can not contain path separators";
    consumer_create_filter_subject_mismatch => 400, 10131, JSConsumerCreateFilterSubjectMismatchErr, "Consumer create request did not match filtered subject from create subject";
    consumer_create_durable_and_name_mismatch => 400, 10132, JSConsumerCreateDurableAndNameMismatch, "Consumer Durable and Name have to be equal if both are provided";
    replicas_count_cannot_be_negative => 400, 10133, JSReplicasCountCannotBeNegative, "replicas count cannot be negative";
    consumer_replicas_should_match_stream => 400, 10134, JSConsumerReplicasShouldMatchStream, "consumer config replicas must match interest retention stream's replicas";
    consumer_metadata_length(limit) => 400, 10135, JSConsumerMetadataLengthErrF, "consumer metadata exceeds maximum size of {limit}";
    consumer_duplicate_filter_subjects => 400, 10136, JSConsumerDuplicateFilterSubjects, "consumer cannot have both FilterSubject and FilterSubjects specified";
    consumer_multiple_filters_not_allowed => 400, 10137, JSConsumerMultipleFiltersNotAllowed, "consumer with multiple subject filters cannot use subject based API";
    consumer_overlapping_subject_filters => 400, 10138, JSConsumerOverlappingSubjectFilters, "consumer subject filters cannot overlap";
    consumer_empty_filter => 400, 10139, JSConsumerEmptyFilter, "consumer filter in FilterSubjects cannot be empty";
    consumer_already_exists => 400, 10148, JSConsumerAlreadyExists, "consumer already exists";
    consumer_does_not_exist => 400, 10149, JSConsumerDoesNotExist, "consumer does not exist";
    consumer_inactive_threshold_excess(limit) => 400, 10153, JSConsumerInactiveThresholdExcess, "consumer inactive threshold exceeds system limit of {limit}";
    pedantic(err) => 400, 10157, JSPedanticErrF, "pedantic mode: {err}";
    stream_duplicate_message_conflict => 409, 10158, JSStreamDuplicateMessageConflict, "duplicate message id is in process";
    consumer_priority_policy_without_group => 400, 10159, JSConsumerPriorityPolicyWithoutGroup, "Setting PriorityPolicy requires at least one PriorityGroup to be set";
    consumer_invalid_priority_group => 400, 10160, JSConsumerInvalidPriorityGroupErr, "Provided priority group does not exist for this consumer";
    consumer_empty_group_name => 400, 10161, JSConsumerEmptyGroupName, "Group name cannot be an empty string";
    consumer_invalid_group_name => 400, 10162, JSConsumerInvalidGroupNameErr, "Valid priority group name must match A-Z, a-z, 0-9, -_/=)+ and may not exceed 16 characters";
    stream_expected_last_seq_per_subject_not_ready => 503, 10163, JSStreamExpectedLastSeqPerSubjectNotReady, "expected last sequence per subject temporarily unavailable";
    stream_wrong_last_sequence_constant => 400, 10164, JSStreamWrongLastSequenceConstantErr, "wrong last sequence";
    message_ttl_invalid => 400, 10165, JSMessageTTLInvalidErr, "invalid per-message TTL";
    message_ttl_disabled => 400, 10166, JSMessageTTLDisabledErr, "per-message TTL is disabled";
    stream_too_many_requests => 429, 10167, JSStreamTooManyRequests, "too many requests";
    consumer_push_with_priority_group => 400, 10178, JSConsumerPushWithPriorityGroupErr, "priority groups can not be used with push consumers";
    stream_min_last_seq => 412, 10180, JSStreamMinLastSeqErr, "min last sequence";
    consumer_ack_wait_negative => 400, 10183, JSConsumerAckWaitNegativeErr, "consumer ack wait needs to be positive";
    consumer_backoff_negative => 400, 10184, JSConsumerBackOffNegativeErr, "consumer backoff needs to be positive";
    required_api_level => 412, 10185, JSRequiredApiLevelErr, "JetStream minimum api level required";
    stream_expected_last_seq_per_subject_invalid => 400, 10193, JSStreamExpectedLastSeqPerSubjectInvalid, "missing sequence for expected last sequence per subject";
    consumer_priority_group_with_policy_none => 400, 10196, JSConsumerPriorityGroupWithPolicyNone, "consumer can not have priority groups when policy is none";
    consumer_pinned_ttl_without_priority_policy_none => 400, 10197, JSConsumerPinnedTTLWithoutPriorityPolicyNone, "PinnedTTL cannot be set when PriorityPolicy is none";
    consumer_invalid_reset(err) => 400, 10204, JSConsumerInvalidResetErr, "invalid reset: {err}";
    consumer_ack_fc_requires_push => 400, 10218, JSConsumerAckFCRequiresPushErr, "flow control ack policy requires a push based consumer";
    consumer_ack_fc_requires_fc => 400, 10219, JSConsumerAckFCRequiresFCErr, "flow control ack policy requires flow control";
    consumer_ack_fc_requires_max_ack_pending => 400, 10220, JSConsumerAckFCRequiresMaxAckPendingErr, "flow control ack policy requires max ack pending";
    consumer_ack_fc_requires_no_ack_wait => 400, 10221, JSConsumerAckFCRequiresNoAckWaitErr, "flow control ack policy requires unset ack wait";
    consumer_ack_fc_requires_no_max_deliver => 400, 10222, JSConsumerAckFCRequiresNoMaxDeliverErr, "flow control ack policy requires unset max deliver";
}

impl ApiError {
    /// An error with the given fields (for errors not in [`ERROR_TABLE`], or parsed from elsewhere).
    pub fn new(code: u16, err_code: u32, description: impl Into<String>) -> Self {
        Self {
            code,
            err_code,
            description: description.into(),
        }
    }

    /// The row of [`ERROR_TABLE`] with this `err_code`, if any.
    pub fn definition(err_code: u32) -> Option<&'static ErrorDef> {
        ERROR_TABLE.iter().find(|d| d.err_code == err_code)
    }

    /// Whether this is the error with the given `err_code`.
    pub fn is(&self, err_code: u32) -> bool {
        self.err_code == err_code
    }
}
