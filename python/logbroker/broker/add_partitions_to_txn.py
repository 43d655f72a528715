"""Adding partitions to a producer's transaction on its behalf, or checking that it added
them (Kafka's AddPartitionsToTxnManager; KIP-890 parts 2 and 1).

A transactions-v2 producer sends no AddPartitionsToTxn. When a partition leader gets the
first transactional batch of a transaction (Produce v12; the network thread hands such a
request over, rust/src/server/produce.rs), or the group coordinator gets a TxnOffsetCommit
v5, this broker asks the producer's transaction coordinator to add the partitions: directly
when that coordinator is this broker, else with AddPartitionsToTxn v5 (one transaction,
VerifyOnly false) over the broker-to-broker channel. No retries here: the producer retries
its request.

Partition verification (part 1, `transaction.partition.verification.enable`): the first
batch of a transactions-v1 producer's transaction on a partition is checked the same way
with VerifyOnly true; the coordinator answers TRANSACTION_ABORTABLE for a partition the
producer never added, which a Produce before v11 gets as INVALID_TXN_STATE.

Errors for Produce follow Kafka's translation for clients: the coordinator's retriable codes
(CONCURRENT_TRANSACTIONS while the previous transaction's markers are written, a coordinator
moving or loading, the coordinator unreachable) become NOT_ENOUGH_REPLICAS, which every
producer retries without a metadata refresh; PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH.
"""

from __future__ import annotations

import logging
from collections import defaultdict

import trio

from logbroker.coord.broker_channel import BrokerChannel, BrokerUnreachable
from logbroker.coord.groups.transaction_coordinator import TransactionCoordinator, TxnError
from logbroker.coord.metadata.control import ControllerError
from logbroker.protocol import REQUESTS, ErrorCode

log = logging.getLogger("logbroker.transactions")

ADD_PARTITIONS_TO_TXN = 24
BROKER_VERSION = 5
CALL_TIMEOUT_S = 30.0

#: Coordinator answers a producer retries: sent back to it as NOT_ENOUGH_REPLICAS.
RETRIABLE = frozenset(
    {
        ErrorCode.CONCURRENT_TRANSACTIONS,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
    }
)

Partition = tuple[str, int]


def _name(code: int) -> str:
    return ErrorCode(code).name if code in ErrorCode._value2member_map_ else str(code)


def for_produce(code: int, message: str, version: int) -> tuple[int, str]:
    """The code and message a Produce `version` answers for a partition the coordinator did
    not add (or, verifying, did not find in the transaction)."""
    if code in RETRIABLE:
        return ErrorCode.NOT_ENOUGH_REPLICAS, f"unable to verify the partition in the transaction yet ({message})"
    if code == ErrorCode.PRODUCER_FENCED:
        return ErrorCode.INVALID_PRODUCER_EPOCH, message
    if code == ErrorCode.TRANSACTION_ABORTABLE and version < 11:
        return ErrorCode.INVALID_TXN_STATE, f"the partition was not added to the transaction ({message})"
    return code, message


class AddPartitionsToTxnManager:
    def __init__(self, node_id: int, controller, transactions: TransactionCoordinator) -> None:
        self.node_id = node_id
        self.controller = controller
        self.transactions = transactions
        self.channel = BrokerChannel(node_id, transactions.peer_security)

    async def run(self, *, task_status: trio.TaskStatus = trio.TASK_STATUS_IGNORED) -> None:
        """Holds the broker-to-broker connections until cancelled."""
        try:
            task_status.started()
            await trio.sleep_forever()
        finally:
            await self.channel.aclose()

    async def add(
        self, txn_id: str, producer_id: int, producer_epoch: int, partitions: list[Partition], verify_only: bool = False
    ) -> dict[Partition, tuple[int, str]]:
        """(error code, message) per partition: NONE once the coordinator added it to the
        open transaction of `producer_id` at `producer_epoch` (`verify_only`: found it there)."""
        what = f"transactional id {txn_id!r} (producer id {producer_id} epoch {producer_epoch})"
        _index, leader = self.transactions.coordinator_node(txn_id)
        if leader == self.node_id:
            try:
                if verify_only:
                    codes = self.transactions.verify_partitions(txn_id, producer_id, producer_epoch, partitions)
                else:
                    codes = await self.transactions.add_partitions(
                        txn_id, producer_id, producer_epoch, partitions, v2=True
                    )
            except (TxnError, ControllerError) as e:
                return {tp: (e.code, f"{what}: {e}") for tp in partitions}
            return {tp: (c, "" if c == ErrorCode.NONE else f"{what}: {_name(c)}") for tp, c in codes.items()}
        broker = self.controller.image.brokers.get(leader)
        if leader < 0 or broker is None or broker.fenced:
            msg = f"{what}: the transaction coordinator has no live leader"
            return {tp: (ErrorCode.COORDINATOR_NOT_AVAILABLE, msg) for tp in partitions}
        Req = REQUESTS[ADD_PARTITIONS_TO_TXN]
        topics: dict[str, list[int]] = defaultdict(list)
        for t, p in partitions:
            topics[t].append(p)
        body = Req(
            transactions=[
                Req.AddPartitionsToTxnTransaction(
                    transactional_id=txn_id,
                    producer_id=producer_id,
                    producer_epoch=producer_epoch,
                    verify_only=verify_only,
                    topics=[Req.AddPartitionsToTxnTopic(name=t, partitions=ps) for t, ps in topics.items()],
                )
            ]
        )
        try:
            resp = await self.channel.request(
                leader, (broker.host, broker.port), ADD_PARTITIONS_TO_TXN, BROKER_VERSION, body, timeout=CALL_TIMEOUT_S
            )
        except BrokerUnreachable as e:
            return {tp: (ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{what}: {e}") for tp in partitions}
        if resp.error_code != ErrorCode.NONE:
            msg = f"{what}: node {leader} answered {_name(resp.error_code)}"
            return {tp: (resp.error_code, msg) for tp in partitions}
        out: dict[Partition, tuple[int, str]] = {}
        for txn in resp.results_by_transaction:
            for t in txn.topic_results:
                for p in t.results_by_partition:
                    c = p.partition_error_code
                    out[(t.name, p.partition_index)] = (
                        c,
                        "" if c == ErrorCode.NONE else f"{what}: node {leader} answered {_name(c)}",
                    )
        for tp in partitions:
            out.setdefault(tp, (ErrorCode.UNKNOWN_SERVER_ERROR, f"{what}: node {leader} did not answer for {tp}"))
        return out
