"""The program agent of the CPU loop: a small command-line tool that answers a word problem.

    python word_problem_cli.py QUESTION EXPECTED CALL_LOG

agl's ``ProgramAgent`` starts it once per rollout attempt. It knows nothing of agl: it talks to "OpenAI"
with the official ``openai`` package, which reads ``OPENAI_BASE_URL`` and ``OPENAI_API_KEY`` (the
attempt's route on the agl LLM proxy). Two model calls (an answer, then a check of it); it prints the
final answer and, as its last line, ``{"reward": r}``. Each response's token ids, as the proxy returned
them from vLLM, are appended to CALL_LOG for the test to compare with the triplets.
"""

from __future__ import annotations

import json
import os
import re
import sys

import openai

SYSTEM = "You solve word problems. Reply with the number only."
CHECK = "Check your answer. Reply with the final number only."


def main(question: str, expected: int, call_log: str) -> float:
    """Ask, ask again to check, log the token ids; the reward favours a right, short final answer."""
    client = openai.OpenAI(max_retries=0, timeout=300)
    sampling = {"max_tokens": int(os.environ["MAX_TOKENS"]), "temperature": float(os.environ["TEMPERATURE"])}
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]
    replies = []
    for follow_up in (None, CHECK):
        if follow_up is not None:
            messages += [
                {"role": "assistant", "content": replies[-1].choices[0].message.content or ""},
                {"role": "user", "content": follow_up},
            ]
        replies.append(
            client.chat.completions.create(model=os.environ["AGL_LLM_MODEL"], messages=messages, **sampling)
        )
    with open(call_log, "a", encoding="utf-8") as log:
        for reply in replies:
            dumped = reply.model_dump()  # the SDK keeps fields it does not know (vLLM's token ids)
            record = {
                "rollout_id": os.environ["AGL_ROLLOUT_ID"],
                "prompt_token_ids": dumped.get("prompt_token_ids"),
                "token_ids": dumped["choices"][0].get("token_ids"),
            }
            log.write(json.dumps(record) + "\n")
    answer = replies[-1].choices[0].message.content or ""
    print(answer)
    numbers = re.findall(r"-?\d+", answer)
    length = sum(len(reply.model_dump()["choices"][0].get("token_ids") or []) for reply in replies)
    return float(bool(numbers) and int(numbers[-1]) == expected) - 0.01 * length


if __name__ == "__main__":
    reward = main(sys.argv[1], int(sys.argv[2]), sys.argv[3])
    print(json.dumps({"reward": reward}))
