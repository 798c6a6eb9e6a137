"""What a measured fix (`--fix --run`) is judged on: the verifier's metrics and words, what each
fix should move and where, the record of a measured fix (`Row`, `FixRun`, with its verdict), and
how a metric's value is written.

Separate from `measure.py` (which runs and judges) and `measure_table.py` (which draws the table)
because both read it; the noise rules and words are the verifier's, kept equal by a test.
"""
from __future__ import annotations

from dataclasses import dataclass, field

MiB = 1 << 20
RSS_NOISE_FLOOR = 20 * MiB
RSS_NOISE_FRACTION = 0.05

# A run's record keeps the last 4,000 characters of stdout (evaluators/verify/api.py): longer output is
# compared on its tail only.
OUTPUT_KEPT = 4000

CONFIRMED = "confirmed"
NOT_CONFIRMED = "not confirmed"
NOT_MEASURABLE = "not measurable here"
ERROR = "error"

# The verifier's vocabulary (ingest/schema.py METRICS), for the metrics a script run reports.
METRICS: dict[str, tuple[str, str, str, tuple[str, ...]]] = {   # name -> (label, unit, noise, measurable on)
    "h2d_transfers": ("host->device transfers", "count", "exact", ("cpu", "gpu", "tpu")),
    "implicit_h2d_transfers": ("implicit host->device transfers", "count", "exact", ("cpu", "gpu", "tpu")),
    "d2h_transfers": ("device->host transfers", "count", "exact", ("gpu", "tpu")),
    "host_syncs": ("host sync points", "count", "exact", ("cpu", "gpu", "tpu")),
    "compile_count": ("compilations", "count", "exact", ("cpu", "gpu", "tpu")),
    "alias_bytes": ("donated (aliased) bytes", "bytes", "exact", ("cpu", "gpu", "tpu")),
    "peak_rss": ("peak RSS", "bytes", "rss", ("cpu", "gpu", "tpu")),
    "device_peak_bytes": ("device peak memory", "bytes", "exact", ("gpu", "tpu")),
    "wall_time": ("wall time", "seconds", "info", ("cpu", "gpu", "tpu")),
}
ORDER = tuple(METRICS)

# What each fix should move, where: (metric, expect, backends). A fix's own metric is judged; the
# others are shown for information.
EXPECTED: dict[str, tuple[tuple[str, str, tuple[str, ...]], ...]] = {
    "JM101": (("host_syncs", "decrease", ("cpu", "gpu", "tpu")), ("d2h_transfers", "decrease", ("gpu", "tpu"))),
    "JM102": (("host_syncs", "decrease", ("cpu", "gpu", "tpu")), ("d2h_transfers", "decrease", ("gpu", "tpu"))),
    "JM103": (("host_syncs", "decrease", ("cpu", "gpu", "tpu")), ("d2h_transfers", "decrease", ("gpu", "tpu"))),
    "JM204": (),          # the code runs at all: the "runs" row
    "JM301": (("compile_count", "decrease", ("cpu", "gpu", "tpu")),),
    # Donation took effect (decides), and the memory it should save where the donated bytes could show.
    "JM401": (("alias_bytes", "increase", ("cpu", "gpu", "tpu")), ("peak_rss", "decrease", ("cpu",)),
              ("device_peak_bytes", "decrease", ("gpu", "tpu"))),
    # XLA_PYTHON_CLIENT_* act on GPU memory only; on CPU the move changes nothing measurable.
    "JM601": (("device_peak_bytes", "decrease", ("gpu",)),),
    # The timer now waits for the work (a wait, not a read of a value: no host sync is added).
    "JM701": (),
}
# What a fix with no metric of its own changes, said in the table instead of a verdict.
UNMEASURED = {
    "JM701": "JM701 changes what the timer measures (the time the code prints now includes the work, or no "
             "longer the compilation), which no metric of the verifier holds: compare the printed times",
    "JM601": "JM601's variables act when a backend starts; the XLA_PYTHON_CLIENT_* ones only on GPU",
}


@dataclass
class Row:
    metric: str
    label: str
    before: float | None = None
    after: float | None = None
    per_step_before: float | None = None
    per_step_after: float | None = None
    expect: str | None = None        # "decrease" / "increase" where a fix should move it
    verdict: str = ""                # the verifier's words, "" for information only
    reason: str | None = None
    before_runs: list = field(default_factory=list)
    after_runs: list = field(default_factory=list)

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in ("metric", "label", "before", "after", "per_step_before",
                                              "per_step_after", "expect", "verdict", "reason", "before_runs",
                                              "after_runs")}


@dataclass
class FixRun:
    backend: str | None
    rows: list[Row]
    repeats: int
    steps: int | None = None
    step_loop: str | None = None
    runs_before: bool = True
    runs_after: bool = True
    errors: dict[str, str] = field(default_factory=dict)   # side -> why it did not run
    output_same: bool | None = None                         # stdout identical (None: not compared)
    # Where it is not: whether the fixed run printed a subsequence of the original's lines (what a
    # logging interval does), and how many lines each printed.
    output_subset: bool | None = None
    output_lines: tuple[int, int] | None = None
    codes: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        """The verifier's word for the whole fix: every judged metric moved as expected (or the code
        runs now where it failed before, for a removed API)."""
        if not self.runs_after:
            return ERROR
        if not self.runs_before:
            return CONFIRMED if "JM204" in self.codes else ERROR
        judged = [r.verdict for r in self.rows if r.expect and r.verdict != NOT_MEASURABLE]
        if ERROR in judged:
            return ERROR
        if not judged:
            return NOT_MEASURABLE
        return CONFIRMED if all(v == CONFIRMED for v in judged) else NOT_CONFIRMED

    def to_dict(self) -> dict:
        return {"backend": self.backend, "repeats": self.repeats, "steps": self.steps, "step_loop": self.step_loop,
                "runs_before": self.runs_before, "runs_after": self.runs_after, "errors": self.errors,
                "output_same": self.output_same, "output_subset": self.output_subset,
                "output_lines": self.output_lines, "verdict": self.verdict, "fixes": self.codes, "notes": self.notes,
                "rows": [r.to_dict() for r in self.rows]}


def _fmt(metric: str, value: float | None) -> str:
    if value is None:
        return "-"
    unit = METRICS[metric][1]
    if unit == "bytes":
        for name, size in (("GiB", 1 << 30), ("MiB", MiB), ("KiB", 1 << 10)):
            if abs(value) >= size:
                return f"{value / size:.1f} {name}"
        return f"{int(value)} B"
    if unit == "seconds":
        return f"{value:.2f} s"
    return f"{value:g}" if value != int(value) else str(int(value))
