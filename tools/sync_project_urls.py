"""Copy ``[project.urls]`` of the root ``pyproject.toml`` (their one source) into every plugin's pyproject.

``python tools/sync_project_urls.py`` rewrites each ``plugins/*/pyproject.toml`` whose table differs and
names it; ``--check`` only names them (exit 1 when any differs). While the root has no table (the project
has no public home yet, and a placeholder URL on PyPI is worse than none), the plugins' tables are removed.
Each plugin keeps its own copy because its
sdist must build alone (hatchling reads nothing outside it); tests/packaging/test_project_urls.py fails
when a copy drifts.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parent.parent
_URLS_TABLE = re.compile(r"^\[project\.urls\]\n(?:[^\[\n][^\n]*\n)*", re.MULTILINE)
"""The ``[project.urls]`` header and its lines, up to the first blank line or next table."""


def root_urls_table(root: Path = ROOT) -> str | None:
    """The ``[project.urls]`` table of the root pyproject, as written there; None when it has none."""
    match = _URLS_TABLE.search((root / "pyproject.toml").read_text(encoding="utf-8"))
    return match.group(0) if match is not None else None


def synced_text(pyproject_text: str, table: str | None) -> str:
    """``pyproject_text`` with its ``[project.urls]`` table replaced by ``table`` (added after ``[project]``'s
    last line when it has none; removed, with the blank line after it, when ``table`` is None)."""
    if table is None:
        return re.sub(_URLS_TABLE.pattern + r"\n?", "", pyproject_text, count=1, flags=re.MULTILINE)
    if _URLS_TABLE.search(pyproject_text):
        return _URLS_TABLE.sub(lambda _: table, pyproject_text, count=1)
    project = re.search(r"^\[project\]\n(?:[^\n]+\n)*", pyproject_text, re.MULTILINE)
    if project is None:
        raise LookupError("no [project] table to add [project.urls] after")
    end = project.end()
    return pyproject_text[:end] + "\n" + table + pyproject_text[end:]


def stale_plugins(root: Path = ROOT, *, write: bool) -> list[Path]:
    """The plugin pyprojects whose ``[project.urls]`` differs from the root's (rewritten when ``write``)."""
    table = root_urls_table(root)
    wanted = tomllib.loads(table)["project"]["urls"] if table is not None else None
    stale = []
    for pyproject in sorted(root.glob("plugins/*/pyproject.toml")):
        text = pyproject.read_text(encoding="utf-8")
        if tomllib.loads(text)["project"].get("urls") == wanted:
            continue
        stale.append(pyproject)
        if write:
            pyproject.write_text(synced_text(text, table), encoding="utf-8")
    return stale


def main(argv: list[str] | None = None) -> int:
    """``[--check]``: sync (or only list) the plugins' project URLs; 1 when ``--check`` found a stale one."""
    args = sys.argv[1:] if argv is None else argv
    if args not in ([], ["--check"]):
        print("usage: python tools/sync_project_urls.py [--check]", file=sys.stderr)
        return 2
    check = args == ["--check"]
    stale = stale_plugins(write=not check)
    for pyproject in stale:
        verb = "differs from the root's [project.urls]" if check else "updated"
        print(f"{pyproject.relative_to(ROOT)}: {verb}")
    return 1 if check and stale else 0


if __name__ == "__main__":
    raise SystemExit(main())
