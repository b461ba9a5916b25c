//! Push consumers and ordered consumers.
//!
//! A push consumer delivers by itself to its `deliver_subject` while someone subscribes there
//! (in its `deliver_group` queue group when it has one). [`Context::push_messages`] subscribes
//! and returns the stream of its messages; a background task answers the server's
//! `100 FlowControl Request`s (an empty message to their `$JS.FC…` reply subject, as every
//! official client does) and reports [`ConsumerError::MissingHeartbeats`] when two
//! `idle_heartbeat` intervals pass without a message, heartbeat or status.
//!
//! An ordered consumer ([`Context::ordered`]) is what the official clients build key-value
//! watchers on: an ephemeral push consumer with `ack_policy: none`, `max_deliver: 1`,
//! `mem_storage`, flow control and idle heartbeats that the client re-creates, from the
//! stream sequence after the last one it handed out, whenever it sees a gap in consumer
//! sequences (also the one a heartbeat's `Nats-Last-Consumer` reveals), misses heartbeats,
//! or reconnects. Its messages arrive in stream order, each once, with nothing to
//! acknowledge.

use std::pin::Pin;
use std::task::{Context as TaskContext, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use tokio::sync::mpsc;
use tokio::time::{sleep_until, Instant};

use super::consumer::{ConsumerError, DeliverPolicy, Info};
use super::{api, check_name, json, Context, JetStreamError, Message};
use crate::State;

/// The `Nats-Last-Consumer` header of an idle heartbeat.
const LAST_CONSUMER: &str = jsproto::headers::LAST_CONSUMER;

/// The messages of a push consumer ([`Context::push_messages`]) or an ordered consumer
/// ([`Context::ordered`]): `Result<Message, ConsumerError>` items. Dropping it stops the
/// background task (and, for an ordered consumer, lets the server remove its consumer).
#[derive(Debug)]
pub struct PushMessages {
    rx: mpsc::Receiver<Result<Message, ConsumerError>>,
}

impl futures_util::Stream for PushMessages {
    type Item = Result<Message, ConsumerError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Option<Self::Item>> {
        self.rx.poll_recv(cx)
    }
}

/// What a message on a push subscription is.
enum Incoming {
    Delivery,
    Heartbeat { last_consumer_seq: Option<u64> },
    FlowControl(String),
    Other,
}

fn classify(msg: &crate::Message) -> Incoming {
    if msg.status != Some(100) {
        return if msg.status.is_none() || !msg.payload.is_empty() {
            Incoming::Delivery
        } else {
            Incoming::Other
        };
    }
    match &msg.reply {
        Some(reply) if reply.starts_with("$JS.FC.") => Incoming::FlowControl(reply.clone()),
        _ => Incoming::Heartbeat {
            last_consumer_seq: msg
                .headers
                .as_ref()
                .and_then(|h| h.get(LAST_CONSUMER))
                .and_then(|v| v.trim().parse().ok()),
        },
    }
}

/// Options of an ordered consumer ([`Context::ordered`]).
#[derive(Debug, Clone, Default)]
pub struct OrderedConfig {
    /// Only messages on these subjects (empty: every message of the stream).
    pub filter_subjects: Vec<String>,
    /// Where to start (default `all`); `by_start_sequence` with `opt_start_seq`.
    pub deliver_policy: DeliverPolicy,
    /// With [`DeliverPolicy::ByStartSequence`].
    pub opt_start_seq: u64,
    /// Headers only (`Nats-Msg-Size` instead of the payload).
    pub headers_only: bool,
    /// Idle heartbeat asked of the server (default 5 s, as nats.go's ordered consumer).
    pub heartbeat: Option<Duration>,
}

impl Context {
    /// Subscribes to push consumer `consumer` of `stream`: its `deliver_subject`, in its
    /// `deliver_group` when it has one (so several processes share the consumer, each message
    /// to one of them). Flow-control requests are answered.
    ///
    /// # Errors
    ///
    /// As [`Context::request`] for the consumer's info; [`JetStreamError::WrongKind`] when it
    /// is a pull consumer; [`JetStreamError::Client`] when the subscription fails.
    pub async fn push_messages(
        &self,
        stream: &str,
        consumer: &str,
    ) -> Result<PushMessages, JetStreamError> {
        let info = self.consumer_info(stream, consumer).await?;
        let cfg = info.config.clone().unwrap_or_default();
        if cfg.deliver_subject.is_empty() {
            return Err(JetStreamError::WrongKind(format!(
                "consumer {stream} > {consumer} is a pull consumer"
            )));
        }
        let sub = if cfg.deliver_group.is_empty() {
            self.client().subscribe(cfg.deliver_subject.clone()).await?
        } else {
            self.client()
                .queue_subscribe(cfg.deliver_subject.clone(), cfg.deliver_group.clone())
                .await?
        };
        let (tx, rx) = mpsc::channel(1024);
        let heartbeat = (!cfg.idle_heartbeat.is_zero()).then_some(cfg.idle_heartbeat);
        tokio::spawn(push_loop(self.clone(), sub, heartbeat, tx));
        Ok(PushMessages { rx })
    }

    /// An ordered consumer on `stream`: every message (matching the filter) once, in stream
    /// order, through consumers the client re-creates as needed (module docs). Nothing is
    /// acknowledged.
    ///
    /// # Errors
    ///
    /// As [`Context::request`] for creating the first consumer.
    pub async fn ordered(
        &self,
        stream: &str,
        config: OrderedConfig,
    ) -> Result<PushMessages, JetStreamError> {
        check_name(stream)?;
        let start = match config.deliver_policy {
            DeliverPolicy::ByStartSequence => Start::Seq(config.opt_start_seq.max(1)),
            p => Start::Policy(p),
        };
        let mut ordered = Ordered {
            context: self.clone(),
            stream: stream.to_owned(),
            config,
            name: None,
        };
        let sub = ordered.create(&start).await?;
        let (tx, rx) = mpsc::channel(1024);
        tokio::spawn(ordered_loop(ordered, sub, tx));
        Ok(PushMessages { rx })
    }
}

async fn push_loop(
    context: Context,
    mut sub: crate::Subscriber,
    heartbeat: Option<Duration>,
    tx: mpsc::Sender<Result<Message, ConsumerError>>,
) {
    let hb_timeout = heartbeat.map(|h| h * 2);
    let mut hb_deadline = hb_timeout.map(|t| Instant::now() + t);
    loop {
        let wake = hb_deadline.unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
        tokio::select! {
            () = tx.closed() => return,
            msg = sub.next() => {
                let Some(msg) = msg else { return };
                hb_deadline = hb_timeout.map(|t| Instant::now() + t);
                match classify(&msg) {
                    Incoming::Delivery => {
                        let m = Message { message: msg, context: context.clone() };
                        if tx.send(Ok(m)).await.is_err() {
                            return;
                        }
                    }
                    Incoming::FlowControl(reply) => {
                        let _ = context.client().publish(reply, Bytes::new()).await;
                    }
                    Incoming::Heartbeat { .. } | Incoming::Other => {}
                }
            }
            () = sleep_until(wake) => {
                if tx.send(Err(ConsumerError::MissingHeartbeats)).await.is_err() {
                    return;
                }
                hb_deadline = hb_timeout.map(|t| Instant::now() + t);
            }
        }
    }
}

/// Where an ordered consumer (re)starts.
enum Start {
    Policy(DeliverPolicy),
    Seq(u64),
}

struct Ordered {
    context: Context,
    stream: String,
    config: OrderedConfig,
    /// The current consumer's name (deleted when replaced).
    name: Option<String>,
}

impl Ordered {
    /// Creates the next consumer (deleting the last one) and subscribes to its inbox.
    async fn create(&mut self, start: &Start) -> Result<crate::Subscriber, JetStreamError> {
        if let Some(old) = self.name.take() {
            let _ = self
                .context
                .delete_consumer_from_stream(&old, &self.stream)
                .await;
        }
        let inbox = self.context.client().new_inbox();
        let sub = self.context.client().subscribe(inbox.clone()).await?;
        let mut cfg = super::consumer::Config {
            deliver_subject: inbox,
            ack_policy: super::consumer::AckPolicy::None,
            max_deliver: 1,
            mem_storage: true,
            num_replicas: 1,
            flow_control: true,
            idle_heartbeat: self.config.heartbeat.unwrap_or(Duration::from_secs(5)),
            inactive_threshold: Duration::from_secs(300),
            headers_only: self.config.headers_only,
            ..Default::default()
        };
        match self.config.filter_subjects.as_slice() {
            [] => {}
            [one] => cfg.filter_subject = one.clone(),
            many => cfg.filter_subjects = many.to_vec(),
        }
        match *start {
            Start::Policy(p) => cfg.deliver_policy = p,
            Start::Seq(seq) => {
                cfg.deliver_policy = DeliverPolicy::ByStartSequence;
                cfg.opt_start_seq = seq;
            }
        }
        let req = api::consumer::CreateConsumerRequest {
            stream_name: self.stream.clone(),
            config: cfg,
            ..Default::default()
        };
        let info: Info = self
            .context
            .request(&format!("CONSUMER.CREATE.{}", self.stream), json(&req))
            .await?;
        self.name = Some(info.name);
        Ok(sub)
    }
}

async fn ordered_loop(
    mut ordered: Ordered,
    mut sub: crate::Subscriber,
    tx: mpsc::Sender<Result<Message, ConsumerError>>,
) {
    let hb_timeout = ordered.config.heartbeat.unwrap_or(Duration::from_secs(5)) * 2;
    let mut hb_deadline = Instant::now() + hb_timeout;
    let mut state = ordered.context.client().state_watch();
    // The last consumer seq of the current consumer and the last stream seq handed out.
    let (mut last_cseq, mut last_sseq) = (0u64, None::<u64>);
    loop {
        let mut reset = false;
        tokio::select! {
            () = tx.closed() => break,
            msg = sub.next() => {
                let Some(msg) = msg else { break };
                hb_deadline = Instant::now() + hb_timeout;
                match classify(&msg) {
                    Incoming::Delivery => {
                        let m = Message { message: msg, context: ordered.context.clone() };
                        match m.info() {
                            Ok(info) if info.consumer_sequence == last_cseq + 1 => {
                                last_cseq = info.consumer_sequence;
                                last_sseq = Some(info.stream_sequence);
                                if tx.send(Ok(m)).await.is_err() {
                                    break;
                                }
                            }
                            // A gap (or a delivery of an old consumer): start over.
                            _ => reset = true,
                        }
                    }
                    Incoming::FlowControl(reply) => {
                        let _ = ordered.context.client().publish(reply, Bytes::new()).await;
                    }
                    Incoming::Heartbeat { last_consumer_seq } => {
                        if last_consumer_seq.is_some_and(|n| n != last_cseq) {
                            reset = true;
                        }
                    }
                    Incoming::Other => {}
                }
            }
            () = sleep_until(hb_deadline) => {
                let _ = tx.send(Err(ConsumerError::MissingHeartbeats)).await;
                reset = true;
            }
            changed = state.changed() => {
                if changed.is_err() {
                    break;
                }
                let now = *state.borrow();
                match now {
                    State::Connected => reset = true,
                    State::Closed => break,
                    _ => {}
                }
            }
        }
        if reset {
            let start = match last_sseq {
                Some(seq) => Start::Seq(seq + 1),
                None => match ordered.config.deliver_policy {
                    DeliverPolicy::ByStartSequence => {
                        Start::Seq(ordered.config.opt_start_seq.max(1))
                    }
                    p => Start::Policy(p),
                },
            };
            match ordered.create(&start).await {
                Ok(new_sub) => {
                    sub = new_sub;
                    last_cseq = 0;
                }
                Err(e) => {
                    // Try again after a pause (the server may be restarting).
                    if tx
                        .send(Err(ConsumerError::Recreate(e.to_string())))
                        .await
                        .is_err()
                    {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            }
            hb_deadline = Instant::now() + hb_timeout;
        }
    }
    if let Some(name) = ordered.name.take() {
        let _ = ordered
            .context
            .delete_consumer_from_stream(&name, &ordered.stream)
            .await;
    }
}
