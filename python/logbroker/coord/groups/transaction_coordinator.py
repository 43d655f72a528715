"""The transaction coordinator (Kafka's exactly-once transactions, transaction protocols v1 and v2).

Placement: a transactional id lives on the leader of `__transaction_state` partition
partition_for(transactional_id) (transaction_log.py); this broker coordinates the ids of
the partitions it leads, loaded from the log when it becomes their leader and forgotten
when it stops. The topic is created on first use (FindCoordinator with key type 1).

State per transactional id (`TxnMetadata`, persisted as one compacted record per id): the
producer id and epoch, the timeout, the status and the partitions of the open transaction.
A change is applied in memory only after its record is appended and covered by the HW;
changes to one id are serialised by its lock.

Transitions (status names as Kafka's):

    InitProducerId   none/Empty/Complete* -> Empty with epoch + 1 (a new id at the first
                     call, or when the epoch is exhausted); Ongoing -> the open transaction
                     is aborted with epoch + 1 (fencing the old producer) and the caller gets
                     CONCURRENT_TRANSACTIONS, retries, and then gets epoch + 2
    AddPartitionsToTxn / AddOffsetsToTxn
                     Empty/Ongoing/Complete* -> Ongoing with the partitions added
    EndTxn           Ongoing -> PrepareCommit/PrepareAbort (answered once written), then the
                     markers are written to every partition (transaction_markers.py) and the
                     state becomes CompleteCommit/CompleteAbort with no partitions
    timeout          Ongoing for longer than its timeout -> aborted with epoch + 1

During PrepareCommit/PrepareAbort (markers in flight) every request for the id answers
CONCURRENT_TRANSACTIONS, which clients retry. A coordinator that loads an id in a Prepare
state finishes it: markers are idempotent. Markers carry the coordinator epoch (the leader
epoch of the id's `__transaction_state` partition), so a deposed coordinator's late markers
are refused by the partitions (TRANSACTION_COORDINATOR_FENCED).

Expiration: an id with nothing open (Empty, CompleteCommit, CompleteAbort) unchanged for
transactional.id.expiration.ms is removed every
transaction.remove.expired.transaction.cleanup.interval.ms: a tombstone, then forgotten.

Transactions v2 (KIP-890 part 2; offered while the `transaction.version` feature is 2,
ApiVersions): the producer sends no AddPartitionsToTxn/AddOffsetsToTxn; the partition leaders
(Produce v12) and the group coordinator (TxnOffsetCommit v5) add partitions for it
(AddPartitionsToTxn v5 from a broker, `add_partitions(..., v2=True)`). Every EndTxn v5 bumps
the producer epoch: the Prepare state and the markers carry epoch + 1, and the answer gives
the producer its epoch for the next transaction, so a late batch of an ended transaction is
refused by every partition (its epoch is older than the marker's). An epoch that would pass
32766 moves the producer to a new producer id (NextProducerId, kept with the Prepare state)
with epoch 0; the markers still go out under the old id at epoch 32767. A v2 state answers a
retried EndTxn (its epoch one below the state's) with the outcome already reached, and an
abort with nothing open ("empty abort": a v2 producer cannot know whether its first sends
reached a partition) bumps the epoch without markers. `client_transaction_version` (2 or 0,
persisted) records which protocol the transaction follows.

Partition verification (KIP-890 part 1, AddPartitionsToTxn v4+ with VerifyOnly) is answered
(`verify_partitions`); this broker's leaders ask for it only for Produce v12.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections import defaultdict

import trio

from logbroker.clock import now_ms
from logbroker.coord.broker_channel import BrokerChannel, BrokerUnreachable
from logbroker.coord.groups.offsets_topic import OFFSETS_TOPIC
from logbroker.coord.groups.state_topic import WRITE_TIMEOUT_S, StateTopic, StateTopicError
from logbroker.coord.groups.transaction_log import (
    TRANSACTION_STATE_TOPIC,
    TransactionLogError,
    TxnLogValue,
    TxnStatus,
    parse_txn_key,
    parse_txn_value,
    txn_key,
    txn_value,
)
from logbroker.coord.groups.transaction_markers import write_markers
from logbroker.coord.peer_security import inter_broker_security
from logbroker.log_format import fields
from logbroker.protocol import REQUESTS, ErrorCode

log = logging.getLogger("logbroker.transactions")

MAX_EPOCH = 32767
MARKER_BACKOFF_S = 0.1
WRITE_TXN_MARKERS = 27


class TxnError(Exception):
    """A request the coordinator answers with `code` (message for the log)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclasses.dataclass
class TxnMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    status: TxnStatus
    partitions: set[tuple[str, int]]
    start_ms: int
    last_update_ms: int
    previous_producer_id: int = -1
    next_producer_id: int = -1
    client_transaction_version: int = 0
    lock: trio.Lock = dataclasses.field(default_factory=trio.Lock, repr=False, compare=False)

    def to_value(self) -> TxnLogValue:
        parts: dict[str, list[int]] = defaultdict(list)
        for t, p in self.partitions:
            parts[t].append(p)
        return TxnLogValue(
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            timeout_ms=self.timeout_ms,
            status=self.status,
            partitions={t: sorted(ps) for t, ps in parts.items()},
            last_update_ms=self.last_update_ms,
            start_ms=self.start_ms,
            previous_producer_id=self.previous_producer_id,
            next_producer_id=self.next_producer_id,
            client_transaction_version=self.client_transaction_version,
        )

    @classmethod
    def from_value(cls, txn_id: str, v: TxnLogValue) -> TxnMetadata:
        return cls(
            txn_id,
            v.producer_id,
            v.producer_epoch,
            v.timeout_ms,
            v.status,
            {(t, p) for t, ps in v.partitions.items() for p in ps},
            v.start_ms,
            v.last_update_ms,
            v.previous_producer_id,
            v.next_producer_id,
            v.client_transaction_version,
        )

    @property
    def v2(self) -> bool:
        """Whether the transaction follows transactions v2 (epoch bump per transaction)."""
        return self.client_transaction_version >= 2

    def changed(self, **fields) -> TxnMetadata:
        """A copy with `fields` replaced (the state to write; applied once written)."""
        fields.setdefault("last_update_ms", now_ms())
        return dataclasses.replace(self, **fields, lock=self.lock)


class TransactionCoordinator:
    def __init__(self, config, replicas, controller, groups) -> None:
        self.config = config
        self.replicas = replicas
        self.controller = controller
        self.groups = groups
        self.node_id = config.node_id
        self.state_topic = StateTopic(
            TRANSACTION_STATE_TOPIC,
            self.node_id,
            replicas,
            controller,
            config.get_int("transaction.state.log.num.partitions"),
        )
        self.max_timeout_ms = config.get_int("transaction.max.timeout.ms")
        self.cleanup_interval_s = config.get_int("transaction.abort.timed.out.transaction.cleanup.interval.ms") / 1000
        self.expiration_ms = config.get_int("transactional.id.expiration.ms")
        self.removal_interval_s = config.get_int("transaction.remove.expired.transaction.cleanup.interval.ms") / 1000
        self.txns: dict[str, TxnMetadata] = {}
        self._led = self.state_topic.loaded  # __transaction_state partitions loaded -> coordinator (leader) epoch
        self.peer_security = inter_broker_security(config)
        self._channel = BrokerChannel(self.node_id, self.peer_security)
        self._nursery: trio.Nursery | None = None
        self._completing: set[str] = set()

    # --- placement and loading ---------------------------------------------------------

    async def startup(self) -> None:
        await self.on_metadata(self.controller.image)
        self.controller.add_listener(self.on_metadata)

    async def ensure_state_topic(self) -> None:
        c = self.config
        await self.state_topic.ensure(
            c.get_int("transaction.state.log.num.partitions"),
            c.get_int("transaction.state.log.replication.factor"),
            c.get_int("transaction.state.log.min.isr"),
            c.get_int("transaction.state.log.segment.bytes"),
        )

    @property
    def num_partitions(self) -> int:
        return self.state_topic.num_partitions

    def partition_of(self, txn_id: str) -> int:
        return self.state_topic.partition_of(txn_id)

    def coordinator_node(self, txn_id: str) -> tuple[int, int]:
        """(partition, leader id or -1) of the id's `__transaction_state` partition."""
        return self.state_topic.coordinator_node(txn_id)

    def check_coordinator(self, txn_id: str) -> None:
        if not txn_id:
            raise TxnError(ErrorCode.INVALID_REQUEST, "empty transactional id")
        try:
            self.state_topic.check_loaded(self.partition_of(txn_id), f"transactional id {txn_id!r}")
        except StateTopicError as e:
            raise TxnError(e.code, str(e)) from None

    async def on_metadata(self, image, delta=None) -> None:
        lost, gained = self.state_topic.leadership_changes(image)
        if lost:
            gone = set(lost)
            dropped = [t for t in self.txns if self.partition_of(t) in gone]
            for t in dropped:
                del self.txns[t]
            log.info(
                "no longer transaction coordinator for %s partition(s) %s: %d transactional id(s) unloaded",
                TRANSACTION_STATE_TOPIC,
                sorted(lost),
                len(dropped),
                extra=fields(topic=TRANSACTION_STATE_TOPIC),
            )
        if gained:
            await self._load(gained)

    async def _load(self, epochs: dict[int, int]) -> None:
        loaded = await self.state_topic.read_all(epochs)
        found: dict[str, TxnMetadata | None] = {}
        for index, records in loaded:
            for offset, _ts, key, value in records:
                try:
                    txn_id = parse_txn_key(key or b"")
                    found[txn_id] = None if value is None else TxnMetadata.from_value(txn_id, parse_txn_value(value))
                except TransactionLogError as e:
                    log.error(
                        "%s-%d offset %d: skipping unreadable record: %s",
                        TRANSACTION_STATE_TOPIC,
                        index,
                        offset,
                        e,
                        extra=fields(topic=TRANSACTION_STATE_TOPIC, partition=index, offset=offset),
                    )
        for txn_id, meta in found.items():
            if meta is None:
                self.txns.pop(txn_id, None)
            else:
                self.txns[txn_id] = meta
        self.state_topic.mark_loaded(epochs)
        resumed = 0
        for txn_id, meta in found.items():
            if meta is not None and meta.status in (TxnStatus.PREPARE_COMMIT, TxnStatus.PREPARE_ABORT):
                self._start_completion(txn_id)
                resumed += 1
        log.info(
            "transaction coordinator for %s partition(s) %s: %d transactional id(s) loaded, "
            "%d transaction(s) being completed",
            TRANSACTION_STATE_TOPIC,
            sorted(epochs),
            sum(m is not None for m in found.values()),
            resumed,
            extra=fields(topic=TRANSACTION_STATE_TOPIC),
        )

    # --- persistence ---------------------------------------------------------------------

    async def _write(self, new: TxnMetadata) -> None:
        """Append `new` for its id and wait for the HW; then it becomes the state."""
        txn_id = new.transactional_id
        try:
            await self.state_topic.append(
                self.partition_of(txn_id),
                txn_key(txn_id),
                txn_value(new.to_value()),
                f"the state of transactional id {txn_id!r}",
            )
        except StateTopicError as e:
            raise TxnError(e.code, str(e)) from None
        self.txns[txn_id] = new

    # --- the APIs ------------------------------------------------------------------------

    def _current(self, txn_id: str, producer_id: int, producer_epoch: int) -> TxnMetadata:
        """The id's state, checked against the caller's producer id and epoch."""
        self.check_coordinator(txn_id)
        meta = self.txns.get(txn_id)
        if meta is None or meta.producer_id != producer_id:
            raise TxnError(
                ErrorCode.INVALID_PRODUCER_ID_MAPPING,
                f"transactional id {txn_id!r} is not mapped to producer id {producer_id}",
            )
        if meta.producer_epoch != producer_epoch:
            raise TxnError(
                ErrorCode.PRODUCER_FENCED,
                f"transactional id {txn_id!r}: producer epoch {producer_epoch} is not the current "
                f"epoch {meta.producer_epoch} (a newer producer was initialised, or the transaction "
                f"timed out)",
            )
        if meta.status in (TxnStatus.PREPARE_COMMIT, TxnStatus.PREPARE_ABORT):
            raise TxnError(
                ErrorCode.CONCURRENT_TRANSACTIONS,
                f"transactional id {txn_id!r}: the previous transaction is still completing",
            )
        return meta

    async def init_producer_id(
        self, txn_id: str, timeout_ms: int, producer_id: int, producer_epoch: int
    ) -> tuple[int, int]:
        self.check_coordinator(txn_id)
        if not 0 < timeout_ms <= self.max_timeout_ms:
            raise TxnError(
                ErrorCode.INVALID_TRANSACTION_TIMEOUT,
                f"transaction.timeout.ms={timeout_ms} is outside (0, transaction.max.timeout.ms={self.max_timeout_ms}]",
            )
        meta = self.txns.get(txn_id)
        if meta is None:
            pid = await self.controller.allocate_producer_id()
            meta = self.txns.setdefault(
                txn_id, TxnMetadata(txn_id, pid, -1, timeout_ms, TxnStatus.EMPTY, set(), -1, now_ms())
            )
        async with meta.lock:
            meta = self.txns.get(txn_id, meta)
            if producer_id >= 0 and (producer_id, producer_epoch) != (meta.producer_id, meta.producer_epoch):
                raise TxnError(
                    ErrorCode.PRODUCER_FENCED,
                    f"transactional id {txn_id!r}: producer {producer_id} epoch {producer_epoch} is not "
                    f"the current producer {meta.producer_id} epoch {meta.producer_epoch}",
                )
            if meta.status in (TxnStatus.PREPARE_COMMIT, TxnStatus.PREPARE_ABORT):
                raise TxnError(
                    ErrorCode.CONCURRENT_TRANSACTIONS, f"transactional id {txn_id!r}: a transaction is completing"
                )
            if meta.status == TxnStatus.ONGOING:
                # fence the old producer: abort its transaction under a higher epoch
                await self._abort_with_bump(meta, "a new producer initialised the transactional id")
                raise TxnError(
                    ErrorCode.CONCURRENT_TRANSACTIONS,
                    f"transactional id {txn_id!r}: aborting the open transaction of the fenced producer",
                )
            pid, epoch, prev = meta.producer_id, meta.producer_epoch + 1, meta.previous_producer_id
            if epoch >= MAX_EPOCH:
                prev, pid, epoch = meta.producer_id, await self.controller.allocate_producer_id(), 0
            new = meta.changed(
                producer_id=pid,
                producer_epoch=epoch,
                previous_producer_id=prev,
                timeout_ms=timeout_ms,
                status=TxnStatus.EMPTY,
                partitions=set(),
                start_ms=-1,
            )
            await self._write(new)
            log.info(
                "transactional id %r: producer id %d epoch %d",
                txn_id,
                pid,
                epoch,
                extra=fields(transactional_id=txn_id, producer_id=pid),
            )
            return pid, epoch

    async def add_partitions(
        self, txn_id: str, producer_id: int, producer_epoch: int, partitions: list[tuple[str, int]], v2: bool = False
    ) -> dict[tuple[str, int], int]:
        """Error code per partition (all NONE, or the failing ones with their code and the
        rest OPERATION_NOT_ATTEMPTED). `v2`: added by a broker for a transactions-v2 producer."""
        meta = self._current(txn_id, producer_id, producer_epoch)
        image = self.controller.image
        unknown = [(t, p) for t, p in partitions if t not in image.topics or p not in image.topics[t].partitions]
        if unknown:
            return {
                tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown else ErrorCode.OPERATION_NOT_ATTEMPTED
                for tp in partitions
            }
        async with meta.lock:
            meta = self._current(txn_id, producer_id, producer_epoch)
            wanted = set(partitions)
            version = 2 if v2 else 0
            if (
                meta.status == TxnStatus.ONGOING
                and wanted <= meta.partitions
                and meta.client_transaction_version == version
            ):
                return {tp: ErrorCode.NONE for tp in partitions}
            start = meta.start_ms if meta.status == TxnStatus.ONGOING else now_ms()
            await self._write(
                meta.changed(
                    status=TxnStatus.ONGOING,
                    partitions=meta.partitions | wanted,
                    start_ms=start,
                    client_transaction_version=version,
                )
            )
        return {tp: ErrorCode.NONE for tp in partitions}

    def verify_partitions(
        self, txn_id: str, producer_id: int, producer_epoch: int, partitions: list[tuple[str, int]]
    ) -> dict[tuple[str, int], int]:
        """KIP-890 part 1 (AddPartitionsToTxn VerifyOnly): NONE for each partition in the open
        transaction of this producer and epoch, TRANSACTION_ABORTABLE for the others."""
        meta = self._current(txn_id, producer_id, producer_epoch)
        open_parts = meta.partitions if meta.status == TxnStatus.ONGOING else set()
        return {tp: ErrorCode.NONE if tp in open_parts else ErrorCode.TRANSACTION_ABORTABLE for tp in partitions}

    async def add_offsets(self, txn_id: str, producer_id: int, producer_epoch: int, group_id: str) -> None:
        if not group_id:
            raise TxnError(ErrorCode.INVALID_GROUP_ID, "empty group id")
        await self.groups.ensure_offsets_topic()
        index = self.groups.partition_of(group_id)
        codes = await self.add_partitions(txn_id, producer_id, producer_epoch, [(OFFSETS_TOPIC, index)])
        code = codes[(OFFSETS_TOPIC, index)]
        if code != ErrorCode.NONE:
            raise TxnError(code, f"adding {OFFSETS_TOPIC}-{index} (group {group_id!r}) to the transaction failed")

    async def end_txn(
        self, txn_id: str, producer_id: int, producer_epoch: int, commit: bool, v2: bool = False
    ) -> tuple[int, int]:
        """Ends the open transaction; the producer id and epoch for the producer's next
        transaction (`v2`: EndTxn v5, bumped; otherwise unchanged)."""
        if not v2:
            return await self._end_txn_v1(txn_id, producer_id, producer_epoch, commit)
        self.check_coordinator(txn_id)
        meta = self.txns.get(txn_id)
        if meta is None:
            raise TxnError(ErrorCode.INVALID_PRODUCER_ID_MAPPING, f"transactional id {txn_id!r} is not known")
        async with meta.lock:
            meta = self.txns[txn_id]
            return await self._end_txn_v2(meta, producer_id, producer_epoch, commit)

    async def _end_txn_v1(self, txn_id: str, producer_id: int, producer_epoch: int, commit: bool) -> tuple[int, int]:
        done = TxnStatus.COMPLETE_COMMIT if commit else TxnStatus.COMPLETE_ABORT
        meta = self._current(txn_id, producer_id, producer_epoch)
        async with meta.lock:
            meta = self._current(txn_id, producer_id, producer_epoch)
            if meta.status != TxnStatus.ONGOING:
                if meta.status == done or (meta.status == TxnStatus.EMPTY and not commit):
                    return producer_id, producer_epoch  # a retry of an EndTxn that completed, or aborting nothing
                raise TxnError(
                    ErrorCode.INVALID_TXN_STATE,
                    f"transactional id {txn_id!r}: EndTxn({'commit' if commit else 'abort'}) in state "
                    f"{meta.status.kafka_name}",
                )
            await self._write(
                meta.changed(
                    status=TxnStatus.PREPARE_COMMIT if commit else TxnStatus.PREPARE_ABORT, client_transaction_version=0
                )
            )
        self._start_completion(txn_id)
        return producer_id, producer_epoch

    async def _end_txn_v2(
        self, meta: TxnMetadata, producer_id: int, producer_epoch: int, commit: bool
    ) -> tuple[int, int]:
        """Under the id's lock: EndTxn v5 (see the module doc)."""
        txn_id, what = meta.transactional_id, "commit" if commit else "abort"
        done = TxnStatus.COMPLETE_COMMIT if commit else TxnStatus.COMPLETE_ABORT
        # A retry: the state already carries the epoch this EndTxn bumped to (or, after an
        # exhausted epoch, the new producer id at epoch 0).
        retry = meta.v2 and (
            (meta.producer_id == producer_id and meta.producer_epoch == producer_epoch + 1)
            or (
                meta.previous_producer_id == producer_id
                and producer_epoch == MAX_EPOCH - 1
                and meta.producer_epoch == 0
            )
        )
        if meta.producer_id != producer_id and not retry:
            raise TxnError(
                ErrorCode.INVALID_PRODUCER_ID_MAPPING,
                f"transactional id {txn_id!r} is not mapped to producer id {producer_id}",
            )
        if meta.status in (TxnStatus.PREPARE_COMMIT, TxnStatus.PREPARE_ABORT):
            # markers in flight (checked before the epoch: an empty abort right after a commit
            # carries the new epoch and must wait, not be fenced; KAFKA-18464)
            if retry and meta.status != (TxnStatus.PREPARE_COMMIT if commit else TxnStatus.PREPARE_ABORT):
                raise TxnError(
                    ErrorCode.INVALID_TXN_STATE,
                    f"transactional id {txn_id!r}: EndTxn({what}) retried while {meta.status.kafka_name}",
                )
            raise TxnError(
                ErrorCode.CONCURRENT_TRANSACTIONS,
                f"transactional id {txn_id!r}: the previous transaction is still completing",
            )
        if retry and meta.status in (TxnStatus.COMPLETE_COMMIT, TxnStatus.COMPLETE_ABORT):
            if meta.status != done:
                raise TxnError(
                    ErrorCode.INVALID_TXN_STATE,
                    f"transactional id {txn_id!r}: EndTxn({what}) retried after {meta.status.kafka_name}",
                )
            return meta.producer_id, meta.producer_epoch
        if producer_epoch != meta.producer_epoch:
            raise TxnError(
                ErrorCode.PRODUCER_FENCED,
                f"transactional id {txn_id!r}: producer epoch {producer_epoch} is not the current epoch "
                f"{meta.producer_epoch}",
            )
        if meta.status != TxnStatus.ONGOING and commit:
            raise TxnError(
                ErrorCode.INVALID_TXN_STATE,
                f"transactional id {txn_id!r}: EndTxn(commit) with no open transaction ({meta.status.kafka_name})",
            )
        next_pid = -1
        if meta.producer_epoch >= MAX_EPOCH - 1:
            next_pid = await self.controller.allocate_producer_id()
        bumped = meta.changed(
            producer_epoch=meta.producer_epoch + 1, next_producer_id=next_pid, client_transaction_version=2
        )
        if meta.status != TxnStatus.ONGOING:
            # an empty abort: nothing to mark; the epoch moves on all the same
            new = self._next_producer(bumped.changed(status=TxnStatus.COMPLETE_ABORT, partitions=set(), start_ms=-1))
            await self._write(new)
            return new.producer_id, new.producer_epoch
        await self._write(bumped.changed(status=TxnStatus.PREPARE_COMMIT if commit else TxnStatus.PREPARE_ABORT))
        self._start_completion(txn_id)
        if next_pid >= 0:
            return next_pid, 0
        return producer_id, bumped.producer_epoch

    @staticmethod
    def _next_producer(meta: TxnMetadata) -> TxnMetadata:
        """A completed state moves to its NextProducerId (epoch 0) when one was allocated."""
        if meta.next_producer_id < 0:
            return meta
        return meta.changed(
            previous_producer_id=meta.producer_id,
            producer_id=meta.next_producer_id,
            producer_epoch=0,
            next_producer_id=-1,
        )

    async def _abort_with_bump(self, meta: TxnMetadata, reason: str) -> None:
        """Under the id's lock: abort the open transaction with epoch + 1 (fencing)."""
        epoch = min(meta.producer_epoch + 1, MAX_EPOCH - 1)
        log.info(
            "transactional id %r: aborting the transaction of producer %d epoch %d (%s)",
            meta.transactional_id,
            meta.producer_id,
            meta.producer_epoch,
            reason,
            extra=fields(transactional_id=meta.transactional_id, producer_id=meta.producer_id),
        )
        await self._write(meta.changed(status=TxnStatus.PREPARE_ABORT, producer_epoch=epoch))
        self._start_completion(meta.transactional_id)

    # --- describing ----------------------------------------------------------------------

    def describe(self, txn_id: str) -> TxnMetadata:
        """The id's state (DescribeTransactions); TxnError if not coordinated here or unknown."""
        self.check_coordinator(txn_id)
        meta = self.txns.get(txn_id)
        if meta is None or meta.producer_epoch < 0:
            raise TxnError(ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, f"transactional id {txn_id!r} is not known")
        return meta

    def list(
        self, states: set[str], producer_ids: set[int], min_duration_ms: int, id_pattern: re.Pattern | None = None
    ) -> list[TxnMetadata]:
        """The ids this broker coordinates (loaded partitions only), filtered as ListTransactions:
        by Kafka state name, by producer id, (>= 0) by transactions open at least that long,
        and by a pattern the whole transactional id matches (v2, KIP-1152)."""
        now = now_ms()
        out = []
        for txn_id, meta in sorted(self.txns.items()):
            if meta.producer_epoch < 0 or self.partition_of(txn_id) not in self._led:
                continue
            if id_pattern is not None and id_pattern.fullmatch(txn_id) is None:
                continue
            if states and meta.status.kafka_name not in states:
                continue
            if producer_ids and meta.producer_id not in producer_ids:
                continue
            if min_duration_ms >= 0 and (meta.start_ms < 0 or now - meta.start_ms < min_duration_ms):
                continue
            out.append(meta)
        return out

    # --- completing transactions: markers ------------------------------------------------

    def _start_completion(self, txn_id: str) -> None:
        if txn_id in self._completing or self._nursery is None:
            return
        self._completing.add(txn_id)
        self._nursery.start_soon(self._complete, txn_id)

    async def _complete(self, txn_id: str) -> None:
        try:
            await self._complete_inner(txn_id)
        except TxnError as e:
            log.info("transactional id %r: completion stopped: %s", txn_id, e, extra=fields(transactional_id=txn_id))
        finally:
            self._completing.discard(txn_id)

    async def _complete_inner(self, txn_id: str) -> None:
        meta = self.txns.get(txn_id)
        if meta is None or meta.status not in (TxnStatus.PREPARE_COMMIT, TxnStatus.PREPARE_ABORT):
            return
        index = self.partition_of(txn_id)
        coordinator_epoch = self._led.get(index)
        if coordinator_epoch is None:
            return
        commit = meta.status == TxnStatus.PREPARE_COMMIT
        pending = set(meta.partitions)
        attempts = 0
        while pending:
            if self._led.get(index) != coordinator_epoch or self.txns.get(txn_id) is not meta:
                return  # deposed: the new coordinator finishes it
            image = self.controller.image
            by_leader: dict[int, list[tuple[str, int]]] = defaultdict(list)
            for t, p in sorted(pending):
                topic = image.topics.get(t)
                ps = None if topic is None else topic.partitions.get(p)
                if ps is None:
                    pending.discard((t, p))  # deleted: nothing to mark
                    continue
                by_leader[ps.leader].append((t, p))
            for leader, parts in by_leader.items():
                results = await self._send_markers(leader, image, meta, commit, coordinator_epoch, parts)
                for tp, code in results.items():
                    if code == ErrorCode.NONE:
                        pending.discard(tp)
                    elif code == ErrorCode.TRANSACTION_COORDINATOR_FENCED:
                        log.warning(
                            "transactional id %r: markers refused by %s-%d: a newer coordinator wrote there; stopping",
                            txn_id,
                            *tp,
                            extra=fields(transactional_id=txn_id, topic=tp[0], partition=tp[1]),
                        )
                        return
            if pending:
                attempts += 1
                if attempts % 50 == 0:
                    log.warning(
                        "transactional id %r: %s markers still pending on %s after %d attempts",
                        txn_id,
                        "COMMIT" if commit else "ABORT",
                        sorted(pending),
                        attempts,
                        extra=fields(transactional_id=txn_id),
                    )
                await trio.sleep(MARKER_BACKOFF_S)
        async with meta.lock:
            if self.txns.get(txn_id) is not meta:
                return
            done = TxnStatus.COMPLETE_COMMIT if commit else TxnStatus.COMPLETE_ABORT
            await self._write(self._next_producer(meta.changed(status=done, partitions=set())))
        log.debug(
            "transactional id %r: producer %d epoch %d %s",
            txn_id,
            meta.producer_id,
            meta.producer_epoch,
            done.kafka_name,
            extra=fields(transactional_id=txn_id, producer_id=meta.producer_id),
        )

    async def _send_markers(
        self, leader: int, image, meta: TxnMetadata, commit: bool, coordinator_epoch: int, parts: list[tuple[str, int]]
    ) -> dict[tuple[str, int], int]:
        if leader == self.node_id:
            return await write_markers(
                self.replicas,
                self.groups,
                meta.producer_id,
                meta.producer_epoch,
                commit,
                coordinator_epoch,
                parts,
                meta.client_transaction_version,
            )
        broker = image.brokers.get(leader)
        if leader < 0 or broker is None or broker.fenced:
            return {}
        Req = REQUESTS[WRITE_TXN_MARKERS]
        topics: dict[str, list[int]] = defaultdict(list)
        for t, p in parts:
            topics[t].append(p)
        body = Req(
            markers=[
                Req.WritableTxnMarker(
                    producer_id=meta.producer_id,
                    producer_epoch=meta.producer_epoch,
                    transaction_result=commit,
                    topics=[Req.WritableTxnMarkerTopic(name=t, partition_indexes=ps) for t, ps in topics.items()],
                    coordinator_epoch=coordinator_epoch,
                    transaction_version=meta.client_transaction_version,
                )
            ]
        )
        try:
            resp = await self._channel.request(
                leader, (broker.host, broker.port), WRITE_TXN_MARKERS, 2, body, timeout=WRITE_TIMEOUT_S + 5
            )
        except BrokerUnreachable as e:
            log.info(
                "transactional id %r: %s",
                meta.transactional_id,
                e,
                extra=fields(transactional_id=meta.transactional_id, peer=leader),
            )
            return {}
        out = {}
        for m in resp.markers:
            for t in m.topics:
                for p in t.partitions:
                    out[(t.name, p.partition_index)] = p.error_code
        return out

    # --- background: timeouts ----------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus = trio.TASK_STATUS_IGNORED) -> None:
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                for txn_id, meta in list(self.txns.items()):
                    if meta.status in (TxnStatus.PREPARE_COMMIT, TxnStatus.PREPARE_ABORT):
                        self._start_completion(txn_id)
                task_status.started()
                next_removal = trio.current_time() + self.removal_interval_s
                while True:
                    await trio.sleep(min(self.cleanup_interval_s, max(0.0, next_removal - trio.current_time())))
                    await self._abort_timed_out()
                    if trio.current_time() >= next_removal:
                        next_removal = trio.current_time() + self.removal_interval_s
                        await self._remove_expired()
        finally:
            self._nursery = None
            await self._channel.aclose()

    async def _remove_expired(self) -> None:
        """Transactional ids with nothing open and no change for transactional.id.expiration.ms
        are removed: a tombstone is written for each, then it is forgotten."""
        now = now_ms()
        idle = (TxnStatus.EMPTY, TxnStatus.COMPLETE_COMMIT, TxnStatus.COMPLETE_ABORT)
        removed = 0
        for txn_id, meta in list(self.txns.items()):
            if meta.status not in idle or now - meta.last_update_ms <= self.expiration_ms:
                continue
            async with meta.lock:
                if self.txns.get(txn_id) is not meta or meta.status not in idle:
                    continue
                try:
                    await self.state_topic.append(
                        self.partition_of(txn_id), txn_key(txn_id), None, f"the removal of transactional id {txn_id!r}"
                    )
                except StateTopicError as e:
                    log.info(
                        "transactional id %r: removing it failed: %s", txn_id, e, extra=fields(transactional_id=txn_id)
                    )
                    continue
                del self.txns[txn_id]
                removed += 1
                log.info(
                    "transactional id %r (producer id %d, epoch %d) removed: unused for %d ms, over "
                    "transactional.id.expiration.ms=%d",
                    txn_id,
                    meta.producer_id,
                    meta.producer_epoch,
                    now - meta.last_update_ms,
                    self.expiration_ms,
                    extra=fields(transactional_id=txn_id, producer_id=meta.producer_id),
                )
        if removed:
            log.info("%d expired transactional id(s) removed", removed)

    async def _abort_timed_out(self) -> None:
        now = now_ms()
        for txn_id, meta in list(self.txns.items()):
            if meta.status != TxnStatus.ONGOING or meta.start_ms < 0 or now - meta.start_ms <= meta.timeout_ms:
                continue
            async with meta.lock:
                if self.txns.get(txn_id) is not meta:
                    continue
                try:
                    await self._abort_with_bump(
                        meta, f"open for {now - meta.start_ms} ms, over its timeout of {meta.timeout_ms} ms"
                    )
                except TxnError as e:
                    log.info(
                        "transactional id %r: timing out failed: %s", txn_id, e, extra=fields(transactional_id=txn_id)
                    )
