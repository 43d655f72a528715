"""Size-prefixed frames between the nodes: a 4-byte big-endian size, then that many bytes.
Kafka requests to the controller and to other brokers (metadata/controller_channel.py,
broker_channel.py, peer_sasl.py) and the Raft transport (metadata/quorum_transport.py) read them
with these; a frame above its limit (`MAX_FRAME` between nodes) is a protocol error."""

from __future__ import annotations

import struct

import trio

from logbroker.protocol import ProtocolError

MAX_FRAME = 64 << 20  # the largest frame one node accepts from another
_SIZE = struct.Struct(">i")


async def fill_buffer(stream: trio.abc.Stream, buf: bytearray, n: int) -> bool:
    """Read until `buf` holds at least `n` bytes; False if the peer closed first."""
    while len(buf) < n:
        chunk = await stream.receive_some(1 << 20)
        if not chunk:
            return False
        buf += chunk
    return True


async def read_frame(stream: trio.abc.Stream, buf: bytearray, limit: int) -> bytes | None:
    """The next size-prefixed frame (without its size), from what `buf` holds and then the
    stream; None if the peer closed first. A size outside [0, limit] is a ProtocolError."""
    if not await fill_buffer(stream, buf, 4):
        return None
    (size,) = _SIZE.unpack_from(buf)
    if size < 0 or size > limit:
        raise ProtocolError(f"a frame of {size} bytes (limit {limit})")
    if not await fill_buffer(stream, buf, 4 + size):
        return None
    frame = bytes(buf[4 : 4 + size])
    del buf[: 4 + size]
    return frame
