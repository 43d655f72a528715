"""ApiVersions (18): the version ranges of the listener's table (HANDLERS on the broker
listener, CONTROLLER_HANDLERS on the controller listener) that this broker serves (an API
gated by a feature is listed only while its level is finalized).

Features (v3+, KIP-584; coord/metadata/feature_control.py): the ranges this software supports, and
the levels finalized in the metadata log with the log index of their last change as the
epoch; `kafka-features describe` shows them and `kafka-features upgrade|downgrade` changes
them (UpdateFeatures). A Java producer 4.x uses transactions v2 (KIP-890) while
transaction.version is 2.

KIP-511: a client may send a newer ApiVersions than we know; the server answers with
a v0 response carrying UNSUPPORTED_VERSION and our ApiVersions range, and the client
retries at a version we serve (see server.py).
"""

from __future__ import annotations

from logbroker.coord.metadata.feature_control import SUPPORTED, finalized
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
    if ctx.version >= 3 and ctx.connection is not None:  # KIP-511: who the client is (KIP-714 matches on it)
        ctx.connection["client_software_name"] = request.client_software_name
        ctx.connection["client_software_version"] = request.client_software_version
    levels = finalized(ctx.controller.image, ctx.broker.config)
    return Response(
        error_code=ErrorCode.NONE,
        api_keys=_api_keys(ctx),
        throttle_time_ms=0,
        supported_features=[
            Response.SupportedFeatureKey(name=n, min_version=lo, max_version=hi)
            for n, (lo, hi) in sorted(SUPPORTED.items())
        ],
        finalized_features_epoch=ctx.controller.image.features_epoch,
        finalized_features=[
            Response.FinalizedFeatureKey(name=n, max_version_level=v, min_version_level=v)
            for n, v in sorted(levels.items())
        ],
    )
