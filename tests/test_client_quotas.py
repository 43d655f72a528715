"""Client quotas (KIP-13/55/124): the ClientQuota records, DescribeClientQuotas and
AlterClientQuotas over the wire with Kafka's errors, logbroker's Admin, Kafka's own
kafka-configs, a restart, a three-node cluster, and the throttling itself: a producer and a
consumer over their byte rates run near the quota and see throttle times, a client over its
request_percentage is held to it on the Python handlers' APIs and on Produce, and a client id
without a quota is not."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import kafka_configs, needs_java
from rawclient import RawClient

from logbroker import Broker, Cluster
from logbroker.client import Admin, NewTopic
from logbroker.client.errors import InvalidRequestError
from logbroker.coord.metadata import client_quotas
from logbroker.coord.metadata.metadata import MetadataImage
from logbroker.coord.metadata.metadata_records import (
    MetadataRecordError,
    apply,
    diff_records,
    encode_record,
    load_snapshot,
    snapshot,
)
from logbroker.protocol import REQUESTS, ErrorCode

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

Describe, Alter = REQUESTS[48], REQUESTS[49]
ALICE = (("user", "alice"),)
FAST_WINDOWS = {"quota.window.num": "3", "quota.window.size.seconds": "1"}  # a 2 s burst allowance


def image() -> MetadataImage:
    return MetadataImage("c", 1, {}, {})


# --- metadata records ------------------------------------------------------------------


def test_records_apply_diff_and_snapshot():
    im = image()
    apply(
        im,
        encode_record("ClientQuota", entity=[["user", "alice"]], key="producer_byte_rate", value=1024.0, remove=False),
    )
    apply(
        im,
        encode_record(
            "ClientQuota",
            entity=[["client-id", None], ["user", None]],
            key="consumer_byte_rate",
            value=2048.0,
            remove=False,
        ),
    )
    assert im.client_quotas == {
        ALICE: {"producer_byte_rate": 1024.0},
        (("client-id", None), ("user", None)): {"consumer_byte_rate": 2048.0},
    }
    again = load_snapshot(snapshot(im), 1)
    assert again.client_quotas == im.client_quotas
    rebuilt = image()
    for rec in diff_records(image(), im):
        apply(rebuilt, rec)
    assert rebuilt.client_quotas == im.client_quotas
    apply(
        im, encode_record("ClientQuota", entity=[["user", "alice"]], key="producer_byte_rate", value=0.0, remove=True)
    )
    assert ALICE not in im.client_quotas, "an entity with no key left goes"
    for bad in ([["group", "g"]], [], [["user", ""]]):
        with pytest.raises(MetadataRecordError):
            apply(im, encode_record("ClientQuota", entity=bad, key="producer_byte_rate", value=1.0, remove=False))
    with pytest.raises(MetadataRecordError, match="must be greater than 0"):
        apply(
            im, encode_record("ClientQuota", entity=[["user", "a"]], key="producer_byte_rate", value=-1.0, remove=False)
        )


# --- the APIs over the wire --------------------------------------------------------------


def alter_raw(c: RawClient, entries, validate_only=False, version=1) -> list[tuple[int, str | None]]:
    body = Alter(
        validate_only=validate_only,
        entries=[
            Alter.EntryData(
                entity=[Alter.EntityData(entity_type=t, entity_name=n) for t, n in entity],
                ops=[Alter.OpData(key=k, value=v, remove=r) for k, v, r in ops],
            )
            for entity, ops in entries
        ],
    )
    return [(e.error_code, e.error_message) for e in c.request(49, version, body).entries]


def describe_raw(c: RawClient, components=(), strict=False, version=1):
    return c.request(
        48,
        version,
        Describe(
            strict=strict,
            components=[Describe.ComponentData(entity_type=t, match_type=m, match=n) for t, m, n in components],
        ),
    )


def test_admin_round_trip_filters_and_validate_only(tmp_path):
    with Broker(data_dir=tmp_path / "d") as b, Admin(b.bootstrap_servers) as admin:
        admin.alter_client_quotas(
            [
                ({"user": "alice"}, {"producer_byte_rate": 1024, "consumer_byte_rate": 2048}),
                ({"user": "alice", "client-id": "app"}, {"producer_byte_rate": 512}),
                ({"client-id": None}, {"consumer_byte_rate": 4096}),
                ({"user": None}, {"producer_byte_rate": 100}),
            ]
        )
        every = admin.describe_client_quotas()
        assert every == {
            ALICE: {"producer_byte_rate": 1024.0, "consumer_byte_rate": 2048.0},
            (("client-id", "app"), ("user", "alice")): {"producer_byte_rate": 512.0},
            (("client-id", None),): {"consumer_byte_rate": 4096.0},
            (("user", None),): {"producer_byte_rate": 100.0},
        }
        assert set(admin.describe_client_quotas([("user", "exact", "alice")])) == {
            ALICE,
            (("client-id", "app"), ("user", "alice")),
        }
        assert set(admin.describe_client_quotas([("user", "exact", "alice")], strict=True)) == {ALICE}
        assert set(admin.describe_client_quotas([("user", "default", None)])) == {(("user", None),)}
        assert set(admin.describe_client_quotas([("client-id", "any", None)])) == {
            (("client-id", "app"), ("user", "alice")),
            (("client-id", None),),
        }
        assert set(admin.describe_client_quotas([("client-id", "any", None)], strict=True)) == {(("client-id", None),)}

        admin.alter_client_quotas([({"user": "bob"}, {"producer_byte_rate": 1})], validate_only=True)
        assert (("user", "bob"),) not in admin.describe_client_quotas(), "validate_only stores nothing"

        # the network thread has them (Kafka's precedence)
        core = b.server.partition_table.client_quotas
        assert core.quota_for("produce", "alice", "app") == 512.0
        assert core.quota_for("produce", "alice", "other") == 1024.0
        assert core.quota_for("produce", "carol", "x") == 100.0
        assert core.quota_for("fetch", "carol", "x") == 4096.0

        admin.alter_client_quotas(
            [
                ({"user": "alice"}, {"producer_byte_rate": None}),
                ({"user": "alice", "client-id": "app"}, {"producer_byte_rate": None, "consumer_byte_rate": None}),
            ]
        )
        assert admin.describe_client_quotas([("user", "exact", "alice")]) == {ALICE: {"consumer_byte_rate": 2048.0}}
        assert core.quota_for("produce", "alice", "app") == 100.0, "now the <default> user's"


def test_bad_input_is_refused_with_kafkas_errors_and_changes_nothing(tmp_path):
    with Broker(data_dir=tmp_path / "d") as b, RawClient(b.bootstrap_servers) as c:
        assert alter_raw(c, [([("user", "alice")], [("producer_byte_rate", 1000.0, False)])]) == [(0, None)]
        before = dict(b.server.controller.image.client_quotas)
        cases = [
            ([("group", "g")], [("producer_byte_rate", 1.0, False)], "Unhandled client quota entity type: group"),
            ([], [("producer_byte_rate", 1.0, False)], "Invalid empty client quota entity"),
            ([("user", "")], [("producer_byte_rate", 1.0, False)], "Empty user not supported"),
            ([("user", "a"), ("user", "b")], [("producer_byte_rate", 1.0, False)], "duplicate entity entry user"),
            ([("user", "alice")], [("producer_byte_rate", -5.0, False)], "producer_byte_rate must be greater than 0"),
            ([("user", "alice")], [("producer_byte_rate", 0.0, False)], "must be greater than 0"),
            ([("user", "alice")], [("producer_byte_rate", 10.5, False)], "cannot be a fractional value"),
            ([("user", "alice")], [("no_such_key", 1.0, False)], "Invalid configuration key no_such_key"),
            (
                [("user", "alice")],
                [("controller_mutation_rate", 5.0, False)],
                "controller_mutation_rate is not enforced",
            ),
            ([("user", "alice")], [("request_percentage", 0.0, False)], "request_percentage must be greater than 0"),
            ([("user", "alice")], [("request_percentage", -1.5, False)], "request_percentage must be greater than 0"),
            ([("ip", "10.0.0.1")], [("connection_creation_rate", 5.0, False)], "ip quota entities"),
            (
                [("user", "alice")],
                [("consumer_byte_rate", 1.0, False), ("consumer_byte_rate", 2.0, False)],
                "Duplicate quota key consumer_byte_rate",
            ),
        ]
        for entity, ops, message in cases:
            [(code, text)] = alter_raw(c, [(entity, ops)])
            assert code == ErrorCode.INVALID_REQUEST and message in text, (entity, ops, text)
        # a refused entry does not stop the good one beside it; an entity twice is refused both times
        got = alter_raw(
            c, [([("user", "bob")], [("consumer_byte_rate", 10.0, False)]), ([("user", "x")], [("nope", 1.0, False)])]
        )
        assert got[0] == (0, None) and got[1][0] == ErrorCode.INVALID_REQUEST
        twice = alter_raw(
            c,
            [
                ([("user", "z")], [("consumer_byte_rate", 10.0, False)]),
                ([("user", "z")], [("producer_byte_rate", 10.0, False)]),
            ],
        )
        assert [code for code, _m in twice] == [ErrorCode.INVALID_REQUEST] * 2 and "duplicate entity" in twice[0][1]
        after = dict(b.server.controller.image.client_quotas)
        assert after == {**before, (("user", "bob"),): {"consumer_byte_rate": 10.0}}
        # request_percentage is Kafka's DOUBLE key: a fraction, or more than one thread (> 100), is taken
        assert alter_raw(c, [([("user", "bob")], [("request_percentage", 12.5, False)])]) == [(0, None)]
        assert alter_raw(c, [([("client-id", None)], [("request_percentage", 250.0, False)])]) == [(0, None)]
        quotas = b.server.controller.image.client_quotas
        assert quotas[(("user", "bob"),)] == {"consumer_byte_rate": 10.0, "request_percentage": 12.5}
        assert quotas[(("client-id", None),)] == {"request_percentage": 250.0}
        [entry] = [e for e in describe_raw(c, [("user", 0, "bob")], strict=True).entries]
        assert {v.key: v.value for v in entry.values} == {"consumer_byte_rate": 10.0, "request_percentage": 12.5}

        for comps, code, message in [
            ([("group", 0, "g")], ErrorCode.UNSUPPORTED_VERSION, "Unsupported entity type group"),
            ([("user", 0, None)], ErrorCode.INVALID_REQUEST, "MATCH_TYPE_EXACT, but set match string to null"),
            ([("user", 1, "x")], ErrorCode.INVALID_REQUEST, "MATCH_TYPE_DEFAULT, but also specified"),
            ([("user", 2, "x")], ErrorCode.INVALID_REQUEST, "MATCH_TYPE_SPECIFIED, but also specified"),
            ([("user", 7, None)], ErrorCode.INVALID_REQUEST, "Unknown match type 7"),
            ([("user", 2, None), ("user", 1, None)], ErrorCode.INVALID_REQUEST, "cannot appear more than once"),
            ([("ip", 2, None), ("user", 2, None)], ErrorCode.INVALID_REQUEST, "IP filter component"),
        ]:
            for version in (0, 1):
                r = describe_raw(c, comps, version=version)
                assert (r.error_code, r.entries) == (code, None) and message in r.error_message, (comps, r)
        with Admin(b.bootstrap_servers) as admin, pytest.raises(InvalidRequestError, match="must be greater than 0"):
            admin.alter_client_quotas([({"client-id": "c"}, {"consumer_byte_rate": -1})])


def test_authorization_as_kafka(tmp_path):
    config = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"}
    with Broker(data_dir=tmp_path / "d", config=config) as b, RawClient(b.bootstrap_servers) as c:
        r = describe_raw(c)
        assert r.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED and r.entries is None
        assert alter_raw(c, [([("user", "a")], [("producer_byte_rate", 1.0, False)])]) == [
            (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
        ]
        assert b.server.controller.image.client_quotas == {}


def test_quotas_survive_a_restart(tmp_path):
    with Broker(data_dir=tmp_path / "d") as b, Admin(b.bootstrap_servers) as admin:
        admin.alter_client_quotas([({"user": "alice", "client-id": None}, {"consumer_byte_rate": 300})])
    with Broker(data_dir=tmp_path / "d") as b, Admin(b.bootstrap_servers) as admin:
        assert admin.describe_client_quotas() == {(("client-id", None), ("user", "alice")): {"consumer_byte_rate": 300}}
        assert b.server.partition_table.client_quotas.quota_for("fetch", "alice", "any") == 300.0


def test_cluster_forwards_and_every_node_has_them(tmp_path):
    from conftest import wait_until

    with Cluster(3, data_dir=tmp_path) as cluster:
        controller = cluster.controller_id()
        other = next(n for n in cluster.nodes if n.node_id != controller)
        with Admin(other.bootstrap_servers) as admin:  # not the active controller: forwarded
            admin.alter_client_quotas([({"client-id": "app"}, {"producer_byte_rate": 5000})])
        for n in cluster.nodes:
            with Admin(n.bootstrap_servers) as admin:
                assert wait_until(
                    lambda: admin.describe_client_quotas() == {(("client-id", "app"),): {"producer_byte_rate": 5000.0}},
                    timeout=10,
                    what=f"node {n.node_id}",
                )

        # followers are not throttled: a tiny consumer quota for every user and client id
        # leaves replication (acks=all) at full speed
        with Admin(other.bootstrap_servers) as admin:
            admin.alter_client_quotas(
                [({"client-id": None}, {"consumer_byte_rate": 100}), ({"user": None}, {"consumer_byte_rate": 100})]
            )
            admin.create_topics([NewTopic("replicated", num_partitions=1, replication_factor=3)])
        for n in cluster.nodes:
            with Admin(n.bootstrap_servers) as admin:
                assert wait_until(
                    lambda: len(admin.describe_client_quotas()) == 3, timeout=10, what=f"node {n.node_id}"
                )
        from confluent_kafka import Producer

        p = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "client.id": "loader"})
        start = time.monotonic()
        for _ in range(200):
            p.produce("replicated", b"r" * 10_000)
        assert p.flush(30) == 0
        assert time.monotonic() - start < 10, "2 MB replicated at 100 B/s would take hours"


def quota_cli(bs: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "logbroker", "quota", "--bootstrap-server", bs, *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_logbroker_quota_cli(tmp_path):
    with Broker(data_dir=tmp_path / "d") as b:
        bs = b.bootstrap_servers
        r = quota_cli(bs, "set", "--user", "alice", "--producer-byte-rate", "1024", "--consumer-byte-rate", "2048")
        assert r.returncode == 0 and "user=alice: producer_byte_rate=1024, consumer_byte_rate=2048" in r.stdout, r
        assert quota_cli(bs, "set", "--client-id-default", "--producer-byte-rate", "10").returncode == 0
        out = quota_cli(bs, "list").stdout.splitlines()
        assert out[0].split() == ["USER", "CLIENT-ID", "KEY", "VALUE"]
        assert [line.split() for line in out[1:]] == [
            ["-", "<default>", "producer_byte_rate", "10"],
            ["alice", "-", "consumer_byte_rate", "2048"],
            ["alice", "-", "producer_byte_rate", "1024"],
        ]
        assert len(quota_cli(bs, "list", "--user", "alice").stdout.splitlines()) == 3
        r = quota_cli(bs, "set", "--user", "alice", "--producer-byte-rate", "-1")
        assert r.returncode == 2 and "must be greater than 0" in r.stderr
        r = quota_cli(bs, "set", "--producer-byte-rate", "5")
        assert r.returncode == 2 and "name an entity" in r.stderr
        r = quota_cli(bs, "remove", "--user", "alice", "--key", "producer_byte_rate")
        assert r.returncode == 0 and "removed producer_byte_rate" in r.stdout
        assert quota_cli(bs, "remove", "--user", "alice").returncode == 0
        assert b.server.controller.image.client_quotas == {(("client-id", None),): {"producer_byte_rate": 10.0}}


# --- throttling ----------------------------------------------------------------------------


def produce_for(
    bs: str, topic: str, client_id: str, total: int, size: int = 10_000, conf: dict | None = None
) -> tuple[float, list[int]]:
    """Seconds to produce `total` bytes with librdkafka, and the throttle times it was told."""
    from confluent_kafka import Producer

    throttles: list[int] = []
    p = Producer(
        {
            "bootstrap.servers": bs,
            "client.id": client_id,
            "linger.ms": 5,
            "batch.size": 64_000,
            "throttle_cb": lambda ev: throttles.append(int(ev.throttle_time * 1000)),
            **(conf or {}),
        }
    )
    payload = b"x" * size
    start = time.monotonic()
    for _ in range(total // size):
        while True:
            try:
                p.produce(topic, payload)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    assert p.flush(60) == 0
    elapsed = time.monotonic() - start
    p.poll(0.2)
    return elapsed, throttles


def test_producer_over_its_quota_is_throttled_and_others_are_not(tmp_path):
    quota = 400_000
    total = 3_200_000
    with (
        Broker(data_dir=tmp_path / "d", config=FAST_WINDOWS, metrics_listen="127.0.0.1:0") as b,
        Admin(b.bootstrap_servers) as admin,
    ):
        admin.create_topics(["q"])
        admin.alter_client_quotas([({"client-id": "slow"}, {"producer_byte_rate": quota})])
        elapsed, throttles = produce_for(b.bootstrap_servers, "q", "slow", total)
        rate = total / elapsed
        assert 0.3 * quota < rate < 2 * quota, f"{rate:.0f} B/s against a quota of {quota}"
        assert throttles and max(throttles) > 0, "librdkafka was told of throttling"
        stats = b.server.partition_table.client_quotas.stats()
        assert stats["produce_throttled"] > 0 and stats["produce_throttle_ms"] > 0
        from test_metrics import scrape, value

        m = scrape(b.metrics_url)
        assert value(m, "logbroker_quota_throttled_total", quota="produce") == stats["produce_throttled"]
        assert value(m, "logbroker_quota_throttle_time_ms_total", quota="produce") == stats["produce_throttle_ms"]
        assert value(m, "logbroker_quota_throttled_total", quota="fetch") == 0

        fast_elapsed, fast_throttles = produce_for(b.bootstrap_servers, "q", "fast", total)
        assert not any(fast_throttles), "no quota for this client id"
        assert fast_elapsed < elapsed / 2, (fast_elapsed, elapsed)


def test_a_sasl_users_quota_follows_the_user_not_the_client_id(tmp_path):
    """A quota on users=alice: alice's producer is held near it whatever its client id, and
    bob, authenticated on the same SASL listener with the same client id, is not."""
    quota, total = 400_000, 3_200_000
    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-pw" user_bob="bob-pw";'
    config = {**FAST_WINDOWS, "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas}

    def sasl(user: str) -> dict:
        return {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": user,
            "sasl.password": f"{user}-pw",
        }

    with (
        Broker(data_dir=tmp_path / "d", listener="SASL_PLAINTEXT", config=config) as b,
        Admin(b.bootstrap_servers, **sasl("alice")) as admin,
    ):
        admin.create_topics(["q"])
        admin.alter_client_quotas([({"user": "alice"}, {"producer_byte_rate": quota})])
        elapsed, throttles = produce_for(b.bootstrap_servers, "q", "shared-id", total, conf=sasl("alice"))
        rate = total / elapsed
        assert 0.3 * quota < rate < 2 * quota, f"alice at {rate:.0f} B/s against a quota of {quota}"
        assert throttles and max(throttles) > 0
        bob_elapsed, bob_throttles = produce_for(b.bootstrap_servers, "q", "shared-id", total, conf=sasl("bob"))
        assert not any(bob_throttles), "bob has no quota"
        assert bob_elapsed < elapsed / 2, (bob_elapsed, elapsed)


def test_consumer_over_its_quota_is_throttled(tmp_path):
    from confluent_kafka import Consumer

    quota = 400_000
    total = 3_200_000
    with Broker(data_dir=tmp_path / "d", config=FAST_WINDOWS) as b, Admin(b.bootstrap_servers) as admin:
        admin.create_topics(["q"])
        produce_for(b.bootstrap_servers, "q", "loader", total)
        admin.alter_client_quotas([({"user": "ANONYMOUS", "client-id": "slowreader"}, {"consumer_byte_rate": quota})])

        def consume(client_id: str) -> tuple[float, list[int]]:
            throttles: list[int] = []
            c = Consumer(
                {
                    "bootstrap.servers": b.bootstrap_servers,
                    "group.id": client_id,
                    "client.id": client_id,
                    "auto.offset.reset": "earliest",
                    "enable.auto.commit": False,
                    "throttle_cb": lambda ev: throttles.append(int(ev.throttle_time * 1000)),
                }
            )
            c.subscribe(["q"])
            got, start = 0, None
            deadline = time.monotonic() + 60
            while got < total and time.monotonic() < deadline:
                m = c.poll(0.5)
                if m is not None and not m.error():
                    start = start or time.monotonic()
                    got += len(m.value())
            elapsed = time.monotonic() - (start or time.monotonic())
            c.close()
            assert got >= total, f"{client_id} read {got} of {total} bytes"
            return elapsed, throttles

        elapsed, throttles = consume("slowreader")
        rate = total / elapsed
        assert 0.3 * quota < rate < 2 * quota, f"{rate:.0f} B/s against a quota of {quota}"
        assert throttles and max(throttles) > 0
        assert b.server.partition_table.client_quotas.stats()["fetch_throttled"] > 0
        fast_elapsed, fast_throttles = consume("reader")
        assert not any(fast_throttles) and fast_elapsed < elapsed / 2, (fast_elapsed, elapsed)


def hammer(bs: str, client_id: str, seconds: float, api_key: int, version: int, body) -> tuple[float, list[int]]:
    """Sends `body` back to back on one connection for `seconds` (a client that ignores
    throttle times, so only the broker's muting holds it); requests per second and the
    throttle times the responses carried."""
    throttles: list[int] = []
    with RawClient(bs, client_id=client_id) as c:
        start = time.monotonic()
        while time.monotonic() - start < seconds:
            r = c.request(api_key, version, body)
            assert getattr(r, "error_code", 0) == 0, r
            throttles.append(r.throttle_time_ms)
        return len(throttles) / (time.monotonic() - start), throttles


def test_request_percentage_holds_a_busy_client_and_not_others(tmp_path):
    """KIP-124: a client id with a small request_percentage, issuing requests as fast as it can,
    is answered with throttle times and muted, on an API the Python handlers serve (Metadata) and
    on one the network thread serves (Produce); the same requests from another client id run
    unthrottled, many times faster. The throttle time is at most one window, as in Kafka."""
    Metadata, Produce = REQUESTS[3], REQUESTS[0]
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benches"))
    from batches import build_batch

    percent = 0.05  # 0.5 ms of handling per second
    with (
        Broker(data_dir=tmp_path / "d", config=FAST_WINDOWS, metrics_listen="127.0.0.1:0") as b,
        Admin(b.bootstrap_servers) as admin,
    ):
        bs = b.bootstrap_servers
        admin.create_topics(["q"])
        admin.alter_client_quotas([({"client-id": "busy"}, {"request_percentage": percent})])
        core = b.server.partition_table.client_quotas
        assert core.request_quota_enabled and core.quota_for("request", "ANONYMOUS", "busy") == percent
        assert core.quota_for("request", "ANONYMOUS", "calm") is None
        metadata = Metadata(topics=[Metadata.MetadataRequestTopic(name="q")], allow_auto_topic_creation=False)
        produce = Produce(
            transactional_id=None,
            acks=1,
            timeout_ms=5000,
            topic_data=[
                Produce.TopicProduceData(
                    name="q", partition_data=[Produce.PartitionProduceData(index=0, records=build_batch([b"x" * 100]))]
                )
            ],
        )
        for name, api_key, version, body in [("Metadata", 3, 12, metadata), ("Produce", 0, 9, produce)]:
            busy_rate, busy_throttles = hammer(bs, "busy", 4.0, api_key, version, body)
            calm_rate, calm_throttles = hammer(bs, "calm", 1.0, api_key, version, body)
            print(f"{name}: busy {busy_rate:.0f}/s (throttles up to {max(busy_throttles)} ms), calm {calm_rate:.0f}/s")
            assert max(busy_throttles) > 0, f"{name}: the busy client was told of throttling"
            assert max(busy_throttles) <= 1000, f"{name}: a request throttle is at most one window"
            assert not any(calm_throttles), f"{name}: no quota for this client id"
            assert busy_rate * 4 < calm_rate, f"{name}: busy {busy_rate:.0f}/s, calm {calm_rate:.0f}/s"
        stats = core.stats()
        assert stats["request_throttled"] > 0 and stats["request_throttle_ms"] > 0
        from test_metrics import scrape, value

        assert value(scrape(b.metrics_url), "logbroker_quota_throttled_total", quota="request") > 0
        # removed: nothing is timed any more, and the busy client runs free
        admin.alter_client_quotas([({"client-id": "busy"}, {"request_percentage": None})])
        assert not core.request_quota_enabled
        assert b.server.client_quotas.request_times is None
        time.sleep(1.1)  # a mute from the last throttle has passed
        _rate, throttles = hammer(bs, "busy", 0.5, 3, 12, metadata)
        assert not any(throttles)


# --- Kafka's tool ----------------------------------------------------------------------------


@needs_java
def test_kafka_configs_tool(tmp_path):
    from benches.peers.kafka import install

    tools = install()
    with Broker(data_dir=tmp_path / "d") as b:
        bs = b.bootstrap_servers
        kafka_configs(
            tools,
            bs,
            "--alter",
            "--add-config",
            "producer_byte_rate=1048576,consumer_byte_rate=2097152",
            "--entity-type",
            "users",
            "--entity-name",
            "alice",
        )
        kafka_configs(
            tools,
            bs,
            "--alter",
            "--add-config",
            "producer_byte_rate=1024",
            "--entity-type",
            "clients",
            "--entity-default",
        )
        kafka_configs(
            tools,
            bs,
            "--alter",
            "--add-config",
            "consumer_byte_rate=4096",
            "--entity-type",
            "users",
            "--entity-name",
            "alice",
            "--entity-type",
            "clients",
            "--entity-name",
            "app",
        )
        assert b.server.controller.image.client_quotas == {
            ALICE: {"producer_byte_rate": 1048576.0, "consumer_byte_rate": 2097152.0},
            (("client-id", None),): {"producer_byte_rate": 1024.0},
            (("client-id", "app"), ("user", "alice")): {"consumer_byte_rate": 4096.0},
        }
        out = kafka_configs(tools, bs, "--describe", "--entity-type", "users", "--entity-name", "alice")
        assert "Quota configs for user-principal 'alice' are" in out and "producer_byte_rate=1048576.0" in out, out
        out = kafka_configs(tools, bs, "--describe", "--entity-type", "clients", "--entity-default")
        assert "producer_byte_rate=1024.0" in out, out
        kafka_configs(
            tools,
            bs,
            "--alter",
            "--add-config",
            "request_percentage=50",
            "--entity-type",
            "clients",
            "--entity-name",
            "app2",
        )
        out = kafka_configs(tools, bs, "--describe", "--entity-type", "clients", "--entity-name", "app2")
        assert "Quota configs for client-id 'app2' are request_percentage=50.0" in out, out
        assert b.server.partition_table.client_quotas.quota_for("request", "anyone", "app2") == 50.0
        kafka_configs(
            tools,
            bs,
            "--alter",
            "--delete-config",
            "producer_byte_rate",
            "--entity-type",
            "users",
            "--entity-name",
            "alice",
        )
        assert b.server.controller.image.client_quotas[ALICE] == {"consumer_byte_rate": 2097152.0}
        cmd = tools.tools_java(
            "org.apache.kafka.tools.ConfigCommand",
            [
                "--bootstrap-server",
                bs,
                "--alter",
                "--add-config",
                "producer_byte_rate=-5",
                "--entity-type",
                "users",
                "--entity-name",
                "bob",
            ],
        )
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert r.returncode != 0 and "must be greater than 0" in r.stdout + r.stderr, r.stdout + r.stderr
        assert (("user", "bob"),) not in b.server.controller.image.client_quotas


def test_entity_names_in_messages():
    assert client_quotas.entity_name((("client-id", None), ("user", "alice"))) == "client-id=<default>, user=alice"
