//! File plumbing shared by the offset index and the time index: a preallocated file of
//! fixed-size entries, mirrored in memory, written with one `pwrite` per append request.
//!
//! Lifecycle (as Kafka's `AbstractIndex`):
//! - created at `segment.index.bytes` (rounded down to whole entries), filled with zeros;
//! - appended to by the active segment; new entries reach the file in one `pwrite` when the
//!   segment calls [`IndexFile::write_pending`] at the end of an append;
//! - trimmed to the used size when the segment is rolled or the log is closed, so a clean
//!   index file's length says how many entries it holds;
//! - re-extended when a trimmed file becomes active again (reopen of the last segment).
//!
//! File descriptors: the in-memory copy is the source of truth for lookups (no mmap), so an
//! index only needs its file to *write*. The handle is open while the segment is active (it
//! appends); [`IndexFile::open`] reads the entries and closes the file, and
//! [`IndexFile::close`] drops the handle when the segment becomes inactive. An operation that
//! writes (`write_pending` with entries pending, `truncate_entries`, `trim` when the length
//! changes, `preallocate`) reopens the file read-write first; `sync` of a closed file opens it
//! read-only just for the fsync. So an inactive segment's indexes hold no descriptor.
//!
//! Crash story: index files are not checksummed. After an unclean shutdown the active
//! segments' indexes are rebuilt from the log; a loaded index that fails its sanity check is
//! rebuilt too. An index is only trusted below the recovery point, and the recovery point only
//! passes a segment after a flush that fsynced its index files ([`IndexFile::needs_sync`]
//! tracks writes and length changes since the last fsync, including those of a closed file).

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{IoContext, LogError, Result};

pub struct IndexFile {
    pub path: PathBuf,
    /// Open (read-write) while the segment appends or an operation writes; `None` otherwise.
    file: Option<Arc<File>>,
    entry_size: usize,
    /// Entries (encoded) currently in memory; `written` of them are on disk.
    buf: Vec<u8>,
    written: usize,
    /// The file's length on disk (as last set or read).
    file_len: u64,
    /// Written or resized since the last fsync.
    unsynced: bool,
    /// Capacity in entries.
    pub max_entries: usize,
}

fn open_rw(path: &Path) -> Result<File> {
    OpenOptions::new().read(true).write(true).open(path).ctx(path)
}

impl IndexFile {
    /// Creates (or truncates) the file and preallocates `max_bytes`. The handle stays open.
    pub fn create(path: &Path, entry_size: usize, max_bytes: u64) -> Result<IndexFile> {
        let file = OpenOptions::new().read(true).write(true).create(true).truncate(true).open(path).ctx(path)?;
        let max_entries = usize::try_from(max_bytes).unwrap_or(usize::MAX) / entry_size;
        let file_len = (max_entries * entry_size) as u64;
        file.set_len(file_len).ctx(path)?;
        Ok(IndexFile {
            path: path.to_owned(),
            file: Some(Arc::new(file)),
            entry_size,
            buf: Vec::new(),
            written: 0,
            file_len,
            unsynced: true,
            max_entries,
        })
    }

    /// Reads all entries of an existing (trimmed) file and closes it. A length that is not a
    /// multiple of the entry size is reported as corrupt.
    pub fn open(path: &Path, entry_size: usize, max_bytes: u64) -> Result<IndexFile> {
        let file = File::open(path).ctx(path)?;
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
        Ok(IndexFile { path: path.to_owned(), file: None, entry_size, buf, written, file_len: len, unsynced: false, max_entries })
    }

    /// The read-write handle, opened if the file is closed.
    fn writable(&mut self) -> Result<Arc<File>> {
        if let Some(f) = &self.file {
            return Ok(Arc::clone(f));
        }
        let f = Arc::new(open_rw(&self.path)?);
        self.file = Some(Arc::clone(&f));
        Ok(f)
    }

    /// Drops the handle (the segment became inactive). Entries not yet written stay pending.
    pub fn close(&mut self) {
        self.file = None;
    }

    pub fn is_open(&self) -> bool {
        self.file.is_some()
    }

    /// Written or resized since the last fsync.
    pub fn needs_sync(&self) -> bool {
        self.unsynced || self.written < self.buf.len()
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

    pub fn push(&mut self, entry: &[u8]) {
        debug_assert_eq!(entry.len(), self.entry_size);
        self.buf.extend_from_slice(entry);
    }

    /// Writes entries added since the last call, in one `pwrite`.
    pub fn write_pending(&mut self) -> Result<()> {
        if self.written < self.buf.len() {
            let (from, to) = (self.written, self.buf.len());
            let file = self.writable()?;
            file.write_all_at(&self.buf[from..to], from as u64).ctx(&self.path)?;
            self.written = to;
            self.file_len = self.file_len.max(to as u64);
            self.unsynced = true;
        }
        Ok(())
    }

    /// Keeps the first `n` entries (memory and file).
    pub fn truncate_entries(&mut self, n: usize) -> Result<()> {
        let bytes = n * self.entry_size;
        if bytes < self.buf.len() {
            self.buf.truncate(bytes);
            if self.written > bytes {
                // Zero the dropped tail so a later crash cannot resurrect stale entries.
                let zeros = vec![0u8; self.written - bytes];
                self.writable()?.write_all_at(&zeros, bytes as u64).ctx(&self.path)?;
                self.written = bytes;
                self.unsynced = true;
            }
        }
        Ok(())
    }

    /// Shrinks the file to the entries it holds (roll / close). Opens the file only if there
    /// is something to write or its length changes.
    pub fn trim(&mut self) -> Result<()> {
        self.write_pending()?;
        let len = self.buf.len() as u64;
        if self.file_len != len {
            self.writable()?.set_len(len).ctx(&self.path)?;
            self.file_len = len;
            self.unsynced = true;
        }
        self.max_entries = self.max_entries.max(self.len());
        Ok(())
    }

    /// Grows the file back to `max_bytes` so the segment can append again (opens it).
    pub fn preallocate(&mut self, max_bytes: u64) -> Result<()> {
        self.max_entries = (usize::try_from(max_bytes).unwrap_or(usize::MAX) / self.entry_size).max(self.len());
        let len = (self.max_entries * self.entry_size) as u64;
        self.writable()?.set_len(len).ctx(&self.path)?;
        self.file_len = len;
        self.unsynced = true;
        Ok(())
    }

    /// What a flush outside the log lock fsyncs (after `write_pending`): the open handle, or
    /// the path of a closed file. Counts as synced from now on; the caller calls
    /// [`Self::mark_unsynced`] if the fsync fails.
    pub fn sync_target(&mut self) -> SyncTarget {
        self.unsynced = false;
        SyncTarget { file: self.file.clone(), path: self.path.clone() }
    }

    pub fn mark_unsynced(&mut self) {
        self.unsynced = true;
    }

    /// Writes pending entries and fsyncs the file if anything changed since the last fsync
    /// (an open handle is always fsynced).
    pub fn sync(&mut self) -> Result<()> {
        self.write_pending()?;
        if self.file.is_some() || self.unsynced {
            SyncTarget { file: self.file.clone(), path: self.path.clone() }.sync(false)?;
            self.unsynced = false;
        }
        Ok(())
    }
}

/// A file to fsync, possibly outside the log lock: the segment's own handle if it holds one,
/// else the path, opened read-only for the fsync alone (Linux fsyncs the inode whatever
/// descriptor asks).
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
