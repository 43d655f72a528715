"""The broker: everything `logbroker serve` runs, as one package.

    service.py          BrokerServer, the trio service (listener, logs, groups, controller)
    embedded.py         Broker: the service on a background thread (tests, notebooks)
    dispatch.py         request dispatch over the Rust network thread (rust/src/server)
    handlers/           one module per Kafka API the control plane serves
    replica_manager.py  the local replicas: open, delete, retention, flush, checkpoints
    partition.py        one local replica: log, leader state, HW (mirrored into Rust)
    authorizer.py       the ACLs of the image handed to the Rust authorizer

The control plane it drives (controller, metadata image, group coordinator) is in
`logbroker.coord`; what both use (configuration keys, storage errors, the ACL vocabulary,
SASL) in `logbroker.common`; the client in `logbroker.client`; Spark in `logbroker.spark`.
Module dependencies point one way: common <- coord <- partition, replica_manager,
handlers <- dispatch <- service <- embedded (tests/test_layout.py). `Broker` and
`BrokerServer` are exported lazily, so importing the package loads nothing else.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from logbroker.broker.embedded import Broker
    from logbroker.broker.service import BrokerServer

__all__ = ["Broker", "BrokerServer"]


def __getattr__(name: str) -> Any:
    if name == "Broker":
        from logbroker.broker.embedded import Broker

        return Broker
    if name == "BrokerServer":
        from logbroker.broker.service import BrokerServer

        return BrokerServer
    raise AttributeError(f"module 'logbroker.broker' has no attribute {name!r}")
