"""The `logbroker` sink: batch (`df.write.format("logbroker")`) and streaming
(`writeStream.format("logbroker")`), taking the columns of Spark's Kafka sink:
value (required, string or binary), key, headers (array<struct<key string, value
binary>>), topic (or the `topic` option), partition. Rows go through logbroker's
idempotent Producer on each executor task; delivery is at-least-once, as with
Spark's Kafka sink (a retried task writes its rows again)."""

from __future__ import annotations

from logbroker.spark import require_spark_extra

require_spark_extra()

from pyspark.sql.datasource import DataSourceStreamWriter, DataSourceWriter, WriterCommitMessage  # noqa: E402


class SinkCommit(WriterCommitMessage):
    def __init__(self, rows: int) -> None:
        self.rows = rows


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
        self.producer_config = {k[len("kafka."):]: v for k, v in o.items() if k.startswith("kafka.") and k != "kafka.bootstrap.servers"}
        names = set(schema.fieldNames())
        if "value" not in names:
            raise ValueError("the DataFrame written to logbroker needs a value column")
        if self.topic is None and "topic" not in names:
            raise ValueError("set the topic option or give the DataFrame a topic column")

    def write(self, iterator):
        from logbroker import Producer

        rows = 0
        with Producer(bootstrap_servers=self.bootstrap, **self.producer_config) as producer:
            futures = []
            for row in iterator:
                d = row.asDict()
                topic = d.get("topic") or self.topic
                if topic is None:
                    raise ValueError(f"row {rows} has a null topic and no topic option is set")
                headers = [(h["key"], _bytes(h["value"])) for h in (d.get("headers") or [])]
                futures.append(producer.send(topic, _bytes(d.get("value")), key=_bytes(d.get("key")),
                                             partition=d.get("partition"), headers=headers or None))
                rows += 1
            producer.flush()
            for f in futures:
                f.result()
        return SinkCommit(rows)


class LogbrokerWriter(_Writing, DataSourceWriter):
    def commit(self, messages) -> None:
        pass

    def abort(self, messages) -> None:
        pass


class LogbrokerStreamWriter(_Writing, DataSourceStreamWriter):
    def commit(self, messages, batchId) -> None:
        pass

    def abort(self, messages, batchId) -> None:
        pass
