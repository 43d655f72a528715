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
//! Crash story: index files are not checksummed. After an unclean shutdown the active
//! segments' indexes are rebuilt from the log; a loaded index that fails its sanity check is
//! rebuilt too. The in-memory copy is the source of truth for lookups (no mmap).

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{IoContext, LogError, Result};

pub struct IndexFile {
    pub path: PathBuf,
    file: Arc<File>,
    entry_size: usize,
    /// Entries (encoded) currently in memory; `written` of them are on disk.
    buf: Vec<u8>,
    written: usize,
    /// Capacity in entries.
    pub max_entries: usize,
}

impl IndexFile {
    /// Creates (or truncates) the file and preallocates `max_bytes`.
    pub fn create(path: &Path, entry_size: usize, max_bytes: u64) -> Result<IndexFile> {
        let file = OpenOptions::new().read(true).write(true).create(true).truncate(true).open(path).ctx(path)?;
        let max_entries = usize::try_from(max_bytes).unwrap_or(usize::MAX) / entry_size;
        file.set_len((max_entries * entry_size) as u64).ctx(path)?;
        Ok(IndexFile { path: path.to_owned(), file: Arc::new(file), entry_size, buf: Vec::new(), written: 0, max_entries })
    }

    /// Opens an existing (trimmed) file and reads all its entries. A length that is not a
    /// multiple of the entry size is reported as corrupt.
    pub fn open(path: &Path, entry_size: usize, max_bytes: u64) -> Result<IndexFile> {
        let file = OpenOptions::new().read(true).write(true).open(path).ctx(path)?;
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
        Ok(IndexFile { path: path.to_owned(), file: Arc::new(file), entry_size, buf, written, max_entries })
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
            self.file.write_all_at(&self.buf[self.written..], self.written as u64).ctx(&self.path)?;
            self.written = self.buf.len();
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
                self.file.write_all_at(&zeros, bytes as u64).ctx(&self.path)?;
                self.written = bytes;
            }
        }
        Ok(())
    }

    /// Shrinks the file to the entries it holds (roll / close).
    pub fn trim(&mut self) -> Result<()> {
        self.write_pending()?;
        self.file.set_len(self.buf.len() as u64).ctx(&self.path)?;
        self.max_entries = self.max_entries.max(self.len());
        Ok(())
    }

    /// Grows the file back to `max_bytes` so the segment can append again.
    pub fn preallocate(&mut self, max_bytes: u64) -> Result<()> {
        self.max_entries = (usize::try_from(max_bytes).unwrap_or(usize::MAX) / self.entry_size).max(self.len());
        self.file.set_len((self.max_entries * self.entry_size) as u64).ctx(&self.path)
    }

    /// The file, for an fsync outside the log lock (after `write_pending`).
    pub fn handle(&self) -> Arc<File> {
        Arc::clone(&self.file)
    }

    pub fn sync(&mut self) -> Result<()> {
        self.write_pending()?;
        self.file.sync_data().ctx(&self.path)
    }
}
