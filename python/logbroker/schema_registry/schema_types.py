"""The schema types the registry serves, by their REST name (`schemaType`; AVRO when left out)."""

from __future__ import annotations

from types import ModuleType

from logbroker.schema_registry import avro_type, json_type, protobuf_type

TYPES: dict[str, ModuleType] = {m.NAME: m for m in (avro_type, json_type, protobuf_type)}
