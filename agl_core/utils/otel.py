"""OpenTelemetry attribute helpers: flatten/unflatten, sanitize, tags, links, and provider lookup.

Span attributes are flat (``str`` keys, primitive or homogeneous-list values). agl stores structured data
(reward dimensions, operation inputs) by flattening it into dotted keys, lists indexed by position:
``{"agentlightning.reward": [{"name": "primary", "value": 1.0}]}`` becomes
``{"agentlightning.reward.0.name": "primary", "agentlightning.reward.0.value": 1.0}``.
"""

from __future__ import annotations

import json
import logging
import os
import traceback
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast

from pydantic import TypeAdapter

from agl_core.semconv import (
    EXCEPTION_ESCAPED,
    EXCEPTION_MESSAGE,
    EXCEPTION_STACKTRACE,
    EXCEPTION_TYPE,
    LightningSpanAttributes,
    LinkAttributes,
    LinkPydanticModel,
)

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import SpanProcessor
    from opentelemetry.sdk.trace import TracerProvider as SdkTracerProvider
    from opentelemetry.trace import Tracer as OtelTracerApi

    from agl_core.types import AttributeValue, SpanLike

__all__ = [
    "check_attributes_sanity",
    "extract_links_from_attributes",
    "extract_tags_from_attributes",
    "filter_and_unflatten_attributes",
    "filter_attributes",
    "flatten_attributes",
    "format_exception_attributes",
    "full_qualified_name",
    "get_span_processors",
    "get_tracer",
    "get_tracer_provider",
    "make_link_attributes",
    "make_tag_attributes",
    "query_linked_spans",
    "sanitize_attribute_value",
    "sanitize_attributes",
    "sanitize_list_attribute_sanity",
    "unflatten_attributes",
]

logger = logging.getLogger(__name__)

_PRIMITIVES = (str, bool, int, float)
_EXACT_LEAVES = frozenset({str, bool, int, float, type(None)})
_SpanT = TypeVar("_SpanT", bound="SpanLike")
_ProcessorT = TypeVar("_ProcessorT", bound="SpanProcessor")


def full_qualified_name(obj: type[Any]) -> str:
    """``module.QualName`` of a class; builtins are unqualified (``"dict"``, not ``"builtins.dict"``)."""
    module = getattr(obj, "__module__", None)
    if not module or module == "builtins":
        return obj.__qualname__
    return f"{module}.{obj.__qualname__}"


def _primitive_kind(value: Any) -> type:
    return bool if isinstance(value, bool) else int if isinstance(value, int) else type(value)


# ------------------------------------------------------------------------------ flatten / unflatten


def flatten_attributes(
    nested_data: Mapping[str, Any] | Sequence[Any], *, expand_leaf_lists: bool = False
) -> dict[str, Any]:
    """Flatten nested dicts/lists (``nested_data``) into dotted keys; list positions become key segments.

    A non-empty list of one primitive type (str, bool, int or float) stays a leaf value unless
    ``expand_leaf_lists``; a list mixing primitive types is expanded (with a warning) since an attribute
    list must be homogeneous. Raises ``ValueError`` for a non-``str`` dict key.
    """
    flat: dict[str, Any] = {}

    def walk(value: Any, prefix: str) -> None:
        cls = type(value)
        if cls in _EXACT_LEAVES:  # fast path: no ABC checks for plain values
            flat[prefix] = value
            return
        if cls is dict or isinstance(value, Mapping):
            for key, item in value.items():
                if not isinstance(key, str):
                    raise ValueError(
                        f"Attribute keys must be strings; got {key!r} ({type(key).__name__}) under "
                        f"{prefix or '<root>'!r}. Convert the key with str() first."
                    )
                walk(item, f"{prefix}.{key}" if prefix else key)
            return
        if cls is list or cls is tuple or isinstance(value, (list, tuple)):
            if prefix and value and not expand_leaf_lists and all(isinstance(v, _PRIMITIVES) for v in value):
                kinds = {_primitive_kind(v) for v in value}
                if len(kinds) == 1:
                    flat[prefix] = list(value)
                    return
                logger.warning(
                    "Attribute %r mixes %s values; storing it as indexed keys instead of one list.",
                    prefix,
                    sorted(kind.__name__ for kind in kinds),
                )
            for index, item in enumerate(value):
                walk(item, f"{prefix}.{index}" if prefix else str(index))
            return
        flat[prefix] = value

    walk(nested_data, "")
    return flat


def unflatten_attributes(flat_data: Mapping[str, Any]) -> dict[str, Any] | list[Any]:
    """Rebuild the nested structure from dotted keys (inverse of :func:`flatten_attributes`).

    A dict whose keys are exactly ``"0"`` .. ``"n-1"`` becomes a list. When a key is both a value and a
    prefix of other keys (``"a"`` and ``"a.b"``), the nested keys win.
    """
    root: dict[str, Any] = {}
    for key, value in flat_data.items():
        parts = key.split(".")
        node = root
        for part in parts[:-1]:
            child = node.get(part)
            if not isinstance(child, dict):
                child = {}
                node[part] = child
            node = child
        if not isinstance(node.get(parts[-1]), dict):
            node[parts[-1]] = value

    def listify(node: Any) -> Any:
        if not isinstance(node, dict):
            return node
        for key in node:
            node[key] = listify(node[key])
        # keys exactly "0".."n-1" (compared as text: an index like "4294967294" or 5,000 digits costs
        # nothing and never becomes a list)
        if node and node.keys() == {str(i) for i in range(len(node))}:
            return [node[str(i)] for i in range(len(node))]
        return node

    return cast("dict[str, Any] | list[Any]", listify(root))


def filter_attributes(attributes: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    """The attributes whose key is ``prefix`` or starts with ``prefix + "."``."""
    dotted = prefix + "."
    return {key: value for key, value in attributes.items() if key == prefix or key.startswith(dotted)}


def filter_and_unflatten_attributes(attributes: Mapping[str, Any], prefix: str) -> dict[str, Any] | list[Any]:
    """Select the keys under ``prefix``, strip it, and unflatten the rest.

    Raises ``ValueError`` if a key equals ``prefix`` itself (there is nothing left to unflatten).
    """
    stripped: dict[str, Any] = {}
    for key, value in filter_attributes(attributes, prefix).items():
        if key == prefix:
            raise ValueError(
                f"Attribute {key!r} equals the prefix {prefix!r}; only keys below it ({prefix}.<...>) can be "
                "unflattened."
            )
        stripped[key[len(prefix) + 1 :]] = value
    return unflatten_attributes(stripped)


# ------------------------------------------------------------------------------------ sanitizing


def sanitize_list_attribute_sanity(maybe_list: Sequence[Any]) -> AttributeValue:
    """Return ``maybe_list`` as a valid attribute list, or raise ``ValueError`` if that is impossible.

    All str -> ``list[str]``; all bool -> ``list[bool]``; ints and bools -> ``list[int]``; numbers ->
    ``list[float]``. An empty list is a valid ``list[str]``.
    """
    items = list(maybe_list)
    if all(isinstance(v, str) for v in items):
        return items
    if all(isinstance(v, bool) for v in items):
        return items
    if all(isinstance(v, int) for v in items):
        return [int(v) for v in items]
    if all(isinstance(v, (int, float)) for v in items):
        return [float(v) for v in items]
    kinds = sorted({type(v).__name__ for v in items})
    raise ValueError(f"A list attribute must hold one primitive type (str, bool, int or float); got {kinds}.")


def sanitize_attribute_value(object: Any, force: bool = True) -> AttributeValue:
    """Make ``object`` a valid attribute value: primitives as is, lists made homogeneous, anything else JSON.

    With ``force`` objects JSON cannot encode are stringified (``default=str``); without it they raise
    ``ValueError``.
    """
    if isinstance(object, _PRIMITIVES):
        return object
    if isinstance(object, (list, tuple)):
        try:
            return sanitize_list_attribute_sanity(object)
        except ValueError as exc:
            logger.debug("Storing a mixed list as JSON: %s", exc)
    try:
        return json.dumps(object, default=str if force else None)
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"Attribute object of type {full_qualified_name(type(object))} is not JSON serializable; "
            "convert it to a str, number, bool, list or dict first (or pass force=True)."
        ) from exc


def sanitize_attributes(attributes: Mapping[str, Any], force: bool = True) -> dict[str, AttributeValue]:
    """Apply :func:`sanitize_attribute_value` to every value; errors name the offending key."""
    result: dict[str, AttributeValue] = {}
    for key, value in attributes.items():
        try:
            result[key] = sanitize_attribute_value(value, force=force)
        except ValueError as exc:
            raise ValueError(f"Attribute {key!r}: {exc}") from exc
    return result


def check_attributes_sanity(attributes: Mapping[Any, Any]) -> None:
    """Raise ``ValueError`` unless keys are str and values are primitives or homogeneous primitive lists."""
    for key, value in attributes.items():
        if not isinstance(key, str):
            raise ValueError(f"Attribute keys must be strings; got {key!r} ({type(key).__name__}).")
        if isinstance(value, (list, tuple)):
            try:
                sanitize_list_attribute_sanity(value)
            except ValueError as exc:
                raise ValueError(f"Attribute {key!r}: {exc}") from exc
        elif not isinstance(value, _PRIMITIVES):
            raise ValueError(
                f"Attribute {key!r} has a value of type {full_qualified_name(type(value))}; values must be "
                "str, int, float, bool or a list of one of them. Serialize it (e.g. json.dumps) first."
            )


def format_exception_attributes(exception: BaseException) -> dict[str, AttributeValue]:
    """OpenTelemetry exception attributes: type, message, escaped, and the stacktrace if it was raised."""
    attributes: dict[str, AttributeValue] = {
        EXCEPTION_TYPE: type(exception).__name__,
        EXCEPTION_MESSAGE: str(exception),
        EXCEPTION_ESCAPED: True,
    }
    if exception.__traceback__ is not None:
        trace = traceback.format_exception(type(exception), exception, exception.__traceback__)
        attributes[EXCEPTION_STACKTRACE] = "".join(trace)
    return attributes


# ------------------------------------------------------------------------------------ tags and links


def make_tag_attributes(tags: Sequence[str]) -> dict[str, Any]:
    """``agentlightning.tag.<i>`` attributes for free-form string tags."""
    return flatten_attributes({LightningSpanAttributes.TAG.value: list(tags)}, expand_leaf_lists=True)


def extract_tags_from_attributes(attributes: Mapping[str, Any]) -> list[str]:
    """The tags written by :func:`make_tag_attributes` (empty when there are none)."""
    found = filter_and_unflatten_attributes(attributes, LightningSpanAttributes.TAG.value)
    return TypeAdapter(list[str]).validate_python(found or [])


def make_link_attributes(links: Mapping[str, Any]) -> dict[str, Any]:
    """``agentlightning.link.<i>.key_match/value_match`` attributes, one link per ``{key: value}`` item.

    A link points at the spans whose attribute ``key`` equals ``value``; the keys ``trace_id`` and
    ``span_id`` match the span's own ids. Raises ``ValueError`` for a non-str value.
    """
    entries: list[dict[str, str]] = []
    for key, value in links.items():
        if not isinstance(value, str):
            raise ValueError(
                f"Link value for {key!r} must be a str, got {type(value).__name__}; convert it with str()."
            )
        entries.append({LinkAttributes.KEY_MATCH.value: key, LinkAttributes.VALUE_MATCH.value: value})
    return flatten_attributes({LightningSpanAttributes.LINK.value: entries}, expand_leaf_lists=True)


def extract_links_from_attributes(attributes: Mapping[str, Any]) -> list[LinkPydanticModel]:
    """The links written by :func:`make_link_attributes` (empty when there are none)."""
    found = filter_and_unflatten_attributes(attributes, LightningSpanAttributes.LINK.value)
    return TypeAdapter(list[LinkPydanticModel]).validate_python(found or [])


def _span_ids(span: SpanLike) -> tuple[str | None, str | None]:
    """(trace_id, span_id) in hex for a stored span or an OpenTelemetry span."""
    trace_id = getattr(span, "trace_id", None)
    span_id = getattr(span, "span_id", None)
    if isinstance(trace_id, str) and isinstance(span_id, str):
        return trace_id, span_id
    context = span.get_span_context() if hasattr(span, "get_span_context") else None
    if context is None:
        return None, None
    return format(context.trace_id, "032x"), format(context.span_id, "016x")


def query_linked_spans(spans: Sequence[_SpanT], links: Sequence[LinkPydanticModel]) -> list[_SpanT]:
    """The spans matching every link exactly (``trace_id``/``span_id`` compare against the span's ids)."""
    matched: list[_SpanT] = []
    for span in spans:
        attributes = span.attributes or {}
        ids: tuple[str | None, str | None] | None = None
        ok = True
        for link in links:
            actual: object
            if link.key_match in ("trace_id", "span_id"):
                ids = ids or _span_ids(span)
                actual = ids[0] if link.key_match == "trace_id" else ids[1]
            else:
                actual = attributes.get(link.key_match)
            if actual != link.value_match:
                ok = False
                break
        if ok:
            matched.append(span)
    return matched


# ------------------------------------------------------------------------------ provider lookup


def _emitter_debug() -> bool:
    flag = os.environ.get("AGL_EMITTER_DEBUG", "").strip().lower()
    if flag in ("1", "true", "yes", "on"):
        return True
    if flag in ("0", "false", "no", "off"):
        return False
    return logger.isEnabledFor(logging.DEBUG)


def get_span_processors(provider: SdkTracerProvider, expected_type: type[_ProcessorT]) -> list[_ProcessorT]:
    """The span processors of ``provider`` that are instances of ``expected_type``."""
    multi = getattr(provider, "_active_span_processor", None)
    processors = getattr(multi, "_span_processors", ())
    return [p for p in processors if isinstance(p, expected_type)]


def get_tracer_provider(inspect: bool = True) -> SdkTracerProvider:
    """The SDK tracer provider agl emits into: the active ``OtelTracer``'s own provider.

    Falls back to the global provider: an SDK provider, or (logged as an error, as Agent Lightning 0.3 did)
    any other one installed; ``RuntimeError`` when none is installed.
    With ``inspect`` (and ``AGL_EMITTER_DEBUG=1`` or DEBUG logging) the processor chain is logged.
    """
    from opentelemetry import trace as trace_api
    from opentelemetry.sdk.trace import SpanProcessor
    from opentelemetry.sdk.trace import TracerProvider as SdkProvider

    from agl_core.tracer.base import get_active_tracer

    provider: Any = getattr(get_active_tracer(), "tracer_provider", None)
    if not isinstance(provider, SdkProvider):
        provider = trace_api.get_tracer_provider()
    if not isinstance(provider, SdkProvider):
        if getattr(trace_api, "_TRACER_PROVIDER", None) is None:  # none installed at all
            raise RuntimeError(
                "No OpenTelemetry SDK tracer provider is available. Run inside "
                "`OtelTracer.trace_context(...)` (after `init_worker`) or install an SDK TracerProvider "
                "globally."
            )
        # another library's provider (AgentOps', say): Agent Lightning 0.3 logged and used it
        logger.error(
            "The tracer provider is expected to be an opentelemetry.sdk.trace.TracerProvider, found %s.%s.",
            type(provider).__module__,
            type(provider).__qualname__,
        )
        return cast("SdkTracerProvider", provider)
    if inspect and _emitter_debug():
        chain = [type(p).__name__ for p in get_span_processors(provider, SpanProcessor)]
        logger.debug("Tracer provider %r; span processors: %s", provider, chain or "none")
    return provider


def get_tracer(use_active_span_processor: bool = True) -> OtelTracerApi:
    """An OpenTelemetry tracer named ``agentlightning`` on :func:`get_tracer_provider`.

    With ``use_active_span_processor=False`` the tracer shares the provider's resource and sampler but
    exports nowhere (its spans are local only).
    """
    provider = get_tracer_provider(inspect=True)
    if use_active_span_processor:
        return provider.get_tracer("agentlightning")
    from opentelemetry.sdk.trace import TracerProvider as SdkProvider

    detached = SdkProvider(resource=provider.resource, sampler=provider.sampler)
    return detached.get_tracer("agentlightning")
