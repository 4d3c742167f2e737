"""Counters the proxy keeps about requests and recording, returned by ``LLMProxy.stats()``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from agl_core.semconv import GEN_AI_USAGE_INPUT_TOKENS, GEN_AI_USAGE_OUTPUT_TOKENS

__all__ = ["ProxyStats"]


@dataclass
class ProxyStats:
    """Request and recording counters of one proxy (plain ints, updated on the proxy's event loop).

    Requests: ``requests`` answered, ``requests_failed`` answered with HTTP >= 400, ``requests_unrecorded``
    that arrived outside a ``/rollout/{rid}/attempt/{aid}`` path (or without a store), ``retries`` to
    another replica after a connection failure.

    Recording: ``spans_queued`` handed to the background writer, ``spans_written`` acknowledged by the
    store, ``spans_failed`` the store rejected or could not take, ``spans_dropped`` discarded because the
    queue was full or no store was set, ``sequence_id_errors`` failed sequence-id allocations, and
    ``store_errors`` / ``last_store_error`` for every failed store call.

    Backends and tokens: ``backend_errors`` answers with HTTP >= 500 caused by a backend (its own 5xx, or
    the proxy's 502/504 when no replica answered in time); ``prompt_tokens`` / ``completion_tokens`` summed
    from the ``usage`` of recorded answers.
    """

    requests: int = 0
    requests_failed: int = 0
    requests_unrecorded: int = 0
    retries: int = 0
    spans_queued: int = 0
    spans_written: int = 0
    spans_failed: int = 0
    spans_dropped: int = 0
    sequence_id_errors: int = 0
    store_errors: int = 0
    last_store_error: str | None = None
    backend_errors: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def note_store_error(self, exc: BaseException) -> None:
        """Count a failed store call and remember its message."""
        self.store_errors += 1
        self.last_store_error = f"{type(exc).__name__}: {exc}"

    def note_usage(self, attributes: Mapping[str, Any]) -> None:
        """Add the token counts of one recorded span's ``gen_ai.usage.*`` attributes."""
        prompt = attributes.get(GEN_AI_USAGE_INPUT_TOKENS)
        if type(prompt) is int:
            self.prompt_tokens += prompt
        completion = attributes.get(GEN_AI_USAGE_OUTPUT_TOKENS)
        if type(completion) is int:
            self.completion_tokens += completion

    def as_dict(self) -> dict[str, Any]:
        """The counters as a plain dict."""
        return asdict(self)
