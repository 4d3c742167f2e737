"""Agent Lightning 0.3's APO helper names, for code that builds its own POML prompts or APO records.

``GRADIENT_PROMPT_FILES`` and ``APPLY_EDIT_PROMPT_FILES`` are POML files with agl-apo's own critique
and edit prompts (`agl_apo.prompts`: three critique styles, two edit styles), taking 0.3's context
variables: ``prompt_template`` and ``experiments`` (a list of `RolloutResultForAPO`) for a critique,
``prompt_template`` and ``critique`` for an edit. Render them with the ``poml`` package
(``poml.poml(path, context=..., format="openai_chat")``); agl-apo itself builds the same prompts as
plain chat messages and needs no POML renderer.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

from agl_core.types import PromptTemplate, RolloutStatus

__all__ = [
    "APPLY_EDIT_PROMPT_FILES",
    "GRADIENT_PROMPT_FILES",
    "POML_DIR",
    "RolloutResultForAPO",
    "VersionedPromptTemplate",
]

POML_DIR = Path(__file__).with_name("poml")
"""Folder of the POML prompt files (shipped in the wheel)."""

GRADIENT_PROMPT_FILES: list[Path] = [
    POML_DIR / f"gradient_{name}.poml" for name in ("failures", "contrast", "checklist")
]
"""The critique ("textual gradient") prompts, one per style of `agl_apo.prompts.GRADIENT_VARIANTS`."""

APPLY_EDIT_PROMPT_FILES: list[Path] = [POML_DIR / f"edit_{name}.poml" for name in ("revise", "focused")]
"""The edit prompts, one per style of `agl_apo.prompts.EDIT_VARIANTS`."""


class RolloutResultForAPO(TypedDict):
    """One rollout as shown to the critic (JSON-serializable, so POML can render it)."""

    status: RolloutStatus
    final_reward: float | None
    spans: list[dict[str, Any]]
    messages: list[Any]


@dataclass
class VersionedPromptTemplate:
    """A prompt template with its version name (``"v0"``, ``"v1"``, ...) and its score once evaluated."""

    version: str
    prompt_template: PromptTemplate
    score: float | None = None
