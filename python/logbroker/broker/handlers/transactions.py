"""Transaction APIs: AddPartitionsToTxn (24), AddOffsetsToTxn (25), EndTxn (26),
WriteTxnMarkers (27), TxnOffsetCommit (28), DescribeTransactions (65), ListTransactions (66). InitProducerId with a transactional id is in
init_producer_id.py, FindCoordinator for transactions in groups.py. The protocol logic
lives in coord/groups/transaction_coordinator.py (the coordinator), coord/groups/transaction_markers.py
(markers on this broker's partitions) and coord/groups/group_coordinator.py (offsets); these
functions translate requests and responses.

Versions: Kafka's ranges. KIP-890: AddPartitionsToTxn v4+ is the brokers' batched form
(several transactions, VerifyOnly to check without adding; a partition leader or group
coordinator adding partitions for a transactions-v2 producer, broker/add_partitions_to_txn.py);
EndTxn v5 bumps the epoch and answers the producer id and epoch of the next transaction;
TxnOffsetCommit v5 adds the group's `__consumer_offsets` partition to the transaction itself
(the v2 producer sends no AddOffsetsToTxn). PRODUCER_FENCED (KIP-588) is answered as
INVALID_PRODUCER_EPOCH to versions older than the one that introduced it, and
TRANSACTION_ABORTABLE as INVALID_TXN_STATE to AddPartitionsToTxn v4, as Kafka does.

Authorization as Kafka's KafkaApis: AddPartitionsToTxn (a client's, v0-3) WRITE on the
transactional id and on every topic (`_refuse_topics`), v4+ (brokers') CLUSTER_ACTION;
AddOffsetsToTxn WRITE on the transactional id and READ on the group; EndTxn WRITE on the
transactional id; WriteTxnMarkers ALTER or CLUSTER_ACTION on the cluster; TxnOffsetCommit
WRITE on the transactional id, READ on the group and on each topic; DescribeTransactions
DESCRIBE on each transactional id, showing only the topics the principal may describe;
ListTransactions only the transactional ids the principal may describe.
"""

from __future__ import annotations

import logging
import re

from logbroker.broker.handlers.lookup import name_topics_by_id
from logbroker.common.acl import CLUSTER_NAME
from logbroker.common.acl import AclOperation as Op
from logbroker.common.acl import ResourceType as Res
from logbroker.coord.groups.offsets_topic import OFFSETS_TOPIC
from logbroker.coord.groups.share_state_log import SHARE_STATE_TOPIC
from logbroker.coord.groups.transaction_coordinator import TxnError
from logbroker.coord.groups.transaction_log import TRANSACTION_STATE_TOPIC
from logbroker.coord.groups.transaction_markers import write_markers
from logbroker.coord.metadata.control import ControllerError
from logbroker.log_format import fields
from logbroker.protocol import RESPONSES, ErrorCode

log = logging.getLogger("logbroker.transactions")
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC, SHARE_STATE_TOPIC})  # Kafka's Topic.isInternal


def fenced_for(code: int, version: int, since: int) -> int:
    """PRODUCER_FENCED for clients that know it (`version >= since`), else INVALID_PRODUCER_EPOCH."""
    if code == ErrorCode.PRODUCER_FENCED and version < since:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return code


def _txn_error(ctx, api: str, txn_id: str, e: Exception) -> int:
    code = e.code if isinstance(e, (TxnError, ControllerError)) else ErrorCode.UNKNOWN_SERVER_ERROR
    level = (
        logging.DEBUG
        if code
        in (ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        else logging.INFO
    )
    log.log(
        level,
        "%s for transactional id %r from %s: %s (%s)",
        api,
        txn_id,
        ctx.peer,
        ErrorCode(code).name if code in ErrorCode._value2member_map_ else code,
        e,
        extra=fields(transactional_id=txn_id, peer=ctx.peer),
    )
    return code


async def _add_or_verify(ctx, txn) -> dict[tuple[str, int], int]:
    """One transaction of an AddPartitionsToTxn v4+ (from a broker): error code per partition."""
    coordinator = ctx.broker.transactions
    wanted = [(t.name, p) for t in txn.topics for p in t.partitions]
    try:
        if txn.verify_only:
            codes = coordinator.verify_partitions(txn.transactional_id, txn.producer_id, txn.producer_epoch, wanted)
        else:
            codes = await coordinator.add_partitions(
                txn.transactional_id, txn.producer_id, txn.producer_epoch, wanted, v2=True
            )
    except (TxnError, ControllerError) as e:
        code = _txn_error(ctx, "AddPartitionsToTxn", txn.transactional_id, e)
        codes = {tp: code for tp in wanted}
    if ctx.version < 5:
        codes = {
            tp: ErrorCode.INVALID_TXN_STATE if c == ErrorCode.TRANSACTION_ABORTABLE else c for tp, c in codes.items()
        }
    return codes


def _refuse_topics(ctx, wanted: list[tuple[str, int]]) -> dict[tuple[str, int], int] | None:
    """AddPartitionsToTxn from a client: WRITE on every topic (never on an internal one), else
    TOPIC_AUTHORIZATION_FAILED for the partitions of those it may not write and
    OPERATION_NOT_ATTEMPTED for the rest, none added (Kafka's rule); None when all may be."""
    writable = ctx.authorized(Op.WRITE, Res.TOPIC, [t for t, _ in wanted if t not in INTERNAL_TOPICS])
    if all(t in writable for t, _ in wanted):
        return None
    return {
        (t, p): ErrorCode.OPERATION_NOT_ATTEMPTED if t in writable else ErrorCode.TOPIC_AUTHORIZATION_FAILED
        for t, p in wanted
    }


async def add_partitions_to_txn(ctx, request):
    Response = RESPONSES[24]
    if ctx.version >= 4:
        if not ctx.authorize(Op.CLUSTER_ACTION, Res.CLUSTER, CLUSTER_NAME):  # v4+ is the brokers' form
            return Response(
                throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, results_by_transaction=[]
            )
        results = []
        for txn in request.transactions:
            codes = await _add_or_verify(ctx, txn)
            results.append(
                Response.AddPartitionsToTxnResult(
                    transactional_id=txn.transactional_id,
                    topic_results=[
                        Response.AddPartitionsToTxnTopicResult(
                            name=t.name,
                            results_by_partition=[
                                Response.AddPartitionsToTxnPartitionResult(
                                    partition_index=p, partition_error_code=codes[(t.name, p)]
                                )
                                for p in t.partitions
                            ],
                        )
                        for t in txn.topics
                    ],
                )
            )
        return Response(throttle_time_ms=0, error_code=ErrorCode.NONE, results_by_transaction=results)
    txn_id = request.v3_and_below_transactional_id
    wanted = [(t.name, p) for t in request.v3_and_below_topics for p in t.partitions]
    if not ctx.authorize(Op.WRITE, Res.TRANSACTIONAL_ID, txn_id):
        codes = {tp: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED for tp in wanted}
    elif (refused := _refuse_topics(ctx, wanted)) is not None:
        codes = refused
    else:
        try:
            codes = await ctx.broker.transactions.add_partitions(
                txn_id, request.v3_and_below_producer_id, request.v3_and_below_producer_epoch, wanted
            )
        except (TxnError, ControllerError) as e:
            code = fenced_for(_txn_error(ctx, "AddPartitionsToTxn", txn_id, e), ctx.version, 2)
            codes = {tp: code for tp in wanted}
    return Response(
        throttle_time_ms=0,
        results_by_topic_v3_and_below=[
            Response.AddPartitionsToTxnTopicResult(
                name=t.name,
                results_by_partition=[
                    Response.AddPartitionsToTxnPartitionResult(
                        partition_index=p, partition_error_code=codes[(t.name, p)]
                    )
                    for p in t.partitions
                ],
            )
            for t in request.v3_and_below_topics
        ],
    )


async def add_offsets_to_txn(ctx, request):
    if not ctx.authorize(Op.WRITE, Res.TRANSACTIONAL_ID, request.transactional_id):
        return RESPONSES[25](throttle_time_ms=0, error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not ctx.authorize(Op.READ, Res.GROUP, request.group_id):
        return RESPONSES[25](throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    code = ErrorCode.NONE
    try:
        await ctx.broker.transactions.add_offsets(
            request.transactional_id, request.producer_id, request.producer_epoch, request.group_id
        )
    except (TxnError, ControllerError) as e:
        code = fenced_for(_txn_error(ctx, "AddOffsetsToTxn", request.transactional_id, e), ctx.version, 2)
    return RESPONSES[25](throttle_time_ms=0, error_code=code)


async def end_txn(ctx, request):
    if not ctx.authorize(Op.WRITE, Res.TRANSACTIONAL_ID, request.transactional_id):
        return RESPONSES[26](
            throttle_time_ms=0,
            error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            producer_id=-1,
            producer_epoch=-1,
        )
    code = ErrorCode.NONE
    producer_id, producer_epoch = -1, -1
    try:
        producer_id, producer_epoch = await ctx.broker.transactions.end_txn(
            request.transactional_id,
            request.producer_id,
            request.producer_epoch,
            request.committed,
            v2=ctx.version >= 5,
        )
    except (TxnError, ControllerError) as e:
        code = fenced_for(_txn_error(ctx, "EndTxn", request.transactional_id, e), ctx.version, 2)
    if ctx.version < 5:
        producer_id, producer_epoch = -1, -1
    return RESPONSES[26](throttle_time_ms=0, error_code=code, producer_id=producer_id, producer_epoch=producer_epoch)


async def write_txn_markers(ctx, request):
    Response = RESPONSES[27]
    # from transaction coordinators: ALTER or CLUSTER_ACTION on the cluster, as Kafka
    allowed = ctx.authorize(Op.ALTER, Res.CLUSTER, CLUSTER_NAME) or ctx.authorize(
        Op.CLUSTER_ACTION, Res.CLUSTER, CLUSTER_NAME
    )
    out = []
    for m in request.markers:
        parts = [(t.name, p) for t in m.topics for p in t.partition_indexes]
        if not allowed:
            codes = {tp: ErrorCode.CLUSTER_AUTHORIZATION_FAILED for tp in parts}
        else:
            codes = await write_markers(
                ctx.replicas,
                ctx.broker.groups,
                m.producer_id,
                m.producer_epoch,
                m.transaction_result,
                m.coordinator_epoch,
                parts,
                m.transaction_version if ctx.version >= 2 else 0,
            )
        out.append(
            Response.WritableTxnMarkerResult(
                producer_id=m.producer_id,
                topics=[
                    Response.WritableTxnMarkerTopicResult(
                        name=t.name,
                        partitions=[
                            Response.WritableTxnMarkerPartitionResult(partition_index=p, error_code=codes[(t.name, p)])
                            for p in t.partition_indexes
                        ],
                    )
                    for t in m.topics
                ],
            )
        )
    return Response(markers=out)


async def _add_offsets_partition(ctx, request) -> int:
    """TxnOffsetCommit v5 (transactions v2): the group's `__consumer_offsets` partition is
    added to the producer's transaction here, by its group coordinator."""
    groups = ctx.broker.groups
    code = groups.check_coordinator(request.group_id)
    if code:
        return code
    partition = (OFFSETS_TOPIC, groups.partition_of(request.group_id))
    added = await ctx.broker.add_partitions_to_txn.add(
        request.transactional_id, request.producer_id, request.producer_epoch, [partition]
    )
    code, message = added[partition]
    if code != ErrorCode.NONE:
        log.debug(
            "TxnOffsetCommit of group %r from %s: %s",
            request.group_id,
            ctx.peer,
            message,
            extra=fields(group=request.group_id, peer=ctx.peer),
        )
    return code


async def txn_offset_commit(ctx, request):
    Response = RESPONSES[28]
    version = ctx.version
    # v6 names topics by id (KIP-1319): an id the metadata image does not know is
    # UNKNOWN_TOPIC_ID on each of its partitions, and nothing of it is committed
    unknown = name_topics_by_id(ctx, request.topics) if version >= 6 else set()

    def each_partition(code: int):
        return Response(
            throttle_time_ms=0,
            topics=[
                Response.TxnOffsetCommitResponseTopic(
                    name=t.name,
                    topic_id=t.topic_id,
                    partitions=[
                        Response.TxnOffsetCommitResponsePartition(
                            partition_index=p.partition_index,
                            error_code=ErrorCode.UNKNOWN_TOPIC_ID if t.topic_id in unknown else code,
                        )
                        for p in t.partitions
                    ],
                )
                for t in request.topics
            ],
        )

    if not ctx.authorize(Op.WRITE, Res.TRANSACTIONAL_ID, request.transactional_id):
        return each_partition(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not ctx.authorize(Op.READ, Res.GROUP, request.group_id):
        return each_partition(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    readable = ctx.authorized(Op.READ, Res.TOPIC, [t.name for t in request.topics if t.topic_id not in unknown])
    offsets = [
        (
            t.name,
            p.partition_index,
            p.committed_offset,
            p.committed_leader_epoch if version >= 2 else -1,
            p.committed_metadata,
        )
        for t in request.topics
        if t.topic_id not in unknown and t.name in readable
        for p in t.partitions
    ]
    if not offsets and request.topics:  # every topic refused or unknown: nothing to commit
        return each_partition(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    code = await _add_offsets_partition(ctx, request) if version >= 5 else ErrorCode.NONE
    if code != ErrorCode.NONE:
        return each_partition(code)
    results = await ctx.broker.groups.txn_commit_offsets(
        transactional_id=request.transactional_id,
        group_id=request.group_id,
        producer_id=request.producer_id,
        producer_epoch=request.producer_epoch,
        generation_id=request.generation_id_or_member_epoch if version >= 3 else -1,
        member_id=request.member_id if version >= 3 else "",
        group_instance_id=request.group_instance_id if version >= 3 else None,
        offsets=offsets,
    )
    return Response(
        throttle_time_ms=0,
        topics=[
            Response.TxnOffsetCommitResponseTopic(
                name=t.name,
                topic_id=t.topic_id,
                partitions=[
                    Response.TxnOffsetCommitResponsePartition(
                        partition_index=p.partition_index,
                        error_code=ErrorCode.UNKNOWN_TOPIC_ID
                        if t.topic_id in unknown
                        else fenced_for(results[(t.name, p.partition_index)], version, 3)
                        if t.name in readable
                        else ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                    )
                    for p in t.partitions
                ],
            )
            for t in request.topics
        ],
    )


async def describe_transactions(ctx, request):
    Response = RESPONSES[65]
    out = []
    for txn_id in request.transactional_ids:
        if not ctx.authorize(Op.DESCRIBE, Res.TRANSACTIONAL_ID, txn_id):
            out.append(
                Response.TransactionState(
                    error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                    transactional_id=txn_id,
                    transaction_state="",
                    transaction_timeout_ms=0,
                    transaction_start_time_ms=-1,
                    producer_id=-1,
                    producer_epoch=-1,
                    topics=[],
                )
            )
            continue
        try:
            meta = ctx.broker.transactions.describe(txn_id)
        except TxnError as e:
            out.append(
                Response.TransactionState(
                    error_code=e.code,
                    transactional_id=txn_id,
                    transaction_state="",
                    transaction_timeout_ms=0,
                    transaction_start_time_ms=-1,
                    producer_id=-1,
                    producer_epoch=-1,
                    topics=[],
                )
            )
            continue
        by_topic: dict[str, list[int]] = {}
        described = ctx.authorized(Op.DESCRIBE, Res.TOPIC, {t for t, _ in meta.partitions})
        for t, p in sorted(meta.partitions):
            if t in described:  # only the partitions of topics the principal may describe
                by_topic.setdefault(t, []).append(p)
        out.append(
            Response.TransactionState(
                error_code=ErrorCode.NONE,
                transactional_id=txn_id,
                transaction_state=meta.status.kafka_name,
                transaction_timeout_ms=meta.timeout_ms,
                transaction_start_time_ms=meta.start_ms,
                producer_id=meta.producer_id,
                producer_epoch=meta.producer_epoch,
                topics=[Response.TopicData(topic=t, partitions=ps) for t, ps in by_topic.items()],
            )
        )
    return Response(throttle_time_ms=0, transaction_states=out)


KAFKA_STATES = {
    "Empty",
    "Ongoing",
    "PrepareCommit",
    "PrepareAbort",
    "CompleteCommit",
    "CompleteAbort",
    "Dead",
    "PrepareEpochFence",
}


async def list_transactions(ctx, request):
    Response = RESPONSES[66]
    states = set(request.state_filters)
    unknown = sorted(states - KAFKA_STATES)
    pattern = None
    if ctx.version >= 2 and request.transactional_id_pattern:  # null or empty: every id
        try:
            pattern = re.compile(request.transactional_id_pattern)
        except re.error as e:
            log.info(
                "ListTransactions from %s: transactional id pattern %r is not a regular expression: %s",
                ctx.peer,
                request.transactional_id_pattern,
                e,
                extra=fields(peer=ctx.peer),
            )
            return Response(
                throttle_time_ms=0,
                error_code=ErrorCode.INVALID_REGULAR_EXPRESSION,
                unknown_state_filters=[],
                transaction_states=[],
            )
    listed = ctx.broker.transactions.list(
        states, set(request.producer_id_filters), request.duration_filter if ctx.version >= 1 else -1, pattern
    )
    listed = [m for m in listed if ctx.authorize(Op.DESCRIBE, Res.TRANSACTIONAL_ID, m.transactional_id)]
    return Response(
        throttle_time_ms=0,
        error_code=ErrorCode.NONE,
        unknown_state_filters=unknown,
        transaction_states=[
            Response.TransactionState(
                transactional_id=m.transactional_id, producer_id=m.producer_id, transaction_state=m.status.kafka_name
            )
            for m in listed
        ],
    )


ENTRIES = [
    (24, 0, 5, add_partitions_to_txn),
    (25, 0, 4, add_offsets_to_txn),  # v4: may answer TRANSACTION_ABORTABLE (KIP-890), as v3 otherwise
    (26, 0, 5, end_txn),
    (27, 1, 2, write_txn_markers),  # v2: each marker's transaction version (KIP-1228)
    (28, 0, 6, txn_offset_commit),  # v6: topics by id (KIP-1319)
    (65, 0, 0, describe_transactions),
    (66, 0, 2, list_transactions),  # v2: a transactional id pattern (KIP-1152)
]
