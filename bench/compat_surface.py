"""How much of Agent Lightning 0.3's public surface is importable from the same path under ``agl_core``.

Usage: python bench/compat_surface.py --agentlightning-src PATH [--details]

PATH is the ``agentlightning`` package directory of a 0.3 install (``pip install --no-deps
agentlightning==0.3.0`` into a scratch venv is enough: the 0.3 sources are read with ``ast``, never
imported, so none of 0.3's dependencies are needed). Prints JSON:

* ``top_level``: 0.3's ``import agentlightning as agl`` names found on ``agl_core`` (``plugin``: those that
  say which ``pip install`` provides them);
* ``modules``: how many of 0.3's modules import as ``agl_core.<same path>``;
* ``all_names``: per module with an ``__all__``, how many of its names are importable from the same
  ``agl_core`` path (``ok``), resolve to a plugin that is not installed and say which ``pip install``
  provides it (``plugin``), or are missing;
* ``defined_names``: the same for public classes/functions/constants a module defines without ``__all__``;
* ``signatures``: for callables found on both sides, how many accept every parameter name 0.3 accepted.

A name counts as ``plugin`` when reading it raises ImportError whose message contains ``pip install agl-``.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import inspect
import json
import pathlib
import sys
from collections.abc import Iterator
from typing import Any

# The VERL integration's internals (Ray entrypoint, daemon, patched vLLM server) are agl-verl's own
# business; only the public algorithm name is part of the compatibility surface.
SKIPPED_PREFIXES = ("agentlightning.verl", "agentlightning.dashboard")


def iter_modules(src: pathlib.Path) -> Iterator[tuple[str, pathlib.Path]]:
    """Yield (dotted module name, file) for every module of the 0.3 package at ``src``."""
    for path in sorted(src.rglob("*.py")):
        parts = list(path.relative_to(src.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        if parts[-1] == "__main__":
            continue
        name = ".".join(parts)
        if not name.startswith(SKIPPED_PREFIXES):
            yield name, path


def module_all(tree: ast.Module) -> list[str] | None:
    """The literal ``__all__`` of a module (with ``+=`` extensions), or None when it has none."""
    names: list[str] | None = None
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
        if isinstance(target, ast.Name) and target.id == "__all__":
            names = (names or []) + list(ast.literal_eval(node.value))  # type: ignore[attr-defined]
    return names


def defined_public_names(tree: ast.Module) -> dict[str, ast.AST]:
    """Public classes, functions and constants a module defines itself (imports excluded)."""
    found: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            found[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    found[target.id] = node
    return {
        name: node for name, node in found.items() if not name.startswith("_") and not _is_noise(name, node)
    }


def _is_noise(name: str, node: ast.AST) -> bool:
    """Loggers and type variables are not part of a module's API."""
    if name == "logger" or name.endswith("_logger"):
        return True
    value = getattr(node, "value", None)
    return isinstance(value, ast.Call) and getattr(value.func, "id", "") in ("TypeVar", "ParamSpec")


def imported_names(tree: ast.Module, module: str, is_package: bool) -> dict[str, tuple[str, str]]:
    """``name -> (source module, source name)`` for a module's ``from x import y`` statements."""
    found: dict[str, tuple[str, str]] = {}
    package = module if is_package else module.rpartition(".")[0]
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
            source = f"{base}.{node.module}" if node.module else base
            for alias in node.names:
                found[alias.asname or alias.name] = (source, alias.name)
    return found


def accepted_parameters(node: ast.AST) -> tuple[list[str], bool] | None:
    """Parameter names a 0.3 function/class (its ``__init__``) accepts, and whether it takes ``**kw``."""
    if isinstance(node, ast.ClassDef):
        init = next((n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
        if init is None:
            return None
        node = init
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    args = node.args
    names = [a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs] if a.arg not in ("self", "cls")]
    return names, args.kwarg is not None


class Surface:
    """The 0.3 package's modules, ``__all__`` lists and definitions, read with ``ast``."""

    def __init__(self, src: pathlib.Path) -> None:
        self.trees: dict[str, ast.Module] = {}
        self.packages: set[str] = set()
        for name, path in iter_modules(src):
            self.trees[name] = ast.parse(path.read_text(encoding="utf-8"))
            if path.name == "__init__.py":
                self.packages.add(name)

    def definition(self, module: str, name: str, depth: int = 0) -> ast.AST | None:
        """The AST node defining ``module.name``, following relative imports."""
        tree = self.trees.get(module)
        if tree is None or depth > 8:
            return None
        defined = defined_public_names(tree)
        if name in defined:
            return defined[name]
        source = imported_names(tree, module, module in self.packages).get(name)
        return self.definition(source[0], source[1], depth + 1) if source else None

    def top_level(self) -> list[str]:
        """0.3's top-level names: every star-imported ``__all__`` plus the explicit imports."""
        tree = self.trees["agentlightning"]
        names = ["__version__"]
        for node in tree.body:
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    if alias.name == "*":
                        names += module_all(self.trees[f"agentlightning.{node.module}"]) or []
                    else:
                        names.append(alias.asname or alias.name)
        return sorted(set(names))


def agl_path(module: str) -> str:
    return "agl_core" + module[len("agentlightning") :]


def lookup(module: str, name: str) -> tuple[str, Any]:
    """``("ok", value)``, ``("plugin", message)`` or ``("missing", reason)`` for ``agl_core`` module.name."""
    try:
        mod = importlib.import_module(agl_path(module))
    except ImportError as exc:
        return ("plugin", str(exc)) if "pip install agl-" in str(exc) else ("missing", f"module: {exc}")
    try:
        return "ok", getattr(mod, name)
    except ImportError as exc:
        if "pip install agl-" in str(exc):
            return "plugin", str(exc)
        if type(exc).__name__ == "NotProvidedError":
            return "not_provided", str(exc)
        return "missing", str(exc)
    except Exception as exc:
        return "missing", f"{type(exc).__name__}: {exc}"


def signature_gaps(node: ast.AST | None, value: Any) -> list[str] | None:
    """0.3 parameter names the agl callable does not accept; None when not comparable."""
    expected = accepted_parameters(node) if node is not None else None
    if expected is None or not callable(value):
        return None
    try:
        signature = inspect.signature(value)
    except (TypeError, ValueError):
        return None
    params = signature.parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return []
    return [name for name in expected[0] if name not in params]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--agentlightning-src", type=pathlib.Path, required=True)
    parser.add_argument("--details", action="store_true", help="list every missing name and signature gap")
    args = parser.parse_args()
    # measure this checkout's agl_core even when the venv has no install of it (else every name is "missing")
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
    importlib.import_module("agl_core")
    surface = Surface(args.agentlightning_src)

    report: dict[str, Any] = {}
    top = surface.top_level()
    top_status = {name: lookup("agentlightning", name)[0] for name in top}
    report["top_level"] = {
        "total": len(top),
        "ok": sum(s == "ok" for s in top_status.values()),
        "plugin": sorted(n for n, s in top_status.items() if s == "plugin"),
        "not_provided": sorted(n for n, s in top_status.items() if s == "not_provided"),
        "missing": sorted(n for n, s in top_status.items() if s == "missing"),
    }

    modules_missing = []
    for module in surface.trees:
        try:
            importlib.import_module(agl_path(module))
        except ImportError as exc:
            if "pip install agl-" not in str(exc):
                modules_missing.append(module)
    report["modules"] = {
        "total": len(surface.trees),
        "ok": len(surface.trees) - len(modules_missing),
        "missing": modules_missing,
    }

    sig_checked, sig_gaps = 0, {}
    for kind in ("all_names", "defined_names"):
        per_module: dict[str, dict[str, Any]] = {}
        for module, tree in surface.trees.items():
            exported = module_all(tree)
            if kind == "all_names":
                names = exported
            else:
                names = None if exported is not None else sorted(defined_public_names(tree))
            if not names:
                continue
            counts: dict[str, Any] = {
                "total": len(names),
                "ok": 0,
                "plugin": 0,
                "not_provided": [],
                "missing": [],
            }
            for name in names:
                status, value = lookup(module, name)
                if status in ("missing", "not_provided"):
                    counts[status].append(name)
                    continue
                counts[status] += 1
                if status == "ok":
                    gaps = signature_gaps(surface.definition(module, name), value)
                    if gaps is not None:
                        sig_checked += 1
                        if gaps:
                            sig_gaps[f"{module}.{name}"] = gaps
            per_module[module] = counts
        report[kind] = {
            "total": sum(c["total"] for c in per_module.values()),
            "ok": sum(c["ok"] for c in per_module.values()),
            "plugin": sum(c["plugin"] for c in per_module.values()),
            "not_provided": sum(len(c["not_provided"]) for c in per_module.values()),
            "missing": sum(len(c["missing"]) for c in per_module.values()),
            "per_module": {
                m: (c if args.details else {k: (len(v) if isinstance(v, list) else v) for k, v in c.items()})
                for m, c in per_module.items()
            },
        }
    report["signatures"] = {
        "checked": sig_checked,
        "compatible": sig_checked - len(sig_gaps),
        "gaps": sig_gaps if args.details else len(sig_gaps),
    }
    json.dump(report, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
