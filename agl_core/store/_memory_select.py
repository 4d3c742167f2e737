"""The paged rollout and worker queries of `InMemoryLightningStore`, read through its indexes.

Callers hold the store lock and pass an already validated query. Results are exactly those of
"filter every record in creation order, sort stably, slice the page": the indexes of
`agl_core.store._memory_index` only decide which records are looked at, and only the page's rollouts
are turned into their "with latest attempt" views.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from itertools import islice
from typing import TYPE_CHECKING, Any

from agl_core.store._memory_index import required_statuses
from agl_core.store.logic import NormalizedFilter, page_result, sort_key_for
from agl_core.types import PaginatedResult, Rollout, Worker

if TYPE_CHECKING:
    from agl_core.store._memory_state import MemoryState, RolloutRecord

__all__ = ["select_rollouts", "select_workers"]


def _page(ranked: Iterable[Any], limit: int, offset: int) -> list[Any]:
    return list(islice(ranked, offset, None if limit == -1 else offset + limit))


def select_rollouts(
    st: MemoryState,
    normalized: NormalizedFilter,
    predicate: Callable[[Any], bool],
    wanted_ids: Collection[str] | None,
    sort_by: str | None,
    order: str,
    limit: int,
    offset: int,
) -> PaginatedResult[Rollout]:
    """The page of rollouts (as views) matching `normalized`, with the total number of matches."""
    index = st.rollout_index
    records = index.records
    statuses = None if wanted_ids is not None else required_statuses(normalized)
    only_condition = len(normalized.conditions) == 1 and not normalized.must
    if statuses is not None and only_condition and sort_by is None:
        total = index.by_status.count(statuses)
        page = _page((records[r] for r in index.by_status.ranks(statuses)), limit, offset)
        return _views(st, page, limit, offset, total)
    if normalized.matches_all and sort_by == "start_time":
        ranks = index.by_start_time.ranks(descending=order == "desc")
        page = _page((records[r] for r in ranks), limit, offset)
        return _views(st, page, limit, offset, len(records))
    candidates: Iterable[RolloutRecord]
    if wanted_ids is not None:
        rollouts = st.rollouts
        candidates = sorted((rollouts[i] for i in wanted_ids if i in rollouts), key=lambda rec: rec.order)
    elif statuses is not None:
        candidates = (records[r] for r in index.by_status.ranks(statuses))
    else:
        candidates = records
    matched = [rec for rec in candidates if predicate(rec.rollout)]
    if sort_by is not None:
        key = sort_key_for(sort_by, Rollout)
        matched.sort(key=lambda rec: key(rec.rollout), reverse=order == "desc")
    return _views(st, _page(matched, limit, offset), limit, offset, len(matched))


def _views(
    st: MemoryState, page: list[RolloutRecord], limit: int, offset: int, total: int
) -> PaginatedResult[Rollout]:
    return page_result([st.view(rec) for rec in page], limit, offset, total)


def select_workers(
    st: MemoryState,
    normalized: NormalizedFilter,
    predicate: Callable[[Any], bool],
    sort_by: str | None,
    order: str,
    limit: int,
    offset: int,
) -> PaginatedResult[Worker]:
    """The page of workers matching `normalized`, with the total number of matches."""
    workers = st.workers
    statuses = required_statuses(normalized)
    candidates: Iterable[Worker]
    if statuses is None:
        candidates = workers.values()
    else:
        index = st.worker_index
        candidates = (workers[index.ids[r]] for r in index.by_status.ranks(statuses))
    matched = [worker for worker in candidates if predicate(worker)]
    if sort_by is not None:
        matched.sort(key=sort_key_for(sort_by, Worker), reverse=order == "desc")
    return page_result(_page(matched, limit, offset), limit, offset, len(matched))
