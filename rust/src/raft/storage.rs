//! The controller quorum's durable Raft state: raft-rs's `MemStorage` in memory, backed by
//! three files in the metadata log directory.
//!
//! ```text
//! raft.log        appended records, each: u32 length | u32 CRC-32C of the payload | payload
//!                 payload = one raft-proto `Entry` (protobuf). Replaying the records in
//!                 order with MemStorage::append reproduces the log: an entry whose index is
//!                 at or below the last one replaces that suffix (a follower's divergent
//!                 tail, truncated by the leader), exactly as the append that wrote it did.
//!                 A torn or corrupt record at the end (crash mid-append) ends the replay
//!                 and is cut off; it was never acknowledged (see "order" below).
//! hardstate       term, vote, commit: 3 x u64 big-endian + u32 CRC-32C; replaced atomically
//!                 (write tmp, fsync, rename, fsync dir).
//! voters          the voter ids the quorum started with, "1,2,3\n" (written once, when the
//!                 directory is new; a node started later with another voter list refuses).
//!                 Empty ("\n") for a node that joined an existing quorum: its configuration
//!                 comes from the leader's snapshot. Voters added or removed later (KIP-853)
//!                 are configuration changes in the log and the snapshot, not in this file.
//! snapshot        u32 length | u32 CRC-32C | raft-proto `Snapshot` (metadata: index, term,
//!                 conf state; data: the metadata image as the control plane wrote it);
//!                 replaced atomically. raft.log is then rewritten from the snapshot index
//!                 on (compaction), also atomically.
//! ```
//!
//! Order (the rule that makes votes and acknowledgements count): entries and hard state of a
//! Ready are written and fsynced *before* any of its persisted messages (votes, append
//! responses) leave the node; see `node.rs`.
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use protobuf::Message as _;
use raft::eraftpb::{ConfState, Entry, HardState, Snapshot};
use raft::storage::MemStorage;

use super::RaftError;

const LOG: &str = "raft.log";
const HARD_STATE: &str = "hardstate";
const SNAPSHOT: &str = "snapshot";
const VOTERS: &str = "voters";

fn parse_voters(path: &Path, raw: &[u8]) -> Result<Vec<u64>, RaftError> {
    let corrupt = || RaftError::Corrupt {
        path: path.to_path_buf(),
        what: format!("voter list {:?}", String::from_utf8_lossy(raw)),
    };
    let text = std::str::from_utf8(raw).map_err(|_| corrupt())?;
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    text.trim().split(',').map(|v| v.trim().parse::<u64>().map_err(|_| corrupt())).collect()
}

/// MemStorage plus the files that make it durable.
pub struct DurableStorage {
    dir: PathBuf,
    creation_voters: Vec<u64>,
    mem: MemStorage,
    log: File,
    snap: Arc<RwLock<Option<Snapshot>>>,
}

/// What raft-rs reads: the in-memory log, and the latest snapshot *with its data* for a
/// follower that needs entries already compacted away (MemStorage alone would build a
/// snapshot of metadata only, which a follower cannot install).
#[derive(Clone)]
pub struct RaftStore {
    mem: MemStorage,
    snap: Arc<RwLock<Option<Snapshot>>>,
}

impl raft::Storage for RaftStore {
    fn initial_state(&self) -> raft::Result<raft::RaftState> {
        self.mem.initial_state()
    }

    fn entries(
        &self,
        low: u64,
        high: u64,
        max_size: impl Into<Option<u64>>,
        context: raft::GetEntriesContext,
    ) -> raft::Result<Vec<Entry>> {
        self.mem.entries(low, high, max_size, context)
    }

    fn term(&self, idx: u64) -> raft::Result<u64> {
        self.mem.term(idx)
    }

    fn first_index(&self) -> raft::Result<u64> {
        self.mem.first_index()
    }

    fn last_index(&self) -> raft::Result<u64> {
        self.mem.last_index()
    }

    /// The held snapshot, sent with the *current* configuration: a learner admitted after
    /// the snapshot was taken must find itself in it (raft-rs drops a snapshot that does not
    /// name the node), and the configuration changes after the snapshot index that it then
    /// applies again are no-ops (adding a member twice, removing one that is gone).
    fn snapshot(&self, request_index: u64, _to: u64) -> raft::Result<Snapshot> {
        let held = self.snap.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        match &*held {
            Some(s) if s.get_metadata().index >= request_index => {
                let mut out = s.clone();
                out.mut_metadata().set_conf_state(self.mem.initial_state()?.conf_state);
                Ok(out)
            }
            _ => Err(raft::Error::Store(raft::StorageError::SnapshotTemporarilyUnavailable)),
        }
    }
}

fn io(path: &Path, what: &str) -> impl FnOnce(std::io::Error) -> RaftError {
    let (path, what) = (path.to_path_buf(), what.to_owned());
    move |e| RaftError::Io { path, what, source: e }
}

fn frame(payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + payload.len());
    out.extend_from_slice(&u32::try_from(payload.len()).unwrap_or(u32::MAX).to_be_bytes());
    out.extend_from_slice(&crc32c::crc32c(payload).to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// Splits framed records; returns them and the length of the valid prefix.
fn unframe(buf: &[u8]) -> (Vec<&[u8]>, usize) {
    let mut out = Vec::new();
    let mut pos = 0;
    while buf.len() - pos >= 8 {
        let len = u32::from_be_bytes(buf[pos..pos + 4].try_into().unwrap_or_default()) as usize;
        let crc = u32::from_be_bytes(buf[pos + 4..pos + 8].try_into().unwrap_or_default());
        if buf.len() - pos - 8 < len {
            break;
        }
        let payload = &buf[pos + 8..pos + 8 + len];
        if crc32c::crc32c(payload) != crc {
            break;
        }
        out.push(payload);
        pos += 8 + len;
    }
    (out, pos)
}

fn write_atomic(dir: &Path, name: &str, data: &[u8]) -> Result<(), RaftError> {
    let tmp = dir.join(format!("{name}.tmp"));
    let path = dir.join(name);
    let mut f = File::create(&tmp).map_err(io(&tmp, "create"))?;
    f.write_all(data).map_err(io(&tmp, "write"))?;
    f.sync_all().map_err(io(&tmp, "fsync"))?;
    fs::rename(&tmp, &path).map_err(io(&path, "rename"))?;
    File::open(dir).and_then(|d| d.sync_all()).map_err(io(dir, "fsync directory"))
}

fn read_file(path: &Path) -> Result<Option<Vec<u8>>, RaftError> {
    match File::open(path) {
        Ok(mut f) => {
            let mut buf = Vec::new();
            f.read_to_end(&mut buf).map_err(io(path, "read"))?;
            Ok(Some(buf))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io(path, "open")(e)),
    }
}

fn encode_hard_state(hs: &HardState) -> Vec<u8> {
    let mut out = Vec::with_capacity(28);
    out.extend_from_slice(&hs.term.to_be_bytes());
    out.extend_from_slice(&hs.vote.to_be_bytes());
    out.extend_from_slice(&hs.commit.to_be_bytes());
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_be_bytes());
    out
}

fn decode_hard_state(path: &Path, b: &[u8]) -> Result<HardState, RaftError> {
    let corrupt = || RaftError::Corrupt { path: path.to_path_buf(), what: format!("hard state of {} bytes", b.len()) };
    if b.len() != 28 || crc32c::crc32c(&b[..24]).to_be_bytes() != b[24..28] {
        return Err(corrupt());
    }
    let u = |i: usize| u64::from_be_bytes(b[i..i + 8].try_into().unwrap_or_default());
    Ok(HardState { term: u(0), vote: u(8), commit: u(16), ..Default::default() })
}

impl DurableStorage {
    /// Opens (or creates) the Raft state in `dir`. A new directory starts with `voters` as
    /// the configuration; an existing one keeps what it holds.
    pub fn open(dir: &Path, voters: &[u64]) -> Result<Self, RaftError> {
        fs::create_dir_all(dir).map_err(io(dir, "create directory"))?;
        let mem = MemStorage::new();
        let snap_path = dir.join(SNAPSHOT);
        let mut conf_from_snapshot = false;
        let mut held = None;
        if let Some(raw) = read_file(&snap_path)? {
            let (recs, _) = unframe(&raw);
            let rec = recs
                .first()
                .ok_or_else(|| RaftError::Corrupt { path: snap_path.clone(), what: "snapshot record".into() })?;
            let snap = Snapshot::parse_from_bytes(rec)
                .map_err(|e| RaftError::Corrupt { path: snap_path.clone(), what: format!("snapshot: {e}") })?;
            mem.wl().apply_snapshot(snap.clone()).map_err(|e| RaftError::Raft(e.to_string()))?;
            held = Some(snap);
            conf_from_snapshot = true;
        }
        let log_path = dir.join(LOG);
        let raw = read_file(&log_path)?.unwrap_or_default();
        let (recs, valid) = unframe(&raw);
        for rec in recs {
            let e = Entry::parse_from_bytes(rec)
                .map_err(|e| RaftError::Corrupt { path: log_path.clone(), what: format!("entry: {e}") })?;
            let first = raft::Storage::first_index(&mem).map_err(|e| RaftError::Raft(e.to_string()))?;
            if e.index < first {
                continue; // covered by the snapshot
            }
            mem.wl().append(&[e]).map_err(|e| RaftError::Raft(e.to_string()))?;
        }
        // the voter set this log was started with, fixed at creation
        let vpath = dir.join(VOTERS);
        let creation_voters = if let Some(raw) = read_file(&vpath)? {
            parse_voters(&vpath, &raw)?
        } else {
            let text = voters.iter().map(u64::to_string).collect::<Vec<_>>().join(",") + "\n";
            write_atomic(dir, VOTERS, text.as_bytes())?;
            voters.to_vec()
        };
        if !conf_from_snapshot {
            mem.wl().set_conf_state(ConfState { voters: creation_voters.clone(), ..Default::default() });
        }
        if let Some(raw) = read_file(&dir.join(HARD_STATE))? {
            let mut hs = decode_hard_state(&dir.join(HARD_STATE), &raw)?;
            // the commit index is written lazily (see `set_commit`); a snapshot holds applied,
            // so committed, state: the commit index is at least its index
            if let Some(snap) = &held {
                hs.commit = hs.commit.max(snap.get_metadata().index);
            }
            mem.wl().set_hardstate(hs);
        }
        let log = OpenOptions::new().create(true).append(true).open(&log_path).map_err(io(&log_path, "open"))?;
        if valid < raw.len() {
            // a torn tail from a crash mid-append: never acknowledged, cut it off
            log.set_len(valid as u64).map_err(io(&log_path, "truncate torn tail"))?;
            log.sync_all().map_err(io(&log_path, "fsync"))?;
        }
        Ok(DurableStorage { dir: dir.to_path_buf(), creation_voters, mem, log, snap: Arc::new(RwLock::new(held)) })
    }

    /// The voters this log was started with (empty for a node that joined a quorum).
    pub fn creation_voters(&self) -> Vec<u64> {
        self.creation_voters.clone()
    }

    pub fn mem(&self) -> &MemStorage {
        &self.mem
    }

    /// The storage raft-rs reads (shares this storage's log and snapshot).
    pub fn raft_store(&self) -> RaftStore {
        RaftStore { mem: self.mem.clone(), snap: Arc::clone(&self.snap) }
    }

    fn set_snapshot(&self, snap: &Snapshot) {
        *self.snap.write().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(snap.clone());
    }

    /// Appends entries (replacing any conflicting suffix) durably: written and fsynced.
    pub fn append(&mut self, entries: &[Entry]) -> Result<(), RaftError> {
        if entries.is_empty() {
            return Ok(());
        }
        let path = self.dir.join(LOG);
        let mut buf = Vec::new();
        for e in entries {
            let payload = e.write_to_bytes().map_err(|e| RaftError::Raft(e.to_string()))?;
            buf.extend_from_slice(&frame(&payload));
        }
        self.log.write_all(&buf).map_err(io(&path, "append"))?;
        self.log.sync_data().map_err(io(&path, "fsync"))?;
        self.mem.wl().append(entries).map_err(|e| RaftError::Raft(e.to_string()))
    }

    /// Replaces the hard state durably.
    pub fn set_hard_state(&mut self, hs: &HardState) -> Result<(), RaftError> {
        write_atomic(&self.dir, HARD_STATE, &encode_hard_state(hs))?;
        self.mem.wl().set_hardstate(hs.clone());
        Ok(())
    }

    /// The configuration after an applied change (learners joining). In memory: a restart
    /// applies the change again from the log, and a snapshot taken later records it.
    pub fn set_conf_state(&mut self, cs: ConfState) {
        self.mem.wl().set_conf_state(cs);
    }

    /// Records a new commit index (in memory; the next hard-state write carries it, and on
    /// restart entries past a lost commit index are simply committed again).
    pub fn set_commit(&mut self, commit: u64) {
        self.mem.wl().mut_hard_state().commit = commit;
    }

    /// Installs a snapshot received from the leader: snapshot file first, then the log is
    /// rewritten to hold only what follows it.
    pub fn apply_snapshot(&mut self, snap: &Snapshot) -> Result<(), RaftError> {
        let payload = snap.write_to_bytes().map_err(|e| RaftError::Raft(e.to_string()))?;
        write_atomic(&self.dir, SNAPSHOT, &frame(&payload))?;
        self.mem.wl().apply_snapshot(snap.clone()).map_err(|e| RaftError::Raft(e.to_string()))?;
        self.set_snapshot(snap);
        self.rewrite_log()
    }

    /// Takes a snapshot of the applied state `data` at `index` (applied, so committed) and
    /// drops the log entries it covers.
    pub fn compact(&mut self, index: u64, data: Vec<u8>) -> Result<(), RaftError> {
        let term = raft::Storage::term(&self.mem, index).map_err(|e| RaftError::Raft(e.to_string()))?;
        let mut snap = Snapshot { data: data.into(), ..Default::default() };
        {
            let md = snap.mut_metadata();
            md.index = index;
            md.term = term;
            md.set_conf_state(
                raft::Storage::initial_state(&self.mem).map_err(|e| RaftError::Raft(e.to_string()))?.conf_state,
            );
        }
        let payload = snap.write_to_bytes().map_err(|e| RaftError::Raft(e.to_string()))?;
        write_atomic(&self.dir, SNAPSHOT, &frame(&payload))?;
        self.set_snapshot(&snap);
        // the stored commit index may lag (it is written lazily): never below the snapshot
        let mut hs = raft::Storage::initial_state(&self.mem).map_err(|e| RaftError::Raft(e.to_string()))?.hard_state;
        if hs.commit < index {
            hs.commit = index;
            self.set_hard_state(&hs)?;
        }
        // keep the entry at `index` itself: MemStorage answers first_index and term from its
        // entries, and an emptied log would fall back to the previous snapshot's index
        self.mem.wl().compact(index).map_err(|e| RaftError::Raft(e.to_string()))?;
        self.rewrite_log()
    }

    /// The latest snapshot held, if any.
    pub fn snapshot(&self) -> Result<Option<Snapshot>, RaftError> {
        let path = self.dir.join(SNAPSHOT);
        let Some(raw) = read_file(&path)? else { return Ok(None) };
        let (recs, _) = unframe(&raw);
        let Some(rec) = recs.first() else { return Ok(None) };
        Snapshot::parse_from_bytes(rec)
            .map(Some)
            .map_err(|e| RaftError::Corrupt { path, what: format!("snapshot: {e}") })
    }

    fn rewrite_log(&mut self) -> Result<(), RaftError> {
        let path = self.dir.join(LOG);
        let entries = {
            let first = raft::Storage::first_index(&self.mem).map_err(|e| RaftError::Raft(e.to_string()))?;
            let last = raft::Storage::last_index(&self.mem).map_err(|e| RaftError::Raft(e.to_string()))?;
            if last >= first {
                raft::Storage::entries(&self.mem, first, last + 1, None, raft::GetEntriesContext::empty(false))
                    .map_err(|e| RaftError::Raft(e.to_string()))?
            } else {
                Vec::new()
            }
        };
        let mut buf = Vec::new();
        for e in &entries {
            let payload = e.write_to_bytes().map_err(|e| RaftError::Raft(e.to_string()))?;
            buf.extend_from_slice(&frame(&payload));
        }
        write_atomic(&self.dir, LOG, &buf)?;
        self.log = OpenOptions::new().append(true).open(&path).map_err(io(&path, "open"))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use raft::Storage;

    fn entry(index: u64, term: u64, data: &[u8]) -> Entry {
        Entry { index, term, data: data.to_vec().into(), ..Default::default() }
    }

    fn all(s: &DurableStorage) -> Vec<(u64, u64, Vec<u8>)> {
        let m = s.mem();
        let (first, last) = (m.first_index().unwrap(), m.last_index().unwrap());
        if last < first {
            return Vec::new();
        }
        m.entries(first, last + 1, None, raft::GetEntriesContext::empty(false))
            .unwrap()
            .into_iter()
            .map(|e| (e.index, e.term, e.data.to_vec()))
            .collect()
    }

    #[test]
    fn entries_and_hard_state_survive_reopen_and_a_replaced_suffix_stays_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = DurableStorage::open(dir.path(), &[1, 2, 3]).unwrap();
        s.append(&[entry(1, 1, b"a"), entry(2, 1, b"b"), entry(3, 1, b"c")]).unwrap();
        s.append(&[entry(2, 2, b"B")]).unwrap(); // a new leader's log replaces 2..
        s.set_hard_state(&HardState { term: 2, vote: 3, commit: 1, ..Default::default() }).unwrap();
        drop(s);
        let s = DurableStorage::open(dir.path(), &[1, 2, 3]).unwrap();
        assert_eq!(all(&s), vec![(1, 1, b"a".to_vec()), (2, 2, b"B".to_vec())]);
        let hs = s.mem().initial_state().unwrap().hard_state;
        assert_eq!((hs.term, hs.vote, hs.commit), (2, 3, 1));
    }

    #[test]
    fn a_torn_tail_is_cut_off() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = DurableStorage::open(dir.path(), &[1]).unwrap();
        s.append(&[entry(1, 1, b"kept")]).unwrap();
        drop(s);
        let path = dir.path().join(LOG);
        let good = fs::metadata(&path).unwrap().len();
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(&[0, 0, 0, 50, 1, 2, 3]).unwrap(); // a record header with half a payload
        drop(f);
        let mut s = DurableStorage::open(dir.path(), &[1]).unwrap();
        assert_eq!(fs::metadata(&path).unwrap().len(), good);
        s.append(&[entry(2, 1, b"next")]).unwrap();
        drop(s);
        let s = DurableStorage::open(dir.path(), &[1]).unwrap();
        assert_eq!(all(&s), vec![(1, 1, b"kept".to_vec()), (2, 1, b"next".to_vec())]);
    }

    #[test]
    fn a_corrupt_hard_state_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = DurableStorage::open(dir.path(), &[1]).unwrap();
        s.set_hard_state(&HardState { term: 5, ..Default::default() }).unwrap();
        drop(s);
        fs::write(dir.path().join(HARD_STATE), b"garbage").unwrap();
        let err = DurableStorage::open(dir.path(), &[1]).err().unwrap().to_string();
        assert!(err.contains("hardstate") && err.contains("corrupt"), "{err}");
    }

    #[test]
    fn compaction_keeps_what_follows_the_snapshot() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = DurableStorage::open(dir.path(), &[1]).unwrap();
        s.append(&[entry(1, 1, b"a"), entry(2, 1, b"b"), entry(3, 1, b"c")]).unwrap();
        s.set_hard_state(&HardState { term: 1, vote: 1, commit: 3, ..Default::default() }).unwrap();
        s.compact(2, b"image at 2".to_vec()).unwrap();
        drop(s);
        let s = DurableStorage::open(dir.path(), &[1]).unwrap();
        assert_eq!(all(&s), vec![(3, 1, b"c".to_vec())]);
        let snap = s.snapshot().unwrap().unwrap();
        assert_eq!(
            (snap.get_metadata().index, snap.get_metadata().term, snap.data.to_vec()),
            (2, 1, b"image at 2".to_vec())
        );
    }

    #[test]
    fn a_snapshot_past_the_stored_commit_index_reopens() {
        // a single voter commits in memory (set_commit); its stored hard state can say 0
        let dir = tempfile::tempdir().unwrap();
        let mut s = DurableStorage::open(dir.path(), &[1]).unwrap();
        s.append(&[entry(1, 1, b"a"), entry(2, 1, b"b"), entry(3, 1, b"c")]).unwrap();
        s.set_hard_state(&HardState { term: 1, vote: 1, commit: 0, ..Default::default() }).unwrap();
        s.set_commit(3);
        s.compact(3, b"image at 3".to_vec()).unwrap();
        drop(s);
        let s = DurableStorage::open(dir.path(), &[1]).unwrap();
        let hs = raft::Storage::initial_state(s.mem()).unwrap().hard_state;
        assert_eq!((hs.term, hs.vote, hs.commit), (1, 1, 3));
        // and a hard state written before the snapshot (an older file) is raised on open
        write_atomic(
            dir.path(),
            HARD_STATE,
            &encode_hard_state(&HardState { term: 1, vote: 1, commit: 1, ..Default::default() }),
        )
        .unwrap();
        let s = DurableStorage::open(dir.path(), &[1]).unwrap();
        assert_eq!(raft::Storage::initial_state(s.mem()).unwrap().hard_state.commit, 3);
    }
}
