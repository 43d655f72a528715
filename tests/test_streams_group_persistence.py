"""Streams groups (KIP-1071) persisted in __consumer_offsets with Kafka 4.4's streams-group
records (coord/groups/streams_group.py, formats in offsets_topic.py): a new coordinator continues
the group. Raw StreamsGroupHeartbeat requests (helpers of tests/test_streams_groups.py):

- one broker restarted on its data: the members heartbeat at their epochs and keep their tasks,
  nothing moves, the topology is the same; a member that left before is gone; Kafka's own
  kafka-dump-log --offsets-decoder reads every record type the broker wrote for the group;
- DeleteGroups of an empty group: gone after a restart too; an empty group not deleted stays;
- three brokers: the coordinator is killed, the new leader of the group's partition loads it
  and the members continue at their epochs with their tasks.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import require_java, wait_until
from rawclient import RawClient
from test_bad_input import create_topic
from test_streams_groups import Describe, FindCoordinator, ListGroups, by_sub, hb, tasks, topology

from logbroker import Broker
from logbroker.coord.groups.offsets_topic import OFFSETS_TOPIC, partition_for
from logbroker.protocol import REQUESTS, ErrorCode

HERE = Path(__file__).resolve().parent
DeleteGroups = REQUESTS[42]
CONFIG = {
    "group.streams.initial.rebalance.delay.ms": "0",
    "group.streams.heartbeat.interval.ms": "100",
    "group.streams.session.timeout.ms": "10000",
}
NOT_HERE = (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE)


def beat(c: RawClient, member: str, epoch: int, owned, group: str = "app"):
    """A heartbeat reporting `owned` active tasks."""
    return hb(c, member, epoch, active=by_sub(owned), standby=[], warmup=[], group=group)


def stable_pair(c: RawClient, group: str = "app") -> dict[str, tuple[int, list]]:
    """Members a and b joined (and c joined and left in between); heartbeats until both hold two
    of the four tasks at the group's assignment epoch. {member: (epoch, tasks)}."""
    topo = topology(changelog=f"{group}-counts-changelog")
    deadline = time.monotonic() + 30
    while True:  # the coordinator may still be loading its partition
        a = hb(c, "a", 0, topo=topo, group=group)
        if a.error_code not in NOT_HERE or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert a.error_code == ErrorCode.NONE, a
    held = {"a": (a.member_epoch, tasks(a) or [])}

    def until(pred, what):
        deadline = time.monotonic() + 10
        while True:
            for m, (epoch, owned) in list(held.items()):
                r = beat(c, m, epoch, owned, group)
                assert r.error_code == ErrorCode.NONE, r
                held[m] = (r.member_epoch, tasks(r) if r.active_tasks is not None else owned)
            if pred():
                return
            assert time.monotonic() < deadline, (what, held)
            time.sleep(0.1)

    until(lambda: len(held["a"][1]) == 4, "a holding the 4 tasks")
    cc = hb(c, "c", 0, topo=topo, group=group)
    assert cc.error_code == ErrorCode.NONE
    assert hb(c, "c", -1, group=group).error_code == ErrorCode.NONE  # leaves: its records tombstoned
    b = hb(c, "b", 0, topo=topo, group=group)
    assert b.error_code == ErrorCode.NONE
    held["b"] = (b.member_epoch, [])
    until(
        lambda: len(held["a"][1]) == 2 and len(held["b"][1]) == 2 and held["a"][0] == held["b"][0],
        "a and b holding two tasks each",
    )
    return held


def describe(c: RawClient, group: str = "app"):
    return c.request(89, 1, Describe(group_ids=[group], include_authorized_operations=False)).groups[0]


def view(d) -> tuple:
    return (
        d.error_code,
        d.group_state,
        d.group_epoch,
        d.assignment_epoch,
        d.topology.epoch,
        [s.subtopology_id for s in d.topology.subtopologies],
        sorted(
            (
                m.member_id,
                m.member_epoch,
                m.process_id,
                [(t.subtopology_id, sorted(t.partitions)) for t in m.assignment.active_tasks],
            )
            for m in d.members
        ),
    )


def continue_at(bs: str, held: dict, group: str = "app") -> None:
    """Each member heartbeats (the coordinator loading meanwhile) at its epoch with its tasks: the
    same epoch comes back, with the same tasks."""
    with RawClient(bs) as c:
        for m, (epoch, owned) in held.items():
            deadline = time.monotonic() + 30
            while True:
                r = beat(c, m, epoch, owned, group)
                if r.error_code not in NOT_HERE:
                    break
                assert time.monotonic() < deadline, r
                time.sleep(0.2)
            assert (r.error_code, r.member_epoch) == (ErrorCode.NONE, epoch), (m, r)
            assert r.active_tasks is None or tasks(r) == sorted(owned), (m, r, owned)


def test_members_keep_their_epochs_and_tasks_across_a_restart(tmp_path):
    with Broker(data_dir=tmp_path / "d", config=CONFIG) as b:
        bs = b.bootstrap_servers
        with RawClient(bs) as c:
            assert create_topic(c, "words-in", 4) == 0
            c.request(10, 4, FindCoordinator(key_type=0, coordinator_keys=["app"]))
            held = stable_pair(c)
            before = view(describe(c))
            assert before[1] == "Stable" and [m[0] for m in before[6]] == ["a", "b"], before
        b.restart()
        assert b.bootstrap_servers == bs
        continue_at(bs, held)
        with RawClient(bs) as c:
            assert view(describe(c)) == before  # nothing moved: same epochs, same tasks, same topology
            gone = hb(c, "c", 1, active=[], standby=[], warmup=[])
            assert gone.error_code == ErrorCode.UNKNOWN_MEMBER_ID, gone  # c left before the restart
            for _ in range(3):  # and it stays so: heartbeats at the same epochs change nothing
                for m, (epoch, owned) in held.items():
                    r = beat(c, m, epoch, owned)
                    assert (r.error_code, r.member_epoch) == (ErrorCode.NONE, epoch)
                    assert r.active_tasks is None or tasks(r) == sorted(owned)
            assert view(describe(c)) == before
        dump_log_check(tmp_path / "d", b.config.get_int("offsets.topic.num.partitions"), before)


def dump_log_check(data_dir: Path, partitions: int, before: tuple) -> None:
    """Kafka 4.4's kafka-dump-log --offsets-decoder on the group's __consumer_offsets segment:
    every streams-group record type, decoded to the group's values; c's records tombstoned."""
    require_java()
    sys.path.insert(0, str(HERE.parent))
    from benches.peers.kafka import install

    index = partition_for("app", partitions)
    segs = sorted((data_dir / f"{OFFSETS_TOPIC}-{index}").glob("*.log"))
    r = subprocess.run(
        install().tools_java(
            "org.apache.kafka.tools.DumpLogSegments", ["--files", ",".join(map(str, segs)), "--offsets-decoder"]
        ),
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    by_type: dict[str, list] = {}
    for k, p in re.findall(r"key: (\{.*?\}) payload: (.*)$", r.stdout, re.M):
        key = json.loads(k)
        if key["data"].get("groupId") == "app":
            by_type.setdefault(key["type"], []).append((key["data"], json.loads(p) if p.startswith("{") else None))
    assert set(by_type) == {"17", "19", "20", "21", "22", "23"}, sorted(by_type)
    _, _, group_epoch, assignment_epoch, topology_epoch, subs, members = before
    assert by_type["17"][-1][1]["data"]["epoch"] == group_epoch
    assert by_type["17"][-1][1]["data"]["validatedTopologyEpoch"] == topology_epoch
    assert by_type["20"][-1][1]["data"]["assignmentEpoch"] == assignment_epoch
    assert [s["subtopologyId"] for s in by_type["23"][-1][1]["data"]["subtopologies"]] == subs
    for t in ("19", "21", "22"):  # c: values, then tombstones
        c_records = [v for k, v in by_type[t] if k["memberId"] == "c"]
        assert c_records and c_records[-1] is None, (t, c_records)
    for mid, epoch, process, active in members:
        cur = [v for k, v in by_type["22"] if k["memberId"] == mid][-1]["data"]
        assert cur["memberEpoch"] == epoch and cur["state"] == 1  # STABLE
        assert [(t["subtopologyId"], t["partitions"]) for t in cur["activeTasks"]] == active
        assert all(len(t["assignmentEpochs"]) == len(t["partitions"]) for t in cur["activeTasks"])
        meta = [v for k, v in by_type["19"] if k["memberId"] == mid][-1]["data"]
        assert meta["processId"] == process and meta["topologyEpoch"] == topology_epoch


def test_deleted_group_is_gone_after_a_restart_and_an_empty_one_stays(tmp_path):
    with Broker(data_dir=tmp_path / "d", config=CONFIG) as b:
        bs = b.bootstrap_servers
        with RawClient(bs) as c:
            assert create_topic(c, "words-in", 2) == 0
            for g in ("gone-app", "kept-app"):
                c.request(10, 4, FindCoordinator(key_type=0, coordinator_keys=[g]))
                assert hb(c, "a", 0, topo=topology(), group=g).error_code == ErrorCode.NONE
                assert hb(c, "a", -1, group=g).error_code == ErrorCode.NONE
            kept = describe(c, "kept-app")
            assert (kept.error_code, kept.group_state) == (ErrorCode.NONE, "Empty")
            deleted = c.request(42, 2, DeleteGroups(groups_names=["gone-app"])).results
            assert [(r.group_id, r.error_code) for r in deleted] == [("gone-app", ErrorCode.NONE)]
        b.restart()
        with RawClient(bs) as c:

            def listed():
                r = c.request(16, 5, ListGroups(states_filter=[], types_filter=["streams"]))
                return None if r.error_code else sorted((g.group_id, g.group_state) for g in r.groups)

            assert wait_until(listed, what="ListGroups after the restart") == [("kept-app", "Empty")]
            assert describe(c, "gone-app").error_code == ErrorCode.GROUP_ID_NOT_FOUND
            again = describe(c, "kept-app")
            assert (again.group_state, again.group_epoch, again.topology.epoch) == (
                "Empty",
                kept.group_epoch,
                kept.topology.epoch,
            )
            # the kept group continues: a member joins it at the next group epoch
            joined = hb(c, "z", 0, topo=topology(), group="kept-app")
            assert joined.error_code == ErrorCode.NONE and joined.member_epoch == kept.group_epoch + 1, joined


@pytest.mark.timeout(120)
def test_members_continue_after_their_coordinator_is_killed(tmp_path):
    from replication_helpers import FAST, full_isr, layout

    from logbroker import Cluster

    config = {
        **FAST,
        **CONFIG,
        "offsets.topic.replication.factor": 3,
        "offsets.topic.num.partitions": 3,
        "min.insync.replicas": 2,
    }
    with Cluster(3, data_dir=tmp_path / "cluster", config=config) as cluster:
        bs = cluster.nodes[0].bootstrap_servers
        with RawClient(bs) as c:
            assert create_topic(c, "words-in", 4) == 0
        index = partition_for("app", 3)

        def coordinator():
            with RawClient(bs) as c:
                r = c.request(10, 4, FindCoordinator(key_type=0, coordinator_keys=["app"])).coordinators[0]
            return r.node_id if r.error_code == 0 else None

        node = cluster.node(wait_until(coordinator, what="a coordinator for app"))
        full_isr(cluster, OFFSETS_TOPIC, 3)
        with RawClient(node.bootstrap_servers) as c:
            held = stable_pair(c)
            before = view(describe(c))
        full_isr(cluster, OFFSETS_TOPIC, 3)
        node.kill()
        survivor = next(n for n in cluster.nodes if n.node_id != node.node_id)

        def new_leader():
            leader = layout(survivor)[(OFFSETS_TOPIC, index)][0]
            return leader if leader not in (node.node_id, -1) else None

        moved = cluster.node(wait_until(new_leader, timeout=30, what=f"a new leader of {OFFSETS_TOPIC}-{index}"))
        continue_at(moved.bootstrap_servers, held)
        with RawClient(moved.bootstrap_servers) as c:
            assert view(describe(c)) == before
