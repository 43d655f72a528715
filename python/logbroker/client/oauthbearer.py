"""SASL/OAUTHBEARER on the client (KIP-255, KIP-768, RFC 7628): where tokens come from, and
the mechanism's one message. Sans-I/O but for the token fetch (below).

# Configuration (librdkafka's key names; the Java client's in brackets)

    sasl.mechanism                       OAUTHBEARER
    sasl.oauthbearer.method              "default" (an unsecured token from
                                         sasl.oauthbearer.config, or oauth_cb) or "oidc"
    sasl.oauthbearer.token.endpoint.url  oidc: the identity provider's token endpoint
                                         [sasl.oauthbearer.token.endpoint.url]
    sasl.oauthbearer.client.id           oidc: the client credentials, sent as HTTP Basic
    sasl.oauthbearer.client.secret       [clientId=, clientSecret= of sasl.jaas.config]
    sasl.oauthbearer.scope               oidc: the scope asked for (optional) [scope=]
    sasl.oauthbearer.extensions          key=value,... sent with the token (KIP-342)
    sasl.oauthbearer.config              default: "principal=<name> [scope=a,b]
                                         [lifeSeconds=3600] [principalClaimName=sub]
                                         [scopeClaimName=scope]": an unsecured JWT (alg
                                         "none"), for brokers with Kafka's unsecured
                                         validator (tests); needs
                                         enable.sasl.oauthbearer.unsecure.jwt=true, as
                                         librdkafka does
    oauth_cb                             default: a callable(sasl.oauthbearer.config) ->
                                         (token, expiry in epoch seconds[, principal,
                                         extensions]), as confluent-kafka's

oidc asks the endpoint for `grant_type=client_credentials` (and `scope`), with the client id
and secret as HTTP Basic (each URL-encoded first, RFC 6749 2.3.1), and takes `access_token`;
its lifetime is the JWT's `exp` claim, else the answer's `expires_in`.

# Tokens over time
A token is fetched when a connection first authenticates, and again when one authenticates
(or re-authenticates, KIP-368: the broker ends an OAUTHBEARER session at the token's `exp`)
after 80% of the token's lifetime has passed, so the re-authentication near the end of a
session carries a new token. The fetch is a blocking HTTP request (10 s timeout) on the
thread that drives the connections, once per token lifetime; a failed fetch while the old
token is still valid keeps the old one (logged), else fails the authentication naming the
endpoint.

# The message (RFC 7628 3.1)

    n,,  0x01  auth=Bearer <token>  0x01  [<key>=<value> 0x01]...  0x01

The server answers nothing on success; on a refused token it answers an error JSON, to which
the client replies 0x01, and the server then fails the exchange with that JSON as message.
"""

from __future__ import annotations

import base64
import json
import logging
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import Any

log = logging.getLogger("logbroker.client.oauthbearer")

FETCH_TIMEOUT_S = 10.0
REFRESH_AT = 0.8  # of a token's lifetime
METHODS = ("default", "oidc")


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def token_expiry(token: str) -> float | None:
    """The `exp` claim (epoch seconds) of a JWT, or None when the token is not one."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except ValueError:
        return None
    exp = claims.get("exp") if isinstance(claims, dict) else None
    return float(exp) if isinstance(exp, (int, float)) and not isinstance(exp, bool) else None


def unsecured_token(config: str, now: float) -> tuple[str, float]:
    """librdkafka's unsecured JWT from `sasl.oauthbearer.config`: (token, expiry)."""
    options: dict[str, str] = {}
    for item in config.split():
        key, eq, value = item.partition("=")
        if not eq:
            raise ValueError(f"sasl.oauthbearer.config: {item!r} is not key=value")
        options[key] = value
    principal = options.pop("principal", "")
    if not principal:
        raise ValueError("sasl.oauthbearer.config needs principal=<name> for an unsecured token")
    try:
        life = int(options.pop("lifeSeconds", "3600"))
    except ValueError:
        raise ValueError("sasl.oauthbearer.config: lifeSeconds is not an integer") from None
    claims: dict[str, Any] = {
        options.pop("principalClaimName", "sub"): principal,
        "iat": int(now),
        "exp": int(now) + life,
    }
    scope_claim = options.pop("scopeClaimName", "scope")
    if "scope" in options:
        claims[scope_claim] = [s for s in options.pop("scope").split(",") if s]
    header = _b64url(json.dumps({"alg": "none"}, separators=(",", ":")).encode())
    body = _b64url(json.dumps(claims, separators=(",", ":")).encode())
    return f"{header}.{body}.", float(claims["exp"])


def fetch_client_credentials(url: str, client_id: str, secret: str, scope: str | None) -> tuple[str, float]:
    """An access token from an OAuth token endpoint (client credentials grant): (token, expiry).
    ValueError naming the endpoint and the cause."""
    form = {"grant_type": "client_credentials"}
    if scope:
        form["scope"] = scope
    basic = base64.b64encode(
        f"{urllib.parse.quote(client_id, safe='')}:{urllib.parse.quote(secret, safe='')}".encode()
    ).decode()
    req = urllib.request.Request(
        url,
        data=urllib.parse.urlencode(form).encode(),
        method="POST",
        headers={
            "Authorization": f"Basic {basic}",
            "Accept": "application/json",
            "Content-Type": "application/x-www-form-urlencoded",
        },
    )
    started = time.time()
    try:
        with urllib.request.urlopen(req, timeout=FETCH_TIMEOUT_S) as r:
            doc = json.loads(r.read(1 << 20))
    except urllib.error.HTTPError as e:
        with e:
            body = e.read(300).decode(errors="replace")
        raise ValueError(f"the token endpoint {url} refused client {client_id!r}: HTTP {e.code} {body}") from None
    except (OSError, ValueError) as e:
        raise ValueError(f"cannot get a token from {url}: {e}") from None
    token = doc.get("access_token") if isinstance(doc, dict) else None
    if not isinstance(token, str) or not token:
        raise ValueError(f"the token endpoint {url} answered without an access_token")
    expiry = token_expiry(token)
    if expiry is None:
        expires_in = doc.get("expires_in")
        if not isinstance(expires_in, (int, float)):
            raise ValueError(f"the token endpoint {url} gave a token with no exp claim and no expires_in")
        expiry = started + float(expires_in)
    return token, expiry


class TokenSource:
    """One client's tokens: `token()` -> (token, extensions), fetched again after 80% of the
    last one's lifetime (thread-safe: the connections of a client share it)."""

    def __init__(
        self,
        fetch: Callable[[], tuple[str, float]],
        extensions: dict[str, str],
        what: str,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._fetch = fetch
        self.extensions = extensions
        self.what = what  # names the source in errors
        self._clock = clock
        self._lock = threading.Lock()
        self._token: tuple[str, float, float] | None = None  # (token, expiry, refresh at)
        self.fetches = 0

    def token(self) -> str:
        now = self._clock()
        with self._lock:
            current = self._token
            if current is not None and now < current[2]:
                return current[0]
            try:
                token, expiry = self._fetch()
            except ValueError:
                if current is not None and now < current[1]:
                    log.warning(
                        "%s: a new token could not be had; the current one serves until it expires",
                        self.what,
                        exc_info=True,
                    )
                    return current[0]
                raise
            self.fetches += 1
            if expiry <= now:
                raise ValueError(f"{self.what} gave a token that has already expired")
            self._token = (token, expiry, now + (expiry - now) * REFRESH_AT)
            return token


class OAuthBearerClient:
    """The mechanism: `first()` the message with the token, `respond(reply)` None when the
    server accepted (an empty reply), 0x01 after its error JSON (the server then fails the
    exchange with it)."""

    mechanism = "OAUTHBEARER"

    def __init__(self, token: str, extensions: dict[str, str]) -> None:
        self._token = token
        self.extensions = extensions
        self.complete = False
        self.server_error: str | None = None

    def first(self) -> bytes:
        ext = "".join(f"{k}={v}\x01" for k, v in self.extensions.items())
        return f"n,,\x01auth=Bearer {self._token}\x01{ext}\x01".encode()

    def respond(self, challenge: bytes) -> bytes | None:
        if challenge:
            self.server_error = bytes(challenge).decode(errors="replace")
            return b"\x01"
        self.complete = True
        return None


def parse_extensions(text: str | None) -> dict[str, str]:
    out = {}
    for item in (text or "").split(","):
        if item.strip():
            key, eq, value = item.strip().partition("=")
            if not eq or not key.isalnum():
                raise ValueError(f"sasl.oauthbearer.extensions: {item!r} is not key=value (key alphanumeric)")
            out[key] = value
    return out


def token_source(config: dict[str, Any], jaas: dict[str, str]) -> TokenSource:
    """The TokenSource a built client configuration asks for; ValueError naming what is missing."""

    def secret(value: Any) -> str | None:
        return None if value is None else getattr(value, "value", value)

    method = str(config.get("sasl.oauthbearer.method") or "default").lower()
    extensions = parse_extensions(config.get("sasl.oauthbearer.extensions"))
    if method not in METHODS:
        raise ValueError(f"sasl.oauthbearer.method={method!r}: use default or oidc")
    url = config.get("sasl.oauthbearer.token.endpoint.url")
    if method == "oidc" or url:  # the Java client's form: a token endpoint URL means OIDC
        client_id = config.get("sasl.oauthbearer.client.id") or jaas.get("clientId")
        client_secret = secret(config.get("sasl.oauthbearer.client.secret")) or jaas.get("clientSecret")
        scope = config.get("sasl.oauthbearer.scope") or jaas.get("scope")
        if not url or not client_id or client_secret is None:
            raise ValueError(
                "sasl.oauthbearer.method=oidc needs sasl.oauthbearer.token.endpoint.url, "
                "sasl.oauthbearer.client.id and sasl.oauthbearer.client.secret"
            )
        return TokenSource(
            lambda: fetch_client_credentials(url, client_id, client_secret, scope),
            extensions,
            f"the token endpoint {url}",
        )
    callback = config.get("oauth.cb")
    text = str(config.get("sasl.oauthbearer.config") or "")
    if callback is not None:

        def from_callback() -> tuple[str, float]:
            got = callback(text)
            if not isinstance(got, tuple) or len(got) not in (2, 4):
                raise ValueError("oauth_cb must return (token, expiry) or (token, expiry, principal, extensions)")
            if len(got) == 4 and got[3]:
                extensions.update({str(k): str(v) for k, v in dict(got[3]).items()})
            return str(got[0]), float(got[1])

        return TokenSource(from_callback, extensions, "oauth_cb")
    if not text or not config.get("enable.sasl.oauthbearer.unsecure.jwt"):
        raise ValueError(
            "sasl.mechanism=OAUTHBEARER needs sasl.oauthbearer.method=oidc (with the token endpoint "
            "and client credentials), oauth_cb, or, for an unsecured token (tests), "
            "enable.sasl.oauthbearer.unsecure.jwt=true with sasl.oauthbearer.config=principal=<name>"
        )
    unsecured_token(text, time.time())  # checked now, not at the first connection
    return TokenSource(lambda: unsecured_token(text, time.time()), extensions, "sasl.oauthbearer.config")
