"""The reliability suite: bounded versions of the adversarial probes of issue 20, run in CI.

Each probe reports its figures as one JSON line, printed at once and again in pytest's terminal
summary (so they show without ``-s``); the assertions are on correctness only, never on time.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

_FIGURES: list[str] = []


def report(probe: str, **figures: Any) -> None:
    """Print the figures of one probe as a JSON line and keep them for the summary."""
    line = json.dumps({"probe": probe, **figures}, sort_keys=True)
    _FIGURES.append(line)
    print("RELIABILITY " + line, flush=True)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Show every probe's figures at the end of the run."""
    if _FIGURES:
        terminalreporter.section("reliability figures")
        for line in _FIGURES:
            terminalreporter.write_line(line)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every reliability probe is slow (still run in CI)."""
    for item in items:
        if "tests/reliability/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.slow)
