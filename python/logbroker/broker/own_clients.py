"""How the broker's own services (the schema registry, the web console) reach its client
listener as Kafka clients: the client settings (`security.protocol`, `sasl.*`, `ssl.*`) for
the broker's primary listener (`BrokerConfig.client_listener_name`).

- PLAINTEXT: nothing to set.
- SASL_PLAINTEXT, SASL_SSL: a SASL login. The default is this node's own user, as it reaches
  the other nodes (`BrokerConfig.node_sasl`); the console passes the logged-in user's instead.
- SSL, SASL_SSL: the broker's truststore (`ssl.truststore.*`; none set: the system's CAs, as
  a Kafka client does), host names checked as `ssl.endpoint.identification.algorithm` says,
  and the broker's keystore presented where the listener requires client certificates.
  Inline PEM (`ssl.truststore.certificates`, `ssl.keystore.certificate.chain` and `.key`) is
  written to files the client reads, under DATA_DIR/__own_clients_tls, readable by this
  user only.
"""

from __future__ import annotations

import os
from typing import Any

from logbroker.client.oauthbearer import token_expiry
from logbroker.common.config import BrokerConfig, ConfigError

TLS_FOLDER = "__own_clients_tls"


def client_config(
    config: BrokerConfig, service: str, login: tuple[str, str, str] | None = None, listener: str | None = None
) -> dict[str, Any]:
    """The settings for `service`'s clients (named in errors: "schema.registry.listen");
    `login`: (mechanism, user, password) on a SASL listener instead of this node's user (for
    OAUTHBEARER, the password is the user's token, presented through `oauth_cb`); `listener`:
    another client listener than the primary one (the console's logins use a SASL one)."""
    listener = listener or config.client_listener_name
    protocol = config.security_protocol(listener)
    out: dict[str, Any] = {}
    if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
        creds = login if login is not None else config.node_sasl(listener)
        if creds is None:
            raise ConfigError(
                f"{service}: its clients reach the broker's client listener {listener} ({protocol}), "
                f"and no SASL user is set for this node there"
            )
        mechanism, user, password = creds
        if mechanism == "OAUTHBEARER":  # a console login with a token: its clients present it
            token, expiry_s = password, token_expiry(password) or 0.0
            out.update({"sasl.mechanism": mechanism, "oauth.cb": lambda _config: (token, expiry_s)})
        else:
            out.update({"sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password})
    if protocol in ("SSL", "SASL_SSL"):
        out.update(_tls_files(config, listener))
    if protocol != "PLAINTEXT":
        out["security.protocol"] = protocol
    return out


def _tls_files(config: BrokerConfig, listener: str) -> dict[str, str]:
    tls = config.listener_tls(listener)
    assert tls is not None
    chain, key, trust, client_auth = tls
    out = {"ssl.endpoint.identification.algorithm": config.get_str("ssl.endpoint.identification.algorithm")}
    folder = config.data_dir / TLS_FOLDER

    def written(name: str, data: bytes) -> str:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        path = folder / name
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        return str(path)

    if trust is not None:
        out["ssl.truststore.location"] = config.get_str("ssl.truststore.location") or written("truststore.pem", trust)
    if client_auth == "required":
        out["ssl.keystore.location"] = config.get_str("ssl.keystore.location") or written(
            "keystore.pem", key + b"\n" + chain
        )
    return out
