//! The key index of one partition of an upsert table (`iceberg.upsert.enable`): for each
//! record key, the one live row holding its latest value, as (data file, row position).
//!
//! An upsert table keeps one row per key. A commit writes the new records' rows as usual
//! and, for each key whose earlier row is live, a position delete naming that row (Iceberg's
//! position delete files: `file_path`, `pos`; written by `data_files`). A null value (a
//! tombstone) writes no row and deletes the earlier one; a record without a key is a plain
//! row that nothing replaces. The index is how a commit finds the earlier row without
//! reading the table: it holds every live row's key (memory: the keys' bytes and 16 bytes
//! each), and is rebuilt from the table's data files and position deletes when this node
//! has none or the table changed under it (a new leader, a compaction; logbroker/iceberg/
//! upsert_index.py decides).
//!
//! Invariants: a key is in the index iff its row is live in the table as of the index's
//! snapshot plus the changes of the commit in progress; a data file's number is its place
//! in `files`. A commit's changes are journaled (`begin` .. `settle`): a commit that did not
//! land is undone, so the index never names a row the table does not hold.
use std::collections::HashMap;

/// A live row: a data file's number in the index and the row's position in that file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowRef {
    pub file: u32,
    pub pos: u64,
}

/// A data file the index refers to: its path as the table names it, and its day partition
/// (a position delete goes in a delete file of the same partition).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexedFile {
    pub path: String,
    pub day: i32,
}

#[derive(Debug, Default)]
struct Journal {
    files_before: usize,
    /// keys changed by the commit in progress, with their row before it (first change only)
    before: HashMap<Box<[u8]>, Option<RowRef>>,
    /// superseded rows the commit took to delete
    superseded: Vec<RowRef>,
}

#[derive(Debug, Default)]
pub struct KeyIndex {
    files: Vec<IndexedFile>,
    by_path: HashMap<String, u32>,
    keys: HashMap<Box<[u8]>, RowRef>,
    /// Rows a rebuild found live under a key that a later row holds: the next commit deletes them.
    superseded: Vec<RowRef>,
    journal: Option<Journal>,
}

impl KeyIndex {
    pub fn new() -> KeyIndex {
        KeyIndex::default()
    }

    /// Live keys.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    pub fn file(&self, n: u32) -> &IndexedFile {
        &self.files[n as usize]
    }

    /// The number of a data file, given one if new.
    pub fn file_number(&mut self, path: &str, day: i32) -> u32 {
        if let Some(&n) = self.by_path.get(path) {
            return n;
        }
        let n = u32::try_from(self.files.len()).expect("fewer than 2^32 data files");
        self.files.push(IndexedFile { path: path.to_owned(), day });
        self.by_path.insert(path.to_owned(), n);
        n
    }

    pub fn get(&self, key: &[u8]) -> Option<RowRef> {
        self.keys.get(key).copied()
    }

    /// Starts a commit's changes (a commit left unsettled is undone first: it never landed).
    pub fn begin(&mut self) {
        if self.journal.is_some() {
            self.settle(false);
        }
        self.journal = Some(Journal { files_before: self.files.len(), ..Journal::default() });
    }

    /// The superseded rows to delete (in a commit: given back if it does not land).
    pub fn take_superseded(&mut self) -> Vec<RowRef> {
        let rows = std::mem::take(&mut self.superseded);
        if let Some(j) = &mut self.journal {
            j.superseded.extend_from_slice(&rows);
        }
        rows
    }

    /// Whether a commit's changes are journaled.
    pub fn in_commit(&self) -> bool {
        self.journal.is_some()
    }

    /// Sets (`Some`) or removes (`None`) a key's live row; returns the row it had.
    pub fn set(&mut self, key: &[u8], row: Option<RowRef>) -> Option<RowRef> {
        let old = match row {
            Some(r) => self.keys.insert(key.into(), r),
            None => self.keys.remove(key),
        };
        if let Some(j) = &mut self.journal {
            j.before.entry(key.into()).or_insert(old);
        }
        old
    }

    /// Ends a commit: `landed` keeps its changes, otherwise they are undone.
    pub fn settle(&mut self, landed: bool) {
        let Some(j) = self.journal.take() else { return };
        if landed {
            return;
        }
        for (key, before) in j.before {
            match before {
                Some(r) => self.keys.insert(key, r),
                None => self.keys.remove(&key),
            };
        }
        for f in self.files.drain(j.files_before..) {
            self.by_path.remove(&f.path);
        }
        self.superseded.extend(j.superseded);
    }

    /// Adds a data file's live rows (rebuilding from the table): `keys` its key column in
    /// row order (None: a record without a key), `deleted` its positions deleted so far.
    /// A key already live elsewhere is replaced when this file's row is later (files are
    /// added in offset order); returns how many rows were so superseded, which a consistent
    /// table has none of (the next commit deletes them: `take_superseded`).
    pub fn add_file<'a>(
        &mut self,
        path: &str,
        day: i32,
        keys: impl Iterator<Item = Option<&'a [u8]>>,
        deleted: &[u64],
    ) -> usize {
        let file = self.file_number(path, day);
        let mut deleted = deleted.to_vec();
        deleted.sort_unstable();
        let mut superseded = 0;
        for (pos, key) in keys.enumerate() {
            let pos = pos as u64;
            let Some(key) = key else { continue };
            if deleted.binary_search(&pos).is_ok() {
                continue;
            }
            if let Some(old) = self.set(key, Some(RowRef { file, pos })) {
                self.superseded.push(old);
                superseded += 1;
            }
        }
        superseded
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_commit_that_did_not_land_is_undone_and_one_that_did_is_kept() {
        let mut ix = KeyIndex::new();
        let a = ix.file_number("f0", 1);
        let got = ix.add_file("f0", 1, [Some(&b"k1"[..]), None, Some(b"k2"), Some(b"k1")].into_iter(), &[3]);
        assert_eq!(got, 0);
        assert_eq!(ix.get(b"k1"), Some(RowRef { file: a, pos: 0 }));
        assert_eq!(ix.len(), 2);

        ix.begin();
        let b = ix.file_number("f1", 2);
        assert_eq!(ix.set(b"k1", Some(RowRef { file: b, pos: 0 })), Some(RowRef { file: a, pos: 0 }));
        ix.set(b"k1", Some(RowRef { file: b, pos: 1 }));
        ix.set(b"k2", None);
        ix.set(b"k3", Some(RowRef { file: b, pos: 2 }));
        ix.settle(false);
        assert_eq!(ix.get(b"k1"), Some(RowRef { file: a, pos: 0 }));
        assert_eq!(ix.get(b"k2"), Some(RowRef { file: a, pos: 2 }));
        assert_eq!(ix.get(b"k3"), None);
        assert_eq!(ix.files.len(), 1);
        assert!(!ix.by_path.contains_key("f1"));

        ix.begin();
        let b = ix.file_number("f1", 2);
        ix.set(b"k2", None);
        ix.begin(); // the unsettled one is undone
        assert_eq!(ix.get(b"k2"), Some(RowRef { file: a, pos: 2 }));
        let b2 = ix.file_number("f1", 2);
        assert_eq!(b, b2);
        ix.set(b"k2", None);
        ix.settle(true);
        assert_eq!(ix.get(b"k2"), None);
        assert_eq!(ix.file(b2).path, "f1");
    }

    #[test]
    fn a_key_live_twice_when_rebuilt_keeps_the_later_row_and_names_the_earlier() {
        let mut ix = KeyIndex::new();
        ix.add_file("f0", 1, [Some(&b"k"[..])].into_iter(), &[]);
        let got = ix.add_file("f1", 1, [Some(&b"k"[..])].into_iter(), &[]);
        assert_eq!(got, 1);
        assert_eq!(ix.get(b"k"), Some(RowRef { file: 1, pos: 0 }));
        ix.begin();
        assert_eq!(ix.take_superseded(), vec![RowRef { file: 0, pos: 0 }]);
        ix.settle(false); // not landed: still to delete
        ix.begin();
        assert_eq!(ix.take_superseded(), vec![RowRef { file: 0, pos: 0 }]);
        ix.settle(true);
        assert!(ix.take_superseded().is_empty());
    }
}
