//! The controller quorum's consensus core: TiKV's raft-rs (crate `raft`), which is sans I/O,
//! over a durable Raft log and hard state of our own (`storage.rs`), exposed as one voter
//! (`node.rs`) that the control plane drives from trio: the tick timer, the network between
//! controllers, and applying committed records to the metadata image
//! (`python/logbroker/coord/metadata/quorum.py`). No consensus logic is written here: elections, log
//! matching and commitment are raft-rs's; this module only makes its state durable in the
//! order Raft requires and moves bytes in and out.
use std::path::PathBuf;

pub mod node;
pub mod storage;

/// One error type for the quorum subsystem.
#[derive(Debug, thiserror::Error)]
pub enum RaftError {
    #[error("metadata log: {what} {}: {source}", path.display())]
    Io { path: PathBuf, what: String, source: std::io::Error },
    #[error("metadata log: {} is corrupt ({what})", path.display())]
    Corrupt { path: PathBuf, what: String },
    #[error("controller quorum configuration: {0}")]
    Config(String),
    #[error("a Raft message that does not decode: {0}")]
    BadMessage(String),
    #[error("no controller leader is known yet")]
    NoLeader,
    #[error("raft: {0}")]
    Raft(String),
    #[error("this quorum node stopped after a failure and must be restarted: {0}")]
    Failed(String),
}
