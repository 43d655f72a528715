//! File descriptors a log holds (issue 29; the policy is in `log.rs`, "File descriptors"):
//! none once idle (the flush sweep closes the active segment's `.log` too; index files are
//! never held), the active segment's `.log` while appended to, plus at most
//! `MAX_OPEN_INACTIVE_SEGMENT_FILES` recently read inactive `.log` files, whatever the
//! segment count; appends, reads, flushes, retention, truncation, compaction and reopening
//! still work with the files closed. Also what creating a new, empty log writes (`log.rs`,
//! "Creating a log").
//!
//! Descriptors are counted in `/proc/self/fd`, keeping those that point into the log's own
//! directory, so tests running in parallel threads do not see each other's files.
//!
//! `broker_like_descriptor_counts` and `new_empty_log_cost` print the figures for 1,000 logs
//! (run with `--nocapture`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::builder::{read_all_values, LogBuilder};
use crate::compression::Codec;
use crate::config::LogConfig;
use crate::log::{Log, MAX_OPEN_INACTIVE_SEGMENT_FILES};

/// Descriptors of this process open on files under `dir` (also `fd_limit.rs`'s count).
pub(crate) fn fds_in(dir: &Path) -> usize {
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

/// The active segment's `.log` plus the recently read inactive ones.
const BOUND: usize = 1 + MAX_OPEN_INACTIVE_SEGMENT_FILES;

/// Two sweeps: the first marks, the second closes files not read in between.
fn sweep(log: &Log, now: i64) {
    log.maybe_flush(now).unwrap();
    log.maybe_flush(now).unwrap();
}

/// The file names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    v.sort();
    v
}

fn values(log: &Log, from: i64) -> Vec<Vec<u8>> {
    read_all_values(log, from).unwrap().into_iter().map(|(_, v)| v).collect()
}

#[test]
fn many_segments_hold_the_active_one_plus_recently_read() {
    let (_t, dir) = tempdir();
    let lb = many_segments(&dir);
    let n = fds_in(&dir);
    assert!(n <= BOUND, "{n} descriptors for {} segments", lb.log.segment_count());
    assert_eq!(n, lb.log.open_file_count());
    // Reading every segment from the start opens old files one by one, never more than the cap.
    assert_eq!(read_all_values(&lb.log, 0).unwrap().into_iter().map(|(_, v)| v).collect::<Vec<_>>(), lb.model);
    assert!(fds_in(&dir) <= BOUND, "{}", fds_in(&dir));
    // Idle: nothing, the active segment included.
    sweep(&lb.log, lb.now_ms);
    assert_eq!(fds_in(&dir), 0);
    // A read of an old segment after its file was closed reopens it (read-only).
    let bases = lb.log.segment_base_offsets();
    let r = lb.log.read(bases[1], 1 << 20, None, true).unwrap().unwrap();
    assert_eq!(r.position, 0);
    assert!(!r.read_to_vec().unwrap().is_empty());
    assert_eq!(fds_in(&dir), 1);
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
    assert_eq!(lb.log.open_file_count(), 0);
    assert_eq!(fds_in(&dir), 1);
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
    assert_eq!(fds_in(&dir), 0);
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
    assert_eq!(fds_in(&dir), 0);
    // Truncation into a closed inactive segment: it becomes the active one, reopened
    // read-write, and takes appends.
    let bases = lb.log.segment_base_offsets();
    let cut = bases[1] + 1;
    lb.log.truncate_to(cut).unwrap();
    assert_eq!(lb.log.segment_count(), 2);
    assert_eq!(fds_in(&dir), 1, "the new active segment's .log, the old one closed");
    let leo = lb.log.log_end_offset();
    assert!(leo <= cut);
    lb.model.truncate((leo - lb.model_start) as usize);
    lb.append(2, 3, 40).unwrap();
    assert_eq!(
        read_all_values(&lb.log, start).unwrap().into_iter().map(|(_, v)| v).collect::<Vec<_>>(),
        lb.model[(start - lb.model_start) as usize..]
    );
    assert!(fds_in(&dir) <= BOUND);
}

#[test]
fn reopen_holds_nothing() {
    let (_t, dir) = tempdir();
    let lb = many_segments(&dir);
    let model = lb.model.clone();
    lb.log.close().unwrap();
    assert_eq!(fds_in(&dir), 0, "a closed log holds nothing");
    drop(lb);
    for clean in [true, false] {
        let log = Log::open(&dir, "t", 0, small(), None, 0).unwrap();
        assert_eq!(fds_in(&dir), 0, "clean {clean}");
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
    assert_eq!(fds_in(&dir), 0);
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
        let r = log
            .append_records_as_leader(
                &[(Some(key.clone().into_bytes()), Some(value.clone().into_bytes()))],
                0,
                1,
                Codec::None,
            )
            .unwrap();
        latest.insert(key, (r.base_offset, value));
    }
    log.update_high_watermark(log.log_end_offset());
    assert!(log.segment_count() > 10);
    sweep(&log, 1);
    assert_eq!(fds_in(&dir), 0);
    let r = log.compact(2, true).unwrap();
    assert!(r.segments_cleaned > 0 && r.records_removed > 0, "{r:?}");
    assert!(fds_in(&dir) <= BOUND, "{}", fds_in(&dir));
    let mut seen = HashMap::new();
    let records = log.read_records(0, None, None).unwrap();
    for rec in records.clone() {
        seen.insert(
            String::from_utf8(rec.key.unwrap()).unwrap(),
            (rec.offset, String::from_utf8(rec.value.unwrap()).unwrap()),
        );
    }
    assert_eq!(seen, latest);
    sweep(&log, 3);
    assert_eq!(fds_in(&dir), 0);
    // The cleaned segments reopen after a restart like any other.
    log.close().unwrap();
    drop(log);
    let config = LogConfig {
        segment_bytes: 600,
        index_interval_bytes: 128,
        segment_index_bytes: 4096,
        cleanup_compact: true,
        cleanup_delete: false,
        ..LogConfig::default()
    };
    let log = Log::open(&dir, "t", 0, config, None, 0).unwrap();
    assert_eq!(fds_in(&dir), 0);
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
    assert_eq!(fds_in(&dir), 0, "the active segment's closed file was fsynced by path");
}

/// Figures for the issue: 1,000 logs of 1 and of 10 segments, descriptors held right after
/// writing, after reading every log from the start, idle (after the flush sweeps), and
/// while appended to again.
#[test]
fn broker_like_descriptor_counts() {
    for segments in [1usize, 10] {
        let (_t, dir) = tempdir();
        let config = LogConfig {
            segment_bytes: 1000,
            index_interval_bytes: 256,
            segment_index_bytes: 1024,
            ..LogConfig::default()
        };
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
        // Busy again: each log appended to (and its tail read) between two sweeps.
        for lb in &mut logs {
            lb.append(1, 1, 10).unwrap();
            let leo = lb.log.log_end_offset();
            lb.log.read(leo - 1, 1 << 20, None, true).unwrap().unwrap();
            lb.log.maybe_flush(lb.now_ms).unwrap();
        }
        let appending = fds_in(&dir);
        println!(
            "1000 logs x {segments} segment(s): {written} descriptors after writing, {read} after reading everything, \
             {idle} idle, {appending} while appended to"
        );
        assert_eq!(idle, 0);
        assert_eq!(appending, 1000, "one per busy log: the active segment's .log");
        assert!(read <= BOUND * 1000 && written <= BOUND * 1000);
        if segments == 1 {
            assert_eq!(written, 1000);
        }
    }
}

#[test]
fn idle_active_segment_is_closed_and_reopened() {
    let (_t, dir) = tempdir();
    let mut lb = LogBuilder::open(&dir, small()).unwrap();
    assert_eq!(fds_in(&dir), 0, "a new log holds nothing");
    lb.append(2, 3, 20).unwrap();
    assert_eq!(fds_in(&dir), 1, "the active segment's .log, no index file");
    // Busy between sweeps: stays open.
    lb.log.maybe_flush(lb.now_ms).unwrap();
    lb.append(1, 3, 20).unwrap();
    lb.log.maybe_flush(lb.now_ms).unwrap();
    assert_eq!(fds_in(&dir), 1);
    // Idle for a sweep: closed, with bytes not yet fsynced.
    lb.log.maybe_flush(lb.now_ms).unwrap();
    assert_eq!((fds_in(&dir), lb.log.open_file_count()), (0, 0));
    assert_eq!(lb.log.recovery_point(), 0);
    // A read reopens it (read-write: the next append uses the same descriptor).
    assert_eq!(values(&lb.log, 0), lb.model);
    assert_eq!(fds_in(&dir), 1);
    lb.append(1, 3, 20).unwrap();
    assert_eq!(fds_in(&dir), 1);
    sweep(&lb.log, lb.now_ms);
    assert_eq!(fds_in(&dir), 0);
    // An append reopens it and writes at the end.
    lb.append(3, 2, 20).unwrap();
    assert_eq!(values(&lb.log, 0), lb.model);
    sweep(&lb.log, lb.now_ms);
    assert_eq!(fds_in(&dir), 0);
    // A flush of the closed file: by path, and the recovery point reaches the LEO.
    lb.log.flush().unwrap();
    assert_eq!(lb.log.recovery_point(), lb.log.log_end_offset());
    assert_eq!(fds_in(&dir), 0);
    // Appends roll over closed files as well; everything reads back after a reopen.
    for _ in 0..40 {
        sweep(&lb.log, lb.now_ms);
        lb.append(1, 3, 40).unwrap();
    }
    assert!(lb.log.segment_count() > 3);
    assert_eq!(values(&lb.log, 0), lb.model);
    lb.log.close().unwrap();
    let log = Log::open(&dir, "t", 0, small(), None, 0).unwrap();
    assert_eq!(values(&log, 0), lb.model);
}

#[test]
fn region_of_the_active_segment_outlives_its_close() {
    let (_t, dir) = tempdir();
    let mut lb = LogBuilder::open(&dir, small()).unwrap();
    lb.append(2, 2, 20).unwrap();
    let region = lb.log.read(0, 1 << 20, None, true).unwrap().unwrap();
    let bytes = region.read_to_vec().unwrap();
    sweep(&lb.log, lb.now_ms);
    assert_eq!(lb.log.open_file_count(), 0);
    assert_eq!(fds_in(&dir), 1, "the region's own handle");
    assert_eq!(region.read_to_vec().unwrap(), bytes);
    // Appends go on through a new descriptor; the region still reads its bytes.
    lb.append(1, 2, 20).unwrap();
    assert_eq!(region.read_to_vec().unwrap(), bytes);
    assert_eq!(lb.log.offset_after(&region).unwrap(), Some(4));
    drop(region);
    assert_eq!(fds_in(&dir), 1);
}

/// The active segment's index entries stay in memory: the files are written at flush, roll
/// and close only.
#[test]
fn active_index_files_are_written_at_flush_roll_and_close() {
    let (_t, dir) = tempdir();
    let config = LogConfig { index_interval_bytes: 64, ..small() };
    let config = LogConfig { segment_bytes: 1 << 20, segment_index_bytes: 1 << 20, ..config };
    let mut lb = LogBuilder::open(&dir, config.clone()).unwrap();
    assert_eq!(names(&dir), ["00000000000000000000.log"], "a new log writes nothing else");
    for _ in 0..20 {
        lb.append(1, 2, 30).unwrap();
    }
    let (entries, time_entries) = lb.log.index_entry_counts()[0];
    assert!(entries > 5 && time_entries >= 1, "{entries} {time_entries}");
    assert!(!dir.join("00000000000000000000.index").exists(), "nothing written before a flush");
    lb.log.flush().unwrap();
    let len = |suffix: &str| std::fs::metadata(dir.join(format!("00000000000000000000{suffix}"))).unwrap().len();
    assert_eq!(
        (len(".index"), len(".timeindex")),
        (entries as u64 * 8, time_entries as u64 * 12),
        "exactly the entries"
    );
    for _ in 0..10 {
        lb.append(1, 2, 30).unwrap();
    }
    assert_eq!(len(".index"), entries as u64 * 8, "lags until the next flush");
    lb.log.close().unwrap();
    let (entries, time_entries) = lb.log.index_entry_counts()[0];
    assert_eq!((len(".index"), len(".timeindex")), (entries as u64 * 8, time_entries as u64 * 12));
    let log = Log::open(&dir, "t", 0, config, None, 0).unwrap();
    assert_eq!(log.recovery_report().segments_recovered, 0, "a clean close leaves trusted indexes");
    assert_eq!(log.index_entry_counts()[0], (entries, time_entries));
}

/// Figures for the issue: the cost of creating 1,000 new, empty logs (ms per log; count the
/// fsyncs by hand: `strace -f -c -e trace=fsync,fdatasync <test binary> new_empty_log_cost`).
/// A new log writes nothing until its first append (then its directory and first `.log`),
/// holds no descriptor, and reopens (after a crash as after a clean close) as the same empty
/// log.
#[test]
fn new_empty_log_cost() {
    let (_t, dir) = tempdir();
    let started = std::time::Instant::now();
    let mut logs = Vec::new();
    for p in 0..1000 {
        logs.push(Log::open(&dir.join(format!("t-{p}")), "t", p, LogConfig::default(), None, 0).unwrap());
    }
    let per_log_ms = started.elapsed().as_secs_f64() * 1000.0 / 1000.0;
    println!("1000 new empty logs: {per_log_ms:.3} ms per log, {} descriptors", fds_in(&dir));
    assert_eq!(fds_in(&dir), 0);
    assert!(names(&dir).is_empty(), "no directory before the first write");
    // The first write creates the directory and the first segment's `.log` (the epoch it
    // starts is written by the first flush).
    logs[8].append_records_as_leader(&[(None, Some(b"w".to_vec()))], 0, 1, Codec::None).unwrap();
    assert_eq!(names(&dir.join("t-8")), ["00000000000000000000.log"]);
    logs[9].close().unwrap();
    assert!(!dir.join("t-9").exists(), "closing a log never written writes nothing");
    // Dropped unclosed (a crash) and reopened: the same empty log, and it takes appends.
    drop(logs);
    let log = Log::open(&dir.join("t-8"), "t", 8, LogConfig::default(), None, 0).unwrap();
    assert_eq!(values(&log, 0), [b"w".to_vec()]);
    let log = Log::open(&dir.join("t-7"), "t", 7, LogConfig::default(), None, 0).unwrap();
    assert_eq!((log.log_start_offset(), log.log_end_offset(), log.recovery_point()), (0, 0, 0));
    assert!(log.epoch_entries().is_empty());
    assert_eq!(log.append_records_as_leader(&[(None, Some(b"v".to_vec()))], 0, 1, Codec::None).unwrap().base_offset, 0);
    log.flush().unwrap();
    assert_eq!(log.recovery_point(), 1);
    log.close().unwrap();
    let log = Log::open(&dir.join("t-7"), "t", 7, LogConfig::default(), None, 0).unwrap();
    assert_eq!(log.recovery_report().segments_recovered, 0);
    assert_eq!(values(&log, 0), [b"v".to_vec()]);
}
