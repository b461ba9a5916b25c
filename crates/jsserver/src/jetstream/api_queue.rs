//! The bound on `$JS.API` requests waiting for an account's API thread.
//!
//! Requests reach the API thread over a channel (`ApiIngress`); the thread answers them
//! one at a time, and some (a stream create that makes files, a purge) take a while. Without a
//! bound, a client that sends requests faster than they are answered grows the server's memory
//! without end. nats-server bounds its API queue at 10,000 requests (`JSDefaultRequestQueueLimit`)
//! and, when it is reached, drops what is queued with the warning `JetStream API queue limit
//! reached, dropping N requests`. Here the bound is the same count and, stricter, 64 MiB of
//! request bytes (10,000 requests of the default 1 MiB `max_payload` would be 10 GB); a request
//! past either is dropped on arrival (its requester gets no answer and times out, as a dropped
//! one on nats-server), and the requests already queued are still answered. The warning is
//! nats-server's, at most once a second, counting the requests dropped since the last one.
//!
//! Only client requests count: the meta group's and the streams' own messages to the API
//! thread are never dropped.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tracing::warn;

/// Requests waiting at most, as nats-server's `JSDefaultRequestQueueLimit`.
pub const MAX_REQUESTS: usize = 10_000;

/// Bytes of waiting requests (subject, headers and body) at most.
pub const MAX_BYTES: usize = 64 << 20;

/// How often the warning about dropped requests is logged at most.
const WARN_EVERY: Duration = Duration::from_secs(1);

/// What one account's API thread has waiting: admitted by the ingress, released by the thread
/// as it takes each request.
#[derive(Debug)]
pub struct ApiQueueBound {
    max_requests: usize,
    max_bytes: usize,
    requests: AtomicUsize,
    bytes: AtomicUsize,
    /// Dropped since the last warning.
    dropped: AtomicU64,
    /// When the last warning was logged.
    last_warning: Mutex<Option<Instant>>,
}

impl Default for ApiQueueBound {
    fn default() -> Self {
        ApiQueueBound::new(MAX_REQUESTS, MAX_BYTES)
    }
}

impl ApiQueueBound {
    /// A bound of `max_requests` requests and `max_bytes` bytes.
    pub fn new(max_requests: usize, max_bytes: usize) -> Self {
        ApiQueueBound {
            max_requests,
            max_bytes,
            requests: AtomicUsize::new(0),
            bytes: AtomicUsize::new(0),
            dropped: AtomicU64::new(0),
            last_warning: Mutex::new(None),
        }
    }

    /// Takes a place for a request of `len` bytes; false (and the request is to be dropped)
    /// when the queue is full. `now` dates the warning.
    pub fn admit(&self, len: usize, now: Instant) -> bool {
        let requests = self.requests.fetch_add(1, Ordering::AcqRel) + 1;
        let bytes = self.bytes.fetch_add(len, Ordering::AcqRel) + len;
        if requests <= self.max_requests && bytes <= self.max_bytes {
            return true;
        }
        self.release(len);
        let dropped = self.dropped.fetch_add(1, Ordering::AcqRel) + 1;
        let mut last = self
            .last_warning
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if last.is_none_or(|at| now.duration_since(at) >= WARN_EVERY) {
            *last = Some(now);
            self.dropped.fetch_sub(dropped, Ordering::AcqRel);
            warn!("JetStream API queue limit reached, dropping {dropped} requests");
        }
        false
    }

    /// Gives back the place of a request of `len` bytes the API thread took.
    pub fn release(&self, len: usize) {
        self.requests.fetch_sub(1, Ordering::AcqRel);
        self.bytes.fetch_sub(len, Ordering::AcqRel);
    }

    /// Requests waiting now.
    pub fn waiting(&self) -> usize {
        self.requests.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_queue_drops_new_requests_until_one_is_taken() {
        let q = ApiQueueBound::new(3, 1 << 20);
        let now = Instant::now();
        assert!((0..3).all(|_| q.admit(10, now)));
        assert!(!q.admit(10, now), "a fourth request does not fit");
        assert_eq!(q.waiting(), 3, "a dropped request takes no place");
        q.release(10);
        assert!(q.admit(10, now), "a place freed is taken again");
        assert!(!q.admit(10, now));
    }

    #[test]
    fn bytes_bound_the_queue_too() {
        let q = ApiQueueBound::new(100, 1000);
        let now = Instant::now();
        assert!(q.admit(600, now));
        assert!(!q.admit(600, now), "1200 bytes are over the bound");
        assert!(q.admit(400, now), "1000 bytes fit exactly");
        q.release(600);
        q.release(400);
        assert_eq!(q.waiting(), 0);
        assert!(q.admit(1000, now));
    }

    #[test]
    fn the_default_is_nats_servers_count() {
        let q = ApiQueueBound::default();
        let now = Instant::now();
        assert!((0..MAX_REQUESTS).all(|_| q.admit(0, now)));
        assert!(!q.admit(0, now));
    }
}
