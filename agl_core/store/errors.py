"""Typed errors raised by every `LightningStore` implementation.

The hierarchy lets callers (and the HTTP server, which maps them to 4xx responses) tell a caller's
mistake from a store fault:

```
StoreError(AglError)          # AglError: the root of agl's own errors (agl_core.errors)
├── NotFoundError(StoreError, KeyError, ValueError)       -> 404
│   ├── RolloutNotFoundError
│   ├── AttemptNotFoundError
│   └── ResourcesNotFoundError (also a RuntimeError: the runner raises it too)
├── InvalidRequestError(StoreError, ValueError)           -> 400
│   ├── InvalidStatusError
│   ├── InvalidFilterError
│   ├── InvalidSpanError
│   └── InvalidArgumentTypeError (also a TypeError, as 0.3 raised for these)
└── StoreClosedError(StoreError, RuntimeError)
```

`NotFoundError` is also a `ValueError` because Agent Lightning 0.3 raised `ValueError` for unknown
ids; code written against it (`except ValueError`) keeps working, and the not-found messages start
with 0.3's sentence ("Rollout ro-x not found", "Attempt at-y not found for rollout ro-x", "No attempts
found for rollout ro-x"), then say how to fix it. Check `NotFoundError` before
`InvalidRequestError` when mapping to status codes.

Every message names the offending value and says how to fix it. `str(error)` is the plain message
(`KeyError` would otherwise print it quoted).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from agl_core.errors import AglError

__all__ = [
    "AttemptNotFoundError",
    "InvalidArgumentTypeError",
    "InvalidFilterError",
    "InvalidRequestError",
    "InvalidSpanError",
    "InvalidStatusError",
    "NotFoundError",
    "ResourcesNotFoundError",
    "RolloutNotFoundError",
    "StoreClosedError",
    "StoreCorruptError",
    "StoreError",
    "StoreOpenError",
]


class StoreError(AglError):
    """Base class of every error a store raises on purpose."""

    @property
    def message(self) -> str:
        """The human-readable message."""
        return str(self.args[0]) if self.args else ""

    def __str__(self) -> str:
        return self.message


class NotFoundError(StoreError, KeyError, ValueError):
    """An id (rollout, attempt, resources) does not exist in the store."""

    def __str__(self) -> str:  # KeyError.__str__ would repr() the message
        return self.message


class RolloutNotFoundError(NotFoundError):
    """No rollout with this id; `rollout_id` holds the id."""

    def __init__(self, rollout_id: str, message: str | None = None) -> None:
        self.rollout_id = rollout_id
        super().__init__(
            message
            or f"Rollout {rollout_id} not found. Use an id returned by enqueue_rollout()/start_rollout(), "
            "or list the existing ones with query_rollouts()."
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.rollout_id, self.message))


class AttemptNotFoundError(NotFoundError):
    """No such attempt for this rollout (or the rollout has no attempt yet for `"latest"`)."""

    def __init__(self, rollout_id: str, attempt_id: str, message: str | None = None) -> None:
        self.rollout_id = rollout_id
        self.attempt_id = attempt_id
        if message is None:
            if attempt_id == "latest":
                message = (
                    f"No attempts found for rollout {rollout_id}, so 'latest' does not resolve. "
                    "Dequeue it (dequeue_rollout) or call start_attempt() first."
                )
            else:
                message = (
                    f"Attempt {attempt_id} not found for rollout {rollout_id}. "
                    "Use an attempt id of this rollout (see query_attempts()) or 'latest'."
                )
        super().__init__(message)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.rollout_id, self.attempt_id, self.message))


class ResourcesNotFoundError(NotFoundError, RuntimeError):
    """No resources snapshot with this id; `resources_id` holds the id.

    A store raises it for an unknown id, and a runner fails an attempt with it when the rollout names
    resources the store lacks (a `RuntimeError` too, as Agent Lightning 0.3's runner error was).
    """

    def __init__(self, resources_id: str, message: str | None = None) -> None:
        self.resources_id = resources_id
        super().__init__(
            message
            or f"Resources {resources_id!r} not found. Use an id returned by add_resources() or "
            "update_resources(), or list them with query_resources()."
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.resources_id, self.message))


class InvalidRequestError(StoreError, ValueError):
    """The arguments of a store call are malformed (bad limit, offset, mode, sort order...)."""


class InvalidStatusError(InvalidRequestError):
    """A status value is not one of the allowed literals; `value` and `allowed` describe it."""

    def __init__(self, kind: str, value: object, allowed: Iterable[str], message: str | None = None) -> None:
        self.kind = kind
        self.value = value
        self.allowed = tuple(allowed)
        super().__init__(
            message
            or f"Invalid {kind} status {value!r}. Use one of: {', '.join(repr(a) for a in self.allowed)}."
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.kind, self.value, self.allowed, self.message))


class InvalidFilterError(InvalidRequestError):
    """A filter, sort or filter-logic option is malformed (unknown operator, field, bad shape)."""


class InvalidSpanError(InvalidRequestError):
    """A span cannot be stored as given (wrong type, missing ids, negative sequence id)."""


class InvalidArgumentTypeError(InvalidRequestError, TypeError):
    """An argument of a store call has the wrong type (``heartbeat_stats=None``); 0.3 raised `TypeError`."""


class StoreClosedError(StoreError, RuntimeError):
    """The store was closed; open a new one (or use it inside `async with store:` only)."""


class StoreOpenError(StoreError):
    """The store file or database cannot be opened; `hint` says how to fix it."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint


class StoreCorruptError(StoreOpenError):
    """The database file is damaged; the store refuses it (and every later call) instead of half-working."""
