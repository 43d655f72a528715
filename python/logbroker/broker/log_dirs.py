"""Log directories (`log.dirs`, Kafka's JBOD): several data directories, each replica in
exactly one of them.

Layout of every log directory (the first one is also the metadata directory: meta.properties,
__cluster_metadata-0/, topic-id-checkpoint, __archive/; see broker/replica_manager.py):
    meta.properties                          cluster.id, node.id and this directory's own
                                             directory.id (coord/metadata/metadata.py)
    <topic>-<partition>/                     a replica's log (rust/src/log.rs)
    <topic>-<partition>.<move id>-future/    the replica being moved here by AlterReplicaLogDirs
                                             (KIP-113; broker/replica_mover.py)
    <topic>-<partition>.<move id>-delete/    a replica moved away, removed once the move is done
    replication-offset-checkpoint            HW of the replicas in this directory

Placement. A new replica goes to the directory AlterReplicaLogDirs named for it before it
existed here, else to the directory holding the fewest replicas (Kafka's
LogManager.nextLogDirs), the first listed on ties. The replicas per directory are counted as
they are placed, moved and forgotten, so placing one costs O(directories), never
O(replicas): creating topics must not slow down with the partitions that exist
(benches/compare/scale.py guards it). A replica whose directory is found at
startup stays there, and so does a new replica of a topic of the same name (its log is
created afresh in place of the old one).

Invariants. A partition has at most one live directory over all log directories: one found
twice at startup stops the broker, naming both (Kafka refuses to start as well). A move is
crash-safe: the source is renamed to `-delete` before the future is renamed live, so at
startup a `-future` directory is promoted only when its partition has no live directory and
a `-delete` one (the crash fell between the two renames; the future was complete); any other
`-future` directory was an unfinished move and is removed (ask again), and `-delete`
directories are removed.

Paths are absolute (Kafka's `getAbsolutePath`): DescribeLogDirs reports them, and
AlterReplicaLogDirs must name one of them.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

from logbroker.common.files import fsync_dir
from logbroker.log_format import fields

log = logging.getLogger("logbroker.log_dirs")

HW_CHECKPOINT = "replication-offset-checkpoint"

# `<topic>-<partition>.<32 hex digits>-future|delete` (topic names may hold dots and dashes)
_MOVE_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)\.(?P<id>[0-9a-f]{32})-(?P<kind>future|delete)$")
_LIVE_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")


class LogDirsError(Exception):
    """A log directory layout the broker cannot start with (paths named)."""


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def move_dir_name(topic: str, partition: int, move_id: str, kind: str) -> str:
    """`kind` is "future" or "delete"."""
    return f"{topic}-{partition}.{move_id}-{kind}"


def absolute(path: str | Path) -> Path:
    return Path(os.path.abspath(os.path.expanduser(str(path))))


class LogDirs:
    def __init__(self, dirs: list[Path]) -> None:
        paths = [absolute(d) for d in dirs]
        seen: set[Path] = set()
        for p in paths:
            if p in seen:
                raise LogDirsError(f"log.dirs lists {p} twice")
            seen.add(p)
        if not paths:
            raise LogDirsError("log.dirs names no directory")
        self.dirs = paths
        # the log directory of each replica directory found or placed here, and how many
        # replicas each log directory holds (kept with `_where`: only `_assign` and `forget`
        # change either)
        self._where: dict[tuple[str, int], Path] = {}
        self._counts: dict[Path, int] = dict.fromkeys(paths, 0)
        # AlterReplicaLogDirs for a replica not hosted here yet: where it is to be created
        self.preferred: dict[tuple[str, int], Path] = {}

    def find(self, path: str) -> Path | None:
        """The configured log directory `path` names, if any."""
        p = absolute(path)
        return p if p in self.dirs else None

    def scan(self) -> None:
        """At startup: finishes or drops interrupted moves, then records where every
        replica directory is. Blocking: call from a worker thread."""
        live: dict[tuple[str, int], Path] = {}
        moves: dict[tuple[str, int], dict[str, list[Path]]] = {}
        for d in self.dirs:
            d.mkdir(parents=True, exist_ok=True)
            for entry in sorted(d.iterdir()):
                if not entry.is_dir() or entry.name.startswith("__"):
                    continue
                m = _MOVE_DIR.match(entry.name)
                if m:
                    key = (m["topic"], int(m["partition"]))
                    moves.setdefault(key, {}).setdefault(m["kind"], []).append(entry)
                    continue
                m = _LIVE_DIR.match(entry.name)
                if not m:
                    continue
                key = (m["topic"], int(m["partition"]))
                if key in live:
                    raise LogDirsError(
                        f"partition {key[0]}-{key[1]} has a directory in two log directories: "
                        f"{live[key] / entry.name} and {entry}; remove the stale one"
                    )
                live[key] = d
        for key, kinds in moves.items():
            futures, deleted = kinds.get("future", []), kinds.get("delete", [])
            if futures and key not in live and deleted and len(futures) == 1:
                target = futures[0].parent / partition_dir_name(*key)
                os.rename(futures[0], target)
                fsync_dir(target.parent)
                live[key] = target.parent
                log.warning(
                    "finished moving %s-%d to %s: the broker stopped between the move's two renames",
                    key[0],
                    key[1],
                    target.parent,
                    extra=fields(topic=key[0], partition=key[1]),
                )
                futures = []
            for path in futures:
                log.warning(
                    "removing %s: a move of %s-%d to this log directory did not finish before the broker "
                    "stopped; the replica stays in %s (run AlterReplicaLogDirs again to move it)",
                    path,
                    key[0],
                    key[1],
                    live.get(key, "no directory"),
                    extra=fields(topic=key[0], partition=key[1]),
                )
                shutil.rmtree(path, ignore_errors=True)
            for path in deleted:
                shutil.rmtree(path, ignore_errors=True)
        self._where = {}
        self._counts = dict.fromkeys(self.dirs, 0)
        for key, d in live.items():
            self._assign(key, d)

    @property
    def where(self) -> Mapping[tuple[str, int], Path]:
        """The log directory of every replica found or placed here (read-only)."""
        return MappingProxyType(self._where)

    def place(self, key: tuple[str, int]) -> Path:
        """The log directory for replica `key`: where it is, else where AlterReplicaLogDirs
        asked, else the one with the fewest replicas. Recorded. O(directories)."""
        d = self._where.get(key)
        if d is not None:
            return d
        d = self.preferred.pop(key, None)
        if d is None:
            d = min(self.dirs, key=self._counts.__getitem__)  # first listed on ties
        self._assign(key, d)
        return d

    def moved(self, key: tuple[str, int], d: Path) -> None:
        """Replica `key` now lives in log directory `d` (a finished AlterReplicaLogDirs move)."""
        self._assign(key, d)

    def _assign(self, key: tuple[str, int], d: Path) -> None:
        old = self._where.get(key)
        if old is not None:
            self._counts[old] -= 1
        self._where[key] = d
        self._counts[d] += 1

    def path(self, key: tuple[str, int]) -> Path:
        """The replica directory of `key` (placed first if it has none yet)."""
        return self.place(key) / partition_dir_name(*key)

    def forget(self, key: tuple[str, int]) -> None:
        """The replica was deleted."""
        d = self._where.pop(key, None)
        if d is not None:
            self._counts[d] -= 1

    def replica_count(self, d: Path) -> int:
        """How many replicas log directory `d` holds."""
        return self._counts[d]
