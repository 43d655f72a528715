"""ListConfigResources (74): the config resources there are, as Kafka's KafkaApis (KIP-1142).

v0 is KIP-714's ListClientMetricsResources: the client-metrics subscriptions. v1 takes
ResourceTypes, the types wanted (empty: every type it serves): TOPIC (2, every topic),
BROKER (4) and BROKER_LOGGER (8) (each unfenced broker's id), CLIENT_METRICS (16, the
subscriptions) and GROUP (32, the groups with configs), listed in Kafka's order (groups,
client metrics, broker loggers, brokers, topics). A type outside those (outside
CLIENT_METRICS at v0) answers UNSUPPORTED_VERSION with no resources, as Kafka.

Authorization: DESCRIBE_CONFIGS on the cluster, else CLUSTER_AUTHORIZATION_FAILED.
`kafka-client-metrics --list` and `--describe` (without --name) ask it.
"""

from __future__ import annotations

import logging

from logbroker.common.acl import CLUSTER_NAME, AclOperation, ResourceType
from logbroker.log_format import fields
from logbroker.protocol import RESPONSES, ErrorCode

log = logging.getLogger("logbroker.admin")

API_KEY = 74
MIN_VERSION = 0
MAX_VERSION = 1

Response = RESPONSES[API_KEY]

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32


def supported_types(version: int) -> tuple[int, ...]:
    """The resource types a request of `version` may ask for (Kafka's
    ListConfigResourcesRequest.supportedResourceTypes)."""
    return (CLIENT_METRICS,) if version == 0 else (TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP)


async def handle(ctx, request):
    if not ctx.authorize(AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER, CLUSTER_NAME):
        return Response(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, config_resources=[])
    supported = supported_types(ctx.version)
    wanted = list(request.resource_types) if ctx.version >= 1 else []
    unsupported = sorted({t for t in wanted if t not in supported})
    if unsupported:
        log.info(
            "ListConfigResources v%d from %s: resource types %s are not supported (only %s)",
            ctx.version,
            ctx.peer,
            unsupported,
            list(supported),
            extra=fields(peer=ctx.peer),
        )
        return Response(throttle_time_ms=0, error_code=ErrorCode.UNSUPPORTED_VERSION, config_resources=[])
    types = set(wanted or supported)
    image = ctx.controller.image
    out = []

    def add(names, resource_type: int) -> None:
        out.extend(Response.ConfigResource(resource_name=n, resource_type=resource_type) for n in names)

    if GROUP in types:
        add(sorted(image.group_configs), GROUP)
    if CLIENT_METRICS in types:
        add(sorted(image.client_metrics), CLIENT_METRICS)
    brokers = [str(n) for n, b in sorted(image.brokers.items()) if not b.fenced]
    if BROKER_LOGGER in types:
        add(brokers, BROKER_LOGGER)
    if BROKER in types:
        add(brokers, BROKER)
    if TOPIC in types:
        add(sorted(image.topics), TOPIC)
    return Response(throttle_time_ms=0, error_code=ErrorCode.NONE, config_resources=out)
