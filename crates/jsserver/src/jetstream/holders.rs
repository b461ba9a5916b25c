//! `$JS.API.CONSUMER.PENDING.<stream>.<consumer>`: who holds what (jsserver's own; see
//! [`jsproto::api::consumer::ConsumerPendingResponse`]). The consumer's state machine knows
//! each pending message's last delivery and the reply subject it went to
//! ([`jsproto::consumer::Consumer::pending_messages`]); the router says which connection
//! subscribes to that reply subject now, and the connection registry gives its name and
//! address.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use jsproto::api::consumer::{ConsumerPendingResponse, Holder, PendingEntry, PENDING_LIMIT};
use jsproto::api::time::Timestamp;
use jsproto::api::{encode_error, encode_ok, ApiError};

use super::stream::{unix_now, StreamEngine};

impl StreamEngine {
    /// `CONSUMER.PENDING` of consumer `name` from `offset` (the parsed body, or its error);
    /// 10014 for a missing consumer.
    pub fn api_consumer_pending(
        &mut self,
        name: &str,
        offset: Result<u64, ApiError>,
        reply: Option<Bytes>,
    ) {
        let body = match offset.and_then(|o| self.pending_list(name, o)) {
            Ok(resp) => encode_ok(&resp),
            Err(err) => encode_error::<ConsumerPendingResponse>(&err),
        };
        self.respond(reply.as_ref(), body);
    }

    fn pending_list(
        &mut self,
        name: &str,
        offset: u64,
    ) -> Result<ConsumerPendingResponse, ApiError> {
        let now = Instant::now();
        let now_unix = unix_now();
        let account = Arc::clone(self.outbox.account());
        let server = Arc::clone(self.outbox.server());
        let rt = self
            .stream
            .consumers()
            .get(name)
            .ok_or_else(ApiError::consumer_not_found)?;
        let total = rt.core.pending_messages().count() as u64;
        let page: Vec<_> = rt
            .core
            .pending_messages()
            .skip(usize::try_from(offset).unwrap_or(usize::MAX))
            .take(PENDING_LIMIT)
            .map(|p| {
                let age = now.saturating_duration_since(p.since);
                (
                    p.stream_seq,
                    p.consumer_seq,
                    p.delivery_count,
                    age,
                    p.queued,
                    p.holder.cloned(),
                )
            })
            .collect();
        let conns: HashMap<u64, (String, String)> = server
            .connections()
            .iter()
            .map(|c| {
                let name = c.info.lock().expect("info lock poisoned").name.clone();
                (c.handle.id, (name, c.peer.to_string()))
            })
            .collect();
        let router = account.router();
        let pending = page
            .into_iter()
            .map(
                |(stream_seq, consumer_seq, deliveries, age, queued, holder)| {
                    let holder = holder.map(|reply| {
                        let cid = router.client_ids_for(&reply).first().copied();
                        let (name, addr) = cid
                            .and_then(|id| conns.get(&id).cloned())
                            .unwrap_or_default();
                        Holder {
                            reply: String::from_utf8_lossy(&reply).into_owned(),
                            cid,
                            name,
                            addr,
                        }
                    });
                    let age_ns = u64::try_from(age.as_nanos()).unwrap_or(u64::MAX);
                    PendingEntry {
                        stream_seq,
                        consumer_seq,
                        deliveries,
                        since: Timestamp::from_unix_nanos(now_unix.saturating_sub(age_ns)),
                        age,
                        queued,
                        holder,
                    }
                },
            )
            .collect();
        Ok(ConsumerPendingResponse {
            total,
            offset,
            limit: PENDING_LIMIT as u64,
            pending,
        })
    }
}
