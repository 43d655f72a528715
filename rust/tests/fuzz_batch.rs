//! Fuzzing the batch validator and the leader append path with proptest.
//!
//! cargo-fuzz needs a nightly toolchain, which this build environment cannot reach, so
//! proptest is the fuzzer here: arbitrary bytes, and valid batches (every codec) mutated by
//! byte flips, truncations, insertions and header-field overwrites. The property is the one
//! a fuzz target checks: no panic, only `Err`, and anything accepted is really valid (it
//! survives a round trip through a log). Failing inputs are kept in
//! `fuzz_batch.proptest-regressions`, committed next to this file.

use crate::batch::{self, Check, Control, SliceSource};
use crate::builder::{read_all_values, BatchBuilder, Rec};
use crate::compression::Codec;
use crate::config::LogConfig;
use crate::log::Log;
use proptest::prelude::*;

fn valid_batch(codec: usize, n: usize, seed: u8) -> Vec<u8> {
    let mut b = BatchBuilder::new().codec(Codec::ALL[codec % 5]).base_timestamp(1_700_000_000_000);
    for i in 0..n {
        let v = vec![seed.wrapping_add(i as u8); (seed as usize + i) % 40];
        b = b.record(Rec::kv(&[i as u8], &v).header(b"h", Some(b"x")).ts_delta(i as i64));
    }
    b.build()
}

#[derive(Debug, Clone)]
enum Mutation {
    Flip(usize, u8),
    Truncate(usize),
    Insert(usize, Vec<u8>),
    /// Overwrite a 4-byte header field (length, epoch, crc, lastOffsetDelta, count...).
    Field(usize, i32),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), 1u8..=255).prop_map(|(a, x)| Mutation::Flip(a, x)),
        any::<usize>().prop_map(Mutation::Truncate),
        (any::<usize>(), proptest::collection::vec(any::<u8>(), 1..8)).prop_map(|(a, v)| Mutation::Insert(a, v)),
        (prop_oneof![Just(8usize), Just(12), Just(17), Just(23), Just(57)], any::<i32>())
            .prop_map(|(a, v)| Mutation::Field(a, v)),
    ]
}

fn apply(data: &mut Vec<u8>, m: &Mutation) {
    if data.is_empty() {
        return;
    }
    match m {
        Mutation::Flip(a, x) => {
            let i = a % data.len();
            data[i] ^= x;
        }
        Mutation::Truncate(a) => data.truncate(a % data.len()),
        Mutation::Insert(a, v) => {
            let i = a % data.len();
            data.splice(i..i, v.iter().copied());
        }
        Mutation::Field(at, v) => {
            if data.len() >= at + 4 {
                data[*at..at + 4].copy_from_slice(&v.to_be_bytes());
            }
        }
    }
}

/// Runs the framing loop at the full check level; must not panic.
fn validate(data: &[u8]) -> bool {
    let r = batch::scan(&mut SliceSource(data), 0, Check::Full, None, |_| Ok(Control::Continue)).unwrap();
    let _ = batch::scan(&mut SliceSource(data), 0, Check::Framing, Some(0), |_| Ok(Control::Continue)).unwrap();
    let _ = batch::validate_batch(data, 0);
    r.error.is_none()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..400)) {
        validate(&data);
    }

    #[test]
    fn arbitrary_header_with_magic_2_never_panics(mut data in proptest::collection::vec(any::<u8>(), 61..300), codec in 0u8..8) {
        let len = (data.len() - 12) as i32;
        data[8..12].copy_from_slice(&len.to_be_bytes());
        data[16] = 2;
        data[22] = (data[22] & !7) | codec;
        let crc = crc32c::crc32c(&data[21..]);
        data[17..21].copy_from_slice(&crc.to_be_bytes());
        validate(&data);
    }

    #[test]
    fn mutated_batches_never_panic(
        codec in 0usize..5,
        n in 1usize..8,
        seed in any::<u8>(),
        muts in proptest::collection::vec(mutation(), 1..4),
    ) {
        let mut data = valid_batch(codec, n, seed);
        data.extend_from_slice(&valid_batch(codec + 1, n, seed.wrapping_add(1)));
        for m in &muts {
            apply(&mut data, m);
        }
        validate(&data);
    }

    #[test]
    fn leader_append_of_mutated_data_is_all_or_nothing(
        codec in 0usize..5,
        seed in any::<u8>(),
        muts in proptest::collection::vec(mutation(), 1..3),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let log = Log::open(dir.path(), "fuzz", 0, LogConfig::default(), None, 0).unwrap();
        let mut data = valid_batch(codec, 3, seed);
        for m in &muts {
            apply(&mut data, m);
        }
        match log.append_as_leader(data.clone(), 0, 0) {
            Ok(r) => {
                // Accepted: it was valid, and reads back as exactly what was counted.
                prop_assert!(validate(&data));
                let got = read_all_values(&log, 0).unwrap();
                prop_assert_eq!(got.len() as i64, r.record_count);
            }
            Err(e) => {
                prop_assert!(e.is_batch_error() || matches!(e, crate::error::LogError::RecordTooLarge { .. }), "{e}");
                prop_assert_eq!(log.log_end_offset(), 0);
                prop_assert_eq!(log.size_bytes(), 0);
            }
        }
    }

    #[test]
    fn compressed_garbage_never_panics(codec in 1usize..5, body in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = crate::compression::decompress(Codec::ALL[codec], &body, 1 << 20);
    }
}
