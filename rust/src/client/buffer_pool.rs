//! Reused byte buffers for the consumer's fetched data.
//!
//! A fetch response is several MiB; a fresh allocation of that size comes from new pages the
//! kernel must fault in and zero (in a 1 KiB-record consume profile, page faults were about
//! 40% of the client's CPU). A `RecordSet` takes its buffer from here and gives it back when
//! dropped, so a steady consumer reuses the same few warm buffers.
//!
//! # Invariants
//! - `take_sized(n)` returns a `Vec` of length `n` whose contents are unspecified (bytes of
//!   an earlier use or zeros, never uninitialized memory): callers overwrite all of it. Only
//!   growth beyond a reused buffer's length is zero-filled.
//! - The pool keeps at most `MAX_BUFFERS` buffers and `MAX_POOLED_BYTES` of capacity in all;
//!   anything beyond is freed, so an idle consumer holds a bounded amount of memory.

use std::sync::{Mutex, PoisonError};

/// Buffers kept at most.
pub const MAX_BUFFERS: usize = 8;
/// Capacity kept at most, summed over the pooled buffers.
pub const MAX_POOLED_BYTES: usize = 128 << 20;

static POOL: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());

/// A buffer of length `n` to overwrite, reused when one is pooled (the largest first).
pub fn take_sized(n: usize) -> Vec<u8> {
    let reused = POOL.lock().unwrap_or_else(PoisonError::into_inner).pop();
    let mut buf = reused.unwrap_or_default();
    if buf.len() >= n {
        buf.truncate(n);
    } else {
        buf.resize(n, 0);
    }
    buf
}

/// Returns `buf` to the pool (or frees it when the pool is full).
pub fn give(buf: Vec<u8>) {
    if buf.capacity() == 0 {
        return;
    }
    let mut pool = POOL.lock().unwrap_or_else(PoisonError::into_inner);
    let held: usize = pool.iter().map(Vec::capacity).sum();
    if pool.len() < MAX_BUFFERS && held + buf.capacity() <= MAX_POOLED_BYTES {
        // Kept sorted by capacity so `take()` pops the largest.
        let at = pool.partition_point(|b| b.capacity() <= buf.capacity());
        pool.insert(at, buf);
    }
}

/// Pooled buffers and their summed capacity.
#[cfg(test)]
fn stats() -> (usize, usize) {
    let pool = POOL.lock().unwrap_or_else(PoisonError::into_inner);
    (pool.len(), pool.iter().map(Vec::capacity).sum())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reuses_and_bounds() {
        // The pool is process-wide; this test only checks relative behaviour.
        let b = take_sized(1 << 20);
        assert_eq!(b.len(), 1 << 20);
        let cap = b.capacity();
        give(b);
        let again = take_sized(3);
        assert_eq!(again.len(), 3);
        // The largest pooled buffer comes back first: at least the one just given.
        assert!(again.capacity() >= cap);
        give(again);
        for _ in 0..(MAX_BUFFERS * 2) {
            give(Vec::with_capacity(64 << 20));
        }
        let (n, bytes) = stats();
        assert!(n <= MAX_BUFFERS);
        assert!(bytes <= MAX_POOLED_BYTES);
    }
}
