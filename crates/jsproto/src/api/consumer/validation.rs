//! The server's checks of a create or update against the stream and the other consumers:
//! [`check_consumer_create`] (subject, body, defaults, `checkConsumerCfg`), then
//! [`ConsumerCreate::check_existing`] or [`ConsumerCreate::check_new`], and
//! [`check_consumer_update`] (what an update may change).

use std::fmt;
use std::time::Duration;

use super::config::{
    AckPolicy, ConsumerConfig, DeliverPolicy, PriorityPolicy, DEFAULT_ACK_WAIT,
    DEFAULT_INACTIVE_THRESHOLD, DEFAULT_MAX_ACK_PENDING, DEFAULT_MAX_WAITING,
    DEFAULT_PRIORITY_TIMEOUT, FLOW_CONTROL_HEARTBEAT, META_REQUIRED_LEVEL,
};
use super::create::{
    decode_create, parse_create_subject, ConsumerAction, CreateForm, RawNegatives,
};
use crate::api::stream::{RetentionPolicy, StorageType, StreamConfig};
use crate::api::{
    is_valid_name, nanos, ApiError, MAX_DESCRIPTION_LEN, MAX_METADATA_LEN, MAX_NAME_LEN,
};
use crate::subject::{is_literal, is_subset, is_valid_subject, overlaps};

/// Smallest non-zero `max_expires`: 1 ms.
pub const MIN_MAX_EXPIRES: Duration = Duration::from_millis(1);
/// Smallest non-zero push `idle_heartbeat`: 100 ms.
pub const MIN_HEARTBEAT: Duration = Duration::from_millis(100);
/// Longest priority group name (`^[a-zA-Z0-9/_=-]{1,16}$`).
pub const MAX_GROUP_NAME_LEN: usize = 16;

/// A checked create/update request: what [`check_consumer_create`] returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerCreate {
    /// The stream (from the subject).
    pub stream_name: String,
    /// The consumer name; `None` for a legacy ephemeral without `config.name` (the server
    /// generates one: [`ConsumerCreate::check_new`]).
    pub name: Option<String>,
    /// Whether the consumer is durable (`durable_name` set).
    pub durable: bool,
    /// The request's action.
    pub action: ConsumerAction,
    /// The request's `pedantic` flag.
    pub pedantic: bool,
    /// The checked, defaulted config with static metadata (`name` filled when known,
    /// `inactive_threshold` 5 s for ephemerals that set none): what a new consumer stores.
    pub config: ConsumerConfig,
    /// Whether `config.inactive_threshold` is the ephemeral default rather than the request's.
    inactive_defaulted: bool,
}

fn invalid_config(text: impl fmt::Display) -> ApiError {
    ApiError::stream_invalid_config(text)
}

/// Everything the server checks on a consumer create subject before it looks at existing
/// consumers, in its order; returns the checked request ([`ConsumerCreate`]).
///
/// `subject` is the full request subject; `stream` the stream's stored config, `None` when it
/// does not exist (10059 is answered only after the subject checks, as the server does).
///
/// 1. body → 10025 ([`CreateConsumerRequest::decode`](super::CreateConsumerRequest::decode));
/// 2. subject: not a create subject → 10003 [`ApiError::bad_request`] (**the server sends no
///    reply**: check [`parse_create_subject`] first);
/// 3. `stream_name` ≠ subject stream (also: empty body) → 10056;
/// 4. consumer name (subject token, or `config.name` for the legacy ephemeral form) with `/` or
///    `\` → 10127;
/// 5. per form ([`CreateForm`]): 10018, 10017, 10020; the name from the subject replaces
///    `config.name`;
/// 6. filter in the subject with `filter_subjects` → 10137; ≠ `filter_subject` → 10131;
/// 7. standalone (see [`check_consumer_create_in`] for a cluster): `num_replicas` > 1 →
///    10074; stream missing → 10059;
/// 8. static metadata ([`ConsumerConfig::set_static_metadata`]), then defaults (pedantic: 10157
///    instead of adjusting), then the config checks in the server's order: names (10052),
///    replicas (10126, 10133, 10134), 10184, 10183, flow-control ack policy (10218–10222),
///    10116, 10107, push (10079, 10112, 10081, 10080, 10082, 10083) or pull (10084, 10086,
///    10088, 10089, 10115), stream consumer limits (10121, 10153), direct (10090, 10091),
///    filters (10136, 10052 `invalid subject`, 10139, 10138), start options (10094), 10095,
///    10108, 10132, 10135, priority groups (10178, 10159, 10161, 10162, 10196, 10197);
/// 9. ephemerals without `inactive_threshold` get 5 s.
///
/// Server-wide and account limits (`max_ack_pending`, `max_request_batch`) are not applied
/// (standalone defaults have none).
pub fn check_consumer_create(
    subject: &str,
    body: &[u8],
    stream: Option<&StreamConfig>,
) -> Result<ConsumerCreate, ApiError> {
    check_consumer_create_in(subject, body, stream, false)
}

/// [`check_consumer_create`] on a standalone server (`clustered` false) or in a cluster, as
/// nats-server's `jsClusteredConsumerRequest` checks it: there `num_replicas` > 1 is no 10074
/// (step 7 is the stream lookup alone), and the stream's replicas bound it (`checkConsumerCfg`):
///
/// | `num_replicas` | Limits stream of R replicas | Interest / WorkQueue stream |
/// |---|---|---|
/// | 0 | the stream's (stored as 0) | the stream's (stored as 0) |
/// | 1 ≤ n ≤ R | accepted, stored as sent | n = R only, else 10134 |
/// | n > R | 10126 | 10126 |
/// | n < 0 | 10133 | 10133 |
///
/// `mem_storage` goes with any of them (an update cannot change it: 10012).
pub fn check_consumer_create_in(
    subject: &str,
    body: &[u8],
    stream: Option<&StreamConfig>,
    clustered: bool,
) -> Result<ConsumerCreate, ApiError> {
    let (req, neg) = decode_create(body)?;
    let subj = parse_create_subject(subject).ok_or_else(ApiError::bad_request)?;
    if subj.stream != req.stream_name {
        return Err(ApiError::stream_mismatch());
    }
    let mut cfg = req.config;
    let consumer_name = match subj.form {
        CreateForm::LegacyEphemeral => cfg.name.clone(),
        _ => subj.consumer.unwrap_or_default().to_owned(),
    };
    if consumer_name.contains(['/', '\\']) {
        return Err(ApiError::consumer_name_contains_path_separators());
    }
    match subj.form {
        CreateForm::LegacyDurable => {
            if cfg.durable_name.is_empty() {
                return Err(ApiError::consumer_durable_name_not_set());
            }
            if cfg.durable_name != consumer_name {
                return Err(ApiError::consumer_durable_name_not_match_subject());
            }
            cfg.name = consumer_name.clone();
        }
        CreateForm::Named => {
            if !cfg.durable_name.is_empty() && cfg.durable_name != consumer_name {
                return Err(ApiError::consumer_durable_name_not_match_subject());
            }
            cfg.name = consumer_name.clone();
        }
        CreateForm::LegacyEphemeral => {
            if !cfg.durable_name.is_empty() {
                return Err(ApiError::consumer_ephemeral_with_durable_name());
            }
        }
    }
    if let Some(filter) = subj.filter {
        if !cfg.filter_subjects.is_empty() {
            return Err(ApiError::consumer_multiple_filters_not_allowed());
        }
        if cfg.filter_subject != filter {
            return Err(ApiError::consumer_create_filter_subject_mismatch());
        }
    }
    if !clustered && cfg.num_replicas > 1 {
        return Err(ApiError::stream_replicas_not_supported());
    }
    let stream = stream.ok_or_else(ApiError::stream_not_found)?;

    // setStaticConsumerMetadata runs on the request as sent (before defaults): a negative
    // priority_timeout still counts there.
    let mut level = cfg.required_api_level();
    if neg.priority_timeout {
        level = level.max(1);
    }
    cfg.set_static_metadata_level(level);

    let ack_wait_ns = set_defaults(&mut cfg, &neg, stream, req.pedantic)?;
    check_config(&cfg, &neg, ack_wait_ns, stream)?;

    let durable = cfg.is_durable();
    let inactive_defaulted = !durable && cfg.inactive_threshold.is_zero();
    if inactive_defaulted {
        cfg.inactive_threshold = DEFAULT_INACTIVE_THRESHOLD;
    }
    let name = if durable {
        Some(cfg.durable_name.clone())
    } else {
        (!cfg.name.is_empty()).then(|| cfg.name.clone())
    };
    Ok(ConsumerCreate {
        stream_name: req.stream_name,
        name,
        durable,
        action: req.action,
        pedantic: req.pedantic,
        config: cfg,
        inactive_defaulted,
    })
}

/// The consumer settings nats-server honours that this server does not (yet): the server
/// refuses them on create and update after [`check_consumer_create`]'s checks (10052 `… is not
/// supported by this server yet`, [`check_supported`]) rather than storing and ignoring them. `sample_freq` asks for ack-sampling metric advisories, which are not published;
/// `direct` and `sourcing` are the internal consumers of mirrors and sources, which streams
/// refuse.
pub fn unsupported_setting(cfg: &ConsumerConfig) -> Option<&'static str> {
    [
        (!cfg.sample_freq.is_empty(), "sample_freq"),
        (cfg.direct, "direct"),
        (cfg.sourcing, "sourcing"),
    ]
    .into_iter()
    .find_map(|(set, name)| set.then_some(name))
}

/// [`unsupported_setting`] as the error create and update answer: 10052 naming the setting.
pub fn check_supported(cfg: &ConsumerConfig) -> Result<(), ApiError> {
    match unsupported_setting(cfg) {
        Some(name) => Err(invalid_config(format_args!(
            "{name} is not supported by this server yet"
        ))),
        None => Ok(()),
    }
}

/// `setConsumerConfigDefaults` (standalone, no server/account limits). Returns the effective
/// `ack_wait` in raw nanoseconds (it may be negative, which `check_config` refuses).
fn set_defaults(
    cfg: &mut ConsumerConfig,
    neg: &RawNegatives,
    stream: &StreamConfig,
    pedantic: bool,
) -> Result<i64, ApiError> {
    if cfg.max_deliver == 0 || cfg.max_deliver < -1 {
        if pedantic && cfg.max_deliver < -1 {
            return Err(ApiError::pedantic("max_deliver must be set to -1"));
        }
        cfg.max_deliver = -1;
    }
    if cfg.max_waiting < 0 {
        if pedantic {
            return Err(ApiError::pedantic("max_waiting must not be negative"));
        }
        cfg.max_waiting = 0;
    }
    if cfg.max_ack_pending < -1 {
        if pedantic {
            return Err(ApiError::pedantic("max_ack_pending must be set to -1"));
        }
        cfg.max_ack_pending = -1;
    }
    if cfg.max_batch < 0 {
        if pedantic {
            return Err(ApiError::pedantic("max_batch must not be negative"));
        }
        cfg.max_batch = 0;
    }
    if neg.max_expires && pedantic {
        return Err(ApiError::pedantic("max_expires must not be negative"));
    }
    if cfg.max_bytes < 0 {
        if pedantic {
            return Err(ApiError::pedantic("max_bytes must not be negative"));
        }
        cfg.max_bytes = 0;
    }
    for (flag, text) in [
        (neg.idle_heartbeat, "idle_heartbeat must not be negative"),
        (
            neg.inactive_threshold,
            "inactive_threshold must not be negative",
        ),
        (
            neg.priority_timeout,
            "priority_timeout must not be negative",
        ),
    ] {
        if flag && pedantic {
            return Err(ApiError::pedantic(text));
        }
    }
    if cfg.deliver_subject.is_empty() && cfg.max_waiting == 0 {
        cfg.max_waiting = DEFAULT_MAX_WAITING;
    }
    let mut ack_wait_ns = neg.ack_wait.unwrap_or(nanos::to_i64(cfg.ack_wait));
    if ack_wait_ns == 0 && matches!(cfg.ack_policy, AckPolicy::Explicit | AckPolicy::All) {
        ack_wait_ns = nanos::to_i64(DEFAULT_ACK_WAIT);
    }
    if let Some(first) = cfg.backoff.first() {
        let first_ns = if neg.backoff.first() == Some(&0) {
            -1 // any negative value: refused by check_config (10184) before it matters
        } else {
            nanos::to_i64(*first)
        };
        if pedantic && ack_wait_ns != first_ns {
            return Err(ApiError::pedantic(
                "first backoff value has to equal batch AckWait",
            ));
        }
        ack_wait_ns = first_ns;
    }
    cfg.ack_wait = nanos::from_i64(ack_wait_ns).unwrap_or_default();
    let limits = &stream.consumer_limits;
    if cfg.max_ack_pending == 0 {
        if pedantic && limits.max_ack_pending > 0 {
            return Err(ApiError::pedantic(
                "max_ack_pending must be set if it's configured in stream limits",
            ));
        }
        cfg.max_ack_pending = limits.max_ack_pending;
    }
    if cfg.inactive_threshold.is_zero() {
        if pedantic && !limits.inactive_threshold.is_zero() {
            return Err(ApiError::pedantic(
                "inactive_threshold must be set if it's configured in stream limits",
            ));
        }
        cfg.inactive_threshold = limits.inactive_threshold;
    }
    if cfg.max_ack_pending == 0 && cfg.ack_policy != AckPolicy::None {
        cfg.max_ack_pending = DEFAULT_MAX_ACK_PENDING;
    }
    if cfg.priority_policy == PriorityPolicy::PinnedClient && cfg.priority_timeout.is_zero() {
        cfg.priority_timeout = DEFAULT_PRIORITY_TIMEOUT;
    }
    if cfg.ack_policy == AckPolicy::FlowControl && !pedantic {
        cfg.flow_control = true;
        cfg.idle_heartbeat = FLOW_CONTROL_HEARTBEAT;
    }
    Ok(ack_wait_ns)
}

/// Go's `strconv.Atoi` error text for `s` (`strconv.Atoi: parsing "abc": invalid syntax`).
fn atoi(s: &str) -> Result<i64, String> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("strconv.Atoi: parsing {s:?}: invalid syntax"));
    }
    s.parse::<i64>()
        .map_err(|_| format!("strconv.Atoi: parsing {s:?}: value out of range"))
}

pub(super) fn is_valid_group_name(g: &str) -> bool {
    (1..=MAX_GROUP_NAME_LEN).contains(&g.len())
        && g.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'/' | b'_' | b'=' | b'-'))
}

/// `checkConsumerCfg`, in its order.
fn check_config(
    cfg: &ConsumerConfig,
    neg: &RawNegatives,
    ack_wait_ns: i64,
    stream: &StreamConfig,
) -> Result<(), ApiError> {
    if !cfg.name.is_empty() && !is_valid_name(&cfg.name) {
        return Err(invalid_config(
            "consumer name can not contain '.', '*', '>', '\\', '/'",
        ));
    }
    if !cfg.durable_name.is_empty() && !is_valid_name(&cfg.durable_name) {
        return Err(invalid_config(
            "consumer durable name can not contain '.', '*', '>', '\\', '/'",
        ));
    }
    if cfg.num_replicas > 0 && cfg.num_replicas > stream.num_replicas {
        return Err(ApiError::consumer_replicas_exceeds_stream());
    }
    if cfg.num_replicas < 0 {
        return Err(ApiError::replicas_count_cannot_be_negative());
    }
    if stream.retention != RetentionPolicy::Limits
        && cfg.num_replicas != 0
        && cfg.num_replicas != stream.num_replicas
    {
        return Err(ApiError::consumer_replicas_should_match_stream());
    }
    if !neg.backoff.is_empty() {
        return Err(ApiError::consumer_backoff_negative());
    }
    if ack_wait_ns < 0 {
        return Err(ApiError::consumer_ack_wait_negative());
    }
    if cfg.ack_policy == AckPolicy::FlowControl {
        if cfg.deliver_subject.is_empty() {
            return Err(ApiError::consumer_ack_fc_requires_push());
        }
        if !cfg.flow_control {
            return Err(ApiError::consumer_ack_fc_requires_fc());
        }
        if cfg.idle_heartbeat != FLOW_CONTROL_HEARTBEAT {
            return Err(invalid_config(
                "flow control ack policy heartbeat needs to be 1s",
            ));
        }
        if cfg.max_ack_pending <= 0 {
            return Err(ApiError::consumer_ack_fc_requires_max_ack_pending());
        }
        if !cfg.ack_wait.is_zero() || !cfg.backoff.is_empty() {
            return Err(ApiError::consumer_ack_fc_requires_no_ack_wait());
        }
        if cfg.max_deliver > 0 {
            return Err(ApiError::consumer_ack_fc_requires_no_max_deliver());
        }
    }
    if !cfg.backoff.is_empty()
        && cfg.max_deliver != -1
        && cfg.backoff.len() as i64 > cfg.max_deliver
    {
        return Err(ApiError::consumer_max_deliver_backoff());
    }
    if cfg.description.len() > MAX_DESCRIPTION_LEN {
        return Err(ApiError::consumer_description_too_long(MAX_DESCRIPTION_LEN));
    }
    if !cfg.deliver_subject.is_empty() {
        let ds = cfg.deliver_subject.as_bytes();
        if !is_literal(ds) {
            return Err(ApiError::consumer_deliver_to_wildcards());
        }
        if !is_valid_subject(ds) {
            return Err(ApiError::consumer_invalid_deliver_subject());
        }
        if stream.subjects.iter().any(|s| is_subset(ds, s.as_bytes())) {
            return Err(ApiError::consumer_deliver_cycle());
        }
        if cfg.max_waiting != 0 {
            return Err(ApiError::consumer_push_max_waiting());
        }
        if cfg.max_ack_pending > 0 && cfg.ack_policy == AckPolicy::None {
            return Err(ApiError::consumer_max_pending_ack_policy_required());
        }
        if !cfg.idle_heartbeat.is_zero() && cfg.idle_heartbeat < MIN_HEARTBEAT {
            return Err(ApiError::consumer_small_heartbeat());
        }
    } else {
        if cfg.ack_policy == AckPolicy::None && stream.retention == RetentionPolicy::WorkQueue {
            return Err(ApiError::consumer_pull_requires_ack());
        }
        if cfg.rate_limit_bps > 0 {
            return Err(ApiError::consumer_pull_with_rate_limit());
        }
        if !cfg.idle_heartbeat.is_zero() {
            return Err(ApiError::consumer_hb_requires_push());
        }
        if cfg.flow_control {
            return Err(ApiError::consumer_fc_requires_push());
        }
        if !cfg.max_expires.is_zero() && cfg.max_expires < MIN_MAX_EXPIRES {
            return Err(ApiError::consumer_max_request_expires_too_small());
        }
    }
    let limits = &stream.consumer_limits;
    if limits.max_ack_pending > 0 && cfg.max_ack_pending > limits.max_ack_pending {
        return Err(ApiError::consumer_max_pending_ack_excess(
            limits.max_ack_pending,
        ));
    }
    if !limits.inactive_threshold.is_zero() && cfg.inactive_threshold > limits.inactive_threshold {
        return Err(ApiError::consumer_inactive_threshold_excess(
            crate::duration::format_go_duration(limits.inactive_threshold),
        ));
    }
    if cfg.direct {
        if cfg.deliver_subject.is_empty() {
            return Err(ApiError::consumer_direct_requires_push());
        }
        if cfg.is_durable() {
            return Err(ApiError::consumer_direct_requires_ephemeral());
        }
    }
    if !cfg.filter_subject.is_empty() && !cfg.filter_subjects.is_empty() {
        return Err(ApiError::consumer_duplicate_filter_subjects());
    }
    if !cfg.filter_subject.is_empty() && !is_valid_subject(cfg.filter_subject.as_bytes()) {
        return Err(invalid_config("invalid subject"));
    }
    if cfg.filter_subjects.iter().any(String::is_empty) {
        return Err(ApiError::consumer_empty_filter());
    }
    let filters = cfg.filters();
    for (i, f) in filters.iter().enumerate() {
        if !is_valid_subject(f.as_bytes()) {
            return Err(invalid_config("invalid subject"));
        }
        for (j, g) in filters.iter().enumerate() {
            if i != j && is_subset(f.as_bytes(), g.as_bytes()) {
                return Err(ApiError::consumer_overlapping_subject_filters());
            }
        }
    }
    check_start(cfg)?;
    if !cfg.sample_freq.is_empty() {
        let s = cfg
            .sample_freq
            .strip_suffix('%')
            .unwrap_or(&cfg.sample_freq);
        match atoi(s) {
            Err(e) => return Err(ApiError::consumer_invalid_sampling(e)),
            Ok(n) if n < 0 => return Err(ApiError::consumer_invalid_sampling("%!s(<nil>)")),
            Ok(_) => {}
        }
    }
    if cfg.flow_control && cfg.idle_heartbeat.is_zero() {
        return Err(ApiError::consumer_with_flow_control_needs_heartbeats());
    }
    if cfg.is_durable() && !cfg.name.is_empty() && cfg.name != cfg.durable_name {
        return Err(ApiError::consumer_create_durable_and_name_mismatch());
    }
    let metadata_len: usize = cfg.metadata.iter().map(|(k, v)| k.len() + v.len()).sum();
    if metadata_len > MAX_METADATA_LEN {
        return Err(ApiError::consumer_metadata_length(format_args!(
            "{}KB",
            MAX_METADATA_LEN / 1024
        )));
    }
    if cfg.priority_policy != PriorityPolicy::None {
        if !cfg.deliver_subject.is_empty() {
            return Err(ApiError::consumer_push_with_priority_group());
        }
        if cfg.priority_groups.is_empty() {
            return Err(ApiError::consumer_priority_policy_without_group());
        }
        for g in &cfg.priority_groups {
            if g.is_empty() {
                return Err(ApiError::consumer_empty_group_name());
            }
            if !is_valid_group_name(g) {
                return Err(ApiError::consumer_invalid_group_name());
            }
        }
    } else {
        if !cfg.priority_groups.is_empty() {
            return Err(ApiError::consumer_priority_group_with_policy_none());
        }
        if !cfg.priority_timeout.is_zero() {
            return Err(ApiError::consumer_pinned_ttl_without_priority_policy_none());
        }
    }
    Ok(())
}

/// The deliver policy / start option rules (10094, texts as the server, typo included).
fn check_start(cfg: &ConsumerConfig) -> Result<(), ApiError> {
    let bad_start = |dp: &str, start: &str| {
        ApiError::consumer_invalid_policy(format_args!(
            "consumer delivery policy is deliver {dp}, but optional start {start} is also set"
        ))
    };
    let not_set = |dp: &str, what: &str| {
        ApiError::consumer_invalid_policy(format_args!(
            "consumer delivery policy is deliver {dp}, but optional {what} is not set"
        ))
    };
    let seq = cfg.opt_start_seq > 0;
    let time = cfg.opt_start_time.is_some();
    let simple = |dp: &str| {
        if seq {
            Err(bad_start(dp, "sequence"))
        } else if time {
            Err(bad_start(dp, "time"))
        } else {
            Ok(())
        }
    };
    match cfg.deliver_policy {
        DeliverPolicy::All => simple("all"),
        DeliverPolicy::Last => simple("last"),
        DeliverPolicy::New => simple("new"),
        DeliverPolicy::LastPerSubject => {
            simple("last per subject")?;
            if cfg.filters().is_empty() {
                return Err(not_set("last per subject", "filter subject"));
            }
            Ok(())
        }
        DeliverPolicy::ByStartSequence => {
            if !seq {
                return Err(not_set("by start sequence", "start sequence"));
            }
            if time {
                return Err(bad_start("by start sequence", "time"));
            }
            Ok(())
        }
        DeliverPolicy::ByStartTime => {
            if !time {
                return Err(not_set("by start time", "start time"));
            }
            if seq {
                return Err(bad_start("by start time", "start sequence"));
            }
            Ok(())
        }
    }
}

impl ConsumerCreate {
    /// For a request naming a consumer that already exists with the stored config `existing`:
    /// the server's checks in its order, returning the config to store (and echo).
    ///
    /// * the request's `pause_until` is replaced by the stored one (CONSUMER.PAUSE changes it,
    ///   an update cannot);
    /// * `action: "create"` with a config that is not [`ConsumerConfig::same_as`] the stored
    ///   one → 10148 (an ephemeral's 5 s default counts as a difference, as on the server);
    /// * workqueue stream: a filter overlapping another consumer's (or an unfiltered other) →
    ///   10100 ([`partition_unique`]; `others` are the stream's other consumers, `existing`
    ///   may be among them);
    /// * [`check_consumer_update`] (10012 with the server's texts);
    /// * an `inactive_threshold` that changes to 0 on an ephemeral becomes 5 s again.
    ///
    /// Not covered: a push consumer's `deliver_subject` change while the old subject has
    /// interest (10013): the server checks that with its router.
    pub fn check_existing(
        &self,
        existing: &ConsumerConfig,
        stream: &StreamConfig,
        others: &[&ConsumerConfig],
    ) -> Result<ConsumerConfig, ApiError> {
        let mut cfg = self.config.clone();
        if self.inactive_defaulted {
            cfg.inactive_threshold = Duration::ZERO;
        }
        cfg.pause_until = existing.pause_until;
        if cfg.pause_until.is_some_and(|t| !t.instant.is_zero()) {
            let level = cfg
                .metadata
                .get(META_REQUIRED_LEVEL)
                .and_then(|l| l.parse::<u32>().ok())
                .unwrap_or(0)
                .max(1);
            cfg.set_static_metadata_level(level);
        }
        if self.action == ConsumerAction::Create && !cfg.same_as(existing) {
            return Err(ApiError::consumer_already_exists());
        }
        if stream.retention == RetentionPolicy::WorkQueue
            && !partition_unique(
                self.name.as_deref().unwrap_or(&existing.name),
                &cfg.filters(),
                others,
            )
        {
            return Err(ApiError::consumer_wq_consumer_not_unique());
        }
        check_consumer_update(existing, &cfg)?;
        if cfg.inactive_threshold != existing.inactive_threshold
            && !existing.is_durable()
            && cfg.inactive_threshold.is_zero()
        {
            cfg.inactive_threshold = DEFAULT_INACTIVE_THRESHOLD;
        }
        Ok(cfg)
    }

    /// For a request whose consumer does not exist yet (or has no name): the server's checks
    /// in its order, returning the consumer's name and the config to store.
    ///
    /// * `action: "update"` → 10149;
    /// * stream `max_consumers` reached by `others` (the stream's consumers) → 10026 (account
    ///   limits are the caller's);
    /// * workqueue stream (unless `direct`/`sourcing`): ack policy not `explicit` → 10098,
    ///   deliver policy not `all` → 10101, an unfiltered consumer next to others → 10099, a
    ///   filter overlapping another consumer's → 10100;
    /// * durable name longer than 255 → 10102;
    /// * no name (legacy ephemeral): `generate_name` is called until the name is not one of
    ///   `others` (the server uses 8 random characters from `[0-9A-Za-z]`). As on the server,
    ///   the stored config then keeps `name` empty (observed: `config` has no `name`), so use
    ///   the returned name for the consumer (ack subjects, `ConsumerInfo::name`, listing);
    /// * an ephemeral name longer than 255 on a file stream → 10012 `error creating store for
    ///   consumer` (observed: the server fails to create its directory).
    pub fn check_new(
        &self,
        stream: &StreamConfig,
        others: &[&ConsumerConfig],
        mut generate_name: impl FnMut() -> String,
    ) -> Result<(String, ConsumerConfig), ApiError> {
        let cfg = self.config.clone();
        if self.action == ConsumerAction::Update {
            return Err(ApiError::consumer_does_not_exist());
        }
        let limitable = others.iter().filter(|o| !o.sourcing).count();
        if stream.max_consumers > 0 && limitable as i64 >= stream.max_consumers {
            return Err(ApiError::maximum_consumers_limit());
        }
        if stream.retention == RetentionPolicy::WorkQueue && !cfg.direct && !cfg.sourcing {
            if !matches!(cfg.ack_policy, AckPolicy::Explicit | AckPolicy::FlowControl) {
                return Err(ApiError::consumer_wq_requires_explicit_ack());
            }
            if cfg.deliver_policy != DeliverPolicy::All {
                return Err(ApiError::consumer_wq_consumer_not_deliver_all());
            }
            if limitable > 0 {
                let filters = cfg.filters();
                if filters.is_empty() {
                    return Err(ApiError::consumer_wq_multiple_unfiltered());
                }
                let name = self.name.as_deref().unwrap_or_default();
                if !partition_unique(name, &filters, others) {
                    return Err(ApiError::consumer_wq_consumer_not_unique());
                }
            }
        }
        let name = if self.durable {
            if cfg.durable_name.len() > MAX_NAME_LEN {
                return Err(ApiError::consumer_name_too_long(MAX_NAME_LEN));
            }
            cfg.durable_name.clone()
        } else if cfg.name.is_empty() {
            loop {
                let n = generate_name();
                if !others.iter().any(|o| o.name == n) {
                    break n;
                }
            }
        } else {
            cfg.name.clone()
        };
        if !is_valid_name(&name) {
            return Err(ApiError::consumer_bad_durable_name());
        }
        if name.len() > MAX_NAME_LEN && stream.storage == StorageType::File {
            return Err(ApiError::consumer_create(
                "error creating store for consumer",
            ));
        }
        Ok((name, cfg))
    }
}

/// Whether `filters` (of consumer `name`) overlap no other consumer's filters, as the server's
/// `partitionUnique` for workqueue streams: an unfiltered other consumer overlaps everything;
/// `direct`/`sourcing` consumers and `name` itself are skipped.
pub fn partition_unique(name: &str, filters: &[String], others: &[&ConsumerConfig]) -> bool {
    filters.iter().all(|f| {
        others
            .iter()
            .filter(|o| o.name != name && !o.direct && !o.sourcing)
            .all(|o| {
                let of = o.filters();
                !of.is_empty() && !of.iter().any(|g| overlaps(f.as_bytes(), g.as_bytes()))
            })
    })
}

/// Checks that `new` only changes what an update may change, as the server's
/// `checkNewConsumerConfig`, in its order. Both configs are checked, defaulted ones.
///
/// Errors are 10012 [`ApiError::consumer_create`] (code 500) with the server's text:
/// `deliver policy can not be updated`, `storage type can not be updated`, `direct can not be
/// updated`, `sourcing can not be updated`, `start sequence can not be updated`, `start time can
/// not be updated` (different instants; the same instant in another offset is fine), `ack
/// policy can not be updated`, `replay policy can not be updated`, `heart beats can not be
/// updated`, `flow control can not be updated`, `can not update pull consumer to push based`,
/// `can not update push consumer to pull based`, `max waiting can not be updated`; and 10116
/// when `backoff` is longer than `max_deliver`.
///
/// Everything else may change (`ack_wait`, `max_deliver`, `backoff`, filters, `description`,
/// `max_ack_pending`, `metadata`, `inactive_threshold`, `max_batch`/`max_expires`/`max_bytes`,
/// `headers_only`, `sample_freq`, even `durable_name`).
pub fn check_consumer_update(
    existing: &ConsumerConfig,
    new: &ConsumerConfig,
) -> Result<(), ApiError> {
    if existing == new {
        return Ok(());
    }
    let err = |t: &str| Err(ApiError::consumer_create(t));
    let (o, n) = (existing, new);
    if o.deliver_policy != n.deliver_policy {
        return err("deliver policy can not be updated");
    }
    if o.mem_storage != n.mem_storage {
        return err("storage type can not be updated");
    }
    if o.direct != n.direct {
        return err("direct can not be updated");
    }
    if o.sourcing != n.sourcing {
        return err("sourcing can not be updated");
    }
    if o.opt_start_seq != n.opt_start_seq {
        return err("start sequence can not be updated");
    }
    if o.opt_start_time.map(|t| t.instant) != n.opt_start_time.map(|t| t.instant) {
        return err("start time can not be updated");
    }
    if o.ack_policy != n.ack_policy {
        return err("ack policy can not be updated");
    }
    if o.replay_policy != n.replay_policy {
        return err("replay policy can not be updated");
    }
    if o.idle_heartbeat != n.idle_heartbeat {
        return err("heart beats can not be updated");
    }
    if o.flow_control != n.flow_control {
        return err("flow control can not be updated");
    }
    if o.deliver_subject != n.deliver_subject {
        if o.deliver_subject.is_empty() {
            return err("can not update pull consumer to push based");
        }
        if n.deliver_subject.is_empty() {
            return err("can not update push consumer to pull based");
        }
    }
    if o.max_waiting != n.max_waiting {
        return err("max waiting can not be updated");
    }
    if !n.backoff.is_empty() && n.max_deliver != -1 && n.backoff.len() as i64 > n.max_deliver {
        return Err(ApiError::consumer_max_deliver_backoff());
    }
    Ok(())
}
