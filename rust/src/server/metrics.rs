//! What the data path counts for the metrics endpoint (Prometheus text, written by the
//! Python side: python/logbroker/broker/metrics.py).
//!
//! - Per partition (`PartitionStats`, one per `Partition`): bytes and records appended by
//!   producers (Kafka's BytesInPerSec, MessagesInPerSec), bytes read by consumers
//!   (BytesOutPerSec) and by followers (ReplicationBytesOutPerSec). Monotonic counters; the
//!   scraper computes rates.
//! - Per API key (`RequestStats`): requests answered and their total time, from the complete
//!   frame read to the response queued (Kafka's RequestsPerSec and TotalTimeMs), as a
//!   histogram with the fixed bounds `LATENCY_BUCKETS_MS`. Every API is measured here, the
//!   ones Python serves too: their answers come back through the network thread.
//!
//! Relaxed atomics: each counter is exact, a snapshot across counters need not be.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds (milliseconds) of the request-time histogram buckets; one more bucket, +Inf.
pub const LATENCY_BUCKETS_MS: [f64; 14] =
    [0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0, 5000.0, 10000.0];
/// API keys 0..MAX_API_KEY are measured (Kafka's keys stop below 100).
pub const MAX_API_KEY: usize = 128;

#[derive(Debug, Default)]
pub struct PartitionStats {
    pub bytes_in: AtomicU64,
    pub messages_in: AtomicU64,
    pub bytes_out: AtomicU64,
    pub replication_bytes_out: AtomicU64,
}

impl PartitionStats {
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// `(bytes_in, messages_in, bytes_out, replication_bytes_out)`.
    pub fn snapshot(&self) -> (u64, u64, u64, u64) {
        (
            self.bytes_in.load(Ordering::Relaxed),
            self.messages_in.load(Ordering::Relaxed),
            self.bytes_out.load(Ordering::Relaxed),
            self.replication_bytes_out.load(Ordering::Relaxed),
        )
    }
}

#[derive(Debug, Default)]
struct ApiStats {
    count: AtomicU64,
    total_us: AtomicU64,
    /// Not cumulative: bucket i counts requests in (bound i-1, bound i]; the last is +Inf.
    buckets: [AtomicU64; LATENCY_BUCKETS_MS.len() + 1],
}

#[derive(Debug)]
pub struct RequestStats {
    apis: Vec<ApiStats>,
}

impl Default for RequestStats {
    fn default() -> Self {
        RequestStats { apis: (0..MAX_API_KEY).map(|_| ApiStats::default()).collect() }
    }
}

impl RequestStats {
    /// One request of `api_key` answered after `elapsed`.
    pub fn observe(&self, api_key: i16, elapsed: Duration) {
        let Some(a) = usize::try_from(api_key).ok().and_then(|k| self.apis.get(k)) else { return };
        let ms = elapsed.as_secs_f64() * 1000.0;
        let bucket = LATENCY_BUCKETS_MS.iter().position(|&b| ms <= b).unwrap_or(LATENCY_BUCKETS_MS.len());
        a.count.fetch_add(1, Ordering::Relaxed);
        a.total_us.fetch_add(u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX), Ordering::Relaxed);
        a.buckets[bucket].fetch_add(1, Ordering::Relaxed);
    }

    /// `(api_key, count, total milliseconds, cumulative bucket counts incl. +Inf)` of every
    /// API that has answered at least once.
    pub fn snapshot(&self) -> Vec<(i16, u64, f64, Vec<u64>)> {
        let mut out = Vec::new();
        for (k, a) in self.apis.iter().enumerate() {
            let count = a.count.load(Ordering::Relaxed);
            if count == 0 {
                continue;
            }
            let mut running = 0;
            let cumulative = a
                .buckets
                .iter()
                .map(|b| {
                    running += b.load(Ordering::Relaxed);
                    running
                })
                .collect();
            let total_ms = a.total_us.load(Ordering::Relaxed) as f64 / 1000.0;
            out.push((i16::try_from(k).unwrap_or(i16::MAX), count, total_ms, cumulative));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_are_cumulative_and_bounded() {
        let s = RequestStats::default();
        s.observe(0, Duration::from_micros(300));
        s.observe(0, Duration::from_millis(3));
        s.observe(0, Duration::from_secs(20));
        s.observe(500, Duration::from_millis(1)); // beyond the table: ignored
        let snap = s.snapshot();
        assert_eq!(snap.len(), 1);
        let (key, count, total_ms, buckets) = &snap[0];
        assert_eq!((*key, *count), (0, 3));
        assert!((total_ms - 20_003.3).abs() < 0.01, "{total_ms}");
        assert_eq!(buckets.len(), LATENCY_BUCKETS_MS.len() + 1);
        assert_eq!(buckets[0], 1); // <= 0.5 ms
        assert_eq!(buckets[3], 2); // <= 5 ms
        assert_eq!(buckets[LATENCY_BUCKETS_MS.len() - 1], 2); // <= 10 s
        assert_eq!(*buckets.last().unwrap(), 3); // +Inf
    }
}
