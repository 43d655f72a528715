"""Client quotas on the broker: the metadata image's quotas handed to the Rust network
thread, which measures and throttles Produce and Fetch (rust/src/server/quota.rs,
`_core.ClientQuotas`; the rules are in its module doc).

    quota.window.num            windows a byte rate is measured over (default 11)
    quota.window.size.seconds   each window's length (default 1)

The quotas are the image's (`MetadataImage.client_quotas`, written by the controller through
AlterClientQuotas); `apply_metadata` hands the byte rates to Rust after every change.
"""

from __future__ import annotations

import logging

from logbroker import _core
from logbroker.coord.metadata import client_quotas

log = logging.getLogger("logbroker.broker.quotas")


class ClientQuotaPublisher:
    """Keeps the network thread's quotas equal to the metadata image's."""

    def __init__(self, config, core: _core.ClientQuotas) -> None:
        self.core = core
        core.configure(config.get_int("quota.window.num"), config.get_int("quota.window.size.seconds") * 1000)
        self._quotas: dict | None = None

    async def apply_metadata(self, image, delta=None) -> None:
        quotas = getattr(image, "client_quotas", {})
        if quotas is self._quotas or quotas == self._quotas:  # a published image is never changed
            return
        self._quotas = quotas
        self.core.set_quotas(
            [
                (
                    list(entity),
                    values.get(client_quotas.PRODUCER_BYTE_RATE),
                    values.get(client_quotas.CONSUMER_BYTE_RATE),
                )
                for entity, values in quotas.items()
            ]
        )
        log.info(
            "client quotas now: %s",
            "; ".join(
                f"{client_quotas.entity_name(e)}: " + ", ".join(f"{k}={v:g}" for k, v in sorted(vals.items()))
                for e, vals in sorted(quotas.items(), key=lambda kv: client_quotas.entity_name(kv[0]))
            )
            or "none",
        )
