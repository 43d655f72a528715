"""JSON Schema in the registry: parsing (checked against its draft's meta-schema, with
references), the stored form, and compatibility.

Compatibility asks whether every document valid under the writer's schema is valid under the
reader's. That is undecidable for JSON Schema in general, so, as Confluent's registry does, it
is decided by comparing the two schemas structurally, keyword by keyword, and anything this
comparison does not understand counts as a change only when the keyword's value differs:

    type          the reader's types include the writer's (integer is a number)
    properties    a property the writer has: the reader's schema for it, recursively; the
                  reader may drop it only when its content model is open (additionalProperties
                  not false); a property only the reader has: the writer's model must be closed
                  (else a writer's document may carry it with any value), or the reader's
                  schema for it must accept anything
    required      the reader requires nothing the writer does not
    additionalProperties   the reader's is no stricter (false only if the writer's is false)
    items         recursively; enum: the reader's values include the writer's
    minimum, minLength, minItems, minProperties (and exclusive*): the reader's no higher;
    maximum, maxLength, maxItems, maxProperties: no lower; pattern, format, const,
    multipleOf: the same
    oneOf, anyOf  every writer branch is accepted by some reader branch (a schema that is not
                  a oneOf/anyOf is one branch)
    $ref          resolved (within the schema, and to references by their name) before comparing

Stored form: the submitted JSON, re-serialised compactly with its key order kept.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jsonschema.exceptions
import jsonschema.validators
import referencing
import referencing.exceptions
import referencing.jsonschema

from logbroker.schema_registry.errors import InvalidSchema
from logbroker.schema_registry.records import Reference

NAME = "JSON"


Resolve = Callable[[Reference], tuple[str, tuple[Reference, ...]]]


@dataclass
class Parsed:
    schema: Any
    registry: referencing.Registry


def stored_form(text: str) -> str:
    try:
        return json.dumps(json.loads(text), separators=(",", ":"), ensure_ascii=False)
    except ValueError as e:
        raise InvalidSchema(f"Invalid schema: not JSON: {e}") from None


def parse(text: str, references: tuple[Reference, ...], resolve: Resolve) -> Parsed:
    try:
        schema = json.loads(text)
    except ValueError as e:
        raise InvalidSchema(f"Invalid schema: not JSON: {e}") from None
    if not isinstance(schema, (dict, bool)):
        raise InvalidSchema("Invalid schema: a JSON Schema is an object or a boolean")
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.exceptions.SchemaError as e:
        raise InvalidSchema(f"Invalid schema: {e.message} at {'/'.join(map(str, e.absolute_path)) or '/'}") from None
    resources = []
    seen: set[tuple[str, int]] = set()

    def load(refs: tuple[Reference, ...]) -> None:
        for ref in refs:
            if (ref.subject, ref.version) in seen:
                continue
            seen.add((ref.subject, ref.version))
            ref_text, ref_refs = resolve(ref)
            load(ref_refs)
            resources.append((ref.name, referencing.jsonschema.DRAFT202012.create_resource(json.loads(ref_text))))

    load(references)
    return Parsed(schema, referencing.Registry().with_resources(resources))


def incompatibilities(reader: Parsed, writer: Parsed) -> list[str]:
    """Why a document valid under `writer` may be invalid under `reader` (empty: it may not)."""
    out: list[str] = []
    _compare(_Side(reader), reader.schema, _Side(writer), writer.schema, "#", out, set())
    return out


class _Side:
    def __init__(self, parsed: Parsed) -> None:
        self.root = parsed.schema
        self.resolver = parsed.registry.resolver()

    def deref(self, schema: Any) -> Any:
        seen = 0
        while isinstance(schema, dict) and "$ref" in schema and seen < 32:
            ref = schema["$ref"]
            seen += 1
            if ref.startswith("#"):
                target: Any = self.root
                for part in [p for p in ref[1:].split("/") if p]:
                    part = part.replace("~1", "/").replace("~0", "~")
                    if isinstance(target, dict) and part in target:
                        target = target[part]
                    elif isinstance(target, list) and part.isdigit() and int(part) < len(target):
                        target = target[int(part)]
                    else:
                        return schema  # left as it is: compared by value
                schema = target
            else:
                try:
                    schema = self.resolver.lookup(ref).contents
                except referencing.exceptions.Unresolvable:
                    return schema
        return schema


_NUMERIC = ("integer", "number")


def _types(schema: Any) -> set[str] | None:
    if not isinstance(schema, dict) or "type" not in schema:
        return None  # any type
    t = schema["type"]
    return set(t) if isinstance(t, list) else {t}


def _accepts_anything(schema: Any) -> bool:
    return schema is True or schema == {}


def _branches(schema: Any) -> list[Any] | None:
    if isinstance(schema, dict):
        for k in ("oneOf", "anyOf"):
            if k in schema and len(schema) == 1:
                return list(schema[k])
    return None


def _compare(rs: _Side, reader: Any, ws: _Side, writer: Any, at: str, out: list[str], seen: set) -> None:
    reader, writer = rs.deref(reader), ws.deref(writer)
    key = (id(reader), id(writer))
    if key in seen:
        return  # a recursive schema: already being compared
    seen = seen | {key}
    if reader == writer or _accepts_anything(reader):
        return
    if _accepts_anything(writer):
        out.append(f"{at}: the reader constrains what the writer leaves open")
        return
    if writer is False:
        return  # the writer produces nothing here
    if reader is False:
        out.append(f"{at}: the reader accepts nothing where the writer accepts documents")
        return
    rb, wb = _branches(reader), _branches(writer)
    if rb is not None or wb is not None:
        for i, w in enumerate(wb if wb is not None else [writer]):
            if not any(not _try(rs, r, ws, w, f"{at}/{i}", seen) for r in (rb if rb is not None else [reader])):
                out.append(f"{at}: the writer's branch {i} is accepted by none of the reader's")
        return
    if not isinstance(reader, dict) or not isinstance(writer, dict):
        out.append(f"{at}: changed from {json.dumps(writer)[:80]} to {json.dumps(reader)[:80]}")
        return
    rt, wt = _types(reader), _types(writer)
    if rt is not None:
        if wt is None:
            out.append(f"{at}: type narrowed from any to {sorted(rt)}")
        else:
            missing = {t for t in wt if t not in rt and not (t == "integer" and "number" in rt)}
            if missing:
                out.append(f"{at}: type narrowed: the reader does not accept {sorted(missing)}")
    if "enum" in reader:
        if "enum" not in writer:
            out.append(f"{at}: enum added")
        else:
            extra = [v for v in writer["enum"] if v not in reader["enum"]]
            if extra:
                out.append(f"{at}: enum values removed: {json.dumps(extra)[:120]}")
    for k in ("pattern", "format", "const", "multipleOf"):
        if k in reader and reader.get(k) != writer.get(k):
            out.append(f"{at}: {k} changed from {json.dumps(writer.get(k))} to {json.dumps(reader[k])}")
    for k in ("minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties"):
        if k in reader and (k not in writer or _num(writer[k]) < _num(reader[k])):
            out.append(f"{at}: {k} raised to {reader[k]}")
    for k in ("maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties"):
        if k in reader and (k not in writer or _num(writer[k]) > _num(reader[k])):
            out.append(f"{at}: {k} lowered to {reader[k]}")
    newly_required = set(reader.get("required", [])) - set(writer.get("required", []))
    if newly_required:
        out.append(f"{at}: required properties added: {sorted(newly_required)}")
    _compare_properties(rs, reader, ws, writer, at, out, seen)
    if "items" in reader or "items" in writer:
        r_items, w_items = reader.get("items", True), writer.get("items", True)
        if isinstance(r_items, list) or isinstance(w_items, list):
            if r_items != w_items:
                out.append(f"{at}/items: tuple items changed")
        else:
            _compare(rs, r_items, ws, w_items, f"{at}/items", out, seen)


def _compare_properties(rs: _Side, reader: dict, ws: _Side, writer: dict, at: str, out: list[str], seen: set) -> None:
    r_props, w_props = reader.get("properties", {}), writer.get("properties", {})
    r_extra, w_extra = reader.get("additionalProperties", True), writer.get("additionalProperties", True)
    for name, w_schema in w_props.items():
        if name in r_props:
            _compare(rs, r_props[name], ws, w_schema, f"{at}/properties/{name}", out, seen)
        elif r_extra is False:
            out.append(f"{at}/properties/{name}: removed from a closed content model")
        else:
            _compare(rs, r_extra, ws, w_schema, f"{at}/properties/{name}", out, seen)
    for name, r_schema in r_props.items():
        if name in w_props or w_extra is False:
            continue
        _compare(rs, r_schema, ws, w_extra, f"{at}/properties/{name}", out, seen)
    if r_extra is not True and w_extra is not False and not (isinstance(r_extra, dict) and r_extra == w_extra):
        if r_extra is False:
            out.append(f"{at}: additionalProperties closed (the writer's model is open)")
        else:
            _compare(rs, r_extra, ws, w_extra, f"{at}/additionalProperties", out, seen)


def _try(rs: _Side, reader: Any, ws: _Side, writer: Any, at: str, seen: set) -> list[str]:
    out: list[str] = []
    _compare(rs, reader, ws, writer, at, out, seen)
    return out


def _num(v: Any) -> float:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0.0
