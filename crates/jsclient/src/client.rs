//! The user-facing handles: [`Client`], [`Subscriber`] and [`Message`].

use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures_util::Stream;
use jsproto::headers::Headers;
use jsproto::wire::Info;
use rand::Rng;
use tokio::sync::{mpsc, oneshot, watch};

use crate::connection::{Command, State};
use crate::error::{ClientError, RequestError};
use crate::options::ConnectOptions;

/// A message received on a subscription, or a reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// The subject it was published to.
    pub subject: String,
    /// Its reply subject, if the publisher gave one.
    pub reply: Option<String>,
    /// The payload (may be empty).
    pub payload: Bytes,
    /// The parsed header block, for `HMSG`; `None` for `MSG`.
    pub headers: Option<Headers>,
    /// The status code of a status message (`NATS/1.0 503`, `404`, `408`, `409`, `100`, …).
    pub status: Option<u16>,
    /// The status description (`No Messages`, `Request Timeout`, …), if any.
    pub description: Option<String>,
    /// Bytes of header block plus payload, as on the wire.
    pub length: usize,
}

pub(crate) struct Inner {
    cmd: mpsc::Sender<Command>,
    next_sid: AtomicU64,
    next_token: AtomicU64,
    info: watch::Receiver<Arc<Info>>,
    state: watch::Receiver<State>,
    mux_prefix: String,
    inbox_prefix: String,
    request_timeout: Duration,
    subscription_capacity: usize,
}

/// A handle on one NATS connection; cheap to clone (all clones share the connection).
///
/// The connection lives in a background task that reconnects by itself (see
/// [`ConnectOptions`]). It closes after [`Client::drain`], or when every `Client` and
/// [`Subscriber`] is dropped (queued publishes are written first).
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("state", &*self.inner.state.borrow())
            .finish_non_exhaustive()
    }
}

/// A random token of 22 alphanumeric characters (as long as a NUID).
pub(crate) fn random_token() -> String {
    const ALPHABET: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let mut rng = rand::rng();
    (0..22)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect()
}

/// Checks a subject to publish or subscribe to: non-empty, no whitespace, no empty token.
pub(crate) fn check_subject(subject: &str) -> Result<(), ClientError> {
    let bad = subject.is_empty()
        || subject.bytes().any(|b| b.is_ascii_whitespace())
        || subject.split('.').any(str::is_empty);
    if bad {
        return Err(ClientError::InvalidSubject(subject.to_owned()));
    }
    Ok(())
}

impl Client {
    pub(crate) fn new(
        cmd: mpsc::Sender<Command>,
        info: watch::Receiver<Arc<Info>>,
        state: watch::Receiver<State>,
        opts: &ConnectOptions,
    ) -> Client {
        Client {
            inner: Arc::new(Inner {
                cmd,
                next_sid: AtomicU64::new(1),
                next_token: AtomicU64::new(1),
                info,
                state,
                mux_prefix: format!("{}.{}", opts.inbox_prefix, random_token()),
                inbox_prefix: opts.inbox_prefix.clone(),
                request_timeout: opts.request_timeout,
                subscription_capacity: opts.subscription_capacity,
            }),
        }
    }

    pub(crate) fn mux_prefix(&self) -> &str {
        &self.inner.mux_prefix
    }

    /// The current connection state.
    pub fn connection_state(&self) -> State {
        *self.inner.state.borrow()
    }

    /// A receiver that sees every state change (used to notice reconnects).
    pub fn state_watch(&self) -> watch::Receiver<State> {
        self.inner.state.clone()
    }

    /// The server's latest `INFO` (empty before the first successful handshake).
    pub fn server_info(&self) -> Info {
        (**self.inner.info.borrow()).clone()
    }

    /// The request timeout from the options (default 10 s).
    pub fn timeout(&self) -> Duration {
        self.inner.request_timeout
    }

    /// A fresh, unique inbox subject: `<inbox prefix>.<22 random characters>`.
    pub fn new_inbox(&self) -> String {
        format!("{}.{}", self.inner.inbox_prefix, random_token())
    }

    async fn send(&self, cmd: Command) -> Result<(), ClientError> {
        self.inner
            .cmd
            .send(cmd)
            .await
            .map_err(|_| ClientError::Closed)
    }

    fn check_size(&self, headers: Option<&Bytes>, payload: &Bytes) -> Result<(), ClientError> {
        let max = self.inner.info.borrow().max_payload;
        let len = payload.len() + headers.map_or(0, Bytes::len);
        if max > 0 && len as u64 > max {
            return Err(ClientError::MaxPayloadExceeded {
                len,
                max: usize::try_from(max).unwrap_or(usize::MAX),
            });
        }
        Ok(())
    }

    /// Publishes `payload` to `subject` (`PUB`). Returns once the message is queued for the
    /// connection task, not when the server has it: use [`Client::flush`] for that.
    ///
    /// # Errors
    ///
    /// [`ClientError::InvalidSubject`], [`ClientError::MaxPayloadExceeded`],
    /// [`ClientError::Closed`].
    pub async fn publish(
        &self,
        subject: impl Into<String>,
        payload: Bytes,
    ) -> Result<(), ClientError> {
        self.publish_full(subject.into(), None, None, payload).await
    }

    /// Publishes with a header block (`HPUB`).
    ///
    /// # Errors
    ///
    /// As [`Client::publish`].
    pub async fn publish_with_headers(
        &self,
        subject: impl Into<String>,
        headers: Headers,
        payload: Bytes,
    ) -> Result<(), ClientError> {
        self.publish_full(subject.into(), None, Some(headers), payload)
            .await
    }

    /// Publishes with a reply subject (`PUB <subject> <reply>`).
    ///
    /// # Errors
    ///
    /// As [`Client::publish`]; the reply subject is checked too.
    pub async fn publish_with_reply(
        &self,
        subject: impl Into<String>,
        reply: impl Into<String>,
        payload: Bytes,
    ) -> Result<(), ClientError> {
        self.publish_full(subject.into(), Some(reply.into()), None, payload)
            .await
    }

    /// Publishes with a reply subject and headers.
    ///
    /// # Errors
    ///
    /// As [`Client::publish_with_reply`].
    pub async fn publish_with_reply_and_headers(
        &self,
        subject: impl Into<String>,
        reply: impl Into<String>,
        headers: Headers,
        payload: Bytes,
    ) -> Result<(), ClientError> {
        self.publish_full(subject.into(), Some(reply.into()), Some(headers), payload)
            .await
    }

    pub(crate) async fn publish_full(
        &self,
        subject: String,
        reply: Option<String>,
        headers: Option<Headers>,
        payload: Bytes,
    ) -> Result<(), ClientError> {
        check_subject(&subject)?;
        if let Some(reply) = &reply {
            check_subject(reply)?;
        }
        let headers = headers.map(|h| h.to_bytes());
        self.check_size(headers.as_ref(), &payload)?;
        self.send(Command::Publish {
            subject,
            reply,
            headers,
            payload,
        })
        .await
    }

    /// Subscribes to `subject` (wildcards allowed). Every matching message goes to the returned
    /// [`Subscriber`] stream.
    ///
    /// # Errors
    ///
    /// [`ClientError::InvalidSubject`], [`ClientError::Closed`].
    pub async fn subscribe(&self, subject: impl Into<String>) -> Result<Subscriber, ClientError> {
        self.subscribe_inner(subject.into(), None).await
    }

    /// Subscribes as a member of queue group `queue`: each message goes to one member of the
    /// group only.
    ///
    /// # Errors
    ///
    /// As [`Client::subscribe`]; the queue name is checked like a subject.
    pub async fn queue_subscribe(
        &self,
        subject: impl Into<String>,
        queue: impl Into<String>,
    ) -> Result<Subscriber, ClientError> {
        self.subscribe_inner(subject.into(), Some(queue.into()))
            .await
    }

    async fn subscribe_inner(
        &self,
        subject: String,
        queue: Option<String>,
    ) -> Result<Subscriber, ClientError> {
        check_subject(&subject)?;
        if let Some(q) = &queue {
            check_subject(q)?;
        }
        let sid = self.inner.next_sid.fetch_add(1, Ordering::Relaxed);
        let capacity = self.inner.subscription_capacity;
        let (tx, rx) = mpsc::channel(capacity);
        self.send(Command::Subscribe {
            sid,
            subject,
            queue,
            tx,
        })
        .await?;
        Ok(Subscriber {
            sid,
            rx,
            cmd: self.inner.cmd.clone(),
            unsubscribed: false,
        })
    }

    /// Sends `payload` to `subject` and waits for the first reply, up to the request timeout
    /// ([`ConnectOptions::request_timeout`], default 10 s). Replies arrive on one shared
    /// `<inbox>.*` subscription.
    ///
    /// # Errors
    ///
    /// [`RequestError::NoResponders`] (the server's `503`), [`RequestError::TimedOut`],
    /// [`RequestError::Client`].
    pub async fn request(
        &self,
        subject: impl Into<String>,
        payload: Bytes,
    ) -> Result<Message, RequestError> {
        self.request_full(subject.into(), None, payload, self.inner.request_timeout)
            .await
    }

    /// [`Client::request`] with headers.
    ///
    /// # Errors
    ///
    /// As [`Client::request`].
    pub async fn request_with_headers(
        &self,
        subject: impl Into<String>,
        headers: Headers,
        payload: Bytes,
    ) -> Result<Message, RequestError> {
        self.request_full(
            subject.into(),
            Some(headers),
            payload,
            self.inner.request_timeout,
        )
        .await
    }

    /// Sends a request and returns the receiver of its reply without waiting.
    pub(crate) async fn send_request(
        &self,
        subject: String,
        headers: Option<Headers>,
        payload: Bytes,
    ) -> Result<oneshot::Receiver<Message>, ClientError> {
        check_subject(&subject)?;
        let headers = headers.map(|h| h.to_bytes());
        self.check_size(headers.as_ref(), &payload)?;
        let token = self
            .inner
            .next_token
            .fetch_add(1, Ordering::Relaxed)
            .to_string();
        let (tx, rx) = oneshot::channel();
        self.send(Command::Request {
            subject,
            token,
            headers,
            payload,
            tx,
        })
        .await?;
        Ok(rx)
    }

    pub(crate) async fn request_full(
        &self,
        subject: String,
        headers: Option<Headers>,
        payload: Bytes,
        timeout: Duration,
    ) -> Result<Message, RequestError> {
        let rx = self.send_request(subject, headers, payload).await?;
        match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(msg)) if msg.status == Some(503) => Err(RequestError::NoResponders),
            Ok(Ok(msg)) => Ok(msg),
            Ok(Err(_)) => Err(RequestError::Client(ClientError::Closed)),
            Err(_) => Err(RequestError::TimedOut),
        }
    }

    /// Waits until the server has processed everything sent before (a `PING`/`PONG` round
    /// trip). While disconnected it waits for the reconnect.
    ///
    /// # Errors
    ///
    /// [`ClientError::Closed`] if the connection closes first.
    pub async fn flush(&self) -> Result<(), ClientError> {
        let (tx, rx) = oneshot::channel();
        self.send(Command::Flush { tx }).await?;
        rx.await.map_err(|_| ClientError::Closed)
    }

    /// Unsubscribes every subscription, lets the messages already received reach the
    /// subscribers (their streams then end), sends queued publishes, and closes the connection.
    ///
    /// # Errors
    ///
    /// [`ClientError::Closed`] if it was already closed.
    pub async fn drain(&self) -> Result<(), ClientError> {
        let (tx, rx) = oneshot::channel();
        self.send(Command::Drain { tx }).await?;
        rx.await.map_err(|_| ClientError::Closed)
    }
}

/// A subscription: a [`Stream`] of [`Message`]s. Dropping it unsubscribes.
///
/// The stream ends after [`Subscriber::drain`], after the auto-unsubscribe count of
/// [`Subscriber::unsubscribe_after`] is reached, or when the client closes.
#[derive(Debug)]
pub struct Subscriber {
    sid: u64,
    rx: mpsc::Receiver<Message>,
    cmd: mpsc::Sender<Command>,
    unsubscribed: bool,
}

impl Subscriber {
    /// The subscription id used on the wire.
    pub fn sid(&self) -> u64 {
        self.sid
    }

    /// Unsubscribes now (`UNSUB <sid>`); messages already buffered are discarded.
    ///
    /// # Errors
    ///
    /// [`ClientError::Closed`].
    pub async fn unsubscribe(mut self) -> Result<(), ClientError> {
        self.unsubscribed = true;
        self.cmd
            .send(Command::Unsubscribe {
                sid: self.sid,
                max: None,
            })
            .await
            .map_err(|_| ClientError::Closed)
    }

    /// Asks the server to end the subscription after `max` deliveries in total
    /// (`UNSUB <sid> <max>`); re-sent with the remaining count after a reconnect.
    ///
    /// # Errors
    ///
    /// [`ClientError::Closed`].
    pub async fn unsubscribe_after(&mut self, max: u64) -> Result<(), ClientError> {
        self.cmd
            .send(Command::Unsubscribe {
                sid: self.sid,
                max: Some(max),
            })
            .await
            .map_err(|_| ClientError::Closed)
    }

    /// Unsubscribes, and ends the stream once every message the server sent before the
    /// `UNSUB` has been received (so none is lost).
    ///
    /// # Errors
    ///
    /// [`ClientError::Closed`].
    pub async fn drain(&mut self) -> Result<(), ClientError> {
        self.unsubscribed = true;
        self.cmd
            .send(Command::DrainSubscription { sid: self.sid })
            .await
            .map_err(|_| ClientError::Closed)
    }
}

impl Stream for Subscriber {
    type Item = Message;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Message>> {
        self.rx.poll_recv(cx)
    }
}

impl Drop for Subscriber {
    fn drop(&mut self) {
        if !self.unsubscribed {
            // Best effort: if the queue is full, the task notices the closed channel at the
            // next message for this sid and unsubscribes then.
            let _ = self.cmd.try_send(Command::Unsubscribe {
                sid: self.sid,
                max: None,
            });
        }
    }
}
