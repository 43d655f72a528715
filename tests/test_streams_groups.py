"""Streams groups (KIP-1071, coord/groups/streams_group.py) over the wire with exact requests:
the APIs are served while the feature streams.version is 1 (a new cluster's level; a downgrade
to 0 stops them); the first member's topology
configured against the cluster (missing source topics, the internal topics created, the task
count); tasks balanced over members and moved by revoke-then-assign (never active on two
members at once); leaving, fencing by epoch, session expiry; offset commits checked against
the member epoch; StreamsGroupDescribe and ListGroups; Kafka's refusals (invalid requests,
STREAMS_INVALID_TOPOLOGY, a group of another type). The Kafka Streams client itself runs in
tests/test_compat_frameworks.py."""

from __future__ import annotations

import time

import pytest
from rawclient import RawClient
from test_bad_input import create_topic

from logbroker import Broker
from logbroker.protocol import REQUESTS, ErrorCode

Heartbeat = REQUESTS[88]
Describe = REQUESTS[89]
ListGroups = REQUESTS[16]
OffsetCommit = REQUESTS[8]
FindCoordinator = REQUESTS[10]
ApiVersions = REQUESTS[18]

FAST = {
    "group.streams.initial.rebalance.delay.ms": "0",
    "group.streams.heartbeat.interval.ms": "100",
    "group.streams.session.timeout.ms": "1500",
}


@pytest.fixture
def sbroker(tmp_path):
    with Broker(data_dir=tmp_path / "data", config=FAST) as b:
        yield b


def topology(source: str = "words-in", changelog: str | None = None, epoch: int = 1, sub: str = "0"):
    T = Heartbeat
    return T.Topology(
        epoch=epoch,
        subtopologies=[
            T.Subtopology(
                subtopology_id=sub,
                source_topics=[source],
                source_topic_regex=[],
                state_changelog_topics=[]
                if changelog is None
                else [
                    T.TopicInfo(
                        name=changelog,
                        partitions=0,
                        replication_factor=0,
                        topic_configs=[T.KeyValue(key="cleanup.policy", value="compact")],
                    )
                ],
                repartition_sink_topics=[],
                repartition_source_topics=[],
                copartition_groups=[],
            )
        ],
    )


def hb(
    c: RawClient,
    member: str,
    epoch: int,
    *,
    topo=None,
    active=None,
    standby=None,
    warmup=None,
    group="app",
    instance=None,
    process=None,
):
    """One StreamsGroupHeartbeat; active/standby/warmup are [(subtopology, [partitions])] or None
    (unchanged). Joining sends the topology, a rebalance timeout and a process id."""
    joining = epoch == 0

    def ids(ts):
        return None if ts is None else [Heartbeat.TaskIds(subtopology_id=s, partitions=ps) for s, ps in ts]

    req = Heartbeat(
        group_id=group,
        member_id=member,
        member_epoch=epoch,
        instance_id=instance,
        endpoint_information_epoch=0,
        rebalance_timeout_ms=5000 if joining else -1,
        topology=topo if joining else None,
        process_id=(process or f"proc-{member}") if joining else None,
        active_tasks=ids(active),
        standby_tasks=ids(standby),
        warmup_tasks=ids(warmup),
    )
    return c.request(88, 1, req)


def tasks(resp) -> list[tuple[str, int]] | None:
    if resp.active_tasks is None:
        return None
    return sorted((t.subtopology_id, p) for t in resp.active_tasks for p in t.partitions)


def by_sub(ts):
    out: dict[str, list[int]] = {}
    for s, p in sorted(ts):
        out.setdefault(s, []).append(p)
    return list(out.items())


def test_served_while_streams_version_is_1(broker):
    """As Kafka 4.2+: streams.version 1 on a new cluster serves the APIs; UpdateFeatures'
    downgrade to 0 (kafka-features downgrade --feature streams.version=0) stops advertising
    them, the upgrade back to 1 serves them again."""
    from test_features import features, update

    bs = broker.bootstrap_servers
    supported, finalized, _epoch, apis = features(bs)
    assert supported["streams.version"] == (0, 1) and finalized["streams.version"] == 1
    assert 88 in apis and 89 in apis
    r = update(bs, 1, ("streams.version", 0, 2))  # SAFE_DOWNGRADE
    assert r.error_code == 0 and [x.error_code for x in r.results] == [ErrorCode.NONE], r
    supported, finalized, _epoch, apis = features(bs)
    assert "streams.version" not in finalized and 88 not in apis and 89 not in apis
    assert update(bs, 1, ("streams.version", 1, 1)).error_code == 0
    assert {88, 89} <= features(bs)[3]


def test_topology_configured_tasks_balanced_and_moved_by_revocation(sbroker):
    with RawClient(sbroker.bootstrap_servers) as c:
        keys = {
            k.api_key: (k.min_version, k.max_version)
            for k in c.request(18, 3, ApiVersions(client_software_name="t", client_software_version="1")).api_keys
        }
        assert keys[88] == (0, 1) and keys[89] == (0, 1)
        c.request(10, 4, FindCoordinator(key_type=0, coordinator_keys=["app"]))
        # the source topic does not exist yet: MISSING_SOURCE_TOPICS, no tasks
        a = hb(c, "a", 0, topo=topology(changelog="app-counts-changelog"))
        assert a.error_code == ErrorCode.NONE and a.member_epoch >= 1, a
        assert 1 in {s.status_code for s in a.status or []} and tasks(a) == []
        assert create_topic(c, "words-in", 4) == 0
        deadline = time.monotonic() + 10
        while True:  # the next heartbeats configure it: the changelog is created, 4 tasks to a
            a = hb(c, "a", a.member_epoch, active=[], standby=[], warmup=[])
            assert a.error_code == ErrorCode.NONE, a
            got = tasks(a)
            if got and len(got) == 4:
                break
            assert time.monotonic() < deadline, a
            time.sleep(0.1)
        meta = sbroker.server.controller.image.topics
        assert len(meta["app-counts-changelog"].partitions) == 4  # created by the coordinator, as many as tasks
        assert meta["app-counts-changelog"].configs.get("cleanup.policy") == "compact"  # the client's configs
        a_tasks, a_epoch = got, a.member_epoch
        # b joins: a must revoke two tasks first; b gets them only once a reports they are gone
        b = hb(c, "b", 0, topo=topology(changelog="app-counts-changelog"))
        assert b.error_code == ErrorCode.NONE and tasks(b) == []
        a = hb(c, "a", a_epoch, active=by_sub(a_tasks), standby=[], warmup=[])
        kept = tasks(a)
        assert kept is not None and len(kept) == 2 and set(kept) < set(a_tasks), a
        assert a.member_epoch == a_epoch  # its epoch stays until it has revoked
        b = hb(c, "b", b.member_epoch, active=[], standby=[], warmup=[])
        assert not tasks(b), "b got tasks a still runs"
        a = hb(c, "a", a.member_epoch, active=by_sub(kept), standby=[], warmup=[])
        assert a.member_epoch > a_epoch
        b = hb(c, "b", b.member_epoch, active=[], standby=[], warmup=[])
        assert sorted(tasks(b)) == sorted(set(a_tasks) - set(kept)), b
        # describe and list
        d = c.request(89, 1, Describe(group_ids=["app"], include_authorized_operations=False)).groups[0]
        assert d.error_code == 0 and d.group_state == "Stable", d
        assert {m.member_id: len(m.assignment.active_tasks[0].partitions) for m in d.members} == {"a": 2, "b": 2}
        assert [s.subtopology_id for s in d.topology.subtopologies] == ["0"]
        listed = c.request(16, 5, ListGroups(states_filter=[], types_filter=["streams"])).groups
        assert [(g.group_id, g.group_type, g.group_state) for g in listed] == [("app", "streams", "Stable")]
        # offset commits are checked against the member's epoch
        commit = OffsetCommit(
            group_id="app",
            generation_id_or_member_epoch=b.member_epoch,
            member_id="b",
            topics=[
                OffsetCommit.OffsetCommitRequestTopic(
                    name="words-in",
                    partitions=[OffsetCommit.OffsetCommitRequestPartition(partition_index=0, committed_offset=3)],
                )
            ],
        )
        assert c.request(8, 9, commit).topics[0].partitions[0].error_code == ErrorCode.NONE
        commit.generation_id_or_member_epoch = b.member_epoch + 5
        assert c.request(8, 9, commit).topics[0].partitions[0].error_code == ErrorCode.STALE_MEMBER_EPOCH
        commit.member_id = "nobody"
        assert c.request(8, 9, commit).topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_MEMBER_ID
        # a fenced epoch, then b leaves: a gets everything back
        assert (
            hb(c, "b", b.member_epoch + 3, active=[], standby=[], warmup=[]).error_code == ErrorCode.FENCED_MEMBER_EPOCH
        )
        left = hb(c, "b", -1)
        assert (left.error_code, left.member_epoch) == (ErrorCode.NONE, -1)
        a = hb(c, "a", a.member_epoch, active=by_sub(kept), standby=[], warmup=[])
        assert len(tasks(a)) == 4


def test_session_expiry_and_refusals(sbroker):
    with RawClient(sbroker.bootstrap_servers) as c:
        assert create_topic(c, "words-in", 2) == 0
        c.request(10, 4, FindCoordinator(key_type=0, coordinator_keys=["app"]))
        a = hb(c, "a", 0, topo=topology())
        b = hb(c, "b", 0, topo=topology())
        assert a.error_code == b.error_code == ErrorCode.NONE
        deadline = time.monotonic() + 10
        while True:  # b stops heartbeating: after streams.session.timeout.ms it is removed
            a = hb(c, "a", a.member_epoch, active=by_sub(tasks(a) or []), standby=[], warmup=[])
            groups = sbroker.server.groups.streams.groups
            if list(groups["app"].members) == ["a"]:
                break
            assert time.monotonic() < deadline
            time.sleep(0.2)
        assert hb(c, "b", b.member_epoch, active=[], standby=[], warmup=[]).error_code == ErrorCode.UNKNOWN_MEMBER_ID
        # Kafka's refusals
        no_topology = hb(c, "c", 0)
        assert no_topology.error_code == ErrorCode.INVALID_REQUEST and "Topology" in no_topology.error_message
        changed = hb(c, "c", 0, topo=topology(source="other-in"))
        assert changed.error_code == ErrorCode.INVALID_REQUEST, changed  # same epoch, other topology
        empty_member = Heartbeat(group_id="app", member_id="", member_epoch=0, endpoint_information_epoch=0)
        assert c.request(88, 1, empty_member).error_code == ErrorCode.INVALID_REQUEST
        bad = topology()
        bad.subtopologies[0].repartition_source_topics = [  # a repartition topic no subtopology writes
            Heartbeat.TopicInfo(name="never-written", partitions=0, replication_factor=0, topic_configs=[])
        ]
        bad_resp = hb(c, "d", 0, topo=bad, group="bad-app")
        assert bad_resp.error_code == ErrorCode.STREAMS_INVALID_TOPOLOGY, bad_resp
        regex = topology()
        regex.subtopologies[0].source_topic_regex = ["words-.*"]
        regex_resp = hb(c, "d", 0, topo=regex, group="regex-app")
        assert regex_resp.error_code == ErrorCode.INVALID_REQUEST and "Regular expressions" in regex_resp.error_message
        # a consumer group's id is not a streams group's
        other = hb(c, "e", 0, topo=topology(), group="a-consumer-group")
        assert other.error_code == ErrorCode.NONE  # a new id becomes a streams group
        d = c.request(89, 1, Describe(group_ids=["nope"], include_authorized_operations=False)).groups[0]
        assert d.error_code == ErrorCode.GROUP_ID_NOT_FOUND
