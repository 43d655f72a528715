"""What TLS between the nodes costs replication: a three-node logbroker cluster whose nodes
talk PLAINTEXT, against the same cluster whose inter-broker and controller listeners are
SSL with mutual TLS (the follower fetch loops over rustls, the control plane over trio's
SSL). librdkafka produces 300,000 records of 1 KiB with acks=all to a topic with
replication factor 3 (so every batch waits for two followers fetching it), on the
PLAINTEXT client listener in both cases: only the nodes' own connections differ. Medians
of 3 rounds.

Run: python -m pytest benches/bench_cluster_tls.py --benchmark-only
"""

from __future__ import annotations

import pytest
import trustme
from confluent_kafka.admin import AdminClient, NewTopic
from rdkafka_load import produce  # benches/ is on sys.path (benches/conftest.py)

from logbroker import Cluster

N = 300_000
VALUE = b"x" * 1024


@pytest.fixture(scope="module", params=["PLAINTEXT", "SSL"])
def cluster(request, tmp_path_factory):
    d = tmp_path_factory.mktemp(request.param)
    config: dict[str, object] = {"min.insync.replicas": 3}
    listeners: list[str] = []
    if request.param == "SSL":
        ca = trustme.CA()
        ca.cert_pem.write_to_path(str(d / "ca.pem"))
        ca.issue_cert("127.0.0.1", "localhost", common_name="broker").private_key_and_cert_chain_pem.write_to_path(
            str(d / "broker.pem")
        )
        config.update(
            {
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SSL,CONTROLLER:SSL",
                "inter.broker.listener.name": "INTERNAL",
                "ssl.keystore.location": str(d / "broker.pem"),
                "ssl.truststore.location": str(d / "ca.pem"),
                "ssl.client.auth": "required",
            }
        )
        listeners = ["INTERNAL"]
    with Cluster(3, data_dir=d / "nodes", config=config, listeners=listeners) as c:
        yield request.param, c.bootstrap_servers


def test_produce_acks_all(benchmark, cluster):
    name, bs = cluster
    admin = AdminClient({"bootstrap.servers": bs})
    round_no = [0]

    def run():
        round_no[0] += 1
        topic = f"p-{round_no[0]}"
        admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(30)
        produce(bs, {"acks": "all"}, topic, N, VALUE)

    benchmark.pedantic(run, rounds=3, iterations=1)
    benchmark.extra_info["between_nodes"] = name
    benchmark.extra_info["MB_per_s"] = N * len(VALUE) / 1e6 / benchmark.stats.stats.median
