"""GetTelemetrySubscriptions (71) and PushTelemetry (72): client metrics (KIP-714), served by
the broker's ClientTelemetryManager (broker/client_telemetry.py) against the client-metrics
subscriptions of the metadata image. Every client may ask and push (Kafka checks no ACL)."""

from __future__ import annotations

from logbroker.broker.client_telemetry import ACCEPTED_COMPRESSION, ClientInfo
from logbroker.protocol import RESPONSES, ErrorCode

GET_TELEMETRY_SUBSCRIPTIONS, PUSH_TELEMETRY = 71, 72
GetResponse = RESPONSES[GET_TELEMETRY_SUBSCRIPTIONS]
PushResponse = RESPONSES[PUSH_TELEMETRY]


async def get_telemetry_subscriptions(ctx, request):
    manager = ctx.broker.client_telemetry
    code, message, instance_id, inst = manager.get_subscriptions(
        request.client_instance_id, ClientInfo.of(ctx), ctx.controller.image.client_metrics
    )
    if code != ErrorCode.NONE:
        return GetResponse(throttle_time_ms=0, error_code=code)
    return GetResponse(
        throttle_time_ms=0,
        error_code=ErrorCode.NONE,
        client_instance_id=instance_id,
        subscription_id=inst.subscription_id,
        accepted_compression_types=list(ACCEPTED_COMPRESSION),
        push_interval_ms=inst.interval_ms,
        telemetry_max_bytes=manager.max_bytes,
        delta_temporality=True,
        requested_metrics=list(inst.metrics),
    )


async def push_telemetry(ctx, request):
    code, _message = ctx.broker.client_telemetry.push(request, ClientInfo.of(ctx), ctx.controller.image.client_metrics)
    return PushResponse(throttle_time_ms=0, error_code=code)


ENTRIES = [
    (GET_TELEMETRY_SUBSCRIPTIONS, 0, 0, get_telemetry_subscriptions),
    (PUSH_TELEMETRY, 0, 0, push_telemetry),
]
