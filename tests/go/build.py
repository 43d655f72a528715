"""The Go programs the tests run: each is a module of its own, tests/go/<name>/ (main.go, go.mod,
go.sum), built into ~/.cache/logbroker-compat/go-programs/<name>/<name> (LOGBROKER_COMPAT_CACHE
overrides the root) by `program(name)`, which tests/prepare.py calls before pytest starts and
the tests call again to get the binary.

The go command is the franz-go suite's (tests/compat/franz_go.py find_go and go_env: Go 1.21+,
fetching the toolchain a go.mod asks for through the module proxy when it is older; without Go
it raises RuntimeError naming what is missing). Dependencies come from the module cache, or
through the module proxy into it, checked against the program's go.sum (-mod=readonly: go.mod
and go.sum are never rewritten). franz-go itself is the suite's pinned v1.22.3: go.sum must
record the suite's h1 for it (franz_go.H1), and once the suite is prepared the module is in the
cache already, so nothing is downloaded twice.

A program is rebuilt when its source changes: built.json records the sha256 of its files."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import time
from pathlib import Path

from benches.peers.common import one_at_a_time
from tests.compat import franz_go

HERE = Path(__file__).resolve().parent


def _cache() -> Path:
    return franz_go.cache_dir().parent / "go-programs"


def _source_hash(src: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(p for p in src.iterdir() if p.is_file()):
        data = f.read_bytes()
        h.update(f"{f.name}\0{len(data)}\0".encode() + data)
    return h.hexdigest()


def _check_pin(src: Path) -> None:
    """go.sum's hash of franz-go is the suite's: the programs and the suite build the same source."""
    want = f"{franz_go.MODULE} {franz_go.VERSION} {franz_go.H1}"
    if want not in (src / "go.sum").read_text().splitlines():
        raise RuntimeError(f"{src / 'go.sum'} does not pin `{want}` (tests/compat/franz_go.py's franz-go)")


@one_at_a_time(lambda: _cache() / ".lock")
def program(name: str) -> Path:
    """The built binary of tests/go/<name>, built first if it is missing or its source changed."""
    src = HERE / name
    out = _cache() / name
    binary, marker = out / name, out / "built.json"
    digest = _source_hash(src)
    if binary.exists() and marker.exists() and json.loads(marker.read_text())["source_sha256"] == digest:
        return binary
    _check_pin(src)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    go = franz_go.find_go()
    log = out / "build.log"
    tmp = out / f".{name}.tmp"
    cmd = [go, "build", "-o", str(tmp), "."]
    print(f"== go: building tests/go/{name} (log {log})", flush=True)
    r = subprocess.run(
        cmd, cwd=src, env=franz_go.go_env(), capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=900
    )
    log.write_text(f"$ {' '.join(cmd)}  (in {src})\n{r.stdout}{r.stderr}")
    if r.returncode != 0:
        raise RuntimeError(f"`go build` of tests/go/{name} failed ({r.returncode}); log {log}:\n{r.stderr[-3000:]}")
    os.replace(tmp, binary)  # whole or not at all: a build cut short leaves no binary behind
    seconds = round(time.monotonic() - t0, 1)
    marker.write_text(json.dumps({"source_sha256": digest, "build_seconds": seconds}) + "\n")
    print(f"== go: built {binary} in {seconds} s", flush=True)
    return binary
