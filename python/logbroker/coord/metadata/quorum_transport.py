"""TCP between the members of the controller quorum: carries raft-rs messages (opaque bytes)
from one `QuorumDriver` to another over the CONTROLLER listener.

Wire format (a voter dials each other voter; every connection carries frames both ways, and
a node sends to a voter on that voter's connection to it when there is one, else on its
own: so a voter that restarted on another address is reached before the others learn it):

    hello   b"LBRQ" | u16 version (1) | u64 sender node id | u16 length | cluster id (UTF-8)
    frame   u32 length | raft-proto Message bytes          (repeated)

The accepting side answers every hello with its own (same format): the dialler checks the
cluster id and learns who it reached, which is how a node dialling
`controller.quorum.bootstrap.servers` (addresses without ids) finds out which voter is
behind each address.

Observers (broker-only nodes, and controllers joining the quorum, Raft learners): an
observer dials every voter (by id from the voter directory, or the bootstrap addresses) and
the connection carries frames both ways; the voter answers the observer on the connection
the observer opened (`observers` names the connected ones, so the leader can add them as
learners). A voter refuses a second live connection claiming an observer's node id (two
brokers configured with the same node.id) with an ERROR naming both peers.

The voter set changes (KIP-853): `set_voters` gives the new directory of voters, and the
transport dials the new ones and stops dialling the removed ones; a joining controller
promoted to voter switches from observer dials to voter dials.

On an SSL controller listener (`coord/peer_security.py`) every connection is TLS, both ways: a
voter dials with its truststore and keystore, and the listener's `ssl.client.auth`
decides who gets in. With an authorizer (`authorizer.class.name`), a connection whose
principal (`User:<certificate subject>`, or `User:ANONYMOUS`) may not CLUSTER_ACTION the
cluster is closed before anything from it is read: only other nodes (in `super.users`, or
granted CLUSTER_ACTION) reach the quorum and the controller's Kafka APIs, as Kafka's
controller APIs each require CLUSTER_ACTION of their caller.

On a SASL_PLAINTEXT or SASL_SSL controller listener every connection authenticates first
(after TLS on SASL_SSL), Raft peer or Kafka client alike: the dialler sends Kafka's
SaslHandshake and SaslAuthenticate (coord/peer_sasl.py, PLAIN with the node's
listener.name.<controller listener>.plain.sasl.jaas.config username and password) before
anything else, the listener serves them with the broker's `SaslSession` and applies `admit`
to the principal that results (`User:<username>`). A dialler re-dials before its SASL session
ends (`connections.max.reauth.ms`); the listener closes a connection whose session has ended.

A connection that does not open with the magic is a Kafka client of the controller
(controller_channel.py) when the node serves one. A connection whose hello does not match
(another cluster id, a voter's id from a node that is not that voter) is closed with an
ERROR log naming both sides' values; nothing from it reaches Raft; so is one that sends no
complete hello within 5 s. Frames above `MAX_FRAME` close the connection. Sending never
blocks the driver: messages go to a bounded per-peer queue and are dropped when it is full
or the peer is down, including what was queued when the connection broke (Raft
retransmits; the drop is counted). A lost connection is redialled
with a backoff from 50 ms up to 1 s.
"""

from __future__ import annotations

import logging
import ssl
import struct
import time
from collections.abc import Awaitable, Callable

import trio

from logbroker.common.sasl import SaslSession
from logbroker.coord.framing import MAX_FRAME, fill_buffer
from logbroker.coord.peer_sasl import PeerAuthenticationFailed, serve_authentication
from logbroker.coord.peer_security import PLAINTEXT, PeerSecurity, peer_principal
from logbroker.log_format import fields

log = logging.getLogger("logbroker.quorum")

__all__ = ["QuorumTransport"]

MAGIC = b"LBRQ"
VERSION = 1
HELLO_TIMEOUT = 5.0
_HELLO = struct.Struct(">4sHQH")
_LEN = struct.Struct(">I")

# (stream, what it sent so far, peer, session_ends=...) -> serves its Kafka requests
KafkaConnection = Callable[..., Awaitable[None]]
# (principal, peer host) -> why the connection may not reach the quorum, or None
Admission = Callable[[str, str], "str | None"]


class QuorumTransport:
    def __init__(
        self,
        node_id: int,
        cluster_id: str,
        peers: dict[int, tuple[str, int]],
        queue_size: int = 4096,
        observer: bool = False,
        security: PeerSecurity = PLAINTEXT,
        server_tls: ssl.SSLContext | None = None,
        admit: Admission | None = None,
        sasl: Callable[[str], SaslSession] | None = None,
        sasl_max_receive: int = 524288,
        failed_authentication_delay: float = 0.1,
        principal_mapping: str = "DEFAULT",
    ) -> None:
        """`peers` are the voters (id -> controller listener); `observer` for a broker-only
        node, which is not one of them. `security` opens the connections to the voters,
        `server_tls` secures the listener, `sasl` (a new session per connection) makes it
        authenticate every connection with SASL, `admit` decides who may use it (module doc)."""
        self.node_id = node_id
        self.security = security
        self.server_tls = server_tls
        self.sasl = sasl
        self.sasl_max_receive = sasl_max_receive
        self.failed_authentication_delay = failed_authentication_delay
        self.admit = admit
        self.principal_mapping = principal_mapping  # ssl.principal.mapping.rules
        self._dial_failure: dict[int, str] = {}  # peer -> the last TLS failure logged
        self.cluster_id = cluster_id
        self.observer = observer
        self.peers = {n: addr for n, addr in peers.items() if n != node_id}
        self.voters = set(peers) if observer else set(peers) | {node_id}
        self.bootstrap: list[tuple[str, int]] = []  # addresses to dial while an observer knows no voter ids
        self._queue_size = queue_size
        self._queues: dict[int, tuple[trio.MemorySendChannel, trio.MemoryReceiveChannel]] = {
            n: trio.open_memory_channel(queue_size) for n in self.peers
        }
        self._boot_queues: dict[tuple[str, int], tuple[trio.MemorySendChannel, trio.MemoryReceiveChannel]] = {}
        self._routes: dict[int, tuple[str, int]] = {}  # voter id -> the bootstrap address it answered on
        self._dials: dict[object, trio.CancelScope] = {}  # (peer id | address, address) -> its dial task
        self._nursery: trio.Nursery | None = None
        self.observers: dict[int, str] = {}  # connected observer id -> its address (voters only)
        self._observer_queues: dict[int, trio.MemorySendChannel] = {}
        self._voter_queues: dict[int, trio.MemorySendChannel] = {}  # on the voters' connections to this node
        self._receive: Callable[[bytes], None] | None = None
        self.dropped = 0
        self.last_heard: dict[int, float] = {}  # peer -> wall-clock time of its last message
        self.listen_port: int | None = None

    # -- sending (the driver's Transport protocol)
    def send(self, to: int, message: bytes) -> None:
        # a voter's own connection to us first: it reaches that voter even when the address
        # this node would dial is stale (a voter that moved, before its new endpoint commits)
        channel = self._voter_queues.get(to)
        if channel is None:
            q = self._queues.get(to)
            if q is None and to in self._routes:
                q = self._boot_queues.get(self._routes[to])
            channel = q[0] if q is not None else self._observer_queues.get(to)
        if channel is None:
            self.dropped += 1
            return
        try:
            channel.send_nowait(message)
        except (trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError):
            self.dropped += 1

    def _hello(self) -> bytes:
        cid = self.cluster_id.encode()
        return _HELLO.pack(MAGIC, VERSION, self.node_id, len(cid)) + cid

    # -- the dial tasks: which peers this node dials follows the voter set
    def set_voters(self, voters: dict[int, tuple[str, int]], is_voter: bool) -> None:
        """The voter directory changed (or this node's part in it): dial what it says now.
        An observer with bootstrap addresses keeps dialling those (it would otherwise open a
        second connection to a voter it already reaches) until it becomes a voter."""
        self.observer = not is_voter
        self.voters = set(voters) | ({self.node_id} if is_voter else set())
        self.peers = {n: a for n, a in voters.items() if n != self.node_id and a[1]}
        self._sync_dials()

    def _sync_dials(self) -> None:
        if self._nursery is None:
            return
        by_address = self.observer and bool(self.bootstrap)
        wanted: dict[object, tuple] = {}
        if by_address:
            for addr in self.bootstrap:
                wanted[("boot", addr)] = (self._dial_address, addr)
        else:
            for n, addr in self.peers.items():
                wanted[(n, addr)] = (self._dial, n, addr)
        for key in list(self._dials):
            if key not in wanted:
                self._dials.pop(key).cancel()
                if isinstance(key[0], int) and not any(k[0] == key[0] for k in wanted):
                    self._queues.pop(key[0], None)
        for key, (fn, *args) in wanted.items():
            if key not in self._dials:
                if fn == self._dial and args[0] not in self._queues:
                    self._queues[args[0]] = trio.open_memory_channel(self._queue_size)
                self._nursery.start_soon(self._run_dial, key, fn, *args)

    async def _run_dial(self, key: object, fn: Callable[..., Awaitable[None]], *args: object) -> None:
        with trio.CancelScope() as scope:
            self._dials[key] = scope
            try:
                await fn(*args)
            finally:
                if self._dials.get(key) is scope:
                    del self._dials[key]

    async def _dial_address(self, addr: tuple[str, int]) -> None:
        """An observer's connection to a bootstrap address: routes are learnt from the hello
        the voter answers with."""
        if addr not in self._boot_queues:
            self._boot_queues[addr] = trio.open_memory_channel(self._queue_size)
        try:
            await self._dial(None, addr)
        finally:
            self._boot_queues.pop(addr, None)
            for n in [n for n, a in self._routes.items() if a == addr]:
                del self._routes[n]

    async def _dial(self, peer: int | None, addr: tuple[str, int]) -> None:
        host, port = addr
        recv = self._queues[peer][1] if peer is not None else self._boot_queues[addr][1]
        name = f"controller {peer}" if peer is not None else f"controller at {host}:{port}"
        backoff = 0.05
        while True:
            try:
                stream, renew_at = await self.security.open(host, port)
            except trio.BrokenResourceError as e:  # the TLS handshake or SASL (PeerAuthenticationFailed)
                why = str(e) if isinstance(e, PeerAuthenticationFailed) else str(e.__cause__ or e)
                if self._dial_failure.get(peer) != why:  # once per change, not per attempt
                    self._dial_failure[peer] = why
                    if isinstance(e, PeerAuthenticationFailed):  # it names this node, listener, mechanism, user
                        log.error("%s (%s)", why, name, extra=fields(peer=peer))
                    else:
                        log.warning(
                            "node %d: TLS to %s at %s:%d failed: %s",
                            self.node_id,
                            name,
                            host,
                            port,
                            why,
                            extra=fields(peer=peer),
                        )
                self._drop_queued(recv)
                await trio.sleep(backoff)
                backoff = min(backoff * 2, 1.0)
                continue
            except OSError as e:
                log.debug(
                    "node %d: %s at %s:%d unreachable: %s", self.node_id, name, host, port, e, extra=fields(peer=peer)
                )
                self._drop_queued(recv)
                await trio.sleep(backoff)
                backoff = min(backoff * 2, 1.0)
                continue
            backoff = 0.05
            if self._dial_failure.pop(peer, None) is not None:
                log.info(
                    "node %d: connected to %s at %s:%d again", self.node_id, name, host, port, extra=fields(peer=peer)
                )
            renewing = False
            try:
                async with stream:
                    # a SASL session that ends: dial again (and authenticate anew) before it does
                    with trio.move_on_at(renew_at) as session_scope:
                        await stream.send_all(self._hello())
                        async with trio.open_nursery() as nursery:
                            # frames coming back: an observer's answers from the voter (a voter
                            # never writes on a connection it accepted from another voter)
                            nursery.start_soon(self._read_back, stream, peer, addr, nursery.cancel_scope)
                            await _write_frames(stream, recv)
                    renewing = session_scope.cancelled_caught
            except* (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as group:
                # raised inside the nursery, so wrapped in an exception group: caught with
                # except*, or a peer resetting the connection would end this whole node
                log.info(
                    "node %d: connection to %s at %s:%d lost: %s",
                    self.node_id,
                    name,
                    host,
                    port,
                    group.exceptions[0],
                    extra=fields(peer=peer),
                )
            if renewing:
                log.debug(
                    "node %d: SASL session with %s is ending; dialling again",
                    self.node_id,
                    name,
                    extra=fields(peer=peer),
                )
                continue
            self._drop_queued(recv)
            await trio.sleep(backoff)

    def _drop_queued(self, recv: trio.MemoryReceiveChannel) -> None:
        """Messages queued for a peer that is down are stale by the time it is back (Raft
        retransmits what is still needed: a restarted node far behind gets a snapshot, not
        old appends); drop them."""
        while True:
            try:
                recv.receive_nowait()
            except trio.WouldBlock:
                return
            self.dropped += 1

    async def _read_back(
        self, stream: trio.abc.Stream, peer: int | None, addr: tuple[str, int], scope: trio.CancelScope
    ) -> None:
        """The peer's hello, then the frames it sends back (an observer's answers)."""
        buf = bytearray()
        try:
            sender = await self._read_hello(stream, buf, f"{addr[0]}:{addr[1]}")
            if sender is not None and peer is not None and sender != peer:
                log.error(
                    "node %d: %s:%d answered as node %d, but it is controller %d in the voter set; closing",
                    self.node_id,
                    addr[0],
                    addr[1],
                    sender,
                    peer,
                    extra=fields(peer=peer),
                )
                sender = None
            if sender is not None:
                if peer is None:
                    self._routes[sender] = addr
                await self._read_frames(stream, buf, sender)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass
        if self.observer:
            log.info(
                "node %d: controller %s at %s:%d closed the connection (a refusal is explained in its log)",
                self.node_id,
                "?" if peer is None else peer,
                addr[0],
                addr[1],
                extra=fields(peer=peer),
            )
        scope.cancel()

    async def _read_hello(self, stream: trio.abc.Stream, buf: bytearray, peer: str) -> int | None:
        """A peer's hello (module doc): its node id, or None (logged) if it is not one of this
        cluster's quorum members or sends none in time."""
        with trio.move_on_after(HELLO_TIMEOUT) as hello_wait:
            if not await fill_buffer(stream, buf, _HELLO.size):
                return None
            magic, version, sender, n = _HELLO.unpack_from(buf)
            if magic != MAGIC or version != VERSION:
                log.error(
                    "node %d: connection from %s is not a controller-quorum peer (magic %r, version %d)",
                    self.node_id,
                    peer,
                    magic,
                    version,
                    extra=fields(peer=peer),
                )
                return None
            if not await fill_buffer(stream, buf, _HELLO.size + n):
                return None
        if hello_wait.cancelled_caught:
            log.error(
                "node %d: connection with %s sent no complete hello in %.0f s; closing",
                self.node_id,
                peer,
                HELLO_TIMEOUT,
                extra=fields(peer=peer),
            )
            return None
        cid = bytes(buf[_HELLO.size : _HELLO.size + n]).decode("utf-8", "replace")
        del buf[: _HELLO.size + n]
        if cid != self.cluster_id:
            log.error(
                "node %d: controller %d at %s belongs to cluster %r, this node to %r; refused",
                self.node_id,
                sender,
                peer,
                cid,
                self.cluster_id,
                extra=fields(peer=sender),
            )
            return None
        return sender

    async def _read_frames(self, stream: trio.abc.Stream, buf: bytearray, sender: int) -> None:
        """Hand every complete frame to the driver until the peer closes."""
        while True:
            pos = 0
            while len(buf) - pos >= 4:
                (size,) = _LEN.unpack_from(buf, pos)
                if size > MAX_FRAME:
                    log.error(
                        "node %d: node %d sent a %d-byte frame (limit %d); closing",
                        self.node_id,
                        sender,
                        size,
                        MAX_FRAME,
                        extra=fields(peer=sender),
                    )
                    return
                if len(buf) - pos < 4 + size:
                    break
                if self._receive is not None:
                    self._receive(bytes(buf[pos + 4 : pos + 4 + size]))
                self.last_heard[sender] = time.time()
                pos += 4 + size
            del buf[:pos]
            if not await fill_buffer(stream, buf, len(buf) + 1):
                return

    async def run_observer(self, receive: Callable[[bytes], None], task_status=trio.TASK_STATUS_IGNORED) -> None:
        """A broker-only node: dial every voter, send and receive on those connections."""
        assert self.observer
        self._receive = receive
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            self._sync_dials()
            task_status.started()

    # -- receiving
    async def serve(
        self,
        host: str,
        port: int,
        receive: Callable[[bytes], None],
        kafka: KafkaConnection | None = None,
        task_status=trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Accept the peers' connections on host:port and hand their messages to `receive`;
        also dials every peer. A connection that does not open with the magic goes to
        `kafka` (Kafka requests to the controller, controller_channel.py) if given. Runs
        until cancelled."""
        self._receive = receive
        listeners = await trio.open_tcp_listeners(port, host=host)
        self.listen_port = listeners[0].socket.getsockname()[1]
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            self._sync_dials()
            task_status.started(self.listen_port)
            await trio.serve_listeners(lambda s: self._inbound(s, kafka), listeners, handler_nursery=nursery)

    async def _serve_observer(
        self, stream: trio.abc.Stream, buf: bytearray, sender: int, peer: str, voter: bool = False
    ) -> None:
        """An observer's connection (or, `voter`, another voter's): its frames go to the
        driver, ours to it go back on it."""
        send, recv = trio.open_memory_channel(self._queue_size)
        queues = self._voter_queues if voter else self._observer_queues
        if not voter:
            self.observers[sender] = peer
            log.info("node %d: observer %d connected from %s", self.node_id, sender, peer, extra=fields(peer=sender))
        queues[sender] = send
        try:
            async with trio.open_nursery() as nursery:

                async def write() -> None:
                    try:
                        await _write_frames(stream, recv)
                    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                        pass
                    nursery.cancel_scope.cancel()

                nursery.start_soon(write)
                await self._read_frames(stream, buf, sender)
                nursery.cancel_scope.cancel()
        finally:
            if queues.get(sender) is send:
                del queues[sender]
                if not voter:
                    del self.observers[sender]
            send.close()
            if not voter:
                log.info(
                    "node %d: observer %d at %s disconnected", self.node_id, sender, peer, extra=fields(peer=sender)
                )

    async def _inbound(self, stream: trio.abc.Stream, kafka: KafkaConnection | None) -> None:
        buf = bytearray()
        peer = "?"
        try:
            async with stream:
                try:
                    host, port = stream.socket.getpeername()[:2]  # type: ignore[attr-defined]
                    peer = f"{host}:{port}"
                except OSError:
                    host = "?"
                if self.server_tls is not None:
                    tls = trio.SSLStream(stream, self.server_tls, server_side=True)
                    with trio.move_on_after(HELLO_TIMEOUT) as handshake_wait:
                        try:
                            await tls.do_handshake()
                        except trio.BrokenResourceError as e:
                            log.error(
                                "node %d: TLS handshake with %s on the controller listener failed: %s; closing",
                                self.node_id,
                                peer,
                                e.__cause__ or e,
                                extra=fields(peer=peer),
                            )
                            return
                    if handshake_wait.cancelled_caught:
                        log.error(
                            "node %d: %s did not finish the TLS handshake in %.0f s; closing",
                            self.node_id,
                            peer,
                            HELLO_TIMEOUT,
                            extra=fields(peer=peer),
                        )
                        return
                    stream = tls
                session_ends = float("inf")
                if self.sasl is None:  # the principal of SSL (its certificate) or PLAINTEXT
                    try:
                        principal = peer_principal(stream, self.principal_mapping)
                    except ValueError as e:  # no ssl.principal.mapping.rules rule maps its certificate
                        log.error(
                            "node %d: %s refused on the controller listener: %s",
                            self.node_id,
                            peer,
                            e,
                            extra=fields(peer=peer),
                        )
                        return
                else:  # SASL_PLAINTEXT, SASL_SSL: the SASL user
                    session = self.sasl(peer)
                    with trio.move_on_after(HELLO_TIMEOUT) as sasl_wait:
                        authenticated = await serve_authentication(
                            stream,
                            buf,
                            session,
                            self.security.listener,
                            self.sasl_max_receive,
                            self.failed_authentication_delay,
                        )
                    if sasl_wait.cancelled_caught:
                        log.error(
                            "node %d: %s did not authenticate (SASL) on the controller listener %s in %.0f s; closing",
                            self.node_id,
                            peer,
                            self.security.listener,
                            HELLO_TIMEOUT,
                            extra=fields(peer=peer),
                        )
                        return
                    if authenticated is None:
                        return  # serve_authentication or the SASL handlers logged why
                    principal = authenticated
                    if session.reauth_ms > 0:
                        session_ends = trio.current_time() + session.reauth_ms / 1000
                if self.admit is not None:
                    refusal = self.admit(principal, host)
                    if refusal is not None:
                        log.error(
                            "node %d: %s (%s) refused on the controller listener: %s",
                            self.node_id,
                            peer,
                            principal,
                            refusal,
                            extra=fields(peer=peer),
                        )
                        return
                await self._after_authentication(stream, buf, peer, kafka, session_ends, principal)
        except* (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as group:
            # _serve_observer's nursery wraps what it raises: except* catches it either way
            log.info(
                "node %d: connection from %s lost: %s", self.node_id, peer, group.exceptions[0], extra=fields(peer=peer)
            )

    async def _after_authentication(
        self,
        stream: trio.abc.Stream,
        buf: bytearray,
        peer: str,
        kafka: KafkaConnection | None,
        session_ends: float,
        principal: str,
    ) -> None:
        """An admitted connection: a Raft peer's hello and frames, or a Kafka client. When its
        SASL session ends (`session_ends`), a Raft connection is closed, a Kafka client's at
        its next request."""
        with trio.move_on_after(HELLO_TIMEOUT) as first_wait:
            if not await fill_buffer(stream, buf, len(MAGIC)):
                return
        if first_wait.cancelled_caught:
            log.error(
                "node %d: connection from %s sent nothing in %.0f s; closing",
                self.node_id,
                peer,
                HELLO_TIMEOUT,
                extra=fields(peer=peer),
            )
            return
        if bytes(buf[: len(MAGIC)]) != MAGIC and kafka is not None:
            await kafka(stream, buf, peer, session_ends=session_ends)
            return
        sender = await self._read_hello(stream, buf, peer)
        if sender is None:
            return
        if sender == self.node_id:
            log.error(
                "node %d: connection from %s claims this node's own id %d; refused (two nodes "
                "configured with node.id %d?)",
                self.node_id,
                peer,
                sender,
                sender,
                extra=fields(peer=peer),
            )
            return
        await stream.send_all(self._hello())
        if sender in self.voters:
            with trio.move_on_at(session_ends) as session_scope:
                await self._serve_observer(stream, buf, sender, peer, voter=True)
            if session_scope.cancelled_caught:
                log.info(
                    "node %d: the SASL session of controller %d at %s (%s) ended (connections.max.reauth.ms); closing",
                    self.node_id,
                    sender,
                    peer,
                    principal,
                    extra=fields(peer=sender),
                )
            return
        if sender in self.observers:
            log.error(
                "node %d: connection from %s claims observer node id %d, which is connected from %s; "
                "refused (two brokers configured with node.id %d?)",
                self.node_id,
                peer,
                sender,
                self.observers[sender],
                sender,
                extra=fields(peer=peer),
            )
            return
        with trio.move_on_at(session_ends) as session_scope:
            await self._serve_observer(stream, buf, sender, peer)
        if session_scope.cancelled_caught:
            log.info(
                "node %d: the SASL session of observer %d at %s (%s) ended (connections.max.reauth.ms); closing",
                self.node_id,
                sender,
                peer,
                principal,
                extra=fields(peer=sender),
            )


async def _write_frames(stream: trio.abc.Stream, recv: trio.MemoryReceiveChannel) -> None:
    """Write queued messages as frames until the channel or the stream closes."""
    while True:
        msg = await recv.receive()
        batch = [msg]
        while len(batch) < 256:  # coalesce what is queued into one write
            try:
                batch.append(recv.receive_nowait())
            except trio.WouldBlock:
                break
        await stream.send_all(b"".join(_LEN.pack(len(m)) + m for m in batch))
