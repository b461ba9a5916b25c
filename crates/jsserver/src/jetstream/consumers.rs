//! The consumers of one stream, driven by the stream's thread.
//!
//! Each consumer is a [`jsproto::consumer::Consumer`] state machine. The stream thread feeds it
//! pull requests (`$JS.API.CONSUMER.MSG.NEXT.<stream>.<consumer>`), acks
//! (`$JS.ACK.<stream>.<consumer>.…`), newly stored and removed messages and the passing of
//! time, and carries out what it asks: deliveries (the stored message with the ack subject as
//! reply), status messages, ack confirmations and advisories.
//!
//! Durability of acks (see `docs/durability.md`): a consumer's state (delivered, ack floor,
//! pending with delivery counts) is written to `obs/<name>/state.json` under the stream's
//! directory. An ack that asked for a confirmation (an ack with a reply subject, such as
//! `ack_sync`/`double_ack`) is answered only after the state holding it was written and
//! fsynced; all confirmations of a batch share that write (group commit). Plain acks are
//! written within [`PLAIN_ACK_PERSIST`] of arriving.
//!
//! Push consumers (a `deliver_subject`): the router tells the stream when the deliver subject
//! gains its first or loses its last subscription on exactly that subject (in the
//! `deliver_group` queue group if set; [`Router::watch_interest`], nats-server's interest
//! notification), and the stream hands that to the consumer, which delivers while bound.
//! Nothing polls. Flow-control answers arrive on `$JS.FC.<stream>.<consumer>.*`. A push
//! consumer with an `inactive_threshold` (every ephemeral) is deleted once its deliver
//! subject has had no interest for that long, as nats-server's `deleteNotActive`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use jsproto::api::advisory::{ConsumerAction, JsAdvisory};
use jsproto::api::time::Timestamp;
use jsproto::consumer::{
    AckKind, AckSubject, Action, Advisory, Consumer, ConsumerState, MsgMeta, PersistedState,
    StreamView, SubjectFilter,
};
use serde::{Deserialize, Serialize};
use tracing::{debug, warn};

use super::stream::{timestamp, unix_now, StreamCmd, StreamEngine, WeakStreamSender};
use crate::router::{BurstWork, InterestWatcher, InternalHandler, RoutedMsg, Router};
use crate::server::NATS_VERSION;
use crate::store::MsgStore;
use jsproto::api::consumer::{
    ConsumerConfig as ApiConsumerConfig, ConsumerCreate, ConsumerCreateResponse,
    ConsumerDeleteResponse, ConsumerInfo, ConsumerInfoResponse, ConsumerListResponse,
    ConsumerNamesResponse, ConsumerTimes, LIST_LIMIT, NAMES_LIMIT,
};
use jsproto::api::{encode_error, encode_ok, ApiError};

/// Longest time a plain (unconfirmed) ack waits before the consumer state holding it is
/// written to the OS. A crash loses at most this much of plain acks (they are redelivered);
/// confirmed acks are never lost.
pub const PLAIN_ACK_PERSIST: Duration = Duration::from_millis(50);

/// The stream as a consumer sees it: the store, plus the router for reply-subject interest.
pub struct View<'a> {
    /// The stream's store.
    pub store: &'a dyn MsgStore,
    /// The server's router.
    pub router: &'a Router,
}

fn meta_of(m: &crate::store::StoredMsg) -> MsgMeta {
    MsgMeta {
        seq: m.seq,
        subject_len: m.subject.len(),
        size: m.headers.as_ref().map_or(0, |h| h.len()) + m.payload.len(),
        timestamp_unix_ns: m.ts,
    }
}

impl View<'_> {
    fn filters(filter: &SubjectFilter) -> Vec<&str> {
        if filter.is_all() {
            vec![">"]
        } else {
            filter.subjects().iter().map(String::as_str).collect()
        }
    }
}

impl StreamView for View<'_> {
    fn first_seq(&self) -> u64 {
        let s = self.store.state();
        if s.msgs == 0 {
            s.last_seq + 1
        } else {
            s.first_seq
        }
    }

    fn last_seq(&self) -> u64 {
        self.store.state().last_seq
    }

    fn load(&self, seq: u64) -> Option<MsgMeta> {
        self.store.load(seq).ok().flatten().map(|m| meta_of(&m))
    }

    fn next_matching(&self, from: u64, filter: &SubjectFilter) -> Option<MsgMeta> {
        Self::filters(filter)
            .into_iter()
            .filter_map(|f| self.store.load_next(f, from).ok().flatten())
            .min_by_key(|m| m.seq)
            .map(|m| meta_of(&m))
    }

    fn num_matching(&self, from: u64, filter: &SubjectFilter) -> u64 {
        let filters = Self::filters(filter);
        let intersecting = filters.iter().enumerate().any(|(i, f)| {
            filters[..i]
                .iter()
                .any(|g| jsproto::subject::overlaps(f.as_bytes(), g.as_bytes()))
        });
        if !intersecting {
            return filters
                .into_iter()
                .map(|f| self.store.num_pending(from, f))
                .sum();
        }
        // Filters that intersect (allowed unless one is a subset of the other): a message
        // matching several counts once, so walk the messages (O(messages from `from`)).
        let mut count = 0;
        let mut seq = from;
        while let Some(m) = self.next_matching(seq, filter) {
            count += 1;
            seq = m.seq + 1;
        }
        count
    }

    fn last_matching(&self, filter: &SubjectFilter) -> Option<u64> {
        Self::filters(filter)
            .into_iter()
            .filter_map(|f| self.store.load_last(f).ok().flatten())
            .map(|m| m.seq)
            .max()
    }

    fn one_msg_per_subject(&self) -> bool {
        self.store.limits().max_per_subject() == Some(1)
    }

    /// O(matching subjects): one index lookup per subject.
    fn last_per_subject(&self, filter: &SubjectFilter) -> Vec<u64> {
        let mut subjects = std::collections::BTreeSet::new();
        for f in Self::filters(filter) {
            subjects.extend(self.store.subjects_state(f).into_keys());
        }
        let mut seqs: Vec<u64> = subjects
            .iter()
            .filter_map(|s| self.store.load_last(s).ok().flatten())
            .map(|m| m.seq)
            .collect();
        seqs.sort_unstable();
        seqs
    }

    fn first_seq_at_or_after_time(&self, unix_ns: u64) -> Option<u64> {
        let s = self.store.state();
        let (mut lo, mut hi) = (s.first_seq.max(1), s.last_seq + 1);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match self.store.load_next(">", mid).ok().flatten() {
                Some(m) if m.ts < unix_ns => lo = m.seq + 1,
                _ => hi = mid,
            }
        }
        (lo <= s.last_seq).then_some(lo)
    }

    fn has_interest(&self, reply_to: &[u8]) -> bool {
        self.router.has_interest(reply_to)
    }
}

/// What is kept on disk for a consumer: `obs/<name>/meta.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ConsumerMeta {
    /// The consumer's name (a legacy ephemeral's stored config has none).
    pub name: String,
    /// The consumer's config as stored by the API (defaults filled, static metadata).
    pub config: ApiConsumerConfig,
    /// Creation time.
    pub created: Timestamp,
    /// Whether it is durable (has a `durable_name`).
    pub durable: bool,
}

/// One consumer on the stream thread.
pub struct ConsumerRuntime {
    /// The state machine.
    pub core: Consumer,
    /// Config, creation time and durability, as persisted.
    pub meta: ConsumerMeta,
    /// Inactivity threshold after which the consumer deletes itself (ephemerals by default).
    pub inactive_threshold: Option<Duration>,
    /// Last pull request, ack or delivery.
    pub last_activity: Instant,
    /// Not before this instant is inactivity checked again (moves on while something other
    /// than activity keeps the consumer, so a kept consumer does not make the thread spin).
    next_inactivity_check: Instant,
    /// Internal subscriptions (pull requests, acks), removed with the consumer.
    subs: Vec<(String, Arc<dyn InternalHandler>)>,
    /// State changed since it was last written.
    pub(super) dirty: bool,
    /// When the state was last written.
    last_persist: Instant,
    /// Push consumers: what the router watches for them.
    push: Option<PushRuntime>,
}

/// A push consumer's link to the router.
struct PushRuntime {
    /// The deliver subject watched.
    subject: Bytes,
    /// `deliver_group`, if any: only its members count as interest.
    group: Option<Bytes>,
    /// Registered with the router for `subject`/`group`.
    watcher: Arc<dyn InterestWatcher>,
    /// Since when the deliver subject has had no interest (`None` while bound).
    unbound_since: Option<Instant>,
}

/// Tells the stream that a push consumer's deliver subject gained or lost interest.
struct InterestIngress {
    tx: WeakStreamSender,
    consumer: Arc<str>,
}

impl InterestWatcher for InterestIngress {
    fn interest_changed(&self) {
        self.tx.send(StreamCmd::Interest {
            consumer: Arc::clone(&self.consumer),
        });
    }
}

/// Hands flow-control answers for one push consumer to the stream.
struct FlowControlIngress {
    tx: WeakStreamSender,
    consumer: Arc<str>,
}

impl InternalHandler for FlowControlIngress {
    fn on_message(&self, msg: RoutedMsg<'_>, later: &mut BurstWork) {
        self.tx.send_at_burst_end(
            StreamCmd::FlowControl {
                consumer: Arc::clone(&self.consumer),
                subject: msg.subject.clone(),
            },
            later,
        );
    }
}

/// Hands pull requests for one consumer to the stream.
struct PullIngress {
    tx: WeakStreamSender,
    consumer: Arc<str>,
}

impl InternalHandler for PullIngress {
    fn on_message(&self, msg: RoutedMsg<'_>, later: &mut BurstWork) {
        // A pull request without a reply subject is ignored (nats-server).
        let Some(reply) = msg.reply.cloned() else {
            return;
        };
        self.tx.send_at_burst_end(
            StreamCmd::Pull {
                consumer: Arc::clone(&self.consumer),
                reply,
                body: msg.payload.clone(),
            },
            later,
        );
    }
}

/// Hands acks for one consumer to the stream.
struct AckIngress {
    tx: WeakStreamSender,
    consumer: Arc<str>,
}

impl InternalHandler for AckIngress {
    fn on_message(&self, msg: RoutedMsg<'_>, later: &mut BurstWork) {
        self.tx.send_at_burst_end(
            StreamCmd::Ack {
                consumer: Arc::clone(&self.consumer),
                subject: msg.subject.clone(),
                payload: msg.payload.clone(),
                reply: msg.reply.cloned(),
            },
            later,
        );
    }
}

/// The consumers of a stream and what they are waiting to have done.
#[derive(Default)]
pub struct Consumers {
    /// By name.
    pub map: BTreeMap<String, ConsumerRuntime>,
    /// Which consumers a stored message can reach: rebuilt when a consumer comes, goes or
    /// changes its filters.
    fanout: Fanout,
    /// Ack confirmations held until the consumer state holding them is durable.
    held_ack_replies: Vec<Bytes>,
    /// Some consumer owes a durable write before the held confirmations go out.
    needs_fsync: bool,
    /// Scratch for actions.
    actions: Vec<Action>,
    /// Stream sequences a consumer acknowledged, for interest/work-queue removal once the
    /// consumer is back in the map.
    acked: Vec<std::ops::RangeInclusive<u64>>,
    /// Wall clock at a fixed instant, to turn `Instant`s into Unix times.
    epoch: Option<(Instant, u64)>,
    /// Some consumer has `headers_only`: only then does a delivery look its consumer up.
    any_headers_only: bool,
}

impl Consumers {
    /// Unix nanoseconds at `at`.
    pub fn unix_at(&mut self, at: Instant) -> u64 {
        let (i, u) = *self
            .epoch
            .get_or_insert_with(|| (Instant::now(), unix_now()));
        if at >= i {
            u + (at - i).as_nanos() as u64
        } else {
            u.saturating_sub((i - at).as_nanos() as u64)
        }
    }
}

/// `obs/<name>` under a stream directory.
pub fn consumer_dir(stream_dir: &Path, name: &str) -> PathBuf {
    stream_dir.join("obs").join(name)
}

impl StreamEngine {
    /// Adds a consumer (new, or recovered with `state`): subscribes its pull and ack
    /// subjects and persists its meta (file streams).
    ///
    /// # Errors
    /// The core's config validation, or a failure to write the meta file.
    pub fn add_consumer(
        &mut self,
        name: &str,
        core_config: jsproto::consumer::ConsumerConfig,
        deliver: jsproto::consumer::DeliverPolicy,
        meta: ConsumerMeta,
        inactive_threshold: Option<Duration>,
        state: Option<PersistedState>,
    ) -> anyhow::Result<()> {
        let now = Instant::now();
        let stream_name = self.config().name.clone();
        let core_config = self.with_rate_burst(named(core_config, name));
        let account = Arc::clone(self.outbox.account());
        let mut core = {
            let view = View {
                store: &*self.store,
                router: account.router(),
            };
            match &state {
                Some(state) => {
                    let unix = self.consumers.unix_at(now);
                    Consumer::restore(stream_name.clone(), core_config, state, &view, now, unix)?
                }
                None => Consumer::with_deliver_policy(
                    stream_name.clone(),
                    core_config,
                    deliver,
                    &view,
                    now,
                )?,
            }
        };
        // Pin ids (pinned_client) come from the core; a random seed makes them unguessable.
        core.set_pin_seed(rand::random());
        // A `mem_storage` consumer keeps nothing on disk and is gone after a restart, as in
        // nats-server (clients re-create such consumers, ordered ones among them).
        if let Some(dir) = self.dir.as_ref().filter(|_| !meta.config.mem_storage) {
            let cdir = consumer_dir(dir, name);
            std::fs::create_dir_all(&cdir)?;
            super::write_atomically(
                &cdir.join("meta.json"),
                &serde_json::to_vec(&meta).expect("meta serialises"),
                true,
            )?;
        }
        let tx = self
            .self_tx
            .clone()
            .expect("stream engines know their own sender");
        let consumer: Arc<str> = Arc::from(name);
        let pull: Arc<dyn InternalHandler> = Arc::new(PullIngress {
            tx: tx.clone(),
            consumer: Arc::clone(&consumer),
        });
        let ack: Arc<dyn InternalHandler> = Arc::new(AckIngress {
            tx: tx.clone(),
            consumer: Arc::clone(&consumer),
        });
        let mut subs = vec![
            (
                format!("$JS.API.CONSUMER.MSG.NEXT.{stream_name}.{name}"),
                pull,
            ),
            // Exactly the nine tokens of a v1 ack subject, as nats-server subscribes.
            (format!("$JS.ACK.{stream_name}.{name}.*.*.*.*.*"), ack),
        ];
        if core.config().push.as_ref().is_some_and(|p| p.flow_control) {
            let fc: Arc<dyn InternalHandler> = Arc::new(FlowControlIngress {
                tx: tx.clone(),
                consumer: Arc::clone(&consumer),
            });
            subs.push((format!("$JS.FC.{stream_name}.{name}.*"), fc));
        }
        let push = core.deliver_subject().map(|subject| PushRuntime {
            subject: subject.clone(),
            group: (!meta.config.deliver_group.is_empty())
                .then(|| Bytes::copy_from_slice(meta.config.deliver_group.as_bytes())),
            watcher: Arc::new(InterestIngress {
                tx: tx.clone(),
                consumer: Arc::clone(&consumer),
            }),
            unbound_since: Some(now),
        });
        for (subject, handler) in &subs {
            account
                .router()
                .subscribe_internal(subject.as_bytes(), None, Arc::clone(handler))
                .map_err(|e| anyhow::anyhow!("subscribing {subject}: {e}"))?;
        }
        let runtime = ConsumerRuntime {
            core,
            meta,
            inactive_threshold,
            last_activity: now,
            next_inactivity_check: now + inactive_threshold.unwrap_or_default(),
            subs,
            dirty: state.is_none(),
            last_persist: now,
            push,
        };
        self.consumers.map.insert(name.to_owned(), runtime);
        self.rebuild_fanout();
        self.note_headers_only();
        self.watch_deliver_subject(name);
        // A `pause_until` ahead (created paused, or paused before a restart) holds deliveries.
        self.apply_pause(name);
        self.publish_counters();
        self.persist_consumers(false);
        Ok(())
    }

    /// Deletes a consumer: `409 Consumer Deleted` to its waiting requests, subscriptions and
    /// files removed. False if there is no such consumer.
    pub fn remove_consumer(&mut self, name: &str) -> bool {
        let Some(mut runtime) = self.consumers.map.remove(name) else {
            return false;
        };
        self.rebuild_fanout();
        self.note_headers_only();
        self.publish_counters();
        let mut out = Vec::new();
        runtime.core.delete(&mut out);
        self.execute(name, &mut out);
        let account = Arc::clone(self.outbox.account());
        for (subject, handler) in &runtime.subs {
            account
                .router()
                .unsubscribe_internal(subject.as_bytes(), None, handler);
        }
        if let Some(push) = &runtime.push {
            account
                .router()
                .unwatch_interest(&push.subject, push.group.as_deref(), &push.watcher);
        }
        if let Some(dir) = &self.dir {
            let _ = std::fs::remove_dir_all(consumer_dir(dir, name));
        }
        self.retention_sweep();
        self.advise_consumer(ConsumerAction::Delete, name);
        true
    }

    /// The consumer's state and the wall-clock times of its last delivery and ack.
    pub fn consumer_state(
        &mut self,
        name: &str,
    ) -> Option<(ConsumerState, Option<u64>, Option<u64>)> {
        let state = self.consumers.map.get(name)?.core.info();
        let delivered = state.last_delivery.map(|i| self.consumers.unix_at(i));
        let acked = state.last_ack.map(|i| self.consumers.unix_at(i));
        Some((state, delivered, acked))
    }

    /// A pull request arrived for `consumer`.
    pub fn on_pull(&mut self, consumer: &str, reply: Bytes, body: &[u8]) {
        let now = Instant::now();
        let account = Arc::clone(self.outbox.account());
        let view = View {
            store: &*self.store,
            router: account.router(),
        };
        let Some(rt) = self.consumers.map.get_mut(consumer) else {
            return;
        };
        rt.last_activity = now;
        let mut out = std::mem::take(&mut self.consumers.actions);
        rt.core.on_pull_body(now, reply, body, &view, &mut out);
        self.execute_taken(consumer, out);
    }

    /// Recomputes whether some consumer has `headers_only` (after a create, update or delete).
    fn note_headers_only(&mut self) {
        self.consumers.any_headers_only = self
            .consumers
            .map
            .values()
            .any(|c| c.meta.config.headers_only);
    }

    /// Registers push consumer `name`'s deliver subject with the router and hands the
    /// consumer the interest it has now. Nothing for a pull consumer.
    fn watch_deliver_subject(&mut self, name: &str) {
        let account = Arc::clone(self.outbox.account());
        let Some(push) = self.consumers.map.get(name).and_then(|c| c.push.as_ref()) else {
            return;
        };
        let bound = account.router().watch_interest(
            &push.subject,
            push.group.as_deref(),
            Arc::clone(&push.watcher),
        );
        self.set_delivery_interest(name, bound);
    }

    /// The router said push consumer `consumer`'s deliver subject may have changed interest.
    pub fn on_delivery_interest(&mut self, consumer: &str) {
        let account = Arc::clone(self.outbox.account());
        let Some(push) = self
            .consumers
            .map
            .get(consumer)
            .and_then(|c| c.push.as_ref())
        else {
            return;
        };
        let bound = account
            .router()
            .exact_interest(&push.subject, push.group.as_deref());
        self.set_delivery_interest(consumer, bound);
    }

    fn set_delivery_interest(&mut self, name: &str, bound: bool) {
        let now = Instant::now();
        let account = Arc::clone(self.outbox.account());
        let view = View {
            store: &*self.store,
            router: account.router(),
        };
        let Some(rt) = self.consumers.map.get_mut(name) else {
            return;
        };
        if let Some(push) = rt.push.as_mut() {
            match (bound, push.unbound_since) {
                (true, _) => push.unbound_since = None,
                (false, None) => push.unbound_since = Some(now),
                (false, Some(_)) => {}
            }
        }
        debug!(consumer = name, bound, "push consumer interest");
        let mut out = std::mem::take(&mut self.consumers.actions);
        rt.core.set_delivery_interest(now, bound, &view, &mut out);
        self.execute_taken(name, out);
    }

    /// A flow-control answer arrived on `subject` for push consumer `consumer`.
    pub fn on_flow_control(&mut self, consumer: &str, subject: &[u8]) {
        let now = Instant::now();
        let account = Arc::clone(self.outbox.account());
        let view = View {
            store: &*self.store,
            router: account.router(),
        };
        let Some(rt) = self.consumers.map.get_mut(consumer) else {
            return;
        };
        let mut out = std::mem::take(&mut self.consumers.actions);
        rt.core.on_flow_control_reply(now, subject, &view, &mut out);
        self.execute_taken(consumer, out);
    }

    /// An ack arrived on `$JS.ACK.<stream>.<consumer>.…`.
    pub fn on_ack_msg(
        &mut self,
        consumer: &str,
        subject: &[u8],
        payload: &[u8],
        reply: Option<Bytes>,
    ) {
        let Some(ack) = AckSubject::parse(subject)
            .filter(|a| a.stream == self.config().name && a.consumer == consumer)
        else {
            debug!(consumer, "malformed ack subject ignored");
            return;
        };
        let tokens = ack.tokens;
        let kind = AckKind::parse(payload);
        let now = Instant::now();
        let account = Arc::clone(self.outbox.account());
        let view = View {
            store: &*self.store,
            router: account.router(),
        };
        let Some(rt) = self.consumers.map.get_mut(consumer) else {
            return;
        };
        rt.last_activity = now;
        rt.dirty = true;
        let mut out = std::mem::take(&mut self.consumers.actions);
        rt.core.on_ack(now, tokens, kind, reply, &view, &mut out);
        self.execute_taken(consumer, out);
    }

    /// A message was stored: the consumers whose filters match it may deliver it (the others
    /// have nothing new: their next match and their timers are as before).
    pub fn consumers_on_append(&mut self, seq: u64, subject: &[u8]) {
        if self.consumers.map.is_empty() {
            return;
        }
        let now = Instant::now();
        let account = Arc::clone(self.outbox.account());
        // Called for every stored message: no allocation unless a consumer has work to do.
        let mut names = std::mem::take(&mut self.consumers.fanout.reached);
        self.consumers.fanout.reaching(subject, &mut names);
        for name in &names {
            let view = View {
                store: &*self.store,
                router: account.router(),
            };
            let Some(rt) = self.consumers.map.get_mut(&**name) else {
                continue;
            };
            let mut out = std::mem::take(&mut self.consumers.actions);
            rt.core.on_stream_append(now, seq, subject, &view, &mut out);
            if out.is_empty() {
                self.consumers.actions = out;
            } else {
                self.execute_taken(name, out);
            }
        }
        names.clear();
        self.consumers.fanout.reached = names;
    }

    /// Rebuilds [`Fanout`] from the consumers' filters.
    pub(crate) fn rebuild_fanout(&mut self) {
        self.consumers.fanout = Fanout::of(
            self.consumers
                .map
                .iter()
                .map(|(name, rt)| (name.as_str(), rt.meta.config.filters())),
        );
    }

    /// A stream update from consumer limits `old` to `new`: refused (10069) when an existing
    /// consumer is above a newly set limit ([`jsproto::api::stream::check_consumer_limits_update`]).
    pub fn check_consumer_limits(
        &self,
        old: &jsproto::api::stream::ConsumerLimits,
        new: &jsproto::api::stream::ConsumerLimits,
    ) -> Result<(), ApiError> {
        jsproto::api::stream::check_consumer_limits_update(
            old,
            new,
            self.consumers
                .map
                .iter()
                .map(|(name, rt)| (name.as_str(), &rt.meta.config)),
        )
    }

    /// Messages left the stream (limits, purge, delete, expiry): consumers recount and forget
    /// pending entries that are gone.
    pub fn consumers_resync(&mut self) {
        if self.consumers.map.is_empty() {
            return;
        }
        let now = Instant::now();
        let account = Arc::clone(self.outbox.account());
        let names: Vec<String> = self.consumers.map.keys().cloned().collect();
        for name in names {
            let view = View {
                store: &*self.store,
                router: account.router(),
            };
            let rt = self.consumers.map.get_mut(&name).expect("listed");
            rt.dirty = true;
            let mut out = std::mem::take(&mut self.consumers.actions);
            rt.core.resync(now, &view, &mut out);
            self.execute_taken(&name, out);
        }
    }

    /// A purge removed messages. Consumers whose whole filter lies inside the purged subjects
    /// (`filter`, `None` = every subject) move past the purged range as nats-server's do:
    /// their read position jumps to the stream's first remaining message (for a purge by
    /// subject, the first one left on that subject), their ack floor to the seq before it, even
    /// when their own filter matches nothing there. Other consumers recount.
    pub fn consumers_on_purge(&mut self, filter: Option<&str>) {
        let now = Instant::now();
        let account = Arc::clone(self.outbox.account());
        // As nats-server's stream purge: every covered consumer moves to the stream's new
        // first seq, or for a purge by subject the first seq left on that subject
        // (`last_seq + 1` if none), whatever the consumer's own filter matches.
        let keep_from = {
            let view = View {
                store: &*self.store,
                router: account.router(),
            };
            match filter {
                None => view.first_seq(),
                Some(purged) => view
                    .next_matching(0, &SubjectFilter::new(&[purged.to_owned()]))
                    .map_or(view.last_seq() + 1, |m| m.seq),
            }
        };
        let names: Vec<String> = self.consumers.map.keys().cloned().collect();
        for name in names {
            let view = View {
                store: &*self.store,
                router: account.router(),
            };
            let rt = self.consumers.map.get_mut(&name).expect("listed");
            rt.dirty = true;
            let consumer_filter = rt.core.filter().clone();
            let covered = match filter {
                None | Some(">") => true,
                Some(purged) => {
                    !consumer_filter.is_all()
                        && consumer_filter
                            .subjects()
                            .iter()
                            .all(|f| jsproto::subject::is_subset(f.as_bytes(), purged.as_bytes()))
                }
            };
            let mut out = std::mem::take(&mut self.consumers.actions);
            if covered {
                rt.core.on_stream_purge(now, keep_from, &view, &mut out);
            } else {
                rt.core.resync(now, &view, &mut out);
            }
            self.execute_taken(&name, out);
        }
    }

    /// Fires due consumer deadlines and deletes consumers inactive past their threshold.
    pub fn consumers_on_timer(&mut self) {
        let now = Instant::now();
        let account = Arc::clone(self.outbox.account());
        let names: Vec<String> = self.consumers.map.keys().cloned().collect();
        for name in names {
            let rt = self.consumers.map.get_mut(&name).expect("listed");
            if rt.core.poll_timeout().is_some_and(|at| at <= now) {
                let view = View {
                    store: &*self.store,
                    router: account.router(),
                };
                let mut out = std::mem::take(&mut self.consumers.actions);
                rt.core.on_timeout(now, &view, &mut out);
                self.execute_taken(&name, out);
            }
            if self.inactive(&name, now) {
                debug!(stream = %self.config().name, consumer = %name, "inactive consumer removed");
                self.remove_consumer(&name);
            }
        }
        if self.consumers.map.values().any(|c| c.dirty)
            && self
                .consumers
                .map
                .values()
                .any(|c| now.duration_since(c.last_persist) >= PLAIN_ACK_PERSIST)
        {
            self.persist_consumers(false);
        }
    }

    /// Whether consumer `name` has been inactive past its `inactive_threshold` (nats-server's
    /// rule, consumer-semantics.md §12): no pull request, ack or delivery for the threshold,
    /// no waiting request whose requester still listens, and no delivery young enough that its
    /// ack could still come (last delivery + ack wait + threshold). When something keeps it,
    /// the next check is pushed out so the thread does not spin on a past deadline. A push
    /// consumer is inactive once its deliver subject has had no interest for the threshold
    /// (nats-server's `deleteNotActive` for push mode), whatever it delivered.
    fn inactive(&mut self, name: &str, now: Instant) -> bool {
        let account = Arc::clone(self.outbox.account());
        let rt = self.consumers.map.get_mut(name).expect("caller checked");
        let Some(threshold) = rt.inactive_threshold else {
            return false;
        };
        if let Some(push) = &rt.push {
            // nats-server's rule for push consumers: no interest for the whole threshold.
            return push.unbound_since.is_some_and(|t| now >= t + threshold);
        }
        let due = rt.next_inactivity_check.max(rt.last_activity + threshold);
        if now < due {
            return false;
        }
        rt.core
            .prune_waiting(|reply| account.router().has_interest(reply));
        let info = rt.core.info();
        let ack_wait = rt.meta.config.effective_ack_wait();
        let deliveries_settled = info.num_ack_pending == 0
            || info
                .last_delivery
                .is_none_or(|t| now.duration_since(t) >= ack_wait + threshold);
        if info.num_waiting == 0 && deliveries_settled {
            return true;
        }
        rt.next_inactivity_check = now + threshold.min(Duration::from_secs(1));
        false
    }

    /// The earliest instant a consumer needs the thread: a core deadline, an inactivity
    /// check, or a pending state write.
    pub fn consumers_deadline(&self) -> Option<Instant> {
        self.consumers
            .map
            .values()
            .flat_map(|c| {
                let persist = c.dirty.then(|| c.last_persist + PLAIN_ACK_PERSIST);
                let inactive = c.inactive_threshold.and_then(|t| match &c.push {
                    Some(push) => push.unbound_since.map(|since| since + t),
                    None => Some(c.next_inactivity_check.max(c.last_activity + t)),
                });
                [c.core.poll_timeout(), persist, inactive]
            })
            .flatten()
            .min()
    }

    /// Carries out `out` (taken from the scratch vector) and gives the vector back.
    pub(super) fn execute_taken(&mut self, name: &str, mut out: Vec<Action>) {
        self.execute(name, &mut out);
        self.consumers.actions = out;
        for range in std::mem::take(&mut self.consumers.acked) {
            self.on_acked(range);
        }
    }

    /// Carries out a consumer's actions (draining `actions`).
    fn execute(&mut self, name: &str, actions: &mut Vec<Action>) {
        let mut delivered_any = false;
        // Looked up once per batch of actions, only when something is delivered and some
        // consumer of the stream has `headers_only`.
        let mut headers_only: Option<bool> = (!self.consumers.any_headers_only).then_some(false);
        for action in actions.drain(..) {
            match action {
                Action::Deliver {
                    reply_to,
                    ack,
                    pin_id,
                } => {
                    let msg = match self.store.load(ack.stream_seq) {
                        Ok(Some(m)) => m,
                        other => {
                            warn!(stream = %self.config().name, seq = ack.stream_seq, ?other, "delivery of a missing message skipped");
                            continue;
                        }
                    };
                    let mut reply =
                        String::with_capacity(ack.v1_len(self.config().name.len(), name.len()));
                    let _ = ack.write_v1(&self.config().name, name, &mut reply);
                    let subject = Bytes::copy_from_slice(msg.subject.as_bytes());
                    let headers_only = *headers_only.get_or_insert_with(|| {
                        self.consumers
                            .map
                            .get(name)
                            .is_some_and(|c| c.meta.config.headers_only)
                    });
                    // Headers added to the stored block: the pin id (pinned_client) and, for
                    // headers_only, the payload's size (the payload itself is left out).
                    let mut block = msg.headers.clone();
                    if let Some(id) = pin_id {
                        block = Some(Bytes::from(jsproto::headers::append_to_block(
                            block.as_deref(),
                            jsproto::headers::PIN_ID,
                            &id,
                        )));
                    }
                    let payload = if headers_only {
                        block = Some(headers_only_block(block.as_deref(), msg.payload.len()));
                        Bytes::new()
                    } else {
                        msg.payload.clone()
                    };
                    self.outbox.publish_with_reply(
                        &reply_to,
                        &subject,
                        &Bytes::from(reply),
                        block.as_ref(),
                        &payload,
                    );
                    delivered_any = true;
                }
                Action::Status { reply_to, status } => {
                    let block = Bytes::from(status.header_block());
                    self.outbox.publish(&reply_to, Some(&block), &Bytes::new());
                }
                Action::PushStatus {
                    deliver_subject,
                    status,
                } => {
                    let block = Bytes::from(status.header_block());
                    match status.reply() {
                        Some(reply) => self.outbox.publish_with_reply(
                            &deliver_subject,
                            &deliver_subject,
                            reply,
                            Some(&block),
                            &Bytes::new(),
                        ),
                        None => self
                            .outbox
                            .publish(&deliver_subject, Some(&block), &Bytes::new()),
                    }
                }
                Action::AckReply { reply_to } => {
                    // Held until the state holding the ack is durable (see the module doc).
                    self.consumers.held_ack_replies.push(reply_to);
                    self.consumers.needs_fsync = true;
                }
                Action::Acked { stream_seqs } => self.consumers.acked.push(stream_seqs),
                Action::Advisory(advisory) => {
                    self.dead_letter(name, &advisory);
                    self.advise(name, advisory);
                }
            }
        }
        if delivered_any {
            if let Some(rt) = self.consumers.map.get_mut(name) {
                rt.dirty = true;
                rt.last_activity = Instant::now();
            }
        }
    }

    /// Work-queue streams drop a message once it is acknowledged; interest streams once every
    /// consumer whose filter matches it is done with it (nats-server's retention policies).
    fn on_acked(&mut self, seqs: std::ops::RangeInclusive<u64>) {
        use jsproto::api::stream::RetentionPolicy;
        let (first, last) = (*seqs.start(), *seqs.end());
        match self.config().retention {
            RetentionPolicy::Limits => {}
            RetentionPolicy::WorkQueue => {
                let mut seq = first;
                while let Ok(Some(m)) = self.store.load_next(">", seq) {
                    if m.seq > last {
                        break;
                    }
                    seq = m.seq + 1;
                    let _ = self.store.remove(m.seq, false);
                    self.store_dirty = true;
                }
            }
            RetentionPolicy::Interest => {
                let mut seq = first;
                while let Ok(Some(m)) = self.store.load_next(">", seq) {
                    if m.seq > last {
                        break;
                    }
                    seq = m.seq + 1;
                    if self.interest_done(m.seq, m.subject.as_bytes()) {
                        let _ = self.store.remove(m.seq, false);
                        self.store_dirty = true;
                    }
                }
            }
        }
    }

    /// Interest retention: no consumer whose filter matches `subject` still needs `seq`.
    pub fn interest_done(&self, seq: u64, subject: &[u8]) -> bool {
        self.consumers
            .map
            .values()
            .filter(|c| c.core.filter().matches(subject))
            .all(|c| c.core.is_acked(seq))
    }

    /// Retention after the set of consumers or their filters changed, or after a restart:
    /// drops every message retention says is done. Interest: no consumer whose filter matches
    /// still needs it. Work queue: a consumer whose filter matches acknowledged it (a removal
    /// that was not written before a crash is redone here, so an acked order never comes
    /// back). Limits: nothing. O(messages).
    pub fn retention_sweep(&mut self) {
        use jsproto::api::stream::RetentionPolicy;
        let retention = self.config().retention;
        if retention == RetentionPolicy::Limits {
            return;
        }
        let mut seq = 0;
        let mut gone = Vec::new();
        while let Ok(Some(m)) = self.store.load_next(">", seq) {
            seq = m.seq + 1;
            let subject = m.subject.as_bytes();
            let done = match retention {
                RetentionPolicy::Interest => self.interest_done(m.seq, subject),
                _ => self
                    .consumers
                    .map
                    .values()
                    .any(|c| c.core.filter().matches(subject) && c.core.is_acked(m.seq)),
            };
            if done {
                gone.push(m.seq);
            }
        }
        for seq in gone {
            let _ = self.store.remove(seq, false);
            self.store_dirty = true;
        }
    }

    /// A stream update changed retention from `old` to the current one. Switching to interest
    /// removes at once what no consumer needs, as nats-server 2.15 does: without consumers every
    /// message; with consumers each message that some consumer's filter matches and every
    /// matching consumer is done with ([`StreamEngine::interest_done`]). A message no filter
    /// matches stays while the stream has consumers (nats-server keeps it too). Other switches
    /// remove nothing.
    pub fn on_retention_change(&mut self, old: jsproto::api::stream::RetentionPolicy) {
        use jsproto::api::stream::RetentionPolicy;
        if old == RetentionPolicy::Interest || self.config().retention != RetentionPolicy::Interest
        {
            return;
        }
        let mut seq = 0;
        let mut gone = Vec::new();
        while let Ok(Some(m)) = self.store.load_next(">", seq) {
            seq = m.seq + 1;
            let subject = m.subject.as_bytes();
            let wanted = self
                .consumers
                .map
                .values()
                .any(|c| c.core.filter().matches(subject));
            if (self.consumers.map.is_empty() || wanted) && self.interest_done(m.seq, subject) {
                gone.push(m.seq);
            }
        }
        for seq in gone {
            let _ = self.store.remove(seq, false);
            self.store_dirty = true;
        }
        self.consumers_resync();
    }

    /// Publishes a consumer's message event (`MAX_DELIVERIES`, `MSG_TERMINATED`, `MSG_NAKED`)
    /// if anyone listens ([`super::advisory::publish`]).
    /// The dead-letter path ([`jsproto::consumer::dead_letter`]): a message `consumer` gave
    /// up on is republished, before its advisory, to the subject its metadata names.
    fn dead_letter(&mut self, consumer: &str, advisory: &Advisory) {
        use jsproto::consumer::dead_letter::{GivenUp, METADATA_KEY};
        let Some(given_up) = GivenUp::of(advisory) else {
            return;
        };
        let Some(to) = self
            .consumers
            .map
            .get(consumer)
            .and_then(|rt| rt.meta.config.metadata.get(METADATA_KEY))
            .filter(|s| jsproto::subject::is_valid_publish_subject(s.as_bytes()))
            .map(|s| Bytes::copy_from_slice(s.as_bytes()))
        else {
            return;
        };
        let msg = match self.store.load(given_up.stream_seq) {
            Ok(Some(m)) => m,
            other => {
                warn!(stream = %self.config().name, consumer, seq = given_up.stream_seq, ?other, "dead letter of a missing message skipped");
                return;
            }
        };
        let headers = Bytes::from(given_up.header_block(
            msg.headers.as_deref(),
            &self.config().name,
            &msg.subject,
            consumer,
        ));
        self.outbox.publish(&to, Some(&headers), &msg.payload);
    }

    fn advise(&mut self, consumer: &str, advisory: Advisory) {
        super::advisory::publish(
            &mut self.outbox,
            JsAdvisory::Message {
                stream: &self.core.config().name,
                consumer,
                advisory: &advisory,
            },
        );
    }

    /// Publishes `CONSUMER.CREATED` / `CONSUMER.DELETED` for `consumer` if anyone listens.
    pub fn advise_consumer(&mut self, action: ConsumerAction, consumer: &str) {
        super::advisory::publish(
            &mut self.outbox,
            JsAdvisory::Consumer {
                action,
                stream: &self.core.config().name,
                consumer,
            },
        );
    }

    /// Writes the state of dirty consumers (file streams); with `fsync`, durably. Then sends
    /// the ack confirmations held for it.
    pub fn persist_consumers(&mut self, fsync: bool) {
        let now = Instant::now();
        let unix = self.consumers.unix_at(now);
        let fsync = fsync || self.consumers.needs_fsync;
        let mut ok = true;
        if let Some(dir) = self.dir.clone() {
            for (name, rt) in self.consumers.map.iter_mut().filter(|(_, c)| c.dirty) {
                if rt.meta.config.mem_storage {
                    rt.dirty = false;
                    rt.last_persist = now;
                    continue;
                }
                let state = rt.core.snapshot(now, unix);
                let path = consumer_dir(&dir, name).join("state.json");
                let bytes = serde_json::to_vec(&state).expect("state serialises");
                match super::write_atomically(&path, &bytes, fsync) {
                    Ok(()) => {
                        rt.dirty = false;
                        rt.last_persist = now;
                    }
                    Err(err) => {
                        ok = false;
                        // Retried after PLAIN_ACK_PERSIST (or with the next confirmed ack),
                        // not at once: a failing disk must not make the thread spin.
                        rt.last_persist = now;
                        warn!(consumer = %name, error = %err, "writing consumer state failed");
                    }
                }
            }
        } else {
            for rt in self.consumers.map.values_mut() {
                rt.dirty = false;
                rt.last_persist = now;
            }
        }
        if ok {
            self.consumers.needs_fsync = false;
            for reply in std::mem::take(&mut self.consumers.held_ack_replies) {
                self.outbox.publish(&reply, None, &Bytes::new());
            }
        }
    }

    /// The server is stopping: waiting requests get `409 Server Shutdown`, state is written.
    pub fn consumers_shutdown(&mut self) {
        let names: Vec<String> = self.consumers.map.keys().cloned().collect();
        for name in names {
            let rt = self.consumers.map.get_mut(&name).expect("listed");
            rt.dirty = true;
            let mut out = std::mem::take(&mut self.consumers.actions);
            rt.core.shutdown(&mut out);
            self.execute_taken(&name, out);
        }
        self.persist_consumers(true);
    }

    /// `CONSUMER.CREATE` / `DURABLE.CREATE` on this stream, after the request checks: creates
    /// the consumer or updates the existing one, and answers with its info.
    pub fn api_consumer_create(&mut self, create: ConsumerCreate, reply: Option<Bytes>) {
        let body = match self.try_consumer_create(&create) {
            Ok(info) => encode_ok(&ConsumerCreateResponse { info }),
            Err(err) => encode_error::<ConsumerCreateResponse>(&err),
        };
        self.respond(reply.as_ref(), body);
    }

    fn try_consumer_create(&mut self, create: &ConsumerCreate) -> Result<ConsumerInfo, ApiError> {
        let existing = create
            .name
            .as_ref()
            .filter(|n| self.consumers.map.contains_key(*n))
            .cloned();
        if let Some(name) = existing {
            let others: Vec<&ApiConsumerConfig> = self
                .consumers
                .map
                .iter()
                .filter(|(n, _)| **n != name)
                .map(|(_, c)| &c.meta.config)
                .collect();
            let current = &self.consumers.map[&name].meta.config;
            let config = create.check_existing(current, self.config(), &others)?;
            // As nats-server: a push consumer's deliver subject does not move while anyone
            // listens on the old one (10013).
            if !current.deliver_subject.is_empty()
                && config.deliver_subject != current.deliver_subject
                && self
                    .outbox
                    .router()
                    .has_interest(current.deliver_subject.as_bytes())
            {
                return Err(ApiError::consumer_name_exist());
            }
            self.update_consumer(&name, config)?;
            self.retention_sweep();
            return self
                .consumer_info(&name)
                .ok_or_else(ApiError::consumer_not_found);
        }
        let others: Vec<&ApiConsumerConfig> = self
            .consumers
            .map
            .values()
            .map(|c| &c.meta.config)
            .collect();
        // The account's max_consumers caps each of its streams, as nats-server applies it.
        let account_max = self
            .outbox
            .account()
            .jetstream_limits()
            .map_or(-1, |l| l.max_consumers);
        let limitable = others.iter().filter(|o| !o.sourcing).count() as i64;
        if account_max > 0 && limitable >= account_max {
            return Err(ApiError::maximum_consumers_limit());
        }
        let (name, config) = create.check_new(self.config(), &others, generate_name)?;
        let meta = ConsumerMeta {
            name: name.clone(),
            durable: config.is_durable(),
            created: timestamp(unix_now()),
            config: config.clone(),
        };
        let threshold = (!config.inactive_threshold.is_zero()).then_some(config.inactive_threshold);
        self.add_consumer(
            &name,
            config.to_core(),
            config.start_policy(),
            meta,
            threshold,
            None,
        )
        .map_err(ApiError::consumer_create)?;
        debug!(stream = %self.config().name, consumer = %name, "consumer created");
        // Only for a new consumer: a repeated create or an update publishes nothing, as on
        // nats-server.
        self.advise_consumer(ConsumerAction::Create, &name);
        if self.consumer_paused(&name) {
            self.advise_pause(&name);
        }
        self.consumer_info(&name)
            .ok_or_else(ApiError::consumer_not_found)
    }

    /// A push consumer's rate-limit bucket holds the stream's `max_msg_size`, else the
    /// server's `max_payload` bytes, as nats-server's `setRateLimit`.
    fn with_rate_burst(
        &self,
        mut config: jsproto::consumer::ConsumerConfig,
    ) -> jsproto::consumer::ConsumerConfig {
        if let Some(rate) = config.rate_limit.as_mut() {
            let max_msg = self.config().max_msg_size;
            rate.burst = if max_msg > 0 {
                u64::from(max_msg.unsigned_abs())
            } else {
                self.outbox.server().options().max_payload as u64
            };
        }
        config
    }

    fn update_consumer(&mut self, name: &str, config: ApiConsumerConfig) -> Result<(), ApiError> {
        let now = Instant::now();
        let core = self.with_rate_burst(core_config(name, &config));
        let account = Arc::clone(self.outbox.account());
        let view = View {
            store: &*self.store,
            router: account.router(),
        };
        let rt = self
            .consumers
            .map
            .get_mut(name)
            .expect("checked by the caller");
        let mut out = std::mem::take(&mut self.consumers.actions);
        let result = rt.core.update_config(now, core, &view, &mut out);
        let mut rewatch = None;
        if result.is_ok() {
            rt.meta.config = config.clone();
            rt.inactive_threshold =
                (!config.inactive_threshold.is_zero()).then_some(config.inactive_threshold);
            rt.dirty = true;
            if let Some(push) = rt.push.as_mut() {
                let group = (!config.deliver_group.is_empty())
                    .then(|| Bytes::copy_from_slice(config.deliver_group.as_bytes()));
                if push.subject != config.deliver_subject.as_bytes() || push.group != group {
                    let old = (push.subject.clone(), push.group.clone());
                    push.subject = Bytes::copy_from_slice(config.deliver_subject.as_bytes());
                    push.group = group;
                    rewatch = Some((old, Arc::clone(&push.watcher)));
                }
            }
        }
        self.execute_taken(name, out);
        result.map_err(ApiError::consumer_create)?;
        self.rebuild_fanout();
        self.note_headers_only();
        if let Some(((subject, group), watcher)) = rewatch {
            account
                .router()
                .unwatch_interest(&subject, group.as_deref(), &watcher);
            self.watch_deliver_subject(name);
        }
        self.write_consumer_meta(name)
            .map_err(ApiError::consumer_create)?;
        // The stored pause carries over an update; a paused consumer announces it again,
        // as on nats-server.
        self.apply_pause(name);
        if self.consumer_paused(name) {
            self.advise_pause(name);
        }
        Ok(())
    }

    /// Writes consumer `name`'s `meta.json` durably (file streams; nothing for memory ones).
    ///
    /// # Errors
    /// The file system's error.
    pub(super) fn write_consumer_meta(&self, name: &str) -> std::io::Result<()> {
        let (Some(dir), Some(rt)) = (&self.dir, self.consumers.map.get(name)) else {
            return Ok(());
        };
        if rt.meta.config.mem_storage {
            return Ok(());
        }
        super::write_atomically(
            &consumer_dir(dir, name).join("meta.json"),
            &serde_json::to_vec(&rt.meta).expect("meta serialises"),
            true,
        )
    }

    /// The consumer's info as CONSUMER.INFO/CREATE answer it.
    pub fn consumer_info(&mut self, name: &str) -> Option<ConsumerInfo> {
        let (state, delivered, acked) = self.consumer_state(name)?;
        let rt = &self.consumers.map[name];
        let times = ConsumerTimes {
            created_unix_ns: rt.meta.created.unix_nanos().unwrap_or(0),
            last_delivery_unix_ns: delivered,
            last_ack_unix_ns: acked,
            now_unix_ns: unix_now(),
        };
        let config = rt.meta.config.with_dynamic_metadata(NATS_VERSION);
        let pin = rt.core.pin().map(|(id, since)| (id.to_owned(), since));
        let mut info = ConsumerInfo::from_state(&self.config().name, name, config, &state, times);
        info.push_bound = rt.core.push_bound();
        if let (Some((id, since)), Some(group)) = (pin, info.priority_groups.first_mut()) {
            // nats-server has one pin per consumer, reported on its first group.
            group.pinned_client_id = id;
            group.pinned_ts = Timestamp::from_unix_nanos(self.consumers.unix_at(since));
        }
        Some(info)
    }

    /// `CONSUMER.INFO.<stream>.<consumer>`.
    pub fn api_consumer_info(&mut self, name: &str, reply: Option<Bytes>) {
        let body = match self.consumer_info(name) {
            Some(info) => encode_ok(&ConsumerInfoResponse { info }),
            None => encode_error::<ConsumerInfoResponse>(&ApiError::consumer_not_found()),
        };
        self.respond(reply.as_ref(), body);
    }

    /// `CONSUMER.DELETE.<stream>.<consumer>`.
    pub fn api_consumer_delete(&mut self, name: &str, reply: Option<Bytes>) {
        let body = if self.remove_consumer(name) {
            debug!(stream = %self.config().name, consumer = %name, "consumer deleted");
            encode_ok(&ConsumerDeleteResponse { success: true })
        } else {
            encode_error::<ConsumerDeleteResponse>(&ApiError::consumer_not_found())
        };
        self.respond(reply.as_ref(), body);
    }

    /// `CONSUMER.NAMES.<stream>` (sorted names) or, with `list`, `CONSUMER.LIST.<stream>`.
    pub fn api_consumer_names(&mut self, offset: i64, list: bool, reply: Option<Bytes>) {
        let names: Vec<String> = self.consumers.map.keys().cloned().collect();
        let total = names.len();
        let offset = usize::try_from(offset.max(0))
            .unwrap_or(usize::MAX)
            .min(total);
        let body = if list {
            let consumers = names
                .iter()
                .skip(offset)
                .take(LIST_LIMIT)
                .filter_map(|n| self.consumer_info(n))
                .collect();
            encode_ok(&ConsumerListResponse {
                total,
                offset,
                limit: LIST_LIMIT,
                consumers,
                ..ConsumerListResponse::default()
            })
        } else {
            let consumers = names.into_iter().skip(offset).take(NAMES_LIMIT).collect();
            encode_ok(&ConsumerNamesResponse {
                total,
                offset,
                limit: NAMES_LIMIT,
                consumers,
            })
        };
        self.respond(reply.as_ref(), body);
    }

    /// Reopens the consumers stored under the stream's directory (`obs/*`).
    pub fn recover_consumers(&mut self) {
        let Some(dir) = self.dir.clone() else { return };
        let Ok(entries) = std::fs::read_dir(dir.join("obs")) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let meta: ConsumerMeta = match std::fs::read(path.join("meta.json"))
                .map_err(anyhow::Error::from)
                .and_then(|b| serde_json::from_slice(&b).map_err(anyhow::Error::from))
            {
                Ok(meta) => meta,
                Err(err) => {
                    warn!(path = %path.display(), error = %err, "skipping unreadable consumer");
                    continue;
                }
            };
            if meta.config.mem_storage {
                // Written by an older jsserver: a memory consumer does not outlive a restart.
                let _ = std::fs::remove_dir_all(&path);
                continue;
            }
            let state: Option<PersistedState> = std::fs::read(path.join("state.json"))
                .ok()
                .and_then(|b| serde_json::from_slice(&b).ok());
            let name = meta.name.clone();
            let config = meta.config.clone();
            let threshold =
                (!config.inactive_threshold.is_zero()).then_some(config.inactive_threshold);
            let result = self.add_consumer(
                &name,
                config.to_core(),
                config.start_policy(),
                meta,
                threshold,
                Some(state.unwrap_or_default()),
            );
            if let Err(err) = result {
                warn!(stream = %self.config().name, consumer = %name, error = %err, "could not recover consumer");
            }
        }
    }

    /// Whether ack confirmations wait for a durable write.
    pub fn consumers_need_commit(&self) -> bool {
        self.consumers.needs_fsync
    }
}

/// The header block of a `headers_only` delivery: the stored headers (or a bare `NATS/1.0`
/// line) with `Nats-Msg-Size: <payload bytes>` added last, as nats-server's
/// `convertToHeadersOnly`.
fn headers_only_block(stored: Option<&[u8]>, payload_len: usize) -> Bytes {
    Bytes::from(jsproto::headers::append_to_block(
        stored,
        jsproto::headers::MSG_SIZE,
        &payload_len.to_string(),
    ))
}

/// The state machine's config for consumer `name`: the API config's
/// ([`ApiConsumerConfig::to_core`]), named `name` even when the stored config has no name (a
/// legacy ephemeral), since the core builds ack and flow-control subjects from it.
fn core_config(name: &str, config: &ApiConsumerConfig) -> jsproto::consumer::ConsumerConfig {
    named(config.to_core(), name)
}

fn named(
    mut config: jsproto::consumer::ConsumerConfig,
    name: &str,
) -> jsproto::consumer::ConsumerConfig {
    if config.name.is_empty() {
        config.name = name.to_owned();
    }
    config
}

/// A name for a consumer created without one: 8 random characters from `[0-9A-Za-z]`, as
/// nats-server generates.
fn generate_name() -> String {
    use rand::Rng;
    const ALPHABET: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let mut rng = rand::rng();
    (0..8)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect()
}

/// Which consumers a stored message can reach: those without a filter, and those whose
/// filters match its subject (found in a subject index, so a message costs the consumers it
/// reaches, not every consumer of the stream).
#[derive(Default)]
struct Fanout {
    /// Consumers with filters, by each filter subject.
    filtered: jsproto::subject::SubjectIndex<Arc<str>>,
    /// Consumers without a filter, by name.
    unfiltered: Vec<Arc<str>>,
    /// Some consumer has a filter.
    any_filtered: bool,
    /// Scratch for index lookups.
    matches: jsproto::subject::Matches<Arc<str>>,
    /// Scratch for [`Fanout::reaching`]'s caller (kept to reuse its allocation).
    reached: Vec<Arc<str>>,
}

impl Fanout {
    /// The fanout of consumers given as (name, filters).
    fn of<'a>(consumers: impl Iterator<Item = (&'a str, Vec<String>)>) -> Fanout {
        let mut f = Fanout::default();
        for (name, filters) in consumers {
            let name: Arc<str> = Arc::from(name);
            if filters.is_empty() {
                f.unfiltered.push(name);
                continue;
            }
            for filter in filters {
                // Filters were validated when the consumer was made.
                if f.filtered
                    .insert(filter.as_bytes(), None, Arc::clone(&name))
                    .is_ok()
                {
                    f.any_filtered = true;
                }
            }
        }
        f
    }

    /// The consumers a message on `subject` reaches, into `out`, in name order, once each.
    fn reaching(&mut self, subject: &[u8], out: &mut Vec<Arc<str>>) {
        out.extend(self.unfiltered.iter().cloned());
        if !self.any_filtered {
            return;
        }
        self.filtered.find(subject, &mut self.matches);
        out.extend(self.matches.plain().iter().cloned());
        self.matches.clear();
        if out.len() > 1 {
            out.sort_unstable();
            out.dedup();
        }
    }
}
