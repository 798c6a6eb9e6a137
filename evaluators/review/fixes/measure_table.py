"""The table of a measured fix (`--fix --run`): one row per metric, before, after, per step and
the verdict, as text or Markdown, with the notes on why a row could not be judged.

Separate from `measure.py` because it only draws what `measure.judge` decided.
"""
from __future__ import annotations

from jaxmem.evaluators.review.fixes.fix_metrics import (
    CONFIRMED,
    ERROR,
    METRICS,
    NOT_CONFIRMED,
    NOT_MEASURABLE,
    OUTPUT_KEPT,
    FixRun,
    Row,
    _fmt,
)
from jaxmem.evaluators.review.fixes.measure import WALL_NOT_COMPARABLE


def _per_step(metric: str, row: Row) -> str:
    if row.per_step_before is None and row.per_step_after is None:
        return "-"
    unit = METRICS[metric][1]

    def one(v: float | None) -> str:
        if v is None:
            return "-"
        if unit == "seconds":
            return f"{v * 1e3:.2f} ms"
        if unit == "bytes":
            return _fmt(metric, v)
        return f"{v:.3g}"
    return f"{one(row.per_step_before)} -> {one(row.per_step_after)}"


def table_rows(run: FixRun) -> list[list[str]]:
    rows = [["metric", "before", "after", "per step", "verdict"]]
    if "JM204" in run.codes or not (run.runs_before and run.runs_after):
        rows.append(["runs", "yes" if run.runs_before else "no (error)", "yes" if run.runs_after else "no (error)",
                     "-", (CONFIRMED if not run.runs_before and run.runs_after and "JM204" in run.codes
                           else ERROR if not run.runs_after else "")])
    for r in run.rows:
        verdict = r.verdict + (f" (expected to {r.expect})" if r.expect and r.verdict in (CONFIRMED, NOT_CONFIRMED)
                               else "")
        rows.append([r.label, _fmt(r.metric, r.before), _fmt(r.metric, r.after), _per_step(r.metric, r),
                     verdict or ("not comparable" if r.reason == WALL_NOT_COMPARABLE else "information")])
    if run.output_same is not None:
        rows.append(["output (stdout)", "", output_text(run), "-", "information"])
    return rows


def output_text(run: FixRun) -> str:
    if run.output_same is None:
        return "-"
    if run.output_same:
        return "same"
    n_before, n_after = run.output_lines or (0, 0)
    if run.output_subset:
        return f"differs: {n_after} of its {n_before} lines, in order (the rest not printed)"
    if run.output_subset is None:
        return f"differs (compared on the last {OUTPUT_KEPT:,} characters, all a run keeps)"
    return f"differs ({n_before} -> {n_after} lines)"


def format_table(run: FixRun, markdown: bool = False) -> str:
    rows = table_rows(run)
    where = f"on {run.backend or 'an unknown backend'}"
    steps = f", per step over {run.steps} steps of the loop at {run.step_loop}" if run.steps else ""
    reps = f", {run.repeats} runs per side" if run.repeats > 1 else ", one run per side (counts repeat exactly)"
    head = f"Fix measured {where}{reps}{steps}: {run.verdict}"
    notes = [f"{side}: {why}" for side, why in run.errors.items()] + run.notes
    # Why a row a fix should move cannot show it here (beyond "not on this backend").
    notes += [f"{r.label}: {r.reason}" for r in run.rows if r.expect and r.verdict == NOT_MEASURABLE and r.reason
              and not r.reason.startswith("not measurable on ")]
    if markdown:
        out = [f"**{head}**", "", "| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
        out += ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in rows[1:]]
        out += [f"- {n}" for n in notes]
        return "\n".join(out) + "\n"
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = [head]
    for k, r in enumerate(rows):
        out.append("  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
        if k == 0:
            out.append("  " + "  ".join("-" * w for w in widths))
    out += [f"  {n}" for n in notes]
    return "\n".join(out) + "\n"
