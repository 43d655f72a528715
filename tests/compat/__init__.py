"""The ecosystem's own suites as judges: each suite runs against logbroker and against Apache
Kafka (benches/peers), and every test's outcome on each broker is recorded side by side.

Layout:
- `brokers.py`: start logbroker or Apache Kafka (one node or a three-node cluster) with the
  settings a suite asks for; both come from the bench harness (benches/peers).
- `results.py`: one JSON file per suite, broker and mode under build/compat/, the record a
  report is rendered from.
- one module per suite: `librdkafka.py`, `franz_go.py`, `kafka_tools.py`. Each has
  `prepare(short) -> dict` (fetch and build, pinned, cached; returns the suite's version
  facts), `nodes(short) -> list[int]` (cluster sizes to run on, e.g. [1] or [1, 3]),
  `broker_settings(nodes) -> dict[str, str]` (broker config the suite needs, the same on both
  brokers), `run(target, short, workdir) -> list[Outcome]` and `DIFFERENCES: dict[str, str]`
  (test name -> why its outcome differs between the brokers, or fails on both: what the test
  exercises, what each broker does, why logbroker's answer is right or what is left; a
  difference without a reason fails the run).
- `report.py`: docs/compatibility.md's tables, from build/compat/*.json.
- `__main__.py`: `python -m tests.compat SUITE|all [--short] [--broker logbroker|kafka|both]`
  (scripts/compat wraps it).

The short form of each suite (`--short`, against logbroker) runs in CI through
tests/test_compat_<suite>.py; the full form is a command of its own (docs/compatibility.md).
"""
