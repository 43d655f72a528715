"""How a node secures its connections to other nodes, and the controller listener it serves.

Kafka secures the connections between nodes with the security protocol of the listener
they go to (`listener.security.protocol.map`): brokers reach each other on the
inter-broker listener (`inter.broker.listener.name`), and everyone reaches the controllers
on the controller listener (`controller.listener.names`). Each may be PLAINTEXT, SSL,
SASL_PLAINTEXT or SASL_SSL.

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

With SASL (SASL_PLAINTEXT, or SASL_SSL after the TLS handshake), a node then authenticates
with the mechanism and credentials of `BrokerConfig.node_sasl` (Kafka's
sasl.mechanism.inter.broker.protocol / sasl.mechanism.controller.protocol and the listener's
JAAS config): the exchange is peer_sasl.py's; `open` also says when the session must be
renewed by dialling again. The controller listener's side is `controller_sasl`.

A handshake failure surfaces as `trio.BrokenResourceError` (its cause the `ssl.SSLError`),
an authentication failure as `PeerAuthenticationFailed` (a BrokenResourceError naming the
node, listener, mechanism and user), which every caller already treats as a lost connection.
"""

from __future__ import annotations

import os
import ssl
import tempfile
import weakref
from collections.abc import Callable
from pathlib import Path

import trio

from logbroker import _core
from logbroker.client.sasl import Password, SaslConfig
from logbroker.common.config import BrokerConfig, ConfigError
from logbroker.common.sasl import SaslSession, jaas_users
from logbroker.coord.peer_sasl import authenticate, reauth_deadline

__all__ = [
    "PLAINTEXT",
    "PeerSecurity",
    "controller_sasl",
    "controller_security",
    "inter_broker_security",
    "peer_principal",
    "rust_client_sasl",
    "rust_client_tls",
    "server_context",
]

ANONYMOUS = "User:ANONYMOUS"


def _tls_files(config: BrokerConfig, listener: str) -> tuple[bytes, bytes, bytes | None, str]:
    tls = config.listener_tls(listener)
    if tls is None:
        raise ConfigError(f"listener {listener} is {config.security_protocol(listener)}, not SSL")
    return tls


def load_identity(context: ssl.SSLContext, config: BrokerConfig, chain: bytes, key: bytes) -> None:
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


def load_trust(context: ssl.SSLContext, trust: bytes, why: str) -> None:
    try:
        context.load_verify_locations(cadata=trust.decode("ascii", "replace"))
    except (ssl.SSLError, ValueError) as e:
        raise ConfigError(f"ssl.truststore: {e} ({why})") from None


def _verify_hostname(config: BrokerConfig) -> bool:
    return config.get_str("ssl.endpoint.identification.algorithm").lower() == "https"


class PeerSecurity:
    """Opens connections to the nodes of one listener: plain TCP or TLS, then SASL if the
    listener authenticates with it."""

    def __init__(
        self, listener: str, context: ssl.SSLContext | None, sasl: SaslConfig | None = None, node_id: int = -1
    ) -> None:
        self.listener = listener
        self.context = context
        self.sasl = sasl
        self.node_id = node_id

    @classmethod
    def for_listener(cls, config: BrokerConfig, listener: str) -> PeerSecurity:
        protocol = config.security_protocol(listener)
        if not config.in_cluster and protocol.startswith("SASL_"):
            return cls(listener, None)  # a single node, which dials no other
        creds = config.node_sasl(listener)
        sasl = None if creds is None else SaslConfig(creds[0], creds[1], Password(creds[2]))
        if protocol in ("PLAINTEXT", "SASL_PLAINTEXT"):
            return cls(listener, None, sasl, config.node_id)
        chain, key, trust, _auth = _tls_files(config, listener)
        context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
        context.check_hostname = _verify_hostname(config)
        if trust is None:
            if config.in_cluster:
                raise ConfigError(
                    f"listener {listener} is {protocol} between nodes: set ssl.truststore.location "
                    "(the authority that signs the nodes' certificates)"
                )
            # a single node only dials itself (share groups' dead letters): it trusts its own certificate
            trust = chain
            context.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN
        load_trust(context, trust, f"connections to listener {listener}")
        load_identity(context, config, chain, key)
        return cls(listener, context, sasl, config.node_id)

    async def connect(self, host: str, port: int) -> trio.abc.Stream:
        """A connected stream, its TLS handshake and SASL authentication done
        (BrokenResourceError if either failed)."""
        stream, _renew_at = await self.open(host, port)
        return stream

    async def open(self, host: str, port: int) -> tuple[trio.abc.Stream, float]:
        """`connect`, and when (trio clock) to dial again because the SASL session ends
        (inf: never)."""
        tcp = await trio.open_tcp_stream(host, port)
        stream: trio.abc.Stream = tcp
        try:
            if self.context is not None:
                stream = trio.SSLStream(tcp, self.context, server_hostname=host)
                await stream.do_handshake()
            renew_at = float("inf")
            if self.sasl is not None:
                lifetime = await authenticate(stream, self.sasl, self.node_id, self.listener, f"{host}:{port}")
                renew_at = reauth_deadline(lifetime)
        except BaseException:
            await trio.aclose_forcefully(tcp)
            raise
        return stream, renew_at


PLAINTEXT = PeerSecurity("PLAINTEXT", None)


# One per broker configuration: the services that dial other brokers share it, so the key
# files are read and the TLS context built once.
_INTER_BROKER: weakref.WeakKeyDictionary[BrokerConfig, PeerSecurity] = weakref.WeakKeyDictionary()


def inter_broker_security(config: BrokerConfig) -> PeerSecurity:
    """How this broker dials the other brokers (their inter-broker listener)."""
    security = _INTER_BROKER.get(config)
    if security is None:
        security = _INTER_BROKER[config] = PeerSecurity.for_listener(config, config.client_listener_name)
    return security


def controller_security(config: BrokerConfig) -> PeerSecurity:
    """How this node dials the controllers (their controller listener)."""
    return PeerSecurity.for_listener(config, config.get_str("controller.listener.names").upper())


def server_context(config: BrokerConfig, listener: str) -> ssl.SSLContext | None:
    """The TLS server context of a listener served in Python (the controller listener):
    None when it is PLAINTEXT or SASL_PLAINTEXT."""
    protocol = config.security_protocol(listener)
    if protocol in ("PLAINTEXT", "SASL_PLAINTEXT"):
        return None
    chain, key, trust, auth = _tls_files(config, listener)
    return tls_server_context(config, chain, key, trust, auth, f"listener {listener}")


def tls_server_context(
    config: BrokerConfig, chain: bytes, key: bytes, trust: bytes | None, auth: str, what: str
) -> ssl.SSLContext:
    """A TLS server context with the broker's keystore; client certificates checked against
    `trust` when `auth` (ssl.client.auth) is `required` or `requested` (callers insist on a
    truststore then). `what` names the listener or endpoint in errors."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    load_identity(context, config, chain, key)
    if auth != "none":
        assert trust is not None
        load_trust(context, trust, f"client certificates on {what}")
        context.verify_mode = ssl.CERT_REQUIRED if auth == "required" else ssl.CERT_OPTIONAL
    return context


def controller_sasl(config: BrokerConfig, image) -> Callable[[str], SaslSession] | None:
    """A new `SaslSession` per connection to the controller listener, when it is
    SASL_PLAINTEXT or SASL_SSL (None otherwise). PLAIN users are the user_<name> entries of
    listener.name.<controller listener>.plain.sasl.jaas.config; `image()` gives the
    metadata image whose SCRAM users also log in, once the quorum has replayed them."""
    listener = config.get_str("controller.listener.names").upper()
    if not config.security_protocol(listener).startswith("SASL_"):
        return None
    mechanisms = config.get_str("sasl.enabled.mechanisms").split(",")
    users = jaas_users(config.jaas_config("PLAIN", listener))
    reauth_ms = config.get_int("connections.max.reauth.ms")

    def credential(user: str, mechanism: str):
        return image().scram_credential(user, mechanism)

    return lambda peer: SaslSession(peer, mechanisms, users, credential, reauth_ms)


def peer_principal(stream: trio.abc.Stream, rules: str = "DEFAULT") -> str:
    """Kafka's principal of an accepted connection: `User:<certificate subject>` (mapped by
    `rules`, ssl.principal.mapping.rules) for a TLS client that presented a certificate, else
    `User:ANONYMOUS`. ValueError when no rule maps the subject."""
    if not isinstance(stream, trio.SSLStream):
        return ANONYMOUS
    der = stream.getpeercert(binary_form=True)
    return _core.certificate_principal(der, rules) if der else ANONYMOUS


def rust_client_sasl(config: BrokerConfig, listener: str) -> tuple[str, str, str, str] | None:
    """The follower fetch loops' SASL settings for the inter-broker listener: (listener,
    mechanism, user, password), None when it is not SASL_PLAINTEXT or SASL_SSL."""
    creds = config.node_sasl(listener) if config.in_cluster else None
    return None if creds is None else (listener, *creds)


def rust_client_tls(config: BrokerConfig) -> tuple[bytes, bytes | None, bytes | None, bool] | None:
    """The follower fetch loops' TLS settings for the inter-broker listener (None: no TLS)."""
    if inter_broker_security(config).context is None:  # built (and checked) once per config
        return None
    chain, key, trust, _auth = _tls_files(config, config.client_listener_name)
    assert trust is not None
    return trust, chain, key, _verify_hostname(config)
