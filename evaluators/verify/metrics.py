"""The verifier's metric vocabulary: one registry that manifests, verdicts and reports read.

`measurable_on` is where the signal exists at all (see shared/measurement-notes.md): a metric
outside it is reported as "not measurable on <backend>", never estimated. `noise` says how a
before/after difference is judged: `exact` signals repeat exactly across processes, `rss` needs
a margin, and `info` (wall time) is shown but never decides a verdict.
"""
from __future__ import annotations

MiB = 1 << 20

# A peak-RSS change counts only beyond this, in every repeat (spread seen: <= 16 MiB at 4 GB).
RSS_NOISE_FLOOR = 20 * MiB
RSS_NOISE_FRACTION = 0.05


# The vocabulary itself (names, where measurable, which need an entry point) is the corpus's schema.
from jaxmem.ingest.schema import BACKENDS, EXPECTATIONS, METRICS, Metric  # noqa: E402,F401


def threshold(metric: Metric, before_values: list[float]) -> float:
    """The smallest difference that counts as a change for this metric."""
    if metric.noise == "rss":
        return max(RSS_NOISE_FLOOR, RSS_NOISE_FRACTION * min(before_values))
    return 0.0


def format_value(metric: Metric, value: float | None) -> str:
    if value is None:
        return "-"
    if metric.unit == "bytes":
        for unit, size in (("GiB", 1 << 30), ("MiB", MiB), ("KiB", 1 << 10)):
            if abs(value) >= size:
                return f"{value / size:.1f} {unit}"
        return f"{int(value)} B"
    if metric.unit == "seconds":
        return f"{value:.2f} s"
    if metric.unit == "chars":
        return f"{int(value):,} chars"
    return str(int(value))
