//! Columnar decoding of record batches into Arrow-layout buffers (for the Spark data
//! source, which hands Spark `pyarrow.RecordBatch`es, and for any Arrow consumer).
//!
//! Input: the `records` bytes of a Fetch response (whole batches back to back; a partial
//! batch at the end, which Fetch may return, is ignored). Every batch is validated
//! (length, magic, CRC-32C, record walk) and decompressed; control batches are skipped.
//! Records with offsets outside `[start_offset, end_offset)` are skipped.
//!
//! Output buffers follow the Arrow columnar format, little-endian, so Python can wrap them
//! with `pyarrow.Array.from_buffers` without touching records one by one:
//! - `offset`, `timestamp_us` (ms x 1000, for `timestamp[us, tz=UTC]`): i64 values;
//! - `timestamp_type`: i32 values (0 CreateTime, 1 LogAppendTime);
//! - `key`, `value`: binary columns as (validity bitmap, i32 offsets (n+1), data), null
//!   keys/values cleared in the bitmap;
//! - `headers` (when asked): list<struct<key: string, value: binary>> as list offsets
//!   (n+1), then the struct's children: header keys (offsets, data) and header values
//!   (validity, offsets, data).
//!
//! `next_offset` is where the next fetch should start: past the last whole batch read, or
//! `end_offset` if that came first.
use crate::batch::{self, BatchHeader, Control, HEADER_LEN};
use crate::client::records::{AbortedFilter, AbortedTxn};
use crate::error::{LogError, Result};
use crate::varint::read_varint;

#[derive(Debug, Default)]
pub struct BinaryColumn {
    pub validity: Vec<u8>,
    pub offsets: Vec<u8>,
    pub data: Vec<u8>,
    pub nulls: usize,
    len: usize,
}

impl BinaryColumn {
    fn new() -> Self {
        let mut c = BinaryColumn::default();
        c.offsets.extend_from_slice(&0i32.to_le_bytes());
        c
    }

    /// Rows.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Row `i`'s bytes (None: null).
    pub fn get(&self, i: usize) -> Option<&[u8]> {
        if self.validity[i / 8] & (1 << (i % 8)) == 0 {
            return None;
        }
        let at = |k: usize| i32::from_le_bytes(self.offsets[k * 4..k * 4 + 4].try_into().expect("4 bytes")) as usize;
        Some(&self.data[at(i)..at(i + 1)])
    }

    fn push(&mut self, v: Option<&[u8]>) -> Result<()> {
        if self.len.is_multiple_of(8) {
            self.validity.push(0);
        }
        if let Some(bytes) = v {
            let last = self.validity.len() - 1;
            self.validity[last] |= 1 << (self.len % 8);
            self.data.extend_from_slice(bytes);
        } else {
            self.nulls += 1;
        }
        let end = i32::try_from(self.data.len())
            .map_err(|_| LogError::invalid(0, format!("column data exceeds 2 GiB ({} bytes)", self.data.len())))?;
        self.offsets.extend_from_slice(&end.to_le_bytes());
        self.len += 1;
        Ok(())
    }
}

#[derive(Debug)]
pub struct Columns {
    pub count: usize,
    pub offset: Vec<u8>,
    pub timestamp_us: Vec<u8>,
    pub timestamp_type: Vec<u8>,
    pub key: BinaryColumn,
    pub value: BinaryColumn,
    pub header_list_offsets: Vec<u8>,
    pub header_keys: BinaryColumn,
    pub header_values: BinaryColumn,
    pub next_offset: i64,
}

fn parse_headers(mut raw: &[u8], count: i32, keys: &mut BinaryColumn, values: &mut BinaryColumn) -> Result<usize> {
    let bad = || LogError::invalid(0, "record headers do not parse".to_string());
    for _ in 0..count {
        let (klen, n) = read_varint(raw).ok_or_else(bad)?;
        raw = &raw[n..];
        let klen = usize::try_from(klen).map_err(|_| bad())?;
        let key = raw.get(..klen).ok_or_else(bad)?;
        raw = &raw[klen..];
        let (vlen, n) = read_varint(raw).ok_or_else(bad)?;
        raw = &raw[n..];
        if vlen < 0 {
            values.push(None)?;
        } else {
            let vlen = usize::try_from(vlen).map_err(|_| bad())?;
            values.push(Some(raw.get(..vlen).ok_or_else(bad)?))?;
            raw = &raw[vlen..];
        }
        keys.push(Some(key))?;
    }
    Ok(usize::try_from(count).unwrap_or(0))
}

/// Decodes whole batches of `buf` into columns; see the module doc.
/// With `aborted` (a read_committed fetch's aborted transactions), records of aborted
/// transactions are skipped as the consumer does ([`AbortedFilter`]).
pub fn decode_columns(
    buf: &[u8],
    start_offset: i64,
    end_offset: i64,
    include_headers: bool,
    aborted: Option<&[AbortedTxn]>,
) -> Result<Columns> {
    let mut filter = aborted.map(AbortedFilter::new);
    let mut c = Columns {
        count: 0,
        offset: Vec::new(),
        timestamp_us: Vec::new(),
        timestamp_type: Vec::new(),
        key: BinaryColumn::new(),
        value: BinaryColumn::new(),
        header_list_offsets: 0i32.to_le_bytes().to_vec(),
        header_keys: BinaryColumn::new(),
        header_values: BinaryColumn::new(),
        next_offset: start_offset,
    };
    let mut headers_total: i32 = 0;
    let mut pos = 0usize;
    while buf.len() - pos >= HEADER_LEN {
        let h = BatchHeader::parse(&buf[pos..]);
        let size = usize::try_from(h.size()).unwrap_or(usize::MAX);
        if size < HEADER_LEN || buf.len() - pos < size {
            break; // a partial batch at the end of a fetch response
        }
        let bytes = &buf[pos..pos + size];
        let position = pos as u64;
        pos += size;
        if h.base_offset >= end_offset {
            c.next_offset = c.next_offset.max(end_offset);
            break;
        }
        let skip = match filter.as_mut() {
            Some(f) => f.skip(&h, bytes),
            None => h.is_control(),
        };
        if skip {
            // checked all the same: a damaged marker or aborted batch is an error here too
            batch::for_each_checked_record(bytes, position, |_, _, _| Control::Stop)?;
            c.next_offset = c.next_offset.max(h.next_offset());
            continue;
        }
        let ts_type: i32 = i32::from(h.is_log_append_time());
        let mut failure: Option<LogError> = None;
        batch::for_each_checked_record(bytes, position, |offset, ts, r| {
            if offset < start_offset {
                return Control::Continue;
            }
            if offset >= end_offset {
                return Control::Stop;
            }
            c.offset.extend_from_slice(&offset.to_le_bytes());
            c.timestamp_us.extend_from_slice(&ts.saturating_mul(1000).to_le_bytes());
            c.timestamp_type.extend_from_slice(&ts_type.to_le_bytes());
            let pushed = c.key.push(r.key).and_then(|()| c.value.push(r.value));
            let pushed = pushed.and_then(|()| {
                if include_headers {
                    let n = parse_headers(r.headers, r.headers_count, &mut c.header_keys, &mut c.header_values)?;
                    headers_total += i32::try_from(n).unwrap_or(0);
                    c.header_list_offsets.extend_from_slice(&headers_total.to_le_bytes());
                }
                Ok(())
            });
            if let Err(e) = pushed {
                failure = Some(e);
                return Control::Stop;
            }
            c.count += 1;
            Control::Continue
        })?;
        if let Some(e) = failure {
            return Err(e);
        }
        c.next_offset = c.next_offset.max(h.next_offset().min(end_offset));
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builder::{BatchBuilder, Rec};

    fn batch(base: i64, values: &[&[u8]]) -> Vec<u8> {
        let recs = values
            .iter()
            .enumerate()
            .map(|(i, v)| Rec::kv(b"k", v).ts_delta(i64::try_from(i).unwrap()).header(b"h", Some(b"x")));
        BatchBuilder::new().base_offset(base).base_timestamp(1_000).records(recs).build()
    }

    #[test]
    fn decodes_range_and_skips_partial_tail() {
        let mut buf = batch(10, &[b"a", b"b", b"c"]);
        buf.extend(batch(13, &[b"d", b"e"]));
        let partial = batch(15, &[b"f"]);
        buf.extend_from_slice(&partial[..partial.len() - 3]);
        let c = decode_columns(&buf, 11, 14, true, None).unwrap();
        assert_eq!(c.count, 3);
        let offs: Vec<i64> = c.offset.chunks(8).map(|b| i64::from_le_bytes(b.try_into().unwrap())).collect();
        assert_eq!(offs, vec![11, 12, 13]);
        assert_eq!(c.value.data, b"bcd");
        assert_eq!(c.header_keys.data, b"hhh");
        assert_eq!(c.next_offset, 14);
        let all = decode_columns(&buf, 0, i64::MAX, false, None).unwrap();
        assert_eq!(all.count, 5);
        assert_eq!(all.next_offset, 15);
    }

    #[test]
    fn cleaned_compressed_and_empty_batches_decode() {
        // What a log holds after the cleaner: a compressed batch with offset gaps (fewer
        // records than lastOffsetDelta + 1), then an empty batch; each checked in its one walk.
        let b = BatchBuilder::new()
            .base_offset(10)
            .codec(crate::compression::Codec::Lz4)
            .records([Rec::kv(b"k1", b"one").offset_delta(1), Rec::kv(b"k3", b"three").offset_delta(3)])
            .build_unchecked(4);
        let h = batch::BatchHeader::parse(&b);
        let mut buf = batch::BatchHeader { records_count: 2, ..h }.assemble(&b[batch::HEADER_LEN..]);
        buf.extend(batch::BatchHeader { base_offset: 14, records_count: 0, attributes: 0, ..h }.assemble(&[]));
        buf.extend(batch(18, &[b"after"]));
        let c = decode_columns(&buf, 0, i64::MAX, false, None).unwrap();
        let offs: Vec<i64> = c.offset.chunks(8).map(|b| i64::from_le_bytes(b.try_into().unwrap())).collect();
        assert_eq!(offs, vec![11, 13, 18]);
        assert_eq!(c.value.data, b"onethreeafter");
        assert_eq!(c.next_offset, 19);
        // a flipped byte inside the compressed records is caught by the CRC of that walk
        let mut bad = buf.clone();
        bad[batch::HEADER_LEN + 3] ^= 0x40;
        assert!(decode_columns(&bad, 0, i64::MAX, false, None).unwrap_err().to_string().contains("CRC"));
    }

    #[test]
    fn corrupt_batch_is_an_error() {
        let mut buf = batch(0, &[b"a"]);
        let last = buf.len() - 1;
        buf[last] ^= 0xff;
        assert!(decode_columns(&buf, 0, i64::MAX, false, None).is_err());
    }

    #[test]
    fn read_committed_skips_aborted_transactions() {
        let txn = |base: i64, pid: i64, v: &[u8]| {
            BatchBuilder::new()
                .base_offset(base)
                .producer(pid, 0, 0)
                .transactional(true)
                .record(Rec::kv(b"k", v))
                .build()
        };
        let marker = |base: i64, pid: i64, commit: bool| {
            let mut b = batch::EndTxnMarker { commit, coordinator_epoch: 0 }.to_batch(pid, 0, 1_000);
            b[..8].copy_from_slice(&base.to_be_bytes());
            b
        };
        let mut buf = txn(0, 5, b"aborted");
        buf.extend(txn(1, 6, b"committed"));
        buf.extend(marker(2, 5, false));
        buf.extend(marker(3, 6, true));
        buf.extend(txn(4, 5, b"later")); // producer 5's next transaction, not aborted
        let c =
            decode_columns(&buf, 0, i64::MAX, false, Some(&[AbortedTxn { producer_id: 5, first_offset: 0 }])).unwrap();
        assert_eq!(c.value.data, b"committedlater");
        assert_eq!(c.next_offset, 5);
        let all = decode_columns(&buf, 0, i64::MAX, false, None).unwrap();
        assert_eq!(all.value.data, b"abortedcommittedlater", "read_uncommitted keeps everything but markers");
    }
}
