"""What authentication and authorization cost logbroker's data path: librdkafka produces
100,000 records of 1 KiB (acks=1) to one broker and consumes them back, on a PLAINTEXT
listener without an authorizer, and on a SASL_PLAINTEXT listener (SCRAM-SHA-512) with
ACLs enforced (StandardAuthorizer rules, 200 ACLs, the client allowed by a prefixed one
that is checked on every Produce and Fetch). Also the cost of opening a connection: a
PLAINTEXT connection with ApiVersions against a SCRAM-SHA-512 login (two round trips
through the broker's Python handlers). Medians of 3 rounds.

Run: python -m pytest benches/bench_sasl.py --benchmark-only
"""

from __future__ import annotations

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from rdkafka_load import consume, produce  # benches/ is on sys.path (benches/conftest.py)

import logbroker
from logbroker.client.connection import BrokerConnection

N = 100_000
VALUE = b"x" * 1024
JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="admin-secret";'
ADMIN = {
    "security.protocol": "SASL_PLAINTEXT",
    "sasl.mechanism": "PLAIN",
    "sasl.username": "admin",
    "sasl.password": "admin-secret",
}
ALICE = {
    "security.protocol": "SASL_PLAINTEXT",
    "sasl.mechanism": "SCRAM-SHA-512",
    "sasl.username": "alice",
    "sasl.password": "alice-secret",
}


def _secure(bs: str) -> None:
    """alice, a SCRAM user, may write and read topics `p-*`/`c` and use any group; 200 other
    ACLs name other principals."""
    admin = AdminClient({"bootstrap.servers": bs, **ADMIN})
    up = UserScramCredentialUpsertion("alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"alice-secret")
    for fut in admin.alter_user_scram_credentials([up]).values():
        fut.result(30)
    acls = [
        AclBinding(
            ResourceType.TOPIC,
            f"other-{i}",
            ResourcePatternType.LITERAL,
            f"User:u{i}",
            "*",
            AclOperation.READ,
            AclPermissionType.ALLOW,
        )
        for i in range(200)
    ]
    for name, pattern in [("p-", ResourcePatternType.PREFIXED), ("c", ResourcePatternType.LITERAL)]:
        acls.append(
            AclBinding(ResourceType.TOPIC, name, pattern, "User:alice", "*", AclOperation.ALL, AclPermissionType.ALLOW)
        )
    acls.append(
        AclBinding(
            ResourceType.GROUP,
            "*",
            ResourcePatternType.LITERAL,
            "User:alice",
            "*",
            AclOperation.READ,
            AclPermissionType.ALLOW,
        )
    )
    acls.append(
        AclBinding(
            ResourceType.BROKER,
            "kafka-cluster",
            ResourcePatternType.LITERAL,
            "User:alice",
            "*",
            AclOperation.CREATE,
            AclPermissionType.ALLOW,
        )
    )
    for fut in admin.create_acls(acls).values():
        fut.result(30)


@pytest.fixture(scope="module", params=["PLAINTEXT", "SASL_SCRAM+ACLs"])
def broker(request, tmp_path_factory):
    d = tmp_path_factory.mktemp(request.param)
    if request.param == "PLAINTEXT":
        with logbroker.Broker(data_dir=d / "data") as b:
            yield request.param, b.bootstrap_servers, {}
        return
    config = {
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin",
    }
    with logbroker.Broker(data_dir=d / "data", listener="SASL_PLAINTEXT", config=config) as b:
        _secure(b.bootstrap_servers)
        yield request.param, b.bootstrap_servers, ALICE


def test_produce(benchmark, broker):
    name, bs, conf = broker
    admin = AdminClient({"bootstrap.servers": bs, **conf})
    round_no = [0]

    def run():
        round_no[0] += 1
        topic = f"p-{round_no[0]}"
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
        produce(bs, conf, topic, N, VALUE)

    benchmark.pedantic(run, rounds=3, iterations=1)
    benchmark.extra_info["listener"] = name
    benchmark.extra_info["MB_per_s"] = N * len(VALUE) / 1e6 / benchmark.stats.stats.median


def test_consume(benchmark, broker):
    name, bs, conf = broker
    admin = AdminClient({"bootstrap.servers": bs, **conf})
    admin.create_topics([NewTopic("c", 1, 1)])["c"].result(30)
    produce(bs, conf, "c", N, VALUE)
    round_no = [0]

    def run():
        round_no[0] += 1
        consume(bs, conf, "c", f"g{round_no[0]}", N)

    benchmark.pedantic(run, rounds=3, iterations=1)
    benchmark.extra_info["listener"] = name
    benchmark.extra_info["MB_per_s"] = N * len(VALUE) / 1e6 / benchmark.stats.stats.median


def test_connect(benchmark, broker):
    """100 connections opened one after another: connect, ApiVersions and (SASL) the login."""
    name, bs, conf = broker
    props = dict(conf)

    def run():
        for _ in range(100):
            BrokerConnection(bs, config=props or None).close()

    benchmark.pedantic(run, rounds=3, iterations=1)
    benchmark.extra_info["listener"] = name
    benchmark.extra_info["ms_per_connection"] = benchmark.stats.stats.median * 1000 / 100
