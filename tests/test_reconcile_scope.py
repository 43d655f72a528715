"""The active controller's periodic pass reads only what changed (coord/metadata/reconcile_scope.py):
on random histories of metadata changes, applied as records through MetadataDelta as the
metadata log applies them, a pass over the accumulated scope writes exactly the records a
pass over every partition writes; and with nothing changed it reads nothing."""

from __future__ import annotations

import copy
import random
import uuid

import pytest

from logbroker.common.config import BrokerConfig
from logbroker.coord.metadata import elections, reassignment
from logbroker.coord.metadata.metadata import BrokerRegistration, MetadataImage, TopicState
from logbroker.coord.metadata.metadata_delta import MetadataDelta
from logbroker.coord.metadata.metadata_records import apply_record, decode_record, diff_records
from logbroker.coord.metadata.reconcile_scope import ReconcileScope, partitions_in
from logbroker.coord.metadata.replication_control import ReplicationControlManager, new_partition

BROKERS = [1, 2, 3, 4]


def base_image(rng: random.Random) -> MetadataImage:
    image = MetadataImage("c", 1, {n: BrokerRegistration(n, "h", 9000 + n) for n in BROKERS}, {}, 0)
    for name in ("a", "b", "c"):
        parts = {i: new_partition(i, rng.sample(BROKERS, rng.randint(1, 3)), image) for i in range(3)}
        image.topics[name] = TopicState(name, uuid.uuid4(), parts, {})
    return image


def through_log(image: MetadataImage, changed: MetadataImage) -> tuple[MetadataImage, MetadataDelta]:
    """`changed` as the metadata log makes it: its records applied to `image` in a delta."""
    delta = MetadataDelta(image)
    for r in diff_records(image, changed):
        apply_record(delta, decode_record(r))
    return delta.image, delta


def random_change(rng: random.Random, image: MetadataImage) -> MetadataImage:
    """A change any node's records could make, including ones that leave work for the pass
    (a leader fenced, a leader dropped, an ISR holding a reassignment's targets, a topic made
    unclean, a broker coming back to a leaderless partition)."""
    new = copy.deepcopy(image)
    t = new.topics[rng.choice(sorted(new.topics))]
    ps = t.partitions[rng.choice(sorted(t.partitions))]
    op = rng.randrange(7)
    if op == 0:
        n = rng.choice(BROKERS)
        new.brokers[n].fenced = not new.brokers[n].fenced
        new.brokers[n].epoch += 1
    elif op == 1:  # ISR changed without an election (the leader stays in it; records require that)
        isr = [r for r in ps.replicas if r == ps.leader or rng.random() < 0.6] or ps.replicas[:1]
        elections.change(ps, ps.leader, isr)
    elif op == 2:
        elections.change(ps, elections.NO_LEADER, ps.isr)
    elif op == 3 and not reassignment.in_progress(ps):
        reassignment.start(new, ps, rng.sample(BROKERS, rng.randint(1, 3)))
    elif op == 4:
        t.configs["unclean.leader.election.enable"] = rng.choice(["true", "false"])
    elif op == 5:
        name = f"n{rng.randrange(1000)}"
        live = [n for n in BROKERS if not new.brokers[n].fenced]
        if name not in new.topics and live:
            new.topics[name] = TopicState(name, uuid.uuid4(), {0: new_partition(0, [rng.choice(live)], new)}, {})
    elif reassignment.in_progress(ps):  # the targets catch up
        elections.change(ps, ps.leader, sorted(set(ps.isr) | set(ps.target_replicas)))
    return new


@pytest.mark.parametrize("seed", range(30))
def test_a_pass_over_the_scope_writes_what_a_pass_over_everything_writes(seed):
    rng = random.Random(seed)
    manager = ReplicationControlManager(BrokerConfig({}))
    image = base_image(rng)
    scope = ReconcileScope()
    passes_with_records = 0
    for _step in range(80):
        for _ in range(rng.randint(0, 3)):
            image, delta = through_log(image, random_change(rng, image))
            scope.note(delta)
        if rng.random() < 0.1:
            scope.note(None)  # an image published without a delta (a snapshot loaded)
        full = manager.reconcile(image)
        scoped = manager.reconcile(image, scope.take())
        assert sorted(scoped.records) == sorted(full.records), (seed, _step)
        passes_with_records += bool(full.records)
        if full.records:  # committed, as the controller would: its delta is noted too
            delta = MetadataDelta(image)
            for r in full.records:
                apply_record(delta, decode_record(r))
            image = delta.image
            scope.note(delta)
    assert passes_with_records > 0  # the histories did leave work for the pass


def test_nothing_changed_reads_nothing_and_a_change_reads_only_its_partitions():
    rng = random.Random(7)
    image = base_image(rng)
    scope = ReconcileScope()
    assert len(list(partitions_in(image, scope.take()))) == 9  # first pass: everything
    assert scope.empty and list(partitions_in(image, scope.take())) == []
    changed = copy.deepcopy(image)
    elections.change(changed.topics["b"].partitions[2], elections.NO_LEADER, changed.topics["b"].partitions[2].isr)
    image, delta = through_log(image, changed)
    scope.note(delta)
    assert [(t.name, ps.partition) for t, ps in partitions_in(image, scope.take())] == [("b", 2)]
    changed = copy.deepcopy(image)
    changed.topics["c"].configs["unclean.leader.election.enable"] = "true"
    image, delta = through_log(image, changed)
    scope.note(delta)
    assert [(t.name, ps.partition) for t, ps in partitions_in(image, scope.take())] == [("c", 0), ("c", 1), ("c", 2)]
    changed = copy.deepcopy(image)
    changed.brokers[2].fenced = True
    image, delta = through_log(image, changed)
    scope.note(delta)
    assert len(list(partitions_in(image, scope.take()))) == 9
    scope.everything()
    assert not scope.empty and scope.take() is None
