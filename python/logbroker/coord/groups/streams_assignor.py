"""Broker-side task assignor for Kafka Streams groups (KIP-1071): Kafka's "sticky" assignor.

The semantics are those of Apache Kafka 4.4's ``StickyTaskAssignor`` (the default of
``group.streams.assignors``), written here from its documented behaviour and tests.

Terms. A subtopology with N tasks has tasks ``(subtopology, 0..N-1)``. A *member* is one
Streams thread; a *process* (``process_id``) is one application instance running one or more
members and sharing one state directory. An *active* task is processed by exactly one member;
a *standby* task is a replica of the state of a stateful task kept warm on another process;
a *warm-up* task is a standby the reconciliation hands out while an active task migrates.

Guarantees of ``assign``:

- Every active task of every subtopology goes to exactly one member (none when the group is
  empty: the result is then empty).
- Balance is decided per process first: a process's load is its task count divided by its
  number of members, and unplaced tasks go to the least-loaded process, then to the member of
  that process with the fewest tasks. Stateful and stateless active tasks are balanced
  separately: the stateful ones first, against a per-member quota of
  ``ceil(stateful tasks / members)``; then the stateless ones against the quota on all active
  tasks, ``ceil(active tasks / members)``; among equally loaded processes a stateless task goes
  to the one with the fewest stateless tasks. A quota shrinks as members reach it (a member at
  the quota leaves the pool and the quota is recomputed over the rest), as Kafka's does.
- Stickiness: a task first goes back to the member that had it active in the previous target
  assignment while that member is below the quota; then to the least-loaded member that had it
  as a standby or a warm-up task (a warm-up counts as a previous standby: its state is
  restored); only then to the least-loaded process. Tasks are visited by partition, then
  subtopology, so that a range-shaped previous assignment is kept; unplaced tasks by
  subtopology, then partition, so that a fresh assignment is range-shaped.
- Standby tasks, only for stateful subtopologies, ``num_standby_replicas`` per task: never on a
  process holding the task (active or another standby), so at most
  ``min(num_standby_replicas, processes - 1)`` per task, and that many are always placed. A
  standby goes first to the previous active member, then to the least-loaded previous standby
  (or warm-up) member, each while below the per-member quota on active plus standby tasks;
  the rest go to the least-loaded processes. With ``rack.aware.assignment.tags`` in
  ``assignment_configs`` (comma-separated client-tag keys, highest priority first), standbys
  first go to processes carrying tag values no holder of the task carries yet (Kafka's
  ``RackAwareStandbyPicker``), ties broken by previous holders (active first) then load.
- Warm-up tasks: Kafka's assignor assigns none (its ``MemberAssignment`` carries active and
  standby tasks only; warm-ups are decided in reconciliation), so every ``warmup`` returned
  here is empty. Previous warm-ups only steer stickiness, as previous standbys.
- A previous task of an unknown subtopology, or beyond its task count, is ignored. When two
  members claim the same previous active task, the last in member-id order wins (Kafka's map
  put in member order).
- Deterministic: where Kafka iterates hash maps or breaks heap ties arbitrarily, this module
  iterates members by member id and processes by process id, and ties in load go to the
  smaller id; the same input always gives the same output. Kafka's offset-based candidates
  (task offsets reported after a restart) are not part of the input and are not used.

Cost: with T tasks, R standby replicas, P processes and M members, O(T log T) to sort, plus
O((T + T*R) log P) heap operations for the unplaced actives and standbys (a standby pops at
most R + 1 processes, since only holders of the task are skipped), plus O(T log M) within
processes, plus the size of the previous assignment for the sticky candidates: there is no
loop over tasks x members. With rack-aware tags, each standby scans the processes as Kafka's
picker does: O(T * R * P * tags).
"""

from __future__ import annotations

import dataclasses
import heapq
import logging

TaskId = tuple[str, int]  # (subtopology id, partition)

log = logging.getLogger(__name__)

NUM_STANDBY_REPLICAS_CONFIG = "num.standby.replicas"
RACK_AWARE_ASSIGNMENT_TAGS_CONFIG = "rack.aware.assignment.tags"
ASSIGNOR_NAME = "sticky"


@dataclasses.dataclass(frozen=True)
class MemberSpec:
    process_id: str
    instance_id: str | None
    rack_id: str | None
    client_tags: dict[str, str]
    active: frozenset[TaskId]  # the member's tasks in the previous target assignment
    standby: frozenset[TaskId]
    warmup: frozenset[TaskId]


@dataclasses.dataclass(frozen=True)
class Subtopology:
    num_tasks: int  # tasks 0..num_tasks-1 (the max partitions of its source topics)
    stateful: bool  # has state stores (changelog topics): standby tasks only for these


@dataclasses.dataclass(frozen=True)
class TaskAssignment:
    active: frozenset[TaskId]
    standby: frozenset[TaskId]
    warmup: frozenset[TaskId]


class _Process:
    """One process: its members' task counts and the tasks placed on it."""

    __slots__ = (
        "pid",
        "capacity",
        "task_count",
        "active_count",
        "stateful_active_count",
        "counts",
        "tasks",
        "active",
        "standby",
        "_heap",
    )

    def __init__(self, pid: str) -> None:
        self.pid = pid
        self.capacity = 0
        self.task_count = 0
        self.active_count = 0
        self.stateful_active_count = 0
        self.counts: dict[str, int] = {}
        self.tasks: set[TaskId] = set()
        self.active: dict[str, set[TaskId]] = {}
        self.standby: dict[str, set[TaskId]] = {}
        self._heap: list[tuple[int, str]] | None = None

    def add_member(self, member_id: str) -> None:
        self.counts[member_id] = 0
        self.active[member_id] = set()
        self.standby[member_id] = set()
        self.capacity += 1

    def load(self) -> float:
        return self.task_count / self.capacity

    def stateless_load(self) -> float:
        return (self.active_count - self.stateful_active_count) / self.capacity

    def _add(self, member_id: str, task: TaskId, active: bool, stateful: bool) -> int:
        self.task_count += 1
        self.tasks.add(task)
        if active:
            self.active_count += 1
            self.active[member_id].add(task)
            if stateful:
                self.stateful_active_count += 1
        else:
            self.standby[member_id].add(task)
        n = self.counts[member_id] + 1
        self.counts[member_id] = n
        return n

    def add_task(self, member_id: str, task: TaskId, active: bool, stateful: bool) -> int:
        """Adds to a given member; drops the member heap (rebuilt on the next least-loaded add)."""
        self._heap = None
        return self._add(member_id, task, active, stateful)

    def add_task_to_least_loaded_member(self, task: TaskId, active: bool, stateful: bool) -> int:
        if len(self.counts) == 1:
            return self._add(next(iter(self.counts)), task, active, stateful)
        if self._heap is None:
            self._heap = sorted((c, m) for m, c in self.counts.items())
        _, member_id = heapq.heappop(self._heap)
        n = self._add(member_id, task, active, stateful)
        heapq.heappush(self._heap, (n, member_id))
        return n

    def least_loaded_member(self) -> str:
        return min(self.counts, key=lambda m: (self.counts[m], m))


class _Quota:
    """A per-member quota, ceil(remaining tasks / remaining members); a member that reaches it
    leaves the pool with its tasks and the quota is recomputed over the rest."""

    __slots__ = ("total", "members", "per_member")

    def __init__(self, total: int, members: int) -> None:
        self.total = total
        self.members = members
        self.per_member = _ceil_div(total, members)

    def reached(self, count: int) -> None:
        if count == self.per_member:
            self.members -= 1
            self.total -= count
            self.per_member = _ceil_div(self.total, self.members)


def _ceil_div(n: int, d: int) -> int:
    return 0 if d == 0 else -(-n // d)


class _State:
    def __init__(
        self,
        members: dict[str, MemberSpec],
        subtopologies: dict[str, Subtopology],
        num_standby_replicas: int,
        tag_keys: list[str],
    ) -> None:
        self.num_standby = num_standby_replicas
        self.tag_keys = tag_keys
        self.stateful: list[TaskId] = []
        self.stateless: list[TaskId] = []
        total_stateful = total_active = total_tasks = 0
        for sub_id in sorted(subtopologies):
            sub = subtopologies[sub_id]
            n = max(sub.num_tasks, 0)
            (self.stateful if sub.stateful else self.stateless).extend((sub_id, p) for p in range(n))
            total_active += n
            total_tasks += n
            if sub.stateful:
                total_stateful += n
                total_tasks += n * num_standby_replicas
        known = set(self.stateful) | set(self.stateless)
        n_members = len(members)
        self.stateful_quota = _Quota(total_stateful, n_members)
        self.active_quota = _Quota(total_active, n_members)
        self.total_quota = _Quota(total_tasks, n_members)

        self.processes: dict[str, _Process] = {}
        self.member_process: dict[str, str] = {}
        self.process_tags: dict[str, dict[str, str]] = {}
        self.prev_active: dict[TaskId, str] = {}  # task -> member
        self.prev_standby: dict[TaskId, list[str]] = {}  # task -> members, in member-id order
        for member_id in sorted(members):
            spec = members[member_id]
            proc = self.processes.get(spec.process_id)
            if proc is None:
                proc = self.processes[spec.process_id] = _Process(spec.process_id)
                self.process_tags[spec.process_id] = dict(spec.client_tags)
            proc.add_member(member_id)
            self.member_process[member_id] = spec.process_id
            for task in sorted(spec.active):
                if task in known:
                    self.prev_active[task] = member_id
            # A warm-up task is state being restored for a migrating active task: for
            # stickiness it counts as a previous standby.
            for task in sorted(spec.standby | spec.warmup):
                if task in known:
                    self.prev_standby.setdefault(task, []).append(member_id)
        self.stateful_owner: dict[TaskId, _Process] = {}

    def proc_of(self, member_id: str) -> _Process:
        return self.processes[self.member_process[member_id]]

    # -- active tasks --------------------------------------------------------------------

    def below_active_quota(self, member_id: str, stateful: bool) -> bool:
        # In the stateful pass nothing else is assigned yet: the member's task count is its
        # stateful active task count.
        quota = self.stateful_quota if stateful else self.active_quota
        return self.proc_of(member_id).counts[member_id] < quota.per_member

    def add_active(self, member_id: str, task: TaskId, stateful: bool) -> None:
        proc = self.proc_of(member_id)
        n = proc.add_task(member_id, task, True, stateful)
        if stateful:
            self.stateful_quota.reached(n)
            self.stateful_owner[task] = proc
        self.active_quota.reached(n)
        self.total_quota.reached(n)

    def prev_member_with_least_load(self, candidates: list[str] | None, exclude: TaskId | None) -> str | None:
        """Kafka's choice among previous holders: the first one, replaced by a later one only
        when both its process load and its own task count are lower."""
        if not candidates:
            return None
        best: str | None = None
        best_proc_load = best_member_load = 0.0
        for member_id in candidates:
            proc = self.proc_of(member_id)
            if exclude is not None and exclude in proc.tasks:
                continue
            proc_load, member_load = proc.load(), proc.counts[member_id]
            if best is None or (proc_load < best_proc_load and member_load < best_member_load):
                best, best_proc_load, best_member_load = member_id, proc_load, member_load
        return best

    def assign_active(self, tasks: list[TaskId], stateful: bool) -> None:
        # A range-shaped previous assignment pairs equal partitions: visit by partition first.
        todo = sorted(tasks, key=lambda t: (t[1], t[0]))
        # 1. back to the member that had the task active, while below the quota
        rest: list[TaskId] = []
        for task in todo:
            prev = self.prev_active.get(task)
            if prev is not None and self.below_active_quota(prev, stateful):
                self.add_active(prev, task, stateful)
            else:
                rest.append(task)
        # 2. to the least-loaded member that had it as a standby (or warm-up)
        todo, rest = rest, []
        for task in todo:
            prev = self.prev_member_with_least_load(self.prev_standby.get(task), None)
            if prev is not None and self.below_active_quota(prev, stateful):
                self.add_active(prev, task, stateful)
            else:
                rest.append(task)
        # 3. the rest, range-shaped (by subtopology, then partition), to the least-loaded process
        rest.sort()
        heap = [(p.load(), p.stateless_load(), p.pid) for p in self.processes.values()]
        heapq.heapify(heap)
        for task in rest:
            _, _, pid = heapq.heappop(heap)
            proc = self.processes[pid]
            n = proc.add_task_to_least_loaded_member(task, True, stateful)
            # The stateful quota is only read in steps 1 and 2: no update needed here.
            self.active_quota.reached(n)
            self.total_quota.reached(n)
            if stateful:
                self.stateful_owner[task] = proc
            heapq.heappush(heap, (proc.load(), proc.stateless_load(), pid))

    # -- standby tasks -------------------------------------------------------------------

    def below_total_quota(self, member_id: str) -> bool:
        return self.proc_of(member_id).counts[member_id] < self.total_quota.per_member

    def add_standby(self, proc: _Process, member_id: str, task: TaskId) -> None:
        self.total_quota.reached(proc.add_task(member_id, task, False, True))

    def assign_standby(self, tasks: list[TaskId]) -> None:
        picker = _RackAwarePicker(self.tag_keys, self.processes, self.process_tags) if self.tag_keys else None
        to_least_loaded: list[tuple[TaskId, int]] = []
        for task in sorted(tasks, key=lambda t: (t[1], t[0]), reverse=True):
            placed = self.assign_rack_aware_standbys(picker, task) if picker is not None else 0
            self.assign_sticky_standbys(task, placed, to_least_loaded)
        to_least_loaded.sort(reverse=True)
        heap = [(p.load(), p.pid) for p in self.processes.values()]
        heapq.heapify(heap)
        missing = 0
        for task, remaining in to_least_loaded:
            for i in range(remaining):
                if not self.standby_to_least_loaded(heap, task):
                    missing += remaining - i
                    break
        if missing:
            # Kafka warns per task; one warning per assignment says the same.
            log.warning(
                "Unable to assign %d of %d standby tasks (%d per stateful task): not enough processes. "
                "Increase the number of application instances to maintain the requested number of "
                "standby replicas.",
                missing,
                len(tasks) * self.num_standby,
                self.num_standby,
            )

    def standby_to_least_loaded(self, heap: list[tuple[float, str]], task: TaskId) -> bool:
        """The least-loaded process not holding the task takes it, on its least-loaded member."""
        popped: list[_Process] = []
        found = False
        while heap:
            proc = self.processes[heapq.heappop(heap)[1]]
            popped.append(proc)
            if task not in proc.tasks:
                self.total_quota.reached(proc.add_task_to_least_loaded_member(task, False, True))
                found = True
                break
        for proc in popped:
            heapq.heappush(heap, (proc.load(), proc.pid))
        return found

    def assign_sticky_standbys(self, task: TaskId, first: int, to_least_loaded: list[tuple[TaskId, int]]) -> None:
        for i in range(first, self.num_standby):
            prev = self.prev_active.get(task)
            if prev is not None:
                proc = self.proc_of(prev)
                if task not in proc.tasks and self.below_total_quota(prev):
                    self.add_standby(proc, prev, task)
                    continue
            prev = self.prev_member_with_least_load(self.prev_standby.get(task), task)
            if prev is not None and self.below_total_quota(prev):
                self.add_standby(self.proc_of(prev), prev, task)
                continue
            to_least_loaded.append((task, self.num_standby - i))
            return

    def prev_holder_ranks(self, task: TaskId) -> dict[str, tuple[int, str]]:
        """Process id -> (rank, member): the previous active holder ranks 0, previous standby
        holders 1, 2, ... in candidate order; a process keeps its best-ranked member."""
        holders: dict[str, tuple[int, str]] = {}
        for i, member_id in enumerate(self.prev_standby.get(task, ())):
            holders.setdefault(self.member_process[member_id], (1 + i, member_id))
        prev = self.prev_active.get(task)
        if prev is not None:
            holders[self.member_process[prev]] = (0, prev)
        return holders

    def assign_rack_aware_standbys(self, picker: _RackAwarePicker, task: TaskId) -> int:
        picker.start_task()
        owner = self.stateful_owner.get(task)
        if owner is not None:
            picker.mark_used(owner.pid)
        holders = self.prev_holder_ranks(task)
        quota = self.total_quota

        def eligible(proc: _Process) -> bool:
            return task not in proc.tasks and any(c < quota.per_member for c in proc.counts.values())

        def tie_key(proc: _Process) -> tuple[int | float, float, str]:
            rank = holders.get(proc.pid)
            return (rank[0] if rank is not None else float("inf"), proc.load(), proc.pid)

        placed = 0
        while placed < self.num_standby:
            winner = picker.pick_next(eligible, tie_key)
            if winner is None:
                break
            rank = holders.get(winner.pid)
            if rank is not None and winner.counts[rank[1]] < quota.per_member:
                member_id = rank[1]
            else:
                member_id = winner.least_loaded_member()
            self.add_standby(winner, member_id, task)
            picker.mark_used(winner.pid)
            placed += 1
        return placed


class _RackAwarePicker:
    """Kafka's RackAwareStandbyPicker over the keys of rack.aware.assignment.tags (priority
    order): a standby goes to an eligible process whose value for the priority key no holder of
    the task carries; among those the one new on the most lower-priority keys (compared as a
    bit vector in key order), then the assignor's tie-break. A key no eligible process can
    diversify is given up for the next one; with every key given up, it returns None."""

    def __init__(self, keys: list[str], processes: dict[str, _Process], tags: dict[str, dict[str, str]]) -> None:
        self.keys = keys
        self.tags = tags
        self.all = [processes[pid] for pid in sorted(processes)]
        self.used: list[set[str]] = [set() for _ in keys]
        self.priority = 0
        self.candidates = self.all

    def start_task(self) -> None:
        for values in self.used:
            values.clear()
        self.priority = 0
        self.candidates = self.all

    def mark_used(self, pid: str) -> None:
        tags = self.tags[pid]
        for i, key in enumerate(self.keys):
            value = tags.get(key)
            if value is not None:
                self.used[i].add(value)

    def _diversity(self, proc: _Process) -> tuple[bool, ...]:
        tags = self.tags[proc.pid]
        return tuple(
            not (tags.get(self.keys[i]) is not None and tags[self.keys[i]] not in self.used[i])
            for i in range(self.priority + 1, len(self.keys))
        )  # False (new value) sorts first

    def pick_next(self, eligible, tie_key) -> _Process | None:  # noqa: ANN001
        while self.priority < len(self.keys):
            key, used = self.keys[self.priority], self.used[self.priority]
            survivors = [
                p
                for p in self.candidates
                if (v := self.tags[p.pid].get(key)) is not None and v not in used and eligible(p)
            ]
            if not survivors:
                self.priority += 1
                self.candidates = self.all
                continue
            winner = min(survivors, key=lambda p: (self._diversity(p), tie_key(p)))
            survivors.remove(winner)
            self.candidates = survivors
            return winner
        return None


def _rack_aware_tags(assignment_configs: dict[str, str] | None) -> list[str]:
    raw = (assignment_configs or {}).get(RACK_AWARE_ASSIGNMENT_TAGS_CONFIG)
    if raw is None or not raw.strip():
        return []
    return [key.strip() for key in raw.strip().split(",")]


def assign(
    members: dict[str, MemberSpec],
    subtopologies: dict[str, Subtopology],
    num_standby_replicas: int,
    assignment_configs: dict[str, str] | None = None,
) -> dict[str, TaskAssignment]:
    """Computes the target assignment of a streams group: {member_id: TaskAssignment}."""
    if not members:
        return {}
    state = _State(members, subtopologies, max(num_standby_replicas, 0), _rack_aware_tags(assignment_configs))
    # Stateful actives first (the stateful quota reads a member's task count as its stateful
    # active count), then stateless actives fill up the remaining active capacity.
    state.assign_active(state.stateful, True)
    state.assign_active(state.stateless, False)
    if state.num_standby > 0:
        state.assign_standby(state.stateful)
    out: dict[str, TaskAssignment] = {}
    empty: frozenset[TaskId] = frozenset()
    for member_id in sorted(members):
        proc = state.proc_of(member_id)
        out[member_id] = TaskAssignment(
            active=frozenset(proc.active[member_id]),
            standby=frozenset(proc.standby[member_id]),
            warmup=empty,
        )
    return out
