//! The process's budget of open segment `.log` files: however many partitions are written
//! at once, the segments' own `.log` handles together stay within half the soft open files
//! limit (`RLIMIT_NOFILE`), the rest left to sockets, index writes, the metadata log and the
//! object store.
//!
//! `log.rs` ("File descriptors") keeps each log at one descriptor while it is busy and none
//! once idle for a sweep interval. That bounds descriptors by the partitions *busy at once*,
//! not by the partitions that exist: a producer writing one record to each of 50,000
//! partitions within a second (a restart's first writes) made them all busy and ran the
//! broker out of descriptors (EMFILE at 20,000, this machine's hard limit). The budget closes
//! the least recently used handles instead.
//!
//! # Shape
//! Each segment owns one [`LogFileSlot`]: its `.log` handle (or none) and whether the handle
//! is read-write. A slot that gets a handle joins a process-wide queue (once: `queued`). When
//! the handles open exceed the budget, the opener closes others from the front of the queue,
//! CLOCK-style: a slot used since it was queued or last passed (`used`) goes to the back with
//! the flag cleared; a slot whose lock is taken (a segment working with its handle this very
//! moment) goes to the back too; any other's handle is closed and the slot leaves the queue.
//! A slot closed by its own segment (the idle sweep) stays queued until it reaches the front.
//! A dropped slot (its segment deleted) is skipped. Entries of slots without a handle are
//! also dropped whenever the queue outgrows twice the handles open (`compact`), so a broker
//! that rolls and deletes segments for months keeps a queue the size of what is open.
//! Amortized O(1) per open: each queue entry is passed at most twice before it is closed or
//! its slot is used again.
//!
//! # Invariants
//! - `OPEN` counts slots holding a handle; `queued` and the queue entry change only under the
//!   slot's lock, so a slot with a handle is always in the queue;
//! - closing a slot's handle only drops the segment's `Arc<File>`: a read or a sendfile in
//!   progress holds its own and keeps the descriptor until it finishes; the next use reopens
//!   the file by path (appends are positioned writes, so nothing needs a seek), and unflushed
//!   bytes stay counted by the segment (a flush opens the file by path to fsync it);
//! - the queue lock is taken after a slot's lock is released, and eviction only try-locks
//!   slots: no lock order to keep, no deadlock with a segment that holds its log's lock.

use std::collections::VecDeque;
use std::fs::File;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

use crate::sys::open_files_limit;

/// Handles held by slots, process-wide.
static OPEN: AtomicUsize = AtomicUsize::new(0);
/// Slots holding a handle (and slots closed by their segment, until they reach the front).
static QUEUE: Mutex<VecDeque<Weak<LogFileSlot>>> = Mutex::new(VecDeque::new());
/// Never fewer than this many handles, whatever the limit says.
const MIN_BUDGET: usize = 16;
/// Queue entries beyond twice the open handles before `compact` runs.
const COMPACT_SLACK: usize = 1024;

/// Handles the slots may hold together: half the soft open files limit read now (an operator
/// or a test may lower it while the broker runs), at least [`MIN_BUDGET`].
pub fn budget() -> usize {
    let soft = open_files_limit().map_or(1024, |(soft, _)| soft);
    usize::try_from(soft / 2).unwrap_or(usize::MAX).max(MIN_BUDGET)
}

/// Segment `.log` handles open in this process.
pub fn open_count() -> usize {
    OPEN.load(Ordering::Relaxed)
}

#[derive(Clone)]
struct Handle {
    file: Arc<File>,
    writable: bool,
}

/// One segment's `.log` handle, or none.
#[derive(Default)]
pub struct LogFileSlot {
    handle: Mutex<Option<Handle>>,
    /// Used since it was queued or last passed by the eviction (its second chance).
    used: AtomicBool,
    /// In `QUEUE`; changed only under `handle`'s lock.
    queued: AtomicBool,
}

impl LogFileSlot {
    pub fn new() -> Arc<LogFileSlot> {
        Arc::new(LogFileSlot::default())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Handle>> {
        self.handle.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The handle and whether it is read-write, marking the slot used.
    pub fn get(&self) -> Option<(Arc<File>, bool)> {
        let h = self.lock().clone()?;
        self.used.store(true, Ordering::Relaxed);
        Some((h.file, h.writable))
    }

    /// The handle, without marking the slot used (a flush).
    pub fn peek(&self) -> Option<Arc<File>> {
        self.lock().as_ref().map(|h| Arc::clone(&h.file))
    }

    pub fn is_open(&self) -> bool {
        self.lock().is_some()
    }

    /// Keeps `file` as the slot's handle (replacing any), then closes others' handles if the
    /// process holds more than the budget.
    pub fn set(self: &Arc<Self>, file: Arc<File>, writable: bool) {
        let enqueue = {
            let mut g = self.lock();
            if g.replace(Handle { file, writable }).is_none() {
                OPEN.fetch_add(1, Ordering::Relaxed);
            }
            !self.queued.swap(true, Ordering::Relaxed)
        };
        if enqueue {
            let mut q = QUEUE.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            q.push_back(Arc::downgrade(self));
            if q.len() > 2 * OPEN.load(Ordering::Relaxed) + COMPACT_SLACK {
                compact(&mut q);
            }
        }
        enforce_budget(budget());
    }

    /// Drops the slot's handle (a region or read in progress keeps its own).
    pub fn close(&self) {
        if self.lock().take().is_some() {
            OPEN.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

impl Drop for LogFileSlot {
    fn drop(&mut self) {
        let g = self.handle.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner);
        if g.take().is_some() {
            OPEN.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// Drops the queue entries of slots that hold no handle: deleted segments' (dead) and those
/// their own segment closed. Run when the queue outgrows twice the open handles (plus
/// `COMPACT_SLACK`), so its length follows the handles open, not the segments ever opened,
/// at O(1) amortized per push. A slot whose lock is taken keeps its entry.
fn compact(q: &mut VecDeque<Weak<LogFileSlot>>) {
    q.retain(|weak| {
        let Some(slot) = weak.upgrade() else { return false };
        let Ok(g) = slot.handle.try_lock() else { return true };
        if g.is_some() {
            return true;
        }
        slot.queued.store(false, Ordering::Relaxed);
        false
    });
}

/// Entries of the queue itself (for tests).
pub fn queue_len() -> usize {
    QUEUE.lock().unwrap_or_else(std::sync::PoisonError::into_inner).len()
}

/// Closes handles from the front of the queue until at most `limit` are open (or every
/// entry was passed twice: the rest are in use this moment).
fn enforce_budget(limit: usize) {
    if OPEN.load(Ordering::Relaxed) <= limit {
        return;
    }
    let mut q = QUEUE.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut passes = 2 * q.len();
    while OPEN.load(Ordering::Relaxed) > limit && passes > 0 {
        passes -= 1;
        let Some(weak) = q.pop_front() else { break };
        let Some(slot) = weak.upgrade() else { continue };
        if slot.used.swap(false, Ordering::Relaxed) {
            q.push_back(weak);
            continue;
        }
        let Ok(mut g) = slot.handle.try_lock() else {
            q.push_back(weak);
            continue;
        };
        if g.take().is_some() {
            OPEN.fetch_sub(1, Ordering::Relaxed);
        }
        slot.queued.store(false, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file() -> Arc<File> {
        Arc::new(File::open("/dev/null").unwrap())
    }

    // Eviction under a lowered limit runs in a process of its own (`rust/tests/fd_limit.rs`):
    // the queue is process-wide, and closing other tests' handles would change their counts.

    #[test]
    fn drop_and_close_give_the_count_back() {
        let a = LogFileSlot::new();
        a.set(file(), false);
        assert!(a.is_open());
        a.close();
        assert!(!a.is_open());
        a.close(); // twice is harmless
        a.set(file(), false);
        drop(a); // counted down by Drop; the queue entry is skipped later
    }

    /// Segments opened and deleted or closed, many more than the handles open: the queue
    /// keeps entries for what is open, not for every slot ever queued. (Other tests queue
    /// slots meanwhile, hence the slack.)
    #[test]
    fn the_queue_does_not_grow_with_slots_that_closed_or_died() {
        let kept: Vec<_> = (0..10).map(|_| LogFileSlot::new()).collect();
        for s in &kept {
            s.set(file(), false);
        }
        for i in 0..20_000 {
            let s = LogFileSlot::new();
            s.set(file(), false);
            if i % 2 == 0 {
                s.close(); // closed by its segment, then deleted
            }
        }
        assert!(kept.iter().all(|s| s.is_open()), "compaction keeps what is open");
        let (len, open) = (queue_len(), open_count());
        assert!(len <= 2 * open + COMPACT_SLACK + 4096, "queue {len}, open {open}");
    }
}
