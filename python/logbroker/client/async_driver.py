"""The async API's I/O layer: drives a client core from the caller's event loop, asyncio or
trio, through anyio (`logbroker.aio` is built on it; the sync API's is `driver.py`).

# Contract
- Everything runs in the loop's thread: public async methods call the core directly and
  await its `Pending` results (`wait_pending`); nothing blocks the loop. The core's per-record
  work is in Rust, and a read hands the loop back after every `recv_into`.
- `AsyncDriver.run()` is the loop task: clear the waker, `core.tick(now)`, start one task per
  new broker connection, wake the writers of connections with queued bytes, then sleep on the
  core's waker fd (`anyio.wait_readable`) until it is set or `core.next_deadline()`.
- A connection task opens the socket, then runs a reader (bytes go straight into the frame
  buffer, `Connection.read_target()`) and a writer (woken by an `anyio.Event` when the core
  queued bytes). PLAINTEXT and SASL_PLAINTEXT use a non-blocking socket with
  `anyio.wait_readable`/`wait_writable`, the same on both loops; SSL and SASL_SSL use anyio's
  TLS stream (one copy from its buffer into the frame buffer).
- A public method whose answer is ready at once (`enqueue` with buffer room, `poll` with
  records buffered) does not suspend, so a task calling it in a loop would hold the loop for
  as long as answers stay ready: such methods call `LoopShare.checkpoint()`, which hands the
  loop back once every `YIELD_EVERY` seconds of holding it (and checks for cancellation
  every time).
- `stop()` ends the loop at its next turn; the loop cancels the connection tasks and closes
  the core on the way out.

Errors: a failed connect or handshake goes to `Network.on_connect_failed` (the core backs
off and retries, as Kafka's clients do); a broken connection to `Network.on_closed` with a
`KafkaConnectionError` naming the broker.
"""

from __future__ import annotations

import errno
import math
import socket
import ssl
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

import anyio
import anyio.abc
import anyio.lowlevel
import sniffio

from logbroker.client import tls
from logbroker.client.core import ClientCore
from logbroker.client.errors import KafkaConnectionError, KafkaTimeoutError
from logbroker.client.network import Connection, Pending

__all__ = ["AsyncDriver", "LoopShare", "soon_in_loop", "wait_pending"]

# What a broken or closed stream raises on either loop.
_BROKEN = (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream, ssl.SSLError, OSError)


# The longest a task calling ready methods holds the loop before LoopShare hands it back.
YIELD_EVERY = 0.001


class LoopShare:
    """Hands the loop back at least every YIELD_EVERY seconds (see the module docstring)."""

    def __init__(self) -> None:
        self._since = time.perf_counter()

    async def checkpoint(self) -> None:
        if time.perf_counter() - self._since >= YIELD_EVERY:
            await anyio.lowlevel.checkpoint()
            self._since = time.perf_counter()
        else:
            await anyio.lowlevel.checkpoint_if_cancelled()


async def wait_pending(p: Pending[Any], timeout: float | None, what: str) -> Any:
    """Awaits a core result (in the loop's thread); KafkaTimeoutError after `timeout` seconds."""
    if not p.done():
        ev = anyio.Event()
        p.add_callback(lambda _: ev.set())
        with anyio.move_on_after(timeout) as scope:
            await ev.wait()
        if scope.cancelled_caught:
            raise KafkaTimeoutError(f"{what} did not complete within {timeout:.3f}s")
    return p.result()


def soon_in_loop(fn: Callable[[], object]) -> Callable[..., None]:
    """A callable, safe from any thread, that runs `fn()` in the current loop: at once when
    called from the loop's thread, else scheduled (trio token or asyncio call_soon_threadsafe)."""
    loop_thread = threading.get_ident()
    schedule: Callable[[Callable[[], object]], object]
    if sniffio.current_async_library() == "trio":
        import trio

        schedule = trio.lowlevel.current_trio_token().run_sync_soon
    else:
        import asyncio

        schedule = asyncio.get_running_loop().call_soon_threadsafe

    def call(*_: object) -> None:
        if threading.get_ident() == loop_thread:
            fn()
        else:
            schedule(fn)

    return call


class _Transport(Protocol):
    async def recv_into(self, buf: memoryview) -> int: ...
    async def send_all(self, data: bytes) -> None: ...
    async def aclose(self) -> None: ...


class _PlainSocket:
    """A connected non-blocking TCP socket."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock

    @staticmethod
    async def connect(host: str, port: int) -> _PlainSocket:
        infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        last: OSError = OSError(f"{host}:{port}: no address")
        for family, kind, proto, _, addr in infos:
            sock = socket.socket(family, kind, proto)
            try:
                sock.setblocking(False)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                err = sock.connect_ex(addr)
                if err in (errno.EINPROGRESS, errno.EAGAIN, errno.EWOULDBLOCK):
                    await anyio.wait_writable(sock)
                    err = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if err:
                    raise OSError(err, f"connect to {host}:{port} ({addr[0]}): {errno.errorcode.get(err, err)}")
                return _PlainSocket(sock)
            except OSError as e:
                sock.close()
                last = e
            except BaseException:
                sock.close()
                raise
        raise last

    async def recv_into(self, buf: memoryview) -> int:
        await anyio.lowlevel.checkpoint()  # a busy socket still lets the other tasks run
        while True:
            try:
                return self.sock.recv_into(buf)
            except BlockingIOError:
                await anyio.wait_readable(self.sock)

    async def send_all(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                view = view[self.sock.send(view) :]
            except BlockingIOError:
                await anyio.wait_writable(self.sock)

    async def aclose(self) -> None:
        self.sock.close()


class _TlsStream:
    """anyio's TLS stream over TCP."""

    def __init__(self, stream: anyio.abc.ByteStream) -> None:
        self.stream = stream

    @staticmethod
    async def connect(host: str, port: int, ctx: ssl.SSLContext) -> _TlsStream:
        try:
            stream = await anyio.connect_tcp(
                host, port, tls=True, ssl_context=ctx, tls_hostname=tls.server_hostname(ctx, host)
            )
        except (anyio.BrokenResourceError, ssl.SSLError) as e:
            raise OSError(f"TLS handshake with {host}:{port} failed: {e.__cause__ or e}") from None
        return _TlsStream(stream)

    async def recv_into(self, buf: memoryview) -> int:
        try:
            data = await self.stream.receive(len(buf))
        except anyio.EndOfStream:
            return 0
        buf[: len(data)] = data
        return len(data)

    async def send_all(self, data: bytes) -> None:
        await self.stream.send(data)

    async def aclose(self) -> None:
        await anyio.aclose_forcefully(self.stream)


class AsyncDriver:
    """Drives a core with tasks of the running loop (see the module docstring)."""

    def __init__(self, core: ClientCore) -> None:
        self.core = core
        self._stop = False
        self.running = False
        self._wakeups: dict[Connection, anyio.Event] = {}
        self._scopes: dict[Connection, anyio.CancelScope] = {}
        self._tls = tls.context(core.config)  # SSL or SASL_SSL: every connection is TLS

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        core = self.core
        self.running = True
        try:
            async with anyio.create_task_group() as tg:
                task_status.started()
                while True:
                    core.waker.clear()
                    core.tick(anyio.current_time())
                    for conn in core.net.closed_conns:
                        scope = self._scopes.pop(conn, None)
                        if scope is not None:
                            scope.cancel()
                    core.net.closed_conns.clear()
                    for conn in core.net.to_connect():
                        tg.start_soon(self._connection, conn)
                    for conn in core.net.with_outgoing():
                        ev = self._wakeups.get(conn)
                        if ev is not None:
                            ev.set()
                    if self._stop:
                        break
                    deadline = core.next_deadline()
                    with anyio.CancelScope(deadline=math.inf if deadline is None else deadline):
                        await anyio.wait_readable(core.waker.fileno())
                tg.cancel_scope.cancel()
        finally:
            self.running = False
            core.close()

    def stop(self) -> None:
        self._stop = True
        self.core.wake()

    async def _connection(self, conn: Connection) -> None:
        net = self.core.net
        with anyio.CancelScope() as scope:
            self._scopes[conn] = scope
            transport: _Transport
            try:
                if self._tls is not None:
                    transport = await _TlsStream.connect(conn.host, conn.port, self._tls)
                else:
                    transport = await _PlainSocket.connect(conn.host, conn.port)
            except OSError as e:
                net.on_connect_failed(conn, e)
                self.core.wake()
                return
            error: BaseException | None = None
            try:
                net.on_connected(conn)
                self._wakeups[conn] = anyio.Event()
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self._writer, conn, transport)
                    try:
                        while True:
                            target = conn.read_target()
                            got = await transport.recv_into(target)
                            if not got:
                                break
                            conn.advance(got, anyio.current_time())
                            self.core.wake()
                    except _BROKEN as e:
                        error = KafkaConnectionError(f"{conn.host}:{conn.port}: {e}")
                    tg.cancel_scope.cancel()
            finally:
                self._wakeups.pop(conn, None)
                await transport.aclose()
            net.on_closed(conn, error)
            self.core.wake()
        self._scopes.pop(conn, None)
        if scope.cancelled_caught:
            net.on_closed(conn)

    async def _writer(self, conn: Connection, transport: _Transport) -> None:
        while True:
            chunks = conn.outgoing()
            if chunks:
                try:
                    await transport.send_all(b"".join(chunks))
                except _BROKEN:
                    return
                continue
            ev = self._wakeups[conn]
            await ev.wait()
            self._wakeups[conn] = anyio.Event()
