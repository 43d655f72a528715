"""Leader elections (coord/metadata/elections.py) and partition reassignment (coord/metadata/reassignment.py)
on metadata images, without a cluster: random sequences of broker fencing, ISR changes,
elections, reassignments and cancellations, checked after every step against the rules a
simple model states (leader a live ISR member unless none is, ISR within the replicas,
epochs only grow and the leader epoch exactly on leader changes, a completed reassignment
holds exactly its target), and every change written as metadata records that, applied to
the old image, give the new one (so the replicated metadata log carries the new fields)."""

from __future__ import annotations

import copy
import random
import uuid

import pytest

from logbroker.coord.metadata import elections, reassignment
from logbroker.coord.metadata.metadata import BrokerRegistration, MetadataImage, TopicState
from logbroker.coord.metadata.metadata_records import (
    apply,
    decode_batch,
    decode_record,
    diff_records,
    encode_batch,
    load_snapshot,
    snapshot,
)
from logbroker.protocol import ErrorCode

BROKERS = [1, 2, 3, 4, 5]


def image_with(replicas: list[list[int]], unclean: bool = False) -> MetadataImage:
    image = MetadataImage("c", 1, {n: BrokerRegistration(n, "h", 9000 + n) for n in BROKERS}, {}, 0)
    from logbroker.coord.metadata.replication_control import new_partition

    parts = {i: new_partition(i, r, image) for i, r in enumerate(replicas)}
    image.topics["t"] = TopicState(
        "t", uuid.uuid4(), parts, {"unclean.leader.election.enable": "true"} if unclean else {}
    )
    return image


def unclean_of(t: TopicState) -> bool:
    return t.configs.get("unclean.leader.election.enable") == "true"


def elect_in_place(image: MetadataImage, gone: set[int]) -> list[elections.Election]:
    """elect_for_brokers' new states written over the image's (this test's scratch images),
    returning the leader changes."""
    changes = elections.elect_for_brokers(image, gone, unclean_of)
    for t, new, _e in changes:
        vars(t.partitions[new.partition]).update(vars(new))
    return [e for _t, _n, e in changes if e is not None]


def check_rules(before: MetadataImage, after: MetadataImage, target: list[int] | None = None) -> None:
    """`target`: the step started a reassignment of partition 0... to it (checked too)."""
    for i, ps in after.topics["t"].partitions.items():
        old = before.topics["t"].partitions[i]
        assert set(ps.isr) <= set(ps.replicas), ps
        assert ps.leader == -1 or ps.leader in ps.isr, ps
        assert set(ps.adding_replicas) <= set(ps.replicas) and set(ps.removing_replicas) <= set(ps.replicas)
        assert not set(ps.adding_replicas) & set(ps.removing_replicas)
        assert ps.leader_epoch == old.leader_epoch + (ps.leader != old.leader) or ps.leader_epoch > old.leader_epoch
        assert ps.partition_epoch >= old.partition_epoch
        if ps != old:
            assert ps.partition_epoch > old.partition_epoch, (old, ps)
        if ps.leader != old.leader:
            assert ps.leader_epoch > old.leader_epoch
        if (
            target is None
            and not reassignment.in_progress(ps)
            and reassignment.in_progress(old)
            and ps.replicas != [r for r in old.replicas if r not in old.adding_replicas]
        ):
            assert ps.replicas == old.target_replicas and set(ps.isr) == set(ps.replicas)  # completed
    # records: the difference, through the wire encoding, reproduces the new image
    rebuilt = copy.deepcopy(before)
    records = diff_records(before, after)
    assert [decode_record(r) for r in records] == decode_batch(encode_batch(records))
    for r in records:
        apply(rebuilt, r)
    assert snapshot(rebuilt) == snapshot(after)
    assert snapshot(load_snapshot(snapshot(after), 1)) == snapshot(after)


@pytest.mark.parametrize("seed", range(40))
def test_random_histories_keep_the_rules(seed):
    rng = random.Random(seed)
    image = image_with([rng.sample(BROKERS, rng.randint(1, 3)) for _ in range(4)], unclean=rng.random() < 0.5)
    for _step in range(60):
        before = copy.deepcopy(image)
        target = None
        t = image.topics["t"]
        ps = t.partitions[rng.randrange(len(t.partitions))]
        op = rng.randrange(7)
        if op == 0:  # a broker is fenced
            n = rng.choice(BROKERS)
            if not image.brokers[n].fenced:
                image.brokers[n].fenced = True
                elect_in_place(image, {n})
        elif op == 1:  # a broker comes back
            n = rng.choice(BROKERS)
            image.brokers[n].fenced = False
            elect_in_place(image, set())
        elif op == 2 and ps.leader != -1:  # the leader adds a caught-up replica to the ISR
            joining = [r for r in ps.replicas if r not in ps.isr and not image.brokers[r].fenced]
            if joining:
                elections.change(ps, ps.leader, ps.isr + [rng.choice(joining)])
                reassignment.maybe_complete(image, ps)
        elif op == 3:
            target = rng.sample(BROKERS, rng.randint(1, 4))
            reassignment.check_target(image, "t", ps, target, True)
            reassignment.start(image, ps, target)
            assert ps.target_replicas == target
            if reassignment.in_progress(ps):
                assert ps.replicas[: len(target)] == target and not set(target) <= set(ps.isr)
            else:
                assert ps.replicas == target
        elif op == 4:
            try:
                reassignment.cancel(image, "t", ps)
            except reassignment.ReassignmentError as e:
                assert e.code == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS and not reassignment.in_progress(ps)
        elif op == 5:
            code, _ = elections.elect_preferred(image, t, ps)
            if code == ErrorCode.NONE:
                assert ps.leader == ps.preferred_leader
        else:
            code, _, outside = elections.elect_unclean(image, t, ps)
            if outside:
                assert ps.isr == [ps.leader]
        check_rules(before, image, target)


def test_fenced_leader_hands_over_in_replica_order_and_the_last_isr_member_stays():
    image = image_with([[3, 1, 2]])
    ps = image.topics["t"].partitions[0]
    ps.isr = [2, 3, 1]  # ISR order differs from replica order
    image.brokers[3].fenced = True
    moved = elect_in_place(image, {3})
    assert [(e.old_leader, e.new_leader) for e in moved] == [(3, 1)] and ps.isr == [2, 1]
    image.brokers[1].fenced = image.brokers[2].fenced = True
    elect_in_place(image, {1, 2})
    assert ps.leader == -1 and ps.isr == [2, 1]  # nobody left: the ISR keeps its last members
    image.brokers[3].fenced = False
    assert elect_in_place(image, set()) == [] and ps.leader == -1  # 3 is not in the ISR
    image.topics["t"].configs["unclean.leader.election.enable"] = "true"
    moved = elect_in_place(image, set())
    assert moved[0].unclean and ps.leader == 3 and ps.isr == [3]


def test_reassignment_states():
    image = image_with([[1, 2, 3]])
    ps = image.topics["t"].partitions[0]
    reassignment.start(image, ps, [4, 5, 1])
    assert (ps.replicas, ps.adding_replicas, ps.removing_replicas) == ([4, 5, 1, 2, 3], [4, 5], [2, 3])
    assert ps.leader == 1 and ps.target_replicas == [4, 5, 1]
    elections.change(ps, 1, ps.isr + [4])
    assert not reassignment.maybe_complete(image, ps)
    elections.change(ps, 1, ps.isr + [5])
    assert reassignment.maybe_complete(image, ps)
    assert (ps.replicas, ps.isr, ps.leader, ps.adding_replicas) == ([4, 5, 1], [1, 4, 5], 1, [])
    # moving the leader away: the first live target replica takes over at completion
    reassignment.start(image, ps, [5, 4])
    assert ps.leader == 5 and ps.replicas == [5, 4] and ps.isr == [4, 5]
    with pytest.raises(reassignment.ReassignmentError) as e:
        reassignment.check_target(image, "t-0", ps, [5, 4, 3], False)
    assert e.value.code == ErrorCode.INVALID_REPLICATION_FACTOR
    with pytest.raises(reassignment.ReassignmentError) as e:
        reassignment.check_target(image, "t-0", ps, [5, 7], True)
    assert e.value.code == ErrorCode.INVALID_REPLICA_ASSIGNMENT and "7" in e.value.message
