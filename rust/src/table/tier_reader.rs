//! The table as the tier (a topic with `iceberg.enable` and `remote.storage.enable`): a Fetch
//! below the local log start is answered from the table's Parquet data files.
//!
//! # The view
//! [`TableTierView`] is a partition's data files as the table lists them, set by the control
//! plane (python/logbroker/broker/table_tier.py) after each of its commits and whenever
//! another writer's snapshot may have replaced files: each file's first and last offset of
//! the partition, its local path, sorted by first offset. A file holds one Kafka partition
//! (table/data_files.rs), but a partition's files may overlap in offsets (a commit's records
//! of two days go to two files), so a read takes a *window*: the first file whose last
//! offset reaches the fetch offset, and every file overlapping it.
//!
//! # A read, at fetch offset x
//! 1. The window: F, the first file (by first offset) whose last offset is at or past x; the
//!    files overlapping `[x, F's last offset]`.
//! 2. From each, the partition's rows with offsets in that range, at most about the byte
//!    budget's worth: row groups pruned by their offset statistics, a row filter on offset
//!    and partition, and the page index so the other columns' pages outside it are skipped.
//! 3. Merged in offset order and encoded as record batches (magic 2, uncompressed, no
//!    producer id: only committed records are in the table, so they are plain records and a
//!    read_uncommitted consumer sees what a read_committed one does), with the offsets,
//!    timestamps and timestamp type, keys, values and headers the log had. Offsets the table
//!    lacks (control records, aborted transactions, records compaction removed) are gaps:
//!    a batch's offset deltas step over them, and the next batch may start past the offset
//!    fetched, as after log compaction.
//!
//! A window with no row at or after x moves on to the next file; past the last file the read
//! says so (`TierRead::Past`) and the fetch reads the local log from its start.
//!
//! # Threads and the cache
//! Reads block (files, decoding): they run on the reader's own threads. A fetch whose
//! window is not cached starts its read and parks, as for remote segments (the partition is
//! its `ReadWaiter`); the window's batches are cached by (partition, offset). A fetch takes
//! the batches its budget allows, and the rest of the window is cached under the offset
//! after them; a hit reads the window after it ahead, so a consumer reading on finds its next
//! fetch's bytes there.
//! The network threads never touch a file.

use std::collections::HashMap;
use std::fs::File;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex, OnceLock, PoisonError, Weak};

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Int32Type, Int64Type, TimestampMicrosecondType, TimestampMillisecondType, TimestampNanosecondType,
};
use arrow_array::{Array, BinaryArray, BooleanArray, Int64Array, ListArray, RecordBatch, StringArray};
use arrow_schema::{DataType, TimeUnit};
use bytes::Bytes;
use parquet::arrow::arrow_reader::{
    ArrowPredicateFn, ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder, RowFilter,
    RowSelection, RowSelector,
};
use parquet::arrow::ProjectionMask;
use parquet::file::page_index::column_index::ColumnIndexMetaData;
use parquet::file::statistics::Statistics;

use crate::batch::{BatchHeader, ATTRIBUTES_AT, CRC_AT, HEADER_LEN, TIMESTAMP_TYPE_BIT};
use crate::remote::cache::{ByteCache, Lookup, ReadWaiter};
use crate::varint::{write_varint, write_varlong};

/// A batch is closed once its records reach this many bytes.
pub const BATCH_BYTES: usize = 256 << 10;
/// A window holds at least this much: a fetch takes what its budget allows and the rest is
/// cached for the fetch that goes on from there (fewer, longer reads: a page of the file is
/// decompressed once per window that touches it).
pub const MIN_WINDOW_BYTES: u64 = 4 << 20;
/// Reader threads.
const THREADS: usize = 2;
/// Footers (with their page indexes) kept.
const FOOTERS: usize = 256;

/// One data file of a partition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableFile {
    /// The partition's first and last offset in the file (Iceberg's column bounds).
    pub min_offset: i64,
    pub max_offset: i64,
    /// Its local path.
    pub path: String,
}

/// A partition's data files, as a Fetch below the local log start reads them.
#[derive(Clone, Debug, Default)]
pub struct TableTierView {
    /// Sorted by (first offset, last offset).
    files: Vec<TableFile>,
    /// `reach[i]`: the largest last offset of `files[..=i]` (rising).
    reach: Vec<i64>,
    /// The files are being listed (a new leader): a fetch below the local log start gets no
    /// records for now.
    pub pending: bool,
}

impl TableTierView {
    pub fn new(mut files: Vec<TableFile>) -> TableTierView {
        files.sort_by_key(|f| (f.min_offset, f.max_offset));
        let mut reach = Vec::with_capacity(files.len());
        let mut top = i64::MIN;
        for f in &files {
            top = top.max(f.max_offset);
            reach.push(top);
        }
        TableTierView { files, reach, pending: false }
    }

    /// A view whose files are being listed.
    pub fn pending() -> TableTierView {
        TableTierView { pending: true, ..TableTierView::default() }
    }

    /// The first offset the table holds; -1 if it holds none.
    pub fn log_start_offset(&self) -> i64 {
        self.files.first().map_or(-1, |f| f.min_offset)
    }

    /// The last offset the table holds; -1 if none.
    pub fn last_offset(&self) -> i64 {
        self.reach.last().copied().unwrap_or(-1)
    }

    pub fn files(&self) -> &[TableFile] {
        &self.files
    }

    /// The window at `offset`: the files to read and the last offset to read them to; `None`
    /// when no file reaches `offset`.
    pub fn window(&self, offset: i64) -> Option<(Vec<&TableFile>, i64)> {
        let first = self.reach.partition_point(|&r| r < offset);
        let end = self.files.get(first)?.max_offset;
        let past = self.files.partition_point(|f| f.min_offset <= end);
        Some((self.files[first..past].iter().filter(|f| f.max_offset >= offset).collect(), end))
    }
}

pub enum TierRead {
    /// Record batches (at least one when asked `min_one`; empty when the budget allows none).
    Ready(Bytes),
    /// The window is being read; the waiter is told.
    Pending,
    /// The table holds nothing at or after the offset.
    Past,
    Failed(String),
}

#[derive(Default)]
pub struct TierStats {
    /// Windows read from data files, and the data files opened for them.
    pub windows: AtomicU64,
    pub file_reads: AtomicU64,
    pub errors: AtomicU64,
}

type Job = Box<dyn FnOnce() + Send>;

/// Reads windows of partitions' data files for fetches (one per broker).
pub struct TableReader {
    cache: ByteCache,
    footers: Mutex<HashMap<String, ArrowReaderMetadata>>,
    jobs: OnceLock<Mutex<mpsc::Sender<Job>>>,
    pub stats: TierStats,
}

/// A partition whose table is its tier, as a read names it.
#[derive(Clone)]
pub struct TierPartition {
    /// `<topic>-<partition>` (the cache's keys, errors).
    pub name: Arc<str>,
    pub partition: i32,
    pub view: Arc<TableTierView>,
}

/// A window to read.
struct WindowRead {
    part: TierPartition,
    offset: i64,
    want: u64,
}

impl TableReader {
    pub fn new(cache_bytes: u64) -> TableReader {
        TableReader {
            cache: ByteCache::new(cache_bytes),
            footers: Mutex::new(HashMap::new()),
            jobs: OnceLock::new(),
            stats: TierStats::default(),
        }
    }

    fn spawn(&self, job: Job) {
        let jobs = self.jobs.get_or_init(|| {
            let (tx, rx) = mpsc::channel::<Job>();
            let rx = Arc::new(Mutex::new(rx));
            for i in 0..THREADS {
                let rx = Arc::clone(&rx);
                let _ = std::thread::Builder::new().name(format!("table-tier-{i}")).spawn(move || loop {
                    let job = rx.lock().unwrap_or_else(PoisonError::into_inner).recv();
                    match job {
                        Ok(job) => job(),
                        Err(_) => return,
                    }
                });
            }
            Mutex::new(tx)
        });
        let _ = jobs.lock().unwrap_or_else(PoisonError::into_inner).send(job);
    }

    /// (cached bytes, hits, misses) for metrics.
    pub fn cache_stats(&self) -> (u64, u64, u64) {
        let (bytes, _, hits, misses) = self.cache.stats();
        (bytes, hits, misses)
    }

    /// One partition's read at `offset` (see the module doc).
    pub fn read(
        self: &Arc<Self>,
        part: &TierPartition,
        offset: i64,
        budget: u64,
        min_one: bool,
        waiter: &Weak<dyn ReadWaiter>,
    ) -> TierRead {
        if part.view.window(offset).is_none() {
            return TierRead::Past;
        }
        let key = window_key(&part.name, offset);
        match self.cache.lookup(&key, Some(waiter.clone())) {
            Lookup::Hit(b) if b.is_empty() => TierRead::Past,
            Lookup::Hit(b) => {
                if let Some(next) = next_offset(&b) {
                    self.read_ahead(part, next, budget);
                }
                let served = trim(&b, budget, min_one);
                if let (true, Some(next)) = (served.len() < b.len(), next_offset(&served)) {
                    // the rest of the window (the same buffer) for the fetch that goes on from here
                    self.cache.fill(&window_key(&part.name, next), Ok(b.slice(served.len()..)));
                }
                TierRead::Ready(served)
            }
            Lookup::Loading => TierRead::Pending,
            Lookup::Failed(why) => {
                self.stats.errors.fetch_add(1, Ordering::Relaxed);
                TierRead::Failed(why)
            }
            Lookup::Miss => {
                self.start_load(key, part, offset, budget, true);
                TierRead::Pending
            }
        }
    }

    /// Starts reading the window at `offset` unless it is cached or on its way.
    fn read_ahead(self: &Arc<Self>, part: &TierPartition, offset: i64, budget: u64) {
        if part.view.window(offset).is_none() {
            return;
        }
        let key = window_key(&part.name, offset);
        if let Lookup::Miss = self.cache.lookup(&key, None) {
            self.start_load(key, part, offset, budget, false);
        }
    }

    /// Reads the window at `offset` on a reader thread into the cache under `key` (which the
    /// caller's lookup marked loading); `ahead`: then the window after it.
    fn start_load(self: &Arc<Self>, key: String, part: &TierPartition, offset: i64, budget: u64, ahead: bool) {
        let w = WindowRead { part: part.clone(), offset, want: budget.max(MIN_WINDOW_BYTES) };
        let me = Arc::clone(self);
        self.spawn(Box::new(move || me.load_and_fill(&w, &key, ahead)));
    }

    fn load_and_fill(self: &Arc<Self>, w: &WindowRead, key: &str, ahead: bool) {
        let got = self.load(w);
        let next = got.as_ref().ok().and_then(|b| next_offset(b));
        self.cache.fill(key, got.map(Bytes::from));
        if let (true, Some(next)) = (ahead, next) {
            self.read_ahead(&w.part, next, w.want);
        }
    }

    fn load(&self, w: &WindowRead) -> Result<Vec<u8>, String> {
        self.read_window(&w.part.name, w.part.partition, &w.part.view, w.offset, w.want)
    }

    /// The batches of the window at `offset` (moving on past windows with no rows), about
    /// `want` bytes of records; empty when the table holds no row at or after `offset`.
    /// Blocking. `name` (`<topic>-<partition>`) is for errors.
    pub fn read_window(
        &self,
        name: &str,
        partition: i32,
        view: &TableTierView,
        offset: i64,
        want: u64,
    ) -> Result<Vec<u8>, String> {
        self.stats.windows.fetch_add(1, Ordering::Relaxed);
        let mut x = offset;
        while let Some((files, end)) = view.window(x) {
            let mut parts: Vec<(Vec<RecordBatch>, bool)> = Vec::with_capacity(files.len());
            for f in &files {
                self.stats.file_reads.fetch_add(1, Ordering::Relaxed);
                parts.push(self.read_file(f, partition, x, end, want).map_err(|why| {
                    format!("{name} offsets {x}..{end} from the table's data file {}: {why}", f.path)
                })?);
            }
            // a file that gave all the rows it was allowed may hold more before `end`
            let mut upto = end;
            for (batches, limited) in &parts {
                if *limited {
                    if let Some(last) = batches.iter().rev().find_map(last_offset_of) {
                        upto = upto.min(last);
                    }
                }
            }
            let mut out = Vec::new();
            encode_window(&parts, x, upto, &mut out).map_err(|why| format!("{name} offsets {x}..{upto}: {why}"))?;
            if !out.is_empty() {
                return Ok(out);
            }
            x = upto + 1;
        }
        Ok(Vec::new())
    }

    fn footer(&self, path: &str, file: &File) -> Result<ArrowReaderMetadata, String> {
        if let Some(m) = self.footers.lock().unwrap_or_else(PoisonError::into_inner).get(path) {
            return Ok(m.clone());
        }
        let options = ArrowReaderOptions::new().with_page_index(true).with_skip_arrow_metadata(true);
        let meta = ArrowReaderMetadata::load(file, options).map_err(|e| e.to_string())?;
        let mut g = self.footers.lock().unwrap_or_else(PoisonError::into_inner);
        if g.len() >= FOOTERS {
            g.clear();
        }
        g.insert(path.to_owned(), meta.clone());
        Ok(meta)
    }

    /// ListOffsets by time below the local log start: the first offset of `partition` in the
    /// view's files whose timestamp (ms) is at least `timestamp_ms`, with that timestamp; None
    /// when no row's is. Only committed records are in the table, so a match at an aborted
    /// record in the log is the next committed one here. Row groups whose largest timestamp is
    /// below it are skipped (their statistics), and a file starting past a match already found
    /// is not read. Blocks (files): the control plane calls it from a worker thread.
    pub fn offset_for_timestamp(
        &self,
        view: &TableTierView,
        partition: i32,
        timestamp_ms: i64,
    ) -> Result<Option<(i64, i64)>, String> {
        let mut best: Option<(i64, i64)> = None;
        for f in &view.files {
            if best.is_some_and(|(o, _)| f.min_offset > o) {
                break; // sorted by first offset: nothing earlier in this file or after
            }
            let found = self.first_at_or_after(f, partition, timestamp_ms).map_err(|e| format!("{}: {e}", f.path))?;
            if let Some(found) = found.filter(|&(o, _)| best.is_none_or(|(b, _)| o < b)) {
                best = Some(found);
            }
        }
        Ok(best)
    }

    /// The least offset of `partition` in `f` whose timestamp is at least `timestamp_ms`,
    /// with that timestamp (ms).
    fn first_at_or_after(
        &self,
        f: &TableFile,
        partition: i32,
        timestamp_ms: i64,
    ) -> Result<Option<(i64, i64)>, String> {
        let file = File::open(&f.path).map_err(|e| e.to_string())?;
        let meta = self.footer(&f.path, &file)?;
        // the column's unit per ms (Iceberg's timestamps are µs; as Columns::of reads them)
        let per_ms: i64 = match meta.schema().field_with_name("timestamp").map(|f| f.data_type().clone()) {
            Ok(DataType::Timestamp(TimeUnit::Millisecond, _)) => 1,
            Ok(DataType::Timestamp(TimeUnit::Nanosecond, _)) => 1_000_000,
            Ok(DataType::Timestamp(TimeUnit::Microsecond, _) | DataType::Int64) => 1000,
            Ok(t) => return Err(format!("`timestamp` is {t}")),
            Err(_) => return Err("no `timestamp` column".into()),
        };
        let at = timestamp_ms.saturating_mul(per_ms);
        let pq = meta.metadata();
        let descr = pq.file_metadata().schema_descr();
        let leaf = |name: &str| leaf_index(descr, name);
        let (offset_leaf, partition_leaf, ts_leaf) = (leaf("offset")?, leaf("partition")?, leaf("timestamp")?);
        let groups: Vec<usize> = pq
            .row_groups()
            .iter()
            .enumerate()
            .filter(|(_, rg)| {
                let newest = match rg.column(ts_leaf).statistics() {
                    Some(Statistics::Int64(s)) => s.max_opt().copied(),
                    _ => None,
                };
                let parts = match rg.column(partition_leaf).statistics() {
                    Some(Statistics::Int32(s)) => s.min_opt().copied().zip(s.max_opt().copied()),
                    _ => None,
                };
                newest.is_none_or(|t| t >= at) && parts.is_none_or(|(lo, hi)| lo <= partition && partition <= hi)
            })
            .map(|(i, _)| i)
            .collect();
        if groups.is_empty() {
            return Ok(None);
        }
        let projection = ProjectionMask::leaves(descr, [offset_leaf, partition_leaf, ts_leaf]);
        let reader = ParquetRecordBatchReaderBuilder::new_with_metadata(file, meta)
            .with_row_groups(groups)
            .with_projection(projection)
            .build()
            .map_err(|e| e.to_string())?;
        let mut best: Option<(i64, i64)> = None;
        for b in reader {
            let b = b.map_err(|e| e.to_string())?;
            let offsets = b.column_by_name("offset").and_then(|c| c.as_primitive_opt::<Int64Type>());
            let parts = b.column_by_name("partition").and_then(|c| c.as_primitive_opt::<Int32Type>());
            let stamps = b.column_by_name("timestamp").and_then(raw_timestamps);
            let (Some(offsets), Some(parts), Some(stamps)) = (offsets, parts, stamps) else {
                return Err("`offset`, `partition` or `timestamp` is not a long, an int or a timestamp".into());
            };
            for (i, t) in stamps.into_iter().enumerate() {
                let Some(t) = t.filter(|&t| t >= at) else { continue };
                if parts.is_valid(i) && parts.value(i) == partition {
                    let o = offsets.value(i);
                    if best.is_none_or(|(bo, _)| o < bo) {
                        best = Some((o, t));
                    }
                }
            }
        }
        Ok(best.map(|(o, t)| (o, t.div_euclid(per_ms))))
    }

    /// The partition's rows of `f` with offsets in `[lo, hi]`, at most about `want` bytes of
    /// them; and whether that limit cut them short.
    fn read_file(
        &self,
        f: &TableFile,
        partition: i32,
        lo: i64,
        hi: i64,
        want: u64,
    ) -> Result<(Vec<RecordBatch>, bool), String> {
        let file = File::open(&f.path).map_err(|e| e.to_string())?;
        let meta = self.footer(&f.path, &file)?;
        let pq = meta.metadata();
        let descr = pq.file_metadata().schema_descr();
        let leaf = |name: &str| leaf_index(descr, name);
        let (offset_leaf, partition_leaf) = (leaf("offset")?, leaf("partition")?);
        let mut groups = Vec::new();
        let (mut rows, mut bytes) = (0i64, 0i64);
        for (i, rg) in pq.row_groups().iter().enumerate() {
            let offsets = match rg.column(offset_leaf).statistics() {
                Some(Statistics::Int64(s)) => s.min_opt().copied().zip(s.max_opt().copied()),
                _ => None,
            };
            let parts = match rg.column(partition_leaf).statistics() {
                Some(Statistics::Int32(s)) => s.min_opt().copied().zip(s.max_opt().copied()),
                _ => None,
            };
            let in_range = offsets.is_none_or(|(min, max)| max >= lo && min <= hi);
            let has_partition = parts.is_none_or(|(min, max)| min <= partition && partition <= max);
            if in_range && has_partition {
                groups.push(i);
                rows += rg.num_rows();
                bytes += rg.total_byte_size();
            }
        }
        if groups.is_empty() {
            return Ok((Vec::new(), false));
        }
        let per_row = u64::try_from(bytes / rows.max(1)).unwrap_or(1).max(1);
        let limit = usize::try_from(want / per_row + 1).unwrap_or(usize::MAX);
        let projection =
            ProjectionMask::columns(descr, ["key", "value", "offset", "timestamp", "timestampType", "headers"]);
        let filter_mask = ProjectionMask::leaves(descr, [offset_leaf, partition_leaf]);
        let predicate = ArrowPredicateFn::new(filter_mask, move |b: RecordBatch| {
            let offsets = b.column_by_name("offset").and_then(|c| c.as_primitive_opt::<Int64Type>());
            let parts = b.column_by_name("partition").and_then(|c| c.as_primitive_opt::<Int32Type>());
            let (Some(offsets), Some(parts)) = (offsets, parts) else {
                return Err(arrow_schema::ArrowError::SchemaError("offset or partition is not int64/int32".into()));
            };
            Ok(offsets
                .iter()
                .zip(parts.iter())
                .map(|(o, p)| Some(o.is_some_and(|o| o >= lo && o <= hi) && p == Some(partition)))
                .collect::<BooleanArray>())
        });
        let pages = page_selection(pq, &groups, offset_leaf, lo, hi, limit);
        let cut = pages.as_ref().is_some_and(|(_, cut)| *cut);
        let mut builder = ParquetRecordBatchReaderBuilder::new_with_metadata(file, meta);
        if let Some((selection, _)) = pages {
            builder = builder.with_row_selection(selection);
        }
        let reader = builder
            .with_row_groups(groups)
            .with_projection(projection)
            .with_row_filter(RowFilter::new(vec![Box::new(predicate)]))
            .with_limit(limit)
            .with_batch_size(limit.clamp(1, 8192))
            .build()
            .map_err(|e| e.to_string())?;
        let mut batches = Vec::new();
        let mut got = 0usize;
        for b in reader {
            let b = b.map_err(|e| e.to_string())?;
            got += b.num_rows();
            batches.push(b);
        }
        Ok((batches, cut || got >= limit))
    }
}

/// The index of the top-level leaf column `name` in a Parquet schema.
fn leaf_index(descr: &parquet::schema::types::SchemaDescriptor, name: &str) -> Result<usize, String> {
    (0..descr.num_columns())
        .find(|&i| descr.column(i).path().parts() == [name])
        .ok_or_else(|| format!("no `{name}` column"))
}

/// A timestamp column's values in its own unit (µs, ms or ns; a long as µs).
fn raw_timestamps(c: &arrow_array::ArrayRef) -> Option<Vec<Option<i64>>> {
    Some(match c.data_type() {
        DataType::Timestamp(TimeUnit::Microsecond, _) => c.as_primitive::<TimestampMicrosecondType>().iter().collect(),
        DataType::Timestamp(TimeUnit::Millisecond, _) => c.as_primitive::<TimestampMillisecondType>().iter().collect(),
        DataType::Timestamp(TimeUnit::Nanosecond, _) => c.as_primitive::<TimestampNanosecondType>().iter().collect(),
        DataType::Int64 => c.as_primitive::<Int64Type>().iter().collect(),
        _ => return None,
    })
}

/// The pages of the offset column to read, from its page index: those whose offsets meet
/// `[lo, hi]`, from the first on until about `limit` rows past it (a page's worth more, as
/// the first may start below `lo`), as a selection over the rows of `groups`; and whether it
/// stopped short of pages that meet the range (the window then ends at the last offset
/// read). None without a page index, or when pages are not in offset order (then the row
/// filter alone decides, over the whole row groups).
fn page_selection(
    pq: &parquet::file::metadata::ParquetMetaData,
    groups: &[usize],
    leaf: usize,
    lo: i64,
    hi: i64,
    limit: usize,
) -> Option<(RowSelection, bool)> {
    let (columns, offsets) = (pq.column_index()?, pq.offset_index()?);
    let mut out: Vec<RowSelector> = Vec::new();
    let mut push = |select: bool, n: usize| {
        if n > 0 {
            out.push(if select { RowSelector::select(n) } else { RowSelector::skip(n) });
        }
    };
    let (mut picked, mut first_page, mut cut, mut top) = (0usize, None::<usize>, false, i64::MIN);
    for &g in groups {
        let rows = usize::try_from(pq.row_group(g).num_rows()).ok()?;
        if cut {
            push(false, rows);
            continue;
        }
        let ColumnIndexMetaData::INT64(index) = columns.get(g)?.get(leaf)? else { return None };
        let pages = offsets.get(g)?.get(leaf)?.page_locations();
        for (j, page) in pages.iter().enumerate() {
            let start = usize::try_from(page.first_row_index).ok()?;
            let end = pages.get(j + 1).map_or(Some(rows), |p| usize::try_from(p.first_row_index).ok())?;
            let (min, max) = (index.min_value(j).copied(), index.max_value(j).copied());
            if min.is_some_and(|m| m < top) {
                return None; // not in offset order
            }
            top = top.max(max.unwrap_or(top));
            let meets = !cut && max.is_none_or(|m| m >= lo) && min.is_none_or(|m| m <= hi);
            if meets {
                picked += end - start;
                let first = *first_page.get_or_insert(end - start);
                cut = picked >= limit.saturating_add(first);
            }
            push(meets, end - start);
        }
    }
    Some((RowSelection::from(out), cut))
}

fn window_key(name: &str, offset: i64) -> String {
    format!("{name}@{offset}")
}

fn last_offset_of(b: &RecordBatch) -> Option<i64> {
    let o = b.column_by_name("offset")?.as_primitive_opt::<Int64Type>()?;
    (!o.is_empty()).then(|| o.value(o.len() - 1))
}

/// The offset after the last batch of `bytes`.
fn next_offset(bytes: &[u8]) -> Option<i64> {
    let mut pos = 0usize;
    let mut next = None;
    while bytes.len() - pos >= HEADER_LEN {
        let h = BatchHeader::parse(&bytes[pos..]);
        next = Some(h.last_offset() + 1);
        pos += usize::try_from(h.size()).ok()?;
    }
    next
}

/// Whole batches of `bytes` within `budget` (the first in any case when `min_one`).
fn trim(bytes: &Bytes, budget: u64, min_one: bool) -> Bytes {
    let mut end = 0usize;
    while bytes.len() - end >= HEADER_LEN {
        let size = usize::try_from(BatchHeader::parse(&bytes[end..]).size()).unwrap_or(usize::MAX);
        if (end + size) as u64 > budget && !(end == 0 && min_one) {
            break;
        }
        end += size;
    }
    bytes.slice(..end.min(bytes.len()))
}

/// One file's columns, as the encoder reads them.
struct Columns<'a> {
    key: &'a BinaryArray,
    value: &'a BinaryArray,
    offset: &'a Int64Array,
    /// Timestamps in milliseconds.
    timestamp: Vec<i64>,
    timestamp_type: Option<&'a arrow_array::Int32Array>,
    headers: Option<(&'a ListArray, &'a StringArray, &'a BinaryArray)>,
}

impl<'a> Columns<'a> {
    fn of(b: &'a RecordBatch) -> Result<Columns<'a>, String> {
        let col = |name: &str| b.column_by_name(name).ok_or_else(|| format!("no `{name}` column"));
        let binary = |name: &str| -> Result<&'a BinaryArray, String> {
            b.column_by_name(name)
                .ok_or_else(|| format!("no `{name}` column"))?
                .as_binary_opt::<i32>()
                .ok_or_else(|| format!("`{name}` is not binary"))
        };
        let offset = col("offset")?.as_primitive_opt::<Int64Type>().ok_or("`offset` is not a long")?;
        let ts = col("timestamp")?;
        let timestamp: Vec<i64> = match ts.data_type() {
            DataType::Timestamp(TimeUnit::Microsecond, _) => ts
                .as_primitive::<TimestampMicrosecondType>()
                .iter()
                .map(|v| v.map_or(-1, |v| v.div_euclid(1000)))
                .collect(),
            DataType::Timestamp(TimeUnit::Millisecond, _) => {
                ts.as_primitive::<TimestampMillisecondType>().iter().map(|v| v.unwrap_or(-1)).collect()
            }
            DataType::Timestamp(TimeUnit::Nanosecond, _) => ts
                .as_primitive::<TimestampNanosecondType>()
                .iter()
                .map(|v| v.map_or(-1, |v| v.div_euclid(1_000_000)))
                .collect(),
            DataType::Int64 => {
                ts.as_primitive::<Int64Type>().iter().map(|v| v.map_or(-1, |v| v.div_euclid(1000))).collect()
            }
            t => return Err(format!("`timestamp` is {t}")),
        };
        let timestamp_type = b.column_by_name("timestampType").and_then(|c| c.as_primitive_opt::<Int32Type>());
        let headers = match b.column_by_name("headers") {
            None => None,
            Some(h) => {
                let list = h.as_list_opt::<i32>().ok_or("`headers` is not a list")?;
                let entries = list.values().as_struct_opt().ok_or("`headers` entries are not structs")?;
                if entries.num_columns() < 2 {
                    return Err("`headers` entries lack a key or value".into());
                }
                let k = entries.column(0).as_string_opt::<i32>().ok_or("a header key is not a string")?;
                let v = entries.column(1).as_binary_opt::<i32>().ok_or("a header value is not binary")?;
                Some((list, k, v))
            }
        };
        Ok(Columns { key: binary("key")?, value: binary("value")?, offset, timestamp, timestamp_type, headers })
    }
}

/// Appends the window's rows with offsets in `[from, upto]`, in offset order, as record
/// batches.
fn encode_window(parts: &[(Vec<RecordBatch>, bool)], from: i64, upto: i64, out: &mut Vec<u8>) -> Result<(), String> {
    let mut cols = Vec::new();
    for (batches, _) in parts {
        for b in batches {
            cols.push(Columns::of(b)?);
        }
    }
    // (offset, batch, row): one file's rows are in offset order already; several are merged
    let mut rows: Vec<(i64, u32, u32)> = Vec::new();
    for (i, c) in cols.iter().enumerate() {
        for r in 0..c.offset.len() {
            let o = c.offset.value(r);
            if o >= from && o <= upto && !c.offset.is_null(r) {
                rows.push((o, i as u32, r as u32));
            }
        }
    }
    if cols.len() > 1 {
        rows.sort_unstable();
        rows.dedup_by_key(|r| r.0);
    }
    let mut batch = BatchWriter::default();
    let mut scratch = Vec::new();
    for &(offset, i, r) in &rows {
        let c = &cols[i as usize];
        let r = r as usize;
        let ts = c.timestamp[r];
        let log_append = c.timestamp_type.is_some_and(|t| t.is_valid(r) && t.value(r) == 1);
        if !batch.fits(offset, ts, log_append) {
            batch.finish(out);
        }
        batch.record(out, offset, ts, log_append, c, r, &mut scratch);
    }
    batch.finish(out);
    Ok(())
}

/// The record batch being encoded into the output.
#[derive(Default)]
struct BatchWriter {
    /// Where it starts in the output (None: no batch open).
    start: Option<usize>,
    base_offset: i64,
    last_offset: i64,
    base_timestamp: i64,
    max_timestamp: i64,
    log_append: bool,
    count: i32,
}

impl BatchWriter {
    fn fits(&self, offset: i64, ts: i64, log_append: bool) -> bool {
        self.start.is_none()
            || (self.log_append == log_append
                && (!log_append || ts == self.max_timestamp)
                && offset - self.base_offset < i64::from(i32::MAX)
                && self.count < i32::MAX)
    }

    #[allow(clippy::too_many_arguments)]
    fn record(
        &mut self,
        out: &mut Vec<u8>,
        offset: i64,
        ts: i64,
        log_append: bool,
        cols: &Columns<'_>,
        row: usize,
        scratch: &mut Vec<u8>,
    ) {
        if self.start.is_none() {
            self.start = Some(out.len());
            out.resize(out.len() + HEADER_LEN, 0);
            self.base_offset = offset;
            self.base_timestamp = ts;
            self.max_timestamp = ts;
            self.log_append = log_append;
            self.count = 0;
        }
        self.last_offset = offset;
        self.max_timestamp = self.max_timestamp.max(ts);
        self.count += 1;
        scratch.clear();
        scratch.push(0); // attributes
        write_varlong(scratch, ts - self.base_timestamp);
        write_varint(scratch, (offset - self.base_offset) as i32);
        let bytes = |scratch: &mut Vec<u8>, a: &BinaryArray| {
            if a.is_null(row) {
                write_varint(scratch, -1);
            } else {
                let v = a.value(row);
                write_varint(scratch, v.len() as i32);
                scratch.extend_from_slice(v);
            }
        };
        bytes(scratch, cols.key);
        bytes(scratch, cols.value);
        match cols.headers {
            Some((list, keys, values)) if list.is_valid(row) => {
                let offsets = list.value_offsets();
                let (first, past) = (offsets[row] as usize, offsets[row + 1] as usize);
                write_varint(scratch, (past - first) as i32);
                for h in first..past {
                    let k = if keys.is_null(h) { "" } else { keys.value(h) };
                    write_varint(scratch, k.len() as i32);
                    scratch.extend_from_slice(k.as_bytes());
                    if values.is_null(h) {
                        write_varint(scratch, -1);
                    } else {
                        let v = values.value(h);
                        write_varint(scratch, v.len() as i32);
                        scratch.extend_from_slice(v);
                    }
                }
            }
            _ => write_varint(scratch, 0),
        }
        write_varint(out, scratch.len() as i32);
        out.extend_from_slice(scratch);
        if out.len() - self.start.unwrap_or(0) >= BATCH_BYTES {
            self.finish(out);
        }
    }

    /// Writes the open batch's header (nothing if none is open).
    fn finish(&mut self, out: &mut [u8]) {
        let Some(start) = self.start.take() else { return };
        let b = &mut out[start..];
        let attributes: i16 = if self.log_append { TIMESTAMP_TYPE_BIT } else { 0 };
        b[0..8].copy_from_slice(&self.base_offset.to_be_bytes());
        let length = (b.len() - 12) as i32;
        b[8..12].copy_from_slice(&length.to_be_bytes());
        b[12..16].copy_from_slice(&(-1i32).to_be_bytes()); // partition leader epoch: not kept
        b[16] = 2;
        b[ATTRIBUTES_AT..ATTRIBUTES_AT + 2].copy_from_slice(&attributes.to_be_bytes());
        b[23..27].copy_from_slice(&((self.last_offset - self.base_offset) as i32).to_be_bytes());
        b[27..35].copy_from_slice(&self.base_timestamp.to_be_bytes());
        b[35..43].copy_from_slice(&self.max_timestamp.to_be_bytes());
        b[43..51].copy_from_slice(&(-1i64).to_be_bytes());
        b[51..53].copy_from_slice(&(-1i16).to_be_bytes());
        b[53..57].copy_from_slice(&(-1i32).to_be_bytes());
        b[57..61].copy_from_slice(&self.count.to_be_bytes());
        let crc = crc32c::crc32c(&b[ATTRIBUTES_AT..]);
        b[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
    }
}
