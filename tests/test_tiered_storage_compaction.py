"""Tiered storage of a compacted topic (which Kafka does not tier): what is copied is the
cleaner's output, a later cleaning pass's rewrite is copied again and the copies it makes
obsolete are deleted, and a consumer from offset 0 reads every record at the offset it was
produced with the newest value of each key last. Once local retention has removed copied
segments, the cleaner keeps tombstones (an older value of the key lives on remotely)."""

from __future__ import annotations

import time
from pathlib import Path

from test_tiered_storage import wait_for

import logbroker
from logbroker import Admin, NewTopic, Producer, TopicPartition

COMPACTED = {
    "cleanup.policy": "compact",
    "remote.storage.enable": "true",
    "segment.bytes": "4096",
    "min.cleanable.dirty.ratio": "0.01",
    "delete.retention.ms": "0",
}


def cleaned_local(part_dir: Path) -> dict[int, bytes]:
    """The partition's rolled segments entirely below the cleaner checkpoint: base -> bytes
    ({} when retention or the cleaner removed a segment between the listing and the read:
    callers poll)."""
    ck = part_dir / "cleaner-offset-checkpoint"
    if not ck.exists():
        return {}
    checkpoint = int(ck.read_text().split()[1])
    bases = sorted(int(f.stem) for f in part_dir.glob("*.log"))
    try:
        return {
            b: (part_dir / f"{b:020d}.log").read_bytes()
            for b, nxt in zip(bases, bases[1:], strict=False)
            if nxt <= checkpoint and (part_dir / f"{b:020d}.log").stat().st_size > 0
        }
    except FileNotFoundError:
        return {}


def remote_copies(remote: Path, topic: str) -> dict[str, bytes]:
    """Every remote `.log` object of the topic's partition 0: object name -> bytes (one the
    broker deletes as obsolete between the listing and the read is left out: callers poll)."""
    out = {}
    for f in remote.glob(f"{topic}-*/0/*.log"):
        try:
            out[f.name] = f.read_bytes()
        except FileNotFoundError:
            continue
    return out


def in_sync(part_dir: Path, remote: Path, topic: str):
    """The remote copies are exactly the cleaned local segments (same base, same bytes)."""
    local = cleaned_local(part_dir)
    copies = remote_copies(remote, topic)
    got = {int(name.split("-")[0]): data for name, data in copies.items()}
    return copies if local and len(got) == len(copies) and got == local else None


def read_from_zero(bootstrap: str, topic: str) -> list[tuple[int, bytes, bytes | None]]:
    with Admin(bootstrap) as admin:
        end = admin.list_offsets({(topic, 0): "latest"})[TopicPartition(topic, 0)][0]
    out: list[tuple[int, bytes, bytes | None]] = []
    with logbroker.Consumer(bootstrap, auto_offset_reset="earliest") as c:
        c.assign([TopicPartition(topic, 0)])
        deadline = time.monotonic() + 60
        while not out or out[-1][0] < end - 1:
            assert time.monotonic() < deadline, f"read up to {out[-1][0] if out else None} of {end}"
            out += [(r.offset, r.key, r.value) for r in c.poll(1.0)]
    return out


def check_against_model(rows, produced: dict[int, tuple[bytes, bytes | None]], newest: dict) -> None:
    """Offsets ascend, each record is the one produced at its offset, and the last record of
    each key is its newest value (a tombstoned key: absent or a tombstone last)."""
    offsets = [o for o, _, _ in rows]
    assert offsets == sorted(set(offsets))
    for o, k, v in rows:
        assert produced[o] == (k, v), f"offset {o}: read {(k, v)}, produced {produced[o]}"
    last = {k: v for _, k, v in rows}
    assert {k: v for k, v in last.items() if v is not None} == {k: v for k, v in newest.items() if v is not None}


def produce(bootstrap: str, topic: str, n: int, start: int, produced: dict, newest: dict, avoid=()) -> None:
    """n records, keys key-0..key-19 round-robin but those in `avoid`, into the model."""
    with Producer(bootstrap, linger_ms=2) as p:
        for i in range(start, start + n):
            k, v = f"key-{i % 20}".encode(), f"value-{i}".encode()
            if k in avoid:
                continue
            md = p.send(topic, v, key=k).result(10)
            produced[md.offset] = (k, v)
            newest[k] = v


def tombstones(bootstrap: str, topic: str, keys, produced: dict, newest: dict) -> list[int]:
    offsets = []
    with Producer(bootstrap) as p:
        for k in keys:
            md = p.send(topic, None, key=k).result(10)
            produced[md.offset] = (k, None)
            newest[k] = None
            offsets.append(md.offset)
    return offsets


def test_compacted_topic_tiers_the_cleaners_output_and_compacts_again(tmp_path: Path) -> None:
    remote = tmp_path / "remote"
    cfg = {
        "remote.log.storage.system.enable": "true",
        "remote.log.storage.url": remote.as_uri(),
        "remote.log.manager.task.interval.ms": "200",
        "log.retention.check.interval.ms": "200",
    }
    with logbroker.Broker(data_dir=tmp_path / "d", config=cfg, log_cleaner_backoff_ms=200) as b:
        bs = b.bootstrap_servers
        with Admin(bs) as admin:
            admin.create_topics([NewTopic("cmp", 1, 1, dict(COMPACTED))])
        part = tmp_path / "d" / "cmp-0"
        produced: dict[int, tuple[bytes, bytes | None]] = {}
        newest: dict[bytes, bytes | None] = {}

        # 1. what is copied is what the cleaner wrote
        produce(bs, "cmp", 1500, 0, produced, newest)
        first = wait_for(lambda: in_sync(part, remote, "cmp"), what="copies equal to the cleaned segments")
        check_against_model(read_from_zero(bs, "cmp"), produced, newest)

        # 2. compacted again: the rewrite is copied, the copies it replaces are deleted; the
        # tombstones (delete.retention.ms=0) go with every older value of their keys
        deleted = (b"key-3", b"key-7")
        produce(bs, "cmp", 750, 1500, produced, newest)
        tombstones(bs, "cmp", deleted, produced, newest)
        produce(bs, "cmp", 750, 2250, produced, newest, avoid=deleted)

        def recompacted():
            copies = in_sync(part, remote, "cmp")
            rows = read_from_zero(bs, "cmp") if copies and not set(first) <= set(copies) else []
            return copies if rows and not [r for r in rows if r[1] in deleted] else None

        second = wait_for(recompacted, what="the later passes' output copied, obsolete copies deleted")
        assert set(first) - set(second), "some first-pass copy was replaced"
        check_against_model(read_from_zero(bs, "cmp"), produced, newest)

        # 3. local retention removes copied segments; a tombstone above records that are
        # only remote then stays, though delete.retention.ms has passed and its segment is
        # cleaned again and again for the 3 s it stays local
        log = b.server.replicas.get("cmp", 0).log
        with Admin(bs) as admin:
            admin.alter_configs({("topic", "cmp"): {"local.retention.ms": "3000"}})
        wait_for(lambda: log.log_start_offset > 0, what="local segments removed after their copy")
        [tombstone] = tombstones(bs, "cmp", [b"key-5"], produced, newest)
        i = 3000
        while log.log_start_offset <= tombstone:  # pushed out of the local log by later records
            produce(bs, "cmp", 300, i, produced, newest, avoid=[b"key-5"])
            i += 300
            time.sleep(0.5)
        rows = read_from_zero(bs, "cmp")
        assert rows[0][0] < log.log_start_offset, "the first records read are remote"
        check_against_model(rows, produced, newest)
        assert (tombstone, b"key-5", None) in rows, "a tombstone above records only in remote storage is kept"
