//! `RemoteStorage`: tiered storage's object store for the control plane (copies, deletes,
//! listings) and the data path's remote reader behind it. Every call that touches the
//! store releases the GIL.
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use super::gil::EnterCore;
use super::log::PyLog;
use super::server::{PyPartitionTable, PyReplicaPartition};
use crate::remote::upload::{copy_segment, delete_segment, UploadStats};
use crate::remote::{RemoteError, RemoteLogView, RemoteReader, RemoteSegment, RemoteStore};

#[pyclass(name = "RemoteStorage", module = "logbroker._core", frozen)]
pub struct PyRemoteStorage {
    store: Arc<RemoteStore>,
    reader: Arc<RemoteReader>,
    uploads: UploadStats,
}

/// What `copy_segment` returns: `(base_offset, end_offset, size_bytes, max_timestamp,
/// leader_epochs [(epoch, start offset)], stem, bytes sent)`.
type Copied = (i64, i64, u64, i64, Vec<(i32, i64)>, String, u64);
/// One copied segment as `set_segments` takes it: `(start_offset, end_offset, base_offset,
/// stem, size, max_timestamp)`.
type SegmentRow = (i64, i64, i64, String, u64, i64);

#[pymethods]
impl PyRemoteStorage {
    /// Opens the store at `url` (`s3://`, `gs://`, `az://`, `file://`); `options` are
    /// object_store's keys (the broker's `rsm.config.*`). Nothing is contacted yet.
    #[new]
    #[allow(clippy::too_many_arguments)] // the Python constructor's keyword arguments, one by one (_core.pyi)
    #[pyo3(signature = (url, options, reader_threads=10, chunk_cache_bytes=268_435_456, index_cache_bytes=1_073_741_824, chunk_size=4_194_304, fetch_max_wait_ms=500, fetch_max_bytes_per_second=u64::MAX))]
    fn new(
        url: &str,
        options: HashMap<String, String>,
        reader_threads: usize,
        chunk_cache_bytes: u64,
        index_cache_bytes: u64,
        chunk_size: u64,
        fetch_max_wait_ms: u64,
        fetch_max_bytes_per_second: u64,
    ) -> PyResult<Self> {
        let options: Vec<(String, String)> = options.into_iter().collect();
        let store = Arc::new(RemoteStore::open(url, &options, reader_threads)?);
        let reader = Arc::new(RemoteReader::new(
            Arc::clone(&store),
            chunk_cache_bytes,
            index_cache_bytes,
            chunk_size,
            Duration::from_millis(fetch_max_wait_ms),
            fetch_max_bytes_per_second,
        ));
        Ok(PyRemoteStorage { store, reader, uploads: UploadStats::default() })
    }

    /// The store's URL without credentials.
    #[getter]
    fn url(&self) -> String {
        self.store.display_url().to_owned()
    }

    /// The full key of `rel` (for messages).
    fn key(&self, rel: &str) -> String {
        self.store.key(rel)
    }

    /// Serve fetches below the local log start from this store (once per table).
    fn attach(&self, table: &PyPartitionTable) -> bool {
        table.0.set_remote_reader(Arc::clone(&self.reader))
    }

    /// Copies the rolled segment of `log` at `base_offset` under `<partition_dir>/<base:020>-<segment_id>`;
    /// None if that segment is gone or is the active one.
    fn copy_segment(
        &self,
        py: Python<'_>,
        log: &PyLog,
        partition_dir: &str,
        segment_id: &str,
        base_offset: i64,
    ) -> PyResult<Option<Copied>> {
        let log = log.shared();
        py.enter_core(|| -> Result<Option<Copied>, RemoteError> {
            let Some(seg) = log.upload_segment(base_offset)? else { return Ok(None) };
            let up = copy_segment(&self.store, partition_dir, segment_id, &seg, &self.uploads)?;
            Ok(Some((
                seg.base_offset,
                seg.end_offset,
                seg.size,
                seg.max_timestamp,
                seg.leader_epochs,
                up.stem,
                up.bytes,
            )))
        })
    }

    /// Deletes a segment's objects (those that exist).
    fn delete_segment(&self, py: Python<'_>, stem: &str) -> PyResult<()> {
        py.enter_core(|| delete_segment(&self.store, stem))
    }

    /// Deletes every object below `rel`; returns how many.
    fn delete_dir(&self, py: Python<'_>, rel: &str) -> PyResult<usize> {
        py.enter_core(|| self.store.delete_dir(rel))
    }

    /// `[(path below the prefix, size)]` of every object below `rel`.
    fn list_objects(&self, py: Python<'_>, rel: &str) -> PyResult<Vec<(String, u64)>> {
        py.enter_core(|| self.store.list(rel))
    }

    fn get<'py>(&self, py: Python<'py>, rel: &str) -> PyResult<Bound<'py, PyBytes>> {
        let b = py.enter_core(|| self.store.get(rel))?;
        Ok(PyBytes::new(py, &b))
    }

    fn put(&self, py: Python<'_>, rel: &str, data: Vec<u8>) -> PyResult<()> {
        py.enter_core(|| self.store.put_bytes(rel, data))
    }

    /// The copied segments of a replica, as fetches read them: `[(start_offset, end_offset,
    /// base_offset, stem, size, max_timestamp)]` sorted and not overlapping, and the first offset a
    /// consumer may read; None: the topic is not tiered. Cached chunks of segments no
    /// longer listed are dropped.
    #[pyo3(signature = (partition, segments, log_start_offset))]
    fn set_segments(&self, partition: &PyReplicaPartition, segments: Option<Vec<SegmentRow>>, log_start_offset: i64) {
        let old = partition.0.remote();
        let view = segments.map(|segs| RemoteLogView {
            segments: segs
                .into_iter()
                .map(|(start_offset, end_offset, base_offset, stem, size, max_timestamp)| RemoteSegment {
                    start_offset,
                    end_offset,
                    base_offset,
                    stem,
                    size,
                    max_timestamp,
                })
                .collect(),
            log_start_offset,
        });
        if let Some(old) = old {
            for s in &old.segments {
                if !view.as_ref().is_some_and(|v| v.segments.iter().any(|n| n.stem == s.stem)) {
                    self.reader.forget(s);
                }
            }
        }
        partition.0.set_remote(view);
    }

    /// ListOffsets by time below the local log: the first record of the replica's copied
    /// segments at or after its first readable offset with a timestamp >= `timestamp`, as
    /// `(offset, timestamp)`; None if no copied record is that recent (then the local log
    /// answers). Reads the objects it needs (blocking; the GIL released).
    fn offset_for_timestamp(
        &self,
        py: Python<'_>,
        partition: &PyReplicaPartition,
        timestamp: i64,
    ) -> PyResult<Option<(i64, i64)>> {
        let Some(view) = partition.0.remote() else { return Ok(None) };
        let reader = Arc::clone(&self.reader);
        py.enter_core(move || -> Result<Option<(i64, i64)>, RemoteError> {
            for seg in view.segments.iter().filter(|s| s.max_timestamp >= timestamp) {
                if let Some(found) = reader.offset_for_timestamp(seg, timestamp, view.log_start_offset)? {
                    return Ok(Some(found));
                }
            }
            Ok(None)
        })
    }

    /// Counters for `/metrics`.
    fn stats(&self) -> HashMap<&'static str, u64> {
        let r = &self.reader.stats;
        let (chunk_bytes, index_bytes, hits, misses) = self.reader.cache_stats();
        HashMap::from([
            ("copy_bytes", self.uploads.copy_bytes.load(Ordering::Relaxed)),
            ("copy_segments", self.uploads.copy_segments.load(Ordering::Relaxed)),
            ("copy_errors", self.uploads.copy_errors.load(Ordering::Relaxed)),
            ("fetch_bytes", r.fetch_bytes.load(Ordering::Relaxed)),
            ("fetch_requests", r.fetch_requests.load(Ordering::Relaxed)),
            ("fetch_errors", r.fetch_errors.load(Ordering::Relaxed)),
            ("fetch_throttled", r.fetch_throttled.load(Ordering::Relaxed)),
            ("gets", r.gets.load(Ordering::Relaxed)),
            ("chunk_cache_bytes", chunk_bytes),
            ("index_cache_bytes", index_bytes),
            ("cache_hits", hits),
            ("cache_misses", misses),
        ])
    }
}
