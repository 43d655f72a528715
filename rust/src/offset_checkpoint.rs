//! Kafka's text checkpoint files, and the atomic-replace helper every small state file uses.
//!
//! # Format (Kafka's `CheckpointFile`, version 0)
//! ```text
//! 0                      <- version
//! 2                      <- number of entries
//! orders 0 1234          <- topic partition offset
//! orders 1 99
//! ```
//! The broker keeps one per data directory: `replication-offset-checkpoint` (high
//! watermarks) and `recovery-point-offset-checkpoint`. Topic names cannot contain spaces
//! (Kafka's legal characters are `[a-zA-Z0-9._-]`), so the space-separated format is unambiguous.
//!
//! Per-partition single-value files (`log-start-offset-checkpoint`,
//! `recovery-point-checkpoint`) use the same versioned shape with one bare offset line:
//! `0\n<offset>\n`. Kafka keeps log start offsets in a per-directory file; a per-partition
//! file lets the Rust `Log` own it without a cross-partition writer.
//!
//! # Crash story
//! Files are replaced atomically: write `<name>.tmp`, fsync it, rename over the target,
//! fsync the directory. A reader sees the old or the new file, never a mix. A stray `.tmp`
//! from a crash is ignored (and overwritten next time).

use std::fmt::Write as _;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::Path;

use crate::error::{IoContext, LogError, Result};

/// Replaces `path` with `contents` atomically and durably.
pub fn write_atomically(path: &Path, contents: &[u8]) -> Result<()> {
    write_replacing(path, contents, true)
}

/// `write_atomically`, or with `durable` false without its fsyncs: the file is replaced
/// whole by a rename, but is durable only after a later `sync_filesystem` (a clean shutdown
/// of every log at once).
pub fn write_replacing(path: &Path, contents: &[u8], durable: bool) -> Result<()> {
    replace_with(path, durable, |mut f| f.write_all(contents))
}

/// Replaces `path` whole with what `fill` writes into `tmp_path_of(path)` (created empty):
/// the temporary file is fsynced (when `durable`), renamed over `path`, and the directory
/// fsynced. A failure before the rename removes the temporary file.
pub fn replace_with(path: &Path, durable: bool, fill: impl FnOnce(&File) -> std::io::Result<()>) -> Result<()> {
    let tmp = tmp_path_of(path);
    let write = || -> Result<()> {
        let f = OpenOptions::new().write(true).create(true).truncate(true).open(&tmp).ctx(&tmp)?;
        fill(&f).ctx(&tmp)?;
        if durable {
            f.sync_all().ctx(&tmp)?;
        }
        Ok(())
    };
    if let Err(e) = write() {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    fs::rename(&tmp, path).ctx(path)?;
    if let (Some(dir), true) = (path.parent(), durable) {
        sync_dir(dir)?;
    }
    Ok(())
}

/// Where `replace_with` writes before the rename: `<name>.tmp` beside `path`.
pub fn tmp_path_of(path: &Path) -> std::path::PathBuf {
    let mut tmp_name = path.file_name().map(std::ffi::OsStr::to_os_string).unwrap_or_default();
    tmp_name.push(".tmp");
    path.with_file_name(tmp_name)
}

/// `syncfs(2)` of the file system holding `path`: everything written there (by any log) is
/// durable when it returns.
pub fn sync_filesystem(path: &Path) -> Result<()> {
    let f = File::open(path).ctx(path)?;
    crate::sys::syncfs(&f).ctx(path)
}

/// fsync of a directory (makes renames, creations and unlinks in it durable).
pub fn sync_dir(dir: &Path) -> Result<()> {
    let d = if dir.as_os_str().is_empty() { Path::new(".") } else { dir };
    File::open(d).and_then(|f| f.sync_all()).ctx(d)
}

fn corrupt(path: &Path, reason: impl Into<String>) -> LogError {
    LogError::CorruptIndex { path: path.to_owned(), reason: reason.into() }
}

/// Writes Kafka's offset checkpoint format.
pub fn write_offset_checkpoint(path: &Path, entries: &[(String, i32, i64)]) -> Result<()> {
    let mut s = format!("0\n{}\n", entries.len());
    for (topic, partition, offset) in entries {
        if topic.is_empty() || topic.contains(char::is_whitespace) {
            return Err(corrupt(path, format!("topic name {topic:?} cannot be written to a checkpoint file")));
        }
        let _ = writeln!(s, "{topic} {partition} {offset}");
    }
    write_atomically(path, s.as_bytes())
}

/// Reads Kafka's offset checkpoint format; a missing file is an empty list.
pub fn read_offset_checkpoint(path: &Path) -> Result<Vec<(String, i32, i64)>> {
    let text = match fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(LogError::io(path, e)),
    };
    let mut lines = text.lines();
    let version = lines.next().ok_or_else(|| corrupt(path, "empty file"))?;
    if version.trim() != "0" {
        return Err(corrupt(path, format!("unsupported version {version:?}")));
    }
    let count: usize = lines
        .next()
        .and_then(|l| l.trim().parse().ok())
        .ok_or_else(|| corrupt(path, "missing or malformed entry count"))?;
    let mut out = Vec::with_capacity(count);
    for (i, line) in lines.enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let mut parts = line.split(' ');
        let (Some(t), Some(p), Some(o), None) = (parts.next(), parts.next(), parts.next(), parts.next()) else {
            return Err(corrupt(path, format!("line {}: expected 'topic partition offset', got {line:?}", i + 3)));
        };
        let p: i32 = p.parse().map_err(|_| corrupt(path, format!("line {}: bad partition {p:?}", i + 3)))?;
        let o: i64 = o.parse().map_err(|_| corrupt(path, format!("line {}: bad offset {o:?}", i + 3)))?;
        out.push((t.to_owned(), p, o));
    }
    if out.len() != count {
        return Err(corrupt(path, format!("header says {count} entries, file has {}", out.len())));
    }
    Ok(out)
}

/// Writes a per-partition single-offset checkpoint (`0\n<offset>\n`).
pub fn write_single_offset(path: &Path, offset: i64) -> Result<()> {
    write_single_offset_as(path, offset, true)
}

/// `write_single_offset`; `durable` false: made durable by a later `sync_filesystem`
/// (`Log::close_unsynced`).
pub fn write_single_offset_as(path: &Path, offset: i64, durable: bool) -> Result<()> {
    write_replacing(path, format!("0\n{offset}\n").as_bytes(), durable)
}

/// Reads a single-offset checkpoint; `None` if missing.
pub fn read_single_offset(path: &Path) -> Result<Option<i64>> {
    let text = match fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(LogError::io(path, e)),
    };
    let mut lines = text.lines();
    if lines.next().map(str::trim) != Some("0") {
        return Err(corrupt(path, "unsupported version"));
    }
    let offset =
        lines.next().and_then(|l| l.trim().parse().ok()).ok_or_else(|| corrupt(path, "missing or malformed offset"))?;
    Ok(Some(offset))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("replication-offset-checkpoint");
        let entries = vec![("orders".to_owned(), 0, 1234), ("a.b-c_d".to_owned(), 17, 0)];
        write_offset_checkpoint(&path, &entries).unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "0\n2\norders 0 1234\na.b-c_d 17 0\n");
        assert_eq!(read_offset_checkpoint(&path).unwrap(), entries);
        assert!(!dir.path().join("replication-offset-checkpoint.tmp").exists());
    }

    #[test]
    fn missing_file_is_empty() {
        let dir = tempfile::tempdir().unwrap();
        assert!(read_offset_checkpoint(&dir.path().join("nope")).unwrap().is_empty());
        assert_eq!(read_single_offset(&dir.path().join("nope")).unwrap(), None);
    }

    #[test]
    fn malformed_files_rejected_with_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cp");
        for bad in ["1\n0\n", "0\n2\nt 0 1\n", "0\nx\n", "0\n1\nt zero 1\n", "0\n1\nt 0 1 9\n", ""] {
            fs::write(&path, bad).unwrap();
            let e = read_offset_checkpoint(&path).unwrap_err().to_string();
            assert!(e.contains("cp"), "{bad:?}: {e}");
        }
    }

    #[test]
    fn single_offset_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log-start-offset-checkpoint");
        write_single_offset(&path, 42).unwrap();
        assert_eq!(read_single_offset(&path).unwrap(), Some(42));
        write_single_offset(&path, 43).unwrap();
        assert_eq!(read_single_offset(&path).unwrap(), Some(43));
    }

    #[test]
    fn topic_with_space_rejected() {
        let dir = tempfile::tempdir().unwrap();
        assert!(write_offset_checkpoint(&dir.path().join("cp"), &[("a b".into(), 0, 1)]).is_err());
    }
}
