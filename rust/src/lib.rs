//! logbroker's native core, exposed to Python as `logbroker._core`.
//!
//! This file is a table of contents: engine modules never import pyo3; every
//! `#[pyclass]`/`#[pyfunction]` lives under `py/`.

// Engine: record batches.
pub mod avro_columns;
pub mod avro_encode;
pub mod batch;
pub mod builder;
pub mod calendar;
pub mod columnar;
pub mod compression;
pub mod json_columns;
pub mod json_encode;
pub mod proto_columns;
pub mod proto_encode;
pub mod registry_encode;
pub mod registry_types;
pub mod share_records;
pub mod varint;

// Engine: storage.
pub mod cleaner;
pub mod config;
#[rustfmt::skip] // generated (tools/gen_*.py): the generator's layout, checked byte for byte
pub mod config_keys;
pub mod error;
pub mod file_region;
pub mod index_file;
pub mod leader_epoch_cache;
pub mod log;
pub mod offset_checkpoint;
pub mod offset_index;
pub mod open_log_files;
pub mod producer_state;
pub mod recovery;
pub mod segment;
pub mod time_index;

// Tiered storage: segments copied to and read from an object store.
pub mod remote;

// Iceberg topics: a log range written as Parquet data files
pub mod table;

// The Kafka protocol codec, generated from the message specs.
pub mod protocol;

// The controller quorum: raft-rs over a durable Raft log (sans I/O, driven from trio).
pub mod raft;

// JWS signatures of OAUTHBEARER tokens (ring).
pub mod jws;

// The broker's network layer: listener, connections, frames, responses.
pub mod server;

// Engine: the Python client's producer accumulator and fetch decoder.
pub mod client;

// The only module allowed `unsafe` (sendfile, write on raw fds).
pub mod sys;

// The pyo3 binding layer.
pub mod py;

use pyo3::prelude::*;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    py::register(m)
}

// The engine's model, crash-recovery, fuzz and descriptor tests (rust/tests/) are modules of
// the unit-test harness, not integration-test targets: each such target would need the crate
// compiled a second time, as an rlib, which cost `cargo test` more CPU than everything it
// runs (docs/packaging.md). They use the crate's public API only.
#[cfg(test)]
#[path = "../tests/compaction.rs"]
mod compaction_tests;
#[cfg(test)]
#[path = "../tests/crash_recovery.rs"]
mod crash_recovery_tests;
#[cfg(test)]
#[path = "../tests/descriptors.rs"]
mod descriptors_tests;
#[cfg(test)]
#[path = "../tests/fd_limit.rs"]
mod fd_limit_tests;
#[cfg(test)]
#[path = "../tests/fuzz_batch.rs"]
mod fuzz_batch_tests;
#[cfg(test)]
#[path = "../tests/log_model.rs"]
mod log_model_tests;
