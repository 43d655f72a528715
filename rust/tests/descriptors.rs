//! File descriptors a log holds (issue 29, item 4; the policy is in `log.rs`, "File
//! descriptors"): the active segment's three plus at most `MAX_OPEN_INACTIVE_SEGMENT_FILES`
//! recently read inactive `.log` files, whatever the segment count; reads, retention,
//! truncation, compaction and reopening still work with the other files closed.
//!
//! Descriptors are counted in `/proc/self/fd`, keeping those that point into the log's own
//! directory, so tests running in parallel threads do not see each other's files.
//!
//! `broker_like_descriptor_counts` prints the figures for 1,000 logs (run with
//! `--nocapture`).
#![allow(clippy::cast_possible_truncation, clippy::cast_possible_wrap, clippy::cast_sign_loss)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use _core::builder::{read_all_values, LogBuilder};
use _core::compression::Codec;
use _core::config::LogConfig;
use _core::log::{Log, MAX_OPEN_INACTIVE_SEGMENT_FILES};

/// Descriptors of this process open on files under `dir`.
fn fds_in(dir: &Path) -> usize {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| std::fs::read_link(e.path()).is_ok_and(|t| t.starts_with(dir)))
        .count()
}

/// The temp dir, canonical (descriptor links name the real path).
fn tempdir() -> (tempfile::TempDir, PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let p = t.path().canonicalize().unwrap();
    (t, p)
}

fn small() -> LogConfig {
    LogConfig { segment_bytes: 1000, index_interval_bytes: 256, segment_index_bytes: 1024, ..LogConfig::default() }
}

/// A log of many small segments, everything below the HW.
fn many_segments(dir: &Path) -> LogBuilder {
    let mut lb = LogBuilder::open(dir, small()).unwrap();
    for _ in 0..60 {
        lb.append(1, 3, 40).unwrap();
    }
    lb.log.update_high_watermark(i64::MAX);
    assert!(lb.log.segment_count() >= 10, "{}", lb.log.segment_count());
    lb
}

const BOUND: usize = 3 + MAX_OPEN_INACTIVE_SEGMENT_FILES;

/// Two sweeps: the first marks, the second closes files not read in between.
fn sweep(log: &Log, now: i64) {
    log.maybe_flush(now).unwrap();
    log.maybe_flush(now).unwrap();
}

#[test]
fn many_segments_hold_the_active_three_plus_recently_read() {
    let (_t, dir) = tempdir();
    let lb = many_segments(&dir);
    let n = fds_in(&dir);
    assert!(n <= BOUND, "{n} descriptors for {} segments", lb.log.segment_count());
    assert_eq!(n, lb.log.open_file_count());
    // Reading every segment from the start opens old files one by one, never more than the cap.
    assert_eq!(read_all_values(&lb.log, 0).unwrap().into_iter().map(|(_, v)| v).collect::<Vec<_>>(), lb.model);
    assert!(fds_in(&dir) <= BOUND, "{}", fds_in(&dir));
    // Idle: only the active segment.
    sweep(&lb.log, lb.now_ms);
    assert_eq!(fds_in(&dir), 3);
    // A read of an old segment after its file was closed reopens it (read-only).
    let bases = lb.log.segment_base_offsets();
    let r = lb.log.read(bases[1], 1 << 20, None, true).unwrap().unwrap();
    assert_eq!(r.position, 0);
    assert!(!r.read_to_vec().unwrap().is_empty());
    assert_eq!(fds_in(&dir), 4);
    assert_eq!(lb.log.offset_after(&r).unwrap(), Some(bases[2]));
    drop(r);
    assert_eq!(lb.log.offset_for_timestamp(0).unwrap().map(|(o, _)| o), Some(0));
    assert!(fds_in(&dir) <= BOUND);
}

#[test]
fn region_outlives_closed_and_deleted_segment_file() {
    let (_t, dir) = tempdir();
    let lb = many_segments(&dir);
    let region = lb.log.read(0, 1 << 20, None, true).unwrap().unwrap();
    let bytes = region.read_to_vec().unwrap();
    sweep(&lb.log, lb.now_ms);
    // The segment dropped its handle; the region still holds one.
    assert_eq!(lb.log.open_file_count(), 3);
    assert_eq!(fds_in(&dir), 4);
    assert_eq!(region.read_to_vec().unwrap(), bytes);
    // The region is still recognised as the segment's (the file was reopened meanwhile).
    lb.log.read(0, 10, None, true).unwrap();
    assert!(lb.log.offset_after(&region).unwrap().is_some());
    // Retention deletes it: the region keeps reading the unlinked file.
    let second = lb.log.segment_base_offsets()[1];
    lb.log.delete_records_before(second).unwrap();
    assert_eq!(lb.log.segment_base_offsets()[0], second);
    assert_eq!(region.read_to_vec().unwrap(), bytes);
    assert_eq!(lb.log.offset_after(&region).unwrap(), None);
}

#[test]
fn retention_and_truncation_work_with_files_closed() {
    let (_t, dir) = tempdir();
    let mut lb = many_segments(&dir);
    sweep(&lb.log, lb.now_ms);
    assert_eq!(fds_in(&dir), 3);
    // Retention by bytes deletes closed segments.
    let mut m = HashMap::new();
    m.insert("segment.bytes".to_owned(), "1000".to_owned());
    m.insert("index.interval.bytes".to_owned(), "256".to_owned());
    m.insert("segment.index.bytes".to_owned(), "1024".to_owned());
    m.insert("retention.bytes".to_owned(), "5000".to_owned());
    lb.log.update_config(&m).unwrap();
    let before = lb.log.segment_count();
    let deleted = lb.log.enforce_retention(lb.now_ms).unwrap();
    assert!(deleted > 0 && lb.log.segment_count() == before - deleted);
    let start = lb.log.log_start_offset();
    let want = lb.model[(start - lb.model_start) as usize..].to_vec();
    assert_eq!(read_all_values(&lb.log, start).unwrap().into_iter().map(|(_, v)| v).collect::<Vec<_>>(), want);
    sweep(&lb.log, lb.now_ms);
    assert_eq!(fds_in(&dir), 3);
    // Truncation into a closed inactive segment: it becomes the active one, reopened
    // read-write with its indexes, and takes appends.
    let bases = lb.log.segment_base_offsets();
    let cut = bases[1] + 1;
    lb.log.truncate_to(cut).unwrap();
    assert_eq!(lb.log.segment_count(), 2);
    assert_eq!(fds_in(&dir), 3, "the new active segment's three, the old one closed");
    let leo = lb.log.log_end_offset();
    assert!(leo <= cut);
    lb.model.truncate((leo - lb.model_start) as usize);
    lb.append(2, 3, 40).unwrap();
    assert_eq!(read_all_values(&lb.log, start).unwrap().into_iter().map(|(_, v)| v).collect::<Vec<_>>(), lb.model[(start - lb.model_start) as usize..]);
    assert!(fds_in(&dir) <= BOUND);
}

#[test]
fn reopen_holds_only_the_active_segment() {
    let (_t, dir) = tempdir();
    let lb = many_segments(&dir);
    let model = lb.model.clone();
    lb.log.close().unwrap();
    assert_eq!(fds_in(&dir), 0, "a closed log holds nothing");
    drop(lb);
    for clean in [true, false] {
        let log = Log::open(&dir, "t", 0, small(), None, 0).unwrap();
        assert_eq!(fds_in(&dir), 3, "clean {clean}");
        assert_eq!(read_all_values(&log, 0).unwrap().into_iter().map(|(_, v)| v).collect::<Vec<_>>(), model);
        assert!(fds_in(&dir) <= BOUND);
        if clean {
            log.close().unwrap();
        } // else: dropped unclosed, the next open recovers
    }
    // After an unclean shutdown with everything above the recovery point, every segment is
    // recovered (indexes rebuilt, files written) and closed again.
    std::fs::remove_file(dir.join("recovery-point-checkpoint")).unwrap();
    let log = Log::open(&dir, "t", 0, small(), Some(0), 0).unwrap();
    assert!(log.recovery_report().segments_recovered > 1);
    assert_eq!(fds_in(&dir), 3);
    assert_eq!(read_all_values(&log, 0).unwrap().into_iter().map(|(_, v)| v).collect::<Vec<_>>(), model);
}

#[test]
fn compaction_works_with_files_closed() {
    let (_t, dir) = tempdir();
    let config = LogConfig {
        segment_bytes: 600,
        index_interval_bytes: 128,
        segment_index_bytes: 4096,
        cleanup_compact: true,
        cleanup_delete: false,
        ..LogConfig::default()
    };
    let log = Log::open(&dir, "t", 0, config, None, 0).unwrap();
    let mut latest = HashMap::new();
    for i in 0..200 {
        let key = format!("k{}", i % 7);
        let value = format!("value {i}");
        let r = log.append_records_as_leader(&[(Some(key.clone().into_bytes()), Some(value.clone().into_bytes()))], 0, 1, Codec::None).unwrap();
        latest.insert(key, (r.base_offset, value));
    }
    log.update_high_watermark(log.log_end_offset());
    assert!(log.segment_count() > 10);
    sweep(&log, 1);
    assert_eq!(fds_in(&dir), 3);
    let r = log.compact(2, true).unwrap();
    assert!(r.segments_cleaned > 0 && r.records_removed > 0, "{r:?}");
    assert!(fds_in(&dir) <= BOUND, "{}", fds_in(&dir));
    let mut seen = HashMap::new();
    let records = log.read_records(0, None, None).unwrap();
    for rec in records.clone() {
        seen.insert(String::from_utf8(rec.key.unwrap()).unwrap(), (rec.offset, String::from_utf8(rec.value.unwrap()).unwrap()));
    }
    assert_eq!(seen, latest);
    sweep(&log, 3);
    assert_eq!(fds_in(&dir), 3);
    // The cleaned segments reopen after a restart like any other.
    log.close().unwrap();
    drop(log);
    let config = LogConfig { segment_bytes: 600, index_interval_bytes: 128, segment_index_bytes: 4096, cleanup_compact: true, cleanup_delete: false, ..LogConfig::default() };
    let log = Log::open(&dir, "t", 0, config, None, 0).unwrap();
    assert_eq!(fds_in(&dir), 3);
    assert_eq!(log.read_records(0, None, None).unwrap(), records);
}

#[test]
fn flush_of_closed_rolled_segments_advances_the_recovery_point() {
    let (_t, dir) = tempdir();
    let lb = many_segments(&dir);
    sweep(&lb.log, lb.now_ms);
    // Everything rolled was fsynced (closed files by path) and the recovery point moved up.
    assert_eq!(lb.log.recovery_point(), lb.log.segment_base_offsets().last().copied().unwrap());
    assert!(!lb.log.maybe_flush(lb.now_ms).unwrap(), "nothing left to fsync");
    lb.log.flush().unwrap();
    assert_eq!(lb.log.recovery_point(), lb.log.log_end_offset());
    assert_eq!(fds_in(&dir), 3);
}

/// Figures for the issue: 1,000 logs of 1 and of 10 segments, descriptors held right after
/// writing, after reading every log from the start, and idle (after the flush sweeps).
#[test]
fn broker_like_descriptor_counts() {
    for segments in [1usize, 10] {
        let (_t, dir) = tempdir();
        let config = LogConfig { segment_bytes: 1000, index_interval_bytes: 256, segment_index_bytes: 1024, ..LogConfig::default() };
        let mut logs = Vec::new();
        for p in 0..1000 {
            let mut lb = LogBuilder::open(&dir.join(format!("t-{p}")), config.clone()).unwrap();
            while lb.log.segment_count() < segments {
                lb.append(1, 3, 40).unwrap();
            }
            lb.append(1, 3, 40).unwrap();
            lb.log.update_high_watermark(i64::MAX);
            logs.push(lb);
        }
        let written = fds_in(&dir);
        for lb in &logs {
            read_all_values(&lb.log, 0).unwrap();
        }
        let read = fds_in(&dir);
        for lb in &logs {
            sweep(&lb.log, lb.now_ms);
        }
        let idle = fds_in(&dir);
        println!("1000 logs x {segments} segment(s): {written} descriptors after writing, {read} after reading everything, {idle} idle");
        assert_eq!(idle, 3 * 1000);
        assert!(read <= BOUND * 1000 && written <= BOUND * 1000);
    }
}
