"""How a node secures its connections to other nodes, and the controller listener it serves.

Kafka secures the connections between nodes with the security protocol of the listener
they go to (`listener.security.protocol.map`): brokers reach each other on the
inter-broker listener (`inter.broker.listener.name`), and everyone reaches the controllers
on the controller listener (`controller.listener.names`). logbroker serves PLAINTEXT and
SSL there (SASL between nodes is not served: `BrokerConfig.check_listeners` says so).

With SSL, a node uses its own `ssl.*` settings both ways, as Kafka does:

- as a client (`PeerSecurity.for_listener`): the truststore holds the authorities the other
  node's certificate must chain to; the keystore is presented as this node's certificate,
  so a listener with `ssl.client.auth=required` admits it and names it `User:<subject>`;
  `ssl.endpoint.identification.algorithm=https` (the default) checks that the certificate
  names the host dialled, an empty value checks the chain only;
- as the controller listener's server (`server_context`): the keystore is its certificate,
  `ssl.client.auth` and the truststore decide which clients get in;
- the follower fetch loops (Rust, rust/src/server/tls_client.rs) get the same settings
  through `rust_client_tls`.

A handshake failure surfaces as `trio.BrokenResourceError` (its cause the `ssl.SSLError`),
which every caller already treats as a lost connection.
"""

from __future__ import annotations

import os
import ssl
import tempfile
from pathlib import Path

import trio

from logbroker import _core
from logbroker.broker.config import BrokerConfig, ConfigError

__all__ = ["PLAINTEXT", "PeerSecurity", "controller_security", "inter_broker_security", "peer_principal",
           "rust_client_tls", "server_context"]

ANONYMOUS = "User:ANONYMOUS"
SERVED = ("PLAINTEXT", "SSL")


def _tls_files(config: BrokerConfig, listener: str) -> tuple[bytes, bytes, bytes | None, str]:
    tls = config.listener_tls(listener)
    if tls is None:
        raise ConfigError(f"listener {listener} is {config.security_protocol(listener)}, not SSL")
    return tls


def _load_identity(context: ssl.SSLContext, config: BrokerConfig, chain: bytes, key: bytes) -> None:
    """The keystore into `context` (Python's ssl reads files: an inline keystore goes
    through a private temporary file, removed at once)."""
    location = config.get_str("ssl.keystore.location")
    try:
        if location:
            context.load_cert_chain(location)
            return
        fd, path = tempfile.mkstemp(prefix="logbroker-keystore-", suffix=".pem")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(key + b"\n" + chain)
            context.load_cert_chain(path)
        finally:
            Path(path).unlink(missing_ok=True)
    except (ssl.SSLError, OSError) as e:
        raise ConfigError(f"ssl.keystore: the key and certificate chain cannot be loaded: {e}") from None


def _load_trust(context: ssl.SSLContext, trust: bytes, why: str) -> None:
    try:
        context.load_verify_locations(cadata=trust.decode("ascii", "replace"))
    except (ssl.SSLError, ValueError) as e:
        raise ConfigError(f"ssl.truststore: {e} ({why})") from None


def _verify_hostname(config: BrokerConfig) -> bool:
    return config.get_str("ssl.endpoint.identification.algorithm").lower() == "https"


class PeerSecurity:
    """Opens connections to the nodes of one listener: plain TCP, or TLS."""

    def __init__(self, listener: str, context: ssl.SSLContext | None) -> None:
        self.listener = listener
        self.context = context

    @classmethod
    def for_listener(cls, config: BrokerConfig, listener: str) -> PeerSecurity:
        protocol = config.security_protocol(listener)
        if protocol not in SERVED and config.quorum_voters:
            raise ConfigError(f"listener {listener} is {protocol}: connections between nodes are PLAINTEXT or SSL")
        if protocol in ("PLAINTEXT", "SASL_PLAINTEXT", "SASL_SSL"):  # SASL: a single node, which dials no other
            return cls(listener, None)
        chain, key, trust, _auth = _tls_files(config, listener)
        context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
        context.check_hostname = _verify_hostname(config)
        if trust is None:
            if config.quorum_voters:
                raise ConfigError(f"listener {listener} is SSL between nodes: set ssl.truststore.location (the "
                                  "authority that signs the nodes' certificates)")
            # a single node only dials itself (share groups' dead letters): it trusts its own certificate
            trust = chain
            context.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN
        _load_trust(context, trust, f"connections to listener {listener}")
        _load_identity(context, config, chain, key)
        return cls(listener, context)

    async def connect(self, host: str, port: int) -> trio.abc.Stream:
        """A connected stream, its TLS handshake done (BrokenResourceError if it failed)."""
        tcp = await trio.open_tcp_stream(host, port)
        if self.context is None:
            return tcp
        stream = trio.SSLStream(tcp, self.context, server_hostname=host)
        try:
            await stream.do_handshake()
        except BaseException:
            await trio.aclose_forcefully(tcp)
            raise
        return stream


PLAINTEXT = PeerSecurity("PLAINTEXT", None)


def inter_broker_security(config: BrokerConfig) -> PeerSecurity:
    """How this broker dials the other brokers (their inter-broker listener)."""
    return PeerSecurity.for_listener(config, config.client_listener_name)


def controller_security(config: BrokerConfig) -> PeerSecurity:
    """How this node dials the controllers (their controller listener)."""
    return PeerSecurity.for_listener(config, config.get_str("controller.listener.names").upper())


def server_context(config: BrokerConfig, listener: str) -> ssl.SSLContext | None:
    """The TLS server context of a listener served in Python (the controller listener):
    None when it is PLAINTEXT."""
    protocol = config.security_protocol(listener)
    if protocol not in SERVED:
        raise ConfigError(f"the controller listener {listener} is {protocol}: it serves PLAINTEXT or SSL")
    if protocol == "PLAINTEXT":
        return None
    chain, key, trust, auth = _tls_files(config, listener)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    _load_identity(context, config, chain, key)
    if auth != "none":
        assert trust is not None  # listener_tls insists
        _load_trust(context, trust, f"client certificates on listener {listener}")
        context.verify_mode = ssl.CERT_REQUIRED if auth == "required" else ssl.CERT_OPTIONAL
    return context


def peer_principal(stream: trio.abc.Stream, rules: str = "DEFAULT") -> str:
    """Kafka's principal of an accepted connection: `User:<certificate subject>` (mapped by
    `rules`, ssl.principal.mapping.rules) for a TLS client that presented a certificate, else
    `User:ANONYMOUS`. ValueError when no rule maps the subject."""
    if not isinstance(stream, trio.SSLStream):
        return ANONYMOUS
    der = stream.getpeercert(binary_form=True)
    return _core.certificate_principal(der, rules) if der else ANONYMOUS


def rust_client_tls(config: BrokerConfig, listener: str) -> tuple[bytes, bytes | None, bytes | None, bool] | None:
    """The follower fetch loops' TLS settings for the inter-broker listener (None: PLAINTEXT)."""
    if PeerSecurity.for_listener(config, listener).context is None:  # also checks the settings
        return None
    chain, key, trust, _auth = _tls_files(config, listener)
    assert trust is not None
    return trust, chain, key, _verify_hostname(config)
