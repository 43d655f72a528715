"""The same `logbroker.aio` code under `asyncio.run` and `trio.run`, as an application runs it
(no test plugin owning the loop), and what asyncio code does to a client: native
cancellation (`asyncio.wait_for`, `asyncio.timeout`), many clients in one loop, records
sent from tasks at once."""

from __future__ import annotations

import asyncio

import anyio
import pytest
import trio

from logbroker import aio
from logbroker.client import ClientClosedError


async def app(bootstrap: str, topic: str) -> dict:
    """What a service does: create a topic, produce from several tasks at once, consume in a
    group, commit, read the committed offsets back."""
    async with aio.Admin(bootstrap) as admin:
        await admin.create_topics([aio.NewTopic(topic, 3)])
    async with aio.Producer(bootstrap, acks="all") as producer:

        async def send_some(start: int) -> None:
            for i in range(start, start + 300):
                await producer.enqueue(topic, b"v%d" % i, key=b"%d" % i)

        async with anyio.create_task_group() as tg:
            for start in (0, 300, 600):
                tg.start_soon(send_some, start)
        await producer.flush(30)
        meta = await producer.send(topic, b"last", key=b"last")
    got: list[bytes] = []
    async with aio.Consumer(bootstrap, group_id=f"{topic}-g", auto_offset_reset="earliest") as consumer:
        await consumer.subscribe([topic])
        with anyio.fail_after(60):
            async for record in consumer:
                got.append(record.value)
                if len(got) == 901:
                    break
        await consumer.commit()
        committed = await consumer.committed([(topic, p) for p in range(3)])
    return {"values": sorted(got), "committed": sum(v or 0 for v in committed.values()), "last_offset": meta.offset}


def expected() -> list[bytes]:
    return sorted([b"v%d" % i for i in range(900)] + [b"last"])


def test_same_code_under_asyncio_run_and_trio_run(broker):
    bs = broker.bootstrap_servers
    under_asyncio = asyncio.run(app(bs, "loops-asyncio"))
    under_trio = trio.run(app, bs, "loops-trio")
    for result in (under_asyncio, under_trio):
        assert result["values"] == expected()
        assert result["committed"] == 901
        assert result["last_offset"] >= 0


def test_asyncio_native_cancellation_leaves_the_client_usable(broker):
    bs = broker.bootstrap_servers

    async def main() -> list[bytes]:
        async with aio.Consumer(bs, auto_offset_reset="earliest") as consumer:
            await consumer.assign([("cancel-me", 0)])
            # Nothing to read yet: asyncio's own timeouts cancel the wait ...
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(consumer.poll(None), 0.3)
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.3):
                    await consumer.poll(None)
            # ... and the client goes on: records sent now arrive.
            async with aio.Producer(bs) as producer:
                for i in range(5):
                    await producer.send("cancel-me", b"c%d" % i)
            got: list[bytes] = []
            async with asyncio.timeout(30):
                while len(got) < 5:
                    got.extend(r.value for r in await consumer.poll(1.0))
            return got

    assert asyncio.run(main()) == [b"c%d" % i for i in range(5)]


def test_many_clients_share_one_asyncio_loop(broker):
    bs = broker.bootstrap_servers

    async def one(n: int) -> int:
        async with aio.Producer(bs) as p:
            meta = await p.send(f"many-{n}", b"x")
        async with aio.Consumer(bs, auto_offset_reset="earliest") as c:
            await c.assign([(f"many-{n}", 0)])
            async with asyncio.timeout(30):
                while not (recs := await c.poll(1.0)):
                    pass
        return meta.offset + len(recs)

    async def main() -> list[int]:
        return list(await asyncio.gather(*(one(n) for n in range(8))))

    assert asyncio.run(main()) == [1] * 8


def test_a_client_outside_its_context_says_so():
    async def main() -> None:
        p = aio.Producer("127.0.0.1:1")
        with pytest.raises(ClientClosedError, match="async with"):
            await p.send("t", b"v")

    asyncio.run(main())
