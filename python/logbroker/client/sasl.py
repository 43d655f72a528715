"""SASL authentication of the client's connections (`security.protocol` SASL_PLAINTEXT or
SASL_SSL), Kafka's protocol (KIP-43, KIP-152, KIP-368), mechanisms PLAIN,
SCRAM-SHA-256/512, OAUTHBEARER (its tokens: client/oauthbearer.py) and GSSAPI (Kerberos, through
MIT's GSS-API library: logbroker/gssapi.py). This module holds the configuration and the mechanisms' state machines,
sans-I/O (bytes in, bytes out); `Connection` (client/network.py) and `BrokerConnection`
(client/connection.py) carry their bytes.

# Configuration (the Java client's and librdkafka's key names)

    security.protocol   SASL_PLAINTEXT, or SASL_SSL (TLS first, with the ssl.* keys: client/tls.py)
    sasl.mechanism      PLAIN (default), SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER
                        (sasl.oauthbearer.*: client/oauthbearer.py) or GSSAPI (below)
    sasl.username       the user (librdkafka's key)
    sasl.password       its password (librdkafka's key)
    sasl.jaas.config    Java's form: `org.apache.kafka.common.security.scram.ScramLoginModule
                        required username="alice" password="alice-secret";`; sasl.username and
                        sasl.password win over what it says

GSSAPI (Kerberos; librdkafka's keys, or Java's Krb5LoginModule JAAS form):

    sasl.kerberos.service.name   the brokers' service name (default kafka): the client asks
                                 the KDC for a ticket to <service>/<broker host>
    sasl.kerberos.keytab         log in from this keytab (the library gets and renews the
                                 TGT itself, in memory); unset: the default credential cache
                                 (KRB5CCNAME, filled by kinit)
    sasl.kerberos.principal      who to log in as from the keytab (librdkafka's default:
                                 kafkaclient)
    sasl.jaas.config             `com.sun.security.auth.module.Krb5LoginModule required
                                 useKeyTab=true keyTab="..." principal="...";` (serviceName too)

The realm and its KDCs come from krb5.conf (KRB5_CONFIG). The broker host is the one the
client connects to (bootstrap, or as the cluster's metadata advertises it). The first
connection to a broker asks the KDC for its service ticket, a blocking round trip, kept in
the credential cache after that.

The password (and the JAAS text, which holds it) is kept as a `Password`, whose repr is
hidden, and is never put in an error message or a log line.

# The exchange, on every new connection

    connect (TLS handshake for SASL_SSL)
    ApiVersions                       -> the versions the broker speaks (sent first, as always)
    SaslHandshake v1 (mechanism)      -> error UNSUPPORTED_SASL_MECHANISM lists the broker's
                                         enabled mechanisms: the connection fails naming both
    SaslAuthenticate (auth_bytes)...  -> highest version both speak (v0-v2); one round for
                                         PLAIN, two for SCRAM, three for GSSAPI;
                                         an error code
                                         (SASL_AUTHENTICATION_FAILED, ILLEGAL_SASL_STATE) fails
                                         the connection with `SaslAuthenticationError`
    every other request               (queued until then)

PLAIN (RFC 4616) sends one message, `\\0username\\0password` (no authorization id).

SCRAM (RFC 5802, RFC 7677; the arithmetic is logbroker.scram's):

    client-first   n,,n=<user, ',' '=' escaped>,r=<client nonce>[,tokenauth=true]
                   (tokenauth: a delegation token, KIP-48: user = its id, password =
                   its HMAC in base64; sasl.jaas.config's tokenauth="true" asks for it)
    server-first   r=<client nonce + server nonce>,s=<salt, base64>,i=<iterations>
                   (checked: the nonce extends ours, iterations >= 4096)
    client-final   c=biws,r=<nonce>,p=<ClientProof, base64>
    server-final   v=<ServerSignature, base64>: must match ours, or the server does not
                   know the credential (it is not who it claims); e=<error>: refused

# Failures
An authentication failure is not retriable: `SaslAuthenticationError` (client/errors.py,
naming the broker, mechanism and user, with the broker's error_message) fails every request
queued on the connection, the client backs off reconnecting to that broker
(reconnect.backoff.ms, doubling up to reconnect.backoff.max.ms), and the core hands the
error to whatever would otherwise wait and retry (ClientCore.on_auth_error): a producer's
send (waiting for metadata) and its queued records, a consumer's poll, the admin calls.

# Re-authentication (KIP-368)
SaslAuthenticate v1+ answers with session_lifetime_ms; when it is > 0 the broker serves only
a re-authentication once it has passed. The connection re-authenticates in place, as Java's
client does, at a random point between 85% and 95% of the lifetime: from then on new
requests wait in the connection (as they do before the first authentication), and once the
requests in flight are answered it sends SaslHandshake + SaslAuthenticate again, then lets
the waiting requests go. Nothing else is in flight on the connection meanwhile, so the
sans-I/O core needs no more than the queue it already has for the ApiVersions exchange.
"""

from __future__ import annotations

import base64
import hmac
import re
import secrets
from typing import Any

from logbroker import scram
from logbroker.client.errors import ConfigError
from logbroker.client.oauthbearer import OAuthBearerClient, TokenSource, token_source

__all__ = [
    "MECHANISMS",
    "SASL_PROTOCOLS",
    "Password",
    "GssapiClient",
    "GssapiSaslConfig",
    "Plain",
    "SaslConfig",
    "ScramClient",
    "from_config",
    "parse_jaas",
]

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI")
SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")


class Password:
    """A secret configuration value (sasl.password, sasl.jaas.config): `.value` is the text;
    repr and str do not show it (Java's `Password`)."""

    __slots__ = ("value",)

    def __init__(self, value: str) -> None:
        self.value = value

    def __repr__(self) -> str:
        return "Password([hidden])"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Password) and hmac.compare_digest(self.value.encode(), other.value.encode())

    def __hash__(self) -> int:
        return hash(Password)

    def __reduce__(self) -> Any:
        return (Password, (self.value,))


def check_mechanism(value: Any) -> str:
    """`sasl.mechanism`, upper-cased; ConfigError for those this client does not speak."""
    m = str(value).strip().upper()
    if m not in MECHANISMS:
        raise ConfigError(f"sasl.mechanism={value!r} is not one of {', '.join(MECHANISMS)}")
    return m


# key="value" (with \" and \\ escapes) or key=value in a JAAS login module entry.
_JAAS_OPTION = re.compile(r'([A-Za-z0-9_.\-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s";]+))')
_JAAS_HEAD = re.compile(r"^\s*[A-Za-z0-9_.$]+\s+(required|requisite|sufficient|optional)\b")


def parse_jaas(text: str) -> dict[str, str]:
    """The options of a one-module JAAS configuration (`sasl.jaas.config`):
    `<LoginModule class> required username="alice" password="alice-secret";` ->
    {"username": "alice", "password": "alice-secret"}. The text holds a password, so errors
    never quote it."""
    head = _JAAS_HEAD.match(text)
    if head is None:
        raise ConfigError("sasl.jaas.config is not '<LoginModule class> required key=\"value\" ...;'")
    rest = text[head.end() :].strip()
    if not rest.endswith(";"):
        raise ConfigError("sasl.jaas.config must end with ';'")
    out: dict[str, str] = {}
    for m in _JAAS_OPTION.finditer(rest):
        if m.group(2) is not None:
            out[m.group(1)] = re.sub(r"\\(.)", r"\1", m.group(2))
        else:
            out[m.group(1)] = m.group(3)
    return out


class SaslConfig:
    """What a connection needs to authenticate: mechanism, user and password."""

    __slots__ = ("mechanism", "password", "token_auth", "username")

    def __init__(self, mechanism: str, username: str, password: Password, token_auth: bool = False) -> None:
        self.mechanism = mechanism
        self.username = username
        self.password = password
        self.token_auth = token_auth  # a delegation token: username its id, password its HMAC (base64)

    def __repr__(self) -> str:
        return f"SaslConfig(mechanism={self.mechanism!r}, username={self.username!r}, password=[hidden])"

    def client(self, host: str = "") -> Plain | ScramClient:
        """A new state machine for one exchange (the first authentication or a re-authentication)
        with the broker at `host`."""
        if self.mechanism == "PLAIN":
            return Plain(self.username, self.password)
        return ScramClient(self.mechanism, self.username, self.password, token_auth=self.token_auth)


def _secret(value: Any) -> str | None:
    if value is None:
        return None
    return value.value if isinstance(value, Password) else str(value)


def from_config(config: dict[str, Any]) -> SaslConfig | OAuthSaslConfig | GssapiSaslConfig | None:
    """The SASL settings of a built client configuration (client/config.py); None when
    `security.protocol` is not SASL_PLAINTEXT or SASL_SSL. ConfigError when the user or the
    password is missing."""
    protocol = str(config.get("security.protocol") or "PLAINTEXT").upper()
    if protocol not in SASL_PROTOCOLS:
        return None
    mechanism = check_mechanism(config.get("sasl.mechanism") or "PLAIN")
    username = config.get("sasl.username")
    password = _secret(config.get("sasl.password"))
    jaas = _secret(config.get("sasl.jaas.config"))
    token_auth = False
    if mechanism == "OAUTHBEARER":
        try:
            source = token_source(config, parse_jaas(jaas) if jaas else {})
        except ValueError as e:
            raise ConfigError(str(e)) from None
        return OAuthSaslConfig(source)
    if mechanism == "GSSAPI":
        options = parse_jaas(jaas) if jaas else {}
        keytab = config.get("sasl.kerberos.keytab") or options.get("keyTab")
        principal = config.get("sasl.kerberos.principal") or options.get("principal")
        if keytab and not principal:
            principal = "kafkaclient"  # librdkafka's default
        service = options.get("serviceName") or config.get("sasl.kerberos.service.name") or "kafka"
        return GssapiSaslConfig(str(service), str(principal) if principal else None, str(keytab) if keytab else None)
    if jaas:
        options = parse_jaas(jaas)
        token_auth = options.get("tokenauth", "").lower() == "true"
        if token_auth and not mechanism.startswith("SCRAM-"):
            raise ConfigError(
                "sasl.jaas.config tokenauth=true (a delegation token) needs sasl.mechanism "
                "SCRAM-SHA-256 or SCRAM-SHA-512"
            )
        if username is None:
            username = options.get("username")
        if password is None:
            password = options.get("password")
    if not username or password is None:
        raise ConfigError(
            f"security.protocol={protocol} needs a user and a password: set sasl.username and "
            f'sasl.password, or sasl.jaas.config with username="..." password="..."'
        )
    return SaslConfig(mechanism, str(username), Password(password), token_auth)


class OAuthSaslConfig:
    """OAUTHBEARER's settings: where its tokens come from (client/oauthbearer.py)."""

    __slots__ = ("source",)
    mechanism = "OAUTHBEARER"

    def __init__(self, source: TokenSource) -> None:
        self.source = source

    @property
    def username(self) -> str:
        return f"(a token from {self.source.what})"

    def __repr__(self) -> str:
        return f"OAuthSaslConfig({self.source.what})"

    def client(self, host: str = "") -> OAuthBearerClient:
        """A new exchange with a current token (fetched now if the last is past 80% of its
        life); ValueError when none can be had."""
        return OAuthBearerClient(self.source.token(), self.source.extensions)


class GssapiSaslConfig:
    """GSSAPI's settings: the brokers' service name and who logs in (a keytab's principal, or
    the default credential cache's). The credential is acquired at the first exchange and
    shared by every connection."""

    __slots__ = ("_credential", "keytab", "principal", "service")
    mechanism = "GSSAPI"

    def __init__(self, service: str, principal: str | None, keytab: str | None) -> None:
        self.service, self.principal, self.keytab = service, principal, keytab
        self._credential: Any = None  # a logbroker.gssapi.Credential once acquired

    @property
    def username(self) -> str:
        return self.principal or "(the default credential cache's principal)"

    def __repr__(self) -> str:
        return f"GssapiSaslConfig(service={self.service!r}, principal={self.principal!r}, keytab={self.keytab!r})"

    def client(self, host: str = "") -> GssapiClient:
        """A new exchange with the broker at `host`; its first token is made here (the KDC is
        asked for the service ticket unless the cache has it). ValueError naming the cause."""
        from logbroker import gssapi

        try:
            credential = self._credential
            if credential is None:
                credential = self._credential = gssapi.Credential.initiator(self.principal, self.keytab)
            return GssapiClient(gssapi.Initiator(credential, f"{self.service}@{host}"))
        except gssapi.GssError as e:
            raise ValueError(f"Kerberos: {e}") from None


class GssapiClient:
    """The client side of SASL GSSAPI (RFC 4752): the context's tokens (AP-REQ, then nothing
    once the broker's AP-REP completes it), then the answer to the broker's security-layer
    offer: "no security layer" (all Kafka brokers offer), with no authorization id."""

    mechanism = "GSSAPI"

    def __init__(self, context: Any) -> None:  # a logbroker.gssapi.Initiator
        self._ctx = context
        self._first: bytes = context.step(b"")
        self.state = "context"  # -> "layers" -> "sent-layer" -> complete
        self.complete = False

    def first(self) -> bytes:
        return self._first

    def respond(self, challenge: bytes) -> bytes | None:
        from logbroker import gssapi

        try:
            if self.state == "context":
                out: bytes = self._ctx.step(challenge) if challenge or not self._ctx.complete else b""
                if self._ctx.complete:
                    self.state = "layers"
                return out
            if self.state == "layers":
                offer: bytes = self._ctx.unwrap(challenge)
                if len(offer) != 4 or not offer[0] & 0x01:
                    raise ValueError(
                        f"the broker's GSSAPI security-layer offer {offer.hex()} does not allow 'no security layer'"
                    )
                self.state = "sent-layer"
                reply: bytes = self._ctx.wrap(bytes([0x01, 0, 0, 0]))
                return reply
            if self.state == "sent-layer":
                self.state, self.complete = "complete", True
                return None
        except gssapi.GssError as e:
            raise ValueError(f"Kerberos: {e}") from None
        raise ValueError(f"GSSAPI message in state {self.state}")


class Plain:
    """PLAIN (RFC 4616): one message, `\\0username\\0password`; the server's answer is empty."""

    mechanism = "PLAIN"

    def __init__(self, username: str, password: Password) -> None:
        if "\0" in username or "\0" in password.value:
            raise ValueError("a PLAIN user name or password cannot hold a NUL character")
        self.username = username
        self._password = password
        self.complete = False

    def __repr__(self) -> str:
        return f"<Plain user={self.username!r}{' complete' if self.complete else ''}>"

    def first(self) -> bytes:
        """The client's first message."""
        return b"\0" + self.username.encode() + b"\0" + self._password.value.encode()

    def respond(self, challenge: bytes) -> bytes | None:
        """The server's answer to the first message: the exchange is complete (None: nothing
        more to send)."""
        self.complete = True
        return None


class ScramClient:
    """The client side of SCRAM-SHA-256/512 (see the module docstring). `first()` is the
    client-first message, `respond(server-first)` the client-final one,
    `respond(server-final)` checks the server's signature and returns None (complete);
    ValueError, with a message meant for the user, when the server's messages are wrong."""

    def __init__(
        self, mechanism: str, username: str, password: Password, nonce: str | None = None, token_auth: bool = False
    ) -> None:
        if mechanism not in scram.MECHANISMS:
            raise ValueError(f"unknown SCRAM mechanism {mechanism!r}")
        self.mechanism = mechanism
        self.username = username
        self._password: Password | None = password
        # printable, no ','; 32 random bytes as Java's client
        self.nonce = nonce or secrets.token_urlsafe(32)
        # a delegation token (KIP-48): the extension tells the broker the user is a token id
        self._client_first_bare = f"n={scram.escape_username(username)},r={self.nonce}" + (
            ",tokenauth=true" if token_auth else ""
        )
        self._auth_message: bytes | None = None
        self._salted: bytes | None = None
        self.state = "new"  # -> sent-first -> sent-final -> complete
        self.complete = False

    def __repr__(self) -> str:
        return f"<ScramClient {self.mechanism} user={self.username!r} {self.state}>"

    def first(self) -> bytes:
        if self.state != "new":
            raise ValueError("SCRAM client-first already sent")
        self.state = "sent-first"
        return ("n,," + self._client_first_bare).encode()

    def respond(self, challenge: bytes) -> bytes | None:
        if self.state == "sent-first":
            return self._client_final(challenge)
        if self.state == "sent-final":
            self._check_server_final(challenge)
            return None
        raise ValueError(f"SCRAM message in state {self.state}")

    def _client_final(self, server_first_bytes: bytes) -> bytes:
        try:
            server_first = bytes(server_first_bytes).decode()
            attrs = scram.parse_attributes(server_first)
        except (UnicodeDecodeError, ValueError):
            raise ValueError("malformed SCRAM server-first message") from None
        if "e" in attrs:
            raise ValueError(f"the server refused: {attrs['e']}")
        if "m" in attrs:
            raise ValueError("the server asks for a SCRAM extension (m=) this client does not know")
        nonce, salt_b64, iterations_text = attrs.get("r"), attrs.get("s"), attrs.get("i")
        if nonce is None or salt_b64 is None or iterations_text is None:
            raise ValueError("SCRAM server-first message without r=, s= or i=")
        if not nonce.startswith(self.nonce) or len(nonce) == len(self.nonce):
            raise ValueError("invalid server nonce: it does not extend the client nonce")
        try:
            salt = base64.b64decode(salt_b64, validate=True)
            iterations = int(iterations_text)
        except ValueError:
            raise ValueError("SCRAM server-first message with a malformed salt or iteration count") from None
        if iterations < scram.MIN_ITERATIONS:
            raise ValueError(
                f"the server asks for {iterations} iterations, fewer than the minimum {scram.MIN_ITERATIONS}"
            )
        assert self._password is not None
        self._salted = scram.salted_password(self.mechanism, self._password.value.encode(), salt, iterations)
        self._password = None  # not needed any more
        without_proof = f"c=biws,r={nonce}"
        self._auth_message = f"{self._client_first_bare},{server_first},{without_proof}".encode()
        proof = scram.client_proof(self.mechanism, self._salted, self._auth_message)
        self.state = "sent-final"
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def _check_server_final(self, server_final_bytes: bytes) -> None:
        try:
            attrs = scram.parse_attributes(bytes(server_final_bytes).decode())
        except (UnicodeDecodeError, ValueError):
            raise ValueError("malformed SCRAM server-final message") from None
        if "e" in attrs:
            raise ValueError(f"the server refused: {attrs['e']}")
        if "v" not in attrs:
            raise ValueError("SCRAM server-final message without v=")
        try:
            signature = base64.b64decode(attrs["v"], validate=True)
        except ValueError:
            raise ValueError("SCRAM server-final message with a malformed signature") from None
        assert self._salted is not None and self._auth_message is not None
        expected = scram.server_signature(
            self.mechanism, scram.server_key(self.mechanism, self._salted), self._auth_message
        )
        if not hmac.compare_digest(signature, expected):
            raise ValueError(
                "the server's SCRAM signature does not match: it does not know this user's "
                "credential (the server is not who it claims to be)"
            )
        self.state = "complete"
        self.complete = True
