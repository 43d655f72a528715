//! Tests of tiered storage's Rust half against a local-directory store: segments copied
//! and read back byte for byte at every offset, corrupt and missing objects, the cache.
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use super::cache::{ByteCache, Lookup, ReadWaiter};
use super::reader::{index_lookup, txn_entries, txn_index_bytes, RemoteRead, RemoteReader, RemoteSegment};
use super::store::RemoteStore;
use super::upload::{copy_segment, delete_segment, UploadStats};
use crate::builder::LogBuilder;
use crate::config::LogConfig;
use crate::producer_state::AbortedTxn;

#[derive(Default)]
struct Count(AtomicUsize);
impl ReadWaiter for Count {
    fn remote_read_done(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

fn store(dir: &std::path::Path) -> Arc<RemoteStore> {
    let url = format!("file://{}", dir.display());
    Arc::new(RemoteStore::open(&url, &[], 2).unwrap())
}

/// A log of small segments, HW at the LEO, every rolled segment copied; returns the copies.
fn copied_log(dir: &std::path::Path, store: &RemoteStore) -> (LogBuilder, Vec<RemoteSegment>) {
    let config = LogConfig { segment_bytes: 4096, index_interval_bytes: 256, ..LogConfig::default() };
    let mut lb = LogBuilder::open(&dir.join("log"), config).unwrap();
    for _ in 0..40 {
        lb.append(2, 3, 60).unwrap();
    }
    lb.log.update_high_watermark(lb.log.log_end_offset());
    let stats = UploadStats::default();
    let mut segs = Vec::new();
    for (base, _) in lb.log.upload_candidates(0).unwrap() {
        let up = lb.log.upload_segment(base).unwrap().unwrap();
        let done = copy_segment(store, "t-abc/0", &format!("id{base}"), &up, &stats).unwrap();
        segs.push(RemoteSegment {
            start_offset: up.base_offset,
            end_offset: up.end_offset,
            base_offset: up.base_offset,
            stem: done.stem,
            size: up.size,
            max_timestamp: up.max_timestamp,
        });
    }
    assert!(segs.len() > 3, "several segments rolled");
    (lb, segs)
}

#[test]
fn a_copied_log_is_left_out_of_the_page_cache() {
    // a file:// copy is durable when its put returns and then dropped from the page cache
    // (store.rs); the local segment it came from stays cached
    let dir = tempfile::tempdir().unwrap();
    let st = store(&dir.path().join("remote"));
    let (lb, segs) = copied_log(dir.path(), &st);
    for seg in &segs {
        let copy = std::fs::File::open(dir.path().join("remote").join(format!("{}.log", seg.stem))).unwrap();
        assert_eq!(crate::sys::resident_pages(&copy).unwrap(), 0, "{} cached", seg.stem);
    }
    let local = lb.log.upload_segment(segs[0].base_offset).unwrap().unwrap();
    assert!(crate::sys::resident_pages(&local.file).unwrap() > 0, "the local segment is cached");
}

fn read_ready(reader: &Arc<RemoteReader>, seg: &RemoteSegment, offset: i64, budget: u64) -> RemoteRead {
    let waiter = Arc::new(Count::default());
    let weak: Weak<dyn ReadWaiter> = Arc::downgrade(&waiter) as Weak<dyn ReadWaiter>;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match reader.read(seg, offset, budget, true, true, &weak) {
            RemoteRead::Pending => {
                assert!(Instant::now() < deadline, "remote read still pending");
                std::thread::sleep(Duration::from_millis(2));
            }
            other => return other,
        }
    }
}

#[test]
fn copied_segments_read_back_at_every_offset() {
    let dir = tempfile::tempdir().unwrap();
    let st = store(&dir.path().join("remote"));
    let (lb, segs) = copied_log(dir.path(), &st);
    // small chunks: reads cross chunk boundaries
    let reader =
        Arc::new(RemoteReader::new(Arc::clone(&st), 1 << 20, 1 << 20, 1000, Duration::from_millis(500), u64::MAX));
    for seg in &segs {
        for offset in seg.start_offset..=seg.end_offset {
            let RemoteRead::Ready { records, aborted } = read_ready(&reader, seg, offset, 1 << 20) else {
                panic!("offset {offset} not read");
            };
            assert!(aborted.is_empty());
            let local = lb.log.read(offset, 1 << 20, Some(seg.end_offset + 1), true).unwrap().unwrap();
            assert_eq!(&records[..], &local.read_to_vec().unwrap()[..], "offset {offset}: remote bytes = local bytes");
        }
        // a budget below one batch still returns the first batch whole (min_one)
        let RemoteRead::Ready { records, .. } = read_ready(&reader, seg, seg.start_offset, 1) else { panic!() };
        let h = crate::batch::BatchHeader::parse(&records);
        assert_eq!(records.len() as u64, h.size());
    }
    let (chunk_bytes, index_bytes, hits, misses) = reader.cache_stats();
    assert!(chunk_bytes > 0 && index_bytes > 0 && hits > misses);
}

#[test]
fn a_corrupt_object_is_an_error_naming_its_key() {
    let dir = tempfile::tempdir().unwrap();
    let st = store(&dir.path().join("remote"));
    let (_lb, segs) = copied_log(dir.path(), &st);
    let path = dir.path().join("remote").join(format!("{}.log", segs[0].stem));
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[100] ^= 0xff;
    std::fs::write(&path, bytes).unwrap();
    let reader =
        Arc::new(RemoteReader::new(Arc::clone(&st), 1 << 20, 1 << 20, 1 << 16, Duration::from_millis(500), u64::MAX));
    let RemoteRead::Failed(why) = read_ready(&reader, &segs[0], 0, 1 << 20) else { panic!("corrupt bytes served") };
    assert!(why.contains("CRC-32C mismatch") && why.contains(&segs[0].stem), "{why}");
    // a segment whose objects are gone
    delete_segment(&st, &segs[1].stem).unwrap();
    let RemoteRead::Failed(why) = read_ready(&reader, &segs[1], segs[1].start_offset, 1 << 20) else { panic!() };
    assert!(why.contains("missing") && why.contains(&segs[1].stem), "{why}");
    // the others still read
    assert!(matches!(read_ready(&reader, &segs[2], segs[2].start_offset, 1 << 20), RemoteRead::Ready { .. }));
}

#[test]
fn the_cache_keeps_the_most_recently_used_within_its_bound() {
    let cache = ByteCache::new(10);
    let waiter = Arc::new(Count::default());
    let weak: Weak<dyn ReadWaiter> = Arc::downgrade(&waiter) as Weak<dyn ReadWaiter>;
    assert!(matches!(cache.lookup("a", Some(weak.clone())), Lookup::Miss));
    assert!(matches!(cache.lookup("a", Some(weak.clone())), Lookup::Loading));
    cache.fill("a", Ok(bytes::Bytes::from_static(b"123456")));
    assert_eq!(waiter.0.load(Ordering::Relaxed), 1, "one wake-up per waiter list");
    assert!(matches!(cache.lookup("b", None), Lookup::Miss));
    cache.fill("b", Ok(bytes::Bytes::from_static(b"abcdef")));
    assert!(matches!(cache.lookup("a", None), Lookup::Miss), "a was least recently used: evicted");
    assert!(matches!(cache.lookup("b", None), Lookup::Hit(_)));
    cache.fill("a", Err("down".into()));
    assert!(matches!(cache.lookup("a", None), Lookup::Failed(_)), "a failure is remembered for a while");
}

#[test]
fn txn_index_and_offset_index_formats() {
    let txns = vec![
        AbortedTxn { producer_id: 7, first_offset: 10, last_offset: 20, last_stable_offset: 21 },
        AbortedTxn { producer_id: 8, first_offset: 30, last_offset: 31, last_stable_offset: 32 },
    ];
    let bytes = txn_index_bytes(&txns);
    assert_eq!(bytes.len(), 68);
    assert_eq!(txn_entries(&bytes), txns);
    // entries (rel offset, position): the position of the last entry at or below the offset
    let mut index = Vec::new();
    for (rel, pos) in [(3u32, 100u32), (9, 400), (15, 900)] {
        index.extend_from_slice(&rel.to_be_bytes());
        index.extend_from_slice(&pos.to_be_bytes());
    }
    assert_eq!(index_lookup(&index, 1000, 1002), 0);
    assert_eq!(index_lookup(&index, 1000, 1003), 100);
    assert_eq!(index_lookup(&index, 1000, 1014), 400);
    assert_eq!(index_lookup(&index, 1000, 2000), 900);
}

#[test]
fn offset_for_timestamp_in_copies_matches_the_local_log() {
    let dir = tempfile::tempdir().unwrap();
    let st = store(&dir.path().join("remote"));
    let (lb, segs) = copied_log(dir.path(), &st);
    let reader = RemoteReader::new(Arc::clone(&st), 1 << 20, 1 << 20, 1 << 16, Duration::from_millis(500), u64::MAX);
    let last = segs.last().unwrap();
    let (first_ts, _) = lb.log.max_timestamp();
    let mut checked = 0;
    for ts in [i64::MIN, 0, first_ts - 1_000_000, first_ts, first_ts + 1] {
        let local = lb.log.offset_for_timestamp(ts).unwrap();
        let remote = segs.iter().find_map(|s| reader.offset_for_timestamp(s, ts, 0).unwrap());
        match local {
            Some((o, _)) if o <= last.end_offset => {
                assert_eq!(remote.map(|r| r.0), Some(o), "timestamp {ts}");
                checked += 1;
            }
            _ => assert!(remote.is_none() || remote.unwrap().0 <= last.end_offset),
        }
    }
    assert!(checked > 0);
    // every record's own timestamp finds it (or an earlier record of that timestamp)
    for (o, ts) in
        lb.log.read_records(0, Some(last.end_offset + 1), None).unwrap().iter().map(|r| (r.offset, r.timestamp))
    {
        let remote = segs.iter().find_map(|s| reader.offset_for_timestamp(s, ts, 0).unwrap()).unwrap();
        assert!(remote.0 <= o && remote.1 == ts, "record {o} at {ts}: found {remote:?}");
    }
}
