"""SASL between nodes, Python side: the exchange a node runs after dialling another node's
SASL_PLAINTEXT or SASL_SSL listener, and the controller listener's side of it.

    dial (TLS handshake first on SASL_SSL)
    SaslHandshake v1 (mechanism)         -> UNSUPPORTED_SASL_MECHANISM: the listener does not
                                            enable it (the error names what it enables)
    SaslAuthenticate v2 (token) ...      -> one round for PLAIN, two for SCRAM; an error code
                                            fails the connection (`PeerAuthenticationFailed`)
    session_lifetime_ms > 0              -> the dialler closes the connection and dials again
                                            at 85-95% of it (KIP-368; simpler than
                                            re-authenticating in place, and what Kafka's
                                            server accepts too)
    then what the connection is for: Kafka requests (BrokerChannel, ControllerClient), or
    the controller quorum's hello b"LBRQ" and Raft frames (metadata/quorum_transport.py)

The mechanisms' state machines are the Python client's (client/sasl.py: `Plain`,
`ScramClient`, whose arithmetic is logbroker/scram.py). The mechanism, user and password come
from the node's configuration (`BrokerConfig.node_sasl`, Kafka's keys).

The controller listener is served in Python (metadata/quorum_transport.py): on a SASL listener every
connection, Raft peer or Kafka client, must first complete this exchange, served by
`serve_authentication` with the broker's own `SaslSession` and SaslHandshake/SaslAuthenticate
handlers (common/sasl.py, broker/handlers/sasl.py); only these two requests are served before
it (a client's ApiVersions closes the connection). When `connections.max.reauth.ms` is set
and a session has lasted that long, the controller listener closes a Raft connection, and a
Kafka client's at its next request (metadata/quorum_transport.py, metadata/controller_channel.py).
"""

from __future__ import annotations

import itertools
import logging
import random
from dataclasses import dataclass

import trio

from logbroker.client.sasl import SaslConfig
from logbroker.common.sasl import (
    AUTHENTICATE_KEY,
    HANDSHAKE_KEY,
    SaslSession,
    handle_authenticate,
    handle_handshake,
    raw_token,
)
from logbroker.coord.framing import MAX_FRAME, read_frame
from logbroker.protocol import (
    REQUESTS,
    ErrorCode,
    ProtocolError,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)

log = logging.getLogger("logbroker.sasl")

__all__ = ["PeerAuthenticationFailed", "authenticate", "reauth_deadline", "serve_authentication"]

HANDSHAKE_VERSION = 1
AUTHENTICATE_VERSION = 2
_correlation = itertools.count(1)


class PeerAuthenticationFailed(trio.BrokenResourceError):
    """This node could not authenticate to another node (the message names both ends, the
    listener, mechanism and user, and what the other node answered). A BrokenResourceError,
    so every caller treats it as a lost connection and dials again after its back-off."""


async def _roundtrip(stream: trio.abc.Stream, api_key: int, version: int, body, client_id: str):
    corr = next(_correlation) & 0x7FFFFFFF
    await stream.send_all(b"".join(bytes(c) for c in encode_request(api_key, version, corr, client_id, body)))
    frame = await read_frame(stream, bytearray(), MAX_FRAME)
    if frame is None:
        raise trio.BrokenResourceError("the other node closed the connection during SASL authentication")
    got, response = decode_response(api_key, version, frame)
    if got != corr:
        raise ProtocolError(f"response correlation id {got}, expected {corr}")
    return response


async def authenticate(stream: trio.abc.Stream, sasl: SaslConfig, node_id: int, listener: str, where: str) -> int:
    """Runs the exchange on a fresh connection to `where` (host:port of `listener`);
    returns the session lifetime in ms (0: none). PeerAuthenticationFailed when refused."""
    who = (
        f"node {node_id}: SASL authentication to {where} (listener {listener}, {sasl.mechanism}, "
        f"user {sasl.username!r})"
    )
    client_id = f"logbroker-node-{node_id}"
    try:
        hs = await _roundtrip(
            stream, HANDSHAKE_KEY, HANDSHAKE_VERSION, REQUESTS[HANDSHAKE_KEY](mechanism=sasl.mechanism), client_id
        )
        if hs.error_code != ErrorCode.NONE:
            raise PeerAuthenticationFailed(
                f"{who} failed: SaslHandshake answered {ErrorCode(hs.error_code).name}; "
                f"the listener enables {', '.join(hs.mechanisms) or 'no mechanism'}"
            )
        mech = sasl.client()
        token: bytes | None = mech.first()
        lifetime = 0
        while token is not None:
            resp = await _roundtrip(
                stream, AUTHENTICATE_KEY, AUTHENTICATE_VERSION, REQUESTS[AUTHENTICATE_KEY](auth_bytes=token), client_id
            )
            if resp.error_code != ErrorCode.NONE:
                raise PeerAuthenticationFailed(
                    f"{who} failed: {ErrorCode(resp.error_code).name}: {resp.error_message or 'no message'}"
                )
            lifetime = resp.session_lifetime_ms
            token = mech.respond(bytes(resp.auth_bytes or b""))
        return max(0, lifetime)
    except ValueError as e:  # the mechanism found the other node's messages wrong
        raise PeerAuthenticationFailed(f"{who} failed: {e}") from None
    except ProtocolError as e:
        raise PeerAuthenticationFailed(f"{who} failed: the answer is not Kafka's protocol: {e}") from None


def reauth_deadline(lifetime_ms: int) -> float:
    """When a connection whose session lasts `lifetime_ms` (0: forever) is dialled again: at
    a random point in 85-95% of it, as Kafka's clients re-authenticate (trio clock)."""
    if lifetime_ms <= 0:
        return float("inf")
    return trio.current_time() + lifetime_ms / 1000 * random.uniform(0.85, 0.95)


@dataclass
class _Context:
    """What the SASL handlers read of a request context."""

    sasl: SaslSession
    peer: str
    listener: str
    version: int = 1  # the request's version (SaslHandshake v0: raw tokens follow)


async def serve_authentication(
    stream: trio.abc.Stream, buf: bytearray, session: SaslSession, listener: str, max_receive: int, failure_delay: float
) -> str | None:
    """Serves SaslHandshake and SaslAuthenticate on a fresh controller-listener connection
    until the exchange completes: the principal, or None (logged) when the connection must
    close. What the client sent after it stays in `buf`."""

    ctx = _Context(session, session.peer, listener)
    while True:
        try:
            frame = await read_frame(stream, buf, max_receive)
        except ProtocolError as e:
            log.error("controller listener %s: %s sent %s before authenticating; closing", listener, session.peer, e)
            return None
        if frame is None:
            return None
        if session.raw_tokens:  # after SaslHandshake v0
            reply, principal = await raw_token(session, bytes(frame))
            if reply is None:
                await trio.sleep(failure_delay)
                log.warning(
                    "controller listener %s: %s did not authenticate: %s; closing",
                    listener,
                    session.peer,
                    session.failed,
                )
                return None
            await stream.send_all(reply)
            if principal is not None:
                session.completed = None
                return principal
            continue
        try:
            header, request = decode_request(frame)
        except ProtocolError as e:
            log.error(
                "controller listener %s: %s sent a malformed request before authenticating (%s); closing",
                listener,
                session.peer,
                e,
            )
            return None
        key = header.request_api_key
        ctx.version = header.request_api_version
        if key == HANDSHAKE_KEY:
            response = await handle_handshake(ctx, request)
        elif key == AUTHENTICATE_KEY:
            response = await handle_authenticate(ctx, request)
        else:
            log.error(
                "controller listener %s is %s: %s sent API key %d before authenticating (SaslHandshake and "
                "SaslAuthenticate first); closing",
                listener,
                "SASL",
                session.peer,
                key,
            )
            return None
        if session.failed is not None:
            await trio.sleep(failure_delay)  # connection.failed.authentication.delay.ms
        await stream.send_all(
            b"".join(
                bytes(c) for c in encode_response(key, header.request_api_version, header.correlation_id, response)
            )
        )
        if session.failed is not None:
            log.warning(
                "controller listener %s: %s did not authenticate: %s; closing", listener, session.peer, session.failed
            )
            return None
        if key == HANDSHAKE_KEY and response.error_code != ErrorCode.NONE:
            return None
        if session.completed is not None:
            principal, session.completed = session.completed, None
            return principal
