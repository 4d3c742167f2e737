"""tools/run_03_tests.py counts passed tests from pytest's JUnit XML (skips are not passes)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

TOOL = Path(__file__).resolve().parents[2] / "tools" / "run_03_tests.py"


def test_counts_read_pytests_junit_report(tmp_path: Path) -> None:
    (tmp_path / "test_sample.py").write_text(
        "import pytest\n"
        "def test_ok(): pass\n"
        "def test_bad(): assert False\n"
        "@pytest.mark.skip\n"
        "def test_skipped(): pass\n"
    )
    report = tmp_path / "junit.xml"
    pytest = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    # the rootdir names the JUnit classnames; pytest's default depends on the caller's folder
    subprocess.run(
        [*pytest, f"--rootdir={tmp_path}", f"--junitxml={report}", str(tmp_path)],
        capture_output=True,
        timeout=120,
        check=False,
        cwd=tmp_path,
    )
    spec = importlib.util.spec_from_file_location("run_03_tests", TOOL)
    assert spec is not None and spec.loader is not None
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    passed, collected, failing = tool.counts(report)
    assert (passed, collected) == (1, 3)
    assert [name.rsplit("::", 1)[1] for name in failing] == ["test_bad"]
    assert tool.per_file(report) == {"test_sample": (1, 3)}
