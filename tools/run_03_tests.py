"""Run Agent Lightning 0.3.0's own tests against agl, with no line changed, and count what passes.

Usage: python tools/run_03_tests.py [--control] TESTS_DIR [PYTHON] [-- PYTEST_ARGS...]

TESTS_DIR is the ``tests/`` folder of Agent Lightning at tag v0.3.0 (a git checkout: the PyPI sdist and
wheel of ``agentlightning==0.3.0`` ship no tests). PYTHON is an interpreter whose environment has agl with
``agentlightning-agl`` (hence agl-legacy) and pytest + pytest-asyncio, and not the real
``agentlightning``; by default ``.venv-agentlightning-agl/bin/python`` (``make
.venv-agentlightning-agl/.installed``). The tests are copied to a scratch folder first, so their
``import agentlightning`` lines resolve to agentlightning-agl (the checkout's ``pyproject.toml`` comes
along, for 0.3's pytest settings); GPU, network and paid-API tests skip or fail as they would on 0.3.0
without those. Prints the failing test ids, ``passed/collected`` per test file and ``passed N of M
collected``, and writes pytest's JUnit XML next to the copy.

``--control`` runs the same copy under a PYTHON whose ``agentlightning`` is Microsoft's 0.3.0 (its own
venv; agl need not be installed there): the tests that pass there are the ones agl is held to. A test
that raises ``KeyboardInterrupt`` through agl (0.3's Ctrl-C tests of ``SharedMemoryExecutionStrategy``;
agl re-raises it on purpose) ends pytest's session: ``--deselect`` it in PYTEST_ARGS.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections import Counter
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


def per_file(junit_xml: Path) -> dict[str, tuple[int, int]]:
    """Test file (pytest's class name) -> (passed, collected), from a pytest JUnit XML report."""
    passed: Counter[str] = Counter()
    collected: Counter[str] = Counter()
    for case in ET.parse(junit_xml).getroot().iter("testcase"):
        name = case.get("classname") or "?"
        collected[name] += 1
        if not {child.tag for child in case} & {"failure", "error", "skipped"}:
            passed[name] += 1
    return {name: (passed[name], collected[name]) for name in sorted(collected)}


def main(argv: list[str]) -> int:
    """Copy the tests, run them with pytest under ``PYTHON``, print the counts."""
    split = argv.index("--") if "--" in argv else len(argv)
    args, pytest_args = argv[:split], argv[split + 1 :]
    control = "--control" in args
    args = [arg for arg in args if arg != "--control"]
    if not args or not Path(args[0]).is_dir():
        print(__doc__, file=sys.stderr)
        return 2
    python = Path(args[1]) if len(args) > 1 else _DEFAULT_PYTHON
    if not python.exists():
        print(f"No interpreter at {python}: run `make .venv-agentlightning-agl/.installed`.", file=sys.stderr)
        return 2
    probe = subprocess.run(
        [str(python), "-c", "import agentlightning; print(agentlightning.__file__)"],
        capture_output=True,
        text=True,
        check=False,
    )
    on_agl = "agentlightning-agl" in probe.stdout.replace("\\", "/")
    if probe.returncode != 0 or on_agl == control:
        # a run on the wrong package would measure 0.3 instead of agl (or agl instead of the control)
        wanted = "Microsoft's agentlightning 0.3.0" if control else "agentlightning from agentlightning-agl"
        print(f"{python} does not import {wanted}.", probe.stderr, sep="\n", file=sys.stderr)
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
    for name, (file_passed, file_collected) in per_file(report).items():
        print(f"{file_passed:5d}/{file_collected:<5d} {name}")
    print(f"passed {passed} of {collected} collected ({len(failing)} failed or errored); report: {report}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
