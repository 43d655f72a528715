"""Streams groups (coord/groups/streams_group.py): static members and standby tasks over the
wire. A static member (group.instance.id) that leaves temporarily (epoch -2) is replaced by a
new member id of the same instance, which takes over its tasks and epoch with no rebalance;
UNRELEASED_INSTANCE_ID while the old one still holds the instance. With
streams.num.standby.replicas=1 (a group config) each stateful task has a standby on the other
process, never on the process running it active."""

from __future__ import annotations

import time

from rawclient import RawClient
from test_bad_input import create_topic
from test_streams_groups import FAST, by_sub, hb, tasks, topology

from logbroker import Broker
from logbroker.protocol import REQUESTS, ErrorCode

FindCoordinator = REQUESTS[10]
IncrementalAlterConfigs = REQUESTS[44]


def settle(c, members: dict, done, timeout: float = 10.0) -> dict:
    """Heartbeats every member, reporting what it was given, until `done(state)` holds:
    state = {member: (epoch, active tasks, standby tasks)}."""
    state = {m: (r.member_epoch, tasks(r) or [], standbys(r)) for m, r in members.items()}
    deadline = time.monotonic() + timeout
    while not done(state):
        assert time.monotonic() < deadline, f"the group did not settle: {state}"
        for m in list(state):
            epoch, owned, stand = state[m]
            r = hb(c, m, epoch, active=by_sub(owned), standby=by_sub(stand), warmup=[])
            assert r.error_code == ErrorCode.NONE, (m, r)
            state[m] = (
                r.member_epoch,
                tasks(r) if r.active_tasks is not None else owned,
                standbys(r) if r.standby_tasks is not None else stand,
            )
        time.sleep(0.05)
    return state


def standbys(resp) -> list:
    if resp.standby_tasks is None:
        return []
    return sorted((t.subtopology_id, p) for t in resp.standby_tasks for p in t.partitions)


def test_static_member_replaced_without_a_rebalance(tmp_path):
    with Broker(data_dir=tmp_path / "data", config=FAST) as b, RawClient(b.bootstrap_servers) as c:
        assert create_topic(c, "words-in", 4) == 0
        c.request(10, 4, FindCoordinator(key_type=0, coordinator_keys=["app"]))
        a = hb(c, "a1", 0, instance="inst-a", topo=topology())
        bb = hb(c, "b1", 0, instance="inst-b", topo=topology())
        state = settle(c, {"a1": a, "b1": bb}, lambda st: len(st["a1"][1]) == len(st["b1"][1]) == 2)
        assert sorted(state["a1"][1] + state["b1"][1]) == [("0", p) for p in range(4)]
        group = b.server.groups.streams.groups["app"]
        epoch_before = group.group_epoch
        # a1 leaves for a while (a restart): its instance keeps its place
        assert hb(c, "a1", -2, instance="inst-a").member_epoch == -2
        taken = hb(c, "a2", 0, instance="inst-b", topo=topology())
        assert taken.error_code == ErrorCode.UNRELEASED_INSTANCE_ID  # b1 still holds inst-b
        a2 = hb(c, "a2", 0, instance="inst-a", process="proc-a1", topo=topology())
        assert a2.error_code == ErrorCode.NONE
        assert a2.member_epoch == state["a1"][0] and tasks(a2) == state["a1"][1], "the replacement takes over"
        assert group.group_epoch == epoch_before, "no rebalance"
        assert "a1" not in group.members and "a2" in group.members


def test_standby_tasks_on_the_other_process(tmp_path):
    with Broker(data_dir=tmp_path / "data", config=FAST) as b, RawClient(b.bootstrap_servers) as c:
        assert create_topic(c, "words-in", 4) == 0
        alter = IncrementalAlterConfigs(
            resources=[
                IncrementalAlterConfigs.AlterConfigsResource(
                    resource_type=32,
                    resource_name="app",
                    configs=[
                        IncrementalAlterConfigs.AlterableConfig(
                            name="streams.num.standby.replicas", config_operation=0, value="1"
                        )
                    ],
                )
            ],
            validate_only=False,
        )
        assert c.request(44, 1, alter).responses[0].error_code == ErrorCode.NONE
        c.request(10, 4, FindCoordinator(key_type=0, coordinator_keys=["app"]))
        topo = topology(changelog="app-store-changelog")
        members = {m: hb(c, m, 0, topo=topo) for m in ("x", "y")}

        def placed(st) -> bool:
            return all(len(st[m][1]) == 2 and len(st[m][2]) == 2 for m in st)

        state = settle(c, members, placed)
        for m, other in (("x", "y"), ("y", "x")):
            active, stand = set(state[m][1]), set(state[m][2])
            assert not active & stand
            assert stand == set(state[other][1]), (m, state)  # a standby of each task the other runs
