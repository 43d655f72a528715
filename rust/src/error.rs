//! `LogError`: the closed set of ways the storage engine can fail.
//!
//! One variant per cause (Redpanda's `parser_errc`, Kafka's exception types). Every message
//! names what a reader of a broker log needs to act on: the topic-partition (`tp`), the offset
//! or byte position, the file, and the values that disagreed. Validators that run without a
//! partition context (e.g. `validate_batches` from Python) leave `tp` empty; the `Log` fills it
//! in with [`LogError::in_partition`] before the error leaves the engine.
//!
//! The Python mapping (one `impl From<LogError> for PyErr`) lives in `py/errors.rs`.

use std::fmt;
use std::io;
use std::path::PathBuf;

/// A topic-partition name for messages; empty when the error arose outside a partition.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tp(pub String);

impl fmt::Display for Tp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            f.write_str("<no partition>")
        } else {
            f.write_str(&self.0)
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// The framing of a batch is broken: bad length, bad magic, truncated, bad record walk.
    #[error("corrupt record batch in {tp} at byte position {position}: {reason}")]
    CorruptBatch { tp: Tp, position: u64, reason: String },

    /// The stored CRC-32C does not match the bytes from `attributes` to the end of the batch.
    #[error(
        "CRC-32C mismatch in {tp} for the batch at byte position {position}: stored {expected:#010x}, computed {computed:#010x}"
    )]
    CrcMismatch { tp: Tp, position: u64, expected: u32, computed: u32 },

    /// A batch larger than `message.max.bytes`, or a request larger than `segment.bytes`.
    #[error("record batch of {size} bytes in {tp} exceeds {limit} = {max}")]
    RecordTooLarge { tp: Tp, size: u64, max: u64, limit: &'static str },

    /// The bytes are well framed but break a rule of what a producer or follower may send.
    /// `records`: each record at fault (its index in the batch, and why), where the rule is
    /// about records (a keyless record on a compacted topic), for Produce's RecordErrors (KIP-467).
    #[error("invalid record batch in {tp} at byte position {position}: {reason}")]
    InvalidRecord { tp: Tp, position: u64, reason: String, records: Vec<(i32, String)> },

    /// A fetch or truncation offset outside `[log_start, log_end]`.
    #[error("offset {offset} is out of range for {tp}: log start offset {log_start}, log end offset {log_end}")]
    OffsetOutOfRange { tp: Tp, offset: i64, log_start: i64, log_end: i64 },

    /// An idempotent producer's sequence does not continue its last batch.
    #[error(
        "out of order sequence number for producer {producer_id} (epoch {epoch}) in {tp}: expected {expected}, received {received}"
    )]
    OutOfOrderSequence { tp: Tp, producer_id: i64, epoch: i16, expected: i32, received: i32 },

    /// A producer epoch lower than the one already seen: a zombie producer is fenced.
    #[error("producer {producer_id} in {tp} has epoch {received}, which is older than the current epoch {current}")]
    InvalidProducerEpoch { tp: Tp, producer_id: i64, current: i16, received: i16 },

    /// A producer's batch that does not fit its transaction state: a non-transactional batch
    /// while its transaction is open (Kafka's InvalidTxnStateException).
    #[error("invalid transaction state for producer {producer_id} in {tp}: {reason}")]
    InvalidTxnState { tp: Tp, producer_id: i64, reason: String },

    /// A transaction marker from a coordinator older than the one that last wrote one for
    /// this producer (a stale coordinator after a failover).
    #[error(
        "transaction marker for producer {producer_id} in {tp} comes from coordinator epoch {received}, older than {current}"
    )]
    CoordinatorFenced { tp: Tp, producer_id: i64, current: i32, received: i32 },

    /// A follower append whose offsets go backwards (below the LEO or the previous batch's
    /// end). Gaps are fine: a compacted leader's log has them.
    #[error("follower append to {tp} goes backwards: expected base offset {expected} or above, got {received}")]
    NonContiguousAppend { tp: Tp, expected: i64, received: i64 },

    /// An index or checkpoint file that fails its sanity check.
    #[error("corrupt index or checkpoint file {}: {reason}", path.display())]
    CorruptIndex { path: PathBuf, reason: String },

    /// A configuration key with a value that cannot be parsed or is out of range.
    #[error("invalid configuration {key} = {value:?}: {reason}")]
    InvalidConfig { key: String, value: String, reason: String },

    /// Any I/O failure, with the file it happened on (ENOSPC lands here too).
    #[error("I/O error in {tp} on {}: {source}", path.display())]
    Io {
        tp: Tp,
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    /// Opening a file failed with EMFILE or ENFILE: the process (or the system) is out of
    /// file descriptors. Kept apart from `Io` so the message says what to do.
    #[error("cannot open {} for {tp}: too many open files (raise the open files limit, RLIMIT_NOFILE): {source}", path.display())]
    TooManyOpenFiles {
        tp: Tp,
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    /// The log was closed (or deleted) and cannot serve the call.
    #[error("log {tp} in {} is closed", dir.display())]
    Closed { tp: Tp, dir: PathBuf },
}

impl LogError {
    /// Builds an `Io` error for `path` without partition context (filled in by the `Log`);
    /// EMFILE and ENFILE become `TooManyOpenFiles`.
    pub fn io(path: impl Into<PathBuf>, source: io::Error) -> Self {
        if matches!(source.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) {
            return LogError::TooManyOpenFiles { tp: Tp::default(), path: path.into(), source };
        }
        LogError::Io { tp: Tp::default(), path: path.into(), source }
    }

    pub fn corrupt(position: u64, reason: impl Into<String>) -> Self {
        LogError::CorruptBatch { tp: Tp::default(), position, reason: reason.into() }
    }

    pub fn invalid(position: u64, reason: impl Into<String>) -> Self {
        LogError::InvalidRecord { tp: Tp::default(), position, reason: reason.into(), records: Vec::new() }
    }

    /// An invalid batch because of some of its records: `records` are their indexes in the
    /// batch, each with why.
    pub fn invalid_records(position: u64, reason: impl Into<String>, records: Vec<(i32, String)>) -> Self {
        LogError::InvalidRecord { tp: Tp::default(), position, reason: reason.into(), records }
    }

    pub fn config(key: &str, value: &str, reason: impl Into<String>) -> Self {
        LogError::InvalidConfig { key: key.to_owned(), value: value.to_owned(), reason: reason.into() }
    }

    /// Fills in the topic-partition name where the error has none yet.
    #[must_use]
    pub fn in_partition(mut self, name: &str) -> Self {
        match &mut self {
            LogError::CorruptBatch { tp, .. }
            | LogError::CrcMismatch { tp, .. }
            | LogError::RecordTooLarge { tp, .. }
            | LogError::InvalidRecord { tp, .. }
            | LogError::OffsetOutOfRange { tp, .. }
            | LogError::OutOfOrderSequence { tp, .. }
            | LogError::InvalidProducerEpoch { tp, .. }
            | LogError::InvalidTxnState { tp, .. }
            | LogError::CoordinatorFenced { tp, .. }
            | LogError::NonContiguousAppend { tp, .. }
            | LogError::Io { tp, .. }
            | LogError::TooManyOpenFiles { tp, .. }
            | LogError::Closed { tp, .. } => {
                if tp.0.is_empty() {
                    name.clone_into(&mut tp.0);
                }
            }
            LogError::CorruptIndex { .. } | LogError::InvalidConfig { .. } => {}
        }
        self
    }

    /// True for errors that describe the bytes of a batch (as opposed to I/O or state).
    pub fn is_batch_error(&self) -> bool {
        matches!(self, LogError::CorruptBatch { .. } | LogError::CrcMismatch { .. } | LogError::InvalidRecord { .. })
    }
}

pub type Result<T, E = LogError> = std::result::Result<T, E>;

/// `io::Result` → `Result` with the path attached: `file.read_at(..).ctx(&path)?`.
pub trait IoContext<T> {
    fn ctx(self, path: &std::path::Path) -> Result<T>;
}

impl<T> IoContext<T> for io::Result<T> {
    fn ctx(self, path: &std::path::Path) -> Result<T> {
        self.map_err(|e| LogError::io(path, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_partition_and_values() {
        let e = LogError::OffsetOutOfRange { tp: Tp::default(), offset: 7, log_start: 10, log_end: 20 }
            .in_partition("orders-3");
        let s = e.to_string();
        assert!(s.contains("orders-3") && s.contains('7') && s.contains("10") && s.contains("20"), "{s}");
        let e = LogError::CrcMismatch { tp: Tp::default(), position: 61, expected: 1, computed: 2 };
        assert!(e.to_string().contains("<no partition>"));
        assert!(e.is_batch_error());
    }

    #[test]
    fn descriptor_shortage_names_partition_file_and_limit() {
        for errno in [libc::EMFILE, libc::ENFILE] {
            let e = LogError::io("/data/orders-3/00000000000000000000.log", io::Error::from_raw_os_error(errno))
                .in_partition("orders-3");
            assert!(matches!(e, LogError::TooManyOpenFiles { .. }), "{e:?}");
            let s = e.to_string();
            assert!(s.contains("orders-3") && s.contains("/data/orders-3/00000000000000000000.log"), "{s}");
            assert!(s.contains("too many open files (raise the open files limit, RLIMIT_NOFILE)"), "{s}");
        }
        let e = LogError::io("/x", io::Error::from_raw_os_error(libc::ENOSPC));
        assert!(matches!(e, LogError::Io { .. }));
    }

    #[test]
    fn in_partition_keeps_existing_name() {
        let e = LogError::corrupt(0, "x").in_partition("a-0").in_partition("b-1");
        assert!(e.to_string().contains("a-0"));
    }
}
