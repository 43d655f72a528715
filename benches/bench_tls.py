"""TLS cost on the data path, logbroker beside Apache Kafka: librdkafka produces 100,000
records of 1 KiB (acks=1) to one broker and consumes them back, over a PLAINTEXT listener
and over an SSL listener (logbroker: rustls in the Rust network thread, no sendfile for TLS
Fetch; Kafka 4.x: the JDK's TLS, installed by benches/peers/kafka.py). Medians of 3 rounds.

Run: python -m pytest benches/bench_tls.py --benchmark-only
"""

from __future__ import annotations

import shutil

import pytest
import trustme
from confluent_kafka.admin import AdminClient, NewTopic
from rdkafka_load import consume, produce  # benches/ is on sys.path (benches/conftest.py)

import logbroker

N = 100_000
VALUE = b"x" * 1024


def _pki(d):
    """A CA and a broker keystore (PKCS#8 key, which Kafka's PEM keystore needs, then the chain)."""
    from cryptography.hazmat.primitives import serialization

    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(d / "ca.pem"))
    leaf = ca.issue_cert("127.0.0.1")
    key = serialization.load_pem_private_key(leaf.private_key_pem.bytes(), None)
    pkcs8 = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    (d / "broker.pem").write_bytes(pkcs8 + b"".join(c.bytes() for c in leaf.cert_chain_pems))
    return {"security.protocol": "SSL", "ssl.ca.location": str(d / "ca.pem")}


def _kafka(d, ssl_conf):
    from peers.common import free_port  # benches/ is on sys.path (benches/conftest.py)
    from peers.kafka import KafkaPeer

    class SslKafka(KafkaPeer):
        """Kafka with an SSL listener beside its PLAINTEXT one (which the peer's readiness probe uses)."""

        sport = free_port()

        def _props(self):
            p = super()._props()
            p["listeners"] += f",SSL://127.0.0.1:{self.sport}"
            p["advertised.listeners"] += f",SSL://127.0.0.1:{self.sport}"
            p["listener.security.protocol.map"] += ",SSL:SSL"
            p["ssl.keystore.type"] = "PEM"
            p["ssl.keystore.location"] = str(d / "broker.pem")
            return p

    return SslKafka(data_root=d)


@pytest.fixture(scope="module", params=["logbroker-PLAINTEXT", "logbroker-SSL", "kafka-PLAINTEXT", "kafka-SSL"])
def broker(request, tmp_path_factory):
    kind, listener = request.param.split("-")
    d = tmp_path_factory.mktemp(request.param)
    ssl_conf = _pki(d)
    conf = ssl_conf if listener == "SSL" else {}
    if kind == "logbroker":
        settings = {"ssl_keystore_location": str(d / "broker.pem")} if listener == "SSL" else {}
        with logbroker.Broker(data_dir=d / "data", listener=listener, **settings) as b:
            yield request.param, b.bootstrap_servers, conf
        return
    if shutil.which("java") is None or shutil.which("mvn") is None:
        pytest.skip("Java 17 and Maven are needed for Kafka")
    peer = _kafka(d, ssl_conf)
    peer.start()
    try:
        port = peer.sport if listener == "SSL" else peer.port
        yield request.param, f"127.0.0.1:{port}", conf
    finally:
        peer.stop()


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
    benchmark.extra_info["broker"] = name
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
    benchmark.extra_info["broker"] = name
    benchmark.extra_info["MB_per_s"] = N * len(VALUE) / 1e6 / benchmark.stats.stats.median
