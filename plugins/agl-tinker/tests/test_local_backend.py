"""The local backend speaks the SDK's types and futures, and its three loss functions train."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import tinker
import torch
from tinker import types

from agl_tinker.data import datum_from_call
from agl_tinker.local import LocalServiceClient, LocalTrainingClient


@pytest.fixture
async def client(tiny_model: Path, tmp_path: Path) -> LocalTrainingClient:
    service = LocalServiceClient(checkpoint_dir=tmp_path / "ckpt", record_history=True)
    future = service.create_lora_training_client(str(tiny_model), rank=0)
    assert isinstance(future, tinker.APIFuture)
    return await future


def _weights(client: LocalTrainingClient) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in client.model.named_parameters() if p.requires_grad}


async def test_sample_returns_sdk_types_with_matching_tokens_and_logprobs(
    client: LocalTrainingClient,
) -> None:
    sampler = await client.save_weights_and_get_sampling_client()
    prompt = types.ModelInput.from_ints(client.tokenizer.encode("Reply with 7"))
    response = await sampler.sample(prompt, 3, types.SamplingParams(max_tokens=5, seed=1))
    assert isinstance(response, types.SampleResponse) and len(response.sequences) == 3
    for seq in response.sequences:
        assert isinstance(seq, types.SampledSequence)
        assert 1 <= len(seq.tokens) <= 5 and len(seq.logprobs or []) == len(seq.tokens)
        assert seq.stop_reason in ("length", "stop")
        assert all(lp <= 0.0 for lp in seq.logprobs or [])


@pytest.mark.parametrize("loss_fn", ["importance_sampling", "ppo", "cross_entropy"])
async def test_each_loss_fn_gives_on_policy_logprobs_and_moves_the_weights(
    client: LocalTrainingClient, loss_fn: str
) -> None:
    sampler = await client.save_weights_and_get_sampling_client()
    prompt = client.tokenizer.encode("Reply with 7")
    seq = (
        await sampler.sample(types.ModelInput.from_ints(prompt), 1, types.SamplingParams(max_tokens=4))
    ).sequences[0]
    datum = datum_from_call(prompt, seq.tokens, seq.logprobs, 1.0, loss_fn)
    before = _weights(client)
    output = await client.forward_backward([datum], loss_fn)  # type: ignore[arg-type]
    await client.optim_step(adam_params=types.AdamParams(learning_rate=1e-2))
    assert isinstance(output, types.ForwardBackwardOutput) and "loss:sum" in output.metrics
    trained = output.loss_fn_outputs[0]["logprobs"].tolist()[-len(seq.tokens) :]
    assert trained == pytest.approx(seq.logprobs, abs=1e-4)  # the sampler and the trainer agree
    assert any(not torch.equal(before[n], p) for n, p in _weights(client).items())


async def test_concurrent_samples_are_batched_and_keep_exact_logprobs(client: LocalTrainingClient) -> None:
    sampler = await client.save_weights_and_get_sampling_client()
    prefix = "Reply with the digits of the number "  # a shared prefix of different-length prompts
    prompts = [client.tokenizer.encode(prefix + word) for word in ("seven", "forty-two", "1", "one hundred")]
    params = types.SamplingParams(max_tokens=6, temperature=1.0)
    responses = await asyncio.gather(
        *(sampler.sample(types.ModelInput.from_ints(p), 2, params) for p in prompts)
    )
    assert sum(sampler.batch_rows) == 8 and len(sampler.batch_rows) < 4  # calls shared forward passes
    data, expected = [], []
    for prompt, response in zip(prompts, responses, strict=True):
        assert len(response.sequences) == 2
        for seq in response.sequences:
            data.append(datum_from_call(prompt, seq.tokens, seq.logprobs, 1.0, "importance_sampling"))
            expected.append(seq.logprobs)
    output = await client.forward_backward(data, "importance_sampling")
    for out, logprobs in zip(output.loss_fn_outputs, expected, strict=True):
        trained = out["logprobs"].tolist()[-len(logprobs) :]
        assert trained == pytest.approx(logprobs, abs=1e-4)  # padding and the shared prefix change nothing


async def test_unsupported_loss_fn_is_refused(client: LocalTrainingClient) -> None:
    with pytest.raises(ValueError, match="supports loss_fn"):
        client.forward_backward([], "dro")


async def test_save_and_load_state_round_trip(client: LocalTrainingClient, tiny_model: Path) -> None:
    saved = await client.save_state("one")
    again = await LocalServiceClient(
        checkpoint_dir=client.service.checkpoint_dir
    ).create_lora_training_client(str(tiny_model), rank=0, seed=99)
    with torch.no_grad():
        for p in again.model.parameters():
            p.add_(1.0)
    await again.load_state_with_optimizer(saved.path)
    assert all(torch.equal(_weights(client)[n], p) for n, p in _weights(again).items())
    with pytest.raises(FileNotFoundError, match="No local Tinker checkpoint"):
        await again.load_state(str(Path(saved.path).parent / "missing"))


async def test_lora_trains_only_adapter_weights(tiny_model: Path, tmp_path: Path) -> None:
    lora = await LocalServiceClient(checkpoint_dir=tmp_path).create_lora_training_client(
        str(tiny_model), rank=4
    )
    names = [n for n, p in lora.model.named_parameters() if p.requires_grad]
    assert names and all("lora_" in n for n in names)


async def test_chat_backend_stop_strings_keep_one_stop_type(client: LocalTrainingClient) -> None:
    from agl_tinker.backend import TinkerChatBackend

    sampler = await client.save_weights_and_get_sampling_client()
    chat = TinkerChatBackend(sampler, client.tokenizer, model="m", max_tokens=5)
    assert chat._params({"stop": ["7", "\n"]}).stop == ["<|im_end|>", "7", "\n"]
    assert chat._params({}).stop == [client.tokenizer.eos_token_id]
    answer = await chat.chat_completions(
        {"messages": [{"role": "user", "content": "hi"}], "stop": "7", "n": 2}
    )
    assert len(answer["choices"]) == 2
    for choice in answer["choices"]:
        assert len(choice["token_ids"]) == len(choice["logprobs"]["content"]) <= 5
    suffix = client.tokenizer.encode("<|im_start|>assistant\n")
    assert answer["prompt_token_ids"][-len(suffix) :] == suffix
