//! The meta group: one Raft group of every JetStream server of the cluster, whose log holds
//! which streams exist, in which account, with which config and on which servers
//! (assignments), and whose leader (the meta leader) decides every change to them.
//!
//! ```text
//!  STREAM.CREATE on any node ─▶ every node's API thread ─▶ the meta leader's checks it,
//!       picks the servers, proposes MetaOp::AddStream ─▶ committed by a majority ─▶
//!       every node applies it: the assignment table; the chosen servers open the stream
//!       and the stream's server answers the request
//! ```
//!
//! One thread per server runs the group ([`Meta::start`]): Raft messages from the routes,
//! ticks every [`group::TICK`], proposals from the API threads. What it applied is read by
//! the API threads and the monitoring ([`MetaState`]), and each applied operation is handed
//! to its account's API thread ([`super::ApiCmd::Assigned`]) in log order.
//!
//! # Forming the group
//!
//! A server whose meta log is empty joins the group of a peer that says in its `HELLO` that
//! it is a member of a formed group (the meta leader adds it as a learner, then a voter:
//! see `Members`). With no such peer it waits until the set of JetStream servers it has routes
//! to has not changed for [`SETTLE`] (and holds at least one other server when routes are
//! configured), then starts the group with itself and those servers as its members. Servers
//! of a new cluster started together therefore start the same group. A server that restarts
//! keeps the membership its log holds; one restarted with an empty disk joins the running
//! group as above. `SERVER.REMOVE` takes a server out for good ([`MetaOp::RemoveServer`]).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::Context;
use bytes::Bytes;
use jsproto::api::stream::StreamConfig;
use jsproto::api::time::Timestamp;
use serde::{Deserialize, Serialize};
use tracing::{info, warn};

use super::ApiCmd;
use crate::cluster::group::{self, ChannelInbox, Committed, RaftGroup};
use crate::cluster::raftlog::meta_raft_dir;
use crate::cluster::Cluster;

/// The meta group's name in `RAFT` ops.
pub const META_GROUP: &str = "_meta_";

/// How long the set of JetStream peers must stay the same before a server with an empty
/// meta log starts the group with them.
pub const SETTLE: Duration = Duration::from_secs(2);

/// Where a stream lives: decided by the meta leader, the same on every server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamAssignment {
    /// The account the stream belongs to.
    pub account: String,
    /// The stream's config as checked by the meta leader.
    pub config: StreamConfig,
    /// When it was created.
    pub created: Timestamp,
    /// The servers holding it (`server_name`s); the first is the preferred leader.
    pub peers: Vec<String>,
}

/// One change to the assignments: an entry of the meta group's log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum MetaOp {
    /// A new stream.
    AddStream {
        /// Where and what.
        assignment: StreamAssignment,
        /// The create request's reply subject (answered by the stream's server).
        reply: Option<String>,
    },
    /// A stream's new config (checked by the meta leader).
    UpdateStream {
        /// The account.
        account: String,
        /// The new config.
        config: StreamConfig,
        /// The stream's servers when `num_replicas` changed (`None`: the same).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        peers: Option<Vec<String>>,
        /// The update request's reply subject (answered by the stream's server).
        reply: Option<String>,
    },
    /// A stream's servers changed (`STREAM.PEER.REMOVE`: one taken out, another put in its
    /// place when one is free).
    SetPeers {
        /// The account.
        account: String,
        /// The stream.
        name: String,
        /// Its servers from now on.
        peers: Vec<String>,
        /// The request's reply subject (answered by the meta leader).
        reply: Option<String>,
    },
    /// `SERVER.REMOVE`: the server leaves the meta group for good (the leader removes it
    /// from the group's membership and does not add it again).
    RemoveServer {
        /// Its server name.
        name: String,
    },
    /// A stream deleted.
    RemoveStream {
        /// The account.
        account: String,
        /// The stream.
        name: String,
        /// The delete request's reply subject (answered by the meta leader).
        reply: Option<String>,
    },
}

impl MetaOp {
    /// The account the operation is about.
    pub fn account(&self) -> &str {
        match self {
            MetaOp::AddStream { assignment, .. } => &assignment.account,
            MetaOp::UpdateStream { account, .. }
            | MetaOp::RemoveStream { account, .. }
            | MetaOp::SetPeers { account, .. } => account,
            MetaOp::RemoveServer { .. } => "",
        }
    }
}

/// Work for the meta thread.
pub enum MetaCmd {
    /// A Raft message from a peer.
    Raft(Bytes),
    /// Bytes of a snapshot's data file from a peer, at an offset.
    RaftSnapshotPart(crate::cluster::SnapshotPart),
    /// Append an operation (only the leader does; dropped elsewhere, with a warning).
    Propose(Box<MetaOp>),
    /// `$JS.API.META.LEADER.STEPDOWN`: hand leadership to the member named `to` (chosen by
    /// the system account's API thread, see `api_cluster`). Ignored by a member that no longer
    /// leads; raft-rs gives up the transfer after an election timeout if `to` does not take
    /// over, and this server goes on leading.
    StepDown {
        /// The server name of the member to hand leadership to.
        to: String,
    },
    /// `SERVER.REMOVE`: take the server out of the meta group for good (the leader appends
    /// the membership change).
    RemoveServer {
        /// Its server name.
        name: String,
    },
    /// End the thread.
    Shutdown,
}

/// What the meta thread applied, as other threads read it.
#[derive(Debug, Default, Clone)]
pub struct MetaView {
    /// The meta leader's server name, when one is known.
    pub leader: Option<String>,
    /// Whether this server is the meta leader.
    pub is_leader: bool,
    /// The group's members (server names), once the group is formed.
    pub members: Vec<String>,
    /// The current term.
    pub term: u64,
    /// Whether a leader was ever known since this server started.
    pub had_leader: bool,
    /// The stream assignments, by (account, stream).
    pub streams: BTreeMap<(String, String), StreamAssignment>,
    /// Servers taken out with `SERVER.REMOVE`: not members again.
    pub removed: std::collections::BTreeSet<String>,
}

/// The meta group's state in a snapshot ([`MetaState::snapshot`]): what the log's entries
/// up to it left.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct MetaSnapshot {
    streams: Vec<StreamAssignment>,
    removed: Vec<String>,
}

/// The meta thread's applied state and the API threads it tells of each operation.
#[derive(Default)]
pub struct MetaState {
    view: Mutex<MetaView>,
    accounts: Mutex<HashMap<String, mpsc::Sender<ApiCmd>>>,
}

impl MetaState {
    /// A copy of what is applied now.
    pub fn view(&self) -> MetaView {
        self.view.lock().expect("meta lock poisoned").clone()
    }

    /// Whether this server leads the meta group now.
    pub fn is_leader(&self) -> bool {
        self.view.lock().expect("meta lock poisoned").is_leader
    }

    /// The meta leader's name, if known.
    pub fn leader(&self) -> Option<String> {
        self.view.lock().expect("meta lock poisoned").leader.clone()
    }

    /// The assignment of `stream` in `account`.
    pub fn assignment(&self, account: &str, stream: &str) -> Option<StreamAssignment> {
        self.view
            .lock()
            .expect("meta lock poisoned")
            .streams
            .get(&(account.to_string(), stream.to_string()))
            .cloned()
    }

    /// The assignments of `account`'s streams, by name.
    pub fn streams_of(&self, account: &str) -> Vec<StreamAssignment> {
        self.view
            .lock()
            .expect("meta lock poisoned")
            .streams
            .values()
            .filter(|a| a.account == account)
            .cloned()
            .collect()
    }

    /// How many streams each server holds (every member listed, 0 for none).
    pub fn load(&self) -> BTreeMap<String, usize> {
        let view = self.view.lock().expect("meta lock poisoned");
        let mut load: BTreeMap<String, usize> =
            view.members.iter().map(|m| (m.clone(), 0)).collect();
        for a in view.streams.values() {
            for p in &a.peers {
                *load.entry(p.clone()).or_default() += 1;
            }
        }
        load
    }

    /// The applied state as a snapshot's data (JSON).
    fn snapshot(&self) -> Vec<u8> {
        let view = self.view.lock().expect("meta lock poisoned");
        let snap = MetaSnapshot {
            streams: view.streams.values().cloned().collect(),
            removed: view.removed.iter().cloned().collect(),
        };
        serde_json::to_vec(&snap).expect("meta snapshots serialise")
    }

    /// Takes a snapshot's state: each difference from what is applied now is applied as
    /// the operation that makes it (streams added, changed, given other servers, removed),
    /// so the API threads open and close replicas as for the log's entries.
    fn restore(&self, data: &[u8]) {
        let snap: MetaSnapshot = match serde_json::from_slice(data) {
            Ok(s) => s,
            Err(err) => {
                warn!(error = %err, "undecodable meta snapshot");
                return;
            }
        };
        let (old, removed) = {
            let view = self.view.lock().expect("meta lock poisoned");
            (view.streams.clone(), view.removed.clone())
        };
        for name in snap.removed.iter().filter(|n| !removed.contains(*n)) {
            self.apply(MetaOp::RemoveServer { name: name.clone() });
        }
        let new: BTreeMap<(String, String), StreamAssignment> = snap
            .streams
            .into_iter()
            .map(|a| ((a.account.clone(), a.config.name.clone()), a))
            .collect();
        for ((account, name), _) in old.iter().filter(|(k, _)| !new.contains_key(*k)) {
            self.apply(MetaOp::RemoveStream {
                account: account.clone(),
                name: name.clone(),
                reply: None,
            });
        }
        for (key, a) in new {
            match old.get(&key) {
                None => self.apply(MetaOp::AddStream {
                    assignment: a,
                    reply: None,
                }),
                Some(o) if o.config != a.config || o.peers != a.peers => {
                    self.apply(MetaOp::UpdateStream {
                        account: a.account.clone(),
                        config: a.config.clone(),
                        peers: Some(a.peers.clone()),
                        reply: None,
                    });
                }
                Some(_) => {}
            }
        }
    }

    /// Tells `account`'s API thread of each operation applied from now on.
    pub fn register_account(&self, account: &str, tx: mpsc::Sender<ApiCmd>) {
        self.accounts
            .lock()
            .expect("meta lock poisoned")
            .insert(account.to_string(), tx);
    }

    fn apply(&self, op: MetaOp) {
        let leader = {
            let mut view = self.view.lock().expect("meta lock poisoned");
            match &op {
                MetaOp::AddStream { assignment, .. } => {
                    view.streams.insert(
                        (assignment.account.clone(), assignment.config.name.clone()),
                        assignment.clone(),
                    );
                }
                MetaOp::UpdateStream {
                    account,
                    config,
                    peers,
                    ..
                } => {
                    if let Some(a) = view
                        .streams
                        .get_mut(&(account.clone(), config.name.clone()))
                    {
                        a.config = config.clone();
                        if let Some(peers) = peers {
                            a.peers = peers.clone();
                        }
                    }
                }
                MetaOp::SetPeers {
                    account,
                    name,
                    peers,
                    ..
                } => {
                    if let Some(a) = view.streams.get_mut(&(account.clone(), name.clone())) {
                        a.peers = peers.clone();
                    }
                }
                MetaOp::RemoveStream { account, name, .. } => {
                    view.streams.remove(&(account.clone(), name.clone()));
                }
                MetaOp::RemoveServer { name } => {
                    view.removed.insert(name.clone());
                }
            }
            view.is_leader
        };
        let tx = self
            .accounts
            .lock()
            .expect("meta lock poisoned")
            .get(op.account())
            .cloned();
        if let Some(tx) = tx {
            let _ = tx.send(ApiCmd::Assigned {
                op: Box::new(op),
                meta_leader: leader,
            });
        }
    }
}

/// The running meta group of one server.
pub struct Meta {
    tx: mpsc::Sender<MetaCmd>,
    state: Arc<MetaState>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Meta {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Meta").finish_non_exhaustive()
    }
}

impl Meta {
    /// Starts the meta thread of `cluster`'s server, its log under `store_dir`
    /// (`<store_dir>/jetstream/_meta_/raft/`).
    ///
    /// # Errors
    /// When the thread cannot be started.
    pub fn start(cluster: &Arc<Cluster>, store_dir: &Path) -> anyhow::Result<Meta> {
        let (tx, rx) = mpsc::channel();
        let state = Arc::new(MetaState::default());
        let dir = meta_raft_dir(store_dir);
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let inbox = Arc::new(ChannelInbox::new(
            tx.clone(),
            MetaCmd::Raft,
            MetaCmd::RaftSnapshotPart,
        ));
        cluster.register_raft(META_GROUP, inbox);
        let thread_state = Arc::clone(&state);
        let thread_cluster = Arc::clone(cluster);
        let thread = std::thread::Builder::new()
            .name("jetstream-meta".into())
            .spawn(move || run(&thread_cluster, &dir, &thread_state, &rx))
            .context("starting the meta thread")?;
        Ok(Meta {
            tx,
            state,
            thread: Some(thread),
        })
    }

    /// What the meta thread applied.
    pub fn state(&self) -> &Arc<MetaState> {
        &self.state
    }

    /// Queues a command for the meta thread.
    pub fn send(&self, cmd: MetaCmd) {
        let _ = self.tx.send(cmd);
    }

    /// A sender of commands for the meta thread.
    pub fn sender(&self) -> mpsc::Sender<MetaCmd> {
        self.tx.clone()
    }

    /// Stops the thread and waits for it.
    pub fn shutdown(mut self) {
        let _ = self.tx.send(MetaCmd::Shutdown);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Waits until the group can be formed (see the module doc); `None` when told to stop.
fn form_group(
    cluster: &Arc<Cluster>,
    dir: &Path,
    rx: &mpsc::Receiver<MetaCmd>,
    early: &mut Vec<Bytes>,
) -> Option<RaftGroup> {
    let me = cluster.server_name().to_string();
    // A log with a membership keeps it.
    match crate::cluster::raftlog::RaftLog::open(dir) {
        Ok(log) if !log.conf_state().voters.is_empty() => {
            drop(log);
            return match RaftGroup::open(dir, META_GROUP, Arc::clone(cluster), &[]) {
                Ok(g) => Some(g),
                Err(err) => {
                    warn!(error = format!("{err:#}"), "opening the meta group's log");
                    None
                }
            };
        }
        Ok(_) => {}
        Err(err) => {
            warn!(error = %err, "opening the meta group's log");
            return None;
        }
    }
    let need_peer = !cluster.configured_routes().is_empty();
    let mut seen: Vec<String> = Vec::new();
    let mut since = Instant::now();
    loop {
        // A group formed already: join it (its leader adds this server).
        if let Some(p) = cluster.peers().into_iter().find(|p| p.jetstream && p.meta) {
            info!("JetStream cluster joining the meta group of {}", p.name);
            match RaftGroup::open(dir, META_GROUP, Arc::clone(cluster), &[]) {
                Ok(g) => return Some(g),
                Err(err) => {
                    warn!(error = format!("{err:#}"), "opening the meta group's log");
                    return None;
                }
            }
        }
        let mut now_seen: Vec<String> = cluster
            .peers()
            .into_iter()
            .filter(|p| p.jetstream)
            .map(|p| p.name)
            .collect();
        now_seen.sort();
        if now_seen != seen {
            seen = now_seen;
            since = Instant::now();
        }
        if since.elapsed() >= SETTLE && (!seen.is_empty() || !need_peer) {
            let mut voters = seen.clone();
            voters.push(me.clone());
            voters.sort();
            info!("JetStream cluster forming the meta group with {voters:?}");
            match RaftGroup::open(dir, META_GROUP, Arc::clone(cluster), &voters) {
                Ok(g) => return Some(g),
                Err(err) => {
                    warn!(error = format!("{err:#}"), "opening the meta group's log");
                    return None;
                }
            }
        }
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(MetaCmd::Shutdown) | Err(RecvTimeoutError::Disconnected) => return None,
            // Messages from members that formed the group already: kept for when this
            // member exists (Raft would resend them anyway).
            Ok(MetaCmd::Raft(b)) => early.push(b),
            Ok(MetaCmd::RaftSnapshotPart(..)) => {}
            Ok(MetaCmd::Propose(op)) => warn!(?op, "no meta group yet: proposal dropped"),
            Ok(MetaCmd::StepDown { .. } | MetaCmd::RemoveServer { .. })
            | Err(RecvTimeoutError::Timeout) => {}
        }
    }
}

/// Restores `state` from this member's snapshot, if it has one.
fn restore_local(group: &RaftGroup, state: &MetaState) {
    let data = group.local_snapshot().and_then(|snap| {
        snap.map(|(_, mut reader)| {
            let mut data = Vec::new();
            reader.read_to_end(&mut data).map(|_| data)
        })
        .transpose()
        .map_err(anyhow::Error::from)
    });
    match data {
        Ok(Some(data)) => state.restore(&data),
        Ok(None) => {}
        Err(err) => warn!(error = format!("{err:#}"), "reading the meta snapshot"),
    }
}

fn run(cluster: &Arc<Cluster>, dir: &Path, state: &Arc<MetaState>, rx: &mpsc::Receiver<MetaCmd>) {
    let mut early = Vec::new();
    let Some(mut group) = form_group(cluster, dir, rx, &mut early) else {
        return;
    };
    cluster.set_meta_formed();
    restore_local(&group, state);
    for b in early {
        group.step(&b);
    }
    let mut members = Members::default();
    let mut next_tick = Instant::now() + group::TICK;
    let mut last_leader: Option<String> = None;
    loop {
        let wait = next_tick.saturating_duration_since(Instant::now());
        match rx.recv_timeout(wait) {
            Ok(MetaCmd::Raft(b)) => group.step(&b),
            Ok(MetaCmd::RaftSnapshotPart(p)) => group.receive_snapshot_part(p.offset, &p.data),
            Ok(MetaCmd::Propose(op)) => {
                let data = serde_json::to_vec(&*op).expect("meta ops serialise");
                if let Err(err) = group.propose(data) {
                    warn!(error = %err, "meta proposal dropped");
                }
            }
            Ok(MetaCmd::StepDown { to }) => {
                if group.transfer_leader(Some(&to)).is_some() {
                    info!("JetStream cluster meta leader stepping down to {to}");
                }
            }
            Ok(MetaCmd::RemoveServer { name }) => {
                let data =
                    serde_json::to_vec(&MetaOp::RemoveServer { name }).expect("meta ops serialise");
                if let Err(err) = group.propose(data) {
                    warn!(error = %err, "meta proposal dropped");
                }
            }
            Ok(MetaCmd::Shutdown) | Err(RecvTimeoutError::Disconnected) => break,
            Err(RecvTimeoutError::Timeout) => {}
        }
        if Instant::now() >= next_tick {
            group.tick();
            next_tick = Instant::now() + group::TICK;
        }
        while group.has_ready() {
            let mut ops = Vec::new();
            let mut snapshot = false;
            let result = group.on_ready(&mut |c| match c {
                Committed::Command { data, .. } => match serde_json::from_slice::<MetaOp>(data) {
                    Ok(op) => ops.push(op),
                    Err(err) => warn!(error = %err, "undecodable meta entry"),
                },
                // Comes before the Ready's entries.
                Committed::Snapshot { .. } => snapshot = true,
            });
            // Leadership first: the ops' answers depend on who leads.
            publish_view(&group, state, &mut last_leader);
            if snapshot {
                restore_local(&group, state);
            }
            for op in ops {
                state.apply(op);
            }
            if result.is_err() {
                break;
            }
        }
        publish_view(&group, state, &mut last_leader);
        members.tend(&mut group, cluster, state);
    }
    group.close();
}

/// Entries since the last meta snapshot before one is taken.
const META_SNAPSHOT_ENTRIES: u64 = 4096;
/// How often the meta leader looks at the group's membership.
const MEMBERS_CHECK: Duration = Duration::from_secs(1);
/// A learner within this many entries of the commit index becomes a voter.
const META_LEARNER_CAUGHT_UP: u64 = 16;

/// The meta group's membership and snapshots, as the meta thread keeps them.
#[derive(Default)]
struct Members {
    next_check: Option<Instant>,
    /// The group's `conf_changes` at the last snapshot.
    snapshot_conf_changes: u64,
}

impl Members {
    /// Every [`MEMBERS_CHECK`]: snapshots the state when the log grew long (every member),
    /// and, on the leader, one membership change at a time: a server that left
    /// (`SERVER.REMOVE`) is removed; a JetStream server that is connected and is no member
    /// joins as a learner (a snapshot naming it is taken once that is applied, which it
    /// starts from), and becomes a voter once it caught up.
    fn tend(&mut self, group: &mut RaftGroup, cluster: &Cluster, state: &MetaState) {
        let now = Instant::now();
        if self.next_check.is_some_and(|t| now < t) {
            return;
        }
        self.next_check = Some(now + MEMBERS_CHECK);
        if group.applied() >= group.snapshot_index() + META_SNAPSHOT_ENTRIES {
            self.snapshot(group, state);
        }
        if !group.is_leader() || group.has_pending_conf() {
            return;
        }
        let me = cluster.server_name().to_string();
        let removed = state.view().removed;
        let voters = group.voter_ids();
        let learners = group.learner_ids();
        let result = if let Some(gone) = voters
            .iter()
            .copied()
            .find(|v| removed.iter().any(|r| group::node_id(r) == *v))
        {
            if gone == group::node_id(&me) {
                if let Some(to) = state.view().members.into_iter().find(|m| *m != me) {
                    group.transfer_leader(Some(&to));
                }
                return;
            }
            info!("JetStream cluster removing a server from the meta group");
            group.remove_member(gone)
        } else if !learners.is_empty() {
            if self.snapshot_conf_changes != group.conf_changes() {
                self.snapshot(group, state);
                return;
            }
            let committed = group.committed();
            match group.progress().into_iter().find(|p| {
                learners.contains(&group::node_id(&p.name))
                    && p.matched + META_LEARNER_CAUGHT_UP >= committed
            }) {
                Some(p) => {
                    info!(
                        "JetStream cluster meta group: {} caught up, now a voter",
                        p.name
                    );
                    group.add_member(&p.name)
                }
                None => Ok(()),
            }
        } else if let Some(p) = cluster.peers().into_iter().find(|p| {
            let id = group::node_id(&p.name);
            p.jetstream && !voters.contains(&id) && !removed.contains(&p.name)
        }) {
            info!("JetStream cluster meta group: adding {}", p.name);
            group.add_learner(&p.name)
        } else {
            Ok(())
        };
        if let Err(err) = result {
            warn!(error = %err, "changing the meta group's members");
        }
    }

    fn snapshot(&mut self, group: &mut RaftGroup, state: &MetaState) {
        if group.applied() <= group.snapshot_index() {
            return;
        }
        match group.compact(state.snapshot()) {
            Ok(()) => self.snapshot_conf_changes = group.conf_changes(),
            Err(err) => warn!(error = %err, "meta snapshot"),
        }
    }
}

/// Copies the group's leadership and membership into `state`, logging a new leader as
/// nats-server does.
fn publish_view(group: &RaftGroup, state: &MetaState, last: &mut Option<String>) {
    let leader = group.leader();
    if leader != *last && leader.is_some() {
        if group.is_leader() {
            info!("Self is new JetStream cluster metadata leader");
        } else if let Some(l) = &leader {
            info!("JetStream cluster new metadata leader: {l}");
        }
    }
    last.clone_from(&leader);
    let mut view = state.view.lock().expect("meta lock poisoned");
    view.had_leader |= leader.is_some();
    view.leader = leader;
    view.is_leader = group.is_leader();
    view.members = group.voters();
    view.term = group.term();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assignment(name: &str, peers: &[&str]) -> StreamAssignment {
        StreamAssignment {
            account: "$G".into(),
            config: StreamConfig {
                name: name.into(),
                subjects: vec![format!("{}.>", name.to_lowercase())],
                ..StreamConfig::default()
            },
            created: Timestamp::from_unix_nanos(1_800_000_000_000_000_000),
            peers: peers.iter().map(|p| (*p).to_string()).collect(),
        }
    }

    /// A member restored from a snapshot has what the log's entries left: streams added,
    /// given other servers, removed, and the servers taken out; and a member that was
    /// behind gets there from what it had.
    #[test]
    fn a_snapshot_restores_the_applied_state() {
        let leader = MetaState::default();
        for a in [
            assignment("ORDERS", &["n1", "n2", "n3"]),
            assignment("BILLING", &["n2"]),
            assignment("GONE", &["n3"]),
        ] {
            leader.apply(MetaOp::AddStream {
                assignment: a,
                reply: None,
            });
        }
        let behind = MetaState::default();
        behind.restore(&leader.snapshot());
        leader.apply(MetaOp::SetPeers {
            account: "$G".into(),
            name: "ORDERS".into(),
            peers: vec!["n1".into(), "n2".into(), "n4".into()],
            reply: None,
        });
        leader.apply(MetaOp::RemoveStream {
            account: "$G".into(),
            name: "GONE".into(),
            reply: None,
        });
        leader.apply(MetaOp::RemoveServer { name: "n3".into() });
        let data = leader.snapshot();
        for member in [MetaState::default(), behind] {
            member.restore(&data);
            assert_eq!(member.view().streams, leader.view().streams);
            assert_eq!(member.view().removed, leader.view().removed);
        }
        assert_eq!(leader.view().streams.len(), 2);
        assert!(leader.view().removed.contains("n3"));
    }
}
