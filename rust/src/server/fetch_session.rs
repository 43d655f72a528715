//! Incremental fetch sessions (KIP-227): a consumer (or follower) of many partitions sends
//! its full partition list once, then only what changed; the broker answers with only the
//! partitions that have news.
//!
//! # Protocol (session id, epoch) in a Fetch request
//! - `(0, -1)`: no session; a full request, a full response with session id 0.
//! - `(0, 0)`: full request, and please open a session: the response carries its id (or 0
//!   when the cache has no room); the next request uses epoch 1.
//! - `(id, n > 0)`: incremental. `n` must equal the session's next epoch, else
//!   INVALID_FETCH_SESSION_EPOCH; an unknown id is FETCH_SESSION_ID_NOT_FOUND. The epoch
//!   moves on when the request is taken in, not when it is answered (as in Kafka): a request
//!   parked on a long poll and lost with its connection has changed the session, and sending
//!   it again at the same epoch is refused rather than served from a session that differs
//!   from what the client believes. The request
//!   lists partitions to add or update (fetch offset, max bytes, leader epoch) and
//!   `forgotten_topics_data` to drop; every other session partition keeps its cached fetch
//!   state. The response lists only partitions with records, an error, or a high watermark,
//!   last stable offset or log start offset different from what this session last sent.
//! - `(id, 0)`: close `id`, open a new session (full). `(id, -1)`: close `id`, no session.
//!
//! # Cache
//! A session ends with the connection its latest request came on. Every client that uses
//! sessions (Java's consumer, the follower loops of `fetch_session_handler.rs`) starts over
//! with a full request after a lost connection, so the session could only be used again by
//! that request closing it; and a session whose opening answer was lost with its connection
//! (answered just as the client dropped it) is known to nobody, yet would hold its partitions
//! in the cache until evicted: thousands of them, for a follower, at every reconnect. (Kafka
//! keeps sessions across connections and leaves such orphans to eviction.)
//!
//! At most `max.incremental.fetch.session.cache.slots` sessions. When full, a new session
//! replaces the least recently used one only if that one has been idle for
//! `EVICTION_IDLE`; otherwise the client gets session id 0 and keeps sending full requests
//! (correct, just larger), as Kafka does.
//!
//! # Follower sessions
//! A follower's session (one opened by a request with `replica_id >= 0`) also knows which of
//! its partitions are quiet: read settled (the follower at the LEO, no error) and unchanged
//! since. Its rounds read only the others, the loud ones (`session_changes.rs`).
//!
//! Owned by the network thread (no locking).

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::expected_followers::identity;
use super::partition::Partition;
use super::partition_hash::PartitionHashMap;
use super::session_changes::SessionChanges;
use crate::protocol::Uuid;

/// A session idle this long may be evicted for a new one.
pub const EVICTION_IDLE: Duration = Duration::from_mins(2);

pub const INITIAL_EPOCH: i32 = 0;
pub const FINAL_EPOCH: i32 = -1;

/// The epoch after `epoch` in a session: 1, 2, ... `i32::MAX`, then 1 again.
pub fn next_epoch(epoch: i32) -> i32 {
    if epoch == i32::MAX || epoch < 1 {
        1
    } else {
        epoch + 1
    }
}

/// One partition of a session: what the client asked for and what we last told it.
#[derive(Debug, Clone)]
pub struct CachedPartition {
    /// The topic name (Fetch v4-12), or resolved from `topic_id` when it was added (v13+).
    pub topic: String,
    /// All zero before v13.
    pub topic_id: Uuid,
    pub partition: i32,
    pub fetch_offset: i64,
    pub max_bytes: i32,
    pub current_leader_epoch: i32,
    /// The epoch of the last record the client has (v12+; -1: not checked).
    pub last_fetched_epoch: i32,
    /// Last values sent; -1 until the partition was first answered.
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    pub log_start_offset: i64,
    /// The local replica it was last read from (`fetch.rs`).
    pub part: Resolved,
    /// A follower's session reads it only when it changes (`session_changes.rs`); false
    /// (loud) until a round reads it settled.
    pub quiet: bool,
}

/// The local replica a session partition was last found to be. A round reads it without
/// looking it up by name or topic id again (at tens of thousands of partitions per session
/// those lookups were most of a follower round's cost on the leader) until the table
/// removes it: a replica deleted, or replaced by another of the same name (a topic
/// recreated), is marked removed, and the next read looks the partition up again.
#[derive(Clone, Default)]
pub struct Resolved(pub Option<Arc<Partition>>);

impl fmt::Debug for Resolved {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Some(p) => write!(f, "Resolved({})", p.name()),
            None => f.write_str("Resolved(-)"),
        }
    }
}

/// How a session names a partition: by topic id from v13 (the name is left empty, so a topic
/// recreated under the same name is another partition), by name before.
pub type SessionKey = (Uuid, String, i32);

pub fn session_key(topic_id: Uuid, topic: &str, partition: i32) -> SessionKey {
    if topic_id == Uuid::default() {
        (topic_id, topic.to_owned(), partition)
    } else {
        (topic_id, String::new(), partition)
    }
}

impl CachedPartition {
    pub fn key(&self) -> SessionKey {
        session_key(self.topic_id, &self.topic, self.partition)
    }
}

pub struct Session {
    pub id: i32,
    /// The epoch the next request must carry.
    pub next_epoch: i32,
    /// Partitions in session order.
    pub partitions: Vec<CachedPartition>,
    index: PartitionHashMap<SessionKey, usize>,
    pub last_used: Instant,
    /// The connection of its latest request (network loop id).
    conn: u64,
    /// A follower's session: the changes of its quiet partitions (`session_changes.rs`).
    pub changes: Option<Arc<SessionChanges>>,
    /// Positions of the partitions that are not quiet (each once).
    loud: Vec<usize>,
    /// Position of each partition by the identity of the replica it was last read from.
    by_replica: PartitionHashMap<usize, usize>,
}

impl fmt::Debug for Session {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Session")
            .field("id", &self.id)
            .field("next_epoch", &self.next_epoch)
            .field("partitions", &self.partitions.len())
            .field("loud", &self.loud.len())
            .finish_non_exhaustive()
    }
}

impl Session {
    fn new(id: i32, partitions: Vec<CachedPartition>, conn: u64, changes: Option<Arc<SessionChanges>>) -> Session {
        let mut s = Session {
            id,
            next_epoch: 1,
            partitions: Vec::new(),
            index: PartitionHashMap::default(),
            last_used: Instant::now(),
            conn,
            changes,
            loud: Vec::new(),
            by_replica: PartitionHashMap::default(),
        };
        for p in partitions {
            s.upsert(p);
        }
        s
    }

    /// Adds a partition, or updates its fetch state (keeping what was last sent); either way
    /// it is loud.
    pub fn upsert(&mut self, p: CachedPartition) {
        let key = p.key();
        if let Some(&i) = self.index.get(&key) {
            let c = &mut self.partitions[i];
            c.fetch_offset = p.fetch_offset;
            c.max_bytes = p.max_bytes;
            c.current_leader_epoch = p.current_leader_epoch;
            c.last_fetched_epoch = p.last_fetched_epoch;
            self.make_loud(i);
        } else {
            let at = self.partitions.len();
            self.index.insert(key, at);
            if let Some(part) = &p.part.0 {
                self.by_replica.insert(identity(part), at);
            }
            self.partitions.push(CachedPartition { quiet: false, ..p });
            self.loud.push(at);
        }
    }

    /// Drops partitions (one pass, however many); returns the dropped ones.
    pub fn forget(&mut self, gone: &[SessionKey]) -> Vec<CachedPartition> {
        if gone.is_empty() {
            return Vec::new();
        }
        let (kept, dropped): (Vec<_>, Vec<_>) =
            std::mem::take(&mut self.partitions).into_iter().partition(|c| !gone.contains(&c.key()));
        self.partitions = kept;
        if !dropped.is_empty() {
            self.index = self.partitions.iter().enumerate().map(|(i, c)| (c.key(), i)).collect();
            self.by_replica = self
                .partitions
                .iter()
                .enumerate()
                .filter_map(|(i, c)| c.part.0.as_deref().map(|p| (identity(p), i)))
                .collect();
            self.loud = self.partitions.iter().enumerate().filter(|(_, c)| !c.quiet).map(|(i, _)| i).collect();
        }
        dropped
    }

    /// Positions of the partitions not quiet: what a follower's round reads.
    pub fn loud(&self) -> &[usize] {
        &self.loud
    }

    fn make_loud(&mut self, at: usize) {
        let c = &mut self.partitions[at];
        if c.quiet {
            c.quiet = false;
            self.loud.push(at);
        }
    }

    /// Makes loud the partitions changed since the last call (`SessionChanges::take`);
    /// returns the positions that were quiet.
    pub fn take_changed(&mut self) -> Vec<usize> {
        let Some(changes) = &self.changes else { return Vec::new() };
        let mut woke = Vec::new();
        for id in changes.take() {
            if let Some(&at) = self.by_replica.get(&id) {
                if self.partitions[at].quiet {
                    self.make_loud(at);
                    woke.push(at);
                }
            }
        }
        woke
    }

    /// The partition at `at` was read from `part`.
    pub fn set_resolved(&mut self, at: usize, part: &Resolved) {
        let c = &mut self.partitions[at];
        let (old, new) = (c.part.0.as_deref().map(identity), part.0.as_deref().map(identity));
        if old != new {
            if let Some(old) = old {
                self.by_replica.remove(&old);
            }
            if let Some(new) = new {
                self.by_replica.insert(new, at);
            }
            c.part.clone_from(part);
        }
    }

    /// Marks the partition at `at` quiet (it stays in the loud list until `drop_quiet`).
    pub fn set_quiet(&mut self, at: usize) {
        self.partitions[at].quiet = true;
    }

    /// Drops the quiet partitions from the loud list (after a round).
    pub fn drop_quiet(&mut self) {
        let partitions = &self.partitions;
        self.loud.retain(|&i| !partitions[i].quiet);
    }

    pub fn get_mut(&mut self, key: &SessionKey) -> Option<&mut CachedPartition> {
        let i = self.position(key)?;
        Some(&mut self.partitions[i])
    }

    /// Where `key` is in `partitions`.
    pub fn position(&self, key: &SessionKey) -> Option<usize> {
        self.index.get(key).copied()
    }
}

/// Why a session request was refused (a top-level Fetch error code).
#[derive(Debug, PartialEq, Eq)]
pub enum SessionError {
    NotFound,
    InvalidEpoch,
}

pub struct FetchSessionCache {
    slots: usize,
    sessions: HashMap<i32, Session>,
    next_id: i32,
}

impl FetchSessionCache {
    pub fn new(slots: usize) -> Self {
        FetchSessionCache { slots, sessions: HashMap::new(), next_id: 1 }
    }

    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }

    /// Partitions held by all sessions together (Kafka's NumIncrementalFetchPartitionsCached).
    pub fn partitions_cached(&self) -> usize {
        self.sessions.values().map(|s| s.partitions.len()).sum()
    }

    pub fn remove(&mut self, id: i32) {
        self.sessions.remove(&id);
    }

    /// Ends the sessions whose latest request came on connection `conn` (it closed).
    pub fn remove_of_connection(&mut self, conn: u64) {
        self.sessions.retain(|_, s| s.conn != conn);
    }

    /// Opens a session over `partitions` for connection `conn` (a follower's with `changes`);
    /// its id, or 0 when there is no room.
    pub fn create(&mut self, partitions: Vec<CachedPartition>, conn: u64, changes: Option<Arc<SessionChanges>>) -> i32 {
        if self.slots == 0 {
            return 0;
        }
        if self.sessions.len() >= self.slots {
            let lru = self.sessions.values().min_by_key(|s| s.last_used).map(|s| (s.id, s.last_used));
            match lru {
                Some((id, used)) if used.elapsed() >= EVICTION_IDLE => {
                    self.sessions.remove(&id);
                }
                _ => return 0,
            }
        }
        let mut id = self.next_id;
        while id == 0 || self.sessions.contains_key(&id) {
            id = id.wrapping_add(1).max(1);
        }
        self.next_id = id.wrapping_add(1).max(1);
        self.sessions.insert(id, Session::new(id, partitions, conn, changes));
        id
    }

    /// The session for an incremental request at `epoch` on connection `conn`.
    pub fn lookup(&mut self, id: i32, epoch: i32, conn: u64) -> Result<&mut Session, SessionError> {
        let s = self.sessions.get_mut(&id).ok_or(SessionError::NotFound)?;
        if s.next_epoch != epoch {
            return Err(SessionError::InvalidEpoch);
        }
        s.last_used = Instant::now();
        s.conn = conn;
        Ok(s)
    }

    pub fn get_mut(&mut self, id: i32) -> Option<&mut Session> {
        self.sessions.get_mut(&id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(topic: &str, p: i32, offset: i64) -> CachedPartition {
        CachedPartition {
            topic: topic.into(),
            topic_id: Uuid::default(),
            partition: p,
            fetch_offset: offset,
            max_bytes: 100,
            current_leader_epoch: -1,
            last_fetched_epoch: -1,
            high_watermark: -1,
            last_stable_offset: -1,
            log_start_offset: -1,
            part: Resolved::default(),
            quiet: false,
        }
    }

    #[test]
    fn sessions_keep_order_and_fetch_state() {
        let mut c = FetchSessionCache::new(2);
        let id = c.create(vec![part("a", 0, 5), part("a", 1, 7), part("b", 0, 0)], 1, None);
        assert_ne!(id, 0);
        assert_eq!(c.lookup(id, 2, 1).unwrap_err(), SessionError::InvalidEpoch);
        assert_eq!(c.lookup(id + 100, 1, 1).unwrap_err(), SessionError::NotFound);
        let s = c.lookup(id, 1, 1).unwrap();
        s.upsert(part("a", 1, 9));
        s.forget(&[session_key(Uuid::default(), "a", 0)]);
        s.upsert(part("c", 3, 1));
        let order: Vec<_> = s.partitions.iter().map(|p| (p.topic.as_str(), p.partition, p.fetch_offset)).collect();
        assert_eq!(order, [("a", 1, 9), ("b", 0, 0), ("c", 3, 1)]);
        assert_eq!(s.get_mut(&session_key(Uuid::default(), "b", 0)).unwrap().fetch_offset, 0);
    }

    #[test]
    fn sessions_name_partitions_by_topic_id_from_v13() {
        let mut c = FetchSessionCache::new(1);
        let (old, new) = ([1u8; 16], [2u8; 16]);
        let by_id = |id: Uuid, p: i32| CachedPartition { topic_id: id, ..part("t", p, 0) };
        let id = c.create(vec![by_id(old, 0), part("t", 0, 3)], 1, None);
        let s = c.lookup(id, 1, 1).unwrap();
        // The same name under another id (the topic recreated) is another partition.
        s.upsert(by_id(new, 0));
        assert_eq!(s.partitions.len(), 3);
        s.forget(&[session_key(old, "", 0)]);
        let left: Vec<_> = s.partitions.iter().map(|p| (p.topic_id, p.fetch_offset)).collect();
        assert_eq!(left, [(Uuid::default(), 3), (new, 0)]);
    }

    #[test]
    fn a_full_cache_evicts_only_idle_sessions() {
        let mut c = FetchSessionCache::new(1);
        let first = c.create(vec![part("a", 0, 0)], 1, None);
        assert_ne!(first, 0);
        assert_eq!(c.create(vec![part("b", 0, 0)], 1, None), 0, "the only session is busy");
        c.get_mut(first).unwrap().last_used = Instant::now().checked_sub(EVICTION_IDLE).unwrap();
        let second = c.create(vec![part("b", 0, 0)], 1, None);
        assert!(second != 0 && second != first);
        assert_eq!(c.len(), 1);
        assert_eq!(FetchSessionCache::new(0).create(vec![], 1, None), 0);
    }

    #[test]
    fn a_session_ends_with_the_connection_of_its_latest_request() {
        let mut c = FetchSessionCache::new(4);
        let a = c.create(vec![part("a", 0, 0)], 1, None);
        let b = c.create(vec![part("b", 0, 0)], 2, None);
        assert!(c.lookup(b, 1, 3).is_ok(), "a session may move to another connection");
        c.remove_of_connection(2);
        assert_eq!(c.len(), 2);
        c.remove_of_connection(3);
        assert_eq!((c.len(), c.get_mut(a).is_some()), (1, true));
        assert_eq!(c.partitions_cached(), 1);
    }
}
