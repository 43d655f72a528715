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


# --- the coordinator on trio's mock clock: a reload rebuilds the very same state -------------


def sg_state(coord, group: str) -> dict:
    g = coord.streams.groups[group]
    return {
        "epochs": (g.group_epoch, g.assignment_epoch, g.validated_epoch, g.standby_replicas, g.metadata_hash),
        "topology": g.topology,
        "configured": g.configured.subtopologies if g.configured else None,
        "target": {k: v for k, v in g.target.items() if v or k in g.members},
        "static": dict(g.static_members),
        "owners": (dict(g.owners.active), dict(g.owners.standby), dict(g.owners.warmup)),
        "members": {
            mid: (
                m.member_epoch,
                m.previous_epoch,
                m.state,
                m.assigned,
                m.pending_revocation,
                dict(m.active_epochs),
                m.left_temporarily,
                m.instance_id,
                m.process_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                m.topology_epoch,
                m.user_endpoint,
                dict(m.client_tags),
            )
            for mid, m in g.members.items()
        },
    }


def sg_records(coord, group: str, start: int) -> list[tuple[str, str | None]]:
    from logbroker.coord.groups import offsets_topic as ot

    part = coord.replicas.get(OFFSETS_TOPIC, coord.partition_of(group))
    out = []
    for _o, _ts, key, _value in part.log.read_records(start, part.log.log_end_offset):
        kind, gid, member, _ = ot.parse_key(key)
        if gid == group and kind in ot.SG_TYPE_BY_KIND:
            out.append((kind, member))
    return out


@pytest.mark.trio
async def test_reload_rebuilds_the_streams_group_from_its_records(tmp_path, nursery):
    from test_group_coordinator import make

    from logbroker.coord.groups.offsets_topic import (
        SG_CURRENT_ASSIGNMENT,
        SG_MEMBER_METADATA,
        SG_METADATA,
        SG_TARGET_MEMBER,
        SG_TARGET_METADATA,
        SG_TOPOLOGY,
    )
    from logbroker.coord.groups.streams_group import UNREVOKED_TASKS

    coord = await make(tmp_path, nursery, group_streams_initial_rebalance_delay_ms=0)
    H = REQUESTS[88]

    async def beat(member, epoch, owned=None, instance=None, process=None):
        joining = epoch == 0
        req = H(
            group_id="s",
            member_id=member,
            member_epoch=epoch,
            endpoint_information_epoch=0,
            instance_id=instance,
            rebalance_timeout_ms=20000 if joining else -1,
            topology=topology(source="t", epoch=1) if joining else None,
            process_id=(process or f"proc-{member}") if joining else None,
            user_endpoint=H.Endpoint(host="h", port=8080) if joining else None,
            client_tags=[H.KeyValue(key="zone", value="z1")] if joining else None,
            active_tasks=None if owned is None else [H.TaskIds(subtopology_id="0", partitions=sorted(owned))],
            standby_tasks=None if owned is None else [],
            warmup_tasks=None if owned is None else [],
        )
        out = await coord.streams.heartbeat(req, 1, f"client-{member}", "/127.0.0.1")
        assert out["error"] == 0, out
        return out

    async def reload_same():
        before = sg_state(coord, "s")
        for mid, m in list(before["members"].items()):
            if m[6]:  # away for now: its record holds epoch -2 and its own epoch (as the previous)
                before["members"][mid] = (m[0], -1, *m[2:])
        await coord.reload()
        after = sg_state(coord, "s")
        for k, v in before.items():
            if k == "members":
                for mid, fields in v.items():
                    for i, f in enumerate(fields):
                        assert after[k][mid][i] == f, (mid, i, f, after[k][mid][i])
            assert after[k] == v, (k, v, after[k])
        assert not coord.streams.dirty  # nothing to repair: the records said it all

    def log_end():
        return coord.replicas.get(OFFSETS_TOPIC, coord.partition_of("s")).log.log_end_offset

    at = log_end()
    r1 = await beat("m1", 0)
    assert {p for _s, p in r1["assignment"].active} == {0, 1, 2, 3}
    kinds = {k for k, _ in sg_records(coord, "s", at)}
    assert kinds == {SG_TOPOLOGY, SG_MEMBER_METADATA, SG_METADATA, SG_TARGET_MEMBER, SG_TARGET_METADATA,
                     SG_CURRENT_ASSIGNMENT}  # fmt: skip
    at = log_end()
    e1 = r1["member_epoch"]
    await beat("m1", e1, owned={0, 1, 2, 3})  # changes nothing, writes nothing
    assert log_end() == at
    await reload_same()
    r2 = await beat("m2", 0, instance="i2")
    r1 = await beat("m1", e1, owned={0, 1, 2, 3})  # m1 must revoke two tasks first
    kept = {p for _s, p in r1["assignment"].active}
    assert len(kept) == 2 and coord.streams.groups["s"].members["m1"].state == UNREVOKED_TASKS
    await reload_same()  # mid-revocation
    r1 = await beat("m1", e1, owned=kept)
    r2 = await beat("m2", r2["member_epoch"], owned=set())
    assert {p for _s, p in r2["assignment"].active} == {0, 1, 2, 3} - kept
    await reload_same()
    e2 = r2["member_epoch"]
    await beat("m2", -2, instance="i2")  # a static member leaves for now
    await reload_same()
    back = await beat("m2b", 0, instance="i2", process="proc-m2")  # comes back: its place, tasks, epoch
    assert back["member_epoch"] == e2 and {p for _s, p in back["assignment"].active} == {0, 1, 2, 3} - kept
    assert "m2" not in coord.streams.groups["s"].members
    await reload_same()
    at = log_end()
    await beat("m1", -1)  # leaves: its records tombstoned
    recs = sg_records(coord, "s", at)
    assert [r for r in recs if r[1] == "m1"][:3] == [
        (SG_CURRENT_ASSIGNMENT, "m1"),
        (SG_TARGET_MEMBER, "m1"),
        (SG_MEMBER_METADATA, "m1"),
    ], recs
    await reload_same()
    await beat("m2b", -1)
    await reload_same()  # Empty, with its epoch and topology
    assert (await coord.delete_groups(["s"])) == {"s": 0}
    await coord.reload()
    assert "s" not in coord.streams.groups and "s" not in coord.streams.persisted
