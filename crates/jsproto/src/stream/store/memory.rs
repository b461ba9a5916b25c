//! The memory store (`storage: "memory"`): messages kept in memory, lost on restart.
//!
//! Messages sit in a sequence-ordered map (holes where messages were removed) with a
//! per-subject index (see the shared `index` module). Bytes are charged as nats-server's
//! `memStoreMsgSize` ([`super::memory_msg_size`]). [`MsgStore::flush`] and [`MsgStore::sync`]
//! have nothing to do.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;

use super::index::{Entry, Index, PurgePlan};
use super::{
    memory_msg_size, MsgStore, PurgeRequest, StoreError, StoreLimits, StoreOutcome, StoreState,
    StoredMsg,
};

/// The longest subject the stores accept (the file store's record holds a u16 length).
const MAX_SUBJECT_LEN: usize = crate::stream::record::MAX_SUBJECT_LEN;

#[derive(Debug)]
struct MemEntry {
    subj: u32,
    ts: u64,
    size: u64,
    headers: Option<Bytes>,
    payload: Bytes,
}

impl Entry for MemEntry {
    fn subj(&self) -> u32 {
        self.subj
    }
    fn ts(&self) -> u64 {
        self.ts
    }
    fn size(&self) -> u64 {
        self.size
    }
}

/// A stream store in memory.
#[derive(Debug)]
pub struct MemoryStore {
    idx: Index<MemEntry>,
    limits: StoreLimits,
}

impl MemoryStore {
    /// An empty store with these limits.
    pub fn new(limits: StoreLimits) -> Self {
        Self {
            idx: Index::new(),
            limits,
        }
    }

    fn to_msg(&self, seq: u64, e: &MemEntry) -> StoredMsg {
        StoredMsg {
            seq,
            subject: self.idx.subject_of(e).cloned().unwrap_or_else(|| "".into()),
            headers: e.headers.clone(),
            payload: e.payload.clone(),
            ts: e.ts,
        }
    }

    fn get(&self, seq: Option<u64>) -> Option<StoredMsg> {
        let seq = seq?;
        self.idx.msgs.get(seq).map(|e| self.to_msg(seq, e))
    }

    fn remove_all(&mut self, seqs: &[u64]) -> u64 {
        seqs.iter()
            .filter(|&&s| self.idx.remove(s).is_some())
            .count() as u64
    }

    fn enforce(&mut self, subj: Option<u32>, removed: &mut Vec<u64>) {
        while let Some(seq) = self.idx.next_victim(&self.limits, subj) {
            if self.idx.remove(seq).is_none() {
                break;
            }
            removed.push(seq);
        }
    }
}

impl MsgStore for MemoryStore {
    fn store_msg(
        &mut self,
        subject: &str,
        headers: Option<&[u8]>,
        payload: &[u8],
        ts: u64,
    ) -> Result<StoreOutcome, StoreError> {
        if subject.len() > MAX_SUBJECT_LEN {
            return Err(StoreError::SubjectTooLong(subject.len()));
        }
        let headers = headers.filter(|h| !h.is_empty());
        let hdr_len = headers.map_or(0, <[u8]>::len);
        let size = memory_msg_size(subject.len(), hdr_len, payload.len());
        self.idx.check_store(
            &self.limits,
            subject,
            headers,
            hdr_len + payload.len(),
            size,
        )?;
        // One allocation for headers and payload; both are slices of it.
        let mut buf = Vec::with_capacity(hdr_len + payload.len());
        buf.extend_from_slice(headers.unwrap_or_default());
        buf.extend_from_slice(payload);
        let buf = Bytes::from(buf);
        let seq = self.idx.last_seq() + 1;
        let subj = self.idx.subjects.intern(subject);
        self.idx.insert(
            seq,
            MemEntry {
                subj,
                ts,
                size,
                headers: headers.map(|_| buf.slice(..hdr_len)),
                payload: buf.slice(hdr_len..),
            },
        );
        let mut removed = Vec::new();
        self.enforce(Some(subj), &mut removed);
        Ok(StoreOutcome { seq, ts, removed })
    }

    fn load(&self, seq: u64) -> Result<Option<StoredMsg>, StoreError> {
        Ok(self.get(Some(seq)))
    }

    fn load_next(&self, filter: &str, start_seq: u64) -> Result<Option<StoredMsg>, StoreError> {
        Ok(self.get(self.idx.next_seq(filter, start_seq)))
    }

    fn load_last(&self, filter: &str) -> Result<Option<StoredMsg>, StoreError> {
        Ok(self.get(self.idx.last_seq_matching(filter)))
    }

    fn remove(&mut self, seq: u64, _erase: bool) -> Result<bool, StoreError> {
        // Erasing: the bytes are dropped with the entry (readers holding a clone keep theirs).
        Ok(self.idx.remove(seq).is_some())
    }

    fn purge(&mut self, req: &PurgeRequest) -> Result<u64, StoreError> {
        Ok(match self.idx.purge_plan(req) {
            PurgePlan::Nothing => 0,
            PurgePlan::Below(floor) => {
                let seqs = self.idx.seqs_below(floor);
                let n = self.remove_all(&seqs);
                self.idx.apply_floor(floor);
                n
            }
            PurgePlan::Seqs(seqs) => self.remove_all(&seqs),
        })
    }

    fn expire(&mut self, now: u64) -> Result<Vec<(u64, Arc<str>)>, StoreError> {
        let mut removed = Vec::new();
        while let Some(seq) = self.idx.first_expired(&self.limits, now) {
            let subject = self.idx.subject_of_seq(seq);
            match (self.idx.remove(seq), subject) {
                (Some(_), Some(subject)) => removed.push((seq, subject)),
                _ => break,
            }
        }
        Ok(removed)
    }

    fn exempt_from_age(&mut self, seq: u64) {
        self.idx.exempt_from_age(seq);
    }

    fn next_expiry(&self) -> Option<u64> {
        self.idx.next_expiry(&self.limits)
    }

    fn update_limits(&mut self, limits: StoreLimits) -> Result<Vec<u64>, StoreError> {
        // nats-server's order: stream limits first, then per subject.
        self.limits = limits;
        let mut removed = Vec::new();
        self.enforce(None, &mut removed);
        let excess = self.idx.per_subject_excess(&self.limits);
        self.remove_all(&excess);
        removed.extend(excess);
        Ok(removed)
    }

    fn limits(&self) -> &StoreLimits {
        &self.limits
    }

    fn state(&self) -> StoreState {
        self.idx.state()
    }

    fn deleted(&self) -> Vec<u64> {
        self.idx.deleted()
    }

    fn subjects_state(&self, filter: &str) -> BTreeMap<String, u64> {
        self.idx.subjects_state(filter)
    }

    fn num_pending(&self, start_seq: u64, filter: &str) -> u64 {
        self.idx.num_pending(start_seq, filter)
    }

    fn flush(&mut self) -> Result<(), StoreError> {
        Ok(())
    }

    fn sync(&mut self) -> Result<(), StoreError> {
        Ok(())
    }

    fn delete_all(self: Box<Self>) -> Result<(), StoreError> {
        Ok(())
    }
}
