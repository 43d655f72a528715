"""SASL listeners (SASL_PLAINTEXT, SASL_SSL): librdkafka, kafka-python and the Java client
authenticate with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 and produce and consume; wrong
passwords and unknown users are refused quickly with Kafka's error; what a client may send
before authenticating (ApiVersions, SaslHandshake, SaslAuthenticate) and what closes the
connection (anything else, a SaslAuthenticate before the handshake, an oversize frame,
garbage); KIP-368 session lifetimes: clients re-authenticate and go on, a client that does
not is disconnected at its next request."""

from __future__ import annotations

import logging
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from conftest import kafka_python_values, needs_java, rdkafka_values
from test_tls import Pki

import logbroker
from logbroker.client.connection import BrokerConnection, ClientError
from logbroker.protocol import REQUESTS, ErrorCode

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

ADMIN_PASSWORD = "admin-secret"
JAAS = (
    'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
    f'password="{ADMIN_PASSWORD}" user_admin="{ADMIN_PASSWORD}" user_alice="alice-secret";'
)
SCRAM_USERS = {"bob": ("SCRAM-SHA-256", "bob-secret"), "carol": ("SCRAM-SHA-512", "carol-secret")}


def sasl_broker(tmp_path: Path, listener: str = "SASL_PLAINTEXT", **settings) -> logbroker.Broker:
    config = {f"listener.name.{listener.lower()}.plain.sasl.jaas.config": JAAS}
    return logbroker.Broker(data_dir=tmp_path / "d", listener=listener, config=config, **settings)


def rd(bs: str, mechanism: str, user: str, password: str, protocol: str = "SASL_PLAINTEXT", **extra) -> dict:
    return {
        "bootstrap.servers": bs,
        "security.protocol": protocol,
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
        **extra,
    }


def admin_conf(bs: str, **extra) -> dict:
    return {**rd(bs, "PLAIN", "admin", ADMIN_PASSWORD), **extra}


def add_scram_users(bs: str, **extra) -> None:
    admin = AdminClient(admin_conf(bs, **extra))
    ups = [
        UserScramCredentialUpsertion(
            user, ScramCredentialInfo(getattr(ScramMechanism, m.replace("-", "_")), 4096), password.encode()
        )
        for user, (m, password) in SCRAM_USERS.items()
    ]
    for fut in admin.alter_user_scram_credentials(ups).values():
        fut.result(30)


def authentication_error(conf: dict) -> str:
    """The authentication error librdkafka reports (error_cb, _AUTHENTICATION) for `conf`;
    it must come within a few seconds, not after retrying for long."""
    errors: list = []
    p = Producer({**conf, "error_cb": errors.append})
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and not any(e.code() == KafkaError._AUTHENTICATION for e in errors):
        p.poll(0.1)
    auth = [e for e in errors if e.code() == KafkaError._AUTHENTICATION]
    assert auth, f"no authentication error within 5 s: {errors}"
    return auth[0].str()


def roundtrip(conf: dict, topic: str, n: int = 200) -> list[bytes]:
    p = Producer({**conf, "acks": "all"})
    for i in range(n):
        p.produce(topic, b"%s-%d" % (topic.encode(), i))
    assert p.flush(30) == 0
    return rdkafka_values({**conf, "group.id": f"g-{topic}"}, topic, n)


def expected(topic: str, n: int = 200) -> list[bytes]:
    return sorted(b"%s-%d" % (topic.encode(), i) for i in range(n))


def test_librdkafka_plain_and_scram(tmp_path):
    with sasl_broker(tmp_path) as b:
        bs = b.bootstrap_servers
        admin = AdminClient(admin_conf(bs))
        admin.create_topics([NewTopic("s-plain", 2, 1)])["s-plain"].result(20)
        assert sorted(roundtrip(admin_conf(bs), "s-plain")) == expected("s-plain")
        assert sorted(roundtrip(rd(bs, "PLAIN", "alice", "alice-secret"), "s-alice")) == expected("s-alice")
        add_scram_users(bs)
        for user, (mechanism, password) in SCRAM_USERS.items():
            topic = f"s-{user}"
            assert sorted(roundtrip(rd(bs, mechanism, user, password), topic)) == expected(topic)
        # PLAIN also takes a SCRAM user's password (checked against the stored credential).
        assert sorted(roundtrip(rd(bs, "PLAIN", "bob", "bob-secret"), "s-bob2")) == expected("s-bob2")


@pytest.mark.parametrize(
    "mechanism,user,password",
    [
        ("PLAIN", "alice", "wrong"),
        ("PLAIN", "nobody", "x"),
        ("SCRAM-SHA-256", "bob", "wrong"),
        ("SCRAM-SHA-512", "bob", "bob-secret"),  # bob has only a SCRAM-SHA-256 credential
        ("SCRAM-SHA-256", "nobody", "x"),
    ],
)
def test_librdkafka_wrong_credentials_fail_fast(tmp_path, mechanism, user, password):
    with sasl_broker(tmp_path) as b:
        bs = b.bootstrap_servers
        add_scram_users(bs)
        assert authentication_error(rd(bs, mechanism, user, password))
        # The broker goes on serving everyone else.
        assert sorted(roundtrip(admin_conf(bs), "after", 20)) == expected("after", 20)


def test_kafka_python_plain_and_scram(tmp_path, caplog):
    from kafka import KafkaConsumer, KafkaProducer

    caplog.set_level(logging.INFO, logger="logbroker.common.sasl")
    with sasl_broker(tmp_path) as b:
        bs = b.bootstrap_servers
        add_scram_users(bs)
        for mechanism, user, password in [
            ("PLAIN", "alice", "alice-secret"),
            ("SCRAM-SHA-256", "bob", "bob-secret"),
            ("SCRAM-SHA-512", "carol", "carol-secret"),
        ]:
            auth = {
                "security_protocol": "SASL_PLAINTEXT",
                "sasl_mechanism": mechanism,
                "sasl_plain_username": user,
                "sasl_plain_password": password,
            }
            topic = f"kp-{user}"
            kp = KafkaProducer(bootstrap_servers=bs, **auth)
            for i in range(50):
                kp.send(topic, b"%d" % i)
            kp.flush(30)
            kp.close()
            kc = KafkaConsumer(topic, bootstrap_servers=bs, auto_offset_reset="earliest", **auth)
            assert sorted(int(v) for v in kafka_python_values(kc, 50)) == list(range(50))
            kc.close()
        # A wrong password, in a process of its own (kafka-python leaks sockets when it fails).
        code = (
            "import logging\nlogging.basicConfig(level=logging.ERROR)\nfrom kafka import KafkaProducer\n"
            "try:\n"
            f"    KafkaProducer(bootstrap_servers={bs!r}, security_protocol='SASL_PLAINTEXT',\n"
            "                  sasl_mechanism='SCRAM-SHA-256', sasl_plain_username='bob',\n"
            "                  sasl_plain_password='wrong', max_block_ms=5000)\n"
            "except Exception as e:\n"
            "    print(type(e).__name__, e)\n"
        )
        r = subprocess.run([sys.executable, "-W", "ignore", "-c", code], capture_output=True, text=True, timeout=60)
        # It gives up at max_block_ms ("Unable to bootstrap"); whether it logs the broker's
        # message first depends on whether it reads the answer before the close (Kafka delays
        # that close by connection.failed.authentication.delay.ms; logbroker does not yet).
        assert "KafkaTimeoutError" in r.stdout, (r.stdout, r.stderr[-2000:])
        refusals = [m for m in caplog.messages if "failed authentication" in m and "'bob' gave a wrong password" in m]
        assert refusals, caplog.messages[-20:]


@needs_java
def test_java_client_scram(tmp_path):
    from benches.peers.kafka import install

    tools = install()
    props = tmp_path / "client.properties"
    props.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="carol" password="carol-secret";\n'
    )
    with sasl_broker(tmp_path) as b:
        bs = b.bootstrap_servers
        add_scram_users(bs)
        lines = [f"java-sasl-{i}" for i in range(100)]
        cmd = tools.tools_java(
            "org.apache.kafka.tools.ConsoleProducer",
            ["--bootstrap-server", bs, "--topic", "java-sasl", "--command-config", str(props)],
        )
        r = subprocess.run(cmd, input="".join(line + "\n" for line in lines).encode(), capture_output=True, timeout=120)
        assert r.returncode == 0, r.stderr.decode()[-3000:]
        cmd = tools.tools_java(
            "org.apache.kafka.tools.consumer.ConsoleConsumer",
            [
                "--bootstrap-server",
                bs,
                "--topic",
                "java-sasl",
                "--from-beginning",
                "--max-messages",
                "100",
                "--timeout-ms",
                "60000",
                "--command-config",
                str(props),
            ],
        )
        r = subprocess.run(cmd, capture_output=True, timeout=120)
        assert r.returncode == 0, r.stderr.decode()[-3000:]
        assert r.stdout.decode().splitlines() == lines
        # A wrong password: the tool fails with Kafka's authentication error, it does not hang.
        bad = tmp_path / "bad.properties"
        bad.write_text(props.read_text().replace("carol-secret", "wrong"))
        cmd = tools.tools_java(
            "org.apache.kafka.tools.consumer.ConsoleConsumer",
            [
                "--bootstrap-server",
                bs,
                "--topic",
                "java-sasl",
                "--from-beginning",
                "--max-messages",
                "1",
                "--timeout-ms",
                "20000",
                "--command-config",
                str(bad),
            ],
        )
        r = subprocess.run(cmd, capture_output=True, timeout=120)  # (the tool exits 0 all the same)
        assert (
            "SaslAuthenticationException: Authentication failed during authentication due to invalid "
            "credentials with SASL mechanism SCRAM-SHA-512" in r.stderr.decode()
        ), r.stderr.decode()[-3000:]
        assert "Processed a total of 0 messages" in r.stderr.decode()


def test_sasl_ssl_with_librdkafka(tmp_path):
    pki = Pki(tmp_path)
    with sasl_broker(tmp_path, "SASL_SSL", ssl_keystore_location=str(pki.keystore)) as b:
        bs = b.bootstrap_servers
        tls = {"ssl.ca.location": str(pki.ca_pem)}
        add_scram_users(bs, **{"security.protocol": "SASL_SSL", "ssl.ca.location": str(pki.ca_pem)})
        conf = rd(bs, "SCRAM-SHA-256", "bob", "bob-secret", "SASL_SSL", **tls)
        assert sorted(roundtrip(conf, "ssl-bob")) == expected("ssl-bob")
        assert "Authentication failed" in authentication_error(
            rd(bs, "SCRAM-SHA-256", "bob", "wrong", "SASL_SSL", **tls)
        )


# --- the protocol, byte by byte ------------------------------------------------------------


@pytest.fixture
def conns():
    """Opens connections (`conns(broker)`) that have sent ApiVersions only (allowed before
    authenticating); closes them at the end."""
    opened: list[BrokerConnection] = []

    def open_one(b: logbroker.Broker) -> BrokerConnection:
        opened.append(BrokerConnection(b.bootstrap_servers))
        return opened[-1]

    yield open_one
    for c in opened:
        c.close()


def closed(conn: BrokerConnection) -> bool:
    conn.sock.settimeout(10)
    try:
        return conn.sock.recv(1) == b""
    except ConnectionResetError:
        return True


def plain_token(user: str, password: str) -> bytes:
    return f"\0{user}\0{password}".encode()


def test_before_authentication_only_the_handshake_is_served(tmp_path, conns):
    with sasl_broker(tmp_path) as b:
        c = conns(b)
        assert {17, 36} <= set(c.versions)
        assert c.versions[17] == (0, 1)
        # Metadata before authenticating closes the connection.
        with pytest.raises(ClientError):
            c._roundtrip(3, 12, REQUESTS[3](topics=None))
        # Produce too (the network thread does not serve an unauthenticated connection).
        c = conns(b)
        with pytest.raises(ClientError):
            c._roundtrip(0, 9, REQUESTS[0](acks=1, timeout_ms=1000, topic_data=[]))
        # SaslAuthenticate without a handshake: ILLEGAL_SASL_STATE, then closed.
        c = conns(b)
        r = c._roundtrip(36, 2, REQUESTS[36](auth_bytes=plain_token("admin", ADMIN_PASSWORD)))
        assert r.error_code == ErrorCode.ILLEGAL_SASL_STATE
        assert closed(c)
        # An unknown mechanism: the enabled ones are listed; the connection may try again.
        c = conns(b)
        r = c._roundtrip(17, 1, REQUESTS[17](mechanism="GSSAPI"))
        assert r.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
        assert r.mechanisms == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
        assert c._roundtrip(17, 1, REQUESTS[17](mechanism="PLAIN")).error_code == 0
        # A wrong password: SASL_AUTHENTICATION_FAILED with Kafka's message, then closed.
        r = c._roundtrip(36, 2, REQUESTS[36](auth_bytes=plain_token("admin", "nope")))
        assert r.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert r.error_message == "Authentication failed: Invalid username or password"
        assert closed(c)
        # The right one: then everything is served.
        c = conns(b)
        assert c._roundtrip(17, 1, REQUESTS[17](mechanism="PLAIN")).error_code == 0
        r = c._roundtrip(36, 2, REQUESTS[36](auth_bytes=plain_token("admin", ADMIN_PASSWORD)))
        assert (r.error_code, r.session_lifetime_ms) == (0, 0)
        assert c._roundtrip(3, 12, REQUESTS[3](topics=None)).brokers


def _raw_exchange(c: BrokerConnection, token: bytes) -> bytes | None:
    """After SaslHandshake v0: one raw size-prefixed token out, the raw reply back (None: the
    broker closed the connection without one)."""
    c.sock.sendall(struct.pack(">i", len(token)) + token)
    c.sock.settimeout(10)
    head = b""
    while len(head) < 4:
        chunk = c.sock.recv(4 - len(head))
        if not chunk:
            return None
        head += chunk
    (size,) = struct.unpack(">i", head)
    body = b""
    while len(body) < size:
        body += c.sock.recv(size - len(body))
    return body


def test_handshake_v0_takes_raw_tokens(tmp_path, conns):
    """SaslHandshake v0 (Kafka 0.10.0's form, advertised because librdkafka's SASL feature
    check needs v0 listed): the tokens then follow raw, without SaslAuthenticate; a wrong one
    closes the connection unanswered, as Kafka does."""
    with sasl_broker(tmp_path) as b:
        c = conns(b)
        assert c._roundtrip(17, 0, REQUESTS[17](mechanism="PLAIN")).error_code == 0
        assert _raw_exchange(c, plain_token("admin", ADMIN_PASSWORD)) == b""  # PLAIN's empty answer
        assert c._roundtrip(3, 12, REQUESTS[3](topics=None)).brokers
        c = conns(b)
        assert c._roundtrip(17, 0, REQUESTS[17](mechanism="PLAIN")).error_code == 0
        assert _raw_exchange(c, plain_token("admin", "nope")) is None
        assert closed(c)
        # SCRAM's two rounds, raw
        add_scram_users(b.bootstrap_servers)
        from logbroker.client.sasl import Password, ScramClient

        c = conns(b)
        assert c._roundtrip(17, 0, REQUESTS[17](mechanism="SCRAM-SHA-256")).error_code == 0
        scram = ScramClient("SCRAM-SHA-256", "bob", Password("bob-secret"))
        server_first = _raw_exchange(c, scram.first())
        server_final = _raw_exchange(c, scram.respond(server_first))
        assert scram.respond(server_final) is None and scram.complete
        assert c._roundtrip(3, 12, REQUESTS[3](topics=None)).brokers


def test_a_failed_authentication_is_answered_after_the_delay(tmp_path, conns):
    """connection.failed.authentication.delay.ms holds back the answer to a wrong password
    (Kafka's brute-force brake) and nothing else: the right password is answered at once."""
    with sasl_broker(tmp_path, connection_failed_authentication_delay_ms=600) as b:
        c = conns(b)
        assert c._roundtrip(17, 1, REQUESTS[17](mechanism="PLAIN")).error_code == 0
        start = time.monotonic()
        r = c._roundtrip(36, 2, REQUESTS[36](auth_bytes=plain_token("admin", "nope")))
        waited = time.monotonic() - start
        assert r.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED and closed(c)
        assert waited >= 0.55, f"answered after {waited:.3f} s"
        c = conns(b)
        assert c._roundtrip(17, 1, REQUESTS[17](mechanism="PLAIN")).error_code == 0
        start = time.monotonic()
        assert c._roundtrip(36, 2, REQUESTS[36](auth_bytes=plain_token("admin", ADMIN_PASSWORD))).error_code == 0
        assert time.monotonic() - start < 0.55, "a good password is not delayed"


def test_oversize_and_garbage_before_authentication_close_the_connection(tmp_path):
    with sasl_broker(tmp_path, sasl_server_max_receive_size=4096) as b:
        host, port = b.address
        for payload in [
            struct.pack(">i", 100_000) + b"x" * 10_000,  # larger than sasl.server.max.receive.size
            b"\x16\x03\x01\x00\xa5" + b"\x00" * 200,  # a TLS ClientHello to a plaintext port
            struct.pack(">i", 12) + b"\xff" * 12,
        ]:  # a header that does not decode
            with socket.create_connection((host, port), timeout=10) as s:
                s.sendall(payload)
                try:
                    assert s.recv(1) == b""
                except ConnectionResetError:
                    pass
        # After all that the broker serves an authenticated client.
        assert sorted(roundtrip(admin_conf(b.bootstrap_servers), "after-garbage", 20)) == expected("after-garbage", 20)
        # An authenticated connection may send frames up to socket.request.max.bytes.
        big = b"x" * 100_000
        p = Producer({**admin_conf(b.bootstrap_servers), "message.max.bytes": 1_000_000})
        p.produce("big", big)
        assert p.flush(30) == 0


def test_session_lifetime_reauthentication(tmp_path, conns, caplog):
    with sasl_broker(tmp_path, connections_max_reauth_ms=1500) as b:
        bs = b.bootstrap_servers
        add_scram_users(bs)
        # A client that does not re-authenticate: its first request after the session ended
        # closes the connection.
        c = conns(b)
        c._roundtrip(17, 1, REQUESTS[17](mechanism="PLAIN"))
        r = c._roundtrip(36, 2, REQUESTS[36](auth_bytes=plain_token("admin", ADMIN_PASSWORD)))
        assert (r.error_code, r.session_lifetime_ms) == (0, 1500)
        assert c._roundtrip(3, 12, REQUESTS[3](topics=None)).brokers
        time.sleep(2)
        with pytest.raises(ClientError):
            c._roundtrip(3, 12, REQUESTS[3](topics=None))
        # Re-authenticating on the same connection keeps it going, as the same user only.
        c = conns(b)
        for _ in range(3):
            assert c._roundtrip(17, 1, REQUESTS[17](mechanism="PLAIN")).error_code == 0
            assert c._roundtrip(36, 2, REQUESTS[36](auth_bytes=plain_token("admin", ADMIN_PASSWORD))).error_code == 0
            assert c._roundtrip(3, 12, REQUESTS[3](topics=None)).brokers
            time.sleep(1.7)
        assert c._roundtrip(17, 1, REQUESTS[17](mechanism="PLAIN")).error_code == 0
        r = c._roundtrip(36, 2, REQUESTS[36](auth_bytes=plain_token("alice", "alice-secret")))
        assert r.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert closed(c)
        # librdkafka re-authenticates by itself (KIP-368) and keeps producing for several
        # lifetimes on the same connections: none is closed for an expired session.
        caplog.clear()
        caplog.set_level(logging.DEBUG, logger="logbroker.broker.dispatch")
        conf = rd(bs, "SCRAM-SHA-256", "bob", "bob-secret")
        p = Producer({**conf, "acks": "all"})
        deadline = time.monotonic() + 6
        sent = 0
        while time.monotonic() < deadline:
            p.produce("reauth", b"%d" % sent)
            sent += 1
            p.poll(0.05)
        assert p.flush(30) == 0
        c2 = Consumer({**conf, "group.id": "g-reauth", "auto.offset.reset": "earliest"})
        c2.subscribe(["reauth"])
        got = 0
        deadline = time.monotonic() + 60
        while got < sent and time.monotonic() < deadline:
            m = c2.poll(0.5)
            if m is not None and not m.error():
                got += 1
        c2.close()
        assert got == sent
        lines = [r.getMessage() for r in caplog.records]
        assert not [m for m in lines if "expired" in m], lines
        assert sum("authenticated as User:bob" in m for m in lines) >= 4, lines


@pytest.mark.parametrize(
    "settings,message",
    [
        ({"sasl_enabled_mechanisms": "GSSAPI"}, "GSSAPI"),
        ({"sasl_enabled_mechanisms": ""}, "empty"),
    ],
)
def test_bad_sasl_settings_stop_the_start(tmp_path, settings, message):
    with pytest.raises(Exception) as e:
        with sasl_broker(tmp_path, **settings):
            pass
    assert message in str(e.value)


def test_a_deleted_user_is_refused_at_the_next_reauthentication(tmp_path):
    """Credentials that go away end the sessions that used them when the session lifetime
    is up: librdkafka's re-authentication fails, and so does a new connection."""
    with sasl_broker(tmp_path, connections_max_reauth_ms=1500) as b:
        bs = b.bootstrap_servers
        add_scram_users(bs)
        errors: list = []
        p = Producer({**rd(bs, "SCRAM-SHA-256", "bob", "bob-secret"), "acks": "all", "error_cb": errors.append})
        p.produce("bob-topic", b"before")
        assert p.flush(30) == 0
        admin = AdminClient(admin_conf(bs))
        from confluent_kafka.admin import UserScramCredentialDeletion

        for fut in admin.alter_user_scram_credentials(
            [UserScramCredentialDeletion("bob", ScramMechanism.SCRAM_SHA_256)]
        ).values():
            fut.result(30)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not any(e.code() == KafkaError._AUTHENTICATION for e in errors):
            p.produce("bob-topic", b"after")
            p.poll(0.2)
        assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors
        p.purge()
        assert authentication_error(rd(bs, "SCRAM-SHA-256", "bob", "bob-secret"))
