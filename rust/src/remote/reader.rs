//! Reading copied segments back: what a Fetch below the local log start is answered with.
//!
//! `RemoteLogView` is a partition's copied segments as the metadata log lists them
//! (COPY_SEGMENT_FINISHED, set by the control plane at each metadata change), sorted by
//! offset and not overlapping. `RemoteReader::read` answers one partition of a Fetch:
//! 1. the segment holding the fetch offset (the first whose last offset is at or above it;
//!    a compacted segment may start past it: the read then starts at its first batch);
//! 2. its `.index` (cached whole), for the position of the last indexed batch at or below
//!    the offset; then batch headers forward from there to the batch holding the offset;
//! 3. whole batches from there within the partition's byte budget (the first one whole in
//!    any case when `min_one`, as a local read does), from `.log` chunks of
//!    `remote.log.chunk.size.bytes`;
//! 4. every batch's CRC-32C checked; for read_committed, the aborted transactions from the
//!    segment's `.txnindex` that overlap what is returned.
//!
//! Everything comes from `ByteCache`s (chunks; index files). A miss starts the GET on the
//! store's runtime (every chunk the read needs at once, and a fetch's worth after them, read
//! ahead) and the read returns `Pending`; the
//! partition is told when the bytes arrive (`ReadWaiter`) and the parked fetch reads again.
//! So the network thread never waits on the store.
//!
//! `remote.log.manager.fetch.max.bytes.per.second` (Kafka's KIP-956 quota) is a token
//! bucket over the bytes fetches carried from remote storage: while it is empty
//! (`fetch_quota_exceeded`), a fetch reads no remote partition (it is answered without their
//! records, as Kafka does, and the consumer fetches again); local reads go on.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};

use super::cache::{ByteCache, Lookup, ReadWaiter};
use super::error::RemoteError;
use super::store::{get_all, get_range, RemoteStore};
use crate::batch::{BatchHeader, ATTRIBUTES_AT, CRC_AT, HEADER_LEN};
use crate::producer_state::AbortedTxn;

/// Bytes of one `.txnindex` entry (Kafka's format: version i16, producer id, first offset,
/// last offset, last stable offset).
pub const TXN_ENTRY: usize = 34;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemoteSegment {
    /// The first offset it serves (its file's base offset, or where the copy took over from
    /// an earlier copy that covered the start of the file).
    pub start_offset: i64,
    /// Its last offset (inclusive).
    pub end_offset: i64,
    /// The segment file's base offset (what its index entries are relative to).
    pub base_offset: i64,
    /// `<partition dir>/<base:020>-<segment id>` below the store's prefix.
    pub stem: String,
    /// Bytes of its `.log`.
    pub size: u64,
    /// Its largest record timestamp (ListOffsets by time skips segments entirely older).
    pub max_timestamp: i64,
}

/// A partition's readable remote segments.
#[derive(Clone, Debug, Default)]
pub struct RemoteLogView {
    pub segments: Vec<RemoteSegment>,
    /// The first offset a consumer may read (the first segment's start, or above it after
    /// DeleteRecords).
    pub log_start_offset: i64,
}

impl RemoteLogView {
    /// The segment to read `offset` from: the first one ending at or after it.
    pub fn find(&self, offset: i64) -> Option<&RemoteSegment> {
        let i = self.segments.partition_point(|s| s.end_offset < offset);
        self.segments.get(i)
    }

    /// The last offset held remotely; -1 if none.
    pub fn end_offset(&self) -> i64 {
        self.segments.last().map_or(-1, |s| s.end_offset)
    }
}

pub enum RemoteRead {
    Ready {
        records: Bytes,
        aborted: Vec<AbortedTxn>,
    },
    /// Bytes are on their way; the waiter is told.
    Pending,
    /// Nothing at or after the offset in that segment.
    Empty,
    Failed(String),
}

#[derive(Default)]
pub struct RemoteReadStats {
    pub fetch_bytes: AtomicU64,
    pub fetch_requests: AtomicU64,
    pub fetch_errors: AtomicU64,
    pub gets: AtomicU64,
    /// Partition reads skipped because the fetch quota was used up.
    pub fetch_throttled: AtomicU64,
}

/// A token bucket of `per_second` bytes (at most one second's worth saved up); bytes taken
/// beyond it leave it in debt, so the rate over time is the quota.
struct FetchQuota {
    per_second: u64,
    /// (tokens, when they were counted)
    bucket: Mutex<(f64, Instant)>,
}

impl FetchQuota {
    fn new(per_second: u64) -> FetchQuota {
        FetchQuota { per_second, bucket: Mutex::new((per_second as f64, Instant::now())) }
    }

    fn unlimited(&self) -> bool {
        self.per_second >= i64::MAX as u64
    }

    fn refill(&self, bucket: &mut (f64, Instant)) {
        let now = Instant::now();
        let rate = self.per_second as f64;
        bucket.0 = (bucket.0 + now.duration_since(bucket.1).as_secs_f64() * rate).min(rate);
        bucket.1 = now;
    }

    fn exceeded(&self) -> bool {
        if self.unlimited() {
            return false;
        }
        let mut b = self.bucket.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        self.refill(&mut b);
        b.0 <= 0.0
    }

    fn take(&self, bytes: u64) {
        if self.unlimited() {
            return;
        }
        let mut b = self.bucket.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        self.refill(&mut b);
        b.0 -= bytes as f64;
    }
}

pub struct RemoteReader {
    store: Arc<RemoteStore>,
    chunks: ByteCache,
    indexes: ByteCache,
    chunk_size: u64,
    /// `remote.fetch.max.wait.ms`: how long a fetch waits for remote bytes.
    pub fetch_max_wait: Duration,
    pub stats: RemoteReadStats,
    /// `remote.log.manager.fetch.max.bytes.per.second`
    quota: FetchQuota,
}

#[derive(Clone, Copy)]
enum Kind {
    Chunk,
    Index,
}

impl RemoteReader {
    pub fn new(
        store: Arc<RemoteStore>,
        chunk_cache_bytes: u64,
        index_cache_bytes: u64,
        chunk_size: u64,
        fetch_max_wait: Duration,
        fetch_max_bytes_per_second: u64,
    ) -> RemoteReader {
        RemoteReader {
            store,
            chunks: ByteCache::new(chunk_cache_bytes),
            indexes: ByteCache::new(index_cache_bytes),
            chunk_size: chunk_size.max(1),
            fetch_max_wait,
            stats: RemoteReadStats::default(),
            quota: FetchQuota::new(fetch_max_bytes_per_second),
        }
    }

    /// The fetch quota is used up: no remote partition is read now (counted as throttled).
    pub fn fetch_quota_exceeded(&self) -> bool {
        let exceeded = self.quota.exceeded();
        if exceeded {
            self.stats.fetch_throttled.fetch_add(1, Ordering::Relaxed);
        }
        exceeded
    }

    pub fn store(&self) -> &Arc<RemoteStore> {
        &self.store
    }

    fn cache(&self, kind: Kind) -> &ByteCache {
        match kind {
            Kind::Chunk => &self.chunks,
            Kind::Index => &self.indexes,
        }
    }

    /// (chunk cache bytes, index cache bytes, hits, misses) for metrics.
    pub fn cache_stats(&self) -> (u64, u64, u64, u64) {
        let (cb, _, ch, cm) = self.chunks.stats();
        let (ib, _, ih, im) = self.indexes.stats();
        (cb, ib, ch + ih, cm + im)
    }

    /// Forgets what the caches hold of a deleted segment.
    pub fn forget(&self, seg: &RemoteSegment) {
        for suffix in ["index", "txnindex"] {
            self.indexes.remove(&format!("{}.{suffix}", seg.stem));
        }
        for i in 0..seg.size.div_ceil(self.chunk_size) {
            self.chunks.remove(&chunk_key(&seg.stem, i));
        }
    }

    /// The cached object (or chunk), or `None` after starting its load.
    fn object(
        self: &Arc<Self>,
        kind: Kind,
        key: String,
        rel: String,
        range: Option<Range<u64>>,
        waiter: Option<Weak<dyn ReadWaiter>>,
    ) -> Result<Option<Bytes>, String> {
        match self.cache(kind).lookup(&key, waiter) {
            Lookup::Hit(b) => Ok(Some(b)),
            Lookup::Loading => Ok(None),
            Lookup::Failed(why) => Err(why),
            Lookup::Miss => {
                self.stats.gets.fetch_add(1, Ordering::Relaxed);
                let me = Arc::clone(self);
                let store = self.store.object_store();
                let path = self.store.path_of(&rel);
                self.store.spawn(async move {
                    let got = match range {
                        Some(r) => get_range(&*store, &path, r).await,
                        None => get_all(&*store, &path).await,
                    };
                    me.cache(kind).fill(&key, got.map_err(|e| e.to_string()));
                });
                Ok(None)
            }
        }
    }

    fn chunk(
        self: &Arc<Self>,
        seg: &RemoteSegment,
        i: u64,
        waiter: Option<Weak<dyn ReadWaiter>>,
    ) -> Result<Option<Bytes>, String> {
        let start = i * self.chunk_size;
        let end = (start + self.chunk_size).min(seg.size);
        self.object(Kind::Chunk, chunk_key(&seg.stem, i), format!("{}.log", seg.stem), Some(start..end), waiter)
    }

    /// Bytes `[pos, pos + len)` of the segment's `.log` (a slice of one chunk, or pieces of
    /// several copied together), or `None` while some chunk loads.
    fn bytes(
        self: &Arc<Self>,
        seg: &RemoteSegment,
        pos: u64,
        len: u64,
        waiter: &Weak<dyn ReadWaiter>,
    ) -> Result<Option<Bytes>, String> {
        let first = pos / self.chunk_size;
        let last = (pos + len.max(1) - 1) / self.chunk_size;
        let mut parts = Vec::new();
        let mut missing = false;
        for i in first..=last {
            match self.chunk(seg, i, Some(waiter.clone()))? {
                Some(b) => parts.push(b),
                None => missing = true,
            }
        }
        if missing {
            return Ok(None);
        }
        let skip = (pos - first * self.chunk_size) as usize;
        let len = len as usize;
        if parts.len() == 1 {
            return Ok(Some(parts[0].slice(skip..skip + len)));
        }
        let mut out = BytesMut::with_capacity(len);
        let mut skip = skip;
        for p in parts {
            let take = (p.len() - skip).min(len - out.len());
            out.extend_from_slice(&p[skip..skip + take]);
            skip = 0;
        }
        Ok(Some(out.freeze()))
    }

    /// Counts what an answered Fetch carried from remote storage (a read the fetch then
    /// parked and did again is counted once, when it is sent).
    pub fn count_served(&self, reads: u64, bytes: u64) {
        self.stats.fetch_requests.fetch_add(reads, Ordering::Relaxed);
        self.stats.fetch_bytes.fetch_add(bytes, Ordering::Relaxed);
        self.quota.take(bytes);
    }

    /// Counts a partition read from remote storage answered with an error.
    pub fn count_error(&self) {
        self.stats.fetch_errors.fetch_add(1, Ordering::Relaxed);
    }

    /// One partition's read from `seg` at `offset` (see the module doc).
    pub fn read(
        self: &Arc<Self>,
        seg: &RemoteSegment,
        offset: i64,
        budget: u64,
        min_one: bool,
        read_committed: bool,
        waiter: &Weak<dyn ReadWaiter>,
    ) -> RemoteRead {
        macro_rules! get {
            ($e:expr) => {
                match $e {
                    Ok(Some(b)) => b,
                    Ok(None) => return RemoteRead::Pending,
                    Err(why) => return RemoteRead::Failed(why),
                }
            };
        }
        let index_rel = format!("{}.index", seg.stem);
        let index = get!(self.object(Kind::Index, index_rel.clone(), index_rel, None, Some(waiter.clone())));
        let key = |suffix: &str| self.store.key(&format!("{}.{suffix}", seg.stem));
        let mut pos = u64::from(index_lookup(&index, seg.base_offset, offset));
        // the batch holding `offset` (or the first after it)
        let header = |pos: u64| -> Result<Option<BatchHeader>, String> {
            if pos + HEADER_LEN as u64 > seg.size {
                return Err(RemoteError::Corrupt {
                    key: key("log"),
                    reason: format!("a batch header at byte {pos} runs past the segment's {} bytes", seg.size),
                }
                .to_string());
            }
            Ok(self.bytes(seg, pos, HEADER_LEN as u64, waiter)?.map(|b| BatchHeader::parse(&b)))
        };
        loop {
            if pos >= seg.size {
                return RemoteRead::Empty;
            }
            let h = get!(header(pos));
            if h.batch_length < 0 || h.size() < HEADER_LEN as u64 || pos + h.size() > seg.size {
                return RemoteRead::Failed(
                    RemoteError::Corrupt {
                        key: key("log"),
                        reason: format!("the batch at byte {pos} has length {}", h.batch_length),
                    }
                    .to_string(),
                );
            }
            if h.last_offset() >= offset {
                break;
            }
            pos += h.size();
        }
        let first = pos;
        // Every chunk this read may need is asked for at once (one wait, not one per chunk
        // boundary the batch walk crosses), and as many again after them without waiting:
        // a consumer reading on finds its next fetch's bytes on their way or there.
        let cs = self.chunk_size;
        let need_end = (first + budget.max(HEADER_LEN as u64)).min(seg.size);
        let ahead_end = (need_end + budget).min(seg.size);
        let last_needed = need_end.saturating_sub(1) / cs;
        let mut waiting = false;
        for i in first / cs..=ahead_end.saturating_sub(1) / cs {
            let needed = i <= last_needed;
            match self.chunk(seg, i, needed.then(|| waiter.clone())) {
                Ok(None) => waiting |= needed,
                Err(why) if needed => return RemoteRead::Failed(why),
                Ok(Some(_)) | Err(_) => {} // cached, or a read-ahead that failed (tried again when needed)
            }
        }
        if waiting {
            return RemoteRead::Pending;
        }
        let mut end = pos;
        let mut last_offset = offset;
        while end < seg.size {
            let h = get!(header(end));
            let size = h.size();
            if end + size > seg.size {
                break;
            }
            if end - first + size > budget && !(end == first && min_one) {
                break;
            }
            end += size;
            last_offset = h.last_offset();
        }
        if end == first {
            return RemoteRead::Empty;
        }
        let records = get!(self.bytes(seg, first, end - first, waiter));
        if let Err(why) = check_crcs(&records) {
            return RemoteRead::Failed(
                RemoteError::Corrupt { key: key("log"), reason: format!("from byte {first}: {why}") }.to_string(),
            );
        }
        let mut aborted = Vec::new();
        if read_committed {
            let rel = format!("{}.txnindex", seg.stem);
            let txn = get!(self.object(Kind::Index, rel.clone(), rel, None, Some(waiter.clone())));
            aborted = txn_entries(&txn)
                .into_iter()
                .filter(|a| a.last_offset >= offset && a.first_offset <= last_offset)
                .collect();
        }
        RemoteRead::Ready { records, aborted }
    }
}

/// Bytes read at once by `offset_for_timestamp`'s scan.
const SCAN_WINDOW: u64 = 1 << 20;

impl RemoteReader {
    /// ListOffsets by time in a copied segment: the first record at or after `min_offset`
    /// with a timestamp >= `ts`, as `(offset, timestamp)`; `None` if the segment has none.
    /// Blocking (a control-plane thread, the GIL released): the time index, then the offset
    /// index, then batch headers forward from there in windows of `SCAN_WINDOW` bytes.
    pub fn offset_for_timestamp(
        &self,
        seg: &RemoteSegment,
        ts: i64,
        min_offset: i64,
    ) -> Result<Option<(i64, i64)>, RemoteError> {
        let tindex = self.store.get(&format!("{}.timeindex", seg.stem))?;
        let mut start = seg.base_offset;
        for e in tindex.chunks_exact(12) {
            let t = i64::from_be_bytes(e[..8].try_into().unwrap_or([0; 8]));
            if t >= ts {
                break;
            }
            start = seg.base_offset + i64::from(u32::from_be_bytes([e[8], e[9], e[10], e[11]]));
        }
        let start = start.max(min_offset).max(seg.start_offset);
        let index = self.store.get(&format!("{}.index", seg.stem))?;
        let mut pos = u64::from(index_lookup(&index, seg.base_offset, start));
        let log = format!("{}.log", seg.stem);
        let (mut win_start, mut win) = (0u64, bytes::Bytes::new());
        let mut at = |pos: u64, len: u64| -> Result<bytes::Bytes, RemoteError> {
            if pos < win_start || pos + len > win_start + win.len() as u64 {
                let end = (pos + len.max(SCAN_WINDOW)).min(seg.size);
                win = self.store.get_range(&log, pos..end)?;
                win_start = pos;
            }
            let from = (pos - win_start) as usize;
            Ok(win.slice(from..from + len as usize))
        };
        while pos + HEADER_LEN as u64 <= seg.size {
            let h = BatchHeader::parse(&at(pos, HEADER_LEN as u64)?);
            if h.batch_length < 0 || pos + h.size() > seg.size {
                return Err(RemoteError::Corrupt {
                    key: self.store.key(&log),
                    reason: format!("the batch at byte {pos} has length {}", h.batch_length),
                });
            }
            if h.max_timestamp >= ts && h.last_offset() >= start {
                let bytes = at(pos, h.size())?;
                check_crcs(&bytes).map_err(|why| RemoteError::Corrupt {
                    key: self.store.key(&log),
                    reason: format!("from byte {pos}: {why}"),
                })?;
                let mut found = None;
                crate::batch::for_each_record_timestamp(&bytes, pos, |o, t| {
                    if t >= ts && o >= start {
                        found = Some((o, t));
                        crate::batch::Control::Stop
                    } else {
                        crate::batch::Control::Continue
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
}

fn chunk_key(stem: &str, i: u64) -> String {
    format!("{stem}.log#{i}")
}

/// The position of the last index entry at or below `offset` (0 if none).
pub fn index_lookup(index: &[u8], base_offset: i64, offset: i64) -> u32 {
    let n = index.len() / 8;
    let entry = |i: usize| {
        let e = &index[i * 8..i * 8 + 8];
        let rel = u32::from_be_bytes([e[0], e[1], e[2], e[3]]);
        let pos = u32::from_be_bytes([e[4], e[5], e[6], e[7]]);
        (base_offset + i64::from(rel), pos)
    };
    let (mut lo, mut hi) = (0usize, n);
    while lo < hi {
        let mid = usize::midpoint(lo, hi);
        if entry(mid).0 <= offset {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    if lo == 0 {
        0
    } else {
        entry(lo - 1).1
    }
}

/// Every batch's stored CRC-32C against its bytes.
pub fn check_crcs(bytes: &[u8]) -> Result<(), String> {
    let mut pos = 0usize;
    while pos < bytes.len() {
        if bytes.len() - pos < HEADER_LEN {
            return Err(format!("{} stray bytes at the end", bytes.len() - pos));
        }
        let h = BatchHeader::parse(&bytes[pos..]);
        let size = h.size() as usize;
        if h.batch_length < 0 || size < HEADER_LEN || pos + size > bytes.len() {
            return Err(format!("the batch at offset {} has length {}", h.base_offset, h.batch_length));
        }
        let b = &bytes[pos..pos + size];
        let stored = u32::from_be_bytes([b[CRC_AT], b[CRC_AT + 1], b[CRC_AT + 2], b[CRC_AT + 3]]);
        let computed = crc32c::crc32c(&b[ATTRIBUTES_AT..]);
        if stored != computed {
            return Err(format!(
                "CRC-32C mismatch in the batch at offset {}: stored {stored:#010x}, computed {computed:#010x}",
                h.base_offset
            ));
        }
        pos += size;
    }
    Ok(())
}

/// A `.txnindex` object's entries (a trailing partial entry is ignored).
pub fn txn_entries(b: &[u8]) -> Vec<AbortedTxn> {
    b.chunks_exact(TXN_ENTRY)
        .map(|e| {
            let at = |i: usize| i64::from_be_bytes(e[i..i + 8].try_into().unwrap_or([0; 8]));
            AbortedTxn { producer_id: at(2), first_offset: at(10), last_offset: at(18), last_stable_offset: at(26) }
        })
        .collect()
}

/// Aborted transactions in `.txnindex` form.
pub fn txn_index_bytes(aborted: &[AbortedTxn]) -> Vec<u8> {
    let mut out = Vec::with_capacity(aborted.len() * TXN_ENTRY);
    for a in aborted {
        out.extend_from_slice(&0i16.to_be_bytes());
        for v in [a.producer_id, a.first_offset, a.last_offset, a.last_stable_offset] {
            out.extend_from_slice(&v.to_be_bytes());
        }
    }
    out
}
