"""Plain-text rendering of an :class:`~agl_core.adapter.diagnostics.AdapterReport`."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agl_core.adapter.diagnostics import AdapterReport

__all__ = ["format_report"]


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "  " + "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]


def format_report(report: AdapterReport) -> str:
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
