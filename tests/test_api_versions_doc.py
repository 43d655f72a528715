"""docs/compatibility.md's table of API versions (tests/compat/api_versions.py) against this
checkout's broker: its logbroker column is exactly what ApiVersions answers, so a version
raised or an API added shows up as a failure until the table is generated again."""

from __future__ import annotations

from logbroker import Broker
from tests.compat.api_versions import api_versions, table_in_doc


def test_the_api_versions_table_is_what_the_broker_answers(tmp_path):
    with Broker(data_dir=tmp_path) as b:
        served = api_versions(b.bootstrap_servers)
    documented = table_in_doc()
    assert served, "ApiVersions answered no API"
    changed = {k: (documented.get(k), v) for k, v in served.items() if documented.get(k) != v}
    gone = sorted(set(documented) - set(served))
    assert not changed and not gone, (
        f"(documented, served) by API key: {changed}; documented but not served: {gone}. "
        "Run `python -m tests.compat.api_versions --report` and state why any API is below Kafka's."
    )
