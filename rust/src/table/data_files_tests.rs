//! Tests of `table::DataFiles`: a log written as Parquet and read back, checked against a
//! model of what a read_committed consumer reads.
use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::sync::Arc;

use arrow_array::{Array, BinaryArray, Int64Array, ListArray, RecordBatch, StringArray, TimestampMicrosecondArray};
use arrow_schema::{DataType, Field, Fields, Schema, SchemaRef, TimeUnit};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::{Compression, ZstdLevel};

use super::data_files::{self, compression, day_of, day_string, local_dir};
use super::*;
use crate::batch::EndTxnMarker;
use crate::builder::{BatchBuilder, Rec};
use crate::config::LogConfig;
use crate::log::Log;

pub(super) const DAY_MS: i64 = 86_400_000;

/// offset -> (key, value, timestamp µs, header count)
type Rows = BTreeMap<i64, (Option<Vec<u8>>, Vec<u8>, i64, usize)>;

fn field(name: &str, dt: DataType, id: i32) -> Field {
    Field::new(name, dt, true).with_metadata(HashMap::from([("PARQUET:field_id".to_string(), id.to_string())]))
}

/// The table schema of python/logbroker/iceberg/table_schema.py, as pyiceberg gives it to pyarrow.
pub(super) fn kafka_schema() -> SchemaRef {
    let header = Fields::from(vec![field("key", DataType::Utf8, 10), field("value", DataType::Binary, 11)]);
    Arc::new(Schema::new(vec![
        field("key", DataType::Binary, 1),
        field("value", DataType::Binary, 2),
        field("topic", DataType::Utf8, 3),
        field("partition", DataType::Int32, 4),
        field("offset", DataType::Int64, 5),
        field("timestamp", DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())), 6),
        field("timestampType", DataType::Int32, 7),
        field("headers", DataType::List(Arc::new(field("element", DataType::Struct(header), 9))), 8),
    ]))
}

pub(super) fn local(dir: &std::path::Path) -> Location {
    data_files::location(&format!("file://{}", dir.display()))
}

pub(super) fn settings(target_file_bytes: usize) -> FileSettings {
    FileSettings { compression: Compression::ZSTD(ZstdLevel::default()), row_group_bytes: 1 << 20, target_file_bytes }
}

pub(super) fn open_log(dir: &std::path::Path) -> Log {
    let config = LogConfig { segment_bytes: 64 << 10, index_interval_bytes: 256, ..LogConfig::default() };
    Log::open(&dir.join("t-0"), "t", 0, config, None, 0).unwrap()
}

/// Appends `n` records at `ts_ms` (values `v<offset>`, every third key null, one header),
/// transactional for `pid`; returns the base offset.
pub(super) fn append(log: &Log, n: usize, ts_ms: i64, pid: Option<i64>) -> i64 {
    let base = log.log_end_offset();
    let recs = (0..n).map(|i| {
        let o = base + i as i64;
        let key = format!("k{o}");
        let mut r = Rec::kv(key.as_bytes(), format!("v{o}").as_bytes()).header(b"h", Some(b"x"));
        if o % 3 == 0 {
            r.key = None;
        }
        r
    });
    let mut b = BatchBuilder::new().base_timestamp(ts_ms).records(recs);
    if let Some(pid) = pid {
        b = b.producer(pid, 0, 0).transactional(true);
    }
    log.append_as_leader(b.build(), 0, ts_ms).unwrap();
    log.update_high_watermark(log.log_end_offset());
    base
}

pub(super) fn end_txn(log: &Log, pid: i64, commit: bool) {
    log.append_end_txn_marker(pid, 0, EndTxnMarker { commit, coordinator_epoch: 0 }, 0, 0, 0).unwrap();
    log.update_high_watermark(log.log_end_offset());
}

/// offset -> (key, value, timestamp µs, header count) of every row in `files`.
fn read_back(files: &[WrittenFile]) -> Rows {
    let mut rows = BTreeMap::new();
    for f in files {
        let local = local_dir(&f.path).unwrap();
        let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(local).unwrap()).unwrap();
        let id = reader.parquet_schema().root_schema().get_fields()[4].get_basic_info().id();
        assert_eq!(id, 5, "the offset column carries its Iceberg field id");
        for batch in reader.build().unwrap() {
            let batch: RecordBatch = batch.unwrap();
            let col = |name: &str| batch.column(batch.schema().index_of(name).unwrap()).clone();
            let offsets = col("offset");
            let offsets = offsets.as_any().downcast_ref::<Int64Array>().unwrap();
            let keys = col("key");
            let keys = keys.as_any().downcast_ref::<BinaryArray>().unwrap();
            let values = col("value");
            let values = values.as_any().downcast_ref::<BinaryArray>().unwrap();
            let ts = col("timestamp");
            let ts = ts.as_any().downcast_ref::<TimestampMicrosecondArray>().unwrap();
            let topics = col("topic");
            let topics = topics.as_any().downcast_ref::<StringArray>().unwrap();
            let headers = col("headers");
            let headers = headers.as_any().downcast_ref::<ListArray>().unwrap();
            for i in 0..batch.num_rows() {
                assert_eq!(topics.value(i), "t");
                assert_eq!(day_of(ts.value(i)), f.day, "a row of another day in {}", f.path);
                let key = keys.is_valid(i).then(|| keys.value(i).to_vec());
                let row = (key, values.value(i).to_vec(), ts.value(i), headers.value(i).len());
                assert!(rows.insert(offsets.value(i), row).is_none(), "offset {} written twice", offsets.value(i));
            }
        }
        assert!(f.path.contains(&format!("timestamp_day={}/", day_string(f.day))), "{}", f.path);
        assert!(f.path.starts_with("file:///"), "named by the location URL: {}", f.path);
    }
    rows
}

fn model(offsets: impl IntoIterator<Item = (i64, i64)>) -> Rows {
    offsets
        .into_iter()
        .map(|(o, ts_ms)| {
            let key = (o % 3 != 0).then(|| format!("k{o}").into_bytes());
            (o, (key, format!("v{o}").into_bytes(), ts_ms * 1000, 1))
        })
        .collect()
}

#[test]
fn a_log_is_written_one_file_per_day_with_what_read_committed_reads() {
    let dir = tempfile::tempdir().unwrap();
    let log = open_log(dir.path());
    let day1 = 20_000 * DAY_MS + 5_000;
    let day2 = day1 + DAY_MS;
    let a = append(&log, 50, day1, None);
    let aborted = append(&log, 20, day1, Some(7));
    end_txn(&log, 7, false);
    let b = append(&log, 30, day2, Some(8));
    end_txn(&log, 8, true);
    let c = append(&log, 10, day1, None); // late records of the first day: a second run
    let end = log.last_stable_offset();
    let mut files =
        DataFiles::new(kafka_schema(), settings(1 << 30), local(&dir.path().join("data")), "c1".into(), None).unwrap();
    let w = files.write_log(&log, 0, end, u64::MAX, None).unwrap();
    assert_eq!(w.next_offset, end);
    assert_eq!(w.rows, 90);
    let written = files.close().unwrap();
    assert_eq!(written.iter().map(|f| f.day).collect::<Vec<_>>(), vec![20_000, 20_001], "one file per day");
    assert_eq!(written.iter().map(|f| f.rows).sum::<u64>(), 90);
    let expected = model(
        (a..a + 50).map(|o| (o, day1)).chain((b..b + 30).map(|o| (o, day2))).chain((c..c + 10).map(|o| (o, day1))),
    );
    let got = read_back(&written);
    assert!(got.keys().all(|o| !(aborted..aborted + 20).contains(o)), "an aborted record was written");
    assert_eq!(got, expected);
}

#[test]
fn max_bytes_stops_at_a_batch_and_the_next_commit_goes_on_from_there() {
    let dir = tempfile::tempdir().unwrap();
    let log = open_log(dir.path());
    for i in 0..20 {
        append(&log, 25, 1_000 + i, None);
    }
    let end = log.log_end_offset();
    let mut all = Vec::new();
    let mut start = 0;
    let mut commits = 0;
    while start < end {
        let loc = local(&dir.path().join("data"));
        let mut files = DataFiles::new(kafka_schema(), settings(1 << 30), loc, format!("c{commits}"), None).unwrap();
        let w = files.write_log(&log, start, end, 2_000, None).unwrap();
        assert!(w.next_offset > start && w.next_offset % 25 == 0, "stopped inside a batch at {}", w.next_offset);
        start = w.next_offset;
        all.extend(files.close().unwrap());
        commits += 1;
    }
    assert!(commits > 2, "max_bytes made {commits} commits");
    assert_eq!(read_back(&all), model((0..end).map(|o| (o, 1_000 + o / 25))));
}

#[test]
fn files_roll_at_the_target_size_and_memory_files_come_back_whole() {
    let dir = tempfile::tempdir().unwrap();
    let log = open_log(dir.path());
    for _ in 0..40 {
        append(&log, 100, 7_000, None);
    }
    let end = log.log_end_offset();
    let mut files =
        DataFiles::new(kafka_schema(), settings(4_000), Location::Memory("s3://b/t/data".into()), "m".into(), None)
            .unwrap();
    files.write_log(&log, 0, end, u64::MAX, None).unwrap();
    let written = files.close().unwrap();
    assert!(written.len() > 1, "no file rolled at 4,000 bytes");
    assert_eq!(written.iter().map(|f| f.rows).sum::<u64>(), 4_000);
    for f in &written {
        let body = f.contents.as_ref().expect("kept in memory");
        assert_eq!(body.len() as u64, f.bytes);
        assert!(body.starts_with(b"PAR1") && body.ends_with(b"PAR1"), "{} is not a whole Parquet file", f.path);
        assert!(f.path.starts_with("s3://b/t/data/timestamp_day=1970-01-01/m-"), "{}", f.path);
    }
}

#[test]
fn abort_removes_the_files_written() {
    let dir = tempfile::tempdir().unwrap();
    let log = open_log(dir.path());
    append(&log, 10, 1_000, None);
    let data = dir.path().join("data");
    let mut files = DataFiles::new(kafka_schema(), settings(1 << 30), local(&data), "x".into(), None).unwrap();
    files.write_log(&log, 0, 10, u64::MAX, None).unwrap();
    files.abort();
    let left: Vec<_> = walk(&data);
    assert!(left.is_empty(), "left behind: {left:?}");
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if e.path().is_dir() {
            out.extend(walk(&e.path()));
        } else {
            out.push(e.path());
        }
    }
    out
}

#[test]
fn a_schema_column_the_broker_does_not_write_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let log = open_log(dir.path());
    append(&log, 3, 1_000, None);
    let mut fields: Vec<Field> = kafka_schema().fields().iter().map(|f| f.as_ref().clone()).collect();
    fields.push(field("region", DataType::Utf8, 40));
    let loc = local(&dir.path().join("data"));
    let mut files = DataFiles::new(Arc::new(Schema::new(fields)), settings(1 << 30), loc, "x".into(), None).unwrap();
    let e = files.write_log(&log, 0, 3, u64::MAX, None).unwrap_err().to_string();
    assert!(e.contains("t-0 offsets 0..2") && e.contains("region"), "{e}");
}

#[test]
fn days_and_codecs() {
    assert_eq!(day_string(0), "1970-01-01");
    assert_eq!(day_string(-1), "1969-12-31");
    assert_eq!(day_string(19_723), "2024-01-01");
    assert_eq!(day_string(11_016), "2000-02-29");
    assert_eq!(day_of(-1), -1);
    assert_eq!(day_of(86_400_000_000), 1);
    assert!(matches!(compression("ZSTD", Some(3)).unwrap(), Compression::ZSTD(_)));
    assert!(matches!(compression("uncompressed", None).unwrap(), Compression::UNCOMPRESSED));
    let e = compression("lzo", None).unwrap_err().to_string();
    assert!(e.contains("\"lzo\""), "{e}");
    assert!(compression("zstd", Some(99)).is_err());
    assert_eq!(local_dir("file:///w/t/data").unwrap(), std::path::Path::new("/w/t/data"));
    assert_eq!(local_dir("/w/t/data").unwrap(), std::path::Path::new("/w/t/data"));
    assert!(local_dir("s3://b/t/data").is_none());
}

#[test]
fn a_producers_transaction_after_an_aborted_one_in_an_earlier_segment_is_written() {
    // Reads go segment by segment: the ABORT marker and the producer's next (committed)
    // transaction are read in different stretches.
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig { segment_bytes: 1024, index_interval_bytes: 256, ..LogConfig::default() };
    let log = Log::open(&dir.path().join("t-0"), "t", 0, config, None, 0).unwrap();
    append(&log, 5, 1_000, Some(9)); // 0..4, aborted
    end_txn(&log, 9, false); // 5
    for _ in 0..40 {
        append(&log, 5, 1_000, None); // 6..205: several segments
    }
    // the producer's next transaction (sequence 5 on: a batch at sequence 0 again would be a duplicate)
    let later = log.log_end_offset();
    let recs = (later..later + 5).map(|o| {
        let mut r = Rec::kv(format!("k{o}").as_bytes(), format!("v{o}").as_bytes()).header(b"h", Some(b"x"));
        if o % 3 == 0 {
            r.key = None;
        }
        r
    });
    let b = BatchBuilder::new().base_timestamp(1_000).records(recs).producer(9, 0, 5).transactional(true);
    log.append_as_leader(b.build(), 0, 1_000).unwrap();
    end_txn(&log, 9, true);
    assert!(log.segment_count() > 3, "{} segments", log.segment_count());
    let end = log.last_stable_offset();
    let mut files =
        DataFiles::new(kafka_schema(), settings(1 << 30), local(&dir.path().join("data")), "c".into(), None).unwrap();
    files.write_log(&log, 0, end, u64::MAX, None).unwrap();
    let got = read_back(&files.close().unwrap());
    assert_eq!(got, model((6..206).chain(later..later + 5).map(|o| (o, 1_000))));
}

#[test]
fn a_spec_of_many_partitions_keeps_at_most_the_open_file_limit() {
    // bucket[8](offset) over 5 batches of 8 records, read one batch per call: each stretch
    // meets all 8 buckets. Unbounded, that is 8 files; with 4 open at most, a bucket's file is
    // closed when a fifth opens and the bucket gets another file later, every row still once.
    let spec = |max_open: usize, name: &str, dir: &std::path::Path, log: &Log| {
        let spec = partition_spec::PartitionSpec {
            fields: vec![partition_spec::SpecField {
                source: vec!["offset".into()],
                transform: partition_spec::Transform::Bucket(8),
                name: "offset_bucket".into(),
            }],
        };
        let mut files = DataFiles::new(kafka_schema(), settings(1 << 30), local(&dir.join(name)), name.into(), None)
            .unwrap()
            .with_spec(spec)
            .with_max_open_files(max_open);
        let mut at = 0;
        while at < log.last_stable_offset() {
            at = files.write_log(log, at, log.last_stable_offset(), 1, None).unwrap().next_offset;
        }
        files.close().unwrap()
    };
    let dir = tempfile::tempdir().unwrap();
    let log = open_log(dir.path());
    for _ in 0..5 {
        append(&log, 8, 20_000 * DAY_MS, None);
    }
    assert_eq!(spec(128, "wide", dir.path(), &log).len(), 8);
    let written = spec(4, "narrow", dir.path(), &log);
    assert!(written.len() > 8, "{} files", written.len());
    let mut offsets = Vec::new();
    for f in &written {
        let local = local_dir(&f.path).unwrap();
        let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(local).unwrap()).unwrap();
        for batch in reader.build().unwrap() {
            let batch = batch.unwrap();
            let col = batch.column(batch.schema().index_of("offset").unwrap()).clone();
            for o in col.as_any().downcast_ref::<Int64Array>().unwrap().values() {
                let want = partition_spec::bucket(&o.to_le_bytes(), 8);
                assert_eq!(f.partition_values, vec![partition_spec::PartitionValue::Int(want)], "{}", f.path);
                offsets.push(*o);
            }
        }
    }
    offsets.sort_unstable();
    assert_eq!(offsets, (0..40).collect::<Vec<_>>(), "every row once");
}
