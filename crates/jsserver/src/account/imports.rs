//! Streams and services shared between accounts: an account's `exports` and another's
//! `imports`, as nats-server's (`server/accounts.go`).
//!
//! - A **stream import** (account B takes subject `S` of account A, under a local subject
//!   `L`): an internal subscription on `S` in A's router hands each message to B's router on
//!   `L` (`prefix.S`, or `to` mapped token by token). It counts as interest in A only while B
//!   has interest in `L`, so a requester in A still gets no-responders when nobody in B
//!   listens.
//! - A **service import** (B's requests on `L` reach A's responders on `S`): an internal
//!   subscription on `L` in B's router hands each request to A's router on `S`, with its reply
//!   subject replaced by a fresh `_R_.<import>.<token>` subject of A; a second internal
//!   subscription, on `_R_.<import>.>` in A, hands the responses back to the requester's reply
//!   subject in B: one response (`singleton`, the default) or any number (`stream`,
//!   `chunked`) until the export's `response_threshold`. It counts as interest in B only while
//!   A has a responder, so B's requester gets no-responders like any other.
//!
//! A message that came through a stream or service import is not carried on by another
//! ([`RoutedMsg::hops`]), and does not count as interest there either: nats-server lets
//! imports chain (A to B to C); here a stream or a request takes one import at most, and a
//! requester whose only way to a responder is such a chain gets no-responders. A response
//! goes back by the import its request came through, and on through another only if its
//! reply subject leads there (clients cannot give `_R_.` reply subjects: the reader refuses
//! them, as nats-server). Every step from one account into another, interest check or
//! message, is a [`Crossing`]: never the same import twice on one thread, never more than
//! [`super::crossing::MAX_CROSSINGS`] deep, so loops of imports (an account importing its own
//! export, which nats-server starts with) end: no interest, nothing carried.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use jsproto::subject::tokens;
use rand::Rng as _;

use super::crossing::Crossing;
use super::Account;
use crate::auth::accounts::ResponseType;
use crate::router::{BurstWork, InternalHandler, RouteScratch, RoutedMsg};

/// How a subject of one account becomes a subject of another.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SubjectMap {
    /// Unchanged.
    Same,
    /// `prefix.` + the subject (a stream import's `prefix`).
    Prefix(Bytes),
    /// Always this subject (both patterns literal).
    Literal(Bytes),
    /// By wildcard: the target pattern with its `*` tokens filled, in order, from the tokens
    /// the subject has where the source pattern has its `*`s, and its final `>` with the
    /// tokens the source's `>` covered.
    Wildcards {
        /// Positions of the source pattern's `*` tokens.
        stars: Vec<usize>,
        /// Tokens before the source's `>`, if it ends in one.
        tail_from: Option<usize>,
        /// The target pattern's tokens.
        to: Vec<Bytes>,
    },
}

impl SubjectMap {
    /// The map from subjects matching `from` to subjects matching `to`: any literal subject
    /// to any other, else patterns with as many `*` tokens, both ending in `>` or neither
    /// (`None` otherwise).
    pub fn new(from: &str, to: &str) -> Option<SubjectMap> {
        if from == to {
            return Some(SubjectMap::Same);
        }
        let literal = |s: &str| jsproto::subject::is_literal(s.as_bytes());
        if literal(from) && literal(to) {
            return Some(SubjectMap::Literal(Bytes::copy_from_slice(to.as_bytes())));
        }
        let f: Vec<&[u8]> = tokens(from.as_bytes()).collect();
        let t: Vec<&[u8]> = tokens(to.as_bytes()).collect();
        let stars = |p: &[&[u8]]| p.iter().filter(|x| **x == b"*").count();
        let ends_full = |p: &[&[u8]]| p.last() == Some(&b">".as_slice());
        if stars(&f) != stars(&t) || ends_full(&f) != ends_full(&t) {
            return None;
        }
        Some(SubjectMap::Wildcards {
            stars: (0..f.len()).filter(|&i| f[i] == b"*").collect(),
            tail_from: ends_full(&f).then(|| f.len() - 1),
            to: t.iter().map(|x| Bytes::copy_from_slice(x)).collect(),
        })
    }

    /// A stream import's `prefix` map.
    pub fn prefix(prefix: &str) -> SubjectMap {
        SubjectMap::Prefix(Bytes::copy_from_slice(prefix.as_bytes()))
    }

    /// `subject` (which matches the map's source pattern) mapped.
    pub fn apply(&self, subject: &Bytes) -> Bytes {
        match self {
            SubjectMap::Same => subject.clone(),
            SubjectMap::Literal(to) => to.clone(),
            SubjectMap::Prefix(p) => {
                let mut out = BytesMut::with_capacity(p.len() + 1 + subject.len());
                out.put_slice(p);
                out.put_u8(b'.');
                out.put_slice(subject);
                out.freeze()
            }
            SubjectMap::Wildcards {
                stars,
                tail_from,
                to,
            } => {
                let given: Vec<&[u8]> = tokens(subject).collect();
                let mut filled = stars
                    .iter()
                    .map(|&i| given.get(i).copied().unwrap_or_default());
                let mut out = BytesMut::with_capacity(subject.len() + 16);
                for (i, t) in to.iter().enumerate() {
                    if i > 0 {
                        out.put_u8(b'.');
                    }
                    match t.as_ref() {
                        b"*" => out.put_slice(filled.next().unwrap_or_default()),
                        b">" => {
                            let rest = given.get(tail_from.unwrap_or(given.len())..);
                            for (j, g) in rest.unwrap_or_default().iter().enumerate() {
                                if j > 0 {
                                    out.put_u8(b'.');
                                }
                                out.put_slice(g);
                            }
                        }
                        _ => out.put_slice(t),
                    }
                }
                out.freeze()
            }
        }
    }
}

/// The identity of an import's handler for [`Crossing`]: its address.
fn id<T>(handler: &T) -> usize {
    std::ptr::from_ref(handler) as usize
}

/// Whether `account` would take a message on `subject` carried by the import `via` (which
/// it is `hops` imports from its publisher): asked across a [`Crossing`], false when the
/// crossing is refused.
fn interest_across(via: usize, account: &Account, subject: &Bytes, hops: u8) -> bool {
    let Some(_inside) = Crossing::enter(via) else {
        return false;
    };
    account
        .router()
        .has_interest_at(subject, hops.saturating_add(1))
}

/// Routes `msg` into `account` on `subject` with `reply`, one hop further, across the import
/// `via` ([`Crossing`]: dropped when the crossing is refused).
fn forward(
    via: usize,
    account: &Account,
    subject: &Bytes,
    reply: Option<&Bytes>,
    msg: RoutedMsg<'_>,
) {
    let Some(_inside) = Crossing::enter(via) else {
        return;
    };
    let out = RoutedMsg {
        subject,
        reply,
        headers: msg.headers,
        payload: msg.payload,
        hops: msg.hops.saturating_add(1),
        remote: None,
    };
    let mut scratch = RouteScratch::default();
    account.router().route(None, out, &mut scratch);
    scratch.flush_wakes();
}

/// The exporting account's side of a stream import: subscribed on the imported subject.
pub struct StreamImport {
    /// The importing account.
    pub to: Arc<Account>,
    /// Exporter's subject → importer's.
    pub map: SubjectMap,
}

impl InternalHandler for StreamImport {
    /// Only what was published in the exporting account, and only while the importer would
    /// take it.
    fn wants(&self, subject: &[u8], hops: u8) -> bool {
        if hops > 0 {
            return false;
        }
        let subject = self.map.apply(&Bytes::copy_from_slice(subject));
        interest_across(id(self), &self.to, &subject, hops)
    }

    fn on_message(&self, msg: RoutedMsg<'_>, _later: &mut BurstWork) {
        if msg.hops > 0 {
            return;
        }
        let subject = self.map.apply(msg.subject);
        forward(id(self), &self.to, &subject, msg.reply, msg);
    }
}

/// A reply subject waiting for its responses.
struct Pending {
    reply: Bytes,
    expires: Instant,
}

/// The exporting account's side of a service import: subscribed on `_R_.<import>.>`,
/// hands responses back to the requesters in the importing account.
pub struct Responses {
    /// `_R_.<import>.`
    prefix: Bytes,
    /// The importing account.
    back: Arc<Account>,
    response: ResponseType,
    threshold: Duration,
    pending: Mutex<HashMap<Bytes, Pending>>,
    /// Pending entries at the last sweep of expired ones.
    swept_at: Mutex<usize>,
}

impl Responses {
    /// The response side of an import into `back`, its reply subjects under a fresh
    /// `_R_.<6 random characters>.` prefix.
    pub fn new(back: Arc<Account>, response: ResponseType, threshold: Duration) -> Self {
        Responses {
            prefix: Bytes::from(format!("_R_.{}.", random_token())),
            back,
            response,
            threshold,
            pending: Mutex::new(HashMap::new()),
            swept_at: Mutex::new(0),
        }
    }

    /// The subject to subscribe on: `_R_.<import>.>`.
    pub fn subscription(&self) -> Vec<u8> {
        let mut s = self.prefix.to_vec();
        s.push(b'>');
        s
    }

    /// A fresh reply subject of the exporting account for a request whose own reply is
    /// `reply` (in the importing account).
    fn register(&self, reply: &Bytes) -> Bytes {
        let now = Instant::now();
        let mut subject = BytesMut::with_capacity(self.prefix.len() + 8);
        subject.put_slice(&self.prefix);
        subject.put_slice(random_token().as_bytes());
        let subject = subject.freeze();
        let mut pending = self.pending.lock().expect("responses lock poisoned");
        let mut swept = self.swept_at.lock().expect("responses lock poisoned");
        if pending.len() > 2 * (*swept).max(512) {
            pending.retain(|_, p| p.expires > now);
            *swept = pending.len();
        }
        pending.insert(
            subject.clone(),
            Pending {
                reply: reply.clone(),
                expires: now + self.threshold,
            },
        );
        subject
    }

    /// The requester's reply subject for a response on `subject`, if still open (a
    /// singleton's is closed by its response).
    fn take(&self, subject: &[u8]) -> Option<Bytes> {
        let mut pending = self.pending.lock().expect("responses lock poisoned");
        let open = pending
            .get(subject)
            .is_some_and(|p| p.expires > Instant::now());
        if !open {
            pending.remove(subject);
            return None;
        }
        if self.response == ResponseType::Singleton {
            return pending.remove(subject).map(|p| p.reply);
        }
        pending.get(subject).map(|p| p.reply.clone())
    }
}

impl InternalHandler for Responses {
    /// A response to an open request, unless it is on its way back through this import
    /// already (a loop of reply subjects).
    fn wants(&self, subject: &[u8], _hops: u8) -> bool {
        Crossing::open(id(self))
            && self
                .pending
                .lock()
                .expect("responses lock poisoned")
                .get(subject)
                .is_some_and(|p| p.expires > Instant::now())
    }

    fn on_message(&self, msg: RoutedMsg<'_>, _later: &mut BurstWork) {
        if !Crossing::open(id(self)) {
            return;
        }
        if let Some(reply) = self.take(msg.subject) {
            forward(id(self), &self.back, &reply, None, msg);
        }
    }
}

/// The importing account's side of a service import: subscribed on the local subject.
pub struct ServiceImport {
    /// The exporting account.
    pub exporter: Arc<Account>,
    /// Importer's subject → exporter's.
    pub map: SubjectMap,
    /// Where the responses come back.
    pub responses: Arc<Responses>,
}

impl InternalHandler for ServiceImport {
    /// Only requests made in the importing account, and only while the exporter has a
    /// responder.
    fn wants(&self, subject: &[u8], hops: u8) -> bool {
        if hops > 0 {
            return false;
        }
        let subject = self.map.apply(&Bytes::copy_from_slice(subject));
        interest_across(id(self), &self.exporter, &subject, hops)
    }

    fn on_message(&self, msg: RoutedMsg<'_>, _later: &mut BurstWork) {
        if msg.hops > 0 || !Crossing::open(id(self)) {
            return;
        }
        let subject = self.map.apply(msg.subject);
        let reply = msg.reply.map(|r| self.responses.register(r));
        forward(id(self), &self.exporter, &subject, reply.as_ref(), msg);
    }
}

/// Six characters of `[0-9A-Za-z]`.
fn random_token() -> String {
    const ALPHABET: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let mut rng = rand::rng();
    (0..6)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn apply(map: &SubjectMap, s: &str) -> String {
        String::from_utf8(map.apply(&Bytes::copy_from_slice(s.as_bytes())).to_vec()).unwrap()
    }

    #[test]
    fn subject_maps() {
        let same = SubjectMap::new("a.b", "a.b").unwrap();
        assert_eq!(apply(&same, "a.b"), "a.b");
        let lit = SubjectMap::new("svc.echo", "aecho").unwrap();
        assert_eq!(apply(&lit, "svc.echo"), "aecho");
        assert!(
            SubjectMap::new("svc.*", "aecho").is_none(),
            "a wildcard needs its place"
        );
        let lit = SubjectMap::new("svc.echo", "local.echo").unwrap();
        assert_eq!(apply(&lit, "svc.echo"), "local.echo");
        let star = SubjectMap::new("orders.*.new", "shop.*.created").unwrap();
        assert_eq!(apply(&star, "orders.eu.new"), "shop.eu.created");
        let tail = SubjectMap::new("events.>", "a.>").unwrap();
        assert_eq!(apply(&tail, "events.x.y.z"), "a.x.y.z");
        assert!(SubjectMap::new("a.*", "b.>").is_none());
        assert!(SubjectMap::new("a.*", "b.c").is_none());
        assert!(SubjectMap::new("a.b", "c.*").is_none());
        let js = SubjectMap::new("ajs.>", "$JS.API.>").unwrap();
        assert_eq!(apply(&js, "ajs.STREAM.CREATE.X"), "$JS.API.STREAM.CREATE.X");
        let back = SubjectMap::new("$JS.API.>", "ajs.>").unwrap();
        assert_eq!(apply(&back, "$JS.API.INFO"), "ajs.INFO");
        let moved = SubjectMap::new("x.*.y.*", "z.*.*").unwrap();
        assert_eq!(apply(&moved, "x.1.y.2"), "z.1.2");
        let p = SubjectMap::prefix("froma");
        assert_eq!(apply(&p, "events.one"), "froma.events.one");
    }
}
