"""A blocking connection to one broker: ApiVersions negotiation, SASL authentication when
the configuration asks for it (client/sasl.py), then requests at the highest version both
sides speak, with logbroker's generated codec. A SASL session with a lifetime (KIP-368) is
renewed before the request that would fall after 85-95% of it (nothing else is in flight on
a blocking connection).

    with BrokerConnection("127.0.0.1:9092") as conn:
        resp = conn.send(REQUESTS[3](topics=None))
"""

from __future__ import annotations

import random
import socket
import struct
import time
from typing import Any

from logbroker.client import config as _config
from logbroker.client import sasl as _sasl
from logbroker.client import tls
from logbroker.client.errors import KafkaError, SaslAuthenticationError
from logbroker.protocol import REQUESTS, decode_response, encode_request
from logbroker.protocol._runtime import Message, Struct


class ClientError(Exception):
    """A request failed: connection trouble, or an error code the caller asked to check."""


class BrokerConnection:
    """`config`: client keys (dotted, as in a properties file): security.protocol, the ssl.*
    keys (client/tls.py) and the sasl.* keys (client/sasl.py); None or {}: PLAINTEXT. A
    failed SASL authentication raises ClientError, its cause the SaslAuthenticationError."""

    def __init__(
        self,
        bootstrap: str,
        client_id: str = "logbroker-cli",
        timeout: float = 30.0,
        config: dict[str, str] | None = None,
    ) -> None:
        host, _, port = bootstrap.strip().rpartition(":")
        host = host or "127.0.0.1"
        try:
            built = _config.build(_config.ADMIN, dict(config or {})) if config else None
            ctx = tls.context(built) if built else None
            self.sasl = _sasl.from_config(built) if built else None
        except KafkaError as e:
            raise ClientError(str(e)) from None
        try:
            self.sock = socket.create_connection((host, int(port)), timeout=timeout)
            if ctx is not None:
                self.sock = ctx.wrap_socket(self.sock, server_hostname=tls.server_hostname(ctx, host))
        except (OSError, ValueError) as e:
            raise ClientError(f"cannot connect to {bootstrap}: {e}") from None
        self.bootstrap = bootstrap
        self.client_id = client_id
        self.correlation_id = 0
        self.versions: dict[int, tuple[int, int]] = {}
        self._reauth_at: float | None = None
        try:
            self._negotiate()
            if self.sasl is not None:
                self._authenticate()
        except BaseException:
            self.sock.close()
            raise

    def close(self) -> None:
        """Closes the socket."""
        self.sock.close()

    def __enter__(self) -> BrokerConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _roundtrip(self, api_key: int, version: int, body: Struct) -> Any:
        self.correlation_id += 1
        frame = encode_request(api_key, version, self.correlation_id, self.client_id, body)
        data = b"".join(bytes(c) for c in frame) if isinstance(frame, list) else frame
        self.sock.sendall(data)
        (size,) = struct.unpack(">i", self._recv(4))
        payload = self._recv(size)
        correlation_id, resp = decode_response(api_key, version, payload)
        if correlation_id != self.correlation_id:
            raise ClientError(f"correlation id {correlation_id} != {self.correlation_id}")
        return resp

    def _recv(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ClientError(f"connection to {self.bootstrap} closed")
            buf += chunk
        return bytes(buf)

    def _negotiate(self) -> None:
        req = REQUESTS[18](client_software_name="logbroker", client_software_version="0.1.0")
        resp = self._roundtrip(18, 3, req)
        if resp.error_code == 35:  # UNSUPPORTED_VERSION: retry at v0 (KIP-511)
            resp = self._roundtrip(18, 0, REQUESTS[18]())
        self.versions = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}

    def _authenticate(self) -> None:
        """SaslHandshake v1, then SaslAuthenticate until the mechanism is done."""
        sasl = self.sasl
        assert sasl is not None

        def failed(reason: str, code: int | None = None) -> ClientError:
            err = SaslAuthenticationError(self.bootstrap, sasl.mechanism, sasl.username, reason, code)
            out = ClientError(str(err))
            out.__cause__ = err
            return out

        handshake, authenticate = self.versions.get(17), self.versions.get(36)
        if handshake is None or handshake[1] < 1 or authenticate is None:
            raise failed("the broker does not speak SaslHandshake v1 and SaslAuthenticate (KIP-152)")
        resp = self._roundtrip(17, 1, REQUESTS[17](mechanism=sasl.mechanism))
        if resp.error_code:
            raise failed(f"the broker enables {', '.join(resp.mechanisms) or 'no mechanism'}", resp.error_code)
        version = min(2, authenticate[1])
        try:
            mech = sasl.client(self.bootstrap.rsplit(":", 1)[0])
        except ValueError as e:
            raise failed(str(e)) from None
        out: bytes | None = mech.first()
        while out is not None:
            resp = self._roundtrip(36, version, REQUESTS[36](auth_bytes=out))
            if resp.error_code:
                raise failed(resp.error_message or "refused", resp.error_code)
            try:
                out = mech.respond(bytes(resp.auth_bytes or b""))
            except ValueError as e:
                raise failed(str(e)) from None
        lifetime_ms = resp.session_lifetime_ms if version >= 1 else 0
        self._reauth_at = (
            time.monotonic() + lifetime_ms / 1000 * random.uniform(0.85, 0.95) if lifetime_ms > 0 else None
        )

    def version_for(self, api_key: int) -> int:
        """The highest version of API `api_key` that both this client and the broker speak (raises when
        there is none)."""
        ours = REQUESTS[api_key].valid_versions
        theirs = self.versions.get(api_key)
        if theirs is None:
            raise ClientError(f"broker {self.bootstrap} does not support API {REQUESTS[api_key].name}")
        lo, hi = max(ours[0], theirs[0]), min(ours[1], theirs[1])
        if lo > hi:
            raise ClientError(f"no common version of {REQUESTS[api_key].name}: ours {ours}, broker {theirs}")
        return hi

    def send(self, body: Message, version: int | None = None) -> Any:
        """Sends one request (at the newest common version unless `version` is given) and returns the
        decoded response body; re-authenticates first when the SASL session is due."""
        if self._reauth_at is not None and time.monotonic() >= self._reauth_at:
            self._authenticate()
        api_key = body.api_key
        assert api_key is not None, f"{body.name} is not a request"
        return self._roundtrip(api_key, self.version_for(api_key) if version is None else version, body)
