"""The records of the `_schemas` topic, in Confluent Schema Registry's format (JSON keys and
values), so the topic reads as Confluent's does:

    key                                                        value (null: a tombstone)
    {"keytype":"SCHEMA","subject":S,"version":V,"magic":1}     {"subject":S,"version":V,"id":N,
                                                                "schema":"...","schemaType":"JSON",
                                                                "references":[...],"deleted":false}
                                                               (schemaType left out for AVRO)
    {"keytype":"CONFIG","subject":S|null,"magic":0}            {"compatibilityLevel":"BACKWARD"}
    {"keytype":"MODE","subject":S|null,"magic":0}              {"mode":"READWRITE"}
    {"keytype":"DELETE_SUBJECT","subject":S,"magic":0}         {"subject":S,"version":V}
    {"keytype":"CLEAR_SUBJECT","subject":S,"magic":0}          {"subject":S,"version":V}
    {"keytype":"NOOP","magic":0}                               null

A null subject is the global config or mode. DELETE_SUBJECT soft-deletes every version up to
V; CLEAR_SUBJECT follows the SCHEMA tombstones of a hard delete. Keys are written with sorted
fields so one key has one byte form (the topic is compacted by key bytes).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


class RecordError(ValueError):
    """A `_schemas` record that cannot be read (the offset and why are in the message)."""


@dataclass(frozen=True)
class Reference:
    name: str
    subject: str
    version: int

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "subject": self.subject, "version": self.version}


@dataclass(frozen=True)
class SchemaValue:
    subject: str
    version: int
    id: int
    schema: str
    schema_type: str = "AVRO"
    references: tuple[Reference, ...] = field(default=())
    deleted: bool = False


def _dumps(value: dict[str, Any]) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def schema_key(subject: str, version: int) -> bytes:
    return _dumps({"keytype": "SCHEMA", "subject": subject, "version": version, "magic": 1})


def schema_value(v: SchemaValue) -> bytes:
    out: dict[str, Any] = {
        "subject": v.subject,
        "version": v.version,
        "id": v.id,
        "schema": v.schema,
        "deleted": v.deleted,
    }
    if v.schema_type != "AVRO":
        out["schemaType"] = v.schema_type
    if v.references:
        out["references"] = [r.to_json() for r in v.references]
    return _dumps(out)


def config_key(subject: str | None) -> bytes:
    return _dumps({"keytype": "CONFIG", "subject": subject, "magic": 0})


def config_value(level: str) -> bytes:
    return _dumps({"compatibilityLevel": level})


def mode_key(subject: str | None) -> bytes:
    return _dumps({"keytype": "MODE", "subject": subject, "magic": 0})


def mode_value(mode: str) -> bytes:
    return _dumps({"mode": mode})


def subject_key(keytype: str, subject: str) -> bytes:
    """DELETE_SUBJECT or CLEAR_SUBJECT."""
    return _dumps({"keytype": keytype, "subject": subject, "magic": 0})


def subject_value(subject: str, version: int) -> bytes:
    return _dumps({"subject": subject, "version": version})


def noop_key() -> bytes:
    return _dumps({"keytype": "NOOP", "magic": 0})


def parse_json(data: bytes | None, what: str) -> dict[str, Any] | None:
    if data is None:
        return None
    try:
        value = json.loads(data)
    except (UnicodeDecodeError, ValueError) as e:
        raise RecordError(f"{what} is not JSON: {e}") from None
    if not isinstance(value, dict):
        raise RecordError(f"{what} is not a JSON object: {data[:80]!r}")
    return value


def parse_schema_value(value: dict[str, Any]) -> SchemaValue:
    try:
        refs = tuple(
            Reference(str(r["name"]), str(r["subject"]), int(r["version"])) for r in value.get("references") or []
        )
        return SchemaValue(
            str(value["subject"]),
            int(value["version"]),
            int(value["id"]),
            str(value["schema"]),
            str(value.get("schemaType") or "AVRO"),
            refs,
            bool(value.get("deleted", False)),
        )
    except (KeyError, TypeError, ValueError) as e:
        raise RecordError(f"SCHEMA value {value!r:.200} lacks or mistypes a field: {e}") from None
