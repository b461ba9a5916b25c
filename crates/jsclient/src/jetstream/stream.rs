//! A stream handle and the stream types (from `jsproto::api::stream`).

use bytes::Bytes;
use jsproto::api::error::codes;

use super::{consumer, Context, JetStreamError, PullConsumer};

/// Stream configuration (`jsproto`'s `StreamConfig`): `Config::new(name, subjects)` sets only
/// those; every zero field means "server default" (file storage, limits retention, no limits,
/// 2 min duplicate window). Durations are [`std::time::Duration`]s (nanoseconds on the wire).
pub type Config = jsproto::api::StreamConfig;
/// Stream info as the server reports it: config, state (messages, bytes, first/last seq),
/// creation time.
pub type Info = jsproto::api::StreamInfo;
/// Message counts and sequence range of a stream.
pub type State = jsproto::api::StreamState;

/// A handle on one stream, with the info fetched when it was obtained.
#[derive(Debug, Clone)]
pub struct Stream {
    context: Context,
    info: Info,
}

impl Stream {
    pub(crate) fn new(context: Context, info: Info) -> Stream {
        Stream { context, info }
    }

    /// The stream's name.
    pub fn name(&self) -> &str {
        &self.info.config.name
    }

    /// The info from the last fetch (no request).
    pub fn cached_info(&self) -> &Info {
        &self.info
    }

    /// Fetches fresh info (`STREAM.INFO`) and caches it.
    ///
    /// # Errors
    ///
    /// As [`Context::request`].
    pub async fn info(&mut self) -> Result<&Info, JetStreamError> {
        self.info = self.context.stream_info(&self.info.config.name).await?;
        Ok(&self.info)
    }

    /// Removes every message (`STREAM.PURGE`); returns how many.
    ///
    /// # Errors
    ///
    /// As [`Context::request`].
    pub async fn purge(&self) -> Result<u64, JetStreamError> {
        self.context.purge_stream(self.name()).await
    }

    /// Creates (or updates) a consumer on this stream; see
    /// [`Context::create_consumer_on_stream`].
    ///
    /// # Errors
    ///
    /// As [`Context::request`].
    pub async fn create_consumer(
        &self,
        config: consumer::Config,
    ) -> Result<PullConsumer, JetStreamError> {
        self.context
            .create_consumer_on_stream(config, self.name())
            .await
    }

    /// Looks up a consumer of this stream (`CONSUMER.INFO`).
    ///
    /// # Errors
    ///
    /// As [`Context::request`]; `10014` consumer not found.
    pub async fn get_consumer(&self, name: &str) -> Result<PullConsumer, JetStreamError> {
        self.context
            .get_consumer_from_stream(name, self.name())
            .await
    }

    /// Returns consumer `name`, creating it with `config` if it does not exist.
    ///
    /// # Errors
    ///
    /// As [`Context::request`].
    pub async fn get_or_create_consumer(
        &self,
        name: &str,
        config: consumer::Config,
    ) -> Result<PullConsumer, JetStreamError> {
        match self.get_consumer(name).await {
            Err(e) if e.err_code() == Some(codes::JSConsumerNotFoundErr) => {
                self.create_consumer(config).await
            }
            other => other,
        }
    }

    /// Deletes a consumer of this stream; returns `success`.
    ///
    /// # Errors
    ///
    /// As [`Context::request`]; `10014` consumer not found.
    pub async fn delete_consumer(&self, name: &str) -> Result<bool, JetStreamError> {
        self.context
            .delete_consumer_from_stream(name, self.name())
            .await
    }

    /// Names of this stream's consumers (`CONSUMER.NAMES`, first page of up to 1024).
    ///
    /// # Errors
    ///
    /// As [`Context::request`].
    pub async fn consumer_names(&self) -> Result<Vec<String>, JetStreamError> {
        let r: jsproto::api::consumer::ConsumerNamesResponse = self
            .context
            .request(&format!("CONSUMER.NAMES.{}", self.name()), Bytes::new())
            .await?;
        Ok(r.consumers)
    }
}
