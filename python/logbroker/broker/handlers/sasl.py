"""SaslHandshake (17) and SaslAuthenticate (36): a SASL listener's authentication exchange
(common/sasl.py has the state machine, the mechanisms and these answers, which the
controller listener gives too). Served, and advertised, only
when the client listener is SASL_PLAINTEXT or SASL_SSL; the dispatcher gives these
handlers the connection's `SaslSession` (`ctx.sasl`) and acts on what it records: an
exchange that completed (the network thread learns the principal before the answer goes
out) or failed (the answer goes out, then the connection closes)."""

from __future__ import annotations

from logbroker.common.sasl import AUTHENTICATE_KEY, HANDSHAKE_KEY, handle_authenticate, handle_handshake

ENTRIES = [
    (HANDSHAKE_KEY, 0, 1, handle_handshake),
    (AUTHENTICATE_KEY, 0, 2, handle_authenticate),
]
