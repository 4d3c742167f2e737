"""Train the Codex CLI (npm ``@openai/codex``, unchanged) as a program agent: ``python train.py``.

Codex speaks the OpenAI Responses API to a *model provider*. Its settings are Codex's defaults except a
provider named ``agl``, given with ``-c`` overrides on the command line: the proxy's route for the attempt
(``{urls.OPENAI_BASE_URL}``), the key in ``OPENAI_API_KEY`` (ProgramAgent's dummy one) and the Responses
wire API; the proxy translates to the model server's chat API and records every call with its token ids.
``codex exec`` runs headless in the attempt's fresh working folder (also its ``HOME`` and ``CODEX_HOME``,
so nothing of the user's Codex setup is read or written), may run shell commands through its tools, gets
the ``prompt`` resource as ``developer_instructions``, and prints its last message, which a reward hook
scores.

The CLI is installed from ``examples/programs/clis`` (pinned versions) into ``.agl/npm`` by
``npm_clis()`` of ``driver.py``; ``python train.py`` does that first.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from driver import main, npm_clis  # noqa: E402
from tasks import reward  # noqa: E402

import agl_core as agl  # noqa: E402
from agl_core.program import ProgramOutcome  # noqa: E402
from agl_testing.agent_clis import codex_command  # noqa: E402

PROVIDER = (
    'model_provider="agl"',
    'model_providers.agl.name="agl LLM proxy"',
    'model_providers.agl.base_url="{urls.OPENAI_BASE_URL}"',
    'model_providers.agl.env_key="OPENAI_API_KEY"',
    'model_providers.agl.wire_api="responses"',
    "developer_instructions={resources.prompt.template|json}",  # a quoted string, whatever the prompt holds
)


def score(outcome: ProgramOutcome) -> float:
    """The reward hook: Codex prints its last message on stdout; score it against the expected answer."""
    return reward(outcome.exit.stdout_tail, str(outcome.rollout.input["expected"]))


def codex_agent(prefix: Path) -> agl.ProgramAgent:
    """``codex exec`` once per rollout, with the agl provider and the prompt resource as instructions."""
    overrides = [item for setting in PROVIDER for item in ("-c", setting)]
    return agl.ProgramAgent(
        [*codex_command(prefix), "exec", "--skip-git-repo-check", *overrides, "{input.question}"],
        env={"HOME": "{work_dir}", "CODEX_HOME": "{work_dir}"},
        inherit_env=False,
        reward=score,
        timeout=300,
    )


if __name__ == "__main__":
    main(lambda: codex_agent(npm_clis()), model="*", doc=__doc__)
