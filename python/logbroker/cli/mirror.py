"""`logbroker mirror`: copy topics from one Kafka-compatible cluster to another (the paper's
cross-datacenter mirroring; Kafka's MirrorMaker), with logbroker's client on both sides.

    logbroker mirror --from SRC_BOOTSTRAP --to DST_BOOTSTRAP --topics REGEX
                     [--group G] [--exactly-once] [--sync-group-offsets REGEX]
                     [--once] [--idle-timeout S]

What is kept: each record's key, value, headers and timestamp, and its partition (partition
p of a source topic goes to partition p of the target topic of the same name, created with
the source's partition count when missing; a target topic with fewer partitions is an
error). Source records are read read_committed, so aborted and open transactions are not
copied; control records are not copied either, so target offsets may run behind source
offsets.

Progress is the mirror's own consumer group `G` (default `logbroker-mirror`) *on the target
cluster*, holding source offsets (as MirrorMaker 2 does): a restarted mirror reads it and
goes on from there, and a copy is committed only after the target acknowledged it
(at-least-once). With `--exactly-once` the records and the progress are written in one
transaction on the target (transactional id `logbroker-mirror-G`): a crash between the two
leaves nothing half done, and a second mirror with the same group fences the first.

Group offsets (`--sync-group-offsets REGEX`): the committed offsets of the source consumer
groups whose ids match are translated to target offsets and committed to the same group ids
on the target, so a consumer group can move to the target cluster and go on where it was.
A source offset o becomes the target offset of the first copied record at or after o (or the
target's end when everything before o was copied). The translation uses the offset map of
what the mirror copied, persisted as offset syncs (below), so a restarted mirror translates
offsets of records an earlier run copied; offsets of groups that are active on the target
are left alone (Kafka refuses them).

Offset syncs (MirrorMaker 2's `mm2-offset-syncs`, kept on the target): topic
`<group>.offset-syncs.internal`, compacted, one partition. The offset map of a partition is
a list of runs of consecutive copies (source first, source last, target first); each run is
one record, key JSON `[topic, partition, source first]`, value JSON `[source first, source
last, target first]`, rewritten as the run grows (compaction keeps the newest). Syncs are
written after the target acknowledged the copies they describe and before the progress is
committed (in the same transaction with `--exactly-once`), so they never describe a record
that was not copied. Topics named `*.internal` or `*-internal` are never mirrored (as MM2).

It runs until Ctrl-C, or with `--once` until it has caught up (no record for
`--idle-timeout` seconds, default 5). One line per second on stderr reports progress.
"""

from __future__ import annotations

import bisect
import json
import re
import sys
import time
from typing import Any

from logbroker.cli.args import add_command_config, client_config
from logbroker.client import Admin, Consumer, KafkaError, NewTopic, Producer, TopicPartition

DEFAULT_GROUP = "logbroker-mirror"
INTERNAL = re.compile(r".*[-.]internal")  # MirrorMaker 2's default exclusion


def syncs_topic(group: str) -> str:
    return f"{group}.offset-syncs.internal"


def add_parser(sub) -> None:
    m = sub.add_parser("mirror", help="copy topics from one Kafka-compatible cluster to another")
    m.add_argument("--from", dest="source", required=True, help="source bootstrap servers")
    m.add_argument("--to", dest="target", required=True, help="target bootstrap servers")
    m.add_argument("--topics", required=True, help="regular expression of the topics to copy (whole name)")
    m.add_argument("--group", default=DEFAULT_GROUP, help="the mirror's progress group on the target")
    m.add_argument("--exactly-once", action="store_true", help="records and progress in one target transaction")
    m.add_argument("--sync-group-offsets", metavar="REGEX", help="translate these source groups' offsets to the target")
    m.add_argument("--once", action="store_true", help="stop once caught up")
    add_command_config(m, "--from-config", " of the source cluster")
    add_command_config(m, "--to-config", " of the target cluster")
    m.add_argument("--idle-timeout", type=float, default=5.0, help="seconds without a record that count as caught up")


class OffsetMap:
    """Source offset -> target offset for one partition, as runs of consecutive copies:
    [(source first, source last, target first)] in source order."""

    def __init__(self) -> None:
        self.runs: list[tuple[int, int, int]] = []
        self.target_end = -1

    def add(self, source: int, target: int) -> None:
        if self.runs:
            sf, sl, tf = self.runs[-1]
            if source == sl + 1 and target == tf + (source - sf):
                self.runs[-1] = (sf, source, tf)
                self.target_end = target + 1
                return
        self.runs.append((source, source, target))
        self.target_end = target + 1

    def load(self, source_first: int, source_last: int, target_first: int) -> None:
        """One persisted run (a later sync of the same run replaces an earlier one)."""
        i = bisect.bisect_left([r[0] for r in self.runs], source_first)
        if i < len(self.runs) and self.runs[i][0] == source_first:
            self.runs[i] = (source_first, source_last, target_first)
        else:
            self.runs.insert(i, (source_first, source_last, target_first))
        sf, sl, tf = self.runs[-1]
        self.target_end = tf + (sl - sf) + 1

    def translate(self, source_offset: int) -> int | None:
        """The target offset a consumer committed at `source_offset` resumes from; None when
        this map does not reach it (nothing copied at or after it yet)."""
        if not self.runs or source_offset > self.runs[-1][1] + 1:
            return None
        if source_offset == self.runs[-1][1] + 1:
            return self.target_end
        i = bisect.bisect_left([r[1] for r in self.runs], source_offset)
        sf, _sl, tf = self.runs[i]
        return tf if source_offset <= sf else tf + (source_offset - sf)


class Mirror:
    def __init__(self, args) -> None:
        self.args = args
        self.pattern = re.compile(args.topics)
        self.groups = re.compile(args.sync_group_offsets) if args.sync_group_offsets else None
        self.maps: dict[tuple[str, int], OffsetMap] = {}
        # client properties of each side (--from-config, --to-config: TLS and other client keys)
        self.source_config = client_config(args.from_config)
        self.target_config = client_config(args.to_config)
        self.copied = 0

    # --- setup ---------------------------------------------------------------------------

    def topics(self) -> dict[str, int]:
        """Source topics to copy -> partition count; target topics created to match."""
        with (
            Admin(self.args.source, **self.source_config, client_id="logbroker-mirror") as src,
            Admin(self.args.target, **self.target_config, client_id="logbroker-mirror") as dst,
        ):
            wanted = {
                n: len(d.partitions)
                for n, d in src.describe_topics().items()
                if not d.internal and not n.startswith("__") and not INTERNAL.fullmatch(n) and self.pattern.fullmatch(n)
            }
            existing = dst.describe_topics()
            missing = [NewTopic(n, p) for n, p in wanted.items() if n not in existing]
            if wanted and syncs_topic(self.args.group) not in existing:
                missing.append(NewTopic(syncs_topic(self.args.group), 1, config={"cleanup.policy": "compact"}))
            if missing:
                dst.create_topics(missing)
            for n, p in wanted.items():
                have = len(existing[n].partitions) if n in existing else p
                if have < p:
                    raise KafkaError(
                        f"target topic {n!r} has {have} partition(s), the source {p}: partition "
                        f"numbers cannot be kept (add partitions on the target)"
                    )
        return wanted

    def start_positions(self, tps: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        with Consumer(
            self.args.target, **self.target_config, group_id=self.args.group, client_id="logbroker-mirror"
        ) as c:
            got = c.committed(tps)
        return {(tp.topic, tp.partition): off for tp, off in got.items() if off is not None}

    def load_offset_syncs(self) -> None:
        """The offset maps of earlier runs, from the syncs topic on the target."""
        topic = syncs_topic(self.args.group)
        tp = TopicPartition(topic, 0)
        with Consumer(
            self.args.target,
            **self.target_config,
            client_id="logbroker-mirror",
            isolation_level="read_committed",
            enable_auto_commit=False,
        ) as c:
            with Admin(self.args.target, **self.target_config, client_id="logbroker-mirror") as admin:
                end = admin.list_offsets({(topic, 0): "latest"})[tp][0]
            c.assign([tp])
            c.seek_to_beginning([tp])
            while c.position(tp) < end:
                for r in c.poll(1.0):
                    if r.key is None or r.value is None:
                        continue
                    t, p, _ = json.loads(r.key)
                    sf, sl, tf = json.loads(r.value)
                    self.maps.setdefault((t, p), OffsetMap()).load(sf, sl, tf)

    def write_offset_syncs(self, target: Producer, touched: dict[tuple[str, int], int]) -> list:
        """The runs from index `touched[tp]` on, for each partition copied to just now;
        returns the sends' futures."""
        topic = syncs_topic(self.args.group)
        return [
            target.send(topic, json.dumps([sf, sl, tf]).encode(), key=json.dumps([t, p, sf]).encode(), partition=0)
            for (t, p), first in touched.items()
            for sf, sl, tf in self.maps[(t, p)].runs[first:]
        ]

    # --- copying -------------------------------------------------------------------------

    def run(self) -> int:
        args = self.args
        topics = self.topics()
        if not topics:
            print(f"logbroker: no source topic matches {args.topics!r}", file=sys.stderr)
            return 1
        tps = [(t, p) for t, n in sorted(topics.items()) for p in range(n)]
        positions = self.start_positions(tps)
        self.load_offset_syncs()
        source = Consumer(
            args.source,
            **self.source_config,
            client_id="logbroker-mirror",
            isolation_level="read_committed",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        conf: dict[str, Any] = {"client_id": "logbroker-mirror", "linger_ms": 5}
        if args.exactly_once:
            conf["transactional_id"] = f"logbroker-mirror-{args.group}"
        target = Producer(args.target, **self.target_config, **conf)
        progress = (
            None
            if args.exactly_once
            else Consumer(args.target, **self.target_config, group_id=args.group, client_id="logbroker-mirror")
        )
        try:
            if args.exactly_once:
                target.init_transactions(60)
            source.assign(tps)
            for tp in tps:
                if tp in positions:
                    source.seek(tp, positions[tp])
                else:
                    source.seek_to_beginning([tp])
            print(
                f"mirroring {len(topics)} topic(s), {len(tps)} partition(s) from {args.source} to {args.target}"
                f" ({'exactly once' if args.exactly_once else 'at least once'}, progress group {args.group!r})",
                file=sys.stderr,
            )
            last_record, last_report, last_sync = time.monotonic(), time.monotonic(), 0.0
            while True:
                records = source.poll(0.5, max_records=5000)
                now = time.monotonic()
                if records:
                    last_record = now
                    self.copy(records, target, progress)
                if self.groups is not None and (now - last_sync > 2 or not records):
                    last_sync = now
                    self.sync_group_offsets(tps)
                if now - last_report >= 1:
                    last_report = now
                    print(f"copied {self.copied} record(s)", file=sys.stderr)
                if args.once and not records and now - last_record >= args.idle_timeout:
                    break
        except KeyboardInterrupt:
            pass
        except KafkaError as e:
            print(f"logbroker: {e}", file=sys.stderr)
            return 1
        finally:
            source.close()
            target.close()
            if progress is not None:
                progress.close()
        if self.groups is not None:
            self.sync_group_offsets(tps)
        print(f"copied {self.copied} record(s)", file=sys.stderr)
        return 0

    def copy(self, records, target: Producer, progress: Consumer | None) -> None:
        futures = []
        ends: dict[tuple[str, int], int] = {}
        if self.args.exactly_once:
            target.begin_transaction()
        for r in records:
            futures.append(
                (
                    r,
                    target.send(
                        r.topic,
                        r.value,
                        key=r.key,
                        partition=r.partition,
                        headers=r.headers or None,
                        timestamp=r.timestamp,
                    ),
                )
            )
            ends[(r.topic, r.partition)] = r.offset + 1
        target.flush()
        touched: dict[tuple[str, int], int] = {}
        for r, fut in futures:
            meta = fut.result(60)  # raises if the target refused it
            m = self.maps.setdefault((r.topic, r.partition), OffsetMap())
            touched.setdefault((r.topic, r.partition), max(0, len(m.runs) - 1))
            m.add(r.offset, meta.offset)
        syncs = self.write_offset_syncs(target, touched)
        if self.args.exactly_once:
            target.send_offsets_to_transaction({TopicPartition(t, p): o for (t, p), o in ends.items()}, self.args.group)
            target.commit_transaction(60)
        else:
            target.flush()
        for fut in syncs:
            fut.result(60)
        if progress is not None:
            progress.commit({TopicPartition(t, p): o for (t, p), o in ends.items()})
        self.copied += len(records)

    # --- consumer group offsets ----------------------------------------------------------

    def sync_group_offsets(self, tps: list[tuple[str, int]]) -> None:
        assert self.groups is not None
        try:
            with Admin(self.args.source, **self.source_config, client_id="logbroker-mirror") as src:
                groups = sorted(
                    g for g, _ptype, _state in src.list_groups() if self.groups.fullmatch(g) and g != self.args.group
                )
            for g in groups:
                with Consumer(self.args.source, **self.source_config, group_id=g, client_id="logbroker-mirror") as c:
                    committed = c.committed(tps)
                translated = {}
                for tp, off in committed.items():
                    m = self.maps.get((tp.topic, tp.partition))
                    t = None if off is None or m is None else m.translate(off)
                    if t is not None:
                        translated[tp] = t
                if not translated:
                    continue
                with Consumer(self.args.target, **self.target_config, group_id=g, client_id="logbroker-mirror") as c:
                    current = c.committed(list(translated))
                    changed = {tp: o for tp, o in translated.items() if current.get(tp) != o}
                    if changed:
                        c.commit(changed)
        except KafkaError as e:
            print(f"logbroker: translating group offsets: {e}", file=sys.stderr)


def run(args) -> int:
    try:
        re.compile(args.topics)
        if args.sync_group_offsets:
            re.compile(args.sync_group_offsets)
    except re.error as e:
        print(f"logbroker: bad regular expression: {e}", file=sys.stderr)
        return 2
    try:
        return Mirror(args).run()
    except KafkaError as e:
        print(f"logbroker: {e}", file=sys.stderr)
        return 1
