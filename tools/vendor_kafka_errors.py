#!/usr/bin/env python3
"""Vendor Kafka's error table (specs/errors/errors.json) from Apache Kafka's Java sources.

    python tools/vendor_kafka_errors.py JAVA_SRC --version 4.1.1 --source "where JAVA_SRC came from"

JAVA_SRC is a directory holding Kafka's client sources by package (`org/apache/kafka/...`):
`clients/src/main/java` of a Kafka checkout, or an unzipped
`org.apache.kafka:kafka-clients:<version>:sources` jar. Read from it:

- `org/apache/kafka/common/protocol/Errors.java`: every enum entry
  `NAME(code, "default message" [+ "..."], ExceptionClass::new)`, in order;
- the exception classes (`org/apache/kafka/common/errors/*.java` and whatever Errors.java
  imports): an error is retriable when its exception class extends
  `org.apache.kafka.common.errors.RetriableException`, directly or through its superclasses.

Writes python/logbroker/protocol/specs/errors/errors.json (the format is described in its
header and in tools/gen_errors.py, which generates the Python and Rust tables from it).
This runs only when Kafka is updated; review the diff of errors.json, then run
tools/gen_errors.py.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "python" / "logbroker" / "protocol" / "specs" / "errors" / "errors.json"
ERRORS_JAVA = "org/apache/kafka/common/protocol/Errors.java"
RETRIABLE = "org.apache.kafka.common.errors.RetriableException"

LICENSE = """\
// Licensed to the Apache Software Foundation (ASF) under one or more
// contributor license agreements.  See the NOTICE file distributed with
// this work for additional information regarding copyright ownership.
// The ASF licenses this file to You under the Apache License, Version 2.0
// (the "License"); you may not use this file except in compliance with
// the License.  You may obtain a copy of the License at
//
//    http://www.apache.org/licenses/LICENSE-2.0
//
// Unless required by applicable law or agreed to in writing, software
// distributed under the License is distributed on an "AS IS" BASIS,
// WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
// See the License for the specific language governing permissions and
// limitations under the License.
"""

HEADER = """\
//
// Kafka's error codes: the entries of org.apache.kafka.common.protocol.Errors, in order.
// Vendored by tools/vendor_kafka_errors.py from Kafka's Java sources (see "kafkaVersion"
// and "source"); tools/gen_errors.py generates the Python and Rust tables from this file.
// Each entry: "code" (int16 on the wire), "name" (the enum constant), "exception" (the
// simple name of the ApiException class Kafka builds for it, null for NONE), "retriable"
// (that class extends RetriableException, directly or not) and "message" (the default
// message Errors.java gives the exception, null for NONE).
"""


def java_string(text: str, i: int) -> tuple[str, int]:
    """The Java string literal starting at text[i] ('"'): its value and the index after it."""
    assert text[i] == '"'
    out, i = [], i + 1
    escapes = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "'": "'", "\\": "\\"}
    while text[i] != '"':
        if text[i] == "\\":
            if text[i + 1] == "u":
                out.append(chr(int(text[i + 2 : i + 6], 16)))
                i += 6
            else:
                out.append(escapes[text[i + 1]])
                i += 2
        else:
            out.append(text[i])
            i += 1
    return "".join(out), i + 1


def split_args(text: str, i: int) -> tuple[list[str], int]:
    """The top-level, comma-separated arguments of the call whose '(' is at text[i]."""
    assert text[i] == "("
    args, depth, start, i = [], 0, i + 1, i + 1
    while True:
        c = text[i]
        if c == '"':
            i = java_string(text, i)[1]
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            if depth == 0:
                args.append(text[start:i].strip())
                return args, i + 1
            depth -= 1
        elif c == "," and depth == 0:
            args.append(text[start:i].strip())
            start = i + 1
        i += 1


def concat(expr: str) -> str | None:
    """The value of `null` or of string literals joined with '+'."""
    if expr == "null":
        return None
    parts, i = [], 0
    while i < len(expr):
        if expr[i] == '"':
            value, i = java_string(expr, i)
            parts.append(value)
        elif expr[i].isspace() or expr[i] == "+":
            i += 1
        else:
            raise ValueError(f"not a string concatenation: {expr!r}")
    return "".join(parts)


def strip_java_comments(text: str) -> str:
    """`text` without /* */ and // comments (string literals kept as they are)."""
    token = re.compile(r'"(?:\\.|[^"\\\n])*"|/\*.*?\*/|//[^\n]*', flags=re.DOTALL)
    return token.sub(lambda m: m.group(0) if m.group(0).startswith('"') else " ", text)


def read_entries(src: Path) -> list[dict]:
    text = strip_java_comments((src / ERRORS_JAVA).read_text(encoding="utf-8"))
    i = text.index("{", text.index("public enum Errors")) + 1
    imports = dict(re.findall(r"^import\s+([\w.]+\.(\w+))\s*;", text, flags=re.MULTILINE))
    imports = {simple: full for full, simple in imports.items()}
    entries = []
    while True:
        m = re.compile(r"\s*([A-Z][A-Z0-9_]*)\s*").match(text, i)
        assert m and text[m.end()] == "(", text[i : i + 80]
        args, i = split_args(text, m.end())
        code, message, builder = args
        ctor = re.fullmatch(r"(\w+)::new", builder) or re.search(r"\bnew\s+(\w+)\s*\(", builder)
        exception = ctor.group(1) if ctor else None
        full = None if exception is None else imports.get(exception, f"org.apache.kafka.common.protocol.{exception}")
        entries.append(
            {
                "code": int(code),
                "name": m.group(1),
                "exception": exception,
                "retriable": full is not None and is_retriable(src, full),
                "message": concat(message),
            }
        )
        sep = re.compile(r"\s*([,;])").match(text, i)
        assert sep, text[i : i + 80]
        i = sep.end()
        if sep.group(1) == ";":
            return entries


def is_retriable(src: Path, full: str) -> bool:
    """Whether class `full` (a qualified name) extends RetriableException, following the
    superclasses that are in the sources."""
    seen = set()
    while full != RETRIABLE:
        if full in seen:
            raise ValueError(f"class cycle at {full}")
        seen.add(full)
        path = src / (full.replace(".", "/") + ".java")
        if not path.exists():  # left Kafka's sources (RuntimeException, ...): not retriable
            return False
        text = strip_java_comments(path.read_text(encoding="utf-8"))
        simple = full.rsplit(".", 1)[1]
        m = re.search(rf"\bclass\s+{simple}\b(?:\s*<[^>]*>)?\s+extends\s+([\w.]+)", text)
        if m is None:
            return False
        parent = m.group(1)
        if "." not in parent:
            imported = re.search(rf"^import\s+([\w.]+\.{parent})\s*;", text, flags=re.MULTILINE)
            parent = imported.group(1) if imported else f"{full.rsplit('.', 1)[0]}.{parent}"
        full = parent
    return True


def render(entries: list[dict], version: str, source: str) -> str:
    lines = [
        LICENSE + HEADER,
        "{",
        f'  "kafkaVersion": {json.dumps(version)},',
        f'  "source": {json.dumps(source)},',
        '  "errors": [',
    ]
    for n, e in enumerate(entries):
        comma = "," if n + 1 < len(entries) else ""
        lines.append("    " + json.dumps(e, ensure_ascii=False) + comma)
    lines += ["  ]", "}", ""]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("java_src", type=Path, help="directory holding org/apache/kafka/... sources")
    ap.add_argument("--version", required=True, help="the Kafka release, e.g. 4.1.1")
    ap.add_argument("--source", required=True, help="where the sources came from (artifact or commit)")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    entries = read_entries(args.java_src)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(render(entries, args.version, args.source), encoding="utf-8")
    print(f"{args.out}: {len(entries)} errors, {sum(e['retriable'] for e in entries)} retriable")


if __name__ == "__main__":
    main()
