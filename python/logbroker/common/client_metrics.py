"""Client metrics subscriptions (KIP-714): the keys of a CLIENT_METRICS config resource (type
16), their checks, and how a subscription selects clients, as Kafka's ClientMetricsConfigs.

A subscription is a named set of configs kept in the metadata log (Config records of
resource "client-metrics", coord/metadata/config_control.py), changed with IncrementalAlterConfigs or
AlterConfigs and shown by DescribeConfigs (`kafka-client-metrics --alter --name N ...`):

    metrics      list of metric-name prefixes the matching clients push ("" none, "*" all)
    interval.ms  how often they push, 100..3600000 (default 300000)
    match        list of selector=regex, every one must match (none: every client);
                 selectors: client_instance_id, client_id, client_software_name,
                 client_software_version, client_source_address, client_source_port

The checks and their errors are Kafka's (ClientMetricsConfigs.validate, ConfigDef's list
and int parsing): an unknown key or an interval out of bounds is INVALID_REQUEST, a value
that does not parse or a bad match pattern INVALID_CONFIG, each message naming the key and
the value.
"""

from __future__ import annotations

import dataclasses
import re

from logbroker.protocol import ErrorCode

METRICS, INTERVAL_MS, MATCH = "metrics", "interval.ms", "match"
KEYS = (METRICS, INTERVAL_MS, MATCH)
DEFAULTS = {METRICS: "", INTERVAL_MS: "300000", MATCH: ""}
LIST_KEYS = (METRICS, MATCH)
DOCS = {  # Kafka's ConfigDef documentation of each key
    METRICS: "Telemetry metric name prefix list",
    INTERVAL_MS: "Metrics push interval in milliseconds",
    MATCH: "Client match criteria",
}
DEFAULT_INTERVAL_MS = 300_000
MIN_INTERVAL_MS, MAX_INTERVAL_MS = 100, 3_600_000
ALL_METRICS = "*"
SELECTORS = (
    "client_instance_id",
    "client_id",
    "client_software_name",
    "client_software_version",
    "client_source_address",
    "client_source_port",
)


class ClientMetricsConfigError(Exception):
    """A refused client-metrics config: Kafka's error code and message."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def parse_list(key: str, value: str) -> list[str]:
    """A list key's items as Kafka's ConfigDef LIST parses them (comma separated, items
    trimmed, "" is no item); a blank or repeated item is INVALID_CONFIG as its ValidList."""
    value = value.strip()
    if not value:
        return []
    items = [v.strip() for v in value.split(",")]
    if any(not v for v in items):
        raise ClientMetricsConfigError(ErrorCode.INVALID_CONFIG, f"Configuration '{key}' values must not be empty.")
    if len(set(items)) != len(items):
        raise ClientMetricsConfigError(
            ErrorCode.INVALID_CONFIG, f"Configuration '{key}' values must not be duplicated."
        )
    return items


def parse_interval(value: str) -> int:
    try:
        interval = int(value.strip())
        if not -(2**31) <= interval < 2**31:
            raise ValueError(value)
    except ValueError:
        raise ClientMetricsConfigError(
            ErrorCode.INVALID_CONFIG, f"Invalid value {value} for configuration {INTERVAL_MS}: Not a number of type INT"
        ) from None
    return interval


def parse_match(patterns: list[str]) -> dict[str, re.Pattern]:
    """selector -> compiled regex (Kafka's parseMatchingPatterns: split at '=' into exactly
    two parts, a known selector, a regex that compiles)."""
    out: dict[str, re.Pattern] = {}
    for pattern in patterns:
        parts = pattern.split("=")
        while parts and parts[-1] == "":  # Java's String.split drops trailing empty strings
            parts.pop()
        if len(parts) != 2 or parts[0].strip() not in SELECTORS:
            raise ClientMetricsConfigError(ErrorCode.INVALID_CONFIG, f"Illegal client matching pattern: {pattern}")
        try:
            out[parts[0].strip()] = re.compile(parts[1].strip())
        except re.error:
            raise ClientMetricsConfigError(
                ErrorCode.INVALID_CONFIG, f"Illegal client matching pattern: {pattern}"
            ) from None
    return out


def validate(name: str, configs: dict[str, str]) -> dict[str, str]:
    """The subscription `name`'s configs after a change (the keys set; absent ones take
    their defaults), checked as Kafka's ClientMetricsConfigs.validate, normalised (list items
    trimmed and joined with ","; the interval as a number). ClientMetricsConfigError."""
    if not name:
        raise ClientMetricsConfigError(ErrorCode.INVALID_REQUEST, "Subscription name can't be empty")
    for key in configs:
        if key not in KEYS:
            raise ClientMetricsConfigError(ErrorCode.INVALID_REQUEST, f"Unknown client metrics configuration: {key}")
    out: dict[str, str] = {}
    # parsed in ConfigDef order (metrics, interval.ms, match), then the interval's bounds and the patterns
    lists = {}
    interval = None
    for k in KEYS:
        if k in configs:
            if k == INTERVAL_MS:
                interval = parse_interval(configs[k])
            else:
                lists[k] = parse_list(k, configs[k])
    if interval is not None:
        if not MIN_INTERVAL_MS <= interval <= MAX_INTERVAL_MS:
            raise ClientMetricsConfigError(
                ErrorCode.INVALID_REQUEST,
                f"Invalid value {interval} for {INTERVAL_MS}, interval must be between 100 and 3600000 (1 hour)",
            )
        out[INTERVAL_MS] = str(interval)
    if MATCH in lists:
        parse_match(lists[MATCH])
    for k, items in lists.items():
        out[k] = ",".join(items)
    return out


@dataclasses.dataclass(frozen=True)
class Subscription:
    """One client-metrics resource as the broker uses it."""

    name: str
    metrics: frozenset[str]
    interval_ms: int
    match: dict[str, re.Pattern]

    @classmethod
    def from_configs(cls, name: str, configs: dict[str, str]) -> Subscription:
        merged = {**DEFAULTS, **configs}
        return cls(
            name,
            frozenset(parse_list(METRICS, merged[METRICS])),
            parse_interval(merged[INTERVAL_MS]),
            parse_match(parse_list(MATCH, merged[MATCH])),
        )

    def matches(self, attributes: dict[str, str | None]) -> bool:
        """Whether a client with these selector values (None: unknown) is selected: every
        pattern fully matches its attribute, as Kafka's ClientMetricsInstanceMetadata.isMatch;
        no pattern selects every client."""
        for selector, pattern in self.match.items():
            value = attributes.get(selector)
            if value is None or pattern.fullmatch(value) is None:
                return False
        return True
