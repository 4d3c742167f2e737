"""Agent Lightning 0.3 code using APO runs unchanged (docs/migrating-from-agent-lightning.md)."""

from __future__ import annotations

import inspect

import pytest

import agl_core as agl
from agl_apo.algorithm import APO


def test_poml_trace_debug_flag_is_accepted(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("INFO")
    apo = APO(api_key="sk-test", _poml_trace=True, preflight=False)
    assert isinstance(apo, agl.Algorithm)
    assert "output_dir" in caplog.text
    # plugins log under the 0.3 name of the component they replace (agentlightning.algorithm.apo)
    assert any(
        r.name.startswith("agl_core.algorithm.apo") for r in caplog.records if "_poml_trace" in r.message
    )


def test_apo_resolves_from_every_path_03_used() -> None:
    from agl_core.algorithm.apo import APO as from_package
    from agl_core.algorithm.apo.apo import APO as from_module

    assert from_package is APO and from_module is APO
    assert isinstance(agl.APO(api_key="sk-test", preflight=False), APO)
    assert isinstance(agl.algorithm.APO(api_key="sk-test", preflight=False), APO)
    assert "_poml_trace" in inspect.signature(APO).parameters
