"""Log formats of `logbroker serve` (`--log-format`): `text`, one line per record as
`TIME LEVEL LOGGER: MESSAGE`, and `json`, one JSON object per line for log pipelines:

    {"ts": "2026-11-25T13:30:00.123Z", "level": "INFO", "logger": "logbroker.replication",
     "node": 1, "message": "...", "topic": "orders", "partition": 3}

`ts` is UTC with milliseconds; `node` is the broker's node.id. The message is the same text
as in the text format (it names the topic, partition, offset and peer involved); where a log
call passes them as `extra` (topic, partition, offset, peer, group, transactional_id,
producer_id), they are fields of their own as well. `peer` is another node's id (an int) in
broker-to-broker and controller messages, a client's "host:port" otherwise. An exception's
traceback is the field `exception`.

Lines of the Rust engine (replica fetchers, network thread) arrive as text; `parse_fields`
recovers the fields of the known ones.
"""

from __future__ import annotations

import json
import logging
import re
import time

FIELDS = ("topic", "partition", "offset", "peer", "group", "transactional_id", "producer_id")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class JsonFormatter(logging.Formatter):
    def __init__(self, node_id: int | None = None) -> None:
        super().__init__()
        self.node_id = node_id

    def format(self, record: logging.LogRecord) -> str:
        ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z"
        doc: dict[str, object] = {"ts": ts, "level": record.levelname, "logger": record.name}
        if self.node_id is not None:
            doc["node"] = self.node_id
        doc["message"] = record.getMessage()
        for name in FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                doc[name] = value
        if record.exc_info:
            doc["exception"] = self.formatException(record.exc_info)
        return json.dumps(doc, default=str)


def fields(**values: object) -> dict[str, object]:
    """The `extra` of a log call: the given FIELDS that are not None."""
    return {k: v for k, v in values.items() if v is not None}


# Topic names are [a-zA-Z0-9._-]+ (coord/metadata/metadata.py), so a partition's name "orders-3" ends at
# its last "-<digits>" and never holds a space or a colon.
_NAME = r"(?P<topic>[a-zA-Z0-9._-]+)-(?P<partition>\d+)"
# The replica fetchers (rust/src/server/replica_fetcher.rs): "orders-3: leader 2 answered error 6
# at fetch offset 120 ...", "fetching 4 partition(s) from broker 2 at host:9092 failed: ...".
FETCHER_LINES = (
    re.compile(f"^{_NAME}: "),
    re.compile(r"\b(?:leader|broker) (?P<peer>\d+)\b"),
    re.compile(r"\b(?:fetch|at) offset (?P<offset>\d+)\b"),
)
# The network thread (rust/src/server/produce.rs, fetch.rs): "produce to orders-3 from
# 10.0.0.5:51234 rejected (...): ...", "fetch from 10.0.0.5:51234: fetch offset 9 of orders-3 is
# outside [...]".
DATAPATH_LINES = (
    re.compile(f"^produce to {_NAME} from (?P<peer>\\S+) rejected "),
    re.compile(f"^fetch from (?P<peer>\\S+): fetch offset (?P<offset>\\d+) of {_NAME} is outside "),
)


def parse_fields(message: str, patterns: tuple[re.Pattern[str], ...]) -> dict[str, object]:
    """The fields a line of the Rust engine names, by `patterns` (FETCHER_LINES or
    DATAPATH_LINES); the first match of each field wins; partition, offset and a node id as ints."""
    found: dict[str, object] = {}
    for pattern in patterns:
        m = pattern.search(message)
        if m is not None:
            for name, value in m.groupdict().items():
                found.setdefault(name, value if name == "topic" or not value.isdigit() else int(value))
    return found


def configure(level: str, fmt: str, node_id: int | None = None) -> None:
    """The root handler on stderr, in `fmt` ("text" or "json")."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter(node_id) if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    root.addHandler(handler)
    root.setLevel(getattr(logging, str(level).upper(), logging.INFO))
