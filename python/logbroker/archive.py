"""The archive: records that retention would delete, kept as Parquet (`retention.archive`).

Layout, in a directory or under an S3-compatible bucket prefix (`archive.location`):

    <location>/<topic>/<partition>/<first offset>-<last offset>-<topic id>.parquet

(offsets 20 digits, zero-padded; the topic id as Kafka prints it, 22 characters of
URL-safe base64). One file per archived offset range `[first, last]` (a segment, or its part
above the log start offset). The topic id tells incarnations apart: a topic deleted and
created again under the same name starts again at offset 0, and its files sit beside the
old ones without colliding. Invariants, per incarnation:
- the files of one partition cover disjoint ranges, in increasing order; an archive pass
  starts after the highest `last` already there (the partition's resume point), so a pass
  that is retried after a crash, or run by a new leader, never archives a record twice;
- a file is visible only once whole: written to `<name>.<random>.tmp` and renamed in a directory,
  one PUT (multipart upload completed on close) in an object store;
- the log start offset is raised past a range only after its file exists, so a record
  is always in the log or in the archive (or was never readable: see below).

Rows: one per record, Spark's Kafka source schema (`ARROW_SCHEMA`: key, value, topic,
partition, offset, timestamp, timestampType, headers), so `pyarrow.parquet.read_table`,
`spark.read.parquet(f"{location}/{topic}")` and the logbroker Spark source (option
`archive.location`) read it as they read Kafka. What a read_committed consumer would have
read is archived: control records and records of aborted transactions are not.
Decoding (CRC check, decompression, Arrow buffers) is `_core.decode_columns` in Rust;
Python wraps buffers and hands them to pyarrow, never touching records one by one.

Needs pyarrow (the `archive` extra: pip install 'logbroker[archive]').
"""

from __future__ import annotations

import base64
import dataclasses
import importlib.util
import re
import uuid
from collections.abc import Iterator
from typing import Any

from logbroker import _core
from logbroker.arrow_records import DecodeStalled, kafka_arrow_schema, log_batches

FILE_RE = re.compile(r"^(\d{20})-(\d{20})-([A-Za-z0-9_-]{22})\.parquet$")
# The keys that configure a store (broker keys, also accepted as Spark source options).
STORE_KEYS = (
    "archive.location",
    "archive.s3.endpoint",
    "archive.s3.region",
    "archive.s3.access.key.id",
    "archive.s3.secret.access.key",
)


class ArchiveError(Exception):
    """An archive failure, naming the location, topic, partition and offsets involved."""


def require_pyarrow() -> None:
    if importlib.util.find_spec("pyarrow") is None:
        raise ArchiveError("retention.archive needs pyarrow: pip install 'logbroker[archive]'")


def topic_id_text(topic_id: uuid.UUID) -> str:
    """A topic id as Kafka prints it (URL-safe base64, no padding)."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def file_name(first: int, last: int, topic_id: str) -> str:
    return f"{first:020d}-{last:020d}-{topic_id}.parquet"


@dataclasses.dataclass(frozen=True)
class ArchivedFile:
    topic: str
    partition: int
    first_offset: int
    last_offset: int
    topic_id: str
    path: str  # within the store's filesystem
    size_bytes: int
    mtime_ns: int


class ArchiveStore:
    """A directory or an S3 bucket prefix holding the layout above, through pyarrow.fs."""

    def __init__(
        self,
        location: str,
        *,
        s3_endpoint: str = "",
        s3_region: str = "us-east-1",
        s3_access_key_id: str = "",
        s3_secret_access_key: str = "",
    ) -> None:
        require_pyarrow()
        from pyarrow import fs

        if not location:
            raise ArchiveError("archive.location is empty")
        self.location = location
        if location.startswith("s3://"):
            kwargs: dict[str, Any] = {"region": s3_region or "us-east-1"}
            if s3_endpoint:
                scheme, _, host = s3_endpoint.partition("://")
                if not host:
                    scheme, host = "https", s3_endpoint
                kwargs.update(endpoint_override=host, scheme=scheme)
            if s3_access_key_id or s3_secret_access_key:
                kwargs.update(access_key=s3_access_key_id, secret_key=s3_secret_access_key)
            self.fs = fs.S3FileSystem(**kwargs)
            self.root = location[len("s3://") :].rstrip("/")
            self.atomic_rename = False
        else:
            self.fs = fs.LocalFileSystem()
            self.root = location.rstrip("/") or "/"
            self.atomic_rename = True

    @classmethod
    def from_keys(cls, keys: dict[str, Any]) -> ArchiveStore:
        """From the broker keys (or Spark options) named in STORE_KEYS."""
        get = lambda k, d="": str(keys.get(k) or d)  # noqa: E731
        return cls(
            get("archive.location"),
            s3_endpoint=get("archive.s3.endpoint"),
            s3_region=get("archive.s3.region", "us-east-1"),
            s3_access_key_id=get("archive.s3.access.key.id"),
            s3_secret_access_key=get("archive.s3.secret.access.key"),
        )

    def __repr__(self) -> str:
        return f"ArchiveStore({self.location})"

    def _dir(self, topic: str, partition: int) -> str:
        return f"{self.root}/{topic}/{partition}"

    # --- reading ------------------------------------------------------------------

    def topics(self) -> list[str]:
        from pyarrow import fs

        infos = self._list(self.root, recursive=False)
        return sorted(i.base_name for i in infos if i.type == fs.FileType.Directory)

    def files(self, topic: str, partition: int | None = None, topic_id: str | None = None) -> list[ArchivedFile]:
        """The archived files of a topic (or of one partition; of one incarnation when
        `topic_id` is given), by partition then offset."""
        from pyarrow import fs

        base = f"{self.root}/{topic}" if partition is None else self._dir(topic, partition)
        out = []
        for info in self._list(base, recursive=True):
            m = FILE_RE.match(info.base_name)
            if info.type != fs.FileType.File or not m:
                continue
            part = info.path.rstrip("/").split("/")[-2]
            if not part.isdigit() or (topic_id is not None and m.group(3) != topic_id):
                continue
            out.append(
                ArchivedFile(
                    topic,
                    int(part),
                    int(m.group(1)),
                    int(m.group(2)),
                    m.group(3),
                    info.path,
                    info.size or 0,
                    info.mtime_ns or 0,
                )
            )
        out.sort(key=lambda f: (f.partition, f.first_offset, f.mtime_ns))
        return out

    def incarnations(self, topic: str) -> list[str]:
        """The topic ids archived under this name, the most recently written last."""
        newest: dict[str, int] = {}
        for f in self.files(topic):
            newest[f.topic_id] = max(newest.get(f.topic_id, 0), f.mtime_ns)
        return sorted(newest, key=lambda t: newest[t])

    def _list(self, path: str, recursive: bool):
        from pyarrow import fs

        try:
            return self.fs.get_file_info(fs.FileSelector(path, allow_not_found=True, recursive=recursive))
        except OSError as e:
            raise ArchiveError(f"listing {self.location} ({path}): {e}") from None

    def resume_point(self, topic: str, partition: int, topic_id: str) -> int:
        """The offset after the highest archived one of the partition (-1: nothing archived)."""
        files = self.files(topic, partition, topic_id)
        return files[-1].last_offset + 1 if files else -1

    def row_count(self, f: ArchivedFile) -> int:
        import pyarrow.parquet as pq

        with self.fs.open_input_file(f.path) as src:
            return pq.ParquetFile(src).metadata.num_rows

    def read(self, f: ArchivedFile, start: int | None = None, end: int | None = None) -> Iterator:
        """The file's rows with offsets in [start, end), as pyarrow RecordBatches."""
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        try:
            with self.fs.open_input_file(f.path) as src:
                for batch in pq.ParquetFile(src).iter_batches():
                    if start is not None or end is not None:
                        offsets = batch.column("offset")
                        mask = pc.and_(
                            pc.greater_equal(offsets, start if start is not None else -1),
                            pc.less(offsets, end if end is not None else 2**63 - 1),
                        )
                        batch = batch.filter(mask)
                    if batch.num_rows:
                        yield batch
        except OSError as e:
            raise ArchiveError(
                f"reading {f.topic}-{f.partition} offsets {f.first_offset}..{f.last_offset} from {f.path}: {e}"
            ) from None

    def read_range(self, topic: str, partition: int, start: int, end: int, topic_id: str) -> Iterator:
        """Rows of one partition of one incarnation with offsets in [start, end), in offset
        order, each offset once: where two files overlap (two leaders archived across a
        leadership change, with segments cut at other offsets) the later file is read only
        past the earlier one's last offset."""
        position = start
        for f in self.files(topic, partition, topic_id):
            if f.last_offset < position or f.first_offset >= end:
                continue
            yield from self.read(f, position, end)
            position = f.last_offset + 1

    @staticmethod
    def records(batches: Iterator) -> Iterator[dict]:
        """Rows as dicts (for tools, not the broker): the Kafka schema's columns,
        `timestamp` in epoch milliseconds, `headers` as (key, value) pairs."""
        import pyarrow as pa

        for batch in batches:
            millis = batch.column("timestamp").cast(pa.int64()).to_pylist()  # microseconds, exact
            for row, us in zip(batch.to_pylist(), millis):
                row["timestamp"] = us // 1000
                row["headers"] = [(h["key"], h["value"]) for h in row.get("headers") or []]
                yield row

    # --- writing ------------------------------------------------------------------

    def archive_range(self, log: _core.Log, topic_id: str, first: int, end: int) -> ArchivedFile | None:
        """Write the records of `log` (of the topic incarnation `topic_id`) with offsets in
        [first, end) to one file (blocking: run it in a thread). Returns the file, or None
        when the range held no record a read_committed consumer would see (nothing is
        written then)."""
        import pyarrow.parquet as pq

        topic, partition = log.topic, log.partition
        schema = kafka_arrow_schema(include_headers=True)
        final = f"{self._dir(topic, partition)}/{file_name(first, end - 1, topic_id)}"
        # A unique temporary name: two brokers may archive the same range into a shared
        # directory around a leadership change (the last rename wins; the contents agree).
        target = f"{final}.{uuid.uuid4().hex[:12]}.tmp" if self.atomic_rename else final
        sink = writer = None
        try:
            self.fs.create_dir(self._dir(topic, partition), recursive=True)
            for _, batch in log_batches(log, first, end, schema):
                if batch is None:
                    continue
                if writer is None:
                    sink = self.fs.open_output_stream(target)
                    writer = pq.ParquetWriter(sink, schema, compression="zstd")
                writer.write_batch(batch)
            if writer is None or sink is None:
                return None
            writer.close()
            sink.close()
            if self.atomic_rename:
                self.fs.move(target, final)
            info = self.fs.get_file_info(final)
            return ArchivedFile(topic, partition, first, end - 1, topic_id, final, info.size or 0, info.mtime_ns or 0)
        except (OSError, _core.LogBrokerError, DecodeStalled) as e:
            self._discard(writer, sink, target)
            raise ArchiveError(f"archiving {topic}-{partition} offsets {first}..{end - 1} to {final}: {e}") from None
        except BaseException:
            self._discard(writer, sink, target)
            raise

    def _discard(self, writer, sink, target: str) -> None:
        """A failed write leaves nothing behind (in an object store, closing the stream
        would complete the upload, so the object is deleted after)."""
        for close in (writer, sink):
            try:
                if close is not None:
                    close.close()
            except Exception:
                pass
        if sink is not None:
            try:
                self.fs.delete_file(target)
            except OSError:
                pass
