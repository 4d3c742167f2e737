"""``agl reward VALUE``: a program reports the reward of its rollout.

Inside a :class:`~agl_core.program.ProgramAgent` attempt (``$AGL_REWARD_FILE`` is set) it writes the
reward file, which the agent reads when the program exits. Elsewhere (a long-running service that got its
rollout's ids) it adds a reward span to the store over HTTP: ``--store`` / ``$AGL_STORE_URL``,
``--rollout-id`` / ``$AGL_ROLLOUT_ID``, ``--attempt-id`` / ``$AGL_ATTEMPT_ID``.
"""

from __future__ import annotations

import asyncio
import math
import os
from pathlib import Path

import click

__all__ = ["post_reward", "reward_command"]


async def post_reward(store_url: str, rollout_id: str, attempt_id: str, value: float) -> None:
    """Add a reward span with ``value`` to the attempt, through the store server at ``store_url``."""
    from agl_core.emitter import emit_reward
    from agl_core.store.http.client import LightningStoreClient
    from agl_core.types import Span

    store = LightningStoreClient(store_url)
    try:
        sequence_id = await store.get_next_span_sequence_id(rollout_id, attempt_id)
        core = emit_reward(value, propagate=False)
        span = Span.from_core_fields(
            core, rollout_id=rollout_id, attempt_id=attempt_id, sequence_id=sequence_id
        )
        await store.add_span(span)
    finally:
        await store.close()


@click.command(name="reward")
@click.argument("value", type=float)
@click.option(
    "--reward-file",
    envvar="AGL_REWARD_FILE",
    default=None,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the reward here (set by ProgramAgent for its program).",
)
@click.option("--store", "store_url", envvar="AGL_STORE_URL", default=None, help="The store server's URL.")
@click.option("--rollout-id", envvar="AGL_ROLLOUT_ID", default=None, help="The rollout to reward.")
@click.option("--attempt-id", envvar="AGL_ATTEMPT_ID", default=None, help="Its attempt.")
def reward_command(
    value: float,
    reward_file: Path | None,
    store_url: str | None,
    rollout_id: str | None,
    attempt_id: str | None,
) -> None:
    """Report VALUE as the reward of the current rollout (a program agent's, or one named by ids)."""
    if not math.isfinite(value):
        raise click.BadParameter(f"{value} is not a finite number.", param_hint="VALUE")
    if reward_file is not None:
        partial = reward_file.with_name(reward_file.name + f".{os.getpid()}.tmp")
        partial.write_text(repr(value), encoding="utf-8")
        os.replace(partial, reward_file)
        return
    missing = [
        name
        for name, given in (
            ("--store", store_url),
            ("--rollout-id", rollout_id),
            ("--attempt-id", attempt_id),
        )
        if not given
    ]
    if missing:
        raise click.UsageError(
            f"No reward file and no {', '.join(missing)}: run this inside a ProgramAgent attempt (it sets "
            "AGL_REWARD_FILE), or name the store and the attempt (AGL_STORE_URL, AGL_ROLLOUT_ID, "
            "AGL_ATTEMPT_ID)."
        )
    assert store_url is not None and rollout_id is not None and attempt_id is not None
    asyncio.run(post_reward(store_url, rollout_id, attempt_id, value))
