//! A descriptor shortage (EMFILE) is an error that names the topic-partition and the file and
//! says to raise RLIMIT_NOFILE, and a fetch answers it per partition with
//! KAFKA_STORAGE_ERROR; nothing panics, nothing is written, and the log works again with all
//! its data once descriptors are free. Covers the reopen of an idle active segment (read,
//! append, flush), an old segment's read, a roll, and a new log.
//!
//! The open files limit is per process, so the test runs alone in a child process of the test
//! binary (the harness started again with this one test selected): it lowers the soft limit,
//! fills the remaining descriptors with `/dev/null`, and restores both before it ends.

use std::fs::File;
use std::path::Path;

use crate::compression::Codec;
use crate::config::LogConfig;
use crate::descriptors_tests::fds_in;
use crate::error::LogError;
use crate::log::Log;
use crate::server::request::error_code_for;
use crate::sys::{open_files_limit, set_open_files_soft_limit};

/// Kafka's error code for a storage failure of one partition.
const KAFKA_STORAGE_ERROR: i16 = 56;

fn config() -> LogConfig {
    LogConfig { segment_bytes: 600, index_interval_bytes: 128, segment_index_bytes: 1024, ..LogConfig::default() }
}

fn put(log: &Log, i: usize) -> Result<i64, LogError> {
    let kv = (Some(format!("k{i}").into_bytes()), Some(format!("value {i} of the shortage test").into_bytes()));
    log.append_records_as_leader(&[kv], 0, 1, Codec::None).map(|r| r.base_offset)
}

/// The highest descriptor number in use.
fn max_fd() -> u64 {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u64>().ok())
        .max()
        .unwrap_or(0)
}

fn assert_shortage(e: &LogError, tp: &str, file: &Path) {
    assert!(matches!(e, LogError::TooManyOpenFiles { .. }), "{e:?}");
    let s = e.to_string();
    assert!(s.contains(tp), "{s}");
    assert!(s.contains(&file.display().to_string()), "{s}");
    assert!(s.contains("too many open files (raise the open files limit, RLIMIT_NOFILE)"), "{s}");
    assert_eq!(error_code_for(e), KAFKA_STORAGE_ERROR);
}

/// Fills every descriptor the process may still open (after lowering the soft limit);
/// dropping the result gives them back.
fn exhaust_descriptors() -> Vec<File> {
    set_open_files_soft_limit(max_fd() + 16).unwrap();
    let mut hog = Vec::new();
    let exhausted = loop {
        match File::open("/dev/null") {
            Ok(f) => hog.push(f),
            Err(e) => break e,
        }
    };
    assert_eq!(exhausted.raw_os_error(), Some(libc::EMFILE));
    hog
}

/// Set in the child process that runs the test body.
const ALONE: &str = "LOGBROKER_FD_LIMIT_TEST_ALONE";

#[test]
fn descriptor_shortage_is_a_named_per_partition_error() {
    if std::env::var_os(ALONE).is_some() {
        return shortage_in_this_process();
    }
    run_alone("descriptor_shortage_is_a_named_per_partition_error");
}

/// Many more partitions written at once than the open files limit allows: every append
/// succeeds, because the process-wide budget (`open_log_files.rs`: half the soft limit)
/// closes the least recently used `.log` handles; the descriptors held under the logs'
/// directory stay within it, and every record reads back, before and after reopening.
#[test]
fn writing_more_partitions_than_descriptors_stays_within_the_budget() {
    if std::env::var_os(ALONE).is_some() {
        return budget_in_this_process();
    }
    run_alone("writing_more_partitions_than_descriptors_stays_within_the_budget");
}

fn budget_in_this_process() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().canonicalize().unwrap();
    let (soft, _) = open_files_limit().unwrap();
    let limit = max_fd() + 64;
    set_open_files_soft_limit(limit).unwrap();
    let budget = crate::open_log_files::budget();
    assert_eq!(budget, usize::try_from(limit / 2).unwrap());
    let partitions = 3 * usize::try_from(limit).unwrap(); // three times the limit, six times the budget
    let logs: Vec<Log> = (0..partitions)
        .map(|p| {
            Log::open(&root.join(format!("wide-{p}")), "wide", i32::try_from(p).unwrap(), config(), None, 0).unwrap()
        })
        .collect();
    let mut peak = 0;
    for round in 0..2 {
        for (p, log) in logs.iter().enumerate() {
            put(log, round * partitions + p).unwrap_or_else(|e| panic!("round {round}, wide-{p}: {e}"));
            if p % 97 == 0 {
                peak = peak.max(fds_in(&root));
            }
        }
    }
    let held = fds_in(&root);
    assert!(held <= budget && peak <= budget, "held {held}, peak {peak}, budget {budget}");
    assert!(crate::open_log_files::open_count() <= budget);
    for (p, log) in logs.iter().enumerate() {
        let values: Vec<_> = log.read_records(0, None, None).unwrap().into_iter().map(|r| r.value).collect();
        let want: Vec<_> =
            (0..2).map(|r| Some(format!("value {} of the shortage test", r * partitions + p).into_bytes())).collect();
        assert_eq!(values, want, "wide-{p}");
    }
    for log in logs {
        log.close().unwrap();
    }
    assert_eq!(fds_in(&root), 0);
    set_open_files_soft_limit(soft).unwrap();
}

/// Runs the test `test_name` of this module in a child process of the test binary (the open
/// files limit and the descriptor budget are per process), with `ALONE` set.
fn run_alone(test_name: &str) {
    let module = module_path!().split_once("::").map_or(module_path!(), |(_, m)| m);
    let name = format!("{module}::{test_name}");
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([name.as_str(), "--exact", "--test-threads=1", "--nocapture"])
        .env(ALONE, "1")
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{name} failed in its own process:\n{text}");
    assert!(text.contains("1 passed"), "{name} did not run in its own process:\n{text}");
}

fn shortage_in_this_process() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("orders-3");
    let log = Log::open(&dir, "orders", 3, config(), None, 0).unwrap();
    let mut n = 0;
    while log.segment_count() < 5 {
        put(&log, n).unwrap();
        n += 1;
    }
    log.update_high_watermark(log.log_end_offset());
    // Idle: every file is closed, the active segment's included.
    log.maybe_flush(1).unwrap();
    log.maybe_flush(1).unwrap();
    assert_eq!(log.open_file_count(), 0);
    let (soft, _) = open_files_limit().unwrap();

    // 1. The active segment's file is closed: neither a read nor an append can reopen it.
    let active = dir.join(format!("{:020}.log", log.segment_base_offsets().last().unwrap()));
    let leo = log.log_end_offset();
    let hog = exhaust_descriptors();
    let e = log.read(leo - 1, 1 << 20, None, true).unwrap_err();
    assert_shortage(&e, "orders-3", &active);
    let e = put(&log, n).unwrap_err();
    assert_shortage(&e, "orders-3", &active);
    assert_eq!(log.log_end_offset(), leo, "the refused append wrote nothing");
    // A flush of the closed file needs a descriptor too: refused, the recovery point stays.
    let rp = log.recovery_point();
    assert!(log.flush().is_err());
    assert_eq!(log.recovery_point(), rp);
    drop(hog);
    set_open_files_soft_limit(soft).unwrap();
    assert!(log.read(leo - 1, 1 << 20, None, true).unwrap().is_some(), "reopened");
    log.flush().unwrap();
    assert_eq!(log.recovery_point(), leo);

    // 2. The active segment's file is open (just read): reads of it go on, a read of an old
    // segment cannot reopen its file, and an append that rolls cannot write the rolled
    // segment's index files: refused, nothing written.
    let hog = exhaust_descriptors();
    let first = dir.join("00000000000000000000.log");
    let e = log.read(0, 1 << 20, None, true).unwrap_err();
    assert_shortage(&e, "orders-3", &first);
    assert!(log.read(leo - 1, 1 << 20, None, true).unwrap().is_some());
    let mut refused = None;
    for _ in 0..50 {
        match put(&log, n) {
            Ok(_) => n += 1,
            Err(e) => {
                refused = Some(e);
                break;
            }
        }
    }
    let e = refused.expect("an append rolls within 50 records of 600-byte segments");
    let rolled_to = log.log_end_offset();
    let rolled = log.segment_base_offsets().last().copied().unwrap();
    assert_shortage(&e, "orders-3", &dir.join(format!("{rolled:020}.")));
    assert_eq!(log.log_end_offset(), rolled_to, "the refused append wrote nothing");
    // Opening another partition needs no descriptor (a new log touches no file until its
    // first write); its first append fails the same way and writes nothing.
    let fresh = Log::open(&t.path().join("fresh-0"), "fresh", 0, config(), None, 0).unwrap();
    let e = put(&fresh, 0).unwrap_err();
    assert_shortage(&e, "fresh-0", &t.path().join("fresh-0").join("00000000000000000000.log"));
    assert_eq!(fresh.log_end_offset(), 0);

    drop(hog);
    set_open_files_soft_limit(soft).unwrap();
    assert_eq!(put(&fresh, 0).unwrap(), 0, "the retried first append creates the log");

    // Descriptors are back: the same calls work, and the log is whole.
    assert!(log.read(0, 1 << 20, None, true).unwrap().is_some());
    put(&log, n).unwrap();
    let records = log.read_records(0, None, None).unwrap();
    assert_eq!(records.len(), n + 1);
    assert!(records.iter().enumerate().all(|(i, r)| Ok(r.offset) == i64::try_from(i)));
    log.close().unwrap();
    let log = Log::open(&dir, "orders", 3, config(), None, 0).unwrap();
    assert_eq!(log.read_records(0, None, None).unwrap().len(), n + 1);
    Log::open(&t.path().join("fresh-0"), "fresh", 0, config(), None, 0).unwrap();
}
