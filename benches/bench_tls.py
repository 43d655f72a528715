"""TLS cost on the data path: librdkafka produces 100,000 records of 1 KiB (acks=1) to one
broker and consumes them back, over a PLAINTEXT listener and over an SSL listener (TLS in
the Rust network thread; no sendfile for TLS Fetch). Medians of 3 rounds each.

Run: python -m pytest benches/bench_tls.py --benchmark-only
"""

from __future__ import annotations

import time

import pytest
import trustme
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

import logbroker

N = 100_000
VALUE = b"x" * 1024


@pytest.fixture(scope="module", params=["PLAINTEXT", "SSL"])
def broker(request, tmp_path_factory):
    d = tmp_path_factory.mktemp(request.param)
    conf: dict = {}
    settings: dict = {}
    if request.param == "SSL":
        ca = trustme.CA()
        ca.cert_pem.write_to_path(str(d / "ca.pem"))
        ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(d / "broker.pem"))
        settings = {"ssl_keystore_location": str(d / "broker.pem")}
        conf = {"security.protocol": "SSL", "ssl.ca.location": str(d / "ca.pem")}
    with logbroker.Broker(data_dir=d / "data", listener=request.param, **settings) as b:
        yield request.param, b.bootstrap_servers, conf


def test_produce(benchmark, broker):
    name, bs, conf = broker
    admin = AdminClient({"bootstrap.servers": bs, **conf})
    round_no = [0]

    def run():
        round_no[0] += 1
        topic = f"p-{round_no[0]}"
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
        p = Producer({"bootstrap.servers": bs, "acks": 1, "linger.ms": 5, **conf})
        for _ in range(N):
            while True:
                try:
                    p.produce(topic, VALUE)
                    break
                except BufferError:
                    p.poll(0.01)
        assert p.flush(60) == 0

    benchmark.pedantic(run, rounds=3, iterations=1)
    benchmark.extra_info["listener"] = name
    benchmark.extra_info["MB_per_s"] = N * len(VALUE) / 1e6 / benchmark.stats.stats.median


def test_consume(benchmark, broker):
    name, bs, conf = broker
    admin = AdminClient({"bootstrap.servers": bs, **conf})
    admin.create_topics([NewTopic("c", 1, 1)])["c"].result(30)
    p = Producer({"bootstrap.servers": bs, "acks": 1, "linger.ms": 5, **conf})
    for _ in range(N):
        while True:
            try:
                p.produce("c", VALUE)
                break
            except BufferError:
                p.poll(0.01)
    assert p.flush(60) == 0
    round_no = [0]

    def run():
        round_no[0] += 1
        c = Consumer({"bootstrap.servers": bs, "group.id": f"g{round_no[0]}", "auto.offset.reset": "earliest",
                      "enable.auto.commit": False, **conf})
        c.subscribe(["c"])
        n, deadline = 0, time.monotonic() + 120
        while n < N and time.monotonic() < deadline:
            for m in c.consume(1000, 1.0):
                if not m.error():
                    n += 1
        c.close()
        assert n == N

    benchmark.pedantic(run, rounds=3, iterations=1)
    benchmark.extra_info["listener"] = name
    benchmark.extra_info["MB_per_s"] = N * len(VALUE) / 1e6 / benchmark.stats.stats.median
