"""``agl store export`` streams: at any moment it holds one page of rollouts and one rollout's spans,
however many spans the store has (bench/export_bench.py measures the peak memory on up to 1M spans)."""

from __future__ import annotations

import asyncio
import gc
import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from agl_core.cli.store_export_cmd import export_records
from agl_core.cli.store_inspect import PAGE_SIZE
from agl_core.types import Rollout, Span

REPO_ROOT = Path(__file__).resolve().parents[2]
ROLLOUTS = 2 * PAGE_SIZE + 50  # three pages
SPANS_PER_ROLLOUT = 4  # three LLM calls and a reward
READ_ONLY_SPAN_CACHE = 500  # decoded spans a read-only SqliteLightningStore keeps


def export_bench() -> ModuleType:
    """bench/export_bench.py, whose filler builds the store (bench/ is not a package)."""
    spec = importlib.util.spec_from_file_location("agl_export_bench", REPO_ROOT / "bench" / "export_bench.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def live(kind: type) -> int:
    """How many objects of this type exist right now (after a full collection)."""
    gc.collect()
    return sum(1 for obj in gc.get_objects() if isinstance(obj, kind))


class CheckingWriter:
    """Keeps no record; every few rollouts counts the spans and rollouts alive in this process, beyond
    those alive before the export started (earlier tests may have left some)."""

    CHECK_EVERY = 40

    def __init__(self) -> None:
        self.records = 0
        self.writes = 0
        self.baseline = (live(Span), live(Rollout))
        self.max_spans = 0
        self.max_rollouts = 0

    def write(self, records: list[dict[str, Any]]) -> None:
        self.records += len(records)
        self.writes += 1
        if self.writes % self.CHECK_EVERY == 0:
            self.max_spans = max(self.max_spans, live(Span) - self.baseline[0])
            self.max_rollouts = max(self.max_rollouts, live(Rollout) - self.baseline[1])

    def flush(self, force: bool) -> int | None:
        return self.records

    def close(self) -> None:
        """Nothing to release."""


pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("export") / "store.db"
    asyncio.run(export_bench().fill(path, ROLLOUTS, SPANS_PER_ROLLOUT))
    return path


@pytest.mark.parametrize("adapter", ["messages", "triplets"])
def test_export_holds_one_rollouts_spans_not_the_store(db: Path, adapter: str) -> None:
    writer = CheckingWriter()
    saved: list[tuple[int, int]] = []
    written = asyncio.run(
        export_records(
            f"sqlite:///{db}",
            writer,
            adapter=adapter,
            statuses=["succeeded"],
            min_reward=None,
            start=0,
            save=lambda reached, position: saved.append((reached, position)),
            on_rollout=lambda done, total: None,
        )
    )
    assert saved[-1][0] == ROLLOUTS
    # messages: one chat sample per LLM call; triplets: one per LLM call too
    assert written == writer.records == ROLLOUTS * (SPANS_PER_ROLLOUT - 1)
    assert writer.max_spans > 0  # the check ran while spans were loaded
    # the store holds ROLLOUTS * SPANS_PER_ROLLOUT = 1800 spans; alive at a time: the spans of the rollout
    # being exported, and the read-only SQLite store's span cache (500 spans)
    assert writer.max_spans <= READ_ONLY_SPAN_CACHE + 2 * SPANS_PER_ROLLOUT, writer.max_spans
    assert writer.max_rollouts <= PAGE_SIZE + 2, writer.max_rollouts
