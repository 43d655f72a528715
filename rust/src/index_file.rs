//! File plumbing shared by the offset index and the time index: a file of fixed-size
//! entries, mirrored in memory. The in-memory copy is the source of truth for lookups (no
//! mmap); the file is only *written*, and never held open.
//!
//! # File
//! Entries back to back; the file's length is always a whole number of entries and says how
//! many it holds (nothing is preallocated: with no mmap there is nothing to map ahead). The
//! file may lag the memory (entries not yet written) but never holds an entry the memory
//! does not.
//!
//! # Lifecycle
//! - [`IndexFile::create`] (a new segment, or a rebuild) touches no file: the file is
//!   created, or replaced if one exists, by the first write;
//! - the segment appends entries in memory only; [`IndexFile::write_pending`] writes those
//!   not yet in the file, in one `pwrite`. The segment calls it when the file must be
//!   complete: when it stops being active (roll, clean close: so an inactive segment's file
//!   is complete), when a flush fsyncs it (the flush that advances the recovery point), and
//!   after a recovery rebuilt it. A write creates the file even with no entries, so a
//!   segment that was rolled, flushed or closed always has both index files;
//! - [`IndexFile::open`] reads an existing file whole and closes it; a missing file is
//!   `Ok(None)`: the segment decides (empty if its log is empty, else rebuilt);
//! - [`IndexFile::truncate_entries`] drops entries from memory and cuts the file to match.
//!
//! # File descriptors
//! None held: every write opens the file by path (read-write), writes and closes it; an
//! fsync reuses the descriptor of the write that preceded it ([`SyncTarget`]) or opens the
//! path for the fsync alone. So no segment, active or not, holds an index descriptor.
//!
//! # Crash story
//! Index files are not checksummed. The active segment's files lag its memory between
//! flushes, and a crash can also leave a file torn or longer than its entries; none of this
//! is trusted: after an unclean shutdown every segment from the one holding the recovery
//! point on (the active one always) is recovered, its indexes rebuilt from the log, and a
//! loaded index that fails its sanity check (or is missing while its log is not empty) is
//! rebuilt too. The recovery point only passes a segment after a flush wrote and fsynced its
//! index files ([`IndexFile::needs_sync`] tracks entries not yet written, writes and length
//! changes not yet fsynced, and a file not yet created), and a segment stops being active
//! only after its entries were written (`Segment::on_become_inactive`), so the trusted
//! indexes below the recovery point are complete.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{IoContext, LogError, Result};

pub struct IndexFile {
    pub path: PathBuf,
    entry_size: usize,
    /// Entries (encoded) in memory; the first `written` bytes of them are in the file.
    buf: Vec<u8>,
    written: usize,
    /// The file exists and holds exactly `written` bytes (false: created or replaced by the
    /// next write).
    on_disk: bool,
    /// Written or resized since the last fsync.
    unsynced: bool,
    /// Capacity in entries (`segment.index.bytes` / entry size, or what an existing file
    /// holds if that is more).
    pub max_entries: usize,
}

fn open_rw(path: &Path, replace: bool) -> Result<File> {
    OpenOptions::new().read(true).write(true).create(true).truncate(replace).open(path).ctx(path)
}

impl IndexFile {
    /// A new, empty index of at most `max_bytes` (rounded down to whole entries). The file is
    /// created, or replaced, by the first write.
    pub fn create(path: &Path, entry_size: usize, max_bytes: u64) -> IndexFile {
        IndexFile {
            path: path.to_owned(),
            entry_size,
            buf: Vec::new(),
            written: 0,
            on_disk: false,
            unsynced: false,
            max_entries: usize::try_from(max_bytes).unwrap_or(usize::MAX) / entry_size,
        }
    }

    /// Reads all entries of an existing file (and closes it); `Ok(None)` if there is no
    /// file. A length that is not a multiple of the entry size is reported as corrupt.
    pub fn open(path: &Path, entry_size: usize, max_bytes: u64) -> Result<Option<IndexFile>> {
        let file = match File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(LogError::io(path, e)),
        };
        let len = file.metadata().ctx(path)?.len();
        if len % entry_size as u64 != 0 {
            return Err(LogError::CorruptIndex {
                path: path.to_owned(),
                reason: format!("file length {len} is not a multiple of the entry size {entry_size}"),
            });
        }
        let mut buf = vec![0u8; usize::try_from(len).unwrap_or(0)];
        file.read_exact_at(&mut buf, 0).ctx(path)?;
        let written = buf.len();
        let max_entries = (usize::try_from(max_bytes).unwrap_or(usize::MAX) / entry_size).max(written / entry_size);
        Ok(Some(IndexFile {
            path: path.to_owned(),
            entry_size,
            buf,
            written,
            on_disk: true,
            unsynced: false,
            max_entries,
        }))
    }

    /// The file differs from memory or was changed since its last fsync.
    pub fn needs_sync(&self) -> bool {
        self.unsynced || !self.on_disk || self.written < self.buf.len()
    }

    pub fn len(&self) -> usize {
        self.buf.len() / self.entry_size
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    pub fn is_full(&self) -> bool {
        self.len() >= self.max_entries
    }

    pub fn entry(&self, i: usize) -> &[u8] {
        &self.buf[i * self.entry_size..(i + 1) * self.entry_size]
    }

    /// Adds an entry in memory (the file gets it at the next `write_pending`).
    pub fn push(&mut self, entry: &[u8]) {
        debug_assert_eq!(entry.len(), self.entry_size);
        self.buf.extend_from_slice(entry);
    }

    /// Writes the entries the file lacks, in one `pwrite`, creating (or replacing) the file
    /// if it is not on disk yet. Returns the descriptor it wrote through (closed when
    /// dropped), `None` if the file was complete already.
    pub fn write_pending(&mut self) -> Result<Option<Arc<File>>> {
        if self.on_disk && self.written == self.buf.len() {
            return Ok(None);
        }
        let file = open_rw(&self.path, !self.on_disk)?;
        let from = if self.on_disk { self.written } else { 0 };
        file.write_all_at(&self.buf[from..], from as u64).ctx(&self.path)?;
        self.written = self.buf.len();
        self.on_disk = true;
        self.unsynced = true;
        Ok(Some(Arc::new(file)))
    }

    /// Keeps the first `n` entries, in memory and in the file.
    pub fn truncate_entries(&mut self, n: usize) -> Result<()> {
        let bytes = n * self.entry_size;
        if bytes < self.buf.len() {
            self.buf.truncate(bytes);
            if self.on_disk && self.written > bytes {
                open_rw(&self.path, false)?.set_len(bytes as u64).ctx(&self.path)?;
                self.written = bytes;
                self.unsynced = true;
            }
        }
        Ok(())
    }

    /// What a flush outside the log lock fsyncs, after writing what the file lacks (under
    /// the lock): `None` if the file has not changed since its last fsync. Counts as synced
    /// from now on; the caller calls [`Self::mark_unsynced`] if the fsync fails.
    pub fn sync_target(&mut self) -> Result<Option<SyncTarget>> {
        let file = self.write_pending()?;
        if !self.unsynced {
            return Ok(None);
        }
        self.unsynced = false;
        Ok(Some(SyncTarget { file, path: self.path.clone() }))
    }

    pub fn mark_unsynced(&mut self) {
        self.unsynced = true;
    }

    /// Writes what the file lacks and fsyncs it if it changed since its last fsync.
    pub fn sync(&mut self) -> Result<()> {
        if let Some(t) = self.sync_target()? {
            if let Err(e) = t.sync(false) {
                self.unsynced = true;
                return Err(e);
            }
        }
        Ok(())
    }
}

/// A file to fsync, possibly outside the log lock: a descriptor already open on it (the
/// segment's `.log` handle, or the one an index write just used), else the path, opened
/// read-only for the fsync alone (Linux fsyncs the inode whatever descriptor asks).
#[derive(Debug, Clone)]
pub struct SyncTarget {
    pub file: Option<Arc<File>>,
    pub path: PathBuf,
}

impl SyncTarget {
    /// fsync (data and the length). `missing_ok`: a closed file that no longer exists needs
    /// none (retention deleted its segment between the lock and the fsync; a compaction swap
    /// fsynced its replacement itself).
    pub fn sync(&self, missing_ok: bool) -> Result<()> {
        if let Some(f) = &self.file {
            return f.sync_data().ctx(&self.path);
        }
        match File::open(&self.path) {
            Ok(f) => f.sync_data().ctx(&self.path),
            Err(e) if missing_ok && e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(LogError::io(&self.path, e)),
        }
    }
}
