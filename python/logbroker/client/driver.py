"""The sync API's I/O layer: one background thread per client that owns the core, its
sockets and its timers.

# Contract
- The thread is the only one that touches the core. Other threads hand it work with
  `call(fn)` / `call_wait(fn, timeout, what)`: the function runs in the loop, and the caller
  gets its result (a `Pending` result is waited for). Both wake the loop through the core's
  `Waker`, which is also what the producer's accumulator writes to from `send()`.
- The loop: clear the waker, run queued commands, `core.tick(now)`, open new connections
  (non-blocking connect), write what connections have queued, then sleep in a selector until
  a socket, the waker or `core.next_deadline()` needs it.
- `stop()` ends the loop after a last tick and closes every socket; the thread is a daemon
  so a forgotten client never blocks interpreter exit.
"""

from __future__ import annotations

import collections
import errno
import selectors
import socket
import ssl
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from logbroker.client import tls
from logbroker.client.core import ClientCore
from logbroker.client.errors import ClientClosedError, KafkaConnectionError, KafkaTimeoutError
from logbroker.client.network import Connection, Pending

__all__ = ["ThreadDriver"]

T = TypeVar("T")


class ThreadDriver:
    """Runs `core` in a daemon thread (see the module docstring)."""

    def __init__(self, core: ClientCore, name: str) -> None:
        self.core = core
        self._commands: collections.deque[tuple[Callable[[], Any], Pending[Any]]] = collections.deque()
        self._stop = False
        self._sel = selectors.DefaultSelector()
        self._socks: dict[Connection, socket.socket] = {}
        self._pending_writes: dict[Connection, list[memoryview]] = {}
        self._sel.register(core.waker.fileno(), selectors.EVENT_READ, None)
        self._tls = tls.context(core.config)  # SSL or SASL_SSL: every socket is wrapped
        self._handshaking: set[Connection] = set()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    # -- other threads ------------------------------------------------------------------

    def submit(self, fn: Callable[[], Any]) -> Pending[Any]:
        """Runs `fn` in the loop; its result (or the result of the Pending it returns)."""
        p: Pending[Any] = Pending()
        if self._stop or not self._thread.is_alive():
            p.fail(ClientClosedError("the client is closed"))
            return p
        self._commands.append((fn, p))
        self.core.wake()
        return p

    def call_wait(self, fn: Callable[[], Any], timeout: float | None, what: str) -> Any:
        """Runs `fn` in the loop and waits up to `timeout` seconds for its result."""
        done = threading.Event()
        p = self.submit(fn)
        p.add_callback(lambda _: done.set())
        if not done.wait(timeout):
            raise KafkaTimeoutError(f"{what} did not complete within {timeout:.3f}s")
        return p.result()

    def stop(self, timeout: float | None = None) -> None:
        if self._stop:
            return
        self._stop = True
        self.core.wake()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive() and not self._stop

    # -- the loop -----------------------------------------------------------------------

    def _run(self) -> None:
        core = self.core
        try:
            while True:
                core.waker.clear()
                while self._commands:
                    fn, p = self._commands.popleft()
                    self._run_command(fn, p)
                now = time.monotonic()
                core.tick(now)
                self._io_setup()
                if self._stop:
                    break
                deadline = core.next_deadline()
                timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
                if timeout is not None and timeout > 1.0:
                    timeout = 1.0
                for key, events in self._sel.select(timeout):
                    conn = key.data
                    if conn is None:
                        continue
                    core.net.now = time.monotonic()
                    if conn in self._handshaking:
                        self._handshake(conn)
                        continue
                    if events & selectors.EVENT_WRITE:
                        self._on_writable(conn)
                    if events & selectors.EVENT_READ and conn in self._socks:
                        self._on_readable(conn)
        except BaseException as e:  # noqa: BLE001 - reported to every waiter below
            self._error = e
            raise
        finally:
            self._shutdown()

    def _run_command(self, fn: Callable[[], Any], p: Pending[Any]) -> None:
        try:
            v = fn()
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            p.fail(e)
            return
        if isinstance(v, Pending):
            v.add_callback(lambda q: p.fail(q.error) if q.error is not None else p.resolve(q._value))
        else:
            p.resolve(v)

    def _shutdown(self) -> None:
        self.core.close()
        for conn, s in list(self._socks.items()):
            self._drop(conn, s)
        while self._commands:
            _, p = self._commands.popleft()
            p.fail(ClientClosedError("the client is closed"))
        try:
            self._sel.close()
        except OSError:
            pass

    def _io_setup(self) -> None:
        net = self.core.net
        for conn in net.closed_conns:
            s = self._socks.get(conn)
            if s is not None:
                self._drop(conn, s)
        net.closed_conns.clear()
        for conn in net.to_connect():
            self._connect(conn)
        for conn in net.with_outgoing():
            if conn in self._socks:
                self._pending_writes.setdefault(conn, []).extend(memoryview(c).cast("B") for c in conn.outgoing())
                self._on_writable(conn)

    def _connect(self, conn: Connection) -> None:
        try:
            infos = socket.getaddrinfo(conn.host, conn.port, type=socket.SOCK_STREAM)
            family, _, _, _, addr = infos[0]
            s = socket.socket(family, socket.SOCK_STREAM)
            s.setblocking(False)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            err = s.connect_ex(addr)
        except OSError as e:
            self.core.net.on_connect_failed(conn, e)
            return
        if err not in (0, errno.EINPROGRESS):
            s.close()
            self.core.net.on_connect_failed(conn, OSError(err, errno.errorcode.get(err, str(err))))
            return
        self._socks[conn] = s
        self._sel.register(s, selectors.EVENT_WRITE, conn)

    def _drop(self, conn: Connection, s: socket.socket) -> None:
        self._socks.pop(conn, None)
        self._handshaking.discard(conn)
        self._pending_writes.pop(conn, None)
        try:
            self._sel.unregister(s)
        except (KeyError, ValueError, OSError):
            pass
        s.close()

    def _on_writable(self, conn: Connection) -> None:
        s = self._socks[conn]
        net = self.core.net
        if conn.state == "connecting":
            err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if err:
                self._drop(conn, s)
                net.on_connect_failed(conn, OSError(err, errno.errorcode.get(err, str(err))))
                return
            if self._tls is not None and conn not in self._handshaking:
                self._start_tls(conn, s)
                return
            net.on_connected(conn)
            self._pending_writes.setdefault(conn, []).extend(memoryview(c).cast("B") for c in conn.outgoing())
        queue = self._pending_writes.get(conn)
        try:
            while queue:
                chunk = queue[0]
                n = s.send(chunk)
                if n < len(chunk):
                    queue[0] = chunk[n:]
                    break
                queue.pop(0)
        except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
            pass
        except OSError as e:
            self._drop(conn, s)
            net.on_closed(conn, KafkaConnectionError(f"send to {conn.host}:{conn.port} failed: {e}"))
            return
        self._sel.modify(s, selectors.EVENT_READ | (selectors.EVENT_WRITE if queue else 0), conn)

    def _on_readable(self, conn: Connection) -> None:
        s = self._socks[conn]
        net = self.core.net
        while True:
            try:
                n = s.recv_into(conn.read_target())
            except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
                return
            except OSError as e:
                self._drop(conn, s)
                net.on_closed(conn, KafkaConnectionError(f"recv from {conn.host}:{conn.port} failed: {e}"))
                return
            if n == 0:
                self._drop(conn, s)
                net.on_closed(conn)
                return
            conn.advance(n, net.now)
            # TLS may hold decrypted bytes the selector cannot see: read them now.
            if not isinstance(s, ssl.SSLSocket) or not s.pending() or conn not in self._socks:
                return

    def _start_tls(self, conn: Connection, s: socket.socket) -> None:
        """The TCP connection is up: wrap it in TLS and start the handshake."""
        assert self._tls is not None
        self._sel.unregister(s)
        try:
            wrapped = self._tls.wrap_socket(
                s, server_hostname=tls.server_hostname(self._tls, conn.host), do_handshake_on_connect=False
            )
        except (OSError, ValueError) as e:
            self._socks.pop(conn, None)
            s.close()
            self.core.net.on_connect_failed(conn, OSError(f"TLS to {conn.host}:{conn.port}: {e}"))
            return
        self._socks[conn] = wrapped
        self._handshaking.add(conn)
        self._sel.register(wrapped, selectors.EVENT_READ | selectors.EVENT_WRITE, conn)
        self._handshake(conn)

    def _handshake(self, conn: Connection) -> None:
        s = self._socks[conn]
        assert isinstance(s, ssl.SSLSocket)
        try:
            s.do_handshake()
        except ssl.SSLWantReadError:
            self._sel.modify(s, selectors.EVENT_READ, conn)
            return
        except ssl.SSLWantWriteError:
            self._sel.modify(s, selectors.EVENT_WRITE, conn)
            return
        except (OSError, ValueError) as e:
            self._drop(conn, s)
            self.core.net.on_connect_failed(conn, OSError(f"TLS handshake with {conn.host}:{conn.port} failed: {e}"))
            return
        self._handshaking.discard(conn)
        self.core.net.on_connected(conn)
        self._pending_writes.setdefault(conn, []).extend(memoryview(c).cast("B") for c in conn.outgoing())
        self._on_writable(conn)
