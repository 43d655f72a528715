"""The sans-I/O client core shared by every client: cluster metadata, timers, and the
network state, advanced by a driver calling `tick(now)` and feeding socket events to
`self.net`.

# Contract
- One thread (or event-loop task) owns a core: the driver's. Everything public on Producer,
  Consumer and Admin that touches core state goes through the driver's command queue
  (sync API) or runs inline in the loop's task (`logbroker.aio`, asyncio or trio).
- `tick(now)` runs due timers, refreshes metadata when asked or every
  `metadata.max.age.ms`, and lets the subclass do its work (`_tick`): it never blocks.
- `next_deadline()` is the latest time the driver may sleep until (None: until woken).
- `waker` (a `_core.Waker`) is set readable by whoever needs the loop to look now: the
  producer's accumulator from the sending thread, the command queue, or the core itself.

# Metadata
`Metadata` holds brokers, the controller and per-topic partition leaders. The core asks for
the topics it needs (`want_topics`, or every topic with `want_all_topics`), and re-asks
after `retry.backoff.ms` when a topic has no leader or errors, when a request failed with a
leadership error (`request_metadata_update`), and every `metadata.max.age.ms`.

# Authentication failures
A broker that refuses our SASL credentials (client/sasl.py) fails the connection's requests
with `SaslAuthenticationError`, which is not retriable; but what waits for metadata would
only ask again, and time out much later. So `Network` reports each failure to
`on_auth_error`, which fails the metadata waiters with it (and later ones at once, until a
connection authenticates: `Network.auth_error`); subclasses also fail their own waiters (the
producer's queued records, the consumer's next poll).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

from logbroker import _core
from logbroker.client import sasl
from logbroker.client.config import parse_servers
from logbroker.client.errors import KafkaTimeoutError, SaslAuthenticationError, error_for
from logbroker.client.network import Network, Pending
from logbroker.protocol.messages.metadata_request import _MetadataRequest

__all__ = ["ClientCore", "Metadata", "PartitionMeta", "TopicMeta"]

METADATA = 3


@dataclass
class PartitionMeta:
    partition: int
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    error_code: int = 0


@dataclass
class TopicMeta:
    name: str
    error_code: int
    partitions: dict[int, PartitionMeta] = field(default_factory=dict)
    internal: bool = False
    topic_id: Any = None


class Metadata:
    """What the client knows of the cluster (see the module docstring)."""

    def __init__(self) -> None:
        self.brokers: dict[int, tuple[str, int, str | None]] = {}
        self.controller_id = -1
        self.cluster_id: str | None = None
        self.topics: dict[str, TopicMeta] = {}
        self.wanted: set[str] = set()
        self.all_topics = False
        self.need_update = True
        self.last_update = -1e18
        self.updating = False
        self.version = 0
        # Bumped by responses to all-topics requests (a topic list is complete only then).
        self.all_version = 0
        # How the exchange went, for the error of a wait that timed out (`describe`).
        self.requests_sent = 0
        self.answers = 0
        self.last_answer_at: float | None = None
        self.last_failure: str | None = None
        self.last_problems: dict[str, str] = {}  # topic -> what the last answer said was wrong

    def leader(self, topic: str, partition: int) -> int:
        t = self.topics.get(topic)
        if t is None:
            return -1
        p = t.partitions.get(partition)
        return p.leader if p is not None else -1

    def describe(self, now: float) -> str:
        """How the metadata exchange went, e.g. "3 metadata requests sent, 1 answered (12.0 s
        ago); the last failure: <error>"."""
        out = f"{self.requests_sent} metadata request(s) sent, {self.answers} answered"
        if self.last_answer_at is not None:
            out += f" (the last {now - self.last_answer_at:.1f} s ago)"
        if self.last_problems:
            said = ", ".join(f"{t}: {why}" for t, why in sorted(self.last_problems.items())[:5])
            out += f"; the last answer said {said}"
        if self.last_failure is not None:
            out += f"; the last failure: {self.last_failure}"
        return out

    def partition_count(self, topic: str) -> int | None:
        t = self.topics.get(topic)
        if t is None or t.error_code != 0 or not t.partitions:
            return None
        return len(t.partitions)

    def update(self, resp: Any) -> list[str]:
        """Applies a MetadataResponse; returns topics that need another look (errors)."""
        self.brokers = {b.node_id: (b.host, b.port, b.rack) for b in resp.brokers}
        self.controller_id = resp.controller_id
        self.cluster_id = resp.cluster_id
        retry = []
        seen = set()
        self.last_problems = {}
        for t in resp.topics:
            if t.name is None:
                continue
            seen.add(t.name)
            meta = TopicMeta(t.name, t.error_code, internal=t.is_internal, topic_id=t.topic_id)
            for p in t.partitions:
                meta.partitions[p.partition_index] = PartitionMeta(
                    p.partition_index,
                    p.leader_id,
                    p.leader_epoch,
                    list(p.replica_nodes),
                    list(p.isr_nodes),
                    p.error_code,
                )
                if p.leader_id < 0:
                    retry.append(t.name)
                    self.last_problems.setdefault(t.name, f"partition {p.partition_index} has no leader")
            if t.error_code != 0:
                retry.append(t.name)
                self.last_problems[t.name] = str(error_for(t.error_code))
            self.topics[t.name] = meta
        if self.all_topics:
            for name in list(self.topics):
                if name not in seen:
                    del self.topics[name]
        self.version += 1
        return retry


class ClientCore:
    """Metadata, timers and the network (see the module docstring)."""

    def __init__(self, config: dict[str, Any], waker: _core.Waker | None = None) -> None:
        self.config = config
        self.waker = waker or _core.Waker()
        self.net = Network(
            parse_servers(config["bootstrap.servers"]),
            config["client.id"],
            config["request.timeout.ms"] / 1000,
            config["reconnect.backoff.ms"] / 1000,
            config["reconnect.backoff.max.ms"] / 1000,
            sasl.from_config(config),
        )
        self.net.on_auth_error = self.on_auth_error
        self.metadata = Metadata()
        self.now = 0.0
        self.closed = False
        self._timers: list[tuple[float, int, Callable[[], object]]] = []
        self._seq = itertools.count()
        self._metadata_waiters: list[tuple[Callable[[], bool], Pending[Any], float, str]] = []
        self._metadata_retry_at = 0.0
        self.allow_auto_create = bool(config.get("allow.auto.create.topics", False))

    # -- timers -------------------------------------------------------------------------

    def call_at(self, when: float, fn: Callable[[], object]) -> None:
        heapq.heappush(self._timers, (when, next(self._seq), fn))

    def wake(self) -> None:
        self.waker.wake()

    # -- metadata -----------------------------------------------------------------------

    def want_topics(self, topics: set[str] | list[str]) -> None:
        new = set(topics) - self.metadata.wanted
        if new:
            self.metadata.wanted |= new
            self.request_metadata_update()

    def request_metadata_update(self) -> None:
        self.metadata.need_update = True

    def wait_metadata(self, ready: Callable[[], bool], timeout: float, what: str) -> Pending[Any]:
        """Resolves once `ready()` holds after a metadata update (checked now, too); fails with
        KafkaTimeoutError naming `what` after `timeout` seconds, or with the
        SaslAuthenticationError of a refused connection (see the module docstring)."""
        p: Pending[Any] = Pending()
        if ready():
            p.resolve(None)
            return p
        self.request_metadata_update()
        if self.net.auth_error is not None:
            # the last connection attempt was refused our credentials: say so now (another
            # attempt still goes out, and a success clears the error)
            p.fail(self.net.auth_error)
            return p
        self._metadata_waiters.append((ready, p, self.now + timeout, what))
        self.call_at(self.now + timeout, self._expire_metadata_waiters)
        return p

    def _expire_metadata_waiters(self) -> None:
        keep = []
        for ready, p, deadline, what in self._metadata_waiters:
            if p.done():
                continue
            if deadline <= self.now:
                p.fail(
                    KafkaTimeoutError(f"{what} not present in metadata in time ({self.metadata.describe(self.now)})")
                )
            else:
                keep.append((ready, p, deadline, what))
        self._metadata_waiters = keep

    def _metadata_request(self) -> Any:
        req_cls = _MetadataRequest
        if self.metadata.all_topics:
            topics = None
        else:
            topics = [req_cls.MetadataRequestTopic(name=t) for t in sorted(self.metadata.wanted)]
        return req_cls(topics=topics, allow_auto_topic_creation=self.allow_auto_create)

    def _maybe_update_metadata(self, now: float) -> None:
        md = self.metadata
        if md.updating:
            return
        stale = now - md.last_update >= self.config["metadata.max.age.ms"] / 1000
        if not (md.need_update or stale) or now < self._metadata_retry_at:
            return
        md.updating = True
        md.need_update = False
        md.requests_sent += 1
        node = self.net.any_node()
        all_topics = md.all_topics
        self.net.request(node, self._metadata_request()).add_callback(lambda p: self._on_metadata(p, all_topics))

    def _on_metadata(self, p: Pending[Any], all_topics: bool = False) -> None:
        md = self.metadata
        md.updating = False
        backoff = self.config["retry.backoff.ms"] / 1000
        if p.error is not None:
            md.last_failure = str(p.error)
            md.need_update = True
            self._metadata_retry_at = self.now + backoff
            self.call_at(self._metadata_retry_at, lambda: None)
            return
        retry = md.update(p._value)
        md.last_update = self.now
        md.answers += 1
        md.last_answer_at = self.now
        if all_topics:
            md.all_version += 1
        for node_id, (host, port, _rack) in md.brokers.items():
            self.net.set_address(node_id, host, port)
        if retry:
            md.need_update = True
            self._metadata_retry_at = self.now + backoff
            self.call_at(self._metadata_retry_at, lambda: None)
        self.on_metadata_update()
        waiters, self._metadata_waiters = self._metadata_waiters, []
        for ready, w, deadline, what in waiters:
            if w.done():
                continue
            if ready():
                w.resolve(None)
            else:
                self._metadata_waiters.append((ready, w, deadline, what))
        if self._metadata_waiters:
            md.need_update = True

    def on_metadata_update(self) -> None:
        """Subclasses react to new metadata (leaders moved, partitions added)."""

    def on_auth_error(self, err: SaslAuthenticationError) -> None:
        """A broker refused our credentials (see the module docstring): fail what waits for
        metadata. Subclasses extend this (calling it)."""
        waiters, self._metadata_waiters = self._metadata_waiters, []
        for _ready, w, _deadline, _what in waiters:
            w.fail(err)
        self.wake()

    # -- the loop -----------------------------------------------------------------------

    def tick(self, now: float) -> None:
        self.now = now
        self.net.tick(now)
        while self._timers and self._timers[0][0] <= now:
            _, _, fn = heapq.heappop(self._timers)
            fn()
        self._maybe_update_metadata(now)
        self._tick(now)

    def _tick(self, now: float) -> None:
        """Subclass work: build and send requests."""

    def next_deadline(self) -> float | None:
        ds = []
        if self._timers:
            ds.append(self._timers[0][0])
        nd = self.net.next_deadline()
        if nd is not None:
            ds.append(nd)
        md = self.metadata
        if not md.updating:
            if md.need_update:
                ds.append(max(self._metadata_retry_at, self.now))
            else:
                ds.append(md.last_update + self.config["metadata.max.age.ms"] / 1000)
        d = self._deadline()
        if d is not None:
            ds.append(d)
        return min(ds) if ds else None

    def _deadline(self) -> float | None:
        return None

    def close(self) -> None:
        self.closed = True
        self.net.close()

    # -- helpers ------------------------------------------------------------------------

    def check(self, code: int, context: str, message: str | None = None) -> None:
        if code:
            raise error_for(code, message, context)

    def any_node(self) -> Hashable:
        return self.net.any_node()
