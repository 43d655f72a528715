//! The partitions this broker holds, as the data path sees them: the log plus the leader
//! state the control plane (Python) sets, and the high watermark rule.
//!
//! # State (Kafka's names)
//! - `leader`, `leader_epoch`, `isr`, `min_insync_replicas`: set by the control plane from the
//!   metadata image (`Partition::update`); the data path only reads them.
//! - follower LEOs: reported by follower fetches (`record_follower_leo`).
//! - high watermark: stored in the `Log`; `maybe_increment_hw` sets it to the minimum LEO over
//!   the ISR (the leader's own LEO counts for itself), never lower than before.
//!
//! # Invariants
//! log start offset <= HW <= LEO; consumers never read at or above the HW.
//!
//! # Waiting
//! A parked request (a Fetch long poll, an acks=all Produce) registers its id with each
//! partition it waits on. When the HW moves, the state changes or the partition is removed,
//! the partition hands those ids to `Wakeup`, which the network loop drains; the request then
//! re-checks its own condition (spurious wake-ups are harmless).
//!
//! Thread-safety: every method takes `&self`; the control plane calls them from Python
//! threads, the data path from the network thread.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, RwLock};

use mio::Waker;

use crate::log::Log;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Ids of parked requests to re-check, for the network loop. Until a network loop attaches
/// its waker (a table used without a server, as in control-plane tests) nothing can be
/// parked, and wake-ups go nowhere.
#[derive(Default)]
pub struct Wakeup {
    woken: Mutex<Vec<u64>>,
    waker: OnceLock<Waker>,
}

impl Wakeup {
    /// Attaches the network loop's waker; false if one is attached already.
    pub fn attach(&self, waker: Waker) -> bool {
        self.waker.set(waker).is_ok()
    }

    /// Queues `ids` to be re-checked and pokes the loop (empty: just poke, e.g. for commands).
    pub fn wake(&self, ids: Vec<u64>) {
        let Some(waker) = self.waker.get() else { return };
        lock(&self.woken).extend(ids);
        let _ = waker.wake();
    }

    pub fn take(&self) -> Vec<u64> {
        std::mem::take(&mut *lock(&self.woken))
    }
}

#[derive(Debug, Clone)]
pub struct LeaderState {
    pub leader: i32,
    pub leader_epoch: i32,
    pub isr: Vec<i32>,
    pub min_insync_replicas: i32,
}

pub struct Partition {
    pub topic: Arc<str>,
    pub index: i32,
    pub node_id: i32,
    pub log: Arc<Log>,
    state: RwLock<LeaderState>,
    follower_leos: Mutex<HashMap<i32, i64>>,
    removed: AtomicBool,
    waiters: Mutex<Vec<u64>>,
    wakeup: Arc<Wakeup>,
}

impl Partition {
    pub fn name(&self) -> String {
        format!("{}-{}", self.topic, self.index)
    }

    /// The leader state, read-locked (no copy per request; keep the guard short).
    pub fn state(&self) -> std::sync::RwLockReadGuard<'_, LeaderState> {
        self.state.read().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn is_removed(&self) -> bool {
        self.removed.load(Ordering::Acquire)
    }

    /// New leader/epoch/ISR from the metadata image; the HW may move (a smaller ISR).
    pub fn update(&self, state: LeaderState) {
        *self.state.write().unwrap_or_else(PoisonError::into_inner) = state;
        self.maybe_increment_hw();
        self.wake_all();
    }

    pub fn record_follower_leo(&self, replica: i32, leo: i64) {
        lock(&self.follower_leos).insert(replica, leo);
    }

    /// HW = min LEO over the ISR (see the module doc); true if it moved (waiters are woken).
    pub fn maybe_increment_hw(&self) -> bool {
        let st = self.state.read().unwrap_or_else(PoisonError::into_inner);
        if st.leader != self.node_id {
            return false;
        }
        let mut hw = self.log.log_end_offset();
        {
            let leos = lock(&self.follower_leos);
            for r in &st.isr {
                if *r != self.node_id {
                    hw = hw.min(leos.get(r).copied().unwrap_or_else(|| self.log.log_start_offset()));
                }
            }
        }
        drop(st);
        if hw > self.log.high_watermark() {
            self.log.update_high_watermark(hw);
            self.wake_all();
            return true;
        }
        false
    }

    pub fn add_waiter(&self, id: u64) {
        let mut w = lock(&self.waiters);
        if !w.contains(&id) {
            w.push(id);
        }
    }

    pub fn remove_waiter(&self, id: u64) {
        lock(&self.waiters).retain(|w| *w != id);
    }

    fn wake_all(&self) {
        let ids = std::mem::take(&mut *lock(&self.waiters));
        if !ids.is_empty() {
            self.wakeup.wake(ids);
        }
    }
}

/// Every partition this broker holds, by (topic, partition); plus the topic names the
/// metadata image knows (to tell "no such topic" from "no such partition").
/// topic -> partition index -> entry (two levels, so a lookup borrows the topic name).
type PartitionMap = HashMap<String, HashMap<i32, Arc<Partition>>>;

pub struct PartitionTable {
    parts: RwLock<PartitionMap>,
    topics: RwLock<HashSet<String>>,
    wakeup: Arc<Wakeup>,
}

impl Default for PartitionTable {
    fn default() -> Self {
        PartitionTable::new()
    }
}

impl PartitionTable {
    pub fn new() -> Self {
        PartitionTable { parts: RwLock::new(HashMap::new()), topics: RwLock::new(HashSet::new()), wakeup: Arc::default() }
    }

    pub fn wakeup(&self) -> &Arc<Wakeup> {
        &self.wakeup
    }

    /// Adds (or replaces) a partition's entry; returns it.
    pub fn add(&self, topic: &str, index: i32, node_id: i32, log: Arc<Log>, state: LeaderState) -> Arc<Partition> {
        let topic: Arc<str> = Arc::from(topic);
        let p = Arc::new(Partition {
            topic: Arc::clone(&topic),
            index,
            node_id,
            log,
            state: RwLock::new(state),
            follower_leos: Mutex::new(HashMap::new()),
            removed: AtomicBool::new(false),
            waiters: Mutex::new(Vec::new()),
            wakeup: Arc::clone(&self.wakeup),
        });
        let old = self
            .parts
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(topic.to_string())
            .or_default()
            .insert(index, Arc::clone(&p));
        if let Some(old) = old {
            old.removed.store(true, Ordering::Release);
            old.wake_all();
        }
        p
    }

    /// Removes a partition (topic deleted, replica moved away); its waiters are woken.
    pub fn remove(&self, topic: &str, index: i32) {
        let old = {
            let mut parts = self.parts.write().unwrap_or_else(PoisonError::into_inner);
            let old = parts.get_mut(topic).and_then(|m| m.remove(&index));
            if parts.get(topic).is_some_and(HashMap::is_empty) {
                parts.remove(topic);
            }
            old
        };
        if let Some(old) = old {
            old.removed.store(true, Ordering::Release);
            old.wake_all();
        }
    }

    pub fn get(&self, topic: &str, index: i32) -> Option<Arc<Partition>> {
        self.parts.read().unwrap_or_else(PoisonError::into_inner).get(topic)?.get(&index).cloned()
    }

    pub fn set_topics(&self, names: HashSet<String>) {
        *self.topics.write().unwrap_or_else(PoisonError::into_inner) = names;
    }

    pub fn has_topic(&self, name: &str) -> bool {
        self.topics.read().unwrap_or_else(PoisonError::into_inner).contains(name)
    }
}
