//! The hasher of the maps a replication round walks in full: a follower round looks up
//! every partition it follows (its partitions, its session's last request, the answer's
//! partitions by key and topic id), a leader's session indexes its partitions. std's
//! default, SipHash-1-3, is keyed against hash flooding by adversarial input; these maps
//! are keyed by the broker's own partitions (topic names and ids from the metadata image),
//! and over tens of thousands of partitions per round SipHash was a visible share of an
//! idle broker's CPU. This is a multiply-rotate hash over 8-byte words (the scheme of
//! rustc's FxHasher), written here.
//!
//! Not for maps keyed by what a client sends before it is checked against the image.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

#[derive(Default, Clone, Copy)]
pub struct PartitionHasher(u64);

impl PartitionHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for PartitionHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for w in &mut words {
            self.add(u64::from_le_bytes(w.try_into().unwrap_or([0; 8])));
        }
        let rest = words.remainder();
        if !rest.is_empty() {
            let mut last = [0u8; 8];
            last[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(last));
        }
    }

    #[inline]
    fn write_u8(&mut self, n: u8) {
        self.add(u64::from(n));
    }

    #[inline]
    fn write_u32(&mut self, n: u32) {
        self.add(u64::from(n));
    }

    #[inline]
    fn write_i32(&mut self, n: i32) {
        self.add(u64::from(n.cast_unsigned()));
    }

    #[inline]
    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }

    #[inline]
    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }

    /// The multiplications leave the low bits, which pick the bucket, the least mixed:
    /// the well-mixed high half is rotated down.
    #[inline]
    fn finish(&self) -> u64 {
        self.0.rotate_left(26)
    }
}

pub type PartitionHashMap<K, V> = HashMap<K, V, BuildHasherDefault<PartitionHasher>>;
pub type PartitionHashSet<K> = HashSet<K, BuildHasherDefault<PartitionHasher>>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;
    use std::sync::Arc;

    #[test]
    fn partition_keys_spread_over_buckets() {
        // 50,000 partitions of 10,000 topics: distinct hashes, and the low bits (the bucket)
        // and the top 7 bits (hashbrown's control byte) both spread.
        let b = BuildHasherDefault::<PartitionHasher>::default();
        let keys: Vec<(Arc<str>, i32)> =
            (0..10_000).flat_map(|t| (0..5).map(move |p| (Arc::from(format!("scale-{t:06}")), p))).collect();
        let hashes: PartitionHashSet<u64> = keys.iter().map(|k| b.hash_one(k)).collect();
        assert_eq!(hashes.len(), keys.len());
        let low: PartitionHashSet<u64> = hashes.iter().map(|h| h & 0xffff).collect();
        assert!(low.len() > 34_000, "{} of 65,536 low-bit buckets (random: about 35,000)", low.len());
        let top: PartitionHashSet<u64> = hashes.iter().map(|h| h >> 57).collect();
        assert_eq!(top.len(), 128);
        let mut m: PartitionHashMap<(Arc<str>, i32), usize> = PartitionHashMap::default();
        for (i, k) in keys.iter().enumerate() {
            m.insert(k.clone(), i);
        }
        assert!(keys.iter().enumerate().all(|(i, k)| m[k] == i));
    }
}
