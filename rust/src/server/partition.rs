//! The partitions this broker holds, as the data path sees them: the log plus the leader
//! state the control plane (Python) sets, and the high watermark rule.
//!
//! # State (Kafka's names)
//! - `leader`, `leader_epoch`, `isr`, `min_insync_replicas`: set by the control plane from the
//!   metadata image (`Partition::update`); the data path only reads them.
//! - follower state (Kafka's `ReplicaState` on the leader): each follower's LEO (its fetch
//!   offset), when it last fetched, and when it was last caught up: at a fetch at or past the
//!   leader's LEO of that moment, or — Kafka's rule — at the time of its previous fetch if this
//!   fetch reached the LEO the leader had then. Reset when the leader epoch changes (a new
//!   leadership: ISR members count as caught up now). The ISR manager (Python) reads it
//!   (`follower_states`) to shrink and expand the ISR. While the partition is quiet in the
//!   follower's fetch session (not read per round, `session_changes.rs`) the follower counts
//!   as fetched and caught up at each fetch of that session: its state links the session's
//!   clock, until the LEO moves (`offsets_changed`), the follower fetches the partition again
//!   or its session drops it.
//! - high watermark: stored in the `Log`; `maybe_increment_hw` sets it to the minimum LEO over
//!   the ISR (the leader's own LEO counts for itself), never lower than before, and not at all
//!   while the ISR is below `min_insync_replicas` (Kafka's strict min ISR rule).
//!
//! # Invariants
//! log start offset <= HW <= LEO; consumers never read at or above the HW.
//!
//! # Waiting
//! A parked request (a Fetch long poll, an acks=all Produce) registers its id with each
//! partition it waits on (a follower's session is told of changes to its quiet partitions
//! instead: `watch`, `session_changes.rs`). When the HW moves, the state changes or the partition is removed,
//! the partition hands those ids to `Wakeup`, which the network loop drains; the request then
//! re-checks its own condition (spurious wake-ups are harmless). A follower's fetch waits for
//! the LEO instead (`add_waiter(id, true)`): it is woken when the leader appends.
//!
//! # The cluster view
//! Besides its own replicas the table holds what the metadata image says about *every*
//! partition (leader and leader epoch, by topic name and topic id) and every registered
//! broker's client endpoint, changed by the control plane at each metadata delta
//! (`update_metadata`: only the topics that changed). The data path uses it to answer a request for a partition this broker
//! does not lead: UNKNOWN_TOPIC_OR_PARTITION / UNKNOWN_TOPIC_ID only when the partition does
//! not exist anywhere, otherwise NOT_LEADER_OR_FOLLOWER naming the current leader and its
//! endpoint (KIP-951), so the client moves at once instead of refreshing metadata.
//!
//! Thread-safety: every method takes `&self`; the control plane calls them from Python
//! threads, the data path from the network thread.

use std::collections::HashMap;
use std::sync::atomic::{fence, AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, RwLock, Weak};

use mio::Waker;

use super::expected_followers::{identity, NewLeadership};
use super::session_changes::{FetchClock, SessionChanges};
use crate::log::{Log, OffsetsListener};
use crate::protocol::Uuid;
use crate::remote::cache::ReadWaiter;
use crate::remote::{RemoteLogView, RemoteReader};
use crate::table::tier_reader::{TableReader, TableTierView};

/// What a partition's fetch reads below its local log start (both `None` for most topics; a
/// topic never has both: tiered storage's copier skips Iceberg topics).
#[derive(Clone, Default)]
pub struct BelowLocalViews {
    /// Tiered storage: the copied segments (set by the control plane from the metadata log);
    /// `None` when the topic is not tiered.
    pub remote: Option<Arc<RemoteLogView>>,
    /// The table as the tier (`iceberg.enable` with `remote.storage.enable`): the table's data
    /// files of this partition (set by the control plane on the leader); `None` otherwise.
    pub table_tier: Option<Arc<TableTierView>>,
}

/// Bytes of table windows cached for fetches below the local log start (the table as the tier).
pub const TABLE_TIER_CACHE_BYTES: u64 = 64 << 20;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Ids of parked requests to re-check, for the network loop. Until a network loop attaches
/// its waker (a table used without a server, as in control-plane tests) nothing can be
/// parked, and wake-ups go nowhere.
#[derive(Default)]
pub struct Wakeup {
    woken: Mutex<Vec<u64>>,
    /// Watched partitions whose HW moved, for the control plane (`Partition::watch_high_watermark`).
    hw_moved: Mutex<Vec<(Arc<str>, i32)>>,
    /// Leaderships this broker took, for the network loop (`expected_followers.rs`).
    led: Mutex<Vec<NewLeadership>>,
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

    /// Queues "the HW of `topic`-`index` moved" for the control plane and pokes the loop.
    fn high_watermark_moved(&self, topic: Arc<str>, index: i32) {
        let Some(waker) = self.waker.get() else { return };
        lock(&self.hw_moved).push((topic, index));
        let _ = waker.wake();
    }

    /// Queues "this broker became leader of `p`" and pokes the loop, when the ISR has other
    /// members (they are expected to add it to their fetches).
    fn became_leader(&self, p: &Partition, isr: &[i32]) {
        let Some(waker) = self.waker.get() else { return };
        let followers: Vec<i32> = isr.iter().copied().filter(|r| *r != p.node_id).collect();
        if followers.is_empty() {
            return;
        }
        lock(&self.led).push(NewLeadership { replica: identity(p), followers });
        let _ = waker.wake();
    }

    /// The leaderships taken since the last call.
    pub fn take_new_leaderships(&self) -> Vec<NewLeadership> {
        std::mem::take(&mut *lock(&self.led))
    }

    /// The watched partitions whose HW moved since the last call, once each.
    pub fn take_hw_moved(&self) -> Vec<(Arc<str>, i32)> {
        let mut v = std::mem::take(&mut *lock(&self.hw_moved));
        v.sort_unstable();
        v.dedup();
        v
    }
}

/// What the leader knows of one follower (times in ms since the epoch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FollowerState {
    pub leo: i64,
    pub last_fetch_ms: i64,
    pub last_caught_up_ms: i64,
    /// The leader's LEO at the follower's last fetch.
    pub leader_leo_at_last_fetch: i64,
}

impl FollowerState {
    /// A follower not heard from yet, counted as caught up at `caught_up_ms` (-1: never).
    fn unknown(caught_up_ms: i64) -> Self {
        FollowerState { leo: -1, last_fetch_ms: -1, last_caught_up_ms: caught_up_ms, leader_leo_at_last_fetch: -1 }
    }
}

/// Follower state at the start of a leadership: the ISR's other members caught up now, so
/// the ISR is not shrunk before they have had time to fetch.
fn fresh_followers(isr: &[i32], node_id: i32) -> Followers {
    let now = now_ms();
    Followers::from(isr.iter().filter(|r| **r != node_id).map(|r| (*r, FollowerState::unknown(now))))
}

/// The leader's state of each follower, by replica id: as many as the replication factor, so
/// a vector searched in order (a hash map's hashing was a visible share of a follower round
/// over tens of thousands of partitions).
struct Followers(Vec<Follower>);

struct Follower {
    replica: i32,
    state: FollowerState,
    /// While the partition is quiet in the follower's fetch session (`session_changes.rs`):
    /// the session's clock, the follower's latest fetch and catch-up of this partition.
    quiet: Option<Arc<FetchClock>>,
}

impl Follower {
    /// The state with a quiet link counted in: fetched and caught up at the session's last fetch.
    fn effective(&self) -> FollowerState {
        let mut f = self.state;
        if let Some(clock) = &self.quiet {
            let t = clock.now_ms();
            f.last_fetch_ms = f.last_fetch_ms.max(t);
            f.last_caught_up_ms = f.last_caught_up_ms.max(t);
        }
        f
    }

    /// Ends a quiet link, keeping its time.
    fn settle(&mut self) {
        self.state = self.effective();
        self.quiet = None;
    }
}

impl Followers {
    fn from(states: impl Iterator<Item = (i32, FollowerState)>) -> Self {
        Followers(states.map(|(replica, state)| Follower { replica, state, quiet: None }).collect())
    }

    fn get(&self, replica: i32) -> Option<&FollowerState> {
        self.0.iter().find(|f| f.replica == replica).map(|f| &f.state)
    }

    /// The entry of `replica`, added as unknown if there is none.
    fn entry(&mut self, replica: i32) -> &mut Follower {
        let at = self.0.iter().position(|f| f.replica == replica).unwrap_or_else(|| {
            self.0.push(Follower { replica, state: FollowerState::unknown(-1), quiet: None });
            self.0.len() - 1
        });
        &mut self.0[at]
    }
}

pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
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
    followers: Mutex<Followers>,
    removed: AtomicBool,
    waiters: Mutex<Vec<u64>>,
    leo_waiters: Mutex<Vec<u64>>,
    /// The LEO the LEO waiters were last woken for.
    leo_announced: std::sync::atomic::AtomicI64,
    /// The control plane waits for this partition's HW (`watch_high_watermark`).
    watched: AtomicBool,
    wakeup: Arc<Wakeup>,
    /// Followers' fetch sessions holding this partition (`session_changes.rs`).
    watchers: Mutex<Vec<Weak<SessionChanges>>>,
    /// Bytes and records in and out (`metrics.rs`).
    pub stats: super::metrics::PartitionStats,
    /// What a fetch below the local log start reads: the copied segments or the table's data
    /// files (one lock, so a fetch reads both in one snapshot).
    below_local: RwLock<BelowLocalViews>,
    /// The broker's remote reader (its store), if tiered storage is on.
    pub remote_reader: Option<Arc<RemoteReader>>,
    /// Remote loads this partition's fetches waited for that have finished (see `remote_read_done`).
    remote_loads: std::sync::atomic::AtomicU64,
    /// The broker's reader of table data files (table/tier_reader.rs).
    pub table_reader: Arc<TableReader>,
}

impl ReadWaiter for Partition {
    /// Remote bytes a parked fetch waited for arrived: it reads again. The count goes up
    /// first, so a fetch that read before the bytes came and parks after they did sees it
    /// moved (`remote_loads`) and is not left waiting for a wake-up that already happened.
    fn remote_read_done(&self) {
        self.remote_loads.fetch_add(1, Ordering::SeqCst);
        self.wake_hw_waiters();
    }
}

impl Partition {
    /// How many remote loads waited on by this partition's fetches have finished.
    pub fn remote_loads(&self) -> u64 {
        self.remote_loads.load(Ordering::SeqCst)
    }

    /// The copied segments (tiered storage), if the topic is tiered.
    /// Both views below the local log start, as one snapshot (a fetch's read).
    pub fn below_local(&self) -> BelowLocalViews {
        self.below_local.read().unwrap_or_else(PoisonError::into_inner).clone()
    }

    pub fn remote(&self) -> Option<Arc<RemoteLogView>> {
        self.below_local.read().unwrap_or_else(PoisonError::into_inner).remote.clone()
    }

    /// Replaces the copied segments (`None`: the topic is not tiered); parked fetches read again.
    pub fn set_remote(&self, view: Option<RemoteLogView>) {
        self.below_local.write().unwrap_or_else(PoisonError::into_inner).remote = view.map(Arc::new);
        self.wake_hw_waiters();
    }

    /// The table's data files of this partition (the table as the tier), if set.
    pub fn table_tier(&self) -> Option<Arc<TableTierView>> {
        self.below_local.read().unwrap_or_else(PoisonError::into_inner).table_tier.clone()
    }

    /// Replaces the table's data files a fetch below the local log start reads (`None`: the
    /// table is not the tier); parked fetches read again.
    pub fn set_table_tier(&self, view: Option<TableTierView>) {
        self.below_local.write().unwrap_or_else(PoisonError::into_inner).table_tier = view.map(Arc::new);
        self.wake_hw_waiters();
    }

    /// The first offset a consumer may fetch: the remote log start when tiered segments
    /// reach below the local one, or the table's first offset when the table is the tier.
    pub fn log_start_offset(&self) -> i64 {
        let local = self.log.log_start_offset();
        let below = self.below_local();
        let start = match &below.remote {
            Some(r) if !r.segments.is_empty() => r.log_start_offset.min(local),
            _ => local,
        };
        match below.table_tier.map(|t| t.log_start_offset()) {
            Some(t) if t >= 0 => t.min(start),
            _ => start,
        }
    }

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

    /// New leader/epoch/ISR from the metadata image; the HW may move (a smaller ISR). A new
    /// leader epoch starts a new leadership: follower state is reset, ISR members caught up now.
    pub fn update(&self, state: LeaderState) {
        let fresh = {
            let mut st = self.state.write().unwrap_or_else(PoisonError::into_inner);
            let new_leadership = st.leader_epoch != state.leader_epoch || st.leader != state.leader;
            let fresh = new_leadership.then(|| fresh_followers(&state.isr, self.node_id));
            if new_leadership && state.leader == self.node_id {
                self.wakeup.became_leader(self, &state.isr);
            }
            *st = state;
            fresh
        };
        if let Some(fresh) = fresh {
            *lock(&self.followers) = fresh;
        }
        self.maybe_increment_hw();
        self.wake_everyone();
    }

    /// A follower fetched at `fetch_offset` (its LEO): its state moves (see the module doc).
    pub fn record_follower_fetch(&self, replica: i32, fetch_offset: i64, now_ms: i64) {
        let leader_leo = self.log.log_end_offset();
        let mut all = lock(&self.followers);
        let entry = all.entry(replica);
        entry.settle();
        let f = &mut entry.state;
        if fetch_offset >= leader_leo {
            f.last_caught_up_ms = now_ms;
        } else if f.leader_leo_at_last_fetch >= 0 && fetch_offset >= f.leader_leo_at_last_fetch {
            f.last_caught_up_ms = f.last_caught_up_ms.max(f.last_fetch_ms);
        }
        f.leo = fetch_offset;
        f.last_fetch_ms = now_ms;
        f.leader_leo_at_last_fetch = leader_leo;
    }

    /// Every follower the leader has state for: (replica id, state).
    pub fn follower_states(&self) -> Vec<(i32, FollowerState)> {
        let mut v: Vec<_> = lock(&self.followers).0.iter().map(|f| (f.replica, f.effective())).collect();
        v.sort_unstable_by_key(|(r, _)| *r);
        v
    }

    /// Session `changes` will read this partition only when it changes (`session_changes.rs`).
    pub fn watch(&self, changes: &Arc<SessionChanges>) {
        let mut w = lock(&self.watchers);
        w.retain(|s| s.strong_count() > 0);
        if !w.iter().any(|s| std::ptr::eq(s.as_ptr(), Arc::as_ptr(changes))) {
            w.push(Arc::downgrade(changes));
        }
    }

    /// `replica` is at this leader's LEO and its fetch session will not read the partition
    /// until it changes: it counts as fetched and caught up at each fetch of that session
    /// (`clock`). False, and nothing linked, if the LEO has moved past the follower since.
    pub fn follower_quiet(&self, replica: i32, clock: &Arc<FetchClock>) -> bool {
        let mut all = lock(&self.followers);
        let f = all.entry(replica);
        // LEO moves publish before they tell `offsets_changed`, which takes this lock: either
        // this sees the new LEO, or the link is made first and cut by that call.
        if f.state.leo < 0 || f.state.leo != self.log.log_end_offset() {
            return false;
        }
        f.quiet = Some(Arc::clone(clock));
        true
    }

    /// `replica`'s session no longer holds this partition: its quiet link (if any) ends.
    pub fn follower_left_session(&self, replica: i32) {
        let mut all = lock(&self.followers);
        if let Some(f) = all.0.iter_mut().find(|f| f.replica == replica) {
            f.settle();
        }
    }

    /// Tells the sessions watching this partition that it changed.
    fn notify_watchers(&self) {
        let live: Vec<Arc<SessionChanges>> = {
            let mut w = lock(&self.watchers);
            if w.is_empty() {
                return;
            }
            w.retain(|s| s.strong_count() > 0);
            w.iter().filter_map(Weak::upgrade).collect()
        };
        let me = identity(self);
        for s in live {
            s.changed(me);
        }
    }

    /// HW = min LEO over the ISR (see the module doc); true if it moved (waiters are woken).
    /// Kafka's strict min ISR rule (4.0+, KIP-966): while the ISR is smaller than the
    /// effective `min.insync.replicas` the HW stays where it is, so every record below it is
    /// on at least that many replicas, and a replica that leaves the ISR then holds all of
    /// them (the controller may elect it from the eligible leader replicas).
    pub fn maybe_increment_hw(&self) -> bool {
        let st = self.state.read().unwrap_or_else(PoisonError::into_inner);
        if st.leader != self.node_id {
            return false;
        }
        let leo = self.log.log_end_offset();
        let under_min_isr = i32::try_from(st.isr.len()).unwrap_or(i32::MAX) < st.min_insync_replicas;
        let mut hw = leo;
        if !under_min_isr {
            let followers = lock(&self.followers);
            for r in &st.isr {
                if *r != self.node_id {
                    let f = followers.get(*r).map_or(-1, |f| f.leo);
                    hw = hw.min(if f >= 0 { f } else { self.log.log_start_offset() });
                }
            }
        }
        drop(st);
        if leo > self.leo_announced.fetch_max(leo, Ordering::AcqRel) {
            self.wake_leo_waiters();
        }
        if !under_min_isr && hw > self.log.high_watermark() {
            self.log.update_high_watermark(hw);
            self.wake_hw_waiters();
            return true;
        }
        false
    }

    /// While on, every HW move reaches the control plane as an event on the network server's
    /// notify fd (a follower's fetch moves the HW on the network thread, where the control
    /// plane's waiters cannot be woken directly). The watcher turns it on *before* it reads
    /// the HW to decide whether to wait, so no move between the two goes unannounced.
    pub fn watch_high_watermark(&self, on: bool) {
        self.watched.store(on, Ordering::SeqCst);
        fence(Ordering::SeqCst);
    }

    /// A follower learned a new HW from its leader: set it and wake consumers parked here
    /// (KIP-392 reads from followers).
    pub fn follower_high_watermark(&self, hw: i64) {
        if hw > self.log.high_watermark() {
            self.log.update_high_watermark(hw);
            self.wake_hw_waiters();
        } else if hw < self.log.high_watermark() {
            self.log.update_high_watermark(hw);
        }
    }

    /// KIP-392: the replica a consumer in `client_rack` should read from instead of this
    /// leader, or -1 (read here). Kafka's RackAwareReplicaSelector over the candidates Kafka's
    /// leader considers: itself, and ISR followers whose LEO has reached `fetch_offset`. A
    /// replica in the client's rack is chosen (the leader if it is one; else the follower
    /// with the highest LEO, lowest id on ties); no rack match: the leader.
    pub fn preferred_read_replica(
        &self,
        fetch_offset: i64,
        client_rack: &str,
        racks: &HashMap<i32, Option<String>>,
    ) -> i32 {
        let in_rack = |id: i32| racks.get(&id).and_then(Option::as_deref) == Some(client_rack);
        if client_rack.is_empty() || in_rack(self.node_id) || fetch_offset < self.log.log_start_offset() {
            return -1;
        }
        let st = self.state.read().unwrap_or_else(PoisonError::into_inner);
        if st.leader != self.node_id {
            return -1;
        }
        let followers = lock(&self.followers);
        st.isr
            .iter()
            .filter(|r| **r != self.node_id && in_rack(**r))
            .filter_map(|r| followers.get(*r).map(|f| (*r, f.leo)))
            .filter(|(_, leo)| *leo >= fetch_offset)
            .max_by_key(|(r, leo)| (*leo, -r))
            .map_or(-1, |(r, _)| r)
    }

    /// Parks request `id` here until the HW moves (or, `for_leo`, the LEO).
    pub fn add_waiter(&self, id: u64, for_leo: bool) {
        let mut w = lock(if for_leo { &self.leo_waiters } else { &self.waiters });
        if !w.contains(&id) {
            w.push(id);
        }
    }

    pub fn remove_waiter(&self, id: u64) {
        lock(&self.waiters).retain(|w| *w != id);
        lock(&self.leo_waiters).retain(|w| *w != id);
    }

    fn wake_leo_waiters(&self) {
        let ids = std::mem::take(&mut *lock(&self.leo_waiters));
        if !ids.is_empty() {
            self.wakeup.wake(ids);
        }
    }

    /// After an HW move: parked requests re-check, and a watching control plane hears of it.
    fn wake_hw_waiters(&self) {
        let ids = std::mem::take(&mut *lock(&self.waiters));
        if !ids.is_empty() {
            self.wakeup.wake(ids);
        }
        // pairs with the fence in `watch_high_watermark`: either the watcher sees the new HW
        // when it reads it, or this sees the watch
        fence(Ordering::SeqCst);
        if self.watched.load(Ordering::SeqCst) {
            self.wakeup.high_watermark_moved(Arc::clone(&self.topic), self.index);
        }
    }

    /// A state change or removal: every parked request re-checks, every watching session
    /// reads it again.
    fn wake_everyone(&self) {
        self.wake_hw_waiters();
        self.wake_leo_waiters();
        self.notify_watchers();
    }
}

impl OffsetsListener for Partition {
    /// The log's fetch state moved: quiet followers stay caught up as of their last fetch
    /// (the LEO may have moved past them), and watching sessions read it again.
    fn offsets_changed(&self) {
        for f in &mut lock(&self.followers).0 {
            if f.quiet.is_some() {
                f.settle();
            }
        }
        self.notify_watchers();
    }
}

/// A partition's leader as the metadata image names it (-1: no leader).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CurrentLeader {
    pub leader: i32,
    pub leader_epoch: i32,
}

/// A broker's client endpoint, for KIP-951's NodeEndpoints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerEndpoint {
    pub host: String,
    pub port: i32,
    pub rack: Option<String>,
}

/// One topic of the metadata image: its id and each partition's current leader.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicView {
    pub id: Uuid,
    pub leaders: HashMap<i32, CurrentLeader>,
}

/// What the metadata image says about the whole cluster (see the module doc).
#[derive(Debug, Default)]
pub struct ClusterView {
    pub topics: HashMap<String, TopicView>,
    /// topic id -> name
    pub names: HashMap<Uuid, String>,
    pub brokers: HashMap<i32, BrokerEndpoint>,
}

impl ClusterView {
    pub fn new(topics: HashMap<String, TopicView>, brokers: HashMap<i32, BrokerEndpoint>) -> Self {
        let names = topics.iter().map(|(n, t)| (t.id, n.clone())).collect();
        ClusterView { topics, names, brokers }
    }
}

/// Why this broker cannot serve a partition as its leader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotServed {
    /// No topic of that name (or id) in the metadata image.
    UnknownTopic,
    /// The topic exists, the partition does not.
    UnknownPartition,
    /// The partition exists; another broker leads it (or none: leader -1).
    NotLeader(CurrentLeader),
    /// The client's current leader epoch is older than ours.
    FencedEpoch(CurrentLeader),
    /// The client's current leader epoch is newer than ours (our metadata is behind).
    UnknownEpoch,
}

impl NotServed {
    /// The error code; `by_id`: the request named the topic by id (Fetch v13+).
    pub fn code(self, by_id: bool) -> i16 {
        use crate::protocol::error_codes as code;
        match self {
            NotServed::UnknownTopic if by_id => code::UNKNOWN_TOPIC_ID,
            NotServed::UnknownTopic | NotServed::UnknownPartition => code::UNKNOWN_TOPIC_OR_PARTITION,
            NotServed::NotLeader(_) => code::NOT_LEADER_OR_FOLLOWER,
            NotServed::FencedEpoch(_) => code::FENCED_LEADER_EPOCH,
            NotServed::UnknownEpoch => code::UNKNOWN_LEADER_EPOCH,
        }
    }

    /// The leader to send the client to (KIP-951), if there is one.
    pub fn current_leader(self) -> Option<CurrentLeader> {
        match self {
            NotServed::NotLeader(l) | NotServed::FencedEpoch(l) => Some(l),
            _ => None,
        }
    }

    /// A message naming the partition, this broker and the leader.
    pub fn describe(self, topic: &str, index: i32, node_id: i32) -> String {
        match self {
            NotServed::UnknownTopic => format!("topic {topic:?} does not exist"),
            NotServed::UnknownPartition => format!("partition {topic}-{index} does not exist"),
            NotServed::NotLeader(l) if l.leader < 0 => {
                format!("partition {topic}-{index} has no leader (leader epoch {})", l.leader_epoch)
            }
            NotServed::NotLeader(l) => format!(
                "broker {node_id} is not the leader of {topic}-{index}: broker {} is (leader epoch {})",
                l.leader, l.leader_epoch
            ),
            NotServed::FencedEpoch(l) => {
                format!("leader epoch of {topic}-{index} is {}, newer than the request's", l.leader_epoch)
            }
            NotServed::UnknownEpoch => {
                format!("the request's leader epoch of {topic}-{index} is newer than broker {node_id}'s")
            }
        }
    }
}

/// Every partition this broker holds, by (topic, partition); plus the cluster view.
/// topic -> partition index -> entry (two levels, so a lookup borrows the topic name).
type PartitionMap = HashMap<String, HashMap<i32, Arc<Partition>>>;

pub struct PartitionTable {
    parts: RwLock<PartitionMap>,
    view: RwLock<ClusterView>,
    /// This broker's id (-1 until the control plane says; only used in messages).
    node_id: std::sync::atomic::AtomicI32,
    wakeup: Arc<Wakeup>,
    /// `set_rack_aware_selector`
    rack_aware: AtomicBool,
    /// `set_verify_transactions_v1`
    verify_v1: AtomicBool,
    /// ACLs for Produce and Fetch (and, through Python, every other API).
    authorizer: Arc<super::authorizer::Authorizer>,
    /// Produce and fetch byte-rate quotas (KIP-13/55).
    client_quotas: Arc<super::quota::ClientQuotas>,
    /// The schema ids of each subject, for topics that check them (schema_ids.rs).
    schema_ids: Arc<super::schema_ids::SchemaIds>,
    /// Tiered storage's reader (`remote.log.storage.system.enable`), once the broker opened its store.
    remote_reader: OnceLock<Arc<RemoteReader>>,
    /// The reader of tables' data files (the table as the tier).
    table_reader: Arc<TableReader>,
}

impl Default for PartitionTable {
    fn default() -> Self {
        PartitionTable::new()
    }
}

impl PartitionTable {
    pub fn new() -> Self {
        PartitionTable {
            parts: RwLock::new(HashMap::new()),
            view: RwLock::new(ClusterView::default()),
            node_id: std::sync::atomic::AtomicI32::new(-1),
            wakeup: Arc::default(),
            rack_aware: AtomicBool::new(false),
            verify_v1: AtomicBool::new(false),
            authorizer: Arc::default(),
            client_quotas: Arc::default(),
            schema_ids: Arc::default(),
            remote_reader: OnceLock::new(),
            table_reader: Arc::new(TableReader::new(TABLE_TIER_CACHE_BYTES)),
        }
    }

    /// Tiered storage's reader; false if one is set already.
    pub fn set_remote_reader(&self, reader: Arc<RemoteReader>) -> bool {
        self.remote_reader.set(reader).is_ok()
    }

    pub fn remote_reader(&self) -> Option<&Arc<RemoteReader>> {
        self.remote_reader.get()
    }

    pub fn table_reader(&self) -> &Arc<TableReader> {
        &self.table_reader
    }

    pub fn schema_ids(&self) -> &Arc<super::schema_ids::SchemaIds> {
        &self.schema_ids
    }

    pub fn authorizer(&self) -> &Arc<super::authorizer::Authorizer> {
        &self.authorizer
    }

    pub fn client_quotas(&self) -> &Arc<super::quota::ClientQuotas> {
        &self.client_quotas
    }

    pub fn wakeup(&self) -> &Arc<Wakeup> {
        &self.wakeup
    }

    /// Adds (or replaces) a partition's entry; returns it.
    pub fn add(&self, topic: &str, index: i32, node_id: i32, log: Arc<Log>, state: LeaderState) -> Arc<Partition> {
        let topic: Arc<str> = Arc::from(topic);
        let followers = fresh_followers(&state.isr, node_id);
        let p = Arc::new(Partition {
            topic: Arc::clone(&topic),
            index,
            node_id,
            log,
            state: RwLock::new(state),
            followers: Mutex::new(followers),
            removed: AtomicBool::new(false),
            waiters: Mutex::new(Vec::new()),
            leo_waiters: Mutex::new(Vec::new()),
            leo_announced: std::sync::atomic::AtomicI64::new(-1),
            watched: AtomicBool::new(false),
            wakeup: Arc::clone(&self.wakeup),
            watchers: Mutex::new(Vec::new()),
            stats: super::metrics::PartitionStats::default(),
            below_local: RwLock::new(BelowLocalViews::default()),
            remote_reader: self.remote_reader.get().cloned(),
            remote_loads: std::sync::atomic::AtomicU64::new(0),
            table_reader: Arc::clone(&self.table_reader),
        });
        let listener: Weak<dyn OffsetsListener> = Arc::downgrade(&p) as Weak<dyn OffsetsListener>;
        p.log.set_offsets_listener(listener);
        let old = self
            .parts
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(topic.to_string())
            .or_default()
            .insert(index, Arc::clone(&p));
        if let Some(old) = old {
            old.removed.store(true, Ordering::Release);
            old.wake_everyone();
        }
        let st = p.state();
        if st.leader == node_id {
            self.wakeup.became_leader(&p, &st.isr);
        }
        drop(st);
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
            old.wake_everyone();
        }
    }

    pub fn get(&self, topic: &str, index: i32) -> Option<Arc<Partition>> {
        self.parts.read().unwrap_or_else(PoisonError::into_inner).get(topic)?.get(&index).cloned()
    }

    /// Every partition hosted here (a snapshot of the table).
    pub fn all(&self) -> Vec<Arc<Partition>> {
        self.parts.read().unwrap_or_else(PoisonError::into_inner).values().flat_map(|m| m.values().cloned()).collect()
    }

    /// Replaces the cluster view (one call per metadata image change).
    /// KIP-392: with `on` the leader names a preferred read replica in the client's rack
    /// (`replica.selector.class` = RackAwareReplicaSelector); off: consumers read the leader.
    pub fn set_rack_aware_selector(&self, on: bool) {
        self.rack_aware.store(on, Ordering::Release);
    }

    /// KIP-890 part 1 (`transaction.partition.verification.enable`): the first batch of a
    /// transactions-v1 producer's transaction on a partition is checked with its coordinator.
    pub fn set_verify_transactions_v1(&self, on: bool) {
        self.verify_v1.store(on, Ordering::Release);
    }

    pub fn verify_transactions_v1(&self) -> bool {
        self.verify_v1.load(Ordering::Acquire)
    }

    /// Each broker's rack when the rack-aware selector is on, else `None` (one clone of the
    /// map per Fetch with a rack).
    pub fn racks_for_selection(&self) -> Option<HashMap<i32, Option<String>>> {
        if !self.rack_aware.load(Ordering::Acquire) {
            return None;
        }
        let view = self.view.read().unwrap_or_else(PoisonError::into_inner);
        Some(view.brokers.iter().map(|(id, e)| (*id, e.rack.clone())).collect())
    }

    pub fn set_metadata(&self, node_id: i32, view: ClusterView) {
        self.node_id.store(node_id, Ordering::Relaxed);
        *self.view.write().unwrap_or_else(PoisonError::into_inner) = view;
    }

    /// Changes the cluster view by a metadata delta: `removed` topics go, `upserted` ones
    /// (created or changed) replace their entries, and the brokers are replaced when given.
    /// The cost is the delta's, not the cluster's.
    pub fn update_metadata(
        &self,
        node_id: i32,
        upserted: Vec<(String, TopicView)>,
        removed: &[String],
        brokers: Option<HashMap<i32, BrokerEndpoint>>,
    ) {
        self.node_id.store(node_id, Ordering::Relaxed);
        let mut view = self.view.write().unwrap_or_else(PoisonError::into_inner);
        for name in removed {
            if let Some(t) = view.topics.remove(name) {
                view.names.remove(&t.id);
            }
        }
        for (name, t) in upserted {
            if let Some(old) = view.topics.get(&name).map(|o| o.id) {
                view.names.remove(&old);
            }
            view.names.insert(t.id, name.clone());
            view.topics.insert(name, t);
        }
        if let Some(brokers) = brokers {
            view.brokers = brokers;
        }
    }

    pub fn node_id(&self) -> i32 {
        self.node_id.load(Ordering::Relaxed)
    }

    /// The endpoints of `ids` as (node id, host, port, rack): each once, in id order, unknown
    /// ids and -1 skipped; a response's NodeEndpoints (KIP-951).
    pub fn endpoints_of(&self, ids: Vec<i32>) -> Vec<(i32, String, i32, Option<String>)> {
        let mut ids = ids;
        ids.retain(|i| *i >= 0);
        ids.sort_unstable();
        ids.dedup();
        let view = self.view.read().unwrap_or_else(PoisonError::into_inner);
        ids.into_iter()
            .filter_map(|i| view.brokers.get(&i).map(|e| (i, e.host.clone(), e.port, e.rack.clone())))
            .collect()
    }

    /// The name of the topic with id `id`, if the image has it.
    pub fn topic_name(&self, id: &Uuid) -> Option<String> {
        self.view.read().unwrap_or_else(PoisonError::into_inner).names.get(id).cloned()
    }

    /// The local leader replica of `topic`-`index`, or why not (see `NotServed`). A
    /// client-supplied current leader epoch (-1: not checked) older than ours is fenced,
    /// newer is unknown.
    pub fn leader_for(&self, topic: &str, index: i32, current_leader_epoch: i32) -> Result<Arc<Partition>, NotServed> {
        self.replica_for(topic, index, current_leader_epoch, false)
    }

    /// As `leader_for`, but with `follower_ok` a follower replica serves too (a consumer's
    /// Fetch v11+, KIP-392); the client's leader epoch is checked against this replica's.
    pub fn replica_for(
        &self,
        topic: &str,
        index: i32,
        current_leader_epoch: i32,
        follower_ok: bool,
    ) -> Result<Arc<Partition>, NotServed> {
        let Some(part) = self.get(topic, index).filter(|p| !p.is_removed()) else {
            return Err(self.not_here(topic, index));
        };
        Self::check_replica(part, current_leader_epoch, follower_ok)
    }

    /// `replica_for`'s checks on a replica already found in the table (a fetch session
    /// remembers the replicas it reads, and looks one up again only once it was removed).
    pub fn check_replica(
        part: Arc<Partition>,
        current_leader_epoch: i32,
        follower_ok: bool,
    ) -> Result<Arc<Partition>, NotServed> {
        let st = part.state();
        let current = CurrentLeader { leader: st.leader, leader_epoch: st.leader_epoch };
        if st.leader != part.node_id && !follower_ok {
            return Err(NotServed::NotLeader(current));
        }
        if current_leader_epoch >= 0 && current_leader_epoch != st.leader_epoch {
            return Err(if current_leader_epoch < st.leader_epoch {
                NotServed::FencedEpoch(current)
            } else {
                NotServed::UnknownEpoch
            });
        }
        drop(st);
        Ok(part)
    }

    /// Why a partition without a local replica is not served: it does not exist, or it is
    /// led elsewhere (as far as the image knows; leader -1 while it has none).
    pub fn not_here(&self, topic: &str, index: i32) -> NotServed {
        let view = self.view.read().unwrap_or_else(PoisonError::into_inner);
        match view.topics.get(topic) {
            None => NotServed::UnknownTopic,
            Some(t) => match t.leaders.get(&index) {
                None => NotServed::UnknownPartition,
                Some(l) => NotServed::NotLeader(*l),
            },
        }
    }
}
