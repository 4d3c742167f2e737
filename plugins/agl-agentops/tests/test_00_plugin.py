"""The plugin is discovered and healthy, and loading its entry point does not import AgentOps."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import version

import agl_agentops
from agl_core.plugins import PluginManager
from agl_testing import records_by_name, run_cli


def _loaded_manager() -> PluginManager:
    manager = PluginManager(strict=True)
    manager.load_entrypoints()
    return manager


def test_agentops_is_listed_ok_with_its_version() -> None:
    result = run_cli("plugins", "list", "--json", manager=_loaded_manager())
    assert result.exit_code == 0, result.output
    record = records_by_name(result.json())["agentops"]
    assert record["status"] == "ok"
    assert record["distribution"] == "agl-agentops"
    assert record["version"] == version("agl-agentops") == agl_agentops.__version__
    assert {"kind": "tracer", "name": "agentops"}.items() <= record["provides"][0].items()


def test_plugins_check_passes() -> None:
    result = run_cli("plugins", "check", manager=_loaded_manager())
    assert result.exit_code == 0, result.output + result.stderr


def test_the_registry_resolves_the_tracer() -> None:
    from agl_agentops.tracer import AgentOpsTracer

    entry = _loaded_manager().registry("tracer").get("agentops")
    assert entry.distribution == "agl-agentops"
    assert entry.missing == ()
    assert entry.load() is AgentOpsTracer


def test_loading_the_entry_point_imports_neither_agentops_nor_the_tracer() -> None:
    code = (
        "import json, sys\n"
        "from agl_core.plugins import PluginManager\n"
        "PluginManager(strict=True).load_entrypoints()\n"
        "names = ('agentops', 'agl_agentops')\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in names)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == ["agl_agentops", "agl_agentops.hooks"]


def test_top_level_factory_and_trainer_build_the_tracer() -> None:
    import agl_core as agl
    from agl_agentops.tracer import AgentOpsTracer
    from agl_core.trainer import Trainer
    from agl_testing import use_plugin_manager

    with use_plugin_manager(_loaded_manager()):
        tracer = agl.AgentOpsTracer(export_timeout=2.0)
        trainer = Trainer(
            algorithm="baseline", tracer={"type": "agentops", "flush_timeout": 5.0}, progress=False
        )
    assert isinstance(tracer, AgentOpsTracer) and tracer.export_timeout == 2.0
    assert isinstance(trainer.tracer, AgentOpsTracer) and trainer.tracer.flush_timeout == 5.0
