"""Ids of rollouts, attempts and resources: prefixed random hex, redrawn on the rare collision."""

from __future__ import annotations

import os
from collections.abc import Callable, Container
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    pass


__all__ = [
    "draw_unique_id",
    "new_attempt_id",
    "new_resources_id",
    "new_rollout_id",
]

_urandom = os.urandom


def new_rollout_id() -> str:
    """A fresh rollout id: ``"ro-"`` + 12 random hex characters (48 bits)."""
    return "ro-" + _urandom(6).hex()


def new_attempt_id() -> str:
    """A fresh attempt id: ``"at-"`` + 8 random hex characters (unique within its rollout)."""
    return "at-" + _urandom(4).hex()


def new_resources_id() -> str:
    """A fresh resources id: ``"rs-"`` + 12 random hex characters (48 bits)."""
    return "rs-" + _urandom(6).hex()


def draw_unique_id(factory: Callable[[], str], taken: Container[str], max_tries: int = 64) -> str:
    """Draw ids from `factory` until one is not in `taken`.

    Ids are random, so a store of millions of rollouts can collide; stores check before inserting.
    """
    for _ in range(max_tries):
        candidate = factory()
        if candidate not in taken:
            return candidate
    raise RuntimeError(f"Could not draw an unused id after {max_tries} tries; the id space looks exhausted.")
