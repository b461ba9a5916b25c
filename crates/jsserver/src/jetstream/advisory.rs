//! Publishing JetStream advisories (`$JS.EVENT.ADVISORY.…`, bodies from
//! [`jsproto::api::advisory`]).
//!
//! Where they come from:
//! - the API thread: `STREAM.CREATED` (a stream really created), `STREAM.UPDATED` (after a
//!   successful update), `STREAM.DELETED` (after the stream's consumers' `CONSUMER.DELETED`);
//! - the stream's engine: `CONSUMER.CREATED` (a new consumer), `CONSUMER.DELETED`
//!   (`CONSUMER.DELETE`, inactivity, stream deletion) and the consumer state machine's
//!   [`jsproto::consumer::Action::Advisory`] events (`MAX_DELIVERIES`, `MSG_TERMINATED`,
//!   `MSG_NAKED`).
//!
//! An advisory nobody subscribes to is not built at all: the subject is checked against the
//! router first ([`crate::router::Router::has_interest`]), so without a
//! listener an event costs one subject format and one trie lookup. An advisory is routed
//! like any other message from the thread where it happened, through that thread's
//! [`Outbox`]; a stream capturing `$JS.EVENT.>` receives it through its ingest queue, which
//! never blocks a thread that holds an engine (see `stream.rs`), so a stream's own events can
//! land in itself.
//!
//! nats-server's API audit advisory (`$JS.EVENT.ADVISORY.API`, `api_audit`, with the client's
//! connection details and the full request and response) is not published.

use std::cell::RefCell;

use bytes::Bytes;
use jsproto::api::advisory::JsAdvisory;

use super::outbox::Outbox;
use super::stream::{timestamp, unix_now};

/// Publishes `advisory` through `outbox` if anything subscribes to its subject, with a fresh
/// NUID as `id` (22 characters of `[0-9A-Za-z]`, from the `nuid` crate that NATS clients use)
/// and the current time as `timestamp`.
pub fn publish(outbox: &mut Outbox, advisory: JsAdvisory<'_>) {
    thread_local! {
        static SUBJECT: RefCell<String> = RefCell::new(String::with_capacity(96));
    }
    let subject = SUBJECT.with(|s| {
        let mut s = s.borrow_mut();
        advisory.write_subject(&mut s);
        outbox
            .router()
            .has_interest(s.as_bytes())
            .then(|| Bytes::copy_from_slice(s.as_bytes()))
    });
    let Some(subject) = subject else {
        return;
    };
    let body = advisory.to_json(nuid::next().as_str(), timestamp(unix_now()));
    outbox.publish(&subject, None, &Bytes::from(body));
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    #[test]
    fn ids_are_22_base62_chars_and_unique() {
        let mut nuid = nuid::NUID::new();
        let mut seen = HashSet::new();
        for _ in 0..10_000 {
            let id = nuid.next().as_str().to_owned();
            assert_eq!(id.len(), 22);
            assert!(id.bytes().all(|c| c.is_ascii_alphanumeric()));
            assert!(seen.insert(id));
        }
        // Another generator (another thread) has another prefix.
        let other = nuid::NUID::new().next().as_str().to_owned();
        assert!(!seen.contains(&other));
        assert!(seen.insert(nuid::next().as_str().to_owned()));
    }
}
