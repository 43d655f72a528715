"""Closing the two sockets a test relay joins (store_relay, fault_proxy, pyclient_helpers'
proxy): each is shut down before it is closed, so its peer sees the end at once even while
another thread of the relay still blocks reading it."""

from __future__ import annotations

import socket


def shut_and_close(*socks: socket.socket) -> None:
    """Shuts down both directions of each socket and closes it; one already gone is passed over."""
    for s in socks:
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        s.close()
