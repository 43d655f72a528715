"""The sans-I/O network layer: broker connections as protocol state machines, and
`Pending` results. No sockets here: a driver (`driver.py` for threads, `logbroker.aio` for
trio) moves bytes between sockets and these objects.

# Connection
`Connection` is one broker link. Its life: NEW (the driver should open a socket) ->
READY once the driver calls `connected()`; the first request is always ApiVersions, and
requests queued before its answer wait, then go out at the highest version both sides speak
(capped by `VERSION_CAPS`, the newest versions that still name topics rather than topic ids).
The driver `recv_into`s `read_target()` (the rest of the size prefix, then the frame body)
and reports the count with `advance(n)`; each complete frame resolves its request's
`Pending`, in the order the broker answered (Kafka answers in order per connection; the
correlation id is checked). A large Fetch response is read into a buffer the connection
reuses for the next one, so its byte fields (memoryviews) are valid only while its `Pending`
callbacks run; the consumer copies the records out there. `close(exc)` fails everything
outstanding with `exc`. A request for which no response is expected (Produce with acks=0)
resolves when its bytes are handed out.

# Network
`Network` owns the connections, keyed by node id (bootstrap servers get ids -1, -2, ...;
group coordinators `("coordinator", node_id)`), hands the driver the ones to open
(`to_connect()`) and the bytes to write (`outgoing()`), enforces `request.timeout.ms`
(`tick(now)` closes a connection whose oldest request is overdue, as Kafka does), and backs
off reconnects per node.

Thread-confinement: everything here runs in the I/O loop's thread (or trio task); the
public API reaches it through the driver's command queue.
"""

from __future__ import annotations

import collections
import struct
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

from logbroker.client.errors import KafkaConnectionError, KafkaError, KafkaTimeoutError, error_for
from logbroker.protocol import REQUESTS, ProtocolError, decode_response, encode_request
from logbroker.protocol.messages.api_versions_request import _ApiVersionsRequest

__all__ = ["VERSION_CAPS", "Connection", "Network", "Pending", "Versioned", "gather"]

T = TypeVar("T")

API_VERSIONS = 18
# The newest version of each API this client sends (topic names, not topic ids).
VERSION_CAPS = {0: 12, 1: 12, 2: 9, 3: 12, 8: 9, 9: 7, 10: 6, 11: 9, 12: 4, 13: 5, 14: 5, 18: 3}

_SIZE = struct.Struct(">i")
_FETCH = 1
# Fetch responses at least this large are read into the connection's reused buffer.
_REUSE_AT = 256 << 10


class Pending(Generic[T]):
    """A result that arrives later: resolved or failed exactly once; callbacks run then (or at
    once if already done), in the thread that resolves it."""

    __slots__ = ("_callbacks", "_done", "_error", "_value")

    def __init__(self) -> None:
        self._done = False
        self._value: Any = None
        self._error: BaseException | None = None
        self._callbacks: list[Callable[[Pending[T]], object]] = []

    @classmethod
    def of(cls, value: T) -> Pending[T]:
        p: Pending[T] = cls()
        p.resolve(value)
        return p

    def done(self) -> bool:
        return self._done

    def resolve(self, value: T) -> None:
        if not self._done:
            self._done, self._value = True, value
            self._run()

    def fail(self, error: BaseException) -> None:
        if not self._done:
            self._done, self._error = True, error
            self._run()

    def _run(self) -> None:
        cbs, self._callbacks = self._callbacks, []
        for cb in cbs:
            cb(self)

    def add_callback(self, fn: Callable[[Pending[T]], object]) -> None:
        if self._done:
            fn(self)
        else:
            self._callbacks.append(fn)

    @property
    def error(self) -> BaseException | None:
        return self._error

    def result(self) -> T:
        """The value (raises the error); only valid once done."""
        if not self._done:
            raise RuntimeError("Pending.result() before it is done")
        if self._error is not None:
            raise self._error
        return self._value

    def chain(self, fn: Callable[[T], Any]) -> Pending[Any]:
        """A Pending of `fn(value)` (errors, including fn's, propagate)."""
        out: Pending[Any] = Pending()

        def on_done(p: Pending[T]) -> None:
            if p._error is not None:
                out.fail(p._error)
                return
            try:
                v = fn(p._value)
            except Exception as e:  # noqa: BLE001 - handed to the waiter
                out.fail(e)
                return
            if isinstance(v, Pending):
                v.add_callback(lambda q: out.fail(q._error) if q._error is not None else out.resolve(q._value))
            else:
                out.resolve(v)

        self.add_callback(on_done)
        return out


def gather(pendings: list[Pending[Any]]) -> Pending[list[Any]]:
    """All results in order; the first error fails the whole."""
    out: Pending[list[Any]] = Pending()
    if not pendings:
        out.resolve([])
        return out
    left = [len(pendings)]

    def one(p: Pending[Any]) -> None:
        if p.error is not None:
            out.fail(p.error)
            return
        left[0] -= 1
        if left[0] == 0 and not out.done():
            out.resolve([q._value for q in pendings])

    for p in pendings:
        p.add_callback(one)
    return out


class Versioned:
    """A request body that depends on the negotiated version: `build(version) -> body`;
    `max_version` caps the version for this request (e.g. transactional Produce at v11)."""

    __slots__ = ("api_key", "build", "max_version")

    def __init__(self, api_key: int, build: Callable[[int], Any], max_version: int | None = None) -> None:
        self.api_key = api_key
        self.build = build
        self.max_version = max_version


class _Req:
    __slots__ = ("api_key", "body", "correlation_id", "deadline", "expect_response", "pending", "version")

    def __init__(self, body: Any, pending: Pending[Any], expect_response: bool, deadline: float) -> None:
        self.body = body
        self.api_key: int = body.api_key
        self.pending = pending
        self.expect_response = expect_response
        self.deadline = deadline
        self.version = -1
        self.correlation_id = -1


class Connection:
    """One broker link (see the module docstring). `state`: new, connecting, ready, closed."""

    def __init__(self, node_id: Hashable, host: str, port: int, client_id: str) -> None:
        self.node_id = node_id
        self.host = host
        self.port = port
        self.client_id = client_id
        self.state = "new"
        self.versions: dict[int, tuple[int, int]] | None = None
        self._correlation = 0
        self._out: list[Any] = []
        self._out_bytes = 0
        self._head = bytearray(4)
        self._frame: bytearray | memoryview | None = None
        self._fetch_buf: bytearray | None = None
        self._filled = 0
        self._in_flight: collections.deque[_Req] = collections.deque()
        self._waiting: list[_Req] = []
        self.error: BaseException | None = None
        self.last_used = 0.0

    def __repr__(self) -> str:
        return f"<Connection node={self.node_id} {self.host}:{self.port} {self.state}>"

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    def has_outgoing(self) -> bool:
        return bool(self._out)

    def outgoing(self) -> list[Any]:
        """The bytes to write, as chunks; the driver must write all of them in order."""
        out, self._out, self._out_bytes = self._out, [], 0
        return out

    def version_for(self, api_key: int) -> int:
        ours = REQUESTS[api_key].valid_versions
        hi = min(ours[1], VERSION_CAPS.get(api_key, ours[1]))
        if self.versions is None:
            return hi
        theirs = self.versions.get(api_key)
        if theirs is None:
            raise error_for(35, f"broker {self.host}:{self.port} does not support {REQUESTS[api_key].name}")
        lo, hi = max(ours[0], theirs[0]), min(hi, theirs[1])
        if lo > hi:
            raise error_for(35, f"no common version of {REQUESTS[api_key].name}: ours {ours}, broker {theirs}")
        return hi

    def supports(self, api_key: int) -> bool:
        return self.versions is None or api_key in self.versions

    def connected(self, now: float) -> None:
        """The socket is open: negotiate versions first."""
        self.state = "ready"
        self.last_used = now
        req = _ApiVersionsRequest(client_software_name="logbroker-python", client_software_version="0.1.0")
        p: Pending[Any] = Pending()
        p.add_callback(self._on_versions)
        r = _Req(req, p, True, now + 30.0)
        self._encode(r, 3)

    def _on_versions(self, p: Pending[Any]) -> None:
        if p.error is not None:
            return
        resp = p._value
        if resp.error_code == 35 and self.versions is None:
            # The broker is older: it answered with its ranges at v0 (KIP-511).
            pass
        self.versions = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
        waiting, self._waiting = self._waiting, []
        for r in waiting:
            self._send(r)

    def request(self, body: Any, now: float, timeout: float, expect_response: bool = True) -> Pending[Any]:
        p: Pending[Any] = Pending()
        if self.state == "closed":
            p.fail(self.error or KafkaConnectionError(f"connection to {self.host}:{self.port} is closed"))
            return p
        r = _Req(body, p, expect_response, now + timeout)
        if self.versions is None:
            self._waiting.append(r)
        else:
            self._send(r)
        self.last_used = now
        return p

    def _send(self, r: _Req) -> None:
        try:
            version = self.version_for(r.api_key)
        except KafkaError as e:
            r.pending.fail(e)
            return
        cap = r.body.max_version if isinstance(r.body, Versioned) else None
        if cap is not None and version > cap:
            lo = self.versions.get(r.api_key, (0, 0))[0] if self.versions else 0
            if cap < lo:
                r.pending.fail(error_for(35, f"broker {self.host}:{self.port} needs {REQUESTS[r.api_key].name} "
                                             f"v{lo}+, this request goes up to v{cap}"))
                return
            version = cap
        self._encode(r, version)

    def _encode(self, r: _Req, version: int) -> None:
        self._correlation = (self._correlation + 1) & 0x7FFFFFFF
        r.version, r.correlation_id = version, self._correlation
        try:
            body = r.body.build(version) if isinstance(r.body, Versioned) else r.body
            chunks = encode_request(r.api_key, version, r.correlation_id, self.client_id, body)
        except ProtocolError as e:
            r.pending.fail(e)
            return
        self._out.extend(chunks)
        if r.expect_response:
            self._in_flight.append(r)
        else:
            r.pending.resolve(None)

    def read_target(self) -> memoryview:
        """Where the next received bytes should go (for `recv_into`): the rest of the size
        prefix, or the rest of the current frame's body, allocated at its exact size so a
        large response is read straight into the buffer it is decoded from."""
        if self._frame is None:
            return memoryview(self._head)[self._filled:]
        return memoryview(self._frame)[self._filled:]

    def advance(self, n: int, now: float) -> None:
        """`n` bytes were written into `read_target()`."""
        self.last_used = now
        self._filled += n
        if self._frame is None:
            if self._filled == 4:
                (size,) = _SIZE.unpack(self._head)
                self._frame = self._frame_buffer(size)
                self._filled = 0
                if size == 0:
                    self._complete_frame()
        elif self._filled == len(self._frame):
            self._complete_frame()

    def _frame_buffer(self, size: int) -> bytearray | memoryview:
        """Where a `size`-byte frame is read. A large Fetch response goes into this
        connection's reused buffer: its records are copied out (into pooled buffers, see
        `_core.decode_records`) while the response is dispatched, and a fresh multi-MiB
        `bytearray` per fetch would cost a zero-fill and a page fault per 4 KiB."""
        if size < _REUSE_AT or not self._in_flight or self._in_flight[0].api_key != _FETCH:
            return bytearray(size)
        buf = self._fetch_buf
        if buf is None or len(buf) < size:
            buf = self._fetch_buf = bytearray(size)
        return memoryview(buf)[:size]

    def _complete_frame(self) -> None:
        frame, self._frame, self._filled = self._frame, None, 0
        assert frame is not None
        self._dispatch(frame)

    def _dispatch(self, frame: bytes | bytearray | memoryview) -> None:
        if not self._in_flight:
            self.close(KafkaConnectionError(f"{self.host}:{self.port} sent a response to no request"))
            return
        r = self._in_flight.popleft()
        try:
            correlation_id, body = decode_response(r.api_key, r.version, frame)
        except ProtocolError as e:
            r.pending.fail(e)
            return
        if correlation_id != r.correlation_id:
            self.close(KafkaConnectionError(
                f"{self.host}:{self.port}: correlation id {correlation_id} != expected {r.correlation_id}"))
            r.pending.fail(KafkaConnectionError("correlation id mismatch"))
            return
        r.pending.resolve(body)

    def overdue(self, now: float) -> bool:
        return bool(self._in_flight) and self._in_flight[0].deadline <= now or any(
            r.deadline <= now for r in self._waiting)

    def next_deadline(self) -> float | None:
        ds = [r.deadline for r in self._waiting]
        if self._in_flight:
            ds.append(self._in_flight[0].deadline)
        return min(ds) if ds else None

    def close(self, exc: BaseException | None = None) -> None:
        if self.state == "closed":
            return
        self.state = "closed"
        self.error = exc or KafkaConnectionError(f"connection to {self.host}:{self.port} closed")
        reqs = list(self._in_flight) + self._waiting
        self._in_flight.clear()
        self._waiting = []
        self._out = []
        for r in reqs:
            r.pending.fail(self.error)


class Network:
    """All connections of one client (see the module docstring)."""

    def __init__(self, bootstrap: list[tuple[str, int]], client_id: str, request_timeout: float,
                 reconnect_backoff: float = 0.05, reconnect_backoff_max: float = 1.0) -> None:
        self.client_id = client_id
        self.request_timeout = request_timeout
        self.addresses: dict[Hashable, tuple[str, int]] = {-(i + 1): hp for i, hp in enumerate(bootstrap)}
        self.bootstrap_ids = list(self.addresses)
        self.conns: dict[Hashable, Connection] = {}
        self._backoff: dict[Hashable, tuple[float, float]] = {}  # node -> (retry at, current backoff)
        self._backoff_min = reconnect_backoff
        self._backoff_max = reconnect_backoff_max
        self.closed_conns: list[Connection] = []
        self.now = 0.0

    def set_address(self, node_id: Hashable, host: str, port: int) -> None:
        old = self.addresses.get(node_id)
        self.addresses[node_id] = (host, port)
        if old is not None and old != (host, port) and node_id in self.conns:
            self.conns[node_id].close(KafkaConnectionError(f"node {node_id} moved to {host}:{port}"))

    def connection(self, node_id: Hashable) -> Connection:
        c = self.conns.get(node_id)
        if c is None or c.state == "closed":
            if node_id not in self.addresses:
                raise KafkaConnectionError(f"no address for node {node_id}")
            host, port = self.addresses[node_id]
            c = Connection(node_id, host, port, self.client_id)
            self.conns[node_id] = c
        return c

    def request(self, node_id: Hashable, body: Any, *, timeout: float | None = None,
                expect_response: bool = True) -> Pending[Any]:
        try:
            c = self.connection(node_id)
        except KafkaError as e:
            p: Pending[Any] = Pending()
            p.fail(e)
            return p
        retry_at = self._backoff.get(node_id, (0.0, 0.0))[0]
        if c.state == "new" and retry_at > self.now:
            pass  # it will connect once the backoff ends; the request waits in the connection
        return c.request(body, self.now, self.request_timeout if timeout is None else timeout, expect_response)

    def is_ready(self, node_id: Hashable) -> bool:
        c = self.conns.get(node_id)
        return c is not None and c.state == "ready" and c.versions is not None

    def in_flight(self, node_id: Hashable) -> int:
        c = self.conns.get(node_id)
        return c.in_flight if c is not None and c.state != "closed" else 0

    def any_node(self) -> Hashable:
        """A node to ask for metadata: a ready connection if any, else a known broker or
        bootstrap server not backing off."""
        ready = [n for n, c in self.conns.items() if c.state == "ready" and not isinstance(n, tuple)]
        if ready:
            return min(ready, key=lambda n: self.conns[n].in_flight)
        candidates = [n for n in self.addresses if not isinstance(n, tuple)]
        brokers = [n for n in candidates if isinstance(n, int) and n >= 0] or self.bootstrap_ids
        for n in brokers:
            if self._backoff.get(n, (0.0, 0.0))[0] <= self.now:
                return n
        return brokers[0]

    # -- driver interface ---------------------------------------------------------------

    def to_connect(self) -> list[Connection]:
        """Connections the driver should open now (marked connecting)."""
        out = []
        for n, c in self.conns.items():
            if c.state == "new" and self._backoff.get(n, (0.0, 0.0))[0] <= self.now:
                c.state = "connecting"
                out.append(c)
        return out

    def on_connected(self, c: Connection) -> None:
        self._backoff.pop(c.node_id, None)
        c.connected(self.now)

    def on_connect_failed(self, c: Connection, exc: BaseException) -> None:
        _, cur = self._backoff.get(c.node_id, (0.0, 0.0))
        cur = min(self._backoff_max, max(self._backoff_min, cur * 2))
        self._backoff[c.node_id] = (self.now + cur, cur)
        c.close(KafkaConnectionError(f"cannot connect to {c.host}:{c.port} (node {c.node_id}): {exc}"))

    def on_closed(self, c: Connection, exc: BaseException | None = None) -> None:
        c.close(exc or KafkaConnectionError(f"connection to {c.host}:{c.port} (node {c.node_id}) was closed"))

    def with_outgoing(self) -> list[Connection]:
        return [c for c in self.conns.values() if c.state == "ready" and c.has_outgoing()]

    def tick(self, now: float) -> None:
        self.now = now
        for c in list(self.conns.values()):
            if c.state == "closed":
                continue
            if c.overdue(now):
                c.close(KafkaTimeoutError(
                    f"request to {c.host}:{c.port} (node {c.node_id}) got no response within "
                    f"request.timeout.ms={self.request_timeout * 1000:.0f}"))
        for n in [n for n, c in self.conns.items() if c.state == "closed"]:
            self.closed_conns.append(self.conns.pop(n))

    def next_deadline(self) -> float | None:
        ds = [d for c in self.conns.values() if (d := c.next_deadline()) is not None]
        ds += [t for n, (t, _) in self._backoff.items() if n in self.conns and self.conns[n].state == "new"]
        return min(ds) if ds else None

    def close(self) -> None:
        for c in self.conns.values():
            c.close()
