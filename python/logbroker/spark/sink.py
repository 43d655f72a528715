"""The `logbroker` sink: batch (`df.write.format("logbroker")`) and streaming
(`writeStream.format("logbroker")`), taking the columns of Spark's Kafka sink:
value (required, string or binary), key, headers (array<struct<key string, value
binary>>), topic (or the `topic` option), partition. Rows go through logbroker's
idempotent Producer on each executor task; by default delivery is at-least-once, as with
Spark's Kafka sink (a retried task writes its rows again).

Exactly once (`transactional.id.prefix`): each task writes its rows in a transaction of
transactional id `<prefix>-<task partition>` and leaves it open; the driver commits every
task's transaction once all tasks succeeded (resuming each by producer id and epoch, as
Flink's Kafka sink does), or aborts them. A retried or speculative task attempt re-initialises
the same id, which fences the earlier attempt and aborts its transaction, so a failed attempt
leaves nothing visible to read_committed consumers. In a stream each task also commits, in
its transaction, the micro-batch id as the offset of group `<prefix>-<task partition>` on the
sink topic's partition 0 (the `topic` option is then required); a micro-batch replayed after
a driver crash finds its own commit there and writes nothing again, so a batch whose
transactions the driver committed before the crash is not written twice. Consumers must read
with isolation.level=read_committed. The transactions must be committed within
`kafka.transaction.timeout.ms` (60 s by default) of the task writing them, else the broker
aborts them.

With `value.format=registry` (and `key.format=registry`) a struct `value` (`key`) column is
written as Avro in Confluent's framing, its writer schema made from the column's type and
registered under `<topic>-value` (`value.subject`) on the driver (logbroker/spark/registry.py),
the rows encoded in Rust a chunk at a time."""

from __future__ import annotations

from logbroker.spark.extra import require_spark_extra

require_spark_extra()

from pyspark.sql.datasource import DataSourceStreamWriter, DataSourceWriter, WriterCommitMessage  # noqa: E402


class SinkCommit(WriterCommitMessage):
    def __init__(
        self, rows: int, transactional_id: str | None = None, producer_id: int = -1, producer_epoch: int = -1
    ) -> None:
        self.rows = rows
        self.transactional_id = transactional_id  # None: nothing to commit (or not transactional)
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch


from logbroker.spark.registry import SinkColumn  # noqa: E402
from logbroker.spark.security import SECURITY_PREFIXES, connection_settings  # noqa: E402

ENCODE_CHUNK = 4096  # rows encoded per call into Rust (registry columns)


def _bytes(v) -> bytes | None:
    if v is None:
        return None
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v)
    return str(v).encode()


class _Writing:
    def __init__(self, options: dict, schema) -> None:
        o = {k.lower(): v for k, v in options.items()}
        self.bootstrap = o.get("bootstrap.servers") or o.get("kafka.bootstrap.servers")
        if not self.bootstrap:
            raise ValueError("option bootstrap.servers (or kafka.bootstrap.servers) is required")
        self.topic = o.get("topic")
        self.producer_config = {
            k[len("kafka.") :]: v for k, v in o.items() if k.startswith("kafka.") and k != "kafka.bootstrap.servers"
        }
        # delegationToken=true: a token made here, on the driver; the executors get it in place of
        # the user's security settings (spark/security.py)
        self.client, self.token = connection_settings(o, self.bootstrap)
        if self.token is not None:
            self.producer_config = {
                k: v for k, v in self.producer_config.items() if not k.startswith(SECURITY_PREFIXES)
            }
            self.producer_config.update(self.client)
        self.txn_prefix = o.get("transactional.id.prefix")
        names = set(schema.fieldNames())
        if "value" not in names:
            raise ValueError("the DataFrame written to logbroker needs a value column")
        if self.topic is None and "topic" not in names:
            raise ValueError("set the topic option or give the DataFrame a topic column")
        # value.format / key.format=registry: struct columns as framed Avro, the schemas
        # registered here, on the driver (spark/registry.py)
        self.encoded = SinkColumn.plan(o, schema, self.topic)

    def _dicts(self, iterator):
        """The rows as dicts, registry columns encoded a chunk at a time."""
        if not self.encoded:
            for row in iterator:
                yield row.asDict()
            return
        chunk: list[dict] = []
        for row in iterator:
            chunk.append(row.asDict(recursive=True))
            if len(chunk) >= ENCODE_CHUNK:
                yield from self._encode(chunk)
                chunk = []
        yield from self._encode(chunk)

    def _encode(self, chunk: list[dict]):
        for c in self.encoded:
            for d, framed in zip(chunk, c.encode([d.get(c.name) for d in chunk]), strict=True):
                d[c.name] = framed
        return chunk

    def _send_rows(self, producer, iterator) -> int:
        rows = 0
        futures = []
        for d in self._dicts(iterator):
            topic = d.get("topic") or self.topic
            if topic is None:
                raise ValueError(f"row {rows} has a null topic and no topic option is set")
            headers = [(h["key"], _bytes(h["value"])) for h in (d.get("headers") or [])]
            futures.append(
                producer.send(
                    topic,
                    _bytes(d.get("value")),
                    key=_bytes(d.get("key")),
                    partition=d.get("partition"),
                    headers=headers or None,
                )
            )
            rows += 1
        producer.flush()
        for f in futures:
            f.result()
        return rows

    def write(self, iterator):
        from logbroker import Producer

        if self.txn_prefix is not None:
            return self._write_transaction(iterator)
        with Producer(bootstrap_servers=self.bootstrap, **self.producer_config) as producer:
            return SinkCommit(self._send_rows(producer, iterator))

    def _write_transaction(self, iterator):
        from pyspark import TaskContext

        from logbroker import Consumer, Producer

        ctx = TaskContext.get()
        part = ctx.partitionId() if ctx is not None else 0
        batch = ctx.getLocalProperty("streaming.sql.batchId") if ctx is not None else None
        txn_id = f"{self.txn_prefix}-{part}"
        producer = Producer(bootstrap_servers=self.bootstrap, transactional_id=txn_id, **self.producer_config)
        try:
            producer.init_transactions()  # fences an earlier attempt and aborts what it left open
            if batch is not None:
                if self.topic is None:
                    raise ValueError("an exactly-once stream (transactional.id.prefix) needs the topic option")
                with Consumer(self.bootstrap, group_id=txn_id, isolation_level="read_committed", **self.client) as c:
                    done = c.committed([(self.topic, 0)]).get((self.topic, 0))
                if done is not None and done > int(batch):
                    return SinkCommit(0)  # this task's share of the batch is already committed
            producer.begin_transaction()
            try:
                rows = self._send_rows(producer, iterator)
                if batch is not None:
                    producer.send_offsets_to_transaction({(self.topic, 0): int(batch) + 1}, txn_id)
            except BaseException:
                # the task fails: end its transaction now rather than leave it open (holding
                # back read_committed readers of its partitions) until its timeout
                try:
                    producer.abort_transaction(10)
                except Exception:  # noqa: BLE001 - the original error is the one to report
                    pass
                raise
            pid, epoch = producer._producer_id_and_epoch()
            return SinkCommit(rows, txn_id, pid, epoch)
        finally:
            producer.close()  # the transaction stays open: the driver commits or aborts it

    def _end(self, messages, commit: bool) -> None:
        if self.txn_prefix is None:
            return
        from logbroker import Producer

        for m in messages:
            if m is None or getattr(m, "transactional_id", None) is None:
                continue
            with Producer(
                bootstrap_servers=self.bootstrap, transactional_id=m.transactional_id, **self.producer_config
            ) as p:
                p._resume_transaction(m.producer_id, m.producer_epoch)
                if commit:
                    p.commit_transaction()
                else:
                    p.abort_transaction()


class LogbrokerWriter(_Writing, DataSourceWriter):
    def commit(self, messages) -> None:
        self._end(messages, True)

    def abort(self, messages) -> None:
        self._end(messages, False)


class LogbrokerStreamWriter(_Writing, DataSourceStreamWriter):
    def commit(self, messages, batchId) -> None:
        self._end(messages, True)

    def abort(self, messages, batchId) -> None:
        self._end(messages, False)
