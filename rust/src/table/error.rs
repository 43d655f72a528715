//! `TableError`: how writing an Iceberg topic's data files fails. Messages name the topic,
//! partition, offsets and file involved.

use crate::error::LogError;

#[derive(Debug, thiserror::Error)]
pub enum TableError {
    /// The table's schema or writer properties cannot be written as asked (a column the
    /// writer does not know, a codec Parquet lacks).
    #[error("table data files: {0}")]
    Config(String),

    /// Encoding or writing a data file failed.
    #[error("table data file {path}: {reason}")]
    Write { path: String, reason: String },

    /// The decoded columns do not fit the table's schema (a bug, or a schema that changed
    /// under the writer).
    #[error("{topic}-{partition} offsets {first}..{last}: {reason}")]
    Columns { topic: String, partition: i32, first: i64, last: i64, reason: String },

    /// Reading or decoding the log failed (I/O, CRC, a batch that does not parse).
    #[error(transparent)]
    Log(#[from] LogError),
}

pub type Result<T> = std::result::Result<T, TableError>;
