"""No network-facing module can import or call code a request names (issue 34, item 1).

The store server (its REST API, the OTLP intake and the dashboard it serves) and the LLM proxy resolve
components only through `Registry.create_named`. This test reads their source and fails on any other
way to turn a string into code, so a new route cannot quietly bring one back.
"""

from __future__ import annotations

import ast
from pathlib import Path

import agl_core

ROOT = Path(agl_core.__file__).parent
NETWORK_FACING = [
    ROOT / "store" / "http",
    ROOT / "llm_proxy",
    ROOT / "dashboard",
    ROOT / "adapter" / "doctor.py",
]
FORBIDDEN_NAMES = {"import_target", "import_module", "__import__", "eval", "exec", "instantiate"}
FORBIDDEN_METHODS = {"create", "open_uri", "import_module", "loads"}  # Registry.create, pickle.loads


def _modules() -> list[Path]:
    files: list[Path] = []
    for place in NETWORK_FACING:
        files.extend(sorted(place.rglob("*.py")) if place.is_dir() else [place])
    return files


def _offences(path: Path) -> list[str]:
    where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id in FORBIDDEN_NAMES:
            found.append(f"{where}:{node.lineno}: {func.id}()")
        elif isinstance(func, ast.Attribute) and func.attr in FORBIDDEN_METHODS | FORBIDDEN_NAMES:
            receiver = ast.unparse(func.value)
            if func.attr == "loads" and receiver != "pickle":
                continue  # json.loads and friends decode data, they run nothing
            found.append(f"{where}:{node.lineno}: {receiver}.{func.attr}()")
    return found


def test_network_facing_modules_turn_no_string_into_code() -> None:
    modules = _modules()
    assert len(modules) > 20  # the scan reads the real packages
    offences = [offence for path in modules for offence in _offences(path)]
    assert offences == []


def test_the_scan_catches_an_import_path_resolver(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("def f(reg, q):\n    return reg.create(q['adapter'])\n")
    assert _offences(bad) and "reg.create()" in _offences(bad)[0]
