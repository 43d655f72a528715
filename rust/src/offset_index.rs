//! `OffsetIndex`: the sparse offset → file position map of one segment (`{base:020}.index`).
//!
//! # Format
//! A sequence of 8-byte big-endian entries: `relative_offset u32 | position u32`, where
//! `relative_offset = batch base offset - segment base offset` and `position` is the byte
//! position of that batch in the `.log` file. Both columns strictly increase.
//!
//! # Sparsity and lookup
//! The segment adds an entry for a batch once more than `index.interval.bytes` of log have
//! been written since the previous entry (Kafka's rule), so the index is small and an entry
//! is always the start of a batch. `lookup(target)` binary-searches the largest entry with
//! offset <= target; the caller then scans batch headers forward from that position (a short
//! scan: at most about `index.interval.bytes` plus one batch). With no such entry the scan
//! starts at position 0.
//!
//! # Crash story
//! Not checksummed: rebuilt from the log when missing, when it fails [`OffsetIndex::sanity_check`],
//! and for every segment recovered after an unclean shutdown. See `index_file.rs` for when
//! the entries reach the file (roll, flush, close) and why no descriptor is held.
//!
//! # Concurrency
//! Not synchronized; owned by a `Segment`, which is guarded by the `Log` mutex.

use std::path::Path;

use crate::error::{LogError, Result};
use crate::index_file::{IndexFile, SyncTarget};

pub const ENTRY_SIZE: usize = 8;

pub struct OffsetIndex {
    pub base_offset: i64,
    file: IndexFile,
}

impl OffsetIndex {
    /// A new, empty index (the file is written later: see `index_file.rs`).
    pub fn create(path: &Path, base_offset: i64, max_bytes: u64) -> OffsetIndex {
        OffsetIndex { base_offset, file: IndexFile::create(path, ENTRY_SIZE, max_bytes) }
    }

    /// Loads an existing index; the caller runs [`Self::sanity_check`] before trusting it.
    pub fn open(path: &Path, base_offset: i64, max_bytes: u64) -> Result<Option<OffsetIndex>> {
        Ok(IndexFile::open(path, ENTRY_SIZE, max_bytes)?.map(|file| OffsetIndex { base_offset, file }))
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

    pub fn is_full(&self) -> bool {
        self.file.is_full()
    }

    /// Entry `i` as (absolute offset, position).
    pub fn entry(&self, i: usize) -> (i64, u32) {
        let e = self.file.entry(i);
        let rel = u32::from_be_bytes([e[0], e[1], e[2], e[3]]);
        let pos = u32::from_be_bytes([e[4], e[5], e[6], e[7]]);
        (self.base_offset + i64::from(rel), pos)
    }

    pub fn last_entry(&self) -> Option<(i64, u32)> {
        (!self.is_empty()).then(|| self.entry(self.len() - 1))
    }

    /// Adds an entry (kept in memory until `write_pending`). Offsets and positions must
    /// strictly increase and the offset must be within u32 of the base offset.
    pub fn append(&mut self, offset: i64, position: u32) -> Result<()> {
        let rel = u32::try_from(offset - self.base_offset).map_err(|_| LogError::CorruptIndex {
            path: self.file.path.clone(),
            reason: format!("offset {offset} is not within u32 of base offset {}", self.base_offset),
        })?;
        if let Some((lo, lp)) = self.last_entry() {
            if offset <= lo || position <= lp {
                return Err(LogError::CorruptIndex {
                    path: self.file.path.clone(),
                    reason: format!("entry ({offset}, {position}) does not follow the last entry ({lo}, {lp})"),
                });
            }
        }
        if self.is_full() {
            return Err(LogError::CorruptIndex {
                path: self.file.path.clone(),
                reason: format!("index is full ({} entries)", self.len()),
            });
        }
        let mut e = [0u8; ENTRY_SIZE];
        e[..4].copy_from_slice(&rel.to_be_bytes());
        e[4..].copy_from_slice(&position.to_be_bytes());
        self.file.push(&e);
        Ok(())
    }

    /// Largest entry with offset <= `target`, or `(base_offset, 0)`.
    pub fn lookup(&self, target: i64) -> (i64, u32) {
        // partition_point: first index whose offset > target.
        let (mut lo, mut hi) = (0usize, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.entry(mid).0 <= target {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        if lo == 0 {
            (self.base_offset, 0)
        } else {
            self.entry(lo - 1)
        }
    }

    /// Largest entry with position <= `position`, or `(base_offset, 0)`.
    pub fn lookup_position(&self, position: u64) -> (i64, u32) {
        let (mut lo, mut hi) = (0usize, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if u64::from(self.entry(mid).1) <= position {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        if lo == 0 {
            (self.base_offset, 0)
        } else {
            self.entry(lo - 1)
        }
    }

    /// Drops entries with offset >= `offset`.
    pub fn truncate_to(&mut self, offset: i64) -> Result<()> {
        let keep = (0..self.len()).take_while(|&i| self.entry(i).0 < offset).count();
        self.file.truncate_entries(keep)
    }

    /// Checks the entries against the segment: increasing columns, positions inside the log.
    pub fn sanity_check(&self, log_size: u64) -> Result<()> {
        let mut prev: Option<(i64, u32)> = None;
        for i in 0..self.len() {
            let (o, p) = self.entry(i);
            let bad = |reason: String| Err(LogError::CorruptIndex { path: self.file.path.clone(), reason });
            if u64::from(p) >= log_size {
                return bad(format!("entry {i} points at position {p}, beyond the log size {log_size}"));
            }
            if let Some((po, pp)) = prev {
                if o <= po || p <= pp {
                    return bad(format!("entry {i} ({o}, {p}) does not increase over ({po}, {pp})"));
                }
            }
            prev = Some((o, p));
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
    use std::collections::BTreeMap;

    fn model_lookup(m: &BTreeMap<i64, u32>, base: i64, t: i64) -> (i64, u32) {
        m.range(..=t).next_back().map_or((base, 0), |(o, p)| (*o, *p))
    }

    proptest! {
        #[test]
        fn lookup_matches_btreemap(
            base in 0i64..1_000_000,
            steps in proptest::collection::vec((1u32..100, 1u32..5000), 0..200),
            probes in proptest::collection::vec(0i64..30_000, 1..50),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let mut idx = OffsetIndex::create(&dir.path().join("i.index"), base, 1 << 20);
            let mut model = BTreeMap::new();
            let (mut o, mut p) = (base, 0u32);
            for (dof, dpos) in steps {
                o += i64::from(dof);
                p += dpos;
                idx.append(o, p).unwrap();
                model.insert(o, p);
            }
            idx.write_pending().unwrap();
            for t in probes {
                let t = base + t - 100;
                prop_assert_eq!(idx.lookup(t), model_lookup(&model, base, t));
            }
            // Reload from the file: same answers.
            let re = OffsetIndex::open(&dir.path().join("i.index"), base, 1 << 20).unwrap().unwrap();
            prop_assert_eq!(re.len(), model.len());
            for (i, (o, p)) in model.iter().enumerate() {
                prop_assert_eq!(re.entry(i), (*o, *p));
            }
        }
    }

    #[test]
    fn append_out_of_order_rejected() {
        let dir = tempfile::tempdir().unwrap();
        let mut idx = OffsetIndex::create(&dir.path().join("a.index"), 100, 1024);
        idx.append(105, 4096).unwrap();
        assert!(idx.append(104, 8192).is_err());
        assert!(idx.append(106, 4096).is_err());
        assert!(idx.append(99, 1).is_err());
    }

    #[test]
    fn full_index_rejects_appends() {
        let dir = tempfile::tempdir().unwrap();
        let mut idx = OffsetIndex::create(&dir.path().join("a.index"), 0, 32);
        for i in 1..=4 {
            idx.append(i, u32::try_from(i).unwrap() * 10).unwrap();
        }
        assert!(idx.is_full());
        assert!(idx.append(5, 50).is_err());
    }

    #[test]
    fn truncate_to_exact_entry() {
        let dir = tempfile::tempdir().unwrap();
        let mut idx = OffsetIndex::create(&dir.path().join("t.index"), 0, 1024);
        for (o, p) in [(10, 100), (20, 200), (30, 300)] {
            idx.append(o, p).unwrap();
        }
        idx.write_pending().unwrap();
        idx.truncate_to(20).unwrap();
        assert_eq!(idx.len(), 1);
        assert_eq!(idx.lookup(25), (10, 100));
        idx.append(21, 210).unwrap();
        assert_eq!(idx.lookup(25), (21, 210));
    }

    #[test]
    fn file_holds_exactly_the_written_entries() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.index");
        std::fs::write(&path, [0xFFu8; 24]).unwrap(); // a stale file with the same name
        let mut idx = OffsetIndex::create(&path, 0, 1000);
        idx.append(3, 30).unwrap();
        assert!(idx.needs_sync());
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 24, "nothing written before write_pending");
        idx.write_pending().unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 8, "replaced, nothing preallocated");
        idx.append(5, 50).unwrap();
        idx.append(7, 70).unwrap();
        idx.sync().unwrap();
        assert!(!idx.needs_sync());
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 24);
        idx.truncate_to(5).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 8);
        let re = OffsetIndex::open(&path, 0, 1000).unwrap().unwrap();
        assert_eq!((re.len(), re.entry(0)), (1, (3, 30)));
        // An empty index still creates its file when written; a missing file is `None`.
        let empty = dir.path().join("e.index");
        assert!(OffsetIndex::open(&empty, 0, 1000).unwrap().is_none());
        OffsetIndex::create(&empty, 0, 1000).write_pending().unwrap();
        assert_eq!(std::fs::metadata(&empty).unwrap().len(), 0);
    }

    #[test]
    fn sanity_check_catches_garbage() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.index");
        std::fs::write(&path, [0, 0, 0, 5, 0, 0, 0, 9, 0, 0, 0, 3, 0, 0, 0, 20]).unwrap();
        let idx = OffsetIndex::open(&path, 0, 1024).unwrap().unwrap();
        assert!(idx.sanity_check(1000).is_err(), "offsets decrease");
        std::fs::write(&path, [0, 0, 0, 5, 0, 0, 0, 9, 0]).unwrap();
        assert!(OffsetIndex::open(&path, 0, 1024).is_err(), "partial entry");
        std::fs::write(&path, [0, 0, 0, 5, 0, 0, 0x10, 0]).unwrap();
        let idx = OffsetIndex::open(&path, 0, 1024).unwrap().unwrap();
        assert!(idx.sanity_check(100).is_err(), "position beyond log");
    }
}
