//! Opening a partition directory: load segments, recover what a crash may have torn.
//!
//! # Steps
//! 1. A missing directory is a new, empty log: nothing is created until its first write
//!    (`DirState::Absent`), and steps 2-6 do not apply. Otherwise complete every
//!    interrupted cleaner swap (a `<base>.log.swap` exists: see `cleaner.rs`); delete stray `.cleaned`, `.deleted`, `.swap`
//!    and `.tmp` files (left by an uncommitted compaction, a deletion or an atomic write) and
//!    index files whose `.log` is gone.
//! 2. Clean shutdown = the `.clean-shutdown` marker exists (written last by `Log::close`, or
//!    by `Log::mark_clean_shutdown` after a `syncfs` made the log's last writes durable).
//! 3. Each segment, oldest first, is opened trusting its indexes if they pass their sanity
//!    checks. It is *recovered* (every batch validated with the full framing loop from
//!    `batch.rs`, the file truncated at the first torn/corrupt batch, both indexes rebuilt)
//!    when the shutdown was unclean and the segment is not entirely below the recovery point,
//!    or whenever its indexes are missing/corrupt or its tail does not frame. Offset gaps
//!    between batches (compaction) are accepted when the topic is compacted or the segment
//!    lies below the `cleaner-offset-checkpoint`; elsewhere a gap is corruption. (A follower
//!    of a compacted leader whose topic was switched to `delete` would have a gapped tail cut
//!    off by an unclean recovery and fetch it again.)
//! 4. After a segment had to be truncated, or if a segment does not start where the previous
//!    one ended, every later segment is deleted: the recovered log must be a *prefix* of
//!    what was written.
//! 5. Log start offset = max(first segment base, `log-start-offset-checkpoint`); the leader
//!    epoch cache is trimmed to `[log start, LEO]`; producer state comes from the snapshot
//!    (clean shutdown, matching LEO) or a header-only rebuild. Every recovered segment's
//!    batches also feed the leader epoch cache, as in Kafka: a batch whose leader epoch is
//!    newer than the cache's latest starts that epoch at its base offset (a crash can lose
//!    the checkpoint's last entries but not the batches that carry them).
//! 6. Recovered segments are fsynced (their rebuilt index files written first), the
//!    recovery point becomes the LEO, the marker is removed (so a crash from now on is
//!    detected).
//!
//! # Durability
//! Loading makes durable exactly what it changed, and nothing for a new log:
//! - a missing directory: nothing, not even the directory (see "Creating a log" in
//!   `log.rs`). Kafka creates a new partition's directory without an fsync too;
//! - the recovery point checkpoint is written only if the file does not already say the LEO
//!   (a missing file says 0: a new log writes none; a log closed cleanly has it already);
//! - the directory is fsynced once at the end if loading removed or created anything in it
//!   (strays, orphan indexes, dropped segments, rebuilt index files, the producer snapshot,
//!   the `.clean-shutdown` marker: removing it must be durable, or a crash after this open
//!   would pass for a clean shutdown). Removing files that did not exist changes nothing.
//!   With `sync_dir_changes` false (a broker opening all its logs at startup) that fsync is
//!   the caller's: one `sync_filesystem` per log directory before any of the logs is written.
//!
//! # Crash story of the index files
//! The active segment's index files lag its memory between flushes (`index_file.rs`), and
//! an inactive segment's files are written when it is rolled but only fsynced by the flush
//! that lets the recovery point pass it. Both are covered by step 3: after an unclean
//! shutdown every segment not entirely below the recovery point, the last one always, has
//! its indexes rebuilt from the log; below the recovery point the files were written and
//! fsynced before the point moved, and a file that still fails its sanity check (or is
//! missing under a non-empty log) is rebuilt anyway. A missing index of an empty segment is
//! an empty index (a new log's).
//!
//! Descriptors: a segment is opened (read-only) to load it; once the next one is loaded it is
//! inactive and closed (its index files are read into memory and closed by `Segment::open`).
//! At the end every file is closed, the last segment's included: it becomes the active one
//! (`Segment::make_active`) and its first append or read opens its `.log`. So loading holds
//! about one segment's files at a time, and a loaded log none.
//!
//! The recovery point used is the smaller of the caller's value (the broker's per-directory
//! `recovery-point-offset-checkpoint`) and the partition's own `recovery-point-checkpoint`:
//! both only claim "everything below is on disk", so the smaller claim is the safe one.

use std::path::Path;
use std::sync::Arc;

use crate::cleaner::{self, CLEANER_CHECKPOINT_FILE};
use crate::config::LogConfig;
use crate::error::{IoContext, LogError, Result};
use crate::leader_epoch_cache::LeaderEpochCache;
use crate::log::{DirState, Inner, RecoveryReport, CLEAN_SHUTDOWN_FILE, LOG_START_FILE, RECOVERY_POINT_FILE};
use crate::offset_checkpoint::{read_single_offset, sync_dir, write_single_offset};
use crate::producer_state::{ProducerBatch, ProducerStateManager, SNAPSHOT_FILE};
use crate::segment::Segment;

const STRAY_SUFFIXES: &[&str] = &[".cleaned", ".deleted", ".swap", ".tmp"];

/// The base offset of `{base:020}{suffix}`.
pub(crate) fn parse_base(name: &str, suffix: &str) -> Option<i64> {
    let stem = name.strip_suffix(suffix)?;
    (stem.len() == 20 && stem.bytes().all(|b| b.is_ascii_digit())).then(|| stem.parse().ok()).flatten()
}

/// Removes `path`; whether it existed (a removal to make durable).
fn remove(path: &Path) -> Result<bool> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(LogError::io(path, e)),
    }
}

/// A new partition's log in `dir`: a directory already there (left by an earlier topic of
/// the same name, deleted while this broker was away) is removed, never loaded. Nothing is
/// created: the first write creates the directory (`DirState::Absent`).
pub(crate) fn create(dir: &Path, config: LogConfig, now_ms: i64) -> Result<Inner> {
    match std::fs::remove_dir_all(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(LogError::io(dir, e)),
    }
    Ok(Loaded::new_log(dir, &config).into_inner(config, now_ms))
}

pub(crate) fn load(
    dir: &Path,
    config: LogConfig,
    recovery_point: Option<i64>,
    now_ms: i64,
    sync_dir_changes: bool,
) -> Result<Inner> {
    let loaded = match std::fs::symlink_metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Loaded::new_log(dir, &config),
        Err(e) => return Err(LogError::io(dir, e)),
        Ok(_) => load_existing(dir, &config, recovery_point, now_ms, sync_dir_changes)?,
    };
    Ok(loaded.into_inner(config, now_ms))
}

/// What loading a partition directory found, before it becomes the log's `Inner`.
struct Loaded {
    segments: Vec<Segment>,
    log_start: i64,
    epochs: LeaderEpochCache,
    producers: ProducerStateManager,
    report: RecoveryReport,
    cleaner_cp: i64,
    dir_state: DirState,
}

impl Loaded {
    fn into_inner(self, config: LogConfig, now_ms: i64) -> Inner {
        let Loaded { segments, log_start, epochs, producers, report, cleaner_cp, dir_state } = self;
        let leo = segments[segments.len() - 1].next_offset;
        Inner {
            config: Arc::new(config),
            segments,
            log_start_offset: log_start,
            high_watermark: log_start,
            recovery_point: leo,
            epochs,
            producers,
            unflushed_messages: 0,
            last_flush_ms: now_ms,
            closed: false,
            generation: 0,
            report,
            cleaner_checkpoint: cleaner_cp,
            cleaning: false,
            // Tombstone horizons are not persisted: a log cleaned before gets one pass early on.
            earliest_horizon: (cleaner_cp > log_start).then_some(i64::MIN),
            uses: 0,
            swept_at: 0,
            dir_state,
            highest_remote_offset: -1,
            remote_log_start: -1,
            clean_pending: false,
        }
    }

    /// A log whose directory does not exist: one empty segment at offset 0, nothing read,
    /// created or fsynced. The first write creates the directory and the segment's `.log`
    /// (`DirState::Absent`), the first flush makes them durable.
    fn new_log(dir: &Path, config: &LogConfig) -> Loaded {
        Loaded {
            segments: vec![Segment::absent(dir, 0, config)],
            log_start: 0,
            epochs: LeaderEpochCache::empty(dir),
            producers: ProducerStateManager::new(),
            // nothing was there to recover
            report: RecoveryReport { clean_shutdown: true, ..RecoveryReport::default() },
            cleaner_cp: 0,
            dir_state: DirState::Absent,
        }
    }
}

/// Steps 1-6 of the module docs for a directory that existed.
fn load_existing(
    dir: &Path,
    config: &LogConfig,
    recovery_point: Option<i64>,
    now_ms: i64,
    sync_dir_changes: bool,
) -> Result<Loaded> {
    // Something in the directory was removed or created: fsync it at the end.
    let mut dir_changed = false;
    cleaner::complete_interrupted_swaps(dir)?; // fsyncs the directory itself
    let mut bases = Vec::new();
    let mut index_files = Vec::new();
    for entry in std::fs::read_dir(dir).ctx(dir)? {
        let entry = entry.ctx(dir)?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if STRAY_SUFFIXES.iter().any(|s| name.ends_with(s)) {
            dir_changed |= remove(&entry.path())?;
        } else if let Some(b) = parse_base(&name, ".log") {
            bases.push(b);
        } else if let Some(b) = parse_base(&name, ".index").or_else(|| parse_base(&name, ".timeindex")) {
            index_files.push((b, entry.path()));
        }
    }
    bases.sort_unstable();
    for (b, p) in index_files {
        if bases.binary_search(&b).is_err() {
            dir_changed |= remove(&p)?;
        }
    }

    let marker = dir.join(CLEAN_SHUTDOWN_FILE);
    let clean = marker.exists();
    let log_start_cp = read_single_offset(&dir.join(LOG_START_FILE))?;
    // Advisory (compaction redoes work without it): a damaged file means nothing is clean.
    let cleaner_cp = read_single_offset(&dir.join(CLEANER_CHECKPOINT_FILE)).unwrap_or(None).unwrap_or(0);
    let rp_read = read_single_offset(&dir.join(RECOVERY_POINT_FILE));
    // What the file says, absent meaning 0; `None` if it cannot be read.
    let rp_on_disk = rp_read.as_ref().ok().map(|v| v.unwrap_or(0));
    let rp_file = rp_read.unwrap_or(None);
    let rp = match (recovery_point, rp_file) {
        (Some(a), Some(f)) => a.min(f),
        (Some(a), None) => a,
        (None, Some(f)) => f,
        (None, None) => 0,
    };

    let mut epochs = LeaderEpochCache::load(dir)?;
    let mut report = RecoveryReport { clean_shutdown: clean, ..RecoveryReport::default() };
    let mut segments: Vec<Segment> = Vec::with_capacity(bases.len().max(1));
    let mut recovered_any = false;
    let mut drop_rest = false;
    for (i, &base) in bases.iter().enumerate() {
        if drop_rest {
            drop_segment_files(dir, base)?;
            report.segments_dropped += 1;
            dir_changed = true;
            continue;
        }
        if let Some(prev) = segments.last() {
            if prev.next_offset != base {
                report.first_error.get_or_insert_with(|| {
                    format!(
                        "segment {base} does not continue the previous one, which ends at offset {}",
                        prev.next_offset
                    )
                });
                drop_segment_files(dir, base)?;
                report.segments_dropped += 1;
                dir_changed = true;
                drop_rest = true;
                continue;
            }
        }
        // Only the last segment stays open (it becomes the active one); the previous one is
        // inactive from here on: its index files are closed already, its `.log` now.
        if let Some(prev) = segments.last_mut() {
            prev.close_log_file();
        }
        let gaps = config.cleanup_compact || base < cleaner_cp;
        let (mut seg, suspicious) = Segment::open(dir, base, config, now_ms, gaps)?;
        let next_base = bases.get(i + 1).copied();
        let unflushed = !clean && next_base.is_none_or(|nb| nb > rp);
        if suspicious || unflushed {
            let r = seg.recover(config, now_ms, gaps)?;
            report.segments_recovered += 1;
            report.bytes_truncated += r.truncated_bytes;
            recovered_any = true;
            if let Some(e) = r.error {
                // The partition directory is named `<topic>-<partition>`.
                let tp = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                let e = e.in_partition(&tp);
                report.first_error.get_or_insert_with(|| format!("{}: {e}", seg.log_path.display()));
                drop_rest = true;
            }
            if next_base.is_some() && !drop_rest {
                seg.on_become_inactive()?;
            }
            let mut starts = Vec::new();
            seg.scan_headers(|h| starts.push((h.partition_leader_epoch, h.base_offset)))?;
            for (epoch, base_offset) in starts {
                epochs.assign(epoch, base_offset)?; // no-op unless newer than the latest
            }
        }
        segments.push(seg);
    }
    // A segment created in an existing directory (emptied by a crash) is made durable by the
    // fsync at the end.
    if segments.is_empty() {
        let base = log_start_cp.unwrap_or(0).max(0);
        segments.push(Segment::create(dir, base, config)?);
        dir_changed = true;
    }
    let n = segments.len();
    for s in &mut segments[..n - 1] {
        // Written already unless just recovered as the last survivor of a dropped tail.
        s.on_become_inactive()?;
    }
    segments[n - 1].make_active();
    if recovered_any {
        // Rebuilt index files may be new files.
        dir_changed = true;
        for s in &mut segments {
            s.flush()?;
        }
    }

    let leo = segments[n - 1].next_offset;
    let first_base = segments[0].base_offset;
    let log_start = log_start_cp.unwrap_or(first_base).max(first_base).min(leo);
    if log_start_cp.is_some_and(|c| c != log_start) {
        write_single_offset(&dir.join(LOG_START_FILE), log_start)?;
    }

    epochs.truncate_from_end(leo)?;
    epochs.truncate_from_start(log_start)?;

    let snapshot = if clean { ProducerStateManager::read_snapshot(dir, leo) } else { None };
    let producers = match snapshot {
        Some(p) => p,
        None => rebuild_producer_state(&mut segments, log_start)?,
    };
    dir_changed |= remove(&dir.join(SNAPSHOT_FILE))?;

    // The epochs recovered from batches are on disk before the recovery point passes them.
    epochs.write_if_dirty()?;
    if rp_on_disk != Some(leo) {
        write_single_offset(&dir.join(RECOVERY_POINT_FILE), leo)?;
    }
    dir_changed |= remove(&marker)?;
    if dir_changed && sync_dir_changes {
        sync_dir(dir)?;
    }
    for s in &mut segments {
        s.close_log_file();
    }
    Ok(Loaded { segments, log_start, epochs, producers, report, cleaner_cp, dir_state: DirState::Synced })
}

fn drop_segment_files(dir: &Path, base: i64) -> Result<()> {
    for suffix in [".log", ".index", ".timeindex"] {
        remove(&dir.join(crate::segment::file_name(base, suffix)))?;
    }
    Ok(())
}

/// Producer state from a header-only scan of every segment (61 bytes per batch, plus the
/// first record of each control batch: the transaction markers). A file opened for the scan
/// is closed after it, so at most one extra descriptor is open at a time.
pub(crate) fn rebuild_producer_state(segments: &mut [Segment], log_start: i64) -> Result<ProducerStateManager> {
    let mut m = ProducerStateManager::new();
    for s in segments.iter_mut().filter(|s| s.size > 0) {
        let was_open = s.is_log_file_open();
        let scanned = s.scan_producer_batches(|h, marker| {
            if h.has_producer_id() {
                m.apply(&ProducerBatch::from_header(h, marker));
            }
        });
        if !was_open {
            s.close_log_file();
        }
        scanned?;
    }
    m.truncate_head(log_start);
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_segment_names() {
        assert_eq!(parse_base("00000000000000000042.log", ".log"), Some(42));
        assert_eq!(parse_base("0000000000000000042.log", ".log"), None);
        assert_eq!(parse_base("0000000000000000004x.log", ".log"), None);
        assert_eq!(parse_base("00000000000000000042.index", ".log"), None);
    }
}
