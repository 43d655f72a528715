"""Several client listeners on one broker (Kafka's `listeners` with names mapped to security
protocols): each listener's clients are told that listener's addresses in Metadata,
FindCoordinator and DescribeCluster, so a client that bootstraps on the SASL listener stays
on it; SASL is asked only where the listener says so; brokers of a cluster reach each other
on the inter-broker listener (PLAINTEXT) while clients authenticate on another; the web
console runs beside secured listeners (asking for a login, as one is SASL); a restart keeps
every listener's port."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient
from conftest import rdkafka_values, wait_until
from replication_helpers import FAST, full_isr
from test_tls import Pki

import logbroker

JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'user_admin="admin-secret" user_alice="alice-secret";'
)


def sasl(bs: str, **extra) -> dict:
    return {
        "bootstrap.servers": bs,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "alice",
        "sasl.password": "alice-secret",
        **extra,
    }


def roundtrip(conf: dict, topic: str, n: int = 100) -> list[bytes]:
    p = Producer({**conf, "acks": "all"})
    for i in range(n):
        p.produce(topic, b"%d" % i)
    assert p.flush(30) == 0
    return sorted(rdkafka_values({**conf, "group.id": f"g-{topic}"}, topic, n), key=int)


def expected(n: int = 100) -> list[bytes]:
    return [b"%d" % i for i in range(n)]


def ports_in_metadata(conf: dict) -> set[int]:
    md = AdminClient(conf).list_topics(timeout=15)
    return {b.port for b in md.brokers.values()}


def test_one_broker_three_listeners(tmp_path: Path):
    pki = Pki(tmp_path)
    config = {
        "listeners": "INTERNAL://127.0.0.1:0,EXTERNAL://127.0.0.1:0,SECURE://127.0.0.1:0",
        "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:SASL_PLAINTEXT,SECURE:SSL",
        "inter.broker.listener.name": "INTERNAL",
        "listener.name.external.plain.sasl.jaas.config": JAAS,
        "ssl.keystore.location": str(pki.keystore),
        "console.listen": "127.0.0.1:0",
    }
    with logbroker.Broker(data_dir=tmp_path / "d", config=config) as b:
        internal, external, secure = b.bootstrap("INTERNAL"), b.bootstrap("EXTERNAL"), b.bootstrap("SECURE")
        assert b.bootstrap_servers == internal
        plain = {"bootstrap.servers": internal}
        tls = {"bootstrap.servers": secure, "security.protocol": "SSL", "ssl.ca.location": str(pki.ca_pem)}
        # Each listener's clients are told that listener's port.
        assert ports_in_metadata(plain) == {int(internal.rsplit(":", 1)[1])}
        assert ports_in_metadata(sasl(external)) == {int(external.rsplit(":", 1)[1])}
        assert ports_in_metadata(tls) == {int(secure.rsplit(":", 1)[1])}
        # And each carries records (a consumer group's coordinator is found on the same listener).
        assert roundtrip(plain, "on-internal") == expected()
        assert roundtrip(sasl(external), "on-external") == expected()
        assert roundtrip(tls, "on-secure") == expected()
        # SASL is asked on EXTERNAL only: a wrong password fails there, PLAINTEXT needs none.
        errors: list = []
        p = Producer(sasl(external, **{"sasl.password": "wrong", "error_cb": errors.append}))
        wait_until(
            lambda: p.poll(0.1) is not None and any(e.code() == KafkaError._AUTHENTICATION for e in errors),
            timeout=10,
            what="an authentication error on EXTERNAL",
        )
        # The console runs beside the secured listeners and, as the broker has a SASL listener,
        # asks for a login: a user of EXTERNAL, whose requests then go to EXTERNAL as that user.
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(b.console_url + "api/topics", timeout=10)
        e.value.close()
        assert e.value.code == 401
        login = urllib.request.Request(
            b.console_url + "api/login",
            method="POST",
            headers={"Content-Type": "application/json"},
            data=json.dumps({"username": "alice", "password": "alice-secret"}).encode(),
        )
        with urllib.request.urlopen(login, timeout=10) as r:
            cookie = r.headers["Set-Cookie"].split(";")[0]
        topics = urllib.request.Request(b.console_url + "api/topics", headers={"Cookie": cookie})
        with urllib.request.urlopen(topics, timeout=10) as r:
            assert b"on-external" in r.read()
        # A restart keeps every listener on its port.
        b.restart()
        assert b.bootstrap("EXTERNAL") == external and b.bootstrap("SECURE") == secure
        assert roundtrip(sasl(external), "after-restart") == expected()


def test_cluster_with_a_sasl_listener_for_clients(tmp_path: Path):
    config = {
        **FAST,
        "offsets.topic.replication.factor": 3,
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
    }
    with logbroker.Cluster(3, data_dir=tmp_path / "c", config=config, listeners=["SASL_PLAINTEXT"]) as cluster:
        bs = cluster.bootstrap("SASL_PLAINTEXT")
        ports = {int(a.rsplit(":", 1)[1]) for a in bs.split(",")}
        assert ports_in_metadata(sasl(bs)) == ports
        admin = AdminClient(sasl(bs))
        from confluent_kafka.admin import NewTopic

        admin.create_topics([NewTopic("replicated", 3, 3)])["replicated"].result(30)
        assert roundtrip(sasl(bs), "replicated", 300) == expected(300)
        # The brokers replicate over PLAINTEXT among themselves: a follower's leader fails, the
        # SASL clients go on with the new leader.
        full_isr(cluster, "replicated", 3)
        full_isr(cluster, "__consumer_offsets", 50)
        md = admin.list_topics("replicated", timeout=15)
        leader = md.topics["replicated"].partitions[0].leader
        cluster.node(leader).kill()
        p = Producer({**sasl(bs), "acks": "all"})
        for i in range(300, 400):
            p.produce("replicated", b"%d" % i)
        assert p.flush(60) == 0
        c = Consumer({**sasl(bs), "group.id": "after-kill", "auto.offset.reset": "earliest"})
        c.subscribe(["replicated"])
        got: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(got) < 400 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got.append(m.value())
        c.close()
        assert sorted(got, key=int) == expected(400)


@pytest.mark.parametrize(
    "settings,message",
    [
        (
            {
                "listeners": "A://127.0.0.1:0,B://127.0.0.1:0",
                "listener.security.protocol.map": "A:PLAINTEXT,B:SSL",
                "inter.broker.listener.name": "C",
            },
            "inter.broker.listener.name=C",
        ),
        ({"listeners": "A://127.0.0.1:0,A://127.0.0.1:0"}, "appears twice"),
        (
            {"listeners": "A://127.0.0.1:0,B://127.0.0.1:0", "listener.security.protocol.map": "A:PLAINTEXT,B:SSL"},
            "listener B",
        ),  # SSL without a keystore
    ],
)
def test_bad_listener_settings_stop_the_start(tmp_path, settings, message):
    with pytest.raises(Exception) as e:
        with logbroker.Broker(data_dir=tmp_path / "d", config=settings):
            pass
    assert message in str(e.value)
