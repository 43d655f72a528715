//! Tests of `table::tier_reader`: a log written as data files (table/data_files.rs) and read
//! back as record batches, window after window as a consumer fetches, checked against a model
//! of what a read_committed consumer of the log reads.
use std::collections::BTreeMap;

use super::data_files_tests::{append, end_txn, kafka_schema, local, open_log, settings, DAY_MS};
use super::tier_reader::{TableFile, TableReader, TableTierView};
use super::*;
use crate::batch::{walk_records, BatchHeader, TIMESTAMP_TYPE_BIT};
use crate::client::records::parse_headers;
use crate::log::Log;
use crate::remote::reader::check_crcs;

/// offset -> (key, value, timestamp ms, headers)
type Records = BTreeMap<i64, (Option<Vec<u8>>, Option<Vec<u8>>, i64, Vec<(Vec<u8>, Option<Vec<u8>>)>)>;

/// What a read_committed consumer reads of `log` from `from`.
fn committed(log: &Log, from: i64) -> Records {
    let mut out = Records::new();
    let end = log.last_stable_offset();
    let aborted = log.aborted_transactions(from, end);
    let mut next = from;
    while let Some(region) = log.read(next, 1 << 20, Some(end), true).unwrap() {
        let bytes = region.read_to_vec().unwrap();
        let mut pos = 0usize;
        while pos < bytes.len() {
            let h = BatchHeader::parse(&bytes[pos..]);
            let size = h.size() as usize;
            let skip = h.is_control()
                || (h.is_transactional()
                    && aborted.iter().any(|a| a.producer_id == h.producer_id && a.first_offset <= h.base_offset));
            if !skip {
                decode_into(&bytes[pos..pos + size], &h, &mut out);
            }
            next = h.next_offset();
            pos += size;
        }
    }
    out.retain(|o, _| *o >= from);
    out
}

fn decode_into(b: &[u8], h: &BatchHeader, out: &mut Records) {
    let plain = crate::compression::decompress(h.codec().unwrap(), &b[crate::batch::HEADER_LEN..], 1 << 30).unwrap();
    let log_append = h.attributes & TIMESTAMP_TYPE_BIT != 0;
    walk_records(&plain, h, 0, |r| {
        let ts = if log_append { h.max_timestamp } else { h.base_timestamp + r.timestamp_delta };
        let headers = parse_headers(r.headers, r.headers_count)
            .into_iter()
            .map(|(k, v)| (k.to_vec(), v.map(<[u8]>::to_vec)))
            .collect();
        out.insert(
            h.base_offset + i64::from(r.offset_delta),
            (r.key.map(<[u8]>::to_vec), r.value.map(<[u8]>::to_vec), ts, headers),
        );
    })
    .unwrap();
}

/// Every batch of `bytes`, checked (CRC, record framing, offset deltas rising within the
/// batch's last offset delta) and decoded.
fn decode(bytes: &[u8]) -> (Records, Vec<BatchHeader>) {
    let mut out = Records::new();
    let mut headers = Vec::new();
    let mut pos = 0usize;
    while pos < bytes.len() {
        let h = BatchHeader::parse(&bytes[pos..]);
        let size = h.size() as usize;
        check_crcs(&bytes[pos..pos + size]).unwrap();
        assert_eq!(h.magic, 2);
        assert!(h.producer_id == -1 && !h.is_transactional() && !h.is_control(), "{h:?}");
        decode_into(&bytes[pos..pos + size], &h, &mut out);
        headers.push(h);
        pos += size;
    }
    (out, headers)
}

/// A log of committed, aborted and late records over two days, written as two commits'
/// data files (small row groups, so reads prune them); the view of those files.
fn table(dir: &std::path::Path) -> (Log, TableTierView) {
    let log = open_log(dir);
    let day1 = 20_000 * DAY_MS + 5_000;
    let day2 = day1 + DAY_MS;
    append(&log, 50, day1, None); // 0..49
    append(&log, 20, day1, Some(7)); // 50..69, aborted
    end_txn(&log, 7, false); // 70
    append(&log, 30, day2, Some(8)); // 71..100
    end_txn(&log, 8, true); // 101
    for i in 0..30 {
        append(&log, 10, if i % 3 == 0 { day1 + i } else { day2 + i }, None); // 102..401, days interleaved
    }
    let end = log.last_stable_offset();
    let mut files = Vec::new();
    for (n, (from, to)) in [(0, 122), (122, end)].into_iter().enumerate() {
        let loc = local(&dir.join("data"));
        let mut s = settings(1 << 30);
        s.row_group_bytes = 2_000;
        let mut w = DataFiles::new(kafka_schema(), s, loc, format!("c{n}"), None).unwrap();
        assert_eq!(w.write_log(&log, from, to, u64::MAX, None).unwrap().next_offset, to);
        files.extend(w.close().unwrap());
    }
    assert!(files.len() >= 4, "two commits over two days: {} files", files.len());
    let view = TableTierView::new(
        files
            .iter()
            .map(|f| TableFile {
                min_offset: f.min_offset,
                max_offset: f.max_offset,
                path: data_files::local_dir(&f.path).unwrap().display().to_string(),
            })
            .collect(),
    );
    (log, view)
}

/// Reads the view from `from` as a consumer does: each window's batches, then on from the
/// offset after the last one, until the table has nothing more.
fn read_all(reader: &TableReader, view: &TableTierView, from: i64, want: u64) -> (Records, usize) {
    let mut got = Records::new();
    let mut at = from;
    let mut windows = 0;
    loop {
        let bytes = reader.read_window("t-0", 0, view, at, want).unwrap();
        if bytes.is_empty() {
            break;
        }
        windows += 1;
        let (records, headers) = decode(&bytes);
        assert!(headers[0].last_offset() >= at, "a window before the offset asked");
        for (o, r) in records {
            assert!(got.insert(o, r).is_none(), "offset {o} read twice");
        }
        at = headers.last().unwrap().next_offset();
        assert!(windows < 10_000);
    }
    (got, windows)
}

#[test]
fn the_table_reads_back_what_a_read_committed_consumer_of_the_log_reads() {
    let dir = tempfile::tempdir().unwrap();
    let (log, view) = table(dir.path());
    assert_eq!(view.log_start_offset(), 0);
    let reader = TableReader::new(1 << 20);
    for want in [1, 300, 5_000, 1 << 20] {
        let (got, windows) = read_all(&reader, &view, 0, want);
        assert_eq!(got, committed(&log, 0), "read in windows of {want} bytes");
        if want == 1 {
            assert!(windows > 20, "{windows} windows of at least one row each");
        }
    }
}

#[test]
fn a_read_from_inside_the_table_starts_there_and_gaps_are_stepped_over() {
    let dir = tempfile::tempdir().unwrap();
    let (log, view) = table(dir.path());
    let reader = TableReader::new(1 << 20);
    for from in [5, 49, 50, 60, 70, 71, 101, 250, 401] {
        let (got, _) = read_all(&reader, &view, from, 700);
        assert_eq!(got, committed(&log, from), "from offset {from}");
        assert!(got.keys().all(|o| !(50..=70).contains(o)), "an aborted record or a marker came back");
    }
    // in the aborted transaction: the first batch is the committed one after it
    let (first, _) = decode(&reader.read_window("t-0", 0, &view, 55, 700).unwrap());
    assert_eq!(first.keys().next(), Some(&71));
    assert!(reader.read_window("t-0", 0, &view, 402, 700).unwrap().is_empty(), "past the table");
    assert!(view.window(402).is_none());
}

#[test]
fn windows_take_every_file_overlapping_the_first() {
    let f = |min, max, p: &str| TableFile { min_offset: min, max_offset: max, path: p.into() };
    let view =
        TableTierView::new(vec![f(100, 200, "c"), f(0, 49, "a"), f(50, 120, "b"), f(150, 160, "d"), f(300, 400, "e")]);
    let names = |x| view.window(x).map(|(fs, end)| (fs.iter().map(|f| f.path.clone()).collect::<Vec<_>>(), end));
    assert_eq!(names(0), Some((vec!["a".into()], 49)));
    assert_eq!(names(49), Some((vec!["a".into()], 49)));
    assert_eq!(names(50), Some((vec!["b".into(), "c".into()], 120)));
    assert_eq!(names(121), Some((vec!["c".into(), "d".into()], 200)));
    assert_eq!(names(161), Some((vec!["c".into()], 200)));
    assert_eq!(names(201), Some((vec!["e".into()], 400)));
    assert_eq!(names(401), None);
    assert_eq!(view.log_start_offset(), 0);
    assert_eq!(view.last_offset(), 400);
}

#[test]
fn a_missing_file_is_an_error_naming_it() {
    let view =
        TableTierView::new(vec![TableFile { min_offset: 0, max_offset: 9, path: "/nonexistent/x.parquet".into() }]);
    let e = TableReader::new(1 << 20).read_window("t-0", 0, &view, 3, 1000).unwrap_err();
    assert!(e.contains("t-0 offsets 3..9") && e.contains("/nonexistent/x.parquet"), "{e}");
}

/// ListOffsets by time in the table: for every timestamp around the records' (late records
/// included, aborted ones absent), the least offset of a committed record at or after it, as
/// a model over what a read_committed consumer reads; None past the last.
#[test]
fn offsets_by_time_are_the_first_committed_record_at_or_after() {
    let dir = tempfile::tempdir().unwrap();
    let (log, view) = table(dir.path());
    let model = committed(&log, 0);
    let reader = TableReader::new(1 << 20);
    let mut stamps: Vec<i64> = model.values().map(|r| r.2).collect();
    stamps.sort_unstable();
    stamps.dedup();
    let mut probes: Vec<i64> = stamps.iter().flat_map(|&t| [t - 1, t, t + 1]).collect();
    probes.push(i64::MIN / 2);
    for t in probes {
        let want = model.iter().find(|(_, r)| r.2 >= t).map(|(&o, r)| (o, r.2));
        assert_eq!(reader.offset_for_timestamp(&view, 0, t).unwrap(), want, "timestamp {t}");
    }
    assert_eq!(reader.offset_for_timestamp(&view, 1, stamps[0]).unwrap(), None, "another partition's rows: none");
}
