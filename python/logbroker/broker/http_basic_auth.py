"""HTTP Basic authentication with the broker's users, for its HTTP endpoints (the schema
registry's `schema.registry.authentication.method`, the metrics endpoint's
`metrics.authentication.method`): NONE (every request is User:ANONYMOUS) or BASIC (a user of
the broker, its password checked against the broker's SCRAM credentials, any mechanism, or
the PLAIN users of the broker's listeners' JAAS configs). A missing or wrong password raises
`Unauthenticated`, never saying which of the two was wrong; the endpoint answers 401 with
`WWW-Authenticate: Basic`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import Callable

from logbroker import scram
from logbroker.common.sasl_scram import ScramCredential

ANONYMOUS = "User:ANONYMOUS"
METHODS = ("NONE", "BASIC")
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
VERIFIED_CACHE = 1024


class Unauthenticated(Exception):
    """No user, or a wrong password (the message never says which)."""


class BasicAuth:
    def __init__(
        self,
        method: str,
        plain_users: Callable[[], dict[str, str]],
        scram_credential: Callable[[str, str], ScramCredential | None],
        audit: Callable[[str, str, str, str | None], None] | None = None,
    ) -> None:
        """`plain_users()`: the listeners' PLAIN users and passwords; `scram_credential(user,
        mechanism)`: the user's SCRAM credential in the metadata image, or None;
        `audit(outcome, principal, client, reason)`: each BASIC check, for the audit log."""
        self.method = method
        self._plain_users = plain_users
        self._scram_credential = scram_credential
        self._audit = audit
        self._verified: dict[tuple, bool] = {}  # passwords found right (see _scram_matches)

    def principal(self, headers: dict[str, str], peer: str = "") -> str:
        """The request's principal (`User:<name>`); Unauthenticated when BASIC and the
        Authorization header is missing, malformed or wrong. A request with no Authorization
        header at all is not audited (a client's first, unauthenticated try)."""
        if self.method == "NONE":
            return ANONYMOUS
        auth = headers.get("authorization", "")
        scheme, _, token = auth.partition(" ")
        if scheme.lower() != "basic" or not token:
            raise Unauthenticated("Unauthorized: HTTP Basic authentication is required")
        try:
            user, sep, password = base64.b64decode(token.strip(), validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            self._audited("failure", "", peer, "the Authorization header is not Basic base64(user:password)")
            raise Unauthenticated("Unauthorized: the Authorization header is not Basic base64(user:password)") from None
        if not sep or not self._password_ok(user, password):
            self._audited("failure", f"User:{user}", peer, "unknown user or wrong password")
            raise Unauthenticated("Unauthorized")
        self._audited("success", f"User:{user}", peer, None)
        return f"User:{user}"

    def _audited(self, outcome: str, principal: str, peer: str, reason: str | None) -> None:
        if self._audit is not None:
            self._audit(outcome, principal, peer, reason)

    def _password_ok(self, user: str, password: str) -> bool:
        return bool(self.mechanisms(user, password, first=True))

    def mechanisms(self, user: str, password: str, first: bool = False) -> list[str]:
        """The SASL mechanisms `password` is right for `user` in: "PLAIN" (a PLAIN user of the
        listeners) and each SCRAM mechanism whose credential it matches; [] when none (an
        unknown user or a wrong password). `first`: stop at the first match. Blocks for the
        SCRAM iterations (milliseconds): callers on an event loop run it in a thread."""
        out = []
        plain = self._plain_users().get(user)
        if plain is not None and hmac.compare_digest(plain.encode(), password.encode()):
            out.append("PLAIN")
            if first:
                return out
        for mechanism in SCRAM_MECHANISMS:
            cred = self._scram_credential(user, mechanism)
            if cred is None:
                continue
            if self._scram_matches(mechanism, user, password, cred):
                out.append(mechanism)
                if first:
                    return out
        return out

    def _scram_matches(self, mechanism: str, user: str, password: str, cred: ScramCredential) -> bool:
        """Whether the password salts to the credential's stored key. PBKDF2 takes
        milliseconds, so a password found right is remembered (by a SHA-256 of it, with the
        credential's stored key: a new password or credential misses) for every later
        request of a scraper or a registry client; at most VERIFIED_CACHE entries."""
        key = (mechanism, user, hashlib.sha256(password.encode()).digest(), cred.stored_key)
        if key in self._verified:
            return True
        salted = scram.salted_password(mechanism, password.encode(), cred.salt, cred.iterations)
        if not hmac.compare_digest(scram.stored_key(mechanism, salted), cred.stored_key):
            return False
        if len(self._verified) >= VERIFIED_CACHE:
            self._verified.pop(next(iter(self._verified)))
        self._verified[key] = True
        return True
