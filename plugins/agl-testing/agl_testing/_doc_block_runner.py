"""Run one page's code blocks in order (``python -m agl_testing._doc_block_runner STEPS.json``).

Started by :func:`agl_testing.doc_blocks.run_page` in a scratch folder.

STEPS.json is a list of ``{"where", "file", "lang", "code"}`` (python code padded to its page lines).
Python blocks (and hidden setups) run in one namespace on one event loop, top-level ``await`` allowed;
shell blocks run with ``bash -euo pipefail`` in the current folder with this process's environment (so a
setup can set variables); TOML/YAML/JSON blocks are parsed. The first failure prints which block failed
and exits 1.
"""

from __future__ import annotations

import ast
import asyncio
import importlib
import inspect
import json
import os
import subprocess
import sys
import traceback
from typing import Any

SHELL_TIMEOUT_SECONDS = 180


def run_python(code: str, filename: str, namespace: dict[str, Any], loop: asyncio.AbstractEventLoop) -> None:
    """Run one Python block in the page's namespace (top-level ``await`` runs on ``loop``)."""
    compiled = compile(code, filename, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    result = eval(compiled, namespace)  # the documentation's own code
    if inspect.iscoroutine(result):
        loop.run_until_complete(result)


def run_shell(code: str, where: str) -> None:
    """Run one shell block with ``bash -euo pipefail``; raise naming the block when it fails."""
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", code],
        capture_output=True,
        text=True,
        timeout=SHELL_TIMEOUT_SECONDS,
    )
    sys.stdout.write(done.stdout)
    sys.stdout.write(done.stderr)
    if done.returncode != 0:
        raise RuntimeError(f"the shell block at {where} exited {done.returncode}")


def parse(lang: str, code: str) -> None:
    """Parse one TOML, YAML or JSON block (raise on a syntax error or another language)."""
    if lang == "toml":
        if sys.version_info < (3, 11):
            raise RuntimeError("TOML blocks are parsed with tomllib: run the docs tests on Python >= 3.11")
        importlib.import_module("tomllib").loads(code)
    elif lang in ("yaml", "yml"):
        importlib.import_module("yaml").safe_load(code)  # PyYAML (the docs venv has it)
    elif lang == "json":
        json.loads(code)
    else:
        raise ValueError(f"no way to test a {lang!r} block")


def main(steps_file: str) -> int:
    """Run the steps of ``steps_file`` in order; 0 when all passed, else 1 after the first failure."""
    with open(steps_file, encoding="utf-8") as f:
        steps = json.load(f)
    # the page's blocks run as the main module (so sys.modules[__name__] is their namespace)
    module = type(sys)("__main__")
    namespace: dict[str, Any] = module.__dict__
    sys.modules["__main__"] = module
    loop = asyncio.new_event_loop()
    try:
        for step in steps:
            where, lang, code = step["where"], step["lang"], step["code"]
            print(f"--- docs block {where} ({lang})", flush=True)
            try:
                if lang in ("python", "py"):
                    run_python(code, step["file"], namespace, loop)
                elif lang in ("bash", "sh", "shell", "console"):
                    run_shell(code, where)
                else:
                    parse(lang, code)
            except BaseException:
                traceback.print_exc()
                print(f"FAILED: the block at {where}", flush=True)
                return 1
    finally:
        loop.close()
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # servers a page started and left running must not keep this process alive
