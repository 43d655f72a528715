"""Record batches as Arrow: the Rust-decoded column buffers (`_core.decode_columns`)
wrapped as a `pyarrow.RecordBatch` of Spark's Kafka source schema, without touching
records one by one. Used by the Spark source (executors), the archive (Parquet) and the
Iceberg table writer; the last two read a local log through `log_batches`.

The schema, as Spark's Kafka source has it: key binary, value binary, topic string,
partition int, offset long, timestamp timestamp (microseconds, UTC), timestampType int,
and with headers: headers array<struct<key: string, value: binary>>.
"""

from __future__ import annotations

from collections.abc import Iterator

READ_BYTES = 8 << 20  # bytes of log decoded per Arrow record batch (one Parquet row group)


class DecodeStalled(Exception):
    """Decoding a log made no progress at an offset (a batch the decoder cannot pass)."""


def kafka_arrow_schema(include_headers: bool):
    """The pyarrow schema of Spark's Kafka rows (what `to_arrow_schema` makes of the
    Spark source's schema), for writers without Spark."""
    import pyarrow as pa

    fields = [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("timestampType", pa.int32()),
    ]
    if include_headers:
        fields.append(
            pa.field("headers", pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])))
        )
    return pa.schema(fields)


def arrow_batch(columns: dict, topic: str, partition: int, arrow_schema, include_headers: bool):
    """Wrap the Rust-decoded buffers as a pyarrow.RecordBatch of Spark's Kafka schema."""
    import pyarrow as pa

    n = columns["count"]

    def binary(name: str, typ):
        nulls = columns[f"{name}_nulls"]
        validity = pa.py_buffer(columns[f"{name}_validity"]) if nulls else None
        length = len(columns[f"{name}_offsets"]) // 4 - 1
        return pa.Array.from_buffers(
            typ,
            length,
            [validity, pa.py_buffer(columns[f"{name}_offsets"]), pa.py_buffer(columns[f"{name}_data"])],
            null_count=nulls,
        )

    arrays = [
        binary("key", pa.binary()),
        binary("value", pa.binary()),
        # The same topic and partition on every row: Arrow fills them in C++ (no numpy).
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.repeat(pa.scalar(partition, pa.int32()), n),
        pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(columns["offset"])]),
        pa.Array.from_buffers(pa.timestamp("us", tz="UTC"), n, [None, pa.py_buffer(columns["timestamp_us"])]),
        pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(columns["timestamp_type"])]),
    ]
    if include_headers:
        list_type = arrow_schema.field("headers").type
        struct_type = list_type.value_type
        keys = binary("header_key", struct_type.field("key").type)
        values = binary("header_value", struct_type.field("value").type)
        structs = pa.StructArray.from_arrays(
            [keys, values], fields=[struct_type.field("key"), struct_type.field("value")]
        )
        arrays.append(
            pa.Array.from_buffers(
                list_type, n, [None, pa.py_buffer(columns["header_list_offsets"])], children=[structs]
            )
        )
    return pa.RecordBatch.from_arrays(arrays, schema=arrow_schema)


def log_batches(
    log, first: int, end: int, arrow_schema, *, max_bytes: int | None = None
) -> Iterator[tuple[int, object]]:
    """Read the local log `log` (a `_core.Log`) over offsets [first, end) as a
    read_committed consumer sees them (no control records, none of aborted transactions):
    yields `(next_offset, batch)` per `READ_BYTES` of log, `batch` a pyarrow.RecordBatch of
    `arrow_schema` with headers, or None when that stretch held no such record.
    `next_offset` is where reading goes on. With `max_bytes`, stops once that many bytes of
    log were read (at a batch boundary, so `next_offset` may be below `end`). Raises
    `_core.LogBrokerError` (CRC, I/O) and DecodeStalled."""
    from logbroker import _core

    position, read = first, 0
    while position < end and (max_bytes is None or read < max_bytes):
        region = log.read(position, READ_BYTES, end, True)
        if region is None:
            return
        data = region.read()
        read += len(data)
        # the aborted transactions still open at this stretch's start (as a fetch from there
        # lists them): one whose ABORT marker an earlier stretch held must not make its
        # producer's later transactions look aborted
        aborted = log.aborted_transactions(position, end)
        columns = _core.decode_columns(data, position, end, True, aborted)
        if columns["next_offset"] <= position:
            raise DecodeStalled(f"{log.topic}-{log.partition}: decoding offset {position} made no progress")
        position = columns["next_offset"]
        batch = arrow_batch(columns, log.topic, log.partition, arrow_schema, True) if columns["count"] else None
        yield position, batch
