//! The request memory pool: every request frame being read or waiting to be handled holds its
//! bytes here, and all of them together stay within Kafka's `queued.max.request.bytes`.
//!
//! # Contract
//! - `try_reserve(n)` succeeds when `used + n <= limit`, or when nothing at all is reserved
//!   (so a single request larger than the limit can still be read, alone, as Kafka's pool
//!   allows); otherwise it fails and the caller stops reading that connection: the broker
//!   keeps serving, the client waits in TCP flow control.
//! - `release(n)` returns bytes; the network loop then retries the connections it paused.
//! - `limit <= 0` means unbounded (Kafka's -1).
//!
//! Thread-safety: atomic counters; reservations race benignly (a compare-exchange loop).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

#[derive(Debug)]
pub struct MemoryPool {
    limit: usize,
    used: AtomicUsize,
    /// Reservations refused so far (a connection paused for memory).
    refusals: AtomicU64,
}

impl MemoryPool {
    pub fn new(limit: i64) -> Self {
        let limit = usize::try_from(limit).ok().filter(|&l| l > 0).unwrap_or(usize::MAX);
        MemoryPool { limit, used: AtomicUsize::new(0), refusals: AtomicU64::new(0) }
    }

    pub fn try_reserve(&self, n: usize) -> bool {
        let mut used = self.used.load(Ordering::Relaxed);
        loop {
            if used != 0 && used.saturating_add(n) > self.limit {
                self.refusals.fetch_add(1, Ordering::Relaxed);
                return false;
            }
            match self.used.compare_exchange_weak(used, used + n, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => return true,
                Err(now) => used = now,
            }
        }
    }

    pub fn release(&self, n: usize) {
        let before = self.used.fetch_sub(n, Ordering::AcqRel);
        debug_assert!(before >= n, "released {n} of {before} reserved bytes");
    }

    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    pub fn limit(&self) -> usize {
        self.limit
    }

    pub fn refusals(&self) -> u64 {
        self.refusals.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_except_for_a_lone_request() {
        let p = MemoryPool::new(100);
        assert!(p.try_reserve(60));
        assert!(p.try_reserve(40));
        assert!(!p.try_reserve(1));
        p.release(100);
        assert!(p.try_reserve(500), "alone, a request larger than the limit may proceed");
        assert!(!p.try_reserve(1));
        p.release(500);
        assert_eq!(p.used(), 0);
        assert_eq!(p.refusals(), 2);
    }

    #[test]
    fn non_positive_limit_is_unbounded() {
        let p = MemoryPool::new(-1);
        assert!(p.try_reserve(usize::MAX / 2));
        assert!(p.try_reserve(1));
    }
}
