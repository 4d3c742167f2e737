"""``agl doctor ROLLOUT_ID --store URI``: why did this rollout give (no) training data?"""

from __future__ import annotations

import asyncio
from typing import Any

import click

__all__ = ["doctor_command"]


async def _diagnose(uri: str, rollout_id: str, attempt: str, adapter: str, options: dict[str, Any]) -> Any:
    from agl_core.adapter.doctor import diagnose_rollout
    from agl_core.store.uri import open_store_for_reading

    store = open_store_for_reading(uri)
    try:
        return await diagnose_rollout(
            store, rollout_id, attempt=attempt, adapter=adapter, adapter_options=options
        )
    finally:
        await store.close()


@click.command("doctor")
@click.argument("rollout_id")
@click.option(
    "--store", "store_uri", required=True, metavar="URI", help="Store URI, e.g. sqlite:///runs/agl.db."
)
@click.option(
    "--attempt",
    default="latest",
    show_default=True,
    help="Which spans to read: latest, all, or an attempt id.",
)
@click.option(
    "--adapter",
    default="triplet",
    show_default=True,
    help="triplet (tracer spans), proxy-triplet (LLM-proxy spans), or another registered triplet adapter.",
)
@click.option("--agent-match", default=None, metavar="REGEX", help="Only train on agents whose name matches.")
@click.option(
    "--max-prompt-length", type=click.IntRange(min=1), default=None, help="Flag longer prompts (tokens)."
)
@click.option(
    "--max-response-length", type=click.IntRange(min=1), default=None, help="Flag longer responses."
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def doctor_command(
    rollout_id: str,
    store_uri: str,
    attempt: str,
    adapter: str,
    agent_match: str | None,
    max_prompt_length: int | None,
    max_response_length: int | None,
    as_json: bool,
) -> None:
    """Explain the training data ROLLOUT_ID yields: spans, triplets, rewards, and each problem with a fix.

    Exits 0 when the rollout gives usable triplets, 1 when it does not, 3 when the rollout, attempt or
    adapter is unknown, 4 when the store server cannot be reached, 5 when the store file is missing or
    damaged (see `agl_core.cli.errors.ExitCode`).
    """
    options: dict[str, Any] = {
        key: value
        for key, value in (
            ("agent_match", agent_match),
            ("max_prompt_length", max_prompt_length),
            ("max_response_length", max_response_length),
        )
        if value is not None
    }
    from agl_core.cli.errors import AglUserError
    from agl_core.errors import UnknownComponentError
    from agl_core.store import InvalidRequestError, NotFoundError

    try:
        result = asyncio.run(_diagnose(store_uri, rollout_id, attempt, adapter, options))
    except (NotFoundError, InvalidRequestError, UnknownComponentError, ValueError) as exc:
        raise AglUserError(str(exc)) from exc
    click.echo(result.model_dump_json(indent=2) if as_json else result.format())
    if not result.report.ok:
        raise click.exceptions.Exit(1)
