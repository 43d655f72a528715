"""Iceberg topics in a REST catalog (`iceberg.catalog.type=rest`): a real broker commits into
Apache Iceberg's own REST catalog server (tests/iceberg_rest_catalog.py), which places the
table in its warehouse; pyiceberg's RestCatalog reads the rows back. Exactly once (against
the model of what was produced) holds through an outage of the catalog and a restart of the
broker."""

from __future__ import annotations

import logging
from pathlib import Path

from iceberg_rest_catalog import RecordingProxy, RestCatalogServer
from test_archive import produce_model
from test_iceberg_topics import FAST, rows_of, wait_for

import logbroker
from logbroker import Admin, NewTopic


def rest_rows(uri: str, topic: str) -> dict:
    """The table's rows as pyiceberg's RestCatalog reads them; {} while it cannot (no table
    yet, the server down)."""
    from pyiceberg.catalog.rest import RestCatalog

    try:
        return rows_of(RestCatalog("rest", uri=uri).load_table(f"logbroker.{topic}"), topic)
    except Exception:  # noqa: BLE001 - NoSuchTable, connection refused: not yet
        return {}


def test_rest_catalog_exactly_once_through_a_catalog_outage_and_a_restart(tmp_path: Path, caplog) -> None:
    server = RestCatalogServer(tmp_path / "rest").start()
    keys = {"iceberg.catalog.type": "rest", "iceberg.catalog.uri": server.uri}
    data = tmp_path / "d"
    try:
        with logbroker.Broker(data_dir=data, config=keys, **FAST) as b:
            with Admin(b.bootstrap_servers) as admin:
                admin.create_topics([NewTopic("rt", 2, 1, {"iceberg.enable": "true"})])
            model = produce_model(b.bootstrap_servers, "rt", 2, 200, aborted_every=50)
            wait_for(lambda: rest_rows(server.uri, "rt") == model, what="every committed record in the REST table")

            server.stop()  # commits fail while the catalog is away; the records wait in the log
            with caplog.at_level(logging.ERROR, logger="logbroker"):
                model.update(produce_model(b.bootstrap_servers, "rt", 2, 60))
                wait_for(
                    lambda: any(
                        "Iceberg commit of topic rt" in r.getMessage() and server.uri in r.getMessage()
                        for r in caplog.records
                    ),
                    what="the failed commit logged, naming the catalog",
                )
            server.start()  # the same port, SQLite file and warehouse
            wait_for(lambda: rest_rows(server.uri, "rt") == model, what="the records after the outage")

        with logbroker.Broker(data_dir=data, config=keys, **FAST) as b:  # goes on from the table's position
            model.update(produce_model(b.bootstrap_servers, "rt", 2, 40))
            wait_for(lambda: rest_rows(server.uri, "rt") == model, what="the records after the restart")

        from pyiceberg.catalog.rest import RestCatalog

        table = RestCatalog("rest", uri=server.uri).load_table("logbroker.rt")
        assert table.location().startswith(server.warehouse.as_uri()), table.location()
        assert not (data / "__iceberg").exists()  # the REST catalog placed the table, not the broker
    finally:
        server.stop()


def test_rest_catalog_credentials_and_tokens_reach_the_catalog(tmp_path: Path) -> None:
    """iceberg.catalog.credential: the broker exchanges it for a token at the catalog's
    v1/oauth/tokens (with iceberg.catalog.scope) and sends that token with every request;
    iceberg.catalog.token: sent as it is. Seen by a recording proxy in front of the server;
    DescribeConfigs hides both."""
    import json
    from urllib.parse import parse_qs

    with RestCatalogServer(tmp_path / "rest") as server, RecordingProxy(server.uri) as proxy:
        keys = {
            "iceberg.catalog.type": "rest",
            "iceberg.catalog.uri": proxy.uri,
            "iceberg.catalog.credential": "lb-client:s3cret",
            "iceberg.catalog.scope": "PRINCIPAL_ROLE:ALL",
        }
        with logbroker.Broker(data_dir=tmp_path / "d1", config=keys, **FAST) as b:
            with Admin(b.bootstrap_servers) as admin:
                admin.create_topics([NewTopic("auth1", 1, 1, {"iceberg.enable": "true"})])
                shown = admin.describe_configs([("broker", "1")])[("broker", "1")]
                assert shown["iceberg.catalog.credential"] is None
            model = produce_model(b.bootstrap_servers, "auth1", 1, 20)
            wait_for(lambda: rest_rows(server.uri, "auth1") == model, what="the records through the proxy")
        exchanges = [r for r in proxy.requests if r["path"].endswith("/oauth/tokens")]
        assert exchanges, [r["path"] for r in proxy.requests]
        form = parse_qs(exchanges[0]["body"])
        assert (form["grant_type"], form["client_id"], form["client_secret"], form["scope"]) == (
            ["client_credentials"],
            ["lb-client"],
            ["s3cret"],
            ["PRINCIPAL_ROLE:ALL"],
        )
        issued = json.loads(exchanges[0]["answer"])["access_token"]
        table_calls = [r for r in proxy.requests if "/tables" in r["path"]]
        assert table_calls and {r["auth"] for r in table_calls} == {f"Bearer {issued}"}

        proxy.requests.clear()
        keys = {"iceberg.catalog.type": "rest", "iceberg.catalog.uri": proxy.uri, "iceberg.catalog.token": "tok-123"}
        with logbroker.Broker(data_dir=tmp_path / "d2", config=keys, **FAST) as b:
            with Admin(b.bootstrap_servers) as admin:
                admin.create_topics([NewTopic("auth2", 1, 1, {"iceberg.enable": "true"})])
            model = produce_model(b.bootstrap_servers, "auth2", 1, 20)
            wait_for(lambda: rest_rows(server.uri, "auth2") == model, what="the records with a token")
        table_calls = [r for r in proxy.requests if "/tables" in r["path"]]
        assert table_calls and {r["auth"] for r in table_calls} == {"Bearer tok-123"}
