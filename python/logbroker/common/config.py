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

import dataclasses
import functools
import importlib.util
import re
import uuid
from pathlib import Path
from typing import Callable

from logbroker.common.sasl import node_credentials


class ConfigError(ValueError):
    """A configuration key or value that the broker cannot accept."""


LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1


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


def _parse_cleanup_policy(text: str) -> str:
    parts = sorted(p.strip() for p in str(text).split(",") if p.strip())
    if not parts or any(p not in ("compact", "delete") for p in parts) or len(set(parts)) != len(parts):
        raise ConfigError(f"expected delete, compact or compact,delete, got {text!r}")
    return ",".join(parts)


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
        raise ConfigError(f"replica.selector.class {text!r} is not one of the selectors logbroker has: "
                          f"{RACK_AWARE_SELECTOR}, {LEADER_SELECTOR} (or empty)")
    return t


def _parse_optional_hostport(text: str) -> str:
    """Empty, or HOST:PORT (port 0: any free port)."""
    text = str(text).strip()
    if not text:
        return ""
    host, port = split_host_port(text)
    return f"{host}:{port}"


DEFAULT_PROTOCOL_MAP = "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT"
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


SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
# Per-listener SASL settings, Kafka's form: listener.name.<listener, lower case>.<mechanism,
# lower case>.sasl.jaas.config (PLAIN's user_<name>="<password>" entries; common/sasl.py).
LISTENER_JAAS_KEY = re.compile(r"^listener\.name\.([a-z0-9_]+)\.(plain|scram-sha-256|scram-sha-512)\.sasl\.jaas\.config$")
# One listener's ssl.client.auth (Kafka's listener prefix); on a SASL_SSL listener only this
# form applies (KIP-684), so SASL clients need no certificate when SSL listeners require one.
LISTENER_CLIENT_AUTH_KEY = re.compile(r"^listener\.name\.([a-z0-9_]+)\.ssl\.client\.auth$")


def _parse_mechanisms(text: str) -> str:
    names = [m.strip().upper() for m in str(text).split(",") if m.strip()]
    for m in names:
        if m not in SASL_MECHANISMS:
            raise ConfigError(f"SASL mechanism {m!r} is not served (GSSAPI and OAUTHBEARER are not); "
                              f"choose from {', '.join(SASL_MECHANISMS)}")
    if not names:
        raise ConfigError("sasl.enabled.mechanisms is empty")
    return ",".join(names)


def _parse_node_mechanism(text: str) -> str:
    """sasl.mechanism.inter.broker.protocol, sasl.mechanism.controller.protocol: one mechanism."""
    m = str(text).strip().upper()
    if m not in SASL_MECHANISMS:
        raise ConfigError(f"SASL mechanism {text!r} is not one nodes authenticate with (GSSAPI and OAUTHBEARER are "
                          f"not served); choose from {', '.join(SASL_MECHANISMS)}")
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


@dataclasses.dataclass(frozen=True)
class ConfigKey:
    name: str
    parse: Callable[[str], object]
    default: str
    doc: str
    topic_key: str | None = None  # the topic-level key this broker key sets the default of
    group_key: str | None = None  # the group-level key (Kafka's GroupConfig) this broker key sets the default of
    sensitive: bool = False  # a secret: DescribeConfigs answers it with a null value and is_sensitive, as Kafka's PASSWORD keys


_BROKER_KEYS: list[ConfigKey] = [
    ConfigKey("node.id", _parse_int(0, INT_MAX), "1", "This broker's id (Kafka: node.id / broker.id)."),
    ConfigKey("log.dirs", _parse_str, "./logbroker-data", "Data directory holding one directory per partition."),
    ConfigKey("metrics.listen", _parse_optional_hostport, "", "HOST:PORT of the Prometheus metrics endpoint (GET /metrics; docs/operations.md lists the metrics); empty: none."),
    ConfigKey("console.listen", _parse_optional_hostport, "", "HOST:PORT of the web console (cluster, topics, groups, messages, throughput; docs/operations.md, \"Web console\"); empty: none."),
    ConfigKey("listeners", _parse_listener, "127.0.0.1:9092", "HOST:PORT to accept client connections on, or Kafka's list NAME://HOST:PORT,... with a PLAINTEXT listener for clients and, in a cluster, the controller listener (CONTROLLER://HOST:PORT)."),
    ConfigKey("process.roles", _parse_roles, "broker,controller", "This node's roles: broker,controller (combined: a controller-quorum voter that is also a broker; the default), controller (a controller-only node: a voter of controller.quorum.voters serving only its controller listener; no partitions, no clients) or broker (a broker-only node: it follows the metadata log as an observer, node.id not in controller.quorum.voters, no controller listener)."),
    ConfigKey("controller.quorum.voters", _parse_voters, "", "The controller quorum, ID@HOST:PORT,... (each voter's controller listener). Empty: a single node that is its own controller, with no quorum network."),
    ConfigKey("listener.security.protocol.map", _parse_protocol_map, DEFAULT_PROTOCOL_MAP, "Listener name -> security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL), NAME:PROTOCOL,...; the names of the protocols map to themselves."),
    ConfigKey("ssl.keystore.type", _parse_choice("PEM"), "PEM", "Keystore format of an SSL listener: PEM (a file, or the certificate chain and key inline)."),
    ConfigKey("ssl.keystore.location", _parse_str, "", "PEM file with the broker's private key (unencrypted) and certificate chain, the broker's certificate first."),
    ConfigKey("ssl.keystore.certificate.chain", _parse_str, "", "The certificate chain as PEM text (instead of ssl.keystore.location)."),
    ConfigKey("ssl.keystore.key", _parse_str, "", "The private key as PEM text (instead of ssl.keystore.location).", sensitive=True),
    ConfigKey("ssl.key.password", _parse_str, "", "Password of an encrypted private key: not supported; give the key unencrypted.", sensitive=True),
    ConfigKey("ssl.truststore.type", _parse_choice("PEM"), "PEM", "Truststore format: PEM."),
    ConfigKey("ssl.truststore.location", _parse_str, "", "PEM file with the certificates of the authorities that sign client certificates (ssl.client.auth)."),
    ConfigKey("ssl.truststore.certificates", _parse_str, "", "The truststore's certificates as PEM text (instead of ssl.truststore.location)."),
    ConfigKey("ssl.endpoint.identification.algorithm", _parse_choice("https", ""), "https", "Connections between nodes over SSL: https checks that the other node's certificate names the host dialled; empty checks the chain only."),
    ConfigKey("ssl.client.auth", _parse_choice("none", "requested", "required"), "none", "TLS client authentication on SSL listeners: none, requested (a client may present a certificate) or required (mTLS). One listener: listener.name.<listener>.ssl.client.auth (the only form SASL_SSL listeners honour)."),
    ConfigKey("ssl.principal.mapping.rules", _parse_str, "DEFAULT", "How a client certificate's subject (RFC 2253) becomes its User: principal: rules tried in order, DEFAULT (the whole subject) or RULE:pattern/replacement/[LU] (e.g. RULE:^CN=([^,]+),.*$/$1/L,DEFAULT); a certificate no rule maps is refused."),
    ConfigKey("sasl.enabled.mechanisms", _parse_mechanisms, "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512", "SASL mechanisms SASL_PLAINTEXT and SASL_SSL listeners offer: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (Kafka's default, GSSAPI, is not served). PLAIN users come from listener.name.<listener>.plain.sasl.jaas.config (user_<name>=\"<password>\") or are SCRAM users; SCRAM users are stored in the metadata log (logbroker user, AlterUserScramCredentials)."),
    ConfigKey("connection.failed.authentication.delay.ms", _parse_int(0, INT_MAX), "100", "How long the answer to a failed SASL authentication (and the close after it) is held back, to slow password guessing."),
    ConfigKey("connections.max.reauth.ms", _parse_int(0), "0", "SASL session lifetime (KIP-368): a client must re-authenticate within this long, or its next request closes the connection (0: sessions never end)."),
    ConfigKey("sasl.server.max.receive.size", _parse_int(1024, INT_MAX), "524288", "The largest request frame an unauthenticated SASL connection may send (the handshake and its tokens); larger closes the connection."),
    ConfigKey("inter.broker.listener.name", _parse_str, "", "The listener brokers reach each other on, and the one a broker registers with (empty: PLAINTEXT, else the first listener that is not the controller's). Any security protocol; with SASL_PLAINTEXT or SASL_SSL brokers authenticate to each other with sasl.mechanism.inter.broker.protocol (docs/security.md, 'SASL between the nodes')."),
    ConfigKey("sasl.mechanism.inter.broker.protocol", _parse_node_mechanism, "PLAIN", "The SASL mechanism brokers authenticate to each other with when the inter-broker listener is SASL_PLAINTEXT or SASL_SSL: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (Kafka's default, GSSAPI, is not served). It must be in sasl.enabled.mechanisms; the user and password are the username= and password= of listener.name.<inter-broker listener>.<mechanism>.sasl.jaas.config."),
    ConfigKey("sasl.mechanism.controller.protocol", _parse_node_mechanism, "PLAIN", "The SASL mechanism nodes authenticate to the controllers with when the controller listener is SASL_PLAINTEXT or SASL_SSL: PLAIN only (SCRAM users live in the metadata log, which the controllers can only read once they reach each other). The user and password are the username= and password= of listener.name.<controller listener>.plain.sasl.jaas.config, whose user_<name> entries are the users the listener accepts."),
    ConfigKey("authorizer.class.name", _parse_choice("", "org.apache.kafka.metadata.authorizer.StandardAuthorizer", "kafka.security.authorizer.AclAuthorizer"), "", "ACL authorization: empty (every request allowed; the ACL APIs answer SECURITY_DISABLED) or org.apache.kafka.metadata.authorizer.StandardAuthorizer (ACLs from the metadata log enforced on every API; docs/security.md)."),
    ConfigKey("super.users", _parse_str, "", "Principals allowed everything, separated by semicolons: User:admin;User:ops."),
    ConfigKey("quota.window.num", _parse_int(1, 1000), "11", "Client quotas (producer_byte_rate, consumer_byte_rate): the number of windows a client's byte rate is measured over."),
    ConfigKey("quota.window.size.seconds", _parse_int(1, 3600), "1", "Client quotas: the length of each window, seconds. A throttle time is at most quota.window.num windows."),
    ConfigKey("allow.everyone.if.no.acl.found", _parse_bool, "false", "With an authorizer: a resource that no ACL matches is open to everyone (true) or to super users only (false)."),
    ConfigKey("controller.listener.names", _parse_str, "CONTROLLER", "The name of the listener in `listeners` that the controller quorum speaks on."),
    ConfigKey("controller.quorum.election.timeout.ms", _parse_int(100, INT_MAX), "1000", "Raft election timeout (randomised between 1x and 2x); heartbeats go out every fifth of it."),
    ConfigKey("broker.rack", _parse_str, "", "This broker's rack; replicas of a partition are spread over racks first (empty: no rack)."),
    ConfigKey("broker.session.timeout.ms", _parse_int(100, INT_MAX), "9000", "A broker that sends no heartbeat to the active controller for this long is fenced: it leaves Metadata and its partition leaderships move (or go offline)."),
    ConfigKey("broker.heartbeat.interval.ms", _parse_int(10, INT_MAX), "2000", "How often a broker heartbeats to the active controller."),
    ConfigKey("metadata.log.max.record.bytes.between.snapshots", _parse_int(1), "20971520", "Bytes of metadata records applied between snapshots of the metadata image; a snapshot drops the metadata log before it, and a node too far behind catches up from it."),
    ConfigKey("metadata.log.max.snapshot.interval.ms", _parse_int(1), "3600000", "The longest time between snapshots of the metadata image when records were applied since the last one (Kafka's key and default: an hour), so a restart replays a bounded log even when metadata changes slowly."),
    ConfigKey("advertised.listeners", _parse_advertised, "", "HOST:PORT given to clients in Metadata (defaults to the bound listener), or Kafka's list NAME://HOST:PORT,...: the client listener's entry is given to clients and a CONTROLLER:// entry is the address other nodes reach this node's controller listener at (it must match this node's controller.quorum.voters entry; e.g. behind a proxy or NAT)."),
    ConfigKey("cluster.id", _parse_str, "", "Cluster id; when empty a single node generates one and a cluster node derives it from controller.quorum.voters (the same on every voter); stored in meta.properties on first start."),
    ConfigKey("auto.create.topics.enable", _parse_bool, "true", "Create a topic when Metadata asks for an unknown one."),
    ConfigKey("delete.topic.enable", _parse_bool, "true", "Allow DeleteTopics."),
    ConfigKey("num.partitions", _parse_int(1, 1_000_000), "1", "Partitions of an auto-created topic."),
    ConfigKey("default.replication.factor", _parse_int(1, 32767), "1", "Replication factor of an auto-created topic."),
    ConfigKey("socket.request.max.bytes", _parse_int(1024, INT_MAX), "104857600", "Largest request frame accepted; larger frames close the connection."),
    ConfigKey("connections.max.idle.ms", _parse_int(-1), "600000", "Close connections idle this long (-1: never)."),
    ConfigKey("max.incremental.fetch.session.cache.slots", _parse_int(0), "1000", "Incremental fetch sessions (KIP-227) kept at most; a new one replaces one idle for 2 minutes, else the client fetches without a session."),
    ConfigKey("queued.max.request.bytes", _parse_int(-1), "104857600", "Memory for all request frames being read or served together (-1: unbounded, Kafka's default); a connection stops reading while it is used up. A single larger request is still read when nothing else holds memory."),
    ConfigKey("log.retention.check.interval.ms", _parse_int(1), "300000", "How often retention runs."),
    ConfigKey("log.flush.scheduler.interval.ms", _parse_int(1), "1000", "How often the flush.ms / segment.ms policies are checked."),
    ConfigKey("replica.high.watermark.checkpoint.interval.ms", _parse_int(1), "5000", "How often the high-watermark checkpoint is written."),
    ConfigKey("replica.lag.time.max.ms", _parse_int(1), "30000", "A follower that has not caught up with the leader's log end for this long leaves the ISR."),
    ConfigKey("replica.fetch.wait.max.ms", _parse_int(0, 2**31 - 1), "500", "Longest a follower's fetch waits at the leader for data."),
    ConfigKey("replica.fetch.min.bytes", _parse_int(1, 2**31 - 1), "1", "Bytes a follower's fetch waits for."),
    ConfigKey("replica.fetch.max.bytes", _parse_int(1, 2**31 - 1), "1048576", "Bytes a follower fetches per partition per request (at least one batch)."),
    ConfigKey("replica.fetch.response.max.bytes", _parse_int(1, 2**31 - 1), "10485760", "Bytes a follower fetches per request (at least one batch)."),
    ConfigKey("replica.fetch.backoff.ms", _parse_int(0, 2**31 - 1), "1000", "How long a follower waits after a lost connection before retrying; a partition's back-off after fetch errors starts at 10 ms and doubles up to this."),
    ConfigKey("replica.selector.class", _parse_replica_selector, "", "KIP-392 reads from followers: org.apache.kafka.common.replica.RackAwareReplicaSelector makes a leader send a consumer that sets client.rack to an in-sync replica in its rack (the leader itself when it is in that rack); empty (or Kafka's LeaderSelector): consumers read from leaders. Followers serve consumers' Fetch v11+ either way."),
    ConfigKey("replica.socket.timeout.ms", _parse_int(1, 2**31 - 1), "30000", "Socket timeout of a follower's connection to its leader (beyond the fetch's own wait)."),
    ConfigKey("message.max.bytes", _parse_int(0, INT_MAX), "1048588", "Largest record batch accepted (default of the topic key max.message.bytes).", "max.message.bytes"),
    ConfigKey("log.segment.bytes", _parse_int(14, INT_MAX), "1073741824", "Segment size before a roll.", "segment.bytes"),
    ConfigKey("log.roll.ms", _parse_int(1), "604800000", "Segment age before a roll.", "segment.ms"),
    ConfigKey("log.index.size.max.bytes", _parse_int(4, INT_MAX), "10485760", "Maximum offset-index size per segment.", "segment.index.bytes"),
    ConfigKey("log.index.interval.bytes", _parse_int(0, INT_MAX), "4096", "Bytes between offset-index entries.", "index.interval.bytes"),
    ConfigKey("log.retention.ms", _parse_int(-1), "604800000", "Delete segments older than this (-1: keep forever).", "retention.ms"),
    ConfigKey("log.retention.bytes", _parse_int(-1), "-1", "Delete old segments while a partition is larger (-1: no limit).", "retention.bytes"),
    ConfigKey("log.retention.archive", _parse_archive, "false", "Archive instead of delete: segments due for retention.ms/retention.bytes are written to Parquet under archive.location by the partition leader before they are deleted (docs/operations.md, \"Archiving expired segments\").", "retention.archive"),
    ConfigKey("archive.location", _parse_str, "", "Where retention.archive writes Parquet files: a directory, or s3://BUCKET/PREFIX for an S3-compatible store; empty: DATA_DIR/__archive."),
    ConfigKey("archive.s3.endpoint", _parse_str, "", "S3-compatible endpoint URL for an s3:// archive.location (e.g. http://127.0.0.1:9000); empty: AWS."),
    ConfigKey("archive.s3.region", _parse_str, "us-east-1", "Region of an s3:// archive.location."),
    ConfigKey("archive.s3.access.key.id", _parse_str, "", "Access key of an s3:// archive.location; empty: from the environment (AWS_ACCESS_KEY_ID, ...)."),
    ConfigKey("archive.s3.secret.access.key", _parse_str, "", "Secret key of an s3:// archive.location; empty: from the environment (AWS_SECRET_ACCESS_KEY).", sensitive=True),
    ConfigKey("log.flush.interval.messages", _parse_int(1), str(LONG_MAX), "fsync after this many messages (default: rely on the page cache).", "flush.messages"),
    ConfigKey("log.flush.interval.ms", _parse_int(0), str(LONG_MAX), "fsync after this many ms (default: rely on the page cache).", "flush.ms"),
    ConfigKey("log.message.timestamp.type", _parse_choice("CreateTime", "LogAppendTime"), "CreateTime", "Timestamp type of appended batches.", "message.timestamp.type"),
    ConfigKey("producer.id.expiration.ms", _parse_int(1, INT_MAX), "86400000", "Forget idle producer ids after this long.", "producer.id.expiration.ms"),
    ConfigKey("log.cleanup.policy", _parse_cleanup_policy, "delete", "delete (retention), compact (keep the newest value per key) or compact,delete.", "cleanup.policy"),
    ConfigKey("log.cleaner.enable", _parse_bool, "true", "Run log compaction for topics with cleanup.policy=compact."),
    ConfigKey("log.cleaner.backoff.ms", _parse_int(1), "15000", "How often the cleaner looks for logs to compact."),
    ConfigKey("log.cleaner.delete.retention.ms", _parse_int(0), "86400000", "How long tombstones stay after compaction reaches them.", "delete.retention.ms"),
    ConfigKey("log.cleaner.min.compaction.lag.ms", _parse_int(0), "0", "Records younger than this are not compacted.", "min.compaction.lag.ms"),
    ConfigKey("log.cleaner.max.compaction.lag.ms", _parse_int(1), str(LONG_MAX), "Records older than this are compacted whatever the dirty ratio.", "max.compaction.lag.ms"),
    ConfigKey("log.cleaner.min.cleanable.ratio", _parse_float(0.0, 1.0), "0.5", "Dirty fraction of a log that triggers compaction.", "min.cleanable.dirty.ratio"),
    ConfigKey("offsets.topic.num.partitions", _parse_int(1, 10_000), "50", "Partitions of __consumer_offsets (fixed once the topic exists)."),
    ConfigKey("offsets.topic.replication.factor", _parse_int(1, 32767), "1", "Replication factor of __consumer_offsets."),
    ConfigKey("offsets.topic.segment.bytes", _parse_int(14, INT_MAX), "104857600", "Segment size of __consumer_offsets."),
    ConfigKey("transaction.state.log.num.partitions", _parse_int(1, 10_000), "50", "Partitions of __transaction_state (fixed once the topic exists)."),
    ConfigKey("transaction.state.log.replication.factor", _parse_int(1, 32767), "1", "Replication factor of __transaction_state."),
    ConfigKey("transaction.state.log.min.isr", _parse_int(1, 32767), "2", "min.insync.replicas of __transaction_state (capped at its replication factor)."),
    ConfigKey("transaction.state.log.segment.bytes", _parse_int(14, INT_MAX), "104857600", "Segment size of __transaction_state."),
    ConfigKey("share.coordinator.state.topic.num.partitions", _parse_int(1, 10_000), "50", "Partitions of __share_group_state, where share-partition state is kept (fixed once the topic exists)."),
    ConfigKey("share.coordinator.state.topic.replication.factor", _parse_int(1, 32767), "1", "Replication factor of __share_group_state."),
    ConfigKey("share.coordinator.state.topic.min.isr", _parse_int(1, 32767), "2", "min.insync.replicas of __share_group_state (capped at its replication factor)."),
    ConfigKey("share.coordinator.state.topic.segment.bytes", _parse_int(14, INT_MAX), "104857600", "Segment size of __share_group_state."),
    ConfigKey("transaction.max.timeout.ms", _parse_int(1, INT_MAX), "900000", "Largest transaction.timeout.ms a producer may ask for (INVALID_TRANSACTION_TIMEOUT above it)."),
    ConfigKey("transaction.abort.timed.out.transaction.cleanup.interval.ms", _parse_int(1, INT_MAX), "10000", "How often the transaction coordinator aborts transactions past their timeout."),
    ConfigKey("transactional.id.expiration.ms", _parse_int(1, INT_MAX), "604800000", "A transactional id with no transaction open and no request for this long is removed (its record in __transaction_state becomes a tombstone); a producer using it again starts with a new producer id."),
    ConfigKey("transaction.remove.expired.transaction.cleanup.interval.ms", _parse_int(1, INT_MAX), "3600000", "How often the transaction coordinator removes expired transactional ids."),
    ConfigKey("transaction.partition.verification.enable", _parse_bool, "true", "KIP-890 part 1: the first batch of a transactions-v1 producer's transaction on a partition is checked with the transaction coordinator, and refused (INVALID_TXN_STATE) if the producer never added the partition, so it cannot open a transaction no marker will close. Transactions v2 always goes through the coordinator."),
    ConfigKey("transaction.version", _parse_int(0, 2), "2", "The level of Kafka's transaction.version feature a new metadata log starts with (as `kafka-storage format --feature transaction.version=N`); afterwards the finalized level lives in the metadata log and `kafka-features upgrade|downgrade` changes it. 2: transactions v2 (KIP-890; Java producers 4.x then send no AddPartitionsToTxn, the partition leaders add partitions, every EndTxn bumps the producer epoch); 0 or 1: producers use transactions v1."),
    ConfigKey("offsets.retention.minutes", _parse_int(1), "10080", "Committed offsets of an empty group are deleted after this long."),
    ConfigKey("offsets.retention.check.interval.ms", _parse_int(1), "600000", "How often expired offsets are looked for."),
    ConfigKey("offset.metadata.max.bytes", _parse_int(0, INT_MAX), "4096", "Largest metadata string of a committed offset."),
    ConfigKey("group.min.session.timeout.ms", _parse_int(1, INT_MAX), "6000", "Smallest session.timeout.ms a member may ask for."),
    ConfigKey("group.max.session.timeout.ms", _parse_int(1, INT_MAX), "1800000", "Largest session.timeout.ms a member may ask for."),
    ConfigKey("group.initial.rebalance.delay.ms", _parse_int(0, INT_MAX), "3000", "Wait this long for more members before the first rebalance of an empty group (the in-process Broker defaults to 0)."),
    ConfigKey("group.max.size", _parse_int(1, INT_MAX), str(INT_MAX), "Most members a group may have."),
    ConfigKey("group.consumer.session.timeout.ms", _parse_int(1, INT_MAX), "45000", "KIP-848 groups: fence a member after this long without a heartbeat.", group_key="consumer.session.timeout.ms"),
    ConfigKey("group.consumer.heartbeat.interval.ms", _parse_int(1, INT_MAX), "5000", "KIP-848 groups: heartbeat interval given to members.", group_key="consumer.heartbeat.interval.ms"),
    ConfigKey("group.consumer.assignors", _parse_str, "uniform,range", "KIP-848 server-side assignors; the first is the default."),
    ConfigKey("group.consumer.max.size", _parse_int(1, INT_MAX), str(INT_MAX), "KIP-848 groups: most members a group may have."),
    ConfigKey("group.share.enable", _parse_bool, "true", "Serve share groups (KIP-932: ShareGroupHeartbeat, ShareGroupDescribe, ShareFetch, ShareAcknowledge, and the share coordinator's APIs 83-87); false: not served nor advertised."),
    ConfigKey("group.share.session.timeout.ms", _parse_int(1, INT_MAX), "45000", "Share groups: remove a member after this long without a heartbeat (records it holds come back when their locks run out, at once on the coordinator's broker).", group_key="share.session.timeout.ms"),
    ConfigKey("group.share.heartbeat.interval.ms", _parse_int(1, INT_MAX), "5000", "Share groups: heartbeat interval given to members.", group_key="share.heartbeat.interval.ms"),
    ConfigKey("group.share.max.size", _parse_int(1, 1000), "200", "Share groups: most members a group may have."),
    ConfigKey("group.share.record.lock.duration.ms", _parse_int(1000, 3600000), "30000", "Share groups: how long a delivered record stays acquired by its consumer before it is delivered again.", group_key="share.record.lock.duration.ms"),
    ConfigKey("group.share.delivery.count.limit", _parse_int(2, 10), "5", "Share groups: deliveries of a record before it is archived (not delivered again).", group_key="share.delivery.count.limit"),
    ConfigKey("group.share.partition.max.record.locks", _parse_int(100, 10000), "2000", "Share groups: most records in flight (acquired or awaiting redelivery) per share-partition."),
    ConfigKey("group.share.max.share.sessions", _parse_int(1, INT_MAX), "2000", "Share groups: most share sessions this broker keeps (SHARE_SESSION_LIMIT_REACHED beyond); a session idle for longer than its group's share.session.timeout.ms is dropped, giving its records back."),
    ConfigKey("group.share.auto.offset.reset", _parse_choice("latest", "earliest"), "latest", "Share groups: where a share-partition starts when the group first consumes it: latest (the high watermark) or earliest (the log start); the default of the group config share.auto.offset.reset.", group_key="share.auto.offset.reset"),
    ConfigKey("group.share.errors.deadletterqueue.topic.name", _parse_str, "", "Share groups: the topic that records a group gives up on (delivery count limit reached, or rejected) are copied to; empty: none. The default of the group config errors.deadletterqueue.topic.name.", group_key="errors.deadletterqueue.topic.name"),
    ConfigKey("errors.deadletterqueue.topic.name.prefix", _parse_str, "dlq.", "Dead-letter topics of share groups must start with this (KIP-1191), so a consumer cannot make the broker write into any topic."),
    ConfigKey("min.insync.replicas", _parse_int(1, 32767), "1", "Smallest ISR that accepts acks=all writes.", "min.insync.replicas"),
    ConfigKey("unclean.leader.election.enable", _parse_bool, "false", "Let the controller elect a replica outside the ISR when no ISR member is alive: the partition comes back online, but acknowledged records the new leader does not have are lost (logged as such).", "unclean.leader.election.enable"),
    ConfigKey("auto.leader.rebalance.enable", _parse_bool, "true", "The active controller moves each partition's leadership back to its preferred replica (the first of its replicas) when that replica is alive and in the ISR, every leader.imbalance.check.interval.seconds."),
    ConfigKey("leader.imbalance.check.interval.seconds", _parse_int(1, INT_MAX), "300", "How often the active controller looks for partitions not led by their preferred replica."),
]

BROKER_KEYS: dict[str, ConfigKey] = {k.name: k for k in _BROKER_KEYS}

# Aliases Kafka users type; mapped onto the canonical key.
_ALIASES = {
    "broker.id": "node.id",
    "log.dir": "log.dirs",
    "log.roll.hours": "log.roll.ms",
    "log.retention.hours": "log.retention.ms",
    "log.retention.minutes": "log.retention.ms",
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
# topic configs, as Kafka's DynamicLogConfig.
DYNAMIC_BROKER_KEYS: frozenset[str] = frozenset(broker_key for _parse, broker_key in TOPIC_KEYS.values())
# Topic keys the Rust log engine understands (the rest are broker-side policies).
LOG_ENGINE_KEYS = (
    "segment.bytes", "segment.ms", "segment.index.bytes", "index.interval.bytes",
    "retention.ms", "retention.bytes", "flush.messages", "flush.ms",
    "message.timestamp.type", "producer.id.expiration.ms", "cleanup.policy",
    "delete.retention.ms", "min.compaction.lag.ms", "max.compaction.lag.ms", "min.cleanable.dirty.ratio",
    "retention.archive",
)


def _engine_name(topic_key: str) -> str:
    # Kafka's topic key is max.message.bytes; the engine calls it message.max.bytes.
    return "message.max.bytes" if topic_key == "max.message.bytes" else topic_key


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
            if spec is None:
                raise ConfigError(f"unknown configuration key {key!r} (value {text!r})")
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
        return int(self._values[key])  # type: ignore[arg-type]

    def get_bool(self, key: str) -> bool:
        return bool(self._values[key])

    def get_str(self, key: str) -> str:
        return str(self._values[key])

    @property
    def node_id(self) -> int:
        return self.get_int("node.id")

    @property
    def data_dir(self) -> Path:
        return Path(self.get_str("log.dirs").split(",")[0])

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
                raise ConfigError(f"inter.broker.listener.name={chosen} is not one of the listeners "
                                  f"{self.get_str('listeners')!r}")
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
        raise ConfigError(f"listener {listener} has no security protocol in listener.security.protocol.map="
                          f"{self.get_str('listener.security.protocol.map')!r}")

    @functools.cached_property
    def client_sasl(self) -> bool:
        """Whether any client listener authenticates with SASL (SASL_PLAINTEXT, SASL_SSL)."""
        return any(self.security_protocol(name).startswith("SASL_") for name, _, _ in self.client_listeners)

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
            raise ConfigError(f"{key}={mechanism} must be in sasl.enabled.mechanisms ({','.join(enabled)}) when "
                              f"listener {listener} is {protocol}: nodes authenticate to each other on it")
        if controller and mechanism != "PLAIN":
            raise ConfigError(f"{key}={mechanism}: the controller listener {listener} authenticates nodes with PLAIN "
                              "only. SCRAM users are stored in the metadata log, which the controllers can read only "
                              "once they reach each other; use PLAIN with the nodes' users as user_<name> entries of "
                              f"listener.name.{listener.lower()}.plain.sasl.jaas.config (over SASL_SSL to keep the "
                              "password off the wire)")
        jaas_key = f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
        jaas = self.jaas_config(mechanism, listener)
        if not jaas:
            raise ConfigError(f"listener {listener} is {protocol} between nodes: set {jaas_key} with this node's "
                              f"username=\"...\" password=\"...\" ({mechanism} login module, as Kafka)")
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
        if self.quorum_voters:
            self.node_sasl(primary)  # checks mechanism and credentials of a SASL inter-broker listener
            self.node_sasl(self.get_str("controller.listener.names").upper())
        if protocol != "PLAINTEXT" and self.get_str("console.listen"):
            raise ConfigError(f"console.listen with a {protocol} primary listener ({primary}): the console is a Kafka "
                              "client of its broker and needs a PLAINTEXT listener; add one (e.g. "
                              "INTERNAL://127.0.0.1:9091 with INTERNAL:PLAINTEXT and inter.broker.listener.name=INTERNAL)")

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
        if self.get_str("ssl.key.password"):
            raise ConfigError("ssl.key.password: encrypted private keys are not supported; give the key unencrypted "
                              "(openssl pkey -in key.pem -out plain.pem) and keep the file private")

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
            raise ConfigError(f"listener {listener} is {protocol}: set ssl.keystore.location (a PEM file with the key and "
                              "certificate chain), or ssl.keystore.certificate.chain and ssl.keystore.key")
        trust = pem("ssl.truststore.location", "ssl.truststore.certificates")
        auth = self.ssl_client_auth(listener)
        if auth != "none" and trust is None:
            raise ConfigError(f"ssl.client.auth={auth} needs ssl.truststore.location (the CAs of client certificates)")
        return keystore, key, trust, auth

    @property
    def controller_listen(self) -> tuple[str, int] | None:
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
        return parse_voters(self.get_str("controller.quorum.voters"))

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
        if not self.is_broker:
            if not voters:
                raise ConfigError("process.roles=controller needs controller.quorum.voters: a controller-only node is "
                                  "one of the voters, and brokers reach it on its controller listener")
            ctl = self.get_str("controller.listener.names").upper()
            others = [n for n in parse_listeners(self.get_str("listeners")) if n != ctl]
            if others:
                raise ConfigError(f"process.roles=controller, but listeners={self.get_str('listeners')!r} has "
                                  f"listener(s) {others} for clients; a controller-only node listens on "
                                  f"{ctl}:// only (as Kafka)")
        if not voters:
            if not self.is_controller:
                raise ConfigError("process.roles=broker needs controller.quorum.voters: a broker-only node follows "
                                  "a controller quorum")
            return
        if not self.is_controller:
            if self.node_id in voters:
                raise ConfigError(f"node.id {self.node_id} is a voter in controller.quorum.voters "
                                  f"{self.get_str('controller.quorum.voters')}, but process.roles=broker; a voter "
                                  f"needs process.roles=broker,controller (or give this broker another node.id)")
            if self.controller_listen is not None:
                raise ConfigError(f"process.roles=broker, but listeners={self.get_str('listeners')!r} has a "
                                  f"{self.get_str('controller.listener.names')}:// listener; only controllers listen "
                                  f"on it")
            return
        if self.node_id not in voters:
            raise ConfigError(f"node.id {self.node_id} is not in controller.quorum.voters {self.get_str('controller.quorum.voters')}")
        ctl = self.controller_listen
        if ctl is None:
            raise ConfigError(f"controller.quorum.voters is set, but listeners={self.get_str('listeners')!r} has no "
                              f"{self.get_str('controller.listener.names')}:// listener")
        adv = self.advertised_controller
        if adv is not None and adv[1] != voters[self.node_id][1]:
            raise ConfigError(f"the advertised controller listener {adv[0]}:{adv[1]} differs from node {self.node_id}'s "
                              f"entry {voters[self.node_id][0]}:{voters[self.node_id][1]} in controller.quorum.voters")
        if adv is None and ctl[1] != voters[self.node_id][1]:
            raise ConfigError(f"the controller listener port {ctl[1]} differs from node {self.node_id}'s entry "
                              f"{voters[self.node_id][0]}:{voters[self.node_id][1]} in controller.quorum.voters")

    def items(self) -> list[tuple[str, object]]:
        return sorted(self._values.items())

    # --- topic-level resolution -------------------------------------------------

    def topic_defaults(self) -> dict[str, str]:
        """Topic-level key -> broker default value, as strings."""
        out = {}
        for topic_key, (_parse, broker_key) in TOPIC_KEYS.items():
            out[topic_key] = _to_str(self._values[broker_key])
        return out

    def resolve_topic(self, overrides: dict[str, str]) -> dict[str, str]:
        merged = self.topic_defaults()
        merged.update(overrides)
        return merged

    def topic_value(self, overrides: dict[str, str], topic_key: str) -> object:
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

    def engine_config(self, topic_overrides: dict[str, str]) -> dict[str, str]:
        """The string map handed to the Rust Log for one topic."""
        resolved = self.resolve_topic(topic_overrides)
        out = {_engine_name(k): resolved[k] for k in LOG_ENGINE_KEYS}
        out["message.max.bytes"] = resolved["max.message.bytes"]
        out["retention.archive"] = "true" if self.topic_value(topic_overrides, "retention.archive") else "false"
        return out


def validate_broker_config(configs: dict[str, str | None]) -> dict[str, str]:
    """Check dynamic broker configs (DYNAMIC_BROKER_KEYS); ConfigError naming the key or
    value, and for a static key, where to set it."""
    out: dict[str, str] = {}
    for key, value in configs.items():
        spec = BROKER_KEYS.get(key)
        if spec is None:
            raise ConfigError(f"unknown broker configuration key {key!r}")
        if key not in DYNAMIC_BROKER_KEYS:
            raise ConfigError(f"broker configuration key {key!r} is static: set it in the broker's config file or "
                              "with --set and restart (the dynamic keys are the broker defaults of topic configs, "
                              "e.g. log.retention.ms, log.segment.bytes, min.insync.replicas)")
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
    return _validate("group", GROUP_KEYS, configs)


def _validate(kind: str, keys: dict[str, tuple[Callable[[str], object], str]],
              configs: dict[str, str | None]) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in configs.items():
        if key not in keys:
            raise ConfigError(f"unknown {kind} configuration key {key!r}"
                              + (f" (known: {', '.join(sorted(keys))})" if kind == "group" else ""))
        if value is None:
            raise ConfigError(f"{kind} configuration key {key!r} has a null value")
        parse, _ = keys[key]
        try:
            out[key] = _to_str(parse(value))
        except ConfigError as e:
            raise ConfigError(f"{kind} configuration {key!r} = {value!r}: {e}") from None
    return out


def _to_str(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def new_cluster_id() -> str:
    """A Kafka-style cluster id: 16 random bytes, URL-safe base64 without padding."""
    import base64

    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
