"""Core data model: rollouts, attempts, workers, triplets, pagination, filters and lifecycle bases."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import (
    TYPE_CHECKING,
    Any,
    Generic,
    Literal,
    Protocol,
    TypedDict,
    TypeVar,
    Union,
    overload,
    runtime_checkable,
)

from pydantic import BaseModel, Field, model_validator

from agl_core.types.status import AttemptStatus, RolloutMode, RolloutStatus, WorkerStatus
from agl_core.types.tracer import Span, SpanCoreFields

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

__all__ = [
    "Attempt",
    "AttemptedRollout",
    "Dataset",
    "EnqueueRolloutRequest",
    "FilterField",
    "FilterOptions",
    "Hook",
    "PaginatedResult",
    "ParallelWorkerBase",
    "Rollout",
    "RolloutConfig",
    "RolloutRawResult",
    "SortOptions",
    "TaskInput",
    "Triplet",
    "Worker",
]

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)

TaskInput = Any
"""The input of one task (a rollout's ``input``): anything the agent understands."""


class Triplet(BaseModel):
    """One training sample: a prompt, the model's response and an optional reward."""

    prompt: Any
    response: Any
    reward: float | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class RolloutConfig(BaseModel):
    """Per-rollout execution policy: timeouts and retries.

    ``retry_condition`` lists the attempt statuses (``failed``, ``timeout``, ``unresponsive``) that
    requeue the rollout instead of failing it, up to ``max_attempts`` attempts in total.
    """

    timeout_seconds: float | None = None
    unresponsive_seconds: float | None = None
    max_attempts: int = Field(default=1, ge=1)
    retry_condition: list[AttemptStatus] = Field(default_factory=list)


class Rollout(BaseModel):
    """One task to run: its input, mode, resources version, status and execution policy."""

    rollout_id: str
    input: TaskInput
    start_time: float
    end_time: float | None = None
    mode: RolloutMode | None = None
    resources_id: str | None = None
    status: RolloutStatus = "queuing"
    config: RolloutConfig = Field(default_factory=RolloutConfig)
    metadata: dict[str, Any] | None = None


class Attempt(BaseModel):
    """One execution of a rollout by a runner; ``sequence_id`` counts attempts from 1."""

    rollout_id: str
    attempt_id: str
    sequence_id: int
    start_time: float
    end_time: float | None = None
    status: AttemptStatus = "preparing"
    worker_id: str | None = None
    last_heartbeat_time: float | None = None
    metadata: dict[str, Any] | None = None


class AttemptedRollout(Rollout):
    """A rollout together with the attempt a runner is executing it under."""

    attempt: Attempt

    @model_validator(mode="after")
    def _check_consistency(self) -> AttemptedRollout:
        """Reject an attempt that belongs to another rollout."""
        if self.attempt.rollout_id != self.rollout_id:
            raise ValueError("Inconsistent rollout_id between Rollout and Attempt")
        return self


class EnqueueRolloutRequest(BaseModel):
    """Arguments of one ``enqueue_rollout`` call, for bulk enqueueing and the REST API."""

    input: TaskInput
    mode: RolloutMode | None = None
    resources_id: str | None = None
    config: RolloutConfig | None = None
    metadata: dict[str, Any] | None = None


class Worker(BaseModel):
    """What the store knows about one runner worker: status, heartbeats and current work."""

    worker_id: str
    status: WorkerStatus = "unknown"
    heartbeat_stats: dict[str, Any] | None = None
    last_heartbeat_time: float | None = None
    last_dequeue_time: float | None = None
    last_busy_time: float | None = None
    last_idle_time: float | None = None
    current_rollout_id: str | None = None
    current_attempt_id: str | None = None


class PaginatedResult(BaseModel, Sequence[T], Generic[T]):
    """One page of query results that also behaves as a read-only sequence of its ``items``.

    ``len()``, indexing, slicing, iteration and ``in`` all go to ``items``, so callers can treat the
    result as a plain list. ``total`` counts all matches, not only this page.
    """

    items: list[T]
    limit: int
    offset: int
    total: int

    def __len__(self) -> int:
        """Number of items on this page."""
        return len(self.items)

    @overload
    def __getitem__(self, index: int) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> list[T]: ...

    def __getitem__(self, index: int | slice) -> T | list[T]:
        """Item (or list of items for a slice) of this page."""
        return self.items[index]

    def __iter__(self) -> Iterator[T]:  # type: ignore[override]
        """Iterate over the items (not over the model's fields, unlike a plain ``BaseModel``)."""
        return iter(self.items)

    def __contains__(self, value: object) -> bool:
        """Whether ``value`` is one of the items."""
        return value in self.items

    def __repr__(self) -> str:
        """Agent Lightning 0.3's compact repr: ``<PaginatedResult (0:10 of 42) [<first item>, ...]>``."""
        if not self.items:
            shown = "empty"
        elif len(self.items) == 1:
            shown = repr(self.items[0])
        else:
            shown = f"[{self.items[0]!r}, ...]"
        window = f"{self.offset}:" if self.limit == -1 else f"{self.offset}:{self.offset + self.limit}"
        return f"<PaginatedResult ({window} of {self.total}) {shown}>"


class FilterField(TypedDict, total=False):
    """Conditions on one field: equal to ``exact``, one of ``within``, or containing ``contains``."""

    exact: Any
    within: Iterable[Any]
    contains: str


FilterOptions = Mapping[
    str,
    FilterField | Literal["and", "or"] | Mapping[str, FilterField] | Sequence[Mapping[str, FilterField]],
]
"""Query filter: field name -> :class:`FilterField`.

Special keys: ``"_aggregate"`` (``"and"``, the default, or ``"or"``) combines the field conditions;
``"_must"`` (a mapping of field conditions, or a sequence of such mappings) is always ANDed.
"""


class SortOptions(TypedDict):
    """Sort order of a query: field ``name`` and direction ``order``."""

    name: str
    order: Literal["asc", "desc"]


class ParallelWorkerBase:
    """Lifecycle shared by components that run in several workers (runners, tracers, hooks).

    Call order: ``init`` once, then per worker ``init_worker`` -> ``run`` -> ``teardown_worker``, then
    ``teardown`` once. Every method is a no-op by default.
    """

    worker_id: int | None = None

    def init(self, *args: Any, **kwargs: Any) -> None:
        """Prepare shared state once, before any worker starts."""

    def init_worker(self, worker_id: int, *args: Any, **kwargs: Any) -> None:
        """Prepare one worker; records ``worker_id`` on the instance."""
        self.worker_id = worker_id

    def run(self, *args: Any, **kwargs: Any) -> Any:
        """Do the worker's work."""

    def teardown_worker(self, worker_id: int, *args: Any, **kwargs: Any) -> None:
        """Release one worker's resources."""

    def teardown(self, *args: Any, **kwargs: Any) -> None:
        """Release shared state once, after all workers stopped."""


class Hook(ParallelWorkerBase):
    """Callbacks a runner invokes around traces and rollouts; override any of the async no-ops."""

    async def on_trace_start(self, *, agent: Any, runner: Any, tracer: Any, rollout: Rollout) -> None:
        """Called before the tracer starts tracing a rollout."""

    async def on_trace_end(self, *, agent: Any, runner: Any, tracer: Any, rollout: Rollout) -> None:
        """Called after the tracer stopped tracing a rollout."""

    async def on_rollout_start(self, *, agent: Any, runner: Any, rollout: Rollout) -> None:
        """Called before the agent runs a rollout."""

    async def on_rollout_end(
        self,
        *,
        agent: Any,
        runner: Any,
        rollout: Rollout,
        spans: list[ReadableSpan] | list[Span],
    ) -> None:
        """Called after the agent finished a rollout, with the spans it produced."""


@runtime_checkable
class Dataset(Protocol[T_co]):
    """Anything indexable with a length (a plain ``list`` qualifies)."""

    def __getitem__(self, index: int, /) -> T_co:
        """Return the sample at ``index``."""
        ...

    def __len__(self) -> int:
        """Return the number of samples."""
        ...


RolloutRawResult = Union[None, float, list["ReadableSpan"], list[Span], list[SpanCoreFields]]  # noqa: UP007
"""What an agent's rollout function may return: nothing, a final reward, or the spans it produced."""


# 0.3 defined its v0.1 types here; agl keeps them in types/legacy.py (the table in agl_core._moved03).
def __getattr__(name: str) -> Any:
    from agl_core._moved03 import moved_name

    return moved_name(__name__, name)
