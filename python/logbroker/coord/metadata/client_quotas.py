"""Client quotas in the metadata image (KIP-13/55, Kafka's ClientQuotaControlManager and
ClientQuotasImage rules): entities, keys, validation and DescribeClientQuotas filters.

An entity is Kafka's: a `user` component, a `client-id` component or both, each a name or
None for the default (`<default>`). In the image (`MetadataImage.client_quotas`) an entity
is a `QuotaEntity`, a sorted tuple of (type, name) pairs, mapped to {key: value}; an entity
with no key left has no entry. The keys logbroker enforces (rust/src/server/quota.rs) are
`producer_byte_rate` and `consumer_byte_rate` (bytes per second: Kafka's LONG keys, whole
numbers above 0) and `request_percentage` (percent of one thread's time, KIP-124: Kafka's
DOUBLE key, any number above 0). Kafka's other keys are refused by name:
`controller_mutation_rate` is not enforced here, and `ip` entities (`connection_creation_rate`)
are not supported.
"""

from __future__ import annotations

from logbroker.protocol import ErrorCode

USER = "user"
CLIENT_ID = "client-id"
IP = "ip"
PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
KEYS = (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE)
DOUBLE_KEYS = (REQUEST_PERCENTAGE,)  # Kafka's ConfigDef.Type.DOUBLE: no LONG bound, fractions allowed
NOT_ENFORCED = ("controller_mutation_rate",)
LONG_MAX = 2**63 - 1

# DescribeClientQuotas match types
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2

QuotaEntity = tuple[tuple[str, "str | None"], ...]


class QuotaError(Exception):
    """A refused entity, key, value or filter: Kafka's error code and a message naming it."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def entity_name(entity) -> str:
    """`user=alice, client-id=<default>` (for messages and logs)."""
    return ", ".join(f"{t}={'<default>' if n is None else n}" for t, n in entity) or "<empty entity>"


def validated_entity(components: list[tuple[str, str | None]]) -> QuotaEntity:
    """The entity of an alteration, or QuotaError (INVALID_REQUEST) as Kafka refuses it."""
    if not components:
        raise QuotaError(ErrorCode.INVALID_REQUEST, "Invalid empty client quota entity")
    seen: dict[str, str | None] = {}
    for entity_type, name in components:
        if entity_type in seen:
            raise QuotaError(
                ErrorCode.INVALID_REQUEST, f"Invalid client quota entity, duplicate entity entry {entity_type}"
            )
        if entity_type == IP:
            raise QuotaError(
                ErrorCode.INVALID_REQUEST,
                f"ip quota entities (ip={name}) are not supported by logbroker; "
                "quotas are set for user and client-id entities",
            )
        if entity_type not in (USER, CLIENT_ID):
            raise QuotaError(ErrorCode.INVALID_REQUEST, f"Unhandled client quota entity type: {entity_type}")
        if name is not None and not name:
            raise QuotaError(ErrorCode.INVALID_REQUEST, f"Empty {entity_type} not supported")
        seen[entity_type] = name
    return tuple(sorted(seen.items()))


def validate_value(entity: QuotaEntity, key: str, value: float) -> None:
    """Refuse (QuotaError, INVALID_REQUEST) a key or value Kafka would, or logbroker does not enforce."""
    where = f"client quota entity {entity_name(entity)}"
    if key in NOT_ENFORCED:
        raise QuotaError(
            ErrorCode.INVALID_REQUEST,
            f"{where}: quota {key} is not enforced by logbroker (supported: {', '.join(KEYS)})",
        )
    if key not in KEYS:
        raise QuotaError(
            ErrorCode.INVALID_REQUEST, f"Invalid configuration key {key} ({where}; supported: {', '.join(KEYS)})"
        )
    if not value > 0.0:  # NaN too (Kafka lets a NaN request_percentage through; it could never be met)
        raise QuotaError(ErrorCode.INVALID_REQUEST, f"Quota {key} must be greater than 0 ({where}: {value})")
    if key in DOUBLE_KEYS:
        return
    if value > LONG_MAX:
        raise QuotaError(ErrorCode.INVALID_REQUEST, f"Proposed value for {key} is too large for a LONG ({where})")
    if abs(value % 1.0) > 1e-6:
        raise QuotaError(ErrorCode.INVALID_REQUEST, f"{key} cannot be a fractional value ({where}: {value})")


def describe_filter(components: list[tuple[str, int, str | None]]) -> tuple[dict[str, str | None], set[str]]:
    """DescribeClientQuotas components (entity type, match type, match) as (exact matches by
    type, types that must be present), or QuotaError as Kafka's ClientQuotasImage refuses them."""
    exact: dict[str, str | None] = {}
    present: set[str] = set()
    for entity_type, match_type, match in components:
        if not entity_type:
            raise QuotaError(ErrorCode.INVALID_REQUEST, "Invalid empty entity type.")
        if entity_type in exact or entity_type in present:
            raise QuotaError(
                ErrorCode.INVALID_REQUEST, f"Entity type {entity_type} cannot appear more than once in the filter."
            )
        if entity_type not in (IP, USER, CLIENT_ID):
            raise QuotaError(ErrorCode.UNSUPPORTED_VERSION, f"Unsupported entity type {entity_type}")
        if match_type == MATCH_EXACT:
            if match is None:
                raise QuotaError(
                    ErrorCode.INVALID_REQUEST, "Request specified MATCH_TYPE_EXACT, but set match string to null."
                )
            exact[entity_type] = match
        elif match_type == MATCH_DEFAULT:
            if match is not None:
                raise QuotaError(
                    ErrorCode.INVALID_REQUEST,
                    "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.",
                )
            exact[entity_type] = None
        elif match_type == MATCH_SPECIFIED:
            if match is not None:
                raise QuotaError(
                    ErrorCode.INVALID_REQUEST,
                    "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.",
                )
            present.add(entity_type)
        else:
            raise QuotaError(ErrorCode.INVALID_REQUEST, f"Unknown match type {match_type}")
    if (IP in exact or IP in present) and ({USER, CLIENT_ID} & (set(exact) | present)):
        raise QuotaError(
            ErrorCode.INVALID_REQUEST,
            "Invalid entity filter component combination. IP filter "
            "component should not be used with user or clientId filter "
            "component.",
        )
    return exact, present


def matches(entity: QuotaEntity, exact: dict[str, str | None], present: set[str], strict: bool) -> bool:
    """Whether `entity` passes a filter (Kafka's ClientQuotasImage.matches)."""
    parts = dict(entity)
    if strict and len(parts) != len(exact) + len(present):
        return False
    return all(t in parts and parts[t] == name for t, name in exact.items()) and all(t in parts for t in present)


def to_json(quotas: dict[QuotaEntity, dict[str, float]]) -> list[dict]:
    return [
        {"entity": [list(c) for c in entity], "quotas": dict(sorted(values.items()))}
        for entity, values in sorted(quotas.items(), key=lambda kv: entity_name(kv[0]))
    ]


def from_json(doc: list[dict]) -> dict[QuotaEntity, dict[str, float]]:
    return {
        tuple((str(t), None if n is None else str(n)) for t, n in e["entity"]): {
            k: float(v) for k, v in e["quotas"].items()
        }
        for e in doc
    }
