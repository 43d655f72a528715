"""Delegation tokens (KIP-48, APIs 38-41): created, described, renewed and expired over the
wire by real clients, a SCRAM login with a token acting as its owner under the ACLs, the
rules Kafka enforces (no tokens from a token login, only the owner and renewers renew or
expire, an expired token logs in no more), the controller's sweep of expired tokens, and
Kafka's own `kafka-delegation-tokens` tool and the Java client logging in with a token on a
three-node cluster.

librdkafka cannot log in with a delegation token (its SCRAM sends no `tokenauth`
extension; the librdkafka 2.16 shipped with confluent-kafka has no such string), so the
token logins here are the Java client's and ours."""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import subprocess
import time

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from conftest import needs_java, wait_until
from replication_helpers import FAST

import logbroker
from logbroker.client.connection import BrokerConnection
from logbroker.common.acl import STANDARD_AUTHORIZER
from logbroker.protocol import REQUESTS, ErrorCode

SECRET = "cluster-token-secret"
PLAIN = (
    'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
    'password="admin-secret" user_admin="admin-secret";'
)
CONFIG = {
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN,
    "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
    "delegation.token.secret.key": SECRET,
    "authorizer.class.name": STANDARD_AUTHORIZER,
    "super.users": "User:admin",
}


def scram(user: str, password: str, mechanism: str = "SCRAM-SHA-512") -> dict[str, str]:
    return {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }


def token_login(token_id: str, token_hmac: bytes, mechanism: str = "SCRAM-SHA-256") -> dict[str, str]:
    """Our client's settings to log in with a token (the Java client's JAAS form)."""
    return {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{token_id}" password="{base64.b64encode(token_hmac).decode()}" '
        'tokenauth="true";',
    }


def setup(bs: str) -> None:
    """alice and bob (SCRAM users); alice may write and read `alices`, bob nothing."""
    admin = AdminClient({"bootstrap.servers": bs, **scram("admin", "admin-secret", "PLAIN")})
    for user in ("alice", "bob"):
        for mech in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512):
            for f in admin.alter_user_scram_credentials(
                [UserScramCredentialUpsertion(user, ScramCredentialInfo(mech, 4096), f"{user}-secret".encode())]
            ).values():
                f.result(30)
    for f in admin.create_topics([NewTopic("alices", 1, 1), NewTopic("bobs", 1, 1)]).values():
        f.result(30)
    acls = [
        AclBinding(
            ResourceType.TOPIC,
            "alices",
            ResourcePatternType.LITERAL,
            "User:alice",
            "*",
            AclOperation.ALL,
            AclPermissionType.ALLOW,
        )
    ]
    for f in admin.create_acls(acls).values():
        f.result(30)


def create(c: BrokerConnection, max_lifetime_ms: int = -1, renewers=(), owner: str | None = None):
    req = REQUESTS[38]
    body = req(
        renewers=[req.CreatableRenewers(principal_type="User", principal_name=r) for r in renewers],
        max_lifetime_ms=max_lifetime_ms,
        owner_principal_type="User" if owner else None,
        owner_principal_name=owner,
    )
    return c._roundtrip(38, 3, body)


def test_tokens_over_the_wire_and_a_login_with_one(tmp_path):
    config = {**CONFIG, "delegation.token.expiry.time.ms": "600000"}
    with logbroker.Broker(data_dir=tmp_path / "d", listener="SASL_PLAINTEXT", config=config) as b:
        bs = b.bootstrap_servers
        setup(bs)
        with BrokerConnection(bs, config=scram("alice", "alice-secret")) as alice:
            r = create(alice, renewers=["bob"])
            assert r.error_code == 0 and (r.principal_type, r.principal_name) == ("User", "alice")
            assert (r.token_requester_principal_type, r.token_requester_principal_name) == ("User", "alice")
            token_id, token_hmac = r.token_id, bytes(r.hmac)
            assert token_hmac == hmac.new(SECRET.encode(), token_id.encode(), hashlib.sha512).digest()
            assert r.issue_timestamp_ms < r.expiry_timestamp_ms <= r.issue_timestamp_ms + 600000
            assert r.max_timestamp_ms == r.issue_timestamp_ms + 7 * 24 * 3600 * 1000  # delegation.token.max.lifetime.ms
            d = alice._roundtrip(41, 3, REQUESTS[41](owners=None))
            assert [(t.token_id, t.principal_name, [x.principal_name for x in t.renewers]) for t in d.tokens] == [
                (token_id, "alice", ["bob"])
            ]
            # a token for someone else needs CREATE_TOKENS on that user
            assert create(alice, owner="bob").error_code == ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED

        # log in with the token: our client acts as alice, under alice's ACLs
        with logbroker.Producer(
            bs, **token_login(token_id, token_hmac), request_timeout_ms=10000, max_block_ms=3000
        ) as p:
            p.send("alices", b"written-with-a-token").result(30)
            # bob's topic is not alice's: not even in her metadata
            with pytest.raises(Exception, match="AUTHORIZATION|not present in metadata"):
                p.send("bobs", b"x").result(30)
        with logbroker.Consumer(
            bs, **token_login(token_id, token_hmac, "SCRAM-SHA-512"), group_id=None, auto_offset_reset="earliest"
        ) as c:
            c.assign([("alices", 0)])
            got = []
            deadline = time.monotonic() + 20
            while not got and time.monotonic() < deadline:
                got = c.poll(0.5)
            assert [r.value for r in got] == [b"written-with-a-token"]
        # a token login may not ask for tokens (a token cannot mint tokens)
        with BrokerConnection(bs, config=token_login(token_id, token_hmac)) as via_token:
            assert create(via_token).error_code == ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
        # a wrong HMAC is a failed login
        with pytest.raises(Exception, match="uthentication"):
            BrokerConnection(bs, config=token_login(token_id, b"\x00" * 64))

        # renew and expire: the owner and the renewers only
        with BrokerConnection(bs, config=scram("admin", "admin-secret", "PLAIN")) as admin:
            r = admin._roundtrip(39, 2, REQUESTS[39](hmac=token_hmac, renew_period_ms=1000))
            assert r.error_code == ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH
            assert (
                admin._roundtrip(39, 2, REQUESTS[39](hmac=b"nope", renew_period_ms=1)).error_code
                == ErrorCode.DELEGATION_TOKEN_NOT_FOUND
            )
            # a super user with DESCRIBE_TOKENS (implied) sees every token
            assert [t.token_id for t in admin._roundtrip(41, 3, REQUESTS[41](owners=None)).tokens] == [token_id]
        with BrokerConnection(bs, config=scram("bob", "bob-secret")) as bob:
            before = time.time() * 1000
            r = bob._roundtrip(39, 2, REQUESTS[39](hmac=token_hmac, renew_period_ms=3_600_000))
            assert r.error_code == 0 and before + 3_500_000 < r.expiry_timestamp_ms
            assert [t.token_id for t in bob._roundtrip(41, 3, REQUESTS[41](owners=None)).tokens] == [token_id]
            r = bob._roundtrip(40, 2, REQUESTS[40](hmac=token_hmac, expiry_time_period_ms=-1))
            assert r.error_code == 0
            assert bob._roundtrip(41, 3, REQUESTS[41](owners=None)).tokens == []
        with pytest.raises(Exception, match="uthentication"):
            BrokerConnection(bs, config=token_login(token_id, token_hmac))


def test_expired_tokens_are_refused_and_swept(tmp_path):
    config = {**CONFIG, "delegation.token.expiry.time.ms": "1500", "delegation.token.expiry.check.interval.ms": "500"}
    with logbroker.Broker(data_dir=tmp_path / "d", listener="SASL_PLAINTEXT", config=config) as b:
        setup(b.bootstrap_servers)
        with BrokerConnection(b.bootstrap_servers, config=scram("alice", "alice-secret")) as alice:
            r = create(alice)
            token_id, token_hmac = r.token_id, bytes(r.hmac)
            with BrokerConnection(b.bootstrap_servers, config=token_login(token_id, token_hmac)):
                pass  # valid now
            wait_until(
                lambda: not alice._roundtrip(41, 3, REQUESTS[41](owners=None)).tokens,
                timeout=10,
                what="the controller's sweep of the expired token",
            )
        with pytest.raises(Exception, match="uthentication"):
            BrokerConnection(b.bootstrap_servers, config=token_login(token_id, token_hmac))
        # the sweep went through the metadata log: after a restart the token is still gone
        b.restart()
        with BrokerConnection(b.bootstrap_servers, config=scram("alice", "alice-secret")) as alice:
            assert alice._roundtrip(41, 3, REQUESTS[41](owners=None)).tokens == []


def test_tokens_off_without_a_secret_and_not_on_plaintext(tmp_path):
    config = {k: v for k, v in CONFIG.items() if k != "delegation.token.secret.key"}
    with logbroker.Broker(data_dir=tmp_path / "d", listener="SASL_PLAINTEXT", config=config) as b:
        with BrokerConnection(b.bootstrap_servers, config=scram("admin", "admin-secret", "PLAIN")) as c:
            assert create(c).error_code == ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED
            assert c._roundtrip(41, 3, REQUESTS[41](owners=None)).error_code == ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED
    with logbroker.Broker(data_dir=tmp_path / "p", config={"delegation.token.secret.key": SECRET}) as b:
        with BrokerConnection(b.bootstrap_servers) as c:
            assert create(c).error_code == ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
            assert (
                c._roundtrip(39, 2, REQUESTS[39](hmac=b"x", renew_period_ms=1)).error_code
                == ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
            )


@needs_java
@pytest.mark.timeout(420)
def test_kafka_delegation_tokens_tool_and_java_token_logins_on_three_nodes(tmp_path):
    """Kafka's kafka-delegation-tokens creates, describes, renews and expires a token against a
    three-node cluster (through nodes that are not the active controller: forwarded); the Java
    console producer and consumer log in with it on every node (each derives the HMAC from the
    shared secret); our client does too."""
    from benches.peers.kafka import install

    tools = install()
    # the nodes reach each other on the harness's PLAINTEXT listener, as User:ANONYMOUS
    config = {**FAST, **CONFIG, "offsets.topic.replication.factor": 3, "super.users": "User:admin;User:ANONYMOUS"}
    with logbroker.Cluster(3, data_dir=tmp_path / "c", config=config, listeners=["SASL_PLAINTEXT"]) as cluster:
        bs = cluster.bootstrap("SASL_PLAINTEXT")
        setup(bs)
        admin = AdminClient({"bootstrap.servers": bs, **scram("admin", "admin-secret", "PLAIN")})
        acl = AclBinding(
            ResourceType.GROUP,
            "*",
            ResourcePatternType.LITERAL,
            "User:alice",
            "*",
            AclOperation.ALL,
            AclPermissionType.ALLOW,
        )
        for f in admin.create_acls([acl]).values():
            f.result(30)
        alice_props = tmp_path / "alice.properties"
        alice_props.write_text(
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
            "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
            'username="alice" password="alice-secret";\n'
        )

        def tool(*args: str) -> str:
            cmd = tools.tools_java(
                "org.apache.kafka.tools.DelegationTokenCommand",
                ["--bootstrap-server", bs, "--command-config", str(alice_props), *args],
            )
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
            assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
            return r.stdout

        out = tool("--create", "--max-life-time-period", "-1", "--renewer-principal", "User:bob")
        m = re.search(r"^(\S+)\s+(\S+)\s+User:alice\s+User:alice\s+\[User:bob\]", out, re.M)
        assert m, out
        token_id, token_b64 = m.group(1), m.group(2)
        token_hmac = base64.b64decode(token_b64)
        assert token_hmac == hmac.new(SECRET.encode(), token_id.encode(), hashlib.sha512).digest()
        assert token_id in tool("--describe")

        token_props = tmp_path / "token.properties"
        token_props.write_text(
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
            "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{token_id}" password="{token_b64}" tokenauth="true";\n'
        )
        lines = [f"via-token-{i}" for i in range(30)]
        for node in cluster.nodes:  # each node checks the token itself
            one = f"127.0.0.1:{node.listener_ports['SASL_PLAINTEXT']}"
            cmd = tools.tools_java(
                "org.apache.kafka.tools.ConsoleProducer",
                ["--bootstrap-server", one, "--topic", "alices", "--command-config", str(token_props)],
            )
            r = subprocess.run(
                cmd, input="".join(x + "\n" for x in lines[:10]).encode(), capture_output=True, timeout=120
            )
            assert r.returncode == 0, r.stderr.decode()[-3000:]
            lines = lines[10:] + lines[:10]
        cmd = tools.tools_java(
            "org.apache.kafka.tools.consumer.ConsoleConsumer",
            [
                "--bootstrap-server",
                bs,
                "--topic",
                "alices",
                "--from-beginning",
                "--max-messages",
                "30",
                "--timeout-ms",
                "60000",
                "--group",
                "token-readers",
                "--command-config",
                str(token_props),
            ],
        )
        r = subprocess.run(cmd, capture_output=True, timeout=180)
        assert r.returncode == 0, r.stderr.decode()[-3000:]
        assert sorted(r.stdout.decode().splitlines()) == sorted(f"via-token-{i}" for i in range(30))
        with logbroker.Producer(bs, **token_login(token_id, token_hmac)) as p:
            p.send("alices", b"ours-via-token").result(30)

        out = tool("--renew", "--hmac", token_b64, "--renew-time-period", "3600000")
        assert "Completed renew operation. New expiry date" in out, out
        tool("--expire", "--hmac", token_b64, "--expiry-time-period", "-1")
        assert token_id not in tool("--describe")
        cmd = tools.tools_java(
            "org.apache.kafka.tools.ConsoleProducer",
            ["--bootstrap-server", bs, "--topic", "alices", "--command-config", str(token_props)],
        )
        r = subprocess.run(cmd, input=b"after-expiry\n", capture_output=True, timeout=120)
        assert "SaslAuthenticationException" in r.stderr.decode(), r.stderr.decode()[-2000:]


def test_token_changes_and_token_logins_are_audited(tmp_path):
    """The audit log (broker/audit_log.py) records a token's creation, renewal and expiry by
    its id (never its HMAC), and a login with it as the owner's successful authentication."""
    import json

    audit = tmp_path / "audit.log"
    config = {**CONFIG, "audit.log.file": str(audit)}
    with logbroker.Broker(data_dir=tmp_path / "d", listener="SASL_PLAINTEXT", config=config) as b:
        setup(b.bootstrap_servers)
        with BrokerConnection(b.bootstrap_servers, config=scram("alice", "alice-secret")) as alice:
            r = create(alice)
            token_id, token_hmac = r.token_id, bytes(r.hmac)
            with BrokerConnection(b.bootstrap_servers, config=token_login(token_id, token_hmac)):
                pass
            alice._roundtrip(39, 2, REQUESTS[39](hmac=token_hmac, renew_period_ms=60000))
            alice._roundtrip(40, 2, REQUESTS[40](hmac=token_hmac, expiry_time_period_ms=-1))

        def lines():
            return [json.loads(x) for x in audit.read_text().splitlines()] if audit.exists() else []

        def changes():
            return [
                (x["change"], x["resource"], x["outcome"], x["principal"])
                for x in lines()
                if x["event"] == "metadata" and "delegation" in x["change"]
            ]

        wait_until(lambda: len(changes()) == 3, timeout=10, what="the audit lines of the token's changes")
        assert changes() == [
            (f"{c}_delegation_token", token_id, "success", "User:alice") for c in ("create", "renew", "expire")
        ]
        assert base64.b64encode(token_hmac).decode() not in audit.read_text()
        logins = [
            x
            for x in lines()
            if x["event"] == "authentication" and x["outcome"] == "success" and x.get("mechanism") == "SCRAM-SHA-256"
        ]
        assert any(x["principal"] == "User:alice" for x in logins)
