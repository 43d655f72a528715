"""The controller: the single writer of the metadata log.

Every node runs one; the one on the metadata log's Raft leader is the active controller
(metadata_quorum.py), and the others forward changes to it (controller_forwarding.py).
A single node is a quorum of one voter and always active. The rules live in the control
managers, one per concept (Kafka's controller/*ControlManager): topics and replication
(replication_control.py), broker fencing (cluster_control.py), configs
(config_control.py), client quotas (client_quota_control.py), SCRAM users
(scram_control.py), ACLs (acl_control.py), producer ids (producer_id_control.py). Each
returns its answer and the records that make it so, reading only what the request names;
the controller serialises the requests (one lock), writes the records to the metadata log
and logs what changed once they are committed. Each node's image changes only by applying
committed records (metadata_records.py), and is then published to the broker-side
listeners (`ReplicaManager.apply_metadata`, ...) with the delta that says what changed.

Every method either applies the whole change or raises `ControllerError` carrying a Kafka
error code and a message that names the topic and the values involved.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, TypeVar

import trio

from logbroker.common.config import BrokerConfig, ConfigError
from logbroker.common.delegation_tokens import new_token_id
from logbroker.coord.metadata import elections
from logbroker.coord.metadata.acl_control import AclControlManager
from logbroker.coord.metadata.broker_sessions import BrokerSessions
from logbroker.coord.metadata.client_quota_control import ClientQuotaControlManager
from logbroker.coord.metadata.cluster_control import ClusterControlManager
from logbroker.coord.metadata.config_control import Change, ConfigurationControlManager
from logbroker.coord.metadata.control import ControllerError, ControllerResult, IsrChange
from logbroker.coord.metadata.controller_channel import ControllerClient, serving_controller_listener
from logbroker.coord.metadata.controller_forwarding import Forwarder, _client_timeout
from logbroker.coord.metadata.delegation_token_control import DelegationTokenControlManager
from logbroker.coord.metadata.feature_control import FeatureControlManager
from logbroker.coord.metadata.metadata import (
    AclBinding,
    AclBindingFilter,
    BrokerRegistration,
    DelegationToken,
    MetadataImage,
    MetadataStore,
    TopicState,
)
from logbroker.coord.metadata.metadata_records import MetadataRecordError, diff_records, voters_record
from logbroker.coord.metadata.producer_id_control import PRODUCER_ID_BLOCK
from logbroker.coord.metadata.quorum import QuorumTimeout
from logbroker.coord.metadata.reconcile_scope import ReconcileScope
from logbroker.coord.metadata.replication_control import IsrResult, NewTopicSpec, ReplicationControlManager
from logbroker.coord.metadata.scram_control import ScramControlManager
from logbroker.log_format import fields
from logbroker.protocol import ErrorCode

if TYPE_CHECKING:
    from logbroker.coord.metadata.metadata_delta import MetadataDelta
    from logbroker.coord.metadata.metadata_quorum import MetadataQuorum

__all__ = ["Controller", "ControllerError"]

log = logging.getLogger("logbroker.controller")

T = TypeVar("T")


def _now_ms() -> int:
    return int(time.time() * 1000)


# (new image, what changed: None when anything may have, e.g. after a snapshot load)
Listener = Callable[[MetadataImage, "MetadataDelta | None"], Awaitable[None]]


class Controller:
    def __init__(
        self, config: BrokerConfig, store: MetadataStore, local: BrokerRegistration, quorum: MetadataQuorum
    ) -> None:
        self.config = config
        self.store = store
        self.local = local
        self.quorum = quorum
        self.leader_elections = 0
        self.unclean_leader_elections = 0
        self.alter_partition_requests = 0  # AlterPartition requests handled as the active controller (the
        self.alter_partition_partitions = 0  # local broker's included) and the partitions they named
        self._lock = trio.Lock()
        self._listeners: list[Listener] = []
        self._producer_id_next = 0
        self._producer_id_end = 0
        self._changed = trio.Event()
        self._to_reconcile = ReconcileScope()  # what the periodic pass must read (reconcile_scope.py)
        self.image = quorum.image
        self.replication = ReplicationControlManager(config)
        self.cluster = ClusterControlManager(self.replication)
        self.configs = ConfigurationControlManager(config)
        self.client_quotas = ClientQuotaControlManager()
        self.scram = ScramControlManager()
        self.delegation_tokens = DelegationTokenControlManager(
            config.get_int("delegation.token.max.lifetime.ms"), config.get_int("delegation.token.expiry.time.ms")
        )
        self.acls = AclControlManager()
        self.features = FeatureControlManager(config)
        self.sessions = BrokerSessions(self, config.get_int("broker.session.timeout.ms"))
        self.forwarder = Forwarder(
            self,
            ControllerClient(
                local.node_id,
                quorum.voters,
                lambda: quorum.leader_id,
                "forwarded metadata changes",
                quorum.transport.security,
            ),
        )

    @property
    def controller_id(self) -> int:
        """The active controller: the quorum's leader (-1 while none is known)."""
        return self.quorum.leader_id or -1

    def client_brokers(self, image: MetadataImage | None = None) -> list[BrokerRegistration]:
        """The brokers named to clients in Metadata: the unfenced ones, by id. A Kafka broker
        serves clients only once it is unfenced, so its list is never empty; this one answers
        from its start, and while no broker is unfenced (before the first registration) it
        names itself, the one broker the client has reached. librdkafka takes an empty list
        as a failed lookup and does not ask again until something else happens, which stalls
        its admin client for a whole request timeout."""
        image = image or self.image
        live = [b for _, b in sorted(image.brokers.items()) if not b.fenced]
        return live or [self.local]

    def client_controller_id(self, brokers: list[BrokerRegistration]) -> int:
        """The controller named to clients in Metadata next to `brokers`. Every broker
        forwards admin requests to the active controller, so, as KRaft brokers name a live
        broker rather than the controller, a broker names itself: a client never waits on a
        controller that just died (librdkafka's admin client would, until its request times
        out). A broker not in the list (fenced, or not registered yet) names the first that
        is: librdkafka waits without asking again for a controller missing from the list.
        DescribeCluster and DescribeQuorum name the active controller."""
        ids = [b.node_id for b in brokers]
        if self.local.node_id in ids:
            return self.local.node_id
        return ids[0] if ids else -1

    async def migrate_legacy_image(self) -> None:
        """A single node's data directory from before the metadata log: write its
        image.json as records to the metadata log (once this node leads it), then remove
        the file. Topic ids already in the log mean an earlier start migrated it and stopped
        before the file was removed."""
        doc = self.store.read_legacy_image()
        if doc is None:
            return
        path = self.store.legacy_path
        if len(self.quorum.voters) > 1:
            raise ConfigError(
                f"data directory {self.store.data_dir} holds a single-node metadata image ({path}); "
                "start it as a single node once (it moves the image to the metadata log), then add "
                "voters"
            )
        try:
            legacy = MetadataImage.from_json(doc, self.local.node_id, {})
        except (KeyError, ValueError, TypeError) as e:
            raise ConfigError(f"metadata image {path} does not load: {e}") from None
        known = {t.topic_id for t in self.image.topics.values()}
        if not known & {t.topic_id for t in legacy.topics.values()}:
            with trio.fail_after(30):
                while not self.quorum.is_active:
                    await self.image_changed()
            empty = MetadataImage(self.image.cluster_id, self.local.node_id, {}, {}, self.image.next_producer_id)
            records = diff_records(empty, dataclasses.replace(legacy, brokers={}))
            await self.quorum.write(records, timeout=30)
            log.info("moved %s to the metadata log: %d record(s), %d topic(s)", path, len(records), len(legacy.topics))
        await trio.to_thread.run_sync(self.store.remove_legacy_image)

    async def on_quorum_image(self, image: MetadataImage, delta: MetadataDelta | None) -> None:
        """A new image applied from the metadata log: make it current, listeners in order,
        then whoever waits in `image_changed`."""
        self.image = image
        self._to_reconcile.note(delta)
        for listener in self._listeners:
            await listener(image, delta)
        self._changed.set()
        self._changed = trio.Event()

    async def image_changed(self) -> None:
        """Wait for the next published image."""
        await self._changed.wait()

    def _forward(self) -> bool:
        """True when this call must go to the active controller: a cluster node that is not
        it, and not already serving a request on the controller listener (which answers
        NOT_CONTROLLER instead, so a request is forwarded at most once)."""
        return not self.quorum.is_active and not serving_controller_listener.get()

    def add_listener(self, listener: Listener) -> None:
        self._listeners.append(listener)

    async def _write(self, records: list[bytes]) -> None:
        """Write `records` to the metadata log as one entry; returns once this node applied
        them. ControllerError when this node is not the active controller or the entry did
        not commit."""
        if not self.quorum.is_active:
            leader = self.quorum.leader_id
            raise ControllerError(
                ErrorCode.NOT_CONTROLLER,
                f"node {self.local.node_id} is not the active controller; "
                + (f"node {leader} is" if leader else "no controller is elected yet"),
            )
        try:
            await self.quorum.write(records)
        except QuorumTimeout as e:
            raise ControllerError(ErrorCode.REQUEST_TIMED_OUT, str(e)) from None
        except MetadataRecordError as e:
            raise ControllerError(ErrorCode.UNKNOWN_SERVER_ERROR, str(e)) from None

    async def _run(self, result: ControllerResult[T]) -> T:
        """Write a manager's records (if any), log what it did, return its answer."""
        if result.records:
            await self._write(result.records)
        for message, where in result.log:
            log.log(result.level, "%s", message, extra=fields(**where))
        return result.response

    # --- topics -------------------------------------------------------------------

    def placement_order(self) -> list[int]:
        """The unfenced brokers in placement order (replication_control.py)."""
        return self.replication.placement_order(self.image)

    async def create_topics(
        self, specs: list[NewTopicSpec], validate_only: bool = False
    ) -> list[TopicState | ControllerError]:
        """CreateTopics: each topic created (its state) or why not, in order; the created
        ones are written as one metadata-log entry. ControllerError when none could be
        written (no active controller, the entry did not commit)."""
        if self._forward():
            return await self.forwarder.create_topics(specs, validate_only)
        default_rf = self.config.get_int("default.replication.factor")
        wanted = max(
            (s.replication_factor if s.replication_factor > 0 else default_rf for s in specs if not s.assignments),
            default=0,
        )
        if wanted:
            await self._wait_for_brokers(
                wanted,
                ", ".join(f"topic {s.name!r}" for s in specs[:3])
                + (f" and {len(specs) - 3} more" if len(specs) > 3 else ""),
            )
        async with self._lock:
            result = self.replication.create_topics(self.image, specs)
            return result.response if validate_only else await self._run(result)

    async def create_topic(
        self,
        name: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        assignments: dict[int, list[int]] | None = None,
        configs: dict[str, str | None] | None = None,
    ) -> TopicState:
        """One topic (the internal topics, auto-creation); ControllerError when refused."""
        [result] = await self.create_topics(
            [NewTopicSpec(name, num_partitions, replication_factor, assignments, configs or {})]
        )
        if isinstance(result, ControllerError):
            raise result
        return result

    async def _wait_for_brokers(self, wanted: int, what: str) -> None:
        """A cluster that is starting (or a node restarting): when fewer brokers are unfenced
        than `wanted` but enough nodes are known (voters and registered brokers), wait for
        them, within the client's timeout (at most 10 s), rather than answer
        INVALID_REPLICATION_FACTOR to a request made a moment too early; a replication factor
        the known nodes cannot reach fails at once, as in Kafka."""

        def unfenced() -> int:
            return sum(1 for b in self.image.brokers.values() if not b.fenced)

        known = (set(self.quorum.voters) - set(self.image.controllers)) | set(self.image.brokers)
        if unfenced() >= wanted or len(known) < wanted:
            return
        limit = min(10.0, _client_timeout.get() or 5.0)
        with trio.move_on_after(limit):
            while unfenced() < wanted:
                await self.image_changed()
            log.info("%s: waited for %d unfenced broker(s)", what, wanted)

    async def delete_topic(self, name: str) -> TopicState:
        if self._forward():
            return await self.forwarder.delete_topic(name)
        async with self._lock:
            return await self._run(self.replication.delete_topic(self.image, name))

    async def create_partitions(
        self, name: str, count: int, assignments: list[list[int]] | None, validate_only: bool
    ) -> None:
        if self._forward():
            return await self.forwarder.create_partitions(name, count, assignments, validate_only)
        async with self._lock:
            result = self.replication.create_partitions(self.image, name, count, assignments)
            if not validate_only:
                await self._run(result)

    # --- configs ------------------------------------------------------------------------

    async def alter_topic_configs(
        self, name: str, changes: Mapping[str, Change], replace: bool, validate_only: bool
    ) -> None:
        """Set (value) or delete (None) topic config overrides. `replace` drops every
        override not named (AlterConfigs semantics)."""
        if self._forward():
            return await self.forwarder.alter_topic_configs(name, changes, replace, validate_only)
        async with self._lock:
            result = self.configs.alter_topic_configs(self.image, name, changes, replace)
            if not validate_only:
                await self._run(result)

    async def alter_group_configs(
        self, name: str, changes: Mapping[str, Change], replace: bool, validate_only: bool
    ) -> None:
        """Set (value) or delete (None) a group's config overrides; `replace` drops every
        override not named. A group need not exist: its configs wait for it, as in Kafka."""
        if self._forward():
            return await self.forwarder.alter_group_configs(name, changes, replace, validate_only)
        async with self._lock:
            result = self.configs.alter_group_configs(self.image, name, changes, replace)
            if not validate_only:
                await self._run(result)

    async def alter_broker_configs(
        self, name: str, changes: Mapping[str, Change], replace: bool, validate_only: bool
    ) -> None:
        """Dynamic broker configs: `name` "" for the cluster default or a broker id
        (config_control.py); every broker applies them without a restart."""
        if self._forward():
            return await self.forwarder.alter_broker_configs(name, changes, replace, validate_only)
        async with self._lock:
            result = self.configs.alter_broker_configs(self.image, name, changes, replace)
            if not validate_only:
                await self._run(result)

    async def alter_client_metrics_configs(
        self, name: str, changes: Mapping[str, Change], replace: bool, validate_only: bool
    ) -> None:
        """Set (value) or delete (None) keys of a client-metrics subscription (KIP-714,
        config_control.py); deleting every key deletes it."""
        if self._forward():
            return await self.forwarder.alter_client_metrics_configs(name, changes, replace, validate_only)
        async with self._lock:
            result = self.configs.alter_client_metrics_configs(self.image, name, changes, replace)
            if not validate_only:
                await self._run(result)

    # --- SCRAM credentials, client quotas, ACLs ------------------------------------------

    async def alter_scram_credentials(
        self, deletions: list[tuple[str, str]], upsertions: list[tuple[str, str, int, bytes, bytes]]
    ) -> list[tuple[str, ErrorCode, str | None]]:
        """AlterUserScramCredentials (scram_control.py): (user, error, message) per user."""
        if self._forward():
            return await self.forwarder.alter_scram_credentials(deletions, upsertions)
        async with self._lock:
            return await self._run(self.scram.alter(self.image, deletions, upsertions))

    # --- delegation tokens (delegation_token_control.py) ----------------------------------

    async def create_delegation_token(
        self, owner: str, requester: str, renewers: list[str], max_lifetime_ms: int
    ) -> DelegationToken:
        """CreateDelegationToken: the new token, once in this node's image. ControllerError."""
        if self._forward():
            return await self.forwarder.create_delegation_token(owner, renewers, max_lifetime_ms)
        async with self._lock:
            return await self._run(
                self.delegation_tokens.create(new_token_id(), owner, requester, renewers, max_lifetime_ms, _now_ms())
            )

    async def renew_delegation_token(self, token_id: str, hmac: bytes, period_ms: int) -> int:
        """RenewDelegationToken: the new expiry (epoch ms). ControllerError."""
        if self._forward():
            return await self.forwarder.renew_delegation_token(token_id, hmac, period_ms)
        async with self._lock:
            return await self._run(self.delegation_tokens.renew(self.image, token_id, period_ms, _now_ms()))

    async def expire_delegation_token(self, token_id: str, hmac: bytes, period_ms: int) -> int:
        """ExpireDelegationToken: the new expiry (now, when removed). ControllerError."""
        if self._forward():
            return await self.forwarder.expire_delegation_token(token_id, hmac, period_ms)
        async with self._lock:
            return await self._run(self.delegation_tokens.expire(self.image, token_id, period_ms, _now_ms()))

    async def expire_delegation_tokens(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """The active controller removes expired tokens every
        `delegation.token.expiry.check.interval.ms` (runs on every node; acts on the leader)."""
        task_status.started()
        while True:
            await trio.sleep(self.config.get_int("delegation.token.expiry.check.interval.ms") / 1000)
            if not self.quorum.is_active or not self.image.delegation_tokens:
                continue
            try:
                async with self._lock:
                    await self._run(self.delegation_tokens.expire_due(self.image, _now_ms()))
            except ControllerError as e:
                log.info("removing expired delegation tokens failed (tried again in an interval): %s", e.message)

    async def alter_client_quotas(
        self, entries: list[tuple[list[tuple[str, str | None]], list[tuple[str, float, bool]]]], validate_only: bool
    ) -> list[tuple[list[tuple[str, str | None]], ErrorCode, str | None]]:
        """AlterClientQuotas (client_quota_control.py): per entry the entity as sent, an
        error and a message, in order; nothing written with `validate_only`."""
        if self._forward():
            return await self.forwarder.alter_client_quotas(entries, validate_only)
        async with self._lock:
            result = self.client_quotas.alter(self.image, entries)
            return result.response if validate_only else await self._run(result)

    async def create_acls(self, bindings: list[AclBinding]) -> list[tuple[ErrorCode, str | None]]:
        """CreateAcls (acl_control.py): (error, message) for each binding, in order."""
        if self._forward():
            return await self.forwarder.create_acls(bindings)
        async with self._lock:
            return await self._run(self.acls.create(self.image, bindings))

    async def delete_acls(
        self, filters: list[AclBindingFilter]
    ) -> list[tuple[ErrorCode, str | None, list[AclBinding]]]:
        """DeleteAcls (acl_control.py): (error, message, the ACLs deleted) for each filter."""
        if self._forward():
            return await self.forwarder.delete_acls(filters)
        async with self._lock:
            return await self._run(self.acls.delete(self.image, filters))

    # --- features (feature_control.py) --------------------------------------------------

    async def ensure_bootstrap(self) -> None:
        """On the active controller: give a log without finalized features its bootstrap
        levels, and one without a voter directory the configured voters (a new cluster, or a
        log written before these records existed)."""
        async with self._lock:
            if self.quorum.is_active:
                await self._run(self.features.bootstrap(self.image))
                directory = self.quorum.initial_voter_directory()
                if not self.image.voters and directory:  # a joined node knows no configured voters
                    await self.quorum.write([voters_record(directory)])

    async def update_features(
        self, updates: list[tuple[str, int, int]], validate_only: bool
    ) -> list[tuple[str, ErrorCode, str | None]]:
        """UpdateFeatures: (feature, error, message) per (feature, max level, upgrade type)."""
        if self._forward():
            return await self.forwarder.update_features(updates, validate_only)
        async with self._lock:
            result = self.features.update(self.image, updates)
            return result.response if validate_only else await self._run(result)

    # --- brokers: fencing and leader election ----------------------------------------

    async def fence_brokers(self, node_ids: list[int], reason: str) -> None:
        """Fence brokers (session expired, controlled shutdown): cluster_control.py."""
        async with self._lock:
            self._elections(await self._run(self.cluster.fence_brokers(self.image, node_ids, reason)))

    async def unfence_broker(self, node_id: int, epoch: int) -> None:
        async with self._lock:
            self._elections(await self._run(self.cluster.unfence_broker(self.image, node_id, epoch)))

    async def reconcile_brokers(self, expired: list[int]) -> None:
        """The active controller's periodic pass: fence `expired` brokers, give leaderless
        partitions a leader (elections.py) and finish reassignments whose targets are all
        in the ISR."""
        if expired:
            await self.fence_brokers(expired, f"no heartbeat for {self.config.get_int('broker.session.timeout.ms')} ms")
        async with self._lock:
            if self._to_reconcile.empty:
                return  # nothing that could need a leader or finish a move changed since the last pass
            result = self.replication.reconcile(self.image, self._to_reconcile.take())
            try:
                self._elections(await self._run(result))
            except BaseException:
                self._to_reconcile.everything()  # not committed: the next pass reads every partition
                raise

    async def unregister_broker(self, node_id: int) -> None:
        """UnregisterBroker: cluster_control.py (ControllerError BROKER_ID_NOT_REGISTERED)."""
        if self._forward():
            return await self.forwarder.unregister_broker(node_id)
        async with self._lock:
            self._elections(await self._run(self.cluster.unregister_broker(self.image, node_id)))

    async def unregister_controller(self, node_id: int) -> None:
        """UnregisterController (Kafka 4.4): cluster_control.py (ControllerError
        CONTROLLER_ID_NOT_REGISTERED, INVALID_REQUEST for the active controller itself)."""
        if self._forward():
            return await self.forwarder.unregister_controller(node_id)
        async with self._lock:
            await self._run(self.cluster.unregister_controller(self.image, node_id, self.local.node_id))

    def _elections(self, moved: list[elections.Election]) -> None:
        """Count leader elections decided here (Kafka's ControllerStats
        LeaderElectionRateAndTimeMs and UncleanLeaderElectionsPerSec, for the metrics
        endpoint) and log the unclean ones."""
        self.leader_elections += len(moved)
        self.unclean_leader_elections += sum(e.unclean for e in moved)
        for e in moved:
            if e.unclean:
                elections.log_unclean(e)

    @property
    def is_active(self) -> bool:
        """Whether this node is the active controller (the metadata log's Raft leader)."""
        return self.quorum.is_active

    # --- leader elections asked for (ElectLeaders, auto.leader.rebalance.enable) -----

    async def elect_leaders(
        self, election_type: int, partitions: list[tuple[str, list[int]]] | None
    ) -> list[tuple[str, int, ErrorCode, str]]:
        """ElectLeaders: preferred (0) or unclean (1) election for `partitions` (None: every
        partition; then partitions that need no election are left out of the result, as
        Kafka does). Returns (topic, partition, error, message) per partition."""
        if election_type not in (elections.PREFERRED, elections.UNCLEAN):
            raise ControllerError(
                ErrorCode.INVALID_REQUEST, f"election type {election_type} is not 0 (preferred) or 1 (unclean)"
            )
        if self._forward():
            return await self.forwarder.elect_leaders(election_type, partitions)
        async with self._lock:
            results, unclean = await self._run(self.replication.elect_leaders(self.image, election_type, partitions))
            self.leader_elections += sum(1 for r in results if r[2] == ErrorCode.NONE) - len(unclean)
            self._elections(unclean)
            return results

    async def rebalance_leaders(self) -> int:
        """auto.leader.rebalance.enable: give every partition whose preferred replica is live
        and in the ISR back to it. Returns how many moved."""
        async with self._lock:
            moved = await self._run(self.replication.rebalance_leaders(self.image))
            self.leader_elections += moved
            return moved

    # --- partition reassignment (KIP-455, reassignment.py) -------------------------------

    async def alter_reassignments(
        self, items: list[tuple[str, int, list[int] | None]], allow_replication_factor_change: bool = True
    ) -> list[tuple[str, int, ErrorCode, str]]:
        """AlterPartitionReassignments: start (a target) or cancel (None) the reassignment of
        each (topic, partition); returns (topic, partition, error, message) for each, and
        commits the ones that were accepted together."""
        if self._forward():
            return await self.forwarder.alter_reassignments(items, allow_replication_factor_change)
        async with self._lock:
            return await self._run(
                self.replication.alter_reassignments(self.image, items, allow_replication_factor_change)
            )

    def list_reassignments(
        self, partitions: list[tuple[str, list[int]]] | None
    ) -> list[tuple[str, int, list[int], list[int], list[int]]]:
        """Reassignments in progress: (topic, partition, replicas, adding, removing)."""
        return self.replication.list_reassignments(self.image, partitions)

    # --- ISR changes (AlterPartition) ------------------------------------------------

    async def alter_partitions(self, broker_id: int, broker_epoch: int, changes: list[IsrChange]) -> list[IsrResult]:
        """A partition leader asks to change the ISR of partitions it leads (one AlterPartition
        request; replication_control.py has the checks). Returns (error, message, the
        partition's state after the request) per change, in order; the accepted changes are
        committed together, as one metadata-log entry. ControllerError when none could be
        (not the active controller, the entry did not commit)."""
        async with self._lock:
            self.alter_partition_requests += 1
            self.alter_partition_partitions += len(changes)
            results = await self._run(self.replication.alter_partitions(self.image, broker_id, broker_epoch, changes))
            out = []
            for change, (code, message, state) in zip(changes, results):
                if code == ErrorCode.NONE and state is not None:
                    topic = self.image.topic_by_id(change.topic_id)  # as applied
                    state = topic.partitions.get(change.partition, state) if topic is not None else state
                out.append((code, message, state))
            return out

    # --- producer ids ---------------------------------------------------------------

    async def allocate_producer_id(self) -> int:
        async with self._lock:
            if self._producer_id_next >= self._producer_id_end:
                # any node asks the quorum for a block; no need to be the active controller
                try:
                    start = await self.quorum.allocate_producer_ids(PRODUCER_ID_BLOCK)
                except (QuorumTimeout, MetadataRecordError) as e:
                    raise ControllerError(ErrorCode.COORDINATOR_NOT_AVAILABLE, str(e)) from None
                self._producer_id_next, self._producer_id_end = start, start + PRODUCER_ID_BLOCK
            pid = self._producer_id_next
            self._producer_id_next += 1
            return pid
