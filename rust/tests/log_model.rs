//! Property test: the `Log` against a model (a Vec of appended records).
//!
//! Random sequences of appends (every codec), reads, rolls, truncations, retention,
//! DeleteRecords, clean and unclean reopens, on tiny segments so rolls and multi-segment
//! paths happen constantly. After every step: offsets are dense from the log start to the
//! LEO and a full read returns exactly the model's records.

use std::collections::HashMap;

use crate::builder::{read_all_values, BatchBuilder, Rec};
use crate::compression::Codec;
use crate::config::LogConfig;
use crate::log::Log;
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Append { batches: usize, per: usize, size: usize, codec: usize },
    Read { at: u16, max_bytes: u16 },
    Roll,
    Truncate { at: u16 },
    Retention { bytes: u16 },
    DeleteRecords { at: u16 },
    ReopenClean,
    ReopenUnclean,
    TruncateFully { gap: u8 },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (1usize..4, 1usize..6, 0usize..80, 0usize..5).prop_map(|(batches, per, size, codec)| Op::Append { batches, per, size, codec }),
        3 => (any::<u16>(), 1u16..3000).prop_map(|(at, max_bytes)| Op::Read { at, max_bytes }),
        1 => Just(Op::Roll),
        1 => any::<u16>().prop_map(|at| Op::Truncate { at }),
        1 => (0u16..3000).prop_map(|bytes| Op::Retention { bytes }),
        1 => any::<u16>().prop_map(|at| Op::DeleteRecords { at }),
        1 => Just(Op::ReopenClean),
        1 => Just(Op::ReopenUnclean),
        1 => (0u8..5).prop_map(|gap| Op::TruncateFully { gap }),
    ]
}

struct Model {
    start: i64,
    /// (offset, value, base offset of its batch)
    records: Vec<(i64, Vec<u8>, i64)>,
}

impl Model {
    fn leo(&self) -> i64 {
        self.records.last().map_or(self.start, |r| r.0 + 1)
    }
}

fn config(retention_bytes: i64) -> LogConfig {
    LogConfig {
        segment_bytes: 2000,
        index_interval_bytes: 100,
        segment_index_bytes: 120,
        segment_ms: 1000,
        retention_bytes,
        retention_ms: -1,
        ..LogConfig::default()
    }
}

fn config_map(retention_bytes: i64) -> HashMap<String, String> {
    let c = config(retention_bytes);
    [
        ("segment.bytes", c.segment_bytes.to_string()),
        ("index.interval.bytes", c.index_interval_bytes.to_string()),
        ("segment.index.bytes", c.segment_index_bytes.to_string()),
        ("segment.ms", c.segment_ms.to_string()),
        ("retention.bytes", retention_bytes.to_string()),
        ("retention.ms", "-1".to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect()
}

fn pick(at: u16, lo: i64, hi: i64) -> i64 {
    if hi <= lo {
        lo
    } else {
        lo + i64::from(at) % (hi - lo + 1)
    }
}

fn check(log: &Log, m: &Model) -> Result<(), TestCaseError> {
    prop_assert_eq!(log.log_start_offset(), m.start);
    prop_assert_eq!(log.log_end_offset(), m.leo());
    let got = read_all_values(log, m.start).unwrap();
    prop_assert_eq!(got.len(), m.records.len());
    for ((o, v), (mo, mv, _)) in got.iter().zip(&m.records) {
        prop_assert_eq!(o, mo, "offsets dense and equal to the model");
        prop_assert_eq!(v, mv);
    }
    Ok(())
}

fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let mut now = 1_000i64;
    let mut log = Log::open(dir.path(), "model", 0, config(-1), None, now).unwrap();
    let mut m = Model { start: 0, records: vec![] };
    let mut counter = 0u32;
    for op in ops {
        now += 10;
        match op {
            Op::Append { batches, per, size, codec } => {
                let mut req = Vec::new();
                let mut vals = Vec::new();
                let first = m.leo();
                let mut next = first;
                for _ in 0..batches {
                    let base = next;
                    let mut b = BatchBuilder::new().codec(Codec::ALL[codec]).base_timestamp(now);
                    for _ in 0..per {
                        counter += 1;
                        let mut v = format!("{counter}:").into_bytes();
                        v.resize(v.len() + size, b'a' + (counter % 26) as u8);
                        b = b.record(Rec::value(&v));
                        vals.push((next, v, base));
                        next += 1;
                    }
                    req.extend_from_slice(&b.build());
                }
                let r = log.append_as_leader(req, 0, now).unwrap();
                prop_assert_eq!((r.base_offset, r.last_offset), (first, next - 1));
                m.records.extend(vals);
            }
            Op::Read { at, max_bytes } => {
                let leo = m.leo();
                let from = pick(at, m.start, leo);
                let region = log.read(from, u64::from(max_bytes), None, true).unwrap();
                match region {
                    None => prop_assert_eq!(from, leo),
                    Some(r) => {
                        prop_assert!(from < leo);
                        let bytes = r.read_to_vec().unwrap();
                        let h = crate::batch::BatchHeader::parse(&bytes);
                        prop_assert!(h.base_offset <= from && from <= h.last_offset());
                        prop_assert!(r.length <= u64::from(max_bytes).max(h.size()));
                    }
                }
                if from > 0 && from < m.start {
                    prop_assert!(log.read(m.start - 1, 100, None, true).is_err());
                }
                prop_assert!(log.read(leo + 1, 100, None, true).is_err());
            }
            Op::Roll => {
                now += 1000;
                log.maybe_roll(now).unwrap();
            }
            Op::Truncate { at } => {
                let o = pick(at, m.start, m.leo());
                log.truncate_to(o).unwrap();
                if let Some(i) = m.records.iter().position(|r| r.0 == o) {
                    let base = m.records[i].2;
                    m.records.retain(|r| r.0 < base);
                }
            }
            Op::Retention { bytes } => {
                log.update_config(&config_map(i64::from(bytes))).unwrap();
                log.update_high_watermark(m.leo());
                log.enforce_retention(now).unwrap();
                let start = log.log_start_offset();
                prop_assert!(start >= m.start);
                m.start = start;
                m.records.retain(|r| r.0 >= start);
                log.update_config(&config_map(-1)).unwrap();
            }
            Op::DeleteRecords { at } => {
                log.update_high_watermark(m.leo());
                let o = pick(at, m.start, m.leo());
                prop_assert_eq!(log.delete_records_before(o).unwrap(), o);
                m.start = o;
                m.records.retain(|r| r.0 >= o);
            }
            Op::ReopenClean => {
                log.close().unwrap();
                log = Log::open(dir.path(), "model", 0, config(-1), Some(log.recovery_point()), now).unwrap();
            }
            Op::ReopenUnclean => {
                drop(log);
                log = Log::open(dir.path(), "model", 0, config(-1), None, now).unwrap();
            }
            Op::TruncateFully { gap } => {
                let o = m.leo() + i64::from(gap);
                log.truncate_fully_and_start_at(o).unwrap();
                m.start = o;
                m.records.clear();
            }
        }
        check(&log, &m)?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn log_matches_model(ops in proptest::collection::vec(op(), 1..40)) {
        run(ops)?;
    }
}
