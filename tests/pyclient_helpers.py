"""Helpers for the tests of logbroker's own Python client (tests/test_pyclient_*.py):
a consume-everything helper and a TCP proxy that can swallow one Produce response."""

from __future__ import annotations

import socket
import struct
import threading
import time

from socket_close import shut_and_close

import logbroker
from logbroker.protocol import decode_response, encode_response


def consume_all(bootstrap: str, topic: str, partitions: int, expected: int, timeout: float = 30) -> list:
    out = []
    with logbroker.Consumer(bootstrap, auto_offset_reset="earliest") as c:
        c.assign([(topic, p) for p in range(partitions)])
        deadline = time.monotonic() + timeout
        while len(out) < expected and time.monotonic() < deadline:
            out.extend(c.poll(0.5))
        extra = c.poll(0.3)
        out.extend(extra)
    return out


def _recv_exact(s: socket.socket, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        try:
            chunk = s.recv(n - len(buf))
        except OSError:
            return None
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


class DroppingProxy:
    """A Kafka-aware TCP proxy: rewrites Metadata so clients keep talking through it, and
    swallows the `drop_produce_response`-th Produce response (1-based), closing the client
    connection right after the broker wrote the batch."""

    def __init__(self, upstream: str, drop_produce_response: int = 1) -> None:
        host, _, port = upstream.rpartition(":")
        self.upstream = (host, int(port))
        self.drop_at = drop_produce_response
        self.produce_responses = 0
        self.dropped = 0
        self.lsock = socket.socket()
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(16)
        self.port = self.lsock.getsockname()[1]
        self._stop = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def close(self) -> None:
        self._stop = True
        self.lsock.close()

    def _accept(self) -> None:
        while not self._stop:
            try:
                c, _ = self.lsock.accept()
            except OSError:
                return
            u = socket.create_connection(self.upstream)
            inflight: dict[int, tuple[int, int]] = {}
            threading.Thread(target=self._up, args=(c, u, inflight), daemon=True).start()
            threading.Thread(target=self._down, args=(c, u, inflight), daemon=True).start()

    def _up(self, c: socket.socket, u: socket.socket, inflight: dict[int, tuple[int, int]]) -> None:
        while True:
            head = _recv_exact(c, 4)
            if head is None:
                break
            (size,) = struct.unpack(">i", head)
            body = _recv_exact(c, size)
            if body is None:
                break
            key, version, corr = struct.unpack_from(">hhi", body, 0)
            inflight[corr] = (key, version)
            try:
                u.sendall(head + body)
            except OSError:
                break
        for s in (c, u):
            try:
                s.close()
            except OSError:
                pass

    def _down(self, c: socket.socket, u: socket.socket, inflight: dict[int, tuple[int, int]]) -> None:
        while True:
            head = _recv_exact(u, 4)
            if head is None:
                break
            (size,) = struct.unpack(">i", head)
            body = _recv_exact(u, size)
            if body is None:
                break
            (corr,) = struct.unpack_from(">i", body, 0)
            key, version = inflight.pop(corr, (-1, -1))
            out = head + body
            if key == 3:
                _, resp = decode_response(3, version, body)
                for b in resp.brokers:
                    b.host, b.port = "127.0.0.1", self.port
                out = b"".join(bytes(x) for x in encode_response(3, version, corr, resp))
            elif key == 0:
                self.produce_responses += 1
                if self.produce_responses == self.drop_at:
                    self.dropped += 1
                    break
            try:
                c.sendall(out)
            except OSError:
                break
        shut_and_close(c, u)
