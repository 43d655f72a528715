"""Share groups (KIP-932) on the wire against an in-process broker: ShareGroupHeartbeat and
ShareGroupDescribe, ShareFetch sessions, acquisition, acknowledgement, redelivery after a
release or an expired lock, archiving at the delivery limit, and the errors a client can
provoke. On by default (group.share.enable)."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Producer
from polling import wait_until
from rawclient import RawClient
from test_bad_input import create_topic

from logbroker import Broker
from logbroker._core import decode_records
from logbroker.protocol import REQUESTS, ErrorCode

Heartbeat, Describe, ShareFetch, ShareAck = REQUESTS[76], REQUESTS[77], REQUESTS[78], REQUESTS[79]
ApiVersions, Metadata, ListGroups = REQUESTS[18], REQUESTS[3], REQUESTS[16]

CONFIG = {
    "group.share.enable": "true",
    "group.share.auto.offset.reset": "earliest",
    "group.share.record.lock.duration.ms": "1000",
    "group.share.delivery.count.limit": "3",
}


@pytest.fixture
def share_broker(tmp_path):
    with Broker(data_dir=tmp_path / "data", config=CONFIG) as b:
        yield b


def produce(bs: str, topic: str, values: list[bytes], partition: int = 0) -> None:
    p = Producer({"bootstrap.servers": bs, "linger.ms": 0})
    for v in values:
        p.produce(topic, v, partition=partition)
    assert p.flush(10) == 0


def topic_id(c: RawClient, topic: str) -> uuid.UUID:
    r = c.request(
        3,
        12,
        Metadata(
            topics=[Metadata.MetadataRequestTopic(name=topic)],
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        ),
    )
    return r.topics[0].topic_id


def heartbeat(c, group, member, epoch, topics=None):
    return c.request(
        76,
        1,
        Heartbeat(group_id=group, member_id=member, member_epoch=epoch, rack_id=None, subscribed_topic_names=topics),
    )


def fetch(
    c, group, member, epoch, parts, acks=None, max_wait_ms=0, max_records=100, forgotten=None, version=1, renew=False
):
    """parts: [(topic id, partition)]; acks: {(topic id, partition): [(first, last, [types])]}."""
    acks = acks or {}
    by_topic: dict = {}
    for tid, p in list(parts) + [k for k in acks if k not in parts]:
        batches = [
            ShareFetch.AcknowledgementBatch(first_offset=a, last_offset=b, acknowledge_types=t)
            for a, b, t in acks.get((tid, p), [])
        ]
        by_topic.setdefault(tid, []).append(
            ShareFetch.FetchPartition(partition_index=p, acknowledgement_batches=batches)
        )
    req = ShareFetch(
        group_id=group,
        member_id=member,
        share_session_epoch=epoch,
        max_wait_ms=max_wait_ms,
        min_bytes=1,
        max_bytes=1 << 20,
        max_records=max_records,
        batch_size=max_records,
        topics=[ShareFetch.FetchTopic(topic_id=t, partitions=ps) for t, ps in by_topic.items()],
        forgotten_topics_data=[
            ShareFetch.ForgottenTopic(topic_id=t, partitions=ps) for t, ps in (forgotten or {}).items()
        ],
        is_renew_ack=renew,
    )
    return c.request(78, version, req)


def acquired(resp) -> dict[int, list[tuple[int, int, int]]]:
    """partition -> acquired ranges, checking each range's records are in the returned batches."""
    out = {}
    for t in resp.responses:
        for p in t.partitions:
            assert p.error_code == 0, (p.error_code, p.error_message)
            ranges = [(a.first_offset, a.last_offset, a.delivery_count) for a in p.acquired_records]
            if ranges:
                offsets = (
                    {r.offset for r in decode_records("t", p.partition_index, p.records, 0).take()}
                    if p.records
                    else set()
                )
                for a, b, _ in ranges:
                    assert set(range(a, b + 1)) <= offsets, (ranges, sorted(offsets))
            out[p.partition_index] = ranges
    return out


def values_of(resp) -> list[bytes]:
    out = []
    for t in resp.responses:
        for p in t.partitions:
            wanted = {o for a in p.acquired_records for o in range(a.first_offset, a.last_offset + 1)}
            out += [
                r.value
                for r in decode_records("t", p.partition_index, p.records or b"", 0).take()
                if r.offset in wanted
            ]
    return out


def test_share_apis_are_advertised_unless_disabled(tmp_path):
    off_config = {"group.share.enable": "false"}
    with Broker(data_dir=tmp_path / "off", config=off_config) as off, RawClient(off.bootstrap_servers) as c:
        keys = {
            k.api_key
            for k in c.request(18, 3, ApiVersions(client_software_name="t", client_software_version="1")).api_keys
        }
        assert not keys & {76, 77, 78, 79, 83, 84, 85, 86, 87}
        FindCoordinator = REQUESTS[10]
        r = c.request(10, 6, FindCoordinator(key_type=2, coordinator_keys=[f"g:{uuid.uuid4()}:0"]))
        assert r.coordinators[0].error_code == ErrorCode.INVALID_REQUEST, "no share coordinator when disabled"
    with Broker(data_dir=tmp_path / "on") as on, RawClient(on.bootstrap_servers) as c:
        api = {
            k.api_key: (k.min_version, k.max_version)
            for k in c.request(18, 3, ApiVersions(client_software_name="t", client_software_version="1")).api_keys
        }
        assert (api[76], api[77], api[78], api[79]) == ((1, 1), (1, 1), (1, 2), (1, 2))
        assert (api[83], api[84], api[85], api[86], api[87]) == ((0, 0), (0, 0), (0, 1), (0, 0), (0, 1))
        assert api[10] == (0, 6)


def test_members_share_a_partition_and_each_record_goes_to_one_of_them(share_broker):
    bs = share_broker.bootstrap_servers
    with RawClient(bs) as c:
        assert create_topic(c, "q", 1) == 0
        tid = topic_id(c, "q")
        a = heartbeat(c, "sg", "m-a", 0, ["q"])
        b = heartbeat(c, "sg", "m-b", 0, ["q"])
        assert (a.error_code, b.error_code) == (0, 0)
        assert [(tp.topic_id, list(tp.partitions)) for tp in a.assignment.topic_partitions] == [(tid, [0])]
        assert [list(tp.partitions) for tp in b.assignment.topic_partitions] == [[0]], "both members get partition 0"
        a2 = heartbeat(c, "sg", "m-a", a.member_epoch)
        assert (a2.error_code, a2.member_epoch, a2.assignment) == (0, b.member_epoch, None), "unchanged: not sent again"
        d = c.request(77, 1, Describe(group_ids=["sg", "nope"], include_authorized_operations=False)).groups
        assert (d[0].error_code, d[0].group_state, sorted(m.member_id for m in d[0].members)) == (
            0,
            "Stable",
            ["m-a", "m-b"],
        )
        assert d[1].error_code == ErrorCode.GROUP_ID_NOT_FOUND
        listed = c.request(16, 5, ListGroups(states_filter=[], types_filter=["share"])).groups
        assert [(g.group_id, g.group_type) for g in listed] == [("sg", "share")]

    produce(bs, "q", [b"v%d" % i for i in range(10)])
    with RawClient(bs) as ca, RawClient(bs) as cb:
        ra = fetch(ca, "sg", "m-a", 0, [(tid, 0)], max_records=4)
        assert ra.acquisition_lock_timeout_ms == 1000
        got_a = acquired(ra)[0]
        assert got_a == [(0, 3, 1)]
        rb = fetch(cb, "sg", "m-b", 0, [(tid, 0)], max_records=100)
        assert acquired(rb)[0] == [(4, 9, 1)], "b gets what a does not hold"
        assert values_of(rb) == [b"v%d" % i for i in range(4, 10)]
        # a accepts its records but releases one, and its fetch takes the released one again
        ra = fetch(ca, "sg", "m-a", 1, [], acks={(tid, 0): [(0, 3, [1, 1, 2, 1])]})
        assert ra.responses[0].partitions[0].acknowledge_error_code == 0
        assert acquired(ra)[0] == [(2, 2, 2)], "redelivered, second delivery"
        # a does nothing with it: when its lock (1 s) runs out, b's waiting fetch gets it
        t0 = time.monotonic()
        rb = fetch(cb, "sg", "m-b", 1, [], acks={(tid, 0): [(4, 9, [1])]}, max_wait_ms=5000)
        assert acquired(rb)[0] == [(2, 2, 3)] and 0.5 < time.monotonic() - t0 < 4
        # b acknowledges with a wrong range: INVALID_RECORD_STATE, nothing changes
        rb = fetch(cb, "sg", "m-b", 2, [], acks={(tid, 0): [(0, 2, [1])]})
        p = rb.responses[0].partitions[0]
        assert p.acknowledge_error_code == ErrorCode.INVALID_RECORD_STATE and "offset 0" in p.acknowledge_error_message
        r = cb.request(
            79,
            1,
            ShareAck(
                group_id="sg",
                member_id="m-b",
                share_session_epoch=3,
                topics=[
                    ShareAck.AcknowledgeTopic(
                        topic_id=tid,
                        partitions=[
                            ShareAck.AcknowledgePartition(
                                partition_index=0,
                                acknowledgement_batches=[
                                    ShareAck.AcknowledgementBatch(first_offset=2, last_offset=2, acknowledge_types=[1])
                                ],
                            )
                        ],
                    )
                ],
            ),
        )
        assert (r.error_code, r.responses[0].partitions[0].error_code) == (0, 0)
        sp = share_broker.server.share_fetch.partitions[("sg", "q", 0)]
        assert (sp.start_offset, sp.end_offset) == (10, 10), "everything acknowledged"


def test_an_expired_lock_redelivers_and_the_delivery_limit_archives(share_broker):
    bs = share_broker.bootstrap_servers
    with RawClient(bs) as c:
        assert create_topic(c, "q2", 1) == 0
        tid = topic_id(c, "q2")
        heartbeat(c, "sg2", "m", 0, ["q2"])
    produce(bs, "q2", [b"x", b"y"])
    with RawClient(bs) as c:
        epoch = 0
        seen = []
        for _ in range(3):  # limit 3: three deliveries, each left to expire (lock 1 s)
            r = fetch(c, "sg2", "m", epoch, [(tid, 0)], max_wait_ms=3000)
            epoch += 1
            seen.append(acquired(r).get(0))
        assert seen == [[(0, 1, 1)], [(0, 1, 2)], [(0, 1, 3)]]
        t0 = time.monotonic()
        r = fetch(c, "sg2", "m", epoch, [(tid, 0)], max_wait_ms=1500)
        assert acquired(r) == {} and time.monotonic() - t0 >= 1.0, "archived: nothing more to deliver"
        sp = share_broker.server.share_fetch.partitions[("sg2", "q2", 0)]
        assert (sp.start_offset, sp.end_offset, sp.records) == (2, 2, {})


def test_a_long_poll_returns_when_records_arrive(share_broker):
    bs = share_broker.bootstrap_servers
    with RawClient(bs) as c:
        assert create_topic(c, "q3", 1) == 0
        tid = topic_id(c, "q3")
        heartbeat(c, "sg3", "m", 0, ["q3"])
        assert acquired(fetch(c, "sg3", "m", 0, [(tid, 0)])) == {}
        import threading

        threading.Timer(0.5, produce, args=(bs, "q3", [b"late"])).start()
        t0 = time.monotonic()
        r = fetch(c, "sg3", "m", 1, [], max_wait_ms=10000)
        assert values_of(r) == [b"late"] and time.monotonic() - t0 < 5


def test_share_session_and_request_errors(share_broker):
    bs = share_broker.bootstrap_servers
    with RawClient(bs) as c:
        assert create_topic(c, "q4", 1) == 0
        tid = topic_id(c, "q4")
        r = fetch(c, "sg4", "m", 1, [(tid, 0)])
        assert r.error_code == ErrorCode.SHARE_SESSION_NOT_FOUND and "sg4" in r.error_message
        fetch(c, "sg4", "m", 0, [(tid, 0)])
        r = fetch(c, "sg4", "m", 5, [(tid, 0)])
        assert r.error_code == ErrorCode.INVALID_SHARE_SESSION_EPOCH and "expected 1" in r.error_message
        r = fetch(c, "sg4", "m", 0, [], acks={(tid, 0): [(0, 0, [1])]})
        assert r.error_code == ErrorCode.INVALID_REQUEST
        r = fetch(c, "sg4", "m", 0, [(uuid.uuid4(), 0)])
        assert r.responses[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID
        r = c.request(79, 1, ShareAck(group_id="sg4", member_id="m", share_session_epoch=0, topics=[]))
        assert r.error_code == ErrorCode.INVALID_SHARE_SESSION_EPOCH
        r = heartbeat(c, "sg4", "", 0, ["q4"])
        assert r.error_code == ErrorCode.INVALID_REQUEST
        r = heartbeat(c, "sg4", "m", 7)
        assert r.error_code == ErrorCode.UNKNOWN_MEMBER_ID
        # a classic group's id is not a share group
        r = fetch(c, "", "m", 0, [(tid, 0)])
        assert r.error_code == ErrorCode.INVALID_REQUEST


def test_records_of_a_batch_cut_by_the_end_offset_are_redelivered(share_broker):
    """Regression: a released run inside a batch that goes on past the SPEO was never read
    again (the read was bounded by the SPEO, and the log returns only whole batches below it)."""
    bs = share_broker.bootstrap_servers
    with RawClient(bs) as c:
        assert create_topic(c, "q5", 1) == 0
        tid = topic_id(c, "q5")
        heartbeat(c, "sg5", "a", 0, ["q5"])
    p = Producer({"bootstrap.servers": bs, "linger.ms": 200})
    for i in range(10):
        p.produce("q5", b"r%d" % i, partition=0)
    assert p.flush(10) == 0
    with RawClient(bs) as c:
        assert acquired(fetch(c, "sg5", "a", 0, [(tid, 0)], max_records=4))[0] == [(0, 3, 1)]
        r = fetch(c, "sg5", "a", 1, [], acks={(tid, 0): [(0, 3, [2])]}, max_records=4)
        assert acquired(r)[0] == [(0, 3, 2)]
        assert values_of(r) == [b"r0", b"r1", b"r2", b"r3"]


def test_a_share_group_id_is_not_a_consumer_group_and_deletes_only_when_empty(share_broker):
    bs = share_broker.bootstrap_servers
    JoinGroup, CGHeartbeat, DeleteGroups = REQUESTS[11], REQUESTS[68], REQUESTS[42]
    with RawClient(bs) as c:
        assert create_topic(c, "q6", 1) == 0
        heartbeat(c, "sg6", "m", 0, ["q6"])
        r = c.request(
            11,
            5,
            JoinGroup(
                group_id="sg6",
                session_timeout_ms=10000,
                rebalance_timeout_ms=10000,
                member_id="",
                group_instance_id=None,
                protocol_type="consumer",
                protocols=[JoinGroup.JoinGroupRequestProtocol(name="range", metadata=b"")],
            ),
        )
        assert r.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        r = c.request(
            68,
            0,
            CGHeartbeat(
                group_id="sg6", member_id="x", member_epoch=0, subscribed_topic_names=["q6"], topic_partitions=[]
            ),
        )
        assert r.error_code == ErrorCode.GROUP_ID_NOT_FOUND and "share group" in r.error_message
        assert c.request(42, 2, DeleteGroups(groups_names=["sg6"])).results[0].error_code == ErrorCode.NON_EMPTY_GROUP
        assert heartbeat(c, "sg6", "m", -1).error_code == 0
        assert c.request(42, 2, DeleteGroups(groups_names=["sg6"])).results[0].error_code == 0
        d = c.request(77, 1, Describe(group_ids=["sg6"], include_authorized_operations=False)).groups[0]
        assert d.error_code == ErrorCode.GROUP_ID_NOT_FOUND


def test_renew_needs_v2_and_a_renew_only_fetch_takes_nothing(share_broker):
    bs = share_broker.bootstrap_servers
    with RawClient(bs) as c:
        assert create_topic(c, "q7", 1) == 0
        tid = topic_id(c, "q7")
        heartbeat(c, "sg7", "m", 0, ["q7"])
    produce(bs, "q7", [b"a", b"b", b"c"])
    with RawClient(bs) as c:
        assert acquired(fetch(c, "sg7", "m", 0, [(tid, 0)], max_records=1))[0] == [(0, 0, 1)]
        r = fetch(c, "sg7", "m", 1, [], acks={(tid, 0): [(0, 0, [4])]}, max_records=1)
        p = r.responses[0].partitions[0]
        assert p.acknowledge_error_code == ErrorCode.INVALID_REQUEST and "RENEW" in p.acknowledge_error_message
        assert acquired(r)[0] == [(1, 1, 1)], "the fetch itself goes on"
        sp = share_broker.server.share_fetch.partitions[("sg7", "q7", 0)]
        before = sp.records[0].deadline
        r = fetch(c, "sg7", "m", 2, [], acks={(tid, 0): [(0, 1, [4])]}, version=2, renew=True)
        p = r.responses[0].partitions[0]
        assert (p.acknowledge_error_code, list(p.acquired_records)) == (0, []), "renewed, nothing new acquired"
        assert sp.end_offset == 2 and sp.records[0].deadline > before and sp.records[0].delivery_count == 1


def test_rejected_records_go_to_the_groups_dead_letter_topic(share_broker):
    """KIP-1191: a rejected record is written to the group's dead-letter topic with Kafka's
    __dlq.errors.* headers, its key and value only with errors.deadletterqueue.copy.record.enable;
    a topic without the prefix, or without errors.deadletterqueue.group.enable=true, gets nothing;
    a missing one is created with errors.deadletterqueue.auto.create.topics.enable."""
    from test_group_configs import alter as alter_group

    bs = share_broker.bootstrap_servers
    dlq_on = {"errors.deadletterqueue.group.enable": "true"}
    with RawClient(bs) as c:
        assert create_topic(c, "q8", 1) == 0
        assert create_topic(c, "dlq.q8", 2, configs=dlq_on) == 0
        assert create_topic(c, "not-a-dlq", 1, configs=dlq_on) == 0
        assert create_topic(c, "dlq.not-enabled", 1) == 0
        tid = topic_id(c, "q8")
        groups = {
            "sg8": {"errors.deadletterqueue.topic.name": "dlq.q8", "errors.deadletterqueue.copy.record.enable": "true"},
            "sg8b": {"errors.deadletterqueue.topic.name": "dlq.q8"},
            "sg9": {"errors.deadletterqueue.topic.name": "not-a-dlq"},
            "sg9b": {"errors.deadletterqueue.topic.name": "dlq.not-enabled"},
            "sg9c": {"errors.deadletterqueue.topic.name": "dlq.created"},
        }
        for g, configs in groups.items():
            assert alter_group(c, g, configs).error_code == 0
            heartbeat(c, g, "m", 0, ["q8"])
        r = alter_group(c, "sg0", {"errors.deadletterqueue.topic.name": "__consumer_offsets"})
        assert r.error_code == ErrorCode.INVALID_CONFIG and "must not start with '__'" in r.error_message
    p = Producer({"bootstrap.servers": bs})
    p.produce("q8", b"bad", key=b"k", partition=0, headers=[("h", b"1")])
    p.produce("q8", b"good", partition=0)
    assert p.flush(10) == 0
    writer = share_broker.server.share_fetch.dead_letters

    def reject_first(group: str) -> None:
        with RawClient(bs) as c:
            assert acquired(fetch(c, group, "m", 0, [(tid, 0)]))[0] == [(0, 1, 1)]
            r = fetch(c, group, "m", 1, [], acks={(tid, 0): [(0, 1, [3, 1])]})
            assert r.responses[0].partitions[0].acknowledge_error_code == 0

    def wait_written(n: int) -> None:
        deadline = time.monotonic() + 10
        while writer.written < n and time.monotonic() < deadline:
            time.sleep(0.05)
        assert writer.written == n

    reject_first("sg8")
    wait_written(1)
    reject_first("sg8b")
    wait_written(2)
    lg = share_broker.server.replicas.get("dlq.q8", 0).log  # source partition 0 mod 2 partitions
    copied, bare = decode_records("dlq.q8", 0, lg.read_batches(0, 1 << 20)[0], 0).take()
    expected = {
        "__dlq.errors.topic": b"q8",
        "__dlq.errors.partition": b"0",
        "__dlq.errors.offset": b"0",
        "__dlq.errors.delivery.count": b"1",
        "__dlq.errors.message": b"Offset rejected by client.",
    }
    assert (copied.key, copied.value) == (b"k", b"bad")  # the original headers are never copied
    assert dict(copied.headers) == {**expected, "__dlq.errors.group": b"sg8"}
    assert (bare.key, bare.value) == (None, None)
    assert dict(bare.headers) == {**expected, "__dlq.errors.group": b"sg8b"}
    # refused topics get nothing; a missing one is not created while auto-create is off
    for g in ("sg9", "sg9b", "sg9c"):
        reject_first(g)
    time.sleep(0.5)
    assert writer.written == 2
    assert share_broker.server.replicas.get("not-a-dlq", 0).log.log_end_offset == 0
    assert share_broker.server.replicas.get("dlq.not-enabled", 0).log.log_end_offset == 0
    assert "dlq.created" not in share_broker.server.controller.image.topics
    # with auto-create on (a dynamic broker key), the next dead letter creates it
    with RawClient(bs) as c:
        assert alter_group(c, "sg9d", {"errors.deadletterqueue.topic.name": "dlq.created"}).error_code == 0
        heartbeat(c, "sg9d", "m", 0, ["q8"])
    from logbroker import Admin

    with Admin(bs) as a:
        a.alter_configs({("broker", ""): {"errors.deadletterqueue.auto.create.topics.enable": "true"}})
    wait_until(lambda: share_broker.server.config.get_bool("errors.deadletterqueue.auto.create.topics.enable"))
    reject_first("sg9d")
    wait_written(3)
    created = share_broker.server.controller.image.topics["dlq.created"]
    assert created.configs.get("errors.deadletterqueue.group.enable") == "true"


def test_share_sessions_are_bounded_and_idle_ones_dropped(tmp_path):
    from test_group_configs import alter as alter_group

    cfg = {**CONFIG, "group.share.max.share.sessions": "2"}
    with Broker(data_dir=tmp_path / "d", config=cfg) as b, RawClient(b.bootstrap_servers) as c:
        assert create_topic(c, "q9", 1) == 0
        tid = topic_id(c, "q9")
        assert alter_group(c, "sg10", {"share.session.timeout.ms": "1000"}).error_code == 0
        produce(b.bootstrap_servers, "q9", [b"x"])
        assert acquired(fetch(c, "sg10", "a", 0, [(tid, 0)]))[0] == [(0, 0, 1)]
        assert fetch(c, "sg10", "b", 0, [(tid, 0)]).error_code == 0
        r = fetch(c, "sg10", "c", 0, [(tid, 0)])
        assert (
            r.error_code == ErrorCode.SHARE_SESSION_LIMIT_REACHED
            and "group.share.max.share.sessions=2" in r.error_message
        )
        time.sleep(1.2)  # a and b idle past the group's share.session.timeout.ms
        r = fetch(c, "sg10", "c", 0, [(tid, 0)])
        assert r.error_code == 0 and acquired(r)[0] == [(0, 0, 2)], "a's session was dropped and its record came back"
        assert fetch(c, "sg10", "a", 1, [(tid, 0)]).error_code == ErrorCode.SHARE_SESSION_NOT_FOUND
