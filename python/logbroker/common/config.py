"""Broker and topic configuration.

Keys use Apache Kafka's names. A broker reads, in order of precedence (last wins):
built-in defaults, a Java-properties file (`--config FILE`), and `--set key=value`
overrides. Unknown keys and values that do not parse are rejected at start-up with an
error that names the key, the value and what was expected; a broker never starts on a
configuration it half understood.

Topic-level keys (`segment.bytes`, `retention.ms`, ...) are resolved per topic: a
topic's own override (CreateTopics configs, IncrementalAlterConfigs) wins over the
broker default (`log.segment.bytes`, `log.retention.ms`, ...), which wins over
Kafka's default.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import importlib.util
import re
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path

from logbroker.common import directory_id
from logbroker.common.kerberos_name import parse_rules
from logbroker.common.sasl import node_credentials


class ConfigError(ValueError):
    """A configuration key or value that the broker cannot accept."""


LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1


def _to_str(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _parse_int(lo: int = -(2**63), hi: int = LONG_MAX) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(str(text).strip())
        except ValueError:
            raise ConfigError(f"expected an integer, got {text!r}") from None
        if not lo <= value <= hi:
            raise ConfigError(f"value {value} is outside [{lo}, {hi}]")
        return value

    return parse


def _parse_float(lo: float, hi: float) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = float(str(text).strip())
        except ValueError:
            raise ConfigError(f"expected a number, got {text!r}") from None
        if not lo <= value <= hi:
            raise ConfigError(f"value {value} is outside [{lo}, {hi}]")
        return value

    return parse


def _parse_list(values: tuple[str, ...]) -> Callable[[str], str]:
    """A comma-separated list of `values` (blank items ignored): at least one, each at most
    once; the value is the items sorted (cleanup.policy=delete,compact -> compact,delete)."""

    def parse(text: str) -> str:
        parts = sorted(p.strip() for p in str(text).split(",") if p.strip())
        if not parts or any(p not in values for p in parts) or len(set(parts)) != len(parts):
            raise ConfigError(
                f"expected a comma-separated list of {', '.join(values)} (each at most once), got {text!r}"
            )
        return ",".join(parts)

    return parse


def _parse_bool(text: str) -> bool:
    t = str(text).strip().lower()
    if t in ("true", "1", "yes"):
        return True
    if t in ("false", "0", "no"):
        return False
    raise ConfigError(f"expected true or false, got {text!r}")


def _parse_archive(text: str) -> bool:
    """retention.archive: a boolean, and true only where pyarrow (the `archive` extra) is installed."""
    on = _parse_bool(text)
    if on and importlib.util.find_spec("pyarrow") is None:
        raise ConfigError("retention.archive needs pyarrow on the broker: pip install 'logbroker[archive]'")
    return on


def _parse_iceberg(text: str) -> bool:
    """iceberg.enable: a boolean, and true only where pyiceberg (the `iceberg` extra) is installed."""
    on = _parse_bool(text)
    if on and (importlib.util.find_spec("pyiceberg") is None or importlib.util.find_spec("pyarrow") is None):
        raise ConfigError("iceberg.enable needs pyiceberg and pyarrow on the broker: pip install 'logbroker[iceberg]'")
    return on


_PARTITION_TRANSFORMS = ("identity", "year", "month", "day", "hour", "void", "bucket", "truncate")


def partition_spec_fields(text: str) -> list[tuple[str, int | None, str]]:
    """iceberg.partition.spec as (transform, width or None, column) per field: Iceberg
    transforms separated by commas, each `t(column)` or, for bucket and truncate,
    `t(N, column)`; empty: unpartitioned. Whether the columns exist is the table's to say
    (logbroker/iceberg/table_schema.py), when it is created. ConfigError names the field."""
    fields = []
    for part in (p.strip() for p in re.findall(r"[^,()]*\([^()]*\)|[^,\s][^,]*", str(text).strip())):
        m = re.fullmatch(r"(\w+)\s*\(\s*(?:(\d+)\s*,\s*)?([\w.]+)\s*\)", part)
        if m is None or m.group(1).lower() not in _PARTITION_TRANSFORMS:
            raise ConfigError(
                f"{part!r} is not an Iceberg transform of a column: day(timestamp), hour(timestamp), "
                f"identity(partition), bucket(16, value.id), truncate(4, key), year, month, void"
            )
        name, width = m.group(1).lower(), m.group(2)
        if (name in ("bucket", "truncate")) != (width is not None) or width == "0":
            raise ConfigError(f"{part!r}: bucket and truncate take a positive width first, the others none")
        fields.append((name, int(width) if width is not None else None, m.group(3)))
    return fields


def _parse_partition_spec(text: str) -> str:
    partition_spec_fields(text)
    return str(text).strip()


def _parse_str(text: str) -> str:
    return str(text).strip()


def _parse_choice(*choices: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        t = str(text).strip()
        if t not in choices:
            raise ConfigError(f"expected one of {', '.join(choices)}, got {text!r}")
        return t

    return parse


RACK_AWARE_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
LEADER_SELECTOR = "org.apache.kafka.common.replica.LeaderSelector"


def _parse_replica_selector(text: str) -> str:
    t = text.strip()
    if t not in ("", RACK_AWARE_SELECTOR, LEADER_SELECTOR):
        raise ConfigError(
            f"replica.selector.class {text!r} is not one of the selectors logbroker has: "
            f"{RACK_AWARE_SELECTOR}, {LEADER_SELECTOR} (or empty)"
        )
    return t


def _parse_http_endpoint(text: str) -> str:
    """Empty, HOST:PORT or http://HOST:PORT (plain HTTP), or https://HOST:PORT (TLS with the
    broker's keystore: broker/http_tls.py); port 0: any free port."""
    text = str(text).strip()
    if not text:
        return ""
    scheme = text.split("://", 1)[0].lower() if "://" in text else "http"
    if scheme not in ("http", "https"):
        raise ConfigError(f"expected HOST:PORT, http://HOST:PORT or https://HOST:PORT, got {text!r}")
    host, port = split_host_port(text)
    return f"https://{host}:{port}" if scheme == "https" else f"{host}:{port}"


def _parse_optional_hostport(text: str) -> str:
    """Empty, or HOST:PORT (port 0: any free port)."""
    text = str(text).strip()
    if not text:
        return ""
    host, port = split_host_port(text)
    return f"{host}:{port}"


DEFAULT_PROTOCOL_MAP = (
    "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT"
)
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


def parse_protocol_map(text: str) -> dict[str, str]:
    """`listener.security.protocol.map`: NAME:PROTOCOL,... -> {NAME: PROTOCOL}."""
    out: dict[str, str] = {}
    for part in str(text).split(","):
        part = part.strip()
        if not part:
            continue
        name, sep, proto = part.partition(":")
        name, proto = name.strip().upper(), proto.strip().upper()
        if not sep or not name or proto not in SECURITY_PROTOCOLS:
            raise ConfigError(f"{part!r} is not NAME:PROTOCOL with PROTOCOL one of {', '.join(SECURITY_PROTOCOLS)}")
        out[name] = proto
    return out


def _parse_protocol_map(text: str) -> str:
    return ",".join(f"{n}:{p}" for n, p in parse_protocol_map(text).items())


SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI")
NODE_SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")  # how nodes log in to each other
# Per-listener SASL settings, Kafka's form: listener.name.<listener, lower case>.<mechanism,
# lower case>.sasl.jaas.config (PLAIN's user_<name>="<password>" entries; common/sasl.py).
LISTENER_JAAS_KEY = re.compile(
    r"^listener\.name\.([a-z0-9_]+)\.(plain|scram-sha-256|scram-sha-512|oauthbearer|gssapi)\.sasl\.jaas\.config$"
)
# Which OAUTHBEARER validator a listener uses (Kafka's key and class names; common/oauthbearer.py).
LISTENER_OAUTH_HANDLER_KEY = re.compile(
    r"^listener\.name\.([a-z0-9_]+)\.oauthbearer\.sasl\.server\.callback\.handler\.class$"
)
OAUTH_JWKS_HANDLERS = (
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler",
)
OAUTH_UNSECURED_HANDLER = (
    "org.apache.kafka.common.security.oauthbearer.internals.unsecured.OAuthBearerUnsecuredValidatorCallbackHandler"
)
# One listener's ssl.client.auth (Kafka's listener prefix); on a SASL_SSL listener only this
# form applies (KIP-684), so SASL clients need no certificate when SSL listeners require one.
LISTENER_CLIENT_AUTH_KEY = re.compile(r"^listener\.name\.([a-z0-9_]+)\.ssl\.client\.auth$")
# Options of tiered storage's object store (Kafka's remote.log.storage.manager.impl.prefix):
# any broker key starting with it, passed to the store without it
# (BrokerConfig.remote_storage_options), e.g. rsm.config.aws_endpoint, rsm.config.aws_region.
REMOTE_STORAGE_OPTION_PREFIX = "rsm.config."
# Words that make a key's value a secret (sensitive_key); "key" too, but not "key_id"
# (aws_access_key_id names a key, it is not one).
_SECRET_WORDS = ("secret", "password", "token", "sas", "credential", "private")


def _looks_secret(name: str) -> bool:
    words = name.lower().replace(".", "_").replace("-", "_")
    return any(w in words for w in _SECRET_WORDS) or "key" in words.replace("key_id", "")


def sensitive_key(name: str) -> bool:
    """Whether broker key `name` holds a secret, never shown (DescribeConfigs answers it with
    a null value and is_sensitive, as Kafka's PASSWORD keys) nor logged: a password key of
    the table, a listener's JAAS config, or an rsm.config.* option whose name has secret,
    password, token, sas, credential, private or key in it (not key_id: rsm.config.aws_access_key_id
    is shown, rsm.config.aws_secret_access_key is not)."""
    spec = BROKER_KEYS.get(name)
    if spec is not None:
        return spec.sensitive
    if LISTENER_JAAS_KEY.match(name):
        return True
    if name.startswith(REMOTE_STORAGE_OPTION_PREFIX):
        return _looks_secret(name[len(REMOTE_STORAGE_OPTION_PREFIX) :])
    return False


def _parse_mechanisms(text: str) -> str:
    names = [m.strip().upper() for m in str(text).split(",") if m.strip()]
    for m in names:
        if m not in SASL_MECHANISMS:
            raise ConfigError(f"SASL mechanism {m!r} is not served; choose from {', '.join(SASL_MECHANISMS)}")
    if not names:
        raise ConfigError("sasl.enabled.mechanisms is empty")
    return ",".join(names)


def _parse_node_mechanism(text: str) -> str:
    """sasl.mechanism.inter.broker.protocol, sasl.mechanism.controller.protocol: one mechanism."""
    m = str(text).strip().upper()
    if m not in NODE_SASL_MECHANISMS:
        raise ConfigError(
            f"SASL mechanism {text!r} is not one nodes authenticate with (GSSAPI and OAUTHBEARER are "
            f"not); choose from {', '.join(NODE_SASL_MECHANISMS)}"
        )
    return m


def _parse_listener(text: str) -> str:
    """`HOST:PORT`, or Kafka's list of `NAME://HOST:PORT` (e.g. PLAINTEXT://h:9092,CONTROLLER://h:9093)."""
    ls = parse_listeners(text)
    if len(ls) == 1 and "://" not in str(text):
        host, port = ls["PLAINTEXT"]
        return f"{host}:{port}"
    return ",".join(f"{name}://{host}:{port}" for name, (host, port) in ls.items())


def parse_listeners(text: str) -> dict[str, tuple[str, int]]:
    """Listener name -> (host, port); a bare HOST:PORT is the PLAINTEXT listener."""
    out: dict[str, tuple[str, int]] = {}
    for part in str(text).split(","):
        part = part.strip()
        if not part:
            continue
        name = part.split("://", 1)[0].strip().upper() if "://" in part else "PLAINTEXT"
        if name in out:
            raise ConfigError(f"listener name {name} appears twice in {text!r}")
        out[name] = split_host_port(part)
    if not out:
        raise ConfigError("no listener given")
    return out


def _parse_advertised(text: str) -> str:
    if text.strip():
        parse_listeners(text)  # raises ConfigError naming the bad entry
    return text.strip()


def _parse_voters(text: str) -> str:
    voters = parse_voters(text)
    return ",".join(f"{n}@{h}:{p}" for n, (h, p) in voters.items())


def _parse_host_ports(text: str) -> str:
    return ",".join(f"{h}:{p}" for h, p in parse_host_ports(text))


def parse_host_ports(text: str) -> list[tuple[str, int]]:
    """`HOST:PORT,...` -> [(host, port)] (empty: none)."""
    return [split_host_port(part.strip()) for part in str(text).split(",") if part.strip()]


def parse_voters(text: str) -> dict[int, tuple[str, int]]:
    """`controller.quorum.voters`: `ID@HOST:PORT,...` -> {id: (host, port)} (empty: none)."""
    out: dict[int, tuple[str, int]] = {}
    for part in str(text).split(","):
        part = part.strip()
        if not part:
            continue
        ident, sep, addr = part.partition("@")
        if not sep:
            raise ConfigError(f"voter {part!r} is not ID@HOST:PORT")
        try:
            n = int(ident)
        except ValueError:
            raise ConfigError(f"voter id {ident!r} in {part!r} is not a number") from None
        if n < 0 or n in out:
            raise ConfigError(f"voter id {n} in {text!r} is negative or appears twice")
        out[n] = split_host_port(addr)
    return out


def _parse_roles(text: str) -> str:
    roles = {r.strip() for r in str(text).split(",") if r.strip()}
    if not roles or not roles <= {"broker", "controller"}:
        raise ConfigError(f"process.roles must be broker, controller or both, got {text!r}")
    return ",".join(sorted(roles))


def split_host_port(text: str) -> tuple[str, int]:
    t = str(text).strip()
    if "://" in t:
        t = t.split("://", 1)[1]
    if "," in t:
        raise ConfigError(f"expected one HOST:PORT, got {text!r}")
    host, sep, port_text = t.rpartition(":")
    if not sep:
        raise ConfigError(f"expected HOST:PORT, got {text!r}")
    host = host.strip("[]") or "0.0.0.0"
    try:
        port = int(port_text)
    except ValueError:
        raise ConfigError(f"port in {text!r} is not a number") from None
    if not 0 <= port <= 65535:
        raise ConfigError(f"port {port} in {text!r} is outside [0, 65535]")
    return host, port


REMOTE_STORAGE_SCHEMES = ("s3", "gs", "az", "file")


def _parse_remote_storage_url(text: str) -> str:
    """remote.log.storage.url: empty, s3://BUCKET[/PREFIX], gs://BUCKET[/PREFIX],
    az://CONTAINER[/PREFIX] or file:///ABSOLUTE/DIR (trailing slashes dropped)."""
    t = str(text).strip()
    if not t:
        return ""
    scheme, sep, rest = t.partition("://")
    scheme = scheme.lower()
    if not sep or scheme not in REMOTE_STORAGE_SCHEMES:
        raise ConfigError(
            "expected s3://BUCKET/PREFIX, gs://BUCKET/PREFIX, az://CONTAINER/PREFIX or "
            f"file:///ABSOLUTE/DIR, got {text!r}"
        )
    if any(c.isspace() for c in rest):
        raise ConfigError(f"{text!r} has white space")
    if scheme == "file":
        if not rest.startswith("/"):
            raise ConfigError(f"a file:// URL names an absolute directory, file:///ABSOLUTE/DIR, got {text!r}")
        return "file://" + ("/" + rest.strip("/") if rest.strip("/") else "/")
    bucket, _, prefix = rest.partition("/")
    if not bucket:
        raise ConfigError(f"{text!r} names no {'container' if scheme == 'az' else 'bucket'}")
    prefix = prefix.strip("/")
    return f"{scheme}://{bucket}/{prefix}" if prefix else f"{scheme}://{bucket}"


def _parse_kerberos_rules(text: str) -> str:
    """sasl.kerberos.principal.to.local.rules: each rule must parse (common/kerberos_name.py)."""
    try:
        parse_rules([r for r in str(text).split(",") if r.strip()])
    except ValueError as e:
        raise ConfigError(str(e)) from None
    return str(text)


_PARSERS: dict[str, Callable[[str], object]] = {
    # Named parsers the table refers to (`parser = "..."`) for values its types cannot check.
    "host_port_or_empty": _parse_optional_hostport,
    "http_endpoint": _parse_http_endpoint,
    "listeners": _parse_listener,
    "advertised_listeners": _parse_advertised,
    "process_roles": _parse_roles,
    "quorum_voters": _parse_voters,
    "host_ports": _parse_host_ports,
    "protocol_map": _parse_protocol_map,
    "sasl_mechanisms": _parse_mechanisms,
    "sasl_mechanism": _parse_node_mechanism,
    "kerberos_rules": _parse_kerberos_rules,
    "replica_selector": _parse_replica_selector,
    "archive": _parse_archive,
    "iceberg": _parse_iceberg,
    "partition_spec": _parse_partition_spec,
    "remote_storage_url": _parse_remote_storage_url,
}

CONFIG_KEYS_TABLE = Path(__file__).with_name("config_keys.toml")
KEY_TYPES = ("int", "long", "double", "bool", "string", "password", "choice", "list")
_TYPE_RANGE = {"int": (-(2**31), INT_MAX), "long": (-(2**63), LONG_MAX), "double": (float("-inf"), float("inf"))}
_FIELDS = {"name", "type", "default", "min", "max", "values", "parser", "topic", "engine", "group", "dynamic", "doc"}


@dataclasses.dataclass(frozen=True)
class ConfigKey:
    """One broker key, as its row of config_keys.toml."""

    name: str
    parse: Callable[[str], object]
    default: str  # as text, what a config file would say
    doc: str
    type: str = "string"  # one of KEY_TYPES
    min: int | float | None = None  # inclusive bounds of int, long and double keys
    max: int | float | None = None
    values: tuple[str, ...] = ()  # allowed values of a choice, or of a list's items
    topic_key: str | None = None  # the topic-level key this broker key sets the default of
    group_key: str | None = None  # the group-level key (Kafka's GroupConfig) this broker key sets the default of
    engine: bool = False  # the Rust log engine reads topic_key (LogConfig)
    dynamic: bool = False  # changes without a restart though no topic key (Kafka's listener-reconfigurable keys)

    @property
    def sensitive(self) -> bool:
        """A secret: DescribeConfigs answers it with a null value and is_sensitive, as Kafka's PASSWORD
        keys."""
        return self.type == "password"


def _key_from_row(row: dict) -> ConfigKey:
    """One [[key]] of the table as a ConfigKey; ValueError naming the key for a bad row."""
    name = row.get("name")
    where = f"{CONFIG_KEYS_TABLE.name}: key {name!r}"
    if not isinstance(name, str) or not name:
        raise ValueError(f"{where}: no name")
    unknown = set(row) - _FIELDS
    if unknown:
        raise ValueError(f"{where}: unknown fields {sorted(unknown)}")
    kind, default = row.get("type"), row.get("default")
    if kind not in KEY_TYPES:
        raise ValueError(f"{where}: type {kind!r} is not one of {', '.join(KEY_TYPES)}")
    if not isinstance(row.get("doc"), str) or not row["doc"]:
        raise ValueError(f"{where}: no doc")
    lo, hi = row.get("min"), row.get("max")
    if (lo is not None or hi is not None) and kind not in _TYPE_RANGE:
        raise ValueError(f"{where}: min and max are for int, long and double keys")
    values = tuple(row.get("values", ()))
    if bool(values) != (kind in ("choice", "list") and "parser" not in row):
        raise ValueError(f"{where}: values are for (and needed by) choice and list keys without a parser")
    types: dict[str, type | tuple[type, ...]] = {"int": int, "long": int, "double": (int, float), "bool": bool}
    expected = types.get(kind, str)
    if not isinstance(default, expected) or (kind != "bool" and isinstance(default, bool)):
        raise ValueError(f"{where}: default {default!r} is not a {kind}")
    if kind in _TYPE_RANGE:
        type_lo, type_hi = _TYPE_RANGE[kind]
        lo = type_lo if lo is None else lo
        hi = type_hi if hi is None else hi
        if not type_lo <= lo <= hi <= type_hi:
            raise ValueError(f"{where}: bounds [{lo}, {hi}] are not within a {kind}'s [{type_lo}, {type_hi}]")
    if "parser" in row:
        if row["parser"] not in _PARSERS:
            raise ValueError(f"{where}: no parser {row['parser']!r} in config.py's _PARSERS")
        parse = _PARSERS[row["parser"]]
    elif kind in ("int", "long"):
        parse = _parse_int(lo, hi)  # type: ignore[arg-type]
    elif kind == "double":
        parse = _parse_float(lo, hi)  # type: ignore[arg-type]
    elif kind == "bool":
        parse = _parse_bool
    elif kind == "choice":
        parse = _parse_choice(*values)
    elif kind == "list":
        parse = _parse_list(values)
    else:
        parse = _parse_str
    if row.get("engine") and not row.get("topic"):
        raise ValueError(f"{where}: engine keys are topic-level keys (set topic)")
    text = _to_str(default)
    try:
        parse(text)
    except ConfigError as e:
        raise ValueError(f"{where}: default {text!r} does not parse: {e}") from None
    return ConfigKey(
        name,
        parse,
        text,
        row["doc"],
        kind,
        lo,
        hi,
        values,
        row.get("topic"),
        row.get("group"),
        bool(row.get("engine", False)),
        bool(row.get("dynamic", False)),
    )


def load_config_keys(path: Path = CONFIG_KEYS_TABLE) -> list[ConfigKey]:
    """Every row of the table (config_keys.toml), checked: one row per name, per topic key
    and per group key."""
    with path.open("rb") as f:
        rows = tomllib.load(f)["key"]
    keys = [_key_from_row(row) for row in rows]
    for what in ("name", "topic_key", "group_key"):
        seen = [getattr(k, what) for k in keys if getattr(k, what)]
        dup = sorted({n for n in seen if seen.count(n) > 1})
        if dup:
            raise ValueError(f"{path.name}: {what} {', '.join(dup)} appears more than once")
    return keys


_BROKER_KEYS: list[ConfigKey] = load_config_keys()

BROKER_KEYS: dict[str, ConfigKey] = {k.name: k for k in _BROKER_KEYS}

# Aliases Kafka users type; mapped onto the canonical key.
_ALIASES = {
    "broker.id": "node.id",
    "log.dir": "log.dirs",
    "log.roll.hours": "log.roll.ms",
    "log.retention.hours": "log.retention.ms",
    "log.retention.minutes": "log.retention.ms",
    "delegation.token.master.key": "delegation.token.secret.key",
}
_ALIAS_SCALE = {"log.roll.hours": 3_600_000, "log.retention.hours": 3_600_000, "log.retention.minutes": 60_000}

# Topic-level keys: name -> (parser, broker key giving the default).
TOPIC_KEYS: dict[str, tuple[Callable[[str], object], str]] = {
    k.topic_key: (k.parse, k.name) for k in _BROKER_KEYS if k.topic_key
}
# Group-level keys (IncrementalAlterConfigs on a GROUP resource): name -> (parser, broker key giving the default).
GROUP_KEYS: dict[str, tuple[Callable[[str], object], str]] = {
    k.group_key: (k.parse, k.name) for k in _BROKER_KEYS if k.group_key
}
# Broker keys that change without a restart (IncrementalAlterConfigs on a BROKER resource,
# per broker or as the cluster default; the metadata log holds them): the broker defaults of
# topic configs, as Kafka's DynamicLogConfig, and the keys the table marks `dynamic` (read
# where they are used, e.g. sasl.kerberos.principal.to.local.rules at each GSSAPI login).
DYNAMIC_BROKER_KEYS: frozenset[str] = frozenset(broker_key for _parse, broker_key in TOPIC_KEYS.values()) | {
    k.name for k in _BROKER_KEYS if k.dynamic
}
# Topic keys the Rust log engine reads (the table's `engine = true`; rust/src/config_keys.rs
# is generated from the same rows): engine_config hands these to `_core.Log`. The other topic
# keys are broker-side policies.
LOG_ENGINE_KEYS: tuple[str, ...] = tuple(k.topic_key for k in _BROKER_KEYS if k.engine and k.topic_key)


def parse_properties(text: str, source: str) -> dict[str, str]:
    """Parse Java-properties text (key=value or key: value, # and ! comments)."""
    out: dict[str, str] = {}
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        for sep in ("=", ":"):
            if sep in line:
                key, value = line.split(sep, 1)
                break
        else:
            raise ConfigError(f"{source}:{lineno}: expected key=value, got {raw!r}")
        out[key.strip()] = value.strip()
    return out


class BrokerConfig:
    """Resolved broker configuration: every key in BROKER_KEYS has a parsed value."""

    def __init__(self, overrides: dict[str, str] | None = None) -> None:
        self.explicit: dict[str, str] = {}
        values: dict[str, object] = {k: v.parse(v.default) for k, v in BROKER_KEYS.items()}
        for key, text in (overrides or {}).items():
            canonical = _ALIASES.get(key, key)
            spec = BROKER_KEYS.get(canonical)
            if spec is None and LISTENER_CLIENT_AUTH_KEY.match(canonical):
                try:
                    self.explicit[canonical] = BROKER_KEYS["ssl.client.auth"].parse(text)
                except ConfigError as e:
                    raise ConfigError(f"configuration key {key!r} = {text!r}: {e}") from None
                continue
            if spec is None and LISTENER_JAAS_KEY.match(canonical):
                self.explicit[canonical] = str(text)  # a secret: never in DescribeConfigs
                continue
            if spec is None and LISTENER_OAUTH_HANDLER_KEY.match(canonical):
                if str(text).strip() not in (*OAUTH_JWKS_HANDLERS, OAUTH_UNSECURED_HANDLER):
                    raise ConfigError(
                        f"configuration key {key!r} = {text!r}: the OAUTHBEARER validators served are "
                        f"{OAUTH_JWKS_HANDLERS[0]} (JWTs checked against "
                        f"sasl.oauthbearer.jwks.endpoint.url) and {OAUTH_UNSECURED_HANDLER} (tests)"
                    )
                self.explicit[canonical] = str(text).strip()
                continue
            if spec is None and canonical.startswith(REMOTE_STORAGE_OPTION_PREFIX):
                if canonical == REMOTE_STORAGE_OPTION_PREFIX:
                    raise ConfigError(
                        f"configuration key {key!r}: name an option of the object store after it, e.g. "
                        f"{REMOTE_STORAGE_OPTION_PREFIX}aws_region"
                    )
                self.explicit[canonical] = str(text).strip()  # checked by the object store; maybe a secret
                continue
            if spec is None:
                shown = "[hidden]" if _looks_secret(canonical) else repr(text)
                raise ConfigError(f"unknown configuration key {key!r} (value {shown})")
            try:
                value = spec.parse(text)
            except ConfigError as e:
                raise ConfigError(f"configuration key {key!r} = {text!r}: {e}") from None
            if key in _ALIAS_SCALE:
                value = int(value) * _ALIAS_SCALE[key]  # type: ignore[arg-type]
            values[canonical] = value
            self.explicit[canonical] = str(value)
        self._static = values
        self._values = dict(values)
        # dynamic broker configs from the metadata log (set_dynamic): the cluster default, this broker's
        self.dynamic_default: dict[str, str] = {}
        self.dynamic_broker: dict[str, str] = {}
        if self.get_bool("remote.log.storage.system.enable") and not self.get_str("remote.log.storage.url"):
            raise ConfigError(
                "remote.log.storage.system.enable=true needs remote.log.storage.url, where tiered storage "
                "puts segments (s3://BUCKET/PREFIX, gs://BUCKET/PREFIX, az://CONTAINER/PREFIX or "
                "file:///ABSOLUTE/DIR)"
            )
        self.check_tiered_storage_defaults()

    def with_dynamic(self, cluster_default: dict[str, str], this_broker: dict[str, str]) -> BrokerConfig:
        """A copy of this configuration with these dynamic broker configs instead of its own
        (`set_dynamic`); this one is left as it is (the controller checks a change with it)."""
        other = copy.copy(self)
        other.set_dynamic(cluster_default, this_broker)
        return other

    def set_dynamic(self, cluster_default: dict[str, str], this_broker: dict[str, str]) -> list[str]:
        """Dynamic broker configs (already checked by the controller): this broker's
        override a cluster default, which overrides the static value. Returns the keys whose
        value changed; a value that no longer parses is left out (logged by the caller)."""
        values = dict(self._static)
        for layer in (cluster_default, this_broker):
            for key, text in layer.items():
                spec = BROKER_KEYS.get(key)
                if spec is not None and key in DYNAMIC_BROKER_KEYS:
                    values[key] = spec.parse(text)
        changed = sorted(k for k in values if values[k] != self._values.get(k))
        self.dynamic_default, self.dynamic_broker = dict(cluster_default), dict(this_broker)
        self._values = values
        return changed

    @classmethod
    def load(cls, config_file: str | None = None, sets: list[str] | None = None, **kwargs: object) -> BrokerConfig:
        """The configuration from a properties file, --set style `key=value` strings and keyword
        arguments (later ones win), validated: ConfigError names any bad key or value."""
        merged: dict[str, str] = {}
        if config_file:
            path = Path(config_file)
            try:
                text = path.read_text()
            except OSError as e:
                raise ConfigError(f"cannot read config file {path}: {e.strerror}") from None
            merged.update(parse_properties(text, str(path)))
        for item in sets or []:
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise ConfigError(f"--set expects key=value, got {item!r}")
            merged[key.strip()] = value.strip()
        for key, value in kwargs.items():
            if value is not None:
                merged[key] = str(value)
        return cls(merged)

    def __getitem__(self, key: str) -> object:
        return self._values[key]

    def get_int(self, key: str) -> int:
        """The value of `key` as an int."""
        return int(self._values[key])  # type: ignore[arg-type]

    def get_bool(self, key: str) -> bool:
        """The value of `key` as a bool."""
        return bool(self._values[key])

    def get_str(self, key: str) -> str:
        """The value of `key` as a string."""
        return str(self._values[key])

    @property
    def node_id(self) -> int:
        """This node's id (node.id)."""
        return self.get_int("node.id")

    @property
    def data_dir(self) -> Path:
        """The metadata directory: the first of log.dirs (Kafka's metadata.log.dir default)."""
        dirs = self.log_dirs
        if not dirs:
            raise ConfigError(f"log.dirs names no directory: {self.get_str('log.dirs')!r}")
        return dirs[0]

    @property
    def log_dirs(self) -> list[Path]:
        """Every log directory (log.dirs, comma-separated; broker/log_dirs.py)."""
        return [Path(d.strip()) for d in self.get_str("log.dirs").split(",") if d.strip()]

    @property
    def listen(self) -> tuple[str, int]:
        """The client listener's (host, port)."""
        return parse_listeners(self.get_str("listeners"))[self.client_listener_name]

    @property
    def client_listener_name(self) -> str:
        """The broker's primary listener: `inter.broker.listener.name`, else PLAINTEXT, else
        the first that is not the controller's. Brokers reach each other on it, its address
        is the broker's registration, and the network thread binds it first."""
        names = [name for name, _, _ in self.client_listeners]
        chosen = self.get_str("inter.broker.listener.name").upper()
        if chosen:
            if chosen not in names:
                raise ConfigError(
                    f"inter.broker.listener.name={chosen} is not one of the listeners {self.get_str('listeners')!r}"
                )
            return chosen
        return "PLAINTEXT" if "PLAINTEXT" in names else names[0]

    @functools.cached_property
    def client_listeners(self) -> list[tuple[str, str, int]]:
        """Every listener but the controller's: (name, host, port), in `listeners` order."""
        ctl = self.get_str("controller.listener.names").upper()
        out = [(name, h, p) for name, (h, p) in parse_listeners(self.get_str("listeners")).items() if name != ctl]
        if not out:
            raise ConfigError(f"listeners={self.get_str('listeners')!r} has no listener for clients")
        return out

    def parse_host(self, listener: str) -> str:
        """The host a listener binds (as configured)."""
        return next(h for name, h, _ in self.client_listeners if name == listener)

    def listeners_primary_first(self) -> list[tuple[str, str, int]]:
        """`client_listeners` with the primary listener first (the network thread's order)."""
        primary = self.client_listener_name
        return sorted(self.client_listeners, key=lambda listener: listener[0] != primary)

    def advertised(self, listener: str) -> tuple[str, int] | None:
        """The advertised (host, port) of a listener (`advertised.listeners`; None: the bound one)."""
        adv = self.get_str("advertised.listeners").strip()
        if not adv:
            return None
        if "://" not in adv:
            return split_host_port(adv) if listener == self.client_listener_name else None
        return parse_listeners(adv).get(listener)

    def security_protocol(self, listener: str) -> str:
        """The security protocol of a listener (`listener.security.protocol.map`)."""
        protocols = parse_protocol_map(self.get_str("listener.security.protocol.map"))
        if listener in protocols:
            return protocols[listener]
        if listener in SECURITY_PROTOCOLS:
            return listener
        raise ConfigError(
            f"listener {listener} has no security protocol in listener.security.protocol.map="
            f"{self.get_str('listener.security.protocol.map')!r}"
        )

    @functools.cached_property
    def client_sasl(self) -> bool:
        """Whether any client listener authenticates with SASL (SASL_PLAINTEXT, SASL_SSL)."""
        return any(self.security_protocol(name).startswith("SASL_") for name, _, _ in self.client_listeners)

    def http_authentication(self, key: str) -> str:
        """An HTTP endpoint's authentication method (`metrics.authentication.method`,
        `schema.registry.authentication.method`): as set, else BASIC on a broker with a SASL
        listener (its users then log in everywhere) and NONE on one without."""
        return self.get_str(key) or ("BASIC" if self.client_sasl else "NONE")

    def oauthbearer_jwks(self, listener: str) -> bool:
        """Whether `listener` checks OAUTHBEARER tokens against the JWKS (KIP-768) rather than
        with Kafka's unsecured validator: its callback handler class when set, else whether
        sasl.oauthbearer.jwks.endpoint.url is. ConfigError when the JWKS validator has no URL."""
        key = f"listener.name.{listener.lower()}.oauthbearer.sasl.server.callback.handler.class"
        handler = self.explicit.get(key)
        url = self.get_str("sasl.oauthbearer.jwks.endpoint.url")
        if handler is None:
            return bool(url)
        if handler in OAUTH_JWKS_HANDLERS and not url:
            raise ConfigError(f"{key}={handler} checks tokens against a JWKS: set sasl.oauthbearer.jwks.endpoint.url")
        return handler in OAUTH_JWKS_HANDLERS

    def jaas_config(self, mechanism: str, listener: str) -> str:
        """`listener.name.<listener>.<mechanism>.sasl.jaas.config` ('' when unset)."""
        return self.explicit.get(f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config", "")

    def node_sasl(self, listener: str) -> tuple[str, str, str] | None:
        """How this node authenticates to other nodes' `listener` (the inter-broker or the
        controller listener): (mechanism, user, password) when it is SASL_PLAINTEXT or
        SASL_SSL, else None. Kafka's keys: the mechanism is sasl.mechanism.controller.protocol
        on the controller listener, sasl.mechanism.inter.broker.protocol on the others; the user
        and password are the username= and password= options of
        listener.name.<listener>.<mechanism>.sasl.jaas.config. ConfigError naming the key."""
        protocol = self.security_protocol(listener)
        if not protocol.startswith("SASL_"):
            return None
        controller = listener == self.get_str("controller.listener.names").upper()
        key = "sasl.mechanism.controller.protocol" if controller else "sasl.mechanism.inter.broker.protocol"
        mechanism = self.get_str(key)
        enabled = self.get_str("sasl.enabled.mechanisms").split(",")
        if mechanism not in enabled:
            raise ConfigError(
                f"{key}={mechanism} must be in sasl.enabled.mechanisms ({','.join(enabled)}) when "
                f"listener {listener} is {protocol}: nodes authenticate to each other on it"
            )
        if controller and mechanism != "PLAIN":
            raise ConfigError(
                f"{key}={mechanism}: the controller listener {listener} authenticates nodes with PLAIN "
                "only. SCRAM users are stored in the metadata log, which the controllers can read only "
                "once they reach each other; use PLAIN with the nodes' users as user_<name> entries of "
                f"listener.name.{listener.lower()}.plain.sasl.jaas.config (over SASL_SSL to keep the "
                "password off the wire)"
            )
        jaas_key = f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
        jaas = self.jaas_config(mechanism, listener)
        if not jaas:
            raise ConfigError(
                f"listener {listener} is {protocol} between nodes: set {jaas_key} with this node's "
                f'username="..." password="..." ({mechanism} login module, as Kafka)'
            )
        try:
            user, password = node_credentials(jaas)
        except ValueError as e:
            raise ConfigError(f"{jaas_key}: {e}") from None
        return mechanism, user, password

    def check_listeners(self) -> None:
        """What a broker cannot serve yet: ConfigError naming the listener and why. (Each
        listener's TLS files are read, and checked, once, by `listener_tls` when binding.)"""
        primary = self.client_listener_name
        protocol = self.security_protocol(primary)
        if self.in_cluster:
            self.node_sasl(primary)  # checks mechanism and credentials of a SASL inter-broker listener
            self.node_sasl(self.get_str("controller.listener.names").upper())
        if protocol == "SSL" and self.get_str("console.listen") and not self.client_sasl:
            raise ConfigError(
                f"console.listen with an SSL primary listener ({primary}): the console is a Kafka client "
                "of its broker and acts as the user logged in to it, which needs a SASL_SSL or "
                "SASL_PLAINTEXT listener (or a PLAINTEXT primary one, with no login); an SSL listener "
                "knows users only by their certificates"
            )

    def ssl_client_auth(self, listener: str) -> str:
        """A listener's `ssl.client.auth`: `listener.name.<l>.ssl.client.auth` if set, else
        the broker-wide key on SSL listeners and none on SASL_SSL ones (Kafka's KIP-684)."""
        prefixed = self.explicit.get(f"listener.name.{listener.lower()}.ssl.client.auth")
        if prefixed is not None:
            return prefixed
        return self.get_str("ssl.client.auth") if self.security_protocol(listener) == "SSL" else "none"

    def listener_tls(self, listener: str) -> tuple[bytes, bytes, bytes | None, str] | None:
        """A listener's TLS settings for the network thread, when its security protocol is
        SSL or SASL_SSL: (certificate chain PEM, key PEM, truststore PEM or None,
        ssl.client.auth). ConfigError naming the key, file and problem otherwise."""
        protocol = self.security_protocol(listener)
        if protocol in ("PLAINTEXT", "SASL_PLAINTEXT"):
            return None
        keystore, key, trust = self.tls_material(f"listener {listener} is {protocol}")
        auth = self.ssl_client_auth(listener)
        if auth != "none" and trust is None:
            raise ConfigError(f"ssl.client.auth={auth} needs ssl.truststore.location (the CAs of client certificates)")
        return keystore, key, trust, auth

    def tls_material(self, why: str) -> tuple[bytes, bytes, bytes | None]:
        """(certificate chain PEM, key PEM, truststore PEM or None) from the ssl.keystore.* and
        ssl.truststore.* keys; `why` (what needs them) begins the error of a missing keystore.
        ConfigError naming the key, file and problem."""
        if self.get_str("ssl.key.password"):
            raise ConfigError(
                "ssl.key.password: encrypted private keys are not supported; give the key unencrypted "
                "(openssl pkey -in key.pem -out plain.pem) and keep the file private"
            )

        def pem(location_key: str, inline_key: str) -> bytes | None:
            location, inline = self.get_str(location_key), self.get_str(inline_key)
            if location and inline:
                raise ConfigError(f"set {location_key} or {inline_key}, not both")
            if inline:
                return inline.encode()
            if not location:
                return None
            try:
                return Path(location).read_bytes()
            except OSError as e:
                raise ConfigError(f"{location_key}={location}: {e.strerror or e}") from None

        keystore = pem("ssl.keystore.location", "ssl.keystore.certificate.chain")
        key = keystore if self.get_str("ssl.keystore.location") else (self.get_str("ssl.keystore.key").encode() or None)
        if keystore is None or key is None:
            raise ConfigError(
                f"{why}: set ssl.keystore.location (a PEM file with the key and certificate chain), "
                "or ssl.keystore.certificate.chain and ssl.keystore.key"
            )
        return keystore, key, pem("ssl.truststore.location", "ssl.truststore.certificates")

    def http_endpoint(self, key: str) -> tuple[str, int, bool] | None:
        """(host, port, TLS) of an HTTP endpoint's `*.listen` key (HOST:PORT, http:// or
        https://HOST:PORT), None when empty."""
        value = self.get_str(key)
        if not value:
            return None
        host, port = split_host_port(value)
        return host, port, value.startswith("https://")

    @property
    def controller_listen(self) -> tuple[str, int] | None:
        """The controller listener's (host, port), or None when this node is not a controller."""
        return parse_listeners(self.get_str("listeners")).get(self.get_str("controller.listener.names").upper())

    @property
    def advertised_client(self) -> tuple[str, int] | None:
        """The primary listener's advertised address (None: the bound one)."""
        return self.advertised(self.client_listener_name)

    @property
    def advertised_controller(self) -> tuple[str, int] | None:
        """The controller listener's advertised address (None: the bound one)."""
        adv = self.get_str("advertised.listeners").strip()
        if "://" not in adv:
            return None
        return parse_listeners(adv).get(self.get_str("controller.listener.names").upper())

    @property
    def quorum_voters(self) -> dict[int, tuple[str, int]]:
        """The controller quorum's voters: node id -> (host, port) (controller.quorum.voters)."""
        return parse_voters(self.get_str("controller.quorum.voters"))

    @property
    def quorum_bootstrap_servers(self) -> list[tuple[str, int]]:
        """`controller.quorum.bootstrap.servers`, when this node is not one of the static
        `controller.quorum.voters` (a node joining a dynamic quorum), else []."""
        if self.quorum_voters:
            return []
        return parse_host_ports(self.get_str("controller.quorum.bootstrap.servers"))

    @property
    def in_cluster(self) -> bool:
        """A node of a multi-node quorum (static voters, or joining through bootstrap servers)."""
        return bool(self.quorum_voters or self.quorum_bootstrap_servers)

    @property
    def is_broker(self) -> bool:
        """A broker (process.roles includes broker): it hosts partitions and serves clients."""
        return "broker" in self.get_str("process.roles").split(",")

    @property
    def is_controller(self) -> bool:
        """A controller-quorum voter (process.roles includes controller)."""
        return "controller" in self.get_str("process.roles").split(",")

    def check_quorum(self) -> None:
        """Cross-key checks of a cluster node's quorum settings (ConfigError naming values)."""
        voters = self.quorum_voters
        bootstrap = self.quorum_bootstrap_servers
        if bootstrap:
            if not self.get_str("cluster.id"):
                raise ConfigError(
                    "controller.quorum.bootstrap.servers needs cluster.id: a node joining a quorum must "
                    "name the cluster it joins (its id is in a voter's meta.properties, or `logbroker "
                    "cluster status`)"
                )
            ctl = self.controller_listen
            if self.is_controller and ctl is None:
                raise ConfigError(
                    f"process.roles={self.get_str('process.roles')} joins the quorum through "
                    f"controller.quorum.bootstrap.servers, but listeners={self.get_str('listeners')!r} "
                    f"has no {self.get_str('controller.listener.names')}:// listener"
                )
            if not self.is_controller and ctl is not None:
                raise ConfigError(
                    f"process.roles=broker, but listeners={self.get_str('listeners')!r} has a "
                    f"{self.get_str('controller.listener.names')}:// listener; only controllers listen "
                    f"on it"
                )
        if not self.is_broker:
            if not voters and not bootstrap:
                raise ConfigError(
                    "process.roles=controller needs controller.quorum.voters: a controller-only node is "
                    "one of the voters, and brokers reach it on its controller listener"
                )
            ctl = self.get_str("controller.listener.names").upper()
            others = [n for n in parse_listeners(self.get_str("listeners")) if n != ctl]
            if others:
                raise ConfigError(
                    f"process.roles=controller, but listeners={self.get_str('listeners')!r} has "
                    f"listener(s) {others} for clients; a controller-only node listens on "
                    f"{ctl}:// only (as Kafka)"
                )
        if not voters:
            if not self.is_controller and not bootstrap:
                raise ConfigError(
                    "process.roles=broker needs controller.quorum.voters (or "
                    "controller.quorum.bootstrap.servers): a broker-only node follows a controller quorum"
                )
            return
        if not self.is_controller:
            if self.node_id in voters:
                raise ConfigError(
                    f"node.id {self.node_id} is a voter in controller.quorum.voters "
                    f"{self.get_str('controller.quorum.voters')}, but process.roles=broker; a voter "
                    f"needs process.roles=broker,controller (or give this broker another node.id)"
                )
            if self.controller_listen is not None:
                raise ConfigError(
                    f"process.roles=broker, but listeners={self.get_str('listeners')!r} has a "
                    f"{self.get_str('controller.listener.names')}:// listener; only controllers listen "
                    f"on it"
                )
            return
        if self.node_id not in voters:
            raise ConfigError(
                f"node.id {self.node_id} is not in controller.quorum.voters {self.get_str('controller.quorum.voters')}"
            )
        ctl = self.controller_listen
        if ctl is None:
            raise ConfigError(
                f"controller.quorum.voters is set, but listeners={self.get_str('listeners')!r} has no "
                f"{self.get_str('controller.listener.names')}:// listener"
            )
        adv = self.advertised_controller
        if adv is not None and adv[1] != voters[self.node_id][1]:
            raise ConfigError(
                f"the advertised controller listener {adv[0]}:{adv[1]} differs from node {self.node_id}'s "
                f"entry {voters[self.node_id][0]}:{voters[self.node_id][1]} in controller.quorum.voters"
            )
        if adv is None and ctl[1] != voters[self.node_id][1]:
            raise ConfigError(
                f"the controller listener port {ctl[1]} differs from node {self.node_id}'s entry "
                f"{voters[self.node_id][0]}:{voters[self.node_id][1]} in controller.quorum.voters"
            )

    def items(self) -> list[tuple[str, object]]:
        """Every key with its effective value, sorted by key."""
        return sorted(self._values.items())

    # --- topic-level resolution -------------------------------------------------

    def topic_defaults(self) -> dict[str, str]:
        """Topic-level key -> broker default value, as strings."""
        out = {}
        for topic_key, (_parse, broker_key) in TOPIC_KEYS.items():
            out[topic_key] = _to_str(self._values[broker_key])
        return out

    def resolve_topic(self, overrides: dict[str, str]) -> dict[str, str]:
        """A topic's effective config: the broker's defaults with the topic's `overrides` applied, by
        Kafka topic key."""
        merged = self.topic_defaults()
        merged.update(overrides)
        return merged

    def topic_value(self, overrides: Mapping[str, str], topic_key: str) -> object:
        """One topic-level key's parsed value: the topic's override, else the broker's key."""
        parse, broker_key = TOPIC_KEYS[topic_key]
        if topic_key in overrides:
            return parse(overrides[topic_key])
        return self._values[broker_key]

    def resolve_group(self, overrides: dict[str, str]) -> dict[str, str]:
        """Every group-level key's value for a group with these overrides, as strings."""
        merged = {gk: _to_str(self._values[bk]) for gk, (_parse, bk) in GROUP_KEYS.items()}
        merged.update(overrides)
        return merged

    def group_value(self, overrides: dict[str, str], group_key: str) -> object:
        """One group-level key's parsed value: the group's override, else the broker's key."""
        parse, broker_key = GROUP_KEYS[group_key]
        if group_key in overrides:
            return parse(overrides[group_key])
        return self._values[broker_key]

    # --- tiered storage -------------------------------------------------------------

    def remote_storage_options(self) -> dict[str, str]:
        """The options of tiered storage's object store: every rsm.config.* key, without the
        prefix (rsm.config.aws_region=eu-west-1 -> {"aws_region": "eu-west-1"}). Secrets among
        them (sensitive_key) must not be shown or logged."""
        n = len(REMOTE_STORAGE_OPTION_PREFIX)
        return {k[n:]: v for k, v in sorted(self.explicit.items()) if k.startswith(REMOTE_STORAGE_OPTION_PREFIX)}

    def check_tiered_storage_defaults(self) -> None:
        """The broker defaults of the tiered-storage topic keys, checked as Kafka checks a
        broker's (LogConfig.validateBrokerLogConfigValues): a default remote.storage.enable=true
        needs remote.log.storage.system.enable, and with it log.local.retention.ms/bytes must not
        be more than log.retention.ms/bytes. At start and for each dynamic change of the
        cluster default or this broker's configs (coord/metadata/config_control.py);
        ConfigError naming keys and values."""
        system = self.get_bool("remote.log.storage.system.enable")
        if self.get_bool("remote.storage.enable") and not system:
            raise ConfigError(
                "Tiered Storage functionality is disabled in the broker (remote.log.storage.system.enable="
                "false): remote.storage.enable, the default of topics, cannot be true"
            )
        if system:
            for unit in ("ms", "bytes"):
                local, total = self.get_int(f"log.local.retention.{unit}"), self.get_int(f"log.retention.{unit}")
                if _local_retention_exceeds(local, total):
                    raise ConfigError(
                        f"log.local.retention.{unit} ({local}) must not be more than log.retention.{unit} ({total})"
                    )

    def check_topic_configs(
        self,
        topic: str,
        configs: Mapping[str, str],
        previous: Mapping[str, str] | None = None,
        before: BrokerConfig | None = None,
    ) -> None:
        """Kafka's checks across the keys of a topic (LogConfig.validate), for CreateTopics and
        (Incremental)AlterConfigs: `configs` are the topic's overrides (each already checked,
        validate_topic_config) over this broker's defaults; `previous` its overrides before
        the change, over `before`'s defaults (this configuration's unless given), None for a
        new topic. ConfigError naming the topic, keys and values when
        - remote.storage.enable is true and remote.log.storage.system.enable false;
        - with remote storage, local.retention.ms (-2: retention.ms's value) is more than
          retention.ms, unless that is -1 (local -1, no limit, is more than any other);
          likewise local.retention.bytes and retention.bytes;
        - remote.storage.enable goes from true to false without remote.log.delete.on.disable
          (KIP-950);
        - iceberg.upsert.enable is true with an iceberg.partition.spec other than day(timestamp).
        Compacted topics may have remote storage (Kafka refuses them). An Iceberg topic's
        remote storage is its table (logbroker/iceberg/table_tier.py): it needs no remote log
        storage, but a table of raw values (not iceberg.mode=value_schema_id_prefix, whose
        values are columns) holding every record (not iceberg.upsert.enable)."""
        if (
            self.topic_value(configs, "iceberg.upsert.enable")
            and "".join(str(self.topic_value(configs, "iceberg.partition.spec")).split()) != "day(timestamp)"
        ):
            raise ConfigError(
                f"topic {topic}: iceberg.upsert.enable=true keeps the table partitioned by day(timestamp) "
                f"(its delete files follow the rows' days), not iceberg.partition.spec="
                f"{self.topic_value(configs, 'iceberg.partition.spec')!r}"
            )
        if self.topic_value(configs, "remote.storage.enable"):
            table = bool(self.topic_value(configs, "iceberg.enable"))
            if table and self.topic_value(configs, "iceberg.upsert.enable"):
                raise ConfigError(
                    f"topic {topic}: remote.storage.enable=true with iceberg.enable=true makes the table the "
                    "topic's only long-term copy, which needs every record: not possible with "
                    "iceberg.upsert.enable=true (the table keeps each key's latest value only)"
                )
            if table and self.topic_value(configs, "iceberg.mode") == "value_schema_id_prefix":
                raise ConfigError(
                    f"topic {topic}: remote.storage.enable=true with iceberg.enable=true makes the table the "
                    "topic's only long-term copy, which needs the raw values: not possible with "
                    "iceberg.mode=value_schema_id_prefix (values stored as columns)"
                )
            if not table and not self.get_bool("remote.log.storage.system.enable"):
                raise ConfigError(
                    f"Tiered Storage functionality is disabled in the broker. Topic {topic} cannot be "
                    "configured with remote log storage."
                )
            for unit in ("ms", "bytes"):
                total = int(self.topic_value(configs, f"retention.{unit}"))  # type: ignore[call-overload]
                local = int(self.topic_value(configs, f"local.retention.{unit}"))  # type: ignore[call-overload]
                if _local_retention_exceeds(local, total):
                    raise ConfigError(
                        f"local.retention.{unit} ({local}) must not be more than retention.{unit} ({total})"
                    )
            return
        was_remote = previous is not None and (before or self).topic_value(previous, "remote.storage.enable")
        if was_remote and not self.topic_value(configs, "remote.log.delete.on.disable"):
            raise ConfigError(
                "It is invalid to disable remote storage without deleting remote data. If you want to keep "
                "the remote data and turn to read only, please set remote.log.copy.disable=true. If you want "
                "to disable remote storage and delete all remote data, please set "
                "remote.storage.enable=false,remote.log.delete.on.disable=true."
            )

    def engine_config(self, topic_overrides: dict[str, str]) -> dict[str, str]:
        """The string map handed to the Rust Log for one topic: every engine key, the
        topic's override else the broker's value, as the table's parser normalises it."""
        return {k: _to_str(self.topic_value(topic_overrides, k)) for k in LOG_ENGINE_KEYS}


def _local_retention_exceeds(local: int, total: int) -> bool:
    """Whether a local retention (-2: the same as the total; -1: none) goes past the total
    (-1: none), Kafka's rule for local.retention.ms/bytes."""
    return total != -1 and local != -2 and (local == -1 or local > total)


def validate_broker_config(configs: dict[str, str | None]) -> dict[str, str]:
    """Check dynamic broker configs (DYNAMIC_BROKER_KEYS); ConfigError naming the key or
    value, and for a static key, where to set it."""
    out: dict[str, str] = {}
    for key, value in configs.items():
        spec = BROKER_KEYS.get(key)
        if spec is None and key.startswith(REMOTE_STORAGE_OPTION_PREFIX):
            raise ConfigError(
                f"broker configuration key {key!r} (an option of tiered storage's object store) is static: "
                "set it in the broker's config file or with --set and restart"
            )
        if spec is None:
            raise ConfigError(f"unknown broker configuration key {key!r}")
        if key not in DYNAMIC_BROKER_KEYS:
            raise ConfigError(
                f"broker configuration key {key!r} is static: set it in the broker's config file or "
                "with --set and restart (the dynamic keys are the broker defaults of topic configs, "
                "e.g. log.retention.ms, log.segment.bytes, min.insync.replicas, and the sasl.kerberos.* keys)"
            )
        if value is None:
            raise ConfigError(f"broker configuration key {key!r} has a null value")
        try:
            out[key] = _to_str(spec.parse(value))
        except ConfigError as e:
            raise ConfigError(f"broker configuration key {key!r} = {value!r}: {e}") from None
    return out


def validate_topic_config(configs: dict[str, str | None]) -> dict[str, str]:
    """Check topic-level overrides; raise ConfigError naming the bad key/value."""
    return _validate("topic", TOPIC_KEYS, configs)


def validate_group_config(configs: dict[str, str | None]) -> dict[str, str]:
    """Check group-level overrides; raise ConfigError naming the bad key/value."""
    out = _validate("group", GROUP_KEYS, configs)
    dlq = out.get("errors.deadletterqueue.topic.name", "")
    if dlq.startswith("__"):  # KIP-1191: never an internal topic
        raise ConfigError(
            f"errors.deadletterqueue.topic.name={dlq!r}: a dead-letter topic name must not start with '__'"
        )
    return out


def _validate(
    kind: str, keys: dict[str, tuple[Callable[[str], object], str]], configs: dict[str, str | None]
) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in configs.items():
        if key not in keys:
            raise ConfigError(
                f"unknown {kind} configuration key {key!r}"
                + (f" (known: {', '.join(sorted(keys))})" if kind == "group" else "")
            )
        if value is None:
            raise ConfigError(f"{kind} configuration key {key!r} has a null value")
        parse, _ = keys[key]
        try:
            out[key] = _to_str(parse(value))
        except ConfigError as e:
            raise ConfigError(f"{kind} configuration {key!r} = {value!r}: {e}") from None
    return out


def new_cluster_id() -> str:
    """A Kafka-style cluster id: 16 random bytes, URL-safe base64 without padding."""
    return directory_id.new()
