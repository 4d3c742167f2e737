"""The tree shows the design (issue 37 §4): no import cycle across rooms, no store import of the adapters.

A room is a first-level subpackage or module of ``agl_core`` (``agl_core.store``, ``agl_core.plugins``);
`tools/import_cycles.py` finds the cycles, counting imports inside functions too.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("import_cycles", ROOT / "tools" / "import_cycles.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_no_import_cycle_crosses_rooms() -> None:
    tool = _tool()
    groups, _ = tool.import_cycles(ROOT / "agl_core", everywhere=True)
    crossing = [group for group in tool.cross_room(groups)]
    assert not crossing, f"import cycles across rooms (break one import, or move a type down): {crossing}"


def test_cross_room_check_sees_a_cycle() -> None:
    tool = _tool()
    assert tool.cross_room([["agl_core.llm_proxy.server", "agl_core.metrics.proxy_metrics"]])
    assert not tool.cross_room([["agl_core.adapter", "agl_core.adapter.base"]])


def test_importing_the_store_server_does_not_import_the_adapters() -> None:
    code = (
        "import sys, agl_core.store.http, agl_core.store.http.server, agl_core.store.http.routes\n"
        "from agl_core.store.http.openapi import openapi_document\n"
        "openapi_document()\n"
        "print(sorted(m for m in sys.modules if m.startswith('agl_core.adapter')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]", out.stdout
