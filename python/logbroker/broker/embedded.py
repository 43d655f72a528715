"""`Broker`: the broker service on a background thread with its own trio loop, for tests
and notebooks:

    with logbroker.Broker() as broker:        # temp data dir, free port
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
"""

from __future__ import annotations

import shutil
import tempfile
import threading
from pathlib import Path

import trio

from logbroker.broker.service import BrokerServer, start_failure
from logbroker.common.config import BrokerConfig


class Broker:
    """A broker on a background thread: `with Broker() as b: b.bootstrap_servers`.

    data_dir=None uses a temporary directory, removed on exit; port=0 picks a free port.
    Extra keyword arguments are broker config keys with '.' written as '_'
    (`Broker(auto_create_topics_enable=False)`), or pass `config={...}`. `listener="SSL"` makes
    the client listener TLS (with the ssl.* keys, docs/security.md).
    """

    def __init__(
        self,
        data_dir: str | Path | None = None,
        port: int = 0,
        host: str = "127.0.0.1",
        config: dict[str, object] | None = None,
        listener: str = "PLAINTEXT",
        **settings: object,
    ) -> None:
        self._tmp = None
        overrides = {"group.initial.rebalance.delay.ms": "0"}  # tests want groups to form at once
        overrides.update({k: str(v) for k, v in (config or {}).items()})
        overrides.update({k.replace("_", "."): str(v) for k, v in settings.items()})
        if data_dir is None and "log.dirs" in overrides:  # several log directories (JBOD): the first is data_dir
            data_dir = overrides["log.dirs"].split(",")[0].strip()
        else:
            if data_dir is None:
                self._tmp = tempfile.mkdtemp(prefix="logbroker-")
                data_dir = self._tmp
            overrides["log.dirs"] = str(data_dir)
        # `listener`: the client listener's name, e.g. SSL (with the ssl.* keys) for TLS;
        # config={"listeners": "INTERNAL://...,EXTERNAL://..."} gives several instead
        if "listeners" not in overrides:
            overrides["listeners"] = f"{host}:{port}" if listener == "PLAINTEXT" else f"{listener}://{host}:{port}"
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
        """host:port of the client listener, for bootstrap.servers."""
        assert self.address is not None, "broker not started"
        return f"{self.address[0]}:{self.address[1]}"

    @property
    def metrics_url(self) -> str:
        """The Prometheus endpoint (`metrics.listen` set, e.g. `Broker(metrics_listen="127.0.0.1:0")`)."""
        assert self.server is not None and self.server.metrics_address is not None, "metrics.listen is not set"
        host, port = self.server.metrics_address
        return f"{'https' if self.server.metrics.http.tls else 'http'}://{host}:{port}/metrics"

    @property
    def console_url(self) -> str:
        """The web console (`console.listen` set, e.g. `Broker(console_listen="127.0.0.1:0")`)."""
        assert self.server is not None and self.server.console_address is not None, "console.listen is not set"
        host, port = self.server.console_address
        return f"{'https' if self.server.console.http.tls else 'http'}://{host}:{port}/"

    def bootstrap(self, listener: str) -> str:
        """HOST:PORT of the listener named `listener` (of several; `bootstrap_servers` is the
        primary one's)."""
        assert self.server is not None, "broker not started"
        host, port = self.server.listener_addresses[listener.upper()]
        return f"{host}:{port}"

    @property
    def port(self) -> int:
        """The client listener's port (chosen by the OS when the config asked for port 0)."""
        assert self.address is not None
        return self.address[1]

    def start(self, timeout: float = 30.0) -> Broker:
        """Starts the broker in a background thread and waits until it accepts connections (up to
        `timeout` seconds); returns self."""
        self._ready.clear()
        self._error = None
        self._thread = threading.Thread(target=self._thread_main, name="logbroker-broker", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout):
            raise TimeoutError(f"broker did not start within {timeout}s")
        if self._error is not None:
            raise start_failure(self._error)  # the reason, not trio's nursery around it
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
        """Stops the broker (a clean shutdown: logs flushed, clean-shutdown marker written) and waits
        for its thread."""
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
        """Stop cleanly and start again on the same data directory and ports."""
        assert self.server is not None, "broker not started"
        bound = dict(self.server.listener_addresses)
        self.stop()
        listeners = ",".join(f"{name}://{self.config.parse_host(name)}:{port}" for name, (_, port) in bound.items())
        self.config = BrokerConfig({**self.config.explicit, "listeners": listeners})
        return self.start()

    def close(self) -> None:
        """Stops the broker if it runs (idempotent)."""
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
