"""The metadata log of every node: the node's member of the controller quorum's Raft group
(`_core.RaftNode`, driven by `QuorumDriver`, networked by `QuorumTransport` on the
CONTROLLER listener) and the metadata image built by applying its committed records
(`metadata_records`).

A single node (no `controller.quorum.voters`) is a quorum of one voter, Kafka's combined
mode with one node: it elects itself at once (no election timeout to wait) and needs no
controller listener (without one, no peer can reach it). Everything else is as in a
cluster: the same records, the same image, the same snapshots.

A combined node (process.roles=broker,controller) is a voter. A broker-only node
(process.roles=broker) is an observer, Kafka's word, a raft-rs learner: it dials the
voters, the leader adds it to the Raft configuration as a learner once it connects, and
from then on it receives (and stores) the metadata log like a voter, but never votes or
campaigns, and its proposals (registration, producer-id blocks) are forwarded to the
leader by Raft.

    <log.dirs>/__cluster_metadata-0/    raft.log, hardstate, snapshot, voters (rust/src/raft)

The Raft leader is the active controller: `Controller` computes a new image as in a single
node and `write`s the records that lead there; every voter applies them in log order and
publishes each new image to its listeners (replica manager, group coordinator). On
restart the node loads its latest snapshot and replays the log after it, so a node's image
is rebuilt from what the quorum committed, nothing else; the broker opens its local logs only
after the records it already knew to be committed are applied (`wait_replayed`), so a
restart never mistakes its own partitions for leftovers.

Each node registers itself once the quorum has a leader: RegisterBroker (epoch = the time
in ms, so a restart always registers above the last one) and FenceBroker unfenced.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import time
from collections.abc import Awaitable, Callable

import trio

from logbroker import _core, gc_policy
from logbroker.common import directory_id as dir_ids
from logbroker.common.config import BrokerConfig, ConfigError, new_cluster_id
from logbroker.coord.metadata.metadata import BrokerRegistration, MetadataImage, MetadataStore
from logbroker.coord.metadata.metadata_delta import MetadataDelta
from logbroker.coord.metadata.metadata_records import (
    MetadataRecordError,
    apply_record,
    decode_batch,
    encode_batch,
    encode_record,
    image_of_snapshot_doc,
    snapshot_doc,
    voters_record,
)
from logbroker.coord.metadata.producer_id_control import ProducerIdControlManager
from logbroker.coord.metadata.quorum import QuorumDriver, QuorumTimeout
from logbroker.coord.metadata.quorum_transport import KafkaConnection, QuorumTransport
from logbroker.coord.peer_security import PLAINTEXT, controller_sasl, controller_security, server_context
from logbroker.log_format import fields
from logbroker.protocol import ErrorCode

log = logging.getLogger("logbroker.quorum")

__all__ = ["MetadataQuorum", "VoterChangeError", "derived_cluster_id", "node_cluster_id"]


class VoterChangeError(Exception):
    """AddRaftVoter / RemoveRaftVoter refused: the Kafka error code and why."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def config_directory_id(config: BrokerConfig) -> str:
    """This node's metadata log directory id (meta.properties `directory.id`), or the zero id
    before the directory exists."""
    path = config.data_dir / "meta.properties"
    try:
        for line in path.read_text().splitlines():
            if line.startswith("directory.id="):
                return line.split("=", 1)[1].strip()
    except OSError:
        pass
    return dir_ids.ZERO


# The election timeout is this many ticks (raft-rs randomises it up to twice that); a leader
# heartbeats every HEARTBEAT_TICKS, a fifth of it.
ELECTION_TICKS = 10
HEARTBEAT_TICKS = 2
SNAPSHOT_VERSION = 1

# (new image, what changed; None after a snapshot load: anything may have)
Publish = Callable[[MetadataImage, "MetadataDelta | None"], Awaitable[None]]


def derived_cluster_id(voters: dict[int, tuple[str, int]]) -> str:
    """The cluster id of a quorum started without `cluster.id`: every voter derives the same
    one from the voter list, so no format step is needed; a node whose data directory holds
    another id refuses to start."""
    text = ",".join(f"{n}@{h}:{p}" for n, (h, p) in sorted(voters.items()))
    return base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()[:16]).decode().rstrip("=")


def node_cluster_id(config: BrokerConfig, store: MetadataStore) -> str:
    """The cluster this node's data directory belongs to, checked against the configuration
    (ConfigError naming both when they differ), and written to a new data directory's
    meta.properties. A cluster's is `cluster.id` or `derived_cluster_id` of its voters; a
    single node keeps the one its data directory has, else `cluster.id`, else a new one."""
    meta = store.read_meta_properties()
    node_id = config.node_id
    if meta.get("node.id") and int(meta["node.id"]) != node_id:
        raise ConfigError(
            f"data directory {store.data_dir} belongs to node.id {meta['node.id']}, "
            f"but this broker is node.id {node_id}"
        )
    configured = config.get_str("cluster.id")
    voters = config.quorum_voters
    if voters:
        cluster_id = configured or derived_cluster_id(voters)
        source = f"configured for cluster {cluster_id} (controller.quorum.voters {config.get_str('controller.quorum.voters')})"
    else:
        cluster_id = configured or meta.get("cluster.id") or new_cluster_id()
        source = f"cluster.id is set to {cluster_id}"
    if meta.get("cluster.id") and meta["cluster.id"] != cluster_id:
        raise ConfigError(
            f"data directory {store.data_dir} belongs to cluster {meta['cluster.id']}, but this node "
            f"is {source}; refusing to start"
        )
    if not meta:
        store.data_dir.mkdir(parents=True, exist_ok=True)
        store.write_meta_properties(cluster_id, node_id)
    elif not meta.get("directory.id"):  # written before directory ids: give the directory one
        store.write_meta_properties(cluster_id, node_id)
    for d in config.log_dirs[1:]:  # the other log directories (JBOD): each has its own meta.properties
        other = MetadataStore(d)
        found = other.read_meta_properties()
        for key, want in (("node.id", str(node_id)), ("cluster.id", cluster_id)):
            if found.get(key) and found[key] != want:
                raise ConfigError(
                    f"log directory {d} belongs to {key} {found[key]}, but this broker's is {want}; refusing to start"
                )
        if not found.get("directory.id"):
            d.mkdir(parents=True, exist_ok=True)
            other.write_meta_properties(cluster_id, node_id)
    return cluster_id


class MetadataQuorum:
    def __init__(self, config: BrokerConfig, local: BrokerRegistration, cluster_id: str) -> None:
        self.config = config
        self.local = local
        self.bootstrap = config.quorum_bootstrap_servers
        # the voters this node is configured with: a single node is the one voter (without a
        # controller listener it has no address); a node joining through bootstrap servers
        # knows none until the leader's snapshot tells it
        self.static_voters = config.quorum_voters or (
            {} if self.bootstrap else {local.node_id: config.controller_listen or ("", 0)}
        )
        # the current voters -> controller listener: the Raft configuration's voters, found in
        # the image's voter directory (Voters records); see `_refresh_voters`
        self.voters = dict(self.static_voters)
        self.observer = not config.is_controller or local.node_id not in self.static_voters
        self.cluster_id = cluster_id
        self.directory_id = config_directory_id(config)
        self.tick_seconds = config.get_int("controller.quorum.election.timeout.ms") / 1000 / ELECTION_TICKS
        self.node: _core.RaftNode | None = None
        serving = config.is_controller and config.controller_listen is not None
        self.serving = serving
        # a single node without a controller listener dials no one: no controller security to set up
        dials = config.in_cluster or serving
        self.transport = QuorumTransport(
            local.node_id,
            cluster_id,
            self.voters,
            observer=self.observer,
            security=controller_security(config) if dials else PLAINTEXT,
            server_tls=server_context(config, config.get_str("controller.listener.names").upper()) if serving else None,
            sasl=controller_sasl(config, lambda: self.image) if serving else None,
            sasl_max_receive=config.get_int("sasl.server.max.receive.size"),
            failed_authentication_delay=config.get_int("connection.failed.authentication.delay.ms") / 1000,
            principal_mapping=config.get_str("ssl.principal.mapping.rules"),
        )
        self.transport.bootstrap = self.bootstrap
        self.driver: QuorumDriver | None = None
        self._snapshot_now = False  # a learner was admitted: snapshot, so it can start from one
        self._replay_to = 0
        self._block_start = -1
        self._rejected: dict[int, str] = {}  # entries every node rejected (index -> why)
        self.image = MetadataImage(cluster_id, 0, {}, {}, 0)
        self.applied_index = 0
        self._published = 0
        self._new = trio.Event()  # records applied, not yet published
        self._published_ev = trio.Event()  # replaced after each publication
        self._publish: Publish | None = None
        self._pending: list[tuple[int, MetadataImage, MetadataDelta | None]] = []
        self.registered_epoch: int | None = None  # this process's registration, once committed
        self.registered = trio.Event()  # set with registered_epoch
        self._registering = False  # register_broker is running
        self._registered_at: dict[int, int] = {}  # node id -> index of its current RegisterBroker
        self._caught_up_at: dict[int, float] = {}  # voter -> last time seen caught up (leader only)
        self.snapshot_bytes = config.get_int("metadata.log.max.record.bytes.between.snapshots")
        self.snapshot_interval = config.get_int("metadata.log.max.snapshot.interval.ms") / 1000
        self.snapshot_index = 0
        self._since_snapshot = 0
        self._snapshot_at = time.monotonic()

    def open(self) -> None:
        """Open the metadata log (after the data directory was checked): start from its
        snapshot, if it has one, then replay the entries after it."""
        self.node = _core.RaftNode(
            self.local.node_id,
            sorted(self.static_voters),
            str(self.config.data_dir / "__cluster_metadata-0"),
            election_tick=ELECTION_TICKS,
            heartbeat_tick=HEARTBEAT_TICKS,
            observer=not self.config.is_controller,
        )
        # a single voter's log is all committed (by it alone), however far its stored
        # commit index got before the last stop
        self._replay_to = self.node.last_index if self.single_voter else self.node.commit_index
        self.driver = QuorumDriver(
            self.node,
            self.transport,
            self._apply,
            install_snapshot=self._install_snapshot,
            tick_seconds=self.tick_seconds,
            on_conf_change=self._refresh_voters,
        )
        held = self.node.stored_snapshot()
        if held is not None:
            index, term, data = held
            self._install_snapshot(index, term, data)
            self.driver.applied_index = index
        self._refresh_voters()
        if self.single_voter:
            self.node.campaign()  # the only voter: leader now, not after an election timeout

    # -- the voter set (KIP-853): Raft's configuration says who votes, the image where they are
    def _refresh_voters(self) -> None:
        """After a configuration change or a new voter directory: the current voters and
        their addresses, this node's part (voter or observer), and whom the transport dials."""
        if self.node is None:
            return
        ids = self.node.voters
        directory = {n: (str(e[0]), int(e[1])) for n, e in self.image.voters.items()}
        current = {n: directory.get(n) or self.static_voters.get(n) or ("", 0) for n in ids}
        if current != self.voters:  # in place: the controller clients hold this dict
            self.voters.clear()
            self.voters.update(current)
        was = self.observer
        self.observer = self.local.node_id not in ids
        if was != self.observer:
            log.info(
                "node %d is now %s of the controller quorum (voters %s)",
                self.local.node_id,
                "an observer" if self.observer else "a voter",
                sorted(ids),
            )
        if self.config.in_cluster:
            self.transport.set_voters(self.voters, not self.observer)

    def initial_voter_directory(self) -> dict[int, list]:
        """The voter directory a new log starts with: the configured voters, with the zero
        directory id (Kafka reports static voters so) and this node's own."""
        return {
            n: [h, p, self.directory_id if n == self.local.node_id else dir_ids.ZERO]
            for n, (h, p) in sorted(self.static_voters.items())
        }

    async def add_voter(self, node_id: int, directory_id: str, endpoint: tuple[str, int], timeout: float) -> None:
        """AddRaftVoter on the active controller: once observer `node_id` has caught up, the
        voter directory gets its endpoint, then Raft's configuration makes it a voter;
        returns when that is committed. VoterChangeError(code, message) otherwise."""
        assert self.node is not None and self.driver is not None
        deadline = trio.current_time() + timeout
        if node_id in self.node.voters:
            raise VoterChangeError(
                ErrorCode.DUPLICATE_VOTER, f"node {node_id} is already a voter (voters {self.node.voters})"
            )
        with trio.move_on_at(deadline):
            while not self._caught_up(node_id):
                self._require_active()
                await trio.sleep(self.tick_seconds)
        if not self._caught_up(node_id):
            raise VoterChangeError(
                ErrorCode.REQUEST_TIMED_OUT,
                f"node {node_id} is not an observer of the metadata "
                f"log that has caught up (observers {self.node.learners}); start it with "
                f"controller.quorum.bootstrap.servers and cluster.id {self.cluster_id} first",
            )
        directory = dict(self.image.voters)
        directory[node_id] = [endpoint[0], endpoint[1], directory_id]
        await self.write([voters_record(directory)], timeout=max(0.1, deadline - trio.current_time()))
        await self._change_voters("add", node_id, deadline)
        log.info(
            "node %d: node %d (directory %s, %s:%d) is a voter of the controller quorum now (voters %s)",
            self.local.node_id,
            node_id,
            directory_id,
            endpoint[0],
            endpoint[1],
            self.node.voters,
            extra=fields(peer=node_id),
        )

    async def remove_voter(self, node_id: int, directory_id: str, timeout: float) -> None:
        """RemoveRaftVoter on the active controller: Raft's configuration drops the voter, then
        the voter directory does; a leader that removed itself hands leadership over."""
        assert self.node is not None and self.driver is not None
        deadline = trio.current_time() + timeout
        held = self.image.voters.get(node_id)
        if node_id not in self.node.voters or (
            held is not None and dir_ids.ZERO not in (held[2], directory_id) and held[2] != directory_id
        ):
            raise VoterChangeError(
                ErrorCode.VOTER_NOT_FOUND,
                f"no voter {node_id} with directory id {directory_id} (voters {self.describe_voters()})",
            )
        await self._change_voters("remove", node_id, deadline)
        directory = {n: e for n, e in self.image.voters.items() if n != node_id}
        await self.write([voters_record(directory)], timeout=max(0.1, deadline - trio.current_time()))
        log.info(
            "node %d: node %d is no longer a voter of the controller quorum (voters %s)",
            self.local.node_id,
            node_id,
            self.node.voters,
            extra=fields(peer=node_id),
        )
        if node_id == self.local.node_id:
            await self.hand_over_leadership(max(0.0, deadline - trio.current_time()))

    async def update_voter(self, node_id: int, directory_id: str, endpoint: tuple[str, int]) -> None:
        """UpdateRaftVoter on the active controller: the voter's new controller endpoint."""
        self._require_active()
        if node_id not in self.image.voters or node_id not in self.voters:
            raise VoterChangeError(
                ErrorCode.VOTER_NOT_FOUND, f"node {node_id} is not a voter (voters {self.describe_voters()})"
            )
        try:
            await self.write(
                [
                    encode_record(
                        "VoterEndpoint", node_id=node_id, host=endpoint[0], port=endpoint[1], directory_id=directory_id
                    )
                ]
            )
        except MetadataRecordError as e:
            raise VoterChangeError(ErrorCode.VOTER_NOT_FOUND, str(e)) from None

    async def _announce_endpoint(self) -> None:
        """A voter that joined through bootstrap servers and whose controller endpoint is not
        the one the voter directory has (it restarted on another address) writes its new one (a VoterEndpoint record, what
        Kafka's voters send UpdateRaftVoter for), so the others dial it there."""
        own = self.config.advertised_controller or self.config.controller_listen
        if own is None or own[0] in ("", "0.0.0.0", "::") or self.config.quorum_voters:
            return  # no address others could dial, or a static voter (its entry is the configuration's)
        await self.wait_replayed()  # what it knew of the configuration and the directory
        while not self.observer:
            held = self.image.voters.get(self.local.node_id)
            if held is None or (held[0], held[1]) == own:
                return
            try:
                await self.write(
                    [
                        encode_record(
                            "VoterEndpoint",
                            node_id=self.local.node_id,
                            host=own[0],
                            port=own[1],
                            directory_id=self.directory_id,
                        )
                    ],
                    timeout=10,
                )
                log.info(
                    "node %d: its controller endpoint in the voter directory is %s:%d now (was %s:%d)",
                    self.local.node_id,
                    own[0],
                    own[1],
                    held[0],
                    held[1],
                )
            except (QuorumTimeout, MetadataRecordError) as e:
                log.warning("node %d: controller endpoint not updated yet, retrying: %s", self.local.node_id, e)
                await trio.sleep(1)

    def describe_voters(self) -> str:
        return ", ".join(f"{n} ({self.image.voters.get(n, ['', 0, dir_ids.ZERO])[2]})" for n in sorted(self.voters))

    def _require_active(self) -> None:
        if not self.is_active:
            raise VoterChangeError(
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
                f"node {self.local.node_id} is not the active controller (leader {self.leader_id or 'unknown'})",
            )

    def _caught_up(self, node_id: int) -> bool:
        assert self.node is not None
        if node_id not in self.node.learners:
            return False
        commit = self.node.commit_index
        return any(n == node_id and matched >= commit for n, matched, _active in self.node.progress())

    async def _change_voters(self, kind: str, node_id: int, deadline: float) -> None:
        assert self.node is not None and self.driver is not None
        context = json.dumps({"change": kind, "node_id": node_id}).encode()
        with trio.move_on_at(deadline):
            while True:
                self._require_active()
                try:
                    proposed = await self.driver.propose_voter_change(kind, node_id, context)
                except _core.RaftError as e:
                    raise VoterChangeError(ErrorCode.INVALID_REQUEST, str(e)) from None
                if proposed:
                    break
                await self._tick()
            while (node_id in self.node.voters) != (kind == "add"):
                await self._tick()
            return
        raise VoterChangeError(
            ErrorCode.REQUEST_TIMED_OUT,
            f"the change ({kind} voter {node_id}) did not commit in "
            f"time (voters {self.node.voters}, leader {self.leader_id or 'unknown'})",
        )

    async def _tick(self) -> None:
        await trio.sleep(self.tick_seconds)

    # -- snapshots: what bounds the metadata log
    def _snapshot_state(self) -> tuple[int, Callable[[], bytes]]:
        """The applied state at `applied_index` and a function building its payload: the
        image, the proposal contexts of the dedupe window (so a duplicate after the snapshot
        is still recognised) and where each broker registered. JSON: {"version": 1, "image":
        ..., "recent": [hex], "registered_at": {id: index}}. Published images are never
        changed, so the payload can be built in a worker thread while the loop goes on."""
        assert self.driver is not None
        image, recent, registered = self.image, self.driver.recent_contexts(), dict(self._registered_at)

        def payload() -> bytes:
            doc = {
                "version": SNAPSHOT_VERSION,
                "image": snapshot_doc(image),
                "recent": [c.hex() for c in recent],
                "registered_at": {str(n): i for n, i in sorted(registered.items())},
            }
            return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()

        return self.applied_index, payload

    def _install_snapshot(self, index: int, term: int, data: bytes) -> None:
        """Load a snapshot (our own at start, or the leader's when this node was too far
        behind): it replaces the image wholesale."""
        assert self.driver is not None
        try:
            doc = json.loads(data)
            if doc.get("version") != SNAPSHOT_VERSION:
                raise ValueError(f"snapshot version {doc.get('version')!r}, expected {SNAPSHOT_VERSION}")
            image = image_of_snapshot_doc(doc["image"], self.leader_id)
        except (ValueError, KeyError, TypeError) as e:
            raise MetadataRecordError(
                f"node {self.local.node_id}: metadata snapshot at index {index} (term {term}, "
                f"{len(data)} bytes) does not load: {e}"
            ) from None
        self.driver.restore_recent([bytes.fromhex(c) for c in doc.get("recent", [])])
        self._registered_at = {int(n): i for n, i in doc.get("registered_at", {}).items()}
        self.image = image
        self._refresh_voters()
        self.applied_index = index
        self.snapshot_index = index
        self._since_snapshot = 0
        self._pending.append((index, image, None))
        self._new.set()
        log.info(
            "node %d: loaded the metadata snapshot at index %d (term %d, %d bytes): %d broker(s), %d topic(s)",
            self.local.node_id,
            index,
            term,
            len(data),
            len(image.brokers),
            len(image.topics),
        )

    async def _maybe_snapshot(self) -> None:
        """Snapshot the applied image once `metadata.log.max.record.bytes.between.snapshots`
        bytes of records were applied since the last one, or records were applied and
        `metadata.log.max.snapshot.interval.ms` passed since it (Kafka's two triggers); the
        log before it is dropped, so restart and a new node's catch-up stay bounded."""
        due = self._since_snapshot >= self.snapshot_bytes or (
            self._since_snapshot > 0 and time.monotonic() - self._snapshot_at >= self.snapshot_interval
        )
        if self._snapshot_now and self.applied_index > 0:
            due, self._snapshot_now = True, False
        if not due or self.node is None:
            return
        index, build = self._snapshot_state()  # consistent: no await between
        payload = await trio.to_thread.run_sync(build)
        try:
            await trio.to_thread.run_sync(self.node.compact, index, payload)
        except _core.RaftError as e:
            log.warning("node %d: metadata snapshot at index %d not taken: %s", self.local.node_id, index, e)
            return
        self._since_snapshot = 0
        self._snapshot_at = time.monotonic()
        self.snapshot_index = index
        log.info(
            "node %d: metadata snapshot at index %d (%d bytes); the log before it is dropped",
            self.local.node_id,
            index,
            len(payload),
        )

    async def allocate_producer_ids(self, size: int) -> int:
        """A block of `size` producer ids for this broker, from any node (the proposal goes to
        the leader through Raft); returns its first id."""
        self._block_start = -1
        await self.write(ProducerIdControlManager().allocate_block(self.local.node_id, size).records)
        if self._block_start < 0:
            raise QuorumTimeout(f"node {self.local.node_id}: the producer-id block was not granted")
        return self._block_start

    async def wait_replayed(self) -> None:
        """Until the entries this node already knew to be committed are applied and their
        images published (Raft's own entries count as applied, they change nothing)."""
        assert self.driver is not None
        while self.driver.applied_index < self._replay_to or self._pending or self._published < self.applied_index:
            await trio.sleep(0.01)

    def registered_index(self, node_id: int) -> int:
        """The metadata-log index of the broker's current registration: a broker whose
        heartbeat reports a lower applied index has not caught up with its own registration."""
        return self._registered_at.get(node_id, 0)

    async def hand_over_leadership(self, timeout: float) -> None:
        """On the leader (controlled shutdown): hand Raft leadership to a caught-up, recently
        active voter and wait until it took over, so the quorum need not wait an election
        timeout after this node stops. Does nothing if no voter qualifies."""
        assert self.node is not None and self.driver is not None
        with trio.move_on_after(max(0.0, timeout)):
            while self.is_active:
                last = self.node.last_index
                learners = set(self.node.learners)  # observers cannot lead
                ready = [
                    n
                    for n, matched, active in self.node.progress()
                    if n != self.local.node_id and n not in learners and active and matched >= last
                ]
                if not ready:
                    log.info(
                        "node %d: no caught-up voter to hand controller leadership to; stopping as leader",
                        self.local.node_id,
                    )
                    return
                self.driver.transfer_leader(ready[0])
                with trio.move_on_after(2 * self.tick_seconds * ELECTION_TICKS):
                    while self.is_active:
                        await trio.sleep(self.tick_seconds)
            log.info(
                "node %d handed controller leadership to node %d",
                self.local.node_id,
                self.leader_id,
                extra=fields(peer=self.leader_id),
            )

    def describe(self) -> dict:
        """The quorum as the leader sees it (for DescribeQuorum): leader, term, commit index
        and, per voter and per observer, its matched index and wall-clock times of its last
        message and of the last time it was seen caught up."""
        assert self.node is not None
        now = time.time()
        last = self.node.last_index
        learners = set(self.node.learners)
        voters, observers = [], []
        for n, matched, _active in self.node.progress():
            if n == self.local.node_id:
                voters.append((n, last, -1, int(now * 1000)))
                continue
            heard = self.transport.last_heard.get(n)
            if matched >= last and heard is not None:
                self._caught_up_at[n] = heard
            caught = self._caught_up_at.get(n)
            (observers if n in learners else voters).append(
                (n, matched, -1 if heard is None else int(heard * 1000), -1 if caught is None else int(caught * 1000))
            )
        return {
            "leader_id": self.leader_id,
            "term": self.node.term,
            "commit_index": self.node.commit_index,
            "voters": voters,
            "observers": observers,
            "directory_ids": {n: str(e[2]) for n, e in self.image.voters.items()},
        }

    @property
    def single_voter(self) -> bool:
        """This node is the quorum's only voter (a single node): it leads from the start."""
        if self.node is not None:
            return self.node.voters == [self.local.node_id]
        return set(self.static_voters) == {self.local.node_id} and not self.observer

    @property
    def leader_id(self) -> int:
        return 0 if self.node is None else self.node.leader_id

    @property
    def is_active(self) -> bool:
        return self.node is not None and self.node.role == "leader"

    def _apply(self, index: int, data: bytes) -> None:
        """Apply one committed entry: its records, all or nothing, to a delta over the
        current image (copying only what they change; metadata_delta.py)."""
        delta = MetadataDelta(self.image)
        block_start = -1
        try:
            for rec in decode_batch(data):
                if rec["type"] == "ProducerIdBlock" and rec.get("broker_id") == self.local.node_id:
                    block_start = delta.image.next_producer_id  # ours: it starts where the log says
                apply_record(delta, rec)
                if rec["type"] == "RegisterBroker":
                    self._registered_at[rec["node_id"]] = index
        except (MetadataRecordError, ValueError, TypeError, AttributeError) as e:
            # every node rejects the same entry the same way: the image stays as it was
            log.error(
                "node %d: metadata log entry %d (%d bytes) rejected, image unchanged: %s",
                self.local.node_id,
                index,
                len(data),
                e,
            )
            self._rejected[index] = str(e)
            delta = MetadataDelta(self.image)  # nothing changed, but the entry is published
            image = self.image
        else:
            if block_start >= 0:
                self._block_start = block_start
            image = delta.image
            image.controller_id = self.leader_id
            if delta.features_changed:
                image.features_epoch = index
        self.image = image
        if delta.voters_changed:
            self._refresh_voters()
        self.applied_index = index
        self._since_snapshot += len(data)
        self._pending.append((index, image, delta))
        self._new.set()

    async def write(self, records: list[bytes], timeout: float = 10.0) -> None:
        """Append the records as one entry; returns once this node applied and published it."""
        if not records:
            return
        data = encode_batch(records)
        assert self.driver is not None
        index = await self.driver.propose(data, timeout=timeout)
        await self.wait_published(index)
        why = self._rejected.pop(index, None)
        if why is not None:
            raise MetadataRecordError(f"metadata log entry {index} was rejected: {why}")

    async def wait_published(self, index: int) -> None:
        while self._published < index:
            await self._published_ev.wait()

    async def run(
        self, publish: Publish, kafka: KafkaConnection | None = None, *, task_status=trio.TASK_STATUS_IGNORED
    ) -> None:
        """Run the voter; `publish` receives every new image in order; `kafka` serves the
        Kafka connections of the controller listener (controller_channel.py)."""
        self._publish = publish
        assert self.driver is not None
        async with trio.open_nursery() as nursery:
            await nursery.start(self.driver.run)
            if self.serving:  # a controller (a voter, or joining): its listener, and it dials the voters
                listen = self.config.controller_listen
                assert listen is not None
                await nursery.start(self.transport.serve, listen[0], listen[1], self.driver.receive, kafka)
                nursery.start_soon(self._admit_observers)
            elif self.config.in_cluster:  # a broker-only node: it dials the voters
                await nursery.start(self.transport.run_observer, self.driver.receive)
            nursery.start_soon(self._publisher)
            nursery.start_soon(self._register)
            task_status.started()

    async def _admit_observers(self) -> None:
        """On the leader: every connected observer that is not a learner yet is proposed as one."""
        assert self.node is not None and self.driver is not None
        learners = set(self.node.learners)
        while True:
            await trio.sleep(self.tick_seconds * HEARTBEAT_TICKS)
            if self.is_active:
                now = set(self.node.learners)
                if now - learners:
                    # a new learner may have an empty log: snapshot, so the log it is sent
                    # starts with a configuration that names it (rust/src/raft/node.rs)
                    self._snapshot_now = True
                    self._new.set()
                learners = now
                waiting = set(self.transport.observers) - now - set(self.node.voters)
                if waiting:
                    self.driver.add_learners(waiting)

    async def _publisher(self) -> None:
        while True:
            with trio.move_on_after(self.snapshot_interval):  # the time trigger fires when idle too
                await self._new.wait()
            self._new = trio.Event()
            pending, self._pending = self._pending, []
            grew = False
            for index, image, delta in pending:
                assert self._publish is not None
                await self._publish(image, delta)
                self._published = index
                grew = grew or (delta is not None and len(image.topics) > len(delta.base.topics))
            gc_policy.after_publish(grew)
            ev, self._published_ev = self._published_ev, trio.Event()
            ev.set()
            await self._maybe_snapshot()

    async def _register(self) -> None:
        b = self.local
        if not self.config.is_broker:  # a controller-only node: known as such, never a broker
            await self._register_controller()
            self.registered.set()
            log.info("node %d registered as a controller-only node (leader %d)", b.node_id, self.leader_id)
            await self._announce_endpoint()
            # UnregisterController removed the registration of a controller that still runs:
            # it registers again, as Kafka's ControllerRegistrationManager does
            while True:
                await trio.sleep(1.0)
                if b.node_id not in self.image.controllers:
                    log.warning("node %d: its controller registration was removed; registering again", b.node_id)
                    await self._register_controller()
            return
        await self.register_broker()

    async def _register_controller(self) -> None:
        b = self.local
        while b.node_id not in self.image.controllers:
            try:
                await self.write(
                    [encode_record("RegisterController", node_id=b.node_id, host=b.host, port=b.port)], timeout=10
                )
            except (QuorumTimeout, MetadataRecordError) as e:
                log.warning("node %d: controller registration not committed yet, retrying: %s", b.node_id, e)

    async def register_broker(self) -> None:
        """Register this broker (RegisterBroker at a new epoch, unfenced): at start, and again
        when its registration was removed while it runs (UnregisterBroker; broker_lifecycle.py)."""
        if self._registering:
            return
        self._registering = True
        try:
            await self._register_broker()
        finally:
            self._registering = False

    async def _register_broker(self) -> None:
        b = self.local
        while True:
            epoch = max(int(time.time() * 1000), self._last_epoch() + 1)
            extra = {"endpoints": b.endpoints} if b.endpoints else {}
            records = [
                encode_record(
                    "RegisterBroker", node_id=b.node_id, epoch=epoch, host=b.host, port=b.port, rack=b.rack, **extra
                ),
                encode_record("FenceBroker", node_id=b.node_id, epoch=epoch, fenced=False),
            ]
            try:
                await self.write(records, timeout=10)
                self.registered_epoch = epoch
                self.registered.set()
                log.info(
                    "node %d registered with the controller quorum (epoch %d, leader %d)",
                    b.node_id,
                    epoch,
                    self.leader_id,
                    extra=fields(peer=self.leader_id),
                )
                await self._announce_endpoint()
                return
            except (QuorumTimeout, MetadataRecordError) as e:
                log.warning("node %d: registration not committed yet, retrying: %s", b.node_id, e)

    def _last_epoch(self) -> int:
        old = self.image.brokers.get(self.local.node_id)
        return -1 if old is None else old.epoch
