"""Why did a rollout give no (or bad) training data? Per-rollout reports of an adapter run.

An adapter records what it decided in an :class:`AdaptRecord` (which spans were LLM calls, which it
dropped and why, where each reward went); :func:`build_report` turns that into an :class:`AdapterReport`:
counts, one :class:`TripletSummary` per triplet, and :class:`Problem` s, each with a one-line fix.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from agl_core.adapter.genai import (
    completion_messages,
    is_proxy_llm_span,
    prompt_messages,
    prompt_token_ids,
    response_token_ids,
    unread_keys,
)
from agl_core.adapter.trace_tree import agent_name
from agl_core.emitter import is_reward_span
from agl_core.semconv import (
    AGL_EXCEPTION,
    AGL_LLM_SOURCE,
    AGL_LLM_TOKEN_IDS_MISSING,
    EXCEPTION_MESSAGE,
    EXCEPTION_TYPE,
)
from agl_core.semconv import AGL_LLM_REFUSED as PROXY_REFUSED
from agl_core.semconv import AGL_LLM_REQUEST_DROPPED as PROXY_REQUEST_DROPPED
from agl_core.semconv import AGL_LLM_SIDE_CALL as PROXY_SIDE_CALL
from agl_core.types import Span, Triplet
from agl_core.types.reports import AdapterReport, Problem, Severity, TripletSummary

__all__ = [
    "AdaptRecord",
    "AdapterReport",
    "DropReason",
    "DroppedCall",
    "Problem",
    "RewardOutcome",
    "Severity",
    "TripletSummary",
    "build_report",
]

DropReason = Literal[
    "agent_mismatch",
    "in_reward",
    "duplicate",
    "nested",
    "merged",
    "no_token_ids",
    "not_joined",
    "side_call",
    "refused",
]
"""Why an LLM-call span produced no triplet. ``duplicate`` / ``nested``: the same path recorded the call
twice; ``merged``: the other path (tracer or proxy) recorded it too and that record was read;
``side_call``: the proxy marked it a harness side call; ``refused``: the proxy refused the request itself
(reported as ``proxy_refused``)."""

_LLM_LOOKALIKE = re.compile(r"(?i)chat|complet|llm|generat|openai|anthropic|gemini|litellm|invoke_model")
_FIX_TOKEN_IDS = (
    'Ask the model server for them with `extra_body={"return_token_ids": True}` (vLLM >= 0.10.2), or route '
    "the agent's calls through the agl LLM proxy, which records them."
)
_FIX_NO_LLM = (
    "Make the agent's model calls visible while agl's tracer is active: through the `openai` client (agl "
    "instruments it), or with any OpenTelemetry GenAI / OpenInference / OpenLLMetry instrumentation of "
    "your framework (agl captures spans made through the global tracer provider), or route the calls "
    "through the agl LLM proxy."
)
_FIX_REWARD = {
    "before_first_call": "Emit the reward after the LLM call it scores has returned.",
    "all_rewarded": (
        "Emit one reward per LLM call, or combine them into one reward with named dimensions "
        "(emit_reward({...}, primary_key=...))."
    ),
    "no_sibling": (
        "Emit the reward in the same parent span as the LLM call it scores, or use "
        "reward_match=RewardMatchPolicy.FIRST_OCCURRENCE."
    ),
    "excluded_agent": "Emit the reward inside an agent that agent_match selects, or widen agent_match.",
    "no_llm_call": "Fix the LLM-call problem above first; a reward needs an LLM call to attach to.",
    "no_start_time": "Record reward spans with a start time (emit_reward does this).",
    "no_earlier_call": "Emit the reward after the LLM call it scores has returned (a larger sequence id).",
}


@dataclass
class DroppedCall:
    """An LLM-call span the adapter did not turn into a triplet."""

    span: Span
    reason: DropReason
    detail: str = ""
    agent_name: str | None = None
    same_as: str | None = None
    """For another record of a call that was read (``duplicate``, ``nested``, ``merged``): the span id of the
    record read."""


@dataclass
class RewardOutcome:
    """One reward span and the LLM-call span it was given to (``assigned_to``), or why not."""

    span: Span
    value: float
    assigned_to: str | None = None
    reason: str | None = None
    detail: str = ""


@dataclass
class AdaptRecord:
    """Everything an adapter run decided, as input to :func:`build_report`.

    ``llm_spans`` and ``rewards`` are None when the adapter did not track them (the report then derives
    what it can from the triplets). ``llm_calls`` is the number of model calls those spans record (several
    records of one call count once; None: one per span). ``llm_call_match`` is the span-name regex that
    found LLM calls, if any.
    """

    adapter: str
    spans: list[Span]
    triplets: list[Triplet]
    llm_spans: list[Span] | None = None
    dropped: list[DroppedCall] = field(default_factory=list)
    rewards: list[RewardOutcome] | None = None
    agent_names: list[str] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)
    max_prompt_length: int | None = None
    max_response_length: int | None = None
    extra_problems: list[Problem] = field(default_factory=list)
    llm_call_match: str | None = None
    llm_calls: int | None = None


def _names(values: Sequence[str], limit: int = 8) -> str:
    shown = [repr(v) for v in values[:limit]]
    if len(values) > limit:
        shown.append(f"... ({len(values) - limit} more)")
    return ", ".join(shown)


def _summaries(triplets: Sequence[Triplet]) -> list[TripletSummary]:
    out: list[TripletSummary] = []
    for index, triplet in enumerate(triplets):
        prompt = triplet.prompt if isinstance(triplet.prompt, dict) else {}
        response = triplet.response if isinstance(triplet.response, dict) else {}
        meta = triplet.metadata
        out.append(
            TripletSummary(
                index=index,
                span_id=meta.get("span_id"),
                sequence_id=meta.get("sequence_id"),
                response_id=meta.get("response_id"),
                agent_name=meta.get("agent_name"),
                prompt_tokens=len(prompt.get("token_ids") or []),
                response_tokens=len(response.get("token_ids") or []),
                reward=triplet.reward,
                has_logprobs=response.get("logprobs") is not None,
            )
        )
    return out


def _kind(span: Span, llm_ids: set[str]) -> str:
    if span.span_id in llm_ids:
        return "llm"
    if is_reward_span(span):
        return "reward"
    if agent_name(span) is not None:
        return "agent"
    if span.attributes.get("gen_ai.operation.name") == "execute_tool" or "tool.name" in span.attributes:
        return "tool"
    return "other"


def _no_llm_problem(record: AdaptRecord) -> Problem:
    names = Counter(span.name for span in record.spans)
    seen = [name for name, _ in names.most_common()]
    count = len(record.spans)
    message = f"No LLM-call span among the {count} spans of this rollout (span names seen: {_names(seen)})."
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        message += (
            " OTEL_SDK_DISABLED=true is set in this environment: OpenTelemetry providers the application "
            "builds record nothing under it (agl's own providers keep recording), so spans of a framework's "
            "own instrumentation are missing."
        )
    pattern = record.llm_call_match
    lookalikes = [name for name in seen if _LLM_LOOKALIKE.search(name)]
    if pattern and lookalikes:
        first = next(span for span in record.spans if span.name == lookalikes[0])
        keys = ", ".join(unread_keys(first)) or "none"
        message += (
            f" {_names(lookalikes)} look like LLM calls but match neither the adapter's llm_call_match nor a "
            f"known LLM-span shape (attribute keys of {lookalikes[0]!r}: {keys})."
        )
        fix = (
            f"If {lookalikes[0]!r} records the model's token ids, pass llm_call_match to match it; otherwise "
            + _FIX_NO_LLM[0].lower()
            + _FIX_NO_LLM[1:]
        )
        return Problem(code="no_llm_spans", severity="error", message=message, fix=fix)
    return Problem(code="no_llm_spans", severity="error", message=message, fix=_FIX_NO_LLM)


_THREAD_AFFINITY = re.compile(
    r"(?i)thread that (initially )?(configured|created|owns)"  # DSPy's settings
    r"|created in a thread can only be used in that same thread"  # sqlite3 objects
    r"|(from|in|on|by) (a |an )?(different|another|other|wrong) thread"
    r"|only (works|allowed|be called) (in|from) (the )?main thread"  # signal handlers, GUI toolkits
    r"|no current event loop in thread"
)


def _thread_affinity_problems(spans: Sequence[Span]) -> list[Problem]:
    """Exceptions recorded by the rollout that say state was used outside the thread that owns it."""
    found = [
        span
        for span in spans
        if (span.name == AGL_EXCEPTION or span.status.status_code == "ERROR")
        and _THREAD_AFFINITY.search(str(span.attributes.get(EXCEPTION_MESSAGE, "")))
    ]
    if not found:
        return []
    first = found[0].attributes
    text = str(first.get(EXCEPTION_MESSAGE, "")).strip().splitlines()[0]
    return [
        Problem(
            code="thread_bound_state",
            severity="error",
            message=f"The agent failed with a thread-affinity error: {first.get(EXCEPTION_TYPE, 'error')}: "
            f"{text}. State the agent uses (a framework's global settings, a client, a connection) belongs "
            "to the thread that created it, and this rollout ran on another thread.",
            fix="agl runs a sync agent on one thread of its own per runner for the runner's whole life, so "
            "the state was created elsewhere: before training in the main thread, in another runner of the "
            "same process (n_runners > 1), or by work the agent moved to other threads. Create it inside "
            "the rollout with a per-call scope (DSPy: `with dspy.context(lm=...)` instead of "
            "`dspy.configure(...)`), or once per runner in the rollout's thread, not at import.",
            span_ids=[span.span_id for span in found],
        )
    ]


def _drop_problems(record: AdaptRecord, llm_count: int) -> list[Problem]:
    problems: list[Problem] = []
    by_reason: dict[str, list[DroppedCall]] = {}
    for drop in record.dropped:
        by_reason.setdefault(drop.reason, []).append(drop)
    pattern = record.settings.get("agent_match")
    mismatched = by_reason.get("agent_mismatch", [])
    if mismatched:
        seen = _names(record.agent_names) if record.agent_names else "none (no span carries an agent name)"
        ids = [d.span.span_id for d in mismatched]
        if not record.triplets and len(mismatched) == llm_count:
            problems.append(
                Problem(
                    code="agent_match_excluded_all",
                    severity="error",
                    message=(
                        f"agent_match={pattern!r} selected none of the {llm_count} LLM calls. "
                        f"Agent names seen: {seen}."
                    ),
                    fix="Set agent_match to a regex that matches one of the agent names above, or None to "
                    "train on every agent.",
                    span_ids=ids,
                )
            )
        else:
            problems.append(
                Problem(
                    code="agent_match_excluded_some",
                    severity="info",
                    message=f"{len(mismatched)} of {llm_count} LLM calls are outside agents matching "
                    f"agent_match={pattern!r} and were left out. Agent names seen: {seen}.",
                    span_ids=ids,
                )
            )
    infos = {
        "in_reward": (
            "llm_calls_in_reward",
            "{n} LLM calls made inside a reward span (e.g. an LLM judge) were left out.",
        ),
        "duplicate": (
            "duplicate_llm_calls",
            "{n} LLM-call spans repeat a response id already used and were skipped.",
        ),
        "nested": (
            "nested_llm_calls",
            "{n} LLM-call spans record the same call as a span they are nested in (or wrap): two "
            "instrumentations traced each call. Each call was used once, from its record with token ids "
            "(else response id).",
        ),
        "side_call": (
            "side_calls",
            "{n} LLM calls are harness side calls (marked agl.llm.side_call by the proxy, e.g. a session "
            "title) and were left out.",
        ),
        "not_joined": (
            "proxy_calls_not_joined",
            "{n} proxy-recorded calls have no tracer span with the same response id, so agent_match cannot "
            "select them; they were left out.",
        ),
    }
    for reason, (code, text) in infos.items():
        drops = by_reason.get(reason, [])
        if drops:
            severity: Severity = "warning" if reason == "not_joined" else "info"
            message = text.format(n=len(drops))
            problems.append(
                Problem(
                    code=code, severity=severity, message=message, span_ids=[d.span.span_id for d in drops]
                )
            )
    return problems


def _unreadable_problems(llm_spans: Sequence[Span]) -> list[Problem]:
    """LLM-call spans whose prompt and completion no known convention reads: name the keys they carry."""
    unread = [s for s in llm_spans if prompt_messages(s) is None and completion_messages(s) is None]
    if not unread:
        return []
    first = unread[0]
    keys = ", ".join(unread_keys(first)) or "none"
    events = ", ".join(sorted({e.name for e in first.events})) or "none"
    return [
        Problem(
            code="unreadable_llm_spans",
            severity="warning",
            message=f"{len(unread)} LLM-call spans carry no prompt or completion agl can read (kept as they "
            f"are). Span {first.name!r} ({first.span_id}) has attribute keys: {keys}; events: {events}.",
            fix="Turn on the instrumentation's content capture (e.g. "
            "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true -- agl also reads content sent as "
            "OpenTelemetry log records, as Google ADK does; Semantic Kernel: "
            "SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS_SENSITIVE=true and OpenTelemetry's "
            "LoggingHandler on the 'semantic_kernel' logger at INFO; OpenInference's hide-inputs settings "
            "off), or route the calls through the agl LLM proxy, or report the attribute keys above so agl "
            "learns this shape.",
            span_ids=[s.span_id for s in unread],
        )
    ]


def _recorded_missing_id_reasons(spans: Sequence[Span], span_ids: set[str]) -> list[str]:
    """The distinct reasons (``agl.llm.token_ids_missing``) the proxy wrote on the spans in `span_ids`."""
    reasons: list[str] = []
    for span in spans:
        reason = span.attributes.get(AGL_LLM_TOKEN_IDS_MISSING) if span.span_id in span_ids else None
        if isinstance(reason, str) and reason not in reasons:
            reasons.append(reason)
    return reasons


def _token_problems(record: AdaptRecord, summaries: Sequence[TripletSummary]) -> list[Problem]:
    problems: list[Problem] = []
    no_ids = [
        d for d in record.dropped if d.reason == "no_token_ids" and not d.span.attributes.get(PROXY_REFUSED)
    ]
    missing = [s for s in summaries if s.prompt_tokens == 0 or s.response_tokens == 0]
    if missing or no_ids:
        kinds = {"prompt" for s in missing if s.prompt_tokens == 0}
        kinds |= {"response" for s in missing if s.response_tokens == 0}
        kinds |= {"prompt" for d in no_ids if not prompt_token_ids(d.span)}
        kinds |= {"response" for d in no_ids if not response_token_ids(d.span)}
        count, total = len(missing) + len(no_ids), len(summaries) + len(no_ids)
        what = " and ".join(sorted(kinds))
        message = (
            f"{count} of {total} LLM calls have no {what} token ids, so they cannot be used for RL training."
        )
        if no_ids:
            message += f" {len(no_ids)} of them were dropped for that reason."
        ids = [s.span_id for s in missing if s.span_id] + [d.span.span_id for d in no_ids]
        lacking = [span for span in record.spans if span.span_id in set(ids)]
        if lacking and not any(span.attributes.get(AGL_LLM_SOURCE) for span in lacking):
            names = sorted({span.name for span in lacking})
            message += (
                f" They were recorded only by another instrumentation ({_names(names, 3)} spans), which "
                "records no token ids: agl's own capture did not see these calls."
            )
        reasons = _recorded_missing_id_reasons(record.spans, set(ids))
        if reasons:
            message += " The LLM proxy recorded why: " + "; ".join(reasons) + "."
        severity: Severity = "error" if count == total else "warning"
        problems.append(
            Problem(
                code="missing_token_ids", severity=severity, message=message, fix=_FIX_TOKEN_IDS, span_ids=ids
            )
        )
    for limit, attr, code, label in (
        (record.max_prompt_length, "prompt_tokens", "prompt_too_long", "max_prompt_length"),
        (record.max_response_length, "response_tokens", "response_too_long", "max_response_length"),
    ):
        if limit is None:
            continue
        over = [s for s in summaries if getattr(s, attr) > limit]
        if over:
            longest = max(getattr(s, attr) for s in over)
            problems.append(
                Problem(
                    code=code,
                    severity="warning",
                    message=f"{len(over)} of {len(summaries)} triplets exceed {label}={limit} tokens "
                    f"(longest: {longest}); the trainer will truncate or drop them.",
                    fix=f"Raise {label} in the algorithm's config, or keep the agent's context shorter.",
                    span_ids=[s.span_id for s in over if s.span_id],
                )
            )
    return problems


def _reward_problems(record: AdaptRecord, has_triplets: bool) -> list[Problem]:
    rewards = record.rewards
    if rewards is None:
        values = [s for s in record.spans if is_reward_span(s)]
        if values:
            return []
        rewards = []
    if not rewards:
        return [
            Problem(
                code="no_reward",
                severity="error" if has_triplets else "warning",
                message="No reward span in this rollout, so every triplet has reward None.",
                fix="Call agl.emit_reward(value) in the agent after the LLM calls it scores, or return a "
                "float from the rollout function.",
            )
        ]
    problems: list[Problem] = []
    unassigned = [r for r in rewards if r.assigned_to is None]
    all_lost = has_triplets and len(unassigned) == len(rewards)
    for outcome in unassigned:
        reason = outcome.reason or "no_llm_call"
        problems.append(
            Problem(
                code="reward_unattributed",
                severity="error" if all_lost else "warning",
                message=f"Reward {outcome.value:g} (span {outcome.span.span_id}) is not attributed to any "
                f"LLM call: {outcome.detail or reason}.",
                fix=_FIX_REWARD.get(reason),
                span_ids=[outcome.span.span_id],
            )
        )
    return problems


VALID_ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})
"""Chat roles a training sample may carry (OpenAI's)."""


def _sample_problems(triplets: Sequence[Triplet]) -> list[Problem]:
    """Triplets no trainer can use as they are: invalid roles, an empty prompt, the same call twice."""
    problems: list[Problem] = []
    bad_roles: dict[str, list[str]] = {}
    empty: list[str] = []
    repeated: list[str] = []
    seen: set[str] = set()
    for triplet in triplets:
        span_id = str(triplet.metadata.get("span_id", ""))
        prompt = triplet.prompt.get("raw_content") if isinstance(triplet.prompt, dict) else None
        response = triplet.response.get("raw_content") if isinstance(triplet.response, dict) else None
        messages = [
            m
            for m in [
                *(prompt if isinstance(prompt, list) else []),
                *(response if isinstance(response, list) else []),
            ]
            if isinstance(m, dict)
        ]
        for role in {str(m.get("role")) for m in messages} - VALID_ROLES:
            bad_roles.setdefault(role, []).append(span_id)
        has_ids = isinstance(triplet.prompt, dict) and bool(triplet.prompt.get("token_ids"))
        prompt_list = prompt if isinstance(prompt, list) else []
        if not has_ids and not any(
            isinstance(m, dict) and (m.get("content") or m.get("tool_calls")) for m in prompt_list
        ):
            empty.append(span_id)
        rid = triplet.metadata.get("response_id")
        if isinstance(rid, str):
            if rid in seen:
                repeated.append(span_id)
            seen.add(rid)
    if bad_roles:
        shown = ", ".join(repr(role) for role in sorted(bad_roles))
        problems.append(
            Problem(
                code="invalid_roles",
                severity="error",
                message=f"Messages with roles no chat template knows: {shown} (valid: "
                f"{', '.join(sorted(VALID_ROLES))}).",
                fix="Record roles as plain strings (an enum's value, not its repr), or report the framework "
                "so agl learns its roles.",
                span_ids=sorted({i for ids in bad_roles.values() for i in ids}),
            )
        )
    if empty:
        problems.append(
            Problem(
                code="empty_prompt",
                severity="error",
                message=f"{len(empty)} of {len(triplets)} triplets have neither prompt messages nor prompt "
                "token ids, so nothing conditions their response.",
                fix="Turn on the instrumentation's content capture (e.g. "
                "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true), or route the calls through the "
                "agl LLM proxy, which records the request as sent.",
                span_ids=empty,
            )
        )
    if repeated:
        problems.append(
            Problem(
                code="duplicate_samples",
                severity="error",
                message=f"{len(repeated)} triplets repeat a response id of an earlier triplet: one model "
                "call would be trained on twice.",
                fix="Report the spans named here: agl should have merged these records of one call.",
                span_ids=repeated,
            )
        )
    return problems


def _continuity_problems(triplets: Sequence[Triplet]) -> list[Problem]:
    """Calls that continue an earlier call's conversation but re-tokenized its reply differently.

    Call B continues call A (same agent, earlier) when A's prompt ids are a prefix of B's; B's prompt
    should then also start with A's prompt + response ids. The latest such A is checked.
    """
    problems: list[Problem] = []
    history: dict[Any, list[tuple[int, list[int], list[int]]]] = {}
    for index, triplet in enumerate(triplets):
        if not isinstance(triplet.prompt, dict) or not isinstance(triplet.response, dict):
            continue
        prompt = list(triplet.prompt.get("token_ids") or [])
        response = list(triplet.response.get("token_ids") or [])
        earlier = history.setdefault(triplet.metadata.get("agent_name"), [])
        parent = next((e for e in reversed(earlier) if e[1] and prompt[: len(e[1])] == e[1]), None)
        if parent is not None and len(prompt) > len(parent[1]):
            prev_index, prev_prompt, prev_response = parent
            turn = prev_prompt + prev_response
            if prompt[: len(turn)] != turn:
                problems.append(
                    Problem(
                        code="token_prefix_break",
                        severity="warning",
                        message=f"Triplet {index} continues triplet {prev_index}'s conversation but its "
                        "prompt token ids do not start with that call's prompt + response token ids (the "
                        "reply was re-tokenized differently); training on concatenated turns would be "
                        "misaligned.",
                        fix="Keep the server's own response token ids for the next turn (the agl LLM proxy "
                        "does), or train on each triplet separately.",
                        span_ids=[str(triplet.metadata.get("span_id", ""))],
                    )
                )
        if prompt:
            earlier.append((index, prompt, response))
    return problems


def _conversations(spans: Sequence[Span]) -> int:
    """Distinct conversations among the proxy-recorded calls with prompt ids (side calls excluded): a call
    whose prompt starts with an earlier call's prompt continues that call's conversation."""
    heads: list[list[int]] = []
    calls = [
        s
        for s in spans
        if is_proxy_llm_span(s) and s.attributes.get(PROXY_SIDE_CALL) is None and prompt_token_ids(s)
    ]
    for span in sorted(calls, key=lambda s: s.sequence_id):
        prompt = prompt_token_ids(span) or []
        for index, head in enumerate(heads):
            if prompt[: len(head)] == head:
                heads[index] = prompt
                break
        else:
            heads.append(prompt)
    return len(heads)


def proxy_problems(spans: Sequence[Span]) -> list[Problem]:
    """What the LLM proxy recorded about its own handling: refusals, dropped fields, conversations."""
    problems: list[Problem] = []
    refused = [s for s in spans if s.attributes.get(PROXY_REFUSED)]
    if refused:
        reasons = Counter(
            f"HTTP {s.attributes.get('http.response.status_code')}: {s.status.description or 'no reason'}"
            for s in refused
        )
        shown = "; ".join(f"{reason} (x{n})" for reason, n in reasons.most_common(3))
        problems.append(
            Problem(
                code="proxy_refused",
                severity="error",
                message=f"The LLM proxy refused {len(refused)} request(s) of this rollout: {shown}.",
                fix="The agent's calls do reach the proxy; change the request (or the proxy's options, "
                "see docs/llm-proxy.md) so that the proxy can translate it.",
                span_ids=[s.span_id for s in refused],
            )
        )
    dropped: Counter[str] = Counter()
    for span in spans:
        fields = span.attributes.get(PROXY_REQUEST_DROPPED)
        if isinstance(fields, (list, tuple)):
            dropped.update(str(f) for f in fields)
    if dropped:
        shown = ", ".join(f"{name} (x{n})" for name, n in dropped.most_common(8))
        problems.append(
            Problem(
                code="proxy_dropped_fields",
                severity="info",
                message=f"The LLM proxy did not carry these request fields to the chat backend: {shown}.",
                fix="Each span lists them in agl.llm.request.dropped; docs/llm-proxy.md says what they mean.",
            )
        )
    conversations = _conversations([s for s in spans if not s.attributes.get(PROXY_REFUSED)])
    if conversations > 1:
        problems.append(
            Problem(
                code="several_conversations",
                severity="info",
                message=f"The LLM calls of this rollout form {conversations} distinct conversations (a call "
                "whose prompt does not start with an earlier call's prompt starts a new one): sub-agents or "
                "harness side calls.",
                fix="If some are side calls, mark them: `agl proxy serve --side-call-model PATTERN`.",
            )
        )
    return problems


def _llm_records(record: AdaptRecord) -> dict[str, str]:
    """Each LLM-call record's span id -> the span id of the record read for its call."""
    records = {span.span_id: span.span_id for span in record.llm_spans or []}
    for drop in record.dropped:
        if drop.same_as is not None:
            records[drop.span.span_id] = drop.same_as
    return records


def build_report(record: AdaptRecord) -> AdapterReport:
    """Turn an adapter run into its report (counts, triplet summaries, problems with fixes)."""
    summaries = _summaries(record.triplets)
    llm_spans = record.llm_spans
    llm_ids = (
        {s.span_id for s in llm_spans} if llm_spans is not None else {s.span_id or "" for s in summaries}
    )
    llm_count = len(llm_spans) if llm_spans is not None else len(summaries)
    if record.llm_calls is not None:
        llm_count = record.llm_calls
    kinds = Counter(_kind(span, llm_ids) for span in record.spans)
    names = Counter(span.name for span in record.spans)
    report = AdapterReport(
        adapter=record.adapter,
        settings=dict(record.settings),
        rollout_ids=sorted({s.rollout_id for s in record.spans}),
        attempt_ids=sorted({s.attempt_id for s in record.spans}),
        span_count=len(record.spans),
        span_kinds=dict(sorted(kinds.items())),
        span_names=dict(names.most_common(20)),
        agent_names=list(record.agent_names),
        llm_span_count=llm_count,
        llm_records=_llm_records(record),
        triplets=summaries,
    )
    problems: list[Problem] = _thread_affinity_problems(record.spans)
    if not record.spans:
        problems.append(
            Problem(
                code="no_spans",
                severity="error",
                message="This rollout has no spans.",
                fix="Run the agent under agl's runner/tracer (Trainer does this), and check that the attempt "
                "finished; spans arrive when the trace context exits.",
            )
        )
    elif llm_count == 0 and not record.extra_problems:
        problems.append(_no_llm_problem(record))
    problems += record.extra_problems
    problems += proxy_problems(record.spans)
    repeats = {d.span.span_id for d in record.dropped if d.reason in ("nested", "duplicate", "merged")}
    problems += _unreadable_problems([s for s in llm_spans or [] if s.span_id not in repeats])
    problems += _drop_problems(record, llm_count)
    problems += _token_problems(record, summaries)
    if record.spans:
        problems += _reward_problems(record, bool(summaries))
    problems += _sample_problems(record.triplets)
    problems += _continuity_problems(record.triplets)
    lacking = [s for s in summaries if not s.has_logprobs]
    if summaries and lacking and len(lacking) < len(summaries):
        problems.append(
            Problem(
                code="missing_logprobs",
                severity="info",
                message=f"{len(lacking)} of {len(summaries)} triplets carry no logprobs while the others do.",
                fix="Request logprobs=True on every call if your algorithm uses the sampling logprobs.",
                span_ids=[s.span_id for s in lacking if s.span_id],
            )
        )
    if not summaries and record.spans and not any(p.severity == "error" for p in problems):
        problems.append(
            Problem(
                code="no_triplets",
                severity="error",
                message="The adapter produced no triplets from this rollout.",
            )
        )
    order = {"error": 0, "warning": 1, "info": 2}
    report.problems = sorted(problems, key=lambda p: order[p.severity])
    return report
