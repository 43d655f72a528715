"""logbroker's ShareConsumer (KIP-932 share groups; client/share.py, client/share_consumer.py)
against real brokers, no mocks: several of ours sharing one partition with every record
accepted once; release / reject and the delivery count limit; explicit mode's rule; records
held past their lock or by a closing consumer going to another member; the async
ShareConsumer under asyncio and trio; and mixed groups of ours and Java's
KafkaShareConsumer (tests/java/ShareWorker.java) against logbroker and Apache Kafka."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import needs_java, wait_until

import logbroker
from logbroker import AcknowledgeType, Admin, Broker, NewTopic, Producer, ShareConsumer
from logbroker.client import IllegalStateError

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TP = logbroker.TopicPartition
CONFIG = {
    "group.share.enable": "true",
    "group.share.auto.offset.reset": "earliest",
    "group.share.record.lock.duration.ms": "2000",
    "group.share.delivery.count.limit": "3",
}


@pytest.fixture
def share_broker(tmp_path):
    with Broker(data_dir=tmp_path / "data", config=CONFIG) as b:
        yield b


def produce(bs: str, topic: str, n: int, per_batch: int = 50, partitions: int = 1) -> None:
    """`n` records with values "0".."n-1" in batches of `per_batch` (so the broker can hand
    different batches to different members)."""
    with Admin(bs) as a:
        a.create_topics([NewTopic(topic, partitions)])
    with Producer(bs, linger_ms=0) as p:
        for start in range(0, n, per_batch):
            for i in range(start, min(n, start + per_batch)):
                p.send(topic, str(i).encode(), partition=i % partitions)
            p.flush(10)


def consume_until_idle(c: ShareConsumer, idle: float, limit: float = 60.0) -> list:
    """Polls until `idle` seconds pass without a record (or `limit`)."""
    out: list = []
    last = time.monotonic()
    deadline = last + limit
    while time.monotonic() - last < idle and time.monotonic() < deadline:
        recs = c.poll(0.2)
        if recs:
            out.extend(recs)
            last = time.monotonic()
    return out


def test_three_consumers_share_one_partition_and_accept_each_record_once(share_broker):
    bs = share_broker.bootstrap_servers
    n = 3000
    produce(bs, "work", n)
    seen: list[list[tuple[int, int]]] = [[], [], []]
    total = threading.Semaphore(0)
    done = threading.Event()
    errors: list[BaseException] = []

    def member(i: int) -> None:
        try:
            with ShareConsumer(bs, "g3", max_poll_records=50, client_id=f"m{i}") as c:
                c.subscribe(["work"])
                assert c.subscription() == ["work"]
                while not done.is_set():
                    for r in c.poll(0.2):
                        seen[i].append((int(r.value), r.delivery_count))
                        total.release()
                    time.sleep(0.002)  # "processing", so the others get a share
        except BaseException as e:  # noqa: BLE001 - reported by the test
            errors.append(e)

    threads = [threading.Thread(target=member, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 60
    got = 0
    while got < n and time.monotonic() < deadline:
        if total.acquire(timeout=1):
            got += 1
    time.sleep(0.5)  # anything delivered twice would show up now
    done.set()
    for t in threads:
        t.join(30)
    assert not errors, errors
    values = sorted(v for s in seen for v, _ in s)
    assert values == list(range(n)), f"{len(values)} records, {len(set(values))} distinct"
    assert all(count == 1 for s in seen for _, count in s)
    assert sum(1 for s in seen if s) >= 2, [len(s) for s in seen]
    # every record was accepted: a new member of the group gets nothing
    with ShareConsumer(bs, "g3") as c:
        c.subscribe(["work"])
        assert consume_until_idle(c, idle=1.0) == []


def test_released_records_come_back_rejected_ones_never_and_the_delivery_limit_archives(share_broker):
    bs = share_broker.bootstrap_servers
    produce(bs, "poison", 10)
    reject = {"1", "4", "7"}
    counts: dict[str, list[int]] = {}
    results: list[dict] = []
    committed = False
    with ShareConsumer(bs, "gr", share_acknowledgement_mode="explicit") as c:
        c.set_acknowledgement_commit_callback(results.append)
        c.subscribe(["poison"])
        last = time.monotonic()
        while time.monotonic() - last < 3.0:
            recs = c.poll(0.2)
            for r in recs:
                v = r.value.decode()
                counts.setdefault(v, []).append(r.delivery_count)
                c.acknowledge(r, AcknowledgeType.REJECT if v in reject else AcknowledgeType.RELEASE)
            if recs:
                last = time.monotonic()
                if not committed and len(counts["0"]) == 2:  # once: a commit instead of the next fetch
                    committed = True
                    assert c.commit_sync(10) == {TP("poison", 0): None}
    for v in reject:
        assert counts[v] == [1], "a rejected record is never delivered again"
    for v in set(map(str, range(10))) - reject:
        assert counts[v] == [1, 2, 3], "released records come back until the delivery limit, then are archived"
    assert results and all(e is None for r in results for e in r.values()), results


def test_explicit_mode_needs_every_record_acknowledged_before_the_next_poll(share_broker):
    bs = share_broker.bootstrap_servers
    produce(bs, "strict", 5, per_batch=5)
    with ShareConsumer(bs, "ge", share_acknowledgement_mode="explicit") as c:
        c.subscribe("strict")
        recs: list = []
        deadline = time.monotonic() + 20
        while not recs and time.monotonic() < deadline:
            recs = c.poll(0.5)
        assert len(recs) == 5
        c.acknowledge(recs[0])
        with pytest.raises(IllegalStateError):
            c.acknowledge(recs[0])  # twice
        with pytest.raises(IllegalStateError, match="not acknowledged"):
            c.poll(0.1)
        for r in recs[1:]:
            c.acknowledge(r, AcknowledgeType.ACCEPT)
        assert c.poll(0.5) == []  # all acknowledged: polling is fine again
    with ShareConsumer(bs, "gi") as c, pytest.raises(IllegalStateError, match="explicit"):
        c.subscribe("strict")
        deadline = time.monotonic() + 20
        recs = []
        while not recs and time.monotonic() < deadline:
            recs = c.poll(0.5)
        c.acknowledge(recs[0])
    with pytest.raises(logbroker.client.ConfigError):
        ShareConsumer(bs, "gx", share_acknowledgement_mode="sometimes")


def test_records_held_past_their_lock_go_to_another_member(share_broker):
    bs = share_broker.bootstrap_servers
    produce(bs, "held", 40, per_batch=40)
    with ShareConsumer(bs, "gh", share_acknowledgement_mode="explicit") as holder:
        holder.subscribe(["held"])
        held: list = []
        deadline = time.monotonic() + 20
        while not held and time.monotonic() < deadline:
            held = holder.poll(0.5)
        assert held
        t0 = time.monotonic()
        # the holder stops polling (it still heartbeats); its locks (2 s) run out
        with ShareConsumer(bs, "gh") as other:
            other.subscribe(["held"])
            got = consume_until_idle(other, idle=6.0, limit=30)
        by_value = {r.value: r.delivery_count for r in got}
        assert sorted(int(v) for v in by_value) == list(range(40))
        assert {by_value[r.value] for r in held} == {2}, "the held records came back as second deliveries"
        assert time.monotonic() - t0 >= 1.5, "not before the lock ran out"
        # the holder's late acknowledgements fail: the records went to another member
        for r in held:
            holder.acknowledge(r)
        results = holder.commit_sync(10)
        assert isinstance(results[TP("held", 0)], logbroker.KafkaError), results


def test_records_held_by_a_closing_consumer_go_back_at_once(tmp_path):
    with Broker(data_dir=tmp_path / "data", config={**CONFIG, "group.share.record.lock.duration.ms": "30000"}) as b:
        bs = b.bootstrap_servers
        produce(bs, "closing", 20, per_batch=20)
        holder = ShareConsumer(bs, "gc", share_acknowledgement_mode="explicit")
        holder.subscribe(["closing"])
        held: list = []
        deadline = time.monotonic() + 20
        while not held and time.monotonic() < deadline:
            held = holder.poll(0.5)
        assert len(held) == 20
        holder.acknowledge(held[0], AcknowledgeType.ACCEPT)
        holder.close()  # the other 19 are unacknowledged: the closing session hands them back
        t0 = time.monotonic()
        with ShareConsumer(bs, "gc") as other:
            other.subscribe(["closing"])
            got = consume_until_idle(other, idle=1.5, limit=20)
        assert sorted(int(r.value) for r in got) == list(range(1, 20))
        assert {r.delivery_count for r in got} == {2}
        assert time.monotonic() - t0 < 15, "well before the 30 s lock"


async def _async_share_app(bs: str, group: str, topic: str, n: int) -> dict:
    """Two async ShareConsumers (implicit and explicit mode) in one group, under whatever
    loop runs this: every record accepted once; a released one comes back."""
    import anyio

    from logbroker import aio

    seen: list[tuple[int, int]] = []
    released: list[int] = []
    callback_results: list[dict] = []

    async def implicit_member() -> None:
        async with aio.ShareConsumer(bs, group, max_poll_records=20) as c:
            await c.subscribe([topic])
            assert c.subscription() == [topic]
            idle = anyio.current_time()
            while anyio.current_time() - idle < 2.0:
                recs = await c.poll(0.2)
                if recs:
                    idle = anyio.current_time()
                    await anyio.sleep(0.02)  # "processing", so the other member gets a share
                seen.extend((int(r.value), r.delivery_count) for r in recs)

    async def explicit_member() -> None:
        async with aio.ShareConsumer(bs, group, share_acknowledgement_mode="explicit", max_poll_records=20) as c:

            async def on_ack(results: dict) -> None:
                callback_results.append(results)

            c.set_acknowledgement_commit_callback(on_ack)
            await c.subscribe(topic)
            idle = anyio.current_time()
            while anyio.current_time() - idle < 2.0:
                recs = await c.poll(0.2)
                if recs:
                    idle = anyio.current_time()
                for r in recs:
                    if not released and r.delivery_count == 1:
                        c.acknowledge(r, AcknowledgeType.RELEASE)  # someone gets it again
                        released.append(int(r.value))
                        continue
                    seen.append((int(r.value), r.delivery_count))
                    c.acknowledge(r)
                if recs:
                    c.commit_async()
            assert (await c.commit_sync()) == {}

    async with anyio.create_task_group() as tg:
        tg.start_soon(implicit_member)
        tg.start_soon(explicit_member)
    return {"seen": seen, "released": released, "callbacks": callback_results}


def _check_async_app(out: dict, n: int) -> None:
    values = sorted(v for v, _ in out["seen"])
    assert values == list(range(n)), f"{len(values)} records, {len(set(values))} distinct"
    [r] = out["released"]
    assert dict(out["seen"])[r] == 2, "the released record came back as a second delivery"
    assert out["callbacks"] and all(e is None for res in out["callbacks"] for e in res.values())


def test_async_share_consumer_under_asyncio(share_broker):
    import asyncio

    bs = share_broker.bootstrap_servers
    produce(bs, "aio-a", 300, per_batch=20)
    _check_async_app(asyncio.run(_async_share_app(bs, "ga", "aio-a", 300)), 300)


def test_async_share_consumer_under_trio(share_broker):
    import trio

    bs = share_broker.bootstrap_servers
    produce(bs, "aio-t", 300, per_batch=20)
    _check_async_app(trio.run(_async_share_app, bs, "gt", "aio-t", 300), 300)


# -- mixed groups: ours and Java's KafkaShareConsumer ----------------------------------------


@pytest.fixture(scope="module")
def kafka_tools():
    from benches.peers.kafka import install

    return install()


@pytest.fixture(scope="module")
def apache_kafka(tmp_path_factory, kafka_tools):
    from benches.peers.kafka import KafkaPeer

    peer = KafkaPeer(data_root=tmp_path_factory.mktemp("kafka"), install_info=kafka_tools)
    peer.start()
    try:
        yield peer.bootstrap
    finally:
        peer.stop()


def share_group_members(bs: str, group: str) -> int:
    """How many members the share group has (ShareGroupDescribe to the only broker)."""
    from rawclient import RawClient

    from logbroker.protocol import REQUESTS

    with RawClient(bs) as c:
        g = c.request(77, 1, REQUESTS[77](group_ids=[group], include_authorized_operations=False)).groups[0]
    return len(g.members) if g.error_code == 0 else 0


def mixed_group(bs: str, kafka_tools, group: str, topic: str, n: int = 400) -> None:
    """Two of our ShareConsumers and two Java KafkaShareConsumers (ShareWorker, accepting
    each record) in one group while `n` records trickle in: every record is accepted
    exactly once, by one of the four, and none is delivered twice."""
    from test_share_groups_java import Worker

    with Admin(bs) as a:
        a.create_topics([NewTopic(topic, 1)])
        # Kafka's default is "latest"; logbroker's test broker is configured earliest already
        a.alter_configs({("group", group): {"share.auto.offset.reset": "earliest"}})
    java = [Worker(kafka_tools, bs, group, topic, "accept", 6000, process_ms=5) for _ in range(2)]
    ours: list[list[tuple[int, int]]] = [[], []]
    stop = threading.Event()
    errors: list[BaseException] = []

    def member(i: int) -> None:
        try:
            with ShareConsumer(bs, group, max_poll_records=10, client_id=f"ours-{i}") as c:
                c.subscribe([topic])
                while not stop.is_set():
                    for r in c.poll(0.2):
                        ours[i].append((int(r.value), r.delivery_count))
                        time.sleep(0.005)  # as long as the Java workers take per record
        except BaseException as e:  # noqa: BLE001 - reported by the test
            errors.append(e)

    threads = [threading.Thread(target=member, args=(i,)) for i in range(2)]
    try:
        for t in threads:
            t.start()
        # all four in the group (the JVMs take a few seconds), then records trickle in
        wait_until(lambda: share_group_members(bs, group) == 4, timeout=60, what="four members in the group")
        with Producer(bs, linger_ms=0) as p:
            for start in range(0, n, 10):
                for i in range(start, start + 10):
                    p.send(topic, str(i).encode())
                p.flush(10)
                time.sleep(0.15)
        deadline = time.monotonic() + 90

        def total() -> int:
            return sum(len(o) for o in ours) + sum(len(w.records) for w in java)

        while total() < n and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1)  # anything delivered twice would show up now
        # A Java worker exits after 6 s without records; records its client had fetched ahead
        # (acquired, not yet handed to the worker) go back to the group on close and come again
        # with delivery count 2, as KIP-932 says.
        left_early = [w for w in java if w.proc.poll() is not None]
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    java_records = [w.wait(60) for w in java]
    assert not errors, errors
    by_ours = [v for o in ours for v, _ in o]
    by_java = [int(v) for r in java_records for _, _, v, _ in r]
    values = sorted(by_ours + by_java)
    assert values == list(range(n)), f"{len(values)} deliveries, {len(set(values))} distinct of {n}"
    counts = [count for o in ours for _, count in o] + [count for r in java_records for *_, count in r]
    assert all(count >= 1 for count in counts)
    if not left_early:  # nobody left holding records: every record came on its first delivery
        assert all(count == 1 for count in counts), sorted(counts)[-5:]
    assert by_ours and by_java, (len(by_ours), len(by_java))


@needs_java
def test_mixed_group_with_java_share_consumers_on_logbroker(tmp_path, kafka_tools):
    with Broker(data_dir=tmp_path / "data", config={**CONFIG, "group.share.record.lock.duration.ms": "30000"}) as b:
        mixed_group(b.bootstrap_servers, kafka_tools, "mixed", "mixed")


@needs_java
def test_mixed_group_with_java_share_consumers_on_apache_kafka(apache_kafka, kafka_tools):
    mixed_group(apache_kafka, kafka_tools, "mixed", "mixed")
