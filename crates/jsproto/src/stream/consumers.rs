//! The consumers of one stream as one state machine: [`ConsumerSet`].
//!
//! Each consumer is a [`Consumer`]; the set holds them by name, with what the stream keeps
//! beside each (its API config, creation time, inactivity clock, whether its state changed
//! since it was last written) and the rules that span consumers:
//!
//! | rule | where |
//! | --- | --- |
//! | a stored message reaches only the consumers whose filters match it | [`ConsumerSet::on_append`] (a subject index of the filters) |
//! | a purge moves covered consumers past the purged range, the others recount | [`ConsumerSet::on_purge`] |
//! | work-queue and interest retention remove what was acked | [`ConsumerSet::apply_acked`], [`ConsumerSet::retention_sweep`], [`ConsumerSet::on_retention_change`] |
//! | an ephemeral (`inactive_threshold`) goes after its inactivity | [`ConsumerSet::on_timer`] |
//! | `pause_until` holds deliveries | [`ConsumerSet::apply_pause`] |
//! | create and update checks, `consumer_limits` against existing consumers | [`ConsumerSet::check_update`], [`ConsumerSet::check_consumer_limits`] |
//!
//! Nothing here does IO or reads a clock. Every call takes `now` (a monotonic [`Instant`])
//! and, where wall-clock time is reported, Unix nanoseconds; the stream is read through a
//! [`StreamView`] (the server passes [`super::view::StoreView`] over its store and router).
//! What the consumers ask for (deliveries, statuses, ack confirmations, advisories) is queued
//! as `(consumer, Action)` pairs, in order, for the caller to carry out
//! ([`ConsumerSet::take_output`]); what they acknowledged is kept apart, and the caller
//! applies retention to it after the output ([`ConsumerSet::apply_acked`]), so that every
//! delivery loads its message before retention removes it. Subscriptions, files
//! and the router's interest notifications stay the caller's.

use std::collections::BTreeMap;
use std::ops::RangeInclusive;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::api::consumer::{
    ConsumerConfig as ApiConsumerConfig, ConsumerCreate, ConsumerInfo, ConsumerTimes,
};
use crate::api::stream::{ConsumerLimits, RetentionPolicy, StreamConfig};
use crate::api::time::Timestamp;
use crate::api::ApiError;
use crate::consumer::{
    AckKind, AckSubject, Action, Consumer, ConsumerConfig, ConsumerError, ConsumerState,
    DeliverPolicy, PersistedState, StreamView, SubjectFilter,
};
use crate::subject::{Matches, SubjectIndex};

use super::core::StreamEvent;
use super::store::MsgStore;
use super::view::StoreView;

/// Longest time a consumer's changed state waits before it is due to be written
/// ([`ConsumerSet::persist_due`]): a crash loses at most this much of plain acks (they are
/// redelivered); confirmed acks are written before they are confirmed.
pub const PLAIN_ACK_PERSIST: Duration = Duration::from_millis(50);

/// What is kept on disk for a consumer (`obs/<name>/meta.json` in the server's store).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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

/// One consumer of the stream and what the stream keeps beside it.
#[derive(Debug)]
pub struct ConsumerEntry {
    /// The state machine.
    pub core: Consumer,
    /// Config, creation time and durability, as persisted.
    pub meta: ConsumerMeta,
    /// Its name, shared with the output queue.
    name: Arc<str>,
    /// Inactivity threshold after which the consumer goes (ephemerals by default).
    inactive_threshold: Option<Duration>,
    /// Last pull request, ack or delivery.
    last_activity: Instant,
    /// Not before this instant is inactivity checked again (moves on while something other
    /// than activity keeps the consumer, so a kept consumer is not checked in a loop).
    next_inactivity_check: Instant,
    /// Push consumers: since when the deliver subject has had no interest (`Some(None)`
    /// while bound); `None` for pull consumers.
    unbound_since: Option<Option<Instant>>,
    /// State changed since it was last written.
    dirty: bool,
    /// When the state was last written (or a write was tried).
    last_persist: Instant,
}

/// A consumer's inactivity and persistence clocks as the stream keeps them beside it ([`ConsumerEntry`]):
/// part of a replica's snapshot ([`crate::stream::Stream::snapshot`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ActivityClocks {
    /// Last pull request, ack or delivery.
    pub last_activity: Instant,
    /// Not before this is inactivity checked again.
    pub next_inactivity_check: Instant,
    /// Push consumers: since when the deliver subject has had no interest (`Some(None)`
    /// while bound); `None` for pull consumers.
    pub unbound_since: Option<Option<Instant>>,
    /// Its state changed since it was last written.
    pub dirty: bool,
    /// When its state was last written (or a write was tried).
    pub last_persist: Instant,
}

impl ConsumerEntry {
    /// Whether its state changed since [`ConsumerEntry::mark_persisted`].
    pub fn is_dirty(&self) -> bool {
        self.dirty
    }

    /// Its state changed (the caller changed it through [`ConsumerEntry::core`]).
    pub fn mark_dirty(&mut self) {
        self.dirty = true;
    }

    /// Its state was written at `now` (`written`), or a write was tried and failed: the next
    /// try waits [`PLAIN_ACK_PERSIST`] either way, so a failing disk is not retried in a loop.
    pub fn mark_persisted(&mut self, now: Instant, written: bool) {
        if written {
            self.dirty = false;
        }
        self.last_persist = now;
    }

    /// Its inactivity clocks.
    pub fn clocks(&self) -> ActivityClocks {
        ActivityClocks {
            last_activity: self.last_activity,
            next_inactivity_check: self.next_inactivity_check,
            unbound_since: self.unbound_since,
            dirty: self.dirty,
            last_persist: self.last_persist,
        }
    }

    /// Its inactivity threshold, if it has one.
    pub fn inactive_threshold(&self) -> Option<Duration> {
        self.inactive_threshold
    }
}

/// The consumers of a stream; see the module doc.
#[derive(Debug, Default)]
pub struct ConsumerSet {
    map: BTreeMap<String, ConsumerEntry>,
    /// Which consumers a stored message can reach: rebuilt when a consumer comes, goes or
    /// changes its filters.
    fanout: Fanout,
    /// Some consumer has `headers_only`.
    any_headers_only: bool,
    /// What the consumers asked for, in order, by consumer.
    out: Vec<(Arc<str>, Action)>,
    /// Scratch for one consumer's actions.
    scratch: Vec<Action>,
    /// Acked ranges ([`Action::Acked`]) not yet handed to retention
    /// ([`ConsumerSet::apply_acked`]).
    acked: Vec<(Arc<str>, RangeInclusive<u64>)>,
    /// Whether acked ranges are kept for retention (not on a limits stream, where nothing
    /// leaves by acks): [`ConsumerSet::keep_acked`].
    keep_acked: bool,
    /// Wall clock at a fixed instant, to turn `Instant`s into Unix times (the first time a
    /// call passed both).
    epoch: Option<(Instant, u64)>,
}

impl ConsumerSet {
    /// No consumers.
    pub fn new() -> Self {
        ConsumerSet::default()
    }

    /// How many consumers the stream has.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether the stream has no consumers.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Whether consumer `name` exists.
    pub fn contains(&self, name: &str) -> bool {
        self.map.contains_key(name)
    }

    /// Consumer `name`.
    pub fn get(&self, name: &str) -> Option<&ConsumerEntry> {
        self.map.get(name)
    }

    /// Consumer `name`, to change (mark it dirty after changing its state).
    pub fn get_mut(&mut self, name: &str) -> Option<&mut ConsumerEntry> {
        self.map.get_mut(name)
    }

    /// The consumers, by name in order.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &ConsumerEntry)> {
        self.map.iter()
    }

    /// The consumers, by name in order, to change.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (&String, &mut ConsumerEntry)> {
        self.map.iter_mut()
    }

    /// The names, in order.
    pub fn names(&self) -> Vec<String> {
        self.map.keys().cloned().collect()
    }

    /// Whether some consumer has `headers_only` (only then must a delivery look its consumer
    /// up).
    pub fn any_headers_only(&self) -> bool {
        self.any_headers_only
    }

    /// Takes what the consumers asked for since the last call, in order. Give the vector back
    /// with [`ConsumerSet::give_back`] to reuse its allocation.
    pub fn take_output(&mut self) -> Vec<(Arc<str>, Action)> {
        std::mem::take(&mut self.out)
    }

    /// Returns a drained output vector for reuse.
    pub fn give_back(&mut self, mut out: Vec<(Arc<str>, Action)>) {
        if self.out.is_empty() {
            out.clear();
            self.out = out;
        }
    }

    /// Whether what the consumers acknowledge is kept for retention
    /// ([`ConsumerSet::apply_acked`]): on for work-queue and interest streams, off for limits
    /// streams, where acks remove nothing (the default).
    pub fn keep_acked(&mut self, on: bool) {
        self.keep_acked = on;
        if !on {
            self.acked.clear();
        }
    }

    /// Whether acked ranges wait for [`ConsumerSet::apply_acked`].
    pub fn has_acked(&self) -> bool {
        !self.acked.is_empty()
    }

    /// Whether output is waiting.
    pub fn has_output(&self) -> bool {
        !self.out.is_empty()
    }

    /// Fixes the wall clock the consumers turn `Instant`s into Unix times with: `unix` (Unix
    /// ns) at `at`, from now on (otherwise the first pair a call passes). A replica applying
    /// a log fixes it to its stream's epoch ([`crate::stream::Epoch`]), so every replica
    /// converts alike whenever it started.
    pub fn fix_epoch(&mut self, at: Instant, unix: u64) {
        self.epoch = Some((at, unix));
    }

    /// Unix nanoseconds at `at`, from the first (instant, Unix time) pair a call passed
    /// (`now`/`unix` here if none yet).
    pub fn unix_at(&mut self, at: Instant, now: Instant, unix: u64) -> u64 {
        let (i, u) = *self.epoch.get_or_insert((now, unix));
        if at >= i {
            u + (at - i).as_nanos() as u64
        } else {
            u.saturating_sub((i - at).as_nanos() as u64)
        }
    }

    /// Adds consumer `name` (new, or recovered with `state`), built against `stream` at `now`
    /// (`unix`: the same instant in Unix ns). `pin_seed` seeds its pin ids (random in the
    /// server, so they cannot be guessed; fixed in a replica's log). It starts unbound if it
    /// is a push consumer (the caller hands it the deliver subject's interest with
    /// [`ConsumerSet::set_delivery_interest`]) and unpaused ([`ConsumerSet::apply_pause`]).
    ///
    /// # Errors
    /// The core's config or state validation.
    #[allow(clippy::too_many_arguments)]
    pub fn add(
        &mut self,
        stream_name: &str,
        core_config: ConsumerConfig,
        deliver: DeliverPolicy,
        meta: ConsumerMeta,
        state: Option<&PersistedState>,
        pin_seed: u64,
        view: &impl StreamView,
        now: Instant,
        unix: u64,
    ) -> Result<(), ConsumerError> {
        let name = meta.name.clone();
        let mut core = match state {
            Some(state) => {
                let unix = self.unix_at(now, now, unix);
                Consumer::restore(stream_name, core_config, state, view, now, unix)?
            }
            None => Consumer::with_deliver_policy(stream_name, core_config, deliver, view, now)?,
        };
        core.set_pin_seed(pin_seed);
        let inactive_threshold = threshold_of(&meta.config);
        let unbound_since = core.is_push().then_some(Some(now));
        let entry = ConsumerEntry {
            core,
            meta,
            name: Arc::from(name.as_str()),
            inactive_threshold,
            last_activity: now,
            next_inactivity_check: now + inactive_threshold.unwrap_or_default(),
            unbound_since,
            dirty: state.is_none(),
            last_persist: now,
        };
        self.map.insert(name, entry);
        self.rebuild();
        Ok(())
    }

    /// Puts back a consumer as a replica's snapshot had it: its state machine (made with
    /// [`Consumer::from_image`]), config and clocks. Nothing is delivered or queued.
    pub fn insert_restored(&mut self, core: Consumer, meta: ConsumerMeta, clocks: ActivityClocks) {
        let name = meta.name.clone();
        let entry = ConsumerEntry {
            core,
            inactive_threshold: threshold_of(&meta.config),
            meta,
            name: Arc::from(name.as_str()),
            last_activity: clocks.last_activity,
            next_inactivity_check: clocks.next_inactivity_check,
            unbound_since: clocks.unbound_since,
            dirty: clocks.dirty,
            last_persist: clocks.last_persist,
        };
        self.map.insert(name, entry);
        self.rebuild();
    }

    /// Removes consumer `name`: its waiting requests get `409 Consumer Deleted` (queued as
    /// output). Returns the entry, or `None` if there is no such consumer.
    pub fn remove(&mut self, name: &str) -> Option<ConsumerEntry> {
        let mut entry = self.map.remove(name)?;
        self.rebuild();
        let mut out = std::mem::take(&mut self.scratch);
        entry.core.delete(&mut out);
        self.queue(&entry.name, &mut out);
        self.scratch = out;
        Some(entry)
    }

    /// A pull request (`CONSUMER.MSG.NEXT`) for `name` with reply subject `reply`.
    pub fn on_pull(
        &mut self,
        name: &str,
        reply: Bytes,
        body: &[u8],
        view: &impl StreamView,
        now: Instant,
    ) {
        self.with(name, now, |c, out| {
            c.last_activity = now;
            c.core.on_pull_body(now, reply, body, view, out);
        });
    }

    /// An ack on `subject` (`$JS.ACK.<stream>.<consumer>.…`) with `payload`; ignored unless
    /// the subject is a well-formed ack subject of this stream and consumer.
    pub fn on_ack(
        &mut self,
        name: &str,
        subject: &[u8],
        payload: &[u8],
        reply: Option<Bytes>,
        view: &impl StreamView,
        now: Instant,
    ) {
        self.with(name, now, |c, out| {
            let Some(ack) = AckSubject::parse(subject)
                .filter(|a| a.stream == c.core.stream_name() && a.consumer == name)
            else {
                return;
            };
            c.last_activity = now;
            c.dirty = true;
            let kind = AckKind::parse(payload);
            c.core.on_ack(now, ack.tokens, kind, reply, view, out);
        });
    }

    /// A flow-control answer on `subject` for push consumer `name`.
    pub fn on_flow_control(
        &mut self,
        name: &str,
        subject: &[u8],
        view: &impl StreamView,
        now: Instant,
    ) {
        self.with(name, now, |c, out| {
            c.core.on_flow_control_reply(now, subject, view, out);
        });
    }

    /// Whether push consumer `name`'s deliver subject has interest (`bound`) now.
    pub fn set_delivery_interest(
        &mut self,
        name: &str,
        bound: bool,
        view: &impl StreamView,
        now: Instant,
    ) {
        self.with(name, now, |c, out| {
            if let Some(since) = c.unbound_since.as_mut() {
                match (bound, *since) {
                    (true, _) => *since = None,
                    (false, None) => *since = Some(now),
                    (false, Some(_)) => {}
                }
            }
            c.core.set_delivery_interest(now, bound, view, out);
        });
    }

    /// The Unix time consumer `name`'s `pause_until` lies at, if it is after `unix`.
    pub fn pause_ahead(&self, name: &str, unix: u64) -> Option<u64> {
        let until = self
            .map
            .get(name)?
            .meta
            .config
            .pause_until?
            .instant
            .unix_nanos()?;
        (until > unix).then_some(until)
    }

    /// Holds consumer `name`'s deliveries until its stored `pause_until`, or lets them go
    /// if that is not ahead of `unix` (the same instant as `now`, in Unix ns).
    pub fn apply_pause(&mut self, name: &str, view: &impl StreamView, now: Instant, unix: u64) {
        let until = self
            .pause_ahead(name, unix)
            .map(|u| now + Duration::from_nanos(u.saturating_sub(unix)));
        self.with(name, now, |c, out| c.core.set_pause(now, until, view, out));
    }

    /// `CONSUMER.RESET`: consumer `name` starts again from `seq` (0: its ack floor + 1).
    /// Returns the sequence it restarts at.
    ///
    /// # Errors
    /// 10014 (no such consumer); 10204 with the core's reason.
    pub fn reset(
        &mut self,
        name: &str,
        seq: u64,
        view: &impl StreamView,
        now: Instant,
    ) -> Result<u64, ApiError> {
        if !self.map.contains_key(name) {
            return Err(ApiError::consumer_not_found());
        }
        let mut result = Ok(0);
        self.with(name, now, |c, out| {
            result = c.core.reset(now, seq, view, out).map_err(|e| match e {
                ConsumerError::InvalidReset(why) => ApiError::consumer_invalid_reset(why),
                other => ApiError::consumer_create(other),
            });
            c.dirty = true;
        });
        result
    }

    /// `CONSUMER.UNPIN` of `group` on consumer `name`.
    ///
    /// # Errors
    /// 10014 (no such consumer); 10198 (no such group).
    pub fn unpin(
        &mut self,
        name: &str,
        group: &str,
        view: &impl StreamView,
        now: Instant,
    ) -> Result<(), ApiError> {
        if !self.map.contains_key(name) {
            return Err(ApiError::consumer_not_found());
        }
        let mut known = false;
        self.with(name, now, |c, out| {
            known = c.core.unpin(now, group, view, out)
        });
        if known {
            Ok(())
        } else {
            Err(ApiError::consumer_invalid_priority_group())
        }
    }

    /// A message was stored: the consumers whose filters match `subject` may deliver it
    /// (the others have nothing new). Costs the consumers it reaches, not every consumer.
    pub fn on_append(&mut self, seq: u64, subject: &[u8], view: &impl StreamView, now: Instant) {
        if self.map.is_empty() {
            return;
        }
        let mut names = std::mem::take(&mut self.fanout.reached);
        self.fanout.reaching(subject, &mut names);
        for name in &names {
            self.with(name, now, |c, out| {
                c.core.on_stream_append(now, seq, subject, view, out);
            });
        }
        names.clear();
        self.fanout.reached = names;
    }

    /// Hands one [`StreamEvent`] of the stream's rules to the consumers, as of `now`: a
    /// stored message goes to the consumers whose filters match it; a purge moves the
    /// consumers ([`ConsumerSet::on_purge`]). `interest` says whether a pull request's
    /// requester still listens. Returns true for [`StreamEvent::Removed`]: messages left the
    /// stream, and the consumers must [`ConsumerSet::resync`] before the batch is committed
    /// (once per batch, not once per removal).
    ///
    /// After the output is carried out, [`super::Stream::drive`] applies interest retention to
    /// a stored message (not before: a consumer with
    /// `ack_policy: none` has acked what it was just handed, whose bytes the delivery still
    /// needs).
    pub(crate) fn on_event<I: Fn(&[u8]) -> bool>(
        &mut self,
        event: &StreamEvent,
        store: &dyn MsgStore,
        interest: &I,
        now: Instant,
    ) -> bool {
        let view = StoreView { store, interest };
        match event {
            StreamEvent::Stored { seq, subject } => {
                self.on_append(*seq, subject, &view, now);
                false
            }
            StreamEvent::Removed => true,
            StreamEvent::Purged { filter } => {
                self.on_purge(filter.as_deref(), &view, now);
                false
            }
        }
    }

    /// Interest retention for message `seq` on `subject`, just stored and its deliveries
    /// carried out: removed from `store` when no consumer whose filter matches it still needs
    /// it. Returns whether it was removed.
    pub(crate) fn drop_unwanted(&self, store: &mut dyn MsgStore, seq: u64, subject: &[u8]) -> bool {
        self.interest_done(seq, subject) && store.remove(seq, false).unwrap_or(false)
    }

    /// Messages left the stream (limits, delete, expiry): every consumer recounts and forgets
    /// pending entries that are gone.
    pub fn resync(&mut self, view: &impl StreamView, now: Instant) {
        for name in self.names() {
            self.with(&name, now, |c, out| {
                c.dirty = true;
                c.core.resync(now, view, out);
            });
        }
    }

    /// A purge removed messages. Consumers whose whole filter lies inside the purged subjects
    /// (`filter`, `None` = every subject) move past the purged range as nats-server's do:
    /// their read position jumps to the stream's first remaining message (for a purge by
    /// subject, the first one left on that subject), their ack floor to the seq before it, even
    /// when their own filter matches nothing there. Other consumers recount.
    pub fn on_purge(&mut self, filter: Option<&str>, view: &impl StreamView, now: Instant) {
        let keep_from = match filter {
            None => view.first_seq(),
            Some(purged) => view
                .next_matching(0, &SubjectFilter::new(&[purged.to_owned()]))
                .map_or(view.last_seq() + 1, |m| m.seq),
        };
        for name in self.names() {
            self.with(&name, now, |c, out| {
                c.dirty = true;
                let own = c.core.filter();
                let covered = match filter {
                    None | Some(">") => true,
                    Some(purged) => {
                        !own.is_all()
                            && own
                                .subjects()
                                .iter()
                                .all(|f| crate::subject::is_subset(f.as_bytes(), purged.as_bytes()))
                    }
                };
                if covered {
                    c.core.on_stream_purge(now, keep_from, view, out);
                } else {
                    c.core.resync(now, view, out);
                }
            });
        }
    }

    /// Fires due consumer deadlines; returns the consumers inactive past their threshold,
    /// for the caller to delete (with its IO) through [`ConsumerSet::remove`].
    pub fn on_timer(&mut self, view: &impl StreamView, now: Instant) -> Vec<String> {
        let mut inactive = Vec::new();
        for name in self.names() {
            let due = self.map[&name]
                .core
                .poll_timeout()
                .is_some_and(|at| at <= now);
            if due {
                self.with(&name, now, |c, out| c.core.on_timeout(now, view, out));
            }
            if self.inactive(&name, view, now) {
                inactive.push(name);
            }
        }
        inactive
    }

    /// Whether consumer `name` has been inactive past its `inactive_threshold` (nats-server's
    /// rule, consumer-semantics.md §12): no pull request, ack or delivery for the threshold,
    /// no waiting request whose requester still listens, and no delivery young enough that its
    /// ack could still come (last delivery + ack wait + threshold). When something keeps it,
    /// the next check is pushed out. A push consumer is inactive once its deliver subject has
    /// had no interest for the threshold (nats-server's `deleteNotActive` for push mode),
    /// whatever it delivered.
    fn inactive(&mut self, name: &str, view: &impl StreamView, now: Instant) -> bool {
        let Some(c) = self.map.get_mut(name) else {
            return false;
        };
        let Some(threshold) = c.inactive_threshold else {
            return false;
        };
        if let Some(since) = c.unbound_since {
            return since.is_some_and(|t| now >= t + threshold);
        }
        let due = c.next_inactivity_check.max(c.last_activity + threshold);
        if now < due {
            return false;
        }
        c.core.prune_waiting(|reply| view.has_interest(reply));
        let info = c.core.info();
        let ack_wait = c.meta.config.effective_ack_wait();
        let deliveries_settled = info.num_ack_pending == 0
            || info
                .last_delivery
                .is_none_or(|t| now.duration_since(t) >= ack_wait + threshold);
        if info.num_waiting == 0 && deliveries_settled {
            return true;
        }
        c.next_inactivity_check = now + threshold.min(Duration::from_secs(1));
        false
    }

    /// The earliest instant a consumer needs the stream: a core deadline, an inactivity
    /// check, or a state write due ([`PLAIN_ACK_PERSIST`] after it changed).
    pub fn deadline(&self) -> Option<Instant> {
        self.map
            .values()
            .flat_map(|c| {
                let persist = c.dirty.then(|| c.last_persist + PLAIN_ACK_PERSIST);
                let inactive = c.inactive_threshold.and_then(|t| match c.unbound_since {
                    Some(since) => since.map(|since| since + t),
                    None => Some(c.next_inactivity_check.max(c.last_activity + t)),
                });
                [c.core.poll_timeout(), persist, inactive]
            })
            .flatten()
            .min()
    }

    /// Whether a state write is due at `now`: some consumer changed, and one has waited
    /// [`PLAIN_ACK_PERSIST`] since it was last written.
    pub fn persist_due(&self, now: Instant) -> bool {
        self.map.values().any(|c| c.dirty)
            && self
                .map
                .values()
                .any(|c| now.duration_since(c.last_persist) >= PLAIN_ACK_PERSIST)
    }

    /// The server is stopping: waiting requests get `409 Server Shutdown` (queued).
    pub fn shutdown(&mut self, now: Instant) {
        for name in self.names() {
            self.with(&name, now, |c, out| {
                c.dirty = true;
                c.core.shutdown(out);
            });
        }
    }

    /// Retention for what the consumers acknowledged since the last call (their
    /// [`Action::Acked`], which are kept out of [`ConsumerSet::take_output`]): call it after
    /// carrying out the output, so that every delivery of a message is made before retention
    /// removes it (with `ack_policy: none` a delivery is its own ack, and on an interest stream
    /// the last consumer's delivery makes the message removable). Work-queue streams drop
    /// each acked message, interest streams each one no consumer whose filter matches still
    /// needs (nats-server's retention policies). On a work queue, other consumers whose
    /// filters match a removed message (nats-server lets an update make a filter overlap)
    /// hear of its removal as of any other ([`Consumer::on_stream_remove`], as nats-server
    /// decrements every consumer's pending on a removal), which may queue more output: call
    /// until it returns false and no output is left. Returns whether anything was removed
    /// (the caller writes the store before confirmations go out).
    pub fn apply_acked<I: Fn(&[u8]) -> bool>(
        &mut self,
        retention: RetentionPolicy,
        store: &mut dyn MsgStore,
        interest: &I,
        now: Instant,
    ) -> bool {
        if retention == RetentionPolicy::Limits {
            self.acked.clear();
            return false;
        }
        let mut removed = false;
        let mut gone = Vec::new();
        for (by, seqs) in std::mem::take(&mut self.acked) {
            let (first, last) = (*seqs.start(), *seqs.end());
            let mut seq = first;
            while let Ok(Some(m)) = store.load_next(">", seq) {
                if m.seq > last {
                    break;
                }
                seq = m.seq + 1;
                let done = retention == RetentionPolicy::WorkQueue
                    || self.interest_done(m.seq, m.subject.as_bytes());
                if done && store.remove(m.seq, false).unwrap_or(false) {
                    removed = true;
                    if retention == RetentionPolicy::WorkQueue {
                        gone.push((Arc::clone(&by), m.seq, m.subject));
                    }
                }
            }
        }
        // Interest: every consumer whose filter matches was done with it, nothing to tell.
        let mut names = Vec::new();
        for (by, seq, subject) in gone {
            self.fanout.reaching(subject.as_bytes(), &mut names);
            for name in names.drain(..).filter(|n| *n != by) {
                let view = StoreView {
                    store: &*store,
                    interest,
                };
                self.with(&name, now, |c, out| {
                    c.dirty = true;
                    c.core
                        .on_stream_remove(now, seq, subject.as_bytes(), &view, out);
                });
            }
        }
        removed
    }

    /// Interest retention: no consumer whose filter matches `subject` still needs `seq`.
    pub fn interest_done(&self, seq: u64, subject: &[u8]) -> bool {
        self.map
            .values()
            .filter(|c| c.core.filter().matches(subject))
            .all(|c| c.core.is_acked(seq))
    }

    /// Retention after the set of consumers or their filters changed, or after a restart:
    /// drops every message retention says is done. Interest: no consumer whose filter matches
    /// still needs it. Work queue: a consumer whose filter matches acknowledged it (a removal
    /// that was not written before a crash is redone here, so an acked order never comes
    /// back). Limits: nothing. O(messages). Returns whether anything was removed: then the
    /// caller [`ConsumerSet::resync`]s the consumers (on a work queue whose filters an update
    /// made overlap, as nats-server allows, what one consumer acked another may still count).
    pub fn retention_sweep(&self, retention: RetentionPolicy, store: &mut dyn MsgStore) -> bool {
        if retention == RetentionPolicy::Limits {
            return false;
        }
        remove_where(store, |seq, subject| match retention {
            RetentionPolicy::Interest => self.interest_done(seq, subject),
            _ => self
                .map
                .values()
                .any(|c| c.core.filter().matches(subject) && c.core.is_acked(seq)),
        })
    }

    /// A stream update gave the stream `stream.num_replicas` replicas: each consumer's
    /// `num_replicas` follows ([`ApiConsumerConfig::replicas_following`]), so that its config
    /// stays one the stream accepts (a later update with it is not 10126 or 10134).
    pub fn follow_stream_replicas(&mut self, stream: &StreamConfig) {
        for c in self.map.values_mut() {
            c.meta.config.num_replicas = c.meta.config.replicas_following(stream);
        }
    }

    /// A stream update changed retention from `old` to `new`. Switching to interest removes
    /// at once what no consumer needs, as nats-server 2.15 does: without consumers every
    /// message; with consumers each message that some consumer's filter matches and every
    /// matching consumer is done with ([`ConsumerSet::interest_done`]). A message no filter
    /// matches stays while the stream has consumers (nats-server keeps it too). Other switches
    /// remove nothing. Returns whether anything was removed (consumers then recount).
    pub fn on_retention_change(
        &self,
        old: RetentionPolicy,
        new: RetentionPolicy,
        store: &mut dyn MsgStore,
    ) -> bool {
        if old == RetentionPolicy::Interest || new != RetentionPolicy::Interest {
            return false;
        }
        remove_where(store, |seq, subject| {
            let wanted = self.map.values().any(|c| c.core.filter().matches(subject));
            (self.map.is_empty() || wanted) && self.interest_done(seq, subject)
        })
    }

    /// A stream update from consumer limits `old` to `new`: refused (10069) when an existing
    /// consumer is above a newly set limit ([`crate::api::stream::check_consumer_limits_update`]).
    ///
    /// # Errors
    /// 10069 naming the consumer.
    pub fn check_consumer_limits(
        &self,
        old: &ConsumerLimits,
        new: &ConsumerLimits,
    ) -> Result<(), ApiError> {
        crate::api::stream::check_consumer_limits_update(
            old,
            new,
            self.map
                .iter()
                .map(|(name, c)| (name.as_str(), &c.meta.config)),
        )
    }

    /// The configs of the consumers other than `except`.
    pub fn other_configs(&self, except: Option<&str>) -> Vec<&ApiConsumerConfig> {
        self.map
            .iter()
            .filter(|(n, _)| Some(n.as_str()) != except)
            .map(|(_, c)| &c.meta.config)
            .collect()
    }

    /// Checks a `CONSUMER.CREATE` for a new consumer against the stream `stream`, the other
    /// consumers and the account's `max_consumers` (which caps each stream of the account, as
    /// nats-server applies it; ≤ 0: none) ([`ConsumerCreate::check_new`]); returns the
    /// consumer's name (from `generate_name` for a legacy ephemeral without one) and config.
    ///
    /// # Errors
    /// 10026 past a limit; the create request's error.
    pub fn check_new(
        &self,
        create: &ConsumerCreate,
        stream: &StreamConfig,
        account_max_consumers: i64,
        generate_name: impl FnMut() -> String,
    ) -> Result<(String, ApiConsumerConfig), ApiError> {
        let others = self.other_configs(None);
        let limitable = others.iter().filter(|o| !o.sourcing).count() as i64;
        if account_max_consumers > 0 && limitable >= account_max_consumers {
            return Err(ApiError::maximum_consumers_limit());
        }
        create.check_new(stream, &others, generate_name)
    }

    /// Checks a `CONSUMER.CREATE` naming an existing consumer `name` against it, the stream
    /// `stream` and the other consumers ([`ConsumerCreate::check_existing`]); returns the
    /// config the update would set.
    ///
    /// # Errors
    /// The create request's error; 10014 if `name` does not exist.
    pub fn check_update(
        &self,
        name: &str,
        create: &ConsumerCreate,
        stream: &StreamConfig,
    ) -> Result<ApiConsumerConfig, ApiError> {
        let current = &self
            .map
            .get(name)
            .ok_or_else(ApiError::consumer_not_found)?
            .meta
            .config;
        create.check_existing(current, stream, &self.other_configs(Some(name)))
    }

    /// Applies a checked update of consumer `name` to `config` (`core`: its state machine's
    /// config). Returns whether its deliver subject or group changed (the caller watches the
    /// new one and hands its interest to [`ConsumerSet::set_delivery_interest`]).
    ///
    /// # Errors
    /// 10014 if `name` does not exist; the core's refusal (10012).
    pub fn update(
        &mut self,
        name: &str,
        config: ApiConsumerConfig,
        core: ConsumerConfig,
        view: &impl StreamView,
        now: Instant,
    ) -> Result<bool, ApiError> {
        if !self.map.contains_key(name) {
            return Err(ApiError::consumer_not_found());
        }
        let mut result = Ok(false);
        self.with(name, now, |c, out| {
            result = c.core.update_config(now, core, view, out).map(|()| {
                let old = &c.meta.config;
                let moved = old.deliver_subject != config.deliver_subject
                    || old.deliver_group != config.deliver_group;
                c.inactive_threshold = threshold_of(&config);
                c.meta.config = config;
                c.dirty = true;
                moved
            });
        });
        let moved = result.map_err(ApiError::consumer_create)?;
        self.rebuild();
        Ok(moved)
    }

    /// Consumer `name`'s state and the Unix times of its last delivery and ack, as of `now`
    /// (`unix` in Unix ns).
    pub fn state(
        &mut self,
        name: &str,
        now: Instant,
        unix: u64,
    ) -> Option<(ConsumerState, Option<u64>, Option<u64>)> {
        let state = self.map.get(name)?.core.info();
        let delivered = state.last_delivery.map(|i| self.unix_at(i, now, unix));
        let acked = state.last_ack.map(|i| self.unix_at(i, now, unix));
        Some((state, delivered, acked))
    }

    /// Consumer `name`'s info as `CONSUMER.INFO`/`CREATE` answer it (nats-server's consumer
    /// info), as of `now` (`unix` in Unix ns); `version` is the server version its dynamic
    /// metadata names.
    pub fn info(
        &mut self,
        stream_name: &str,
        name: &str,
        version: &str,
        now: Instant,
        unix: u64,
    ) -> Option<ConsumerInfo> {
        let (state, delivered, acked) = self.state(name, now, unix)?;
        let pin_since = self.map[name].core.pin().map(|(_, since)| since);
        let pinned_ts = pin_since.map(|since| self.unix_at(since, now, unix));
        let c = &self.map[name];
        let times = ConsumerTimes {
            created_unix_ns: c.meta.created.unix_nanos().unwrap_or(0),
            last_delivery_unix_ns: delivered,
            last_ack_unix_ns: acked,
            now_unix_ns: unix,
        };
        let config = c.meta.config.with_dynamic_metadata(version);
        let mut info = ConsumerInfo::from_state(stream_name, name, config, &state, times);
        info.push_bound = c.core.push_bound();
        if let (Some((id, _)), Some(ts), Some(group)) =
            (c.core.pin(), pinned_ts, info.priority_groups.first_mut())
        {
            // nats-server has one pin per consumer, reported on its first group.
            group.pinned_client_id = id.to_owned();
            group.pinned_ts = Timestamp::from_unix_nanos(ts);
        }
        Some(info)
    }

    /// Runs `f` on consumer `name` (if it exists) with a scratch action vector, then queues
    /// what it asked for. A delivery counts as activity and changes the state.
    fn with(
        &mut self,
        name: &str,
        now: Instant,
        f: impl FnOnce(&mut ConsumerEntry, &mut Vec<Action>),
    ) {
        let Some(c) = self.map.get_mut(name) else {
            return;
        };
        let mut out = std::mem::take(&mut self.scratch);
        f(c, &mut out);
        if out.is_empty() {
            self.scratch = out;
            return;
        }
        if out.iter().any(|a| matches!(a, Action::Deliver { .. })) {
            c.dirty = true;
            c.last_activity = now;
        }
        let name = Arc::clone(&c.name);
        self.queue(&name, &mut out);
        self.scratch = out;
    }

    fn queue(&mut self, name: &Arc<str>, actions: &mut Vec<Action>) {
        for action in actions.drain(..) {
            match action {
                Action::Acked { stream_seqs } => {
                    if self.keep_acked {
                        self.acked.push((Arc::clone(name), stream_seqs));
                    }
                }
                other => self.out.push((Arc::clone(name), other)),
            }
        }
    }

    /// Rebuilds the fanout index and the `headers_only` flag (a consumer came, went or
    /// changed).
    fn rebuild(&mut self) {
        self.fanout = Fanout::of(
            self.map
                .values()
                .map(|c| (&c.name, c.meta.config.filters())),
        );
        self.any_headers_only = self.map.values().any(|c| c.meta.config.headers_only);
    }
}

/// Removes from `store` every message `gone(seq, subject)` says is done with (decided over
/// the whole stream first, then removed). Returns whether anything was removed. O(messages).
fn remove_where(store: &mut dyn MsgStore, gone: impl Fn(u64, &[u8]) -> bool) -> bool {
    let mut seq = 0;
    let mut done = Vec::new();
    while let Ok(Some(m)) = store.load_next(">", seq) {
        seq = m.seq + 1;
        if gone(m.seq, m.subject.as_bytes()) {
            done.push(m.seq);
        }
    }
    for &seq in &done {
        let _ = store.remove(seq, false);
    }
    !done.is_empty()
}

/// A config's inactivity threshold (zero: none).
fn threshold_of(config: &ApiConsumerConfig) -> Option<Duration> {
    (!config.inactive_threshold.is_zero()).then_some(config.inactive_threshold)
}

/// Which consumers a stored message can reach: those without a filter, and those whose
/// filters match its subject (found in a subject index, so a message costs the consumers it
/// reaches, not every consumer of the stream).
#[derive(Debug, Default)]
struct Fanout {
    /// Consumers with filters, by each filter subject.
    filtered: SubjectIndex<Arc<str>>,
    /// Consumers without a filter, by name.
    unfiltered: Vec<Arc<str>>,
    /// Some consumer has a filter.
    any_filtered: bool,
    /// Scratch for index lookups.
    matches: Matches<Arc<str>>,
    /// Scratch for [`Fanout::reaching`]'s caller (kept to reuse its allocation).
    reached: Vec<Arc<str>>,
}

impl Fanout {
    /// The fanout of consumers given as (name, filters).
    fn of<'a>(consumers: impl Iterator<Item = (&'a Arc<str>, Vec<String>)>) -> Fanout {
        let mut f = Fanout::default();
        for (name, filters) in consumers {
            if filters.is_empty() {
                f.unfiltered.push(Arc::clone(name));
                continue;
            }
            for filter in filters {
                // Filters were validated when the consumer was made.
                if f.filtered
                    .insert(filter.as_bytes(), None, Arc::clone(name))
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
