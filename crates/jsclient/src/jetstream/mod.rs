//! JetStream: publish with acknowledgement, streams, consumers, pull consumers and acks.
//!
//! ```no_run
//! # async fn f() -> Result<(), Box<dyn std::error::Error>> {
//! use futures_util::StreamExt;
//! use jsclient::jetstream::{self, consumer, stream};
//!
//! let js = jetstream::new(jsclient::connect("127.0.0.1:4222").await?);
//! let orders = js.create_stream(stream::Config::new("ORDERS", ["orders.>"])).await?;
//! js.publish("orders.1", "new".into()).await?.await?;
//! let worker = orders.create_consumer(consumer::pull_config("worker")).await?;
//! let mut messages = worker.messages().await?;
//! while let Some(msg) = messages.next().await {
//!     let msg = msg?;
//!     println!("{} (delivery {})", msg.subject, msg.info()?.delivered);
//!     msg.ack().await?;
//! }
//! # Ok(()) }
//! ```
//!
//! Every API call is a request on `$JS.API.…` answered with JSON (types from
//! `jsproto::api`); an `"error"` answer becomes [`JetStreamError::Api`] with the server's
//! `err_code`.

pub mod consumer;
pub mod message;
pub mod publish;
pub mod push;
pub mod stream;

use std::future::IntoFuture;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::future::BoxFuture;
use jsproto::api::error::codes;
use jsproto::api::{self, ApiError, PubAck};
use jsproto::headers::Headers;
use serde::de::DeserializeOwned;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::{Client, ClientError, RequestError};

pub use consumer::PullConsumer;
pub use message::{AckKind, Message};
pub use publish::Publish;
pub use push::{OrderedConfig, PushMessages};
pub use stream::Stream;

/// Creates a JetStream context on `client` with the default API prefix `$JS.API`, a 5 s API
/// timeout and a publish window of 256 unacknowledged publishes.
pub fn new(client: Client) -> Context {
    Context {
        client,
        prefix: Arc::from("$JS.API"),
        timeout: Duration::from_secs(5),
        window: Arc::new(Semaphore::new(DEFAULT_WINDOW)),
    }
}

const DEFAULT_WINDOW: usize = 256;

/// Why a JetStream API call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum JetStreamError {
    /// The request failed: closed client, timeout, or no responders (JetStream disabled, or a
    /// subject the server does not serve).
    #[error(transparent)]
    Request(#[from] RequestError),
    /// The server answered with an API error; see [`JetStreamError::err_code`]. Displayed as
    /// the server's `<description> (<err_code>)`, e.g. `consumer not found (10014)`.
    #[error("{0}")]
    Api(ApiError),
    /// The answer was not the expected JSON.
    #[error("undecodable API response: {0}")]
    Decode(String),
    /// A stream or consumer name is empty or holds `.`, `*`, `>`, whitespace, `/` or `\`.
    #[error("invalid name {0:?}")]
    InvalidName(String),
    /// A subscription the call needs could not be made (the client is closed).
    #[error(transparent)]
    Client(#[from] crate::ClientError),
    /// The consumer is not of the kind the call needs (e.g. a pull consumer given to
    /// [`Context::push_messages`]).
    #[error("{0}")]
    WrongKind(String),
}

impl JetStreamError {
    /// The server's `err_code` (e.g. `10059` stream not found, `10014` consumer not found) for
    /// [`JetStreamError::Api`].
    pub fn err_code(&self) -> Option<u32> {
        match self {
            JetStreamError::Api(e) => Some(e.err_code),
            _ => None,
        }
    }
}

/// Why a JetStream publish failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PublishError {
    /// The message could not be sent.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// No stream captures the subject: the server answered `503` (no responders), and
    /// `STREAM.NAMES` filtered by the subject lists none.
    #[error("no stream captures this subject")]
    NoStream,
    /// Stream `0` captures the subject but nobody took the message: `503`, and
    /// `STREAM.NAMES` lists it. Its leader is being elected (a few seconds after its leader
    /// went), or too few of its servers are up to elect one: publish again.
    #[error("stream {0} has no leader yet (try again)")]
    NoLeader(String),
    /// JetStream is not enabled on the server: `503`, and `$JS.API.INFO` has no responders
    /// either.
    #[error("JetStream is not enabled")]
    NotEnabled,
    /// JetStream is not enabled for the account: `503`, and `$JS.API.INFO` answered `10039`.
    #[error("JetStream is not enabled for this account")]
    NotEnabledForAccount,
    /// `503`, and what was asked to learn why failed too (said here).
    #[error("no responders for the publish ({0})")]
    NoResponders(String),
    /// No PubAck within the context timeout.
    #[error("timed out waiting for the PubAck")]
    TimedOut,
    /// The stream refused the message (e.g. `10071` wrong last sequence).
    #[error("publish refused: {0}")]
    Api(ApiError),
    /// The PubAck was not the expected JSON.
    #[error("undecodable PubAck: {0}")]
    Decode(String),
    /// A header of a [`Publish`] is not a valid NATS header (e.g. a line break in a value).
    #[error("invalid header {0}")]
    InvalidHeader(String),
}

impl PublishError {
    /// The server's `err_code` for [`PublishError::Api`].
    pub fn err_code(&self) -> Option<u32> {
        match self {
            PublishError::Api(e) => Some(e.err_code),
            _ => None,
        }
    }
}

/// A JetStream context: a [`Client`] plus the API prefix, timeout and publish window.
#[derive(Debug, Clone)]
pub struct Context {
    client: Client,
    pub(crate) prefix: Arc<str>,
    timeout: Duration,
    window: Arc<Semaphore>,
}

/// A publish in flight; `.await` it for the [`PubAck`]. Holding many of these is the windowed
/// async form: [`Context::publish`] waits for room when the window is full, and each future
/// frees its slot when it completes or is dropped.
#[must_use = "await it to learn whether the stream stored the message"]
#[derive(Debug)]
pub struct PubAckFuture {
    rx: tokio::sync::oneshot::Receiver<crate::Message>,
    timeout: Duration,
    /// The context and subject, to ask why after a `503` ([`Context::no_responders_cause`]).
    context: Context,
    subject: String,
    _permit: OwnedSemaphorePermit,
}

impl IntoFuture for PubAckFuture {
    type Output = Result<PubAck, PublishError>;
    type IntoFuture = BoxFuture<'static, Result<PubAck, PublishError>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move {
            let msg = match tokio::time::timeout(self.timeout, self.rx).await {
                Ok(Ok(msg)) => msg,
                Ok(Err(_)) => return Err(PublishError::Client(ClientError::Closed)),
                Err(_) => return Err(PublishError::TimedOut),
            };
            if msg.status == Some(503) {
                return Err(self.context.no_responders_cause(&self.subject).await);
            }
            let ack: PubAck = serde_json::from_slice(&msg.payload)
                .map_err(|e| PublishError::Decode(e.to_string()))?;
            match ack.error {
                Some(e) => Err(PublishError::Api(e)),
                None => Ok(ack),
            }
        })
    }
}

impl Context {
    /// Uses another API prefix (`$JS.<domain>.API` for a JetStream domain).
    pub fn with_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = Arc::from(prefix.into());
        self
    }

    /// Uses the JetStream domain `domain` (prefix `$JS.<domain>.API`).
    pub fn with_domain(self, domain: &str) -> Self {
        self.with_prefix(format!("$JS.{domain}.API"))
    }

    /// Sets the timeout of API calls and PubAcks. Default 5 s.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sets how many publishes may await their PubAck at once. Default 256.
    pub fn with_publish_window(mut self, window: usize) -> Self {
        self.window = Arc::new(Semaphore::new(window.max(1)));
        self
    }

    /// The underlying client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The API/PubAck timeout.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Publishes to a subject a stream captures. The first `.await` queues the message (waiting
    /// for room in the publish window); the returned [`PubAckFuture`] resolves to the PubAck.
    ///
    /// ```no_run
    /// # async fn f(js: jsclient::jetstream::Context) -> Result<(), jsclient::jetstream::PublishError> {
    /// let ack = js.publish("orders.1", "x".into()).await?.await?; // one at a time
    /// use std::future::IntoFuture;
    /// let acks: Vec<_> = futures_util::future::join_all([         // windowed
    ///     js.publish("orders.2", "y".into()).await?.into_future(),
    ///     js.publish("orders.3", "z".into()).await?.into_future(),
    /// ]).await;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`PublishError::Client`] if it cannot be sent; the PubAck future fails with
    /// [`PublishError::Api`], [`PublishError::TimedOut`], or, when the server answered `503`
    /// (no responders), with its cause ([`Context::no_responders_cause`]):
    /// [`PublishError::NoStream`], [`PublishError::NoLeader`], [`PublishError::NotEnabled`],
    /// [`PublishError::NotEnabledForAccount`] or [`PublishError::NoResponders`].
    pub async fn publish(
        &self,
        subject: impl Into<String>,
        payload: Bytes,
    ) -> Result<PubAckFuture, PublishError> {
        self.publish_inner(subject.into(), None, payload).await
    }

    /// [`Context::publish`] with headers (e.g. `Nats-Msg-Id`, `Nats-Expected-Last-Sequence`).
    ///
    /// # Errors
    ///
    /// As [`Context::publish`].
    pub async fn publish_with_headers(
        &self,
        subject: impl Into<String>,
        headers: Headers,
        payload: Bytes,
    ) -> Result<PubAckFuture, PublishError> {
        self.publish_inner(subject.into(), Some(headers), payload)
            .await
    }

    /// Publishes a [`Publish`]: its payload with the JetStream headers it sets (`Nats-Msg-Id`,
    /// `Nats-Expected-…`). Otherwise as [`Context::publish`].
    ///
    /// # Errors
    ///
    /// [`PublishError::InvalidHeader`] for a header value that cannot be sent, else as
    /// [`Context::publish`]; a failed expectation is a [`PublishError::Api`] of the PubAck
    /// future (`10071` wrong last sequence, `10070` wrong last msg id, `10060` wrong stream).
    pub async fn send_publish(
        &self,
        subject: impl Into<String>,
        publish: Publish,
    ) -> Result<PubAckFuture, PublishError> {
        let headers = publish
            .header_block()
            .map_err(PublishError::InvalidHeader)?;
        self.publish_inner(subject.into(), headers, publish.payload)
            .await
    }

    async fn publish_inner(
        &self,
        subject: String,
        headers: Option<Headers>,
        payload: Bytes,
    ) -> Result<PubAckFuture, PublishError> {
        let permit = Arc::clone(&self.window)
            .acquire_owned()
            .await
            .expect("the window semaphore is never closed");
        let rx = self
            .client
            .send_request(subject.clone(), headers, payload)
            .await?;
        Ok(PubAckFuture {
            rx,
            timeout: self.timeout,
            context: self.clone(),
            subject,
            _permit: permit,
        })
    }

    /// Why a publish to `subject` got `503` (no responders): the server answers every case
    /// alike, as nats-server does, so this asks, both at once, `$JS.API.INFO` (no responders:
    /// JetStream is off; `10039`: off for the account) and `STREAM.NAMES` filtered by
    /// `subject` (none: [`PublishError::NoStream`]; one: it has no leader,
    /// [`PublishError::NoLeader`]). When neither tells, [`PublishError::NoResponders`] says
    /// what failed.
    pub async fn no_responders_cause(&self, subject: &str) -> PublishError {
        let names = api::stream::StreamNamesRequest {
            subject: subject.to_owned(),
            ..Default::default()
        };
        let (info, names) = futures_util::future::join(
            self.request::<api::AccountInfo>("INFO", Bytes::new()),
            self.request::<api::stream::StreamNamesResponse>(
                "STREAM.NAMES",
                Bytes::from(api::to_json(&names)),
            ),
        )
        .await;
        match (info, names) {
            (Err(JetStreamError::Request(RequestError::NoResponders)), _) => {
                PublishError::NotEnabled
            }
            (Err(JetStreamError::Api(e)), _) if e.err_code == codes::JSNotEnabledForAccountErr => {
                PublishError::NotEnabledForAccount
            }
            (_, Ok(names)) => match names.streams.into_iter().next() {
                Some(stream) => PublishError::NoLeader(stream),
                None => PublishError::NoStream,
            },
            (_, Err(e)) => PublishError::NoResponders(format!("looking up its stream: {e}")),
        }
    }

    /// Sends an API request to `<prefix>.<subject>` with a JSON body and decodes the answer.
    ///
    /// # Errors
    ///
    /// [`JetStreamError::Api`] for an error answer, [`JetStreamError::Request`],
    /// [`JetStreamError::Decode`].
    pub async fn request<T: DeserializeOwned>(
        &self,
        subject: &str,
        body: Bytes,
    ) -> Result<T, JetStreamError> {
        let msg = self
            .client
            .request_full(
                format!("{}.{subject}", self.prefix),
                None,
                body,
                self.timeout,
            )
            .await?;
        match api::decode_response::<T>(&msg.payload) {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(JetStreamError::Api(e)),
            Err(e) => Err(JetStreamError::Decode(e.to_string())),
        }
    }

    /// `$JS.API.INFO`: the account's usage and limits.
    ///
    /// # Errors
    ///
    /// As [`Context::request`].
    pub async fn account_info(&self) -> Result<api::AccountInfo, JetStreamError> {
        self.request("INFO", Bytes::new()).await
    }

    /// Creates a stream (`STREAM.CREATE`); idempotent for an identical config.
    ///
    /// # Errors
    ///
    /// As [`Context::request`]; e.g. `10058` name in use with another config, `10065`
    /// subjects overlap.
    pub async fn create_stream(&self, config: stream::Config) -> Result<Stream, JetStreamError> {
        check_name(&config.name)?;
        let body = json(&config);
        let info: stream::Info = self
            .request(&format!("STREAM.CREATE.{}", config.name), body)
            .await?;
        Ok(Stream::new(self.clone(), info))
    }

    /// Updates a stream's config (`STREAM.UPDATE`).
    ///
    /// # Errors
    ///
    /// As [`Context::request`].
    pub async fn update_stream(
        &self,
        config: stream::Config,
    ) -> Result<stream::Info, JetStreamError> {
        check_name(&config.name)?;
        let body = json(&config);
        self.request(&format!("STREAM.UPDATE.{}", config.name), body)
            .await
    }

    /// Looks up a stream (`STREAM.INFO`).
    ///
    /// # Errors
    ///
    /// As [`Context::request`]; `10059` when it does not exist.
    pub async fn get_stream(&self, name: &str) -> Result<Stream, JetStreamError> {
        Ok(Stream::new(self.clone(), self.stream_info(name).await?))
    }

    pub(crate) async fn stream_info(&self, name: &str) -> Result<stream::Info, JetStreamError> {
        check_name(name)?;
        self.request(&format!("STREAM.INFO.{name}"), Bytes::new())
            .await
    }

    /// Returns the stream `config.name`, creating it with `config` if it does not exist.
    ///
    /// # Errors
    ///
    /// As [`Context::request`].
    pub async fn get_or_create_stream(
        &self,
        config: stream::Config,
    ) -> Result<Stream, JetStreamError> {
        match self.get_stream(&config.name).await {
            Err(e) if e.err_code() == Some(codes::JSStreamNotFoundErr) => {
                self.create_stream(config).await
            }
            other => other,
        }
    }

    /// Deletes a stream and its messages and consumers (`STREAM.DELETE`); returns `success`.
    ///
    /// # Errors
    ///
    /// As [`Context::request`]; `10059` when it does not exist.
    pub async fn delete_stream(&self, name: &str) -> Result<bool, JetStreamError> {
        check_name(name)?;
        let r: api::stream::StreamDeleteResponse = self
            .request(&format!("STREAM.DELETE.{name}"), Bytes::new())
            .await?;
        Ok(r.success)
    }

    /// Asks the leader of stream `name`'s Raft group to step down
    /// (`$JS.API.STREAM.LEADER.STEPDOWN.<name>`), optionally naming the server that should
    /// lead next (`{"placement":{"preferred":…}}`); returns `success`. The new leader is
    /// elected afterwards: read the stream's info (`cluster.leader`) to see who it is.
    ///
    /// # Errors
    ///
    /// As [`Context::request`]; as nats-server 2.15.1 answers: `10010` (503) on a server
    /// without a cluster, `10059` unknown stream, `10005` (400) a preferred server that is not
    /// one of the stream's peers, `10008` (503) while the meta group has no leader.
    pub async fn stream_leader_stepdown(
        &self,
        name: &str,
        preferred: Option<&str>,
    ) -> Result<bool, JetStreamError> {
        check_name(name)?;
        let body = match preferred {
            Some(server) => Bytes::from(api::to_json(
                &api::cluster::LeaderStepdownRequest::preferred(server),
            )),
            None => Bytes::new(),
        };
        let r: api::cluster::StreamLeaderStepdownResponse = self
            .request(&format!("STREAM.LEADER.STEPDOWN.{name}"), body)
            .await?;
        Ok(r.success)
    }

    /// Asks the JetStream meta leader to hand leadership of the meta group to another server
    /// (`$JS.API.META.LEADER.STEPDOWN`), optionally where (`placement`: `preferred` names the
    /// server; without it, one in `cluster` with every tag of `tags`); returns `success`. The
    /// new leader is elected afterwards: `$SYS.REQ.SERVER.PING.JSZ` (`meta_cluster.leader`)
    /// tells who it is.
    ///
    /// Only a system account user is answered (the context's connection must log in to the
    /// system account), and only by the meta leader.
    ///
    /// # Errors
    ///
    /// As [`Context::request`]; as nats-server 2.15.1 answers: a timeout from any other account
    /// or a server without a cluster (no answer at all), `10005` (400) a preferred server that
    /// is no member of the meta group (`preferred server "nX" not known`) or already leads
    /// (`… is already leader`), or no member matching the placement
    /// (`no replacement peer connected`).
    pub async fn meta_leader_stepdown(
        &self,
        placement: Option<api::stream::Placement>,
    ) -> Result<bool, JetStreamError> {
        let body = match placement {
            Some(p) => Bytes::from(api::to_json(&api::cluster::LeaderStepdownRequest {
                placement: Some(p),
            })),
            None => Bytes::new(),
        };
        let r: api::cluster::MetaLeaderStepdownResponse =
            self.request("META.LEADER.STEPDOWN", body).await?;
        Ok(r.success)
    }

    /// Asks the leader of consumer `consumer` of stream `stream` to step down
    /// (`$JS.API.CONSUMER.LEADER.STEPDOWN.<stream>.<consumer>`), optionally naming the server
    /// that should lead next; returns `success`.
    ///
    /// # Errors
    ///
    /// As [`Context::stream_leader_stepdown`]; `10014` unknown consumer.
    pub async fn consumer_leader_stepdown(
        &self,
        stream: &str,
        consumer: &str,
        preferred: Option<&str>,
    ) -> Result<bool, JetStreamError> {
        check_name(stream)?;
        check_name(consumer)?;
        let body = match preferred {
            Some(server) => Bytes::from(api::to_json(
                &api::cluster::LeaderStepdownRequest::preferred(server),
            )),
            None => Bytes::new(),
        };
        let r: api::cluster::ConsumerLeaderStepdownResponse = self
            .request(
                &format!("CONSUMER.LEADER.STEPDOWN.{stream}.{consumer}"),
                body,
            )
            .await?;
        Ok(r.success)
    }

    /// Removes every message of a stream (`STREAM.PURGE`); returns how many were purged.
    ///
    /// # Errors
    ///
    /// As [`Context::request`].
    pub async fn purge_stream(&self, name: &str) -> Result<u64, JetStreamError> {
        check_name(name)?;
        let r: api::stream::StreamPurgeResponse = self
            .request(&format!("STREAM.PURGE.{name}"), Bytes::new())
            .await?;
        Ok(r.purged)
    }

    /// Names of every stream (`STREAM.NAMES`, all pages).
    ///
    /// # Errors
    ///
    /// As [`Context::request`].
    pub async fn stream_names(&self) -> Result<Vec<String>, JetStreamError> {
        let mut names = Vec::new();
        loop {
            let body = json(&serde_json::json!({ "offset": names.len() }));
            let page: api::stream::StreamNamesResponse = self.request("STREAM.NAMES", body).await?;
            let n = page.streams.len();
            names.extend(page.streams);
            if n == 0 || names.len() >= page.total {
                return Ok(names);
            }
        }
    }

    /// Creates (or updates) a consumer on `stream` (`CONSUMER.CREATE.<stream>.<name>[.<filter>]`,
    /// or `CONSUMER.CREATE.<stream>` for an unnamed ephemeral).
    ///
    /// # Errors
    ///
    /// As [`Context::request`]; `10059` stream not found, `10148` exists with another config.
    pub async fn create_consumer_on_stream(
        &self,
        config: consumer::Config,
        stream: &str,
    ) -> Result<PullConsumer, JetStreamError> {
        check_name(stream)?;
        let name = if config.durable_name.is_empty() {
            config.name.clone()
        } else {
            config.durable_name.clone()
        };
        let subject = if name.is_empty() {
            format!("CONSUMER.CREATE.{stream}")
        } else {
            check_name(&name)?;
            if config.filter_subject.is_empty() {
                format!("CONSUMER.CREATE.{stream}.{name}")
            } else {
                format!("CONSUMER.CREATE.{stream}.{name}.{}", config.filter_subject)
            }
        };
        let req = api::consumer::CreateConsumerRequest {
            stream_name: stream.to_owned(),
            config,
            ..Default::default()
        };
        let info: consumer::Info = self.request(&subject, json(&req)).await?;
        Ok(PullConsumer::new(self.clone(), info))
    }

    /// Looks up a consumer (`CONSUMER.INFO`).
    ///
    /// # Errors
    ///
    /// As [`Context::request`]; `10014` consumer not found.
    pub async fn get_consumer_from_stream(
        &self,
        consumer: &str,
        stream: &str,
    ) -> Result<PullConsumer, JetStreamError> {
        let info = self.consumer_info(stream, consumer).await?;
        Ok(PullConsumer::new(self.clone(), info))
    }

    pub(crate) async fn consumer_info(
        &self,
        stream: &str,
        consumer: &str,
    ) -> Result<consumer::Info, JetStreamError> {
        check_name(stream)?;
        check_name(consumer)?;
        self.request(&format!("CONSUMER.INFO.{stream}.{consumer}"), Bytes::new())
            .await
    }

    /// Deletes a consumer (`CONSUMER.DELETE`); returns `success`. Its waiting pulls get
    /// `409 Consumer Deleted`.
    ///
    /// # Errors
    ///
    /// As [`Context::request`]; `10014` consumer not found.
    pub async fn delete_consumer_from_stream(
        &self,
        consumer: &str,
        stream: &str,
    ) -> Result<bool, JetStreamError> {
        check_name(stream)?;
        check_name(consumer)?;
        let r: api::consumer::ConsumerDeleteResponse = self
            .request(
                &format!("CONSUMER.DELETE.{stream}.{consumer}"),
                Bytes::new(),
            )
            .await?;
        Ok(r.success)
    }

    /// Pauses a consumer until `until` (`CONSUMER.PAUSE`, nats-server 2.11+): it delivers
    /// nothing before then; pulls still queue. `None` resumes it. Returns the server's answer
    /// (`paused`, `pause_until`, `pause_remaining`).
    ///
    /// # Errors
    ///
    /// As [`Context::request`]; `10059` stream not found, `10014` consumer not found.
    pub async fn pause_consumer(
        &self,
        stream: &str,
        consumer: &str,
        until: Option<jsproto::api::time::Timestamp>,
    ) -> Result<api::consumer::ConsumerPauseResponse, JetStreamError> {
        check_name(stream)?;
        check_name(consumer)?;
        let body = json(&api::consumer::ConsumerPauseRequest { pause_until: until });
        self.request(&format!("CONSUMER.PAUSE.{stream}.{consumer}"), body)
            .await
    }

    /// Starts a consumer over (`CONSUMER.RESET`, nats-server 2.14+) at stream seq `seq`, or
    /// with `seq` 0 just past its ack floor: what was delivered and not acknowledged is
    /// forgotten and delivered again. Returns the consumer's info and the seq it starts at.
    ///
    /// # Errors
    ///
    /// As [`Context::request`]; `10204` when the deliver policy does not allow `seq`. A
    /// missing stream or consumer gets no answer (as from nats-server): a request timeout.
    pub async fn reset_consumer(
        &self,
        stream: &str,
        consumer: &str,
        seq: u64,
    ) -> Result<api::consumer::ConsumerResetResponse, JetStreamError> {
        check_name(stream)?;
        check_name(consumer)?;
        let body = json(&api::consumer::ConsumerResetRequest { seq });
        self.request(&format!("CONSUMER.RESET.{stream}.{consumer}"), body)
            .await
    }

    /// Who holds what (`CONSUMER.PENDING`, jsserver's own; nats-server does not answer it):
    /// the consumer's delivered, unacknowledged messages from `offset` (up to 1024), each with
    /// the connection its last delivery went to, its delivery count and age.
    ///
    /// # Errors
    ///
    /// As [`Context::request`]; `10014` consumer not found; against nats-server a request
    /// timeout.
    pub async fn consumer_pending(
        &self,
        stream: &str,
        consumer: &str,
        offset: u64,
    ) -> Result<api::consumer::ConsumerPendingResponse, JetStreamError> {
        check_name(stream)?;
        check_name(consumer)?;
        let body = json(&api::consumer::ConsumerPendingRequest { offset });
        self.request(&format!("CONSUMER.PENDING.{stream}.{consumer}"), body)
            .await
    }

    /// Releases the pin of priority group `group` on a `pinned_client` consumer
    /// (`CONSUMER.UNPIN`, nats-server 2.11+): the next pull without a pin id takes a new one.
    ///
    /// # Errors
    ///
    /// As [`Context::request`]; `10160` the consumer has no such group, `10162` an invalid
    /// group name, `10014` consumer not found.
    pub async fn unpin_consumer(
        &self,
        stream: &str,
        consumer: &str,
        group: &str,
    ) -> Result<(), JetStreamError> {
        check_name(stream)?;
        check_name(consumer)?;
        let body = json(&api::consumer::ConsumerUnpinRequest {
            group: group.to_owned(),
        });
        let _: api::consumer::ConsumerUnpinResponse = self
            .request(&format!("CONSUMER.UNPIN.{stream}.{consumer}"), body)
            .await?;
        Ok(())
    }
}

fn check_name(name: &str) -> Result<(), JetStreamError> {
    if api::is_valid_name(name) {
        Ok(())
    } else {
        Err(JetStreamError::InvalidName(name.to_owned()))
    }
}

fn json<T: serde::Serialize + ?Sized>(value: &T) -> Bytes {
    Bytes::from(serde_json::to_vec(value).expect("API request types serialize infallibly"))
}
