"""A three-node cluster with TLS between its nodes (issue 16): the controller quorum (Raft),
the brokers' requests to the controller, the follower fetch loops (Rust) and the brokers'
requests to each other (transaction markers) all go over SSL listeners with mutual TLS.
Every node presents the same broker certificate, which `ssl.principal.mapping.rules` names
`User:broker`, a super user; clients authenticate with their own certificates
(`User:alice`) or with SCRAM, and get what ACLs grant.

What a user would check: acks=all produces (followers must fetch over TLS for the ISR to
hold them), a transaction (markers over TLS), a leader killed and replaced, a certificate
from the same authority that is not a node refused by the controller listener, plaintext
and a foreign authority refused. The harness keeps a PLAINTEXT listener (its readiness
check); the nodes do not use it."""

from __future__ import annotations

import socket
import ssl
import subprocess
import sys
from pathlib import Path

import pytest
import trustme
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from conftest import isr_sizes, rdkafka_values, wait_until

from logbroker import Cluster
from logbroker.common.acl import STANDARD_AUTHORIZER
from logbroker.common.config import BrokerConfig, ConfigError
from logbroker.coord.peer_security import PeerSecurity

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SUBJECT = "OU=test,O=logbroker"
# ssl.principal.mapping.rules: this authority's certificates are named by their CN
MAPPING = "RULE:^CN=([^,]+),OU=test,O=logbroker$/$1/L,DEFAULT"


class Pki:
    def __init__(self, d: Path) -> None:
        self.d = d
        self.ca = trustme.CA()
        self.ca_pem = d / "ca.pem"
        self.ca.cert_pem.write_to_path(str(self.ca_pem))
        self.keystore = self.issue("broker", "127.0.0.1", "localhost")
        self.other_ca = trustme.CA()

    def issue(self, cn: str, *names: str, ca: trustme.CA | None = None) -> Path:
        cert = (ca or self.ca).issue_cert(
            *(names or (f"{cn}.example",)), common_name=cn, organization_name="logbroker", organization_unit_name="test"
        )
        path = self.d / f"{cn}-{id(ca)}.pem"
        cert.private_key_and_cert_chain_pem.write_to_path(str(path))
        return path


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Pki:
    return Pki(tmp_path_factory.mktemp("pki"))


def secured(pki: Pki) -> dict[str, str]:
    return {
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SSL,CONTROLLER:SSL,EXTERNAL:SASL_SSL",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "inter.broker.listener.name": "INTERNAL",
        "ssl.keystore.location": str(pki.keystore),
        "ssl.truststore.location": str(pki.ca_pem),
        "ssl.client.auth": "required",
        "authorizer.class.name": STANDARD_AUTHORIZER,
        "ssl.principal.mapping.rules": MAPPING,
        "super.users": "User:broker;User:admin",
        "offsets.topic.replication.factor": "3",
        "transaction.state.log.replication.factor": "3",
        "transaction.state.log.min.isr": "2",
    }


def conf(bs: str, pki: Pki, who: str, **extra) -> dict:
    cert = pki.issue(who)
    return {
        "bootstrap.servers": bs,
        "security.protocol": "SSL",
        "ssl.ca.location": str(pki.ca_pem),
        "ssl.certificate.location": str(cert),
        "ssl.key.location": str(cert),
        **extra,
    }


def consume(bs: str, pki: Pki, topic: str, n: int, **extra) -> list[bytes]:
    return rdkafka_values(conf(bs, pki, "alice", **{"group.id": f"g-{topic}", **extra}), topic, n)


def cli(bs: str, props: Path, command: str, *args: str) -> str:
    r = subprocess.run(
        [sys.executable, "-m", "logbroker", command, "--bootstrap-server", bs, "--command-config", str(props), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, f"logbroker {command} {' '.join(args)}: {r.stdout}{r.stderr}"
    return r.stdout


def test_three_nodes_with_mutual_tls_between_them(tmp_path, pki):
    with Cluster(3, data_dir=tmp_path, config=secured(pki), listeners=["INTERNAL", "EXTERNAL"]) as cluster:
        bs = cluster.bootstrap("INTERNAL")
        admin = AdminClient(conf(bs, pki, "admin"))
        # the administrator as docs/security.md has it: logbroker's CLI with a client
        # properties file naming its certificate
        props = tmp_path / "admin.properties"
        props.write_text(
            f"security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location={pki.ca_pem}\n"
            f"ssl.keystore.type=PEM\nssl.keystore.location={pki.issue('admin')}\n"
        )
        cli(
            bs,
            props,
            "topic",
            "create",
            "--topic",
            "orders",
            "--partitions",
            "3",
            "--replication-factor",
            "3",
            "--config",
            "min.insync.replicas=2",
        )
        grants = [
            AclBinding(
                ResourceType.TOPIC,
                "orders",
                ResourcePatternType.LITERAL,
                "User:alice",
                "*",
                op,
                AclPermissionType.ALLOW,
            )
            for op in (AclOperation.WRITE, AclOperation.READ)
        ]
        grants.append(
            AclBinding(
                ResourceType.GROUP,
                "g-",
                ResourcePatternType.PREFIXED,
                "User:alice",
                "*",
                AclOperation.READ,
                AclPermissionType.ALLOW,
            )
        )
        for f in admin.create_acls(grants).values():
            f.result(30)

        # acks=all with min.insync.replicas=2: every batch waits for followers fetching over TLS
        p = Producer(conf(bs, pki, "alice", acks="all"))
        for i in range(600):
            p.produce("orders", b"order-%d" % i, key=b"k%d" % (i % 7))
        assert p.flush(60) == 0
        assert wait_until(lambda: isr_sizes(admin, "orders") == [3, 3, 3], 30, "full ISRs over TLS")
        got = consume(bs, pki, "orders", 600)
        assert sorted(got) == sorted(b"order-%d" % i for i in range(600))

        # SASL_SSL beside it for clients without certificates (ssl.client.auth is the SSL
        # listeners'; a SASL_SSL listener asks none): a SCRAM user with its own ACLs
        (tmp_path / "bob.pw").write_text("bob-secret\n")
        cli(
            bs,
            props,
            "user",
            "set-password",
            "bob",
            "--mechanism",
            "SCRAM-SHA-512",
            "--password-file",
            str(tmp_path / "bob.pw"),
        )
        cli(bs, props, "acl", "add", "--allow-principal", "User:bob", "--producer", "--topic", "orders")
        bob = Producer(
            {
                "bootstrap.servers": cluster.bootstrap("EXTERNAL"),
                "security.protocol": "SASL_SSL",
                "ssl.ca.location": str(pki.ca_pem),
                "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.username": "bob",
                "sasl.password": "bob-secret",
                "acks": "all",
            }
        )
        for i in range(50):
            bob.produce("orders", b"bob-%d" % i)
        assert wait_until(lambda: bob.flush(5) == 0, 60, "bob's records acknowledged")

        # the principal comes from alice's certificate: what ACLs do not grant is refused
        admin.create_topics([NewTopic("secret", 1, 3)])["secret"].result(30)
        denied = Producer(conf(bs, pki, "alice", acks="all", **{"message.timeout.ms": 5000}))
        errors = []
        denied.produce("secret", b"x", on_delivery=lambda err, msg: errors.append(err))
        denied.flush(15)
        assert errors and errors[0] is not None and "TOPIC_AUTHORIZATION_FAILED" in errors[0].name(), errors

        # a transaction: the coordinator writes its markers to the other leaders over TLS
        tx = Producer(conf(bs, pki, "admin", **{"transactional.id": "tx-1"}))
        tx.init_transactions(30)
        tx.begin_transaction()
        for i in range(30):
            tx.produce("orders", b"tx-%d" % i, partition=i % 3)
        tx.commit_transaction(30)
        got = consume(bs, pki, "orders", 680, **{"group.id": "g-tx", "isolation.level": "read_committed"})
        assert {b"tx-%d" % i for i in range(30)} | {b"bob-%d" % i for i in range(50)} <= set(got) and len(got) == 680

        # the leader of partition 0 dies: another replica, caught up over TLS, takes over
        md = admin.list_topics("orders", timeout=10).topics["orders"]
        leader = md.partitions[0].leader
        cluster.node(leader).kill()
        wait_until(
            lambda: admin.list_topics("orders", timeout=5).topics["orders"].partitions[0].leader not in (-1, leader),
            30,
            "a new leader of orders-0",
        )
        p2 = Producer(conf(bs, pki, "alice", acks="all"))
        for i in range(100):
            p2.produce("orders", b"after-%d" % i, partition=0)
        assert p2.flush(60) == 0

        # the controller listener admits nodes only: a certificate of the same authority that
        # is not a super user, a foreign authority's, and plaintext are each closed
        node = next(n for n in cluster.nodes if n.node_id != leader)
        port = node.controller_port
        mallory = pki.issue("mallory")
        ctx = ssl.create_default_context(cafile=str(pki.ca_pem))
        ctx.load_cert_chain(str(mallory))
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
            with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
                s.sendall(b"LBRQ")
                assert s.recv(10) == b"", "the controller listener closed mallory's connection"
        assert wait_until(
            lambda: "(User:mallory) refused on the controller listener" in node.log_text(),
            10,
            "the refusal in the node's log",
        )
        foreign = pki.issue("eve", ca=pki.other_ca)
        ctx = ssl.create_default_context(cafile=str(pki.ca_pem))
        ctx.load_cert_chain(str(foreign))
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
            with pytest.raises((ssl.SSLError, ConnectionResetError, BrokenPipeError)):
                with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
                    s.sendall(b"LBRQ")
                    if s.recv(10) == b"":
                        raise ConnectionResetError("closed")
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
            raw.sendall(b"LBRQ\x00\x01" + b"\x00" * 12)
            assert raw.recv(10) == b"", "plaintext on the SSL controller listener is closed"
        assert wait_until(lambda: "TLS handshake with" in node.log_text(), 10, "the TLS failures in the log")

        # everything still replicates: the survivors hold every record
        got = consume(bs, pki, "orders", 780, **{"group.id": "g-after"})
        assert len(got) == 780 and {b"after-%d" % i for i in range(100)} <= set(got)
        for n in cluster.nodes:
            if n.node_id != leader:
                assert "Traceback" not in n.log_text(), n.log_text()[-3000:]


def test_node_connections_refuse_what_they_cannot_secure(tmp_path, pki):
    base = {
        "node.id": "1",
        "controller.quorum.voters": "1@127.0.0.1:9093",
        "listeners": "INTERNAL://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
        "inter.broker.listener.name": "INTERNAL",
        "ssl.keystore.location": str(pki.keystore),
    }
    # SASL between nodes needs this node's credentials (tests/test_cluster_sasl.py has the rest)
    sasl = BrokerConfig({**base, "listener.security.protocol.map": "INTERNAL:SASL_SSL,CONTROLLER:PLAINTEXT"})
    with pytest.raises(
        ConfigError,
        match="listener INTERNAL is SASL_SSL between nodes: set listener.name.internal.plain.sasl.jaas.config",
    ):
        sasl.check_listeners()
    ctl = BrokerConfig({**base, "listener.security.protocol.map": "INTERNAL:SSL,CONTROLLER:SASL_PLAINTEXT"})
    with pytest.raises(
        ConfigError,
        match="listener CONTROLLER is SASL_PLAINTEXT between nodes: set "
        "listener.name.controller.plain.sasl.jaas.config",
    ):
        ctl.check_listeners()
    no_trust = BrokerConfig({**base, "listener.security.protocol.map": "INTERNAL:SSL,CONTROLLER:SSL"})
    no_trust.check_listeners()
    with pytest.raises(ConfigError, match="set ssl.truststore.location"):
        PeerSecurity.for_listener(no_trust, "INTERNAL")
    ok = BrokerConfig(
        {
            **base,
            "listener.security.protocol.map": "INTERNAL:SSL,CONTROLLER:SSL",
            "ssl.truststore.location": str(pki.ca_pem),
        }
    )
    assert PeerSecurity.for_listener(ok, "CONTROLLER").context.check_hostname
    lax = BrokerConfig(
        {
            **base,
            "listener.security.protocol.map": "INTERNAL:SSL,CONTROLLER:SSL",
            "ssl.truststore.location": str(pki.ca_pem),
            "ssl.endpoint.identification.algorithm": "",
        }
    )
    assert not PeerSecurity.for_listener(lax, "INTERNAL").context.check_hostname
    with pytest.raises(ConfigError, match="ssl.endpoint.identification.algorithm"):
        BrokerConfig({"ssl.endpoint.identification.algorithm": "ldap"})


def test_ssl_client_auth_per_listener():
    """ssl.client.auth is the SSL listeners'; SASL_SSL listeners honour only the listener
    prefix (Kafka's KIP-684)."""
    base = {
        "listeners": "INTERNAL://127.0.0.1:9092,EXTERNAL://127.0.0.1:9094,OTHER://127.0.0.1:9095",
        "listener.security.protocol.map": "INTERNAL:SSL,EXTERNAL:SASL_SSL,OTHER:SSL",
        "ssl.client.auth": "required",
    }
    cfg = BrokerConfig(base)
    assert (cfg.ssl_client_auth("INTERNAL"), cfg.ssl_client_auth("EXTERNAL")) == ("required", "none")
    cfg = BrokerConfig(
        {**base, "listener.name.external.ssl.client.auth": "requested", "listener.name.other.ssl.client.auth": "none"}
    )
    assert [cfg.ssl_client_auth(n) for n in ("INTERNAL", "EXTERNAL", "OTHER")] == ["required", "requested", "none"]
    with pytest.raises(ConfigError, match="listener.name.external.ssl.client.auth.*expected one of none, requested"):
        BrokerConfig({**base, "listener.name.external.ssl.client.auth": "always"})
