//! `RaftNode`: one controller-quorum voter (rust/src/raft) for the trio driver in
//! `logbroker.coord.metadata.quorum`. Calls that write to disk (`ready`, `compact`) release the GIL.
use std::sync::Mutex;

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use super::errors::{NoLeaderError, RaftError as PyRaftError};
use crate::raft::node::{NodeConfig, QuorumNode};
use crate::raft::RaftError;

impl From<RaftError> for PyErr {
    fn from(e: RaftError) -> PyErr {
        match e {
            RaftError::NoLeader => NoLeaderError::new_err(e.to_string()),
            e => PyRaftError::new_err(e.to_string()),
        }
    }
}

type Ready<'py> = (
    Vec<(u64, Bound<'py, PyBytes>)>,
    Option<(u64, u64, Bound<'py, PyBytes>)>,
    Vec<(u64, u64, bool, Bound<'py, PyBytes>, Bound<'py, PyBytes>)>,
);

#[pyclass(name = "RaftNode", module = "logbroker._core", frozen)]
pub struct PyRaftNode {
    id: u64,
    node: Mutex<QuorumNode>,
}

impl PyRaftNode {
    /// Runs `f` on the node, the GIL released: `ready` and `compact` hold the node's lock
    /// across fsyncs, and a query waiting for it must not stop every Python thread.
    fn with<T: Send>(&self, py: Python<'_>, f: impl Send + FnOnce(&mut QuorumNode) -> T) -> T {
        py.detach(|| {
            let mut g = self.node.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            f(&mut g)
        })
    }
}

#[pymethods]
impl PyRaftNode {
    #[new]
    #[pyo3(signature = (node_id, voters, directory, election_tick = 10, heartbeat_tick = 2, observer = false))]
    fn new(
        py: Python<'_>,
        node_id: u64,
        voters: Vec<u64>,
        directory: std::path::PathBuf,
        election_tick: usize,
        heartbeat_tick: usize,
        observer: bool,
    ) -> PyResult<Self> {
        let cfg = NodeConfig { id: node_id, voters, observer, election_tick, heartbeat_tick };
        let node = py.detach(|| QuorumNode::open(&directory, &cfg))?;
        Ok(PyRaftNode { id: node_id, node: Mutex::new(node) })
    }

    #[getter]
    fn node_id(&self) -> u64 {
        self.id
    }

    /// One tick of the election/heartbeat clock; true if `ready()` has work.
    fn tick(&self, py: Python<'_>) -> PyResult<bool> {
        Ok(self.with(py, QuorumNode::tick)?)
    }

    /// A Raft message a peer sent.
    fn step(&self, py: Python<'_>, msg: &[u8]) -> PyResult<()> {
        Ok(self.with(py, |n| n.step(msg))?)
    }

    /// Appends a record through Raft; raises NoLeaderError when no leader is known.
    fn propose(&self, py: Python<'_>, context: Vec<u8>, data: Vec<u8>) -> PyResult<()> {
        Ok(self.with(py, |n| n.propose(context, data))?)
    }

    fn campaign(&self, py: Python<'_>) -> PyResult<()> {
        Ok(self.with(py, QuorumNode::campaign)?)
    }

    fn transfer_leader(&self, py: Python<'_>, to: u64) {
        self.with(py, |n| n.transfer_leader(to));
    }

    /// On the leader: propose observer `node_id` as a learner; False if it is a member
    /// already, a change is pending or this node does not lead.
    fn add_learner(&self, py: Python<'_>, node_id: u64) -> PyResult<bool> {
        Ok(self.with(py, |n| n.add_learner(node_id))?)
    }

    /// On the leader: propose promoting learner `node_id` to a voter (`context` reaches every
    /// node with the committed change); False if this node does not lead or a change is
    /// pending; RaftError if it is not a learner or already a voter.
    fn add_voter(&self, py: Python<'_>, node_id: u64, context: Vec<u8>) -> PyResult<bool> {
        Ok(self.with(py, |n| n.add_voter(node_id, context))?)
    }

    /// On the leader: propose removing voter `node_id`; False as for `add_voter`; RaftError
    /// if it is not a voter or the last one.
    fn remove_voter(&self, py: Python<'_>, node_id: u64, context: Vec<u8>) -> PyResult<bool> {
        Ok(self.with(py, |n| n.remove_voter(node_id, context))?)
    }

    /// The voters of the current configuration.
    #[getter]
    fn voters(&self, py: Python<'_>) -> Vec<u64> {
        self.with(py, |n| n.voters())
    }

    /// The observers (learners) of the current configuration.
    #[getter]
    fn learners(&self, py: Python<'_>) -> Vec<u64> {
        self.with(py, |n| n.learners())
    }

    /// Persists (fsync) and returns `(messages, snapshot, committed)`: messages as
    /// `[(peer id, bytes)]`, a snapshot to install first as `(index, term, data)` or None,
    /// committed entries as `[(index, term, normal, context, data)]`.
    fn ready<'py>(&self, py: Python<'py>) -> PyResult<Ready<'py>> {
        let out = self.with(py, QuorumNode::ready)?;
        let messages = out.messages.into_iter().map(|(to, m)| (to, PyBytes::new(py, &m))).collect();
        let snapshot = out.snapshot.map(|(i, t, d)| (i, t, PyBytes::new(py, &d)));
        let committed = out
            .committed
            .into_iter()
            .map(|c| (c.index, c.term, c.normal, PyBytes::new(py, &c.context), PyBytes::new(py, &c.data)))
            .collect();
        Ok((messages, snapshot, committed))
    }

    /// Snapshot of the applied metadata image `data` at `index`; drops the log before it.
    fn compact(&self, py: Python<'_>, index: u64, data: Vec<u8>) -> PyResult<()> {
        Ok(self.with(py, |n| n.compact(index, data))?)
    }

    #[getter]
    fn leader_id(&self, py: Python<'_>) -> u64 {
        self.with(py, |n| n.leader_id())
    }

    #[getter]
    fn term(&self, py: Python<'_>) -> u64 {
        self.with(py, |n| n.term())
    }

    #[getter]
    fn role(&self, py: Python<'_>) -> &'static str {
        self.with(py, |n| n.role())
    }

    #[getter]
    fn commit_index(&self, py: Python<'_>) -> u64 {
        self.with(py, |n| n.commit_index())
    }

    #[getter]
    fn last_index(&self, py: Python<'_>) -> u64 {
        self.with(py, |n| n.last_index())
    }

    /// The latest snapshot held, `(index, term, data)`, or None: the state to start from.
    fn stored_snapshot<'py>(&self, py: Python<'py>) -> PyResult<Option<(u64, u64, Bound<'py, PyBytes>)>> {
        let snap = self.with(py, |n| n.stored_snapshot())?;
        Ok(snap.map(|(i, t, d)| (i, t, PyBytes::new(py, &d))))
    }

    /// On the leader: `[(node_id, matched_index, recently_active)]` for every voter and learner; `[]` elsewhere.
    fn progress(&self, py: Python<'_>) -> Vec<(u64, u64, bool)> {
        self.with(py, |n| n.progress())
    }
}
