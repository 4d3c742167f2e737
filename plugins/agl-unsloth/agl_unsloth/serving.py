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


class TransformersChatBackend:
    """An in-process OpenAI chat backend on a transformers causal LM (sampling, token ids, logprobs).

    :meth:`load` swaps in new weights (a folder saved with ``save_pretrained``) between iterations;
    generation runs in a worker thread under a lock so the event loop stays free.
    """

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

    def _generate(self, prompt: list[int], n: int, max_new: int, temperature: float) -> list[dict[str, Any]]:
        import torch

        with self._lock:
            lm, tok = self._lm, self.tokenizer
            self._calls += 1
            torch.manual_seed(self._seed + self._calls)
            inputs = torch.tensor([prompt] * n, device=self.device)
            with torch.no_grad():
                out = lm.generate(
                    inputs,
                    attention_mask=torch.ones_like(inputs),
                    do_sample=temperature > 0,
                    temperature=temperature if temperature > 0 else None,
                    top_k=0,
                    top_p=1.0,
                    max_new_tokens=max_new,
                    eos_token_id=tok.eos_token_id,
                    pad_token_id=tok.pad_token_id,
                    return_dict_in_generate=True,
                    output_scores=True,
                )
            scores = lm.compute_transition_scores(out.sequences, out.scores, normalize_logits=True)
        choices = []
        for row, lps in zip(out.sequences[:, len(prompt) :].tolist(), scores.tolist(), strict=True):
            end = row.index(tok.eos_token_id) + 1 if tok.eos_token_id in row else len(row)
            choices.append(
                {
                    "ids": row[:end],
                    "logprobs": lps[:end],
                    "stop": end < len(row) or row[-1:] == [tok.eos_token_id],
                }
            )
        return choices

    async def chat_completions(self, request: dict[str, Any]) -> dict[str, Any]:
        """Answer one chat completion request (``n`` choices) with token ids and logprobs."""
        prompt = self._prompt_ids(request.get("messages"))
        n = int(request.get("n") or 1)
        limit = request.get("max_completion_tokens") or request.get("max_tokens") or self.max_tokens
        temperature = request.get("temperature")
        temp = self.temperature if temperature is None else float(temperature)
        raw = await asyncio.to_thread(self._generate, prompt, n, int(min(limit, self.max_tokens)), temp)
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

    def _generate(self, prompt: list[int], n: int, max_new: int, temperature: float) -> list[dict[str, Any]]:
        from vllm import SamplingParams

        eos = self.tokenizer.eos_token_id
        params = SamplingParams(
            n=n, max_tokens=max_new, temperature=temperature, logprobs=0, stop_token_ids=[eos], seed=None
        )
        with self._lock:
            self._calls += 1
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
