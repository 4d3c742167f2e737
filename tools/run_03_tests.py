"""Run Agent Lightning 0.3.0's own tests against agl, with no line changed, and count what passes.

Usage: python tools/run_03_tests.py TESTS_DIR [PYTHON] [-- PYTEST_ARGS...]

TESTS_DIR is the ``tests/`` folder of Agent Lightning at tag v0.3.0 (a git checkout: the PyPI sdist and
wheel of ``agentlightning==0.3.0`` ship no tests). PYTHON is an interpreter whose environment has agl with
``agentlightning-agl`` (hence agl-legacy) and pytest + pytest-asyncio, and not the real
``agentlightning``; by default ``.venv-agentlightning-agl/bin/python`` (``make
.venv-agentlightning-agl/.installed``). The tests are copied to a scratch folder first, so their
``import agentlightning`` lines resolve to agentlightning-agl (the checkout's ``pyproject.toml`` comes
along, for 0.3's pytest settings); GPU, network and paid-API tests skip or fail as they would on 0.3.0
without those. Prints ``passed N of M collected`` and the failing test ids, and writes pytest's JUnit XML
next to the copy.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

_DEFAULT_PYTHON = Path(__file__).resolve().parents[1] / ".venv-agentlightning-agl" / "bin" / "python"


def counts(junit_xml: Path) -> tuple[int, int, list[str]]:
    """(passed, collected, failing ids) from a pytest JUnit XML report."""
    passed, collected, failing = 0, 0, []
    for case in ET.parse(junit_xml).getroot().iter("testcase"):
        collected += 1
        outcome = {child.tag for child in case}
        if outcome & {"failure", "error"}:
            failing.append(f"{case.get('classname')}::{case.get('name')}")
        elif "skipped" not in outcome:
            passed += 1
    return passed, collected, failing


def main(argv: list[str]) -> int:
    """Copy the tests, run them with pytest under ``PYTHON``, print the counts."""
    split = argv.index("--") if "--" in argv else len(argv)
    args, pytest_args = argv[:split], argv[split + 1 :]
    if not args or not Path(args[0]).is_dir():
        print(__doc__, file=sys.stderr)
        return 2
    python = Path(args[1]) if len(args) > 1 else _DEFAULT_PYTHON
    if not python.exists():
        print(f"No interpreter at {python}: run `make .venv-agentlightning-agl/.installed`.", file=sys.stderr)
        return 2
    probe = subprocess.run(
        [str(python), "-c", "import agentlightning, agl_core; print(agentlightning.__file__)"],
        capture_output=True,
        text=True,
        check=False,
    )
    if probe.returncode != 0 or "agentlightning-agl" not in probe.stdout.replace("\\", "/"):
        # with the real agentlightning (or none) the run would measure 0.3 itself, not agl
        problem = f"{python} does not import agentlightning from agentlightning-agl."
        print(problem, probe.stderr, sep="\n", file=sys.stderr)
        return 2
    scratch = Path(tempfile.mkdtemp(prefix="agl-03-tests-"))
    shutil.copytree(args[0], scratch / "tests")
    checkout_config = Path(args[0]).resolve().parent / "pyproject.toml"
    if checkout_config.exists():  # 0.3's [tool.pytest.ini_options] (markers, testpaths)
        shutil.copy(checkout_config, scratch / "pyproject.toml")
    report = scratch / "junit.xml"
    command = [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}", "tests"]
    subprocess.run([*command, *pytest_args], cwd=scratch, check=False)
    passed, collected, failing = counts(report)
    print("\n".join(failing))
    print(f"passed {passed} of {collected} collected ({len(failing)} failed or errored); report: {report}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
