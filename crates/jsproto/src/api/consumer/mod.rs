//! Consumers: [`ConsumerConfig`] with the server's defaults and validation, [`ConsumerInfo`],
//! and the request and response of every consumer endpoint:
//!
//! | Subject | Request | Response (`type` suffix) |
//! |---|---|---|
//! | `$JS.API.CONSUMER.CREATE.<s>[.<n>[.<filter…>]]`, `$JS.API.CONSUMER.DURABLE.CREATE.<s>.<d>` | [`CreateConsumerRequest`] ([`check_consumer_create`]) | [`ConsumerCreateResponse`] (`consumer_create_response`) |
//! | `$JS.API.CONSUMER.INFO.<s>.<c>` | empty ([`check_empty_request`]) | [`ConsumerInfoResponse`] (`consumer_info_response`) |
//! | `$JS.API.CONSUMER.DELETE.<s>.<c>` | empty ([`check_empty_request`]) | [`ConsumerDeleteResponse`] (`consumer_delete_response`) |
//! | `$JS.API.CONSUMER.NAMES.<s>` | [`ConsumerNamesRequest`] | [`ConsumerNamesResponse`] (`consumer_names_response`) |
//! | `$JS.API.CONSUMER.LIST.<s>` | [`ConsumerListRequest`] | [`ConsumerListResponse`] (`consumer_list_response`) |
//! | `$JS.API.CONSUMER.PAUSE.<s>.<c>` | [`ConsumerPauseRequest`] | [`ConsumerPauseResponse`] (`consumer_pause_response`) |
//! | `$JS.API.CONSUMER.UNPIN.<s>.<c>` | [`ConsumerUnpinRequest`] | [`ConsumerUnpinResponse`] (`consumer_unpin_response`) |
//! | `$JS.API.CONSUMER.RESET.<s>.<c>` | [`ConsumerResetRequest`] | [`ConsumerResetResponse`] (`consumer_reset_response`) |
//! | `$JS.API.CONSUMER.PENDING.<s>.<c>` (jsserver's own) | [`ConsumerPendingRequest`] | [`ConsumerPendingResponse`] (`io.jsserver…consumer_pending_response`) |
//!
//! Field names, their order, `omitempty` behaviour, defaults, checks and their order are
//! nats-server 2.15.1's (`ConsumerConfig`, `ConsumerInfo`, `setConsumerConfigDefaults`,
//! `checkConsumerCfg`, `checkNewConsumerConfig` in its `consumer.go`, `jsConsumerCreateRequest`
//! in `jetstream_api.go`), checked against responses recorded from it
//! (`tests/fixtures/consumer/`, `tests/api_consumer.rs`).
//!
//! # Creating or updating a consumer
//!
//! ```text
//! parse_create_subject(subject)   None → send no reply at all (the server's subscriptions
//!                                 do not match such subjects)
//! check_consumer_create(subject, body, stream)   → ConsumerCreate (or the error to answer)
//!   ├─ a consumer named create.name exists → create.check_existing(&stored, stream, &others)
//!   └─ otherwise                           → create.check_new(stream, &others, gen_name)
//! → the name and config to store; answer ConsumerInfo (config with_dynamic_metadata)
//! ```
//!
//! Push consumers (`deliver_subject` set) are parsed, defaulted and checked exactly like the
//! server does; [`ConsumerConfig::to_core`] gives the consumer core their push settings
//! (`deliver_group` and `headers_only` are applied by the server).
//!
//! # Files
//!
//! | file | holds |
//! |---|---|
//! | `config.rs` | [`ConsumerConfig`], its enums and [`ZonedTimestamp`], the server's defaults |
//! | `create.rs` | the CREATE request body ([`CreateConsumerRequest`], [`ConsumerAction`]) and subjects ([`parse_create_subject`]) |
//! | `validation.rs` | [`check_consumer_create`], [`ConsumerCreate`]'s checks against existing consumers, [`check_consumer_update`] |
//! | `info.rs` | [`ConsumerInfo`] and its parts |
//! | `responses.rs` | every endpoint's response and small request (INFO, DELETE, NAMES, LIST, PAUSE) |
//! | `errors.rs` | [`errors`]: the consumer errors' earlier names, each the [`ApiError`](super::ApiError) constructor of the one table (`api/error.rs`) |
//!
//! Everything is re-exported here: `jsproto::api::consumer::X` is the path to use.

mod config;
mod create;
pub mod errors;
mod info;
mod pending;
mod responses;
mod validation;

pub use config::{
    AckPolicy, ConsumerConfig, DeliverPolicy, PriorityPolicy, ReplayPolicy, ZonedTimestamp,
    CONSUMER_CONFIG_FIELDS, DEFAULT_ACK_WAIT, DEFAULT_INACTIVE_THRESHOLD, DEFAULT_MAX_ACK_PENDING,
    DEFAULT_MAX_WAITING, DEFAULT_PRIORITY_TIMEOUT, FLOW_CONTROL_HEARTBEAT, META_REQUIRED_LEVEL,
    META_SERVER_LEVEL, META_SERVER_VERSION,
};
pub use create::{
    parse_create_subject, ConsumerAction, CreateConsumerRequest, CreateForm, CreateSubject,
};
pub use info::{ConsumerInfo, ConsumerTimes, PriorityGroupState, SequenceInfo};
pub use pending::{
    ConsumerPendingRequest, ConsumerPendingResponse, Holder, PendingEntry, PENDING_LIMIT,
};
pub use responses::{
    check_empty_request, is_empty_request, ConsumerCreateResponse, ConsumerDeleteResponse,
    ConsumerInfoResponse, ConsumerListRequest, ConsumerListResponse, ConsumerNamesRequest,
    ConsumerNamesResponse, ConsumerPauseRequest, ConsumerPauseResponse, ConsumerResetRequest,
    ConsumerResetResponse, ConsumerUnpinRequest, ConsumerUnpinResponse, LIST_LIMIT, NAMES_LIMIT,
};
pub use validation::{
    check_consumer_create, check_consumer_create_in, check_consumer_update, check_supported,
    partition_unique, unsupported_setting, ConsumerCreate, MAX_GROUP_NAME_LEN, MIN_HEARTBEAT,
    MIN_MAX_EXPIRES,
};

/// Whether `v` is its type's default (Go's `omitempty` test, for `skip_serializing_if`).
fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}
