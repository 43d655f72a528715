"""TLS on the broker's HTTP endpoints: `console.listen`, `metrics.listen` and
`schema.registry.listen` given as `https://HOST:PORT`.

The server certificate is the broker's keystore (`ssl.keystore.location`, or
`ssl.keystore.certificate.chain` and `ssl.keystore.key`), as on its Kafka listeners. Client
certificates are asked for by Kafka's per-listener key with the endpoint's name:
`listener.name.console.ssl.client.auth`, `listener.name.metrics.ssl.client.auth`,
`listener.name.schema_registry.ssl.client.auth` (`required`, `requested` or `none`, the
default), checked against the broker's truststore (`ssl.truststore.*`), which they then need.
TLS 1.2 at least. A client that speaks plain HTTP to a TLS endpoint fails its handshake: the
connection is closed, the server goes on.
"""

from __future__ import annotations

import ssl

from logbroker.common.config import BrokerConfig, ConfigError
from logbroker.coord.peer_security import tls_server_context

ENDPOINTS = {"console.listen": "console", "metrics.listen": "metrics", "schema.registry.listen": "schema_registry"}


def server_context(config: BrokerConfig, key: str) -> ssl.SSLContext | None:
    """The TLS context of the endpoint of `key` (one of ENDPOINTS), None for plain HTTP."""
    endpoint = config.http_endpoint(key)
    if endpoint is None or not endpoint[2]:
        return None
    chain, private_key, trust = config.tls_material(f"{key} is https")
    auth = config.explicit.get(f"listener.name.{ENDPOINTS[key]}.ssl.client.auth", "none")
    if auth != "none" and trust is None:
        raise ConfigError(
            f"listener.name.{ENDPOINTS[key]}.ssl.client.auth={auth} needs ssl.truststore.location "
            f"(the CAs of client certificates)"
        )
    context = tls_server_context(config, chain, private_key, trust, auth, key)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context
