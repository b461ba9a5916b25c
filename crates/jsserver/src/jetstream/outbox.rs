//! How JetStream code publishes: replies, PubAcks and status messages go through the same
//! router as client messages.

use std::sync::Arc;

use bytes::Bytes;

use crate::account::Account;
use crate::router::{RouteScratch, RoutedMsg};
use crate::server::Server;

/// A publisher for server-originated messages in one account, with its own routing scratch
/// space. One per thread that publishes.
pub struct Outbox {
    server: Arc<Server>,
    account: Arc<Account>,
    scratch: RouteScratch,
}

impl Outbox {
    /// An outbox publishing through `account`'s router (an account of `server`).
    pub fn new(server: Arc<Server>, account: Arc<Account>) -> Self {
        Outbox {
            server,
            account,
            scratch: RouteScratch::default(),
        }
    }

    /// The account this outbox publishes in.
    pub fn account(&self) -> &Arc<Account> {
        &self.account
    }

    /// The router of that account.
    pub fn router(&self) -> &crate::router::Router {
        self.account.router()
    }

    /// Publishes `payload` (with an optional raw header block) to `subject`.
    pub fn publish(&mut self, subject: &Bytes, headers: Option<&Bytes>, payload: &Bytes) {
        let msg = RoutedMsg {
            subject,
            reply: None,
            headers,
            payload,
            hops: 0,
            remote: None,
        };
        self.account.router().route(None, msg, &mut self.scratch);
    }

    /// Publishes a request: `payload` to `subject` with reply subject `reply` (to the cluster
    /// too, where the subject has interest).
    pub fn request(&mut self, subject: &Bytes, reply: &Bytes, payload: &Bytes) {
        let msg = RoutedMsg {
            subject,
            reply: Some(reply),
            headers: None,
            payload,
            hops: 0,
            remote: None,
        };
        self.account.router().route(None, msg, &mut self.scratch);
    }

    /// Publishes a message on `subject` with reply subject `reply` (a delivery: the stored
    /// message's subject, the ack subject as reply), to the subscribers of `to`.
    ///
    /// `to` is the pull request's reply subject; the message keeps its own `subject` in the
    /// MSG line, as nats-server's deliveries do.
    pub fn publish_with_reply(
        &mut self,
        to: &Bytes,
        subject: &Bytes,
        reply: &Bytes,
        headers: Option<&Bytes>,
        payload: &Bytes,
    ) {
        let msg = RoutedMsg {
            subject,
            reply: Some(reply),
            headers,
            payload,
            hops: 0,
            remote: None,
        };
        self.account
            .router()
            .route_to(None, to, msg, &mut self.scratch);
    }

    /// Publishes a JSON (or any) body with no headers to `subject`.
    pub fn reply(&mut self, subject: &Bytes, body: Vec<u8>) {
        self.publish(subject, None, &Bytes::from(body));
    }

    /// Wakes the writers of the connections this outbox delivered to. Messages are queued
    /// at once but writers are woken here, so a batch of deliveries and PubAcks to one
    /// connection costs one wake-up and one write; call it after each batch, before blocking.
    pub fn flush(&mut self) {
        self.scratch.flush_wakes();
    }

    /// The server this outbox publishes through.
    pub fn server(&self) -> &Arc<Server> {
        &self.server
    }
}
