"""A small HTTP/1.1 server on trio, shared by the metrics endpoint (`metrics.listen`), the
web console (`console.listen`) and the schema registry; over TLS when given a context
(`https://` endpoints, broker/http_tls.py).

What it does: reads the request line and headers (at most `MAX_HEAD_BYTES`), the path (left
percent-encoded: a router splits it into segments first), the query string (`?a=1&b=2`,
percent-decoded; a repeated key keeps its last value) and a body announced by Content-Length
(at most `max_body` bytes); calls `handler(request) -> Response`; keeps the connection open
for the next request (HTTP/1.1 keep-alive) unless the client says `Connection: close`, speaks
HTTP/1.0 or stays idle for `IDLE_TIMEOUT_S`, or the server was made with `keep_alive=False`
(one request per connection).

What it refuses, each with a one-line reason and the connection closed: a malformed request
line or header (400), a head over the limit (431), a chunked or otherwise unsized body (411),
a body over `max_body` (413), a protocol other than HTTP/1.x (505). The handler answers 404
and 405 itself (`HttpError`). A handler that raises anything else answers 500 and is logged:
nothing a client sends ends the server, or the broker running it. The handler runs in the
server's trio task; blocking work belongs in `trio.to_thread.run_sync`.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import ssl
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qsl

import trio

log = logging.getLogger("logbroker.http")

MAX_HEAD_BYTES = 16 * 1024
IDLE_TIMEOUT_S = 30.0
HEAD_TIMEOUT_S = 10.0
REASONS = {
    200: "OK",
    201: "Created",
    204: "No Content",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    409: "Conflict",
    411: "Length Required",
    413: "Content Too Large",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
    505: "HTTP Version Not Supported",
}


class HttpError(Exception):
    """An answer other than success: `status` and a one-line `message` for the client."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclasses.dataclass
class Request:
    method: str
    path: str  # as sent (percent-encoded), without the query string
    query: dict[str, str]
    headers: dict[str, str]  # names lowercased
    body: bytes = b""
    peer: str = ""  # the client's "host:port"

    def json(self) -> Any:
        """The body as JSON; HttpError(400) naming what is wrong with it."""
        if not self.body:
            raise HttpError(400, "a JSON body is required")
        try:
            return json.loads(self.body)
        except (UnicodeDecodeError, ValueError) as e:
            raise HttpError(400, f"the body is not JSON: {e}") from None


@dataclasses.dataclass
class Response:
    status: int = 200
    body: bytes = b""
    content_type: str = "text/plain; charset=utf-8"
    headers: dict[str, str] = dataclasses.field(default_factory=dict)


def json_response(value: Any, status: int = 200) -> Response:
    return Response(status, (json.dumps(value) + "\n").encode(), "application/json")


def text_response(text: str, status: int = 200) -> Response:
    return Response(status, text.encode(), "text/plain; charset=utf-8")


def text_error(status: int, message: str) -> Response:
    """The default form of a refusal: the message as plain text."""
    return text_response(message + "\n", status)


Handler = Callable[[Request], Awaitable[Response]]


class _Refused(Exception):
    """The request cannot be read: answer `status` and close the connection."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class _Reader:
    """Reads requests from one connection; bytes past one request stay for the next."""

    def __init__(self, stream: trio.abc.Stream, max_body: int) -> None:
        self.stream = stream
        self.max_body = max_body
        self.buf = bytearray()

    async def _more(self) -> bool:
        chunk = await self.stream.receive_some(65536)
        if not chunk:
            return False
        self.buf += chunk
        return True

    async def next(self) -> tuple[Request, bool] | None:
        """The next request and whether the connection stays open after it; None when the
        client closed the connection between requests."""
        while (end := self.buf.find(b"\r\n\r\n")) < 0:
            if len(self.buf) > MAX_HEAD_BYTES:
                raise _Refused(431, f"request line and headers exceed {MAX_HEAD_BYTES} bytes")
            if not await self._more():
                if self.buf.strip():
                    raise _Refused(400, "the connection ended inside the request head")
                return None
        if end > MAX_HEAD_BYTES:
            raise _Refused(431, f"request line and headers exceed {MAX_HEAD_BYTES} bytes")
        head = bytes(self.buf[:end]).decode("latin-1")
        del self.buf[: end + 4]
        line, *header_lines = head.split("\r\n")
        parts = line.split(" ")
        if len(parts) != 3 or not parts[0].isalpha() or not parts[1]:
            raise _Refused(400, f"malformed request line {line[:100]!r}")
        method, target, version = parts
        if not version.startswith("HTTP/1."):
            raise _Refused(505 if version.startswith("HTTP/") else 400, f"unsupported protocol {version[:20]!r}")
        headers: dict[str, str] = {}
        for h in header_lines:
            name, sep, value = h.partition(":")
            if not sep or not name or name != name.strip():
                raise _Refused(400, f"malformed header line {h[:100]!r}")
            headers[name.lower()] = value.strip()
        if "transfer-encoding" in headers:
            raise _Refused(411, "Transfer-Encoding is not supported: send the body with a Content-Length")
        length_text = headers.get("content-length", "0")
        if not length_text.isdigit():
            raise _Refused(400, f"bad Content-Length {length_text[:20]!r}")
        length = int(length_text)
        if length > self.max_body:
            raise _Refused(413, f"the body is {length} bytes; at most {self.max_body} are accepted")
        while len(self.buf) < length:
            if not await self._more():
                raise _Refused(400, "the connection ended inside the request body")
        body = bytes(self.buf[:length])
        del self.buf[:length]
        path, _, query = target.partition("?")
        request = Request(method.upper(), path, dict(parse_qsl(query, keep_blank_values=True)), headers, body)
        connection = headers.get("connection", "").lower()
        keep = connection != "close" and (version != "HTTP/1.0" or connection == "keep-alive")
        return request, keep


def _encode(response: Response, keep: bool) -> bytes:
    reason = REASONS.get(response.status, "Status")
    lines = [
        f"HTTP/1.1 {response.status} {reason}",
        f"Content-Type: {response.content_type}",
        f"Content-Length: {len(response.body)}",
        f"Connection: {'keep-alive' if keep else 'close'}",
    ]
    lines += [f"{k}: {v}" for k, v in response.headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + response.body


class HttpServer:
    """`await nursery.start(HttpServer(handler, "console").serve, host, port)` -> the bound
    (host, port); serves until cancelled. `error(status, message) -> Response` shapes the
    refusals (default: plain text); `keep_alive=False` answers one request per connection."""

    def __init__(
        self,
        handler: Handler,
        name: str,
        *,
        max_body: int = 1 << 20,
        error: Callable[[int, str], Response] = text_error,
        keep_alive: bool = True,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.handler = handler
        self.name = name
        self.max_body = max_body
        self.error = error
        self.keep_alive = keep_alive
        self.tls = tls  # https (broker/http_tls.py): each connection's handshake first
        self.address: tuple[str, int] | None = None

    async def serve(self, host: str, port: int, *, task_status: trio.TaskStatus = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(port, host=host)
        self.address = listeners[0].socket.getsockname()[:2]
        task_status.started(self.address)
        await trio.serve_listeners(self._connection, listeners)

    async def _connection(self, tcp: trio.SocketStream) -> None:
        try:
            host, port = tcp.socket.getpeername()[:2]
            peer = f"{host}:{port}"
        except OSError:
            peer = ""
        stream: trio.abc.Stream = tcp
        if self.tls is not None:
            stream = trio.SSLStream(tcp, self.tls, server_side=True)
            try:
                with trio.fail_after(HEAD_TIMEOUT_S):
                    await stream.do_handshake()
            except (trio.BrokenResourceError, trio.TooSlowError, OSError) as e:
                log.info(
                    "%s: TLS handshake with %s failed: %s",
                    self.name,
                    peer or "a client",
                    e.__cause__ or e or type(e).__name__,
                )
                await tcp.aclose()
                return
        reader = _Reader(stream, self.max_body)
        try:
            while True:
                got = None
                with trio.move_on_after(IDLE_TIMEOUT_S if not reader.buf else HEAD_TIMEOUT_S):
                    try:
                        got = await reader.next()
                    except _Refused as e:
                        await stream.send_all(_encode(self.error(e.status, e.message), False))
                        return
                if got is None:
                    return  # closed by the client, or idle too long
                request, keep = got
                request.peer = peer
                keep = keep and self.keep_alive
                response = await self._answer(request)
                await stream.send_all(_encode(response, keep))
                if not keep:
                    return
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as e:
            log.debug("%s connection: %s", self.name, e)
        finally:
            await stream.aclose()

    async def _answer(self, request: Request) -> Response:
        try:
            return await self.handler(request)
        except HttpError as e:
            return self.error(e.status, e.message)
        except Exception as e:  # noqa: BLE001 - a bug or a surprise must not end the server
            log.exception("%s: %s %s failed", self.name, request.method, request.path)
            return self.error(500, f"{request.method} {request.path} failed: {type(e).__name__}: {e}")
