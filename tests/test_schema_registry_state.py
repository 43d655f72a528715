"""The registry state (schema_registry/state.py) from `_schemas` records: the race rule (a
record whose id names another schema, or whose version holds another id, loses), soft and
hard deletes, configs and modes, unreadable records skipped; the same records in the same
order give the same state on every node."""

from __future__ import annotations

import random

from logbroker.schema_registry import records
from logbroker.schema_registry.records import SchemaValue
from logbroker.schema_registry.state import Content, RegistryState


def schema(subject: str, version: int, sid: int, text: str, deleted: bool = False):
    return records.schema_key(subject, version), records.schema_value(
        SchemaValue(subject, version, sid, text, deleted=deleted)
    )


def build(log: list) -> RegistryState:
    st = RegistryState()
    for offset, (k, v) in enumerate(log):
        st.apply(offset, k, v)
    return st


def test_a_record_that_lost_its_race_is_ignored():
    log = [
        schema("s", 1, 1, '"int"'),
        schema("s", 1, 2, '"long"'),  # another node's version 1: lost
        schema("t", 1, 1, '"string"'),  # id 1 names "int" already: lost
        schema("s", 2, 2, '"long"'),  # the retry
        schema("t", 1, 3, '"string"'),
    ]
    st = build(log)
    assert [(sv.version, sv.id, sv.schema) for sv in st.versions("s")] == [(1, 1, '"int"'), (2, 2, '"long"')]
    assert st.versions("t")[0].id == 3 and st.max_id == 3
    assert st.id_of(Content("AVRO", '"long"', ())) == 2


def test_deletes_configs_modes_and_garbage():
    log = [
        schema("s", 1, 1, '"int"'),
        schema("s", 2, 2, '"long"'),
        (records.config_key(None), records.config_value("FULL")),
        (records.config_key("s"), records.config_value("NONE")),
        (records.mode_key("s"), records.mode_value("READONLY")),
        (b"not json", b"{}"),
        (records.noop_key(), None),
        (records.subject_key("DELETE_SUBJECT", "s"), records.subject_value("s", 1)),
    ]
    st = build(log)
    assert [sv.version for sv in st.versions("s")] == [2] and st.version("s", 1, deleted=True).deleted
    assert (st.level("s"), st.level("other"), st.mode("s"), st.mode(None)) == ("NONE", "FULL", "READONLY", "READWRITE")
    st.apply(8, records.config_key("s"), None)
    assert st.level("s") == "FULL"
    # hard delete of the soft-deleted version 1: its tombstone; the id goes when unused
    st.apply(9, records.schema_key("s", 1), None)
    assert st.version("s", 1, deleted=True) is None and 1 not in st.schemas and 2 in st.schemas
    assert st.next_version("s") == 3 and st.next_offset == 10


def test_every_node_gets_the_same_state_from_the_same_log():
    rng = random.Random(7)
    log = []
    for _ in range(300):
        subject = f"s{rng.randrange(5)}"
        log.append(
            schema(
                subject,
                rng.randrange(1, 6),
                rng.randrange(1, 40),
                f'"t{rng.randrange(30)}"',
                deleted=rng.random() < 0.1,
            )
        )
    a, b = build(log), build(list(log))

    def view(st: RegistryState):
        return (
            {s: [(sv.version, sv.id, sv.schema, sv.deleted) for sv in st.versions(s, True)] for s in st.subjects},
            dict(st.schemas),
            st.max_id,
        )

    assert view(a) == view(b)
    # and the model's invariants hold: an id names one schema; a version one id; the usage
    # index is what a scan of every version finds, also after hard deletes
    for i in range(40):
        a.apply(300 + i, records.schema_key(f"s{i % 5}", 1 + i % 6), None)  # tombstones
    for versions in a.subjects.values():
        for sv in versions.values():
            assert a.schemas[sv.id] == Content(sv.schema_type, sv.schema, sv.references)
    for sid in range(1, 41):
        brute = sorted((sv.subject, sv.version) for vs in a.subjects.values() for sv in vs.values() if sv.id == sid)
        assert [(sv.subject, sv.version) for sv in a.usages(sid, True)] == brute
        assert (sid in a.schemas) == bool(brute)
