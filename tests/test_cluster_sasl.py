"""A three-node cluster whose nodes authenticate to each other with SASL: the inter-broker
listener is SASL_SSL with SCRAM-SHA-512 (the follower fetch loops in Rust, transaction markers
broker to broker), the controller listener SASL_PLAINTEXT with PLAIN (Raft between the
controllers, the brokers' heartbeats and forwarded requests). The authorizer is on and the
nodes' user, User:broker, is a super user.

Bootstrap, as with Kafka: SCRAM users live in the metadata log, so the controller listener
uses PLAIN (its users in the JAAS config work from the first start), and the inter-broker
SCRAM user is created once the cluster is up (here through the INTERNAL listener as a PLAIN
super user); until then the followers fail to authenticate, say so in the log, and retry.

The harness keeps a PLAINTEXT listener (its readiness check); the nodes do not use it."""

from __future__ import annotations

import re
import socket
import time
from pathlib import Path

import pytest
import trio
import trustme
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from conftest import isr_sizes, rdkafka_values, wait_until

from logbroker import Cluster
from logbroker.client.sasl import Password, SaslConfig
from logbroker.common.acl import STANDARD_AUTHORIZER
from logbroker.common.config import BrokerConfig, ConfigError
from logbroker.coord.peer_sasl import PeerAuthenticationFailed
from logbroker.coord.peer_security import PeerSecurity

SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule required"
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule required"


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("pki")
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(d / "ca.pem"))
    ca.issue_cert("127.0.0.1", "localhost", common_name="node").private_key_and_cert_chain_pem.write_to_path(
        str(d / "node.pem")
    )
    return d / "ca.pem", d / "node.pem"


def secured(pki: tuple[Path, Path]) -> dict[str, str]:
    ca, keystore = pki
    return {
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_SSL,CONTROLLER:SASL_PLAINTEXT",
        "inter.broker.listener.name": "INTERNAL",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "sasl.mechanism.controller.protocol": "PLAIN",
        # the brokers' own user on INTERNAL (SCRAM: created in the metadata log below)
        "listener.name.internal.scram-sha-512.sasl.jaas.config": f'{SCRAM_MODULE} username="broker" password="broker-secret";',
        # PLAIN users INTERNAL accepts (the admin, to bootstrap the SCRAM user)
        "listener.name.internal.plain.sasl.jaas.config": f'{PLAIN_MODULE} user_admin="admin-secret";',
        # the controller listener: the nodes' user both ways, and a user that is no node
        "listener.name.controller.plain.sasl.jaas.config": f'{PLAIN_MODULE} username="broker" password="controller-secret" user_broker="controller-secret" '
        'user_mallory="mallory-secret";',
        "ssl.keystore.location": str(keystore),
        "ssl.truststore.location": str(ca),
        "authorizer.class.name": STANDARD_AUTHORIZER,
        "super.users": "User:broker;User:admin",
        "offsets.topic.replication.factor": "3",
        "transaction.state.log.replication.factor": "3",
        "transaction.state.log.min.isr": "2",
    }


def admin_conf(bs: str, ca: Path, **extra) -> dict:
    return {
        "bootstrap.servers": bs,
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(ca),
        "sasl.mechanism": "PLAIN",
        "sasl.username": "admin",
        "sasl.password": "admin-secret",
        **extra,
    }


def consume(conf: dict, topic: str, n: int) -> list[bytes]:
    return rdkafka_values(conf, topic, n, timeout=40)


async def _controller_connect(port: int, user: str, password: str, then: bytes | None = None) -> bytes:
    """Dial a controller listener as `user` (our node-to-node SASL client); what it answers
    to `then` (b'' when it closes)."""
    security = PeerSecurity("CONTROLLER", None, SaslConfig("PLAIN", user, Password(password)), node_id=99)
    stream = await security.connect("127.0.0.1", port)
    async with stream:
        if then is None:
            return b""
        await stream.send_all(then)
        with trio.fail_after(10):
            try:
                return await stream.receive_some(10)
            except trio.BrokenResourceError:
                return b""


def test_three_nodes_authenticate_to_each_other_with_sasl(tmp_path, pki):
    ca, _ = pki
    with Cluster(3, data_dir=tmp_path, config=secured(pki), listeners=["INTERNAL"]) as cluster:
        bs = cluster.bootstrap("INTERNAL")
        admin = AdminClient(admin_conf(bs, ca))
        admin.create_topics([NewTopic("orders", 3, 3, config={"min.insync.replicas": "2"})])["orders"].result(30)

        # the inter-broker SCRAM user does not exist yet: the followers say so and retry
        assert wait_until(
            lambda: any(
                "could not authenticate to broker" in n.log_text()
                and 'on listener INTERNAL (SCRAM-SHA-512, user "broker")' in n.log_text()
                for n in cluster.nodes
            ),
            20,
            "the followers' authentication failures",
        )
        admin.alter_user_scram_credentials(
            [
                UserScramCredentialUpsertion(
                    "broker", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"broker-secret"
                )
            ]
        )["broker"].result(30)

        # acks=all with min.insync.replicas=2: every batch waits for followers that fetch
        # over SASL_SSL with SCRAM-SHA-512
        p = Producer(admin_conf(bs, ca, acks="all"))
        for i in range(300):
            p.produce("orders", b"order-%d" % i, key=b"k%d" % (i % 7))
        assert p.flush(40) == 0
        assert wait_until(lambda: isr_sizes(admin, "orders") == [3, 3, 3], 30, "full ISRs over SASL")

        # a transaction: the coordinator sends its markers to the other leaders over SASL
        tx = Producer(admin_conf(bs, ca, **{"transactional.id": "tx-1"}))
        tx.init_transactions(30)
        tx.begin_transaction()
        for i in range(30):
            tx.produce("orders", b"tx-%d" % i, partition=i % 3)
        tx.commit_transaction(30)
        got = consume(admin_conf(bs, ca, **{"group.id": "g-tx", "isolation.level": "read_committed"}), "orders", 330)
        assert len(got) == 330 and {b"tx-%d" % i for i in range(30)} <= set(got)

        # the controller listener: the nodes' user gets in; a wrong password is refused by
        # SASL, a PLAIN user that is no node by the authorizer, plaintext without SASL is closed
        md = admin.list_topics("orders", timeout=10).topics["orders"]
        leader = md.partitions[0].leader
        node = next(n for n in cluster.nodes if n.node_id != leader)
        assert trio.run(_controller_connect, node.controller_port, "broker", "controller-secret") == b""
        with pytest.raises(
            PeerAuthenticationFailed,
            match=r"node 99: SASL authentication to 127\.0\.0\.1:\d+ "
            r"\(listener CONTROLLER, PLAIN, user 'broker'\) failed: SASL_AUTHENTICATION_FAILED",
        ):
            trio.run(_controller_connect, node.controller_port, "broker", "wrong")
        assert (
            trio.run(
                _controller_connect, node.controller_port, "mallory", "mallory-secret", b"LBRQ\x00\x01" + b"\x00" * 12
            )
            == b""
        )
        assert wait_until(
            lambda: "(User:mallory) refused on the controller listener" in node.log_text(),
            10,
            "mallory's refusal in the node's log",
        )
        with socket.create_connection(("127.0.0.1", node.controller_port), timeout=10) as raw:
            raw.sendall(b"LBRQ\x00\x01" + b"\x00" * 12)
            assert raw.recv(10) == b"", "a quorum hello without SASL is closed"
        assert wait_until(lambda: "before authenticating; closing" in node.log_text(), 10, "the refusal in the log")

        # the leader of partition 0 dies: a replica that caught up over SASL takes over
        cluster.node(leader).kill()
        wait_until(
            lambda: admin.list_topics("orders", timeout=5).topics["orders"].partitions[0].leader not in (-1, leader),
            30,
            "a new leader of orders-0",
        )
        p2 = Producer(admin_conf(bs, ca, acks="all"))
        for i in range(100):
            p2.produce("orders", b"after-%d" % i, partition=0)
        assert p2.flush(40) == 0
        got = consume(admin_conf(bs, ca, **{"group.id": "g-after"}), "orders", 430)
        assert len(got) == 430 and {b"after-%d" % i for i in range(100)} <= set(got)
        for n in cluster.nodes:
            if n.node_id != leader:
                assert "Traceback" not in n.log_text(), n.log_text()[-3000:]


def test_a_wrong_broker_password_is_logged_and_retried(tmp_path):
    """Every node gives the wrong password on SASL_PLAINTEXT INTERNAL: nothing replicates,
    each node logs why (naming itself, the listener, mechanism and user) and keeps running."""
    config = {
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name": "INTERNAL",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.internal.plain.sasl.jaas.config": f'{PLAIN_MODULE} username="broker" password="not-it" user_broker="broker-secret";',
    }
    with Cluster(3, data_dir=tmp_path, config=config, listeners=["INTERNAL"]) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        admin.create_topics([NewTopic("t", 1, 3)])["t"].result(30)
        md = admin.list_topics("t", timeout=10).topics["t"]
        leader = md.partitions[0].leader
        follower = next(n for n in cluster.nodes if n.node_id != leader)
        want = (
            f"node {follower.node_id} could not authenticate to broker {leader} at 127.0.0.1:"
            f'{cluster.node(leader).listener_ports["INTERNAL"]} on listener INTERNAL (PLAIN, user "broker")'
        )
        assert wait_until(lambda: want in follower.log_text(), 20, "the follower's authentication failure")
        assert "Authentication failed: Invalid username or password" in follower.log_text()
        assert wait_until(
            lambda: "PLAIN: user 'broker' gave a wrong password" in cluster.node(leader).log_text(),
            10,
            "the leader's side of it",
        )
        assert all(n.is_running for n in cluster.nodes)
        assert "Traceback" not in follower.log_text()


def test_sasl_between_nodes_configuration_errors():
    base = {
        "node.id": "1",
        "controller.quorum.voters": "1@127.0.0.1:9093",
        "listeners": "INTERNAL://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
        "inter.broker.listener.name": "INTERNAL",
        "listener.security.protocol.map": "INTERNAL:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
    }
    with pytest.raises(
        ConfigError,
        match=r"set listener\.name\.internal\.plain\.sasl\.jaas\.config with this "
        r"node's username",
    ):
        BrokerConfig(base).check_listeners()
    no_user = {**base, "listener.name.internal.plain.sasl.jaas.config": f'{PLAIN_MODULE} user_broker="x";'}
    with pytest.raises(ConfigError, match=r"listener\.name\.internal\.plain\.sasl\.jaas\.config: has no username="):
        BrokerConfig(no_user).check_listeners()
    no_password = {
        **base,
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256",
        "listener.name.internal.scram-sha-256.sasl.jaas.config": f'{SCRAM_MODULE} username="broker";',
    }
    with pytest.raises(
        ConfigError, match=r"scram-sha-256\.sasl\.jaas\.config: has no password=\"\.\.\.\" for user 'broker'"
    ):
        BrokerConfig(no_password).check_listeners()
    with pytest.raises(ConfigError, match=r"sasl\.mechanism\.inter\.broker\.protocol.*'GSSAPI'.*choose from PLAIN"):
        BrokerConfig({**base, "sasl.mechanism.inter.broker.protocol": "GSSAPI"})
    not_enabled = {**base, "sasl.enabled.mechanisms": "PLAIN", "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512"}
    with pytest.raises(ConfigError, match=r"SCRAM-SHA-512 must be in sasl\.enabled\.mechanisms \(PLAIN\)"):
        BrokerConfig(not_enabled).check_listeners()
    scram_controller = {
        **base,
        "listener.security.protocol.map": "INTERNAL:PLAINTEXT,CONTROLLER:SASL_PLAINTEXT",
        "sasl.mechanism.controller.protocol": "SCRAM-SHA-512",
    }
    with pytest.raises(ConfigError, match=r"controller listener CONTROLLER authenticates nodes with PLAIN only"):
        BrokerConfig(scram_controller).check_listeners()
    ok = BrokerConfig(
        {
            **base,
            "listener.name.internal.plain.sasl.jaas.config": f'{PLAIN_MODULE} username="broker" password="p\\"w" user_broker="p\\"w";',
        }
    )
    ok.check_listeners()
    security = PeerSecurity.for_listener(ok, "INTERNAL")
    assert (security.sasl.mechanism, security.sasl.username, security.sasl.password.value) == ("PLAIN", "broker", 'p"w')
    assert 'p\\"w' not in repr(security.sasl)


def test_sessions_between_nodes_are_renewed(tmp_path):
    """connections.max.reauth.ms=2000 on every node: the follower fetch loops, the brokers'
    requests to the controllers and the Raft connections (voters' and an observer's) all dial
    again before their SASL session ends, so replication and the quorum keep going through
    several lifetimes."""
    config = {
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_PLAINTEXT,CONTROLLER:SASL_PLAINTEXT",
        "inter.broker.listener.name": "INTERNAL",
        "listener.name.internal.plain.sasl.jaas.config": f'{PLAIN_MODULE} username="broker" password="broker-secret" user_broker="broker-secret";',
        "listener.name.controller.plain.sasl.jaas.config": f'{PLAIN_MODULE} username="broker" password="controller-secret" user_broker="controller-secret";',
        "connections.max.reauth.ms": "2000",
    }
    # a broker-only node too: an observer of the quorum, dialling the controllers with SASL
    with Cluster(3, data_dir=tmp_path, config=config, listeners=["INTERNAL"], broker_only=1) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        admin.create_topics([NewTopic("t", 2, 4, config={"min.insync.replicas": "4"})])["t"].result(30)
        p = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
        deadline = time.monotonic() + 8  # four session lifetimes
        sent = 0
        while time.monotonic() < deadline:
            for _ in range(20):
                p.produce("t", b"r-%d" % sent)
                sent += 1
            assert p.flush(10) == 0, "acks=all needs every follower fetching"
            time.sleep(0.3)
        assert isr_sizes(admin, "t") == [4, 4]
        for n in cluster.nodes:
            log = n.log_text()
            assert "could not authenticate" not in log and "SASL authentication to" not in log, log[-3000:]
            # no session ran out under a node's request: each was renewed before
            assert "expired (connections.max.reauth.ms) and the client sent" not in log, log[-3000:]
            assert "ended (connections.max.reauth.ms)" not in log, log[-3000:]  # the controller listener's side
            assert re.search(r"fetching \d+ partition\(s\) from broker \d+ at \S+ failed", log) is None, log[-3000:]
            assert "Traceback" not in log
