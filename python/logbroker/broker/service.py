"""The broker service (`BrokerServer`, a trio task).

`BrokerServer.run` follows trio's start protocol: it binds the listener (the Rust network
thread), opens (and if needed recovers) every local log, and only then calls
`task_status.started()` with the bound address. Cancelling it shuts down cleanly: the
listener stops, logs are flushed and closed (clean-shutdown markers written) and
checkpoints are written. `logbroker serve` runs it as the main task; `Broker`
(embedded.py) runs it on a background thread.
"""

from __future__ import annotations

import functools
import logging

import trio

from logbroker import _core
from logbroker.broker import http_tls, own_clients
from logbroker.broker.add_partitions_to_txn import AddPartitionsToTxnManager
from logbroker.broker.audit_log import AuditLog
from logbroker.broker.authorizer import AclAuthorizer
from logbroker.broker.client_telemetry import ClientTelemetryManager
from logbroker.broker.dispatch import KafkaServer
from logbroker.broker.fd_limit import raise_open_files_limit
from logbroker.broker.http_basic_auth import BasicAuth
from logbroker.broker.loop_watchdog import LoopWatchdog
from logbroker.broker.metrics import MetricsServer
from logbroker.broker.quotas import ClientQuotaPublisher
from logbroker.broker.replica_manager import ReplicaManager
from logbroker.broker.share_dead_letters import DeadLetterWriter
from logbroker.broker.share_fetch import ShareFetchManager
from logbroker.broker.share_persister import SharePersister
from logbroker.common.config import BrokerConfig, ConfigError
from logbroker.common.sasl import jaas_users
from logbroker.coord.groups.group_coordinator import GroupCoordinator
from logbroker.coord.groups.share_coordinator import ShareCoordinator
from logbroker.coord.groups.transaction_coordinator import TransactionCoordinator
from logbroker.coord.metadata.broker_lifecycle import BrokerLifecycle
from logbroker.coord.metadata.controller import Controller
from logbroker.coord.metadata.controller_channel import serve_kafka_connection
from logbroker.coord.metadata.metadata import BrokerRegistration, MetadataStore
from logbroker.coord.metadata.metadata_quorum import MetadataQuorum, node_cluster_id

log = logging.getLogger("logbroker.broker")


def start_failure(e: BaseException) -> BaseException:
    """The exception that stopped a start, out of the trio nursery groups wrapped around
    it (a group of one is unwrapped; anything else is returned as it is)."""
    while isinstance(e, BaseExceptionGroup) and len(e.exceptions) == 1:
        e = e.exceptions[0]
    return e


class BrokerServer:
    """One broker node inside a trio program: `await nursery.start(BrokerServer(config).run)`
    (`Broker` runs it in a thread; `logbroker serve` runs it as the process)."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.node_id = config.node_id
        self.controller: Controller | None = None
        self.replicas: ReplicaManager | None = None
        self.groups: GroupCoordinator | None = None
        self.transactions: TransactionCoordinator | None = None
        self.add_partitions_to_txn: AddPartitionsToTxnManager | None = None
        self.metrics: MetricsServer | None = None
        self.metrics_address: tuple[str, int] | None = None  # bound `metrics.listen`
        self.console = None  # ConsoleServer, when `console.listen` is set (logbroker/console)
        self.console_address: tuple[str, int] | None = None  # bound `console.listen`
        self.schema_registry = None  # SchemaRegistryServer, when `schema.registry.listen` is set
        self.schema_registry_address: tuple[str, int] | None = None  # bound `schema.registry.listen`
        self.share_fetch: ShareFetchManager | None = None
        self.share_coordinator: ShareCoordinator | None = None
        # The partitions Produce and Fetch are served from, shared by the replica manager
        # (which fills it) and the network thread (which serves from it).
        self.partition_table = _core.PartitionTable()
        self.authorizer = AclAuthorizer(config, self.partition_table.authorizer)
        self.client_quotas = ClientQuotaPublisher(config, self.partition_table.client_quotas)
        # KIP-714: the clients' metrics subscriptions and what they push (shown on metrics.listen)
        self.client_telemetry = ClientTelemetryManager(config.get_int("telemetry.max.bytes"))
        # audit.log.file / audit.log.topic (broker/audit_log.py); None when neither is set
        self.audit: AuditLog | None = AuditLog.from_config(config)
        self.server = KafkaServer(self)
        self.address: tuple[str, int] | None = None  # the primary (inter-broker) listener's
        self.listener_addresses: dict[str, tuple[str, int]] = {}  # every listener's bound address
        self.advertised: tuple[str, int] | None = None
        self.quorum: MetadataQuorum | None = None  # the metadata log (set by run)
        self.lifecycle: BrokerLifecycle | None = None  # heartbeats

    async def controlled_shutdown(self) -> None:
        """Before stopping a cluster node: move its partition leaderships (and, if it is the
        active controller, controller leadership) to other nodes; bounded, see
        coord/metadata/broker_lifecycle.py. A single node has no one to hand them to."""
        if self.lifecycle is not None:
            await self.lifecycle.controlled_shutdown()

    def _basic_auth(self, method: str, endpoint: str = "") -> BasicAuth:
        """HTTP Basic with this broker's users: the listeners' PLAIN users and the SCRAM
        credentials of the metadata image (broker/http_basic_auth.py); each check of the
        `endpoint` ("metrics", "schema_registry") goes to the audit log, if any."""
        cfg = self.config
        audit = self.audit
        hook = (
            None
            if audit is None or not endpoint
            else (
                lambda outcome, principal, peer, reason: audit.authentication(
                    outcome, principal, peer, endpoint, "HTTP-BASIC", reason
                )
            )
        )
        return BasicAuth(
            method,
            lambda: {
                u: pw
                for name, _h, _p in cfg.client_listeners
                for u, pw in jaas_users(cfg.jaas_config("PLAIN", name)).items()
            },
            lambda user, mechanism: self.controller.image.scram_credential(user, mechanism),
            hook,
        )

    def _console_server(self):
        """The web console. On a broker with a SASL client listener it has logins
        (console/sessions.py): each user's requests are made as that user on a SASL listener
        (the primary one if it is SASL, else the first), its own clients (throughput) on the
        primary listener as this node (its user there, if SASL); without one, a client of the
        primary listener with no login."""
        from logbroker.console import ConsoleServer
        from logbroker.console.sessions import Sessions

        cfg = self.config
        primary = cfg.client_listener_name
        sasl = [
            name for name, _h, _p in cfg.listeners_primary_first() if cfg.security_protocol(name).startswith("SASL_")
        ]
        # tiered storage: each partition's remote size, from this broker's metadata image
        remote_sizes = self.replicas.remote.remote_size_of if self.replicas is not None else None
        if not sasl:
            return ConsoleServer(
                "{}:{:d}".format(*self.advertised),
                self.node_id,
                own_clients.client_config(cfg, "console.listen"),
                remote_sizes=remote_sizes,
            )
        login_listener = sasl[0]
        host, port = cfg.advertised(login_listener) or self.listener_addresses[login_listener]
        sessions = Sessions(
            self._basic_auth("BASIC").mechanisms,
            cfg.get_str("sasl.enabled.mechanisms").split(","),
            cfg.get_int("console.session.timeout.ms") / 1000,
        )
        try:
            own: dict[str, str] | None = own_clients.client_config(cfg, "console.listen")
        except ConfigError as e:
            log.info("console: throughput is not sampled: %s", e)
            own = None
        token_login = None
        if "OAUTHBEARER" in cfg.get_str("sasl.enabled.mechanisms").split(","):
            validator = self.server._oauthbearer_validator(login_listener)
            token_login = validator.validate
        return ConsoleServer(
            "{}:{:d}".format(*self.advertised),
            self.node_id,
            own,
            sessions,
            lambda login: own_clients.client_config(cfg, "console.listen", login, login_listener),
            token_login,
            self.audit,
            login_bootstrap=f"{host}:{port}" if login_listener != primary else None,
            remote_sizes=remote_sizes,
        )

    @property
    def cluster_id(self) -> str:
        """The cluster id (from meta.properties / the metadata log)."""
        assert self.controller is not None
        return self.controller.image.cluster_id

    def _network_stall(self) -> tuple[float, int] | None:
        """The network thread's current turn (the loop watchdog's `network`); None unbound."""
        net = self.server.net
        return net.loop_stall() if net is not None else None

    async def run(self, *, task_status: trio.TaskStatus = trio.TASK_STATUS_IGNORED) -> None:
        """Runs the broker until cancelled: opens the logs, joins the controller quorum, serves the
        listeners; `task_status.started()` once it accepts connections."""
        raise_open_files_limit()  # every partition's log needs descriptors: the soft limit up to the hard one
        self.listener_addresses = self.server.bind(self.partition_table)
        try:
            await self._run(self.listener_addresses[self.config.client_listener_name], task_status)
        finally:
            self.server.close()
            if self.replicas is not None:
                with trio.CancelScope(shield=True):
                    await self.replicas.shutdown()
                    log.info("broker %d stopped; logs closed and checkpoints written", self.node_id)

    async def _run(self, bound: tuple[str, int], task_status: trio.TaskStatus) -> None:
        self.address = (bound[0], bound[1])
        adv = self.config.advertised_client
        if adv is not None:
            self.advertised = adv
        else:
            adv_host = "127.0.0.1" if bound[0] in ("0.0.0.0", "::") else bound[0]
            self.advertised = (adv_host, bound[1])
        data_dir = self.config.data_dir
        data_dir.mkdir(parents=True, exist_ok=True)
        if self.audit is not None:
            await self.audit.open()  # an unusable audit.log.file stops the start here
        local = BrokerRegistration(
            self.node_id, self.advertised[0], self.advertised[1], self.config.get_str("broker.rack") or None
        )
        if len(self.listener_addresses) > 1:  # clients of each listener are told its address
            for name, (host, port) in self.listener_addresses.items():
                adv = self.config.advertised(name)
                local.endpoints[name] = (
                    list(adv) if adv is not None else ["127.0.0.1" if host in ("0.0.0.0", "::") else host, port]
                )
        self.config.check_quorum()
        store = MetadataStore(data_dir)
        quorum = MetadataQuorum(self.config, local, node_cluster_id(self.config, store))
        if self.authorizer.enabled:
            quorum.transport.admit = self.authorizer.admit_node
        self.quorum = quorum
        self.controller = Controller(self.config, store, local, quorum)
        self.replicas = ReplicaManager(self.config, self.partition_table)
        async with trio.open_nursery() as nursery:
            await nursery.start(LoopWatchdog(f"broker {self.node_id}", network=self._network_stall).run)
            # the data directory checked (node_cluster_id), open the metadata log and replay
            # what this node knows is committed, so local logs open against that image
            quorum.open()
            kafka = functools.partial(
                serve_kafka_connection,
                handle_frame=self.server.handle_frame,
                max_frame=self.config.get_int("socket.request.max.bytes"),
            )
            await nursery.start(quorum.run, self.controller.on_quorum_image, kafka)
            await quorum.wait_replayed()
            await self.controller.migrate_legacy_image()
            if quorum.single_voter:  # it leads: its registration commits at once, before clients come
                with trio.fail_after(30):
                    await quorum.registered.wait()
            await self.controller.ensure_bootstrap()  # on the active controller: a new log's feature levels
            image = self.controller.image
            await self.authorizer.apply_metadata(image)
            self.controller.add_listener(self.authorizer.apply_metadata)
            await self.client_quotas.apply_metadata(image)
            self.controller.add_listener(self.client_quotas.apply_metadata)
            await self.replicas.startup(image)
            self.controller.add_listener(self.replicas.apply_metadata)
            if self.controller.image is not image:  # records applied while the logs opened
                await self.replicas.apply_metadata(self.controller.image)
            self.groups = GroupCoordinator(self.config, self.replicas, self.controller)
            await self.groups.startup()
            dead_letters = DeadLetterWriter(self.config, self.controller, self.node_id)
            await nursery.start(dead_letters.run)
            self.share_coordinator = ShareCoordinator(self.config, self.replicas, self.controller)
            await self.share_coordinator.startup()
            persister = SharePersister(self.config, self.controller, self.share_coordinator)
            self.share_fetch = ShareFetchManager(self.config, self.replicas, self.controller, persister, dead_letters)
            await nursery.start(self.share_fetch.run)
            self.groups.share.on_member_left = self.share_fetch.release_member
            self.transactions = TransactionCoordinator(self.config, self.replicas, self.controller, self.groups)
            await nursery.start(self.transactions.run)
            await self.transactions.startup()
            self.add_partitions_to_txn = AddPartitionsToTxnManager(self.node_id, self.controller, self.transactions)
            await nursery.start(self.add_partitions_to_txn.run)
            await nursery.start(self.replicas.run_background)
            await nursery.start(self.groups.run)
            self.lifecycle = BrokerLifecycle(
                self.controller, quorum, self.config.get_int("broker.heartbeat.interval.ms")
            )
            await nursery.start(self.controller.sessions.run)
            await nursery.start(self.controller.expire_delegation_tokens)
            await nursery.start(self.lifecycle.run)
            self.replicas.replication.quorum = quorum
            self.replicas.remote.quorum = quorum
            self.replicas.replication.alter_isr = self.lifecycle.alter_partitions
            await nursery.start(self.replicas.replication.run)
            await nursery.start(self.server.serve)
            if self.audit is not None:  # lines recorded before this wait in memory
                await nursery.start(self.audit.run, "{}:{:d}".format(*self.advertised))
            metrics_listen = self.config.http_endpoint("metrics.listen")
            if metrics_listen:
                host, port, _tls = metrics_listen
                self.metrics = MetricsServer(self)
                self.metrics.http.tls = http_tls.server_context(self.config, "metrics.listen")
                if self.config.http_authentication("metrics.authentication.method") == "BASIC":
                    self.metrics.auth = self._basic_auth("BASIC", "metrics")
                    self.metrics.authorize = self.authorizer.authorize if self.authorizer.enabled else None
                self.metrics_address = await nursery.start(self.metrics.serve, host, port)
            console_listen = self.config.http_endpoint("console.listen")
            if console_listen:
                host, port, _tls = console_listen
                self.console = self._console_server()
                self.console.http.tls = http_tls.server_context(self.config, "console.listen")
                self.console_address = await nursery.start(self.console.serve, host, port)
            registry_listen = self.config.http_endpoint("schema.registry.listen")
            if registry_listen:
                # loads avro and jsonschema only when asked for
                from logbroker.schema_registry.auth import RegistryAuth
                from logbroker.schema_registry.server import SchemaRegistryServer

                host, port, _tls = registry_listen
                cfg = self.config
                auth = RegistryAuth(
                    self._basic_auth(
                        cfg.http_authentication("schema.registry.authentication.method"), "schema_registry"
                    ),
                    self.authorizer.authorize if self.authorizer.enabled else None,
                )
                self.schema_registry = SchemaRegistryServer(
                    "{}:{:d}".format(*self.advertised),
                    cfg.get_int("schema.registry.topic.replication.factor"),
                    own_clients.client_config(cfg, "schema.registry.listen"),
                    auth,
                    self.replicas.table,
                )
                self.schema_registry.http.tls = http_tls.server_context(cfg, "schema.registry.listen")
                self.schema_registry_address = await nursery.start(self.schema_registry.serve, host, port)
                self.replicas.iceberg.registry = self.schema_registry
            log.info(
                "broker %d serving on %s:%d (advertised %s:%d), data dir %s, cluster %s, %d partition(s)",
                self.node_id,
                *self.address,
                *self.advertised,
                data_dir,
                self.cluster_id,
                len(self.replicas.partitions),
            )
            task_status.started(self.address)
