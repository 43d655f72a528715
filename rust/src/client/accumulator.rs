//! The producer's record accumulator: one open batch per partition that records are encoded
//! into as they are sent, and a queue of closed batches for the sender to drain.
//!
//! # Contract
//! - `append` encodes the record (v2 record format, offset delta = its index in the batch,
//!   timestamp delta from the batch's first record) straight into the partition's open
//!   batch; nothing is re-encoded later except compression of the whole records region when
//!   the batch is sealed (`py/client.rs`, with the GIL released).
//! - A batch is *closed* when the next record would push it past `batch.size` (a batch always
//!   takes its first record, however large: Kafka's rule), and is then drained at once. An
//!   open batch is drained when `linger.ms` has passed since it was opened, or at once while a
//!   flush is in progress or when the accumulator is closed.
//! - Partition choice (when the caller gives none): a non-null key goes where Kafka's murmur2
//!   partitioner puts it; an unkeyed record goes to the topic's *sticky* partition, which
//!   moves to another random partition after `batch.size` bytes (KIP-794's uniform sticky
//!   partitioner, without its load-based weighting).
//! - Memory: `buffered()` counts the encoded bytes of every record appended and not yet
//!   released; the sender releases a batch's bytes when it completes (acknowledged, failed or
//!   expired). An append that would pass `buffer.memory` fails with `BufferFull` (unless
//!   nothing is buffered), and the caller waits for releases.
//! - `wake` in the append result tells the caller the I/O loop must look now: a batch was
//!   closed, or the first open batch appeared (the loop has no linger deadline yet).
//!
//! Not thread-safe by itself: the binding wraps it in a mutex.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use crate::client::error::ClientError;
use crate::client::murmur2::partition_for_key;
use crate::compression::Codec;
use crate::varint::{varint_size, write_varint, write_varlong};

/// A new batch reserves this much (or `batch.size` if smaller), and all of `batch.size` once
/// it outgrows that, so many partitions with a few records each do not each hold a
/// `batch.size` buffer while a busy partition's batch is copied at most once.
const INITIAL_BATCH_CAPACITY: usize = 64 << 10;

#[derive(Debug, Clone, Copy)]
pub struct AccumulatorConfig {
    pub batch_size: usize,
    pub linger_ms: i64,
    pub buffer_memory: usize,
    pub max_request_size: usize,
    pub codec: Codec,
}

/// A batch being filled, or closed and handed to the sender.
#[derive(Debug)]
pub struct ProducerBatch<T> {
    pub topic: Arc<str>,
    pub partition: i32,
    pub created_ms: i64,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    /// The records region, uncompressed.
    pub records: Vec<u8>,
    pub count: i32,
    /// The binding's per-batch state (delivery results and callbacks).
    pub token: T,
}

/// Where a record went.
#[derive(Debug)]
pub struct Appended<T> {
    pub partition: i32,
    pub offset_delta: i32,
    pub token: T,
    pub wake: bool,
}

/// One record to append; `headers` are (key, value) pairs.
#[derive(Debug, Clone, Copy)]
pub struct NewRecord<'a> {
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    pub timestamp_ms: i64,
    pub headers: &'a [(&'a [u8], Option<&'a [u8]>)],
}

struct TopicState<T> {
    partitions: u32,
    open: Vec<Option<ProducerBatch<T>>>,
    sticky: u32,
    sticky_bytes: usize,
}

pub struct Accumulator<T> {
    config: AccumulatorConfig,
    topics: HashMap<Arc<str>, TopicState<T>>,
    ready: VecDeque<ProducerBatch<T>>,
    open_batches: usize,
    buffered: usize,
    flushing: bool,
    closed: bool,
    rng: u64,
}

fn varlong_size(v: i64) -> usize {
    let raw = ((v << 1) ^ (v >> 63)) as u64;
    let bits = 64 - raw.leading_zeros() as usize;
    bits.max(1).div_ceil(7)
}

fn bytes_size(b: Option<&[u8]>) -> usize {
    match b {
        None => 1,
        Some(b) => varint_size(len_i32(b.len())) + b.len(),
    }
}

fn len_i32(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

fn put_bytes(out: &mut Vec<u8>, b: Option<&[u8]>) {
    match b {
        None => write_varint(out, -1),
        Some(b) => {
            write_varint(out, len_i32(b.len()));
            out.extend_from_slice(b);
        }
    }
}

/// Encoded size of the record body (after its length varint).
fn body_size(r: &NewRecord<'_>, ts_delta: i64, offset_delta: i32) -> usize {
    let mut n = 1 + varlong_size(ts_delta) + varint_size(offset_delta) + bytes_size(r.key) + bytes_size(r.value);
    n += varint_size(len_i32(r.headers.len()));
    for (k, v) in r.headers {
        n += bytes_size(Some(k)) + bytes_size(*v);
    }
    n
}

impl<T: Clone> Accumulator<T> {
    pub fn new(config: AccumulatorConfig, seed: u64) -> Accumulator<T> {
        Accumulator {
            config,
            topics: HashMap::new(),
            ready: VecDeque::new(),
            open_batches: 0,
            buffered: 0,
            flushing: false,
            closed: false,
            rng: seed | 1,
        }
    }

    pub fn config(&self) -> &AccumulatorConfig {
        &self.config
    }

    fn random(&mut self) -> u64 {
        // xorshift64*: enough to spread sticky partitions.
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn random_partition(&mut self, n: u32, avoid: Option<u32>) -> u32 {
        if n <= 1 {
            return 0;
        }
        let mut p = (self.random() % u64::from(n)) as u32;
        if Some(p) == avoid {
            p = (p + 1) % n;
        }
        p
    }

    /// Sets (or grows) a topic's partition count from metadata. Shrinking is ignored, as
    /// Kafka topics never lose partitions.
    pub fn set_partitions(&mut self, topic: &str, partitions: u32) {
        if partitions == 0 {
            return;
        }
        if let Some(t) = self.topics.get_mut(topic) {
            if partitions > t.partitions {
                t.open.resize_with(partitions as usize, || None);
                t.partitions = partitions;
            }
            return;
        }
        let sticky = self.random_partition(partitions, None);
        let mut open = Vec::with_capacity(partitions as usize);
        open.resize_with(partitions as usize, || None);
        self.topics.insert(Arc::from(topic), TopicState { partitions, open, sticky, sticky_bytes: 0 });
    }

    /// The partition count known for `topic`.
    pub fn partitions(&self, topic: &str) -> Option<u32> {
        self.topics.get(topic).map(|t| t.partitions)
    }

    pub fn buffered(&self) -> usize {
        self.buffered
    }

    /// Records appended and not yet drained (open or closed batches still here).
    pub fn has_undrained(&self) -> bool {
        self.open_batches > 0 || !self.ready.is_empty()
    }

    /// Appends one record. `new_token(partition)` makes the binding's state for a new batch.
    pub fn append(
        &mut self,
        topic: &str,
        partition: Option<i32>,
        rec: &NewRecord<'_>,
        now_ms: i64,
        new_token: impl FnOnce(i32) -> T,
    ) -> Result<Appended<T>, ClientError> {
        if self.closed {
            return Err(ClientError::Closed);
        }
        let Some(n) = self.topics.get(topic).map(|t| t.partitions) else {
            return Err(ClientError::UnknownTopic(topic.to_owned()));
        };
        let p = match (partition, rec.key) {
            (Some(p), _) => {
                if p < 0 || u32::try_from(p).map_or(true, |p| p >= n) {
                    return Err(ClientError::UnknownPartition { topic: topic.to_owned(), partition: p, partitions: n });
                }
                u32::try_from(p).unwrap_or(0)
            }
            (None, Some(key)) => partition_for_key(key, n),
            (None, None) => self.topics[topic].sticky,
        };
        // The size with a worst-case (5-byte) offset delta and the timestamp delta it would get.
        let estimate = body_size(rec, 0, i32::MAX) + 5 + 10;
        if estimate > self.config.max_request_size {
            return Err(ClientError::RecordTooLarge { size: estimate, limit: self.config.max_request_size });
        }
        if self.buffered > 0 && self.buffered + estimate > self.config.buffer_memory {
            return Err(ClientError::BufferFull { used: self.buffered, limit: self.config.buffer_memory });
        }
        let batch_size = self.config.batch_size;
        let mut wake = false;
        let t = self.topics.get_mut(topic).expect("checked above");
        let slot = &mut t.open[p as usize];
        // Close the open batch if this record does not fit (a batch always takes one record).
        if let Some(b) = slot {
            let delta = rec.timestamp_ms.wrapping_sub(b.base_timestamp);
            let body = body_size(rec, delta, b.count);
            if b.records.len() + varint_size(len_i32(body)) + body > batch_size.saturating_sub(crate::batch::HEADER_LEN)
            {
                let full = slot.take().expect("just matched");
                self.ready.push_back(full);
                self.open_batches -= 1;
                wake = true;
            }
        }
        if slot.is_none() {
            let topic_arc = self.topics.get_key_value(topic).map(|(k, _)| Arc::clone(k)).expect("known topic");
            let t = self.topics.get_mut(topic).expect("known topic");
            t.open[p as usize] = Some(ProducerBatch {
                topic: topic_arc,
                partition: p as i32,
                created_ms: now_ms,
                base_timestamp: rec.timestamp_ms,
                max_timestamp: rec.timestamp_ms,
                records: Vec::with_capacity(batch_size.min(INITIAL_BATCH_CAPACITY)),
                count: 0,
                token: new_token(p as i32),
            });
            if self.open_batches == 0 {
                wake = true;
            }
            self.open_batches += 1;
        }
        let t = self.topics.get_mut(topic).expect("known topic");
        let b = t.open[p as usize].as_mut().expect("opened above");
        let offset_delta = b.count;
        let ts_delta = rec.timestamp_ms.wrapping_sub(b.base_timestamp);
        let body = body_size(rec, ts_delta, offset_delta);
        let before = b.records.len();
        let out = &mut b.records;
        let need = varint_size(len_i32(body)) + body;
        if out.capacity() - out.len() < need {
            // Outgrew its first allocation: the partition is busy, so go straight to the
            // whole batch.size (one copy of the first part, not one per doubling).
            out.reserve_exact(batch_size.saturating_sub(crate::batch::HEADER_LEN).max(out.len() + need) - out.len());
        }
        write_varint(out, len_i32(body));
        out.push(0);
        write_varlong(out, ts_delta);
        write_varint(out, offset_delta);
        put_bytes(out, rec.key);
        put_bytes(out, rec.value);
        write_varint(out, len_i32(rec.headers.len()));
        for (k, v) in rec.headers {
            put_bytes(out, Some(k));
            put_bytes(out, *v);
        }
        b.count += 1;
        b.max_timestamp = b.max_timestamp.max(rec.timestamp_ms);
        let added = b.records.len() - before;
        let token = b.token.clone();
        self.buffered += added;
        if partition.is_none() && rec.key.is_none() {
            t.sticky_bytes += added;
            if t.sticky_bytes >= batch_size {
                let (n, cur) = (t.partitions, t.sticky);
                let next = self.random_partition(n, Some(cur));
                let t = self.topics.get_mut(topic).expect("known topic");
                t.sticky = next;
                t.sticky_bytes = 0;
            }
        }
        Ok(Appended { partition: p as i32, offset_delta, token, wake })
    }

    /// Closed batches, then open batches whose linger has passed (all of them while
    /// flushing or closed), in that order. A flush ends when nothing is left to drain.
    pub fn drain(&mut self, now_ms: i64) -> Vec<ProducerBatch<T>> {
        let mut out: Vec<ProducerBatch<T>> = self.ready.drain(..).collect();
        if self.open_batches > 0 {
            let all = self.flushing || self.closed;
            let linger = self.config.linger_ms;
            for t in self.topics.values_mut() {
                for slot in &mut t.open {
                    if slot.as_ref().is_some_and(|b| all || now_ms - b.created_ms >= linger) {
                        out.push(slot.take().expect("checked"));
                        self.open_batches -= 1;
                    }
                }
            }
        }
        if self.open_batches == 0 {
            self.flushing = false;
        }
        out
    }

    /// When the next open batch's linger ends (ms), if any batch is open and no flush is on.
    pub fn next_ready_ms(&self) -> Option<i64> {
        if !self.ready.is_empty() || (self.open_batches > 0 && (self.flushing || self.closed)) {
            return Some(i64::MIN);
        }
        if self.open_batches == 0 {
            return None;
        }
        self.topics.values().flat_map(|t| t.open.iter().flatten()).map(|b| b.created_ms + self.config.linger_ms).min()
    }

    /// Makes every open batch ready at the next drain.
    pub fn begin_flush(&mut self) {
        if self.open_batches > 0 {
            self.flushing = true;
        }
    }

    /// Refuses further appends; everything still here drains at once.
    pub fn close(&mut self) {
        self.closed = true;
    }

    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// Returns a completed batch's bytes to the buffer.
    pub fn release(&mut self, bytes: usize) {
        self.buffered = self.buffered.saturating_sub(bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{self, BatchHeader};
    use crate::builder::{BatchBuilder, Rec};

    fn acc(batch_size: usize, linger_ms: i64) -> Accumulator<u32> {
        let config = AccumulatorConfig {
            batch_size,
            linger_ms,
            buffer_memory: 1 << 20,
            max_request_size: 1 << 20,
            codec: Codec::None,
        };
        let mut a = Accumulator::new(config, 7);
        a.set_partitions("t", 4);
        a
    }

    fn rec<'a>(key: Option<&'a [u8]>, value: &'a [u8], ts: i64) -> NewRecord<'a> {
        NewRecord { key, value: Some(value), timestamp_ms: ts, headers: &[] }
    }

    #[test]
    fn records_encode_like_the_batch_builder() {
        let mut a = acc(16384, 0);
        let headers: [(&[u8], Option<&[u8]>); 2] = [(b"h", Some(b"v")), (b"n", None)];
        let r1 = NewRecord { key: Some(b"k1"), value: Some(b"v1"), timestamp_ms: 1000, headers: &headers };
        a.append("t", Some(1), &r1, 0, |_| 1).unwrap();
        a.append("t", Some(1), &rec(None, b"v2", 1005), 0, |_| 2).unwrap();
        let batches = a.drain(0);
        assert_eq!(batches.len(), 1);
        let b = &batches[0];
        let expected = BatchBuilder::new()
            .base_timestamp(1000)
            .record(Rec::kv(b"k1", b"v1").header(b"h", Some(b"v")).header(b"n", None))
            .record(Rec::value(b"v2").ts_delta(5))
            .build();
        let h = BatchHeader::parse(&expected);
        let region = &expected[batch::HEADER_LEN..];
        assert_eq!(b.records, region);
        assert_eq!((b.count, b.max_timestamp), (h.records_count, h.max_timestamp));
    }

    #[test]
    fn full_batch_closes_and_wakes() {
        let mut a = acc(200, 1_000_000);
        let first = a.append("t", Some(0), &rec(None, &[1; 50], 0), 0, |_| 1).unwrap();
        assert!(first.wake, "first open batch wakes the loop");
        let second = a.append("t", Some(0), &rec(None, &[1; 50], 0), 0, |_| 1).unwrap();
        assert!(!second.wake);
        let third = a.append("t", Some(0), &rec(None, &[1; 100], 0), 0, |_| 2).unwrap();
        assert!(third.wake, "closing a full batch wakes the loop");
        assert_eq!((third.token, third.offset_delta), (2, 0));
        let drained = a.drain(0);
        assert_eq!(drained.len(), 1);
        assert_eq!(drained[0].count, 2);
        a.begin_flush();
        assert_eq!(a.drain(0).len(), 1);
        assert!(!a.has_undrained());
    }

    #[test]
    fn linger_decides_readiness() {
        let mut a = acc(16384, 10);
        a.append("t", Some(2), &rec(None, b"x", 0), 100, |_| 1).unwrap();
        assert_eq!(a.next_ready_ms(), Some(110));
        assert!(a.drain(109).is_empty());
        assert_eq!(a.drain(110).len(), 1);
        assert_eq!(a.next_ready_ms(), None);
    }

    #[test]
    fn keyed_records_follow_murmur2_and_unkeyed_stick() {
        let mut a = acc(1000, 0);
        let got = a.append("t", None, &rec(Some(b"foobar"), b"v", 0), 0, |_| 1).unwrap();
        assert_eq!(got.partition, i32::try_from(partition_for_key(b"foobar", 4)).unwrap());
        let p0 = a.append("t", None, &rec(None, b"v", 0), 0, |_| 1).unwrap().partition;
        let p1 = a.append("t", None, &rec(None, b"v", 0), 0, |_| 1).unwrap().partition;
        assert_eq!(p0, p1);
        // After batch.size bytes the sticky partition moves.
        let mut moved = false;
        for _ in 0..200 {
            moved |= a.append("t", None, &rec(None, &[0; 20], 0), 0, |_| 1).unwrap().partition != p0;
        }
        assert!(moved);
    }

    #[test]
    fn refusals() {
        let mut a = acc(1000, 0);
        assert_eq!(
            a.append("u", None, &rec(None, b"v", 0), 0, |_| 1).unwrap_err(),
            ClientError::UnknownTopic("u".into())
        );
        assert!(matches!(
            a.append("t", Some(4), &rec(None, b"v", 0), 0, |_| 1),
            Err(ClientError::UnknownPartition { .. })
        ));
        let big = vec![0u8; 2 << 20];
        assert!(matches!(
            a.append("t", Some(0), &rec(None, &big, 0), 0, |_| 1),
            Err(ClientError::RecordTooLarge { .. })
        ));
        let half = vec![0u8; 600 << 10];
        a.append("t", Some(0), &rec(None, &half, 0), 0, |_| 1).unwrap();
        assert!(matches!(a.append("t", Some(0), &rec(None, &half, 0), 0, |_| 1), Err(ClientError::BufferFull { .. })));
        a.release(a.buffered());
        a.close();
        assert_eq!(a.append("t", Some(0), &rec(None, b"v", 0), 0, |_| 1).unwrap_err(), ClientError::Closed);
    }
}
