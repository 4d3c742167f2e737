"""The lower-level agl_core tracing names this plugin builds on, imported in one place.

* ``ActiveTracerProvider``: the provider handed to AgentOps; each span goes to the provider of the agl
  tracer active where it starts (context-local), so AgentOps' process-wide instrumentation serves every
  agl tracer in the process.
* ``LightningSpanProcessor``: attributes spans to the open ``trace_context``; attached to an AgentOps
  provider that the application created itself (``agentops_managed=False``).
* ``request_attributes`` / ``response_attributes`` / ``StreamAccumulator``: read token ids, logprobs and
  tools from ``openai`` requests, responses and stream chunks exactly as the core tracer does.
"""

from __future__ import annotations

from agl_core.instrumentation.openai_fields import (
    StreamAccumulator,
    request_attributes,
    response_attributes,
)
from agl_core.tracer import ActiveTracerProvider, LightningSpanProcessor

__all__ = [
    "ActiveTracerProvider",
    "LightningSpanProcessor",
    "StreamAccumulator",
    "request_attributes",
    "response_attributes",
]
