"""SCRAM (RFC 5802, RFC 7677): the arithmetic both ends of a SCRAM-SHA-256/512 exchange
and the credential store share. No I/O and no state: the broker's authenticator
(common/sasl.py), our client (client/sasl.py) and the controller (which turns a salted
password from AlterUserScramCredentials into a stored credential) all call these.

    SaltedPassword  = PBKDF2-HMAC(H, password, salt, iterations)     (Hi() in the RFC)
    ClientKey       = HMAC(SaltedPassword, "Client Key")
    StoredKey       = H(ClientKey)                                   stored by the broker
    ServerKey       = HMAC(SaltedPassword, "Server Key")             stored by the broker
    AuthMessage     = client-first-bare "," server-first "," client-final-without-proof
    ClientSignature = HMAC(StoredKey, AuthMessage)
    ClientProof     = ClientKey XOR ClientSignature                  sent by the client
    ServerSignature = HMAC(ServerKey, AuthMessage)                   sent by the broker

The broker never sees the password: it checks H(ClientProof XOR ClientSignature) ==
StoredKey. Kafka's limits: iterations between 4096 and 16384 (`MIN_ITERATIONS`,
`MAX_ITERATIONS`).
"""

from __future__ import annotations

import hashlib
import hmac

MECHANISMS = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
# Kafka's ScramMechanism type codes (DescribeUserScramCredentials, AlterUserScramCredentials).
MECHANISM_TYPES = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
MECHANISM_NAMES = {v: k for k, v in MECHANISM_TYPES.items()}
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384


def _hash(mechanism: str) -> str:
    try:
        return MECHANISMS[mechanism]
    except KeyError:
        raise ValueError(f"unknown SCRAM mechanism {mechanism!r} (SCRAM-SHA-256 or SCRAM-SHA-512)") from None


def salted_password(mechanism: str, password: bytes, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(_hash(mechanism), password, salt, iterations)


def hmac_of(mechanism: str, key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, _hash(mechanism)).digest()


def digest(mechanism: str, data: bytes) -> bytes:
    return hashlib.new(_hash(mechanism), data).digest()


def client_key(mechanism: str, salted: bytes) -> bytes:
    return hmac_of(mechanism, salted, b"Client Key")


def stored_key(mechanism: str, salted: bytes) -> bytes:
    return digest(mechanism, client_key(mechanism, salted))


def server_key(mechanism: str, salted: bytes) -> bytes:
    return hmac_of(mechanism, salted, b"Server Key")


def xor(a: bytes, b: bytes) -> bytes:
    if len(a) != len(b):
        raise ValueError(f"SCRAM proof of {len(a)} bytes, expected {len(b)}")
    return bytes(x ^ y for x, y in zip(a, b))


def client_proof(mechanism: str, salted: bytes, auth_message: bytes) -> bytes:
    key = client_key(mechanism, salted)
    return xor(key, hmac_of(mechanism, digest(mechanism, key), auth_message))


def server_signature(mechanism: str, server_key_: bytes, auth_message: bytes) -> bytes:
    return hmac_of(mechanism, server_key_, auth_message)


def verify_proof(mechanism: str, stored: bytes, auth_message: bytes, proof: bytes) -> bool:
    """Whether `proof` shows the client knew the password behind `stored` (constant time)."""
    signature = hmac_of(mechanism, stored, auth_message)
    try:
        key = xor(proof, signature)
    except ValueError:
        return False
    return hmac.compare_digest(digest(mechanism, key), stored)


def escape_username(name: str) -> str:
    """saslname: ',' and '=' written as =2C and =3D (RFC 5802 5.1)."""
    return name.replace("=", "=3D").replace(",", "=2C")


def unescape_username(name: str) -> str:
    """The inverse of `escape_username`; ValueError on a '=' not starting =2C or =3D."""
    out, i = [], 0
    while i < len(name):
        if name[i] == "=":
            code = name[i : i + 3]
            if code == "=2C":
                out.append(",")
            elif code == "=3D":
                out.append("=")
            else:
                raise ValueError(f"invalid escape {code!r} in SCRAM user name")
            i += 3
        else:
            out.append(name[i])
            i += 1
    return "".join(out)


def parse_attributes(message: str) -> dict[str, str]:
    """`a=1,b=2` -> {"a": "1", "b": "2"} (values may contain '='); ValueError when malformed.
    RFC 5802's attributes are one letter; Kafka's SCRAM extensions (KIP-84: `tokenauth=true`)
    are longer alphanumeric keys."""
    out: dict[str, str] = {}
    for part in message.split(","):
        key, eq, value = part.partition("=")
        if not eq or not key.isalnum() or not key.isascii():
            raise ValueError(f"malformed SCRAM attribute {part[:20]!r}")
        out.setdefault(key, value)
    return out
