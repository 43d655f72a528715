"""InitProducerId (22): producer ids for idempotent producers.

Ids come from the controller in persisted blocks, so an id is never handed out twice,
even across restarts. A producer that re-initialises with its current id and epoch
(v3+, KIP-360) gets the same id with the epoch bumped, which fences its older self.
With a transactional id the transaction coordinator answers (its id's producer id, the
epoch bumped, an open transaction of an older producer aborted first:
coord/groups/transaction_coordinator.py).

Authorization as Kafka's: with a transactional id WRITE on it (else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED); without, IDEMPOTENT_WRITE on the cluster or WRITE on
some topic (KIP-679, `writes_some_topic`), else CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import logging

from logbroker.common.acl import CLUSTER_NAME, AclPermissionType, PatternType, host_of
from logbroker.common.acl import AclOperation as Op
from logbroker.common.acl import ResourceType as Res
from logbroker.coord.groups.transaction_coordinator import TxnError
from logbroker.coord.metadata.control import ControllerError
from logbroker.log_format import fields
from logbroker.protocol import RESPONSES, ErrorCode

API_KEY = 22
MIN_VERSION = 0
MAX_VERSION = 5

log = logging.getLogger("logbroker.broker")

Response = RESPONSES[API_KEY]
MAX_EPOCH = 32767


def writes_some_topic(ctx) -> bool:
    """Whether the principal may WRITE some topic: Kafka's `authorizeByResourceType(WRITE,
    TOPIC)` (KIP-679), from the ACLs of the metadata image. Allowed when an ALLOW for WRITE (or
    ALL) on topics applies to the principal and host and no DENY covers it: a literal name
    not denied literally nor by a denied prefix of it, a prefix no shorter denied prefix
    covers, or `*`; a DENY on `*` refuses outright."""
    if ctx.authorize(Op.WRITE, Res.TOPIC, "hardcode"):  # Kafka's probe: super users, allow.everyone.if.no.acl.found
        return True
    host = host_of(ctx.peer)
    deny_literal, deny_prefix, allow_literal, allow_prefix, allow_any = set(), set(), set(), set(), False
    for b in getattr(ctx.controller.image, "acls", {}).values():
        if (
            b.resource_type != Res.TOPIC
            or b.host not in ("*", host)
            or b.principal not in (ctx.principal, "User:*")
            or b.operation not in (Op.WRITE, Op.ALL)
        ):
            continue
        literal = b.pattern_type == PatternType.LITERAL
        if b.permission_type == AclPermissionType.DENY:
            if literal and b.resource_name == "*":
                return False
            (deny_literal if literal else deny_prefix).add(b.resource_name)
        elif b.permission_type == AclPermissionType.ALLOW:
            allow_any |= literal and b.resource_name == "*"
            (allow_literal if literal else allow_prefix).add(b.resource_name)
    if allow_any:
        return True

    def dominated(name: str) -> bool:
        return any(name[:i] in deny_prefix for i in range(1, len(name) + 1))

    return any(not dominated(n) for n in allow_literal - deny_literal) or any(not dominated(n) for n in allow_prefix)


async def handle(ctx, request):
    if request.transactional_id is not None:
        txn_id = request.transactional_id
        if not ctx.authorize(Op.WRITE, Res.TRANSACTIONAL_ID, txn_id):
            return Response(
                throttle_time_ms=0,
                error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                producer_id=-1,
                producer_epoch=-1,
            )
        given = (request.producer_id, request.producer_epoch) if ctx.version >= 3 else (-1, -1)
        try:
            pid, epoch = await ctx.broker.transactions.init_producer_id(txn_id, request.transaction_timeout_ms, *given)
        except (TxnError, ControllerError) as e:
            code = e.code
            if code == ErrorCode.PRODUCER_FENCED and ctx.version < 4:
                code = ErrorCode.INVALID_PRODUCER_EPOCH
            log.log(
                logging.DEBUG if code == ErrorCode.CONCURRENT_TRANSACTIONS else logging.INFO,
                "InitProducerId for transactional id %r from %s: %s",
                txn_id,
                ctx.peer,
                e,
                extra=fields(transactional_id=txn_id, peer=ctx.peer),
            )
            return Response(throttle_time_ms=0, error_code=code, producer_id=-1, producer_epoch=-1)
        return Response(throttle_time_ms=0, error_code=ErrorCode.NONE, producer_id=pid, producer_epoch=epoch)
    if not (ctx.authorize(Op.IDEMPOTENT_WRITE, Res.CLUSTER, CLUSTER_NAME) or writes_some_topic(ctx)):
        return Response(
            throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, producer_id=-1, producer_epoch=-1
        )
    if ctx.version >= 3 and request.producer_id >= 0 and 0 <= request.producer_epoch < MAX_EPOCH - 1:
        return Response(
            throttle_time_ms=0,
            error_code=ErrorCode.NONE,
            producer_id=request.producer_id,
            producer_epoch=request.producer_epoch + 1,
        )
    try:
        pid = await ctx.controller.allocate_producer_id()
    except ControllerError as e:  # a cluster without a quorum leader for now: retriable
        log.info("InitProducerId from %s: %s", ctx.peer, e.message, extra=fields(peer=ctx.peer))
        return Response(throttle_time_ms=0, error_code=e.code, producer_id=-1, producer_epoch=-1)
    return Response(throttle_time_ms=0, error_code=ErrorCode.NONE, producer_id=pid, producer_epoch=0)
