"""The broker's side of a SCRAM-SHA-256/512 exchange (RFC 5802, RFC 7677), as Kafka runs
it inside SaslAuthenticate (two round trips):

    client-first   n,,n=<user>,r=<client nonce>[,tokenauth=true]
                                                           (gs2 header "n,," or "y,,";
                                                            "p=" channel binding refused;
                                                            tokenauth: the user is a delegation
                                                            token's id, the principal its owner)
    server-first   r=<client nonce><server nonce>,s=<salt base64>,i=<iterations>
    client-final   c=<base64 of the gs2 header>,r=<nonce>,p=<proof base64>
    server-final   v=<server signature base64>

The broker keeps only the stored key and server key of each credential (coord/metadata/metadata.py
ScramCredential, from the metadata log); logbroker/scram.py has the arithmetic. Any
mismatch (unknown user, wrong nonce or channel binding, a proof that does not verify)
raises `AuthenticationFailed` with what the broker logs; the client is told only Kafka's
generic "invalid credentials" message, so it cannot tell an unknown user from a wrong
password.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import secrets
from collections.abc import Callable

from logbroker import scram


@dataclasses.dataclass
class ScramCredential:
    """A user's SCRAM credential for one mechanism, as Kafka keeps it (KIP-554): never the
    password, only what the server side of a SCRAM exchange needs (scram.py)."""

    mechanism: str  # "SCRAM-SHA-256" or "SCRAM-SHA-512"
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_json(self) -> dict:
        """The fields other than the mechanism, bytes as base64 (image.json, records)."""
        return {
            "salt": _b64(self.salt),
            "stored_key": _b64(self.stored_key),
            "server_key": _b64(self.server_key),
            "iterations": self.iterations,
        }

    @classmethod
    def from_json(cls, mechanism: str, doc: dict) -> ScramCredential:
        """The inverse of `to_json`; KeyError for a missing field, ValueError for a bad value."""
        iterations = doc["iterations"]
        if not isinstance(iterations, int) or isinstance(iterations, bool):
            raise ValueError(f"iterations {iterations!r} is not an integer")
        return cls(mechanism, _unb64(doc["salt"]), _unb64(doc["stored_key"]), _unb64(doc["server_key"]), iterations)

    def __repr__(self) -> str:  # keys stay out of logs and tracebacks
        return f"ScramCredential({self.mechanism}, iterations={self.iterations})"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str) -> bytes:
    if not isinstance(text, str):
        raise ValueError(f"expected base64 text, got {type(text).__name__}")
    return base64.b64decode(text.encode("ascii"), validate=True)


class AuthenticationFailed(Exception):
    """A failed exchange; the message (for the broker's log) names the user and cause."""


class ScramServer:
    """One SCRAM exchange on one connection: `first` then `final`."""

    def __init__(
        self,
        mechanism: str,
        credential: Callable[[str, str], ScramCredential | None],
        token_credential: Callable[[str, str], tuple[ScramCredential, str] | None] | None = None,
    ) -> None:
        self.mechanism = mechanism
        self._credential = credential  # (user, mechanism) -> the stored credential
        # (token id, mechanism) -> (the token's credential, its owner), for a client-first
        # message with tokenauth=true (a delegation token, common/delegation_tokens.py)
        self._token_credential = token_credential
        self.user: str | None = None
        self.token_owner: str | None = None  # set when the exchange is a delegation token's
        self._cred: ScramCredential | None = None
        self._gs2_header = ""
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""

    @staticmethod
    def user_of(message: bytes) -> str | None:
        """The user a client-first message names, or None when it does not parse."""
        try:
            bare = bytes(message).decode("utf-8").split(",", 2)[2]
            return scram.unescape_username(scram.parse_attributes(bare)["n"])
        except (UnicodeDecodeError, IndexError, KeyError, ValueError):
            return None

    def first(self, message: bytes) -> bytes:
        """The client-first message; returns the server-first message."""
        text = _text(message, "client-first message")
        gs2_flag, sep, rest = text.partition(",")
        authzid, sep2, bare = rest.partition(",")
        if not sep or not sep2:
            raise AuthenticationFailed(f"{self.mechanism} client-first message {text[:60]!r} has no GS2 header")
        if gs2_flag.startswith("p="):
            raise AuthenticationFailed(f"{self.mechanism}: channel binding ({gs2_flag!r}) is not supported")
        if gs2_flag not in ("n", "y"):
            raise AuthenticationFailed(f"{self.mechanism} client-first message has GS2 flag {gs2_flag!r}")
        attrs = _attributes(bare, "client-first message")
        if "n" not in attrs or "r" not in attrs or not attrs["r"]:
            raise AuthenticationFailed(f"{self.mechanism} client-first message {bare[:60]!r} lacks n= or r=")
        try:
            user = scram.unescape_username(attrs["n"])
        except ValueError as e:
            raise AuthenticationFailed(f"{self.mechanism} client-first message: {e}") from None
        if authzid and authzid != f"a={attrs['n']}":
            raise AuthenticationFailed(
                f"{self.mechanism}: user {user!r} asked to act as {authzid[2:]!r}, which is "
                "not allowed (the authorization id must be the user)"
            )
        self.user = user
        if attrs.get("tokenauth", "").lower() == "true":
            found = None if self._token_credential is None else self._token_credential(user, self.mechanism)
            if found is None:
                raise AuthenticationFailed(
                    f"{self.mechanism}: delegation token {user!r} is unknown, expired, or "
                    "delegation tokens are off (delegation.token.secret.key)"
                )
            cred, self.token_owner = found
        else:
            cred = self._credential(user, self.mechanism)
            if cred is None:
                raise AuthenticationFailed(f"{self.mechanism}: user {user!r} has no {self.mechanism} credential")
        self._cred = cred
        self._gs2_header = f"{gs2_flag},{authzid},"
        self._client_first_bare = bare
        self._nonce = attrs["r"] + secrets.token_urlsafe(24)
        salt = base64.b64encode(cred.salt).decode()
        self._server_first = f"r={self._nonce},s={salt},i={cred.iterations}"
        return self._server_first.encode()

    def final(self, message: bytes) -> bytes:
        """The client-final message; returns the server-final message (the exchange
        succeeded: `user` is authenticated)."""
        assert self._cred is not None and self.user is not None, "first() before final()"
        text = _text(message, "client-final message")
        without_proof, sep, proof_attr = text.rpartition(",")
        if not sep or not proof_attr.startswith("p="):
            raise AuthenticationFailed(
                f"{self.mechanism}: user {self.user!r} sent a client-final message without a proof"
            )
        attrs = _attributes(without_proof, "client-final message")
        expected_binding = base64.b64encode(self._gs2_header.encode()).decode()
        if attrs.get("c") != expected_binding:
            raise AuthenticationFailed(
                f"{self.mechanism}: user {self.user!r} sent channel binding "
                f"{attrs.get('c')!r}, expected {expected_binding!r}"
            )
        if attrs.get("r") != self._nonce:
            raise AuthenticationFailed(f"{self.mechanism}: user {self.user!r} answered with another nonce")
        try:
            proof = base64.b64decode(proof_attr[2:], validate=True)
        except (binascii.Error, ValueError):
            raise AuthenticationFailed(
                f"{self.mechanism}: user {self.user!r} sent a proof that is not base64"
            ) from None
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        if not scram.verify_proof(self.mechanism, self._cred.stored_key, auth_message, proof):
            raise AuthenticationFailed(f"{self.mechanism}: user {self.user!r} gave a wrong password")
        signature = scram.server_signature(self.mechanism, self._cred.server_key, auth_message)
        return b"v=" + base64.b64encode(signature)


def _text(message: bytes, what: str) -> str:
    try:
        return bytes(message).decode("utf-8")
    except UnicodeDecodeError:
        raise AuthenticationFailed(f"SCRAM {what} is not UTF-8") from None


def _attributes(text: str, what: str) -> dict[str, str]:
    try:
        return scram.parse_attributes(text)
    except ValueError as e:
        raise AuthenticationFailed(f"SCRAM {what}: {e}") from None
