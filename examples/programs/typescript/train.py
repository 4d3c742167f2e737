"""Train the TypeScript agent (src/agent.ts, unchanged) as a program agent: ``python train.py``.

Build it first: ``npm ci && npm run build`` in this folder. Offline by default (a scripted fake model on a
local port); ``--model-url http://host:8000/v1 --model NAME`` uses a real OpenAI-compatible server.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from driver import main  # noqa: E402

import agl_core as agl  # noqa: E402

AGENT_JS = HERE / "dist" / "agent.js"


def typescript_agent() -> agl.ProgramAgent:
    """The compiled agent, run by node once per rollout; agl hands it its settings through the environment."""
    if not AGENT_JS.is_file():
        raise SystemExit(f"{AGENT_JS} is missing: run `npm ci && npm run build` in {HERE}.")
    node = shutil.which("node") or "node"
    return agl.ProgramAgent(
        [node, str(AGENT_JS), "{input.question}"],
        env_map={
            "SYSTEM_PROMPT": "resources.prompt.template",
            "MODEL": "resources.llm.model",
            "AGENT_TOOLS": "input.tools",
            "EXPECTED": "input.expected",
        },
        timeout=120,
    )


if __name__ == "__main__":
    main(typescript_agent, doc=__doc__)
