"""ACL authorization (Kafka's StandardAuthorizer rules, KafkaApis' checks): a SASL broker with
three principals (admin a super user, alice and bob ordinary), ACLs created with
confluent-kafka's AdminClient as admin (one broker shared by most tests: each uses its own
topic, group and transactional ids). librdkafka, kafka-python and the Java client are
refused with Kafka's errors where alice's ACLs do not reach, and served where they do; the
protocol tests go API by API with raw requests."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
import warnings
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from conftest import needs_java

import logbroker
from logbroker.client.connection import BrokerConnection
from logbroker.protocol import REQUESTS, ErrorCode

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

JAAS = (
    'org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="admin-secret" '
    'user_alice="alice-secret" user_bob="bob-secret";'
)
PASSWORDS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
ACLS_ON = {
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:admin",
}
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
LITERAL, PREFIXED = ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED
TOPIC_FAILED, GROUP_FAILED = ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.GROUP_AUTHORIZATION_FAILED
CLUSTER_FAILED, TXN_FAILED = ErrorCode.CLUSTER_AUTHORIZATION_FAILED, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
# AclOperation codes (bit positions of the authorized-operations fields)
READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = (
    3,
    4,
    5,
    6,
    7,
    8,
    9,
    10,
    11,
    12,
)


def acl_broker(tmp_path: Path, **config) -> logbroker.Broker:
    return logbroker.Broker(data_dir=tmp_path / "d", listener="SASL_PLAINTEXT", config={**ACLS_ON, **config})


def rd(bs: str, user: str, **extra) -> dict:
    return {
        "bootstrap.servers": bs,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": user,
        "sasl.password": PASSWORDS[user],
        **extra,
    }


def acl(resource_type, name: str, operation, permission=ALLOW, pattern=LITERAL, principal: str = "User:alice"):
    return AclBinding(resource_type, name, pattern, principal, "*", operation, permission)


def grant(bs: str, *bindings: AclBinding) -> None:
    admin = AdminClient(rd(bs, "admin"))  # (kept alive until the futures are done)
    for f in admin.create_acls(list(bindings)).values():
        assert f.result(20) is None


def create_topics(bs: str, *names: str, partitions: int = 1) -> None:
    admin = AdminClient(rd(bs, "admin"))
    for f in admin.create_topics([NewTopic(n, partitions, 1) for n in names]).values():
        f.result(20)


def produce(conf: dict, topic: str, n: int = 10) -> list:
    """Delivery errors (None for a delivered message) of `n` messages."""
    results: list = []
    p = Producer(conf)
    for i in range(n):
        p.produce(topic, b"%d" % i, on_delivery=lambda err, _msg: results.append(err))
    assert p.flush(30) == 0
    return results


def consume(conf: dict, topics: list[str], want: int, seconds: float = 20) -> tuple[list[bytes], list]:
    """(values, errors) a subscribed consumer gets until it has `want` values or an error."""
    c = Consumer(conf)
    c.subscribe(topics)
    values, errors = [], []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and len(values) < want and not errors:
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            if m.error().code() != KafkaError._PARTITION_EOF:
                errors.append(m.error())
        else:
            values.append(m.value())
    c.close()
    return values, errors


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with acl_broker(tmp_path_factory.mktemp("acl")) as b:
        yield b


# --- raw requests ----------------------------------------------------------------------------


class Session:
    """A connection authenticated with SASL/PLAIN as `user`, for requests byte by byte."""

    def __init__(self, b: logbroker.Broker, user: str) -> None:
        self.conn = BrokerConnection(b.bootstrap_servers)
        assert self.conn._roundtrip(17, 1, REQUESTS[17](mechanism="PLAIN")).error_code == 0
        token = f"\0{user}\0{PASSWORDS[user]}".encode()
        assert self.conn._roundtrip(36, 2, REQUESTS[36](auth_bytes=token)).error_code == 0

    def __call__(self, api_key: int, version: int, **fields):
        return self.conn._roundtrip(api_key, version, REQUESTS[api_key](**fields))

    def close(self) -> None:
        self.conn.close()


@pytest.fixture
def session():
    opened: list[Session] = []

    def open_one(b, user: str = "alice") -> Session:
        opened.append(Session(b, user))
        return opened[-1]

    yield open_one
    for s in opened:
        s.close()


def bits(*ops: int) -> int:
    return sum(1 << op for op in ops)


# --- produce, consume, groups (librdkafka) -----------------------------------------------------


def test_produce_and_consume_where_the_acls_allow(broker):
    bs = broker.bootstrap_servers
    create_topics(bs, "orders", "secret")
    grant(
        bs,
        acl(ResourceType.TOPIC, "orders", AclOperation.WRITE),
        acl(ResourceType.TOPIC, "orders", AclOperation.READ),
        acl(ResourceType.GROUP, "g-orders", AclOperation.READ),
    )
    alice = rd(bs, "alice")
    assert produce(alice, "orders") == [None] * 10
    errors = produce(alice, "secret", 1)
    assert [e.code() for e in errors] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    values, errors = consume({**alice, "group.id": "g-orders", "auto.offset.reset": "earliest"}, ["orders"], 10)
    assert (sorted(values), errors) == (sorted(b"%d" % i for i in range(10)), [])
    # A topic it may not read: librdkafka's consumer error is Kafka's TopicAuthorizationException.
    _, errors = consume({**alice, "group.id": "g-orders"}, ["secret"], 1)
    assert [e.code() for e in errors] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    # bob has no ACL at all: he cannot even see the topics.
    assert [e.code() for e in produce(rd(bs, "bob"), "orders", 1)] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]


def test_group_read_denied(broker):
    bs = broker.bootstrap_servers
    create_topics(bs, "grp-t")
    grant(
        bs, acl(ResourceType.TOPIC, "grp-t", AclOperation.ALL), acl(ResourceType.GROUP, "g-seen", AclOperation.DESCRIBE)
    )
    alice = rd(bs, "alice")
    produce(alice, "grp-t", 3)
    # subscribing with a group it may not use: GROUP_AUTHORIZATION_FAILED (at FindCoordinator)
    _, errors = consume({**alice, "group.id": "g-nope", "auto.offset.reset": "earliest"}, ["grp-t"], 1)
    assert [e.code() for e in errors] == [KafkaError.GROUP_AUTHORIZATION_FAILED]
    # a group it may describe but not read: the commit is refused (OffsetCommit needs READ)
    c = Consumer({**alice, "group.id": "g-seen", "enable.auto.commit": False})
    with pytest.raises(KafkaException) as e:
        c.commit(offsets=[TopicPartition("grp-t", 0, 2)], asynchronous=False)
    assert e.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    c.close()


def test_metadata_hides_topics_it_may_not_describe(broker):
    bs = broker.bootstrap_servers
    create_topics(bs, "md-visible", "md-hidden")
    grant(bs, acl(ResourceType.TOPIC, "md-visible", AclOperation.DESCRIBE))
    alice = AdminClient(rd(bs, "alice"))
    topics = alice.list_topics(timeout=10).topics
    assert "md-visible" in topics and "md-hidden" not in topics
    named = alice.list_topics(topic="md-hidden", timeout=10).topics["md-hidden"]
    assert named.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    admin_topics = AdminClient(rd(bs, "admin")).list_topics(timeout=10).topics
    assert {"md-visible", "md-hidden"} <= set(admin_topics)


def test_metadata_authorized_operations_and_ids(broker, session):
    bs = broker.bootstrap_servers
    create_topics(bs, "ops-t", "ops-hidden")
    grant(
        bs,
        acl(ResourceType.TOPIC, "ops-t", AclOperation.READ),
        acl(ResourceType.TOPIC, "ops-t", AclOperation.ALTER_CONFIGS),
    )
    s = session(broker)
    r = s(
        3,
        10,
        topics=[REQUESTS[3].MetadataRequestTopic(name="ops-t"), REQUESTS[3].MetadataRequestTopic(name="ops-hidden")],
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=True,
        include_topic_authorized_operations=True,
    )
    by_name = {t.name: t for t in r.topics}
    assert by_name["ops-t"].error_code == 0
    # READ implies DESCRIBE, ALTER_CONFIGS implies DESCRIBE_CONFIGS
    assert by_name["ops-t"].topic_authorized_operations == bits(READ, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS)
    assert by_name["ops-hidden"].error_code == TOPIC_FAILED and by_name["ops-hidden"].partitions == []
    assert r.cluster_authorized_operations == 0  # no DESCRIBE on the cluster
    # not asked: the fields keep their "not given" value
    r = s(
        3,
        10,
        topics=[REQUESTS[3].MetadataRequestTopic(name="ops-t")],
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )
    assert r.topics[0].topic_authorized_operations == -2147483648 and r.cluster_authorized_operations == -2147483648
    # by topic id (v12): ids are not secret, the name of an undescribable topic is
    admin = session(broker, "admin")
    ids = {
        t.name: t.topic_id
        for t in admin(
            3, 12, topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=True
        ).topics
    }
    everything = bits(READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS)
    assert {
        t.topic_authorized_operations
        for t in admin(
            3, 12, topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=True
        ).topics
    } == {everything}
    r = s(
        3,
        12,
        topics=[
            REQUESTS[3].MetadataRequestTopic(name=None, topic_id=ids["ops-hidden"]),
            REQUESTS[3].MetadataRequestTopic(name=None, topic_id=ids["ops-t"]),
        ],
        allow_auto_topic_creation=False,
    )
    assert [(t.name, t.error_code) for t in r.topics] == [(None, TOPIC_FAILED), ("ops-t", 0)]
    assert r.topics[0].topic_id == ids["ops-hidden"]


def test_auto_create_needs_create(tmp_path):
    with acl_broker(tmp_path, **{"auto.create.topics.enable": "true"}) as b:
        bs = b.bootstrap_servers
        grant(
            bs,
            acl(ResourceType.TOPIC, "auto-", AclOperation.WRITE, pattern=PREFIXED),
            acl(ResourceType.TOPIC, "made-", AclOperation.WRITE, pattern=PREFIXED),
            acl(ResourceType.TOPIC, "made-", AclOperation.CREATE, pattern=PREFIXED),
        )
        alice = rd(bs, "alice")
        assert [e.code() for e in produce(alice, "auto-x", 1)] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
        assert "auto-x" not in AdminClient(rd(bs, "admin")).list_topics(timeout=10).topics
        assert produce(alice, "made-x", 3) == [None] * 3
        assert "made-x" in AdminClient(rd(bs, "admin")).list_topics(timeout=10).topics
        # CREATE on the cluster allows any name
        grant(
            bs,
            acl(ResourceType.BROKER, "kafka-cluster", AclOperation.CREATE),
            acl(ResourceType.TOPIC, "any", AclOperation.WRITE, pattern=PREFIXED),
        )
        assert produce(alice, "any-x", 1) == [None]


# --- transactions and idempotence -----------------------------------------------------------------


def test_transactional_producer(broker):
    bs = broker.bootstrap_servers
    create_topics(bs, "tx-t")
    grant(
        bs,
        acl(ResourceType.TOPIC, "tx-t", AclOperation.ALL),
        acl(ResourceType.TRANSACTIONAL_ID, "tx-alice", AclOperation.WRITE),
        acl(ResourceType.GROUP, "tx-g", AclOperation.READ),
    )
    alice = rd(bs, "alice")
    p = Producer({**alice, "transactional.id": "tx-alice"})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(5):
        p.produce("tx-t", b"%d" % i)
    c = Consumer({**alice, "group.id": "tx-g"})
    p.send_offsets_to_transaction([TopicPartition("tx-t", 0, 1)], c.consumer_group_metadata(), 30)
    p.commit_transaction(30)
    c.close()
    values, errors = consume(
        {**alice, "group.id": "tx-g", "isolation.level": "read_committed", "auto.offset.reset": "earliest"}, ["tx-t"], 4
    )
    assert (values, errors) == ([b"1", b"2", b"3", b"4"], [])  # from the committed offset 1
    # a transactional id it may not write
    p = Producer({**alice, "transactional.id": "tx-other"})
    with pytest.raises(KafkaException) as e:
        p.init_transactions(30)
    assert e.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def test_transaction_apis(broker, session):
    bs = broker.bootstrap_servers
    create_topics(bs, "txa-ok", "txa-no")
    grant(
        bs,
        acl(ResourceType.TOPIC, "txa-ok", AclOperation.WRITE),
        acl(ResourceType.TRANSACTIONAL_ID, "txa", AclOperation.WRITE),
    )
    s = session(broker)
    r = s(22, 4, transactional_id="txa-denied", transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1)
    assert r.error_code == TXN_FAILED
    # as a client does: FindCoordinator first (which makes __transaction_state when it does not
    # exist yet; InitProducerId alone answers NOT_COORDINATOR then, as Kafka's does), then
    # InitProducerId, retried while the coordinator's partition loads
    assert s(10, 4, key_type=1, coordinator_keys=["txa"]).coordinators[0].error_code == 0
    deadline = time.monotonic() + 30
    while True:
        r = s(22, 4, transactional_id="txa", transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1)
        retriable = (
            ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
            ErrorCode.COORDINATOR_NOT_AVAILABLE,
            ErrorCode.NOT_COORDINATOR,
        )
        if r.error_code not in retriable or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert r.error_code == 0
    pid, epoch = r.producer_id, r.producer_epoch
    Req = REQUESTS[24]
    # one topic it may not write: TOPIC_AUTHORIZATION_FAILED there, OPERATION_NOT_ATTEMPTED for the rest
    r = s(
        24,
        3,
        v3_and_below_transactional_id="txa",
        v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[
            Req.AddPartitionsToTxnTopic(name="txa-ok", partitions=[0]),
            Req.AddPartitionsToTxnTopic(name="txa-no", partitions=[0]),
        ],
    )
    codes = {t.name: [p.partition_error_code for p in t.results_by_partition] for t in r.results_by_topic_v3_and_below}
    assert codes == {"txa-ok": [ErrorCode.OPERATION_NOT_ATTEMPTED], "txa-no": [TOPIC_FAILED]}
    r = s(
        24,
        3,
        v3_and_below_transactional_id="txa-denied",
        v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[Req.AddPartitionsToTxnTopic(name="txa-ok", partitions=[0])],
    )
    assert r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == TXN_FAILED
    # the brokers' form (v4+) needs CLUSTER_ACTION
    r = s(24, 4, transactions=[])
    assert r.error_code == CLUSTER_FAILED
    assert (
        s(26, 3, transactional_id="txa-denied", producer_id=pid, producer_epoch=epoch, committed=False).error_code
        == TXN_FAILED
    )
    assert (
        s(25, 3, transactional_id="txa", producer_id=pid, producer_epoch=epoch, group_id="g-no").error_code
        == GROUP_FAILED
    )
    W = REQUESTS[27]
    r = s(
        27,
        1,
        markers=[
            W.WritableTxnMarker(
                producer_id=pid,
                producer_epoch=epoch,
                transaction_result=False,
                coordinator_epoch=0,
                topics=[W.WritableTxnMarkerTopic(name="txa-ok", partition_indexes=[0])],
            )
        ],
    )
    assert r.markers[0].topics[0].partitions[0].error_code == CLUSTER_FAILED
    # describe / list: only the transactional ids it may describe (WRITE implies DESCRIBE)
    r = s(65, 0, transactional_ids=["txa", "txa-denied"])
    assert [(t.transactional_id, t.error_code) for t in r.transaction_states] == [
        ("txa", 0),
        ("txa-denied", TXN_FAILED),
    ]
    admin = session(broker, "admin")
    assert (
        admin(
            22, 4, transactional_id="txa-admin", transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1
        ).error_code
        == 0
    )
    listed = {t.transactional_id for t in s(66, 1, state_filters=[], producer_id_filters=[]).transaction_states}
    assert "txa" in listed and "txa-admin" not in listed
    assert "txa-admin" in {
        t.transactional_id for t in admin(66, 1, state_filters=[], producer_id_filters=[]).transaction_states
    }


def test_idempotent_producer_rules(broker, session):
    """KIP-679: InitProducerId without a transactional id needs IDEMPOTENT_WRITE on the cluster
    or WRITE on some topic."""
    bs = broker.bootstrap_servers
    create_topics(bs, "idem-t")
    grant(bs, acl(ResourceType.TOPIC, "idem-t", AclOperation.WRITE))
    # librdkafka's idempotent producer (the default in Kafka 3+ clients)
    assert produce({**rd(bs, "alice"), "enable.idempotence": True}, "idem-t", 5) == [None] * 5
    s = session(broker, "bob")
    assert (
        s(22, 4, transactional_id=None, transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1).error_code
        == CLUSTER_FAILED
    )
    # WRITE on some topic, by a prefix: enough
    grant(bs, acl(ResourceType.TOPIC, "bobs-", AclOperation.WRITE, pattern=PREFIXED, principal="User:bob"))
    assert (
        s(22, 4, transactional_id=None, transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1).error_code == 0
    )
    # ... unless a DENY covers it (a shorter denied prefix)
    grant(bs, acl(ResourceType.TOPIC, "bob", AclOperation.WRITE, DENY, PREFIXED, principal="User:bob"))
    assert (
        s(22, 4, transactional_id=None, transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1).error_code
        == CLUSTER_FAILED
    )
    grant(bs, acl(ResourceType.BROKER, "kafka-cluster", AclOperation.IDEMPOTENT_WRITE, principal="User:bob"))
    assert (
        s(22, 4, transactional_id=None, transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1).error_code == 0
    )


# --- admin ------------------------------------------------------------------------------------------


def test_describe_and_alter_configs(broker):
    bs = broker.bootstrap_servers
    create_topics(bs, "cfg-ok", "cfg-ro", "cfg-no")
    grant(
        bs,
        acl(ResourceType.TOPIC, "cfg-ok", AclOperation.ALTER_CONFIGS),
        acl(ResourceType.TOPIC, "cfg-ro", AclOperation.DESCRIBE_CONFIGS),
    )
    alice = AdminClient(rd(bs, "alice"))
    got = alice.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "cfg-ok")])
    assert "retention.ms" in next(iter(got.values())).result(20)
    for name in ("cfg-no",):
        f = next(iter(alice.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, name)]).values()))
        with pytest.raises(KafkaException) as e:
            f.result(20)
        assert e.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    f = next(iter(alice.describe_configs([ConfigResource(ConfigResource.Type.BROKER, "1")]).values()))
    with pytest.raises(KafkaException) as e:
        f.result(20)
    assert e.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED

    def alter(name: str):
        res = ConfigResource(
            ConfigResource.Type.TOPIC,
            name,
            incremental_configs=[ConfigEntry("retention.ms", "123456", incremental_operation=AlterConfigOpType.SET)],
        )
        return next(iter(alice.incremental_alter_configs([res]).values()))

    assert alter("cfg-ok").result(20) is None
    for name in ("cfg-ro", "cfg-no", "cfg-missing"):  # (a missing topic: refused before existence)
        with pytest.raises(KafkaException) as e:
            alter(name).result(20)
        assert e.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, name
    admin = AdminClient(rd(bs, "admin"))
    cfg = next(iter(admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "cfg-ok")]).values())).result(20)
    assert cfg["retention.ms"].value == "123456"


def test_create_delete_topics_and_partitions(broker, session):
    bs = broker.bootstrap_servers
    grant(
        bs,
        acl(ResourceType.TOPIC, "mine-", AclOperation.CREATE, pattern=PREFIXED),
        acl(ResourceType.TOPIC, "mine-", AclOperation.DELETE, pattern=PREFIXED),
        acl(ResourceType.TOPIC, "mine-a", AclOperation.ALTER),
    )
    alice = AdminClient(rd(bs, "alice"))
    alice.create_topics([NewTopic("mine-a", 1, 1)])["mine-a"].result(20)
    with pytest.raises(KafkaException) as e:
        alice.create_topics([NewTopic("theirs", 1, 1)])["theirs"].result(20)
    assert e.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    from confluent_kafka.admin import NewPartitions

    alice.create_partitions([NewPartitions("mine-a", 2)])["mine-a"].result(20)
    create_topics(bs, "theirs-2")
    with pytest.raises(KafkaException) as e:
        alice.create_partitions([NewPartitions("theirs-2", 2)])["theirs-2"].result(20)
    assert e.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # CreateTopics answers the configs only with DESCRIBE_CONFIGS on the topic
    s = session(broker)
    Req = REQUESTS[19]
    r = s(
        19,
        7,
        topics=[Req.CreatableTopic(name="mine-b", num_partitions=1, replication_factor=1)],
        timeout_ms=10000,
        validate_only=False,
    )
    t = r.topics[0]
    assert (t.error_code, t.topic_config_error_code, t.num_partitions, t.configs) == (0, TOPIC_FAILED, -1, [])
    # DeleteTopics: DELETE on the topic, decided before existence
    assert alice.delete_topics(["mine-a"])["mine-a"].result(20) is None
    for name in ("theirs-2", "no-such-topic"):
        with pytest.raises(KafkaException) as e:
            alice.delete_topics([name])[name].result(20)
        assert e.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # by id: the name stays hidden from who may not describe the topic
    admin = session(broker, "admin")
    ids = {t.name: t.topic_id for t in admin(3, 12, topics=None, allow_auto_topic_creation=False).topics}
    r = s(20, 6, topics=[REQUESTS[20].DeleteTopicState(name=None, topic_id=ids["theirs-2"])], timeout_ms=10000)
    assert [(t.name, t.error_code) for t in r.responses] == [(None, TOPIC_FAILED)]
    assert "theirs-2" in AdminClient(rd(bs, "admin")).list_topics(timeout=10).topics


def test_offsets_and_records_apis(broker, session):
    bs = broker.bootstrap_servers
    create_topics(bs, "off-ok", "off-no")
    grant(bs, acl(ResourceType.TOPIC, "off-ok", AclOperation.DESCRIBE))
    s = session(broker)
    L = REQUESTS[2]
    r = s(
        2,
        7,
        replica_id=-1,
        isolation_level=0,
        topics=[
            L.ListOffsetsTopic(name=n, partitions=[L.ListOffsetsPartition(partition_index=0, timestamp=-1)])
            for n in ("off-ok", "off-no", "off-missing")
        ],
    )
    assert [t.partitions[0].error_code for t in r.topics] == [0, TOPIC_FAILED, TOPIC_FAILED]
    E = REQUESTS[23]
    r = s(
        23,
        4,
        replica_id=-1,
        topics=[
            E.OffsetForLeaderTopic(
                topic=n, partitions=[E.OffsetForLeaderPartition(partition=0, current_leader_epoch=-1, leader_epoch=0)]
            )
            for n in ("off-ok", "off-no")
        ],
    )
    assert [t.partitions[0].error_code for t in r.topics] == [0, TOPIC_FAILED]
    D = REQUESTS[21]
    r = s(
        21,
        2,
        topics=[
            D.DeleteRecordsTopic(name="off-ok", partitions=[D.DeleteRecordsPartition(partition_index=0, offset=0)])
        ],
        timeout_ms=10000,
    )
    assert r.topics[0].partitions[0].error_code == TOPIC_FAILED  # DESCRIBE is not DELETE
    P = REQUESTS[61]
    r = s(61, 0, topics=[P.TopicRequest(name=n, partition_indexes=[0]) for n in ("off-ok", "off-no")])
    assert [t.partitions[0].error_code for t in r.topics] == [TOPIC_FAILED, TOPIC_FAILED]  # needs READ
    grant(
        bs, acl(ResourceType.TOPIC, "off-ok", AclOperation.READ), acl(ResourceType.TOPIC, "off-ok", AclOperation.DELETE)
    )
    r = s(61, 0, topics=[P.TopicRequest(name="off-ok", partition_indexes=[0])])
    assert r.topics[0].partitions[0].error_code == 0
    r = s(
        21,
        2,
        topics=[
            D.DeleteRecordsTopic(name="off-ok", partitions=[D.DeleteRecordsPartition(partition_index=0, offset=0)])
        ],
        timeout_ms=10000,
    )
    assert r.topics[0].partitions[0].error_code == 0


def test_group_apis(broker, session):
    bs = broker.bootstrap_servers
    create_topics(bs, "ga-t", "ga-hidden")
    grant(bs, acl(ResourceType.TOPIC, "ga-t", AclOperation.ALL), acl(ResourceType.GROUP, "ga-mine", AclOperation.ALL))
    admin = rd(bs, "admin")
    for group in ("ga-mine", "ga-theirs"):  # a group with offsets for both topics
        c = Consumer({**admin, "group.id": group, "enable.auto.commit": False})
        c.commit(offsets=[TopicPartition("ga-t", 0, 1), TopicPartition("ga-hidden", 0, 1)], asynchronous=False)
        c.close()
    s = session(broker)
    F = REQUESTS[10]
    r = s(10, 4, key_type=0, coordinator_keys=["ga-mine", "ga-theirs"])
    assert [(c.key, c.error_code) for c in r.coordinators] == [("ga-mine", 0), ("ga-theirs", GROUP_FAILED)]
    r = s(10, 4, key_type=1, coordinator_keys=["some-txn"])
    assert r.coordinators[0].error_code == TXN_FAILED
    assert s(10, 3, key_type=0, key="ga-theirs").error_code == GROUP_FAILED
    del F
    # ListGroups: only the groups it may describe (all with DESCRIBE on the cluster)
    listed = {g.group_id for g in s(16, 4, states_filter=[]).groups}
    assert "ga-mine" in listed and "ga-theirs" not in listed
    assert {"ga-mine", "ga-theirs"} <= {g.group_id for g in session(broker, "admin")(16, 4, states_filter=[]).groups}
    r = s(15, 5, groups=["ga-mine", "ga-theirs"], include_authorized_operations=True)
    assert [(g.group_id, g.error_code) for g in r.groups] == [("ga-mine", 0), ("ga-theirs", GROUP_FAILED)]
    assert r.groups[0].authorized_operations == bits(READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS)
    # OffsetFetch: a group it may not describe; of all offsets only the describable topics'
    OffsetFetch = REQUESTS[9]
    r = s(
        9,
        8,
        groups=[
            OffsetFetch.OffsetFetchRequestGroup(group_id="ga-mine", topics=None),
            OffsetFetch.OffsetFetchRequestGroup(group_id="ga-theirs", topics=None),
            OffsetFetch.OffsetFetchRequestGroup(
                group_id="ga-mine",
                topics=[
                    OffsetFetch.OffsetFetchRequestTopics(name="ga-t", partition_indexes=[0]),
                    OffsetFetch.OffsetFetchRequestTopics(name="ga-hidden", partition_indexes=[0]),
                ],
            ),
        ],
        require_stable=False,
    )
    everything, theirs, named = r.groups
    assert [t.name for t in everything.topics] == ["ga-t"] and everything.error_code == 0
    assert (theirs.error_code, theirs.topics) == (GROUP_FAILED, [])
    assert {t.name: (t.partitions[0].committed_offset, t.partitions[0].error_code) for t in named.topics} == {
        "ga-t": (1, 0),
        "ga-hidden": (-1, TOPIC_FAILED),
    }
    r = s(9, 5, group_id="ga-theirs", topics=None, require_stable=False)
    assert (r.error_code, r.topics) == (GROUP_FAILED, [])
    # OffsetCommit: READ on each topic
    C = REQUESTS[8]
    r = s(
        8,
        8,
        group_id="ga-mine",
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        topics=[
            C.OffsetCommitRequestTopic(
                name=n,
                partitions=[
                    C.OffsetCommitRequestPartition(
                        partition_index=0, committed_offset=2, committed_leader_epoch=-1, committed_metadata=""
                    )
                ],
            )
            for n in ("ga-t", "ga-hidden")
        ],
    )
    assert {t.name: t.partitions[0].error_code for t in r.topics} == {"ga-t": 0, "ga-hidden": TOPIC_FAILED}
    r = s(
        8,
        8,
        group_id="ga-theirs",
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        topics=[
            C.OffsetCommitRequestTopic(
                name="ga-t",
                partitions=[
                    C.OffsetCommitRequestPartition(
                        partition_index=0, committed_offset=2, committed_leader_epoch=-1, committed_metadata=""
                    )
                ],
            )
        ],
    )
    assert r.topics[0].partitions[0].error_code == GROUP_FAILED
    # the other group APIs: READ on the group
    assert (
        s(12, 4, group_id="ga-theirs", generation_id=1, member_id="m", group_instance_id=None).error_code
        == GROUP_FAILED
    )
    assert s(13, 5, group_id="ga-theirs", members=[]).error_code == GROUP_FAILED
    J = REQUESTS[11]
    assert (
        s(
            11,
            9,
            group_id="ga-theirs",
            session_timeout_ms=10000,
            rebalance_timeout_ms=10000,
            member_id="",
            group_instance_id=None,
            protocol_type="consumer",
            protocols=[J.JoinGroupRequestProtocol(name="range", metadata=b"")],
        ).error_code
        == GROUP_FAILED
    )
    assert (
        s(
            14,
            5,
            group_id="ga-theirs",
            generation_id=1,
            member_id="m",
            group_instance_id=None,
            protocol_type="consumer",
            protocol_name="range",
            assignments=[],
        ).error_code
        == GROUP_FAILED
    )
    assert (
        s(
            68,
            0,
            group_id="ga-theirs",
            member_id="m",
            member_epoch=0,
            rebalance_timeout_ms=10000,
            subscribed_topic_names=["ga-t"],
            topic_partitions=[],
        ).error_code
        == GROUP_FAILED
    )
    assert (
        s(
            68,
            0,
            group_id="ga-mine",
            member_id="m",
            member_epoch=0,
            rebalance_timeout_ms=10000,
            subscribed_topic_names=["ga-t", "ga-hidden"],
            topic_partitions=[],
        ).error_code
        == TOPIC_FAILED
    )
    r = s(69, 0, group_ids=["ga-theirs"], include_authorized_operations=False)
    assert r.groups[0].error_code == GROUP_FAILED
    # a regex subscription matches only the topics the member's principal may describe
    admin = session(broker, "admin")
    ids = {t.name: t.topic_id for t in admin(3, 12, topics=None, allow_auto_topic_creation=False).topics}
    mine_member = uuid.uuid4().hex
    r = s(
        68,
        1,
        group_id="ga-mine",
        member_id=mine_member,
        member_epoch=0,
        rebalance_timeout_ms=10000,
        subscribed_topic_regex="ga-.*",
        topic_partitions=[],
    )
    assert r.error_code == 0
    assert {tp.topic_id for tp in r.assignment.topic_partitions} == {ids["ga-t"]}
    r = s(69, 0, group_ids=["ga-mine"], include_authorized_operations=True)
    assert r.groups[0].error_code == 0
    assert r.groups[0].authorized_operations == bits(READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS)
    # a group assigned a topic the principal may not describe: TOPIC_AUTHORIZATION_FAILED for it
    assert (
        admin(
            68,
            1,
            group_id="ga-mixed",
            member_id=uuid.uuid4().hex,
            member_epoch=0,
            rebalance_timeout_ms=10000,
            subscribed_topic_names=["ga-t", "ga-hidden"],
            topic_partitions=[],
        ).error_code
        == 0
    )
    grant(bs, acl(ResourceType.GROUP, "ga-mixed", AclOperation.DESCRIBE))
    r = s(69, 0, group_ids=["ga-mixed"], include_authorized_operations=False)
    assert (r.groups[0].error_code, r.groups[0].members) == (TOPIC_FAILED, [])
    assert admin(69, 0, group_ids=["ga-mixed"], include_authorized_operations=False).groups[0].error_code == 0
    # DeleteGroups: DELETE on each group, checked first; then, as Kafka, a KIP-848 group with a
    # member is NON_EMPTY_GROUP, and deleted once the member has left
    r = s(42, 2, groups_names=["ga-theirs", "ga-mine"])
    assert {g.group_id: g.error_code for g in r.results} == {
        "ga-theirs": GROUP_FAILED,
        "ga-mine": ErrorCode.NON_EMPTY_GROUP,
    }
    assert (
        s(
            68,
            1,
            group_id="ga-mine",
            member_id=mine_member,
            member_epoch=-1,
            rebalance_timeout_ms=10000,
            topic_partitions=None,
        ).error_code
        == 0
    )
    r = s(42, 2, groups_names=["ga-theirs", "ga-mine"])
    assert {g.group_id: g.error_code for g in r.results} == {"ga-theirs": GROUP_FAILED, "ga-mine": 0}


def test_cluster_apis(broker, session):
    s = session(broker)
    r = s(60, 1, include_cluster_authorized_operations=True, endpoint_type=1)
    assert (r.error_code, r.cluster_authorized_operations) == (0, 0)  # anyone may describe; no operations
    admin = session(broker, "admin")
    r = admin(60, 1, include_cluster_authorized_operations=True, endpoint_type=1)
    assert r.cluster_authorized_operations == bits(
        CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE
    )
    r = s(35, 4, topics=None)
    assert (r.error_code, r.results) == (CLUSTER_FAILED, [])
    assert admin(35, 4, topics=None).error_code == 0
    r = s(
        43,
        2,
        election_type=0,
        topic_partitions=[REQUESTS[43].TopicPartitions(topic="x", partitions=[0])],
        timeout_ms=10000,
    )
    assert r.error_code == CLUSTER_FAILED
    assert r.replica_election_results[0].partition_result[0].error_code == CLUSTER_FAILED
    assert s(46, 0, timeout_ms=10000, topics=None).error_code == CLUSTER_FAILED
    assert s(45, 0, timeout_ms=10000, topics=[]).error_code == CLUSTER_FAILED
    r = s(50, 0, users=[REQUESTS[50].UserName(name="alice")])
    assert (r.error_code, [u.error_code for u in r.results]) == (CLUSTER_FAILED, [CLUSTER_FAILED])
    A = REQUESTS[51]
    r = s(51, 0, deletions=[A.ScramCredentialDeletion(name="bob", mechanism=1)], upsertions=[])
    assert [(u.user, u.error_code) for u in r.results] == [("bob", CLUSTER_FAILED)]
    assert admin(50, 0, users=None).error_code == 0


def test_share_group_apis(tmp_path, session):
    with acl_broker(tmp_path, **{"group.share.enable": "true"}) as b:
        bs = b.bootstrap_servers
        create_topics(bs, "sh-ok", "sh-no")
        grant(
            bs, acl(ResourceType.TOPIC, "sh-ok", AclOperation.READ), acl(ResourceType.GROUP, "sh-g", AclOperation.READ)
        )
        admin = session(b, "admin")
        ids = {t.name: t.topic_id for t in admin(3, 12, topics=None, allow_auto_topic_creation=False).topics}
        s = session(b)
        member = uuid.uuid4().hex
        r = s(76, 1, group_id="sh-other", member_id=member, member_epoch=0, subscribed_topic_names=["sh-ok"])
        assert r.error_code == GROUP_FAILED
        r = s(76, 1, group_id="sh-g", member_id=member, member_epoch=0, subscribed_topic_names=["sh-ok", "sh-no"])
        assert r.error_code == TOPIC_FAILED
        assert (
            s(76, 1, group_id="sh-g", member_id=member, member_epoch=0, subscribed_topic_names=["sh-ok"]).error_code
            == 0
        )
        F = REQUESTS[78]
        r = s(78, 1, group_id="sh-other", member_id=member, share_session_epoch=0, max_wait_ms=0, topics=[])
        assert r.error_code == GROUP_FAILED
        r = s(
            78,
            1,
            group_id="sh-g",
            member_id=member,
            share_session_epoch=0,
            max_wait_ms=0,
            topics=[
                F.FetchTopic(topic_id=ids[n], partitions=[F.FetchPartition(partition_index=0)])
                for n in ("sh-ok", "sh-no")
            ],
        )
        assert r.error_code == 0
        codes = {t.topic_id: t.partitions[0].error_code for t in r.responses}
        assert codes.get(ids["sh-no"]) == TOPIC_FAILED and codes.get(ids["sh-ok"], 0) == 0
        # the share coordinator's APIs are the brokers': CLUSTER_ACTION
        R = REQUESTS[84]
        r = s(
            84,
            0,
            group_id="sh-g",
            topics=[R.ReadStateData(topic_id=ids["sh-ok"], partitions=[R.PartitionData(partition=0, leader_epoch=0)])],
        )
        assert r.results[0].partitions[0].error_code == CLUSTER_FAILED
        r = s(10, 6, key_type=2, coordinator_keys=[f"sh-g:{ids['sh-ok']}:0"])
        assert r.coordinators[0].error_code == CLUSTER_FAILED
        assert (
            s(90, 0, groups=[REQUESTS[90].DescribeShareGroupOffsetsRequestGroup(group_id="sh-other", topics=None)])
            .groups[0]
            .error_code
            == GROUP_FAILED
        )
        assert s(92, 0, group_id="sh-g", topics=[]).error_code == GROUP_FAILED  # DELETE on the group
        assert (
            admin(
                84,
                0,
                group_id="sh-g",
                topics=[
                    R.ReadStateData(topic_id=ids["sh-ok"], partitions=[R.PartitionData(partition=0, leader_epoch=0)])
                ],
            )
            .results[0]
            .partitions[0]
            .error_code
            != CLUSTER_FAILED
        )


def test_every_api_answers_a_principal_without_acls(tmp_path, session):
    """Each API at each version it serves answers bob (no ACL at all) with its refusals encoded
    for that version (a field a version cannot carry would close the connection)."""
    from logbroker.broker.handlers import HANDLERS

    with acl_broker(tmp_path, **{"group.share.enable": "true"}) as b:
        for key, entry in sorted(HANDLERS.items()):
            if entry.handler is None or key in (17, 18, 36) or not entry.served_by(b.server):
                continue
            for version in range(entry.min_version, entry.max_version + 1):
                assert session(b, "bob")(key, version) is not None, (key, version)


def test_super_user_may_do_everything(broker):
    bs = broker.bootstrap_servers
    admin = rd(bs, "admin")
    a = AdminClient(admin)
    a.create_topics([NewTopic("su-t", 2, 1)])["su-t"].result(20)
    assert produce(admin, "su-t", 5) == [None] * 5
    values, errors = consume({**admin, "group.id": "su-g", "auto.offset.reset": "earliest"}, ["su-t"], 5)
    assert (len(values), errors) == (5, [])
    p = Producer({**admin, "transactional.id": "su-txn"})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce("su-t", b"t")
    p.commit_transaction(30)
    assert next(iter(a.describe_configs([ConfigResource(ConfigResource.Type.BROKER, "1")]).values())).result(20)
    assert AclOperation.ALTER in a.describe_cluster(include_authorized_operations=True).result(20).authorized_operations
    assert a.delete_topics(["su-t"])["su-t"].result(20) is None


def test_deny_beats_allow_and_prefixes(broker):
    bs = broker.bootstrap_servers
    create_topics(bs, "dn-open", "dn-closed", "pfx-a", "pfxq")
    grant(
        bs,
        acl(ResourceType.TOPIC, "*", AclOperation.ALL, principal="User:bob"),
        acl(ResourceType.TOPIC, "dn-closed", AclOperation.WRITE, DENY, principal="User:bob"),
        acl(ResourceType.TOPIC, "pfx-", AclOperation.WRITE, pattern=PREFIXED),
    )
    bob, alice = rd(bs, "bob"), rd(bs, "alice")
    assert produce(bob, "dn-open", 1) == [None]
    assert [e.code() for e in produce(bob, "dn-closed", 1)] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    assert produce(alice, "pfx-a", 1) == [None]
    assert [e.code() for e in produce(alice, "pfxq", 1)] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]


def test_allow_everyone_if_no_acl_found(tmp_path):
    with acl_broker(tmp_path, **{"allow.everyone.if.no.acl.found": "true"}) as b:
        bs = b.bootstrap_servers
        create_topics(bs, "open", "guarded")
        grant(bs, acl(ResourceType.TOPIC, "guarded", AclOperation.ALL))
        bob = rd(bs, "bob")
        assert produce(bob, "open", 3) == [None] * 3  # no ACL on the topic: everyone
        values, errors = consume({**bob, "group.id": "anyone", "auto.offset.reset": "earliest"}, ["open"], 3)
        assert (len(values), errors) == (3, [])
        # an ACL on the topic (for alice): the others are refused
        assert [e.code() for e in produce(bob, "guarded", 1)] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
        assert produce(rd(bs, "alice"), "guarded", 1) == [None]


# --- other clients -----------------------------------------------------------------------------------


def test_kafka_python_consumer_denied(broker):
    """kafka-python's consumer sees the topic (DESCRIBE) but may not read it: its poll raises
    TopicAuthorizationFailedError (Kafka's TopicAuthorizationException), from the Fetch."""
    from kafka import KafkaConsumer
    from kafka.errors import TopicAuthorizationFailedError

    bs = broker.bootstrap_servers
    create_topics(bs, "kp-secret")
    produce(rd(bs, "admin"), "kp-secret", 3)
    grant(
        bs,
        acl(ResourceType.GROUP, "kp-g", AclOperation.READ),
        acl(ResourceType.TOPIC, "kp-secret", AclOperation.DESCRIBE),
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        kc = KafkaConsumer(
            "kp-secret",
            bootstrap_servers=bs,
            group_id="kp-g",
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="PLAIN",
            sasl_plain_username="alice",
            sasl_plain_password="alice-secret",
            auto_offset_reset="earliest",
        )
        try:
            with pytest.raises(TopicAuthorizationFailedError):
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline:
                    assert not kc.poll(timeout_ms=500)
        finally:
            kc.close()


@needs_java
def test_java_client_topic_authorization_exception(broker, tmp_path):
    from benches.peers.kafka import install

    tools = install()
    bs = broker.bootstrap_servers
    create_topics(bs, "java-secret")
    props = tmp_path / "alice.properties"
    props.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="alice" password="alice-secret";\n'
    )
    cmd = tools.tools_java(
        "org.apache.kafka.tools.ConsoleProducer",
        ["--bootstrap-server", bs, "--topic", "java-secret", "--producer.config", str(props)],
    )
    r = subprocess.run(cmd, input=b"one\n", capture_output=True, timeout=120)
    assert "TopicAuthorizationException" in r.stderr.decode(), r.stderr.decode()[-3000:]
    grant(bs, acl(ResourceType.GROUP, "java-g", AclOperation.READ))
    cmd = tools.tools_java(
        "org.apache.kafka.tools.consumer.ConsoleConsumer",
        [
            "--bootstrap-server",
            bs,
            "--topic",
            "java-secret",
            "--group",
            "java-g",
            "--from-beginning",
            "--max-messages",
            "1",
            "--timeout-ms",
            "20000",
            "--consumer.config",
            str(props),
        ],
    )
    r = subprocess.run(cmd, capture_output=True, timeout=120)
    assert "TopicAuthorizationException" in r.stderr.decode(), r.stderr.decode()[-3000:]


def test_denials_are_not_logged_at_info(broker, caplog):
    import logging

    caplog.set_level(logging.DEBUG, logger="logbroker.authorizer")
    bs = broker.bootstrap_servers
    create_topics(bs, "quiet")
    produce(rd(bs, "alice"), "quiet", 1)
    denials = [r for r in caplog.records if r.name == "logbroker.authorizer"]
    assert denials and {r.levelno for r in denials} == {logging.DEBUG}
    assert any("User:alice" in r.getMessage() and "quiet" in r.getMessage() for r in denials)
