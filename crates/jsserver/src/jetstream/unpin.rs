//! `$JS.API.CONSUMER.UNPIN.<stream>.<consumer>`: releases the pin of a `pinned_client`
//! consumer (priority groups, ADR-42), as nats-server 2.11+ (`jsConsumerUnpinRequest`).
//!
//! The body is checked on the API thread ([`ConsumerUnpinRequest::parse`]); the stream's
//! owner then looks the consumer and group up and hands the unpin to the consumer's state
//! machine ([`jsproto::consumer::Consumer::unpin`]), which reports the `UNPINNED` advisory
//! and serves the next request that may take a new pin.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use jsproto::api::consumer::ConsumerUnpinResponse;
use jsproto::api::{encode_error, encode_ok, ApiError};

#[cfg(doc)]
use jsproto::api::consumer::ConsumerUnpinRequest;

use super::consumers::view;
use super::stream::StreamEngine;
use jsproto::stream::StoreView;

impl StreamEngine {
    /// `CONSUMER.UNPIN` for `group` (already checked): `{"type":…consumer_unpin_response}`,
    /// or 10014 for a missing consumer, 10160 for a group the consumer does not have.
    pub fn api_consumer_unpin(&mut self, name: &str, group: &str, reply: Option<Bytes>) {
        let body = match self.unpin(name, group) {
            Ok(()) => encode_ok(&ConsumerUnpinResponse {}),
            Err(err) => encode_error::<ConsumerUnpinResponse>(&err),
        };
        self.respond(reply.as_ref(), body);
    }

    fn unpin(&mut self, name: &str, group: &str) -> Result<(), ApiError> {
        let account = Arc::clone(self.outbox.account());
        let result = {
            let view = view!(self, account.router());
            self.stream
                .consumers_mut()
                .unpin(name, group, &view, Instant::now())
        };
        self.run_output();
        result
    }
}
