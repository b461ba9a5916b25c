//! A user's permissions as the connection applies them (nats-server's `setPermissions`,
//! `pubAllowedFullCheck`, `canSubscribe`, `checkDenySub`, `responseAllowed`).
//!
//! - Publish: allowed when the subject matches the allow list (if there is one) and nothing in
//!   the deny list; else, with `allow_responses`, when it is the reply subject of a request
//!   this connection received, at most `max` times within `expires`.
//! - Subscribe: entries may name a queue group (`"orders.* workers"`). A subject matching an
//!   allow entry without a queue is allowed; with a queue group, if queue entries match the
//!   subject, the group must be one of theirs. Deny entries work the same way the other way.
//! - Delivery: a wildcard (or queue) subscription that overlaps a deny entry does not get the
//!   messages whose subject the deny list covers (`foo.*` allowed, `foo.secret` denied: a
//!   message on `foo.secret` is not delivered to `foo.*`).
//!
//! Subjects are matched token by token with wildcards only on the permission's side, as
//! nats-server's sublist: a subscription to `foo.>` is allowed by `foo.>` or `>`, and also by
//! `foo.*` (its `>` token is one token for `*`), as in nats-server.
//!
//! Lists are scanned linearly: they are a handful of entries, and only connections whose user
//! has permissions pay anything.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use jsproto::subject::{is_literal, is_subset, matches, overlaps};

use super::config::{Permissions, ResponsePermission};

/// After this many reply subjects recorded, or this long, expired ones are pruned
/// (nats-server's `replyPermLimit` and `replyPruneTime`).
const REPLY_PRUNE_COUNT: u32 = 4096;
const REPLY_PRUNE_TIME: Duration = Duration::from_secs(1);

/// One subscribe permission entry: a subject, with a queue group or not.
#[derive(Debug, Clone)]
struct SubEntry {
    subject: Bytes,
    queue: Option<Bytes>,
}

/// A user's permissions, ready to check.
#[derive(Debug)]
pub struct ClientPerms {
    /// `None`: no allow list.
    pub_allow: Option<Vec<Bytes>>,
    pub_deny: Vec<Bytes>,
    /// Empty: no allow list (an empty subscribe allow list allows everything, as nats-server).
    sub_allow: Vec<SubEntry>,
    sub_deny: Vec<SubEntry>,
    response: Option<ResponsePermission>,
}

fn sub_entry(s: &str) -> SubEntry {
    let mut parts = s.split_ascii_whitespace();
    let subject = parts.next().unwrap_or_default();
    SubEntry {
        subject: Bytes::copy_from_slice(subject.as_bytes()),
        queue: parts.next().map(|q| Bytes::copy_from_slice(q.as_bytes())),
    }
}

/// Whether `queue` is the group of a permission entry's `pattern` (literally, or as a subset
/// of a wildcard group name: `v1.*` covers `v1.a`).
fn queue_matches(queue: &[u8], pattern: &[u8]) -> bool {
    queue == pattern || (!is_literal(pattern) && is_subset(queue, pattern))
}

/// nats-server's sublist verdict for a subscribe list: `(plain, queue)` where `plain` says an
/// entry without a queue matched `subject`, and `queue` is `None` if no queued entry matched,
/// else whether one of them is `queue`'s group.
fn scan(entries: &[SubEntry], subject: &[u8], queue: &[u8]) -> (bool, Option<bool>) {
    let mut plain = false;
    let mut queued: Option<bool> = None;
    for e in entries.iter().filter(|e| matches(&e.subject, subject)) {
        match &e.queue {
            None => plain = true,
            Some(q) => {
                let hit = queue_matches(queue, q);
                queued = Some(queued.unwrap_or(false) || hit);
            }
        }
    }
    (plain, queued)
}

impl ClientPerms {
    /// Compiles a user's configured permissions.
    pub fn new(p: &Permissions) -> Self {
        let bytes = |s: &String| Bytes::copy_from_slice(s.as_bytes());
        let publish = p.publish.as_ref();
        let subscribe = p.subscribe.as_ref();
        ClientPerms {
            pub_allow: publish
                .and_then(|p| p.allow.as_ref().map(|a| a.iter().map(bytes).collect())),
            pub_deny: publish.map_or_else(Vec::new, |p| p.deny.iter().map(bytes).collect()),
            sub_allow: subscribe
                .and_then(|p| p.allow.as_ref())
                .map_or_else(Vec::new, |a| a.iter().map(|s| sub_entry(s)).collect()),
            sub_deny: subscribe
                .map_or_else(Vec::new, |p| p.deny.iter().map(|s| sub_entry(s)).collect()),
            response: p.response.clone(),
        }
    }

    /// Whether publishing is restricted at all (else no check is made).
    pub fn restricts_publish(&self) -> bool {
        self.pub_allow.is_some() || !self.pub_deny.is_empty()
    }

    /// The allow and deny lists' verdict on publishing to `subject` (replies aside).
    pub fn publish_allowed(&self, subject: &[u8]) -> bool {
        if let Some(allow) = &self.pub_allow {
            if !allow.iter().any(|p| matches(p, subject)) {
                return false;
            }
        }
        !self.pub_deny.iter().any(|p| matches(p, subject))
    }

    /// Whether `SUB subject [queue]` is allowed.
    pub fn subscribe_allowed(&self, subject: &[u8], queue: Option<&[u8]>) -> bool {
        let queue = queue.unwrap_or_default();
        let mut allowed = true;
        if !self.sub_allow.is_empty() {
            let (plain, queued) = scan(&self.sub_allow, subject, queue);
            allowed = plain;
            if let (false, Some(hit)) = (queue.is_empty(), queued) {
                allowed = hit;
            }
        }
        allowed && !self.denies(subject, queue)
    }

    /// The deny list's verdict on `subject` for a subscriber in `queue` (empty: none).
    fn denies(&self, subject: &[u8], queue: &[u8]) -> bool {
        if self.sub_deny.is_empty() {
            return false;
        }
        let (plain, queued) = scan(&self.sub_deny, subject, queue);
        plain || (!queue.is_empty() && queued == Some(true))
    }

    /// Whether deliveries to a subscription on `subject` (in `queue`) must be checked against
    /// the deny list: it is a wildcard or queue subscription overlapping a deny entry.
    pub fn filters_deliveries(&self, subject: &[u8], queue: Option<&[u8]>) -> bool {
        (queue.is_some() || !is_literal(subject))
            && self.sub_deny.iter().any(|d| overlaps(&d.subject, subject))
    }

    /// Whether a message on `subject` must not reach a subscription in `queue`.
    pub fn delivery_denied(&self, subject: &[u8], queue: Option<&[u8]>) -> bool {
        self.denies(subject, queue.unwrap_or_default())
    }

    /// `allow_responses`, if set.
    pub fn response(&self) -> Option<&ResponsePermission> {
        self.response.as_ref()
    }
}

/// The reply subjects a connection with `allow_responses` may publish to: those of the
/// requests delivered to it, each at most `max` times within `expires`.
#[derive(Debug)]
pub struct Replies {
    perms: Arc<ClientPerms>,
    max_msgs: i64,
    expires: Option<Duration>,
    state: Mutex<ReplyState>,
}

#[derive(Debug)]
struct ReplyState {
    /// Reply subject → (when delivered, replies sent).
    open: HashMap<Bytes, (Instant, i64)>,
    since_prune: u32,
    last_prune: Instant,
}

impl Replies {
    /// The tracker for a connection with `perms`, if they allow responses.
    pub fn for_perms(perms: &Arc<ClientPerms>) -> Option<Arc<Replies>> {
        let r = perms.response()?;
        Some(Arc::new(Replies {
            perms: Arc::clone(perms),
            max_msgs: r.max_msgs,
            expires: r.expires,
            state: Mutex::new(ReplyState {
                open: HashMap::new(),
                since_prune: 0,
                last_prune: Instant::now(),
            }),
        }))
    }

    /// A message with reply subject `reply` was delivered to the connection.
    pub fn on_delivery(&self, reply: &Bytes) {
        // As nats-server: nothing to record when the connection may publish there anyway
        // (its lists, or an earlier request with the same reply subject still open).
        if self.perms.publish_allowed(reply) || self.allow(reply) {
            return;
        }
        let now = Instant::now();
        let mut st = self.state.lock().expect("replies lock poisoned");
        st.open.insert(reply.clone(), (now, 0));
        st.since_prune += 1;
        if st.since_prune > REPLY_PRUNE_COUNT
            || now.duration_since(st.last_prune) > REPLY_PRUNE_TIME
        {
            let (max, expires) = (self.max_msgs, self.expires);
            st.open.retain(|_, (at, n)| {
                let used_up = max > 0 && *n >= max;
                let expired = expires.is_some_and(|d| now.duration_since(*at) > d);
                !(used_up || expired)
            });
            st.since_prune = 0;
            st.last_prune = now;
        }
    }

    /// Whether publishing to `subject` is allowed as a reply (and counts it).
    pub fn allow(&self, subject: &[u8]) -> bool {
        let mut st = self.state.lock().expect("replies lock poisoned");
        let Some((at, n)) = st.open.get_mut(subject) else {
            return false;
        };
        *n += 1;
        let over = self.max_msgs > 0 && *n > self.max_msgs;
        let expired = self.expires.is_some_and(|d| at.elapsed() > d);
        if over || expired {
            st.open.remove(subject);
            return false;
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::config::SubjectPermission;

    fn perms(
        pub_allow: &[&str],
        pub_deny: &[&str],
        sub_allow: &[&str],
        sub_deny: &[&str],
    ) -> ClientPerms {
        let list = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        ClientPerms::new(&Permissions {
            publish: Some(SubjectPermission {
                allow: (!pub_allow.is_empty()).then(|| list(pub_allow)),
                deny: list(pub_deny),
            }),
            subscribe: Some(SubjectPermission {
                allow: (!sub_allow.is_empty()).then(|| list(sub_allow)),
                deny: list(sub_deny),
            }),
            response: None,
        })
    }

    #[test]
    fn publish_allow_then_deny() {
        let p = perms(&["foo.>", "bar"], &["foo.secret"], &[], &[]);
        assert!(p.restricts_publish());
        assert!(p.publish_allowed(b"foo.a"));
        assert!(p.publish_allowed(b"bar"));
        assert!(!p.publish_allowed(b"foo.secret"));
        assert!(!p.publish_allowed(b"baz"));
        assert!(!p.publish_allowed(b"foo"));
        let p = perms(&[], &["$JS.API.STREAM.DELETE.>"], &[], &[]);
        assert!(p.publish_allowed(b"$JS.API.STREAM.INFO.X"));
        assert!(!p.publish_allowed(b"$JS.API.STREAM.DELETE.X"));
        assert!(!perms(&[], &[], &[], &[]).restricts_publish());
    }

    #[test]
    fn subscribe_with_queues_as_nats_server() {
        // Probed on nats-server 2.15.1 with the same lists.
        let p = perms(&[], &[], &["foo.>", "q.* g1"], &["foo.hidden"]);
        assert!(!p.subscribe_allowed(b"bar", None));
        assert!(!p.subscribe_allowed(b"q.x", None));
        assert!(p.subscribe_allowed(b"q.x", Some(b"g1")));
        assert!(!p.subscribe_allowed(b"q.x", Some(b"g2")));
        assert!(!p.subscribe_allowed(b"foo.hidden", None));
        assert!(!p.subscribe_allowed(b"foo.hidden", Some(b"g1")));
        assert!(p.subscribe_allowed(b"foo.*", None));
        assert!(p.subscribe_allowed(b"foo.>", Some(b"any")));
        // `foo` plain plus `foo v1`: plain subscribers and group v1 only.
        let p = perms(&[], &[], &["foo", "foo v1", "bar v.*"], &[]);
        assert!(p.subscribe_allowed(b"foo", None));
        assert!(p.subscribe_allowed(b"foo", Some(b"v1")));
        assert!(!p.subscribe_allowed(b"foo", Some(b"v2")));
        assert!(p.subscribe_allowed(b"bar", Some(b"v.x")));
        assert!(!p.subscribe_allowed(b"bar", Some(b"w")));
        // A deny entry with a queue denies that group only.
        let p = perms(&[], &[], &[], &["foo q1"]);
        assert!(p.subscribe_allowed(b"foo", None));
        assert!(!p.subscribe_allowed(b"foo", Some(b"q1")));
        assert!(p.subscribe_allowed(b"foo", Some(b"q2")));
    }

    #[test]
    fn wildcard_subscriptions_filter_denied_deliveries() {
        let p = perms(&[], &[], &["foo.>"], &["foo.hidden"]);
        assert!(p.filters_deliveries(b"foo.*", None));
        assert!(p.filters_deliveries(b"foo.>", None));
        assert!(!p.filters_deliveries(b"foo.bar", None));
        assert!(!p.filters_deliveries(b"foo.bar.*", None));
        assert!(p.delivery_denied(b"foo.hidden", None));
        assert!(!p.delivery_denied(b"foo.visible", None));
    }

    #[test]
    fn replies_once_within_expiry() {
        let p = Arc::new(ClientPerms::new(&Permissions {
            publish: Some(SubjectPermission {
                allow: Some(vec![]),
                deny: vec![],
            }),
            subscribe: None,
            response: Some(ResponsePermission::default()),
        }));
        let r = Replies::for_perms(&p).unwrap();
        assert!(!r.allow(b"_INBOX.1"));
        r.on_delivery(&Bytes::from_static(b"_INBOX.1"));
        assert!(r.allow(b"_INBOX.1"));
        assert!(!r.allow(b"_INBOX.1"), "one reply per request");
        assert!(!r.allow(b"_INBOX.2"));
    }
}
