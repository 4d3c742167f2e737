"""`LightningStoreClient`: the `LightningStore` contract over HTTP, talking to `agl store serve`.

Open it with ``open_store("http://host:port")`` or construct it directly. Every method is one request
(the bulk methods one batch request), driven by the route table (`agl_core.store.http.routes`); errors
come back as the typed exceptions the local store raises. Retries, idempotency keys, TLS, proxies and
the differences from Agent Lightning 0.3 are described in docs/store-http.md (Client behaviour).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import ipaddress
import logging
import os
import random
import ssl
import threading
import time
from collections.abc import Sequence
from typing import Any, NamedTuple
from urllib.parse import quote, urlencode, urlsplit

import aiohttp
import pydantic_core
import yarl
from pydantic import TypeAdapter

from agl_core._compat import store_client_options
from agl_core.store import logic
from agl_core.store.base import (
    UNSET,
    LightningStore,
    LightningStoreCapabilities,
    LightningStoreStatistics,
)
from agl_core.store.errors import AttemptNotFoundError, InvalidRequestError, RolloutNotFoundError
from agl_core.store.http.errors import StoreServerError, StoreUnavailableError, exception_from_payload
from agl_core.store.http.routes import API_PREFIX, OTLP_TRACES_PATH, route_by_name
from agl_core.store.logic.filters import NormalizedFilter
from agl_core.types import (
    Attempt,
    AttemptedRollout,
    EnqueueRolloutRequest,
    NamedResources,
    PaginatedResult,
    ResourcesUpdate,
    Rollout,
    Span,
    Worker,
)
from agl_core.types import queries as q
from agl_core.types.tracer import STORED_SPAN_CONTEXT

__all__ = ["LightningStoreClient"]

logger = logging.getLogger(__name__)

_RETRYABLE_STATUSES = frozenset((502, 503, 504))
_SERVER_FAULT_RETRIES = 2

CA_BUNDLE_ENV = "AGL_STORE_CA_BUNDLE"
"""Environment variable naming a PEM file of CA certificates to trust for ``https://`` stores."""
CLIENT_CERT_ENV = "AGL_STORE_CLIENT_CERT"
"""Environment variable naming the PEM client certificate (optionally with its key) for mutual TLS."""
CLIENT_KEY_ENV = "AGL_STORE_CLIENT_KEY"
"""Environment variable naming the PEM private key of the client certificate, when in a separate file."""


_PICKLED = (
    *("token", "timeout", "retries", "retry_timeout", "backoff", "max_poll_seconds", "connection_limit"),
    *("ca_bundle", "client_cert", "client_key", "proxy", "trust_env", "cache_span_pages"),
)
"""The constructor arguments a pickled client keeps (besides ``url``)."""


class _Answer(NamedTuple):
    status: int
    body: bytes


@functools.cache
def _adapter(type_: Any) -> TypeAdapter[Any]:
    return TypeAdapter(type_)


def _decode(type_: Any, raw: bytes) -> Any:
    """Validate an answer; spans in it come from the store, which validated them when they were added."""
    return _adapter(type_).validate_json(raw, context=STORED_SPAN_CONTEXT)


def _encode(payload: Any) -> bytes:
    try:
        return pydantic_core.to_json(payload)
    except pydantic_core.PydanticSerializationError as exc:
        raise InvalidRequestError(
            f"Cannot send this call to the HTTP store: an argument is not JSON-serializable ({exc}). "
            "Use JSON-friendly values (dicts, lists, str, numbers, pydantic models) for inputs and metadata."
        ) from None


def _segment(value: object, what: str) -> str:
    """`value` quoted as one URL path segment (dots too, so '.' and '..' stay ids)."""
    if not isinstance(value, str):
        raise InvalidRequestError(f"{what} must be a string, got {type(value).__name__} {value!r}.")
    return quote(value, safe="").replace(".", "%2E")


class LightningStoreClient(LightningStore):
    """A `LightningStore` that forwards every call to a store server over HTTP.

    Args:
        url: Base URL of the server, e.g. ``http://127.0.0.1:4747`` (a path prefix is kept).
        token: Bearer token; None falls back to the ``AGL_STORE_TOKEN`` environment variable.
        timeout: Seconds one request may take (a long poll gets its poll time on top).
        retries: Most retries of one call after connection errors and 502/503/504.
        retry_timeout: Most seconds spent retrying one call.
        backoff: ``(first, max)`` retry delay in seconds; each retry doubles it, with jitter.
        max_poll_seconds: Longest single ``wait_for_rollouts`` poll requested from the server.
        connection_limit: Most simultaneous connections per event loop.
        ca_bundle: PEM file of CAs to trust for ``https://`` (default ``$AGL_STORE_CA_BUNDLE``, else the
            system's).
        client_cert / client_key: PEM client certificate (and key, if not in the same file) for servers
            that require mutual TLS (default ``$AGL_STORE_CLIENT_CERT`` / ``$AGL_STORE_CLIENT_KEY``).
        proxy: Forward proxy URL ``http://[user:pass@]host:port`` (``""``: none); default from
            ``HTTP_PROXY`` / ``HTTPS_PROXY`` / ``NO_PROXY``. Loopback servers are always reached directly.
        trust_env: Read the proxy and TLS file settings from the environment.
        cache_span_pages: Accepted and ignored (the client keeps no span pages any more).
        server_address, retry_delays, health_retry_delays, request_timeout, connection_timeout: Agent
            Lightning 0.3's arguments (``server_address`` = ``url``; ``retry_delays`` sets ``retries`` and
            ``backoff``; ``request_timeout`` = ``timeout``; the other two are accepted and unused).

    Only the configuration is pickled; an unpickled client opens its own connections.
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        token: str | None = None,
        timeout: float = 30.0,
        retries: int = 12,
        retry_timeout: float = 60.0,
        backoff: tuple[float, float] = (0.05, 2.0),
        max_poll_seconds: float = 30.0,
        connection_limit: int = 100,
        ca_bundle: str | None = None,
        client_cert: str | None = None,
        client_key: str | None = None,
        proxy: str | None = None,
        trust_env: bool = True,
        cache_span_pages: bool = True,
        server_address: str | None = None,
        retry_delays: Sequence[float] | None = None,
        health_retry_delays: Sequence[float] | None = None,
        request_timeout: float | None = None,
        connection_timeout: float | None = None,
    ) -> None:
        super().__init__(scan_debounce_seconds=0)
        # Agent Lightning 0.3's arguments (see agl_core._compat.store_client_options)
        url, legacy = store_client_options(url, server_address, retry_delays, request_timeout)
        timeout, retries, backoff = (
            legacy.get("timeout", timeout),
            legacy.get("retries", retries),
            legacy.get("backoff", backoff),
        )
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise InvalidRequestError(f"LightningStoreClient needs an http:// or https:// URL, got {url!r}.")
        if timeout <= 0 or retry_timeout < 0 or retries < 0 or max_poll_seconds <= 0:
            raise InvalidRequestError(
                "timeout and max_poll_seconds must be > 0 and retries, retry_timeout >= 0; got "
                f"timeout={timeout}, retries={retries}, retry_timeout={retry_timeout}, "
                f"max_poll_seconds={max_poll_seconds}."
            )
        self.url = url.rstrip("/")
        self.token = token if token is not None else os.environ.get("AGL_STORE_TOKEN") or None
        self.timeout = float(timeout)
        self.retries = int(retries)
        self.retry_timeout = float(retry_timeout)
        self.backoff = (float(backoff[0]), float(backoff[1]))
        self.max_poll_seconds = float(max_poll_seconds)
        self.connection_limit = int(connection_limit)
        parts = urlsplit(self.url)
        if not parts.hostname:
            raise InvalidRequestError(f"LightningStoreClient URL {url!r} has no host.")
        self._base = parts.path.rstrip("/")
        self._origin = f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}"
        # TLS files: arguments, else AGL_STORE_CA_BUNDLE / AGL_STORE_CLIENT_CERT / AGL_STORE_CLIENT_KEY
        self.ca_bundle = ca_bundle or (os.environ.get(CA_BUNDLE_ENV) if trust_env else None) or None
        self.client_cert = client_cert or (os.environ.get(CLIENT_CERT_ENV) if trust_env else None) or None
        self.client_key = client_key or (os.environ.get(CLIENT_KEY_ENV) if trust_env else None) or None
        self.proxy, self.trust_env = proxy, bool(trust_env)
        self.cache_span_pages = bool(cache_span_pages)
        try:
            self._ssl: ssl.SSLContext | bool = (
                make_ssl_context(self.ca_bundle, self.client_cert, self.client_key)
                if parts.scheme == "https"
                else True
            )
            self._proxy_url = _check_proxy_url(proxy) if proxy and not _is_loopback(parts.hostname) else None
        except ValueError as exc:
            raise InvalidRequestError(f"LightningStoreClient({url!r}): {exc}") from exc
        # aiohttp reads HTTP(S)_PROXY / NO_PROXY itself; loopback servers and an explicit proxy skip that
        self._env_proxy = self.trust_env and proxy is None and not _is_loopback(parts.hostname)
        self._headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.token:
            self._headers["Authorization"] = f"Bearer {self.token}"
        self._sessions: dict[asyncio.AbstractEventLoop, aiohttp.ClientSession] = {}
        self._lock = threading.Lock()

    # ------------------------------------------------------------------------------ construction

    @classmethod
    def from_uri(cls, uri: str, **kwargs: Any) -> LightningStoreClient:
        """Open ``http://host:port`` (or ``https://...``); keyword arguments go to the constructor."""
        return cls(uri, **kwargs)

    def __getstate__(self) -> dict[str, Any]:
        return {"url": self.url, **{name: getattr(self, name) for name in _PICKLED}}

    def __setstate__(self, state: dict[str, Any]) -> None:
        url = state.pop("url")
        self.__init__(url, **state)  # type: ignore[misc]

    def __repr__(self) -> str:
        return f"LightningStoreClient({self.url!r})"

    @property
    def capabilities(self) -> LightningStoreCapabilities:
        """Everything: safe from threads and tasks, one shared copy (the server), OTLP accepted."""
        return LightningStoreCapabilities(thread_safe=True, async_safe=True, zero_copy=True, otlp_traces=True)

    def otlp_traces_endpoint(self) -> str:
        """``{url}/v1/traces``: point an OTLP/HTTP span exporter here."""
        return self.url + OTLP_TRACES_PATH

    @property
    def server_address(self) -> str:
        """Agent Lightning 0.3's name of the store API's base URL, ``{url}/v1/agl``."""
        return self.url + API_PREFIX

    @property
    def server_address_root(self) -> str:
        """Agent Lightning 0.3's name of `url` (the server's root, no path)."""
        return self.url

    # ------------------------------------------------------------------------------ transport

    async def close(self) -> None:
        """Close the connections of every event loop this client was used on. Idempotent."""
        with self._lock:
            sessions, self._sessions = self._sessions, {}
        current = asyncio.get_running_loop()
        for loop, session in sessions.items():
            if loop is current or loop.is_closed():
                await session.close()  # a closed loop's connections are gone with it
            else:
                with contextlib.suppress(RuntimeError):  # that loop closed meanwhile
                    asyncio.run_coroutine_threadsafe(session.close(), loop)

    async def _session(self) -> aiohttp.ClientSession:
        """This event loop's session (made on first use; sessions of closed loops are dropped)."""
        loop = asyncio.get_running_loop()
        session = self._sessions.get(loop)
        if session is not None:
            return session
        with self._lock:
            stale = [lp for lp in self._sessions if lp.is_closed()]
            dropped = [self._sessions.pop(lp) for lp in stale]
            session = self._sessions[loop] = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self.connection_limit, ssl=self._ssl),
                trust_env=self._env_proxy,
                cookie_jar=aiohttp.DummyCookieJar(),
                headers=self._headers,
            )
        for old in dropped:
            await old.close()
        return session

    def _delay(self, attempt: int, deadline: float) -> float:
        first, cap = self.backoff
        step: float = min(cap, first * (2 ** (attempt - 1)))
        delay = step / 2 + random.uniform(0, step / 2)
        return max(0.0, min(delay, deadline - time.monotonic()))

    async def _send(
        self, method: str, url: yarl.URL, body: bytes | None, headers: dict[str, str], wait: float
    ) -> _Answer:
        session = await self._session()
        async with session.request(
            method,
            url,
            data=body,
            headers=headers,
            proxy=self._proxy_url,
            timeout=aiohttp.ClientTimeout(total=wait),
            allow_redirects=False,
        ) as response:
            return _Answer(response.status, await response.read())

    async def _call(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        *,
        params: dict[str, str] | None = None,
        mutating: bool = False,
        timeout: float | None = None,
        tries: list[int] | None = None,
    ) -> _Answer:
        """Send one request (retried as the class describes); a 2xx answer, else a typed error.

        `tries`, when given, receives the number of tries it took (in ``tries[0]``).
        """
        target = self._base + path
        if params:
            target += "?" + urlencode(params)
        url = yarl.URL(self._origin + target, encoded=True)
        headers = {"Idempotency-Key": os.urandom(16).hex()} if mutating else {}
        wait = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + self.retry_timeout
        attempt = 0
        server_faults = 0
        while True:
            transport_error: Exception | None = None
            try:
                status, raw = await self._send(method, url, body, headers, wait)
            except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
                transport_error = exc
                status, raw = 0, b""
            if transport_error is None:
                if status < 400:
                    if tries is not None:
                        tries[0] = attempt + 1
                    return _Answer(status, raw)
                if status == 500:
                    server_faults += 1
                if (
                    status not in _RETRYABLE_STATUSES and status != 500
                ) or server_faults > _SERVER_FAULT_RETRIES:
                    raise exception_from_payload(status, _json_or_none(raw), self.url + target)
            attempt += 1
            if attempt > self.retries or time.monotonic() >= deadline:
                if transport_error is None:
                    error = exception_from_payload(status, _json_or_none(raw), self.url + target)
                    raise StoreUnavailableError(
                        f"The store at {self.url} kept answering HTTP {status} to {method} {target} "
                        f"({error}) "
                        f"after {attempt} tries."
                    ) from error
                reason = str(transport_error) or type(transport_error).__name__
                raise StoreUnavailableError(
                    f"Cannot reach the store at {self.url} ({method} {target}) after {attempt} tries: "
                    f"{reason}. Is `agl store serve` running there?"
                ) from transport_error
            delay = self._delay(attempt, deadline)
            logger.debug(
                "Retrying %s %s in %.2fs (attempt %d): %s",
                method,
                target,
                delay,
                attempt,
                transport_error or f"HTTP {status}",
            )
            await asyncio.sleep(delay)

    async def _request(
        self,
        name: str,
        payload: Any = None,
        *,
        params: dict[str, str] | None = None,
        timeout: float | None = None,
        tries: list[int] | None = None,
        **path: str,
    ) -> Any:
        """Call the route `name` of `routes.ROUTES` and answer its decoded response type.

        `payload` is the JSON body (bytes are sent as they are), `params` the query string, `path` the
        route's path parameters (each quoted as one segment). The route says the method, whether the
        request carries an ``Idempotency-Key`` (``mutating``) and what the answer is.
        """
        route = route_by_name(name)
        target = (
            route.path.format(**{key: _segment(value, key) for key, value in path.items()})
            if path
            else route.path
        )
        body = None if route.method == "GET" else payload if isinstance(payload, bytes) else _encode(payload)
        answer = await self._call(
            route.method, target, body, params=params, mutating=route.mutating, timeout=timeout, tries=tries
        )
        return _decode(route.response, answer.body)

    # ------------------------------------------------------------------------------ statistics

    async def statistics(self) -> LightningStoreStatistics:
        """The server's store statistics."""
        return await self._request("statistics")  # type: ignore[no-any-return]

    # ------------------------------------------------------------------------------ rollouts

    async def _start_rollout(self, request: q.StartRollout) -> AttemptedRollout:
        """``POST /v1/agl/rollouts`` with the checked rollout."""
        payload = {**_rollout_payload(request.rollout), "worker_id": request.worker_id}
        return await self._request("start_rollout", payload)  # type: ignore[no-any-return]

    async def _enqueue_rollouts(self, request: q.EnqueueRollouts) -> Sequence[Rollout]:
        """``POST /v1/agl/queues/rollouts/enqueue`` with the checked rollouts (one request)."""
        items = [_rollout_payload(r) for r in request.rollouts]
        result = await self._request("enqueue_rollouts", {"rollouts": items})
        if len(result) != len(items):
            raise StoreServerError(
                f"The store at {self.url} answered {len(result)} rollouts for {len(items)} enqueued."
            )
        return result  # type: ignore[no-any-return]

    async def _dequeue_rollouts(self, request: q.DequeueRollouts) -> Sequence[AttemptedRollout]:
        """``POST /v1/agl/queues/rollouts/dequeue``."""
        payload = {"limit": request.limit, "worker_id": request.worker_id}
        return await self._request("dequeue_rollouts", payload)  # type: ignore[no-any-return]

    async def _start_attempt(self, request: q.StartAttempt) -> AttemptedRollout:
        """``POST /v1/agl/rollouts/{id}/attempts``."""
        rollout_id = request.rollout_id
        if rollout_id == "":
            raise RolloutNotFoundError(rollout_id)
        payload = {"worker_id": request.worker_id}
        return await self._request("start_attempt", payload, rollout_id=rollout_id)  # type: ignore[no-any-return]

    async def _query_rollouts(
        self, query: q.RolloutQuery, where: NormalizedFilter
    ) -> PaginatedResult[Rollout | AttemptedRollout]:
        """``POST /v1/agl/rollouts/search`` with the checked query."""
        payload = {**query.keywords(), "status_in": _listify(query.status_in)}
        payload["rollout_id_in"] = _listify(query.rollout_id_in)
        if query.mode_in is not None:
            payload["mode_in"] = _listify(query.mode_in)
        return await self._request("query_rollouts", payload)  # type: ignore[no-any-return]

    async def _query_attempts(self, query: q.AttemptQuery) -> PaginatedResult[Attempt]:
        """``POST /v1/agl/rollouts/{id}/attempts/search`` with the checked query."""
        rollout_id, limit, offset = query.rollout_id, query.limit, query.offset
        if rollout_id == "":
            return PaginatedResult(items=[], limit=limit, offset=offset, total=0)
        payload = {"sort_by": query.sort_by, "sort_order": query.sort_order, "limit": limit, "offset": offset}
        return await self._request("query_attempts", payload, rollout_id=rollout_id)  # type: ignore[no-any-return]

    async def _get_rollout(self, rollout_id: str) -> Rollout | AttemptedRollout | None:
        if rollout_id == "":
            return None
        return await self._request("get_rollout", rollout_id=rollout_id)  # type: ignore[no-any-return]

    async def _get_latest_attempt(self, rollout_id: str) -> Attempt | None:
        if rollout_id == "":
            return None
        return await self._request("latest_attempt", rollout_id=rollout_id)  # type: ignore[no-any-return]

    async def _apply_rollout_update(self, update: q.RolloutUpdate) -> Rollout:
        """``POST /v1/agl/rollouts/{rollout_id}`` with only the fields that are not `UNSET`."""
        if update.rollout_id == "":
            raise RolloutNotFoundError(update.rollout_id)
        return await self._request("update_rollout", update.changes(), rollout_id=update.rollout_id)  # type: ignore[no-any-return]

    async def _apply_attempt_update(self, update: q.AttemptUpdate) -> Attempt:
        """``POST /v1/agl/rollouts/{rollout_id}/attempts/{attempt_id}`` with the fields not `UNSET`."""
        rollout_id, attempt_id = update.rollout_id, update.attempt_id
        if rollout_id == "":
            raise RolloutNotFoundError(rollout_id)
        if attempt_id == "":
            raise AttemptNotFoundError(rollout_id, attempt_id)
        return await self._request(  # type: ignore[no-any-return]
            "update_attempt", update.changes(), rollout_id=rollout_id, attempt_id=attempt_id
        )

    async def wait_for_rollouts(
        self, *, rollout_ids: list[str], timeout: float | None = None
    ) -> list[Rollout]:
        """See `LightningStore.wait_for_rollouts`; any timeout works (server-side long polls in a loop)."""
        ids = list(rollout_ids)
        if not ids:
            return []
        if timeout is not None and timeout <= 0:
            return await self._poll(ids, 0.0)
        deadline = None if timeout is None else time.monotonic() + timeout
        finished: dict[str, Rollout] = {}
        pending = list(dict.fromkeys(ids))
        first = True
        while pending:
            remaining = None if deadline is None else deadline - time.monotonic()
            poll = (
                self.max_poll_seconds
                if remaining is None
                else max(0.0, min(remaining, self.max_poll_seconds))
            )
            got = await self._poll(pending, poll)
            if first and len(got) == len(ids):
                return got
            first = False
            finished.update((r.rollout_id, r) for r in got)
            pending = [i for i in pending if i not in finished]
            if not pending or (deadline is not None and time.monotonic() >= deadline):
                break
            # Ids the store does not know are omitted, never waited for: drop them.
            known = await self.query_rollouts(rollout_id_in=pending)
            for rollout in known:
                if rollout.status in ("failed", "succeeded", "cancelled"):
                    finished[rollout.rollout_id] = rollout
            known_ids = {r.rollout_id for r in known}
            pending = [i for i in pending if i in known_ids and i not in finished]
        return [finished[i] for i in ids if i in finished]

    async def _poll(self, ids: list[str], wait: float) -> list[Rollout]:
        return await self._request(  # type: ignore[no-any-return]
            "wait_rollouts", {"rollout_ids": ids, "timeout": wait}, timeout=wait + self.timeout
        )

    # ------------------------------------------------------------------------------ spans

    async def _insert_spans(self, request: q.AddSpans) -> Sequence[Span]:
        """``POST /v1/agl/spans`` for one span, ``/spans/batch`` for several (the server answers which
        spans were new)."""
        batch = list(request.spans)
        if len(batch) == 1:
            stored = await self._add_one_span(batch[0])
            return [] if stored is None else [stored]
        body = b'{"spans":' + _adapter(list[Span]).dump_json(batch) + b"}"
        answer = await self._request("add_spans", body)
        inserted = [batch[i] for i in answer.inserted]
        if answer.sequence_ids is None:  # an older server
            return inserted
        return [
            span if span.sequence_id == seq else logic.number_span(span, seq)
            for span, seq in zip(inserted, answer.sequence_ids, strict=True)
        ]

    async def _add_one_span(self, span: Span) -> Span | None:
        tries = [0]
        stored: Span | None = await self._request("add_span", span, tries=tries)
        if stored is None and tries[0] > 1:
            # Retried: the first try may have been written before the connection (or the server)
            # died, so "duplicate" can mean "yours": answer the stored span when it is this one.
            page = await self.query_spans(span.rollout_id, span.attempt_id, span_id=span.span_id, limit=1)
            for found in page.items:  # a span sent with id 0 was numbered by the store
                mine = span if span.sequence_id else logic.number_span(span, found.sequence_id)
                if found.model_dump() == mine.model_dump():
                    return found
        return stored

    async def _issue_sequence_ids(self, request: q.SpanSequenceIds) -> Sequence[int]:
        """``POST /v1/agl/spans/sequence-ids``."""
        pairs = [list(pair) for pair in request.pairs]
        answer = await self._request("sequence_ids", {"rollout_attempt_ids": pairs})
        return list(answer.sequence_ids)

    async def _query_spans(self, query: q.SpanQuery, where: NormalizedFilter) -> PaginatedResult[Span]:
        """``POST /v1/agl/spans/search`` with the checked query."""
        return await self._request("query_spans", query)  # type: ignore[no-any-return]

    # ------------------------------------------------------------------------------ resources

    async def _add_resources(self, resources: NamedResources) -> ResourcesUpdate:
        return await self._request("add_resources", _resources_payload(resources))  # type: ignore[no-any-return]

    async def _update_resources(self, request: q.UpdateResources) -> ResourcesUpdate:
        return await self._request(  # type: ignore[no-any-return]
            "update_resources", _resources_payload(request.resources), resources_id=request.resources_id
        )

    async def _get_resources(self, resources_id: str) -> ResourcesUpdate | None:
        if resources_id == "":
            return None
        return await self._request("get_resources", resources_id=resources_id)  # type: ignore[no-any-return]

    async def _get_latest_resources(self) -> ResourcesUpdate | None:
        return await self._request("latest_resources")  # type: ignore[no-any-return]

    async def _query_resources(
        self, query: q.ResourcesQuery, where: NormalizedFilter
    ) -> PaginatedResult[ResourcesUpdate]:
        params = _params(**query.keywords())
        return await self._request("query_resources", params=params)  # type: ignore[no-any-return]

    # ------------------------------------------------------------------------------ workers

    async def _query_workers(self, query: q.WorkerQuery, where: NormalizedFilter) -> PaginatedResult[Worker]:
        """``POST /v1/agl/workers/search`` with the checked query."""
        payload = {**query.keywords(), "status_in": _listify(query.status_in)}
        return await self._request("query_workers", payload)  # type: ignore[no-any-return]

    async def _get_worker(self, worker_id: str) -> Worker | None:
        if worker_id == "":
            return None
        return await self._request("get_worker", worker_id=worker_id)  # type: ignore[no-any-return]

    async def _update_worker(self, request: q.WorkerHeartbeat) -> Worker:
        stats = request.heartbeat_stats
        payload = {} if stats is UNSET else {"heartbeat_stats": stats}
        return await self._request("update_worker", payload, worker_id=request.worker_id)  # type: ignore[no-any-return]


# ---------------------------------------------------------------------------------- helpers


def _rollout_payload(r: EnqueueRolloutRequest) -> dict[str, Any]:
    """A checked rollout's JSON fields, after the JSON-value checks (depth, NaN) the other stores apply."""
    logic.check_json_value("input", r.input)
    logic.check_json_value("metadata", r.metadata)
    return {
        "input": r.input,
        "mode": r.mode,
        "resources_id": r.resources_id,
        "config": r.config,
        "metadata": r.metadata,
    }


def _json_or_none(raw: bytes) -> Any:
    try:
        return pydantic_core.from_json(raw) if raw else None
    except ValueError:
        return None


def _listify(values: Any) -> Any:
    """Sequences (tuples, sets) as lists; strings and other values unchanged (the server rejects them)."""
    if values is None or isinstance(values, (str, bytes, dict)):
        return values
    try:
        return list(values)
    except TypeError:
        return values


def _params(**values: Any) -> dict[str, str]:
    return {key: str(value) for key, value in values.items() if value is not None}


def _resources_payload(resources: Any) -> Any:
    if not isinstance(resources, dict):
        raise InvalidRequestError(
            f"resources must be a dict of name -> resource (NamedResources), got {type(resources).__name__}."
        )
    return resources


def make_ssl_context(
    ca_bundle: str | None = None, client_cert: str | None = None, client_key: str | None = None
) -> ssl.SSLContext:
    """A verifying TLS client context trusting ``ca_bundle`` (else the system CAs), with ``client_cert``.

    Raises:
        ValueError: a file is missing or not a usable PEM certificate or key.
    """
    if client_key and not client_cert:
        raise ValueError("client_key needs client_cert: pass the client certificate too.")
    for label, path in (("ca_bundle", ca_bundle), ("client_cert", client_cert), ("client_key", client_key)):
        if path and not os.path.isfile(path):
            raise ValueError(f"{label} {path!r} is not a file: give the path of a PEM file.")
    try:
        context = ssl.create_default_context(cafile=ca_bundle or None)
        if client_cert:
            context.load_cert_chain(client_cert, client_key or None)
    except ssl.SSLError as exc:
        raise ValueError(
            f"Cannot use the TLS files (ca_bundle={ca_bundle!r}, client_cert={client_cert!r}, "
            f"client_key={client_key!r}): {exc.reason or exc}. They must be PEM files; the key must match "
            "the certificate."
        ) from exc
    return context


def _is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _check_proxy_url(url: str) -> str:
    """`url` when it names a plain-HTTP forward proxy (credentials in it are sent as Basic auth)."""
    parts = urlsplit(url if "://" in url else f"http://{url}")
    if parts.scheme != "http" or not parts.hostname:
        raise ValueError(
            f"Proxy URL {url!r} is not usable: give http://host:port (the proxy itself is spoken to in "
            "plain HTTP; https:// stores go through it in a CONNECT tunnel)."
        )
    return parts.geturl()
