//! Consumer errors of nats-server's `errors.json` that [`ApiError`]'s table does not list,
//! one constructor each (named after the server constant, like [`ApiError`]'s).

use crate::api::ApiError;

macro_rules! errs {
    ($( $name:ident $(($arg:ident))? => $code:literal, $err:literal, $konst:literal, $text:literal; )*) => {
        $( errs!(@one $name $(($arg))? => $code, $err, $konst, $text); )*
    };
    (@one $name:ident => $code:literal, $err:literal, $konst:literal, $text:literal) => {
        #[doc = concat!("`", $konst, "`: ", stringify!($code), "/", stringify!($err), " `", $text, "`.")]
        pub fn $name() -> ApiError {
            ApiError::new($code, $err, $text)
        }
    };
    (@one $name:ident($arg:ident) => $code:literal, $err:literal, $konst:literal, $text:literal) => {
        #[doc = concat!("`", $konst, "`: ", stringify!($code), "/", stringify!($err), " `", $text, "`, with `", stringify!($arg), "` filled in.")]
        pub fn $name($arg: impl std::fmt::Display) -> ApiError {
            ApiError::new($code, $err, format!($text, $arg = $arg))
        }
    };
}

errs! {
    durable_name_not_in_subject => 400, 10016, "JSConsumerDurableNameNotInSubjectErr", "consumer expected to be durable but no durable name set in subject";
    deliver_to_wildcards => 400, 10079, "JSConsumerDeliverToWildcardsErr", "consumer deliver subject has wildcards";
    push_max_waiting => 400, 10080, "JSConsumerPushMaxWaitingErr", "consumer in push mode can not set max waiting";
    deliver_cycle => 400, 10081, "JSConsumerDeliverCycleErr", "consumer deliver subject forms a cycle";
    max_pending_ack_policy_required => 400, 10082, "JSConsumerMaxPendingAckPolicyRequiredErr", "consumer requires ack policy for max ack pending";
    small_heartbeat => 400, 10083, "JSConsumerSmallHeartbeatErr", "consumer idle heartbeat needs to be >= 100ms";
    pull_with_rate_limit => 400, 10086, "JSConsumerPullWithRateLimitErr", "consumer in pull mode can not have rate limit set";
    fc_requires_push => 400, 10089, "JSConsumerFCRequiresPushErr", "consumer flow control requires a push based consumer";
    direct_requires_push => 400, 10090, "JSConsumerDirectRequiresPushErr", "consumer direct requires a push based consumer";
    direct_requires_ephemeral => 400, 10091, "JSConsumerDirectRequiresEphemeralErr", "consumer direct requires an ephemeral consumer";
    invalid_sampling(err) => 400, 10095, "JSConsumerInvalidSamplingErrF", "failed to parse consumer sampling configuration: {err}";
    wq_requires_explicit_ack => 400, 10098, "JSConsumerWQRequiresExplicitAckErr", "workqueue stream requires explicit ack";
    wq_consumer_not_deliver_all => 400, 10101, "JSConsumerWQConsumerNotDeliverAllErr", "consumer must be deliver all on workqueue stream";
    name_too_long(max) => 400, 10102, "JSConsumerNameTooLongErrF", "consumer name is too long, maximum allowed is {max}";
    bad_durable_name => 400, 10103, "JSConsumerBadDurableNameErr", "durable name can not contain '.', '*', '>'";
    description_too_long(max) => 400, 10107, "JSConsumerDescriptionTooLongErrF", "consumer description is too long, maximum allowed is {max}";
    flow_control_needs_heartbeats => 400, 10108, "JSConsumerWithFlowControlNeedsHeartbeats", "consumer with flow control also needs heartbeats";
    invalid_deliver_subject => 400, 10112, "JSConsumerInvalidDeliverSubject", "invalid push consumer deliver subject";
    max_request_expires_too_small => 400, 10115, "JSConsumerMaxRequestExpiresTooSmall", "consumer max request expires needs to be >= 1ms";
    max_pending_ack_excess(limit) => 400, 10121, "JSConsumerMaxPendingAckExcessErrF", "consumer max ack pending exceeds system limit of {limit}";
    replicas_exceeds_stream => 400, 10126, "JSConsumerReplicasExceedsStream", "consumer config replica count exceeds parent stream";
    name_contains_path_separators => 400, 10127, "JSConsumerNameContainsPathSeparatorsErr", "Consumer name can not contain path separators";
    durable_and_name_mismatch => 400, 10132, "JSConsumerCreateDurableAndNameMismatch", "Consumer Durable and Name have to be equal if both are provided";
    replicas_should_match_stream => 400, 10134, "JSConsumerReplicasShouldMatchStream", "consumer config replicas must match interest retention stream's replicas";
    metadata_length(limit) => 400, 10135, "JSConsumerMetadataLengthErrF", "consumer metadata exceeds maximum size of {limit}";
    empty_filter => 400, 10139, "JSConsumerEmptyFilter", "consumer filter in FilterSubjects cannot be empty";
    inactive_threshold_excess(limit) => 400, 10153, "JSConsumerInactiveThresholdExcess", "consumer inactive threshold exceeds system limit of {limit}";
    priority_policy_without_group => 400, 10159, "JSConsumerPriorityPolicyWithoutGroup", "Setting PriorityPolicy requires at least one PriorityGroup to be set";
    empty_group_name => 400, 10161, "JSConsumerEmptyGroupName", "Group name cannot be an empty string";
    invalid_group_name => 400, 10162, "JSConsumerInvalidGroupNameErr", "Valid priority group name must match A-Z, a-z, 0-9, -_/=)+ and may not exceed 16 characters";
    push_with_priority_group => 400, 10178, "JSConsumerPushWithPriorityGroupErr", "priority groups can not be used with push consumers";
    backoff_negative => 400, 10184, "JSConsumerBackOffNegativeErr", "consumer backoff needs to be positive";
    priority_group_with_policy_none => 400, 10196, "JSConsumerPriorityGroupWithPolicyNone", "consumer can not have priority groups when policy is none";
    pinned_ttl_without_priority_policy => 400, 10197, "JSConsumerPinnedTTLWithoutPriorityPolicyNone", "PinnedTTL cannot be set when PriorityPolicy is none";
    ack_fc_requires_push => 400, 10218, "JSConsumerAckFCRequiresPushErr", "flow control ack policy requires a push based consumer";
    ack_fc_requires_fc => 400, 10219, "JSConsumerAckFCRequiresFCErr", "flow control ack policy requires flow control";
    ack_fc_requires_max_ack_pending => 400, 10220, "JSConsumerAckFCRequiresMaxAckPendingErr", "flow control ack policy requires max ack pending";
    ack_fc_requires_no_ack_wait => 400, 10221, "JSConsumerAckFCRequiresNoAckWaitErr", "flow control ack policy requires unset ack wait";
    ack_fc_requires_no_max_deliver => 400, 10222, "JSConsumerAckFCRequiresNoMaxDeliverErr", "flow control ack policy requires unset max deliver";
}
