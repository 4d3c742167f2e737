"""Document keys: every document's ``_id`` is built from its partition and ids, so lookups hit ``_id``.

``key("default", "ro-1")`` is ``"7:default/4:ro-1"``: each part is prefixed with its length, which makes
the encoding injective for any strings and keeps the keys of one partition (or one rollout, or one
attempt) a contiguous range: every key that starts with ``key(*parts) + "/"`` sorts below
``key(*parts) + "0"`` (``"0"`` follows ``"/"``), in MongoDB's byte-wise string order.
"""

from __future__ import annotations

from typing import Any

__all__ = ["key", "prefix_range", "queue_key", "span_key"]


def key(*parts: str) -> str:
    """The ``_id`` of the document identified by `parts` (partition first)."""
    return "/".join(f"{len(part)}:{part}" for part in parts)


def prefix_range(*parts: str) -> dict[str, Any]:
    """A ``_id`` condition matching every key under `parts` (a partition, a rollout, an attempt)."""
    base = key(*parts)
    return {"$gte": base + "/", "$lt": base + "0"}


def queue_key(partition: str, position: int) -> str:
    """The queue key of a rollout at `position`: sorts by position within the partition's range."""
    return f"{key(partition)}/{position:020d}"


def span_key(partition: str, rollout_id: str, order: int) -> str:
    """The ``_id`` of a rollout's span number `order` (its insertion order within the rollout)."""
    return f"{key(partition, rollout_id)}/{order:012d}"
