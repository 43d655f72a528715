"""UpdateFeatures (57, KIP-584/KIP-778): `kafka-features upgrade|downgrade|disable`, decided
by the active controller (coord/metadata/feature_control.py has the rules; a broker forwards).
v0 names a downgrade with AllowDowngrade (taken as a safe downgrade), v1+ with UpgradeType;
v1+ may validate only. v0-1 answer per feature; v2 answers only a top-level error (the
first refusal, as Kafka's). Needs ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from logbroker.common.acl import CLUSTER_NAME
from logbroker.common.acl import AclOperation as Op
from logbroker.common.acl import ResourceType as Res
from logbroker.coord.metadata.control import ControllerError
from logbroker.coord.metadata.controller_forwarding import client_timeout
from logbroker.coord.metadata.feature_control import SAFE_DOWNGRADE, UPGRADE
from logbroker.protocol import RESPONSES, ErrorCode

API_KEY = 57
MIN_VERSION = 0
MAX_VERSION = 2

Response = RESPONSES[API_KEY]


def _answer(
    ctx, results: list[tuple[str, ErrorCode, str | None]], error: ErrorCode = ErrorCode.NONE, message: str | None = None
):
    if ctx.version >= 2:
        refused = next(((c, m) for _n, c, m in results if c != ErrorCode.NONE), None)
        if error == ErrorCode.NONE and refused is not None:
            error, message = refused
        return Response(throttle_time_ms=0, error_code=error, error_message=message, results=[])
    return Response(
        throttle_time_ms=0,
        error_code=error,
        error_message=message,
        results=[Response.UpdatableFeatureResult(feature=n, error_code=c, error_message=m) for n, c, m in results],
    )


async def handle(ctx, request):
    updates = [
        (
            u.feature,
            u.max_version_level,
            u.upgrade_type if ctx.version >= 1 else (SAFE_DOWNGRADE if u.allow_downgrade else UPGRADE),
        )
        for u in request.feature_updates
    ]
    if not ctx.authorize(Op.ALTER, Res.CLUSTER, CLUSTER_NAME):
        code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return _answer(
            ctx,
            [(n, code, "Cluster authorization failed.") for n, _l, _t in updates],
            code,
            "Cluster authorization failed.",
        )
    validate_only = bool(request.validate_only) if ctx.version >= 1 else False
    try:
        with client_timeout(request.timeout_ms):
            results = await ctx.controller.update_features(updates, validate_only)
    except ControllerError as e:
        return _answer(ctx, [(n, e.code, e.message) for n, _l, _t in updates], e.code, e.message)
    return _answer(ctx, results)
