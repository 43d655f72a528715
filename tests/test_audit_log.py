"""The audit log (broker/audit_log.py): on a SASL_PLAINTEXT broker with the StandardAuthorizer,
a good and a bad login, a denied Produce and Fetch (the network thread's data path) and a denied
CreateTopics (a Python handler) appear once each with principal, client address, resource
and outcome; a burst of denials is cut to audit.log.denials.per.second with a "suppressed"
count; topic creation, a config change, an ACL, a SCRAM user and a client quota each appear
with the principal who made them; audit.log.topic receives the file's lines. Without a
broker: the rate limiter, the data path's denial line, a file moved away (logrotate). An
unusable audit.log.file stops the start with an error naming the key."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
import trio
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from conftest import wait_until

import logbroker
from logbroker.broker.audit_log import DENIAL_LINE, AuditLog, claimed_user
from logbroker.common.config import BrokerConfig

JAAS = (
    'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
    'password="admin-secret" user_admin="admin-secret" user_bob="bob-secret";'
)
CONFIG = {
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
    "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:admin",
    "connection.failed.authentication.delay.ms": "0",
    "audit.log.denials.per.second": "3",
}
AUDIT_TOPIC = "_audit"


def login(bootstrap: str, user: str, password: str) -> dict[str, str]:
    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": user,
        "sasl.password": password,
    }


def lines(path: Path) -> list[dict]:
    """Every line of the file, each parsed (a line that is not JSON fails the test)."""
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    assert text == "" or text.endswith("\n")
    return [json.loads(line) for line in text.splitlines()]


def matching(path: Path, **want) -> list[dict]:
    return [e for e in lines(path) if all(e.get(k) == v for k, v in want.items())]


def test_audit_log_of_a_secured_broker(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    config = {**CONFIG, "audit.log.file": str(path), "audit.log.topic": AUDIT_TOPIC}
    with logbroker.Broker(data_dir=tmp_path / "d", listener="SASL_PLAINTEXT", config=config) as b:
        bootstrap = b.bootstrap_servers
        admin = AdminClient(login(bootstrap, "admin", "admin-secret"))
        for fut in admin.create_topics([NewTopic("orders", 1, 1)]).values():
            fut.result(30)

        # authentication: a good login (the admin's) and a wrong password
        ok = wait_until(
            lambda: matching(path, event="authentication", outcome="success", principal="User:admin"),
            what="the admin's login in the audit log",
        )[0]
        assert ok["mechanism"] == "PLAIN" and ok["listener"] == "SASL_PLAINTEXT" and ok["node"] == 1
        assert ok["client"].startswith("127.0.0.1:") and ok["time"].endswith("Z")
        wrong = AdminClient(
            {
                **login(bootstrap, "bob", "not-his-password"),
                "reconnect.backoff.ms": 10000,
                "reconnect.backoff.max.ms": 10000,
            }
        )
        with pytest.raises(KafkaException):
            wrong.list_topics(timeout=2)
        del wrong
        failed = wait_until(
            lambda: matching(path, event="authentication", outcome="failure", principal="User:bob"),
            what="bob's failed login",
        )[0]
        assert failed["mechanism"] == "PLAIN" and "wrong password" in failed["reason"]
        assert failed["client"].startswith("127.0.0.1:")

        # metadata changes, each with the admin's principal
        acl = AclBinding(
            ResourceType.TOPIC,
            "orders",
            ResourcePatternType.LITERAL,
            "User:bob",
            "*",
            AclOperation.DESCRIBE,
            AclPermissionType.ALLOW,
        )
        for fut in admin.create_acls([acl]).values():
            fut.result(30)
        retention = ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET)
        for fut in admin.incremental_alter_configs(
            [ConfigResource("topic", "orders", incremental_configs=[retention])]
        ).values():
            fut.result(30)
        for fut in admin.alter_user_scram_credentials(
            [
                UserScramCredentialUpsertion(
                    "carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"carol-secret"
                )
            ]
        ).values():
            fut.result(30)
        from logbroker.client import Admin

        with Admin(
            bootstrap,
            **{k: v for k, v in login(bootstrap, "admin", "admin-secret").items() if k != "bootstrap.servers"},
        ) as own:
            own.alter_client_quotas([({"user": "bob"}, {"producer_byte_rate": 1048576})])

        def change(name: str, resource: str) -> dict:
            return wait_until(
                lambda: matching(path, event="metadata", change=name, resource=resource), what=f"{name} {resource}"
            )[0]

        created = change("create_topic", "orders")
        assert (created["principal"], created["outcome"], created["resource_type"], created["api"]) == (
            "User:admin",
            "success",
            "TOPIC",
            "CreateTopics",
        )
        assert created["partitions"] == 1 and created["client"].startswith("127.0.0.1:")
        acl_line = change("create_acl", "orders")
        assert acl_line["principal"] == "User:admin" and acl_line["acl"] == {
            "pattern_type": "LITERAL",
            "principal": "User:bob",
            "host": "*",
            "operation": "DESCRIBE",
            "permission": "ALLOW",
        }
        configs = change("alter_configs", "orders")
        assert configs["principal"] == "User:admin" and configs["configs"] == {"retention.ms": "3600000"}
        scram = change("alter_scram_credentials", "carol")
        assert scram["principal"] == "User:admin" and scram["upserted"] == ["SCRAM-SHA-256"]
        assert "carol-secret" not in path.read_text() and "salt" not in json.dumps(scram)
        quota = change("alter_client_quotas", "user=bob")
        assert quota["principal"] == "User:admin" and quota["quotas"] == {"producer_byte_rate": 1048576.0}

        # a denied Produce (the network thread's): bob may describe orders, not write it
        producer = Producer({**login(bootstrap, "bob", "bob-secret"), "acks": "all", "retries": 0})
        errors = []
        producer.produce("orders", b"x", on_delivery=lambda err, _msg: errors.append(err))
        producer.flush(30)
        assert errors and errors[0] is not None and errors[0].name() == "TOPIC_AUTHORIZATION_FAILED"
        produce = wait_until(lambda: matching(path, event="authorization", api="Produce"), what="the denied Produce")
        assert len(produce) == 1, produce
        assert {
            k: produce[0][k] for k in ("principal", "outcome", "operation", "resource_type", "resource", "listener")
        } == {
            "principal": "User:bob",
            "outcome": "denied",
            "operation": "WRITE",
            "resource_type": "TOPIC",
            "resource": "orders",
            "listener": "SASL_PLAINTEXT",
        }
        assert produce[0]["client"].startswith("127.0.0.1:")
        assert wait_until(lambda: matching(path, event="authentication", outcome="success", principal="User:bob"))
        reader = Consumer({**login(bootstrap, "bob", "bob-secret"), "group.id": "bobs", "enable.auto.commit": False})
        reader.assign([TopicPartition("orders", 0, 0)])  # straight to Fetch, no group or offset APIs
        try:
            fetch = wait_until(
                lambda: (reader.poll(0.2), matching(path, event="authorization", api="Fetch"))[1],
                what="the denied Fetch",
            )
        finally:
            reader.close()
        assert (fetch[0]["principal"], fetch[0]["operation"], fetch[0]["resource"]) == ("User:bob", "READ", "orders")

        # a denied CreateTopics (a Python handler): once, on the topic (not the cluster check before it)
        bob = AdminClient(login(bootstrap, "bob", "bob-secret"))
        with pytest.raises(KafkaException, match="AUTHORIZATION"):
            for fut in bob.create_topics([NewTopic("bobs", 1, 1)]).values():
                fut.result(30)
        create = wait_until(
            lambda: matching(path, event="authorization", api="CreateTopics"), what="the denied CreateTopics"
        )
        assert len(create) == 1, create
        assert (create[0]["principal"], create[0]["operation"], create[0]["resource_type"], create[0]["resource"]) == (
            "User:bob",
            "CREATE",
            "TOPIC",
            "bobs",
        )
        assert not matching(path, event="authorization", resource_type="CLUSTER")

        # a burst of denials: 3 a second are written, the rest counted
        burst = 30
        futures = [
            fut for _ in range(burst) for fut in bob.describe_configs([ConfigResource("topic", "orders")]).values()
        ]
        for fut in futures:
            with pytest.raises(KafkaException):
                fut.result(30)

        def described() -> list[dict]:
            found = matching(path, event="authorization", api="DescribeConfigs", operation="DESCRIBE_CONFIGS")
            return found if sum(e.get("suppressed", 1) for e in found) == burst else []

        denials = wait_until(described, what=f"{burst} denials of DescribeConfigs, counted")
        summaries = [e for e in denials if "suppressed" in e]
        assert summaries and all(e["resource"] == "orders" and e["principal"] == "User:bob" for e in denials)
        assert len(denials) - len(summaries) <= 3 * len(summaries) + 3, denials

        # the topic has the file's lines
        expected = {json.dumps(e, sort_keys=True) for e in lines(path)}
        consumer = Consumer(
            {**login(bootstrap, "admin", "admin-secret"), "group.id": "audit-reader", "auto.offset.reset": "earliest"}
        )
        consumer.subscribe([AUDIT_TOPIC])
        seen: set[str] = set()
        deadline = time.monotonic() + 30
        try:
            while not expected <= seen and time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is not None and msg.error() is None:
                    assert msg.key() == b"1"
                    seen.add(json.dumps(json.loads(msg.value()), sort_keys=True))
        finally:
            consumer.close()
        assert expected <= seen, sorted(expected - seen)[:5]


def test_an_unusable_audit_file_stops_the_start(tmp_path: Path) -> None:
    (tmp_path / "not-a-dir").write_text("")
    path = tmp_path / "not-a-dir" / "audit.log"
    with pytest.raises(Exception, match="audit.log.file") as e:
        with logbroker.Broker(data_dir=tmp_path / "d", config={"audit.log.file": str(path)}):
            pass
    assert str(path) in str(e.value)


# --- without a broker -------------------------------------------------------------------


def test_rate_limit_windows_and_summaries(tmp_path: Path) -> None:
    audit = AuditLog(BrokerConfig({"audit.log.file": str(tmp_path / "a.log"), "audit.log.denials.per.second": "2"}))
    before = int(time.monotonic())
    while int(time.monotonic()) == before:  # at the start of a second, so the burst fits in it
        time.sleep(0.01)
    for _ in range(7):
        audit.denied("User:x", "127.0.0.1:1", "PLAINTEXT", "Metadata", "DESCRIBE", "TOPIC", "t")
    audit.denied("User:y", "127.0.0.1:2", "PLAINTEXT", "Metadata", "DESCRIBE", "TOPIC", "t")
    assert [(e["principal"], e.get("suppressed")) for e in audit._pending] == [
        ("User:x", None),
        ("User:x", None),
        ("User:y", None),
    ]
    while int(time.monotonic()) == before + 1:
        time.sleep(0.01)
    audit._sweep()
    assert [(e["principal"], e.get("suppressed")) for e in audit._pending[3:]] == [("User:x", 5)]
    assert audit._windows == {}
    audit.authentication("success", "User:x", "127.0.0.1:1", "PLAINTEXT", "PLAIN")
    off = AuditLog(BrokerConfig({"audit.log.file": "x", "audit.log.events": "metadata"}))
    off.authentication("success", "User:x", "127.0.0.1:1", "PLAINTEXT", "PLAIN")
    off.denied("User:x", "127.0.0.1:1", "PLAINTEXT", "Metadata", "DESCRIBE", "TOPIC", "t")
    assert off._pending == [] and len(audit._pending) == 5
    assert AuditLog.from_config(BrokerConfig({})) is None


def test_data_path_denial_lines_and_claimed_users() -> None:
    line = 'User:bob from 127.0.0.1:5000 denied WRITE on TOPIC "orders" (Produce, listener 1)'
    assert DENIAL_LINE.match(line).groupdict() == {
        "principal": "User:bob",
        "client": "127.0.0.1:5000",
        "operation": "WRITE",
        "resource_type": "TOPIC",
        "resource": "orders",
        "api": "Produce",
        "listener": "1",
    }
    audit = AuditLog(BrokerConfig({"audit.log.file": "x"}))
    assert audit.datapath_line(line, ["INTERNAL", "SASL_PLAINTEXT"])
    assert audit.datapath_line(
        'User:a b from [::1]:7 denied WRITE on TRANSACTIONAL_ID "t\\"x" (Produce, listener 0)', ["INTERNAL"]
    )
    crafted = 'x" (Produce, listener 0) from 1.2.3.4:5 denied'  # a transactional id cannot fake the fields
    assert audit.datapath_line(
        "User:c from 127.0.0.1:9 denied WRITE on TRANSACTIONAL_ID " + json.dumps(crafted) + " (Produce, listener 0)",
        ["INTERNAL"],
    )
    assert not audit.datapath_line("produce to t-0 from 127.0.0.1:1 rejected (NOT_LEADER): ...", ["X"])
    assert [(e["principal"], e["listener"], e["resource"]) for e in audit._pending] == [
        ("User:bob", "SASL_PLAINTEXT", "orders"),
        ("User:a b", "INTERNAL", 't"x'),
        ("User:c", "INTERNAL", crafted),
    ]
    assert claimed_user("authentication failed (PLAIN: user 'bob' gave a wrong password)") == "bob"
    assert (
        claimed_user('authentication failed (SCRAM-SHA-256: user "o\'neil" has no SCRAM-SHA-256 credential)')
        == "o'neil"
    )
    assert claimed_user("SaslAuthenticate from 127.0.0.1:1 without a SaslHandshake first") == ""


def test_the_file_is_reopened_when_moved_away(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    audit = AuditLog(BrokerConfig({"audit.log.file": str(path)}))

    async def main() -> None:
        await audit.open()
        async with trio.open_nursery() as nursery:
            await nursery.start(audit.run, "unused:0")
            audit.authentication("success", "User:a", "127.0.0.1:1", "PLAINTEXT", "PLAIN")
            while audit.lines_written < 1:
                await trio.sleep(0.01)
            os.rename(path, tmp_path / "audit.log.1")  # logrotate's rename
            audit.authentication("failure", "User:b", "127.0.0.1:2", "PLAINTEXT", "PLAIN", "wrong password")
            while audit.lines_written < 2:
                await trio.sleep(0.01)
            audit.authentication("success", "User:c", "127.0.0.1:3", "PLAINTEXT", "PLAIN")
            nursery.cancel_scope.cancel()  # the rest is written on the way out

    trio.run(main)
    assert [e["principal"] for e in lines(tmp_path / "audit.log.1")] == ["User:a"]
    assert [e["principal"] for e in lines(path)] == ["User:b", "User:c"]


def test_http_logins_are_audited(tmp_path: Path) -> None:
    """Logins to the broker's HTTP endpoints are authentications too: the console's (a user
    and password, good and bad) and the metrics endpoint's HTTP Basic (BASIC by default on a
    SASL broker), each with the endpoint as listener and the browser's or scraper's address."""
    import base64
    import http.client
    import urllib.error
    import urllib.request
    from urllib.parse import urlparse

    path = tmp_path / "audit.log"
    config = {**CONFIG, "audit.log.file": str(path), "console.listen": "127.0.0.1:0", "metrics.listen": "127.0.0.1:0"}
    with logbroker.Broker(data_dir=tmp_path / "d", listener="SASL_PLAINTEXT", config=config) as b:
        u = urlparse(b.console_url)
        cookie = ""
        for password, status in (("wrong", 401), ("bob-secret", 200)):
            conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
            conn.request(
                "POST",
                "/api/login",
                json.dumps({"username": "bob", "password": password}),
                {"Content-Type": "application/json"},
            )
            r = conn.getresponse()
            assert r.status == status
            cookie = (r.headers.get("Set-Cookie") or "").split(";")[0]
            conn.close()
        # a change with a forged CSRF token: refused, and a denial in the audit log
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
        conn.request("DELETE", "/api/topics/x", headers={"Cookie": cookie, "X-CSRF-Token": "forged"})
        assert conn.getresponse().status == 403
        conn.close()
        for password, status in (("nope", 401), ("admin-secret", 200)):
            req = urllib.request.Request(
                b.metrics_url,
                headers={"Authorization": "Basic " + base64.b64encode(f"admin:{password}".encode()).decode()},
            )
            try:
                with urllib.request.urlopen(req, timeout=10) as r:
                    got = r.status
            except urllib.error.HTTPError as e:
                with e:
                    got = e.code
            assert got == status

        def logins(listener: str) -> list[tuple]:
            return [
                (e["outcome"], e["principal"], e["mechanism"])
                for e in matching(path, event="authentication", listener=listener)
            ]

        wait_until(
            lambda: len(logins("console")) == 2 and len(logins("metrics")) == 2,
            timeout=10,
            what="the audit lines of the HTTP logins",
        )
        assert logins("console") == [("failure", "User:bob", None), ("success", "User:bob", "PLAIN")]
        assert logins("metrics") == [("failure", "User:admin", "HTTP-BASIC"), ("success", "User:admin", "HTTP-BASIC")]
        assert all(
            e["client"].startswith("127.0.0.1:") for e in matching(path, event="authentication", listener="console")
        )
        wait_until(
            lambda: matching(path, event="authorization", listener="console"),
            timeout=10,
            what="the audit line of the forged CSRF token",
        )
        [denial] = matching(path, event="authorization", listener="console")
        assert (denial["principal"], denial["operation"], denial["resource"]) == ("User:bob", "CSRF", "/api/topics/x")
