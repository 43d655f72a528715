"""What the audit log (broker/audit_log.py) costs produce: librdkafka produces 100,000
records of 1 KiB (acks=1, linger.ms=5) to one broker on a SASL_PLAINTEXT listener as a
SCRAM-SHA-512 user with ACLs enforced (as benches/bench_sasl.py), with the audit log off,
on to a file, and on to a file and a topic. Successful Produce requests are not audited, so
the difference is what the audit hooks cost when they write nothing (the connection's login
and the topic's creation are a few lines). Throughput and the process's CPU seconds (broker
and client share the process: the same client work in each case), medians of 9 rounds.

Run: python -m pytest benches/bench_audit_log.py --benchmark-only
"""

from __future__ import annotations

import time

import pytest
from bench_sasl import ADMIN, ALICE, JAAS, _secure  # benches/ is on sys.path (benches/conftest.py)
from confluent_kafka.admin import AdminClient, NewTopic
from rdkafka_load import produce

import logbroker

N = 100_000
VALUE = b"x" * 1024


@pytest.fixture(scope="module", params=["off", "file", "file+topic"])
def broker(request, tmp_path_factory):
    d = tmp_path_factory.mktemp(request.param.replace("+", "-"))
    config = {
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin",
    }
    if request.param != "off":
        config["audit.log.file"] = str(d / "audit.log")
    if request.param == "file+topic":
        config["audit.log.topic"] = "_audit"
        config["listener.name.sasl_plaintext.plain.sasl.jaas.config"] = JAAS.replace(
            "required", 'required username="admin" password="admin-secret"'
        )  # the node's own login
    with logbroker.Broker(data_dir=d / "data", listener="SASL_PLAINTEXT", config=config) as b:
        _secure(b.bootstrap_servers)
        yield request.param, b.bootstrap_servers, d / "audit.log"


def test_produce(benchmark, broker):
    name, bs, audit_file = broker
    admin = AdminClient({"bootstrap.servers": bs, **ADMIN})
    round_no = [0]
    cpu: list[float] = []

    def run():
        round_no[0] += 1
        topic = f"p-{round_no[0]}"
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
        start = time.process_time()
        produce(bs, ALICE, topic, N, VALUE)
        cpu.append(time.process_time() - start)

    benchmark.pedantic(run, rounds=9, iterations=1)
    benchmark.extra_info["audit"] = name
    benchmark.extra_info["MB_per_s"] = N * len(VALUE) / 1e6 / benchmark.stats.stats.median
    benchmark.extra_info["cpu_s"] = sorted(cpu)[len(cpu) // 2]
    if name != "off":
        benchmark.extra_info["audit_lines"] = len(audit_file.read_text().splitlines())
