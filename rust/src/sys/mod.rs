//! Raw syscalls the safe standard library does not offer: `sendfile(2)` and `write(2)` on a
//! file descriptor we do not own (a Python socket).
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
