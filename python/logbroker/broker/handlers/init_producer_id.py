"""InitProducerId (22): producer ids for idempotent producers.

Ids come from the controller in persisted blocks, so an id is never handed out twice,
even across restarts. A producer that re-initialises with its current id and epoch
(v3+, KIP-360) gets the same id with the epoch bumped, which fences its older self.
Transactional ids are refused: transactions are not implemented yet, and the
transaction APIs are not advertised.
"""

from __future__ import annotations

import logging

from logbroker.coord.controller import ControllerError
from logbroker.protocol import RESPONSES, ErrorCode

API_KEY = 22
MIN_VERSION = 0
MAX_VERSION = 5

log = logging.getLogger("logbroker.broker")

Response = RESPONSES[API_KEY]
MAX_EPOCH = 32767


async def handle(ctx, request):
    if request.transactional_id is not None:
        return Response(throttle_time_ms=0, error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, producer_id=-1, producer_epoch=-1)
    if ctx.version >= 3 and request.producer_id >= 0 and 0 <= request.producer_epoch < MAX_EPOCH - 1:
        return Response(throttle_time_ms=0, error_code=ErrorCode.NONE, producer_id=request.producer_id,
                        producer_epoch=request.producer_epoch + 1)
    try:
        pid = await ctx.controller.allocate_producer_id()
    except ControllerError as e:  # a cluster without a quorum leader for now: retriable
        log.info("InitProducerId from %s: %s", ctx.peer, e.message)
        return Response(throttle_time_ms=0, error_code=e.code, producer_id=-1, producer_epoch=-1)
    return Response(throttle_time_ms=0, error_code=ErrorCode.NONE, producer_id=pid, producer_epoch=0)
