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

Partition spec: day(timestamp), partition field id 1000, named timestamp_day, unless the
topic's iceberg.partition.spec names others (`partition_spec`: field ids from 1000, names as
Iceberg's builder gives them).
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


DEFAULT_PARTITION_SPEC = "day(timestamp)"


def partition_spec(text: str | None = None, schema=None):
    """The table's partition spec from `iceberg.partition.spec`: Iceberg transforms separated
    by commas, `day(timestamp)` (the default), `hour(timestamp)`, `identity(partition)`,
    `bucket(16, value.id)`, `truncate(4, key)`, year/month/void, of the columns of `schema`
    (a nested field as `value.id`); an empty text is an unpartitioned table. Field ids from
    1000; names as Iceberg's builder gives them (`timestamp_day`, `value_id_bucket`,
    `partition`). ValueError names what is wrong."""
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.transforms import (
        BucketTransform,
        DayTransform,
        HourTransform,
        IdentityTransform,
        MonthTransform,
        TruncateTransform,
        VoidTransform,
        YearTransform,
    )

    from logbroker.common.config import ConfigError, partition_spec_fields

    schema = schema if schema is not None else table_schema()
    make = {"identity": IdentityTransform, "year": YearTransform, "month": MonthTransform, "day": DayTransform}
    make |= {"hour": HourTransform, "void": VoidTransform, "bucket": BucketTransform, "truncate": TruncateTransform}
    suffix = {"bucket": "bucket", "truncate": "trunc", "year": "year", "month": "month", "day": "day", "hour": "hour"}
    suffix["void"] = "null"
    try:
        parsed = partition_spec_fields(DEFAULT_PARTITION_SPEC if text is None else text)
    except ConfigError as e:
        raise ValueError(f"iceberg.partition.spec: {e}") from None
    fields = []
    for name, width, column in parsed:
        part = f"{name}({width}, {column})" if width is not None else f"{name}({column})"
        transform = make[name](width) if width is not None else make[name]()
        try:
            source = schema.find_field(column)
        except ValueError:
            raise ValueError(
                f"iceberg.partition.spec: {part!r}: the table has no column {column!r} "
                f"(columns: {[f.name for f in schema.fields]})"
            ) from None
        if not transform.can_transform(source.field_type):
            raise ValueError(f"iceberg.partition.spec: {part!r}: {name} does not apply to {source.field_type}")
        label = column.replace(".", "_")
        field_name = label if name == "identity" else f"{label}_{suffix[name]}"
        fields.append(PartitionField(source.field_id, 1000 + len(fields), transform, field_name))
    return PartitionSpec(*fields)


def spec_fields(table) -> list[tuple[str, str, str]]:
    """The table's current partition spec as the Rust writer takes it: (source column path,
    transform, name) per field."""
    schema = table.schema()
    return [(schema.find_column_name(f.source_id), str(f.transform), f.name) for f in table.spec().fields]


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
