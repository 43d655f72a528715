"""The producer's sans-I/O core: drains the Rust accumulator, assigns idempotent sequence
numbers, sends Produce requests to partition leaders and completes record futures.

# Contract
- Idempotence (`enable.idempotence`, on by default; needs acks=all): before the first batch
  goes out the core gets a producer id and epoch (InitProducerId). Each batch gets its base
  sequence when it is drained, in drain order per partition, and keeps it across retries, so
  the broker drops a resent batch it already wrote (and answers with the original offset).
- Ordering: a partition's batches leave in sequence order. With `max.in.flight` > 1 several
  may be in flight; if one fails retriably, the partition is *recovering*: every batch
  returned to its queue (that one, and later ones answered OUT_OF_ORDER_SEQUENCE_NUMBER
  because of the gap) is re-sorted by sequence and the partition sends one batch at a time
  until a batch succeeds. Without idempotence, `max.in.flight` > 1 can reorder on retry
  (as in Kafka).
- Retries: retriable errors (leadership, timeouts, lost connections) go back to the queue
  after `retry.backoff.ms` (doubling up to `retry.backoff.max.ms`) and trigger a metadata
  refresh; up to `retries` attempts within `delivery.timeout.ms` of the batch's creation.
  A batch still unsent at its delivery timeout fails with KafkaTimeoutError; one in flight
  is not expired (its fate is decided by the broker's answer).
- acks=0: a batch completes (offset -1) when its request is written.
- Requests: per leader, at most `max.in.flight.requests.per.connection` Produce requests in
  flight; a request carries at most one batch per partition and at most
  `max.request.size` bytes.
"""

from __future__ import annotations

import collections
from typing import Any

from logbroker import _core
from logbroker.client.core import ClientCore
from logbroker.client.errors import (
    BrokerResponseError,
    ClientClosedError,
    ConfigError,
    KafkaError,
    KafkaTimeoutError,
    SaslAuthenticationError,
    error_class,
    error_for,
)
from logbroker.client.network import Pending, Versioned
from logbroker.client.transactions import TransactionManager
from logbroker.protocol import ErrorCode
from logbroker.protocol.messages.init_producer_id_request import _InitProducerIdRequest
from logbroker.protocol.messages.produce_request import _ProduceRequest

__all__ = ["ProducerCore"]

PRODUCE = 0
INIT_PRODUCER_ID = 22
_LEADERSHIP = {
    ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.UNKNOWN_LEADER_EPOCH,
    ErrorCode.KAFKA_STORAGE_ERROR,
}


class _PartitionState:
    __slots__ = ("in_flight", "next_sequence", "queue", "recovering")

    def __init__(self) -> None:
        self.queue: collections.deque[_core.ProducerBatch] = collections.deque()
        self.in_flight: list[_core.ProducerBatch] = []
        self.next_sequence = 0
        self.recovering = False


class ProducerCore(ClientCore):
    """The producer state machine (see the module docstring)."""

    def __init__(self, config: dict[str, Any], waker: _core.Waker | None = None) -> None:
        super().__init__(config, waker)
        self.acks: int = config["acks"]
        self.idempotent = bool(config["enable.idempotence"])
        if self.idempotent and self.acks != -1:
            raise ConfigError("enable.idempotence requires acks=all; set enable.idempotence=False for acks=0/1")
        self.max_in_flight = max(1, config["max.in.flight.requests.per.connection"])
        if self.idempotent and self.max_in_flight > 5:
            raise ConfigError("max.in.flight.requests.per.connection must be at most 5 with idempotence")
        self.acc = _core.RecordAccumulator(
            self.waker,
            config["batch.size"],
            config["linger.ms"],
            config["buffer.memory"],
            config["max.request.size"],
            config["compression.type"],
        )
        self.producer_id = -1
        self.producer_epoch = -1
        self._pid_pending = False
        self._pid_retry_at = 0.0
        self.fatal: BaseException | None = None
        self.parts: dict[tuple[str, int], _PartitionState] = {}
        self._node_requests: collections.Counter[Any] = collections.Counter()
        self.delivery_timeout = config["delivery.timeout.ms"]
        self.retries = config["retries"]
        self.backoff = config["retry.backoff.ms"] / 1000
        self.backoff_max = config["retry.backoff.max.ms"] / 1000
        self.request_timeout_ms = config["request.timeout.ms"]
        self._next_retry: float | None = None
        self._idle_waiters: list[Pending[Any]] = []
        self.txn = None
        if config["transactional.id"] is not None:
            self.txn = TransactionManager(self, config["transactional.id"], config["transaction.timeout.ms"])

    # -- metadata -----------------------------------------------------------------------

    def on_metadata_update(self) -> None:
        for name, t in self.metadata.topics.items():
            if t.error_code == 0 and t.partitions:
                self.acc.set_partitions(name, len(t.partitions))

    def on_auth_error(self, err: SaslAuthenticationError) -> None:
        """A broker refused our SASL credentials: besides the metadata waiters (send() waiting
        for a topic), the records not sent yet fail with it rather than wait for
        delivery.timeout.ms (those in flight fail with their requests)."""
        super().on_auth_error(err)
        self.fail_unsent(err, None)

    def wait_for_topic(self, topic: str, timeout: float) -> Pending[Any]:
        self.want_topics({topic})
        return self.wait_metadata(
            lambda: self.acc.partitions(topic) is not None,
            timeout,
            f"topic {topic!r} (max.block.ms={timeout * 1000:.0f})",
        )

    # -- the loop -----------------------------------------------------------------------

    def set_producer(self, producer_id: int, epoch: int) -> None:
        """A new producer id/epoch (transactions: InitProducerId): sequences restart at 0."""
        self.producer_id, self.producer_epoch = producer_id, epoch
        self.parts = {tp: st for tp, st in self.parts.items() if st.queue or st.in_flight}
        for st in self.parts.values():
            st.next_sequence = 0
        self.wake()

    def fail_unsent(self, err: BaseException, only: set[tuple[str, int]] | None) -> None:
        """Fail the batches not yet sent (of the partitions in `only`, or all, including those
        still in the accumulator): an aborted transaction, a partition that could not join it."""
        if only is None:
            self.acc.begin_flush()
            for b in self.acc.drain():
                st = self.parts.setdefault((b.topic, b.partition), _PartitionState())
                st.queue.append(b)
        for tp, st in list(self.parts.items()):
            if only is not None and tp not in only:
                continue
            unsent = [b for b in st.queue if b.base_sequence < 0]
            st.queue = collections.deque(b for b in st.queue if b.base_sequence >= 0)
            for b in unsent:
                self._complete(b, error=err)
        self.wake()

    def _tick(self, now: float) -> None:
        if self.idempotent and self.producer_id < 0 and self.txn is None:
            self._maybe_init_producer_id(now)
        self._next_retry = None
        for b in self.acc.drain():
            st = self.parts.get((b.topic, b.partition))
            if st is None:
                st = self.parts[(b.topic, b.partition)] = _PartitionState()
            st.queue.append(b)
        self._expire(now)
        if self.fatal is not None:
            self._fail_all(self.fatal)
            return
        if self.idempotent and self.producer_id < 0:
            return
        self._send(now)
        if self._idle_waiters and not self._busy() and self.acc.incomplete == 0:
            waiters, self._idle_waiters = self._idle_waiters, []
            for w in waiters:
                w.resolve(None)

    def _deadline(self) -> float | None:
        ds = []
        ready = self.acc.next_ready_ms()
        if ready is not None:
            import time

            ds.append(self.now + max(0.0, (ready - time.time() * 1000) / 1000))
        if self._next_retry is not None:
            ds.append(self._next_retry)
        if any(st.queue for st in self.parts.values()):
            # Queued batches expire at their delivery timeout.
            ds.append(self.now + 1.0)
        if self.idempotent and self.producer_id < 0 and not self._pid_pending:
            ds.append(max(self.now, self._pid_retry_at))
        return min(ds) if ds else None

    def wait_idle(self) -> Pending[Any]:
        """Resolves when nothing is queued or in flight (the aio flush)."""
        p: Pending[Any] = Pending()
        if not self._busy() and self.acc.incomplete == 0:
            p.resolve(None)
        else:
            self._idle_waiters.append(p)
        return p

    def _maybe_init_producer_id(self, now: float) -> None:
        if self._pid_pending or now < self._pid_retry_at:
            return
        self._pid_pending = True
        req = _InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000)
        self.net.request(self.net.any_node(), req).add_callback(self._on_producer_id)

    def _on_producer_id(self, p: Pending[Any]) -> None:
        self._pid_pending = False
        err = p.error
        if err is None:
            resp = p._value
            if resp.error_code == 0:
                self.producer_id, self.producer_epoch = resp.producer_id, resp.producer_epoch
                self.wake()
                return
            err = error_for(resp.error_code, None, "InitProducerId")
            if not err.retriable and resp.error_code != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                self.fatal = err
                self.wake()
                return
        self._pid_retry_at = self.now + self.backoff
        self.call_at(self._pid_retry_at, lambda: None)

    def _expire(self, now: float) -> None:
        import time

        wall = time.time() * 1000
        for tp, st in list(self.parts.items()):
            while st.queue and wall - st.queue[0].created_ms >= self.delivery_timeout and not st.recovering:
                b = st.queue.popleft()
                self._complete(
                    b,
                    error=KafkaTimeoutError(
                        f"delivery.timeout.ms={self.delivery_timeout} expired for {b.record_count} record(s) of "
                        f"{tp[0]}-{tp[1]} after {b.attempts} attempt(s)"
                    ),
                )
            self._gc(tp, st)

    def _gc(self, tp: tuple[str, int], st: _PartitionState) -> None:
        if not st.queue and not st.in_flight and not self.idempotent:
            del self.parts[tp]
        elif not st.queue and not st.in_flight and self.idempotent:
            # Keep the sequence counter; only drop from the 'busy' view.
            pass

    def _busy(self) -> bool:
        return any(st.queue or st.in_flight for st in self.parts.values())

    def _send(self, now: float) -> None:
        per_node: dict[Any, list[tuple[tuple[str, int], _PartitionState]]] = {}
        for tp, st in self.parts.items():
            if not st.queue:
                continue
            head = st.queue[0]
            if head.retry_at > now:
                self._next_retry = head.retry_at if self._next_retry is None else min(self._next_retry, head.retry_at)
                continue
            if st.recovering and st.in_flight:
                continue
            if self.max_in_flight == 1 and st.in_flight:
                continue
            if self.txn is not None and not self.txn.may_send(tp):
                continue
            leader = self.metadata.leader(*tp)
            if leader < 0:
                self.want_topics({tp[0]})
                self.request_metadata_update()
                continue
            per_node.setdefault(leader, []).append((tp, st))
        for node, parts in per_node.items():
            while parts and self._node_requests[node] < self.max_in_flight:
                batches: list[_core.ProducerBatch] = []
                size = 0
                rest = []
                for tp, st in parts:
                    if not st.queue or (st.recovering and st.in_flight) or (self.max_in_flight == 1 and st.in_flight):
                        continue
                    b = st.queue[0]
                    if batches and size + b.size > self.config["max.request.size"]:
                        rest.append((tp, st))
                        continue
                    st.queue.popleft()
                    batches.append(b)
                    size += b.size
                    if st.queue:
                        rest.append((tp, st))
                if not batches:
                    break
                self._send_request(node, batches)
                parts = rest

    def _send_request(self, node: Any, batches: list[_core.ProducerBatch]) -> None:
        req_cls = _ProduceRequest
        topics: dict[str, list[Any]] = {}
        for b in batches:
            if self.idempotent and b.base_sequence < 0:
                st = self.parts[(b.topic, b.partition)]
                b.base_sequence = st.next_sequence
                st.next_sequence = (st.next_sequence + b.record_count) & 0x7FFFFFFF
            records = b.seal(
                self.producer_id, self.producer_epoch, b.base_sequence if self.idempotent else -1, self.txn is not None
            )
            topics.setdefault(b.topic, []).append(req_cls.PartitionProduceData(index=b.partition, records=records))
            b.attempts += 1
            b.in_flight = True
            self.parts[(b.topic, b.partition)].in_flight.append(b)
        req: Any = req_cls(
            transactional_id=self.txn.txn_id if self.txn is not None else None,
            acks=self.acks,
            timeout_ms=self.request_timeout_ms,
            topic_data=[req_cls.TopicProduceData(name=t, partition_data=ps) for t, ps in topics.items()],
        )
        if self.txn is not None:  # Produce v12+ means transactions v2
            produce = req
            req = Versioned(PRODUCE, lambda _v: produce, max_version=11)
        self._node_requests[node] += 1
        p = self.net.request(node, req, expect_response=self.acks != 0)
        p.add_callback(lambda q: self._on_produce(node, batches, q))

    def _on_produce(self, node: Any, batches: list[_core.ProducerBatch], p: Pending[Any]) -> None:
        self._node_requests[node] -= 1
        if p.error is not None:
            err = p.error
            retriable = isinstance(err, KafkaError) and err.retriable
            for b in batches:
                self._failed(b, err if isinstance(err, KafkaError) else KafkaError(str(err)), retriable)
            self.request_metadata_update()
            self.wake()
            return
        if self.acks == 0:
            for b in batches:
                self._done(b, -1, -1)
            self.wake()
            return
        results: dict[tuple[str, int], Any] = {}
        for t in p._value.responses:
            for pr in t.partition_responses:
                results[(t.name, pr.index)] = pr
        for b in batches:
            pr = results.get((b.topic, b.partition))
            if pr is None:
                self._failed(
                    b, KafkaError(f"produce response for node {node} is missing {b.topic}-{b.partition}"), True
                )
                continue
            code = pr.error_code
            if code == 0:
                self._done(b, pr.base_offset, pr.log_append_time_ms)
            elif code == ErrorCode.DUPLICATE_SEQUENCE_NUMBER:
                self._done(b, -1, -1)
            else:
                err = error_for(code, pr.error_message, f"produce to {b.topic}-{b.partition}")
                if code in _LEADERSHIP:
                    self.request_metadata_update()
                retriable = err.retriable
                if code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER and self.parts[(b.topic, b.partition)].recovering:
                    retriable = True
                self._failed(b, err, retriable)
        self.wake()

    def _done(self, b: _core.ProducerBatch, base_offset: int, log_append_time: int) -> None:
        st = self.parts.get((b.topic, b.partition))
        if st is not None:
            if b in st.in_flight:
                st.in_flight.remove(b)
            # A success means the broker's sequence caught up to this batch.
            st.recovering = False
        self._complete(b, base_offset, log_append_time)
        if st is not None:
            self._gc((b.topic, b.partition), st)

    def _failed(self, b: _core.ProducerBatch, err: BaseException, retriable: bool) -> None:
        tp = (b.topic, b.partition)
        st = self.parts[tp]
        if b in st.in_flight:
            st.in_flight.remove(b)
        b.in_flight = False
        import time

        expired = time.time() * 1000 - b.created_ms >= self.delivery_timeout
        if retriable and b.attempts <= self.retries and not expired and not self.closed:
            backoff = min(self.backoff_max, self.backoff * (2 ** max(0, b.attempts - 1)))
            b.retry_at = self.now + backoff
            self.call_at(b.retry_at, lambda: None)
            st.queue.append(b)
            if self.idempotent:
                st.recovering = True
                st.queue = collections.deque(sorted(st.queue, key=lambda x: (x.base_sequence < 0, x.base_sequence)))
            else:
                st.queue.rotate(1)  # back to the front
            return
        if not retriable and isinstance(err, BrokerResponseError) and err.code == ErrorCode.MESSAGE_TOO_LARGE:
            err = error_class(ErrorCode.MESSAGE_TOO_LARGE)(
                f"{err} ({b.record_count} record(s), {b.size} bytes; see batch.size / max.request.size)"
            )
        if expired and retriable:
            err = KafkaTimeoutError(
                f"delivery.timeout.ms={self.delivery_timeout} expired for {b.record_count} record(s) of "
                f"{tp[0]}-{tp[1]} after {b.attempts} attempt(s); last error: {err}"
            )
        self._complete(b, error=err)
        self._gc(tp, st)

    def _complete(
        self,
        b: _core.ProducerBatch,
        base_offset: int = -1,
        log_append_time: int = -1,
        error: BaseException | None = None,
    ) -> None:
        if error is not None and self.txn is not None:
            self.txn.batch_failed(error)
        self.acc.complete(b, base_offset, log_append_time, error)

    def _fail_all(self, err: BaseException) -> None:
        for st in list(self.parts.values()):
            for b in list(st.queue):
                self._complete(b, error=err)
            st.queue.clear()
        for b in self.acc.drain():
            self._complete(b, error=err)

    def close(self) -> None:
        self.acc.close()
        err = ClientClosedError("the producer was closed before the record was sent")
        for st in list(self.parts.values()):
            for b in list(st.queue) + list(st.in_flight):
                self._complete(b, error=err)
        for b in self.acc.drain():
            self._complete(b, error=err)
        for w in self._idle_waiters:
            w.resolve(None)
        super().close()
