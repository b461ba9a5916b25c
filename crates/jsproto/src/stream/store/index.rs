//! Bookkeeping shared by both stores: the sequence index, interned subjects with their
//! per-subject sequences, the stream state, and the limit/purge/lookup decisions.
//!
//! A store keeps one [`Index`] whose entries are its own per-message record ([`Entry`]: the
//! memory store's bytes, the file store's location). The index decides (which message to evict,
//! whether to refuse, what a purge removes, where the next match is); the store carries the
//! decision out, doing its IO around [`Index::insert`] and [`Index::remove`].
//!
//! Costs, n = messages, S = distinct subjects, k = messages of one subject:
//! * insert / remove-oldest: O(1) amortized (messages and each subject's sequences are sorted
//!   deques: appends go to the back, evictions come from the front).
//! * lookup by sequence: O(1) while no interior hole was compacted away, else O(log n).
//! * interior remove: O(log n + k) worst case (a subject deque shift), O(log n) at either end.
//! * literal-subject lookups and pending counts: O(log k); wildcards: the cheaper of walking
//!   the sequence range or the matching subjects.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use super::seqlist::SeqList;
use std::sync::Arc;

use super::StoreState;
use super::{is_all, is_literal, subject_matches, Discard, PurgeRequest, StoreError, StoreLimits};

/// Messages by sequence, ascending. Most live in a dense deque where slot `i` holds sequence
/// `base + i` (`None`: removed), so a slot is just the store's entry (24 bytes for the file
/// store) and a lookup is an index. A message removed from either end of it is popped; one
/// removed inside leaves an empty slot. When empty slots outnumber live ones, the dense part
/// lets go of its oldest slots, moving their live messages to a sparse part that keeps each
/// sequence with its entry, until the rest is at least half full: a few old messages kept by
/// per-subject limits (a KV bucket's rarely written keys) cost a sparse slot each instead of
/// pinning millions of empty dense ones. Amortized O(1) per push and removal; memory at most
/// about two slots per live message, plus deque slack.
#[derive(Debug)]
pub struct SeqMap<E> {
    /// Messages below `base`, which the dense part let go of.
    sparse: SparseMap<E>,
    /// Slot `i` holds sequence `base + i`; the first and last slots are live.
    dense: VecDeque<Option<E>>,
    base: u64,
    dense_live: usize,
}

/// The size of one dense [`SeqMap`] slot holding `E` (for the stores' layout tests).
#[doc(hidden)]
pub const fn slot_size<E>() -> usize {
    std::mem::size_of::<Option<E>>()
}

impl<E> Default for SeqMap<E> {
    fn default() -> Self {
        Self {
            sparse: SparseMap::default(),
            dense: VecDeque::new(),
            base: 0,
            dense_live: 0,
        }
    }
}

/// Fewer empty dense slots than this are never worth moving messages for.
const DENSE_SLACK: usize = 32;

impl<E> SeqMap<E> {
    /// Live messages.
    pub fn len(&self) -> usize {
        self.sparse.len() + self.dense_live
    }

    /// Whether there is no message.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Slots held, live or not (for tests of the memory bound).
    #[cfg(test)]
    fn slot_count(&self) -> usize {
        self.sparse.slots.len() + self.dense.len()
    }

    /// The dense slot of `seq`, if it is in the dense range.
    fn dense_index(&self, seq: u64) -> Option<usize> {
        let i = usize::try_from(seq.checked_sub(self.base)?).ok()?;
        (i < self.dense.len()).then_some(i)
    }

    /// Index of the first dense slot with sequence ≥ `seq`.
    fn dense_lower_bound(&self, seq: u64) -> usize {
        match seq.checked_sub(self.base) {
            None => 0,
            Some(d) => usize::try_from(d).map_or(self.dense.len(), |d| d.min(self.dense.len())),
        }
    }

    /// Message `seq`.
    pub fn get(&self, seq: u64) -> Option<&E> {
        match self.dense_index(seq) {
            Some(i) => self.dense[i].as_ref(),
            None => self.sparse.get(seq),
        }
    }

    /// Message `seq`, mutably.
    pub fn get_mut(&mut self, seq: u64) -> Option<&mut E> {
        match self.dense_index(seq) {
            Some(i) => self.dense[i].as_mut(),
            None => self.sparse.get_mut(seq),
        }
    }

    /// Appends message `seq`, which must be above every sequence held.
    pub fn push(&mut self, seq: u64, e: E) {
        debug_assert!(self.last_key().is_none_or(|last| last < seq));
        if self.dense.is_empty() {
            self.base = seq;
        } else {
            let gap = seq - (self.base + self.dense.len() as u64);
            if gap > (self.dense_live as u64).max(DENSE_SLACK as u64) {
                // A jump (a purge raised the next sequence): start the dense part afresh.
                self.spill(self.dense.len());
                self.base = seq;
            } else {
                for _ in 0..gap {
                    self.dense.push_back(None);
                }
            }
        }
        self.dense.push_back(Some(e));
        self.dense_live += 1;
        self.rebalance();
    }

    /// Removes message `seq`.
    pub fn remove(&mut self, seq: u64) -> Option<E> {
        let Some(i) = self.dense_index(seq) else {
            return self.sparse.remove(seq);
        };
        let e = self.dense[i].take()?;
        self.dense_live -= 1;
        while self.dense.front().is_some_and(Option::is_none) {
            self.dense.pop_front();
            self.base += 1;
        }
        while self.dense.back().is_some_and(Option::is_none) {
            self.dense.pop_back();
        }
        self.rebalance();
        let cap = self.dense.capacity();
        if cap > 1024 && cap / 4 > self.dense.len() {
            self.dense.shrink_to(self.dense.len() * 2);
        }
        Some(e)
    }

    /// Moves the first `n` dense slots' live messages to the sparse part.
    fn spill(&mut self, n: usize) {
        for _ in 0..n {
            match self.dense.pop_front() {
                Some(Some(e)) => {
                    self.sparse.push(self.base, e);
                    self.dense_live -= 1;
                }
                Some(None) => {}
                None => break,
            }
            self.base += 1;
        }
        while self.dense.front().is_some_and(Option::is_none) {
            self.dense.pop_front();
            self.base += 1;
        }
    }

    /// Keeps the dense part at least about half full: past [`DENSE_SLACK`] empty slots, lets go
    /// of its oldest slots until empty ones no longer outnumber live ones.
    fn rebalance(&mut self) {
        let dead = self.dense.len() - self.dense_live;
        if dead <= self.dense_live.max(DENSE_SLACK) {
            return;
        }
        while self.dense.len() - self.dense_live > self.dense_live {
            self.spill(1);
        }
    }

    /// The oldest message.
    pub fn first(&self) -> Option<(u64, &E)> {
        self.sparse.first().or_else(|| {
            let e = self.dense.front()?.as_ref()?;
            Some((self.base, e))
        })
    }

    /// The newest message's sequence.
    pub fn last_key(&self) -> Option<u64> {
        if self.dense.is_empty() {
            self.sparse.last_key()
        } else {
            Some(self.base + self.dense.len() as u64 - 1)
        }
    }

    /// Dense slots from index `i` on, with their sequences.
    fn dense_slots(
        &self,
        from: usize,
        to: usize,
    ) -> impl DoubleEndedIterator<Item = (u64, Option<&E>)> {
        let base = self.base + from as u64;
        self.dense
            .range(from..to)
            .enumerate()
            .map(move |(k, e)| (base + k as u64, e.as_ref()))
    }

    /// Messages in ascending order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (u64, &E)> {
        self.sparse.iter().chain(
            self.dense_slots(0, self.dense.len())
                .filter_map(|(s, e)| Some((s, e?))),
        )
    }

    /// Messages with sequence ≥ `start`, ascending.
    pub fn iter_from(&self, start: u64) -> impl DoubleEndedIterator<Item = (u64, &E)> {
        self.sparse.iter_from(start).chain(
            self.dense_slots(self.dense_lower_bound(start), self.dense.len())
                .filter_map(|(s, e)| Some((s, e?))),
        )
    }

    /// Messages with sequence < `end`, ascending.
    pub fn iter_below(&self, end: u64) -> impl DoubleEndedIterator<Item = (u64, &E)> {
        self.sparse.iter_below(end).chain(
            self.dense_slots(0, self.dense_lower_bound(end))
                .filter_map(|(s, e)| Some((s, e?))),
        )
    }

    /// Slots (live or dead) with sequence ≥ `start`, ascending: for walks that must count the
    /// dead slots they step over.
    pub fn slots_from(&self, start: u64) -> impl DoubleEndedIterator<Item = (u64, Option<&E>)> {
        self.sparse
            .slots_from(start)
            .chain(self.dense_slots(self.dense_lower_bound(start), self.dense.len()))
    }

    /// Sequences in ascending order.
    pub fn keys(&self) -> impl DoubleEndedIterator<Item = u64> + '_ {
        self.iter().map(|(s, _)| s)
    }
}

/// [`SeqMap`]'s part for messages the dense part let go of: a deque of `(seq, entry)` slots. A
/// message removed from either end is popped; one removed from the interior leaves a dead slot
/// until dead slots outnumber live ones, when they are dropped (amortized O(1) per removal;
/// lookups binary-search, or index directly while the slots are consecutive). The first and
/// last slots are always live.
#[derive(Debug)]
struct SparseMap<E> {
    slots: VecDeque<Slot<E>>,
    live: usize,
}

#[derive(Debug)]
struct Slot<E> {
    seq: u64,
    /// `None`: removed (an interior hole not compacted yet).
    e: Option<E>,
}

impl<E> Default for SparseMap<E> {
    fn default() -> Self {
        Self {
            slots: VecDeque::new(),
            live: 0,
        }
    }
}

impl<E> SparseMap<E> {
    /// Live messages.
    pub fn len(&self) -> usize {
        self.live
    }

    /// Index of the first slot with sequence ≥ `seq`.
    fn lower_bound(&self, seq: u64) -> usize {
        let Some(front) = self.slots.front() else {
            return 0;
        };
        if seq <= front.seq {
            return 0;
        }
        // Dense stream: slot i holds front + i.
        if let Ok(i) = usize::try_from(seq - front.seq) {
            if self.slots.get(i).is_some_and(|s| s.seq == seq) {
                return i;
            }
        }
        self.slots.partition_point(|s| s.seq < seq)
    }

    fn pos(&self, seq: u64) -> Option<usize> {
        let i = self.lower_bound(seq);
        (self.slots.get(i)?.seq == seq).then_some(i)
    }

    /// Message `seq`.
    pub fn get(&self, seq: u64) -> Option<&E> {
        self.slots.get(self.pos(seq)?)?.e.as_ref()
    }

    /// Message `seq`, mutably.
    pub fn get_mut(&mut self, seq: u64) -> Option<&mut E> {
        let i = self.pos(seq)?;
        self.slots.get_mut(i)?.e.as_mut()
    }

    /// Appends message `seq`, which must be above every sequence held.
    pub fn push(&mut self, seq: u64, e: E) {
        debug_assert!(self.slots.back().is_none_or(|s| s.seq < seq));
        self.slots.push_back(Slot { seq, e: Some(e) });
        self.live += 1;
    }

    /// Removes message `seq`.
    pub fn remove(&mut self, seq: u64) -> Option<E> {
        let i = self.pos(seq)?;
        let e = self.slots.get_mut(i)?.e.take()?;
        self.live -= 1;
        while self.slots.front().is_some_and(|s| s.e.is_none()) {
            self.slots.pop_front();
        }
        while self.slots.back().is_some_and(|s| s.e.is_none()) {
            self.slots.pop_back();
        }
        let dead = self.slots.len() - self.live;
        if dead > self.live.max(32) {
            self.slots.retain(|s| s.e.is_some());
        }
        let cap = self.slots.capacity();
        if cap > 1024 && cap / 4 > self.slots.len() {
            self.slots.shrink_to(self.slots.len() * 2);
        }
        Some(e)
    }

    /// The oldest message.
    pub fn first(&self) -> Option<(u64, &E)> {
        self.slots
            .front()
            .and_then(|s| Some((s.seq, s.e.as_ref()?)))
    }

    /// The newest message's sequence.
    pub fn last_key(&self) -> Option<u64> {
        self.slots.back().map(|s| s.seq)
    }

    fn live_in(
        slots: std::collections::vec_deque::Iter<'_, Slot<E>>,
    ) -> impl DoubleEndedIterator<Item = (u64, &E)> {
        slots.filter_map(|s| Some((s.seq, s.e.as_ref()?)))
    }

    /// Messages in ascending order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (u64, &E)> {
        Self::live_in(self.slots.iter())
    }

    /// Messages with sequence ≥ `start`, ascending.
    pub fn iter_from(&self, start: u64) -> impl DoubleEndedIterator<Item = (u64, &E)> {
        Self::live_in(self.slots.range(self.lower_bound(start)..))
    }

    /// Messages with sequence < `end`, ascending.
    pub fn iter_below(&self, end: u64) -> impl DoubleEndedIterator<Item = (u64, &E)> {
        Self::live_in(self.slots.range(..self.lower_bound(end)))
    }

    /// Slots (live or dead) with sequence ≥ `start`, ascending: for walks that must count the
    /// dead slots they step over.
    pub fn slots_from(&self, start: u64) -> impl DoubleEndedIterator<Item = (u64, Option<&E>)> {
        self.slots
            .range(self.lower_bound(start)..)
            .map(|s| (s.seq, s.e.as_ref()))
    }
}

/// What a store keeps per message; the index only needs these.
pub trait Entry {
    /// Interned subject id ([`Subjects::intern`]).
    fn subj(&self) -> u32;
    /// Timestamp, Unix ns.
    fn ts(&self) -> u64;
    /// Bytes charged to the stream (the store's nats-server formula).
    fn size(&self) -> u64;
}

/// One distinct subject.
#[derive(Debug)]
pub struct SubjectInfo {
    /// The subject.
    pub name: Arc<str>,
    /// Sequences of its messages, ascending (runs of consecutive ones cost two words).
    pub seqs: SeqList,
}

/// Interned subjects: each distinct subject is stored once and messages refer to it by a `u32`.
/// A subject is forgotten (its id reused) when its last message goes.
#[derive(Debug, Default)]
pub struct Subjects {
    by_name: HashMap<Arc<str>, u32>,
    slots: Vec<Option<SubjectInfo>>,
    free: Vec<u32>,
}

impl Subjects {
    /// Distinct subjects with messages.
    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    /// Whether no subject has messages.
    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    /// The id of `name`, if it has messages.
    pub fn id(&self, name: &str) -> Option<u32> {
        self.by_name.get(name).copied()
    }

    /// The subject with this id.
    pub fn get(&self, id: u32) -> Option<&SubjectInfo> {
        self.slots.get(id as usize)?.as_ref()
    }

    /// The subject `name` (and its messages), if it has any.
    pub fn by_name(&self, name: &str) -> Option<&SubjectInfo> {
        self.get(self.id(name)?)
    }

    /// The id of `name`, allocating one (with no messages yet) if needed. A subject interned
    /// but given no message is dropped by the next [`Subjects::release_if_empty`].
    pub fn intern(&mut self, name: &str) -> u32 {
        if let Some(id) = self.id(name) {
            return id;
        }
        let name: Arc<str> = Arc::from(name);
        let info = SubjectInfo {
            name: name.clone(),
            seqs: SeqList::default(),
        };
        let id = match self.free.pop() {
            Some(id) => {
                self.slots[id as usize] = Some(info);
                id
            }
            None => {
                self.slots.push(Some(info));
                (self.slots.len() - 1) as u32
            }
        };
        self.by_name.insert(name, id);
        id
    }

    /// Forgets subject `id` if it has no message.
    pub fn release_if_empty(&mut self, id: u32) {
        let empty = self.get(id).is_some_and(|s| s.seqs.is_empty());
        if empty {
            if let Some(info) = self.slots.get_mut(id as usize).and_then(Option::take) {
                self.by_name.remove(&info.name);
                self.free.push(id);
            }
        }
    }

    fn push(&mut self, id: u32, seq: u64) {
        if let Some(Some(info)) = self.slots.get_mut(id as usize) {
            info.seqs.push_back(seq);
        }
    }

    fn remove(&mut self, id: u32, seq: u64) {
        if let Some(Some(info)) = self.slots.get_mut(id as usize) {
            info.seqs.remove(seq);
        }
        self.release_if_empty(id);
    }

    /// Subjects matching `filter` (one lookup for a literal, a walk of every subject otherwise).
    pub fn matching<'a>(
        &'a self,
        filter: &'a str,
    ) -> Box<dyn Iterator<Item = &'a SubjectInfo> + 'a> {
        if is_all(filter) {
            Box::new(self.slots.iter().flatten())
        } else if is_literal(filter) {
            Box::new(self.by_name(filter).into_iter())
        } else {
            Box::new(
                self.slots
                    .iter()
                    .flatten()
                    .filter(move |s| subject_matches(filter, &s.name)),
            )
        }
    }
}

/// What a purge removes.
#[derive(Debug, PartialEq, Eq)]
pub enum PurgePlan {
    /// Nothing.
    Nothing,
    /// Every message below this sequence; if it is beyond `last_seq + 1`, the stream's next
    /// sequence becomes it (nats-server's `Compact`).
    Below(u64),
    /// These messages, ascending.
    Seqs(Vec<u64>),
}

/// The sequence index and the stream state.
#[derive(Debug)]
pub struct Index<E> {
    /// Messages by sequence.
    pub msgs: SeqMap<E>,
    /// Interned subjects with their sequences.
    pub subjects: Subjects,
    /// Sum of [`Entry::size`].
    pub bytes: u64,
    first_seq: u64,
    first_ts: u64,
    last_seq: u64,
    last_ts: u64,
    /// Messages `max_age` never removes (`Nats-TTL: never`), marked by
    /// [`Index::exempt_from_age`]. Empty in the common case.
    age_exempt: BTreeSet<u64>,
    /// Every live message below this sequence is in `age_exempt`: age expiry starts its walk
    /// here, so exempt messages at the head are stepped over once, not on every expiry.
    age_cursor: u64,
}

impl<E: Entry> Default for Index<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E: Entry> Index<E> {
    /// An empty index (nothing ever stored).
    pub fn new() -> Self {
        Self {
            msgs: SeqMap::default(),
            subjects: Subjects::default(),
            bytes: 0,
            first_seq: 0,
            first_ts: 0,
            last_seq: 0,
            last_ts: 0,
            age_exempt: BTreeSet::new(),
            age_cursor: 0,
        }
    }

    /// Last sequence ever assigned.
    pub fn last_seq(&self) -> u64 {
        self.last_seq
    }

    /// Timestamp of the last assigned sequence.
    pub fn last_ts(&self) -> u64 {
        self.last_ts
    }

    /// Counts and bounds.
    pub fn state(&self) -> StoreState {
        let msgs = self.msgs.len() as u64;
        let num_deleted = if msgs == 0 {
            0
        } else {
            (self.last_seq - self.first_seq + 1).saturating_sub(msgs)
        };
        StoreState {
            msgs,
            bytes: self.bytes,
            first_seq: self.first_seq,
            first_ts: self.first_ts,
            last_seq: self.last_seq,
            last_ts: self.last_ts,
            num_subjects: self.subjects.len() as u64,
            num_deleted,
        }
    }

    /// Adds message `seq` (which must be above `last_seq`), whose subject the caller interned.
    pub fn insert(&mut self, seq: u64, entry: E) {
        debug_assert!(seq > self.last_seq);
        if self.msgs.is_empty() {
            self.first_seq = seq;
            self.first_ts = entry.ts();
        }
        self.last_seq = seq;
        self.last_ts = entry.ts();
        self.bytes += entry.size();
        self.subjects.push(entry.subj(), seq);
        self.msgs.push(seq, entry);
    }

    /// Removes message `seq`, if present.
    pub fn remove(&mut self, seq: u64) -> Option<E> {
        let entry = self.msgs.remove(seq)?;
        if !self.age_exempt.is_empty() {
            self.age_exempt.remove(&seq);
        }
        self.bytes = self.bytes.saturating_sub(entry.size());
        self.subjects.remove(entry.subj(), seq);
        if seq == self.first_seq {
            self.reset_first();
        }
        Some(entry)
    }

    fn reset_first(&mut self) {
        match self.msgs.first() {
            Some((seq, e)) => {
                self.first_seq = seq;
                self.first_ts = e.ts();
            }
            None => {
                self.first_seq = self.last_seq + 1;
                self.first_ts = 0;
            }
        }
    }

    /// Raises the last sequence (a purge past the end, or recovery from a marker): the next
    /// message gets `seq + 1`. Never lowers it.
    pub fn raise_last(&mut self, seq: u64, ts: u64) {
        if seq > self.last_seq {
            self.last_seq = seq;
            self.last_ts = ts;
        }
        if self.msgs.is_empty() && self.last_seq > 0 {
            self.first_seq = self.first_seq.max(self.last_seq + 1);
            self.first_ts = 0;
        }
    }

    /// Sets the last sequence and its timestamp from a recovered marker, which is
    /// authoritative for its sequence (a tombstone may have raised `last_seq` without knowing
    /// the time). Never lowers it.
    pub fn raise_last_exact(&mut self, seq: u64, ts: u64) {
        if seq == self.last_seq && seq > 0 {
            self.last_ts = ts;
        }
        self.raise_last(seq, ts);
    }

    /// After every message below `floor` was removed: an empty stream's first sequence is at
    /// least `floor`, and so its next sequence (a purge up to a sequence beyond the end).
    pub fn apply_floor(&mut self, floor: u64) {
        if self.msgs.is_empty() && floor > 0 {
            if floor > self.last_seq + 1 {
                self.last_seq = floor - 1;
            }
            self.first_seq = floor.max(self.last_seq + 1);
            self.first_ts = 0;
        }
    }

    /// The oldest message, if any.
    pub fn first(&self) -> Option<(u64, &E)> {
        self.msgs.first()
    }

    /// The subject of message `seq`, if stored.
    pub fn subject_of_seq(&self, seq: u64) -> Option<Arc<str>> {
        self.subject_of(self.msgs.get(seq)?).cloned()
    }

    /// The subject name of an entry.
    pub fn subject_of(&self, entry: &E) -> Option<&Arc<str>> {
        self.subjects.get(entry.subj()).map(|s| &s.name)
    }

    /// Refuses a new message per `max_msg_size` and the discard-new limits (nats-server's
    /// `storeRawMsg` checks); `size` is the message's charged size, `content_len` its
    /// headers + payload. A message with a `Nats-Rollup` header (`headers`, its raw block)
    /// passes a full subject under `discard_new_per_subject`: its rollup purges the subject
    /// after it is stored, as nats-server lets it through.
    pub fn check_store(
        &self,
        limits: &StoreLimits,
        subject: &str,
        headers: Option<&[u8]>,
        content_len: usize,
        size: u64,
    ) -> Result<(), StoreError> {
        if let Ok(max) = usize::try_from(limits.max_msg_size) {
            if content_len > max {
                return Err(StoreError::MsgTooLarge);
            }
        }
        if limits.discard != Discard::New {
            return Ok(());
        }
        let subj = self.subjects.by_name(subject);
        let full = match (limits.max_per_subject(), subj) {
            (Some(max), Some(s)) => s.seqs.len() as u64 >= max,
            _ => false,
        };
        if full && limits.discard_new_per_subject && !has_rollup(headers) {
            return Err(StoreError::MaxMsgsPerSubject);
        }
        // A message on a full subject replaces the subject's oldest, so it passes max_msgs,
        // and max_bytes if that oldest is at least as large.
        if let Some(max) = limits.max_msgs() {
            if self.msgs.len() as u64 >= max && !full {
                return Err(StoreError::MaxMsgs);
            }
        }
        if let Some(max) = limits.max_bytes() {
            if self.bytes + size > max {
                let replaced = subj
                    .filter(|_| full)
                    .and_then(|s| s.seqs.front())
                    .and_then(|seq| self.msgs.get(seq))
                    .map_or(0, Entry::size);
                if !full || replaced < size {
                    return Err(StoreError::MaxBytes);
                }
            }
        }
        Ok(())
    }

    /// The next message to remove after storing one on subject `subj` (or after a limits
    /// change, with `None`): the subject's oldest beyond `max_msgs_per_subject`, else with
    /// discard old the stream's oldest beyond `max_msgs` / `max_bytes`.
    pub fn next_victim(&self, limits: &StoreLimits, subj: Option<u32>) -> Option<u64> {
        if let (Some(max), Some(id)) = (limits.max_per_subject(), subj) {
            if let Some(s) = self.subjects.get(id) {
                if s.seqs.len() as u64 > max {
                    return s.seqs.front();
                }
            }
        }
        if limits.discard != Discard::Old {
            return None;
        }
        let over_msgs = limits
            .max_msgs()
            .is_some_and(|m| self.msgs.len() as u64 > m);
        let over_bytes = limits.max_bytes().is_some_and(|m| self.bytes > m);
        if over_msgs || over_bytes {
            return self.msgs.first().map(|(seq, _)| seq);
        }
        None
    }

    /// Every message beyond `max_msgs_per_subject` (the oldest of each subject), ascending.
    pub fn per_subject_excess(&self, limits: &StoreLimits) -> Vec<u64> {
        let Some(max) = limits.max_per_subject() else {
            return Vec::new();
        };
        let mut out: Vec<u64> = Vec::new();
        for s in self.subjects.matching(">") {
            let n = s.seqs.len() as u64;
            if n > max {
                out.extend(s.seqs.iter().take((n - max) as usize));
            }
        }
        out.sort_unstable();
        out
    }

    /// Exempts message `seq` (if stored) from `max_age`.
    pub fn exempt_from_age(&mut self, seq: u64) {
        if self.msgs.get(seq).is_some() {
            self.age_exempt.insert(seq);
        }
    }

    /// The oldest message `max_age` may still remove, or an exempt one: without exempt
    /// messages (the common case) simply the oldest, O(1).
    fn age_head(&self) -> Option<(u64, &E)> {
        if self.age_cursor <= self.first_seq {
            self.first()
        } else {
            self.msgs.iter_from(self.age_cursor).next()
        }
    }

    /// The oldest message not exempt from `max_age` if it has aged out at `now`
    /// (`ts <= now - max_age`). Exempt messages found on the way are stepped over for good
    /// (the cursor moves past them), so a walk costs O(expired) plus each exempt message once.
    pub fn first_expired(&mut self, limits: &StoreLimits, now: u64) -> Option<u64> {
        let age = limits.max_age_ns()?;
        loop {
            let (seq, e) = self.age_head()?;
            if self.age_exempt.contains(&seq) {
                self.age_cursor = seq + 1;
                continue;
            }
            let due = e.ts().saturating_add(age) <= now;
            // Everything live below `seq` is exempt (the walk got here).
            self.age_cursor = self.age_cursor.max(seq);
            return due.then_some(seq);
        }
    }

    /// When the oldest message not known to be exempt ages out. An exempt message the walk of
    /// [`Index::first_expired`] has not stepped over yet may make this early, never late: the
    /// caller's expiry then steps over it.
    pub fn next_expiry(&self, limits: &StoreLimits) -> Option<u64> {
        let age = limits.max_age_ns()?;
        let (_, e) = self.age_head()?;
        Some(e.ts().saturating_add(age))
    }

    /// What `req` removes (nats-server's `PurgeEx`).
    pub fn purge_plan(&self, req: &PurgeRequest) -> PurgePlan {
        let up_to = req.up_to_seq.filter(|&s| s > 0);
        let keep = req.keep.filter(|&k| k > 0);
        if up_to == Some(1) {
            return PurgePlan::Nothing;
        }
        let filter = req.filter.as_deref().unwrap_or(">");
        if is_all(filter) && keep.is_none() {
            return match up_to {
                None => PurgePlan::Below(self.last_seq + 1),
                Some(seq) if seq < self.first_seq => PurgePlan::Nothing,
                Some(seq) => PurgePlan::Below(seq),
            };
        }
        let bound = up_to.unwrap_or(u64::MAX);
        let (total, mut seqs): (u64, Vec<u64>) = if is_all(filter) {
            (
                self.msgs.len() as u64,
                self.msgs.iter_below(bound).map(|(s, _)| s).collect(),
            )
        } else {
            let mut total = 0;
            let mut seqs = Vec::new();
            for s in self.subjects.matching(filter) {
                total += s.seqs.len() as u64;
                seqs.extend(s.seqs.iter().take_while(|&q| q < bound));
            }
            seqs.sort_unstable();
            (total, seqs)
        };
        if let Some(keep) = keep {
            if keep >= total {
                return PurgePlan::Nothing;
            }
            seqs.truncate((total - keep) as usize);
        }
        if seqs.is_empty() {
            PurgePlan::Nothing
        } else {
            PurgePlan::Seqs(seqs)
        }
    }

    /// Sequences below `seq`, ascending.
    pub fn seqs_below(&self, seq: u64) -> Vec<u64> {
        self.msgs.iter_below(seq).map(|(s, _)| s).collect()
    }

    /// How many messages to look at linearly before walking the subjects instead.
    fn scan_budget(&self) -> usize {
        self.subjects.len().max(64)
    }

    /// The first sequence ≥ `start` whose subject matches `filter`.
    pub fn next_seq(&self, filter: &str, start: u64) -> Option<u64> {
        if is_all(filter) {
            return self.msgs.iter_from(start).next().map(|(s, _)| s);
        }
        if is_literal(filter) {
            return self.subjects.by_name(filter)?.seqs.first_at_or_after(start);
        }
        let mut scanned = 0;
        for (seq, e) in self.msgs.slots_from(start) {
            if e.and_then(|e| self.subject_of(e))
                .is_some_and(|n| subject_matches(filter, n))
            {
                return Some(seq);
            }
            scanned += 1;
            if scanned >= self.scan_budget() {
                // Sparse matches: ask each matching subject instead.
                return self
                    .subjects
                    .matching(filter)
                    .filter_map(|s| s.seqs.first_at_or_after(start))
                    .min();
            }
        }
        None
    }

    /// The highest sequence whose subject matches `filter`.
    pub fn last_seq_matching(&self, filter: &str) -> Option<u64> {
        if is_all(filter) {
            return self.msgs.last_key();
        }
        if is_literal(filter) {
            return self.subjects.by_name(filter)?.seqs.back();
        }
        for (scanned, (seq, e)) in self.msgs.slots_from(0).rev().enumerate() {
            if e.and_then(|e| self.subject_of(e))
                .is_some_and(|n| subject_matches(filter, n))
            {
                return Some(seq);
            }
            if scanned + 1 >= self.scan_budget() {
                return self
                    .subjects
                    .matching(filter)
                    .filter_map(|s| s.seqs.back())
                    .max();
            }
        }
        None
    }

    /// Messages with sequence ≥ `start` matching `filter`.
    pub fn num_pending(&self, start: u64, filter: &str) -> u64 {
        if self.msgs.is_empty() || start > self.last_seq {
            return 0;
        }
        if is_all(filter) {
            if start <= self.first_seq {
                return self.msgs.len() as u64;
            }
            // Count the shorter side.
            let after = self.last_seq - start + 1;
            let before = start - self.first_seq;
            return if after <= before {
                self.msgs.iter_from(start).count() as u64
            } else {
                self.msgs.len() as u64 - self.msgs.iter_below(start).count() as u64
            };
        }
        let count_in = |s: &SubjectInfo| s.seqs.count_at_or_after(start) as u64;
        if is_literal(filter) {
            return self.subjects.by_name(filter).map_or(0, count_in);
        }
        let range = self.last_seq - start.max(self.first_seq) + 1;
        if range <= self.subjects.len() as u64 {
            self.msgs
                .iter_from(start)
                .filter(|(_, e)| {
                    self.subject_of(e)
                        .is_some_and(|n| subject_matches(filter, n))
                })
                .count() as u64
        } else {
            self.subjects.matching(filter).map(count_in).sum()
        }
    }

    /// Per-subject counts of subjects matching `filter`.
    pub fn subjects_state(&self, filter: &str) -> BTreeMap<String, u64> {
        self.subjects
            .matching(filter)
            .map(|s| (s.name.to_string(), s.seqs.len() as u64))
            .collect()
    }

    /// Interior deleted sequences, ascending.
    pub fn deleted(&self) -> Vec<u64> {
        let mut out = Vec::new();
        let Some(mut prev) = self.msgs.keys().next() else {
            return out;
        };
        for seq in self.msgs.keys().skip(1) {
            out.extend(prev + 1..seq);
            prev = seq;
        }
        out.extend(prev + 1..=self.last_seq);
        out
    }
}

/// Whether a raw header block carries a non-empty `Nats-Rollup` (parsed only when asked: a
/// full subject under `discard_new_per_subject`).
fn has_rollup(headers: Option<&[u8]>) -> bool {
    headers
        .and_then(|h| crate::headers::Headers::parse(h).ok())
        .is_some_and(|h| h.get(crate::headers::ROLLUP).is_some_and(|v| !v.is_empty()))
}

#[cfg(test)]
mod seq_map_tests {
    use super::SeqMap;

    fn keys(m: &SeqMap<u64>) -> Vec<u64> {
        m.keys().collect()
    }

    /// Random pushes and removes (mostly interior, so slots are compacted many times) against
    /// a `BTreeMap` model. (The memory-vs-file differential test cannot catch a `SeqMap` bug:
    /// both stores use it.)
    #[test]
    fn matches_a_btreemap() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut rnd = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        for _round in 0..20 {
            let mut m = SeqMap::default();
            let mut model = std::collections::BTreeMap::new();
            let mut next = 1 + rnd(5);
            for step in 0..3000 {
                // Push-heavy, then remove-heavy (interior removes of live messages).
                let push = if step % 1000 < 600 { 7 } else { 2 };
                match rnd(10) {
                    r if r < push => {
                        m.push(next, next + 7);
                        model.insert(next, next + 7);
                        next += 1 + rnd(3) * rnd(2);
                    }
                    8 => {
                        let seq = rnd(next + 2);
                        assert_eq!(m.remove(seq), model.remove(&seq));
                    }
                    r if r < 9 && !model.is_empty() => {
                        let i = rnd(model.len() as u64) as usize;
                        let seq = *model.keys().nth(i).unwrap();
                        assert_eq!(m.remove(seq), model.remove(&seq));
                    }
                    _ => {
                        let k = rnd(4) + 1;
                        let front: Vec<u64> = model.keys().take(k as usize).copied().collect();
                        for seq in front {
                            assert_eq!(m.remove(seq), model.remove(&seq));
                        }
                    }
                }
                let seq = rnd(next + 2);
                assert_eq!(m.get(seq), model.get(&seq));
                assert_eq!(m.len(), model.len());
                assert_eq!(m.first(), model.first_key_value().map(|(&s, e)| (s, e)));
                assert_eq!(m.last_key(), model.keys().next_back().copied());
                let from: Vec<(u64, &u64)> = model.range(seq..).map(|(&s, e)| (s, e)).collect();
                assert_eq!(m.iter_from(seq).collect::<Vec<_>>(), from);
                let below: Vec<(u64, &u64)> = model.range(..seq).map(|(&s, e)| (s, e)).collect();
                assert_eq!(m.iter_below(seq).collect::<Vec<_>>(), below);
                let live: Vec<(u64, &u64)> = m
                    .slots_from(seq)
                    .filter_map(|(s, e)| Some((s, e?)))
                    .collect();
                assert_eq!(live, from);
                // Memory: at most about two slots per live message (dense part at least half
                // full, sparse part likewise), plus the allowed slack.
                assert!(
                    m.slot_count() - m.len() <= m.len() + 2 * 32,
                    "{} slots for {}",
                    m.slot_count(),
                    m.len()
                );
                if let Some(v) = m.get_mut(seq) {
                    *v += 1;
                    *model.get_mut(&seq).unwrap() += 1;
                }
            }
        }
    }

    /// A KV bucket's pattern: one key written once and kept, another rewritten a hundred
    /// thousand times with one message per subject. The old message must not pin the slots of
    /// everything written since.
    #[test]
    fn one_old_message_does_not_pin_empty_slots() {
        let mut m = SeqMap::default();
        m.push(1, 1);
        m.push(2, 2);
        for seq in 3..100_000u64 {
            m.push(seq, seq);
            assert_eq!(m.remove(seq - 1), Some(seq - 1));
            assert!(
                m.slot_count() <= 2 + 2 * 32,
                "{} slots at {seq}",
                m.slot_count()
            );
        }
        assert_eq!(keys(&m), vec![1, 99_999]);
        assert_eq!(m.first(), Some((1, &1)));
        assert_eq!(m.get(1), Some(&1));
        assert_eq!(m.iter_from(2).next(), Some((99_999, &99_999)));
        assert_eq!(m.iter_below(99_999).collect::<Vec<_>>(), vec![(1, &1)]);
        assert_eq!(m.slots_from(0).next_back().map(|(s, _)| s), Some(99_999));
    }

    /// A purge of a contiguous middle range: both ends keep their messages, the empty middle
    /// goes, and every lookup still answers.
    #[test]
    fn a_purged_middle_is_let_go() {
        let mut m = SeqMap::default();
        for seq in 1..=3000u64 {
            m.push(seq, seq);
        }
        for seq in 1001..=2900 {
            m.remove(seq);
        }
        assert_eq!(m.len(), 1100);
        assert!(m.slot_count() <= 2 * 1100 + 2 * 32);
        let want: Vec<u64> = (1..=1000).chain(2901..=3000).collect();
        assert_eq!(keys(&m), want);
        for &seq in &want {
            assert_eq!(m.get(seq), Some(&seq));
        }
        assert_eq!(m.get(1500), None);
        assert_eq!(m.iter_from(1001).next(), Some((2901, &2901)));
        // A jump in sequences (a purge that raised the next one) starts the dense part afresh.
        m.push(1_000_000, 7);
        assert!(m.slot_count() <= 2 * 1101 + 2 * 32);
        assert_eq!(m.last_key(), Some(1_000_000));
        assert_eq!(m.get(1_000_000), Some(&7));
        assert_eq!(m.get(3000), Some(&3000));
    }

    #[test]
    fn holes_ends_and_compaction() {
        let mut m = SeqMap::default();
        for seq in 10..110 {
            m.push(seq, seq * 2);
        }
        // Interior holes stay as dead slots; lookups still direct.
        for seq in (20..100).step_by(2) {
            assert_eq!(m.remove(seq), Some(seq * 2));
        }
        assert_eq!(m.remove(20), None);
        assert_eq!(m.len(), 60);
        assert_eq!(m.get(21), Some(&42));
        assert_eq!(m.get(22), None);
        assert_eq!(m.iter_from(20).next().map(|(s, _)| s), Some(21));
        assert_eq!(m.iter_below(24).last().map(|(s, _)| s), Some(23));
        // Ends are popped, skipping dead slots behind them.
        for seq in 10..22 {
            m.remove(seq);
        }
        assert_eq!(m.first(), Some((23, &46)));
        // Enough interior holes to compact: lookups fall back to binary search.
        for seq in (23..100).step_by(2).skip(1) {
            m.remove(seq);
        }
        assert!(m.slot_count() - m.len() <= m.len() + 2 * 32);
        let want: Vec<u64> = std::iter::once(23).chain(100..110).collect();
        assert_eq!(keys(&m), want);
        for &seq in &want {
            assert_eq!(m.get(seq), Some(&(seq * 2)));
        }
        assert_eq!(m.get(50), None);
        assert_eq!(m.iter_from(24).next().map(|(s, _)| s), Some(100));
        assert_eq!(m.slots_from(0).next_back().map(|(s, _)| s), Some(109));
        assert_eq!(m.last_key(), Some(109));
        for seq in want {
            m.remove(seq);
        }
        assert!(m.is_empty());
        assert_eq!(m.first(), None);
        assert_eq!(m.slot_count(), 0);
        m.push(500, 1);
        assert_eq!(m.get(500), Some(&1));
    }
}
