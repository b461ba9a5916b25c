//! A connection's outbound buffer: many producers append encoded ops, one writer task drains.
//!
//! Any task that routes a message to this connection encodes it straight into the shared
//! buffer (one copy of the payload, no allocation once the buffer has grown). Routing defers
//! the hand-off to the end of the publisher's read burst ([`Outbound::push_deferred`], then
//! [`Outbound::flush`]). At that point, when the writer task is idle, the producer writes the
//! buffer to the socket itself with one non-blocking write, as nats-server's read loop flushes
//! the clients it delivered to: no task wake-up and no thread hop on the common path. Only
//! what the socket does not take at once is left to the writer task, which waits for the socket
//! to drain (and enforces `write_deadline`). The writer swaps the whole buffer out and writes
//! it with one syscall, so a burst of messages costs one write either way.
//!
//! The buffer is bounded by `max_pending` bytes (nats-server's `max_pending`, 64 MiB by
//! default): a producer that would push it past the bound marks the connection a slow consumer
//! and it is closed without an `-ERR`, as nats-server does. Before that, a connection with more
//! than three quarters of `max_pending` unwritten is *stalled*: producers that are client
//! connections pause before reading more from their own client
//! ([`Outbound::wait_drained`]), as nats-server stalls fast producers, so a publisher faster
//! than its subscriber is slowed down instead of getting the subscriber cut off.

use std::io::ErrorKind;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Buf, BytesMut};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::transport::WriteHalf;

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
    /// The writer task holds bytes taken from `buf` that are not fully written yet: nobody
    /// else may write to the socket until it comes back for more (byte order).
    writing: bool,
    /// The socket, for producers' direct writes ([`Outbound::flush`]); set by
    /// [`Outbound::attach`], taken back by [`Outbound::detach`].
    sock: Option<Arc<WriteHalf>>,
    /// Bytes the writer task took and has not finished writing yet.
    in_flight: usize,
    /// Unwritten bytes (queued and in flight) passed the stall mark; cleared, and
    /// [`Outbound::wait_drained`] woken, when they fall to half of `max_pending`.
    stalled: bool,
}

/// The bounded, shared outbound buffer of one connection.
#[derive(Debug)]
pub struct Outbound {
    state: Mutex<State>,
    wake: Notify,
    /// Wakes producers stalled on this connection ([`Outbound::wait_drained`]).
    drained: Notify,
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
    /// Queued behind bytes the writer already knows about, and the connection is stalled:
    /// a producer that is a client connection should [`Outbound::wait_drained`] before it
    /// reads more from its client.
    QueuedStall,
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
                writing: false,
                sock: None,
                in_flight: 0,
                stalled: false,
            }),
            wake: Notify::new(),
            drained: Notify::new(),
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
            Pushed::Queued | Pushed::QueuedStall => true,
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
            self.release_stall(&mut st);
            drop(st);
            self.kill.cancel();
            self.wake.notify_one();
            return Pushed::Refused;
        }
        if was_empty {
            Pushed::QueuedWake
        } else if st.buf.len() + st.in_flight > self.stall_mark() {
            st.stalled = true;
            Pushed::QueuedStall
        } else {
            Pushed::Queued
        }
    }

    /// Unwritten bytes above which the connection is stalled: three quarters of `max_pending`,
    /// as in nats-server.
    fn stall_mark(&self) -> usize {
        self.max_pending / 4 * 3
    }

    /// Ends a stall once unwritten bytes are down to half of `max_pending` (or the connection
    /// closed).
    fn release_stall(&self, st: &mut State) {
        if st.stalled
            && (st.closed.is_some() || st.buf.len() + st.in_flight <= self.max_pending / 2)
        {
            st.stalled = false;
            self.drained.notify_waiters();
        }
    }

    /// Waits, at most `limit`, until this connection is no longer stalled (its unwritten bytes
    /// fell to half of `max_pending`, or it closed). A producer that got
    /// [`Pushed::QueuedStall`] calls it before reading more from its own client, as
    /// nats-server's fast-producer stall: the producer slows down to what the receiver takes.
    pub async fn wait_drained(&self, limit: Duration) {
        let notified = self.drained.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if !self.state.lock().expect("outbound lock poisoned").stalled {
            return;
        }
        let _ = tokio::time::timeout(limit, notified).await;
    }

    /// Wakes the writer (after [`Outbound::push_deferred`] said so).
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    /// Lets producers write to `sock` directly ([`Outbound::flush`]). The writer task keeps
    /// its own clone for what they cannot write at once.
    pub fn attach(&self, sock: Arc<WriteHalf>) {
        self.state.lock().expect("outbound lock poisoned").sock = Some(sock);
    }

    /// Stops direct writes (the writer is about to shut the socket).
    pub fn detach(&self) {
        self.state.lock().expect("outbound lock poisoned").sock = None;
    }

    /// Hands what was queued by [`Outbound::push_deferred`] (which said
    /// [`Pushed::QueuedWake`]) to the socket: when the writer task is idle, writes it here
    /// with one non-blocking write; whatever the socket does not take at once (it is full,
    /// or the write failed) is left to the writer task, which is woken for it.
    ///
    /// Returns whether the writer task had to be woken.
    pub fn flush(&self) -> bool {
        let mut st = self.state.lock().expect("outbound lock poisoned");
        if st.buf.is_empty() {
            return false;
        }
        if !st.writing && st.closed.is_none() {
            if let Some(sock) = &st.sock {
                match sock.try_write(&st.buf) {
                    Ok(n) if n == st.buf.len() => {
                        st.buf.clear();
                        if st.buf.capacity() > SHRINK_ABOVE {
                            st.buf = BytesMut::new();
                        }
                        self.release_stall(&mut st);
                        return false;
                    }
                    Ok(n) => {
                        st.buf.advance(n);
                        self.release_stall(&mut st);
                    }
                    // Full socket: the writer waits for room. A failed write is the writer's
                    // to see (and to close the connection on).
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                    Err(_) => {}
                }
            }
        }
        drop(st);
        self.wake.notify_one();
        true
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
            self.release_stall(&mut st);
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
    ///
    /// Until the next call, the writer owns the socket: producers queue behind it instead of
    /// writing directly.
    pub fn take(&self, spare: &mut BytesMut) -> Take {
        let mut st = self.state.lock().expect("outbound lock poisoned");
        if !st.buf.is_empty() {
            spare.clear();
            if spare.capacity() > SHRINK_ABOVE {
                *spare = BytesMut::new();
            }
            std::mem::swap(&mut st.buf, spare);
            st.writing = true;
            st.in_flight = spare.len();
            self.release_stall(&mut st);
            return Take::Write;
        }
        st.writing = false;
        st.in_flight = 0;
        self.release_stall(&mut st);
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

    #[tokio::test(start_paused = true)]
    async fn past_three_quarters_unwritten_stalls_producers_until_half_is_written() {
        let out = Outbound::new(100);
        let mut spare = BytesMut::new();
        assert_eq!(
            out.push_deferred(|b| b.extend_from_slice(&[0; 40])),
            Pushed::QueuedWake
        );
        assert_eq!(
            out.push_deferred(|b| b.extend_from_slice(&[0; 30])),
            Pushed::Queued
        );
        // Not stalled: no wait at all.
        let t0 = tokio::time::Instant::now();
        out.wait_drained(Duration::from_secs(5)).await;
        assert_eq!(t0.elapsed(), Duration::ZERO);
        // The writer takes 70 bytes; 10 more queued make 80 unwritten, past 75.
        assert!(matches!(out.take(&mut spare), Take::Write));
        assert_eq!(
            out.push_deferred(|b| b.extend_from_slice(&[0; 5])),
            Pushed::QueuedWake
        );
        assert_eq!(
            out.push_deferred(|b| b.extend_from_slice(&[0; 5])),
            Pushed::QueuedStall
        );
        // Stalled and nothing written: the wait ends at its limit.
        out.wait_drained(Duration::from_millis(10)).await;
        assert_eq!(t0.elapsed(), Duration::from_millis(10));
        // The writer finishes its 70 and takes the 10 queued: 10 unwritten, the stall ends
        // and wakes the waiting producer before its limit.
        let out = Arc::new(out);
        let waiter = tokio::spawn({
            let out = Arc::clone(&out);
            async move { out.wait_drained(Duration::from_secs(5)).await }
        });
        tokio::task::yield_now().await;
        assert!(matches!(out.take(&mut spare), Take::Write));
        waiter.await.unwrap();
        assert_eq!(t0.elapsed(), Duration::from_millis(10));
        assert_eq!(
            out.push_deferred(|b| b.extend_from_slice(&[0; 5])),
            Pushed::QueuedWake
        );
        assert_eq!(
            out.push_deferred(|b| b.extend_from_slice(&[0; 5])),
            Pushed::Queued
        );
    }

    /// A loopback pair: the server side's write half attached to `out`, and the peer.
    async fn attached(out: &Outbound) -> tokio::net::TcpStream {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let peer = tokio::net::TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (sock, _) = listener.accept().await.unwrap();
        let (_read, write) = super::super::transport::split_tcp(sock);
        out.attach(Arc::new(write));
        peer
    }

    async fn read_exactly(peer: &mut tokio::net::TcpStream, n: usize) -> Vec<u8> {
        use tokio::io::AsyncReadExt;
        let mut got = vec![0; n];
        peer.read_exact(&mut got).await.unwrap();
        got
    }

    #[tokio::test]
    async fn flush_writes_directly_when_the_writer_is_idle() {
        let out = Outbound::new(1024);
        let mut peer = attached(&out).await;
        assert_eq!(
            out.push_deferred(|b| b.extend_from_slice(b"MSG a 1 2\r\nhi\r\n")),
            Pushed::QueuedWake
        );
        assert!(!out.flush(), "an idle writer needs no wake-up");
        assert_eq!(out.pending_bytes(), 0);
        assert_eq!(read_exactly(&mut peer, 15).await, b"MSG a 1 2\r\nhi\r\n");
    }

    #[tokio::test]
    async fn flush_queues_behind_a_writer_that_holds_bytes() {
        let out = Outbound::new(1024);
        let mut peer = attached(&out).await;
        assert!(out.push(|b| b.extend_from_slice(b"first\r\n")));
        let mut spare = BytesMut::new();
        // The writer took "first" and has not written it yet: a direct write now would put
        // "second" on the wire before it.
        assert!(matches!(out.take(&mut spare), Take::Write));
        out.push_deferred(|b| b.extend_from_slice(b"second\r\n"));
        assert!(out.flush(), "the busy writer is woken instead");
        assert_eq!(out.pending_bytes(), 8);
        // The writer writes its bytes, comes back, takes the rest.
        let sock = out.state.lock().unwrap().sock.clone().unwrap();
        sock.try_write(&spare).unwrap();
        assert!(matches!(out.take(&mut spare), Take::Write));
        sock.try_write(&spare).unwrap();
        assert!(matches!(out.take(&mut spare), Take::Idle));
        assert_eq!(read_exactly(&mut peer, 15).await, b"first\r\nsecond\r\n");
        // Idle again: direct writes resume.
        out.push_deferred(|b| b.extend_from_slice(b"third\r\n"));
        assert!(!out.flush());
        assert_eq!(read_exactly(&mut peer, 7).await, b"third\r\n");
    }

    #[tokio::test]
    async fn flush_leaves_what_a_full_socket_refuses_to_the_writer() {
        let out = Outbound::new(64 * 1024 * 1024);
        let _peer = attached(&out).await; // never reads
        let chunk = vec![b'x'; 1024 * 1024];
        let mut woken = false;
        for _ in 0..32 {
            out.push_deferred(|b| b.extend_from_slice(&chunk));
            woken |= out.flush();
        }
        assert!(woken, "a socket nobody reads fills up");
        assert!(
            out.pending_bytes() > 0,
            "what it refused stays queued, in order"
        );
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
