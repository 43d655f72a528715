//! `FileRegion`: a byte range of a segment file, the result of a log read.
//!
//! A region holds the segment file open through an `Arc<File>`, so it stays readable after
//! retention deletes the segment or the log is closed (Linux keeps unlinked files alive while a
//! descriptor is open). Reads never copy into a region; the bytes go from the page cache to the
//! socket with `sendfile(2)` ([`FileRegion::send`]), or are copied only when asked
//! ([`FileRegion::read_to_vec`], [`FileRegion::write_to`] for transports without sendfile and
//! for the copy-vs-sendfile benchmark).
//!
//! If the log is truncated below a region that is still being sent (a follower truncating
//! while a consumer fetch is in flight), the file shrinks under the region; `send` then reports
//! `UnexpectedEof` instead of spinning on zero-byte transfers.
//!
//! Thread-safety: immutable; every method takes `&self` and may run on any thread.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::Arc;

use crate::error::{IoContext, Result};
use crate::sys;

#[derive(Debug, Clone)]
pub struct FileRegion {
    pub file: Arc<File>,
    pub path: Arc<PathBuf>,
    pub position: u64,
    pub length: u64,
}

const COPY_CHUNK: usize = 256 * 1024;

impl FileRegion {
    pub fn fd(&self) -> RawFd {
        self.file.as_raw_fd()
    }

    /// Copies the whole region into memory.
    pub fn read_to_vec(&self) -> Result<Vec<u8>> {
        let mut v = vec![0u8; usize::try_from(self.length).unwrap_or(0)];
        self.file.read_exact_at(&mut v, self.position).ctx(&self.path)?;
        Ok(v)
    }

    /// Copies the whole region into `buf` (resized to it), reusing its allocation.
    pub fn read_into(&self, buf: &mut Vec<u8>) -> Result<()> {
        buf.resize(usize::try_from(self.length).unwrap_or(0), 0);
        self.file.read_exact_at(buf, self.position).ctx(&self.path)
    }

    /// Reads region bytes from `offset` into `buf` (fewer at the region's end): the count.
    pub fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        let (pos, count) = self.span(offset, buf.len() as u64);
        let want = usize::try_from(count).unwrap_or(buf.len()).min(buf.len());
        self.file.read_at(&mut buf[..want], pos)
    }

    /// Clamps `(offset, count)` to the region; returns the file position and byte count.
    fn span(&self, offset: u64, count: u64) -> (u64, u64) {
        let offset = offset.min(self.length);
        (self.position + offset, count.min(self.length - offset))
    }

    /// `sendfile(2)` from `position + offset`, up to `count` bytes, to a non-blocking socket.
    /// Returns the bytes sent; `WouldBlock` only if nothing could be sent.
    pub fn send(&self, sock_fd: RawFd, offset: u64, count: u64) -> io::Result<u64> {
        let (mut pos, count) = self.span(offset, count);
        let mut sent = 0u64;
        while sent < count {
            let want = usize::try_from(count - sent).unwrap_or(usize::MAX).min(1 << 30);
            match sys::sendfile(sock_fd, &self.file, pos, want) {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "segment file shorter than the region (truncated?)",
                    ))
                }
                Ok(n) => {
                    sent += n as u64;
                    pos += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock && sent > 0 => break,
                Err(e) => return Err(e),
            }
        }
        Ok(sent)
    }

    /// The copying variant of [`Self::send`]: `pread` into a buffer, `write(2)` to the socket.
    pub fn write_to(&self, sock_fd: RawFd, offset: u64, count: u64) -> io::Result<u64> {
        let (mut pos, count) = self.span(offset, count);
        let mut buf = vec![0u8; usize::try_from(count).unwrap_or(usize::MAX).min(COPY_CHUNK)];
        let mut sent = 0u64;
        while sent < count {
            let want = usize::try_from(count - sent).unwrap_or(usize::MAX).min(buf.len());
            let got = self.file.read_at(&mut buf[..want], pos)?;
            if got == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "segment file shorter than the region (truncated?)",
                ));
            }
            let mut done = 0;
            while done < got {
                match sys::write_fd(sock_fd, &buf[done..got]) {
                    Ok(n) => done += n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock && sent + (done as u64) > 0 => {
                        return Ok(sent + done as u64);
                    }
                    Err(e) => return Err(e),
                }
            }
            sent += got as u64;
            pos += got as u64;
        }
        Ok(sent)
    }
}
