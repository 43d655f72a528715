//! `RemoteError`: how tiered storage fails. Messages name the object key (never the
//! store's credentials: a store is shown by its URL without user info or query).

use crate::error::LogError;

#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    /// The store's URL or options are not usable.
    #[error("remote storage {url}: {reason}")]
    Config { url: String, reason: String },

    /// The object store failed (unreachable, refused, timed out).
    #[error("remote storage: {op} {key} failed: {reason}")]
    Store { op: &'static str, key: String, reason: String },

    /// An object that the metadata names is not in the store.
    #[error("remote storage: object {key} is missing")]
    NotFound { key: String },

    /// An object's bytes are not what they should be (a wrong size, a bad CRC, a bad index).
    #[error("remote storage: object {key} is corrupt: {reason}")]
    Corrupt { key: String, reason: String },

    /// Reading the local segment to copy failed.
    #[error(transparent)]
    Log(#[from] LogError),
}

impl RemoteError {
    pub(crate) fn store(op: &'static str, key: &str, e: &object_store::Error) -> RemoteError {
        match e {
            object_store::Error::NotFound { .. } => RemoteError::NotFound { key: key.to_owned() },
            _ => RemoteError::Store { op, key: key.to_owned(), reason: e.to_string() },
        }
    }
}

pub type Result<T> = std::result::Result<T, RemoteError>;
