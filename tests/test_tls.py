"""SSL listeners (TLS in the Rust network thread): librdkafka, kafka-python, aiokafka, kcat
and the Java client produce and consume over TLS with certificates from a test CA
(trustme), mutual TLS with `ssl.client.auth=required`, and the failures a user meets: a
plaintext client or garbage on the TLS port, a client without a certificate, a client that
does not trust the broker, and bad keystore settings, each a clean error with the broker
going on."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import trustme
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from conftest import kafka_python_values, kcat_bin, needs_java, rdkafka_values

import logbroker

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


class Pki:
    """A test CA, a broker certificate for 127.0.0.1/localhost, and a client certificate."""

    def __init__(self, d: Path) -> None:
        self.ca = trustme.CA()
        self.ca_pem = d / "ca.pem"
        self.ca.cert_pem.write_to_path(str(self.ca_pem))
        server = self.ca.issue_cert("127.0.0.1", "localhost")
        self.keystore = d / "broker.pem"  # key and chain in one file: Kafka's PEM keystore file
        server.private_key_and_cert_chain_pem.write_to_path(str(self.keystore))
        client = self.ca.issue_cert("client.example")
        self.client_cert, self.client_key = d / "client.pem", d / "client.key"
        for blob in client.cert_chain_pems:
            blob.write_to_path(str(self.client_cert), append=True)
        client.private_key_pem.write_to_path(str(self.client_key))
        other = trustme.CA()
        self.other_ca_pem = d / "other-ca.pem"
        other.cert_pem.write_to_path(str(self.other_ca_pem))


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Pki:
    return Pki(tmp_path_factory.mktemp("pki"))


def tls_broker(tmp_path: Path, pki: Pki, **settings) -> logbroker.Broker:
    return logbroker.Broker(
        data_dir=tmp_path / "d", listener="SSL", ssl_keystore_location=str(pki.keystore), **settings
    )


def rdkafka_conf(bs: str, pki: Pki, **extra) -> dict:
    return {"bootstrap.servers": bs, "security.protocol": "SSL", "ssl.ca.location": str(pki.ca_pem), **extra}


def roundtrip_rdkafka(bs: str, pki: Pki, topic: str, n: int = 500, **extra) -> list[bytes]:
    admin = AdminClient(rdkafka_conf(bs, pki, **extra))
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(20)
    p = Producer(rdkafka_conf(bs, pki, acks="all", **extra))
    for i in range(n):
        p.produce(topic, b"v%d-" % i + b"x" * 500, key=b"k%d" % i)
    assert p.flush(30) == 0
    return rdkafka_values(rdkafka_conf(bs, pki, **{"group.id": f"g-{topic}"}, **extra), topic, n)


def test_librdkafka_and_kafka_python_over_tls(tmp_path, pki):
    with tls_broker(tmp_path, pki) as b:
        bs = b.bootstrap_servers
        got = roundtrip_rdkafka(bs, pki, "tls-rd", 2000)
        assert sorted(got) == sorted(b"v%d-" % i + b"x" * 500 for i in range(2000))

        from kafka import KafkaConsumer, KafkaProducer

        kp = KafkaProducer(bootstrap_servers=bs, security_protocol="SSL", ssl_cafile=str(pki.ca_pem))
        for i in range(100):
            kp.send("tls-kp", b"kp%d" % i)
        kp.flush(30)
        kp.close()
        kc = KafkaConsumer(
            "tls-kp",
            bootstrap_servers=bs,
            security_protocol="SSL",
            ssl_cafile=str(pki.ca_pem),
            auto_offset_reset="earliest",
        )
        assert sorted(kafka_python_values(kc, 100)) == sorted(b"kp%d" % i for i in range(100))
        kc.close()


def test_aiokafka_and_kcat_over_tls(tmp_path, pki):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context

    with tls_broker(tmp_path, pki) as b:
        bs = b.bootstrap_servers

        async def run() -> list[bytes]:
            ctx = create_ssl_context(cafile=str(pki.ca_pem))
            p = AIOKafkaProducer(bootstrap_servers=bs, security_protocol="SSL", ssl_context=ctx)
            await p.start()
            for i in range(50):
                await p.send_and_wait("tls-aio", b"a%d" % i)
            await p.stop()
            c = AIOKafkaConsumer(
                "tls-aio", bootstrap_servers=bs, security_protocol="SSL", ssl_context=ctx, auto_offset_reset="earliest"
            )
            await c.start()
            out = []
            try:
                while len(out) < 50:
                    batch = await c.getmany(timeout_ms=2000)
                    out.extend(m.value for ms in batch.values() for m in ms)
            finally:
                await c.stop()
            return out

        assert sorted(asyncio.run(asyncio.wait_for(run(), 60))) == sorted(b"a%d" % i for i in range(50))
        kcat = [kcat_bin(), "-b", bs, "-X", "security.protocol=ssl", "-X", f"ssl.ca.location={pki.ca_pem}"]
        r = subprocess.run(
            kcat + ["-C", "-t", "tls-aio", "-o", "beginning", "-e", "-q"], capture_output=True, timeout=60
        )
        assert r.returncode == 0, r.stderr
        assert sorted(r.stdout.split()) == sorted(b"a%d" % i for i in range(50))


@needs_java
def test_java_client_over_tls(tmp_path, pki):
    from benches.peers.kafka import install

    tools = install()
    props = tmp_path / "client.properties"
    props.write_text(f"security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location={pki.ca_pem}\n")
    with tls_broker(tmp_path, pki) as b:
        bs = b.bootstrap_servers
        lines = [f"k{i}:java-tls-{i}" for i in range(200)]
        cmd = tools.tools_java(
            "org.apache.kafka.tools.ConsoleProducer",
            [
                "--bootstrap-server",
                bs,
                "--topic",
                "tls-java",
                "--command-config",
                str(props),
                "--property",
                "parse.key=true",
                "--property",
                "key.separator=:",
            ],
        )
        r = subprocess.run(cmd, input="".join(line + "\n" for line in lines).encode(), capture_output=True, timeout=120)
        assert r.returncode == 0, r.stderr.decode()[-3000:]
        cmd = tools.tools_java(
            "org.apache.kafka.tools.consumer.ConsoleConsumer",
            [
                "--bootstrap-server",
                bs,
                "--topic",
                "tls-java",
                "--from-beginning",
                "--max-messages",
                "200",
                "--timeout-ms",
                "60000",
                "--command-config",
                str(props),
                "--formatter-property",
                "print.key=true",
                "--formatter-property",
                "key.separator=:",
            ],
        )
        r = subprocess.run(cmd, capture_output=True, timeout=120)
        assert r.returncode == 0, r.stderr.decode()[-3000:]
        assert r.stdout.decode().splitlines() == lines


def test_mutual_tls_required(tmp_path, pki):
    with tls_broker(tmp_path, pki, ssl_client_auth="required", ssl_truststore_location=str(pki.ca_pem)) as b:
        bs = b.bootstrap_servers
        mtls = {"ssl.certificate.location": str(pki.client_cert), "ssl.key.location": str(pki.client_key)}
        assert len(roundtrip_rdkafka(bs, pki, "mtls", 100, **mtls)) == 100
        # Without a client certificate the handshake fails: no metadata, a clean error.
        admin = AdminClient(rdkafka_conf(bs, pki, **{"socket.timeout.ms": 3000}))
        with pytest.raises(KafkaException):
            admin.list_topics(timeout=5)
        # And the broker goes on serving the client that has one.
        assert "mtls" in AdminClient(rdkafka_conf(bs, pki, **mtls)).list_topics(timeout=10).topics


def test_certificate_subject_is_the_principal(tmp_path, pki):
    """With client authentication the principal is `User:` and the certificate's subject as
    RFC 2253 (Kafka's default ssl.principal.mapping.rules); without a certificate
    (ssl.client.auth=requested) it is User:ANONYMOUS. ACLs see the difference."""
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import Encoding

    from logbroker import _core
    from logbroker.common.acl import STANDARD_AUTHORIZER

    cert = x509.load_pem_x509_certificate(pki.client_cert.read_bytes())
    principal = _core.certificate_principal(cert.public_bytes(Encoding.DER))
    assert principal == "User:" + cert.subject.rfc4514_string(), "RFC 4514 writes the same string as RFC 2253 here"
    with tls_broker(
        tmp_path,
        pki,
        ssl_client_auth="requested",
        ssl_truststore_location=str(pki.ca_pem),
        authorizer_class_name=STANDARD_AUTHORIZER,
        super_users=principal,
    ) as b:
        bs = b.bootstrap_servers
        mtls = {"ssl.certificate.location": str(pki.client_cert), "ssl.key.location": str(pki.client_key)}
        assert len(roundtrip_rdkafka(bs, pki, "by-cert", 50, **mtls)) == 50
        anonymous = AdminClient(rdkafka_conf(bs, pki))
        assert "by-cert" not in anonymous.list_topics(timeout=10).topics, "ANONYMOUS may not describe it"
        with pytest.raises(KafkaException, match="AUTHORIZATION_FAILED"):
            anonymous.create_topics([NewTopic("anon", 1, 1)])["anon"].result(20)


def test_principal_mapping_rules(tmp_path, pki, caplog):
    """ssl.principal.mapping.rules (KIP-371): the first rule that matches names the client;
    a certificate no rule maps is refused (its connection closed, the reason logged), and a
    bad rule stops the start."""
    ours = pki.ca.issue_cert(
        "ours.example", common_name="Alice", organization_name="Example", organization_unit_name="payments"
    )
    theirs = pki.ca.issue_cert("theirs.example", common_name="bob", organization_name="Elsewhere")
    files = {}
    for name, cert in (("ours", ours), ("theirs", theirs)):
        files[name] = tmp_path / f"{name}.pem"
        cert.private_key_and_cert_chain_pem.write_to_path(str(files[name]))
    rules = "RULE:^CN=([^,]+),OU=payments,O=Example$/$1/L"
    with tls_broker(
        tmp_path,
        pki,
        ssl_client_auth="required",
        ssl_truststore_location=str(pki.ca_pem),
        ssl_principal_mapping_rules=rules,
        authorizer_class_name="org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        super_users="User:alice",
    ) as b:
        bs = b.bootstrap_servers
        alice = {"ssl.certificate.location": str(files["ours"]), "ssl.key.location": str(files["ours"])}
        assert len(roundtrip_rdkafka(bs, pki, "mapped", 20, **alice)) == 20, "User:alice is a super user"
        bob = {
            "ssl.certificate.location": str(files["theirs"]),
            "ssl.key.location": str(files["theirs"]),
            "socket.timeout.ms": 3000,
        }
        with pytest.raises(KafkaException):
            AdminClient(rdkafka_conf(bs, pki, **bob)).list_topics(timeout=5)
        assert any('no ssl.principal.mapping.rules rule applies to "CN=bob,' in m for m in caplog.messages)
    with pytest.raises(Exception, match="ssl.principal.mapping.rules: rule pattern"):
        with tls_broker(tmp_path / "bad", pki, ssl_principal_mapping_rules="RULE:^(CN=/x/"):
            pass


def test_wrong_ca_plaintext_and_garbage_are_refused(tmp_path, pki):
    with tls_broker(tmp_path, pki) as b:
        host, port = b.address
        # A client that does not trust the broker's CA.
        admin = AdminClient(
            {
                "bootstrap.servers": b.bootstrap_servers,
                "security.protocol": "SSL",
                "ssl.ca.location": str(pki.other_ca_pem),
            }
        )
        with pytest.raises(KafkaException):
            admin.list_topics(timeout=5)
        # A plaintext Kafka request, then garbage, on the TLS port: the broker closes the
        # connection (nothing hangs) and goes on.
        api_versions = bytes.fromhex("0000001a0012000000000001000474657374000000") + b"\0" * 8
        for payload in (api_versions, b"\x16\x03\x01\xff\xff" + b"\xee" * 4000, b"\x00" * 70000):
            with socket.create_connection((host, port), timeout=5) as s:
                try:
                    s.sendall(payload)
                    s.settimeout(5)
                    while s.recv(65536):
                        pass  # an alert at most, then the close
                except (ConnectionResetError, BrokenPipeError):
                    pass
        assert len(roundtrip_rdkafka(b.bootstrap_servers, pki, "after-garbage", 10)) == 10


@pytest.mark.parametrize(
    "settings, message",
    [
        ({}, "ssl.keystore.location"),
        ({"ssl_keystore_location": "/nonexistent/broker.pem"}, "/nonexistent/broker.pem"),
        ({"ssl_keystore_location": "CA"}, "keystore"),
        ({"ssl_keystore_location": "BROKER", "ssl_client_auth": "required"}, "ssl.truststore.location"),
        ({"ssl_keystore_location": "BROKER", "ssl_key_password": "secret"}, "ssl.key.password"),
        ({"ssl_keystore_location": "BROKER", "console_listen": "127.0.0.1:0"}, "console.listen"),
    ],
)
def test_bad_tls_settings_stop_the_start_with_a_clear_error(tmp_path, pki, settings, message):
    paths = {"CA": str(pki.ca_pem), "BROKER": str(pki.keystore)}
    settings = {k: paths.get(v, v) for k, v in settings.items()}
    with pytest.raises(Exception, match=message.replace(".", r"\.")):
        with logbroker.Broker(data_dir=tmp_path / "d", listener="SSL", **settings):
            pass


def test_serve_refuses_bad_tls_settings(tmp_path, pki):
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "logbroker",
            "serve",
            "--data-dir",
            str(tmp_path / "d"),
            "--listen",
            "SSL://127.0.0.1:0",
            "--set",
            f"ssl.keystore.location={pki.ca_pem}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2, r.stderr
    assert "keystore" in r.stderr and "Traceback" not in r.stderr


def our_tls(pki: Pki, **extra) -> dict:
    return {"security_protocol": "SSL", "ssl_truststore_location": str(pki.ca_pem), **extra}


def test_our_client_over_tls_sync_asyncio_and_trio(tmp_path, pki):
    import asyncio

    import anyio
    import trio

    from logbroker import aio

    keystore = tmp_path / "client-keystore.pem"  # the client's key and chain in one PEM file, as Java takes it
    keystore.write_bytes(pki.client_key.read_bytes() + pki.client_cert.read_bytes())
    with tls_broker(tmp_path, pki, ssl_client_auth="required", ssl_truststore_location=str(pki.ca_pem)) as b:
        bs = b.bootstrap_servers
        conf = our_tls(pki, ssl_keystore_location=str(keystore))
        with logbroker.Admin(bs, **conf) as admin:
            admin.create_topics([logbroker.NewTopic("ours", 2, 1)])
        with logbroker.Producer(bs, acks="all", **conf) as p:
            for i in range(1000):
                p.send("ours", b"o%d" % i + b"y" * 2000, key=b"%d" % i)
            p.flush(30)
        with logbroker.Consumer(bs, group_id="ours-g", auto_offset_reset="earliest", **conf) as c:
            c.subscribe(["ours"])
            got: list[bytes] = []
            deadline = time.monotonic() + 60
            while len(got) < 1000 and time.monotonic() < deadline:
                got.extend(r.value for r in c.poll(1.0))
        assert sorted(got) == sorted(b"o%d" % i + b"y" * 2000 for i in range(1000))

        async def roundtrip(topic: str) -> list[bytes]:
            async with aio.Producer(bs, **conf) as p:
                for i in range(200):
                    await p.send(topic, b"t%d" % i)
                await p.flush(30)
            async with aio.Consumer(bs, auto_offset_reset="earliest", **conf) as c:
                await c.assign([(topic, 0)])
                out: list[bytes] = []
                with anyio.move_on_after(60):
                    while len(out) < 200:
                        out.extend(r.value for r in await c.poll(1.0))
                return out

        assert sorted(trio.run(roundtrip, "ours-trio")) == sorted(b"t%d" % i for i in range(200))
        assert sorted(asyncio.run(roundtrip("ours-asyncio"))) == sorted(b"t%d" % i for i in range(200))
        # Without its certificate our client is refused (TLS 1.3: at its first read): a clean
        # error naming the alert.
        with pytest.raises((logbroker.KafkaError, ConnectionError), match="certificate"):
            with logbroker.Admin(bs, request_timeout_ms=3000, **our_tls(pki)) as admin:
                admin.list_topics(timeout=3)


def test_our_client_refuses_a_broker_it_does_not_trust(tmp_path, pki):
    with tls_broker(tmp_path, pki) as b:
        with pytest.raises((logbroker.KafkaError, ConnectionError), match="CERTIFICATE_VERIFY_FAILED|certificate"):
            with logbroker.Admin(
                b.bootstrap_servers, **our_tls(pki, ssl_truststore_location=str(pki.other_ca_pem))
            ) as a:
                a.list_topics(timeout=3)
        # Hostname checking is on by default; the broker's certificate names 127.0.0.1.
        with logbroker.Admin(b.bootstrap_servers, **our_tls(pki)) as a:
            assert isinstance(a.list_topics(timeout=10), list)
    from logbroker.client import ConfigError as ClientConfigError

    with pytest.raises(ClientConfigError, match="SASL_SSL needs a user and a password"):
        logbroker.Producer("127.0.0.1:9093", security_protocol="SASL_SSL")
    with pytest.raises(ClientConfigError, match="ssl.truststore.location"):
        logbroker.Producer("127.0.0.1:9093", **our_tls(pki, ssl_truststore_location=str(tmp_path / "missing.pem")))


def test_cli_over_tls_with_command_config(tmp_path, pki):
    """Every `logbroker` subcommand that talks to a cluster takes Kafka's --command-config
    (the mirror: --from-config/--to-config): here against an SSL listener."""
    props = tmp_path / "client.properties"
    props.write_text(f"security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location={pki.ca_pem}\n")

    def cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "logbroker", *args], input=stdin, capture_output=True, text=True, timeout=120
        )

    with tls_broker(tmp_path, pki) as b, logbroker.Broker(data_dir=tmp_path / "plain") as plain:
        bs = b.bootstrap_servers
        cc = ["--command-config", str(props)]
        r = cli("topic", "--bootstrap-server", bs, *cc, "create", "--topic", "cli-tls", "--partitions", "2")
        assert r.returncode == 0, r.stderr
        r = cli(
            "produce", "--bootstrap-server", bs, *cc, "--topic", "cli-tls", stdin="".join(f"l{i}\n" for i in range(50))
        )
        assert r.returncode == 0, r.stderr
        r = cli(
            "consume",
            "--bootstrap-server",
            bs,
            *cc,
            "--topic",
            "cli-tls",
            "--from-beginning",
            "--group",
            "cg",
            "--max-messages",
            "50",
            "--timeout",
            "20",
        )
        assert r.returncode == 0 and sorted(r.stdout.split()) == sorted(f"l{i}" for i in range(50)), r.stderr
        r = cli("group", "--bootstrap-server", bs, *cc, "list")
        assert r.returncode == 0 and "cg" in r.stdout, r.stderr
        r = cli("topic", "--bootstrap-server", bs, *cc, "describe", "--topic", "cli-tls", "--json")
        assert r.returncode == 0 and "cli-tls" in r.stdout, r.stderr
        r = cli("cluster", "status", "--bootstrap-server", bs, *cc, "--json")
        assert r.returncode == 0 and '"controller_id"' in r.stdout, r.stderr
        # Mirror from a PLAINTEXT broker into the SSL one.
        with logbroker.Producer(plain.bootstrap_servers) as p:
            for i in range(30):
                p.send("mirrored", b"m%d" % i)
            p.flush(10)
        r = cli(
            "mirror",
            "--from",
            plain.bootstrap_servers,
            "--to",
            bs,
            "--to-config",
            str(props),
            "--topics",
            "mirrored",
            "--once",
            "--idle-timeout",
            "2",
        )
        assert r.returncode == 0 and "copied 30 record(s)" in r.stderr, r.stderr
        # Without the properties the CLI cannot talk to the SSL listener: a clean failure.
        r = cli("topic", "--bootstrap-server", bs, "list")
        assert r.returncode == 1 and "Traceback" not in r.stderr
        r = cli("topic", "--bootstrap-server", bs, "--command-config", str(tmp_path / "nope.properties"), "list")
        assert r.returncode == 2 and "nope.properties" in r.stderr
