"""The in-process LLM-proxy backend that serves the current Tinker sampler to agents as an OpenAI model."""

from __future__ import annotations

import time
import uuid
from typing import Any

from tinker import types

from agl_core.llm_proxy import ProxyHTTPError

__all__ = ["TinkerChatBackend"]


class TinkerChatBackend:
    """OpenAI chat completions on a Tinker ``SamplingClient`` (hosted or local), with exact token ids.

    The tokenizer's chat template renders the messages (with the generation prompt); the sampler's
    tokens and logprobs are returned as vLLM-style ``prompt_token_ids``, ``choices[].token_ids`` and
    ``choices[].logprobs.content``, which the proxy records for training. :meth:`set_sampler` swaps the
    sampler between steps; requests in flight finish on the one they started with.
    """

    def __init__(
        self,
        sampler: Any,
        tokenizer: Any,
        *,
        model: str,
        max_tokens: int = 256,
        temperature: float = 1.0,
        top_k: int = -1,
        top_p: float = 1.0,
    ) -> None:
        self.sampler = sampler
        self.tokenizer = tokenizer
        self.model = model
        self.name = f"tinker:{model}"
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.top_k = top_k
        self.top_p = top_p

    def set_sampler(self, sampler: Any) -> None:
        """Serve ``sampler`` from the next request on."""
        self.sampler = sampler

    def _params(self, request: dict[str, Any]) -> types.SamplingParams:
        max_tokens = request.get("max_completion_tokens") or request.get("max_tokens") or self.max_tokens
        stop = request.get("stop")
        texts = [stop] if isinstance(stop, str) else [s for s in stop or [] if isinstance(s, str)]
        # SamplingParams.stop is all token ids or all strings: with stop strings, eos goes as its text.
        eos_id, eos_text = self.tokenizer.eos_token_id, self.tokenizer.eos_token
        stops: list[Any] = (
            ([eos_text] if eos_text else []) + texts if texts else ([eos_id] if eos_id is not None else [])
        )
        temperature = request.get("temperature")
        top_p = request.get("top_p")
        return types.SamplingParams(
            max_tokens=int(min(max_tokens, self.max_tokens)),
            temperature=self.temperature if temperature is None else float(temperature),
            top_k=int(request.get("top_k") or self.top_k),
            top_p=self.top_p if top_p is None else float(top_p),
            seed=request.get("seed"),
            stop=stops or None,
        )

    def _prompt(self, messages: Any) -> list[int]:
        try:
            ids = self.tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=True)
        except Exception as exc:  # template errors are the request's fault
            raise ProxyHTTPError(
                400, f"Cannot render messages with the chat template: {exc}", param="messages"
            ) from exc
        if isinstance(ids, dict) or hasattr(ids, "input_ids"):
            ids = ids["input_ids"]
        return [int(t) for t in ids]

    async def chat_completions(self, request: dict[str, Any]) -> dict[str, Any]:
        """Answer one chat request: render, sample ``n`` sequences, return text, ids and logprobs."""
        prompt = self._prompt(request.get("messages"))
        n = int(request.get("n") or 1)
        sampler = self.sampler
        response = await sampler.sample(types.ModelInput.from_ints(prompt), n, self._params(request))
        choices = []
        completion_tokens = 0
        eos = self.tokenizer.eos_token_id
        for index, seq in enumerate(response.sequences):
            tokens = list(seq.tokens)
            logprobs = list(seq.logprobs or [0.0] * len(tokens))
            completion_tokens += len(tokens)
            visible = tokens[:-1] if tokens and tokens[-1] == eos else tokens
            choices.append(
                {
                    "index": index,
                    "message": {"role": "assistant", "content": self.tokenizer.decode(visible)},
                    "finish_reason": "stop" if seq.stop_reason == "stop" else "length",
                    "token_ids": tokens,
                    "logprobs": {
                        "content": [
                            {
                                "token": self.tokenizer.convert_ids_to_tokens(t),
                                "logprob": lp,
                                "top_logprobs": [],
                            }
                            for t, lp in zip(tokens, logprobs, strict=True)
                        ]
                    },
                }
            )
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model,
            "prompt_token_ids": prompt,
            "choices": choices,
            "usage": {
                "prompt_tokens": len(prompt),
                "completion_tokens": completion_tokens,
                "total_tokens": len(prompt) + completion_tokens,
            },
        }
