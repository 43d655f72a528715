//! One member of the controller quorum's Raft group: a voter (a controller), or an observer
//! (a broker-only node: a raft-rs learner, which receives the metadata log but never votes
//! or campaigns). raft-rs's `RawNode` over `DurableStorage`, driven from outside (sans I/O). The driver (Python, trio: `logbroker.coord.metadata.quorum`) calls
//!
//! - `tick()` every tick interval (election and heartbeat timeouts are counted in ticks);
//! - `step(bytes)` for every Raft message a peer sent;
//! - `propose(context, data)` to append a metadata record (forwarded to the leader by Raft);
//! - `ready()` after any of these: it persists what Raft asks (entries, hard state,
//!   snapshot; fsynced), and returns the messages to send and the newly committed entries to
//!   apply, in order.
//!
//! Observers join by configuration change: the leader proposes `AddLearnerNode` for an
//! observer that connected (`add_learner`); until that commits the observer hears nothing.
//! Every applied configuration change is kept in the storage's `ConfState`, so snapshots
//! carry the learners (a learner drops a snapshot that does not name it).
//!
//! The voter set is dynamic (KIP-853's AddRaftVoter and RemoveRaftVoter): the leader promotes
//! a caught-up learner with `AddNode` (`add_voter`) and removes a voter with `RemoveNode`
//! (`remove_voter`), one change at a time. The configured voters only seed a new log; an
//! existing log's configuration is what its snapshot and the changes after it say. A node
//! started with no voters at all (a controller joining through
//! `controller.quorum.bootstrap.servers`) knows no configuration until it installs a
//! snapshot: it drops appends that start at index 1 until then, so the leader sends it a
//! snapshot once its log is compacted (the leader snapshots after admitting a learner), and
//! it never replays a log from index 1 over an empty configuration.
//!
//! Invariant: the messages returned by `ready()` that depend on persisted state (votes,
//! append acknowledgements) are taken only after that state is fsynced; a failed write
//! returns the error and sends nothing, and the node must not be used again (its Raft
//! state and its disk may disagree); the driver stops it.
use std::path::Path;

use protobuf::Message as _;
use raft::eraftpb::{ConfChange, ConfChangeType, ConfChangeV2, Entry, EntryType, Message, MessageType, Snapshot};
use raft::{Config, RawNode, StateRole};

use super::storage::{DurableStorage, RaftStore};
use super::RaftError;

/// What a node outside the voters (an observer) may send: answers to the leader's appends
/// and heartbeats, and proposals it forwards.
const FROM_OBSERVERS: [MessageType; 3] =
    [MessageType::MsgAppendResponse, MessageType::MsgHeartbeatResponse, MessageType::MsgPropose];

/// A committed entry for the driver to apply.
pub struct Committed {
    pub index: u64,
    pub term: u64,
    /// False for Raft's own entries (a new leader's empty entry, configuration changes).
    pub normal: bool,
    pub context: Vec<u8>,
    pub data: Vec<u8>,
}

/// What one `ready()` produced.
#[derive(Default)]
pub struct ReadyOut {
    /// (peer id, encoded raft-proto Message)
    pub messages: Vec<(u64, Vec<u8>)>,
    /// A snapshot to install before `committed` (index, term, data).
    pub snapshot: Option<(u64, u64, Vec<u8>)>,
    pub committed: Vec<Committed>,
}

/// Timing and limits of a quorum member.
pub struct NodeConfig {
    pub id: u64,
    /// The voters a new log starts with; empty for a node joining an existing quorum.
    pub voters: Vec<u64>,
    /// A broker-only node: must never be one of the voters; joins as a learner.
    pub observer: bool,
    pub election_tick: usize,
    pub heartbeat_tick: usize,
}

pub struct QuorumNode {
    raw: RawNode<RaftStore>,
    store: DurableStorage,
    failed: Option<String>,
}

fn raft_err(e: raft::Error) -> RaftError {
    RaftError::Raft(e.to_string())
}

impl QuorumNode {
    /// Opens the Raft state in `dir` (new or existing) and starts as a follower.
    pub fn open(dir: &Path, cfg: &NodeConfig) -> Result<Self, RaftError> {
        if cfg.observer && cfg.voters.contains(&cfg.id) {
            return Err(RaftError::Config(format!(
                "node {} is one of the voters {:?}, so it cannot be a broker-only observer",
                cfg.id, cfg.voters
            )));
        }
        let store = DurableStorage::open(dir, &cfg.voters)?;
        let created = store.creation_voters();
        if !cfg.voters.is_empty() && !created.is_empty() {
            let mut created_sorted = created.clone();
            created_sorted.sort_unstable();
            let mut want = cfg.voters.clone();
            want.sort_unstable();
            if created_sorted != want {
                return Err(RaftError::Config(format!(
                    "controller.quorum.voters names nodes {want:?}, but the metadata log in {} was started by a quorum of {created_sorted:?}",
                    dir.display()
                )));
            }
        }
        let held = raft::Storage::initial_state(store.mem()).map_err(raft_err)?.conf_state.voters;
        if cfg.observer && held.contains(&cfg.id) {
            return Err(RaftError::Config(format!(
                "node {} is a voter of the metadata log in {} (voters {held:?}), so it cannot be a broker-only observer",
                cfg.id, dir.display())));
        }
        let applied = store.snapshot()?.map_or(0, |s| s.get_metadata().index);
        let config = Config {
            id: cfg.id,
            election_tick: cfg.election_tick,
            heartbeat_tick: cfg.heartbeat_tick,
            applied,
            pre_vote: true,
            check_quorum: true,
            max_size_per_msg: 1 << 20,
            max_inflight_msgs: 256,
            ..Config::default()
        };
        config.validate().map_err(|e| RaftError::Config(e.to_string()))?;
        let logger = slog::Logger::root(slog::Discard, slog::o!());
        let raw = RawNode::new(&config, store.raft_store(), &logger).map_err(raft_err)?;
        Ok(QuorumNode { raw, store, failed: None })
    }

    fn check(&self) -> Result<(), RaftError> {
        match &self.failed {
            Some(why) => Err(RaftError::Failed(why.clone())),
            None => Ok(()),
        }
    }

    /// One tick; true if Raft has something ready.
    pub fn tick(&mut self) -> Result<bool, RaftError> {
        self.check()?;
        Ok(self.raw.tick())
    }

    /// A message from a peer (raft-proto bytes).
    pub fn step(&mut self, msg: &[u8]) -> Result<(), RaftError> {
        self.check()?;
        let m =
            Message::parse_from_bytes(msg).map_err(|e| RaftError::BadMessage(format!("{} bytes: {e}", msg.len())))?;
        let conf = self.raw.raft.prs().conf();
        if conf.voters().contains(self.raw.raft.id)
            && !conf.voters().contains(m.from)
            && !FROM_OBSERVERS.contains(&m.get_msg_type())
        {
            // to a voter, an observer only answers the leader and forwards proposals; anything
            // else (a vote request, an append) from outside the voters is a misconfigured node
            return Err(RaftError::BadMessage(format!(
                "{:?} from node {}, which is not a voter",
                m.get_msg_type(),
                m.from
            )));
        }
        if self.joining() && m.get_msg_type() == MessageType::MsgAppend && m.index == 0 {
            // no configuration yet: never replay the log from index 1 over it; wait for the
            // leader's snapshot (an append further on is stepped, and rejected, which
            // moves the leader back to index 1 and, once it has compacted, to a snapshot)
            return Ok(());
        }
        match self.raw.step(m) {
            Ok(()) | Err(raft::Error::StepPeerNotFound | raft::Error::StepLocalMsg) => Ok(()),
            Err(e) => Err(raft_err(e)),
        }
    }

    /// Proposes a record; `ProposalDropped` when no leader is known.
    pub fn propose(&mut self, context: Vec<u8>, data: Vec<u8>) -> Result<(), RaftError> {
        self.check()?;
        self.raw.propose(context, data).map_err(|e| match e {
            raft::Error::ProposalDropped => RaftError::NoLeader,
            e => raft_err(e),
        })
    }

    /// Starts an election now (tests, and a node that knows the leader is gone).
    pub fn campaign(&mut self) -> Result<(), RaftError> {
        self.check()?;
        self.raw.campaign().map_err(raft_err)
    }

    /// Asks the leader (this node) to hand leadership to `to` (controlled shutdown).
    pub fn transfer_leader(&mut self, to: u64) {
        self.raw.transfer_leader(to);
    }

    /// On the leader: proposes adding observer `id` as a learner, unless it already is a
    /// member or another configuration change is pending (the caller retries). True if proposed.
    pub fn add_learner(&mut self, id: u64) -> Result<bool, RaftError> {
        self.check()?;
        let conf = self.raw.raft.prs().conf();
        if !self.is_leader()
            || conf.voters().contains(id)
            || conf.learners().contains(&id)
            || self.raw.raft.has_pending_conf()
        {
            return Ok(false);
        }
        let cc = ConfChange { change_type: ConfChangeType::AddLearnerNode, node_id: id, ..Default::default() };
        self.raw.propose_conf_change(Vec::new(), cc).map_err(raft_err)?;
        Ok(true)
    }

    /// On the leader: proposes promoting learner `id` to a voter (`context` travels with the
    /// entry to every node). False if this node does not lead or a change is pending (the
    /// caller retries); an error if `id` is not a learner.
    pub fn add_voter(&mut self, id: u64, context: Vec<u8>) -> Result<bool, RaftError> {
        self.change_membership(ConfChangeType::AddNode, id, context, |voters, learners| {
            if voters.contains(&id) {
                Some(format!("node {id} is already a voter"))
            } else if !learners.contains(&id) {
                Some(format!(
                    "node {id} is not an observer of the metadata log: start it (with \
                              controller.quorum.bootstrap.servers) first"
                ))
            } else {
                None
            }
        })
    }

    /// On the leader: proposes removing voter `id`. False if this node does not lead or a
    /// change is pending; an error if `id` is not a voter or is the last one.
    pub fn remove_voter(&mut self, id: u64, context: Vec<u8>) -> Result<bool, RaftError> {
        self.change_membership(ConfChangeType::RemoveNode, id, context, |voters, _learners| {
            if !voters.contains(&id) {
                Some(format!("node {id} is not a voter"))
            } else if voters.len() == 1 {
                Some(format!("node {id} is the only voter; a quorum cannot remove its last voter"))
            } else {
                None
            }
        })
    }

    /// One voter change, proposed on the leader when no other is pending; `refuse` says why
    /// the change makes no sense for the current (voters, learners), if it does not.
    fn change_membership(
        &mut self,
        change_type: ConfChangeType,
        id: u64,
        context: Vec<u8>,
        refuse: impl FnOnce(&[u64], &[u64]) -> Option<String>,
    ) -> Result<bool, RaftError> {
        self.check()?;
        if !self.is_leader() || self.raw.raft.has_pending_conf() {
            return Ok(false);
        }
        if let Some(why) = refuse(&self.voters(), &self.learners()) {
            return Err(RaftError::Config(why));
        }
        let cc = ConfChange { change_type, node_id: id, ..Default::default() };
        self.raw.propose_conf_change(context, cc).map_err(raft_err)?;
        Ok(true)
    }

    /// The voters of the current configuration, sorted.
    pub fn voters(&self) -> Vec<u64> {
        let mut out: Vec<u64> = self.raw.raft.prs().conf().voters().ids().iter().collect();
        out.sort_unstable();
        out
    }

    /// A node that knows no configuration yet (joining; see the module doc).
    fn joining(&self) -> bool {
        self.raw.raft.prs().conf().voters().ids().is_empty()
    }

    /// The learners (observers) of the current configuration, sorted.
    pub fn learners(&self) -> Vec<u64> {
        let mut out: Vec<u64> = self.raw.raft.prs().conf().learners().iter().copied().collect();
        out.sort_unstable();
        out
    }

    pub fn leader_id(&self) -> u64 {
        self.raw.raft.leader_id
    }

    pub fn term(&self) -> u64 {
        self.raw.raft.term
    }

    pub fn is_leader(&self) -> bool {
        self.raw.raft.state == StateRole::Leader
    }

    pub fn role(&self) -> &'static str {
        match self.raw.raft.state {
            StateRole::Leader => "leader",
            StateRole::Candidate => "candidate",
            StateRole::PreCandidate => "precandidate",
            StateRole::Follower => "follower",
        }
    }

    pub fn commit_index(&self) -> u64 {
        self.raw.raft.raft_log.committed
    }

    pub fn last_index(&self) -> u64 {
        self.raw.raft.raft_log.last_index()
    }

    /// On the leader, each member's (voters and learners) matched log index and whether it was heard from within
    /// the last election timeout (raft-rs's `recent_active`), by node id; empty elsewhere.
    pub fn progress(&self) -> Vec<(u64, u64, bool)> {
        if !self.is_leader() {
            return Vec::new();
        }
        let mut out: Vec<(u64, u64, bool)> =
            self.raw.raft.prs().iter().map(|(id, pr)| (*id, pr.matched, pr.recent_active)).collect();
        out.sort_unstable();
        out
    }

    /// The latest snapshot held (index, term, data): the applied state to start from.
    pub fn stored_snapshot(&self) -> Result<Option<(u64, u64, Vec<u8>)>, RaftError> {
        Ok(self.store.snapshot()?.map(|s| (s.get_metadata().index, s.get_metadata().term, s.data.to_vec())))
    }

    /// Snapshot of the applied state `data` at `index`, dropping the log before it.
    pub fn compact(&mut self, index: u64, data: Vec<u8>) -> Result<(), RaftError> {
        self.check()?;
        if index > self.raw.raft.raft_log.applied {
            return Err(RaftError::Config(format!(
                "cannot snapshot at index {index}: only {} is applied",
                self.raw.raft.raft_log.applied
            )));
        }
        self.store.compact(index, data)
    }

    /// Persists what Raft asks and returns what to send and apply (see the module doc).
    pub fn ready(&mut self) -> Result<ReadyOut, RaftError> {
        self.check()?;
        let mut out = ReadyOut::default();
        if !self.raw.has_ready() {
            return Ok(out);
        }
        match self.ready_inner(&mut out) {
            Ok(()) => Ok(out),
            Err(e) => {
                self.failed = Some(e.to_string());
                Err(e)
            }
        }
    }

    fn ready_inner(&mut self, out: &mut ReadyOut) -> Result<(), RaftError> {
        let mut rd = self.raw.ready();
        encode_messages(rd.take_messages(), &mut out.messages)?;
        if !rd.snapshot().is_empty() {
            let snap: Snapshot = rd.snapshot().clone();
            self.store.apply_snapshot(&snap)?;
            let md = snap.get_metadata();
            out.snapshot = Some((md.index, md.term, snap.data.to_vec()));
        }
        let committed = rd.take_committed_entries();
        self.apply_entries(committed, out)?;
        self.store.append(rd.entries())?;
        if let Some(hs) = rd.hs() {
            self.store.set_hard_state(hs)?;
        }
        // only now, with entries and hard state on disk, may votes and acks leave
        encode_messages(rd.take_persisted_messages(), &mut out.messages)?;
        let mut light = self.raw.advance(rd);
        if let Some(commit) = light.commit_index() {
            self.store.set_commit(commit);
        }
        encode_messages(light.take_messages(), &mut out.messages)?;
        let committed = light.take_committed_entries();
        self.apply_entries(committed, out)?;
        self.raw.advance_apply();
        Ok(())
    }

    fn apply_entries(&mut self, entries: Vec<Entry>, out: &mut ReadyOut) -> Result<(), RaftError> {
        for e in entries {
            let normal = e.get_entry_type() == EntryType::EntryNormal && !e.data.is_empty();
            match e.get_entry_type() {
                EntryType::EntryConfChange => {
                    let cc = ConfChange::parse_from_bytes(&e.data).map_err(|x| RaftError::BadMessage(x.to_string()))?;
                    let cs = self.raw.apply_conf_change(&cc).map_err(raft_err)?;
                    self.store.set_conf_state(cs);
                }
                EntryType::EntryConfChangeV2 => {
                    let cc =
                        ConfChangeV2::parse_from_bytes(&e.data).map_err(|x| RaftError::BadMessage(x.to_string()))?;
                    let cs = self.raw.apply_conf_change(&cc).map_err(raft_err)?;
                    self.store.set_conf_state(cs);
                }
                EntryType::EntryNormal => {}
            }
            out.committed.push(Committed {
                index: e.index,
                term: e.term,
                normal,
                context: e.context.to_vec(),
                data: e.data.to_vec(),
            });
        }
        Ok(())
    }
}

fn encode_messages(msgs: Vec<Message>, out: &mut Vec<(u64, Vec<u8>)>) -> Result<(), RaftError> {
    for m in msgs {
        let to = m.to;
        out.push((to, m.write_to_bytes().map_err(|e| RaftError::Raft(e.to_string()))?));
    }
    Ok(())
}
