"""InitProducerId (22): producer ids for idempotent producers.

Ids come from the controller in persisted blocks, so an id is never handed out twice,
even across restarts. A producer that re-initialises with its current id and epoch
(v3+, KIP-360) gets the same id with the epoch bumped, which fences its older self.
With a transactional id the transaction coordinator answers (its id's producer id, the
epoch bumped, an open transaction of an older producer aborted first:
coord/transaction_coordinator.py).
"""

from __future__ import annotations

import logging

from logbroker.coord.controller import ControllerError
from logbroker.coord.transaction_coordinator import TxnError
from logbroker.log_format import fields
from logbroker.protocol import RESPONSES, ErrorCode

API_KEY = 22
MIN_VERSION = 0
MAX_VERSION = 5

log = logging.getLogger("logbroker.broker")

Response = RESPONSES[API_KEY]
MAX_EPOCH = 32767


async def handle(ctx, request):
    if request.transactional_id is not None:
        txn_id = request.transactional_id
        given = (request.producer_id, request.producer_epoch) if ctx.version >= 3 else (-1, -1)
        try:
            pid, epoch = await ctx.broker.transactions.init_producer_id(
                txn_id, request.transaction_timeout_ms, *given)
        except (TxnError, ControllerError) as e:
            code = e.code
            if code == ErrorCode.PRODUCER_FENCED and ctx.version < 4:
                code = ErrorCode.INVALID_PRODUCER_EPOCH
            log.log(logging.DEBUG if code == ErrorCode.CONCURRENT_TRANSACTIONS else logging.INFO,
                    "InitProducerId for transactional id %r from %s: %s", txn_id, ctx.peer, e,
                    extra=fields(transactional_id=txn_id, peer=ctx.peer))
            return Response(throttle_time_ms=0, error_code=code, producer_id=-1, producer_epoch=-1)
        return Response(throttle_time_ms=0, error_code=ErrorCode.NONE, producer_id=pid, producer_epoch=epoch)
    if ctx.version >= 3 and request.producer_id >= 0 and 0 <= request.producer_epoch < MAX_EPOCH - 1:
        return Response(throttle_time_ms=0, error_code=ErrorCode.NONE, producer_id=request.producer_id,
                        producer_epoch=request.producer_epoch + 1)
    try:
        pid = await ctx.controller.allocate_producer_id()
    except ControllerError as e:  # a cluster without a quorum leader for now: retriable
        log.info("InitProducerId from %s: %s", ctx.peer, e.message, extra=fields(peer=ctx.peer))
        return Response(throttle_time_ms=0, error_code=e.code, producer_id=-1, producer_epoch=-1)
    return Response(throttle_time_ms=0, error_code=ErrorCode.NONE, producer_id=pid, producer_epoch=0)
