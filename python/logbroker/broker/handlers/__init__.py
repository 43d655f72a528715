"""Request handlers, one module per Kafka API, and the table the server dispatches on.

`HANDLERS[api_key]` gives the version range this broker serves (and advertises in
ApiVersions), the generated request class, and `async handle(ctx, request)` returning
the response object (or None when the protocol sends no response, as Produce with
acks=0). Every advertised API is implemented for its whole advertised range.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from logbroker import _core
from logbroker.common.acl import AclOperation, ResourceType
from logbroker.coord.metadata.feature_control import bootstrap_levels, finalized
from logbroker.protocol import API_NAMES, REQUESTS, ErrorCode, RequestHeader

if TYPE_CHECKING:
    from logbroker.broker.add_partitions_to_txn import AddPartitionsToTxnManager
    from logbroker.broker.authorizer import AclAuthorizer
    from logbroker.broker.client_telemetry import ClientTelemetryManager
    from logbroker.broker.replica_manager import ReplicaManager
    from logbroker.broker.share_fetch import ShareFetchManager
    from logbroker.common.config import BrokerConfig
    from logbroker.common.sasl import SaslSession
    from logbroker.coord.groups.group_coordinator import GroupCoordinator
    from logbroker.coord.groups.share_coordinator import ShareCoordinator
    from logbroker.coord.groups.transaction_coordinator import TransactionCoordinator
    from logbroker.coord.metadata.controller import Controller
    from logbroker.coord.metadata.metadata_quorum import MetadataQuorum


class SchemaCatchUp(Protocol):
    """What the data path asks of the broker's schema registry (schema_registry/server.py)."""

    async def catch_up_for_produce(self, missing: str, peer: str) -> None: ...


class BrokerView(Protocol):
    """What a handler sees of the broker (`BrokerServer` is one); handlers depend on this,
    not on the service module, so imports point one way (service -> dispatch -> handlers)."""

    config: BrokerConfig
    node_id: int
    replicas: ReplicaManager | None
    controller: Controller | None
    groups: GroupCoordinator | None
    transactions: TransactionCoordinator | None
    add_partitions_to_txn: AddPartitionsToTxnManager | None
    share_fetch: ShareFetchManager | None
    share_coordinator: ShareCoordinator | None
    quorum: MetadataQuorum  # the metadata log (every node runs on one)
    authorizer: AclAuthorizer | None  # ACLs (broker/authorizer.py)
    client_telemetry: ClientTelemetryManager | None  # KIP-714 client metrics (broker/client_telemetry.py)
    schema_registry: SchemaCatchUp | None  # when schema.registry.listen is set


_auth_log = logging.getLogger("logbroker.authorizer")  # Kafka's kafka.authorizer.logger; denials at DEBUG only

# The operations each resource type supports (Kafka's AclEntry.supportedOperations), by
# ResourceType code: TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, DELEGATION_TOKEN, USER.
SUPPORTED_OPERATIONS = {
    2: (3, 4, 5, 6, 7, 8, 10, 11),  # READ WRITE CREATE DELETE ALTER DESCRIBE DESCRIBE_CONFIGS ALTER_CONFIGS
    3: (3, 6, 8, 10, 11),  # READ DELETE DESCRIBE DESCRIBE_CONFIGS ALTER_CONFIGS
    4: (5, 7, 8, 9, 10, 11, 12),  # CREATE ALTER DESCRIBE CLUSTER_ACTION DESCRIBE_CONFIGS ALTER_CONFIGS IDEMPOTENT_WRITE
    5: (4, 8),  # WRITE DESCRIBE
    6: (8,),  # DESCRIBE
    7: (13, 14),  # CREATE_TOKENS DESCRIBE_TOKENS
}


def _op_name(op: int) -> str:
    return AclOperation(op).name if op in AclOperation._value2member_map_ else str(op)


def _type_name(resource_type: int) -> str:
    return ResourceType(resource_type).name if resource_type in ResourceType._value2member_map_ else str(resource_type)


def _api_name(api_key: int) -> str:
    return API_NAMES.get(api_key, f"api {api_key}")


@dataclasses.dataclass
class RequestContext:
    broker: BrokerView
    header: RequestHeader
    peer: str
    handlers: dict[int, HandlerEntry] = dataclasses.field(default_factory=lambda: HANDLERS)  # the listener's table
    principal: str = "User:ANONYMOUS"  # who the connection authenticated as
    sasl: SaslSession | None = None  # the connection's SASL state, on a SASL listener
    listener: str = "PLAINTEXT"  # the name of the listener the request came in on
    # the connection's own state, kept by the dispatcher while it is open: "id" (the network
    # thread's connection id), "client_software_name" / "_version" (from ApiVersions v3+)
    connection: dict | None = None

    @property
    def version(self) -> int:
        return self.header.request_api_version

    def authorize(self, operation: int, resource_type: int, name: str, audit: bool = True) -> bool:
        """Whether this request's principal may perform `operation` (AclOperation) on the
        resource (ResourceType, name; the cluster is `CLUSTER_NAME`), by the ACLs
        (broker/authorizer.py); always true without an authorizer.

        On the CONTROLLER listener every request is allowed: its connections come from the
        cluster's own nodes (admin requests a broker forwards after authorizing them itself,
        heartbeats, AlterPartition; coord/metadata/controller_channel.py), unauthenticated, and carry no
        client principal (Kafka's Envelope would), so there is nothing to check them against.

        A denial goes to the audit log (broker/audit_log.py) unless `audit` is false: a check
        whose denial refuses nothing by itself (Kafka's logIfDenied=false), such as CREATE on
        the cluster before CREATE on the topic, or the topics a Metadata request for all of
        them leaves out."""
        authorizer = self.broker.authorizer
        if authorizer is None or not authorizer.enabled or self.handlers is CONTROLLER_HANDLERS:
            return True
        allowed = authorizer.authorize(self.principal, self.peer, resource_type, name, operation)
        if not allowed:
            _auth_log.debug(
                "%s from %s denied %s on %s %r (%s)",
                self.principal,
                self.peer,
                _op_name(operation),
                _type_name(resource_type),
                name,
                _api_name(self.header.request_api_key),
            )
            audit_log = getattr(self.broker, "audit", None)
            if audit and audit_log is not None:
                audit_log.denied(
                    self.principal,
                    self.peer,
                    self.listener,
                    _api_name(self.header.request_api_key),
                    _op_name(operation),
                    _type_name(resource_type),
                    name,
                )
        return allowed

    def audit_change(
        self,
        change: str,
        resource_type: str,
        resource: str,
        error: int | None = None,
        message: str | None = None,
        **details,
    ) -> None:
        """A metadata change this request asked of the controller, done (`error` None or
        NONE) or refused (an ErrorCode), for the audit log (broker/audit_log.py), if any: once,
        by the node the client asked, not again on the controller listener a broker forwards
        the request to."""
        audit_log = getattr(self.broker, "audit", None)
        if audit_log is None or self.handlers is CONTROLLER_HANDLERS:
            return
        error_name = None
        if error:
            error_name = ErrorCode(error).name if error in ErrorCode._value2member_map_ else str(error)
        audit_log.metadata(
            self.principal,
            self.peer,
            self.listener,
            _api_name(self.header.request_api_key),
            change,
            resource_type,
            resource,
            error_name,
            message,
            **details,
        )

    def authorized(self, operation: int, resource_type: int, names) -> set[str]:
        """Those of `names` on which this principal may perform `operation` (one check each)."""
        return {n for n in set(names) if self.authorize(operation, resource_type, n)}

    def authorized_operations(self, resource_type: int, name: str) -> int:
        """Kafka's bit field of the operations (bit `1 << AclOperation`) this principal may
        perform on the resource, of those its type supports (Metadata, DescribeCluster and
        the group describes fill it in when asked)."""
        return sum(
            1 << op
            for op in SUPPORTED_OPERATIONS[resource_type]
            if self.authorize(op, resource_type, name, audit=False)
        )

    @property
    def replicas(self):
        return self.broker.replicas

    @property
    def controller(self):
        return self.broker.controller


@dataclasses.dataclass(frozen=True)
class HandlerEntry:
    api_key: int
    min_version: int
    max_version: int
    handler: Callable[[RequestContext, Any], Awaitable[Any]] | None  # None: served by the network thread
    enabled_by: str | None = None  # a boolean config key that must be true to serve (and advertise) it
    feature: tuple[str, int] | None = None  # a finalized feature level it needs (coord/metadata/feature_control.py)
    sasl_only: bool = False  # served (and advertised) only when some listener is SASL_* (elsewhere ILLEGAL_SASL_STATE)

    @property
    def request_class(self) -> type:
        return REQUESTS[self.api_key]

    def served_by(self, broker: BrokerView) -> bool:
        """Whether this broker serves (and advertises) the API."""
        if self.enabled_by is not None and not broker.config.get_bool(self.enabled_by):
            return False
        if self.feature is not None:
            name, level = self.feature
            image = broker.controller.image if broker.controller is not None else None
            levels = finalized(image, broker.config) if image is not None else bootstrap_levels(broker.config)
            if levels.get(name, 0) < level:
                return False
        return not self.sasl_only or broker.config.client_sasl  # none: no SASL listener at all


def _build() -> tuple[dict[int, HandlerEntry], dict[int, HandlerEntry]]:
    from logbroker.broker.handlers import (
        acls,
        admin_configs,
        alter_partition,
        alter_replica_log_dirs,
        api_versions,
        broker_heartbeat,
        client_quotas,
        client_telemetry,
        consumer_groups,
        create_partitions,
        create_topics,
        delegation_tokens,
        delete_records,
        delete_topics,
        describe_cluster,
        describe_log_dirs,
        describe_producers,
        describe_quorum,
        describe_topic_partitions,
        elect_leaders,
        groups,
        init_producer_id,
        list_config_resources,
        list_offsets,
        metadata,
        offset_for_leader_epoch,
        offsets,
        partition_reassignments,
        raft_voters,
        sasl,
        scram_credentials,
        share_groups,
        share_state,
        streams_groups,
        transactions,
        unregister,
        update_features,
    )

    modules = [
        list_offsets,
        metadata,
        api_versions,
        create_topics,
        delete_topics,
        delete_records,
        init_producer_id,
        offset_for_leader_epoch,
        create_partitions,
        describe_cluster,
        describe_producers,
        elect_leaders,
        describe_log_dirs,
        alter_replica_log_dirs,
        update_features,
        describe_topic_partitions,
        list_config_resources,
    ]
    table = {}
    # Produce and Fetch are served by the Rust network thread (rust/src/server/); they are
    # here for ApiVersions, with the versions it serves.
    for key, lo, hi in _core.data_path_apis():
        table[key] = HandlerEntry(key, lo, hi, None)
    for m in modules:
        table[m.API_KEY] = HandlerEntry(m.API_KEY, m.MIN_VERSION, m.MAX_VERSION, m.handle)
    for key, lo, hi, fn in [
        *admin_configs.ENTRIES,
        *groups.ENTRIES,
        *offsets.ENTRIES,
        *partition_reassignments.ENTRIES,
        *transactions.ENTRIES,
    ]:
        table[key] = HandlerEntry(key, lo, hi, fn)
    for key, lo, hi, fn in consumer_groups.ENTRIES:  # KIP-848: while group.version is at least 1
        table[key] = HandlerEntry(key, lo, hi, fn, feature=("group.version", 1))
    for key, lo, hi, fn in sasl.ENTRIES:
        table[key] = HandlerEntry(key, lo, hi, fn, sasl_only=True)
    for key, lo, hi, fn in scram_credentials.ENTRIES:  # DescribeUserScramCredentials (50), AlterUser... (51)
        table[key] = HandlerEntry(key, lo, hi, fn)
    for key, lo, hi, fn in delegation_tokens.ENTRIES:  # Create (38), Renew (39), Expire (40), Describe (41)
        table[key] = HandlerEntry(key, lo, hi, fn)
    for key, lo, hi, fn in acls.ENTRIES:  # DescribeAcls (29), CreateAcls (30), DeleteAcls (31)
        table[key] = HandlerEntry(key, lo, hi, fn)
    for key, lo, hi, fn in client_quotas.ENTRIES:  # DescribeClientQuotas (48), AlterClientQuotas (49)
        table[key] = HandlerEntry(key, lo, hi, fn)
    for key, lo, hi, fn in client_telemetry.ENTRIES:  # GetTelemetrySubscriptions (71), PushTelemetry (72)
        table[key] = HandlerEntry(key, lo, hi, fn)
    for key, lo, hi, fn in [*share_groups.ENTRIES, *share_state.ENTRIES]:  # KIP-932: and share.version 1
        table[key] = HandlerEntry(key, lo, hi, fn, enabled_by="group.share.enable", feature=("share.version", 1))
    for key, lo, hi, fn in streams_groups.ENTRIES:  # KIP-1071: while streams.version is at least 1
        table[key] = HandlerEntry(key, lo, hi, fn, feature=("streams.version", 1))
    quorum = HandlerEntry(
        describe_quorum.API_KEY, describe_quorum.MIN_VERSION, describe_quorum.MAX_VERSION, describe_quorum.handle
    )
    table[quorum.api_key] = quorum
    for key, lo, hi, fn in raft_voters.ENTRIES:  # AddRaftVoter (80), RemoveRaftVoter (81): KIP-853
        table[key] = HandlerEntry(key, lo, hi, fn)
    for key, lo, hi, fn in unregister.ENTRIES:  # UnregisterBroker (64), UnregisterController (94)
        table[key] = HandlerEntry(key, lo, hi, fn)
    # The CONTROLLER listener (coord/metadata/controller_channel.py): the admin APIs that change
    # metadata, and the controller-only BrokerHeartbeat and AlterPartition.
    from logbroker.coord.metadata.controller_channel import CONTROLLER_APIS

    controller = {k: e for k, e in table.items() if k in CONTROLLER_APIS}
    controller[broker_heartbeat.API_KEY] = HandlerEntry(
        broker_heartbeat.API_KEY, broker_heartbeat.MIN_VERSION, broker_heartbeat.MAX_VERSION, broker_heartbeat.handle
    )
    controller[raft_voters.UPDATE_RAFT_VOTER] = HandlerEntry(  # sent by voters: the controller listener only
        raft_voters.UPDATE_RAFT_VOTER, 0, 0, raft_voters.update_raft_voter
    )
    controller[alter_partition.API_KEY] = HandlerEntry(
        alter_partition.API_KEY, alter_partition.MIN_VERSION, alter_partition.MAX_VERSION, alter_partition.handle
    )
    return table, controller


# HANDLERS: the broker listener's APIs; CONTROLLER_HANDLERS: the controller listener's
HANDLERS, CONTROLLER_HANDLERS = _build()
