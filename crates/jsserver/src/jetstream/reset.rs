//! `$JS.API.CONSUMER.RESET.<stream>.<consumer>`: starts a consumer over at a stream sequence,
//! or just past its ack floor, as nats-server 2.14+ (`processResetReq`).
//!
//! nats-server answers on a subscription of the consumer itself, so a request for a stream or
//! consumer that does not exist gets no answer at all; so here. The body was read on the API
//! thread ([`ConsumerResetRequest::parse`]); its error is answered only when the consumer
//! exists, as there. The consumer's state machine does the reset
//! ([`jsproto::consumer::Consumer::reset`]); its new state is written (and fsynced) before the
//! answer, so a reset that was answered survives a crash.
//!
//! An interest stream drops what the reset skipped if no other consumer needs it (nats-server
//! checks interest the same way). On a work-queue stream the messages a forward reset skips
//! stay, as in nats-server, until a restart's retention sweep, which counts them as done by
//! this consumer and drops them.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use jsproto::api::consumer::ConsumerResetResponse;
use jsproto::api::stream::RetentionPolicy;
use jsproto::api::{encode_error, encode_ok, ApiError};

#[cfg(doc)]
use jsproto::api::consumer::ConsumerResetRequest;

use super::consumers::view;
use super::stream::StreamEngine;
use jsproto::stream::StoreView;

impl StreamEngine {
    /// `CONSUMER.RESET` of consumer `name` to `seq` (the parsed body, or its error):
    /// `{…consumer info…,"reset_seq":n}`, 10204 `invalid reset: …` when the deliver policy
    /// does not allow it; nothing at all when the consumer does not exist.
    pub fn api_consumer_reset(
        &mut self,
        name: &str,
        seq: Result<u64, ApiError>,
        reply: Option<Bytes>,
    ) {
        if !self.stream.consumers().contains(name) {
            return;
        }
        let body = match seq.and_then(|seq| self.reset(name, seq)) {
            Ok(resp) => encode_ok(&resp),
            Err(err) => encode_error::<ConsumerResetResponse>(&err),
        };
        self.respond(reply.as_ref(), body);
    }

    fn reset(&mut self, name: &str, seq: u64) -> Result<ConsumerResetResponse, ApiError> {
        let account = Arc::clone(self.outbox.account());
        let result = {
            let view = view!(self, account.router());
            self.stream
                .consumers_mut()
                .reset(name, seq, &view, Instant::now())
        };
        self.run_output();
        let reset_seq = result?;
        if self.config().retention == RetentionPolicy::Interest {
            self.retention_sweep();
        }
        self.persist_consumers(true);
        let info = self
            .consumer_info(name)
            .ok_or_else(ApiError::consumer_not_found)?;
        Ok(ConsumerResetResponse { info, reset_seq })
    }
}
