//! One server's member of a Raft group: raft-rs's `RawNode` over the group's [`RaftLog`],
//! driven by the thread that owns the group's state (the meta thread, or a stream's owner
//! thread), with the group's messages carried by the routes (`RAFT` ops,
//! [`Cluster::send_raft`]).
//!
//! The owner calls, from its one thread and never concurrently:
//!
//! - [`RaftGroup::tick`] every [`TICK`] (elections and heartbeats count in ticks);
//! - [`RaftGroup::step`] with each message a peer sent (what its [`RaftInbox`] queued);
//! - [`RaftGroup::propose`] with a command for the group's state (only a leader can);
//! - then [`RaftGroup::on_ready`], which persists what Raft asks to persist (one write and one
//!   `fdatasync` of the log), sends the messages (after the persist, as Raft requires), and
//!   hands every committed entry to the owner's state in log order, exactly once per start of
//!   the group (a restarted member applies its log again from the snapshot on, so the
//!   owner's state must be rebuilt from it, or skip what it already holds).
//!
//! Members are servers: a member's Raft id is [`node_id`] of its `server_name`, so every
//! server computes the same id for a peer without asking it.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use protobuf::Message as _;
use raft::prelude::{ConfChangeV2, ConfState, Entry, EntryType, Message};
use raft::{Config, RawNode, SnapshotStatus, StateRole};
use tracing::{debug, warn};

use super::raftlog::{LogError, RaftLog, SnapshotReader};
use super::{Cluster, RaftInbox, Sent};

/// How often the owner calls [`RaftGroup::tick`].
pub const TICK: Duration = Duration::from_millis(50);
/// Ticks without a leader's word before a follower stands for election (raft-rs randomises
/// the timeout in `[ELECTION_TICKS, 2 * ELECTION_TICKS)`): 0.5 s to 1 s.
pub const ELECTION_TICKS: usize = 10;
/// Ticks between a leader's heartbeats: 100 ms.
pub const HEARTBEAT_TICKS: usize = 2;

/// The Raft id of the server named `name`: 64-bit FNV-1a of the name, never 0 (raft-rs's
/// "no node"). The same on every server.
pub fn node_id(name: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.as_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    if h == 0 {
        1
    } else {
        h
    }
}

/// A committed entry, as [`RaftGroup::on_ready`] hands it to the owner.
#[derive(Debug)]
pub enum Committed<'a> {
    /// An entry the owner proposed ([`RaftGroup::propose`]), at its log index.
    Command {
        /// Its index in the group's log.
        index: u64,
        /// The bytes proposed.
        data: &'a [u8],
    },
    /// The group's state as of `index`, from a leader's snapshot: the owner replaces its
    /// state with it (the entries up to `index` are not handed over), reading it with
    /// [`RaftGroup::local_snapshot`] (it is this member's snapshot now).
    Snapshot {
        /// The last index the snapshot covers.
        index: u64,
    },
}

/// Why a proposal was not appended.
#[derive(Debug, thiserror::Error)]
pub enum ProposeError {
    /// This member is not the leader (the leader's name, if known).
    #[error("not the leader (leader: {0:?})")]
    NotLeader(Option<String>),
    /// raft-rs refused it (e.g. a leadership transfer in progress).
    #[error("proposal dropped: {0}")]
    Dropped(String),
}

/// A replica's progress, as the leader sees it (for `cluster.replicas` in stream info).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaProgress {
    /// The member's server name.
    pub name: String,
    /// The highest log index the leader knows it holds.
    pub matched: u64,
    /// Whether the leader heard from it recently (raft-rs's `recent_active`).
    pub active: bool,
    /// How long since this member last heard from it (`None`: never since it opened).
    pub last_heard: Option<Duration>,
}

/// One server's member of one Raft group.
pub struct RaftGroup {
    group: String,
    raw: RawNode<RaftLog>,
    cluster: Arc<Cluster>,
    /// Server names by Raft id, for every server met (members and peers).
    names: BTreeMap<u64, String>,
    /// Set when the log failed to write: the member stops taking part (a failed fsync
    /// leaves the page cache untrustworthy; the group must be reopened).
    failed: bool,
    /// Members a snapshot was sent to in the last `Ready`: reported to raft-rs as sent
    /// once the `Ready` is done (the routes deliver it or the peer asks again).
    snapshots_sent: Vec<u64>,
    /// Snapshots that could not be sent in this `Ready` (no route, or one being sent in
    /// parts already): reported failed after it, so raft-rs sends one again later.
    snapshots_failed: Vec<u64>,
    /// Membership changes applied since open ([`RaftGroup::conf_changes`]).
    conf_changes: u64,
    /// When each member was last heard from (any Raft message), by Raft id.
    heard: std::collections::HashMap<u64, std::time::Instant>,
    /// When this member last became the leader.
    leader_since: Option<std::time::SystemTime>,
}

impl std::fmt::Debug for RaftGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RaftGroup")
            .field("group", &self.group)
            .field("id", &self.raw.raft.id)
            .field("role", &self.raw.raft.state)
            .finish_non_exhaustive()
    }
}

impl RaftGroup {
    /// Opens this server's member of `group` with its log in `dir`. A new log (no
    /// membership yet) starts with `voters` (server names, this one included) as the
    /// group's members; an existing log keeps its own.
    ///
    /// # Errors
    /// The log's ([`RaftLog::open`]) or raft-rs's refusal of the config.
    pub fn open(
        dir: &Path,
        group: &str,
        cluster: Arc<Cluster>,
        voters: &[String],
    ) -> anyhow::Result<RaftGroup> {
        let me = cluster.server_name().to_string();
        let mut log = RaftLog::open(dir)?;
        if log.conf_state().voters.is_empty() && !voters.is_empty() {
            let cs = ConfState {
                voters: voters.iter().map(|n| node_id(n)).collect(),
                ..ConfState::default()
            };
            log.set_conf_state(&cs)?;
        }
        let applied = log.snapshot_index();
        let cfg = Config {
            id: node_id(&me),
            election_tick: ELECTION_TICKS,
            heartbeat_tick: HEARTBEAT_TICKS,
            applied,
            check_quorum: true,
            pre_vote: true,
            max_size_per_msg: 1 << 20,
            max_inflight_msgs: 256,
            ..Config::default()
        };
        let logger = crate::logging::raft_logger(group);
        let raw = RawNode::new(&cfg, log, &logger)?;
        let mut names = BTreeMap::new();
        names.insert(node_id(&me), me);
        for v in voters {
            names.insert(node_id(v), v.clone());
        }
        Ok(RaftGroup {
            group: group.to_string(),
            raw,
            cluster,
            names,
            failed: false,
            snapshots_sent: Vec::new(),
            snapshots_failed: Vec::new(),
            conf_changes: 0,
            heard: std::collections::HashMap::new(),
            leader_since: None,
        })
    }

    /// Starts the log of a new group in `dir` from `data` (the snapshot at index 1, term 1)
    /// with `voters` its members: each member seeds its own log with the same state, so
    /// that a replica replaying its log from the start, or one sent the snapshot later,
    /// starts from the state the group was created with.
    ///
    /// # Errors
    /// The log cannot be opened or written, or already holds entries.
    pub fn seed_members(dir: &Path, voters: &[String], data: Vec<u8>) -> anyhow::Result<()> {
        RaftGroup::seed_members_with(dir, voters, &mut |w| w.write_all(&data))
    }

    /// [`RaftGroup::seed_members`] with the snapshot's data written by `write` straight to
    /// its file (a stream of one replica becoming replicated writes its messages so, never
    /// whole in memory).
    ///
    /// # Errors
    /// As [`RaftGroup::seed_members`], and an error of `write`.
    pub fn seed_members_with(
        dir: &Path,
        voters: &[String],
        write: &mut dyn FnMut(&mut dyn std::io::Write) -> std::io::Result<()>,
    ) -> anyhow::Result<()> {
        let mut log = RaftLog::open(dir)?;
        if log.snapshot_index() > 0 || !log.conf_state().voters.is_empty() {
            anyhow::bail!("the raft log in {} is not new", dir.display());
        }
        let members = ConfState {
            voters: voters.iter().map(|v| node_id(v)).collect(),
            ..ConfState::default()
        };
        log.write_snapshot(1, 1, members, write)?;
        Ok(())
    }

    /// Stops this member taking part (its owner cannot apply what the group committed):
    /// it neither votes nor acknowledges from now on, until the group is reopened.
    pub fn fail(&mut self) {
        self.failed = true;
    }

    /// The group's name (what `RAFT` ops carry).
    pub fn name(&self) -> &str {
        &self.group
    }

    /// Registers `inbox` for this group's messages with the cluster.
    pub fn listen(&self, inbox: Arc<dyn RaftInbox>) {
        self.cluster.register_raft(&self.group, inbox);
    }

    /// Counts one [`TICK`].
    pub fn tick(&mut self) {
        if !self.failed {
            self.raw.tick();
            for (to, sent) in self.cluster.take_parts_done(&self.group) {
                let status = if sent {
                    SnapshotStatus::Finish
                } else {
                    SnapshotStatus::Failure
                };
                self.raw.report_snapshot(node_id(&to), status);
            }
        }
        self.track_leadership();
    }

    /// Notes when this member became the leader (within a tick of it).
    fn track_leadership(&mut self) {
        if !self.is_leader() {
            self.leader_since = None;
        } else if self.leader_since.is_none() {
            self.leader_since = Some(std::time::SystemTime::now());
        }
    }

    /// Takes one message a peer sent (undecodable bytes are dropped).
    pub fn step(&mut self, data: &[u8]) {
        if self.failed {
            return;
        }
        match Message::parse_from_bytes(data) {
            Ok(mut msg) => {
                self.heard.insert(msg.from, std::time::Instant::now());
                // A snapshot whose data is a file comes after the file's parts: taken only
                // when they all came (else the leader sends it again).
                if msg.get_msg_type() == raft::prelude::MessageType::MsgSnapshot {
                    let data = &msg.get_snapshot().data;
                    if let Some((len, crc)) = super::raftlog::parse_descriptor(data) {
                        // Set aside from here on: a next transfer's parts start a new file.
                        if !self.raw.mut_store().accept_incoming(len, crc) {
                            warn!(group = %self.group, from = msg.from, len, "a snapshot whose data file did not come whole: dropped");
                            return;
                        }
                    }
                }
                // A heartbeat carries the commit index the leader believes this member has
                // reached; a member restarted with an empty disk holds less, and raft-rs
                // would panic committing past its log. Committing less is always safe: the
                // leader's next appends bring the entries and the commit with them.
                let mut lost = None;
                if msg.get_msg_type() == raft::prelude::MessageType::MsgHeartbeat {
                    let last = self.raw.raft.raft_log.last_index();
                    if msg.commit > last {
                        msg.commit = last;
                        lost = Some((msg.from, last));
                    }
                }
                // A member restarted with an empty disk says it lacks entries the leader
                // recorded it as holding: start probing it from what it has, instead of
                // taking the rejection for a stale one (raft-rs ignores a rejection at or
                // below what it believes matched).
                if msg.get_msg_type() == raft::prelude::MessageType::MsgAppendResponse
                    && msg.reject
                    && self.is_leader()
                {
                    if let Some(pr) = self.raw.raft.mut_prs().get_mut(msg.from) {
                        if msg.reject_hint < pr.matched {
                            warn!(
                                group = %self.group,
                                from = msg.from,
                                had = pr.matched,
                                has = msg.reject_hint,
                                "a member lost entries (restarted with an empty disk?): resending"
                            );
                            pr.matched = msg.reject_hint;
                            pr.next_idx = msg.reject_hint + 1;
                            pr.become_probe();
                        }
                    }
                }
                if let Err(err) = self.raw.step(msg) {
                    debug!(group = %self.group, error = %err, "raft step");
                }
                // ... and tells the leader what it has, as a rejected append would, so the
                // leader sends the log again even when no new entry comes.
                if let Some((leader, last)) = lost {
                    let mut reject = Message::default();
                    reject.set_msg_type(raft::prelude::MessageType::MsgAppendResponse);
                    reject.to = leader;
                    reject.from = self.raw.raft.id;
                    reject.term = self.raw.raft.term;
                    reject.reject = true;
                    reject.index = last;
                    reject.reject_hint = last;
                    self.send(vec![reject]);
                }
            }
            Err(err) => warn!(group = %self.group, error = %err, "undecodable raft message"),
        }
    }

    /// Takes bytes of a snapshot's data file a peer sent (`RAFTS`), `offset` bytes into it:
    /// written to disk as they come (see [`RaftLog::receive_part`]).
    pub fn receive_snapshot_part(&mut self, offset: u64, data: &[u8]) {
        if self.failed {
            return;
        }
        if let Err(err) = self.raw.mut_store().receive_part(offset, data) {
            warn!(group = %self.group, error = %err, "receiving a snapshot's data file");
        }
    }

    /// Whether this member leads the group now.
    pub fn is_leader(&self) -> bool {
        self.raw.raft.state == StateRole::Leader
    }

    /// When this member became the leader it is now (`None` on a follower).
    pub fn leader_since(&self) -> Option<std::time::SystemTime> {
        self.leader_since.filter(|_| self.is_leader())
    }

    /// The leader's server name, if one is known.
    pub fn leader(&self) -> Option<String> {
        let id = self.raw.raft.leader_id;
        (id != 0).then(|| self.name_of(id)).flatten()
    }

    /// The current term.
    pub fn term(&self) -> u64 {
        self.raw.raft.term
    }

    /// The members (voters) by server name, as far as names are known.
    pub fn voters(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .raw
            .raft
            .prs()
            .conf()
            .voters()
            .ids()
            .iter()
            .map(|id| self.name_of(id).unwrap_or_else(|| format!("{id:x}")))
            .collect();
        v.sort();
        v
    }

    /// The leader's view of each other member's progress (empty on a follower).
    pub fn progress(&self) -> Vec<ReplicaProgress> {
        if !self.is_leader() {
            return Vec::new();
        }
        let me = self.raw.raft.id;
        let mut out: Vec<ReplicaProgress> = self
            .raw
            .raft
            .prs()
            .iter()
            .filter(|(id, _)| **id != me)
            .map(|(id, pr)| ReplicaProgress {
                name: self.name_of(*id).unwrap_or_else(|| format!("{id:x}")),
                matched: pr.matched,
                active: pr.recent_active,
                last_heard: self.heard.get(id).map(|t| t.elapsed()),
            })
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    /// The last index in this member's log.
    pub fn last_index(&self) -> u64 {
        self.raw.raft.raft_log.last_index()
    }

    /// The highest index known committed.
    pub fn committed(&self) -> u64 {
        self.raw.raft.raft_log.committed
    }

    /// Whether this member leads and an entry of its own term is committed: every entry of
    /// earlier leaders it will ever commit is then known committed.
    pub fn committed_in_term(&self) -> bool {
        self.is_leader() && self.raw.raft.commit_to_current_term()
    }

    /// Appends `data` to the group's log, if this member leads; it is handed to every
    /// member's owner once committed ([`Committed::Command`]).
    ///
    /// # Errors
    /// [`ProposeError::NotLeader`] on a follower; [`ProposeError::Dropped`] when raft-rs
    /// refuses it.
    pub fn propose(&mut self, data: Vec<u8>) -> Result<(), ProposeError> {
        if !self.is_leader() || self.failed {
            return Err(ProposeError::NotLeader(self.leader()));
        }
        self.raw
            .propose(Vec::new(), data)
            .map_err(|e| ProposeError::Dropped(e.to_string()))
    }

    /// Whether a membership change was appended and not applied yet (raft-rs takes one at
    /// a time).
    pub fn has_pending_conf(&self) -> bool {
        self.raw.raft.has_pending_conf()
    }

    /// The members' Raft ids ([`node_id`] of their server names).
    pub fn voter_ids(&self) -> Vec<u64> {
        let mut v: Vec<u64> = self.raw.raft.prs().conf().voters().ids().iter().collect();
        v.sort_unstable();
        v
    }

    /// The learners' Raft ids: members that receive the log but do not vote or count for
    /// commits (a server joining, until it caught up).
    pub fn learner_ids(&self) -> Vec<u64> {
        let mut v: Vec<u64> = self
            .raw
            .raft
            .prs()
            .conf()
            .learners()
            .iter()
            .copied()
            .collect();
        v.sort_unstable();
        v
    }

    /// How many membership changes this member applied since it opened (a snapshot taken
    /// after one carries the new membership, which a joining member needs to accept it).
    pub fn conf_changes(&self) -> u64 {
        self.conf_changes
    }

    /// Appends a membership change: server `name` joins as a learner (gets the log, does
    /// not vote, so the group commits without it while it catches up). Applied by every
    /// member when committed ([`RaftGroup::on_ready`]).
    ///
    /// # Errors
    /// As [`RaftGroup::propose`].
    pub fn add_learner(&mut self, name: &str) -> Result<(), ProposeError> {
        let id = node_id(name);
        self.names.insert(id, name.to_string());
        self.change_member(id, raft::prelude::ConfChangeType::AddLearnerNode)
    }

    /// Appends a membership change: server `name` (a learner that caught up, or a new
    /// server) becomes a voter.
    ///
    /// # Errors
    /// As [`RaftGroup::propose`].
    pub fn add_member(&mut self, name: &str) -> Result<(), ProposeError> {
        let id = node_id(name);
        self.names.insert(id, name.to_string());
        self.change_member(id, raft::prelude::ConfChangeType::AddNode)
    }

    /// Appends a membership change: the member with Raft id `id` leaves the group.
    ///
    /// # Errors
    /// As [`RaftGroup::propose`].
    pub fn remove_member(&mut self, id: u64) -> Result<(), ProposeError> {
        self.change_member(id, raft::prelude::ConfChangeType::RemoveNode)
    }

    fn change_member(
        &mut self,
        id: u64,
        kind: raft::prelude::ConfChangeType,
    ) -> Result<(), ProposeError> {
        if !self.is_leader() || self.failed {
            return Err(ProposeError::NotLeader(self.leader()));
        }
        let mut change = raft::prelude::ConfChangeSingle {
            node_id: id,
            ..Default::default()
        };
        change.set_change_type(kind);
        let mut cc = ConfChangeV2::default();
        cc.set_changes(vec![change].into());
        self.raw
            .propose_conf_change(Vec::new(), cc)
            .map_err(|e| ProposeError::Dropped(e.to_string()))
    }

    /// Asks the leader to hand leadership to `to` (a member's server name); or, with `None`,
    /// to the most up-to-date other member. Only a leader acts on it. Returns the member
    /// chosen.
    pub fn transfer_leader(&mut self, to: Option<&str>) -> Option<String> {
        if !self.is_leader() {
            return None;
        }
        let me = self.raw.raft.id;
        let target = match to {
            Some(name) => Some(node_id(name)),
            None => self
                .raw
                .raft
                .prs()
                .iter()
                .filter(|(id, pr)| **id != me && pr.recent_active)
                .max_by_key(|(_, pr)| pr.matched)
                .map(|(id, _)| *id),
        }?;
        self.raw.transfer_leader(target);
        self.name_of(target)
    }

    /// The index of the last entry handed to the owner (or of the snapshot it restored).
    pub fn applied(&self) -> u64 {
        self.raw.raft.raft_log.applied
    }

    /// The index of this member's last snapshot (0: none); its log starts after it.
    pub fn snapshot_index(&self) -> u64 {
        self.raw.store().snapshot_index()
    }

    /// This member's own last snapshot, as stored in its log directory: its index and data,
    /// for the owner to restore its state from when it starts (the entries after it follow
    /// through [`RaftGroup::on_ready`]). `None` without one.
    ///
    /// # Errors
    /// The snapshot file cannot be read or does not check out.
    /// The data is read from its file as the reader is read (a stream's snapshot can be
    /// larger than memory); the reader fails at the end unless it read what was written.
    pub fn local_snapshot(&self) -> anyhow::Result<Option<(u64, SnapshotReader)>> {
        self.raw
            .store()
            .snapshot_reader()
            .map_err(|e| anyhow::anyhow!("reading the snapshot of {}: {e}", self.group))
    }

    /// Makes `data` (the owner's state after applying every entry up to [`RaftGroup::applied`])
    /// this member's snapshot at that index, and drops the log up to it: written and fsynced
    /// before the log is rewritten ([`RaftLog::apply_snapshot`]). A member that needs entries
    /// from before it is sent the snapshot instead.
    ///
    /// # Errors
    /// A write error: the member stops taking part (see [`RaftLog`]).
    pub fn compact(&mut self, data: Vec<u8>) -> Result<(), LogError> {
        self.compact_with(&mut |w| w.write_all(&data))
    }

    /// [`RaftGroup::compact`] with the data written by `write` straight to the snapshot's
    /// file (never whole in memory).
    ///
    /// # Errors
    /// An error of `write` (nothing changes, the member goes on); a write error of the log
    /// (the member stops taking part).
    pub fn compact_with(
        &mut self,
        write: &mut dyn FnMut(&mut dyn std::io::Write) -> std::io::Result<()>,
    ) -> Result<(), LogError> {
        let index = self.applied();
        if self.failed || index <= self.snapshot_index() {
            return Ok(());
        }
        let term = self
            .raw
            .raft
            .raft_log
            .term(index)
            .map_err(|e| LogError::Invalid(format!("term of {index}: {e}")))?;
        let conf_state = self.raw.raft.prs().conf().to_conf_state();
        let result = self
            .raw
            .mut_store()
            .write_snapshot(index, term, conf_state, write);
        match &result {
            // The owner's data or the data file failed before anything was in force: no
            // snapshot this time, the log goes on.
            Err(err) if !self.raw.store().is_failed() => {
                warn!(group = %self.group, error = %err, "no raft snapshot");
            }
            Err(err) => {
                warn!(group = %self.group, error = %err, "raft snapshot write failed: leaving the group");
                self.failed = true;
            }
            Ok(()) => {}
        }
        result
    }

    /// Whether raft-rs has work for [`RaftGroup::on_ready`].
    pub fn has_ready(&self) -> bool {
        !self.failed && self.raw.has_ready()
    }

    /// Does what Raft asks after ticks, steps and proposals: installs a leader's snapshot,
    /// hands committed entries to `apply` in log order, persists the log (one write and
    /// fsync), sends the messages, and applies membership changes.
    ///
    /// # Errors
    /// A log write error: the member stops taking part until reopened (see [`RaftLog`]).
    pub fn on_ready(&mut self, apply: &mut dyn FnMut(Committed<'_>)) -> Result<(), LogError> {
        if self.failed || !self.raw.has_ready() {
            return Ok(());
        }
        let result = self.ready_once(apply);
        self.track_leadership();
        if let Err(err) = &result {
            warn!(group = %self.group, error = %err, "raft log write failed: leaving the group");
            self.failed = true;
        }
        result
    }

    fn ready_once(&mut self, apply: &mut dyn FnMut(Committed<'_>)) -> Result<(), LogError> {
        let mut rd = self.raw.ready();
        self.send(rd.take_messages());
        if !rd.snapshot().is_empty() {
            let snap = rd.snapshot().clone();
            self.raw.mut_store().apply_snapshot(&snap)?;
            let index = snap.metadata.as_ref().map_or(0, |m| m.index);
            apply(Committed::Snapshot { index });
        }
        let committed = rd.take_committed_entries();
        self.apply_entries(committed, apply)?;
        self.raw.mut_store().persist(rd.entries(), rd.hs(), None)?;
        self.send(rd.take_persisted_messages());
        let mut light = self.raw.advance(rd);
        if let Some(commit) = light.commit_index() {
            let mut hs = self.raw.store().hard_state().clone();
            hs.commit = commit;
            self.raw.mut_store().set_hard_state(&hs)?;
        }
        self.send(light.take_messages());
        let committed = light.take_committed_entries();
        self.apply_entries(committed, apply)?;
        self.raw.advance_apply();
        for to in std::mem::take(&mut self.snapshots_sent) {
            self.raw.report_snapshot(to, SnapshotStatus::Finish);
        }
        for to in std::mem::take(&mut self.snapshots_failed) {
            self.raw.report_snapshot(to, SnapshotStatus::Failure);
        }
        Ok(())
    }

    fn apply_entries(
        &mut self,
        entries: Vec<Entry>,
        apply: &mut dyn FnMut(Committed<'_>),
    ) -> Result<(), LogError> {
        for e in entries {
            match e.get_entry_type() {
                EntryType::EntryNormal => {
                    if !e.data.is_empty() {
                        apply(Committed::Command {
                            index: e.index,
                            data: &e.data,
                        });
                    }
                }
                EntryType::EntryConfChange | EntryType::EntryConfChangeV2 => {
                    // Members before, with what each had stored (a leader's view).
                    let before: Vec<(u64, u64)> = self
                        .raw
                        .raft
                        .prs()
                        .iter()
                        .map(|(id, p)| (*id, p.matched))
                        .collect();
                    let cs = if e.get_entry_type() == EntryType::EntryConfChangeV2 {
                        let cc = ConfChangeV2::parse_from_bytes(&e.data)
                            .map_err(|err| LogError::Invalid(err.to_string()))?;
                        self.raw.apply_conf_change(&cc)
                    } else {
                        let cc = raft::prelude::ConfChange::parse_from_bytes(&e.data)
                            .map_err(|err| LogError::Invalid(err.to_string()))?;
                        self.raw.apply_conf_change(&cc)
                    };
                    match cs {
                        Ok(cs) => {
                            self.conf_changes += 1;
                            self.raw.mut_store().set_conf_state(&cs)?;
                            self.tell_removed(&before, &cs, e.index);
                        }
                        Err(err) => warn!(group = %self.group, error = %err, "conf change"),
                    }
                }
            }
        }
        Ok(())
    }

    /// The leader, having applied a membership change at `index`: a member it removed gets
    /// one heartbeat more, whose commit index (up to what that member stored) lets it apply
    /// the change and see it was removed; the leader writes to a removed member no more,
    /// so it would not learn it otherwise (see `jetstream::replica`'s leaving replica).
    fn tell_removed(&mut self, before: &[(u64, u64)], now: &ConfState, index: u64) {
        if !self.is_leader() {
            return;
        }
        let me = self.raw.raft.id;
        let members: Vec<u64> = now.voters.iter().chain(&now.learners).copied().collect();
        let term = self.raw.raft.term;
        let committed = self.raw.raft.raft_log.committed;
        let mut msgs = Vec::new();
        for &(id, matched) in before {
            if id == me || members.contains(&id) || matched < index {
                continue;
            }
            let mut m = Message::default();
            m.set_msg_type(raft::prelude::MessageType::MsgHeartbeat);
            m.to = id;
            m.from = me;
            m.term = term;
            m.commit = committed.min(matched);
            msgs.push(m);
        }
        self.send(msgs);
    }

    fn send(&mut self, msgs: Vec<Message>) {
        for m in msgs {
            let Some(to) = self.name_of(m.to) else {
                debug!(group = %self.group, to = m.to, "raft message to an unknown server");
                continue;
            };
            let snapshot = m.get_msg_type() == raft::prelude::MessageType::MsgSnapshot;
            if snapshot && super::raftlog::parse_descriptor(&m.get_snapshot().data).is_some() {
                // Its data file goes first, in parts, then the message.
                let sent = match (self.raw.store().snapshot_data_file(), m.write_to_bytes()) {
                    (Some((path, len)), Ok(bytes)) => {
                        self.cluster
                            .send_snapshot_file(&to, &self.group, bytes, path, len)
                    }
                    _ => Sent::NotSent,
                };
                if sent == Sent::NotSent {
                    self.snapshots_failed.push(m.to);
                }
                continue;
            }
            match m.write_to_bytes() {
                Ok(bytes) => match self.cluster.send_raft_tracked(&to, &self.group, &bytes) {
                    // Whole: reported sent after the Ready. In parts: once the last part
                    // is out ([`RaftGroup::tick`]); raft-rs sends it no more meanwhile.
                    Sent::Whole if snapshot => self.snapshots_sent.push(m.to),
                    Sent::NotSent if snapshot => self.snapshots_failed.push(m.to),
                    _ => {}
                },
                Err(err) => warn!(group = %self.group, error = %err, "encoding a raft message"),
            }
        }
    }

    /// The server name of Raft id `id`: a member named at open, or a peer of the cluster.
    fn name_of(&self, id: u64) -> Option<String> {
        if let Some(n) = self.names.get(&id) {
            return Some(n.clone());
        }
        self.cluster
            .peers()
            .into_iter()
            .find(|p| node_id(&p.name) == id)
            .map(|p| p.name)
    }

    /// Stops receiving this group's messages.
    pub fn close(&self) {
        self.cluster.unregister_raft(&self.group);
    }
}

/// A [`RaftInbox`] that forwards each message to its owner's channel, wrapped by `wrap`, and
/// each part of a snapshot's data file wrapped by `part`.
pub struct ChannelInbox<T: Send> {
    tx: std::sync::mpsc::Sender<T>,
    wrap: fn(Bytes) -> T,
    part: fn(super::SnapshotPart) -> T,
    parts: super::PartQueue,
}

impl<T: Send> ChannelInbox<T> {
    /// An inbox sending `wrap(message)` and `part(snapshot part)` on `tx`.
    pub fn new(
        tx: std::sync::mpsc::Sender<T>,
        wrap: fn(Bytes) -> T,
        part: fn(super::SnapshotPart) -> T,
    ) -> Self {
        ChannelInbox {
            tx,
            wrap,
            part,
            parts: super::PartQueue::default(),
        }
    }
}

impl<T: Send> RaftInbox for ChannelInbox<T> {
    fn deliver(&self, data: Bytes) {
        let _ = self.tx.send((self.wrap)(data));
    }

    fn deliver_snapshot_part(&self, offset: u64, data: Bytes) {
        if let Some(part) = self.parts.admit(offset, data) {
            let _ = self.tx.send((self.part)(part));
        }
    }
}
