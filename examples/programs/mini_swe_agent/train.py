"""Train mini-swe-agent (``mini``, from PyPI, unchanged) as a program agent: ``python train.py``.

mini-swe-agent is a shell agent: every step is one ``bash`` tool call, run in its working folder, and it
finishes with a command whose output starts with ``COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT``; the rest of the
output is its submission, saved in its trajectory file. It calls the model through LiteLLM, which reads
``OPENAI_API_BASE`` / ``OPENAI_BASE_URL`` and ``OPENAI_API_KEY``; agl points them at the proxy's route for
each attempt. The system prompt is the ``prompt`` resource (``-c agent.system_template=...``), and a
reward hook scores the submission in the trajectory file the attempt's working folder holds.
"""

from __future__ import annotations

import json
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
"""The model name LiteLLM sends (``-m openai/gpt-4o-mini``: the OpenAI protocol, this name)."""

ENV = {
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # no download of LiteLLM's price list at start-up
    "MSWEA_COST_TRACKING": "ignore_errors",  # a local model has no price
    "MSWEA_CONFIGURED": "true",  # no first-run setup questions
    "MSWEA_SILENT_STARTUP": "1",
    "MSWEA_GLOBAL_CONFIG_DIR": ".mswea",  # its config in the attempt's working folder, not ~/.config
}


def score(outcome: ProgramOutcome) -> float:
    """The reward hook: the submission in mini's trajectory file against the task's expected answer."""
    trajectory = json.loads((outcome.work_dir / "traj.json").read_text())
    submission = str(trajectory.get("info", {}).get("submission", ""))
    return reward(submission, str(outcome.rollout.input["expected"]))


def mini_agent() -> agl.ProgramAgent:
    """``mini`` once per rollout, without confirmations, ending as soon as it submits."""
    executable = shutil.which("mini")
    if executable is None:
        raise SystemExit(
            "mini-swe-agent is not on PATH: pip install mini-swe-agent (make test-programs does)."
        )
    return agl.ProgramAgent(
        [
            executable,
            *("-m", f"openai/{MODEL}", "--yolo", "--exit-immediately", "-o", "traj.json"),
            *("-c", "mini.yaml", "-c", "agent.system_template={resources.prompt.template}"),
            *("-t", "{input.question}"),
        ],
        env=ENV,
        reward=score,
        timeout=300,
    )


if __name__ == "__main__":
    main(mini_agent, model=MODEL, doc=__doc__)
