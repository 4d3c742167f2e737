"""``agl rollout new``: create a rollout in a store and print the proxy URLs that record into it."""

from __future__ import annotations

import asyncio
import json
import shlex
from typing import Any

import click

__all__ = ["rollout_group"]


@click.group(name="rollout")
def rollout_group() -> None:
    """Create rollouts for agents that run outside agl (a CLI, a program in another language)."""


@rollout_group.command(name="new")
@click.option("--store", "store_uri", required=True, help="The store (http://..., sqlite:///x.db).")
@click.option(
    "--proxy",
    "proxy_url",
    required=True,
    help="The agl LLM proxy's URL (what `agl proxy serve` prints), with or without /v1.",
)
@click.option(
    "--input", "input_json", default="null", show_default=True, help="The rollout's input, as JSON."
)
@click.option(
    "--format",
    "output_format",
    default="env",
    show_default=True,
    type=click.Choice(["env", "json"]),
    help="env: `export NAME=value` lines for `eval`; json: one JSON object.",
)
def new_command(store_uri: str, proxy_url: str, input_json: str, output_format: str) -> None:
    """Start a rollout (with its first attempt) and print its ids and per-rollout base URLs.

    Point an agent at the URLs and every model call it makes through the proxy is recorded in the
    rollout: ``eval "$(agl rollout new --store URL --proxy URL)"`` then run the agent.
    """
    from agl_core.cli.errors import AglUserError
    from agl_core.llm_proxy.urls import rollout_urls
    from agl_core.store.uri import check_store_uri

    check_store_uri(store_uri)
    try:
        task_input = json.loads(input_json)
    except ValueError as exc:
        raise click.BadParameter(f"not valid JSON: {exc}", param_hint="--input") from None
    try:
        rollout_urls(proxy_url, "r", "a")
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--proxy") from None
    try:
        rollout_id, attempt_id = asyncio.run(_start(store_uri, task_input))
    except OSError as exc:
        raise AglUserError(f"cannot reach the store {store_uri}: {exc}") from exc
    values: dict[str, Any] = {
        "AGL_ROLLOUT_ID": rollout_id,
        "AGL_ATTEMPT_ID": attempt_id,
        "AGL_STORE_URL": store_uri,
        **rollout_urls(proxy_url, rollout_id, attempt_id),
    }
    if output_format == "json":
        click.echo(json.dumps(values))
    else:
        for name, value in values.items():
            click.echo(f"export {name}={shlex.quote(str(value))}")


async def _start(store_uri: str, task_input: Any) -> tuple[str, str]:
    from agl_core.store import open_store

    store = open_store(store_uri)
    try:
        attempted = await store.start_rollout(task_input)
        return attempted.rollout_id, attempted.attempt.attempt_id
    finally:
        await store.close()
