//! Tests of upsert writes (`DataFiles::write_log` with a `KeyIndex`): commits of a log of
//! keyed records, tombstones and keyless records, some not landing, applied to a model table
//! (rows of the data files less the rows the position delete files name) and checked against
//! a dict of the stream after every landed commit.
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::File;
use std::sync::{Arc, Mutex};

use arrow_array::{Array, BinaryArray, Int64Array, RecordBatch, StringArray};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use proptest::prelude::*;

use super::data_files::local_dir;
use super::data_files_tests::{kafka_schema, local, open_log, settings, DAY_MS};
use super::*;
use crate::builder::{BatchBuilder, Rec};

/// One record: key (None: keyless), value (None: tombstone), day (0 or 1).
type Record = (Option<u8>, Option<u16>, i64);
type Bytes = Option<Vec<u8>>;
/// A table row: key, value, day.
type Row = (Bytes, Bytes, i64);
/// Live rows: key -> value, and the keyless rows' values.
type Live = (BTreeMap<Vec<u8>, Vec<u8>>, Vec<Bytes>);

fn records() -> impl Strategy<Value = Vec<Vec<Record>>> {
    let rec = (
        prop_oneof![1 => Just(None), 9 => (0u8..24).prop_map(Some)],
        prop_oneof![1 => Just(None), 5 => any::<u16>().prop_map(Some)],
        0i64..2,
    );
    prop::collection::vec(prop::collection::vec(rec, 1..12), 1..24)
}

/// The model table: rows by (path, pos), and the positions deleted.
#[derive(Default)]
struct Table {
    rows: HashMap<(String, u64), Row>,
    deleted: HashSet<(String, u64)>,
}

impl Table {
    fn apply(&mut self, written: &[WrittenFile]) {
        for f in written {
            let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(local_dir(&f.path).unwrap()).unwrap())
                .unwrap()
                .build()
                .unwrap();
            let mut pos = 0u64;
            for batch in reader {
                let batch: RecordBatch = batch.unwrap();
                let col = |name: &str| batch.column(batch.schema().index_of(name).unwrap()).clone();
                if f.deletes {
                    let paths = col("file_path");
                    let paths = paths.as_any().downcast_ref::<StringArray>().unwrap();
                    let at = col("pos");
                    let at = at.as_any().downcast_ref::<Int64Array>().unwrap();
                    for i in 0..batch.num_rows() {
                        let target = (paths.value(i).to_owned(), at.value(i) as u64);
                        let (_, _, day) = self.rows.get(&target).expect("a delete names a row of the table");
                        assert_eq!(*day, i64::from(f.day), "a delete file of another day than its row's");
                        assert!(self.deleted.insert(target), "a row deleted twice");
                    }
                } else {
                    let keys = col("key");
                    let keys = keys.as_any().downcast_ref::<BinaryArray>().unwrap();
                    let values = col("value");
                    let values = values.as_any().downcast_ref::<BinaryArray>().unwrap();
                    let offsets = col("offset");
                    let offsets = offsets.as_any().downcast_ref::<Int64Array>().unwrap();
                    for i in 0..batch.num_rows() {
                        let key = keys.is_valid(i).then(|| keys.value(i).to_vec());
                        let value = values.is_valid(i).then(|| values.value(i).to_vec());
                        assert!(key.is_none() || value.is_some(), "a tombstone was written as a row");
                        let _ = offsets.value(i);
                        self.rows.insert((f.path.clone(), pos), (key, value, i64::from(f.day)));
                        pos += 1;
                    }
                }
            }
        }
    }

    /// key -> value of the live rows (each key once), and the keyless values.
    fn live(&self) -> Live {
        let mut keyed = BTreeMap::new();
        let mut keyless = Vec::new();
        for (at, (key, value, _)) in &self.rows {
            if self.deleted.contains(at) {
                continue;
            }
            match (key, value) {
                (Some(k), Some(v)) => assert!(keyed.insert(k.clone(), v.clone()).is_none(), "key {k:?} live twice"),
                (Some(_), None) => unreachable!("checked when read"),
                (None, v) => keyless.push(v.clone()),
            }
        }
        keyless.sort();
        (keyed, keyless)
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn upsert_commits_keep_each_keys_latest_value(batches in records(), lost in prop::collection::vec(any::<bool>(), 24)) {
        let dir = tempfile::tempdir().unwrap();
        let log = open_log(dir.path());
        let base_ms = 20_000 * DAY_MS;
        // offset -> record, as appended
        let mut stream: Vec<(Bytes, Bytes)> = Vec::new();
        let mut ends = Vec::new();
        for batch in &batches {
            let mut b = BatchBuilder::new().base_timestamp(base_ms);
            let recs: Vec<Rec> = batch
                .iter()
                .map(|(k, v, day)| {
                    let key = k.map(|k| format!("key-{k}").into_bytes());
                    let value = v.map(|v| format!("value-{v}").into_bytes());
                    stream.push((key.clone(), value.clone()));
                    let mut r = Rec::default();
                    (r.key, r.value, r.timestamp_delta) = (key, value, day * DAY_MS);
                    r
                })
                .collect();
            b = b.records(recs.into_iter());
            log.append_as_leader(b.build(), 0, base_ms).unwrap();
            log.update_high_watermark(log.log_end_offset());
            ends.push(log.log_end_offset());
        }
        let index = Arc::new(Mutex::new(KeyIndex::new()));
        let mut table = Table::default();
        let mut position = 0i64;
        let mut n = 0;
        // commits of a few batches each; some do not land and are tried again
        for (i, end) in ends.iter().enumerate().filter(|(i, _)| i % 3 == 2 || *i == ends.len() - 1) {
            loop {
                let loc = local(&dir.path().join("data"));
                let mut files = DataFiles::new(kafka_schema(), settings(1 << 30), loc, format!("c{n}"), None).unwrap();
                n += 1;
                // two writes in one commit (two stretches of log): a key of the first replaced
                // in the second is deleted from this commit's own file
                let mid = ends[..i].iter().copied().find(|e| *e > position).unwrap_or(*end);
                let w = files.write_log(&log, position, mid, u64::MAX, Some(Arc::clone(&index))).unwrap();
                prop_assert_eq!(w.next_offset, mid);
                let w = files.write_log(&log, mid, *end, u64::MAX, Some(Arc::clone(&index))).unwrap();
                prop_assert_eq!(w.next_offset, *end);
                let written = files.close().unwrap();
                if lost[(i + n) % lost.len()] && n % 2 == 0 {
                    index.lock().unwrap().settle(false); // lost a race: the files are never in the table
                    continue;
                }
                index.lock().unwrap().settle(true);
                table.apply(&written);
                position = *end;
                break;
            }
            let mut want_keyed = BTreeMap::new();
            let mut want_keyless = Vec::new();
            for (key, value) in &stream[..position as usize] {
                match (key, value) {
                    (Some(k), Some(v)) => { want_keyed.insert(k.clone(), v.clone()); }
                    (Some(k), None) => { want_keyed.remove(k); }
                    (None, v) => want_keyless.push(v.clone()), // a keyless record is a row, null value or not
                }
            }
            want_keyless.sort();
            let (keyed, keyless) = table.live();
            prop_assert_eq!(keyed, want_keyed);
            prop_assert_eq!(keyless, want_keyless);
            prop_assert_eq!(index.lock().unwrap().len(), table.live().0.len());
        }
    }
}

#[test]
fn a_rebuilt_index_goes_on_as_the_one_that_wrote() {
    // two commits by one index; a second index rebuilt from the first commit's files alone
    // writes the second commit the same way
    let dir = tempfile::tempdir().unwrap();
    let log = open_log(dir.path());
    let put = |keys: &[(&str, Option<&str>)]| {
        let recs = keys.iter().map(|(k, v)| {
            let mut r = Rec::default();
            (r.key, r.value) = (Some(k.as_bytes().to_vec()), v.map(|v| v.as_bytes().to_vec()));
            r
        });
        log.append_as_leader(BatchBuilder::new().base_timestamp(1_000).records(recs).build(), 0, 1_000).unwrap();
        log.update_high_watermark(log.log_end_offset());
        log.log_end_offset()
    };
    let first = put(&[("a", Some("1")), ("b", Some("1")), ("c", Some("1"))]);
    let second = put(&[("a", Some("2")), ("b", None), ("d", Some("2"))]);
    let write = |ix: &Arc<Mutex<KeyIndex>>, start, end, prefix: &str| {
        let loc = local(&dir.path().join("data"));
        let mut files = DataFiles::new(kafka_schema(), settings(1 << 30), loc, prefix.into(), None).unwrap();
        files.write_log(&log, start, end, u64::MAX, Some(Arc::clone(ix))).unwrap();
        let w = files.close().unwrap();
        ix.lock().unwrap().settle(true);
        w
    };
    let ix = Arc::new(Mutex::new(KeyIndex::new()));
    let c1 = write(&ix, 0, first, "one");
    assert_eq!(c1.len(), 1);
    let rebuilt = Arc::new(Mutex::new(KeyIndex::new()));
    let keys: Vec<Option<&[u8]>> = vec![Some(b"a"), Some(b"b"), Some(b"c")];
    rebuilt.lock().unwrap().add_file(&c1[0].path, c1[0].day, keys.into_iter(), &[]);
    let by_writer = write(&ix, first, second, "two");
    let by_rebuilt = write(&rebuilt, first, second, "three");
    let deletes = |w: &[WrittenFile]| {
        let mut t = Table::default();
        t.apply(&c1);
        t.apply(w);
        t.live()
    };
    assert_eq!(deletes(&by_writer), deletes(&by_rebuilt));
    let (live, _) = deletes(&by_rebuilt);
    assert_eq!(
        live.into_iter().collect::<Vec<_>>(),
        vec![(b"a".to_vec(), b"2".to_vec()), (b"c".to_vec(), b"1".to_vec()), (b"d".to_vec(), b"2".to_vec())]
    );
}
