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
//! written within [`PLAIN_ACK_PERSIST`](jsproto::stream::consumers::PLAIN_ACK_PERSIST) of arriving.
//!
//! Push consumers (a `deliver_subject`): the router tells the stream when the deliver subject
//! gains its first or loses its last subscription on exactly that subject (in the
//! `deliver_group` queue group if set; [`Router::watch_interest`](crate::router::Router::watch_interest), nats-server's interest
//! notification), and the stream hands that to the consumer, which delivers while bound.
//! Nothing polls. Flow-control answers arrive on `$JS.FC.<stream>.<consumer>.*`. A push
//! consumer with an `inactive_threshold` (every ephemeral) is deleted once its deliver
//! subject has had no interest for that long, as nats-server's `deleteNotActive`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use jsproto::api::advisory::{ConsumerAction, JsAdvisory};
use jsproto::api::consumer::{
    ConsumerConfig as ApiConsumerConfig, ConsumerCreate, ConsumerCreateResponse,
    ConsumerDeleteResponse, ConsumerInfo, ConsumerInfoResponse, ConsumerListResponse,
    ConsumerNamesResponse, LIST_LIMIT, NAMES_LIMIT,
};
use jsproto::api::{encode_error, encode_ok, ApiError};
use jsproto::consumer::{Action, Advisory, PersistedState};
use jsproto::stream::{ConsumerMeta, Context, StoreView};
use tracing::{debug, warn};

use super::outbox::Outbox;
use super::stream::{timestamp, unix_now, StreamCmd, StreamEngine, WeakStreamSender};
use crate::router::{BurstWork, InterestWatcher, InternalHandler, RoutedMsg};
use crate::server::NATS_VERSION;

/// The stream as its consumers read it: `$engine`'s store, and its account's router for
/// whether a requester still listens. A macro, so that the view borrows only the store and
/// the consumer set stays free to change.
macro_rules! view {
    ($engine:expr, $router:expr) => {
        StoreView {
            store: &*$engine.store,
            interest: |reply: &[u8]| $router.has_interest(reply),
        }
    };
}
pub(super) use view;

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
    /// Serves the whole cluster ([`InternalHandler::clustered`]).
    clustered: bool,
}

impl InternalHandler for FlowControlIngress {
    fn clustered(&self) -> bool {
        self.clustered
    }

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
    /// Serves the whole cluster ([`InternalHandler::clustered`]).
    clustered: bool,
}

impl InternalHandler for PullIngress {
    fn clustered(&self) -> bool {
        self.clustered
    }

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
    /// Serves the whole cluster ([`InternalHandler::clustered`]).
    clustered: bool,
}

impl InternalHandler for AckIngress {
    fn clustered(&self) -> bool {
        self.clustered
    }

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

/// A consumer's ties to the router: its internal subscriptions and, for a push consumer, the
/// interest watch on its deliver subject. Removed with the consumer.
struct Links {
    /// Internal subscriptions (pull requests, acks, flow control).
    subs: Vec<(String, Arc<dyn InternalHandler>)>,
    /// Push consumers: the watched deliver subject.
    push: Option<PushLink>,
}

/// A push consumer's interest watch.
struct PushLink {
    /// The deliver subject watched.
    subject: Bytes,
    /// `deliver_group`, if any: only its members count as interest.
    group: Option<Bytes>,
    /// Registered with the router for `subject`/`group`.
    watcher: Arc<dyn InterestWatcher>,
}

impl PushLink {
    fn of(config: &ApiConsumerConfig, watcher: Arc<dyn InterestWatcher>) -> Option<PushLink> {
        (!config.deliver_subject.is_empty()).then(|| PushLink {
            subject: Bytes::copy_from_slice(config.deliver_subject.as_bytes()),
            group: (!config.deliver_group.is_empty())
                .then(|| Bytes::copy_from_slice(config.deliver_group.as_bytes())),
            watcher,
        })
    }
}

/// The consumers of a stream ([`ConsumerSet`](jsproto::stream::ConsumerSet), jsproto's state machine) and the IO around
/// them: router ties, ack confirmations held for a durable write, acked ranges for retention.
#[derive(Default)]
pub struct Consumers {
    /// Router ties, by consumer name.
    links: HashMap<String, Links>,
    /// Ack confirmations held until the consumer state holding them is durable.
    held_ack_replies: Vec<Bytes>,
    /// Some consumer owes a durable write before the held confirmations go out.
    needs_fsync: bool,
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
        core_config: jsproto::consumer::ConsumerConfig,
        deliver: jsproto::consumer::DeliverPolicy,
        meta: ConsumerMeta,
        state: Option<PersistedState>,
    ) -> anyhow::Result<()> {
        let now = Instant::now();
        let name = meta.name.clone();
        let stream_name = self.config().name.clone();
        let core_config = self.with_rate_burst(named(core_config, &name));
        let account = Arc::clone(self.outbox.account());
        let router = account.router();
        // A `mem_storage` consumer keeps nothing on disk and is gone after a restart, as in
        // nats-server (clients re-create such consumers, ordered ones among them).
        if let Some(dir) = self.dir.as_ref().filter(|_| !meta.config.mem_storage) {
            let cdir = consumer_dir(dir, &name);
            std::fs::create_dir_all(&cdir)?;
            super::write_atomically(
                &cdir.join("meta.json"),
                &serde_json::to_vec(&meta).expect("meta serialises"),
                true,
            )?;
        }
        {
            let view = view!(self, router);
            // Pin ids (pinned_client) come from the core; a random seed makes them unguessable.
            self.stream.consumers_mut().add(
                &stream_name,
                core_config,
                deliver,
                meta,
                state.as_ref(),
                rand::random(),
                &view,
                now,
                unix_now(),
            )?;
        }
        // A `pause_until` ahead (created paused, or paused before a restart) holds deliveries:
        // applied before the link, which hands a push consumer its deliver subject's interest
        // (and would deliver at once).
        self.apply_pause(&name);
        if let Err(e) = self.link_consumer(&name) {
            self.stream.consumers_mut().remove(&name);
            self.run_output();
            return Err(e);
        }
        self.publish_counters();
        self.persist_consumers(false);
        Ok(())
    }

    /// Ties consumer `name` (in the consumer set) to the router: its pull-request, ack and
    /// flow-control subscriptions, and the interest watch on a push consumer's deliver
    /// subject (handing it the interest it has now).
    ///
    /// # Errors
    /// A subscription the router refused (nothing stays subscribed then).
    pub(super) fn link_consumer(&mut self, name: &str) -> anyhow::Result<()> {
        let Some(config) = self
            .stream
            .consumers()
            .get(name)
            .map(|c| c.meta.config.clone())
        else {
            return Ok(());
        };
        let stream_name = self.config().name.clone();
        let account = Arc::clone(self.outbox.account());
        let router = account.router();
        let tx = self
            .self_tx
            .clone()
            .expect("stream engines know their own sender");
        let consumer: Arc<str> = Arc::from(name);
        let clustered = router.clustered();
        let pull: Arc<dyn InternalHandler> = Arc::new(PullIngress {
            tx: tx.clone(),
            consumer: Arc::clone(&consumer),
            clustered,
        });
        let ack: Arc<dyn InternalHandler> = Arc::new(AckIngress {
            tx: tx.clone(),
            consumer: Arc::clone(&consumer),
            clustered,
        });
        let mut subs = vec![
            (pull_subject(&stream_name, name), pull),
            // Exactly the nine tokens of a v1 ack subject, as nats-server subscribes.
            (format!("$JS.ACK.{stream_name}.{name}.*.*.*.*.*"), ack),
        ];
        if config.flow_control {
            let fc: Arc<dyn InternalHandler> = Arc::new(FlowControlIngress {
                tx: tx.clone(),
                consumer: Arc::clone(&consumer),
                clustered,
            });
            subs.push((format!("$JS.FC.{stream_name}.{name}.*"), fc));
        }
        let push = PushLink::of(
            &config,
            Arc::new(InterestIngress {
                tx: tx.clone(),
                consumer: Arc::clone(&consumer),
            }),
        );
        for (subject, handler) in &subs {
            if let Err(e) = router.subscribe_internal(subject.as_bytes(), None, Arc::clone(handler))
            {
                for (done, handler) in subs.iter().take_while(|(s, _)| s != subject) {
                    router.unsubscribe_internal(done.as_bytes(), None, handler);
                }
                return Err(anyhow::anyhow!("subscribing {subject}: {e}"));
            }
        }
        self.consumers
            .links
            .insert(name.to_string(), Links { subs, push });
        self.watch_deliver_subject(name);
        Ok(())
    }

    /// Undoes [`StreamEngine::link_consumer`]: the consumer stays, untied from the router.
    pub(super) fn unlink_consumer(&mut self, name: &str) {
        let account = Arc::clone(self.outbox.account());
        if let Some(links) = self.consumers.links.remove(name) {
            for (subject, handler) in &links.subs {
                account
                    .router()
                    .unsubscribe_internal(subject.as_bytes(), None, handler);
            }
            if let Some(push) = &links.push {
                account.router().unwatch_interest(
                    &push.subject,
                    push.group.as_deref(),
                    &push.watcher,
                );
            }
        }
    }

    /// Deletes a consumer: `409 Consumer Deleted` to its waiting requests, subscriptions and
    /// files removed. False if there is no such consumer.
    pub fn remove_consumer(&mut self, name: &str) -> bool {
        if self.stream.consumers_mut().remove(name).is_none() {
            return false;
        }
        self.publish_counters();
        self.run_output();
        self.unlink_consumer(name);
        if let Some(dir) = &self.dir {
            let _ = std::fs::remove_dir_all(consumer_dir(dir, name));
        }
        self.retention_sweep();
        self.advise_consumer(ConsumerAction::Delete, name);
        true
    }

    /// A pull request arrived for `consumer`.
    pub fn on_pull(&mut self, consumer: &str, reply: Bytes, body: &[u8]) {
        let now = Instant::now();
        let account = Arc::clone(self.outbox.account());
        let view = view!(self, account.router());
        self.stream
            .consumers_mut()
            .on_pull(consumer, reply, body, &view, now);
        self.run_output_at(now);
    }

    /// Registers push consumer `name`'s deliver subject with the router and hands the
    /// consumer the interest it has now. Nothing for a pull consumer.
    fn watch_deliver_subject(&mut self, name: &str) {
        let account = Arc::clone(self.outbox.account());
        let Some(push) = self.consumers.links.get(name).and_then(|l| l.push.as_ref()) else {
            return;
        };
        let bound = account.router().watch_interest(
            &push.subject,
            push.group.as_deref(),
            Arc::clone(&push.watcher),
        );
        if self.is_replicated() {
            // A replicated stream's consumers change only through its log: the leader
            // appends what its router sees, and every replica applies it.
            self.propose_interest(name);
        } else {
            self.set_delivery_interest(name, bound);
        }
    }

    /// The router said push consumer `consumer`'s deliver subject may have changed interest.
    pub fn on_delivery_interest(&mut self, consumer: &str) {
        let account = Arc::clone(self.outbox.account());
        let Some(push) = self
            .consumers
            .links
            .get(consumer)
            .and_then(|l| l.push.as_ref())
        else {
            return;
        };
        let bound = account
            .router()
            .exact_interest(&push.subject, push.group.as_deref());
        self.set_delivery_interest(consumer, bound);
    }

    fn set_delivery_interest(&mut self, name: &str, bound: bool) {
        debug!(consumer = name, bound, "push consumer interest");
        let now = Instant::now();
        let account = Arc::clone(self.outbox.account());
        let view = view!(self, account.router());
        self.stream
            .consumers_mut()
            .set_delivery_interest(name, bound, &view, now);
        self.run_output_at(now);
    }

    /// A flow-control answer arrived on `subject` for push consumer `consumer`.
    pub fn on_flow_control(&mut self, consumer: &str, subject: &[u8]) {
        let now = Instant::now();
        let account = Arc::clone(self.outbox.account());
        let view = view!(self, account.router());
        self.stream
            .consumers_mut()
            .on_flow_control(consumer, subject, &view, now);
        self.run_output_at(now);
    }

    /// An ack arrived on `$JS.ACK.<stream>.<consumer>.…` (a malformed subject is ignored).
    pub fn on_ack_msg(
        &mut self,
        consumer: &str,
        subject: &[u8],
        payload: &[u8],
        reply: Option<Bytes>,
    ) {
        let now = Instant::now();
        let account = Arc::clone(self.outbox.account());
        let view = view!(self, account.router());
        self.stream
            .consumers_mut()
            .on_ack(consumer, subject, payload, reply, &view, now);
        self.run_output_at(now);
    }

    /// Fires due consumer deadlines, deletes consumers inactive past their threshold and
    /// writes consumer state that is due.
    pub fn consumers_on_timer(&mut self) {
        let now = Instant::now();
        let account = Arc::clone(self.outbox.account());
        let view = view!(self, account.router());
        let inactive = self.stream.consumers_mut().on_timer(&view, now);
        self.run_output();
        for name in inactive {
            debug!(stream = %self.config().name, consumer = %name, "inactive consumer removed");
            self.remove_consumer(&name);
        }
        if self.stream.consumers().persist_due(now) {
            self.persist_consumers(false);
        }
    }

    /// Carries out what the consumers asked for ([`Stream::drive`] with [`carry_out`]), then
    /// retention of what they are done with; a store changed by retention is written at the
    /// batch's commit, before confirmations go out.
    pub(super) fn run_output(&mut self) {
        if self.stream.needs_drive() {
            self.drive_at(Instant::now());
        }
    }

    /// [`StreamEngine::run_output`] with `now` read by the caller.
    pub(super) fn run_output_at(&mut self, now: Instant) {
        if self.stream.needs_drive() {
            self.drive_at(now);
        }
    }

    fn drive_at(&mut self, now: Instant) {
        let account = Arc::clone(self.outbox.account());
        let router = account.router();
        let interest = |reply: &[u8]| router.has_interest(reply);
        let outbox = &mut self.outbox;
        let held = &mut self.consumers;
        if self
            .stream
            .drive(self.store.as_mut(), &interest, now, |cx, out| {
                carry_out(cx, outbox, held, out)
            })
        {
            self.store_dirty = true;
        }
    }

    /// Retention after the set of consumers or their filters changed, or after a restart
    /// ([`jsproto::stream::ConsumerSet::retention_sweep`]).
    pub fn retention_sweep(&mut self) {
        let account = Arc::clone(self.outbox.account());
        let router = account.router();
        let interest = |reply: &[u8]| router.has_interest(reply);
        if self
            .stream
            .retention_sweep(self.store.as_mut(), &interest, Instant::now())
        {
            self.store_dirty = true;
            self.run_output();
        }
    }

    /// A stream update from consumer limits `old` to `new`
    /// ([`jsproto::stream::ConsumerSet::check_consumer_limits`]).
    pub fn check_consumer_limits(
        &self,
        old: &jsproto::api::stream::ConsumerLimits,
        new: &jsproto::api::stream::ConsumerLimits,
    ) -> Result<(), ApiError> {
        self.stream.consumers().check_consumer_limits(old, new)
    }

    /// Publishes `CONSUMER.CREATED` / `CONSUMER.DELETED` for `consumer` if anyone listens.
    pub fn advise_consumer(&mut self, action: ConsumerAction, consumer: &str) {
        super::advisory::publish(
            &mut self.outbox,
            JsAdvisory::Consumer {
                action,
                stream: &self.stream.config().name,
                consumer,
            },
        );
    }

    /// Writes the state of changed consumers (file streams); with `fsync`, durably. Then
    /// sends the ack confirmations held for it.
    ///
    /// A replicated stream writes nothing: its consumers' state is in its Raft log, fsynced
    /// by a majority before an entry is applied, and rebuilt from it at every start (the
    /// consumer files are deleted then), so what waits for durability is sent at once.
    pub fn persist_consumers(&mut self, fsync: bool) {
        let now = Instant::now();
        if self.replica.is_some() {
            for (_, c) in self.stream.consumers_mut().iter_mut() {
                if c.is_dirty() {
                    c.mark_persisted(now, true);
                }
            }
            self.consumers.needs_fsync = false;
            for reply in std::mem::take(&mut self.consumers.held_ack_replies) {
                self.outbox.publish(&reply, None, &Bytes::new());
            }
            return;
        }
        let unix = self.stream.consumers_mut().unix_at(now, now, unix_now());
        let fsync = fsync || self.consumers.needs_fsync;
        let mut ok = true;
        let dir = self.dir.clone();
        for (name, c) in self
            .stream
            .consumers_mut()
            .iter_mut()
            .filter(|(_, c)| c.is_dirty())
        {
            let Some(dir) = dir.as_ref().filter(|_| !c.meta.config.mem_storage) else {
                c.mark_persisted(now, true);
                continue;
            };
            let state = c.core.snapshot(now, unix);
            let path = consumer_dir(dir, name).join("state.json");
            let bytes = serde_json::to_vec(&state).expect("state serialises");
            match super::write_atomically(&path, &bytes, fsync) {
                Ok(()) => c.mark_persisted(now, true),
                Err(err) => {
                    ok = false;
                    // Retried after PLAIN_ACK_PERSIST (or with the next confirmed ack), not
                    // at once: a failing disk must not make the thread spin.
                    c.mark_persisted(now, false);
                    warn!(consumer = %name, error = %err, "writing consumer state failed");
                }
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
        self.stream.consumers_mut().shutdown(Instant::now());
        self.run_output();
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
            .filter(|n| self.stream.consumers().contains(n))
            .cloned();
        if let Some(name) = existing {
            let config = self
                .stream
                .consumers()
                .check_update(&name, create, self.config())?;
            let current = &self
                .stream
                .consumers()
                .get(&name)
                .expect("exists")
                .meta
                .config;
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
        // The account's max_consumers caps each of its streams, as nats-server applies it.
        let account_max = self
            .outbox
            .account()
            .jetstream_limits()
            .map_or(-1, |l| l.max_consumers);
        let (name, config) =
            self.stream
                .consumers()
                .check_new(create, self.config(), account_max, generate_name)?;
        let meta = ConsumerMeta {
            name: name.clone(),
            durable: config.is_durable(),
            created: timestamp(unix_now()),
            config: config.clone(),
        };
        self.add_consumer(config.to_core(), config.start_policy(), meta, None)
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
        let core = self.with_rate_burst(named(config.to_core(), name));
        let account = Arc::clone(self.outbox.account());
        let router = account.router();
        let result = {
            let view = view!(self, router);
            self.stream
                .consumers_mut()
                .update(name, config.clone(), core, &view, Instant::now())
        };
        self.run_output();
        if result? {
            if let Some(links) = self.consumers.links.get_mut(name) {
                if let Some(old) = links.push.take() {
                    router.unwatch_interest(&old.subject, old.group.as_deref(), &old.watcher);
                    links.push = PushLink::of(&config, old.watcher);
                }
            }
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
        let (Some(dir), Some(c)) = (&self.dir, self.stream.consumers().get(name)) else {
            return Ok(());
        };
        if c.meta.config.mem_storage {
            return Ok(());
        }
        super::write_atomically(
            &consumer_dir(dir, name).join("meta.json"),
            &serde_json::to_vec(&c.meta).expect("meta serialises"),
            true,
        )
    }

    /// The consumer's info as CONSUMER.INFO/CREATE answer it. In a cluster it carries a
    /// `cluster` block: a replicated stream's group (its consumers are replicated with it,
    /// so their leader and replicas are the stream's), or `{name, leader}` for a stream of
    /// one replica, as nats-server's consumer info; none standalone.
    pub fn consumer_info(&mut self, name: &str) -> Option<ConsumerInfo> {
        let stream = self.stream.config().name.clone();
        let mut info = self.stream.consumers_mut().info(
            &stream,
            name,
            NATS_VERSION,
            Instant::now(),
            unix_now(),
        )?;
        info.cluster = self.replica_cluster_info().or_else(|| {
            let server = self.outbox.server();
            server
                .cluster()
                .map(|c| jsproto::api::cluster::ClusterInfo {
                    name: c.name().to_string(),
                    leader: server.server_name().to_string(),
                    ..Default::default()
                })
        });
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
        let names = self.stream.consumers().names();
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
            let mut meta: ConsumerMeta = match std::fs::read(path.join("meta.json"))
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
            if meta.name.is_empty() {
                // A legacy ephemeral: its directory is its name.
                meta.name = entry.file_name().to_string_lossy().into_owned();
            }
            let state: Option<PersistedState> = std::fs::read(path.join("state.json"))
                .ok()
                .and_then(|b| serde_json::from_slice(&b).ok());
            let name = meta.name.clone();
            let config = meta.config.clone();
            let result = self.add_consumer(
                config.to_core(),
                config.start_policy(),
                meta,
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

/// Carries out the consumers' output `out`, in order: deliveries (the stored message with the
/// ack subject as reply, the pin id or the `headers_only` size added to its headers),
/// statuses, ack confirmations (held in `held` until the consumer state holding them is
/// durable), the dead-letter path and advisories.
pub(super) fn carry_out(
    cx: &Context<'_>,
    outbox: &mut Outbox,
    held: &mut Consumers,
    out: &mut Vec<(Arc<str>, Action)>,
) {
    let stream = cx.config.name.as_str();
    let any_headers_only = cx.consumers.any_headers_only();
    for (name, action) in out.drain(..) {
        match action {
            Action::Deliver {
                reply_to,
                ack,
                pin_id,
            } => {
                let msg = match cx.store.load(ack.stream_seq) {
                    Ok(Some(m)) => m,
                    other => {
                        warn!(
                            stream,
                            seq = ack.stream_seq,
                            ?other,
                            "delivery of a missing message skipped"
                        );
                        continue;
                    }
                };
                let mut reply = String::with_capacity(ack.v1_len(stream.len(), name.len()));
                let _ = ack.write_v1(stream, &name, &mut reply);
                let subject = Bytes::copy_from_slice(msg.subject.as_bytes());
                let headers_only = any_headers_only
                    && cx
                        .consumers
                        .get(&name)
                        .is_some_and(|c| c.meta.config.headers_only);
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
                outbox.publish_with_reply(
                    &reply_to,
                    &subject,
                    &Bytes::from(reply),
                    block.as_ref(),
                    &payload,
                );
            }
            Action::Status { reply_to, status } => {
                let block = Bytes::from(status.header_block());
                outbox.publish(&reply_to, Some(&block), &Bytes::new());
            }
            Action::PushStatus {
                deliver_subject,
                status,
            } => {
                let block = Bytes::from(status.header_block());
                match status.reply() {
                    Some(reply) => outbox.publish_with_reply(
                        &deliver_subject,
                        &deliver_subject,
                        reply,
                        Some(&block),
                        &Bytes::new(),
                    ),
                    None => outbox.publish(&deliver_subject, Some(&block), &Bytes::new()),
                }
            }
            Action::AckReply { reply_to } => {
                // Held until the state holding the ack is durable (see the module doc).
                held.held_ack_replies.push(reply_to);
                held.needs_fsync = true;
            }
            // Kept apart by the consumer set, for retention after this output.
            Action::Acked { .. } => {}
            Action::Resumed => {
                let pause_until = cx
                    .consumers
                    .get(&name)
                    .and_then(|c| c.meta.config.pause_until)
                    .map_or(jsproto::api::time::Timestamp::ZERO, |t| t.instant);
                super::advisory::publish(
                    outbox,
                    JsAdvisory::Pause {
                        stream,
                        consumer: &name,
                        paused: false,
                        pause_until,
                    },
                );
            }
            Action::Advisory(advisory) => {
                dead_letter(cx, outbox, &name, &advisory);
                super::advisory::publish(
                    outbox,
                    JsAdvisory::Message {
                        stream,
                        consumer: &name,
                        advisory: &advisory,
                    },
                );
            }
        }
    }
}

/// The dead-letter path ([`jsproto::consumer::dead_letter`]): a message `consumer` gave up on
/// is republished, before its advisory, to the subject its metadata names.
fn dead_letter(cx: &Context<'_>, outbox: &mut Outbox, consumer: &str, advisory: &Advisory) {
    use jsproto::consumer::dead_letter::{GivenUp, METADATA_KEY};
    let Some(given_up) = GivenUp::of(advisory) else {
        return;
    };
    let Some(to) = cx
        .consumers
        .get(consumer)
        .and_then(|c| c.meta.config.metadata.get(METADATA_KEY))
        .filter(|s| jsproto::subject::is_valid_publish_subject(s.as_bytes()))
        .map(|s| Bytes::copy_from_slice(s.as_bytes()))
    else {
        return;
    };
    let stream = cx.config.name.as_str();
    let msg = match cx.store.load(given_up.stream_seq) {
        Ok(Some(m)) => m,
        other => {
            warn!(
                stream,
                consumer,
                seq = given_up.stream_seq,
                ?other,
                "dead letter of a missing message skipped"
            );
            return;
        }
    };
    let headers =
        Bytes::from(given_up.header_block(msg.headers.as_deref(), stream, &msg.subject, consumer));
    outbox.publish(&to, Some(&headers), &msg.payload);
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

/// The state machine's config for consumer `name` ([`ApiConsumerConfig::to_core`]), named
/// `name` even when the stored config has no name (a legacy ephemeral), since the core builds
/// ack and flow-control subjects from it.
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
pub(super) fn generate_name() -> String {
    use rand::Rng;
    const ALPHABET: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let mut rng = rand::rng();
    (0..8)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect()
}

/// The subject pull requests for consumer `consumer` of stream `stream` are sent to:
/// `$JS.API.CONSUMER.MSG.NEXT.<stream>.<consumer>` (nats-server's).
pub(super) fn pull_subject(stream: &str, consumer: &str) -> String {
    format!("$JS.API.CONSUMER.MSG.NEXT.{stream}.{consumer}")
}
