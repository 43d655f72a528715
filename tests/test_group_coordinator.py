"""The group coordinator's timers and state machines on trio's mock clock: session
timeouts, the initial rebalance delay, rebalance timeouts, and KIP-848 revocation
before assignment. Real controller, real logs on disk, no network."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from logbroker.broker.replica_manager import ReplicaManager
from logbroker.common.config import BrokerConfig
from logbroker.coord.groups.group import GroupState
from logbroker.coord.groups.group_coordinator import GroupCoordinator
from logbroker.coord.metadata.controller import Controller
from logbroker.coord.metadata.metadata import BrokerRegistration, MetadataStore
from logbroker.coord.metadata.metadata_quorum import MetadataQuorum, node_cluster_id
from logbroker.protocol import REQUESTS, ErrorCode


@pytest.fixture
def clock():
    # jump only after 50 ms of real idleness, so worker-thread disk work finishes first
    return trio.testing.MockClock(autojump_threshold=0.05)


async def make(tmp_path, nursery, **settings):
    overrides = {
        "log.dirs": str(tmp_path / "d"),
        "offsets.topic.num.partitions": "3",
        "group.initial.rebalance.delay.ms": "0",
        # the metadata quorum ticks every election timeout / 10; each tick wakes the loop, and
        # the autojumping clock then waits 50 ms of real time before it jumps again: ticks of
        # 1 s instead of 0.1 s make a test that sleeps 86 virtual seconds take 5 s, not 44
        "controller.quorum.election.timeout.ms": "10000",
    }
    overrides.update({k.replace("_", "."): str(v) for k, v in settings.items()})
    config = BrokerConfig(overrides)
    local, store = BrokerRegistration(1, "127.0.0.1", 9092), MetadataStore(config.data_dir)
    quorum = MetadataQuorum(config, local, node_cluster_id(config, store))  # a single node: one voter
    controller = Controller(config, store, local, quorum)
    quorum.open()
    await nursery.start(quorum.run, controller.on_quorum_image)
    await quorum.wait_replayed()
    replicas = ReplicaManager(config)
    await replicas.startup(controller.image)
    controller.add_listener(replicas.apply_metadata)
    coord = GroupCoordinator(config, replicas, controller)
    await coord.startup()
    await coord.ensure_offsets_topic()
    await controller.create_topic("t", 4)
    await nursery.start(coord.run)
    return coord


async def join(coord, group, member_id="", session=6000, rebalance=10000, protocols=(("range", b"m"),)):
    return await coord.join_group(
        group_id=group,
        member_id=member_id,
        group_instance_id=None,
        client_id="c",
        client_host="/h",
        session_timeout_ms=session,
        rebalance_timeout_ms=rebalance,
        protocol_type="consumer",
        protocols=list(protocols),
        require_known_member_id=False,
        reason=None,
    )


@pytest.mark.trio
async def test_session_timeout_expires_a_silent_member(tmp_path, nursery, clock):
    coord = await make(tmp_path, nursery)
    r = await join(coord, "g")
    assert r.error == 0 and r.generation_id == 1
    s = await coord.sync_group(
        group_id="g",
        generation_id=1,
        member_id=r.member_id,
        group_instance_id=None,
        protocol_type=None,
        protocol_name=None,
        assignments={r.member_id: b"a"},
    )
    assert s.error == 0
    group = coord.groups["g"]
    await trio.sleep(5)
    assert coord.heartbeat(group_id="g", generation_id=1, member_id=r.member_id, group_instance_id=None) == 0
    await trio.sleep(5.5)  # 5.5 s since the last heartbeat: still alive
    assert group.state == GroupState.STABLE
    await trio.sleep(1)  # past 6 s: expired
    assert group.state == GroupState.EMPTY and not group.members and group.generation_id == 2


@pytest.mark.trio
async def test_initial_rebalance_delay_gathers_members(tmp_path, nursery, clock):
    coord = await make(tmp_path, nursery, group_initial_rebalance_delay_ms=3000)
    results = {}

    async def member(name, delay):
        await trio.sleep(delay)
        results[name] = (await join(coord, "g"), trio.current_time())

    t0 = trio.current_time()
    async with trio.open_nursery() as n:
        n.start_soon(member, "a", 0)
        n.start_soon(member, "b", 2)  # within the first delay: extends it by another 3 s
    (ra, ta), (rb, tb) = results["a"], results["b"]
    assert ra.generation_id == rb.generation_id == 1
    assert len(ra.members if ra.leader_id == ra.member_id else rb.members) == 2
    assert 5.9 <= ta - t0 <= 6.1 and abs(ta - tb) < 0.01


@pytest.mark.trio
async def test_rebalance_timeout_drops_members_that_do_not_rejoin(tmp_path, nursery, clock):
    coord = await make(tmp_path, nursery)
    ra = await join(coord, "g", session=30000, rebalance=4000)
    await coord.sync_group(
        group_id="g",
        generation_id=1,
        member_id=ra.member_id,
        group_instance_id=None,
        protocol_type=None,
        protocol_name=None,
        assignments={},
    )
    t0 = trio.current_time()
    rb = await join(coord, "g", session=30000, rebalance=4000)  # a never rejoins
    assert rb.error == 0 and rb.generation_id == 2 and [m[0] for m in rb.members] == [rb.member_id]
    # dropped at the rebalance timeout (4 s), long before its session timeout (30 s); past
    # 4 s by whatever the clock jumped while the new generation's write ran on a worker
    # thread (a task waiting on a thread counts as idle to the autojumping clock)
    assert 3.9 <= trio.current_time() - t0 < 10
    assert ra.member_id not in coord.groups["g"].members


@pytest.mark.trio
async def test_kip848_revokes_before_assigning(tmp_path, nursery, clock):
    coord = await make(tmp_path, nursery, group_consumer_session_timeout_ms=45000)
    HB = REQUESTS[68]
    tid = coord.controller.image.topics["t"].topic_id

    async def hb(member_id, epoch, owned=None, topics=None):
        req = HB(
            group_id="g",
            member_id=member_id,
            member_epoch=epoch,
            rebalance_timeout_ms=20000,
            subscribed_topic_names=topics,
            topic_partitions=None if owned is None else [HB.TopicPartitions(topic_id=tid, partitions=sorted(owned))],
        )
        return await coord.consumer.heartbeat(req, 1, "c", "/h")

    r1 = await hb("m1", 0, owned=set(), topics=["t"])
    assert r1["error"] == 0 and r1["member_epoch"] == 1 and r1["assignment"] == {("t", p) for p in range(4)}
    r2 = await hb("m2", 0, owned=set(), topics=["t"])
    # m1 still owns everything: m2 is at the new epoch but gets nothing yet
    assert r2["member_epoch"] == 2 and r2["assignment"] == frozenset()
    r1 = await hb("m1", 1, owned={0, 1, 2, 3})
    kept = {p for _, p in r1["assignment"]}
    assert len(kept) == 2 and r1["member_epoch"] == 1  # revoke first, epoch unchanged
    # still held by m1; the (empty) assignment comes back because m2 reported what it owns
    assert (await hb("m2", 2, owned=set()))["assignment"] == frozenset()
    assert (await hb("m2", 2)).get("assignment") is None  # nothing changed, nothing reported: none sent
    r1 = await hb("m1", 1, owned=kept)  # m1 acknowledges the revocation
    assert r1["member_epoch"] == 2
    r2 = await hb("m2", 2, owned=set())
    assert {p for _, p in r2["assignment"]} == {0, 1, 2, 3} - kept
    assert (await hb("m1", 7, owned=kept))["error"] == ErrorCode.FENCED_MEMBER_EPOCH
    assert coord.consumer.groups["g"].state == "Stable"
    # m2 goes silent: fenced after the session timeout, m1 gets everything back
    await trio.sleep(30)
    assert (await hb("m1", 2, owned=kept))["error"] == 0
    await trio.sleep(16)
    assert list(coord.consumer.groups["g"].members) == ["m1"]
    r1 = await hb("m1", 2, owned=kept)
    assert {p for _, p in r1["assignment"]} == {0, 1, 2, 3} and r1["member_epoch"] == 3


@pytest.mark.trio
async def test_offsets_retention_expires_offsets_of_empty_groups(tmp_path, nursery, clock):
    import time as wall

    coord = await make(tmp_path, nursery)
    res = await coord.commit_offsets(
        group_id="simple", generation_id=-1, member_id="", group_instance_id=None, offsets=[("t", 0, 42, -1, "meta")]
    )
    assert res == {("t", 0): 0}
    assert coord.fetch_offsets("simple", [("t", 0)])[1][("t", 0)].offset == 42
    coord.retention_ms = 300  # offsets.retention.minutes, shrunk for the test
    await coord._expire_offsets()
    assert coord.fetch_offsets("simple", [("t", 0)])[1][("t", 0)] is not None  # not old enough yet
    wall.sleep(0.4)  # noqa: ASYNC251 - retention ages on the wall clock (now_ms), which the mock clock does not move
    await coord._expire_offsets()
    assert coord.fetch_offsets("simple", [("t", 0)])[1][("t", 0)] is None
    assert "simple" not in coord.groups
    # the tombstones are in __consumer_offsets: a reload finds nothing
    coord.groups.clear()
    await coord.reload()
    assert "simple" not in coord.groups
