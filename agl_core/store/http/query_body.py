"""The JSON bodies of the client's span searches, kept for queries it sent before.

A client polling a rollout sends the same ``POST /v1/agl/spans/search`` body again and again, and
``pydantic_core.to_json`` of the query (a slots dataclass, whose fields pydantic-core inspects on every
call) was the largest part of the client's own work for a revalidated read. `SpanQueryBodies` keeps
the bytes per query: the key is the query's field values together with their exact types, so a kept
body is only reused for a query whose JSON is the same (``1``, ``1.0`` and ``True`` are equal in Python
but not in JSON). Bounded, oldest out; safe to share between threads (a race only encodes once more).
"""

from __future__ import annotations

import contextlib
import dataclasses
import operator
from collections.abc import Callable
from typing import Any

from agl_core.types.queries import SpanQuery

__all__ = ["SPAN_QUERY_BODY_ENTRIES", "SpanQueryBodies"]

SPAN_QUERY_BODY_ENTRIES = 256
"""Span queries whose body a client keeps by default."""

_VALUES_OF = operator.attrgetter(*(field.name for field in dataclasses.fields(SpanQuery)))


class SpanQueryBodies:
    """Bounded map of span queries (by field values and their types) to their JSON bodies.

    Args:
        encode: Turns a query into its body (the client's encoder, errors included).
        max_entries: Most bodies kept (>= 1).
    """

    __slots__ = ("_bodies", "_encode", "max_entries")

    def __init__(self, encode: Callable[[Any], bytes], max_entries: int = SPAN_QUERY_BODY_ENTRIES) -> None:
        if max_entries < 1:
            raise ValueError(f"max_entries must be >= 1, got {max_entries}.")
        self._encode = encode
        self.max_entries = max_entries
        self._bodies: dict[tuple[Any, ...], bytes] = {}

    def __len__(self) -> int:
        """Number of bodies kept."""
        return len(self._bodies)

    def body(self, query: SpanQuery) -> bytes:
        """``encode(query)``, from the kept bytes when an identical query was encoded before."""
        values = _VALUES_OF(query)
        key = (values, tuple(map(type, values)))
        bodies = self._bodies
        try:
            body = bodies.get(key)
        except TypeError:  # an unhashable value: encode it every time
            return self._encode(query)
        if body is None:
            body = self._encode(query)
            if len(bodies) >= self.max_entries:
                # another thread may have changed the dict meanwhile: then the bound holds loosely
                with contextlib.suppress(KeyError, RuntimeError, StopIteration):
                    del bodies[next(iter(bodies))]
            bodies[key] = body
        return body
