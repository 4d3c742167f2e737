"""Adapters: one rollout's spans → training data (triplets for RL, chat messages for SFT/APO).

Every triplet adapter can explain its output: ``adapter.diagnose(spans)`` (or ``adapt_with_report``)
returns an :class:`AdapterReport` saying why a span was dropped or a triplet is empty, with fixes.
"""

from agl_core.adapter.base import Adapter, OtelTraceAdapter, TraceAdapter, TraceToTripletBase, to_spans
from agl_core.adapter.diagnostics import AdapterReport, Problem, TripletSummary, build_report
from agl_core.adapter.messages import OpenAIMessages, TraceToMessages
from agl_core.adapter.proxy_triplet import LlmProxyTraceToTriplet
from agl_core.adapter.trace_tree import TraceNode, TraceTree, agent_name
from agl_core.adapter.triplet import DEFAULT_LLM_CALL_MATCH, RewardMatchPolicy, TracerTraceToTriplet

__all__ = [
    "DEFAULT_LLM_CALL_MATCH",
    "Adapter",
    "AdapterReport",
    "LlmProxyTraceToTriplet",
    "OpenAIMessages",
    "OtelTraceAdapter",
    "Problem",
    "RewardMatchPolicy",
    "TraceAdapter",
    "TraceNode",
    "TraceToMessages",
    "TraceToTripletBase",
    "TraceTree",
    "TracerTraceToTriplet",
    "TripletSummary",
    "agent_name",
    "build_report",
    "to_spans",
]
