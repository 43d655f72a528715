//! One client connection: reads size-prefixed request frames and writes response chunks.
//!
//! # States
//! `Reading` (waiting for a whole frame) -> `Handling` (one request is being served; the
//! connection is *muted*: nothing more is read, as Kafka does, which keeps responses in
//! request order while clients pipeline into the socket buffer) -> `Writing` (the response's
//! chunks: bytes with write(2), segment ranges with sendfile(2)) -> `Reading`.
//! A request without a response (Produce with acks=0) goes from `Handling` straight back to
//! `Reading`.
//!
//! # Memory
//! Small frames are cut from a fixed per-connection read buffer (`READ_BUF`). A larger frame
//! gets a buffer of its own that grows as its bytes arrive (never allocated at its announced
//! size up front), each growth reserved in the `MemoryPool` first; when the pool is full the
//! connection stops reading until memory is released. The frame's reservation is held until
//! its request has been answered (`release_request`).
//!
//! Invariants: `rstart <= rend <= READ_BUF`; `partial.buf.len() <= partial.size`;
//! `reserved` equals the pool bytes this connection holds.

use std::collections::VecDeque;
use std::io;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;

use super::memory_pool::MemoryPool;
use super::transport::Transport;
use crate::protocol::Chunk;

/// The per-connection read buffer (small frames are cut from it).
pub const READ_BUF: usize = 16 << 10;
/// A large frame's buffer grows by at least this much per step (and at most doubles).
const GROW_MIN: usize = 64 << 10;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Reading,
    Handling,
    Writing,
}

/// What reading produced.
#[derive(Debug)]
pub enum ReadOutcome {
    /// A whole request frame (without its size prefix).
    Frame(Bytes),
    /// The socket has no more bytes now.
    WouldBlock,
    /// The pool is full: stop reading until memory is released.
    NoMemory,
    /// The client closed the connection.
    Closed,
}

/// Why a connection must be closed.
#[derive(Debug)]
pub enum ConnError {
    /// A protocol violation (the message says what, naming sizes and limits).
    Protocol(String),
    Io(io::Error),
}

struct PartialFrame {
    buf: Vec<u8>,
    size: usize,
    /// Pool bytes reserved for `buf` (its usable size; `buf.len() <= reserved <= size`).
    reserved: usize,
}

pub struct Connection {
    pub id: u64,
    pub transport: Transport,
    pub peer: String,
    pub phase: Phase,
    pub last_active: Instant,
    /// Waiting for the pool (see the module doc).
    pub paused_for_memory: bool,
    /// The API key of the request being handled and when its frame was complete.
    pub in_flight: Option<(i16, Instant)>,
    /// Who the connection authenticated as: `ANONYMOUS` without SASL; on a SASL listener
    /// `None` until the handlers authenticate it; on an SSL listener `User:<certificate
    /// subject>` once the client's certificate is known (`certificate_principal`).
    pub principal: Option<Arc<str>>,
    /// An SSL listener without SASL: the principal comes from the client's certificate,
    /// read when the first request arrives (the handshake is over by then).
    pub principal_from_certificate: bool,
    /// When the SASL session ends (KIP-368): after it only SaslHandshake (17) and
    /// SaslAuthenticate (36) are served, anything else closes the connection.
    pub session_expires: Option<Instant>,
    /// Close once the queued response is written (why).
    pub close_after_write: Option<String>,
    /// The index of the listener it came in on (`ServerConfig::listeners`).
    pub listener: usize,
    /// Client quotas (quota.rs): the throttle time of the request in flight, applied when
    /// its response is queued, and until when no request is read (KIP-219 muting).
    pub throttle_ms: i32,
    pub throttled_until: Option<Instant>,
    rbuf: Box<[u8]>,
    rstart: usize,
    rend: usize,
    partial: Option<PartialFrame>,
    /// Pool bytes held: the frame being read plus the request being handled.
    reserved: usize,
    /// Of `reserved`, the bytes of the request being handled.
    request_reserved: usize,
    out: VecDeque<Chunk>,
    out_off: u64,
}

impl Connection {
    /// Kafka's SSL principal: `User:` and the subject of the client's certificate (RFC 2253)
    /// as `ssl.principal.mapping.rules` maps it, or `User:ANONYMOUS` when it sent none. Err: a
    /// subject that cannot be read or that no rule maps.
    pub fn certificate_principal(
        &self,
        mapping: &super::principal_mapping::PrincipalMapper,
    ) -> Result<Arc<str>, String> {
        match self.transport.peer_certificate() {
            None => Ok(Arc::from(super::ANONYMOUS)),
            Some(der) => mapping.principal(der).map(Arc::from),
        }
    }

    pub fn new(id: u64, transport: Transport, peer: String, principal: Option<Arc<str>>, listener: usize) -> Self {
        Connection {
            id,
            transport,
            peer,
            phase: Phase::Reading,
            last_active: Instant::now(),
            paused_for_memory: false,
            in_flight: None,
            principal,
            principal_from_certificate: false,
            session_expires: None,
            close_after_write: None,
            listener,
            throttle_ms: 0,
            throttled_until: None,
            rbuf: vec![0u8; READ_BUF].into_boxed_slice(),
            rstart: 0,
            rend: 0,
            partial: None,
            reserved: 0,
            request_reserved: 0,
            out: VecDeque::new(),
            out_off: 0,
        }
    }

    /// Reads until a whole frame is here, the socket is drained, or the pool is full.
    /// `max_frame` is the limit and the name of its config key (for the error).
    pub fn read_frame(
        &mut self,
        pool: &MemoryPool,
        (max_frame, limit_key): (usize, &str),
    ) -> Result<ReadOutcome, ConnError> {
        debug_assert_eq!(self.phase, Phase::Reading);
        loop {
            if let Some(p) = &mut self.partial {
                if p.buf.len() == p.size {
                    let p = self.partial.take().expect("checked");
                    self.request_reserved = p.reserved;
                    return Ok(ReadOutcome::Frame(Bytes::from(p.buf)));
                }
                let len = p.buf.len();
                if len == p.reserved {
                    let grown = p.size.min(len.saturating_mul(2).max(len + GROW_MIN));
                    let more = grown - p.reserved;
                    if !pool.try_reserve(more) {
                        self.paused_for_memory = true;
                        return Ok(ReadOutcome::NoMemory);
                    }
                    self.reserved += more;
                    p.reserved = grown;
                    p.buf.reserve_exact(grown - len);
                }
                let want = p.reserved - len;
                p.buf.resize(len + want, 0);
                match self.transport.read(&mut p.buf[len..]) {
                    Ok(0) => {
                        p.buf.truncate(len);
                        return Ok(ReadOutcome::Closed);
                    }
                    Ok(n) => {
                        p.buf.truncate(len + n);
                        self.last_active = Instant::now();
                    }
                    Err(e) => {
                        p.buf.truncate(len);
                        match e.kind() {
                            io::ErrorKind::WouldBlock => return Ok(ReadOutcome::WouldBlock),
                            io::ErrorKind::Interrupted => {}
                            _ => return Err(ConnError::Io(e)),
                        }
                    }
                }
                continue;
            }
            let have = self.rend - self.rstart;
            if have >= 4 {
                let raw = i32::from_be_bytes(self.rbuf[self.rstart..self.rstart + 4].try_into().expect("4 bytes"));
                let size = usize::try_from(raw).ok().filter(|&s| s <= max_frame).ok_or_else(|| {
                    ConnError::Protocol(format!(
                        "frame size {raw} from {} is outside [0, {limit_key}={max_frame}]",
                        self.peer
                    ))
                })?;
                let body = have - 4;
                if body >= size {
                    if !pool.try_reserve(size) {
                        self.paused_for_memory = true;
                        return Ok(ReadOutcome::NoMemory);
                    }
                    self.reserved += size;
                    self.request_reserved = size;
                    let start = self.rstart + 4;
                    let frame = Bytes::copy_from_slice(&self.rbuf[start..start + size]);
                    self.rstart = start + size;
                    if self.rstart == self.rend {
                        self.rstart = 0;
                        self.rend = 0;
                    }
                    return Ok(ReadOutcome::Frame(frame));
                }
                if size > READ_BUF - 4 {
                    // A large frame: it gets its own growing buffer, starting with what is here.
                    let first = size.min(body.max(GROW_MIN));
                    if !pool.try_reserve(first) {
                        self.paused_for_memory = true;
                        return Ok(ReadOutcome::NoMemory);
                    }
                    self.reserved += first;
                    let mut buf = Vec::with_capacity(first);
                    buf.extend_from_slice(&self.rbuf[self.rstart + 4..self.rend]);
                    self.rstart = 0;
                    self.rend = 0;
                    self.partial = Some(PartialFrame { buf, size, reserved: first });
                    continue;
                }
            }
            // Need more bytes in the read buffer: make room at the end, then read.
            if self.rstart > 0 {
                self.rbuf.copy_within(self.rstart..self.rend, 0);
                self.rend -= self.rstart;
                self.rstart = 0;
            }
            match self.transport.read(&mut self.rbuf[self.rend..]) {
                Ok(0) => return Ok(ReadOutcome::Closed),
                Ok(n) => {
                    self.rend += n;
                    self.last_active = Instant::now();
                }
                Err(e) => match e.kind() {
                    io::ErrorKind::WouldBlock => return Ok(ReadOutcome::WouldBlock),
                    io::ErrorKind::Interrupted => {}
                    _ => return Err(ConnError::Io(e)),
                },
            }
        }
    }

    /// The request in `Handling` is answered (or needs no answer): its memory goes back.
    pub fn release_request(&mut self, pool: &MemoryPool) {
        pool.release(self.request_reserved);
        self.reserved -= self.request_reserved;
        self.request_reserved = 0;
    }

    /// Everything this connection holds goes back to the pool (it is closing).
    pub fn release_all(&mut self, pool: &MemoryPool) {
        pool.release(self.reserved);
        self.reserved = 0;
        self.request_reserved = 0;
        self.partial = None;
    }

    /// Why a request with `api_key` may not be served now: the SASL session expired and
    /// the request is not a re-authentication.
    pub fn session_expired_for(&self, api_key: Option<i16>, now: Instant) -> Option<String> {
        let expires = self.session_expires?;
        if expires > now || matches!(api_key, Some(17 | 36)) {
            return None;
        }
        let who = self.principal.as_deref().unwrap_or("?");
        Some(format!(
            "the SASL session of {who} from {} expired (connections.max.reauth.ms) and the client sent api {} instead of re-authenticating",
            self.peer,
            api_key.map_or_else(|| "?".to_owned(), |k| k.to_string())
        ))
    }

    pub fn queue_response(&mut self, chunks: Vec<Chunk>) {
        self.out.extend(chunks);
        self.out_off = 0;
    }

    /// Writes queued chunks until done (true) or the socket is full (false).
    pub fn write_pending(&mut self) -> io::Result<bool> {
        while let Some(front) = self.out.front() {
            let (n, len) = match front {
                Chunk::Bytes(b) => {
                    let off = self.out_off as usize;
                    match self.transport.write(&b[off..]) {
                        Ok(n) => (n as u64, b.len() as u64),
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                        Err(e) => return Err(e),
                    }
                }
                Chunk::File(r) => match self.transport.send_region(r, self.out_off, r.length - self.out_off) {
                    Ok(n) => (n, r.length),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                    Err(e) => return Err(e),
                },
            };
            if n > 0 {
                self.last_active = Instant::now();
            }
            self.out_off += n;
            if self.out_off >= len {
                self.out.pop_front();
                self.out_off = 0;
            } else if n == 0 {
                return Err(io::Error::new(io::ErrorKind::WriteZero, "the socket accepted no bytes"));
            }
        }
        self.transport.flush()
    }
}
