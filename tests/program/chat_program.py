"""A program agent for the tests: one chat call per task with the official openai client, configured by env.

It reads the question from argv[1], the system prompt from $SYSTEM_PROMPT (when set), calls the model at
$OPENAI_BASE_URL with $AGL_LLM_MODEL, and reports reward 1 on its last stdout line when the (echo) model
repeated the question. ``--reward-file`` writes the reward with ``agl reward`` instead; ``--exit N`` exits
with code N after the call; ``--sleep`` sleeps (for timeouts) after starting a child that sleeps too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time


def main(argv: list[str]) -> int:
    question = argv[1]
    if "--sleep" in argv:
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
        print(json.dumps({"child": child.pid}), flush=True)
        time.sleep(300)
    import openai  # after --sleep, so a slow import does not eat the timeout

    client = openai.OpenAI(max_retries=0, timeout=30)
    messages = [{"role": "user", "content": question}]
    if os.environ.get("SYSTEM_PROMPT"):
        messages.insert(0, {"role": "system", "content": os.environ["SYSTEM_PROMPT"]})
    reply = client.chat.completions.create(model=os.environ["AGL_LLM_MODEL"], messages=messages)  # type: ignore[arg-type]
    reward = 1.0 if reply.choices[0].message.content == question else 0.0
    print("thinking done", file=sys.stderr)
    if "--exit" in argv:
        return int(argv[argv.index("--exit") + 1])
    if "--reward-file" in argv:
        subprocess.run([sys.executable, "-m", "agl_core.cli", "reward", str(reward)], check=True)
    else:
        print(json.dumps({"reward": reward}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
