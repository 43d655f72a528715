"""Delegation tokens (KIP-48): what every node derives from a token and the cluster's secret.

A token is its id (22 characters of URL-safe base64 of 16 random bytes, as Kafka's) and
its owner, renewers and times, in the metadata log (coord/metadata/metadata.py DelegationToken). Its
HMAC, the token's password, is never stored:

    hmac = HMAC-SHA512(key = UTF-8 of delegation.token.secret.key, message = UTF-8 of the token id)

so every node with the same `delegation.token.secret.key` computes it (Kafka's rule: the key
must be the same on every node). A client logs in with SCRAM-SHA-256 or -512 as user =
the token id, password = base64(hmac), and the extension `tokenauth=true` in its
client-first message; the session's principal is then the token's owner.

For that SCRAM exchange the server needs a credential (salt, iterations, stored and server
keys) per token and mechanism: the salt is derived too (the first 16 bytes of
HMAC-SHA256(secret, "salt:" + token id)), the iterations are 4096, and the result is
cached, so a token's login costs one PBKDF2 per node and mechanism, not one per connection.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import secrets

from logbroker import scram
from logbroker.common.sasl_scram import ScramCredential

ITERATIONS = 4096


def new_token_id() -> str:
    return base64.urlsafe_b64encode(secrets.token_bytes(16)).rstrip(b"=").decode()


def token_hmac(secret: str, token_id: str) -> bytes:
    return hmac.new(secret.encode(), token_id.encode(), hashlib.sha512).digest()


def token_password(secret: str, token_id: str) -> str:
    """What a client sends as the SCRAM password: base64 of the HMAC (Kafka's tools print it)."""
    return base64.b64encode(token_hmac(secret, token_id)).decode()


@functools.lru_cache(maxsize=4096)
def token_credential(secret: str, token_id: str, mechanism: str) -> ScramCredential:
    """The SCRAM credential of a token for `mechanism` (blocks for PBKDF2 once per token and
    mechanism; cached)."""
    salt = hmac.new(secret.encode(), b"salt:" + token_id.encode(), hashlib.sha256).digest()[:16]
    salted = scram.salted_password(mechanism, token_password(secret, token_id).encode(), salt, ITERATIONS)
    return ScramCredential(
        mechanism, salt, scram.stored_key(mechanism, salted), scram.server_key(mechanism, salted), ITERATIONS
    )


def token_id_of_hmac(secret: str, token_ids, given: bytes) -> str | None:
    """The id, among `token_ids`, whose HMAC is `given` (Renew and Expire name a token by its
    HMAC), or None."""
    for token_id in token_ids:
        if hmac.compare_digest(token_hmac(secret, token_id), bytes(given)):
            return token_id
    return None
