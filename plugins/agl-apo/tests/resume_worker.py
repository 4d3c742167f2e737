"""Subprocess for the resume test: runs APO on a SQLite store until round 1 is saved, then hangs.

``python -m tests.resume_worker DB RUN_DIR``. After round 1 is saved, task-model requests block (the fake
server runs on its own thread), so round 2 has rollouts in flight; the worker prints ``BLOCKED`` when the
first of them arrives, and the test SIGKILLs it.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from pathlib import Path
from typing import Any

from agl_core.store.sqlite import SqliteLightningStore
from agl_testing.fake_openai import FakeOpenAIServer, Reply

from .harness import initial_resources, make_apo, run_apo
from .scripted import CRITIC_MODEL, EDITOR_MODEL, TASK_MODEL, ScriptedModels, make_tasks

RUN_ID = "resumable"
TRAIN = make_tasks(9)
VAL = make_tasks(6, offset=3)
HANG_SECONDS = 300.0


class FreezingModels(ScriptedModels):
    """Scripted models whose task model hangs once ``frozen`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.frozen = threading.Event()
        self._announced = threading.Event()

    def __call__(self, request: dict[str, Any]) -> Reply:
        if self.frozen.is_set() and request.get("model") == TASK_MODEL:
            if not self._announced.is_set():
                self._announced.set()
                print("BLOCKED", flush=True)
            threading.Event().wait(HANG_SECONDS)
        return super().__call__(request)


async def main(db: Path, run_dir: Path) -> None:
    models = FreezingModels()
    store = SqliteLightningStore(db)
    with FakeOpenAIServer(models, models=[TASK_MODEL, CRITIC_MODEL, EDITOR_MODEL]) as server:

        def after_round(record: Any, state: Any) -> None:
            print(f"SAVED {record.round}", flush=True)
            if record.round == 1:
                models.frozen.set()

        apo = make_apo(server, run_id=RUN_ID, output_dir=run_dir, beam_rounds=3, on_round_end=after_round)
        await run_apo(apo, store, initial_resources(server), TRAIN, VAL)
    print("FINISHED", flush=True)  # only reached if the test failed to kill the worker


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), Path(sys.argv[2])))
