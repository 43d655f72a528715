"""Client configuration: Kafka's keys, defaults and checks, shared by Producer, Consumer
and Admin (sync and `logbroker.aio`).

Keys are Kafka's (`linger.ms`, `enable.idempotence`, ...). Keyword arguments may spell them
with underscores (`linger_ms=5`); `**{"linger.ms": 5}` works too. An unknown key raises
`ConfigError` (a typo must not silently fall back to a default). Values are coerced to the
type of the default (`"5"` -> 5, `"true"` -> True); `acks` accepts 0, 1, -1 and "all".
`sasl.password` and `sasl.jaas.config` are kept as `sasl.Password` (their repr is hidden),
and a SASL `security.protocol` without a user and password is a `ConfigError`
(client/sasl.py).

Defaults are the Java client's, except where a user who sets nothing would be slow
(measured in benches/bench_pyclient.py, "default" profile; see docs/client.md):
- `batch.size` 1,000,000 (Java: 16384; librdkafka: 1,000,000). A batch grows as records
  arrive (nothing is reserved up front), `linger.ms` still bounds the wait and
  `buffer.memory` the total, so a larger cap costs no memory at low rates; at high rates
  16 KiB batches meant one request per ~16 KiB and ran at a quarter of librdkafka's rate.
- `max.partition.fetch.bytes` 8 MiB (Java and librdkafka: 1 MiB). Each fetch response is
  decoded in one Rust call; bigger per-partition chunks amortize the request round trip on
  a busy partition. `fetch.max.bytes` (50 MiB) still bounds a response and
  `fetch.buffer.bytes` (64 MiB) what is fetched ahead. `logbroker.aio.Consumer` keeps
  Kafka's 1 MiB: its decode runs on the event loop, and 8 MiB would hold the loop ~8 ms.
"""

from __future__ import annotations

from typing import Any

from logbroker.client import oauthbearer, sasl
from logbroker.client.errors import ConfigError

COMMON: dict[str, Any] = {
    "bootstrap.servers": "127.0.0.1:9092",
    "client.id": "logbroker-python",
    "request.timeout.ms": 30000,
    "metadata.max.age.ms": 300000,
    "retry.backoff.ms": 100,
    "retry.backoff.max.ms": 1000,
    "reconnect.backoff.ms": 50,
    "reconnect.backoff.max.ms": 1000,
    "connections.max.idle.ms": 540000,
    "socket.connection.setup.timeout.ms": 10000,
    "api.version.request": True,
    "security.protocol": "PLAINTEXT",
    # TLS (security.protocol=SSL or SASL_SSL), PEM files: see client/tls.py
    "ssl.truststore.type": "PEM",
    "ssl.truststore.location": None,
    "ssl.keystore.type": "PEM",
    "ssl.keystore.location": None,
    "ssl.key.password": None,
    "ssl.endpoint.identification.algorithm": "https",
    # SASL (security.protocol=SASL_PLAINTEXT or SASL_SSL): see client/sasl.py
    "sasl.mechanism": "PLAIN",
    "sasl.username": None,
    "sasl.password": None,
    "sasl.jaas.config": None,
    # GSSAPI (Kerberos): see client/sasl.py
    "sasl.kerberos.service.name": "kafka",
    "sasl.kerberos.principal": None,
    "sasl.kerberos.keytab": None,
    # OAUTHBEARER's tokens: see client/oauthbearer.py
    "sasl.oauthbearer.method": "default",
    "sasl.oauthbearer.token.endpoint.url": None,
    "sasl.oauthbearer.client.id": None,
    "sasl.oauthbearer.client.secret": None,
    "sasl.oauthbearer.scope": None,
    "sasl.oauthbearer.extensions": None,
    "sasl.oauthbearer.config": None,
    "enable.sasl.oauthbearer.unsecure.jwt": False,
    "oauth.cb": None,
}

PRODUCER: dict[str, Any] = {
    **COMMON,
    "acks": -1,
    "batch.size": 1_000_000,
    "linger.ms": 5,
    "buffer.memory": 33554432,
    "max.request.size": 1048576,
    "compression.type": "none",
    "retries": 2147483647,
    "enable.idempotence": True,
    "max.in.flight.requests.per.connection": 5,
    "delivery.timeout.ms": 120000,
    "max.block.ms": 60000,
    "partitioner": None,
    "allow.auto.create.topics": True,
    "transactional.id": None,
    "transaction.timeout.ms": 60000,
}

CONSUMER: dict[str, Any] = {
    **COMMON,
    "group.id": None,
    "group.instance.id": None,
    "group.protocol": "classic",
    "group.remote.assignor": None,
    "enable.auto.commit": True,
    "auto.commit.interval.ms": 5000,
    "auto.offset.reset": "latest",
    "session.timeout.ms": 45000,
    "heartbeat.interval.ms": 3000,
    "max.poll.interval.ms": 300000,
    "max.poll.records": 500,
    "fetch.min.bytes": 1,
    "fetch.max.bytes": 52428800,
    "fetch.max.wait.ms": 500,
    "max.partition.fetch.bytes": 8 << 20,
    "fetch.buffer.bytes": 67108864,
    "check.crcs": True,
    "isolation.level": "read_uncommitted",
    "partition.assignment.strategy": ["range", "roundrobin", "cooperative-sticky"],
    "exclude.internal.topics": True,
    "allow.auto.create.topics": False,
}

ADMIN: dict[str, Any] = dict(COMMON)

_CHOICES = {
    "compression.type": {"none", "gzip", "snappy", "lz4", "zstd"},
    "auto.offset.reset": {"earliest", "latest", "none"},
    "isolation.level": {"read_uncommitted", "read_committed"},
}


def _coerce(key: str, value: Any, default: Any) -> Any:
    if key == "security.protocol":
        v = str(value).upper()
        if v not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
            raise ConfigError(f"security.protocol={value!r}: use PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL")
        return v
    if key == "sasl.mechanism":
        return sasl.check_mechanism(value)
    if key == "sasl.oauthbearer.method":
        v = str(value).lower()
        if v not in oauthbearer.METHODS:
            raise ConfigError(f"sasl.oauthbearer.method={value!r}: use default or oidc")
        return v
    if key == "oauth.cb":
        if value is not None and not callable(value):
            raise ConfigError("oauth_cb must be a callable(config) -> (token, expiry)")
        return value
    if key in ("sasl.password", "sasl.jaas.config", "sasl.oauthbearer.client.secret"):
        # secrets: kept as Password, whose repr does not show them
        return value if value is None or isinstance(value, sasl.Password) else sasl.Password(str(value))
    if key == "sasl.username":
        return None if value is None else str(value)
    if key in ("ssl.truststore.type", "ssl.keystore.type"):
        if str(value).upper() != "PEM":
            raise ConfigError(f"{key}={value!r}: this client reads PEM files only")
        return "PEM"
    if key == "ssl.endpoint.identification.algorithm":
        v = str(value or "").lower()
        if v not in ("https", ""):
            raise ConfigError(f"ssl.endpoint.identification.algorithm must be 'https' or '', not {value!r}")
        return v
    if key == "acks":
        if value in ("all", -1, "-1"):
            return -1
        if value in (0, 1, "0", "1"):
            return int(value)
        raise ConfigError(f"acks must be 0, 1, -1 or 'all', not {value!r}")
    if key == "group.protocol":
        v = str(value).lower()
        if v not in ("classic", "consumer"):
            raise ConfigError(f"group.protocol must be 'classic' or 'consumer' (KIP-848), not {value!r}")
        return v
    if key == "partition.assignment.strategy":
        names = value if isinstance(value, (list, tuple)) else [s.strip() for s in str(value).split(",")]
        names = [n.rsplit(".", 1)[-1].lower().replace("assignor", "") for n in names]
        names = [{"cooperativesticky": "cooperative-sticky"}.get(n, n) for n in names]
        unknown = [n for n in names if n not in ("range", "roundrobin", "cooperative-sticky")]
        if unknown:
            raise ConfigError(
                f"partition.assignment.strategy: unknown assignor(s) {unknown}; "
                "use range, roundrobin or cooperative-sticky"
            )
        return names
    if default is None or value is None:
        return value
    try:
        if isinstance(default, bool):
            if isinstance(value, str):
                if value.lower() not in ("true", "false"):
                    raise ValueError(value)
                return value.lower() == "true"
            return bool(value)
        if isinstance(default, int):
            return int(value)
        if isinstance(default, str):
            value = str(value)
            if key in _CHOICES and value not in _CHOICES[key]:
                raise ConfigError(f"{key} must be one of {sorted(_CHOICES[key])}, not {value!r}")
            return value
    except (TypeError, ValueError) as e:
        if isinstance(e, ConfigError):
            raise
        raise ConfigError(f"{key}: {value!r} is not a valid {type(default).__name__}") from None
    return value


def build(defaults: dict[str, Any], given: dict[str, Any]) -> dict[str, Any]:
    """Merge `given` (underscored or dotted keys) over `defaults`, checking every key."""
    out = dict(defaults)
    for raw_key, value in given.items():
        key = raw_key.replace("_", ".")
        if key not in defaults:
            import difflib

            close = [k for k in defaults if k.split(".")[0] == key.split(".")[0]] or difflib.get_close_matches(
                key, list(defaults), n=1
            )
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(f"unknown configuration key {raw_key!r}{hint}")
        out[key] = _coerce(key, value, defaults[key])
    if isinstance(out["bootstrap.servers"], (list, tuple)):
        out["bootstrap.servers"] = ",".join(out["bootstrap.servers"])
    if "security.protocol" in out:
        sasl.from_config(out)  # a SASL protocol needs a user and a password (ConfigError)
    return out


def parse_servers(servers: str) -> list[tuple[str, int]]:
    """'host:port,host:port' -> [(host, port)]."""
    out = []
    for item in str(servers).split(","):
        item = item.strip()
        if not item:
            continue
        host, _, port = item.rpartition(":")
        if not host or not port.isdigit():
            raise ConfigError(f"bootstrap.servers: {item!r} is not host:port")
        out.append((host.strip("[]"), int(port)))
    if not out:
        raise ConfigError("bootstrap.servers is empty")
    return out


def build_producer(given: dict[str, Any]) -> dict[str, Any]:
    """The producer's configuration. As in Kafka's Java producer (KIP-679), idempotence is on
    by default but gives way, when not asked for explicitly, to settings it cannot work with
    (acks other than all, more than 5 requests in flight, retries=0); asked for explicitly
    alongside them, it is an error (raised by the producer)."""
    out = build(PRODUCER, given)
    explicit = any(k.replace("_", ".") == "enable.idempotence" for k in given)
    if out["transactional.id"] is not None:
        out["transactional.id"] = str(out["transactional.id"])
        if not out["transactional.id"]:
            raise ConfigError("transactional.id must not be empty")
        if explicit and not out["enable.idempotence"]:
            raise ConfigError("transactional.id requires enable.idempotence (a transactional producer is idempotent)")
        out["enable.idempotence"] = True
        return out
    if not explicit and (out["acks"] != -1 or out["max.in.flight.requests.per.connection"] > 5 or out["retries"] == 0):
        out["enable.idempotence"] = False
    return out


# -- share consumer (KIP-932; client/share.py) ------------------------------------------

SHARE_CONSUMER: dict[str, Any] = {
    **COMMON,
    "group.id": None,
    "share.acknowledgement.mode": "implicit",
    "share.acquire.mode": "batch_optimized",
    "max.poll.records": 500,
    "fetch.min.bytes": 1,
    "fetch.max.bytes": 52428800,
    "fetch.max.wait.ms": 500,
    "check.crcs": True,
    "allow.auto.create.topics": False,
}


def build_share_consumer(given: dict[str, Any]) -> dict[str, Any]:
    """The share consumer's configuration: a group id is required and
    `share.acknowledgement.mode` is "implicit" or "explicit" and `share.acquire.mode`
    "batch_optimized" or "record_limit" (KIP-1206: at most max.poll.records acquired per
    fetch, never more to finish a batch), as in Kafka."""
    out = build(SHARE_CONSUMER, given)
    mode = str(out["share.acknowledgement.mode"]).lower()
    if mode not in ("implicit", "explicit"):
        raise ConfigError(f"share.acknowledgement.mode must be 'implicit' or 'explicit', not {mode!r}")
    out["share.acknowledgement.mode"] = mode
    acquire = str(out["share.acquire.mode"]).lower()
    if acquire not in ("batch_optimized", "record_limit"):
        raise ConfigError(f"share.acquire.mode must be 'batch_optimized' or 'record_limit' (KIP-1206), not {acquire!r}")
    out["share.acquire.mode"] = acquire
    if not out["group.id"]:
        raise ConfigError("a share consumer needs a group.id")
    if out["max.poll.records"] < 1:
        raise ConfigError("max.poll.records must be at least 1")
    return out
