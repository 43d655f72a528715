"""The registry's state: what the `_schemas` records say, applied in log order
(records.py has their format). Every node builds the same state from the same records.

    schemas      id -> (type, stored schema, references)       an id names one schema for good
    subjects     subject -> version -> SchemaValue             soft-deleted versions kept (deleted)
    configs      subject (None: global) -> compatibility level
    modes        subject (None: global) -> READWRITE | READONLY | READONLY_OVERRIDE | IMPORT
    usages       id -> {(subject, version)} holding it           (indexes: a lookup by id, a
    referrers    (subject, version) -> {(subject, version)}       delete's reference check cost
                 whose schemas reference it                       what they find, not the registry)

Several nodes may write at once (each registers on the state it has read), so a record can
lose a race. The rule, applied the same way everywhere: a SCHEMA record is ignored when its id
already names another schema, or its subject and version already hold another id. The writer
reads its own record back and tries again when it lost (server.py). Ids are the largest id seen
so far plus one; a schema already registered under any subject keeps its id.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from logbroker.schema_registry.records import RecordError, Reference, SchemaValue, parse_json, parse_schema_value

log = logging.getLogger("logbroker.schema_registry")

DEFAULT_LEVEL = "BACKWARD"
DEFAULT_MODE = "READWRITE"


@dataclass(frozen=True)
class Content:
    """What makes two registrations the same schema."""

    schema_type: str
    schema: str
    references: tuple[Reference, ...]


class RegistryState:
    def __init__(self) -> None:
        self.schemas: dict[int, Content] = {}
        self.by_content: dict[Content, int] = {}
        self.subjects: dict[str, dict[int, SchemaValue]] = {}
        self.configs: dict[str | None, str] = {}
        self.modes: dict[str | None, str] = {}
        self._usages: dict[int, set[tuple[str, int]]] = {}
        self._referrers: dict[tuple[str, int], set[tuple[str, int]]] = {}
        self.max_id = 0
        self.next_offset = 0  # the offset after the last record applied
        self.changed: set[str] = set()  # subjects whose live ids changed since the last `take_changed`

    # --- applying records ---------------------------------------------------------------

    def apply(self, offset: int, key: bytes | None, value: bytes | None) -> None:
        """One `_schemas` record; a record that cannot be read is logged and skipped."""
        self.next_offset = max(self.next_offset, offset + 1)
        try:
            k = parse_json(key, f"key at offset {offset}")
            if k is None:
                return
            v = parse_json(value, f"value at offset {offset}")
            kind = k.get("keytype")
            if kind == "SCHEMA":
                self._apply_schema(k, v)
            elif kind == "CONFIG":
                self._apply_setting(self.configs, k, v, "compatibilityLevel")
            elif kind == "MODE":
                self._apply_setting(self.modes, k, v, "mode")
            elif kind in ("DELETE_SUBJECT", "CLEAR_SUBJECT") and v is not None:
                self._apply_subject_delete(kind, str(v["subject"]), int(v["version"]))
        except (RecordError, KeyError, TypeError, ValueError) as e:
            log.warning("_schemas record at offset %d skipped: %s", offset, e)

    def _apply_schema(self, k: dict, v: dict | None) -> None:
        subject, version = str(k["subject"]), int(k["version"])
        if v is None:  # a hard delete's tombstone
            self._remove(subject, version)
            return
        sv = parse_schema_value(v)
        content = Content(sv.schema_type, sv.schema, sv.references)
        known = self.schemas.get(sv.id)
        if known is not None and known != content:
            return  # lost a race: the id names another schema
        held = self.subjects.get(subject, {}).get(version)
        if held is not None and held.id != sv.id:
            return  # lost a race: the version holds another schema
        self.schemas[sv.id] = content
        self.by_content.setdefault(content, sv.id)
        self.subjects.setdefault(subject, {})[version] = sv
        self._usages.setdefault(sv.id, set()).add((subject, version))
        self.changed.add(subject)
        for r in sv.references:
            self._referrers.setdefault((r.subject, r.version), set()).add((subject, version))
        self.max_id = max(self.max_id, sv.id)

    def _remove(self, subject: str, version: int) -> None:
        self.changed.add(subject)
        versions = self.subjects.get(subject, {})
        gone = versions.pop(version, None)
        if not versions:
            self.subjects.pop(subject, None)
        if gone is None:
            return
        for r in gone.references:
            held = self._referrers.get((r.subject, r.version))
            if held is not None:
                held.discard((subject, version))
                if not held:
                    del self._referrers[(r.subject, r.version)]
        used = self._usages.get(gone.id)
        if used is not None:
            used.discard((subject, version))
            if used:
                return
            del self._usages[gone.id]
        content = self.schemas.pop(gone.id, None)
        if content is not None and self.by_content.get(content) == gone.id:
            del self.by_content[content]

    @staticmethod
    def _apply_setting(table: dict, k: dict, v: dict | None, field: str) -> None:
        subject = k.get("subject")
        if v is None:
            table.pop(subject, None)
        else:
            table[subject] = str(v[field])

    def _apply_subject_delete(self, kind: str, subject: str, upto: int) -> None:
        versions = self.subjects.get(subject, {})
        for version, sv in list(versions.items()):
            if version > upto:
                continue
            self.changed.add(subject)
            if kind == "DELETE_SUBJECT":
                versions[version] = SchemaValue(
                    sv.subject, sv.version, sv.id, sv.schema, sv.schema_type, sv.references, True
                )
            elif sv.deleted:  # CLEAR_SUBJECT: what the tombstones remove (soft-deleted versions only)
                self._remove(subject, version)
        if not versions:
            self.subjects.pop(subject, None)

    def take_changed(self) -> dict[str, list[int]]:
        """Each subject changed since the last call, with the ids of its live versions now."""
        out = {s: sorted({sv.id for sv in self.versions(s)}) for s in self.changed}
        self.changed = set()
        return out

    # --- queries ------------------------------------------------------------------------

    def subject_names(self, deleted: bool = False) -> list[str]:
        return sorted(s for s, vs in self.subjects.items() if any(deleted or not sv.deleted for sv in vs.values()))

    def versions(self, subject: str, deleted: bool = False) -> list[SchemaValue]:
        """In version order."""
        return [sv for _v, sv in sorted(self.subjects.get(subject, {}).items()) if deleted or not sv.deleted]

    def version(self, subject: str, version: int, deleted: bool = False) -> SchemaValue | None:
        sv = self.subjects.get(subject, {}).get(version)
        return sv if sv is not None and (deleted or not sv.deleted) else None

    def latest(self, subject: str, deleted: bool = False) -> SchemaValue | None:
        vs = self.versions(subject, deleted)
        return vs[-1] if vs else None

    def next_version(self, subject: str) -> int:
        return max(self.subjects.get(subject, {}), default=0) + 1

    def id_of(self, content: Content) -> int | None:
        return self.by_content.get(content)

    def usages(self, schema_id: int, deleted: bool = False) -> list[SchemaValue]:
        found = (self.subjects[s][v] for s, v in sorted(self._usages.get(schema_id, ())))
        return [sv for sv in found if deleted or not sv.deleted]

    def referenced_by(self, subject: str, version: int) -> list[int]:
        """Ids of the live schemas that reference this subject version."""
        found = (self.subjects[s][v] for s, v in self._referrers.get((subject, version), ()))
        return sorted({sv.id for sv in found if not sv.deleted})

    def level(self, subject: str | None) -> str:
        return self.configs.get(subject) or self.configs.get(None) or DEFAULT_LEVEL

    def mode(self, subject: str | None) -> str:
        return self.modes.get(subject) or self.modes.get(None) or DEFAULT_MODE
