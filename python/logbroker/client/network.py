"""The sans-I/O network layer: broker connections as protocol state machines, and
`Pending` results. No sockets here: a driver (`driver.py` for threads, `async_driver.py` for
asyncio and trio) moves bytes between sockets and these objects.

# Connection
`Connection` is one broker link. Its life: NEW (the driver should open a socket) ->
READY once the driver calls `connected()`; the first request is always ApiVersions, and
requests queued before its answer wait, then go out at the highest version both sides speak
(capped by `VERSION_CAPS`, the newest versions that still name topics rather than topic ids).
With SASL (security.protocol SASL_PLAINTEXT/SASL_SSL; client/sasl.py) they wait longer:
after ApiVersions the connection sends SaslHandshake and SaslAuthenticate itself, and lets
them go once authenticated; a failed authentication closes it with `SaslAuthenticationError`
(which `Network` reports to the core: `on_auth_error`). When the broker gives the session a
lifetime (KIP-368), the connection re-authenticates in place before it ends: new requests
wait, the ones in flight are answered, SaslHandshake + SaslAuthenticate go out again, then
the waiting requests.
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
import random
import struct
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

from logbroker.client.errors import (
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    SaslAuthenticationError,
    error_for,
)
from logbroker.client.oauthbearer import OAuthBearerClient
from logbroker.client.sasl import GssapiClient, GssapiSaslConfig, OAuthSaslConfig, Plain, SaslConfig, ScramClient
from logbroker.protocol import REQUESTS, ProtocolError, decode_response, encode_request
from logbroker.protocol.messages.api_versions_request import _ApiVersionsRequest
from logbroker.protocol.messages.sasl_authenticate_request import _SaslAuthenticateRequest
from logbroker.protocol.messages.sasl_handshake_request import _SaslHandshakeRequest

__all__ = ["VERSION_CAPS", "Connection", "Network", "Pending", "Versioned", "gather"]

T = TypeVar("T")

API_VERSIONS = 18
SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
UNSUPPORTED_SASL_MECHANISM = 33
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

    def settle_from(self, other: Pending[T]) -> None:
        """Resolves or fails this as `other` (done) did: `other.add_callback(p.settle_from)`."""
        if other._error is not None:
            self.fail(other._error)
        else:
            self.resolve(other._value)

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
        value: T = self._value
        return value

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
    """One broker link (see the module docstring). `state`: new, connecting, ready, closed.
    `sasl`: the credentials to authenticate with (None: no SASL); `on_auth(conn, error)` is
    told how each authentication ended (error None: it succeeded); `auth_timeout` bounds each
    step of the exchange (request.timeout.ms)."""

    def __init__(
        self,
        node_id: Hashable,
        host: str,
        port: int,
        client_id: str,
        sasl: SaslConfig | OAuthSaslConfig | GssapiSaslConfig | None = None,
        on_auth: Callable[[Connection, SaslAuthenticationError | None], object] | None = None,
        auth_timeout: float = 30.0,
    ) -> None:
        self.node_id = node_id
        self.host = host
        self.port = port
        self.client_id = client_id
        self.state = "new"
        self.sasl = sasl
        self._on_auth = on_auth
        self._auth_timeout = auth_timeout
        self.authenticated = sasl is None
        self._mech: Plain | ScramClient | OAuthBearerClient | GssapiClient | None = None  # the SASL exchange under way
        self._auth_version = 0  # of SaslAuthenticate
        self.reauth_at: float | None = None  # KIP-368: when to re-authenticate
        self._reauth_due = False  # new requests wait: re-authentication starts once none is in flight
        self._now = 0.0
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

    @property
    def usable(self) -> bool:
        """Requests go out at once (versions known, authenticated, not re-authenticating)."""
        return self.versions is not None and self.authenticated and self._mech is None and not self._reauth_due

    def connected(self, now: float) -> None:
        """The socket is open: negotiate versions first."""
        self.state = "ready"
        self.last_used = self._now = now
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
        if self.sasl is not None:
            self._start_sasl()
        else:
            self._release()

    def _release(self) -> None:
        """Send the requests that waited (for versions or authentication)."""
        waiting, self._waiting = self._waiting, []
        for r in waiting:
            self._send(r)

    def request(self, body: Any, now: float, timeout: float, expect_response: bool = True) -> Pending[Any]:
        p: Pending[Any] = Pending()
        if self.state == "closed":
            p.fail(self.error or KafkaConnectionError(f"connection to {self.host}:{self.port} is closed"))
            return p
        r = _Req(body, p, expect_response, now + timeout)
        if not self.usable:
            self._waiting.append(r)
        else:
            self._send(r)
        self.last_used = self._now = now
        return p

    # -- SASL (client/sasl.py) ----------------------------------------------------------

    def _auth_error(self, reason: str, error_code: int | None = None) -> SaslAuthenticationError:
        assert self.sasl is not None
        return SaslAuthenticationError(
            f"{self.host}:{self.port} (node {self.node_id})",
            self.sasl.mechanism,
            self.sasl.username,
            reason,
            error_code,
        )

    def _auth_request(self, body: Any, version: int, callback: Callable[[Pending[Any]], object]) -> None:
        """Send one step of the exchange, ahead of the waiting requests."""
        p: Pending[Any] = Pending()
        p.add_callback(callback)
        self._encode(_Req(body, p, True, self._now + self._auth_timeout), version)

    def _start_sasl(self) -> None:
        """SaslHandshake v1 with our mechanism (first authentication or re-authentication)."""
        assert self.sasl is not None and self.versions is not None
        self.reauth_at = None
        handshake = self.versions.get(SASL_HANDSHAKE)
        authenticate = self.versions.get(SASL_AUTHENTICATE)
        if handshake is None or handshake[1] < 1 or authenticate is None:
            self._fail_auth(
                self._auth_error(
                    "the broker does not speak SaslHandshake v1 and SaslAuthenticate "
                    "(KIP-152); is this a SASL listener of Kafka 1.0 or newer?"
                )
            )
            return
        self._auth_version = min(2, authenticate[1])
        try:
            self._mech = self.sasl.client(self.host)
        except ValueError as e:
            self._fail_auth(self._auth_error(str(e)))
            return
        self._auth_request(_SaslHandshakeRequest(mechanism=self.sasl.mechanism), 1, self._on_handshake)

    def _auth_step_failed(self, p: Pending[Any]) -> bool:
        """A step's request failed (the connection closed, or its answer did not decode): end
        the connection if it is not already."""
        if p.error is None:
            return False
        if self.state != "closed":
            self.close(
                KafkaConnectionError(
                    f"SASL exchange with {self.host}:{self.port} (node {self.node_id}) failed: {p.error}"
                )
            )
        return True

    def _on_handshake(self, p: Pending[Any]) -> None:
        if self._auth_step_failed(p):
            return
        resp = p._value
        assert self.sasl is not None and self._mech is not None
        if resp.error_code == UNSUPPORTED_SASL_MECHANISM:
            self._fail_auth(
                self._auth_error(
                    f"the broker does not enable {self.sasl.mechanism}; it enables "
                    f"{', '.join(resp.mechanisms) or 'none'}",
                    resp.error_code,
                )
            )
            return
        if resp.error_code:
            self._fail_auth(
                self._auth_error(f"SaslHandshake refused (enabled: {', '.join(resp.mechanisms)})", resp.error_code)
            )
            return
        self._auth_request(
            _SaslAuthenticateRequest(auth_bytes=self._mech.first()), self._auth_version, self._on_authenticate
        )

    def _on_authenticate(self, p: Pending[Any]) -> None:
        if self._auth_step_failed(p):
            return
        resp = p._value
        assert self._mech is not None
        if resp.error_code:
            self._fail_auth(self._auth_error(resp.error_message or "refused", resp.error_code))
            return
        try:
            reply = self._mech.respond(bytes(resp.auth_bytes or b""))
        except ValueError as e:
            self._fail_auth(self._auth_error(str(e)))
            return
        if reply is not None:
            self._auth_request(_SaslAuthenticateRequest(auth_bytes=reply), self._auth_version, self._on_authenticate)
            return
        self._mech = None
        self.authenticated = True
        self._reauth_due = False
        lifetime_ms = resp.session_lifetime_ms if self._auth_version >= 1 else 0
        if lifetime_ms > 0:
            # as Java's client: at a random point between 85% and 95% of the session's lifetime
            self.reauth_at = self._now + lifetime_ms / 1000 * random.uniform(0.85, 0.95)
        if self._on_auth is not None:
            self._on_auth(self, None)
        self._release()

    def _fail_auth(self, err: SaslAuthenticationError) -> None:
        self._mech = None
        self.close(err)
        if self._on_auth is not None:
            self._on_auth(self, err)

    def maybe_reauthenticate(self, now: float) -> None:
        """KIP-368: once `reauth_at` has passed, new requests wait; the exchange starts when
        none is in flight (here, or when the last answer arrives)."""
        self._now = max(self._now, now)
        if self.state != "ready" or self._mech is not None:
            return
        if not self._reauth_due:
            if self.reauth_at is None or now < self.reauth_at:
                return
            self._reauth_due = True
        if not self._in_flight:
            self._start_sasl()

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
                r.pending.fail(
                    error_for(
                        35,
                        f"broker {self.host}:{self.port} needs {REQUESTS[r.api_key].name} "
                        f"v{lo}+, this request goes up to v{cap}",
                    )
                )
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
            return memoryview(self._head)[self._filled :]
        return memoryview(self._frame)[self._filled :]

    def advance(self, n: int, now: float) -> None:
        """`n` bytes were written into `read_target()`."""
        self.last_used = self._now = now
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
            self.close(
                KafkaConnectionError(
                    f"{self.host}:{self.port}: correlation id {correlation_id} != expected {r.correlation_id}"
                )
            )
            r.pending.fail(KafkaConnectionError("correlation id mismatch"))
            return
        r.pending.resolve(body)
        if self._reauth_due and not self._in_flight and self._mech is None and self.state == "ready":
            self._start_sasl()

    def overdue(self, now: float) -> bool:
        return (
            bool(self._in_flight)
            and self._in_flight[0].deadline <= now
            or any(r.deadline <= now for r in self._waiting)
        )

    def next_deadline(self) -> float | None:
        ds = [r.deadline for r in self._waiting]
        if self._in_flight:
            ds.append(self._in_flight[0].deadline)
        if self.reauth_at is not None and not self._reauth_due:
            ds.append(self.reauth_at)
        return min(ds) if ds else None

    def close(self, exc: BaseException | None = None) -> None:
        if self.state == "closed":
            return
        self.state = "closed"
        self.error = exc or KafkaConnectionError(f"connection to {self.host}:{self.port} closed")
        self.reauth_at = None
        reqs = list(self._in_flight) + self._waiting
        self._in_flight.clear()
        self._waiting = []
        self._out = []
        for r in reqs:
            r.pending.fail(self.error)


class Network:
    """All connections of one client (see the module docstring)."""

    def __init__(
        self,
        bootstrap: list[tuple[str, int]],
        client_id: str,
        request_timeout: float,
        reconnect_backoff: float = 0.05,
        reconnect_backoff_max: float = 1.0,
        sasl: SaslConfig | OAuthSaslConfig | GssapiSaslConfig | None = None,
    ) -> None:
        self.client_id = client_id
        self.sasl = sasl
        # The last authentication failure (cleared by a success), and who is told of each.
        self.auth_error: SaslAuthenticationError | None = None
        self.on_auth_error: Callable[[SaslAuthenticationError], object] | None = None
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
            c = Connection(node_id, host, port, self.client_id, self.sasl, self._on_auth, self.request_timeout)
            self.conns[node_id] = c
        return c

    def request(
        self, node_id: Hashable, body: Any, *, timeout: float | None = None, expect_response: bool = True
    ) -> Pending[Any]:
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
        return c is not None and c.state == "ready" and c.usable

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
        if c.sasl is None:  # with SASL the backoff ends once authenticated (_on_auth)
            self._backoff.pop(c.node_id, None)
        c.connected(self.now)

    def _back_off(self, node_id: Hashable) -> None:
        _, cur = self._backoff.get(node_id, (0.0, 0.0))
        cur = min(self._backoff_max, max(self._backoff_min, cur * 2))
        self._backoff[node_id] = (self.now + cur, cur)

    def on_connect_failed(self, c: Connection, exc: BaseException) -> None:
        self._back_off(c.node_id)
        c.close(KafkaConnectionError(f"cannot connect to {c.host}:{c.port} (node {c.node_id}): {exc}"))

    def _on_auth(self, c: Connection, err: SaslAuthenticationError | None) -> None:
        if err is None:
            self._backoff.pop(c.node_id, None)
            self.auth_error = None
            return
        self._back_off(c.node_id)
        self.auth_error = err
        if self.on_auth_error is not None:
            self.on_auth_error(err)

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
                c.close(
                    KafkaTimeoutError(
                        f"request to {c.host}:{c.port} (node {c.node_id}) got no response within "
                        f"request.timeout.ms={self.request_timeout * 1000:.0f}"
                    )
                )
            elif c.reauth_at is not None:
                c.maybe_reauthenticate(now)
        for n in [n for n, c in self.conns.items() if c.state == "closed"]:
            self.closed_conns.append(self.conns.pop(n))

    def next_deadline(self) -> float | None:
        ds = [d for c in self.conns.values() if (d := c.next_deadline()) is not None]
        ds += [t for n, (t, _) in self._backoff.items() if n in self.conns and self.conns[n].state == "new"]
        return min(ds) if ds else None

    def close(self) -> None:
        for c in self.conns.values():
            c.close()
