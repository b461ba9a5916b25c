//! Consumer pause: `$JS.API.CONSUMER.PAUSE.<stream>.<consumer>` and a `pause_until` in a
//! consumer's config, as nats-server 2.15.1 has them (`shared/reference/jetstream-api.md`
//! §5.6, observed).
//!
//! The stored config's `pause_until` (wall clock) is what counts: it is persisted with the
//! consumer's meta, so a pause outlives a restart, and it is turned into an `Instant` for the
//! state machine ([`jsproto::consumer::Consumer::set_pause`]), which holds deliveries until
//! then and wakes the stream at the pause's end. Every pause or resume by API, and a create
//! or update of a paused consumer, publishes `$JS.EVENT.ADVISORY.CONSUMER.PAUSE.…`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use jsproto::api::advisory::JsAdvisory;
use jsproto::api::consumer::{ConsumerPauseResponse, ZonedTimestamp};
use jsproto::api::time::Timestamp;
use jsproto::api::{encode_error, encode_ok, ApiError};

use super::consumers::view;
use super::stream::{unix_now, StreamEngine};
use jsproto::stream::StoreView;

impl StreamEngine {
    /// `CONSUMER.PAUSE`: pauses consumer `name` until `until`, or resumes it (`None`, the
    /// zero time, or a time already past, which is stored and echoed but pauses nothing).
    /// Answers `{"paused","pause_until","pause_remaining"}`, or 10014 for a missing consumer;
    /// a meta file that cannot be written is answered as a failed consumer update (10012).
    pub fn api_consumer_pause(
        &mut self,
        name: &str,
        until: Option<Timestamp>,
        reply: Option<Bytes>,
    ) {
        let body = match self.pause(name, until) {
            Ok(resp) => encode_ok(&resp),
            Err(err) => encode_error::<ConsumerPauseResponse>(&err),
        };
        self.respond(reply.as_ref(), body);
    }

    fn pause(
        &mut self,
        name: &str,
        until: Option<Timestamp>,
    ) -> Result<ConsumerPauseResponse, ApiError> {
        let until = until.filter(|t| !t.is_zero());
        let c = self
            .stream
            .consumers_mut()
            .get_mut(name)
            .ok_or_else(ApiError::consumer_not_found)?;
        c.meta.config.pause_until = until.map(ZonedTimestamp::utc);
        self.write_consumer_meta(name)
            .map_err(ApiError::consumer_create)?;
        self.apply_pause(name);
        self.advise_pause(name);
        let now = unix_now();
        let remaining = until
            .and_then(|t| t.unix_nanos())
            .map_or(0, |u| u.saturating_sub(now));
        Ok(ConsumerPauseResponse {
            paused: remaining > 0,
            pause_until: until.unwrap_or(Timestamp::ZERO),
            pause_remaining: Duration::from_nanos(remaining),
        })
    }

    /// Whether consumer `name` is paused now (its stored `pause_until` is ahead).
    pub(super) fn consumer_paused(&self, name: &str) -> bool {
        self.stream
            .consumers()
            .pause_ahead(name, unix_now())
            .is_some()
    }

    /// Hands consumer `name`'s stored `pause_until` to its state machine (a resume delivers
    /// what waits at once).
    pub(super) fn apply_pause(&mut self, name: &str) {
        let account = Arc::clone(self.outbox.account());
        let view = view!(self, account.router());
        self.stream
            .consumers_mut()
            .apply_pause(name, &view, Instant::now(), unix_now());
        self.run_output();
    }

    /// Publishes `CONSUMER.PAUSE.<stream>.<name>` with the consumer's paused state and stored
    /// `pause_until` (the zero time when none), if anyone listens.
    pub(super) fn advise_pause(&mut self, name: &str) {
        let Some(c) = self.stream.consumers().get(name) else {
            return;
        };
        let pause_until = c
            .meta
            .config
            .pause_until
            .map_or(Timestamp::ZERO, |t| t.instant);
        let paused = self.consumer_paused(name);
        let stream = self.config().name.clone();
        super::advisory::publish(
            &mut self.outbox,
            JsAdvisory::Pause {
                stream: &stream,
                consumer: name,
                paused,
                pause_until,
            },
        );
    }
}
