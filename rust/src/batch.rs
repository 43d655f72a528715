//! RecordBatch v2 (magic 2): header layout, validation, and the one framing loop.
//!
//! # Byte layout (big-endian, 61-byte header)
//! ```text
//!  0 baseOffset i64 | 8 batchLength i32 | 12 partitionLeaderEpoch i32 | 16 magic i8
//! 17 crc u32 (CRC-32C of bytes 21..end) | 21 attributes i16 | 23 lastOffsetDelta i32
//! 27 baseTimestamp i64 | 35 maxTimestamp i64 | 43 producerId i64 | 51 producerEpoch i16
//! 53 baseSequence i32 | 57 recordsCount i32 | 61 records (compressed as one stream if codec != 0)
//! ```
//! Total size = batchLength + 12. The CRC leaves out baseOffset, batchLength,
//! partitionLeaderEpoch and magic, so the leader rewrites those in place without touching the
//! CRC; changing attributes/maxTimestamp (LogAppendTime) recomputes it.
//!
//! # Records (zigzag varints, see `varint.rs`)
//! `length varint | attributes i8 | timestampDelta varlong | offsetDelta varint |
//!  keyLength varint | key | valueLength varint | value | headersCount varint | headers`
//! with each header `keyLength varint (>= 0) | key | valueLength varint (>= -1) | value`.
//!
//! # Two forms (STYLE 7)
//! [`BatchHeader`] + the untouched bytes ([`RawBatch`]) is what append, index, replicate and
//! fetch handle. Record-level decoding ([`for_each_record`], [`RecordView`]) is only used by
//! validation, ListOffsets-by-timestamp, the log cleaner and `Log::read_records`, never on the
//! fetch path.
//!
//! # Client batches and stored batches
//! A producer's batch is *dense*: recordsCount = lastOffsetDelta + 1 > 0 and the records'
//! offset deltas are exactly 0, 1, 2, ... ([`Check::Full`]). A batch rewritten by the log
//! cleaner keeps its baseOffset, lastOffsetDelta and producer fields but may hold fewer
//! records (offset deltas strictly increasing within `[0, lastOffsetDelta]`, gaps allowed) or
//! none at all ([`Check::Stored`]: recovery, follower appends, record reads). Consecutive
//! batches of a cleaned log may leave offset gaps between them ([`Offsets::Increasing`]).
//!
//! # One framing loop (STYLE 8)
//! [`scan`] is the single batch iterator: leader and follower append validation, recovery,
//! index rebuild, producer-state rebuild and offset translation all call it, with a
//! [`Check`] level (header framing only, or full CRC + records walk) and a visitor returning
//! [`Control`]. It stops at the first torn or invalid batch and reports where the valid
//! prefix ends, which is exactly what recovery truncates to.
//!
//! # Delete horizon (attributes bit 6)
//! When set, baseTimestamp holds the delete horizon (ms) written by the cleaner and record
//! timestamp deltas are relative to it (record timestamp = baseTimestamp + delta still holds).
//! Tombstones of such a batch are dropped by the first cleaning pass at or after the horizon.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::compression::{self, Codec};
use crate::error::{IoContext, LogError, Result, Tp};
use crate::varint::{read_varint, read_varlong, write_varint, write_varlong};

pub const HEADER_LEN: usize = 61;
/// baseOffset + batchLength: the bytes not counted by batchLength.
pub const LOG_OVERHEAD: usize = 12;
pub const MAGIC_V2: i8 = 2;

pub const BASE_OFFSET_AT: usize = 0;
pub const LENGTH_AT: usize = 8;
pub const PARTITION_LEADER_EPOCH_AT: usize = 12;
pub const MAGIC_AT: usize = 16;
pub const CRC_AT: usize = 17;
pub const ATTRIBUTES_AT: usize = 21;
pub const LAST_OFFSET_DELTA_AT: usize = 23;
pub const BASE_TIMESTAMP_AT: usize = 27;
pub const MAX_TIMESTAMP_AT: usize = 35;
pub const PRODUCER_ID_AT: usize = 43;
pub const PRODUCER_EPOCH_AT: usize = 51;
pub const BASE_SEQUENCE_AT: usize = 53;
pub const RECORDS_COUNT_AT: usize = 57;

pub const CODEC_MASK: i16 = 0x07;
pub const TIMESTAMP_TYPE_BIT: i16 = 0x08;
pub const TRANSACTIONAL_BIT: i16 = 0x10;
pub const CONTROL_BIT: i16 = 0x20;
pub const DELETE_HORIZON_BIT: i16 = 0x40;

/// Upper bound on a decompressed records region (zip-bomb guard). Producers cap batches at
/// `batch.size` (16 KiB default) of uncompressed data, so 128 MiB is far above legitimate use.
pub const DECOMPRESS_LIMIT: usize = 128 << 20;

#[inline]
fn be_i16(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([b[at], b[at + 1]])
}
#[inline]
fn be_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
#[inline]
fn be_u32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
#[inline]
fn be_i64(b: &[u8], at: usize) -> i64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    i64::from_be_bytes(a)
}

/// The fixed 61-byte header, decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: i64,
    pub batch_length: i32,
    pub partition_leader_epoch: i32,
    pub magic: i8,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub records_count: i32,
}

impl BatchHeader {
    /// Decodes the header from the first 61 bytes of `b` (panics if shorter: callers check).
    pub fn parse(b: &[u8]) -> BatchHeader {
        assert!(b.len() >= HEADER_LEN, "BatchHeader::parse needs {HEADER_LEN} bytes, got {}", b.len());
        BatchHeader {
            base_offset: be_i64(b, BASE_OFFSET_AT),
            batch_length: be_i32(b, LENGTH_AT),
            partition_leader_epoch: be_i32(b, PARTITION_LEADER_EPOCH_AT),
            magic: b[MAGIC_AT] as i8,
            crc: be_u32(b, CRC_AT),
            attributes: be_i16(b, ATTRIBUTES_AT),
            last_offset_delta: be_i32(b, LAST_OFFSET_DELTA_AT),
            base_timestamp: be_i64(b, BASE_TIMESTAMP_AT),
            max_timestamp: be_i64(b, MAX_TIMESTAMP_AT),
            producer_id: be_i64(b, PRODUCER_ID_AT),
            producer_epoch: be_i16(b, PRODUCER_EPOCH_AT),
            base_sequence: be_i32(b, BASE_SEQUENCE_AT),
            records_count: be_i32(b, RECORDS_COUNT_AT),
        }
    }

    /// Total bytes of the batch on disk (batchLength + 12). Only meaningful after framing checks.
    pub fn size(&self) -> u64 {
        u64::try_from(self.batch_length).map_or(0, |l| l + LOG_OVERHEAD as u64)
    }

    pub fn last_offset(&self) -> i64 {
        self.base_offset + i64::from(self.last_offset_delta)
    }

    pub fn next_offset(&self) -> i64 {
        self.last_offset() + 1
    }

    pub fn codec(&self) -> Option<Codec> {
        Codec::from_attributes(self.attributes)
    }

    pub fn is_log_append_time(&self) -> bool {
        self.attributes & TIMESTAMP_TYPE_BIT != 0
    }

    pub fn is_transactional(&self) -> bool {
        self.attributes & TRANSACTIONAL_BIT != 0
    }

    pub fn is_control(&self) -> bool {
        self.attributes & CONTROL_BIT != 0
    }

    pub fn has_producer_id(&self) -> bool {
        self.producer_id >= 0
    }

    /// The delete horizon (attributes bit 6): `Some(baseTimestamp)` when set.
    pub fn delete_horizon(&self) -> Option<i64> {
        (self.attributes & DELETE_HORIZON_BIT != 0).then_some(self.base_timestamp)
    }

    /// Encodes the 61-byte header followed by `records_region` (already compressed if the
    /// codec says so). batchLength and the CRC are computed; `self.batch_length`, `self.magic`
    /// and `self.crc` are ignored.
    pub fn assemble(&self, records_region: &[u8]) -> Vec<u8> {
        let total = HEADER_LEN + records_region.len();
        let mut out = Vec::with_capacity(total);
        out.extend_from_slice(&self.base_offset.to_be_bytes());
        out.extend_from_slice(&i32::try_from(total - LOG_OVERHEAD).expect("batch fits i32").to_be_bytes());
        out.extend_from_slice(&self.partition_leader_epoch.to_be_bytes());
        out.push(MAGIC_V2 as u8);
        out.extend_from_slice(&[0; 4]); // crc, filled below
        out.extend_from_slice(&self.attributes.to_be_bytes());
        out.extend_from_slice(&self.last_offset_delta.to_be_bytes());
        out.extend_from_slice(&self.base_timestamp.to_be_bytes());
        out.extend_from_slice(&self.max_timestamp.to_be_bytes());
        out.extend_from_slice(&self.producer_id.to_be_bytes());
        out.extend_from_slice(&self.producer_epoch.to_be_bytes());
        out.extend_from_slice(&self.base_sequence.to_be_bytes());
        out.extend_from_slice(&self.records_count.to_be_bytes());
        out.extend_from_slice(records_region);
        let crc = crc32c::crc32c(&out[ATTRIBUTES_AT..]);
        out[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
        out
    }

    /// Sequence of the last record: baseSequence + lastOffsetDelta, wrapping at i32::MAX to 0.
    pub fn last_sequence(&self) -> i32 {
        if self.base_sequence < 0 {
            return -1;
        }
        add_sequence(self.base_sequence, self.last_offset_delta)
    }
}

/// Control record types (the key of a control batch's record: `version i16 (0) | type i16`).
pub const CONTROL_ABORT: i16 = 0;
pub const CONTROL_COMMIT: i16 = 1;

/// A transaction's end marker: the single record of a control batch, key
/// `version i16 (0) | type i16 (0 ABORT, 1 COMMIT)`, value `version i16 (0) |
/// coordinator_epoch i32`. Written only by the transaction coordinator (WriteTxnMarkers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndTxnMarker {
    pub commit: bool,
    pub coordinator_epoch: i32,
}

impl EndTxnMarker {
    /// The marker of a control batch (`bytes` from the batch start through at least its first
    /// record; control batches are never compressed). `None` when the bytes are short, the
    /// batch is not a control batch, or its record is not an ABORT/COMMIT marker (Kafka's
    /// other control types are KRaft's and do not end transactions).
    pub fn parse(bytes: &[u8]) -> Option<EndTxnMarker> {
        if bytes.len() < HEADER_LEN {
            return None;
        }
        let h = BatchHeader::parse(bytes);
        if !h.is_control() || h.codec() != Some(Codec::None) {
            return None;
        }
        let mut p = HEADER_LEN;
        let (_len, n) = read_varint(bytes.get(p..)?)?;
        p += n + 1; // record attributes
        let (_ts, n) = read_varlong(bytes.get(p..)?)?;
        p += n;
        let (_od, n) = read_varint(bytes.get(p..)?)?;
        p += n;
        let (key_len, n) = read_varint(bytes.get(p..)?)?;
        p += n;
        if key_len < 4 {
            return None;
        }
        let key = bytes.get(p..p + usize::try_from(key_len).ok()?)?;
        let kind = be_i16(key, 2);
        p += usize::try_from(key_len).ok()?;
        let (value_len, n) = read_varint(bytes.get(p..)?)?;
        p += n;
        let coordinator_epoch = if value_len >= 6 { be_i32(bytes.get(p..p + 6)?, 2) } else { -1 };
        match kind {
            CONTROL_ABORT => Some(EndTxnMarker { commit: false, coordinator_epoch }),
            CONTROL_COMMIT => Some(EndTxnMarker { commit: true, coordinator_epoch }),
            _ => None,
        }
    }

    /// The control batch carrying this marker for `producer_id`/`epoch` (offsets and the
    /// leader epoch are assigned by the log).
    pub fn to_batch(self, producer_id: i64, epoch: i16, timestamp: i64) -> Vec<u8> {
        let mut key = Vec::with_capacity(4);
        key.extend_from_slice(&0i16.to_be_bytes());
        key.extend_from_slice(&(if self.commit { CONTROL_COMMIT } else { CONTROL_ABORT }).to_be_bytes());
        let mut value = Vec::with_capacity(6);
        value.extend_from_slice(&0i16.to_be_bytes());
        value.extend_from_slice(&self.coordinator_epoch.to_be_bytes());
        let mut records = Vec::with_capacity(24);
        let mut body = vec![0u8]; // record attributes
        write_varlong(&mut body, 0);
        write_varint(&mut body, 0);
        {
            write_varint(&mut body, key.len() as i32);
            body.extend_from_slice(&key);
            write_varint(&mut body, value.len() as i32);
            body.extend_from_slice(&value);
            write_varint(&mut body, 0); // headers
            write_varint(&mut records, body.len() as i32);
        }
        records.extend_from_slice(&body);
        let header = BatchHeader {
            base_offset: 0,
            batch_length: 0,
            partition_leader_epoch: -1,
            magic: MAGIC_V2,
            crc: 0,
            attributes: TRANSACTIONAL_BIT | CONTROL_BIT,
            last_offset_delta: 0,
            base_timestamp: timestamp,
            max_timestamp: timestamp,
            producer_id,
            producer_epoch: epoch,
            base_sequence: -1,
            records_count: 1,
        };
        header.assemble(&records)
    }
}

/// `seq + delta` in sequence space: wraps from i32::MAX to 0 as Kafka's producers do.
pub fn add_sequence(seq: i32, delta: i32) -> i32 {
    let s = i64::from(seq) + i64::from(delta);
    (s % (i64::from(i32::MAX) + 1)) as i32
}

/// A batch in wire form: its decoded header plus the untouched bytes (header included).
#[derive(Debug, Clone, Copy)]
pub struct RawBatch<'a> {
    pub header: BatchHeader,
    pub bytes: &'a [u8],
}

/// One record, borrowed from a (decompressed) records region.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordView<'a> {
    pub attributes: i8,
    pub timestamp_delta: i64,
    pub offset_delta: i32,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    pub headers_count: i32,
    /// The raw header entries (for callers that want them; validated by the walk).
    pub headers: &'a [u8],
}

/// What the full validation learned from the records (beyond the header).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordsSummary {
    /// Largest record timestamp (baseTimestamp + timestampDelta), or -1 with no records.
    pub max_record_timestamp: i64,
    /// Offset delta of the first record carrying `max_record_timestamp`.
    pub offset_delta_of_max: i32,
}

/// How much of each batch `scan` checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// Header only: batchLength sane, magic == 2, batch fits in the data. Reads 61 bytes per
    /// batch (producer-state rebuild, offset translation, index tail scans).
    Framing,
    /// Framing + CRC-32C + codec + a dense client batch (recordsCount = lastOffsetDelta + 1
    /// > 0) + a walk of every record (after decompression). Leader append validation.
    Full,
    /// As `Full`, but accepting what the log cleaner writes: fewer records than
    /// lastOffsetDelta + 1 (increasing offset deltas) and empty batches. Recovery, index
    /// rebuild, follower appends.
    Stored,
}

/// What `scan` requires of the batches' base offsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offsets {
    /// No check.
    Any,
    /// The first batch starts at this offset and each next one right after its predecessor.
    Contiguous(i64),
    /// The first batch starts at or after this offset and each next one at or after its
    /// predecessor's next offset (a compacted log has gaps).
    Increasing(i64),
}

impl From<Option<i64>> for Offsets {
    fn from(o: Option<i64>) -> Offsets {
        o.map_or(Offsets::Any, Offsets::Contiguous)
    }
}

/// What the visitor tells the loop after each batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    Continue,
    Stop,
}

/// A batch handed to the visitor.
#[derive(Debug, Clone, Copy)]
pub struct Visited<'a> {
    /// Byte position of the batch in the source.
    pub position: u64,
    pub header: BatchHeader,
    /// The whole batch; only present under `Check::Full` (header-only scans do not read it).
    pub bytes: Option<&'a [u8]>,
    /// Only present under `Check::Full`.
    pub records: Option<RecordsSummary>,
    /// The records region, decompressed if the batch is (the walk's own copy, so a visitor
    /// that reads the records again does not decompress them again); with `bytes`.
    pub records_region: Option<&'a [u8]>,
}

/// Why and where a scan ended.
#[derive(Debug)]
pub struct ScanEnd {
    /// End of the last batch accepted by the loop (and the visitor): the valid prefix.
    pub valid_end: u64,
    /// Batches visited.
    pub batches: u64,
    /// `Some` when the scan stopped at an invalid batch rather than at the end of the data
    /// or at the visitor's request.
    pub error: Option<LogError>,
    /// True when the invalid "batch" was simply cut short by the end of the data (a torn
    /// write, or a fetch response that ends mid-batch).
    pub torn: bool,
}

/// Random-access bytes the framing loop reads from: a slice (request buffer) or a file.
pub trait BatchSource {
    fn len(&self) -> u64;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Exactly `len` bytes at `pos`; callers guarantee `pos + len <= self.len()`.
    fn read_at(&mut self, pos: u64, len: usize) -> Result<&[u8]>;
}

pub struct SliceSource<'a>(pub &'a [u8]);

impl BatchSource for SliceSource<'_> {
    fn len(&self) -> u64 {
        self.0.len() as u64
    }
    fn read_at(&mut self, pos: u64, len: usize) -> Result<&[u8]> {
        let p = pos as usize;
        Ok(&self.0[p..p + len])
    }
}

/// Reads a file through a sliding window so header-only scans cost one `pread` per window,
/// not per batch.
pub struct FileSource<'f> {
    file: &'f File,
    path: &'f Path,
    len: u64,
    window: Vec<u8>,
    window_pos: u64,
}

const WINDOW: usize = 256 * 1024;

impl<'f> FileSource<'f> {
    /// `len` is the number of valid bytes to consider (the segment's logical size).
    pub fn new(file: &'f File, path: &'f Path, len: u64) -> Self {
        FileSource { file, path, len, window: Vec::new(), window_pos: 0 }
    }
}

impl BatchSource for FileSource<'_> {
    fn len(&self) -> u64 {
        self.len
    }
    fn read_at(&mut self, pos: u64, len: usize) -> Result<&[u8]> {
        let in_window = pos >= self.window_pos && pos + len as u64 <= self.window_pos + self.window.len() as u64;
        if !in_window {
            let want = (len.max(WINDOW) as u64).min(self.len - pos) as usize;
            self.window.resize(want, 0);
            self.file.read_exact_at(&mut self.window, pos).ctx(self.path)?;
            self.window_pos = pos;
        }
        let at = (pos - self.window_pos) as usize;
        Ok(&self.window[at..at + len])
    }
}

/// Checks the framing fields of the header at `position` and returns the batch size.
/// `available` is how many bytes the source has from `position` on.
fn check_framing(h: &BatchHeader, position: u64, available: u64) -> Result<u64, (LogError, bool)> {
    if h.batch_length < (HEADER_LEN - LOG_OVERHEAD) as i32 {
        return Err((
            LogError::corrupt(
                position,
                format!("batchLength {} is below the minimum {}", h.batch_length, HEADER_LEN - LOG_OVERHEAD),
            ),
            false,
        ));
    }
    if h.magic != MAGIC_V2 {
        return Err((LogError::corrupt(position, format!("magic byte is {}, expected 2", h.magic)), false));
    }
    let size = h.size();
    if size > available {
        return Err((
            LogError::corrupt(position, format!("batch of {size} bytes is cut short: only {available} bytes remain")),
            true,
        ));
    }
    Ok(size)
}

/// Full validation of one complete batch (`bytes` is exactly the batch).
pub fn validate_batch(bytes: &[u8], position: u64) -> Result<(BatchHeader, RecordsSummary)> {
    let h = whole_batch_header(bytes, position)?;
    validate_body(&h, bytes, position, Check::Full, |_| {}).map(|(h, summary, _)| (h, summary))
}

/// Calls `each(offset, timestamp, record)` for every record of a complete stored batch,
/// checked as `Check::Stored` checks (framing, CRC-32C, codec, every record's fields) in the
/// same walk: the records region is decompressed once, where `validate_batch` followed by
/// `for_each_record` decompressed it twice (what the table writer and the columnar decoder
/// read from a log, cleaned batches included). Under LogAppendTime every record carries the
/// batch maxTimestamp.
pub fn for_each_checked_record(
    bytes: &[u8],
    position: u64,
    mut each: impl FnMut(i64, i64, &RecordView<'_>) -> Control,
) -> Result<BatchHeader> {
    let h = whole_batch_header(bytes, position)?;
    validate_body(&h, bytes, position, Check::Stored, visit_until_stop(&h, &mut each))?;
    Ok(h)
}

/// A record walk's visitor that calls `each(offset, timestamp, record)` until it answers
/// Stop (the walk itself goes on, checking every record).
fn visit_until_stop<'a>(
    h: &'a BatchHeader,
    each: &'a mut impl FnMut(i64, i64, &RecordView<'_>) -> Control,
) -> impl FnMut(&RecordView<'_>) + 'a {
    let mut stop = false;
    move |r| {
        if stop {
            return;
        }
        let ts =
            if h.is_log_append_time() { h.max_timestamp } else { h.base_timestamp.wrapping_add(r.timestamp_delta) };
        if each(h.base_offset + i64::from(r.offset_delta), ts, r) == Control::Stop {
            stop = true;
        }
    }
}

/// The header of `bytes`, which must be exactly one batch by its framing.
fn whole_batch_header(bytes: &[u8], position: u64) -> Result<BatchHeader> {
    if bytes.len() < HEADER_LEN {
        return Err(LogError::corrupt(position, format!("{} bytes is shorter than a batch header", bytes.len())));
    }
    let h = BatchHeader::parse(bytes);
    let size = check_framing(&h, position, bytes.len() as u64).map_err(|(e, _)| e)?;
    if size != bytes.len() as u64 {
        return Err(LogError::corrupt(position, format!("batchLength says {size} bytes, buffer has {}", bytes.len())));
    }
    Ok(h)
}

/// The checks of `check` past the framing, with `each` called for every record as the walk
/// passes it; also returns the decompressed records region of a compressed batch.
fn validate_body(
    h: &BatchHeader,
    bytes: &[u8],
    position: u64,
    check: Check,
    mut each: impl FnMut(&RecordView<'_>),
) -> Result<(BatchHeader, RecordsSummary, Option<Vec<u8>>)> {
    let computed = crc32c::crc32c(&bytes[ATTRIBUTES_AT..]);
    if computed != h.crc {
        return Err(LogError::CrcMismatch { tp: Tp::default(), position, expected: h.crc, computed });
    }
    let Some(codec) = h.codec() else {
        return Err(LogError::invalid(position, format!("unknown compression codec id {}", h.attributes & CODEC_MASK)));
    };
    if check == Check::Stored {
        if h.last_offset_delta < 0
            || h.records_count < 0
            || i64::from(h.records_count) > i64::from(h.last_offset_delta) + 1
        {
            return Err(LogError::invalid(
                position,
                format!(
                    "recordsCount {} does not fit lastOffsetDelta {} (at most lastOffsetDelta + 1 records)",
                    h.records_count, h.last_offset_delta
                ),
            ));
        }
    } else if h.records_count <= 0 {
        return Err(LogError::invalid(
            position,
            format!("recordsCount is {}; a batch must hold records", h.records_count),
        ));
    } else if i64::from(h.last_offset_delta) != i64::from(h.records_count) - 1 {
        return Err(LogError::invalid(
            position,
            format!(
                "lastOffsetDelta {} does not match recordsCount {} (expected {})",
                h.last_offset_delta,
                h.records_count,
                i64::from(h.records_count) - 1
            ),
        ));
    }
    let region = &bytes[HEADER_LEN..];
    if codec == Codec::None {
        return Ok((*h, walk_records(region, h, position, |r| each(r))?, None));
    }
    let plain = compression::decompress(codec, region, DECOMPRESS_LIMIT).map_err(|e| {
        LogError::corrupt(position, format!("{} records region does not decompress: {e}", codec.name()))
    })?;
    let summary = walk_records(&plain, h, position, |r| each(r))?;
    Ok((*h, summary, Some(plain)))
}

/// Walks the (uncompressed) records region: every length varint, every field, offset deltas
/// strictly increasing within `[0, lastOffsetDelta]` (for a dense batch, whose count was
/// checked against lastOffsetDelta, that means exactly 0..n-1), the count matching, no
/// trailing bytes. No allocation.
pub fn walk_records<'r>(
    region: &'r [u8],
    h: &BatchHeader,
    position: u64,
    mut each: impl FnMut(&RecordView<'r>),
) -> Result<RecordsSummary> {
    let mut p = 0usize;
    let mut max_ts = -1i64;
    let mut delta_of_max = 0i32;
    let mut prev_delta = -1i32;
    for i in 0..h.records_count {
        let (len, n) = read_varint(&region[p..])
            .ok_or_else(|| LogError::corrupt(position, format!("record {i}: truncated or over-long length varint")))?;
        p += n;
        let len = usize::try_from(len)
            .map_err(|_| LogError::corrupt(position, format!("record {i}: negative length {len}")))?;
        if len > region.len() - p {
            return Err(LogError::corrupt(
                position,
                format!("record {i}: length {len} overruns the records region ({} bytes left)", region.len() - p),
            ));
        }
        let rec = parse_record(&region[p..p + len])
            .map_err(|why| LogError::corrupt(position, format!("record {i} (length {len}): {why}")))?;
        if rec.offset_delta <= prev_delta || rec.offset_delta > h.last_offset_delta {
            return Err(LogError::invalid(
                position,
                format!(
                    "record {i} has offsetDelta {}, expected above {prev_delta} and at most lastOffsetDelta {}",
                    rec.offset_delta, h.last_offset_delta
                ),
            ));
        }
        prev_delta = rec.offset_delta;
        let ts = h.base_timestamp.wrapping_add(rec.timestamp_delta);
        if i == 0 || ts > max_ts {
            max_ts = ts;
            delta_of_max = rec.offset_delta;
        }
        each(&rec);
        p += len;
    }
    if p != region.len() {
        return Err(LogError::corrupt(
            position,
            format!("{} trailing bytes after {} records", region.len() - p, h.records_count),
        ));
    }
    Ok(RecordsSummary { max_record_timestamp: max_ts, offset_delta_of_max: delta_of_max })
}

fn parse_record(r: &[u8]) -> Result<RecordView<'_>, String> {
    fn varint(r: &[u8], p: &mut usize, what: &str) -> Result<i32, String> {
        let (v, n) = read_varint(&r[*p..]).ok_or_else(|| format!("truncated {what} varint"))?;
        *p += n;
        Ok(v)
    }
    fn bytes<'r>(r: &'r [u8], p: &mut usize, len: i32, what: &str, nullable: bool) -> Result<Option<&'r [u8]>, String> {
        if len == -1 && nullable {
            return Ok(None);
        }
        let n = usize::try_from(len).map_err(|_| format!("{what} length {len} is invalid"))?;
        if n > r.len() - *p {
            return Err(format!("{what} length {len} overruns the record ({} bytes left)", r.len() - *p));
        }
        let s = &r[*p..*p + n];
        *p += n;
        Ok(Some(s))
    }
    let mut p = 0usize;
    let Some(&attr) = r.first() else { return Err("empty record".into()) };
    p += 1;
    let (timestamp_delta, n) = read_varlong(&r[p..]).ok_or("truncated timestampDelta varlong")?;
    p += n;
    let offset_delta = varint(r, &mut p, "offsetDelta")?;
    let kl = varint(r, &mut p, "keyLength")?;
    let key = bytes(r, &mut p, kl, "key", true)?;
    let vl = varint(r, &mut p, "valueLength")?;
    let value = bytes(r, &mut p, vl, "value", true)?;
    let headers_count = varint(r, &mut p, "headersCount")?;
    if headers_count < 0 {
        return Err(format!("headersCount {headers_count} is negative"));
    }
    let headers_start = p;
    for j in 0..headers_count {
        // Static labels: the hot path allocates nothing; the index is added only on error.
        let mut header = || -> Result<(), String> {
            let hk = varint(r, &mut p, "header key length")?;
            bytes(r, &mut p, hk, "header key", false)?;
            let hv = varint(r, &mut p, "header value length")?;
            bytes(r, &mut p, hv, "header value", true)?;
            Ok(())
        };
        header().map_err(|e| format!("header {j}: {e}"))?;
    }
    if p != r.len() {
        return Err(format!("{} bytes left over after the last field", r.len() - p));
    }
    Ok(RecordView {
        attributes: attr as i8,
        timestamp_delta,
        offset_delta,
        key,
        value,
        headers_count,
        headers: &r[headers_start..],
    })
}

/// The records region of a complete batch, decompressed if needed.
pub fn records_region(bytes: &[u8], position: u64) -> Result<std::borrow::Cow<'_, [u8]>> {
    let h = BatchHeader::parse(bytes);
    let codec = h.codec().ok_or_else(|| LogError::invalid(position, "unknown compression codec"))?;
    if codec == Codec::None {
        Ok(std::borrow::Cow::Borrowed(&bytes[HEADER_LEN..]))
    } else {
        compression::decompress(codec, &bytes[HEADER_LEN..], DECOMPRESS_LIMIT).map(std::borrow::Cow::Owned).map_err(
            |e| LogError::corrupt(position, format!("{} records region does not decompress: {e}", codec.name())),
        )
    }
}

/// A copy of the complete batch `bytes` whose records region is in `target` at `level`
/// (a topic's `compression.type`, Kafka's recompression on the leader): every header field is
/// kept but the codec bits, batchLength and the CRC; the records themselves are unchanged.
pub fn recompress(bytes: &[u8], position: u64, target: Codec, level: i32) -> Result<Vec<u8>> {
    let h = BatchHeader::parse(bytes);
    let plain = records_region(bytes, position)?;
    let body = compression::compress_level(target, &plain, Some(level));
    let header = BatchHeader { attributes: (h.attributes & !CODEC_MASK) | target.id(), ..h };
    Ok(header.assemble(&body))
}

/// Calls `each(offset, timestamp, record)` for every record of a complete batch
/// (decompressing if needed). Under LogAppendTime every record carries the batch maxTimestamp.
pub fn for_each_record(
    bytes: &[u8],
    position: u64,
    mut each: impl FnMut(i64, i64, &RecordView<'_>) -> Control,
) -> Result<()> {
    let h = BatchHeader::parse(bytes);
    let region = records_region(bytes, position)?;
    walk_records(&region, &h, position, visit_until_stop(&h, &mut each))?;
    Ok(())
}

/// Calls `each(offset, timestamp)` for every record of a complete batch; see [`for_each_record`].
pub fn for_each_record_timestamp(bytes: &[u8], position: u64, mut each: impl FnMut(i64, i64) -> Control) -> Result<()> {
    for_each_record(bytes, position, |o, t, _| each(o, t))
}

/// Appends one record in wire form (the inverse of the record walk), with `timestamp_delta`
/// replacing the view's (a rewritten batch may have a new baseTimestamp). Headers are copied
/// as the raw bytes the walk validated.
pub fn encode_record(out: &mut Vec<u8>, r: &RecordView<'_>, timestamp_delta: i64) {
    fn put(out: &mut Vec<u8>, b: Option<&[u8]>) {
        match b {
            None => write_varint(out, -1),
            Some(b) => {
                write_varint(out, i32::try_from(b.len()).expect("field fits i32"));
                out.extend_from_slice(b);
            }
        }
    }
    let mut body =
        Vec::with_capacity(16 + r.key.map_or(0, <[u8]>::len) + r.value.map_or(0, <[u8]>::len) + r.headers.len());
    body.push(r.attributes as u8);
    write_varlong(&mut body, timestamp_delta);
    write_varint(&mut body, r.offset_delta);
    put(&mut body, r.key);
    put(&mut body, r.value);
    write_varint(&mut body, r.headers_count);
    body.extend_from_slice(r.headers);
    write_varint(out, i32::try_from(body.len()).expect("record fits i32"));
    out.extend_from_slice(&body);
}

/// The framing loop. Reads batches from `start` until the end of `src`, an invalid batch,
/// or the visitor's `Stop`. `offsets` says what the base offsets must do ([`Offsets`];
/// `Some(o)` means contiguous from `o`, `None` no check).
///
/// Batch errors (torn, corrupt, CRC, invalid) end the scan and are returned in
/// [`ScanEnd::error`]; I/O errors and errors returned by the visitor propagate as `Err`.
pub fn scan<S: BatchSource>(
    src: &mut S,
    start: u64,
    check: Check,
    offsets: impl Into<Offsets>,
    visit: impl FnMut(&Visited<'_>) -> Result<Control>,
) -> Result<ScanEnd> {
    scan_records(src, start, check, offsets, |_, _| {}, visit)
}

/// [`scan`], with `each_record(header, record)` called for every record of a batch as
/// `Check::Full` or `Check::Stored` walks it (decompressed once), before the batch is visited.
pub fn scan_records<S: BatchSource>(
    src: &mut S,
    start: u64,
    check: Check,
    offsets: impl Into<Offsets>,
    mut each_record: impl FnMut(&BatchHeader, &RecordView<'_>),
    mut visit: impl FnMut(&Visited<'_>) -> Result<Control>,
) -> Result<ScanEnd> {
    let mut pos = start;
    let mut batches = 0u64;
    let mut offsets = offsets.into();
    let end = src.len();
    let stop = |pos, batches, e, torn| Ok(ScanEnd { valid_end: pos, batches, error: Some(e), torn });
    while pos < end {
        let available = end - pos;
        if available < HEADER_LEN as u64 {
            let e = LogError::corrupt(pos, format!("{available} bytes left, less than a batch header"));
            return stop(pos, batches, e, true);
        }
        let header = BatchHeader::parse(src.read_at(pos, HEADER_LEN)?);
        let size = match check_framing(&header, pos, available) {
            Ok(s) => s,
            Err((e, torn)) => return stop(pos, batches, e, torn),
        };
        match offsets {
            Offsets::Contiguous(exp) if header.base_offset != exp => {
                let e = LogError::corrupt(
                    pos,
                    format!("batch base offset {} where offset {exp} was expected", header.base_offset),
                );
                return stop(pos, batches, e, false);
            }
            Offsets::Increasing(exp) if header.base_offset < exp => {
                let e = LogError::corrupt(
                    pos,
                    format!(
                        "batch base offset {} goes backwards: offset {exp} or above was expected",
                        header.base_offset
                    ),
                );
                return stop(pos, batches, e, false);
            }
            _ => {}
        }
        let plain: Option<Vec<u8>>;
        let visited = match check {
            Check::Framing => {
                if header.last_offset_delta < 0 {
                    let e = LogError::corrupt(pos, format!("negative lastOffsetDelta {}", header.last_offset_delta));
                    return stop(pos, batches, e, false);
                }
                Visited { position: pos, header, bytes: None, records: None, records_region: None }
            }
            Check::Full | Check::Stored => {
                let bytes = src.read_at(pos, size as usize)?;
                match validate_body(&header, bytes, pos, check, |r| each_record(&header, r)) {
                    Ok((_, summary, decompressed)) => {
                        plain = decompressed;
                        let region = plain.as_deref().unwrap_or(&bytes[HEADER_LEN..]);
                        Visited {
                            position: pos,
                            header,
                            bytes: Some(bytes),
                            records: Some(summary),
                            records_region: Some(region),
                        }
                    }
                    Err(e) => return stop(pos, batches, e, false),
                }
            }
        };
        let control = visit(&visited)?;
        batches += 1;
        pos += size;
        offsets = match offsets {
            Offsets::Any => Offsets::Any,
            Offsets::Contiguous(_) => Offsets::Contiguous(header.next_offset()),
            Offsets::Increasing(_) => Offsets::Increasing(header.next_offset()),
        };
        if control == Control::Stop {
            break;
        }
    }
    Ok(ScanEnd { valid_end: pos, batches, error: None, torn: false })
}

/// Rewrites baseOffset in place (not covered by the CRC).
pub fn set_base_offset(batch: &mut [u8], offset: i64) {
    batch[BASE_OFFSET_AT..BASE_OFFSET_AT + 8].copy_from_slice(&offset.to_be_bytes());
}

/// Rewrites partitionLeaderEpoch in place (not covered by the CRC).
pub fn set_partition_leader_epoch(batch: &mut [u8], epoch: i32) {
    batch[PARTITION_LEADER_EPOCH_AT..PARTITION_LEADER_EPOCH_AT + 4].copy_from_slice(&epoch.to_be_bytes());
}

/// Applies LogAppendTime: maxTimestamp = `now_ms`, timestamp-type bit set, CRC recomputed.
pub fn set_log_append_time(batch: &mut [u8], now_ms: i64) {
    batch[MAX_TIMESTAMP_AT..MAX_TIMESTAMP_AT + 8].copy_from_slice(&now_ms.to_be_bytes());
    let attrs = be_i16(batch, ATTRIBUTES_AT) | TIMESTAMP_TYPE_BIT;
    batch[ATTRIBUTES_AT..ATTRIBUTES_AT + 2].copy_from_slice(&attrs.to_be_bytes());
    let crc = crc32c::crc32c(&batch[ATTRIBUTES_AT..]);
    batch[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builder::{BatchBuilder, Rec};

    fn batch(n: usize) -> Vec<u8> {
        let mut b = BatchBuilder::new().base_timestamp(1000);
        for i in 0..n {
            b = b.record(Rec::kv(format!("k{i}").as_bytes(), format!("value-{i}").as_bytes()).ts_delta(i as i64));
        }
        b.build()
    }

    fn expect_err(bytes: &[u8]) -> LogError {
        validate_batch(bytes, 0).expect_err("batch should be rejected")
    }

    fn recrc(b: &mut [u8]) {
        let crc = crc32c::crc32c(&b[ATTRIBUTES_AT..]);
        b[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
    }

    #[test]
    fn valid_batch_accepted_with_summary() {
        let b = batch(3);
        let (h, s) = validate_batch(&b, 0).unwrap();
        assert_eq!(h.records_count, 3);
        assert_eq!(h.last_offset_delta, 2);
        assert_eq!(h.size(), b.len() as u64);
        assert_eq!(s.max_record_timestamp, 1002);
        assert_eq!(s.offset_delta_of_max, 2);
    }

    #[test]
    fn every_codec_validates() {
        for codec in Codec::ALL {
            let b = BatchBuilder::new().codec(codec).record(Rec::kv(b"a", b"b")).record(Rec::value(b"c")).build();
            let (h, _) = validate_batch(&b, 0).unwrap_or_else(|e| panic!("{}: {e}", codec.name()));
            assert_eq!(h.codec(), Some(codec));
        }
    }

    #[test]
    fn bad_crc_rejected() {
        let mut b = batch(2);
        let last = b.len() - 1;
        b[last] ^= 0xFF;
        assert!(matches!(expect_err(&b), LogError::CrcMismatch { .. }));
    }

    #[test]
    fn bad_magic_rejected() {
        let mut b = batch(1);
        b[MAGIC_AT] = 1;
        assert!(matches!(expect_err(&b), LogError::CorruptBatch { reason, .. } if reason.contains("magic")));
    }

    #[test]
    fn short_batch_length_rejected() {
        let mut b = batch(1);
        b[LENGTH_AT..LENGTH_AT + 4].copy_from_slice(&10i32.to_be_bytes());
        assert!(matches!(expect_err(&b), LogError::CorruptBatch { reason, .. } if reason.contains("minimum")));
    }

    #[test]
    fn batch_length_beyond_buffer_is_torn() {
        let b = batch(2);
        let mut src = SliceSource(&b[..b.len() - 1]);
        let end = scan(&mut src, 0, Check::Full, None, |_| Ok(Control::Continue)).unwrap();
        assert!(end.torn);
        assert_eq!(end.valid_end, 0);
    }

    #[test]
    fn last_offset_delta_mismatch_rejected() {
        let mut b = batch(3);
        b[LAST_OFFSET_DELTA_AT..LAST_OFFSET_DELTA_AT + 4].copy_from_slice(&5i32.to_be_bytes());
        recrc(&mut b);
        assert!(matches!(expect_err(&b), LogError::InvalidRecord { reason, .. } if reason.contains("lastOffsetDelta")));
    }

    #[test]
    fn records_count_mismatch_rejected() {
        let mut b = batch(3);
        b[RECORDS_COUNT_AT..RECORDS_COUNT_AT + 4].copy_from_slice(&2i32.to_be_bytes());
        b[LAST_OFFSET_DELTA_AT..LAST_OFFSET_DELTA_AT + 4].copy_from_slice(&1i32.to_be_bytes());
        recrc(&mut b);
        assert!(matches!(expect_err(&b), LogError::CorruptBatch { reason, .. } if reason.contains("trailing")));
    }

    #[test]
    fn empty_batch_rejected() {
        let mut b = batch(1);
        b[RECORDS_COUNT_AT..RECORDS_COUNT_AT + 4].copy_from_slice(&0i32.to_be_bytes());
        recrc(&mut b);
        assert!(matches!(expect_err(&b), LogError::InvalidRecord { .. }));
    }

    #[test]
    fn out_of_order_offset_delta_rejected() {
        let b = BatchBuilder::new().record(Rec::value(b"a")).record(Rec::value(b"b").offset_delta(5)).build();
        assert!(matches!(expect_err(&b), LogError::InvalidRecord { reason, .. } if reason.contains("offsetDelta")));
    }

    #[test]
    fn record_length_overrun_rejected() {
        let mut b = batch(1);
        // First record's length varint is the first byte of the records region.
        b[HEADER_LEN] = 0x7E; // zigzag 63: far beyond the record
        recrc(&mut b);
        assert!(matches!(expect_err(&b), LogError::CorruptBatch { reason, .. } if reason.contains("overruns")));
    }

    #[test]
    fn negative_key_length_rejected() {
        let b = BatchBuilder::new().record(Rec::value(b"a").raw_key_len(-5)).build_unchecked(1);
        assert!(matches!(expect_err(&b), LogError::CorruptBatch { reason, .. } if reason.contains("key length")));
    }

    #[test]
    fn unknown_codec_rejected() {
        let mut b = batch(1);
        b[ATTRIBUTES_AT + 1] |= 5;
        recrc(&mut b);
        assert!(matches!(expect_err(&b), LogError::InvalidRecord { reason, .. } if reason.contains("codec")));
    }

    #[test]
    fn undecompressable_records_rejected() {
        let mut b = batch(2);
        b[ATTRIBUTES_AT + 1] |= 1; // claims gzip, holds plain records
        recrc(&mut b);
        assert!(matches!(expect_err(&b), LogError::CorruptBatch { reason, .. } if reason.contains("decompress")));
    }

    #[test]
    fn scan_checks_contiguity() {
        let mut data = batch(2);
        let mut second = batch(2);
        set_base_offset(&mut second, 5);
        data.extend_from_slice(&second);
        let end = scan(&mut SliceSource(&data), 0, Check::Full, Some(0), |_| Ok(Control::Continue)).unwrap();
        assert_eq!(end.batches, 1);
        assert!(!end.torn);
        assert!(end.error.unwrap().to_string().contains("expected"));
    }

    #[test]
    fn scan_framing_only_skips_bodies() {
        let mut data = batch(2);
        let mut second = batch(3);
        set_base_offset(&mut second, 2);
        let n = second.len();
        second[n - 1] ^= 1; // bad CRC: invisible to a header-only scan
        data.extend_from_slice(&second);
        let mut seen = vec![];
        let end = scan(&mut SliceSource(&data), 0, Check::Framing, Some(0), |v| {
            seen.push(v.header.base_offset);
            Ok(Control::Continue)
        })
        .unwrap();
        assert_eq!(seen, [0, 2]);
        assert!(end.error.is_none());
        let end = scan(&mut SliceSource(&data), 0, Check::Full, Some(0), |_| Ok(Control::Continue)).unwrap();
        assert!(matches!(end.error, Some(LogError::CrcMismatch { .. })));
    }

    #[test]
    fn file_source_matches_slice_source() {
        let mut data = Vec::new();
        for i in 0..50 {
            let mut b = batch(1 + i % 7);
            set_base_offset(&mut b, data.len() as i64);
            data.extend_from_slice(&b);
        }
        let mut f = tempfile::NamedTempFile::new().unwrap();
        std::io::Write::write_all(&mut f, &data).unwrap();
        let mut a = vec![];
        scan(&mut SliceSource(&data), 0, Check::Full, None, |v| {
            a.push((v.position, v.header));
            Ok(Control::Continue)
        })
        .unwrap();
        let mut b = vec![];
        let path = f.path().to_owned();
        scan(&mut FileSource::new(f.as_file(), &path, data.len() as u64), 0, Check::Full, None, |v| {
            b.push((v.position, v.header));
            Ok(Control::Continue)
        })
        .unwrap();
        assert_eq!(a, b);
        assert_eq!(a.len(), 50);
    }

    #[test]
    fn log_append_time_rewrite_keeps_crc_valid() {
        let mut b = batch(2);
        set_log_append_time(&mut b, 99_999);
        set_base_offset(&mut b, 1234);
        set_partition_leader_epoch(&mut b, 7);
        let (h, _) = validate_batch(&b, 0).unwrap();
        assert!(h.is_log_append_time());
        assert_eq!((h.max_timestamp, h.base_offset, h.partition_leader_epoch), (99_999, 1234, 7));
        let mut seen = vec![];
        for_each_record_timestamp(&b, 0, |o, t| {
            seen.push((o, t));
            Control::Continue
        })
        .unwrap();
        assert_eq!(seen, [(1234, 99_999), (1235, 99_999)]);
    }

    /// A dense batch of 4 records rewritten as the cleaner does: records 1 and 3 kept.
    fn sparse_batch() -> Vec<u8> {
        let dense = batch(4);
        let h = BatchHeader::parse(&dense);
        let mut region = Vec::new();
        walk_records(&dense[HEADER_LEN..], &h, 0, |r| {
            if r.offset_delta % 2 == 1 {
                encode_record(&mut region, r, r.timestamp_delta);
            }
        })
        .unwrap();
        BatchHeader { records_count: 2, ..h }.assemble(&region)
    }

    #[test]
    fn stored_check_accepts_cleaned_batches_full_check_does_not() {
        let sparse = sparse_batch();
        let empty = BatchHeader { records_count: 0, attributes: 0, ..BatchHeader::parse(&sparse) }.assemble(&[]);
        for b in [&sparse, &empty] {
            assert!(matches!(expect_err(b), LogError::InvalidRecord { .. }), "client rule: dense batches only");
            let end = scan(&mut SliceSource(b), 0, Check::Stored, None, |_| Ok(Control::Continue)).unwrap();
            assert!(end.error.is_none(), "{:?}", end.error);
        }
        let mut seen = vec![];
        for_each_record(&sparse, 0, |o, t, r| {
            seen.push((o, t, r.key.unwrap().to_vec()));
            Control::Continue
        })
        .unwrap();
        assert_eq!(seen, [(1, 1001, b"k1".to_vec()), (3, 1003, b"k3".to_vec())]);
        // More records than the offset range, or deltas out of order, stay invalid.
        let h = BatchHeader::parse(&sparse);
        let too_many = BatchHeader { last_offset_delta: 0, ..h }.assemble(&sparse[HEADER_LEN..]);
        let end = scan(&mut SliceSource(&too_many), 0, Check::Stored, None, |_| Ok(Control::Continue)).unwrap();
        assert!(matches!(end.error, Some(LogError::InvalidRecord { .. })));
    }

    #[test]
    fn increasing_offsets_allow_gaps_not_regressions() {
        let mut data = batch(2);
        let mut second = batch(2);
        set_base_offset(&mut second, 7);
        data.extend_from_slice(&second);
        let end =
            scan(&mut SliceSource(&data), 0, Check::Stored, Offsets::Increasing(0), |_| Ok(Control::Continue)).unwrap();
        assert_eq!((end.batches, end.error.is_none()), (2, true));
        set_base_offset(&mut data[..], 8);
        let end =
            scan(&mut SliceSource(&data), 0, Check::Stored, Offsets::Increasing(0), |_| Ok(Control::Continue)).unwrap();
        assert_eq!(end.batches, 1);
        assert!(end.error.unwrap().to_string().contains("backwards"));
    }

    #[test]
    fn assemble_matches_the_builder_and_delete_horizon_reads_back() {
        let b = batch(3);
        let h = BatchHeader::parse(&b);
        assert_eq!(h.assemble(&b[HEADER_LEN..]), b);
        assert_eq!(h.delete_horizon(), None);
        let with =
            BatchHeader { attributes: h.attributes | DELETE_HORIZON_BIT, base_timestamp: 5_000, ..h }.assemble(&[]);
        assert_eq!(BatchHeader::parse(&with).delete_horizon(), Some(5_000));
    }

    #[test]
    fn sequence_wraps() {
        assert_eq!(add_sequence(i32::MAX, 1), 0);
        assert_eq!(add_sequence(i32::MAX - 1, 3), 1);
        assert_eq!(add_sequence(5, 2), 7);
    }

    #[test]
    fn end_txn_marker_round_trip_and_validates() {
        for (commit, epoch) in [(true, 7), (false, 0), (true, i32::MAX)] {
            let m = EndTxnMarker { commit, coordinator_epoch: epoch };
            let b = m.to_batch(42, 3, 1_700_000_000_000);
            let (h, _) = validate_batch(&b, 0).expect("a marker is a valid batch");
            assert!(h.is_control() && h.is_transactional());
            assert_eq!((h.producer_id, h.producer_epoch, h.base_sequence, h.records_count), (42, 3, -1, 1));
            assert_eq!(EndTxnMarker::parse(&b), Some(m));
        }
        // A data batch, a truncated marker and an unknown control type are not markers.
        assert_eq!(EndTxnMarker::parse(&batch(1)), None);
        let b = EndTxnMarker { commit: true, coordinator_epoch: 1 }.to_batch(1, 0, 0);
        assert_eq!(EndTxnMarker::parse(&b[..HEADER_LEN + 3]), None);
        let mut other = b.clone();
        let at = other.len() - 1 - 6 - 1 - 2; // the key's type field: 2 bytes before valueLength
        other[at..at + 2].copy_from_slice(&2i16.to_be_bytes());
        assert_eq!(EndTxnMarker::parse(&other), None);
    }
}
