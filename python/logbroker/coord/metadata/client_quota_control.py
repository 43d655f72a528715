"""The client quota control manager (Kafka's ClientQuotaControlManager): AlterClientQuotas
as ClientQuota records, one per key that changes (client_quotas.py has the entities and
the rules for values).

Pure (see control.py).
"""

from __future__ import annotations

from logbroker.coord.metadata import client_quotas
from logbroker.coord.metadata.control import ControllerResult
from logbroker.coord.metadata.metadata import MetadataImage
from logbroker.coord.metadata.metadata_records import encode_record
from logbroker.protocol import ErrorCode

Components = list[tuple[str, str | None]]
# (entity components as sent, error, message) per entry, in order
EntryResult = tuple[Components, ErrorCode, str | None]


class ClientQuotaControlManager:
    def alter(
        self, image: MetadataImage, entries: list[tuple[Components, list[tuple[str, float, bool]]]]
    ) -> ControllerResult[list[EntryResult]]:
        """AlterClientQuotas: per entry (entity components, [(key, value, remove)]). Kafka's
        rules: the entity must be valid (client_quotas.validated_entity), a key named twice in
        one entry or an entity named twice in the request is INVALID_REQUEST, a value set
        must be valid for its key; removing a key that is not set changes nothing. A refused
        entry changes nothing; the accepted ones are written together."""
        results: list[EntryResult] = []
        changes: dict[tuple, dict[str, float | None]] = {}
        named: dict[tuple, int] = {}
        for components, _ops in entries:
            try:
                e = client_quotas.validated_entity(components)
                named[e] = named.get(e, 0) + 1
            except client_quotas.QuotaError:
                pass
        for components, ops in entries:
            try:
                entity = client_quotas.validated_entity(components)
                if named[entity] > 1:  # every entry of it refused, none applied
                    raise client_quotas.QuotaError(
                        ErrorCode.INVALID_REQUEST, f"Ignoring duplicate entity {client_quotas.entity_name(entity)}"
                    )
                wanted: dict[str, float | None] = {}
                for key, value, remove in ops:
                    if key in wanted:
                        raise client_quotas.QuotaError(
                            ErrorCode.INVALID_REQUEST,
                            f"Duplicate quota key {key} not updating quota for "
                            f"this entity {client_quotas.entity_name(entity)}",
                        )
                    if not remove:
                        client_quotas.validate_value(entity, key, value)
                    wanted[key] = None if remove else float(value)
            except client_quotas.QuotaError as e:
                results.append((components, e.code, e.message))
                continue
            changes[entity] = wanted
            results.append((components, ErrorCode.NONE, None))
        records, lines = [], []
        for entity, wanted in changes.items():
            current = image.client_quotas.get(entity, {})
            for key, value in wanted.items():
                if value is None and key in current:
                    records.append(
                        encode_record("ClientQuota", entity=[list(c) for c in entity], key=key, value=0.0, remove=True)
                    )
                elif value is not None and current.get(key) != value:
                    records.append(
                        encode_record(
                            "ClientQuota", entity=[list(c) for c in entity], key=key, value=value, remove=False
                        )
                    )
            lines.append(
                (
                    f"client quotas of {client_quotas.entity_name(entity)}: "
                    + (
                        ", ".join(f"{k} {'removed' if v is None else f'= {v:g}'}" for k, v in wanted.items())
                        or "unchanged"
                    ),
                    {},
                )
            )
        return ControllerResult(records, results, lines)
