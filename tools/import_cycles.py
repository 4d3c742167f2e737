"""Import cycles among a package's modules: strongly connected groups of the module-level import graph.

Usage: python tools/import_cycles.py [PACKAGE_DIR] [--all]

Counts imports at module level (``if TYPE_CHECKING:`` blocks left out); ``--all`` also counts imports
inside functions. Prints each cycle (its modules), the number of cycles and how many cross rooms (a room
is a first-level subpackage or module: ``agl_core.store``, ``agl_core.plugins``).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports(tree: ast.Module, name: str, is_package: bool, everywhere: bool) -> set[str]:
    found: set[str] = set()
    base = name if is_package else name.rpartition(".")[0]

    def visit(nodes: list[ast.stmt]) -> None:
        for node in nodes:
            if isinstance(node, ast.If) and _is_type_checking(node.test):
                visit(node.orelse)
                continue
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    parent = base.rsplit(".", node.level - 1)[0] if node.level > 1 else base
                    target = f"{parent}.{node.module}" if node.module else parent
                else:
                    target = node.module or ""
                found.add(target)
                found.update(f"{target}.{alias.name}" for alias in node.names)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not everywhere:
                continue
            for field in ("body", "orelse", "finalbody", "handlers"):
                children = getattr(node, field, None)
                if isinstance(children, list):
                    visit([c for c in children if isinstance(c, ast.stmt)] or [])
                    for child in children:
                        if isinstance(child, ast.ExceptHandler):
                            visit(child.body)

    visit(tree.body)
    return found


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    counter = 0
    sys.setrecursionlimit(10_000)

    def connect(node: str) -> None:
        nonlocal counter
        index[node] = low[node] = counter
        counter += 1
        stack.append(node)
        on_stack.add(node)
        for other in graph[node]:
            if other not in index:
                connect(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in graph:
        if node not in index:
            connect(node)
    return groups


def import_cycles(root: Path, everywhere: bool) -> tuple[list[list[str]], int]:
    """The import cycles (each a sorted list of modules, largest first) and the number of modules."""
    modules = {module_name(root, p): p for p in root.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        targets = imports(tree, name, path.name == "__init__.py", everywhere)
        graph[name] = {t for t in targets if t in modules and t != name}
    return sorted(strongly_connected(graph), key=len, reverse=True), len(modules)


def room(module: str) -> str:
    """The first-level package of a module: ``agl_core.store.http.routes`` -> ``agl_core.store``."""
    return ".".join(module.split(".")[:2])


def cross_room(groups: list[list[str]]) -> list[list[str]]:
    """The cycles whose modules live in more than one room."""
    return [group for group in groups if len({room(m) for m in group}) > 1]


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    root = Path(args[0] if args else "agl_core").resolve()
    groups, count = import_cycles(root, everywhere="--all" in sys.argv)
    for group in groups:
        print(f"{len(group)} modules: {', '.join(group)}")
    print(f"{len(groups)} import cycles among {count} modules, {len(cross_room(groups))} across rooms")


if __name__ == "__main__":
    main()
