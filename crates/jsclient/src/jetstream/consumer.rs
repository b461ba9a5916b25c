//! Pull consumers: `fetch`, `batch`, `next` and the continuous `messages()` stream.
//!
//! A pull is a request on `$JS.API.CONSUMER.MSG.NEXT.<stream>.<consumer>` whose reply inbox
//! receives the messages and then, possibly, a status (`consumer-semantics.md` §6):
//! `100` idle heartbeat (liveness only), `404 No Messages` / `408 Request Timeout` (the pull is
//! over; `Nats-Pending-Messages` says how many of its batch were not delivered), `409` with a
//! description (`Consumer Deleted` ends everything; `Batch Completed`, `Message Size Exceeds
//! MaxBytes` end the pull; the `Exceeded Max…` limits are errors), `503` (no such consumer).
//!
//! On a consumer with priority groups (ADR-42), [`PullConsumer::with_priority_group`] makes
//! every pull carry the group fields ([`PriorityPull`]); on a `pinned_client` consumer the
//! handle keeps the pin id it was given (`Nats-Pin-Id` on its messages) and sends it back with
//! each pull, and forgets it when the server says it is stale (`423`).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context as TaskContext, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use tokio::sync::mpsc;
use tokio::time::{sleep_until, Instant};

use super::{Context, JetStreamError, Message};
use crate::{ClientError, State};

/// Consumer configuration (`jsproto`'s `ConsumerConfig`). Note that a zero `ack_policy` is
/// `none`, as on the wire; [`pull_config`] gives the usual explicit-ack durable.
pub type Config = jsproto::api::consumer::ConsumerConfig;
/// Consumer info: config, delivered and ack-floor sequences, pending counts.
pub type Info = jsproto::api::consumer::ConsumerInfo;
/// `ack_policy`.
pub type AckPolicy = jsproto::api::consumer::AckPolicy;
/// `deliver_policy`.
pub type DeliverPolicy = jsproto::api::consumer::DeliverPolicy;

/// A durable pull consumer config with `ack_policy: explicit` (the default of every client).
pub fn pull_config(durable_name: impl Into<String>) -> Config {
    Config {
        durable_name: durable_name.into(),
        ack_policy: AckPolicy::Explicit,
        ..Config::default()
    }
}

/// Why pulling messages failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConsumerError {
    /// The pull request could not be sent.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// The consumer does not exist (the pull got `503` no responders).
    #[error("consumer not found (no responders)")]
    NoResponders,
    /// `409 Consumer Deleted`: the consumer was deleted while pulling.
    #[error("consumer deleted")]
    ConsumerDeleted,
    /// No message, heartbeat or status for two heartbeat intervals: the server may be gone.
    #[error("missed idle heartbeats")]
    MissingHeartbeats,
    /// An ordered consumer could not re-create its consumer after a gap, missed heartbeats or
    /// a reconnect; it tries again.
    #[error("re-creating the ordered consumer failed: {0}")]
    Recreate(String),
    /// `423`: the pin id this handle sent is not (or no longer) the consumer's pin, because
    /// another client holds it or it was released. The handle forgot it; the next pull waits
    /// for the pin like any other.
    #[error("pin id mismatch: {description}")]
    PinIdMismatch {
        /// `Nats-Pin-Id mismatch` or `Nats-Wrong-Pin-Id`.
        description: String,
    },
    /// Another status that ends the pull with an error (`409 Exceeded MaxWaiting`,
    /// `400 Bad Request - …`, `409 Consumer is push based`, …).
    #[error("pull failed with status {code} {description}")]
    Status {
        /// Status code.
        code: u16,
        /// Status description, verbatim.
        description: String,
    },
}

/// The priority-group fields of a pull (ADR-42; nats-server's `PriorityGroup`). Zero means
/// "not set" for the numbers, as on the wire.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PriorityPull {
    /// `group`: one of the consumer's `priority_groups`.
    pub group: String,
    /// `min_pending` (policy `overflow`): be served only while the consumer's `num_pending`
    /// is at least this: a standby worker that helps only when a backlog builds up.
    pub min_pending: u64,
    /// `min_ack_pending` (policy `overflow`): be served only while `num_ack_pending` is at
    /// least this (either threshold met is enough).
    pub min_ack_pending: u64,
    /// `priority` (policy `prioritized`): 0 (served first) to 9.
    pub priority: u8,
}

impl PriorityPull {
    /// Pulls in `group` with no thresholds and priority 0.
    pub fn group(group: impl Into<String>) -> Self {
        Self {
            group: group.into(),
            ..Self::default()
        }
    }
}

#[derive(Debug)]
struct Priority {
    pull: PriorityPull,
    /// The pin id last seen on a delivery (`Nats-Pin-Id`), sent back as `id`.
    pin: Mutex<Option<String>>,
}

impl Priority {
    fn pin(&self) -> Option<String> {
        self.pin.lock().expect("pin lock").clone()
    }

    fn set_pin(&self, pin: Option<String>) {
        *self.pin.lock().expect("pin lock") = pin;
    }

    /// Keeps the pin id a delivery carries.
    fn note(&self, msg: &crate::Message) {
        if let Some(id) = msg
            .headers
            .as_ref()
            .and_then(|h| h.get(jsproto::headers::PIN_ID))
        {
            if self.pin().as_deref() != Some(id) {
                self.set_pin(Some(id.to_owned()));
            }
        }
    }
}

/// A handle on a pull consumer.
#[derive(Debug, Clone)]
pub struct PullConsumer {
    context: Context,
    info: Info,
    priority: Option<Arc<Priority>>,
}

impl PullConsumer {
    pub(crate) fn new(context: Context, info: Info) -> PullConsumer {
        PullConsumer {
            context,
            info,
            priority: None,
        }
    }

    /// This handle's pulls carry the priority-group fields `pull` (needed on a consumer with
    /// a `priority_policy`, refused with `400` on one without). Clones share the pin id.
    pub fn with_priority_group(mut self, pull: PriorityPull) -> PullConsumer {
        self.priority = Some(Arc::new(Priority {
            pull,
            pin: Mutex::new(None),
        }));
        self
    }

    /// The pin id this handle holds on a `pinned_client` consumer, if any: set by the first
    /// message delivered with `Nats-Pin-Id`, cleared by a `423`.
    pub fn pin_id(&self) -> Option<String> {
        self.priority.as_ref().and_then(|p| p.pin())
    }

    /// Records what a delivery or status says about the pin.
    fn observe(&self, msg: &crate::Message) {
        if let Some(p) = &self.priority {
            if msg.status == Some(423) {
                p.set_pin(None);
            } else if msg.status.is_none() {
                p.note(msg);
            }
        }
    }

    /// The consumer's name.
    pub fn name(&self) -> &str {
        &self.info.name
    }

    /// The stream's name.
    pub fn stream_name(&self) -> &str {
        &self.info.stream_name
    }

    /// The info from the last fetch (no request).
    pub fn cached_info(&self) -> &Info {
        &self.info
    }

    /// Fetches fresh info (`CONSUMER.INFO`) and caches it.
    ///
    /// # Errors
    ///
    /// As [`Context::request`](super::Context::request).
    pub async fn info(&mut self) -> Result<&Info, JetStreamError> {
        self.info = self
            .context
            .consumer_info(&self.info.stream_name, &self.info.name)
            .await?;
        Ok(&self.info)
    }

    fn next_subject(&self) -> String {
        format!(
            "{}.CONSUMER.MSG.NEXT.{}.{}",
            self.context.prefix, self.info.stream_name, self.info.name
        )
    }

    /// A one-shot pull that returns what is available now (`no_wait`): up to `max_messages`
    /// (default 10), then the batch ends.
    pub fn fetch(&self) -> BatchBuilder {
        BatchBuilder {
            consumer: self.clone(),
            max_messages: 10,
            max_bytes: 0,
            expires: None,
            heartbeat: None,
            no_wait: true,
        }
    }

    /// A one-shot pull that waits up to `expires` (default 30 s) for up to `max_messages`
    /// (default 10).
    pub fn batch(&self) -> BatchBuilder {
        BatchBuilder {
            consumer: self.clone(),
            max_messages: 10,
            max_bytes: 0,
            expires: Some(Duration::from_secs(30)),
            heartbeat: None,
            no_wait: false,
        }
    }

    /// The next message, waiting up to `expires`; `Ok(None)` if none arrived in time.
    ///
    /// # Errors
    ///
    /// As [`BatchBuilder::messages`], or an error status of the pull.
    pub async fn next(&self, expires: Duration) -> Result<Option<Message>, ConsumerError> {
        let mut batch = self
            .batch()
            .max_messages(1)
            .expires(expires)
            .messages()
            .await?;
        batch.next().await.transpose()
    }

    /// The continuous stream with defaults (see [`PullConsumer::stream`]).
    ///
    /// # Errors
    ///
    /// [`ConsumerError::Client`] if the inbox subscription cannot be made.
    pub async fn messages(&self) -> Result<Messages, ConsumerError> {
        self.stream().messages().await
    }

    /// Configures the continuous stream: keeps pulls of up to `max_messages_per_batch`
    /// (default 500) outstanding, re-pulling when half is consumed; each pull expires after
    /// `expires` (default 30 s) and asks for idle heartbeats every `heartbeat` (default 15 s).
    pub fn stream(&self) -> StreamBuilder {
        StreamBuilder {
            consumer: self.clone(),
            batch: 500,
            expires: Duration::from_secs(30),
            heartbeat: Duration::from_secs(15),
        }
    }

    async fn send_pull(
        &self,
        inbox: &str,
        batch: u64,
        max_bytes: u64,
        expires: Option<Duration>,
        heartbeat: Option<Duration>,
        no_wait: bool,
    ) -> Result<(), ClientError> {
        let mut body = serde_json::Map::new();
        body.insert("batch".into(), batch.into());
        if let Some(e) = expires {
            body.insert("expires".into(), jsproto::api::nanos::to_i64(e).into());
        }
        if max_bytes > 0 {
            body.insert("max_bytes".into(), max_bytes.into());
        }
        if let Some(h) = heartbeat {
            body.insert(
                "idle_heartbeat".into(),
                jsproto::api::nanos::to_i64(h).into(),
            );
        }
        if no_wait {
            body.insert("no_wait".into(), true.into());
        }
        if let Some(p) = &self.priority {
            let f = &p.pull;
            body.insert("group".into(), f.group.clone().into());
            if f.min_pending > 0 {
                body.insert("min_pending".into(), f.min_pending.into());
            }
            if f.min_ack_pending > 0 {
                body.insert("min_ack_pending".into(), f.min_ack_pending.into());
            }
            if f.priority > 0 {
                body.insert("priority".into(), f.priority.into());
            }
            if let Some(id) = p.pin() {
                body.insert("id".into(), id.into());
            }
        }
        let body = serde_json::to_vec(&body).expect("a JSON map serializes");
        self.context
            .client()
            .publish_with_reply(self.next_subject(), inbox, Bytes::from(body))
            .await
    }
}

/// What a status message means for a pull.
enum StatusEffect {
    /// Heartbeat: liveness only.
    Alive,
    /// The pull is over; this many of its messages were not delivered (`None` = unknown).
    PullDone(Option<u64>),
    /// An error; `true` if it ends the consumer stream for good.
    Error(ConsumerError, bool),
}

fn classify(msg: &crate::Message) -> StatusEffect {
    let code = msg.status.unwrap_or(0);
    let description = msg.description.clone().unwrap_or_default();
    let pending = msg
        .headers
        .as_ref()
        .and_then(|h| h.get(jsproto::headers::PENDING_MESSAGES))
        .and_then(|v| v.trim().parse().ok());
    match code {
        100 => StatusEffect::Alive,
        404 | 408 => StatusEffect::PullDone(pending),
        423 => StatusEffect::Error(ConsumerError::PinIdMismatch { description }, false),
        503 => StatusEffect::Error(ConsumerError::NoResponders, false),
        409 if description.eq_ignore_ascii_case("Consumer Deleted") => {
            StatusEffect::Error(ConsumerError::ConsumerDeleted, true)
        }
        409 if description.eq_ignore_ascii_case("Consumer is push based") => {
            StatusEffect::Error(ConsumerError::Status { code, description }, true)
        }
        409 if pending.is_some() => StatusEffect::PullDone(pending),
        _ => StatusEffect::Error(ConsumerError::Status { code, description }, false),
    }
}

/// Builder of a one-shot pull ([`PullConsumer::fetch`], [`PullConsumer::batch`]).
#[derive(Debug)]
pub struct BatchBuilder {
    consumer: PullConsumer,
    max_messages: u64,
    max_bytes: u64,
    expires: Option<Duration>,
    heartbeat: Option<Duration>,
    no_wait: bool,
}

impl BatchBuilder {
    /// At most this many messages (at least 1).
    pub fn max_messages(mut self, n: u64) -> Self {
        self.max_messages = n.max(1);
        self
    }

    /// Byte budget of the pull (subject + ack subject + headers + payload per message);
    /// 0 = none.
    pub fn max_bytes(mut self, bytes: u64) -> Self {
        self.max_bytes = bytes;
        self
    }

    /// How long the server keeps the pull open.
    pub fn expires(mut self, expires: Duration) -> Self {
        self.expires = Some(expires);
        self
    }

    /// Ask for idle heartbeats; two missed intervals end the batch with
    /// [`ConsumerError::MissingHeartbeats`]. Must be at most half of `expires`.
    pub fn heartbeat(mut self, heartbeat: Duration) -> Self {
        self.heartbeat = Some(heartbeat);
        self
    }

    /// Sends the pull and returns the stream of its messages. The stream ends after
    /// `max_messages`, at `404`/`408`, or when `expires` (plus 1 s of grace; for `fetch`, the
    /// context timeout) passes without an answer.
    ///
    /// # Errors
    ///
    /// [`ConsumerError::Client`] if the pull cannot be sent.
    pub async fn messages(self) -> Result<Batch, ConsumerError> {
        let client = self.consumer.context.client().clone();
        let inbox = client.new_inbox();
        let sub = client.subscribe(inbox.clone()).await?;
        self.consumer
            .send_pull(
                &inbox,
                self.max_messages,
                self.max_bytes,
                self.expires,
                self.heartbeat,
                self.no_wait,
            )
            .await?;
        let grace = match self.expires {
            Some(e) => e + Duration::from_secs(1),
            None => self.consumer.context.timeout(),
        };
        Ok(Batch {
            sub,
            consumer: self.consumer.clone(),
            context: self.consumer.context.clone(),
            remaining: self.max_messages,
            deadline: Box::pin(sleep_until(Instant::now() + grace)),
            heartbeat: self
                .heartbeat
                .map(|h| (h * 2, Box::pin(sleep_until(Instant::now() + h * 2)))),
            done: false,
        })
    }
}

/// The messages of one pull: a `Stream` of `Result<Message, ConsumerError>`.
#[derive(Debug)]
pub struct Batch {
    sub: crate::Subscriber,
    consumer: PullConsumer,
    context: Context,
    remaining: u64,
    deadline: Pin<Box<tokio::time::Sleep>>,
    heartbeat: Option<(Duration, Pin<Box<tokio::time::Sleep>>)>,
    done: bool,
}

impl futures_util::Stream for Batch {
    type Item = Result<Message, ConsumerError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        loop {
            if this.done || this.remaining == 0 {
                return Poll::Ready(None);
            }
            match this.sub.poll_next_unpin(cx) {
                Poll::Ready(Some(msg)) => {
                    if let Some((every, timer)) = this.heartbeat.as_mut() {
                        timer.as_mut().reset(Instant::now() + *every);
                    }
                    this.consumer.observe(&msg);
                    if msg.status.is_none() || !msg.payload.is_empty() {
                        this.remaining -= 1;
                        return Poll::Ready(Some(Ok(Message {
                            message: msg,
                            context: this.context.clone(),
                        })));
                    }
                    match classify(&msg) {
                        StatusEffect::Alive => continue,
                        StatusEffect::PullDone(_) => {
                            this.done = true;
                            return Poll::Ready(None);
                        }
                        StatusEffect::Error(e, _) => {
                            this.done = true;
                            return Poll::Ready(Some(Err(e)));
                        }
                    }
                }
                Poll::Ready(None) => {
                    this.done = true;
                    return Poll::Ready(None);
                }
                Poll::Pending => {}
            }
            if let Some((_, timer)) = this.heartbeat.as_mut() {
                if timer.as_mut().poll(cx).is_ready() {
                    this.done = true;
                    return Poll::Ready(Some(Err(ConsumerError::MissingHeartbeats)));
                }
            }
            if this.deadline.as_mut().poll(cx).is_ready() {
                this.done = true;
                return Poll::Ready(None);
            }
            return Poll::Pending;
        }
    }
}

/// Builder of the continuous stream ([`PullConsumer::stream`]).
#[derive(Debug)]
pub struct StreamBuilder {
    consumer: PullConsumer,
    batch: u64,
    expires: Duration,
    heartbeat: Duration,
}

impl StreamBuilder {
    /// Messages requested per pull (default 500).
    pub fn max_messages_per_batch(mut self, n: u64) -> Self {
        self.batch = n.max(1);
        self
    }

    /// Lifetime of each pull (default 30 s).
    pub fn expires(mut self, expires: Duration) -> Self {
        self.expires = expires;
        self
    }

    /// Idle heartbeat interval asked of the server (default 15 s; at most half of `expires`).
    /// Two missed intervals yield [`ConsumerError::MissingHeartbeats`] and a fresh pull.
    pub fn heartbeat(mut self, heartbeat: Duration) -> Self {
        self.heartbeat = heartbeat;
        self
    }

    /// Starts pulling in a background task.
    ///
    /// # Errors
    ///
    /// [`ConsumerError::Client`] if the inbox subscription cannot be made.
    pub async fn messages(self) -> Result<Messages, ConsumerError> {
        let client = self.consumer.context.client().clone();
        let inbox = client.new_inbox();
        let sub = client.subscribe(inbox.clone()).await?;
        let (tx, rx) = mpsc::channel(usize::try_from(self.batch).unwrap_or(usize::MAX).min(4096));
        let heartbeat = self.heartbeat.min(self.expires / 2);
        tokio::spawn(pull_loop(
            self.consumer,
            inbox,
            sub,
            self.batch,
            self.expires,
            heartbeat,
            tx,
        ));
        Ok(Messages { rx })
    }
}

/// The continuous stream of a pull consumer: `Result<Message, ConsumerError>` items. Errors
/// other than [`ConsumerError::ConsumerDeleted`] are reported and pulling goes on. Dropping
/// it stops the background task.
#[derive(Debug)]
pub struct Messages {
    rx: mpsc::Receiver<Result<Message, ConsumerError>>,
}

impl futures_util::Stream for Messages {
    type Item = Result<Message, ConsumerError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Option<Self::Item>> {
        self.rx.poll_recv(cx)
    }
}

/// Keeps up to `batch` messages requested: re-pulls when what is outstanding drops to half.
async fn pull_loop(
    consumer: PullConsumer,
    inbox: String,
    mut sub: crate::Subscriber,
    batch: u64,
    expires: Duration,
    heartbeat: Duration,
    tx: mpsc::Sender<Result<Message, ConsumerError>>,
) {
    let mut state = consumer.context.client().state_watch();
    let mut pending: u64 = 0;
    let threshold = batch / 2;
    let hb_timeout = heartbeat * 2;
    let mut hb_deadline = Instant::now() + hb_timeout;
    let mut retry_at: Option<Instant> = None;
    loop {
        if pending <= threshold && retry_at.is_none_or(|t| Instant::now() >= t) {
            retry_at = None;
            let want = batch - pending;
            if let Err(e) = consumer
                .send_pull(&inbox, want, 0, Some(expires), Some(heartbeat), false)
                .await
            {
                let _ = tx.send(Err(e.into())).await;
                return;
            }
            pending += want;
            hb_deadline = Instant::now() + hb_timeout;
        }
        let wake = retry_at.map_or(hb_deadline, |t| t.min(hb_deadline));
        tokio::select! {
            () = tx.closed() => return,
            msg = sub.next() => {
                let Some(msg) = msg else { return };
                hb_deadline = Instant::now() + hb_timeout;
                consumer.observe(&msg);
                if msg.status.is_none() || !msg.payload.is_empty() {
                    pending = pending.saturating_sub(1);
                    let m = Message { message: msg, context: consumer.context.clone() };
                    if tx.send(Ok(m)).await.is_err() {
                        return;
                    }
                    continue;
                }
                match classify(&msg) {
                    StatusEffect::Alive => {}
                    StatusEffect::PullDone(left) => {
                        pending = pending.saturating_sub(left.unwrap_or(pending));
                    }
                    // A stale pin id: forgotten (observe), pull again at once without it, to
                    // wait for the pin like any standby.
                    StatusEffect::Error(ConsumerError::PinIdMismatch { .. }, _) => pending = 0,
                    StatusEffect::Error(e, fatal) => {
                        if tx.send(Err(e)).await.is_err() || fatal {
                            return;
                        }
                        // Unknown which pull failed: start over after a pause.
                        pending = 0;
                        retry_at = Some(Instant::now() + Duration::from_millis(500));
                    }
                }
            }
            () = sleep_until(wake) => {
                if Instant::now() >= hb_deadline {
                    if tx.send(Err(ConsumerError::MissingHeartbeats)).await.is_err() {
                        return;
                    }
                    pending = 0;
                    hb_deadline = Instant::now() + hb_timeout;
                }
            }
            changed = state.changed() => {
                if changed.is_err() {
                    return;
                }
                let now = *state.borrow();
                match now {
                    // Pulls die with the old connection: pull again on the new one.
                    State::Connected => pending = 0,
                    State::Closed => return,
                    _ => {}
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jsproto::headers::Headers;

    fn status(block: &[u8]) -> crate::Message {
        let h = Headers::parse(block).unwrap();
        crate::Message {
            subject: "_INBOX.x".into(),
            reply: None,
            payload: Bytes::new(),
            status: h.status(),
            description: h.description().map(str::to_owned),
            headers: Some(h),
            length: block.len(),
        }
    }

    #[test]
    fn statuses_are_classified_as_the_reference_clients_do() {
        let hb = status(
            b"NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: 0\r\nNats-Last-Stream: 10\r\n\r\n",
        );
        assert!(matches!(classify(&hb), StatusEffect::Alive));
        let timeout = status(b"NATS/1.0 408 Request Timeout\r\nNats-Pending-Messages: 2\r\nNats-Pending-Bytes: 0\r\n\r\n");
        assert!(matches!(
            classify(&timeout),
            StatusEffect::PullDone(Some(2))
        ));
        let none = status(b"NATS/1.0 404 No Messages\r\n\r\n");
        assert!(matches!(classify(&none), StatusEffect::PullDone(None)));
        let done = status(b"NATS/1.0 409 Batch Completed\r\nNats-Pending-Messages: 0\r\nNats-Pending-Bytes: 953\r\n\r\n");
        assert!(matches!(classify(&done), StatusEffect::PullDone(Some(0))));
        let deleted = status(b"NATS/1.0 409 Consumer Deleted\r\n\r\n");
        assert!(matches!(
            classify(&deleted),
            StatusEffect::Error(ConsumerError::ConsumerDeleted, true)
        ));
        let waiting = status(b"NATS/1.0 409 Exceeded MaxWaiting\r\n\r\n");
        assert!(matches!(
            classify(&waiting),
            StatusEffect::Error(ConsumerError::Status { code: 409, .. }, false)
        ));
        let gone = status(b"NATS/1.0 503\r\n\r\n");
        assert!(matches!(
            classify(&gone),
            StatusEffect::Error(ConsumerError::NoResponders, false)
        ));
    }
}
