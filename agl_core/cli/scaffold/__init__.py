"""``agl plugins new``: generate a ready-to-install plugin distribution from the templates in this package.

Templates live under ``templates/`` (``common/`` for every kind, one folder per kind) as ``*.tmpl`` files
whose ``{{placeholders}}`` are replaced with the plugin's names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from agl_core import __version__

__all__ = ["PLUGIN_KINDS", "PluginNames", "generate_plugin", "plugin_names"]

PLUGIN_KINDS: dict[str, str] = {
    "store": "A LightningStore opened by its own URI scheme",
    "algorithm": "An algorithm that drives the training loop",
    "tracer": "A tracer recording each rollout's spans",
    "adapter": "An adapter turning spans into training data",
    "runner": "A runner executing the agent on rollouts",
    "command": "An `agl` subcommand",
}
"""Component kinds ``agl plugins new`` can generate -> the summary their registration starts with."""

_USAGE = {
    "store": '`agl_core.store.open_store("{name}:")`, `Trainer(store="{name}:")` or '
    "`agl store serve --store {name}:`.",
    "algorithm": '`Trainer(algorithm="{name}")` or `Trainer(algorithm={{"type": "{name}", ...}})`.',
    "tracer": '`Trainer(tracer="{name}")`.',
    "adapter": '`Trainer(adapter="{name}")`.',
    "runner": '`Trainer(runner="{name}")` or `Trainer(runner={{"type": "{name}", ...}})`.',
    "command": "`agl {name} --help`.",
}

_HOW_TO = {
    "store": "It keeps everything in memory (it extends `InMemoryLightningStore`) until you move it to "
    "your backend; `tests/test_store.py` runs agl's store conformance suite on it.",
    "algorithm": "It enqueues every sample once and records the rewards; put your training in `run()`.",
    "tracer": "It is the core's OpenTelemetry tracer; add your instrumentation around it.",
    "adapter": "It lists each span's name and attributes; return what your algorithm trains on.",
    "runner": "It is the core's `LitAgentRunner`; override what differs for you.",
    "command": "It greets; replace it with your command, heavy imports inside the function.",
}

_NAME = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")


@dataclass(frozen=True)
class PluginNames:
    """The names one plugin goes by, derived from the name given to ``agl plugins new``."""

    name: str
    """Component and entry-point name (``redis``)."""
    dist: str
    """Distribution name (``agl-redis``)."""
    package: str
    """Import package (``agl_redis``)."""
    ident: str
    """Python identifier of the name (``redis``)."""
    cls: str
    """Class-name prefix (``Redis``)."""


def plugin_names(name: str) -> PluginNames:
    """Derive every name from ``name`` (``redis`` or ``agl-redis``); ValueError when it is not usable."""
    base = name[4:] if name.startswith("agl-") else name
    if not _NAME.match(base):
        raise ValueError(
            f"Plugin name {name!r} is not usable: use lowercase letters, digits and single hyphens, "
            "starting with a letter (e.g. 'redis' or 'my-store'; an 'agl-' prefix is optional)."
        )
    ident = base.replace("-", "_")
    return PluginNames(
        name=base,
        dist=f"agl-{base}",
        package=f"agl_{ident}",
        ident=ident,
        cls="".join(part.capitalize() for part in base.split("-")),
    )


def _requirement(distribution: str) -> str:
    """``distribution`` at agl-core's minor version (every agl-* distribution shares agl-core's version)."""
    major, minor = (int(part) for part in __version__.split(".")[:2])
    return f"{distribution}>={major}.{minor},<{major}.{minor + 1}"


def _render(template: str, values: dict[str, str]) -> str:
    for key, value in values.items():
        template = template.replace("{{" + key + "}}", value)
    leftover = re.search(r"\{\{\w+\}\}", template)
    if leftover:
        raise RuntimeError(
            f"Template placeholder {leftover.group(0)} has no value (a bug in agl's templates)."
        )
    return template


def generate_plugin(name: str, kind: str, directory: Path) -> Path:
    """Write a new plugin distribution of ``kind`` into ``directory`` (which must not exist) and return it.

    Raises:
        ValueError: ``name`` or ``kind`` is not usable.
        FileExistsError: ``directory`` already exists.
    """
    if kind not in PLUGIN_KINDS:
        raise ValueError(f"Unknown plugin kind {kind!r}; expected one of {', '.join(PLUGIN_KINDS)}.")
    names = plugin_names(name)
    if directory.exists():
        raise FileExistsError(
            f"{directory} already exists: choose another directory (--directory) or remove it first."
        )
    module = kind
    summary = f"{PLUGIN_KINDS[kind]} ({names.dist})"
    values = {
        "name": names.name,
        "dist": names.dist,
        "package": names.package,
        "ident": names.ident,
        "cls": names.cls,
        "kind": kind,
        "module": module,
        "summary": summary,
        "core_requirement": _requirement("agl-core"),
        "testing_requirement": _requirement("agl-testing"),
        "usage": _USAGE[kind].format(name=names.name),
        "how_to": _HOW_TO[kind],
    }
    templates = resources.files(__name__) / "templates"
    layout = {
        "common/pyproject.toml.tmpl": "pyproject.toml",
        "common/README.md.tmpl": "README.md",
        "common/__init__.py.tmpl": f"{names.package}/__init__.py",
        "common/py.typed.tmpl": f"{names.package}/py.typed",
        "common/test_plugin.py.tmpl": "tests/test_plugin.py",
        f"{kind}/hooks.py.tmpl": f"{names.package}/hooks.py",
        f"{kind}/{module}.py.tmpl": f"{names.package}/{module}.py",
        f"{kind}/test_kind.py.tmpl": f"tests/test_{module}.py",
    }
    for source, target in layout.items():
        path = directory / target
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(_render((templates / source).read_text(encoding="utf-8"), values), encoding="utf-8")
    return directory
