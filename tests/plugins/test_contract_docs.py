"""Guard tests: every hook is documented with its arguments and exercised by a test."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from agl_core import hookspecs

ROOT = Path(__file__).resolve().parents[2]
HOOKS = sorted(name for name, obj in vars(hookspecs).items() if name.startswith("agl_") and callable(obj))


def test_seven_hooks() -> None:
    assert HOOKS == [
        "agl_register_adapters",
        "agl_register_algorithms",
        "agl_register_commands",
        "agl_register_runners",
        "agl_register_stores",
        "agl_register_strategies",
        "agl_register_tracers",
    ]


@pytest.mark.parametrize("hook", HOOKS)
def test_hook_is_documented_with_its_arguments(hook: str) -> None:
    docs = (ROOT / "docs" / "plugins.md").read_text()
    assert f"`{hook}`" in docs
    row = next(line for line in docs.splitlines() if line.startswith(f"| `{hook}`"))
    for arg in inspect.signature(getattr(hookspecs, hook)).parameters:
        assert f"`{arg}`" in row


@pytest.mark.parametrize("hook", HOOKS)
def test_hook_has_a_docstring_example(hook: str) -> None:
    doc = inspect.getdoc(getattr(hookspecs, hook)) or ""
    assert "@hookimpl" in doc and f"def {hook}(" in doc


@pytest.mark.parametrize("hook", HOOKS)
def test_hook_is_exercised_by_a_test(hook: str) -> None:
    sources = "".join(
        p.read_text() for p in (ROOT / "tests" / "plugins").glob("test_*.py") if p.name != Path(__file__).name
    )
    assert f"def {hook}(" in sources
