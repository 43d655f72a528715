//! Raw syscalls the safe standard library does not offer: `sendfile(2)` and `write(2)` on a
//! file descriptor we do not own (a Python socket); `getrlimit`/`setrlimit` of the open files
//! limit; `syncfs(2)`.
//!
//! This is the only module allowed to use `unsafe` (crate lint `unsafe_code = "deny"`); each
//! block carries a `// SAFETY:` argument. Callers pass descriptors that stay open for the
//! duration of the call (the Python socket object is alive while its method runs, and the
//! segment file is held by an `Arc<File>`).
#![allow(unsafe_code)]

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, RawFd};

/// One `sendfile(2)` call: up to `count` bytes of `file` from `offset` to `out_fd`.
/// Returns the bytes sent (0 at end of file); `WouldBlock` on a full non-blocking socket.
pub fn sendfile(out_fd: RawFd, file: &File, offset: u64, count: usize) -> io::Result<usize> {
    let mut off = libc::off_t::try_from(offset).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: `file` is a live `File`, so its descriptor is open for this call; `out_fd` is
    // only read by the kernel (a bad one yields EBADF, not UB); `off` is a valid, exclusively
    // borrowed `off_t` the kernel writes the new offset into.
    let n = unsafe { libc::sendfile(out_fd, file.as_raw_fd(), &raw mut off, count) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n.unsigned_abs())
    }
}

/// One `write(2)` of `buf` to `fd`. Returns bytes written; `WouldBlock` when it would block.
pub fn write_fd(fd: RawFd, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: `buf` is a valid readable slice of `buf.len()` bytes for the whole call; a bad
    // `fd` yields EBADF, not UB.
    let n = unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n.unsigned_abs())
    }
}

/// `(soft, hard)` of `RLIMIT_NOFILE`, the open files limit.
pub fn open_files_limit() -> io::Result<(u64, u64)> {
    let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: `r` is a valid, exclusively borrowed `rlimit` the kernel writes into.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut r) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((r.rlim_cur, r.rlim_max))
}

/// Sets the soft `RLIMIT_NOFILE` (the hard limit stays). For tests that simulate a descriptor
/// shortage; the broker raises its limit from Python (`broker/fd_limit.py`).
pub fn set_open_files_soft_limit(soft: u64) -> io::Result<()> {
    let (_, hard) = open_files_limit()?;
    let r = libc::rlimit { rlim_cur: soft, rlim_max: hard };
    // SAFETY: `r` is a valid `rlimit` the kernel only reads.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raw const r) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `syncfs(2)`: every dirty page and inode of the file system holding `file` to disk (one
/// call where thousands of logs would otherwise fsync their files one by one).
pub fn syncfs(file: &File) -> io::Result<()> {
    // SAFETY: `file` is a live `File`, so its descriptor is open for this call.
    if unsafe { libc::syncfs(file.as_raw_fd()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
