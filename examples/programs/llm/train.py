"""Train the `llm` CLI (llm.datasette.io, from PyPI, unchanged) as a program agent: ``python train.py``.

``llm`` talks to OpenAI models through the official openai client, which reads ``OPENAI_BASE_URL`` and
``OPENAI_API_KEY``; agl points them at the proxy's route for each attempt. The system prompt is the
``prompt`` resource (``-s``), the tool is a Python function (``--functions``), and a reward hook scores the
answer ``llm`` printed. Offline by default; ``--model-url URL`` uses a real OpenAI-compatible server, which
then gets llm's model name (``gpt-4o-mini``) unless the proxy maps it.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from driver import main  # noqa: E402
from tasks import reward  # noqa: E402

import agl_core as agl  # noqa: E402
from agl_core.program import ProgramOutcome  # noqa: E402

MODEL = "gpt-4o-mini"
"""One of llm's built-in OpenAI model names: llm sends it to OPENAI_BASE_URL as is."""

MULTIPLY = """def multiply(a: int, b: int) -> int:
    "Multiply two integers."
    return a * b
"""


def score(outcome: ProgramOutcome) -> float:
    """The reward hook: llm prints only its answer, so agl scores it after the program exits."""
    return reward(outcome.exit.stdout_tail, str(outcome.rollout.input["expected"]))


def llm_agent() -> agl.ProgramAgent:
    """``llm`` once per rollout: no logging (-n), the prompt resource as system prompt, one tool.

    Each attempt gets its own llm user folder (``LLM_USER_PATH``): llm creates and migrates its logs
    database there even with ``-n``, and rollouts running at once on a fresh machine would otherwise race
    on that one database (``UNIQUE constraint failed: _llm_migrations.name``).
    """
    executable = shutil.which("llm")
    if executable is None:
        raise SystemExit("the llm CLI is not on PATH: pip install llm (make test-programs installs it).")
    return agl.ProgramAgent(
        [
            executable,
            "-m",
            MODEL,
            "-n",
            "-s",
            "{resources.prompt.template}",
            "--functions",
            MULTIPLY,
            "{input.question}",
        ],
        env={"LLM_USER_PATH": "{work_dir}/.llm"},
        reward=score,
        timeout=120,
    )


if __name__ == "__main__":
    main(llm_agent, model=MODEL, doc=__doc__)
