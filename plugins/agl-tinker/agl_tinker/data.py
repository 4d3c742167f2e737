"""Group-relative advantages and Tinker ``Datum``s built from the exact sampled tokens."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from tinker import types

__all__ = ["datum_from_call", "group_advantages", "sampled_logprobs"]


def group_advantages(rewards: Sequence[float], *, normalize_std: bool = False) -> list[float]:
    """Rewards minus the group mean (divided by the group std when ``normalize_std``)."""
    if not rewards:
        return []
    mean = sum(rewards) / len(rewards)
    centred = [r - mean for r in rewards]
    if not normalize_std:
        return centred
    std = math.sqrt(sum(c * c for c in centred) / len(centred))
    return [c / (std + 1e-6) for c in centred]


def sampled_logprobs(response: dict[str, Any]) -> list[float] | None:
    """The per-token logprobs of a triplet's response (OpenAI ``logprobs.content`` entries), or None."""
    content = response.get("logprobs")
    if isinstance(content, dict):
        content = content.get("content")
    if not isinstance(content, list):
        return None
    try:
        return [float(entry["logprob"]) for entry in content]
    except (KeyError, TypeError, ValueError):
        return None


def datum_from_call(
    prompt_ids: Sequence[int],
    response_ids: Sequence[int],
    logprobs: Sequence[float] | None,
    advantage: float,
    loss_fn: str,
) -> types.Datum:
    """One training example: input ``prompt + response[:-1]``, targets shifted by one, prompt weighted 0.

    ``importance_sampling``/``ppo`` get ``target_tokens``, the sampler's ``logprobs`` and ``advantages``
    (the rollout's advantage on response tokens, 0 on prompt tokens); ``cross_entropy`` gets
    ``target_tokens`` and ``weights`` equal to those advantages (a plain policy-gradient step).
    """
    tokens = [*prompt_ids, *response_ids]
    n_prompt = len(prompt_ids) - 1
    targets = tokens[1:]
    per_token = [0.0] * n_prompt + [float(advantage)] * len(response_ids)
    inputs: dict[str, Any] = {"target_tokens": targets}
    if loss_fn == "cross_entropy":
        inputs["weights"] = per_token
    else:
        if logprobs is None or len(logprobs) != len(response_ids):
            raise ValueError(f"loss_fn {loss_fn!r} needs one sampler logprob per response token.")
        inputs["logprobs"] = [0.0] * n_prompt + [float(x) for x in logprobs]
        inputs["advantages"] = per_token
    return types.Datum(model_input=types.ModelInput.from_ints(tokens[:-1]), loss_fn_inputs=inputs)
