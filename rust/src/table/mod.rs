//! Iceberg topics' data files, written by the broker (python/logbroker/iceberg has the
//! table, its position and the exactly-once argument; this is the per-byte part).
//!
//! A commit hands [`DataFiles`] each partition's offset range; the log is read and decoded
//! in Rust (`columnar`, and `avro_columns` for value columns), the columns become Arrow
//! arrays without a copy of the record bytes (`record_arrays`), and Parquet files are
//! written one per day partition (`data_files`). Python then reads each file's footer for
//! the table's statistics and commits the files with the table's new position.
//!
//! When the table is the topic's tier (`remote.storage.enable`), a Fetch below the local log
//! start reads the data files back as record batches (`tier_reader`).
pub mod data_files;
pub mod dead_letters;
pub mod error;
pub mod key_index;
pub mod partition_spec;
pub mod record_arrays;
pub mod tier_reader;

pub use data_files::{DataFiles, FileSettings, Location, LogWrite, ValueDecoding, WrittenFile};
pub use error::TableError;
pub use key_index::KeyIndex;

#[cfg(test)]
mod data_files_tests;
#[cfg(test)]
mod tier_reader_tests;
#[cfg(test)]
mod upsert_tests;
