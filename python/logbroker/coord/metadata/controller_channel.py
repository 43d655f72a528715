"""Kafka protocol on the CONTROLLER listener: how brokers reach the active controller.

The controller listener carries two kinds of connection, told apart by their first four
bytes: the controller quorum's Raft peers open with the magic b"LBRQ" (quorum_transport.py);
anything else is a Kafka request frame (a 4-byte size, and b"LBRQ" as a size would be
1.28 GB, far above any frame we accept). Kafka connections are served here, one request
at a time per connection, with the controller's table of APIs (`CONTROLLER_APIS`):

    ApiVersions, CreateTopics, DeleteTopics, CreatePartitions, DescribeConfigs,
    AlterConfigs, IncrementalAlterConfigs, DescribeCluster, DescribeQuorum, BrokerHeartbeat,
    AlterPartition, ElectLeaders, AlterPartitionReassignments, ListPartitionReassignments,
    AlterUserScramCredentials, CreateAcls, DeleteAcls, AlterClientQuotas, UpdateFeatures,
    AddRaftVoter, RemoveRaftVoter, CreateDelegationToken, RenewDelegationToken,
    ExpireDelegationToken, UnregisterBroker, UnregisterController

A request served here runs with `serving_controller_listener` set, so a controller method
that finds this node is no longer the active controller answers NOT_CONTROLLER instead of
forwarding again (no forwarding loops).

`ControllerClient` is the broker side: one connection to whichever voter is the active
controller (the Raft leader, found through the local quorum), re-dialled when leadership
moves; requests wait for a leader and retry NOT_CONTROLLER and lost connections until
their deadline. Brokers use two: one for heartbeats, one for forwarded admin requests, so
a slow metadata write never delays a heartbeat past the session timeout.
"""

from __future__ import annotations

import contextvars
import itertools
import logging
import struct
from collections.abc import Callable

import trio

from logbroker.coord.framing import MAX_FRAME, read_frame
from logbroker.coord.peer_sasl import PeerAuthenticationFailed
from logbroker.coord.peer_security import PLAINTEXT, PeerSecurity
from logbroker.log_format import fields
from logbroker.protocol import API_NAMES, ProtocolError, decode_response, encode_request

log = logging.getLogger("logbroker.controller")

__all__ = [
    "CONTROLLER_APIS",
    "ControllerClient",
    "ControllerUnavailable",
    "serve_kafka_connection",
    "serving_controller_listener",
]

CONTROLLER_APIS = frozenset(
    {18, 19, 20, 37, 32, 33, 44, 60, 55, 63, 56, 43, 45, 46, 51, 30, 31, 49, 57, 80, 81, 38, 39, 40, 64, 94}
)

serving_controller_listener: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "serving_controller_listener", default=False
)

_LEN = struct.Struct(">i")


class ControllerUnavailable(Exception):
    """No active controller answered before the deadline (the message says what was tried)."""


async def serve_kafka_connection(
    stream: trio.abc.Stream, buf: bytearray, peer: str, handle_frame, max_frame: int, session_ends: float = float("inf")
) -> None:
    """Serve Kafka requests on a controller-listener connection whose first bytes are in
    `buf`; `handle_frame(frame, peer)` returns the response chunks (or None). A request that
    arrives once the connection's SASL session has ended (`session_ends`, trio clock; KIP-368)
    closes it instead, as Kafka's brokers do (the client dials again and authenticates)."""
    serving_controller_listener.set(True)
    while True:
        try:
            frame = await read_frame(stream, buf, max_frame)
        except ProtocolError as e:
            log.error("controller listener: %s sent %s; closing", peer, e, extra=fields(peer=peer))
            return
        if frame is None:
            return
        if trio.current_time() >= session_ends:
            log.info(
                "controller listener: the SASL session of %s ended (connections.max.reauth.ms) and it sent a "
                "request instead of dialling again; closing",
                peer,
                extra=fields(peer=peer),
            )
            return
        try:
            chunks = await handle_frame(frame, peer)
        except ProtocolError as e:
            log.warning("controller listener: closing connection from %s: %s", peer, e, extra=fields(peer=peer))
            return
        except Exception:
            # a bug in a handler costs this connection, never the node
            log.exception(
                "controller listener: internal error serving %s; connection closed", peer, extra=fields(peer=peer)
            )
            return
        if chunks:
            await stream.send_all(b"".join(bytes(c) for c in chunks))


class ControllerClient:
    """Requests to the active controller's CONTROLLER listener (see the module doc).

    `leader()` gives the current Raft leader's node id (0 while none is known) and
    `voters` each voter's controller listener address."""

    def __init__(
        self,
        node_id: int,
        voters: dict[int, tuple[str, int]],
        leader: Callable[[], int],
        purpose: str,
        security: PeerSecurity = PLAINTEXT,
    ) -> None:
        self.node_id = node_id
        self.security = security
        self.voters = voters
        self.leader = leader
        self.purpose = purpose
        self._stream: trio.abc.Stream | None = None
        self._to = 0
        self._renew_at = float("inf")  # when the SASL session ends: dial again before
        self._auth_failure: str | None = None  # the last authentication failure logged
        self._lock = trio.Lock()
        self._correlation = itertools.count(1)

    async def close(self) -> None:
        if self._stream is not None:
            stream, self._stream = self._stream, None
            with trio.CancelScope(shield=True):
                await stream.aclose()

    async def request(
        self, api_key: int, version: int, body, timeout: float, retry_on: Callable[[object], bool] | None = None
    ):
        """Send `body` to the active controller and return its response; waits for a leader
        and retries lost connections (and responses for which `retry_on` is true, e.g.
        NOT_CONTROLLER) until `timeout` seconds have passed, then ControllerUnavailable."""
        name = API_NAMES.get(api_key, f"api {api_key}")
        last = "no controller elected yet"
        with trio.move_on_after(timeout):
            while True:
                to = self.leader()
                if not to or to not in self.voters:
                    await trio.sleep(0.05)
                    continue
                try:
                    async with self._lock:
                        response = await self._roundtrip(to, api_key, version, body)
                except PeerAuthenticationFailed as e:
                    last = str(e)
                    if self._auth_failure != last:  # once per change, not per retry
                        self._auth_failure = last
                        log.error("%s (%s to controller %d)", last, self.purpose, to)
                    await self.close()
                    await trio.sleep(0.5)
                    continue
                except (OSError, trio.BrokenResourceError, trio.ClosedResourceError, ProtocolError, EOFError) as e:
                    last = f"controller {to} at {self.voters[to][0]}:{self.voters[to][1]}: {e}"
                    log.debug("node %d: %s to the controller failed: %s", self.node_id, name, last)
                    await self.close()
                    await trio.sleep(0.1)
                    continue
                if retry_on is not None and retry_on(response):
                    last = f"controller {to} answered that it is no longer the active controller"
                    await trio.sleep(0.1)
                    continue
                return response
        raise ControllerUnavailable(
            f"node {self.node_id}: {name} ({self.purpose}) got no answer from the active controller "
            f"within {timeout:.1f} s; last: {last}"
        )

    async def _roundtrip(self, to: int, api_key: int, version: int, body):
        if self._stream is None or self._to != to or trio.current_time() >= self._renew_at:
            await self.close()
            host, port = self.voters[to]
            self._stream, self._renew_at = await self.security.open(host, port)
            self._to = to
            if self._auth_failure is not None:
                self._auth_failure = None
                log.info("node %d: authenticated to controller %d again (%s)", self.node_id, to, self.purpose)
        stream = self._stream
        corr = next(self._correlation) & 0x7FFFFFFF
        request = encode_request(api_key, version, corr, f"logbroker-node-{self.node_id}", body)
        await stream.send_all(b"".join(bytes(c) for c in request))
        frame = await read_frame(stream, bytearray(), MAX_FRAME)
        if frame is None:
            raise EOFError("the controller closed the connection")
        got, response = decode_response(api_key, version, frame)
        if got != corr:
            raise ProtocolError(f"response correlation id {got}, expected {corr}")
        return response
