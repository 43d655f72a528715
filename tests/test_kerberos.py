"""Kerberos (SASL/GSSAPI) against a real MIT KDC on loopback (tests/kdc.py): the broker logs in
from its keytab (principal kafka/localhost), and librdkafka (kcat, through Cyrus SASL), the
Java client, Kafka's own tools and logbroker's Python client log in with theirs (or with a
ticket cache filled by kinit), produce and consume; principals become users through
sasl.kerberos.principal.to.local.rules, which ACLs then see (and which changes without a
restart); wrong tickets, tokens and configurations are refused with errors naming the cause.
"""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import time
from pathlib import Path

import pytest
from conftest import needs_java
from kdc import MiniKdc

import logbroker
from logbroker.client.admin import AclBinding
from logbroker.client.connection import BrokerConnection, ClientError
from logbroker.common.config import ConfigError
from logbroker.protocol import REQUESTS, ErrorCode

ADMIN = "admin-secret"
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


class Realm:
    """The KDC, its principals' keytabs, and the environment clients need."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.kdc = MiniKdc(root / "kdc").start()
        self.broker_keytab = root / "kafka.keytab"
        self.broker_principal = self.kdc.add_principal("kafka/localhost", self.broker_keytab)
        self.keytabs: dict[str, Path] = {}
        for user in ("alice", "bob", "bob/admin", "carol"):
            self.keytabs[user] = root / f"{user.replace('/', '_')}.keytab"
            self.kdc.add_principal(user, self.keytabs[user])
        self.stranger_keytab = root / "stranger.keytab"  # a principal of a realm the broker's rules do not map
        self.kdc.add_principal("dave", self.stranger_keytab)
        os.environ.update(self.kdc.env())  # this process's own clients and the broker read KRB5_CONFIG

    def principal(self, user: str) -> str:
        return f"{user}@{self.kdc.realm}"

    def broker_jaas(self) -> str:
        return (
            "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true "
            f'keyTab="{self.broker_keytab}" principal="{self.broker_principal}";'
        )

    def client_jaas(self, user: str) -> str:
        return (
            "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true "
            f'keyTab="{self.keytabs[user]}" principal="{self.principal(user)}";'
        )


@pytest.fixture(scope="module")
def realm(tmp_path_factory):
    saved = {k: os.environ.get(k) for k in ("KRB5_CONFIG", "KRB5_KDC_PROFILE")}
    r = Realm(tmp_path_factory.mktemp("realm"))
    yield r
    r.kdc.stop()
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def kerberos_broker(realm: Realm, data: Path, **config) -> logbroker.Broker:
    """A broker whose SASL_PLAINTEXT listener offers GSSAPI (and PLAIN for its admin),
    advertised as localhost: clients ask for tickets to kafka/localhost."""
    port = _free_port()
    settings = {
        "listeners": f"SASL_PLAINTEXT://127.0.0.1:{port}",
        "advertised.listeners": f"SASL_PLAINTEXT://localhost:{port}",
        "sasl.enabled.mechanisms": "GSSAPI,PLAIN",
        "sasl.kerberos.service.name": "kafka",
        "listener.name.sasl_plaintext.gssapi.sasl.jaas.config": realm.broker_jaas(),
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": (
            "org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'username="admin" password="{ADMIN}" user_admin="{ADMIN}";'
        ),
        **config,
    }
    return logbroker.Broker(data_dir=data, config=settings)


def bootstrap(b: logbroker.Broker) -> str:
    return f"localhost:{b.bootstrap_servers.rsplit(':', 1)[1]}"


def gssapi_conf(realm: Realm, user: str) -> dict:
    return {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "GSSAPI",
        "sasl_kerberos_keytab": str(realm.keytabs[user]),
        "sasl_kerberos_principal": realm.principal(user),
    }


def admin_conf() -> dict:
    return {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN", "sasl_username": "admin"} | {
        "sasl_password": ADMIN
    }


def kcat(realm: Realm, bs: str, user: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    cmd = [
        "kcat",
        "-b",
        bs,
        "-X",
        "security.protocol=SASL_PLAINTEXT",
        "-X",
        "sasl.mechanisms=GSSAPI",
        "-X",
        "sasl.kerberos.service.name=kafka",
        "-X",
        f"sasl.kerberos.keytab={realm.keytabs[user]}",
        "-X",
        f"sasl.kerberos.principal={realm.principal(user)}",
        *args,
    ]
    return subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=90, env=os.environ.copy())


def python_values(bs: str, conf: dict, topic: str, n: int, group: str) -> list[bytes]:
    c = logbroker.Consumer(bs, group_id=group, auto_offset_reset="earliest", **conf)
    try:
        c.subscribe([topic])
        got: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(got) < n and time.monotonic() < deadline:
            got += [r.value for r in c.poll(timeout=1.0)]
        return got
    finally:
        c.close()


def test_librdkafka_java_tools_and_python_log_in(realm, tmp_path):
    """kcat (librdkafka + Cyrus SASL, which runs kinit on the keytab), logbroker's client
    (keytab, then a kinit-filled ticket cache) and, in test_java_client_and_tools, Java: each
    produces, and everything produced is read back by another of them."""
    with kerberos_broker(realm, tmp_path / "d") as b:
        bs = bootstrap(b)
        r = kcat(realm, bs, "alice", "-t", "kerb", "-P", stdin="".join(f"rd-{i}\n" for i in range(20)))
        assert r.returncode == 0, r.stderr[-2000:]
        p = logbroker.Producer(bs, **gssapi_conf(realm, "bob"))
        for i in range(20):
            p.send("kerb", value=f"py-{i}".encode())
        p.flush(30)
        p.close()
        # carol: no keytab in the client's config, a ticket cache kinit filled (KRB5CCNAME)
        ccache = tmp_path / "carol.ccache"
        realm.kdc.kinit(realm.principal("carol"), realm.keytabs["carol"], ccache)
        os.environ["KRB5CCNAME"] = f"FILE:{ccache}"
        try:
            conf = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "GSSAPI"}
            got = python_values(bs, conf, "kerb", 40, "carol-group")
        finally:
            del os.environ["KRB5CCNAME"]
        assert sorted(got) == sorted([f"rd-{i}".encode() for i in range(20)] + [f"py-{i}".encode() for i in range(20)])
        r = kcat(realm, bs, "alice", "-t", "kerb", "-C", "-e", "-o", "beginning", "-q")
        assert r.returncode == 0, r.stderr[-2000:]
        assert sorted(r.stdout.split()) == sorted([f"rd-{i}" for i in range(20)] + [f"py-{i}" for i in range(20)])


@needs_java
def test_java_client_and_tools(realm, tmp_path):
    """The Java client (console producer and consumer) and Kafka's kafka-topics and
    kafka-configs log in with Krb5LoginModule and a keytab (java.security.krb5.conf names the
    realm); kafka-configs sets a dynamic sasl.kerberos.* key."""
    from benches.peers.kafka import install

    tools = install()
    props = tmp_path / "client.properties"
    props.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=GSSAPI\nsasl.kerberos.service.name=kafka\n"
        f"sasl.jaas.config={realm.client_jaas('alice')}\n"
    )

    def java(main: str, args: list[str], stdin: bytes | None = None) -> subprocess.CompletedProcess:
        cmd = tools.tools_java(main, args)
        cmd.insert(1, f"-Djava.security.krb5.conf={realm.kdc.krb5_conf}")
        r = subprocess.run(cmd, input=stdin, capture_output=True, timeout=120)
        assert r.returncode == 0, (r.stdout.decode()[-2000:], r.stderr.decode()[-3000:])
        return r

    with kerberos_broker(realm, tmp_path / "d") as b:
        bs = bootstrap(b)
        java(
            "org.apache.kafka.tools.TopicCommand",
            [
                "--bootstrap-server",
                bs,
                "--command-config",
                str(props),
                "--create",
                "--topic",
                "jk",
                "--partitions",
                "3",
            ],
        )
        out = java(
            "org.apache.kafka.tools.TopicCommand",
            ["--bootstrap-server", bs, "--command-config", str(props), "--describe", "--topic", "jk"],
        ).stdout.decode()
        assert "PartitionCount: 3" in out, out
        lines = [f"java-{i}" for i in range(50)]
        java(
            "org.apache.kafka.tools.ConsoleProducer",
            ["--bootstrap-server", bs, "--topic", "jk", "--command-config", str(props)],
            "".join(line + "\n" for line in lines).encode(),
        )
        out = java(
            "org.apache.kafka.tools.consumer.ConsoleConsumer",
            [
                "--bootstrap-server",
                bs,
                "--topic",
                "jk",
                "--from-beginning",
                "--max-messages",
                "50",
                "--timeout-ms",
                "60000",
                "--command-config",
                str(props),
            ],
        ).stdout.decode()
        assert sorted(out.split()) == sorted(lines)
        # librdkafka's admin test (0081) sets this broker key and expects it stored, as Kafka does
        java(
            "org.apache.kafka.tools.ConfigCommand",
            [
                "--bootstrap-server",
                bs,
                "--command-config",
                str(props),
                "--alter",
                "--entity-type",
                "brokers",
                "--entity-default",
                "--add-config",
                "sasl.kerberos.min.time.before.relogin=58000",
            ],
        )
        out = java(
            "org.apache.kafka.tools.ConfigCommand",
            ["--bootstrap-server", bs, "--command-config", str(props), "--describe", "--entity-type", "brokers"],
        ).stdout.decode()
        assert "sasl.kerberos.min.time.before.relogin=58000" in out, out


def test_principal_to_local_rules_name_the_user_acls_see(realm, tmp_path):
    """alice@REALM is User:alice (DEFAULT), bob/admin@REALM User:bob-admin (a RULE); ACLs
    granted to those users let them write, and nobody else; a principal no rule maps is
    refused at login; the rules change without a restart."""
    rules = "RULE:[2:$1-$2](bob-admin)s/.*/bob-admin/,RULE:[1:$1@$0](.*@LOGBROKER\\.TEST)s/@.*//"
    with kerberos_broker(
        realm,
        tmp_path / "d",
        **{
            "authorizer.class.name": STANDARD_AUTHORIZER,
            "super.users": "User:admin",
            "sasl.kerberos.principal.to.local.rules": rules,
        },
    ) as b:
        bs = bootstrap(b)
        admin = logbroker.Admin(bs, **admin_conf())
        try:
            admin.create_topics([logbroker.NewTopic("owned", 1, 1)])
            admin.create_acls(
                [
                    AclBinding("topic", "owned", "literal", "User:alice", "*", "write", "allow"),
                    AclBinding("topic", "owned", "literal", "User:alice", "*", "describe", "allow"),
                    AclBinding("topic", "owned", "literal", "User:bob-admin", "*", "write", "allow"),
                    AclBinding("topic", "owned", "literal", "User:bob-admin", "*", "describe", "allow"),
                ]
            )
        finally:
            admin.close()
        for user in ("alice", "bob/admin"):
            p = logbroker.Producer(bs, **gssapi_conf(realm, user))
            try:
                p.send("owned", value=user.encode()).result(30)
            finally:
                p.close()
        # bob@REALM maps to User:bob, who has no ACL
        p = logbroker.Producer(bs, **gssapi_conf(realm, "bob"), max_block_ms=5000)
        try:
            with pytest.raises(Exception, match="(?i)authoriz"):
                p.send("owned", value=b"bob").result(30)
        finally:
            p.close()
        BrokerConnection(bs, config=gssapi_conf(realm, "carol")).close()  # User:carol, by the second rule
        # rules changed without a restart, to ones that map no one-component principal: carol's
        # next login is refused
        admin = logbroker.Admin(bs, **admin_conf())
        try:
            admin.alter_configs({("broker", ""): {"sasl.kerberos.principal.to.local.rules": "RULE:[2:$1](nobody)"}})
        finally:
            admin.close()
        deadline = time.monotonic() + 30
        while b.server.config.get_str("sasl.kerberos.principal.to.local.rules") != "RULE:[2:$1](nobody)":
            assert time.monotonic() < deadline
            time.sleep(0.1)
        with pytest.raises(ClientError, match="Authentication failed"):
            BrokerConnection(bs, config=gssapi_conf(realm, "carol")).close()


def test_wrong_tickets_and_tokens_are_refused(realm, tmp_path, caplog):
    """A ticket for a service the broker's keytab does not hold (kafka/127.0.0.1), garbage
    tokens and a token after the exchange: SASL_AUTHENTICATION_FAILED with Kafka's message,
    the broker's log naming the cause; the broker goes on serving."""
    caplog.set_level(logging.INFO, logger="logbroker.common.sasl")
    with kerberos_broker(realm, tmp_path / "d") as b:
        port = b.bootstrap_servers.rsplit(":", 1)[1]
        # asking for kafka/127.0.0.1: the client cannot even get a ticket (no such principal)
        with pytest.raises(ClientError, match="(?i)kerberos"):
            BrokerConnection(f"127.0.0.1:{port}", config=gssapi_conf(realm, "alice")).close()
        # a principal of the realm that is a service the broker is not: a valid ticket for the
        # wrong principal is refused by the broker (its keytab cannot decrypt it)
        realm.kdc.add_principal("other/localhost", None)
        other = {**gssapi_conf(realm, "alice"), "sasl_kerberos_service_name": "other"}
        with pytest.raises(ClientError, match="Authentication failed"):
            BrokerConnection(f"localhost:{port}", config=other).close()
        refusals = [m for m in caplog.messages if "failed authentication" in m and "other/localhost" in m]
        assert refusals, caplog.messages[-10:]
        # garbage as the first token
        c = BrokerConnection(f"localhost:{port}")
        assert c._roundtrip(17, 1, REQUESTS[17](mechanism="GSSAPI")).error_code == 0
        r = c._roundtrip(36, 2, REQUESTS[36](auth_bytes=b"\x60\x01garbage"))
        assert r.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert r.error_message == (
            "Authentication failed during authentication due to invalid credentials with SASL mechanism GSSAPI"
        )
        c.close()
        # and a good login still works
        p = logbroker.Producer(bs := bootstrap(b), **gssapi_conf(realm, "alice"))
        p.send("after", value=b"x").result(30)
        p.close()
        assert python_values(bs, gssapi_conf(realm, "alice"), "after", 1, "g") == [b"x"]


@pytest.mark.parametrize(
    "change,message",
    [
        ({"listener.name.sasl_plaintext.gssapi.sasl.jaas.config": None}, "gssapi.sasl.jaas.config to"),
        ({"sasl.kerberos.service.name": None}, "no service name defined"),
        ({"sasl.kerberos.service.name": "kfk"}, "is not of service 'kfk'"),
        (
            {"listener.name.sasl_plaintext.gssapi.sasl.jaas.config": "x required useKeyTab=true;"},
            'needs keyTab="..." and principal="..."',
        ),
        ({"sasl.kerberos.principal.to.local.rules": "RULE:[1:$1](unclosed"}, "invalid"),
    ],
)
def test_configuration_errors_name_the_key(realm, tmp_path, change, message):
    settings = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "GSSAPI",
        "sasl.kerberos.service.name": "kafka",
        "listener.name.sasl_plaintext.gssapi.sasl.jaas.config": realm.broker_jaas(),
    }
    for k, v in change.items():
        if v is None:
            settings.pop(k)
        else:
            settings[k] = v
    with pytest.raises(ConfigError, match=message):
        with logbroker.Broker(data_dir=tmp_path / "d", config=settings):
            pass


def test_a_keytab_without_the_principal_is_refused_at_start(realm, tmp_path):
    jaas = realm.broker_jaas().replace(str(realm.broker_keytab), str(realm.keytabs["alice"]))
    settings = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "GSSAPI",
        "sasl.kerberos.service.name": "kafka",
        "listener.name.sasl_plaintext.gssapi.sasl.jaas.config": jaas,
    }
    with pytest.raises(Exception, match="alice.keytab"):
        with logbroker.Broker(data_dir=tmp_path / "d", config=settings):
            pass
