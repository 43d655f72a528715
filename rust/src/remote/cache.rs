//! `ByteCache`: objects (or chunks of them) read from the store, by key, with a bound on
//! their total size, least recently used out first; and the reads waiting for a load.
//!
//! A lookup that misses marks the key *loading* and tells the caller to start the load;
//! later lookups of that key wait on it (their `ReadWaiter` is told when it is filled),
//! so one GET serves every reader. A failed load is remembered for `FAILED_FOR` (readers
//! get the error without hammering the store), then tried again.
//!
//! Cost: a lookup or fill is O(log n) in the cached entries (a map by key and one by
//! recency); nothing is scanned.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};

use bytes::Bytes;

/// Told when a key it waited for is loaded (or failed): the data path's partition, which
/// wakes its parked fetches.
pub trait ReadWaiter: Send + Sync {
    fn remote_read_done(&self);
}

pub const FAILED_FOR: Duration = Duration::from_secs(1);

pub enum Lookup {
    Hit(Bytes),
    /// Not cached: the caller starts the load (the key is now loading) and waits.
    Miss,
    /// Another reader's load is under way; the waiter is told when it is done.
    Loading,
    Failed(String),
}

enum Slot {
    Loading(Vec<Weak<dyn ReadWaiter>>),
    Ready(Bytes),
    Failed(String, Instant),
}

struct Entry {
    tick: u64,
    slot: Slot,
}

#[derive(Default)]
struct Inner {
    entries: HashMap<String, Entry>,
    by_tick: BTreeMap<u64, String>,
    tick: u64,
    bytes: u64,
    hits: u64,
    misses: u64,
}

pub struct ByteCache {
    inner: Mutex<Inner>,
    capacity: u64,
}

impl ByteCache {
    pub fn new(capacity: u64) -> ByteCache {
        ByteCache { inner: Mutex::new(Inner::default()), capacity }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn lookup(&self, key: &str, waiter: Option<Weak<dyn ReadWaiter>>) -> Lookup {
        let mut g = self.lock();
        g.tick += 1;
        let tick = g.tick;
        let Inner { entries, by_tick, .. } = &mut *g;
        let found = match entries.get_mut(key) {
            None => None,
            Some(e) => {
                by_tick.remove(&e.tick);
                e.tick = tick;
                by_tick.insert(tick, key.to_owned());
                Some(match &mut e.slot {
                    Slot::Ready(b) => Lookup::Hit(b.clone()),
                    Slot::Loading(waiters) => {
                        // a parked fetch looks again at every wake-up: listed once
                        if let Some(w) = &waiter {
                            if !waiters.iter().any(|x| Weak::ptr_eq(x, w)) {
                                waiters.push(w.clone());
                            }
                        }
                        Lookup::Loading
                    }
                    Slot::Failed(why, at) if at.elapsed() < FAILED_FOR => Lookup::Failed(why.clone()),
                    Slot::Failed(..) => {
                        e.slot = Slot::Loading(waiter.clone().into_iter().collect());
                        Lookup::Miss
                    }
                })
            }
        };
        if let Some(l) = found {
            if matches!(l, Lookup::Hit(_)) {
                g.hits += 1;
            }
            l
        } else {
            g.misses += 1;
            g.entries.insert(key.to_owned(), Entry { tick, slot: Slot::Loading(waiter.into_iter().collect()) });
            g.by_tick.insert(tick, key.to_owned());
            Lookup::Miss
        }
    }

    /// The load of `key` finished: cache it (or its error) and wake its waiters.
    pub fn fill(&self, key: &str, result: std::result::Result<Bytes, String>) {
        let waiters = {
            let mut g = self.lock();
            let slot = match result {
                Ok(b) => {
                    g.bytes += b.len() as u64;
                    Slot::Ready(b)
                }
                Err(why) => Slot::Failed(why, Instant::now()),
            };
            let old = if let Some(e) = g.entries.get_mut(key) {
                std::mem::replace(&mut e.slot, slot)
            } else {
                g.tick += 1;
                let tick = g.tick;
                g.entries.insert(key.to_owned(), Entry { tick, slot });
                g.by_tick.insert(tick, key.to_owned());
                Slot::Loading(Vec::new())
            };
            if let Slot::Ready(b) = &old {
                g.bytes -= b.len() as u64;
            }
            self.evict(&mut g);
            match old {
                Slot::Loading(w) => w,
                _ => Vec::new(),
            }
        };
        for w in waiters {
            if let Some(w) = w.upgrade() {
                w.remote_read_done();
            }
        }
    }

    /// Drops least recently used entries until the ready bytes fit (loading ones stay).
    fn evict(&self, g: &mut Inner) {
        while g.bytes > self.capacity {
            let victim = g
                .by_tick
                .iter()
                .find(|(_, k)| g.entries.get(*k).is_some_and(|e| !matches!(e.slot, Slot::Loading(_))))
                .map(|(t, k)| (*t, k.clone()));
            let Some((tick, key)) = victim else { break };
            g.by_tick.remove(&tick);
            if let Some(Entry { slot: Slot::Ready(b), .. }) = g.entries.remove(&key) {
                g.bytes -= b.len() as u64;
            }
        }
    }

    /// Forgets `key` (a deleted object).
    pub fn remove(&self, key: &str) {
        let mut g = self.lock();
        if let Some(e) = g.entries.remove(key) {
            g.by_tick.remove(&e.tick);
            if let Slot::Ready(b) = e.slot {
                g.bytes -= b.len() as u64;
            }
        }
    }

    /// (bytes cached, entries, hits, misses)
    pub fn stats(&self) -> (u64, usize, u64, u64) {
        let g = self.lock();
        (g.bytes, g.entries.len(), g.hits, g.misses)
    }
}
