"""Metadata records (logbroker.coord.metadata.metadata_records) against a simple model: random
sequences of valid and invalid records are applied to an image and to plain dicts; the two
agree after every record, an invalid record changes nothing, and a snapshot of the image
loads back equal. RemoteLogSegment records (tiered storage): each state change, each
refusal (fencing by leader epoch, unknown ids, transitions), snapshots, topic removal, the
delta's copy-on-write and diff_records."""

from __future__ import annotations

import copy
import random
import uuid

import pytest

from logbroker.coord.metadata.metadata import MetadataImage
from logbroker.coord.metadata.metadata_delta import MetadataDelta
from logbroker.coord.metadata.metadata_records import (
    MetadataRecordError,
    apply,
    apply_record,
    decode_record,
    diff_records,
    encode_record,
    load_snapshot,
    remote_segment_record,
    snapshot,
)


def new_image() -> MetadataImage:
    return MetadataImage("cluster-1", 1, {}, {}, 0)


def view(image: MetadataImage) -> dict:
    return {
        "brokers": {n: (b.host, b.port, b.rack, b.epoch, b.fenced) for n, b in image.brokers.items()},
        "topics": {
            t.name: (
                t.topic_id.hex,
                dict(t.configs),
                {
                    p: (s.leader, s.leader_epoch, list(s.replicas), list(s.isr), s.partition_epoch)
                    for p, s in t.partitions.items()
                },
            )
            for t in image.topics.values()
        },
        "next_producer_id": image.next_producer_id,
        "features": dict(image.features),
        "broker_configs": {b: dict(c) for b, c in image.broker_configs.items()},
    }


class Model:
    """The same rules, written as plainly as possible."""

    def __init__(self) -> None:
        self.brokers: dict[int, tuple] = {}
        self.topics: dict[str, tuple] = {}
        self.next_producer_id = 0
        self.features: dict[str, int] = {}
        self.broker_configs: dict[str, dict[str, str]] = {}

    def state(self) -> dict:
        return {
            "brokers": copy.deepcopy(self.brokers),
            "topics": copy.deepcopy(self.topics),
            "next_producer_id": self.next_producer_id,
            "features": dict(self.features),
            "broker_configs": copy.deepcopy(self.broker_configs),
        }

    def by_id(self, tid: str):
        return next((n for n, t in self.topics.items() if t[0] == tid), None)

    def step(self, rec: dict) -> bool:
        """Apply if valid; False (and no change) if not."""
        k = rec["type"]
        if k == "RegisterBroker":
            old = self.brokers.get(rec["node_id"])
            if old is not None and rec["epoch"] <= old[3]:
                return False
            self.brokers[rec["node_id"]] = (rec["host"], rec["port"], rec["rack"], rec["epoch"], True)
        elif k in ("FenceBroker", "UnregisterBroker"):
            b = self.brokers.get(rec["node_id"])
            if b is None or b[3] != rec["epoch"]:
                return False
            if k == "FenceBroker":
                self.brokers[rec["node_id"]] = (*b[:4], rec["fenced"])
            else:
                del self.brokers[rec["node_id"]]
        elif k == "Topic":
            if rec["name"] in self.topics or self.by_id(rec["topic_id"]) is not None:
                return False
            self.topics[rec["name"]] = (rec["topic_id"], {}, {})
        elif k in ("Partition", "PartitionChange"):
            name = self.by_id(rec["topic_id"])
            if name is None:
                return False
            parts = self.topics[name][2]
            p = rec["partition"]
            if (k == "Partition") == (p in parts):
                return False
            old = parts.get(p, (None, 0, None, None, -1))
            leader = rec.get("leader", old[0])
            replicas = rec.get("replicas", old[2])
            isr = rec.get("isr", old[3])
            if (
                not replicas
                or len(set(replicas)) != len(replicas)
                or not set(isr) <= set(replicas)
                or (leader != -1 and leader not in isr)
            ):
                return False
            if k == "Partition":
                parts[p] = (leader, rec["leader_epoch"], list(replicas), list(isr), 0)
            else:
                parts[p] = (leader, old[1] + (leader != old[0]), list(replicas), list(isr), old[4] + 1)
        elif k == "Config" and rec["resource"] == "broker":
            if not (rec["name"] == "" or rec["name"].isdigit()):
                return False
            cfg = self.broker_configs.setdefault(rec["name"], {})
            if rec["value"] is None:
                cfg.pop(rec["key"], None)
            else:
                cfg[rec["key"]] = rec["value"]
            if not cfg:
                del self.broker_configs[rec["name"]]
        elif k == "FeatureLevel":
            if not rec["name"] or not 0 <= rec["level"] <= 32767:
                return False
            if rec["level"]:
                self.features[rec["name"]] = rec["level"]
            else:
                self.features.pop(rec["name"], None)
        elif k == "Config":
            if rec["name"] not in self.topics:
                return False
            cfg = self.topics[rec["name"]][1]
            if rec["value"] is None:
                cfg.pop(rec["key"], None)
            else:
                cfg[rec["key"]] = rec["value"]
        elif k == "RemoveTopic":
            name = self.by_id(rec["topic_id"])
            if name is None:
                return False
            del self.topics[name]
        elif k == "ProducerIdBlock":
            if not 1 <= rec["size"] <= 1_000_000:
                return False
            self.next_producer_id += rec["size"]
        elif k == "ProducerIds":
            if rec["next_producer_id"] < self.next_producer_id:
                return False
            self.next_producer_id = rec["next_producer_id"]
        return True


def random_record(rng: random.Random, model: Model) -> dict:
    tids = [t[0] for t in model.topics.values()] + [uuid.UUID(int=rng.randrange(1 << 16)).hex]
    names = list(model.topics) + [f"t{rng.randrange(6)}"]
    nodes = [1, 2, 3, 4]
    ids = rng.sample(nodes, rng.randint(0, 3))
    k = rng.choice(
        [
            "RegisterBroker",
            "FenceBroker",
            "UnregisterBroker",
            "Topic",
            "Topic",
            "Partition",
            "Partition",
            "PartitionChange",
            "PartitionChange",
            "Config",
            "RemoveTopic",
            "ProducerIds",
            "ProducerIdBlock",
            "FeatureLevel",
            "Config",
        ]
    )
    n = rng.choice(nodes)
    epoch = model.brokers.get(n, (0, 0, 0, 0))[3] + rng.choice([-1, 0, 0, 1])
    if k == "RegisterBroker":
        return dict(type=k, node_id=n, epoch=epoch, host="h", port=9000 + n, rack=rng.choice([None, "r1"]))
    if k == "FenceBroker":
        return dict(type=k, node_id=n, epoch=epoch, fenced=rng.random() < 0.5)
    if k == "UnregisterBroker":
        return dict(type=k, node_id=n, epoch=epoch)
    if k == "Topic":
        return dict(
            type=k, name=rng.choice(names), topic_id=rng.choice(tids) if rng.random() < 0.2 else uuid.uuid4().hex
        )
    if k in ("Partition", "PartitionChange"):
        rec = dict(type=k, topic_id=rng.choice(tids), partition=rng.randrange(3))
        isr = ids[: rng.randint(0, len(ids))]
        fields = dict(replicas=ids, isr=isr, leader=rng.choice(isr + [-1, 9]))
        if k == "Partition":
            rec.update(fields, leader_epoch=rng.randrange(3))
        else:
            rec.update({f: v for f, v in fields.items() if rng.random() < 0.6})
        return rec
    if k == "Config" and rng.random() < 0.3:
        return dict(
            type=k,
            resource="broker",
            name=rng.choice(["", "1", "2", "b"]),
            key=rng.choice(["log.retention.ms", "min.insync.replicas"]),
            value=rng.choice([None, "1", "2"]),
        )
    if k == "Config":
        return dict(
            type=k,
            resource="topic",
            name=rng.choice(names),
            key=rng.choice(["retention.ms", "x"]),
            value=rng.choice([None, "1", "2"]),
        )
    if k == "FeatureLevel":
        return dict(
            type=k,
            name=rng.choice(["metadata.version", "group.version", ""]),
            level=rng.choice([0, 1, 2, 27, -1, 40000]),
        )
    if k == "RemoveTopic":
        return dict(type=k, topic_id=rng.choice(tids))
    if k == "ProducerIdBlock":
        return dict(type=k, broker_id=n, size=rng.choice([0, 1000, 2_000_000]))
    return dict(type=k, next_producer_id=model.next_producer_id + rng.choice([-1000, 0, 1000]))


@pytest.mark.parametrize("seed", range(30))
def test_records_against_the_model(seed):
    rng = random.Random(seed)
    image, model = new_image(), Model()
    applied = rejected = 0
    for _ in range(300):
        rec = random_record(rng, model)
        data = encode_record(rec.pop("type"), **rec)
        rec = decode_record(data)
        before = view(image)
        ok = model.step(rec)
        if ok:
            apply(image, data)
            applied += 1
        else:
            with pytest.raises(MetadataRecordError):
                apply(image, data)
            assert view(image) == before, f"a rejected {rec['type']} record changed the image"
            rejected += 1
        assert view(image) == model.state()
    assert applied > 50 and rejected > 20
    back = load_snapshot(snapshot(image), 1)
    assert view(back) == view(image)


def test_leader_change_bumps_leader_epoch_and_every_change_the_partition_epoch():
    image = new_image()
    tid = uuid.uuid4().hex
    for kind, fields in [
        ("Topic", dict(name="t", topic_id=tid)),
        ("Partition", dict(topic_id=tid, partition=0, replicas=[1, 2, 3], isr=[1, 2, 3], leader=1, leader_epoch=0)),
        ("PartitionChange", dict(topic_id=tid, partition=0, isr=[1, 2])),
        ("PartitionChange", dict(topic_id=tid, partition=0, leader=2)),
    ]:
        apply(image, encode_record(kind, **fields))
    p = image.topics["t"].partitions[0]
    assert (p.leader, p.leader_epoch, p.isr, p.partition_epoch) == (2, 1, [1, 2], 2)


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"not json",
        b"[]",
        b'{"type":"Nope","v":1}',
        b'{"type":"Topic","v":2}',
        b'{"type":"Topic","v":1}',
        "\u00ff".encode("latin-1"),
    ],
)
def test_garbage_records_are_errors(data):
    image = new_image()
    with pytest.raises(MetadataRecordError):
        apply(image, data)
    assert view(image) == view(new_image())


@pytest.mark.parametrize("seed", range(10))
def test_a_delta_never_changes_the_image_it_starts_from(seed):
    """Entries applied through MetadataDelta (as every node applies the log) give the same
    image as applying record by record, and leave the image they started from exactly as it
    was: a published image is never changed (metadata_delta.py); parts no record touched are
    shared, the same objects."""
    rng = random.Random(2000 + seed)
    image, model = new_image(), Model()
    for _ in range(40):
        entry = []
        for _ in range(rng.randint(1, 8)):
            rec = random_record(rng, model)
            data = encode_record(rec.pop("type"), **rec)
            if model.step(decode_record(data)):
                entry.append(decode_record(data))
        before, frozen = image, snapshot(image)
        delta = MetadataDelta(image)
        for rec in entry:
            apply_record(delta, rec)
        image = delta.image
        assert snapshot(before) == frozen, "applying an entry changed the image it started from"
        assert view(image) == model.state()
        touched = {r.get("name") for r in entry} | {
            before.topic_ids.get(uuid.UUID(hex=r["topic_id"]))
            for r in entry
            if "topic_id" in r and len(r["topic_id"]) == 32
        }
        for name, t in image.topics.items():
            if name not in touched and name in before.topics:
                assert t is before.topics[name], f"topic {name} was copied though no record named it"
        assert delta.changed_topics <= touched | set(before.topics) | set(image.topics)


@pytest.mark.parametrize("seed", range(30))
def test_diff_records_reproduce_the_new_image(seed):
    """For images A and B (B reached from A by more records, renames and recreations
    included), applying diff_records(A, B) to a copy of A gives B exactly, epochs included."""
    rng = random.Random(1000 + seed)
    image, model = new_image(), Model()
    snapshots = []
    for i in range(400):
        rec = random_record(rng, model)
        kind = rec.pop("type")
        data = encode_record(kind, **rec)
        if model.step(decode_record(data)):
            apply(image, data)
        if i % 40 == 0:
            snapshots.append(copy.deepcopy(image))
    snapshots.append(copy.deepcopy(image))
    for a in snapshots:
        for b in snapshots[snapshots.index(a) :]:
            target = copy.deepcopy(a)
            for data in diff_records(a, b):
                apply(target, data)
            assert view(target) == view(b)
    assert diff_records(image, image) == []


def test_the_voter_directory_is_replaced_whole_and_one_endpoint_moves_alone():
    """Voters replaces the directory (KIP-853's VotersRecord); VoterEndpoint moves one voter
    that is in it, with its directory id or the zero one, and is refused otherwise; the
    directory survives a snapshot and diff_records reproduces it."""
    from logbroker.common.directory_id import ZERO
    from logbroker.coord.metadata.metadata_records import voters_record

    image = new_image()
    apply(image, voters_record({1: ["h1", 9093, ZERO], 2: ["h2", 9093, ZERO], 4: ["h4", 9095, "dir4"]}))
    assert image.voters == {1: ["h1", 9093, ZERO], 2: ["h2", 9093, ZERO], 4: ["h4", 9095, "dir4"]}
    apply(image, voters_record({1: ["h1", 9093, ZERO], 4: ["h4", 9095, "dir4"]}))
    assert sorted(image.voters) == [1, 4]
    apply(image, encode_record("VoterEndpoint", node_id=4, host="h4b", port=9096, directory_id="dir4"))
    apply(image, encode_record("VoterEndpoint", node_id=1, host="h1b", port=9097, directory_id="dir1"))
    assert image.voters == {1: ["h1b", 9097, "dir1"], 4: ["h4b", 9096, "dir4"]}
    before = copy.deepcopy(image.voters)
    for bad in [
        dict(node_id=7, host="x", port=1, directory_id=ZERO),  # not a voter
        dict(node_id=4, host="x", port=1, directory_id="other"),
    ]:  # another directory
        with pytest.raises(MetadataRecordError):
            apply(image, encode_record("VoterEndpoint", **bad))
    assert image.voters == before
    assert load_snapshot(snapshot(image), 1).voters == image.voters
    target = new_image()
    for data in diff_records(new_image(), image):
        apply(target, data)
    assert target.voters == image.voters


# --------------------------------------------------------------- remote log segments (tiered storage)

STARTED, FINISHED = "COPY_SEGMENT_STARTED", "COPY_SEGMENT_FINISHED"
DELETING, DELETED = "DELETE_SEGMENT_STARTED", "DELETE_SEGMENT_FINISHED"


def tiered_image(partitions: int = 3) -> tuple[MetadataImage, uuid.UUID]:
    """Topic t with `partitions` partitions, each led by broker 1 in leader epoch 0."""
    image, tid = new_image(), uuid.uuid4()
    apply(image, encode_record("Topic", name="t", topic_id=tid.hex))
    for p in range(partitions):
        apply(
            image,
            encode_record(
                "Partition", topic_id=tid.hex, partition=p, replicas=[1, 2], isr=[1, 2], leader=1, leader_epoch=0
            ),
        )
    return image, tid


def copy_fields(start: int, end: int, epochs=((0, 0),)) -> dict:
    return dict(
        start_offset=start,
        end_offset=end,
        max_timestamp=1000 + end,
        size_bytes=100 * (end - start + 1),
        segment_epochs=epochs,
    )


def seg_record(tid, sid, state, epoch=0, partition=0, **fields) -> bytes:
    return remote_segment_record(tid, partition, sid, state, epoch, 1, 5000, **fields)


def test_remote_segment_goes_through_its_states_and_leaves_the_image():
    image, tid = tiered_image()
    sid = uuid.uuid4()
    apply(image, seg_record(tid, sid, STARTED, **copy_fields(0, 99, [(0, 0)])))
    (s,) = image.remote_segments_of(tid, 0)
    assert (s.segment_id, s.state, s.start_offset, s.end_offset, s.size_bytes) == (sid, STARTED, 0, 99, 10000)
    assert (s.max_timestamp, s.segment_epochs, s.leader_epoch, s.broker_id, s.event_ms) == (1099, ((0, 0),), 0, 1, 5000)
    assert image.remote_segments_of(tid, 1) == () and image.remote_segments_of(uuid.uuid4(), 0) == ()
    apply(image, remote_segment_record(tid, 0, sid, FINISHED, 0, 2, 6000))
    (s,) = image.remote_segments_of(tid, 0)
    assert (s.state, s.broker_id, s.event_ms, s.end_offset) == (FINISHED, 2, 6000, 99)  # the copy's fields stay
    apply(image, seg_record(tid, sid, DELETING))
    assert image.remote_segments_of(tid, 0)[0].state == DELETING
    apply(image, seg_record(tid, sid, DELETED))
    assert image.remote_segments_of(tid, 0) == () and image.remote_segments == {}
    # deletion may also start before the copy finished (a failed copy is cleaned up)
    sid2 = uuid.uuid4()
    apply(image, seg_record(tid, sid2, STARTED, **copy_fields(0, 99)))
    apply(image, seg_record(tid, sid2, DELETING))
    apply(image, seg_record(tid, sid2, DELETED))
    assert image.remote_segments == {}


def test_remote_segments_are_sorted_by_start_offset_then_id():
    image, tid = tiered_image()
    ids = sorted(uuid.uuid4() for _ in range(3))
    for sid, (start, end) in zip(ids, [(200, 299), (0, 99), (100, 199)]):
        apply(image, seg_record(tid, sid, STARTED, **copy_fields(start, end)))
    retry = uuid.UUID(int=0)  # a second copy of offsets 0..99 (the first failed), sorted by id
    apply(image, seg_record(tid, retry, STARTED, **copy_fields(0, 99)))
    assert [(s.start_offset, s.segment_id) for s in image.remote_segments_of(tid, 0)] == [
        (0, retry),
        (0, ids[1]),
        (100, ids[2]),
        (200, ids[0]),
    ]


@pytest.mark.parametrize(
    "why, setup, record",
    [
        # fencing: a deposed leader (epoch 0 after the move to epoch 1) cannot write
        ("stale epoch", [], lambda tid, sid: seg_record(tid, sid, STARTED, epoch=0, **copy_fields(0, 9))),
        ("future epoch", [], lambda tid, sid: seg_record(tid, sid, STARTED, epoch=2, **copy_fields(0, 9))),
        ("stale epoch finish", ["started"], lambda tid, sid: seg_record(tid, sid, FINISHED, epoch=0)),
        ("unknown topic", [], lambda tid, sid: seg_record(uuid.uuid4(), sid, STARTED, epoch=1, **copy_fields(0, 9))),
        ("unknown partition", [], lambda tid, sid: seg_record(tid, sid, STARTED, 1, partition=7, **copy_fields(0, 9))),
        ("bad segment id", [], lambda tid, sid: seg_record(tid, "xyz", STARTED, epoch=1, **copy_fields(0, 9))),
        ("bad state", [], lambda tid, sid: seg_record(tid, sid, "COPY_SEGMENT_DONE", epoch=1, **copy_fields(0, 9))),
        ("id reused", ["started"], lambda tid, sid: seg_record(tid, sid, STARTED, epoch=1, **copy_fields(10, 19))),
        ("start after end", [], lambda tid, sid: seg_record(tid, sid, STARTED, epoch=1, **copy_fields(10, 9))),
        ("no epochs", [], lambda tid, sid: seg_record(tid, sid, STARTED, epoch=1, **copy_fields(0, 9, []))),
        (
            "epochs falling",
            [],
            lambda tid, sid: seg_record(tid, sid, STARTED, epoch=1, **copy_fields(0, 9, [(1, 0), (0, 5)])),
        ),
        (
            "copy fields missing",
            [],
            lambda tid, sid: remote_segment_record(tid, 0, sid, STARTED, 1, 1, 5000, start_offset=0, end_offset=9),
        ),
        ("finish unknown", [], lambda tid, sid: seg_record(tid, sid, FINISHED, epoch=1)),
        ("finish twice", ["started", "finished"], lambda tid, sid: seg_record(tid, sid, FINISHED, epoch=1)),
        ("delete finish before start", ["started"], lambda tid, sid: seg_record(tid, sid, DELETED, epoch=1)),
        ("finish a deletion", ["started", "deleting"], lambda tid, sid: seg_record(tid, sid, FINISHED, epoch=1)),
        ("delete unknown", [], lambda tid, sid: seg_record(tid, sid, DELETING, epoch=1)),
        (
            "copy fields on a later state",
            ["started"],
            lambda tid, sid: seg_record(tid, sid, FINISHED, epoch=1, **copy_fields(0, 9)),
        ),
    ],
)
def test_remote_segment_records_that_do_not_fit_are_refused(why, setup, record):
    image, tid = tiered_image()
    apply(image, encode_record("PartitionChange", topic_id=tid.hex, partition=0, leader=2))  # leader epoch 1
    assert image.topics["t"].partitions[0].leader_epoch == 1
    sid = uuid.uuid4()
    steps = {
        "started": seg_record(tid, sid, STARTED, epoch=1, **copy_fields(0, 9)),
        "finished": seg_record(tid, sid, FINISHED, epoch=1),
        "deleting": seg_record(tid, sid, DELETING, epoch=1),
    }
    for step in setup:
        apply(image, steps[step])
    before = snapshot(image)
    with pytest.raises(MetadataRecordError):
        apply(image, record(tid, sid))
    assert snapshot(image) == before, f"a refused record ({why}) changed the image"


def test_a_refused_remote_segment_record_rejects_its_whole_entry():
    image, tid = tiered_image()
    sid = uuid.uuid4()
    entry = [
        decode_record(seg_record(tid, sid, STARTED, **copy_fields(0, 9))),
        decode_record(seg_record(tid, sid, FINISHED, epoch=3)),  # stale/unknown epoch
    ]
    delta = MetadataDelta(image)
    with pytest.raises(MetadataRecordError, match="leader epoch"):
        for rec in entry:
            apply_record(delta, rec)
    assert image.remote_segments == {}  # the delta was never published


def test_the_new_leader_continues_a_segment_in_its_epoch():
    image, tid = tiered_image()
    sid = uuid.uuid4()
    apply(image, seg_record(tid, sid, STARTED, epoch=0, **copy_fields(0, 9)))
    apply(image, encode_record("PartitionChange", topic_id=tid.hex, partition=0, leader=2))
    with pytest.raises(MetadataRecordError, match="deposed leader"):
        apply(image, seg_record(tid, sid, FINISHED, epoch=0))
    apply(image, remote_segment_record(tid, 0, sid, DELETING, 1, 2, 7000))  # the new leader cleans up
    (s,) = image.remote_segments_of(tid, 0)
    assert (s.state, s.leader_epoch, s.broker_id, s.segment_epochs) == (DELETING, 1, 2, ((0, 0),))


def test_remote_segments_survive_a_snapshot():
    image, tid = tiered_image()
    for p in range(2):
        for i in range(3):
            apply(
                image,
                seg_record(
                    tid,
                    uuid.uuid4(),
                    STARTED,
                    partition=p,
                    **copy_fields(10 * i, 10 * i + 9, [(0, 0), (4, 10 * i + 5)]),
                ),
            )
    sid = image.remote_segments_of(tid, 1)[0].segment_id
    apply(image, seg_record(tid, sid, FINISHED, partition=1))
    back = load_snapshot(snapshot(image), 1)
    assert back.remote_segments == image.remote_segments
    assert back.remote_segments_of(tid, 1)[0].state == FINISHED
    assert isinstance(back.remote_segments_of(tid, 0)[0].segment_epochs[1], tuple)
    assert snapshot(back) == snapshot(image)
    assert load_snapshot(snapshot(new_image()), 1).remote_segments == {}


def test_removing_a_topic_removes_its_remote_segments():
    image, tid = tiered_image()
    other = uuid.uuid4()
    apply(image, encode_record("Topic", name="u", topic_id=other.hex))
    apply(
        image,
        encode_record("Partition", topic_id=other.hex, partition=0, replicas=[1], isr=[1], leader=1, leader_epoch=0),
    )
    for p in (0, 2):
        apply(image, seg_record(tid, uuid.uuid4(), STARTED, partition=p, **copy_fields(0, 9)))
    apply(image, seg_record(other, uuid.uuid4(), STARTED, **copy_fields(0, 9)))
    base = image
    delta = MetadataDelta(base)
    apply_record(delta, decode_record(encode_record("RemoveTopic", topic_id=tid.hex)))
    assert list(delta.image.remote_segments) == [(other, 0)]
    assert delta.image.remote_segments[(other, 0)] is base.remote_segments[(other, 0)]
    # listeners find what the topic had in the base image, through deleted_topics
    assert tid in delta.deleted_topics and len(base.remote_segments_of(tid, 0)) == 1
    assert delta.remote_segments_changed == set()
    # segments written and the topic removed in one delta: nothing left, nothing named
    delta = MetadataDelta(base)
    apply_record(delta, decode_record(seg_record(tid, uuid.uuid4(), STARTED, partition=1, **copy_fields(0, 9))))
    assert delta.remote_segments_changed == {("t", 1)}
    apply_record(delta, decode_record(encode_record("RemoveTopic", topic_id=tid.hex)))
    assert delta.remote_segments_changed == set() and list(delta.image.remote_segments) == [(other, 0)]


def test_a_delta_copies_only_the_partition_a_remote_segment_record_changes():
    image, tid = tiered_image()
    for p in range(3):
        apply(image, seg_record(tid, uuid.uuid4(), STARTED, partition=p, **copy_fields(0, 9)))
    base, frozen = image, snapshot(image)
    delta = MetadataDelta(base)
    sid = base.remote_segments_of(tid, 1)[0].segment_id
    apply_record(delta, decode_record(seg_record(tid, sid, FINISHED, partition=1)))
    apply_record(delta, decode_record(seg_record(tid, uuid.uuid4(), STARTED, partition=1, **copy_fields(10, 19))))
    new = delta.image
    assert snapshot(base) == frozen, "the delta changed its base image"
    assert new.remote_segments is not base.remote_segments  # the outer dict: copied once
    for p in (0, 2):
        assert new.remote_segments[(tid, p)] is base.remote_segments[(tid, p)]
    assert [s.state for s in new.remote_segments_of(tid, 1)] == [FINISHED, STARTED]
    assert delta.remote_segments_changed == {("t", 1)}
    assert new.topics["t"] is base.topics["t"]  # a remote segment changes no topic
    # a delta with no remote segment record shares the whole dict
    other = MetadataDelta(new)
    apply_record(other, decode_record(encode_record("ProducerIds", next_producer_id=10)))
    assert other.image.remote_segments is new.remote_segments


@pytest.mark.parametrize("seed", range(10))
def test_diff_records_reproduce_remote_segments(seed):
    """Segments copied, finished and deleted by leaders of changing epochs: diff_records
    between any two images reproduces the second exactly (segments written in an epoch that
    is no longer current included: those records restore them, with no fencing)."""
    rng = random.Random(3000 + seed)
    image, tid = tiered_image()
    snapshots = [copy.deepcopy(image)]
    for i in range(200):
        p = rng.randrange(3)
        epoch = image.topics["t"].partitions[p].leader_epoch
        segments = image.remote_segments_of(tid, p)
        r = rng.random()
        if r < 0.1:
            leader = 2 if image.topics["t"].partitions[p].leader == 1 else 1
            apply(image, encode_record("PartitionChange", topic_id=tid.hex, partition=p, leader=leader))
        elif r < 0.45 or not segments:
            start = rng.randrange(0, 1000, 10)
            apply(
                image, seg_record(tid, uuid.uuid4(), STARTED, epoch, p, **copy_fields(start, start + 9, [(0, start)]))
            )
        else:
            s = rng.choice(segments)
            nxt = {STARTED: [FINISHED, DELETING], FINISHED: [DELETING], DELETING: [DELETED]}[s.state]
            apply(image, seg_record(tid, s.segment_id, rng.choice(nxt), epoch, p))
        if i % 25 == 0:
            snapshots.append(copy.deepcopy(image))
    snapshots.append(copy.deepcopy(image))
    assert any(
        s.leader_epoch < image.topics["t"].partitions[p].leader_epoch
        for (_, p), ss in image.remote_segments.items()
        for s in ss
    )
    for a in snapshots:
        for b in snapshots[snapshots.index(a) :]:
            target = copy.deepcopy(a)
            for data in diff_records(a, b):
                apply(target, data)
            assert target.remote_segments == b.remote_segments
            assert view(target) == view(b)
    assert diff_records(image, image) == []
    # a topic removed and made again under its name: the old one's segments go with it
    fresh = copy.deepcopy(image)
    apply(fresh, encode_record("RemoveTopic", topic_id=tid.hex))
    tid2 = uuid.uuid4()
    apply(fresh, encode_record("Topic", name="t", topic_id=tid2.hex))
    apply(
        fresh,
        encode_record(
            "Partition", topic_id=tid2.hex, partition=0, replicas=[1, 2], isr=[1, 2], leader=1, leader_epoch=0
        ),
    )
    apply(fresh, seg_record(tid2, uuid.uuid4(), STARTED, **copy_fields(0, 9)))
    target = copy.deepcopy(image)
    for data in diff_records(image, fresh):
        apply(target, data)
    assert target.remote_segments == fresh.remote_segments and list(target.remote_segments) == [(tid2, 0)]


def test_restoring_records_are_diff_records_own():
    """A record with "restore" sets a segment whole whatever the epoch; removing a segment
    that is not there is refused all the same."""
    image, tid = tiered_image()
    seg = dict(
        segment_id=uuid.uuid4().hex, state=FINISHED, leader_epoch=7, broker_id=3, event_ms=1, **copy_fields(0, 9)
    )
    seg["segment_epochs"] = [[0, 0]]
    apply(image, encode_record("RemoteLogSegment", topic_id=tid.hex, partition=0, restore=True, **seg))
    assert image.remote_segments_of(tid, 0)[0].leader_epoch == 7
    with pytest.raises(MetadataRecordError):
        apply(
            image,
            encode_record(
                "RemoteLogSegment",
                topic_id=tid.hex,
                partition=0,
                restore=True,
                **{**seg, "segment_id": uuid.uuid4().hex, "state": DELETED},
            ),
        )
    with pytest.raises(TypeError, match="restore"):
        remote_segment_record(tid, 0, uuid.uuid4(), STARTED, 0, 1, 1, restore=True)


def start_record(tid, offset: int, epoch: int = 0, partition: int = 0) -> bytes:
    return encode_record(
        "RemoteLogStartOffset", topic_id=tid.hex, partition=partition, offset=offset, leader_epoch=epoch
    )


def test_remote_log_start_rises_is_fenced_and_survives_snapshots_and_diffs():
    """DeleteRecords into a tiered partition's remote part (RemoteLogStartOffset): set,
    raised, never lowered, refused from a deposed leader, kept by snapshots, reproduced by
    diff_records, and gone with its topic."""
    image, tid = tiered_image()
    before = copy.deepcopy(image)
    apply(image, start_record(tid, 50))
    assert image.remote_log_start == {(tid, 0): 50}
    apply(image, start_record(tid, 80))
    assert image.remote_log_start[(tid, 0)] == 80
    for bad in (start_record(tid, 70), start_record(tid, 90, epoch=3), start_record(tid, 90, partition=7)):
        with pytest.raises(MetadataRecordError):
            apply(copy.deepcopy(image), bad)
    delta = MetadataDelta(image)
    apply_record(delta, decode_record(start_record(tid, 85, partition=1)))
    assert delta.remote_segments_changed == {("t", 1)}
    assert load_snapshot(snapshot(image), 1).remote_log_start == image.remote_log_start
    again = copy.deepcopy(before)
    for data in diff_records(before, image):
        apply(again, data)
    assert again.remote_log_start == image.remote_log_start
    apply(image, encode_record("RemoveTopic", topic_id=tid.hex))
    assert image.remote_log_start == {}
