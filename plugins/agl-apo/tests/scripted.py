"""Scripted model behaviour for `FakeOpenAIServer`: a critic, an editor and a task model.

The task: repeat a word in upper case. The task model only upper-cases when its prompt says "uppercase",
so a prompt's accuracy depends on whether it contains that instruction: the seed prompt scores about 1/3
(the share of words already in upper case), a prompt with the instruction scores 1.0.

The editor cycles through three behaviours, by call number: a good edit (adds the instruction), a neutral
edit (adds an unrelated sentence) and a broken edit (drops the ``{word}`` placeholder, which APO must
reject).
"""

from __future__ import annotations

import itertools
import re
import threading
from collections import Counter
from typing import Any

from agl_testing.fake_openai import Reply, last_user_text

TASK_MODEL = "fake-task"
CRITIC_MODEL = "fake-critic"
EDITOR_MODEL = "fake-editor"
INSTRUCTION = "Always answer in UPPERCASE letters."
SEED_TEMPLATE = "Repeat the word <{word}> and nothing else."

_WORD = re.compile(r"<([A-Za-z]+)>")
_TEMPLATE = re.compile(r"<prompt_template>\n(.*?)\n</prompt_template>", re.DOTALL)


def make_tasks(count: int, *, offset: int = 0) -> list[dict[str, str]]:
    """``count`` tasks; every third word is already upper case."""
    words = [
        "apple",
        "river",
        "NASA",
        "stone",
        "cloud",
        "HTML",
        "maple",
        "tiger",
        "UNIX",
        "piano",
        "ocean",
        "LASER",
    ]
    picked = [words[(i + offset) % len(words)] for i in range(count)]
    return [{"word": word, "expected": word.upper()} for word in picked]


class ScriptedModels:
    """The ``script`` callable: answers by the request's model name. Thread-safe call counting."""

    def __init__(self) -> None:
        self._edits = itertools.count()
        self._lock = threading.Lock()
        self.calls: Counter[str] = Counter()
        self.temperatures: list[tuple[str, Any]] = []
        self.critic_prompts: list[str] = []

    def __call__(self, request: dict[str, Any]) -> Reply:
        model = str(request.get("model"))
        with self._lock:
            self.calls[model] += 1
            self.temperatures.append((model, request.get("temperature", "<absent>")))
        if model == TASK_MODEL:
            return Reply(content=self._task(request))
        if model == CRITIC_MODEL:
            with self._lock:
                self.critic_prompts.append(last_user_text(request))
            return Reply(content=self._critique(last_user_text(request)))
        if model == EDITOR_MODEL:
            with self._lock:
                number = next(self._edits)
            return Reply(content=self._edit(last_user_text(request), number))
        return Reply(content=f"unknown model {model}")

    @staticmethod
    def _prompt_text(request: dict[str, Any]) -> str:
        return "\n".join(str(m.get("content", "")) for m in request.get("messages", []))

    def _task(self, request: dict[str, Any]) -> str:
        text = self._prompt_text(request)
        match = _WORD.search(text)
        word = match.group(1) if match else "?"
        return word.upper() if "uppercase" in text.lower() else word

    @staticmethod
    def _critique(user: str) -> str:
        template = _TEMPLATE.search(user)
        if template and "uppercase" in template.group(1).lower():
            return "The prompt works; the runs with reward 1 followed it."
        return "- The agent repeated lowercase words as they were, but answers must be upper case."

    @staticmethod
    def _edit(user: str, number: int) -> str:
        match = _TEMPLATE.search(user)
        template = match.group(1) if match else SEED_TEMPLATE
        kind = number % 3
        if kind == 0 and "uppercase" not in template.lower():
            return f"<prompt>{template}\n{INSTRUCTION}</prompt>"
        if kind == 2:
            return f"<prompt>{template.replace('{word}', 'the word')}</prompt>"
        return f"<prompt>{template}\nBe brief (note {number}).</prompt>"
