//! New leaderships, and when to answer a follower's parked fetch early so that it adds them.
//!
//! When this broker becomes leader of a partition (a new topic, a leadership move), every
//! other member of its ISR has to add the partition to its fetch here. Leader and followers
//! learn of the change from the same metadata, not at the same moment, and a follower's fetch
//! is usually parked here for up to `replica.fetch.wait.max.ms`; the follower adds a
//! partition only to its next request (as Kafka's fetcher threads do), so its first acks=all
//! produces could wait that long. Two cases:
//! - **the follower learned first**: its parked fetch does not carry the partition. When the
//!   leader takes the leadership it answers that fetch early (`note` names the followers),
//!   and the follower's next request carries the partition.
//! - **the leader learned first**: the follower's next requests do not carry it yet. Until
//!   one does, or `PATIENCE` has passed, that follower's fetches park for at most
//!   `SHORT_POLL` (`park_until`).
//!
//! **Cost bound.** An early answer costs a round over the partitions the fetch reads (a
//! follower's round reads only its session's partitions that may have news,
//! `session_changes.rs`; about a microsecond per partition here). So early answers to one
//! follower are spaced by at least `SPACING_PER_PARTITION` per partition in the fetch: a
//! fetch of 100 partitions may be answered early every 5 ms, of 1,000 every 50 ms, and from
//! 10,000 (a full request) the spacing passes the default 500 ms wait, as in Kafka. The
//! follower used to reconnect to cut its poll short: the session ended with the connection
//! and every new topic cost a full request.
//!
//! Invariants: an expectation of follower `r` for partition P ends when a fetch of `r` reads
//! P, or after `PATIENCE` (a follower that is down or far behind on metadata); a follower's
//! early answers are never closer than the spacing of the fetch answered. Partitions are
//! matched by the address of the replica's `Partition` (`identity`), never dereferenced:
//! the scan of a fetch does not touch its partitions' memory.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use super::partition::Partition;

/// How long a follower's fetches park at most while it is expected to add a partition.
pub const SHORT_POLL: Duration = Duration::from_millis(10);
/// How long a follower is expected to add a partition.
pub const PATIENCE: Duration = Duration::from_secs(2);
/// The least time between two early answers to one follower, per partition in its fetch.
pub const SPACING_PER_PARTITION: Duration = Duration::from_micros(50);

/// A partition this broker became leader of, and the other members of its ISR.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewLeadership {
    /// The replica's identity (`identity`).
    pub replica: usize,
    pub followers: Vec<i32>,
}

/// A replica's identity here: the address of its `Partition`.
pub fn identity(p: &Partition) -> usize {
    std::ptr::from_ref(p) as usize
}

#[derive(Default)]
struct Follower {
    /// Replica identity and until when it is expected.
    expected: Vec<(usize, Instant)>,
    /// No early answer to this follower before this.
    next_early: Option<Instant>,
}

/// Per follower (replica id): the partitions it is expected to add, and its early answers.
#[derive(Default)]
pub struct ExpectedFollowers {
    by_replica: HashMap<i32, Follower>,
}

impl ExpectedFollowers {
    /// Notes `led` at `now`; returns the followers whose parked fetches to answer early.
    pub fn note(&mut self, led: Vec<NewLeadership>, now: Instant) -> HashSet<i32> {
        let mut touched = HashSet::new();
        for l in led {
            for r in l.followers {
                self.by_replica.entry(r).or_default().expected.push((l.replica, now + PATIENCE));
                touched.insert(r);
            }
        }
        for r in &touched {
            if let Some(f) = self.by_replica.get_mut(r) {
                f.expected.retain(|(_, until)| *until > now);
            }
        }
        touched
    }

    /// True if follower `replica` is expected to add anything.
    pub fn expects(&self, replica: i32) -> bool {
        self.by_replica.get(&replica).is_some_and(|f| !f.expected.is_empty())
    }

    /// The deadline of a fetch of `replica` reading `partitions` and parked until `deadline`,
    /// answered early at `at` (a new leadership, `note`: now) or when the spacing allows, if
    /// that is before `deadline` (the next early answer is then spaced after it).
    pub fn answer_early(&mut self, replica: i32, partitions: usize, deadline: Instant, at: Instant) -> Instant {
        let f = self.by_replica.entry(replica).or_default();
        let t = f.next_early.map_or(at, |n| n.max(at));
        if t >= deadline {
            return deadline;
        }
        let spacing = SPACING_PER_PARTITION.saturating_mul(u32::try_from(partitions).unwrap_or(u32::MAX));
        f.next_early = Some(t + spacing);
        t
    }

    /// The deadline of a fetch of `replica` about to park until `deadline` and reading
    /// `fetched` (replica identities, `identity`): earlier (`SHORT_POLL`, spaced) while the
    /// follower is expected to add a partition the fetch does not read. Expectations met or
    /// past are dropped.
    pub fn park_until(
        &mut self,
        replica: i32,
        fetched: impl Iterator<Item = usize>,
        partitions: usize,
        deadline: Instant,
        now: Instant,
    ) -> Instant {
        let Some(f) = self.by_replica.get_mut(&replica) else { return deadline };
        f.expected.retain(|(_, until)| *until > now);
        if f.expected.is_empty() || f.next_early.is_some_and(|t| t.max(now + SHORT_POLL) >= deadline) {
            return deadline; // nothing expected, or no early answer allowed before the deadline
        }
        let wanted: HashSet<usize> = f.expected.iter().map(|(id, _)| *id).collect();
        let mut found = HashSet::new();
        for id in fetched {
            if wanted.contains(&id) {
                found.insert(id);
                if found.len() == wanted.len() {
                    break;
                }
            }
        }
        f.expected.retain(|(id, _)| !found.contains(id));
        if f.expected.is_empty() {
            return deadline;
        }
        self.answer_early(replica, partitions, deadline, now + SHORT_POLL)
    }
}
