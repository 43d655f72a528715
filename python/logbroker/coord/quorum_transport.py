"""TCP between the controller quorum's voters: carries raft-rs messages (opaque bytes) from
one `QuorumDriver` to another over the CONTROLLER listener.

Wire format (one connection per direction: a node dials each peer and sends; it accepts the
peers' connections and receives):

    hello   b"LBRQ" | u16 version (1) | u64 sender node id | u16 length | cluster id (UTF-8)
    frame   u32 length | raft-proto Message bytes          (repeated)

A connection that does not open with the magic is a Kafka client of the controller
(controller_channel.py) when the node serves one. A connection whose hello does not match (another cluster id, a node id
outside the voters) is closed with an ERROR log naming both sides' values; nothing from it
reaches Raft; so is one that sends no complete hello within 5 s. Frames above `MAX_FRAME` close the connection. Sending never blocks the
driver: messages go to a bounded per-peer queue and are dropped when it is full or the peer
is down (Raft retransmits; the drop is counted). A lost connection is redialled with a
backoff from 50 ms up to 1 s.
"""

from __future__ import annotations

import logging
import struct
import time
from typing import Awaitable, Callable

import trio

log = logging.getLogger("logbroker.quorum")

__all__ = ["QuorumTransport", "fill_buffer"]

MAGIC = b"LBRQ"
VERSION = 1
MAX_FRAME = 64 << 20
HELLO_TIMEOUT = 5.0
_HELLO = struct.Struct(">4sHQH")
_LEN = struct.Struct(">I")

KafkaConnection = Callable[[trio.SocketStream, bytearray, str], Awaitable[None]]


class QuorumTransport:
    def __init__(self, node_id: int, cluster_id: str, peers: dict[int, tuple[str, int]],
                 queue_size: int = 4096) -> None:
        self.node_id = node_id
        self.cluster_id = cluster_id
        self.peers = {n: addr for n, addr in peers.items() if n != node_id}
        self.voters = set(peers) | {node_id}
        self._queues = {n: trio.open_memory_channel(queue_size) for n in self.peers}
        self.dropped = 0
        self.last_heard: dict[int, float] = {}  # peer -> wall-clock time of its last message
        self.listen_port: int | None = None

    # -- sending (the driver's Transport protocol)
    def send(self, to: int, message: bytes) -> None:
        q = self._queues.get(to)
        if q is None:
            self.dropped += 1
            return
        try:
            q[0].send_nowait(message)
        except trio.WouldBlock:
            self.dropped += 1

    def _hello(self) -> bytes:
        cid = self.cluster_id.encode()
        return _HELLO.pack(MAGIC, VERSION, self.node_id, len(cid)) + cid

    async def _dial(self, peer: int) -> None:
        host, port = self.peers[peer]
        recv = self._queues[peer][1]
        backoff = 0.05
        while True:
            try:
                stream = await trio.open_tcp_stream(host, port)
            except OSError as e:
                log.debug("node %d: controller %d at %s:%d unreachable: %s", self.node_id, peer, host, port, e)
                await trio.sleep(backoff)
                backoff = min(backoff * 2, 1.0)
                continue
            backoff = 0.05
            try:
                async with stream:
                    await stream.send_all(self._hello())
                    while True:
                        msg = await recv.receive()
                        batch = [msg]
                        while len(batch) < 256:  # coalesce what is queued into one write
                            try:
                                batch.append(recv.receive_nowait())
                            except trio.WouldBlock:
                                break
                        await stream.send_all(b"".join(_LEN.pack(len(m)) + m for m in batch))
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as e:
                log.info("node %d: connection to controller %d at %s:%d lost: %s", self.node_id, peer, host, port, e)
                await trio.sleep(backoff)

    # -- receiving
    async def serve(self, host: str, port: int, receive: Callable[[bytes], None],
                    kafka: KafkaConnection | None = None, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Accept the peers' connections on host:port and hand their messages to `receive`;
        also dials every peer. A connection that does not open with the magic goes to
        `kafka` (Kafka requests to the controller, controller_channel.py) if given. Runs
        until cancelled."""
        listeners = await trio.open_tcp_listeners(port, host=host)
        self.listen_port = listeners[0].socket.getsockname()[1]
        async with trio.open_nursery() as nursery:
            for peer in self.peers:
                nursery.start_soon(self._dial, peer)
            task_status.started(self.listen_port)
            await trio.serve_listeners(lambda s: self._inbound(s, receive, kafka), listeners,
                                       handler_nursery=nursery)

    async def _inbound(self, stream: trio.SocketStream, receive: Callable[[bytes], None],
                       kafka: KafkaConnection | None) -> None:
        buf = bytearray()
        peer = "?"
        try:
            async with stream:
                try:
                    peer = "%s:%d" % stream.socket.getpeername()[:2]
                except OSError:
                    pass
                with trio.move_on_after(HELLO_TIMEOUT) as first_wait:
                    if not await fill_buffer(stream, buf, len(MAGIC)):
                        return
                if first_wait.cancelled_caught:
                    log.error("node %d: connection from %s sent nothing in %.0f s; closing", self.node_id, peer,
                              HELLO_TIMEOUT)
                    return
                if bytes(buf[:len(MAGIC)]) != MAGIC and kafka is not None:
                    await kafka(stream, buf, peer)
                    return
                with trio.move_on_after(HELLO_TIMEOUT) as hello_wait:
                    if not await fill_buffer(stream, buf, _HELLO.size):
                        return
                    magic, version, sender, n = _HELLO.unpack_from(buf)
                    if magic != MAGIC or version != VERSION:
                        log.error("node %d: connection from %s is not a controller-quorum peer (magic %r, version %d)",
                                  self.node_id, peer, magic, version)
                        return
                    if not await fill_buffer(stream, buf, _HELLO.size + n):
                        return
                if hello_wait.cancelled_caught:
                    log.error("node %d: connection from %s sent no complete hello in %.0f s; closing",
                              self.node_id, peer, HELLO_TIMEOUT)
                    return
                cid = bytes(buf[_HELLO.size:_HELLO.size + n]).decode("utf-8", "replace")
                del buf[:_HELLO.size + n]
                if cid != self.cluster_id:
                    log.error("node %d: controller %d at %s belongs to cluster %r, this node to %r; refused",
                              self.node_id, sender, peer, cid, self.cluster_id)
                    return
                if sender not in self.voters or sender == self.node_id:
                    log.error("node %d: connection from %s claims node id %d, not one of the other voters %s; refused",
                              self.node_id, peer, sender, sorted(self.voters - {self.node_id}))
                    return
                while True:
                    pos = 0
                    while len(buf) - pos >= 4:
                        (size,) = _LEN.unpack_from(buf, pos)
                        if size > MAX_FRAME:
                            log.error("node %d: controller %d sent a %d-byte frame (limit %d); closing",
                                      self.node_id, sender, size, MAX_FRAME)
                            return
                        if len(buf) - pos < 4 + size:
                            break
                        receive(bytes(buf[pos + 4:pos + 4 + size]))
                        self.last_heard[sender] = time.time()
                        pos += 4 + size
                    del buf[:pos]
                    if not await fill_buffer(stream, buf, len(buf) + 1):
                        return
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as e:
            log.info("node %d: connection from %s lost: %s", self.node_id, peer, e)


async def fill_buffer(stream: trio.SocketStream, buf: bytearray, n: int) -> bool:
    """Read until `buf` holds at least `n` bytes; False if the peer closed first."""
    while len(buf) < n:
        chunk = await stream.receive_some(1 << 20)
        if not chunk:
            return False
        buf += chunk
    return True
