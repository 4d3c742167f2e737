"""``operation``: trace a unit of work as an ``agentlightning.operation`` span (decorator or context manager).

Unlike Agent Lightning 0.3, the tracer is looked up when the operation *runs* (at each call, or when the
``with`` block is entered), not when the decorator is applied: a module can decorate functions at import
time and they are traced by whichever tracer is active where they are called.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from contextlib import AbstractContextManager
from types import TracebackType
from typing import Any, TypeVar, cast, overload

import agl_core.emitter.annotation as annotation  # 0.3 defined operation there; its patches apply
from agl_core.emitter._resolve import resolve_tracer
from agl_core.semconv import AGL_OPERATION, LightningSpanAttributes
from agl_core.types import SpanCoreFields, SpanRecordingContext
from agl_core.utils.otel import flatten_attributes, sanitize_attributes

__all__ = ["OperationContext", "operation"]

_FnT = TypeVar("_FnT", bound=Callable[..., Any])
_NAME = LightningSpanAttributes.OPERATION_NAME.value
_INPUT = LightningSpanAttributes.OPERATION_INPUT.value
_OUTPUT = LightningSpanAttributes.OPERATION_OUTPUT.value


def _prefixed(prefix: str, key: str, value: Any) -> dict[str, Any]:
    """``{prefix.key[.nested...]: leaf}`` for one value."""
    return {f"{prefix}.{k}": v for k, v in flatten_attributes({key: value}).items()}


def _call_inputs(
    signature: inspect.Signature | None, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> dict[str, Any]:
    """Input attributes of a call: bound parameters, ``*args`` by index; raw args/kwargs if binding fails."""
    attributes: dict[str, Any] = {}
    try:
        if signature is None:
            raise TypeError("no signature")
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
    except (TypeError, ValueError):
        for index, value in enumerate(args):
            attributes.update(_prefixed(f"{_INPUT}.args", str(index), value))
        if kwargs:
            attributes.update(_prefixed(_INPUT, "kwargs", kwargs))
        return attributes
    for name, value in bound.arguments.items():
        if signature.parameters[name].kind is inspect.Parameter.VAR_POSITIONAL:
            for index, item in enumerate(value):
                attributes.update(_prefixed(f"{_INPUT}.{name}", str(index), item))
        else:
            attributes.update(_prefixed(_INPUT, name, value))
    return attributes


def _output_attributes(value: Any) -> dict[str, Any]:
    return flatten_attributes({_OUTPUT: value})


class OperationContext:
    """An operation span: use it with ``with`` (``set_input``/``set_output``) or call it on a function."""

    def __init__(
        self,
        attributes: dict[str, Any] | str,
        propagate: Any = True,
        *legacy_propagate: bool,
        name: str = AGL_OPERATION,
    ) -> None:
        if isinstance(attributes, str):  # Agent Lightning 0.3's OperationContext(name, attributes, propagate)
            if not isinstance(propagate, dict):
                raise TypeError("OperationContext(name, attributes, propagate): attributes must be a dict.")
            name, attributes = attributes, propagate
            propagate = legacy_propagate[0] if legacy_propagate else True
        elif legacy_propagate:
            raise TypeError("OperationContext takes (attributes, propagate, *, name=...).")
        self.name = name
        self.propagate = propagate
        self.initial_attributes = flatten_attributes(attributes, expand_leaf_lists=False)
        self._manager: AbstractContextManager[SpanRecordingContext] | None = None
        self._recording: SpanRecordingContext | None = None
        self._span: SpanCoreFields | None = None

    def _open(self, extra: dict[str, Any] | None = None) -> AbstractContextManager[SpanRecordingContext]:
        tracer = resolve_tracer(self.propagate, "operation span", annotation.get_active_tracer)
        attributes = sanitize_attributes({**(extra or {}), **self.initial_attributes})
        return tracer.operation_context(self.name, attributes=attributes)

    # -------------------------------------------------------------- context-manager form

    def __enter__(self) -> OperationContext:
        manager = self._open()
        self._recording = manager.__enter__()
        self._manager = manager
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        manager, recording = self._manager, self._recording
        self._manager = self._recording = None
        if manager is None or recording is None:
            return
        try:
            manager.__exit__(exc_type, exc, tb)
        finally:
            self._span = recording.get_recorded_span()

    def _require_recording(self, action: str) -> SpanRecordingContext:
        if self._recording is None:
            raise RuntimeError(f"Cannot {action} outside the `with operation(...)` block.")
        return self._recording

    def set_input(self, *args: Any, **kwargs: Any) -> None:
        """Record inputs: positional ones as ``input.args.<i>``, keyword ones as ``input.<name>``."""
        recording = self._require_recording("set input")
        attributes: dict[str, Any] = {}
        for index, value in enumerate(args):
            attributes.update(_prefixed(f"{_INPUT}.args", str(index), value))
        for key, value in kwargs.items():
            attributes.update(_prefixed(_INPUT, key, value))
        if attributes:
            recording.record_attributes(sanitize_attributes(attributes))

    def set_output(self, output: Any) -> None:
        """Record the result as ``agentlightning.operation.output[.<nested>]``."""
        recording = self._require_recording("set output")
        recording.record_attributes(sanitize_attributes(_output_attributes(output)))

    def span(self) -> SpanCoreFields:
        """The finished span; raises ``RuntimeError("Span is not ready yet.")`` inside the block."""
        if self._span is None:
            raise RuntimeError("Span is not ready yet.")
        return self._span

    # -------------------------------------------------------------- decorator form

    def __call__(self, fn: _FnT) -> _FnT:
        """Trace every call of ``fn`` (sync or async): name, bound inputs, output, and any exception."""
        try:
            signature: inspect.Signature | None = inspect.signature(fn)
        except (TypeError, ValueError):
            signature = None
        base = {_NAME: getattr(fn, "__name__", type(fn).__name__)}

        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                with self._open(base) as recording:
                    recording.record_attributes(sanitize_attributes(_call_inputs(signature, args, kwargs)))
                    result = await fn(*args, **kwargs)
                    recording.record_attributes(sanitize_attributes(_output_attributes(result)))
                    return result

            return cast(_FnT, async_wrapper)

        @functools.wraps(fn)
        def sync_wrapper(*args: Any, **kwargs: Any) -> Any:
            with self._open(base) as recording:
                recording.record_attributes(sanitize_attributes(_call_inputs(signature, args, kwargs)))
                result = fn(*args, **kwargs)
                recording.record_attributes(sanitize_attributes(_output_attributes(result)))
                return result

        return cast(_FnT, sync_wrapper)


@overload
def operation(
    fn: _FnT, *, propagate: bool = True, name: str | None = None, **additional_attributes: Any
) -> _FnT: ...


@overload
def operation(
    fn: None = None, *, propagate: bool = True, name: str | None = None, **additional_attributes: Any
) -> OperationContext: ...


def operation(
    fn: Any = None, *, propagate: bool = True, name: str | None = None, **additional_attributes: Any
) -> Any:
    """Trace an operation, as ``@operation`` / ``@operation(...)`` or ``with operation(...) as op``.

    The span name is always ``agentlightning.operation``. ``name`` sets ``agentlightning.operation.name``
    (giving it also as that attribute is a ``ValueError``); for a decorated function it defaults to the
    function's name. Other keyword arguments become span attributes. A non-callable positional argument
    raises ``ValueError``.
    """
    if name is not None:
        if _NAME in additional_attributes:
            raise ValueError(f"Give the operation name once: either name=... or the {_NAME!r} attribute.")
        additional_attributes[_NAME] = name
    if fn is None:
        return OperationContext(additional_attributes, propagate=propagate)
    if not callable(fn):
        raise ValueError(
            f"operation() takes a function to decorate, got {type(fn).__name__}; span names cannot be "
            "customized (use name=... to set agentlightning.operation.name)."
        )
    return OperationContext(additional_attributes, propagate=propagate)(fn)
