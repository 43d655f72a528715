"""The Kafka protocol server: one trio listener, one task per connection.

Per connection the server reads size-prefixed frames, decodes the request header,
dispatches on (api_key, api_version) and writes the response. Requests on one
connection are handled one at a time, in order (Kafka mutes a connection while its
request is in flight, which is what keeps responses in request order); pipelined
requests wait in the socket buffer meanwhile. Many connections run concurrently.

Frames are read straight into a buffer of their own size (`recv_into`), so a produce
request's record bytes are copied once, kernel to that buffer, and handed to the Rust
log as a memoryview. Fetch responses are written as chunks: header and field bytes
with `send`, record bytes with `FileRegion.send` (sendfile from the segment file).

Bad input never crashes the broker: a frame larger than `socket.request.max.bytes`,
a negative size, a header or body that does not decode, or an API version we do not
serve closes the connection after a log line naming the peer, API, version and cause
(as Kafka does); ApiVersions at an unknown version gets the KIP-511 v0 error reply.
"""

from __future__ import annotations

import errno
import logging
import math
import socket as stdsocket
import struct
from typing import TYPE_CHECKING

import trio

from logbroker.handlers import HANDLERS, RequestContext
from logbroker.protocol import (
    API_NAMES,
    ProtocolError,
    decode_request_header,
    encode_response,
)

if TYPE_CHECKING:
    from logbroker.broker import BrokerServer

log = logging.getLogger("logbroker.server")

_SIZE = struct.Struct(">i")
READ_CHUNK = 64 * 1024


class ConnectionClosed(Exception):
    pass


class FrameReader:
    """Reads size-prefixed frames from a trio socket without copying large bodies twice."""

    def __init__(self, sock: trio.socket.SocketType, max_frame: int, peer: str) -> None:
        self.sock = sock
        self.max_frame = max_frame
        self.peer = peer
        self.buf = bytearray(READ_CHUNK)
        self.start = 0
        self.end = 0

    async def _fill(self, need: int) -> None:
        """Make at least `need` bytes available at buf[start:end]."""
        while self.end - self.start < need:
            if self.start and len(self.buf) - self.start < need:
                # compact to make room
                n = self.end - self.start
                self.buf[:n] = self.buf[self.start : self.end]
                self.start, self.end = 0, n
            if len(self.buf) < need:
                self.buf.extend(bytes(need - len(self.buf)))
            got = await self.sock.recv_into(memoryview(self.buf)[self.end :])
            if got == 0:
                raise ConnectionClosed()
            self.end += got

    async def read_frame(self) -> bytearray:
        await self._fill(4)
        (size,) = _SIZE.unpack_from(self.buf, self.start)
        self.start += 4
        if size < 0 or size > self.max_frame:
            raise ProtocolError(
                f"frame size {size} from {self.peer} is outside [0, socket.request.max.bytes={self.max_frame}]"
            )
        have = self.end - self.start
        if have >= size:
            frame = self.buf[self.start : self.start + size]
            self.start += size
            if self.start == self.end:
                self.start = self.end = 0
            return frame
        # Large frame: copy what we have, then receive the rest directly into the frame.
        frame = bytearray(size)
        frame[:have] = self.buf[self.start : self.end]
        self.start = self.end = 0
        view = memoryview(frame)
        pos = have
        while pos < size:
            got = await self.sock.recv_into(view[pos:])
            if got == 0:
                raise ConnectionClosed()
            pos += got
        return frame


async def send_chunks(sock: trio.socket.SocketType, chunks: list) -> None:
    """Write response chunks in order: bytes with send, FileRegions with sendfile."""
    fd = sock.fileno()
    for chunk in chunks:
        if isinstance(chunk, (bytes, bytearray, memoryview)):
            view = memoryview(chunk)
            while view:
                sent = await sock.send(view)
                view = view[sent:]
        else:
            offset, remaining = 0, len(chunk)
            while remaining:
                try:
                    sent = chunk.send(fd, offset, remaining)
                except BlockingIOError:
                    await trio.lowlevel.wait_writable(sock)
                    continue
                if sent == 0:
                    # The file shrank under us (truncation); pad is impossible, so stop here:
                    # the client sees a short batch, which it treats as a partial batch.
                    raise ConnectionClosed()
                offset += sent
                remaining -= sent


class KafkaServer:
    def __init__(self, broker: BrokerServer) -> None:
        self.broker = broker
        self.max_frame = broker.config.get_int("socket.request.max.bytes")
        self.idle_ms = broker.config.get_int("connections.max.idle.ms")
        self.connections = 0

    async def handle_connection(self, stream: trio.SocketStream) -> None:
        sock = stream.socket
        try:
            sock.setsockopt(stdsocket.IPPROTO_TCP, stdsocket.TCP_NODELAY, 1)
        except OSError:
            pass
        try:
            peer = "%s:%s" % sock.getpeername()[:2]
        except OSError:
            peer = "?"
        self.connections += 1
        reader = FrameReader(sock, self.max_frame, peer)
        idle_s = self.idle_ms / 1000 if self.idle_ms >= 0 else math.inf
        try:
            while True:
                with trio.move_on_after(idle_s) as idle:
                    frame = await reader.read_frame()
                if idle.cancelled_caught:
                    log.info("closing connection from %s: idle for connections.max.idle.ms=%d", peer, self.idle_ms)
                    break
                chunks = await self.handle_frame(frame, peer)
                if chunks:
                    await send_chunks(sock, chunks)
        except ConnectionClosed:
            pass
        except ProtocolError as e:
            log.warning("closing connection from %s: %s", peer, e)
        except OSError as e:
            # A client that goes away mid-response (reset, broken pipe) is ordinary. The
            # sendfile path raises these from Rust without errno, hence the class check.
            if isinstance(e, (ConnectionResetError, BrokenPipeError, ConnectionAbortedError)) or \
                    e.errno in (errno.ECONNRESET, errno.EPIPE, errno.EBADF):
                log.debug("connection from %s closed by the client: %s", peer, e)
            else:
                log.warning("connection from %s failed: %s", peer, e)
        except trio.BrokenResourceError:
            pass
        except Exception:
            # A bug in a handler must cost one connection, never the broker.
            log.exception("internal error serving %s; connection closed", peer)
        finally:
            self.connections -= 1
            with trio.move_on_after(1):
                await stream.aclose()

    async def handle_frame(self, frame: bytearray, peer: str) -> list | None:
        try:
            header, pos = decode_request_header(memoryview(frame))
        except ProtocolError as e:
            raise ProtocolError(f"request header from {peer} does not decode: {e}") from None
        api_key, version = header.request_api_key, header.request_api_version
        entry = HANDLERS.get(api_key)
        name = API_NAMES.get(api_key, f"api {api_key}")
        if entry is None or not entry.min_version <= version <= entry.max_version:
            if api_key == 18:  # ApiVersions: KIP-511 fallback reply at v0
                from logbroker.handlers.api_versions import unsupported_version_response

                return encode_response(18, 0, header.correlation_id, unsupported_version_response())
            raise ProtocolError(
                f"{name} v{version} from {peer} (client {header.client_id!r}) is not supported"
                + (f"; this broker serves v{entry.min_version}-{entry.max_version}" if entry else "")
            )
        try:
            request, end = entry.request_class.decode(memoryview(frame), pos, version)
        except ProtocolError as e:
            raise ProtocolError(f"{name} v{version} request from {peer} does not decode: {e}") from None
        if end != len(frame):
            log.debug("%s v%d from %s: %d trailing bytes ignored", name, version, peer, len(frame) - end)
        ctx = RequestContext(self.broker, header, peer)
        try:
            response = await entry.handler(ctx, request)
        except ProtocolError as e:
            raise ProtocolError(f"{name} v{version} from {peer}: {e}") from None
        if response is None:
            return None
        return encode_response(api_key, version, header.correlation_id, response)
