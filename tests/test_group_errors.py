"""Group protocol errors over the wire: MEMBER_ID_REQUIRED round trip, unknown member,
stale generation, wrong protocol type, fenced static member, oversize offset metadata,
bad session timeout; the group keeps working after each."""

from __future__ import annotations

import threading

from rawclient import RawClient
from test_bad_input import create_topic

from logbroker.protocol import REQUESTS, ErrorCode

FindCoordinator = REQUESTS[10]
JoinGroup = REQUESTS[11]
Heartbeat = REQUESTS[12]
LeaveGroup = REQUESTS[13]
SyncGroup = REQUESTS[14]
OffsetCommit = REQUESTS[8]
OffsetFetch = REQUESTS[9]
DescribeGroups = REQUESTS[15]
ListGroups = REQUESTS[16]
DeleteGroups = REQUESTS[42]


def join(
    c, group, member_id="", instance=None, ptype="consumer", protocols=(("range", b"meta"),), session=10000, version=5
):
    req = JoinGroup(
        group_id=group,
        session_timeout_ms=session,
        rebalance_timeout_ms=5000,
        member_id=member_id,
        group_instance_id=instance,
        protocol_type=ptype,
        protocols=[JoinGroup.JoinGroupRequestProtocol(name=n, metadata=m) for n, m in protocols],
    )
    return c.request(11, version, req)


def sync(c, group, gen, member_id, assignments=(), instance=None):
    return c.request(
        14,
        3,
        SyncGroup(
            group_id=group,
            generation_id=gen,
            member_id=member_id,
            group_instance_id=instance,
            assignments=[SyncGroup.SyncGroupRequestAssignment(member_id=m, assignment=a) for m, a in assignments],
        ),
    )


def heartbeat(c, group, gen, member_id, instance=None):
    return c.request(
        12, 3, Heartbeat(group_id=group, generation_id=gen, member_id=member_id, group_instance_id=instance)
    ).error_code


def commit(c, group, gen, member_id, topic, offset, metadata="", instance=None):
    req = OffsetCommit(
        group_id=group,
        generation_id_or_member_epoch=gen,
        member_id=member_id,
        group_instance_id=instance,
        topics=[
            OffsetCommit.OffsetCommitRequestTopic(
                name=topic,
                partitions=[
                    OffsetCommit.OffsetCommitRequestPartition(
                        partition_index=0,
                        committed_offset=offset,
                        committed_leader_epoch=-1,
                        committed_metadata=metadata,
                    )
                ],
            )
        ],
    )
    return c.request(8, 7, req).topics[0].partitions[0].error_code


def fetch_committed(c, group, topic):
    req = OffsetFetch(
        group_id=group,
        topics=[OffsetFetch.OffsetFetchRequestTopic(name=topic, partition_indexes=[0])],
        require_stable=False,
    )
    p = c.request(9, 7, req).topics[0].partitions[0]
    return p.committed_offset, p.metadata


def ready(c, group):
    r = c.request(10, 3, FindCoordinator(key=group, key_type=0))
    assert r.error_code == 0


def test_member_lifecycle_and_errors(broker):
    with RawClient(broker.bootstrap_servers) as c:
        assert create_topic(c, "ge") == 0
        ready(c, "g1")
        r = join(c, "g1")
        assert r.error_code == ErrorCode.MEMBER_ID_REQUIRED and r.member_id
        mid = r.member_id
        r = join(c, "g1", member_id=mid)
        assert r.error_code == 0 and r.generation_id == 1 and r.leader == mid
        assert [m.member_id for m in r.members] == [mid]
        gen = r.generation_id
        s = sync(c, "g1", gen, mid, [(mid, b"assignment-bytes")])
        assert (s.error_code, bytes(s.assignment)) == (0, b"assignment-bytes")
        assert heartbeat(c, "g1", gen, mid) == 0
        # errors, each leaving the group intact
        assert heartbeat(c, "g1", gen, "nobody") == ErrorCode.UNKNOWN_MEMBER_ID
        assert heartbeat(c, "g1", gen - 1, mid) == ErrorCode.ILLEGAL_GENERATION
        assert sync(c, "g1", gen + 5, mid).error_code == ErrorCode.ILLEGAL_GENERATION
        assert join(c, "g1", ptype="connect").error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        assert join(c, "g1", protocols=(("other", b""),)).error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        assert join(c, "g1", session=10).error_code == ErrorCode.INVALID_SESSION_TIMEOUT
        assert commit(c, "g1", gen, "nobody", "ge", 5) == ErrorCode.UNKNOWN_MEMBER_ID
        assert commit(c, "g1", gen + 1, mid, "ge", 5) == ErrorCode.ILLEGAL_GENERATION
        assert commit(c, "g1", gen, mid, "ge", 5, metadata="m" * 5000) == ErrorCode.OFFSET_METADATA_TOO_LARGE
        assert commit(c, "g1", gen, mid, "no-such-topic", 5) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert commit(c, "g1", gen, mid, "ge", 7, metadata="hello") == 0
        assert fetch_committed(c, "g1", "ge") == (7, "hello")
        assert heartbeat(c, "g1", gen, mid) == 0
        d = c.request(15, 5, DescribeGroups(groups=["g1"])).groups[0]
        assert (d.group_state, d.protocol_type, d.protocol_data) == ("Stable", "consumer", "range")
        assert bytes(d.members[0].member_assignment) == b"assignment-bytes"
        assert c.request(42, 2, DeleteGroups(groups_names=["g1"])).results[0].error_code == ErrorCode.NON_EMPTY_GROUP
        lv = c.request(13, 3, LeaveGroup(group_id="g1", members=[LeaveGroup.MemberIdentity(member_id=mid)]))
        assert lv.error_code == 0 and lv.members[0].error_code == 0
        d = c.request(15, 5, DescribeGroups(groups=["g1"])).groups[0]
        assert d.group_state == "Empty" and not d.members
        listed = c.request(16, 4, ListGroups(states_filter=["Empty"])).groups
        assert [(g.group_id, g.group_state) for g in listed] == [("g1", "Empty")]
        assert fetch_committed(c, "g1", "ge") == (7, "hello")
        assert c.request(42, 2, DeleteGroups(groups_names=["g1"])).results[0].error_code == 0
        assert fetch_committed(c, "g1", "ge") == (-1, "")
        assert c.request(42, 2, DeleteGroups(groups_names=["g1"])).results[0].error_code == ErrorCode.GROUP_ID_NOT_FOUND


def test_static_member_fencing(broker):
    with RawClient(broker.bootstrap_servers) as c:
        assert create_topic(c, "gs") == 0
        ready(c, "g2")
        r = join(c, "g2", instance="inst-1")  # static members skip MEMBER_ID_REQUIRED
        assert r.error_code == 0
        old, gen = r.member_id, r.generation_id
        assert sync(c, "g2", gen, old, [(old, b"a1")]).error_code == 0
        r2 = join(c, "g2", instance="inst-1")  # the same instance restarts with a new member id
        assert r2.error_code == 0 and r2.member_id != old and r2.generation_id == gen
        new = r2.member_id
        s = sync(c, "g2", gen, new, instance="inst-1")
        assert (s.error_code, bytes(s.assignment)) == (0, b"a1")
        # the old incarnation is fenced everywhere
        assert heartbeat(c, "g2", gen, old, instance="inst-1") == ErrorCode.FENCED_INSTANCE_ID
        assert commit(c, "g2", gen, old, "gs", 1, instance="inst-1") == ErrorCode.FENCED_INSTANCE_ID
        assert heartbeat(c, "g2", gen, new, instance="inst-1") == 0
        assert commit(c, "g2", gen, new, "gs", 1, instance="inst-1") == 0


def test_rebalance_between_two_raw_members(broker):
    with RawClient(broker.bootstrap_servers) as a, RawClient(broker.bootstrap_servers) as b:
        assert create_topic(a, "gr") == 0
        ready(a, "g3")
        ra = join(a, "g3")
        ra = join(a, "g3", member_id=ra.member_id)
        a_id, gen = ra.member_id, ra.generation_id
        assert sync(a, "g3", gen, a_id, [(a_id, b"all")]).error_code == 0
        rb = join(b, "g3")
        b_id = rb.member_id
        result = {}
        t = threading.Thread(target=lambda: result.setdefault("b", join(b, "g3", member_id=b_id)))
        t.start()  # b's join waits for a to rejoin
        import time

        time.sleep(0.3)
        assert heartbeat(a, "g3", gen, a_id) == ErrorCode.REBALANCE_IN_PROGRESS
        assert commit(a, "g3", gen, a_id, "gr", 3) == 0  # commits are still accepted while preparing
        ra2 = join(a, "g3", member_id=a_id)
        t.join(10)
        rb2 = result["b"]
        assert ra2.error_code == rb2.error_code == 0
        assert ra2.generation_id == rb2.generation_id == gen + 1
        assert ra2.leader == a_id and len(ra2.members) == 2 and rb2.members == []
        assert heartbeat(a, "g3", gen, a_id) == ErrorCode.ILLEGAL_GENERATION


def test_coordinator_lookups_by_key_type(broker):
    """FindCoordinator: a transactional id has a coordinator (this broker); an empty key or
    an unknown key type is INVALID_REQUEST; group lookups are unaffected."""
    with RawClient(broker.bootstrap_servers) as c:
        r = c.request(10, 4, FindCoordinator(key_type=1, coordinator_keys=["txn-1", ""]))
        found, empty = r.coordinators
        assert found.error_code == ErrorCode.NONE and found.node_id == 1, found
        assert empty.error_code == ErrorCode.INVALID_REQUEST and "transactional id" in empty.error_message, empty
        (odd,) = c.request(10, 4, FindCoordinator(key_type=7, coordinator_keys=["x"])).coordinators
        assert odd.error_code == ErrorCode.INVALID_REQUEST and "key type 7" in odd.error_message, odd
        assert ready(c, "still-a-group") is None
