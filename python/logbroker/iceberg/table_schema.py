"""The columns and partition spec of an Iceberg topic's table (see logbroker/iceberg).

Field ids are fixed, so every node creates the same table and a table created by an older
broker reads the same:

    1 key binary            5 offset long
    2 value binary          6 timestamp timestamptz (microseconds, UTC)
    3 topic string          7 timestampType int
    4 partition int         8 headers list<9: struct<10: key string, 11: value binary>>

With `iceberg.mode=value_schema_id_prefix` (logbroker/iceberg/value_schema.py), `value` is
a struct of the registered Avro record's fields, JSON Schema object's properties or Protobuf
message's fields (nested ids from 100), and two columns follow:

    12 value_schema_id int  (the id in the value's framing)
    13 value_raw binary     (the value, when it did not decode; else null)

and, once a schema is registered under `<topic>-key` (an Avro record, a JSON Schema object or
a Protobuf message), the key decoded beside the raw `key` (which the table as the tier and
upsert tables read):

    14 key_struct struct    (the key's fields; null when the key is not framed or does not decode)
    15 key_schema_id int    (the id in the key's framing)

Partition spec: day(timestamp), partition field id 1000, named timestamp_day.
"""

from __future__ import annotations

TABLE_PROPERTIES = {
    # The broker's commits are conditional on the snapshot they read (logbroker/iceberg):
    # pyiceberg must not retry them with a position computed before a lost race.
    "commit.retry.num-retries": "0",
    "format-version": "2",
    "write.parquet.compression-codec": "zstd",
    # a commit every few seconds: merge manifests, keep few metadata.json files
    "commit.manifest-merge.enabled": "true",
    "write.metadata.delete-after-commit.enabled": "true",
    "write.metadata.previous-versions-max": "20",
}


KEY_COLUMNS = ("key_struct", "key_schema_id")


def table_schema(value_struct=None, key_struct=None):
    """The table's schema; `value_struct` (value_schema.py's abstract struct) for
    value_schema_id_prefix tables, and `key_struct` for their decoded keys."""
    import itertools

    from pyiceberg.schema import Schema
    from pyiceberg.types import (
        BinaryType,
        IntegerType,
        ListType,
        LongType,
        NestedField,
        StringType,
        StructType,
        TimestamptzType,
    )

    header = StructType(
        NestedField(10, "key", StringType(), required=False), NestedField(11, "value", BinaryType(), required=False)
    )
    value_type = BinaryType()
    extra = []
    ids = itertools.count(100)
    if value_struct is not None:
        from logbroker.iceberg.value_schema import iceberg_type

        value_type = iceberg_type(value_struct, lambda: next(ids))
        extra = [
            NestedField(12, "value_schema_id", IntegerType(), required=False),
            NestedField(13, "value_raw", BinaryType(), required=False),
        ]
    if key_struct is not None:
        from logbroker.iceberg.value_schema import iceberg_type

        extra += [
            NestedField(14, "key_struct", iceberg_type(key_struct, lambda: next(ids)), required=False),
            NestedField(15, "key_schema_id", IntegerType(), required=False),
        ]
    return Schema(
        NestedField(1, "key", BinaryType(), required=False),
        NestedField(2, "value", value_type, required=False),
        NestedField(3, "topic", StringType(), required=False),
        NestedField(4, "partition", IntegerType(), required=False),
        NestedField(5, "offset", LongType(), required=False),
        NestedField(6, "timestamp", TimestamptzType(), required=False),
        NestedField(7, "timestampType", IntegerType(), required=False),
        NestedField(8, "headers", ListType(9, header, element_required=False), required=False),
        *extra,
    )


def writer_arrow_schema(schema):
    """The pyarrow schema the broker's data files are written with: pyiceberg's (field ids in
    `PARQUET:field_id`), with 32-bit offsets (binary, string, list) as the Rust writer builds
    its arrays; Iceberg reads both alike."""
    import pyarrow as pa
    from pyiceberg.io.pyarrow import schema_to_pyarrow

    def small(t):
        if pa.types.is_large_binary(t):
            return pa.binary()
        if pa.types.is_large_string(t):
            return pa.string()
        if pa.types.is_large_list(t) or pa.types.is_list(t):
            return pa.list_(field(t.value_field))
        if pa.types.is_struct(t):
            return pa.struct([field(t.field(i)) for i in range(t.num_fields)])
        if pa.types.is_map(t):
            raise ValueError(f"the broker writes no map columns ({t})")
        return t

    def field(f):
        return pa.field(f.name, small(f.type), f.nullable, f.metadata)

    return pa.schema([field(f) for f in schema_to_pyarrow(schema)])


def partition_spec():
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.transforms import DayTransform

    return PartitionSpec(PartitionField(source_id=6, field_id=1000, transform=DayTransform(), name="timestamp_day"))


def column_names(schema) -> list[tuple[str, str]]:
    """(name, type) of the top-level columns, to compare a found table with ours: types
    without field ids (a catalog assigns its own), the value struct as `struct` (its fields
    evolve)."""
    from pyiceberg.types import StructType

    return [(f.name, "struct" if isinstance(f.field_type, StructType) else _shape(f.field_type)) for f in schema.fields]


def _shape(t) -> str:
    from pyiceberg.types import ListType, MapType, StructType

    if isinstance(t, StructType):
        return "struct<" + ", ".join(f"{f.name}: {_shape(f.field_type)}" for f in t.fields) + ">"
    if isinstance(t, ListType):
        return f"list<{_shape(t.element_type)}>"
    if isinstance(t, MapType):
        return f"map<{_shape(t.key_type)}, {_shape(t.value_type)}>"
    return str(t)
