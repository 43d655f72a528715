//! Tiered storage (Kafka's KIP-405): rolled segments copied to an object store and read
//! back from it, built in (no plugin), through the `object_store` crate.
//!
//! # Objects
//! A store is named by a URL (`s3://bucket/prefix`, `gs://…`, `az://…`, `file:///dir`);
//! every object of a partition lives under `<prefix>/<topic>-<topic id>/<partition>/`, and
//! each copied segment is six objects named by its file's base offset and its segment id
//! (a UUID chosen by the copy, so a copy cut by a crash and its retry never share a key):
//! ```text
//! 00000000000000001234-<segment id>.log              the segment file, byte for byte
//! 00000000000000001234-<segment id>.index            offset index (offset_index.rs format)
//! 00000000000000001234-<segment id>.timeindex        time index (time_index.rs format)
//! 00000000000000001234-<segment id>.txnindex         aborted transactions, Kafka's format: per
//!                                                    entry version i16 (0), producer id i64, first
//!                                                    offset i64, last offset i64, LSO i64 (34 bytes)
//! 00000000000000001234-<segment id>.snapshot         producer state at the copy (producer_state.rs)
//! 00000000000000001234-<segment id>.leader-epoch-checkpoint  the epochs the segment covers
//! ```
//! The `.log` is uploaded last but one and the epoch checkpoint last; what says a segment
//! is readable is its COPY_SEGMENT_FINISHED record in the metadata log (written by the
//! control plane once `upload::copy_segment` returned), never the objects' presence.
//!
//! # Reads
//! `reader.rs`: a Fetch below the local log start is answered from the cache of `.log`
//! chunks and index files; a miss starts a ranged GET on this module's runtime and the
//! fetch waits (parked, woken when the bytes arrive), so the network thread never waits
//! on the store. Every batch served from a remote object has its CRC checked first.
//!
//! # Threads
//! One tokio runtime per store (`remote.log.reader.threads` workers) runs every object
//! call; callers from Python block on it with the GIL released.

pub mod cache;
pub mod error;
pub mod reader;
pub mod store;
pub mod upload;

pub use error::RemoteError;
pub use reader::{RemoteLogView, RemoteRead, RemoteReader, RemoteSegment};
pub use store::RemoteStore;

/// The directory of a partition's objects, below the store's prefix.
pub fn partition_dir(topic: &str, topic_id: &str, partition: i32) -> String {
    format!("{topic}-{topic_id}/{partition}")
}

/// The common stem of a segment's objects: `<partition dir>/<base offset:020>-<segment id>`.
pub fn segment_stem(partition_dir: &str, base_offset: i64, segment_id: &str) -> String {
    format!("{partition_dir}/{base_offset:020}-{segment_id}")
}

#[cfg(test)]
#[path = "remote_tests.rs"]
mod tests;
