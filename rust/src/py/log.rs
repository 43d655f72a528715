//! `Log`, `AppendResult` and `FileRegion` as Python classes. Thin: extract arguments, enter
//! the core with the GIL released, wrap the result. Semantics live in `crate::log`.
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes};

use super::gil::EnterCore;
use crate::batch::EndTxnMarker;
use crate::cleaner::CompactionResult;
use crate::compression::Codec;
use crate::config::LogConfig;
use crate::file_region::FileRegion;
use crate::log::{AppendResult, KeyValue, Log};

/// `(base_offset, end_offset, size_bytes, max_timestamp, [(epoch, start offset)])` as
/// `Log.upload_info` returns it.
type UploadInfo = (i64, i64, u64, i64, Vec<(i32, i64)>);
/// `(offset, timestamp, key, value)` as `Log.read_records` returns it.
type PyRecord<'py> = (i64, i64, Option<Bound<'py, PyBytes>>, Option<Bound<'py, PyBytes>>);
/// `(offset, timestamp, key, value, producer_id, transactional, marker)` as
/// `Log.read_records_with_markers` returns it; `marker` is None, True (COMMIT) or False (ABORT).
type PyTxnRecord<'py> = (i64, i64, Option<Bound<'py, PyBytes>>, Option<Bound<'py, PyBytes>>, i64, bool, Option<bool>);

/// The codec called `name` ("none", "gzip", "snappy", "lz4", "zstd"), else ValueError.
/// The periodic pass over every log (`log.flush.scheduler.interval.ms`): each rolls by
/// `segment.ms` (`Log::maybe_roll`) and flushes and closes idle descriptors
/// (`Log::maybe_flush`), in one call without the GIL however many logs there are (from
/// Python it was two calls per partition every second: at 50,000 partitions a tenth of an
/// idle broker's CPU). Returns (index in `logs`, error) of each log that failed; the others
/// are done.
#[pyfunction]
pub fn roll_and_flush(py: Python<'_>, logs: Vec<PyRef<'_, PyLog>>, now_ms: i64) -> Vec<(usize, PyErr)> {
    let logs: Vec<Arc<Log>> = logs.iter().map(|l| Arc::clone(&l.log)).collect();
    let failed = py.detach(|| {
        logs.iter()
            .enumerate()
            .filter_map(|(i, log)| log.maybe_roll(now_ms).and_then(|_| log.maybe_flush(now_ms)).err().map(|e| (i, e)))
            .collect::<Vec<_>>()
    });
    failed.into_iter().map(|(i, e)| (i, PyErr::from(e))).collect()
}

pub fn codec_named(name: &str) -> PyResult<Codec> {
    Codec::ALL.into_iter().find(|c| c.name() == name).ok_or_else(|| {
        pyo3::exceptions::PyValueError::new_err(format!(
            "unknown compression {name:?}: none, gzip, snappy, lz4 or zstd"
        ))
    })
}

/// Copies any bytes-like object into an owned buffer (the leader rewrites offsets in place,
/// so a private copy is needed anyway). bytes and bytearray are copied directly; other
/// buffer objects (memoryview, ...) go through `bytes(obj)` because the buffer protocol is
/// not in the Python 3.10 stable ABI.
pub fn extract_bytes(obj: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    if let Ok(b) = obj.cast::<PyBytes>() {
        return Ok(b.as_bytes().to_vec());
    }
    if let Ok(b) = obj.cast::<PyByteArray>() {
        return Ok(b.to_vec());
    }
    let b = obj.py().get_type::<PyBytes>().call1((obj,))?;
    Ok(b.cast::<PyBytes>()?.as_bytes().to_vec())
}

/// A partition's log (see `rust/src/log.rs` for the contract). Thread-safe: every method may
/// be called from any thread; blocking ones release the GIL.
#[pyclass(name = "Log", module = "logbroker._core", frozen)]
pub struct PyLog {
    log: Arc<Log>,
}

fn non_negative(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

impl PyLog {
    /// The engine log, shared with the data path.
    pub fn shared(&self) -> Arc<Log> {
        Arc::clone(&self.log)
    }
}

#[pymethods]
impl PyLog {
    #[staticmethod]
    #[pyo3(signature = (dir, topic, partition, config, recovery_point=None, now_ms=0, sync_dir=true))]
    #[allow(clippy::too_many_arguments)] // the Python method's keyword arguments, one by one (_core.pyi)
    fn open(
        py: Python<'_>,
        dir: PathBuf,
        topic: String,
        partition: i32,
        config: HashMap<String, String>,
        recovery_point: Option<i64>,
        now_ms: i64,
        sync_dir: bool,
    ) -> PyResult<PyLog> {
        let log = py.enter_core(|| {
            let config = LogConfig::from_map(&config)?;
            Log::open_with(&dir, &topic, partition, config, recovery_point, now_ms, sync_dir)
        })?;
        Ok(PyLog { log: Arc::new(log) })
    }

    /// A new partition's log (see `Log::create`): a directory already at `dir` is removed.
    #[staticmethod]
    #[pyo3(signature = (dir, topic, partition, config, now_ms=0))]
    fn create(
        py: Python<'_>,
        dir: PathBuf,
        topic: String,
        partition: i32,
        config: HashMap<String, String>,
        now_ms: i64,
    ) -> PyResult<PyLog> {
        let log = py.enter_core(|| {
            let config = LogConfig::from_map(&config)?;
            Log::create(&dir, &topic, partition, config, now_ms)
        })?;
        Ok(PyLog { log: Arc::new(log) })
    }

    #[getter]
    fn topic(&self) -> &str {
        self.log.topic()
    }
    #[getter]
    fn partition(&self) -> i32 {
        self.log.partition()
    }
    #[getter]
    fn dir(&self) -> String {
        self.log.dir().to_string_lossy().into_owned()
    }
    #[getter]
    fn log_start_offset(&self) -> i64 {
        self.log.log_start_offset()
    }
    #[getter]
    fn log_end_offset(&self) -> i64 {
        self.log.log_end_offset()
    }
    #[getter]
    fn high_watermark(&self) -> i64 {
        self.log.high_watermark()
    }
    #[getter]
    fn recovery_point(&self) -> i64 {
        self.log.recovery_point()
    }
    #[getter]
    fn size_bytes(&self, py: Python<'_>) -> u64 {
        py.detach(|| self.log.size_bytes())
    }
    #[getter]
    fn segment_count(&self, py: Python<'_>) -> usize {
        py.detach(|| self.log.segment_count())
    }
    /// Base offsets of the segments, oldest first (for tests and tooling).
    #[getter]
    fn segment_base_offsets(&self, py: Python<'_>) -> Vec<i64> {
        py.detach(|| self.log.segment_base_offsets())
    }
    /// `(clean_shutdown, segments_recovered, bytes_truncated, segments_dropped, first_error)`
    /// from the last open.
    #[getter]
    fn recovery_report(&self, py: Python<'_>) -> (bool, usize, u64, usize, Option<String>) {
        let r = py.detach(|| self.log.recovery_report());
        (r.clean_shutdown, r.segments_recovered, r.bytes_truncated, r.segments_dropped, r.first_error)
    }

    fn update_high_watermark(&self, py: Python<'_>, hw: i64) -> i64 {
        py.detach(|| self.log.update_high_watermark(hw))
    }

    fn append_as_leader(
        &self,
        py: Python<'_>,
        records: &Bound<'_, PyAny>,
        leader_epoch: i32,
        now_ms: i64,
    ) -> PyResult<PyAppendResult> {
        let bytes = extract_bytes(records)?;
        let r = py.enter_core(|| self.log.append_as_leader(bytes, leader_epoch, now_ms))?;
        Ok(PyAppendResult(r))
    }

    /// Builds one batch from `(key, value)` pairs in Rust and appends it as the leader.
    #[pyo3(signature = (records, leader_epoch, now_ms, compression="none"))]
    fn append_records_as_leader(
        &self,
        py: Python<'_>,
        records: Vec<KeyValue>,
        leader_epoch: i32,
        now_ms: i64,
        compression: &str,
    ) -> PyResult<PyAppendResult> {
        let codec = codec_named(compression)?;
        let r = py.enter_core(|| self.log.append_records_as_leader(&records, leader_epoch, now_ms, codec))?;
        Ok(PyAppendResult(r))
    }

    /// `[(offset, timestamp, key, value), ...]` of the non-control records in
    /// `[start_offset, max_offset)`, decompressed; the scan runs with the GIL released.
    #[pyo3(signature = (start_offset, max_offset=None, max_records=None))]
    fn read_records<'py>(
        &self,
        py: Python<'py>,
        start_offset: i64,
        max_offset: Option<i64>,
        max_records: Option<usize>,
    ) -> PyResult<Vec<PyRecord<'py>>> {
        let records = py.enter_core(|| self.log.read_records(start_offset, max_offset, max_records))?;
        Ok(records
            .into_iter()
            .map(|r| {
                (r.offset, r.timestamp, r.key.map(|k| PyBytes::new(py, &k)), r.value.map(|v| PyBytes::new(py, &v)))
            })
            .collect())
    }

    /// As `read_records`, with each record's producer id and transactional bit, plus one
    /// entry per transaction marker (key and value None).
    #[pyo3(signature = (start_offset, max_offset=None))]
    fn read_records_with_markers<'py>(
        &self,
        py: Python<'py>,
        start_offset: i64,
        max_offset: Option<i64>,
    ) -> PyResult<Vec<PyTxnRecord<'py>>> {
        let records = py.enter_core(|| self.log.read_records_with_markers(start_offset, max_offset))?;
        Ok(records
            .into_iter()
            .map(|r| {
                (
                    r.offset,
                    r.timestamp,
                    r.key.map(|k| PyBytes::new(py, &k)),
                    r.value.map(|v| PyBytes::new(py, &v)),
                    r.producer_id,
                    r.transactional,
                    r.marker.map(|m| m.commit),
                )
            })
            .collect())
    }

    /// Writes a transaction's end marker (COMMIT if `commit`, else ABORT) as the leader.
    #[allow(clippy::too_many_arguments)] // the Python method's keyword arguments, one by one (_core.pyi)
    fn append_end_txn_marker(
        &self,
        py: Python<'_>,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        coordinator_epoch: i32,
        leader_epoch: i32,
        now_ms: i64,
        transaction_version: i8,
    ) -> PyResult<PyAppendResult> {
        let marker = EndTxnMarker { commit, coordinator_epoch };
        let r = py.enter_core(|| {
            self.log.append_end_txn_marker(
                producer_id,
                producer_epoch,
                marker,
                transaction_version,
                leader_epoch,
                now_ms,
            )
        })?;
        Ok(PyAppendResult(r))
    }

    /// min(first offset of the oldest open transaction, HW).
    fn last_stable_offset(&self) -> i64 {
        self.log.last_stable_offset()
    }

    fn first_unstable_offset(&self) -> Option<i64> {
        self.log.first_unstable_offset()
    }

    /// `[(producer_id, first_offset), ...]` of the aborted transactions overlapping
    /// `[fetch_offset, upper)`.
    fn aborted_transactions(&self, py: Python<'_>, fetch_offset: i64, upper: i64) -> Vec<(i64, i64)> {
        py.detach(|| self.log.aborted_transactions(fetch_offset, upper))
            .into_iter()
            .map(|a| (a.producer_id, a.first_offset))
            .collect()
    }

    /// `[(first_offset, producer_id), ...]` of the open transactions, oldest first.
    fn ongoing_transactions(&self, py: Python<'_>) -> Vec<(i64, i64)> {
        py.detach(|| self.log.ongoing_transactions())
    }

    /// One log-cleaner pass (a no-op unless cleanup.policy contains compact).
    #[pyo3(signature = (now_ms, force=false))]
    fn compact(&self, py: Python<'_>, now_ms: i64, force: bool) -> PyResult<PyCompactionResult> {
        let r = py.enter_core(|| self.log.compact(now_ms, force))?;
        Ok(PyCompactionResult(r))
    }

    fn append_as_follower(&self, py: Python<'_>, records: &Bound<'_, PyAny>) -> PyResult<PyAppendResult> {
        let bytes = extract_bytes(records)?;
        let r = py.enter_core(|| self.log.append_as_follower(bytes))?;
        Ok(PyAppendResult(r))
    }

    /// One round of moving this replica to another log directory (AlterReplicaLogDirs,
    /// KIP-113; broker/replica_mover.py): brings `future`, this partition's log in the
    /// destination directory, toward this one as a follower brings itself toward its leader.
    /// First `future` is cut back where it diverges (this log was truncated since: the
    /// leader-epoch check) or restarted when this log's start passed its end (retention);
    /// then the whole batches from its end on are copied, at most `max_bytes` (at least one
    /// batch), and its HW and log start follow this log's. Returns (future's LEO, this log's
    /// LEO): equal means caught up. One hop with the GIL released.
    fn copy_to(&self, py: Python<'_>, future: &PyLog, max_bytes: i64) -> PyResult<(i64, i64)> {
        let (src, dst) = (&self.log, &future.log);
        py.enter_core(|| -> crate::error::Result<(i64, i64)> {
            if let Some(epoch) = dst.latest_epoch() {
                let (_, end) = src.end_offset_for_epoch(epoch);
                if end < 0 {
                    dst.truncate_fully_and_start_at(src.log_start_offset())?;
                } else if end < dst.log_end_offset() {
                    dst.truncate_to(end)?;
                }
            }
            if dst.log_end_offset() > src.log_end_offset() {
                dst.truncate_to(src.log_end_offset())?;
            }
            let start = src.log_start_offset();
            if dst.log_end_offset() < start {
                dst.truncate_fully_and_start_at(start)?;
            }
            if let Some(region) = src.read(dst.log_end_offset(), non_negative(max_bytes), None, true)? {
                if region.length > 0 {
                    dst.append_as_follower(region.read_to_vec()?)?;
                }
            }
            dst.update_high_watermark(src.high_watermark().min(dst.log_end_offset()));
            if start > dst.log_start_offset() && start <= dst.high_watermark() {
                dst.delete_records_before(start)?;
            }
            Ok((dst.log_end_offset(), src.log_end_offset()))
        })
    }

    #[pyo3(signature = (fetch_offset, max_bytes, max_offset=None, min_one_message=true))]
    fn read(
        &self,
        py: Python<'_>,
        fetch_offset: i64,
        max_bytes: i64,
        max_offset: Option<i64>,
        min_one_message: bool,
    ) -> PyResult<Option<PyFileRegion>> {
        let r = py.enter_core(|| self.log.read(fetch_offset, non_negative(max_bytes), max_offset, min_one_message))?;
        Ok(r.map(PyFileRegion))
    }

    /// Whole batches from the one holding `fetch_offset`, as `read`, copied into memory, with
    /// the exclusive upper offset they cover (the next batch's base offset): `(bytes, end)`,
    /// or None when there is nothing below `max_offset`. For share fetches, which name the
    /// offsets they hand out; one `pread` with the GIL released.
    #[pyo3(signature = (fetch_offset, max_bytes, max_offset=None))]
    fn read_batches<'py>(
        &self,
        py: Python<'py>,
        fetch_offset: i64,
        max_bytes: i64,
        max_offset: Option<i64>,
    ) -> PyResult<Option<(Bound<'py, PyBytes>, i64)>> {
        let found = py.enter_core(|| -> crate::error::Result<Option<(Vec<u8>, i64)>> {
            let Some(region) = self.log.read(fetch_offset, non_negative(max_bytes), max_offset, true)? else {
                return Ok(None);
            };
            let Some(end) = self.log.offset_after(&region)? else { return Ok(None) };
            Ok(Some((region.read_to_vec()?, end)))
        })?;
        Ok(found.map(|(bytes, end)| (PyBytes::new(py, &bytes), end)))
    }

    fn offset_for_timestamp(&self, py: Python<'_>, timestamp_ms: i64) -> PyResult<Option<(i64, i64)>> {
        py.enter_core(|| self.log.offset_for_timestamp(timestamp_ms))
    }

    fn max_timestamp(&self, py: Python<'_>) -> (i64, i64) {
        py.detach(|| self.log.max_timestamp())
    }

    fn end_offset_for_epoch(&self, py: Python<'_>, epoch: i32) -> (i32, i64) {
        py.detach(|| self.log.end_offset_for_epoch(epoch))
    }

    fn latest_epoch(&self, py: Python<'_>) -> Option<i32> {
        py.detach(|| self.log.latest_epoch())
    }

    /// `[(epoch, start_offset), ...]` of the leader-epoch cache.
    fn epoch_entries(&self, py: Python<'_>) -> Vec<(i32, i64)> {
        py.detach(|| self.log.epoch_entries())
    }

    fn truncate_to(&self, py: Python<'_>, offset: i64) -> PyResult<()> {
        py.enter_core(|| self.log.truncate_to(offset))
    }

    fn truncate_fully_and_start_at(&self, py: Python<'_>, offset: i64) -> PyResult<()> {
        py.enter_core(|| self.log.truncate_fully_and_start_at(offset))
    }

    fn delete_records_before(&self, py: Python<'_>, offset: i64) -> PyResult<i64> {
        py.enter_core(|| self.log.delete_records_before(offset))
    }

    fn enforce_retention(&self, py: Python<'_>, now_ms: i64) -> PyResult<usize> {
        py.enter_core(|| self.log.enforce_retention(now_ms))
    }
    fn retention_plan(&self, py: Python<'_>, now_ms: i64) -> PyResult<Vec<(i64, i64)>> {
        py.enter_core(|| self.log.retention_plan(now_ms))
    }

    /// Tiered storage: the last offset copied to remote storage (-1: none); retention
    /// deletes no local segment above it.
    /// (These four take the log's lock, which the cleaner and retention hold across disk
    /// I/O: the GIL is released while they wait.)
    #[getter]
    fn get_highest_remote_offset(&self, py: Python<'_>) -> i64 {
        py.detach(|| self.log.highest_remote_offset())
    }
    #[setter]
    fn set_highest_remote_offset(&self, py: Python<'_>, offset: i64) {
        py.detach(|| self.log.set_highest_remote_offset(offset));
    }

    /// Tiered storage: the first offset of the remote copies (-1: none). Below the local
    /// log start, the cleaner keeps tombstones.
    #[getter]
    fn get_remote_log_start(&self, py: Python<'_>) -> i64 {
        py.detach(|| self.log.remote_log_start())
    }
    #[setter]
    fn set_remote_log_start(&self, py: Python<'_>, offset: i64) {
        py.detach(|| self.log.set_remote_log_start(offset));
    }

    /// Tiered storage of a compacted topic: the rolled segments the cleaner has cleaned, as
    /// `(base_offset, last_offset, size_bytes)`, oldest first: what is copied.
    fn cleaned_segments(&self, py: Python<'_>) -> PyResult<Vec<(i64, i64, u64)>> {
        py.enter_core(|| self.log.cleaned_segments())
    }

    /// What tiered storage would copy of the rolled segment at `base_offset`:
    /// `(base_offset, end_offset, size_bytes, max_timestamp, [(epoch, start offset)])`;
    /// None if there is no such rolled segment.
    fn upload_info(&self, py: Python<'_>, base_offset: i64) -> PyResult<Option<UploadInfo>> {
        py.enter_core(|| {
            self.log
                .upload_segment(base_offset)
                .map(|s| s.map(|s| (s.base_offset, s.end_offset, s.size, s.max_timestamp, s.leader_epochs)))
        })
    }

    /// (base offset, bytes) of the rolled segments that end at or after `from_offset` and lie
    /// entirely below the last stable offset (what tiered storage may copy now).
    fn upload_candidates(&self, py: Python<'_>, from_offset: i64) -> PyResult<Vec<(i64, u64)>> {
        py.enter_core(|| self.log.upload_candidates(from_offset))
    }

    fn maybe_roll(&self, py: Python<'_>, now_ms: i64) -> PyResult<bool> {
        py.enter_core(|| self.log.maybe_roll(now_ms))
    }

    fn maybe_flush(&self, py: Python<'_>, now_ms: i64) -> PyResult<bool> {
        py.enter_core(|| self.log.maybe_flush(now_ms))
    }

    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        py.enter_core(|| self.log.flush())
    }

    /// The log's settings: every engine key with its value as text (`LogConfig::to_map`).
    #[getter]
    fn config(&self, py: Python<'_>) -> HashMap<String, String> {
        py.detach(|| self.log.config()).to_map().into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
    }

    fn update_config(&self, py: Python<'_>, config: HashMap<String, String>) -> PyResult<()> {
        py.enter_core(|| self.log.update_config(&config))
    }

    fn producer_state(&self, py: Python<'_>, producer_id: i64) -> Option<(i16, i32, i64)> {
        py.detach(|| self.log.producer_state(producer_id))
    }

    fn active_producers(&self, py: Python<'_>) -> Vec<(i64, i16, i32, i64, i64, i32, i64)> {
        py.detach(|| self.log.active_producers())
    }

    /// A batched clean shutdown's first step (`Log::close_unsynced`): everything but the
    /// clean-shutdown marker, without fsyncs.
    fn close_unsynced(&self, py: Python<'_>) -> PyResult<()> {
        py.enter_core(|| self.log.close_unsynced())
    }

    /// A batched clean shutdown's last step (`Log::mark_clean_shutdown`).
    fn mark_clean_shutdown(&self, py: Python<'_>) -> PyResult<()> {
        py.enter_core(|| self.log.mark_clean_shutdown())
    }

    fn close(&self, py: Python<'_>) -> PyResult<()> {
        py.enter_core(|| self.log.close())
    }

    fn delete(&self, py: Python<'_>) -> PyResult<()> {
        py.enter_core(|| self.log.delete())
    }

    #[getter]
    fn closed(&self, py: Python<'_>) -> bool {
        py.detach(|| self.log.is_closed())
    }

    fn __repr__(&self) -> String {
        format!(
            "Log({}, log_start_offset={}, high_watermark={}, log_end_offset={})",
            self.log.name(),
            self.log.log_start_offset(),
            self.log.high_watermark(),
            self.log.log_end_offset()
        )
    }
}

/// What an append did. Read-only.
#[pyclass(name = "AppendResult", module = "logbroker._core", frozen)]
pub struct PyAppendResult(AppendResult);

#[pymethods]
impl PyAppendResult {
    #[getter]
    fn base_offset(&self) -> i64 {
        self.0.base_offset
    }
    #[getter]
    fn last_offset(&self) -> i64 {
        self.0.last_offset
    }
    #[getter]
    fn record_count(&self) -> i64 {
        self.0.record_count
    }
    #[getter]
    fn batch_count(&self) -> i64 {
        self.0.batch_count
    }
    #[getter]
    fn max_timestamp(&self) -> i64 {
        self.0.max_timestamp
    }
    #[getter]
    fn log_append_time(&self) -> i64 {
        self.0.log_append_time
    }
    #[getter]
    fn log_start_offset(&self) -> i64 {
        self.0.log_start_offset
    }
    #[getter]
    fn duplicate(&self) -> bool {
        self.0.duplicate
    }
    #[getter]
    fn size_bytes(&self) -> u64 {
        self.0.size_bytes
    }
    fn __repr__(&self) -> String {
        let r = &self.0;
        format!(
            "AppendResult(base_offset={}, last_offset={}, record_count={}, batch_count={}, max_timestamp={}, log_append_time={}, log_start_offset={}, duplicate={}, size_bytes={})",
            r.base_offset,
            r.last_offset,
            r.record_count,
            r.batch_count,
            r.max_timestamp,
            r.log_append_time,
            r.log_start_offset,
            if r.duplicate { "True" } else { "False" },
            r.size_bytes
        )
    }
}

/// What a cleaning pass did. Read-only.
#[pyclass(name = "CompactionResult", module = "logbroker._core", frozen)]
pub struct PyCompactionResult(CompactionResult);

#[pymethods]
impl PyCompactionResult {
    #[getter]
    fn segments_cleaned(&self) -> usize {
        self.0.segments_cleaned
    }
    #[getter]
    fn bytes_before(&self) -> u64 {
        self.0.bytes_before
    }
    #[getter]
    fn bytes_after(&self) -> u64 {
        self.0.bytes_after
    }
    #[getter]
    fn records_removed(&self) -> u64 {
        self.0.records_removed
    }
    #[getter]
    fn tombstones_removed(&self) -> u64 {
        self.0.tombstones_removed
    }
    #[getter]
    fn cleaned_up_to(&self) -> i64 {
        self.0.cleaned_up_to
    }
    #[getter]
    fn dirty_ratio(&self) -> f64 {
        self.0.dirty_ratio
    }
    fn __repr__(&self) -> String {
        let r = &self.0;
        format!(
            "CompactionResult(segments_cleaned={}, bytes_before={}, bytes_after={}, records_removed={}, tombstones_removed={}, cleaned_up_to={}, dirty_ratio={:.3})",
            r.segments_cleaned, r.bytes_before, r.bytes_after, r.records_removed, r.tombstones_removed, r.cleaned_up_to, r.dirty_ratio
        )
    }
}

/// A slice of a segment file, held open (`Arc<File>`) so it outlives retention and close.
#[pyclass(name = "FileRegion", module = "logbroker._core", frozen)]
pub struct PyFileRegion(FileRegion);

impl PyFileRegion {
    pub fn region(&self) -> &FileRegion {
        &self.0
    }
}

#[pymethods]
impl PyFileRegion {
    #[getter]
    fn fd(&self) -> i32 {
        self.0.fd()
    }
    #[getter]
    fn position(&self) -> u64 {
        self.0.position
    }
    #[getter]
    fn length(&self) -> u64 {
        self.0.length
    }
    fn __len__(&self) -> usize {
        usize::try_from(self.0.length).unwrap_or(usize::MAX)
    }
    /// Marks this object for the protocol codec's `Writer`: a `records` value that is
    /// sent with sendfile, not copied into the response buffer.
    #[getter]
    #[allow(clippy::unused_self)] // a Python property: pyo3 getters take &self
    fn is_file_region(&self) -> bool {
        true
    }
    /// sendfile(2) from `position + offset`, up to `count` bytes, to a non-blocking socket.
    /// Returns bytes sent; raises BlockingIOError when nothing could be sent.
    fn send(&self, py: Python<'_>, sock_fd: i32, offset: u64, count: u64) -> PyResult<u64> {
        py.enter_core(|| self.0.send(sock_fd, offset, count))
    }
    /// Same contract as `send`, copying through a buffer (pread + write).
    fn write_to(&self, py: Python<'_>, sock_fd: i32, offset: u64, count: u64) -> PyResult<u64> {
        py.enter_core(|| self.0.write_to(sock_fd, offset, count))
    }
    /// The region's bytes (a copy).
    fn read<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let v = py.enter_core(|| self.0.read_to_vec())?;
        Ok(PyBytes::new(py, &v))
    }
    fn __repr__(&self) -> String {
        format!("FileRegion({}, position={}, length={})", self.0.path.display(), self.0.position, self.0.length)
    }
}
