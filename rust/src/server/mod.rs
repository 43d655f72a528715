//! The broker's network layer, in Rust: listener, connections, request frames, responses.
//!
//! ```text
//!   clients ──TCP──> network thread (mio loop, network.rs)
//!                      │ frames (muted connection per request)      ▲ Respond / Close
//!                      ▼                                             │ (commands + mio::Waker)
//!                    Shared::events ──notify pipe──> request handlers (Python, trio)
//! ```
//! - The network thread owns every socket. It reads size-prefixed frames into buffers that grow
//!   as bytes arrive, bounded all together by `queued.max.request.bytes` (`memory_pool.rs`),
//!   and writes responses as chunks (bytes, and segment ranges with sendfile).
//! - Each complete frame becomes an `Event::Request` for the handlers; the connection stays
//!   muted until the handler answers with `Command::Respond` (Kafka's one-request-at-a-time
//!   per connection, which keeps responses in order).
//! - The handlers learn of new events through a notify pipe (`notify_fd`): the first event
//!   after a drain writes one byte; `take_events` drains the pipe and the queue together
//!   under one lock, so no wake-up is lost.
//! - Closed connections are reported (`Event::Closed`, with a reason and whether it is a
//!   fault) so the handlers can log them at the right level.
//!
//! Thread-safety: `NetworkServer` methods may be called from any thread.

pub mod authorizer;
pub mod connection;
pub mod expected_followers;
pub mod fetch;
pub mod fetch_session;
pub mod fetch_session_handler;
pub mod memory_pool;
pub mod metrics;
pub mod network;
pub mod partition;
pub mod partition_hash;
pub mod principal_mapping;
pub mod produce;
pub mod quota;
pub mod replica_fetcher;
pub mod request;
pub mod sasl_client;
pub mod schema_ids;
pub mod session_changes;
pub mod tls_client;
pub mod transport;
pub mod x500;

#[cfg(test)]
mod data_path_tests;

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, ToSocketAddrs};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use bytes::Bytes;
use mio::net::TcpListener;
use mio::{Poll, Waker};

use crate::protocol::Chunk;
use memory_pool::MemoryPool;
use network::{NetworkLoop, WAKER};
use partition::{PartitionTable, Wakeup};

/// The APIs the network thread serves itself, with their version ranges (advertised in
/// ApiVersions by the Python side, which serves every other API).
pub const DATA_PATH_APIS: [(i16, i16, i16); 2] =
    [(0, produce::MIN_VERSION, produce::MAX_VERSION), (1, fetch::MIN_VERSION, fetch::MAX_VERSION)];

/// A log line for the Python side's logging (the network thread has no logger of its own).
#[derive(Debug)]
pub struct LogLine {
    /// Python's logging levels.
    pub level: i32,
    pub message: String,
}

impl LogLine {
    pub const DEBUG: i32 = 10;
    pub const INFO: i32 = 20;
    pub const WARNING: i32 = 30;
    pub const ERROR: i32 = 40;

    pub fn new(level: i32, message: String) -> Self {
        LogLine { level, message }
    }
}

/// One listener: a name (Kafka's listener name), an address, and its security protocol
/// (TLS settings for SSL and SASL_SSL; `sasl` for SASL_PLAINTEXT and SASL_SSL).
#[derive(Debug, Clone)]
pub struct ListenerConfig {
    pub name: String,
    pub host: String,
    pub port: u16,
    /// TLS settings when the security protocol is SSL or SASL_SSL (`transport.rs`).
    pub tls: Option<std::sync::Arc<rustls::ServerConfig>>,
    /// SASL_PLAINTEXT or SASL_SSL: a connection has no principal until the handlers
    /// authenticate it (`Command::Authenticated`), and until then every frame goes to them
    /// (Produce and Fetch too).
    pub sasl: bool,
}

/// Listeners and limits.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// `socket.request.max.bytes`: a larger frame closes the connection.
    pub max_frame: usize,
    /// `queued.max.request.bytes`: all request buffers together (<= 0: unbounded).
    pub queued_max_request_bytes: i64,
    /// `connections.max.idle.ms` (None: never).
    pub idle: Option<Duration>,
    /// `max.incremental.fetch.session.cache.slots` (KIP-227 sessions kept; 0: none).
    pub fetch_session_slots: usize,
    /// The listeners, each bound at start (the first is the one `address` names).
    pub listeners: Vec<ListenerConfig>,
    /// `sasl.server.max.receive.size`: the frame limit of a connection without a principal.
    pub sasl_max_receive: usize,
    /// `ssl.principal.mapping.rules`: certificate subjects to principal names.
    pub principal_mapping: principal_mapping::PrincipalMapper,
}

/// The principal of connections on a listener without SASL (Kafka's `User:ANONYMOUS`).
pub const ANONYMOUS: &str = "User:ANONYMOUS";

/// What the network thread reports to the handlers.
#[derive(Debug)]
pub enum Event {
    /// A whole request frame from connection `conn` on listener `listener` (its index in
    /// `ServerConfig::listeners`); answer with `respond` or `close`. `principal`: who the
    /// connection authenticated as (`None`: a SASL listener's connection that has not
    /// authenticated yet).
    Request { conn: u64, frame: Bytes, peer: String, principal: Option<Arc<str>>, listener: usize },
    /// The network thread closed `conn`; `fault` is false for ordinary hang-ups and idling.
    Closed { conn: u64, peer: String, reason: String, fault: bool },
    /// The network thread hit an error it cannot attribute to one connection.
    Fatal(String),
    /// Something the data path wants logged (logger `logbroker.datapath`).
    Log(LogLine),
    /// The HW of a partition the control plane watches moved (`Partition::watch_high_watermark`).
    HighWatermark { topic: Arc<str>, partition: i32 },
    /// A transactions-v2 Produce on `conn` whose partitions its transaction coordinator must
    /// add first; answer with `serve_verified` (the frame back, with a verdict per partition).
    Verify { conn: u64, frame: Bytes, peer: String, verification: produce::Verification },
    /// A Produce on `conn` with partitions naming a schema id this broker's table does not
    /// hold (`missing`, the first): the registry reads `_schemas` to its end, then
    /// `serve_caught_up` (the rest of the request is served already).
    CatchUpSchemas { conn: u64, peer: String, missing: String },
}

/// What the handlers tell the network thread.
#[derive(Debug)]
pub enum Command {
    /// The answer to the request in flight on `conn` (`None`: no response, e.g. acks=0);
    /// `throttle_ms` > 0: a request quota's throttle time, the connection muted for it.
    Respond {
        conn: u64,
        chunks: Option<Vec<Chunk>>,
        throttle_ms: i32,
    },
    /// Serve the Produce `frame` of `conn` again, after its coordinator's `verdicts`.
    ServeVerified {
        conn: u64,
        frame: Bytes,
        verdicts: Vec<produce::Verdict>,
    },
    /// Append the held-back partitions of `conn`'s Produce, after the registry read `_schemas`.
    ServeCaughtUp {
        conn: u64,
    },
    /// Close `conn` (a protocol violation); the reason is reported back as a fault.
    Close {
        conn: u64,
        reason: Option<String>,
    },
    /// `conn` authenticated (SASL) as `principal`; the session ends after `session_ms`
    /// (KIP-368, `None`: never), when only re-authentication is served.
    Authenticated {
        conn: u64,
        principal: Arc<str>,
        session_ms: Option<u64>,
    },
    /// Answer the request in flight on `conn`, then close it once the answer is written
    /// (a failed authentication: the client reads why, and gets no second try on it).
    RespondAndClose {
        conn: u64,
        chunks: Vec<Chunk>,
        reason: String,
    },
    Shutdown,
}

#[derive(Debug, Default)]
pub struct Stats {
    pub connections: AtomicU64,
    pub requests: AtomicU64,
    /// Incremental fetch sessions open now.
    pub fetch_sessions: AtomicU64,
    /// Partitions those sessions hold, all sessions together (at most a tick old).
    pub fetch_session_partitions: AtomicU64,
    /// Requests answered per API, with their times (`metrics.rs`).
    pub by_api: metrics::RequestStats,
    /// When the network thread last came round its loop (`mono_ms`): a thread blocked in a
    /// request (a log lock held across disk I/O, a slow disk) stops every connection, and
    /// the node's watchdog (python/logbroker/broker/loop_watchdog.py) reports it.
    pub loop_beat_ms: AtomicU64,
    /// The API key + 1 of the last request the thread started serving in this turn of its
    /// loop (0: none).
    pub serving_api: AtomicU64,
}

/// Milliseconds on a monotonic clock shared by the process, from 1 (its first call).
pub fn mono_ms() -> u64 {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    u64::try_from(START.get_or_init(std::time::Instant::now).elapsed().as_millis()).map_or(u64::MAX, |ms| ms + 1)
}

struct EventQueue {
    events: VecDeque<Event>,
    notified: bool,
}

pub struct Shared {
    pub config: ServerConfig,
    pub pool: MemoryPool,
    pub stats: Stats,
    /// The partitions the data path serves (set by the control plane).
    pub table: Arc<PartitionTable>,
    events: Mutex<EventQueue>,
    commands: Mutex<Vec<Command>>,
    wakeup: Arc<Wakeup>,
    notify_tx: UnixStream,
    notify_rx: UnixStream,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    fn push_event(&self, ev: Event) {
        let mut q = lock(&self.events);
        q.events.push_back(ev);
        if !q.notified {
            q.notified = true;
            // A full pipe already holds a wake-up; nothing else can go wrong on a socketpair.
            let _ = (&self.notify_tx).write(&[1]);
        }
    }

    fn command(&self, cmd: Command) {
        lock(&self.commands).push(cmd);
        self.wakeup.wake(Vec::new());
    }
}

/// The running network layer (see the module doc).
pub struct NetworkServer {
    shared: Arc<Shared>,
    addresses: Vec<SocketAddr>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl NetworkServer {
    /// Binds every listener (port 0 picks one) and starts the network thread.
    pub fn start(config: ServerConfig, table: Arc<PartitionTable>) -> io::Result<NetworkServer> {
        let mut listeners = Vec::with_capacity(config.listeners.len());
        let mut addresses = Vec::with_capacity(config.listeners.len());
        for l in &config.listeners {
            let (host, port) = (l.host.as_str(), l.port);
            let addr = (host, port).to_socket_addrs()?.next().ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("listener {}: {host}:{port} resolves to no address", l.name),
                )
            })?;
            let listener = TcpListener::bind(addr)
                .map_err(|e| io::Error::new(e.kind(), format!("listener {} cannot bind {host}:{port}: {e}", l.name)))?;
            addresses.push(listener.local_addr()?);
            listeners.push(listener);
        }
        if listeners.is_empty() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "no listener to bind"));
        }
        let poll = Poll::new()?;
        let wakeup = Arc::clone(table.wakeup());
        if !wakeup.attach(Waker::new(poll.registry(), WAKER)?) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the partition table already serves another network server",
            ));
        }
        let (notify_tx, notify_rx) = UnixStream::pair()?;
        notify_tx.set_nonblocking(true)?;
        notify_rx.set_nonblocking(true)?;
        let shared = Arc::new(Shared {
            pool: MemoryPool::new(config.queued_max_request_bytes),
            config,
            stats: Stats::default(),
            table,
            events: Mutex::new(EventQueue { events: VecDeque::new(), notified: false }),
            commands: Mutex::new(Vec::new()),
            wakeup,
            notify_tx,
            notify_rx,
        });
        let lp = NetworkLoop::new(poll, listeners, Arc::clone(&shared))?;
        let thread = std::thread::Builder::new().name("logbroker-network".into()).spawn(move || lp.run())?;
        Ok(NetworkServer { shared, addresses, thread: Mutex::new(Some(thread)) })
    }

    /// The bound address of each listener, in `ServerConfig::listeners` order.
    pub fn addresses(&self) -> &[SocketAddr] {
        &self.addresses
    }

    /// Readable when events are waiting (see `take_events`).
    pub fn notify_fd(&self) -> RawFd {
        self.shared.notify_rx.as_raw_fd()
    }

    /// Every waiting event, oldest first; drains the notify pipe.
    pub fn take_events(&self) -> Vec<Event> {
        let mut q = lock(&self.shared.events);
        let mut sink = [0u8; 64];
        while matches!((&self.shared.notify_rx).read(&mut sink), Ok(n) if n > 0) {}
        q.notified = false;
        q.events.drain(..).collect()
    }

    pub fn respond(&self, conn: u64, chunks: Option<Vec<Chunk>>, throttle_ms: i32) {
        self.shared.command(Command::Respond { conn, chunks, throttle_ms });
    }

    pub fn serve_verified(&self, conn: u64, frame: Bytes, verdicts: Vec<produce::Verdict>) {
        self.shared.command(Command::ServeVerified { conn, frame, verdicts });
    }

    pub fn serve_caught_up(&self, conn: u64) {
        self.shared.command(Command::ServeCaughtUp { conn });
    }

    pub fn close(&self, conn: u64, reason: Option<String>) {
        self.shared.command(Command::Close { conn, reason });
    }

    pub fn authenticated(&self, conn: u64, principal: Arc<str>, session_ms: Option<u64>) {
        self.shared.command(Command::Authenticated { conn, principal, session_ms });
    }

    pub fn respond_and_close(&self, conn: u64, chunks: Vec<Chunk>, reason: String) {
        self.shared.command(Command::RespondAndClose { conn, chunks, reason });
    }

    /// Stops the network thread (closing every connection and the listener) and waits for it.
    pub fn shutdown(&self) {
        let handle = lock(&self.thread).take();
        if let Some(h) = handle {
            self.shared.command(Command::Shutdown);
            let _ = h.join();
        }
    }

    pub fn shared(&self) -> &Shared {
        &self.shared
    }
}

impl Drop for NetworkServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}
