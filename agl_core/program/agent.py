"""`ProgramAgent`: an agent that is a program of its own, started once per attempt with its LLM routed.

A normal :class:`~agl_core.LitAgent` to the runner, so it runs under every strategy (``shm``, ``cs``, Ray
through agl-ray) and from ``agl runner``; docs/programs.md describes what the program sees and how it
reports its reward.
"""

from __future__ import annotations

import inspect
import json
import logging
import os
import time
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

from agl_core.litagent import LitAgent
from agl_core.llm_proxy.urls import rollout_urls
from agl_core.program.launcher import LocalLauncher, ProgramExit, ProgramLaunch, ProgramLauncher, signal_name
from agl_core.program.reward import read_reward_file, reward_from_stdout
from agl_core.program.values import ProgramValueError, as_text, lookup, render
from agl_core.program.workdir import AttemptFolder, make_attempt_folder, remove_attempt_folder
from agl_core.types import LLM, ProxyLLM

if TYPE_CHECKING:
    from agl_core.store.base import LightningStore
    from agl_core.types import NamedResources, Rollout, Span

__all__ = [
    "DUMMY_API_KEY",
    "PROGRAM_SPAN",
    "ProgramAgent",
    "ProgramFailedError",
    "ProgramOutcome",
    "RewardHook",
]

logger = logging.getLogger(__name__)

DUMMY_API_KEY = "agl-dummy-key"
"""The API key a program gets when neither the LLM resource nor the environment has one (SDKs insist on
one; the agl proxy needs none unless it was started with a token)."""

ROLLOUT_TIMEOUT_MARGIN_SECONDS = 1.0
"""How long before the rollout's ``config.timeout_seconds`` the program is ended (see ``ProgramAgent``)."""
PROXY_REQUEST_SPAN = "agl.llm_proxy.request"
PROGRAM_SPAN = "agl.program"
"""The span that records one program run: ``agl.program.argv``, ``.exit_code`` or ``.signal``, ``.timed_out``,
``.stdout_tail`` / ``.stderr_tail`` (bounded) and ``.stdout_bytes`` / ``.stderr_bytes``; status ERROR when it
failed."""
_KEY_VARIABLES = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")
_MINIMAL_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "TZ", "USER", "SHELL", "TERM")


class ProgramFailedError(RuntimeError):
    """The program ended badly (a non-zero exit code, a signal); the attempt fails with this message."""

    def __init__(self, message: str, outcome: ProgramExit) -> None:
        super().__init__(message)
        self.exit = outcome


@dataclass
class ProgramOutcome:
    """What a reward hook gets once the program has exited.

    Attributes:
        rollout: The attempted rollout (its input, mode, ids).
        exit: How the program ended (exit code, signal, stdout/stderr tails).
        work_dir: The program's working folder, still there (e.g. run the repository's tests in it).
        reported_reward: The reward the program itself reported (reward file or final stdout line), if any.
        store: The store, for :meth:`llm_calls`.
    """

    rollout: Rollout
    exit: ProgramExit
    work_dir: Path
    reported_reward: float | None
    store: LightningStore = field(repr=False)

    async def llm_calls(self) -> list[Span]:
        """The ``agl.llm_proxy.request`` spans recorded for this attempt so far, in order.

        The proxy writes its spans in the background; a call that finished just before the program exited
        can land a few milliseconds later.
        """
        attempt = getattr(self.rollout, "attempt", None)
        spans = await self.store.query_spans(
            self.rollout.rollout_id, attempt.attempt_id if attempt is not None else "latest"
        )
        return [span for span in spans if span.name == PROXY_REQUEST_SPAN]


RewardHook = Callable[[ProgramOutcome], Union[float, Awaitable[Union[float, None]], None]]  # noqa: UP007
"""A function (sync or async) that computes the reward from a :class:`ProgramOutcome`; None for none."""


def _resource_dump(resource: Any) -> Any:
    dump = getattr(resource, "model_dump", None)
    return dump(mode="json") if callable(dump) else resource


def _pick_llm(resources: NamedResources, name: str | None) -> LLM | None:
    if name is not None:
        resource = resources.get(name)
        if not isinstance(resource, LLM):
            found = ", ".join(f"{key} ({type(value).__name__})" for key, value in resources.items()) or "none"
            raise ProgramValueError(
                f"ProgramAgent(llm={name!r}): the rollout's resources have no LLM named {name!r} (they are: "
                f"{found}). Publish it: Trainer(initial_resources={{{name!r}: llm_proxy.as_resource()}})."
            )
        return resource
    llms = [value for value in resources.values() if isinstance(value, LLM)]
    if len(llms) > 1:
        names = ", ".join(key for key, value in resources.items() if isinstance(value, LLM))
        raise ProgramValueError(
            f"The resources hold several LLMs ({names}); pick one with ProgramAgent(llm=...)."
        )
    return llms[0] if llms else None


class ProgramAgent(LitAgent[Any]):
    """Runs a program once per attempt, with the rollout's LLM, input and resources in its environment.

    Per attempt: a fresh working folder (empty, a copy of ``template_dir``, or a detached git worktree of
    ``git_repo`` at ``git_ref``); the program ``argv`` (each item a template: ``{input.question}``) started
    there with ``stdin`` (a template; default none), its environment (below), and a timeout
    (``timeout``, else the rollout's ``config.timeout_seconds``) that ends its whole process group; then
    the reward (below) and the attempt's status: exit code 0 (or one of ``ok_exit_codes``) succeeds, any
    other code or a signal fails the attempt with the reason and the end of stderr, a timeout makes it
    ``timeout``. How it ended and the tails of stdout and stderr are kept with the attempt as an
    ``agl.program`` span (:data:`PROGRAM_SPAN`).

    Environment: the runner's (``inherit_env=True``) or only a few basics such as ``PATH`` and ``HOME``; then
    ``env`` (values are templates, which may also use ``{work_dir}``: ``{"HOME": "{work_dir}"}``); then, for
    the rollout's LLM (the resource named ``llm``, or the only ``LLM`` of the resources; a ``ProxyLLM`` is
    routed to this attempt, see :func:`~agl_core.llm_proxy.urls.rollout_urls`), ``OPENAI_BASE_URL`` and
    ``OPENAI_API_BASE`` (the URL ending in ``/v1``), ``ANTHROPIC_BASE_URL`` and ``ANTHROPIC_API_BASE``
    (without ``/v1``), ``AGL_LLM_BASE_URL`` and ``AGL_LLM_MODEL``, and ``OPENAI_API_KEY`` /
    ``ANTHROPIC_API_KEY`` set to the LLM's key, else kept when set, else :data:`DUMMY_API_KEY`;
    ``AGL_ROLLOUT_ID``, ``AGL_ATTEMPT_ID``, ``AGL_ROLLOUT_MODE``, ``AGL_STORE_URL`` (when the runner's store
    is a server), ``AGL_WORK_DIR``, ``AGL_INPUT_FILE`` (the task input as JSON), ``AGL_RESOURCES_FILE`` (the
    resources as JSON), ``AGL_REWARD_FILE``; and each ``env_map`` entry ``NAME -> dotted path``
    (``input.question``, ``resources.prompt.template``), a value that is not a string written as JSON.

    Reward: ``reward(outcome)`` when given (sync or async; it sees the working folder, the exit, the
    reward the program reported and the attempt's LLM calls); else the reward file (``agl reward 0.8``
    writes it), else a last stdout line ``{"reward": 0.8}``; else none (the program may also have posted
    it to the store itself).

    Args:
        argv: The command and its arguments, each a template.
        env_map: Environment variable -> dotted path into the rollout's context.
        env: Environment variables to set; each value a template (``{work_dir}``, ``{input.x}``).
        inherit_env: Pass the runner's environment on (False: only ``PATH``, ``HOME`` and a few others).
        stdin: A template written to the program's stdin (``"{input}"``: the task input as JSON).
        llm: The name of the LLM resource to route (default: the only LLM of the resources).
        template_dir: A folder copied as each attempt's working folder.
        git_repo / git_ref: A repository whose ``git_ref`` is checked out as each attempt's working folder.
        work_root: Where attempt folders are made (default: the system's temporary folder).
        keep_work_dirs: Keep attempt folders after the attempt (for debugging).
        timeout: Seconds the program may run; a rollout's ``config.timeout_seconds`` also limits it (the
            program is ended a second before the runner would cancel the attempt).
        ok_exit_codes: Exit codes that count as success.
        reward: The reward hook (see above).
        tail_bytes: Bytes of the end of stdout and of stderr kept.
        launcher: Where programs run (default :class:`~agl_core.program.LocalLauncher`).

    Raises:
        ValueError: an empty ``argv``, or both ``template_dir`` and ``git_repo``.
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        env_map: Mapping[str, str] | None = None,
        env: Mapping[str, str] | None = None,
        inherit_env: bool = True,
        stdin: str | None = None,
        llm: str | None = None,
        template_dir: str | os.PathLike[str] | None = None,
        git_repo: str | os.PathLike[str] | None = None,
        git_ref: str = "HEAD",
        work_root: str | os.PathLike[str] | None = None,
        keep_work_dirs: bool = False,
        timeout: float | None = None,
        ok_exit_codes: Collection[int] = (0,),
        reward: RewardHook | None = None,
        tail_bytes: int = 8192,
        launcher: ProgramLauncher | None = None,
    ) -> None:
        super().__init__()
        if isinstance(argv, str) or not argv or not all(isinstance(item, str) for item in argv):
            raise ValueError(
                f"ProgramAgent(argv=...) takes a non-empty list of strings, got {argv!r}; e.g. "
                "argv=['node', 'agent.js', '{input.question}'] (shlex.split() a command line)."
            )
        if template_dir is not None and git_repo is not None:
            raise ValueError("ProgramAgent takes template_dir or git_repo for the working folder, not both.")
        if timeout is not None and timeout <= 0:
            raise ValueError(f"timeout must be > 0 seconds, got {timeout!r}.")
        self.argv = list(argv)
        self.env_map = dict(env_map or {})
        self.env = dict(env or {})
        self.inherit_env = inherit_env
        self.stdin = stdin
        self.llm = llm
        self.template_dir = None if template_dir is None else Path(template_dir).resolve()
        self.git_repo = None if git_repo is None else Path(git_repo).resolve()
        self.git_ref = git_ref
        self.work_root = None if work_root is None else Path(work_root)
        self.keep_work_dirs = keep_work_dirs
        self.timeout = timeout
        self.ok_exit_codes = frozenset(ok_exit_codes)
        self.reward = reward
        self.tail_bytes = tail_bytes
        self.launcher: ProgramLauncher = launcher if launcher is not None else LocalLauncher()

    def __repr__(self) -> str:
        return f"ProgramAgent(argv={self.argv!r})"

    # -- what the program sees ---------------------------------------------------------------------

    def context(self, task: Any, resources: NamedResources, rollout: Rollout) -> dict[str, Any]:
        """The values templates and ``env_map`` paths read: input, resources, ids, mode and LLM URLs.

        ``work_dir`` (the attempt's working folder) is added once the folder exists.

        ``urls`` holds ``OPENAI_BASE_URL`` and ``ANTHROPIC_BASE_URL`` of the rollout's LLM (empty without
        one), for programs configured on their command line: ``{urls.OPENAI_BASE_URL}``.
        """
        attempt = getattr(rollout, "attempt", None)
        llm = _pick_llm(resources, self.llm)
        urls: dict[str, str] = {}
        if isinstance(llm, ProxyLLM) and attempt is not None:
            urls = rollout_urls(llm.endpoint, rollout.rollout_id, attempt.attempt_id)
        elif llm is not None:
            url = llm.get_base_url().rstrip("/")
            urls = {"OPENAI_BASE_URL": url, "ANTHROPIC_BASE_URL": url.removesuffix("/v1")}
        return {
            "input": task,
            "resources": {name: _resource_dump(value) for name, value in resources.items()},
            "rollout_id": rollout.rollout_id,
            "attempt_id": attempt.attempt_id if attempt is not None else "",
            "mode": rollout.mode or "",
            "urls": urls,
        }

    def environment(
        self,
        context: Mapping[str, Any],
        resources: NamedResources,
        folder: AttemptFolder,
        store_url: str | None,
    ) -> dict[str, str]:
        """The program's whole environment (see the class docstring)."""
        if self.inherit_env:
            env = dict(os.environ)
        else:
            env = {name: os.environ[name] for name in _MINIMAL_ENV if name in os.environ}
        env.update({name: render(value, context) for name, value in self.env.items()})
        llm = _pick_llm(resources, self.llm)
        urls = context["urls"]
        if llm is not None:
            env.update(
                urls,
                OPENAI_API_BASE=urls["OPENAI_BASE_URL"],
                ANTHROPIC_API_BASE=urls["ANTHROPIC_BASE_URL"],
                AGL_LLM_BASE_URL=urls["OPENAI_BASE_URL"],
                AGL_LLM_MODEL=llm.model,
            )
            for name in _KEY_VARIABLES:
                if llm.api_key:
                    env[name] = llm.api_key
                elif not env.get(name):
                    env[name] = DUMMY_API_KEY
        env.update(
            AGL_ROLLOUT_ID=str(context["rollout_id"]),
            AGL_ATTEMPT_ID=str(context["attempt_id"]),
            AGL_ROLLOUT_MODE=str(context["mode"]),
            AGL_WORK_DIR=str(folder.work),
            AGL_INPUT_FILE=str(folder.io / "input.json"),
            AGL_RESOURCES_FILE=str(folder.io / "resources.json"),
            AGL_REWARD_FILE=str(folder.io / "reward.json"),
        )
        if store_url:
            env["AGL_STORE_URL"] = store_url
        else:
            env.pop("AGL_STORE_URL", None)
        for name, path in self.env_map.items():
            env[name] = as_text(lookup(context, path))
        return env

    # -- one attempt -------------------------------------------------------------------------------

    async def rollout_async(self, task: Any, resources: NamedResources, rollout: Rollout) -> float | None:
        """Run the program for this attempt and return its reward (None: none reported)."""
        from agl_core.runner.agent import AgentTimeoutError

        entered = time.monotonic()
        store = self._store()
        context = self.context(task, resources, rollout)
        folder = await make_attempt_folder(
            rollout.rollout_id,
            str(context["attempt_id"]),
            root=self.work_root,
            template=self.template_dir,
            git_repo=self.git_repo,
            git_ref=self.git_ref,
        )
        try:
            context["work_dir"] = str(folder.work)
            argv = [render(item, context) for item in self.argv]
            stdin = None if self.stdin is None else render(self.stdin, context).encode("utf-8")
            (folder.io / "input.json").write_text(json.dumps(task, default=str), encoding="utf-8")
            (folder.io / "resources.json").write_text(json.dumps(context["resources"]), encoding="utf-8")
            env = self.environment(context, resources, folder, getattr(store, "url", None))
            timeout = self._timeout(rollout.config.timeout_seconds, time.monotonic() - entered)
            launch = ProgramLaunch(argv, env, folder.work, stdin, timeout, self.tail_bytes)
            started = time.time()
            try:
                ended = await self.launcher.run(launch)
            except FileNotFoundError as exc:
                raise ProgramFailedError(
                    f"The program {argv[0]!r} could not be started: {exc}. Check argv[0] is installed and on "
                    "PATH (or give its absolute path).",
                    ProgramExit(None, None, False, "", str(exc), 0, 0, 0.0),
                ) from exc
            await self._record(store, rollout, argv, started, ended)
            if ended.timed_out:
                raise AgentTimeoutError(
                    f"The program {argv[0]!r} ran longer than {timeout} s and was stopped."
                )
            if ended.returncode not in self.ok_exit_codes:
                tail = ended.stderr_tail.strip()[-1000:] or "(stderr was empty)"
                raise ProgramFailedError(
                    f"The program {argv[0]!r} {ended.describe()}. stderr ends: {tail}", ended
                )
            reported = read_reward_file(folder.io / "reward.json")
            if reported is None:
                reported = reward_from_stdout(ended.stdout_tail)
            if self.reward is None:
                return reported
            value = self.reward(ProgramOutcome(rollout, ended, folder.work, reported, store))
            if inspect.isawaitable(value):
                value = await value
            return None if value is None else float(value)
        finally:
            if not self.keep_work_dirs:
                await remove_attempt_folder(folder)

    def _timeout(self, rollout_timeout: float | None, elapsed: float) -> float | None:
        """The program's time limit: ``timeout``, cut to end a margin before the rollout's own deadline.

        The runner cancels an agent at ``config.timeout_seconds``; ending the program a little earlier lets
        its ``agl.program`` span (with the output tails of a program that hung) be recorded first.
        """
        if rollout_timeout is None:
            return self.timeout
        left = max(0.1, rollout_timeout - elapsed - ROLLOUT_TIMEOUT_MARGIN_SECONDS)
        return left if self.timeout is None else min(self.timeout, left)

    def _store(self) -> LightningStore:
        try:
            runner = self.get_runner()
        except ValueError as exc:
            raise RuntimeError(
                "ProgramAgent runs inside a runner (Trainer.fit/dev, agl runner); it has none here."
            ) from exc
        store: LightningStore = runner.get_store()
        return store

    async def _record(
        self, store: LightningStore, rollout: Rollout, argv: list[str], started: float, ended: ProgramExit
    ) -> None:
        """Store how the program ended, with its output tails, as the attempt's ``agl.program`` span."""
        from agl_core.types import Span, SpanCoreFields, TraceStatus

        attempt = getattr(rollout, "attempt", None)
        if attempt is None:
            return
        attributes: dict[str, Any] = {
            "agl.program.argv": argv,
            "agl.program.timed_out": ended.timed_out,
            "agl.program.stdout_tail": ended.stdout_tail,
            "agl.program.stderr_tail": ended.stderr_tail,
            "agl.program.stdout_bytes": ended.stdout_bytes,
            "agl.program.stderr_bytes": ended.stderr_bytes,
        }
        if ended.returncode is not None:
            attributes["agl.program.exit_code"] = ended.returncode
        if ended.signal is not None:
            attributes["agl.program.signal"] = signal_name(ended.signal)
        ok = ended.returncode in self.ok_exit_codes and not ended.timed_out
        status = (
            TraceStatus(status_code="OK")
            if ok
            else TraceStatus(status_code="ERROR", description=ended.describe())
        )
        core = SpanCoreFields(
            name=PROGRAM_SPAN,
            attributes=attributes,
            start_time=started,
            end_time=started + ended.duration,
            status=status,
        )
        try:
            (sequence_id,) = await store.get_many_span_sequence_ids(
                [(rollout.rollout_id, attempt.attempt_id)]
            )
            span = Span.from_core_fields(
                core, rollout_id=rollout.rollout_id, attempt_id=attempt.attempt_id, sequence_id=sequence_id
            )
            await store.add_many_spans([span])
        except Exception:
            logger.exception("Rollout %s: could not record the program's exit as a span.", rollout.rollout_id)
