//! A connection's outbound buffer: many producers append encoded ops, one writer task drains.
//!
//! Any task that routes a message to this connection encodes it straight into the shared
//! buffer (one copy of the payload, no allocation once the buffer has grown). The writer needs
//! waking only when the buffer goes from empty to non-empty, and routing defers even that to the
//! end of the publisher's read burst ([`Outbound::push_deferred`]). The writer swaps the
//! whole buffer out and writes it with one syscall, so a burst of messages costs one write.
//!
//! The buffer is bounded by `max_pending` bytes (nats-server's `max_pending`, 64 MiB by
//! default): a producer that would push it past the bound marks the connection a slow consumer
//! and it is closed without an `-ERR`, as nats-server does.

use std::sync::Mutex;

use bytes::BytesMut;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// A buffer that grew past this during a burst is given back to the allocator once it is
/// drained, so an idle connection does not keep its peak memory.
pub const SHRINK_ABOVE: usize = 256 * 1024;

/// Why a connection is being closed; decides whether the writer flushes first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseReason {
    /// The client went away or the server is shutting down: flush what is queued, then close.
    Normal,
    /// A protocol error: the `-ERR` already queued is flushed, then the socket closes.
    ProtocolError,
    /// The buffer overflowed `max_pending` or a write passed `write_deadline`: close at once.
    SlowConsumer,
}

#[derive(Debug)]
struct State {
    buf: BytesMut,
    closed: Option<CloseReason>,
}

/// The bounded, shared outbound buffer of one connection.
#[derive(Debug)]
pub struct Outbound {
    state: Mutex<State>,
    wake: Notify,
    max_pending: usize,
    /// Cancelled when the connection must stop at once (slow consumer): interrupts a write
    /// that is blocked on a full socket.
    kill: CancellationToken,
}

/// The outcome of [`Outbound::push_deferred`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pushed {
    /// Queued behind bytes the writer already knows about.
    Queued,
    /// Queued into an empty buffer: the writer must be woken ([`Outbound::wake`]).
    QueuedWake,
    /// Not queued: the connection is closed (or just became a slow consumer).
    Refused,
}

/// What the writer task should do next, from [`Outbound::take`].
#[derive(Debug)]
pub enum Take {
    /// `spare` now holds the queued bytes: write them, then call `take` again.
    Write,
    /// Nothing queued: wait on [`Outbound::wait`], then call `take` again.
    Idle,
    /// The connection is closed: stop writing and shut the socket.
    Closed(CloseReason),
}

impl Outbound {
    /// Creates an empty buffer bounded by `max_pending` bytes.
    pub fn new(max_pending: usize) -> Self {
        Outbound {
            state: Mutex::new(State {
                buf: BytesMut::new(),
                closed: None,
            }),
            wake: Notify::new(),
            max_pending,
            kill: CancellationToken::new(),
        }
    }

    /// Appends whatever `encode` writes and wakes the writer if needed.
    ///
    /// Returns `false` when nothing was queued: the connection is closed, or this append made
    /// it a slow consumer (the buffer passed `max_pending`; it is then closed and cleared).
    pub fn push(&self, encode: impl FnOnce(&mut BytesMut)) -> bool {
        match self.push_deferred(encode) {
            Pushed::Queued => true,
            Pushed::QueuedWake => {
                self.wake();
                true
            }
            Pushed::Refused => false,
        }
    }

    /// Appends whatever `encode` writes but leaves waking the writer to the caller
    /// ([`Pushed::QueuedWake`] says it must call [`Outbound::wake`]). Routing uses it to wake
    /// each receiving connection once per burst of messages instead of once per message, as
    /// nats-server flushes its pending clients after each read of the producer.
    pub fn push_deferred(&self, encode: impl FnOnce(&mut BytesMut)) -> Pushed {
        let mut st = self.state.lock().expect("outbound lock poisoned");
        if st.closed.is_some() {
            return Pushed::Refused;
        }
        let was_empty = st.buf.is_empty();
        encode(&mut st.buf);
        if st.buf.len() > self.max_pending {
            st.closed = Some(CloseReason::SlowConsumer);
            st.buf = BytesMut::new();
            drop(st);
            self.kill.cancel();
            self.wake.notify_one();
            return Pushed::Refused;
        }
        if was_empty {
            Pushed::QueuedWake
        } else {
            Pushed::Queued
        }
    }

    /// Wakes the writer (after [`Outbound::push_deferred`] said so).
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    /// Marks the connection closed; with [`CloseReason::SlowConsumer`] queued bytes are dropped,
    /// otherwise the writer flushes them first. The first reason given wins.
    pub fn close(&self, reason: CloseReason) {
        let mut st = self.state.lock().expect("outbound lock poisoned");
        if st.closed.is_none() {
            st.closed = Some(reason);
            if reason == CloseReason::SlowConsumer {
                st.buf = BytesMut::new();
                self.kill.cancel();
            }
        }
        drop(st);
        self.wake.notify_one();
    }

    /// Whether the connection has been closed (for any reason).
    pub fn is_closed(&self) -> bool {
        self.state
            .lock()
            .expect("outbound lock poisoned")
            .closed
            .is_some()
    }

    /// The reason given to the first close, if closed.
    pub fn close_reason(&self) -> Option<CloseReason> {
        self.state.lock().expect("outbound lock poisoned").closed
    }

    /// Bytes queued and not yet taken by the writer.
    pub fn pending_bytes(&self) -> usize {
        self.state.lock().expect("outbound lock poisoned").buf.len()
    }

    /// Moves everything queued into `spare`, leaving `spare`'s old allocation (cleared) as the
    /// new buffer, so two buffers alternate and neither is reallocated in steady state.
    pub fn take(&self, spare: &mut BytesMut) -> Take {
        let mut st = self.state.lock().expect("outbound lock poisoned");
        if !st.buf.is_empty() {
            spare.clear();
            if spare.capacity() > SHRINK_ABOVE {
                *spare = BytesMut::new();
            }
            std::mem::swap(&mut st.buf, spare);
            return Take::Write;
        }
        match st.closed {
            Some(reason) => Take::Closed(reason),
            None => Take::Idle,
        }
    }

    /// Completes when the connection must stop at once (it became a slow consumer).
    pub async fn killed(&self) {
        self.kill.cancelled().await;
    }

    /// Waits until something is pushed or the connection is closed.
    pub async fn wait(&self) {
        self.wake.notified().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_then_take_returns_everything_in_order() {
        let out = Outbound::new(1024);
        assert!(out.push(|b| b.extend_from_slice(b"PING\r\n")));
        assert!(out.push(|b| b.extend_from_slice(b"PONG\r\n")));
        let mut spare = BytesMut::new();
        assert!(matches!(out.take(&mut spare), Take::Write));
        assert_eq!(&spare[..], b"PING\r\nPONG\r\n");
        assert!(matches!(out.take(&mut spare), Take::Idle));
    }

    #[test]
    fn overflow_marks_slow_consumer_and_drops_the_buffer() {
        let out = Outbound::new(10);
        assert!(out.push(|b| b.extend_from_slice(b"12345")));
        assert!(!out.push(|b| b.extend_from_slice(b"678901")));
        assert_eq!(out.close_reason(), Some(CloseReason::SlowConsumer));
        assert_eq!(out.pending_bytes(), 0);
        assert!(!out.push(|b| b.extend_from_slice(b"x")));
        assert!(matches!(
            out.take(&mut BytesMut::new()),
            Take::Closed(CloseReason::SlowConsumer)
        ));
    }

    #[test]
    fn buffers_grown_by_a_burst_are_released_once_drained() {
        let out = Outbound::new(4 * SHRINK_ABOVE);
        let mut spare = BytesMut::new();
        assert!(out.push(|b| b.extend_from_slice(&vec![0; 2 * SHRINK_ABOVE])));
        assert!(matches!(out.take(&mut spare), Take::Write));
        assert!(out.push(|b| b.extend_from_slice(&vec![0; 2 * SHRINK_ABOVE])));
        // The writer hands back the big drained buffer; it is replaced by an empty one.
        assert!(matches!(out.take(&mut spare), Take::Write));
        assert!(out.push(|b| b.extend_from_slice(b"x")));
        assert!(out.state.lock().unwrap().buf.capacity() < SHRINK_ABOVE);
    }

    #[test]
    fn normal_close_flushes_what_is_queued_first() {
        let out = Outbound::new(1024);
        assert!(out.push(|b| b.extend_from_slice(b"-ERR 'x'\r\n")));
        out.close(CloseReason::ProtocolError);
        let mut spare = BytesMut::new();
        assert!(matches!(out.take(&mut spare), Take::Write));
        assert!(matches!(
            out.take(&mut spare),
            Take::Closed(CloseReason::ProtocolError)
        ));
    }
}
