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
//! # Transactions
//! A producer's first transactional data batch opens its transaction at that batch's first
//! offset (`current_txn_first_offset`); its end marker (a control batch, COMMIT or ABORT)
//! closes it. While a transaction is open a non-transactional batch from the same producer
//! is `InvalidTxnState`; a marker from a coordinator epoch older than the last marker's is
//! `CoordinatorFenced`. The manager keeps
//! - `ongoing`: first offset → producer id of every open transaction; the smallest key is the
//!   *first unstable offset*, and the last stable offset (LSO) is min(it, HW);
//! - `aborted`: every aborted transaction still in the log, in marker order, as
//!   `(producer id, first offset, last offset = the marker's offset, LSO after it)`: the
//!   aborted-transaction index that read_committed fetches return (Kafka's `.txnindex`,
//!   kept in memory here and rebuilt from the markers with the rest of this state).
//!
//! # Atomicity
//! Checks run against a [`ProducerAppend`], a staging copy of the touched entries; the log
//! commits it only after the write succeeded, so a rejected or failed append leaves no trace.
//!
//! # Persistence
//! Rebuilt on open by a header-only scan of every segment (61 bytes per batch, windowed
//! reads), unless a snapshot written at clean close matches the log end offset.
//! Snapshot file `producer-state.snapshot`, big-endian:
//! `"LBPS" | version u16 (2) | crc32c u32 of the rest | log_end_offset i64 | count u32 |
//!  count × (producer_id i64 | epoch i16 | last_timestamp i64 |
//!           current_txn_first_offset i64 | coordinator_epoch i32 | n u8 |
//!           n × (first_seq i32 | last_seq i32 | first_offset i64 | last_offset i64 | timestamp i64 | epoch i16)) |
//!  aborted u32 | aborted × (producer_id i64 | first_offset i64 | last_offset i64 | last_stable_offset i64)`.
//! Version 1 (before transactions) lacks the two transaction fields and the aborted list;
//! it is still read.
//!
//! # Concurrency
//! Not synchronized; owned by the `Log`, used under its mutex.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::Path;

use crate::batch::{add_sequence, BatchHeader, EndTxnMarker};
use crate::error::{LogError, Result, Tp};
use crate::offset_checkpoint::write_replacing;

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
    /// First offset of the producer's open transaction; -1 when none is open.
    pub current_txn_first_offset: i64,
    /// Coordinator epoch of the last marker written for this producer; -1 before any.
    pub coordinator_epoch: i32,
}

impl ProducerEntry {
    fn new(producer_id: i64, epoch: i16) -> Self {
        ProducerEntry {
            producer_id,
            epoch,
            batches: VecDeque::new(),
            last_timestamp: -1,
            current_txn_first_offset: -1,
            coordinator_epoch: -1,
        }
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
    pub transactional: bool,
    /// The end marker of a control batch (`None` for data batches and for control batches
    /// that are not COMMIT/ABORT markers).
    pub marker: Option<EndTxnMarker>,
}

impl ProducerBatch {
    /// The batch's producer fields; `marker` is read from the batch body by the caller
    /// (headers do not hold it).
    pub fn from_header(h: &BatchHeader, marker: Option<EndTxnMarker>) -> Self {
        ProducerBatch {
            producer_id: h.producer_id,
            epoch: h.producer_epoch,
            first_seq: h.base_sequence,
            last_seq: h.last_sequence(),
            first_offset: h.base_offset,
            last_offset: h.last_offset(),
            timestamp: h.max_timestamp,
            control: h.is_control(),
            transactional: h.is_transactional(),
            marker: if h.is_control() { marker } else { None },
        }
    }
}

/// An aborted transaction still in the log (one entry of the aborted-transaction index).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbortedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
    /// The ABORT marker's offset.
    pub last_offset: i64,
    /// The first unstable offset once this transaction ended (or the offset after the marker).
    pub last_stable_offset: i64,
}

/// A transaction opened or closed by an append, applied to the manager's indexes in order.
#[derive(Debug, Clone, Copy)]
enum TxnEvent {
    Begin { producer_id: i64, first_offset: i64 },
    End { producer_id: i64, first_offset: i64, marker_offset: i64, commit: bool },
}

#[derive(Debug, Default)]
pub struct ProducerStateManager {
    producers: HashMap<i64, ProducerEntry>,
    /// Open transactions: first offset → producer id.
    ongoing: BTreeMap<i64, i64>,
    /// Aborted transactions in marker-offset order.
    aborted: VecDeque<AbortedTxn>,
}

/// Staged updates for one append (see the module docs on atomicity).
#[derive(Debug, Default)]
pub struct ProducerAppend {
    staged: HashMap<i64, ProducerEntry>,
    events: Vec<TxnEvent>,
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
        if let Some(m) = b.marker {
            if m.coordinator_epoch < e.coordinator_epoch {
                return Err(LogError::CoordinatorFenced {
                    tp: Tp::default(),
                    producer_id: b.producer_id,
                    current: e.coordinator_epoch,
                    received: m.coordinator_epoch,
                });
            }
        }
        if !b.control && !b.transactional && e.current_txn_first_offset >= 0 && b.epoch == e.epoch {
            return Err(LogError::InvalidTxnState {
                tp: Tp::default(),
                producer_id: b.producer_id,
                reason: format!(
                    "a non-transactional batch at sequence {} while its transaction opened at offset {} is still open",
                    b.first_seq, e.current_txn_first_offset
                ),
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
        // No batch cached at this epoch (a transaction marker bumped it, say): the producer
        // starts again at sequence 0, as Kafka's checkSequence wants; any sequence only when
        // the entry knows no epoch at all.
        let last = e.last_seq();
        if last < 0 && e.epoch < 0 {
            return Ok(None);
        }
        let expected = if last < 0 { 0 } else { add_sequence(last, 1) };
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
        let entry = self.staged.entry(b.producer_id).or_insert_with(|| {
            m.producers.get(&b.producer_id).cloned().unwrap_or_else(|| ProducerEntry::new(b.producer_id, b.epoch))
        });
        if let Some(ev) = update_entry(entry, b) {
            self.events.push(ev);
        }
    }

    pub fn is_empty(&self) -> bool {
        self.staged.is_empty()
    }
}

/// Applies `b` to its producer's entry; the transaction it opened or closed, if any.
fn update_entry(entry: &mut ProducerEntry, b: &ProducerBatch) -> Option<TxnEvent> {
    if b.epoch > entry.epoch {
        entry.epoch = b.epoch;
        entry.batches.clear();
    }
    let mut event = None;
    if let Some(m) = b.marker {
        entry.coordinator_epoch = entry.coordinator_epoch.max(m.coordinator_epoch);
        if entry.current_txn_first_offset >= 0 {
            event = Some(TxnEvent::End {
                producer_id: b.producer_id,
                first_offset: entry.current_txn_first_offset,
                marker_offset: b.first_offset,
                commit: m.commit,
            });
            entry.current_txn_first_offset = -1;
        }
    } else if b.transactional && !b.control && entry.current_txn_first_offset < 0 {
        entry.current_txn_first_offset = b.first_offset;
        event = Some(TxnEvent::Begin { producer_id: b.producer_id, first_offset: b.first_offset });
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
    event
}

impl ProducerStateManager {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn commit(&mut self, append: ProducerAppend) {
        self.producers.extend(append.staged);
        for ev in append.events {
            self.on_txn_event(ev);
        }
    }

    /// Unchecked update (follower appends, rebuild).
    pub fn apply(&mut self, b: &ProducerBatch) {
        let entry = self.producers.entry(b.producer_id).or_insert_with(|| ProducerEntry::new(b.producer_id, b.epoch));
        if let Some(ev) = update_entry(entry, b) {
            self.on_txn_event(ev);
        }
    }

    fn on_txn_event(&mut self, ev: TxnEvent) {
        match ev {
            TxnEvent::Begin { producer_id, first_offset } => {
                self.ongoing.insert(first_offset, producer_id);
            }
            TxnEvent::End { producer_id, first_offset, marker_offset, commit } => {
                self.ongoing.remove(&first_offset);
                if !commit {
                    let last_stable_offset = self.first_unstable_offset().unwrap_or(marker_offset + 1);
                    self.aborted.push_back(AbortedTxn {
                        producer_id,
                        first_offset,
                        last_offset: marker_offset,
                        last_stable_offset,
                    });
                }
            }
        }
    }

    /// The first offset of the oldest open transaction (`None`: every transaction is closed).
    pub fn first_unstable_offset(&self) -> Option<i64> {
        self.ongoing.keys().next().copied()
    }

    /// Open transactions as `(first offset, producer id)`, oldest first.
    pub fn ongoing_transactions(&self) -> Vec<(i64, i64)> {
        self.ongoing.iter().map(|(o, p)| (*o, *p)).collect()
    }

    /// The aborted transactions a fetch of `[fetch_offset, upper)` must report: those whose
    /// range overlaps it (their marker at or after `fetch_offset`, their first offset below
    /// `upper`), in marker order.
    pub fn aborted_between(&self, fetch_offset: i64, upper: i64) -> Vec<AbortedTxn> {
        let from = self.aborted.partition_point(|a| a.last_offset < fetch_offset);
        self.aborted.range(from..).filter(|a| a.first_offset < upper).copied().collect()
    }

    pub fn aborted_count(&self) -> usize {
        self.aborted.len()
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
        self.ongoing.clear();
        self.aborted.clear();
    }

    /// Forgets producers idle for `expiration_ms` (last batch timestamp) as of `now_ms`,
    /// except those with an open transaction (its marker is still to come).
    pub fn expire(&mut self, now_ms: i64, expiration_ms: i64) -> usize {
        let before = self.producers.len();
        self.producers
            .retain(|_, e| e.current_txn_first_offset >= 0 || now_ms.saturating_sub(e.last_timestamp) < expiration_ms);
        before - self.producers.len()
    }

    /// Log start moved: drop producers whose last batch is entirely below it (unless their
    /// transaction is open), and aborted transactions whose marker is below it.
    pub fn truncate_head(&mut self, log_start: i64) {
        while self.aborted.front().is_some_and(|a| a.last_offset < log_start) {
            self.aborted.pop_front();
        }
        self.producers
            .retain(|_, e| e.current_txn_first_offset >= 0 || e.batches.is_empty() || e.last_offset() >= log_start);
        for e in self.producers.values_mut() {
            while e.batches.len() > 1 && e.batches.front().is_some_and(|b| b.last_offset < log_start) {
                e.batches.pop_front();
            }
        }
    }

    /// The state as of the end of `end_offset` (what tiered storage copies beside a segment
    /// ending there): producers' batches up to it (a producer with none, only later ones,
    /// is left out: a log that goes on from there sees its later batches), the transactions
    /// open at that point (those still open, and those aborted later, whose markers come
    /// after it), the aborted transactions whose markers are at or below it.
    #[must_use]
    pub fn as_of(&self, end_offset: i64) -> ProducerStateManager {
        let mut m = ProducerStateManager::new();
        for e in self.producers.values() {
            let batches: VecDeque<BatchMetadata> =
                e.batches.iter().filter(|b| b.last_offset <= end_offset).copied().collect();
            let Some(last) = batches.back() else { continue };
            let mut x = e.clone();
            x.epoch = last.epoch;
            x.last_timestamp = last.timestamp;
            x.batches = batches;
            x.current_txn_first_offset =
                if (0..=end_offset).contains(&e.current_txn_first_offset) { e.current_txn_first_offset } else { -1 };
            m.producers.insert(x.producer_id, x);
        }
        for a in &self.aborted {
            if a.last_offset <= end_offset {
                m.aborted.push_back(*a);
            } else if a.first_offset <= end_offset {
                if let Some(x) = m.producers.get_mut(&a.producer_id) {
                    x.current_txn_first_offset = a.first_offset;
                }
            }
        }
        for x in m.producers.values() {
            if x.current_txn_first_offset >= 0 {
                m.ongoing.insert(x.current_txn_first_offset, x.producer_id);
            }
        }
        m
    }

    pub fn write_snapshot(&self, dir: &Path, log_end_offset: i64) -> Result<()> {
        self.write_snapshot_as(dir, log_end_offset, true)
    }

    /// `write_snapshot`; `durable` false: made durable by a later `sync_filesystem`
    /// (`Log::close_unsynced`).
    pub fn write_snapshot_as(&self, dir: &Path, log_end_offset: i64, durable: bool) -> Result<()> {
        write_replacing(&dir.join(SNAPSHOT_FILE), &self.snapshot_bytes(log_end_offset), durable)
    }

    /// The snapshot file's bytes, taken as if at `log_end_offset` (also what tiered storage
    /// copies beside a segment).
    pub fn snapshot_bytes(&self, log_end_offset: i64) -> Vec<u8> {
        let mut body = Vec::with_capacity(16 + self.producers.len() * 64);
        body.extend_from_slice(&log_end_offset.to_be_bytes());
        body.extend_from_slice(&u32::try_from(self.producers.len()).unwrap_or(u32::MAX).to_be_bytes());
        for e in self.entries() {
            body.extend_from_slice(&e.producer_id.to_be_bytes());
            body.extend_from_slice(&e.epoch.to_be_bytes());
            body.extend_from_slice(&e.last_timestamp.to_be_bytes());
            body.extend_from_slice(&e.current_txn_first_offset.to_be_bytes());
            body.extend_from_slice(&e.coordinator_epoch.to_be_bytes());
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
        body.extend_from_slice(&u32::try_from(self.aborted.len()).unwrap_or(u32::MAX).to_be_bytes());
        for a in &self.aborted {
            for v in [a.producer_id, a.first_offset, a.last_offset, a.last_stable_offset] {
                body.extend_from_slice(&v.to_be_bytes());
            }
        }
        let mut out = Vec::with_capacity(body.len() + 10);
        out.extend_from_slice(b"LBPS");
        out.extend_from_slice(&2u16.to_be_bytes());
        out.extend_from_slice(&crc32c::crc32c(&body).to_be_bytes());
        out.extend_from_slice(&body);
        out
    }

    /// Loads the snapshot if it exists, is intact and was taken at `log_end_offset`.
    pub fn read_snapshot(dir: &Path, log_end_offset: i64) -> Option<ProducerStateManager> {
        let data = std::fs::read(dir.join(SNAPSHOT_FILE)).ok()?;
        Self::from_snapshot_bytes(&data, log_end_offset)
    }

    /// A snapshot's state, if `data` is an intact snapshot taken at `log_end_offset`.
    pub fn from_snapshot_bytes(data: &[u8], log_end_offset: i64) -> Option<ProducerStateManager> {
        let mut r = Reader { b: data, p: 0 };
        if r.take(4)? != b"LBPS" {
            return None;
        }
        let version = r.u16()?;
        if version != 1 && version != 2 {
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
            if version >= 2 {
                e.current_txn_first_offset = r.i64()?;
                e.coordinator_epoch = r.i32()?;
                if e.current_txn_first_offset >= 0 {
                    m.ongoing.insert(e.current_txn_first_offset, e.producer_id);
                }
            }
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
        if version >= 2 {
            for _ in 0..r.u32()? {
                m.aborted.push_back(AbortedTxn {
                    producer_id: r.i64()?,
                    first_offset: r.i64()?,
                    last_offset: r.i64()?,
                    last_stable_offset: r.i64()?,
                });
            }
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
            transactional: false,
            marker: None,
        }
    }

    fn txn(pid: i64, epoch: i16, first: i32, n: i32, offset: i64) -> ProducerBatch {
        ProducerBatch { transactional: true, ..pb(pid, epoch, first, n, offset) }
    }

    fn marker(pid: i64, epoch: i16, commit: bool, coordinator_epoch: i32, offset: i64) -> ProducerBatch {
        ProducerBatch {
            producer_id: pid,
            epoch,
            first_seq: -1,
            last_seq: -1,
            first_offset: offset,
            last_offset: offset,
            timestamp: 2000 + offset,
            control: true,
            transactional: true,
            marker: Some(EndTxnMarker { commit, coordinator_epoch }),
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
    fn state_as_of_an_offset_for_a_copied_segment() {
        let mut m = ProducerStateManager::new();
        append(&mut m, pb(1, 0, 0, 5, 0)).unwrap(); // 0..4
        append(&mut m, txn(2, 0, 0, 5, 5)).unwrap(); // 5..9, aborted at 30
        append(&mut m, pb(1, 0, 5, 5, 10)).unwrap(); // 10..14
        append(&mut m, txn(3, 0, 0, 5, 15)).unwrap(); // 15..19, committed at 20
        append(&mut m, marker(3, 0, true, 0, 20)).unwrap();
        append(&mut m, pb(4, 0, 0, 5, 21)).unwrap(); // a producer only after 20
        append(&mut m, marker(2, 0, false, 0, 30)).unwrap();
        let at = m.as_of(12);
        assert_eq!(at.get(1).unwrap().last_seq(), 4, "producer 1's batches ending by offset 12");
        assert!(at.get(4).is_none(), "producer 4 starts later");
        assert_eq!(at.first_unstable_offset(), Some(5), "producer 2's transaction was open at 12 (aborted later)");
        assert_eq!(at.aborted_count(), 0);
        let bytes = at.snapshot_bytes(13);
        let back = ProducerStateManager::from_snapshot_bytes(&bytes, 13).unwrap();
        assert_eq!(back.first_unstable_offset(), Some(5));
        assert!(ProducerStateManager::from_snapshot_bytes(&bytes, 14).is_none(), "taken at 13 only");
        let end = m.as_of(30);
        assert_eq!((end.first_unstable_offset(), end.aborted_count()), (None, 1));
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
    fn at_a_known_epoch_without_batches_the_sequence_restarts_at_zero() {
        // Transactions v2: the marker bumps the epoch and no batch is cached at it; the next
        // transaction's first batch must be sequence 0 (Kafka's checkSequence), so a pipelined
        // later batch cannot be appended over the gap.
        let mut m = ProducerStateManager::new();
        append(&mut m, txn(3, 4, 0, 5, 0)).unwrap();
        append(&mut m, marker(3, 5, true, 0, 5)).unwrap();
        assert!(matches!(
            append(&mut m, txn(3, 5, 7, 2, 6)),
            Err(LogError::OutOfOrderSequence { expected: 0, received: 7, .. })
        ));
        assert_eq!(append(&mut m, txn(3, 5, 0, 2, 6)).unwrap(), None);
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

    #[test]
    fn transactions_open_close_and_index_aborts() {
        let mut m = ProducerStateManager::new();
        append(&mut m, txn(1, 0, 0, 2, 10)).unwrap(); // opens at 10
        append(&mut m, txn(2, 0, 0, 1, 12)).unwrap(); // opens at 12
        append(&mut m, txn(1, 0, 2, 1, 13)).unwrap(); // same transaction
        assert_eq!(m.first_unstable_offset(), Some(10));
        assert_eq!(m.ongoing_transactions(), vec![(10, 1), (12, 2)]);
        append(&mut m, marker(1, 0, false, 0, 14)).unwrap(); // abort of producer 1
        assert_eq!(m.first_unstable_offset(), Some(12));
        append(&mut m, marker(2, 0, true, 0, 15)).unwrap(); // commit of producer 2
        assert_eq!(m.first_unstable_offset(), None);
        let a = AbortedTxn { producer_id: 1, first_offset: 10, last_offset: 14, last_stable_offset: 12 };
        assert_eq!(m.aborted_between(0, 100), vec![a]);
        assert_eq!(m.aborted_between(14, 100), vec![a], "a fetch from the marker still needs it");
        assert!(m.aborted_between(15, 100).is_empty(), "fetches after the marker do not");
        assert!(m.aborted_between(0, 10).is_empty(), "fetches that end before the transaction do not");
        // A marker for a producer with nothing open changes no index.
        append(&mut m, marker(3, 0, false, 0, 16)).unwrap();
        assert_eq!(m.aborted_count(), 1);
        m.truncate_head(15);
        assert_eq!(m.aborted_count(), 0, "aborts below the log start are dropped");
    }

    #[test]
    fn non_transactional_batch_inside_a_transaction_is_invalid() {
        let mut m = ProducerStateManager::new();
        append(&mut m, txn(1, 0, 0, 1, 0)).unwrap();
        let e = append(&mut m, pb(1, 0, 1, 1, 1)).unwrap_err();
        assert!(matches!(e, LogError::InvalidTxnState { producer_id: 1, .. }), "{e}");
        // After the marker, plain batches (a new epoch) are fine again.
        append(&mut m, marker(1, 1, true, 0, 1)).unwrap();
        assert_eq!(append(&mut m, pb(1, 1, 0, 1, 2)).unwrap(), None);
    }

    #[test]
    fn stale_coordinator_and_zombie_markers_are_fenced() {
        let mut m = ProducerStateManager::new();
        append(&mut m, txn(1, 2, 0, 1, 0)).unwrap();
        append(&mut m, marker(1, 2, true, 5, 1)).unwrap();
        let e = append(&mut m, marker(1, 2, false, 4, 2)).unwrap_err();
        assert!(matches!(e, LogError::CoordinatorFenced { current: 5, received: 4, .. }), "{e}");
        let e = append(&mut m, marker(1, 1, false, 6, 2)).unwrap_err();
        assert!(matches!(e, LogError::InvalidProducerEpoch { current: 2, received: 1, .. }), "{e}");
    }

    #[test]
    fn rejected_append_leaves_transactions_untouched() {
        let m = ProducerStateManager::new();
        let mut a = ProducerAppend::default();
        a.stage(&m, &txn(1, 0, 0, 1, 0));
        drop(a);
        assert_eq!(m.first_unstable_offset(), None);
    }

    #[test]
    fn open_transactions_survive_expiration_and_head_truncation() {
        let mut m = ProducerStateManager::new();
        append(&mut m, txn(1, 0, 0, 1, 0)).unwrap();
        assert_eq!(m.expire(1_000_000, 10), 0);
        m.truncate_head(5);
        assert_eq!(m.first_unstable_offset(), Some(0));
        assert!(m.get(1).is_some());
    }

    #[test]
    fn snapshot_keeps_transactions_and_reads_version_1() {
        let dir = tempfile::tempdir().unwrap();
        let mut m = ProducerStateManager::new();
        append(&mut m, txn(1, 0, 0, 1, 0)).unwrap();
        append(&mut m, marker(1, 0, false, 3, 1)).unwrap();
        append(&mut m, txn(2, 0, 0, 1, 2)).unwrap();
        m.write_snapshot(dir.path(), 3).unwrap();
        let re = ProducerStateManager::read_snapshot(dir.path(), 3).unwrap();
        assert_eq!(re.entries(), m.entries());
        assert_eq!(re.first_unstable_offset(), Some(2));
        assert_eq!(re.aborted_between(0, 10), m.aborted_between(0, 10));
        assert_eq!(re.get(1).unwrap().coordinator_epoch, 3);
        // A version-1 snapshot (no transaction fields) of producer 9 at LEO 5.
        let mut body = Vec::new();
        body.extend_from_slice(&5i64.to_be_bytes());
        body.extend_from_slice(&1u32.to_be_bytes());
        body.extend_from_slice(&9i64.to_be_bytes());
        body.extend_from_slice(&0i16.to_be_bytes());
        body.extend_from_slice(&77i64.to_be_bytes());
        body.push(0);
        let mut v1 = b"LBPS".to_vec();
        v1.extend_from_slice(&1u16.to_be_bytes());
        v1.extend_from_slice(&crc32c::crc32c(&body).to_be_bytes());
        v1.extend_from_slice(&body);
        std::fs::write(dir.path().join(SNAPSHOT_FILE), v1).unwrap();
        let old = ProducerStateManager::read_snapshot(dir.path(), 5).unwrap();
        let e = old.get(9).unwrap();
        assert_eq!((e.last_timestamp, e.current_txn_first_offset, e.coordinator_epoch), (77, -1, -1));
    }
}
