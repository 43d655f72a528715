//! The network thread: one mio (epoll) loop that accepts connections, reads request frames,
//! hands them to the request handlers and writes their responses.
//!
//! The loop never blocks on anything but `poll`: reads and writes are non-blocking. Produce
//! and Fetch frames are served right here (`produce.rs`, `fetch.rs`: decode, append or read,
//! encode); every other frame goes to the Python handlers (`Shared::events`), whose answers
//! come back as commands through `Shared::commands` with a `mio::Waker` poke.
//! Parked requests (Fetch long polls, acks=all Produce) wait in `parked` until a partition
//! wakes them (`Wakeup`) or their deadline passes. Idle connections are closed after
//! `connections.max.idle.ms`, checked once a second.
//! Client quotas (`quota.rs`): a Produce or consumer Fetch over its byte-rate or request-time
//! quota, or a request the handlers answer over its request-time quota (`Command::Respond`'s
//! `throttle_ms`), is answered with a throttle time, and the connection's requests are not
//! read until it has passed (KIP-219); `throttled` holds the muted connections.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::net::TcpListener;
use mio::{Events, Interest, Poll, Token};

use super::authorizer::Caller;
use super::connection::{ConnError, Connection, Phase, ReadOutcome};
use super::expected_followers::ExpectedFollowers;
use super::fetch_session::FetchSessionCache;
use super::partition::Partition;
use super::request::{decode_header, peek_api};
use super::transport::Transport;
use super::{fetch, produce, quota, Command, Event, Shared, ANONYMOUS};
use crate::protocol::messages::{FetchRequest, ProduceRequest};
use crate::protocol::{Chunk, Message, ProtocolError, Reader};

/// What serving a Produce or Fetch led to.
enum Served {
    /// Answered now (`None`: a request without a response, acks=0).
    Now(Option<Vec<Chunk>>),
    /// Waiting on partitions.
    Park(Parked),
    /// Handed to the Python side for the transaction coordinator (transactions v2).
    Verify(produce::Verification),
    /// Partitions held back while the schema registry reads `_schemas` (the rest served).
    CatchUpSchemas(Box<produce::CaughtUpLater>),
}

/// A request waiting on partitions.
enum Parked {
    Produce(Box<produce::PendingProduce>),
    Fetch(Box<fetch::PendingFetch>),
}

impl Parked {
    /// Every partition the request waits on.
    fn for_each_partition(&self, f: impl FnMut(&Arc<Partition>)) {
        match self {
            Parked::Produce(p) => p.partitions().for_each(f),
            Parked::Fetch(fetch) => fetch.waiting_on.iter().for_each(f),
        }
    }

    /// A follower's fetch waits for the leader's LEO, everything else for the HW.
    fn waits_for_leo(&self) -> bool {
        matches!(self, Parked::Fetch(f) if f.is_follower())
    }

    fn deadline(&self) -> Instant {
        match self {
            Parked::Produce(p) => p.deadline,
            Parked::Fetch(f) => f.deadline,
        }
    }
}

pub const WAKER: Token = Token(0);
/// Listener `i` polls as token `FIRST_LISTENER + i`; connections start at `FIRST_CONN`.
const FIRST_LISTENER: usize = 1;
const MAX_LISTENERS: usize = 1000;
const FIRST_CONN_TOKEN: usize = FIRST_LISTENER + MAX_LISTENERS;
const FIRST_CONN: u64 = FIRST_CONN_TOKEN as u64;
const TICK: Duration = Duration::from_secs(1);
/// How long after a failed accept (out of descriptors) the listeners are tried again.
const ACCEPT_RETRY: Duration = Duration::from_millis(100);

pub struct NetworkLoop {
    poll: Poll,
    listeners: Vec<TcpListener>,
    shared: Arc<Shared>,
    conns: HashMap<u64, Connection>,
    next_id: u64,
    /// Connections waiting for pool memory, oldest first.
    paused: VecDeque<u64>,
    /// Requests waiting on partitions, by connection.
    parked: HashMap<u64, Parked>,
    /// Produces with partitions held back until the schema registry has read `_schemas`
    /// (`serve_caught_up`), by connection.
    held: HashMap<u64, Box<produce::CaughtUpLater>>,
    /// Incremental fetch sessions (KIP-227).
    sessions: FetchSessionCache,
    /// Connections muted by a client quota, and until when.
    throttled: HashMap<u64, Instant>,
    /// Followers expected to add partitions this broker became leader of.
    expected: ExpectedFollowers,
    last_tick: Instant,
    /// Set while accepting failed (out of descriptors): when to try every listener again.
    accept_retry_at: Option<Instant>,
    /// Accepting failed and has not succeeded since (the failure is reported once).
    accept_failing: bool,
}

impl NetworkLoop {
    pub fn new(poll: Poll, mut listeners: Vec<TcpListener>, shared: Arc<Shared>) -> io::Result<Self> {
        if listeners.len() > MAX_LISTENERS {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} listeners; at most {MAX_LISTENERS}", listeners.len()),
            ));
        }
        for (i, l) in listeners.iter_mut().enumerate() {
            poll.registry().register(l, Token(FIRST_LISTENER + i), Interest::READABLE)?;
        }
        let sessions = FetchSessionCache::new(shared.config.fetch_session_slots);
        Ok(NetworkLoop {
            poll,
            listeners,
            shared,
            conns: HashMap::new(),
            next_id: FIRST_CONN,
            paused: VecDeque::new(),
            parked: HashMap::new(),
            held: HashMap::new(),
            sessions,
            throttled: HashMap::new(),
            expected: ExpectedFollowers::default(),
            last_tick: Instant::now(),
            accept_retry_at: None,
            accept_failing: false,
        })
    }

    /// Runs until a `Shutdown` command; then every connection is closed.
    pub fn run(mut self) {
        let mut events = Events::with_capacity(1024);
        loop {
            if let Err(e) = self.poll.poll(&mut events, Some(self.poll_timeout())) {
                if e.kind() != io::ErrorKind::Interrupted {
                    self.shared.push_event(Event::Fatal(format!("network loop poll failed: {e}")));
                    break;
                }
            }
            self.beat();
            for ev in &events {
                match ev.token() {
                    WAKER => {}
                    Token(t) if t < FIRST_CONN_TOKEN => self.accept(t - FIRST_LISTENER),
                    Token(t) => self.service(t as u64),
                }
            }
            if !self.run_commands() {
                break;
            }
            self.retry_accept();
            self.run_parked();
            self.unmute_throttled();
            self.resume_paused();
            if self.last_tick.elapsed() >= TICK {
                self.last_tick = Instant::now();
                self.close_idle();
                self.shared
                    .stats
                    .fetch_session_partitions
                    .store(self.sessions.partitions_cached() as u64, Ordering::Relaxed);
            }
        }
        let ids: Vec<u64> = self.conns.keys().copied().collect();
        for id in ids {
            self.close(id, None);
        }
        self.shared.stats.loop_beat_ms.store(0, Ordering::Relaxed); // stopped: no turn to watch
    }

    /// The loop came round (`Stats::loop_beat_ms`), once a turn after its poll (an idle poll
    /// waits at most `TICK`); no request is being served.
    fn beat(&self) {
        let stats = &self.shared.stats;
        stats.loop_beat_ms.store(super::mono_ms(), Ordering::Relaxed);
        stats.serving_api.store(0, Ordering::Relaxed);
    }

    fn accept(&mut self, listener: usize) {
        let Some(config) = self.shared.config.listeners.get(listener) else { return };
        let (tls, sasl) = (config.tls.clone(), config.sasl);
        loop {
            match self.listeners[listener].accept() {
                Ok((mut stream, addr)) => {
                    self.accept_failing = false;
                    let _ = stream.set_nodelay(true);
                    let id = self.next_id;
                    self.next_id += 1;
                    if let Err(e) = self.poll.registry().register(
                        &mut stream,
                        Token(id as usize),
                        Interest::READABLE | Interest::WRITABLE,
                    ) {
                        self.shared.push_event(Event::Closed {
                            conn: id,
                            peer: peer_name(addr),
                            reason: format!("registering the connection failed: {e}"),
                            fault: true,
                        });
                        continue;
                    }
                    let transport = match Transport::new(stream, tls.as_ref()) {
                        Ok(t) => t,
                        Err(e) => {
                            self.shared.push_event(Event::Closed {
                                conn: id,
                                peer: peer_name(addr),
                                reason: format!("{e}"),
                                fault: true,
                            });
                            continue;
                        }
                    };
                    let principal = if sasl { None } else { Some(Arc::from(ANONYMOUS)) };
                    let mut conn = Connection::new(id, transport, peer_name(addr), principal, listener);
                    conn.principal_from_certificate = tls.is_some() && !sasl;
                    self.conns.insert(id, conn);
                    self.shared.stats.connections.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    // EMFILE and the like: report once, and retry after `ACCEPT_RETRY` (the
                    // listener is edge-triggered: connections waiting in its backlog bring no
                    // new readiness event, and would wait until another client connects).
                    if !self.accept_failing {
                        self.accept_failing = true;
                        self.shared.push_event(Event::Fatal(format!(
                            "accepting a connection failed: {e}; retrying every {} ms",
                            ACCEPT_RETRY.as_millis()
                        )));
                    }
                    self.accept_retry_at = Some(Instant::now() + ACCEPT_RETRY);
                    return;
                }
            }
        }
    }

    /// Progress on one connection after a readiness event (or a state change): write what
    /// is pending, then read and serve requests, for as long as each is answered at once.
    /// A loop, not recursion: a client streaming pipelined requests that are all answered
    /// inline (produce at full speed) must not grow the stack.
    fn service(&mut self, id: u64) {
        loop {
            let Some(conn) = self.conns.get_mut(&id) else { return };
            // TLS: handshake messages and encrypted bytes left over from the last write.
            if let Err(e) = conn.transport.flush() {
                let (reason, fault) = io_reason(&e, "writing TLS records");
                self.close(id, Some((reason, fault)));
                return;
            }
            if conn.phase == Phase::Writing {
                match conn.write_pending() {
                    Ok(true) => {
                        if let Some(reason) = conn.close_after_write.take() {
                            self.close(id, Some((reason, false)));
                            return;
                        }
                        conn.phase = Phase::Reading;
                    }
                    Ok(false) => return,
                    Err(e) => {
                        let (reason, fault) = io_reason(&e, "writing the response");
                        self.close(id, Some((reason, fault)));
                        return;
                    }
                }
            }
            if conn.phase != Phase::Reading || conn.paused_for_memory || conn.throttled_until.is_some() {
                return;
            }
            let max_frame = if conn.principal.is_some() {
                (self.shared.config.max_frame, "socket.request.max.bytes")
            } else {
                (self.shared.config.sasl_max_receive, "sasl.server.max.receive.size")
            };
            match conn.read_frame(&self.shared.pool, max_frame) {
                Ok(ReadOutcome::Frame(frame)) => {
                    if conn.principal_from_certificate {
                        conn.principal_from_certificate = false;
                        match conn.certificate_principal(&self.shared.config.principal_mapping) {
                            Ok(p) => conn.principal = Some(p),
                            Err(reason) => {
                                self.close(id, Some((reason, true)));
                                return;
                            }
                        }
                    }
                    conn.phase = Phase::Handling;
                    let peer = conn.peer.clone();
                    self.shared.stats.requests.fetch_add(1, Ordering::Relaxed);
                    let api = peek_api(&frame);
                    conn.in_flight = api.map(|(key, _)| (key, Instant::now()));
                    if let Some(reason) = conn.session_expired_for(api.map(|(key, _)| key), Instant::now()) {
                        self.close(id, Some((reason, true)));
                        return;
                    }
                    // Unauthenticated SASL connections: every frame to the handlers.
                    let (Some((key @ (0 | 1), version)), Some(_)) = (api, &conn.principal) else {
                        let (principal, listener) = (conn.principal.clone(), conn.listener);
                        self.shared.push_event(Event::Request { conn: id, frame, peer, principal, listener });
                        return;
                    };
                    if !self.serve_data(id, key, version, frame, &peer, None) {
                        return; // parked, or the connection closed
                    }
                    // Answered: go on with this connection (write, then the next request).
                }
                Ok(ReadOutcome::WouldBlock) => return,
                Ok(ReadOutcome::NoMemory) => {
                    self.paused.push_back(id);
                    return;
                }
                Ok(ReadOutcome::Closed) => {
                    self.close(id, Some(("closed by the client".to_owned(), false)));
                    return;
                }
                Err(ConnError::Protocol(msg)) => {
                    self.close(id, Some((msg, true)));
                    return;
                }
                Err(ConnError::Io(e)) => {
                    let (reason, fault) = io_reason(&e, "reading a request");
                    self.close(id, Some((reason, fault)));
                    return;
                }
            }
        }
    }

    /// Serves a Produce (0) or Fetch (1) frame here, without Python. True when it was
    /// answered at once (the answer is queued); false when it was parked or the connection
    /// closed.
    /// `verdicts`: the coordinator's answers for a Produce that went to it first.
    fn serve_data(
        &mut self,
        id: u64,
        api_key: i16,
        version: i16,
        frame: bytes::Bytes,
        peer: &str,
        verdicts: Option<&[produce::Verdict]>,
    ) -> bool {
        self.shared.stats.serving_api.store(u64::from(api_key.unsigned_abs()) + 1, Ordering::Relaxed);
        let (name, lo, hi, flexible_min) = if api_key == 0 {
            ("Produce", produce::MIN_VERSION, produce::MAX_VERSION, ProduceRequest::FLEXIBLE_MIN)
        } else {
            ("Fetch", fetch::MIN_VERSION, fetch::MAX_VERSION, FetchRequest::FLEXIBLE_MIN)
        };
        let mut r = Reader::new(frame.clone());
        let header = match decode_header(&mut r, version >= flexible_min) {
            Ok(h) => h,
            Err(e) => {
                self.close(id, Some((format!("request header from {peer} does not decode: {e}"), true)));
                return false;
            }
        };
        if version < lo || version > hi {
            let client = header.client_id.as_deref().unwrap_or("");
            self.close(id, Some((format!("{name} v{version} from {peer} (client {client:?}) is not supported; this broker serves v{lo}-{hi}"), true)));
            return false;
        }
        let mut logs = Vec::new();
        let table = Arc::clone(&self.shared.table);
        let (principal, listener) = self.conns.get(&id).map_or((None, 0), |c| (c.principal.clone(), c.listener));
        let principal = principal.unwrap_or_else(|| Arc::from(ANONYMOUS));
        let client_id = header.client_id.as_deref().unwrap_or("");
        let caller = Caller { peer, principal: &principal, listener, client_id, conn: id };
        // Kafka's request quota: the time handling the request takes, from here (one clock
        // read pair per request, and none without a `request_percentage` quota).
        let quotas = table.client_quotas();
        let request_started = quotas.enabled(quota::REQUEST).then(Instant::now);
        let result: Result<Served, ProtocolError> = if api_key == 0 {
            let now_ms =
                std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
            // Client quotas: the request's bytes count once (not again when a verified
            // request is served a second time).
            let user = quota::user_of(&principal);
            let bytes_throttle_ms = match self.conns.get(&id) {
                Some(_) if verdicts.is_none() => {
                    quotas.record(quota::PRODUCE, user, client_id, frame.len() as u64, now_ms)
                }
                Some(c) => c.throttle_ms,
                None => 0,
            };
            // Called once the partitions are appended to (not for acks=0, exempt as in Kafka):
            // the larger of the two throttles is the answer's.
            let mut applied = bytes_throttle_ms;
            let mut throttle = || {
                if let Some(t) = request_started {
                    let nanos = u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX);
                    applied = applied.max(quotas.record_request(user, client_id, nanos, now_ms));
                }
                applied
            };
            let outcome = produce::handle(
                &table,
                &mut r,
                version,
                header.correlation_id,
                &caller,
                now_ms,
                &mut logs,
                verdicts,
                &mut throttle,
            );
            if let Some(c) = self.conns.get_mut(&id) {
                c.throttle_ms = applied;
            }
            outcome.map(|o| match o {
                produce::Outcome::Done(chunks) => Served::Now(chunks),
                produce::Outcome::Wait(p) => Served::Park(Parked::Produce(Box::new(p))),
                produce::Outcome::Verify(v) => Served::Verify(v),
                produce::Outcome::CatchUpSchemas(later) => Served::CatchUpSchemas(later),
            })
        } else {
            fetch::handle(
                &table,
                &mut self.sessions,
                &mut r,
                version,
                header.correlation_id,
                &caller,
                &mut logs,
                request_started,
            )
            .map(|o| match o {
                fetch::Outcome::Done(chunks, throttle_ms) => {
                    if let Some(c) = self.conns.get_mut(&id) {
                        c.throttle_ms = throttle_ms;
                    }
                    Served::Now(Some(chunks))
                }
                fetch::Outcome::Wait(f) => Served::Park(Parked::Fetch(f)),
            })
        };
        for line in logs {
            self.shared.push_event(Event::Log(line));
        }
        self.shared.stats.fetch_sessions.store(self.sessions.len() as u64, Ordering::Relaxed);
        match result {
            Ok(Served::Now(answer)) => self.complete(id, answer),
            Ok(Served::Park(parked)) => {
                self.park(id, parked);
                false
            }
            Ok(Served::Verify(verification)) => {
                // The connection stays muted until the handlers send the frame back.
                self.shared.push_event(Event::Verify { conn: id, frame, peer: peer.to_owned(), verification });
                false
            }
            Ok(Served::CatchUpSchemas(later)) => {
                // Muted, as for Verify, until the handlers call `serve_caught_up`.
                let missing = later.missing().to_owned();
                self.held.insert(id, later);
                self.shared.push_event(Event::CatchUpSchemas { conn: id, peer: peer.to_owned(), missing });
                false
            }
            Err(e) => {
                self.close(id, Some((format!("{name} v{version} request from {peer} does not decode: {e}"), true)));
                false
            }
        }
    }

    /// Re-checks parked requests that were woken or whose deadline passed.
    fn run_parked(&mut self) {
        let now = Instant::now();
        for (topic, partition) in self.shared.table.wakeup().take_hw_moved() {
            self.shared.push_event(Event::HighWatermark { topic, partition });
        }
        let led = self.shared.table.wakeup().take_new_leaderships();
        if !led.is_empty() {
            // their parked fetches do not carry the new partitions: answer them early
            let followers = self.expected.note(led, now);
            for p in self.parked.values_mut() {
                if let Parked::Fetch(f) = p {
                    if followers.contains(&f.replica_id()) {
                        f.deadline = self.expected.answer_early(f.replica_id(), f.partitions(), f.deadline, now);
                    }
                }
            }
        }
        let mut due: Vec<u64> = self.shared.table.wakeup().take();
        due.extend(self.parked.iter().filter(|(_, p)| p.deadline() <= now).map(|(id, _)| *id));
        due.sort_unstable();
        due.dedup();
        for id in due {
            let Some(mut parked) = self.parked.remove(&id) else { continue };
            let expired = parked.deadline() <= now;
            let mut logs = Vec::new();
            let done = match &mut parked {
                Parked::Produce(p) => p.try_complete(expired),
                Parked::Fetch(f) => f.try_complete(&self.shared.table, &mut self.sessions, expired, &mut logs),
            };
            for line in logs {
                self.shared.push_event(Event::Log(line));
            }
            match done {
                Ok(Some(chunks)) => {
                    Self::unpark(id, &parked);
                    if let (Parked::Fetch(f), Some(c)) = (&parked, self.conns.get_mut(&id)) {
                        c.throttle_ms = f.throttle_ms;
                    }
                    self.finish(id, Some(chunks));
                }
                // Still waiting: (re-)register on the partitions it now waits on.
                Ok(None) => self.park(id, parked),
                Err(e) => {
                    Self::unpark(id, &parked);
                    self.close(id, Some((format!("encoding a response failed: {e}"), true)));
                }
            }
        }
    }

    fn park(&mut self, id: u64, mut parked: Parked) {
        if let Parked::Fetch(f) = &mut parked {
            if f.is_follower() {
                f.deadline =
                    self.expected.park_until(f.replica_id(), f.resolved(), f.partitions(), f.deadline, Instant::now());
            }
        }
        let for_leo = parked.waits_for_leo();
        parked.for_each_partition(|part| part.add_waiter(id, for_leo));
        if let Parked::Fetch(f) = &parked {
            if f.raced() {
                self.shared.table.wakeup().wake(vec![id]); // what it waits for came meanwhile
            }
        }
        if let Parked::Fetch(f) = &parked {
            if let Some(c) = f.changes() {
                c.park(id); // its quiet partitions wake it through the session
            }
        }
        self.parked.insert(id, parked);
    }

    fn unpark(id: u64, parked: &Parked) {
        parked.for_each_partition(|part| part.remove_waiter(id));
        if let Parked::Fetch(f) = parked {
            if let Some(c) = f.changes() {
                c.unpark(id);
            }
        }
    }

    /// Accepts again on every listener once the retry time after a failed accept passed (a
    /// success ends the failure: the next one is reported again).
    fn retry_accept(&mut self) {
        if self.accept_retry_at.is_none_or(|t| t > Instant::now()) {
            return;
        }
        self.accept_retry_at = None;
        for i in 0..self.listeners.len() {
            self.accept(i);
        }
    }

    fn poll_timeout(&self) -> Duration {
        let now = Instant::now();
        self.parked
            .values()
            .map(Parked::deadline)
            .chain(self.throttled.values().copied())
            .chain(self.accept_retry_at)
            .map(|t| t.saturating_duration_since(now))
            .min()
            .map_or(TICK, |d| d.min(TICK))
    }

    /// Reads again from connections whose quota throttle time has passed.
    fn unmute_throttled(&mut self) {
        if self.throttled.is_empty() {
            return;
        }
        let now = Instant::now();
        let due: Vec<u64> = self.throttled.iter().filter(|(_, &t)| t <= now).map(|(&id, _)| id).collect();
        for id in due {
            self.throttled.remove(&id);
            if let Some(c) = self.conns.get_mut(&id) {
                c.throttled_until = None;
                self.service(id);
            }
        }
    }

    /// The request in flight on `conn` is answered (`None`: it has no response); then the
    /// connection goes on (the next request may already wait in the socket, and no new
    /// readiness event comes for it).
    fn finish(&mut self, conn: u64, chunks: Option<Vec<Chunk>>) {
        if self.complete(conn, chunks) {
            self.service(conn);
        }
    }

    /// Queues the answer of the request in flight on `conn`; false if there is none.
    fn complete(&mut self, conn: u64, chunks: Option<Vec<Chunk>>) -> bool {
        let Some(c) = self.conns.get_mut(&conn) else { return false };
        if c.phase != Phase::Handling {
            return false;
        }
        c.release_request(&self.shared.pool);
        if let Some((api_key, since)) = c.in_flight.take() {
            self.shared.stats.by_api.observe(api_key, since.elapsed());
        }
        if c.throttle_ms > 0 {
            // KIP-219: the response goes out now; the next request is read after the throttle time.
            let until = Instant::now() + Duration::from_millis(u64::try_from(c.throttle_ms).unwrap_or(0));
            c.throttle_ms = 0;
            c.throttled_until = Some(until);
            self.throttled.insert(conn, until);
        }
        match chunks {
            Some(chunks) => {
                c.queue_response(chunks);
                c.phase = Phase::Writing;
            }
            None => c.phase = Phase::Reading,
        }
        true
    }

    /// Applies the handlers' answers; false on shutdown.
    fn run_commands(&mut self) -> bool {
        let cmds = std::mem::take(&mut *self.shared.commands.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
        for cmd in cmds {
            match cmd {
                Command::Respond { conn, chunks, throttle_ms } => {
                    if let Some(c) = self.conns.get_mut(&conn).filter(|c| c.phase == Phase::Handling) {
                        c.throttle_ms = c.throttle_ms.max(throttle_ms);
                    }
                    self.finish(conn, chunks);
                }
                Command::ServeVerified { conn, frame, verdicts } => self.serve_verified(conn, frame, &verdicts),
                Command::ServeCaughtUp { conn } => self.serve_caught_up(conn),
                Command::Close { conn, reason } => self.close(conn, reason.map(|r| (r, true))),
                Command::Authenticated { conn, principal, session_ms } => {
                    if let Some(c) = self.conns.get_mut(&conn) {
                        c.principal = Some(principal);
                        c.session_expires = session_ms.map(|ms| Instant::now() + Duration::from_millis(ms));
                    }
                }
                Command::RespondAndClose { conn, chunks, reason } => {
                    if let Some(c) = self.conns.get_mut(&conn) {
                        c.close_after_write = Some(reason);
                    }
                    self.finish(conn, Some(chunks));
                }
                Command::Shutdown => return false,
            }
        }
        true
    }

    /// Serves again a Produce that went to the transaction coordinator, with its verdicts.
    fn serve_verified(&mut self, conn: u64, frame: bytes::Bytes, verdicts: &[produce::Verdict]) {
        let Some(c) = self.conns.get(&conn) else { return };
        if c.phase != Phase::Handling {
            return;
        }
        let peer = c.peer.clone();
        let Some((0, version)) = peek_api(&frame) else {
            self.close(conn, Some((format!("a verified request from {peer} is not a Produce"), true)));
            return;
        };
        if self.serve_data(conn, 0, version, frame, &peer, Some(verdicts)) {
            self.service(conn);
        }
    }

    /// The held-back partitions of `conn`'s Produce, appended now that the registry has read
    /// `_schemas` (or gave up); then answered, or parked for the HW, as any Produce.
    fn serve_caught_up(&mut self, conn: u64) {
        let Some(later) = self.held.remove(&conn) else { return };
        if self.conns.get(&conn).is_none_or(|c| c.phase != Phase::Handling) {
            return;
        }
        let now_ms =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
        let mut logs = Vec::new();
        let table = Arc::clone(&self.shared.table);
        let result = produce::finish_caught_up(&table, *later, now_ms, &mut logs);
        for line in logs {
            self.shared.push_event(Event::Log(line));
        }
        let answered = match result {
            Ok(produce::Outcome::Done(chunks)) => self.complete(conn, chunks),
            Ok(produce::Outcome::Wait(p)) => {
                self.park(conn, Parked::Produce(Box::new(p)));
                false
            }
            Ok(_) => unreachable!("finish_caught_up answers or waits for the HW"),
            Err(e) => {
                self.close(conn, Some((format!("the Produce response does not encode: {e}"), true)));
                false
            }
        };
        if answered {
            self.service(conn);
        }
    }

    fn resume_paused(&mut self) {
        let n = self.paused.len();
        for _ in 0..n {
            let Some(id) = self.paused.pop_front() else { break };
            let Some(c) = self.conns.get_mut(&id) else { continue };
            c.paused_for_memory = false;
            self.service(id);
            if self.conns.get(&id).is_some_and(|c| c.paused_for_memory) {
                // Still no room: it keeps its place at the head, the rest wait behind it.
                if self.paused.back() == Some(&id) {
                    self.paused.pop_back();
                }
                self.paused.push_front(id);
                break;
            }
        }
    }

    fn close_idle(&mut self) {
        let Some(idle) = self.shared.config.idle else { return };
        let stale: Vec<u64> = self
            .conns
            .values()
            .filter(|c| c.phase == Phase::Reading && c.last_active.elapsed() >= idle)
            .map(|c| c.id)
            .collect();
        for id in stale {
            let ms = idle.as_millis() as u64;
            self.close(id, Some((format!("idle for connections.max.idle.ms={ms}"), false)));
        }
    }

    /// Closes and forgets a connection; `reason` (text, is it a fault) is reported to Python.
    fn close(&mut self, id: u64, reason: Option<(String, bool)>) {
        let Some(mut c) = self.conns.remove(&id) else { return };
        if let Some(parked) = self.parked.remove(&id) {
            Self::unpark(id, &parked);
        }
        self.held.remove(&id);
        self.sessions.remove_of_connection(id);
        let _ = self.poll.registry().deregister(c.transport.socket());
        c.release_all(&self.shared.pool);
        self.paused.retain(|p| *p != id);
        self.throttled.remove(&id);
        self.shared.stats.connections.fetch_sub(1, Ordering::Relaxed);
        if let Some((reason, fault)) = reason {
            self.shared.push_event(Event::Closed { conn: id, peer: c.peer.clone(), reason, fault });
        }
    }
}

fn peer_name(addr: SocketAddr) -> String {
    addr.to_string()
}

/// A close reason for an I/O error, and whether it is a fault (an ordinary hang-up is not).
fn io_reason(e: &io::Error, doing: &str) -> (String, bool) {
    let ordinary = matches!(
        e.kind(),
        io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionAborted
    );
    (format!("{doing}: {e}"), !ordinary)
}
