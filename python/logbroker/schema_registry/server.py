"""The schema registry a broker serves on `schema.registry.listen` (off when empty): the
`_schemas` store (kafka_store.py) tailed through the broker's own listener, and the REST API
(rest.py) on the broker's small HTTP server. Run in the broker's nursery, after its listener."""

from __future__ import annotations

import logging
import os

import trio

from logbroker.broker.http import HttpServer, Response
from logbroker.common.config import BrokerConfig, ConfigError
from logbroker.schema_registry.auth import RegistryAuth
from logbroker.schema_registry.kafka_store import KafkaStore
from logbroker.schema_registry.rest import RegistryApi, error_response
from logbroker.schema_registry.state import RegistryState

log = logging.getLogger("logbroker.schema_registry")

MAX_BODY = 4 << 20  # a schema with its JSON envelope


def _error(status: int, message: str) -> Response:
    return error_response(status, message)


def client_config(config: BrokerConfig) -> dict[str, str]:
    """How the registry's own clients reach the broker's client listener: on SASL, as this
    node reaches the others (BrokerConfig.node_sasl); on TLS, trusting the broker's
    truststore (ssl.truststore.*; none set: the system's CAs, as a Kafka client does),
    checking host names as ssl.endpoint.identification.algorithm says, and presenting the
    broker's keystore where the listener requires client certificates. With an authorizer
    that principal needs to create, read and write `_schemas` (a super user, as the nodes'
    users are)."""
    listener = config.client_listener_name
    protocol = config.security_protocol(listener)
    out: dict[str, str] = {}
    if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
        creds = config.node_sasl(listener)
        if creds is None:
            raise ConfigError(f"schema.registry.listen: the registry reads and writes _schemas through the broker's "
                              f"client listener {listener} ({protocol}), and no SASL user is set for this node there")
        mechanism, user, password = creds
        out.update({"sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password})
    if protocol in ("SSL", "SASL_SSL"):
        out.update(_tls_files(config, listener))
    if protocol != "PLAINTEXT":
        out["security.protocol"] = protocol
    return out


def _tls_files(config: BrokerConfig, listener: str) -> dict[str, str]:
    """The client's TLS keys from the broker's; inline PEM (ssl.truststore.certificates,
    ssl.keystore.certificate.chain and .key) is written to files the client reads, under
    DATA_DIR/__schema_registry_tls, readable by this user only."""
    tls = config.listener_tls(listener)
    assert tls is not None
    chain, key, trust, client_auth = tls
    out = {"ssl.endpoint.identification.algorithm": config.get_str("ssl.endpoint.identification.algorithm")}
    folder = config.data_dir / "__schema_registry_tls"

    def written(name: str, data: bytes) -> str:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        path = folder / name
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        return str(path)

    if trust is not None:
        out["ssl.truststore.location"] = config.get_str("ssl.truststore.location") or written("truststore.pem", trust)
    if client_auth == "required":
        out["ssl.keystore.location"] = config.get_str("ssl.keystore.location") or \
            written("keystore.pem", key + b"\n" + chain)
    return out


class SchemaRegistryServer:
    def __init__(self, bootstrap: str, replication_factor: int = 1, client_config: dict | None = None,
                 auth: RegistryAuth | None = None, table=None) -> None:
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

    async def _activate(self) -> None:
        """Schema-validated topics accept records once the registry has read `_schemas`."""
        await self.store.ready.wait()
        self.table.set_schema_registry_active(True)
