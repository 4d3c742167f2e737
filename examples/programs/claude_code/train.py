"""Train Claude Code (npm ``@anthropic-ai/claude-code``, unchanged, default settings) as a program agent.

Claude Code calls the Anthropic Messages API at ``ANTHROPIC_BASE_URL`` with ``ANTHROPIC_API_KEY``; agl
points them at the proxy's route for each attempt (the proxy translates Messages to the model server's
chat API and back, and records every call with its token ids). It runs headless (``-p``) in the attempt's
fresh working folder, with that folder as its ``HOME`` (so its settings and session files start empty and
go away with the folder), may run its ``Bash`` tool, gets the ``prompt`` resource appended to its own
system prompt, and prints a JSON result whose ``result`` a reward hook scores.

The CLI is installed from ``examples/programs/clis`` (pinned versions) into ``.agl/npm`` by
``npm_clis()`` of ``driver.py``; ``python train.py`` does that first.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from driver import main, npm_clis  # noqa: E402
from tasks import reward  # noqa: E402

import agl_core as agl  # noqa: E402
from agl_core.program import ProgramOutcome  # noqa: E402
from agl_testing.agent_clis import claude_command  # noqa: E402


def score(outcome: ProgramOutcome) -> float:
    """The reward hook: the ``result`` of Claude Code's JSON output against the expected answer."""
    lines = [line for line in outcome.exit.stdout_tail.splitlines() if line.strip()]
    result = json.loads(lines[-1]).get("result", "") if lines else ""
    return reward(str(result), str(outcome.rollout.input["expected"]))


def claude_agent(prefix: Path) -> agl.ProgramAgent:
    """Claude Code once per rollout: headless, JSON output, its Bash tool allowed."""
    return agl.ProgramAgent(
        [
            *claude_command(prefix),
            *("-p", "{input.question}", "--output-format", "json", "--allowedTools", "Bash"),
            *("--append-system-prompt", "{resources.prompt.template}"),
        ],
        env={"HOME": "{work_dir}"},
        inherit_env=False,
        reward=score,
        timeout=300,
    )


if __name__ == "__main__":
    main(lambda: claude_agent(npm_clis()), model="*", doc=__doc__)
