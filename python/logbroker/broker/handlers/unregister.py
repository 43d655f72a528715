"""UnregisterBroker (64) and UnregisterController (94): remove a node's registration for
good (`kafka-cluster unregister --id N`, Kafka 4.4's `kafka-cluster unregister-controller`
and the Java Admin's `unregisterBroker`, `unregisterController`).

Both need ALTER on the cluster (else CLUSTER_AUTHORIZATION_FAILED), as Kafka's
ControllerApis. Served on the broker listener (forwarded to the active controller,
coord/metadata/controller_forwarding.py) and on the controller listener.

UnregisterBroker: the active controller takes the broker out of every ISR and ELR, elects
new leaders where it led (as fencing does) and removes its registration, in one metadata
log entry (coord/metadata/cluster_control.py); BROKER_ID_NOT_REGISTERED for an id with no
registration. A broker that still runs registers again (its next heartbeat is answered
BROKER_ID_NOT_REGISTERED: broker_lifecycle.py).

UnregisterController (Kafka 4.4, KIP-1312): removes a controller-only node's registration
(its RegisterController record: the controller registrations this project keeps; a
combined node is registered as a broker). CONTROLLER_ID_NOT_REGISTERED for an id with no
controller registration, INVALID_REQUEST for the active controller itself. The voter set is
not changed (RemoveRaftVoter does that); a controller-only node that still runs registers
again (metadata_quorum.py), as Kafka's.
"""

from __future__ import annotations

from logbroker.common.acl import CLUSTER_NAME
from logbroker.common.acl import AclOperation as Op
from logbroker.common.acl import ResourceType as Res
from logbroker.coord.metadata.control import ControllerError
from logbroker.protocol import RESPONSES, ErrorCode

UNREGISTER_BROKER = 64
UNREGISTER_CONTROLLER = 94


async def _serve(ctx, api_key: int, change: str, node_id: int, call):
    Response = RESPONSES[api_key]
    if not ctx.authorize(Op.ALTER, Res.CLUSTER, CLUSTER_NAME):
        return Response(
            throttle_time_ms=0,
            error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            error_message="Cluster authorization failed.",
        )
    try:
        await call()
    except ControllerError as e:
        ctx.audit_change(change, "cluster", CLUSTER_NAME, e.code, e.message, node_id=node_id)
        return Response(throttle_time_ms=0, error_code=e.code, error_message=e.message)
    ctx.audit_change(change, "cluster", CLUSTER_NAME, node_id=node_id)
    return Response(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None)


async def unregister_broker(ctx, request):
    n = request.broker_id
    return await _serve(ctx, UNREGISTER_BROKER, "unregister_broker", n, lambda: ctx.controller.unregister_broker(n))


async def unregister_controller(ctx, request):
    n = request.controller_id
    return await _serve(
        ctx, UNREGISTER_CONTROLLER, "unregister_controller", n, lambda: ctx.controller.unregister_controller(n)
    )


ENTRIES = [
    (UNREGISTER_BROKER, 0, 0, unregister_broker),
    (UNREGISTER_CONTROLLER, 0, 0, unregister_controller),
]
