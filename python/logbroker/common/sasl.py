"""SASL authentication on SASL_PLAINTEXT and SASL_SSL listeners (KIP-43, KIP-152, KIP-368):
the state of one connection's exchange and the PLAIN mechanism.

    connect ──> [ApiVersions]* ──> SaslHandshake(mechanism) ──> SaslAuthenticate ...
                                                                  │ success: principal User:<name>
                                                                  ▼
                                          every API ... (session ends after connections.max.reauth.ms)
                                                                  │ re-authenticate: SaslHandshake +
                                                                  ▼ SaslAuthenticate, same user and mechanism

- The network thread gives an unauthenticated connection's frames to the handlers (none is
  served by the data path) and limits them to `sasl.server.max.receive.size`. Before
  authentication only ApiVersions, SaslHandshake and SaslAuthenticate are allowed;
  anything else closes the connection (broker/dispatch.py).
- SaslHandshake names the mechanism (`sasl.enabled.mechanisms`; UNSUPPORTED_SASL_MECHANISM
  lists the enabled ones). After v1 the tokens travel in SaslAuthenticate; after v0 (Kafka
  0.10.0's form, which librdkafka's feature check needs advertised) they follow raw, each
  size-prefixed with no request header, answered the same way (`raw_token`); a failure there
  closes the connection without an answer, as Kafka does.
- SaslAuthenticate carries the mechanism's tokens: PLAIN one (`\\0user\\0password`), SCRAM two
  (common/sasl_scram.py), OAUTHBEARER one (common/oauthbearer.py), GSSAPI three (Kerberos,
  common/sasl_gssapi.py). A failure answers SASL_AUTHENTICATION_FAILED with Kafka's generic
  message and closes the connection once the answer is written; the broker's log says why.
- PLAIN checks a password against `listener.name.<listener>.plain.sasl.jaas.config`'s
  `user_<name>="<password>"` entries (Kafka's PlainLoginModule form) and, for users not
  there, against the user's SCRAM credentials (salting the password as SCRAM would), so
  `logbroker user set-password` serves both mechanisms.
- The principal is `User:<name>`. The session lifetime (`connections.max.reauth.ms`, 0:
  none) goes back in SaslAuthenticate v1+; after it the network thread serves only a
  re-authentication, which must be the same user with the same mechanism.
"""

from __future__ import annotations

import hmac
import logging
import re
import time

import trio

from logbroker import scram
from logbroker.common.oauthbearer import OAuthBearerServer, TokenRefused
from logbroker.common.sasl_scram import AuthenticationFailed, ScramServer
from logbroker.log_format import fields
from logbroker.protocol import RESPONSES, ErrorCode

log = logging.getLogger("logbroker.common.sasl")

# Kafka's messages to the client: nothing that tells an unknown user from a wrong password.
PLAIN_FAILED = "Authentication failed: Invalid username or password"
SCRAM_FAILED = "Authentication failed during authentication due to invalid credentials with SASL mechanism {}"
GSSAPI_FAILED = "Authentication failed during authentication due to invalid credentials with SASL mechanism GSSAPI"

_JAAS_ENTRY = re.compile(r'([A-Za-z0-9_.\-]+)\s*=\s*"((?:[^"\\]|\\.)*)"')


def jaas_options(jaas: str) -> dict[str, str]:
    return {k: v.replace('\\"', '"').replace("\\\\", "\\") for k, v in _JAAS_ENTRY.findall(jaas)}


def jaas_users(jaas: str) -> dict[str, str]:
    """The `user_<name>="<password>"` entries of a PlainLoginModule JAAS config."""
    return {k[len("user_") :]: v for k, v in jaas_options(jaas).items() if k.startswith("user_")}


def node_credentials(jaas: str) -> tuple[str, str]:
    """The client side of a listener's JAAS config, as Kafka reads it for connections
    between nodes: its `username="..."` and `password="..."` options. ValueError (never
    quoting the password) when either is missing."""
    options = jaas_options(jaas)
    user, password = options.get("username"), options.get("password")
    if not user:
        raise ValueError('has no username="..." (the user this node authenticates as to the other nodes)')
    if password is None:
        raise ValueError(f'has no password="..." for user {user!r} (this node\'s password to the other nodes)')
    return user, password


class SaslSession:
    """One connection's SASL state (created at its first request on a SASL listener)."""

    def __init__(
        self,
        peer: str,
        mechanisms: list[str],
        plain_users: dict[str, str],
        credential,
        reauth_ms: int,
        oauthbearer=None,
        token_credential=None,
        gssapi=None,
    ) -> None:
        """`oauthbearer()`: the listener's OAUTHBEARER validator (common/oauthbearer.py), made
        when a client first asks for the mechanism; `gssapi(peer)`: a new GSSAPI exchange
        (common/sasl_gssapi.py GssapiServer) on this listener."""
        self.peer = peer
        self._oauthbearer = oauthbearer
        self._token_credential = token_credential  # delegation tokens (ScramServer)
        self.token_authenticated = False  # the session logged in with a delegation token
        self._oauth: OAuthBearerServer | None = None
        self._gssapi = gssapi
        self._gss = None  # the GSSAPI exchange under way
        self.expires_ms: int | None = None  # an OAUTHBEARER session: its token's exp
        self.scopes: list[str] = []  # an OAUTHBEARER session: its token's scopes
        self.granted_ms = 0  # the session lifetime the last exchange was given (0: none)
        self._refusal: AuthenticationFailed | None = None
        self.mechanisms = mechanisms
        self._plain_users = plain_users
        self._credential = credential  # (user, mechanism) -> ScramCredential | None
        self.reauth_ms = reauth_ms
        self.mechanism: str | None = None  # chosen by the handshake under way
        self.raw_tokens = False  # a SaslHandshake v0 was answered: the next frames are raw tokens
        self._scram: ScramServer | None = None
        self.principal: str | None = None  # set once authenticated
        self._authenticated_mechanism: str | None = None
        # What the last SaslAuthenticate led to, for the dispatcher to act on (and clear):
        self.completed: str | None = None  # the principal, when an exchange just succeeded
        self.failed: str | None = None  # the log line of an exchange that just failed

    # --- SaslHandshake ---------------------------------------------------------------

    def handshake(self, mechanism: str) -> bool:
        """Starts an exchange with `mechanism`; False when it is not enabled (the
        connection stays unauthenticated, or keeps its current session)."""
        if mechanism not in self.mechanisms:
            return False
        if self._authenticated_mechanism is not None and mechanism != self._authenticated_mechanism:
            return False  # KIP-368: re-authentication keeps the mechanism
        self.mechanism = mechanism
        self._scram = None
        self._oauth = None
        self._gss = None
        return True

    # --- SaslAuthenticate ------------------------------------------------------------

    async def authenticate(self, token: bytes) -> tuple[bytes, str | None]:
        """One SaslAuthenticate token: (reply token, the principal when the exchange
        completed). AuthenticationFailed (naming user and cause) when it failed; the
        exchange is then over."""
        mechanism = self.mechanism
        if mechanism is None:
            raise AuthenticationFailed("SaslAuthenticate before SaslHandshake")
        try:
            if mechanism == "PLAIN":
                self.mechanism = None
                user = await self._plain(token)
                return b"", self._done(user, mechanism)
            if mechanism == "GSSAPI":
                if self._gss is None:
                    if self._gssapi is None:
                        raise AuthenticationFailed("GSSAPI is not set up on this listener")
                    self._gss = self._gssapi(self.peer)
                # keytab, replay cache: off the event loop
                reply, user = await trio.to_thread.run_sync(self._gss.step, token)
                if user is None:
                    return reply, None
                self._gss, self.mechanism = None, None
                return reply, self._done(user, mechanism)
            if mechanism == "OAUTHBEARER":
                if self._oauth is None:
                    if self._oauthbearer is None:
                        raise AuthenticationFailed("OAUTHBEARER is not set up on this listener")
                    self._oauth = OAuthBearerServer(self._oauthbearer())
                reply, validated = await self._oauth.respond(token)
                if validated is None:
                    return reply, None  # the error JSON; the client's 0x01 ends the exchange
                self._oauth, self.mechanism = None, None
                principal = self._done(validated.principal_name, mechanism)
                self.expires_ms = validated.expires_ms
                self.scopes = validated.scopes
                return reply, principal
            if self._scram is None:
                self._scram = ScramServer(mechanism, self._credential, self._token_credential)
                if b"tokenauth=" in bytes(token) and self._token_credential is not None:
                    # a delegation token's credential takes a PBKDF2 the first time: off the event loop
                    user = ScramServer.user_of(token)
                    if user is not None:
                        await trio.to_thread.run_sync(self._token_credential, user, mechanism)
                return self._scram.first(token), None
            scram_server, self._scram, self.mechanism = self._scram, None, None
            reply = scram_server.final(token)
            assert scram_server.user is not None
            if scram_server.token_owner is not None:  # a delegation token acts as its owner
                principal = self._done(scram_server.token_owner.partition(":")[2], mechanism)
                self.token_authenticated = True
                return reply, principal
            return reply, self._done(scram_server.user, mechanism)
        except AuthenticationFailed as e:
            self.mechanism, self._scram, self._oauth, self._gss = None, None, None, None
            self._refusal = e
            raise

    def failure_message(self, mechanism: str | None) -> str:
        if mechanism == "OAUTHBEARER":  # Kafka sends the RFC 7628 error JSON back
            refusal = self._refusal
            return refusal.error_json() if isinstance(refusal, TokenRefused) else '{"status":"invalid_token"}'
        if mechanism == "GSSAPI":
            return GSSAPI_FAILED
        return PLAIN_FAILED if mechanism == "PLAIN" else SCRAM_FAILED.format(mechanism)

    def lifetime_ms(self, now_ms: int) -> int:
        """The session's lifetime to send back (SaslAuthenticate v1+; 0: none): connections.max.reauth.ms,
        and for OAUTHBEARER no later than the token's exp (KIP-368), at least 1 ms."""
        lifetimes = [self.reauth_ms] if self.reauth_ms > 0 else []
        if self.expires_ms is not None and self._authenticated_mechanism == "OAUTHBEARER":
            lifetimes.append(max(1, self.expires_ms - now_ms))
        return min(lifetimes, default=0)

    def _done(self, user: str, mechanism: str) -> str:
        principal = f"User:{user}"
        if self.principal is not None and principal != self.principal:
            raise AuthenticationFailed(
                f"re-authentication of {self.principal} from {self.peer} as {principal}: "
                "a connection keeps its principal"
            )
        self.principal, self._authenticated_mechanism = principal, mechanism
        return principal

    async def _plain(self, token: bytes) -> str:
        parts = bytes(token).split(b"\0")
        if len(parts) != 3:
            raise AuthenticationFailed(
                f"PLAIN token from {self.peer} is not authzid\\0user\\0password ({len(parts)} fields)"
            )
        try:
            authzid, user, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError:
            raise AuthenticationFailed(f"PLAIN token from {self.peer} is not UTF-8") from None
        if not user:
            raise AuthenticationFailed(f"PLAIN token from {self.peer} has an empty user name")
        if authzid and authzid != user:
            raise AuthenticationFailed(f"PLAIN: user {user!r} asked to act as {authzid!r}, which is not allowed")
        expected = self._plain_users.get(user)
        if expected is not None:
            if hmac.compare_digest(expected.encode(), password.encode()):
                return user
            raise AuthenticationFailed(f"PLAIN: user {user!r} gave a wrong password")
        creds = [c for c in (self._credential(user, m) for m in scram.MECHANISMS) if c is not None]
        if not creds:
            raise AuthenticationFailed(
                f"PLAIN: user {user!r} is neither in the listener's JAAS config nor a SCRAM user"
            )
        cred = creds[0]
        # PBKDF2 takes milliseconds: off the event loop.
        salted = await trio.to_thread.run_sync(
            scram.salted_password, cred.mechanism, password.encode(), cred.salt, cred.iterations
        )
        if hmac.compare_digest(scram.stored_key(cred.mechanism, salted), cred.stored_key):
            return user
        raise AuthenticationFailed(
            f"PLAIN: user {user!r} gave a wrong password (checked against their {cred.mechanism} credential)"
        )


def log_failure(peer: str, mechanism: str | None, cause: str) -> None:
    log.info(
        "failed authentication from %s with %s: %s", peer, mechanism or "no mechanism", cause, extra=fields(peer=peer)
    )


__all__ = ["AuthenticationFailed", "SaslSession", "jaas_users", "log_failure", "node_credentials", "raw_token"]


# SaslHandshake and SaslAuthenticate, answered with the connection's session (ctx.sasl): on a
# client listener (broker/handlers/sasl.py) and on the controller listener (coord/peer_sasl.py)
HANDSHAKE_KEY, AUTHENTICATE_KEY = 17, 36


async def handle_handshake(ctx, request):
    session = ctx.sasl
    response = RESPONSES[HANDSHAKE_KEY]
    if session is None:  # on a listener without SASL, as Kafka answers
        return response(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[])
    if not session.handshake(request.mechanism):
        log_failure(
            ctx.peer,
            request.mechanism,
            f"mechanism {request.mechanism!r} is not one of "
            f"sasl.enabled.mechanisms {session.mechanisms}"
            + ("" if session.principal is None else " or not the one the session started with"),
        )
        return response(error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM, mechanisms=list(session.mechanisms))
    session.raw_tokens = ctx.version == 0
    return response(error_code=ErrorCode.NONE, mechanisms=list(session.mechanisms))


async def raw_token(session: SaslSession, token: bytes) -> tuple[bytes | None, str | None]:
    """A raw token after SaslHandshake v0: (the size-prefixed reply, the principal when the
    exchange completed), or (None, None) when it failed (logged, `session.failed` set: the
    connection closes without an answer)."""
    mechanism = session.mechanism
    try:
        reply, principal = await session.authenticate(token)
    except AuthenticationFailed as e:
        log_failure(session.peer, mechanism, str(e))
        session.raw_tokens = False
        session.failed = f"authentication failed ({e})"
        return None, None
    if principal is not None:
        session.raw_tokens = False
        session.completed = principal
        session.granted_ms = 0  # v0 has no session lifetime to send
    return len(reply).to_bytes(4, "big") + reply, principal


async def handle_authenticate(ctx, request):
    session = ctx.sasl
    response = RESPONSES[AUTHENTICATE_KEY]
    if session is None:  # on a listener without SASL, as Kafka answers
        return response(
            error_code=ErrorCode.ILLEGAL_SASL_STATE,
            error_message=f"listener {ctx.listener} does not authenticate with SASL",
        )
    mechanism = session.mechanism
    if mechanism is None:
        session.failed = f"SaslAuthenticate from {ctx.peer} without a SaslHandshake first"
        return response(
            error_code=ErrorCode.ILLEGAL_SASL_STATE,
            error_message=("SaslAuthenticate must follow a SaslHandshake naming the mechanism"),
        )
    try:
        reply, principal = await session.authenticate(bytes(request.auth_bytes))
    except AuthenticationFailed as e:
        log_failure(ctx.peer, mechanism, str(e))
        session.failed = f"authentication failed ({e})"
        return response(
            error_code=ErrorCode.SASL_AUTHENTICATION_FAILED, error_message=session.failure_message(mechanism)
        )
    lifetime = 0
    if principal is not None:
        session.completed = principal
        lifetime = session.granted_ms = session.lifetime_ms(int(time.time() * 1000))
    return response(error_code=ErrorCode.NONE, auth_bytes=reply, session_lifetime_ms=lifetime)
