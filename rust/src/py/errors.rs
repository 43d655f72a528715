//! The exception hierarchy of `logbroker._core` and the one `LogError` → `PyErr` conversion.
//!
//! ```text
//! LogBrokerError(Exception)
//! ├── CorruptRecordError         CorruptBatch, CrcMismatch
//! ├── RecordTooLargeError        RecordTooLarge
//! ├── InvalidRecordError         InvalidRecord, NonContiguousAppend
//! ├── OffsetOutOfRangeError      OffsetOutOfRange
//! ├── OutOfOrderSequenceError    OutOfOrderSequence
//! ├── InvalidProducerEpochError  InvalidProducerEpoch
//! ├── InvalidTxnStateError       InvalidTxnState
//! ├── CoordinatorFencedError     CoordinatorFenced
//! ├── KafkaStorageError          Io (incl. ENOSPC), TooManyOpenFiles, CorruptIndex, Closed
//! └── InvalidConfigError         InvalidConfig
//! RaftError(Exception)            raft::RaftError (the controller quorum's state)
//! └── NoLeaderError               RaftError::NoLeader
//! RemoteStorageError(Exception)   remote::RemoteError (tiered storage: the store, its objects)
//! └── RemoteObjectNotFoundError    RemoteError::NotFound
//! TableDataFileError(Exception)   table::TableError (an Iceberg topic's data files: the
//!                                 table's schema or settings, a file that cannot be written)
//! KafkaProtocolError(ValueError)  protocol::ProtocolError (a frame that does not decode,
//!                                 a message that cannot be encoded)
//! ```
//! `args[0]` is the engine's message (topic-partition, offset, file, values). I/O errors stay
//! `KafkaStorageError` whatever their `io::ErrorKind`, so the broker catches one base class
//! for every storage failure (Kafka answers all of them with KAFKA_STORAGE_ERROR); the OS
//! error number is kept as the `errno` attribute.
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyValueError};
use pyo3::prelude::*;

use crate::error::LogError;
use crate::protocol::ProtocolError;
use crate::remote::RemoteError;
use crate::table::TableError;

create_exception!(logbroker._core, LogBrokerError, PyException, "Base class of every storage-engine error.");
create_exception!(
    logbroker._core,
    CorruptRecordError,
    LogBrokerError,
    "A record batch is torn, mis-framed or fails its CRC."
);
create_exception!(
    logbroker._core,
    RecordTooLargeError,
    LogBrokerError,
    "A batch exceeds message.max.bytes (or a request exceeds segment.bytes)."
);
create_exception!(
    logbroker._core,
    InvalidRecordError,
    LogBrokerError,
    "A well-framed batch breaks a rule (offset deltas, empty batch, codec, contiguity)."
);
create_exception!(
    logbroker._core,
    OffsetOutOfRangeError,
    LogBrokerError,
    "An offset outside [log start offset, log end offset]."
);
create_exception!(
    logbroker._core,
    OutOfOrderSequenceError,
    LogBrokerError,
    "An idempotent producer's sequence number does not continue its last batch."
);
create_exception!(
    logbroker._core,
    InvalidProducerEpochError,
    LogBrokerError,
    "A producer epoch older than the current one (fenced)."
);
create_exception!(
    logbroker._core,
    InvalidTxnStateError,
    LogBrokerError,
    "A producer's batch that does not fit its open (or missing) transaction."
);
create_exception!(
    logbroker._core,
    CoordinatorFencedError,
    LogBrokerError,
    "A transaction marker from an older transaction coordinator epoch."
);
create_exception!(
    logbroker._core,
    KafkaStorageError,
    LogBrokerError,
    "An I/O failure (including a full disk), a corrupt index or checkpoint, or a closed log."
);
create_exception!(
    logbroker._core,
    InvalidConfigError,
    LogBrokerError,
    "A configuration key with a bad value, or an unknown key."
);

create_exception!(
    logbroker._core,
    RaftError,
    PyException,
    "The controller quorum's Raft state: a metadata-log I/O failure or corruption, a bad configuration or message."
);
create_exception!(
    logbroker._core,
    NoLeaderError,
    RaftError,
    "A proposal while no controller leader is known (retry after an election)."
);

create_exception!(
    logbroker._core,
    KafkaProtocolError,
    PyValueError,
    "A Kafka protocol frame that does not decode, or a message that cannot be encoded."
);

create_exception!(
    logbroker._core,
    RemoteStorageError,
    PyException,
    "Tiered storage: the object store failed or refused, an object is corrupt, or its URL is unusable."
);
create_exception!(
    logbroker._core,
    RemoteObjectNotFoundError,
    RemoteStorageError,
    "Tiered storage: an object the metadata names is not in the store."
);

impl From<RemoteError> for PyErr {
    fn from(e: RemoteError) -> PyErr {
        match e {
            RemoteError::Log(e) => e.into(),
            RemoteError::NotFound { .. } => RemoteObjectNotFoundError::new_err(e.to_string()),
            _ => RemoteStorageError::new_err(e.to_string()),
        }
    }
}

create_exception!(
    logbroker._core,
    TableDataFileError,
    PyException,
    "An Iceberg topic's data files: the table's schema or writer settings, or a file that cannot be written."
);

impl From<TableError> for PyErr {
    fn from(e: TableError) -> PyErr {
        match e {
            TableError::Log(e) => e.into(),
            _ => TableDataFileError::new_err(e.to_string()),
        }
    }
}

impl From<ProtocolError> for PyErr {
    fn from(e: ProtocolError) -> PyErr {
        KafkaProtocolError::new_err(e.0)
    }
}

impl From<LogError> for PyErr {
    fn from(e: LogError) -> PyErr {
        let msg = e.to_string();
        match e {
            LogError::CorruptBatch { .. } | LogError::CrcMismatch { .. } => CorruptRecordError::new_err(msg),
            LogError::RecordTooLarge { .. } => RecordTooLargeError::new_err(msg),
            LogError::InvalidRecord { .. } | LogError::NonContiguousAppend { .. } => InvalidRecordError::new_err(msg),
            LogError::OffsetOutOfRange { .. } => OffsetOutOfRangeError::new_err(msg),
            LogError::OutOfOrderSequence { .. } => OutOfOrderSequenceError::new_err(msg),
            LogError::InvalidProducerEpoch { .. } => InvalidProducerEpochError::new_err(msg),
            LogError::InvalidTxnState { .. } => InvalidTxnStateError::new_err(msg),
            LogError::CoordinatorFenced { .. } => CoordinatorFencedError::new_err(msg),
            LogError::InvalidConfig { .. } => InvalidConfigError::new_err(msg),
            LogError::Io { source, .. } | LogError::TooManyOpenFiles { source, .. } => {
                let err = KafkaStorageError::new_err(msg);
                if let Some(code) = source.raw_os_error() {
                    Python::attach(|py| {
                        let _ = err.value(py).setattr("errno", code);
                    });
                }
                err
            }
            LogError::CorruptIndex { .. } | LogError::Closed { .. } => KafkaStorageError::new_err(msg),
        }
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("LogBrokerError", py.get_type::<LogBrokerError>())?;
    m.add("CorruptRecordError", py.get_type::<CorruptRecordError>())?;
    m.add("RecordTooLargeError", py.get_type::<RecordTooLargeError>())?;
    m.add("InvalidRecordError", py.get_type::<InvalidRecordError>())?;
    m.add("OffsetOutOfRangeError", py.get_type::<OffsetOutOfRangeError>())?;
    m.add("OutOfOrderSequenceError", py.get_type::<OutOfOrderSequenceError>())?;
    m.add("InvalidProducerEpochError", py.get_type::<InvalidProducerEpochError>())?;
    m.add("InvalidTxnStateError", py.get_type::<InvalidTxnStateError>())?;
    m.add("CoordinatorFencedError", py.get_type::<CoordinatorFencedError>())?;
    m.add("KafkaStorageError", py.get_type::<KafkaStorageError>())?;
    m.add("InvalidConfigError", py.get_type::<InvalidConfigError>())?;
    m.add("KafkaProtocolError", py.get_type::<KafkaProtocolError>())?;
    m.add("RaftError", py.get_type::<RaftError>())?;
    m.add("RemoteStorageError", py.get_type::<RemoteStorageError>())?;
    m.add("RemoteObjectNotFoundError", py.get_type::<RemoteObjectNotFoundError>())?;
    m.add("TableDataFileError", py.get_type::<TableDataFileError>())?;
    m.add("NoLeaderError", py.get_type::<NoLeaderError>())?;
    Ok(())
}
