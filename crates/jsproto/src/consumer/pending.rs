//! Delivered-but-unacknowledged messages: the pending map, the ack deadlines, the redelivery
//! queue and the ack floor.
//!
//! Times are `u64` nanoseconds since the owning consumer's epoch ("ticks"). Every operation is
//! O(log n) in the number of pending messages; nothing scans the whole set except snapshot,
//! purge of a range (O(k log n) for k removed) and an `ack_wait` change (rare, O(n log n)).
//! Memory per pending message: one map entry (8-byte stream seq + 64-byte [`Entry`]) and
//! one deadline or queue entry (16 bytes), plus B-tree overhead: about 90–110 bytes.

use std::collections::{BTreeMap, BTreeSet};
use std::num::NonZeroU64;
use std::ops::RangeInclusive;

use bytes::Bytes;

use super::{ensure_eq, SequencePair};

/// One delivered, unacknowledged message (64 bytes).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Entry {
    /// Consumer sequence of the **first** delivery (ack-floor arithmetic uses this).
    pub first_consumer_seq: u64,
    /// Ack deadline in ticks. While queued for redelivery it keeps the deadline that was in
    /// force, so a snapshot can still report when the ack-wait clock started.
    pub deadline: u64,
    /// Position on the redelivery queue; `None` while out with a worker (then
    /// `(deadline, stream seq)` is in the deadline set).
    pub queue_pos: Option<NonZeroU64>,
    /// Deliveries so far (1 after the first).
    pub delivery_count: u32,
    /// Where the last delivery went (the pull request's reply subject); `None` after a
    /// restart, which does not keep it. Shared with the request, so keeping it costs a
    /// reference count.
    pub holder: Option<Bytes>,
}

/// What [`PendingSet::expire_due`] did with one message whose ack deadline passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Expired {
    /// Put on the redelivery queue.
    Queued,
    /// Reached `max_deliver`: dropped from pending after this many deliveries.
    Exhausted { stream_seq: u64, deliveries: u32 },
}

/// The pending state of an explicit/all-ack consumer.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct PendingSet {
    entries: BTreeMap<u64, Entry>,
    /// `(deadline, stream seq)` for every entry not on the redelivery queue.
    deadlines: BTreeSet<(u64, u64)>,
    /// Redelivery queue: position → stream seq, for every queued entry.
    #[serde(with = "super::pairs")]
    queue: BTreeMap<NonZeroU64, u64>,
    last_pos: u64,
    /// Messages dropped at `max_deliver`, with their delivery counts, until they are acked
    /// late or leave the stream (as nats-server keeps its redelivery count): those delivered
    /// more than once still count in `num_redelivered`, and an interest or work-queue stream
    /// keeps every one of them for this consumer.
    exhausted: BTreeMap<u64, u32>,
    /// Entries with `delivery_count > 1` plus `exhausted` entries.
    redelivered: u64,
    /// Everything at or below is acknowledged, terminated or gone.
    pub floor: SequencePair,
}

impl PendingSet {
    pub fn new(floor: SequencePair) -> Self {
        Self {
            floor,
            ..Self::default()
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn queued_len(&self) -> usize {
        self.queue.len()
    }

    pub fn redelivered(&self) -> u64 {
        self.redelivered
    }

    pub fn get(&self, stream_seq: u64) -> Option<&Entry> {
        self.entries.get(&stream_seq)
    }

    pub fn iter(&self) -> impl Iterator<Item = (u64, &Entry)> {
        self.entries.iter().map(|(&s, e)| (s, e))
    }

    pub fn exhausted(&self) -> impl Iterator<Item = (u64, u32)> + '_ {
        self.exhausted.iter().map(|(&s, &d)| (s, d))
    }

    /// Earliest ack deadline.
    pub fn next_deadline(&self) -> Option<u64> {
        self.deadlines.first().map(|&(at, _)| at)
    }

    /// The redelivery queue's stream seqs, in queue order.
    pub fn queued(&self) -> impl Iterator<Item = u64> + '_ {
        self.queue.values().copied()
    }

    /// Head of the redelivery queue.
    pub fn first_queued(&self) -> Option<u64> {
        self.queue.first_key_value().map(|(_, &seq)| seq)
    }

    /// Records a first delivery, made to `holder`.
    pub fn insert_new(&mut self, stream_seq: u64, consumer_seq: u64, deadline: u64, holder: Bytes) {
        self.insert(stream_seq, consumer_seq, 1, deadline, Some(holder));
    }

    /// Records an entry restored from a snapshot, its ack deadline armed (where its last
    /// delivery went is not known).
    pub fn insert_restored(
        &mut self,
        stream_seq: u64,
        first_consumer_seq: u64,
        delivery_count: u32,
        deadline: u64,
    ) {
        self.insert(
            stream_seq,
            first_consumer_seq,
            delivery_count,
            deadline,
            None,
        );
    }

    fn insert(
        &mut self,
        stream_seq: u64,
        first_consumer_seq: u64,
        delivery_count: u32,
        deadline: u64,
        holder: Option<Bytes>,
    ) {
        let delivery_count = delivery_count.max(1);
        if let Some(old) = self.entries.remove(&stream_seq) {
            // Not reachable through the consumer (new deliveries only move forward); keeps the
            // indexes consistent anyway.
            self.unlink_indexes(stream_seq, &old);
        }
        if delivery_count > 1 {
            self.redelivered += 1;
        }
        let entry = Entry {
            first_consumer_seq,
            deadline,
            queue_pos: None,
            delivery_count,
            holder,
        };
        self.entries.insert(stream_seq, entry);
        self.deadlines.insert((deadline, stream_seq));
    }

    /// Records a restored max-delivered message (only counted in `num_redelivered`).
    pub fn insert_exhausted(&mut self, stream_seq: u64, deliveries: u32) {
        if self.exhausted.insert(stream_seq, deliveries).is_none() && deliveries > 1 {
            self.redelivered += 1;
        }
    }

    /// Whether `stream_seq` was dropped at `max_deliver` and not acked since.
    pub fn is_exhausted(&self, stream_seq: u64) -> bool {
        self.exhausted.contains_key(&stream_seq)
    }

    /// Takes a message for redelivery to `holder`: its count goes up and the deadline for the
    /// new count is armed. Returns the new delivery count.
    pub fn redeliver(
        &mut self,
        stream_seq: u64,
        deadline_for: impl Fn(u32) -> u64,
        holder: Bytes,
    ) -> Option<u32> {
        let entry = self.entries.get_mut(&stream_seq)?;
        entry.holder = Some(holder);
        if let Some(pos) = entry.queue_pos.take() {
            self.queue.remove(&pos);
        } else {
            self.deadlines.remove(&(entry.deadline, stream_seq));
        }
        if entry.delivery_count == 1 {
            self.redelivered += 1;
        }
        entry.delivery_count = entry.delivery_count.saturating_add(1);
        entry.deadline = deadline_for(entry.delivery_count);
        self.deadlines.insert((entry.deadline, stream_seq));
        Some(entry.delivery_count)
    }

    /// Queues a pending message for redelivery (plain NAK). Returns false if not pending; a
    /// message already queued keeps its place.
    pub fn enqueue(&mut self, stream_seq: u64) -> bool {
        let Some(entry) = self.entries.get_mut(&stream_seq) else {
            return false;
        };
        if entry.queue_pos.is_none() {
            self.deadlines.remove(&(entry.deadline, stream_seq));
            self.last_pos += 1;
            let pos = NonZeroU64::new(self.last_pos).expect("positions start at 1");
            entry.queue_pos = Some(pos);
            self.queue.insert(pos, stream_seq);
        }
        true
    }

    /// Sets a new ack deadline (`+WPI`, NAK with delay), taking the message off the
    /// redelivery queue if it was on it. Returns false if not pending.
    pub fn rearm(&mut self, stream_seq: u64, deadline: u64) -> bool {
        let Some(entry) = self.entries.get_mut(&stream_seq) else {
            return false;
        };
        if let Some(pos) = entry.queue_pos.take() {
            self.queue.remove(&pos);
        } else {
            self.deadlines.remove(&(entry.deadline, stream_seq));
        }
        entry.deadline = deadline;
        self.deadlines.insert((deadline, stream_seq));
        true
    }

    /// Handles every ack deadline at or before `now`: collected, sorted by stream seq (as
    /// nats-server's pending check does), then each is either queued for redelivery or, once
    /// `delivery_count >= max_deliver`, dropped (returned as [`Expired::Exhausted`]).
    pub fn expire_due(&mut self, now: u64, max_deliver: Option<u32>) -> Vec<Expired> {
        let mut due = Vec::new();
        while let Some(&(at, seq)) = self.deadlines.first() {
            if at > now {
                break;
            }
            self.deadlines.pop_first();
            due.push(seq);
        }
        due.sort_unstable();
        let mut out = Vec::with_capacity(due.len());
        for seq in due {
            // The deadline index entry is gone already; `exhaust`/`enqueue` removing it again
            // is a no-op.
            let Some(delivery_count) = self.entries.get(&seq).map(|e| e.delivery_count) else {
                continue;
            };
            if max_deliver.is_some_and(|max| delivery_count >= max) {
                out.extend(self.exhaust(seq));
            } else {
                self.enqueue(seq);
                out.push(Expired::Queued);
            }
        }
        out
    }

    /// Drops a message that reached `max_deliver`. As nats-server, the ack floor does not
    /// move here; the next ack that empties the pending set collapses it onto `delivered`.
    pub fn exhaust(&mut self, stream_seq: u64) -> Option<Expired> {
        let entry = self.entries.remove(&stream_seq)?;
        self.unlink_indexes(stream_seq, &entry);
        if self
            .exhausted
            .insert(stream_seq, entry.delivery_count)
            .is_none()
            && entry.delivery_count > 1
        {
            // Still counted in `redelivered`, now through `exhausted`.
            self.redelivered += 1;
        }
        Some(Expired::Exhausted {
            stream_seq,
            deliveries: entry.delivery_count,
        })
    }

    /// Acknowledges (or terminates, or forgets a deleted) message under the explicit rules:
    /// removed from pending; when its first-delivery consumer seq is `floor + 1` the floor
    /// moves to just below the next pending message; when nothing is pending the floor becomes
    /// `delivered`. Returns the removed entry, `None` if it was not pending.
    pub fn ack_one(&mut self, stream_seq: u64, delivered: SequencePair) -> Option<Entry> {
        let entry = self.entries.remove(&stream_seq)?;
        self.unlink_indexes(stream_seq, &entry);
        if self.entries.is_empty() {
            self.floor = delivered;
        } else if entry.first_consumer_seq == self.floor.consumer_seq + 1 {
            self.floor = SequencePair {
                consumer_seq: entry.first_consumer_seq,
                stream_seq,
            };
            if let Some((&next, e)) = self.entries.range(stream_seq + 1..).next() {
                self.floor = SequencePair {
                    consumer_seq: e.first_consumer_seq - 1,
                    stream_seq: next - 1,
                };
            }
        }
        Some(entry)
    }

    /// `ack_policy: all`: acknowledges everything up to `stream_seq`. Returns the stream seqs
    /// newly covered by the floor; `None` (a no-op) for an ack at or below the floor's stream
    /// seq, or beyond what was `delivered`.
    ///
    /// The floor's stream seq becomes `stream_seq` and its consumer seq stays below the first
    /// delivery of every message still pending; when nothing is pending the floor becomes
    /// `delivered`, as under the explicit rules. Here we
    /// differ from nats-server, which sets the consumer floor to the ack's delivery seq: after
    /// acking a redelivered message that can rise above a younger message still pending (seq
    /// 6 first delivered as 6, seq 5 redelivered as 7, an ack-all of 5 puts nats-server's
    /// floor at 7), and nats-server then ignores the ack of seq 6 and redelivers an
    /// acknowledged message. Here that ack counts.
    pub fn ack_all(
        &mut self,
        stream_seq: u64,
        consumer_seq: u64,
        delivered: SequencePair,
    ) -> Option<RangeInclusive<u64>> {
        if stream_seq <= self.floor.stream_seq
            || stream_seq > delivered.stream_seq
            || consumer_seq > delivered.consumer_seq
        {
            return None;
        }
        let covered = self.floor.stream_seq + 1..=stream_seq;
        let rest = self.entries.split_off(&(stream_seq + 1));
        let acked = std::mem::replace(&mut self.entries, rest);
        for (seq, entry) in &acked {
            self.unlink_indexes(*seq, entry);
        }
        self.drop_exhausted_below(stream_seq + 1);
        self.floor = match self.entries.first_key_value() {
            None => delivered,
            Some((_, first)) => SequencePair {
                consumer_seq: self
                    .floor
                    .consumer_seq
                    .max(consumer_seq.min(first.first_consumer_seq - 1)),
                stream_seq,
            },
        };
        Some(covered)
    }

    /// Forgets a max-delivered message that left the stream (or was acknowledged late).
    pub fn remove_exhausted(&mut self, stream_seq: u64) -> bool {
        match self.exhausted.remove(&stream_seq) {
            Some(deliveries) => {
                if deliveries > 1 {
                    self.redelivered -= 1;
                }
                true
            }
            None => false,
        }
    }

    fn drop_exhausted_below(&mut self, end: u64) {
        let keep = self.exhausted.split_off(&end);
        let gone = std::mem::replace(&mut self.exhausted, keep);
        self.redelivered -= gone.values().filter(|&&d| d > 1).count() as u64;
    }

    /// Every message below `keep_from` is gone (purge). As nats-server's consumer purge: the
    /// stream floor moves to `keep_from - 1`, the consumer floor to the highest first-delivery
    /// seq among the dropped entries; an empty pending set collapses the floor onto
    /// `delivered` (which the caller has already moved).
    pub fn purge_below(&mut self, keep_from: u64, delivered: SequencePair) {
        if self.floor.stream_seq < keep_from {
            self.floor.stream_seq = keep_from - 1;
            let rest = self.entries.split_off(&keep_from);
            let dropped = std::mem::replace(&mut self.entries, rest);
            for (seq, entry) in &dropped {
                self.floor.consumer_seq = self.floor.consumer_seq.max(entry.first_consumer_seq);
                self.unlink_indexes(*seq, entry);
            }
            self.drop_exhausted_below(keep_from);
        }
        if self.entries.is_empty() {
            self.floor = delivered;
        }
    }

    /// Recomputes every ack deadline after an `ack_wait`/`backoff` change:
    /// `new = old - old_wait(count) + new_wait(count)`, so the time already waited (and any
    /// NAK delay) is kept. O(n log n).
    pub fn reschedule(&mut self, old_wait: impl Fn(u32) -> u64, new_wait: impl Fn(u32) -> u64) {
        self.deadlines.clear();
        for (&seq, entry) in &mut self.entries {
            let start = entry
                .deadline
                .saturating_sub(old_wait(entry.delivery_count));
            entry.deadline = start.saturating_add(new_wait(entry.delivery_count));
            if entry.queue_pos.is_none() {
                self.deadlines.insert((entry.deadline, seq));
            }
        }
    }

    /// Removes the indexes and counts of an entry already taken out of `entries`.
    fn unlink_indexes(&mut self, stream_seq: u64, entry: &Entry) {
        match entry.queue_pos {
            Some(pos) => {
                self.queue.remove(&pos);
            }
            None => {
                self.deadlines.remove(&(entry.deadline, stream_seq));
            }
        }
        if entry.delivery_count > 1 {
            self.redelivered -= 1;
        }
    }

    /// Checks that the indexes and counters agree with a recount (O(n); for tests).
    pub fn check(&self) -> Result<(), String> {
        let armed = self
            .entries
            .values()
            .filter(|e| e.queue_pos.is_none())
            .count();
        ensure_eq(armed, self.deadlines.len(), "pending: armed vs deadlines")?;
        ensure_eq(
            self.entries.len() - armed,
            self.queue.len(),
            "pending: queued vs queue",
        )?;
        for (&seq, e) in &self.entries {
            let linked = match e.queue_pos {
                Some(pos) => self.queue.get(&pos) == Some(&seq),
                None => self.deadlines.contains(&(e.deadline, seq)),
            };
            if !linked {
                return Err(format!("pending: entry {seq} not linked"));
            }
        }
        let redelivered = self
            .entries
            .values()
            .filter(|e| e.delivery_count > 1)
            .count()
            + self.exhausted.values().filter(|&&d| d > 1).count();
        ensure_eq(
            redelivered as u64,
            self.redelivered,
            "pending: redelivered count",
        )?;
        Ok(())
    }
}
