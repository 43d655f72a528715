//! `Segment`: one `.log` file of batches plus its two sparse indexes.
//!
//! # Files
//! `{base_offset:020}.log` (batches back to back, exactly as received and validated),
//! `{base_offset:020}.index` (see `offset_index.rs`), `{base_offset:020}.timeindex`
//! (see `time_index.rs`). The base offset is the offset of the first batch the segment holds
//! (or will hold, while empty).
//!
//! While the log cleaner writes a replacement segment, its three files carry a `.cleaned`
//! suffix, then `.swap` (see `cleaner.rs`).
//!
//! # Invariants
//! - Batches are contiguous: the first starts at `base_offset`, each next one at the previous
//!   last offset + 1; `next_offset` is one past the last batch's last offset (== `base_offset`
//!   when empty). A segment rewritten by the cleaner (or a follower's copy of one) may have
//!   gaps instead: batch offsets only increase, the first batch may start above
//!   `base_offset`, and batches may hold fewer records than their offset range. Opening and
//!   recovery accept gaps only when told to (`gaps`: a compacted topic, or below the cleaner
//!   checkpoint); elsewhere a gap is corruption.
//! - `size` is the number of valid bytes; the file is never longer after an append completes
//!   (a failed write is truncated back, so a full disk leaves no partial batch).
//! - Index entries are added only every `index.interval.bytes`, as Kafka writes them: the
//!   offset index maps a batch's *last* offset to the batch's position, the time index the
//!   largest timestamp so far to the last offset of the batch holding it (its "shallow"
//!   offset), so `kafka-dump-log --index-sanity-check`/`--verify-index-only` agree with them.
//!   A lookup finds the largest entry <= the target and scans forward to the first batch whose
//!   last offset reaches it; files written when entries named base offsets read the same way.
//! - `max_timestamp`/`offset_of_max_timestamp` are the largest batch maxTimestamp and the
//!   first record that carries it (-1 when empty); they drive retention.ms and ListOffsets -3.
//!   `shallow_offset_of_max_timestamp` is the last offset of that record's batch.
//!
//! # Roll
//! The log rolls (starts a new active segment) before an append when this one is non-empty
//! and would exceed `segment.bytes`, is older than `segment.ms` (measured from the broker
//! time of its first append), has a full index, or would need relative offsets beyond i32.
//!
//! # Reads
//! `read` returns a [`FileRegion`] over whole batches: the batch holding the fetch offset,
//! then following batches while they fit in `max_bytes` and end below the upper bound offset
//! (the high watermark for consumers). With `min_one_message`, a first batch larger than
//! `max_bytes` is returned whole (Kafka's KIP-74 rule).
//!
//! # File descriptors
//! A segment holds at most one descriptor, its `.log`, and none at rest:
//! - its indexes never hold one: their entries live in memory, and the files are opened by
//!   path for each write, which happens when the segment stops being active
//!   ([`Segment::on_become_inactive`]), when a flush fsyncs it ([`Segment::sync_targets`]) and
//!   after a recovery rebuilt them (see `index_file.rs`). The active segment's index files
//!   therefore lag its memory between flushes; an unclean shutdown rebuilds them anyway;
//! - its `.log` is opened on demand by the first append or read that needs it: read-write for
//!   the active segment (appends are positioned writes at `size`, so a reopened file needs no
//!   seek), read-only for an inactive one (a fetch, ListOffsets by timestamp, the cleaner, a
//!   producer-state rebuild); the owning log closes it ([`Segment::close_log_file`]) under
//!   the policy documented in `log.rs`, the active segment's included;
//! - an operation that writes an inactive segment (truncation, recovery) reopens its `.log`
//!   read-write for that;
//! - a flush of a closed file opens it by path for the fsync ([`SyncTarget`]);
//! - the handle lives in a [`LogFileSlot`], which the process-wide budget may close between
//!   two calls (`open_log_files.rs`); every use takes the handle from the slot afresh.
//!
//! Closing only drops the segment's own `Arc<File>`: a [`FileRegion`] handed out earlier keeps
//! its descriptor until it is dropped, so a send in progress is never cut short. Deletion and
//! the cleaner's renames work on paths and need no descriptor. A descriptor shortage
//! (EMFILE/ENFILE) on any open is `LogError::TooManyOpenFiles`, naming the file.
//!
//! # Concurrency
//! Not synchronized: every method needs the owning `Log`'s mutex. Regions handed out are
//! independent of the lock (they hold `Arc<File>`).

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::batch::{self, BatchHeader, Check, Control, EndTxnMarker, FileSource, Offsets, HEADER_LEN};
use crate::config::LogConfig;
use crate::error::{IoContext, LogError, Result};
use crate::file_region::FileRegion;
use crate::index_file::SyncTarget;
use crate::offset_index::{self, OffsetIndex};
use crate::open_log_files::LogFileSlot;
use crate::time_index::{self, TimeIndex};

pub fn file_name(base_offset: i64, suffix: &str) -> String {
    format!("{base_offset:020}{suffix}")
}

/// What the log tells the segment about each batch of an append.
#[derive(Debug, Clone, Copy)]
pub struct AppendedBatch {
    /// Position of the batch within the appended buffer.
    pub rel_position: u64,
    pub size: u64,
    pub base_offset: i64,
    pub last_offset: i64,
    pub max_timestamp: i64,
    pub offset_of_max_timestamp: i64,
}

/// Result of a segment recovery: how much was cut and why.
#[derive(Debug)]
pub struct Recovered {
    pub truncated_bytes: u64,
    pub error: Option<LogError>,
}

pub struct Segment {
    pub base_offset: i64,
    pub log_path: PathBuf,
    /// The `.log` handle (empty while the file is closed) and whether it was opened
    /// read-write (the active segment, or a write on an inactive one); the process-wide
    /// budget may close it between two calls (`open_log_files.rs`).
    file: Arc<LogFileSlot>,
    /// The segment appends (the log's last one): its `.log` opens read-write.
    active: bool,
    /// Identifies this segment's regions (`holds`); stable across reopening the file.
    path_arc: Arc<PathBuf>,
    /// The owning log's use counter at this segment's last append or read (which files the
    /// idle sweep closes).
    pub last_used: u64,
    pub size: u64,
    pub next_offset: i64,
    offset_index: OffsetIndex,
    time_index: TimeIndex,
    bytes_since_last_index_entry: u64,
    pub max_timestamp: i64,
    pub offset_of_max_timestamp: i64,
    /// Last offset of the batch holding `offset_of_max_timestamp` (the time index's offsets).
    shallow_offset_of_max_timestamp: i64,
    /// Broker time of the first append (segment.ms rolls); `None` while empty.
    pub rolling_base_ms: Option<i64>,
    /// Bytes appended since the last fsync of this segment.
    pub unflushed_bytes: u64,
}

impl Segment {
    /// The `.log`, `.index` and `.timeindex` paths, each followed by `suffix` (`""`,
    /// `".cleaned"`, `".swap"`).
    pub fn paths(dir: &Path, base: i64, suffix: &str) -> [PathBuf; 3] {
        [
            dir.join(file_name(base, &format!(".log{suffix}"))),
            dir.join(file_name(base, &format!(".index{suffix}"))),
            dir.join(file_name(base, &format!(".timeindex{suffix}"))),
        ]
    }

    /// A new, empty, active segment (any files with its name are replaced: the `.log` now, the
    /// indexes at their first write). Its `.log` is open read-write.
    pub fn create(dir: &Path, base_offset: i64, config: &LogConfig) -> Result<Segment> {
        Self::create_with_suffix(dir, base_offset, config, "")
    }

    /// A new, empty segment whose files carry `suffix` after their usual names (the cleaner
    /// writes `.cleaned` segments).
    pub fn create_with_suffix(dir: &Path, base_offset: i64, config: &LogConfig, suffix: &str) -> Result<Segment> {
        let mut segment = Self::absent_with_suffix(dir, base_offset, config, suffix);
        segment.create_file()?;
        Ok(segment)
    }

    /// A new, empty active segment whose `.log` does not exist yet: a new log's first
    /// segment before its first write (`Log::materialize` calls [`Self::create_file`]).
    pub fn absent(dir: &Path, base_offset: i64, config: &LogConfig) -> Segment {
        Self::absent_with_suffix(dir, base_offset, config, "")
    }

    /// Creates (or empties) the `.log` file and keeps it open for writing.
    pub fn create_file(&mut self) -> Result<()> {
        let lp = &self.log_path;
        let file = OpenOptions::new().read(true).write(true).create(true).truncate(true).open(lp).ctx(lp)?;
        self.file.set(Arc::new(file), true);
        Ok(())
    }

    fn absent_with_suffix(dir: &Path, base_offset: i64, config: &LogConfig, suffix: &str) -> Segment {
        let [lp, ip, tp] = Self::paths(dir, base_offset, suffix);
        let offset_index = OffsetIndex::create(&ip, base_offset, config.segment_index_bytes);
        let time_index = TimeIndex::create(&tp, base_offset, config.segment_index_bytes);
        Segment {
            base_offset,
            path_arc: Arc::new(lp.clone()),
            log_path: lp,
            file: LogFileSlot::new(),
            active: true,
            last_used: 0,
            size: 0,
            next_offset: base_offset,
            offset_index,
            time_index,
            bytes_since_last_index_entry: 0,
            max_timestamp: -1,
            offset_of_max_timestamp: -1,
            shallow_offset_of_max_timestamp: -1,
            rolling_base_ms: None,
            unflushed_bytes: 0,
        }
    }

    /// Opens an existing segment (inactive) trusting its indexes if they load and pass their
    /// sanity checks. The returned flag says the segment needs recovery when anything is off
    /// (corrupt index, an index missing while the log is not empty, torn tail): the caller
    /// then runs [`Self::recover`]. `gaps`: the first batch may start above `base_offset` (see
    /// the invariants). The `.log` is opened read-only and the indexes are read and closed:
    /// the caller closes the log file too once it is done with it ([`Self::close_log_file`]);
    /// recovery reopens what it writes.
    pub fn open(dir: &Path, base_offset: i64, config: &LogConfig, now_ms: i64, gaps: bool) -> Result<(Segment, bool)> {
        let [lp, ip, tp] = Self::paths(dir, base_offset, "");
        let file = Arc::new(File::open(&lp).ctx(&lp)?);
        let size = file.metadata().ctx(&lp)?.len();
        let mut needs_recovery = false;
        // A missing index of an empty segment is an empty index (a new log's segment, whose
        // index files are only written at its first flush, roll or close).
        let offset_index = match OffsetIndex::open(&ip, base_offset, config.segment_index_bytes) {
            Ok(Some(i)) if i.sanity_check(size).is_ok() => i,
            Ok(None) if size == 0 => OffsetIndex::create(&ip, base_offset, config.segment_index_bytes),
            Ok(_) | Err(LogError::CorruptIndex { .. } | LogError::Io { .. }) => {
                needs_recovery = true;
                OffsetIndex::create(&ip, base_offset, config.segment_index_bytes)
            }
            Err(e) => return Err(e),
        };
        let time_index = match TimeIndex::open(&tp, base_offset, config.segment_index_bytes) {
            Ok(Some(i)) => i,
            Ok(None) if size == 0 => TimeIndex::create(&tp, base_offset, config.segment_index_bytes),
            Ok(None) | Err(LogError::CorruptIndex { .. } | LogError::Io { .. }) => {
                needs_recovery = true;
                TimeIndex::create(&tp, base_offset, config.segment_index_bytes)
            }
            Err(e) => return Err(e),
        };
        let mut seg = Segment {
            base_offset,
            path_arc: Arc::new(lp.clone()),
            log_path: lp,
            file: LogFileSlot::new(),
            active: false,
            last_used: 0,
            size,
            next_offset: base_offset,
            offset_index,
            time_index,
            bytes_since_last_index_entry: 0,
            max_timestamp: -1,
            offset_of_max_timestamp: -1,
            shallow_offset_of_max_timestamp: -1,
            rolling_base_ms: None,
            unflushed_bytes: 0,
        };
        seg.file.set(Arc::clone(&file), false);
        if needs_recovery {
            return Ok((seg, true));
        }
        // Find next_offset with a header scan from the last index entry to the end.
        let (_, start) = seg.offset_index.last_entry().map_or((base_offset, 0), |(o, p)| (o, p));
        let mut last: Option<BatchHeader> = None;
        let mut src = FileSource::new(&file, &seg.log_path, size);
        let end = batch::scan(&mut src, u64::from(start), Check::Framing, None, |v| {
            last = Some(v.header);
            Ok(Control::Continue)
        })?;
        if end.error.is_some() {
            return Ok((seg, true));
        }
        if let Some(h) = last {
            seg.next_offset = h.next_offset();
        } else if size > 0 || start > 0 {
            return Ok((seg, true));
        }
        seg.bytes_since_last_index_entry = size - u64::from(start);
        if seg.time_index.sanity_check(seg.next_offset).is_err() {
            return Ok((seg, true));
        }
        if let Some((t, o)) = seg.time_index.last_entry() {
            // The entry names the batch; the record (ListOffsets -3) is read from that batch.
            let (record, shallow) = seg.record_with_timestamp(&file, o, t)?;
            seg.max_timestamp = t;
            seg.offset_of_max_timestamp = record;
            seg.shallow_offset_of_max_timestamp = shallow;
        } else if size > 0 {
            // Segment too small for any entry: learn the max timestamp from its batches.
            seg.rescan_max_timestamp(0)?;
        }
        if size > 0 {
            let first = seg.header_at(&file, 0)?;
            seg.rolling_base_ms = Some(if first.max_timestamp >= 0 { first.max_timestamp.min(now_ms) } else { now_ms });
            if first.base_offset < base_offset || (!gaps && first.base_offset != base_offset) {
                return Ok((seg, true));
            }
        }
        Ok((seg, false))
    }

    /// Validates every batch (stored-batch check; offsets contiguous from `base_offset`, or
    /// only increasing with `gaps`), truncates the file at the first bad one, and rebuilds
    /// both indexes (written, replacing the old files).
    pub fn recover(&mut self, config: &LogConfig, now_ms: i64, gaps: bool) -> Result<Recovered> {
        let [_, ip, tp] = Self::paths(self.log_path.parent().unwrap_or(Path::new(".")), self.base_offset, "");
        self.offset_index = OffsetIndex::create(&ip, self.base_offset, config.segment_index_bytes);
        self.time_index = TimeIndex::create(&tp, self.base_offset, config.segment_index_bytes);
        self.next_offset = self.base_offset;
        self.max_timestamp = -1;
        self.offset_of_max_timestamp = -1;
        self.shallow_offset_of_max_timestamp = -1;
        self.bytes_since_last_index_entry = 0;
        self.rolling_base_ms = None;
        let file = self.writable_file()?;
        let path = self.log_path.clone();
        let mut src = FileSource::new(&file, &path, self.size);
        let mut first_ts = None;
        let offsets = if gaps { Offsets::Increasing(self.base_offset) } else { Offsets::Contiguous(self.base_offset) };
        let end = batch::scan(&mut src, 0, Check::Stored, offsets, |v| {
            let summary = v.records.expect("full scan summarizes records");
            let h = v.header;
            let off_of_max = if h.is_log_append_time() {
                h.base_offset
            } else {
                h.base_offset + i64::from(summary.offset_delta_of_max)
            };
            if first_ts.is_none() {
                first_ts = Some(h.max_timestamp);
            }
            // Stop before a batch that would not fit the indexes' relative offsets.
            if h.last_offset() - self.base_offset > i64::from(i32::MAX) {
                return Ok(Control::Stop);
            }
            self.index_batch(
                &AppendedBatch {
                    rel_position: v.position,
                    size: h.size(),
                    base_offset: h.base_offset,
                    last_offset: h.last_offset(),
                    max_timestamp: h.max_timestamp,
                    offset_of_max_timestamp: off_of_max,
                },
                0,
                config,
            )?;
            self.next_offset = h.next_offset();
            Ok(Control::Continue)
        })?;
        let truncated = self.size - end.valid_end;
        if truncated > 0 {
            file.set_len(end.valid_end).ctx(&self.log_path)?;
            self.size = end.valid_end;
        }
        self.offset_index.write_pending()?;
        self.time_index.write_pending()?;
        self.rolling_base_ms = first_ts.map(|t| if t >= 0 { t.min(now_ms) } else { now_ms });
        self.unflushed_bytes = self.size;
        Ok(Recovered { truncated_bytes: truncated, error: end.error })
    }

    /// Index bookkeeping for one batch at `base_pos + b.rel_position` (Kafka's rule: an entry
    /// once more than index.interval.bytes were written since the last one).
    fn index_batch(&mut self, b: &AppendedBatch, base_pos: u64, config: &LogConfig) -> Result<()> {
        if b.max_timestamp > self.max_timestamp {
            self.max_timestamp = b.max_timestamp;
            self.offset_of_max_timestamp = b.offset_of_max_timestamp;
            self.shallow_offset_of_max_timestamp = b.last_offset;
        }
        if self.bytes_since_last_index_entry > config.index_interval_bytes && !self.offset_index.is_full() {
            let pos = u32::try_from(base_pos + b.rel_position).map_err(|_| LogError::CorruptIndex {
                path: self.offset_index.path().to_owned(),
                reason: format!("position {} does not fit in u32", base_pos + b.rel_position),
            })?;
            self.offset_index.append(b.last_offset, pos)?;
            self.time_index.maybe_append(self.max_timestamp, self.shallow_offset_of_max_timestamp, false)?;
            self.bytes_since_last_index_entry = 0;
        }
        self.bytes_since_last_index_entry += b.size;
        Ok(())
    }

    /// Should the log roll before appending `incoming` bytes ending at `last_offset`?
    pub fn should_roll(&self, incoming: u64, last_offset: i64, now_ms: i64, config: &LogConfig) -> bool {
        if self.size == 0 {
            return false;
        }
        self.size + incoming > config.segment_bytes
            || self.rolling_base_ms.is_some_and(|t| now_ms - t >= config.roll_ms())
            || self.offset_index.is_full()
            || self.time_index.is_full()
            || last_offset - self.base_offset > i64::from(i32::MAX)
    }

    /// Writes `bytes` (already validated, offsets assigned) with one positioned write and
    /// indexes its batches (in memory: the index files get them at the next flush, roll or
    /// close). On a failed write the file is cut back to its previous size. Opens the `.log`
    /// read-write if it is closed.
    pub fn append(&mut self, bytes: &[u8], batches: &[AppendedBatch], now_ms: i64, config: &LogConfig) -> Result<()> {
        let start = self.size;
        let file = self.writable_file()?;
        if let Err(e) = file.write_all_at(bytes, start) {
            // A full disk (ENOSPC) may have written part of the request: remove it.
            let _ = file.set_len(start);
            return Err(LogError::io(&self.log_path, e));
        }
        self.size += bytes.len() as u64;
        self.unflushed_bytes += bytes.len() as u64;
        if self.rolling_base_ms.is_none() {
            self.rolling_base_ms = Some(now_ms);
        }
        for b in batches {
            self.index_batch(b, start, config)?;
        }
        if let Some(b) = batches.last() {
            self.next_offset = b.last_offset + 1;
        }
        Ok(())
    }

    /// The `.log` handle for a read: the open one, or the file opened now (read-only, or
    /// read-write for the active segment, which the next append then uses).
    pub fn reader(&mut self) -> Result<Arc<File>> {
        if let Some((f, _)) = self.file.get() {
            return Ok(f);
        }
        if self.active {
            return self.writable_file();
        }
        let f = Arc::new(File::open(&self.log_path).ctx(&self.log_path)?);
        self.file.set(Arc::clone(&f), false);
        Ok(f)
    }

    /// The `.log` handle for a write: reopened read-write if it is closed or read-only.
    fn writable_file(&mut self) -> Result<Arc<File>> {
        if let Some((f, true)) = self.file.get() {
            return Ok(f);
        }
        let f = Arc::new(OpenOptions::new().read(true).write(true).open(&self.log_path).ctx(&self.log_path)?);
        self.file.set(Arc::clone(&f), true);
        Ok(f)
    }

    /// Drops the segment's own `.log` handle (an idle or inactive segment; see the module
    /// docs). Regions handed out keep theirs. The next append or read reopens the file;
    /// unflushed bytes stay counted and a flush fsyncs the file by path.
    pub fn close_log_file(&mut self) {
        self.file.close();
    }

    pub fn is_log_file_open(&self) -> bool {
        self.file.is_open()
    }

    /// Descriptors the segment itself holds (0 or 1: its `.log`), for tests and metrics.
    pub fn open_descriptors(&self) -> usize {
        usize::from(self.file.is_open())
    }

    pub fn is_active(&self) -> bool {
        self.active
    }

    fn header_at(&self, file: &File, pos: u64) -> Result<BatchHeader> {
        if pos + HEADER_LEN as u64 > self.size {
            return Err(LogError::corrupt(
                pos,
                format!("no room for a batch header in {} ({} bytes)", self.log_path.display(), self.size),
            ));
        }
        let mut b = [0u8; HEADER_LEN];
        file.read_exact_at(&mut b, pos).ctx(&self.log_path)?;
        let h = BatchHeader::parse(&b);
        if h.size() < HEADER_LEN as u64 || pos + h.size() > self.size {
            return Err(LogError::corrupt(
                pos,
                format!("bad batch length {} in {}", h.batch_length, self.log_path.display()),
            ));
        }
        Ok(h)
    }

    /// Position and header of the first batch whose last offset is >= `target`
    /// (`None` if `target >= next_offset`).
    pub fn translate_offset(&mut self, target: i64) -> Result<Option<(u64, BatchHeader)>> {
        if target >= self.next_offset {
            return Ok(None);
        }
        let file = self.reader()?;
        self.translate_with(&file, target)
    }

    fn translate_with(&self, file: &File, target: i64) -> Result<Option<(u64, BatchHeader)>> {
        if target >= self.next_offset {
            return Ok(None);
        }
        let (_, p) = self.offset_index.lookup(target);
        let mut pos = u64::from(p);
        while pos < self.size {
            let h = self.header_at(file, pos)?;
            if h.last_offset() >= target {
                return Ok(Some((pos, h)));
            }
            pos += h.size();
        }
        Ok(None)
    }

    /// The last batch boundary <= `target_end`, scanning from the boundary `from` (or a later
    /// indexed one).
    fn boundary_at_or_before(&self, file: &File, target_end: u64, from: u64) -> Result<u64> {
        let (_, ip) = self.offset_index.lookup_position(target_end);
        let mut pos = from.max(u64::from(ip));
        while pos < self.size {
            let h = self.header_at(file, pos)?;
            if pos + h.size() > target_end {
                break;
            }
            pos += h.size();
        }
        Ok(pos)
    }

    /// A region of whole batches starting with the one holding `fetch_offset`; see the
    /// module docs. `upper_bound` is an exclusive offset limit. Opens the file if it is closed.
    pub fn read(
        &mut self,
        fetch_offset: i64,
        max_bytes: u64,
        upper_bound: i64,
        min_one_message: bool,
    ) -> Result<Option<FileRegion>> {
        if fetch_offset >= self.next_offset {
            return Ok(None);
        }
        let file = self.reader()?;
        let Some((start, first)) = self.translate_with(&file, fetch_offset)? else { return Ok(None) };
        if first.last_offset() >= upper_bound {
            return Ok(None);
        }
        let limit = if upper_bound < self.next_offset {
            self.translate_with(&file, upper_bound)?.map_or(self.size, |(p, _)| p)
        } else {
            self.size
        };
        let first_size = first.size();
        let end = if first_size > max_bytes {
            if !min_one_message {
                return Ok(None);
            }
            start + first_size
        } else if limit - start <= max_bytes {
            limit
        } else {
            self.boundary_at_or_before(&file, start + max_bytes, start + first_size)?
        };
        Ok(Some(FileRegion { file, path: Arc::clone(&self.path_arc), position: start, length: end - start }))
    }

    /// Whether `region` was read from this segment (whether or not its file was reopened
    /// since).
    pub fn holds(&self, region: &FileRegion) -> bool {
        Arc::ptr_eq(&self.path_arc, &region.path)
    }

    /// The offset of the batch starting at `position` (a batch boundary), or the segment's next
    /// offset when `position` is its end: the exclusive upper offset of a region ending there.
    pub fn offset_at(&mut self, position: u64) -> Result<i64> {
        if position >= self.size {
            return Ok(self.next_offset);
        }
        let file = self.reader()?;
        Ok(self.header_at(&file, position)?.base_offset)
    }

    /// Reads a whole batch (for record-level scans such as ListOffsets by timestamp).
    fn read_batch(&self, file: &File, pos: u64, h: &BatchHeader) -> Result<Vec<u8>> {
        let mut v = vec![0u8; usize::try_from(h.size()).unwrap_or(0)];
        file.read_exact_at(&mut v, pos).ctx(&self.log_path)?;
        Ok(v)
    }

    /// First record with timestamp >= `ts` in this segment: `(offset, timestamp)`.
    /// Only records at offsets >= `min_offset` count (the log start offset).
    pub fn find_offset_by_timestamp(&mut self, ts: i64, min_offset: i64) -> Result<Option<(i64, i64)>> {
        if self.max_timestamp < ts {
            return Ok(None);
        }
        let file = self.reader()?;
        let start_offset = self.time_index.lookup_below(ts).map_or(self.base_offset, |(_, o)| o).max(min_offset);
        let Some((mut pos, _)) = self.translate_with(&file, start_offset)? else { return Ok(None) };
        while pos < self.size {
            let h = self.header_at(&file, pos)?;
            if h.max_timestamp >= ts && h.last_offset() >= min_offset {
                let bytes = self.read_batch(&file, pos, &h)?;
                let mut found = None;
                batch::for_each_record_timestamp(&bytes, pos, |o, t| {
                    if t >= ts && o >= min_offset {
                        found = Some((o, t));
                        Control::Stop
                    } else {
                        Control::Continue
                    }
                })?;
                if found.is_some() {
                    return Ok(found);
                }
            }
            pos += h.size();
        }
        Ok(None)
    }

    /// Recomputes the max timestamp by a scan of the batches from `from_pos` (a batch start at
    /// or before the batch holding the time index's last entry, so that batch is seen) to the end.
    fn rescan_max_timestamp(&mut self, from_pos: u64) -> Result<()> {
        let (mut max, mut off, mut shallow) = (-1i64, -1i64, -1i64);
        let file = self.reader()?;
        let path = self.log_path.clone();
        let mut src = FileSource::new(&file, &path, self.size);
        batch::scan(&mut src, from_pos, Check::Stored, None, |v| {
            let h = v.header;
            if h.max_timestamp > max {
                max = h.max_timestamp;
                off = if h.is_log_append_time() {
                    h.base_offset
                } else {
                    h.base_offset + i64::from(v.records.map_or(0, |s| s.offset_delta_of_max))
                };
                shallow = h.last_offset();
            }
            Ok(Control::Continue)
        })?;
        self.max_timestamp = max;
        self.offset_of_max_timestamp = off;
        self.shallow_offset_of_max_timestamp = shallow;
        Ok(())
    }

    /// `(offset of the first record with timestamp `ts`, last offset)` of the batch holding
    /// `offset` (a time index entry's offset: a batch's last offset, or any of its records in
    /// files written before entries named batches). Kafka finds ListOffsets -3's record the
    /// same way. A batch without such a record (a damaged index) gives its base offset.
    fn record_with_timestamp(&self, file: &File, offset: i64, ts: i64) -> Result<(i64, i64)> {
        let Some((pos, h)) = self.translate_with(file, offset)? else { return Ok((offset, offset)) };
        if h.is_log_append_time() {
            return Ok((h.base_offset, h.last_offset()));
        }
        let bytes = self.read_batch(file, pos, &h)?;
        let mut found = h.base_offset;
        batch::for_each_record_timestamp(&bytes, pos, |o, t| {
            if t == ts {
                found = o;
                Control::Stop
            } else {
                Control::Continue
            }
        })?;
        Ok((found, h.last_offset()))
    }

    /// Removes the batch holding `offset` (or, in a gap, the first batch after it) and
    /// everything after it. The next offset becomes the end of the last remaining batch, so
    /// after a truncation into a compaction gap it may be below `offset`. Returns bytes removed.
    /// Reopens the file (and the indexes) read-write.
    pub fn truncate_to(&mut self, offset: i64) -> Result<u64> {
        if offset >= self.next_offset {
            return Ok(0);
        }
        let file = self.writable_file()?;
        let Some((pos, h)) = self.translate_with(&file, offset)? else { return Ok(0) };
        let removed = self.size - pos;
        file.set_len(pos).ctx(&self.log_path)?;
        self.size = pos;
        self.offset_index.truncate_to(h.base_offset)?;
        self.time_index.truncate_to(h.base_offset)?;
        // The last remaining batch: a header scan from the last index entry.
        let from = self.offset_index.last_entry().map_or(0, |(_, p)| u64::from(p));
        let mut last_next = self.base_offset;
        let mut src = FileSource::new(&file, &self.log_path, self.size);
        batch::scan(&mut src, from, Check::Framing, None, |v| {
            last_next = v.header.next_offset();
            Ok(Control::Continue)
        })?;
        self.next_offset = last_next;
        let from = self.offset_index.last_entry().map_or(0, |(_, p)| u64::from(p));
        // Time entries can name an offset inside the last indexed batch, so rescan from the
        // batch holding the last time entry's offset.
        let from = match self.time_index.last_entry() {
            Some((_, o)) => self.translate_with(&file, o)?.map_or(from, |(p, _)| p.min(from)),
            None => 0,
        };
        self.rescan_max_timestamp(from)?;
        self.bytes_since_last_index_entry = self.size - self.offset_index.last_entry().map_or(0, |(_, p)| u64::from(p));
        if self.size == 0 {
            self.rolling_base_ms = None;
        }
        self.unflushed_bytes = self.unflushed_bytes.min(self.size);
        Ok(removed)
    }

    /// The segment stops being active (roll, close, a cleaned or recovered segment): final
    /// time-index entry, and every index entry written to the files (created if need be), so
    /// an inactive segment's index files are complete. Not fsynced: `needs_flush` says so
    /// until a flush does. The `.log` stays open until the log closes it (see `log.rs`).
    pub fn on_become_inactive(&mut self) -> Result<()> {
        if self.max_timestamp >= 0 || self.size > 0 {
            self.time_index.maybe_append(
                self.max_timestamp,
                self.shallow_offset_of_max_timestamp.max(self.base_offset),
                true,
            )?;
        }
        self.offset_index.write_pending()?;
        self.time_index.write_pending()?;
        self.active = false;
        Ok(())
    }

    /// The segment becomes the one that appends (the last segment after loading or a
    /// truncation). Opens nothing: a read-only handle is dropped, and the next append or
    /// read opens the `.log` read-write.
    pub fn make_active(&mut self) {
        self.active = true;
        if self.file.get().is_some_and(|(_, writable)| !writable) {
            self.close_log_file();
        }
    }

    /// Whether a flush has anything to fsync: appended bytes, or index entries not yet
    /// written or fsynced (a rolled segment's final entries count).
    pub fn needs_flush(&self) -> bool {
        self.unflushed_bytes > 0 || self.offset_index.needs_sync() || self.time_index.needs_sync()
    }

    /// fsync of the log and both indexes (index entries written first): an open `.log`
    /// always, a closed one if it changed since its last fsync (opened by path for it), an
    /// index file if it changed.
    pub fn flush(&mut self) -> Result<()> {
        let file = self.file.peek();
        if file.is_some() || self.unflushed_bytes > 0 {
            SyncTarget { file, path: self.log_path.clone() }.sync(false)?;
        }
        self.offset_index.sync()?;
        self.time_index.sync()?;
        self.unflushed_bytes = 0;
        Ok(())
    }

    /// What a flush fsyncs outside the log lock: the `.log`, and each index file that changed,
    /// after writing the entries it lacks (under the lock; so the files are complete when the
    /// recovery point passes them). Marks the segment flushed; the caller calls
    /// [`Self::mark_unflushed`] if an fsync fails.
    pub fn sync_targets(&mut self) -> Result<Vec<SyncTarget>> {
        let mut targets = vec![SyncTarget { file: self.file.peek(), path: self.log_path.clone() }];
        targets.extend(self.offset_index.sync_target()?);
        match self.time_index.sync_target() {
            Ok(t) => targets.extend(t),
            Err(e) => {
                self.offset_index.mark_unsynced();
                return Err(e);
            }
        }
        self.unflushed_bytes = 0;
        Ok(targets)
    }

    /// An fsync of `sync_targets` failed: everything counts as unflushed again.
    pub fn mark_unflushed(&mut self) {
        self.unflushed_bytes = self.size;
        self.offset_index.mark_unsynced();
        self.time_index.mark_unsynced();
    }

    /// Largest timestamp for retention.ms; falls back to the file's mtime when the segment
    /// holds no timestamps (as Kafka does). A `stat` of the path: no descriptor needed.
    pub fn largest_timestamp(&self) -> i64 {
        if self.max_timestamp >= 0 {
            return self.max_timestamp;
        }
        std::fs::metadata(&self.log_path)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .and_then(|d| i64::try_from(d.as_millis()).ok())
            .unwrap_or(-1)
    }

    /// Unlinks the three files (open or not). Regions that still hold the log file keep
    /// working.
    pub fn delete_files(&self) -> Result<()> {
        for p in [&self.log_path, &self.offset_index.path().to_owned(), &self.time_index.path().to_owned()] {
            match std::fs::remove_file(p) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(LogError::io(p, e)),
            }
        }
        Ok(())
    }

    /// Header-only scan of all batches (producer-state rebuild), in file order.
    pub fn scan_headers(&mut self, mut each: impl FnMut(&BatchHeader)) -> Result<()> {
        let file = self.reader()?;
        let mut src = FileSource::new(&file, &self.log_path, self.size);
        batch::scan(&mut src, 0, Check::Framing, None, |v| {
            each(&v.header);
            Ok(Control::Continue)
        })?;
        Ok(())
    }

    /// Header-only scan that also reads each control batch's marker (its first record; a
    /// control batch is a few dozen bytes). For the producer-state rebuild.
    pub fn scan_producer_batches(&mut self, mut each: impl FnMut(&BatchHeader, Option<EndTxnMarker>)) -> Result<()> {
        let file = self.reader()?;
        let mut src = FileSource::new(&file, &self.log_path, self.size);
        let mut buf = Vec::new();
        batch::scan(&mut src, 0, Check::Framing, None, |v| {
            let h = v.header;
            let marker = if h.is_control() {
                buf.resize(h.size().min(256) as usize, 0);
                file.read_exact_at(&mut buf, v.position).ctx(&self.log_path)?;
                EndTxnMarker::parse(&buf)
            } else {
                None
            };
            each(&h, marker);
            Ok(Control::Continue)
        })?;
        Ok(())
    }

    pub fn offset_index_len(&self) -> usize {
        self.offset_index.len()
    }
    pub fn time_index_len(&self) -> usize {
        self.time_index.len()
    }
    pub fn offset_index_entry(&self, i: usize) -> (i64, u32) {
        self.offset_index.entry(i)
    }
    /// Time index entry `i` as (timestamp, absolute offset).
    pub fn time_index_entry(&self, i: usize) -> (i64, i64) {
        self.time_index.entry(i)
    }

    /// maxTimestamp of the first batch (max.compaction.lag.ms), `None` when empty.
    pub fn first_batch_timestamp(&mut self) -> Result<Option<i64>> {
        if self.size == 0 {
            return Ok(None);
        }
        let file = self.reader()?;
        Ok(Some(self.header_at(&file, 0)?.max_timestamp))
    }
}

const _: () = {
    assert!(offset_index::ENTRY_SIZE == 8);
    assert!(time_index::ENTRY_SIZE == 12);
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builder::{BatchBuilder, Rec};

    fn cfg(interval: u64) -> LogConfig {
        LogConfig { index_interval_bytes: interval, segment_index_bytes: 4096, ..LogConfig::default() }
    }

    /// Appends `n` single-batch requests of `per` records to `seg`, returns bytes per batch.
    fn fill(seg: &mut Segment, n: usize, per: usize, config: &LogConfig) -> Vec<u64> {
        let mut sizes = vec![];
        for _ in 0..n {
            let mut b = BatchBuilder::new().base_timestamp(seg.next_offset * 10);
            for i in 0..per {
                b = b.record(Rec::value(format!("value {i} padding padding").as_bytes()).ts_delta(i as i64));
            }
            let mut bytes = b.build();
            batch::set_base_offset(&mut bytes, seg.next_offset);
            let (h, s) = batch::validate_batch(&bytes, 0).unwrap();
            let ab = AppendedBatch {
                rel_position: 0,
                size: bytes.len() as u64,
                base_offset: h.base_offset,
                last_offset: h.last_offset(),
                max_timestamp: h.max_timestamp,
                offset_of_max_timestamp: h.base_offset + i64::from(s.offset_delta_of_max),
            };
            seg.append(&bytes, &[ab], 0, config).unwrap();
            sizes.push(bytes.len() as u64);
        }
        sizes
    }

    #[test]
    fn append_read_and_sparse_index() {
        let dir = tempfile::tempdir().unwrap();
        let config = cfg(200);
        let mut seg = Segment::create(dir.path(), 100, &config).unwrap();
        let sizes = fill(&mut seg, 30, 3, &config);
        assert_eq!(seg.next_offset, 190);
        let per = sizes[0];
        assert!(seg.offset_index_len() > 0 && seg.offset_index_len() < 30, "sparse: {}", seg.offset_index_len());
        for target in [100, 101, 150, 189] {
            let (pos, h) = seg.translate_offset(target).unwrap().unwrap();
            assert!(h.base_offset <= target && target <= h.last_offset());
            assert_eq!(pos, (h.base_offset - 100) as u64 / 3 * per);
        }
        assert!(seg.translate_offset(190).unwrap().is_none());
        // max_bytes cuts at a batch boundary; upper bound stops before the batch holding it.
        let r = seg.read(100, per * 2 + 5, i64::MAX, false).unwrap().unwrap();
        assert_eq!((r.position, r.length), (0, per * 2));
        let r = seg.read(103, 1 << 20, 109, false).unwrap().unwrap();
        assert_eq!((r.position, r.length), (per, per * 2));
        assert!(seg.read(103, 1, i64::MAX, false).unwrap().is_none());
        assert_eq!(seg.read(103, 1, i64::MAX, true).unwrap().unwrap().length, per);
    }

    #[test]
    fn reopen_uses_written_indexes() {
        let dir = tempfile::tempdir().unwrap();
        let config = cfg(100);
        let mut seg = Segment::create(dir.path(), 0, &config).unwrap();
        fill(&mut seg, 20, 2, &config);
        let (n_idx, next, max) = (seg.offset_index_len(), seg.next_offset, seg.max_timestamp);
        seg.on_become_inactive().unwrap();
        drop(seg);
        let (re, needs) = Segment::open(dir.path(), 0, &config, 0, false).unwrap();
        assert!(!needs);
        assert_eq!((re.offset_index_len(), re.next_offset, re.max_timestamp), (n_idx, next, max));
    }

    #[test]
    fn reopen_with_garbage_index_needs_recovery() {
        let dir = tempfile::tempdir().unwrap();
        let config = cfg(100);
        let mut seg = Segment::create(dir.path(), 0, &config).unwrap();
        fill(&mut seg, 10, 2, &config);
        seg.on_become_inactive().unwrap();
        drop(seg);
        std::fs::write(dir.path().join(file_name(0, ".index")), [0xFFu8; 16]).unwrap();
        let (mut re, needs) = Segment::open(dir.path(), 0, &config, 0, false).unwrap();
        assert!(needs);
        let r = re.recover(&config, 0, false).unwrap();
        assert_eq!(r.truncated_bytes, 0);
        assert_eq!(re.next_offset, 20);
        assert!(re.offset_index_len() > 0);
    }

    #[test]
    fn truncate_to_mid_batch_removes_whole_batch() {
        let dir = tempfile::tempdir().unwrap();
        let config = cfg(0);
        let mut seg = Segment::create(dir.path(), 0, &config).unwrap();
        let sizes = fill(&mut seg, 10, 4, &config);
        let removed = seg.truncate_to(21).unwrap(); // batch 20..23 goes
        assert_eq!(seg.next_offset, 20);
        assert_eq!(removed, sizes[0] * 5);
        assert_eq!(seg.size, sizes[0] * 5);
        for i in 0..seg.offset_index_len() {
            assert!(seg.offset_index_entry(i).0 < 20);
        }
        assert_eq!(seg.max_timestamp, 16 * 10 + 3);
        // Appending continues cleanly from 20.
        fill(&mut seg, 1, 4, &config);
        assert_eq!(seg.translate_offset(21).unwrap().unwrap().1.base_offset, 20);
    }

    #[test]
    fn truncate_to_exact_entry() {
        let dir = tempfile::tempdir().unwrap();
        let config = cfg(0);
        let mut seg = Segment::create(dir.path(), 0, &config).unwrap();
        fill(&mut seg, 6, 2, &config);
        // interval 0: entries at every batch but the first: offsets 2,4,6,8,10.
        assert_eq!(seg.offset_index_len(), 5);
        seg.truncate_to(6).unwrap();
        assert_eq!(seg.offset_index_len(), 2);
        assert_eq!(seg.next_offset, 6);
    }

    #[test]
    fn roll_conditions() {
        let dir = tempfile::tempdir().unwrap();
        let config = LogConfig { segment_bytes: 1000, segment_ms: 100, ..cfg(4096) };
        let mut seg = Segment::create(dir.path(), 0, &config).unwrap();
        assert!(!seg.should_roll(5000, 0, 0, &config), "an empty segment never rolls");
        fill(&mut seg, 1, 1, &config);
        assert!(!seg.should_roll(10, 1, 50, &config));
        assert!(seg.should_roll(1000, 1, 50, &config), "size");
        assert!(seg.should_roll(10, 1, 100, &config), "age");
        assert!(seg.should_roll(10, i64::from(i32::MAX) + 1, 50, &config), "offset overflow");
    }

    #[test]
    fn find_offset_by_timestamp_scans_records() {
        let dir = tempfile::tempdir().unwrap();
        let config = cfg(50);
        let mut seg = Segment::create(dir.path(), 0, &config).unwrap();
        fill(&mut seg, 10, 3, &config); // batch at base b has timestamps b*10 .. b*10+2
        assert_eq!(seg.find_offset_by_timestamp(0, 0).unwrap(), Some((0, 0)));
        assert_eq!(seg.find_offset_by_timestamp(31, 0).unwrap(), Some((4, 31)));
        assert_eq!(seg.find_offset_by_timestamp(33, 0).unwrap(), Some((6, 60)));
        assert_eq!(seg.find_offset_by_timestamp(272, 0).unwrap(), Some((29, 272)));
        assert_eq!(seg.find_offset_by_timestamp(273, 0).unwrap(), None);
        assert_eq!(seg.find_offset_by_timestamp(0, 5).unwrap(), Some((5, 32)));
    }
}
