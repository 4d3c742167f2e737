"""Agent Lightning 0.3 code using APO runs unchanged (docs/migrating-from-agent-lightning.md)."""

from __future__ import annotations

import inspect

import pytest

import agl_core as agl
from agl_apo.algorithm import APO


def test_poml_trace_debug_flag_is_accepted(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("INFO")
    apo = APO(api_key="sk-test", _poml_trace=True, preflight=False)
    assert isinstance(apo, agl.Algorithm)
    assert "output_dir" in caplog.text
    # plugins log under the 0.3 name of the component they replace (agentlightning.algorithm.apo)
    assert any(
        r.name.startswith("agl_core.algorithm.apo") for r in caplog.records if "_poml_trace" in r.message
    )


def test_apo_resolves_from_every_path_03_used() -> None:
    from agl_core.algorithm.apo import APO as from_package
    from agl_core.algorithm.apo.apo import APO as from_module

    assert from_package is APO and from_module is APO
    assert isinstance(agl.APO(api_key="sk-test", preflight=False), APO)
    assert isinstance(agl.algorithm.APO(api_key="sk-test", preflight=False), APO)
    assert "_poml_trace" in inspect.signature(APO).parameters


def test_apo_helpers_resolve_from_0_3s_module() -> None:
    from agl_apo import compat03
    from agl_core.algorithm.apo.apo import (
        APPLY_EDIT_PROMPT_FILES,
        GRADIENT_PROMPT_FILES,
        RolloutResultForAPO,
        VersionedPromptTemplate,
    )

    assert GRADIENT_PROMPT_FILES is compat03.GRADIENT_PROMPT_FILES
    assert APPLY_EDIT_PROMPT_FILES is compat03.APPLY_EDIT_PROMPT_FILES
    assert (len(GRADIENT_PROMPT_FILES), len(APPLY_EDIT_PROMPT_FILES)) == (3, 2)  # as many as in 0.3
    template = agl.PromptTemplate(template="Answer {question}.", engine="f-string")
    versioned = VersionedPromptTemplate(version="v0", prompt_template=template)
    assert versioned.score is None and versioned.prompt_template.format(question="2+2") == "Answer 2+2."
    result: RolloutResultForAPO = {"status": "succeeded", "final_reward": 1.0, "spans": [], "messages": []}
    assert set(RolloutResultForAPO.__annotations__) == set(result)


def test_poml_files_hold_agl_apos_prompts_with_0_3s_context_variables() -> None:
    """Each file is well-formed POML carrying one of agl-apo's own prompt styles, word for word."""
    import re
    import xml.etree.ElementTree as ET

    from agl_apo import prompts
    from agl_apo.compat03 import APPLY_EDIT_PROMPT_FILES, GRADIENT_PROMPT_FILES

    def text_of(path: object) -> tuple[str, set[str]]:
        root = ET.parse(path).getroot()  # type: ignore[arg-type]
        assert root.tag == "poml" and [child.tag for child in root] == ["system-msg", "human-msg"]
        raw = ET.tostring(root, encoding="unicode")
        return " ".join(root.itertext()), set(re.findall(r"{{\s*([a-z_]+)", raw))

    styles = set()
    for path in GRADIENT_PROMPT_FILES:
        text, variables = text_of(path)
        assert variables == {"prompt_template", "experiment", "loop"}, path.name
        assert 'for="experiment in experiments"' in path.read_text()
        (style,) = [name for name, task in prompts.GRADIENT_VARIANTS.items() if task in text]
        styles.add(style)
    assert styles == set(prompts.GRADIENT_VARIANTS)
    styles = set()
    for path in APPLY_EDIT_PROMPT_FILES:
        text, variables = text_of(path)
        assert variables == {"prompt_template", "critique"}, path.name
        (style,) = [name for name, task in prompts.EDIT_VARIANTS.items() if task in text]
        styles.add(style)
    assert styles == set(prompts.EDIT_VARIANTS)


def test_poml_files_render_with_the_poml_package() -> None:
    """Rendered as 0.3 rendered them (needs ``pip install poml``, which runs a bundled Node.js offline)."""
    poml = pytest.importorskip("poml")
    from agl_apo.compat03 import APPLY_EDIT_PROMPT_FILES, GRADIENT_PROMPT_FILES

    experiments = [{"status": "failed", "final_reward": 0.0, "spans": [], "messages": [{"role": "user"}]}]
    for path in GRADIENT_PROMPT_FILES:
        context = {"prompt_template": "Answer {question}.", "experiments": experiments}
        messages = poml.poml(path, context=context, format="openai_chat")["messages"]
        assert [m["role"] for m in messages] == ["system", "user"]
        assert "Answer {question}." in messages[1]["content"] and "rollout failed" in messages[1]["content"]
    for path in APPLY_EDIT_PROMPT_FILES:
        context = {"prompt_template": "Answer {question}.", "critique": "- be brief"}
        messages = poml.poml(path, context=context, format="openai_chat")["messages"]
        assert "- be brief" in messages[1]["content"]
