//! Fetch (API key 1, versions 4-18), served on the network thread without Python.
//!
//! Reads never copy record bytes: the log returns `FileRegion`s that the connection sends
//! with sendfile(2). Limits follow Kafka (KIP-74): the response holds at most `max_bytes` and
//! each partition at most its `partition_max_bytes`, except that the first partition with
//! data returns at least one whole batch, so a consumer always gets past a batch larger
//! than its limits. Consumers read up to the high watermark; with `isolation_level` 1
//! (read_committed) up to the last stable offset (min(first offset of the oldest open
//! transaction, HW)), and each partition with records lists the aborted transactions
//! overlapping `[fetch offset, LSO)` so the client drops their records. A follower
//! (`replica_id >= 0`) reads up to the LEO and its fetch offset is its LEO for the HW.
//!
//! Naming: v4-12 name topics, v13+ name them by topic id (UNKNOWN_TOPIC_ID for an id the
//! metadata image does not have; the id is resolved again at every read, so a topic
//! recreated under the same name is not served to a session of the old one). A follower
//! names itself with `replica_id` up to v14 and `ReplicaState` from v15.
//!
//! Not the leader (KIP-951): a partition led elsewhere answers NOT_LEADER_OR_FOLLOWER, and
//! an old current leader epoch FENCED_LEADER_EPOCH, with `CurrentLeader` (v12+) and the
//! leaders' endpoints in `NodeEndpoints` (v16+), whether or not this broker holds a replica.
//!
//! Followers and diverging logs: a follower (`replica_id >= 0`) reads up to the LEO, and its
//! fetch offset is its LEO for the HW and the ISR (`Partition::record_follower_fetch`). From
//! v12 a fetcher names the epoch of its last record (`last_fetched_epoch`); if the leader's
//! log ends that epoch earlier than the fetch offset, or has no such epoch, the answer is a
//! `DivergingEpoch` (epoch, end offset) with no records, and the fetcher truncates there
//! (Kafka's KIP-320/KIP-595 check; the follower loop in `replica_fetcher.rs` does this).
//!
//! Reads from followers (KIP-392): a consumer's Fetch v11+ is served by a follower replica too
//! (up to that replica's HW, which follows the leader's). With `replica.selector.class` set to
//! the rack-aware selector, a leader answering a consumer that names its rack (`rack_id`)
//! may instead name a `preferred_read_replica` in that rack, with no records; the client
//! then fetches there (`Partition::preferred_read_replica`).
//!
//! Long poll: with less than `min_bytes` available and no partition in error, the request is
//! parked on its partitions until the HW moves or `max_wait_ms` passes.
//!
//! Fetch sessions (KIP-227, `fetch_session.rs`): a request may open a session, and later
//! requests of it list only what changed; their responses list only partitions with news.
//! A consumer's incremental round reads every partition of its session (as Kafka's does); a
//! follower's reads only the partitions that may have news (`session_changes.rs`), so an
//! idle follower of tens of thousands of partitions costs its leader next to nothing.

use std::borrow::Cow;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use super::authorizer::{op, resource, Caller, CLUSTER_NAME};
use super::fetch_session::{
    next_epoch, session_key, CachedPartition, FetchSessionCache, Resolved, Session, SessionError, FINAL_EPOCH,
    INITIAL_EPOCH,
};
use super::partition::{NotServed, Partition, PartitionTable};
use super::quota;
use super::request::{error_code_for, frame_response};
use super::session_changes::SessionChanges;
use super::LogLine;
use crate::error::LogError;
use crate::protocol::error_codes as code;
use crate::protocol::messages::fetch_request::{FetchPartition, FetchRequest};
use crate::protocol::messages::fetch_response::{
    AbortedTransaction, FetchResponse, FetchableTopicResponse, LeaderIdAndEpoch, NodeEndpoint, PartitionData,
};
use crate::protocol::{Bytes, Chunk, ProtocolError, Reader, Records, Uuid};
use crate::remote::cache::ReadWaiter;
use crate::remote::{RemoteLogView, RemoteRead};
use crate::table::tier_reader::{TableTierView, TierPartition, TierRead};

pub const MIN_VERSION: i16 = 4;
pub const MAX_VERSION: i16 = 18;
/// The first version that names topics by id.
const TOPIC_ID_VERSION: i16 = 13;

/// One partition to read: from the request, or from the session for an incremental one.
#[derive(Debug, Clone)]
struct Target {
    /// v4-12: the name sent; v13+: unused (the name is looked up from `topic_id` per read).
    topic: String,
    topic_id: Uuid,
    partition: i32,
    fetch_offset: i64,
    max_bytes: i32,
    current_leader_epoch: i32,
    last_fetched_epoch: i32,
    /// The caller may not read it (ACLs): answered TOPIC_AUTHORIZATION_FAILED.
    denied: bool,
    /// The local replica found for it last (from the session, or by the first read).
    part: Resolved,
}

/// How the response relates to a fetch session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SessionMode {
    /// No session: full response, session id 0.
    None,
    /// Open a session when answering (full response).
    New,
    /// An incremental request of session `id`: only partitions with news.
    Incremental { id: i32, epoch: i32 },
}

/// A Fetch waiting for data.
#[allow(clippy::struct_excessive_bools)] // independent facts of one request, each named
pub struct PendingFetch {
    targets: Vec<Target>,
    mode: SessionMode,
    replica_id: i32,
    min_bytes: i32,
    max_bytes: i32,
    /// The consumer's rack (v11+; empty: none).
    rack_id: String,
    /// isolation_level 1: read up to the last stable offset.
    read_committed: bool,
    version: i16,
    correlation_id: i32,
    peer: String,
    /// The network loop's id of the connection (a session opened by the answer is its).
    conn: u64,
    /// Leader hints (KIP-951) may be sent: the request came in on the inter-broker listener.
    hints: bool,
    pub deadline: Instant,
    /// The partitions it waits on.
    pub waiting_on: Vec<Arc<Partition>>,
    /// A consumer under a `consumer_byte_rate` quota: its (user, client id).
    quota: Option<(String, String)>,
    /// The throttle time of the answer (client quotas), once answered.
    pub throttle_ms: i32,
    /// A consumer under a `request_percentage` quota: its handling time (quota.rs).
    request_clock: Option<RequestClock>,
    /// A follower's session (the one it opens, for a full request): its changes, read by a
    /// round that reads only loud partitions (`session_changes.rs`).
    changes: Option<Arc<SessionChanges>>,
    /// The caller may read nothing (a follower without CLUSTER_ACTION).
    denied: bool,
    /// How many partitions its session holds (incremental requests; else 0).
    session_partitions: usize,
    /// A remote read made it wait (its deadline was pushed to `remote.fetch.max.wait.ms`).
    remote_waited: bool,
    /// The partitions whose remote bytes it waits for, with their `remote_loads` count as
    /// it read them (`raced`).
    remote_seen: Vec<(Arc<Partition>, u64)>,
    /// A local read found the log start moved past its offset (retention deleted the
    /// segment between the check and the read, as tiering allows once it is copied): read
    /// again now, which decides again (the copies, or OFFSET_OUT_OF_RANGE). Kafka too checks
    /// a local read's OFFSET_OUT_OF_RANGE against the copies.
    log_start_moved: bool,
}

/// Kafka's request quota for a consumer's fetch: who, and how long handling it took so far
/// (each pass: the first from the network thread's read of the frame, a woken one from the
/// start of its `try_complete`; the time parked is not counted, as in Kafka's purgatory).
struct RequestClock {
    user: String,
    client_id: String,
    /// The pass under way started then.
    since: Option<Instant>,
    spent: Duration,
}

/// How long a fetch waits for a read of a table's data files (the table as the tier), when
/// no remote store sets `remote.fetch.max.wait.ms` (its default).
const TABLE_READ_WAIT: Duration = Duration::from_millis(500);

/// Where a read below the local log start goes.
enum BelowLocal<'a> {
    /// The table's data files (the table as the tier).
    Table(&'a Arc<TableTierView>),
    /// The copied segments (tiered storage).
    Copies(&'a Arc<RemoteLogView>),
}

/// One partition's read from remote storage (or the table as the tier).
enum RemoteOutcome {
    /// Records of this many bytes are in the answer.
    Read(u64),
    /// The bytes are being fetched from the store; the partition wakes the fetch.
    Pending,
    /// The partition is answered with an error.
    Error,
}

/// What serving a Fetch produced.
pub enum Outcome {
    /// The response, and the throttle time (ms) it carries (client quotas).
    Done(Vec<Chunk>, i32),
    Wait(Box<PendingFetch>),
}

/// Aborted transactions as a read_committed answer lists them (the log's or a remote copy's).
fn aborted_of(aborted: Vec<crate::producer_state::AbortedTxn>) -> Vec<AbortedTransaction> {
    aborted
        .into_iter()
        .map(|a| AbortedTransaction { producer_id: a.producer_id, first_offset: a.first_offset, ..Default::default() })
        .collect()
}

fn target_of(topic: &str, topic_id: Uuid, p: &FetchPartition, version: i16) -> Target {
    Target {
        topic: topic.to_owned(),
        topic_id,
        partition: p.partition,
        fetch_offset: p.fetch_offset,
        max_bytes: p.partition_max_bytes,
        current_leader_epoch: if version >= 9 { p.current_leader_epoch } else { -1 },
        last_fetched_epoch: if version >= 12 { p.last_fetched_epoch } else { -1 },
        denied: false,
        part: Resolved::default(),
    }
}

fn target_of_cached(c: &CachedPartition) -> Target {
    Target {
        topic: c.topic.clone(),
        topic_id: c.topic_id,
        partition: c.partition,
        fetch_offset: c.fetch_offset,
        max_bytes: c.max_bytes,
        current_leader_epoch: c.current_leader_epoch,
        last_fetched_epoch: c.last_fetched_epoch,
        denied: false,
        part: c.part.clone(),
    }
}

fn cached_of(t: &Target) -> CachedPartition {
    CachedPartition {
        topic: t.topic.clone(),
        topic_id: t.topic_id,
        partition: t.partition,
        fetch_offset: t.fetch_offset,
        max_bytes: t.max_bytes,
        current_leader_epoch: t.current_leader_epoch,
        last_fetched_epoch: t.last_fetched_epoch,
        high_watermark: -1,
        last_stable_offset: -1,
        log_start_offset: -1,
        part: t.part.clone(),
        quiet: false,
    }
}

/// The partitions to read and the session mode, or a top-level session error code. A
/// follower's incremental round reads only the session's loud partitions (`session_changes.rs`).
fn resolve(
    sessions: &mut FetchSessionCache,
    req: &FetchRequest,
    version: i16,
    conn: u64,
    replica_id: i32,
) -> Result<(Vec<Target>, SessionMode), i16> {
    let listed = || {
        req.topics
            .iter()
            .flat_map(|t| {
                let id = if version >= TOPIC_ID_VERSION { t.topic_id } else { Uuid::default() };
                t.partitions.iter().map(move |p| target_of(&t.topic, id, p, version))
            })
            .collect::<Vec<_>>()
    };
    let (id, epoch) = (req.session_id, req.session_epoch);
    if version < 7 || epoch == FINAL_EPOCH {
        if id != 0 {
            sessions.remove(id);
        }
        return Ok((listed(), SessionMode::None));
    }
    if epoch == INITIAL_EPOCH {
        if id != 0 {
            sessions.remove(id);
        }
        return Ok((listed(), SessionMode::New));
    }
    if id == 0 {
        return Err(code::INVALID_FETCH_SESSION_EPOCH);
    }
    let session = sessions.lookup(id, epoch, conn).map_err(|e| match e {
        SessionError::NotFound => code::FETCH_SESSION_ID_NOT_FOUND,
        SessionError::InvalidEpoch => code::INVALID_FETCH_SESSION_EPOCH,
    })?;
    let gone: Vec<_> = req
        .forgotten_topics_data
        .iter()
        .flat_map(|f| {
            let id = if version >= TOPIC_ID_VERSION { f.topic_id } else { Uuid::default() };
            f.partitions.iter().map(move |p| session_key(id, &f.topic, *p))
        })
        .collect();
    session.take_changed();
    for c in session.forget(&gone) {
        if let (Some(part), true) = (&c.part.0, replica_id >= 0) {
            part.follower_left_session(replica_id);
        }
    }
    for t in listed() {
        session.upsert(cached_of(&t));
    }
    session.next_epoch = next_epoch(epoch);
    let targets = if session.changes.is_some() {
        let mut loud = session.loud().to_vec();
        loud.sort_unstable(); // session order: topics stay grouped in the answer
        loud.into_iter().map(|i| target_of_cached(&session.partitions[i])).collect()
    } else {
        session.partitions.iter().map(target_of_cached).collect()
    };
    Ok((targets, SessionMode::Incremental { id, epoch }))
}

/// `request_started`: when serving it began, if a `request_percentage` quota is set (quota.rs).
#[allow(clippy::too_many_arguments)] // the request, where it came from, and the request quota's clock
pub fn handle(
    table: &PartitionTable,
    sessions: &mut FetchSessionCache,
    r: &mut Reader,
    version: i16,
    correlation_id: i32,
    caller: &Caller,
    logs: &mut Vec<LogLine>,
    request_started: Option<Instant>,
) -> Result<Outcome, ProtocolError> {
    let peer = caller.peer;
    let req = FetchRequest::decode(r, version)?;
    let replica_id = if version >= 15 { req.replica_state.replica_id } else { req.replica_id };
    let (mut targets, mode) = match resolve(sessions, &req, version, caller.conn, replica_id) {
        Ok(x) => x,
        Err(c) => {
            let resp = FetchResponse { error_code: c, ..Default::default() };
            return Ok(Outcome::Done(frame_response(&resp, version, correlation_id)?, 0));
        }
    };
    let authorizer = table.authorizer();
    let mut denied = false;
    if authorizer.enabled() {
        // ACLs: a follower needs CLUSTER_ACTION on the cluster, a consumer READ on each topic.
        // Each denial is a line for the audit log (`Caller::denial`): once per topic.
        let cluster_ok = replica_id < 0 || caller.may(authorizer, resource::CLUSTER, CLUSTER_NAME, op::CLUSTER_ACTION);
        denied = !cluster_ok;
        if !cluster_ok {
            logs.push(caller.denial(op::CLUSTER_ACTION, resource::CLUSTER, CLUSTER_NAME, "Fetch"));
        }
        let mut reported: Vec<String> = Vec::new();
        for t in &mut targets {
            t.denied = !cluster_ok
                || (replica_id < 0
                    && topic_name(table, t, version).is_some_and(|name| {
                        let refused = !caller.may(authorizer, resource::TOPIC, &name, op::READ);
                        if refused && !reported.iter().any(|r| *r == *name) {
                            logs.push(caller.denial(op::READ, resource::TOPIC, &name, "Fetch"));
                            reported.push(name.into_owned());
                        }
                        refused
                    }));
        }
    }
    let mut changes = None;
    if replica_id >= 0 {
        // A follower's fetch offset is its log end offset (for the leader's HW). Its quiet
        // partitions count as fetched now too: the session's clock, set after the others.
        let now = super::partition::now_ms();
        changes = match mode {
            SessionMode::New => Some(SessionChanges::new(Arc::clone(table.wakeup()), now)),
            SessionMode::Incremental { id, .. } => sessions.get_mut(id).and_then(|s| s.changes.clone()),
            SessionMode::None => None,
        };
        for t in &mut targets {
            if let Ok(part) = replica(table, t, version, false) {
                part.record_follower_fetch(replica_id, t.fetch_offset, now);
                part.maybe_increment_hw();
            }
        }
        if let Some(c) = &changes {
            c.fetched(now);
        }
    }
    let wait = Duration::from_millis(u64::try_from(req.max_wait_ms.max(0)).unwrap_or(0));
    // Client quotas: consumers only (followers are not throttled); a response holds no more
    // than the quota allows over the windows (Kafka's getMaxValueInQuotaWindow).
    let quotas = table.client_quotas();
    let user = quota::user_of(caller.principal);
    let quota_max =
        if replica_id < 0 { quotas.max_value_in_window(quota::FETCH, user, caller.client_id) } else { None };
    let mut max_bytes = req.max_bytes;
    if let Some(limit) = quota_max {
        let limit = limit.clamp(1.0, f64::from(i32::MAX)) as i32;
        max_bytes = max_bytes.min(limit);
    }
    let mut pending = PendingFetch {
        targets,
        mode,
        replica_id,
        min_bytes: req.min_bytes,
        max_bytes,
        rack_id: if version >= 11 { req.rack_id } else { String::new() },
        read_committed: req.isolation_level == 1 && replica_id < 0,
        version,
        correlation_id,
        peer: peer.to_owned(),
        conn: caller.conn,
        hints: caller.takes_hints(),
        deadline: Instant::now() + wait,
        waiting_on: Vec::new(),
        quota: quota_max.map(|_| (user.to_owned(), caller.client_id.to_owned())),
        throttle_ms: 0,
        // followers are exempt from the request quota, as in Kafka
        request_clock: request_started.filter(|_| replica_id < 0).map(|since| RequestClock {
            user: user.to_owned(),
            client_id: caller.client_id.to_owned(),
            since: Some(since),
            spent: Duration::ZERO,
        }),
        changes,
        denied,
        session_partitions: match mode {
            SessionMode::Incremental { id, .. } => sessions.get_mut(id).map_or(0, |s| s.partitions.len()),
            _ => 0,
        },
        remote_waited: false,
        remote_seen: Vec::new(),
        log_start_moved: false,
    };
    match pending.try_complete(table, sessions, false, logs)? {
        Some(chunks) => Ok(Outcome::Done(chunks, pending.throttle_ms)),
        None => Ok(Outcome::Wait(Box::new(pending))),
    }
}

/// The local replica `t` reads, checked as `PartitionTable::replica_for` checks it: the one
/// found for it last while the table still has it (no lookup by name or id per read), else
/// looked up by name (v4-12) or topic id (v13+) and remembered in `t`.
fn replica(
    table: &PartitionTable,
    t: &mut Target,
    version: i16,
    follower_ok: bool,
) -> Result<Arc<Partition>, NotServed> {
    if let Some(part) = t.part.0.as_ref().filter(|p| !p.is_removed()) {
        return PartitionTable::check_replica(Arc::clone(part), t.current_leader_epoch, follower_ok);
    }
    t.part.0 = None;
    let name = topic_name(table, t, version).ok_or(NotServed::UnknownTopic)?.into_owned();
    let Some(part) = table.get(&name, t.partition).filter(|p| !p.is_removed()) else {
        return Err(table.not_here(&name, t.partition));
    };
    t.part.0 = Some(Arc::clone(&part));
    PartitionTable::check_replica(part, t.current_leader_epoch, follower_ok)
}

/// The topic name a target reads: as sent (v4-12, borrowed: no copy per read) or the
/// image's name for its id (v13+).
fn topic_name<'a>(table: &PartitionTable, t: &'a Target, version: i16) -> Option<Cow<'a, str>> {
    if version >= TOPIC_ID_VERSION {
        table.topic_name(&t.topic_id).map(Cow::Owned)
    } else {
        Some(Cow::Borrowed(&t.topic))
    }
}

impl PendingFetch {
    pub fn is_follower(&self) -> bool {
        self.replica_id >= 0
    }

    /// The fetching follower's id (-1: a consumer).
    pub fn replica_id(&self) -> i32 {
        self.replica_id
    }

    /// How many partitions the fetcher's round covers: what it reads here, or for an
    /// incremental request all of its session's (the follower's side of a round goes over
    /// every partition it follows: `replica_fetcher.rs`).
    pub fn partitions(&self) -> usize {
        self.targets.len().max(self.session_partitions)
    }

    /// The changes of the follower session an incremental fetch reads (`session_changes.rs`):
    /// when parked, they wake it too. (A full request reads, and waits on, every partition.)
    pub fn changes(&self) -> Option<&Arc<SessionChanges>> {
        self.changes.as_ref().filter(|_| matches!(self.mode, SessionMode::Incremental { .. }))
    }

    /// The partition at `at` of follower session `s`, read settled as `t` and its answer
    /// recorded there, is read again only when it changes (if the follower is still at the
    /// LEO: `Partition::follower_quiet`).
    fn go_quiet(&self, s: &mut Session, at: usize, t: &Target) {
        let (Some(changes), Some(part)) = (&self.changes, &t.part.0) else { return };
        if part.follower_quiet(self.replica_id, changes.clock()) {
            s.set_quiet(at);
        }
    }

    /// The partitions of its session that changed since it was resolved are read too.
    fn take_changed(&mut self, sessions: &mut FetchSessionCache) {
        let SessionMode::Incremental { id, epoch } = self.mode else { return };
        if self.changes.is_none() {
            return;
        }
        let Some(s) = sessions.get_mut(id).filter(|s| s.next_epoch == next_epoch(epoch)) else {
            // replaced or moved on meanwhile: it answers the targets it has (the session's
            // changes are for its next request), and they no longer wake it
            self.changes = None;
            return;
        };
        for at in s.take_changed() {
            let mut t = target_of_cached(&s.partitions[at]);
            t.denied = self.denied;
            self.targets.push(t);
        }
    }

    /// The identities (`expected_followers::identity`) of the local replicas its partitions
    /// resolved to (after `try_complete`).
    /// A consumer's read below the local log start, from the copied segments: the segment
    /// holding the offset, or the next ones if it holds nothing at or after it (compaction).
    #[allow(clippy::too_many_arguments)]
    fn read_remote(
        &self,
        table: &PartitionTable,
        part: &Arc<Partition>,
        view: &RemoteLogView,
        offset: i64,
        budget: u64,
        min_one: bool,
        data: &mut PartitionData,
        logs: &mut Vec<LogLine>,
    ) -> RemoteOutcome {
        const FROM: &str = "remote storage";
        let Some(reader) = table.remote_reader() else {
            return self.read_failed(part, offset, FROM, "this broker has no remote storage", data, logs);
        };
        let waiter: Weak<dyn ReadWaiter> = Arc::downgrade(part) as Weak<dyn ReadWaiter>;
        let mut at = offset;
        for _ in 0..view.segments.len() {
            let Some(seg) = view.find(at) else { break };
            match reader.read(seg, at, budget, min_one, self.read_committed, &waiter) {
                RemoteRead::Ready { records, aborted } => {
                    let n = records.len() as u64;
                    if self.read_committed {
                        data.aborted_transactions = Some(aborted_of(aborted));
                    }
                    data.records = Some(Records::Bytes(records));
                    return RemoteOutcome::Read(n);
                }
                RemoteRead::Pending => return RemoteOutcome::Pending,
                RemoteRead::Empty => at = seg.end_offset + 1,
                RemoteRead::Failed(why) => {
                    reader.count_error();
                    return self.read_failed(part, offset, FROM, &why, data, logs);
                }
            }
        }
        RemoteOutcome::Read(0)
    }

    /// A consumer's read below the local log start from the table's data files (the table as
    /// the tier; table/tier_reader.rs).
    #[allow(clippy::too_many_arguments)]
    fn read_table(
        &self,
        part: &Arc<Partition>,
        view: &Arc<TableTierView>,
        offset: i64,
        budget: u64,
        min_one: bool,
        data: &mut PartitionData,
        logs: &mut Vec<LogLine>,
    ) -> RemoteOutcome {
        let waiter: Weak<dyn ReadWaiter> = Arc::downgrade(part) as Weak<dyn ReadWaiter>;
        let at = TierPartition { name: Arc::from(part.name()), partition: part.index, view: Arc::clone(view) };
        match part.table_reader.read(&at, offset, budget, min_one, &waiter) {
            TierRead::Ready(records) => {
                let n = records.len() as u64;
                if self.read_committed {
                    data.aborted_transactions = Some(Vec::new()); // the table holds committed records only
                }
                data.records = Some(Records::Bytes(records));
                RemoteOutcome::Read(n)
            }
            TierRead::Pending => RemoteOutcome::Pending,
            TierRead::Past => RemoteOutcome::Read(0),
            TierRead::Failed(why) => self.read_failed(part, offset, "its Iceberg table", &why, data, logs),
        }
    }

    /// A read below the local log start (`from` remote storage or the table) failed: the
    /// partition answers KAFKA_STORAGE_ERROR, and the log names the partition, offset and why.
    fn read_failed(
        &self,
        part: &Partition,
        offset: i64,
        from: &str,
        why: &str,
        data: &mut PartitionData,
        logs: &mut Vec<LogLine>,
    ) -> RemoteOutcome {
        data.error_code = code::KAFKA_STORAGE_ERROR;
        data.aborted_transactions = None;
        logs.push(LogLine::new(
            LogLine::ERROR,
            format!("fetch from {}: reading {} at offset {offset} from {from} failed: {why}", self.peer, part.name()),
        ));
        RemoteOutcome::Error
    }

    /// It must read again now rather than wait: remote bytes it waits for arrived after it
    /// read and before it parked (the wake-up came before its waiter was registered), or a
    /// local read raced the log start (`log_start_moved`).
    pub fn raced(&self) -> bool {
        self.log_start_moved || self.remote_seen.iter().any(|(p, seen)| p.remote_loads() != *seen)
    }

    pub fn resolved(&self) -> impl Iterator<Item = usize> + '_ {
        self.targets.iter().filter_map(|t| t.part.0.as_deref().map(super::expected_followers::identity))
    }

    /// Reads every partition; the response if there is enough data, an error, nothing to
    /// wait on, or `expired`; otherwise `None` with `waiting_on` set.
    pub fn try_complete(
        &mut self,
        table: &PartitionTable,
        sessions: &mut FetchSessionCache,
        expired: bool,
        logs: &mut Vec<LogLine>,
    ) -> Result<Option<Vec<Chunk>>, ProtocolError> {
        if let Some(c) = &mut self.request_clock {
            c.since.get_or_insert_with(Instant::now);
        }
        self.take_changed(sessions);
        let follower = self.replica_id >= 0;
        let response_max = u64::try_from(self.max_bytes.max(0)).unwrap_or(0);
        let mut total: u64 = 0;
        let mut errors = false;
        let mut readable = Vec::new();
        let mut hinted = Vec::new();
        let by_id = self.version >= TOPIC_ID_VERSION;
        // KIP-392: consumers of v11+ may read from followers; leaders may send them elsewhere
        let follower_reads = !follower && self.version >= 11;
        let racks = if follower_reads && !self.rack_id.is_empty() { table.racks_for_selection() } else { None };
        let mut datas = Vec::with_capacity(self.targets.len());
        let mut served: Vec<(Arc<Partition>, u64)> = Vec::new();
        let version = self.version;
        let changes = self.changes.as_ref();
        let found: Vec<Option<Result<Arc<Partition>, NotServed>>> = self
            .targets
            .iter_mut()
            .map(|t| {
                (!t.denied).then(|| {
                    let found = replica(table, t, version, follower_reads);
                    // a follower's session watches what it reads before reading it (a round
                    // reads only its loud partitions: few, and `watch` does nothing twice)
                    if let (Some(c), Some(p)) = (changes, &t.part.0) {
                        p.watch(c);
                    }
                    found
                })
            })
            .collect();
        // Per target: read by a follower that has everything (no records, no error), so its
        // partition may go quiet in the session.
        let mut settled = vec![false; self.targets.len()];
        // some partition waits for bytes from remote storage
        let mut remote_pending = false;
        let mut remote_seen = Vec::new();
        let mut remote_served = (0u64, 0u64); // (partition reads, bytes) from remote storage
        let mut log_start_moved = false;
        for ((t, found), settled) in self.targets.iter().zip(found).zip(&mut settled) {
            let mut data = PartitionData {
                partition_index: t.partition,
                high_watermark: -1,
                last_stable_offset: -1,
                log_start_offset: -1,
                preferred_read_replica: -1,
                records: Some(Records::Bytes(Bytes::new())),
                aborted_transactions: Some(Vec::new()),
                ..Default::default()
            };
            let Some(found) = found else {
                data.error_code = code::TOPIC_AUTHORIZATION_FAILED;
                data.aborted_transactions = None;
                errors = true;
                datas.push(data);
                continue;
            };
            match found {
                Err(why) => {
                    data.error_code = why.code(by_id);
                    data.aborted_transactions = None;
                    errors = true;
                    if let Some(l) = why.current_leader().filter(|_| self.version >= 12 && self.hints) {
                        data.current_leader = LeaderIdAndEpoch {
                            leader_id: l.leader,
                            leader_epoch: l.leader_epoch,
                            ..Default::default()
                        };
                        hinted.push(l.leader);
                    }
                }
                Ok(part) => {
                    let lg = &part.log;
                    let hw = lg.high_watermark();
                    let leo = lg.log_end_offset();
                    let log_start = lg.log_start_offset();
                    let lso = lg.last_stable_offset();
                    // tiered storage: copied segments below the local log start
                    let below = part.below_local();
                    let remote = below.remote.filter(|r| !r.segments.is_empty());
                    let mut start = remote.as_ref().map_or(log_start, |r| r.log_start_offset.min(log_start));
                    // the table as the tier: a consumer reads below the local log start from
                    // the table; a follower follows the local log start (its fetch below it
                    // is out of range and restarts its log there)
                    let tier_view = below.table_tier.filter(|_| !follower);
                    let tier_pending = tier_view.as_ref().is_some_and(|t| t.pending);
                    let tier = tier_view.filter(|t| t.log_start_offset() >= 0);
                    if let Some(tv) = &tier {
                        start = start.min(tv.log_start_offset());
                    }
                    // below the local log start, past the table's last record (control records
                    // or aborted ones between): the local log from its start answers
                    let at = if tier.as_ref().is_some_and(|tv| {
                        t.fetch_offset >= start && t.fetch_offset < log_start && tv.window(t.fetch_offset).is_none()
                    }) {
                        log_start
                    } else {
                        t.fetch_offset
                    };
                    // below the local log start: the table (the table as the tier) or the
                    // copied segments (tiered storage)
                    let below_local = if at < start || at >= log_start {
                        None
                    } else if let Some(tv) = &tier {
                        Some(BelowLocal::Table(tv))
                    } else {
                        remote.as_ref().map(BelowLocal::Copies)
                    };
                    data.high_watermark = hw;
                    data.last_stable_offset = lso;
                    data.log_start_offset = start;
                    let upper = if follower {
                        leo
                    } else if self.read_committed {
                        lso
                    } else {
                        hw
                    };
                    let budget = u64::try_from(t.max_bytes.max(0)).unwrap_or(0).min(response_max.saturating_sub(total));
                    let diverging = (t.last_fetched_epoch >= 0)
                        .then(|| lg.end_offset_for_epoch(t.last_fetched_epoch))
                        .filter(|&(epoch, end)| epoch < t.last_fetched_epoch || end < t.fetch_offset);
                    let elsewhere =
                        racks.as_ref().map_or(-1, |r| part.preferred_read_replica(t.fetch_offset, &self.rack_id, r));
                    if elsewhere >= 0 {
                        data.preferred_read_replica = elsewhere;
                        errors = true; // answer now: the consumer moves to that replica
                    } else if let Some((epoch, end_offset)) = diverging {
                        data.diverging_epoch.epoch = epoch;
                        data.diverging_epoch.end_offset = end_offset;
                        errors = true; // answer now: the fetcher must truncate first
                    } else if tier_pending && t.fetch_offset < log_start && t.fetch_offset >= 0 {
                        // a new leader is listing the table's files: no records now, and no
                        // error (the consumer fetches again)
                    } else if let Some(below) = below_local {
                        let copies = matches!(below, BelowLocal::Copies(_));
                        if follower && copies {
                            // Kafka's way: the follower rebuilds from the remote metadata
                            data.error_code = code::OFFSET_MOVED_TO_TIERED_STORAGE;
                            data.aborted_transactions = None;
                            errors = true;
                        } else if copies && table.remote_reader().is_some_and(|r| r.fetch_quota_exceeded()) {
                            // remote.log.manager.fetch.max.bytes.per.second used up: no records
                            // for this partition now (Kafka's KIP-956); the consumer fetches again
                        } else if !(budget == 0 && total > 0) {
                            let seen = part.remote_loads();
                            let outcome = match below {
                                BelowLocal::Table(tv) => {
                                    self.read_table(&part, tv, at, budget, total == 0, &mut data, logs)
                                }
                                BelowLocal::Copies(r) => {
                                    self.read_remote(table, &part, r, at, budget, total == 0, &mut data, logs)
                                }
                            };
                            match outcome {
                                RemoteOutcome::Read(n) => {
                                    total += n;
                                    served.push((Arc::clone(&part), n));
                                    if copies {
                                        remote_served.0 += u64::from(n > 0);
                                        remote_served.1 += n;
                                    }
                                }
                                RemoteOutcome::Pending => {
                                    remote_pending = true;
                                    remote_seen.push((Arc::clone(&part), seen));
                                }
                                RemoteOutcome::Error => errors = true,
                            }
                        }
                        readable.push(part);
                        datas.push(data);
                        continue;
                    } else if at < start || at > leo {
                        data.error_code = code::OFFSET_OUT_OF_RANGE;
                        data.aborted_transactions = None;
                        errors = true;
                        logs.push(LogLine::new(
                            LogLine::INFO,
                            format!(
                                "fetch from {}: fetch offset {} of {} is outside [log start {start}, LEO {leo}]",
                                self.peer,
                                t.fetch_offset,
                                part.name()
                            ),
                        ));
                    } else if at < upper && !(budget == 0 && total > 0) {
                        match lg.read(at, budget, Some(upper), total == 0) {
                            Ok(Some(region)) if region.length > 0 => {
                                total += region.length;
                                served.push((Arc::clone(&part), region.length));
                                if self.read_committed {
                                    // only the aborts overlapping the returned batches (up to the
                                    // LSO if the segment went away meanwhile)
                                    let end = lg.offset_after(&region).ok().flatten().map_or(upper, |e| e.min(upper));
                                    data.aborted_transactions = Some(aborted_of(lg.aborted_transactions(at, end)));
                                }
                                data.records = Some(Records::File(region));
                            }
                            Ok(_) => {}
                            Err(LogError::OffsetOutOfRange { .. }) if lg.log_start_offset() > at => {
                                log_start_moved = true; // no records now; read again (`raced`)
                            }
                            Err(e) => {
                                // Per partition (the others are answered): a storage failure
                                // such as a segment file that cannot be reopened for lack of
                                // descriptors is KAFKA_STORAGE_ERROR, and the broker's fault.
                                data.error_code = error_code_for(&e);
                                data.aborted_transactions = None;
                                errors = true;
                                let ours = data.error_code == code::KAFKA_STORAGE_ERROR && !part.is_removed();
                                let level = if ours { LogLine::ERROR } else { LogLine::INFO };
                                logs.push(LogLine::new(
                                    level,
                                    format!("fetch from {}: reading {} failed: {e}", self.peer, part.name()),
                                ));
                            }
                        }
                    } else if follower && t.fetch_offset == leo {
                        *settled = true;
                    }
                    readable.push(part);
                }
            }
            datas.push(data);
        }
        let min_bytes = u64::try_from(self.min_bytes.max(0)).unwrap_or(0);
        // (a follower session's quiet partitions are waited on through its changes, even
        // when no loud one is left to read)
        let nothing_to_wait_on = readable.is_empty() && self.changes().is_none();
        let now = Instant::now();
        if remote_pending && !self.remote_waited {
            // a remote read waits up to remote.fetch.max.wait.ms, whatever the fetch's max wait
            self.remote_waited = true;
            let wait = table.remote_reader().map_or(TABLE_READ_WAIT, |rd| rd.fetch_max_wait);
            self.deadline = self.deadline.max(now + wait);
        }
        let wait_remote = remote_pending && !errors && !expired && now < self.deadline;
        self.remote_seen = remote_seen;
        self.log_start_moved = log_start_moved;
        if wait_remote || !(total >= min_bytes || errors || nothing_to_wait_on || expired || now >= self.deadline) {
            self.waiting_on = readable;
            if let Some(c) = &mut self.request_clock {
                c.spent += c.since.take().map_or(Duration::ZERO, |t| now.saturating_duration_since(t));
            }
            return Ok(None);
        }
        if let (Some(reader), true) = (table.remote_reader(), remote_served.0 > 0) {
            reader.count_served(remote_served.0, remote_served.1);
        }
        for (part, n) in served {
            let counter = if follower { &part.stats.replication_bytes_out } else { &part.stats.bytes_out };
            super::metrics::PartitionStats::add(counter, n);
        }
        // Answer: which partitions go in, and what the session remembers.
        let mut session_id = 0;
        let mut include = vec![true; datas.len()];
        match self.mode {
            SessionMode::None => {}
            SessionMode::New => {
                let cached = self
                    .targets
                    .iter()
                    .zip(&datas)
                    .map(|(t, d)| CachedPartition {
                        high_watermark: d.high_watermark,
                        last_stable_offset: d.last_stable_offset,
                        log_start_offset: d.log_start_offset,
                        ..cached_of(t)
                    })
                    .collect();
                session_id = sessions.create(cached, self.conn, self.changes.clone());
                if let Some(s) = sessions.get_mut(session_id).filter(|_| session_id != 0) {
                    for (t, settled) in self.targets.iter().zip(&settled) {
                        if let Some(at) =
                            s.position(&session_key(t.topic_id, &t.topic, t.partition)).filter(|_| *settled)
                        {
                            self.go_quiet(s, at, t);
                        }
                    }
                    s.drop_quiet();
                }
            }
            SessionMode::Incremental { id, epoch } => {
                // (unless the session was replaced or moved on meanwhile)
                if let Some(s) = sessions.get_mut(id).filter(|s| s.next_epoch == next_epoch(epoch)) {
                    // The targets were made from the session in its order, and no request
                    // of it came in since (the epoch): the i-th target is its i-th partition.
                    let in_order = s.partitions.len() == self.targets.len();
                    for (i, (t, d)) in self.targets.iter().zip(&datas).enumerate() {
                        let same = |c: &CachedPartition| {
                            c.partition == t.partition && c.topic_id == t.topic_id && c.topic == t.topic
                        };
                        let at = if in_order && same(&s.partitions[i]) {
                            Some(i)
                        } else {
                            s.position(&session_key(t.topic_id, &t.topic, t.partition))
                        };
                        let Some(at) = at else { continue };
                        s.set_resolved(at, &t.part);
                        let c = &mut s.partitions[at];
                        let news = d.error_code != code::NONE
                            || d.preferred_read_replica >= 0
                            || d.records.as_ref().is_some_and(|r| !r.is_empty())
                            || c.high_watermark != d.high_watermark
                            || c.last_stable_offset != d.last_stable_offset
                            || c.log_start_offset != d.log_start_offset;
                        include[i] = news;
                        if news {
                            c.high_watermark = d.high_watermark;
                            c.last_stable_offset = d.last_stable_offset;
                            c.log_start_offset = d.log_start_offset;
                        }
                        if settled[i] {
                            self.go_quiet(s, at, t);
                        }
                    }
                    s.drop_quiet();
                    session_id = id;
                }
            }
        }
        let mut topics: Vec<FetchableTopicResponse> = Vec::new();
        for ((t, d), keep) in self.targets.iter().zip(datas).zip(include) {
            if !keep {
                continue;
            }
            match topics.last_mut() {
                Some(last) if last.topic == t.topic && last.topic_id == t.topic_id => last.partitions.push(d),
                _ => topics.push(FetchableTopicResponse {
                    topic: if by_id { String::new() } else { t.topic.clone() },
                    topic_id: t.topic_id,
                    partitions: vec![d],
                    ..Default::default()
                }),
            }
        }
        // Client quotas: the record bytes sent count toward the consumer's rate; the answer
        // carries the throttle time, and the network thread mutes the connection for it.
        if let Some((user, client_id)) = &self.quota {
            self.throttle_ms =
                table.client_quotas().record(quota::FETCH, user, client_id, total, super::partition::now_ms());
        }
        // Request quota: the time handling it took (the larger throttle is the answer's, as Kafka).
        if let Some(c) = &mut self.request_clock {
            let took = c.spent + c.since.take().map_or(Duration::ZERO, |t| now.saturating_duration_since(t));
            let nanos = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
            let ms = table.client_quotas().record_request(&c.user, &c.client_id, nanos, super::partition::now_ms());
            self.throttle_ms = self.throttle_ms.max(ms);
        }
        let mut resp =
            FetchResponse { session_id, responses: topics, throttle_time_ms: self.throttle_ms, ..Default::default() };
        if self.version >= 16 && !hinted.is_empty() {
            resp.node_endpoints = table
                .endpoints_of(hinted)
                .into_iter()
                .map(|(node_id, host, port, rack)| NodeEndpoint { node_id, host, port, rack, ..Default::default() })
                .collect();
        }
        frame_response(&resp, self.version, self.correlation_id).map(Some)
    }
}
