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

import logbroker
from test_tls import Pki


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Pki:
    return Pki(tmp_path_factory.mktemp("pki"))


def get(url: str, context: ssl.SSLContext | None = None) -> tuple[int, bytes]:
    with urllib.request.urlopen(url, timeout=10, context=context) as r:
        return r.status, r.read()


def test_console_metrics_and_registry_over_https(tmp_path: Path, pki: Pki) -> None:
    with logbroker.Broker(data_dir=tmp_path / "d", ssl_keystore_location=str(pki.keystore),
                          console_listen="https://127.0.0.1:0", metrics_listen="https://127.0.0.1:0",
                          schema_registry_listen="https://127.0.0.1:0") as b:
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
    with logbroker.Broker(data_dir=tmp_path / "d", ssl_keystore_location=str(pki.keystore),
                          metrics_listen="https://127.0.0.1:0", config=config) as b:
        anonymous = ssl.create_default_context(cafile=str(pki.ca_pem))
        with pytest.raises((urllib.error.URLError, ConnectionError, ssl.SSLError)):
            get(b.metrics_url, anonymous)
        scraper = ssl.create_default_context(cafile=str(pki.ca_pem))
        scraper.load_cert_chain(str(pki.client_cert), str(pki.client_key))
        status, body = get(b.metrics_url, scraper)
        assert status == 200 and b"kafka_server" in body


@pytest.mark.parametrize("settings, message", [
    ({"metrics_listen": "https://127.0.0.1:0"}, "metrics.listen is https: set ssl.keystore.location"),
    ({"console_listen": "ftp://127.0.0.1:0"}, "https://HOST:PORT"),
    ({"schema_registry_listen": "https://127.0.0.1:0", "ssl_keystore_location": "BROKER",
      "config": {"listener.name.schema_registry.ssl.client.auth": "required"}},
     "listener.name.schema_registry.ssl.client.auth=required needs ssl.truststore.location"),
])
def test_bad_https_settings_stop_the_start_with_a_clear_error(tmp_path: Path, pki: Pki, settings, message) -> None:
    settings = {k: str(pki.keystore) if v == "BROKER" else v for k, v in settings.items()}
    with pytest.raises(Exception, match=message.replace(".", r"\.").replace("?", r"\?")):
        with logbroker.Broker(data_dir=tmp_path / "d", **settings):
            pass
