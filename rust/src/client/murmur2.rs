//! Kafka's murmur2 (32-bit MurmurHash2, seed 0x9747b28c) and the default partitioner's keyed
//! choice, bit for bit as `org.apache.kafka.common.utils.Utils.murmur2` and
//! `BuiltInPartitioner.partitionForKey`: `(murmur2(key) & 0x7fffffff) % partitions`.
//!
//! Java reads the tail bytes as signed `byte`s masked with 0xff and does all arithmetic in
//! wrapping 32-bit `int`s; unsigned `u32` wrapping arithmetic gives the same bits. The same
//! function is librdkafka's `murmur2` partitioner, so all three clients agree on where a key
//! goes.

const SEED: u32 = 0x9747_b28c;
const M: u32 = 0x5bd1_e995;
const R: u32 = 24;

/// The 32-bit murmur2 hash of `data`, as Java's `Utils.murmur2` returns it (bits as `u32`).
pub fn murmur2(data: &[u8]) -> u32 {
    let mut h = SEED ^ (data.len() as u32);
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = chunks.remainder();
    if tail.len() >= 3 {
        h ^= u32::from(tail[2]) << 16;
    }
    if tail.len() >= 2 {
        h ^= u32::from(tail[1]) << 8;
    }
    if !tail.is_empty() {
        h ^= u32::from(tail[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h
}

/// The partition Kafka's default partitioner gives a non-null key among `partitions`.
pub fn partition_for_key(key: &[u8], partitions: u32) -> u32 {
    assert!(partitions > 0, "a topic has at least one partition");
    (murmur2(key) & 0x7fff_ffff) % partitions
}

#[cfg(test)]
mod tests {
    use super::*;

    // Values from Kafka's UtilsTest.testMurmur2 (as Java ints).
    #[test]
    fn matches_kafka_utils_test() {
        let cases: [(&[u8], i32); 6] = [
            (b"21", -973_932_308),
            (b"foobar", -790_332_482),
            (b"a-little-bit-long-string", -985_981_536),
            (b"a-little-bit-longer-string", -1_486_304_829),
            (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58_897_971),
            (b"abc", 479_470_107),
        ];
        for (data, want) in cases {
            let got = murmur2(data) as i32;
            assert_eq!(got, want, "{:?}", String::from_utf8_lossy(data));
        }
    }

    #[test]
    fn partition_is_in_range() {
        for i in 0..1000u32 {
            assert!(partition_for_key(&i.to_be_bytes(), 7) < 7);
        }
    }
}
