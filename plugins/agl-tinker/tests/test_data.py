"""Advantages, datums and configuration errors."""

from __future__ import annotations

import pytest

from agl_tinker import Tinker
from agl_tinker.data import datum_from_call, group_advantages, sampled_logprobs


def test_group_advantages_are_centred_and_optionally_scaled() -> None:
    assert group_advantages([1.0, 0.0, 0.5, 0.5]) == [0.5, -0.5, 0.0, 0.0]
    scaled = group_advantages([1.0, 0.0], normalize_std=True)
    assert scaled[0] == pytest.approx(1.0, abs=1e-4) and scaled[1] == pytest.approx(-1.0, abs=1e-4)
    assert group_advantages([0.3, 0.3]) == [0.0, 0.0]


def test_datum_weights_prompt_tokens_zero_and_keeps_sampled_tokens() -> None:
    datum = datum_from_call([10, 11, 12], [20, 21], [-0.5, -1.5], 0.25, "importance_sampling")
    assert datum.model_input.to_ints() == [10, 11, 12, 20]
    inputs = {k: v.tolist() for k, v in datum.loss_fn_inputs.items()}
    assert inputs["target_tokens"] == [11, 12, 20, 21]
    assert inputs["logprobs"] == [0.0, 0.0, -0.5, -1.5]
    assert inputs["advantages"] == [0.0, 0.0, 0.25, 0.25]
    ce = datum_from_call([10, 11], [20], None, -1.0, "cross_entropy")
    assert {k: v.tolist() for k, v in ce.loss_fn_inputs.items()} == {
        "target_tokens": [11, 20],
        "weights": [0.0, -1.0],
    }


def test_datum_without_matching_logprobs_is_refused() -> None:
    with pytest.raises(ValueError, match="logprob per response token"):
        datum_from_call([1, 2], [3, 4], [-0.1], 1.0, "ppo")


def test_sampled_logprobs_reads_openai_entries() -> None:
    assert sampled_logprobs({"logprobs": [{"token": "a", "logprob": -0.25}]}) == [-0.25]
    assert sampled_logprobs({"logprobs": {"content": [{"token": "a", "logprob": -1}]}}) == [-1.0]
    assert sampled_logprobs({"token_ids": [1]}) is None


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"backend": "gpu"}, "backend must be"),
        ({"loss_fn": "dpo"}, "loss_fn must be one of"),
        ({"group_size": 1}, "group_size must be >= 2"),
        ({"batch_size": 0}, "batch_size must be >= 1"),
    ],
)
def test_bad_configuration_is_refused_with_the_fix(overrides: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Tinker(model_name="m", **overrides)  # type: ignore[arg-type]


async def test_empty_dataset_is_refused(tmp_path: object) -> None:
    from agl_core.store.memory import InMemoryLightningStore

    algo = Tinker(model_name="m", backend="local", progress=False)
    algo.set_store(InMemoryLightningStore())
    with pytest.raises(ValueError, match="non-empty train_dataset"):
        await algo.run([])
