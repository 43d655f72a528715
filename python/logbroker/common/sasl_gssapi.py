"""The broker's side of SASL GSSAPI (RFC 4752, Kerberos V5), as Kafka runs it inside
SaslAuthenticate:

    client                                      broker (this module, on a thread per step)
    AP-REQ (gss_init_sec_context)        ──>    gss_accept_sec_context with the listener's
                                                keytab credential; the context completes
                                 <──  AP-REP    (mutual authentication)
    empty token                          ──>
                                 <──  wrap([layers=0x01 none, max size 65536 (3 bytes)])
    wrap([0x01, max size, authzid])      ──>    unwrap: the client must choose "no security
                                 <──  empty     layer" (the only one offered, as Kafka's
                                                default sasl qop "auth"); done

The client's principal (alice@EXAMPLE.COM) becomes `User:<short name>` through
`sasl.kerberos.principal.to.local.rules` (common/kerberos_name.py). An authorization id the
client sends is ignored: the principal is who authenticated, as in Kafka.

The listener's credential is its GSSAPI JAAS config's `principal` and `keyTab`
(`listener.name.<l>.gssapi.sasl.jaas.config`, Kafka's Krb5LoginModule form), acquired once per
listener; only tickets for that exact principal are accepted.
"""

from __future__ import annotations

from logbroker.common.config import ConfigError
from logbroker.common.kerberos_name import KerberosName, NoMatchingRule, ShortNamer
from logbroker.common.sasl import jaas_options
from logbroker.common.sasl_scram import AuthenticationFailed
from logbroker.gssapi import Acceptor, Credential, GssError, default_realm

__all__ = ["GssapiListeners", "GssapiServer", "NO_SECURITY_LAYER", "OFFER"]

NO_SECURITY_LAYER = 0x01
# Kafka's broker (Java's GSSAPI SaslServer with qop "auth"): only "no layer", max buffer 65536
OFFER = bytes([NO_SECURITY_LAYER, 0x01, 0x00, 0x00])


class GssapiServer:
    """One GSSAPI exchange on one connection. `step(token)` -> (reply, user when complete);
    it blocks (keytab, replay cache): callers on trio run it on a thread."""

    def __init__(self, credential: Credential, namer: ShortNamer, peer: str) -> None:
        self._ctx = Acceptor(credential)
        self._namer = namer
        self._peer = peer
        self.stage = "context"  # -> "empty" (AP-REP sent) -> "layers" (offer sent) -> "done"
        self.principal: str | None = None  # the client's Kerberos principal

    def step(self, token: bytes) -> tuple[bytes, str | None]:
        try:
            return self._step(token)
        except GssError as e:
            raise AuthenticationFailed(f"GSSAPI from {self._peer}: {e}") from None

    def _step(self, token: bytes) -> tuple[bytes, str | None]:
        if self.stage == "context":
            reply = self._ctx.step(token)
            if not self._ctx.complete:
                return reply, None
            self.principal = self._ctx.peer
            if reply:
                self.stage = "empty"
                return reply, None
            return self._offer(), None
        if self.stage == "empty":
            if token:
                raise AuthenticationFailed(
                    f"GSSAPI from {self._peer} ({self.principal}): expected an empty token after the "
                    f"context was established, got {len(token)} bytes"
                )
            return self._offer(), None
        if self.stage == "layers":
            message = self._ctx.unwrap(token)
            if len(message) < 4:
                raise AuthenticationFailed(
                    f"GSSAPI from {self._peer} ({self.principal}): the security layer choice has "
                    f"{len(message)} bytes, fewer than 4"
                )
            if message[0] != NO_SECURITY_LAYER:
                raise AuthenticationFailed(
                    f"GSSAPI from {self._peer} ({self.principal}): the client chose security layer "
                    f"{message[0]:#04x}; only 0x01 (none) is offered"
                )
            self.stage = "done"
            assert self.principal is not None
            try:
                user = self._namer.short_name(self.principal)
            except (NoMatchingRule, ValueError) as e:
                raise AuthenticationFailed(f"GSSAPI from {self._peer}: {e}") from None
            return b"", user
        raise AuthenticationFailed(f"GSSAPI from {self._peer}: a token after the exchange ended")

    def _offer(self) -> bytes:
        self.stage = "layers"
        return self._ctx.wrap(OFFER)


class GssapiListeners:
    """The GSSAPI setup of a broker's SASL listeners: each listener's acceptor credential
    (acquired once, checked at start) and the principal-to-local rules (read at each login:
    the key is dynamic). `config()` is the broker's current BrokerConfig."""

    def __init__(self, config) -> None:
        self._config = config
        self._credentials: dict[str, Credential] = {}
        self._namer: tuple[str, ShortNamer] | None = None
        self._realm: str | None = None

    def check(self, listeners: list[str]) -> None:
        """At start, for each SASL listener: its JAAS config and keytab (ConfigError)."""
        for listener in listeners:
            self.credential(listener)
        self.namer()

    def credential(self, listener: str) -> Credential:
        cred = self._credentials.get(listener)
        if cred is None:
            cred = self._credentials[listener] = self._acquire(listener)
        return cred

    def _acquire(self, listener: str) -> Credential:
        key = f"listener.name.{listener.lower()}.gssapi.sasl.jaas.config"
        jaas = self._config().jaas_config("GSSAPI", listener)
        if not jaas:
            raise ConfigError(
                f"GSSAPI is enabled on SASL listener {listener}: set {key} to "
                "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true "
                'keyTab="/path/to/kafka.keytab" principal="kafka/<host>@<REALM>"; (Kafka\'s form)'
            )
        options = jaas_options(jaas)
        principal, keytab = options.get("principal"), options.get("keyTab")
        if not principal or not keytab:
            raise ConfigError(
                f'{key}: needs keyTab="..." and principal="..." (the broker logs in from a keytab; '
                f"a ticket cache is not used), has {', '.join(sorted(options)) or 'no options'}"
            )
        service = self._config().get_str("sasl.kerberos.service.name")
        jaas_service = options.get("serviceName", "")
        if service and jaas_service and service != jaas_service:
            raise ConfigError(
                f"conflicting service names: sasl.kerberos.service.name={service!r}, {key} serviceName={jaas_service!r}"
            )
        service = service or jaas_service
        if not service:
            raise ConfigError(
                f"GSSAPI on listener {listener}: no service name defined in either {key} (serviceName) "
                "or sasl.kerberos.service.name (as Kafka requires; e.g. kafka)"
            )
        try:
            name = KerberosName.parse(principal)
        except ValueError as e:
            raise ConfigError(f"{key}: principal: {e}") from None
        if name.service != service:
            raise ConfigError(
                f"{key}: principal {principal!r} is not of service {service!r} (sasl.kerberos.service.name); "
                f"clients ask for {service}/<host>"
            )
        try:
            return Credential.acceptor(principal, keytab)
        except GssError as e:
            raise ConfigError(f"{key}: cannot use keytab {keytab!r} for {principal!r}: {e}") from None

    def namer(self) -> ShortNamer:
        rules = self._config().get_str("sasl.kerberos.principal.to.local.rules")
        if self._namer is None or self._namer[0] != rules:
            if self._realm is None:
                self._realm = default_realm()
            self._namer = (rules, ShortNamer([r for r in rules.split(",") if r.strip()], self._realm))
        return self._namer[1]

    def server(self, listener: str, peer: str) -> GssapiServer:
        """A new exchange on `listener` (AuthenticationFailed when the listener cannot serve it)."""
        try:
            cred = self.credential(listener)
        except ConfigError as e:
            raise AuthenticationFailed(f"GSSAPI is not set up on listener {listener}: {e}") from None
        return GssapiServer(cred, self.namer(), peer)
