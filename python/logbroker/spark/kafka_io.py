"""Broker I/O for the Spark data source: partition discovery, offset lookup, and
executor-side fetching of one partition's offset range as Arrow record batches.

Everything here opens its connections lazily and holds none between calls, so the
objects Spark pickles (data source, readers, input partitions) stay plain data.
Record decoding (CRC check, decompression, Arrow buffers) is `_core.decode_columns`
in Rust; Python only wraps the buffers (`pyarrow.Array.from_buffers`).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

from logbroker import _core
from logbroker.arrow_records import arrow_batch
from logbroker.client.connection import BrokerConnection, ClientError
from logbroker.protocol import REQUESTS, ErrorCode

EARLIEST, LATEST = -2, -1
FETCH_MAX_VERSION = 12  # v13+ addresses topics by id


class SparkSourceError(Exception):
    """A logbroker Spark source/sink failure, naming topic, partition and offsets."""


def _bootstrap(servers: str) -> str:
    return servers.split(",")[0].strip()


class Cluster:
    """Driver-side lookups over one short-lived connection."""

    def __init__(self, bootstrap_servers: str, read_committed: bool = False, config: dict | None = None) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.read_committed = read_committed  # latest offsets are then last stable offsets
        self.config = config or None  # the client's security settings (spark/security.py)

    def __enter__(self) -> Cluster:
        try:
            self.conn = BrokerConnection(
                _bootstrap(self.bootstrap_servers), client_id="logbroker-spark", config=self.config
            )
        except ClientError as e:
            raise SparkSourceError(str(e)) from None
        return self

    def __exit__(self, *exc: object) -> None:
        self.conn.close()

    def metadata(self, topics: list[str] | None):
        Metadata = REQUESTS[3]
        req = Metadata(
            topics=None if topics is None else [Metadata.MetadataRequestTopic(name=t) for t in topics],
            allow_auto_topic_creation=False,
        )
        return self.conn.send(req)

    def partitions(
        self, subscribe: list[str] | None = None, pattern: str | None = None, assign: dict[str, list[int]] | None = None
    ) -> dict[tuple[str, int], tuple[str, int]]:
        """(topic, partition) -> leader (host, port) for the subscribed partitions."""
        if assign is not None:
            md = self.metadata(sorted(assign))
        elif subscribe is not None:
            md = self.metadata(subscribe)
        else:
            md = self.metadata(None)
        brokers = {b.node_id: (b.host, b.port) for b in md.brokers}
        rx = re.compile(pattern) if pattern else None
        out = {}
        for t in md.topics:
            if t.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                continue
            if t.error_code:
                raise SparkSourceError(f"topic {t.name}: {ErrorCode(t.error_code).name}")
            if t.is_internal or (rx is not None and not rx.fullmatch(t.name)):
                continue
            for p in t.partitions:
                if assign is not None and p.partition_index not in assign.get(t.name, []):
                    continue
                out[(t.name, p.partition_index)] = brokers.get(p.leader_id, ("", -1))
        return out

    def topic_ids(self, topics: list[str]) -> dict[str, str]:
        """Topic name -> topic id as Kafka prints it (which incarnation of an archived topic to read)."""
        from logbroker.archive import topic_id_text

        return {
            t.name: topic_id_text(t.topic_id)
            for t in self.metadata(sorted(set(topics))).topics
            if not t.error_code and t.topic_id is not None
        }

    def list_offsets(self, wanted: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
        """ListOffsets for each (topic, partition) -> timestamp spec (-2, -1 or ms);
        a timestamp with no record at or after it gives -1."""
        if not wanted:
            return {}
        ListOffsets = REQUESTS[2]
        by_topic: dict[str, list[tuple[int, int]]] = {}
        for (t, p), ts in wanted.items():
            by_topic.setdefault(t, []).append((p, ts))
        req = ListOffsets(
            replica_id=-1,
            isolation_level=1 if self.read_committed else 0,
            topics=[
                ListOffsets.ListOffsetsTopic(
                    name=t,
                    partitions=[ListOffsets.ListOffsetsPartition(partition_index=p, timestamp=ts) for p, ts in ps],
                )
                for t, ps in sorted(by_topic.items())
            ],
        )
        resp = self.conn.send(req, version=min(7, self.conn.version_for(2)))
        out = {}
        for t in resp.topics:
            for p in t.partitions:
                if p.error_code:
                    raise SparkSourceError(f"ListOffsets {t.name}-{p.partition_index}: {ErrorCode(p.error_code).name}")
                out[(t.name, p.partition_index)] = p.offset
        return out


def read_range(
    bootstrap_servers: str,
    topic: str,
    partition: int,
    start: int,
    end: int,
    arrow_schema,
    include_headers: bool,
    fail_on_data_loss: bool,
    max_bytes: int = 8 << 20,
    read_committed: bool = False,
    archive: dict | None = None,
    config: dict | None = None,
) -> Iterator:
    """Executor side: fetch [start, end) of one partition from its leader, yielding
    RecordBatches. Offsets missing because compaction removed them are skipped; offsets
    below the log start (deleted by retention) are read from the archive when `archive`
    (the store's keys, logbroker/archive.py) is given, else raise unless fail_on_data_loss
    is false."""
    if start >= end:
        return
    with Cluster(bootstrap_servers, config=config) as cluster:
        leaders = cluster.partitions(assign={topic: [partition]})
        topic_id = cluster.topic_ids([topic]).get(topic) if archive is not None else None
    if (topic, partition) not in leaders:
        raise SparkSourceError(f"{topic}-{partition} does not exist (reading offsets {start}..{end})")
    host, port = leaders[(topic, partition)]
    Fetch = REQUESTS[1]
    try:
        conn = BrokerConnection(f"{host}:{port}", client_id="logbroker-spark-executor", config=config or None)
    except ClientError as e:
        raise SparkSourceError(f"{topic}-{partition}: {e}") from None
    version = min(FETCH_MAX_VERSION, conn.version_for(1))
    position = start
    try:
        while position < end:
            req = Fetch(
                replica_id=-1,
                max_wait_ms=500,
                min_bytes=1,
                max_bytes=max_bytes,
                isolation_level=1 if read_committed else 0,
                session_id=0,
                session_epoch=-1,
                topics=[
                    Fetch.FetchTopic(
                        topic=topic,
                        partitions=[
                            Fetch.FetchPartition(
                                partition=partition, fetch_offset=position, partition_max_bytes=max_bytes
                            )
                        ],
                    )
                ],
                forgotten_topics_data=[],
                rack_id="",
            )
            part = conn.send(req, version=version).responses[0].partitions[0]
            if part.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
                log_start = part.log_start_offset
                if archive is not None and topic_id is not None and 0 <= position < log_start:
                    yield from _archived(
                        archive, topic, topic_id, partition, position, min(log_start, end), arrow_schema
                    )
                    position = log_start
                    continue
                if fail_on_data_loss or log_start < 0 or log_start <= position:
                    raise SparkSourceError(
                        f"{topic}-{partition}: offset {position} is no longer available (log start {log_start}); "
                        "data was deleted before it was read (set failOnDataLoss=false to skip it)"
                    )
                position = log_start
                continue
            if part.error_code:
                raise SparkSourceError(
                    f"Fetch {topic}-{partition} at offset {position}: {ErrorCode(part.error_code).name}"
                )
            records = part.records
            if records is None or len(records) == 0:
                limit = part.last_stable_offset if read_committed else part.high_watermark
                if part.high_watermark <= position:
                    raise SparkSourceError(
                        f"{topic}-{partition}: offset {position} is at the high watermark {part.high_watermark} "
                        f"but the range ends at {end}; the partition was truncated"
                    )
                if limit <= position:
                    time.sleep(0.05)  # read_committed: a transaction still open below `end`
                continue
            aborted = (
                [(a.producer_id, a.first_offset) for a in part.aborted_transactions or []] if read_committed else None
            )
            columns = _core.decode_columns(records, position, end, include_headers, aborted)
            if columns["next_offset"] <= position:
                raise SparkSourceError(f"{topic}-{partition}: fetch at offset {position} made no progress")
            position = columns["next_offset"]
            if columns["count"]:
                yield arrow_batch(columns, topic, partition, arrow_schema, include_headers)
    finally:
        conn.close()


def _archived(archive: dict, topic: str, topic_id: str, partition: int, start: int, end: int, arrow_schema) -> Iterator:
    """Rows [start, end) of one partition from the archive, in the reader's schema (the
    archive always has headers; without includeHeaders the column is left out)."""
    import pyarrow as pa

    from logbroker.archive import ArchiveError, ArchiveStore

    try:
        for batch in ArchiveStore.from_keys(archive).read_range(topic, partition, start, end, topic_id):
            yield pa.RecordBatch.from_arrays(
                [batch.column(n).cast(arrow_schema.field(n).type) for n in arrow_schema.names], schema=arrow_schema
            )
    except ArchiveError as e:
        raise SparkSourceError(str(e)) from None
