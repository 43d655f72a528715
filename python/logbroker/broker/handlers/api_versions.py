"""ApiVersions (18): the version ranges of the listener's table (HANDLERS on the broker
listener, CONTROLLER_HANDLERS on the controller listener), nothing else; the cluster-only
APIs (DescribeQuorum, BrokerHeartbeat) only on a node of a controller quorum.

Features (v3+, KIP-584): `transaction.version`, supported 0-2 and finalized at the level of
the broker's `transaction.version` key (Kafka finalizes it when the cluster is formatted); a
Java producer 4.x uses transactions v2 (KIP-890) when the finalized level is 2. The
finalized-features epoch is fixed: the level does not change while a broker runs.

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


FEATURES_EPOCH = 0
TRANSACTION_VERSION_MAX = 2


async def handle(ctx, request):
    level = ctx.broker.config.get_int("transaction.version")
    return Response(
        error_code=ErrorCode.NONE, api_keys=_api_keys(ctx), throttle_time_ms=0,
        supported_features=[Response.SupportedFeatureKey(name="transaction.version", min_version=0,
                                                         max_version=TRANSACTION_VERSION_MAX)],
        finalized_features_epoch=FEATURES_EPOCH,
        finalized_features=[Response.FinalizedFeatureKey(name="transaction.version", max_version_level=level,
                                                         min_version_level=level)],
    )
