"""python -m tests.compat SUITE|all [--short] [--broker logbroker|kafka|both] [--report]

Prepares each suite once (pinned download and build, cached), then for each broker starts it
with the suite's settings, runs the suite, stops it and writes build/compat/<suite>--<broker>--<mode>.json.
`--report` then rewrites docs/compatibility.md's generated tables from those files.
Exit status: 0 when every test that passes on Kafka also passes on logbroker, or is named in
the suite's DIFFERENCES with its reason (with --broker logbroker alone: when every test passes or is named).
"""

from __future__ import annotations

import argparse
import importlib
import sys
import tempfile
import time
from datetime import UTC, datetime

from tests.compat import results
from tests.compat.brokers import BROKERS, started

SUITES = {
    "librdkafka": "tests.compat.librdkafka",
    "franz-go": "tests.compat.franz_go",
    "kafka-tools": "tests.compat.kafka_tools",
    "frameworks": "tests.compat.frameworks",
}


def suite_module(name: str):
    return importlib.import_module(SUITES[name])


def run_suite(name: str, brokers: list[str], short: bool) -> dict[str, list[results.Outcome]]:
    mod = suite_module(name)
    mode = "short" if short else "full"
    print(f"== {name}: preparing ({mode})", flush=True)
    suite_version = mod.prepare(short)
    out: dict[str, list[results.Outcome]] = {}
    for broker in brokers:
        for nodes in mod.nodes(short):
            label = broker if nodes == 1 else f"{broker}-{nodes}nodes"
            print(f"== {name}: against {label}", flush=True)
            t0 = time.monotonic()
            started_at = datetime.now(UTC).isoformat(timespec="seconds")
            with (
                tempfile.TemporaryDirectory(prefix=f"compat-{name}-") as work,
                started(
                    broker, nodes, mod.broker_settings(nodes), data_root=work, log_dirs=getattr(mod, "LOG_DIRS", 1)
                ) as target,
            ):
                outcomes = mod.run(target, short, work)
                version = target.version
            passed = sum(o.status == "pass" for o in outcomes)
            print(f"== {name} on {label}: {passed}/{len(outcomes)} passed", flush=True)
            results.write(
                name,
                label,
                mode,
                outcomes,
                broker_version=version,
                nodes=nodes,
                suite_version=suite_version,
                started=started_at,
                seconds=time.monotonic() - t0,
            )
            out[label] = outcomes
    return out


def verdict(name: str, by_broker: dict[str, list[results.Outcome]]) -> list[str]:
    """Tests failing on logbroker that pass on Kafka (or, without a Kafka run, that fail at all),
    and are not named in the suite's DIFFERENCES."""
    reasons = suite_module(name).DIFFERENCES
    bad = []
    for label, outcomes in by_broker.items():
        if not label.startswith("logbroker"):
            continue
        kafka = {o.test: o.status for o in by_broker.get(label.replace("logbroker", "kafka"), [])}
        for o in outcomes:
            if o.status == "fail" and kafka.get(o.test, "pass") == "pass" and o.test not in reasons:
                bad.append(f"{name} [{label}] {o.test}: {o.detail[-300:]}")
    return bad


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.compat")
    ap.add_argument("suite", choices=[*SUITES, "all"])
    ap.add_argument("--short", action="store_true", help="the short form (what CI runs)")
    ap.add_argument("--broker", choices=[*BROKERS, "both"], default="both")
    ap.add_argument("--report", action="store_true", help="rewrite docs/compatibility.md from build/compat")
    args = ap.parse_args(argv)
    names = list(SUITES) if args.suite == "all" else [args.suite]
    brokers = list(BROKERS) if args.broker == "both" else [args.broker]
    bad: list[str] = []
    for name in names:
        bad += verdict(name, run_suite(name, brokers, args.short))
    if args.report:
        from tests.compat import report

        print(f"== wrote {report.write()}")
    for line in bad:
        print(f"DIFFERENCE WITHOUT A REASON: {line}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
