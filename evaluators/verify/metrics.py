"""The verifier's metric vocabulary: one registry that manifests, verdicts and reports read.

`measurable_on` is where the signal exists at all (see shared/measurement-notes.md): a metric
outside it is reported as "not measurable on <backend>", never estimated. `noise` says how a
before/after difference is judged: `exact` signals repeat exactly across processes, `rss` needs
a margin, and `info` (wall time) is shown but never decides a verdict.
"""
from __future__ import annotations

from dataclasses import dataclass

BACKENDS = ("cpu", "gpu", "tpu")
MiB = 1 << 20

# A peak-RSS change counts only beyond this, in every repeat (spread seen: <= 16 MiB at 4 GB).
RSS_NOISE_FLOOR = 20 * MiB
RSS_NOISE_FRACTION = 0.05


@dataclass(frozen=True)
class Metric:
    name: str
    label: str                 # words for summaries: "host->device transfers"
    unit: str                  # "count", "bytes", "chars", "seconds"
    measurable_on: tuple[str, ...] = BACKENDS
    noise: str = "exact"       # "exact", "rss" or "info"
    needs_entry: bool = False  # read from memory_analysis of the manifest's entry point


METRICS: dict[str, Metric] = {m.name: m for m in (
    Metric("h2d_transfers", "host->device transfers", "count"),
    Metric("implicit_h2d_transfers", "implicit host->device transfers", "count"),
    Metric("host_syncs", "host sync points", "count"),
    Metric("compile_count", "compilations", "count"),
    Metric("temp_bytes", "compiled temp memory", "bytes", needs_entry=True),
    Metric("argument_bytes", "compiled argument memory", "bytes", needs_entry=True),
    Metric("output_bytes", "compiled output memory", "bytes", needs_entry=True),
    Metric("alias_bytes", "donated (aliased) bytes", "bytes", needs_entry=True),
    Metric("hlo_chars", "compiled program size", "chars", needs_entry=True),
    Metric("per_device_bytes", "largest per-device live memory", "bytes"),
    Metric("live_bytes", "live array memory at exit", "bytes"),
    Metric("peak_rss", "peak RSS", "bytes", noise="rss"),
    Metric("wall_time", "wall time", "seconds", noise="info"),
    Metric("device_peak_bytes", "device peak memory", "bytes", measurable_on=("gpu", "tpu")),
    Metric("device_reserved_bytes", "device memory reserved", "bytes", measurable_on=("gpu", "tpu")),
    # The transfer guard never fires for device->host on CPU: fetching from CPU is always allowed.
    Metric("d2h_transfers", "device->host transfers", "count", measurable_on=("gpu", "tpu")),
)}

EXPECTATIONS = ("increase", "decrease")


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
