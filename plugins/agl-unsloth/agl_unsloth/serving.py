"""Serving the current model to agents through the LLM proxy.

On CPU (and on GPU without vLLM) :class:`TransformersChatBackend` answers OpenAI chat requests in process
with ``transformers.generate`` and returns the text plus vLLM-style token ids and logprobs, which the proxy
records for the training data. On a CUDA GPU with vLLM installed, :class:`VllmChatBackend` does the same
with vLLM's offline engine (imported lazily; not exercised by the CPU tests).
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agl_core.llm_proxy import ProxyHTTPError

__all__ = ["TransformersChatBackend", "VllmChatBackend", "resolve_serving", "vllm_available"]


def vllm_available() -> bool:
    """True when vLLM can be imported and a CUDA device is present."""
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        return False
    import torch

    return bool(torch.cuda.is_available())


def _shared_prefix(prompts: list[list[int]], minimum: int = 8) -> int:
    """Length of the prefix all ``prompts`` share, leaving each at least one own token (0 if < minimum)."""
    limit = min(len(p) for p in prompts) - 1
    length = 0
    while length < limit and all(p[length] == prompts[0][length] for p in prompts):
        length += 1
    return length if length >= minimum else 0


def resolve_serving(serving: str, engine: str) -> str:
    """``auto`` -> ``vllm`` when the engine is unsloth (GPU) and vLLM is usable, else ``transformers``.

    Raises:
        ValueError: an unknown name. RuntimeError: ``vllm`` requested but not usable here.
    """
    if serving not in ("auto", "transformers", "vllm"):
        raise ValueError(f"serving must be 'auto', 'transformers' or 'vllm', not {serving!r}.")
    if serving == "vllm" and not vllm_available():
        raise RuntimeError("serving='vllm' needs vLLM installed and a CUDA GPU; use serving='transformers'.")
    if serving == "auto":
        return "vllm" if engine == "unsloth" and vllm_available() else "transformers"
    return serving


@dataclass
class _GenerationRequest:
    """One waiting request of :class:`TransformersChatBackend` and, once generated, its choices."""

    prompt: list[int]
    n: int
    max_new: int
    temperature: float
    future: asyncio.Future[list[dict[str, Any]]]
    choices: list[dict[str, Any]] = field(default_factory=list)


class TransformersChatBackend:
    """An in-process OpenAI chat backend on a transformers causal LM (sampling, token ids, logprobs).

    :meth:`load` swaps in new weights (a folder saved with ``save_pretrained``) between iterations;
    generation runs in worker threads under a lock so the event loop stays free, and requests that
    arrive together are generated as one batch (KV cache on, as ``generate`` does by default).
    """

    max_batch_rows: int = 64

    def __init__(
        self,
        model_dir: str | Path,
        *,
        model: str,
        max_tokens: int = 64,
        temperature: float = 1.0,
        device: str = "cpu",
        seed: int = 0,
    ) -> None:
        self.model = model
        self.name = f"transformers:{model}"
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.device = device
        self._lock = threading.Lock()
        self._pending: list[_GenerationRequest] = []
        self._drainer: asyncio.Future[None] | None = None
        self._calls = 0
        self._seed = seed
        self.model_dir = Path(model_dir)
        self._lm: Any = None
        self.tokenizer: Any = None
        self.load(model_dir)

    def load(self, model_dir: str | Path) -> None:
        """Serve the weights in ``model_dir`` from the next request on."""
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(model_dir)
        lm: Any = AutoModelForCausalLM.from_pretrained(model_dir)
        lm = lm.to(self.device).eval()
        with self._lock:
            self._lm, self.tokenizer, self.model_dir = lm, tokenizer, Path(model_dir)

    def _prompt_ids(self, messages: Any) -> list[int]:
        if not isinstance(messages, list) or not messages:
            raise ProxyHTTPError(400, "'messages' must be a non-empty list.", param="messages")
        try:
            ids = self.tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=True)
        except Exception as exc:  # a template error is the request's fault
            raise ProxyHTTPError(400, f"Cannot render messages: {exc}", param="messages") from exc
        if hasattr(ids, "keys"):
            ids = ids["input_ids"]
        return [int(t) for t in ids]

    async def _submit(
        self, prompt: list[int], n: int, max_new: int, temperature: float
    ) -> list[dict[str, Any]]:
        """Generate for one request, batched with the requests that wait at the same time.

        Requests queue up while a batch generates (in a worker thread); the next batch takes every
        waiting request, up to ``max_batch_rows`` sequences.
        """
        future = asyncio.get_running_loop().create_future()
        request = _GenerationRequest(prompt, n, max_new, temperature, future)
        self._pending.append(request)
        if self._drainer is None or self._drainer.done():
            self._drainer = asyncio.ensure_future(self._drain())
        return await request.future

    async def _drain(self) -> None:
        while self._pending:
            batch: list[_GenerationRequest] = []
            rows = 0
            while self._pending and (not batch or rows + self._pending[0].n <= self.max_batch_rows):
                rows += self._pending[0].n
                batch.append(self._pending.pop(0))
            try:
                await asyncio.to_thread(self._generate_locked, batch)
            except Exception as exc:  # every request of the batch gets the error
                for request in batch:
                    if not request.future.done():
                        request.future.set_exception(exc)
                continue
            for request in batch:
                if not request.future.done():
                    request.future.set_result(request.choices)

    def _generate_locked(self, batch: list[_GenerationRequest]) -> None:
        with self._lock:
            self._generate_batch(batch)

    def _generate_batch(self, batch: list[_GenerationRequest]) -> None:
        import torch

        lm, tok = self._lm, self.tokenizer
        eos = tok.eos_token_id
        pad = tok.pad_token_id if tok.pad_token_id is not None else eos
        for temperature in sorted({r.temperature for r in batch}):
            group = [r for r in batch if r.temperature == temperature]
            prompts = [r.prompt for r in group for _ in range(r.n)]
            rows = len(prompts)
            # The shared prefix (system prompt, examples) is computed once and its KV cache repeated per
            # row; each row's own suffix follows, left-padded, so generation continues every row at the end.
            shared = _shared_prefix(prompts) if rows > 1 else 0
            cache = None
            if shared:
                with torch.no_grad():
                    head = lm(
                        input_ids=torch.tensor([prompts[0][:shared]], device=self.device), use_cache=True
                    )
                cache = head.past_key_values
                cache.batch_repeat_interleave(rows)
            width = max(len(p) for p in prompts) - shared
            ids = torch.full((rows, shared + width), pad, dtype=torch.long)
            mask = torch.zeros_like(ids)
            for i, prompt in enumerate(prompts):
                ids[i, :shared] = torch.tensor(prompt[:shared], dtype=torch.long)
                mask[i, :shared] = 1
                ids[i, shared + width - (len(prompt) - shared) :] = torch.tensor(prompt[shared:])
                mask[i, shared + width - (len(prompt) - shared) :] = 1
            width += shared
            self._calls += 1
            torch.manual_seed(self._seed + self._calls)
            with torch.no_grad():
                out = lm.generate(
                    ids.to(self.device),
                    attention_mask=mask.to(self.device),
                    past_key_values=cache,
                    do_sample=temperature > 0,
                    temperature=temperature if temperature > 0 else None,
                    top_k=0,
                    top_p=1.0,
                    max_new_tokens=max(r.max_new for r in group),
                    eos_token_id=eos,
                    pad_token_id=pad,
                    return_dict_in_generate=True,
                    output_scores=True,
                )
            scores = lm.compute_transition_scores(out.sequences, out.scores, normalize_logits=True)
            generated = zip(out.sequences[:, width:].tolist(), scores.tolist(), strict=True)
            for request in group:
                request.choices = []
                for _ in range(request.n):
                    row, lps = next(generated)
                    row, lps = row[: request.max_new], lps[: request.max_new]
                    end = row.index(eos) + 1 if eos in row else len(row)
                    request.choices.append(
                        {"ids": row[:end], "logprobs": lps[:end], "stop": row[end - 1 : end] == [eos]}
                    )

    async def chat_completions(self, request: dict[str, Any]) -> dict[str, Any]:
        """Answer one chat completion request (``n`` choices) with token ids and logprobs."""
        prompt = self._prompt_ids(request.get("messages"))
        n = int(request.get("n") or 1)
        limit = request.get("max_completion_tokens") or request.get("max_tokens") or self.max_tokens
        temperature = request.get("temperature")
        temp = self.temperature if temperature is None else float(temperature)
        raw = await self._submit(prompt, n, int(min(limit, self.max_tokens)), temp)
        eos = self.tokenizer.eos_token_id
        choices = []
        for index, c in enumerate(raw):
            visible = c["ids"][:-1] if c["ids"][-1:] == [eos] else c["ids"]
            choices.append(
                {
                    "index": index,
                    "message": {"role": "assistant", "content": self.tokenizer.decode(visible)},
                    "finish_reason": "stop" if c["stop"] else "length",
                    "token_ids": c["ids"],
                    "logprobs": {
                        "content": [
                            {
                                "token": self.tokenizer.convert_ids_to_tokens(t),
                                "logprob": lp,
                                "top_logprobs": [],
                            }
                            for t, lp in zip(c["ids"], c["logprobs"], strict=True)
                        ]
                    },
                }
            )
        completion = sum(len(c["ids"]) for c in raw)
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model,
            "prompt_token_ids": prompt,
            "choices": choices,
            "usage": {
                "prompt_tokens": len(prompt),
                "completion_tokens": completion,
                "total_tokens": len(prompt) + completion,
            },
        }


class VllmChatBackend(TransformersChatBackend):
    """The same OpenAI chat answers from vLLM's offline engine on GPU (token ids and sampled logprobs).

    :meth:`load` rebuilds the engine on the new weights. ``gpu_memory_utilization`` leaves room for the
    training process. GPU only; not exercised by the CPU tests.
    """

    gpu_memory_utilization: float = 0.35

    def load(self, model_dir: str | Path) -> None:
        """Serve the weights in ``model_dir`` (a merged model folder) from the next request on."""
        import gc

        import torch
        from transformers import AutoTokenizer
        from vllm import LLM

        with self._lock:
            self._lm = None
            gc.collect()
            torch.cuda.empty_cache()
            self.tokenizer = AutoTokenizer.from_pretrained(model_dir)
            self._lm = LLM(
                model=str(model_dir), gpu_memory_utilization=self.gpu_memory_utilization, enforce_eager=True
            )
            self.model_dir = Path(model_dir)

    def _generate_batch(self, batch: list[_GenerationRequest]) -> None:
        for request in batch:
            request.choices = self._generate(request.prompt, request.n, request.max_new, request.temperature)

    def _generate(self, prompt: list[int], n: int, max_new: int, temperature: float) -> list[dict[str, Any]]:
        from vllm import SamplingParams

        eos = self.tokenizer.eos_token_id
        params = SamplingParams(
            n=n, max_tokens=max_new, temperature=temperature, logprobs=0, stop_token_ids=[eos], seed=None
        )
        self._calls += 1  # called under self._lock (from _generate_locked)
        (result,) = self._lm.generate([{"prompt_token_ids": prompt}], params, use_tqdm=False)
        choices = []
        for out in result.outputs:
            ids = list(out.token_ids)
            lps = [float(step[t].logprob) for t, step in zip(ids, out.logprobs or [], strict=False)]
            choices.append(
                {
                    "ids": ids,
                    "logprobs": lps + [0.0] * (len(ids) - len(lps)),
                    "stop": out.finish_reason == "stop",
                }
            )
        return choices
