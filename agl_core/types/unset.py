"""`UNSET`: the "argument not given, leave the field alone" default of the store's update methods."""

from __future__ import annotations

from typing import Any

__all__ = ["UNSET", "Unset"]


class Unset:
    """Type of the `UNSET` sentinel: "argument not given, leave the field alone".

    There is exactly one instance. It is falsy, prints as ``UNSET``, and survives `pickle` and
    `copy` as the same object, so ``value is UNSET`` works across processes.
    """

    __slots__ = ()
    _instance: Unset | None = None

    def __new__(cls) -> Unset:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNSET"

    def __bool__(self) -> bool:
        return False

    def __reduce__(self) -> str:
        # Pickled by reference to the module-level name below.
        return "UNSET"

    def __copy__(self) -> Unset:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Unset:
        return self


UNSET: Unset = Unset()
"""Default of the optional `update_*` arguments: `UNSET` leaves a field alone, an explicit None clears it."""
