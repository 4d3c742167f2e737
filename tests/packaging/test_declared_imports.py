"""Every third-party package that ``agl_core`` imports is declared in agl-core's pyproject.

A package that only arrives through another dependency (``yarl`` through aiohttp, say) works until that
dependency drops it; declaring it (as a dependency, or in the extra of the feature that imports it) keeps
``pip install agl-core[...]`` complete.
"""

from __future__ import annotations

import ast
import re
import sys
from importlib.metadata import packages_distributions
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[2]
# agl's own plugin packages (agl_proxy_translate, ...): found on first use with the `pip install` line to
# add them, never dependencies of agl-core (each plugin depends on agl-core)
PLUGIN_PACKAGES = {init.parent.name for init in ROOT.glob("plugins/*/agl_*/__init__.py")}

# import name -> distribution, for modules not installed in the test venv (optional, heavy or GPU-only)
KNOWN_DISTRIBUTIONS = {
    "google": "protobuf",
    "graphviz": "graphviz",
    "matplotlib": "matplotlib",
    "mlflow": "mlflow-skinny",
    "pyarrow": "pyarrow",
    "pynvml": "nvidia-ml-py",
    "tensorboard": "tensorboard",
    "tokenizers": "tokenizers",
    "torch": "torch",
    "transformers": "transformers",
    "uvloop": "uvloop",
    "vllm": "vllm",
    "wandb": "wandb",
}


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_name(requirement: str) -> str:
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    assert match, requirement
    return _normalize(match.group(1))


def imported_top_level_modules(package_dir: Path, own_name: str) -> dict[str, str]:
    """Top-level third-party modules imported anywhere under ``package_dir`` -> one file importing it."""
    found: dict[str, str] = {}
    for path in sorted(package_dir.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top == own_name or top in sys.stdlib_module_names:
                    continue
                found.setdefault(top, str(path.relative_to(package_dir.parent)))
    return found


def declared_distributions(pyproject: Path) -> set[str]:
    """Distributions named by ``dependencies`` and every optional-dependency extra."""
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    requirements = list(project.get("dependencies", []))
    for extra in project.get("optional-dependencies", {}).values():
        requirements.extend(extra)
    return {_requirement_name(requirement) for requirement in requirements}


def test_the_scanner_finds_imports(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "a.py").write_text("import os\nimport yarl.x\nfrom pkg import b\nfrom . import c\n")
    (package / "b.py").write_text("def f():\n    from wrapt import decorator\n")
    assert imported_top_level_modules(package, "pkg") == {"yarl": "pkg/a.py", "wrapt": "pkg/b.py"}


def test_every_import_of_agl_core_is_declared() -> None:
    installed = packages_distributions()
    declared = declared_distributions(ROOT / "pyproject.toml")
    undeclared = []
    for module, where in imported_top_level_modules(ROOT / "agl_core", "agl_core").items():
        if module in PLUGIN_PACKAGES:
            continue
        if module in KNOWN_DISTRIBUTIONS:
            distributions = [KNOWN_DISTRIBUTIONS[module]]
        elif module in installed:
            distributions = installed[module]
        else:
            undeclared.append(f"{module} ({where}): not installed; add it to KNOWN_DISTRIBUTIONS")
            continue
        if not any(_normalize(name) in declared for name in distributions):
            undeclared.append(f"{module} ({where}): declare {' or '.join(distributions)} in pyproject.toml")
    assert not undeclared, "agl_core imports packages its pyproject does not declare:\n" + "\n".join(
        undeclared
    )


def test_agl_core_never_imports_the_test_kit() -> None:
    # agl-testing depends on agl-core and is installed for tests only (agl-core's `test` extra lists it)
    imported = imported_top_level_modules(ROOT / "agl_core", "agl_core")
    assert "agl_testing" not in imported, f"{imported['agl_testing']} imports agl_testing"
