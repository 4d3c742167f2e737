"""Every environment variable the core reads is listed in `agl_core.env_var.ENVIRONMENT_VARIABLES`."""

from __future__ import annotations

import ast
from pathlib import Path

import agl_core
from agl_core.env_var import ENVIRONMENT_VARIABLES, LightningEnvVar

CORE = Path(agl_core.__file__).parent
_ENVIRON_METHODS = {"get", "setdefault", "pop", "__getitem__"}


def _is_environ(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "environ"


def _names_read(tree: ast.AST) -> set[str]:
    """Names read from the environment: literals given to environ, getenv or envvar=; ``*_ENV`` constants."""
    found: set[str] = set()

    def literal(node: ast.AST | None) -> None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isupper():
            found.add(node.value)

    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and (
                (func.attr in _ENVIRON_METHODS and _is_environ(func.value)) or func.attr == "getenv"
            ):
                literal(node.args[0] if node.args else None)
            for keyword in node.keywords:
                if keyword.arg == "envvar":
                    literal(keyword.value)
        elif isinstance(node, ast.Subscript) and _is_environ(node.value):
            literal(node.slice)
        elif isinstance(node, ast.Compare) and any(_is_environ(c) for c in node.comparators):
            literal(node.left)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name) and target.id.endswith("_ENV"):
                    literal(node.value)
    return found


def test_every_environment_variable_the_core_reads_is_listed() -> None:
    read: dict[str, str] = {}
    for path in sorted(CORE.rglob("*.py")):
        for name in _names_read(ast.parse(path.read_text(encoding="utf-8"))):
            read.setdefault(name, str(path.relative_to(CORE)))
    unlisted = {name: where for name, where in read.items() if name not in ENVIRONMENT_VARIABLES}
    assert not unlisted, f"add these to agl_core.env_var.ENVIRONMENT_VARIABLES: {unlisted}"
    # the scan itself must see the variables it is meant to catch
    assert {"AGL_PLUGINS_STRICT", "AGL_STORE_TOKEN", "AGL_PROXY_TOKEN", "OPENAI_API_KEY"} <= set(read)


def test_listed_variables_are_read_somewhere() -> None:
    sources = "\n".join(p.read_text(encoding="utf-8") for p in CORE.rglob("*.py") if p.name != "env_var.py")
    stale = [
        name
        for name in ENVIRONMENT_VARIABLES
        if f'"{name}"' not in sources and f"LightningEnvVar.{name}" not in sources
    ]
    assert not stale, f"listed in ENVIRONMENT_VARIABLES but never read: {stale}"


def test_the_03_names_are_listed() -> None:
    assert {var.value for var in LightningEnvVar} <= set(ENVIRONMENT_VARIABLES)
