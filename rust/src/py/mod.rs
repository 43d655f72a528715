//! The pyo3 binding layer: the only place that knows about Python.
//!
//! - `errors.rs`: the exception hierarchy and the single `LogError` → `PyErr` conversion;
//! - `gil.rs`: the single GIL-release helper (`enter_core`);
//! - `log.rs`: `Log`, `AppendResult`, `CompactionResult`, `FileRegion`;
//! - `client.rs`: the Python client's accumulator, futures, fetch decoder and records;
//! - `functions.rs`: checkpoint files, `crc32c`, `jws_verify`, `validate_batches`, `encode_batch`;
//! - `columnar.rs`: `decode_columns` (record batches to Arrow-layout buffers) and
//!   `decode_registry_values` (Confluent-framed Avro, JSON Schema and Protobuf values to
//!   Arrow columns, for the Spark source) and `encode_registry_values` (struct rows to framed
//!   Avro, for the Spark sink);
//! - `protocol.rs`: the Kafka codec for Python (`protocol_decode`, `protocol_encode`,
//!   `protocol_encode_frame`) and the value conversions; `messages.rs` (generated) applies
//!   them to every message struct;
//! - `remote.rs`: `RemoteStorage` (tiered storage's object store, copies and reads);
//! - `raft.rs`: `RaftNode` (one controller-quorum voter, rust/src/raft);
//! - `server.rs`: `NetworkServer` (the Rust network layer the broker serves requests through).
//!
//! The signatures are mirrored in `python/logbroker/_core.pyi`.

use pyo3::prelude::*;

mod client;
mod columnar;
mod errors;
mod functions;
mod gil;
mod log;
#[rustfmt::skip] // generated (tools/gen_*.py): the generator's layout, checked byte for byte
mod messages;
mod protocol;
mod raft;
mod remote;
mod replication;
mod server;
mod table;

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    errors::register(m)?;
    m.add_class::<log::PyLog>()?;
    m.add_class::<log::PyAppendResult>()?;
    m.add_class::<log::PyCompactionResult>()?;
    m.add_class::<log::PyFileRegion>()?;
    m.add_function(wrap_pyfunction!(log::roll_and_flush, m)?)?;
    m.add_function(wrap_pyfunction!(functions::write_offset_checkpoint, m)?)?;
    m.add_function(wrap_pyfunction!(functions::read_offset_checkpoint, m)?)?;
    m.add_function(wrap_pyfunction!(functions::sync_filesystem, m)?)?;
    m.add_function(wrap_pyfunction!(functions::crc32c, m)?)?;
    m.add_function(wrap_pyfunction!(functions::share_record_facts, m)?)?;
    m.add_function(wrap_pyfunction!(functions::jws_verify, m)?)?;
    m.add_function(wrap_pyfunction!(functions::decompress, m)?)?;
    m.add_function(wrap_pyfunction!(functions::validate_batches, m)?)?;
    m.add_function(wrap_pyfunction!(functions::encode_batch, m)?)?;
    client::register(m)?;
    m.add_function(wrap_pyfunction!(columnar::decode_columns, m)?)?;
    m.add_function(wrap_pyfunction!(columnar::decode_registry_values, m)?)?;
    m.add_function(wrap_pyfunction!(columnar::encode_registry_values, m)?)?;
    m.add_function(wrap_pyfunction!(protocol::protocol_reencode, m)?)?;
    m.add_function(wrap_pyfunction!(protocol::protocol_decode, m)?)?;
    m.add_function(wrap_pyfunction!(protocol::protocol_encode, m)?)?;
    m.add_function(wrap_pyfunction!(protocol::protocol_encode_frame, m)?)?;
    m.add_class::<raft::PyRaftNode>()?;
    m.add_class::<server::PyNetworkServer>()?;
    m.add_class::<server::PyPartitionTable>()?;
    m.add_class::<server::PyAuthorizer>()?;
    m.add_class::<server::PyClientQuotas>()?;
    m.add_class::<server::PyReplicaPartition>()?;
    m.add_function(wrap_pyfunction!(server::data_path_apis, m)?)?;
    m.add_function(wrap_pyfunction!(server::certificate_principal, m)?)?;
    m.add_class::<replication::PyReplicaFetcherManager>()?;
    m.add_class::<remote::PyRemoteStorage>()?;
    m.add_class::<table::PyTableDataFiles>()?;
    m.add_class::<table::PyTableKeyIndex>()?;
    Ok(())
}
