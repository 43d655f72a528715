//! Copying one rolled segment to the store (the leader's copy task, driven by the control
//! plane: python/logbroker/broker/remote_log_manager.py, which writes the segment's
//! COPY_SEGMENT_STARTED record before and COPY_SEGMENT_FINISHED after).
//!
//! Objects go up in a fixed order, the `.log` last but one and the leader-epoch checkpoint
//! last (module doc of `remote/mod.rs`). A copy that fails part way leaves some objects of a
//! segment id that will never be FINISHED; the control plane deletes them (by the STARTED
//! record, which names the id) before copying again under a new id.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

use super::error::Result;
use super::reader::txn_index_bytes;
use super::segment_stem;
use super::store::RemoteStore;
use crate::log::UploadSegment;

/// What a finished copy reports (the COPY_SEGMENT_STARTED record's fields come from here).
#[derive(Debug, Clone)]
pub struct Uploaded {
    pub stem: String,
    pub bytes: u64,
}

#[derive(Default)]
pub struct UploadStats {
    pub copy_bytes: AtomicU64,
    pub copy_segments: AtomicU64,
    pub copy_errors: AtomicU64,
}

/// The leader-epoch checkpoint of a copied segment (the local file's text format).
pub fn epoch_checkpoint(epochs: &[(i32, i64)]) -> Vec<u8> {
    let mut s = format!("0\n{}\n", epochs.len());
    for (e, o) in epochs {
        let _ = writeln!(s, "{e} {o}");
    }
    s.into_bytes()
}

/// Uploads `seg`'s six objects under `<partition_dir>/<base:020>-<segment_id>`.
pub fn copy_segment(
    store: &RemoteStore,
    partition_dir: &str,
    segment_id: &str,
    seg: &UploadSegment,
    stats: &UploadStats,
) -> Result<Uploaded> {
    let stem = segment_stem(partition_dir, seg.base_offset, segment_id);
    let run = || -> Result<u64> {
        let mut sent = 0u64;
        for (suffix, bytes) in [
            ("index", seg.offset_index.clone()),
            ("timeindex", seg.time_index.clone()),
            ("txnindex", txn_index_bytes(&seg.aborted)),
            ("snapshot", seg.producer_snapshot.clone()),
        ] {
            sent += bytes.len() as u64;
            store.put_bytes(&format!("{stem}.{suffix}"), bytes)?;
        }
        sent += store.put_file(&format!("{stem}.log"), &seg.file, seg.size)?;
        let epochs = epoch_checkpoint(&seg.leader_epochs);
        sent += epochs.len() as u64;
        store.put_bytes(&format!("{stem}.leader-epoch-checkpoint"), epochs)?;
        Ok(sent)
    };
    match run() {
        Ok(bytes) => {
            stats.copy_bytes.fetch_add(bytes, Ordering::Relaxed);
            stats.copy_segments.fetch_add(1, Ordering::Relaxed);
            Ok(Uploaded { stem, bytes })
        }
        Err(e) => {
            stats.copy_errors.fetch_add(1, Ordering::Relaxed);
            Err(e)
        }
    }
}

/// Deletes a segment's objects (any that exist: a cut copy may have left only some).
pub fn delete_segment(store: &RemoteStore, stem: &str) -> Result<()> {
    for suffix in ["leader-epoch-checkpoint", "log", "index", "timeindex", "txnindex", "snapshot"] {
        store.delete(&format!("{stem}.{suffix}"))?;
    }
    Ok(())
}
