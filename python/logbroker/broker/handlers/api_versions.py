"""ApiVersions (18): the version ranges of the listener's table (HANDLERS on the broker
listener, CONTROLLER_HANDLERS on the controller listener), nothing else; the cluster-only
APIs (DescribeQuorum, BrokerHeartbeat) only on a node of a controller quorum.

KIP-511: a client may send a newer ApiVersions than we know; the server answers with
a v0 response carrying UNSUPPORTED_VERSION and our ApiVersions range, and the client
retries at a version we serve (see server.py).
"""

from __future__ import annotations

from logbroker.protocol import RESPONSES, ErrorCode

API_KEY = 18
MIN_VERSION = 0
MAX_VERSION = 4

Response = RESPONSES[API_KEY]


def _api_keys(ctx) -> list:
    return [
        Response.ApiVersion(api_key=e.api_key, min_version=e.min_version, max_version=e.max_version)
        for e in sorted(ctx.handlers.values(), key=lambda e: e.api_key)
        if e.served_by(ctx.broker)
    ]


def unsupported_version_response():
    return Response(
        error_code=ErrorCode.UNSUPPORTED_VERSION,
        api_keys=[Response.ApiVersion(api_key=API_KEY, min_version=MIN_VERSION, max_version=MAX_VERSION)],
    )


async def handle(ctx, request):
    return Response(error_code=ErrorCode.NONE, api_keys=_api_keys(ctx), throttle_time_ms=0)
