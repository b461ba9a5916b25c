//! The stream as its consumers read it: a [`StreamView`] over any [`MsgStore`].
//!
//! Consumers ask the stream where their next message is, how many are left, and whether a
//! pull request's requester still listens. [`StoreView`] answers the first from the store's
//! index (every call an index lookup, not a scan, except where noted) and the last from a
//! function the caller passes: the server asks its router, a test or a replica answers as it
//! likes. The same view serves the server and the deterministic tests, so both read the
//! stream the same way.

use std::collections::BTreeSet;

use crate::consumer::{MsgMeta, StreamView, SubjectFilter};

use super::store::{MsgStore, StoredMsg};

/// A [`StreamView`] over `store`, with `interest` answering
/// [`StreamView::has_interest`] for a pull request's reply subject.
pub struct StoreView<'a, I> {
    /// The stream's store.
    pub store: &'a dyn MsgStore,
    /// Whether anyone listens on a reply subject (the server: its router).
    pub interest: I,
}

impl<'a> StoreView<'a, fn(&[u8]) -> bool> {
    /// A view in which every requester still listens (no interest information: tests, and
    /// replicas, which deliver nothing themselves).
    pub fn listening(store: &'a dyn MsgStore) -> Self {
        StoreView {
            store,
            interest: |_| true,
        }
    }
}

/// What a consumer needs of a stored message.
pub fn meta_of(m: &StoredMsg) -> MsgMeta {
    MsgMeta {
        seq: m.seq,
        subject_len: m.subject.len(),
        size: m.headers.as_ref().map_or(0, |h| h.len()) + m.payload.len(),
        timestamp_unix_ns: m.ts,
    }
}

/// A filter as the store's filter strings (`>` for everything).
fn filters(filter: &SubjectFilter) -> Vec<&str> {
    if filter.is_all() {
        vec![">"]
    } else {
        filter.subjects().iter().map(String::as_str).collect()
    }
}

impl<I: Fn(&[u8]) -> bool> StreamView for StoreView<'_, I> {
    fn first_seq(&self) -> u64 {
        let s = self.store.state();
        if s.msgs == 0 {
            s.last_seq + 1
        } else {
            s.first_seq
        }
    }

    fn last_seq(&self) -> u64 {
        self.store.state().last_seq
    }

    fn load(&self, seq: u64) -> Option<MsgMeta> {
        self.store.load(seq).ok().flatten().map(|m| meta_of(&m))
    }

    fn next_matching(&self, from: u64, filter: &SubjectFilter) -> Option<MsgMeta> {
        filters(filter)
            .into_iter()
            .filter_map(|f| self.store.load_next(f, from).ok().flatten())
            .min_by_key(|m| m.seq)
            .map(|m| meta_of(&m))
    }

    fn num_matching(&self, from: u64, filter: &SubjectFilter) -> u64 {
        let filters = filters(filter);
        let intersecting = filters.iter().enumerate().any(|(i, f)| {
            filters[..i]
                .iter()
                .any(|g| crate::subject::overlaps(f.as_bytes(), g.as_bytes()))
        });
        if !intersecting {
            return filters
                .into_iter()
                .map(|f| self.store.num_pending(from, f))
                .sum();
        }
        // Filters that intersect (allowed unless one is a subset of the other): a message
        // matching several counts once, so walk the messages (O(messages from `from`)).
        let mut count = 0;
        let mut seq = from;
        while let Some(m) = self.next_matching(seq, filter) {
            count += 1;
            seq = m.seq + 1;
        }
        count
    }

    fn last_matching(&self, filter: &SubjectFilter) -> Option<u64> {
        filters(filter)
            .into_iter()
            .filter_map(|f| self.store.load_last(f).ok().flatten())
            .map(|m| m.seq)
            .max()
    }

    fn one_msg_per_subject(&self) -> bool {
        self.store.limits().max_per_subject() == Some(1)
    }

    /// O(matching subjects): one index lookup per subject.
    fn last_per_subject(&self, filter: &SubjectFilter) -> Vec<u64> {
        let mut subjects = BTreeSet::new();
        for f in filters(filter) {
            subjects.extend(self.store.subjects_state(f).into_keys());
        }
        let mut seqs: Vec<u64> = subjects
            .iter()
            .filter_map(|s| self.store.load_last(s).ok().flatten())
            .map(|m| m.seq)
            .collect();
        seqs.sort_unstable();
        seqs
    }

    /// A binary search over sequences (timestamps only grow along the stream).
    fn first_seq_at_or_after_time(&self, unix_ns: u64) -> Option<u64> {
        let s = self.store.state();
        let (mut lo, mut hi) = (s.first_seq.max(1), s.last_seq + 1);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match self.store.load_next(">", mid).ok().flatten() {
                Some(m) if m.ts < unix_ns => lo = m.seq + 1,
                _ => hi = mid,
            }
        }
        (lo <= s.last_seq).then_some(lo)
    }

    fn has_interest(&self, reply_to: &[u8]) -> bool {
        (self.interest)(reply_to)
    }
}
