//! `Log`: one partition replica's log: its segments, offsets and per-partition state.
//!
//! # Concurrency contract
//! A `Log` is shared by several OS threads (Python calls it through `trio.to_thread`, with the
//! GIL released). One `Mutex` protects all mutable state (segments, offsets, epoch cache,
//! producer state, config). Every public method is thread-safe and takes `&self`:
//! - appends validate the request (CRC, records walk, decompression) *before* taking the
//!   lock, then hold it for producer checks, offset assignment and the single `pwrite`;
//! - reads hold it only to compute a region (offset index lookup plus a few header reads);
//!   the returned [`FileRegion`] holds an `Arc<File>` and is sent after the lock is released,
//!   so it stays valid even if retention deletes or `close` closes the segment meanwhile;
//! - `flush`/`maybe_flush` collect file handles under the lock and `fsync` outside it; the
//!   recovery point only advances if no truncation happened in between (a generation count);
//! - `compact` holds it to plan a cleaning pass and to swap the cleaned segments in; the
//!   rewrite in between reads inactive segments through their `Arc<File>` without it, and is
//!   discarded if a truncation (generation count) or retention changed them meanwhile;
//! - nothing inside reads the wall clock: callers pass `now_ms` (the injected clock).
//!
//! # File descriptors
//! A broker must hold tens of thousands of partitions, most of them idle, under an
//! `RLIMIT_NOFILE` of a few tens of thousands: an idle partition holds no descriptor, a busy
//! one one. The policy:
//! - index files are never held open, the active segment's included: their entries live in
//!   memory and reach the files at roll, at a flush that fsyncs the segment and at close,
//!   each write opening the file by path (`index_file.rs`, which also gives the crash story:
//!   the active segment's index files lag between flushes and are rebuilt after an unclean
//!   shutdown);
//! - the active segment's `.log` is opened read-write by the first append or read that needs
//!   it (appends are positioned writes at the segment's size, so a reopened file needs no
//!   seek) and kept while the partition is busy;
//! - an inactive segment's `.log` is opened read-only by the first read that needs it and
//!   kept as a *recently read* file: at most [`MAX_OPEN_INACTIVE_SEGMENT_FILES`] per log (the
//!   least recently read is closed when a read opens one more). A segment just rolled counts
//!   as just read (tail readers are about to finish it);
//! - the idle sweep in `maybe_flush` (every `log.flush.scheduler.interval.ms`) closes every
//!   `.log` not appended to or read since its previous run, the active segment's included.
//!   Bytes not yet fsynced stay counted (`Segment::unflushed_bytes`): the next flush opens
//!   the file by path for its fsync (Linux fsyncs the inode whatever descriptor asks, and
//!   since 4.19 reports to a new descriptor a writeback error nobody has seen yet; an error
//!   is lost only if the kernel evicted the inode in between, the price of holding nothing);
//! - opening a log (new or existing) leaves every file closed; `close` drops every handle.
//!
//! - over all logs, the process keeps at most half the soft open files limit of `.log`
//!   handles (`open_log_files.rs`): opening one more closes the least recently used, so
//!   writing to more partitions at once than descriptors allow (a restart's first writes to
//!   50,000 partitions) is no shortage.
//!
//! So a log holds at most 1 + `MAX_OPEN_INACTIVE_SEGMENT_FILES` descriptors of its own (1
//! while appended to and read at the tail), and 0 once idle for a whole sweep interval (the
//! second sweep after its last use closes its files), whatever its segment count. Regions handed out and a cleaning pass in progress hold their own
//! `Arc<File>` (valid after the segment closes its handle or is deleted) until they are
//! dropped, so a sendfile in progress is never cut short. Opening a file when the process is
//! out of descriptors fails with `LogError::TooManyOpenFiles` (topic-partition, path, "raise
//! the open files limit"); nothing is written then (an append is refused whole, the log keeps
//! its data), and the broker answers it per partition with KAFKA_STORAGE_ERROR (a fetch, a
//! produce).
//!
//! # Creating a log
//! A new, empty log costs nothing on disk until its first write (`Log::create`; `Log::open`
//! of a missing directory does the same): no directory, no file, no read, no fsync
//! (`DirState::Absent`). The first write (an append, a full truncation, a higher log start)
//! creates the directory and the first segment's `.log` (`Log::materialize`); a checkpoint
//! whose absence means the same thing is not written (recovery point 0, log start offset 0,
//! empty leader-epoch cache) and the index files are not even created (see above). The
//! partition directory's entry in the data directory and the `.log`'s entry in it become
//! durable at the log's first fsync of its directory: the first flush fsyncs the partition
//! directory and then the data directory before the recovery point may pass them
//! (`DirState::Unsynced`); a roll, a full truncation and `close` do the same. Closing a log
//! never written writes nothing. A crash loses only what was never flushed: at worst the
//! whole directory, which opens again as the same empty log. Kafka creates the directory
//! and files of a new partition at once, without an fsync. Reopening an existing log fsyncs
//! whatever loading changed (`recovery.rs`).
//!
//! # Directory (`<data>/<topic>-<partition>/`)
//! ```text
//! 00000000000000000000.log / .index / .timeindex   segments (see segment.rs; a new segment's index
//!                                                   files appear at its first flush, roll or close)
//! leader-epoch-checkpoint                           epoch → start offset (leader_epoch_cache.rs)
//! log-start-offset-checkpoint                       "0\n<log start offset>\n" (offset_checkpoint.rs)
//! recovery-point-checkpoint                         "0\n<recovery point>\n": all below is fsynced (absent: 0)
//! cleaner-offset-checkpoint                         "0\n<offset>\n": segments below are compacted (cleaner.rs)
//! producer-state.snapshot                           only between a clean close and the next open
//! .clean-shutdown                                   marker written last by close(), removed by open
//! ```
//!
//! # Invariants
//! - `log_start_offset <= high_watermark <= log_end_offset`; offsets strictly increase from
//!   the first segment's base offset to the LEO and are never reused (truncation excepted, for
//!   followers). They are dense unless the log was compacted (`compact`, `cleaner.rs`) or
//!   replicated from a compacted leader: then batches keep their offsets but records, and
//!   whole batches, may be missing. A read at an offset in a gap returns the next batch.
//! - Segments are contiguous: each starts where the previous one ends (compaction keeps the
//!   last batch of every segment it rewrites, empty if need be).
//! - The active segment is the last one; only it is appended to.
//! - An append is all-or-nothing: every batch of the request is validated, producer state is
//!   staged, and a failed write is cut back (`Segment::append`).
//! - The log start offset is persisted before the segments below it are deleted.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::ops::{Deref, DerefMut};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock, Weak};

use crate::batch::{self, BatchHeader, Check, Control, EndTxnMarker, RecordView, SliceSource};
use crate::builder::{BatchBuilder, Rec};
use crate::cleaner::{self, CleanContext, CompactionResult, SegmentSnapshot, CLEANER_CHECKPOINT_FILE};
use crate::compression::Codec;
use crate::config::{LogConfig, TimestampType};
use crate::error::{IoContext, LogError, Result, Tp};
use crate::file_region::FileRegion;
use crate::leader_epoch_cache::LeaderEpochCache;
use crate::offset_checkpoint::{sync_dir, write_single_offset, write_single_offset_as};
use crate::producer_state::{AbortedTxn, ProducerAppend, ProducerBatch, ProducerStateManager};
use crate::recovery;
use crate::segment::{AppendedBatch, Segment};

pub const LOG_START_FILE: &str = "log-start-offset-checkpoint";
pub const RECOVERY_POINT_FILE: &str = "recovery-point-checkpoint";
pub const CLEAN_SHUTDOWN_FILE: &str = ".clean-shutdown";

/// At most this many inactive segments of a log keep their `.log` open (the most recently
/// read ones; see "File descriptors" above).
pub const MAX_OPEN_INACTIVE_SEGMENT_FILES: usize = 2;

/// What an append did (or, for a duplicate, what the original append did).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppendResult {
    pub base_offset: i64,
    pub last_offset: i64,
    pub record_count: i64,
    pub batch_count: i64,
    pub max_timestamp: i64,
    /// The broker time stamped on the batches under LogAppendTime; -1 under CreateTime.
    pub log_append_time: i64,
    pub log_start_offset: i64,
    /// True when the request was a retry of an idempotent batch already in the log.
    pub duplicate: bool,
    pub size_bytes: u64,
}

/// One record as `Log::read_records` returns it, with its batch's producer fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogRecord {
    pub offset: i64,
    pub timestamp: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    /// The batch's producer id (-1 without one) and transactional bit.
    pub producer_id: i64,
    pub transactional: bool,
    /// `Some` for a transaction marker (only returned when asked for; key and value are
    /// then `None`).
    pub marker: Option<EndTxnMarker>,
}

/// Who wrote a leader append: a client (Produce), or the transaction coordinator writing
/// an end marker (WriteTxnMarkers). Only the coordinator may write control batches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendOrigin {
    Client,
    Coordinator,
}

/// A rule for each data record a client appends, given its key and value: why it is refused
/// (None: it passes). `Log::append_as_leader_checked`.
pub type RecordCheck<'a> = dyn Fn(Option<&[u8]>, Option<&[u8]>) -> Option<String> + 'a;

/// A `(key, value)` pair for `Log::append_records_as_leader` (either may be null).
pub type KeyValue = (Option<Vec<u8>>, Option<Vec<u8>>);

/// Bytes of batches `read_records` reads per lock acquisition.
const READ_RECORDS_CHUNK: u64 = 1 << 20;

/// The decision of the locked first phase of a cleaning pass.
pub(crate) enum Planned {
    Run(CompactionPlan),
    Skip { dirty_ratio: f64 },
}

/// What the locked first phase of a cleaning pass decided.
pub(crate) struct CompactionPlan {
    config: Arc<LogConfig>,
    segments: Vec<SegmentSnapshot>,
    /// Next offset of the last segment of the range: the checkpoint after the pass.
    end_offset: i64,
    dirty_ratio: f64,
    producer_last_offsets: HashMap<i64, i64>,
    /// Aborted transactions overlapping the range: their records are removed.
    aborted: Vec<AbortedTxn>,
    generation: u64,
    /// Tiered storage holds records below the local log start: no tombstone is dropped.
    keep_tombstones: bool,
}

/// A rolled segment as tiered storage copies it (`Log::upload_segment`, `remote/upload.rs`).
pub struct UploadSegment {
    pub base_offset: i64,
    /// Its last offset (the next segment's base offset - 1).
    pub end_offset: i64,
    pub size: u64,
    pub file: Arc<std::fs::File>,
    /// `.index` and `.timeindex` bytes (the segments' file formats).
    pub offset_index: Vec<u8>,
    pub time_index: Vec<u8>,
    /// Aborted transactions overlapping the segment.
    pub aborted: Vec<AbortedTxn>,
    /// The producer state as of the segment's end (`ProducerStateManager::as_of`), as a
    /// snapshot taken at its next offset.
    pub producer_snapshot: Vec<u8>,
    /// (epoch, start offset) of the leader epochs the segment covers.
    pub leader_epochs: Vec<(i32, i64)>,
    pub max_timestamp: i64,
}

/// What opening the log had to repair.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    pub clean_shutdown: bool,
    pub segments_recovered: usize,
    pub bytes_truncated: u64,
    pub segments_dropped: usize,
    /// Description of the first invalid batch found, if any.
    pub first_error: Option<String>,
}

pub struct Log {
    topic: String,
    partition: i32,
    tp: String,
    dir: PathBuf,
    inner: Mutex<Inner>,
    /// Lock-free copies of the offsets, republished whenever a lock guard is dropped, so the
    /// event loop can read LEO/HW/log start without contending with an append.
    published: Published,
}

/// Told when what a fetch of the log sees changes: its log start offset, LEO, HW or first
/// unstable offset (not the recovery point). Called once per locked operation that changed
/// any of them, after they are published and with the log's lock still held: it must be
/// short and must not call into this log's locked methods.
pub trait OffsetsListener: Send + Sync {
    fn offsets_changed(&self);
}

#[derive(Default)]
struct Published {
    log_start_offset: AtomicI64,
    log_end_offset: AtomicI64,
    high_watermark: AtomicI64,
    recovery_point: AtomicI64,
    /// First offset of the oldest open transaction; `i64::MAX` when none is open.
    first_unstable_offset: AtomicI64,
    /// The latest leader epoch of the epoch cache; -1 when it is empty.
    latest_epoch: AtomicI32,
    listener: RwLock<Option<Weak<dyn OffsetsListener>>>,
}

/// The lock guard: derefs to `Inner`, republishes the offsets when dropped.
struct Guard<'a> {
    g: MutexGuard<'a, Inner>,
    p: &'a Published,
}

impl Deref for Guard<'_> {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.g
    }
}

impl DerefMut for Guard<'_> {
    fn deref_mut(&mut self) -> &mut Inner {
        &mut self.g
    }
}

impl Drop for Guard<'_> {
    fn drop(&mut self) {
        if self.p.store(&self.g) {
            self.p.notify();
        }
    }
}

impl Published {
    /// Publishes `g`'s offsets; true if what a fetch sees changed (see `OffsetsListener`).
    fn store(&self, g: &Inner) -> bool {
        let set = |a: &AtomicI64, v: i64| a.swap(v, Ordering::AcqRel) != v;
        let start = set(&self.log_start_offset, g.log_start_offset);
        let end = set(&self.log_end_offset, g.leo());
        let hw = set(&self.high_watermark, g.high_watermark);
        self.recovery_point.store(g.recovery_point, Ordering::Release);
        let unstable = set(&self.first_unstable_offset, g.producers.first_unstable_offset().unwrap_or(i64::MAX));
        self.latest_epoch.store(g.epochs.latest_epoch().unwrap_or(-1), Ordering::Release);
        start || end || hw || unstable
    }

    fn notify(&self) {
        let listener = self.listener.read().unwrap_or_else(PoisonError::into_inner).as_ref().and_then(Weak::upgrade);
        if let Some(l) = listener {
            l.offsets_changed();
        }
    }
}

pub(crate) struct Inner {
    pub config: Arc<LogConfig>,
    pub segments: Vec<Segment>,
    pub log_start_offset: i64,
    pub high_watermark: i64,
    pub recovery_point: i64,
    pub epochs: LeaderEpochCache,
    pub producers: ProducerStateManager,
    pub unflushed_messages: i64,
    pub last_flush_ms: i64,
    pub closed: bool,
    pub generation: u64,
    pub report: RecoveryReport,
    /// Segments entirely below this offset are clean (compacted); persisted in
    /// `cleaner-offset-checkpoint`.
    pub cleaner_checkpoint: i64,
    /// A cleaning pass is between its first and last locked phase.
    pub cleaning: bool,
    /// Earliest delete horizon of the tombstones the last pass kept (`i64::MIN`: unknown,
    /// after a restart); a pass is due once it has passed.
    pub earliest_horizon: Option<i64>,
    /// Segment appends and reads so far (a clock for `Segment::last_used`), and its value at
    /// the last idle-file sweep.
    pub uses: u64,
    pub swept_at: u64,
    /// What of the partition directory exists and is durable (see "Creating a log").
    pub dir_state: DirState,
    /// Tiered storage (`remote.storage.enable`): the last offset copied to remote storage
    /// (-1: none, or not known yet after an open), set by the control plane from the
    /// metadata log. Retention deletes no local segment above it.
    pub highest_remote_offset: i64,
    /// Tiered storage: the first offset of the remote copies (-1: none). Below the local log
    /// start it means records exist only remotely, which the cleaner cannot see: it then
    /// keeps tombstones (a dropped one would let an older remote value of its key come back).
    pub remote_log_start: i64,
    /// Closed by `close_unsynced` without error: `mark_clean_shutdown` writes the marker.
    pub clean_pending: bool,
}

/// The partition directory of a log, from nothing to durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DirState {
    /// Neither the directory nor its first `.log` exists: a new, empty log before its first
    /// write (`Log::materialize` creates both). Nothing to flush, close or delete.
    Absent,
    /// Created, but neither its entries (the first segment's `.log`) nor its own entry in
    /// the data directory are fsynced. The first flush fsyncs both before moving the recovery
    /// point; a roll, a full truncation and `close` do too.
    Unsynced,
    /// Everything in it that the recovery point covers is durable.
    Synced,
}

impl Inner {
    pub fn leo(&self) -> i64 {
        self.active().next_offset
    }
    fn active(&self) -> &Segment {
        self.segments.last().expect("a log always has an active segment")
    }
    fn active_mut(&mut self) -> &mut Segment {
        self.segments.last_mut().expect("a log always has an active segment")
    }

    /// Segment `i` was just appended to or read (`opened`: its file was opened for it): it
    /// becomes the most recently used, and the inactive files beyond the cap are closed.
    fn note_use(&mut self, i: usize, opened: bool) {
        self.uses += 1;
        self.segments[i].last_used = self.uses;
        if opened {
            self.limit_open_files();
        }
    }

    /// Closes the least recently read inactive `.log` files beyond
    /// `MAX_OPEN_INACTIVE_SEGMENT_FILES`.
    fn limit_open_files(&mut self) {
        let n = self.segments.len();
        let mut open: Vec<(u64, usize)> = self.segments[..n - 1]
            .iter()
            .enumerate()
            .filter(|(_, s)| s.is_log_file_open())
            .map(|(i, s)| (s.last_used, i))
            .collect();
        if open.len() > MAX_OPEN_INACTIVE_SEGMENT_FILES {
            open.sort_unstable();
            for &(_, i) in &open[..open.len() - MAX_OPEN_INACTIVE_SEGMENT_FILES] {
                self.segments[i].close_log_file();
            }
        }
    }

    /// The idle sweep: closes the `.log` files (the active segment's included) not appended
    /// to or read since the previous sweep.
    fn close_idle_files(&mut self) {
        let swept_at = self.swept_at;
        for s in &mut self.segments {
            if s.is_log_file_open() && s.last_used <= swept_at {
                s.close_log_file();
            }
        }
        self.swept_at = self.uses;
    }
}

/// Per-batch facts gathered by validation, before offsets are assigned.
struct Validated {
    position: u64,
    size: u64,
    header: batch::BatchHeader,
    offset_delta_of_max: i32,
}

impl Log {
    /// Opens (creating if needed) the partition directory `dir`, recovering it if the last
    /// shutdown was not clean. See `recovery.rs`.
    pub fn open(
        dir: &Path,
        topic: &str,
        partition: i32,
        config: LogConfig,
        recovery_point: Option<i64>,
        now_ms: i64,
    ) -> Result<Log> {
        Log::open_with(dir, topic, partition, config, recovery_point, now_ms, true)
    }

    /// `open`; with `sync_dir` false, the directory changes opening makes (the clean-shutdown
    /// marker and the producer snapshot removed) are not fsynced here: the caller opens many
    /// logs, then calls `sync_filesystem` once before any of them is written.
    pub fn open_with(
        dir: &Path,
        topic: &str,
        partition: i32,
        config: LogConfig,
        recovery_point: Option<i64>,
        now_ms: i64,
        sync_dir: bool,
    ) -> Result<Log> {
        let tp = format!("{topic}-{partition}");
        let inner = recovery::load(dir, config, recovery_point, now_ms, sync_dir).map_err(|e| e.in_partition(&tp))?;
        Ok(Log::with_inner(dir, topic, partition, tp, inner))
    }

    /// A new partition's log in `dir` (CreateTopics, CreatePartitions, a new replica): a
    /// directory already there, left by an earlier topic of the same name, is removed first.
    pub fn create(dir: &Path, topic: &str, partition: i32, config: LogConfig, now_ms: i64) -> Result<Log> {
        let tp = format!("{topic}-{partition}");
        let inner = recovery::create(dir, config, now_ms).map_err(|e| e.in_partition(&tp))?;
        Ok(Log::with_inner(dir, topic, partition, tp, inner))
    }

    fn with_inner(dir: &Path, topic: &str, partition: i32, tp: String, inner: Inner) -> Log {
        let published = Published::default();
        published.store(&inner);
        Log { topic: topic.to_owned(), partition, tp, dir: dir.to_owned(), inner: Mutex::new(inner), published }
    }

    pub fn topic(&self) -> &str {
        &self.topic
    }
    pub fn partition(&self) -> i32 {
        self.partition
    }
    pub fn dir(&self) -> &Path {
        &self.dir
    }
    pub fn name(&self) -> &str {
        &self.tp
    }

    /// Sets (replaces) the one listener told of offset changes (`OffsetsListener`).
    pub fn set_offsets_listener(&self, listener: Weak<dyn OffsetsListener>) {
        *self.published.listener.write().unwrap_or_else(PoisonError::into_inner) = Some(listener);
    }

    fn lock(&self) -> Guard<'_> {
        // A panic while holding the lock is a bug; the state is still the last consistent one
        // for every operation that completed, so keep serving rather than wedge the broker.
        Guard { g: self.inner.lock().unwrap_or_else(PoisonError::into_inner), p: &self.published }
    }

    fn lock_open(&self) -> Result<Guard<'_>> {
        let g = self.lock();
        if g.closed {
            return Err(LogError::Closed { tp: Tp::default(), dir: self.dir.clone() }.in_partition(&self.tp));
        }
        Ok(g)
    }

    fn err(&self, e: LogError) -> LogError {
        e.in_partition(&self.tp)
    }

    /// Lock-free (published after every locked operation).
    pub fn log_start_offset(&self) -> i64 {
        self.published.log_start_offset.load(Ordering::Acquire)
    }
    /// Lock-free (published after every locked operation).
    pub fn log_end_offset(&self) -> i64 {
        self.published.log_end_offset.load(Ordering::Acquire)
    }
    /// Lock-free (published after every locked operation).
    pub fn high_watermark(&self) -> i64 {
        self.published.high_watermark.load(Ordering::Acquire)
    }
    /// Lock-free (published after every locked operation).
    pub fn recovery_point(&self) -> i64 {
        self.published.recovery_point.load(Ordering::Acquire)
    }
    /// The last stable offset: min(first offset of the oldest open transaction, HW).
    /// read_committed consumers read below it. Lock-free.
    pub fn last_stable_offset(&self) -> i64 {
        self.published.first_unstable_offset.load(Ordering::Acquire).min(self.high_watermark())
    }
    /// The first offset of the oldest open transaction, if any. Lock-free.
    pub fn first_unstable_offset(&self) -> Option<i64> {
        let v = self.published.first_unstable_offset.load(Ordering::Acquire);
        (v != i64::MAX).then_some(v)
    }
    /// Aborted transactions overlapping `[fetch_offset, upper)` (a read_committed fetch).
    pub fn aborted_transactions(&self, fetch_offset: i64, upper: i64) -> Vec<AbortedTxn> {
        self.lock().producers.aborted_between(fetch_offset, upper)
    }
    /// Open transactions as `(first offset, producer id)`, oldest first.
    pub fn ongoing_transactions(&self) -> Vec<(i64, i64)> {
        self.lock().producers.ongoing_transactions()
    }
    pub fn size_bytes(&self) -> u64 {
        self.lock().segments.iter().map(|s| s.size).sum()
    }
    pub fn segment_count(&self) -> usize {
        self.lock().segments.len()
    }
    pub fn segment_base_offsets(&self) -> Vec<i64> {
        self.lock().segments.iter().map(|s| s.base_offset).collect()
    }
    pub fn recovery_report(&self) -> RecoveryReport {
        self.lock().report.clone()
    }
    pub fn config(&self) -> Arc<LogConfig> {
        Arc::clone(&self.lock().config)
    }

    /// Sets the HW, clamped to `[log_start_offset, log_end_offset]`; returns the new value.
    pub fn update_high_watermark(&self, hw: i64) -> i64 {
        let mut g = self.lock();
        let v = hw.clamp(g.log_start_offset, g.leo());
        g.high_watermark = v;
        v
    }

    /// Validates every batch of `records` (no lock held): a client's dense batches for the
    /// leader, stored (possibly compacted) batches for a follower. `require_keys`: every
    /// record of a data batch must have a key (compacted topics). `record_check`: a rule each data
    /// record's key and value must pass (schema ids: server/schema_ids.rs). Batch errors carry
    /// the partition; record errors name every record at fault (Produce's RecordErrors).
    fn validate(
        &self,
        records: &[u8],
        max_batch: u64,
        follower: bool,
        require_keys: bool,
        record_check: Option<&RecordCheck<'_>>,
    ) -> Result<(Vec<Validated>, u64)> {
        let mut out = Vec::new();
        let mut src = SliceSource(records);
        let check = if follower { Check::Stored } else { Check::Full };
        // Every record at fault is named (Kafka's RecordErrors list each one), by its index in
        // the batch; the records are checked in the walk that validates them (one decompression).
        let per_record = require_keys || record_check.is_some();
        let faults: RefCell<Vec<(i32, String)>> = RefCell::new(Vec::new());
        let index = Cell::new(0i32);
        let each_record = |h: &BatchHeader, r: &RecordView<'_>| {
            if !per_record || h.is_control() {
                return;
            }
            let i = index.get();
            index.set(i + 1);
            if require_keys && r.key.is_none() {
                let why = format!("record {i} has no key; a compacted topic cannot accept a record without a key");
                faults.borrow_mut().push((i, why));
            } else if let Some(why) = record_check.and_then(|c| c(r.key, r.value)) {
                faults.borrow_mut().push((i, format!("record {i} {why}")));
            }
        };
        let end = batch::scan_records(&mut src, 0, check, None, each_record, |v| {
            let h = v.header;
            let (faults, records) = (faults.take(), index.replace(0));
            if !follower && h.size() > max_batch {
                return Err(LogError::RecordTooLarge {
                    tp: Tp::default(),
                    size: h.size(),
                    max: max_batch,
                    limit: "message.max.bytes",
                });
            }
            if let Some((_, first)) = faults.first() {
                let reason =
                    format!("{} of the batch's {records} records are refused; the first: {first}", faults.len());
                return Err(LogError::invalid_records(v.position, reason, faults));
            }
            let summary = v.records.expect("full check summarizes records");
            out.push(Validated {
                position: v.position,
                size: h.size(),
                header: h,
                offset_delta_of_max: summary.offset_delta_of_max,
            });
            Ok(Control::Continue)
        })
        .map_err(|e| self.err(e))?;
        if let Some(e) = end.error {
            // A fetch response may end with a partial batch; a follower ignores it.
            if !(follower && end.torn) {
                return Err(self.err(e));
            }
        }
        Ok((out, end.valid_end))
    }

    /// Appends a producer's request as the leader: validates every batch (all-or-nothing),
    /// checks idempotent-producer sequences, assigns offsets and the leader epoch in place,
    /// applies LogAppendTime, and writes the request with one `pwrite`.
    pub fn append_as_leader(&self, records: Vec<u8>, leader_epoch: i32, now_ms: i64) -> Result<AppendResult> {
        self.append_as_leader_from(records, leader_epoch, now_ms, AppendOrigin::Client, None)
    }

    /// `append_as_leader` with `check` applied to every data record's key and value first (a
    /// record that fails it refuses the whole request, naming every such record).
    pub fn append_as_leader_checked(
        &self,
        records: Vec<u8>,
        leader_epoch: i32,
        now_ms: i64,
        check: &RecordCheck<'_>,
    ) -> Result<AppendResult> {
        self.append_as_leader_from(records, leader_epoch, now_ms, AppendOrigin::Client, Some(check))
    }

    /// Writes a transaction's end marker for `producer_id` as the leader (WriteTxnMarkers):
    /// closes the producer's open transaction here (an ABORT enters the aborted-transaction
    /// index) and moves the last stable offset. A stale producer epoch is
    /// `InvalidProducerEpoch`, a stale coordinator epoch `CoordinatorFenced`.
    ///
    /// `transaction_version` is the marker's (WriteTxnMarkers v2, KIP-1228). Under
    /// transactions v2 the coordinator bumps the epoch to end each transaction, so a marker
    /// carries an epoch above its transaction's batches: one at the producer's current epoch
    /// while a transaction of that epoch is open here is a stale marker of an earlier
    /// transaction, refused (`InvalidProducerEpoch`) rather than let it close the new one. At
    /// that epoch with nothing open it is a retry of the marker already written, and harmless.
    pub fn append_end_txn_marker(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        marker: EndTxnMarker,
        transaction_version: i8,
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<AppendResult> {
        if transaction_version >= 2 {
            let g = self.lock();
            if let Some(e) = g.producers.get(producer_id) {
                if e.epoch == producer_epoch && e.current_txn_first_offset >= 0 {
                    return Err(self.err(LogError::InvalidProducerEpoch {
                        tp: Tp::default(),
                        producer_id,
                        current: e.epoch,
                        received: producer_epoch,
                    }));
                }
            }
        }
        let batch = marker.to_batch(producer_id, producer_epoch, now_ms);
        self.append_as_leader_from(batch, leader_epoch, now_ms, AppendOrigin::Coordinator, None)
    }

    fn append_as_leader_from(
        &self,
        records: Vec<u8>,
        leader_epoch: i32,
        now_ms: i64,
        origin: AppendOrigin,
        check: Option<&RecordCheck<'_>>,
    ) -> Result<AppendResult> {
        let config = self.config();
        if records.len() as u64 > config.segment_bytes {
            return Err(self.err(LogError::RecordTooLarge {
                tp: Tp::default(),
                size: records.len() as u64,
                max: config.segment_bytes,
                limit: "segment.bytes",
            }));
        }
        let (batches, _) = self.validate(&records, config.max_message_bytes, false, config.cleanup_compact, check)?;
        if batches.is_empty() {
            return Err(self.err(LogError::invalid(0, "the request holds no record batches")));
        }
        for v in &batches {
            if v.header.is_control() && origin == AppendOrigin::Client {
                return Err(self.err(LogError::invalid(
                    v.position,
                    "control batches (transaction markers) are written by the transaction coordinator, not by clients",
                )));
            }
            if v.header.is_transactional() && !v.header.has_producer_id() {
                return Err(self.err(LogError::invalid(v.position, "a transactional batch without a producer id")));
            }
        }
        let (records, batches) = if origin == AppendOrigin::Client {
            self.recompress(records, batches, &config)?
        } else {
            (records, batches)
        };
        let mut records = records;
        let log_append = config.timestamp_type == TimestampType::LogAppendTime;

        let mut g = self.lock_open()?;
        let config = Arc::clone(&g.config);
        let base = g.leo();
        let mut next = base;
        let mut producer_append = ProducerAppend::default();
        let mut appended = Vec::with_capacity(batches.len());
        let mut record_count = 0i64;
        let mut max_timestamp = -1i64;
        for v in &batches {
            let h = v.header;
            let first = next;
            let last = first + i64::from(h.last_offset_delta);
            next = last + 1;
            let ts = if log_append { now_ms } else { h.max_timestamp };
            if h.has_producer_id() {
                let pb = ProducerBatch {
                    producer_id: h.producer_id,
                    epoch: h.producer_epoch,
                    first_seq: h.base_sequence,
                    last_seq: h.last_sequence(),
                    first_offset: first,
                    last_offset: last,
                    timestamp: ts,
                    control: h.is_control(),
                    transactional: h.is_transactional(),
                    marker: if h.is_control() { EndTxnMarker::parse(&records[v.position as usize..]) } else { None },
                };
                if let Some(dup) = producer_append.check(&g.producers, &pb).map_err(|e| self.err(e))? {
                    return Ok(AppendResult {
                        base_offset: dup.first_offset,
                        last_offset: dup.last_offset,
                        record_count: dup.last_offset - dup.first_offset + 1,
                        batch_count: 1,
                        max_timestamp: dup.timestamp,
                        log_append_time: if log_append { dup.timestamp } else { -1 },
                        log_start_offset: g.log_start_offset,
                        duplicate: true,
                        size_bytes: 0,
                    });
                }
                producer_append.stage(&g.producers, &pb);
            }
            record_count += i64::from(h.records_count);
            max_timestamp = max_timestamp.max(ts);
            appended.push(AppendedBatch {
                rel_position: v.position,
                size: v.size,
                base_offset: first,
                last_offset: last,
                max_timestamp: ts,
                offset_of_max_timestamp: if log_append { first } else { first + i64::from(v.offset_delta_of_max) },
            });
        }
        for (v, a) in batches.iter().zip(&appended) {
            let b = &mut records[v.position as usize..(v.position + v.size) as usize];
            batch::set_base_offset(b, a.base_offset);
            batch::set_partition_leader_epoch(b, leader_epoch);
            if log_append {
                batch::set_log_append_time(b, now_ms);
            }
        }
        let last_offset = next - 1;
        // The epoch first (as Kafka does, and as a follower appends): if the append then
        // fails, an entry starting at the LEO is harmless; the other order could leave
        // records on disk that the cache does not know and the producer was told failed.
        self.materialize(&mut g).map_err(|e| self.err(e))?;
        g.epochs.assign(leader_epoch, base).map_err(|e| self.err(e))?;
        self.write_locked(&mut g, &records, &appended, last_offset, now_ms, &config)?;
        g.producers.commit(producer_append);
        g.unflushed_messages += record_count;
        let result = AppendResult {
            base_offset: base,
            last_offset,
            record_count,
            batch_count: i64::try_from(appended.len()).unwrap_or(i64::MAX),
            max_timestamp,
            log_append_time: if log_append { now_ms } else { -1 },
            log_start_offset: g.log_start_offset,
            duplicate: false,
            size_bytes: records.len() as u64,
        };
        let flush_now = g.unflushed_messages >= config.flush_messages;
        drop(g);
        if flush_now {
            self.flush_scope(true, now_ms)?;
        }
        Ok(result)
    }

    /// The request as the topic's `compression.type` stores it (no lock held): unchanged under
    /// `producer`, or when every data batch already has the topic's codec; else a new buffer in
    /// which every other data batch is recompressed (Kafka's LogValidator; control batches stay
    /// as they are). A batch that grows past `max.message.bytes` by it is refused, as Kafka does.
    fn recompress(
        &self,
        records: Vec<u8>,
        batches: Vec<Validated>,
        config: &LogConfig,
    ) -> Result<(Vec<u8>, Vec<Validated>)> {
        if config.compression.is_none() {
            return Ok((records, batches)); // `producer`: the common case, no walk of the batches
        }
        let target_of = |v: &Validated| {
            if v.header.is_control() {
                return None;
            }
            v.header.codec().and_then(|c| config.recompress_to(c))
        };
        if !batches.iter().any(|v| target_of(v).is_some()) {
            return Ok((records, batches));
        }
        let mut out = Vec::with_capacity(records.len());
        let mut rewritten = Vec::with_capacity(batches.len());
        for v in batches {
            let src = &records[v.position as usize..(v.position + v.size) as usize];
            let position = out.len() as u64;
            let Some(target) = target_of(&v) else {
                out.extend_from_slice(src);
                rewritten.push(Validated { position, ..v });
                continue;
            };
            let b = batch::recompress(src, v.position, target, config.compression_level(target))
                .map_err(|e| self.err(e))?;
            let header = batch::BatchHeader::parse(&b);
            if header.size() > config.max_message_bytes {
                return Err(self.err(LogError::RecordTooLarge {
                    tp: Tp::default(),
                    size: header.size(),
                    max: config.max_message_bytes,
                    limit: "max.message.bytes (after recompression to compression.type)",
                }));
            }
            out.extend_from_slice(&b);
            rewritten.push(Validated {
                position,
                size: header.size(),
                header,
                offset_delta_of_max: v.offset_delta_of_max,
            });
        }
        if out.len() as u64 > config.segment_bytes {
            return Err(self.err(LogError::RecordTooLarge {
                tp: Tp::default(),
                size: out.len() as u64,
                max: config.segment_bytes,
                limit: "segment.bytes",
            }));
        }
        Ok((out, rewritten))
    }

    /// Rolls if needed, then writes to the active segment.
    fn write_locked(
        &self,
        g: &mut Inner,
        records: &[u8],
        appended: &[AppendedBatch],
        last_offset: i64,
        now_ms: i64,
        config: &LogConfig,
    ) -> Result<()> {
        if g.active().should_roll(records.len() as u64, last_offset, now_ms, config) {
            self.roll_locked(g).map_err(|e| self.err(e))?;
        }
        let was_open = g.active().is_log_file_open();
        let written = g.active_mut().append(records, appended, now_ms, config);
        let opened = !was_open && g.active().is_log_file_open();
        let n = g.segments.len();
        g.note_use(n - 1, opened);
        written.map_err(|e| self.err(e))
    }

    /// Starts a new active segment at the LEO: the rolled segment's index entries are written
    /// first (its files complete before it is inactive), the new `.log` created, the
    /// directory fsynced. The rolled segment keeps its `.log` open as the most recently read
    /// inactive file.
    fn roll_locked(&self, g: &mut Inner) -> Result<()> {
        let base = g.leo();
        g.active_mut().on_become_inactive()?;
        let seg = Segment::create(&self.dir, base, &g.config)?;
        g.segments.push(seg);
        let rolled = g.segments.len() - 2;
        g.note_use(rolled, true);
        self.sync_dir_locked(g)
    }

    /// fsyncs the directory (and, if it is new, its entry in the data directory) under the
    /// lock.
    fn sync_dir_locked(&self, g: &mut Inner) -> Result<()> {
        sync_dir(&self.dir)?;
        self.sync_entry(g.dir_state == DirState::Unsynced)?;
        g.dir_state = DirState::Synced;
        Ok(())
    }

    /// Creates the directory and the active segment's `.log` of a log that has neither yet
    /// (`DirState::Absent`): the first write to a new log. Called under the lock by every
    /// operation that writes a file.
    fn materialize(&self, g: &mut Inner) -> Result<()> {
        if g.dir_state != DirState::Absent {
            return Ok(());
        }
        std::fs::create_dir_all(&self.dir).ctx(&self.dir)?;
        g.active_mut().create_file()?;
        g.dir_state = DirState::Unsynced;
        Ok(())
    }

    /// fsyncs the data directory when `new_dir` (the partition directory's entry in it).
    fn sync_entry(&self, new_dir: bool) -> Result<()> {
        match self.dir.parent() {
            Some(parent) if new_dir => sync_dir(parent),
            _ => Ok(()),
        }
    }

    /// Appends batches fetched from the leader, keeping their offsets; they must continue the
    /// log: each base offset at or above the LEO / the previous batch's end (a compacted
    /// leader's log has gaps, Kafka's monotonic rule). A partial batch at the end of the data
    /// is ignored (fetch responses may end mid-batch). Empty data appends nothing.
    pub fn append_as_follower(&self, records: Vec<u8>) -> Result<AppendResult> {
        let (batches, valid_end) = self.validate(&records, u64::MAX, true, false, None)?;
        let mut g = self.lock_open()?;
        let config = Arc::clone(&g.config);
        let leo = g.leo();
        if batches.is_empty() {
            return Ok(AppendResult {
                base_offset: leo,
                last_offset: leo - 1,
                record_count: 0,
                batch_count: 0,
                max_timestamp: -1,
                log_append_time: -1,
                log_start_offset: g.log_start_offset,
                duplicate: false,
                size_bytes: 0,
            });
        }
        let mut expected = leo;
        let base_offset = batches[0].header.base_offset;
        let mut appended = Vec::with_capacity(batches.len());
        let mut record_count = 0i64;
        let mut max_timestamp = -1i64;
        for v in &batches {
            let h = v.header;
            if h.base_offset < expected {
                return Err(self.err(LogError::NonContiguousAppend {
                    tp: Tp::default(),
                    expected,
                    received: h.base_offset,
                }));
            }
            expected = h.next_offset();
            record_count += i64::from(h.records_count);
            max_timestamp = max_timestamp.max(h.max_timestamp);
            appended.push(AppendedBatch {
                rel_position: v.position,
                size: v.size,
                base_offset: h.base_offset,
                last_offset: h.last_offset(),
                max_timestamp: h.max_timestamp,
                offset_of_max_timestamp: if h.is_log_append_time() {
                    h.base_offset
                } else {
                    h.base_offset + i64::from(v.offset_delta_of_max)
                },
            });
        }
        let data = &records[..valid_end as usize];
        // Followers have no clock argument: the batches' own timestamps age the segment.
        let now_ms = max_timestamp.max(0);
        self.materialize(&mut g).map_err(|e| self.err(e))?;
        for v in &batches {
            g.epochs.assign(v.header.partition_leader_epoch, v.header.base_offset).map_err(|e| self.err(e))?;
        }
        self.write_locked(&mut g, data, &appended, expected - 1, now_ms, &config)?;
        for v in &batches {
            if v.header.has_producer_id() {
                let marker =
                    if v.header.is_control() { EndTxnMarker::parse(&records[v.position as usize..]) } else { None };
                g.producers.apply(&ProducerBatch::from_header(&v.header, marker));
            }
        }
        g.unflushed_messages += record_count;
        let result = AppendResult {
            base_offset,
            last_offset: expected - 1,
            record_count,
            batch_count: i64::try_from(batches.len()).unwrap_or(i64::MAX),
            max_timestamp,
            log_append_time: -1,
            log_start_offset: g.log_start_offset,
            duplicate: false,
            size_bytes: valid_end,
        };
        let flush_now = g.unflushed_messages >= config.flush_messages;
        drop(g);
        if flush_now {
            self.flush_scope(true, now_ms)?;
        }
        Ok(result)
    }

    /// Whole batches from `fetch_offset`: up to `max_bytes` (but the first batch whole if
    /// `min_one_message`), ending below `max_offset` (exclusive; the HW for consumers, the LEO
    /// if `None`). `None` when nothing is available. Out of `[log start, LEO]` is an error.
    pub fn read(
        &self,
        fetch_offset: i64,
        max_bytes: u64,
        max_offset: Option<i64>,
        min_one_message: bool,
    ) -> Result<Option<FileRegion>> {
        let mut g = self.lock_open()?;
        let leo = g.leo();
        if fetch_offset < g.log_start_offset || fetch_offset > leo {
            return Err(self.err(LogError::OffsetOutOfRange {
                tp: Tp::default(),
                offset: fetch_offset,
                log_start: g.log_start_offset,
                log_end: leo,
            }));
        }
        let upper = max_offset.unwrap_or(leo).min(leo);
        if fetch_offset >= upper {
            return Ok(None);
        }
        let first = g.segments.partition_point(|s| s.base_offset <= fetch_offset).saturating_sub(1);
        for i in first..g.segments.len() {
            let seg = &mut g.segments[i];
            if seg.base_offset >= upper {
                break;
            }
            let from = fetch_offset.max(seg.base_offset);
            let was_open = seg.is_log_file_open();
            let read = seg.read(from, max_bytes, upper, min_one_message);
            let next_offset = seg.next_offset;
            let opened = !was_open && seg.is_log_file_open();
            g.note_use(i, opened);
            if let Some(r) = read.map_err(|e| self.err(e))? {
                return Ok(Some(r));
            }
            if from < next_offset {
                return Ok(None);
            }
        }
        Ok(None)
    }

    /// The exclusive upper offset of a region `read` returned: the offset of the batch after it,
    /// or its segment's next offset. None when the segment is gone (deleted or rolled away since).
    pub fn offset_after(&self, region: &FileRegion) -> Result<Option<i64>> {
        let mut g = self.lock_open()?;
        let Some(i) = g.segments.iter().position(|s| s.holds(region)) else { return Ok(None) };
        let was_open = g.segments[i].is_log_file_open();
        let r = g.segments[i].offset_at(region.position + region.length);
        let opened = !was_open && g.segments[i].is_log_file_open();
        g.note_use(i, opened);
        r.map(Some).map_err(|e| self.err(e))
    }

    /// ListOffsets by timestamp: the first record at or after the log start whose timestamp
    /// is >= `timestamp_ms`, as `(offset, timestamp)`.
    pub fn offset_for_timestamp(&self, timestamp_ms: i64) -> Result<Option<(i64, i64)>> {
        let mut g = self.lock_open()?;
        let log_start = g.log_start_offset;
        for i in 0..g.segments.len() {
            let seg = &mut g.segments[i];
            if seg.next_offset <= log_start || seg.max_timestamp < timestamp_ms {
                continue;
            }
            let was_open = seg.is_log_file_open();
            let found = seg.find_offset_by_timestamp(timestamp_ms, log_start);
            let opened = !was_open && seg.is_log_file_open();
            g.note_use(i, opened);
            if let Some(found) = found.map_err(|e| self.err(e))? {
                return Ok(Some(found));
            }
        }
        Ok(None)
    }

    /// `(timestamp, offset)` of the record with the largest timestamp (first such record);
    /// `(-1, -1)` for an empty log. ListOffsets MAX_TIMESTAMP (-3).
    pub fn max_timestamp(&self) -> (i64, i64) {
        let g = self.lock();
        let mut best = (-1i64, -1i64);
        for seg in &g.segments {
            if seg.size > 0 && seg.next_offset > g.log_start_offset && seg.max_timestamp > best.0 {
                best = (seg.max_timestamp, seg.offset_of_max_timestamp);
            }
        }
        best
    }

    pub fn end_offset_for_epoch(&self, epoch: i32) -> (i32, i64) {
        let g = self.lock();
        let leo = g.leo();
        g.epochs.end_offset_for(epoch, leo)
    }

    /// Lock-free (published after every locked operation; a follower round reads it for
    /// every partition it lists).
    pub fn latest_epoch(&self) -> Option<i32> {
        let e = self.published.latest_epoch.load(Ordering::Acquire);
        (e >= 0).then_some(e)
    }

    pub fn epoch_entries(&self) -> Vec<(i32, i64)> {
        self.lock().epochs.entries().to_vec()
    }

    /// Removes everything from `offset` on (at a batch boundary: a batch holding `offset` goes
    /// whole). A follower calls this after OffsetForLeaderEpoch. Below the log start, the log
    /// is emptied and restarted at `offset`.
    pub fn truncate_to(&self, offset: i64) -> Result<()> {
        let mut g = self.lock_open()?;
        if offset >= g.leo() {
            return Ok(());
        }
        if offset < g.log_start_offset {
            return self.truncate_fully_locked(&mut g, offset);
        }
        self.truncate_locked(&mut g, offset).map_err(|e| self.err(e))?;
        if g.leo() < g.log_start_offset {
            // The batch holding `offset` started below the log start (DeleteRecords moved it
            // mid-batch): nothing at or above the log start survives.
            let start = g.log_start_offset;
            self.truncate_fully_locked(&mut g, start)?;
        }
        Ok(())
    }

    fn truncate_locked(&self, g: &mut Inner, offset: i64) -> Result<()> {
        let keep = g.segments.partition_point(|s| s.base_offset < offset).max(1);
        let removed: Vec<Segment> = g.segments.drain(keep..).collect();
        for s in &removed {
            s.delete_files()?;
        }
        let was_active = removed.is_empty();
        let last = g.active_mut();
        last.truncate_to(offset)?;
        if !was_active {
            last.make_active();
        }
        let leo = g.leo();
        g.epochs.truncate_from_end(leo)?;
        g.high_watermark = g.high_watermark.min(leo);
        g.generation += 1;
        if g.recovery_point > leo {
            g.recovery_point = leo;
            write_single_offset(&self.dir.join(RECOVERY_POINT_FILE), leo)?;
        }
        let log_start = g.log_start_offset;
        g.producers = recovery::rebuild_producer_state(&mut g.segments, log_start)?;
        self.lower_cleaner_checkpoint(g, leo)
    }

    /// Data at and above `offset` is gone: nothing there is clean any more (Kafka's
    /// `maybeTruncateCheckpoint`).
    fn lower_cleaner_checkpoint(&self, g: &mut Inner, offset: i64) -> Result<()> {
        if g.cleaner_checkpoint > offset {
            g.cleaner_checkpoint = offset;
            write_single_offset(&self.dir.join(CLEANER_CHECKPOINT_FILE), offset)?;
        }
        Ok(())
    }

    /// Deletes all data and restarts the log empty at `offset` (log start = LEO = HW = offset).
    pub fn truncate_fully_and_start_at(&self, offset: i64) -> Result<()> {
        let mut g = self.lock_open()?;
        self.truncate_fully_locked(&mut g, offset)
    }

    fn truncate_fully_locked(&self, g: &mut Inner, offset: i64) -> Result<()> {
        let run = |g: &mut Inner| -> Result<()> {
            if offset < 0 {
                return Err(LogError::OffsetOutOfRange {
                    tp: Tp::default(),
                    offset,
                    log_start: g.log_start_offset,
                    log_end: g.leo(),
                });
            }
            self.materialize(g)?;
            write_single_offset(&self.dir.join(LOG_START_FILE), offset)?;
            for s in g.segments.drain(..) {
                s.delete_files()?;
            }
            let seg = Segment::create(&self.dir, offset, &g.config)?;
            g.segments.push(seg);
            g.log_start_offset = offset;
            g.high_watermark = offset;
            g.recovery_point = offset;
            g.generation += 1;
            write_single_offset(&self.dir.join(RECOVERY_POINT_FILE), offset)?;
            g.epochs.clear()?;
            g.producers.clear();
            g.cleaner_checkpoint = offset;
            write_single_offset(&self.dir.join(CLEANER_CHECKPOINT_FILE), offset)?;
            self.sync_dir_locked(g)
        };
        run(g).map_err(|e| self.err(e))
    }

    /// DeleteRecords: raises the log start offset to `offset` (`-1` means the HW), which must
    /// not exceed the HW, and deletes the segments entirely below it. Returns the log start.
    pub fn delete_records_before(&self, offset: i64) -> Result<i64> {
        let mut g = self.lock_open()?;
        let offset = if offset == -1 { g.high_watermark } else { offset };
        if offset < 0 || offset > g.high_watermark {
            return Err(self.err(LogError::OffsetOutOfRange {
                tp: Tp::default(),
                offset,
                log_start: g.log_start_offset,
                log_end: g.high_watermark,
            }));
        }
        if offset > g.log_start_offset {
            self.set_log_start_locked(&mut g, offset).map_err(|e| self.err(e))?;
            self.delete_oldest_while(&mut g, |_, next_base, _| next_base.is_some_and(|nb| nb <= offset))
                .map_err(|e| self.err(e))?;
        }
        Ok(g.log_start_offset)
    }

    /// Persists a higher log start offset and trims the state that hangs off it.
    fn set_log_start_locked(&self, g: &mut Inner, offset: i64) -> Result<()> {
        if offset <= g.log_start_offset {
            return Ok(());
        }
        self.materialize(g)?;
        write_single_offset(&self.dir.join(LOG_START_FILE), offset)?;
        g.log_start_offset = offset;
        g.high_watermark = g.high_watermark.max(offset);
        g.epochs.truncate_from_start(offset)?;
        g.producers.truncate_head(offset);
        Ok(())
    }

    /// Deletes segments from the oldest while `pred(segment, next segment's base, running
    /// total size)` holds; never the active one. Returns how many went.
    fn delete_oldest_while(
        &self,
        g: &mut Inner,
        mut pred: impl FnMut(&Segment, Option<i64>, u64) -> bool,
    ) -> Result<usize> {
        let mut total: u64 = g.segments.iter().map(|s| s.size).sum();
        let mut n = 0;
        while n + 1 < g.segments.len() {
            let s = &g.segments[n];
            if !pred(s, Some(g.segments[n + 1].base_offset), total) {
                break;
            }
            total -= s.size;
            n += 1;
        }
        if n == 0 {
            return Ok(0);
        }
        let new_start = g.segments[n].base_offset;
        self.set_log_start_locked(g, new_start)?;
        for s in g.segments.drain(..n) {
            s.delete_files()?;
        }
        Ok(n)
    }

    /// How many of the oldest segments retention removes: those entirely below the log
    /// start offset, then, when `cleanup.policy` contains `delete`, those older than
    /// `retention.ms` (by their largest timestamp) and then those beyond `retention.bytes`;
    /// never the active segment and never a segment not entirely below the HW. Returns
    /// (segments below the log start, segments in all).
    fn retention_due(g: &Inner, now_ms: i64) -> (usize, usize) {
        let segs = &g.segments;
        let config = &g.config;
        let ends_at_or_below = |i: usize, limit: i64| i + 1 < segs.len() && segs[i + 1].base_offset <= limit;
        let mut total: u64 = segs.iter().map(|s| s.size).sum();
        let mut n = 0;
        while ends_at_or_below(n, g.log_start_offset) {
            total -= segs[n].size;
            n += 1;
        }
        let below_start = n;
        // Tiered storage: the local log keeps local.retention.* (which default to
        // retention.*), and never a segment not yet entirely copied.
        let (retention_ms, retention_bytes, limit_offset) = if config.remote_storage_enable {
            (
                config.effective_local_retention_ms(),
                config.effective_local_retention_bytes(),
                g.high_watermark.min(g.highest_remote_offset.saturating_add(1)),
            )
        } else {
            (config.retention_ms, config.retention_bytes, g.high_watermark)
        };
        if (config.cleanup_delete || config.remote_storage_enable) && retention_ms >= 0 {
            while ends_at_or_below(n, limit_offset) && now_ms.saturating_sub(segs[n].largest_timestamp()) > retention_ms
            {
                total -= segs[n].size;
                n += 1;
            }
        }
        if (config.cleanup_delete || config.remote_storage_enable) && retention_bytes >= 0 {
            let limit = u64::try_from(retention_bytes).unwrap_or(0);
            while ends_at_or_below(n, limit_offset) && total > limit && total - limit >= segs[n].size {
                total -= segs[n].size;
                n += 1;
            }
        }
        (below_start, n)
    }

    /// Retention: deletes the segments `retention_due` selects, oldest first; with
    /// `retention.archive` or `iceberg.enable` only those below the log start offset (the
    /// archiver or the table writer raises it once what `retention_plan` lists is archived
    /// or in the table). Also expires idle producer ids.
    /// Returns the number of segments deleted.
    pub fn enforce_retention(&self, now_ms: i64) -> Result<usize> {
        let mut g = self.lock_open()?;
        let (below_start, due) = Self::retention_due(&g, now_ms);
        let n = if g.config.retention_archive || g.config.iceberg_enable { below_start } else { due };
        let expiration_ms = g.config.producer_id_expiration_ms;
        let run = |g: &mut Inner| -> Result<usize> {
            let mut seen = 0;
            let deleted = self.delete_oldest_while(g, |_, _, _| {
                seen += 1;
                seen <= n
            })?;
            g.producers.expire(now_ms, expiration_ms);
            Ok(deleted)
        };
        run(&mut g).map_err(|e| self.err(e))
    }

    /// The segments time/size retention would delete now (whatever `retention.archive`
    /// says), oldest first, as offset ranges `[first, end)`: `first` is the segment's base
    /// offset or the log start offset if that is higher, `end` the next segment's base.
    pub fn retention_plan(&self, now_ms: i64) -> Result<Vec<(i64, i64)>> {
        let g = self.lock_open()?;
        let (below_start, due) = Self::retention_due(&g, now_ms);
        Ok((below_start..due)
            .map(|i| (g.segments[i].base_offset.max(g.log_start_offset), g.segments[i + 1].base_offset))
            .collect())
    }

    /// Tiered storage: the last offset copied to remote storage (see `Inner::highest_remote_offset`).
    pub fn set_highest_remote_offset(&self, offset: i64) {
        self.lock().highest_remote_offset = offset;
    }

    pub fn highest_remote_offset(&self) -> i64 {
        self.lock().highest_remote_offset
    }

    /// Tiered storage: the first offset of the remote copies (see `Inner::remote_log_start`).
    pub fn set_remote_log_start(&self, offset: i64) {
        self.lock().remote_log_start = offset;
    }

    pub fn remote_log_start(&self) -> i64 {
        self.lock().remote_log_start
    }

    /// Tiered storage of a compacted topic: the rolled segments the cleaner has cleaned
    /// (entirely below the cleaner checkpoint and the last stable offset), oldest first, as
    /// `(base offset, last offset, size)`. The cleaner's output is what is copied: a segment
    /// a later pass rewrites comes back here with another size or range and is copied again,
    /// its earlier copies then being obsolete.
    pub fn cleaned_segments(&self) -> Result<Vec<(i64, i64, u64)>> {
        let g = self.lock_open()?;
        let lso = g.producers.first_unstable_offset().unwrap_or(i64::MAX).min(g.high_watermark);
        let limit = lso.min(g.cleaner_checkpoint);
        Ok(g.segments
            .windows(2)
            .filter(|w| w[1].base_offset <= limit && w[0].size > 0 && w[1].base_offset > g.log_start_offset)
            .map(|w| (w[0].base_offset, w[1].base_offset - 1, w[0].size))
            .collect())
    }

    /// Tiered storage, a follower whose log restarted (empty) at `start` after the last
    /// copied offset: the producer state and leader epoch the copy of the segment ending
    /// just before it recorded (its `.snapshot`, taken at `start`, and the last entry of its
    /// epoch checkpoint), so transactions, idempotent producers and divergence checks go on
    /// as on the leader. Does nothing unless the log is still empty at `start`; a snapshot
    /// that is not intact or not taken at `start` is ignored (returns false).
    pub fn restore_copied_state(&self, start: i64, snapshot: &[u8], epoch: Option<i32>) -> Result<bool> {
        let mut g = self.lock_open()?;
        if g.leo() != start || g.log_start_offset != start {
            return Ok(false);
        }
        let Some(m) = ProducerStateManager::from_snapshot_bytes(snapshot, start) else { return Ok(false) };
        g.producers = m;
        if let Some(e) = epoch.filter(|e| *e >= 0) {
            if g.epochs.latest_epoch().is_none() {
                g.epochs.assign(e, start).map_err(|e| self.err(e))?;
            }
        }
        Ok(true)
    }

    /// (base offset, bytes) of the segments tiered storage may copy now: rolled (not the active
    /// one), ending at or after `from` (the first offset not yet copied) and entirely
    /// below the last stable offset, oldest first.
    pub fn upload_candidates(&self, from: i64) -> Result<Vec<(i64, u64)>> {
        let g = self.lock_open()?;
        let lso = g.producers.first_unstable_offset().unwrap_or(i64::MAX).min(g.high_watermark);
        Ok(g.segments
            .windows(2)
            .filter(|w| w[1].base_offset > from && w[1].base_offset <= lso && w[0].size > 0)
            .map(|w| (w[0].base_offset, w[0].size))
            .collect())
    }

    /// What tiered storage copies of the rolled segment at `base_offset` (`None` if there is
    /// no such segment now, or it is the active one): its file handle (read without the
    /// lock; valid if retention deletes the segment meanwhile) and the index, transaction
    /// index, producer state and leader epochs as of now.
    pub fn upload_segment(&self, base_offset: i64) -> Result<Option<UploadSegment>> {
        let mut g = self.lock_open()?;
        let Some(i) = g.segments.iter().position(|s| s.base_offset == base_offset) else {
            return Ok(None);
        };
        if i + 1 >= g.segments.len() {
            return Ok(None);
        }
        let next_base = g.segments[i + 1].base_offset;
        let file = g.segments[i].reader().map_err(|e| self.err(e))?;
        let s = &g.segments[i];
        let mut offset_index = Vec::with_capacity(s.offset_index_len() * 8);
        for k in 0..s.offset_index_len() {
            let (o, pos) = s.offset_index_entry(k);
            offset_index.extend_from_slice(&((o - base_offset) as u32).to_be_bytes());
            offset_index.extend_from_slice(&pos.to_be_bytes());
        }
        let mut time_index = Vec::with_capacity(s.time_index_len() * 12);
        for k in 0..s.time_index_len() {
            let (ts, o) = s.time_index_entry(k);
            time_index.extend_from_slice(&ts.to_be_bytes());
            time_index.extend_from_slice(&((o - base_offset) as u32).to_be_bytes());
        }
        let size = s.size;
        let max_timestamp = s.largest_timestamp();
        let end_offset = next_base - 1;
        let aborted = g.producers.aborted_between(base_offset, next_base);
        let producer_snapshot = g.producers.as_of(end_offset).snapshot_bytes(next_base);
        let entries = g.epochs.entries();
        let mut leader_epochs: Vec<(i32, i64)> = Vec::new();
        for (k, &(epoch, start)) in entries.iter().enumerate() {
            let next_start = entries.get(k + 1).map_or(i64::MAX, |e| e.1);
            if next_start <= base_offset || start > end_offset {
                continue;
            }
            leader_epochs.push((epoch, start.max(base_offset)));
        }
        Ok(Some(UploadSegment {
            base_offset,
            end_offset,
            size,
            file,
            offset_index,
            time_index,
            aborted,
            producer_snapshot,
            leader_epochs,
            max_timestamp,
        }))
    }

    /// One log-cleaner pass (see `cleaner.rs` for the algorithm, file formats and crash
    /// story). Does nothing (zero counts) unless `cleanup.policy` contains `compact`, some
    /// inactive segment below the HW is cleanable, and the dirty ratio reaches
    /// `min.cleanable.dirty.ratio`, `max.compaction.lag.ms` is exceeded, or `force`. Another
    /// pass already running on this log also makes it return at once. The log lock is held
    /// only to plan the pass and to swap the cleaned segments in, not while rewriting.
    pub fn compact(&self, now_ms: i64, force: bool) -> Result<CompactionResult> {
        let plan = match self.plan_compaction(now_ms, force)? {
            Planned::Run(plan) => plan,
            Planned::Skip { dirty_ratio } => {
                let g = self.lock();
                return Ok(CompactionResult {
                    cleaned_up_to: g.cleaner_checkpoint,
                    dirty_ratio,
                    ..CompactionResult::default()
                });
            }
        };
        let rewritten = self.rewrite_for_compaction(&plan, now_ms);
        self.finish_compaction(&plan, rewritten, now_ms)
    }

    /// The unlocked middle phase of `compact`: offset map and `.cleaned` segments.
    pub(crate) fn rewrite_for_compaction(
        &self,
        plan: &CompactionPlan,
        now_ms: i64,
    ) -> Result<(Vec<cleaner::CleanedGroup>, cleaner::Counts)> {
        let aborted = cleaner::AbortedRanges::new(&plan.aborted);
        let map = cleaner::build_offset_map(&plan.segments, &aborted)?;
        let cx = CleanContext {
            dir: &self.dir,
            config: &plan.config,
            now_ms,
            map: &map,
            producer_last_offsets: &plan.producer_last_offsets,
            aborted: &aborted,
            keep_tombstones: plan.keep_tombstones,
        };
        let mut counts = cleaner::Counts::default();
        let mut groups = Vec::new();
        for r in cleaner::group_segments(&plan.segments, plan.config.segment_bytes) {
            let base = plan.segments[r.start].base_offset;
            match cleaner::clean_group(&plan.segments[r], &cx, &mut counts) {
                Ok(group) => groups.push(group),
                Err(e) => {
                    cleaner::discard(&self.dir, base);
                    for group in &groups {
                        cleaner::discard(&self.dir, group.base_offset);
                    }
                    return Err(e);
                }
            }
        }
        Ok((groups, counts))
    }

    /// The locked last phase of `compact`: swap the cleaned groups in (or discard them if
    /// the log changed under the pass) and move the cleaner checkpoint.
    pub(crate) fn finish_compaction(
        &self,
        plan: &CompactionPlan,
        rewritten: Result<(Vec<cleaner::CleanedGroup>, cleaner::Counts)>,
        now_ms: i64,
    ) -> Result<CompactionResult> {
        let mut g = self.lock();
        g.cleaning = false;
        let changed = g.closed || g.generation != plan.generation;
        let (groups, counts) = match rewritten {
            Ok(r) => r,
            // A truncation or close under the pass explains a failed read: nothing was done.
            Err(_) if changed => {
                return Ok(CompactionResult { cleaned_up_to: g.cleaner_checkpoint, ..CompactionResult::default() })
            }
            Err(e) => return Err(self.err(e)),
        };
        let mut result = CompactionResult {
            records_removed: counts.records_removed,
            tombstones_removed: counts.tombstones_removed,
            dirty_ratio: plan.dirty_ratio,
            ..CompactionResult::default()
        };
        if changed {
            for group in &groups {
                cleaner::discard(&self.dir, group.base_offset);
            }
            if g.closed {
                return Err(self.err(LogError::Closed { tp: Tp::default(), dir: self.dir.clone() }));
            }
            result.cleaned_up_to = g.cleaner_checkpoint;
            return Ok(CompactionResult { records_removed: 0, tombstones_removed: 0, ..result });
        }
        let mut complete = true;
        g.earliest_horizon = counts.earliest_horizon;
        for (i, group) in groups.iter().enumerate() {
            if let Err(e) = self.swap_group_locked(&mut g, group, &plan.config, now_ms, &mut result, &mut complete) {
                // A group whose `.log.swap` exists is committed: recovery finishes it. The
                // others never started.
                for rest in &groups[i..] {
                    if !Segment::paths(&self.dir, rest.base_offset, cleaner::SWAP_SUFFIX)[0].exists() {
                        cleaner::discard(&self.dir, rest.base_offset);
                    }
                }
                return Err(self.err(e));
            }
        }
        if complete && plan.end_offset > g.cleaner_checkpoint {
            g.cleaner_checkpoint = plan.end_offset;
            write_single_offset(&self.dir.join(CLEANER_CHECKPOINT_FILE), plan.end_offset).map_err(|e| self.err(e))?;
        }
        result.cleaned_up_to = g.cleaner_checkpoint;
        Ok(result)
    }

    /// Swaps one cleaned group in, if its segments are still the ones that were cleaned
    /// (retention may have deleted some meanwhile: the group is then discarded and
    /// `complete` cleared).
    fn swap_group_locked(
        &self,
        g: &mut Inner,
        group: &cleaner::CleanedGroup,
        config: &LogConfig,
        now_ms: i64,
        result: &mut CompactionResult,
        complete: &mut bool,
    ) -> Result<()> {
        let n = group.originals.len();
        let at = g.segments.iter().position(|s| s.base_offset == group.base_offset);
        let unchanged = at.is_some_and(|i| {
            i + n < g.segments.len()
                && group
                    .originals
                    .iter()
                    .zip(&g.segments[i..i + n])
                    .all(|(&(b, size), s)| s.base_offset == b && s.size == size)
        });
        let (Some(i), true) = (at, unchanged) else {
            cleaner::discard(&self.dir, group.base_offset);
            *complete = false;
            return Ok(());
        };
        cleaner::swap_in(&self.dir, group)?;
        let (mut seg, suspicious) = Segment::open(&self.dir, group.base_offset, config, now_ms, true)?;
        if suspicious {
            seg.recover(config, now_ms, true)?;
            seg.flush()?;
        }
        seg.on_become_inactive()?;
        seg.close_log_file();
        let before: u64 = g.segments[i..i + n].iter().map(|s| s.size).sum();
        drop(g.segments.splice(i..i + n, [seg]));
        result.segments_cleaned += n;
        result.bytes_before += before;
        result.bytes_after += group.size;
        Ok(())
    }

    /// The locked first phase of `compact`: what to clean, if anything.
    pub(crate) fn plan_compaction(&self, now_ms: i64, force: bool) -> Result<Planned> {
        let mut g = self.lock_open()?;
        let config = Arc::clone(&g.config);
        if !config.cleanup_compact || g.cleaning {
            return Ok(Planned::Skip { dirty_ratio: 0.0 });
        }
        let leo = g.leo();
        let first_dirty = if (g.log_start_offset..=leo).contains(&g.cleaner_checkpoint) {
            g.cleaner_checkpoint
        } else {
            g.log_start_offset
        };
        // No open transaction is cleaned: stop at the first unstable offset.
        let limit =
            g.high_watermark.min(g.active().base_offset).min(g.producers.first_unstable_offset().unwrap_or(i64::MAX));
        let inactive = &g.segments[..g.segments.len() - 1];
        let start = inactive.partition_point(|s| s.next_offset <= g.log_start_offset);
        let mut end = start;
        while end < inactive.len() {
            let s = &inactive[end];
            let dirty = s.next_offset > first_dirty;
            let too_young = dirty
                && config.min_compaction_lag_ms > 0
                && now_ms.saturating_sub(s.largest_timestamp()) < config.min_compaction_lag_ms;
            if s.next_offset > limit || too_young {
                break;
            }
            end += 1;
        }
        if start == end {
            return Ok(Planned::Skip { dirty_ratio: 0.0 });
        }
        let range = &inactive[start..end];
        let total: u64 = range.iter().map(|s| s.size).sum();
        let dirty: u64 = range.iter().filter(|s| s.next_offset > first_dirty).map(|s| s.size).sum();
        let dirty_ratio = if total == 0 { 0.0 } else { dirty as f64 / total as f64 };
        let mut lag_due = false;
        if config.max_compaction_lag_ms < i64::MAX {
            for s in g.segments[start..end].iter_mut().filter(|s| s.next_offset > first_dirty) {
                // A one-off header read: a file opened for it is closed again.
                let was_open = s.is_log_file_open();
                let t = s.first_batch_timestamp();
                if !was_open {
                    s.close_log_file();
                }
                if let Some(t) = t.map_err(|e| self.err(e))? {
                    lag_due |= t > 0 && now_ms.saturating_sub(t) > config.max_compaction_lag_ms;
                }
            }
        }
        // Records only in remote storage may hold older values of a tombstone's key, which the
        // cleaner cannot remove: the tombstone stays (and its horizon starts no pass).
        let keep_tombstones =
            config.remote_storage_enable && g.remote_log_start >= 0 && g.remote_log_start < g.log_start_offset;
        let horizon_due = !keep_tombstones && g.earliest_horizon.is_some_and(|h| now_ms >= h);
        if !(force || horizon_due || (dirty > 0 && (dirty_ratio >= config.min_cleanable_dirty_ratio || lag_due))) {
            return Ok(Planned::Skip { dirty_ratio });
        }
        // The pass holds each file of its range through the snapshot until it is done; the
        // segments keep their own handles open or closed as they were.
        let mut segments = Vec::with_capacity(end - start);
        for s in &mut g.segments[start..end] {
            let was_open = s.is_log_file_open();
            let file = s.reader().map_err(|e| self.err(e))?;
            if !was_open {
                s.close_log_file();
            }
            segments.push(SegmentSnapshot {
                base_offset: s.base_offset,
                next_offset: s.next_offset,
                size: s.size,
                file,
                path: s.log_path.clone(),
                dirty: s.next_offset > first_dirty,
            });
        }
        let end_offset = g.segments[end - 1].next_offset;
        let producer_last_offsets =
            g.producers.entries().into_iter().map(|e| (e.producer_id, e.last_offset())).collect();
        let aborted = g.producers.aborted_between(g.log_start_offset, end_offset);
        g.cleaning = true;
        Ok(Planned::Run(CompactionPlan {
            config,
            segments,
            end_offset,
            dirty_ratio,
            producer_last_offsets,
            aborted,
            generation: g.generation,
            keep_tombstones,
        }))
    }

    /// Every non-control record in `[start_offset, max_offset)` (`None`: the LEO), at most
    /// `max_records` of them, as `(offset, timestamp, key, value)`, decompressed. Reads whole
    /// batches through [`Log::read`] (the lock is held per 1 MiB chunk, not for the scan).
    /// Offsets in compaction gaps are simply absent.
    pub fn read_records(
        &self,
        start_offset: i64,
        max_offset: Option<i64>,
        max_records: Option<usize>,
    ) -> Result<Vec<LogRecord>> {
        self.read_records_with(start_offset, max_offset, max_records, false)
    }

    /// As [`Log::read_records`], plus one entry per transaction marker (`marker` set, no key
    /// or value): what a coordinator loading its state from the log needs to replay
    /// transactional writes.
    pub fn read_records_with_markers(&self, start_offset: i64, max_offset: Option<i64>) -> Result<Vec<LogRecord>> {
        self.read_records_with(start_offset, max_offset, None, true)
    }

    fn read_records_with(
        &self,
        start_offset: i64,
        max_offset: Option<i64>,
        max_records: Option<usize>,
        markers: bool,
    ) -> Result<Vec<LogRecord>> {
        let mut out = Vec::new();
        let limit = max_records.unwrap_or(usize::MAX);
        let mut next = start_offset;
        let (log_start, leo) = (self.log_start_offset(), self.log_end_offset());
        if start_offset < log_start || start_offset > leo {
            return Err(self.err(LogError::OffsetOutOfRange {
                tp: Tp::default(),
                offset: start_offset,
                log_start,
                log_end: leo,
            }));
        }
        let upper = max_offset.map_or(leo, |m| m.min(leo));
        while next < upper && out.len() < limit {
            let Some(region) = self.read(next, READ_RECORDS_CHUNK, None, true)? else { break };
            let bytes = region.read_to_vec().map_err(|e| self.err(e))?;
            let mut done = false;
            let end = batch::scan(&mut SliceSource(&bytes), 0, Check::Framing, None, |v| {
                let h = v.header;
                if h.base_offset >= upper {
                    done = true;
                    return Ok(Control::Stop);
                }
                let b = &bytes[v.position as usize..(v.position + h.size()) as usize];
                if !h.is_control() {
                    batch::for_each_record(b, v.position, |offset, timestamp, r| {
                        if offset >= upper || out.len() >= limit {
                            done = true;
                            return Control::Stop;
                        }
                        if offset >= next {
                            out.push(LogRecord {
                                offset,
                                timestamp,
                                key: r.key.map(<[u8]>::to_vec),
                                value: r.value.map(<[u8]>::to_vec),
                                producer_id: h.producer_id,
                                transactional: h.is_transactional(),
                                marker: None,
                            });
                        }
                        Control::Continue
                    })?;
                } else if markers && h.base_offset >= next {
                    if let Some(m) = EndTxnMarker::parse(b) {
                        out.push(LogRecord {
                            offset: h.base_offset,
                            timestamp: h.max_timestamp,
                            key: None,
                            value: None,
                            producer_id: h.producer_id,
                            transactional: true,
                            marker: Some(m),
                        });
                    }
                }
                next = next.max(h.next_offset());
                Ok(if done { Control::Stop } else { Control::Continue })
            })
            .map_err(|e| self.err(e))?;
            if let Some(e) = end.error {
                return Err(self.err(e));
            }
            if done || end.batches == 0 {
                break;
            }
        }
        Ok(out)
    }

    /// Builds one batch from `(key, value)` pairs (timestamps = `now_ms`, no producer id,
    /// `codec`) and appends it with [`Log::append_as_leader`]. For the broker's own writes
    /// (group coordinator commits).
    pub fn append_records_as_leader(
        &self,
        records: &[KeyValue],
        leader_epoch: i32,
        now_ms: i64,
        codec: Codec,
    ) -> Result<AppendResult> {
        if records.is_empty() {
            return Err(self.err(LogError::invalid(0, "append_records_as_leader needs at least one record")));
        }
        let b = BatchBuilder::new().codec(codec).base_timestamp(now_ms).records(records.iter().map(|(k, v)| {
            let mut r = Rec::default();
            r.key.clone_from(k);
            r.value.clone_from(v);
            r
        }));
        self.append_as_leader(b.build(), leader_epoch, now_ms)
    }

    /// Rolls the active segment if it is non-empty and `segment.ms` (capped by
    /// `max.compaction.lag.ms` on compacted topics) has elapsed.
    pub fn maybe_roll(&self, now_ms: i64) -> Result<bool> {
        let mut g = self.lock_open()?;
        let config = Arc::clone(&g.config);
        let a = g.active();
        if a.size > 0 && a.rolling_base_ms.is_some_and(|t| now_ms - t >= config.roll_ms()) {
            self.roll_locked(&mut g).map_err(|e| self.err(e))?;
            return Ok(true);
        }
        Ok(false)
    }

    /// Flushes if `flush.messages` or `flush.ms` says so, and always flushes segments that
    /// were rolled since the last flush (Kafka flushes them asynchronously after a roll) so the
    /// recovery point keeps up. Returns whether anything was fsynced. Also the idle sweep of
    /// the "File descriptors" policy (it runs every `log.flush.scheduler.interval.ms`).
    pub fn maybe_flush(&self, now_ms: i64) -> Result<bool> {
        let (due, rolled_dirty) = {
            let mut g = self.lock_open()?;
            g.close_idle_files();
            let c = &g.config;
            let due = g.unflushed_messages > 0
                && (g.unflushed_messages >= c.flush_messages || now_ms.saturating_sub(g.last_flush_ms) >= c.flush_ms);
            let n = g.segments.len();
            let rolled_dirty = g.segments[..n - 1].iter().any(Segment::needs_flush);
            (due, rolled_dirty)
        };
        if due {
            self.flush_scope(true, now_ms)?;
            Ok(true)
        } else if rolled_dirty {
            self.flush_scope(false, now_ms)?;
            Ok(true)
        } else {
            Ok(false)
        }
    }

    /// fsyncs everything appended so far and advances the recovery point to the LEO.
    pub fn flush(&self) -> Result<()> {
        let now = self.lock().last_flush_ms;
        self.flush_scope(true, now)
    }

    /// fsync outside the lock: all segments (`include_active`) or only the rolled ones, then
    /// the directory if it holds entries not yet fsynced (`Inner::dir_unsynced`).
    fn flush_scope(&self, include_active: bool, now_ms: i64) -> Result<()> {
        let (handles, flushed, target, generation, dir_unsynced) = {
            let mut g = self.lock_open()?;
            if g.dir_state == DirState::Absent {
                return Ok(()); // nothing written yet
            }
            let n = g.segments.len();
            let upto = if include_active { n } else { n - 1 };
            let mut handles = Vec::new();
            let mut flushed = Vec::new();
            for i in 0..upto {
                let s = &mut g.segments[i];
                if s.needs_flush() || (include_active && i + 1 == n) {
                    flushed.push(s.base_offset);
                    match s.sync_targets() {
                        Ok(t) => handles.extend(t),
                        Err(e) => {
                            // An index write failed: what was collected is not flushed.
                            g.segments[..=i]
                                .iter_mut()
                                .filter(|s| flushed.contains(&s.base_offset))
                                .for_each(Segment::mark_unflushed);
                            return Err(self.err(e));
                        }
                    }
                }
            }
            let target = if include_active { g.leo() } else { g.active().base_offset };
            if include_active {
                g.unflushed_messages = 0;
                g.last_flush_ms = now_ms;
            }
            (handles, flushed, target, g.generation, g.dir_state == DirState::Unsynced)
        };
        for t in &handles {
            // A closed file is opened by path for its fsync; one deleted meanwhile needs none.
            if let Err(e) = t.sync(true) {
                let mut g = self.lock();
                for s in g.segments.iter_mut().filter(|s| flushed.contains(&s.base_offset)) {
                    s.mark_unflushed();
                }
                return Err(self.err(e));
            }
        }
        if dir_unsynced {
            sync_dir(&self.dir).map_err(|e| self.err(e))?;
            self.sync_entry(true).map_err(|e| self.err(e))?;
        }
        let mut g = self.lock();
        if dir_unsynced {
            g.dir_state = DirState::Synced;
        }
        if g.generation == generation && target > g.recovery_point && !g.closed {
            // Epochs assigned below the new recovery point must be on disk before it moves:
            // recovery rebuilds only those above it from the batches.
            g.epochs.write_if_dirty().map_err(|e| self.err(e))?;
            g.recovery_point = target;
            write_single_offset(&self.dir.join(RECOVERY_POINT_FILE), target).map_err(|e| self.err(e))?;
        }
        Ok(())
    }

    /// Replaces the configuration (existing segments keep their index sizes until rolled).
    pub fn update_config(&self, overrides: &HashMap<String, String>) -> Result<()> {
        let config = LogConfig::from_map(overrides).map_err(|e| self.err(e))?;
        let mut g = self.lock();
        g.config = Arc::new(config);
        Ok(())
    }

    /// `(epoch, last_seq, last_offset)` of a producer id.
    pub fn producer_state(&self, producer_id: i64) -> Option<(i16, i32, i64)> {
        let g = self.lock();
        g.producers.get(producer_id).map(|e| (e.epoch, e.last_seq(), e.last_offset()))
    }

    /// Whether `producer_id` has a transaction open on this partition under `epoch` (its
    /// first transactional batch is in the log and no marker has closed it yet).
    pub fn has_ongoing_transaction(&self, producer_id: i64, epoch: i16) -> bool {
        let g = self.lock();
        g.producers.get(producer_id).is_some_and(|e| e.epoch == epoch && e.current_txn_first_offset >= 0)
    }

    /// `(producer_id, epoch, last_seq, last_timestamp, first offset of last batch, coordinator
    /// epoch, first offset of its open transaction or -1)`, by id.
    pub fn active_producers(&self) -> Vec<(i64, i16, i32, i64, i64, i32, i64)> {
        let g = self.lock();
        g.producers
            .entries()
            .into_iter()
            .map(|e| {
                (
                    e.producer_id,
                    e.epoch,
                    e.last_seq(),
                    e.last_timestamp,
                    e.first_offset_of_last_batch(),
                    e.coordinator_epoch,
                    e.current_txn_first_offset,
                )
            })
            .collect()
    }

    /// Flushes, writes the producer snapshot, the recovery point and the clean-shutdown
    /// marker (last). Idempotent. Offsets stay readable afterwards; operations fail.
    pub fn close(&self) -> Result<()> {
        self.close_with(true)
    }

    /// A clean shutdown of many logs at once, in three steps with two `sync_filesystem`
    /// calls in all instead of some eight fsyncs per log: (1) `close_unsynced` on every log
    /// writes what `close` writes but the clean-shutdown marker, without fsyncs; (2)
    /// `sync_filesystem`; (3) `mark_clean_shutdown` on every log, then `sync_filesystem`
    /// again. A crash before (2) ends leaves no marker (the logs are recovered); a marker is
    /// durable only after everything it vouches for.
    pub fn close_unsynced(&self) -> Result<()> {
        self.close_with(false)
    }

    /// `close` (`durable`: every write fsynced, the marker last) or `close_unsynced`.
    fn close_with(&self, durable: bool) -> Result<()> {
        let mut g = self.lock();
        if g.closed {
            return Ok(());
        }
        if g.dir_state == DirState::Absent {
            g.closed = true; // never written: it opens again as the same empty log
            return Ok(());
        }
        let run = |g: &mut Inner| -> Result<()> {
            g.active_mut().on_become_inactive()?;
            if durable {
                for s in &mut g.segments {
                    s.flush()?;
                }
            }
            let leo = g.leo();
            g.producers.write_snapshot_as(&self.dir, leo, durable)?;
            g.epochs.write_if_dirty_as(durable)?;
            g.recovery_point = leo;
            write_single_offset_as(&self.dir.join(RECOVERY_POINT_FILE), leo, durable)?;
            if durable {
                write_single_offset(&self.dir.join(CLEAN_SHUTDOWN_FILE), leo)?;
                // The marker's write fsynced the directory; a new one's entry too, now.
                self.sync_entry(g.dir_state == DirState::Unsynced)?;
                g.dir_state = DirState::Synced;
            }
            Ok(())
        };
        let r = run(&mut g).map_err(|e| self.err(e));
        for s in &mut g.segments {
            s.close_log_file();
        }
        g.closed = true;
        g.clean_pending = !durable && r.is_ok();
        r
    }

    /// Step (3) of a batched clean shutdown (see `close_unsynced`): the clean-shutdown marker
    /// of a log `close_unsynced` closed without error, made durable by the caller's
    /// `sync_filesystem`. Nothing for a log that was never written or whose close failed.
    pub fn mark_clean_shutdown(&self) -> Result<()> {
        let mut g = self.lock();
        if !std::mem::take(&mut g.clean_pending) {
            return Ok(());
        }
        let leo = g.leo();
        write_single_offset_as(&self.dir.join(CLEAN_SHUTDOWN_FILE), leo, false).map_err(|e| self.err(e))
    }

    /// Closes the log and removes its directory (DeleteTopics). Regions already handed out
    /// keep their files open until dropped.
    pub fn delete(&self) -> Result<()> {
        {
            let mut g = self.lock();
            g.closed = true;
        }
        match std::fs::remove_dir_all(&self.dir) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(LogError::io(&self.dir, e)).ctx_tp(&self.tp),
        }
    }

    pub fn is_closed(&self) -> bool {
        self.lock().closed
    }

    /// Descriptors the log's segments hold themselves (regions handed out and a cleaning pass
    /// hold their own), for tests and metrics. See "File descriptors".
    pub fn open_file_count(&self) -> usize {
        self.lock().segments.iter().map(Segment::open_descriptors).sum()
    }

    /// Index entry counts of every segment (offset index, time index), for tests and metrics.
    pub fn index_entry_counts(&self) -> Vec<(usize, usize)> {
        self.lock().segments.iter().map(|s| (s.offset_index_len(), s.time_index_len())).collect()
    }
}

trait TpContext<T> {
    fn ctx_tp(self, tp: &str) -> Result<T>;
}

impl<T> TpContext<T> for Result<T> {
    fn ctx_tp(self, tp: &str) -> Result<T> {
        self.map_err(|e| e.in_partition(tp))
    }
}

impl Drop for Log {
    fn drop(&mut self) {
        // No implicit close: an unclosed log is recovered on the next open, which is the
        // behaviour a crash would produce anyway (the active segment's index files, which lag
        // its memory, are rebuilt then).
    }
}

fn _assert_send_sync() {
    fn is<T: Send + Sync>() {}
    is::<Log>();
}

#[cfg(test)]
#[path = "log_tests.rs"]
mod tests;
