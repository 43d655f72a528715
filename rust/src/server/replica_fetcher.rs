//! Follower fetch loops: this broker's follower replicas pull from their leaders.
//!
//! One `ReplicaFetcher` (a thread) per source broker carries every partition this broker
//! follows there in one Fetch request (Kafka's replica fetcher threads). The control plane
//! (Python) only says which partitions to follow from where (`ReplicaFetcherManager::follow`,
//! `unfollow`) and logs the events the loops report; no Python runs per request or batch.
//!
//! # One round
//! 1. For each followed partition not backing off: fetch offset = its LEO, last fetched
//!    epoch = its latest leader epoch, current leader epoch = the epoch it follows.
//! 2. Fetch (the highest version both sides have, at least 12; `ReplicaState` with this
//!    broker's id and epoch from v15, `replica_id` before; topic ids from v13), long-polling
//!    `replica.fetch.wait.max.ms` for `replica.fetch.min.bytes`. In an incremental fetch
//!    session (KIP-227, `fetch_session_handler.rs`) the request lists only the partitions
//!    whose fetch state changed and the answer only those with news, so an idle follower of
//!    thousands of partitions sends and decodes next to nothing; the session starts with the
//!    connection's first (full) request and ends with the connection.
//! 3. Per partition in the answer, under the partition set's lock (so `unfollow` returning
//!    means no more writes to that log from here), and only if it is still followed at the
//!    same leader epoch:
//!    - records: appended with the leader's offsets and leader epochs (`Log::append_as_follower`
//!      validates framing and CRC-32C and keeps the producer state); HW = min(leader's HW,
//!      own LEO); the log start follows the leader's.
//!    - `DivergingEpoch` (epoch E, end offset O): the local log ends E at O' of its own; it is
//!      truncated to min(O, O') and the next round checks again (never to the HW blindly;
//!      only when the leader has no epoch information at all, Kafka's fallback to the HW).
//!    - OFFSET_OUT_OF_RANGE: below the leader's log start, the log restarts there; above the
//!      leader's LEO (possible only after an unclean election), OffsetForLeaderEpoch for the
//!      local latest epoch says where to truncate.
//!    - NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, UNKNOWN_*: the partition backs off; the
//!      control plane moves it when the metadata says so.
//!    - a local append failure (corrupt data, disk): logged naming partition and offset; the
//!      partition backs off and retries from its LEO.
//!
//!    A partition's back-off doubles from `FIRST_BACKOFF` up to `replica.fetch.backoff.ms`
//!    with each failure in a row, and resets on a good answer; while one backs off, the
//!    others' long poll waits no longer than its back-off. Kafka waits the whole back-off
//!    at once, but the usual first failure is a leader that has not applied the metadata
//!    making it leader yet (the follower applied it first): measured on three nodes, half of
//!    new topics hit it, and at a flat 1 s their acks=all produces waited up to a second.
//! 4. A connection failure closes the connection, backs off and reconnects (one log line per
//!    change of state, not per attempt).
//!
//! A partition added while a long poll is in flight goes in the next request, as in Kafka's
//! fetcher threads; the leader answers the poll early when it takes the partition's
//! leadership, as often as the cost of a round over the session allows
//! (`expected_followers.rs`), so on a small cluster a new partition (a new topic, a leadership
//! move) starts replicating within milliseconds, and at tens of thousands of partitions
//! within `replica.fetch.wait.max.ms`. (The loop used to reconnect to cut the poll short; the
//! session ended with the connection and each new topic cost a full request.)
//!
//! Connections: TLS on an SSL or SASL_SSL inter-broker listener (`tls_client.rs`), then
//! ApiVersions, then on SASL_PLAINTEXT / SASL_SSL the SASL exchange (`sasl_client.rs`); a
//! SASL session with a lifetime (`connections.max.reauth.ms` on the leader) is renewed by
//! reconnecting at 85-95% of it. An authentication failure is a connection failure (logged
//! once, naming this node, the listener, mechanism and user; retried after the back-off).
//!
//! Threads: each loop runs without the GIL (pure Rust); blocking socket I/O with timeouts;
//! `shutdown` interrupts a long poll by shutting the socket down.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::fetch_session_handler::{is_session_error, FetchSessionHandler, SessionRequest};
use super::partition::Partition;
use super::partition_hash::PartitionHashMap;
use super::sasl_client::{self, SaslCredentials};
use super::tls_client::PeerStream;
use super::LogLine;
use crate::protocol::error_codes as code;
use crate::protocol::messages::api_versions_request::ApiVersionsRequest;
use crate::protocol::messages::api_versions_response::ApiVersionsResponse;
use crate::protocol::messages::fetch_request::{FetchPartition, FetchRequest, ReplicaState};
use crate::protocol::messages::fetch_response::{FetchResponse, PartitionData};
use crate::protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderEpochRequest, OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use crate::protocol::messages::offset_for_leader_epoch_response::OffsetForLeaderEpochResponse;
use crate::protocol::messages::request_header::RequestHeader;
use crate::protocol::messages::sasl_authenticate_request::SaslAuthenticateRequest;
use crate::protocol::messages::sasl_authenticate_response::SaslAuthenticateResponse;
use crate::protocol::messages::sasl_handshake_request::SaslHandshakeRequest;
use crate::protocol::messages::sasl_handshake_response::SaslHandshakeResponse;
use crate::protocol::{Bytes, Message, ProtocolError, Reader, Records, Uuid, Writer};

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A random byte (spreads the SASL session renewals); 128 if the system has no randomness.
fn random_byte() -> u8 {
    let mut b = [128u8];
    let _ = ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut b);
    b[0]
}

/// A partition's first back-off after a failed fetch; it doubles up to `replica.fetch.backoff.ms`.
const FIRST_BACKOFF: Duration = Duration::from_millis(10);

/// The newest Fetch version the loop speaks, and the oldest it accepts (DivergingEpoch).
const FETCH_MAX: i16 = 17;
const FETCH_MIN: i16 = 12;
const OFFSET_FOR_LEADER_EPOCH_VERSION: i16 = 4;

/// Kafka's replica fetcher settings (names in the field docs).
#[derive(Debug, Clone)]
pub struct FetcherConfig {
    pub node_id: i32,
    /// `replica.fetch.wait.max.ms`
    pub max_wait_ms: i32,
    /// `replica.fetch.min.bytes`
    pub min_bytes: i32,
    /// `replica.fetch.response.max.bytes`
    pub response_max_bytes: i32,
    /// `replica.fetch.max.bytes`
    pub partition_max_bytes: i32,
    /// `replica.fetch.backoff.ms`
    pub backoff_ms: u64,
    /// `replica.socket.timeout.ms`
    pub socket_timeout_ms: u64,
    /// TLS to the leaders, when the inter-broker listener is SSL (`tls_client.rs`).
    pub tls: Option<Arc<rustls::ClientConfig>>,
    /// SASL to the leaders, when the inter-broker listener is SASL_* (`sasl_client.rs`).
    pub sasl: Option<SaslCredentials>,
}

/// A partition this broker follows.
struct Followed {
    part: Arc<Partition>,
    topic_id: Uuid,
    /// The leader epoch of the leadership followed (sent as current leader epoch).
    leader_epoch: i32,
    backoff_until: Option<Instant>,
    /// Failed rounds in a row (the back-off doubles with each).
    failures: u32,
}

impl Followed {
    fn new(part: Arc<Partition>, topic_id: Uuid, leader_epoch: i32) -> Self {
        Followed { part, topic_id, leader_epoch, backoff_until: None, failures: 0 }
    }

    /// Backs off after a failure (`backoff_after`).
    fn back_off(&mut self, cap: Duration) {
        let d = backoff_after(self.failures, cap);
        self.failures = self.failures.saturating_add(1);
        self.backoff_until = Some(Instant::now() + d);
    }
}

/// The back-off after `failures` earlier failures in a row: FIRST_BACKOFF doubled per
/// failure, at most `cap` (`replica.fetch.backoff.ms`).
fn backoff_after(failures: u32, cap: Duration) -> Duration {
    FIRST_BACKOFF.saturating_mul(1u32 << failures.min(16)).min(cap)
}

struct Shared {
    source: i32,
    address: String,
    config: FetcherConfig,
    broker_epoch: Arc<AtomicI64>,
    partitions: Mutex<PartitionHashMap<(Arc<str>, i32), Followed>>,
    changed: Condvar,
    stop: AtomicBool,
    stream: Mutex<Option<TcpStream>>,
    events: Arc<Mutex<Vec<LogLine>>>,
}

impl Shared {
    fn event(&self, level: i32, message: String) {
        lock(&self.events).push(LogLine::new(level, message));
    }
}

/// One fetch loop (thread) for one source broker.
pub struct ReplicaFetcher {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl ReplicaFetcher {
    fn start(
        source: i32,
        address: String,
        config: FetcherConfig,
        broker_epoch: Arc<AtomicI64>,
        events: Arc<Mutex<Vec<LogLine>>>,
    ) -> Self {
        let shared = Arc::new(Shared {
            source,
            address,
            config,
            broker_epoch,
            partitions: Mutex::new(PartitionHashMap::default()),
            changed: Condvar::new(),
            stop: AtomicBool::new(false),
            stream: Mutex::new(None),
            events,
        });
        let s = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name(format!("replica-fetcher-{source}"))
            .spawn(move || {
                Loop {
                    shared: s,
                    conn: None,
                    correlation_id: 0,
                    fetch_version: 0,
                    failing: false,
                    renew_at: None,
                    session: FetchSessionHandler::new(),
                    order: Vec::new(),
                }
                .run();
            })
            .ok();
        ReplicaFetcher { shared, thread }
    }

    fn stop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        self.shared.changed.notify_all();
        if let Some(s) = lock(&self.shared.stream).as_ref() {
            let _ = s.shutdown(Shutdown::Both);
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for ReplicaFetcher {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Every fetcher of this broker, by source broker.
pub struct ReplicaFetcherManager {
    config: FetcherConfig,
    broker_epoch: Arc<AtomicI64>,
    fetchers: Mutex<HashMap<i32, ReplicaFetcher>>,
    events: Arc<Mutex<Vec<LogLine>>>,
}

/// One partition to follow: the local replica, its topic id, the leader epoch followed.
pub type FollowRequest = (Arc<Partition>, Uuid, i32);

impl ReplicaFetcherManager {
    pub fn new(config: FetcherConfig) -> Self {
        ReplicaFetcherManager {
            config,
            broker_epoch: Arc::new(AtomicI64::new(-1)),
            fetchers: Mutex::new(HashMap::new()),
            events: Arc::default(),
        }
    }

    /// The broker epoch sent in `ReplicaState` (from this broker's registration).
    pub fn set_broker_epoch(&self, epoch: i64) {
        self.broker_epoch.store(epoch, Ordering::Relaxed);
    }

    /// Follows `partitions` from broker `source` at `host:port` (replacing the fetcher if
    /// the source's address changed); each leaves any other fetcher it was on.
    pub fn follow(&self, source: i32, host: &str, port: i32, partitions: Vec<FollowRequest>) {
        let address = format!("{host}:{port}");
        let mut fetchers = lock(&self.fetchers);
        let keys: Vec<(Arc<str>, i32)> = partitions.iter().map(|(p, _, _)| (Arc::clone(&p.topic), p.index)).collect();
        for (id, f) in fetchers.iter() {
            if *id != source {
                let mut parts = lock(&f.shared.partitions);
                for k in &keys {
                    parts.remove(k);
                }
            }
        }
        // The source moved (re-registered elsewhere): a new loop takes over what the old one followed.
        let mut carried = Vec::new();
        if let Some(mut old) = fetchers.remove(&source) {
            if old.shared.address == address {
                fetchers.insert(source, old);
            } else {
                carried = lock(&old.shared.partitions).drain().map(|(_, v)| v).collect();
                old.stop();
            }
        }
        let f = self.fetcher(&mut fetchers, source, &address);
        {
            let mut parts = lock(&f.shared.partitions);
            for m in carried {
                parts.insert((Arc::clone(&m.part.topic), m.part.index), m);
            }
            for (part, topic_id, leader_epoch) in partitions {
                let key = (Arc::clone(&part.topic), part.index);
                match parts.get_mut(&key) {
                    Some(e) if Arc::ptr_eq(&e.part, &part) && e.leader_epoch == leader_epoch => {}
                    _ => {
                        parts.insert(key, Followed::new(part, topic_id, leader_epoch));
                    }
                }
            }
        }
        // a request in flight does not carry what was added: the next one does (the leader
        // answers it early, `expected_followers.rs`)
        f.shared.changed.notify_all();
    }

    fn fetcher<'a>(
        &self,
        fetchers: &'a mut HashMap<i32, ReplicaFetcher>,
        source: i32,
        address: &str,
    ) -> &'a ReplicaFetcher {
        fetchers.entry(source).or_insert_with(|| {
            ReplicaFetcher::start(
                source,
                address.to_owned(),
                self.config.clone(),
                Arc::clone(&self.broker_epoch),
                Arc::clone(&self.events),
            )
        })
    }

    /// Stops following `keys` (topic, partition); when it returns no fetcher writes to them.
    /// Fetchers left with nothing to follow are stopped.
    pub fn unfollow(&self, keys: &[(String, i32)]) {
        let mut fetchers = lock(&self.fetchers);
        let mut idle = Vec::new();
        for (id, f) in fetchers.iter() {
            let mut parts = lock(&f.shared.partitions);
            for (t, p) in keys {
                parts.remove(&(Arc::from(t.as_str()), *p));
            }
            if parts.is_empty() {
                idle.push(*id);
            }
        }
        for id in idle {
            if let Some(mut f) = fetchers.remove(&id) {
                f.stop();
            }
        }
    }

    /// Log lines the loops reported since the last call.
    pub fn take_events(&self) -> Vec<LogLine> {
        std::mem::take(&mut *lock(&self.events))
    }

    /// Stops every fetcher (waits for their threads).
    pub fn shutdown(&self) {
        let all: Vec<ReplicaFetcher> = lock(&self.fetchers).drain().map(|(_, f)| f).collect();
        for mut f in all {
            f.stop();
        }
    }
}

impl Drop for ReplicaFetcherManager {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// What one round sends for one partition.
struct Sent {
    key: (Arc<str>, i32),
    leader_epoch: i32,
    fetch_offset: i64,
}

struct Loop {
    shared: Arc<Shared>,
    conn: Option<PeerStream>,
    correlation_id: i32,
    fetch_version: i16,
    /// The last round failed on the connection (log once per change).
    failing: bool,
    /// When to reconnect because the connection's SASL session ends.
    renew_at: Option<Instant>,
    /// The incremental fetch session with the leader on this connection (KIP-227).
    session: FetchSessionHandler,
    /// The partitions followed, in request order (by topic, then partition), kept from
    /// round to round and sorted again only when the set changed.
    order: Vec<(Arc<str>, i32)>,
}

impl Loop {
    fn run(mut self) {
        while !self.shared.stop.load(Ordering::Acquire) {
            let Some((req, sent, session)) = self.build() else { continue };
            match self.round(req, &sent) {
                Ok(resp) if is_session_error(resp.error_code) => {
                    // the leader restarted or evicted the session: the next request is full
                    self.shared.event(
                        LogLine::DEBUG,
                        format!(
                            "broker {} answered fetch session {} epoch {} with error {}; starting a new session",
                            self.shared.source, session.session_id, session.session_epoch, resp.error_code
                        ),
                    );
                    self.session.reset();
                }
                Ok(resp) => {
                    self.session.commit(session, resp.session_id);
                    if self.failing {
                        self.failing = false;
                        self.shared.event(
                            LogLine::INFO,
                            format!("fetching from broker {} at {} again", self.shared.source, self.shared.address),
                        );
                    }
                    self.apply(&resp, &sent);
                }
                Err(e) => {
                    self.disconnect();
                    if self.shared.stop.load(Ordering::Acquire) {
                        break;
                    }
                    if !self.failing {
                        self.failing = true;
                        self.shared.event(
                            LogLine::WARNING,
                            format!(
                                "fetching {} partition(s) from broker {} at {} failed: {e}; retrying every {} ms",
                                sent.len(),
                                self.shared.source,
                                self.shared.address,
                                self.shared.config.backoff_ms
                            ),
                        );
                    }
                    self.sleep(Duration::from_millis(self.shared.config.backoff_ms));
                }
            }
        }
        self.disconnect();
    }

    /// Waits for `d` or until stopped / the partition set changes.
    fn sleep(&self, d: Duration) {
        let parts = lock(&self.shared.partitions);
        if !self.shared.stop.load(Ordering::Acquire) {
            let _ = self.shared.changed.wait_timeout(parts, d);
        }
    }

    /// The next request (listing, in a session, only what changed), what this round fetches,
    /// and the session part to commit once answered; None (after waiting) when nothing is
    /// ready to fetch.
    fn build(&mut self) -> Option<(FetchRequest, Vec<Sent>, SessionRequest)> {
        let now = Instant::now();
        let mut wanted = Vec::new();
        let mut sent = Vec::new();
        let mut next_ready: Option<Instant> = None;
        {
            let parts = lock(&self.shared.partitions);
            if parts.is_empty() {
                if !self.shared.stop.load(Ordering::Acquire) {
                    let _ = self.shared.changed.wait_timeout(parts, Duration::from_millis(500));
                }
                return None;
            }
            if self.order.len() != parts.len() || !self.order.iter().all(|k| parts.contains_key(k)) {
                self.order = parts.keys().cloned().collect();
                self.order.sort_unstable();
            }
            for key in &self.order {
                let f = &parts[key];
                if let Some(t) = f.backoff_until.filter(|t| *t > now) {
                    next_ready = Some(next_ready.map_or(t, |n| n.min(t)));
                    continue;
                }
                if f.part.is_removed() {
                    continue;
                }
                let log = &f.part.log;
                let fetch_offset = log.log_end_offset();
                let p = FetchPartition {
                    partition: key.1,
                    current_leader_epoch: f.leader_epoch,
                    fetch_offset,
                    last_fetched_epoch: log.latest_epoch().unwrap_or(-1),
                    log_start_offset: log.log_start_offset(),
                    partition_max_bytes: self.shared.config.partition_max_bytes,
                    ..Default::default()
                };
                wanted.push((key.clone(), f.topic_id, p));
                sent.push(Sent { key: key.clone(), leader_epoch: f.leader_epoch, fetch_offset });
            }
            if sent.is_empty() {
                let wait = next_ready.map_or(Duration::from_millis(500), |t| t.saturating_duration_since(now));
                if !self.shared.stop.load(Ordering::Acquire) {
                    let _ = self.shared.changed.wait_timeout(parts, wait.max(Duration::from_millis(1)));
                }
                return None;
            }
        }
        let mut session = self.session.build(wanted);
        let c = &self.shared.config;
        // A partition backing off is not in this request: the long poll ends when it may
        // be fetched again, so its back-off is not stretched to replica.fetch.wait.max.ms.
        let max_wait_ms = next_ready.map_or(c.max_wait_ms, |t| {
            let left = i32::try_from(t.saturating_duration_since(now).as_millis()).unwrap_or(i32::MAX);
            c.max_wait_ms.min(left)
        });
        let req = FetchRequest {
            replica_id: c.node_id,
            replica_state: ReplicaState {
                replica_id: c.node_id,
                replica_epoch: self.shared.broker_epoch.load(Ordering::Relaxed),
                ..Default::default()
            },
            max_wait_ms,
            min_bytes: c.min_bytes,
            max_bytes: c.response_max_bytes,
            isolation_level: 0,
            session_id: session.session_id,
            session_epoch: session.session_epoch,
            topics: std::mem::take(&mut session.topics),
            forgotten_topics_data: std::mem::take(&mut session.forgotten),
            ..Default::default()
        };
        Some((req, sent, session))
    }

    fn disconnect(&mut self) {
        if let Some(s) = self.conn.take() {
            s.shutdown();
        }
        self.session.reset(); // the leader ends a session with its connection
        *lock(&self.shared.stream) = None;
    }

    fn connect(&mut self) -> Result<(), String> {
        let timeout = Duration::from_millis(self.shared.config.socket_timeout_ms);
        let addr = self
            .shared
            .address
            .to_socket_addrs()
            .map_err(|e| format!("resolving {}: {e}", self.shared.address))?
            .next()
            .ok_or_else(|| format!("{} resolves to no address", self.shared.address))?;
        let s = TcpStream::connect_timeout(&addr, timeout).map_err(|e| format!("connecting: {e}"))?;
        let _ = s.set_nodelay(true);
        s.set_write_timeout(Some(timeout)).map_err(|e| e.to_string())?;
        *lock(&self.shared.stream) = s.try_clone().ok();
        let host = self.shared.address.rsplit_once(':').map_or(self.shared.address.as_str(), |(h, _)| h);
        let host = host.trim_start_matches('[').trim_end_matches(']');
        self.conn = Some(PeerStream::new(s, self.shared.config.tls.as_ref(), host)?);
        // Negotiate the Fetch version (ApiVersions v3: request header v2, response header v0).
        let resp: ApiVersionsResponse = self.call(
            &ApiVersionsRequest {
                client_software_name: "logbroker-replica-fetcher".into(),
                client_software_version: env!("CARGO_PKG_VERSION").into(),
                ..Default::default()
            },
            3,
            Duration::from_millis(self.shared.config.socket_timeout_ms),
            false,
        )?;
        if resp.error_code != code::NONE {
            return Err(format!("ApiVersions answered error {}", resp.error_code));
        }
        let fetch = resp.api_keys.iter().find(|k| k.api_key == 1).ok_or("the leader does not serve Fetch")?;
        let v = fetch.max_version.min(FETCH_MAX);
        if v < FETCH_MIN || fetch.min_version > v {
            return Err(format!(
                "the leader serves Fetch v{}-{}, replication needs v{FETCH_MIN}+",
                fetch.min_version, fetch.max_version
            ));
        }
        self.fetch_version = v;
        self.renew_at = None;
        if let Some(creds) = self.shared.config.sasl.clone() {
            let authenticate_version =
                resp.api_keys.iter().find(|k| k.api_key == 36).map_or(0, |k| k.max_version.min(2));
            let lifetime = self.authenticate(&creds, authenticate_version).map_err(|e| {
                format!(
                    "node {} could not authenticate to broker {} at {} on listener {} ({}, user {:?}): {e}",
                    self.shared.config.node_id,
                    self.shared.source,
                    self.shared.address,
                    creds.listener,
                    creds.mechanism.name(),
                    creds.username
                )
            })?;
            if lifetime > 0 {
                // at 85-95% of the session, as Kafka's clients re-authenticate
                let share = 850 + u64::from(random_byte()) * 100 / 255;
                let renew = u64::try_from(lifetime).unwrap_or(0).saturating_mul(share) / 1000;
                self.renew_at = Some(Instant::now() + Duration::from_millis(renew));
            }
        }
        Ok(())
    }

    /// The SASL exchange (`sasl_client.rs`) on the fresh connection: the session lifetime.
    fn authenticate(&mut self, creds: &SaslCredentials, version: i16) -> Result<i64, String> {
        let timeout = Duration::from_millis(self.shared.config.socket_timeout_ms);
        let this = std::cell::RefCell::new(self);
        sasl_client::authenticate(
            creds,
            |mechanism| {
                let r: SaslHandshakeResponse = this.borrow_mut().call(
                    &SaslHandshakeRequest { mechanism: mechanism.to_owned(), ..Default::default() },
                    1,
                    timeout,
                    false,
                )?;
                Ok((r.error_code, r.mechanisms))
            },
            |token| {
                let req = SaslAuthenticateRequest { auth_bytes: Bytes::from(token), ..Default::default() };
                let r: SaslAuthenticateResponse = this.borrow_mut().call(&req, version, timeout, version >= 2)?;
                Ok((r.error_code, r.error_message, r.auth_bytes.to_vec(), r.session_lifetime_ms))
            },
        )
    }

    /// Sends one request and reads its response (`flexible_response_header`: header v1).
    fn call<Req: Message, Resp: Message>(
        &mut self,
        req: &Req,
        version: i16,
        wait: Duration,
        flexible_response_header: bool,
    ) -> Result<Resp, String> {
        let conn = self.conn.as_mut().ok_or("not connected")?;
        self.correlation_id = self.correlation_id.wrapping_add(1);
        let correlation_id = self.correlation_id;
        let flexible = Req::FLEXIBLE_MIN >= 0 && version >= Req::FLEXIBLE_MIN;
        let mut w = Writer::new();
        let header = RequestHeader {
            request_api_key: Req::API_KEY,
            request_api_version: version,
            correlation_id,
            client_id: Some(format!("replica-{}", self.shared.config.node_id)),
            ..Default::default()
        };
        header.encode(&mut w, if flexible { 2 } else { 1 }).map_err(|e| e.to_string())?;
        req.encode_versioned(&mut w, version).map_err(|e: ProtocolError| e.to_string())?;
        let body = w.into_vec().map_err(|e| e.to_string())?;
        let mut frame = Vec::with_capacity(body.len() + 4);
        frame.extend_from_slice(&i32::try_from(body.len()).map_err(|_| "request too large")?.to_be_bytes());
        frame.extend_from_slice(&body);
        conn.write_all(&frame).and_then(|()| conn.flush()).map_err(|e| format!("sending {}: {e}", Req::NAME))?;
        conn.set_read_timeout(Some(wait + Duration::from_millis(self.shared.config.socket_timeout_ms)))
            .map_err(|e| e.to_string())?;
        let mut size = [0u8; 4];
        conn.read_exact(&mut size).map_err(|e| format!("reading the {} response: {e}", Req::NAME))?;
        let size = i32::from_be_bytes(size);
        let limit = i64::from(self.shared.config.response_max_bytes) + (1 << 20);
        if size < 4 || i64::from(size) > limit {
            return Err(format!("{} response frame of {size} bytes (limit {limit})", Req::NAME));
        }
        let mut buf = vec![0u8; usize::try_from(size).unwrap_or(0)];
        conn.read_exact(&mut buf).map_err(|e| format!("reading the {} response: {e}", Req::NAME))?;
        let mut r = Reader::new(Bytes::from(buf));
        let got = r.i32("correlation id").map_err(|e| e.to_string())?;
        if got != correlation_id {
            return Err(format!("{} response has correlation id {got}, expected {correlation_id}", Req::NAME));
        }
        if flexible_response_header {
            r.tagged_fields("response header", |_, _| Ok(false)).map_err(|e| e.to_string())?;
        }
        Resp::decode_versioned(&mut r, version).map_err(|e| e.to_string())
    }

    fn round(&mut self, mut req: FetchRequest, sent: &[Sent]) -> Result<FetchResponse, String> {
        if self.renew_at.is_some_and(|t| Instant::now() >= t) {
            self.disconnect(); // the SASL session ends: a new connection authenticates again
        }
        if self.conn.is_none() {
            self.connect()?;
        }
        if self.fetch_version >= 15 {
            req.replica_id = -1;
        }
        let by_id = self.fetch_version >= 13;
        for t in &mut req.topics {
            if by_id {
                t.topic.clear();
            } else {
                t.topic_id = Uuid::default();
            }
        }
        for t in &mut req.forgotten_topics_data {
            if by_id {
                t.topic.clear();
            } else {
                t.topic_id = Uuid::default();
            }
        }
        let wait = Duration::from_millis(u64::try_from(req.max_wait_ms.max(0)).unwrap_or(0));
        let resp: FetchResponse = self.call(&req, self.fetch_version, wait, true)?;
        if resp.error_code != code::NONE && !is_session_error(resp.error_code) {
            return Err(format!("Fetch answered error {} for {} partition(s)", resp.error_code, sent.len()));
        }
        Ok(resp)
    }

    /// Applies a response (see the module doc, step 3).
    fn apply(&mut self, resp: &FetchResponse, sent: &[Sent]) {
        let by_key: PartitionHashMap<&(Arc<str>, i32), &Sent> = sent.iter().map(|s| (&s.key, s)).collect();
        let mut out_of_range = Vec::new();
        {
            let mut parts = lock(&self.shared.partitions);
            let ids: PartitionHashMap<Uuid, Arc<str>> =
                parts.iter().map(|(k, f)| (f.topic_id, Arc::clone(&k.0))).collect();
            for t in &resp.responses {
                let topic: Arc<str> = if self.fetch_version >= 13 {
                    match ids.get(&t.topic_id) {
                        Some(n) => Arc::clone(n),
                        None => continue,
                    }
                } else {
                    Arc::from(t.topic.as_str())
                };
                for d in &t.partitions {
                    let key = (Arc::clone(&topic), d.partition_index);
                    let (Some(s), Some(f)) = (by_key.get(&key), parts.get_mut(&key)) else { continue };
                    if f.leader_epoch != s.leader_epoch || f.part.is_removed() {
                        continue; // moved on since the request was sent
                    }
                    match self.apply_partition(f, d, s.fetch_offset) {
                        None => f.failures = 0,
                        Some(Retry::OutOfRange) => out_of_range.push((key.clone(), f.leader_epoch)),
                        Some(Retry::Backoff) => f.back_off(Duration::from_millis(self.shared.config.backoff_ms)),
                    }
                }
            }
        }
        for (key, epoch) in out_of_range {
            self.resolve_out_of_range(&key, epoch);
        }
    }

    /// Applies one partition's data; `Some` when it must back off or resolve an out-of-range.
    fn apply_partition(&self, f: &Followed, d: &PartitionData, fetch_offset: i64) -> Option<Retry> {
        let name = f.part.name();
        let source = self.shared.source;
        let log = &f.part.log;
        match d.error_code {
            code::NONE => {}
            code::OFFSET_OUT_OF_RANGE => {
                if d.log_start_offset >= 0 && fetch_offset < d.log_start_offset {
                    // Behind the leader's log start: what we lack is gone; restart there.
                    self.shared.event(
                        LogLine::WARNING,
                        format!("{name}: fetch offset {fetch_offset} is below leader {source}'s log start {}; restarting the log there", d.log_start_offset),
                    );
                    if let Err(e) = log.truncate_fully_and_start_at(d.log_start_offset) {
                        self.shared.event(
                            LogLine::ERROR,
                            format!("{name}: restarting the log at {} failed: {e}", d.log_start_offset),
                        );
                        return Some(Retry::Backoff);
                    }
                    return None;
                }
                return Some(Retry::OutOfRange);
            }
            code::OFFSET_MOVED_TO_TIERED_STORAGE => {
                // Below the leader's local log start, in remote storage: this replica keeps
                // only what is not copied yet, and starts after the last copied offset (the
                // leader holds it locally: it deletes nothing not copied). The metadata log
                // may not have told us of the copy yet: then back off and ask again.
                let copied = f.part.remote().map_or(-1, |r| r.end_offset());
                if copied < fetch_offset {
                    self.shared.event(
                        LogLine::INFO,
                        format!("{name}: fetch offset {fetch_offset} moved to tiered storage at leader {source}; waiting for the remote segments' metadata (last copied offset known here: {copied})"),
                    );
                    return Some(Retry::Backoff);
                }
                let start = copied + 1;
                self.shared.event(
                    LogLine::INFO,
                    format!("{name}: fetch offset {fetch_offset} moved to tiered storage at leader {source}; the local log restarts after the last copied offset, at {start}"),
                );
                if let Err(e) = log.truncate_fully_and_start_at(start) {
                    self.shared.event(LogLine::ERROR, format!("{name}: restarting the log at {start} failed: {e}"));
                    return Some(Retry::Backoff);
                }
                self.restore_copied_state(f, start);
                return None;
            }
            c => {
                let level = if matches!(
                    c,
                    code::NOT_LEADER_OR_FOLLOWER
                        | code::FENCED_LEADER_EPOCH
                        | code::UNKNOWN_LEADER_EPOCH
                        | code::UNKNOWN_TOPIC_OR_PARTITION
                        | code::UNKNOWN_TOPIC_ID
                ) {
                    LogLine::DEBUG
                } else {
                    LogLine::WARNING
                };
                self.shared.event(level, format!("{name}: leader {source} answered error {c} at fetch offset {fetch_offset} (leader epoch {}); backing off", f.leader_epoch));
                return Some(Retry::Backoff);
            }
        }
        if d.diverging_epoch.epoch >= 0 || d.diverging_epoch.end_offset >= 0 {
            let (epoch, leader_end) = (d.diverging_epoch.epoch, d.diverging_epoch.end_offset);
            let to = Self::truncation_point(log, epoch, leader_end);
            self.shared.event(
                LogLine::INFO,
                format!(
                    "{name}: log diverges from leader {source} at epoch {epoch} (leader's end offset {leader_end}); truncating from LEO {} to {to}",
                    log.log_end_offset()
                ),
            );
            if let Err(e) = log.truncate_to(to) {
                self.shared.event(LogLine::ERROR, format!("{name}: truncating to {to} failed: {e}"));
                return Some(Retry::Backoff);
            }
            return None;
        }
        if let Some(Records::Bytes(b)) = d.records.as_ref().filter(|r| !r.is_empty()) {
            if let Err(e) = log.append_as_follower(b.to_vec()) {
                self.shared.event(
                    LogLine::ERROR,
                    format!("{name}: appending data fetched from leader {source} at offset {fetch_offset} failed: {e}"),
                );
                return Some(Retry::Backoff);
            }
        }
        let leo = log.log_end_offset();
        if d.high_watermark >= 0 {
            f.part.follower_high_watermark(d.high_watermark.min(leo));
        }
        if d.log_start_offset > log.log_start_offset() {
            let start = d.log_start_offset.min(log.high_watermark());
            if start > log.log_start_offset() {
                if let Err(e) = log.delete_records_before(start) {
                    self.shared.event(
                        LogLine::WARNING,
                        format!("{name}: following leader {source}'s log start {start} failed: {e}"),
                    );
                }
            }
        }
        None
    }

    /// After a restart at `start` (OFFSET_MOVED_TO_TIERED_STORAGE): the producer state and
    /// leader epoch from the copy of the segment ending just before it (Kafka's "auxiliary
    /// state"), read from the store on this loop's thread, as Kafka's fetcher does. A
    /// failure is logged; the log goes on without them (a producer then starts afresh here).
    fn restore_copied_state(&self, f: &Followed, start: i64) {
        let name = f.part.name();
        let (Some(reader), Some(view)) = (f.part.remote_reader.as_ref(), f.part.remote()) else { return };
        let Some(seg) = view.segments.iter().rev().find(|s| s.end_offset + 1 == start) else { return };
        let store = reader.store();
        let snapshot = store.get(&format!("{}.snapshot", seg.stem));
        let epochs = store.get(&format!("{}.leader-epoch-checkpoint", seg.stem));
        let epoch = epochs.ok().and_then(|b| {
            std::str::from_utf8(&b).ok()?.lines().skip(2).last()?.split_whitespace().next()?.parse::<i32>().ok()
        });
        let key = store.key(&seg.stem);
        match snapshot
            .map_err(|e| e.to_string())
            .and_then(|b| f.part.log.restore_copied_state(start, &b, epoch).map_err(|e| e.to_string()))
        {
            Ok(true) => self.shared.event(
                LogLine::INFO,
                format!("{name}: producer state and leader epoch {epoch:?} restored from {key} at offset {start}"),
            ),
            Ok(false) => self.shared.event(
                LogLine::WARNING,
                format!("{name}: the producer snapshot of {key} does not fit offset {start}; not restored"),
            ),
            Err(e) => self.shared.event(
                LogLine::WARNING,
                format!("{name}: restoring the producer state from {key} failed, going on without it: {e}"),
            ),
        }
    }

    /// Where to truncate for a leader that ends `epoch` at `leader_end`: min(leader's end, our
    /// own end of that epoch); Kafka's fallback to the HW when the leader knows no epoch.
    fn truncation_point(log: &crate::log::Log, epoch: i32, leader_end: i64) -> i64 {
        if epoch < 0 || leader_end < 0 {
            return log.high_watermark();
        }
        let (own_epoch, own_end) = log.end_offset_for_epoch(epoch);
        let own_end = if own_epoch < 0 || own_end < 0 { log.log_end_offset() } else { own_end };
        leader_end.min(own_end)
    }

    /// Above the leader's LEO: ask the leader where our latest epoch ends (OffsetForLeaderEpoch)
    /// and truncate there.
    fn resolve_out_of_range(&mut self, key: &(Arc<str>, i32), leader_epoch: i32) {
        let part = {
            let parts = lock(&self.shared.partitions);
            match parts.get(key) {
                Some(f) if f.leader_epoch == leader_epoch => Arc::clone(&f.part),
                _ => return,
            }
        };
        let log = &part.log;
        let name = part.name();
        let Some(latest) = log.latest_epoch() else {
            // No epoch information: Kafka's fallback, the HW.
            let hw = log.high_watermark();
            self.shared.event(
                LogLine::WARNING,
                format!(
                    "{name}: out of range at leader {} and no leader epochs locally; truncating to the HW {hw}",
                    self.shared.source
                ),
            );
            let _ = log.truncate_to(hw);
            return;
        };
        let req = OffsetForLeaderEpochRequest {
            replica_id: self.shared.config.node_id,
            topics: vec![OffsetForLeaderTopic {
                topic: key.0.to_string(),
                partitions: vec![OffsetForLeaderPartition {
                    partition: key.1,
                    current_leader_epoch: leader_epoch,
                    leader_epoch: latest,
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        };
        let timeout = Duration::from_millis(self.shared.config.socket_timeout_ms);
        let resp: Result<OffsetForLeaderEpochResponse, String> =
            self.call(&req, OFFSET_FOR_LEADER_EPOCH_VERSION, timeout, true);
        let answer = resp.ok().and_then(|r| r.topics.into_iter().next()).and_then(|t| t.partitions.into_iter().next());
        let cap = Duration::from_millis(self.shared.config.backoff_ms);
        let mut parts = lock(&self.shared.partitions);
        let Some(f) = parts.get_mut(key).filter(|f| f.leader_epoch == leader_epoch) else { return };
        match answer {
            Some(a) if a.error_code == code::NONE => {
                let to = Self::truncation_point(log, a.leader_epoch, a.end_offset);
                self.shared.event(
                    LogLine::WARNING,
                    format!(
                        "{name}: LEO {} is past leader {}'s log; epoch {latest} ends at {} there; truncating to {to}",
                        log.log_end_offset(),
                        self.shared.source,
                        a.end_offset
                    ),
                );
                if log.truncate_to(to).is_err() {
                    f.back_off(cap);
                }
            }
            other => {
                self.shared.event(
                    LogLine::WARNING,
                    format!(
                        "{name}: OffsetForLeaderEpoch at leader {} failed ({other:?}); backing off",
                        self.shared.source
                    ),
                );
                f.back_off(cap);
            }
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Retry {
    Backoff,
    OutOfRange,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_from_the_first_up_to_the_cap() {
        let cap = Duration::from_secs(1);
        let got: Vec<u128> = (0..10).map(|n| backoff_after(n, cap).as_millis()).collect();
        assert_eq!(got, vec![10, 20, 40, 80, 160, 320, 640, 1000, 1000, 1000]);
        assert_eq!(backoff_after(u32::MAX, cap), cap);
        assert_eq!(backoff_after(0, Duration::from_millis(3)), Duration::from_millis(3));
    }
}
