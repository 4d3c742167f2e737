"""0.3 code with its own imports runs on agl: ``agentlightning`` is agl's top level and modules."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from agentlightning.store.base import LightningStore
from agentlightning.types import Rollout

from agl_testing.doc_blocks import check_page_runs

README = Path(__file__).resolve().parents[1] / "README.md"


def test_top_level_names_and_modules_are_agls() -> None:
    import agentlightning as agl
    import agentlightning.store
    import agentlightning.tracer.otel as otel
    from agentlightning.store.memory import InMemoryLightningStore

    import agl_core
    import agl_core.tracer.otel

    assert agl.Trainer is agl_core.Trainer and agl.__version__ == agl_core.__version__
    assert otel is agl_core.tracer.otel and agentlightning.store.memory is agl_core.store.memory
    assert agentlightning.store.InMemoryLightningStore is agl_core.store.InMemoryLightningStore
    assert InMemoryLightningStore is agl_core.InMemoryLightningStore
    assert "Trainer" in agl.__all__ and "Trainer" in dir(agl)


def test_agl_legacy_names_come_with_it() -> None:
    import agentlightning as agl
    from agentlightning.client import AgentLightningClient
    from agentlightning.store.collection import InMemoryLightningCollections
    from agl_legacy.client import AgentLightningClient as legacy_client

    assert AgentLightningClient is legacy_client
    assert isinstance(agl.CollectionBasedLightningStore(InMemoryLightningCollections()), agl.LightningStore)


class RolloutsOnly(LightningStore):
    """0.3 user code: a store with the methods it needs, on 0.3's base (agl's is abstract)."""

    def __init__(self) -> None:
        super().__init__()
        self.rollouts: dict[str, Rollout] = {}

    async def enqueue_rollout(self, input: Any, *args: Any, **kwargs: Any) -> Rollout:
        rollout = Rollout(rollout_id=f"ro-{len(self.rollouts)}", input=input, start_time=0.0)
        self.rollouts[rollout.rollout_id] = rollout
        return rollout

    async def get_rollout_by_id(self, rollout_id: str) -> Rollout | None:
        return self.rollouts.get(rollout_id)


async def test_a_03_store_class_is_built_and_every_store_is_a_lightning_store() -> None:
    import agentlightning as agl
    import agentlightning.store

    store = RolloutsOnly()
    rollout = await store.enqueue_rollout({"q": 1})
    assert await store.get_rollout_by_id(rollout.rollout_id) == rollout
    with pytest.raises(NotImplementedError, match="dequeue_rollout"):
        await store.dequeue_rollout()
    assert agl.LightningStore is agentlightning.store.LightningStore is LightningStore
    assert isinstance(agl.InMemoryLightningStore(), LightningStore)
    assert issubclass(agl.InMemoryLightningStore, agl.LightningStore)


def test_patching_the_store_modules_patches_agls(monkeypatch: pytest.MonkeyPatch) -> None:
    import agentlightning.store.base

    import agl_core.store.base

    monkeypatch.setattr(agentlightning.store.base, "UNSET", "patched")
    assert agl_core.store.base.UNSET == "patched"


def test_an_unknown_module_is_a_module_not_found_error() -> None:
    with pytest.raises(ModuleNotFoundError, match=r"agentlightning\.nope"):
        import agentlightning.nope  # noqa: F401


LOGGING_SCRIPT = """
import logging, sys
import agentlightning as agl

agl.setup_logging("INFO", color=False)
seen = []
handler = logging.Handler()
handler.emit = lambda record: seen.append(record.getMessage())
logging.getLogger("agentlightning.store").addHandler(handler)
logging.getLogger("agl_core.store.memory").info("stored")
print(seen)
"""


def test_agentlightning_loggers_get_agls_records() -> None:
    out = subprocess.run([sys.executable, "-c", LOGGING_SCRIPT], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "['stored']"


def test_readme_runs(tmp_path: Path) -> None:
    check_page_runs(README, tmp_path)


def test_with_the_real_package_installed_too_the_import_says_which_to_uninstall(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import agentlightning

    monkeypatch.setattr(agentlightning, "version", lambda name: "0.3.0")
    with pytest.raises(ImportError, match="pip uninstall agentlightning-agl"):
        agentlightning._refuse_the_real_package()
