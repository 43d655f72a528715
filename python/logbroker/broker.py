"""The broker service (`BrokerServer`, a trio task) and the in-process `Broker`.

`BrokerServer.run` follows trio's start protocol: it binds the listener, opens (and
if needed recovers) every local log, and only then calls `task_status.started()`
with the bound address. Cancelling it shuts down cleanly: the listener stops, logs are
flushed and closed (clean-shutdown markers written) and checkpoints are written.

`Broker` runs the same service on a background thread with its own trio loop, for
tests and notebooks:

    with logbroker.Broker() as broker:        # temp data dir, free port
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import threading
from pathlib import Path

import trio

from logbroker import _core
from logbroker.config import BrokerConfig
from logbroker.coord.controller import Controller
from logbroker.coord.group_coordinator import GroupCoordinator
from logbroker.coord.metadata import BrokerRegistration, MetadataStore
from logbroker.replica_manager import ReplicaManager
from logbroker.server import KafkaServer

log = logging.getLogger("logbroker.broker")


class BrokerServer:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.node_id = config.node_id
        self.controller: Controller | None = None
        self.replicas: ReplicaManager | None = None
        self.groups: GroupCoordinator | None = None
        # The partitions Produce and Fetch are served from, shared by the replica manager
        # (which fills it) and the network thread (which serves from it).
        self.partition_table = _core.PartitionTable()
        self.server = KafkaServer(self)
        self.address: tuple[str, int] | None = None
        self.advertised: tuple[str, int] | None = None

    @property
    def cluster_id(self) -> str:
        assert self.controller is not None
        return self.controller.image.cluster_id

    async def run(self, *, task_status: trio.TaskStatus = trio.TASK_STATUS_IGNORED) -> None:
        host, port = self.config.listen
        bound = self.server.bind(host, port, self.partition_table)
        try:
            await self._run(bound, task_status)
        finally:
            self.server.close()
            if self.replicas is not None:
                with trio.CancelScope(shield=True):
                    await self.replicas.shutdown()
                    log.info("broker %d stopped; logs closed and checkpoints written", self.node_id)

    async def _run(self, bound: tuple[str, int], task_status: trio.TaskStatus) -> None:
        self.address = (bound[0], bound[1])
        adv = self.config.get_str("advertised.listeners")
        if adv:
            from logbroker.config import split_host_port

            self.advertised = split_host_port(adv)
        else:
            adv_host = "127.0.0.1" if bound[0] in ("0.0.0.0", "::") else bound[0]
            self.advertised = (adv_host, bound[1])
        data_dir = self.config.data_dir
        data_dir.mkdir(parents=True, exist_ok=True)
        local = BrokerRegistration(self.node_id, self.advertised[0], self.advertised[1], None)
        self.controller = Controller(self.config, MetadataStore(data_dir), local)
        self.replicas = ReplicaManager(self.config, self.partition_table)
        await self.replicas.startup(self.controller.image)
        self.controller.add_listener(self.replicas.apply_metadata)
        self.groups = GroupCoordinator(self.config, self.replicas, self.controller)
        await self.groups.startup()
        async with trio.open_nursery() as nursery:
            await nursery.start(self.replicas.run_background)
            await nursery.start(self.groups.run)
            await nursery.start(self.server.serve)
            log.info(
                "broker %d serving on %s:%d (advertised %s:%d), data dir %s, cluster %s, %d partition(s)",
                self.node_id, *self.address, *self.advertised, data_dir, self.cluster_id,
                len(self.replicas.partitions),
            )
            task_status.started(self.address)


class Broker:
    """A broker on a background thread: `with Broker() as b: b.bootstrap_servers`.

    data_dir=None uses a temporary directory, removed on exit; port=0 picks a free port.
    Extra keyword arguments are broker config keys with '.' written as '_'
    (`Broker(auto_create_topics_enable=False)`), or pass `config={...}`.
    """

    def __init__(
        self,
        data_dir: str | Path | None = None,
        port: int = 0,
        host: str = "127.0.0.1",
        config: dict[str, object] | None = None,
        **settings: object,
    ) -> None:
        self._tmp = None
        if data_dir is None:
            self._tmp = tempfile.mkdtemp(prefix="logbroker-")
            data_dir = self._tmp
        overrides = {"group.initial.rebalance.delay.ms": "0"}  # tests want groups to form at once
        overrides.update({k: str(v) for k, v in (config or {}).items()})
        overrides.update({k.replace("_", "."): str(v) for k, v in settings.items()})
        overrides["log.dirs"] = str(data_dir)
        overrides["listeners"] = f"{host}:{port}"
        self.config = BrokerConfig(overrides)
        self.data_dir = Path(data_dir)
        self.server: BrokerServer | None = None
        self._thread: threading.Thread | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._cancel: trio.CancelScope | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self.address: tuple[str, int] | None = None

    @property
    def bootstrap_servers(self) -> str:
        assert self.address is not None, "broker not started"
        return f"{self.address[0]}:{self.address[1]}"

    @property
    def port(self) -> int:
        assert self.address is not None
        return self.address[1]

    def start(self, timeout: float = 30.0) -> Broker:
        self._ready.clear()
        self._error = None
        self._thread = threading.Thread(target=self._thread_main, name="logbroker-broker", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout):
            raise TimeoutError(f"broker did not start within {timeout}s")
        if self._error is not None:
            raise self._error
        return self

    def _thread_main(self) -> None:
        async def main() -> None:
            self._token = trio.lowlevel.current_trio_token()
            server = BrokerServer(self.config)
            self.server = server
            with trio.CancelScope() as scope:
                self._cancel = scope
                async with trio.open_nursery() as nursery:
                    self.address = await nursery.start(server.run)
                    self._ready.set()

        try:
            trio.run(main)
        except BaseException as e:  # surfaced to start() or stop()
            self._error = e
        finally:
            self._ready.set()

    def stop(self, timeout: float = 30.0) -> None:
        if self._thread is None:
            return
        if self._token is not None and self._cancel is not None:
            try:
                trio.from_thread.run_sync(self._cancel.cancel, trio_token=self._token)
            except trio.RunFinishedError:
                pass
        self._thread.join(timeout)
        self._thread = None
        if self._error is not None and not isinstance(self._error, trio.Cancelled):
            err, self._error = self._error, None
            raise err

    def restart(self) -> Broker:
        """Stop cleanly and start again on the same data directory and port."""
        port = self.port
        self.stop()
        self.config = BrokerConfig({**self.config.explicit, "listeners": f"{self.config.listen[0]}:{port}"})
        return self.start()

    def close(self) -> None:
        try:
            self.stop()
        finally:
            if self._tmp is not None:
                shutil.rmtree(self._tmp, ignore_errors=True)
                self._tmp = None

    def __enter__(self) -> Broker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
