//! Interest bookkeeping between the servers of a cluster (pure: no IO).
//!
//! A node announces to its peers the subjects its local clients subscribe to, per account and
//! queue group, as nats-server does over its routes: one `RS+` when the first subscription
//! on an (account, subject, queue group) appears and one `RS-` when the last goes
//! ([`LocalInterest`]). Each peer keeps what it heard from each route ([`RemoteInterest`]) to
//! insert one route subscriber per key into its router and to remove them all when the route
//! closes.

use std::collections::HashMap;
use std::hash::Hash;

use bytes::Bytes;

/// One announced interest: an account name (`$G` for the global account), a subject (may
/// hold wildcards) and a queue group (`None`: plain subscriptions).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct InterestKey {
    /// The account the subscriptions are in.
    pub account: Bytes,
    /// The subscribed subject or wildcard filter.
    pub subject: Bytes,
    /// The queue group, if any.
    pub queue: Option<Bytes>,
}

impl InterestKey {
    /// A key from its parts.
    pub fn new(account: Bytes, subject: Bytes, queue: Option<Bytes>) -> Self {
        InterestKey {
            account,
            subject,
            queue,
        }
    }
}

/// How many local subscriptions there are per [`InterestKey`]: the node's side of interest
/// propagation. [`LocalInterest::add`] and [`LocalInterest::remove`] say when the count
/// leaves or reaches zero, which is when peers must be told (`RS+`, `RS-`).
#[derive(Debug, Default, Clone)]
pub struct LocalInterest {
    counts: HashMap<InterestKey, u32, foldhash::fast::RandomState>,
}

impl LocalInterest {
    /// An empty table.
    pub fn new() -> Self {
        LocalInterest::default()
    }

    /// Counts one more subscription on `key`; true when it is the first (announce `RS+`).
    pub fn add(&mut self, key: InterestKey) -> bool {
        let n = self.counts.entry(key).or_insert(0);
        *n += 1;
        *n == 1
    }

    /// Counts one subscription on `key` fewer; true when it was the last (announce `RS-`).
    /// A key never added is ignored (false).
    pub fn remove(&mut self, key: &InterestKey) -> bool {
        match self.counts.get_mut(key) {
            Some(n) if *n > 1 => {
                *n -= 1;
                false
            }
            Some(_) => {
                self.counts.remove(key);
                true
            }
            None => false,
        }
    }

    /// The keys with at least one subscription, sorted: what a new peer is told at once.
    pub fn keys(&self) -> Vec<InterestKey> {
        let mut keys: Vec<_> = self.counts.keys().cloned().collect();
        keys.sort();
        keys
    }

    /// How many distinct keys there are.
    pub fn len(&self) -> usize {
        self.counts.len()
    }

    /// Whether no key has a subscription.
    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }
}

/// What one peer announced: a value (the server's route subscriber) per [`InterestKey`].
/// A repeated `RS+` or an `RS-` for an unknown key changes nothing.
#[derive(Debug)]
pub struct RemoteInterest<T> {
    subs: HashMap<InterestKey, T, foldhash::fast::RandomState>,
}

impl<T> Default for RemoteInterest<T> {
    fn default() -> Self {
        RemoteInterest {
            subs: HashMap::default(),
        }
    }
}

impl<T> RemoteInterest<T> {
    /// An empty table.
    pub fn new() -> Self {
        RemoteInterest::default()
    }

    /// `RS+`: records `key` with the value `make` builds; returns it when the key is new
    /// (the caller inserts it into its router), `None` when already known.
    pub fn insert(&mut self, key: InterestKey, make: impl FnOnce(&InterestKey) -> T) -> Option<&T> {
        match self.subs.entry(key) {
            std::collections::hash_map::Entry::Occupied(_) => None,
            std::collections::hash_map::Entry::Vacant(v) => {
                let value = make(v.key());
                Some(v.insert(value))
            }
        }
    }

    /// `RS-`: forgets `key`; returns its value when it was known (the caller removes it from
    /// its router).
    pub fn remove(&mut self, key: &InterestKey) -> Option<T> {
        self.subs.remove(key)
    }

    /// The route closed: every key with its value.
    pub fn drain(&mut self) -> Vec<(InterestKey, T)> {
        self.subs.drain().collect()
    }

    /// The keys, sorted (for `/routez?subs=1`).
    pub fn keys(&self) -> Vec<&InterestKey> {
        let mut keys: Vec<_> = self.subs.keys().collect();
        keys.sort();
        keys
    }

    /// How many keys are known.
    pub fn len(&self) -> usize {
        self.subs.len()
    }

    /// Whether nothing is known.
    pub fn is_empty(&self) -> bool {
        self.subs.is_empty()
    }
}

/// Which of two routes between the same two servers stays, so that both ends drop the same
/// one: the route dialed by the server with the smaller id (ids compare as strings).
/// `local_id` and `remote_id` are the two servers' ids, `dialed_by_local` says who dialed
/// the route in question. Returns true when this route is the one to keep.
pub fn keep_route<K: Ord + ?Sized + Hash>(
    local_id: &K,
    remote_id: &K,
    dialed_by_local: bool,
) -> bool {
    (local_id < remote_id) == dialed_by_local
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(subject: &'static str, queue: Option<&'static str>) -> InterestKey {
        InterestKey::new(
            Bytes::from_static(b"$G"),
            Bytes::from_static(subject.as_bytes()),
            queue.map(|q| Bytes::from_static(q.as_bytes())),
        )
    }

    #[test]
    fn only_the_first_and_the_last_subscription_are_announced() {
        let mut local = LocalInterest::new();
        assert!(local.add(key("foo", None)));
        assert!(!local.add(key("foo", None)));
        assert!(
            local.add(key("foo", Some("q"))),
            "a queue group is its own key"
        );
        assert!(!local.remove(&key("foo", None)));
        assert!(local.remove(&key("foo", None)));
        assert!(!local.remove(&key("foo", None)), "unknown: ignored");
        assert_eq!(local.keys(), vec![key("foo", Some("q"))]);
        let other = InterestKey::new(Bytes::from_static(b"A"), Bytes::from_static(b"foo"), None);
        assert!(local.add(other.clone()), "accounts are apart");
        assert_eq!(local.len(), 2);
    }

    #[test]
    fn a_peer_announcement_is_recorded_once() {
        let mut remote = RemoteInterest::new();
        assert_eq!(remote.insert(key("a.*", None), |_| 1), Some(&1));
        assert_eq!(remote.insert(key("a.*", None), |_| 2), None, "repeated RS+");
        assert_eq!(remote.insert(key("a.*", Some("g")), |_| 3), Some(&3));
        assert_eq!(remote.remove(&key("b", None)), None);
        assert_eq!(remote.remove(&key("a.*", None)), Some(1));
        let mut left = remote.drain();
        left.sort();
        assert_eq!(left, vec![(key("a.*", Some("g")), 3)]);
        assert!(remote.is_empty());
    }

    #[test]
    fn both_ends_keep_the_same_duplicate() {
        let (a, b) = ("NA", "NB");
        // The route A dialed: A sees it as dialed by itself, B as dialed by the other.
        assert!(keep_route(a, b, true));
        assert!(keep_route(b, a, false));
        // The route B dialed is dropped on both ends.
        assert!(!keep_route(a, b, false));
        assert!(!keep_route(b, a, true));
    }
}
