//! Unit tests of `Log` (the partition log), built on the `LogBuilder` fixture.
use std::collections::HashMap;

use super::*;
use crate::batch::{self as b, BatchHeader, EndTxnMarker};
use crate::builder::{read_all_values, BatchBuilder, LogBuilder, Rec};
use crate::compression::Codec;

fn small(segment_bytes: u64) -> LogConfig {
    LogConfig { segment_bytes, index_interval_bytes: 256, segment_index_bytes: 1024, ..LogConfig::default() }
}

fn reopen(lb: &mut LogBuilder, dir: &Path, config: LogConfig) {
    let log = Log::open(dir, "test", 0, config, None, lb.now_ms).unwrap();
    lb.log = log;
}

fn values_from(lb: &LogBuilder, from: i64) -> Vec<Vec<u8>> {
    read_all_values(&lb.log, from).unwrap().into_iter().map(|(_, v)| v).collect()
}

fn model_from(lb: &LogBuilder, from: i64) -> Vec<Vec<u8>> {
    lb.model[usize::try_from(from - lb.model_start).unwrap()..].to_vec()
}

#[test]
fn append_assigns_dense_offsets_and_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let mut lb = LogBuilder::open(dir.path(), small(1 << 20)).unwrap();
    let r = lb.append(2, 3, 10).unwrap();
    assert_eq!((r.base_offset, r.last_offset, r.record_count, r.batch_count), (0, 5, 6, 2));
    let r = lb.append(1, 4, 10).unwrap();
    assert_eq!((r.base_offset, r.last_offset), (6, 9));
    assert_eq!(lb.log.log_end_offset(), 10);
    assert_eq!(values_from(&lb, 0), lb.model);
    assert_eq!(values_from(&lb, 7), model_from(&lb, 7));
}

#[test]
fn every_codec_appends_and_reads() {
    for codec in Codec::ALL {
        let dir = tempfile::tempdir().unwrap();
        let mut lb = LogBuilder::open(dir.path(), small(1 << 20)).unwrap();
        lb.codec = codec;
        lb.append(3, 5, 50).unwrap();
        assert_eq!(values_from(&lb, 0), lb.model, "{}", codec.name());
    }
}

#[test]
fn stored_batches_carry_offsets_and_leader_epoch() {
    let dir = tempfile::tempdir().unwrap();
    let mut lb = LogBuilder::open(dir.path(), small(1 << 20)).unwrap();
    lb.append(1, 2, 1).unwrap();
    let (batch, _) = lb.make_batch(3, 1);
    lb.log.append_as_leader(batch, 7, 5_000).unwrap();
    let region = lb.log.read(2, 1 << 20, None, true).unwrap().unwrap();
    let bytes = region.read_to_vec().unwrap();
    let (h, _) = b::validate_batch(&bytes, 0).unwrap();
    assert_eq!((h.base_offset, h.partition_leader_epoch, h.last_offset_delta), (2, 7, 2));
    assert_eq!(lb.log.epoch_entries(), vec![(0, 0), (7, 2)]);
    assert_eq!(lb.log.end_offset_for_epoch(0), (0, 2));
    assert_eq!(lb.log.end_offset_for_epoch(7), (7, 5));
    assert_eq!(lb.log.latest_epoch(), Some(7));
}

#[test]
fn bad_batch_rejects_whole_request() {
    let dir = tempfile::tempdir().unwrap();
    let mut lb = LogBuilder::open(dir.path(), small(1 << 20)).unwrap();
    let (good, _) = lb.make_batch(2, 1);
    let (mut bad, _) = lb.make_batch(2, 1);
    let n = bad.len();
    bad[n - 1] ^= 0x55;
    let mut req = good.clone();
    req.extend_from_slice(&bad);
    let e = lb.log.append_as_leader(req, 0, 0).unwrap_err();
    assert!(matches!(e, LogError::CrcMismatch { .. }), "{e}");
    assert!(e.to_string().contains("test-0"), "{e}");
    assert_eq!(lb.log.log_end_offset(), 0);
    assert_eq!(lb.log.size_bytes(), 0);
    let e = lb.log.append_as_leader(good[..good.len() - 3].to_vec(), 0, 0).unwrap_err();
    assert!(matches!(e, LogError::CorruptBatch { .. }), "{e}");
    assert!(matches!(lb.log.append_as_leader(vec![], 0, 0), Err(LogError::InvalidRecord { .. })));
}

#[test]
fn oversized_batch_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig { max_message_bytes: 200, ..small(1 << 20) };
    let mut lb = LogBuilder::open(dir.path(), config).unwrap();
    let (big, _) = lb.make_batch(1, 500);
    let e = lb.log.append_as_leader(big, 0, 0).unwrap_err();
    assert!(matches!(e, LogError::RecordTooLarge { max: 200, .. }), "{e}");
}

#[test]
fn log_append_time_stamps_batches() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig { timestamp_type: TimestampType::LogAppendTime, ..small(1 << 20) };
    let mut lb = LogBuilder::open(dir.path(), config).unwrap();
    let (batch, _) = lb.make_batch(3, 1);
    let r = lb.log.append_as_leader(batch, 0, 777_000).unwrap();
    assert_eq!((r.log_append_time, r.max_timestamp), (777_000, 777_000));
    let bytes = lb.log.read(0, 1 << 20, None, true).unwrap().unwrap().read_to_vec().unwrap();
    let (h, _) = b::validate_batch(&bytes, 0).expect("CRC recomputed");
    assert!(h.is_log_append_time());
    assert_eq!(h.max_timestamp, 777_000);
    assert_eq!(lb.log.offset_for_timestamp(777_000).unwrap(), Some((0, 777_000)));
}

#[test]
fn segments_roll_by_size_and_reads_cross_them() {
    let dir = tempfile::tempdir().unwrap();
    let mut lb = LogBuilder::open(dir.path(), small(1000)).unwrap();
    for _ in 0..20 {
        lb.append(1, 3, 40).unwrap();
    }
    assert!(lb.log.segment_count() > 3, "{}", lb.log.segment_count());
    let bases = lb.log.segment_base_offsets();
    assert!(bases.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(values_from(&lb, 0), lb.model);
    // A read never spans two segments; from a segment's base it starts there.
    let r = lb.log.read(bases[1], 1 << 20, None, true).unwrap().unwrap();
    assert_eq!(r.position, 0);
    for name in [crate::segment::file_name(bases[1], ".log"), crate::segment::file_name(bases[1], ".index")] {
        assert!(dir.path().join(name).exists());
    }
}

#[test]
fn upper_bound_and_min_one_message() {
    let dir = tempfile::tempdir().unwrap();
    let mut lb = LogBuilder::open(dir.path(), small(1 << 20)).unwrap();
    lb.append(1, 2, 10).unwrap(); // 0..1
    lb.append(1, 2, 10).unwrap(); // 2..3
    let per = lb.log.size_bytes() / 2;
    let r = lb.log.read(0, 1 << 20, Some(2), true).unwrap().unwrap();
    assert_eq!(r.length, per, "stops below the HW");
    assert!(lb.log.read(2, 1 << 20, Some(2), true).unwrap().is_none(), "nothing at the HW");
    assert!(lb.log.read(0, 10, None, false).unwrap().is_none());
    assert_eq!(lb.log.read(0, 10, None, true).unwrap().unwrap().length, per);
    assert!(lb.log.read(4, 100, None, true).unwrap().is_none(), "at the LEO: nothing");
    assert!(matches!(lb.log.read(5, 100, None, true), Err(LogError::OffsetOutOfRange { .. })));
}

#[test]
fn clean_reopen_keeps_everything() {
    let dir = tempfile::tempdir().unwrap();
    let mut lb = LogBuilder::open(dir.path(), small(600)).unwrap();
    for _ in 0..10 {
        lb.append(1, 2, 30).unwrap();
    }
    let (leo, segs, epochs) = (lb.log.log_end_offset(), lb.log.segment_count(), lb.log.epoch_entries());
    lb.log.close().unwrap();
    lb.log.close().unwrap();
    assert!(dir.path().join(CLEAN_SHUTDOWN_FILE).exists());
    reopen(&mut lb, dir.path(), small(600));
    let rep = lb.log.recovery_report();
    assert!(rep.clean_shutdown);
    assert_eq!(rep.segments_recovered, 0);
    assert!(!dir.path().join(CLEAN_SHUTDOWN_FILE).exists(), "marker removed on open");
    assert_eq!((lb.log.log_end_offset(), lb.log.segment_count(), lb.log.epoch_entries()), (leo, segs, epochs));
    assert_eq!(values_from(&lb, 0), lb.model);
    lb.append(1, 2, 30).unwrap();
    assert_eq!(values_from(&lb, 0), lb.model);
}

/// The batched clean shutdown (`close_unsynced`, `sync_filesystem`, `mark_clean_shutdown`,
/// `sync_filesystem`): the next open is clean and keeps everything; without the marker step
/// it is recovered, with nothing lost either.
#[test]
fn batched_clean_shutdown_reopens_clean_and_without_the_marker_recovers() {
    for mark in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let mut lb = LogBuilder::open(dir.path(), small(600)).unwrap();
        for _ in 0..10 {
            lb.append(1, 2, 30).unwrap();
        }
        let (leo, segs) = (lb.log.log_end_offset(), lb.log.segment_count());
        let epochs = lb.log.epoch_entries();
        assert!(!epochs.is_empty());
        lb.log.close_unsynced().unwrap();
        // The epoch cache, dirty since the first append, is written (without an fsync: the
        // caller's sync_filesystem makes it durable).
        let on_disk = std::fs::read_to_string(dir.path().join("leader-epoch-checkpoint")).unwrap();
        assert_eq!(on_disk.lines().nth(1), Some(epochs.len().to_string().as_str()), "{on_disk}");
        crate::offset_checkpoint::sync_filesystem(dir.path()).unwrap();
        assert!(!dir.path().join(CLEAN_SHUTDOWN_FILE).exists(), "no marker before the data is synced");
        if mark {
            lb.log.mark_clean_shutdown().unwrap();
            lb.log.mark_clean_shutdown().unwrap(); // once only
            crate::offset_checkpoint::sync_filesystem(dir.path()).unwrap();
            assert!(dir.path().join(CLEAN_SHUTDOWN_FILE).exists());
        }
        reopen(&mut lb, dir.path(), small(600));
        let rep = lb.log.recovery_report();
        assert_eq!(rep.clean_shutdown, mark);
        assert_eq!((lb.log.log_end_offset(), lb.log.segment_count()), (leo, segs));
        assert_eq!(lb.log.epoch_entries(), epochs);
        assert_eq!(values_from(&lb, 0), lb.model);
    }
}

/// A new log (a missing directory) is one empty segment and touches the disk only at its
/// first write, which creates the directory and that segment's `.log`; it keeps what is
/// appended through flush, roll and reopening, clean or not.
#[test]
fn new_log_in_missing_directory_is_empty_and_keeps_appends() {
    let data = tempfile::tempdir().unwrap();
    let dir = data.path().join("t-0");
    let log = Log::open(&dir, "t", 0, small(600), None, 1_000).unwrap();
    assert_eq!((log.log_start_offset(), log.log_end_offset(), log.segment_count()), (0, 0, 1));
    assert!(log.recovery_report().clean_shutdown, "nothing was there to recover");
    assert!(log.read(0, 1 << 20, None, true).unwrap().is_none());
    log.truncate_to(0).unwrap();
    assert_eq!(log.delete_records_before(0).unwrap(), 0);
    log.flush().unwrap();
    assert!(!log.maybe_flush(5_000).unwrap());
    log.close().unwrap();
    assert!(!dir.exists(), "a log never written creates nothing, closed or not");
    let mut lb = LogBuilder::open(&dir, small(600)).unwrap();
    assert!(!dir.exists());
    lb.append(1, 2, 30).unwrap();
    let mut names: Vec<String> =
        std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    assert_eq!(names, vec![crate::segment::file_name(0, ".log")], "the epoch is written by the first flush");
    for _ in 0..9 {
        lb.append(1, 2, 30).unwrap(); // rolls at 600 bytes
    }
    assert!(lb.log.segment_count() > 1);
    lb.log.flush().unwrap();
    assert_eq!(lb.log.recovery_point(), lb.log.log_end_offset());
    drop(std::mem::replace(&mut lb.log, Log::open(&data.path().join("other"), "x", 0, small(600), None, 0).unwrap()));
    reopen(&mut lb, &dir, small(600)); // unclean: no marker
    assert!(!lb.log.recovery_report().clean_shutdown);
    assert_eq!(values_from(&lb, 0), lb.model);
    lb.log.close().unwrap();
    reopen(&mut lb, &dir, small(600));
    assert!(lb.log.recovery_report().clean_shutdown);
    assert_eq!(values_from(&lb, 0), lb.model);
}

/// A follower of a leader whose log starts above 0 restarts its new log there: that write
/// creates the directory too.
#[test]
fn new_log_truncated_fully_before_its_first_append() {
    let data = tempfile::tempdir().unwrap();
    let dir = data.path().join("t-1");
    let log = Log::create(&dir, "t", 1, small(600), 1_000).unwrap();
    log.truncate_fully_and_start_at(42).unwrap();
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (42, 42));
    log.close().unwrap();
    let log = Log::open(&dir, "t", 1, small(600), None, 2_000).unwrap();
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (42, 42));
}

/// `Log::create` is for a replica new to the broker: whatever a directory of its name holds
/// (an earlier topic of the same name) is removed, never loaded.
#[test]
fn create_replaces_a_leftover_directory() {
    let data = tempfile::tempdir().unwrap();
    let dir = data.path().join("t-0");
    let mut lb = LogBuilder::open(&dir, small(600)).unwrap();
    for _ in 0..10 {
        lb.append(1, 2, 30).unwrap();
    }
    lb.log.close().unwrap();
    std::fs::write(dir.join("stray.tmp"), b"x").unwrap();
    let log = Log::create(&dir, "t", 0, small(600), 2_000).unwrap();
    assert_eq!((log.log_start_offset(), log.log_end_offset(), log.segment_count()), (0, 0, 1));
    assert!(!dir.exists(), "the earlier topic's directory is gone");
    // A missing data directory is created by the first write.
    let deep = data.path().join("absent").join("u-3");
    let mut lb = LogBuilder::open(&deep, small(600)).unwrap();
    lb.append(1, 1, 10).unwrap();
    assert!(deep.join(crate::segment::file_name(0, ".log")).exists());
    assert_eq!(values_from(&lb, 0), lb.model);
}

#[test]
fn unclean_reopen_recovers_torn_tail() {
    let dir = tempfile::tempdir().unwrap();
    let mut lb = LogBuilder::open(dir.path(), small(1 << 20)).unwrap();
    for _ in 0..5 {
        lb.append(1, 2, 30).unwrap();
    }
    let size = lb.log.size_bytes();
    drop(std::mem::replace(
        &mut lb.log,
        Log::open(&dir.path().join("other"), "x", 0, small(1 << 20), None, 0).unwrap(),
    ));
    let seg = dir.path().join(crate::segment::file_name(0, ".log"));
    let f = std::fs::OpenOptions::new().write(true).open(&seg).unwrap();
    f.set_len(size - 7).unwrap();
    reopen(&mut lb, dir.path(), small(1 << 20));
    let rep = lb.log.recovery_report();
    assert!(!rep.clean_shutdown);
    assert_eq!(rep.bytes_truncated, size / 5 - 7);
    assert_eq!(lb.log.log_end_offset(), 8);
    lb.model.truncate(8);
    assert_eq!(values_from(&lb, 0), lb.model);
}

#[test]
fn unclean_recovery_restores_leader_epochs_the_checkpoint_lost() {
    let dir = tempfile::tempdir().unwrap();
    let mut lb = LogBuilder::open(dir.path(), small(1 << 20)).unwrap();
    for epoch in [2, 2, 5, 5, 9] {
        let (batch, v) = lb.make_batch(3, 20);
        lb.log.append_as_leader(batch, epoch, 0).unwrap();
        lb.model.extend(v);
        if lb.log.log_end_offset() == 12 {
            lb.log.flush().unwrap(); // the checkpoint is written as the recovery point passes 2 and 5
        }
    }
    assert_eq!(lb.log.epoch_entries(), vec![(2, 0), (5, 6), (9, 12)]);
    // a crash after epoch 9's batch reached the file: the checkpoint does not have it yet
    drop(std::mem::replace(
        &mut lb.log,
        Log::open(&dir.path().join("other"), "x", 0, small(1 << 20), None, 0).unwrap(),
    ));
    let checkpoint = dir.path().join("leader-epoch-checkpoint");
    assert_eq!(std::fs::read_to_string(&checkpoint).unwrap(), "0\n2\n2 0\n5 6\n");
    reopen(&mut lb, dir.path(), small(1 << 20));
    assert!(!lb.log.recovery_report().clean_shutdown);
    assert_eq!(lb.log.epoch_entries(), vec![(2, 0), (5, 6), (9, 12)]);
    assert_eq!(lb.log.end_offset_for_epoch(5), (5, 12));
    assert_eq!(values_from(&lb, 0), lb.model);
    // a clean reopen trusts the checkpoint (the recovery point covers every segment)
    lb.log.close().unwrap();
    reopen(&mut lb, dir.path(), small(1 << 20));
    assert_eq!(lb.log.epoch_entries(), vec![(2, 0), (5, 6), (9, 12)]);
}

#[test]
fn recovery_rebuilds_missing_index() {
    let dir = tempfile::tempdir().unwrap();
    let mut lb = LogBuilder::open(dir.path(), small(1 << 20)).unwrap();
    for _ in 0..20 {
        lb.append(1, 2, 60).unwrap();
    }
    let before = lb.log.index_entry_counts();
    lb.log.close().unwrap();
    std::fs::remove_file(dir.path().join(crate::segment::file_name(0, ".index"))).unwrap();
    reopen(&mut lb, dir.path(), small(1 << 20));
    assert_eq!(lb.log.recovery_report().segments_recovered, 1);
    assert_eq!(lb.log.index_entry_counts()[0].0, before[0].0);
    assert_eq!(values_from(&lb, 13), model_from(&lb, 13));
}

#[test]
fn truncate_to_mid_segment_and_across_segments() {
    let dir = tempfile::tempdir().unwrap();
    let mut lb = LogBuilder::open(dir.path(), small(700)).unwrap();
    for e in 0..12 {
        let (batch, v) = lb.make_batch(2, 30);
        lb.log.append_as_leader(batch, e / 4, 0).unwrap();
        lb.model.extend(v);
    }
    lb.log.update_high_watermark(24);
    let segs = lb.log.segment_count();
    assert!(segs >= 3);
    lb.log.truncate_to(9).unwrap(); // mid batch 8..9: the whole batch goes
    assert_eq!(lb.log.log_end_offset(), 8);
    assert_eq!(lb.log.high_watermark(), 8);
    assert!(lb.log.segment_count() < segs);
    assert_eq!(lb.log.epoch_entries(), vec![(0, 0), (1, 8)].into_iter().filter(|e| e.1 < 8).collect::<Vec<_>>());
    lb.model.truncate(8);
    assert_eq!(values_from(&lb, 0), lb.model);
    lb.append(1, 2, 30).unwrap();
    assert_eq!(values_from(&lb, 0), lb.model);
    // Survives an unclean reopen too.
    reopen(&mut lb, dir.path(), small(700));
    assert_eq!(values_from(&lb, 0), lb.model);
}

#[test]
fn truncate_fully_and_start_at() {
    let dir = tempfile::tempdir().unwrap();
    let mut lb = LogBuilder::open(dir.path(), small(700)).unwrap();
    lb.append(5, 2, 30).unwrap();
    lb.log.truncate_fully_and_start_at(100).unwrap();
    assert_eq!((lb.log.log_start_offset(), lb.log.log_end_offset(), lb.log.high_watermark()), (100, 100, 100));
    assert_eq!(lb.log.segment_base_offsets(), vec![100]);
    let (batch, v) = lb.make_batch(1, 5);
    let mut batch = batch;
    b::set_base_offset(&mut batch, 100);
    lb.log.append_as_follower(batch).unwrap();
    lb.model = v;
    lb.model_start = 100;
    assert_eq!(values_from(&lb, 100), lb.model);
    reopen(&mut lb, dir.path(), small(700));
    assert_eq!(lb.log.log_start_offset(), 100);
}

#[test]
fn follower_append_keeps_offsets_and_checks_contiguity() {
    let dir = tempfile::tempdir().unwrap();
    let lb = LogBuilder::open(dir.path(), small(1 << 20)).unwrap();
    let mut batch = BatchBuilder::new().leader_epoch(3).record(Rec::value(b"a")).record(Rec::value(b"b")).build();
    let r = lb.log.append_as_follower(batch.clone()).unwrap();
    assert_eq!((r.base_offset, r.last_offset), (0, 1));
    assert_eq!(lb.log.epoch_entries(), vec![(3, 0)]);
    let e = lb.log.append_as_follower(batch.clone()).unwrap_err();
    assert!(matches!(e, LogError::NonContiguousAppend { expected: 2, received: 0, .. }), "{e}");
    b::set_base_offset(&mut batch, 2);
    let mut data = batch.clone();
    data.extend_from_slice(&batch[..30]); // a fetch response cut mid-batch
    let r = lb.log.append_as_follower(data).unwrap();
    assert_eq!((r.batch_count, lb.log.log_end_offset()), (1, 4));
    assert_eq!(lb.log.append_as_follower(vec![]).unwrap().batch_count, 0);
}

#[test]
fn retention_by_bytes_keeps_log_start_correct() {
    let dir = tempfile::tempdir().unwrap();
    let mut lb = LogBuilder::open(dir.path(), small(700)).unwrap();
    for _ in 0..30 {
        lb.append(1, 2, 30).unwrap();
    }
    let segs = lb.log.segment_count();
    let config = LogConfig { retention_bytes: 1500, ..small(700) };
    lb.log.update_config(&config_map(&config)).unwrap();
    assert_eq!(lb.log.enforce_retention(lb.now_ms).unwrap(), 0, "nothing deletable above the HW");
    lb.log.update_high_watermark(60);
    let deleted = lb.log.enforce_retention(lb.now_ms).unwrap();
    assert!(deleted > 0 && lb.log.segment_count() == segs - deleted);
    assert!(lb.log.size_bytes() >= 1500 - 700 && lb.log.size_bytes() <= 1500 + 700, "{}", lb.log.size_bytes());
    let start = lb.log.log_start_offset();
    assert_eq!(start, lb.log.segment_base_offsets()[0]);
    assert_eq!(values_from(&lb, start), model_from(&lb, start));
    assert!(matches!(lb.log.read(start - 1, 100, None, true), Err(LogError::OffsetOutOfRange { .. })));
    reopen(&mut lb, dir.path(), config);
    assert_eq!(lb.log.log_start_offset(), start);
}

fn config_map(c: &LogConfig) -> HashMap<String, String> {
    let mut m = HashMap::new();
    m.insert("segment.bytes".into(), c.segment_bytes.to_string());
    m.insert("index.interval.bytes".into(), c.index_interval_bytes.to_string());
    m.insert("segment.index.bytes".into(), c.segment_index_bytes.to_string());
    m.insert("retention.bytes".into(), c.retention_bytes.to_string());
    m.insert("retention.ms".into(), c.retention_ms.to_string());
    m
}

/// A log of segments.bytes 700 with ten batches at time 1,000 and ten at 50,000, all below the HW.
fn old_and_new_segments(dir: &Path) -> LogBuilder {
    let mut lb = LogBuilder::open(dir, small(700)).unwrap();
    lb.now_ms = 1_000;
    for _ in 0..10 {
        lb.append(1, 2, 30).unwrap();
    }
    lb.now_ms = 50_000;
    for _ in 0..10 {
        lb.append(1, 2, 30).unwrap();
    }
    lb.log.update_high_watermark(i64::MAX);
    lb
}

#[test]
fn retention_by_time_never_deletes_active_segment() {
    let dir = tempfile::tempdir().unwrap();
    let lb = old_and_new_segments(dir.path());
    let config = LogConfig { retention_ms: 10_000, ..small(700) };
    lb.log.update_config(&config_map(&config)).unwrap();
    let deleted = lb.log.enforce_retention(55_000).unwrap();
    assert!(deleted > 0);
    let start = lb.log.log_start_offset();
    assert!(start > 0 && start <= 20, "old segments (timestamps ~1000) go: {start}");
    assert_eq!(values_from(&lb, start), model_from(&lb, start));
    let deleted = lb.log.enforce_retention(1_000_000).unwrap();
    assert!(deleted > 0);
    assert_eq!(lb.log.segment_count(), 1, "the active segment stays");
}

#[test]
fn retention_archive_plans_instead_of_deleting() {
    let dir = tempfile::tempdir().unwrap();
    let lb = old_and_new_segments(dir.path());
    let mut m = config_map(&LogConfig { retention_ms: 10_000, ..small(700) });
    m.insert("retention.archive".into(), "true".into());
    lb.log.update_config(&m).unwrap();
    let bases = lb.log.segment_base_offsets();
    let plan = lb.log.retention_plan(55_000).unwrap();
    assert!(!plan.is_empty());
    // The plan is the oldest segments, contiguous, as [base, next base).
    for (i, &(first, end)) in plan.iter().enumerate() {
        assert_eq!((first, end), (bases[i], bases[i + 1]));
    }
    assert!(plan.last().unwrap().1 <= 20, "only the old segments (timestamps ~1000): {plan:?}");
    assert_eq!(lb.log.enforce_retention(55_000).unwrap(), 0, "archive: nothing deleted before the archiver");
    assert_eq!(lb.log.segment_count(), bases.len());
    // The archiver raises the log start offset past the first planned segment: retention
    // deletes just that one, and the plan shrinks to the rest.
    let (_, end0) = plan[0];
    lb.log.delete_records_before(end0).unwrap();
    assert_eq!(lb.log.enforce_retention(55_000).unwrap(), 0, "delete_records_before already removed it");
    assert_eq!(lb.log.retention_plan(55_000).unwrap(), plan[1..].to_vec());
    // Mid-segment log start: the plan starts there.
    let (first1, end1) = plan.get(1).copied().unwrap_or((end0, end0));
    if end1 > first1 + 1 {
        lb.log.delete_records_before(first1 + 1).unwrap();
        assert_eq!(lb.log.retention_plan(55_000).unwrap()[0], (first1 + 1, end1));
    }
    let e = lb.log.update_config(&HashMap::from([("retention.archive".to_string(), "yes".to_string())])).unwrap_err();
    assert!(e.to_string().contains("retention.archive") && e.to_string().contains("yes"), "{e}");
}

#[test]
fn delete_records_before_moves_log_start() {
    let dir = tempfile::tempdir().unwrap();
    let mut lb = LogBuilder::open(dir.path(), small(700)).unwrap();
    for _ in 0..20 {
        lb.append(1, 2, 30).unwrap();
    }
    assert!(matches!(lb.log.delete_records_before(5), Err(LogError::OffsetOutOfRange { .. })), "above HW");
    lb.log.update_high_watermark(40);
    let segs = lb.log.segment_count();
    assert_eq!(lb.log.delete_records_before(15).unwrap(), 15);
    assert!(lb.log.segment_count() < segs);
    assert_eq!(values_from(&lb, 15), model_from(&lb, 15));
    assert_eq!(lb.log.offset_for_timestamp(0).unwrap().map(|x| x.0), Some(15));
    assert_eq!(lb.log.delete_records_before(3).unwrap(), 15, "never moves back");
    lb.log.close().unwrap();
    reopen(&mut lb, dir.path(), small(700));
    assert_eq!(lb.log.log_start_offset(), 15);
    assert_eq!(lb.log.delete_records_before(-1).unwrap(), 15, "-1 is the HW, which starts at log start");
}

#[test]
fn offset_for_timestamp_and_max_timestamp() {
    let dir = tempfile::tempdir().unwrap();
    let mut lb = LogBuilder::open(dir.path(), small(700)).unwrap();
    for i in 0..10 {
        lb.now_ms = 1000 * (i + 1);
        lb.append(1, 3, 30).unwrap(); // timestamps now, now+1, now+2
    }
    assert_eq!(lb.log.offset_for_timestamp(0).unwrap(), Some((0, 1000)));
    assert_eq!(lb.log.offset_for_timestamp(5001).unwrap(), Some((13, 5001)));
    assert_eq!(lb.log.offset_for_timestamp(5003).unwrap(), Some((15, 6000)));
    assert_eq!(lb.log.offset_for_timestamp(10_003).unwrap(), None);
    assert_eq!(lb.log.max_timestamp(), (10_002, 29));
}

#[test]
fn idempotent_producer_duplicate_and_fencing() {
    let dir = tempfile::tempdir().unwrap();
    let lb = LogBuilder::open(dir.path(), small(1 << 20)).unwrap();
    let batch = |epoch: i16, seq: i32, n: usize| {
        BatchBuilder::new().producer(42, epoch, seq).records((0..n).map(|i| Rec::value(&[i as u8]))).build()
    };
    let r = lb.log.append_as_leader(batch(0, 0, 3), 0, 0).unwrap();
    assert_eq!((r.base_offset, r.duplicate), (0, false));
    let r = lb.log.append_as_leader(batch(0, 3, 2), 0, 0).unwrap();
    assert_eq!(r.base_offset, 3);
    let r = lb.log.append_as_leader(batch(0, 0, 3), 0, 0).unwrap();
    assert!(r.duplicate);
    assert_eq!((r.base_offset, r.last_offset, r.size_bytes), (0, 2, 0));
    assert_eq!(lb.log.log_end_offset(), 5, "duplicate wrote nothing");
    assert!(matches!(
        lb.log.append_as_leader(batch(0, 9, 1), 0, 0),
        Err(LogError::OutOfOrderSequence { expected: 5, .. })
    ));
    lb.log.append_as_leader(batch(1, 0, 1), 0, 0).unwrap();
    assert!(matches!(lb.log.append_as_leader(batch(0, 5, 1), 0, 0), Err(LogError::InvalidProducerEpoch { .. })));
    assert_eq!(lb.log.producer_state(42), Some((1, 0, 5)));
    assert_eq!(lb.log.active_producers(), vec![(42, 1, 0, 0, 5, -1, -1)]);
    // The state is rebuilt from batch headers after an unclean reopen, and from the snapshot
    // after a clean one.
    drop(lb);
    let log = Log::open(dir.path(), "test", 0, small(1 << 20), None, 0).unwrap();
    assert_eq!(log.producer_state(42), Some((1, 0, 5)));
    log.close().unwrap();
    let log = Log::open(dir.path(), "test", 0, small(1 << 20), None, 0).unwrap();
    assert_eq!(log.producer_state(42), Some((1, 0, 5)));
    let r = log.append_as_leader(batch(1, 0, 1), 0, 0).unwrap();
    assert!(r.duplicate);
}

#[test]
fn producer_state_follows_truncation() {
    let dir = tempfile::tempdir().unwrap();
    let lb = LogBuilder::open(dir.path(), small(1 << 20)).unwrap();
    for seq in 0..4 {
        let batch = BatchBuilder::new().producer(1, 0, seq).record(Rec::value(b"x")).build();
        lb.log.append_as_leader(batch, 0, 0).unwrap();
    }
    lb.log.truncate_to(2).unwrap();
    assert_eq!(lb.log.producer_state(1), Some((0, 1, 1)));
    let batch = BatchBuilder::new().producer(1, 0, 2).record(Rec::value(b"x")).build();
    assert!(!lb.log.append_as_leader(batch, 0, 0).unwrap().duplicate);
}

#[test]
fn flush_advances_recovery_point() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig { flush_messages: 4, ..small(700) };
    let mut lb = LogBuilder::open(dir.path(), config).unwrap();
    lb.append(1, 2, 10).unwrap();
    assert_eq!(lb.log.recovery_point(), 0);
    lb.append(1, 2, 10).unwrap();
    assert_eq!(lb.log.recovery_point(), 4, "flush.messages reached");
    lb.append(1, 1, 10).unwrap();
    assert!(!lb.log.maybe_flush(lb.now_ms).unwrap());
    lb.log.flush().unwrap();
    assert_eq!(lb.log.recovery_point(), 5);
    assert_eq!(crate::offset_checkpoint::read_single_offset(&dir.path().join(RECOVERY_POINT_FILE)).unwrap(), Some(5));
}

#[test]
fn rolled_segments_are_flushed_by_maybe_flush() {
    let dir = tempfile::tempdir().unwrap();
    let mut lb = LogBuilder::open(dir.path(), small(400)).unwrap();
    for _ in 0..6 {
        lb.append(1, 2, 30).unwrap();
    }
    assert!(lb.log.segment_count() > 1);
    assert!(lb.log.maybe_flush(lb.now_ms).unwrap());
    assert_eq!(lb.log.recovery_point(), *lb.log.segment_base_offsets().last().unwrap());
    assert!(!lb.log.maybe_flush(lb.now_ms).unwrap());
}

#[test]
fn maybe_roll_by_segment_ms() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig { segment_ms: 1000, ..small(1 << 20) };
    let mut lb = LogBuilder::open(dir.path(), config).unwrap();
    assert!(!lb.log.maybe_roll(10_000).unwrap(), "empty segment does not roll");
    lb.now_ms = 5_000;
    lb.append(1, 1, 1).unwrap();
    assert!(!lb.log.maybe_roll(5_500).unwrap());
    assert!(lb.log.maybe_roll(6_000).unwrap());
    assert_eq!(lb.log.segment_base_offsets(), vec![0, 1]);
}

#[test]
fn closed_log_refuses_work_but_reports_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let mut lb = LogBuilder::open(dir.path(), small(1 << 20)).unwrap();
    lb.append(1, 2, 1).unwrap();
    lb.log.close().unwrap();
    assert_eq!(lb.log.log_end_offset(), 2);
    assert!(matches!(lb.append(1, 1, 1), Err(LogError::Closed { .. })));
    assert!(matches!(lb.log.read(0, 10, None, true), Err(LogError::Closed { .. })));
}

#[test]
fn region_survives_segment_deletion() {
    let dir = tempfile::tempdir().unwrap();
    let mut lb = LogBuilder::open(dir.path(), small(400)).unwrap();
    for _ in 0..6 {
        lb.append(1, 2, 30).unwrap();
    }
    let region = lb.log.read(0, 1 << 20, None, true).unwrap().unwrap();
    let before = region.read_to_vec().unwrap();
    lb.log.update_high_watermark(i64::MAX);
    lb.log.delete_records_before(lb.log.log_end_offset()).unwrap();
    assert!(!dir.path().join(crate::segment::file_name(0, ".log")).exists());
    assert_eq!(region.read_to_vec().unwrap(), before);
    let h = BatchHeader::parse(&before);
    assert_eq!(h.base_offset, 0);
}

#[test]
fn delete_removes_directory() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("t-0");
    let mut lb = LogBuilder::open(&dir, small(1 << 20)).unwrap();
    lb.append(1, 1, 1).unwrap();
    lb.log.delete().unwrap();
    assert!(!dir.exists());
    assert!(lb.log.is_closed());
}

#[test]
fn stray_files_removed_on_open() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("00000000000000000000.log.deleted"), b"x").unwrap();
    std::fs::write(dir.path().join("00000000000000000000.log.cleaned"), b"x").unwrap();
    std::fs::write(dir.path().join("00000000000000000000.log.swap"), b"x").unwrap();
    std::fs::write(dir.path().join("00000000000000000077.index"), b"").unwrap();
    let _lb = LogBuilder::open(dir.path(), small(1 << 20)).unwrap();
    let names: Vec<String> =
        std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert!(
        names.iter().all(|n| !matches!(
            std::path::Path::new(n).extension().and_then(|e| e.to_str()),
            Some("deleted" | "cleaned" | "swap")
        )),
        "{names:?}"
    );
    assert!(!names.contains(&"00000000000000000077.index".to_owned()));
}

#[test]
fn update_high_watermark_clamps() {
    let dir = tempfile::tempdir().unwrap();
    let mut lb = LogBuilder::open(dir.path(), small(1 << 20)).unwrap();
    lb.append(1, 5, 1).unwrap();
    assert_eq!(lb.log.update_high_watermark(100), 5);
    assert_eq!(lb.log.update_high_watermark(-3), 0);
    assert_eq!(lb.log.update_high_watermark(3), 3);
}

#[test]
fn concurrent_appends_and_reads() {
    let dir = tempfile::tempdir().unwrap();
    let lb = LogBuilder::open(dir.path(), small(4000)).unwrap();
    let log = &lb.log;
    std::thread::scope(|s| {
        for t in 0..3u8 {
            s.spawn(move || {
                for i in 0..50u8 {
                    let batch = BatchBuilder::new().record(Rec::kv(&[t], &[i])).record(Rec::kv(&[t], &[i])).build();
                    log.append_as_leader(batch, 0, 0).unwrap();
                }
            });
        }
        s.spawn(|| {
            for _ in 0..200 {
                let leo = log.log_end_offset();
                if leo > 0 {
                    let _ = log.read(leo / 2, 1000, None, true).unwrap();
                }
            }
        });
    });
    assert_eq!(log.log_end_offset(), 300);
    let all = read_all_values(log, 0).unwrap();
    assert_eq!(all.len(), 300);
    assert!(all.iter().enumerate().all(|(i, (o, _))| *o == i as i64));
}

fn txn_batch(pid: i64, epoch: i16, seq: i32, n: usize) -> Vec<u8> {
    BatchBuilder::new()
        .producer(pid, epoch, seq)
        .transactional(true)
        .base_timestamp(1_000)
        .records((0..n).map(|i| Rec::kv(format!("k{i}").as_bytes(), format!("txn-{pid}-{seq}-{i}").as_bytes())))
        .build()
}

fn plain_batch(n: usize) -> Vec<u8> {
    BatchBuilder::new()
        .base_timestamp(1_000)
        .records((0..n).map(|i| Rec::value(format!("plain-{i}").as_bytes())))
        .build()
}

fn marker(commit: bool) -> EndTxnMarker {
    EndTxnMarker { commit, coordinator_epoch: 0 }
}

/// Plain 0-1, producer 7's transaction 2-3 (+5-6), producer 8's 4, plain 7; 7 aborts at 8,
/// 8 commits at 9.
fn transactional_log(log: &Log) {
    log.append_as_leader(plain_batch(2), 0, 1_000).unwrap();
    log.append_as_leader(txn_batch(7, 0, 0, 2), 0, 1_000).unwrap();
    log.append_as_leader(txn_batch(8, 0, 0, 1), 0, 1_000).unwrap();
    log.append_as_leader(txn_batch(7, 0, 2, 2), 0, 1_000).unwrap();
    log.append_as_leader(plain_batch(1), 0, 1_000).unwrap();
    log.update_high_watermark(log.log_end_offset());
    assert_eq!(log.last_stable_offset(), 2, "the LSO stops at the oldest open transaction");
    assert_eq!(log.ongoing_transactions(), vec![(2, 7), (4, 8)]);
    log.append_end_txn_marker(7, 0, marker(false), 0, 0, 1_000).unwrap();
    log.update_high_watermark(log.log_end_offset());
    assert_eq!(log.last_stable_offset(), 4);
    log.append_end_txn_marker(8, 0, marker(true), 0, 0, 1_000).unwrap();
    assert_eq!(log.last_stable_offset(), 9, "no open transaction: the LSO is the HW");
    log.update_high_watermark(log.log_end_offset());
    assert_eq!(log.last_stable_offset(), 10);
}

#[test]
fn transactions_move_the_lso_and_index_aborts() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), "t", 0, small(1 << 20), None, 0).unwrap();
    transactional_log(&log);
    let aborted = log.aborted_transactions(0, 10);
    assert_eq!(aborted.len(), 1);
    assert_eq!((aborted[0].producer_id, aborted[0].first_offset, aborted[0].last_offset), (7, 2, 8));
    assert!(log.aborted_transactions(9, 10).is_empty());
    let with = log.read_records_with_markers(0, None).unwrap();
    let markers: Vec<_> = with.iter().filter_map(|r| r.marker.map(|m| (r.offset, r.producer_id, m.commit))).collect();
    assert_eq!(markers, vec![(8, 7, false), (9, 8, true)]);
    assert!(with.iter().filter(|r| r.producer_id == 7 && r.marker.is_none()).all(|r| r.transactional));
    assert_eq!(log.read_records(0, None, None).unwrap().len(), 8, "plain reads skip markers");
}

#[test]
fn offset_after_bounds_a_read_region_by_batches() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), "t", 0, small(300), None, 0).unwrap();
    transactional_log(&log);
    let bases = log.segment_base_offsets();
    assert!(bases.len() > 1, "small segments: {bases:?}");
    // The first batch alone (plain 0-1): the region ends where producer 7's batch starts.
    let one = log.read(0, 1, None, true).unwrap().unwrap();
    assert_eq!(log.offset_after(&one).unwrap(), Some(2));
    assert!(log.aborted_transactions(0, 2).is_empty(), "no abort overlaps offsets 0-1");
    // A read stops at its segment's end: the region ends at the next segment's base.
    let first = log.read(0, 1 << 20, None, true).unwrap().unwrap();
    assert_eq!(log.offset_after(&first).unwrap(), Some(bases[1]));
    // A region from a segment that is gone names no offset.
    log.delete_records_before(bases[1]).unwrap();
    assert_eq!(log.offset_after(&first).unwrap(), None);
}

#[test]
fn clients_cannot_write_markers_and_a_plain_batch_cannot_enter_an_open_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), "t", 0, small(1 << 20), None, 0).unwrap();
    let e = log.append_as_leader(marker(true).to_batch(7, 0, 1_000), 0, 1_000).unwrap_err();
    assert!(matches!(e, LogError::InvalidRecord { .. }), "{e}");
    log.append_as_leader(txn_batch(7, 0, 0, 1), 0, 1_000).unwrap();
    let plain = BatchBuilder::new().producer(7, 0, 1).base_timestamp(1_000).record(Rec::value(b"x")).build();
    let e = log.append_as_leader(plain, 0, 1_000).unwrap_err();
    assert!(matches!(e, LogError::InvalidTxnState { producer_id: 7, .. }) && e.to_string().contains("t-0"), "{e}");
    assert_eq!(log.log_end_offset(), 1, "nothing written");
    // A stale coordinator's marker is fenced once a newer one wrote.
    log.append_end_txn_marker(7, 0, EndTxnMarker { commit: true, coordinator_epoch: 3 }, 0, 0, 1_000).unwrap();
    let e =
        log.append_end_txn_marker(7, 0, EndTxnMarker { commit: false, coordinator_epoch: 2 }, 0, 0, 1_000).unwrap_err();
    assert!(matches!(e, LogError::CoordinatorFenced { current: 3, received: 2, .. }), "{e}");
}

#[test]
fn transactions_v2_marker_at_the_open_epoch_is_refused() {
    // KIP-1228: under transactions v2 a transaction of epoch 4 ends with a marker of epoch 5.
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), "t", 0, small(1 << 20), None, 0).unwrap();
    let commit = EndTxnMarker { commit: true, coordinator_epoch: 0 };
    log.append_as_leader(txn_batch(7, 4, 0, 1), 0, 1_000).unwrap();
    // a stale v2 marker at the open transaction's own epoch would close it: refused, nothing written
    let e = log.append_end_txn_marker(7, 4, commit, 2, 0, 1_000).unwrap_err();
    assert!(
        matches!(e, LogError::InvalidProducerEpoch { current: 4, received: 4, .. }) && e.to_string().contains("t-0"),
        "{e}"
    );
    assert_eq!((log.log_end_offset(), log.last_stable_offset().min(0)), (1, 0));
    // the same marker under transactions v1 closes it, as before
    log.append_end_txn_marker(7, 4, commit, 0, 0, 1_000).unwrap();
    // v2: the bumped epoch closes the next one, and a retry of it (nothing open) is harmless
    log.append_as_leader(txn_batch(7, 4, 1, 1), 0, 1_000).unwrap();
    log.append_end_txn_marker(7, 5, commit, 2, 0, 1_000).unwrap();
    log.append_end_txn_marker(7, 5, commit, 2, 0, 1_000).unwrap();
    assert_eq!(log.log_end_offset(), 5);
}

#[test]
fn transaction_state_survives_clean_and_unclean_reopen() {
    for clean in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let log = Log::open(dir.path(), "t", 0, small(300), None, 0).unwrap();
        transactional_log(&log);
        log.append_as_leader(txn_batch(9, 0, 0, 1), 0, 1_000).unwrap(); // open at 10
        let before = (log.aborted_transactions(0, 100), log.ongoing_transactions());
        if clean {
            log.close().unwrap();
        } else {
            log.flush().unwrap();
        }
        drop(log);
        let log = Log::open(dir.path(), "t", 0, small(300), None, 0).unwrap();
        assert_eq!((log.aborted_transactions(0, 100), log.ongoing_transactions()), before, "clean={clean}");
        assert_eq!(log.first_unstable_offset(), Some(10), "clean={clean}");
    }
}

#[test]
fn truncating_a_marker_reopens_its_transaction_and_follower_appends_apply_markers() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), "t", 0, small(1 << 20), None, 0).unwrap();
    transactional_log(&log);
    // A follower copies everything, markers included, with the same state.
    let fdir = tempfile::tempdir().unwrap();
    let follower = Log::open(fdir.path(), "t", 0, small(1 << 20), None, 0).unwrap();
    let bytes = log.read(0, 1 << 20, None, true).unwrap().unwrap().read_to_vec().unwrap();
    follower.append_as_follower(bytes).unwrap();
    assert_eq!(follower.aborted_transactions(0, 100), log.aborted_transactions(0, 100));
    assert_eq!(follower.first_unstable_offset(), None);
    // Cut both markers: both transactions are open again, the abort is forgotten.
    follower.truncate_to(8).unwrap();
    assert_eq!(follower.ongoing_transactions(), vec![(2, 7), (4, 8)]);
    assert!(follower.aborted_transactions(0, 100).is_empty());
}

/// The stored batches of the whole log, each as its bytes.
fn stored_batches(lb: &LogBuilder) -> Vec<Vec<u8>> {
    let region = lb.log.read(0, 1 << 30, None, true).unwrap().unwrap();
    let mut bytes = &region.read_to_vec().unwrap()[..];
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let n = BatchHeader::parse(bytes).size() as usize;
        out.push(bytes[..n].to_vec());
        bytes = &bytes[n..];
    }
    out
}

#[test]
fn compression_type_recompresses_every_data_batch_of_another_codec() {
    // Every topic codec (and `producer`) against batches of every producer codec: the stored
    // batch has the topic's codec (or the producer's under `producer`), a valid CRC, the same
    // records, and offsets stay dense.
    for target in std::iter::once(None).chain(Codec::ALL.map(Some)) {
        let dir = tempfile::tempdir().unwrap();
        let config = LogConfig { compression: target, ..small(1 << 20) };
        let mut lb = LogBuilder::open(dir.path(), config).unwrap();
        let mut produced = Vec::new();
        for codec in Codec::ALL {
            lb.codec = codec;
            lb.append(2, 3, 40).unwrap();
            produced.extend([codec, codec]);
        }
        let what = format!("compression.type={target:?}");
        assert_eq!(values_from(&lb, 0), lb.model, "{what}");
        let stored = stored_batches(&lb);
        assert_eq!(stored.len(), produced.len(), "{what}");
        let mut next = 0;
        for (bytes, source) in stored.iter().zip(&produced) {
            let (h, _) = b::validate_batch(bytes, 0).unwrap();
            assert_eq!(h.codec(), Some(target.unwrap_or(*source)), "{what}, produced as {}", source.name());
            assert_eq!(h.base_offset, next, "{what}");
            next = h.last_offset() + 1;
        }
    }
}

#[test]
fn recompression_keeps_producer_fields_and_sequences() {
    // An idempotent producer's batches keep producer id, epoch and base sequence through
    // recompression; a retried batch is still recognised as a duplicate.
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig { compression: Some(Codec::Zstd), compression_zstd_level: 9, ..small(1 << 20) };
    let lb = LogBuilder::open(dir.path(), config).unwrap();
    let batch =
        BatchBuilder::new().codec(Codec::Gzip).producer(42, 3, 0).base_timestamp(1_000).records((0..5).map(|i| {
            let mut r = Rec::default();
            r.key = Some(vec![i]);
            r.value = Some(vec![i; 30]);
            r
        }));
    let first = lb.log.append_as_leader(batch.build(), 0, 2_000).unwrap();
    let again = lb.log.append_as_leader(batch.build(), 0, 2_000).unwrap();
    assert!(again.duplicate && again.base_offset == first.base_offset, "{again:?}");
    let stored = stored_batches(&lb);
    assert_eq!(stored.len(), 1);
    let (h, _) = b::validate_batch(&stored[0], 0).unwrap();
    assert_eq!(
        (h.codec(), h.producer_id, h.producer_epoch, h.base_sequence, h.records_count),
        (Some(Codec::Zstd), 42, 3, 0, 5)
    );
    assert_eq!(h.base_timestamp, 1_000);
}

#[test]
fn recompression_past_max_message_bytes_is_refused_and_stores_nothing() {
    // Incompressible values compressed by the producer as "none" fit; gzip framing of random
    // bytes grows them past max.message.bytes: refused, naming the limit, log unchanged.
    let dir = tempfile::tempdir().unwrap();
    let mut noise = 0x1234_5678_u32;
    let value: Vec<u8> = (0..4000)
        .map(|_| {
            noise ^= noise << 13;
            noise ^= noise >> 17;
            noise ^= noise << 5;
            noise as u8
        })
        .collect();
    let plain = BatchBuilder::new().records(std::iter::once({
        let mut r = Rec::default();
        r.value = Some(value.clone());
        r
    }));
    let size = plain.build().len() as u64;
    let config = LogConfig {
        compression: Some(Codec::Gzip),
        compression_gzip_level: 0,
        max_message_bytes: size,
        ..small(1 << 20)
    };
    let lb = LogBuilder::open(dir.path(), config).unwrap();
    let e = lb.log.append_as_leader(plain.build(), 0, 1_000).unwrap_err().to_string();
    assert!(e.contains("max.message.bytes") && e.contains("recompression"), "{e}");
    assert_eq!(lb.log.log_end_offset(), 0);
}

#[test]
fn index_entries_name_batch_last_offsets_as_kafka_writes_them() {
    // Batches of 4 records whose largest timestamp is the second record's: the offset index
    // maps batch *last* offsets, the time index names the last offset of the batch holding the
    // max timestamp (kafka-dump-log checks both), while ListOffsets -3 still gets the record,
    // before and after a reopen that reads the time index back.
    let dir = tempfile::tempdir().unwrap();
    let config = small(1 << 20);
    let mut lb = LogBuilder::open(dir.path(), config.clone()).unwrap();
    for k in 0..20i64 {
        let b = BatchBuilder::new().base_timestamp(1_000 + 100 * k).records([0, 50, 10, 20].into_iter().map(|d| {
            let mut r = Rec::default();
            r.key = Some(b"k".to_vec());
            r.value = Some(vec![b'v'; 40]);
            r.ts_delta(d)
        }));
        lb.log.append_as_leader(b.build(), 0, 5_000).unwrap();
    }
    let want = (1_000 + 100 * 19 + 50, 19 * 4 + 1);
    assert_eq!(lb.log.max_timestamp(), want);
    lb.log.close().unwrap();
    let index = std::fs::read(dir.path().join("00000000000000000000.index")).unwrap();
    let time_index = std::fs::read(dir.path().join("00000000000000000000.timeindex")).unwrap();
    let offsets: Vec<u32> = index.chunks(8).map(|e| u32::from_be_bytes(e[..4].try_into().unwrap())).collect();
    let time_offsets: Vec<u32> =
        time_index.chunks(12).map(|e| u32::from_be_bytes(e[8..12].try_into().unwrap())).collect();
    assert!(offsets.len() >= 3 && time_offsets.len() >= 3, "{offsets:?} {time_offsets:?}");
    assert!(offsets.iter().chain(&time_offsets).all(|o| (o + 1) % 4 == 0), "{offsets:?} {time_offsets:?}");
    reopen(&mut lb, dir.path(), config);
    assert_eq!(lb.log.max_timestamp(), want);
    // lookups by offset and timestamp still land on the right records
    assert_eq!(lb.log.offset_for_timestamp(1_000 + 100 * 7 + 15).unwrap().map(|(o, _)| o), Some(7 * 4 + 1));
    let got = read_all_values(&lb.log, 41).unwrap();
    assert_eq!(got.first().map(|(o, _)| *o), Some(41));
}
