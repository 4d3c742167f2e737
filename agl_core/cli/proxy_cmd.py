"""``agl proxy serve``: run the LLM proxy in front of OpenAI-compatible model servers."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

import click

from agl_core.cli import serving

if TYPE_CHECKING:
    from agl_core.llm_proxy.backends import HttpBackend

__all__ = ["parse_backend_options", "proxy_group"]


@click.group(name="proxy")
def proxy_group() -> None:
    """Run the LLM proxy that records exact token ids per rollout."""


_BACKEND_SETTINGS = ("model", "max_tokens")


def _backend_settings(value: str) -> tuple[str, dict[str, Any]]:
    """Split ``URL[,model=NAME][,max_tokens=N]`` into the URL and its settings."""
    url, settings = value, dict[str, Any]()
    while True:
        head, sep, tail = url.rpartition(",")
        key, eq, setting = tail.partition("=")
        if not sep or not eq or key.strip() not in _BACKEND_SETTINGS:
            return url, settings
        key = key.strip()
        if key == "max_tokens":
            try:
                settings[key] = int(setting)
            except ValueError:
                raise click.BadParameter(
                    f"max_tokens={setting!r} is not an integer.", param_hint="--backend"
                ) from None
        elif setting.strip():
            settings[key] = setting.strip()
        url = head


def parse_backend_options(
    values: tuple[str, ...] | list[str],
    *,
    api_key: str | None = None,
    token_ids: bool = True,
    streaming: bool = True,
) -> dict[str, list[HttpBackend]]:
    """Turn ``MODEL=URL[,model=NAME][,max_tokens=N]`` options into a backend specification.

    ``model=NAME`` sends NAME upstream instead of the name the agent asked for (an alias);
    ``max_tokens=N`` caps the tokens one request may ask for. Replicas are grouped by model.

    Raises:
        click.BadParameter: for a value without ``=``, with an empty model name or URL, or a bad setting.
    """
    from agl_core.llm_proxy.backends import HttpBackend
    from agl_core.llm_proxy.errors import BackendConfigError

    spec: dict[str, list[HttpBackend]] = {}
    for value in values:
        model, sep, rest = value.partition("=")
        url, settings = _backend_settings(rest)
        if not sep or not model.strip() or not url.strip():
            raise click.BadParameter(
                f"{value!r} is not MODEL=URL; for example --backend my-model=http://127.0.0.1:8000/v1 "
                "(use '*' as MODEL to serve every model name; add ,model=NAME to send another name "
                "upstream and ,max_tokens=N to cap generation).",
                param_hint="--backend",
            )
        try:
            backend = HttpBackend(
                url=url.strip(),
                api_key=api_key,
                return_token_ids=token_ids,
                logprobs=token_ids,
                streaming=streaming,
                **settings,
            )
        except BackendConfigError as exc:
            raise click.BadParameter(str(exc), param_hint="--backend") from None
        spec.setdefault(model.strip(), []).append(backend)
    return spec


@proxy_group.command(name="serve")
@click.option(
    "--backend",
    "backends",
    multiple=True,
    required=True,
    metavar="MODEL=URL[,model=NAME][,max_tokens=N]",
    help="A model server for MODEL (repeat for more replicas or models; MODEL '*' matches any name); "
    "model=NAME sends NAME upstream instead (an alias), max_tokens=N caps what one request may ask for.",
)
@click.option(
    "--store",
    "store_uri",
    default=None,
    help="Store to record spans in (memory:, sqlite:///x.db, http://...).",
)
@serving.address_options(4000)
@click.option(
    "--token",
    envvar="AGL_PROXY_TOKEN",
    default=None,
    help="Require 'Authorization: Bearer TOKEN' from agents (default: $AGL_PROXY_TOKEN).",
)
@click.option(
    "--api-key-env",
    default=None,
    metavar="VAR",
    help="Environment variable holding the API key for the backends (keys never go on the command line).",
)
@click.option(
    "--no-token-ids",
    is_flag=True,
    help="Do not ask backends for return_token_ids/logprobs (for servers that reject unknown fields).",
)
@click.option(
    "--no-streaming",
    is_flag=True,
    help="Backends cannot stream: answer stream requests with synthesized SSE.",
)
@click.option(
    "--balancing",
    default="round_robin",
    show_default=True,
    type=click.Choice(["round_robin", "least_in_flight"]),
)
@click.option(
    "--timeout",
    default=600.0,
    show_default=True,
    type=click.FloatRange(min=0.001),
    help="Seconds per request.",
)
@click.option(
    "--max-retries", default=2, show_default=True, type=click.IntRange(min=0), help="Failover tries."
)
@click.option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    metavar="NAME",
    help="Without --token, a Host name agents may call the proxy by besides IP addresses, localhost and "
    "this machine's names (DNS-rebinding guard; repeatable; '*' accepts any). With --token any name works.",
)
@click.option(
    "--allowed-origin",
    "allowed_origins",
    multiple=True,
    metavar="ORIGIN",
    help="A browser origin (scheme://host[:port]) allowed to call the proxy (repeatable; '*' allows any, "
    "without credentials). Default: requests carrying an Origin header are refused.",
)
@click.option(
    "--refuse-hosted-tools",
    is_flag=True,
    help="Answer 400 to Responses requests declaring hosted tools (web_search, ...) instead of dropping "
    "them (dropped tools are listed on the span; the routes need agl-proxy-translate).",
)
@click.option(
    "--strip-volatile-lines",
    is_flag=True,
    help="Remove system-prompt lines known to change per session (Claude Code's billing header) so "
    "prompts stay prefix-cacheable.",
)
@click.option(
    "--strip-system-line",
    "strip_lines",
    multiple=True,
    metavar="REGEX",
    help="Also remove system-prompt lines matching REGEX (whole lines; repeatable).",
)
@click.option(
    "--side-call-model",
    "side_call_models",
    multiple=True,
    metavar="PATTERN",
    help="Requests for a model matching PATTERN (shell-style, e.g. '*haiku*') are harness side calls: "
    "recorded with agl.llm.side_call (repeatable).",
)
@click.option("--drop-side-calls", is_flag=True, help="Forward side calls without recording them at all.")
@serving.log_level_option
def serve(
    backends: tuple[str, ...],
    store_uri: str | None,
    host: str,
    port: int,
    token: str | None,
    api_key_env: str | None,
    no_token_ids: bool,
    no_streaming: bool,
    balancing: str,
    timeout: float,
    max_retries: int,
    allowed_hosts: tuple[str, ...],
    allowed_origins: tuple[str, ...],
    refuse_hosted_tools: bool,
    strip_volatile_lines: bool,
    strip_lines: tuple[str, ...],
    side_call_models: tuple[str, ...],
    drop_side_calls: bool,
) -> None:
    """Serve the LLM proxy until SIGINT/SIGTERM, then finish in-flight requests and flush spans."""
    if store_uri:
        from agl_core.store.uri import check_store_uri

        check_store_uri(store_uri)
    api_key = None
    if api_key_env:
        api_key = os.environ.get(api_key_env)
        if not api_key:
            raise click.BadParameter(
                f"environment variable {api_key_env} is not set", param_hint="--api-key-env"
            )
    spec = parse_backend_options(
        backends, api_key=api_key, token_ids=not no_token_ids, streaming=not no_streaming
    )
    serving.warn_if_open(host, token, "use the models")
    from agl_core.llm_proxy.request_options import KNOWN_VOLATILE_LINES, RequestOptions

    try:
        request_options = RequestOptions(
            refuse_hosted_tools=refuse_hosted_tools,
            strip_system_lines=[
                *(KNOWN_VOLATILE_LINES.values() if strip_volatile_lines else ()),
                *strip_lines,
            ],
            side_call_models=list(side_call_models),
            side_calls="drop" if drop_side_calls else "mark",
        )
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--strip-system-line") from None
    options: dict[str, Any] = {
        "request_options": request_options,
        "host": host,
        "port": port,
        "token": token or None,
        "balancing": balancing,
        "request_timeout": timeout,
        "max_retries": max_retries,
        "allowed_hosts": list(allowed_hosts),
        "allowed_origins": list(allowed_origins),
    }
    try:
        _run(_serve(spec, store_uri, options))
    except OSError as exc:
        raise serving.port_busy(host, port, exc) from exc


def _run(main: Coroutine[Any, Any, None]) -> None:
    """Run ``main`` on uvloop when it is installed (noticeably faster for the proxy), else on asyncio."""
    try:
        import uvloop
    except ImportError:
        asyncio.run(main)
    else:
        uvloop.run(main)


async def _serve(spec: dict[str, list[HttpBackend]], store_uri: str | None, options: dict[str, Any]) -> None:
    from agl_core.llm_proxy import LLMProxy

    store = None
    if store_uri:
        from agl_core.store import open_store

        store = open_store(store_uri)
    proxy = LLMProxy(spec, store=store, **options)
    stop = serving.stop_on_signals()
    try:
        await proxy.start()
        recording = f"recording to {store_uri}" if store_uri else "not recording (no --store)"
        click.echo(
            f"agl proxy: serving {', '.join(proxy.model_names()) or '*'} at {proxy.endpoint} "
            f"({recording}; pid {os.getpid()}{', token required' if options['token'] else ''})"
        )
        sys.stdout.flush()
        await stop.wait()
        click.echo("agl proxy: shutting down (finishing in-flight requests)...")
    finally:
        if proxy.is_running():
            await proxy.stop()
        if store is not None:
            await store.close()
    stats = proxy.stats()
    click.echo(
        f"agl proxy: stopped after {stats['requests']} request(s); spans written {stats['spans_written']}, "
        f"failed {stats['spans_failed']}, dropped {stats['spans_dropped']}."
    )
