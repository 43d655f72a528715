"""Requests from this broker to another broker's client listener.

The transaction coordinator sends WriteTxnMarkers to the leaders of a transaction's
partitions. `BrokerChannel` keeps one connection per destination node (dialled on first
use, at the endpoint the metadata image gives, and re-dialled after any failure) and
sends one request at a time on it. A failure raises `BrokerUnreachable` naming the node,
its endpoint and the cause; callers decide whether to retry.
"""

from __future__ import annotations

import itertools
import logging

import trio

from logbroker.coord.framing import MAX_FRAME, read_frame
from logbroker.coord.peer_security import PLAINTEXT, PeerSecurity
from logbroker.protocol import API_NAMES, ProtocolError, decode_response, encode_request

log = logging.getLogger("logbroker.transactions")


class BrokerUnreachable(Exception):
    pass


class _Connection:
    def __init__(self, endpoint: tuple[str, int]) -> None:
        self.endpoint = endpoint
        self.stream: trio.abc.Stream | None = None
        self.renew_at = float("inf")  # when its SASL session ends: dial again before
        self.lock = trio.Lock()


class BrokerChannel:
    def __init__(self, node_id: int, security: PeerSecurity = PLAINTEXT) -> None:
        """`security`: how to reach the other brokers' inter-broker listener (peer_security.py)."""
        self.node_id = node_id
        self.security = security
        self._connections: dict[int, _Connection] = {}
        self._correlation = itertools.count(1)

    async def request(self, to: int, endpoint: tuple[str, int], api_key: int, version: int, body, timeout: float):
        """Send `body` to node `to` at `endpoint`; its response, or BrokerUnreachable."""
        conn = self._connections.get(to)
        if conn is None or conn.endpoint != endpoint:
            if conn is not None:
                await self._close(conn)
            conn = self._connections[to] = _Connection(endpoint)
        name = API_NAMES.get(api_key, f"api {api_key}")
        async with conn.lock:
            try:
                with trio.fail_after(timeout):
                    if conn.stream is not None and trio.current_time() >= conn.renew_at:
                        await self._close(conn)
                    if conn.stream is None:
                        conn.stream, conn.renew_at = await self.security.open(*endpoint)
                    corr = next(self._correlation) & 0x7FFFFFFF
                    frame = encode_request(api_key, version, corr, f"logbroker-node-{self.node_id}", body)
                    await conn.stream.send_all(b"".join(bytes(c) for c in frame))
                    reply = await read_frame(conn.stream, bytearray(), MAX_FRAME)
                if reply is None:
                    raise EOFError("the broker closed the connection")
                got, response = decode_response(api_key, version, reply)
                if got != corr:
                    raise ProtocolError(f"response correlation id {got}, expected {corr}")
                return response
            except (
                OSError,
                trio.BrokenResourceError,
                trio.ClosedResourceError,
                trio.TooSlowError,
                ProtocolError,
                EOFError,
            ) as e:
                await self._close(conn)
                raise BrokerUnreachable(
                    f"{name} to node {to} at {endpoint[0]}:{endpoint[1]} failed: {type(e).__name__}: {e}"
                ) from None

    async def _close(self, conn: _Connection) -> None:
        stream, conn.stream = conn.stream, None
        if stream is not None:
            with trio.CancelScope(shield=True):
                await stream.aclose()

    async def aclose(self) -> None:
        for conn in self._connections.values():
            await self._close(conn)
        self._connections.clear()
