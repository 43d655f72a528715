//! The consumer's fetch decoder: the `records` of one partition in a Fetch response, turned
//! into records in bulk.
//!
//! # Contract
//! - Batches are read in order. A trailing partial batch (the broker cuts responses at
//!   `max.partition.fetch.bytes`) ends the walk without error; `next_offset` then points at it.
//! - Every complete batch needs magic 2 and, with `check_crcs`, a matching CRC-32C; the
//!   records region is decompressed (any codec of `compression.rs`, bounded by
//!   `DECOMPRESS_LIMIT`) and walked with the storage engine's record walk, so a consumer
//!   rejects exactly what the broker would. Errors name the byte position and the offset.
//! - Records before `fetch_offset` (a compressed batch starts earlier) are skipped, as are
//!   control batches. With `aborted` (read_committed), records of aborted transactions are
//!   skipped using Kafka's rule: a transactional batch is dropped while its producer id has
//!   an aborted transaction whose first offset is at or below the batch, until that
//!   producer's ABORT marker.
//! - `next_offset` is the offset after the last complete batch (never below `fetch_offset`),
//!   so a response holding only control or aborted batches still moves the position.
//! - Nothing is copied for uncompressed batches: a record's ranges index a virtual buffer that
//!   is the input bytes followed by [`Fetched::data`] (the decompressed regions), so ranges
//!   below `bytes.len()` point into the input. [`Fetched::slice`] resolves them.

use std::collections::HashSet;
use std::ops::Range;

use crate::batch::{self, BatchHeader, HEADER_LEN, LOG_OVERHEAD, MAGIC_V2};
use crate::error::{LogError, Result, Tp};
use crate::varint::read_varint;

/// One aborted transaction of a Fetch response (`AbortedTransactions`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbortedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
}

/// Kafka's read_committed rule over a Fetch response's batches, in order: a transactional
/// data batch is dropped while its producer has an aborted transaction whose first offset is
/// at or below the batch, until that producer's ABORT marker. Shared by the consumer's decoder
/// and the Spark source's columnar decoder.
#[derive(Debug, Default)]
pub struct AbortedFilter {
    sorted: Vec<AbortedTxn>,
    next: usize,
    aborting: HashSet<i64>,
}

impl AbortedFilter {
    pub fn new(aborted: &[AbortedTxn]) -> Self {
        let mut sorted = aborted.to_vec();
        sorted.sort_by_key(|a| a.first_offset);
        AbortedFilter { sorted, next: 0, aborting: HashSet::new() }
    }

    /// Whether the batch `b` (its whole bytes) is to be skipped; call for every batch in
    /// order, control batches included (an ABORT marker ends its producer's aborted range).
    pub fn skip(&mut self, h: &BatchHeader, b: &[u8]) -> bool {
        while self.next < self.sorted.len() && self.sorted[self.next].first_offset <= h.last_offset() {
            self.aborting.insert(self.sorted[self.next].producer_id);
            self.next += 1;
        }
        if h.is_control() {
            if h.is_transactional() && batch::EndTxnMarker::parse(b).is_some_and(|m| !m.commit) {
                self.aborting.remove(&h.producer_id);
            }
            return true;
        }
        h.is_transactional() && self.aborting.contains(&h.producer_id)
    }
}

/// A decoded record: ranges into [`Fetched::data`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodedRecord {
    pub offset: i64,
    pub timestamp: i64,
    /// 0 CreateTime, 1 LogAppendTime.
    pub timestamp_type: u8,
    pub leader_epoch: i32,
    pub key: Option<Range<usize>>,
    pub value: Option<Range<usize>>,
    /// The raw header entries and their count.
    pub headers: Range<usize>,
    pub headers_count: i32,
}

#[derive(Debug, Default)]
pub struct Fetched {
    /// Decompressed records regions; ranges at or above `input_len` index it.
    pub data: Vec<u8>,
    pub input_len: usize,
    pub records: Vec<DecodedRecord>,
    pub next_offset: i64,
    /// True when the data ended inside a batch.
    pub truncated: bool,
    /// Bytes of complete batches walked.
    pub bytes: usize,
}

impl Fetched {
    /// The bytes of `r` (a record's key, value or headers), given the decoded input.
    pub fn slice<'a>(&'a self, input: &'a [u8], r: Range<usize>) -> &'a [u8] {
        if r.start >= self.input_len {
            &self.data[r.start - self.input_len..r.end - self.input_len]
        } else {
            &input[r]
        }
    }
}

fn range_in(region: &[u8], part: &[u8], base: usize) -> Range<usize> {
    let start = part.as_ptr() as usize - region.as_ptr() as usize + base;
    start..start + part.len()
}

/// Decodes the fetched `bytes` of `tp` (for error messages) from `fetch_offset` on.
pub fn decode_fetched(
    tp: &str,
    bytes: &[u8],
    fetch_offset: i64,
    check_crcs: bool,
    aborted: Option<&[AbortedTxn]>,
) -> Result<Fetched> {
    let mut out = Fetched { next_offset: fetch_offset, input_len: bytes.len(), ..Fetched::default() };
    let mut filter = aborted.map(AbortedFilter::new);
    let named = |e: LogError| e.in_partition(tp);
    let mut pos = 0usize;
    while bytes.len() - pos >= LOG_OVERHEAD {
        let rest = &bytes[pos..];
        let length = i32::from_be_bytes([rest[8], rest[9], rest[10], rest[11]]);
        let Ok(length) = usize::try_from(length) else {
            return Err(named(LogError::corrupt(pos as u64, format!("negative batchLength {length}"))));
        };
        let size = length + LOG_OVERHEAD;
        if size > rest.len() || rest.len() < HEADER_LEN {
            out.truncated = true;
            break;
        }
        if size < HEADER_LEN {
            return Err(named(LogError::corrupt(pos as u64, format!("batchLength {length} is below the minimum"))));
        }
        let b = &rest[..size];
        let h = BatchHeader::parse(b);
        if h.magic != MAGIC_V2 {
            return Err(named(LogError::corrupt(
                pos as u64,
                format!("batch at offset {} has magic {}; only v2 batches are supported", h.base_offset, h.magic),
            )));
        }
        if check_crcs {
            let computed = crc32c::crc32c(&b[batch::ATTRIBUTES_AT..]);
            if computed != h.crc {
                return Err(LogError::CrcMismatch {
                    tp: Tp(tp.to_owned()),
                    position: pos as u64,
                    expected: h.crc,
                    computed,
                });
            }
        }
        pos += size;
        out.bytes = pos;
        let next = h.next_offset();
        if next <= fetch_offset {
            continue;
        }
        out.next_offset = out.next_offset.max(next);
        let skip = match filter.as_mut() {
            Some(f) => f.skip(&h, b),
            None => h.is_control(),
        };
        if skip {
            continue;
        }
        let batch_pos = (pos - size) as u64;
        let region = batch::records_region(b, batch_pos).map_err(named)?;
        let compressed = matches!(region, std::borrow::Cow::Owned(_));
        // Uncompressed: ranges into the input itself; compressed: into `data`, after the input.
        let (base_slice, base): (&[u8], usize) =
            if compressed { (&region, bytes.len() + out.data.len()) } else { (bytes, 0) };
        let log_append = h.is_log_append_time();
        let records = &mut out.records;
        batch::walk_records(&region, &h, batch_pos, |r| {
            let offset = h.base_offset + i64::from(r.offset_delta);
            if offset < fetch_offset {
                return;
            }
            let timestamp = if log_append { h.max_timestamp } else { h.base_timestamp.wrapping_add(r.timestamp_delta) };
            records.push(DecodedRecord {
                offset,
                timestamp,
                timestamp_type: u8::from(log_append),
                leader_epoch: h.partition_leader_epoch,
                key: r.key.map(|k| range_in(base_slice, k, base)),
                value: r.value.map(|v| range_in(base_slice, v, base)),
                headers: range_in(base_slice, r.headers, base),
                headers_count: r.headers_count,
            });
        })
        .map_err(named)?;
        if compressed {
            out.data.extend_from_slice(&region);
        }
    }
    if bytes.len() - pos > 0 && bytes.len() - pos < LOG_OVERHEAD {
        out.truncated = true;
    }
    Ok(out)
}

/// The (key, value) pairs of a record's raw header entries (validated by the walk).
pub fn parse_headers(raw: &[u8], count: i32) -> Vec<(&[u8], Option<&[u8]>)> {
    let mut out = Vec::with_capacity(usize::try_from(count).unwrap_or(0));
    let mut p = 0usize;
    let take = |p: &mut usize| -> Option<Option<&[u8]>> {
        let (len, n) = read_varint(&raw[*p..])?;
        *p += n;
        if len < 0 {
            return Some(None);
        }
        let len = usize::try_from(len).ok()?;
        let s = raw.get(*p..*p + len)?;
        *p += len;
        Some(Some(s))
    };
    for _ in 0..count {
        let Some(Some(k)) = take(&mut p) else { break };
        let Some(v) = take(&mut p) else { break };
        out.push((k, v));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builder::{BatchBuilder, Rec};
    use crate::compression::Codec;

    fn two_batches(codec: Codec) -> Vec<u8> {
        let mut v = BatchBuilder::new()
            .codec(codec)
            .base_timestamp(1000)
            .record(Rec::kv(b"k0", b"v0").header(b"h", Some(b"x")))
            .record(Rec::value(b"v1").ts_delta(3))
            .build();
        v.extend(BatchBuilder::new().base_offset(2).codec(codec).record(Rec::kv(b"k2", b"v2")).build());
        v
    }

    #[test]
    fn every_codec_decodes() {
        for codec in Codec::ALL {
            let input = two_batches(codec);
            let f = decode_fetched("t-0", &input, 0, true, None).unwrap();
            assert_eq!(f.records.len(), 3, "{}", codec.name());
            assert_eq!(f.next_offset, 3);
            let r0 = &f.records[0];
            assert_eq!(f.slice(&input, r0.key.clone().unwrap()), b"k0");
            assert_eq!(f.slice(&input, r0.value.clone().unwrap()), b"v0");
            assert_eq!(
                parse_headers(f.slice(&input, r0.headers.clone()), r0.headers_count),
                vec![(&b"h"[..], Some(&b"x"[..]))]
            );
            assert_eq!((f.records[1].timestamp, f.records[1].key.clone()), (1003, None));
            assert_eq!(f.records[2].offset, 2);
        }
    }

    #[test]
    fn skips_records_before_the_fetch_offset() {
        let f = decode_fetched("t-0", &two_batches(Codec::Lz4), 1, true, None).unwrap();
        assert_eq!(f.records.iter().map(|r| r.offset).collect::<Vec<_>>(), vec![1, 2]);
    }

    #[test]
    fn partial_trailing_batch_is_not_an_error() {
        let data = two_batches(Codec::None);
        let f = decode_fetched("t-0", &data[..data.len() - 5], 0, true, None).unwrap();
        assert!(f.truncated);
        assert_eq!((f.records.len(), f.next_offset), (2, 2));
    }

    #[test]
    fn crc_mismatch_is_reported() {
        let mut data = two_batches(Codec::None);
        let last = data.len() - 1;
        data[last] ^= 0xff;
        let err = decode_fetched("t-0", &data, 0, true, None).unwrap_err();
        assert!(matches!(err, LogError::CrcMismatch { .. }), "{err}");
    }

    #[test]
    fn aborted_transactions_are_skipped() {
        let txn = |base: i64, v: &[u8]| {
            BatchBuilder::new().base_offset(base).producer(7, 0, 0).transactional(true).record(Rec::value(v)).build()
        };
        let abort_marker = BatchBuilder::new()
            .base_offset(1)
            .producer(7, 0, -1)
            .transactional(true)
            .control(true)
            .record(Rec::kv(&[0, 0, 0, 0], &[0, 0, 0, 0, 0, 0]))
            .build();
        let mut data = txn(0, b"aborted");
        data.extend(abort_marker);
        data.extend(txn(2, b"kept"));
        let aborted = [AbortedTxn { producer_id: 7, first_offset: 0 }];
        let f = decode_fetched("t-0", &data, 0, true, Some(&aborted)).unwrap();
        assert_eq!(f.records.len(), 1);
        assert_eq!(f.slice(&data, f.records[0].value.clone().unwrap()), b"kept");
        assert_eq!(f.next_offset, 3);
        let all = decode_fetched("t-0", &data, 0, true, None).unwrap();
        assert_eq!(all.records.len(), 2, "read_uncommitted sees both, never the marker");
    }
}
