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
use rand::Rng;

use super::outbox::Outbox;
use super::stream::{timestamp, unix_now};

/// Publishes `advisory` through `outbox` if anything subscribes to its subject, with a fresh
/// [`next_id`] and the current time as `timestamp`.
pub fn publish(outbox: &mut Outbox, advisory: JsAdvisory<'_>) {
    thread_local! {
        static SUBJECT: RefCell<String> = RefCell::new(String::with_capacity(96));
    }
    let subject = SUBJECT.with(|s| {
        let mut s = s.borrow_mut();
        advisory.write_subject(&mut s);
        outbox
            .server()
            .router()
            .has_interest(s.as_bytes())
            .then(|| Bytes::copy_from_slice(s.as_bytes()))
    });
    let Some(subject) = subject else {
        return;
    };
    let body = advisory.to_json(&next_id(), timestamp(unix_now()));
    outbox.publish(&subject, None, &Bytes::from(body));
}

/// Digits of an id, base 62.
const DIGITS: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
/// Random prefix length.
const PREFIX_LEN: usize = 12;
/// Sequence length: 62^10 values.
const SEQ_LEN: usize = 10;
const MAX_SEQ: u64 = 839_299_365_868_340_224; // 62^10

/// A unique-id generator in the style of the NATS NUID: 22 base-62 characters, a random
/// 12-character prefix followed by a 10-character sequence that grows by a random step (33 to
/// 332) per id; a new random prefix is drawn when the sequence runs out. Ids from different
/// generators differ by their prefix (random, 62^12 values), ids from one generator by their
/// sequence.
#[derive(Debug, Clone)]
pub struct Nuid {
    prefix: [u8; PREFIX_LEN],
    seq: u64,
    step: u64,
}

impl Nuid {
    /// A generator with a random prefix, sequence start and step.
    pub fn new() -> Self {
        let mut nuid = Nuid {
            prefix: [b'0'; PREFIX_LEN],
            seq: 0,
            step: 0,
        };
        nuid.reseed();
        nuid
    }

    fn reseed(&mut self) {
        let mut rng = rand::rng();
        for c in &mut self.prefix {
            *c = DIGITS[rng.random_range(0..DIGITS.len())];
        }
        self.seq = rng.random_range(0..MAX_SEQ);
        self.step = rng.random_range(33..333);
    }

    /// The next id (22 characters of `[0-9A-Za-z]`).
    pub fn next_id(&mut self) -> String {
        self.seq += self.step;
        if self.seq >= MAX_SEQ {
            self.reseed();
        }
        let mut out = [0u8; PREFIX_LEN + SEQ_LEN];
        out[..PREFIX_LEN].copy_from_slice(&self.prefix);
        let mut n = self.seq;
        for c in out[PREFIX_LEN..].iter_mut().rev() {
            *c = DIGITS[(n % 62) as usize];
            n /= 62;
        }
        String::from_utf8(out.to_vec()).expect("base-62 digits are ASCII")
    }
}

impl Default for Nuid {
    fn default() -> Self {
        Nuid::new()
    }
}

/// A fresh advisory id from this thread's [`Nuid`].
pub fn next_id() -> String {
    thread_local! {
        static NUID: RefCell<Nuid> = RefCell::new(Nuid::new());
    }
    NUID.with(|n| n.borrow_mut().next_id())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn ids_are_22_base62_chars_and_unique() {
        let mut nuid = Nuid::new();
        let mut seen = HashSet::new();
        for _ in 0..10_000 {
            let id = nuid.next_id();
            assert_eq!(id.len(), 22);
            assert!(id.bytes().all(|c| c.is_ascii_alphanumeric()));
            assert!(seen.insert(id));
        }
        // Another generator (another thread) has another prefix.
        let other = Nuid::new().next_id();
        assert!(!seen.contains(&other));
        assert!(seen.insert(next_id()));
    }

    #[test]
    fn sequence_overflow_draws_a_new_prefix() {
        let mut nuid = Nuid::new();
        nuid.seq = MAX_SEQ - 1;
        let before = nuid.prefix;
        let id = nuid.next_id();
        assert!(nuid.seq < MAX_SEQ);
        assert_eq!(id.len(), 22);
        // A new prefix (equal only with probability 62^-12).
        assert_ne!(nuid.prefix, before);
    }
}
