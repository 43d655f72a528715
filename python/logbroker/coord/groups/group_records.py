"""A group coordinator's records in `__consumer_offsets`, kept as the difference from what they say.

Shared by the KIP-848 consumer groups (consumer_group.py) and the KIP-1071 streams groups
(streams_group.py): each group's state is a set of records, keyed by (kind, member id or None)
— its image (`_state`: a fingerprint per record, compared, not encoded). The invariant:
`persisted[gid]` is the image the group's records in `__consumer_offsets` already say — the
newest value per key once its append is queued (`_UNKNOWN` for a record replayed at load that
the loaded state does not reproduce), put back when that append fails. A change is written as
the difference only (`_delta`): a value for each record whose fingerprint changed, a tombstone
for each record gone, in one append (`persist`) and in Kafka's order (as its replay wants them):

    a leaving member's tombstones first (`TOMBSTONE_FIRST`: current assignment, target,
    member metadata), then the new values (`VALUES`), then the group-level tombstones of a
    removed group last (`TOMBSTONE_LAST`, the group metadata the very last).

A group's appends land in the order of its changes: the records are computed and queued
without a checkpoint in between (the append lock is fair); the append is shielded from
cancellation, so a cancelled request cannot lose a queued change; a request that changes
nothing waits for the group's append in flight; a heartbeat is answered once its change is
committed (`_answer_when_written`). Groups changed outside a request (an expired member,
loading) are `dirty` and written by `flush`.

Loading (`replay`, then `finish_load` in each coordinator): the records replayed per group are
tracked (`_replaying`); once loaded they become the group's image (`_loaded`), and a group
whose loaded state differs from them (a half-written change, `_finish_leaves`) is dirty; its
members get a fresh session timeout (`_resume`).

A coordinator subclasses `GroupRecords` and says what differs: the record kinds and their
order, a record's key (`_key`), the group's image and a record's value (`_state`), the log
wording (`GROUP_TYPE`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, ClassVar

import trio

from logbroker.log_format import fields
from logbroker.protocol import ErrorCode

log = logging.getLogger("logbroker.groups")

# A record of a group's image: (kind, member id or None) -> a fingerprint of what it says
RecordKey = tuple[str, str | None]
Image = dict[RecordKey, object]
_UNKNOWN = object()  # a replayed record the loaded state does not reproduce (rewritten or tombstoned)
_ABSENT = object()  # no record for the key


class _Write:
    """A group's append in flight: heartbeats that change nothing wait for it too."""

    def __init__(self) -> None:
        self.done = trio.Event()
        self.error = ErrorCode.NONE


class GroupRecords:
    """The persistence of one coordinator's groups (`groups`: group id -> group, each with
    `members` and `target` keyed by member id); `owner` is the `GroupCoordinator`."""

    GROUP_TYPE: ClassVar[str]  # in the log: "consumer group", "streams group"
    TOMBSTONE_FIRST: ClassVar[list[str]]
    VALUES: ClassVar[list[str]]
    TOMBSTONE_LAST: ClassVar[list[str]]

    def __init__(self, owner) -> None:
        self.owner = owner
        self.groups: dict[str, Any] = {}
        # what each group's records in __consumer_offsets say, as `_state` fingerprints (the
        # newest value per key, once its append is queued; put back if that append fails)
        self.persisted: dict[str, Image] = {}
        self.dirty: set[str] = set()  # groups changed outside a heartbeat (expiry, loading): `flush`
        self._inflight: dict[str, _Write] = {}  # each group's newest append, until committed
        self._replayed: dict[str, set[RecordKey]] = {}  # while loading: the live records per group

    # --- what differs per group type ------------------------------------------------

    @staticmethod
    def _key(kind: str, gid: str, member_id: str | None) -> bytes:
        raise NotImplementedError

    def _state(self, gid: str) -> tuple[Image, Callable[[str, str | None], bytes]]:
        """The group's image now (empty for a removed group: its records are tombstoned) and
        how to encode the value of one of its records, (kind, member id) -> bytes."""
        raise NotImplementedError

    def session_timeout_ms(self, group_id: str) -> int:
        raise NotImplementedError

    # --- writing ----------------------------------------------------------------------

    def _delta(self, gid: str) -> tuple[list[tuple[bytes, bytes | None]], dict[RecordKey, tuple[object, object]]]:
        """The records that bring the group's records up to its state (values for what changed,
        tombstones for what went), in Kafka's order, and marks them written; with, per key,
        (fingerprint before, after) to put back should the append fail."""
        new, value = self._state(gid)
        old = self.persisted.get(gid, {})
        changed = [k for k, fp in new.items() if k not in old or old[k] is _UNKNOWN or old[k] != fp]
        gone = [k for k in old if k not in new]
        if not changed and not gone:
            return [], {}
        records: list[tuple[bytes, bytes | None]] = []
        for kind in self.TOMBSTONE_FIRST:
            records += [(self._key(kind, gid, mid), None) for k, mid in gone if k == kind]
        for kind in self.VALUES:
            records += [(self._key(kind, gid, mid), value(kind, mid)) for k, mid in changed if k == kind]
        for kind in self.TOMBSTONE_LAST:
            records += [(self._key(kind, gid, mid), None) for k, mid in gone if k == kind]
        undo = {k: (old.get(k, _ABSENT), new.get(k, _ABSENT)) for k in changed + gone}
        img = self.persisted.setdefault(gid, {})
        for k in changed:
            img[k] = new[k]
        for k in gone:
            del img[k]
        if not img:
            del self.persisted[gid]
        return records, undo

    async def persist(self, gid: str) -> int:
        """Write what changed in the group since its last records and wait until that is
        committed (or, when nothing changed, until the group's write in flight is): NONE, or
        the error of the append. The records are computed and queued without a checkpoint in
        between, so a group's appends land in the order of its changes (the append lock is
        fair); the append is shielded, so a cancelled request cannot lose a queued change."""
        self.dirty.discard(gid)
        records, undo = self._delta(gid)
        if not records:
            pending = self._inflight.get(gid)
            if pending is None:
                return ErrorCode.NONE
            await pending.done.wait()
            return pending.error
        write = self._inflight[gid] = _Write()
        try:
            with trio.CancelScope(shield=True):
                e = await self.owner.append_records(gid, records)
            if e is None:
                log.debug(
                    "%s %s: %d record(s) written to __consumer_offsets-%d",
                    self.GROUP_TYPE,
                    gid,
                    len(records),
                    self.owner.partition_of(gid),
                    extra=fields(group=gid),
                )
                return ErrorCode.NONE
            write.error = e.code
            img = self.persisted.get(gid, {})
            for k, (before, after) in undo.items():  # unless a later change already rewrote it
                if img.get(k, _ABSENT) == after:
                    if before is _ABSENT:
                        img.pop(k, None)
                    else:
                        img[k] = before
            if img:
                self.persisted[gid] = img
            log.error(
                "%s %s: writing %d record(s) to __consumer_offsets-%d failed (%s): %s",
                self.GROUP_TYPE,
                gid,
                len(records),
                self.owner.partition_of(gid),
                ErrorCode(e.code).name,
                e,
                extra=fields(group=gid, topic="__consumer_offsets", partition=self.owner.partition_of(gid)),
            )
        finally:
            write.done.set()
            if self._inflight.get(gid) is write:
                del self._inflight[gid]
        return write.error

    async def _answer_when_written(self, gid: str, out: dict) -> dict:
        """A heartbeat's answer `out`, once the records of the change it made are committed;
        the append's error instead when it failed. An answer refused before any change (no
        group id, not the coordinator, loading) is returned at once."""
        if not gid or out["error"] in (
            ErrorCode.NOT_COORDINATOR,
            ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
            ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ):
            return out
        code = await self.persist(gid)
        if code:
            return {"error": code, "message": f"writing the state of group {gid} to __consumer_offsets failed"}
        return out

    async def flush(self) -> None:
        """Write the groups changed outside a heartbeat (expired members, repairs after loading,
        the end of a streams group's initial rebalance delay)."""
        while self.dirty:
            await self.persist(self.dirty.pop())

    # --- loading and unloading ----------------------------------------------------------

    def _replaying(
        self, kind: str, gid: str, member_id: str | None, value: bytes | None, new_group: Callable[[str], Any]
    ) -> Any | None:
        """Notes one record of a partition being loaded as live (a value) or gone (a tombstone);
        the group it applies to, created by a value when missing (as Kafka's replay), or None
        for a tombstone of a group not known (ignored)."""
        keys = self._replayed.setdefault(gid, set())
        if value is None:
            keys.discard((kind, member_id))
        else:
            keys.add((kind, member_id))
        group = self.groups.get(gid)
        if group is None and value is not None:
            group = self.groups[gid] = new_group(gid)
        return group

    def _finish_leaves(self, group) -> None:
        """Members whose leave was half-written (current assignment tombstoned, the rest not):
        finish it."""
        for mid in [mid for mid, m in group.members.items() if m.member_epoch < 0]:
            del group.members[mid]
            group.target.pop(mid, None)

    def _loaded(self, gid: str, img: Image) -> None:
        """The records replayed for `gid` become its written image; where the loaded state
        (`img`) differs, the group is queued for `flush`."""
        baseline = {k: img.get(k, _UNKNOWN) for k in self._replayed.get(gid, ())}
        if baseline:
            self.persisted[gid] = baseline
        if baseline != img:
            self.dirty.add(gid)

    def _resume(self, gid: str, group, now: float, holds: Callable[[Any], str]) -> None:
        """A group loaded here takes over: each member gets a fresh session timeout to find
        this coordinator (and rebalance timeout for a revocation in progress), and its next
        heartbeat is answered in full. Logged with what each member holds (`holds`)."""
        session = self.session_timeout_ms(gid) / 1000
        for m in group.members.values():
            m.session_deadline = now + session
            m.revocation_deadline = now + m.rebalance_timeout_ms / 1000 if m.pending_revocation else None
            m.last_sent = None
        log.info(
            "%s %s loaded: group epoch %d, assignment epoch %d, %d member(s) %s",
            self.GROUP_TYPE,
            gid,
            group.group_epoch,
            group.assignment_epoch,
            len(group.members),
            ", ".join(f"{mid} at epoch {m.member_epoch} with {holds(m)}" for mid, m in group.members.items()),
            extra=fields(group=gid),
        )

    def _loading_done(self) -> None:
        """The end of `finish_load`: the groups loaded with a change to write are flushed."""
        self._replayed.clear()
        if self.dirty:
            self.owner.wake()

    def unload(self, partitions: set[int]) -> list[str]:
        """Forget the groups of `partitions` (no longer led here); their ids."""
        gone = [g for g in self.groups if self.owner.partition_of(g) in partitions]
        for g in gone:
            del self.groups[g]
        for g in [g for g in self.persisted if self.owner.partition_of(g) in partitions]:
            del self.persisted[g]
        self.dirty = {g for g in self.dirty if self.owner.partition_of(g) not in partitions}
        return gone
