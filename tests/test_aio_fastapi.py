"""The FastAPI example of docs/client.md ("In a FastAPI service"), run as the page shows it:
the code block is taken from the page, pointed at a test broker, and served by FastAPI's
TestClient (asyncio, the app's lifespan opening and closing the producer)."""

from __future__ import annotations

import re
from pathlib import Path

import logbroker

DOC = Path(__file__).resolve().parents[1] / "docs" / "client.md"


def example_source() -> str:
    text = DOC.read_text()
    section = text[text.index("### In a FastAPI service") :]
    m = re.search(r"```python\n(.*?)```", section, re.S)
    assert m, "docs/client.md lost its FastAPI example"
    return m.group(1)


def test_the_fastapi_example_publishes_records(broker):
    from fastapi.testclient import TestClient

    source = example_source()
    assert 'BOOTSTRAP = "127.0.0.1:9092"' in source
    namespace: dict = {}
    exec(compile(source.replace('"127.0.0.1:9092"', repr(broker.bootstrap_servers)), str(DOC), "exec"), namespace)
    with TestClient(namespace["app"]) as http:
        answers = [http.post(f"/events/k{i}", json={"n": i}).json() for i in range(20)]
    assert all(a["offset"] >= 0 for a in answers)
    with logbroker.Admin(broker.bootstrap_servers) as admin:
        partitions = len(admin.describe_topics(["events"])["events"].partitions)
    with logbroker.Consumer(broker.bootstrap_servers, auto_offset_reset="earliest") as c:
        c.assign([("events", p) for p in range(partitions)])
        got: list[bytes] = []
        for _ in range(50):
            got.extend(r.value for r in c.poll(0.5))
            if len(got) == 20:
                break
    assert sorted(got) == sorted(b'{"n": %d}' % i for i in range(20))
