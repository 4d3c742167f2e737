"""APO's own optimizer prompts: critiques ("textual gradients") and edits, and checks of edited templates.

Three critique styles and two edit styles are picked at random per child, which keeps a beam's children
different from each other. The prompts are plain chat messages (no POML renderer needed).
"""

from __future__ import annotations

import json
import re
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "EDIT_VARIANTS",
    "GRADIENT_VARIANTS",
    "Experiment",
    "PromptCheckError",
    "check_template",
    "edit_messages",
    "extract_prompt",
    "gradient_messages",
    "placeholders",
    "render_experiments",
]

_MAX_MESSAGE_CHARS = 1500
_MAX_EXPERIMENT_CHARS = 6000


@dataclass
class Experiment:
    """One rollout shown to the optimizer: its reward, status, task and LLM conversations."""

    reward: float | None
    status: str
    task: Any
    conversations: list[list[Mapping[str, Any]]] = field(default_factory=list)


# ---------------------------------------------------------------------------------------------- critiques

_CRITIC_ROLE = (
    "You improve the instructions given to an AI agent. You are shown the agent's current prompt "
    "template and logs of runs that used it, each with a reward between 0 (bad) and 1 (good). Base every "
    "claim on what the logs show; do not guess at tasks you were not shown."
)

GRADIENT_VARIANTS: dict[str, str] = {
    "failures": (
        "Study the low-reward runs. For each kind of mistake, say what the agent did, what it should have "
        "done, and which missing, vague or misleading part of the prompt allowed it. Then list at most five "
        "concrete changes to the prompt, most important first. Do not write the new prompt."
    ),
    "contrast": (
        "Compare the high-reward runs with the low-reward ones. What did the agent do differently when it "
        "succeeded, and what in the prompt would make that behaviour reliable? List at most five concrete "
        "changes to the prompt, most important first. Do not write the new prompt."
    ),
    "checklist": (
        "Review the prompt against this checklist, using the runs as evidence: (1) is the task stated "
        "precisely; (2) are all rules and constraints the runs depend on stated; (3) is the expected answer "
        "format explicit; (4) are tricky cases covered; (5) is there text that confuses or distracts. Report "
        "only the items where the runs show a problem, each with a concrete change. Do not write the new "
        "prompt."
    ),
}
"""Critique styles: name -> the task given to the critic."""


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 20] + " …[truncated]"


def _message_text(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        content = " ".join(str(p.get("text", "")) if isinstance(p, Mapping) else str(p) for p in content)
    text = "" if content is None else str(content)
    calls = message.get("tool_calls") or []
    for call in calls:
        function = call.get("function", {}) if isinstance(call, Mapping) else {}
        text += f"\n[tool call] {function.get('name')}({function.get('arguments')})"
    return text


def _task_text(task: Any) -> str:
    try:
        return json.dumps(task, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return repr(task)


def render_experiments(experiments: Sequence[Experiment]) -> str:
    """The runs as text for the critic: lowest reward first, long messages clipped."""
    blocks: list[str] = []
    ordered = sorted(experiments, key=lambda e: (e.reward is not None, e.reward or 0.0))
    for index, experiment in enumerate(ordered, start=1):
        reward = "none" if experiment.reward is None else f"{experiment.reward:.3f}"
        lines = [f"### Run {index}: reward {reward} (rollout {experiment.status})"]
        if experiment.conversations:
            for number, conversation in enumerate(experiment.conversations, start=1):
                if len(experiment.conversations) > 1:
                    lines.append(f"-- LLM call {number}")
                for message in conversation:
                    role = str(message.get("role", "?"))
                    lines.append(f"[{role}] {_clip(_message_text(message), _MAX_MESSAGE_CHARS)}")
        else:
            lines.append(
                f"(no LLM messages were recorded) task input: {_clip(_task_text(experiment.task), 800)}"
            )
        blocks.append(_clip("\n".join(lines), _MAX_EXPERIMENT_CHARS))
    return "\n\n".join(blocks)


def gradient_messages(variant: str, template: str, experiments: Sequence[Experiment]) -> list[dict[str, str]]:
    """Chat messages asking for a critique of ``template`` in the style ``variant``."""
    instruction = GRADIENT_VARIANTS[variant]
    user = (
        f"<prompt_template>\n{template}\n</prompt_template>\n\n"
        f"<runs>\n{render_experiments(experiments)}\n</runs>\n\n{instruction}"
    )
    return [{"role": "system", "content": _CRITIC_ROLE}, {"role": "user", "content": user}]


# ---------------------------------------------------------------------------------------------- edits

_EDITOR_ROLE = (
    "You edit prompt templates for AI agents. You receive a template and a critique of it, and you return "
    "the improved template only, between <prompt> and </prompt>, with no comments before or after."
)

EDIT_VARIANTS: dict[str, str] = {
    "revise": (
        "Rewrite the template so that it addresses every point of the critique. You may restructure it, "
        "but keep its purpose and keep it concise."
    ),
    "focused": (
        "Make the single change that addresses the most important point of the critique. Leave the rest of "
        "the template word for word as it is."
    ),
}
"""Edit styles: name -> the task given to the editor."""


def edit_messages(
    variant: str, template: str, critique: str, required: Sequence[str]
) -> list[dict[str, str]]:
    """Chat messages asking to apply ``critique`` to ``template`` in the style ``variant``.

    ``required`` lists the placeholders the new template must keep verbatim.
    """
    keep = (
        "Keep these placeholders exactly as written, each at least once: "
        + ", ".join(required)
        + ". Do not add other placeholders or brace characters."
        if required
        else "The template has no placeholders; do not add any."
    )
    user = (
        f"<prompt_template>\n{template}\n</prompt_template>\n\n<critique>\n{critique}\n</critique>\n\n"
        f"{EDIT_VARIANTS[variant]} {keep}"
    )
    return [{"role": "system", "content": _EDITOR_ROLE}, {"role": "user", "content": user}]


_PROMPT_TAG = re.compile(r"<prompt>\s*(.*?)\s*</prompt>", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"^```[\w-]*\n(.*?)\n```$", re.DOTALL)


def extract_prompt(reply: str) -> str:
    """The template in an editor's reply: inside ``<prompt>`` tags, else the reply minus a code fence."""
    match = _PROMPT_TAG.search(reply)
    if match:
        return match.group(1).strip()
    text = reply.strip()
    fenced = _FENCE.match(text)
    return fenced.group(1).strip() if fenced else text


# ---------------------------------------------------------------------------------------------- checks


class PromptCheckError(ValueError):
    """An edited template cannot replace its parent (placeholders lost or added, or it does not parse)."""


_JINJA_VARIABLE = re.compile(r"{{\s*([A-Za-z_]\w*)")


def placeholders(template: str, engine: str) -> list[str]:
    """The placeholders a template fills, in order of first use, as they are written (``{task}``).

    Raises:
        PromptCheckError: an ``f-string`` template that :meth:`str.format` cannot parse.
    """
    if engine == "f-string":
        try:
            fields = [name for _, name, _, _ in string.Formatter().parse(template) if name is not None]
        except ValueError as exc:
            raise PromptCheckError(f"the template is not a valid f-string template ({exc})") from None
        names = [re.split(r"[.\[!:]", name, maxsplit=1)[0] for name in fields]
        return [f"{{{name}}}" for name in dict.fromkeys(names)]
    if engine == "jinja":
        return [f"{{{{ {name} }}}}" for name in dict.fromkeys(_JINJA_VARIABLE.findall(template))]
    return []


def check_template(candidate: str, parent: str, engine: str) -> None:
    """Make sure ``candidate`` fills the same placeholders as ``parent``, so rollouts can render it.

    Raises:
        PromptCheckError: the candidate is empty, does not parse, or lost/added a placeholder.
    """
    if not candidate.strip():
        raise PromptCheckError("the edited template is empty")
    if engine not in ("f-string", "jinja"):
        return
    wanted = set(placeholders(parent, engine))
    found = set(placeholders(candidate, engine))
    lost = sorted(wanted - found)
    if lost:
        raise PromptCheckError(f"the edited template lost placeholder(s) {', '.join(lost)}")
    added = sorted(found - wanted)
    if engine == "f-string" and added:
        raise PromptCheckError(f"the edited template added unknown placeholder(s) {', '.join(added)}")
