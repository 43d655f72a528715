"""SASL/OAUTHBEARER on the broker (KIP-255, KIP-768, RFC 7628): the client's message and the
validation of its token, as Kafka's two server-side validators do it.

The client's one message (RFC 7628 3.1; KIP-342 extensions):

    n,[a=<authzid>],  0x01  auth=Bearer <token>  0x01  [<key>=<value> 0x01]...  0x01

An authzid, when given, must be the token's principal. Extensions are accepted and ignored
(no validator here checks any, as Kafka's defaults do not).

The token is a JWT, `BASE64URL(header).BASE64URL(claims).BASE64URL(signature)`, checked by
one of:

- **JWKS validation** (Kafka's `OAuthBearerValidatorCallbackHandler`, KIP-768), when
  `sasl.oauthbearer.jwks.endpoint.url` is set: the header's `alg` must be one jws.rs accepts
  ("none" never is) and the key the one of the JWKS with the header's `kid` (a JWKS of one key
  serves a token without `kid`); the signature checked in Rust (`_core.jws_verify`). Claims:
  `exp` and `iat` required (numbers, seconds), `exp` not past and `nbf` not ahead, each with
  `sasl.oauthbearer.clock.skew.seconds` of slack; `iss` equal to
  `sasl.oauthbearer.expected.issuer` and `aud` holding one of
  `sasl.oauthbearer.expected.audience` when those are set; the subject claim
  (`sasl.oauthbearer.sub.claim.name`, "sub") a non-empty string; the scope claim
  (`sasl.oauthbearer.scope.claim.name`, "scope") a space-separated string or a list of
  strings, when present.
- **Unsecured validation** (Kafka's default `OAuthBearerUnsecuredValidatorCallbackHandler`):
  for tests only. The header's `alg` must be "none" and the signature empty; the principal
  claim (`unsecuredValidatorPrincipalClaimName`, "sub"), `exp` (and `iat` if present) checked
  with `unsecuredValidatorAllowableClockSkewMs` (0); every scope of
  `unsecuredValidatorRequiredScope` must be in the scope claim
  (`unsecuredValidatorScopeClaimName`, "scope"). Those options are read from the listener's
  `listener.name.<l>.oauthbearer.sasl.jaas.config`, as Kafka reads them.

The principal is `User:<subject>`. A token's session lasts until its `exp` at most
(`connections.max.reauth.ms` may end it sooner): the client must re-authenticate with a new
token before then (KIP-368).

A refused token is answered as RFC 7628 says: the server's reply is the error JSON
`{"status":"invalid_token"}` (`insufficient_scope` with "scope" for a missing required
scope), the client answers 0x01, and the exchange fails with that JSON as the message.
"""

from __future__ import annotations

import base64
import binascii
import json
import time
from collections.abc import Callable
from typing import Any

from logbroker import _core
from logbroker.common.sasl_scram import AuthenticationFailed

KVSEP = b"\x01"


class TokenRefused(AuthenticationFailed):
    """A token the validator refuses: `cause` for the broker's log, `status` and `scope` for
    the RFC 7628 error JSON the client is sent."""

    def __init__(self, cause: str, status: str = "invalid_token", scope: str | None = None) -> None:
        super().__init__(cause)
        self.status = status
        self.scope = scope

    def error_json(self) -> str:
        doc = {"status": self.status}
        if self.scope is not None:
            doc["scope"] = self.scope
        return json.dumps(doc, separators=(",", ":"))


class ValidatedToken:
    __slots__ = ("expires_ms", "principal_name", "scopes")

    def __init__(self, principal_name: str, expires_ms: int, scopes: list[str]) -> None:
        self.principal_name = principal_name
        self.expires_ms = expires_ms
        self.scopes = scopes


def parse_client_message(message: bytes) -> tuple[str | None, str, dict[str, str]]:
    """(authzid or None, token, extensions) of the client's message; TokenRefused when it is
    malformed."""
    try:
        text = bytes(message).decode("utf-8")
    except UnicodeDecodeError:
        raise TokenRefused("the OAUTHBEARER message is not UTF-8") from None
    gs2, sep, rest = text.partition("\x01")
    if not sep or not rest.endswith("\x01\x01") and rest != "\x01":
        raise TokenRefused("the OAUTHBEARER message is not 'n,[a=authzid],' 0x01 'auth=Bearer <token>' 0x01 0x01")
    parts = gs2.split(",")
    if len(parts) != 3 or parts[0] != "n" or parts[2] != "" or (parts[1] and not parts[1].startswith("a=")):
        raise TokenRefused(f"the OAUTHBEARER message's GS2 header {gs2[:60]!r} is not 'n,,' or 'n,a=<authzid>,'")
    authzid = parts[1][2:] or None if parts[1] else None
    token = None
    extensions: dict[str, str] = {}
    for kv in rest[:-2].split("\x01") if rest != "\x01" else []:
        key, eq, value = kv.partition("=")
        if not eq:
            raise TokenRefused(f"the OAUTHBEARER message holds {kv[:40]!r}, not key=value")
        if key == "auth":
            scheme, _, token = value.partition(" ")
            if scheme.lower() != "bearer" or not token.strip():
                raise TokenRefused("the OAUTHBEARER message's auth= is not 'Bearer <token>'")
            token = token.strip()
        else:
            extensions[key] = value
    if token is None:
        raise TokenRefused("the OAUTHBEARER message has no auth=Bearer <token>")
    return authzid, token, extensions


def _b64url(part: str, what: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
    except (binascii.Error, ValueError):
        raise TokenRefused(f"the token's {what} is not base64url") from None


def split_jwt(token: str) -> tuple[dict[str, Any], dict[str, Any], bytes, bytes]:
    """(header, claims, signing input, signature) of a compact JWS; TokenRefused when it is not one."""
    parts = token.split(".")
    if len(parts) != 3:
        raise TokenRefused(f"the token is not a JWT (header.claims.signature): it has {len(parts)} part(s)")
    docs = []
    for part, what in ((parts[0], "header"), (parts[1], "claims")):
        try:
            doc = json.loads(_b64url(part, what))
        except ValueError:
            raise TokenRefused(f"the token's {what} is not JSON") from None
        if not isinstance(doc, dict):
            raise TokenRefused(f"the token's {what} is not a JSON object")
        docs.append(doc)
    return docs[0], docs[1], f"{parts[0]}.{parts[1]}".encode(), _b64url(parts[2], "signature")


def _number(claims: dict[str, Any], name: str, required: bool) -> float | None:
    value = claims.get(name)
    if value is None:
        if required:
            raise TokenRefused(f"the token has no '{name}' claim")
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TokenRefused(f"the token's '{name}' claim is not a number: {json.dumps(value)[:40]}")
    return float(value)


def _scopes(claims: dict[str, Any], name: str) -> list[str]:
    value = claims.get(name)
    if value is None:
        return []
    if isinstance(value, str):
        return value.split()
    if isinstance(value, list) and all(isinstance(s, str) for s in value):
        return list(value)
    raise TokenRefused(f"the token's '{name}' claim is neither a string nor a list of strings")


def _check_times(claims: dict[str, Any], now_s: float, skew_s: float, iat_required: bool) -> int:
    exp = _number(claims, "exp", True)
    assert exp is not None
    if exp + skew_s <= now_s:
        raise TokenRefused(f"the token expired at {exp:.0f} (now {now_s:.0f}, clock skew {skew_s:g} s)")
    iat = _number(claims, "iat", iat_required)
    if iat is not None and iat - skew_s > now_s:
        raise TokenRefused(f"the token was issued in the future ({iat:.0f}; now {now_s:.0f})")
    nbf = _number(claims, "nbf", False)
    if nbf is not None and nbf - skew_s > now_s:
        raise TokenRefused(f"the token is not valid before {nbf:.0f} (now {now_s:.0f})")
    return int(exp * 1000)


def _subject(claims: dict[str, Any], name: str) -> str:
    sub = claims.get(name)
    if not isinstance(sub, str) or not sub.strip():
        raise TokenRefused(f"the token's subject claim '{name}' is missing or not a non-empty string")
    return sub.strip()


class UnsecuredValidator:
    """Kafka's OAuthBearerUnsecuredValidatorCallbackHandler (see the module docstring)."""

    def __init__(self, options: dict[str, str], clock: Callable[[], float] = time.time) -> None:
        self.principal_claim = options.get("unsecuredValidatorPrincipalClaimName", "sub")
        self.scope_claim = options.get("unsecuredValidatorScopeClaimName", "scope")
        self.required_scope = options.get("unsecuredValidatorRequiredScope", "").split()
        try:
            self.skew_s = int(options.get("unsecuredValidatorAllowableClockSkewMs", "0")) / 1000
        except ValueError:
            raise ValueError("unsecuredValidatorAllowableClockSkewMs is not an integer") from None
        self.clock = clock

    async def validate(self, token: str) -> ValidatedToken:
        header, claims, _signing_input, signature = split_jwt(token)
        if header.get("alg") != "none" or signature:
            raise TokenRefused(
                f"an unsecured token must have alg 'none' and no signature (alg "
                f"{json.dumps(header.get('alg'))[:20]}); set sasl.oauthbearer.jwks.endpoint.url "
                "to validate signed tokens"
            )
        expires_ms = _check_times(claims, self.clock(), self.skew_s, iat_required=False)
        name = _subject(claims, self.principal_claim)
        scopes = _scopes(claims, self.scope_claim)
        missing = [s for s in self.required_scope if s not in scopes]
        if missing:
            raise TokenRefused(
                f"the token lacks the required scope {' '.join(missing)}",
                "insufficient_scope",
                " ".join(self.required_scope),
            )
        return ValidatedToken(name, expires_ms, scopes)


class JwksValidator:
    """Kafka's OAuthBearerValidatorCallbackHandler (KIP-768), keys from `keys` (broker/jwks.py)."""

    def __init__(
        self,
        keys: Any,
        *,
        expected_audience: list[str],
        expected_issuer: str,
        sub_claim: str,
        scope_claim: str,
        skew_s: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.keys = keys  # JwksKeys: `await keys.key_for(kid, alg)` -> (kty, a, b)
        self.expected_audience = expected_audience
        self.expected_issuer = expected_issuer
        self.sub_claim = sub_claim
        self.scope_claim = scope_claim
        self.skew_s = skew_s
        self.clock = clock

    async def validate(self, token: str) -> ValidatedToken:
        header, claims, signing_input, signature = split_jwt(token)
        alg = header.get("alg")
        if not isinstance(alg, str) or alg == "none":
            raise TokenRefused(f"the token's alg {json.dumps(alg)[:20]} is not accepted (a signed token is required)")
        kid = header.get("kid")
        if kid is not None and not isinstance(kid, str):
            raise TokenRefused("the token's kid is not a string")
        a, b = await self.keys.key_for(kid, alg)
        try:
            ok = _core.jws_verify(alg, a, b, signing_input, signature)
        except ValueError as e:
            raise TokenRefused(str(e)) from None
        if not ok:
            raise TokenRefused(f"the token's {alg} signature does not verify with JWKS key {kid!r}")
        expires_ms = _check_times(claims, self.clock(), self.skew_s, iat_required=True)
        if self.expected_issuer and claims.get("iss") != self.expected_issuer:
            raise TokenRefused(
                f"the token's issuer {json.dumps(claims.get('iss'))[:80]} is not "
                f"sasl.oauthbearer.expected.issuer {self.expected_issuer!r}"
            )
        if self.expected_audience:
            aud = claims.get("aud")
            auds = [aud] if isinstance(aud, str) else aud if isinstance(aud, list) else []
            if not any(a_ in self.expected_audience for a_ in auds):
                raise TokenRefused(
                    f"the token's audience {json.dumps(aud)[:80]} holds none of "
                    f"sasl.oauthbearer.expected.audience {self.expected_audience}"
                )
        return ValidatedToken(_subject(claims, self.sub_claim), expires_ms, _scopes(claims, self.scope_claim))


class OAuthBearerServer:
    """One OAUTHBEARER exchange on the server: `respond(message)` -> (reply, token or None).
    The first message validated gives (b"", the token); a refused one gives the error JSON
    and None, and the client's 0x01 that follows raises the TokenRefused."""

    def __init__(self, validator: UnsecuredValidator | JwksValidator) -> None:
        self.validator = validator
        self.refused: TokenRefused | None = None

    async def respond(self, message: bytes) -> tuple[bytes, ValidatedToken | None]:
        if self.refused is not None:
            raise self.refused
        try:
            authzid, token, _extensions = parse_client_message(message)
            validated = await self.validator.validate(token)
            if authzid is not None and authzid != validated.principal_name:
                raise TokenRefused(
                    f"the authorization id {authzid!r} is not the token's subject {validated.principal_name!r}"
                )
        except TokenRefused as e:
            self.refused = e
            return e.error_json().encode(), None
        return b"", validated


def validator_from_config(
    config: Any, listener: str, keys: Any, unsecured_options: dict[str, str]
) -> UnsecuredValidator | JwksValidator:
    """The OAUTHBEARER validator of `listener` (a BrokerConfig's settings); `keys`: the broker's
    JwksKeys (broker/jwks.py), or None when no JWKS URL is set; `unsecured_options`: the
    options of the listener's OAUTHBEARER JAAS config. ValueError naming the key."""
    if config.oauthbearer_jwks(listener):
        audience = [a.strip() for a in config.get_str("sasl.oauthbearer.expected.audience").split(",") if a.strip()]
        return JwksValidator(
            keys,
            expected_audience=audience,
            expected_issuer=config.get_str("sasl.oauthbearer.expected.issuer"),
            sub_claim=config.get_str("sasl.oauthbearer.sub.claim.name"),
            scope_claim=config.get_str("sasl.oauthbearer.scope.claim.name"),
            skew_s=config.get_int("sasl.oauthbearer.clock.skew.seconds"),
        )
    try:
        return UnsecuredValidator(unsecured_options)
    except ValueError as e:
        raise ValueError(f"listener.name.{listener.lower()}.oauthbearer.sasl.jaas.config: {e}") from None
