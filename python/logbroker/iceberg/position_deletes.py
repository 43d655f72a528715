"""Committing an upsert table's position delete files with its data files in one snapshot
(pyiceberg 0.12 appends data files only, so the delete manifest is written here).

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
from pyiceberg.table.update.snapshot import _MergeAppendFiles
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
