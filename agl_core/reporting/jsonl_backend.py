"""``jsonl``: one JSON object per step appended to ``<run_dir>/metrics.jsonl`` (no dependency)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["JsonlReporter", "append_jsonl", "read_jsonl"]


class JsonlReporter:
    """Appends each step's metrics, exactly as given, as one line of ``metrics.jsonl`` (flushed at once).

    The line is the mapping itself: algorithms keep their own ``step``/``iteration`` key in it, so the
    file reads the same as before reporters existed. Resumed runs append to the same file.
    """

    def __init__(self, run_dir: Path, *, run_name: str = "", config: Mapping[str, Any] | None = None) -> None:
        self.path = Path(run_dir) / "metrics.jsonl"

    def log(self, step: int, metrics: Mapping[str, Any]) -> None:
        """Append one line."""
        append_jsonl(self.path, metrics)

    def close(self) -> None:
        """Nothing to release (each line is written and closed at once)."""


def append_jsonl(path: Path, row: Mapping[str, Any]) -> None:
    """Append ``row`` as one JSON line to ``path`` (folders created; other values written as text)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(dict(row), default=str) + "\n")


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Every row of a metrics JSONL file, in order ([] when it does not exist)."""
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
