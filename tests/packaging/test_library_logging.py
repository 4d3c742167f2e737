"""agl is a library: its records print nothing until the application configures logging."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import logging
import agl_core as agl

logging.getLogger("agl_core.store").warning("unconfigured")
if len(__import__("sys").argv) > 1:
    agl.setup_logging("INFO", color=False)
    logging.getLogger("agl_core.store").warning("configured")
"""


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", SCRIPT, *args], capture_output=True, text=True, timeout=120, check=True
    )


def test_records_go_nowhere_until_logging_is_configured() -> None:
    result = _run()
    assert "unconfigured" not in result.stderr + result.stdout


def test_setup_logging_still_prints_agl_records() -> None:
    result = _run("configure")
    assert "unconfigured" not in result.stderr + result.stdout
    assert "configured" in result.stdout
