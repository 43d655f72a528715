"""Protobuf schemas in the registry: accepted as .proto text (the Java serializer) or as a
base64 FileDescriptorProto (the Python one), stored as .proto text with its type names fully
qualified (proto_text.py prints it; `canonical`),
served back as text or, with `?format=serialized`, as a base64 FileDescriptorProto. Imports
are references (a reference's name is the import path) or Protobuf's well-known types
(google/protobuf/*.proto), which every registry knows.

Compatibility, as Confluent's registry decides it for Protobuf (the same in both directions),
comparing the writer's file with the reader's:

    incompatible   package changed; a message removed; a field's kind changed (scalar,
                   message, enum, repeated or not); a scalar changed outside the wire-compatible
                   groups {int32, uint32, int64, uint64, bool}, {sint32, sint64},
                   {fixed32, sfixed32}, {fixed64, sfixed64}, {string, bytes}; a message or enum
                   field's type renamed; a required field added or removed; a field moved into
                   an existing oneof, or several fields into a new one
    compatible     anything else: fields, messages, enums and enum values added; fields removed
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from dataclasses import dataclass

from google.protobuf import descriptor_pb2 as pb
from google.protobuf import descriptor_pool
from google.protobuf.message import DecodeError

from logbroker.schema_registry import proto_text
from logbroker.schema_registry.errors import InvalidSchema
from logbroker.schema_registry.records import Reference

NAME = "PROTOBUF"
F = pb.FieldDescriptorProto

Resolve = Callable[[Reference], tuple[str, tuple[Reference, ...]]]

WELL_KNOWN = (
    "any",
    "api",
    "duration",
    "empty",
    "field_mask",
    "source_context",
    "struct",
    "timestamp",
    "type",
    "wrappers",
    "descriptor",
)


def _well_known(path: str) -> pb.FileDescriptorProto | None:
    if not path.startswith("google/protobuf/") or path[len("google/protobuf/") : -len(".proto")] not in WELL_KNOWN:
        return None
    import importlib

    importlib.import_module(f"google.protobuf.{path[len('google/protobuf/') : -len('.proto')]}_pb2")
    out = pb.FileDescriptorProto()
    descriptor_pool.Default().FindFileByName(path).CopyToProto(out)
    return out


def _descriptor_of(text: str) -> pb.FileDescriptorProto | None:
    """A base64 FileDescriptorProto, else None (the text is .proto source)."""
    stripped = text.strip()
    if not stripped or any(c.isspace() for c in stripped) or ";" in stripped:
        return None
    try:
        raw = base64.b64decode(stripped, validate=True)
    except (binascii.Error, ValueError):
        return None
    fd = pb.FileDescriptorProto()
    try:
        fd.ParseFromString(raw)
    except DecodeError:
        return None
    return fd if fd.message_type or fd.enum_type or fd.service or fd.package else None


def stored_form(text: str) -> str:
    fd = _descriptor_of(text)
    return proto_text.to_text(fd if fd is not None else proto_text.parse(text))


@dataclass
class Parsed:
    file: pb.FileDescriptorProto  # type names resolved
    imports: list[pb.FileDescriptorProto]


def parse(text: str, references: tuple[Reference, ...], resolve: Resolve) -> Parsed:
    fd = proto_text.parse(text)
    by_name = {r.name: r for r in references}
    imports: list[pb.FileDescriptorProto] = []
    seen: set[str] = set()

    def load(paths, refs_by_name: dict[str, Reference]) -> None:
        for path in paths:
            if path in seen:
                continue
            seen.add(path)
            known = _well_known(path)
            if known is not None:
                imports.append(known)
                continue
            ref = refs_by_name.get(path)
            if ref is None:
                raise InvalidSchema(f"Invalid schema: import {path!r} is neither a reference nor a well-known type")
            ref_text, ref_refs = resolve(ref)
            dep = proto_text.parse(ref_text)
            dep.name = path
            load(dep.dependency, {r.name: r for r in ref_refs})
            proto_text.resolve(dep, imports)
            imports.append(dep)

    load(fd.dependency, by_name)
    proto_text.resolve(fd, imports)
    return Parsed(fd, imports)


def parse_stored(text: str) -> pb.FileDescriptorProto:
    """A stored schema (`canonical` text) as a file, its well-known imports resolved; types
    from other subjects (references) are not looked up: InvalidSchema names them."""
    fd = proto_text.parse(text)
    imports = [k for k in (_well_known(path) for path in fd.dependency) if k is not None]
    proto_text.resolve(fd, imports)
    return fd


def messages_of(fd: pb.FileDescriptorProto) -> tuple[dict[str, pb.DescriptorProto], dict[str, pb.EnumDescriptorProto]]:
    """Every message and enum of `fd` and of the well-known files it imports, by full name
    (with the leading dot, as resolved type names are written)."""
    messages: dict[str, pb.DescriptorProto] = {}
    enums: dict[str, pb.EnumDescriptorProto] = {}
    files = [fd] + [k for k in (_well_known(path) for path in fd.dependency) if k is not None]
    for f in files:

        def walk(scope: str, ms, es) -> None:
            for e in es:
                enums[f"{scope}.{e.name}"] = e
            for m in ms:
                messages[f"{scope}.{m.name}"] = m
                walk(f"{scope}.{m.name}", m.nested_type, m.enum_type)

        walk("." + f.package if f.package else "", f.message_type, f.enum_type)
    return messages, enums


def canonical(parsed: Parsed) -> str:
    """The stored form: the text of the resolved file (every type name fully qualified), so a
    schema written with relative names and its descriptor are the same schema."""
    return proto_text.to_text(parsed.file)


def serialized(parsed: Parsed) -> str:
    """`?format=serialized`: the file as a base64 FileDescriptorProto."""
    return base64.standard_b64encode(parsed.file.SerializeToString()).decode("ascii")


# --- compatibility --------------------------------------------------------------------------

_GROUPS = [
    {F.TYPE_INT32, F.TYPE_UINT32, F.TYPE_INT64, F.TYPE_UINT64, F.TYPE_BOOL},
    {F.TYPE_SINT32, F.TYPE_SINT64},
    {F.TYPE_FIXED32, F.TYPE_SFIXED32},
    {F.TYPE_FIXED64, F.TYPE_SFIXED64},
    {F.TYPE_STRING, F.TYPE_BYTES},
]


def _messages(fd: pb.FileDescriptorProto) -> dict[str, pb.DescriptorProto]:
    out: dict[str, pb.DescriptorProto] = {}

    def walk(scope: str, messages) -> None:
        for m in messages:
            out[f"{scope}.{m.name}"] = m
            walk(f"{scope}.{m.name}", m.nested_type)

    walk("." + fd.package if fd.package else "", fd.message_type)
    return out


def _kind(f: pb.FieldDescriptorProto) -> str:
    base = "message" if f.type == F.TYPE_MESSAGE else "enum" if f.type == F.TYPE_ENUM else "scalar"
    return ("repeated " if f.label == F.LABEL_REPEATED else "") + base


def _scalar_compatible(a: int, b: int) -> bool:
    return a == b or any(a in g and b in g for g in _GROUPS)


def incompatibilities(reader: Parsed, writer: Parsed) -> list[str]:
    old, new = writer.file, reader.file
    out: list[str] = []
    if old.package != new.package:
        out.append(f"package changed from {old.package!r} to {new.package!r}")
    old_messages, new_messages = _messages(old), _messages(new)
    for name, om in old_messages.items():
        nm = new_messages.get(name)
        if nm is None:
            if not om.options.map_entry:
                out.append(f"message {name} removed")
            continue
        new_fields = {f.number: f for f in nm.field}
        for of in om.field:
            nf = new_fields.get(of.number)
            at = f"{name}.{of.name} (field {of.number})"
            if nf is None:
                if of.label == F.LABEL_REQUIRED:
                    out.append(f"{at}: a required field removed")
                continue
            if _kind(of) != _kind(nf):
                out.append(f"{at}: kind changed from {_kind(of)} to {_kind(nf)}")
            elif of.type not in (F.TYPE_MESSAGE, F.TYPE_ENUM):
                if not _scalar_compatible(of.type, nf.type):
                    out.append(
                        f"{at}: type changed from {proto_text.SCALAR_NAMES[of.type]} to "
                        f"{proto_text.SCALAR_NAMES[nf.type]}"
                    )
            elif of.type_name != nf.type_name and not _same_map(old_messages, new_messages, of, nf):
                out.append(f"{at}: type changed from {of.type_name} to {nf.type_name}")
            if (of.label == F.LABEL_REQUIRED) != (nf.label == F.LABEL_REQUIRED):
                out.append(f"{at}: required changed")
        old_numbers = {f.number for f in om.field}
        for nf in nm.field:
            if nf.number not in old_numbers and nf.label == F.LABEL_REQUIRED:
                out.append(f"{name}.{nf.name} (field {nf.number}): a required field added")
        out += _oneof_moves(name, om, nm)
    return out


def _same_map(old_messages: dict, new_messages: dict, of: pb.FieldDescriptorProto, nf: pb.FieldDescriptorProto) -> bool:
    """Two map fields whose entries have the same key and value types (entry names differ when
    the field is renamed)."""
    oe, ne = old_messages.get(of.type_name), new_messages.get(nf.type_name)
    if oe is None or ne is None or not (oe.options.map_entry and ne.options.map_entry):
        return False
    return [(f.type, f.type_name) for f in oe.field] == [(f.type, f.type_name) for f in ne.field]


def _oneof_moves(name: str, om: pb.DescriptorProto, nm: pb.DescriptorProto) -> list[str]:
    def real_oneof(m: pb.DescriptorProto, f: pb.FieldDescriptorProto) -> int | None:
        return f.oneof_index if f.HasField("oneof_index") and not f.proto3_optional else None

    old_of = {f.number: real_oneof(om, f) for f in om.field}
    moved: dict[int, list[int]] = {}
    for nf in nm.field:
        o = real_oneof(nm, nf)
        if o is not None and nf.number in old_of and old_of[nf.number] is None:
            moved.setdefault(o, []).append(nf.number)
    out = []
    old_oneof_names = {om.oneof_decl[i].name for i in set(old_of.values()) if i is not None}
    for index, numbers in moved.items():
        oneof_name = nm.oneof_decl[index].name
        if oneof_name in old_oneof_names:
            out.append(f"{name}: field(s) {numbers} moved into the existing oneof {oneof_name}")
        elif len(numbers) > 1:
            out.append(f"{name}: fields {numbers} moved into the new oneof {oneof_name}")
    return out
