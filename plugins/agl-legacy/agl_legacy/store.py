"""`LightningStore03`: a base for Agent Lightning 0.3-style stores that override public methods.

0.3's `LightningStore` raised `NotImplementedError` from every method a subclass did not override, so a store
overriding a few of them could be built and used for those. agl's `LightningStore` differs twice: a backend
must write every abstract method, and its public methods are final (each checks its arguments once and calls
one narrow backend method, see `agl_core.store.base.BACKEND_METHODS`). Derive such a class from
`LightningStore03` instead: the backend method of a public method it overrides calls that override, so agl's
own machinery (the HTTP server, delegating stores, the runners) reaches it, and every other one raises
`NotImplementedError` naming the method, as in 0.3.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import Any

from agl_core.store.base import LightningStore
from agl_core.store.logic import number_span
from agl_core.types.queries import SpanSequenceIds

__all__ = ["LightningStore03"]

Call = Callable[[Any, Any], Any]


async def _enqueue_one_by_one(store: Any, request: Any) -> Any:
    return [
        await store.enqueue_rollout(r.input, r.mode, r.resources_id, r.config, r.metadata)
        for r in request.rollouts
    ]


async def _dequeue_one_by_one(store: Any, request: Any) -> Any:
    claimed: list[Any] = []
    while len(claimed) < request.limit:
        item = await store.dequeue_rollout(worker_id=request.worker_id)
        if item is None:
            break
        claimed.append(item)
    if claimed and request.worker_id is not None and len(claimed) < request.limit:
        # the empty dequeue that ended the loop marked the worker idle; it is busy with the last claim
        last = claimed[-1]
        await store.update_attempt(last.rollout_id, last.attempt.attempt_id, worker_id=request.worker_id)
    return claimed


async def _numbered(store: Any, spans: Any) -> list[Any]:
    """`spans`, those sent with sequence id 0 ("the store numbers it": the tracer sends that) numbered through
    the store's own sequence-id method, as agl's stores number them when they insert; as given without one."""
    missing = [i for i, span in enumerate(spans) if not span.sequence_id]
    numbered = list(spans)
    if missing:
        pairs = [(spans[i].rollout_id, spans[i].attempt_id) for i in missing]
        try:
            ids = await store._issue_sequence_ids(SpanSequenceIds(pairs))
        except NotImplementedError:  # a 0.3 store without sequence ids keeps what it is given, as in 0.3
            return numbered
        for i, sequence_id in zip(missing, ids, strict=True):
            numbered[i] = number_span(spans[i], sequence_id)
    return numbered


async def _add_many(store: Any, request: Any) -> Any:
    return await store.add_many_spans(await _numbered(store, request.spans))


async def _add_one_by_one(store: Any, request: Any) -> Any:
    spans = await _numbered(store, request.spans)
    return [stored for span in spans if (stored := await store.add_span(span)) is not None]


async def _issue_one_by_one(store: Any, request: Any) -> Any:
    return [await store.get_next_span_sequence_id(r, a) for r, a in request.pairs]


def _by_keywords(public: str) -> tuple[str, Call]:
    return public, lambda store, query: getattr(store, public)(**query.keywords())


_ADAPTERS: dict[str, tuple[str, list[tuple[str, Call]]]] = {
    "_query_rollouts": ("query_rollouts", [_by_keywords("query_rollouts")]),
    "_query_spans": ("query_spans", [_by_keywords("query_spans")]),
    "_query_workers": ("query_workers", [_by_keywords("query_workers")]),
    "_query_attempts": ("query_attempts", [_by_keywords("query_attempts")]),
    "_query_resources": ("query_resources", [_by_keywords("query_resources")]),
    "_apply_rollout_update": (
        "update_rollout",
        [("update_rollout", lambda store, u: store.update_rollout(u.rollout_id, **u.changes()))],
    ),
    "_apply_attempt_update": (
        "update_attempt",
        [
            (
                "update_attempt",
                lambda store, u: store.update_attempt(u.rollout_id, u.attempt_id, **u.changes()),
            )
        ],
    ),
    "_start_rollout": (
        "start_rollout",
        [
            (
                "start_rollout",
                lambda store, req: store.start_rollout(
                    req.rollout.input,
                    req.rollout.mode,
                    req.rollout.resources_id,
                    req.rollout.config,
                    req.rollout.metadata,
                    req.worker_id,
                ),
            )
        ],
    ),
    "_enqueue_rollouts": (
        "enqueue_rollout",
        [
            ("enqueue_many_rollouts", lambda store, req: store.enqueue_many_rollouts(req.rollouts)),
            ("enqueue_rollout", _enqueue_one_by_one),
        ],
    ),
    "_dequeue_rollouts": (
        "dequeue_rollout",
        [
            (
                "dequeue_many_rollouts",
                lambda store, req: store.dequeue_many_rollouts(limit=req.limit, worker_id=req.worker_id),
            ),
            ("dequeue_rollout", _dequeue_one_by_one),
        ],
    ),
    "_insert_spans": (
        "add_span",
        [
            ("add_many_spans", _add_many),
            ("add_span", _add_one_by_one),
        ],
    ),
    "_issue_sequence_ids": (
        "get_next_span_sequence_id",
        [
            ("get_many_span_sequence_ids", lambda store, req: store.get_many_span_sequence_ids(req.pairs)),
            ("get_next_span_sequence_id", _issue_one_by_one),
        ],
    ),
    "_get_rollout": (
        "get_rollout_by_id",
        [("get_rollout_by_id", lambda store, rid: store.get_rollout_by_id(rid))],
    ),
    "_get_latest_attempt": (
        "get_latest_attempt",
        [("get_latest_attempt", lambda store, rid: store.get_latest_attempt(rid))],
    ),
    "_get_resources": (
        "get_resources_by_id",
        [("get_resources_by_id", lambda store, rid: store.get_resources_by_id(rid))],
    ),
    "_get_worker": (
        "get_worker_by_id",
        [("get_worker_by_id", lambda store, wid: store.get_worker_by_id(wid))],
    ),
    "_update_worker": (
        "update_worker",
        [("update_worker", lambda store, req: store.update_worker(req.worker_id, req.heartbeat_stats))],
    ),
    "_get_latest_resources": (
        "get_latest_resources",
        [("get_latest_resources", lambda store, _: store.get_latest_resources())],
    ),
    "_add_resources": (
        "add_resources",
        [("add_resources", lambda store, resources: store.add_resources(resources))],
    ),
    "_update_resources": (
        "update_resources",
        [("update_resources", lambda store, req: store.update_resources(req.resources_id, req.resources))],
    ),
    "_start_attempt": (
        "start_attempt",
        [("start_attempt", lambda store, req: store.start_attempt(req.rollout_id, req.worker_id))],
    ),
}
"""Backend method -> (the public method its `NotImplementedError` names, [(public, how to call it)])."""


def _not_implemented(name: str, doc_of: str) -> Callable[..., Any]:
    async def method(self: LightningStore, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not implement {name}() (a 0.3-style store).")

    method.__name__ = method.__qualname__ = doc_of
    method.__doc__ = getattr(
        LightningStore, doc_of
    ).__doc__  # not functools.wraps: it copies the abstract flag
    method.__agl_03_stub__ = True  # type: ignore[attr-defined]
    return method


def _through(call: Call, name: str) -> Callable[..., Any]:
    async def method(self: LightningStore, request: Any = None, where: Any = None) -> Any:
        return await call(self, request)

    method.__name__ = method.__qualname__ = name
    return method


class _Base03(abc.ABCMeta):
    """0.3's `LightningStore` was the base of every store, so every agl store is a `LightningStore03`."""

    # by the MRO, not issubclass(): ABCMeta's check of LightningStore asks its subclasses, this one included
    def __instancecheck__(cls, instance: Any) -> bool:
        if cls is LightningStore03:
            return LightningStore in type(instance).__mro__
        return super().__instancecheck__(instance)

    def __subclasscheck__(cls, subclass: type) -> bool:
        if cls is LightningStore03:
            return LightningStore in getattr(subclass, "__mro__", ())
        return super().__subclasscheck__(subclass)


class LightningStore03(LightningStore, metaclass=_Base03):
    """`LightningStore` as 0.3 defined it: methods a subclass leaves out raise `NotImplementedError`.

    As 0.3's base of every store, ``isinstance(store, LightningStore03)`` holds for any agl store.
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for backend, (_, publics) in _ADAPTERS.items():
            overridden = [
                (p, call) for p, call in publics if getattr(cls, p) is not getattr(LightningStore03, p)
            ]
            implemented = not getattr(getattr(cls, backend), "__agl_03_stub__", False)
            if overridden and not implemented:
                setattr(cls, backend, _through(overridden[0][1], backend))
            if overridden or implemented:  # the others of the group reach the backend method
                for public, _ in publics:
                    if getattr(cls, public) is getattr(LightningStore03, public):
                        setattr(cls, public, getattr(LightningStore, public))


for _name in LightningStore.__abstractmethods__:
    _public = _ADAPTERS[_name][0] if _name in _ADAPTERS else _name
    setattr(LightningStore03, _name, _not_implemented(_public, _name))
for _group in _ADAPTERS.values():
    for _public, _call in _group[1]:  # as in 0.3: a method not overridden raises before any check
        setattr(LightningStore03, _public, _not_implemented(_public, _public))
LightningStore03.__abstractmethods__ = frozenset()
del _name, _public, _group, _call
