"""The JSON Web Key Set that OAUTHBEARER tokens are checked against
(`sasl.oauthbearer.jwks.endpoint.url`: a file:// path or an http(s):// URL of the identity
provider; common/oauthbearer.py validates).

    {"keys": [{"kty": "RSA", "kid": "k1", "n": "<base64url>", "e": "AQAB", ["alg": "RS256"], ["use": "sig"]},
              {"kty": "EC", "kid": "k2", "crv": "P-256", "x": "...", "y": "..."},
              {"kty": "OKP", "kid": "k3", "crv": "Ed25519", "x": "..."}, ...]}

- The set is fetched at the first token and again once `sasl.oauthbearer.jwks.endpoint.refresh.ms`
  has passed, and at once when a token names a `kid` the set does not hold (fetches are
  `sasl.oauthbearer.jwks.endpoint.retry.backoff.ms` apart at least; such a token waits for
  the next): so a provider that rotates its keys is
  followed without a restart, and a token signed with a key it has dropped is refused after
  the next fetch.
- A fetch that fails keeps the keys of the last one that worked, and is retried with backoff
  doubling from retry.backoff.ms up to `sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms`;
  with no keys at all, tokens are refused naming the cause.
- Keys of other types, with `use` other than "sig", or malformed are skipped (logged once a fetch).
- Fetches run in a worker thread (urllib, 10 s timeout): the event loop never waits on them,
  and one fetch at a time.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import time
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import trio

from logbroker.common.oauthbearer import TokenRefused

log = logging.getLogger("logbroker.broker.jwks")

FETCH_TIMEOUT_S = 10.0
MAX_BYTES = 1 << 20
# which key type and curve serve an alg
KEY_TYPES = {
    "RS256": ("RSA", None),
    "RS384": ("RSA", None),
    "RS512": ("RSA", None),
    "PS256": ("RSA", None),
    "PS384": ("RSA", None),
    "PS512": ("RSA", None),
    "ES256": ("EC", "P-256"),
    "ES384": ("EC", "P-384"),
    "EdDSA": ("OKP", "Ed25519"),
}


class JwksError(Exception):
    """A JWKS that cannot be read or parsed, naming the URL and the cause."""


def _b64(value: Any, what: str) -> bytes:
    if not isinstance(value, str):
        raise ValueError(f"{what} is not a string")
    try:
        return base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
    except (binascii.Error, ValueError):
        raise ValueError(f"{what} is not base64url") from None


def parse_jwks(text: bytes, url: str) -> dict[str | None, list[tuple[str, str | None, str | None, bytes, bytes]]]:
    """kid -> [(kty, crv, alg, a, b)]: the signing keys of a JWKS document."""
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise JwksError(f"JWKS at {url} is not JSON: {e}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("keys"), list):
        raise JwksError(f'JWKS at {url} is not an object with a "keys" list')
    out: dict[str | None, list[tuple[str, str | None, str | None, bytes, bytes]]] = {}
    skipped = []
    for i, key in enumerate(doc["keys"]):
        try:
            if not isinstance(key, dict):
                raise ValueError("not an object")
            kty, kid, use, alg = key.get("kty"), key.get("kid"), key.get("use"), key.get("alg")
            if use not in (None, "sig"):
                raise ValueError(f"use {use!r}")
            if kty == "RSA":
                entry = ("RSA", None, alg, _b64(key.get("n"), "n"), _b64(key.get("e"), "e"))
            elif kty == "EC":
                entry = ("EC", key.get("crv"), alg, _b64(key.get("x"), "x"), _b64(key.get("y"), "y"))
            elif kty == "OKP":
                entry = ("OKP", key.get("crv"), alg, _b64(key.get("x"), "x"), b"")
            else:
                raise ValueError(f"key type {kty!r}")
        except ValueError as e:
            skipped.append(f"key {i} ({e})")
            continue
        out.setdefault(kid if isinstance(kid, str) else None, []).append(entry)
    if skipped:
        log.info("JWKS at %s: skipped %s", url, "; ".join(skipped))
    return out


def fetch(url: str) -> bytes:
    """The JWKS document (blocking: run in a thread). JwksError naming the URL and the cause."""
    u = urlparse(url)
    try:
        if u.scheme == "file":
            return Path(unquote(u.path)).read_bytes()[:MAX_BYTES]
        if u.scheme in ("http", "https"):
            with urllib.request.urlopen(url, timeout=FETCH_TIMEOUT_S) as r:
                return r.read(MAX_BYTES)
    except OSError as e:
        raise JwksError(f"cannot read the JWKS at {url}: {e}") from None
    raise JwksError(f"sasl.oauthbearer.jwks.endpoint.url={url!r}: a file:// path or an http(s):// URL is needed")


class JwksKeys:
    def __init__(self, url: str, refresh_ms: int, backoff_ms: int, backoff_max_ms: int) -> None:
        self.url = url
        self.refresh_s = refresh_ms / 1000
        self.backoff_s = backoff_ms / 1000
        self.backoff_max_s = backoff_max_ms / 1000
        self.keys: dict[str | None, list[tuple[str, str | None, str | None, bytes, bytes]]] = {}
        self.fetched_at: float | None = None  # the last fetch that worked (monotonic)
        self.attempted_at = float("-inf")  # the last fetch tried
        self.failures = 0
        self.last_error: str | None = None
        self.fetches = 0
        self._lock = trio.Lock()

    def _wait_s(self) -> float:
        """How long after the last attempt the next may go (the backoff after failures)."""
        if self.failures == 0:
            return self.backoff_s
        return min(self.backoff_max_s, self.backoff_s * 2 ** (self.failures - 1))

    async def refresh(self, why: str) -> None:
        started = time.monotonic()
        async with self._lock:
            if self.attempted_at >= started:
                return  # fetched while this waited for the lock: by another token
            wait = self.attempted_at + self._wait_s() - time.monotonic()
            if wait > 0:
                if self.failures:
                    return  # backing off after failed fetches: the keys there are
                await trio.sleep(wait)  # fetched just now: the next fetch goes once retry.backoff.ms is over
            self.attempted_at = time.monotonic()
            self.fetches += 1
            try:
                text = await trio.to_thread.run_sync(fetch, self.url)
                keys = parse_jwks(text, self.url)
            except JwksError as e:
                self.failures += 1
                self.last_error = str(e)
                log.warning("%s (%s); %d key id(s) kept from the last fetch", e, why, len(self.keys))
                return
            self.keys, self.fetched_at, self.failures, self.last_error = keys, time.monotonic(), 0, None
            log.info("JWKS at %s: %d key(s) (%s)", self.url, sum(map(len, keys.values())), why)

    async def key_for(self, kid: str | None, alg: str) -> tuple[bytes, bytes]:
        """The key (a, b) for a token's kid and alg; TokenRefused when the JWKS has none."""
        if alg not in KEY_TYPES:
            raise TokenRefused(f"the token's alg {alg!r} is not accepted (accepted: {', '.join(KEY_TYPES)})")
        if self.fetched_at is None or time.monotonic() - self.fetched_at > self.refresh_s:
            await self.refresh("first token" if self.fetched_at is None else "refresh interval passed")
        found = self._match(kid, alg)
        if found is None and self.fetched_at is not None:
            await self.refresh(f"unknown key id {kid!r}")
            found = self._match(kid, alg)
        if found is None:
            if not self.keys and self.last_error:
                raise TokenRefused(f"no JWKS to check the token with: {self.last_error}")
            raise TokenRefused(f"the JWKS at {self.url} has no {alg} key with key id {kid!r}")
        return found

    def _match(self, kid: str | None, alg: str) -> tuple[bytes, bytes] | None:
        kty, crv = KEY_TYPES[alg]
        candidates = (
            self.keys.get(kid, [])
            if kid is not None
            else [k for ks in self.keys.values() for k in ks]
            if sum(map(len, self.keys.values())) == 1
            else []
        )
        for k_kty, k_crv, k_alg, a, b in candidates:
            if k_kty == kty and (crv is None or k_crv == crv) and k_alg in (None, alg):
                return a, b
        return None
