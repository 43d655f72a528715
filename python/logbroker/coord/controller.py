"""The controller: the single writer of the metadata image.

Today it is a quorum of one voter living inside the broker process (KRaft's combined
mode with one node): every change is validated, applied to a copy of the image,
persisted by `MetadataStore`, and then published to the broker-side listeners
(`ReplicaManager.apply_metadata`). The next wave replaces persistence with a
replicated metadata log and elects the controller; the method contracts stay:

- every method is async, serialised by one lock, and either applies the whole change
  or raises `ControllerError` carrying a Kafka error code and a message that names the
  topic and the values involved;
- leaders and ISRs are chosen here, and every leader change bumps the leader epoch.
"""

from __future__ import annotations

import copy
import logging
import uuid
from typing import TYPE_CHECKING, Awaitable, Callable

import trio

from logbroker.broker.config import BrokerConfig, ConfigError, validate_topic_config
from logbroker.coord.metadata import (
    BrokerRegistration,
    MetadataImage,
    MetadataStore,
    PartitionState,
    TopicState,
    topic_name_error,
)
from logbroker.coord.metadata_records import MetadataRecordError, diff_records
from logbroker.coord.quorum import QuorumTimeout
from logbroker.protocol import ErrorCode

if TYPE_CHECKING:
    from logbroker.coord.metadata_quorum import MetadataQuorum

log = logging.getLogger("logbroker.controller")

PRODUCER_ID_BLOCK = 1000
MAX_PARTITIONS = 100_000


class ControllerError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


Listener = Callable[[MetadataImage], Awaitable[None]]


class Controller:
    def __init__(self, config: BrokerConfig, store: MetadataStore, local: BrokerRegistration,
                 quorum: MetadataQuorum | None = None) -> None:
        self.config = config
        self.store = store
        self.local = local
        self.quorum = quorum
        self._lock = trio.Lock()
        self._listeners: list[Listener] = []
        self._producer_id_next = 0
        self._producer_id_end = 0
        self.image = self._load()

    @property
    def controller_id(self) -> int:
        """The active controller: the quorum's leader in a cluster (-1 while none is known)."""
        if self.quorum is not None:
            return self.quorum.leader_id or -1
        return self.image.controller_id

    def _load(self) -> MetadataImage:
        if self.quorum is not None:
            return self._load_quorum(self.quorum)
        meta = self.store.read_meta_properties()
        cluster_id = meta.get("cluster.id") or self.config.get_str("cluster.id")
        if meta.get("node.id") and int(meta["node.id"]) != self.local.node_id:
            raise ConfigError(
                f"data directory {self.store.data_dir} belongs to node.id {meta['node.id']}, "
                f"but this broker is node.id {self.local.node_id}"
            )
        configured = self.config.get_str("cluster.id")
        if configured and meta.get("cluster.id") and configured != meta["cluster.id"]:
            raise ConfigError(
                f"data directory {self.store.data_dir} belongs to cluster {meta['cluster.id']}, "
                f"but cluster.id is set to {configured}"
            )
        if not cluster_id:
            from logbroker.broker.config import new_cluster_id

            cluster_id = new_cluster_id()
        brokers = {self.local.node_id: self.local}
        doc = self.store.load()
        if doc is None:
            image = MetadataImage(cluster_id, self.local.node_id, brokers, {}, 0)
            self.store.data_dir.mkdir(parents=True, exist_ok=True)
            self.store.save(image)
        else:
            image = MetadataImage.from_json(doc, self.local.node_id, brokers)
        if not meta:
            self.store.write_meta_properties(image.cluster_id, self.local.node_id)
        return image

    def _load_quorum(self, quorum: MetadataQuorum) -> MetadataImage:
        meta = self.store.read_meta_properties()
        if meta.get("node.id") and int(meta["node.id"]) != self.local.node_id:
            raise ConfigError(f"data directory {self.store.data_dir} belongs to node.id {meta['node.id']}, "
                              f"but this broker is node.id {self.local.node_id}")
        if meta.get("cluster.id") and meta["cluster.id"] != quorum.cluster_id:
            raise ConfigError(
                f"data directory {self.store.data_dir} belongs to cluster {meta['cluster.id']}, but this node is "
                f"configured for cluster {quorum.cluster_id} (controller.quorum.voters "
                f"{self.config.get_str('controller.quorum.voters')}); refusing to start")
        if self.store.load() is not None:
            raise ConfigError(f"data directory {self.store.data_dir} holds a single-node metadata image; a cluster node "
                              "needs its own data directory (moving a single node into a cluster is not supported yet)")
        if not meta:
            self.store.data_dir.mkdir(parents=True, exist_ok=True)
            self.store.write_meta_properties(quorum.cluster_id, self.local.node_id)
        return quorum.image

    async def on_quorum_image(self, image: MetadataImage) -> None:
        """A new image applied from the metadata log (cluster mode): publish it."""
        self.image = image
        for listener in self._listeners:
            await listener(image)

    def add_listener(self, listener: Listener) -> None:
        self._listeners.append(listener)

    async def _commit(self, image: MetadataImage) -> None:
        if self.quorum is not None:
            if not self.quorum.is_active:
                leader = self.quorum.leader_id
                raise ControllerError(
                    ErrorCode.NOT_CONTROLLER,
                    f"node {self.local.node_id} is not the active controller; "
                    + (f"node {leader} is" if leader else "no controller is elected yet"))
            try:
                await self.quorum.write(diff_records(self.image, image))
            except QuorumTimeout as e:
                raise ControllerError(ErrorCode.REQUEST_TIMED_OUT, str(e)) from None
            except MetadataRecordError as e:
                raise ControllerError(ErrorCode.UNKNOWN_SERVER_ERROR, str(e)) from None
            return
        await trio.to_thread.run_sync(self.store.save, image)
        self.image = image
        for listener in self._listeners:
            await listener(image)

    # --- topics -------------------------------------------------------------------

    def _assign(self, partition: int, replication_factor: int) -> PartitionState:
        brokers = sorted(n for n, b in self.image.brokers.items() if not b.fenced)
        if replication_factor > len(brokers):
            raise ControllerError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"replication factor {replication_factor} is larger than the {len(brokers)} available broker(s)",
            )
        start = partition % len(brokers)
        replicas = [brokers[(start + i) % len(brokers)] for i in range(replication_factor)]
        return PartitionState(partition, replicas[0], 0, replicas, list(replicas), 0)

    def check_new_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        assignments: dict[int, list[int]] | None,
        configs: dict[str, str | None],
    ) -> tuple[int, int, dict[str, str]]:
        err = topic_name_error(name)
        if err:
            raise ControllerError(ErrorCode.INVALID_TOPIC_EXCEPTION, err)
        if name in self.image.topics:
            raise ControllerError(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists")
        if assignments:
            num_partitions = len(assignments)
            for p, replicas in assignments.items():
                unknown = [b for b in replicas if b not in self.image.brokers]
                if not replicas or unknown:
                    raise ControllerError(
                        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                        f"topic {name!r} partition {p}: replica assignment {replicas} names unknown brokers {unknown}",
                    )
            if sorted(assignments) != list(range(num_partitions)):
                raise ControllerError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"topic {name!r}: partitions in the assignment must be 0..{num_partitions - 1}, got {sorted(assignments)}",
                )
        if num_partitions == -1:
            num_partitions = self.config.get_int("num.partitions")
        if replication_factor == -1:
            replication_factor = self.config.get_int("default.replication.factor")
        if not 1 <= num_partitions <= MAX_PARTITIONS:
            raise ControllerError(
                ErrorCode.INVALID_PARTITIONS, f"topic {name!r}: number of partitions {num_partitions} must be in [1, {MAX_PARTITIONS}]"
            )
        if replication_factor < 1 and not assignments:
            raise ControllerError(
                ErrorCode.INVALID_REPLICATION_FACTOR, f"topic {name!r}: replication factor {replication_factor} must be at least 1"
            )
        try:
            checked = validate_topic_config(configs)
        except ConfigError as e:
            raise ControllerError(ErrorCode.INVALID_CONFIG, f"topic {name!r}: {e}") from None
        if not assignments:
            self._assign(0, replication_factor)  # raises INVALID_REPLICATION_FACTOR early
        widest = max((len(r) for r in assignments.values()), default=0) if assignments else replication_factor
        if widest > 1:
            # followers would never fetch (partition replication is issue 13): refuse rather
            # than create partitions whose acks=all produces can only time out
            raise ControllerError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"topic {name!r}: replication factor {widest} needs partition replication, which this "
                "broker does not do yet; use 1")
        return num_partitions, replication_factor, checked

    async def create_topic(
        self,
        name: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        assignments: dict[int, list[int]] | None = None,
        configs: dict[str, str | None] | None = None,
        validate_only: bool = False,
    ) -> TopicState:
        async with self._lock:
            num_partitions, replication_factor, checked = self.check_new_topic(
                name, num_partitions, replication_factor, assignments, configs or {}
            )
            partitions = {}
            for p in range(num_partitions):
                if assignments:
                    r = assignments[p]
                    partitions[p] = PartitionState(p, r[0], 0, list(r), list(r), 0)
                else:
                    partitions[p] = self._assign(p, replication_factor)
            topic = TopicState(name, uuid.uuid4(), partitions, checked)
            if validate_only:
                return topic
            image = copy.deepcopy(self.image)
            image.topics[name] = topic
            await self._commit(image)
            log.info("created topic %s (id %s) with %d partition(s), configs %s", name, topic.topic_id, num_partitions, checked)
            return topic

    async def delete_topic(self, name: str) -> TopicState:
        async with self._lock:
            if not self.config.get_bool("delete.topic.enable"):
                raise ControllerError(ErrorCode.TOPIC_DELETION_DISABLED, f"cannot delete topic {name!r}: delete.topic.enable is false")
            topic = self.image.topics.get(name)
            if topic is None:
                raise ControllerError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
            image = copy.deepcopy(self.image)
            del image.topics[name]
            await self._commit(image)
            log.info("deleted topic %s (id %s)", name, topic.topic_id)
            return topic

    async def create_partitions(
        self, name: str, count: int, assignments: list[list[int]] | None, validate_only: bool
    ) -> None:
        async with self._lock:
            topic = self.image.topics.get(name)
            if topic is None:
                raise ControllerError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
            current = len(topic.partitions)
            if count < current:
                raise ControllerError(
                    ErrorCode.INVALID_PARTITIONS, f"topic {name!r} has {current} partitions; cannot reduce to {count}"
                )
            if count == current:
                raise ControllerError(ErrorCode.INVALID_PARTITIONS, f"topic {name!r} already has {current} partitions")
            if count > MAX_PARTITIONS:
                raise ControllerError(ErrorCode.INVALID_PARTITIONS, f"topic {name!r}: {count} partitions is above {MAX_PARTITIONS}")
            rf = len(topic.partitions[0].replicas)
            new: dict[int, PartitionState] = {}
            if assignments is not None and len(assignments) != count - current:
                raise ControllerError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"topic {name!r}: {len(assignments)} assignments given for {count - current} new partitions",
                )
            for i, p in enumerate(range(current, count)):
                if assignments is not None:
                    r = assignments[i]
                    unknown = [b for b in r if b not in self.image.brokers]
                    if not r or unknown:
                        raise ControllerError(
                            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                            f"topic {name!r} partition {p}: assignment {r} names unknown brokers {unknown}",
                        )
                    if len(r) > 1:
                        raise ControllerError(
                            ErrorCode.INVALID_REPLICATION_FACTOR,
                            f"topic {name!r} partition {p}: assignment {r} needs partition replication, which this "
                            "broker does not do yet; give one broker")
                    new[p] = PartitionState(p, r[0], 0, list(r), list(r), 0)
                else:
                    new[p] = self._assign(p, rf)
            if validate_only:
                return
            image = copy.deepcopy(self.image)
            image.topics[name].partitions.update(new)
            await self._commit(image)
            log.info("topic %s: partitions %d -> %d", name, current, count)

    async def alter_topic_configs(
        self, name: str, changes: dict[str, str | None], replace: bool, validate_only: bool
    ) -> None:
        """Set (value) or delete (None) topic config overrides. `replace` drops every
        override not named (AlterConfigs semantics)."""
        async with self._lock:
            topic = self.image.topics.get(name)
            if topic is None:
                raise ControllerError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
            configs = {} if replace else dict(topic.configs)
            sets = {k: v for k, v in changes.items() if v is not None}
            try:
                checked = validate_topic_config(sets)
            except ConfigError as e:
                raise ControllerError(ErrorCode.INVALID_CONFIG, f"topic {name!r}: {e}") from None
            from logbroker.broker.config import TOPIC_KEYS

            for k, v in changes.items():
                if v is None:
                    if k not in TOPIC_KEYS:
                        raise ControllerError(ErrorCode.INVALID_CONFIG, f"topic {name!r}: unknown configuration key {k!r}")
                    configs.pop(k, None)
            configs.update(checked)
            if validate_only:
                return
            image = copy.deepcopy(self.image)
            image.topics[name].configs = configs
            await self._commit(image)
            log.info("topic %s: configs now %s", name, configs)

    # --- producer ids ---------------------------------------------------------------

    async def allocate_producer_id(self) -> int:
        async with self._lock:
            if self._producer_id_next >= self._producer_id_end and self.quorum is not None:
                # any node asks the quorum for a block; no need to be the active controller
                try:
                    start = await self.quorum.allocate_producer_ids(PRODUCER_ID_BLOCK)
                except (QuorumTimeout, MetadataRecordError) as e:
                    raise ControllerError(ErrorCode.COORDINATOR_NOT_AVAILABLE, str(e)) from None
                self._producer_id_next, self._producer_id_end = start, start + PRODUCER_ID_BLOCK
            elif self._producer_id_next >= self._producer_id_end:
                image = copy.deepcopy(self.image)
                start = image.next_producer_id
                image.next_producer_id = start + PRODUCER_ID_BLOCK
                await self._commit(image)
                self._producer_id_next, self._producer_id_end = start, start + PRODUCER_ID_BLOCK
            pid = self._producer_id_next
            self._producer_id_next += 1
            return pid
