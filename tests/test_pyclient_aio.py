"""logbroker.aio under both event loops (anyio's pytest plugin runs each test under asyncio
and under trio): the async Producer, Consumer and Admin share the sync API's cores; every
public method is exercised here."""

from __future__ import annotations

import anyio
import anyio.lowlevel
import pytest

import logbroker
from logbroker import aio

TP = logbroker.TopicPartition

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request):
    return request.param


async def test_produce_consume_commit(broker):
    bs = broker.bootstrap_servers
    async with aio.Admin(bs) as admin:
        await admin.create_topics([aio.NewTopic("tr", 2)])
        assert "tr" in await admin.list_topics()
    async with aio.Producer(bs, compression_type="zstd") as p:
        assert await p.partitions_for("tr") == [0, 1]
        meta = await p.send("tr", b"first", key=b"k", headers=[("h", b"1")])
        assert meta.topic == "tr" and meta.offset == 0
        futs = [await p.enqueue("tr", f"v{i}".encode(), partition=i % 2) for i in range(200)]
        await p.flush(10)
        assert all(f.done() for f in futs)
        assert (await aio.delivered(futs[-1])).partition == 1
    assigned = []
    async with aio.Consumer(bs, group_id="tg", auto_offset_reset="earliest", heartbeat_interval_ms=100) as c:
        await c.subscribe(["tr"], on_assign=lambda ps: assigned.append(sorted(ps)))
        assert c.subscription() == ["tr"]
        n = 0
        with anyio.fail_after(30):
            async for _ in c:
                n += 1
                if n == 201:
                    break
        assert assigned == [[TP("tr", 0), TP("tr", 1)]]
        assert sorted(c.assignment()) == [TP("tr", 0), TP("tr", 1)]
        await c.commit()
        committed = await c.committed([("tr", 0), ("tr", 1)])
        assert sum(committed.values()) == 201
        done = anyio.Event()
        await c.commit({("tr", 0): 5}, asynchronous=True, callback=lambda e: done.set())
        with anyio.fail_after(10):
            await done.wait()
        await c.unsubscribe()
        assert c.assignment() == []


async def test_seek_pause_position(broker):
    bs = broker.bootstrap_servers
    async with aio.Producer(bs) as p:
        for i in range(10):
            await p.enqueue("ts", f"v{i}".encode())
        await p.flush()
    async with aio.Consumer(bs, auto_offset_reset="latest") as c:
        await c.assign([("ts", 0)])
        assert await c.position(("ts", 0)) == 10
        await c.seek_to_beginning()
        assert await c.position(("ts", 0)) == 0
        await c.seek(("ts", 0), 8)
        recs = []
        with anyio.fail_after(10):
            while len(recs) < 2:
                recs += await c.poll(1.0)
        assert [r.offset for r in recs] == [8, 9]
        await c.seek_to_end([("ts", 0)])
        assert await c.position(("ts", 0)) == 10
        await c.pause([("ts", 0)])
        assert c.paused() == [TP("ts", 0)]
        await c.seek(("ts", 0), 0)
        assert await c.poll(0.3) == []
        await c.resume([("ts", 0)])
        with anyio.fail_after(10):
            assert (await c.poll(5.0))[0].offset == 0


async def test_async_rebalance_callbacks_and_admin(broker):
    bs = broker.bootstrap_servers
    revoked = []

    async def on_revoke(ps):
        await anyio.lowlevel.checkpoint()
        revoked.append(sorted(ps))

    async with aio.Admin(bs) as a:
        await a.create_topics(["rb"])
        await a.create_partitions({"rb": 2})
        assert len((await a.describe_topics(["rb"]))["rb"].partitions) == 2
        await a.alter_configs({("topic", "rb"): {"retention.ms": "99000"}})
        assert (await a.describe_configs([("topic", "rb")]))[("topic", "rb")]["retention.ms"] == "99000"
        assert (await a.list_offsets({("rb", 0): "latest"}))[TP("rb", 0)][0] == 0
        assert (await a.describe_cluster()).brokers
        async with aio.Consumer(bs, group_id="rbg", heartbeat_interval_ms=100) as c:
            await c.subscribe(["rb"], on_revoke=on_revoke)
            with anyio.fail_after(20):
                while len(c.assignment()) != 2:
                    await c.poll(0.1)
            assert any(g[0] == "rbg" for g in await a.list_groups())
            assert (await a.describe_groups(["rbg"]))["rbg"].state == "Stable"
            await c.subscribe(["rb", "rb2"], on_revoke=on_revoke)
            with anyio.fail_after(20):
                while not revoked:
                    await c.poll(0.1)
            assert revoked[0] == [TP("rb", 0), TP("rb", 1)]
        await a.delete_groups(["rbg"])
        await a.delete_topics(["rb"])


async def test_caller_owned_task_group_and_timeouts(broker):
    p = aio.Producer(broker.bootstrap_servers, max_block_ms=200, allow_auto_create_topics=False)
    async with anyio.create_task_group() as n:
        await n.start(p.run)
        with pytest.raises(logbroker.KafkaTimeoutError, match="'missing'"):
            await p.send("missing", b"v")
        await p.aclose()
        await p.aclose()
    with pytest.raises(logbroker.KafkaError):
        await p.send("x", b"v")


@pytest.fixture
def fast_848_broker(tmp_path):
    with logbroker.Broker(data_dir=tmp_path / "data", config={"group.consumer.heartbeat.interval.ms": 100}) as b:
        yield b


async def test_kip848_group_with_async_callbacks(fast_848_broker):
    """group_protocol="consumer" through the async driver: a second member takes half the
    partitions incrementally; the first member's async on_revoke sees only those."""
    bs = fast_848_broker.bootstrap_servers
    async with aio.Admin(bs) as admin:
        await admin.create_topics([aio.NewTopic("t848", 2)])
    revoked: list = []

    async def on_revoke(ps):
        await anyio.lowlevel.checkpoint()
        revoked.append(sorted(ps))

    conf = dict(group_id="g848", group_protocol="consumer", auto_offset_reset="earliest")
    async with aio.Consumer(bs, **conf) as c1, aio.Consumer(bs, **conf) as c2:
        await c1.subscribe(["t848"], on_revoke=on_revoke)
        with anyio.fail_after(30):
            while len(c1.assignment()) != 2:
                await c1.poll(0.05)
            await c2.subscribe(["t848"])
            while not (len(c1.assignment()) == 1 and len(c2.assignment()) == 1):
                await c1.poll(0.05)
                await c2.poll(0.05)
        assert revoked == [c2.assignment()]
