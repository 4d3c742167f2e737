"""``agl runner``: runners on this machine joining a training run whose store is served elsewhere.

    agl runner --store http://trainer-host:4747 --agent my_package.agents:agent --n-runners 4
    agl runner --store http://trainer-host:4747 --agent my_package.agents:agent --n-runners 16 \
        --strategy ray --address auto       # 16 Ray actors on the cluster (plugin agl-ray)
    agl runner --store http://trainer-host:4747 --program "node agent.js {input.question}" \
        --env-map SYSTEM_PROMPT=resources.prompt.template   # a program per rollout (docs/programs.md)

Each runner dequeues rollouts from the store, runs the agent with tracing, and reports spans and the
attempt's status, until Ctrl-C (the in-flight attempt is reported as failed, so the store retries it per
its ``RolloutConfig``), until ``--max-rollouts`` are done, or until the store has been unreachable for
``--server-timeout`` seconds. Also runnable as ``python -m agl_core.cli.runner_cmd``.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import shlex
import signal
import sys
import time
from collections.abc import Sequence
from typing import Any

import click

from agl_core.cli import serving

__all__ = ["main", "runner_command"]

logger = logging.getLogger("agl_core.cli.runner")

_STOP_POLL_SECONDS = 0.05
_HEALTH_SECONDS = 5.0


def load_agent(spec: str | dict[str, Any]) -> Any:
    """Import the agent named ``module:attr`` (or ``module.attr``) from the current directory or sys.path.

    A dict is the keyword arguments of a :class:`~agl_core.program.ProgramAgent` (``--program``).

    Raises:
        click.BadParameter: the spec cannot be imported or is not a ``LitAgent``.
    """
    from agl_core.litagent import LitAgent

    if isinstance(spec, dict):
        from agl_core.program import ProgramAgent

        try:
            return ProgramAgent(**spec)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--program") from exc
    from agl_core.trainer.init_utils import load_class

    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        agent = load_class(spec)
    except (ImportError, AttributeError, ValueError) as exc:
        raise click.BadParameter(
            f"cannot import {spec!r}: {exc}. Use 'package.module:agent' with the package importable from "
            "the current directory or PYTHONPATH.",
            param_hint="--agent",
        ) from exc
    if isinstance(agent, type) and issubclass(agent, LitAgent):
        agent = agent()
    if not isinstance(agent, LitAgent):
        raise click.BadParameter(
            f"{spec!r} is a {type(agent).__name__}, not an agent. Decorate the function with @agl.rollout or "
            "point at a LitAgent instance (or subclass).",
            param_hint="--agent",
        )
    return agent


class _Options:
    """What one runner worker needs (picklable, so workers can be spawned processes)."""

    def __init__(
        self,
        store: str,
        agent: str | dict[str, Any],
        tracer: str,
        max_rollouts: int | None,
        poll_interval: float,
        server_timeout: float,
        grace: float,
    ) -> None:
        self.store = store
        self.agent = agent
        self.tracer = tracer
        self.max_rollouts = max_rollouts
        self.poll_interval = poll_interval
        self.server_timeout = server_timeout
        self.grace = grace


async def _watch_store(store: Any, event: Any, timeout: float, failed: list[bool]) -> None:
    """Set ``event`` when the store has not answered for ``timeout`` seconds."""
    last_ok = time.monotonic()
    while not event.is_set():
        try:
            await asyncio.wait_for(store.statistics(), _HEALTH_SECONDS)
            last_ok = time.monotonic()
        except Exception as exc:
            silent_for = time.monotonic() - last_ok
            logger.warning("Store unreachable for %.0f s: %r", silent_for, exc)
            if silent_for >= timeout:
                logger.error("The store has not answered for %.0f s; stopping.", silent_for)
                failed.append(True)
                event.set()
                return
        await asyncio.sleep(_HEALTH_SECONDS)


async def run_worker(options: _Options, worker_id: int, event: Any) -> bool:
    """Run one runner until ``event`` is set or ``max_rollouts`` are done; False if the store went away."""
    from agl_core.store.uri import open_store

    store = open_store(options.store)
    try:
        return await run_worker_on(options, store, worker_id, event)
    finally:
        await store.close()


async def run_worker_on(options: _Options, store: Any, worker_id: int, event: Any) -> bool:
    """`run_worker` on an open store (which the caller closes)."""
    from agl_core.execution.lifecycle import run_until_stopped
    from agl_core.runner.agent import LitAgentRunner
    from agl_core.tracer.base import Tracer
    from agl_core.trainer.init_utils import build_component

    agent = load_agent(options.agent)
    tracer = build_component(options.tracer, expected_type=Tracer, spec_name="tracer", registry="tracer")
    runner: LitAgentRunner[Any] = LitAgentRunner(
        tracer=tracer, max_rollouts=options.max_rollouts, poll_interval=options.poll_interval
    )
    failed: list[bool] = []
    watcher = asyncio.ensure_future(_watch_store(store, event, options.server_timeout, failed))
    try:
        with runner.run_context(agent=agent, store=store, worker_id=worker_id):
            logger.info("%s joined %s.", runner.get_worker_id(), options.store)
            await run_until_stopped(
                runner.iter(event=event),
                event,
                graceful_delay=options.grace,
                poll_interval=_STOP_POLL_SECONDS,
                name=runner.get_worker_id(),
            )
            logger.info("%s stopped after %d rollouts.", runner.get_worker_id(), runner.rollouts_processed)
    finally:
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)
    return not failed


class CommandRunnerBundle:
    """The runner bundle ``agl runner --strategy <name>`` hands to a strategy (picklable: only options)."""

    def __init__(self, options: _Options) -> None:
        self.options = options

    async def __call__(self, store: Any, worker_id: int, event: Any) -> None:
        """Run one runner on ``store`` as worker ``worker_id`` until ``event`` is set."""
        if not await run_worker_on(self.options, store, worker_id, event):
            raise RuntimeError(f"The store {self.options.store} stopped answering; the runner stopped.")


async def _no_algorithm(store: Any, event: Any) -> None:
    """The algorithm side of a runners-only strategy run: nothing."""


def _run_with_strategy(
    options: _Options, strategy_name: str, address: str | None, first: int, n_runners: int
) -> int:
    """Runners placed by a registered execution strategy (``ray``) instead of local processes."""
    from agl_core.errors import UnknownComponentError
    from agl_core.plugins import get_registry
    from agl_core.store.uri import open_store

    kwargs: dict[str, Any] = {
        "role": "runner",
        "store_uri": options.store,
        "n_runners": n_runners,
        "first_worker_id": first,
        "graceful_timeout": options.grace,
    }
    if address is not None:
        kwargs["address"] = address
    try:
        strategy = get_registry("strategy").create(strategy_name, **kwargs)
    except UnknownComponentError as exc:
        raise click.BadParameter(str(exc), param_hint="--strategy") from exc
    except TypeError as exc:
        raise click.UsageError(
            f"Strategy {strategy_name!r} cannot place runners on its own ({exc}); use --strategy local, or a "
            "strategy such as 'ray' (pip install agl-ray) that accepts role='runner' and store_uri."
        ) from exc

    async def close(store: Any) -> None:
        await store.close()

    store = open_store(options.store)
    try:
        strategy.execute(_no_algorithm, CommandRunnerBundle(options), store)
    except Exception as exc:
        logger.error("The %s runners stopped: %s: %s", strategy_name, type(exc).__name__, exc)
        return 1
    finally:
        asyncio.run(close(store))
    return 0


def _worker_process(options: _Options, worker_id: int, event: Any, parent_pid: int) -> None:
    """Entry point of one runner process (``--n-runners`` > 1)."""
    from agl_core.execution.processes import ParentAwareEvent

    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        ok = asyncio.run(run_worker(options, worker_id, ParentAwareEvent(event, parent_pid)))
    except KeyboardInterrupt:
        return
    if not ok:
        sys.exit(3)


def _run_in_process(options: _Options, worker_id: int) -> int:
    from agl_core.execution.events import ThreadingEvent

    event = ThreadingEvent()
    previous = signal.signal(signal.SIGTERM, lambda *_: event.set())
    try:
        ok = asyncio.run(run_worker(options, worker_id, event))
    except KeyboardInterrupt:
        logger.info("Interrupted; the in-flight attempt was reported.")
        return 0
    finally:
        signal.signal(signal.SIGTERM, previous)
    return 0 if ok else 3


def _run_processes(options: _Options, first_worker_id: int, n_runners: int) -> int:
    from agl_core.execution.events import MultiprocessingEvent
    from agl_core.execution.processes import ProcessGroup

    ctx = multiprocessing.get_context()
    event = MultiprocessingEvent(ctx=ctx)
    group = ProcessGroup(ctx, "runners")
    previous = signal.signal(signal.SIGTERM, lambda *_: event.set())
    try:
        for offset in range(n_runners):
            worker_id = first_worker_id + offset
            group.spawn(
                _worker_process, (options, worker_id, event, os.getpid()), name=f"agl-runner-{worker_id}"
            )
        while group.alive():
            group.join(0.2)
            if event.is_set():
                group.shutdown(event, options.grace * 2, 10.0)
    except KeyboardInterrupt:
        logger.info("Interrupted; stopping %d runner process(es).", len(group.alive()))
        group.shutdown(event, options.grace * 2, 10.0)
    finally:
        signal.signal(signal.SIGTERM, previous)
    codes = group.exit_codes()
    bad = {name: code for name, code in codes.items() if code not in (0, -15)}
    if bad:
        logger.error("Runner processes exited with errors: %s", bad)
        return 1
    return 0


def _agent_spec(
    agent_spec: str | None,
    program: str | None,
    env_map: tuple[str, ...],
    stdin_template: str | None,
    template_dir: str | None,
    git_repo: str | None,
    program_timeout: float | None,
) -> str | dict[str, Any]:
    """``--agent``, or the ProgramAgent arguments the ``--program`` options give."""
    program_options = env_map or stdin_template or template_dir or git_repo or program_timeout
    if (agent_spec is None) == (program is None):
        raise click.UsageError("Give the agent to run: --agent module:agent, or --program 'command line'.")
    if agent_spec is not None:
        if program_options:
            raise click.UsageError(
                "--env-map, --stdin, --template-dir, --git-repo and --program-timeout need --program."
            )
        return agent_spec
    assert program is not None
    mapping: dict[str, str] = {}
    for item in env_map:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise click.BadParameter(
                f"{item!r} is not NAME=PATH (e.g. TASK=input.question).", param_hint="--env-map"
            )
        mapping[name] = path
    return {
        "argv": shlex.split(program),
        "env_map": mapping,
        "stdin": stdin_template,
        "template_dir": template_dir,
        "git_repo": git_repo,
        "timeout": program_timeout,
    }


@click.command(name="runner")
@click.option(
    "--store",
    "store_url",
    required=True,
    help="The run's store: http://host:port of its server (a Trainer or `agl store serve`), or a store URI.",
)
@click.option("--agent", "agent_spec", default=None, help="The agent to run, as 'package.module:agent'.")
@click.option(
    "--program",
    default=None,
    help="Run this command line per rollout instead of --agent (a ProgramAgent; {input.x} placeholders).",
)
@click.option(
    "--env-map",
    "env_map",
    multiple=True,
    metavar="NAME=PATH",
    help="With --program: set NAME to the value at dotted PATH (input.x, resources.prompt.template).",
)
@click.option("--stdin", "stdin_template", default=None, help="With --program: a template written to stdin.")
@click.option(
    "--template-dir",
    default=None,
    type=click.Path(exists=True, file_okay=False),
    help="With --program: a folder copied as each attempt's working folder.",
)
@click.option(
    "--git-repo",
    default=None,
    type=click.Path(exists=True, file_okay=False),
    help="With --program: a repository checked out (git worktree, HEAD) as each attempt's working folder.",
)
@click.option(
    "--program-timeout",
    default=None,
    type=click.FloatRange(min=0.001),
    help="With --program: seconds before the program's process group is ended (default: the rollout's).",
)
@click.option(
    "--n-runners", default=1, show_default=True, type=click.IntRange(min=1), help="Runners to start."
)
@click.option(
    "--worker-id",
    default=None,
    type=click.IntRange(min=0),
    help="Id of the first runner (its store id is Worker-<id>; the next runners count up). Default: the "
    "process id, so runners of different machines rarely collide; pick distinct ids to be sure.",
)
@click.option("--tracer", default="otel", show_default=True, help="Tracer: a registered name or import path.")
@click.option(
    "--max-rollouts", default=None, type=click.IntRange(min=1), help="Stop each runner after this many."
)
@click.option(
    "--poll-interval",
    default=0.25,
    show_default=True,
    type=click.FloatRange(min=0.001),
    help="Longest wait between two dequeues of an empty queue (seconds).",
)
@click.option(
    "--server-timeout",
    default=60.0,
    show_default=True,
    type=click.FloatRange(min=1.0),
    help="Stop (exit code 3) when the store has not answered for this many seconds.",
)
@click.option(
    "--grace",
    default=5.0,
    show_default=True,
    type=click.FloatRange(min=0.1),
    help="Seconds a stopping runner gets to finish its rollout before it is cancelled.",
)
@click.option(
    "--strategy",
    "strategy_name",
    default="local",
    show_default=True,
    help="Where the runners run: 'local' (this machine: one process, or --n-runners processes) or a "
    "registered execution strategy such as 'ray' (actors on a Ray cluster; pip install agl-ray).",
)
@click.option(
    "--address",
    default=None,
    help="Cluster address for --strategy ray ('auto', 'ray://head:10001'); default: a local Ray.",
)
@serving.log_level_option
def runner_command(
    store_url: str,
    agent_spec: str | None,
    program: str | None,
    env_map: tuple[str, ...],
    stdin_template: str | None,
    template_dir: str | None,
    git_repo: str | None,
    program_timeout: float | None,
    n_runners: int,
    worker_id: int | None,
    tracer: str,
    max_rollouts: int | None,
    poll_interval: float,
    server_timeout: float,
    grace: float,
    strategy_name: str,
    address: str | None,
) -> None:
    """Run agent runners against a store served elsewhere, until Ctrl-C."""
    from agl_core.store.uri import check_store_uri

    check_store_uri(store_url)
    agent = _agent_spec(agent_spec, program, env_map, stdin_template, template_dir, git_repo, program_timeout)
    load_agent(agent)  # fail fast, with a clear message, before starting anything
    options = _Options(store_url, agent, tracer, max_rollouts, poll_interval, server_timeout, grace)
    first = os.getpid() if worker_id is None else worker_id
    if strategy_name != "local":
        code = _run_with_strategy(options, strategy_name, address, first, n_runners)
    elif address is not None:
        raise click.UsageError("--address only applies to a cluster strategy (--strategy ray).")
    elif n_runners == 1:
        code = _run_in_process(options, first)
    else:
        code = _run_processes(options, first, n_runners)
    sys.exit(code)


def main(argv: Sequence[str] | None = None) -> None:
    """Run ``agl runner`` with ``argv`` (default: the command line)."""
    runner_command.main(args=list(argv) if argv is not None else sys.argv[1:], prog_name="agl runner")


if __name__ == "__main__":
    main()
