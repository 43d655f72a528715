"""The topic-id checkpoint: which incarnation of each topic the partition directories of a
data directory hold.

A partition directory is named `<topic>-<partition>`, so a topic deleted and created again
under the same name while this broker was away leaves a directory that looks like the new
topic's. Kafka keeps the topic id in every partition directory (`partition.metadata`);
logbroker keeps one file per data directory instead, so a new partition costs no file
write of its own:

    topic-id-checkpoint
        0                       version
        <count>
        <topic> <topic id>      one line per topic with a replica here (UUID, hex with dashes)

Written atomically (temporary file, fsync, rename, directory fsync) with the HW
checkpoint when the topics hosted here changed, and at shutdown. At startup a replica whose
topic is listed under another id is created afresh: its directory holds the earlier topic.
A topic created less than one checkpoint interval before a crash is not listed yet; its
directory is trusted, as before this file existed."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from logbroker.common.files import fsync_dir

FILE_NAME = "topic-id-checkpoint"
VERSION = 0


class TopicIdCheckpointError(Exception):
    """The file exists but cannot be parsed (path and line named)."""


def write(data_dir: Path, ids: dict[str, uuid.UUID]) -> None:
    """Replace the checkpoint with `ids` (topic name -> topic id). Blocking: call from a
    worker thread."""
    path = data_dir / FILE_NAME
    tmp = path.with_name(FILE_NAME + ".tmp")
    text = f"{VERSION}\n{len(ids)}\n" + "".join(f"{name} {tid}\n" for name, tid in sorted(ids.items()))
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(data_dir)


def read(data_dir: Path) -> dict[str, uuid.UUID]:
    """The checkpoint's topic ids; empty when the file does not exist."""
    path = data_dir / FILE_NAME
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return {}
    if len(lines) < 2 or lines[0].strip() != str(VERSION):
        raise TopicIdCheckpointError(f"{path}: unsupported version line {lines[0] if lines else ''!r}")
    try:
        count = int(lines[1])
    except ValueError:
        raise TopicIdCheckpointError(f"{path}: bad count line {lines[1]!r}") from None
    out: dict[str, uuid.UUID] = {}
    for n, line in enumerate(lines[2:], start=3):
        parts = line.split()
        if not parts:
            continue
        try:
            name, tid = parts
            out[name] = uuid.UUID(tid)
        except ValueError:
            raise TopicIdCheckpointError(f"{path}: malformed line {n}: {line!r}") from None
    if len(out) != count:
        raise TopicIdCheckpointError(f"{path}: {len(out)} topic(s) listed, the count line says {count}")
    return out
