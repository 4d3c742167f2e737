"""The plugin is discovered and healthy, its entry point imports no Weave, and 0.3's paths resolve to it."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import version

import agl_weave
from agl_core.plugins import PluginManager
from agl_testing import records_by_name, run_cli


def _loaded_manager() -> PluginManager:
    manager = PluginManager(strict=True)
    manager.load_entrypoints()
    return manager


def test_weave_is_listed_ok_with_its_version() -> None:
    result = run_cli("plugins", "list", "--json", manager=_loaded_manager())
    assert result.exit_code == 0, result.output
    record = records_by_name(result.json())["weave"]
    assert record["status"] == "ok"
    assert record["distribution"] == "agl-weave"
    assert record["version"] == version("agl-weave") == agl_weave.__version__
    assert {"kind": "tracer", "name": "weave"}.items() <= record["provides"][0].items()


def test_plugins_check_passes() -> None:
    result = run_cli("plugins", "check", manager=_loaded_manager())
    assert result.exit_code == 0, result.output + result.stderr


def test_the_registry_resolves_the_tracer() -> None:
    from agl_weave.tracer import WeaveTracer

    entry = _loaded_manager().registry("tracer").get("weave")
    assert entry.distribution == "agl-weave"
    assert entry.missing == ()
    assert entry.load() is WeaveTracer


def test_loading_the_entry_point_and_importing_agl_core_import_no_weave() -> None:
    code = (
        "import json, sys\n"
        "import agl_core, agl_core.tracer, agl_core.tracer.weave, agl_core.instrumentation.weave\n"
        "from agl_core.plugins import PluginManager\n"
        "PluginManager(strict=True).load_entrypoints()\n"
        "names = ('weave', 'agl_weave')\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in names)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == ["agl_weave", "agl_weave.hooks"]


def test_agentlightning_03_paths_resolve_to_the_plugin() -> None:
    import agl_core
    import agl_weave.instrumentation as instrumentation
    from agl_testing import use_plugin_manager
    from agl_weave.recording import WeaveSpanRecordingContext
    from agl_weave.routing import WeaveTracerManagedTraceServer
    from agl_weave.server import InMemoryWeaveTraceServer
    from agl_weave.tracer import WeaveTracer

    with use_plugin_manager(_loaded_manager()):
        from agl_core.tracer.weave import WeaveTracer as tracer_03

        assert tracer_03 is WeaveTracer and agl_core.tracer.WeaveTracer is WeaveTracer
    import agl_core.instrumentation.weave as compat_instrumentation
    import agl_core.tracer.weave as compat_tracer

    assert compat_tracer.WeaveSpanRecordingContext is WeaveSpanRecordingContext
    assert compat_tracer.WeaveTracerManagedTraceServer is WeaveTracerManagedTraceServer
    assert compat_instrumentation.InMemoryWeaveTraceServer is InMemoryWeaveTraceServer
    assert compat_instrumentation.instrument_weave is instrumentation.instrument_weave
    assert compat_instrumentation.uninstrument_weave is instrumentation.uninstrument_weave
    assert sorted(compat_instrumentation.__all__) == [
        "InMemoryWeaveTraceServer",
        "instrument_weave",
        "uninstrument_weave",
    ]


def test_trainer_builds_the_tracer_by_name() -> None:
    from agl_core.trainer import Trainer
    from agl_testing import use_plugin_manager
    from agl_weave.tracer import WeaveTracer

    with use_plugin_manager(_loaded_manager()):
        trainer = Trainer(
            algorithm="baseline", tracer={"type": "weave", "flush_timeout": 5.0}, progress=False
        )
    assert isinstance(trainer.tracer, WeaveTracer) and trainer.tracer.flush_timeout == 5.0
