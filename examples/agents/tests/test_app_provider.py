"""An application's own OpenTelemetry provider keeps every span while agl's store gets the rollout's."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent / "app_with_own_provider.py"
CALLS = 4  # 2 tasks x 2 model calls


def test_app_provider_keeps_its_spans_and_agl_gets_the_rollouts() -> None:
    proc = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["global_provider_is_the_apps"]  # agl added its processor, never replaced the provider
    assert result["statuses"] == ["succeeded", "succeeded"]
    exported = result["exported"]
    # the app's exporter got its own span and every span the Anthropic SDK made inside the rollouts
    assert exported.count("app.startup") == 1
    assert exported.count("anthropic.messages.create") == CALLS
    # agl's store got each rollout's model calls, and never the app's span from outside any rollout
    stored = result["stored"]
    assert [names.count("anthropic.messages.create") for names in stored] == [2, 2]
    assert all("app.startup" not in names for names in stored)
