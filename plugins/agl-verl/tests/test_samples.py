"""Per-call and per-trajectory credit on multi-turn traces (no torch needed)."""

from __future__ import annotations

import math

from agl_core.types import Triplet
from agl_verl.samples import SampleStats, triplets_to_samples

from .traces import SYSTEM, TOOL_GLUE, multi_turn


def _triplets(calls: list[tuple[list[int], list[int]]]) -> list[Triplet]:
    return [Triplet(prompt={"token_ids": p}, response={"token_ids": r}) for p, r in calls]


def test_per_call_makes_one_sample_per_call_with_the_rollout_reward() -> None:
    calls = multi_turn([10, 11], [[20, 21, 2], [22, 2]], [[30, 31]])
    samples = triplets_to_samples(
        _triplets([(c.prompt, c.response) for c in calls]),
        reward=0.5,
        uid="g",
        rollout_id="r",
        credit="per_call",
    )
    assert [s.response_ids for s in samples] == [[20, 21, 2], [22, 2]]
    assert [s.turn_index for s in samples] == [0, 1]
    assert all(
        s.reward == 0.5 and s.uid == "g" and s.response_mask == [1] * len(s.response_ids) for s in samples
    )


def test_per_trajectory_merges_prefix_matching_turns_and_masks_inserted_tokens() -> None:
    calls = multi_turn([10, 11], [[20, 21, 2], [22, 2], [23, 2]], [[30, 31], [32]])
    stats = SampleStats()
    (sample,) = triplets_to_samples(
        _triplets([(c.prompt, c.response) for c in calls]),
        reward=1.0,
        uid="g",
        rollout_id="r",
        credit="per_trajectory",
        stats=stats,
    )
    assert sample.prompt_ids == [*SYSTEM, 10, 11]
    assert sample.response_ids == [20, 21, 2, *TOOL_GLUE, 30, 31, 22, 2, *TOOL_GLUE, 32, 23, 2]
    assert sample.response_mask == [1, 1, 1, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 1, 1]
    assert sample.n_calls == 3
    assert (stats.n_calls, stats.n_samples, stats.n_trajectory_mismatches) == (3, 1, 0)


def test_a_prefix_mismatch_starts_a_new_segment() -> None:
    first = ([*SYSTEM, 10], [20, 2])
    retokenised = ([*SYSTEM, 10, 99, 2, 30], [21, 2])  # history re-rendered: 20 became 99
    follow_up = ([*SYSTEM, 10, 99, 2, 30, 21, 2, 31], [22, 2])
    stats = SampleStats()
    samples = triplets_to_samples(
        _triplets([first, retokenised, follow_up]),
        reward=0.0,
        uid="g",
        rollout_id="r",
        credit="per_trajectory",
        stats=stats,
    )
    assert len(samples) == 2
    assert samples[0].response_ids == [20, 2]
    assert samples[1].prompt_ids == retokenised[0]
    assert samples[1].response_ids == [21, 2, 31, 22, 2]
    assert samples[1].response_mask == [1, 1, 0, 1, 1]
    assert [s.turn_index for s in samples] == [0, 1]
    assert stats.n_trajectory_mismatches == 1


def test_calls_without_token_ids_are_skipped() -> None:
    triplets = [
        Triplet(prompt={"token_ids": []}, response={"token_ids": [1]}),
        Triplet(prompt={"token_ids": [5]}, response={"token_ids": [6]}),
    ]
    samples = triplets_to_samples(triplets, reward=1.0, uid="g", rollout_id="r", credit="per_call")
    assert [(s.prompt_ids, s.response_ids) for s in samples] == [([5], [6])]


def test_sampler_logprobs_follow_the_response_tokens_and_inserted_tokens_have_none() -> None:
    def lp(*values: float) -> list[dict[str, float]]:
        return [{"token": "x", "logprob": v} for v in values]

    triplets = [
        Triplet(prompt={"token_ids": [1, 2]}, response={"token_ids": [3, 4], "logprobs": lp(-0.5, -1.0)}),
        Triplet(prompt={"token_ids": [1, 2, 3, 4, 9]}, response={"token_ids": [5], "logprobs": lp(-2.0)}),
    ]
    (merged,) = triplets_to_samples(triplets, reward=1.0, uid="g", rollout_id="r", credit="per_trajectory")
    assert merged.response_ids == [3, 4, 9, 5] and merged.response_mask == [1, 1, 0, 1]
    assert merged.response_logprobs[:2] == [-0.5, -1.0] and merged.response_logprobs[3] == -2.0
    assert math.isnan(merged.response_logprobs[2])  # the tool's token: not sampled
    no_logprobs = [Triplet(prompt={"token_ids": [1]}, response={"token_ids": [3, 4]})]
    (plain,) = triplets_to_samples(no_logprobs, reward=0.0, uid="g", rollout_id="r", credit="per_call")
    assert len(plain.response_logprobs) == 2 and all(math.isnan(v) for v in plain.response_logprobs)
