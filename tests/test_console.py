"""The web console (`console.listen`): its REST routes on one real broker with real clients,
bad input answered with a clean 4xx while the broker goes on serving, and the page itself in
headless Chromium (Playwright) against a three-node cluster, watched while a broker is killed.

The browser is Debian's `chromium` (scripts/test installs it; Playwright's own browser
download needs a host the machines cannot reach), launched by path. Checked with Playwright
1.65 driving Chromium 156 headless."""

from __future__ import annotations

import http.client
import json
import shutil
import socket
import time
import urllib.error
import urllib.request
from urllib.parse import quote, urlparse

import pytest
from conftest import wait_until
from replication_helpers import FAST

import logbroker


def call(base: str, method: str, path: str, body: object = None, raw: bytes | None = None) -> tuple[int, object]:
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    req = urllib.request.Request(
        base.rstrip("/") + path, method=method, data=data, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            assert r.headers["Content-Type"] == "application/json"
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        with e:
            assert e.headers["Content-Type"] == "application/json", e.headers
            return e.code, json.loads(e.read())


def ok(base: str, method: str, path: str, body: object = None, status: int = 200) -> object:
    got, doc = call(base, method, path, body)
    assert got == status, (method, path, got, doc)
    return doc


def raw_exchange(url: str, data: bytes) -> bytes:
    u = urlparse(url)
    with socket.create_connection((u.hostname, u.port), timeout=10) as s:
        s.sendall(data)
        out = b""
        while chunk := s.recv(65536):
            out += chunk
    return out


def produce(
    bootstrap: str,
    topic: str,
    records: list[tuple[bytes | None, bytes, list]],
    partition: int = 0,
    timestamp: int | None = None,
) -> None:
    with logbroker.Producer(bootstrap) as p:
        for i, (key, value, headers) in enumerate(records):
            p.send(
                topic,
                value,
                key=key,
                partition=partition,
                headers=headers or None,
                timestamp=None if timestamp is None else timestamp + i * 1000,
            )


def test_rest_routes(tmp_path):
    with logbroker.Broker(data_dir=tmp_path / "d", console_listen="127.0.0.1:0") as b:
        base = b.console_url
        cluster = ok(base, "GET", "/api/cluster")
        assert [(n["node_id"], n["status"], n["reachable"]) for n in cluster["nodes"]] == [(1, "online", True)]
        assert cluster["controller_id"] == 1 and cluster["partitions"] == []

        created = ok(
            base,
            "POST",
            "/api/topics",
            {"name": "orders", "partitions": 2, "replication_factor": 1, "configs": {"retention.ms": 3600000}},
            status=201,
        )
        assert [p["partition"] for p in created["partitions"]] == [0, 1]
        assert created["configs"]["retention.ms"] == "3600000"
        status, doc = call(base, "POST", "/api/topics", {"name": "orders"})
        assert status == 409 and doc["kafka_error"] == "TOPIC_ALREADY_EXISTS" and "orders" in doc["error"]

        produce(
            b.bootstrap_servers,
            "orders",
            [(b"k%d" % i, json.dumps({"n": i}).encode(), [("src", b"\xff\x00")]) for i in range(10)],
            timestamp=1_700_000_000_000,
        )
        [row] = [t for t in ok(base, "GET", "/api/topics") if t["topic"] == "orders"]
        assert (row["partitions"], row["replication_factor"], row["records"], row["offline"]) == (2, 1, 10, 0)
        assert row["size_bytes"] > 100
        assert not any(t["internal"] for t in ok(base, "GET", "/api/topics"))
        detail = ok(base, "GET", "/api/topics/orders")
        p0 = detail["partitions"][0]
        assert (p0["leader"], p0["replicas"], p0["isr"], p0["earliest_offset"], p0["latest_offset"], p0["state"]) == (
            1,
            [1],
            [1],
            0,
            10,
            "ok",
        )
        assert p0["size_bytes"] == row["size_bytes"]

        text = ok(base, "GET", "/api/topics/orders/messages?partition=0&offset=2&limit=3&format=text")
        assert [(r["offset"], r["key"], r["value"]) for r in text["records"]] == [
            (2, "k2", '{"n": 2}'),
            (3, "k3", '{"n": 3}'),
            (4, "k4", '{"n": 4}'),
        ]
        assert text["records"][0]["headers"] == [["src", "\\xff\x00"]] and text["next_offset"] == 5
        js = ok(base, "GET", "/api/topics/orders/messages?partition=0&offset=0&limit=1&format=json")["records"][0]
        assert js["value"] == {"n": 0} and js["key"] == "k0" and js["headers"] == [["src", {"base64": "/wA="}]]
        assert js["not_json"] == ["key", "header src"]
        hexed = ok(base, "GET", "/api/topics/orders/messages?partition=0&limit=2&format=hex")  # the last two
        assert [(r["offset"], r["key"], r["headers"]) for r in hexed["records"]] == [
            (8, b"k8".hex(), [["src", "ff00"]]),
            (9, b"k9".hex(), [["src", "ff00"]]),
        ]
        by_time = ok(base, "GET", "/api/topics/orders/messages?partition=0&timestamp=1700000004500&limit=100")
        assert [r["offset"] for r in by_time["records"]] == [5, 6, 7, 8, 9]
        assert ok(base, "GET", "/api/topics/orders/messages?partition=1")["records"] == []

        altered = ok(
            base,
            "POST",
            "/api/topics/orders/config",
            {"set": {"retention.ms": "7200000"}, "delete": ["max.message.bytes"]},
        )
        assert altered["configs"]["retention.ms"] == "7200000"
        assert ok(base, "GET", "/api/topics/orders")["configs"]["retention.ms"] == "7200000"

        # a group with a live member: lag per partition, and a reset refused as Kafka refuses it
        with logbroker.Consumer(
            b.bootstrap_servers, group_id="billing", auto_offset_reset="earliest", enable_auto_commit=False
        ) as c:
            c.subscribe(["orders"])
            wait_until(lambda: c.poll(0.2) or c.assignment(), what="the consumer's assignment")
            c.commit({("orders", 0): 4, ("orders", 1): 0})
            groups = ok(base, "GET", "/api/groups")
            assert {"group": "billing", "protocol_type": "consumer", "state": "Stable"} in groups
            g = ok(base, "GET", "/api/groups/billing")
            assert g["state"] == "Stable" and len(g["members"]) == 1
            assert g["members"][0]["assignment"] == {"orders": [0, 1]}
            lag = {p["partition"]: (p["committed_offset"], p["log_end_offset"], p["lag"]) for p in g["partitions"]}
            assert lag == {0: (4, 10, 6), 1: (0, 0, 0)}
            status, doc = call(base, "POST", "/api/groups/billing/reset-offsets", {"topic": "orders", "to": "earliest"})
            assert status == 409 and "billing" in doc["error"] and "Stable" in doc["error"], doc
        reset = ok(base, "POST", "/api/groups/billing/reset-offsets", {"topic": "orders", "to": "offset", "value": 7})
        assert reset["offsets"] == [{"partition": 0, "offset": 7}, {"partition": 1, "offset": 7}]
        reset = ok(
            base,
            "POST",
            "/api/groups/billing/reset-offsets",
            {"topic": "orders", "to": "timestamp", "value": 1_700_000_003_000},
        )
        assert reset["offsets"] == [{"partition": 0, "offset": 3}, {"partition": 1, "offset": 0}]
        reset = ok(base, "POST", "/api/groups/billing/reset-offsets", {"topic": "orders", "to": "latest"})
        assert reset["offsets"] == [{"partition": 0, "offset": 10}, {"partition": 1, "offset": 0}]
        assert {p["partition"]: p["lag"] for p in ok(base, "GET", "/api/groups/billing")["partitions"]} == {0: 0, 1: 0}

        # throughput: records produced between two samples show as a rate
        def moved():
            produce(b.bootstrap_servers, "orders", [(None, b"x" * 100, [])] * 50)
            d = ok(base, "GET", "/api/throughput")
            return any(s["records_per_s"].get("orders", 0) > 0 and s["bytes_per_s"]["orders"] > 0 for s in d["samples"])

        wait_until(moved, timeout=30, what="a throughput sample with records/s on orders")
        d = ok(base, "GET", "/api/throughput")
        assert d["interval_s"] == 2.0 and "orders" in d["topics"] and d["totals"]["orders"]["records"] >= 60

        assert ok(base, "DELETE", "/api/groups/billing") == {"deleted": "billing"}
        assert call(base, "GET", "/api/groups/billing")[0] == 404
        assert ok(base, "DELETE", "/api/topics/orders") == {"deleted": "orders"}
        status, doc = call(base, "GET", "/api/topics/orders")
        assert status == 404 and doc["kafka_error"] == "UNKNOWN_TOPIC_OR_PARTITION" and "orders" in doc["error"]

        page = urllib.request.urlopen(base, timeout=10)
        assert page.headers["Content-Type"].startswith("text/html") and b"/static/console.js" in page.read()
        page.close()
        for name, kind in [("console.js", "text/javascript"), ("console.css", "text/css")]:
            with urllib.request.urlopen(base + "static/" + name, timeout=10) as r:
                assert r.headers["Content-Type"].startswith(kind) and r.read()


def test_bad_input_gets_a_clean_4xx_and_the_broker_goes_on(tmp_path):
    with logbroker.Broker(data_dir=tmp_path / "d", console_listen="127.0.0.1:0") as b:
        base = b.console_url
        ok(base, "POST", "/api/topics", {"name": "t", "partitions": 1}, status=201)
        bad = [
            ("GET", "/api/topics/nope", None, 404, "nope"),
            ("GET", "/api/topics/nope/messages", None, 404, "nope"),
            ("GET", "/api/groups/nope", None, 404, "nope"),
            ("DELETE", "/api/topics/nope", None, 404, "nope"),
            ("POST", "/api/topics/nope/config", {"set": {"retention.ms": "1"}}, 404, "nope"),
            ("GET", "/api/topics/t/messages?partition=abc", None, 400, "partition"),
            ("GET", "/api/topics/t/messages?partition=-1", None, 400, "partition"),
            ("GET", "/api/topics/t/messages?partition=7", None, 404, "partition 7"),
            ("GET", "/api/topics/t/messages?offset=1e9", None, 400, "offset"),
            ("GET", "/api/topics/t/messages?limit=0", None, 400, "limit"),
            ("GET", "/api/topics/t/messages?limit=100000", None, 400, "limit"),
            ("GET", "/api/topics/t/messages?offset=1&timestamp=2", None, 400, "not both"),
            ("GET", "/api/topics/t/messages?format=xml", None, 400, "format"),
            ("POST", "/api/topics", [1, 2], 400, "object"),
            ("POST", "/api/topics", {"partitions": 1}, 400, "name"),
            ("POST", "/api/topics", {"name": "u", "partitions": "many"}, 400, "partitions"),
            ("POST", "/api/topics", {"name": "u", "partitions": True}, 400, "partitions"),
            ("POST", "/api/topics", {"name": "u", "configs": ["a"]}, 400, "configs"),
            ("POST", "/api/topics", {"name": "bad name!"}, 400, "INVALID_TOPIC_EXCEPTION"),
            ("POST", "/api/topics", {"name": "u", "partitions": 0}, 400, "INVALID_PARTITIONS"),
            ("POST", "/api/topics", {"name": "u", "configs": {"cleanup.policy": "shred"}}, 400, "cleanup.policy"),
            ("POST", "/api/topics/t/config", {}, 400, "nothing to change"),
            ("POST", "/api/topics/t/config", {"set": {"retention.ms": "soon"}}, 400, "retention.ms"),
            ("POST", "/api/groups/g/reset-offsets", {"topic": "t", "to": "yesterday"}, 400, "'to'"),
            ("POST", "/api/groups/g/reset-offsets", {"topic": "t", "to": "offset"}, 400, "value"),
            ("POST", "/api/groups/g/reset-offsets", {"topic": "t", "to": "offset", "value": -3}, 400, "value"),
            ("POST", "/api/groups/g/reset-offsets", {"topic": "nope", "to": "earliest"}, 404, "nope"),
            ("GET", "/api/nothing", None, 404, "/api/nothing"),
            ("PUT", "/api/topics", {"name": "x"}, 405, "GET, POST"),
            ("DELETE", "/api/cluster", None, 405, "GET"),
        ]
        for method, path, body, status, says in bad:
            got, doc = call(base, method, path, body)
            assert (got, says in doc.get("error", "") + doc.get("kafka_error", "")) == (status, True), (
                method,
                path,
                got,
                doc,
            )
        got, doc = call(base, "POST", "/api/topics", raw=b"{not json")
        assert got == 400 and "not JSON" in doc["error"]
        got, doc = call(base, "POST", "/api/topics", raw=b"\xff\xfe")
        assert got == 400 and "not JSON" in doc["error"]
        big = raw_exchange(base, b"POST /api/topics HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000\r\n\r\n")
        assert big.startswith(b"HTTP/1.1 413 ") and b"at most" in big
        assert raw_exchange(base, b"BLAH\r\n\r\n").startswith(b"HTTP/1.1 400 ")
        assert raw_exchange(base, b"GET / SPDY/9\r\n\r\n").startswith(b"HTTP/1.1 400 ")
        assert raw_exchange(base, b"GET / HTTP/2.0\r\n\r\n").startswith(b"HTTP/1.1 505 ")
        assert raw_exchange(base, b"GET / HTTP/1.1\r\nbroken header\r\n\r\n").startswith(b"HTTP/1.1 400 ")
        assert raw_exchange(base, b"GET / HTTP/1.1\r\nX: " + b"a" * 20000 + b"\r\n\r\n").startswith(b"HTTP/1.1 431 ")
        chunked = b"POST /api/topics HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
        assert raw_exchange(base, chunked).startswith(b"HTTP/1.1 411 ")
        assert raw_exchange(base, b"GET /api/cluster HTTP/1.1\r\nContent-Length: -1\r\n\r\n").startswith(
            b"HTTP/1.1 400 "
        )
        with socket.create_connection((urlparse(base).hostname, urlparse(base).port), timeout=5) as s:
            s.sendall(b"GET /api/clu")  # and hang up mid-request
        # the broker and its console go on
        assert ok(base, "GET", "/api/cluster")["nodes"][0]["status"] == "online"
        assert [t["topic"] for t in ok(base, "GET", "/api/topics")] == ["t"]
        produce(b.bootstrap_servers, "t", [(None, b"still here", [])])
        assert ok(base, "GET", "/api/topics/t/messages")["records"][0]["value"] == "still here"


def test_keep_alive_serves_several_requests_on_one_connection(tmp_path):
    with logbroker.Broker(data_dir=tmp_path / "d", console_listen="127.0.0.1:0") as b:
        u = urlparse(b.console_url)
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
        try:
            for path in ("/api/cluster", "/api/nothing", "/api/topics", "/"):
                conn.request("GET", path)
                r = conn.getresponse()
                r.read()
                assert r.status == (404 if path == "/api/nothing" else 200)
                assert r.getheader("Connection") == "keep-alive"
            conn.request("POST", "/api/topics", body=json.dumps({"name": "ka"}), headers={"Connection": "close"})
            r = conn.getresponse()
            assert r.status == 201 and r.getheader("Connection") == "close"
            r.read()
        finally:
            conn.close()


def test_bad_console_listen_is_refused(tmp_path):
    with pytest.raises(Exception, match="console.listen"):
        logbroker.Broker(data_dir=tmp_path / "d", console_listen="nonsense")


# --- the page, in headless Chromium -----------------------------------------------------------


@pytest.fixture
def browser():
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.fail("no chromium on PATH: scripts/test installs Debian's (apt-get install chromium)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium, headless=True)
        try:
            yield b
        finally:
            b.close()


def by_id(page, name: str):
    return page.locator(f'[data-testid="{name}"]')


def text_of(page, name: str, timeout: float = 30.0) -> str:
    return by_id(page, name).inner_text(timeout=timeout * 1000)


def wait_text(page, name: str, want, timeout: float = 30.0, what: str = "") -> str:
    """Until the element's text satisfies `want` (a string it equals, or a predicate)."""
    check = want if callable(want) else (lambda t: t == want)
    last = None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        loc = by_id(page, name)
        if loc.count():
            last = loc.first.inner_text()
            if check(last):
                return last
        page.wait_for_timeout(200)
    raise AssertionError(f"{what or name}: last text {last!r} after {timeout} s")


@pytest.mark.timeout(420)
def test_console_in_chromium_against_a_cluster_while_a_broker_is_killed(tmp_path, browser):
    config = {**FAST, "min.insync.replicas": 1}
    with logbroker.Cluster(3, data_dir=tmp_path, config=config, console=True) as cluster:
        page = browser.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("dialog", lambda d: d.accept())
        base = cluster.nodes[0].console_url
        page.goto(base)

        # the cluster: three brokers online, a controller, nothing needing attention
        for i in (1, 2, 3):
            wait_text(page, f"broker-status-{i}", "online")
        assert text_of(page, "controller") in ("1", "2", "3")
        assert by_id(page, "problems-none").is_visible()

        # create a topic through the form
        page.click('[data-testid="tab-topics"]')
        page.fill('[data-testid="create-topic-name"]', "events")
        page.fill('[data-testid="create-topic-partitions"]', "3")
        page.fill('[data-testid="create-topic-rf"]', "3")
        page.fill('[data-testid="create-topic-configs"]', "retention.ms=3600000")
        page.click('[data-testid="create-topic-submit"]')
        wait_text(page, "topic-name", "events")
        for p in range(3):
            wait_text(page, f"partition-isr-{p}", lambda t: len(t.split(",")) == 3, what=f"events-{p} ISR")
        assert text_of(page, "config-value-retention.ms") == "3600000"

        # records from our producer, browsed as text, JSON and hex
        with logbroker.Producer(cluster.bootstrap_servers, acks="all") as producer:
            for i in range(20):
                producer.send(
                    "events",
                    json.dumps({"id": i, "kind": "click"}).encode(),
                    key=f"user-{i}".encode(),
                    partition=0,
                    headers=[("trace", b"t-%d" % i)],
                )
        wait_text(page, "partition-end-0", "20")
        page.click('[data-testid="topic-browse"]')
        page.select_option('[data-testid="msg-topic"]', "events")
        page.fill('[data-testid="msg-partition"]', "0")
        page.select_option('[data-testid="msg-from"]', "offset")
        page.fill('[data-testid="msg-position"]', "5")
        page.fill('[data-testid="msg-limit"]', "3")
        page.select_option('[data-testid="msg-format"]', "text")
        page.click('[data-testid="msg-submit"]')
        assert wait_text(page, "msg-value-5", '{"id": 5, "kind": "click"}')
        assert text_of(page, "msg-key-5") == "user-5" and "trace: t-5" in text_of(page, "msg-headers-5")
        assert by_id(page, "msg-8").count() == 0  # limit 3: offsets 5, 6, 7
        page.select_option('[data-testid="msg-format"]', "json")
        page.click('[data-testid="msg-submit"]')
        pretty = wait_text(page, "msg-value-5", lambda t: '"kind": "click"' in t and "\n" in t)
        assert json.loads(pretty) == {"id": 5, "kind": "click"}
        page.select_option('[data-testid="msg-format"]', "hex")
        page.click('[data-testid="msg-submit"]')
        wait_text(page, "msg-key-5", b"user-5".hex())
        assert text_of(page, "msg-headers-5") == "trace: " + b"t-5".hex()

        # a group's lag, then its offsets reset through the form
        with logbroker.Consumer(
            cluster.bootstrap_servers, group_id="readers", auto_offset_reset="earliest", enable_auto_commit=False
        ) as c:
            c.assign([("events", 0)])
            c.commit({("events", 0): 15})
        page.goto(base + "#group/readers")
        wait_text(page, "lag-value-events-0", "5")
        assert text_of(page, "committed-events-0") == "15" and text_of(page, "group-state") == "Empty"
        page.fill('[data-testid="reset-topic"]', "events")
        page.select_option('[data-testid="reset-to"]', "earliest")
        page.click('[data-testid="reset-submit"]')
        wait_text(page, "lag-value-events-0", "20")
        assert text_of(page, "committed-events-0") == "0"
        page.click('[data-testid="tab-groups"]')
        wait_text(page, "group-state-readers", "Empty")

        # alter a config
        page.goto(base + "#topic/events")
        page.fill('[data-testid="alter-config-key"]', "retention.ms")
        page.fill('[data-testid="alter-config-value"]', "7200000")
        page.click('[data-testid="alter-config-submit"]')
        wait_text(page, "config-value-retention.ms", "7200000")

        # throughput moves while records arrive
        page.click('[data-testid="tab-throughput"]')
        with logbroker.Producer(cluster.bootstrap_servers) as producer:
            deadline = time.monotonic() + 40
            moving = False
            while not moving and time.monotonic() < deadline:
                for i in range(200):
                    producer.send("events", b"x" * 200, partition=i % 3)
                producer.flush()
                page.wait_for_timeout(500)
                data = page.evaluate("window.logbrokerConsole.throughput")
                moving = bool(data) and any(s["records_per_s"].get("events", 0) > 0 for s in data["samples"])
        assert moving, "no records/s for events in the chart data"
        wait_text(page, "rate-records-events", lambda t: t not in ("", "-"))

        # kill a broker that is not the one serving this console: it shows as offline, its
        # partitions as under-replicated; back again, all is well
        victim = cluster.node(3)
        victim.kill()
        page.click('[data-testid="tab-cluster"]')
        wait_text(page, "broker-status-3", "offline", what="the killed broker's status")
        for i in (1, 2):
            assert text_of(page, f"broker-status-{i}") == "online"
        wait_text(page, "problem-state-events-0", "under-replicated", timeout=60)
        assert not by_id(page, "problems-none").is_visible()
        page.goto(base + "#topic/events")
        for p in range(3):
            wait_text(page, f"partition-isr-{p}", lambda t: "3" not in t.split(","), what=f"events-{p} ISR without 3")
            assert text_of(page, f"partition-leader-{p}") in ("1", "2")
        victim.start()
        page.click('[data-testid="tab-cluster"]')
        wait_text(page, "broker-status-3", "online", timeout=60)
        by_id(page, "problems-none").wait_for(state="visible", timeout=90_000)  # the ISR full again

        # delete the topic through the page (the confirm dialog is accepted)
        page.goto(base + "#topic/events")
        wait_text(page, "topic-name", "events")
        page.click('[data-testid="topic-delete"]')
        wait_text(page, "notice", "deleted topic events")
        assert "events" not in [t["topic"] for t in ok(base, "GET", "/api/topics")]
        assert errors == [], errors


def test_group_with_a_slash_and_unicode_in_its_name(tmp_path):
    with logbroker.Broker(data_dir=tmp_path / "d", console_listen="127.0.0.1:0") as b:
        ok(b.console_url, "POST", "/api/topics", {"name": "t"}, status=201)
        name = "team/a ü"
        with logbroker.Consumer(b.bootstrap_servers, group_id=name, enable_auto_commit=False) as c:
            c.assign([("t", 0)])
            c.commit({("t", 0): 0})
        g = ok(b.console_url, "GET", "/api/groups/" + quote(name, safe=""))
        assert g["group"] == name and g["partitions"][0]["committed_offset"] == 0
