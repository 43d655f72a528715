"""Eligible leader replicas (coord/metadata/eligible_leaders.py, KIP-966) in the controller's
elections, on scratch metadata images: Kafka's rules step by step, the records of each step
rebuilding the image, and a random history against a simple model of which replicas hold
every record below the HW."""

from __future__ import annotations

import copy
import random
import uuid

import pytest

from logbroker.coord.metadata import elections, eligible_leaders
from logbroker.coord.metadata.control import partition_change_record
from logbroker.coord.metadata.metadata import BrokerRegistration, MetadataImage, TopicState
from logbroker.coord.metadata.metadata_records import apply, snapshot

BROKERS = [1, 2, 3]


def image_with(replicas: list[int], min_isr: int = 2) -> MetadataImage:
    from logbroker.coord.metadata.replication_control import new_partition

    image = MetadataImage("c", 1, {n: BrokerRegistration(n, "h", 9000 + n) for n in BROKERS}, {}, 0)
    image.features[eligible_leaders.FEATURE] = 1
    image.topics["t"] = TopicState("t", uuid.uuid4(), {0: new_partition(0, replicas, image)}, {})
    image.topics["t"].configs["min.insync.replicas"] = str(min_isr)
    return image


def min_isr(t, ps) -> int:
    return eligible_leaders.effective_min_isr(t, ps, 1)


def step(image: MetadataImage, gone: set[int] = frozenset(), back: set[int] = frozenset()) -> list:
    """Fence `gone`, unfence `back`, elect as the controller does; the new state goes into
    the image through its PartitionChange record (so the record's checks run too)."""
    for n in gone:
        image.brokers[n].fenced = True
    for n in back:
        image.brokers[n].fenced = False
    changes = elections.elect_for_brokers(image, set(gone), lambda t: False, min_isr=min_isr)
    for t, new, _e in changes:
        apply(image, partition_change_record(t.topic_id, new))
    return [e for _t, _n, e in changes if e is not None]


def state(image: MetadataImage):
    ps = image.topics["t"].partitions[0]
    return ps.leader, ps.isr, ps.elr, ps.last_known_elr


def test_a_replica_leaving_an_isr_below_min_isr_is_elected_when_the_isr_empties():
    image = image_with([1, 2, 3])
    assert state(image) == (1, [1, 2, 3], [], [])
    step(image, gone={2})  # ISR [1, 3] is at min ISR: no ELR
    assert state(image) == (1, [1, 3], [], [])
    step(image, gone={3})  # ISR [1] is below min ISR 2: 3 has every record below the HW
    assert state(image) == (1, [1], [3], [])
    step(image, gone={1})  # the last ISR member leaves too: the partition waits for an ELR member
    assert state(image) == (-1, [], [3, 1], [1])
    moved = step(image, back={3})  # 3 returns (the same process): elected, no unclean election
    assert [(e.old_leader, e.new_leader, e.unclean) for e in moved] == [(-1, 3, False)]
    assert state(image) == (3, [3], [1], [])


def test_an_isr_back_at_min_isr_empties_the_elr():
    image = image_with([1, 2, 3])
    step(image, gone={2})
    step(image, gone={3})
    assert state(image)[2] == [3]
    ps = image.topics["t"].partitions[0]
    new = copy.copy(ps)
    new.isr, new.partition_epoch = [1, 2], ps.partition_epoch + 1
    new.elr = eligible_leaders.target_elr(ps, new.isr, 2, frozenset())
    apply(image, partition_change_record(image.topics["t"].topic_id, new))
    assert state(image) == (1, [1, 2], [], [])


def test_a_new_process_leaves_every_elr_and_the_last_known_leader_leads_again():
    image = image_with([1, 2, 3])
    step(image, gone={2})
    step(image, gone={3})
    step(image, gone={1})
    assert state(image) == (-1, [], [3, 1], [1])
    # 3 restarts (a new process: it may have lost what it had not flushed)
    reg = image.brokers[3]
    apply(image, _register(3, reg.epoch + 1))
    assert state(image)[2] == [1]
    assert step(image, back={3}) == []  # 3 is no longer eligible; 1 (in the ELR) is down
    assert state(image)[0] == -1
    apply(image, _register(1, image.brokers[1].epoch + 1))  # 1 restarts: the ELR is empty
    assert state(image) == (-1, [], [], [1])
    moved = step(image, back={1})  # the last known leader leads, as before ELR
    assert [(e.new_leader, e.unclean) for e in moved] == [(1, False)]
    assert state(image) == (1, [1], [], [])


def test_without_the_feature_the_last_isr_member_stays_and_no_elr_is_kept():
    image = image_with([1, 2, 3])
    image.features[eligible_leaders.FEATURE] = 0
    for gone in ({2}, {3}, {1}):
        for n in gone:
            image.brokers[n].fenced = True
        for t, new, _e in elections.elect_for_brokers(image, gone, lambda t: False):
            apply(image, partition_change_record(t.topic_id, new))
    assert state(image) == (-1, [1], [], [])


def _register(node: int, epoch: int) -> bytes:
    from logbroker.coord.metadata.metadata_records import encode_record

    return encode_record("RegisterBroker", node_id=node, epoch=epoch, host="h", port=9000 + node, rack=None)


@pytest.mark.parametrize("seed", range(30))
def test_random_histories_never_elect_a_replica_missing_acknowledged_records(seed):
    """The model: the replicas holding every record below the HW (`complete`). Records are
    acknowledged only while the ISR is at min ISR or above (the strict min ISR rule); then
    every ISR member has them and the others do not. A restart (a new process) may lose
    what a replica had not flushed: it is no longer complete. Every ELR member is complete;
    an elected leader is too, unless it is the last known leader elected with no eligible
    replica left (the behaviour before ELR), whose log then is the history; no election is
    unclean."""
    rng = random.Random(seed)
    image = image_with([1, 2, 3])
    complete = {1, 2, 3}
    for _ in range(80):
        ps = image.topics["t"].partitions[0]
        before = copy.deepcopy(ps)
        op = rng.randrange(4)
        n = rng.choice(BROKERS)
        moved = []
        if op == 0 and not image.brokers[n].fenced:
            moved = step(image, gone={n})
        elif op == 1 and image.brokers[n].fenced:
            moved = step(image, back={n})
        elif op == 2 and image.brokers[n].fenced:  # a restart: a new process, then unfenced
            apply(image, _register(n, image.brokers[n].epoch + 1))
            complete.discard(n)
            before = copy.deepcopy(image.topics["t"].partitions[0])
            moved = step(image, back={n})
        elif op == 3 and ps.leader >= 0 and len(ps.isr) >= 2:  # records acknowledged
            complete = set(ps.isr)
        ps = image.topics["t"].partitions[0]
        for e in moved:
            if e.new_leader >= 0 and e.new_leader not in complete:
                # only the last known leader, with no eligible replica left (as before ELR):
                # its log is the partition's history from here on
                assert before.elr == [] and before.last_known_elr == [e.new_leader], (before, ps, complete)
                complete = {e.new_leader}
            assert not e.unclean
        assert set(ps.elr) <= complete, (ps, complete)
        assert not set(ps.elr) & set(ps.isr) and set(ps.elr) <= set(ps.replicas), ps
        if len(ps.isr) >= 2:
            assert ps.elr == [], ps
        assert snapshot(image) == snapshot(copy.deepcopy(image))
