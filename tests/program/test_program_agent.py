"""ProgramAgent end to end: a real program (the openai SDK in a subprocess) through the proxy."""

from __future__ import annotations

import asyncio
import os
import pickle
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import agl_core as agl
from agl_core.emitter import find_final_reward
from agl_core.llm_proxy import LLMProxy
from agl_core.program import PROGRAM_SPAN, ProgramAgent, ProgramOutcome, RolloutHooks
from agl_core.store.memory import InMemoryLightningStore
from agl_core.types import EnqueueRolloutRequest, PromptTemplate, RolloutConfig
from agl_testing.fake_openai import FakeOpenAIServer

PROGRAM = str(Path(__file__).with_name("chat_program.py"))
QUESTIONS = [{"question": f"what is {i} plus {i}", "id": i} for i in range(6)]


@pytest.fixture(scope="module")
def backend() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(token_ids="always") as server:
        yield server


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def train(
    agent: ProgramAgent, backend: FakeOpenAIServer, tasks: list[Any], **trainer: Any
) -> InMemoryLightningStore:
    store = InMemoryLightningStore()
    with LLMProxy({"policy": backend.base_url}, store=store) as proxy:
        resources = {
            "llm": proxy.as_resource(),
            "prompt": PromptTemplate(template="Be brief.", engine="f-string"),
        }
        options: dict[str, Any] = {"strategy": "shm", "n_runners": 2, "progress": False, **trainer}
        agl.Trainer(store=store, initial_resources=resources, **options).dev(agent, tasks)
        proxy_flushed = proxy  # spans are written in the background; wait until they are in the store
        assert run(_flush(proxy_flushed))
    return store


async def _flush(proxy: LLMProxy) -> bool:
    return await proxy.flush(timeout=10)


def program_span(spans: list[Any]) -> dict[str, Any]:
    [span] = [s for s in spans if s.name == PROGRAM_SPAN]
    return dict(span.attributes)


def chat_agent(*extra: str, **options: Any) -> ProgramAgent:
    return ProgramAgent(
        [sys.executable, PROGRAM, "{input.question}", *extra],
        env_map={"SYSTEM_PROMPT": "resources.prompt.template"},
        **options,
    )


@pytest.mark.parametrize("strategy", ["shm", "cs"])
def test_each_rollout_runs_the_program_once_and_records_its_calls_token_ids_and_reward(
    strategy: str, backend: FakeOpenAIServer
) -> None:
    store = train(chat_agent(), backend, QUESTIONS, strategy=strategy, port=0)

    rollouts = run(store.query_rollouts())
    assert len(rollouts) == len(QUESTIONS) and {r.status for r in rollouts} == {"succeeded"}
    for rollout in rollouts:
        spans = run(store.query_spans(rollout.rollout_id, "latest"))
        calls = [s for s in spans if s.name == "agl.llm_proxy.request"]
        assert len(calls) == 1, [s.name for s in spans]
        triplets = agl.LlmProxyTraceToTriplet()(spans)
        assert len(triplets) == 1
        assert triplets[0].response["token_ids"] == backend.tokenizer.encode(rollout.input["question"])
        assert triplets[0].prompt["token_ids"]
        assert find_final_reward(spans) == 1.0
        program = program_span(spans)
        assert (
            program["agl.program.exit_code"] == 0 and program["agl.program.stderr_tail"] == "thinking done\n"
        )
        assert program["agl.program.stdout_tail"].strip() == '{"reward": 1.0}'


def test_the_program_sees_the_resources_the_ids_and_a_dummy_key(backend: FakeOpenAIServer) -> None:
    seen: list[dict[str, Any]] = []
    agent = ProgramAgent(
        [sys.executable, "-c", "import json, os; print(json.dumps(dict(os.environ)))"],
        env_map={"SYSTEM_PROMPT": "resources.prompt.template", "TASK_ID": "input.id"},
        inherit_env=False,
        env={"OPENAI_API_KEY": "", "MY_HOME": "{work_dir}/home", "LITERAL": "{not_a_path} {{input}}"},
        reward=lambda outcome: seen.append(__import__("json").loads(outcome.exit.stdout_tail)) or 0.5,
    )
    store = train(agent, backend, QUESTIONS[:1], n_runners=1)

    env = seen[0]
    rollout = run(store.query_rollouts())[0]
    attempt = run(store.query_attempts(rollout.rollout_id))[-1]
    route = f"/rollout/{rollout.rollout_id}/attempt/{attempt.attempt_id}"
    assert env["OPENAI_BASE_URL"].endswith(route + "/v1") and env["OPENAI_API_BASE"] == env["OPENAI_BASE_URL"]
    assert env["ANTHROPIC_BASE_URL"] == env["OPENAI_BASE_URL"].removesuffix("/v1")
    assert env["OPENAI_API_KEY"] == env["ANTHROPIC_API_KEY"] == "agl-dummy-key"
    assert env["AGL_LLM_MODEL"] == "policy"
    assert (env["AGL_ROLLOUT_ID"], env["AGL_ATTEMPT_ID"]) == (rollout.rollout_id, attempt.attempt_id)
    assert env["SYSTEM_PROMPT"] == "Be brief." and env["TASK_ID"] == "0"
    assert env["MY_HOME"] == env["AGL_WORK_DIR"] + "/home" and env["LITERAL"] == "{not_a_path} {input}"
    assert "AGL_STORE_URL" not in env  # shm: the store is in memory, not served
    assert set(env) <= {
        "PATH",
        "HOME",
        "LANG",
        "LC_ALL",
        "TMPDIR",
        "TZ",
        "USER",
        "SHELL",
        "TERM",
        "PWD",
        "LC_CTYPE",
    } | {
        k
        for k in env
        if k.startswith(("AGL_", "OPENAI_", "ANTHROPIC_"))
        or k in ("SYSTEM_PROMPT", "TASK_ID", "MY_HOME", "LITERAL")
    }
    assert find_final_reward(run(store.query_spans(rollout.rollout_id, "latest"))) == 0.5


def test_agl_reward_writes_the_reward_file_that_wins(backend: FakeOpenAIServer) -> None:
    store = train(chat_agent("--reward-file"), backend, QUESTIONS[:2])
    for rollout in run(store.query_rollouts()):
        assert rollout.status == "succeeded"
        assert find_final_reward(run(store.query_spans(rollout.rollout_id, "latest"))) == 1.0


def test_a_failing_exit_fails_the_attempt_with_the_code_and_stderr(backend: FakeOpenAIServer) -> None:
    store = train(chat_agent("--exit", "3"), backend, QUESTIONS[:1], n_runners=1)
    rollout = run(store.query_rollouts())[0]
    assert rollout.status == "failed"
    spans = run(store.query_spans(rollout.rollout_id, "latest"))
    [error] = [s for s in spans if s.name == "agentlightning.exception"]
    message = error.attributes["exception.message"]
    assert "exited with code 3" in message and "thinking done" in message
    assert [s.name for s in spans].count("agl.llm_proxy.request") == 1  # the call is still recorded
    assert program_span(spans)["agl.program.exit_code"] == 3


def test_ok_exit_codes_and_a_reward_hook_that_sees_the_folder_and_the_calls(
    backend: FakeOpenAIServer,
) -> None:
    seen: list[Any] = []

    async def reward(outcome: ProgramOutcome) -> float:
        calls = await outcome.llm_calls()
        for _ in range(100):  # the proxy writes spans in the background: bounded wait for the one call
            if calls:
                break
            await asyncio.sleep(0.05)
            calls = await outcome.llm_calls()
        seen.append((outcome.exit.returncode, outcome.work_dir.is_dir(), len(calls), outcome.reported_reward))
        return 0.25

    store = train(
        chat_agent("--exit", "1", ok_exit_codes=(0, 1), reward=reward), backend, QUESTIONS[:1], n_runners=1
    )
    assert seen == [(1, True, 1, None)]
    rollout = run(store.query_rollouts())[0]
    assert rollout.status == "succeeded"
    assert find_final_reward(run(store.query_spans(rollout.rollout_id, "latest"))) == 0.25


def test_a_timeout_ends_the_whole_process_group(backend: FakeOpenAIServer, tmp_path: Path) -> None:
    started = time.monotonic()
    agent = chat_agent("--sleep", timeout=2.0, keep_work_dirs=True, work_root=tmp_path)
    store = train(agent, backend, QUESTIONS[:1], n_runners=1)
    assert time.monotonic() - started < 60
    rollout = run(store.query_rollouts())[0]
    attempt = run(store.query_attempts(rollout.rollout_id))[-1]
    assert attempt.status == "timeout"
    program = program_span(run(store.query_spans(rollout.rollout_id, "latest")))
    assert program["agl.program.timed_out"] is True
    child = int(__import__("json").loads(program["agl.program.stdout_tail"].splitlines()[0])["child"])
    for _ in range(200):  # bounded: the child was SIGKILLed with its group; wait until it is reaped
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        state = Path(f"/proc/{child}/stat").read_text().split()[2] if Path(f"/proc/{child}").exists() else "X"
        if state in ("Z", "X"):
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"the program's child {child} survived the timeout")
    assert [p.name for p in tmp_path.iterdir()] and all((p / "work").is_dir() for p in tmp_path.iterdir())


def test_a_program_killed_by_a_signal_fails_naming_the_signal(backend: FakeOpenAIServer) -> None:
    script = (
        "import os, signal, sys; print('about to die', file=sys.stderr, flush=True); os.kill(os.getpid(), 9)"
    )
    store = train(ProgramAgent([sys.executable, "-c", script]), backend, QUESTIONS[:1], n_runners=1)
    rollout = run(store.query_rollouts())[0]
    assert rollout.status == "failed"
    spans = run(store.query_spans(rollout.rollout_id, "latest"))
    [error] = [s for s in spans if s.name == "agentlightning.exception"]
    assert "was killed by SIGKILL" in error.attributes["exception.message"]
    assert "about to die" in error.attributes["exception.message"]
    program = program_span(spans)
    assert program["agl.program.signal"] == "SIGKILL" and "agl.program.exit_code" not in program


class ShortRollouts(RolloutHooks):
    async def on_enqueue(self, request: EnqueueRolloutRequest) -> EnqueueRolloutRequest:
        return request.model_copy(update={"config": RolloutConfig(timeout_seconds=4.0)})


def _gone(pid: int) -> bool:
    """True once ``pid`` has exited (bounded wait; a zombie counts as gone)."""
    for _ in range(200):
        stat = Path(f"/proc/{pid}/stat")
        if not stat.exists() or stat.read_text().split()[2] in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False


SLEEPER = (
    "import subprocess, sys, time; "
    "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)']); "
    "open(sys.argv[1], 'w').write(str(child.pid)); print('started', flush=True); time.sleep(300)"
)


def test_the_rollout_timeout_ends_the_program_first_and_keeps_its_output(
    backend: FakeOpenAIServer, tmp_path: Path
) -> None:
    pid_file = tmp_path / "child.pid"
    agent = ProgramAgent([sys.executable, "-c", SLEEPER, str(pid_file)], timeout=120)  # the rollout's 4 s win
    started = time.monotonic()
    store = train(agent, backend, QUESTIONS[:1], n_runners=1, rollout_hooks=ShortRollouts())
    assert time.monotonic() - started < 60
    rollout = run(store.query_rollouts())[0]
    assert run(store.query_attempts(rollout.rollout_id))[-1].status == "timeout"
    program = program_span(run(store.query_spans(rollout.rollout_id, "latest")))
    assert program["agl.program.timed_out"] is True and program["agl.program.stdout_tail"] == "started\n"
    assert _gone(int(pid_file.read_text())), "the program's child survived the timeout"


async def test_a_cancelled_launch_ends_the_process_group(tmp_path: Path) -> None:
    from agl_core.program import LocalLauncher, ProgramLaunch

    pid_file = tmp_path / "child.pid"
    launch = ProgramLaunch([sys.executable, "-c", SLEEPER, str(pid_file)], dict(os.environ), tmp_path)
    task = asyncio.ensure_future(LocalLauncher(kill_grace=2.0).run(launch))
    for _ in range(400):  # bounded wait until the program has started its child
        if pid_file.exists() and pid_file.read_text():
            break
        await asyncio.sleep(0.025)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 30)
    assert await asyncio.to_thread(_gone, int(pid_file.read_text())), "the child survived the cancellation"


def test_a_reward_file_that_is_not_a_reward_fails_the_attempt_saying_so(backend: FakeOpenAIServer) -> None:
    script = "import os; open(os.environ['AGL_REWARD_FILE'], 'w').write('great job')"
    store = train(ProgramAgent([sys.executable, "-c", script]), backend, QUESTIONS[:1], n_runners=1)
    rollout = run(store.query_rollouts())[0]
    assert rollout.status == "failed"
    [error] = [
        s
        for s in run(store.query_spans(rollout.rollout_id, "latest"))
        if s.name == "agentlightning.exception"
    ]
    assert "'great job'; a reward is a finite number" in error.attributes["exception.message"]


def test_a_missing_program_fails_with_a_clear_reason(backend: FakeOpenAIServer) -> None:
    store = train(ProgramAgent(["no-such-program-agl", "x"]), backend, QUESTIONS[:1], n_runners=1)
    rollout = run(store.query_rollouts())[0]
    assert rollout.status == "failed"
    [error] = [
        s
        for s in run(store.query_spans(rollout.rollout_id, "latest"))
        if s.name == "agentlightning.exception"
    ]
    assert "could not be started" in error.attributes["exception.message"]


def test_template_folder_is_copied_per_attempt_and_stdin_gets_the_input(
    backend: FakeOpenAIServer, tmp_path: Path
) -> None:
    template = tmp_path / "template"
    template.mkdir()
    (template / "seed.txt").write_text("seed")
    script = (
        "import json, os, sys, pathlib; task = json.load(sys.stdin); assert sys.argv[1] == os.getcwd(); "
        "pathlib.Path('seed.txt').write_text('changed'); "
        "print(json.dumps({'reward': task['id'] + len(open('seed.txt').read())}))"
    )
    agent = ProgramAgent([sys.executable, "-c", script, "{work_dir}"], stdin="{input}", template_dir=template)
    store = train(agent, backend, QUESTIONS[:3])
    rewards = sorted(
        find_final_reward(run(store.query_spans(r.rollout_id, "latest"))) for r in run(store.query_rollouts())
    )
    assert rewards == [7.0, 8.0, 9.0]
    assert (template / "seed.txt").read_text() == "seed"


def test_a_program_agent_pickles_for_process_and_ray_runners() -> None:
    agent = chat_agent(timeout=5.0)
    copy = pickle.loads(pickle.dumps(agent))
    assert isinstance(copy, ProgramAgent) and copy.argv == agent.argv and copy.env_map == agent.env_map


def test_a_git_worktree_per_attempt_is_checked_out_and_removed(
    backend: FakeOpenAIServer, tmp_path: Path
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q"], check=True)
    (repo / "answer.txt").write_text("1.5")
    subprocess.run([*git, "add", "answer.txt"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "seed"], check=True)
    script = (
        "import pathlib, subprocess; value = pathlib.Path('answer.txt').read_text(); "
        "pathlib.Path('answer.txt').write_text('changed'); "
        "dirty = subprocess.run(['git', 'status', '--porcelain'], capture_output=True, text=True).stdout; "
        "print(dirty.strip()); print('{\"reward\": ' + value + '}')"
    )
    store = train(ProgramAgent([sys.executable, "-c", script], git_repo=repo), backend, QUESTIONS[:2])
    for rollout in run(store.query_rollouts()):
        spans = run(store.query_spans(rollout.rollout_id, "latest"))
        assert find_final_reward(spans) == 1.5
        assert (
            program_span(spans)["agl.program.stdout_tail"].splitlines()[0] == "M answer.txt"
        )  # no agl files
    listed = subprocess.run([*git, "worktree", "list"], capture_output=True, text=True, check=True).stdout
    assert len(listed.strip().splitlines()) == 1  # the attempts' worktrees are gone
    assert (repo / "answer.txt").read_text() == "1.5"


def test_bad_arguments_say_what_to_write() -> None:
    with pytest.raises(ValueError, match="non-empty list of strings"):
        ProgramAgent("node agent.js")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not both"):
        ProgramAgent(["x"], template_dir=".", git_repo=".")
