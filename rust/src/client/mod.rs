//! The client engine: the parts of the Python Producer and Consumer whose per-record cost
//! decides throughput, kept free of pyo3 (bound in `py/client.rs`).
//!
//! - `murmur2.rs`: Kafka's key hash and the default keyed partition choice;
//! - `accumulator.rs`: per-partition batch builders the producer appends records to, and the
//!   drain that hands back closed batches (with the uniform sticky choice for unkeyed records);
//! - `buffer_pool.rs`: warm, reused buffers for fetched data (no page faults per fetch);
//! - `records.rs`: the consumer's fetch decoder (framing, CRC-32C, decompression, control
//!   batches, aborted transactions) that yields records in bulk;
//! - `waker.rs`: the self-pipe an appending thread uses to wake the I/O loop (a selector in
//!   the sync client's thread, `trio.lowlevel.wait_readable` in `logbroker.aio`).
//!
//! None of these do network I/O: the Python sans-I/O core and its two drivers do.

pub mod accumulator;
pub mod buffer_pool;
pub mod error;
pub mod murmur2;
pub mod records;
pub mod waker;
