"""The live view of an APO run: rounds, the current round's candidates, scores and rollout counts.

On a terminal it is a `rich` live panel; elsewhere (CI logs, files) the same events become log lines.
"""

from __future__ import annotations

import logging
import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console, RenderableType

    from agl_apo.state import RoundRecord

__all__ = ["APOProgress", "ChildRow"]

logger = logging.getLogger("agl_core.algorithm.apo")

_MIN_REFRESH_SECONDS = 0.1


def _fmt(score: float | None) -> str:
    return "-" if score is None else f"{score:.3f}"


@dataclass
class ChildRow:
    """One child of the current round as the view shows it."""

    parent: str
    status: str = "waiting"
    version: str | None = None
    score: float | None = None


@dataclass
class _View:
    run_id: str
    total_rounds: int
    round: int = 0
    phase: str = "starting"
    enqueued: int = 0
    finished: int = 0
    best_version: str = "v0"
    best_score: float | None = None
    children: list[ChildRow] = field(default_factory=list)
    rounds: list[RoundRecord] = field(default_factory=list)


class APOProgress:
    """Collects run events and shows them live (``rich``) or as log lines.

    Args:
        run_id: Shown in the title.
        total_rounds: The configured number of rounds.
        live: True for the live panel, False for log lines, None to pick by whether the console is a
            terminal.
        console: The `rich` console to draw on (default: one on stdout).
    """

    def __init__(
        self, *, run_id: str, total_rounds: int, live: bool | None = None, console: Console | None = None
    ) -> None:
        self.view = _View(run_id=run_id, total_rounds=total_rounds)
        self._console = console
        self._live_wanted = live
        self._live: Any = None
        self._last_refresh = 0.0

    # -- lifecycle -----------------------------------------------------------------------------------

    @property
    def console(self) -> Console:
        """The console the view and the final report are drawn on."""
        if self._console is None:
            from rich.console import Console

            self._console = Console(file=sys.stdout)
        return self._console

    def start(self) -> None:
        """Open the live panel when one is wanted (or the console is a terminal)."""
        live = self.console.is_terminal if self._live_wanted is None else self._live_wanted
        if not live:
            return
        from rich.errors import LiveError
        from rich.live import Live

        display = Live(self.renderable(), console=self.console, auto_refresh=False, transient=False)
        try:
            display.start()
        except LiveError:  # another live display (e.g. the trainer's) owns this console: log instead
            logger.info("APO: another live display is active; reporting progress as log lines.")
            return
        self._live = display

    def stop(self) -> None:
        """Draw the final state and close the live panel."""
        display, self._live = self._live, None
        if display is not None:
            display.update(self.renderable(), refresh=True)
            display.stop()

    @property
    def is_live(self) -> bool:
        """Whether the live panel is showing."""
        return self._live is not None

    # -- events --------------------------------------------------------------------------------------

    def phase(self, text: str) -> None:
        """The run moved to a new phase (``"round 2: critiques"``)."""
        self.view.phase = text
        if not self.is_live:
            logger.info("APO %s: %s", self.view.run_id, text)
        self._refresh(force=True)

    def start_round(self, round_: int, parents: list[str]) -> None:
        """A round began with these parents (one child each)."""
        self.view.round = round_
        self.view.children = [ChildRow(parent=p) for p in parents]
        self._refresh(force=True)

    def child(
        self, index: int, status: str, *, version: str | None = None, score: float | None = None
    ) -> None:
        """Child ``index`` of the round changed state."""
        if not 0 <= index < len(self.view.children):
            return
        row = self.view.children[index]
        row.status = status
        if version is not None:
            row.version = version
        if score is not None:
            row.score = score
        self._refresh()

    def scored(self, version: str, score: float) -> None:
        """A candidate got its validation-batch score."""
        for row in self.view.children:
            if row.version == version:
                row.score = score
        self._refresh()

    def rollouts(self, finished: int, enqueued: int) -> None:
        """Rollouts finished / were enqueued (deltas)."""
        self.view.finished += finished
        self.view.enqueued += enqueued
        self._refresh()

    def best(self, version: str, score: float | None) -> None:
        """The best prompt so far changed."""
        self.view.best_version, self.view.best_score = version, score
        self._refresh(force=True)

    def end_round(self, record: RoundRecord) -> None:
        """A round finished."""
        self.view.rounds.append(record)
        self.view.best_version, self.view.best_score = record.best, record.best_score
        if not self.is_live:
            batch = ", ".join(f"{v}={s:.3f}" for v, s in sorted(record.scores.items(), key=lambda kv: -kv[1]))
            logger.info(
                "APO %s: round %d done: beam %s; leader %s full-val %s; best %s (%s). Scores: %s",
                self.view.run_id,
                record.round,
                ", ".join(record.beam),
                record.leader,
                _fmt(record.leader_full_val_score),
                record.best,
                _fmt(record.best_score),
                batch or "-",
            )
        self._refresh(force=True)

    # -- drawing -------------------------------------------------------------------------------------

    def _refresh(self, *, force: bool = False) -> None:
        if self._live is None:
            return
        now = time.monotonic()
        if not force and now - self._last_refresh < _MIN_REFRESH_SECONDS:
            return
        self._last_refresh = now
        self._live.update(self.renderable(), refresh=True)

    def renderable(self) -> RenderableType:
        """The panel for the current state."""
        from rich.console import Group
        from rich.panel import Panel
        from rich.table import Table

        view = self.view
        header = (
            f"[bold]{view.phase}[/bold]   rollouts {view.finished}/{view.enqueued}   "
            f"best [bold green]{view.best_version}[/] {_fmt(view.best_score)}"
        )
        rounds = Table(title="Rounds", expand=False, title_justify="left")
        for column in ("round", "candidates", "top batch score", "leader", "leader full val", "best so far"):
            rounds.add_column(column)
        for record in view.rounds:
            top = max(record.scores.values()) if record.scores else None
            rounds.add_row(
                str(record.round),
                str(len(record.candidates)),
                _fmt(top),
                record.leader,
                _fmt(record.leader_full_val_score),
                f"{record.best} {_fmt(record.best_score)}",
            )
        parts: list[RenderableType] = [header, rounds]
        if view.children:
            current = Table(title=f"Round {view.round} children", expand=False, title_justify="left")
            for column in ("#", "parent", "status", "candidate", "batch score"):
                current.add_column(column)
            for index, row in enumerate(view.children, start=1):
                current.add_row(str(index), row.parent, row.status, row.version or "-", _fmt(row.score))
            parts.append(current)
        title = f"APO {view.run_id}: round {view.round}/{view.total_rounds}"
        return Panel(Group(*parts), title=title, title_align="left")
