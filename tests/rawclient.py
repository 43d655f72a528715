"""A minimal Kafka protocol client for tests that need exact bytes on the wire:
it builds requests with logbroker's generated codec and reads raw frames."""

from __future__ import annotations

import socket
import struct

from logbroker.protocol import REQUESTS, RESPONSES

FLEXIBLE_MIN = {k: cls.flexible_versions_min for k, cls in REQUESTS.items()}


def request_header(api_key: int, version: int, correlation_id: int, client_id: str | None = "raw") -> bytes:
    cid = b"\xff\xff" if client_id is None else struct.pack(">h", len(client_id)) + client_id.encode()
    head = struct.pack(">hhi", api_key, version, correlation_id) + cid
    flex = FLEXIBLE_MIN.get(api_key)
    if flex is not None and version >= flex:
        head += b"\x00"  # empty tagged fields
    return head


class RawClient:
    def __init__(self, bootstrap: str, timeout: float = 10, client_id: str | None = "raw") -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.correlation_id = 0
        self.client_id = client_id

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def send_frame(self, payload: bytes) -> None:
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)

    def recv_exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError(f"connection closed after {len(buf)} of {n} bytes")
            buf += chunk
        return bytes(buf)

    def recv_frame(self) -> bytes:
        (size,) = struct.unpack(">i", self.recv_exact(4))
        return self.recv_exact(size)

    def is_closed(self, timeout: float = 5) -> bool:
        """True once the broker has closed this connection."""
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except (ConnectionResetError, BrokenPipeError):
            return True
        except TimeoutError:
            return False

    def request(self, api_key: int, version: int, body, raw_body: bytes | None = None):
        self.correlation_id += 1
        if raw_body is None:
            payload = body.to_bytes(version)
        else:
            payload = raw_body
        self.send_frame(request_header(api_key, version, self.correlation_id, self.client_id) + payload)
        frame = self.recv_frame()
        (cid,) = struct.unpack_from(">i", frame, 0)
        assert cid == self.correlation_id, (cid, self.correlation_id)
        pos = 4
        flex = RESPONSES[api_key].flexible_versions_min
        if api_key != 18 and flex is not None and version >= flex:
            assert frame[pos] == 0  # empty tagged fields in response header v1
            pos += 1
        resp, _ = RESPONSES[api_key].decode(frame, pos, version)
        return resp
