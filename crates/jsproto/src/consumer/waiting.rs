//! The queue of waiting pull requests: arrival order, round-robin rotation, and the expiry and
//! heartbeat deadlines of each request.
//!
//! Requests are addressed by a stable id; their place in line is a position key in a B-tree, so
//! moving a request to the tail or removing one from the middle (expiry, requester gone) costs
//! O(log n). Times are ticks (nanoseconds since the consumer's epoch).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use bytes::Bytes;

use super::ensure_eq;
use super::pull::{Leftover, PriorityGroup};

/// Bits of a position key below the priority rank: requests of a lower rank come first, in
/// arrival order within one rank.
const RANK_SHIFT: u32 = 56;

/// One admitted pull request.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Request {
    pub reply_to: Bytes,
    /// Messages still wanted (≥ 1 while queued).
    pub batch_left: u64,
    /// Remaining byte budget; `None` = no `max_bytes`.
    pub bytes_left: Option<u64>,
    pub no_wait: bool,
    pub expires_at: Option<u64>,
    /// Idle heartbeat interval in nanoseconds.
    pub heartbeat: Option<u64>,
    pub heartbeat_at: Option<u64>,
    /// Messages delivered to this request so far.
    pub delivered: u64,
    /// The request's priority-group fields, kept only on a consumer with a priority policy.
    pub group: Option<Box<PriorityGroup>>,
    /// Place class in line (policy `prioritized`: the request's priority, 10 without one;
    /// otherwise 0): lower ranks are served first.
    pub rank: u8,
    pos: u64,
}

impl Request {
    pub fn new(
        reply_to: Bytes,
        batch: u64,
        max_bytes: Option<u64>,
        no_wait: bool,
        expires_at: Option<u64>,
        heartbeat: Option<(u64, u64)>,
    ) -> Self {
        Self {
            reply_to,
            batch_left: batch.max(1),
            bytes_left: max_bytes,
            no_wait,
            expires_at,
            heartbeat: heartbeat.map(|(every, _)| every),
            heartbeat_at: heartbeat.map(|(_, at)| at),
            delivered: 0,
            group: None,
            rank: 0,
            pos: 0,
        }
    }

    /// What the request had left, for the pending headers.
    pub fn leftover(&self) -> Leftover {
        Leftover {
            messages: self.batch_left,
            bytes: self.bytes_left.unwrap_or(0),
        }
    }
}

/// foldhash, randomly seeded: a request is inserted and removed per pull (SipHash showed in the
/// batch-1 drain profile).
type FastHash = foldhash::fast::RandomState;

/// The waiting queue.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Waiting {
    requests: HashMap<u64, Request, FastHash>,
    /// Position → id; the first entry is the head of the line.
    order: BTreeMap<u64, u64>,
    expiries: BTreeSet<(u64, u64)>,
    heartbeats: BTreeSet<(u64, u64)>,
    #[serde(with = "super::pairs")]
    by_reply: HashMap<Bytes, Vec<u64>, FastHash>,
    no_wait: BTreeSet<u64>,
    /// Sum of `batch_left` over all requests (nats-server's "batch pending").
    total_batch: u64,
    next_id: u64,
    next_pos: u64,
}

impl Waiting {
    pub fn len(&self) -> usize {
        self.requests.len()
    }

    pub fn total_batch(&self) -> u64 {
        self.total_batch
    }

    pub fn get(&self, id: u64) -> Option<&Request> {
        self.requests.get(&id)
    }

    /// The id at the head of the line.
    pub fn head(&self) -> Option<u64> {
        self.order.first_key_value().map(|(_, &id)| id)
    }

    /// Ids in line order.
    pub fn ids(&self) -> Vec<u64> {
        self.order.values().copied().collect()
    }

    /// Ids in line order, without collecting them.
    pub fn in_line(&self) -> impl Iterator<Item = u64> + '_ {
        self.order.values().copied()
    }

    pub fn get_mut(&mut self, id: u64) -> Option<&mut Request> {
        self.requests.get_mut(&id)
    }

    fn next_pos(&mut self, rank: u8) -> u64 {
        let pos = (u64::from(rank) << RANK_SHIFT) | self.next_pos;
        self.next_pos += 1;
        pos
    }

    /// Ids of `no_wait` requests, oldest first.
    pub fn no_wait_ids(&self) -> Vec<u64> {
        self.no_wait.iter().copied().collect()
    }

    pub fn has_no_wait(&self) -> bool {
        !self.no_wait.is_empty()
    }

    /// Earliest expiry or heartbeat.
    pub fn next_deadline(&self) -> Option<u64> {
        let e = self.expiries.first().map(|&(at, _)| at);
        let h = self.heartbeats.first().map(|&(at, _)| at);
        e.into_iter().chain(h).min()
    }

    /// Appends a request at the tail (of its rank).
    pub fn push(&mut self, mut req: Request) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        req.pos = self.next_pos(req.rank);
        self.order.insert(req.pos, id);
        if let Some(at) = req.expires_at {
            self.expiries.insert((at, id));
        }
        if let Some(at) = req.heartbeat_at {
            self.heartbeats.insert((at, id));
        }
        if req.no_wait {
            self.no_wait.insert(id);
        }
        self.by_reply
            .entry(req.reply_to.clone())
            .or_default()
            .push(id);
        self.total_batch += req.batch_left;
        self.requests.insert(id, req);
        id
    }

    /// Removes a request wherever it is in line.
    pub fn remove(&mut self, id: u64) -> Option<Request> {
        let req = self.requests.remove(&id)?;
        self.order.remove(&req.pos);
        if let Some(at) = req.expires_at {
            self.expiries.remove(&(at, id));
        }
        if let Some(at) = req.heartbeat_at {
            self.heartbeats.remove(&(at, id));
        }
        self.no_wait.remove(&id);
        if let Some(ids) = self.by_reply.get_mut(&req.reply_to) {
            ids.retain(|&x| x != id);
            if ids.is_empty() {
                self.by_reply.remove(&req.reply_to);
            }
        }
        self.total_batch -= req.batch_left;
        Some(req)
    }

    /// The distinct reply subjects of the waiting requests.
    pub fn replies(&self) -> impl Iterator<Item = &[u8]> {
        self.by_reply.keys().map(|k| &k[..])
    }

    /// Removes every request answering to `reply_to`; returns how many.
    pub fn remove_reply(&mut self, reply_to: &[u8]) -> usize {
        let ids = self.by_reply.get(reply_to).cloned().unwrap_or_default();
        for &id in &ids {
            self.remove(id);
        }
        ids.len()
    }

    /// Books one delivery of `cost` bytes to request `id` at `now`: one fewer message wanted,
    /// a smaller budget, the idle-heartbeat clock restarted. Returns the updated request.
    pub fn record_delivery(&mut self, id: u64, cost: u64, now: u64) -> Option<&Request> {
        let req = self.requests.get_mut(&id)?;
        req.batch_left -= 1;
        self.total_batch -= 1;
        req.delivered += 1;
        if let Some(b) = req.bytes_left.as_mut() {
            *b = b.saturating_sub(cost);
        }
        if let (Some(every), Some(old)) = (req.heartbeat, req.heartbeat_at) {
            self.heartbeats.remove(&(old, id));
            let at = now.saturating_add(every);
            req.heartbeat_at = Some(at);
            self.heartbeats.insert((at, id));
        }
        Some(req)
    }

    /// Moves request `id` to the tail of the line, behind the others of its rank
    /// (round-robin).
    pub fn rotate(&mut self, id: u64) {
        let Some(rank) = self.requests.get(&id).map(|r| r.rank) else {
            return;
        };
        let pos = self.next_pos(rank);
        let req = self.requests.get_mut(&id).expect("looked up above");
        self.order.remove(&req.pos);
        req.pos = pos;
        self.order.insert(pos, id);
    }

    /// Removes and returns every request whose expiry is at or before `now`, earliest first.
    pub fn take_expired(&mut self, now: u64) -> Vec<Request> {
        let mut out = Vec::new();
        while let Some(&(at, id)) = self.expiries.first() {
            if at > now {
                break;
            }
            if let Some(req) = self.remove(id) {
                out.push(req);
            } else {
                self.expiries.pop_first();
            }
        }
        out
    }

    /// Ids whose heartbeat is due at or before `now`, each rescheduled to `now + interval`.
    pub fn take_heartbeats(&mut self, now: u64) -> Vec<u64> {
        let mut out = Vec::new();
        while let Some(&(at, id)) = self.heartbeats.first() {
            if at > now {
                break;
            }
            self.heartbeats.pop_first();
            if let Some(req) = self.requests.get_mut(&id) {
                let next = now.saturating_add(req.heartbeat.unwrap_or(u64::MAX));
                req.heartbeat_at = Some(next);
                self.heartbeats.insert((next, id));
                out.push(id);
            }
        }
        out
    }

    /// Checks that the indexes and counters agree with a recount (O(n); for tests).
    pub fn check(&self) -> Result<(), String> {
        ensure_eq(self.order.len(), self.requests.len(), "waiting.rs")?;
        ensure_eq(
            self.total_batch,
            self.requests.values().map(|r| r.batch_left).sum::<u64>(),
            "waiting.rs",
        )?;
        ensure_eq(
            self.expiries.len(),
            self.requests
                .values()
                .filter(|r| r.expires_at.is_some())
                .count(),
            "waiting.rs",
        )?;
        ensure_eq(
            self.heartbeats.len(),
            self.requests
                .values()
                .filter(|r| r.heartbeat_at.is_some())
                .count(),
            "waiting.rs",
        )?;
        ensure_eq(
            self.by_reply.values().map(Vec::len).sum::<usize>(),
            self.requests.len(),
            "waiting.rs",
        )?;
        Ok(())
    }
}
