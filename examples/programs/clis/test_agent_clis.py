"""Claude Code, the Codex CLI (npm) and ``llm`` (PyPI), as shipped, through the LLM proxy to a fake model.

Each CLI runs headless with its default settings except the base URL (and, for Codex, a model
provider naming the proxy's Responses endpoint), once with a plain task and once with a task that makes
it run a tool. Every model call must be recorded as one span with the exact token ids the model server
returned, and ``agl doctor`` must find one training triplet per call and no problem but the missing reward
(rewards are the program's to report; not part of this test).

Run with ``make test-harnesses`` (installs the CLIs pinned in this folder's package-lock.json into
``.agl/npm/`` once; skipped when npm is missing). ``AGL_HARNESS_REPORT=path`` writes the table.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator, Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pytest

from agl_core.adapter.doctor import diagnose_rollout
from agl_core.llm_proxy import HttpBackend, LLMProxy
from agl_core.llm_proxy.urls import rollout_urls
from agl_core.store.memory import InMemoryLightningStore
from agl_testing.agent_clis import (
    NpmMissingError,
    claude_command,
    claude_env,
    codex_command,
    codex_env,
    install_agent_clis,
    install_python_clis,
    llm_env,
)
from agl_testing.fake_openai import FakeOpenAIServer, Reply, ToolCall, render_chat_prompt

HERE = Path(__file__).resolve().parent
PREFIX = HERE.parents[2] / ".agl" / "npm"
PYTHON_CLIS = HERE.parents[2] / ".agl" / "python-clis"
RUN_TIMEOUT_S = 240.0
TOOL_TASK = "TOOLTASK: print the word hello-from-the-tool with a shell command"
PLAIN_TASK = "Say hello."
PLAIN_REPLY = "Hello from the fake model."
TOOL_REPLY = "The tool ran."

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def clis() -> Path:
    try:
        return install_agent_clis(HERE, PREFIX)
    except NpmMissingError as exc:
        pytest.skip(f"agent CLI tests need npm: {exc}")


def _conversation(request: dict[str, Any]) -> list[dict[str, Any]]:
    """The non-system turns (Claude Code puts a system message after the user's)."""
    return [m for m in request.get("messages") or [] if m.get("role") != "system"]


def model(request: dict[str, Any]) -> Reply:
    """The fake model: runs the harness's shell tool once for the tool task, else answers in text."""
    turns = _conversation(request)
    last = turns[-1] if turns else {}
    if last.get("role") == "tool":
        return Reply(content=TOOL_REPLY)
    if TOOL_TASK not in json.dumps(last.get("content")):
        return Reply(content=PLAIN_REPLY)
    tools = {t["function"]["name"] for t in request.get("tools") or []}
    if "Bash" in tools:  # Claude Code
        arguments = {"command": "echo hello-from-the-tool", "description": "Print a word"}
        return Reply(tool_calls=[ToolCall("Bash", arguments)])
    if "multiply" in tools:  # llm, with the Python function the test gives it
        return Reply(tool_calls=[ToolCall("multiply", {"x": 6, "y": 7})])
    if "functions__exec" in tools:  # Codex: its namespaced free-form `exec` tool runs JavaScript
        code = (
            'const r = await tools.exec_command({cmd: "echo hello-from-the-tool"}); text(JSON.stringify(r));'
        )
        return Reply(tool_calls=[ToolCall("functions__exec", {"input": code})])
    raise AssertionError(f"no known shell tool among {sorted(tools)}")


@pytest.fixture(scope="module")
def python_clis() -> Path:
    return install_python_clis(HERE / "requirements.txt", PYTHON_CLIS)


MULTIPLY = 'def multiply(x: int, y: int) -> int:\n    "Multiply two integers."\n    return x * y\n'


@dataclass
class Run:
    """What one CLI run did and what the proxy recorded."""

    harness: str
    task: str
    exit_code: int
    calls_made: int
    calls_recorded: int
    exact_token_ids: int
    triplets: int
    doctor_errors: list[str]
    doctor_codes: list[str]
    default_doctor_codes: list[str]
    output_tail: str


@dataclass
class Rig:
    store: InMemoryLightningStore
    proxy: LLMProxy
    fake: FakeOpenAIServer


@pytest.fixture
async def rig() -> AsyncIterator[Rig]:
    store = InMemoryLightningStore()
    async with FakeOpenAIServer(model) as fake:
        backend = HttpBackend(url=fake.base_url, return_token_ids=True, logprobs=True)
        proxy = LLMProxy({"*": [backend]}, store=store)
        await proxy.start()
        try:
            yield Rig(store, proxy, fake)
        finally:
            await proxy.stop()


async def _run(
    rig: Rig,
    harness: str,
    task: str,
    argv: Callable[[str], list[str]],
    env: Callable[[dict[str, str]], dict[str, str]],
    workdir: Path,
) -> Run:
    attempted = await rig.store.start_rollout({"task": task})
    urls = rollout_urls(rig.proxy.endpoint, attempted.rollout_id, attempted.attempt.attempt_id)
    before = len(rig.fake.requests)
    process = await asyncio.create_subprocess_exec(
        *argv(task),
        cwd=workdir,
        env=env(urls),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        output, _ = await asyncio.wait_for(process.communicate(), RUN_TIMEOUT_S)
    except asyncio.TimeoutError:
        os.killpg(process.pid, 9)
        await process.wait()
        raise AssertionError(f"{harness} did not finish within {RUN_TIMEOUT_S:.0f}s") from None
    assert await rig.proxy.flush(10.0)
    made = [r for r in rig.fake.requests[before:] if r.path.endswith("/chat/completions")]
    spans = sorted(await rig.store.query_spans(attempted.rollout_id, "latest"), key=lambda s: s.sequence_id)
    recorded = [s for s in spans if s.name == "agl.llm_proxy.request" and s.status.status_code == "OK"]
    exact = 0
    for span, request in zip(recorded, made, strict=False):
        prompt_ids = span.attributes.get("prompt_token_ids")
        response_ids = span.attributes.get("response_token_ids")
        expected = rig.fake.tokenizer.encode(
            render_chat_prompt(request.body["messages"], request.body.get("tools"))
        )
        if prompt_ids == expected and response_ids and rig.fake.tokenizer.decode(response_ids):
            exact += 1
    doctor = await diagnose_rollout(rig.store, attempted.rollout_id, adapter="proxy-triplet")
    default = await diagnose_rollout(rig.store, attempted.rollout_id)  # `agl doctor`'s default adapter
    return Run(
        harness,
        "tool" if task == TOOL_TASK else "plain",
        process.returncode or 0,
        len(made),
        len(recorded),
        exact,
        len(doctor.report.triplets),
        [p.code for p in doctor.report.problems if p.severity == "error"],
        doctor.report.codes(),
        default.report.codes(),
        output.decode(errors="replace")[-1500:],
    )


def _report(run: Run) -> None:
    path = os.environ.get("AGL_HARNESS_REPORT")
    if path:
        with open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps(asdict(run)) + "\n")


def _check(run: Run, expected_text: str) -> None:
    _report(run)
    assert run.exit_code == 0, run.output_tail
    assert expected_text in run.output_tail, run.output_tail
    assert run.calls_made >= (2 if run.task == "tool" else 1), run
    assert run.calls_recorded == run.calls_made == run.exact_token_ids, run
    # Rewards are the program's to report (not part of this test): doctor finds nothing else wrong.
    assert run.doctor_errors == ["no_reward"], run
    assert run.triplets == run.calls_made, run


@pytest.mark.parametrize("task", [PLAIN_TASK, TOOL_TASK])
async def test_claude_code_records_every_call_with_exact_token_ids(
    clis: Path, rig: Rig, tmp_path: Path, task: str
) -> None:
    command = claude_command(clis)
    run = await _run(
        rig,
        "claude-code",
        task,
        lambda t: [*command, "-p", t, "--output-format", "json", "--allowedTools", "Bash"],
        lambda urls: claude_env(tmp_path / "home", urls["ANTHROPIC_BASE_URL"]),
        tmp_path,
    )
    _check(run, TOOL_REPLY if task == TOOL_TASK else PLAIN_REPLY)
    if task == TOOL_TASK:  # the tool really ran and its output went back to the model
        made = [r for r in rig.fake.requests if r.path.endswith("/chat/completions")]
        assert "hello-from-the-tool" in json.dumps(made[-1].body["messages"][-1])


@pytest.mark.parametrize("task", [PLAIN_TASK, TOOL_TASK])
async def test_codex_records_every_call_with_exact_token_ids(
    clis: Path, rig: Rig, tmp_path: Path, task: str
) -> None:
    command = codex_command(clis)
    run = await _run(
        rig,
        "codex",
        task,
        lambda t: [*command, "exec", "--skip-git-repo-check", t],
        lambda urls: codex_env(tmp_path / "home", urls["OPENAI_BASE_URL"]),
        tmp_path,
    )
    _check(run, TOOL_REPLY if task == TOOL_TASK else PLAIN_REPLY)
    if task == TOOL_TASK:
        made = [r for r in rig.fake.requests if r.path.endswith("/chat/completions")]
        assert "hello-from-the-tool" in json.dumps(made[-1].body["messages"][-1])


@pytest.mark.parametrize("task", [PLAIN_TASK, TOOL_TASK])
async def test_llm_records_every_call_with_exact_token_ids(
    python_clis: Path, rig: Rig, tmp_path: Path, task: str
) -> None:
    tools = ["--functions", MULTIPLY] if task == TOOL_TASK else []
    run = await _run(
        rig,
        "llm",
        task,
        lambda t: [str(python_clis / "llm"), "-m", "gpt-4o-mini", *tools, t],
        lambda urls: llm_env(tmp_path / "home", urls["OPENAI_BASE_URL"]),
        tmp_path,
    )
    _check(run, TOOL_REPLY if task == TOOL_TASK else PLAIN_REPLY)
    if task == TOOL_TASK:  # the function ran and its result went back to the model
        made = [r for r in rig.fake.requests if r.path.endswith("/chat/completions")]
        assert made[-1].body["messages"][-1] | {"tool_call_id": None} == {
            "role": "tool",
            "tool_call_id": None,
            "content": "42",
        }


@pytest.mark.parametrize("harness", ["claude-code", "codex"])
async def test_the_cli_behaves_the_same_straight_to_the_model_server(
    clis: Path, rig: Rig, tmp_path: Path, harness: str
) -> None:
    """Baseline: the same tool task against the fake model directly makes the same calls, same answer."""
    base = rig.fake.base_url
    if harness == "claude-code":
        argv = [*claude_command(clis), "-p", TOOL_TASK, "--output-format", "json", "--allowedTools", "Bash"]
        env = claude_env(tmp_path / "direct", base.removesuffix("/v1"))
    else:
        argv = [*codex_command(clis), "exec", "--skip-git-repo-check", TOOL_TASK]
        env = codex_env(tmp_path / "direct", base)
    before = len(rig.fake.requests)
    done = await asyncio.create_subprocess_exec(
        *argv, cwd=tmp_path, env=env, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE
    )
    output, _ = await asyncio.wait_for(done.communicate(), RUN_TIMEOUT_S)
    direct = [r.path for r in rig.fake.requests[before:]]
    assert done.returncode == 0 and TOOL_REPLY in output.decode(errors="replace")
    assert len(direct) == 2 and all(path.endswith(("/messages", "/responses")) for path in direct)
