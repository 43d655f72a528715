"""Log formats of `logbroker serve` (`--log-format`): `text`, one line per record as
`TIME LEVEL LOGGER: MESSAGE`, and `json`, one JSON object per line for log pipelines:

    {"ts": "2026-11-25T13:30:00.123Z", "level": "INFO", "logger": "logbroker.replication",
     "node": 1, "message": "...", "topic": "orders", "partition": 3}

`ts` is UTC with milliseconds; `node` is the broker's node.id. The message is the same text
as in the text format (it names the topic, partition, offset and peer involved); where a log
call passes them as `extra` (topic, partition, offset, peer, group, transactional_id), they
are fields of their own as well. An exception's traceback is the field `exception`.
"""

from __future__ import annotations

import json
import logging
import time

FIELDS = ("topic", "partition", "offset", "peer", "group", "transactional_id")
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


def configure(level: str, fmt: str, node_id: int | None = None) -> None:
    """The root handler on stderr, in `fmt` ("text" or "json")."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter(node_id) if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    root.addHandler(handler)
    root.setLevel(getattr(logging, str(level).upper(), logging.INFO))
