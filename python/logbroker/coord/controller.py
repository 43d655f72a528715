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
import random
import uuid
from typing import TYPE_CHECKING, Awaitable, Callable

import trio

from logbroker import scram
from logbroker.broker.authorizer import CLUSTER_NAME, AclOperation, AclPermissionType, PatternType, ResourceType
from logbroker.broker.config import (
    GROUP_KEYS,
    TOPIC_KEYS,
    BrokerConfig,
    ConfigError,
    validate_group_config,
    validate_topic_config,
)
from logbroker.coord.metadata import (
    AclBinding,
    AclBindingFilter,
    BrokerRegistration,
    MetadataImage,
    MetadataStore,
    PartitionState,
    ScramCredential,
    TopicState,
    topic_name_error,
)
from logbroker.coord import client_quotas, elections, reassignment
from logbroker.coord.controller_channel import ControllerClient, serving_controller_listener
from logbroker.coord.metadata_records import MetadataRecordError, diff_records
from logbroker.coord.quorum import QuorumTimeout
from logbroker.log_format import fields
from logbroker.protocol import ErrorCode

if TYPE_CHECKING:
    from logbroker.coord.metadata_quorum import MetadataQuorum

log = logging.getLogger("logbroker.controller")

PRODUCER_ID_BLOCK = 1000
MAX_PARTITIONS = 100_000


def new_partition(index: int, replicas: list[int]) -> PartitionState:
    """A new partition led by its first (preferred) replica, with every replica in the ISR
    (Kafka's rule: an empty log is caught up by definition; a replica that does not fetch
    leaves the ISR after `replica.lag.time.max.ms`)."""
    return PartitionState(index, replicas[0], 0, list(replicas), list(replicas), 0)


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
        self.leader_elections = 0
        self.unclean_leader_elections = 0
        self._lock = trio.Lock()
        self._listeners: list[Listener] = []
        self._producer_id_next = 0
        self._producer_id_end = 0
        self._changed = trio.Event()
        self.image = self._load()
        # cluster only; their modules depend on this one, so they are imported here
        self.sessions = None  # broker_lifecycle.BrokerSessions
        self.forwarder = None  # controller_forwarding.Forwarder
        if quorum is not None:
            from logbroker.coord.broker_lifecycle import BrokerSessions
            from logbroker.coord.controller_forwarding import Forwarder

            self.sessions = BrokerSessions(self, config.get_int("broker.session.timeout.ms"))
            self.forwarder = Forwarder(self, ControllerClient(local.node_id, quorum.voters, lambda: quorum.leader_id,
                                                              "forwarded metadata changes", quorum.transport.security))

    @property
    def controller_id(self) -> int:
        """The active controller: the quorum's leader in a cluster (-1 while none is known)."""
        if self.quorum is not None:
            return self.quorum.leader_id or -1
        return self.image.controller_id

    def client_brokers(self, image: MetadataImage | None = None) -> list[BrokerRegistration]:
        """The brokers named to clients in Metadata: the unfenced ones, by id. A Kafka broker
        serves clients only once it is unfenced, so its list is never empty; this one answers
        from its start, and while no broker is unfenced (before the first registration, or
        with no quorum) it names itself, the one broker the client has reached. librdkafka
        takes an empty list as a failed lookup and does not ask again until something else
        happens, which stalls its admin client for a whole request timeout."""
        image = image or self.image
        live = [b for _, b in sorted(image.brokers.items()) if not b.fenced]
        if live or self.quorum is None:
            return live
        return [self.local]

    def client_controller_id(self, brokers: list[BrokerRegistration]) -> int:
        """The controller named to clients in Metadata next to `brokers`. In a cluster every
        broker forwards admin requests to the active controller, so, as KRaft brokers name a
        live broker rather than the controller, a broker names itself: a client never waits
        on a controller that just died (librdkafka's admin client would, until its request
        times out). A broker not in the list (fenced, or not registered yet) names the first
        that is: librdkafka waits without asking again for a controller missing from the
        list. DescribeCluster and DescribeQuorum name the active controller."""
        if self.quorum is None:
            return self.image.controller_id
        ids = [b.node_id for b in brokers]
        if self.local.node_id in ids:
            return self.local.node_id
        return ids[0] if ids else -1

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
        await self._publish(image)

    async def _publish(self, image: MetadataImage) -> None:
        """Make `image` current: listeners in order, then whoever waits in `image_changed`."""
        self.image = image
        for listener in self._listeners:
            await listener(image)
        self._changed.set()
        self._changed = trio.Event()

    async def image_changed(self) -> None:
        """Wait for the next published image."""
        await self._changed.wait()

    def _forward(self) -> bool:
        """True when this call must go to the active controller: a cluster node that is not
        it, and not already serving a request on the controller listener (which answers
        NOT_CONTROLLER instead, so a request is forwarded at most once)."""
        return (self.quorum is not None and not self.quorum.is_active
                and not serving_controller_listener.get())

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
        await self._publish(image)

    # --- topics -------------------------------------------------------------------

    def placement_order(self) -> list[int]:
        """The unfenced brokers in placement order: by id, and when brokers have racks
        (`broker.rack`), alternating racks (first broker of each rack, then the second of
        each, ...), so consecutive picks land on different racks."""
        live = sorted(n for n, b in self.image.brokers.items() if not b.fenced)
        racks: dict[str, list[int]] = {}
        for n in live:
            racks.setdefault(self.image.brokers[n].rack or "", []).append(n)
        if len(racks) <= 1:
            return live
        order: list[int] = []
        columns = [racks[r] for r in sorted(racks)]
        for i in range(max(len(c) for c in columns)):
            order.extend(c[i] for c in columns if i < len(c))
        return order

    def _assign(self, partition: int, replication_factor: int, start: int = 0) -> PartitionState:
        """Replicas of a new partition: `replication_factor` consecutive brokers of the
        placement order beginning at (start + partition), so replicas and leaders go round
        robin over brokers (and racks); the first replica is the preferred leader."""
        brokers = self.placement_order()
        if replication_factor > len(brokers):
            raise ControllerError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"replication factor {replication_factor} is larger than the {len(brokers)} available broker(s)",
            )
        first = (start + partition) % len(brokers)
        replicas = [brokers[(first + i) % len(brokers)] for i in range(replication_factor)]
        return new_partition(partition, replicas)

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
        if self._forward():
            assert self.forwarder is not None
            return await self.forwarder.create_topic(name, num_partitions, replication_factor, assignments,
                                                     configs or {}, validate_only)
        if not assignments:
            wanted = replication_factor if replication_factor > 0 else self.config.get_int("default.replication.factor")
            await self._wait_for_brokers(wanted, f"topic {name!r}")
        async with self._lock:
            num_partitions, replication_factor, checked = self.check_new_topic(
                name, num_partitions, replication_factor, assignments, configs or {}
            )
            partitions = {}
            start = random.randrange(max(1, len(self.placement_order())))  # spread leaders over topics
            for p in range(num_partitions):
                if assignments:
                    r = assignments[p]
                    partitions[p] = new_partition(p, list(r))
                else:
                    partitions[p] = self._assign(p, replication_factor, start)
            topic = TopicState(name, uuid.uuid4(), partitions, checked)
            if validate_only:
                return topic
            image = copy.deepcopy(self.image)
            image.topics[name] = topic
            await self._commit(image)
            log.info("created topic %s (id %s) with %d partition(s), configs %s", name, topic.topic_id, num_partitions, checked,
                     extra=fields(topic=name))
            return topic

    async def _wait_for_brokers(self, wanted: int, what: str) -> None:
        """A cluster that is starting (or a node restarting): when fewer brokers are unfenced
        than `wanted` but enough nodes are known (voters and registered brokers), wait for
        them, within the client's timeout (at most 10 s), rather than answer
        INVALID_REPLICATION_FACTOR to a request made a moment too early; a replication factor
        the known nodes cannot reach fails at once, as in Kafka."""
        if self.quorum is None:
            return
        from logbroker.coord.controller_forwarding import _client_timeout

        def unfenced() -> int:
            return sum(1 for b in self.image.brokers.values() if not b.fenced)

        known = set(self.config.quorum_voters) | set(self.image.brokers)
        if unfenced() >= wanted or len(known) < wanted:
            return
        limit = min(10.0, _client_timeout.get() or 5.0)
        with trio.move_on_after(limit):
            while unfenced() < wanted:
                await self.image_changed()
            log.info("%s: waited for %d unfenced broker(s)", what, wanted)

    async def delete_topic(self, name: str) -> TopicState:
        if self._forward():
            assert self.forwarder is not None
            return await self.forwarder.delete_topic(name)
        async with self._lock:
            if not self.config.get_bool("delete.topic.enable"):
                raise ControllerError(ErrorCode.TOPIC_DELETION_DISABLED, f"cannot delete topic {name!r}: delete.topic.enable is false")
            topic = self.image.topics.get(name)
            if topic is None:
                raise ControllerError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
            image = copy.deepcopy(self.image)
            del image.topics[name]
            await self._commit(image)
            log.info("deleted topic %s (id %s)", name, topic.topic_id, extra=fields(topic=name))
            return topic

    async def create_partitions(
        self, name: str, count: int, assignments: list[list[int]] | None, validate_only: bool
    ) -> None:
        if self._forward():
            assert self.forwarder is not None
            return await self.forwarder.create_partitions(name, count, assignments, validate_only)
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
            start = random.randrange(max(1, len(self.placement_order())))
            for i, p in enumerate(range(current, count)):
                if assignments is not None:
                    r = assignments[i]
                    unknown = [b for b in r if b not in self.image.brokers]
                    if not r or unknown:
                        raise ControllerError(
                            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                            f"topic {name!r} partition {p}: assignment {r} names unknown brokers {unknown}",
                        )
                    new[p] = new_partition(p, list(r))
                else:
                    new[p] = self._assign(p, rf, start)
            if validate_only:
                return
            image = copy.deepcopy(self.image)
            image.topics[name].partitions.update(new)
            await self._commit(image)
            log.info("topic %s: partitions %d -> %d", name, current, count, extra=fields(topic=name))

    async def alter_topic_configs(
        self, name: str, changes: dict[str, str | None], replace: bool, validate_only: bool
    ) -> None:
        """Set (value) or delete (None) topic config overrides. `replace` drops every
        override not named (AlterConfigs semantics)."""
        if self._forward():
            assert self.forwarder is not None
            return await self.forwarder.alter_topic_configs(name, changes, replace, validate_only)
        async with self._lock:
            topic = self.image.topics.get(name)
            if topic is None:
                raise ControllerError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
            configs = _altered(f"topic {name!r}", topic.configs, changes, replace, TOPIC_KEYS, validate_topic_config)
            if validate_only:
                return
            image = copy.deepcopy(self.image)
            image.topics[name].configs = configs
            await self._commit(image)
            log.info("topic %s: configs now %s", name, configs, extra=fields(topic=name))

    async def alter_group_configs(
        self, name: str, changes: dict[str, str | None], replace: bool, validate_only: bool
    ) -> None:
        """Set (value) or delete (None) a group's config overrides (Kafka's GroupConfig keys,
        broker/config.py GROUP_KEYS); `replace` drops every override not named. A group need
        not exist: its configs wait for it, as in Kafka."""
        if self._forward():
            assert self.forwarder is not None
            return await self.forwarder.alter_group_configs(name, changes, replace, validate_only)
        if not name:
            raise ControllerError(ErrorCode.INVALID_GROUP_ID, "a group config needs a group id")
        async with self._lock:
            configs = _altered(f"group {name!r}", self.image.group_configs.get(name, {}), changes, replace,
                               GROUP_KEYS, validate_group_config)
            if validate_only:
                return
            image = copy.deepcopy(self.image)
            if configs:
                image.group_configs[name] = configs
            else:
                image.group_configs.pop(name, None)
            await self._commit(image)
            log.info("group %s: configs now %s", name, configs, extra=fields(group=name))

    # --- SCRAM credentials (KIP-554) ------------------------------------------------

    async def alter_scram_credentials(self, deletions: list[tuple[str, str]],
                                      upsertions: list[tuple[str, str, int, bytes, bytes]]
                                      ) -> list[tuple[str, ErrorCode, str | None]]:
        """AlterUserScramCredentials: delete (user, mechanism) credentials and upsert (user,
        mechanism, iterations, salt, salted password) ones; the stored and server keys are
        computed here from the salted password (the password itself never reaches the broker).
        Returns (user, error, message) once per user named, in the order of first mention.

        Kafka's rules (its ScramControlManager), per user: a user named more than once in the
        request, in deletions or upsertions, is DUPLICATE_RESOURCE; an empty name
        UNACCEPTABLE_CREDENTIAL; a mechanism other than SCRAM-SHA-256/512
        UNSUPPORTED_SASL_MECHANISM; iterations outside [4096, 16384] UNACCEPTABLE_CREDENTIAL;
        deleting a credential that does not exist RESOURCE_NOT_FOUND. A failed user changes
        nothing; the accepted ones are committed together."""
        if self._forward():
            assert self.forwarder is not None
            return await self.forwarder.alter_scram_credentials(deletions, upsertions)
        async with self._lock:
            order = list(dict.fromkeys([d[0] for d in deletions] + [u[0] for u in upsertions]))
            errors: dict[str, tuple[ErrorCode, str]] = {}
            to_delete: dict[str, str] = {}  # user -> mechanism
            to_upsert: dict[str, tuple[str, int, bytes, bytes]] = {}  # user -> (mechanism, iterations, salt, salted)

            def named_before(user: str) -> bool:  # and records DUPLICATE_RESOURCE the second time
                if user in errors:
                    return True
                if to_delete.pop(user, None) is not None or to_upsert.pop(user, None) is not None:
                    errors[user] = (ErrorCode.DUPLICATE_RESOURCE,
                                    f"user {user!r} is named more than once in one request; a user's credentials "
                                    "can be altered once per request")
                    return True
                return False

            for user, mechanism in deletions:
                if not named_before(user):
                    error = self._scram_error(user, mechanism, None)
                    if error is None:
                        to_delete[user] = mechanism
                    else:
                        errors[user] = error
            for user, mechanism, iterations, salt, salted in upsertions:
                if not named_before(user):
                    error = self._scram_error(user, mechanism, iterations)
                    if error is None:
                        to_upsert[user] = (mechanism, iterations, bytes(salt), bytes(salted))
                    else:
                        errors[user] = error
            if to_delete or to_upsert:
                image = copy.deepcopy(self.image)
                for user, mechanism in to_delete.items():
                    del image.scram_credentials[user][mechanism]
                    if not image.scram_credentials[user]:
                        del image.scram_credentials[user]
                for user, (mechanism, iterations, salt, salted) in to_upsert.items():
                    image.scram_credentials.setdefault(user, {})[mechanism] = ScramCredential(
                        mechanism, salt, scram.stored_key(mechanism, salted), scram.server_key(mechanism, salted),
                        iterations)
                await self._commit(image)
                for user, mechanism in to_delete.items():
                    log.info("user %s: deleted the %s credential", user, mechanism)
                for user, (mechanism, iterations, _salt, _salted) in to_upsert.items():
                    log.info("user %s: set the %s credential (%d iterations)", user, mechanism, iterations)
            return [(u, *errors[u]) if u in errors else (u, ErrorCode.NONE, None) for u in order]

    def _scram_error(self, user: str, mechanism: str, iterations: int | None) -> tuple[ErrorCode, str] | None:
        """Why this deletion (iterations None) or upsertion is refused, or None."""
        if not user:
            return ErrorCode.UNACCEPTABLE_CREDENTIAL, "a SCRAM credential needs a user name; it is empty"
        if mechanism not in scram.MECHANISM_TYPES:
            return (ErrorCode.UNSUPPORTED_SASL_MECHANISM,
                    f"user {user!r}: unknown SCRAM mechanism {mechanism!r} (SCRAM-SHA-256 or SCRAM-SHA-512)")
        if iterations is None:
            if self.image.scram_credential(user, mechanism) is None:
                return (ErrorCode.RESOURCE_NOT_FOUND,
                        f"user {user!r} has no {mechanism} credential to delete")
            return None
        if not scram.MIN_ITERATIONS <= iterations <= scram.MAX_ITERATIONS:
            return (ErrorCode.UNACCEPTABLE_CREDENTIAL,
                    f"user {user!r} ({mechanism}): {iterations} iterations, must be between "
                    f"{scram.MIN_ITERATIONS} and {scram.MAX_ITERATIONS}")
        return None

    # --- client quotas (Kafka's ClientQuotaControlManager) -----------------------------

    async def alter_client_quotas(self, entries: list[tuple[list[tuple[str, str | None]],
                                                            list[tuple[str, float, bool]]]],
                                  validate_only: bool) -> list[tuple[list[tuple[str, str | None]], ErrorCode,
                                                                     str | None]]:
        """AlterClientQuotas: per entry (entity components, [(key, value, remove)]) the
        entity as sent, an error and a message, in order. Kafka's rules: the entity must be
        valid (client_quotas.validated_entity), a key named twice in one entry or an entity
        named twice in the request is INVALID_REQUEST, a value set must be valid for its key;
        removing a key that is not set changes nothing. A refused entry changes nothing; the
        accepted ones are committed together (none with `validate_only`)."""
        if self._forward():
            assert self.forwarder is not None
            return await self.forwarder.alter_client_quotas(entries, validate_only)
        async with self._lock:
            results: list[tuple[list[tuple[str, str | None]], ErrorCode, str | None]] = []
            changes: dict[tuple, dict[str, float | None]] = {}
            named: dict[tuple, int] = {}
            for components, _ops in entries:
                try:
                    e = client_quotas.validated_entity(components)
                    named[e] = named.get(e, 0) + 1
                except client_quotas.QuotaError:
                    pass
            for components, ops in entries:
                try:
                    entity = client_quotas.validated_entity(components)
                    if named[entity] > 1:  # every entry of it refused, none applied
                        raise client_quotas.QuotaError(
                            ErrorCode.INVALID_REQUEST,
                            f"Ignoring duplicate entity {client_quotas.entity_name(entity)}")
                    wanted: dict[str, float | None] = {}
                    for key, value, remove in ops:
                        if key in wanted:
                            raise client_quotas.QuotaError(
                                ErrorCode.INVALID_REQUEST, f"Duplicate quota key {key} not updating quota for "
                                                           f"this entity {client_quotas.entity_name(entity)}")
                        if not remove:
                            client_quotas.validate_value(entity, key, value)
                        wanted[key] = None if remove else float(value)
                except client_quotas.QuotaError as e:
                    results.append((components, e.code, e.message))
                    continue
                changes[entity] = wanted
                results.append((components, ErrorCode.NONE, None))
            if validate_only or not changes:
                return results
            image = copy.deepcopy(self.image)
            for entity, wanted in changes.items():
                values = image.client_quotas.setdefault(entity, {})
                for key, value in wanted.items():
                    if value is None:
                        values.pop(key, None)
                    else:
                        values[key] = value
                if not values:
                    del image.client_quotas[entity]
            if image.client_quotas != self.image.client_quotas:
                await self._commit(image)
            for entity, wanted in changes.items():
                log.info("client quotas of %s: %s", client_quotas.entity_name(entity),
                         ", ".join(f"{k} {'removed' if v is None else f'= {v:g}'}" for k, v in wanted.items())
                         or "unchanged")
            return results

    # --- ACLs (Kafka's AclControlManager) ----------------------------------------------

    async def create_acls(self, bindings: list[AclBinding]) -> list[tuple[ErrorCode, str | None]]:
        """CreateAcls: (error, message) for each binding, in order. A binding `acl_error`
        refuses is INVALID_REQUEST; one that exists already (the same seven fields) succeeds
        without a change, as in Kafka; the new ones get a random id and are committed
        together."""
        if self._forward():
            assert self.forwarder is not None
            return await self.forwarder.create_acls(bindings)
        async with self._lock:
            results: list[tuple[ErrorCode, str | None]] = []
            existing = set(self.image.acls.values())
            new: dict[str, AclBinding] = {}
            for b in bindings:
                error = acl_error(b)
                if error is not None:
                    results.append((ErrorCode.INVALID_REQUEST, error))
                    continue
                if b not in existing:
                    existing.add(b)
                    acl_id = uuid.uuid4().hex
                    while acl_id in self.image.acls:
                        acl_id = uuid.uuid4().hex
                    new[acl_id] = b
                results.append((ErrorCode.NONE, None))
            if new:
                image = copy.deepcopy(self.image)
                image.acls.update(new)
                await self._commit(image)
                for acl_id, b in new.items():
                    log.info("ACL %s created: %s", acl_id, describe_acl(b))
            return results

    async def delete_acls(self, filters: list[AclBindingFilter]
                          ) -> list[tuple[ErrorCode, str | None, list[AclBinding]]]:
        """DeleteAcls: for each filter, (error, message, the ACLs it matched and deleted).
        A filter with an UNKNOWN field is INVALID_REQUEST (Kafka's "Unknown patternFilter." /
        "Unknown entryFilter."); an ACL several filters match is reported by each; the
        deletions are committed together."""
        if self._forward():
            assert self.forwarder is not None
            return await self.forwarder.delete_acls(filters)
        async with self._lock:
            results: list[tuple[ErrorCode, str | None, list[AclBinding]]] = []
            gone: dict[str, AclBinding] = {}
            for f in filters:
                error = acl_filter_error(f)
                if error is not None:
                    results.append((ErrorCode.INVALID_REQUEST, error, []))
                    continue
                matched = sorted(((b, i) for i, b in self.image.acls.items() if f.matches(b)), key=_acl_order)
                gone.update((i, b) for b, i in matched)
                results.append((ErrorCode.NONE, None, [b for b, _i in matched]))
            if gone:
                image = copy.deepcopy(self.image)
                for i in gone:
                    del image.acls[i]
                await self._commit(image)
                for i, b in sorted(gone.items()):
                    log.info("ACL %s deleted: %s", i, describe_acl(b))
            return results

    # --- brokers: fencing and leader election ----------------------------------------

    async def fence_brokers(self, node_ids: list[int], reason: str) -> None:
        """Fence brokers (session expired, controlled shutdown): they leave Metadata; each
        partition they lead gets another leader (see elections.py) or none; they leave every
        ISR that has other members."""
        async with self._lock:
            image = copy.deepcopy(self.image)
            gone = {n for n in node_ids if n in image.brokers and not image.brokers[n].fenced}
            if not gone:
                return
            for n in gone:
                image.brokers[n].fenced = True
            moved = self._elect(image, gone)
            await self._commit(image)
            log.warning("fenced broker(s) %s (%s); %d partition leadership(s) changed: %s", sorted(gone), reason,
                        len(moved), elections.summary(moved), extra=fields(peer=min(gone) if len(gone) == 1 else None))
            self._log_unclean(moved)

    async def unfence_broker(self, node_id: int, epoch: int) -> None:
        async with self._lock:
            b = self.image.brokers.get(node_id)
            if b is None or b.epoch != epoch or not b.fenced:
                return
            image = copy.deepcopy(self.image)
            image.brokers[node_id].fenced = False
            moved = self._elect(image, set())
            await self._commit(image)
            log.info("unfenced broker %d (epoch %d); %d partition(s) got a leader: %s", node_id, epoch, len(moved),
                     elections.summary(moved), extra=fields(peer=node_id))
            self._log_unclean(moved)

    async def reconcile_brokers(self, expired: list[int]) -> None:
        """The active controller's periodic pass: fence `expired` brokers, give leaderless
        partitions a leader (elections.py) and finish reassignments whose targets are all
        in the ISR."""
        if expired:
            await self.fence_brokers(expired, f"no heartbeat for {self.config.get_int('broker.session.timeout.ms')} ms")
        async with self._lock:
            if not self._elect(self.image, set(), apply=False) and not any(
                    reassignment.completable(ps) for t in self.image.topics.values() for ps in t.partitions.values()):
                return  # the usual pass: nothing to do, no image copied
            image = copy.deepcopy(self.image)
            moved = self._elect(image, set())
            done = [f"{t.name}-{ps.partition}" for t in image.topics.values() for ps in t.partitions.values()
                    if reassignment.maybe_complete(image, ps)]
            await self._commit(image)
            if moved:
                log.info("elected leaders for %d partition(s): %s", len(moved), elections.summary(moved))
                self._log_unclean(moved)
            if done:
                log.info("completed the reassignment of %s", ", ".join(done))

    def unclean_allowed(self, topic: TopicState) -> bool:
        """`unclean.leader.election.enable` for `topic` (its override, else the broker's)."""
        value = topic.configs.get("unclean.leader.election.enable")
        if value is None:
            return self.config.get_bool("unclean.leader.election.enable")
        return value == "true"

    def _elect(self, image: MetadataImage, gone: set[int], apply: bool = True) -> list[elections.Election]:
        moved = elections.elect_for_brokers(image, gone, self.unclean_allowed, apply)
        if apply:
            self._count_elections(len(moved), sum(e.unclean for e in moved))
        return moved

    def _count_elections(self, n: int, unclean: int) -> None:
        """Leader elections decided here (Kafka's ControllerStats LeaderElectionRateAndTimeMs
        and UncleanLeaderElectionsPerSec), for the metrics endpoint."""
        self.leader_elections += n
        self.unclean_leader_elections += unclean

    @property
    def is_active(self) -> bool:
        """Whether this node is the active controller (always, on a single node)."""
        return self.quorum is None or self.quorum.is_active

    @staticmethod
    def _log_unclean(moved: list[elections.Election]) -> None:
        for e in moved:
            if e.unclean:
                elections.log_unclean(e)

    # --- leader elections asked for (ElectLeaders, auto.leader.rebalance.enable) -----

    async def elect_leaders(self, election_type: int, partitions: list[tuple[str, list[int]]] | None
                            ) -> list[tuple[str, int, ErrorCode, str]]:
        """ElectLeaders: preferred (0) or unclean (1) election for `partitions` (None: every
        partition; then partitions that need no election are left out of the result, as
        Kafka does). Returns (topic, partition, error, message) per partition."""
        if election_type not in (elections.PREFERRED, elections.UNCLEAN):
            raise ControllerError(ErrorCode.INVALID_REQUEST, f"election type {election_type} is not 0 (preferred) "
                                                             "or 1 (unclean)")
        if self._forward():
            assert self.forwarder is not None
            return await self.forwarder.elect_leaders(election_type, partitions)
        async with self._lock:
            image = copy.deepcopy(self.image)
            wanted = partitions if partitions is not None else [
                (t.name, sorted(t.partitions)) for t in image.topics.values()]
            results: list[tuple[str, int, ErrorCode, str]] = []
            unclean: list[elections.Election] = []
            for name, indexes in wanted:
                t = image.topics.get(name)
                for i in indexes:
                    ps = None if t is None else t.partitions.get(i)
                    if t is None or ps is None:
                        results.append((name, i, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                        f"partition {name}-{i} does not exist"))
                        continue
                    old_leader, old_isr = ps.leader, tuple(ps.isr)
                    if election_type == elections.PREFERRED:
                        code, message = elections.elect_preferred(image, t, ps)
                    else:
                        code, message, outside = elections.elect_unclean(image, t, ps)
                        if outside:
                            unclean.append(elections.Election(name, i, old_leader, ps.leader, True, old_isr))
                    if partitions is None and code == ErrorCode.ELECTION_NOT_NEEDED:
                        continue
                    results.append((name, i, code, message))
            changed = [r for r in results if r[2] == ErrorCode.NONE]
            if changed:
                await self._commit(image)
                self._count_elections(len(changed), len(unclean))
                kind = "preferred" if election_type == elections.PREFERRED else "unclean"
                log.info("%s leader election: %s", kind, ", ".join(
                    f"{n}-{i} -> {image.topics[n].partitions[i].leader}" for n, i, _c, _m in changed))
                self._log_unclean(unclean)
            return results

    async def rebalance_leaders(self) -> int:
        """auto.leader.rebalance.enable: give every partition whose preferred replica is live
        and in the ISR back to it. Returns how many moved."""
        async with self._lock:
            if not elections.imbalanced(self.image):
                return 0
            image = copy.deepcopy(self.image)
            moved = []
            for t, ps in elections.imbalanced(image):
                moved.append((t.name, ps.partition, ps.leader, ps.preferred_leader))
                elections.elect_preferred(image, t, ps)
            await self._commit(image)
            self._count_elections(len(moved), 0)
            log.info("leader rebalance: %d partition(s) back on their preferred replica: %s", len(moved),
                     ", ".join(f"{n}-{i} {a}->{b}" for n, i, a, b in moved[:10]))
            return len(moved)

    # --- partition reassignment (KIP-455, reassignment.py) -------------------------------

    async def alter_reassignments(self, items: list[tuple[str, int, list[int] | None]],
                                  allow_replication_factor_change: bool = True
                                  ) -> list[tuple[str, int, ErrorCode, str]]:
        """AlterPartitionReassignments: start (a target) or cancel (None) the reassignment of
        each (topic, partition); returns (topic, partition, error, message) for each, and
        commits the ones that were accepted together."""
        if self._forward():
            assert self.forwarder is not None
            return await self.forwarder.alter_reassignments(items, allow_replication_factor_change)
        async with self._lock:
            image = copy.deepcopy(self.image)
            results: list[tuple[str, int, ErrorCode, str]] = []
            accepted = []
            for name, i, target in items:
                t = image.topics.get(name)
                ps = None if t is None else t.partitions.get(i)
                if ps is None:
                    results.append((name, i, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                    f"partition {name}-{i} does not exist"))
                    continue
                before = list(ps.replicas)
                try:
                    if target is None:
                        reassignment.cancel(image, f"{name}-{i}", ps)
                    else:
                        reassignment.check_target(image, f"{name}-{i}", ps, list(target),
                                                  allow_replication_factor_change)
                        reassignment.start(image, ps, list(target))
                except reassignment.ReassignmentError as e:
                    results.append((name, i, e.code, e.message))
                    continue
                results.append((name, i, ErrorCode.NONE, ""))
                accepted.append((name, i, target, before, ps))
            if diff_records(self.image, image):  # an accepted target equal to the replicas changes nothing
                await self._commit(image)
            for name, i, target, replicas, ps in accepted:
                what = "cancelled the reassignment" if target is None else f"reassigning to {target}"
                log.info("%s-%d: %s (replicas %s -> %s, adding %s, removing %s, ISR %s, leader %d)", name, i, what,
                         replicas, ps.replicas, ps.adding_replicas, ps.removing_replicas, ps.isr, ps.leader,
                         extra=fields(topic=name, partition=i))
            return results

    def list_reassignments(self, partitions: list[tuple[str, list[int]]] | None
                           ) -> list[tuple[str, int, list[int], list[int], list[int]]]:
        """Reassignments in progress: (topic, partition, replicas, adding, removing), of
        `partitions` (None: all); unknown partitions are left out."""
        out = []
        image = self.image
        wanted = partitions if partitions is not None else [(t.name, sorted(t.partitions)) for t in image.topics.values()]
        for name, indexes in wanted:
            t = image.topics.get(name)
            for i in indexes:
                ps = None if t is None else t.partitions.get(i)
                if ps is not None and reassignment.in_progress(ps):
                    out.append((name, i, list(ps.replicas), list(ps.adding_replicas), list(ps.removing_replicas)))
        return out

    # --- ISR changes (AlterPartition) ------------------------------------------------

    async def alter_partition(self, broker_id: int, broker_epoch: int, topic_id: uuid.UUID, partition: int,
                              leader_epoch: int, partition_epoch: int,
                              new_isr: list[int]) -> tuple[ErrorCode, str, PartitionState | None]:
        """A partition leader asks to change its ISR (Kafka's AlterPartition). Checked in
        order: topic and partition exist; the requester is registered with that broker epoch
        (-1: not checked) and leads the partition at `leader_epoch` (older: FENCED_LEADER_EPOCH;
        newer: this controller is behind, NOT_CONTROLLER); `partition_epoch` is the current one
        (INVALID_UPDATE_VERSION: a stale request, e.g. racing a leader change); the new ISR is
        non-empty, holds the leader, and only replicas (INVALID_REQUEST); members other than
        the current ones are unfenced (INELIGIBLE_REPLICA). Accepted: the ISR is committed
        with the partition epoch bumped (leader and leader epoch unchanged). Returns (error,
        message, the partition's state after the request)."""
        async with self._lock:
            topic = self.image.topic_by_id(topic_id)
            if topic is None:
                return ErrorCode.UNKNOWN_TOPIC_ID, f"no topic with id {topic_id}", None
            ps = topic.partitions.get(partition)
            name = f"{topic.name}-{partition}"
            if ps is None:
                return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"partition {name} does not exist", None
            reg = self.image.brokers.get(broker_id)
            if reg is None or (broker_epoch >= 0 and reg.epoch != broker_epoch):
                return (ErrorCode.STALE_BROKER_EPOCH,
                        f"broker {broker_id} epoch {broker_epoch} is not registered"
                        + (f" (registered epoch {reg.epoch})" if reg else ""), ps)
            if ps.leader != broker_id:
                return ErrorCode.NOT_LEADER_OR_FOLLOWER, f"broker {broker_id} does not lead {name} (leader {ps.leader})", ps
            if leader_epoch < ps.leader_epoch:
                return (ErrorCode.FENCED_LEADER_EPOCH,
                        f"leader epoch {leader_epoch} of {name} is older than {ps.leader_epoch}", ps)
            if leader_epoch > ps.leader_epoch:
                return (ErrorCode.NOT_CONTROLLER,
                        f"leader epoch {leader_epoch} of {name} is newer than this controller's {ps.leader_epoch}", ps)
            if partition_epoch != ps.partition_epoch:
                return (ErrorCode.INVALID_UPDATE_VERSION,
                        f"partition epoch {partition_epoch} of {name} is not the current {ps.partition_epoch}", ps)
            if not new_isr or ps.leader not in new_isr or len(set(new_isr)) != len(new_isr) \
                    or any(r not in ps.replicas for r in new_isr):
                return (ErrorCode.INVALID_REQUEST,
                        f"ISR {new_isr} of {name} must be distinct replicas of {ps.replicas} including the leader "
                        f"{ps.leader}", ps)
            ineligible = [r for r in new_isr if r not in ps.isr
                          and (r not in self.image.brokers or self.image.brokers[r].fenced)]
            if ineligible:
                return (ErrorCode.INELIGIBLE_REPLICA,
                        f"broker(s) {ineligible} cannot join the ISR of {name}: fenced or not registered", ps)
            if sorted(new_isr) == sorted(ps.isr):
                return ErrorCode.NONE, "", ps
            image = copy.deepcopy(self.image)
            changed = image.topics[topic.name].partitions[partition]
            old_isr = list(changed.isr)
            changed.isr = list(new_isr)
            changed.partition_epoch += 1
            completed = reassignment.maybe_complete(image, changed)
            await self._commit(image)
            log.info("%s: ISR %s -> %s (requested by leader %d, leader epoch %d, partition epoch %d -> %d)", name,
                     old_isr, new_isr, broker_id, leader_epoch, partition_epoch, changed.partition_epoch,
                     extra=fields(topic=topic.name, partition=partition, peer=broker_id))
            if completed:
                log.info("%s: reassignment complete: replicas %s, ISR %s, leader %d", name, changed.replicas,
                         changed.isr, changed.leader, extra=fields(topic=topic.name, partition=partition))
            return ErrorCode.NONE, "", changed

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


def _name(enum_type, code: int) -> str:
    try:
        return enum_type(code).name
    except ValueError:
        return f"UNKNOWN ({code})"


def describe_acl(b: AclBinding) -> str:
    """An ACL in words, for logs and messages: `ALLOW User:alice from * READ on TOPIC 'orders' (LITERAL)`."""
    return (f"{_name(AclPermissionType, b.permission_type)} {b.principal} from {b.host} "
            f"{_name(AclOperation, b.operation)} on {_name(ResourceType, b.resource_type)} {b.resource_name!r} "
            f"({_name(PatternType, b.pattern_type)})")


def acl_error(b: AclBinding) -> str | None:
    """Why CreateAcls refuses this ACL (Kafka's AclControlManager.validateNewAcl and AclApis),
    or None. The message names the field."""
    what = f"ACL {describe_acl(b)}"
    if b.resource_type not in ResourceType._value2member_map_ or b.resource_type in (ResourceType.ANY,
                                                                                      ResourceType.UNKNOWN):
        return (f"{what}: invalid resource type {_name(ResourceType, b.resource_type)}; an ACL is on one of "
                "TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, DELEGATION_TOKEN, USER")
    if b.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"{what}: invalid pattern type {_name(PatternType, b.pattern_type)}; an ACL is LITERAL or PREFIXED"
    if b.operation not in AclOperation._value2member_map_ or b.operation in (AclOperation.ANY, AclOperation.UNKNOWN):
        return f"{what}: invalid operation {_name(AclOperation, b.operation)}; ANY and UNKNOWN only filter"
    if b.permission_type not in (AclPermissionType.DENY, AclPermissionType.ALLOW):
        return (f"{what}: invalid permission type {_name(AclPermissionType, b.permission_type)}; an ACL is DENY or "
                "ALLOW")
    if not b.resource_name:
        return f"{what}: the resource name is empty"
    if b.resource_type == ResourceType.CLUSTER and b.resource_name != CLUSTER_NAME:
        return f"{what}: the only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    kind, sep, name = b.principal.partition(":")
    if not (kind and sep and name):
        return f"{what}: invalid principal {b.principal!r}; a principal is Type:name, e.g. User:alice or User:*"
    if not b.host:
        return f"{what}: the host is empty; give an address or * for every host"
    return None


def acl_filter_error(f: AclBindingFilter) -> str | None:
    """Why a DescribeAcls/DeleteAcls filter is refused (an UNKNOWN field, as Kafka), or None."""
    for value, enum_type, what in ((f.resource_type, ResourceType, "resource type"),
                                   (f.pattern_type, PatternType, "pattern type"),
                                   (f.operation, AclOperation, "operation"),
                                   (f.permission_type, AclPermissionType, "permission type")):
        if value not in enum_type._value2member_map_ or value == 0:
            return f"ACL filter with an unknown {what} ({value})"
    return None


def _acl_order(item: tuple[AclBinding, str]) -> tuple:
    b = item[0]
    return (b.resource_type, b.resource_name, b.pattern_type, b.principal, b.host, b.operation, b.permission_type)


def _altered(what: str, current: dict[str, str], changes: dict[str, str | None], replace: bool,
             keys: dict, validate: Callable[[dict[str, str | None]], dict[str, str]]) -> dict[str, str]:
    """Config overrides after (Incremental)AlterConfigs: `changes` sets (value) or deletes
    (None) keys; `replace` starts from nothing (AlterConfigs). ControllerError(INVALID_CONFIG)
    names `what` and the bad key or value."""
    configs = {} if replace else dict(current)
    try:
        checked = validate({k: v for k, v in changes.items() if v is not None})
    except ConfigError as e:
        raise ControllerError(ErrorCode.INVALID_CONFIG, f"{what}: {e}") from None
    for k, v in changes.items():
        if v is None:
            if k not in keys:
                raise ControllerError(ErrorCode.INVALID_CONFIG, f"{what}: unknown configuration key {k!r}")
            configs.pop(k, None)
    configs.update(checked)
    return configs
