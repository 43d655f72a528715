"""TLS on the HTTP endpoints (broker/http_tls.py): `https://` console, metrics and schema
registry with the broker's keystore, read by clients that trust the test CA (urllib and
confluent-kafka's SchemaRegistryClient); plain HTTP to a TLS endpoint is refused and the
endpoint goes on; client certificates required on the metrics endpoint; bad settings stop
the start with an error naming the key."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from test_tls import Pki

import logbroker


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Pki:
    return Pki(tmp_path_factory.mktemp("pki"))


def get(url: str, context: ssl.SSLContext | None = None) -> tuple[int, bytes]:
    with urllib.request.urlopen(url, timeout=10, context=context) as r:
        return r.status, r.read()


def test_console_metrics_and_registry_over_https(tmp_path: Path, pki: Pki) -> None:
    with logbroker.Broker(
        data_dir=tmp_path / "d",
        ssl_keystore_location=str(pki.keystore),
        console_listen="https://127.0.0.1:0",
        metrics_listen="https://127.0.0.1:0",
        schema_registry_listen="https://127.0.0.1:0",
    ) as b:
        trusting = ssl.create_default_context(cafile=str(pki.ca_pem))
        assert b.metrics_url.startswith("https://") and b.console_url.startswith("https://")
        status, body = get(b.metrics_url, trusting)
        assert status == 200 and b"kafka_server" in body
        assert get(b.console_url, trusting)[0] == 200
        host, port = b.server.schema_registry_address
        registry = f"https://{host}:{port}"
        assert json.loads(get(f"{registry}/subjects", trusting)[1]) == []
        sr = SchemaRegistryClient({"url": registry, "ssl.ca.location": str(pki.ca_pem)})
        sid = sr.register_schema("s-value", Schema('{"type": "string"}', "AVRO"))
        assert sr.get_latest_version("s-value").schema_id == sid
        sr.close()

        # a client that does not trust the broker's CA is refused by its own check
        with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
            get(b.metrics_url, ssl.create_default_context(cafile=str(pki.other_ca_pem)))
        # plain HTTP to the TLS port: no answer; the endpoint goes on serving TLS
        with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
            get(b.metrics_url.replace("https://", "http://"))
        assert get(b.metrics_url, trusting)[0] == 200


def test_metrics_with_client_certificates_required(tmp_path: Path, pki: Pki) -> None:
    config = {"listener.name.metrics.ssl.client.auth": "required", "ssl.truststore.location": str(pki.ca_pem)}
    with logbroker.Broker(
        data_dir=tmp_path / "d",
        ssl_keystore_location=str(pki.keystore),
        metrics_listen="https://127.0.0.1:0",
        config=config,
    ) as b:
        anonymous = ssl.create_default_context(cafile=str(pki.ca_pem))
        with pytest.raises((urllib.error.URLError, ConnectionError, ssl.SSLError)):
            get(b.metrics_url, anonymous)
        scraper = ssl.create_default_context(cafile=str(pki.ca_pem))
        scraper.load_cert_chain(str(pki.client_cert), str(pki.client_key))
        status, body = get(b.metrics_url, scraper)
        assert status == 200 and b"kafka_server" in body


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"metrics_listen": "https://127.0.0.1:0"}, "metrics.listen is https: set ssl.keystore.location"),
        ({"console_listen": "ftp://127.0.0.1:0"}, "https://HOST:PORT"),
        (
            {
                "schema_registry_listen": "https://127.0.0.1:0",
                "ssl_keystore_location": "BROKER",
                "config": {"listener.name.schema_registry.ssl.client.auth": "required"},
            },
            "listener.name.schema_registry.ssl.client.auth=required needs ssl.truststore.location",
        ),
    ],
)
def test_bad_https_settings_stop_the_start_with_a_clear_error(tmp_path: Path, pki: Pki, settings, message) -> None:
    settings = {k: str(pki.keystore) if v == "BROKER" else v for k, v in settings.items()}
    with pytest.raises(Exception, match=message.replace(".", r"\.").replace("?", r"\?")):
        with logbroker.Broker(data_dir=tmp_path / "d", **settings):
            pass


def test_metrics_scrape_with_basic_authentication(tmp_path: Path) -> None:
    """metrics.authentication.method=BASIC: no or a wrong password is 401 with
    WWW-Authenticate; a SCRAM user and a PLAIN user of the listener log in; with an
    authorizer, a user without DESCRIBE on the cluster is 403, and one given it scrapes."""
    import base64

    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    jaas = (
        'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_admin="admin-secret" user_prom="prom-secret";'
    )
    config = {
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
        "metrics.authentication.method": "BASIC",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin",
        "metrics.listen": "127.0.0.1:0",
    }
    with logbroker.Broker(data_dir=tmp_path / "d", listener="SASL_PLAINTEXT", config=config) as b:

        def scrape(user: str | None, password: str = "") -> int:
            req = urllib.request.Request(b.metrics_url)
            if user is not None:
                req.add_header("Authorization", "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode())
            try:
                return get_request(req)
            except urllib.error.HTTPError as e:
                if e.code == 401:
                    assert e.headers["WWW-Authenticate"].startswith("Basic")
                return e.code

        admin = AdminClient(
            {
                "bootstrap.servers": b.bootstrap_servers,
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN",
                "sasl.username": "admin",
                "sasl.password": "admin-secret",
            }
        )
        for fut in admin.alter_user_scram_credentials(
            [
                UserScramCredentialUpsertion(
                    "grafana", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"g-secret"
                )
            ]
        ).values():
            fut.result(30)
        assert scrape(None) == 401
        assert scrape("admin", "wrong") == 401
        assert scrape("admin", "admin-secret") == 200  # a super user
        assert scrape("prom", "prom-secret") == 403  # authenticated, not allowed
        assert scrape("grafana", "g-secret") == 403
        binding = AclBinding(
            ResourceType.BROKER,
            "kafka-cluster",
            ResourcePatternType.LITERAL,
            "User:grafana",
            "*",
            AclOperation.DESCRIBE,
            AclPermissionType.ALLOW,
        )
        for fut in admin.create_acls([binding]).values():
            fut.result(30)
        assert scrape("grafana", "g-secret") == 200


def get_request(req: urllib.request.Request) -> int:
    with urllib.request.urlopen(req, timeout=10) as r:
        r.read()
        return r.status


def test_console_login_over_https_sets_a_secure_cookie(tmp_path: Path, pki: Pki) -> None:
    """A SASL broker's console on https://: the login's cookie is Secure (never sent over plain
    HTTP), and the session works over TLS."""
    jaas = (
        'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_admin="admin-secret";'
    )
    config = {"listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas, "console.listen": "https://127.0.0.1:0"}
    with logbroker.Broker(
        data_dir=tmp_path / "d", listener="SASL_PLAINTEXT", ssl_keystore_location=str(pki.keystore), config=config
    ) as b:
        trusting = ssl.create_default_context(cafile=str(pki.ca_pem))
        with pytest.raises(urllib.error.HTTPError) as e:
            get(b.console_url + "api/topics", trusting)
        e.value.close()
        assert e.value.code == 401
        login = urllib.request.Request(
            b.console_url + "api/login",
            method="POST",
            data=json.dumps({"username": "admin", "password": "admin-secret"}).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(login, timeout=10, context=trusting) as r:
            cookie = r.headers["Set-Cookie"]
        assert cookie.endswith("; Secure") and "HttpOnly" in cookie and "SameSite=Strict" in cookie
        topics = urllib.request.Request(b.console_url + "api/topics", headers={"Cookie": cookie.split(";")[0]})
        with urllib.request.urlopen(topics, timeout=10, context=trusting) as r:
            assert r.status == 200 and json.loads(r.read()) == []
