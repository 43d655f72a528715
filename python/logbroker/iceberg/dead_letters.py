"""The dead-letter table of an Iceberg topic with value columns and
`iceberg.invalid.record.action=dlq_table`: values that do not decode by `<topic>-value`'s
schemas (not framed, an unknown schema id, a datum that does not fit), each with its offset,
the reason and its bytes. Their rows stay in the topic's table, with a null `value` and a
null `value_raw` (rust/src/table/dead_letters.rs cuts them out of each decoded stretch).

Table `<namespace>.<table>_dlq`, unpartitioned, field ids fixed:

    1 topic string          5 key binary
    2 partition int         6 value binary      (the value's bytes as produced)
    3 offset long           7 value_schema_id int (the id in its framing; null: not framed)
    4 timestamp timestamptz 8 reason string

Exactly once, as the topic's table: the dead-letter table's snapshots carry a position in
the same summary properties (table_offsets.py). A commit with dead letters writes them
first, without those below the dead-letter table's position (an earlier commit wrote them and
then lost its race for the topic's table), conditional on the snapshot it read, and moves
that position to where the topic's table is about to go; only then does it commit the topic's
table. So a dead letter below the table's position is in the dead-letter table, once: a
commit that loses the race for the dead-letter table commits nothing, and one that wins it
and then loses the table's race leaves dead letters the next commit drops as already there.
"""

from __future__ import annotations

from logbroker.iceberg import IcebergError
from logbroker.iceberg.table_offsets import read_position, table_ident
from logbroker.iceberg.table_schema import TABLE_PROPERTIES

SUFFIX = "_dlq"
ACTION_KEY = "iceberg.invalid.record.action"  # the topic key: value_raw (default) or dlq_table


class DeadLettersLostRace(Exception):
    """Another writer committed the dead-letter table since it was read: nothing landed."""


def dead_letter_schema():
    from pyiceberg.schema import Schema
    from pyiceberg.types import BinaryType, IntegerType, LongType, NestedField, StringType, TimestamptzType

    return Schema(
        NestedField(1, "topic", StringType(), required=False),
        NestedField(2, "partition", IntegerType(), required=False),
        NestedField(3, "offset", LongType(), required=False),
        NestedField(4, "timestamp", TimestamptzType(), required=False),
        NestedField(5, "key", BinaryType(), required=False),
        NestedField(6, "value", BinaryType(), required=False),
        NestedField(7, "value_schema_id", IntegerType(), required=False),
        NestedField(8, "reason", StringType(), required=False),
    )


def dead_letter_table(catalog, table):
    """The dead-letter table of `table` (a topic's), created beside it when missing; one found
    with other columns is refused (IcebergError)."""
    from pyiceberg.exceptions import NoSuchTableError, TableAlreadyExistsError

    from logbroker.iceberg.table_schema import column_names

    ident = table_ident(table) + SUFFIX
    try:
        try:
            dlq = catalog.load_table(ident)
        except NoSuchTableError:
            try:
                dlq = catalog.create_table(
                    ident,
                    schema=dead_letter_schema(),
                    properties={**TABLE_PROPERTIES, "logbroker.dead-letters-of": table_ident(table)},
                )
            except TableAlreadyExistsError:  # another node created it first
                dlq = catalog.load_table(ident)
    except Exception as e:
        raise IcebergError(f"loading the dead-letter table {ident}: {type(e).__name__}: {e}") from None
    if column_names(dlq.schema()) != column_names(dead_letter_schema()):
        raise IcebergError(
            f"table {ident} has columns {column_names(dlq.schema())}, not a dead-letter table's "
            f"{column_names(dead_letter_schema())}; the broker does not write to it (is a topic named "
            f"{ident.rsplit('.', 1)[-1]} an Iceberg topic too?)"
        )
    return dlq


def commit_dead_letters(catalog, table, topic_id: str, ipc: bytes, advanced: dict[int, int]) -> int:
    """Appends the dead letters `ipc` (an Arrow IPC stream from TableDataFiles) to `table`'s
    dead-letter table, less those below its position, moving the position of the `advanced`
    partitions (partition -> the topic's table's next offset after this commit); returns the
    rows added. DeadLettersLostRace when another writer committed it since it was read."""
    import pyarrow as pa
    import pyarrow.compute as pc
    from pyiceberg.exceptions import CommitFailedException

    dlq = dead_letter_table(catalog, table)
    position = read_position(dlq)
    letters = pa.ipc.open_stream(ipc).read_all()
    keep = None
    for p in pc.unique(letters.column("partition")).to_pylist():
        start = position.next_offset(topic_id, p)
        mine = pc.equal(letters.column("partition"), p)
        if start is not None:
            mine = pc.and_(mine, pc.greater_equal(letters.column("offset"), start))
        keep = mine if keep is None else pc.or_(keep, mine)
    if keep is not None:
        letters = letters.filter(keep)
    if letters.num_rows == 0:
        return 0
    try:
        with dlq.transaction() as tx:
            tx.append(letters, snapshot_properties=position.summary(topic_id, advanced))
    except CommitFailedException as e:
        raise DeadLettersLostRace(str(e)) from None
    except Exception as e:
        raise IcebergError(
            f"dead-letter table {table_ident(dlq)}: appending {letters.num_rows} dead letters: {type(e).__name__}: {e}"
        ) from None
    return letters.num_rows
