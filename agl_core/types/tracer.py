"""The span model: the store's JSON-friendly record of one OpenTelemetry span, and its parts.

OpenTelemetry is imported only under ``TYPE_CHECKING``: converting from a ``ReadableSpan`` relies on its
public attributes, so importing this module never loads the OpenTelemetry SDK.
"""

from __future__ import annotations

import random
import time
from collections.abc import Mapping
from enum import Enum
from typing import TYPE_CHECKING, Annotated, Any, Literal, Protocol, Union

from pydantic import BaseModel, ConfigDict, Field, GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic_core import CoreSchema, core_schema

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.trace import SpanContext as OtelSpanContext
    from pydantic.json_schema import JsonSchemaValue

__all__ = [
    "STORED_SPAN_CONTEXT",
    "AttributeValue",
    "Attributes",
    "Event",
    "Link",
    "OtelResource",
    "Span",
    "SpanAttributeNames",
    "SpanContext",
    "SpanCoreFields",
    "SpanLike",
    "SpanNames",
    "SpanRecordingContext",
    "StatusCode",
    "TraceState",
    "TraceStatus",
    "convert_timestamp",
    "with_identity_resource",
]

AttributeValue = str | bool | int | float | list[str] | list[bool] | list[int] | list[float]
"""One span attribute value: a primitive or a homogeneous list of primitives (OpenTelemetry's rule).

Sequences are stored as lists, so a span converted from OpenTelemetry (which keeps tuples) equals the
same span read back from JSON.
"""

_SCALAR_TYPES = (str, bool, int, float)
_EXACT_SCALAR_TYPES: frozenset[type] = frozenset(_SCALAR_TYPES)
_SCALAR_JSON_SCHEMAS: list[dict[str, Any]] = [
    {"type": "string"},
    {"type": "boolean"},
    {"type": "integer"},
    {"type": "number"},
]


def _scalar_kind(item: object) -> type | None:
    """Return the primitive attribute type ``item`` belongs to (subclasses allowed), or None."""
    if isinstance(item, bool):
        return bool
    for kind in (str, int, float):
        if isinstance(item, kind):
            return kind
    return None


def _normalize_sequence(key: str, value: list[Any] | tuple[Any, ...]) -> list[Any]:
    """Check that a sequence attribute is homogeneous and return it as a new list."""
    kinds = set(map(type, value))
    if len(kinds) <= 1 and kinds <= _EXACT_SCALAR_TYPES:
        return list(value)
    base_kinds = {_scalar_kind(item) for item in value}
    if len(base_kinds) == 1 and None not in base_kinds:
        return list(value)
    if base_kinds == {int, float}:
        return [float(item) for item in value]
    names = sorted({type(item).__name__ for item in value})
    raise ValueError(
        f"Span attribute {key!r} is a sequence of {names}; a sequence attribute must hold only str, "
        "only bool, only int or only float values"
    )


def _normalize_attributes(attributes: dict[str, Any]) -> dict[str, Any]:
    """Validate attribute values (fast path for exact primitive types) and turn sequences into lists."""
    for key, value in attributes.items():
        cls = type(value)
        if cls in _EXACT_SCALAR_TYPES:
            continue
        if cls is tuple or cls is list or isinstance(value, (list, tuple)):
            attributes[key] = _normalize_sequence(key, value)
        elif not isinstance(value, _SCALAR_TYPES):
            raise ValueError(
                f"Span attribute {key!r} has a value of type {cls.__name__}; attribute values must be "
                "str, bool, int, float or a homogeneous list of one of them"
            )
    return attributes


STORED_SPAN_CONTEXT: dict[str, Any] = {"agl_stored_span": True}
"""Validation context for spans read back from a store, which validated them when they were added::

    Span.model_validate_json(raw, context=STORED_SPAN_CONTEXT)

Attribute values are then kept as they are instead of being checked one by one in Python (the
slowest part of validating a span). Never use it for spans from anywhere else."""


def _normalize_attributes_unless_stored(attributes: dict[str, Any], info: core_schema.ValidationInfo) -> Any:
    if info.context is STORED_SPAN_CONTEXT:
        return attributes
    return _normalize_attributes(attributes)


class _AttributesSchema:
    """Pydantic schema for :data:`Attributes`: one Python pass over the values instead of an 8-way union."""

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.with_info_after_validator_function(
            _normalize_attributes_unless_stored,
            core_schema.dict_schema(core_schema.str_schema(), core_schema.any_schema()),
        )

    def __get_pydantic_json_schema__(
        self, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        arrays = [{"type": "array", "items": item} for item in _SCALAR_JSON_SCHEMAS]
        return {"type": "object", "additionalProperties": {"anyOf": [*_SCALAR_JSON_SCHEMAS, *arrays]}}


Attributes = Annotated[dict[str, AttributeValue], _AttributesSchema()]
"""Span attributes: string keys to :data:`AttributeValue` values."""

TraceState = dict[str, str]
"""W3C trace state as a plain mapping."""

StatusCode = Literal["UNSET", "OK", "ERROR"]
"""OpenTelemetry status code, by name."""


def convert_timestamp(timestamp: float | None) -> float | None:
    """Return ``timestamp`` in seconds; values above 1e12 are taken as nanoseconds (OpenTelemetry)."""
    if timestamp is None:
        return None
    return timestamp / 1e9 if timestamp > 1e12 else float(timestamp)


class SpanContext(BaseModel):
    """Identity of a span within its trace (mirrors ``opentelemetry.trace.SpanContext``), ids in hex."""

    model_config = ConfigDict(extra="allow")

    trace_id: str
    span_id: str
    is_remote: bool
    trace_state: TraceState


class TraceStatus(BaseModel):
    """Outcome of a span (mirrors ``opentelemetry.trace.Status``)."""

    model_config = ConfigDict(extra="allow")

    status_code: StatusCode
    description: str | None = None


class Event(BaseModel):
    """A timestamped event recorded on a span; ``timestamp`` is in seconds."""

    model_config = ConfigDict(extra="allow")

    name: str
    attributes: Attributes
    timestamp: float | None = None


class Link(BaseModel):
    """A link from a span to another span's context."""

    model_config = ConfigDict(extra="allow")

    context: SpanContext
    attributes: Attributes | None = None


class OtelResource(BaseModel):
    """The OpenTelemetry resource (process/service description) a span was produced by."""

    model_config = ConfigDict(extra="allow")

    attributes: Attributes
    schema_url: str


class SpanCoreFields(BaseModel):
    """The lightweight form of a span that emitters return: no ids, no resource."""

    name: str
    attributes: Attributes = Field(default_factory=dict)
    start_time: float | None = None
    end_time: float | None = None
    status: TraceStatus = Field(default_factory=lambda: TraceStatus(status_code="UNSET"))


class SpanNames(str, Enum):
    """Deprecated: span names and resource keys of Agent Lightning 0.2; use ``agl_core.semconv``."""

    REWARD = "agentlightning.reward"
    MESSAGE = "agentlightning.message"
    OBJECT = "agentlightning.object"
    EXCEPTION = "agentlightning.exception"
    VIRTUAL = "agentlightning.virtual"
    ROLLOUT_ID = "agentlightning.rollout_id"
    ATTEMPT_ID = "agentlightning.attempt_id"
    SPAN_SEQUENCE_ID = "agentlightning.span_sequence_id"


class SpanAttributeNames(str, Enum):
    """Deprecated: attribute names of Agent Lightning 0.2 emitters; use ``agl_core.semconv``."""

    MESSAGE = "message"
    OBJECT = "object"


# ``__dict__`` keys of an OpenTelemetry span (leading underscores stripped) that are either mapped to a
# Span field already or are SDK internals; they are never copied as extra fields.
_NOT_EXTRA: frozenset[str] = frozenset(
    {
        "name",
        "context",
        "parent",
        "resource",
        "attributes",
        "events",
        "links",
        "start_time",
        "end_time",
        "status",
        "kind",
        "instrumentation_info",
        "instrumentation_scope",
        "span_processor",
        "lock",
        "limits",
        "sampler",
        "record_exception",
        "set_status_on_exception",
    }
)
_EXTRA_VALUE_TYPES = (str, int, float, bool, type(None))
# Per span class: raw ``__dict__`` keys known not to be extra fields (grows to the handful a class has).
_skipped_keys_by_class: dict[type, set[str]] = {}


def _extra_fields(src: object) -> dict[str, Any]:
    """Copy cheap extra attributes of ``src``: public-named, not a class attribute, JSON-primitive values.

    Only ``str``/``int``/``float``/``bool``/``None`` values are copied; anything else is dropped rather
    than stringified, which keeps the conversion fast and the stored JSON free of object reprs. For the
    SDK's ``ReadableSpan`` nothing qualifies, and the check costs one set difference.
    """
    try:
        members = vars(src)
    except TypeError:  # a __slots__ class has no extra attributes to copy
        return {}
    cls = type(src)
    skipped = _skipped_keys_by_class.get(cls)
    if skipped is None:
        skipped = _skipped_keys_by_class.setdefault(cls, set())
    candidates = members.keys() - skipped
    if not candidates:
        return {}
    extra: dict[str, Any] = {}
    for key in candidates:
        name = key.lstrip("_")
        if not name or name in _NOT_EXTRA or name in Span.model_fields or hasattr(cls, name):
            skipped.add(key)
        elif type(members[key]) in _EXTRA_VALUE_TYPES:
            extra[name] = members[key]
    return extra


# Converted OpenTelemetry resources by id; a provider shares one immutable Resource across its spans.
_resource_cache: dict[int, tuple[Any, dict[str, Any]]] = {}
_RESOURCE_CACHE_SIZE = 64


def _resource_dict(resource: Any) -> dict[str, Any]:
    """Plain-dict form of an OpenTelemetry resource, cached per resource object."""
    cached = _resource_cache.get(id(resource))
    if cached is not None and cached[0] is resource:
        return cached[1]
    converted = {"attributes": dict(resource.attributes), "schema_url": resource.schema_url or ""}
    if len(_resource_cache) >= _RESOURCE_CACHE_SIZE:
        _resource_cache.clear()
    _resource_cache[id(resource)] = (resource, converted)
    return converted


def _context_dict(ctx: OtelSpanContext) -> dict[str, Any]:
    """Plain-dict form of an OpenTelemetry span context, with hex ids."""
    state = ctx.trace_state
    return {
        "trace_id": format(ctx.trace_id, "032x"),
        "span_id": format(ctx.span_id, "016x"),
        "is_remote": ctx.is_remote,
        "trace_state": dict(state) if state else {},
    }


def _plain_dict(mapping: Mapping[str, Any] | None) -> dict[str, Any]:
    """A ``dict`` view of OpenTelemetry attributes; one pass here is cheaper than pydantic's Mapping path."""
    if mapping is None:
        return {}
    return mapping if type(mapping) is dict else dict(mapping)


def _random_hex_id(bits: int) -> str:
    """Random non-zero id of ``bits`` bits, as zero-padded lowercase hex (OpenTelemetry format)."""
    value = 0
    while value == 0:
        value = random.getrandbits(bits)
    return format(value, f"0{bits // 4}x")


class Span(BaseModel):
    """One recorded span, tagged with the rollout, attempt and per-rollout sequence id it belongs to.

    Ids are lowercase hex (``trace_id`` 32 characters, ``span_id`` 16); times are seconds since the epoch.
    Extra fields are allowed and preserved.
    """

    model_config = ConfigDict(extra="allow")

    rollout_id: str
    attempt_id: str
    sequence_id: int

    trace_id: str
    span_id: str
    parent_id: str | None

    name: str
    status: TraceStatus
    attributes: Attributes
    events: list[Event]
    links: list[Link]

    start_time: float | None
    end_time: float | None

    context: SpanContext | None
    parent: SpanContext | None
    resource: OtelResource

    @classmethod
    def from_opentelemetry(
        cls, src: ReadableSpan, rollout_id: str, attempt_id: str, sequence_id: int
    ) -> Span:
        """Convert an OpenTelemetry ``ReadableSpan`` into a :class:`Span`.

        Ids become hex strings, nanosecond timestamps become seconds (see :func:`convert_timestamp`), and
        events, links, status and resource are converted. Extra instance attributes of ``src`` are copied
        only when they are JSON primitives (see ``_extra_fields``); SDK internals are skipped.
        """
        context = src.get_span_context()
        context_data = _context_dict(context) if context is not None else None
        parent = src.parent
        parent_data = _context_dict(parent) if parent is not None else None
        status = src.status
        data: dict[str, Any] = _extra_fields(src)
        data.update(
            rollout_id=rollout_id,
            attempt_id=attempt_id,
            sequence_id=sequence_id,
            trace_id=context_data["trace_id"] if context_data is not None else "0" * 32,
            span_id=context_data["span_id"] if context_data is not None else "0" * 16,
            parent_id=parent_data["span_id"] if parent_data is not None else None,
            name=src.name,
            status={"status_code": status.status_code.name, "description": status.description},
            attributes=_plain_dict(src.attributes),
            events=[
                {
                    "name": e.name,
                    "attributes": _plain_dict(e.attributes),
                    "timestamp": convert_timestamp(e.timestamp),
                }
                for e in src.events
            ],
            links=[
                {
                    "context": _context_dict(link.context),
                    "attributes": None if link.attributes is None else _plain_dict(link.attributes),
                }
                for link in src.links
            ],
            start_time=convert_timestamp(src.start_time),
            end_time=convert_timestamp(src.end_time),
            context=context_data,
            parent=parent_data,
            resource=_resource_dict(src.resource),
        )
        return cls.model_validate(data)

    @classmethod
    def from_attributes(
        cls,
        *,
        attributes: Mapping[str, Any],
        rollout_id: str | None = None,
        attempt_id: str | None = None,
        sequence_id: int | None = None,
        name: str | None = None,
        trace_id: str | None = None,
        span_id: str | None = None,
        parent_id: str | None = None,
        start_time: float | None = None,
        end_time: float | None = None,
        resource: OtelResource | None = None,
        status: TraceStatus | None = None,
    ) -> Span:
        """Build a synthetic span (no OpenTelemetry span behind it) from attributes.

        Ids default to ``""``, ``""`` and ``0``; trace and span ids are random when omitted; the name
        defaults to ``"agentlightning.virtual"``, the status to OK and the resource to an empty one.
        """
        trace_id = trace_id or _random_hex_id(128)
        span_id = span_id or _random_hex_id(64)
        return cls(
            rollout_id=rollout_id or "",
            attempt_id=attempt_id or "",
            sequence_id=sequence_id or 0,
            trace_id=trace_id,
            span_id=span_id,
            parent_id=parent_id,
            name=name or SpanNames.VIRTUAL.value,
            status=status if status is not None else TraceStatus(status_code="OK"),
            attributes=dict(attributes),
            events=[],
            links=[],
            start_time=start_time,
            end_time=end_time,
            context=SpanContext(trace_id=trace_id, span_id=span_id, is_remote=False, trace_state={}),
            parent=(
                SpanContext(trace_id=trace_id, span_id=parent_id, is_remote=False, trace_state={})
                if parent_id
                else None
            ),
            resource=resource if resource is not None else OtelResource(attributes={}, schema_url=""),
        )

    @classmethod
    def from_core_fields(
        cls,
        core: SpanCoreFields,
        *,
        rollout_id: str | None = None,
        attempt_id: str | None = None,
        sequence_id: int | None = None,
    ) -> Span:
        """Build a span from emitter output; a missing ``start_time`` defaults to now."""
        return cls.from_attributes(
            attributes=core.attributes,
            rollout_id=rollout_id,
            attempt_id=attempt_id,
            sequence_id=sequence_id,
            name=core.name,
            start_time=core.start_time if core.start_time is not None else time.time(),
            end_time=core.end_time,
            status=core.status,
        )


class SpanRecordingContext(Protocol):
    """Handle a tracer gives to code that records a span in progress."""

    def record_exception(self, exception: BaseException) -> None:
        """Record an exception on the span."""
        ...

    def record_attributes(self, attributes: Attributes) -> None:
        """Add attributes to the span."""
        ...

    def record_status(self, code: StatusCode, description: str | None = None) -> None:
        """Set the span's status."""
        ...

    def get_recorded_span(self) -> SpanCoreFields:
        """Return what was recorded so far as :class:`SpanCoreFields`."""
        ...


SpanLike = Union["ReadableSpan", Span]
"""Either an OpenTelemetry ``ReadableSpan`` or a stored :class:`Span`; helpers accept both."""


def with_identity_resource(span: Span) -> Span:
    """``span`` with its rollout id, attempt id and sequence id in its resource attributes.

    The tracer stamps every span it records this way, so spans reaching a store (over HTTP too) carry
    their identity in the resource as Agent Lightning 0.3's OTLP-exported spans did
    (``agentlightning.rollout_id`` / ``attempt_id`` / ``span_sequence_id``). A span that already
    carries them is returned as is.
    """
    identity = {
        SpanNames.ROLLOUT_ID.value: span.rollout_id,
        SpanNames.ATTEMPT_ID.value: span.attempt_id,
        SpanNames.SPAN_SEQUENCE_ID.value: span.sequence_id,
    }
    attributes = span.resource.attributes
    if all(attributes.get(key) == value for key, value in identity.items()):
        return span
    resource = span.resource.model_copy(update={"attributes": {**attributes, **identity}})
    return span.model_copy(update={"resource": resource})
