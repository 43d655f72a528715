"""Metadata records: the entries of the replicated metadata log, in KRaft's spirit (one
record per fact that changed), and `apply`, the only way the metadata image changes.

Every controller voter and every broker applies the same records in log order, so `apply`
is deterministic: it reads nothing but the image and the record, and a record that does not
fit the image (an unknown topic id, a stale broker epoch) is a `MetadataRecordError`, never
a partial change.

Encoding: a record is UTF-8 JSON `{"type": <name>, "v": 1, ...fields}` with sorted keys; a
metadata-log entry is a JSON array of the records written together (`encode_batch`), applied
all or nothing. JSON keeps the log readable with standard tools; records are small and rare
(metadata, not data), so compactness does not matter here.

    RegisterBroker   node_id, epoch, host, port, rack[,       a broker (re)joins; starts fenced;
                     endpoints {listener: [host, port]}]    a new process of a registered broker
                                                            leaves every ELR (eligible_leaders.py)
    FenceBroker      node_id, epoch, fenced                 fence (missed heartbeats, shutdown)
                                                            or unfence (caught up)
    UnregisterBroker node_id, epoch
    Topic            name, topic_id (hex)
    Partition        topic_id, partition, replicas, isr, leader, leader_epoch[, partition_epoch,
                     adding_replicas, removing_replicas, elr, last_known_elr]
    PartitionChange  topic_id, partition, and any of leader, isr, replicas, adding_replicas,
                     removing_replicas, elr, last_known_elr; a new leader bumps the leader epoch
                     and every change the partition epoch, unless the record carries
                     leader_epoch / partition_epoch (never lower than the current ones)
    Config           resource ("topic"|"group"|"broker"|"client-metrics"), name, key, value (None removes
                     it; a group, broker or client-metrics subscription with no keys left goes; a broker's
                     name is "" for the cluster default or its id)
    RemoveTopic      topic_id
    ProducerIds      next_producer_id (the first id not yet handed out)
    ProducerIdBlock  broker_id, size: the block [next_producer_id, +size) goes to that broker
                     (any broker asks through the quorum; the log order decides the block)
    UserScramCredential        name, mechanism ("SCRAM-SHA-256"|"SCRAM-SHA-512"), salt,
                               stored_key, server_key (base64), iterations: set (or replace)
                               a user's credential for that mechanism (Kafka's
                               UserScramCredentialRecord, KIP-554)
    RemoveUserScramCredential  name, mechanism: the credential must exist
    DelegationToken  token_id, owner, requester, renewers [principal...], issue_ms, max_ms,
                     expiry_ms: create or renew a delegation token (Kafka's
                     DelegationTokenRecord, KIP-48; no HMAC: nodes derive it)
    RemoveDelegationToken  token_id: the token must exist (expired, or expired by its owner)
    Acl              id (uuid hex), resource_type, resource_name, pattern_type (3 LITERAL | 4
                     PREFIXED), principal, host, operation, permission_type (2 DENY | 3 ALLOW):
                     add (or replace) the ACL with that id (Kafka's AccessControlEntryRecord)
    RemoveAcl        id: the ACL must exist (RemoveAccessControlEntryRecord)
    ClientQuota      entity [[type ("user"|"client-id"), name or null for the default], ...],
                     key, value, remove: set a client quota key of the entity, or remove it
                     (Kafka's ClientQuotaRecord; coord/metadata/client_quotas.py has the rules)
    FeatureLevel     name, level: a feature's finalized level; 0 removes it (Kafka's
                     FeatureLevelRecord; coord/metadata/feature_control.py)
    RegisterController node_id, host, port: a controller-only node (process.roles=controller)
                     and its controller listener (Kafka's RegisterControllerRecord); it never
                     hosts partitions
    UnregisterController node_id: the controller registration goes (Kafka 4.4's
                     UnregisterControllerRecord, KIP-1312); it must exist
    Voters           voters [[node_id, host, port, directory_id], ...]: the whole voter set's
                     controller listeners (Kafka's VotersRecord), replacing the last; written
                     by the first leader from controller.quorum.voters and on every
                     AddRaftVoter / RemoveRaftVoter (metadata_quorum.py)
    VoterEndpoint    node_id, host, port, directory_id: one voter's new controller endpoint
                     (UpdateRaftVoter; a voter that restarted on another address writes
                     it); the voter must be in the directory, with that directory id or
                     the zero one
    RemoteLogStartOffset  topic_id, partition, offset, leader_epoch: the first offset a
                     consumer may read of a tiered partition, raised by DeleteRecords into its
                     remote segments (never lowered; fenced by the leader epoch as below)
    RemoteLogSegment topic_id, partition, segment_id (uuid hex), state, leader_epoch,
                     broker_id, event_ms, and with COPY_SEGMENT_STARTED only: start_offset,
                     end_offset (inclusive), max_timestamp, size_bytes, segment_epochs
                     [[epoch, start_offset], ...] (the leader epochs the segment covers,
                     ascending)[, base_offset (its file's, <= start_offset; default the
                     start offset)]: a segment of the partition in remote storage (tiered
                     storage; Kafka's RemoteLogSegmentMetadata and its updates). The
                     partition's leader writes it in its leader epoch, which must be the
                     partition's current one (a deposed leader is fenced). States:
                     COPY_SEGMENT_STARTED (a new segment id of the partition) ->
                     COPY_SEGMENT_FINISHED; either -> DELETE_SEGMENT_STARTED ->
                     DELETE_SEGMENT_FINISHED, which removes it. RemoveTopic removes the
                     topic's. With "restore": true (diff_records only, never a leader) the
                     record sets the segment whole, every field given, as an image holds it,
                     with no fencing or transition rule; DELETE_SEGMENT_FINISHED then removes
                     an existing segment.
"""

from __future__ import annotations

import bisect
import dataclasses
import json
import uuid
from typing import Any

from logbroker.common.directory_id import ZERO as ZERO_DIRECTORY
from logbroker.coord.metadata import client_quotas
from logbroker.coord.metadata.metadata import (
    AclBinding,
    BrokerRegistration,
    DelegationToken,
    MetadataImage,
    PartitionState,
    RemoteLogSegment,
    ScramCredential,
    TopicState,
    remote_segment_order,
)
from logbroker.coord.metadata.metadata_delta import MetadataDelta
from logbroker.scram import MAX_ITERATIONS, MECHANISMS, MIN_ITERATIONS

__all__ = [
    "MetadataRecordError",
    "apply",
    "apply_record",
    "decode_batch",
    "decode_record",
    "diff_records",
    "encode_batch",
    "encode_record",
    "load_snapshot",
    "partition_record",
    "remote_segment_record",
    "snapshot",
    "topic_records",
]

VERSION = 1
NO_LEADER = -1


class MetadataRecordError(Exception):
    """A record that does not decode or does not fit the image it is applied to."""


def encode_record(kind: str, **fields: Any) -> bytes:
    if kind not in _APPLY:
        raise MetadataRecordError(f"unknown metadata record type {kind!r}")
    return json.dumps({"type": kind, "v": VERSION, **fields}, sort_keys=True, separators=(",", ":")).encode()


def _json(data: bytes, what: str):
    try:
        return json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise MetadataRecordError(f"{what} of {len(data)} bytes is not JSON: {e}") from None


def _checked(rec) -> dict:
    if not isinstance(rec, dict) or rec.get("type") not in _APPLY:
        raise MetadataRecordError(f"metadata record {str(rec)[:80]} has no known type")
    if rec.get("v") != VERSION:
        raise MetadataRecordError(f"{rec['type']} record version {rec.get('v')!r} is not {VERSION}")
    return rec


def decode_record(data: bytes) -> dict:
    return _checked(_json(data, "metadata record"))


def encode_batch(records: list[bytes]) -> bytes:
    """Records written as one metadata-log entry: a JSON array of them."""
    return b"[" + b",".join(records) + b"]"


def decode_batch(data: bytes) -> list[dict]:
    batch = _json(data, "metadata log entry")
    if not isinstance(batch, list):
        raise MetadataRecordError(f"metadata log entry {data[:80]!r} is not a list of records")
    return [_checked(rec) for rec in batch]


def apply(image: MetadataImage, data: bytes) -> None:
    """Apply one encoded record to `image` in place, all or nothing (tests and tools; the
    metadata log applies through a `MetadataDelta` and never changes a published image)."""
    delta = MetadataDelta(image)
    apply_record(delta, decode_record(data))
    vars(image).update(vars(delta.image))


def apply_record(delta: MetadataDelta, rec: dict) -> None:
    """Apply one decoded, checked record (see `decode_record`/`decode_batch`) to `delta`."""
    try:
        _APPLY[rec["type"]](delta, rec)
    except KeyError as e:
        raise MetadataRecordError(f"{rec['type']} record lacks field {e}: {rec}") from None


def _topic(delta: MetadataDelta, rec: dict) -> TopicState:
    tid = uuid.UUID(hex=rec["topic_id"])
    t = delta.topic_id_of(tid)
    if t is None:
        raise MetadataRecordError(f"{rec['type']} record names topic id {tid}, which does not exist")
    return t


def _broker(delta: MetadataDelta, rec: dict) -> BrokerRegistration:
    b = delta.image.brokers.get(rec["node_id"])
    if b is None:
        raise MetadataRecordError(f"{rec['type']} record names broker {rec['node_id']}, which is not registered")
    if rec["epoch"] != b.epoch:
        raise MetadataRecordError(
            f"{rec['type']} record for broker {b.node_id} carries epoch {rec['epoch']}, the registration is {b.epoch}"
        )
    return b


def _register_broker(delta: MetadataDelta, rec: dict) -> None:
    old = delta.image.brokers.get(rec["node_id"])
    if old is not None and rec["epoch"] <= old.epoch:
        raise MetadataRecordError(
            f"RegisterBroker for {rec['node_id']} with epoch {rec['epoch']}, not above the current {old.epoch}"
        )
    endpoints = {str(k): [str(v[0]), int(v[1])] for k, v in (rec.get("endpoints") or {}).items()}
    delta.brokers()[rec["node_id"]] = BrokerRegistration(
        rec["node_id"], rec["host"], rec["port"], rec.get("rack"), epoch=rec["epoch"], fenced=True, endpoints=endpoints
    )
    if old is not None:
        _leave_elrs(delta, rec["node_id"])


def _leave_elrs(delta: MetadataDelta, node: int) -> None:
    """A new process of `node` registered: it may have lost records it had not flushed, so
    it leaves every ELR (Kafka's handling of a new broker incarnation, KIP-966)."""
    for t in list(delta.image.topics.values()):
        for ps in t.partitions.values():
            if node in ps.elr:
                new = dataclasses.replace(
                    ps, elr=[r for r in ps.elr if r != node], partition_epoch=ps.partition_epoch + 1
                )
                delta.set_partition(t.name, new)


def _fence_broker(delta: MetadataDelta, rec: dict) -> None:
    _broker(delta, rec)
    delta.broker(rec["node_id"]).fenced = bool(rec["fenced"])


def _unregister_broker(delta: MetadataDelta, rec: dict) -> None:
    _broker(delta, rec)
    del delta.brokers()[rec["node_id"]]


def _topic_record(delta: MetadataDelta, rec: dict) -> None:
    name, tid = rec["name"], uuid.UUID(hex=rec["topic_id"])
    if name in delta.image.topics:
        raise MetadataRecordError(f"Topic record for {name!r}, which exists (id {delta.image.topics[name].topic_id})")
    if delta.topic_id_of(tid) is not None:
        raise MetadataRecordError(f"Topic record for {name!r} reuses topic id {tid}")
    delta.add_topic(TopicState(name, tid, {}, {}))


def _partition(delta: MetadataDelta, rec: dict) -> None:
    t = _topic(delta, rec)
    p = rec["partition"]
    if p in t.partitions:
        raise MetadataRecordError(f"Partition record for {t.name}-{p}, which exists")
    replicas, isr, leader = list(rec["replicas"]), list(rec["isr"]), rec["leader"]
    adding, removing = list(rec.get("adding_replicas", [])), list(rec.get("removing_replicas", []))
    elr, lke = list(rec.get("elr", [])), list(rec.get("last_known_elr", []))
    _check_partition(t.name, p, replicas, isr, leader, adding, removing, elr)
    delta.set_partition(
        t.name,
        PartitionState(
            p, leader, rec["leader_epoch"], replicas, isr, rec.get("partition_epoch", 0), adding, removing, elr, lke
        ),
    )


def _check_partition(
    topic: str,
    p: int,
    replicas: list[int],
    isr: list[int],
    leader: int,
    adding: list[int],
    removing: list[int],
    elr: list[int] = (),
) -> None:
    if not set(elr) <= set(replicas) or set(elr) & set(isr):
        raise MetadataRecordError(f"{topic}-{p}: ELR {elr} must be replicas of {replicas} outside the ISR {isr}")
    if not replicas or len(set(replicas)) != len(replicas):
        raise MetadataRecordError(f"{topic}-{p}: replicas {replicas} must be distinct and not empty")
    if not set(isr) <= set(replicas):
        raise MetadataRecordError(f"{topic}-{p}: ISR {isr} is not within the replicas {replicas}")
    if leader != NO_LEADER and leader not in isr:
        raise MetadataRecordError(f"{topic}-{p}: leader {leader} is not in the ISR {isr}")
    if (
        not set(adding) <= set(replicas)
        or not set(removing) <= set(replicas)
        or set(adding) & set(removing)
        or len(removing) >= len(replicas)
    ):
        raise MetadataRecordError(
            f"{topic}-{p}: adding replicas {adding} and removing replicas {removing} must be "
            f"disjoint subsets of the replicas {replicas}, leaving at least one"
        )


def _partition_change(delta: MetadataDelta, rec: dict) -> None:
    t = _topic(delta, rec)
    p = rec["partition"]
    ps = t.partitions.get(p)
    if ps is None:
        raise MetadataRecordError(f"PartitionChange for {t.name}-{p}, which does not exist")
    replicas = list(rec.get("replicas", ps.replicas))
    isr = list(rec.get("isr", ps.isr))
    leader = rec.get("leader", ps.leader)
    adding = list(rec.get("adding_replicas", ps.adding_replicas))
    removing = list(rec.get("removing_replicas", ps.removing_replicas))
    elr = list(rec.get("elr", ps.elr))
    lke = list(rec.get("last_known_elr", ps.last_known_elr))
    _check_partition(t.name, p, replicas, isr, leader, adding, removing, elr)
    leader_epoch = rec.get("leader_epoch", ps.leader_epoch + (leader != ps.leader))
    partition_epoch = rec.get("partition_epoch", ps.partition_epoch + 1)
    if leader_epoch < ps.leader_epoch or partition_epoch < ps.partition_epoch:
        raise MetadataRecordError(
            f"PartitionChange for {t.name}-{p} moves epochs back: leader epoch {ps.leader_epoch} -> {leader_epoch}, "
            f"partition epoch {ps.partition_epoch} -> {partition_epoch}"
        )
    delta.set_partition(
        t.name, PartitionState(p, leader, leader_epoch, replicas, isr, partition_epoch, adding, removing, elr, lke)
    )


def _config(delta: MetadataDelta, rec: dict) -> None:
    if rec["resource"] in ("group", "broker", "client-metrics"):
        if rec["resource"] == "broker" and not (rec["name"] == "" or str(rec["name"]).isdigit()):
            raise MetadataRecordError(
                f'Config record for broker {rec["name"]!r}: a broker is "" (the cluster default) or a broker id'
            )
        if rec["resource"] == "client-metrics" and not rec["name"]:
            raise MetadataRecordError("Config record for a client-metrics subscription without a name")
        owner = (
            delta.group_configs()
            if rec["resource"] == "group"
            else delta.broker_configs()
            if rec["resource"] == "broker"
            else delta.client_metrics()
        )
        configs = owner.setdefault(rec["name"], {})
        if rec["value"] is None:
            configs.pop(rec["key"], None)
        else:
            configs[rec["key"]] = str(rec["value"])
        if not configs:
            del owner[rec["name"]]
        return
    if rec["resource"] != "topic":
        raise MetadataRecordError(f"Config record for resource type {rec['resource']!r} is not supported yet")
    if rec["name"] not in delta.image.topics:
        raise MetadataRecordError(f"Config record for topic {rec['name']!r}, which does not exist")
    configs = delta.topic_configs(rec["name"])
    if rec["value"] is None:
        configs.pop(rec["key"], None)
    else:
        configs[rec["key"]] = str(rec["value"])


def _remove_topic(delta: MetadataDelta, rec: dict) -> None:
    delta.remove_topic(_topic(delta, rec))


def _producer_ids(delta: MetadataDelta, rec: dict) -> None:
    nxt = rec["next_producer_id"]
    if nxt < delta.image.next_producer_id:
        raise MetadataRecordError(
            f"ProducerIds record moves next_producer_id back from {delta.image.next_producer_id} to {nxt}"
        )
    delta.image.next_producer_id = nxt


def _producer_id_block(delta: MetadataDelta, rec: dict) -> None:
    size = rec["size"]
    if not isinstance(size, int) or not 1 <= size <= 1_000_000:
        raise MetadataRecordError(f"ProducerIdBlock for broker {rec['broker_id']} asks for {size!r} ids")
    delta.image.next_producer_id += size


def _scram_mechanism(rec: dict) -> str:
    if rec["mechanism"] not in MECHANISMS:
        raise MetadataRecordError(
            f"{rec['type']} record for user {rec['name']!r} names mechanism "
            f"{rec['mechanism']!r}, not one of {sorted(MECHANISMS)}"
        )
    return rec["mechanism"]


def _user_scram_credential(delta: MetadataDelta, rec: dict) -> None:
    mechanism = _scram_mechanism(rec)
    what = f"UserScramCredential record for user {rec['name']!r} ({mechanism})"
    try:
        credential = ScramCredential.from_json(mechanism, rec)
    except ValueError as e:  # bad base64 (binascii.Error is a ValueError) or iterations
        raise MetadataRecordError(f"{what}: {e}") from None
    if not rec["name"]:
        raise MetadataRecordError(f"{what}: the user name is empty")
    if not MIN_ITERATIONS <= credential.iterations <= MAX_ITERATIONS:
        raise MetadataRecordError(
            f"{what}: {credential.iterations} iterations, outside [{MIN_ITERATIONS}, {MAX_ITERATIONS}]"
        )
    delta.scram_credentials().setdefault(rec["name"], {})[mechanism] = credential


def _remove_user_scram_credential(delta: MetadataDelta, rec: dict) -> None:
    mechanism = _scram_mechanism(rec)
    if mechanism not in delta.image.scram_credentials.get(rec["name"], {}):
        raise MetadataRecordError(
            f"RemoveUserScramCredential for user {rec['name']!r} ({mechanism}), which has no such credential"
        )
    users = delta.scram_credentials()
    del users[rec["name"]][mechanism]
    if not users[rec["name"]]:
        del users[rec["name"]]


def _acl_id(rec: dict) -> str:
    acl_id = rec["id"]
    if not isinstance(acl_id, str) or not acl_id:
        raise MetadataRecordError(f"{rec['type']} record with id {acl_id!r}: an ACL id is a non-empty string")
    return acl_id


def _delegation_token(delta: MetadataDelta, rec: dict) -> None:
    try:
        token = DelegationToken.from_json(rec)
    except (KeyError, TypeError, ValueError) as e:
        raise MetadataRecordError(f"DelegationToken record {str(rec.get('token_id'))[:40]!r}: {e}") from None
    if not token.issue_ms <= token.expiry_ms <= token.max_ms:
        raise MetadataRecordError(
            f"DelegationToken record {token.token_id!r}: issue {token.issue_ms} <= expiry "
            f"{token.expiry_ms} <= max {token.max_ms} does not hold"
        )
    delta.delegation_tokens()[token.token_id] = token


def _remove_delegation_token(delta: MetadataDelta, rec: dict) -> None:
    token_id = rec.get("token_id")
    if token_id not in delta.image.delegation_tokens:
        raise MetadataRecordError(f"RemoveDelegationToken for token {str(token_id)[:40]!r}, which does not exist")
    del delta.delegation_tokens()[token_id]


def _acl(delta: MetadataDelta, rec: dict) -> None:
    acl_id = _acl_id(rec)
    try:
        acl = AclBinding.from_json(rec)
    except ValueError as e:
        raise MetadataRecordError(f"Acl record {acl_id}: {e}") from None
    delta.acls()[acl_id] = acl


def _remove_acl(delta: MetadataDelta, rec: dict) -> None:
    acl_id = _acl_id(rec)
    if acl_id not in delta.image.acls:
        raise MetadataRecordError(f"RemoveAcl for ACL id {acl_id}, which does not exist")
    del delta.acls()[acl_id]


def _client_quota(delta: MetadataDelta, rec: dict) -> None:
    try:
        entity = client_quotas.validated_entity([(t, n) for t, n in rec["entity"]])
        if not rec["remove"]:
            client_quotas.validate_value(entity, rec["key"], float(rec["value"]))
    except (client_quotas.QuotaError, TypeError, ValueError) as e:
        raise MetadataRecordError(f"ClientQuota record {rec['entity']} {rec['key']}: {e}") from None
    quotas = delta.client_quotas()
    values = quotas.setdefault(entity, {})
    if rec["remove"]:
        values.pop(rec["key"], None)
    else:
        values[rec["key"]] = float(rec["value"])
    if not values:
        del quotas[entity]


def _register_controller(delta: MetadataDelta, rec: dict) -> None:
    node_id = rec["node_id"]
    if not isinstance(node_id, int) or isinstance(node_id, bool) or node_id < 0:
        raise MetadataRecordError(f"RegisterController record for node {node_id!r}: a node id is a number >= 0")
    if node_id in delta.image.brokers:
        raise MetadataRecordError(f"RegisterController record for node {node_id}, which is registered as a broker")
    delta.controllers()[node_id] = [str(rec["host"]), int(rec["port"])]


def _unregister_controller(delta: MetadataDelta, rec: dict) -> None:
    node_id = rec["node_id"]
    if node_id not in delta.image.controllers:
        raise MetadataRecordError(f"UnregisterController record for node {node_id!r}, which is not registered")
    del delta.controllers()[node_id]


def _voters(delta: MetadataDelta, rec: dict) -> None:
    out: dict[int, list] = {}
    for v in rec["voters"]:
        node_id, host, port, directory_id = v
        if not isinstance(node_id, int) or isinstance(node_id, bool) or node_id < 0 or not isinstance(port, int):
            raise MetadataRecordError(f"Voters record entry {v!r}: [node id >= 0, host, port, directory id]")
        out[node_id] = [str(host), port, str(directory_id)]
    voters = delta.voters()
    voters.clear()
    voters.update(out)


def _voter_endpoint(delta: MetadataDelta, rec: dict) -> None:
    node_id, directory = rec["node_id"], str(rec["directory_id"])
    held = delta.image.voters.get(node_id)
    if held is None:
        raise MetadataRecordError(
            f"VoterEndpoint record for node {node_id!r}, which is not in the voter directory "
            f"(voters {sorted(delta.image.voters)})"
        )
    if held[2] != directory and held[2] != ZERO_DIRECTORY and directory != ZERO_DIRECTORY:
        raise MetadataRecordError(
            f"VoterEndpoint record for node {node_id} with directory id {directory}, but the voter's is {held[2]}"
        )
    voters = delta.voters()
    voters[node_id] = [str(rec["host"]), int(rec["port"]), held[2] if directory == ZERO_DIRECTORY else directory]


def _feature_level(delta: MetadataDelta, rec: dict) -> None:
    name, level = rec["name"], rec["level"]
    if (
        not isinstance(name, str)
        or not name
        or not isinstance(level, int)
        or isinstance(level, bool)
        or not 0 <= level <= 32767
    ):
        raise MetadataRecordError(f"FeatureLevel record {name!r} = {level!r}: a feature name and a level in [0, 32767]")
    features = delta.features()
    if level == 0:
        features.pop(name, None)
    else:
        features[name] = level


# A remote segment's states (metadata.REMOTE_SEGMENT_STATES) and the states each may follow
COPY_SEGMENT_STARTED = "COPY_SEGMENT_STARTED"
COPY_SEGMENT_FINISHED = "COPY_SEGMENT_FINISHED"
DELETE_SEGMENT_STARTED = "DELETE_SEGMENT_STARTED"
DELETE_SEGMENT_FINISHED = "DELETE_SEGMENT_FINISHED"
_SEGMENT_STATE_FROM = {
    COPY_SEGMENT_STARTED: (),  # a new segment
    COPY_SEGMENT_FINISHED: (COPY_SEGMENT_STARTED,),
    DELETE_SEGMENT_STARTED: (COPY_SEGMENT_STARTED, COPY_SEGMENT_FINISHED),
    DELETE_SEGMENT_FINISHED: (DELETE_SEGMENT_STARTED,),
}
# what COPY_SEGMENT_STARTED fixes for the segment's life, carried by it alone
_SEGMENT_COPY_FIELDS = ("start_offset", "end_offset", "max_timestamp", "size_bytes", "segment_epochs", "base_offset")


def _integer(where: str, name: str, value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise MetadataRecordError(f"{where}: {name} {value!r} is not an integer")
    return value


def _copied_segment(
    where: str, rec: dict, segment_id: uuid.UUID, state: str, leader_epoch: int, broker_id: int, event_ms: int
) -> RemoteLogSegment:
    """The segment a COPY_SEGMENT_STARTED (or restoring) record describes, its fields checked."""
    start, end = _integer(where, "start_offset", rec["start_offset"]), _integer(where, "end_offset", rec["end_offset"])
    max_timestamp = _integer(where, "max_timestamp", rec["max_timestamp"])
    size = _integer(where, "size_bytes", rec["size_bytes"])
    if not 0 <= start <= end:
        raise MetadataRecordError(f"{where}: offsets {start}..{end} are not 0 <= start_offset <= end_offset")
    if size < 0:
        raise MetadataRecordError(f"{where}: size_bytes {size} is negative")
    base = _integer(where, "base_offset", rec.get("base_offset", start))
    if not 0 <= base <= start:
        raise MetadataRecordError(f"{where}: base_offset {base} is not 0 <= base_offset <= start_offset {start}")
    raw = rec["segment_epochs"]
    if not isinstance(raw, list) or not raw or not all(isinstance(e, list) and len(e) == 2 for e in raw):
        raise MetadataRecordError(
            f"{where}: segment_epochs {str(raw)[:80]} is not a non-empty [[epoch, start_offset], ...]"
        )
    epochs = tuple((_integer(where, "an epoch", e), _integer(where, "an epoch's start offset", o)) for e, o in raw)
    for (e0, o0), (e1, o1) in zip(epochs, epochs[1:]):
        if not (e0 < e1 and o0 <= o1):
            raise MetadataRecordError(
                f"{where}: segment_epochs {list(map(list, epochs))} must rise in epoch and start offset"
            )
    if epochs[0][0] < 0 or epochs[-1][1] > end:
        raise MetadataRecordError(
            f"{where}: segment_epochs {list(map(list, epochs))} must have epochs >= 0 starting at or before "
            f"end_offset {end}"
        )
    return RemoteLogSegment(
        segment_id, start, end, state, leader_epoch, broker_id, event_ms, max_timestamp, size, epochs, base
    )


def _record_partition(delta: MetadataDelta, rec: dict, kind: str) -> tuple[TopicState, int, PartitionState]:
    """The topic, partition index and partition state a tiered-storage record names (which must exist)."""
    t = _topic(delta, rec)
    p = _integer(f"{kind} record for topic {t.name}", "partition", rec["partition"])
    ps = t.partitions.get(p)
    if ps is None:
        raise MetadataRecordError(f"{kind} record for {t.name}-{p}, which does not exist")
    return t, p, ps


def _remote_log_segment(delta: MetadataDelta, rec: dict) -> None:
    t, p, ps = _record_partition(delta, rec, "RemoteLogSegment")
    try:
        segment_id = uuid.UUID(hex=rec["segment_id"])
    except (TypeError, ValueError, AttributeError):
        raise MetadataRecordError(
            f"RemoteLogSegment record for {t.name}-{p}: segment id {rec['segment_id']!r} is not a uuid in hex"
        ) from None
    where = f"RemoteLogSegment {segment_id} of {t.name}-{p}"
    state = rec["state"]
    if state not in _SEGMENT_STATE_FROM:
        raise MetadataRecordError(f"{where}: state {state!r} is not one of {', '.join(_SEGMENT_STATE_FROM)}")
    leader_epoch = _integer(where, "leader_epoch", rec["leader_epoch"])
    broker_id = _integer(where, "broker_id", rec["broker_id"])
    event_ms = _integer(where, "event_ms", rec["event_ms"])
    segments = delta.image.remote_segments_of(t.topic_id, p)
    index = next((i for i, s in enumerate(segments) if s.segment_id == segment_id), None)
    current = None if index is None else segments[index]
    segment: RemoteLogSegment | None
    if rec.get("restore") is True:  # diff_records: the segment as an image holds it
        if state == DELETE_SEGMENT_FINISHED and current is None:
            raise MetadataRecordError(f"{where}: restoring its removal, but the partition has no such segment")
        segment = (
            None
            if state == DELETE_SEGMENT_FINISHED
            else _copied_segment(where, rec, segment_id, state, leader_epoch, broker_id, event_ms)
        )
    else:
        if leader_epoch != ps.leader_epoch:
            raise MetadataRecordError(
                f"{where}: {state} in leader epoch {leader_epoch}, but the partition's leader epoch is "
                f"{ps.leader_epoch} (a deposed leader cannot write)"
            )
        if state == COPY_SEGMENT_STARTED:
            if current is not None:
                raise MetadataRecordError(f"{where}: COPY_SEGMENT_STARTED, but the segment exists ({current.state})")
            segment = _copied_segment(where, rec, segment_id, state, leader_epoch, broker_id, event_ms)
        else:
            carried = [f for f in _SEGMENT_COPY_FIELDS if f in rec]
            if carried:
                raise MetadataRecordError(
                    f"{where}: {state} carries {', '.join(carried)}, fixed by COPY_SEGMENT_STARTED"
                )
            if current is None or current.state not in _SEGMENT_STATE_FROM[state]:
                raise MetadataRecordError(
                    f"{where}: {state} from {current.state if current else 'no such segment'}; only from "
                    f"{' or '.join(_SEGMENT_STATE_FROM[state])}"
                )
            segment = (
                None
                if state == DELETE_SEGMENT_FINISHED
                else dataclasses.replace(
                    current, state=state, leader_epoch=leader_epoch, broker_id=broker_id, event_ms=event_ms
                )
            )
    rest = segments if index is None else segments[:index] + segments[index + 1 :]
    if segment is not None:
        at = bisect.bisect_right(rest, remote_segment_order(segment), key=remote_segment_order)
        rest = rest[:at] + (segment,) + rest[at:]
    delta.set_remote_segments(t, p, rest)


def _remote_log_start_offset(delta: MetadataDelta, rec: dict) -> None:
    t, p, ps = _record_partition(delta, rec, "RemoteLogStartOffset")
    where = f"RemoteLogStartOffset of {t.name}-{p}"
    offset = _integer(where, "offset", rec["offset"])
    if rec.get("restore") is not True:
        leader_epoch = _integer(where, "leader_epoch", rec["leader_epoch"])
        if leader_epoch != ps.leader_epoch:
            raise MetadataRecordError(
                f"{where}: written in leader epoch {leader_epoch}, but the partition's leader epoch is "
                f"{ps.leader_epoch} (a deposed leader cannot write)"
            )
        if offset < delta.image.remote_log_start.get((t.topic_id, p), 0):
            raise MetadataRecordError(
                f"{where}: {offset} is below the current {delta.image.remote_log_start[(t.topic_id, p)]} "
                "(the log start offset never goes back)"
            )
    if offset < 0:
        raise MetadataRecordError(f"{where}: offset {offset} is negative")
    delta.set_remote_log_start(t, p, offset)


_APPLY = {
    "RegisterBroker": _register_broker,
    "FenceBroker": _fence_broker,
    "UnregisterBroker": _unregister_broker,
    "Topic": _topic_record,
    "Partition": _partition,
    "PartitionChange": _partition_change,
    "Config": _config,
    "RemoveTopic": _remove_topic,
    "ProducerIds": _producer_ids,
    "ProducerIdBlock": _producer_id_block,
    "UserScramCredential": _user_scram_credential,
    "RemoveUserScramCredential": _remove_user_scram_credential,
    "Acl": _acl,
    "RemoveAcl": _remove_acl,
    "DelegationToken": _delegation_token,
    "RemoveDelegationToken": _remove_delegation_token,
    "ClientQuota": _client_quota,
    "FeatureLevel": _feature_level,
    "RegisterController": _register_controller,
    "UnregisterController": _unregister_controller,
    "Voters": _voters,
    "VoterEndpoint": _voter_endpoint,
    "RemoteLogSegment": _remote_log_segment,
    "RemoteLogStartOffset": _remote_log_start_offset,
}


def remote_segment_record(
    topic_id: uuid.UUID | str,
    partition: int,
    segment_id: uuid.UUID | str,
    state: str,
    leader_epoch: int,
    broker_id: int,
    event_ms: int,
    **copy_fields: Any,
) -> bytes:
    """A RemoteLogSegment record (ids as UUIDs or hex). `copy_fields` go with
    COPY_SEGMENT_STARTED alone: start_offset, end_offset (inclusive), max_timestamp,
    size_bytes, segment_epochs [(epoch, start_offset), ...], base_offset. `leader_epoch` is the writer's
    leader epoch of the partition: the record is refused unless it is still the current one."""
    unknown = sorted(set(copy_fields) - set(_SEGMENT_COPY_FIELDS))
    if unknown:
        raise TypeError(f"remote_segment_record: unknown fields {unknown} (known: {', '.join(_SEGMENT_COPY_FIELDS)})")
    if "segment_epochs" in copy_fields:
        copy_fields["segment_epochs"] = [[e, o] for e, o in copy_fields["segment_epochs"]]
    return encode_record(
        "RemoteLogSegment",
        topic_id=topic_id.hex if isinstance(topic_id, uuid.UUID) else topic_id,
        partition=partition,
        segment_id=segment_id.hex if isinstance(segment_id, uuid.UUID) else segment_id,
        state=state,
        leader_epoch=leader_epoch,
        broker_id=broker_id,
        event_ms=event_ms,
        **copy_fields,
    )


def _restore_segment_record(topic_id: uuid.UUID, partition: int, segment: RemoteLogSegment, state: str) -> bytes:
    """diff_records' RemoteLogSegment: `segment` set whole (DELETE_SEGMENT_FINISHED: removed)."""
    doc = segment.to_json()
    doc["state"] = state
    return encode_record("RemoteLogSegment", topic_id=topic_id.hex, partition=partition, restore=True, **doc)


def voters_record(voters: dict[int, list]) -> bytes:
    """The Voters record of a voter set {id: [host, port, directory id]}."""
    return encode_record("Voters", voters=[[n, *e] for n, e in sorted(voters.items())])


def snapshot_doc(image: MetadataImage) -> dict:
    """The image as a snapshot's JSON document (brokers included)."""
    doc = image.to_json()
    doc["brokers"] = [dataclasses.asdict(b) for _, b in sorted(image.brokers.items())]
    return doc


def snapshot(image: MetadataImage) -> bytes:
    """The image as a snapshot payload (brokers included)."""
    return json.dumps(snapshot_doc(image), sort_keys=True, separators=(",", ":")).encode()


def load_snapshot(data: bytes, controller_id: int) -> MetadataImage:
    return image_of_snapshot_doc(json.loads(data), controller_id)


def image_of_snapshot_doc(doc: dict, controller_id: int) -> MetadataImage:
    """The inverse of `snapshot_doc`."""
    brokers = {b["node_id"]: BrokerRegistration(**b) for b in doc.get("brokers", [])}
    return MetadataImage.from_json(doc, controller_id, brokers)


def diff_records(old: MetadataImage, new: MetadataImage) -> list[bytes]:
    """The records that turn `old` into `new` when applied in order (the controller computes
    a new image as before and writes this difference to the log). Epochs are carried
    explicitly, so the result is exact whatever rules produced `new`."""
    out: list[bytes] = []
    for n, b in sorted(old.brokers.items()):
        if n not in new.brokers:
            out.append(encode_record("UnregisterBroker", node_id=n, epoch=b.epoch))
    for n, b in sorted(new.brokers.items()):
        o = old.brokers.get(n)
        if (
            o is not None
            and b.epoch <= o.epoch
            and (o.epoch, o.host, o.port, o.rack, o.endpoints) != (b.epoch, b.host, b.port, b.rack, b.endpoints)
        ):
            # gone and back with a lower epoch: only an unregistration explains it
            out.append(encode_record("UnregisterBroker", node_id=n, epoch=o.epoch))
            o = None
        if o is None or (o.epoch, o.host, o.port, o.rack, o.endpoints) != (
            b.epoch,
            b.host,
            b.port,
            b.rack,
            b.endpoints,
        ):
            extra = {"endpoints": b.endpoints} if b.endpoints else {}
            out.append(
                encode_record(
                    "RegisterBroker", node_id=n, epoch=b.epoch, host=b.host, port=b.port, rack=b.rack, **extra
                )
            )
            if not b.fenced:
                out.append(encode_record("FenceBroker", node_id=n, epoch=b.epoch, fenced=False))
        elif o.fenced != b.fenced:
            out.append(encode_record("FenceBroker", node_id=n, epoch=b.epoch, fenced=b.fenced))
    new_ids = {t.topic_id for t in new.topics.values()}
    for _, t in sorted(old.topics.items()):
        if t.topic_id not in new_ids:
            out.append(encode_record("RemoveTopic", topic_id=t.topic_id.hex))
    old_by_id = {t.topic_id: t for t in old.topics.values()}
    for _, t in sorted(new.topics.items()):
        o = old_by_id.get(t.topic_id)
        tid = t.topic_id.hex
        if o is None:
            out.extend(topic_records(t))
            continue
        old_cfg = o.configs
        for k in sorted(set(old_cfg) | set(t.configs)):
            if old_cfg.get(k) != t.configs.get(k):
                out.append(encode_record("Config", resource="topic", name=t.name, key=k, value=t.configs.get(k)))
        old_parts = o.partitions
        for p, ps in sorted(t.partitions.items()):
            op = old_parts.get(p)
            if op is None:
                out.append(partition_record(t.topic_id, ps))
            elif op != ps:
                out.append(
                    encode_record(
                        "PartitionChange",
                        topic_id=tid,
                        partition=p,
                        replicas=ps.replicas,
                        isr=ps.isr,
                        leader=ps.leader,
                        leader_epoch=ps.leader_epoch,
                        partition_epoch=ps.partition_epoch,
                        adding_replicas=ps.adding_replicas,
                        removing_replicas=ps.removing_replicas,
                        elr=ps.elr,
                        last_known_elr=ps.last_known_elr,
                    )
                )
        if set(old_parts) - set(t.partitions):
            raise MetadataRecordError(
                f"topic {t.name!r}: partitions {sorted(set(old_parts) - set(t.partitions))} "
                "cannot be removed (Kafka never shrinks a topic)"
            )
    # remote segments, once every partition exists (those of removed topics went with them)
    for key in sorted(set(old.remote_segments) | set(new.remote_segments), key=lambda k: (k[0].hex, k[1])):
        tid, p = key
        if tid not in new_ids:
            continue
        was_s = {s.segment_id: s for s in old.remote_segments.get(key, ())}
        now_s = {s.segment_id: s for s in new.remote_segments.get(key, ())}
        for sid in sorted(set(was_s) - set(now_s)):
            out.append(_restore_segment_record(tid, p, was_s[sid], DELETE_SEGMENT_FINISHED))
        for segment in new.remote_segments.get(key, ()):
            if was_s.get(segment.segment_id) != segment:
                out.append(_restore_segment_record(tid, p, segment, segment.state))
    for key in sorted(set(new.remote_log_start), key=lambda k: (k[0].hex, k[1])):
        tid, p = key
        if tid in new_ids and old.remote_log_start.get(key) != new.remote_log_start[key]:
            out.append(
                encode_record(
                    "RemoteLogStartOffset",
                    topic_id=tid.hex,
                    partition=p,
                    offset=new.remote_log_start[key],
                    restore=True,
                )
            )
    if new.next_producer_id != old.next_producer_id:
        out.append(encode_record("ProducerIds", next_producer_id=new.next_producer_id))
    for resource, old_owners, new_owners in (
        ("group", old.group_configs, new.group_configs),
        ("broker", old.broker_configs, new.broker_configs),
        ("client-metrics", old.client_metrics, new.client_metrics),
    ):
        for g in sorted(set(old_owners) | set(new_owners)):
            was, now = old_owners.get(g, {}), new_owners.get(g, {})
            for k in sorted(set(was) | set(now)):
                if was.get(k) != now.get(k):
                    out.append(encode_record("Config", resource=resource, name=g, key=k, value=now.get(k)))
    for u in sorted(set(old.scram_credentials) | set(new.scram_credentials)):
        was_c, now_c = old.scram_credentials.get(u, {}), new.scram_credentials.get(u, {})
        for m in sorted(set(was_c) | set(now_c)):
            if m not in now_c:
                out.append(encode_record("RemoveUserScramCredential", name=u, mechanism=m))
            elif was_c.get(m) != now_c[m]:
                out.append(encode_record("UserScramCredential", name=u, mechanism=m, **now_c[m].to_json()))
    for i in sorted(set(old.delegation_tokens) - set(new.delegation_tokens)):
        out.append(encode_record("RemoveDelegationToken", token_id=i))
    for i, token in sorted(new.delegation_tokens.items()):
        if old.delegation_tokens.get(i) != token:
            out.append(encode_record("DelegationToken", **token.to_json()))
    for i in sorted(set(old.acls) - set(new.acls)):
        out.append(encode_record("RemoveAcl", id=i))
    for i, acl in sorted(new.acls.items()):
        if old.acls.get(i) != acl:
            out.append(encode_record("Acl", id=i, **acl.to_json()))
    for n in sorted(set(old.controllers) - set(new.controllers)):
        out.append(encode_record("UnregisterController", node_id=n))
    for n, e in sorted(new.controllers.items()):
        if old.controllers.get(n) != e:
            out.append(encode_record("RegisterController", node_id=n, host=e[0], port=e[1]))
    if old.voters != new.voters:
        out.append(voters_record(new.voters))
    for name in sorted(set(old.features) | set(new.features)):
        if old.features.get(name) != new.features.get(name):
            out.append(encode_record("FeatureLevel", name=name, level=new.features.get(name, 0)))
    for entity in sorted(set(old.client_quotas) | set(new.client_quotas), key=client_quotas.entity_name):
        was_q, now_q = old.client_quotas.get(entity, {}), new.client_quotas.get(entity, {})
        for k in sorted(set(was_q) | set(now_q)):
            if k not in now_q:
                out.append(
                    encode_record("ClientQuota", entity=[list(c) for c in entity], key=k, value=0.0, remove=True)
                )
            elif was_q.get(k) != now_q[k]:
                out.append(
                    encode_record("ClientQuota", entity=[list(c) for c in entity], key=k, value=now_q[k], remove=False)
                )
    return out


def topic_records(t: TopicState) -> list[bytes]:
    """The records that create topic `t`: Topic, its configs, its partitions."""
    out = [encode_record("Topic", name=t.name, topic_id=t.topic_id.hex)]
    out += [
        encode_record("Config", resource="topic", name=t.name, key=k, value=v) for k, v in sorted(t.configs.items())
    ]
    out += [partition_record(t.topic_id, ps) for _, ps in sorted(t.partitions.items())]
    return out


def partition_record(topic_id: uuid.UUID, ps: PartitionState) -> bytes:
    """The Partition record of a new partition."""
    return encode_record(
        "Partition",
        topic_id=topic_id.hex,
        partition=ps.partition,
        replicas=ps.replicas,
        isr=ps.isr,
        leader=ps.leader,
        leader_epoch=ps.leader_epoch,
        partition_epoch=ps.partition_epoch,
        **_moving(ps),
    )


def _moving(ps: PartitionState) -> dict[str, list[int]]:
    """A new partition's reassignment and ELR fields, only when it has them (records stay short)."""
    out = {}
    if ps.adding_replicas or ps.removing_replicas:
        out.update(adding_replicas=ps.adding_replicas, removing_replicas=ps.removing_replicas)
    if ps.elr or ps.last_known_elr:
        out.update(elr=ps.elr, last_known_elr=ps.last_known_elr)
    return out
