//! Adaptive spinning before a connection's reader blocks for its next read.
//!
//! A worker pulling one message at a time answers each delivery within tens of microseconds
//! (ack, then the next pull request). Blocking for that answer costs far more than the wait:
//! the server's thread parks in `epoll_wait`, its vCPU goes idle, and the client's send has to
//! wake it again, a cross-CPU wake-up that on a virtual machine dominates the round trip. So
//! before it blocks, a reader may keep yielding to the runtime (which polls the socket
//! readiness on each turn and runs every other ready task) for up to [`IdleSpin::BUDGET`]; a
//! fast answer is then read without any wake-up.
//!
//! Spinning only pays when the client is waiting for the server, taking turns with it: then
//! a shorter wait brings the client's next request sooner. A client that sends on its own
//! clock (a publisher at a fixed rate, with or without PubAcks) comes back no sooner, and
//! spinning through its gaps would only burn CPU. So each connection measures it, as an A/B
//! test on its cycle (the time from one wait to the next, per op read in between). Every
//! [`IdleSpin::PERIOD`], for [`IdleSpin::TRIAL`] every connection spins, then for as long
//! every connection blocks; the trials are the same instants for all connections (times count
//! from one process-wide epoch), because a connection that blocks while others spin is read
//! by their spinning and would measure nothing. A trial's verdict is to spin when the median cycle while spinning
//! was at least [`IdleSpin::MIN_GAIN`] shorter than while blocking; a connection changes its
//! choice for the rest of the periods after [`IdleSpin::VERDICTS`] verdicts in a row against
//! it (one noisy trial changes nothing).
//!
//! The cost of measuring: a client that does not take turns spins through one trial
//! (5 % of the time) and, as every connection starts spinning, until its second trial (at
//! most 2 × `PERIOD`); one that does blocks through the other trial.
//!
//! Measured (`cargo xtask bench`, this repo's 2-vCPU VM): see "Fifth pass" in
//! `docs/performance.md`.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The spin policy of one connection's reader: whether to spin before the next blocking wait.
///
/// Pure state: the reader calls [`IdleSpin::should_spin`] with the time since the shared
/// epoch ([`IdleSpin::since_epoch`]) each time it is about to wait for its client.
#[derive(Debug, Clone)]
pub(crate) struct IdleSpin {
    /// When the previous wait began (since the epoch).
    last: Option<Duration>,
    /// The period whose trials `spin` and `block` hold samples of.
    sampled: u64,
    spin: Cycles,
    block: Cycles,
    /// The period whose trials decided `spinning`.
    decided: Option<u64>,
    /// Whether to spin outside the trials.
    spinning: bool,
    /// Trials in a row whose verdict went against `spinning`.
    against: u32,
}

/// Where a moment falls within its period.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Window {
    SpinTrial,
    BlockTrial,
    Settled,
}

/// Cycle times of one trial, in nanoseconds (the first `SAMPLES` kept).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Cycles {
    samples: [u64; Cycles::SAMPLES],
    count: usize,
}

impl Cycles {
    const SAMPLES: usize = 32;

    const EMPTY: Cycles = Cycles {
        samples: [0; Cycles::SAMPLES],
        count: 0,
    };

    fn add(&mut self, cycle: Duration) {
        if let Some(slot) = self.samples.get_mut(self.count) {
            *slot = u64::try_from(cycle.as_nanos()).unwrap_or(u64::MAX);
            self.count += 1;
        }
    }

    /// The median: a pause of the client's (an idle moment, a slow answer) among the samples
    /// does not move it.
    fn median(self) -> u64 {
        let mut sorted = self.samples;
        let sorted = &mut sorted[..self.count];
        sorted.sort_unstable();
        sorted.get(sorted.len() / 2).copied().unwrap_or(0)
    }
}

impl IdleSpin {
    /// The longest a reader spins before it blocks. Long enough for most of a worker's answers
    /// on the same machine (ack and next pull request after a delivery); short against the
    /// cost of a blocking wait and its wake-up on this VM.
    pub(crate) const BUDGET: Duration = Duration::from_micros(40);

    /// How often the trials run.
    pub(crate) const PERIOD: Duration = Duration::from_millis(200);

    /// How long each trial (spinning, then blocking) lasts.
    pub(crate) const TRIAL: Duration = Duration::from_millis(10);

    /// Fewer cycles than this in a trial (a client slower than `TRIAL / MIN_SAMPLES` per
    /// round trip, far beyond `BUDGET`) decide for blocking.
    pub(crate) const MIN_SAMPLES: usize = 8;

    /// Trials in a row that must disagree with the current choice to change it: one noisy
    /// trial (a paced client delayed by the scheduler, a worker's slow moment) changes nothing.
    pub(crate) const VERDICTS: u32 = 2;

    /// Spinning is kept when its median cycle is at most `1 - MIN_GAIN` of blocking's.
    pub(crate) const MIN_GAIN: f64 = 0.15;

    /// A connection starts spinning, until `VERDICTS` trials in a row say otherwise.
    pub(crate) fn new() -> Self {
        Self {
            last: None,
            sampled: 0,
            spin: Cycles::EMPTY,
            block: Cycles::EMPTY,
            decided: None,
            spinning: true,
            against: 0,
        }
    }

    /// The time since the process-wide epoch that lines up every connection's trials.
    pub(crate) fn since_epoch(now: Instant) -> Duration {
        static EPOCH: OnceLock<Instant> = OnceLock::new();
        now.saturating_duration_since(*EPOCH.get_or_init(Instant::now))
    }

    fn window(at: Duration) -> (u64, Window) {
        let period = Self::PERIOD.as_nanos();
        let nanos = at.as_nanos();
        let index = u64::try_from(nanos / period).unwrap_or(u64::MAX);
        let offset = nanos % period;
        let trial = Self::TRIAL.as_nanos();
        let window = if offset < trial {
            Window::SpinTrial
        } else if offset < 2 * trial {
            Window::BlockTrial
        } else {
            Window::Settled
        };
        (index, window)
    }

    /// Whether the wait beginning at `at` (since the epoch) should spin first; `ops` is how
    /// many ops the client sent since the previous wait. The time since the previous wait
    /// began, per op, is that wait's cycle: a sample of its trial when both waits fall in the
    /// same trial. (Per op, because a reader that blocks may find several of a paced client's
    /// messages at once: fewer, longer cycles for the same pace.)
    pub(crate) fn should_spin(&mut self, at: Duration, ops: u32) -> bool {
        let (period, window) = Self::window(at);
        if self.sampled != period {
            self.sampled = period;
            self.spin = Cycles::EMPTY;
            self.block = Cycles::EMPTY;
        }
        let previous = self.last.replace(at);
        match window {
            Window::SpinTrial | Window::BlockTrial => {
                if let Some(prev) = previous.filter(|&p| Self::window(p) == (period, window)) {
                    let cycle = at.saturating_sub(prev) / ops.max(1);
                    if window == Window::SpinTrial {
                        self.spin.add(cycle);
                    } else {
                        self.block.add(cycle);
                    }
                }
                window == Window::SpinTrial
            }
            Window::Settled => {
                if self.decided != Some(period) {
                    self.decided = Some(period);
                    let verdict = self.spin.count >= Self::MIN_SAMPLES
                        && self.block.count >= Self::MIN_SAMPLES
                        && (self.spin.median() as f64)
                            <= (self.block.median() as f64) * (1.0 - Self::MIN_GAIN);
                    if verdict == self.spinning {
                        self.against = 0;
                    } else {
                        self.against += 1;
                        if self.against >= Self::VERDICTS {
                            self.spinning = verdict;
                            self.against = 0;
                        }
                    }
                }
                self.spinning
            }
        }
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

    const US: Duration = Duration::from_micros(1);

    /// Runs waits from time 0 to `until`; `cycle(at, spun)` is how long the cycle of the wait
    /// at `at` lasts given whether it spun. Returns `(at, spun)` per wait.
    fn drive(until: Duration, cycle: impl Fn(Duration, bool) -> Duration) -> Vec<(Duration, bool)> {
        drive_ops(until, |at, spun| (cycle(at, spun), 1))
    }

    /// As [`drive`], with `cycle` also saying how many ops the next wait finds read.
    fn drive_ops(
        until: Duration,
        cycle: impl Fn(Duration, bool) -> (Duration, u32),
    ) -> Vec<(Duration, bool)> {
        let mut spin = IdleSpin::new();
        let mut at = Duration::ZERO;
        let mut ops = 0;
        let mut out = Vec::new();
        while at < until {
            let spun = spin.should_spin(at, ops);
            out.push((at, spun));
            let (took, read) = cycle(at, spun);
            at += took;
            ops = read;
        }
        out
    }

    /// Share of the waits outside the trials (from `from` on) that spun.
    fn settled_share(waits: &[(Duration, bool)], from: Duration) -> f64 {
        let settled: Vec<bool> = waits
            .iter()
            .filter(|(at, _)| *at >= from && IdleSpin::window(*at).1 == Window::Settled)
            .map(|&(_, s)| s)
            .collect();
        settled.iter().filter(|&&s| s).count() as f64 / settled.len() as f64
    }

    const ONE_S: Duration = Duration::from_secs(1);

    /// A worker's cycle: 20 µs of server work plus its answer, 25 µs when the server spins,
    /// 60 µs when it has to be woken.
    fn worker(spun: bool) -> Duration {
        if spun {
            45 * US
        } else {
            80 * US
        }
    }

    /// A worker whose spinning looks no better while `odd(at)`.
    fn worker_except(odd: impl Fn(Duration) -> bool) -> impl Fn(Duration, bool) -> Duration {
        move |at, spun| worker(spun && !odd(at))
    }

    #[test]
    fn a_client_taking_turns_keeps_spinning() {
        // A worker: 20 µs of server work plus its answer, 25 µs when the server spins, 60 µs
        // when it has to be woken.
        let waits = drive(ONE_S, |_, spun| if spun { 45 * US } else { 80 * US });
        assert_eq!(settled_share(&waits, Duration::ZERO), 1.0);
        // Trials: spinning in the first, blocking in the second.
        for &(at, spun) in &waits {
            match IdleSpin::window(at).1 {
                Window::SpinTrial => assert!(spun),
                Window::BlockTrial => assert!(!spun),
                Window::Settled => {}
            }
        }
    }

    #[test]
    fn a_client_on_its_own_clock_stops_spinning() {
        // A publisher every 30 µs: spinning does not bring it sooner.
        let waits = drive(ONE_S, |_, _| 30 * US);
        // Spinning from the start until the second trial against it (in the second period).
        assert_eq!(settled_share(&waits, IdleSpin::PERIOD), 0.0);
        let first: Vec<_> = waits
            .iter()
            .copied()
            .filter(|w| w.0 < IdleSpin::PERIOD)
            .collect();
        assert_eq!(settled_share(&first, Duration::ZERO), 1.0);
        let later: Vec<_> = waits
            .iter()
            .filter(|w| w.0 >= IdleSpin::PERIOD * 2)
            .collect();
        let spun = later.iter().filter(|w| w.1).count() as f64 / later.len() as f64;
        assert!(spun < 0.06, "{spun}");
    }

    #[test]
    fn a_paced_client_read_in_batches_when_blocking_stops_spinning() {
        // A publisher every 20 µs: spinning reads each message alone, blocking finds two at a
        // time (40 µs cycles, two ops): the same 20 µs per op.
        let waits = drive_ops(
            ONE_S,
            |_, spun| if spun { (20 * US, 1) } else { (40 * US, 2) },
        );
        assert_eq!(settled_share(&waits, IdleSpin::PERIOD), 0.0);
    }

    #[test]
    fn a_small_gain_is_not_worth_spinning_for() {
        // 10 % shorter cycles when spinning: below MIN_GAIN.
        let waits = drive(ONE_S, |_, spun| if spun { 90 * US } else { 100 * US });
        assert_eq!(settled_share(&waits, IdleSpin::PERIOD * 2), 0.0);
    }

    #[test]
    fn a_slow_client_decides_for_blocking() {
        // Round trips of 2 ms: fewer than MIN_SAMPLES per trial, whatever spinning does.
        let waits = drive(ONE_S, |_, spun| if spun { 1500 * US } else { 2000 * US });
        assert_eq!(settled_share(&waits, IdleSpin::PERIOD * 2), 0.0);
    }

    #[test]
    fn a_client_that_starts_taking_turns_is_noticed_at_the_next_trial() {
        let switch = Duration::from_millis(450);
        let waits = drive(ONE_S, |at, spun| {
            if at < switch || !spun {
                80 * US
            } else {
                40 * US
            }
        });
        let before: Vec<_> = waits.iter().copied().filter(|w| w.0 < switch).collect();
        assert_eq!(settled_share(&before, IdleSpin::PERIOD * 2), 0.0);
        // Two trials after the switch (at 600 and 800 ms) spinning is back.
        assert_eq!(settled_share(&waits, IdleSpin::PERIOD * 4), 1.0);
    }

    #[test]
    fn pauses_do_not_swamp_the_trial() {
        // A worker that also pauses for 5 ms every 50 waits.
        let count = std::cell::Cell::new(0u32);
        let waits = drive(ONE_S, |_, spun| {
            count.set(count.get() + 1);
            if count.get() % 50 == 0 {
                Duration::from_millis(5)
            } else {
                worker(spun)
            }
        });
        assert!(settled_share(&waits, Duration::ZERO) > 0.9);
    }

    #[test]
    fn one_trial_against_changes_nothing() {
        // A worker, except that in the second period's trials spinning looked no better.
        let odd = |at: Duration| at >= IdleSpin::PERIOD && at < IdleSpin::PERIOD * 2;
        let waits = drive(ONE_S, worker_except(odd));
        assert_eq!(settled_share(&waits, Duration::ZERO), 1.0);
        // Two in a row do.
        let odd = |at: Duration| at >= IdleSpin::PERIOD && at < IdleSpin::PERIOD * 3;
        let waits = drive(ONE_S, worker_except(odd));
        let third: Vec<_> = waits
            .iter()
            .copied()
            .filter(|w| w.0 >= IdleSpin::PERIOD * 2 && w.0 < IdleSpin::PERIOD * 3)
            .collect();
        assert_eq!(settled_share(&third, Duration::ZERO), 0.0);
    }

    #[test]
    fn trials_line_up_across_connections() {
        // Two connections asking at the same instants get the same trial answers.
        let (mut a, mut b) = (IdleSpin::new(), IdleSpin::new());
        for i in 0..20_000u64 {
            let at = Duration::from_micros(i * 37);
            let (sa, sb) = (a.should_spin(at, 1), b.should_spin(at, 1));
            if IdleSpin::window(at).1 != Window::Settled {
                assert_eq!(sa, sb);
            }
        }
    }
}
