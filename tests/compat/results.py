"""Outcomes of one suite on one broker, stored as JSON under build/compat/.

File: build/compat/<suite>--<broker>--<mode>.json, one object:
    {"suite": str, "broker": "logbroker"|"kafka", "broker_version": str, "nodes": int,
     "mode": "short"|"full", "suite_version": {...}, "started": ISO-8601 UTC, "seconds": float,
     "outcomes": [{"test": str, "status": "pass"|"fail", "seconds": float, "detail": str}]}
`detail` is empty on a pass; on a fail it is the suite's own last words (trimmed to 2,000
characters), so the reason for a difference can be read without running it again.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = Path(os.environ.get("LOGBROKER_COMPAT_RESULTS", ROOT / "build" / "compat"))
STATUSES = ("pass", "fail")
DETAIL_MAX = 2000


@dataclass
class Outcome:
    test: str
    status: str  # "pass" | "fail"
    seconds: float = 0.0
    detail: str = ""

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"test {self.test!r}: status {self.status!r} is not one of {STATUSES}")
        if len(self.detail) > DETAIL_MAX:
            self.detail = "..." + self.detail[-DETAIL_MAX:]


def path_for(suite: str, broker: str, mode: str) -> Path:
    return RESULTS / f"{suite}--{broker}--{mode}.json"


def write(
    suite: str,
    broker: str,
    mode: str,
    outcomes: list[Outcome],
    *,
    broker_version: str,
    nodes: int,
    suite_version: dict,
    started: str,
    seconds: float,
) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    p = path_for(suite, broker, mode)
    doc = {
        "suite": suite,
        "broker": broker,
        "broker_version": broker_version,
        "nodes": nodes,
        "mode": mode,
        "suite_version": suite_version,
        "started": started,
        "seconds": round(seconds, 1),
        "outcomes": [asdict(o) for o in outcomes],
    }
    p.write_text(json.dumps(doc, indent=1) + "\n")
    return p


def load(suite: str, broker: str, mode: str) -> dict | None:
    p = path_for(suite, broker, mode)
    return json.loads(p.read_text()) if p.exists() else None
