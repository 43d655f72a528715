//! Unit tests of the log cleaner through `Log::compact`.
use std::collections::HashMap;
use std::path::Path;

use crate::batch::{self, BatchHeader, EndTxnMarker, DELETE_HORIZON_BIT};
use crate::builder::{BatchBuilder, Rec};
use crate::compression::Codec;
use crate::config::LogConfig;
use crate::error::LogError;
use crate::log::{Log, LogRecord};

fn compact_config(segment_bytes: u64) -> LogConfig {
    LogConfig {
        segment_bytes,
        index_interval_bytes: 128,
        segment_index_bytes: 4096,
        cleanup_compact: true,
        cleanup_delete: false,
        delete_retention_ms: 1_000,
        ..LogConfig::default()
    }
}

fn open(dir: &Path, config: LogConfig) -> Log {
    Log::open(dir, "t", 0, config, None, 0).unwrap()
}

fn put(log: &Log, key: &str, value: Option<&str>, now: i64) -> i64 {
    let r = log
        .append_records_as_leader(
            &[(Some(key.as_bytes().to_vec()), value.map(|v| v.as_bytes().to_vec()))],
            0,
            now,
            Codec::None,
        )
        .unwrap();
    log.update_high_watermark(log.log_end_offset());
    r.base_offset
}

fn all(log: &Log) -> Vec<LogRecord> {
    log.read_records(log.log_start_offset(), None, None).unwrap()
}

/// key → (offset, value) of the last record of each key in a read.
fn last_per_key(records: &[LogRecord]) -> HashMap<Vec<u8>, (i64, Option<Vec<u8>>)> {
    records.iter().map(|r| (r.key.clone().unwrap(), (r.offset, r.value.clone()))).collect()
}

/// Writes `rounds` updates of keys k0..k{keys} (value = "v{round}-{key}"), returns the model.
fn fill(log: &Log, keys: usize, rounds: usize, now: i64) -> HashMap<Vec<u8>, (i64, Option<Vec<u8>>)> {
    let mut model = HashMap::new();
    for round in 0..rounds {
        for k in 0..keys {
            let key = format!("k{k}");
            let value = format!("v{round}-{key}-{}", "x".repeat(20));
            let o = put(log, &key, Some(&value), now);
            model.insert(key.into_bytes(), (o, Some(value.into_bytes())));
        }
    }
    model
}

#[test]
fn many_updates_shrink_to_the_latest_per_key_at_their_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), compact_config(1_000));
    let model = fill(&log, 5, 40, 100);
    let before_size = log.size_bytes();
    let before_segments = log.segment_count();
    let r = log.compact(200, false).unwrap();
    assert!(r.segments_cleaned > 1, "{r:?}");
    assert!(r.bytes_after < r.bytes_before, "{r:?}");
    assert!(r.records_removed > 100, "{r:?}");
    assert!((r.dirty_ratio - 1.0).abs() < f64::EPSILON, "nothing was clean: {r:?}");
    assert!(log.size_bytes() < before_size / 3, "{} vs {before_size}", log.size_bytes());
    assert_eq!(log.segment_count(), before_segments, "full segments are not merged on the first pass");
    let got = all(&log);
    assert!(got.windows(2).all(|w| w[0].offset < w[1].offset), "offsets strictly increase");
    assert_eq!(last_per_key(&got), model);
    // Below the checkpoint each key appears once.
    let clean: Vec<_> = got.iter().filter(|r| r.offset < log_checkpoint(&log)).collect();
    let mut keys: Vec<_> = clean.iter().map(|r| r.key.clone()).collect();
    let n = keys.len();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), n, "clean section holds each key once");
    assert_eq!(r.cleaned_up_to, log_checkpoint(&log));
    // A second pass finds nothing dirty below the ratio.
    let again = log.compact(300, false).unwrap();
    assert_eq!(again.segments_cleaned, 0, "{again:?}");
    // A forced pass merges the now small segments.
    let merged = log.compact(300, true).unwrap();
    assert!(log.segment_count() < before_segments, "{merged:?}");
    assert_eq!(merged.records_removed, 0);
    assert_eq!(last_per_key(&all(&log)), model);
    // Appends continue at the LEO; a reopen (clean and unclean) reads the same.
    let leo = log.log_end_offset();
    assert_eq!(put(&log, "k0", Some("after"), 400), leo);
    let expect = all(&log);
    log.close().unwrap();
    let log = open(dir.path(), compact_config(1_000));
    assert_eq!(all(&log), expect);
    drop(log);
    let log = Log::open(dir.path(), "t", 0, compact_config(1_000), Some(0), 0).unwrap();
    assert!(!log.recovery_report().clean_shutdown);
    assert_eq!(log.recovery_report().bytes_truncated, 0);
    assert_eq!(all(&log), expect);
}

fn log_checkpoint(log: &Log) -> i64 {
    crate::offset_checkpoint::read_single_offset(&log.dir().join(super::CLEANER_CHECKPOINT_FILE)).unwrap().unwrap_or(0)
}

#[test]
fn policy_decides_between_compaction_and_retention() {
    let dir = tempfile::tempdir().unwrap();
    let delete_only =
        LogConfig { cleanup_compact: false, cleanup_delete: true, retention_bytes: 0, ..compact_config(1_000) };
    let log = open(dir.path(), delete_only);
    fill(&log, 3, 20, 100);
    let r = log.compact(200, true).unwrap();
    assert_eq!(r.segments_cleaned, 0, "delete policy: compaction is a no-op");
    assert!(log.enforce_retention(200).unwrap() > 0, "delete policy: retention applies");
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), LogConfig { retention_bytes: 0, retention_ms: 0, ..compact_config(1_000) });
    fill(&log, 3, 20, 100);
    assert_eq!(log.enforce_retention(1_000_000).unwrap(), 0, "compact policy: no time/size retention");
    // compact,delete: both.
    let mut m = HashMap::new();
    m.insert("cleanup.policy".to_owned(), "compact,delete".to_owned());
    m.insert("retention.bytes".to_owned(), "0".to_owned());
    log.update_config(&m).unwrap();
    assert!(log.compact(1_000, true).unwrap().segments_cleaned > 0);
    assert!(log.enforce_retention(1_000).unwrap() > 0);
}

#[test]
fn compacted_topic_refuses_keyless_records() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), compact_config(1 << 20));
    let e = log
        .append_records_as_leader(
            &[(Some(b"k".to_vec()), Some(b"v".to_vec())), (None, Some(b"v".to_vec()))],
            0,
            0,
            Codec::Lz4,
        )
        .unwrap_err();
    assert!(matches!(&e, LogError::InvalidRecord { reason, .. } if reason.contains("key")), "{e}");
    assert!(e.to_string().contains("t-0"), "{e}");
    assert_eq!(log.log_end_offset(), 0, "all-or-nothing");
    // A tombstone has a key: fine. A control batch has no key rule.
    put(&log, "k", None, 0);
    let marker = BatchBuilder::new()
        .producer(7, 0, -1)
        .transactional(true)
        .control(true)
        .record(Rec::kv(&[0, 0, 0, 1], &[0, 0, 0, 0, 0, 0]))
        .build();
    let e = log.append_as_leader(marker, 0, 0).unwrap_err();
    assert!(
        matches!(&e, LogError::InvalidRecord { reason, .. } if reason.contains("coordinator")),
        "clients may not write markers: {e}"
    );
    log.append_end_txn_marker(7, 0, EndTxnMarker { commit: true, coordinator_epoch: 0 }, 0, 0, 0).unwrap();
    // Under delete, keyless records are fine.
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), LogConfig::default());
    log.append_records_as_leader(&[(None, Some(b"v".to_vec()))], 0, 0, Codec::None).unwrap();
}

fn batch_headers(log: &Log) -> Vec<BatchHeader> {
    let mut out = vec![];
    let mut next = log.log_start_offset();
    while let Some(r) = log.read(next, 1 << 20, None, true).unwrap() {
        let bytes = r.read_to_vec().unwrap();
        let mut pos = 0;
        while pos < bytes.len() {
            let h = BatchHeader::parse(&bytes[pos..]);
            batch::validate_batch(&bytes[pos..pos + h.size() as usize], 0)
                .map(|_| ())
                .or_else(|e| {
                    // Cleaned batches are stored batches, not client batches.
                    let mut src = batch::SliceSource(&bytes[pos..pos + h.size() as usize]);
                    let end =
                        batch::scan(&mut src, 0, batch::Check::Stored, None, |_| Ok(batch::Control::Continue)).unwrap();
                    end.error.map_or(Ok(()), |_| Err(e))
                })
                .unwrap();
            next = h.next_offset();
            pos += h.size() as usize;
            out.push(h);
        }
    }
    out
}

#[test]
fn tombstones_get_a_delete_horizon_then_go() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), compact_config(300));
    put(&log, "a", Some("1"), 10);
    put(&log, "b", Some("1"), 10);
    let tomb = put(&log, "a", None, 10);
    for i in 0..10 {
        put(&log, "c", Some(&format!("{i}")), 10);
    }
    assert!(log.segment_count() > 2);
    let r = log.compact(5_000, true).unwrap();
    assert_eq!(r.tombstones_removed, 0);
    let got = all(&log);
    let a: Vec<_> = got.iter().filter(|r| r.key.as_deref() == Some(b"a")).collect();
    assert_eq!(a.len(), 1, "the put is gone, the tombstone stays");
    assert_eq!((a[0].offset, a[0].value.clone(), a[0].timestamp), (tomb, None, 10), "timestamp survives the re-basing");
    let h = batch_headers(&log).into_iter().find(|h| h.base_offset == tomb).unwrap();
    assert_ne!(h.attributes & DELETE_HORIZON_BIT, 0);
    assert_eq!(h.base_timestamp, 6_000, "horizon = now + delete.retention.ms");
    // Before the horizon: kept; at it: dropped.
    assert_eq!(log.compact(5_999, true).unwrap().tombstones_removed, 0);
    assert_eq!(log.compact(5_999, false).unwrap().segments_cleaned, 0, "nothing dirty, horizon not reached");
    let r = log.compact(6_000, false).unwrap();
    assert_eq!(r.tombstones_removed, 1, "a passed horizon triggers a pass without new writes: {r:?}");
    assert_eq!(log.compact(7_000, false).unwrap().segments_cleaned, 0, "and only one");
    let got = all(&log);
    assert!(got.iter().all(|r| r.key.as_deref() != Some(b"a")));
    assert!(got.iter().any(|r| r.key.as_deref() == Some(b"b")));
}

#[test]
fn reads_timestamps_and_truncation_work_across_gaps() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), compact_config(400));
    for i in 0..30 {
        put(&log, &format!("k{}", i % 3), Some(&format!("value {i}")), 1_000 + i);
    }
    log.compact(2_000, true).unwrap();
    let got = all(&log);
    let offsets: Vec<i64> = got.iter().map(|r| r.offset).collect();
    // Every offset of the original range: a read returns the first batch ending at or after it.
    for o in 0..log.log_end_offset() {
        let region = log.read(o, 1, None, true).unwrap().unwrap();
        let h = BatchHeader::parse(&region.read_to_vec().unwrap());
        assert!(h.last_offset() >= o, "read({o}) returned a batch ending at {}", h.last_offset());
        if let Some(&next) = offsets.iter().find(|&&x| x >= o) {
            assert!(h.base_offset <= next, "read({o}) skipped record {next}");
        }
    }
    // read_records from inside a gap starts at the next record.
    let gap = (0..log.log_end_offset()).find(|o| !offsets.contains(o)).expect("compaction left gaps");
    let from_gap = log.read_records(gap, None, Some(2)).unwrap();
    assert_eq!(from_gap[0].offset, *offsets.iter().find(|&&x| x > gap).unwrap());
    assert_eq!(from_gap.len(), 2);
    // ListOffsets by timestamp: the first surviving record at or after the time.
    let (o, t) = log.offset_for_timestamp(1_000).unwrap().unwrap();
    assert_eq!((o, t), (got[0].offset, got[0].timestamp));
    // Truncation into a gap: the LEO becomes the end of the last batch below it.
    let target = gap + 1;
    log.truncate_to(target).unwrap();
    let leo = log.log_end_offset();
    assert!(leo <= target);
    assert!(all(&log).iter().all(|r| r.offset < leo));
    assert_eq!(put(&log, "z", Some("new"), 3_000), leo);
    assert!(log_checkpoint(&log) <= leo, "truncation lowers the cleaner checkpoint");
}

#[test]
fn every_codec_is_recompressed_with_its_own_codec() {
    for codec in Codec::ALL {
        let dir = tempfile::tempdir().unwrap();
        let log = open(dir.path(), compact_config(600));
        let mut model = HashMap::new();
        for i in 0..20i64 {
            let recs: Vec<_> = (0..4)
                .map(|j| (Some(format!("k{}", (i + j) % 5).into_bytes()), Some(format!("v{i}-{j}").into_bytes())))
                .collect();
            let r = log.append_records_as_leader(&recs, 0, 50, codec).unwrap();
            for (j, (k, v)) in recs.into_iter().enumerate() {
                model.insert(k.unwrap(), (r.base_offset + j as i64, v));
            }
        }
        log.update_high_watermark(log.log_end_offset());
        let r = log.compact(100, true).unwrap();
        assert!(r.records_removed > 0, "{}: {r:?}", codec.name());
        assert_eq!(last_per_key(&all(&log)), model, "{}", codec.name());
        for h in batch_headers(&log) {
            assert!(h.records_count == 0 || h.codec() == Some(codec), "{}", codec.name());
        }
    }
}

#[test]
fn a_producers_last_batch_stays_as_an_empty_batch() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), compact_config(300));
    for seq in 0..3 {
        let b = BatchBuilder::new()
            .producer(42, 0, seq)
            .base_timestamp(5)
            .record(Rec::kv(b"p", format!("{seq}").as_bytes()))
            .build();
        log.append_as_leader(b, 0, 5).unwrap();
    }
    let last_producer_batch = log.log_end_offset() - 1;
    for i in 0..12 {
        put(&log, "p", Some(&format!("plain {i}")), 6);
    }
    log.compact(10, true).unwrap();
    let headers = batch_headers(&log);
    let kept: Vec<_> = headers.iter().filter(|h| h.producer_id == 42).collect();
    assert_eq!(kept.len(), 1, "only the producer's last batch stays");
    assert_eq!((kept[0].base_offset, kept[0].records_count, kept[0].base_sequence), (last_producer_batch, 0, 2));
    // Producer state survives an unclean reopen (rebuilt from headers).
    drop(log);
    let log = Log::open(dir.path(), "t", 0, compact_config(300), Some(0), 0).unwrap();
    assert_eq!(log.producer_state(42), Some((0, 2, last_producer_batch)));
    let b = BatchBuilder::new().producer(42, 0, 3).record(Rec::kv(b"p", b"3")).build();
    log.append_as_leader(b, 0, 20).unwrap();
}

#[test]
fn hw_lag_and_ratio_gate_the_pass() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig { min_cleanable_dirty_ratio: 0.9, min_compaction_lag_ms: 500, ..compact_config(500) };
    let log = open(dir.path(), config);
    fill(&log, 3, 10, 1_000);
    log.update_high_watermark(0);
    assert_eq!(log.compact(10_000, true).unwrap().segments_cleaned, 0, "nothing below the HW");
    log.update_high_watermark(log.log_end_offset());
    assert_eq!(log.compact(1_200, true).unwrap().segments_cleaned, 0, "younger than min.compaction.lag.ms");
    let r = log.compact(1_500, false).unwrap();
    assert!(r.segments_cleaned > 0, "{r:?}");
    // A little new dirt is below the 0.9 ratio; force cleans anyway.
    fill(&log, 3, 4, 2_000);
    let r = log.compact(9_000, false).unwrap();
    assert_eq!(r.segments_cleaned, 0, "{r:?}");
    assert!(r.dirty_ratio > 0.0 && r.dirty_ratio < 0.9, "{r:?}");
    assert!(log.compact(9_000, true).unwrap().segments_cleaned > 0);
}

#[test]
fn max_compaction_lag_forces_a_pass_and_caps_rolls() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig { min_cleanable_dirty_ratio: 1.0, max_compaction_lag_ms: 1_000, ..compact_config(400) };
    let log = open(dir.path(), config);
    fill(&log, 2, 10, 1_000);
    log.compact(1_500, false).unwrap();
    fill(&log, 2, 5, 1_600);
    assert_eq!(log.compact(1_700, false).unwrap().segments_cleaned, 0, "ratio below 1.0, lag not reached");
    assert!(log.compact(2_700, false).unwrap().segments_cleaned > 0, "oldest dirty batch older than the max lag");
    put(&log, "k0", Some("x"), 3_000);
    assert!(!log.maybe_roll(3_500).unwrap());
    assert!(log.maybe_roll(4_000).unwrap(), "segment.ms is capped by max.compaction.lag.ms");
}

#[test]
fn a_follower_replicates_a_compacted_leader() {
    let dir = tempfile::tempdir().unwrap();
    let leader = open(&dir.path().join("leader"), compact_config(500));
    let model = fill(&leader, 4, 15, 100);
    leader.compact(200, true).unwrap();
    let follower = open(&dir.path().join("follower"), compact_config(500));
    let mut next = 0;
    while let Some(r) = leader.read(next, 700, None, true).unwrap() {
        let a = follower.append_as_follower(r.read_to_vec().unwrap()).unwrap();
        next = a.last_offset + 1;
    }
    assert_eq!(follower.log_end_offset(), leader.log_end_offset());
    assert_eq!(all(&follower), all(&leader));
    assert_eq!(last_per_key(&all(&follower)), model);
    // Offsets may not go backwards.
    let old = leader.read(0, 1, None, true).unwrap().unwrap().read_to_vec().unwrap();
    assert!(matches!(follower.append_as_follower(old), Err(LogError::NonContiguousAppend { .. })));
    // An unclean reopen of the gapped follower keeps everything.
    drop(follower);
    let follower = Log::open(&dir.path().join("follower"), "t", 0, compact_config(500), Some(0), 0).unwrap();
    assert_eq!(follower.recovery_report().bytes_truncated, 0);
    assert_eq!(last_per_key(&all(&follower)), model);
}

#[test]
fn read_records_limits_and_control_batches() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), LogConfig::default());
    log.append_records_as_leader(&[(Some(b"a".to_vec()), Some(b"1".to_vec())), (None, None)], 0, 7, Codec::Zstd)
        .unwrap();
    log.append_end_txn_marker(7, 0, EndTxnMarker { commit: true, coordinator_epoch: 0 }, 0, 0, 8).unwrap();
    log.append_records_as_leader(&[(Some(b"b".to_vec()), Some(b"2".to_vec()))], 0, 9, Codec::Gzip).unwrap();
    let got = log.read_records(0, None, None).unwrap();
    let view: Vec<_> = got.iter().map(|r| (r.offset, r.timestamp, r.key.as_deref(), r.value.as_deref())).collect();
    assert_eq!(
        view,
        vec![(0, 7, Some(&b"a"[..]), Some(&b"1"[..])), (1, 7, None, None), (3, 9, Some(&b"b"[..]), Some(&b"2"[..]))]
    );
    assert_eq!(log.read_records(1, Some(3), None).unwrap().len(), 1);
    assert_eq!(log.read_records(0, None, Some(1)).unwrap().len(), 1);
    assert!(log.read_records(4, None, None).unwrap().is_empty());
    assert!(matches!(log.read_records(5, None, None), Err(LogError::OffsetOutOfRange { .. })));
    assert!(matches!(log.append_records_as_leader(&[], 0, 0, Codec::None), Err(LogError::InvalidRecord { .. })));
}

#[test]
fn a_truncation_during_the_rewrite_discards_the_pass() {
    // Simulated by running the phases by hand: plan, truncate, then compact's swap check.
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), compact_config(400));
    fill(&log, 3, 20, 100);
    let leo = log.log_end_offset();
    let crate::log::Planned::Run(plan) = log.plan_compaction(200, true).unwrap() else { panic!("nothing to clean") };
    let rewritten = log.rewrite_for_compaction(&plan, 200);
    assert!(rewritten.as_ref().unwrap().0.len() > 1);
    log.truncate_to(leo / 2).unwrap();
    let r = log.finish_compaction(&plan, rewritten, 200).unwrap();
    assert_eq!(r.segments_cleaned, 0);
    assert!(std::fs::read_dir(dir.path()).unwrap().all(|e| !e
        .unwrap()
        .file_name()
        .to_string_lossy()
        .contains(".cleaned")));
    assert!(log.compact(300, true).unwrap().segments_cleaned > 0, "the next pass runs");
}

/// A transactional batch of `(key, value)` records from `pid` starting at sequence `seq`.
fn txn_put(log: &Log, pid: i64, seq: i32, kvs: &[(&str, &str)], now: i64) -> i64 {
    let b = BatchBuilder::new()
        .producer(pid, 0, seq)
        .transactional(true)
        .base_timestamp(now)
        .records(kvs.iter().map(|(k, v)| Rec::kv(k.as_bytes(), v.as_bytes())))
        .build();
    let r = log.append_as_leader(b, 0, now).unwrap();
    log.update_high_watermark(log.log_end_offset());
    r.base_offset
}

fn end_txn(log: &Log, pid: i64, commit: bool, now: i64) {
    log.append_end_txn_marker(pid, 0, EndTxnMarker { commit, coordinator_epoch: 0 }, 0, 0, now).unwrap();
    log.update_high_watermark(log.log_end_offset());
}

#[test]
fn aborted_records_are_removed_and_never_shadow_committed_ones() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), compact_config(300));
    put(&log, "k", Some("committed"), 0);
    txn_put(&log, 5, 0, &[("k", "aborted"), ("j", "aborted")], 1);
    end_txn(&log, 5, false, 2);
    txn_put(&log, 6, 0, &[("j", "committed")], 3);
    end_txn(&log, 6, true, 4);
    fill(&log, 3, 20, 100); // roll the above into inactive segments
    let r = log.compact(1_000, true).unwrap();
    assert!(r.segments_cleaned > 0 && r.records_removed >= 2, "{r:?}");
    let latest = last_per_key(&all(&log));
    assert_eq!(latest[&b"k".to_vec()].1.as_deref(), Some(&b"committed"[..]), "the aborted write must not win");
    assert_eq!(latest[&b"j".to_vec()].1.as_deref(), Some(&b"committed"[..]));
    assert!(all(&log).iter().all(|r| r.value.as_deref() != Some(&b"aborted"[..])), "aborted records are gone");
}

#[test]
fn an_open_transaction_is_never_cleaned() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), compact_config(300));
    put(&log, "k", Some("v1"), 0);
    let first = txn_put(&log, 5, 0, &[("k", "in-flight")], 1);
    fill(&log, 3, 20, 100);
    put(&log, "k", Some("v2"), 2);
    log.compact(1_000, true).unwrap();
    assert!(
        log.read_records(0, None, None).unwrap().iter().any(|r| r.offset == first),
        "the open transaction's batch stays"
    );
    assert_eq!(log.first_unstable_offset(), Some(first));
}

#[test]
fn tiered_tombstones_stay_while_records_are_only_remote() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), LogConfig { remote_storage_enable: true, ..compact_config(300) });
    put(&log, "a", Some("1"), 10);
    put(&log, "x", Some("1"), 10);
    let tomb = put(&log, "a", None, 10);
    for i in 0..10 {
        put(&log, "c", Some(&format!("{i}")), 10);
    }
    log.compact(5_000, true).unwrap();
    let cleaned = log.cleaned_segments().unwrap();
    assert!(!cleaned.is_empty(), "cleaned segments are what tiering copies");
    assert!(cleaned.windows(2).all(|w| w[0].1 + 1 == w[1].0), "contiguous: {cleaned:?}");
    assert!(cleaned.iter().all(|&(b, e, n)| b <= e && n > 0));
    // The first offset is only remote now (local retention removed it): the tombstone stays
    // past its horizon, or an older remote value of "a" would come back.
    log.set_highest_remote_offset(cleaned.last().unwrap().1);
    log.set_remote_log_start(0);
    log.delete_records_before(1).unwrap();
    assert_eq!(log.compact(7_000, true).unwrap().tombstones_removed, 0);
    assert!(all(&log).iter().any(|r| r.offset == tomb && r.value.is_none()));
    assert_eq!(log.compact(8_000, false).unwrap().segments_cleaned, 0, "a kept horizon starts no pass");
    // Nothing only remote any more (the copies start at the local log start): it goes.
    log.set_remote_log_start(log.log_start_offset());
    assert_eq!(log.compact(9_000, true).unwrap().tombstones_removed, 1);
}
