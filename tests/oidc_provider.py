"""A small OAuth 2.0 / OIDC identity provider on loopback for the OAUTHBEARER tests: a token
endpoint (client credentials grant, HTTP Basic or form credentials) issuing RS256 JWTs, and
its JWKS, with key rotation. Real HTTP, real RSA signatures (cryptography); the broker under
test fetches the JWKS from it like from any provider.

    with OidcProvider({"alice-app": "alice-secret"}, issuer=..., audience=...) as idp:
        idp.token_url, idp.jwks_url, idp.token(sub="alice"), idp.rotate()
"""

from __future__ import annotations

import base64
import json
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _int_bytes(n: int) -> bytes:
    return n.to_bytes((n.bit_length() + 7) // 8, "big")


class SigningKey:
    def __init__(self, kid: str) -> None:
        self.kid = kid
        self.private = rsa.generate_private_key(public_exponent=65537, key_size=2048)

    def jwk(self) -> dict[str, str]:
        pub = self.private.public_key().public_numbers()
        return {
            "kty": "RSA",
            "kid": self.kid,
            "use": "sig",
            "alg": "RS256",
            "n": b64url(_int_bytes(pub.n)),
            "e": b64url(_int_bytes(pub.e)),
        }

    def sign(self, claims: dict[str, Any], header: dict[str, Any] | None = None) -> str:
        h = {"alg": "RS256", "typ": "JWT", "kid": self.kid, **(header or {})}
        signing_input = f"{b64url(json.dumps(h).encode())}.{b64url(json.dumps(claims).encode())}"
        sig = self.private.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
        return f"{signing_input}.{b64url(sig)}"


class OidcProvider:
    def __init__(
        self,
        clients: dict[str, str],
        issuer: str = "https://idp.test",
        audience: str = "kafka",
        lifetime_s: int = 3600,
        scope: str = "kafka",
    ) -> None:
        self.clients = clients  # client id -> secret; a token's sub is the client id
        self.issuer = issuer
        self.audience = audience
        self.lifetime_s = lifetime_s
        self.scope = scope
        self.keys = [SigningKey("key-1")]
        self.published = list(self.keys)  # the keys the JWKS shows
        self.token_requests = 0
        self.jwks_requests = 0
        self.refused: list[str] = []  # client ids refused a token
        self.issued: list[str] = []  # client ids given one
        self._lock = threading.Lock()
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, doc: Any) -> None:
                body = json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                if self.path == "/jwks":
                    with provider._lock:
                        provider.jwks_requests += 1
                        doc = {"keys": [k.jwk() for k in provider.published]}
                    self._send(200, doc)
                else:
                    self._send(404, {"error": "not_found"})

            def do_POST(self) -> None:  # noqa: N802
                if self.path != "/token":
                    self._send(404, {"error": "not_found"})
                    return
                form = dict(
                    urllib.parse.parse_qsl(self.rfile.read(int(self.headers.get("Content-Length", 0))).decode())
                )
                client_id, secret = form.get("client_id"), form.get("client_secret")
                auth = self.headers.get("Authorization", "")
                if auth.startswith("Basic "):
                    cid, _, sec = base64.b64decode(auth[6:]).decode().partition(":")
                    client_id, secret = urllib.parse.unquote(cid), urllib.parse.unquote(sec)
                with provider._lock:
                    provider.token_requests += 1
                if form.get("grant_type") != "client_credentials":
                    self._send(400, {"error": "unsupported_grant_type"})
                    return
                if client_id not in provider.clients or provider.clients[client_id] != secret:
                    provider.refused.append(str(client_id))
                    self._send(401, {"error": "invalid_client"})
                    return
                token = provider.token(sub=client_id, scope=form.get("scope") or provider.scope)
                provider.issued.append(client_id)
                self._send(200, {"access_token": token, "token_type": "Bearer", "expires_in": provider.lifetime_s})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True, name="oidc-provider")

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    @property
    def token_url(self) -> str:
        return self.base + "/token"

    @property
    def jwks_url(self) -> str:
        return self.base + "/jwks"

    def write_jwks(self, path: Path) -> str:
        """The JWKS as a file; its file:// URL."""
        path.write_text(json.dumps({"keys": [k.jwk() for k in self.published]}))
        return path.resolve().as_uri()

    def claims(self, sub: str, **over: Any) -> dict[str, Any]:
        now = int(time.time())
        out = {
            "sub": sub,
            "iss": self.issuer,
            "aud": self.audience,
            "iat": now,
            "exp": now + self.lifetime_s,
            "scope": self.scope,
        }
        out.update(over)
        return {k: v for k, v in out.items() if v is not None}

    def token(self, sub: str, key: SigningKey | None = None, header: dict[str, Any] | None = None, **over: Any) -> str:
        """A signed token for `sub` with the current key; `over` replaces claims (None drops one)."""
        with self._lock:
            k = key or self.keys[-1]
        return k.sign(self.claims(sub, **over), header)

    def rotate(self, drop_old: bool = False) -> SigningKey:
        """A new signing key, published in the JWKS (the old ones too unless `drop_old`)."""
        with self._lock:
            key = SigningKey(f"key-{len(self.keys) + 1}")
            self.keys.append(key)
            self.published = [key] if drop_old else [*self.published, key]
        return key

    def __enter__(self) -> OidcProvider:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
