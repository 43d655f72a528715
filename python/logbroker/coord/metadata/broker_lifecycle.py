"""Broker liveness in a cluster: heartbeats, session expiry (fencing), controlled shutdown.

Broker side (`BrokerLifecycle`, one per node): every `broker.heartbeat.interval.ms` the
broker sends Kafka's BrokerHeartbeat (broker id, registration epoch, the metadata-log index
it has applied, want_fence=false, want_shut_down) to the active controller over the
CONTROLLER listener. The active controller's own broker needs no network: it records its
heartbeat directly. Controlled shutdown sets want_shut_down: the controller fences the
broker and moves its leaderships away, and answers should_shut_down once that is committed;
the broker then stops (after at most `controlled.shutdown.timeout`, it stops anyway). A
broker that is the active controller writes its own fencing first and then hands Raft
leadership to a caught-up voter, so the quorum need not wait an election timeout.

Controller side (`BrokerSessions` in broker_sessions.py, consulted only while this node is
the active controller): the time of each broker's last heartbeat. When a node becomes the active
controller every registered broker starts with a fresh session (its heartbeats went to the
previous controller). `Controller.reconcile_brokers` (run periodically by
`BrokerSessions.run`) fences every unfenced broker silent for longer than
`broker.session.timeout.ms` and elects leaders for partitions left without one.

    heartbeat from            answer
    unknown broker id         BROKER_ID_NOT_REGISTERED (a broker unregistered while it runs
                              registers again)
    another epoch             STALE_BROKER_EPOCH (an older incarnation, or not yet replayed)
    a fenced broker           unfenced again (want_fence false), is_fenced true until committed
    want_shut_down            fenced + leaderships moved; should_shut_down once committed
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

import trio

from logbroker.coord.metadata.control import ControllerError, IsrChange
from logbroker.coord.metadata.controller_channel import ControllerClient, ControllerUnavailable
from logbroker.log_format import fields
from logbroker.protocol import REQUESTS, ErrorCode

if TYPE_CHECKING:
    from logbroker.coord.metadata.controller import Controller
    from logbroker.coord.metadata.metadata_quorum import MetadataQuorum

log = logging.getLogger("logbroker.controller")

HEARTBEAT = 63
HEARTBEAT_VERSION = 1
ALTER_PARTITION = 56
ALTER_PARTITION_MAX_PARTITIONS = 1000  # partitions per AlterPartition request a broker sends
CONTROLLED_SHUTDOWN_SECONDS = 10.0
NO_CONTROLLER_SECONDS = 2.0


class BrokerLifecycle:
    """This broker's heartbeats and controlled shutdown (see the module doc)."""

    def __init__(self, controller: Controller, quorum: MetadataQuorum, interval_ms: int) -> None:
        self.controller = controller
        self.quorum = quorum
        self.node_id = controller.local.node_id
        self.interval = interval_ms / 1000
        self.client = ControllerClient(
            self.node_id, quorum.voters, lambda: quorum.leader_id, "heartbeats", quorum.transport.security
        )
        # ISR changes get their own connection: a slow metadata write never delays a heartbeat
        self.isr_client = ControllerClient(
            self.node_id, quorum.voters, lambda: quorum.leader_id, "ISR changes", quorum.transport.security
        )
        self.fenced: bool | None = None
        self._shutting_down = False

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        try:
            while not self._shutting_down:
                try:
                    await self._beat(want_shut_down=False, timeout=max(self.interval, 1.0))
                except ControllerUnavailable as e:
                    log.debug("%s", e)
                await trio.sleep(self.interval)
        finally:
            await self.client.close()
            await self.isr_client.close()

    async def alter_partitions(self, changes: list[IsrChange], timeout: float = 10.0) -> list[tuple[int, str]]:
        """Ask the active controller to change the ISRs of partitions this broker leads, all in
        one AlterPartition v3 request (grouped by topic id; more than
        `ALTER_PARTITION_MAX_PARTITIONS` go in several, one after the other); (error code,
        message) per change, in order. The active controller's own broker calls it directly,
        with the same batches. The committed changes reach this broker as metadata records; a
        refusal (stale epochs, ineligible replica) is returned as is, and an unreachable
        controller as REQUEST_TIMED_OUT for every change of the request."""
        out: list[tuple[int, str]] = []
        for i in range(0, len(changes), ALTER_PARTITION_MAX_PARTITIONS):
            out += await self._alter_partitions(changes[i : i + ALTER_PARTITION_MAX_PARTITIONS], timeout)
        return out

    async def _alter_partitions(self, changes: list[IsrChange], timeout: float) -> list[tuple[int, str]]:
        epoch = self.quorum.registered_epoch
        if epoch is None:
            return [(ErrorCode.STALE_BROKER_EPOCH, f"broker {self.node_id} is not registered yet")] * len(changes)
        if self.quorum.is_active:
            try:
                results = await self.controller.alter_partitions(self.node_id, epoch, changes)
            except ControllerError as e:
                return [(e.code, e.message)] * len(changes)
            return [(code, message) for code, message, _state in results]
        Req = REQUESTS[ALTER_PARTITION]
        by_topic: dict[object, list] = {}
        for c in changes:
            by_topic.setdefault(c.topic_id, []).append(
                Req.PartitionData(
                    partition_index=c.partition,
                    leader_epoch=c.leader_epoch,
                    leader_recovery_state=0,
                    partition_epoch=c.partition_epoch,
                    new_isr_with_epochs=[Req.BrokerState(broker_id=r, broker_epoch=-1) for r in c.new_isr],
                )
            )
        req = Req(
            broker_id=self.node_id,
            broker_epoch=epoch,
            topics=[Req.TopicData(topic_id=t, partitions=parts) for t, parts in by_topic.items()],
        )
        try:
            resp = await self.isr_client.request(
                ALTER_PARTITION, 3, req, timeout, retry_on=lambda r: r.error_code == ErrorCode.NOT_CONTROLLER
            )
        except ControllerUnavailable as e:
            return [(ErrorCode.REQUEST_TIMED_OUT, str(e))] * len(changes)
        if resp.error_code != ErrorCode.NONE:
            return [(resp.error_code, f"AlterPartition refused: {ErrorCode(resp.error_code).name}")] * len(changes)
        answers = {(t.topic_id, p.partition_index): p for t in resp.topics for p in t.partitions}
        out: list[tuple[int, str]] = []
        for c in changes:
            p = answers.get((c.topic_id, c.partition))
            if p is None:
                out.append((ErrorCode.UNKNOWN_SERVER_ERROR, "the controller's response left the partition out"))
            elif p.error_code == ErrorCode.NONE:
                out.append((ErrorCode.NONE, ""))
            else:
                out.append(
                    (
                        p.error_code,
                        f"controller answered {ErrorCode(p.error_code).name} (leader {p.leader_id}, "
                        f"epoch {p.leader_epoch}, ISR {p.isr}, partition epoch {p.partition_epoch})",
                    )
                )
        return out

    async def _beat(self, want_shut_down: bool, timeout: float) -> bool | None:
        """One heartbeat; returns should_shut_down (None when not registered yet)."""
        epoch = self.quorum.registered_epoch  # this process's registration, not a replayed one
        if epoch is None:
            return None
        if self.quorum.is_active:
            error, _, fenced, should = await self.controller.sessions.heartbeat(
                self.node_id, epoch, self.quorum.applied_index, False, want_shut_down
            )
        else:
            req = REQUESTS[HEARTBEAT](
                broker_id=self.node_id,
                broker_epoch=epoch,
                current_metadata_offset=self.quorum.applied_index,
                want_fence=False,
                want_shut_down=want_shut_down,
            )
            resp = await self.client.request(
                HEARTBEAT, HEARTBEAT_VERSION, req, timeout, retry_on=lambda r: r.error_code == ErrorCode.NOT_CONTROLLER
            )
            error, fenced, should = ErrorCode(resp.error_code), resp.is_fenced, resp.should_shut_down
        if error == ErrorCode.BROKER_ID_NOT_REGISTERED and self.node_id not in self.controller.image.brokers:
            # unregistered while it runs (UnregisterBroker): register again, as Kafka's brokers do
            log.warning("node %d: its registration was removed (unregistered); registering again", self.node_id)
            await self.quorum.register_broker()
            return None
        if error != ErrorCode.NONE:
            log.debug("node %d: heartbeat (epoch %d) answered %s", self.node_id, epoch, error.name)
            return None
        if fenced != self.fenced:
            log.info(
                "node %d is %s (controller %d)",
                self.node_id,
                "fenced" if fenced else "unfenced",
                self.quorum.leader_id,
                extra=fields(peer=self.quorum.leader_id),
            )
            self.fenced = fenced
        return should

    async def controlled_shutdown(self, timeout: float = CONTROLLED_SHUTDOWN_SECONDS) -> None:
        """Move this broker's leaderships away before it stops (bounded by `timeout`)."""
        self._shutting_down = True
        start = time.monotonic()
        leaderless_since: float | None = None
        with trio.move_on_after(timeout) as scope:
            while True:
                if self.quorum.leader_id == 0:  # the quorum is gone (the others stopped too)
                    leaderless_since = leaderless_since or time.monotonic()
                    if time.monotonic() - leaderless_since > NO_CONTROLLER_SECONDS:
                        log.warning(
                            "node %d: no active controller for %.0f s; stopping without moving leaderships",
                            self.node_id,
                            NO_CONTROLLER_SECONDS,
                        )
                        return
                else:
                    leaderless_since = None
                try:
                    if await self._beat(want_shut_down=True, timeout=NO_CONTROLLER_SECONDS):
                        break
                except ControllerUnavailable as e:
                    log.warning("node %d: controlled shutdown: %s", self.node_id, e)
                await trio.sleep(0.05)
            if self.quorum.is_active:
                await self.quorum.hand_over_leadership(timeout - (time.monotonic() - start))
        if scope.cancelled_caught:
            log.warning(
                "node %d: controlled shutdown did not finish within %.0f s; stopping anyway", self.node_id, timeout
            )
        else:
            log.info(
                "node %d: controlled shutdown done in %.2f s (leaderships moved)",
                self.node_id,
                time.monotonic() - start,
            )
