//! The ascending sequences of one subject's messages, run-length encoded.
//!
//! Messages of one subject often come in consecutive sequences (a stream with one subject, a
//! burst from one publisher). A run of consecutive sequences is kept as two words: its first
//! sequence, then a word with the top bit set holding how many follow it. A sequence that
//! starts no run is one word. So a list costs at most 8 bytes per message (every message
//! isolated, as a plain `VecDeque<u64>` would) and 16 bytes per run however long it is: a
//! million messages on one subject take two words instead of eight megabytes.
//!
//! Costs, r = words: appends and removals at either end O(1); lookups O(log r); a removal
//! inside a run splits it, O(r) for the shift as in any deque.

use std::collections::VecDeque;

/// Marks a word as "this many more follow the sequence before it".
const MORE: u64 = 1 << 63;

/// The sequences of one subject, ascending, without duplicates. Sequences must be below 2^63
/// (JetStream's are `u64` counters from 1; nats-server caps them far lower in practice).
#[derive(Debug, Default, Clone)]
pub struct SeqList {
    words: VecDeque<u64>,
    len: usize,
}

/// One run: `first`, `first + 1`, ..., `first + more`, starting at word `at`.
#[derive(Debug, Clone, Copy)]
struct Run {
    at: usize,
    first: u64,
    more: u64,
}

impl Run {
    fn last(&self) -> u64 {
        self.first + self.more
    }

    /// Words it takes.
    fn width(&self) -> usize {
        if self.more > 0 {
            2
        } else {
            1
        }
    }
}

impl SeqList {
    /// Sequences held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no sequence is held.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The run whose words include word `i` (which must exist).
    fn run_at(&self, i: usize) -> Run {
        let at = if self.words[i] & MORE != 0 { i - 1 } else { i };
        let first = self.words[at];
        let more = match self.words.get(at + 1) {
            Some(&w) if w & MORE != 0 => w & !MORE,
            _ => 0,
        };
        Run { at, first, more }
    }

    /// Writes `run` back at its place (it keeps its width) or with one word less or more.
    fn set_more(&mut self, run: Run, more: u64) {
        match (run.more > 0, more > 0) {
            (true, true) => self.words[run.at + 1] = MORE | more,
            (true, false) => {
                self.words.remove(run.at + 1);
            }
            (false, true) => self.words.insert(run.at + 1, MORE | more),
            (false, false) => {}
        }
    }

    /// The first run whose last sequence is at least `seq`, if any.
    fn run_reaching(&self, seq: u64) -> Option<Run> {
        let (mut lo, mut hi) = (0, self.words.len());
        // Invariant: every run starting before word `lo` ends below `seq`; the run starting
        // at `hi` (if any) reaches it.
        while lo < hi {
            let run = self.run_at(lo + (hi - lo) / 2);
            if run.last() < seq {
                lo = run.at + run.width();
            } else {
                hi = run.at;
            }
        }
        (lo < self.words.len()).then(|| self.run_at(lo))
    }

    /// Appends `seq`, which must be above every sequence held.
    pub fn push_back(&mut self, seq: u64) {
        debug_assert!(seq < MORE);
        debug_assert!(self.back().is_none_or(|b| b < seq));
        self.len += 1;
        if let Some(last) = self.words.len().checked_sub(1) {
            let run = self.run_at(last);
            if run.last() + 1 == seq {
                self.set_more(run, run.more + 1);
                return;
            }
        }
        self.words.push_back(seq);
    }

    /// The lowest sequence.
    pub fn front(&self) -> Option<u64> {
        self.words.front().copied()
    }

    /// The highest sequence.
    pub fn back(&self) -> Option<u64> {
        let last = self.words.len().checked_sub(1)?;
        Some(self.run_at(last).last())
    }

    /// Removes `seq`; false if it was not held.
    pub fn remove(&mut self, seq: u64) -> bool {
        let Some(run) = self.run_reaching(seq) else {
            return false;
        };
        if seq < run.first {
            return false;
        }
        self.len -= 1;
        if run.more == 0 {
            self.words.remove(run.at);
        } else if seq == run.first {
            self.words[run.at] = seq + 1;
            self.set_more(run, run.more - 1);
        } else if seq == run.last() {
            self.set_more(run, run.more - 1);
        } else {
            // Split: [first ..= seq - 1] and [seq + 1 ..= last].
            let before = seq - 1 - run.first;
            let after = run.last() - (seq + 1);
            self.words.remove(run.at + 1);
            let mut at = run.at + 1;
            if before > 0 {
                self.words.insert(at, MORE | before);
                at += 1;
            }
            self.words.insert(at, seq + 1);
            if after > 0 {
                self.words.insert(at + 1, MORE | after);
            }
        }
        true
    }

    /// The lowest sequence at or above `start`.
    pub fn first_at_or_after(&self, start: u64) -> Option<u64> {
        self.run_reaching(start).map(|r| r.first.max(start))
    }

    /// How many sequences are at or above `start`: O(log r) to find the place, then one step
    /// per run above it.
    pub fn count_at_or_after(&self, start: u64) -> usize {
        let Some(run) = self.run_reaching(start) else {
            return 0;
        };
        let mut n = (run.last() - run.first.max(start) + 1) as usize;
        let mut at = run.at + run.width();
        while at < self.words.len() {
            let r = self.run_at(at);
            n += r.more as usize + 1;
            at += r.width();
        }
        n
    }

    /// The sequences, ascending.
    pub fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        let mut at = 0;
        std::iter::from_fn(move || {
            if at >= self.words.len() {
                return None;
            }
            let r = self.run_at(at);
            at += r.width();
            Some(r.first..=r.last())
        })
        .flatten()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use proptest::prelude::*;

    use super::*;

    #[test]
    fn one_run_takes_two_words_however_long() {
        let mut l = SeqList::default();
        for seq in 1..=1_000_000 {
            l.push_back(seq);
        }
        assert_eq!(l.words.len(), 2);
        assert_eq!(
            (l.len(), l.front(), l.back()),
            (1_000_000, Some(1), Some(1_000_000))
        );
        assert_eq!(l.count_at_or_after(999_991), 10);
        assert_eq!(l.first_at_or_after(500), Some(500));
        assert!(l.remove(1) && l.remove(1_000_000));
        assert_eq!(
            (l.front(), l.back(), l.words.len()),
            (Some(2), Some(999_999), 2)
        );
        // A removal inside splits the run: still four words.
        assert!(l.remove(500_000));
        assert_eq!(l.words.len(), 4);
        assert_eq!(l.first_at_or_after(500_000), Some(500_001));
        assert_eq!(l.count_at_or_after(500_000), 499_999);
        assert!(!l.remove(500_000));
    }

    #[test]
    fn isolated_sequences_take_one_word_each() {
        let mut l = SeqList::default();
        for seq in (1..=100).map(|i| i * 3) {
            l.push_back(seq);
        }
        assert_eq!(l.words.len(), 100);
        assert_eq!(l.first_at_or_after(4), Some(6));
        assert_eq!(l.first_at_or_after(301), None);
        assert!(!l.remove(4));
    }

    #[derive(Debug, Clone)]
    enum Op {
        Push(u8),
        Remove(u16),
        PopFront,
        PopBack,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (1u8..4).prop_map(Op::Push),
            2 => any::<u16>().prop_map(Op::Remove),
            1 => Just(Op::PopFront),
            1 => Just(Op::PopBack),
        ]
    }

    proptest! {
        /// Agrees with a plain ordered set under any mix of appends (with gaps of 1 to 3, so
        /// that runs form and break) and removals anywhere.
        #[test]
        fn behaves_as_an_ordered_set(ops in proptest::collection::vec(op(), 1..300)) {
            let mut l = SeqList::default();
            let mut model = BTreeSet::new();
            let mut next = 1u64;
            for op in ops {
                match op {
                    Op::Push(gap) => {
                        next += u64::from(gap) - 1;
                        l.push_back(next);
                        model.insert(next);
                        next += 1;
                    }
                    Op::Remove(r) => {
                        let seq = u64::from(r) % (next + 1);
                        prop_assert_eq!(l.remove(seq), model.remove(&seq));
                    }
                    Op::PopFront => {
                        if let Some(f) = l.front() {
                            prop_assert!(l.remove(f));
                            model.remove(&f);
                        }
                    }
                    Op::PopBack => {
                        if let Some(b) = l.back() {
                            prop_assert!(l.remove(b));
                            model.remove(&b);
                        }
                    }
                }
                prop_assert_eq!(l.len(), model.len());
                prop_assert!(l.words.len() <= model.len(), "never more words than sequences");
                prop_assert_eq!(l.front(), model.first().copied());
                prop_assert_eq!(l.back(), model.last().copied());
                prop_assert_eq!(l.iter().collect::<Vec<_>>(), model.iter().copied().collect::<Vec<_>>());
                for start in [0, 1, next / 3, next / 2, next.saturating_sub(1), next + 5] {
                    prop_assert_eq!(l.first_at_or_after(start), model.range(start..).next().copied());
                    prop_assert_eq!(l.count_at_or_after(start), model.range(start..).count());
                }
            }
        }
    }
}
