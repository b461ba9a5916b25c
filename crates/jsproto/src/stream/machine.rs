//! One stream as one state machine: its rules ([`StreamCore`]) and its consumers
//! ([`ConsumerSet`]), wired together: [`Stream`].
//!
//! A command goes to the rules first; what they did (a message stored, removed, purged) goes
//! to the consumers, in order; what the consumers then ask for (deliveries, statuses, ack
//! confirmations, advisories) is carried out by the caller through [`Stream::drive`], after
//! which retention removes what the consumers are done with (work queue: acked; interest:
//! every consumer whose filter matches is done). Removals by limits, age or message delete
//! make the consumers recount once per batch ([`Stream::recount`]), not once per message.
//!
//! ```text
//!  Command ──▶ StreamCore::apply ──▶ StreamEvent ──▶ ConsumerSet (append, purge)
//!                                                        │ output: (consumer, Action)
//!                                                        ▼
//!                      Stream::drive: caller carries out ──▶ retention (acked, unwanted)
//!                                                        ▲        │ more output?
//!                                                        └────────┘
//! ```
//!
//! A replica applies the stream's replicated log entries with [`Stream::apply_entry`]
//! (`super::entry`: the entry, its times, the snapshot a replica catches up from).
//!
//! Nothing here does IO or reads a clock: the store is handed in ([`MsgStore`]), time comes
//! in as `now` (monotonic, for deadlines) and Unix nanoseconds (for what is stored), and
//! whether a pull request's requester still listens as a function. The server drives it from
//! one owner per stream; `tests/stream_consumers.rs` drives two of it with the same random
//! commands and checks they agree, and one restarted halfway against one that kept running.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::api::pub_ack::PubAck;
use crate::api::stream::{RetentionPolicy, StreamConfig};
use crate::api::ApiError;
use crate::consumer::Action;

use super::consumers::ConsumerSet;
use super::core::{Command, Outcome, Publish, StreamCore, StreamEvent};
use super::store::{MsgStore, PurgeRequest, StoreError};
use super::view::StoreView;

/// What [`Stream::drive`]'s caller sees while it carries out the consumers' output: the store
/// (to load what is delivered), the stream's config and its consumers (their configs).
pub struct Context<'a> {
    /// The stream's store.
    pub store: &'a dyn MsgStore,
    /// The stream's config.
    pub config: &'a StreamConfig,
    /// The stream's consumers.
    pub consumers: &'a ConsumerSet,
}

/// A stream's rules and consumers; see the module doc.
#[derive(Debug)]
pub struct Stream {
    core: StreamCore,
    consumers: ConsumerSet,
    /// Scratch for what the rules report.
    events: Vec<StreamEvent>,
    /// Messages stored on an interest stream, checked for interest once their deliveries
    /// are carried out ([`Stream::drive`]).
    unwanted: Vec<(u64, Bytes)>,
    /// Messages left the stream since the consumers last recounted.
    recount: bool,
}

impl Stream {
    /// A stream with `config` over `store` as it is (new, or reopened: see
    /// [`StreamCore::new`]), at `unix` (Unix ns), without consumers.
    pub fn new(config: StreamConfig, store: &mut dyn MsgStore, unix: u64) -> Self {
        Stream::with_core(StreamCore::new(config, store, unix))
    }

    /// A stream with these rules, without consumers.
    pub(super) fn with_core(core: StreamCore) -> Self {
        let mut consumers = ConsumerSet::new();
        consumers.keep_acked(core.config().retention != RetentionPolicy::Limits);
        Stream {
            core,
            consumers,
            events: Vec::new(),
            unwanted: Vec::new(),
            recount: false,
        }
    }

    /// Whether [`Stream::drive`] has anything to do: output waiting, or retention of what
    /// was acked or stored. (Callers on a hot path skip the call when not.)
    pub fn needs_drive(&self) -> bool {
        self.consumers.has_output() || self.consumers.has_acked() || !self.unwanted.is_empty()
    }

    /// The stream's config as the rules apply it.
    pub fn config(&self) -> &StreamConfig {
        self.core.config()
    }

    /// The stream's rules.
    pub fn core(&self) -> &StreamCore {
        &self.core
    }

    /// The stream's rules, to change (a reverted batch: [`StreamCore::revert`]).
    pub fn core_mut(&mut self) -> &mut StreamCore {
        &mut self.core
    }

    /// The stream's consumers.
    pub fn consumers(&self) -> &ConsumerSet {
        &self.consumers
    }

    /// The stream's consumers, to feed (pulls, acks, creates...); carry out what they ask
    /// for with [`Stream::drive`].
    pub fn consumers_mut(&mut self) -> &mut ConsumerSet {
        &mut self.consumers
    }

    /// Applies `cmd` to the stream's rules ([`StreamCore::apply`]) and hands what it did to
    /// the consumers, as of `now`; `interest` says whether a pull request's requester still
    /// listens. The one entry point a replica applying a log uses; the typed methods below
    /// do the same per command. Carry out the output with [`Stream::drive`].
    pub fn apply<I: Fn(&[u8]) -> bool>(
        &mut self,
        store: &mut dyn MsgStore,
        cmd: Command<'_>,
        interest: &I,
        now: Instant,
    ) -> Outcome {
        match cmd {
            Command::Publish { msg, now: unix } => {
                Outcome::Published(self.publish(store, msg, unix, interest, now))
            }
            Command::DeleteMsg { seq, erase } => {
                Outcome::Deleted(self.delete_msg(store, seq, erase, interest, now))
            }
            Command::Purge(req) => Outcome::Purged(self.purge(store, req, interest, now)),
            Command::Update(config) => {
                Outcome::Updated(self.update(store, config.clone(), interest, now))
            }
            Command::Expire { now: unix } => {
                Outcome::Expired(self.expire(store, unix, interest, now))
            }
        }
    }

    /// Stores `msg` at `unix` (Unix ns) if the rules allow it ([`StreamCore::publish`]) and
    /// hands it to the consumers whose filters match it.
    ///
    /// # Errors
    /// The rules' refusal ([`StreamCore::publish`]).
    pub fn publish<I: Fn(&[u8]) -> bool>(
        &mut self,
        store: &mut dyn MsgStore,
        msg: Publish<'_>,
        unix: u64,
        interest: &I,
        now: Instant,
    ) -> Result<PubAck, ApiError> {
        let result = self.core.publish(store, msg, unix, &mut self.events);
        self.hand_events(store, interest, now);
        result
    }

    /// `STREAM.MSG.DELETE` ([`StreamCore::delete_msg`]); the consumers recount at
    /// [`Stream::recount`].
    ///
    /// # Errors
    /// As [`StreamCore::delete_msg`].
    pub fn delete_msg<I: Fn(&[u8]) -> bool>(
        &mut self,
        store: &mut dyn MsgStore,
        seq: u64,
        erase: bool,
        interest: &I,
        now: Instant,
    ) -> Result<(), ApiError> {
        let result = self.core.delete_msg(store, seq, erase, &mut self.events);
        self.hand_events(store, interest, now);
        result
    }

    /// `STREAM.PURGE` ([`StreamCore::purge`]); the consumers move past what went
    /// ([`ConsumerSet::on_purge`]).
    ///
    /// # Errors
    /// As [`StreamCore::purge`].
    pub fn purge<I: Fn(&[u8]) -> bool>(
        &mut self,
        store: &mut dyn MsgStore,
        req: &PurgeRequest,
        interest: &I,
        now: Instant,
    ) -> Result<u64, ApiError> {
        let result = self.core.purge(store, req, &mut self.events);
        self.hand_events(store, interest, now);
        result
    }

    /// A checked `STREAM.UPDATE` ([`StreamCore::update`]): every consumer recounts at once
    /// (new limits, subjects or retention) and, when retention switches to interest, what no
    /// consumer needs goes ([`ConsumerSet::on_retention_change`]); a new `num_replicas` is
    /// followed by the consumers' ([`ConsumerSet::follow_stream_replicas`]).
    ///
    /// # Errors
    /// As [`StreamCore::update`].
    pub fn update<I: Fn(&[u8]) -> bool>(
        &mut self,
        store: &mut dyn MsgStore,
        config: StreamConfig,
        interest: &I,
        now: Instant,
    ) -> Result<(), ApiError> {
        let (old, old_replicas) = (self.config().retention, self.config().num_replicas);
        let result = self.core.update(store, config, &mut self.events);
        let new = self.config().retention;
        if self.config().num_replicas != old_replicas {
            self.consumers.follow_stream_replicas(self.core.config());
        }
        self.consumers.keep_acked(new != RetentionPolicy::Limits);
        self.hand_events(store, interest, now);
        self.recount = true;
        self.recount(store, interest, now);
        if self.consumers.on_retention_change(old, new, store)
            || (old != RetentionPolicy::Interest && new == RetentionPolicy::Interest)
        {
            self.recount = true;
            self.recount(store, interest, now);
        }
        result
    }

    /// Time passes: what ran out at `unix` (Unix ns) leaves ([`StreamCore::expire`]); the
    /// consumers recount at [`Stream::recount`].
    ///
    /// # Errors
    /// The store's error.
    pub fn expire<I: Fn(&[u8]) -> bool>(
        &mut self,
        store: &mut dyn MsgStore,
        unix: u64,
        interest: &I,
        now: Instant,
    ) -> Result<usize, StoreError> {
        let result = self.core.expire(store, unix, &mut self.events);
        self.hand_events(store, interest, now);
        result
    }

    /// Hands the rules' events to the consumers, in order.
    fn hand_events<I: Fn(&[u8]) -> bool>(
        &mut self,
        store: &dyn MsgStore,
        interest: &I,
        now: Instant,
    ) {
        let interest_retention = self.config().retention == RetentionPolicy::Interest;
        for event in self.events.drain(..) {
            if self.consumers.on_event(&event, store, interest, now) {
                self.recount = true;
            }
            if let StreamEvent::Stored { seq, subject } = event {
                if interest_retention {
                    self.unwanted.push((seq, subject));
                }
            }
        }
    }

    /// Makes the consumers recount what they have pending if messages left the stream since
    /// they last did (limits, age, message delete; once per batch). Returns whether they
    /// did; carry out their output with [`Stream::drive`].
    pub fn recount<I: Fn(&[u8]) -> bool>(
        &mut self,
        store: &dyn MsgStore,
        interest: &I,
        now: Instant,
    ) -> bool {
        if !std::mem::take(&mut self.recount) || self.consumers.is_empty() {
            return false;
        }
        let view = StoreView { store, interest };
        self.consumers.resync(&view, now);
        true
    }

    /// Whether messages left the stream and the consumers have not recounted yet.
    pub fn recount_due(&self) -> bool {
        self.recount
    }

    /// Carries out what the consumers asked for: `carry` gets their output in order, with
    /// the [`Context`] to load what is delivered; then retention removes what the consumers
    /// are done with (what was acked, on a work queue; on an interest stream, what was acked
    /// or stored and every consumer whose filter matches is done with), after the deliveries,
    /// so every delivery finds its message. A removal on a work queue may give other
    /// consumers more to do: repeated until no output is left. Returns whether retention
    /// removed anything (the caller writes the store before confirmations go out).
    pub fn drive<I, F>(
        &mut self,
        store: &mut dyn MsgStore,
        interest: &I,
        now: Instant,
        mut carry: F,
    ) -> bool
    where
        I: Fn(&[u8]) -> bool,
        F: FnMut(&Context<'_>, &mut Vec<(Arc<str>, Action)>),
    {
        let retention = self.config().retention;
        let mut removed = false;
        loop {
            if self.consumers.has_output() {
                let mut out = self.consumers.take_output();
                let cx = Context {
                    store: &*store,
                    config: self.core.config(),
                    consumers: &self.consumers,
                };
                carry(&cx, &mut out);
                out.clear();
                self.consumers.give_back(out);
            }
            removed |= self.consumers.apply_acked(retention, store, interest, now);
            for (seq, subject) in self.unwanted.drain(..) {
                if retention == RetentionPolicy::Interest {
                    removed |= self.consumers.drop_unwanted(store, seq, &subject);
                }
            }
            if !self.consumers.has_output() {
                return removed;
            }
        }
    }

    /// The next instant the stream needs time to pass ([`Stream::expire`] or a consumer's
    /// timer: redelivery, request expiry, heartbeat, pause end, inactivity, a state write
    /// due), as of `now` (`unix`: the same instant in Unix ns). `None`: nothing is scheduled.
    pub fn poll_timeout(&self, store: &dyn MsgStore, now: Instant, unix: u64) -> Option<Instant> {
        let expiry = self
            .core
            .next_expiry(store)
            .map(|at| now + Duration::from_nanos(at.saturating_sub(unix)));
        [expiry, self.consumers.deadline()]
            .into_iter()
            .flatten()
            .min()
    }

    /// Retention after the set of consumers or their filters changed, or after a restart
    /// ([`ConsumerSet::retention_sweep`]); the consumers recount if it removed anything.
    /// Returns whether it did; carry out the output with [`Stream::drive`].
    pub fn retention_sweep<I: Fn(&[u8]) -> bool>(
        &mut self,
        store: &mut dyn MsgStore,
        interest: &I,
        now: Instant,
    ) -> bool {
        let retention = self.config().retention;
        if !self.consumers.retention_sweep(retention, store) {
            return false;
        }
        self.recount = true;
        self.recount(store, interest, now);
        true
    }
}
