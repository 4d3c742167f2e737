"""`WeaveSpanRecordingContext`: what ``WeaveTracer.operation_context`` yields (records onto a Weave call)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from agl_core.semconv import LightningSpanAttributes
from agl_core.tracer.weave import op_name_to_func_name
from agl_core.types import SpanCoreFields, StatusCode, TraceStatus
from agl_core.utils.otel import (
    filter_and_unflatten_attributes,
    flatten_attributes,
    format_exception_attributes,
)

if TYPE_CHECKING:
    from weave.trace.call import Call
    from weave.trace.weave_client import WeaveClient

__all__ = ["LATE_INPUTS_KEY", "RecordedError", "WeaveSpanRecordingContext"]

logger = logging.getLogger(__name__)

_INPUT = LightningSpanAttributes.OPERATION_INPUT.value
_OUTPUT = LightningSpanAttributes.OPERATION_OUTPUT.value
_NAME = LightningSpanAttributes.OPERATION_NAME.value


LATE_INPUTS_KEY = _INPUT
"""Summary entry holding the inputs recorded after the call started (the tracer merges them back)."""


class RecordedError(Exception):
    """The error a block recorded with ``record_status("ERROR", ...)`` without raising; Weave stores it."""


def _under(key: str, prefix: str) -> bool:
    return key == prefix or key.startswith(prefix + ".")


class WeaveSpanRecordingContext:
    """Records onto a Weave call in progress (Agent Lightning 0.3's mapping of span fields to Weave).

    ``agentlightning.operation.input.*`` attributes become the call's inputs (also kept in its summary under
    ``agentlightning.operation.input``, as Weave may have sent the inputs already), ``.output.*`` its
    output, every other attribute goes to its summary; the operation name cannot be changed. An ERROR
    status or an exception is stored as the call's exception when the call finishes.
    """

    def __init__(self, call: Call) -> None:
        self._call = call
        self._error: BaseException | None = None
        self._finished = False
        self._late_inputs: dict[str, Any] = {}

    def record_exception(self, exception: BaseException) -> None:
        """Mark the call failed with ``exception`` (and add the OpenTelemetry exception attributes)."""
        self._error = exception
        self.record_attributes(format_exception_attributes(exception))

    def record_attributes(self, attributes: dict[str, Any]) -> None:
        """Add attributes: inputs, output, or summary entries (see the class docstring)."""
        if _INPUT in attributes:
            inputs: Any = dict(attributes[_INPUT])
        else:
            inputs = filter_and_unflatten_attributes(attributes, _INPUT)
            if isinstance(inputs, list):
                inputs = {str(i): v for i, v in enumerate(inputs)}
        if inputs:
            self._call.inputs.update(inputs)
            self._late_inputs.update(inputs)
        output = (
            attributes[_OUTPUT]
            if _OUTPUT in attributes
            else filter_and_unflatten_attributes(attributes, _OUTPUT)
        )
        if output:
            if self._call.output is not None:
                logger.warning("The operation's output is already set; it is replaced.")
            self._call.output = output
        if _NAME in attributes:
            logger.error(
                "The operation name cannot be recorded as an attribute; %r is skipped.", attributes[_NAME]
            )
        rest = {
            k: v for k, v in attributes.items() if not (_under(k, _INPUT) or _under(k, _OUTPUT) or k == _NAME)
        }
        if rest:
            if self._call.summary is None:
                self._call.summary = {}
            self._call.summary.update(rest)

    def record_status(self, code: StatusCode, description: str | None = None) -> None:
        """ERROR (``description`` required) marks the call failed; OK clears that; UNSET changes nothing."""
        if code == "ERROR":
            if not description:
                raise ValueError("record_status('ERROR', description) needs a description for Weave.")
            self._error = RecordedError(description)
        elif code == "OK":
            self._error = None

    def finish(self, client: WeaveClient, exception: BaseException | None = None) -> None:
        """End the Weave call (with ``exception``, or the recorded error); later calls do nothing."""
        if self._finished:
            return
        self._finished = True
        error = exception if exception is not None else self._error
        if self._late_inputs:
            # Weave may have sent the call's start (with its inputs) already; the end carries the summary.
            self._call.summary = {**(self._call.summary or {}), LATE_INPUTS_KEY: dict(self._late_inputs)}
        client.finish_call(self._call, output=self._call.output, exception=error)

    def get_recorded_span(self) -> SpanCoreFields:
        """What was recorded: the function name, the call's attributes (flattened), times and status."""
        error = self._error
        if error is None and self._call.exception:
            status = TraceStatus(status_code="ERROR", description=self._call.exception)
        elif error is not None:
            status = TraceStatus(status_code="ERROR", description=str(error))
        else:
            status = TraceStatus(status_code="OK" if self._finished else "UNSET")
        return SpanCoreFields(
            name=op_name_to_func_name(str(self._call.op_name)),
            attributes=flatten_attributes(dict(self._call.attributes or {})),
            start_time=self._call.started_at.timestamp() if self._call.started_at else None,
            end_time=self._call.ended_at.timestamp() if self._call.ended_at else None,
            status=status,
        )
