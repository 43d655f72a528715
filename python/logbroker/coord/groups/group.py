"""A classic consumer group's state (Kafka's GroupMetadata), with no I/O.

States and transitions (the classic rebalance protocol):

    Empty ──join──▶ PreparingRebalance ──all joined / rebalance timeout──▶ CompletingRebalance
      ▲                   ▲    │ (no members left)                          │ leader's SyncGroup
      │                   │    ▼                                            ▼
      └──last member leaves / expires──────────────── Stable ◀──────────────┘
                          └──── join with new metadata, leave, expiry ◀─────┘
    Dead: the group was deleted (or expired with no offsets); it is removed from the coordinator.

Invariants:
    generation_id increases by one at every completed join phase;
    in CompletingRebalance and Stable every member has joined this generation;
    the leader is a member; the selected protocol is supported by every member;
    a member id is never reused (static members get a fresh id at each rejoin, and
    the old id is fenced).
"""

from __future__ import annotations

import dataclasses
import enum

import trio


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclasses.dataclass
class JoinResult:
    error: int
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    member_id: str = ""
    members: list[tuple[str, str | None, bytes]] = dataclasses.field(default_factory=list)
    skip_assignment: bool = False


@dataclasses.dataclass
class SyncResult:
    error: int
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


class Waiter:
    """A one-shot result slot a request handler awaits."""

    def __init__(self) -> None:
        self._event = trio.Event()
        self.result = None

    def set(self, result) -> None:
        if not self._event.is_set():
            self.result = result
            self._event.set()

    @property
    def done(self) -> bool:
        return self._event.is_set()

    async def wait(self):
        await self._event.wait()
        return self.result


@dataclasses.dataclass
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    heartbeat_deadline: float = 0.0
    join_waiter: Waiter | None = None
    sync_waiter: Waiter | None = None
    is_new: bool = False

    @property
    def awaiting_join(self) -> bool:
        return self.join_waiter is not None and not self.join_waiter.done

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_waiter is not None and not self.sync_waiter.done

    def metadata_for(self, protocol: str) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        raise KeyError(protocol)

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols


class Group:
    def __init__(self, group_id: str, now_ms: int) -> None:
        self.group_id = group_id
        self.state = GroupState.EMPTY
        self.state_timestamp = now_ms
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}
        self.static_members: dict[str, str] = {}  # group.instance.id -> member id
        self.pending_members: dict[str, float] = {}  # member id -> deadline (MEMBER_ID_REQUIRED issued)
        self.rebalance_deadline: float | None = None
        self.sync_deadline: float | None = None
        self.offsets: dict[tuple[str, int], object] = {}  # (topic, partition) -> OffsetAndMetadata

    def __repr__(self) -> str:
        return f"Group({self.group_id!r}, {self.state.value}, gen {self.generation_id}, {len(self.members)} members)"

    def transition(self, state: GroupState, now_ms: int) -> None:
        self.state = state
        self.state_timestamp = now_ms

    def is_empty(self) -> bool:
        return not self.members

    def supports(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        """A joining member is compatible if its type matches and it shares a protocol
        with every existing member."""
        if self.is_empty():
            return bool(protocol_type) and bool(protocols)
        if protocol_type != self.protocol_type:
            return False
        names = {n for n, _ in protocols}
        return bool(names & self.candidate_protocols())

    def candidate_protocols(self) -> set[str]:
        sets = [{n for n, _ in m.protocols} for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def select_protocol(self) -> str:
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for m in self.members.values():
            for name, _ in m.protocols:
                if name in candidates:
                    votes[name] = votes.get(name, 0) + 1
                    break
        # most votes; ties go to the protocol listed first by the leader-to-be
        first = next(iter(self.members.values()))
        order = {name: i for i, (name, _) in enumerate(first.protocols)}
        return max(votes, key=lambda n: (votes[n], -order.get(n, 1 << 30)))

    def add_member(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove_member(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        if member.group_instance_id is not None and self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        if not self.members:
            self.protocol_type = None if not self.offsets else self.protocol_type
        return member

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> Member:
        member = self.members.pop(old_id)
        member.member_id = new_id
        self.members[new_id] = member
        self.static_members[instance_id] = new_id
        if self.leader_id == old_id:
            self.leader_id = new_id
        return member

    def all_joined(self) -> bool:
        return all(m.awaiting_join for m in self.members.values()) and not self.pending_members

    def max_rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)
