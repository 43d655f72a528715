"""A TCP relay in front of an object store that can hold every request: an upload in flight
when a broker is killed (tests/test_cluster_tiered_storage.py), or an outage the brokers
cannot tell from a store that stopped answering (benches/tiered_acceptance.py)."""

from __future__ import annotations

import socket
import threading

from socket_close import shut_and_close


class StallingRelay:
    """A TCP relay in front of the object store that can hold every request (bytes from the
    brokers wait, on open connections and new ones) until `heal()`: an upload in flight."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.go = threading.Event()
        self.go.set()
        self.held: list[bytes] = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def stall(self) -> None:
        self.held.clear()
        self.go.clear()

    def heal(self) -> None:
        self.go.set()

    def _accept(self) -> None:
        while True:
            try:
                a, _ = self.listener.accept()
            except OSError:
                return
            b = socket.create_connection(self.upstream)
            threading.Thread(target=self._pump, args=(a, b, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(b, a, False), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, requests: bool) -> None:
        try:
            while data := src.recv(65536):
                if requests and not self.go.is_set():
                    self.held.append(data[:64])
                    self.go.wait()
                dst.sendall(data)
        except OSError:
            pass
        finally:
            shut_and_close(src, dst)

    def close(self) -> None:
        self.heal()
        self.listener.close()
