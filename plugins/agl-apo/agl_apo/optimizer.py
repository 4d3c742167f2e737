"""`OptimizerLLM`: the chat client APO's critiques and edits go through.

Any OpenAI-compatible endpoint works (OpenAI, Azure-style gateways, vLLM, LiteLLM, ...). On top of the
``openai`` client it adds what a long optimization run needs:

* a timeout on every call (``request_timeout``);
* retries with exponential backoff and jitter on rate limits (HTTP 429, honouring ``Retry-After``),
  timeouts, dropped connections and 5xx answers -- but not on ``insufficient_quota``, which no wait fixes;
* no ``temperature`` for models that reject it (fixes quirk 18 in docs/migrating-from-agent-lightning.md):
models whose name starts with a
  known reasoning-model prefix never get one, and a model that answers HTTP 400 about ``temperature`` is
  retried at once without it and remembered;
* :meth:`OptimizerLLM.preflight`, a cheap ``GET /models`` that turns an unreachable endpoint or a rejected
  key into a clear error before a run starts;
* token usage totals (:class:`OptimizerUsage`).
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from openai import AsyncOpenAI

__all__ = [
    "REASONING_MODEL_PREFIXES",
    "OptimizerConfigError",
    "OptimizerError",
    "OptimizerLLM",
    "OptimizerUnreachableError",
    "OptimizerUsage",
    "rejects_temperature",
]

logger = logging.getLogger("agl_core.algorithm.apo.optimizer")

REASONING_MODEL_PREFIXES: tuple[str, ...] = ("o1", "o3", "o4", "gpt-5")
"""Model-name prefixes of reasoning models that only accept the default temperature."""

_TEMPERATURE_OK_PREFIXES: tuple[str, ...] = ("gpt-5-chat",)
"""Exceptions to :data:`REASONING_MODEL_PREFIXES` (chat variants that do accept a temperature)."""

_DEFAULT_OPENAI_URL = "https://api.openai.com/v1"


class OptimizerError(RuntimeError):
    """A call to the optimizer model failed for good (after retries, or with an error retries cannot fix)."""


class OptimizerConfigError(OptimizerError, ValueError):
    """The optimizer endpoint is misconfigured (no API key, key rejected, ...)."""


class OptimizerUnreachableError(OptimizerConfigError):
    """The optimizer endpoint does not answer (wrong URL, server down, network)."""


def rejects_temperature(model: str) -> bool:
    """True for models known to reject a non-default ``temperature`` (o1/o3/o4/gpt-5 families)."""
    name = model.rsplit("/", 1)[-1].lower()
    if name.startswith(_TEMPERATURE_OK_PREFIXES):
        return False
    return name.startswith(REASONING_MODEL_PREFIXES)


@dataclass
class OptimizerUsage:
    """Totals over every successful optimizer call."""

    calls: int = 0
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def as_dict(self) -> dict[str, int]:
        """The totals as a plain dict (for JSON reports)."""
        return {
            "calls": self.calls,
            "retries": self.retries,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
        }


def _error_text(exc: BaseException) -> str:
    """Everything an API error says (message and body), lower-cased, for matching."""
    parts = [str(exc)]
    body = getattr(exc, "body", None)
    if body is not None:
        parts.append(repr(body))
    return " ".join(parts).lower()


def _mentions_temperature(exc: BaseException) -> bool:
    body = getattr(exc, "body", None)
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        if isinstance(inner, Mapping) and inner.get("param") == "temperature":
            return True
    return "temperature" in _error_text(exc)


def _retry_after_seconds(exc: BaseException) -> float | None:
    """The server's ``Retry-After`` (seconds) from an API error's response, if any."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    for key in ("retry-after-ms", "retry-after"):
        raw = headers.get(key)
        if raw is None:
            continue
        try:
            value = float(raw)
        except (TypeError, ValueError):
            continue
        seconds = value / 1000.0 if key == "retry-after-ms" else value
        if 0 <= seconds <= 600:
            return seconds
    return None


class OptimizerLLM:
    """Chat completions for the optimizer, with timeouts, backoff retries and temperature handling.

    Args:
        client: An ``openai.AsyncOpenAI`` to use (its own retries are switched off: this class retries).
            Without one, a client is created on first use from ``base_url``/``api_key``, falling back to
            ``OPENAI_BASE_URL``/``OPENAI_API_KEY``.
        base_url: The endpoint (``http://host:port/v1``).
        api_key: The key. A custom ``base_url`` without any key gets the placeholder ``"EMPTY"`` (local
            servers such as vLLM ignore it); the official endpoint needs a real one.
        request_timeout: Seconds one call may take.
        max_retries: Retries of one call after rate limits and transient failures.
        backoff_initial: First backoff in seconds; doubles per retry (with jitter) up to ``backoff_max``.
        backoff_max: Longest backoff in seconds.
        sleep: How to wait between retries (tests pass a recorder).

    Raises:
        OptimizerConfigError: no API key for the official OpenAI endpoint, or a non-positive setting.
    """

    def __init__(
        self,
        client: AsyncOpenAI | None = None,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        request_timeout: float = 120.0,
        max_retries: int = 6,
        backoff_initial: float = 1.0,
        backoff_max: float = 60.0,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    ) -> None:
        if request_timeout <= 0:
            raise OptimizerConfigError(f"request_timeout must be > 0 seconds, got {request_timeout!r}.")
        if max_retries < 0:
            raise OptimizerConfigError(f"max_retries must be >= 0, got {max_retries!r}.")
        if backoff_initial < 0 or backoff_max < backoff_initial:
            raise OptimizerConfigError(
                f"Need 0 <= backoff_initial <= backoff_max, got {backoff_initial!r} and {backoff_max!r}."
            )
        self._given_client = client
        self._client: Any = None
        if client is None:
            resolved_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
            resolved_key = api_key or os.environ.get("OPENAI_API_KEY") or None
            if resolved_key is None:
                if resolved_url is None or resolved_url.rstrip("/") == _DEFAULT_OPENAI_URL:
                    raise OptimizerConfigError(
                        "No API key for the optimizer: pass api_key=... (or an AsyncOpenAI client), or set "
                        "OPENAI_API_KEY. For a local OpenAI-compatible server pass its base_url."
                    )
                resolved_key = "EMPTY"
            self.base_url: str = resolved_url or _DEFAULT_OPENAI_URL
            self._api_key: str = resolved_key
        else:
            self.base_url = str(getattr(client, "base_url", None) or base_url or _DEFAULT_OPENAI_URL)
            key = getattr(client, "api_key", None)
            self._api_key = key if isinstance(key, str) else "EMPTY"
        self.request_timeout = float(request_timeout)
        self.max_retries = int(max_retries)
        self.backoff_initial = float(backoff_initial)
        self.backoff_max = float(backoff_max)
        self._sleep = sleep
        self._no_temperature: set[str] = set()
        self.usage = OptimizerUsage()

    def __getstate__(self) -> dict[str, Any]:
        """Pickle without live HTTP clients; the copy creates its own from ``base_url`` and the key."""
        state = dict(self.__dict__)
        state["_client"] = None
        state["_given_client"] = None
        return state

    @property
    def client(self) -> Any:
        """The ``AsyncOpenAI`` client (created on first use, built-in retries off)."""
        if self._client is None:
            if self._given_client is not None:
                self._client = self._given_client.with_options(max_retries=0)
            else:
                from openai import AsyncOpenAI

                self._client = AsyncOpenAI(base_url=self.base_url, api_key=self._api_key, max_retries=0)
        return self._client

    def sends_temperature(self, model: str) -> bool:
        """Whether calls to ``model`` include ``temperature``."""
        return model not in self._no_temperature and not rejects_temperature(model)

    async def preflight(self, models: Sequence[str] = (), *, timeout: float = 10.0) -> None:
        """Check that the endpoint answers, with one ``GET /models`` (no tokens spent).

        A server without ``/models`` (HTTP 404/405) or one that rate-limits the probe still counts as
        reachable. Models missing from the listing only log a warning: gateways often list a subset.

        Raises:
            OptimizerUnreachableError: no connection, or no answer within ``timeout`` seconds.
            OptimizerConfigError: the endpoint rejected the API key (HTTP 401/403).
        """
        import openai

        client = self.client.with_options(max_retries=0, timeout=timeout)
        try:
            page = await client.models.list()
        except (openai.APITimeoutError, openai.APIConnectionError) as exc:
            raise OptimizerUnreachableError(
                f"The optimizer endpoint {self.base_url} is unreachable ({type(exc).__name__}: {exc}). Check "
                "base_url (or OPENAI_BASE_URL) and that the server is running."
            ) from exc
        except (openai.AuthenticationError, openai.PermissionDeniedError) as exc:
            raise OptimizerConfigError(
                f"The optimizer endpoint {self.base_url} rejected the API key (HTTP {exc.status_code}): "
                f"{exc}. Pass api_key=... or set OPENAI_API_KEY (or preflight=False if only its GET /models "
                "is restricted)."
            ) from exc
        except openai.APIStatusError as exc:
            logger.info(
                "Optimizer endpoint %s answered GET /models with HTTP %s; it is reachable.",
                self.base_url,
                exc.status_code,
            )
            return
        listed = {getattr(model, "id", None) for model in getattr(page, "data", [])}
        missing = [m for m in dict.fromkeys(models) if listed and m not in listed]
        if missing:
            logger.warning(
                "Optimizer endpoint %s does not list model(s) %s; calls to them may fail.",
                self.base_url,
                ", ".join(missing),
            )

    async def chat(
        self, model: str, messages: Sequence[Mapping[str, Any]], *, temperature: float | None = None
    ) -> str:
        """One chat completion; returns the reply text ('' when the model sent none).

        Raises:
            OptimizerError: the call failed for good (an error retries cannot fix, or out of retries).
        """
        import openai

        retries = 0
        while True:
            kwargs: dict[str, Any] = {
                "model": model,
                "messages": [dict(m) for m in messages],
                "timeout": self.request_timeout,
            }
            send_temperature = temperature is not None and self.sends_temperature(model)
            if send_temperature:
                kwargs["temperature"] = temperature
            try:
                response = await self.client.chat.completions.create(**kwargs)
            except openai.BadRequestError as exc:
                if send_temperature and _mentions_temperature(exc):
                    logger.info(
                        "Model %s rejects temperature=%s; sending none from now on.", model, temperature
                    )
                    self._no_temperature.add(model)
                    continue
                raise OptimizerError(
                    f"The optimizer model {model!r} rejected the request (HTTP 400): {exc}"
                ) from exc
            except openai.RateLimitError as exc:
                if "insufficient_quota" in _error_text(exc):
                    raise OptimizerError(
                        f"The optimizer endpoint {self.base_url} reports insufficient quota for {model!r}: "
                        f"{exc}. Add credit or use another key; retrying will not help."
                    ) from exc
                retries = await self._backoff(model, retries, exc)
                continue
            except (openai.APITimeoutError, openai.APIConnectionError, openai.InternalServerError) as exc:
                retries = await self._backoff(model, retries, exc)
                continue
            except (openai.AuthenticationError, openai.PermissionDeniedError) as exc:
                raise OptimizerConfigError(
                    f"The optimizer endpoint {self.base_url} rejected the API key: {exc}"
                ) from exc
            except openai.APIStatusError as exc:
                raise OptimizerError(
                    f"The optimizer model {model!r} failed with HTTP {exc.status_code}: {exc}"
                ) from exc
            self._count(response)
            choices = getattr(response, "choices", None) or []
            if not choices:
                return ""
            return str(getattr(choices[0].message, "content", None) or "")

    async def _backoff(self, model: str, retries: int, exc: BaseException) -> int:
        """Wait before the next try, or raise when the retries are used up; returns the new retry count."""
        if retries >= self.max_retries:
            raise OptimizerError(
                f"The optimizer model {model!r} at {self.base_url} kept failing; gave up after {retries} "
                f"retries. Last error: {type(exc).__name__}: {exc}"
            ) from exc
        delay = _retry_after_seconds(exc)
        if delay is None:
            ceiling = min(self.backoff_max, self.backoff_initial * (2**retries))
            delay = random.uniform(ceiling / 2, ceiling)
        logger.warning(
            "Optimizer call to %s failed (%s); retry %d/%d in %.1fs.",
            model,
            type(exc).__name__,
            retries + 1,
            self.max_retries,
            delay,
        )
        self.usage.retries += 1
        await self._sleep(delay)
        return retries + 1

    def _count(self, response: Any) -> None:
        self.usage.calls += 1
        usage = getattr(response, "usage", None)
        if usage is not None:
            self.usage.prompt_tokens += int(getattr(usage, "prompt_tokens", 0) or 0)
            self.usage.completion_tokens += int(getattr(usage, "completion_tokens", 0) or 0)

    async def aclose(self) -> None:
        """Close the HTTP client this object created (a client passed in is left open)."""
        client, self._client = self._client, None
        if client is not None and self._given_client is None:
            await client.close()
