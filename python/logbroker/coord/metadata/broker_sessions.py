"""Broker sessions on the active controller (Kafka's BrokerHeartbeatManager): the time of
each broker's last heartbeat, the answers to BrokerHeartbeat, and the periodic pass that
fences brokers whose session expired (coord/metadata/broker_lifecycle.py has the broker side and the
whole story). It sees the controller through `SessionsController`, so the controller
module does not depend on it the other way round.

A session belongs to one registration (broker epoch), as Kafka's heartbeat state does: when a
broker registers again (a restart), its session starts afresh at that moment and a
controlled shutdown asked under the old epoch is forgotten. (Kept across registrations, the
old session's last heartbeat fenced a restarted broker before its first beat, and the old
controlled shutdown then kept it fenced for good.)"""

from __future__ import annotations

import logging
import time
from typing import Protocol

import trio

from logbroker.common.config import BrokerConfig
from logbroker.coord.metadata.control import ControllerError
from logbroker.coord.metadata.metadata import BrokerRegistration, MetadataImage
from logbroker.log_format import fields
from logbroker.protocol import ErrorCode

log = logging.getLogger("logbroker.controller")


class SessionsQuorum(Protocol):
    @property
    def is_active(self) -> bool: ...

    def registered_index(self, node_id: int) -> int: ...


class SessionsController(Protocol):
    """What broker sessions use of the controller (coord/metadata/controller.py)."""

    config: BrokerConfig
    local: BrokerRegistration
    image: MetadataImage
    quorum: SessionsQuorum

    async def fence_brokers(self, node_ids: list[int], reason: str) -> None: ...

    async def unfence_broker(self, node_id: int, epoch: int) -> None: ...

    async def reconcile_brokers(self, expired: list[int]) -> None: ...

    async def rebalance_leaders(self) -> int: ...

    async def ensure_bootstrap(self) -> None: ...


class BrokerSessions:
    """The active controller's view of broker liveness (see the module doc)."""

    def __init__(self, controller: SessionsController, session_timeout_ms: int) -> None:
        self.controller = controller
        self.session_timeout = session_timeout_ms / 1000
        self.last_seen: dict[int, float] = {}
        self.shutting_down: set[int] = set()
        self.epochs: dict[int, int] = {}  # broker -> the registration (epoch) its session belongs to
        self._was_active = False

    def _active(self) -> bool:
        active = self.controller.quorum.is_active
        if active and not self._was_active:
            now = time.monotonic()
            self.last_seen = {n: now for n in self.controller.image.brokers}
            self.epochs = {n: b.epoch for n, b in self.controller.image.brokers.items()}
            self.shutting_down.clear()
            log.info(
                "node %d is the active controller: broker sessions start now (timeout %.1f s)",
                self.controller.local.node_id,
                self.session_timeout,
            )
        self._was_active = active
        return active

    def _session(self, node_id: int, reg: BrokerRegistration, now: float) -> None:
        """Starts a new session when `reg` is a registration this one has not seen."""
        if self.epochs.get(node_id) != reg.epoch:
            self.epochs[node_id] = reg.epoch
            self.last_seen[node_id] = now
            self.shutting_down.discard(node_id)

    def expired(self) -> list[int]:
        """Unfenced brokers whose session ran out (never this node: it is alive)."""
        now = time.monotonic()
        me = self.controller.local.node_id
        self.last_seen[me] = now
        out = []
        for n, b in self.controller.image.brokers.items():
            self._session(n, b, now)
            if not b.fenced and n != me and now - self.last_seen[n] > self.session_timeout:
                out.append(n)
        return sorted(out)

    async def heartbeat(
        self, broker_id: int, epoch: int, metadata_offset: int, want_fence: bool, want_shut_down: bool
    ) -> tuple[ErrorCode, bool, bool, bool]:
        """(error, is_caught_up, is_fenced, should_shut_down) for one BrokerHeartbeat."""
        if not self._active():
            return ErrorCode.NOT_CONTROLLER, False, True, False
        reg = self.controller.image.brokers.get(broker_id)
        if reg is None:
            return ErrorCode.BROKER_ID_NOT_REGISTERED, False, True, False
        if reg.epoch != epoch:
            return ErrorCode.STALE_BROKER_EPOCH, False, reg.fenced, False
        now = time.monotonic()
        self._session(broker_id, reg, now)
        self.last_seen[broker_id] = now
        caught_up = metadata_offset >= self.controller.quorum.registered_index(broker_id)
        try:
            if want_shut_down:
                if broker_id not in self.shutting_down:
                    log.info(
                        "broker %d (epoch %d) asks for a controlled shutdown: moving its leaderships",
                        broker_id,
                        epoch,
                        extra=fields(peer=broker_id),
                    )
                    self.shutting_down.add(broker_id)
                if not reg.fenced:
                    await self.controller.fence_brokers([broker_id], "controlled shutdown")
                return ErrorCode.NONE, caught_up, True, True
            if reg.fenced and not want_fence and caught_up and broker_id not in self.shutting_down:
                await self.controller.unfence_broker(broker_id, epoch)
        except ControllerError as e:
            # e.g. the broker re-registered meanwhile (its records were written against the
            # old registration and rejected alike everywhere): it asks again next beat
            log.info("heartbeat of broker %d (epoch %d): %s", broker_id, epoch, e.message, extra=fields(peer=broker_id))
            return e.code, caught_up, True, False
        reg = self.controller.image.brokers.get(broker_id)
        return ErrorCode.NONE, caught_up, reg is None or reg.fenced, False

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """While active: fence expired sessions, elect leaders for leaderless partitions and,
        with auto.leader.rebalance.enable, every leader.imbalance.check.interval.seconds move
        leaderships back to preferred replicas."""
        task_status.started()
        interval = min(1.0, self.session_timeout / 4)
        config = self.controller.config
        rebalance_every = config.get_int("leader.imbalance.check.interval.seconds")
        next_rebalance = trio.current_time() + rebalance_every
        while True:
            await trio.sleep(interval)
            if not self._active():
                next_rebalance = trio.current_time() + rebalance_every  # a new controller waits a whole interval
                continue
            try:
                await self.controller.ensure_bootstrap()
                await self.controller.reconcile_brokers(self.expired())
                if trio.current_time() >= next_rebalance:
                    next_rebalance = trio.current_time() + rebalance_every
                    if config.get_bool("auto.leader.rebalance.enable"):
                        await self.controller.rebalance_leaders()
            except Exception as e:  # noqa: BLE001 - a failed round is retried next interval
                log.warning("node %d: broker session check failed, retrying: %s", self.controller.local.node_id, e)
