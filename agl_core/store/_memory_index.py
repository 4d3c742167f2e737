"""Secondary indexes of `InMemoryLightningStore`, so its queries cost the same in a full store.

Every rollout and worker has a *rank*: its creation position (0, 1, 2, ...), which is also the default
(insertion) order of query results. The indexes hold ranks, never snapshots, so a write only moves an
integer:

- `RankGroups`: ranks grouped by status, each group a `RankSet` (kept sorted), so ``status_in=[...]``
  reads its matches in creation order without a scan, and its total is a sum of group sizes.
- `StartTimeOrder`: rollout ranks in ``(start_time, rank)`` order. A rollout's start time is set once,
  by the store clock at creation, so ranks are appended in order (a clock stepping back is handled by
  an insertion).

Both are plain synchronous structures: `agl_core.store._memory_state.MemoryState` updates them under
the store lock on every write that changes a status or creates a record.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Callable, Collection, Iterator
from typing import Any

from agl_core.store.logic import NormalizedFilter

__all__ = ["RankGroups", "RankSet", "RolloutIndex", "StartTimeOrder", "WorkerIndex", "required_statuses"]


class RankSet:
    """Distinct ranks in ascending order: a sorted list whose first ``_head`` entries are removed ones.

    The changes a store makes nearly always take O(1): adding a rank above every other (a status gains
    its newest rollouts), removing the lowest (a queue drains from its oldest) or the highest. Any other
    change is a bisection and a list insert or delete, which moves the entries after it (a `memmove`:
    about 30 us for a change at the front of 100,000 ranks). Written here instead of using
    ``sortedcontainers.SortedList``, measured in the store's pattern (a rank leaves one status for
    another on every status write, twice per ``update_attempt``): its ``remove`` took 1.5-1.8 us and
    its ``add`` 0.7 us, against 0.1-0.3 us here.
    """

    __slots__ = ("_head", "_ranks")

    def __init__(self) -> None:
        self._ranks: list[int] = []
        self._head = 0  # _ranks[:_head] were removed (dropped in bulk, see `remove`)

    def __len__(self) -> int:
        return len(self._ranks) - self._head

    def __iter__(self) -> Iterator[int]:
        ranks = self._ranks
        return map(ranks.__getitem__, range(self._head, len(ranks)))

    def add(self, rank: int) -> None:
        """Add `rank` (not already in the set)."""
        ranks, head = self._ranks, self._head
        if len(ranks) == head or rank > ranks[-1]:
            ranks.append(rank)
        elif head and rank < ranks[head]:
            self._head = head = head - 1  # reuse the slot of a removed rank
            ranks[head] = rank
        else:
            ranks.insert(bisect.bisect_left(ranks, rank, head), rank)

    def remove(self, rank: int) -> None:
        """Remove `rank`; `ValueError` if it is not in the set."""
        ranks, head = self._ranks, self._head
        end = len(ranks)
        if head < end and ranks[head] == rank:
            head += 1
            if head == end:
                ranks.clear()
                head = 0
            elif head >= 64 and head * 2 >= end:  # drop removed ranks once they are half the list
                del ranks[:head]
                head = 0
            self._head = head
        elif head < end and ranks[-1] == rank:
            ranks.pop()
        else:
            at = bisect.bisect_left(ranks, rank, head)
            if at == end or ranks[at] != rank:
                raise ValueError(f"rank {rank} is not in the set")
            del ranks[at]


class RankGroups:
    """Ranks grouped by a key (a status); each group iterates in ascending rank order."""

    __slots__ = ("_groups",)

    def __init__(self) -> None:
        self._groups: dict[str, RankSet] = {}

    def add(self, key: str, rank: int) -> None:
        """Put `rank` into the group of `key`."""
        group = self._groups.get(key)
        if group is None:
            group = self._groups[key] = RankSet()
        group.add(rank)

    def move(self, rank: int, old: str, new: str) -> None:
        """Move `rank` from the group of `old` to that of `new` (nothing when they are equal)."""
        if old != new:
            groups = self._groups
            groups[old].remove(rank)
            group = groups.get(new)
            if group is None:
                group = groups[new] = RankSet()
            group.add(rank)

    def count(self, keys: Collection[str]) -> int:
        """How many ranks the groups of `keys` hold together."""
        groups = self._groups
        return sum(len(groups[key]) for key in keys if key in groups)

    def ranks(self, keys: Collection[str]) -> Iterator[int]:
        """The ranks of the groups of `keys`, ascending."""
        groups = [group for key in keys if (group := self._groups.get(key))]
        if len(groups) == 1:
            return iter(groups[0])
        return heapq.merge(*groups)


class StartTimeOrder:
    """Ranks ordered by ``(start_time, rank)``; start times never change once added."""

    __slots__ = ("_ranks", "_times")

    def __init__(self) -> None:
        self._times: list[float] = []
        self._ranks: list[int] = []

    def add(self, start_time: float, rank: int) -> None:
        """Add a new rank (higher than every rank added before) with its start time."""
        times = self._times
        if not times or start_time >= times[-1]:
            times.append(start_time)
            self._ranks.append(rank)
        else:  # the clock stepped back: keep the order (equal times stay in rank order)
            at = bisect.bisect_right(times, start_time)
            times.insert(at, start_time)
            self._ranks.insert(at, rank)

    def ranks(self, descending: bool) -> Iterator[int]:
        """Ranks by start time; ties (equal start times) always in ascending rank order.

        That is the order of a stable sort by start time with ``reverse=descending``.
        """
        if not descending:
            return iter(self._ranks)
        return self._descending()

    def _descending(self) -> Iterator[int]:
        # A run of equal start times (a batch enqueued at one clock reading) is found by bisection,
        # so reading the newest few never walks a whole run.
        times, ranks = self._times, self._ranks
        end = len(times)
        while end:
            last = end - 1
            start_time = times[last]
            if last and times[last - 1] == start_time:
                end = bisect.bisect_left(times, start_time, 0, last)
                for position in range(end, last + 1):  # ties in ascending rank order
                    yield ranks[position]
            else:
                yield ranks[last]
                end = last


class RolloutIndex:
    """Rollout records by rank, their ranks by status and by start time.

    `add` a record when it is created; call `status_changed` whenever its rollout's status changes.
    """

    __slots__ = ("by_start_time", "by_status", "records", "status_changed")

    def __init__(self) -> None:
        self.records: list[Any] = []  # the `RolloutRecord` of each rank
        self.by_status = RankGroups()
        self.by_start_time = StartTimeOrder()
        # status_changed(rank, old, new): the rollout of `rank` went from status `old` to `new`; the
        # group move itself, bound here (one call less on every status write)
        self.status_changed: Callable[[int, str, str], None] = self.by_status.move

    def add(self, record: Any) -> None:
        """Index a new record; its ``order`` must be the next rank."""
        rank = record.order  # this very int object: the indexes share it with the record
        if rank != len(self.records):
            raise AssertionError(f"rollout rank {rank} added where rank {len(self.records)} was expected")
        self.records.append(record)
        rollout = record.rollout
        self.by_status.add(rollout.status, rank)
        self.by_start_time.add(rollout.start_time, rank)


class WorkerIndex:
    """Worker ids by rank (first-seen order, the workers dict's order) and their ranks by status."""

    __slots__ = ("_ranks", "by_status", "ids")

    def __init__(self) -> None:
        self.ids: list[str] = []
        self._ranks: dict[str, int] = {}
        self.by_status = RankGroups()

    def stored(self, worker_id: str, old_status: str | None, new_status: str) -> None:
        """A worker snapshot was stored: new (`old_status` None) or replacing one with `old_status`."""
        rank = self._ranks.get(worker_id)
        if rank is None:
            rank = self._ranks[worker_id] = len(self.ids)
            self.ids.append(worker_id)
            self.by_status.add(new_status, rank)
        elif old_status is not None:
            self.by_status.move(rank, old_status, new_status)


def required_statuses(normalized: NormalizedFilter) -> frozenset[str] | None:
    """Statuses every match of `normalized` must have (a required ``status`` within-test), else None."""
    if normalized.aggregate != "and" and len(normalized.conditions) != 1:
        return None
    for cond in normalized.conditions:
        if cond.field == "status" and cond.op == "within" and isinstance(cond.value, frozenset):
            return cond.value
    return None
