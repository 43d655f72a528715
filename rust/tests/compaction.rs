//! Log compaction against a model, and crash states of the cleaner's swap protocol.
//!
//! Model test: random puts and deletes on a few keys (one record per batch, every codec),
//! random cleaning passes (forced or not, at advancing times), rolls and reopens (clean and
//! unclean), on tiny segments. After every step, reading the log from the start gives:
//! offsets strictly increasing; every record one that was appended at that offset; for each
//! key, its last record is the key's latest write at the same offset; a key is absent only
//! if its latest write is a tombstone whose delete horizon passed before a pass that covered
//! it (the model tracks horizons the way the cleaner sets them).
//!
//! Crash test: the files a pass leaves at each step of `.cleaned` → `.swap` → final are
//! recreated by hand from a "before" and an "after" copy of the directory; recovery must
//! give exactly one of the two logs (or, with groups in different states, a log that keeps
//! the latest record of every key).

use std::collections::HashMap;
use std::path::Path;

use crate::compression::Codec;
use crate::config::LogConfig;
use crate::log::{Log, LogRecord};
use crate::segment::Segment;
use proptest::prelude::*;

const RETENTION: i64 = 50;

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 500,
        index_interval_bytes: 100,
        segment_index_bytes: 240,
        cleanup_compact: true,
        cleanup_delete: false,
        delete_retention_ms: RETENTION,
        ..LogConfig::default()
    }
}

#[derive(Debug, Clone)]
enum Op {
    Put { key: u8, len: usize, codec: usize },
    Delete { key: u8 },
    Compact { force: bool, advance: i64 },
    Roll,
    Reopen { clean: bool },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0u8..5, 0usize..60, 0usize..5).prop_map(|(key, len, codec)| Op::Put { key, len, codec }),
        2 => (0u8..5).prop_map(|key| Op::Delete { key }),
        3 => (any::<bool>(), 0i64..100).prop_map(|(force, advance)| Op::Compact { force, advance }),
        1 => Just(Op::Roll),
        1 => any::<bool>().prop_map(|clean| Op::Reopen { clean }),
    ]
}

#[derive(Default)]
struct Model {
    next: i64,
    /// offset → (key, value) of everything appended.
    written: HashMap<i64, (Vec<u8>, Option<Vec<u8>>)>,
    /// key → (offset, value) of its latest write.
    latest: HashMap<Vec<u8>, (i64, Option<Vec<u8>>)>,
    /// Tombstone offset → delete horizon set by the first pass that kept it.
    horizons: HashMap<i64, i64>,
    /// Keys whose latest write is a tombstone that a pass removed.
    expired: std::collections::HashSet<Vec<u8>>,
}

impl Model {
    /// A pass at `now` cleaned everything below `end`.
    fn cleaned(&mut self, now: i64, end: i64) {
        for (key, (o, v)) in &self.latest {
            if v.is_some() || *o >= end {
                continue;
            }
            match self.horizons.get(o) {
                Some(&h) if now >= h => {
                    self.expired.insert(key.clone());
                }
                Some(_) => {}
                None => {
                    self.horizons.insert(*o, now + RETENTION);
                }
            }
        }
    }

    fn check(&self, log: &Log) -> Result<(), TestCaseError> {
        prop_assert_eq!(log.log_end_offset(), self.next);
        let got: Vec<LogRecord> = log.read_records(0, None, None).unwrap();
        prop_assert!(got.windows(2).all(|w| w[0].offset < w[1].offset), "offsets strictly increase");
        let mut last: HashMap<Vec<u8>, (i64, Option<Vec<u8>>)> = HashMap::new();
        for r in &got {
            let (k, v) = self.written.get(&r.offset).expect("every record was written at its offset");
            prop_assert_eq!(Some(k), r.key.as_ref());
            prop_assert_eq!(v, &r.value);
            last.insert(k.clone(), (r.offset, r.value.clone()));
        }
        for (key, latest) in &self.latest {
            if self.expired.contains(key) {
                prop_assert!(!last.contains_key(key), "key {:?}: an expired tombstone leaves nothing", key);
            } else {
                prop_assert_eq!(last.get(key), Some(latest), "key {:?}: the latest write survives at its offset", key);
            }
        }
        Ok(())
    }
}

fn run(ops: &[Op]) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), "m", 0, config(), None, 0).unwrap();
    let mut m = Model::default();
    let mut now = 1_000i64;
    for op in ops {
        now += 1;
        match op {
            Op::Put { key, len, codec } => {
                let k = vec![b'k', *key];
                let v = format!("{}:{}", m.next, "v".repeat(*len)).into_bytes();
                let r = log
                    .append_records_as_leader(&[(Some(k.clone()), Some(v.clone()))], 0, now, Codec::ALL[*codec])
                    .unwrap();
                prop_assert_eq!(r.base_offset, m.next);
                m.written.insert(m.next, (k.clone(), Some(v.clone())));
                m.latest.insert(k.clone(), (m.next, Some(v)));
                m.expired.remove(&k);
                m.next += 1;
            }
            Op::Delete { key } => {
                let k = vec![b'k', *key];
                log.append_records_as_leader(&[(Some(k.clone()), None)], 0, now, Codec::None).unwrap();
                m.written.insert(m.next, (k.clone(), None));
                m.latest.insert(k.clone(), (m.next, None));
                m.expired.remove(&k);
                m.next += 1;
            }
            Op::Compact { force, advance } => {
                now += advance;
                let r = log.compact(now, *force).unwrap();
                if r.segments_cleaned > 0 {
                    m.cleaned(now, r.cleaned_up_to);
                }
            }
            Op::Roll => {
                log.maybe_roll(now + 1_000_000_000).unwrap();
            }
            Op::Reopen { clean } => {
                if *clean {
                    log.close().unwrap();
                }
                drop(log);
                log = Log::open(dir.path(), "m", 0, config(), if *clean { None } else { Some(0) }, now).unwrap();
                prop_assert_eq!(log.recovery_report().bytes_truncated, 0);
                prop_assert_eq!(log.recovery_report().segments_dropped, 0);
            }
        }
        log.update_high_watermark(log.log_end_offset());
        m.check(&log)?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn compaction_matches_the_model(ops in proptest::collection::vec(op(), 1..160)) {
        run(&ops)?;
    }
}

#[test]
fn tombstone_expiry_sequence() {
    // put, delete, clean (horizon set), clean after the horizon (gone), put again (back).
    let ops = [
        Op::Put { key: 1, len: 300, codec: 0 },
        Op::Delete { key: 1 },
        Op::Put { key: 2, len: 300, codec: 1 },
        Op::Put { key: 3, len: 300, codec: 2 },
        Op::Roll,
        Op::Compact { force: true, advance: 0 },
        Op::Compact { force: true, advance: RETENTION + 1 },
        Op::Reopen { clean: false },
        Op::Put { key: 1, len: 3, codec: 3 },
        Op::Compact { force: true, advance: 0 },
    ];
    run(&ops).unwrap();
}

// --- crash states of the swap protocol -------------------------------------------------

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

fn bases(dir: &Path) -> Vec<i64> {
    let mut v: Vec<i64> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let n = e.unwrap().file_name().to_string_lossy().into_owned();
            n.strip_suffix(".log").and_then(|s| s.parse().ok())
        })
        .collect();
    v.sort_unstable();
    v
}

fn records(dir: &Path) -> Vec<LogRecord> {
    // Unclean open (no marker) so recovery checks everything from offset 0.
    let _ = std::fs::remove_file(dir.join(".clean-shutdown"));
    let log = Log::open(dir, "c", 0, config(), Some(0), 0).unwrap();
    let leftovers: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| matches!(std::path::Path::new(n).extension().and_then(|e| e.to_str()), Some("cleaned" | "swap")))
        .collect();
    assert!(leftovers.is_empty(), "recovery leaves no cleaner files: {leftovers:?}");
    let r = log.read_records(0, None, None).unwrap();
    log.close().unwrap();
    r
}

/// Writes a log whose next forced pass merges several segments per group. Returns the
/// "before" dir; the "after" dir gets the same log after the pass. Returns the groups:
/// (cleaned base, bases it replaces).
fn before_and_after(root: &Path) -> (std::path::PathBuf, std::path::PathBuf, Vec<(i64, Vec<i64>)>) {
    let before = root.join("before");
    let log = Log::open(&before, "c", 0, config(), None, 0).unwrap();
    let mut now = 10;
    for round in 0..3 {
        for i in 0..40 {
            now += 1;
            let key = format!("k{}", i % 7);
            let value =
                if i % 11 == 5 { None } else { Some(format!("r{round} i{i} {}", "p".repeat(i % 40)).into_bytes()) };
            log.append_records_as_leader(&[(Some(key.into_bytes()), value)], 0, now, Codec::ALL[i % 5]).unwrap();
            log.update_high_watermark(log.log_end_offset());
        }
        log.compact(now, true).unwrap();
    }
    log.maybe_roll(now + 1_000_000_000).unwrap();
    log.close().unwrap();
    let after = root.join("after");
    copy_dir(&before, &after);
    let log = Log::open(&after, "c", 0, config(), None, now).unwrap();
    log.update_high_watermark(log.log_end_offset());
    let r = log.compact(now + 2 * RETENTION, true).unwrap();
    assert!(r.segments_cleaned > 0);
    let end = r.cleaned_up_to;
    log.close().unwrap();
    let (b, a) = (bases(&before), bases(&after));
    let cleaned: Vec<i64> = a.iter().copied().filter(|&x| x < end).collect();
    let groups: Vec<(i64, Vec<i64>)> = cleaned
        .iter()
        .enumerate()
        .map(|(i, &g)| {
            let upto = cleaned.get(i + 1).copied().unwrap_or(end);
            (g, b.iter().copied().filter(|&x| x >= g && x < upto).collect())
        })
        .collect();
    assert!(groups.iter().any(|(_, o)| o.len() > 1), "some group merges segments: {groups:?}");
    (before, after, groups)
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Step {
    /// `.cleaned` files written, nothing renamed.
    Cleaned,
    /// Index files renamed to `.swap`, the log still `.cleaned`.
    IndexesSwapped,
    /// All three `.swap`, originals intact (the commit point just passed).
    Committed,
    /// `.swap` files, all originals but the first one deleted.
    OriginalsPartlyDeleted,
    /// Originals deleted, indexes renamed into place, the log still `.swap`.
    IndexesInPlace,
    /// Finished.
    Done,
}

fn stage(state: &Path, after: &Path, group: &(i64, Vec<i64>), step: Step) {
    let (g, originals) = group;
    let new = Segment::paths(after, *g, "");
    let cleaned = Segment::paths(state, *g, ".cleaned");
    let swap = Segment::paths(state, *g, ".swap");
    let live = Segment::paths(state, *g, "");
    let put = |i: usize, to: &Path| {
        std::fs::copy(&new[i], to).unwrap();
    };
    let delete_originals = |skip_first: bool| {
        for &o in originals.iter().skip(usize::from(skip_first)) {
            for p in Segment::paths(state, o, "") {
                let _ = std::fs::remove_file(p);
            }
        }
    };
    match step {
        Step::Cleaned => (0..3).for_each(|i| put(i, &cleaned[i])),
        Step::IndexesSwapped => {
            put(0, &cleaned[0]);
            put(1, &swap[1]);
            put(2, &swap[2]);
        }
        Step::Committed => (0..3).for_each(|i| put(i, &swap[i])),
        Step::OriginalsPartlyDeleted => {
            (0..3).for_each(|i| put(i, &swap[i]));
            delete_originals(true);
        }
        Step::IndexesInPlace => {
            delete_originals(false);
            put(0, &swap[0]);
            put(1, &live[1]);
            put(2, &live[2]);
        }
        Step::Done => {
            delete_originals(false);
            (0..3).for_each(|i| put(i, &live[i]));
        }
    }
}

#[test]
fn every_swap_step_recovers_to_before_or_after() {
    let root = tempfile::tempdir().unwrap();
    let (before, after, groups) = before_and_after(root.path());
    let want_before = records(&{
        let d = root.path().join("b2");
        copy_dir(&before, &d);
        d
    });
    let want_after = records(&{
        let d = root.path().join("a2");
        copy_dir(&after, &d);
        d
    });
    assert!(want_after.len() < want_before.len());
    let steps = [
        Step::Cleaned,
        Step::IndexesSwapped,
        Step::Committed,
        Step::OriginalsPartlyDeleted,
        Step::IndexesInPlace,
        Step::Done,
    ];
    for (n, step) in steps.iter().enumerate() {
        let state = root.path().join(format!("s{n}"));
        copy_dir(&before, &state);
        for g in &groups {
            stage(&state, &after, g, *step);
        }
        let got = records(&state);
        let want = if matches!(step, Step::Cleaned | Step::IndexesSwapped) { &want_before } else { &want_after };
        assert_eq!(&got, want, "{step:?}");
    }
    // Groups in different states (a crash between two groups' swaps, or within the second):
    // the result keeps every key's latest record at its offset and nothing not written.
    let latest =
        |rs: &[LogRecord]| rs.iter().map(|r| (r.key.clone(), (r.offset, r.value.clone()))).collect::<HashMap<_, _>>();
    for step in steps {
        let state = root.path().join(format!("mixed-{step:?}"));
        copy_dir(&before, &state);
        stage(&state, &after, &groups[0], Step::Done);
        for g in &groups[1..] {
            stage(&state, &after, g, step);
        }
        let got = records(&state);
        assert_eq!(latest(&got), latest(&want_before), "{step:?}");
        assert!(got.iter().all(|r| want_before.contains(r)), "{step:?}");
    }
}
