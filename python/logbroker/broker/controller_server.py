"""A controller-only node (`process.roles=controller`; Kafka's ControllerServer): one voter
of the controller quorum serving only its CONTROLLER listener. It runs the metadata log,
the controller (active while its Raft node leads: broker sessions and fencing, elections,
every admin change the brokers forward) and the Kafka requests of the controller listener
(coord/metadata/controller_channel.py), and nothing of a broker: no client listener, no partitions,
no groups. It registers as a controller (a RegisterController record), never as a broker,
so no partition is ever placed on it.

    process.roles=controller  node.id=1  listeners=CONTROLLER://host:9093
    controller.quorum.voters=1@host:9093,2@host:9093,3@host:9093

`logbroker serve --roles controller` runs it as the main task (cli/main.py), as `BrokerServer`
runs a broker; the brokers (process.roles=broker) follow the quorum as observers.
"""

from __future__ import annotations

import functools
import logging

import trio

from logbroker import _core
from logbroker.broker.authorizer import AclAuthorizer
from logbroker.broker.dispatch import KafkaServer
from logbroker.broker.fd_limit import raise_open_files_limit
from logbroker.broker.loop_watchdog import LoopWatchdog
from logbroker.common.config import BrokerConfig
from logbroker.coord.metadata.controller import Controller
from logbroker.coord.metadata.controller_channel import serve_kafka_connection
from logbroker.coord.metadata.metadata import BrokerRegistration, MetadataStore
from logbroker.coord.metadata.metadata_quorum import MetadataQuorum, node_cluster_id

log = logging.getLogger("logbroker.controller")


class ControllerServer:
    """The BrokerView of a controller-only node: what handlers on the controller listener
    use (config, controller, quorum, authorizer); the broker's parts are None."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.node_id = config.node_id
        self.controller: Controller | None = None
        self.quorum: MetadataQuorum | None = None
        self.replicas = None
        self.groups = None
        self.transactions = None
        self.add_partitions_to_txn = None
        self.schema_registry = None
        self.share_fetch = None
        self.client_telemetry = None
        self.share_coordinator = None
        self.lifecycle = None
        self.partition_table = _core.PartitionTable()  # holds the Rust authorizer only
        self.authorizer = AclAuthorizer(config, self.partition_table.authorizer)
        self.server = KafkaServer(self)  # serves the controller listener's Kafka frames; binds nothing
        self.address: tuple[str, int] | None = None
        self.advertised: tuple[str, int] | None = None

    @property
    def cluster_id(self) -> str:
        assert self.controller is not None
        return self.controller.image.cluster_id

    async def controlled_shutdown(self) -> None:
        """Before stopping: hand controller leadership to a caught-up voter, if this node
        has it, so the quorum need not wait an election timeout."""
        if self.quorum is not None and self.quorum.is_active:
            await self.quorum.hand_over_leadership(5.0)

    async def run(self, *, task_status: trio.TaskStatus = trio.TASK_STATUS_IGNORED) -> None:
        raise_open_files_limit()
        config = self.config
        config.check_quorum()
        listen = config.controller_listen
        assert listen is not None  # check_quorum insists
        host, port = config.advertised_controller or config.quorum_voters.get(self.node_id) or config.controller_listen
        self.address, self.advertised = listen, (host, port)
        config.data_dir.mkdir(parents=True, exist_ok=True)
        local = BrokerRegistration(self.node_id, host, port, config.get_str("broker.rack") or None)
        store = MetadataStore(config.data_dir)
        quorum = MetadataQuorum(config, local, node_cluster_id(config, store))
        if self.authorizer.enabled:
            quorum.transport.admit = self.authorizer.admit_node
        self.quorum = quorum
        self.controller = Controller(config, store, local, quorum)
        async with trio.open_nursery() as nursery:
            await nursery.start(LoopWatchdog(f"controller {self.node_id}").run)
            quorum.open()
            kafka = functools.partial(
                serve_kafka_connection,
                handle_frame=self.server.handle_frame,
                max_frame=config.get_int("socket.request.max.bytes"),
            )
            await nursery.start(quorum.run, self.controller.on_quorum_image, kafka)
            await quorum.wait_replayed()
            await self.authorizer.apply_metadata(self.controller.image)
            self.controller.add_listener(self.authorizer.apply_metadata)
            await nursery.start(self.controller.sessions.run)
            await nursery.start(self.controller.expire_delegation_tokens)
            log.info(
                "controller %d serving its controller listener on %s:%d, data dir %s, cluster %s",
                self.node_id,
                *listen,
                config.data_dir,
                self.cluster_id,
            )
            task_status.started(listen)
