//! `TimeIndex`: the sparse timestamp → offset map of one segment (`{base:020}.timeindex`).
//!
//! # Format
//! 12-byte big-endian entries: `timestamp i64 | relative_offset u32`. An entry `(T, O)` says:
//! the largest timestamp in the segment up to and including offset `O` is `T`, and `O` is the
//! first record that reached it. Timestamps strictly increase; offsets never decrease.
//!
//! # When entries are added
//! Together with offset-index entries (every `index.interval.bytes`), if the segment's running
//! max timestamp grew since the last entry; plus once more when the segment stops being active
//! (roll, clean close), so the last entry holds the segment's max timestamp and reopen can
//! read it from there (Kafka's `onBecomeInactiveSegment`). The segment rolls one entry early
//! so that final entry always fits.
//!
//! # Lookup
//! `lookup_below(t)`: the last entry with timestamp < t. Every record before its offset has a
//! timestamp <= its T < t, so the first record with timestamp >= t is at or after it: scan
//! from the batch holding that offset. No entry: scan from the segment start.
//!
//! # Crash story and concurrency
//! As for the offset index: rebuilt from the log, never trusted after an unclean shutdown;
//! guarded by the `Log` mutex through its `Segment`. The file is opened only for a write or
//! an fsync (`index_file.rs`).

use std::path::Path;

use crate::error::{LogError, Result};
use crate::index_file::{IndexFile, SyncTarget};

pub const ENTRY_SIZE: usize = 12;

pub struct TimeIndex {
    pub base_offset: i64,
    file: IndexFile,
}

impl TimeIndex {
    /// A new, empty index (the file is written later: see `index_file.rs`).
    pub fn create(path: &Path, base_offset: i64, max_bytes: u64) -> TimeIndex {
        TimeIndex { base_offset, file: IndexFile::create(path, ENTRY_SIZE, max_bytes) }
    }

    pub fn open(path: &Path, base_offset: i64, max_bytes: u64) -> Result<Option<TimeIndex>> {
        Ok(IndexFile::open(path, ENTRY_SIZE, max_bytes)?.map(|file| TimeIndex { base_offset, file }))
    }

    pub fn path(&self) -> &Path {
        &self.file.path
    }

    pub fn len(&self) -> usize {
        self.file.len()
    }

    pub fn is_empty(&self) -> bool {
        self.file.is_empty()
    }

    /// Full, keeping one slot for the entry written when the segment becomes inactive.
    pub fn is_full(&self) -> bool {
        self.len() + 1 >= self.file.max_entries
    }

    /// Entry `i` as (timestamp, absolute offset).
    pub fn entry(&self, i: usize) -> (i64, i64) {
        let e = self.file.entry(i);
        let mut ts = [0u8; 8];
        ts.copy_from_slice(&e[..8]);
        let rel = u32::from_be_bytes([e[8], e[9], e[10], e[11]]);
        (i64::from_be_bytes(ts), self.base_offset + i64::from(rel))
    }

    pub fn last_entry(&self) -> Option<(i64, i64)> {
        (!self.is_empty()).then(|| self.entry(self.len() - 1))
    }

    /// Adds `(timestamp, offset)` if the timestamp is larger than the last entry's.
    /// `final_entry` may use the slot kept free by `is_full`.
    pub fn maybe_append(&mut self, timestamp: i64, offset: i64, final_entry: bool) -> Result<bool> {
        if let Some((lt, lo)) = self.last_entry() {
            if timestamp <= lt {
                return Ok(false);
            }
            if offset < lo {
                return Err(LogError::CorruptIndex {
                    path: self.file.path.clone(),
                    reason: format!("offset {offset} is below the last entry's offset {lo}"),
                });
            }
        }
        if self.file.is_full() || (!final_entry && self.is_full()) {
            return Ok(false);
        }
        let rel = u32::try_from(offset - self.base_offset).map_err(|_| LogError::CorruptIndex {
            path: self.file.path.clone(),
            reason: format!("offset {offset} is not within u32 of base offset {}", self.base_offset),
        })?;
        let mut e = [0u8; ENTRY_SIZE];
        e[..8].copy_from_slice(&timestamp.to_be_bytes());
        e[8..].copy_from_slice(&rel.to_be_bytes());
        self.file.push(&e);
        Ok(true)
    }

    /// The last entry with timestamp strictly below `t`.
    pub fn lookup_below(&self, t: i64) -> Option<(i64, i64)> {
        let (mut lo, mut hi) = (0usize, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.entry(mid).0 < t {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        (lo > 0).then(|| self.entry(lo - 1))
    }

    /// Drops entries with offset >= `offset`.
    pub fn truncate_to(&mut self, offset: i64) -> Result<()> {
        let keep = (0..self.len()).take_while(|&i| self.entry(i).1 < offset).count();
        self.file.truncate_entries(keep)
    }

    /// Increasing timestamps, non-decreasing offsets within `[base, next_offset)`.
    pub fn sanity_check(&self, next_offset: i64) -> Result<()> {
        let mut prev: Option<(i64, i64)> = None;
        for i in 0..self.len() {
            let (t, o) = self.entry(i);
            let bad = |reason: String| Err(LogError::CorruptIndex { path: self.file.path.clone(), reason });
            if o >= next_offset {
                return bad(format!(
                    "entry {i} names offset {o}, at or beyond the segment's next offset {next_offset}"
                ));
            }
            if let Some((pt, po)) = prev {
                if t <= pt || o < po {
                    return bad(format!("entry {i} ({t}, {o}) does not follow ({pt}, {po})"));
                }
            }
            prev = Some((t, o));
        }
        Ok(())
    }

    /// Writes the entries the file lacks (creating the file if needed).
    pub fn write_pending(&mut self) -> Result<()> {
        self.file.write_pending().map(drop)
    }
    pub fn sync(&mut self) -> Result<()> {
        self.file.sync()
    }
    pub fn sync_target(&mut self) -> Result<Option<SyncTarget>> {
        self.file.sync_target()
    }
    pub fn mark_unsynced(&mut self) {
        self.file.mark_unsynced();
    }
    pub fn needs_sync(&self) -> bool {
        self.file.needs_sync()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn lookup_below_matches_linear_scan(
            steps in proptest::collection::vec((-5i64..50, 0i64..20), 0..100),
            probes in proptest::collection::vec(-10i64..3000, 1..30),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let mut idx = TimeIndex::create(&dir.path().join("x.timeindex"), 1000, 1 << 16);
            let mut model: Vec<(i64, i64)> = vec![];
            let (mut t, mut o) = (0i64, 1000i64);
            for (dt, dof) in steps {
                t += dt;
                o += dof;
                if idx.maybe_append(t, o, false).unwrap() {
                    model.push((t, o));
                }
                prop_assert!(model.windows(2).all(|w| w[0].0 < w[1].0));
            }
            for p in probes {
                let want = model.iter().rev().find(|e| e.0 < p).copied();
                prop_assert_eq!(idx.lookup_below(p), want);
            }
        }
    }

    #[test]
    fn non_increasing_timestamps_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let mut idx = TimeIndex::create(&dir.path().join("t.timeindex"), 0, 1200);
        assert!(idx.maybe_append(100, 0, false).unwrap());
        assert!(!idx.maybe_append(100, 5, false).unwrap());
        assert!(!idx.maybe_append(90, 6, false).unwrap());
        assert!(idx.maybe_append(101, 7, false).unwrap());
        assert_eq!(idx.len(), 2);
    }

    #[test]
    fn last_slot_reserved_for_final_entry() {
        let dir = tempfile::tempdir().unwrap();
        let mut idx = TimeIndex::create(&dir.path().join("f.timeindex"), 0, 36); // 3 entries
        assert!(idx.maybe_append(1, 1, false).unwrap());
        assert!(idx.maybe_append(2, 2, false).unwrap());
        assert!(idx.is_full());
        assert!(!idx.maybe_append(3, 3, false).unwrap());
        assert!(idx.maybe_append(3, 3, true).unwrap());
        assert_eq!(idx.last_entry(), Some((3, 3)));
    }

    #[test]
    fn truncate_and_reload() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.timeindex");
        let mut idx = TimeIndex::create(&path, 50, 1200);
        for (t, o) in [(10, 50), (20, 60), (30, 70)] {
            idx.maybe_append(t, o, false).unwrap();
        }
        idx.write_pending().unwrap();
        idx.truncate_to(60).unwrap();
        let re = TimeIndex::open(&path, 50, 1200).unwrap().unwrap();
        assert_eq!(re.len(), 1);
        assert_eq!(re.last_entry(), Some((10, 50)));
        re.sanity_check(61).unwrap();
        assert!(re.sanity_check(50).is_err());
    }
}
