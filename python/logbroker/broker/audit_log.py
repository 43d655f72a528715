"""The broker's audit log: who authenticated, who was denied what, who changed which metadata.

One JSON object per line (UTF-8, `\\n`-terminated), written to `audit.log.file` and, when
`audit.log.topic` is set, produced to that topic as one record per line (key: the node id):

    {"time": "2026-11-28T01:07:59.123Z", "event": "authentication", "outcome": "failure",
     "principal": "User:bob", "client": "127.0.0.1:50123", "listener": "SASL_PLAINTEXT",
     "mechanism": "PLAIN", "reason": "PLAIN: user 'bob' gave a wrong password", "node": 1}

- `time`: ISO-8601 UTC, milliseconds, when the event happened (not when it was written);
  `node`: this broker's node.id; `principal` ("User:name", or "" for a failed login whose
  user is not known), `client` (the peer's host:port) and `listener` (its name) on every line.
- `event` "authentication": a SASL exchange, or a login to an HTTP endpoint (`listener`
  "console": the web console's logins, `mechanism` the one its clients use, or "metrics" /
  "schema_registry": HTTP Basic, `mechanism` "HTTP-BASIC"); `outcome` "success" or
  "failure", `mechanism`, and on failure `reason` (the principal is the user the client
  claimed, when it named one).
- `event` "authorization": a denial (allowed requests are not logged); `outcome` "denied",
  `api` (the request's API name), `operation`, `resource_type`, `resource` (Kafka's names:
  WRITE, TOPIC, ...). Denials of Produce and Fetch are decided by the network thread
  (rust/src/server/authorizer.rs, `Caller::denial`) and come here as data-path log lines
  (`DENIAL_LINE`); the others by `RequestContext.authorize`; and the web console's
  refusals of a change without its session's CSRF token or from another origin (`listener`
  "console", `operation` "CSRF" or "ORIGIN", `resource_type` "CONSOLE_ROUTE", `resource`
  the route). At most
  `audit.log.denials.per.second` lines per second are written for one (principal,
  operation, resource type, resource); the rest are counted, and once that second is over
  one more line for them is written: the last one denied, with `"suppressed": N`.
- `event` "metadata": a change asked of the controller through an admin API (topics
  created or deleted, partitions added, configs altered, ACLs created or deleted, SCRAM
  credentials altered, client quotas altered, delegation tokens created, renewed or
  expired: their ids, never their HMACs); `outcome` "success" or "failure" (with
  `error`, Kafka's error code name, and `message`), `api`, `change`, `resource_type`,
  `resource`, and what changed (`configs`, `acl`, ...; never a password, a salt or a
  sensitive config's value). Logged once, by the node the client's request reached (not
  again by the controller a broker forwards it to); validate-only requests are not logged.

Invariants: `record` (and the helpers that build events) only appends to an in-memory list
and never blocks; the trio task `run` takes the list in batches, serializes and writes it
from a worker thread (trio.to_thread), so the event loop never waits on the disk. Lines are
written in the order recorded, each batch flushed to the OS (not fsynced). The file is
opened for appending at start (`open`: an unusable path stops the start with a ConfigError
naming audit.log.file) and reopened when it was moved away or deleted (logrotate's rename
mode; copytruncate works too, as the file is opened with O_APPEND). Lines wait for the topic
while it is created or unreachable, at most `TOPIC_BACKLOG` of them (older ones are then
dropped from the topic, never from the file, and the drop is logged).
"""

from __future__ import annotations

import collections
import json
import logging
import os
import re
import time
from typing import Any

import trio

from logbroker.common.config import BrokerConfig, ConfigError
from logbroker.log_format import fields

log = logging.getLogger("logbroker.audit")

KINDS = ("authentication", "authorization", "metadata")
TOPIC_BACKLOG = 100_000  # lines kept for audit.log.topic while it cannot be written
SWEEP_S = 1.0  # how often the denial windows that are over are summarized
CLIENT_ID = "logbroker-audit-log"

# The network thread's line for a denied Produce or Fetch (`Caller::denial` in
# rust/src/server/authorizer.rs): `User:bob from 127.0.0.1:5000 denied WRITE on TOPIC "orders" (Produce, listener 1)`
# (the resource is quoted as Rust's {:?} does: `"` and `\` escaped, so it cannot fake the end)
DENIAL_LINE = re.compile(
    r"^(?P<principal>.*?) from (?P<client>\S+) denied (?P<operation>[A-Z_]+) on "
    r'(?P<resource_type>[A-Z_]+) "(?P<resource>(?:[^"\\]|\\.)*)" '
    r"\((?P<api>\w+), listener (?P<listener>\d+)\)$"
)
# the user a failed SASL exchange named (common/sasl.py and sasl_scram.py say "user 'name'")
_CLAIMED_USER = re.compile(r"\buser ('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")")
# config keys whose values are not written (beside the table's sensitive ones)
_SENSITIVE = ("password", "secret", "jaas.config", "token", "credential")


def timestamp(t: float) -> str:
    """ISO-8601 UTC with milliseconds: 2026-11-28T01:07:59.123Z."""
    ms = int(t * 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms // 1000)) + f".{ms % 1000:03d}Z"


def claimed_user(reason: str) -> str:
    """The user a failed exchange's reason names ("" when it names none)."""
    m = _CLAIMED_USER.search(reason)
    if m is None:
        return ""
    quoted = m.group(1)
    return quoted[1:-1].replace("\\'", "'").replace('\\"', '"').replace("\\\\", "\\")


def shown_value(key: str, value: Any) -> Any:
    """A config value as the audit log writes it: a sensitive key's as "[hidden]"."""
    from logbroker.common.config import BROKER_KEYS

    spec = BROKER_KEYS.get(key)
    lowered = key.lower()
    if value is not None and (
        (spec is not None and spec.sensitive) or lowered.endswith(".key") or any(s in lowered for s in _SENSITIVE)
    ):
        return "[hidden]"
    return value


class AuditLog:
    """The audit log of one broker (module docstring); `from_config` is None when it is off."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.node_id = config.node_id
        self.path = config.get_str("audit.log.file")
        self.topic = config.get_str("audit.log.topic")
        self.kinds = frozenset(config.get_str("audit.log.events").split(","))
        self.denials_per_second = config.get_int("audit.log.denials.per.second")
        self._pending: list[dict[str, Any]] = []  # recorded, not yet written
        self._wakeup = trio.Event()
        # (principal, operation, resource type, resource) -> [second, denials, suppressed, last suppressed event]
        self._windows: dict[tuple[str, str, str, str], list] = {}
        self._file: Any = None  # the open file (binary, append)
        self._topic_lines: collections.deque[bytes] = collections.deque()
        self._topic_wakeup = trio.Event()
        self._client_config: dict[str, Any] | None = None
        self.lines_written = 0  # to the file
        self.lines_dropped = 0  # from the topic backlog

    @classmethod
    def from_config(cls, config: BrokerConfig) -> AuditLog | None:
        if not config.get_str("audit.log.file") and not config.get_str("audit.log.topic"):
            return None
        return cls(config)

    # --- start ----------------------------------------------------------------------

    async def open(self) -> None:
        """Opens the file for appending and checks the topic's client settings; a
        ConfigError naming the key when either cannot be used."""
        if self.path:
            try:
                self._file = await trio.to_thread.run_sync(self._open_file)
            except OSError as e:
                raise ConfigError(
                    f"audit.log.file={self.path!r}: cannot be opened for appending: {e.strerror or e}"
                ) from None
        if self.topic:
            from logbroker.broker.own_clients import client_config
            from logbroker.coord.metadata.metadata import topic_name_error

            error = topic_name_error(self.topic)
            if error:
                raise ConfigError(f"audit.log.topic={self.topic!r}: {error}")
            self._client_config = client_config(self.config, "audit.log.topic")

    def _open_file(self):
        return open(self.path, "ab", buffering=0)  # noqa: SIM115 - kept open, closed by run()

    # --- recording (never blocks) -----------------------------------------------------

    def record(self, event: dict[str, Any]) -> None:
        """Queues one event (a dict with at least "event"; "time" and "node" are added)."""
        if event["event"] not in self.kinds:
            return
        if "time" not in event:
            event = {"time": timestamp(time.time()), **event}
        event["node"] = self.node_id
        self._pending.append(event)
        self._wakeup.set()

    def authentication(
        self, outcome: str, principal: str, client: str, listener: str, mechanism: str | None, reason: str | None = None
    ) -> None:
        """A SASL exchange that succeeded ("success") or failed ("failure", with its reason)."""
        if "authentication" not in self.kinds:
            return
        event: dict[str, Any] = {
            "event": "authentication",
            "outcome": outcome,
            "principal": principal,
            "client": client,
            "listener": listener,
            "mechanism": mechanism,
        }
        if reason is not None:
            event["reason"] = reason
        self.record(event)

    def denied(
        self, principal: str, client: str, listener: str, api: str, operation: str, resource_type: str, resource: str
    ) -> None:
        """An authorization denial, rate-limited per (principal, operation, resource)."""
        if "authorization" not in self.kinds:
            return
        now = time.time()
        second = int(time.monotonic())
        key = (principal, operation, resource_type, resource)
        window = self._windows.get(key)
        if window is None or window[0] != second:
            if window is not None:
                self._summarize(window)
            window = self._windows[key] = [second, 0, 0, None]
        window[1] += 1
        event = {
            "time": timestamp(now),
            "event": "authorization",
            "outcome": "denied",
            "principal": principal,
            "client": client,
            "listener": listener,
            "api": api,
            "operation": operation,
            "resource_type": resource_type,
            "resource": resource,
        }
        if window[1] <= self.denials_per_second:
            self.record(event)
        else:
            window[2] += 1
            window[3] = event

    def datapath_line(self, message: str, listeners: list[str]) -> bool:
        """A data-path log line: a denial of Produce or Fetch (DENIAL_LINE) is recorded;
        whether it was one."""
        if " denied " not in message:
            return False
        m = DENIAL_LINE.match(message)
        if m is None:
            return False
        index = int(m["listener"])
        listener = listeners[index] if index < len(listeners) else str(index)
        resource = m["resource"]
        if "\\" in resource:  # Rust's {:?} escapes, JSON's for the common ones
            try:
                resource = json.loads(f'"{resource}"')
            except ValueError:
                pass
        self.denied(m["principal"], m["client"], listener, m["api"], m["operation"], m["resource_type"], resource)
        return True

    def metadata(
        self,
        principal: str,
        client: str,
        listener: str,
        api: str,
        change: str,
        resource_type: str,
        resource: str,
        error: str | None = None,
        message: str | None = None,
        **details: Any,
    ) -> None:
        """A metadata change asked of the controller: done (`error` None) or refused."""
        if "metadata" not in self.kinds:
            return
        event: dict[str, Any] = {
            "event": "metadata",
            "outcome": "success" if error is None else "failure",
            "principal": principal,
            "client": client,
            "listener": listener,
            "api": api,
            "change": change,
            "resource_type": resource_type,
            "resource": resource,
        }
        event.update(details)
        if error is not None:
            event["error"] = error
            event["message"] = message
        self.record(event)

    def _summarize(self, window: list) -> None:
        """The line for the denials a window suppressed, if any."""
        if window[2]:
            event = dict(window[3])
            event["time"] = timestamp(time.time())
            event["suppressed"] = window[2]
            self.record(event)

    def _sweep(self) -> None:
        """Summarizes the windows whose second is over, and forgets them."""
        second = int(time.monotonic())
        over = [key for key, w in self._windows.items() if w[0] != second]
        for key in over:
            self._summarize(self._windows.pop(key))

    # --- writing (the trio task) ----------------------------------------------------------

    async def run(self, bootstrap: str, *, task_status: trio.TaskStatus = trio.TASK_STATUS_IGNORED) -> None:
        """Writes what is recorded until cancelled (then the rest, and closes the file);
        with audit.log.topic, produces the lines to it through `bootstrap` too."""
        try:
            async with trio.open_nursery() as nursery:
                if self.topic:
                    nursery.start_soon(self._topic_sink, bootstrap)
                task_status.started()
                while True:
                    with trio.move_on_after(SWEEP_S):
                        await self._wakeup.wait()
                    self._wakeup = trio.Event()
                    self._sweep()
                    await self._write_pending()
        finally:
            with trio.CancelScope(shield=True):
                for window in self._windows.values():
                    self._summarize(window)
                self._windows.clear()
                await self._write_pending()
                if self._file is not None:
                    await trio.to_thread.run_sync(self._file.close)
                    self._file = None

    async def _write_pending(self) -> None:
        if not self._pending:
            return
        batch, self._pending = self._pending, []
        with trio.CancelScope(shield=True):  # a batch taken is written, even as the broker stops
            lines = await trio.to_thread.run_sync(self._write, batch)
        if self.topic:
            for line in lines:
                if len(self._topic_lines) >= TOPIC_BACKLOG:
                    self._topic_lines.popleft()
                    self.lines_dropped += 1
                    if self.lines_dropped == 1 or self.lines_dropped % 10_000 == 0:
                        log.warning(
                            "audit log: %d line(s) dropped for topic %s, which has not been written for %d lines",
                            self.lines_dropped,
                            self.topic,
                            TOPIC_BACKLOG,
                            extra=fields(topic=self.topic),
                        )
                self._topic_lines.append(line)
            self._topic_wakeup.set()

    def _write(self, batch: list[dict[str, Any]]) -> list[bytes]:
        """In a worker thread: the batch as lines, appended to the file (reopened first if it
        was moved away); the lines."""
        lines = [json.dumps(e, separators=(",", ":"), ensure_ascii=False).encode() + b"\n" for e in batch]
        if self._file is not None:
            try:
                self._reopen_if_moved()
                self._file.write(b"".join(lines))
                self.lines_written += len(lines)
            except OSError as e:
                log.error("audit log: writing %d line(s) to %s failed: %s", len(lines), self.path, e)
        return lines

    def _reopen_if_moved(self) -> None:
        try:
            same = os.path.samestat(os.stat(self.path), os.fstat(self._file.fileno()))
        except FileNotFoundError:
            same = False
        if not same:
            old, self._file = self._file, self._open_file()
            old.close()
            log.info("audit log: %s was moved away or deleted; reopened", self.path)

    async def _topic_sink(self, bootstrap: str) -> None:
        """Produces the lines to audit.log.topic (created if missing), as the broker's own
        client; connection trouble is logged and retried, never fatal to the broker."""
        from logbroker.aio import Admin, Producer
        from logbroker.client.errors import KafkaError

        assert self._client_config is not None
        key = str(self.node_id).encode()
        while True:
            try:
                async with (
                    Admin(bootstrap, client_id=CLIENT_ID, **self._client_config) as admin,
                    Producer(bootstrap, client_id=CLIENT_ID, **self._client_config) as producer,
                ):
                    await self._ensure_topic(admin)
                    while True:
                        while self._topic_lines:
                            await producer.enqueue(self.topic, self._topic_lines[0], key)
                            self._topic_lines.popleft()
                        self._topic_wakeup = trio.Event()
                        await self._topic_wakeup.wait()
            except KafkaError as e:
                log.warning(
                    "audit log: producing to topic %s failed (%s); retrying in 1 s",
                    self.topic,
                    e,
                    extra=fields(topic=self.topic),
                )
                await trio.sleep(1.0)

    async def _ensure_topic(self, admin) -> None:
        from logbroker.aio import NewTopic
        from logbroker.client.errors import KafkaError, TopicAlreadyExistsError

        rf = self.config.get_int("audit.log.topic.replication.factor")
        while True:
            try:
                if self.topic in await admin.list_topics(timeout=30.0):
                    return
                await admin.create_topics([NewTopic(self.topic, 1, rf)], timeout=30.0)
                log.info(
                    "audit log: created topic %s (replication factor %d)",
                    self.topic,
                    rf,
                    extra=fields(topic=self.topic),
                )
                return
            except TopicAlreadyExistsError:
                return
            except KafkaError as e:  # the cluster is still forming: brokers register, a controller is elected
                log.info(
                    "audit log: topic %s not ready yet (%s); retrying", self.topic, e, extra=fields(topic=self.topic)
                )
                await trio.sleep(1.0)
