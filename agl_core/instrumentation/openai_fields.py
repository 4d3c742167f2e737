"""Readers of ``openai`` requests, responses and stream chunks (token ids, logprobs, tools).

Public so that tracer plugins (e.g. agl-agentops) record LLM calls with exactly the attributes the
core tracer uses.
"""

from agl_core.instrumentation._openai_fields import (
    StreamAccumulator,
    request_attributes,
    response_attributes,
)

__all__ = ["StreamAccumulator", "request_attributes", "response_attributes"]
