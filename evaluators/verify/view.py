"""What a front end shows of a verification: one view model, so the web app, Slack and the CLI
draw the same rows with the same words (the metric list and its formatting live here once).

    metric_rows(evidence)  -> a row per metric of a card's before/after pair
    script_rows(result)    -> a row per metric of one script run (`verify --script`, review --run)
"""
from __future__ import annotations

from dataclasses import dataclass

from jaxmem.evaluators.verify.metrics import METRICS, format_value
from jaxmem.evaluators.verify.verdicts import ERROR, NOT_MEASURABLE

# The metrics a script run reports, in the order every front end lists them.
# alias_bytes: for a script, the donated bytes its jitted calls consumed and XLA aliased, summed over
# the calls (per device); for a pair, one call of its entry point.
SCRIPT_METRICS = ("h2d_transfers", "implicit_h2d_transfers", "d2h_transfers", "host_syncs",
                  "compile_count", "alias_bytes", "peak_rss", "wall_time")


@dataclass(frozen=True)
class MetricRow:
    label: str
    state: str                  # "measured", "not measurable", "error"
    text: str                   # the row in words: "host->device transfers: 101 -> 1; expected to decrease: confirmed"
    verdict: str = ""
    before: float | None = None
    after: float | None = None
    before_text: str = "-"
    after_text: str = "-"
    expect: str | None = None
    reason: str | None = None


def _fmt(name: str, value: float | None) -> str:
    metric = METRICS.get(name)
    return format_value(metric, value) if metric else ("-" if value is None else str(value))


def metric_rows(evidence) -> list[MetricRow]:
    """Rows for an `Evidence` (records.Evidence): before/after per metric, with its verdict."""
    backend = evidence.backend or "this backend"
    rows = []
    for m in evidence.metrics:
        if m.verdict == NOT_MEASURABLE:
            needs = " or ".join(m.backends or ["another backend"])
            rows.append(MetricRow(m.label, "not measurable", f"{m.label}: not measurable on {backend}; needs {needs}",
                                  verdict=m.verdict, expect=m.expect, reason=m.reason))
        elif m.verdict == ERROR or m.before is None or m.after is None:
            rows.append(MetricRow(m.label, "error", f"{m.label}: {m.reason or 'no measurement'}", verdict=m.verdict,
                                  expect=m.expect, reason=m.reason))
        else:
            before, after = _fmt(m.metric, m.before), _fmt(m.metric, m.after)
            text = f"{m.label}: {before} -> {after}; expected to {m.expect}: {m.verdict}"
            rows.append(MetricRow(m.label, "measured", text + (f" ({m.reason})" if m.reason else ""),
                                  verdict=m.verdict, before=m.before, after=m.after, before_text=before,
                                  after_text=after, expect=m.expect, reason=m.reason))
    return rows


def script_rows(result: dict) -> list[MetricRow]:
    """Rows for one script run's record (absolute counts, no before/after)."""
    rows = []
    tampered = result.get("tampered") or []
    for name in SCRIPT_METRICS:
        value = result.get(name)
        label = METRICS[name].label
        if tampered:
            rows.append(MetricRow(label, "not measurable", f"{label}: not measurable (the code touched what "
                                  f"measures it: {'; '.join(tampered)})"))
        elif value is None:
            why = result.get("alias_error") if name == "alias_bytes" else None
            rows.append(MetricRow(label, "not measurable", f"{label}: {why or 'not measurable on ' + str(result.get('backend'))}"))
        else:
            shown = _fmt(name, value)
            rows.append(MetricRow(label, "measured", f"{label}: {shown}", after=value, after_text=shown))
    return rows
