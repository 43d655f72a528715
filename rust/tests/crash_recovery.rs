//! Crash test: write batches, then damage the newest segment the way a crash (or a bad disk)
//! would: cut the `.log` at a random byte, or flip random bytes in its tail; reopen without
//! the clean-shutdown marker. The recovered log must be a prefix of what was written, its
//! indexes must serve reads from any offset, and appends must continue from the new LEO.

use crate::builder::{read_all_values, BatchBuilder, Rec};
use crate::compression::Codec;
use crate::config::LogConfig;
use crate::log::Log;
use crate::segment::file_name;
use proptest::prelude::*;

fn config() -> LogConfig {
    LogConfig { segment_bytes: 4000, index_interval_bytes: 150, segment_index_bytes: 4096, ..LogConfig::default() }
}

/// Writes `n` batches and returns (dir, values in offset order, clean-closed?).
fn write(dir: &std::path::Path, n: usize, codec_seed: usize, close: bool) -> Vec<Vec<u8>> {
    let log = Log::open(dir, "crash", 0, config(), None, 0).unwrap();
    let mut values = Vec::new();
    for i in 0..n {
        let codec = Codec::ALL[(codec_seed + i) % Codec::ALL.len()];
        let mut b = BatchBuilder::new().codec(codec).base_timestamp(i as i64 * 100);
        for j in 0..=((i + codec_seed) % 4) {
            let v = format!("batch {i} record {j} {}", "x".repeat((i * 7 + j) % 50)).into_bytes();
            b = b.record(Rec::kv(format!("{i}").as_bytes(), &v).ts_delta(j as i64));
            values.push(v);
        }
        log.append_as_leader(b.build(), (i / 10) as i32, i as i64).unwrap();
    }
    if close {
        log.close().unwrap();
    }
    values
}

fn last_segment(dir: &std::path::Path) -> std::path::PathBuf {
    let mut logs: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    logs.sort();
    logs.pop().unwrap()
}

fn check_prefix_and_usable(dir: &std::path::Path, written: &[Vec<u8>]) -> Result<(), TestCaseError> {
    // No marker: even a previously clean log is recovered from the recovery point on.
    let _ = std::fs::remove_file(dir.join(".clean-shutdown"));
    let log = Log::open(dir, "crash", 0, config(), Some(0), 0).unwrap();
    let leo = log.log_end_offset();
    let got = read_all_values(&log, 0).unwrap();
    prop_assert_eq!(got.len() as i64, leo);
    prop_assert!(got.len() <= written.len());
    for (i, (o, v)) in got.iter().enumerate() {
        prop_assert_eq!(*o, i as i64);
        prop_assert_eq!(v, &written[i], "recovered log is a prefix of what was written");
    }
    // Index lookups from every offset land on the batch holding it.
    for o in 0..leo {
        let r = log.read(o, 1, None, true).unwrap().unwrap();
        let h = crate::batch::BatchHeader::parse(&r.read_to_vec().unwrap());
        prop_assert!(h.base_offset <= o && o <= h.last_offset());
    }
    // The epoch cache does not point beyond the LEO.
    prop_assert!(log.epoch_entries().iter().all(|e| e.1 < leo.max(1)));
    // Appends continue densely.
    let r = log.append_as_leader(BatchBuilder::new().record(Rec::value(b"after")).build(), 99, 0).unwrap();
    prop_assert_eq!(r.base_offset, leo);
    let again = read_all_values(&log, leo).unwrap();
    prop_assert_eq!(again, vec![(leo, b"after".to_vec())]);
    drop(log);
    // And a second unclean open of the repaired log changes nothing.
    let log = Log::open(dir, "crash", 0, config(), None, 0).unwrap();
    prop_assert_eq!(log.log_end_offset(), leo + 1);
    prop_assert_eq!(log.recovery_report().bytes_truncated, 0);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn cut_at_random_byte(n in 1usize..60, seed in 0usize..5, cut in any::<u32>(), close in any::<bool>()) {
        let dir = tempfile::tempdir().unwrap();
        let written = write(dir.path(), n, seed, close);
        let seg = last_segment(dir.path());
        let len = std::fs::metadata(&seg).unwrap().len();
        let f = std::fs::OpenOptions::new().write(true).open(&seg).unwrap();
        f.set_len(u64::from(cut) % (len + 1)).unwrap();
        drop(f);
        check_prefix_and_usable(dir.path(), &written)?;
    }

    #[test]
    fn flip_bytes_in_tail(
        n in 1usize..60,
        seed in 0usize..5,
        flips in proptest::collection::vec((any::<u32>(), 1u8..=255), 1..6),
        tail in 1u32..600,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let written = write(dir.path(), n, seed, false);
        let seg = last_segment(dir.path());
        let mut data = std::fs::read(&seg).unwrap();
        let len = data.len() as u32;
        let from = len.saturating_sub(tail);
        for (at, x) in flips {
            if len > from {
                data[(from + at % (len - from)) as usize] ^= x;
            }
        }
        std::fs::write(&seg, &data).unwrap();
        check_prefix_and_usable(dir.path(), &written)?;
    }

    #[test]
    fn garbage_appended_after_last_batch(n in 1usize..30, garbage in proptest::collection::vec(any::<u8>(), 1..200)) {
        let dir = tempfile::tempdir().unwrap();
        let written = write(dir.path(), n, 0, false);
        let seg = last_segment(dir.path());
        let mut data = std::fs::read(&seg).unwrap();
        data.extend_from_slice(&garbage);
        std::fs::write(&seg, &data).unwrap();
        check_prefix_and_usable(dir.path(), &written)?;
        let log = Log::open(dir.path(), "crash", 0, config(), None, 0).unwrap();
        prop_assert_eq!(log.log_end_offset() as usize, written.len() + 1, "valid batches all kept");
    }
}

#[test]
fn corruption_in_an_older_segment_drops_everything_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let written = write(dir.path(), 80, 1, false);
    let mut logs: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    logs.sort();
    assert!(logs.len() >= 3, "{}", logs.len());
    let mut data = std::fs::read(&logs[1]).unwrap();
    let mid = data.len() / 2;
    data[mid] ^= 0x40;
    std::fs::write(&logs[1], &data).unwrap();
    let log = Log::open(dir.path(), "crash", 0, config(), Some(0), 0).unwrap();
    let report = log.recovery_report();
    assert!(report.segments_dropped >= 1, "{report:?}");
    assert!(report.first_error.is_some());
    assert_eq!(log.segment_count(), 2);
    let got = read_all_values(&log, 0).unwrap();
    assert!(got.len() < written.len());
    assert!(got.iter().enumerate().all(|(i, (o, v))| *o == i as i64 && *v == written[i]));
    assert!(!dir.path().join(file_name(log.log_end_offset(), ".log")).exists() || log.segment_count() == 2);
}

#[test]
fn segments_below_the_recovery_point_are_not_rescanned() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), 80, 1, false);
    {
        let log = Log::open(dir.path(), "crash", 0, config(), None, 0).unwrap();
        log.flush().unwrap();
        assert!(log.segment_count() >= 3);
    }
    let log = Log::open(dir.path(), "crash", 0, config(), None, 0).unwrap();
    assert_eq!(log.recovery_report().segments_recovered, 1, "only the segment holding the recovery point");
}

/// Index entries of a segment and whether every offset's lookup lands on its batch.
fn index_counts_and_lookups(log: &Log) -> Vec<(usize, usize)> {
    for o in log.log_start_offset()..log.log_end_offset() {
        let r = log.read(o, 1, None, true).unwrap().unwrap();
        let h = crate::batch::BatchHeader::parse(&r.read_to_vec().unwrap());
        assert!(
            h.base_offset <= o && o <= h.last_offset(),
            "offset {o} read batch {}..={}",
            h.base_offset,
            h.last_offset()
        );
    }
    log.index_entry_counts()
}

/// The active segment's index entries live in memory until a flush, roll or close writes
/// them (`index_file.rs`): a crash before that (a drop without close) leaves its index files
/// missing or behind, and the unclean open rebuilds them from the log.
#[test]
fn active_segment_index_never_written_is_rebuilt() {
    for flushed_once in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let config = LogConfig { segment_bytes: 1 << 20, ..config() };
        let log = Log::open(dir.path(), "crash", 0, config.clone(), None, 0).unwrap();
        let mut values = Vec::new();
        for i in 0..60 {
            if flushed_once && i == 30 {
                log.flush().unwrap();
            }
            let v = format!("value {i} {}", "y".repeat(i % 40)).into_bytes();
            log.append_as_leader(
                BatchBuilder::new().base_timestamp(i as i64 * 10).record(Rec::value(&v)).build(),
                0,
                i as i64,
            )
            .unwrap();
            values.push(v);
        }
        let before = index_counts_and_lookups(&log);
        assert_eq!(before.len(), 1);
        assert!(before[0].0 > 10, "{before:?}");
        drop(log); // a crash: nothing closed, the index entries never all written
        let index = dir.path().join(file_name(0, ".index"));
        let on_disk = std::fs::metadata(&index).map_or(0, |m| m.len() as usize / 8);
        assert!(on_disk < before[0].0, "flushed once {flushed_once}: {on_disk} entries on disk");
        assert_eq!(index.exists(), flushed_once);
        let log = Log::open(dir.path(), "crash", 0, config.clone(), None, 0).unwrap();
        assert_eq!(log.recovery_report().segments_recovered, 1);
        assert_eq!(log.recovery_report().bytes_truncated, 0);
        assert_eq!(index_counts_and_lookups(&log), before, "rebuilt");
        assert_eq!(read_all_values(&log, 0).unwrap().into_iter().map(|(_, v)| v).collect::<Vec<_>>(), values);
        assert_eq!(std::fs::metadata(&index).unwrap().len() as usize, before[0].0 * 8, "and written");
        assert_eq!(log.offset_for_timestamp(445).unwrap(), Some((45, 450)));
    }
}

/// A rolled segment's index files are written at the roll but fsynced only by the flush that
/// lets the recovery point pass it: if a crash loses those writes, the segment is above the
/// recovery point and its indexes are rebuilt.
#[test]
fn rolled_segment_index_lost_above_the_recovery_point_is_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), "crash", 0, config(), None, 0).unwrap();
    let mut values = Vec::new();
    for i in 0..120 {
        let v = format!("value {i} {}", "z".repeat(i % 50)).into_bytes();
        log.append_as_leader(BatchBuilder::new().record(Rec::value(&v)).build(), 0, i as i64).unwrap();
        values.push(v);
    }
    assert!(log.segment_count() >= 3);
    let before = index_counts_and_lookups(&log);
    drop(log);
    // The writes of every index file lost (empty or missing).
    for e in std::fs::read_dir(dir.path()).unwrap() {
        let p = e.unwrap().path();
        match p.extension().and_then(|e| e.to_str()) {
            Some("index") => std::fs::write(&p, b"").unwrap(),
            Some("timeindex") => std::fs::remove_file(&p).unwrap(),
            _ => {}
        }
    }
    let log = Log::open(dir.path(), "crash", 0, config(), None, 0).unwrap();
    assert_eq!(log.recovery_report().segments_recovered, before.len(), "nothing was flushed: all recovered");
    assert_eq!(index_counts_and_lookups(&log), before);
    assert_eq!(read_all_values(&log, 0).unwrap().into_iter().map(|(_, v)| v).collect::<Vec<_>>(), values);
}
