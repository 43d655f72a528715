//! Raw syscalls the safe standard library does not offer: `sendfile(2)` and `write(2)` on a
//! file descriptor we do not own (a Python socket); `getrlimit`/`setrlimit` of the open files
//! limit; `syncfs(2)`; `posix_fadvise(2)`; `copy_file_range(2)`.
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

/// One `copy_file_range(2)`: up to `count` bytes of `src` from `offset` to `dst` at its file
/// position, copied by the kernel (a reflink clone where the file system has them). Returns
/// the bytes copied (0 at the end of `src`).
pub fn copy_file_range(src: &File, offset: u64, dst: &File, count: usize) -> io::Result<usize> {
    let mut off = libc::loff_t::try_from(offset).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: both files are live `File`s, so their descriptors are open for this call; `off`
    // is a valid, exclusively borrowed `loff_t` the kernel updates; a null output offset means
    // `dst`'s own file position.
    let n = unsafe {
        libc::copy_file_range(src.as_raw_fd(), &raw mut off, dst.as_raw_fd(), std::ptr::null_mut(), count, 0)
    };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n.unsigned_abs())
    }
}

/// Drops `file`'s clean pages from the page cache (`POSIX_FADV_DONTNEED` over the whole
/// file); dirty pages stay until written back, so callers sync first.
pub fn drop_cached_pages(file: &File) -> io::Result<()> {
    // SAFETY: `file` is a live `File`, so its descriptor is open for this call; the kernel
    // only reads the arguments.
    let r = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    if r != 0 {
        Err(io::Error::from_raw_os_error(r))
    } else {
        Ok(())
    }
}

/// How many of `file`'s pages are in the page cache (`mincore(2)` over a mapping of it);
/// for tests of `drop_cached_pages`.
#[cfg(test)]
pub fn resident_pages(file: &File) -> io::Result<usize> {
    let len = usize::try_from(file.metadata()?.len()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    if len == 0 {
        return Ok(0);
    }
    // SAFETY: `sysconf` only reads its argument.
    let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
    // SAFETY: a fresh shared read-only mapping of a live descriptor; unmapped below, and the
    // pointer is only passed to `mincore`, never dereferenced.
    let addr = unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_SHARED, file.as_raw_fd(), 0) };
    if addr == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    let mut vec = vec![0u8; len.div_ceil(page)];
    // SAFETY: `addr..addr+len` is the mapping made above; `vec` has one byte per page of it.
    let r = unsafe { libc::mincore(addr, len, vec.as_mut_ptr()) };
    let err = io::Error::last_os_error();
    // SAFETY: the mapping made above, of `len` bytes, unmapped once.
    unsafe { libc::munmap(addr, len) };
    if r != 0 {
        return Err(err);
    }
    Ok(vec.iter().filter(|&&b| b & 1 == 1).count())
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
