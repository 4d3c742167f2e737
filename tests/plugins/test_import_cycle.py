"""The plugin loader is not in an import cycle with the CLI or the store layer (issue 37 §2).

Loading plugins registers the built-ins (`agl_core._builtins`), whose command hook once imported every CLI
module, which import the store layer, which imports the loader back: 26+ modules in one cycle. The
graph here counts every ``import`` of agl_core code outside ``if TYPE_CHECKING:`` blocks, in functions too
(an import inside a function still runs), and a module's parent packages (their ``__init__`` runs first).
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "agl_core"


def _imports(body: list[ast.stmt], found: set[str]) -> None:
    for node in body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            _imports(node.orelse, found)
        elif (
            isinstance(node, ast.ImportFrom)
            and node.level == 0
            and (node.module or "").startswith("agl_core")
        ):
            found.add(node.module or "")
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith("agl_core"))
        else:
            for field in ("body", "orelse", "finalbody", "handlers"):
                child = getattr(node, field, None)
                if isinstance(child, list):
                    _imports(child, found)


def _graph() -> dict[str, set[str]]:
    modules: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found: set[str] = set()
        _imports(ast.parse(path.read_text(encoding="utf-8")).body, found)
        modules[name] = found
    graph: dict[str, set[str]] = {}
    for name, found in modules.items():
        targets = {".".join(t.split(".")[:i]) for t in found for i in range(1, t.count(".") + 2)}
        graph[name] = {t for t in targets if t in modules and t != name}
    return graph


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = {start}, [start]
    while todo:
        for target in graph[todo.pop()] - seen:
            seen.add(target)
            todo.append(target)
    return seen


def test_no_cli_or_store_module_is_in_a_cycle_with_the_plugin_loader() -> None:
    graph = _graph()
    reversed_graph: dict[str, set[str]] = {name: set() for name in graph}
    for name, targets in graph.items():
        for target in targets:
            reversed_graph[target].add(name)
    cycle = _reachable(graph, "agl_core.plugins") & _reachable(reversed_graph, "agl_core.plugins")
    assert "agl_core._builtins" in cycle  # the loader does import the built-ins (through the package)
    tangled = sorted(m for m in cycle if m.startswith(("agl_core.cli", "agl_core.store", "agl_core.types")))
    assert not tangled, f"in one import cycle with agl_core.plugins: {tangled}"
    assert len(cycle) <= 6, sorted(cycle)
