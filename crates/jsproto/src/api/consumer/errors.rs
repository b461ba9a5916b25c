//! The names this module gave consumer errors before they joined [`ApiError`]'s table
//! (`api/error.rs`): each is the [`ApiError`] constructor of the same error, named after the
//! server constant without its `JSConsumer` prefix. New code calls the [`ApiError`]
//! constructors.

use std::fmt::Display;

use crate::api::ApiError;

/// `short(arg?) = full;`: a function `short` returning [`ApiError`]'s `full`.
macro_rules! aliases {
    ($( $short:ident $(($arg:ident))? = $full:ident; )*) => {
        $( aliases!(@one $short $(($arg))? = $full); )*
    };
    (@one $short:ident = $full:ident) => {
        #[doc = concat!("[`ApiError::", stringify!($full), "`].")]
        pub fn $short() -> ApiError {
            ApiError::$full()
        }
    };
    (@one $short:ident($arg:ident) = $full:ident) => {
        #[doc = concat!("[`ApiError::", stringify!($full), "`].")]
        pub fn $short($arg: impl Display) -> ApiError {
            ApiError::$full($arg)
        }
    };
}

aliases! {
    durable_name_not_in_subject = consumer_durable_name_not_in_subject;
    deliver_to_wildcards = consumer_deliver_to_wildcards;
    push_max_waiting = consumer_push_max_waiting;
    deliver_cycle = consumer_deliver_cycle;
    max_pending_ack_policy_required = consumer_max_pending_ack_policy_required;
    small_heartbeat = consumer_small_heartbeat;
    pull_with_rate_limit = consumer_pull_with_rate_limit;
    fc_requires_push = consumer_fc_requires_push;
    direct_requires_push = consumer_direct_requires_push;
    direct_requires_ephemeral = consumer_direct_requires_ephemeral;
    invalid_sampling(err) = consumer_invalid_sampling;
    wq_requires_explicit_ack = consumer_wq_requires_explicit_ack;
    wq_consumer_not_deliver_all = consumer_wq_consumer_not_deliver_all;
    name_too_long(max) = consumer_name_too_long;
    bad_durable_name = consumer_bad_durable_name;
    description_too_long(max) = consumer_description_too_long;
    flow_control_needs_heartbeats = consumer_with_flow_control_needs_heartbeats;
    invalid_deliver_subject = consumer_invalid_deliver_subject;
    max_request_expires_too_small = consumer_max_request_expires_too_small;
    max_pending_ack_excess(limit) = consumer_max_pending_ack_excess;
    replicas_exceeds_stream = consumer_replicas_exceeds_stream;
    name_contains_path_separators = consumer_name_contains_path_separators;
    durable_and_name_mismatch = consumer_create_durable_and_name_mismatch;
    replicas_should_match_stream = consumer_replicas_should_match_stream;
    metadata_length(limit) = consumer_metadata_length;
    empty_filter = consumer_empty_filter;
    inactive_threshold_excess(limit) = consumer_inactive_threshold_excess;
    priority_policy_without_group = consumer_priority_policy_without_group;
    empty_group_name = consumer_empty_group_name;
    invalid_group_name = consumer_invalid_group_name;
    push_with_priority_group = consumer_push_with_priority_group;
    backoff_negative = consumer_backoff_negative;
    priority_group_with_policy_none = consumer_priority_group_with_policy_none;
    pinned_ttl_without_priority_policy = consumer_pinned_ttl_without_priority_policy_none;
    ack_fc_requires_push = consumer_ack_fc_requires_push;
    ack_fc_requires_fc = consumer_ack_fc_requires_fc;
    ack_fc_requires_max_ack_pending = consumer_ack_fc_requires_max_ack_pending;
    ack_fc_requires_no_ack_wait = consumer_ack_fc_requires_no_ack_wait;
    ack_fc_requires_no_max_deliver = consumer_ack_fc_requires_no_max_deliver;
}
