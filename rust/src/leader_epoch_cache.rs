//! `LeaderEpochCache`: which leader epoch started at which offset, for OffsetForLeaderEpoch
//! and follower truncation (KIP-101/KIP-279).
//!
//! # File
//! `leader-epoch-checkpoint` in the partition directory, Kafka's text format:
//! ```text
//! 0            <- version
//! 2            <- entries
//! 0 0          <- epoch start_offset
//! 3 1500
//! ```
//! Rewritten atomically (tmp + fsync + rename + dir fsync). A truncation, a log-start move
//! and `clear` write it at once, and take effect in memory only once the file holds them (a
//! failed write, e.g. a full disk, leaves the cache as before). A new epoch (`assign`, once
//! per leader change on the first append) is kept in memory only (`dirty`) and written by the
//! flush that moves the recovery point past it, by `close`, and by loading: the log's
//! recovery rebuilds every epoch whose batches lie above the recovery point from those
//! batches, so an entry not yet written is never lost, and the first append of a new epoch
//! costs no fsync. (An earlier rule, "write at once, keep in memory only what was written",
//! came from the fault suite: a follower restarted after a failed write lacked the latest
//! epoch its log held; tying the write to the recovery point covers that case too.)
//!
//! # Invariants
//! Epochs and start offsets both strictly increase. `assign(epoch, start)` is called on each
//! append whose batches carry a new epoch; an entry that contradicts a new one (same-or-later
//! epoch or start offset) is dropped first, as Kafka does.
//!
//! # Concurrency
//! Not synchronized; owned by the `Log`, used under its mutex.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::error::{LogError, Result};
use crate::offset_checkpoint::write_replacing;

pub const FILE_NAME: &str = "leader-epoch-checkpoint";

#[derive(Debug)]
pub struct LeaderEpochCache {
    path: PathBuf,
    entries: Vec<(i32, i64)>,
    /// `entries` holds epochs assigned since the file was last written.
    dirty: bool,
}

impl LeaderEpochCache {
    /// The cache of a new log in `dir`: no entries, no file until the first is assigned.
    pub fn empty(dir: &Path) -> LeaderEpochCache {
        LeaderEpochCache { path: dir.join(FILE_NAME), entries: vec![], dirty: false }
    }

    /// Loads the checkpoint in `dir` (missing file: empty cache).
    pub fn load(dir: &Path) -> Result<LeaderEpochCache> {
        let path = dir.join(FILE_NAME);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(LeaderEpochCache { path, entries: vec![], dirty: false })
            }
            Err(e) => return Err(LogError::io(&path, e)),
        };
        let corrupt = |reason: String| LogError::CorruptIndex { path: path.clone(), reason };
        let mut lines = text.lines();
        if lines.next().map(str::trim) != Some("0") {
            return Err(corrupt("unsupported version".into()));
        }
        let count: usize =
            lines.next().and_then(|l| l.trim().parse().ok()).ok_or_else(|| corrupt("bad entry count".into()))?;
        let mut entries = Vec::with_capacity(count);
        for line in lines.filter(|l| !l.trim().is_empty()) {
            let mut it = line.split_whitespace();
            let (Some(e), Some(o), None) = (it.next(), it.next(), it.next()) else {
                return Err(corrupt(format!("malformed line {line:?}")));
            };
            let e: i32 = e.parse().map_err(|_| corrupt(format!("bad epoch in {line:?}")))?;
            let o: i64 = o.parse().map_err(|_| corrupt(format!("bad offset in {line:?}")))?;
            if let Some(&(pe, po)) = entries.last() {
                if e <= pe || o < po {
                    return Err(corrupt(format!("entry {e} {o} does not follow {pe} {po}")));
                }
            }
            entries.push((e, o));
        }
        if entries.len() != count {
            return Err(corrupt(format!("header says {count} entries, file has {}", entries.len())));
        }
        Ok(LeaderEpochCache { path, entries, dirty: false })
    }

    pub fn entries(&self) -> &[(i32, i64)] {
        &self.entries
    }

    pub fn latest_epoch(&self) -> Option<i32> {
        self.entries.last().map(|e| e.0)
    }

    /// Makes `entries` the cache: written to the file first, kept in memory only if that
    /// worked.
    fn replace(&mut self, entries: Vec<(i32, i64)>) -> Result<()> {
        Self::write_entries_as(&self.path, &entries, true)?;
        self.entries = entries;
        self.dirty = false;
        Ok(())
    }

    /// Writes the entries if an `assign` since the last write is not on disk yet.
    pub fn write_if_dirty(&mut self) -> Result<()> {
        self.write_if_dirty_as(true)
    }

    /// `write_if_dirty`; `durable` false: replaced by a rename without fsyncs, made durable
    /// by a later `sync_filesystem` (`Log::close_unsynced`, a broker's batched shutdown).
    pub fn write_if_dirty_as(&mut self, durable: bool) -> Result<()> {
        if self.dirty {
            Self::write_entries_as(&self.path, &self.entries, durable)?;
            self.dirty = false;
        }
        Ok(())
    }

    fn write_entries_as(path: &Path, entries: &[(i32, i64)], durable: bool) -> Result<()> {
        let mut s = format!("0\n{}\n", entries.len());
        for (e, o) in entries {
            let _ = writeln!(s, "{e} {o}");
        }
        write_replacing(path, s.as_bytes(), durable)
    }

    /// Records that `epoch` starts at `start_offset`. No-op if `epoch` is already the latest
    /// or older than it (a stale batch), or if the epoch is negative (unset).
    pub fn assign(&mut self, epoch: i32, start_offset: i64) -> Result<()> {
        if epoch < 0 {
            return Ok(());
        }
        if let Some(&(le, _)) = self.entries.last() {
            if epoch <= le {
                return Ok(());
            }
        }
        self.entries.retain(|&(e, o)| e < epoch && o < start_offset);
        self.entries.push((epoch, start_offset));
        self.dirty = true; // written by the flush that passes it, `close` or loading
        Ok(())
    }

    /// Kafka's `endOffsetFor`: `(epoch, end_offset)` where end_offset is the start of the next
    /// higher epoch (or `log_end_offset` for the latest); `(-1, -1)` when unknown.
    pub fn end_offset_for(&self, requested: i32, log_end_offset: i64) -> (i32, i64) {
        if requested < 0 || self.entries.is_empty() {
            return (-1, -1);
        }
        if self.latest_epoch() == Some(requested) {
            return (requested, log_end_offset);
        }
        let Some(higher) = self.entries.iter().find(|e| e.0 > requested) else { return (-1, -1) };
        match self.entries.iter().rev().find(|e| e.0 <= requested) {
            None => (requested, higher.1),
            Some(floor) => (floor.0, higher.1),
        }
    }

    /// Drops entries whose start offset is >= `end_offset` (log truncated to `end_offset`).
    pub fn truncate_from_end(&mut self, end_offset: i64) -> Result<()> {
        let next: Vec<_> = self.entries.iter().copied().filter(|e| e.1 < end_offset).collect();
        if next.len() != self.entries.len() {
            self.replace(next)?;
        }
        Ok(())
    }

    /// Log start moved to `start_offset`: entries below it collapse into one that starts there.
    pub fn truncate_from_start(&mut self, start_offset: i64) -> Result<()> {
        let below = self.entries.iter().take_while(|e| e.1 < start_offset).count();
        if below == 0 {
            return Ok(());
        }
        let keep = self.entries[below - 1].0;
        let mut next = self.entries[below..].to_vec();
        if next.first().map(|e| e.1) != Some(start_offset) {
            next.insert(0, (keep, start_offset));
        }
        self.replace(next)
    }

    /// Forgets everything (truncate fully).
    pub fn clear(&mut self) -> Result<()> {
        self.replace(Vec::new())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_that_cannot_be_written_is_not_kept() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("p");
        std::fs::create_dir(&dir).unwrap();
        let mut c = LeaderEpochCache::load(&dir).unwrap();
        c.assign(0, 0).unwrap();
        c.write_if_dirty().unwrap();
        std::fs::remove_dir_all(&dir).unwrap(); // nowhere to write: like a full disk
        c.assign(3, 10).unwrap(); // in memory only: written later
        assert!(c.write_if_dirty().is_err(), "the flush that would pass it fails");
        assert_eq!(c.entries(), [(0, 0), (3, 10)], "still to be written");
        assert!(c.truncate_from_end(5).is_err());
        assert_eq!(c.entries(), [(0, 0), (3, 10)], "a truncation not written is not kept");
        std::fs::create_dir(&dir).unwrap();
        c.write_if_dirty().unwrap(); // the retried flush writes it
        assert_eq!(LeaderEpochCache::load(&dir).unwrap().entries(), [(0, 0), (3, 10)]);
    }

    #[test]
    fn assign_persist_reload() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = LeaderEpochCache::load(dir.path()).unwrap();
        c.assign(0, 0).unwrap();
        c.assign(0, 10).unwrap(); // same epoch: ignored
        c.assign(2, 15).unwrap();
        c.assign(1, 20).unwrap(); // older epoch: ignored
        assert_eq!(c.entries(), [(0, 0), (2, 15)]);
        assert!(!dir.path().join(FILE_NAME).exists(), "assign alone writes nothing");
        c.write_if_dirty().unwrap();
        let text = std::fs::read_to_string(dir.path().join(FILE_NAME)).unwrap();
        assert_eq!(text, "0\n2\n0 0\n2 15\n");
        let re = LeaderEpochCache::load(dir.path()).unwrap();
        assert_eq!(re.entries(), c.entries());
    }

    #[test]
    fn assign_drops_conflicting_entries() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = LeaderEpochCache::load(dir.path()).unwrap();
        c.assign(1, 0).unwrap();
        c.assign(2, 50).unwrap();
        c.assign(3, 40).unwrap(); // starts below epoch 2's start: epoch 2 is dropped
        assert_eq!(c.entries(), [(1, 0), (3, 40)]);
    }

    #[test]
    fn end_offset_for_follows_kafka() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = LeaderEpochCache::load(dir.path()).unwrap();
        assert_eq!(c.end_offset_for(0, 100), (-1, -1));
        c.assign(2, 10).unwrap();
        c.assign(4, 30).unwrap();
        c.assign(7, 60).unwrap();
        assert_eq!(c.end_offset_for(7, 100), (7, 100), "latest epoch ends at LEO");
        assert_eq!(c.end_offset_for(4, 100), (4, 60));
        assert_eq!(c.end_offset_for(5, 100), (4, 60), "unknown epoch between: floor epoch, next start");
        assert_eq!(c.end_offset_for(1, 100), (1, 10), "below all: requested epoch, first start");
        assert_eq!(c.end_offset_for(8, 100), (-1, -1), "above all");
        assert_eq!(c.end_offset_for(-1, 100), (-1, -1));
    }

    #[test]
    fn truncation_from_both_ends() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = LeaderEpochCache::load(dir.path()).unwrap();
        for (e, o) in [(1, 0), (2, 10), (3, 20), (4, 30)] {
            c.assign(e, o).unwrap();
        }
        c.truncate_from_end(20).unwrap();
        assert_eq!(c.entries(), [(1, 0), (2, 10)]);
        c.truncate_from_start(15).unwrap();
        assert_eq!(c.entries(), [(2, 15)]);
        c.truncate_from_start(15).unwrap();
        assert_eq!(c.entries(), [(2, 15)]);
        assert_eq!(LeaderEpochCache::load(dir.path()).unwrap().entries(), [(2, 15)]);
    }

    #[test]
    fn corrupt_file_reported() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(FILE_NAME), "0\n2\n3 10\n1 20\n").unwrap();
        let e = LeaderEpochCache::load(dir.path()).unwrap_err().to_string();
        assert!(e.contains(FILE_NAME), "{e}");
    }
}
