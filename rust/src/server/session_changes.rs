//! A follower's fetch session on the leader: which of its partitions changed since the leader
//! last read them, and when the follower last fetched.
//!
//! A follower round used to read every partition of the session (as Kafka's leader does): at
//! tens of thousands of partitions per follower that was most of an idle cluster's CPU and
//! what made creating a topic cost more the more existed. Now a round reads only what may
//! have news:
//! - **loud** partitions (`fetch_session.rs`): listed in the request (new, or their fetch
//!   state moved), not read since they changed, or not settled when last read (records
//!   sent, an error, the follower behind the leader's LEO);
//! - every other partition is **quiet**: the follower had everything, and the values last
//!   sent (HW, LSO, log start offset) were current when it was read. It is read again only
//!   when it changes: its log's offsets move (`log::OffsetsListener`), its leader state
//!   changes or it is removed (`Partition::wake_everyone`). The partition then calls
//!   `changed` on every session watching it; the session's next round (or its parked fetch,
//!   woken at once) makes it loud again.
//!
//! A quiet partition's follower state on the leader is not written per round: while the
//! partition is quiet, its follower fetches it at its LEO every time the session fetches, so
//! the leader counts it as fetched and caught up at the session's last fetch (`FetchClock`,
//! linked from the follower state, `Partition::follower_quiet`). When the LEO moves, the link
//! is cut and its time kept (`Partition::offsets_changed`): from then on the follower is
//! caught up as of that fetch, as Kafka's rule has it, until its next fetch of the partition.
//!
//! # Invariants
//! - a partition is watched by the session before its first read in it, so no change after
//!   a read goes unannounced;
//! - a change reported here is served by a later round of the session: `take` hands it out
//!   only to a round that marks it loud, and it stays loud until a round reads it settled;
//! - at most one fetch of a session is parked (the follower sends one at a time); a change
//!   wakes it.
//!
//! Lock order: a log's lock, then a partition's watchers, then this. The network thread
//! holds none of them while it takes this.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use super::partition::Wakeup;
use super::partition_hash::PartitionHashSet;

/// When the follower of a session last fetched (ms since the epoch).
#[derive(Debug)]
pub struct FetchClock(AtomicI64);

impl FetchClock {
    pub fn now_ms(&self) -> i64 {
        self.0.load(Ordering::Acquire)
    }
}

#[derive(Default)]
struct State {
    /// Identities (`expected_followers::identity`) of the partitions changed since `take`.
    changed: PartitionHashSet<usize>,
    /// The connection whose fetch of this session is parked.
    parked: Option<u64>,
}

pub struct SessionChanges {
    wakeup: Arc<Wakeup>,
    state: Mutex<State>,
    clock: Arc<FetchClock>,
}

impl SessionChanges {
    pub fn new(wakeup: Arc<Wakeup>, now_ms: i64) -> Arc<SessionChanges> {
        Arc::new(SessionChanges {
            wakeup,
            state: Mutex::default(),
            clock: Arc::new(FetchClock(AtomicI64::new(now_ms))),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The partition `identity` changed: a later round reads it, and a parked fetch of the
    /// session re-checks now.
    pub fn changed(&self, identity: usize) {
        let parked = {
            let mut s = self.state();
            s.changed.insert(identity);
            s.parked.take()
        };
        if let Some(conn) = parked {
            self.wakeup.wake(vec![conn]);
        }
    }

    /// The partitions changed since the last call.
    pub fn take(&self) -> Vec<usize> {
        let mut s = self.state();
        if s.changed.is_empty() {
            return Vec::new();
        }
        s.changed.drain().collect()
    }

    /// The fetch on connection `conn` parks: a change wakes it (at once if one is waiting).
    pub fn park(&self, conn: u64) {
        let now = {
            let mut s = self.state();
            s.parked = Some(conn);
            !s.changed.is_empty()
        };
        if now {
            self.unpark(conn);
            self.wakeup.wake(vec![conn]);
        }
    }

    /// The fetch on connection `conn` is answered or gone.
    pub fn unpark(&self, conn: u64) {
        let mut s = self.state();
        if s.parked == Some(conn) {
            s.parked = None;
        }
    }

    /// The follower fetched at `now_ms` (after its partitions read this round were recorded).
    pub fn fetched(&self, now_ms: i64) {
        self.clock.0.fetch_max(now_ms, Ordering::AcqRel);
    }

    pub fn clock(&self) -> &Arc<FetchClock> {
        &self.clock
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_are_taken_once_and_wake_the_parked_fetch() {
        let c = SessionChanges::new(Arc::default(), 5);
        assert!(c.take().is_empty());
        c.changed(1);
        c.changed(1);
        c.changed(2);
        let mut t = c.take();
        t.sort_unstable();
        assert_eq!(t, [1, 2], "each change once");
        assert!(c.take().is_empty());
        c.park(7);
        assert_eq!(c.state().parked, Some(7));
        c.changed(3);
        assert_eq!(c.state().parked, None, "woken, no longer parked");
        c.park(7);
        assert_eq!(c.state().parked, None, "a change waiting: re-checked at once");
        assert_eq!(c.take(), [3]);
        c.park(7);
        c.unpark(8);
        assert_eq!(c.state().parked, Some(7), "another connection's unpark changes nothing");
        c.unpark(7);
        assert_eq!(c.state().parked, None);
        c.fetched(9);
        c.fetched(8);
        assert_eq!(c.clock().now_ms(), 9, "the clock never goes back");
    }
}
