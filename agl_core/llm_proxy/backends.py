"""Model backends of the proxy: HTTP model servers, in-process samplers, pools and load balancing.

A *backend specification* maps each model name agents ask for to one or more replicas::

    {"policy": ["http://gpu-0:8000/v1", "http://gpu-1:8000/v1"],       # URLs
     "judge": HttpBackend("https://api.example.com/v1", api_key="sk-...", return_token_ids=False),
     "local": my_sampler}                                              # an InProcessBackend object

A replica is a URL string, an :class:`HttpBackend`, a mapping of :class:`HttpBackend` fields, or an object
implementing :class:`InProcessBackend`. The model name ``"*"`` matches any model no other entry names.
"""

from __future__ import annotations

import itertools
import os
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Literal, Protocol, TypedDict, runtime_checkable

from yarl import URL

from agl_core.llm_proxy.errors import BackendConfigError

__all__ = [
    "WILDCARD_MODEL",
    "BackendPool",
    "BackendTable",
    "BackendsSpec",
    "BalancingPolicy",
    "HttpBackend",
    "InProcessBackend",
    "ModelConfig",
    "Replica",
    "ReplicaLike",
    "build_backend_table",
    "model_list_to_backends",
]

WILDCARD_MODEL = "*"
"""Model name of a backend entry that serves every model not configured by name."""

BalancingPolicy = Literal["round_robin", "least_in_flight"]
"""How a request picks among the replicas of one model."""


@runtime_checkable
class InProcessBackend(Protocol):
    """A model served by a Python object in the proxy's process (Tinker samplers, local models, ...).

    Only :meth:`chat_completions` is required. The proxy also uses, when the object has them:

    * ``async def completions(request: dict) -> dict`` for ``/v1/completions`` (404 otherwise);
    * ``def stream_chat_completions(request: dict) -> AsyncIterator[dict]`` and
      ``def stream_completions(request: dict) -> AsyncIterator[dict]``: async generators of OpenAI
      ``chat.completion.chunk`` / ``text_completion`` chunk dicts for ``stream: true`` requests. Without
      them, a streaming request is answered by the non-streaming method and re-emitted as SSE.

    ``request`` is the agent's JSON body, untouched (the proxy does not add ``return_token_ids`` or
    ``logprobs`` for in-process backends: they should always return them). Return an OpenAI-style
    response dict with vLLM-style token ids so the proxy can record them: a top-level
    ``prompt_token_ids`` (chat; for completions either top-level or per choice), ``choices[i].token_ids``
    and ``choices[i].logprobs``. Raise :class:`~agl_core.llm_proxy.errors.ProxyHTTPError` to answer with a
    specific HTTP status; any other exception becomes a 500 ``server_error``. Methods run on the proxy's
    event loop, so CPU-heavy sampling belongs in a thread (``asyncio.to_thread``).
    """

    async def chat_completions(self, request: dict[str, Any]) -> dict[str, Any]:
        """Answer one ``/v1/chat/completions`` request with an OpenAI ``chat.completion`` dict."""
        ...


@dataclass(frozen=True)
class HttpBackend:
    """An OpenAI-compatible model server reached over HTTP (vLLM, SGLang, OpenAI, a proxy, ...).

    Args:
        url: Base URL, like an OpenAI client's ``base_url``: ``http://host:8000/v1``. A URL with no path
            gets ``/v1`` appended.
        api_key: Sent as ``Authorization: Bearer <api_key>``; never logged or shown in ``repr``.
        model: Model name to send upstream instead of the one the agent asked for (an alias), or None.
        return_token_ids: Add ``"return_token_ids": true`` to requests (vLLM >= 0.10.2), so responses
            carry ``prompt_token_ids`` and ``choices[].token_ids``. Turn off for servers that reject
            unknown parameters (OpenAI's API).
        logprobs: Ask for the sampled tokens' logprobs when the agent did not set ``logprobs`` itself
            (``logprobs: true`` for chat, ``logprobs: 0`` for completions); the agent's own setting
            always wins.
        streaming: The server can stream. When False a ``stream: true`` request is sent without
            streaming and the proxy re-emits the answer as SSE.
        headers: Extra headers for every request (for example Azure's ``api-key``); not logged.
        name: Label used in logs, stats and spans; defaults to the URL without credentials or query.
        max_tokens: Cap on the tokens one request may ask this server to generate: a larger (or
            missing) ``max_tokens`` / ``max_completion_tokens`` is lowered to it (harnesses ask for
            64k-128k), or None.
    """

    url: str
    api_key: str | None = field(default=None, repr=False)
    model: str | None = None
    return_token_ids: bool = True
    logprobs: bool = True
    streaming: bool = True
    headers: Mapping[str, str] | None = field(default=None, repr=False, hash=False, compare=False)
    name: str | None = None
    max_tokens: int | None = None

    def __repr__(self) -> str:
        shown = ", ".join(
            f"url={_redact_url(self.url)!r}" if f.name == "url" else f"{f.name}={getattr(self, f.name)!r}"
            for f in fields(self)
            if f.repr
        )
        return f"HttpBackend({shown})"

    def __post_init__(self) -> None:
        """Reject a configuration that could only fail request by request.

        Raises:
            BackendConfigError: naming the field and how to fix it.
        """
        base = _base_url(self.url)
        headers = self.headers or {}
        if not isinstance(headers, Mapping):
            raise BackendConfigError(
                f"HttpBackend headers must be a mapping of strings, got {type(headers).__name__}."
            )
        for key, value in headers.items():
            if not isinstance(key, str) or not _HEADER_NAME.fullmatch(key):
                raise BackendConfigError(f"HttpBackend header name {key!r} is not a valid HTTP header name.")
            if not isinstance(value, str) or not _header_value_ok(value):
                raise BackendConfigError(
                    f"HttpBackend header {key!r} must be a single-line latin-1 string (value not shown)."
                )
        if self.api_key is not None and (
            not isinstance(self.api_key, str) or not self.api_key or not _header_value_ok(self.api_key)
        ):
            raise BackendConfigError(
                "HttpBackend api_key must be a non-empty single-line latin-1 string (value not shown)."
            )
        has_auth = self.api_key is not None or any(k.lower() == "authorization" for k in headers)
        if (base.user is not None or base.password is not None) and has_auth:
            raise BackendConfigError(
                f"Backend URL {_redact_url(self.url)!r} carries credentials (user:password@) and the backend "
                "also sets api_key or an Authorization header; keep one: drop the credentials from the URL."
            )
        for name in ("model", "name"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value):
                raise BackendConfigError(
                    f"HttpBackend {name} must be a non-empty string or None, got {value!r}."
                )
        if self.max_tokens is not None and (type(self.max_tokens) is not int or self.max_tokens < 1):
            raise BackendConfigError(
                f"HttpBackend max_tokens must be a positive integer, got {self.max_tokens!r}."
            )
        for name in ("return_token_ids", "logprobs", "streaming"):
            if not isinstance(getattr(self, name), bool):
                raise BackendConfigError(
                    f"HttpBackend {name} must be True or False, got {getattr(self, name)!r}."
                )


_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")


def _header_value_ok(value: str) -> bool:
    """Whether ``value`` can be sent as an HTTP header value (one line, latin-1)."""
    if "\r" in value or "\n" in value or "\0" in value:
        return False
    try:
        value.encode("latin-1")
    except UnicodeEncodeError:
        return False
    return True


class Replica:
    """One backend of a pool, with its live counters (in-flight requests, failures, cool-down).

    The proxy creates replicas from the specification; they are reused across
    :meth:`~agl_core.llm_proxy.LLMProxy.update_backends` calls when the same backend appears again, so
    their counters survive a swap.
    """

    __slots__ = (
        "chat_url",
        "completions_fn",
        "completions_url",
        "down_until",
        "failures",
        "http",
        "in_flight",
        "in_process",
        "key",
        "label",
        "request_headers",
        "requests",
        "stream_chat",
        "stream_completions",
    )

    def __init__(self, spec: HttpBackend | InProcessBackend, label: str, key: Any) -> None:
        self.key = key
        self.label = label
        self.in_flight = 0
        self.requests = 0
        self.failures = 0
        self.down_until = 0.0
        self.http: HttpBackend | None = None
        self.in_process: InProcessBackend | None = None
        self.chat_url: URL | None = None
        self.completions_url: URL | None = None
        self.request_headers: dict[str, str] = {}
        self.completions_fn: Any = None
        self.stream_chat: Any = None
        self.stream_completions: Any = None
        if isinstance(spec, HttpBackend):
            self.http = spec
            base = _base_url(spec.url)
            path = base.path.rstrip("/")
            self.chat_url = base.with_path(path + "/chat/completions").with_query(base.query)
            self.completions_url = base.with_path(path + "/completions").with_query(base.query)
            headers = {"Content-Type": "application/json"}
            if spec.headers:
                headers.update(spec.headers)
            if spec.api_key:
                headers["Authorization"] = f"Bearer {spec.api_key}"
            self.request_headers = headers
        else:
            self.in_process = spec
            self.completions_fn = _optional_method(spec, "completions")
            self.stream_chat = _optional_method(spec, "stream_chat_completions")
            self.stream_completions = _optional_method(spec, "stream_completions")

    @property
    def healthy(self) -> bool:
        """False while the replica cools down after a connection failure."""
        return self.down_until <= time.monotonic()

    def snapshot(self) -> dict[str, Any]:
        """Counters for :meth:`LLMProxy.stats` (no secrets)."""
        return {
            "backend": self.label,
            "in_flight": self.in_flight,
            "requests": self.requests,
            "failures": self.failures,
            "healthy": self.healthy,
        }

    def __repr__(self) -> str:
        return f"Replica({self.label!r}, in_flight={self.in_flight})"


def _optional_method(obj: Any, name: str) -> Any:
    method = getattr(obj, name, None)
    return method if callable(method) else None


class BackendPool:
    """The replicas serving one model name, and the load-balancing policy that picks among them."""

    __slots__ = ("_counter", "in_process", "model", "policy", "replicas", "streaming")

    def __init__(self, model: str, replicas: Sequence[Replica], policy: BalancingPolicy) -> None:
        self.model = model
        self.replicas = tuple(replicas)
        self.policy = policy
        self._counter = itertools.count()
        # Pools never mix kinds; a pool with one non-streaming replica answers streams by synthesized SSE.
        self.in_process = bool(self.replicas) and self.replicas[0].in_process is not None
        self.streaming = all(r.http is None or r.http.streaming for r in self.replicas)

    def pick(self, tried: Sequence[Replica] = ()) -> Replica | None:
        """The replica for the next try, skipping ``tried``; None if every replica was tried.

        Healthy replicas (not cooling down after a connection failure) are preferred; when none is
        healthy the proxy still tries one rather than failing without trying. Round robin rotates the
        starting point per call; least-in-flight takes the replica with the fewest requests in flight,
        ties broken by the rotation.
        """
        replicas = self.replicas
        count = len(replicas)
        if count == 1:
            only = replicas[0]
            return None if tried and only in tried else only
        start = next(self._counter)
        now = time.monotonic()
        fallback: Replica | None = None
        best: Replica | None = None
        for offset in range(count):
            replica = replicas[(start + offset) % count]
            if tried and replica in tried:
                continue
            if replica.down_until > now:
                if fallback is None:
                    fallback = replica
                continue
            if self.policy == "round_robin":
                return replica
            if best is None or replica.in_flight < best.in_flight:
                best = replica
        return best if best is not None else fallback


class BackendTable:
    """An immutable snapshot of the backends: model name -> :class:`BackendPool`.

    The proxy swaps the whole table on an update, so a request keeps the replica it picked while new
    requests see the new table.
    """

    __slots__ = ("_wildcard", "pools")

    def __init__(self, pools: Mapping[str, BackendPool]) -> None:
        self.pools = dict(pools)
        self._wildcard = self.pools.get(WILDCARD_MODEL)

    def pool_for(self, model: str) -> BackendPool | None:
        """The pool serving ``model`` (an exact name first, then ``"*"``), or None."""
        pool = self.pools.get(model)
        return pool if pool is not None else self._wildcard

    def model_names(self) -> list[str]:
        """Configured model names, excluding the wildcard, in configuration order."""
        return [name for name in self.pools if name != WILDCARD_MODEL]

    def replicas(self) -> Iterable[Replica]:
        """Every replica once (a replica may serve several model names)."""
        seen: dict[int, Replica] = {}
        for pool in self.pools.values():
            for replica in pool.replicas:
                seen.setdefault(id(replica), replica)
        return seen.values()


ReplicaLike = str | HttpBackend | Mapping[str, Any] | InProcessBackend
"""One replica in a specification: a URL, an :class:`HttpBackend`, its fields as a mapping, or an object."""

BackendsSpec = Mapping[str, ReplicaLike | Sequence[ReplicaLike]]
"""Model name -> one replica or a list of replicas."""


class ModelConfig(TypedDict):
    """One entry of Agent Lightning 0.3's (LiteLLM's) ``model_list``; see :func:`model_list_to_backends`."""

    model_name: str
    litellm_params: dict[str, Any]


_LITELLM_PROVIDER_PREFIXES = ("hosted_vllm/", "openai/", "vllm/", "text-completion-openai/", "custom_openai/")
_HTTP_FIELDS = frozenset(f.name for f in fields(HttpBackend))


def _base_url(url: str) -> URL:
    """Validate and normalize a backend base URL (adds ``/v1`` when there is no path)."""
    if not isinstance(url, str) or not url:
        raise BackendConfigError(f"A backend URL must be a non-empty string, got {url!r}.")
    try:
        parsed = URL(url)
    except ValueError:
        parsed = URL()
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise BackendConfigError(
            f"Backend URL {_redact_url(url)!r} is not an http(s) URL with a host; "
            "use a base URL such as 'http://127.0.0.1:8000/v1'."
        )
    if parsed.path in ("", "/"):
        parsed = parsed.with_path("/v1").with_query(parsed.query)
    return parsed


def _redact_url(url: str) -> str:
    """``url`` without credentials, query or fragment (safe to log)."""
    try:
        parsed = URL(url)
        if not parsed.absolute:
            return str(parsed.with_query(None).with_fragment(None))
        return str(parsed.with_user(None).with_query(None).with_fragment(None))
    except (TypeError, ValueError):
        return "<invalid url>"


def _to_http_backend(item: str | Mapping[str, Any], model: str) -> HttpBackend:
    if isinstance(item, str):
        return HttpBackend(url=item)
    unknown = set(item) - _HTTP_FIELDS
    if unknown:
        raise BackendConfigError(
            f"Backend for model {model!r} has unknown option(s) {sorted(unknown)}; "
            f"valid options are {sorted(_HTTP_FIELDS)}."
        )
    if "url" not in item:
        raise BackendConfigError(
            f"Backend for model {model!r} needs a 'url' (for example 'http://host:8000/v1')."
        )
    return HttpBackend(**dict(item))


def _replica_for(
    item: ReplicaLike, model: str, existing: Mapping[Any, Replica], created: dict[Any, Replica]
) -> Replica:
    """Build (or reuse) the replica for one specification item."""
    if isinstance(item, (str, HttpBackend)) or (isinstance(item, Mapping) and not _is_in_process(item)):
        spec = item if isinstance(item, HttpBackend) else _to_http_backend(item, model)
        base = _base_url(spec.url)
        headers_key = tuple(sorted((spec.headers or {}).items()))
        key: Any = ("http", spec, headers_key)
        label = spec.name or _redact_url(str(base))
        build: Any = spec
    elif _is_in_process(item):
        key = ("in_process", id(item))
        name = getattr(item, "name", None)
        label = name if isinstance(name, str) and name else f"in-process:{type(item).__name__}"
        build = item
    else:
        raise BackendConfigError(
            f"Backend for model {model!r} must be a URL string, an HttpBackend, a mapping of HttpBackend "
            f"fields or an object with an async chat_completions(request) method; got {type(item).__name__}."
        )
    replica = created.get(key) or existing.get(key)
    if replica is None:
        replica = Replica(build, label, key)
    created[key] = replica
    return replica


def _is_in_process(item: Any) -> bool:
    return not isinstance(item, (str, Mapping, HttpBackend)) and callable(
        getattr(item, "chat_completions", None)
    )


def build_backend_table(
    spec: BackendsSpec | BackendTable | None,
    policy: BalancingPolicy = "round_robin",
    previous: BackendTable | None = None,
) -> BackendTable:
    """Validate a backend specification and build its :class:`BackendTable`.

    Replicas of ``previous`` that appear again (same HTTP settings, or the same in-process object) are
    reused with their counters.

    Raises:
        BackendConfigError: for an empty model name, a model without replicas, an invalid URL, an
            unknown option or an object that is not a backend. Nothing is changed in that case.
    """
    if isinstance(spec, BackendTable):
        return spec
    if policy not in ("round_robin", "least_in_flight"):
        raise BackendConfigError(f"balancing must be 'round_robin' or 'least_in_flight', got {policy!r}.")
    if spec is None:
        return BackendTable({})
    if not isinstance(spec, Mapping):
        raise BackendConfigError(
            "backends must be a mapping of model name -> replica(s), for example "
            f"{{'my-model': ['http://127.0.0.1:8000/v1']}}; got {type(spec).__name__}."
        )
    existing: dict[Any, Replica] = {}
    if previous is not None:
        existing = {replica.key: replica for replica in previous.replicas()}
    created: dict[Any, Replica] = {}
    pools: dict[str, BackendPool] = {}
    for model, items in spec.items():
        if not isinstance(model, str) or not model:
            raise BackendConfigError(f"Model names must be non-empty strings, got {model!r}.")
        listed: Any = (
            [items] if isinstance(items, (str, Mapping, HttpBackend)) or _is_in_process(items) else items
        )
        if not isinstance(listed, Sequence) or not listed:
            raise BackendConfigError(
                f"Model {model!r} has no backends; give at least one URL or backend object."
            )
        replicas = [_replica_for(item, model, existing, created) for item in listed]
        kinds = {replica.http is None for replica in replicas}
        if len(kinds) > 1:
            raise BackendConfigError(
                f"Model {model!r} mixes HTTP and in-process backends; give each kind its own model name."
            )
        pools[model] = BackendPool(model, replicas, policy)
    return BackendTable(pools)


def _default_api_base(model: object) -> str | None:
    """Where LiteLLM sends an OpenAI model without ``api_base``: ``$OPENAI_BASE_URL`` / ``$OPENAI_API_BASE``,
    else OpenAI's API. Other providers have no default here (None)."""
    if not isinstance(model, str) or ("/" in model and not model.startswith("openai/")):
        return None
    return (
        os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_BASE") or "https://api.openai.com/v1"
    )


def model_list_to_backends(
    model_list: Sequence[ModelConfig | Mapping[str, Any]],
) -> dict[str, list[HttpBackend]]:
    """Convert an Agent Lightning 0.3 / LiteLLM ``model_list`` to a backend specification.

    Each ``{"model_name": name, "litellm_params": {"model": "hosted_vllm/<served>", "api_base": url,
    "api_key": key}}`` becomes an :class:`HttpBackend` for ``name``; a LiteLLM provider prefix
    (``hosted_vllm/``, ``openai/`` ...) is stripped and the rest is sent upstream as the model name.
    Entries sharing a ``model_name`` become replicas of one pool.

    Raises:
        BackendConfigError: when an entry lacks ``model_name``, or ``litellm_params.api_base`` for a
            provider other than OpenAI (an OpenAI model without it goes to ``$OPENAI_BASE_URL``,
            ``$OPENAI_API_BASE`` or OpenAI's API, with ``$OPENAI_API_KEY``, as LiteLLM did).
    """
    out: dict[str, list[HttpBackend]] = {}
    for index, entry in enumerate(model_list):
        name = entry.get("model_name") if isinstance(entry, Mapping) else None
        params = entry.get("litellm_params") if isinstance(entry, Mapping) else None
        if not isinstance(name, str) or not name or not isinstance(params, Mapping):
            raise BackendConfigError(
                f"model_list[{index}] must look like {{'model_name': str, 'litellm_params': {{...}}}}, "
                f"got {entry!r}."
            )
        api_base = params.get("api_base") or params.get("base_url") or _default_api_base(params.get("model"))
        if not isinstance(api_base, str):
            raise BackendConfigError(
                f"model_list[{index}] ({name!r}) has no litellm_params.api_base; the agl proxy forwards to "
                "OpenAI-compatible servers and needs their base URL."
            )
        upstream = params.get("model")
        if isinstance(upstream, str):
            for prefix in _LITELLM_PROVIDER_PREFIXES:
                if upstream.startswith(prefix):
                    upstream = upstream[len(prefix) :]
                    break
        out.setdefault(name, []).append(
            HttpBackend(
                url=api_base,
                api_key=params.get("api_key")
                or (os.environ.get("OPENAI_API_KEY") if not params.get("api_base") else None),
                model=upstream if isinstance(upstream, str) and upstream != name else None,
            )
        )
    return out
