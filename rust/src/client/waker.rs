//! A self-pipe wake-up: `wake()` makes the read end readable, once, until `clear()`.
//!
//! The producer's `send()` appends in the caller's thread while the I/O loop sleeps in a
//! selector (sync client) or in `trio.lowlevel.wait_readable` (`logbroker.aio`); both wait
//! on [`Waker::read_fd`]. `pending` collapses many wakes into one byte, so a burst of
//! appends costs one `write(2)`. Thread-safe: any thread may wake; the loop clears.

use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};

#[derive(Debug)]
pub struct Waker {
    read: UnixStream,
    write: UnixStream,
    pending: AtomicBool,
}

impl Waker {
    pub fn new() -> io::Result<Waker> {
        let (read, write) = UnixStream::pair()?;
        read.set_nonblocking(true)?;
        write.set_nonblocking(true)?;
        Ok(Waker { read, write, pending: AtomicBool::new(false) })
    }

    /// The fd the loop waits on for readability.
    pub fn read_fd(&self) -> RawFd {
        self.read.as_raw_fd()
    }

    /// Wakes the loop unless a wake is already pending. Never blocks (a full pipe already
    /// means "readable").
    pub fn wake(&self) {
        if !self.pending.swap(true, Ordering::AcqRel) {
            let _ = (&self.write).write(&[1]);
        }
    }

    /// Drains the pipe and re-arms `wake`. Called by the loop before it looks at its work,
    /// so a wake racing with the clear is never lost.
    pub fn clear(&self) {
        self.pending.store(false, Ordering::Release);
        let mut buf = [0u8; 64];
        while matches!((&self.read).read(&mut buf), Ok(n) if n > 0) {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wakes_once_until_cleared() {
        let w = Waker::new().unwrap();
        w.wake();
        w.wake();
        let mut buf = [0u8; 8];
        assert_eq!((&w.read).read(&mut buf).unwrap(), 1);
        w.clear();
        w.wake();
        assert_eq!((&w.read).read(&mut buf).unwrap(), 1);
    }
}
