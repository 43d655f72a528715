"""Replication's control plane on one broker: which local replicas follow which leader, and
the ISR of the partitions this broker leads.

Followers. After every metadata image the local replicas whose leader is another live broker
are handed to the Rust follower fetch loops (`_core.ReplicaFetcherManager`, one thread per
source broker; rust/src/server/replica_fetcher.rs), grouped by leader with the leader's
endpoint and leader epoch. A replica that becomes leader, loses its leader or is deleted is
taken off them *before* the new state is applied (`unfollow` returns only when no loop
writes to it any more). The loops do the fetching, appending, truncation and HW on their own;
this module only logs what they report (`take_events`, every 200 ms).

ISR (leader side; Kafka's `Partition.maybeShrinkIsr` / `maybeExpandIsr`). Every
`replica.lag.time.max.ms / 2` (and every 250 ms for expansion, over the led partitions with a
replica outside the ISR only: `ReplicaManager.isr_short`) each led partition compares its
followers' state (rust/src/server/partition.rs `follower_states`) with its ISR:
    shrink   an ISR member not caught up to the leader's LEO for `replica.lag.time.max.ms`
    expand   a replica outside the ISR, on an unfenced broker, that fetched within
             `replica.lag.time.max.ms` and whose LEO reached the HW and the start of the
             current leader epoch (Kafka expands on a follower's fetch; a follower that died
             with its LEO at the HW of an idle partition must not flap back in)
and asks the controller with AlterPartition (leader epoch and partition epoch as the image
has them). The new ISR takes effect when the controller's record reaches this broker's
image; until then the HW is computed over the committed ISR, which is the larger one during
a shrink (Kafka's "maximal ISR"), so no acknowledged record depends on a replica outside the
committed ISR.

Batching (Kafka's AlterPartitionManager, KIP-497). A pass collects every led partition that
needs a change and asks for all of them in one AlterPartition request, grouped by topic id
(`BrokerLifecycle.alter_partitions`: 1,000 partitions per request at most; the active
controller's own broker calls the controller directly with the same batch); the controller
answers each partition on its own and commits the accepted ones as one metadata-log entry.
A broker rejoining thousands of ISRs after a restart is back in a few requests rather than
one round trip (and one commit) per partition. One change per partition is in flight at a
time (`_in_flight`): a partition asked for is left out of every pass until its answer is in
and, when accepted, the new partition epoch is in this broker's image (or 2 s passed), so
the next pass does not ask again with the old partition epoch. That wait covers the whole
request at once: partitions do not wait for each other's round trips.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import trio

from logbroker import _core
from logbroker.clock import now_ms, run_every
from logbroker.common.config import BrokerConfig
from logbroker.coord.metadata.control import IsrChange
from logbroker.coord.metadata.metadata import MetadataImage
from logbroker.coord.peer_security import rust_client_sasl, rust_client_tls
from logbroker.log_format import FETCHER_LINES, fields, parse_fields

if TYPE_CHECKING:
    from logbroker.broker.partition import Partition

log = logging.getLogger("logbroker.replication")

NO_LEADER = -1

# the ISR changes of one pass -> (error code, message) for each, in order
AlterIsr = Callable[[list[IsrChange]], Awaitable[list[tuple[int, str]]]]


def _leader_and_topic(followed: tuple[int, int, uuid.UUID] | None) -> tuple[int, uuid.UUID] | None:
    """The part of a followed state whose change stops the fetching: the leader, or the topic
    id (deleted and created again). A new leader epoch does not: following again moves it on."""
    return None if followed is None else (followed[0], followed[2])


class Replication:
    def __init__(self, config: BrokerConfig, replicas) -> None:
        self.config = config
        self.node_id = config.node_id
        self.replicas = replicas  # ReplicaManager
        self.fetchers = _core.ReplicaFetcherManager(
            self.node_id,
            max_wait_ms=config.get_int("replica.fetch.wait.max.ms"),
            min_bytes=config.get_int("replica.fetch.min.bytes"),
            response_max_bytes=config.get_int("replica.fetch.response.max.bytes"),
            partition_max_bytes=config.get_int("replica.fetch.max.bytes"),
            backoff_ms=config.get_int("replica.fetch.backoff.ms"),
            socket_timeout_ms=config.get_int("replica.socket.timeout.ms"),
            tls=rust_client_tls(config) if config.in_cluster else None,
            sasl=rust_client_sasl(config, config.client_listener_name),
        )
        self.alter_isr: AlterIsr | None = None  # set by the service in a cluster
        self.isr_shrinks = 0  # ISR changes this leader had committed (Kafka's IsrShrinksPerSec,
        self.isr_expands = 0  # IsrExpandsPerSec), for the metrics endpoint
        self.quorum = None  # MetadataQuorum in a cluster: this broker's registration epoch
        # topic -> partition -> (leader, leader epoch, topic id) followed: by topic, so that an
        # image changing a few topics looks at only their partitions. The topic id tells a topic
        # deleted and created again under the same name, leader and epoch from the one followed.
        self._following: dict[str, dict[int, tuple[int, int, uuid.UUID]]] = {}
        self._in_flight: set[tuple[str, int]] = set()
        self._image: MetadataImage | None = None

    # --- followers ----------------------------------------------------------------------

    def _wanted(
        self, image: MetadataImage, names: set[str] | None
    ) -> dict[tuple[str, int], tuple[int, int, uuid.UUID]]:
        """Local replicas that should follow: key -> (leader, leader epoch, topic id), of the
        topics `names` (None: every topic)."""
        out = {}
        topics = image.topics.values() if names is None else filter(None, map(image.topics.get, names))
        for t in topics:
            for ps in t.partitions.values():
                if (
                    self.node_id in ps.replicas
                    and ps.leader not in (NO_LEADER, self.node_id)
                    and ps.leader in image.brokers
                ):
                    out[(t.name, ps.partition)] = (ps.leader, ps.leader_epoch, t.topic_id)
        return out

    async def before_image(self, image: MetadataImage, names: set[str] | None = None) -> None:
        """Stop following what must not be followed under `image` (before its states apply);
        only topics in `names` changed (None: any may have)."""
        wanted = self._wanted(image, names)
        stop = [
            (name, i)
            for name in list(self._following if names is None else names)
            for i, (leader, _epoch, topic_id) in self._following.get(name, {}).items()
            if _leader_and_topic(wanted.get((name, i))) != (leader, topic_id)
        ]
        if stop:
            await trio.to_thread.run_sync(self.fetchers.unfollow, stop)
            for name, i in stop:  # (another image may have changed them while unfollow ran)
                followed = self._following.get(name, {})
                followed.pop(i, None)
                if not followed:
                    self._following.pop(name, None)

    async def stop_following(self, keys: list[tuple[str, int]]) -> None:
        """Take `keys` off the fetch loops whatever the image says (a replica whose log is
        being replaced: broker/replica_mover.py); the next `after_image` naming their topics
        follows them again."""
        stop = [k for k in keys if k[1] in self._following.get(k[0], {})]
        if stop:
            await trio.to_thread.run_sync(self.fetchers.unfollow, stop)
            for name, i in stop:
                followed = self._following.get(name, {})
                followed.pop(i, None)
                if not followed:
                    self._following.pop(name, None)

    async def after_image(self, image: MetadataImage, names: set[str] | None = None) -> None:
        """Follow every local replica led elsewhere, at the image's leader epochs; only
        topics in `names` changed (None: any may have)."""
        self._image = image
        wanted = self._wanted(image, names)
        by_leader: dict[int, list] = {}
        for key, (leader, epoch, topic_id) in wanted.items():
            p = self.replicas.partitions.get(key)
            if p is None or p.deleted or self._following.get(key[0], {}).get(key[1]) == (leader, epoch, topic_id):
                continue
            by_leader.setdefault(leader, []).append((key, p, epoch))
        for leader, items in by_leader.items():
            b = image.brokers[leader]
            args = [(p.core, p.topic_id.bytes, epoch) for _k, p, epoch in items]
            await trio.to_thread.run_sync(self.fetchers.follow, leader, b.host, b.port, args)
            for (name, i), p, epoch in items:
                self._following.setdefault(name, {})[i] = (leader, epoch, p.topic_id)
            log.info(
                "following %d partition(s) from broker %d at %s:%d: %s",
                len(items),
                leader,
                b.host,
                b.port,
                _names([k for k, _p, _e in items]),
                extra=fields(peer=leader),
            )

    def set_broker_epoch(self, epoch: int) -> None:
        self.fetchers.set_broker_epoch(epoch)

    async def shutdown(self) -> None:
        await trio.to_thread.run_sync(self.fetchers.shutdown)
        self._following.clear()

    # --- background -----------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus = trio.TASK_STATUS_IGNORED) -> None:
        lag_ms = self.config.get_int("replica.lag.time.max.ms")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run_every, 200, self._drain_events, log)
            nursery.start_soon(run_every, max(lag_ms / 2, 50), self._shrink, log)
            nursery.start_soon(run_every, 250, self._expand, log)
            task_status.started()

    async def _drain_events(self) -> None:
        epoch = getattr(self.quorum, "registered_epoch", None)
        if epoch is not None:
            self.fetchers.set_broker_epoch(epoch)
        for level, message in self.fetchers.take_events():
            log.log(level, "%s", message, extra=parse_fields(message, FETCHER_LINES))

    async def _shrink(self) -> None:
        lag_ms = self.config.get_int("replica.lag.time.max.ms")
        now = now_ms()
        changes = []
        for p in self._led():
            if len(p.isr) <= 1:
                continue  # only the leader in sync: nobody to remove
            # replica -> (LEO, last caught up); (-1, -1) for one never heard from
            states = {r: (leo, caught_up) for r, leo, _fetch, caught_up in p.core.follower_states()}
            behind = {r: states.get(r, (-1, -1)) for r in p.isr if r != self.node_id}
            out = [r for r, (_leo, caught_up) in behind.items() if now - caught_up > lag_ms]
            if out:
                new_isr = [r for r in p.isr if r not in out]
                detail = ", ".join(f"{r} (LEO {behind[r][0]}, last caught up {_ago(now, behind[r][1])})" for r in out)
                changes.append(
                    (
                        p,
                        new_isr,
                        f"shrink: {detail} behind leader LEO {p.log.log_end_offset} for more "
                        f"than replica.lag.time.max.ms={lag_ms}",
                    )
                )
        await self._alter(changes)

    async def _expand(self) -> None:
        image = self._image
        if image is None:
            return
        lag_ms = self.config.get_int("replica.lag.time.max.ms")
        now = now_ms()
        changes = []
        # only partitions with a replica outside the ISR (ReplicaManager.isr_short): an idle
        # broker of 50,000 in-sync partitions passed over every one of them 4 times a second
        for p in self._led(self.replicas.isr_short.values()):
            hw = p.log.high_watermark
            entries = p.log.epoch_entries()
            epoch_start = next((o for e, o in reversed(entries) if e == p.leader_epoch), None)
            states = {r: leo for r, leo, fetch, _caught in p.core.follower_states() if now - fetch <= lag_ms}
            joining = [
                r
                for r in p.replicas
                if r not in p.isr
                and r in states
                and (b := image.brokers.get(r)) is not None
                and not b.fenced
                and states[r] >= hw
                and (epoch_start is None or states[r] >= epoch_start)
            ]
            if joining:
                new_isr = list(p.isr) + joining
                changes.append(
                    (p, new_isr, "expand: " + ", ".join(f"{r} caught up (LEO {states[r]}, HW {hw})" for r in joining))
                )
        await self._alter(changes)

    def _led(self, among=None) -> list:
        """The partitions this broker leads (of `among`, default all), with no ISR change in flight."""
        if self.alter_isr is None:
            return []
        return [
            p
            for p in (self.replicas.partitions.values() if among is None else among)
            if p.is_leader and not p.deleted and (p.topic, p.index) not in self._in_flight
        ]

    async def _alter(self, changes: list[tuple[Partition, list[int], str]]) -> None:
        """Ask the controller for every ISR change of one pass together ((partition, new ISR,
        why) each): one AlterPartition request (`BrokerLifecycle.alter_partitions`), then wait
        (bounded) for the committed changes to reach this broker's image."""
        if not changes:
            return
        asked = [(p, p.state, new_isr) for p, new_isr, _why in changes]
        keys = [(p.topic, p.index) for p, _state, _isr in asked]
        self._in_flight.update(keys)
        try:
            for (p, state, new_isr), (_p, _isr, why) in zip(asked, changes):
                log.info(
                    "%s: asking the controller to change ISR %s -> %s (leader epoch %d, partition epoch %d): %s",
                    p.name,
                    state.isr,
                    new_isr,
                    state.leader_epoch,
                    state.partition_epoch,
                    why,
                    extra=fields(topic=p.topic, partition=p.index),
                )
            results = await self.alter_isr(
                [
                    IsrChange(p.topic_id, p.index, state.leader_epoch, state.partition_epoch, new_isr)
                    for p, state, new_isr in asked
                ]
            )
            waiting = []
            for (p, state, new_isr), (code, message) in zip(asked, results):
                if code != 0:
                    log.info(
                        "%s: ISR change %s -> %s (leader epoch %d, partition epoch %d) refused (error %d): %s",
                        p.name,
                        state.isr,
                        new_isr,
                        state.leader_epoch,
                        state.partition_epoch,
                        code,
                        message,
                        extra=fields(topic=p.topic, partition=p.index),
                    )
                    continue
                if len(new_isr) < len(state.isr):
                    self.isr_shrinks += 1
                else:
                    self.isr_expands += 1
                waiting.append((p, state.partition_epoch))
            # wait (bounded) for the committed changes to reach this broker's image, so the
            # next pass does not ask again with the old partition epoch: the whole request's
            # partitions together, each dropped from the wait as its new epoch shows
            with trio.move_on_after(2):
                while waiting := [
                    (p, epoch) for p, epoch in waiting if p.state.partition_epoch == epoch and not p.deleted
                ]:
                    await trio.sleep(0.02)
        finally:
            self._in_flight.difference_update(keys)


def _names(keys: list[tuple[str, int]], limit: int = 8) -> str:
    text = ", ".join(f"{t}-{p}" for t, p in sorted(keys)[:limit])
    return text + (f" and {len(keys) - limit} more" if len(keys) > limit else "")


def _ago(now: int, t: int) -> str:
    return "never" if t < 0 else f"{now - t} ms ago"
