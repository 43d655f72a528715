"""`.proto` text to a FileDescriptorProto and back, for the registry's Protobuf schemas (the
Java serializer registers text; the Python one a base64 FileDescriptorProto).

Parsed: syntax (proto2, proto3), package, imports (public, weak), file, message, field and enum
options whose names are fields of the options messages (custom `(ext)` options are read and
left out), messages with nested messages and enums, fields with labels, `map<K, V>` (a nested
`<Name>Entry` message with map_entry), oneofs, proto3 `optional` (a synthetic oneof), reserved
ranges and names, extension ranges, enums with reserved ranges, services with streaming rpcs.
Refused with the line named: editions, groups, `extend`. Type names are resolved as protoc
does: from the innermost scope outwards, through this file and its imports (references).

`to_text` prints a FileDescriptorProto back as .proto text (the registry's stored form).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from google.protobuf import descriptor_pb2 as pb

from logbroker.schema_registry.errors import InvalidSchema

F = pb.FieldDescriptorProto

SCALARS = {
    "double": F.TYPE_DOUBLE,
    "float": F.TYPE_FLOAT,
    "int64": F.TYPE_INT64,
    "uint64": F.TYPE_UINT64,
    "int32": F.TYPE_INT32,
    "fixed64": F.TYPE_FIXED64,
    "fixed32": F.TYPE_FIXED32,
    "bool": F.TYPE_BOOL,
    "string": F.TYPE_STRING,
    "bytes": F.TYPE_BYTES,
    "uint32": F.TYPE_UINT32,
    "sfixed32": F.TYPE_SFIXED32,
    "sfixed64": F.TYPE_SFIXED64,
    "sint32": F.TYPE_SINT32,
    "sint64": F.TYPE_SINT64,
}
SCALAR_NAMES = {v: k for k, v in SCALARS.items()}
LABELS = {"optional": F.LABEL_OPTIONAL, "required": F.LABEL_REQUIRED, "repeated": F.LABEL_REPEATED}

_TOKEN = re.compile(
    r"""
    (?P<space>\s+) | (?P<line>//[^\n]*) | (?P<block>/\*.*?\*/)
  | (?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
  | (?P<number>[-+]?(?:0[xX][0-9a-fA-F]+|\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|inf|nan)(?![\w.]))
  | (?P<ident>\.?[A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)*)
  | (?P<symbol>[{}\[\]()<>;,=:])
""",
    re.VERBOSE | re.DOTALL,
)


class _Tokens:
    def __init__(self, text: str) -> None:
        self.items: list[tuple[str, str, int]] = []
        pos, line = 0, 1
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if m is None:
                raise InvalidSchema(f"Invalid schema: unexpected {text[pos : pos + 20]!r} at line {line}")
            kind = m.lastgroup or ""
            if kind not in ("space", "line", "block"):
                self.items.append((kind, m.group(), line))
            line += m.group().count("\n")
            pos = m.end()
        self.i = 0

    def peek(self, offset: int = 0) -> str:
        j = self.i + offset
        return self.items[j][1] if j < len(self.items) else ""

    def line(self) -> int:
        return self.items[min(self.i, len(self.items) - 1)][2] if self.items else 1

    def next(self) -> str:
        if self.i >= len(self.items):
            raise InvalidSchema("Invalid schema: the text ends inside a definition")
        self.i += 1
        return self.items[self.i - 1][1]

    def kind(self) -> str:
        return self.items[self.i][0] if self.i < len(self.items) else ""

    def expect(self, value: str) -> None:
        got = self.next()
        if got != value:
            raise InvalidSchema(f"Invalid schema: expected {value!r}, got {got!r} at line {self.items[self.i - 1][2]}")

    def accept(self, value: str) -> bool:
        if self.peek() == value:
            self.i += 1
            return True
        return False

    def done(self) -> bool:
        return self.i >= len(self.items)

    def fail(self, what: str) -> InvalidSchema:
        return InvalidSchema(f"Invalid schema: {what} at line {self.line()}")


def _unquote(s: str) -> str:
    body = s[1:-1]
    return bytes(body, "utf-8").decode("unicode_escape").encode("latin-1").decode("utf-8") if "\\" in body else body


def _constant(tokens: _Tokens) -> str:
    """An option value as text: a string (unquoted), a number, an identifier, or an
    aggregate `{ ... }` (skipped, returned as "")."""
    if tokens.peek() == "{":
        depth = 0
        while True:
            t = tokens.next()
            depth += (t == "{") - (t == "}")
            if depth == 0:
                return ""
    t = tokens.next()
    if t and t[0] in "\"'":
        out = _unquote(t)
        while tokens.peek() and tokens.peek()[0] in "\"'":  # adjacent literals concatenate
            out += _unquote(tokens.next())
        return out
    return t


def _option_name(tokens: _Tokens) -> str:
    if tokens.accept("("):
        name = "(" + tokens.next() + ")"
        tokens.expect(")")
        while tokens.peek().startswith("."):
            name += tokens.next()
        return name
    return tokens.next()


def _option_statement(tokens: _Tokens, options) -> None:
    """`name = value;` after the word `option`, set on `options` (None: read and dropped)."""
    name = _option_name(tokens)
    tokens.expect("=")
    value = _constant(tokens)
    tokens.expect(";")
    if options is not None:
        _set_option(options, name, value)


def _set_option(options, name: str, value: str) -> None:
    """Sets a plain option on an options message; custom options are left out."""
    if name.startswith("(") or "." in name:
        return
    field = options.DESCRIPTOR.fields_by_name.get(name)
    if field is None:
        return
    if field.type == F.TYPE_BOOL:
        setattr(options, name, value == "true")
    elif field.type == F.TYPE_ENUM:
        ev = field.enum_type.values_by_name.get(value)
        if ev is not None:
            setattr(options, name, ev.number)
    elif field.type == F.TYPE_STRING:
        setattr(options, name, value)
    elif field.type in (F.TYPE_INT32, F.TYPE_INT64, F.TYPE_UINT32, F.TYPE_UINT64):
        setattr(options, name, int(value, 0))
    elif field.type in (F.TYPE_DOUBLE, F.TYPE_FLOAT):
        setattr(options, name, float(value))


def _number(tokens: _Tokens, what: str) -> int:
    t = tokens.next()
    try:
        return int(t, 0)
    except ValueError:
        raise InvalidSchema(
            f"Invalid schema: {what} {t!r} is not a number at line {tokens.items[tokens.i - 1][2]}"
        ) from None


def _ranges(tokens: _Tokens, max_value: int) -> tuple[list[tuple[int, int]], list[str]]:
    """`reserved`/`extensions` bodies: ranges (end exclusive) or quoted names."""
    ranges, names = [], []
    while True:
        if tokens.peek()[:1] in "\"'":
            names.append(_unquote(tokens.next()))
        else:
            start = _number(tokens, "range start")
            end = start
            if tokens.accept("to"):
                end = max_value if tokens.accept("max") else _number(tokens, "range end")
            ranges.append((start, end + 1))
        if not tokens.accept(","):
            break
    if tokens.accept("["):  # extension range options
        while not tokens.accept("]"):
            tokens.next()
    tokens.expect(";")
    return ranges, names


def parse(text: str) -> pb.FileDescriptorProto:
    """The FileDescriptorProto of .proto `text`, with its type names not resolved yet (see
    `resolve`); InvalidSchema naming the line of the first problem."""
    tokens = _Tokens(text)
    fd = pb.FileDescriptorProto(name="schema.proto")
    syntax = "proto2"
    if tokens.peek() == "edition":
        raise tokens.fail("protobuf editions are not supported")
    if tokens.accept("syntax"):
        tokens.expect("=")
        syntax = _unquote(tokens.next())
        tokens.expect(";")
        if syntax not in ("proto2", "proto3"):
            raise tokens.fail(f"unknown syntax {syntax!r}")
    if syntax == "proto3":
        fd.syntax = "proto3"
    while not tokens.done():
        word = tokens.next()
        if word == ";":
            continue
        if word == "package":
            fd.package = tokens.next()
            tokens.expect(";")
        elif word == "import":
            kind = tokens.next() if tokens.peek() in ("public", "weak") else ""
            path = _unquote(tokens.next())
            tokens.expect(";")
            if kind == "public":
                fd.public_dependency.append(len(fd.dependency))
            elif kind == "weak":
                fd.weak_dependency.append(len(fd.dependency))
            fd.dependency.append(path)
        elif word == "option":
            _option_statement(tokens, fd.options)
        elif word == "message":
            _message(tokens, fd.message_type.add(), syntax)
        elif word == "enum":
            _enum(tokens, fd.enum_type.add())
        elif word == "service":
            _service(tokens, fd.service.add())
        elif word == "extend":
            raise InvalidSchema(f"Invalid schema: extend is not supported (line {tokens.items[tokens.i - 1][2]})")
        else:
            raise InvalidSchema(f"Invalid schema: unexpected {word!r} at line {tokens.items[tokens.i - 1][2]}")
    if not fd.HasField("options") or not fd.options.ListFields():
        fd.ClearField("options")
    return fd


def _field_options(tokens: _Tokens, field: pb.FieldDescriptorProto) -> None:
    if not tokens.accept("["):
        return
    while True:
        name = _option_name(tokens)
        tokens.expect("=")
        value = _constant(tokens)
        if name == "default":
            field.default_value = value
        elif name == "json_name":
            field.json_name = value
        else:
            _set_option(field.options, name, value)
        if not tokens.accept(","):
            break
    tokens.expect("]")
    if not field.options.ListFields():
        field.ClearField("options")


def _message(tokens: _Tokens, msg: pb.DescriptorProto, syntax: str) -> None:
    msg.name = tokens.next()
    tokens.expect("{")
    synthetic: list[pb.FieldDescriptorProto] = []
    while not tokens.accept("}"):
        word = tokens.peek()
        if word == ";":
            tokens.next()
        elif word == "message":
            tokens.next()
            _message(tokens, msg.nested_type.add(), syntax)
        elif word == "enum":
            tokens.next()
            _enum(tokens, msg.enum_type.add())
        elif word == "option":
            tokens.next()
            _option_statement(tokens, msg.options)
        elif word == "reserved":
            tokens.next()
            ranges, names = _ranges(tokens, 536870911)
            for start, end in ranges:
                msg.reserved_range.add(start=start, end=end)
            msg.reserved_name.extend(names)
        elif word == "extensions":
            tokens.next()
            ranges, _names = _ranges(tokens, 536870911)
            for start, end in ranges:
                msg.extension_range.add(start=start, end=end)
        elif word == "oneof":
            tokens.next()
            index = len(msg.oneof_decl)
            msg.oneof_decl.add(name=tokens.next())
            tokens.expect("{")
            while not tokens.accept("}"):
                if tokens.accept("option"):
                    _option_statement(tokens, None)
                    continue
                field = _field(tokens, msg, syntax, in_oneof=True)
                field.oneof_index = index
        elif word in ("extend", "group"):
            raise tokens.fail(f"{word} is not supported")
        else:
            field = _field(tokens, msg, syntax, in_oneof=False)
            if field.proto3_optional:
                synthetic.append(field)
    for field in synthetic:  # proto3 optional: a oneof of its own, after the real ones
        field.oneof_index = len(msg.oneof_decl)
        name = "_" + field.name
        while any(o.name == name for o in msg.oneof_decl):
            name = "X" + name
        msg.oneof_decl.add(name=name)
    if not msg.options.ListFields():
        msg.ClearField("options")


def _camel(name: str) -> str:
    return "".join(p[:1].upper() + p[1:] for p in name.split("_"))


def _json_name(name: str) -> str:
    parts = name.split("_")
    return parts[0] + "".join(p[:1].upper() + p[1:] for p in parts[1:])


def _field(tokens: _Tokens, msg: pb.DescriptorProto, syntax: str, in_oneof: bool) -> pb.FieldDescriptorProto:
    field = msg.field.add()
    word = tokens.next()
    label = None
    if word in LABELS and not in_oneof:
        label = word
        word = tokens.next()
    if word == "group":
        raise tokens.fail("groups are not supported")
    if word == "map":
        tokens.expect("<")
        key_type = tokens.next()
        tokens.expect(",")
        value_type = tokens.next()
        tokens.expect(">")
        field.name = tokens.next()
        entry = msg.nested_type.add(name=_camel(field.name) + "Entry")
        entry.options.map_entry = True
        for number, (name, type_name) in enumerate((("key", key_type), ("value", value_type)), 1):
            f = entry.field.add(name=name, number=number, label=F.LABEL_OPTIONAL, json_name=name)
            _set_type(f, type_name)
        field.label = F.LABEL_REPEATED
        field.type_name = entry.name
        field.type = F.TYPE_MESSAGE
    else:
        _set_type(field, word)
        field.name = tokens.next()
        if label == "repeated":
            field.label = F.LABEL_REPEATED
        elif label == "required":
            if syntax == "proto3":
                raise tokens.fail(f"required field {field.name} in a proto3 file")
            field.label = F.LABEL_REQUIRED
        else:
            field.label = F.LABEL_OPTIONAL
            if label == "optional" and syntax == "proto3":
                field.proto3_optional = True
    tokens.expect("=")
    field.number = _number(tokens, f"the number of field {field.name}")
    field.json_name = _json_name(field.name)
    _field_options(tokens, field)
    tokens.expect(";")
    return field


def _set_type(field: pb.FieldDescriptorProto, type_name: str) -> None:
    if type_name in SCALARS:
        field.type = SCALARS[type_name]
    else:
        field.type_name = type_name  # message or enum: decided by `resolve`


def _enum(tokens: _Tokens, enum: pb.EnumDescriptorProto) -> None:
    enum.name = tokens.next()
    tokens.expect("{")
    while not tokens.accept("}"):
        word = tokens.next()
        if word == ";":
            continue
        if word == "option":
            _option_statement(tokens, enum.options)
        elif word == "reserved":
            ranges, names = _ranges(tokens, 2147483647)
            for start, end in ranges:
                enum.reserved_range.add(start=start, end=end - 1)  # enum ranges are inclusive
            enum.reserved_name.extend(names)
        else:
            tokens.expect("=")
            enum.value.add(name=word, number=_number(tokens, f"the value of {word}"))
            if tokens.accept("["):  # enum value options: read and dropped
                while not tokens.accept("]"):
                    tokens.next()
            tokens.expect(";")
    if not enum.options.ListFields():
        enum.ClearField("options")


def _service(tokens: _Tokens, service: pb.ServiceDescriptorProto) -> None:
    service.name = tokens.next()
    tokens.expect("{")
    while not tokens.accept("}"):
        word = tokens.next()
        if word == ";":
            continue
        if word == "option":
            _option_statement(tokens, None)
            continue
        if word != "rpc":
            raise tokens.fail(f"unexpected {word!r} in service {service.name}")
        method = service.method.add(name=tokens.next())
        tokens.expect("(")
        method.client_streaming = tokens.accept("stream")
        method.input_type = tokens.next()
        tokens.expect(")")
        tokens.expect("returns")
        tokens.expect("(")
        method.server_streaming = tokens.accept("stream")
        method.output_type = tokens.next()
        tokens.expect(")")
        if tokens.accept("{"):
            depth = 1
            while depth:
                t = tokens.next()
                depth += (t == "{") - (t == "}")
        else:
            tokens.expect(";")


# --- name resolution ------------------------------------------------------------------------


def _types_of(fd: pb.FileDescriptorProto) -> dict[str, int]:
    """Fully qualified name (".pkg.Msg.Inner") -> TYPE_MESSAGE or TYPE_ENUM."""
    out: dict[str, int] = {}
    prefix = "." + fd.package if fd.package else ""

    def walk(scope: str, messages: Iterable[pb.DescriptorProto], enums: Iterable[pb.EnumDescriptorProto]) -> None:
        for e in enums:
            out[f"{scope}.{e.name}"] = F.TYPE_ENUM
        for m in messages:
            out[f"{scope}.{m.name}"] = F.TYPE_MESSAGE
            walk(f"{scope}.{m.name}", m.nested_type, m.enum_type)

    walk(prefix, fd.message_type, fd.enum_type)
    return out


def resolve(fd: pb.FileDescriptorProto, imported: Iterable[pb.FileDescriptorProto]) -> None:
    """Fully qualifies every type name of `fd` (fields, rpc types), looking in `fd` and in the
    files it imports; InvalidSchema naming a type that is nowhere."""
    known = _types_of(fd)
    for dep in imported:
        known.update(_types_of(dep))
    package = "." + fd.package if fd.package else ""
    # every package and type name a first component may name
    prefixes = {full[:i] for full in known for i in range(1, len(full) + 1) if i == len(full) or full[i] == "."}

    def lookup(name: str, scope: str) -> str:
        if name.startswith("."):
            if name in known:
                return name
            raise InvalidSchema(f"Invalid schema: type {name} is not defined")
        first = name.split(".")[0]
        s = scope
        while True:
            candidate = f"{s}.{first}"
            if candidate in prefixes:
                full = f"{s}.{name}"
                if full in known:
                    return full
            if not s:
                break
            s = s.rsplit(".", 1)[0] if "." in s[1:] else ""
        raise InvalidSchema(f"Invalid schema: type {name} is not defined (in scope {scope or '.'})")

    def walk(scope: str, messages: Iterable[pb.DescriptorProto]) -> None:
        for m in messages:
            inner = f"{scope}.{m.name}"
            for field in m.field:
                if field.type_name and not field.HasField("type"):
                    full = lookup(field.type_name, inner)
                    field.type_name, field.type = full, known[full]
                elif field.type_name and not field.type_name.startswith("."):
                    field.type_name = lookup(field.type_name, inner)
            walk(inner, m.nested_type)

    walk(package, fd.message_type)
    for service in fd.service:
        for method in service.method:
            method.input_type = lookup(method.input_type, package)
            method.output_type = lookup(method.output_type, package)


# --- printing -------------------------------------------------------------------------------


def to_text(fd: pb.FileDescriptorProto) -> str:
    """`fd` as .proto text (type names fully qualified, as resolved)."""
    out: list[str] = [f'syntax = "{fd.syntax or "proto2"}";']
    if fd.package:
        out.append(f"package {fd.package};")
    if fd.dependency:
        out.append("")
        for i, dep in enumerate(fd.dependency):
            kind = "public " if i in fd.public_dependency else "weak " if i in fd.weak_dependency else ""
            out.append(f'import {kind}"{dep}";')
    options = _options_text(fd.options) if fd.HasField("options") else []
    if options:
        out.append("")
        out += [f"option {o};" for o in options]
    for m in fd.message_type:
        out.append("")
        _print_message(m, fd.syntax == "proto3", out, "")
    for e in fd.enum_type:
        out.append("")
        _print_enum(e, out, "")
    for s in fd.service:
        out.append("")
        out.append(f"service {s.name} {{")
        for m in s.method:
            cs, ss = "stream " if m.client_streaming else "", "stream " if m.server_streaming else ""
            out.append(f"  rpc {m.name}({cs}{m.input_type}) returns ({ss}{m.output_type});")
        out.append("}")
    return "\n".join(out) + "\n"


def _value_text(field, value) -> str:
    if field.type == F.TYPE_BOOL:
        return "true" if value else "false"
    if field.type == F.TYPE_ENUM:
        return field.enum_type.values_by_number[value].name
    if field.type == F.TYPE_STRING:
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return str(value)


def _options_text(options) -> list[str]:
    return [
        f"{field.name} = {_value_text(field, value)}"
        for field, value in options.ListFields()
        if not _is_repeated(field)
    ]


def _is_repeated(field) -> bool:
    repeated = getattr(field, "is_repeated", None)  # protobuf 6+; `label` before
    return bool(repeated) if repeated is not None else field.label == F.LABEL_REPEATED


def _print_message(m: pb.DescriptorProto, proto3: bool, out: list[str], indent: str) -> None:
    out.append(f"{indent}message {m.name} {{")
    inner = indent + "  "
    for o in _options_text(m.options) if m.HasField("options") else []:
        out.append(f"{inner}option {o};")
    maps = {f"{m.name}.{n.name}" for n in m.nested_type if n.options.map_entry}
    entries = {n.name: n for n in m.nested_type if n.options.map_entry}
    synthetic = {f.oneof_index for f in m.field if f.proto3_optional}
    for n in m.nested_type:
        if not n.options.map_entry:
            _print_message(n, proto3, out, inner)
    for e in m.enum_type:
        _print_enum(e, out, inner)
    printed_oneofs: set[int] = set()
    for f in m.field:
        if f.HasField("oneof_index") and f.oneof_index not in synthetic:
            if f.oneof_index in printed_oneofs:
                continue
            printed_oneofs.add(f.oneof_index)
            out.append(f"{inner}oneof {m.oneof_decl[f.oneof_index].name} {{")
            for g in m.field:
                if g.HasField("oneof_index") and g.oneof_index == f.oneof_index:
                    out.append(f"{inner}  {_field_text(g, proto3, entries, maps, oneof=True)}")
            out.append(f"{inner}}}")
        else:
            out.append(f"{inner}{_field_text(f, proto3, entries, maps, oneof=False)}")
    for r in m.reserved_range:
        out.append(f"{inner}reserved {r.start}" + (f" to {r.end - 1}" if r.end - 1 > r.start else "") + ";")
    if m.reserved_name:
        out.append(f"{inner}reserved " + ", ".join(f'"{n}"' for n in m.reserved_name) + ";")
    for r in m.extension_range:
        out.append(f"{inner}extensions {r.start} to {r.end - 1};")
    out.append(f"{indent}}}")


def _type_text(f: pb.FieldDescriptorProto) -> str:
    return f.type_name if f.type_name else SCALAR_NAMES[f.type]


def _field_text(f: pb.FieldDescriptorProto, proto3: bool, entries: dict, maps: set, oneof: bool) -> str:
    entry_name = f.type_name.rsplit(".", 1)[-1] if f.type_name else ""
    if f.label == F.LABEL_REPEATED and entry_name in entries and f.type == F.TYPE_MESSAGE:
        entry = entries[entry_name]
        k, v = entry.field[0], entry.field[1]
        head = f"map<{_type_text(k)}, {_type_text(v)}> {f.name}"
    else:
        label = ""
        if not oneof:
            if f.label == F.LABEL_REPEATED:
                label = "repeated "
            elif f.label == F.LABEL_REQUIRED:
                label = "required "
            elif f.proto3_optional or not proto3:
                label = "optional "
        head = f"{label}{_type_text(f)} {f.name}"
    opts = []
    if f.HasField("default_value"):
        dv = f.default_value
        opts.append(f'default = "{dv}"' if f.type in (F.TYPE_STRING, F.TYPE_BYTES) else f"default = {dv}")
    if f.HasField("json_name") and f.json_name != _json_name(f.name):
        opts.append(f'json_name = "{f.json_name}"')
    if f.HasField("options"):
        opts += _options_text(f.options)
    return f"{head} = {f.number}" + (f" [{', '.join(opts)}]" if opts else "") + ";"


def _print_enum(e: pb.EnumDescriptorProto, out: list[str], indent: str) -> None:
    out.append(f"{indent}enum {e.name} {{")
    for o in _options_text(e.options) if e.HasField("options") else []:
        out.append(f"{indent}  option {o};")
    for v in e.value:
        out.append(f"{indent}  {v.name} = {v.number};")
    for r in e.reserved_range:
        out.append(f"{indent}  reserved {r.start}" + (f" to {r.end}" if r.end > r.start else "") + ";")
    if e.reserved_name:
        out.append(f"{indent}  reserved " + ", ".join(f'"{n}"' for n in e.reserved_name) + ";")
    out.append(f"{indent}}}")
