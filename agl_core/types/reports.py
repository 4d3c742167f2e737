"""Reports a person or a program reads: an adapter's findings on one rollout and ``agl doctor``'s report.

Plain pydantic records (no adapter or store code), so the store server's doctor route and the OpenAPI
document can name them without importing the adapters that fill them in.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, computed_field

__all__ = ["AdapterReport", "AttemptInfo", "DoctorReport", "Problem", "Severity", "TripletSummary"]

Severity = Literal["error", "warning", "info"]
"""``error``: the rollout gives no usable training data; ``warning``: some data is lost or degraded."""


class Problem(BaseModel):
    """One finding: a stable ``code``, what is wrong (``message``) and what to do (``fix``)."""

    code: str
    severity: Severity
    message: str
    fix: str | None = None
    span_ids: list[str] = Field(default_factory=list)


class TripletSummary(BaseModel):
    """The shape of one triplet: token counts, reward and where it came from."""

    index: int
    span_id: str | None = None
    sequence_id: int | None = None
    response_id: str | None = None
    agent_name: str | None = None
    prompt_tokens: int
    response_tokens: int
    reward: float | None = None
    has_logprobs: bool = False


class AdapterReport(BaseModel):
    """The per-rollout report of an adapter run; ``ok`` when it gave triplets and found no error."""

    adapter: str
    settings: dict[str, Any] = Field(default_factory=dict)
    rollout_ids: list[str] = Field(default_factory=list)
    attempt_ids: list[str] = Field(default_factory=list)
    span_count: int = 0
    span_kinds: dict[str, int] = Field(default_factory=dict)
    span_names: dict[str, int] = Field(default_factory=dict)
    agent_names: list[str] = Field(default_factory=list)
    llm_span_count: int = 0
    """Model calls found: several records of one call (framework, tracer, proxy) count once."""
    llm_records: dict[str, str] = Field(default_factory=dict)
    """Span id of every LLM-call record -> span id of the record read for its call (itself when it is the
    one read); its distinct values are the calls (``llm_span_count`` when the adapter tracks records)."""
    triplets: list[TripletSummary] = Field(default_factory=list)
    problems: list[Problem] = Field(default_factory=list)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def ok(self) -> bool:
        """True when there are triplets and no problem of severity ``error``."""
        return bool(self.triplets) and not any(p.severity == "error" for p in self.problems)

    def codes(self) -> list[str]:
        """The problem codes, in report order."""
        return [p.code for p in self.problems]

    def get(self, code: str) -> Problem | None:
        """The first problem with ``code``, or None."""
        return next((p for p in self.problems if p.code == code), None)

    def format(self) -> str:
        """The report as text for a person (what ``agl doctor`` prints)."""
        return _format_report(self)


class AttemptInfo(BaseModel):
    """One attempt of the rollout, as the report shows it."""

    attempt_id: str
    sequence_id: int
    status: str
    worker_id: str | None = None
    start_time: float | None = None
    end_time: float | None = None


class DoctorReport(BaseModel):
    """The rollout, its attempts, which spans were analysed (``scope``) and the adapter's report."""

    rollout_id: str
    status: str
    mode: str | None = None
    attempts: list[AttemptInfo] = Field(default_factory=list)
    scope: str
    report: AdapterReport

    def format(self) -> str:
        """Text for a person: rollout, attempts, then the adapter report."""
        mode = f", mode {self.mode}" if self.mode else ""
        lines = [f"Rollout {self.rollout_id}: {self.status}{mode}, {len(self.attempts)} attempt(s)"]
        for attempt in self.attempts:
            worker = f", worker {attempt.worker_id}" if attempt.worker_id else ""
            lines.append(f"  attempt {attempt.sequence_id} {attempt.attempt_id}: {attempt.status}{worker}")
        lines.append(f"Analysed: {self.scope}")
        lines.append(self.report.format())
        return "\n".join(lines)


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "  " + "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]


def _format_report(report: AdapterReport) -> str:
    """Counts, a table of triplets, then every problem with its fix, then a one-line verdict."""
    settings = ", ".join(f"{key}={value!r}" for key, value in report.settings.items())
    lines = [f"Adapter: {report.adapter}" + (f" ({settings})" if settings else "")]
    kinds = ", ".join(f"{kind} {count}" for kind, count in report.span_kinds.items())
    lines.append(f"Spans: {report.span_count}" + (f" ({kinds})" if kinds else ""))
    if report.agent_names:
        lines.append("Agents seen: " + ", ".join(report.agent_names))
    lines.append(f"LLM calls: {report.llm_span_count} -> triplets: {len(report.triplets)}")
    if report.triplets:
        rows = [["#", "agent", "prompt ids", "response ids", "reward", "logprobs", "span"]]
        for t in report.triplets:
            reward = "-" if t.reward is None else f"{t.reward:g}"
            rows.append(
                [
                    str(t.index),
                    t.agent_name or "-",
                    str(t.prompt_tokens),
                    str(t.response_tokens),
                    reward,
                    "yes" if t.has_logprobs else "no",
                    t.span_id or "-",
                ]
            )
        lines += _table(rows)
    if report.problems:
        lines.append(f"Problems ({len(report.problems)}):")
        for problem in report.problems:
            lines.append(f"  [{problem.severity}] {problem.code}: {problem.message}")
            if problem.fix:
                lines.append(f"      fix: {problem.fix}")
    else:
        lines.append("Problems: none")
    if report.ok:
        rewarded = sum(t.reward is not None for t in report.triplets)
        lines.append(f"Verdict: OK (triplets: {len(report.triplets)}, with a reward: {rewarded})")
    else:
        lines.append("Verdict: NO USABLE TRAINING DATA - fix the errors above.")
    return "\n".join(lines)
