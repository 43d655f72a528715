"""Committing an upsert table's position delete files with its data files in one snapshot,
and removing them in a compaction that applied them (pyiceberg 0.12 appends and removes data
files only, so delete manifests are written here: UpsertCommit, RewriteFiles).

Iceberg v2: a position delete file lists (file_path, pos) of deleted rows; it is listed in a
manifest of content `deletes`, and applies to the data files of its partition whose data
sequence number is at most its own, so deletes committed with data files in one snapshot
also apply to those files (a key written twice in one commit). The snapshot's operation is
`overwrite` (rows replaced), as Iceberg's own row-level writers name it; its summary counts
the position deletes added (`added-position-deletes`).

The delete files are written by Rust (rust/src/table/data_files.rs); `delete_file` describes
one for the manifest: its partition (the day of the rows it deletes), row count, size, and
`file_path` bounds, which readers use to skip it for data files it does not name.
"""

from __future__ import annotations

from pyiceberg.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    ManifestWriterV2,
)
from pyiceberg.table.snapshots import Operation
from pyiceberg.table.update.snapshot import _MergeAppendFiles, _SnapshotProducer
from pyiceberg.typedef import Record

FILE_PATH_FIELD_ID = 2147483546
POS_FIELD_ID = 2147483545


class _DeleteManifestWriter(ManifestWriterV2):
    """A v2 manifest of delete files."""

    def content(self) -> ManifestContent:
        return ManifestContent.DELETES

    @property
    def _meta(self) -> dict[str, str]:
        return {**super()._meta, "content": "deletes"}


class UpsertCommit(_MergeAppendFiles):
    """A snapshot adding data files and position delete files (operation overwrite)."""

    def __init__(self, transaction, io, snapshot_properties: dict[str, str]) -> None:
        super().__init__(Operation.OVERWRITE, transaction, io, snapshot_properties=snapshot_properties)
        self._added_delete_files: list[DataFile] = []

    def append_delete_file(self, delete_file: DataFile) -> UpsertCommit:
        self._added_delete_files.append(delete_file)
        return self

    def _manifests(self) -> list[ManifestFile]:
        manifests = super()._manifests()
        if not self._added_delete_files:
            return manifests
        metadata = self._transaction.table_metadata
        with _DeleteManifestWriter(
            metadata.spec(), self.schema(), self.new_manifest_output(), self._snapshot_id, self._compression
        ) as writer:
            for f in self._added_delete_files:
                writer.add(
                    ManifestEntry.from_args(
                        status=ManifestEntryStatus.ADDED,
                        snapshot_id=self._snapshot_id,
                        sequence_number=None,
                        file_sequence_number=None,
                        data_file=f,
                    )
                )
        return [*manifests, writer.to_manifest_file()]

    def _summary(self, snapshot_properties=None):
        added = self._added_data_files
        self._added_data_files = added + self._added_delete_files  # counted by the summary only
        try:
            return super()._summary(snapshot_properties or {})
        finally:
            self._added_data_files = added


def delete_file(table, written: dict) -> DataFile:
    """The DataFile of a position delete file the Rust writer closed (put to object storage
    first when it was kept in memory)."""
    if written["contents"] is not None:
        with table.io.new_output(written["path"]).create(overwrite=True) as out:
            out.write(written["contents"])
    first, last = written["path_bounds"]
    return DataFile.from_args(
        content=DataFileContent.POSITION_DELETES,
        file_path=written["path"],
        file_format=FileFormat.PARQUET,
        partition=Record(written["day"]),
        record_count=written["rows"],
        file_size_in_bytes=written["bytes"],
        lower_bounds={FILE_PATH_FIELD_ID: first.encode()},
        upper_bounds={FILE_PATH_FIELD_ID: last.encode()},
        sort_order_id=None,
        spec_id=table.metadata.default_spec_id,
        equality_ids=None,
        key_metadata=None,
    )


class RewriteFiles(_SnapshotProducer):
    """A snapshot that removes data files and position delete files and adds data files (a
    compaction with the deletes applied; operation overwrite, as the broker's compactions
    are). Manifests that list a removed file are written again with it as DELETED and the
    rest EXISTING, each in a manifest of its own content; the others are kept as they are."""

    def __init__(self, transaction, io, snapshot_properties: dict[str, str], removed: set[str]) -> None:
        super().__init__(Operation.OVERWRITE, transaction, io, snapshot_properties=snapshot_properties)
        self._removed = removed

    def _deleted_entries(self) -> list[ManifestEntry]:
        return []  # written into the rewritten manifests (_existing_manifests)

    def _existing_manifests(self) -> list[ManifestFile]:
        metadata = self._transaction.table_metadata
        parent = metadata.snapshot_by_id(self._parent_snapshot_id) if self._parent_snapshot_id is not None else None
        if parent is None:
            return []
        out: list[ManifestFile] = []
        found: set[str] = set()
        for manifest in parent.manifests(io=self._io):
            entries = manifest.fetch_manifest_entry(io=self._io, discard_deleted=True)
            if not any(e.data_file.file_path in self._removed for e in entries):
                out.append(manifest)
                continue
            spec = self.spec(manifest.partition_spec_id)
            output = self.new_manifest_output()
            writer_class = _DeleteManifestWriter if manifest.content == ManifestContent.DELETES else ManifestWriterV2
            with writer_class(spec, self.schema(), output, self._snapshot_id, self._compression) as writer:
                for e in entries:
                    gone = e.data_file.file_path in self._removed
                    if gone:
                        found.add(e.data_file.file_path)
                        self._deleted_data_files.add(e.data_file)
                    writer.add_entry(
                        ManifestEntry.from_args(
                            status=ManifestEntryStatus.DELETED if gone else ManifestEntryStatus.EXISTING,
                            snapshot_id=self._snapshot_id if gone else e.snapshot_id,
                            sequence_number=e.sequence_number,
                            file_sequence_number=e.file_sequence_number,
                            data_file=e.data_file,
                        )
                    )
            out.append(writer.to_manifest_file())
        if found != self._removed:
            raise ValueError(f"files to remove not in snapshot {parent.snapshot_id}: {sorted(self._removed - found)}")
        return out


def applied_delete_files(io, tasks: list, live: set[str]) -> set[str]:
    """The position delete files of `tasks` whose every data file still `live` (in the
    table) is one of the tasks' (a compaction that rewrites those files applied them all, so
    they can go). A delete file naming files of two rewrites (a compaction takes at most 256
    MiB of a partition's files) stays after the first and goes with the second."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    rewritten = {task.file.file_path for task in tasks}
    out = set()
    for path in {d.file_path for task in tasks for d in task.delete_files}:
        with io.new_input(path).open() as stream:
            named = pc.unique(pq.read_table(stream, columns=["file_path"]).column("file_path")).to_pylist()
        if set(named) & live <= rewritten:
            out.add(path)
    return out
