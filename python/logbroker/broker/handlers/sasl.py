"""SaslHandshake (17) and SaslAuthenticate (36): a SASL listener's authentication exchange
(broker/sasl.py has the state machine and the mechanisms). Served, and advertised, only
when the client listener is SASL_PLAINTEXT or SASL_SSL; the dispatcher gives these
handlers the connection's `SaslSession` (`ctx.sasl`) and acts on what it records: an
exchange that completed (the network thread learns the principal before the answer goes
out) or failed (the answer goes out, then the connection closes)."""

from __future__ import annotations

from logbroker.broker.sasl import AuthenticationFailed, log_failure
from logbroker.protocol import RESPONSES, ErrorCode

HANDSHAKE_KEY, AUTHENTICATE_KEY = 17, 36


async def handle_handshake(ctx, request):
    session = ctx.sasl
    response = RESPONSES[HANDSHAKE_KEY]
    if session is None:  # on a listener without SASL, as Kafka answers
        return response(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[])
    if not session.handshake(request.mechanism):
        log_failure(ctx.peer, request.mechanism, f"mechanism {request.mechanism!r} is not one of "
                    f"sasl.enabled.mechanisms {session.mechanisms}" + (
                        "" if session.principal is None else " or not the one the session started with"))
        return response(error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM, mechanisms=list(session.mechanisms))
    return response(error_code=ErrorCode.NONE, mechanisms=list(session.mechanisms))


async def handle_authenticate(ctx, request):
    session = ctx.sasl
    response = RESPONSES[AUTHENTICATE_KEY]
    if session is None:  # on a listener without SASL, as Kafka answers
        return response(error_code=ErrorCode.ILLEGAL_SASL_STATE,
                        error_message=f"listener {ctx.listener} does not authenticate with SASL")
    mechanism = session.mechanism
    if mechanism is None:
        session.failed = f"SaslAuthenticate from {ctx.peer} without a SaslHandshake first"
        return response(error_code=ErrorCode.ILLEGAL_SASL_STATE, error_message=(
            "SaslAuthenticate must follow a SaslHandshake naming the mechanism"))
    try:
        reply, principal = await session.authenticate(bytes(request.auth_bytes))
    except AuthenticationFailed as e:
        log_failure(ctx.peer, mechanism, str(e))
        session.failed = f"authentication failed ({e})"
        return response(error_code=ErrorCode.SASL_AUTHENTICATION_FAILED, error_message=session.failure_message(mechanism))
    lifetime = 0
    if principal is not None:
        session.completed = principal
        lifetime = session.reauth_ms
    return response(error_code=ErrorCode.NONE, auth_bytes=reply, session_lifetime_ms=lifetime)


ENTRIES = [
    (HANDSHAKE_KEY, 1, 1, handle_handshake),
    (AUTHENTICATE_KEY, 0, 2, handle_authenticate),
]
