"""A meeting-room booking agent whose prompt APO improves, with a deterministic checker.

Each task is a booking request (attendees, time, whether a projector is needed) and a list of rooms (seats,
projector, reserved slots). The right answer is the smallest room that has enough seats, is free at that
time and has a projector when one is needed (ties: alphabetical). The agent asks an LLM, and the checker
gives reward 1 for the right room, 0.5 for a room that works but is larger than needed, else 0.

The seed prompt states none of these rules, so a model has to guess them; APO's critiques find them from
the low-reward runs.
"""

from __future__ import annotations

import asyncio
import random
import re
from typing import Any, TypedDict

import openai

import agl_core as agl

__all__ = [
    "SEED_PROMPT",
    "BookingTask",
    "Room",
    "best_room",
    "make_tasks",
    "parse_choice",
    "room_booking_agent",
    "score_answer",
]

SEED_PROMPT = (
    "You help people book meeting rooms.\n\nRequest: {request}\n\nRooms:\n{rooms}\n\nWhich room do you book?"
)
"""The prompt APO starts from (an ``f-string`` template with ``{request}`` and ``{rooms}``)."""

_NAMES = ["Aurora", "Birch", "Cedar", "Delta", "Ember", "Fjord", "Garnet", "Harbor", "Iris", "Juniper"]
_SLOTS = ["09:00", "10:00", "11:00", "13:00", "14:00", "15:00", "16:00"]


class Room(TypedDict):
    """One meeting room."""

    name: str
    seats: int
    projector: bool
    reserved: list[str]


class BookingTask(TypedDict):
    """One booking request with the rooms to choose from and the right answer."""

    request: str
    attendees: int
    time: str
    needs_projector: bool
    rooms: list[Room]
    expected: str


def _fits(room: Room, task: BookingTask) -> bool:
    return (
        room["seats"] >= task["attendees"]
        and task["time"] not in room["reserved"]
        and (room["projector"] or not task["needs_projector"])
    )


def best_room(task: BookingTask) -> str | None:
    """The smallest suitable room (ties: alphabetical), or None when no room works."""
    suitable = [room for room in task["rooms"] if _fits(room, task)]
    if not suitable:
        return None
    return min(suitable, key=lambda room: (room["seats"], room["name"]))["name"]


def make_tasks(count: int, *, seed: int = 0) -> list[BookingTask]:
    """``count`` reproducible tasks, each with exactly one right room."""
    rng = random.Random(seed)
    tasks: list[BookingTask] = []
    while len(tasks) < count:
        rooms: list[Room] = [
            {
                "name": name,
                "seats": rng.choice([2, 4, 6, 8, 10, 14]),
                "projector": rng.random() < 0.5,
                "reserved": sorted(rng.sample(_SLOTS, rng.randint(0, 3))),
            }
            for name in rng.sample(_NAMES, 5)
        ]
        attendees, time = rng.randint(2, 10), rng.choice(_SLOTS)
        needs_projector = rng.random() < 0.5
        equipment = " with a projector" if needs_projector else ""
        task: BookingTask = {
            "request": f"Book a room for {attendees} people at {time}{equipment}.",
            "attendees": attendees,
            "time": time,
            "needs_projector": needs_projector,
            "rooms": rooms,
            "expected": "",
        }
        answer = best_room(task)
        if answer is not None:
            task["expected"] = answer
            tasks.append(task)
    return tasks


def format_rooms(rooms: list[Room]) -> str:
    """The rooms as the prompt lists them, one per line."""
    lines = []
    for room in rooms:
        reserved = ", ".join(room["reserved"]) or "none"
        projector = "yes" if room["projector"] else "no"
        lines.append(f"- {room['name']}: seats {room['seats']}, projector: {projector}, reserved: {reserved}")
    return "\n".join(lines)


def parse_choice(answer: str, task: BookingTask) -> str | None:
    """The room the answer picks: the only room it names, else the last one named on its last line."""
    names = [room["name"] for room in task["rooms"]]
    mentioned = [name for name in names if re.search(rf"\b{name}\b", answer, re.IGNORECASE)]
    if len(mentioned) == 1:
        return mentioned[0]
    last_line = answer.strip().splitlines()[-1] if answer.strip() else ""
    on_last = [
        (m.start(), name) for name in names for m in re.finditer(rf"\b{name}\b", last_line, re.IGNORECASE)
    ]
    return max(on_last)[1] if on_last else None


def score_answer(answer: str, task: BookingTask) -> float:
    """1 for the right room, 0.5 for a suitable but larger room, 0 otherwise."""
    choice = parse_choice(answer, task)
    if choice == task["expected"]:
        return 1.0
    room = next((r for r in task["rooms"] if r["name"] == choice), None)
    return 0.5 if room is not None and _fits(room, task) else 0.0


_clients: dict[tuple[int, str, str], openai.AsyncOpenAI] = {}


def _client(llm: agl.LLM) -> openai.AsyncOpenAI:
    """One client per event loop and endpoint (clients hold connections bound to their loop)."""
    key = (id(asyncio.get_running_loop()), llm.endpoint, llm.api_key or "")
    if key not in _clients:
        _clients[key] = openai.AsyncOpenAI(
            base_url=llm.endpoint, api_key=llm.api_key or "EMPTY", max_retries=3
        )
    return _clients[key]


@agl.rollout
async def room_booking_agent(task: BookingTask, prompt_template: agl.PromptTemplate, llm: agl.LLM) -> float:
    """Ask the model which room to book; the reward is the checker's score of its answer."""
    prompt = prompt_template.format(request=task["request"], rooms=format_rooms(task["rooms"]))
    extra: dict[str, Any] = dict(llm.sampling_parameters)
    response = await _client(llm).chat.completions.create(
        model=llm.model, messages=[{"role": "user", "content": prompt}], timeout=120, **extra
    )
    return score_answer(response.choices[0].message.content or "", task)
