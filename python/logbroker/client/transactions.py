"""The producer's transactions (`transactional.id`): the client side of Kafka's exactly-once
protocol (transactions v1), sans-I/O, run by the producer's core in its I/O loop.

# States (Kafka's TransactionManager)
    uninitialized --init--> ready --begin--> in_transaction --commit/abort--> ready
    any error a transaction can survive -> abortable_error (only abort_transaction, then ready)
    PRODUCER_FENCED, INVALID_PRODUCER_EPOCH, TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    UNSUPPORTED_VERSION -> fatal (every later call raises it; close the producer)

# What each call does
- versions: the transactions-v1 forms (AddPartitionsToTxn <= 3, AddOffsetsToTxn <= 3,
  EndTxn <= 4, TxnOffsetCommit <= 3, Produce <= 11); a broker that finalised transactions v2
  (Kafka 4) keeps v1 semantics for a client using them.
- init: finds the transaction coordinator (FindCoordinator, key type 1), then
  InitProducerId(transactional.id, transaction.timeout.ms): a producer id and a bumped
  epoch that fences any older producer with the id (whose open transaction the coordinator
  aborts first: CONCURRENT_TRANSACTIONS, retried). Sequence numbers restart at 0.
- send in a transaction: a partition's batches wait until AddPartitionsToTxn has added the
  partition (one request for every partition new since the last); batches carry the
  transactional bit and go out with Produce v11 at most (v12+ is transactions v2).
- send_offsets: AddOffsetsToTxn(group), then TxnOffsetCommit to the group's coordinator
  (with the consumer's generation and member id, if given).
- commit: sends what is queued and waits for every batch; if any batch of the transaction
  failed, the transaction must be aborted (abortable error). Then EndTxn(commit).
- abort: fails batches not yet sent (their partitions may not be added), waits for those in
  flight, then EndTxn(abort).
Retriable answers (CONCURRENT_TRANSACTIONS, COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR,
COORDINATOR_NOT_AVAILABLE, lost connections) are retried after `retry.backoff.ms`,
rediscovering the coordinator where needed, until the caller's timeout.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from logbroker.client.errors import KafkaError, error_for
from logbroker.client.group import coordinator_from_response, find_coordinator_request
from logbroker.client.network import Pending, Versioned
from logbroker.protocol import ErrorCode
from logbroker.protocol.messages.add_offsets_to_txn_request import _AddOffsetsToTxnRequest
from logbroker.protocol.messages.add_partitions_to_txn_request import _AddPartitionsToTxnRequest
from logbroker.protocol.messages.end_txn_request import _EndTxnRequest
from logbroker.protocol.messages.init_producer_id_request import _InitProducerIdRequest
from logbroker.protocol.messages.txn_offset_commit_request import _TxnOffsetCommitRequest


class ProducerCore(Protocol):
    """What a transaction manager uses of its producer (client/sender.py's ProducerCore,
    which owns it)."""

    net: Any
    config: dict[str, Any]
    acc: Any  # the producer's _core.RecordAccumulator
    producer_id: int
    producer_epoch: int
    request_timeout_ms: int
    now: float  # the client's clock (seconds), as of the current step

    def call_at(self, when: float, fn: Callable[[], object]) -> None: ...

    def set_producer(self, producer_id: int, epoch: int) -> None: ...

    def fail_unsent(self, err: BaseException, only: set[tuple[str, int]] | None) -> None: ...

    def wake(self) -> None: ...

    def wait_idle(self) -> Pending[Any]: ...


__all__ = ["TransactionManager", "TransactionStateError"]

_RETRY = {
    ErrorCode.CONCURRENT_TRANSACTIONS,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.NOT_COORDINATOR,
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
}
_REFIND = {ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE}
_FATAL = {
    ErrorCode.PRODUCER_FENCED,
    ErrorCode.INVALID_PRODUCER_EPOCH,
    ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    ErrorCode.UNSUPPORTED_VERSION,
    ErrorCode.INVALID_PRODUCER_ID_MAPPING,
    ErrorCode.INVALID_TRANSACTION_TIMEOUT,
}


class TransactionStateError(KafkaError):
    """A transactional call in a state that does not allow it (e.g. send before begin)."""


class TransactionManager:
    def __init__(self, core: ProducerCore, transactional_id: str, timeout_ms: int) -> None:
        self.core = core
        self.txn_id = transactional_id
        self.timeout_ms = timeout_ms
        self.state = "uninitialized"
        self.error: BaseException | None = None  # the abortable or fatal error
        self.coordinator: tuple[str, int] | None = None
        self.added: set[tuple[str, int]] = set()
        self.to_add: set[tuple[str, int]] = set()
        self._adding = False
        self.offsets_added = False
        self.backoff = core.config["retry.backoff.ms"] / 1000

    # -- state --------------------------------------------------------------------------

    def _refusal(self, what: str) -> BaseException:
        """Why `what` cannot run now: the fatal error once fatal, else the state."""
        if self.state == "fatal" and self.error is not None:
            return self.error
        return TransactionStateError(f"{what} in state {self.state}")

    def check_send(self) -> None:
        """Raised by send() outside a transaction."""
        if self.state == "fatal":
            raise self.error  # type: ignore[misc]
        if self.state == "abortable_error":
            raise TransactionStateError(f"the transaction must be aborted: {self.error}")
        if self.state != "in_transaction":
            raise TransactionStateError(
                f"send() of transactional id {self.txn_id!r} needs begin_transaction() (state {self.state})"
            )

    def begin(self) -> None:
        if self.state == "fatal":
            raise self.error  # type: ignore[misc]
        if self.state != "ready":
            raise TransactionStateError(
                f"begin_transaction() in state {self.state} (call init_transactions() first, and end each transaction)"
            )
        self.state = "in_transaction"
        self.added.clear()
        self.to_add.clear()
        self.offsets_added = False
        self.error = None

    def resume(self, producer_id: int, producer_epoch: int) -> None:
        """Take over an open transaction another producer instance began with this id
        (producer id and epoch from it), to commit or abort it: what a two-phase writer
        (the Spark sink's driver) does with its tasks' transactions."""
        if self.state not in ("uninitialized", "ready"):
            raise TransactionStateError(f"resume in state {self.state}")
        self.core.set_producer(producer_id, producer_epoch)
        self.state = "in_transaction"
        self.added.clear()
        self.offsets_added = True  # EndTxn must be sent even though this instance added nothing
        self.error = None

    def _fail(self, err: BaseException) -> None:
        code = getattr(err, "code", None)
        if code in _FATAL:
            self.state, self.error = "fatal", err
        elif self.state != "fatal":
            self.state, self.error = "abortable_error", err

    def batch_failed(self, err: BaseException) -> None:
        """A batch of the open transaction failed: only an abort can follow."""
        if self.state in ("in_transaction", "committing"):
            self._fail(err)

    def may_send(self, tp: tuple[str, int]) -> bool:
        """Whether a batch of `tp` may go out now (its partition is in the transaction)."""
        if tp in self.added:
            return True
        if self.state in ("in_transaction", "committing"):
            self.to_add.add(tp)
            self._maybe_add_partitions()
        return False

    # -- coordinator --------------------------------------------------------------------

    def _with_coordinator(self, fn: Callable[[Any], Pending[Any]]) -> Pending[Any]:
        if self.coordinator is not None:
            return fn(self.coordinator)
        req = find_coordinator_request(self.txn_id, 1)
        out: Pending[Any] = Pending()

        def found(p: Pending[Any]) -> None:
            if p.error is not None:
                out.fail(p.error)
                return
            try:
                key = coordinator_from_response(
                    self.core.net, p._value, "txn-coordinator", f"transactional id {self.txn_id!r}"
                )
            except KafkaError as e:
                out.fail(e)
                return
            self.coordinator = key
            fn(key).add_callback(lambda q: out.fail(q.error) if q.error is not None else out.resolve(q._value))

        self.core.net.request(self.core.net.any_node(), req).add_callback(found)
        return out

    def _coordinator_lost(self) -> None:
        if self.coordinator is not None:
            conn = self.core.net.conns.get(self.coordinator)
            self.coordinator = None
            if conn is not None:
                conn.close()

    def _call(
        self,
        what: str,
        send: Callable[[Any], Pending[Any]],
        code_of: Callable[[Any], int],
        deadline: float,
        result: Pending[Any],
    ) -> None:
        """Send to the coordinator until a non-retriable answer or `deadline` (core clock)."""

        def retry(err: BaseException) -> None:
            if self.core.now + self.backoff >= deadline:
                result.fail(err)
                return
            self.core.call_at(self.core.now + self.backoff, lambda: self._call(what, send, code_of, deadline, result))

        def done(p: Pending[Any]) -> None:
            if p.error is not None:
                err = p.error
                if isinstance(err, KafkaError) and err.retriable:
                    self._coordinator_lost()
                    retry(err)
                else:
                    result.fail(err)
                return
            code = code_of(p._value)
            if code == 0:
                result.resolve(p._value)
                return
            err = error_for(code, None, f"{what} for transactional id {self.txn_id!r}")
            if code in _REFIND:
                self._coordinator_lost()
            if code in _RETRY:
                retry(err)
            else:
                result.fail(err)

        self._with_coordinator(send).add_callback(done)

    # -- the calls ----------------------------------------------------------------------

    def init(self, timeout: float) -> Pending[Any]:
        out: Pending[Any] = Pending()
        if self.state not in ("uninitialized", "ready"):
            out.fail(self._refusal("init_transactions()"))
            return out
        self.state = "initializing"
        req = _InitProducerIdRequest(
            transactional_id=self.txn_id, transaction_timeout_ms=self.timeout_ms, producer_id=-1, producer_epoch=-1
        )
        inner: Pending[Any] = Pending()

        def done(p: Pending[Any]) -> None:
            if p.error is not None:
                self._fail(p.error)
                if self.state != "fatal":
                    self.state = "uninitialized"
                out.fail(p.error)
                return
            r = p._value
            self.core.set_producer(r.producer_id, r.producer_epoch)
            self.state = "ready"
            out.resolve(None)

        inner.add_callback(done)
        self._call(
            "InitProducerId",
            lambda node: self.core.net.request(node, req),
            lambda r: r.error_code,
            self.core.now + timeout,
            inner,
        )
        return out

    def _maybe_add_partitions(self) -> None:
        if self._adding or not self.to_add:
            return
        batch, self.to_add = sorted(self.to_add), set()
        self._adding = True
        topics: dict[str, list[int]] = {}
        for t, p in batch:
            topics.setdefault(t, []).append(p)
        cls = _AddPartitionsToTxnRequest
        req = Versioned(
            24,
            lambda v: cls(
                v3_and_below_transactional_id=self.txn_id,
                v3_and_below_producer_id=self.core.producer_id,
                v3_and_below_producer_epoch=self.core.producer_epoch,
                v3_and_below_topics=[cls.AddPartitionsToTxnTopic(name=t, partitions=ps) for t, ps in topics.items()],
            ),
            max_version=3,
        )

        def code_of(r: Any) -> int:
            codes = [p.partition_error_code for t in r.results_by_topic_v3_and_below for p in t.results_by_partition]
            bad = [c for c in codes if c not in (0, ErrorCode.OPERATION_NOT_ATTEMPTED)]
            return bad[0] if bad else 0

        result: Pending[Any] = Pending()

        def done(p: Pending[Any]) -> None:
            self._adding = False
            if p.error is None:
                self.added.update(batch)
            else:
                self._fail(p.error)
                self.core.fail_unsent(p.error, set(batch))
            self.core.wake()
            self._maybe_add_partitions()

        result.add_callback(done)
        self._call(
            "AddPartitionsToTxn",
            lambda node: self.core.net.request(node, req),
            code_of,
            self.core.now + self.core.request_timeout_ms / 1000 * 4,
            result,
        )

    def send_offsets(
        self,
        offsets: dict[tuple[str, int], int],
        group_id: str,
        generation_id: int,
        member_id: str,
        instance_id: str | None,
        timeout: float,
    ) -> Pending[Any]:
        out: Pending[Any] = Pending()
        if self.state != "in_transaction":
            out.fail(self._refusal("send_offsets_to_transaction()"))
            return out
        deadline = self.core.now + timeout
        add_body = _AddOffsetsToTxnRequest(
            transactional_id=self.txn_id,
            producer_id=self.core.producer_id,
            producer_epoch=self.core.producer_epoch,
            group_id=group_id,
        )
        add = Versioned(25, lambda _v: add_body, max_version=3)
        added: Pending[Any] = Pending()

        def commit_offsets(p: Pending[Any]) -> None:
            if p.error is not None:
                self._fail(p.error)
                out.fail(p.error)
                return
            self.offsets_added = True
            self._txn_offset_commit(offsets, group_id, generation_id, member_id, instance_id, deadline, out)

        added.add_callback(commit_offsets)
        self._call(
            "AddOffsetsToTxn", lambda node: self.core.net.request(node, add), lambda r: r.error_code, deadline, added
        )
        return out

    def _txn_offset_commit(
        self,
        offsets: dict[tuple[str, int], int],
        group_id: str,
        generation_id: int,
        member_id: str,
        instance_id: str | None,
        deadline: float,
        out: Pending[Any],
    ) -> None:
        cls = _TxnOffsetCommitRequest
        topics: dict[str, list[Any]] = {}
        for (t, p), off in sorted(offsets.items()):
            topics.setdefault(t, []).append(
                cls.TxnOffsetCommitRequestPartition(
                    partition_index=p, committed_offset=off, committed_leader_epoch=-1, committed_metadata=""
                )
            )
        req = Versioned(
            28,
            lambda v: cls(
                transactional_id=self.txn_id,
                group_id=group_id,
                producer_id=self.core.producer_id,
                producer_epoch=self.core.producer_epoch,
                generation_id_or_member_epoch=generation_id if v >= 3 else -1,
                member_id=member_id if v >= 3 else "",
                group_instance_id=instance_id if v >= 3 else None,
                topics=[cls.TxnOffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in topics.items()],
            ),
            max_version=3,
        )

        def retry_or_fail(err: BaseException) -> None:
            if self.core.now + self.backoff < deadline and getattr(err, "retriable", False):
                self.core.call_at(
                    self.core.now + self.backoff,
                    lambda: self._txn_offset_commit(
                        offsets, group_id, generation_id, member_id, instance_id, deadline, out
                    ),
                )
            else:
                self._fail(err)
                out.fail(err)

        def committed(p: Pending[Any]) -> None:
            if p.error is not None:
                retry_or_fail(p.error)
                return
            codes = [q.error_code for t in p._value.topics for q in t.partitions]
            bad = [c for c in codes if c]
            if not bad:
                out.resolve(None)
                return
            retry_or_fail(error_for(bad[0], None, f"TxnOffsetCommit of group {group_id!r}"))

        def found(p: Pending[Any]) -> None:
            if p.error is not None:
                retry_or_fail(p.error)
                return
            try:
                key = coordinator_from_response(self.core.net, p._value, "coordinator", f"group {group_id!r}")
            except KafkaError as e:
                retry_or_fail(e)
                return
            self.core.net.request(key, req).add_callback(committed)

        self.core.net.request(self.core.net.any_node(), find_coordinator_request(group_id, 0)).add_callback(found)

    def end(self, commit: bool, timeout: float) -> Pending[Any]:
        """Commit or abort (see the module doc); resolves once the coordinator accepted it."""
        out: Pending[Any] = Pending()
        word = "commit" if commit else "abort"
        if self.state == "fatal":
            out.fail(self.error)  # type: ignore[arg-type]
            return out
        if commit and self.state == "abortable_error":
            out.fail(TransactionStateError(f"cannot commit: the transaction must be aborted ({self.error})"))
            return out
        if self.state not in ("in_transaction", "abortable_error"):
            out.fail(TransactionStateError(f"{word}_transaction() in state {self.state}"))
            return out
        self.state = "committing" if commit else "aborting"
        deadline = self.core.now + timeout
        if not commit:
            self.core.fail_unsent(TransactionStateError("the transaction was aborted"), None)
        self.core.acc.begin_flush()

        def flushed(_: Pending[Any]) -> None:
            if commit and self.state != "committing":  # a batch failed meanwhile
                self.state = "abortable_error"
                out.fail(TransactionStateError(f"cannot commit: a record of the transaction failed ({self.error})"))
                return
            if not self.added and not self.offsets_added:
                self.state = "ready"
                out.resolve(None)
                return
            body = _EndTxnRequest(
                transactional_id=self.txn_id,
                producer_id=self.core.producer_id,
                producer_epoch=self.core.producer_epoch,
                committed=commit,
            )
            # v5+ is transactions v2: the coordinator would bump the epoch at each commit
            req = Versioned(26, lambda _v: body, max_version=4)
            ended: Pending[Any] = Pending()

            def done(p: Pending[Any]) -> None:
                if p.error is not None:
                    self._fail(p.error)
                    out.fail(p.error)
                    return
                self.state = "ready"
                self.added.clear()
                out.resolve(None)

            ended.add_callback(done)
            self._call("EndTxn", lambda node: self.core.net.request(node, req), lambda r: r.error_code, deadline, ended)

        self.core.wait_idle().add_callback(flushed)
        return out
