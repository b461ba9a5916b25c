//! Adaptive spinning before a connection's reader blocks for its next read.
//!
//! A worker pulling one message at a time answers each delivery within tens of microseconds
//! (ack, then the next pull request). Blocking for that answer costs far more than the wait:
//! the server's thread parks in `epoll_wait`, its vCPU goes idle, and the client's send has to
//! wake it again, a cross-CPU wake-up that on a virtual machine dominates the round trip. So
//! before it blocks, a reader that has just served its client keeps yielding to the runtime
//! (which polls the socket readiness on each turn and runs every other ready task) for up to
//! [`IdleSpin::BUDGET`]; the answer usually arrives within it and is read without any wake-up.
//!
//! Spinning is only worth it for a client that answers that fast, so it adapts per connection:
//! the reader remembers whether each of its last [`IdleSpin::WINDOW`] spins was beaten by the
//! answer (a hit) or ran out (a miss), and spins before a wait while at least
//! [`IdleSpin::MIN_HITS`] of them were hits. A worker's answer times are spread (on this
//! machine two humps, around 25 and 45 µs), so a spin that misses now and then is still
//! worth it; a connection whose client answers slowly or not at all (a subscriber, a publisher
//! at a fixed rate, an idle client) soon stops spinning and then tries one spin every
//! [`IdleSpin::PROBE_EVERY`] waits, at most `BUDGET / PROBE_EVERY` (≈ 0.6 µs) of CPU per wait,
//! to notice when its client speeds up.
//!
//! Measured (`cargo xtask bench --only drain:1:1`, this repo's 2-vCPU VM): see "Fifth pass"
//! in `docs/performance.md`.

use std::time::Duration;

/// The spin policy of one connection's reader: whether to spin before the next blocking wait.
///
/// Pure state (no clock of its own): the reader calls [`IdleSpin::should_spin`] before it would
/// block and reports the outcome of a spin with [`IdleSpin::record`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct IdleSpin {
    /// The outcomes of the last `WINDOW` spins, newest in the lowest bit: 1 for a hit.
    history: u16,
    /// Waits made without spinning since the last spin.
    unspun: u32,
}

impl IdleSpin {
    /// The longest a reader spins before it blocks. Long enough for most of a worker's answers
    /// on the same machine (ack and next pull request after a delivery); short against the CPU
    /// a blocking wait and its wake-up cost on this VM (≈ 20–30 µs).
    pub(crate) const BUDGET: Duration = Duration::from_micros(40);

    /// How many of the latest spins are remembered.
    pub(crate) const WINDOW: u32 = u16::BITS;

    /// Hits among the last `WINDOW` spins needed to keep spinning: a quarter.
    pub(crate) const MIN_HITS: u32 = Self::WINDOW / 4;

    /// A connection that stopped spinning tries again once per this many waits.
    pub(crate) const PROBE_EVERY: u32 = 64;

    /// A connection that has not waited yet: it spins until its misses say otherwise (the
    /// first `WINDOW - MIN_HITS + 1` waits spin whatever their outcome).
    pub(crate) fn new() -> Self {
        Self {
            history: u16::MAX,
            unspun: 0,
        }
    }

    /// Whether the wait about to begin should spin first; a wait answered `false` is counted
    /// towards the next probe.
    pub(crate) fn should_spin(&mut self) -> bool {
        if self.history.count_ones() >= Self::MIN_HITS || self.unspun + 1 >= Self::PROBE_EVERY {
            true
        } else {
            self.unspun += 1;
            false
        }
    }

    /// The outcome of a spin: `hit` when the client's bytes arrived within the budget.
    pub(crate) fn record(&mut self, hit: bool) {
        self.history = (self.history << 1) | u16::from(hit);
        self.unspun = 0;
    }
}

impl Default for IdleSpin {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `waits` waits where `answers_fast(i)` says whether wait i's answer would beat the
    /// spin; returns, per wait, whether it spun.
    fn drive(spin: &mut IdleSpin, waits: usize, answers_fast: impl Fn(usize) -> bool) -> Vec<bool> {
        (0..waits)
            .map(|i| {
                let spun = spin.should_spin();
                if spun {
                    spin.record(answers_fast(i));
                }
                spun
            })
            .collect()
    }

    fn spun_at(spun: &[bool]) -> Vec<usize> {
        (0..spun.len()).filter(|&i| spun[i]).collect()
    }

    #[test]
    fn a_fast_client_keeps_every_wait_spinning() {
        let mut spin = IdleSpin::new();
        assert!(drive(&mut spin, 1000, |_| true).iter().all(|&s| s));
    }

    #[test]
    fn a_client_that_beats_the_spin_a_third_of_the_time_keeps_it() {
        let mut spin = IdleSpin::new();
        assert!(drive(&mut spin, 3000, |i| i % 3 == 0).iter().all(|&s| s));
    }

    #[test]
    fn a_slow_client_stops_spinning_then_probes() {
        let mut spin = IdleSpin::new();
        let spun = drive(&mut spin, 10_000, |_| false);
        let at = spun_at(&spun);
        // The first WINDOW - MIN_HITS + 1 waits spin (the history starts full of hits) …
        let first = (IdleSpin::WINDOW - IdleSpin::MIN_HITS + 1) as usize;
        assert_eq!(&at[..first], &(0..first).collect::<Vec<_>>()[..]);
        // … then one wait in PROBE_EVERY.
        let gaps: Vec<usize> = at[first - 1..].windows(2).map(|w| w[1] - w[0]).collect();
        assert!(
            gaps.iter().all(|&g| g == IdleSpin::PROBE_EVERY as usize),
            "{gaps:?}"
        );
        assert!(at.len() <= first + 10_000 / IdleSpin::PROBE_EVERY as usize);
    }

    #[test]
    fn a_client_that_speeds_up_is_noticed_by_the_probes() {
        let mut spin = IdleSpin::new();
        drive(&mut spin, 1000, |_| false);
        assert!(!spin.should_spin());
        // From now on every answer beats the spin: MIN_HITS probes later, every wait spins.
        let spun = drive(&mut spin, 1000, |_| true);
        // The wait from which every wait spins: the MIN_HITS-th probe.
        let from = spun.iter().rposition(|&s| !s).map_or(0, |i| i + 1);
        let probes = IdleSpin::MIN_HITS as usize;
        assert!(
            from <= probes * IdleSpin::PROBE_EVERY as usize,
            "all spin from {from}"
        );
        assert_eq!(spun_at(&spun[..from]).len(), probes - 1);
    }

    #[test]
    fn a_client_that_rarely_beats_the_spin_is_left_to_block() {
        let mut spin = IdleSpin::new();
        // One answer in ten beats the spin: below a quarter, so it ends up probing.
        let spun = drive(&mut spin, 64_000, |i| i % 10 == 0);
        let late = spun_at(&spun[32_000..]).len();
        assert!(
            late <= 2 * 32_000 / IdleSpin::PROBE_EVERY as usize,
            "{late} spins"
        );
    }
}
