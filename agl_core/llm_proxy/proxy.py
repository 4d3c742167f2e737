"""`LLMProxy`: the OpenAI-compatible gateway between agents and model servers, as a Python object."""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any

import aiohttp
from aiohttp import web

from agl_core._moved03 import llm_proxy_03_arguments
from agl_core.llm_proxy.backends import (
    BackendsSpec,
    BackendTable,
    BalancingPolicy,
    ModelConfig,
    build_backend_table,
    model_list_to_backends,
)
from agl_core.llm_proxy.forward import ForwardContext
from agl_core.llm_proxy.guard import ProxyGuard
from agl_core.llm_proxy.recorder import SequenceAllocator, SpanRecorder
from agl_core.llm_proxy.request_options import RequestOptions
from agl_core.llm_proxy.server import ProxyServer
from agl_core.llm_proxy.stats import ProxyStats
from agl_core.types import LLM, ProxyLLM
from agl_core.utils.loop_thread import LoopThread

if TYPE_CHECKING:
    from agl_core.store.base import LightningStore

__all__ = ["LLMProxy"]

logger = logging.getLogger("agl_core.llm_proxy")

_MIB = 1024 * 1024
_THREAD_START_TIMEOUT_S = 60.0


class LLMProxy:
    """An OpenAI-compatible proxy in front of model servers that records every call of a rollout.

    Agents call ``/rollout/{rollout_id}/attempt/{attempt_id}/v1/chat/completions`` (the URL
    :meth:`ProxyLLM.get_base_url` builds) like any OpenAI endpoint; the proxy forwards the request to a
    backend of the requested model, answers with the backend's response unchanged, and writes one
    ``agl.llm_proxy.request`` span (token ids and logprobs exactly as the backend sent them) to the store
    from a background task. Requests outside a rollout path are forwarded but not recorded.

    Differences from Agent Lightning 0.3's LiteLLM proxy (on purpose): no LiteLLM; the store is optional
    (without one nothing is recorded); :meth:`update_backends` / :meth:`update_model_list` take effect
    at once without a restart; :attr:`endpoint` ends in ``/v1`` (routes are served with and without it);
    ``/health`` never probes the backends.

    Args:
        backends: Model name -> replica(s); see :mod:`agl_core.llm_proxy.backends`.
        store: Where spans go; can be set later with :meth:`set_store`.
        host: Interface to listen on.
        port: TCP port; 0 (or None, as in 0.3) picks a free one at :meth:`start`.
        token: When set, callers must send ``Authorization: Bearer <token>`` (``/health`` excepted).
        model_list: Agent Lightning 0.3 / LiteLLM ``model_list`` instead of ``backends``.
        access_host: Host name put in :attr:`endpoint`; defaults to ``host``, or this machine's address
            when listening on all interfaces.
        balancing: ``"round_robin"`` or ``"least_in_flight"`` among a model's replicas.
        request_timeout: Seconds one request (a whole stream included) may take at a backend.
        connect_timeout: Seconds to connect to a backend before trying another replica.
        max_retries: Extra tries on other replicas after connection failures.
        failure_cooldown: Seconds a replica is avoided after a connection failure.
        max_request_bytes / max_response_bytes: Body size limits (413 / 502 beyond them).
        max_connections: Pooled HTTP connections to backends, in total.
        record_batch_size: Spans per ``add_many_spans`` call.
        record_interval: Seconds a span may wait for others to share its store call (0: write at once).
        max_pending_spans: Spans queued for the store at most; beyond that they are dropped and counted.
        flush_timeout: Seconds :meth:`stop` waits for queued spans to reach the store.
        shutdown_timeout: Seconds :meth:`stop` waits for in-flight requests.
        allowed_hosts: Without a ``token``, extra ``Host`` names requests may use (IP addresses,
            ``localhost``, this machine's names, ``host`` and ``access_host`` always work); ``["*"]``
            turns this DNS-rebinding check off. With a token any name is accepted.
        allowed_origins: Browser origins allowed to call the proxy (none by default: requests with an
            ``Origin`` header are refused); ``["*"]`` allows any, without credentials.
        request_options: Hosted tools, volatile system-prompt lines and harness side calls; see
            :class:`~agl_core.llm_proxy.request_options.RequestOptions`.
        callbacks, litellm_config, num_retries, num_workers, launch_mode, launcher_args, middlewares:
            Agent Lightning 0.3's arguments, keyword-only here; see
            `agl_core._moved03.LLMPROXY_03`.
    """

    def __init__(
        self,
        backends: BackendsSpec | None = None,
        store: LightningStore | None = None,
        host: str = "127.0.0.1",
        port: int | None = 0,
        token: str | None = None,
        *,
        model_list: Sequence[ModelConfig] | None = None,
        access_host: str | None = None,
        balancing: BalancingPolicy = "round_robin",
        request_timeout: float = 600.0,
        connect_timeout: float = 10.0,
        max_retries: int = 2,
        failure_cooldown: float = 5.0,
        max_request_bytes: int = 32 * _MIB,
        max_response_bytes: int = 64 * _MIB,
        max_connections: int = 1024,
        record_batch_size: int = 256,
        record_interval: float = 0.02,
        max_pending_spans: int = 100_000,
        flush_timeout: float = 10.0,
        shutdown_timeout: float = 30.0,
        allowed_hosts: Sequence[str] = (),
        allowed_origins: Sequence[str] = (),
        request_options: RequestOptions | None = None,
        callbacks: Sequence[object] | None = None,
        litellm_config: Mapping[str, Any] | None = None,
        num_retries: int | None = None,
        num_workers: int = 1,
        launch_mode: str = "mp",
        launcher_args: object | None = None,
        middlewares: Sequence[object] | None = None,
    ) -> None:
        max_retries = llm_proxy_03_arguments(  # Agent Lightning 0.3's arguments
            max_retries,
            callbacks=callbacks,
            litellm_config=litellm_config,
            num_retries=num_retries,
            num_workers=num_workers,
            launch_mode=launch_mode,
            launcher_args=launcher_args,
            middlewares=middlewares,
        )
        port = 0 if port is None else port
        if backends is not None and model_list is not None:
            raise ValueError("Pass either backends or model_list to LLMProxy, not both.")
        if not 0 <= port <= 65535:
            raise ValueError(f"port must be between 0 and 65535, got {port}.")
        if max_retries < 0 or request_timeout <= 0 or connect_timeout <= 0:
            raise ValueError("max_retries must be >= 0 and the timeouts > 0.")
        if max_request_bytes <= 0 or max_response_bytes <= 0 or max_connections <= 0:
            raise ValueError("max_request_bytes, max_response_bytes and max_connections must be > 0.")
        spec: BackendsSpec | None = model_list_to_backends(model_list) if model_list is not None else backends
        self._balancing: BalancingPolicy = balancing
        self._table = build_backend_table(spec, balancing)
        self._store = store
        self.host = host
        self.port = port
        self._token = token
        self._access_host = access_host
        self._request_timeout = request_timeout
        self._connect_timeout = connect_timeout
        self._max_retries = max_retries
        self._failure_cooldown = failure_cooldown
        self._max_request_bytes = max_request_bytes
        self._max_response_bytes = max_response_bytes
        self._max_connections = max_connections
        self._flush_timeout = flush_timeout
        self._shutdown_timeout = shutdown_timeout
        self._guard = ProxyGuard(
            [*allowed_hosts, host, access_host or host], allowed_origins, check_host=token is None
        )
        self._request_options = request_options or RequestOptions()
        self._stats = ProxyStats()
        self._recorder = SpanRecorder(
            self.get_store,
            self._stats,
            batch_size=record_batch_size,
            max_pending=max_pending_spans,
            flush_interval=record_interval,
        )
        self._server: ProxyServer | None = None
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: LoopThread | None = None
        self._bound_port: int | None = None
        self._restart_port: int | None = None

    # ------------------------------------------------------------------ lifecycle

    def is_running(self) -> bool:
        """Whether the proxy is serving."""
        return self._runner is not None

    async def start(self) -> None:
        """Start serving on the running event loop.

        Raises:
            RuntimeError: if the proxy is already running.
            OSError: if the address cannot be bound.
        """
        if self._runner is not None:
            raise RuntimeError(f"LLMProxy is already running at {self.endpoint}; stop() it first.")
        if self._store is None:
            logger.warning(
                "LLMProxy starts without a store: requests are proxied but not recorded (set_store())."
            )
        loop = asyncio.get_running_loop()
        timeout = aiohttp.ClientTimeout(total=self._request_timeout, sock_connect=self._connect_timeout)
        connector = aiohttp.TCPConnector(limit=self._max_connections, limit_per_host=0, ttl_dns_cache=300)
        # No cookie jar: backends' cookies mean nothing to agents, and filtering cookies costs per request.
        session = aiohttp.ClientSession(
            connector=connector, timeout=timeout, cookie_jar=aiohttp.DummyCookieJar()
        )
        ctx = ForwardContext(
            session=session,
            stats=self._stats,
            max_retries=self._max_retries,
            failure_cooldown=self._failure_cooldown,
            max_response_bytes=self._max_response_bytes,
            timeout=self._request_timeout,
        )
        server = ProxyServer(
            table=self._table,
            ctx=ctx,
            get_store=self.get_store,
            token=self._token,
            max_request_bytes=self._max_request_bytes,
            recorder=self._recorder,
            allocator=SequenceAllocator(self.get_store, self._stats),
            guard=self._guard,
            options=self._request_options,
        )
        # handler_cancellation: an agent that disconnects cancels its request, which closes the backend
        # connection, so abandoned generations stop instead of running to the timeout.
        runner = web.AppRunner(
            server.build_app(),
            access_log=None,
            handle_signals=False,
            shutdown_timeout=self._shutdown_timeout,
            handler_cancellation=True,
        )
        try:
            await runner.setup()
            if runner.server is not None:
                server.answer_unreadable_requests(runner.server)
            port, self._restart_port = self._restart_port or self.port, None
            site = web.TCPSite(runner, self.host, port)
            await site.start()
        except BaseException:
            await runner.cleanup()
            await session.close()
            raise
        address = runner.addresses[0]
        self._bound_port = int(address[1])
        self._server, self._runner, self._session, self._loop = server, runner, session, loop
        self._recorder.start()
        logger.info("LLM proxy serving %s for models %s", self.endpoint, self._table.model_names())

    async def stop(self) -> None:
        """Stop serving: wait for in-flight requests, flush queued spans (bounded), close connections.

        Warns and returns if the proxy is not running.
        """
        runner = self._runner
        if runner is None:
            logger.warning("LLMProxy.stop() called but the proxy is not running.")
            return
        self._runner = None
        try:
            await runner.cleanup()
        finally:
            await self._recorder.stop(self._flush_timeout)
            if self._session is not None:
                await self._session.close()
            self._session, self._server, self._bound_port = None, None, None
            logger.info("LLM proxy stopped")

    async def restart(self) -> None:
        """Stop (if running) and start again on the same port, so agents keep their URL."""
        if self._runner is not None:
            port = self._bound_port
            await self.stop()
            self._restart_port = port
        await self.start()

    async def __aenter__(self) -> LLMProxy:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    def start_in_thread(self) -> LLMProxy:
        """Serve from a background thread with its own event loop (for synchronous callers).

        The loop is uvloop's when uvloop is installed. The store is used from that thread, so it must
        be thread-safe (``store.capabilities["thread_safe"]``).

        Raises:
            RuntimeError: if the proxy already runs, or the store is not thread-safe.
        """
        if self._thread is not None or self._runner is not None:
            raise RuntimeError("LLMProxy is already running; stop it first.")
        self._check_thread_safe(self._store)
        thread = LoopThread("agl-llm-proxy", timeout=_THREAD_START_TIMEOUT_S, prefer_uvloop=True)
        try:
            thread.start(self.start)
        except TimeoutError:
            raise RuntimeError(f"LLMProxy did not start within {_THREAD_START_TIMEOUT_S:.0f}s") from None
        self._thread = thread
        return self

    def stop_in_thread(self) -> None:
        """Stop a proxy started with :meth:`start_in_thread` and join its thread."""
        thread = self._thread
        if thread is None or self._loop is None:
            logger.warning("LLMProxy.stop_in_thread() called but the proxy is not running in a thread.")
            return
        try:
            thread.stop(self.stop, timeout=self._shutdown_timeout + self._flush_timeout + 10.0)
        finally:
            self._thread = None

    def __enter__(self) -> LLMProxy:
        return self.start_in_thread()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop_in_thread()

    # ------------------------------------------------------------------ configuration

    def update_backends(self, backends: BackendsSpec) -> None:
        """Replace the backends, effective for the next request; requests in flight finish where they are.

        Safe to call from any thread. Replicas that appear again keep their counters.

        Raises:
            BackendConfigError: if the specification is invalid (the old backends stay in place).
        """
        table = build_backend_table(backends, self._balancing, previous=self._table)
        self._apply(table)

    def update_model_list(self, model_list: Sequence[ModelConfig | Mapping[str, Any]]) -> None:
        """Replace the backends from an Agent Lightning 0.3 ``model_list``; effective at once (no restart)."""
        self.update_backends(model_list_to_backends(model_list))

    def _apply(self, table: BackendTable) -> None:
        self._table = table
        server = self._server
        if server is not None:
            server.table = table
        logger.info("LLM proxy backends updated: %s", table.model_names())

    def model_names(self) -> list[str]:
        """Model names the proxy serves (the ``"*"`` wildcard excluded)."""
        return self._table.model_names()

    def get_store(self) -> LightningStore | None:
        """The store spans are written to, or None."""
        return self._store

    def set_store(self, store: LightningStore | None) -> None:
        """Set the store spans go to (queued spans go to the new one).

        Raises:
            RuntimeError: if the proxy runs in a thread and ``store`` is not thread-safe.
        """
        if self._thread is not None:
            self._check_thread_safe(store)
        self._store = store

    @staticmethod
    def _check_thread_safe(store: LightningStore | None) -> None:
        if store is not None and not store.capabilities.get("thread_safe", False):
            raise RuntimeError(
                f"{type(store).__name__} is not thread-safe, but a proxy serving from its own thread uses it "
                "from that thread. Start the proxy with `await proxy.start()` on the store's event loop, or "
                "use a thread-safe store (InMemoryLightningStore, SqliteLightningStore)."
            )

    # ------------------------------------------------------------------ addresses and resources

    @property
    def endpoint(self) -> str:
        """Base URL agents use, ending in ``/v1`` (``http://host:port/v1``).

        Raises:
            RuntimeError: when the port is 0 and the proxy has not started yet.
        """
        port = self._bound_port or self.port
        if not port:
            raise RuntimeError(
                "The proxy picks its port when it starts; call start() before reading endpoint."
            )
        host = self._access_host or self.host
        if host in ("", "0.0.0.0", "::"):
            host = _local_address()
        if ":" in host and not host.startswith("["):
            host = f"[{host}]"
        return f"http://{host}:{port}/v1"

    def as_resource(
        self,
        rollout_id: str | None = None,
        attempt_id: str | None = None,
        model: str | None = None,
        sampling_parameters: Mapping[str, Any] | None = None,
    ) -> LLM:
        """The proxy as a resource: a :class:`ProxyLLM` without ids, a routed :class:`LLM` with both.

        ``model`` defaults to the only configured model name (or the name every entry shares). The
        resource's ``api_key`` is the proxy's token (None without one).

        Raises:
            ValueError: if only one id is given, no model is configured, or several are and ``model`` is
                None.
            RuntimeError: as :attr:`endpoint`.
        """
        if (rollout_id is None) != (attempt_id is None):
            raise ValueError("Give both rollout_id and attempt_id to as_resource(), or neither.")
        if model is None:
            names = self._table.model_names()
            if not names:
                raise ValueError(
                    "No models found in model_list. Please specify the model. (The proxy's backends have "
                    "none; configure one, or pass model= to as_resource().)"
                )
            if len(names) > 1:
                raise ValueError(f"The proxy serves several models {names}; pass model= to as_resource().")
            model = names[0]
        resource = ProxyLLM(
            endpoint=self.endpoint,
            model=model,
            api_key=self._token,
            sampling_parameters=dict(sampling_parameters or {}),
        )
        if rollout_id is None or attempt_id is None:
            return resource
        return LLM(
            endpoint=resource.get_base_url(rollout_id, attempt_id),
            model=model,
            api_key=self._token,
            sampling_parameters=dict(resource.sampling_parameters),
        )

    # ------------------------------------------------------------------ observability

    def stats(self) -> dict[str, Any]:
        """Request and recording counters (see :class:`ProxyStats`), pending spans, per-backend counters."""
        out = self._stats.as_dict()
        out["spans_pending"] = self._recorder.pending
        out["backends"] = {pool: [r.snapshot() for r in p.replicas] for pool, p in self._table.pools.items()}
        return out

    async def flush(self, timeout: float | None = None) -> bool:
        """Wait until every span queued so far reached the store (or failed, counted); False on timeout.

        Callable from any event loop, including one other than the proxy's (thread mode).
        """
        loop = self._loop
        if loop is None or self._runner is None:
            return True
        if asyncio.get_running_loop() is loop:
            return await self._recorder.flush(timeout)
        future = asyncio.run_coroutine_threadsafe(self._recorder.flush(timeout), loop)
        return await asyncio.wrap_future(future)

    def __repr__(self) -> str:
        where = self.endpoint if self._bound_port else f"{self.host}:{self.port}"
        return f"LLMProxy({where}, models={self._table.model_names()}, running={self.is_running()})"


def _local_address() -> str:
    """This machine's address as other machines would reach it (127.0.0.1 if it cannot be found)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect(("10.255.255.255", 1))  # no packet is sent for UDP connect
            return str(probe.getsockname()[0])
    except OSError:
        return "127.0.0.1"
