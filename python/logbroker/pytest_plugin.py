"""pytest plugin (entry point `pytest11`): a real logbroker broker for your tests.

    def test_roundtrip(logbroker_broker):
        producer = confluent_kafka.Producer({"bootstrap.servers": logbroker_broker.bootstrap_servers})

`logbroker_broker` is function-scoped: each test gets a fresh broker with a temporary
data directory on a free loopback port, started in-process (no JVM, no container)
and stopped (data removed) after the test. `logbroker_session_broker` is one broker
shared by a whole session. `logbroker_cluster` is a function-scoped three-node cluster
(`logbroker.Cluster(3)`: combined broker+controller `logbroker serve` subprocesses on free
loopback ports, temporary data directories), started and ready (every node lists every node
as a broker), stopped and removed after the test:

    def test_failover(logbroker_cluster):
        admin = logbroker.Admin(bootstrap_servers=logbroker_cluster.bootstrap_servers)
        logbroker_cluster.node(logbroker_cluster.controller_id()).kill()
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from logbroker.broker import Broker
from logbroker.cluster import Cluster


@pytest.fixture
def logbroker_broker() -> Iterator[Broker]:
    with Broker() as broker:
        yield broker


@pytest.fixture(scope="session")
def logbroker_session_broker() -> Iterator[Broker]:
    with Broker() as broker:
        yield broker


@pytest.fixture
def logbroker_cluster() -> Iterator[Cluster]:
    with Cluster(3) as cluster:
        yield cluster
