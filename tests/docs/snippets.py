"""The code blocks of the documentation pages and what the tests do with each.

Every fenced block whose language is code (``python``, ``bash``, ``toml``, ...) carries a marker on the
line right before its opening fence:

- ``<!-- docs-test -->``: run it. Python blocks of a page share one namespace, in page order, and may use
  top-level ``await``; shell blocks run with ``bash -euo pipefail`` (``agl`` on the PATH); TOML, YAML and
  JSON blocks are parsed. ``<!-- docs-test requires=mod1,mod2 -->`` skips (with that reason) where a
  module is missing.
- ``<!-- docs-skip: REASON -->``: not run (it needs a GPU, a model server, another machine...); the tests
  report it as skipped with REASON.
- ``<!-- docs-excerpt: PATH -->``: an excerpt of a file of the repository (tested where that file is); the
  tests check that its lines appear in that file, in order.

A page may also hold hidden Python that runs before the blocks after it (to create a store, start a
local fake model server, set an environment variable): an HTML comment ``<!-- docs-setup`` ... ``-->``,
invisible on the site. Blocks without a language (diagrams, sample output) need no marker.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

CODE_LANGUAGES = frozenset({"python", "py", "bash", "sh", "shell", "console", "toml", "yaml", "yml", "json"})
"""Languages whose blocks are code and so need a marker."""

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
        """``page.md:LINE``, relative to the docs folder's parent."""
        return f"{self.page.parent.name}/{self.page.name}:{self.line}"


def _dedent(code: str, indent: int) -> str:
    return "".join(line[indent:] if line[:indent].strip() == "" else line for line in code.splitlines(True))


def page_blocks(page: Path) -> list[Block]:
    """The fenced blocks and hidden setups of one page, in page order."""
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


def excerpt_found(excerpt: str, source: str) -> bool:
    """Whether every line of ``excerpt`` appears in ``source``, in order (indentation ignored).

    Blank lines and ``...`` lines (marking what the excerpt leaves out) are not looked for.
    """
    wanted = [line.strip() for line in excerpt.splitlines() if line.strip() not in ("", "...")]
    have = iter(line.strip() for line in source.splitlines())
    return all(any(line == candidate for candidate in have) for line in wanted)
