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

KIP-1242 (v5): a client that knows which node of which cluster it means to reach sends both
ids. A cluster id that is not this cluster's, or a node id that is not this node's, is a
misrouted connection (DNS or a load balancer sent it elsewhere): REBOOTSTRAP_REQUIRED and no
API keys, so the client goes back to its bootstrap servers. A node id without a cluster id is
INVALID_REQUEST, as Kafka answers.
"""

from __future__ import annotations

import logging

from logbroker.coord.metadata.feature_control import SUPPORTED, finalized
from logbroker.log_format import fields
from logbroker.protocol import RESPONSES, ErrorCode

API_KEY = 18
MIN_VERSION = 0
MAX_VERSION = 5

Response = RESPONSES[API_KEY]

log = logging.getLogger("logbroker.api_versions")


def _misrouted(ctx, request) -> int:
    """KIP-1242's check (v5): NONE, INVALID_REQUEST or REBOOTSTRAP_REQUIRED."""
    if ctx.version < 5:
        return ErrorCode.NONE
    if request.cluster_id is None:
        return ErrorCode.INVALID_REQUEST if request.node_id != -1 else ErrorCode.NONE
    ours = ctx.controller.image.cluster_id
    if request.cluster_id == ours and request.node_id == ctx.broker.node_id:
        return ErrorCode.NONE
    log.info(
        "ApiVersions from %s: it expects node %d of cluster %s, this is node %d of cluster %s: REBOOTSTRAP_REQUIRED",
        ctx.peer,
        request.node_id,
        request.cluster_id,
        ctx.broker.node_id,
        ours,
        extra=fields(peer=ctx.peer),
    )
    return ErrorCode.REBOOTSTRAP_REQUIRED


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
    refused = _misrouted(ctx, request)
    if refused:
        return Response(error_code=refused, api_keys=[], throttle_time_ms=0)
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
