"""Test the code blocks of a Markdown page (a docs page, a plugin's README) the way agl's docs are tested.

Every fenced block whose language is code (``python``, ``bash``, ``toml``, ...) carries a marker on the
line right before its opening fence:

- ``<!-- docs-test -->``: run it. Python blocks of a page share one namespace, in page order, and may use
  top-level ``await``; shell blocks run with ``bash -euo pipefail`` (the venv's scripts on the PATH);
  TOML, YAML and JSON blocks are parsed. ``<!-- docs-test requires=mod1,mod2 -->`` skips (with that
  reason) where a module is missing.
- ``<!-- docs-skip: REASON -->``: not run (it needs a GPU, a model server, another machine, the network);
  the tests report it as skipped with REASON.
- ``<!-- docs-excerpt: PATH -->``: an excerpt of a file (tested where that file is); the tests check that
  its lines appear in that file, in order. PATH is relative to the page's project root: the nearest folder
  above the page holding a ``pyproject.toml`` (the repository for ``docs/``, the plugin for its README).

A page may also hold hidden Python that runs before the blocks after it (to create a store, start a
local fake model server, set an environment variable): an HTML comment ``<!-- docs-setup`` ... ``-->``,
invisible on GitHub and on the site. Blocks without a language (diagrams, sample output) need no marker.

A plugin tests its README with :func:`check_page_runs` (see ``docs/writing-plugins.md``).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

CODE_LANGUAGES = frozenset({"python", "py", "bash", "sh", "shell", "console", "toml", "yaml", "yml", "json"})
"""Languages whose blocks are code and so need a marker."""

DEFAULT_TIMEOUT_SECONDS = 600.0

_FENCE = re.compile(
    r"^(?P<indent> *)```(?P<lang>[\w-]*)[^\n]*\n(?P<code>.*?)^(?P=indent)```[ \t]*$", re.M | re.S
)
_SETUP = re.compile(r"^<!-- docs-setup\n(?P<code>.*?)^-->$", re.M | re.S)
_MARKER = re.compile(r"^<!-- docs-(?P<kind>test|skip|excerpt)(?P<rest>[^>]*?)\s*-->$")


@dataclass(frozen=True)
class Block:
    """One fenced block (or hidden setup) of a page and what its marker asks for."""

    page: Path
    line: int
    """1-based line of the opening fence (of ``<!-- docs-setup`` for a setup)."""
    lang: str
    code: str
    action: str
    """``test``, ``skip``, ``excerpt``, ``setup``, ``unmarked`` (code without marker) or ``text``."""
    detail: str = ""
    """The skip reason, the excerpt's source path, or the modules a test requires (comma-separated)."""

    @property
    def where(self) -> str:
        """``folder/page.md:LINE`` (the page's folder and name, and the block's line)."""
        return f"{self.page.resolve().parent.name}/{self.page.name}:{self.line}"

    def missing_modules(self) -> list[str]:
        """The modules of ``requires=`` that cannot be imported here (none for other blocks)."""
        if self.action != "test":
            return []
        return [module for module in self.detail.split(",") if module and not _importable(module)]


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a parent package is missing
        return False


def _dedent(code: str, indent: int) -> str:
    return "".join(line[indent:] if line[:indent].strip() == "" else line for line in code.splitlines(True))


def page_blocks(page: Path) -> list[Block]:
    """The fenced blocks and hidden setups of one page, in page order.

    Raises:
        ValueError: a ``docs-skip``/``docs-excerpt`` marker without its reason or path, or a malformed
            ``docs-test`` marker (the message names the page and line).
    """
    text = page.read_text(encoding="utf-8")
    lines = text.splitlines()
    blocks: list[Block] = []
    for match in _FENCE.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        lang = match.group("lang").lower()
        code = _dedent(match.group("code"), len(match.group("indent")))
        previous = lines[line - 2].strip() if line >= 2 else ""
        marker = _MARKER.match(previous)
        if marker is None:
            action, detail = ("unmarked" if lang in CODE_LANGUAGES else "text"), ""
        else:
            action, rest = marker.group("kind"), marker.group("rest").strip()
            if action == "test":
                detail = rest.removeprefix("requires=") if rest.startswith("requires=") else ""
                if rest and not detail:
                    raise ValueError(
                        f"{page}:{line - 1}: write <!-- docs-test requires=mod -->, got {previous}"
                    )
            else:
                detail = rest.removeprefix(":").strip()
                if not detail:
                    raise ValueError(
                        f"{page}:{line - 1}: <!-- docs-{action}: ... --> needs a reason or a path"
                    )
        blocks.append(Block(page, line, lang, code, action, detail))
    for match in _SETUP.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        blocks.append(Block(page, line, "python", match.group("code"), "setup"))
    return sorted(blocks, key=lambda b: b.line)


def unmarked_blocks(page: Path) -> list[Block]:
    """The code blocks of ``page`` with no marker (there should be none)."""
    return [block for block in page_blocks(page) if block.action == "unmarked"]


def skipped_blocks(page: Path) -> list[tuple[Block, str]]:
    """The blocks of ``page`` that do not run here, each with the reason (to report as skipped tests)."""
    skipped = []
    for block in page_blocks(page):
        if block.action == "skip":
            skipped.append((block, block.detail))
        elif missing := block.missing_modules():
            skipped.append((block, f"needs {', '.join(missing)} (not installed here)"))
    return skipped


def excerpt_found(excerpt: str, source: str) -> bool:
    """Whether every line of ``excerpt`` appears in ``source``, in order (indentation ignored).

    Blank lines and ``...`` lines (marking what the excerpt leaves out) are not looked for.
    """
    wanted = [line.strip() for line in excerpt.splitlines() if line.strip() not in ("", "...")]
    have = iter(line.strip() for line in source.splitlines())
    return all(any(line == candidate for candidate in have) for line in wanted)


def project_root(page: Path) -> Path:
    """The nearest folder above ``page`` holding a ``pyproject.toml`` (where excerpt paths start).

    Raises:
        LookupError: no folder above the page has one.
    """
    for folder in page.resolve().parents:
        if (folder / "pyproject.toml").is_file():
            return folder
    raise LookupError(f"no pyproject.toml above {page}: excerpt paths are relative to the project root")


def excerpt_problems(page: Path) -> list[str]:
    """One line per ``docs-excerpt`` block of ``page`` whose lines are not (or no longer) in its source."""
    problems = []
    for block in page_blocks(page):
        if block.action != "excerpt":
            continue
        source = project_root(page) / block.detail
        if not source.is_file():
            problems.append(f"{block.where} names {block.detail}, which does not exist")
        elif not excerpt_found(block.code, source.read_text(encoding="utf-8")):
            problems.append(f"{block.where} is no longer an excerpt of {block.detail}: update the page")
    return problems


@dataclass(frozen=True)
class PageRun:
    """What running a page's blocks did."""

    page: Path
    returncode: int
    output: str
    """stdout then stderr of the run (each block is announced by a ``--- docs block WHERE`` line)."""
    ran: list[Block]
    """The blocks that were to run (``docs-test`` blocks whose required modules are importable)."""

    def problems(self) -> list[str]:
        """Why the run failed (empty when every block ran and passed)."""
        if self.returncode != 0:
            return [f"{self.page.name}: the run exited {self.returncode}:\n{self.output}"]
        return [
            f"{block.where} never ran (a block before it stopped the page):\n{self.output}"
            for block in self.ran
            if f"--- docs block {block.where} " not in self.output
        ]


def run_page(
    page: Path,
    workdir: Path,
    *,
    env: Mapping[str, str] | None = None,
    timeout: float = DEFAULT_TIMEOUT_SECONDS,
    python: str | Path | None = None,
) -> PageRun:
    """Run the ``docs-test`` blocks and hidden setups of ``page`` in order, in a fresh interpreter.

    The interpreter is ``python`` (default: this one, ``sys.executable``; another venv's must have
    agl-core installed), started in ``workdir`` (a scratch folder) with this process's environment plus
    ``env``, its venv's scripts first on the PATH, ``NO_COLOR=1`` and without
    ``AGL_STORE``/``AGL_STORE_TOKEN``. A block whose ``requires=`` modules are missing here is left out
    (see :func:`skipped_blocks`).
    """
    interpreter = str(python) if python is not None else sys.executable
    steps = []
    ran = []
    for block in page_blocks(page):
        if block.action == "test" and block.missing_modules():
            continue
        if block.action in ("test", "setup"):
            # padded so that tracebacks name the page's own line numbers
            code = "\n" * block.line + block.code if block.lang in ("python", "py") else block.code
            steps.append({"where": block.where, "file": block.page.name, "lang": block.lang, "code": code})
            if block.action == "test":
                ran.append(block)
    workdir.mkdir(parents=True, exist_ok=True)
    steps_file = workdir / ".docs-steps.json"
    steps_file.write_text(json.dumps(steps), encoding="utf-8")
    full_env = {
        **os.environ,
        "PATH": str(Path(interpreter).parent) + os.pathsep + os.environ.get("PATH", ""),
        "NO_COLOR": "1",
    }
    full_env.pop("AGL_STORE", None)
    full_env.pop("AGL_STORE_TOKEN", None)
    full_env.update(env or {})
    result = subprocess.run(
        [interpreter, "-m", "agl_testing._doc_block_runner", str(steps_file)],
        cwd=workdir,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return PageRun(page, result.returncode, result.stdout + result.stderr, ran)


def check_page_runs(
    page: Path,
    workdir: Path,
    *,
    env: Mapping[str, str] | None = None,
    timeout: float = DEFAULT_TIMEOUT_SECONDS,
) -> PageRun:
    """Check ``page`` whole: every code block marked, every excerpt found, every ``docs-test`` block run.

    Returns the run (for further checks on its output).

    Raises:
        AssertionError: naming each unmarked block, stale excerpt, or the block that failed with the
            run's output.
    """
    unmarked = [block.where for block in unmarked_blocks(page)]
    if unmarked:
        raise AssertionError(
            "code blocks without <!-- docs-test -->, <!-- docs-skip: reason --> or "
            f"<!-- docs-excerpt: path --> on the line before: {unmarked}"
        )
    problems = excerpt_problems(page)
    run = run_page(page, workdir, env=env, timeout=timeout)
    problems += run.problems()
    if problems:
        raise AssertionError("\n".join(problems))
    return run
