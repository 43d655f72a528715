"""Avro schemas in the registry: parsing (with references), the stored form, and Avro's own
reader/writer compatibility (the `avro` package's ReaderWriterCompatibilityChecker, the Python
port of Avro's SchemaCompatibility, which Confluent's checks are).

Stored form: the submitted JSON, re-serialised compactly (no whitespace, key order kept), so
two submissions that differ only in layout are the same schema, as a Confluent registry without
`normalize` sees them. A schema's references (named types in other subjects) are parsed first,
into the same names, so the schema may use them by name.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import avro.compatibility
import avro.errors
import avro.name
import avro.schema

from logbroker.schema_registry.errors import InvalidSchema
from logbroker.schema_registry.records import Reference

NAME = "AVRO"


Resolve = Callable[[Reference], tuple[str, tuple[Reference, ...]]]


def stored_form(text: str) -> str:
    try:
        return json.dumps(json.loads(text), separators=(",", ":"), ensure_ascii=False)
    except ValueError as e:
        raise InvalidSchema(f"Invalid schema: not JSON: {e}") from None


def parse(text: str, references: tuple[Reference, ...], resolve: Resolve) -> avro.schema.Schema:
    """The parsed schema; InvalidSchema naming the problem. `resolve` gives a reference's
    schema text and its own references."""
    names = avro.name.Names()
    seen: set[tuple[str, int]] = set()

    def load(refs: tuple[Reference, ...]) -> None:
        for ref in refs:
            if (ref.subject, ref.version) in seen:
                continue
            seen.add((ref.subject, ref.version))
            ref_text, ref_refs = resolve(ref)
            load(ref_refs)
            _make(ref_text, names, f"reference {ref.name} ({ref.subject} version {ref.version})")

    load(references)
    return _make(text, names, "schema")


def _make(text: str, names: avro.name.Names, what: str) -> avro.schema.Schema:
    try:
        data = json.loads(text)
    except ValueError as e:
        raise InvalidSchema(f"Invalid {what}: not JSON: {e}") from None
    try:
        return avro.schema.make_avsc_object(data, names)
    except (avro.errors.AvroException, TypeError, ValueError, KeyError) as e:
        raise InvalidSchema(f"Invalid {what}: {e}") from None


def incompatibilities(reader: avro.schema.Schema, writer: avro.schema.Schema) -> list[str]:
    """Why data written with `writer` cannot be read with `reader` (empty: it can)."""
    result = avro.compatibility.ReaderWriterCompatibilityChecker().get_compatibility(reader, writer)
    if result.compatibility is avro.compatibility.SchemaCompatibilityType.compatible:
        return []
    kinds = [getattr(k, "value", str(k)) for k in (result.incompatibilities or [])]
    locations = sorted(result.locations or [])
    messages = sorted(str(m) for m in (result.messages or []))
    return [
        f"{', '.join(kinds) or 'incompatible'} at {', '.join(locations) or '/'}"
        + (f" ({', '.join(messages)})" if messages else "")
    ]
