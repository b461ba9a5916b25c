//! One owner per stream: a command queue in front of a state that only one thread at a time
//! applies commands to, in arrival order, in batches.
//!
//! ```text
//!  sender ──push──▶ queue ──▶ whoever holds the state takes a batch:
//!                               apply_batch (one write, PubAcks) → tick (due deadlines)
//!   inline command, state free:      the sender applies the queue itself (no thread hop)
//!   inline command, state busy:      the holder applies it before letting go
//!   thread-only command, deadlines:  the owner thread ([`Sender::run_thread`])
//! ```
//!
//! Only the holder of the state's lock takes commands off the queue, so commands are applied
//! in the order they were queued, whoever applies them. Which commands a sender may apply on
//! its own thread is the state's choice ([`Owned::inline`]): for a stream, publishes, pulls
//! and plain acks when no fsync stands before the PubAck, as nats-server processes a publish
//! in the publisher's read loop. Everything else (API operations, fsync mode, deadlines) is
//! the owner thread's, so no connection task ever waits on an fsync or another stream.
//!
//! Back-pressure: a queue past its capacity makes the sender wait for the state and apply the
//! queue itself, instead of growing memory without bound; a thread that already holds a
//! state (a delivery reaching another stream's ingest) never waits, so two streams feeding
//! each other cannot deadlock.
//!
//! This file knows nothing about streams: [`Owned`] is what the stream engine implements,
//! and the tests below drive it with a toy state.

use std::cell::Cell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::time::Instant;

use crate::router::{AtBurstEnd, BurstWork};

/// Most commands taken off the queue for one [`Owned::apply_batch`].
pub const MAX_BATCH: usize = 4096;

/// What an owner drives: a state that applies its commands in batches and has deadlines.
pub trait Owned: Send + 'static {
    /// A command for the state.
    type Cmd: Send + 'static;

    /// Whether a sender may apply `cmd` on its own thread (when the state allows inline
    /// application at all, see [`Sender::new`]); false leaves it to the owner thread.
    fn inline(cmd: &Self::Cmd) -> bool;

    /// Applies `batch` (draining it) and commits it, fires due deadlines and flushes what the
    /// batch produced. False when a command stopped the state: the queue is then closed.
    fn apply_batch(&mut self, batch: &mut Vec<Self::Cmd>) -> bool;

    /// Fires the deadlines due now and returns the next one (none: no deadline).
    fn tick(&mut self) -> Option<Instant>;

    /// The next deadline as of the last [`Owned::apply_batch`] or [`Owned::tick`], without
    /// firing anything.
    fn next_deadline(&self) -> Option<Instant>;
}

thread_local! {
    /// States this thread holds the lock of (a state's outputs can reach another owner's
    /// senders, or its own): such a thread must never block on a state.
    static HELD: Cell<u32> = const { Cell::new(0) };
}

/// The command queue, under its own (briefly held) lock.
struct Queue<C> {
    cmds: VecDeque<C>,
    /// The owner thread is asked to run (work for it, or an earlier deadline).
    wake_thread: bool,
    /// The state has stopped: commands are dropped.
    stopped: bool,
}

/// What an owner's senders and its thread share.
struct Cell_<T: Owned> {
    queue: Mutex<Queue<T::Cmd>>,
    /// Signals the owner thread ([`Queue::wake_thread`], [`Queue::stopped`]).
    ready: Condvar,
    state: Mutex<T>,
    /// Whether senders may apply [`Owned::inline`] commands themselves.
    inline: bool,
    /// Commands queued beyond which a sender applies the queue itself.
    capacity: usize,
    /// When the sleeping owner thread will wake by itself, ns after `epoch` (`u64::MAX`:
    /// never); a sender that leaves an earlier deadline behind wakes it.
    thread_deadline: AtomicU64,
    epoch: Instant,
}

/// Holds a state's lock and marks the thread as holding one.
struct Held<'a, T>(MutexGuard<'a, T>);

impl<'a, T> Held<'a, T> {
    fn new(guard: MutexGuard<'a, T>) -> Self {
        HELD.with(|n| n.set(n.get() + 1));
        Held(guard)
    }
}

impl<T> Drop for Held<'_, T> {
    fn drop(&mut self) {
        HELD.with(|n| n.set(n.get() - 1));
    }
}

impl<T: Owned> Cell_<T> {
    fn queue(&self) -> MutexGuard<'_, Queue<T::Cmd>> {
        self.queue.lock().expect("owner queue lock poisoned")
    }

    fn lock_state(&self) -> MutexGuard<'_, T> {
        self.state.lock().expect("owned state lock poisoned")
    }

    fn may_inline(&self, cmd: &T::Cmd) -> bool {
        self.inline && T::inline(cmd)
    }

    fn nanos(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.epoch).as_nanos() as u64
    }

    /// Queues `cmd`; true when the caller should apply the queue (inline, or at its burst's
    /// end). A queue past its capacity is applied here and now, waiting for the state
    /// (back-pressure), unless this thread holds a state already.
    fn push(&self, cmd: T::Cmd) -> bool {
        let inline = self.may_inline(&cmd);
        let backlog = {
            let mut q = self.queue();
            if q.stopped {
                return false;
            }
            q.cmds.push_back(cmd);
            if !inline && !q.wake_thread {
                q.wake_thread = true;
                self.ready.notify_one();
            }
            q.cmds.len()
        };
        if backlog > self.capacity && HELD.with(Cell::get) == 0 {
            self.combine(true);
            return false;
        }
        inline
    }

    /// Takes the state (waiting for it when `block`) and applies what is queued (all of it
    /// when `block`, else what a sender may apply), until nothing of that is left after
    /// letting go of the state or someone else holds it.
    fn combine(&self, mut block: bool) {
        loop {
            let guard = if block {
                self.lock_state()
            } else {
                match self.state.try_lock() {
                    Ok(g) => g,
                    Err(std::sync::TryLockError::WouldBlock) => return,
                    Err(std::sync::TryLockError::Poisoned(_)) => panic!("owned state poisoned"),
                }
            };
            let mut state = Held::new(guard);
            // A sender held back by a full queue applies all of it, whatever the command.
            if !self.apply_queued(&mut state.0, block) {
                return;
            }
            // Deadlines set here that come before the sleeping thread's own wake-up need it.
            if let Some(at) = state.0.next_deadline() {
                let at = self.nanos(at);
                if at < self.thread_deadline.load(Ordering::Acquire) {
                    self.thread_deadline.store(at, Ordering::Release);
                    let mut q = self.queue();
                    q.wake_thread = true;
                    self.ready.notify_one();
                }
            }
            drop(state);
            // Senders that found the state busy after our last look left their commands to us.
            if !self
                .queue()
                .cmds
                .front()
                .is_some_and(|c| self.may_inline(c))
            {
                return;
            }
            block = false;
        }
    }

    /// Applies queued commands in batches of up to [`MAX_BATCH`] until none are left, or,
    /// unless `all`, until the first command only the thread may apply (it has been woken for
    /// it; order is kept by leaving everything after it too). False when the state stopped
    /// (the queue is then closed and the thread told).
    fn apply_queued(&self, state: &mut T, all: bool) -> bool {
        let mut batch = Vec::new();
        loop {
            {
                let mut q = self.queue();
                if q.stopped {
                    return false;
                }
                let n = if all {
                    q.cmds.len().min(MAX_BATCH)
                } else {
                    q.cmds
                        .iter()
                        .take(MAX_BATCH)
                        .take_while(|c| self.may_inline(c))
                        .count()
                };
                batch.extend(q.cmds.drain(..n));
            }
            if batch.is_empty() {
                return true;
            }
            if !state.apply_batch(&mut batch) {
                let mut q = self.queue();
                q.stopped = true;
                q.cmds.clear();
                self.ready.notify_one();
                return false;
            }
        }
    }
}

impl<T: Owned> AtBurstEnd for Cell_<T> {
    fn run(&self) {
        self.combine(false);
    }
}

/// The way into an owned state: every command goes through [`Sender::send`], which applies
/// it in arrival order either on the calling thread or on the owner thread.
pub struct Sender<T: Owned>(Arc<Cell_<T>>);

impl<T: Owned> Clone for Sender<T> {
    fn clone(&self) -> Self {
        Sender(Arc::clone(&self.0))
    }
}

/// A [`Sender`] that does not keep the state alive (held by subscriptions the state owns).
pub struct WeakSender<T: Owned>(Weak<Cell_<T>>);

impl<T: Owned> Clone for WeakSender<T> {
    fn clone(&self) -> Self {
        WeakSender(Weak::clone(&self.0))
    }
}

impl<T: Owned> WeakSender<T> {
    /// [`Sender::send`], if the state still exists.
    pub fn send(&self, cmd: T::Cmd) {
        if let Some(cell) = self.0.upgrade() {
            Sender(cell).send(cmd);
        }
    }

    /// [`Sender::send_at_burst_end`], if the state still exists.
    pub fn send_at_burst_end(&self, cmd: T::Cmd, later: &mut BurstWork) {
        if let Some(cell) = self.0.upgrade() {
            Sender(cell).send_at_burst_end(cmd, later);
        }
    }
}

impl<T: Owned> Sender<T> {
    /// Puts `state` behind a queue of `capacity` commands; senders apply
    /// [`Owned::inline`] commands themselves only when `inline`. [`Sender::run_thread`] must
    /// then run on a thread of its own.
    pub fn new(state: T, inline: bool, capacity: usize) -> Self {
        Sender(Arc::new(Cell_ {
            queue: Mutex::new(Queue {
                cmds: VecDeque::new(),
                wake_thread: false,
                stopped: false,
            }),
            ready: Condvar::new(),
            state: Mutex::new(state),
            inline,
            capacity,
            thread_deadline: AtomicU64::new(u64::MAX),
            epoch: Instant::now(),
        }))
    }

    /// A handle that does not keep the state alive.
    pub fn downgrade(&self) -> WeakSender<T> {
        WeakSender(Arc::downgrade(&self.0))
    }

    /// Runs `f` on the state now, waiting for its lock (set-up before the thread starts).
    pub fn with_state<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        f(&mut self.0.lock_state())
    }

    /// Queues `cmd`; then applies the queue here when the state is free and the command may
    /// be applied inline, else leaves it to the state's current holder or the owner thread.
    /// A queue past its capacity makes the sender wait for the state (back-pressure).
    /// Commands sent after the state stopped are dropped.
    pub fn send(&self, cmd: T::Cmd) {
        if self.0.push(cmd) {
            self.0.combine(false);
        }
    }

    /// Like [`Sender::send`], but an inline command is applied at the end of the sender's
    /// burst (`later`), together with the rest of the burst: one write and one batch of
    /// PubAcks for all the publishes a connection's read brought in.
    pub fn send_at_burst_end(&self, cmd: T::Cmd, later: &mut BurstWork) {
        if self.0.push(cmd) {
            let work: Arc<dyn AtBurstEnd> = self.0.clone();
            later.add(&work);
        }
    }

    /// The owner thread's body: applies what senders leave to it, fires deadlines
    /// ([`Owned::tick`]) and sleeps until the next one or new work; ends when the state stops.
    pub fn run_thread(self) {
        let cell = &self.0;
        loop {
            let deadline = {
                let mut state = Held::new(cell.lock_state());
                if !cell.apply_queued(&mut state.0, true) {
                    return;
                }
                let at = state.0.tick();
                let nanos = at.map_or(u64::MAX, |at| cell.nanos(at));
                cell.thread_deadline.store(nanos, Ordering::Release);
                at
            };
            let mut q = cell.queue();
            // Commands queued while this thread held the state found it busy: they are this
            // thread's to apply (their senders did not wait).
            while !q.wake_thread && !q.stopped && q.cmds.is_empty() {
                match deadline {
                    Some(at) => {
                        let now = Instant::now();
                        if at <= now {
                            break;
                        }
                        q = cell
                            .ready
                            .wait_timeout(q, at - now)
                            .expect("owner queue lock poisoned")
                            .0;
                    }
                    None => q = cell.ready.wait(q).expect("owner queue lock poisoned"),
                }
            }
            if q.stopped {
                return;
            }
            q.wake_thread = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::thread;
    use std::time::Duration;

    /// A command of the toy state: `(sender, n)` appended to the log; `Thread` is owner-only;
    /// `Stop` stops the state; `Deadline` (inline) asks for a tick at an instant.
    #[derive(Debug)]
    enum Cmd {
        Log(u32, u32),
        Thread(u32, u32),
        Deadline(Instant),
        Stop,
    }

    #[derive(Default)]
    struct Toy {
        /// `(sender, n, applied on the owner thread)` in the order applied.
        log: Vec<(u32, u32, bool)>,
        owner: Option<thread::ThreadId>,
        batches: usize,
        deadline: Option<Instant>,
        ticks_after_deadline: usize,
        /// Shared with the test: set while a batch is being applied (re-entrancy check).
        busy: Arc<AtomicBool>,
    }

    impl Owned for Toy {
        type Cmd = Cmd;

        fn inline(cmd: &Cmd) -> bool {
            matches!(cmd, Cmd::Log(..) | Cmd::Deadline(_))
        }

        fn apply_batch(&mut self, batch: &mut Vec<Cmd>) -> bool {
            assert!(
                !self.busy.swap(true, Ordering::SeqCst),
                "two appliers at once"
            );
            self.batches += 1;
            let on_owner = self.owner == Some(thread::current().id());
            for cmd in batch.drain(..) {
                match cmd {
                    Cmd::Log(s, n) | Cmd::Thread(s, n) => self.log.push((s, n, on_owner)),
                    Cmd::Deadline(at) => self.deadline = Some(at),
                    Cmd::Stop => {
                        self.busy.store(false, Ordering::SeqCst);
                        return false;
                    }
                }
            }
            self.busy.store(false, Ordering::SeqCst);
            true
        }

        fn tick(&mut self) -> Option<Instant> {
            if self.deadline.is_some_and(|at| at <= Instant::now()) {
                self.deadline = None;
                self.ticks_after_deadline += 1;
            }
            self.deadline
        }

        fn next_deadline(&self) -> Option<Instant> {
            self.deadline
        }
    }

    fn start(inline: bool, capacity: usize) -> (Sender<Toy>, thread::JoinHandle<()>) {
        let tx = Sender::new(Toy::default(), inline, capacity);
        let (id_tx, id_rx) = std::sync::mpsc::channel();
        let thread_tx = tx.clone();
        let handle = thread::spawn(move || {
            id_tx.send(thread::current().id()).unwrap();
            thread_tx.run_thread();
        });
        let id = id_rx.recv().unwrap();
        tx.with_state(|t| t.owner = Some(id));
        (tx, handle)
    }

    /// Waits (no timing assertion: only a generous cap against a hang) until `done` holds.
    fn eventually(tx: &Sender<Toy>, done: impl Fn(&Toy) -> bool) {
        let give_up = Instant::now() + Duration::from_secs(30);
        while !tx.with_state(|t| done(t)) {
            assert!(Instant::now() < give_up, "condition never held");
            thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn each_senders_commands_are_applied_once_in_order() {
        for inline in [true, false] {
            // Room for everything: back-pressure (a sender applying all) is another test's.
            let (tx, owner) = start(inline, 100_000);
            let senders: Vec<_> = (0..4u32)
                .map(|s| {
                    let tx = tx.clone();
                    thread::spawn(move || {
                        for n in 0..2000u32 {
                            // Every tenth command is owner-only: order must hold across both.
                            if n % 10 == 0 {
                                tx.send(Cmd::Thread(s, n));
                            } else {
                                tx.send(Cmd::Log(s, n));
                            }
                        }
                    })
                })
                .collect();
            for s in senders {
                s.join().unwrap();
            }
            eventually(&tx, |t| t.log.len() == 8000);
            let log = tx.with_state(|t| t.log.clone());
            for s in 0..4u32 {
                let mine: Vec<u32> = log.iter().filter(|e| e.0 == s).map(|e| e.1).collect();
                assert_eq!(
                    mine,
                    (0..2000).collect::<Vec<_>>(),
                    "sender {s}, inline {inline}"
                );
            }
            // Owner-only commands never ran on a sender's thread.
            assert!(log.iter().filter(|e| e.1 % 10 == 0).all(|e| e.2));
            if !inline {
                assert!(
                    log.iter().all(|e| e.2),
                    "without inline, only the owner applies"
                );
            }
            tx.send(Cmd::Stop);
            owner.join().unwrap();
        }
    }

    #[test]
    fn a_free_state_is_applied_on_the_senders_thread_at_once() {
        let (tx, owner) = start(true, 64);
        tx.send(Cmd::Log(1, 1));
        // No waiting: the sender applied it before `send` returned.
        assert_eq!(tx.with_state(|t| t.log.clone()), vec![(1, 1, false)]);
        tx.send(Cmd::Stop);
        owner.join().unwrap();
    }

    #[test]
    fn burst_end_work_applies_the_burst_as_one_batch() {
        let (tx, owner) = start(true, 64);
        let before = tx.with_state(|t| t.batches);
        let mut later = BurstWork::default();
        for n in 0..10 {
            tx.send_at_burst_end(Cmd::Log(7, n), &mut later);
        }
        assert!(
            tx.with_state(|t| t.log.is_empty()),
            "nothing applied before the burst end"
        );
        later.run();
        let (log, batches) = tx.with_state(|t| (t.log.clone(), t.batches));
        assert_eq!(log.len(), 10);
        assert_eq!(batches - before, 1);
        tx.send(Cmd::Stop);
        owner.join().unwrap();
    }

    #[test]
    fn a_full_queue_makes_the_sender_apply_it_even_owner_only_commands() {
        // No owner thread: only back-pressure can apply owner-only commands.
        let tx = Sender::new(Toy::default(), true, 8);
        for n in 0..8 {
            tx.send(Cmd::Thread(0, n));
        }
        assert!(tx.with_state(|t| t.log.is_empty()));
        tx.send(Cmd::Thread(0, 8));
        assert_eq!(tx.with_state(|t| t.log.len()), 9);
    }

    #[test]
    fn commands_after_stop_are_dropped() {
        let (tx, owner) = start(true, 64);
        tx.send(Cmd::Log(0, 0));
        tx.send(Cmd::Stop);
        owner.join().unwrap();
        tx.send(Cmd::Log(0, 1));
        tx.send(Cmd::Thread(0, 2));
        assert_eq!(tx.with_state(|t| t.log.len()), 1);
    }

    #[test]
    fn a_deadline_set_inline_wakes_the_sleeping_owner() {
        let (tx, owner) = start(true, 64);
        // The owner sleeps with no deadline; an inline command sets one shortly ahead.
        tx.send(Cmd::Deadline(Instant::now() + Duration::from_millis(20)));
        eventually(&tx, |t| t.ticks_after_deadline == 1);
        tx.send(Cmd::Stop);
        owner.join().unwrap();
    }
}
