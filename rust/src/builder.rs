//! Encoding record batches: [`BatchBuilder`] (one batch, any codec) and [`LogBuilder`]
//! (a `Log` plus a model of what was appended), the fixtures tests and benches build on
//! instead of hand-writing bytes (Redpanda's `disk_log_builder`).
//!
//! `BatchBuilder` can also produce deliberately broken batches (`offset_delta`,
//! `raw_key_len`, `build_unchecked`) for the validator's negative tests.

use std::path::Path;

use crate::batch::{self, HEADER_LEN};
use crate::compression::{self, Codec};
use crate::config::LogConfig;
use crate::error::Result;
use crate::log::{AppendResult, Log};
use crate::varint::{write_varint, write_varlong};

/// One record to encode.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rec {
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub timestamp_delta: i64,
    pub headers: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    offset_delta: Option<i32>,
    raw_key_len: Option<i32>,
}

impl Rec {
    pub fn kv(key: &[u8], value: &[u8]) -> Rec {
        Rec { key: Some(key.to_vec()), value: Some(value.to_vec()), ..Rec::default() }
    }
    pub fn value(value: &[u8]) -> Rec {
        Rec { value: Some(value.to_vec()), ..Rec::default() }
    }
    #[must_use]
    pub fn ts_delta(mut self, d: i64) -> Rec {
        self.timestamp_delta = d;
        self
    }
    #[must_use]
    pub fn header(mut self, k: &[u8], v: Option<&[u8]>) -> Rec {
        self.headers.push((k.to_vec(), v.map(<[u8]>::to_vec)));
        self
    }
    /// Forces a wrong offset delta (negative tests).
    #[must_use]
    pub fn offset_delta(mut self, d: i32) -> Rec {
        self.offset_delta = Some(d);
        self
    }
    /// Forces a raw key length without a matching key (negative tests).
    #[must_use]
    pub fn raw_key_len(mut self, l: i32) -> Rec {
        self.raw_key_len = Some(l);
        self
    }

    fn encode_into(&self, index: i32, out: &mut Vec<u8>, scratch: &mut Vec<u8>) {
        scratch.clear();
        scratch.push(0); // attributes
        write_varlong(scratch, self.timestamp_delta);
        write_varint(scratch, self.offset_delta.unwrap_or(index));
        if let Some(l) = self.raw_key_len {
            write_varint(scratch, l);
        } else {
            put_bytes(scratch, self.key.as_deref());
        }
        put_bytes(scratch, self.value.as_deref());
        write_varint(scratch, i32::try_from(self.headers.len()).expect("header count fits i32"));
        for (k, v) in &self.headers {
            put_bytes(scratch, Some(k));
            put_bytes(scratch, v.as_deref());
        }
        write_varint(out, i32::try_from(scratch.len()).expect("record fits i32"));
        out.extend_from_slice(scratch);
    }
}

fn put_bytes(out: &mut Vec<u8>, b: Option<&[u8]>) {
    match b {
        None => write_varint(out, -1),
        Some(b) => {
            write_varint(out, i32::try_from(b.len()).expect("field fits i32"));
            out.extend_from_slice(b);
        }
    }
}

/// Builds one v2 record batch.
#[derive(Debug, Clone)]
pub struct BatchBuilder {
    base_offset: i64,
    partition_leader_epoch: i32,
    codec: Codec,
    base_timestamp: i64,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    transactional: bool,
    control: bool,
    records: Vec<Rec>,
}

impl Default for BatchBuilder {
    fn default() -> Self {
        BatchBuilder::new()
    }
}

impl BatchBuilder {
    pub fn new() -> BatchBuilder {
        BatchBuilder {
            base_offset: 0,
            partition_leader_epoch: -1,
            codec: Codec::None,
            base_timestamp: 0,
            producer_id: -1,
            producer_epoch: -1,
            base_sequence: -1,
            transactional: false,
            control: false,
            records: Vec::new(),
        }
    }
    #[must_use]
    pub fn base_offset(mut self, o: i64) -> Self {
        self.base_offset = o;
        self
    }
    #[must_use]
    pub fn leader_epoch(mut self, e: i32) -> Self {
        self.partition_leader_epoch = e;
        self
    }
    #[must_use]
    pub fn codec(mut self, c: Codec) -> Self {
        self.codec = c;
        self
    }
    #[must_use]
    pub fn base_timestamp(mut self, t: i64) -> Self {
        self.base_timestamp = t;
        self
    }
    #[must_use]
    pub fn producer(mut self, id: i64, epoch: i16, base_sequence: i32) -> Self {
        self.producer_id = id;
        self.producer_epoch = epoch;
        self.base_sequence = base_sequence;
        self
    }
    #[must_use]
    pub fn transactional(mut self, t: bool) -> Self {
        self.transactional = t;
        self
    }
    #[must_use]
    pub fn control(mut self, c: bool) -> Self {
        self.control = c;
        self
    }
    #[must_use]
    pub fn record(mut self, r: Rec) -> Self {
        self.records.push(r);
        self
    }
    #[must_use]
    pub fn records(mut self, rs: impl IntoIterator<Item = Rec>) -> Self {
        self.records.extend(rs);
        self
    }

    /// Encodes the batch with a consistent header.
    pub fn build(&self) -> Vec<u8> {
        self.build_unchecked(i32::try_from(self.records.len()).expect("record count fits i32"))
    }

    /// Encodes with an explicit recordsCount (lastOffsetDelta = count - 1), whatever the records.
    pub fn build_unchecked(&self, records_count: i32) -> Vec<u8> {
        let mut plain = Vec::with_capacity(self.records.len() * 32);
        let mut scratch = Vec::new();
        for (i, r) in self.records.iter().enumerate() {
            r.encode_into(i32::try_from(i).expect("index fits i32"), &mut plain, &mut scratch);
        }
        let body = if self.codec == Codec::None { plain } else { compression::compress(self.codec, &plain) };
        let max_ts =
            self.records.iter().map(|r| self.base_timestamp + r.timestamp_delta).max().unwrap_or(self.base_timestamp);
        let mut attributes = self.codec.id();
        if self.transactional {
            attributes |= batch::TRANSACTIONAL_BIT;
        }
        if self.control {
            attributes |= batch::CONTROL_BIT;
        }
        let header = batch::BatchHeader {
            base_offset: self.base_offset,
            batch_length: 0,
            partition_leader_epoch: self.partition_leader_epoch,
            magic: batch::MAGIC_V2,
            crc: 0,
            attributes,
            last_offset_delta: records_count - 1,
            base_timestamp: self.base_timestamp,
            max_timestamp: max_ts,
            producer_id: self.producer_id,
            producer_epoch: self.producer_epoch,
            base_sequence: self.base_sequence,
            records_count,
        };
        header.assemble(&body)
    }
}

/// A `Log` plus the model of everything appended to it (offset → value), for tests and
/// benches. Values are deterministic (`"{offset}:{i}"` style) so a read can be checked.
pub struct LogBuilder {
    pub log: Log,
    /// Values in offset order, starting at `model_start`.
    pub model: Vec<Vec<u8>>,
    pub model_start: i64,
    pub codec: Codec,
    pub now_ms: i64,
    counter: u64,
}

impl LogBuilder {
    pub fn open(dir: &Path, config: LogConfig) -> Result<LogBuilder> {
        let log = Log::open(dir, "test", 0, config, None, 1_000)?;
        let start = log.log_start_offset();
        Ok(LogBuilder { log, model: Vec::new(), model_start: start, codec: Codec::None, now_ms: 1_000, counter: 0 })
    }

    /// Encodes one batch of `n` records of `value_size` bytes each (not appended).
    pub fn make_batch(&mut self, n: usize, value_size: usize) -> (Vec<u8>, Vec<Vec<u8>>) {
        let mut values = Vec::with_capacity(n);
        let mut b = BatchBuilder::new().codec(self.codec).base_timestamp(self.now_ms);
        for i in 0..n {
            self.counter += 1;
            let mut v = format!("v{}-{i}:", self.counter).into_bytes();
            v.resize(value_size.max(v.len()), b'x');
            b = b.record(Rec::kv(format!("k{i}").as_bytes(), &v).ts_delta(i64::try_from(i).unwrap_or(0)));
            values.push(v);
        }
        (b.build(), values)
    }

    /// Appends `batches` batches of `per_batch` records as one leader request.
    pub fn append(&mut self, batches: usize, per_batch: usize, value_size: usize) -> Result<AppendResult> {
        let mut req = Vec::new();
        let mut values = Vec::new();
        for _ in 0..batches {
            let (b, v) = self.make_batch(per_batch, value_size);
            req.extend_from_slice(&b);
            values.extend(v);
        }
        let r = self.log.append_as_leader(req, 0, self.now_ms)?;
        self.model.extend(values);
        Ok(r)
    }

    /// Reads everything from `from` to the LEO and returns the values in offset order.
    pub fn read_values(&self, from: i64) -> Result<Vec<(i64, Vec<u8>)>> {
        read_all_values(&self.log, from)
    }
}

/// Reads the log from `from` to its end through `Log::read`, decoding every record.
pub fn read_all_values(log: &Log, from: i64) -> Result<Vec<(i64, Vec<u8>)>> {
    let mut out = Vec::new();
    let mut next = from;
    while let Some(region) = log.read(next, 1 << 20, None, true)? {
        let bytes = region.read_to_vec()?;
        let mut pos = 0usize;
        while pos < bytes.len() {
            let h = batch::BatchHeader::parse(&bytes[pos..]);
            let size = h.size() as usize;
            let b = &bytes[pos..pos + size];
            let codec = h.codec().expect("stored batches have valid codecs");
            let plain = compression::decompress(codec, &b[HEADER_LEN..], batch::DECOMPRESS_LIMIT)
                .expect("stored batch decompresses");
            batch::walk_records(&plain, &h, 0, |r| {
                let o = h.base_offset + i64::from(r.offset_delta);
                if o >= next {
                    out.push((o, r.value.unwrap_or_default().to_vec()));
                }
            })?;
            next = next.max(h.next_offset());
            pos += size;
        }
    }
    Ok(out)
}
