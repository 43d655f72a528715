"""The schema registry a broker serves on `schema.registry.listen` (off when empty): the
`_schemas` store (kafka_store.py) tailed through the broker's own listener, and the REST API
(rest.py) on the broker's small HTTP server. Run in the broker's nursery, after its listener."""

from __future__ import annotations

import logging

import trio

from logbroker.broker.http import HttpServer, Response
from logbroker.schema_registry.auth import RegistryAuth
from logbroker.schema_registry.kafka_store import TOPIC, KafkaStore, StoreError
from logbroker.schema_registry.rest import RegistryApi, error_response
from logbroker.schema_registry.state import RegistryState

log = logging.getLogger("logbroker.schema_registry")

MAX_BODY = 4 << 20  # a schema with its JSON envelope
# How long a Produce naming an id this broker does not hold waits for `_schemas` to be read
# to its end before the id is refused (well inside a client's request.timeout.ms, 30 s).
PRODUCE_CATCH_UP_S = 10.0


def _error(status: int, message: str) -> Response:
    return error_response(status, message)


class SchemaRegistryServer:
    def __init__(
        self,
        bootstrap: str,
        replication_factor: int = 1,
        client_config: dict | None = None,
        auth: RegistryAuth | None = None,
        table=None,
    ) -> None:
        """`table`: the broker's data-path partition table, told the ids of every subject (for
        confluent.{key,value}.schema.validation topics) and that a registry runs here."""
        self.state = RegistryState()
        self.table = table
        publish = table.set_subject_schema_ids if table is not None else None
        self.store = KafkaStore(bootstrap, self.state, replication_factor, client_config, publish)
        self.api = RegistryApi(self.state, self.store, auth)
        self.http = HttpServer(self.api.handle, "schema registry", max_body=MAX_BODY, error=_error)

    async def serve(self, host: str, port: int, *, task_status: trio.TaskStatus = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            await nursery.start(self.store.run)
            if self.table is not None:
                nursery.start_soon(self._activate)
            address = await nursery.start(self.http.serve, host, port)
            log.info("schema registry serving on %s://%s:%d", "https" if self.http.tls else "http", *address)
            task_status.started(address)

    async def catch_up_for_produce(self, missing: str, peer: str) -> None:
        """Reads `_schemas` to its end (at most PRODUCE_CATCH_UP_S), for a Produce from `peer`
        naming `missing` (`"<subject> id <id>"`), which this broker's data path does not hold
        yet: another broker's registry may have registered it a moment ago. Never raises:
        when it cannot catch up, the data path refuses the id as it stands."""
        with trio.move_on_after(PRODUCE_CATCH_UP_S) as scope:
            try:
                await self.store.catch_up()
            except StoreError as e:
                log.info("produce from %s names %s, not read yet here: %s", peer, missing, e)
        if scope.cancelled_caught:
            log.info(
                "produce from %s names %s, not read yet here: %s was not read to its end within %.0f s",
                peer,
                missing,
                TOPIC,
                PRODUCE_CATCH_UP_S,
            )

    async def _activate(self) -> None:
        """Schema-validated topics accept records once the registry has read `_schemas`."""
        await self.store.ready.wait()
        self.table.set_schema_registry_active(True)
