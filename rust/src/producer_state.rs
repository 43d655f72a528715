//! Idempotent-producer state: per producer id, its epoch and its last five batches.
//!
//! # Rules on a leader (client) append, for batches with producerId >= 0
//! - epoch lower than the known one → `InvalidProducerEpoch` (a fenced zombie);
//! - epoch higher than the known one → the sequence must restart at 0, else
//!   `OutOfOrderSequence` (expected 0);
//! - same epoch and (first seq, last seq) equal to one of the cached last 5 batches → a
//!   DUPLICATE (a retry of a batch already written): nothing is written and the original
//!   offsets are returned;
//! - same epoch otherwise: first seq must be last seq + 1 (wrapping from i32::MAX to 0), else
//!   `OutOfOrderSequence`;
//! - an unknown producer id may start at any sequence (Kafka's current behaviour: the state
//!   may have been expired or removed with old segments).
//!
//! Control batches (transaction markers, baseSequence -1) only update the epoch. Follower
//! appends and rebuilds update the state without checking (the leader already did).
//!
//! # Atomicity
//! Checks run against a [`ProducerAppend`], a staging copy of the touched entries; the log
//! commits it only after the write succeeded, so a rejected or failed append leaves no trace.
//!
//! # Persistence
//! Rebuilt on open by a header-only scan of every segment (61 bytes per batch, windowed
//! reads), unless a snapshot written at clean close matches the log end offset.
//! Snapshot file `producer-state.snapshot`, big-endian:
//! `"LBPS" | version u16 (1) | crc32c u32 of the rest | log_end_offset i64 | count u32 |
//!  count × (producer_id i64 | epoch i16 | last_timestamp i64 | n u8 |
//!           n × (first_seq i32 | last_seq i32 | first_offset i64 | last_offset i64 | timestamp i64 | epoch i16))`.
//!
//! # Concurrency
//! Not synchronized; owned by the `Log`, used under its mutex.

use std::collections::{HashMap, VecDeque};
use std::path::Path;

use crate::batch::{add_sequence, BatchHeader};
use crate::error::{LogError, Result, Tp};
use crate::offset_checkpoint::write_atomically;

pub const MAX_CACHED_BATCHES: usize = 5;
pub const SNAPSHOT_FILE: &str = "producer-state.snapshot";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchMetadata {
    pub first_seq: i32,
    pub last_seq: i32,
    pub first_offset: i64,
    pub last_offset: i64,
    pub timestamp: i64,
    pub epoch: i16,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerEntry {
    pub producer_id: i64,
    pub epoch: i16,
    pub batches: VecDeque<BatchMetadata>,
    pub last_timestamp: i64,
}

impl ProducerEntry {
    fn new(producer_id: i64, epoch: i16) -> Self {
        ProducerEntry { producer_id, epoch, batches: VecDeque::new(), last_timestamp: -1 }
    }
    pub fn last_seq(&self) -> i32 {
        self.batches.back().map_or(-1, |b| b.last_seq)
    }
    pub fn last_offset(&self) -> i64 {
        self.batches.back().map_or(-1, |b| b.last_offset)
    }
    pub fn first_offset_of_last_batch(&self) -> i64 {
        self.batches.back().map_or(-1, |b| b.first_offset)
    }
}

/// A batch's producer fields and where the log put it.
#[derive(Debug, Clone, Copy)]
pub struct ProducerBatch {
    pub producer_id: i64,
    pub epoch: i16,
    pub first_seq: i32,
    pub last_seq: i32,
    pub first_offset: i64,
    pub last_offset: i64,
    pub timestamp: i64,
    pub control: bool,
}

impl ProducerBatch {
    pub fn from_header(h: &BatchHeader) -> Self {
        ProducerBatch {
            producer_id: h.producer_id,
            epoch: h.producer_epoch,
            first_seq: h.base_sequence,
            last_seq: h.last_sequence(),
            first_offset: h.base_offset,
            last_offset: h.last_offset(),
            timestamp: h.max_timestamp,
            control: h.is_control(),
        }
    }
}

#[derive(Debug, Default)]
pub struct ProducerStateManager {
    producers: HashMap<i64, ProducerEntry>,
}

/// Staged updates for one append (see the module docs on atomicity).
#[derive(Debug, Default)]
pub struct ProducerAppend {
    staged: HashMap<i64, ProducerEntry>,
}

impl ProducerAppend {
    fn current<'a>(&'a self, m: &'a ProducerStateManager, pid: i64) -> Option<&'a ProducerEntry> {
        self.staged.get(&pid).or_else(|| m.producers.get(&pid))
    }

    /// Client-append check. `Ok(Some(meta))` marks a duplicate of the cached batch `meta`.
    pub fn check(&self, m: &ProducerStateManager, b: &ProducerBatch) -> Result<Option<BatchMetadata>> {
        let Some(e) = self.current(m, b.producer_id) else { return Ok(None) };
        if b.epoch < e.epoch {
            return Err(LogError::InvalidProducerEpoch {
                tp: Tp::default(),
                producer_id: b.producer_id,
                current: e.epoch,
                received: b.epoch,
            });
        }
        if b.control || b.first_seq < 0 {
            return Ok(None);
        }
        if b.epoch > e.epoch {
            if b.first_seq != 0 {
                return Err(LogError::OutOfOrderSequence {
                    tp: Tp::default(),
                    producer_id: b.producer_id,
                    epoch: b.epoch,
                    expected: 0,
                    received: b.first_seq,
                });
            }
            return Ok(None);
        }
        if let Some(d) = e.batches.iter().find(|d| d.first_seq == b.first_seq && d.last_seq == b.last_seq) {
            return Ok(Some(*d));
        }
        let last = e.last_seq();
        if last < 0 {
            return Ok(None);
        }
        let expected = add_sequence(last, 1);
        if b.first_seq != expected {
            return Err(LogError::OutOfOrderSequence {
                tp: Tp::default(),
                producer_id: b.producer_id,
                epoch: b.epoch,
                expected,
                received: b.first_seq,
            });
        }
        Ok(None)
    }

    /// Records the batch in the staged state (no checks).
    pub fn stage(&mut self, m: &ProducerStateManager, b: &ProducerBatch) {
        let entry = self
            .staged
            .entry(b.producer_id)
            .or_insert_with(|| m.producers.get(&b.producer_id).cloned().unwrap_or_else(|| ProducerEntry::new(b.producer_id, b.epoch)));
        update_entry(entry, b);
    }

    pub fn is_empty(&self) -> bool {
        self.staged.is_empty()
    }
}

fn update_entry(entry: &mut ProducerEntry, b: &ProducerBatch) {
    if b.epoch > entry.epoch {
        entry.epoch = b.epoch;
        entry.batches.clear();
    }
    if !b.control && b.first_seq >= 0 {
        entry.batches.push_back(BatchMetadata {
            first_seq: b.first_seq,
            last_seq: b.last_seq,
            first_offset: b.first_offset,
            last_offset: b.last_offset,
            timestamp: b.timestamp,
            epoch: b.epoch,
        });
        while entry.batches.len() > MAX_CACHED_BATCHES {
            entry.batches.pop_front();
        }
    }
    entry.last_timestamp = b.timestamp;
}

impl ProducerStateManager {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn commit(&mut self, append: ProducerAppend) {
        self.producers.extend(append.staged);
    }

    /// Unchecked update (follower appends, rebuild).
    pub fn apply(&mut self, b: &ProducerBatch) {
        let entry = self.producers.entry(b.producer_id).or_insert_with(|| ProducerEntry::new(b.producer_id, b.epoch));
        update_entry(entry, b);
    }

    pub fn get(&self, producer_id: i64) -> Option<&ProducerEntry> {
        self.producers.get(&producer_id)
    }

    /// Producers sorted by id.
    pub fn entries(&self) -> Vec<&ProducerEntry> {
        let mut v: Vec<_> = self.producers.values().collect();
        v.sort_by_key(|e| e.producer_id);
        v
    }

    pub fn clear(&mut self) {
        self.producers.clear();
    }

    /// Forgets producers idle for `expiration_ms` (last batch timestamp) as of `now_ms`.
    pub fn expire(&mut self, now_ms: i64, expiration_ms: i64) -> usize {
        let before = self.producers.len();
        self.producers.retain(|_, e| now_ms.saturating_sub(e.last_timestamp) < expiration_ms);
        before - self.producers.len()
    }

    /// Log start moved: drop producers whose last batch is entirely below it.
    pub fn truncate_head(&mut self, log_start: i64) {
        self.producers.retain(|_, e| e.batches.is_empty() || e.last_offset() >= log_start);
        for e in self.producers.values_mut() {
            while e.batches.len() > 1 && e.batches.front().is_some_and(|b| b.last_offset < log_start) {
                e.batches.pop_front();
            }
        }
    }

    pub fn write_snapshot(&self, dir: &Path, log_end_offset: i64) -> Result<()> {
        let mut body = Vec::with_capacity(16 + self.producers.len() * 64);
        body.extend_from_slice(&log_end_offset.to_be_bytes());
        body.extend_from_slice(&u32::try_from(self.producers.len()).unwrap_or(u32::MAX).to_be_bytes());
        for e in self.entries() {
            body.extend_from_slice(&e.producer_id.to_be_bytes());
            body.extend_from_slice(&e.epoch.to_be_bytes());
            body.extend_from_slice(&e.last_timestamp.to_be_bytes());
            body.push(u8::try_from(e.batches.len()).unwrap_or(0));
            for b in &e.batches {
                body.extend_from_slice(&b.first_seq.to_be_bytes());
                body.extend_from_slice(&b.last_seq.to_be_bytes());
                body.extend_from_slice(&b.first_offset.to_be_bytes());
                body.extend_from_slice(&b.last_offset.to_be_bytes());
                body.extend_from_slice(&b.timestamp.to_be_bytes());
                body.extend_from_slice(&b.epoch.to_be_bytes());
            }
        }
        let mut out = Vec::with_capacity(body.len() + 10);
        out.extend_from_slice(b"LBPS");
        out.extend_from_slice(&1u16.to_be_bytes());
        out.extend_from_slice(&crc32c::crc32c(&body).to_be_bytes());
        out.extend_from_slice(&body);
        write_atomically(&dir.join(SNAPSHOT_FILE), &out)
    }

    /// Loads the snapshot if it exists, is intact and was taken at `log_end_offset`.
    pub fn read_snapshot(dir: &Path, log_end_offset: i64) -> Option<ProducerStateManager> {
        let data = std::fs::read(dir.join(SNAPSHOT_FILE)).ok()?;
        let mut r = Reader { b: &data, p: 0 };
        if r.take(4)? != b"LBPS" || r.u16()? != 1 {
            return None;
        }
        let crc = r.u32()?;
        if crc32c::crc32c(&data[r.p..]) != crc || r.i64()? != log_end_offset {
            return None;
        }
        let count = r.u32()?;
        let mut m = ProducerStateManager::new();
        for _ in 0..count {
            let mut e = ProducerEntry::new(r.i64()?, r.i16()?);
            e.last_timestamp = r.i64()?;
            for _ in 0..r.take(1)?[0] {
                e.batches.push_back(BatchMetadata {
                    first_seq: r.i32()?,
                    last_seq: r.i32()?,
                    first_offset: r.i64()?,
                    last_offset: r.i64()?,
                    timestamp: r.i64()?,
                    epoch: r.i16()?,
                });
            }
            m.producers.insert(e.producer_id, e);
        }
        (r.p == data.len()).then_some(m)
    }
}

struct Reader<'a> {
    b: &'a [u8],
    p: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let s = self.b.get(self.p..self.p + n)?;
        self.p += n;
        Some(s)
    }
    fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|s| u16::from_be_bytes([s[0], s[1]]))
    }
    fn i16(&mut self) -> Option<i16> {
        self.take(2).map(|s| i16::from_be_bytes([s[0], s[1]]))
    }
    fn u32(&mut self) -> Option<u32> {
        self.take(4).map(|s| u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
    }
    fn i32(&mut self) -> Option<i32> {
        self.take(4).map(|s| i32::from_be_bytes([s[0], s[1], s[2], s[3]]))
    }
    fn i64(&mut self) -> Option<i64> {
        self.take(8).map(|s| {
            let mut a = [0u8; 8];
            a.copy_from_slice(s);
            i64::from_be_bytes(a)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pb(pid: i64, epoch: i16, first: i32, n: i32, offset: i64) -> ProducerBatch {
        ProducerBatch {
            producer_id: pid,
            epoch,
            first_seq: first,
            last_seq: add_sequence(first, n - 1),
            first_offset: offset,
            last_offset: offset + i64::from(n) - 1,
            timestamp: 1000 + offset,
            control: false,
        }
    }

    /// Check + stage + commit, as the log does for one single-batch append.
    fn append(m: &mut ProducerStateManager, b: ProducerBatch) -> Result<Option<BatchMetadata>> {
        let mut a = ProducerAppend::default();
        if let Some(d) = a.check(m, &b)? {
            return Ok(Some(d));
        }
        a.stage(m, &b);
        m.commit(a);
        Ok(None)
    }

    #[test]
    fn in_order_sequences_accepted() {
        let mut m = ProducerStateManager::new();
        assert_eq!(append(&mut m, pb(7, 0, 0, 3, 0)).unwrap(), None);
        assert_eq!(append(&mut m, pb(7, 0, 3, 2, 3)).unwrap(), None);
        let e = m.get(7).unwrap();
        assert_eq!((e.epoch, e.last_seq(), e.last_offset()), (0, 4, 4));
    }

    #[test]
    fn new_producer_may_start_anywhere() {
        let mut m = ProducerStateManager::new();
        assert_eq!(append(&mut m, pb(9, 3, 42, 1, 0)).unwrap(), None);
    }

    #[test]
    fn duplicate_returns_original_offsets() {
        let mut m = ProducerStateManager::new();
        append(&mut m, pb(1, 0, 0, 3, 100)).unwrap();
        append(&mut m, pb(1, 0, 3, 3, 103)).unwrap();
        let d = append(&mut m, pb(1, 0, 0, 3, 999)).unwrap().expect("duplicate");
        assert_eq!((d.first_offset, d.last_offset), (100, 102));
        assert_eq!(m.get(1).unwrap().last_offset(), 105, "a duplicate changes nothing");
    }

    #[test]
    fn only_last_five_batches_deduplicated() {
        let mut m = ProducerStateManager::new();
        for i in 0..7 {
            append(&mut m, pb(1, 0, i, 1, i64::from(i))).unwrap();
        }
        assert!(append(&mut m, pb(1, 0, 2, 1, 50)).unwrap().is_some());
        let e = append(&mut m, pb(1, 0, 1, 1, 50)).unwrap_err();
        assert!(matches!(e, LogError::OutOfOrderSequence { expected: 7, received: 1, .. }), "{e}");
    }

    #[test]
    fn gap_is_out_of_order() {
        let mut m = ProducerStateManager::new();
        append(&mut m, pb(1, 0, 0, 2, 0)).unwrap();
        let e = append(&mut m, pb(1, 0, 5, 1, 2)).unwrap_err();
        assert!(matches!(e, LogError::OutOfOrderSequence { expected: 2, received: 5, .. }), "{e}");
    }

    #[test]
    fn lower_epoch_is_fenced() {
        let mut m = ProducerStateManager::new();
        append(&mut m, pb(1, 5, 0, 1, 0)).unwrap();
        let e = append(&mut m, pb(1, 4, 1, 1, 1)).unwrap_err();
        assert!(matches!(e, LogError::InvalidProducerEpoch { current: 5, received: 4, .. }), "{e}");
    }

    #[test]
    fn new_epoch_must_restart_at_zero() {
        let mut m = ProducerStateManager::new();
        append(&mut m, pb(1, 0, 0, 5, 0)).unwrap();
        assert!(matches!(append(&mut m, pb(1, 1, 5, 1, 5)), Err(LogError::OutOfOrderSequence { expected: 0, .. })));
        assert_eq!(append(&mut m, pb(1, 1, 0, 1, 5)).unwrap(), None);
        assert_eq!(m.get(1).unwrap().batches.len(), 1, "new epoch clears the old batches");
    }

    #[test]
    fn sequence_wraps_at_i32_max() {
        let mut m = ProducerStateManager::new();
        append(&mut m, pb(1, 0, i32::MAX - 1, 2, 0)).unwrap();
        assert_eq!(m.get(1).unwrap().last_seq(), i32::MAX);
        assert_eq!(append(&mut m, pb(1, 0, 0, 1, 2)).unwrap(), None);
    }

    #[test]
    fn staged_state_is_discarded_unless_committed() {
        let m = ProducerStateManager::new();
        let mut a = ProducerAppend::default();
        a.stage(&m, &pb(1, 0, 0, 1, 0));
        // A second batch in the same request sees the staged first one.
        assert!(a.check(&m, &pb(1, 0, 2, 1, 1)).is_err());
        assert!(a.check(&m, &pb(1, 0, 1, 1, 1)).unwrap().is_none());
        drop(a);
        assert!(m.get(1).is_none());
    }

    #[test]
    fn expiration_and_head_truncation() {
        let mut m = ProducerStateManager::new();
        append(&mut m, pb(1, 0, 0, 1, 0)).unwrap(); // ts 1000
        append(&mut m, pb(2, 0, 0, 1, 500)).unwrap(); // ts 1500
        assert_eq!(m.expire(2000, 900), 1);
        assert!(m.get(1).is_none() && m.get(2).is_some());
        m.truncate_head(501);
        assert!(m.get(2).is_none());
    }

    #[test]
    fn snapshot_round_trip_and_staleness() {
        let dir = tempfile::tempdir().unwrap();
        let mut m = ProducerStateManager::new();
        for i in 0..8 {
            append(&mut m, pb(i64::from(i % 3), 2, i / 3, 1, i64::from(i))).unwrap();
        }
        m.write_snapshot(dir.path(), 8).unwrap();
        let re = ProducerStateManager::read_snapshot(dir.path(), 8).unwrap();
        assert_eq!(re.entries(), m.entries());
        assert!(ProducerStateManager::read_snapshot(dir.path(), 9).is_none(), "stale snapshot ignored");
        let p = dir.path().join(SNAPSHOT_FILE);
        let mut data = std::fs::read(&p).unwrap();
        let n = data.len();
        data[n - 3] ^= 1;
        std::fs::write(&p, data).unwrap();
        assert!(ProducerStateManager::read_snapshot(dir.path(), 8).is_none(), "corrupt snapshot ignored");
    }
}
