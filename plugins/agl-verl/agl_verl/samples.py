"""Triplets of one rollout → token-level training samples (per-call or per-trajectory credit).

Pure Python, no torch: :mod:`agl_verl.data` turns the samples into verl's ``DataProto``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from agl_core.types import Triplet

__all__ = ["Credit", "Sample", "SampleStats", "triplets_to_samples"]

Credit = Literal["per_call", "per_trajectory"]


@dataclass
class Sample:
    """One training sequence: a prompt, a response with its loss mask, and the rollout's reward.

    ``response_mask`` is 1 on tokens the model generated and 0 on tokens inserted between merged turns
    (tool results, next user message, chat-template glue). ``response_logprobs`` are the sampler's
    log-probs of the response tokens as recorded by the proxy (NaN where none was recorded).
    """

    prompt_ids: list[int]
    response_ids: list[int]
    response_mask: list[int]
    reward: float
    uid: str
    rollout_id: str
    turn_index: int
    n_calls: int = 1
    response_logprobs: list[float] = field(default_factory=list)


@dataclass
class SampleStats:
    """Counters gathered while building samples (reported as metrics)."""

    n_calls: int = 0
    n_samples: int = 0
    n_trajectory_mismatches: int = 0
    extra: dict[str, int] = field(default_factory=dict)


def _ids(value: Any) -> list[int]:
    if isinstance(value, dict):
        value = value.get("token_ids")
    return [int(token) for token in value or []]


def _logprobs(response: Any, length: int) -> list[float]:
    """The sampled tokens' log-probs of a triplet response (OpenAI chat ``logprobs.content``), padded."""
    entries = response.get("logprobs") if isinstance(response, dict) else None
    values = [
        float(e["logprob"]) if isinstance(e, dict) and isinstance(e.get("logprob"), (int, float)) else _NAN
        for e in (entries if isinstance(entries, list) else [])
    ]
    return (values + [_NAN] * length)[:length]


_NAN = float("nan")


def triplets_to_samples(
    triplets: Sequence[Triplet],
    *,
    reward: float,
    uid: str,
    rollout_id: str,
    credit: Credit,
    stats: SampleStats | None = None,
) -> list[Sample]:
    """The samples of one rollout; every sample carries the rollout's ``reward`` (identical assignment).

    ``per_call``: one sample per LLM call. ``per_trajectory``: consecutive calls merge while the next
    call's prompt starts with the previous prompt + response token ids exactly; the tokens in between
    join the response with mask 0. A prefix mismatch (retokenisation, a rewritten history, a different
    agent) starts a new sample and is counted in ``stats.n_trajectory_mismatches``. Calls without token
    ids are skipped.
    """
    stats = stats if stats is not None else SampleStats()
    calls = [(_ids(t.prompt), _ids(t.response), t.response) for t in triplets]
    calls = [(p, r, raw) for p, r, raw in calls if p and r]
    stats.n_calls += len(calls)
    samples: list[Sample] = []
    context: list[int] = []
    for index, (prompt, response, raw) in enumerate(calls):
        logprobs = _logprobs(raw, len(response))
        current = samples[-1] if samples else None
        merge = (
            credit == "per_trajectory"
            and current is not None
            and len(prompt) >= len(context)
            and prompt[: len(context)] == context
        )
        if merge and current is not None:
            inserted = prompt[len(context) :]
            current.response_ids += inserted + response
            current.response_mask += [0] * len(inserted) + [1] * len(response)
            current.response_logprobs += [_NAN] * len(inserted) + logprobs
            current.n_calls += 1
        else:
            if credit == "per_trajectory" and current is not None:
                stats.n_trajectory_mismatches += 1
            samples.append(
                Sample(
                    prompt_ids=list(prompt),
                    response_ids=list(response),
                    response_mask=[1] * len(response),
                    reward=reward,
                    uid=uid,
                    rollout_id=rollout_id,
                    turn_index=index,
                    response_logprobs=logprobs,
                )
            )
        context = prompt + response
    stats.n_samples += len(samples)
    return samples
