//! The fetching side of an incremental fetch session (KIP-227; Kafka's `FetchSessionHandler`),
//! used by the follower loops (`replica_fetcher.rs`). The serving side is `fetch_session.rs`.
//!
//! # Protocol, as the fetcher drives it
//! - No session: the request lists every partition with epoch 0, asking the leader to open a
//!   session, and carries the id of the session it replaces (0 if none), which the leader
//!   closes (Kafka's "close existing"), so sessions of lost connections do not pile up in the
//!   leader's cache. The answer's session id is the new session (0: the leader had no room;
//!   the next request is full again and asks again).
//! - In a session: the request carries (`id`, next epoch) and lists only the partitions that
//!   are new to the session or whose fetch state (fetch offset, log start offset, current
//!   leader epoch, last fetched epoch, max bytes) differs from what the session holds;
//!   partitions the session holds and this round does not fetch (unfollowed, backing off, or
//!   a topic recreated under its name: another topic id) go in `forgotten_topics_data`. The
//!   leader keeps every other partition's fetch state and answers only partitions with news
//!   (records, an error, a changed high watermark, last stable offset or log start offset).
//! - The epoch goes 1, 2, ... up to `i32::MAX`, then 1 again (0 opens, -1 closes).
//! - FETCH_SESSION_ID_NOT_FOUND or INVALID_FETCH_SESSION_EPOCH (the leader restarted or
//!   evicted the session), or a lost connection (the answer to the last request may have
//!   been lost, so what the leader's session holds is unknown): the next request is full and
//!   replaces the session.
//!
//! # Invariant
//! `held` is what the leader's session holds after the last answered request: a request
//! built from it is committed (`commit`) only when its answer arrived without a top-level
//! error, so an unanswered request never leaves the two sides apart.
//!
//! Idle, a follower of many partitions sends a request with no partitions and gets an answer
//! with none; the leader reads only the partitions that changed since it last read them
//! (`session_changes.rs`), and nothing is encoded, sent or decoded for the others.

use std::hash::BuildHasherDefault;
use std::sync::Arc;

use super::fetch_session::next_epoch;
use super::partition_hash::PartitionHashMap;
use crate::protocol::error_codes as code;
use crate::protocol::messages::fetch_request::{FetchPartition, FetchTopic, ForgottenTopic};
use crate::protocol::Uuid;

/// A followed partition: (topic name, partition index).
pub type Key = (Arc<str>, i32);

const INITIAL_EPOCH: i32 = 0;

/// A top-level Fetch error that means "start a new session", not a failed fetch.
pub fn is_session_error(error_code: i16) -> bool {
    matches!(error_code, code::FETCH_SESSION_ID_NOT_FOUND | code::INVALID_FETCH_SESSION_EPOCH)
}

/// What a session holds for one partition: the fetch state last sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Held {
    topic_id: Uuid,
    fetch_offset: i64,
    log_start_offset: i64,
    current_leader_epoch: i32,
    last_fetched_epoch: i32,
    max_bytes: i32,
}

impl Held {
    fn of(topic_id: Uuid, p: &FetchPartition) -> Held {
        Held {
            topic_id,
            fetch_offset: p.fetch_offset,
            log_start_offset: p.log_start_offset,
            current_leader_epoch: p.current_leader_epoch,
            last_fetched_epoch: p.last_fetched_epoch,
            max_bytes: p.partition_max_bytes,
        }
    }
}

/// One request's session part, built from everything this round fetches.
#[derive(Debug)]
pub struct SessionRequest {
    pub session_id: i32,
    pub session_epoch: i32,
    /// The partitions to send (all of them when full), grouped by topic in key order.
    pub topics: Vec<FetchTopic>,
    pub forgotten: Vec<ForgottenTopic>,
    /// What the session holds once this request is answered.
    next: PartitionHashMap<Key, Held>,
}

impl SessionRequest {
    /// A full request (no session yet): every partition is listed.
    pub fn is_full(&self) -> bool {
        self.session_epoch == INITIAL_EPOCH
    }
}

#[derive(Debug, Default)]
pub struct FetchSessionHandler {
    /// The session (0: none); with `next_epoch` 0, the one the next full request replaces.
    id: i32,
    /// The epoch of the next request: 0, a full request opening a session.
    next_epoch: i32,
    held: PartitionHashMap<Key, Held>,
}

impl FetchSessionHandler {
    pub fn new() -> Self {
        Self::default()
    }

    /// Gives the session up (a lost connection, a session error): the next request is full
    /// and closes it at the leader.
    pub fn reset(&mut self) {
        self.next_epoch = INITIAL_EPOCH;
        self.held.clear();
    }

    /// The session part of a request fetching `wanted` (every partition this round fetches,
    /// sorted by key, with its topic id).
    pub fn build(&self, wanted: Vec<(Key, Uuid, FetchPartition)>) -> SessionRequest {
        let mut next = PartitionHashMap::with_capacity_and_hasher(wanted.len(), BuildHasherDefault::default());
        let mut topics: Vec<FetchTopic> = Vec::new();
        let mut forgotten: Vec<ForgottenTopic> = Vec::new();
        let full = self.next_epoch == INITIAL_EPOCH;
        for (key, topic_id, p) in wanted {
            let held = Held::of(topic_id, &p);
            let before = self.held.get(&key);
            if let Some(b) = before.filter(|b| !full && b.topic_id != topic_id) {
                forget(&mut forgotten, &key, b.topic_id); // the name now belongs to another topic
            }
            if full || before != Some(&held) {
                match topics.last_mut() {
                    Some(t) if t.topic == *key.0 && t.topic_id == topic_id => t.partitions.push(p),
                    _ => topics.push(FetchTopic {
                        topic: key.0.to_string(),
                        topic_id,
                        partitions: vec![p],
                        ..Default::default()
                    }),
                }
            }
            next.insert(key, held);
        }
        if !full {
            let mut gone: Vec<(&Key, &Held)> = self.held.iter().filter(|(k, _)| !next.contains_key(*k)).collect();
            gone.sort_by(|a, b| a.0.cmp(b.0));
            for (key, h) in gone {
                forget(&mut forgotten, key, h.topic_id);
            }
        }
        SessionRequest { session_id: self.id, session_epoch: self.next_epoch, topics, forgotten, next }
    }

    /// `req` was answered without a top-level error, carrying `response_session_id`.
    pub fn commit(&mut self, req: SessionRequest, response_session_id: i32) {
        if req.is_full() {
            self.id = response_session_id;
            if response_session_id == 0 {
                self.reset(); // no room at the leader: the next request is full again
                return;
            }
            self.next_epoch = 1;
        } else if response_session_id != self.id {
            self.reset(); // not the session asked for: replace it
            return;
        } else {
            self.next_epoch = next_epoch(self.next_epoch);
        }
        self.held = req.next;
    }
}

fn forget(out: &mut Vec<ForgottenTopic>, key: &Key, topic_id: Uuid) {
    match out.last_mut() {
        Some(t) if t.topic == *key.0 && t.topic_id == topic_id => t.partitions.push(key.1),
        _ => out.push(ForgottenTopic {
            topic: key.0.to_string(),
            topic_id,
            partitions: vec![key.1],
            ..Default::default()
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn want(topic: &str, id: u8, partition: i32, offset: i64) -> (Key, Uuid, FetchPartition) {
        let p = FetchPartition {
            partition,
            fetch_offset: offset,
            current_leader_epoch: 3,
            partition_max_bytes: 1000,
            ..Default::default()
        };
        ((Arc::from(topic), partition), [id; 16], p)
    }

    fn listed(r: &SessionRequest) -> Vec<(String, i32, i64)> {
        r.topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| (t.topic.clone(), p.partition, p.fetch_offset)))
            .collect()
    }

    fn forgotten(r: &SessionRequest) -> Vec<(String, Uuid, Vec<i32>)> {
        r.forgotten.iter().map(|f| (f.topic.clone(), f.topic_id, f.partitions.clone())).collect()
    }

    #[test]
    fn a_session_lists_only_what_changed_and_forgets_what_is_no_longer_fetched() {
        let mut h = FetchSessionHandler::new();
        let first = h.build(vec![want("a", 1, 0, 5), want("a", 1, 1, 7), want("b", 2, 0, 0)]);
        assert!(first.is_full());
        assert_eq!((first.session_id, first.session_epoch), (0, 0));
        assert_eq!(listed(&first).len(), 3);
        h.commit(first, 42);

        let idle = h.build(vec![want("a", 1, 0, 5), want("a", 1, 1, 7), want("b", 2, 0, 0)]);
        assert_eq!((idle.session_id, idle.session_epoch, listed(&idle).len()), (42, 1, 0));
        assert!(idle.forgotten.is_empty());
        h.commit(idle, 42);

        // a/1 moved on; b/0 is no longer fetched (backing off, unfollowed); c/0 is new
        let r = h.build(vec![want("a", 1, 0, 5), want("a", 1, 1, 9), want("c", 3, 0, 0)]);
        assert_eq!(r.session_epoch, 2);
        assert_eq!(listed(&r), [("a".into(), 1, 9), ("c".into(), 0, 0)]);
        assert_eq!(forgotten(&r), [("b".into(), [2; 16], vec![0])]);
        h.commit(r, 42);
        let r = h.build(vec![want("a", 1, 0, 5), want("a", 1, 1, 9), want("c", 3, 0, 0)]);
        assert_eq!((r.session_epoch, listed(&r).len(), r.forgotten.len()), (3, 0, 0));
    }

    #[test]
    fn a_topic_recreated_under_its_name_is_forgotten_by_its_old_id_and_listed_by_its_new() {
        let mut h = FetchSessionHandler::new();
        h.commit(h.build(vec![want("t", 1, 0, 5)]), 7);
        let r = h.build(vec![want("t", 2, 0, 0)]);
        assert_eq!(listed(&r), [("t".into(), 0, 0)]);
        assert_eq!(r.topics[0].topic_id, [2; 16]);
        assert_eq!(forgotten(&r), [("t".into(), [1; 16], vec![0])]);
    }

    #[test]
    fn an_unanswered_request_changes_nothing_and_errors_or_no_room_start_over() {
        let mut h = FetchSessionHandler::new();
        h.commit(h.build(vec![want("a", 1, 0, 5)]), 9);
        let lost = h.build(vec![want("a", 1, 0, 6)]);
        drop(lost); // never answered: the next request lists the change again, at the same epoch
        let r = h.build(vec![want("a", 1, 0, 6)]);
        assert_eq!((r.session_epoch, listed(&r).len()), (1, 1));

        h.reset(); // a lost connection: the next request is full and closes session 9
        let r = h.build(vec![want("a", 1, 0, 6)]);
        assert!(r.is_full());
        assert_eq!((r.session_id, listed(&r).len()), (9, 1));
        h.commit(r, 0); // the leader had no room: full again, asking again, closing nothing
        let r = h.build(vec![want("a", 1, 0, 6)]);
        assert_eq!((r.is_full(), r.session_id), (true, 0));

        h.commit(h.build(vec![want("a", 1, 0, 6)]), 5);
        let r = h.build(vec![want("a", 1, 0, 6)]);
        h.commit(r, 6); // another session id than ours: start over
        assert!(h.build(vec![want("a", 1, 0, 6)]).is_full());
    }

    #[test]
    fn the_epoch_wraps_to_one() {
        let mut h = FetchSessionHandler::new();
        h.commit(h.build(vec![want("a", 1, 0, 5)]), 3);
        h.next_epoch = i32::MAX;
        let r = h.build(vec![want("a", 1, 0, 5)]);
        assert_eq!(r.session_epoch, i32::MAX);
        h.commit(r, 3);
        assert_eq!(h.build(vec![want("a", 1, 0, 5)]).session_epoch, 1);
    }
}
