"""Type stubs for logbroker._core, the Rust storage engine (rust/src/py/).

Blocking methods release the GIL; call them from trio via trio.to_thread.run_sync.
Offsets, HW and log start offset getters are lock-free.
"""

import os
from collections.abc import Callable
from typing import Any, final

from typing_extensions import Buffer

__version__: str
__all__ = [
    "AccumulatorError",
    "AppendResult",
    "Authorizer",
    "ClientQuotas",
    "CompactionResult",
    "ConsumerRecord",
    "CoordinatorFencedError",
    "CorruptRecordError",
    "FileRegion",
    "InvalidConfigError",
    "InvalidProducerEpochError",
    "InvalidRecordError",
    "InvalidTxnStateError",
    "KafkaProtocolError",
    "KafkaStorageError",
    "Log",
    "LogBrokerError",
    "NetworkServer",
    "OffsetOutOfRangeError",
    "OutOfOrderSequenceError",
    "PartitionTable",
    "ProducerBatch",
    "RecordAccumulator",
    "RecordFuture",
    "RecordMetadata",
    "RecordSet",
    "RecordTooLargeError",
    "RemoteObjectNotFoundError",
    "RemoteStorage",
    "RemoteStorageError",
    "TableDataFileError",
    "TableDataFiles",
    "TableKeyIndex",
    "ReplicaFetcherManager",
    "ReplicaPartition",
    "Waker",
    "__version__",
    "certificate_principal",
    "crc32c",
    "data_path_apis",
    "decode_columns",
    "decode_records",
    "decode_registry_values",
    "encode_registry_values",
    "decompress",
    "jws_verify",
    "encode_batch",
    "murmur2",
    "partition_for_key",
    "NoLeaderError",
    "RaftError",
    "RaftNode",
    "protocol_decode",
    "protocol_encode",
    "protocol_encode_frame",
    "protocol_reencode",
    "read_offset_checkpoint",
    "share_record_facts",
    "sync_filesystem",
    "roll_and_flush",
    "validate_batches",
    "write_offset_checkpoint",
]

class LogBrokerError(Exception): ...
class CorruptRecordError(LogBrokerError): ...
class RecordTooLargeError(LogBrokerError): ...
class InvalidRecordError(LogBrokerError): ...
class OffsetOutOfRangeError(LogBrokerError): ...
class OutOfOrderSequenceError(LogBrokerError): ...
class InvalidProducerEpochError(LogBrokerError): ...
class InvalidTxnStateError(LogBrokerError): ...
class CoordinatorFencedError(LogBrokerError): ...
class KafkaStorageError(LogBrokerError): ...
class InvalidConfigError(LogBrokerError): ...
class RaftError(Exception): ...
class NoLeaderError(RaftError): ...

class RemoteStorageError(Exception):
    """Tiered storage: the object store failed or refused, an object is corrupt, or its URL is unusable."""

class RemoteObjectNotFoundError(RemoteStorageError):
    """Tiered storage: an object the metadata names is not in the store."""

class TableDataFileError(Exception):
    """An Iceberg topic's data files: the table's schema or writer settings, or a file that cannot be written."""

class KafkaProtocolError(ValueError): ...

@final
class AppendResult:
    @property
    def base_offset(self) -> int: ...
    @property
    def last_offset(self) -> int: ...
    @property
    def record_count(self) -> int: ...
    @property
    def batch_count(self) -> int: ...
    @property
    def max_timestamp(self) -> int: ...
    @property
    def log_append_time(self) -> int: ...
    @property
    def log_start_offset(self) -> int: ...
    @property
    def duplicate(self) -> bool: ...
    @property
    def size_bytes(self) -> int: ...

@final
class CompactionResult:
    """What one log-cleaner pass (Log.compact) did; all zero when it did not run."""

    @property
    def segments_cleaned(self) -> int:
        """Segments rewritten (a pass merges small neighbours into one cleaned segment)."""
    @property
    def bytes_before(self) -> int:
        """Size of the rewritten segments before the pass."""
    @property
    def bytes_after(self) -> int:
        """Size of the segments that replaced them."""
    @property
    def records_removed(self) -> int:
        """Records dropped: superseded by a later record of the same key, keyless, or expired tombstones."""
    @property
    def tombstones_removed(self) -> int:
        """Tombstones dropped because their delete horizon (delete.retention.ms) had passed."""
    @property
    def cleaned_up_to(self) -> int:
        """The cleaner checkpoint after the pass: segments entirely below this offset are clean."""
    @property
    def dirty_ratio(self) -> float:
        """Dirty bytes / cleanable bytes when the pass was considered (0.0 if nothing was cleanable)."""

@final
class FileRegion:
    @property
    def fd(self) -> int: ...
    @property
    def position(self) -> int: ...
    @property
    def length(self) -> int: ...
    @property
    def is_file_region(self) -> bool: ...
    def __len__(self) -> int: ...
    def send(self, sock_fd: int, offset: int, count: int) -> int: ...
    def write_to(self, sock_fd: int, offset: int, count: int) -> int: ...
    def read(self) -> bytes: ...

@final
class Log:
    @staticmethod
    def open(
        dir: str,
        topic: str,
        partition: int,
        config: dict[str, str],
        recovery_point: int | None = None,
        now_ms: int = 0,
        sync_dir: bool = True,
    ) -> Log:
        """sync_dir=False: what opening changed in the directory is durable only after sync_filesystem."""
    @staticmethod
    def create(dir: str, topic: str, partition: int, config: dict[str, str], now_ms: int = 0) -> Log:
        """A new partition's log: a directory already at `dir` is removed first."""
    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def dir(self) -> str: ...
    @property
    def log_start_offset(self) -> int: ...
    @property
    def log_end_offset(self) -> int: ...
    @property
    def high_watermark(self) -> int: ...
    @property
    def recovery_point(self) -> int: ...
    @property
    def size_bytes(self) -> int: ...
    @property
    def segment_count(self) -> int: ...
    @property
    def segment_base_offsets(self) -> list[int]: ...
    @property
    def recovery_report(self) -> tuple[bool, int, int, int, str | None]: ...
    @property
    def closed(self) -> bool: ...
    def update_high_watermark(self, hw: int) -> int: ...
    def append_as_leader(self, records: Buffer, leader_epoch: int, now_ms: int) -> AppendResult: ...
    def append_records_as_leader(
        self,
        records: list[tuple[bytes | None, bytes | None]],
        leader_epoch: int,
        now_ms: int,
        compression: str = "none",
    ) -> AppendResult:
        """Builds one batch from (key, value) pairs in Rust and appends it as the leader.

        Every record gets timestamp now_ms; no producer id. compression is "none", "gzip",
        "snappy", "lz4" or "zstd" (ValueError otherwise). An empty list raises
        InvalidRecordError; so does a null key when cleanup.policy contains compact.
        """
    def append_as_follower(self, records: Buffer) -> AppendResult:
        """Appends batches fetched from the leader, keeping their offsets.

        Base offsets must not go backwards (InvalidRecordError); gaps are accepted, since a
        compacted leader's log has them.
        """
    def read(
        self, fetch_offset: int, max_bytes: int, max_offset: int | None = None, min_one_message: bool = True
    ) -> FileRegion | None: ...
    def read_records(
        self, start_offset: int, max_offset: int | None = None, max_records: int | None = None
    ) -> list[tuple[int, int, bytes | None, bytes | None]]:
        """(offset, timestamp, key, value) of every non-control record in [start_offset, max_offset).

        max_offset None means the log end offset (pass high_watermark for committed data
        only). Compressed batches are decompressed; offsets removed by compaction are simply
        absent. Stops after max_records records. start_offset outside [log_start_offset,
        log_end_offset] raises OffsetOutOfRangeError. Releases the GIL for the scan.
        """
    def read_records_with_markers(
        self, start_offset: int, max_offset: int | None = None
    ) -> list[tuple[int, int, bytes | None, bytes | None, int, bool, bool | None]]:
        """As read_records, as (offset, timestamp, key, value, producer_id, transactional, marker),
        plus one entry per transaction marker: marker True (COMMIT) or False (ABORT), key and
        value None. For coordinators that replay transactional writes."""
    def append_end_txn_marker(
        self,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        coordinator_epoch: int,
        leader_epoch: int,
        now_ms: int,
        transaction_version: int,
    ) -> AppendResult:
        """Writes a transaction's end marker as the leader (WriteTxnMarkers).
        `transaction_version` 2 (KIP-1228): a marker at the producer's epoch while a
        transaction of that epoch is open is stale, InvalidProducerEpoch.

        Closes the producer's open transaction; an ABORT enters the aborted-transaction
        index. InvalidProducerEpochError for an older producer epoch, CoordinatorFencedError
        for an older coordinator epoch than the last marker's."""
    def last_stable_offset(self) -> int:
        """min(first offset of the oldest open transaction, high watermark)."""
    def first_unstable_offset(self) -> int | None: ...
    def aborted_transactions(self, fetch_offset: int, upper: int) -> list[tuple[int, int]]:
        """(producer_id, first_offset) of aborted transactions overlapping [fetch_offset, upper)."""
    def ongoing_transactions(self) -> list[tuple[int, int]]:
        """(first_offset, producer_id) of the open transactions, oldest first."""
    def compact(self, now_ms: int, force: bool = False) -> CompactionResult:
        """One log-cleaner pass; call it periodically (every log.cleaner.backoff.ms).

        A no-op (all-zero result) unless cleanup.policy contains "compact". Cleans only
        inactive segments entirely below min(high watermark, active segment base) and, among
        the not-yet-clean ones, only those whose newest record is older than
        min.compaction.lag.ms. Runs when force, or when there are dirty bytes and either the
        dirty ratio reaches min.cleanable.dirty.ratio or the oldest dirty batch is older than
        max.compaction.lag.ms. Keeps the latest record of each key at its original offset;
        drops superseded and keyless records and tombstones whose delete horizon
        (delete.retention.ms after the first pass that kept them) has passed. Offsets stay
        where they were (the log becomes sparse). Crash-safe (.cleaned/.swap files,
        cleaner-offset-checkpoint). Appends and reads continue while it rewrites; returns at
        once if another pass is running on this log. Releases the GIL.
        """
    def copy_to(self, future: Log, max_bytes: int) -> tuple[int, int]:
        """One round of moving this replica to another log directory: `future` (this
        partition's log there) is cut back where it diverges, then the batches from its end on
        are appended to it (at most max_bytes, at least one batch), with this log's HW and log
        start. Returns (future LEO, this LEO). Releases the GIL."""
    def read_batches(
        self, fetch_offset: int, max_bytes: int, max_offset: int | None = None
    ) -> tuple[bytes, int] | None:
        """Whole batches from the one holding fetch_offset, copied, with the exclusive upper offset they cover."""
    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None: ...
    def max_timestamp(self) -> tuple[int, int]: ...
    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]: ...
    def latest_epoch(self) -> int | None: ...
    def epoch_entries(self) -> list[tuple[int, int]]: ...
    def truncate_to(self, offset: int) -> None: ...
    def truncate_fully_and_start_at(self, offset: int) -> None: ...
    def delete_records_before(self, offset: int) -> int: ...
    def enforce_retention(self, now_ms: int) -> int:
        """Deletes segments below the log start and, if cleanup.policy contains "delete",
        beyond retention.ms / retention.bytes (with retention.archive: only below the log
        start); returns how many were deleted."""
    def retention_plan(self, now_ms: int) -> list[tuple[int, int]]:
        """The [first, end) offset ranges of the segments time/size retention would delete."""
    @property
    def highest_remote_offset(self) -> int:
        """Tiered storage: the last offset copied (-1: none); retention deletes no local segment above it."""
    @highest_remote_offset.setter
    def highest_remote_offset(self, offset: int) -> None: ...
    @property
    def remote_log_start(self) -> int:
        """Tiered storage: the first offset of the remote copies (-1: none); below the local log start the cleaner keeps tombstones."""
    @remote_log_start.setter
    def remote_log_start(self, offset: int) -> None: ...
    def cleaned_segments(self) -> list[tuple[int, int, int]]:
        """(base offset, last offset, bytes) of the rolled segments the cleaner has cleaned, below the LSO: a compacted topic's copies."""
    def upload_info(self, base_offset: int) -> tuple[int, int, int, int, list[tuple[int, int]]] | None:
        """(base_offset, end_offset, size_bytes, max_timestamp, [(epoch, start)]) of a rolled segment; None if none."""
    def upload_candidates(self, from_offset: int) -> list[tuple[int, int]]:
        """(base offset, bytes) of rolled segments ending at or after from_offset, entirely below the LSO."""
    def maybe_roll(self, now_ms: int) -> bool: ...
    def maybe_flush(self, now_ms: int) -> bool: ...
    def flush(self) -> None: ...
    def update_config(self, config: dict[str, str]) -> None: ...
    @property
    def config(self) -> dict[str, str]:
        """Every engine key (config_keys.toml's `engine = true`) with its value as text."""
    def producer_state(self, producer_id: int) -> tuple[int, int, int] | None: ...
    def active_producers(self) -> list[tuple[int, int, int, int, int, int, int]]:
        """(producer_id, epoch, last_seq, last_timestamp, first offset of last batch, coordinator epoch,
        first offset of the open transaction or -1), by id."""
    def close_unsynced(self) -> None:
        """A batched clean shutdown, step 1: everything close() writes but the marker, without fsyncs."""
    def mark_clean_shutdown(self) -> None:
        """Step 3, after sync_filesystem: the clean-shutdown marker (made durable by another sync_filesystem)."""
    def close(self) -> None: ...
    def delete(self) -> None: ...

def sync_filesystem(path: str) -> None:
    """syncfs(2) of the file system holding path: everything written there is durable."""

def roll_and_flush(logs: list[Log], now_ms: int) -> list[tuple[int, LogBrokerError]]: ...
def write_offset_checkpoint(path: str, entries: list[tuple[str, int, int]]) -> None: ...
def read_offset_checkpoint(path: str) -> list[tuple[str, int, int]]: ...
def crc32c(data: Buffer) -> int: ...
def share_record_facts(
    data: Buffer, header: str, from_offset: int = 0, to_offset: int = ...
) -> tuple[list[int], list[int | None], list[int]]:
    """(offsets, key hashes (None: a null key), not-before ms (-1: none)) of the records in
    `data` (whole batches) with offsets in [from_offset, to_offset), control batches left out
    (rust/src/share_records.rs)."""

def decompress(codec: str, data: Buffer, limit: int) -> bytes: ...
def jws_verify(alg: str, a: bytes, b: bytes, signing_input: bytes, signature: bytes) -> bool:
    """Whether `signature` is JWS algorithm `alg`'s signature of `signing_input` by the key
    (RSA n, e; EC x, y; Ed25519 x, b""): RS/PS 256/384/512, ES256, ES384, EdDSA. ValueError
    for any other algorithm (including "none"). Releases the GIL."""

def validate_batches(records: Buffer) -> list[tuple[int, int, int, int, int]]: ...
def encode_batch(
    records: list[tuple[bytes | None, bytes | None, int, list[tuple[bytes, bytes | None]]]],
    base_timestamp: int = 0,
    compression: str = "none",
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
) -> bytes: ...
def decode_columns(
    records: Buffer,
    start_offset: int,
    end_offset: int,
    include_headers: bool = False,
    aborted: list[tuple[int, int]] | None = None,
) -> dict[str, Any]:
    """Decodes the whole record batches in `records` (a Fetch response's records; a partial
    batch at the end is ignored) into Arrow-layout little-endian buffers, for records with
    offsets in [start_offset, end_offset). CRCs are checked, batches decompressed, control
    batches skipped. Keys: count, next_offset, offset (i64), timestamp_us (i64),
    timestamp_type (i32), {key,value,header_key,header_value}_{validity,offsets,data,nulls}
    (binary columns: bitmap, i32 offsets, bytes, null count), header_list_offsets (i32,
    count+1). Raises CorruptRecordError/InvalidRecordError. Releases the GIL."""

def decode_registry_values(
    count: int,
    validity: Buffer,
    offsets: Buffer,
    data: Buffer,
    schema: Buffer,
    tree: list[tuple[str, list[int]]],
    programs: list[tuple[int, Any]],
) -> tuple[bytes, int, tuple[int, str] | None]:
    """Decodes `count` Confluent-framed values (a binary column's Arrow buffers: validity
    bitmap, i32 offsets, data) into the three columns of `schema` (a serialized pyarrow
    schema: the struct of `tree`, the int32 schema id, the binary raw bytes of a value that
    did not decode), with `programs` ((schema id, program) as TableDataFiles takes them).
    Returns (an Arrow IPC stream of that batch, failures, (row, reason) of the first failure
    or None). Releases the GIL."""

def encode_registry_values(batch: Buffer, schema_id: int, format: str = "avro") -> tuple[bytes, bytes, bytes, int]:
    """Encodes the struct rows of the first column of `batch` (an Arrow IPC stream of one
    record batch) as Confluent-framed values of `schema_id` in `format`: avro, json or
    protobuf (rust/src/avro_encode.rs, json_encode.rs, proto_encode.rs have the writer
    schema's rules); returns a binary column's buffers (validity, i32 offsets,
    data, null count), a null row a null value. Raises ValueError for a type it cannot
    encode, naming the field. Releases the GIL."""

# --- Iceberg topics' data files (rust/src/py/table.rs) ---

@final
class TableDataFiles:
    """The data files of one Iceberg table commit (rust/src/table/): each partition's log
    read, decoded and written as Parquet, one file per day, with the GIL released."""

    def __new__(
        cls,
        schema: Buffer,
        location: str,
        prefix: str,
        codec: str,
        level: int | None,
        row_group_bytes: int,
        target_file_bytes: int,
        value_tree: list[tuple[str, list[int]]] | None = None,
        value_programs: list[tuple[int, Any]] | None = None,
        key_tree: list[tuple[str, list[int]]] | None = None,
        key_programs: list[tuple[int, Any]] | None = None,
        dead_letters: bool = False,
        partition_spec: list[tuple[str, str, str]] | None = None,
    ) -> TableDataFiles:
        """`schema`: the table's pyarrow schema serialized (field ids in PARQUET:field_id);
        `location`: its data location (a path or file: URL is written directly, other URLs
        are kept in memory for `close` to return); `codec`/`level`: write.parquet.compression-*;
        `value_tree` (pre-order (kind, children)) and `value_programs` ((schema id, program) per
        writer schema, see rust/src/avro_columns.rs) for tables with value columns; `key_tree`
        and `key_programs` the same for a `key_struct` column; `dead_letters`: values that do
        not decode become dead letters (`take_dead_letters`) instead of `value_raw`;
        `partition_spec`: the table's spec as (source path, transform, name) per field
        (None: day(timestamp)). Raises
        TableDataFileError for a codec or schema it cannot write."""
    def write_log(
        self, log: Log, start: int, end: int, max_bytes: int, key_index: TableKeyIndex | None = None
    ) -> dict[str, Any]:
        """Writes `log`'s records over [start, end) as read_committed reads them, up to
        `max_bytes` of log (at a batch boundary). Keys: next_offset, rows, read_bytes,
        failures (values kept in value_raw), first_failure ((offset, reason) or None).
        `key_index`: the partition's, for an upsert table (one row per key, position deletes
        for the rows replaced; its changes stand until `key_index.settle`)."""
    def take_dead_letters(self) -> bytes | None:
        """The dead letters written so far (topic, partition, offset, timestamp, key, value,
        value_schema_id, reason; rust/src/table/dead_letters.rs) as an Arrow IPC stream, or None."""
    def close(self) -> list[dict[str, Any]]:
        """Closes the files: [{path, day, partition_values (one per spec field), partition, min_offset, max_offset, rows, bytes,
        contents (bytes, or None when local), deletes (a position delete file),
        path_bounds ((first, last) file_path of a delete file, else None)}]."""
    def abort(self) -> None:
        """Drops the commit, removing the local files written so far."""

@final
class TableKeyIndex:
    """The key index of one partition of an upsert table (rust/src/table/key_index.rs):
    each live key's row as (data file, position)."""

    def __new__(cls) -> TableKeyIndex: ...
    def __len__(self) -> int: ...
    def add_file(
        self,
        path: str,
        day: int,
        validity: Buffer | None,
        offsets: Buffer,
        data: Buffer,
        offset: int,
        length: int,
        deleted: Buffer,
    ) -> int:
        """Adds a data file's live rows from its key column's buffers (a pyarrow
        BinaryArray's) less the positions deleted (int64 little-endian); returns the rows
        found superseded."""
    def settle(self, landed: bool) -> None:
        """Ends the commit that changed it: keeps its changes if it landed, else undoes them."""

# --- Kafka protocol codec (rust/src/py/protocol.rs) ---

def protocol_decode(cls_id: int, buf: Buffer, pos: int, version: int) -> tuple[Any, int]:
    """Decodes one instance of message class `cls_id` (its `_rs`) at buf[pos:]: (object, end).
    Records fields are memoryview slices of buf. Raises KafkaProtocolError naming the field."""

def protocol_encode(cls_id: int, obj: Any, version: int) -> bytes:
    """Encodes `obj` (an instance of message class `cls_id`) at `version`."""

def protocol_encode_frame(
    header_id: int, header: Any, header_version: int, body_id: int, body: Any, version: int
) -> bytes:
    """A whole frame: 4-byte size, header, body."""

def protocol_reencode(api_key: int, version: int, request: bool, body: Buffer) -> tuple[bytes, int]:
    """Decodes a message body with the Rust codec and encodes it again: (bytes, consumed).
    api_key -1 is the request (request=True) or response header. Raises KafkaProtocolError."""

# --- Controller quorum (rust/src/py/raft.rs) ---

@final
class RaftNode:
    """One controller-quorum member (a voter, or with `observer` a learner): raft-rs over a
    durable Raft log in `directory`."""

    def __new__(
        cls,
        node_id: int,
        voters: list[int],
        directory: str | os.PathLike[str],
        election_tick: int = 10,
        heartbeat_tick: int = 2,
        observer: bool = False,
    ) -> RaftNode: ...
    @property
    def node_id(self) -> int: ...
    def tick(self) -> bool: ...
    def step(self, msg: bytes) -> None: ...
    def propose(self, context: bytes, data: bytes) -> None: ...
    def campaign(self) -> None: ...
    def transfer_leader(self, to: int) -> None: ...
    def add_learner(self, node_id: int) -> bool: ...
    def add_voter(self, node_id: int, context: bytes) -> bool: ...
    def remove_voter(self, node_id: int, context: bytes) -> bool: ...
    @property
    def voters(self) -> list[int]: ...
    @property
    def learners(self) -> list[int]: ...
    def ready(
        self,
    ) -> tuple[list[tuple[int, bytes]], tuple[int, int, bytes] | None, list[tuple[int, int, bool, bytes, bytes]]]: ...
    def compact(self, index: int, data: bytes) -> None: ...
    def progress(self) -> list[tuple[int, int, bool]]: ...
    def stored_snapshot(self) -> tuple[int, int, bytes] | None: ...
    @property
    def leader_id(self) -> int: ...
    @property
    def term(self) -> int: ...
    @property
    def role(self) -> str: ...
    @property
    def commit_index(self) -> int: ...
    @property
    def last_index(self) -> int: ...

# --- Network layer (rust/src/py/server.rs) ---

@final
class NetworkServer:
    """The broker's Rust network thread: listeners, connections, frames, responses."""

    def __new__(
        cls,
        listeners: list[tuple[str, str, int, tuple[bytes, bytes, bytes | None, str] | None, bool]],
        max_frame: int,
        queued_max_request_bytes: int,
        idle_ms: int,
        fetch_session_slots: int,
        partitions: PartitionTable,
        sasl_max_receive: int = 524288,
        ssl_principal_mapping_rules: str = "DEFAULT",
    ) -> NetworkServer:
        """`listeners`: (name, host, port, tls, sasl) each; `tls`: (certificate chain PEM,
        private key PEM, truststore PEM, ssl.client.auth) for an SSL or SASL_SSL listener;
        ValueError naming the listener and what is wrong."""
    @property
    def address(self) -> tuple[str, int]: ...
    @property
    def addresses(self) -> list[tuple[str, int]]: ...
    @property
    def notify_fd(self) -> int: ...
    def take_events(
        self,
    ) -> list[
        tuple[
            int,
            bytes | None,
            str,
            str | None,
            int,
            tuple[str, int, int, list[tuple[str, int]], bool, int] | str | None,
            int,
        ]
    ]: ...
    def respond(self, conn: int, chunks: list[Buffer | FileRegion] | None, throttle_ms: int = 0) -> None: ...
    def serve_verified(self, conn: int, frame: bytes, verdicts: list[tuple[str, int, int, str]]) -> None: ...
    def serve_caught_up(self, conn: int) -> None: ...
    def request_stats(self) -> list[tuple[int, int, float, list[int]]]: ...
    def loop_stall(self) -> tuple[float, int]: ...
    @staticmethod
    def latency_buckets_ms() -> list[float]: ...
    def authenticated(self, conn: int, principal: str, session_ms: int | None = None) -> None: ...
    def respond_and_close(self, conn: int, chunks: list[bytes], reason: str) -> None: ...
    def close(self, conn: int, reason: str | None = None) -> None: ...
    def shutdown(self) -> None: ...
    def stats(self) -> dict[str, int]: ...

@final
class Authorizer:
    """ACL authorization, Kafka's StandardAuthorizer rules (rust/src/server/authorizer.rs)."""

    def configure(self, super_users: list[str], allow_if_no_acl: bool) -> None: ...
    @property
    def enabled(self) -> bool: ...
    def set_acls(self, acls: list[tuple[int, str, int, str, str, int, int]]) -> None: ...
    def authorize(self, principal: str, host: str, resource_type: int, name: str, operation: int) -> bool: ...

@final
class ClientQuotas:
    """Produce and fetch byte-rate and request-time quotas, Kafka's precedence and windows
    (rust/src/server/quota.rs)."""

    def configure(self, window_num: int, window_size_ms: int) -> None: ...
    def set_quotas(
        self, quotas: list[tuple[list[tuple[str, str | None]], float | None, float | None, float | None]]
    ) -> None: ...
    def quota_for(self, kind: str, user: str, client_id: str) -> float | None: ...
    def record(self, kind: str, user: str, client_id: str, size: int, now_ms: int) -> int: ...
    @property
    def request_quota_enabled(self) -> bool: ...
    def record_request(self, user: str, client_id: str, nanos: int) -> int: ...
    def stats(self) -> dict[str, int]: ...

@final
class PartitionTable:
    """The partitions Produce and Fetch are served from (rust/src/server/partition.rs)."""

    def __new__(cls) -> PartitionTable: ...
    @property
    def authorizer(self) -> Authorizer: ...
    @property
    def client_quotas(self) -> ClientQuotas: ...
    def add(
        self,
        topic: str,
        index: int,
        node_id: int,
        log: Log,
        leader: int,
        leader_epoch: int,
        isr: list[int],
        min_insync_replicas: int,
    ) -> ReplicaPartition: ...
    def set_schema_registry_active(self, active: bool) -> None: ...
    def set_subject_schema_ids(self, subject: str, ids: list[int]) -> None: ...
    def remove(self, topic: str, index: int) -> None: ...
    def set_rack_aware_selector(self, on: bool) -> None: ...
    def set_verify_transactions_v1(self, on: bool) -> None: ...
    def partition_stats(
        self,
    ) -> list[tuple[str, int, bool, int, int, int, int, int, int, int, int, int]]: ...
    def update_metadata(
        self,
        node_id: int,
        topics: list[tuple[str, bytes, list[tuple[int, int, int]]]],
        removed: list[str],
        brokers: list[tuple[int, str, int, str | None]] | None = None,
    ) -> None: ...

@final
class ReplicaPartition:
    def update(self, leader: int, leader_epoch: int, isr: list[int], min_insync_replicas: int) -> None: ...
    def maybe_increment_hw(self) -> bool: ...
    def watch_high_watermark(self, on: bool) -> None:
        """While on, HW moves are reported on the NetworkServer's notify fd (conn -3)."""
    @property
    def removed(self) -> bool: ...
    @property
    def log_start_offset(self) -> int:
        """The first offset a consumer may fetch: local, or the first copied one when tiered
        lower, or the table's first when the table is the tier."""
    def set_table_tier(self, files: list[tuple[int, int, str]] | None, pending: bool = False) -> None: ...
    @property
    def table_tier_files(self) -> int | None: ...
    def table_offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None: ...
    @property
    def table_tier_pending(self) -> bool: ...
    def follower_states(self) -> list[tuple[int, int, int, int]]: ...

# --- Tiered storage (rust/src/py/remote.rs) ---

@final
class RemoteStorage:
    """Tiered storage's object store (s3://, gs://, az://, file://) and its remote reader."""
    def __new__(
        cls,
        url: str,
        options: dict[str, str],
        reader_threads: int = 10,
        chunk_cache_bytes: int = 268435456,
        index_cache_bytes: int = 1073741824,
        chunk_size: int = 4194304,
        fetch_max_wait_ms: int = 500,
        fetch_max_bytes_per_second: int = ...,
    ) -> RemoteStorage: ...
    @property
    def url(self) -> str:
        """The URL without credentials."""
    def key(self, rel: str) -> str: ...
    def attach(self, table: PartitionTable) -> bool:
        """Serve fetches below the local log start from this store."""
    def copy_segment(
        self, log: Log, partition_dir: str, segment_id: str, base_offset: int
    ) -> tuple[int, int, int, int, list[tuple[int, int]], str, int] | None:
        """Copies a rolled segment: (base, end, size, max_timestamp, epochs, stem, bytes sent); None if gone."""
    def delete_segment(self, stem: str) -> None: ...
    def delete_dir(self, rel: str) -> int: ...
    def list_objects(self, rel: str) -> list[tuple[str, int]]: ...
    def get(self, rel: str) -> bytes: ...
    def put(self, rel: str, data: bytes) -> None: ...
    def set_segments(
        self,
        partition: ReplicaPartition,
        segments: list[tuple[int, int, int, str, int, int]] | None,
        log_start_offset: int,
    ) -> None:
        """The copied segments fetches read [(start, end, base, stem, size, max_timestamp)]; None: not tiered."""
    def offset_for_timestamp(self, partition: ReplicaPartition, timestamp: int) -> tuple[int, int] | None:
        """ListOffsets by time in the copied segments: (offset, timestamp), or None (then the local log)."""
    def stats(self) -> dict[str, int]: ...

def certificate_principal(der: bytes, rules: str = "DEFAULT") -> str:
    """`User:` and the certificate's subject as RFC 2253 mapped by `rules` (ssl.principal.mapping.rules); ValueError if unreadable or unmapped."""

def data_path_apis() -> list[tuple[int, int, int]]:
    """[(api_key, min_version, max_version)] of the APIs the network thread serves itself."""

# --- Python client engine (rust/src/py/client.rs) ---

class AccumulatorError(Exception):
    """The accumulator refused a record; args are (kind, message), kind one of UnknownTopic,
    UnknownPartition, BufferFull, RecordTooLarge, Closed."""

@final
class Waker:
    """Self-pipe: wake() makes fileno() readable once until clear(). Thread-safe."""
    def __new__(cls) -> Waker: ...
    def fileno(self) -> int: ...
    def wake(self) -> None: ...
    def clear(self) -> None: ...

@final
class RecordMetadata:
    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def offset(self) -> int: ...
    @property
    def timestamp(self) -> int: ...
    def __eq__(self, value: object, /) -> bool: ...

@final
class RecordFuture:
    """One record's delivery. result() waits with the GIL released."""
    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    def done(self) -> bool: ...
    def result(self, timeout: float | None = None) -> RecordMetadata: ...
    def exception(self, timeout: float | None = None) -> BaseException | None: ...
    def add_done_callback(self, fn_: Callable[[RecordFuture], object]) -> None: ...

@final
class ProducerBatch:
    attempts: int
    base_sequence: int
    retry_at: float
    in_flight: bool
    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def record_count(self) -> int: ...
    @property
    def size(self) -> int: ...
    @property
    def created_ms(self) -> int: ...
    @property
    def done(self) -> bool: ...
    def seal(
        self, producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1, transactional: bool = False
    ) -> bytes: ...

@final
class RecordAccumulator:
    """Per-partition batch builders (rust/src/client/accumulator.rs). Thread-safe."""
    def __new__(
        cls,
        waker: Waker,
        batch_size: int = 16384,
        linger_ms: int = 5,
        buffer_memory: int = 33554432,
        max_request_size: int = 1048576,
        compression: str = "none",
    ) -> RecordAccumulator: ...
    def append(
        self,
        topic: str,
        value: Buffer | str | None = None,
        key: Buffer | str | None = None,
        partition: int | None = None,
        timestamp: int | None = None,
        headers: Any = None,
    ) -> RecordFuture: ...
    def drain(self, now_ms: int | None = None) -> list[ProducerBatch]: ...
    def next_ready_ms(self) -> int | None: ...
    def set_partitions(self, topic: str, partitions: int) -> None: ...
    def partitions(self, topic: str) -> int | None: ...
    def begin_flush(self) -> None: ...
    def close(self) -> None: ...
    @property
    def buffered(self) -> int: ...
    @property
    def incomplete(self) -> int: ...
    def has_undrained(self) -> bool: ...
    def complete(
        self, batch: ProducerBatch, base_offset: int = -1, log_append_time: int = -1, error: BaseException | None = None
    ) -> None: ...
    def wait_idle(self, timeout: float | None = None) -> bool: ...
    def wait_for_space(self, timeout: float) -> bool: ...

@final
class ConsumerRecord:
    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def offset(self) -> int: ...
    @property
    def timestamp(self) -> int: ...
    @property
    def timestamp_type(self) -> int: ...
    @property
    def leader_epoch(self) -> int: ...
    @property
    def key(self) -> bytes | None: ...
    @property
    def value(self) -> bytes | None: ...
    @property
    def headers(self) -> list[tuple[str, bytes | None]]: ...
    @property
    def delivery_count(self) -> int | None: ...

@final
class RecordSet:
    epoch: int
    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def fetch_offset(self) -> int: ...
    @property
    def next_offset(self) -> int: ...
    @property
    def position(self) -> int: ...
    @property
    def size(self) -> int: ...
    @property
    def truncated(self) -> bool: ...
    def __len__(self) -> int: ...
    def take(self, max_records: int | None = None) -> list[ConsumerRecord]: ...
    def take_acquired(self, acquired: list[tuple[int, int, int]]) -> list[ConsumerRecord]: ...
    def clear(self) -> None: ...

def decode_records(
    topic: str,
    partition: int,
    records: Buffer | None,
    fetch_offset: int,
    check_crcs: bool = True,
    aborted: list[tuple[int, int]] | None = None,
) -> RecordSet:
    """Decodes one partition's fetched records (CRC-checked, decompressed, control and
    aborted batches skipped). Releases the GIL. Raises CorruptRecordError."""

def murmur2(data: Buffer | str) -> int: ...
def partition_for_key(key: Buffer | str, partitions: int) -> int: ...

@final
class ReplicaFetcherManager:
    def __new__(
        cls,
        node_id: int,
        max_wait_ms: int = 500,
        min_bytes: int = 1,
        response_max_bytes: int = 10485760,
        partition_max_bytes: int = 1048576,
        backoff_ms: int = 1000,
        socket_timeout_ms: int = 30000,
        tls: tuple[bytes, bytes | None, bytes | None, bool] | None = None,
        sasl: tuple[str, str, str, str] | None = None,
    ) -> ReplicaFetcherManager: ...
    def set_broker_epoch(self, epoch: int) -> None: ...
    def follow(
        self, source: int, host: str, port: int, partitions: list[tuple[ReplicaPartition, bytes, int]]
    ) -> None: ...
    def unfollow(self, keys: list[tuple[str, int]]) -> None: ...
    def take_events(self) -> list[tuple[int, str]]: ...
    def shutdown(self) -> None: ...
