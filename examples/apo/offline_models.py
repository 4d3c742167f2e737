"""Scripted stand-ins for the task model and the optimizer, so the example runs offline.

Served by ``agl_testing.fake_openai.FakeOpenAIServer``; they answer by the request's model name:

* ``offline-task`` books a room the way a literal-minded model would: it applies only the rules its prompt
  states (enough seats, free at that time, required equipment, smallest suitable room) and otherwise takes
  the first room listed. A prompt's score therefore depends on which rules it spells out.
* ``offline-critic`` reads the prompt under review and names one or two rules it does not state yet.
* ``offline-editor`` appends one sentence per rule named in the critique to the prompt.
"""

from __future__ import annotations

import random
import re
import threading
from typing import Any

from agl_testing.fake_openai import Reply, last_user_text

TASK_MODEL = "offline-task"
CRITIC_MODEL = "offline-critic"
EDITOR_MODEL = "offline-editor"

RULES: dict[str, tuple[str, str, str]] = {
    # rule: (keyword the task model reacts to, the critique's finding, the sentence the editor adds)
    "seats": (
        "capacity",
        "Several answers picked rooms with fewer seats than attendees.",
        "Only consider rooms whose capacity is at least the number of attendees.",
    ),
    "time": (
        "available",
        "Some answers picked rooms that are reserved at the requested time.",
        "Skip rooms that are not available at the requested time.",
    ),
    "equipment": (
        "equipment",
        "Requests that need a projector got rooms without one.",
        "If the request needs equipment such as a projector, the room must have it.",
    ),
    "smallest": (
        "smallest",
        "Answers often picked a larger room than needed.",
        "Among the suitable rooms, book the smallest one.",
    ),
}

_ROOM = re.compile(r"^- (\w+): seats (\d+), projector: (yes|no), reserved: (.*)$", re.MULTILINE)
_TEMPLATE = re.compile(r"<prompt_template>\n(.*?)\n</prompt_template>", re.DOTALL)
_PEOPLE = re.compile(r"for (\d+) people at (\d\d:\d\d)")


class OfflineModels:
    """The ``script`` of the fake server (see the module docstring)."""

    def __init__(self, seed: int = 0) -> None:
        self._rng = random.Random(seed)
        self._lock = threading.Lock()

    def __call__(self, request: dict[str, Any]) -> Reply:
        model = request.get("model")
        text = last_user_text(request)
        if model == TASK_MODEL:
            return Reply(content=self.book(text))
        if model == CRITIC_MODEL:
            return Reply(content=self.critique(text))
        if model == EDITOR_MODEL:
            return Reply(content=self.edit(text))
        return Reply(content=f"The offline models are {TASK_MODEL}, {CRITIC_MODEL} and {EDITOR_MODEL}.")

    @staticmethod
    def book(prompt: str) -> str:
        """Pick a room by the rules the prompt states."""
        rooms = _ROOM.findall(prompt)
        request = _PEOPLE.search(prompt)
        if not rooms or request is None:
            return "I cannot tell which room to book."
        attendees, time = int(request.group(1)), request.group(2)
        needs_projector = "with a projector" in prompt
        wording = prompt.lower()
        candidates = [
            (name, int(seats), projector == "yes", reserved) for name, seats, projector, reserved in rooms
        ]
        if RULES["seats"][0] in wording:
            candidates = [c for c in candidates if c[1] >= attendees]
        if RULES["time"][0] in wording:
            candidates = [c for c in candidates if time not in c[3]]
        if RULES["equipment"][0] in wording and needs_projector:
            candidates = [c for c in candidates if c[2]]
        if not candidates:
            return "No room fits."
        if RULES["smallest"][0] in wording:
            candidates.sort(key=lambda c: (c[1], c[0]))
        return f"I would book {candidates[0][0]}."

    def critique(self, user: str) -> str:
        """Name one or two rules the prompt under review does not state."""
        match = _TEMPLATE.search(user)
        template = (match.group(1) if match else "").lower()
        missing = [rule for rule, (keyword, _, _) in RULES.items() if keyword not in template]
        if not missing:
            return "The prompt covers the rules the runs depend on."
        with self._lock:
            picked = self._rng.sample(missing, min(len(missing), self._rng.choice([1, 2])))
        return "\n".join(f"- [{rule}] {RULES[rule][1]}" for rule in picked)

    @staticmethod
    def edit(user: str) -> str:
        """Append the sentence of every rule the critique names."""
        match = _TEMPLATE.search(user)
        template = match.group(1) if match else ""
        critique = user.split("<critique>", 1)[-1]
        added = [RULES[rule][2] for rule in RULES if f"[{rule}]" in critique]
        return "<prompt>" + "\n".join([template, *added]) + "</prompt>"
