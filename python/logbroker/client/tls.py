"""TLS for the client's connections (`security.protocol=SSL`, and SASL_SSL where SASL
follows the TLS handshake: client/sasl.py), with the Java client's key
names and PEM files (`ssl.truststore.type=PEM`):

    ssl.truststore.location                  CA certificates (PEM) to trust; None: the system's
    ssl.keystore.location                    this client's certificate chain and key (PEM), for
                                             brokers that require client certificates (mTLS)
    ssl.key.password                         the password of an encrypted key in the keystore
    ssl.endpoint.identification.algorithm    "https" (default): the broker's certificate must
                                             name the host connected to; "": not checked

`context(config)` builds the `ssl.SSLContext` both drivers (threads: driver.py, trio:
logbroker.aio) and BrokerConnection wrap their sockets with; None for PLAINTEXT and
SASL_PLAINTEXT.
"""

from __future__ import annotations

import ssl
from typing import Any

from logbroker.client.errors import ConfigError


def context(config: dict[str, Any]) -> ssl.SSLContext | None:
    if config.get("security.protocol", "PLAINTEXT") not in ("SSL", "SASL_SSL"):
        return None
    try:
        ctx = ssl.create_default_context(cafile=config.get("ssl.truststore.location") or None)
        if not config.get("ssl.endpoint.identification.algorithm"):
            ctx.check_hostname = False
        if config.get("ssl.keystore.location"):
            ctx.load_cert_chain(config["ssl.keystore.location"], password=config.get("ssl.key.password") or None)
    except (OSError, ssl.SSLError, ValueError) as e:
        raise ConfigError(
            f"TLS settings (ssl.truststore.location={config.get('ssl.truststore.location')!r}, "
            f"ssl.keystore.location={config.get('ssl.keystore.location')!r}): {e}"
        ) from None
    return ctx


def server_hostname(ctx: ssl.SSLContext, host: str) -> str | None:
    """The name the broker's certificate is checked against (None when not checked)."""
    return host if ctx.check_hostname else None
