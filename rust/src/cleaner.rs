//! The log cleaner: compaction of a partition whose `cleanup.policy` contains `compact`.
//!
//! # A cleaning pass (Kafka's algorithm; driven by `Log::compact`)
//! 1. *Cleanable range*, decided under the log lock: the inactive segments not entirely below
//!    the log start offset, up to the first one that is not entirely below
//!    `min(high watermark, active segment base)`, and stopping at the first dirty segment whose
//!    newest record is younger than `min.compaction.lag.ms`. The active segment is never
//!    cleaned. Segments entirely below the cleaner checkpoint are *clean*, the rest *dirty*.
//! 2. *Should it run?* `force`, or dirty bytes > 0 and either dirty bytes / cleanable bytes >=
//!    `min.cleanable.dirty.ratio` or the oldest dirty batch (first-batch maxTimestamp) is older
//!    than `max.compaction.lag.ms`, or the earliest delete horizon kept by the last pass has
//!    passed (KIP-534: expired tombstones go without new writes). After a restart that
//!    horizon is unknown, so the first call on a log that was cleaned before runs a pass.
//! 3. *Offset map* (no lock): exact key bytes → offset of the key's latest record, over the
//!    dirty segments of the range.
//! 4. *Rewrite* (no lock): the range is cut into groups of consecutive segments whose sizes
//!    sum to at most `segment.bytes` (and whose offsets fit the indexes); each group becomes
//!    one segment named after its first segment's base offset. A record is kept iff it has a
//!    key and no later record of that key is in the map; a kept tombstone (null value) goes
//!    once its batch's delete horizon has passed (below). Keyless records are dropped (Kafka
//!    counts them as invalid: a compacted topic refuses them at produce time).
//! 5. *Swap* (under the lock): only if the log was not truncated meanwhile and each group's
//!    segments are still there unchanged (retention may have deleted some); then the
//!    cleaner checkpoint moves to the end of the range.
//!
//! # Batches after cleaning (RECORD-BATCH.md section 5)
//! - A batch whose records all stay is copied byte for byte (unless it needs a delete horizon).
//! - Otherwise it is re-encoded with the same codec, baseOffset, lastOffsetDelta, leader epoch,
//!   producer id/epoch/baseSequence and attributes; records keep their offset deltas (offsets
//!   never change, they only become sparse) and absolute timestamps; recordsCount, the CRC,
//!   baseTimestamp (first kept record, or the delete horizon) and maxTimestamp (largest kept
//!   record; unchanged under LogAppendTime) are recomputed.
//! - A batch left with no records is dropped, except (a) the last batch of a producer id still
//!   in the producer state (its sequence must survive a rebuild) and (b) the last batch of a
//!   group (so a cleaned segment ends at the same offset as the segments it replaces, which
//!   keeps segments contiguous and lets recovery find what a `.swap` replaces); those stay as
//!   empty batches: header only, recordsCount 0, no codec, base and max timestamp = the
//!   original maxTimestamp.
//! - Control batches (transaction markers) are kept as they are. The cleanable range ends at
//!   the first unstable offset (no open transaction is cleaned). Records of aborted
//!   transactions (the aborted-transaction index, `producer_state.rs`) are removed and do
//!   not count in the offset map, so an aborted write never shadows a committed one;
//!   committed transactional records are cleaned like any other.
//!
//! # Tombstones: the batch delete horizon (attributes bit 6, Kafka's KIP-534 rule)
//! A pass that keeps a tombstone in a batch without a delete horizon rewrites the batch with
//! bit 6 set and baseTimestamp = now + `delete.retention.ms` (record timestamp deltas are
//! re-based on it). A later pass at or after the horizon drops the batch's tombstones. So a
//! tombstone survives at least `delete.retention.ms` after the first pass that saw it, which
//! lets a consumer that started before see it. Each pass remembers the earliest horizon it
//! kept, and the first call after it passes runs a pass even without new writes.
//!
//! # Files (in the partition directory)
//! ```text
//! cleaner-offset-checkpoint                  "0\n<offset>\n": segments entirely below are clean
//! <base>.log.cleaned .index.cleaned .timeindex.cleaned   a group being written
//! <base>.log.swap    .index.swap    .timeindex.swap      a group committed, being swapped in
//! ```
//! The checkpoint is only advisory (a missing or out-of-range one means "nothing is clean");
//! truncation lowers it.
//!
//! # Crash safety (Kafka's swap protocol)
//! 1. write and fsync the `.cleaned` files;
//! 2. rename them to `.swap` (indexes first; the `.log.swap` rename is the commit point), fsync
//!    the directory;
//! 3. delete the replaced segments' files;
//! 4. rename the `.swap` files to their final names (indexes first, log last), fsync the dir.
//!
//! Recovery ([`complete_interrupted_swaps`], before anything else): for every `<base>.log.swap`,
//! delete every segment whose base offset is in `[base, end of the swap segment)` and rename
//! the swap files into place. Then stray `.cleaned` and `.swap` files (a pass that had not
//! committed) are deleted. A crash therefore leaves the log as it was before the group or as
//! it is after it, never a mix.
//!
//! # Concurrency
//! The rewrite reads inactive segments through their `Arc<File>` without the log lock
//! (inactive segments only change by truncation, which bumps the log's generation, or by
//! deletion, which keeps the handles readable); appends and fetches go on meanwhile. One
//! pass at a time per log.

use std::collections::HashMap;
use std::fs::File;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::batch::{
    self, BatchHeader, Check, Control, FileSource, RecordView, DELETE_HORIZON_BIT, TIMESTAMP_TYPE_BIT,
    TRANSACTIONAL_BIT,
};
use crate::compression::{self, Codec};
use crate::config::LogConfig;
use crate::error::{IoContext, LogError, Result};
use crate::offset_checkpoint::sync_dir;
use crate::producer_state::AbortedTxn;
use crate::recovery::parse_base;
use crate::segment::{AppendedBatch, Segment};

pub const CLEANER_CHECKPOINT_FILE: &str = "cleaner-offset-checkpoint";
pub const CLEANED_SUFFIX: &str = ".cleaned";
pub const SWAP_SUFFIX: &str = ".swap";

/// Output is written to the `.cleaned` segment in chunks of about this many bytes.
const WRITE_CHUNK: usize = 1 << 20;

/// What a cleaning pass did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CompactionResult {
    /// Segments rewritten (replaced by fewer or as many cleaned segments).
    pub segments_cleaned: usize,
    /// Size of the rewritten segments before and after.
    pub bytes_before: u64,
    pub bytes_after: u64,
    /// Records dropped (superseded, keyless, expired tombstones).
    pub records_removed: u64,
    /// Of which tombstones dropped because their delete horizon had passed.
    pub tombstones_removed: u64,
    /// The cleaner checkpoint after the pass: segments entirely below it are clean.
    pub cleaned_up_to: i64,
    /// Dirty bytes / cleanable bytes when the pass started (0 when nothing is cleanable).
    pub dirty_ratio: f64,
}

/// An inactive segment as the cleaner reads it, captured under the log lock.
pub(crate) struct SegmentSnapshot {
    pub base_offset: i64,
    pub next_offset: i64,
    pub size: u64,
    pub file: Arc<File>,
    pub path: PathBuf,
    /// Not entirely below the cleaner checkpoint.
    pub dirty: bool,
}

/// A cleaned segment written as `<base>.*.cleaned`, and what it replaces.
#[derive(Debug)]
pub(crate) struct CleanedGroup {
    pub base_offset: i64,
    /// `(base offset, size)` of the replaced segments, in order.
    pub originals: Vec<(i64, u64)>,
    pub size: u64,
}

/// What the rewrite needs besides the segments.
pub(crate) struct CleanContext<'a> {
    pub dir: &'a Path,
    pub config: &'a LogConfig,
    pub now_ms: i64,
    /// Key → offset of its latest record in the dirty range.
    pub map: &'a HashMap<Vec<u8>, i64>,
    /// Producer id → last offset of its last batch (producer state).
    pub producer_last_offsets: &'a HashMap<i64, i64>,
    pub aborted: &'a AbortedRanges,
    /// Tiered storage holds records the cleaner cannot see: tombstones are never dropped.
    pub keep_tombstones: bool,
}

/// The aborted transactions of the cleanable range, by producer id: `(first offset, marker
/// offset)` ranges whose transactional data batches are dropped.
#[derive(Debug, Default)]
pub(crate) struct AbortedRanges(HashMap<i64, Vec<(i64, i64)>>);

impl AbortedRanges {
    pub fn new(list: &[AbortedTxn]) -> Self {
        let mut m: HashMap<i64, Vec<(i64, i64)>> = HashMap::new();
        for a in list {
            m.entry(a.producer_id).or_default().push((a.first_offset, a.last_offset));
        }
        AbortedRanges(m)
    }

    /// True for a transactional data batch of an aborted transaction.
    pub fn holds(&self, h: &BatchHeader) -> bool {
        h.is_transactional()
            && !h.is_control()
            && self
                .0
                .get(&h.producer_id)
                .is_some_and(|v| v.iter().any(|&(f, l)| f <= h.base_offset && h.base_offset <= l))
    }
}

/// Record counts of a pass.
#[derive(Debug, Default)]
pub(crate) struct Counts {
    pub records_removed: u64,
    pub tombstones_removed: u64,
    /// Earliest delete horizon of the batches that kept tombstones.
    pub earliest_horizon: Option<i64>,
}

impl Counts {
    fn note_horizon(&mut self, h: i64) {
        self.earliest_horizon = Some(self.earliest_horizon.map_or(h, |e| e.min(h)));
    }
}

fn scan_segment(s: &SegmentSnapshot, visit: impl FnMut(&batch::Visited<'_>) -> Result<Control>) -> Result<()> {
    scan_segment_records(s, |_, _| {}, visit)
}

/// `scan_segment`, with `each_record` called for every record as the check walks it.
fn scan_segment_records(
    s: &SegmentSnapshot,
    each_record: impl FnMut(&BatchHeader, &batch::RecordView<'_>),
    visit: impl FnMut(&batch::Visited<'_>) -> Result<Control>,
) -> Result<()> {
    let mut src = FileSource::new(&s.file, &s.path, s.size);
    let end = batch::scan_records(&mut src, 0, Check::Stored, None, each_record, visit)?;
    match end.error {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Exact key → latest offset over the dirty segments (control batches, aborted transactions
/// and keyless records do not count).
pub(crate) fn build_offset_map(segments: &[SegmentSnapshot], aborted: &AbortedRanges) -> Result<HashMap<Vec<u8>, i64>> {
    let mut map: HashMap<Vec<u8>, i64> = HashMap::new();
    for s in segments.iter().filter(|s| s.dirty) {
        // the keys are read in the walk that checks each batch (one decompression)
        let each_record = |h: &BatchHeader, r: &batch::RecordView<'_>| {
            if h.is_control() || aborted.holds(h) {
                return;
            }
            if let Some(k) = r.key {
                let offset = h.base_offset + i64::from(r.offset_delta);
                match map.get_mut(k) {
                    Some(o) => *o = offset,
                    None => {
                        map.insert(k.to_vec(), offset);
                    }
                }
            }
        };
        scan_segment_records(s, each_record, |_| Ok(Control::Continue))?;
    }
    Ok(map)
}

/// Consecutive runs of segments that fit one cleaned segment: total size <= `max_bytes`
/// and every offset within i32 of the first base offset.
pub(crate) fn group_segments(segments: &[SegmentSnapshot], max_bytes: u64) -> Vec<Range<usize>> {
    let mut groups = Vec::new();
    let mut start = 0;
    while start < segments.len() {
        let first = segments[start].base_offset;
        let mut size = segments[start].size;
        let mut end = start + 1;
        while end < segments.len()
            && size + segments[end].size <= max_bytes
            && segments[end].next_offset - 1 - first <= i64::from(i32::MAX)
        {
            size += segments[end].size;
            end += 1;
        }
        groups.push(start..end);
        start = end;
    }
    groups
}

/// What cleaning does to one batch.
enum Outcome {
    /// Every record stays and no horizon is needed: copy the bytes.
    Verbatim,
    /// Re-encoded: the new bytes and the offset of the (first) record with the max timestamp.
    Rewritten(Vec<u8>, i64),
    /// No record stays.
    Emptied,
}

fn filter_batch(
    h: &BatchHeader,
    region: &[u8],
    position: u64,
    cx: &CleanContext<'_>,
    counts: &mut Counts,
) -> Result<Outcome> {
    if h.is_control() {
        return Ok(Outcome::Verbatim);
    }
    if cx.aborted.holds(h) {
        counts.records_removed += u64::try_from(h.records_count.max(0)).unwrap_or(0);
        return Ok(Outcome::Emptied);
    }
    let horizon = h.delete_horizon();
    let mut kept: Vec<RecordView<'_>> = Vec::new();
    let mut removed = 0u64;
    let mut tombstones_removed = 0u64;
    let mut tombstones_kept = false;
    batch::walk_records(region, h, position, |r| {
        let offset = h.base_offset + i64::from(r.offset_delta);
        let latest = r.key.is_some_and(|k| cx.map.get(k).is_none_or(|&l| offset >= l));
        let keep = if !latest {
            false
        } else if r.value.is_none() && !cx.keep_tombstones && horizon.is_some_and(|hz| cx.now_ms >= hz) {
            tombstones_removed += 1;
            false
        } else {
            tombstones_kept |= r.value.is_none();
            true
        };
        if keep {
            kept.push(*r);
        } else {
            removed += 1;
        }
    })?;
    counts.records_removed += removed;
    counts.tombstones_removed += tombstones_removed;
    let new_horizon =
        tombstones_kept.then(|| horizon.unwrap_or_else(|| cx.now_ms.saturating_add(cx.config.delete_retention_ms)));
    if let Some(h) = new_horizon {
        counts.note_horizon(h);
    }
    if removed == 0 && (!tombstones_kept || horizon.is_some()) {
        return Ok(Outcome::Verbatim);
    }
    if kept.is_empty() {
        return Ok(Outcome::Emptied);
    }
    let ts_of = |r: &RecordView<'_>| h.base_timestamp.wrapping_add(r.timestamp_delta);
    let base_timestamp = new_horizon.unwrap_or_else(|| ts_of(&kept[0]));
    let mut plain = Vec::with_capacity(region.len());
    let (mut max_ts, mut delta_of_max) = (i64::MIN, 0i32);
    for r in &kept {
        let t = ts_of(r);
        if t > max_ts {
            max_ts = t;
            delta_of_max = r.offset_delta;
        }
        batch::encode_record(&mut plain, r, t.wrapping_sub(base_timestamp));
    }
    let codec = h.codec().ok_or_else(|| LogError::invalid(position, "unknown compression codec"))?;
    let body = if codec == Codec::None { plain } else { compression::compress(codec, &plain) };
    let mut attributes = h.attributes & !DELETE_HORIZON_BIT;
    if new_horizon.is_some() {
        attributes |= DELETE_HORIZON_BIT;
    }
    let log_append = h.is_log_append_time();
    let header = BatchHeader {
        attributes,
        base_timestamp,
        max_timestamp: if log_append { h.max_timestamp } else { max_ts },
        records_count: i32::try_from(kept.len()).expect("fewer records than the original batch"),
        ..*h
    };
    let offset_of_max = if log_append { h.base_offset } else { h.base_offset + i64::from(delta_of_max) };
    Ok(Outcome::Rewritten(header.assemble(&body), offset_of_max))
}

/// The header-only batch that stands for an emptied one (keeps its offsets and producer
/// fields).
fn empty_batch(h: &BatchHeader) -> Vec<u8> {
    BatchHeader {
        attributes: h.attributes & (TIMESTAMP_TYPE_BIT | TRANSACTIONAL_BIT),
        base_timestamp: h.max_timestamp,
        records_count: 0,
        ..*h
    }
    .assemble(&[])
}

/// Output buffer of a group: batches waiting for the next `Segment::append`.
struct Output {
    seg: Segment,
    buf: Vec<u8>,
    batches: Vec<AppendedBatch>,
    written: u64,
}

impl Output {
    fn push(&mut self, bytes: &[u8], h: &BatchHeader, offset_of_max: i64, cx: &CleanContext<'_>) -> Result<()> {
        self.batches.push(AppendedBatch {
            rel_position: self.buf.len() as u64,
            size: bytes.len() as u64,
            base_offset: h.base_offset,
            last_offset: h.last_offset(),
            max_timestamp: BatchHeader::parse(bytes).max_timestamp,
            offset_of_max_timestamp: offset_of_max,
        });
        self.buf.extend_from_slice(bytes);
        if self.buf.len() >= WRITE_CHUNK {
            self.write(cx)?;
        }
        Ok(())
    }

    fn write(&mut self, cx: &CleanContext<'_>) -> Result<()> {
        if !self.buf.is_empty() {
            self.seg.append(&self.buf, &self.batches, cx.now_ms, cx.config)?;
            self.written += self.buf.len() as u64;
            self.buf.clear();
            self.batches.clear();
        }
        Ok(())
    }
}

/// Writes the cleaned replacement of `segments` (one group) as `<base>.*.cleaned`, fsynced.
pub(crate) fn clean_group(
    segments: &[SegmentSnapshot],
    cx: &CleanContext<'_>,
    counts: &mut Counts,
) -> Result<CleanedGroup> {
    let base = segments[0].base_offset;
    let seg = Segment::create_with_suffix(cx.dir, base, cx.config, CLEANED_SUFFIX)?;
    let mut out = Output { seg, buf: Vec::new(), batches: Vec::new(), written: 0 };
    // The group's last batch, if it was emptied and not written: it is kept (empty) so the
    // cleaned segment ends where the group did.
    let mut last_emptied: Option<BatchHeader> = None;
    for s in segments {
        scan_segment(s, |v| {
            let h = v.header;
            let bytes = v.bytes.expect("stored check reads the batch");
            last_emptied = None;
            let region = v.records_region.expect("stored check reads the records");
            match filter_batch(&h, region, v.position, cx, counts)? {
                Outcome::Verbatim => {
                    let delta = v.records.map_or(0, |r| r.offset_delta_of_max);
                    let off_max = if h.is_log_append_time() { h.base_offset } else { h.base_offset + i64::from(delta) };
                    out.push(bytes, &h, off_max, cx)?;
                }
                Outcome::Rewritten(b, off_max) => out.push(&b, &h, off_max, cx)?,
                Outcome::Emptied => {
                    let producer_last =
                        h.has_producer_id() && cx.producer_last_offsets.get(&h.producer_id) == Some(&h.last_offset());
                    if producer_last {
                        out.push(&empty_batch(&h), &h, h.base_offset, cx)?;
                    } else {
                        last_emptied = Some(h);
                    }
                }
            }
            Ok(Control::Continue)
        })?;
    }
    if let Some(h) = last_emptied {
        out.push(&empty_batch(&h), &h, h.base_offset, cx)?;
    }
    out.write(cx)?;
    out.seg.on_become_inactive()?;
    out.seg.flush()?;
    Ok(CleanedGroup {
        base_offset: base,
        originals: segments.iter().map(|s| (s.base_offset, s.size)).collect(),
        size: out.written,
    })
}

fn remove_if_exists(path: &Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(LogError::io(path, e)),
    }
}

/// Deletes a group's `.cleaned` (and `.swap`) files: the pass gave the group up.
pub(crate) fn discard(dir: &Path, base: i64) {
    for suffix in [CLEANED_SUFFIX, SWAP_SUFFIX] {
        for p in Segment::paths(dir, base, suffix) {
            // Best effort: recovery deletes whatever is left.
            let _ = remove_if_exists(&p);
        }
    }
}

fn rename(from: &Path, to: &Path) -> Result<()> {
    std::fs::rename(from, to).ctx(to)
}

/// Steps 2-4 of the swap protocol for one written group (see the module docs). The caller
/// holds the log lock and reopens the segment afterwards.
pub(crate) fn swap_in(dir: &Path, group: &CleanedGroup) -> Result<()> {
    let base = group.base_offset;
    let cleaned = Segment::paths(dir, base, CLEANED_SUFFIX);
    let swap = Segment::paths(dir, base, SWAP_SUFFIX);
    let live = Segment::paths(dir, base, "");
    for i in [1, 2, 0] {
        rename(&cleaned[i], &swap[i])?;
    }
    sync_dir(dir)?;
    for &(b, _) in &group.originals {
        for p in Segment::paths(dir, b, "") {
            remove_if_exists(&p)?;
        }
    }
    for i in [1, 2, 0] {
        rename(&swap[i], &live[i])?;
    }
    sync_dir(dir)
}

/// Recovery step: finishes every swap whose `.log.swap` exists (the commit point). Returns
/// how many were completed.
pub(crate) fn complete_interrupted_swaps(dir: &Path) -> Result<usize> {
    let mut swaps = Vec::new();
    let mut logs = Vec::new();
    for entry in std::fs::read_dir(dir).ctx(dir)? {
        let entry = entry.ctx(dir)?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some(b) = parse_base(&name, ".log.swap") {
            swaps.push(b);
        } else if let Some(b) = parse_base(&name, ".log") {
            logs.push(b);
        }
    }
    swaps.sort_unstable();
    for &base in &swaps {
        let swap = Segment::paths(dir, base, SWAP_SUFFIX);
        let file = std::fs::OpenOptions::new().read(true).write(true).open(&swap[0]).ctx(&swap[0])?;
        let len = file.metadata().ctx(&swap[0])?.len();
        let mut end = base;
        let scan_end = batch::scan(&mut FileSource::new(&file, &swap[0], len), 0, Check::Framing, None, |v| {
            end = v.header.next_offset();
            Ok(Control::Continue)
        })?;
        if scan_end.valid_end < len {
            // Written and fsynced before the commit, so this is damage after the fact: keep
            // the valid prefix (the segment's own recovery checks the rest).
            file.set_len(scan_end.valid_end).ctx(&swap[0])?;
        }
        drop(file);
        for &b in logs.iter().filter(|&&b| b >= base && b < end.max(base + 1)) {
            for p in Segment::paths(dir, b, "") {
                remove_if_exists(&p)?;
            }
        }
        let live = Segment::paths(dir, base, "");
        for i in [1, 2] {
            if swap[i].exists() {
                rename(&swap[i], &live[i])?;
            }
        }
        rename(&swap[0], &live[0])?;
    }
    if !swaps.is_empty() {
        sync_dir(dir)?;
    }
    Ok(swaps.len())
}

#[cfg(test)]
#[path = "cleaner_tests.rs"]
mod tests;
