"""The Prometheus endpoint (`metrics.listen`): real clients produce, consume and commit, then
the scrape is parsed with prometheus_client's own parser and checked against what was done;
in a three-node cluster a killed broker shows as under-replicated partitions and a leader
election, and its return as ISR expansions."""

from __future__ import annotations

import http.client
import time
import urllib.request
from urllib.parse import urlparse

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from conftest import wait_until
from prometheus_client.parser import text_string_to_metric_families
from replication_helpers import FAST, create, full_isr, layout

from logbroker import Broker, Cluster


def scrape(url: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """name -> [(labels, value)] for every sample of the exposition."""
    with urllib.request.urlopen(url, timeout=10) as r:
        assert r.status == 200 and r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = r.read().decode()
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


def value(m, name: str, **labels: object) -> float:
    want = {k: str(v) for k, v in labels.items()}
    found = [v for ls, v in m.get(name, []) if all(ls.get(k) == x for k, x in want.items())]
    assert len(found) == 1, (name, labels, m.get(name))
    return found[0]


def test_metrics_count_what_clients_did(tmp_path):
    with Broker(data_dir=tmp_path / "d", metrics_listen="127.0.0.1:0") as b:
        bs = b.bootstrap_servers
        p = Producer({"bootstrap.servers": bs, "linger.ms": 5, "compression.type": "none"})
        for _ in range(100):
            p.produce("m", value=b"v" * 100, partition=0)
        assert p.flush(10) == 0
        c = Consumer(
            {"bootstrap.servers": bs, "group.id": "mg", "enable.auto.commit": False, "auto.offset.reset": "earliest"}
        )
        c.assign([TopicPartition("m", 0, 0)])
        got = 0
        deadline = time.monotonic() + 20
        while got < 100 and time.monotonic() < deadline:
            msg = c.poll(0.2)
            if msg is not None and not msg.error():
                got += 1
        assert got == 100
        c.commit(offsets=[TopicPartition("m", 0, 60)], asynchronous=False)
        c.close()

        m = scrape(b.metrics_url)
        tp = {"topic": "m", "partition": 0}
        assert value(m, "kafka_server_brokertopicmetrics_messagesinpersec_total", **tp) == 100
        bytes_in = value(m, "kafka_server_brokertopicmetrics_bytesinpersec_total", **tp)
        assert bytes_in >= 100 * 100
        assert value(m, "kafka_server_brokertopicmetrics_bytesoutpersec_total", **tp) >= bytes_in
        assert value(m, "kafka_server_brokertopicmetrics_replicationbytesoutpersec_total", **tp) == 0
        assert value(m, "kafka_log_log_logendoffset", **tp) == 100
        assert value(m, "logbroker_log_highwatermark", **tp) == 100
        assert value(m, "kafka_log_log_logstartoffset", **tp) == 0
        assert value(m, "kafka_log_log_numlogsegments", **tp) == 1
        assert value(m, "kafka_log_log_size", **tp) == bytes_in  # one client's batches, stored as sent
        assert value(m, "kafka_consumergroup_current_offset", group="mg", **tp) == 60
        assert value(m, "kafka_consumergroup_lag", group="mg", **tp) == 40
        for request in ("Produce", "Fetch", "Metadata", "OffsetCommit", "ApiVersions"):
            n = value(m, "kafka_network_requestmetrics_requestspersec_total", request=request)
            assert n >= 1, request
            assert value(m, "kafka_network_requestmetrics_totaltimems_count", request=request) == n
            buckets = sorted(
                (
                    (float(ls["le"]), v)
                    for ls, v in m["kafka_network_requestmetrics_totaltimems_bucket"]
                    if ls["request"] == request
                )
            )
            assert [v for _, v in buckets] == sorted(v for _, v in buckets) and buckets[-1] == (float("inf"), n)
        assert value(m, "kafka_server_replicamanager_underreplicatedpartitions") == 0
        assert value(m, "kafka_controller_kafkacontroller_activecontrollercount") == 1
        assert value(m, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0
        assert value(m, "kafka_server_replicamanager_leadercount") >= 1
        assert value(m, "process_resident_memory_bytes") > 10_000_000
        assert value(m, "kafka_server_socketservermetrics_connectioncount") >= 0

        u = urlparse(b.metrics_url)
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
        conn.request("GET", "/nope")
        assert conn.getresponse().status == 404
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
        conn.request("POST", "/metrics", body=b"x")
        assert conn.getresponse().status == 405


def test_bad_metrics_listen_is_refused(tmp_path):
    with pytest.raises(Exception, match="metrics.listen"):
        Broker(data_dir=tmp_path / "d", metrics_listen="nonsense")


@pytest.mark.timeout(300)
def test_a_killed_broker_shows_in_the_cluster_metrics(tmp_path):
    with Cluster(3, data_dir=tmp_path, config={**FAST, "min.insync.replicas": 2}, metrics=True) as cluster:
        create(cluster.nodes[0], "mr", 3, 3)
        full_isr(cluster, "mr", 3)
        controller = cluster.controller_id()
        victim = next(n for n in cluster.nodes if n.node_id != controller)
        survivors = [n for n in cluster.nodes if n is not victim]
        led_by_victim = sum(
            1 for (t, _p), v in layout(cluster.nodes[0]).items() if t == "mr" and v[0] == victim.node_id
        )
        active = cluster.node(controller)
        elections_before = value(
            scrape(active.metrics_url), "kafka_controller_controllerstats_leaderelectionrateandtimems_total"
        )
        victim.kill()

        def under_replicated():
            ms = [scrape(n.metrics_url) for n in survivors]
            # (the leaders' own ISR shrinks race the controller's: fencing the broker takes it
            # out of every ISR, so their count is not fixed)
            return sum(value(m, "kafka_server_replicamanager_underreplicatedpartitions") for m in ms) == 3

        wait_until(under_replicated, timeout=60, what="3 under-replicated partitions on the survivors")
        m = scrape(active.metrics_url)
        assert value(m, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0
        assert (
            value(m, "kafka_controller_controllerstats_leaderelectionrateandtimems_total")
            >= elections_before + led_by_victim
        )
        for n in survivors:
            if n is not active:
                assert value(scrape(n.metrics_url), "kafka_controller_kafkacontroller_activecontrollercount") == 0

        victim.restart()
        full_isr(cluster, "mr", 3)

        def healed():
            ms = [scrape(n.metrics_url) for n in cluster.nodes]
            return (
                sum(value(m, "kafka_server_replicamanager_underreplicatedpartitions") for m in ms) == 0
                and sum(value(m, "kafka_server_replicamanager_isrexpandspersec_total") for m in ms) >= 3
            )

        wait_until(healed, timeout=60, what="no under-replicated partition after the restart")
